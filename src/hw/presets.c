/* The device and cluster presets compiled into the library (the .json files under data/devices/ and data/clusters/):
 * lookup by name or alias and "did you mean" suggestions. A preset is found by reading the "name" and
 * "aliases" of each embedded file (a file whose text lacks the quoted name is skipped unparsed); there are a
 * few dozen small files, so no index is kept and nothing here holds state between calls. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "hw/hw_json.h"

static const char *const kind_dirs[] = {
    [HW_PRESET_DEVICE] = "data/devices/",
    [HW_PRESET_CLUSTER] = "data/clusters/",
};
_Static_assert(AP_COUNT(kind_dirs) == HW_PRESET_KIND_COUNT, "preset folder table and kinds disagree");

/* Enough for every name and alias of every preset. */
enum { MAX_CANDIDATES = 512 };

bool hw_preset_is(const embedded_file *f, hw_preset_kind kind) {
  const char *dir = kind_dirs[kind];
  return strncmp(f->path, dir, strlen(dir)) == 0 && util_ends_with(f->path, ".json");
}

/* Parses a preset quietly: a preset that does not parse is simply not found here (the tests load every
 * preset through the strict reader, so such a file cannot ship). The caller frees the result. */
static json_t *load_quiet(const embedded_file *f) {
  return mem_json_loadb(f->text, f->n_bytes, JSON_REJECT_DUPLICATES, NULL); /* json_loadb (core/alloc.h) */
}

static bool matches(json_t *root, const char *name) {
  const char *own = json_string_value(json_object_get(root, "name"));
  if (own && strcasecmp(own, name) == 0) return true;
  size_t i;
  json_t *a;
  json_array_foreach(json_object_get(root, "aliases"), i, a) {
    const char *alias = json_string_value(a);
    if (alias && strcasecmp(alias, name) == 0) return true;
  }
  return false;
}

/* The character before text[i], skipping blanks, and its index (-1 when none). */
static long prev_token(const char *text, long i) {
  while (--i >= 0 && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) {
  }
  return i;
}

/* Whether the key that ends just before text[i] (at a ':') is `"key"`. */
static bool key_before(const char *text, long i, const char *key) {
  size_t n = strlen(key);
  long q = prev_token(text, i);
  return q >= (long)n + 1 && text[q] == '"' && strncmp(text + q - (long)n, key, n) == 0 && text[q - (long)n - 1] == '"';
}

/* Whether the file's text could hold name as its "name" or one of its "aliases": the quoted name appears as
 * the value of a "name" key or inside an "aliases" array (case-insensitively), or the text has an escape
 * (then only parsing can tell). An exact filter (it never skips a file that holds the name), so that a lookup
 * parses one or two presets instead of all of them twice (2 ms per shorthand before). */
static bool may_hold(const embedded_file *f, const char *name) {
  size_t n = strlen(name);
  const char *t = f->text;
  if (n == 0 || memchr(t, '\\', f->n_bytes)) return true;
  for (const char *p = t; (p = memchr(p, '"', f->n_bytes - (size_t)(p - t))) != NULL; p++) {
    size_t left = f->n_bytes - (size_t)(p - t);
    if (left < n + 2 || strncasecmp(p + 1, name, n) != 0 || p[n + 1] != '"') continue;
    long q = prev_token(t, (long)(p - t));
    if (q >= 0 && t[q] == ':' && key_before(t, q, "name")) return true;
    if (q >= 0 && (t[q] == '[' || t[q] == ',')) {
      long open = q;
      while (open >= 0 && t[open] != '[' && t[open] != ']' && t[open] != '{' && t[open] != '}') open--;
      if (open >= 0 && t[open] == '[') {
        long colon = prev_token(t, open);
        if (colon >= 0 && t[colon] == ':' && key_before(t, colon, "aliases")) return true;
      }
    }
  }
  return false;
}

const embedded_file *hw_preset_find(hw_preset_kind kind, const char *name) {
  size_t n = 0;
  const embedded_file *files = embedded_files(&n);
  /* Canonical names win over aliases, so that an alias can never shadow another preset's name. */
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < n; i++) {
      if (!hw_preset_is(&files[i], kind) || !may_hold(&files[i], name)) continue;
      json_t *root = load_quiet(&files[i]);
      const char *own = json_string_value(json_object_get(root, "name"));
      bool hit = pass == 0 ? (own && strcasecmp(own, name) == 0) : matches(root, name);
      json_decref(root);
      if (hit) return &files[i];
    }
  }
  return NULL;
}

void hw_preset_name(const embedded_file *f, char *out, size_t cap) {
  json_t *root = load_quiet(f);
  const char *own = json_string_value(json_object_get(root, "name"));
  snprintf(out, cap, "%s", own ? own : "");
  json_decref(root);
}

/* Adds a candidate unless it is already there (a device and its default cluster may share a name). */
static void add_candidate(char (*names)[HW_NAME_MAX], size_t *n, const char *name) {
  if (!name || *n >= MAX_CANDIDATES) return;
  for (size_t i = 0; i < *n; i++)
    if (strcasecmp(names[i], name) == 0) return;
  snprintf(names[(*n)++], HW_NAME_MAX, "%s", name);
}

void hw_preset_suggest(const char *name, bool devices, bool clusters, char *out, size_t cap) {
  char names[MAX_CANDIDATES][HW_NAME_MAX];
  const char *ptrs[MAX_CANDIDATES];
  size_t n_names = 0, n_files = 0;
  const embedded_file *files = embedded_files(&n_files);
  for (size_t i = 0; i < n_files; i++) {
    bool want = (devices && hw_preset_is(&files[i], HW_PRESET_DEVICE)) ||
                (clusters && hw_preset_is(&files[i], HW_PRESET_CLUSTER));
    if (!want) continue;
    json_t *root = load_quiet(&files[i]);
    add_candidate(names, &n_names, json_string_value(json_object_get(root, "name")));
    size_t k;
    json_t *a;
    json_array_foreach(json_object_get(root, "aliases"), k, a) add_candidate(names, &n_names, json_string_value(a));
    json_decref(root);
  }
  for (size_t i = 0; i < n_names; i++) ptrs[i] = names[i];
  util_suggest(name, ptrs, n_names, out, cap);
}

bool hw_chip_info(const char *chip, char *family, size_t family_n, char *vendor, size_t vendor_n, double *bf16_peak) {
  if (family_n) family[0] = '\0';
  if (vendor && vendor_n) vendor[0] = '\0';
  *bf16_peak = 0;
  if (!chip || !*chip) return false;
  size_t n;
  const embedded_file *files = embedded_files(&n);
  for (size_t i = 0; i < n; i++) {
    if (!hw_preset_is(&files[i], HW_PRESET_DEVICE) || !strstr(files[i].text, chip)) continue;
    json_t *root = load_quiet(&files[i]);
    const char *own = json_string_value(json_object_get(root, "chip"));
    bool hit = own && strcmp(own, chip) == 0;
    if (hit) {
      const char *fam = json_string_value(json_object_get(root, "family"));
      snprintf(family, family_n, "%s", fam ? fam : "");
      const char *ven = json_string_value(json_object_get(root, "vendor"));
      if (vendor && vendor_n) snprintf(vendor, vendor_n, "%s", ven ? ven : "");
      *bf16_peak = json_number_value(json_object_get(json_object_get(root, "peak_flop_per_s"), "bf16"));
    }
    json_decref(root);
    if (hit) return true;
  }
  return false;
}
