/* libFuzzer target for the HTML report's reader (ap_report_html, src/report/html_api.c and html.c): the
 * documents a host hands over, as the commands print them with --json. The first byte says which of the four
 * inputs are present (bit 0 estimate, 1 search, 2 trace, 3 validate; none present is a call that must fail);
 * the rest holds them in that order, separated by NUL bytes. The page goes to a file in /dev/shm (memory) when
 * there is one, else /tmp: a call that succeeds must leave a page starting "<!DOCTYPE html>", one that fails
 * a one-line message and no file. Seeds: fuzz/seeds/report_html/.
 * FUZZ_MAX_LEN: 4096 (fuzz-long: the cost of an input grows with its documents; 16384 ran at a third of the rate.
 * The seeds are small documents: a search with 4 entries of its space, a trace of 12 events) */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autopar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char out_path[64];

static void remove_page(void) { remove(out_path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if (!out_path[0]) {
    snprintf(out_path, sizeof out_path, "%s/fuzz_report_html.%ld.html",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
    atexit(remove_page);
  }
  char *text = malloc(size);
  ap_ctx *ctx = ap_ctx_new();
  if (!text || !ctx) goto done;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  const char *doc[4] = {NULL, NULL, NULL, NULL};
  char *p = text, *end = text + size - 1;
  for (int i = 0; i < 4; i++) {
    if (!(data[0] >> i & 1)) continue;
    doc[i] = p;
    p += strlen(p);
    if (p < end) p++;
  }
  ap_report_inputs in = {"fuzz", "autopar fuzz", doc[0], doc[1], doc[2], doc[3]};
  remove(out_path);
  if (ap_report_html(ctx, &in, out_path) == AP_OK) {
    FILE *f = fopen(out_path, "rb");
    char head[16] = {0};
    if (!f || fread(head, 1, 15, f) != 15 || strcmp(head, "<!DOCTYPE html>") != 0) __builtin_trap();
    fclose(f);
  } else {
    if (!*ap_ctx_error(ctx) || strchr(ap_ctx_error(ctx), '\n')) __builtin_trap();
    if (access(out_path, F_OK) == 0) __builtin_trap(); /* no partial file */
  }
done:
  ap_ctx_free(ctx);
  free(text);
  return 0;
}
