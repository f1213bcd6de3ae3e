/* Where a --model that is not a preset lives on disk (model layer; model.c's ap_model_load): a file; a folder
 * holding a config.json (a downloaded Hugging Face snapshot, `huggingface-cli download ORG/NAME` or
 * `git clone`); or a Hugging Face model id ORG/NAME, read from the Hugging Face cache when it is there.
 *
 * The cache layout is huggingface_hub's (docs: "Understand caching", guides/manage-cache; "Environment
 * variables", package_reference/environment_variables): the cache folder is $HF_HUB_CACHE, else $HF_HOME/hub,
 * else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub; a model repository ORG/NAME is the folder
 * models--ORG--NAME in it, whose snapshots/REVISION/ folders hold the files and whose refs/main names the
 * revision of the main branch. The main branch's snapshot is read, else the only one, else the one modified
 * last. An id not on disk gets one line saying where to put its config.json. */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/model.h"

/* snprintf that says whether the whole path fitted (a path longer than the buffer is one not found). */
static bool AP_PRINTF(3, 4) path_of(char *out, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(out, n, fmt, ap);
  va_end(ap);
  return k >= 0 && (size_t)k < n;
}

static bool is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}
static bool is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* ORG/NAME: one slash between two names of letters, digits and - _ . (the Hub's repository names), neither
 * starting with a dot, and not a file name (.json, .onnx). */
bool model_is_hf_id(const char *spec) {
  const char *slash = strchr(spec, '/');
  if (!slash || slash == spec || !slash[1] || strchr(slash + 1, '/')) return false;
  if (spec[0] == '.' || slash[1] == '.' || util_ends_with(spec, ".json") || util_ends_with(spec, ".onnx")) return false;
  for (const char *c = spec; *c; c++)
    if (c != slash && !((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
                        *c == '_' || *c == '.'))
      return false;
  return true;
}

void model_hf_cache_dir(char *out, size_t n) {
  const char *hub = getenv("HF_HUB_CACHE"), *home = getenv("HF_HOME"), *xdg = getenv("XDG_CACHE_HOME");
  const char *user = getenv("HOME");
  if (hub && *hub) snprintf(out, n, "%s", hub);
  else if (home && *home) snprintf(out, n, "%s/hub", home);
  else if (xdg && *xdg) snprintf(out, n, "%s/huggingface/hub", xdg);
  else snprintf(out, n, "%s/.cache/huggingface/hub", user && *user ? user : "~");
}

/* The snapshot folder of repository folder repo holding a config.json: refs/main's revision, else the only
 * (or the last modified) snapshot with one; false when none. */
static bool hf_snapshot(const char *repo, char *out, size_t n) {
  char path[4096], rev[256] = "";
  FILE *f = path_of(path, sizeof path, "%s/refs/main", repo) ? fopen(path, "r") : NULL;
  if (f) {
    if (!fgets(rev, sizeof rev, f)) rev[0] = '\0';
    fclose(f);
    rev[strcspn(rev, "\r\n")] = '\0';
  }
  if (rev[0] && !strchr(rev, '/') && path_of(out, n, "%s/snapshots/%s", repo, rev) &&
      path_of(path, sizeof path, "%s/config.json", out) && is_file(path))
    return true;
  DIR *d = path_of(path, sizeof path, "%s/snapshots", repo) ? opendir(path) : NULL;
  if (!d) return false;
  struct dirent *e;
  double newest = -1;
  bool found = false;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char cfg[4096];
    struct stat st;
    if (!path_of(cfg, sizeof cfg, "%s/%s/config.json", path, e->d_name) || stat(cfg, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    if ((double)st.st_mtime > newest && path_of(out, n, "%s/%s", path, e->d_name)) {
      newest = (double)st.st_mtime;
      found = true;
    }
  }
  closedir(d);
  return found;
}

ap_status model_find_file(ap_ctx *ctx, const char *spec, const char *suggest, char *out, size_t n) {
  if (is_dir(spec)) {
    if (path_of(out, n, "%s/config.json", spec) && is_file(out)) return AP_OK;
    return ctx_fail(ctx, AP_NOTFOUND, "--model %s: a folder without a config.json (a Hugging Face model's folder, "
                    "as huggingface-cli download or git clone leave it, holds one)", spec);
  }
  if (is_file(spec) || !model_is_hf_id(spec)) {
    if (!path_of(out, n, "%s", spec)) return ctx_fail(ctx, AP_INVALID, "--model: a path of more than %zu bytes", n - 1);
    return AP_OK; /* the reader says what is wrong with it, or that it does not exist */
  }
  char cache[2048], repo[4096], snap[4096];
  model_hf_cache_dir(cache, sizeof cache);
  if (!path_of(repo, sizeof repo, "%s/models--%s", cache, spec)) return ctx_fail(ctx, AP_INVALID, "--model %s: the cache path is too long", spec);
  char *slash = strchr(repo + strlen(cache) + strlen("/models--"), '/');
  if (slash) {
    /* "/" of the id becomes "--" in the folder name. */
    memmove(slash + 2, slash + 1, strlen(slash + 1) + 1);
    slash[0] = slash[1] = '-';
  }
  if (hf_snapshot(repo, snap, sizeof snap) && path_of(out, n, "%s/config.json", snap)) return AP_OK;
  return ctx_fail(ctx, AP_NOTFOUND,
                  "--model %s: not a file, and not in the Hugging Face cache: put its config.json at "
                  "%s/snapshots/main/config.json (huggingface-cli download %s config.json), or give the path of a "
                  "config.json or of its folder%s%s",
                  spec, repo, spec, suggest && *suggest ? "; closest presets: " : "", suggest ? suggest : "");
}

void model_name_of_file(const char *file, char *out, size_t n) {
  const char *base = util_basename(file);
  snprintf(out, n, "%s", base);
  if (util_ends_with(out, ".json")) out[strlen(out) - 5] = '\0';
  if (strcmp(base, "config.json") != 0 || base == file) return;
  /* A folder's config.json is named by the folder, a cached snapshot's (models--ORG--NAME/snapshots/REV/) by
   * its repository, ORG/NAME. */
  const char *snap = strstr(file, "/snapshots/"), *repo = NULL;
  for (const char *q = file; snap && (q = strstr(q, "models--")) && q < snap; q++) repo = q;
  if (repo) {
    const char *sep = strstr(repo + 8, "--");
    if (sep && sep < snap) {
      snprintf(out, n, "%.*s/%.*s", (int)(sep - repo - 8), repo + 8, (int)(snap - sep - 2), sep + 2);
      return;
    }
  }
  size_t dir_end = (size_t)(base - file) - 1, dir_start = dir_end;
  while (dir_start > 0 && file[dir_start - 1] != '/') dir_start--;
  if (dir_end > dir_start) snprintf(out, n, "%.*s", (int)(dir_end - dir_start), file + dir_start);
}
