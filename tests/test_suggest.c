/* util_suggest (src/core/util.c), the "did you mean" of every unknown key and name: it skips a candidate whose
 * length differs from the name's by more than the closeness limit (the edit distance is at least that gap),
 * found as the cost of fuzz_fix's long unknown keys. A differential test: over typos, exact names, names
 * containing a candidate and long junk, its answer must equal that of the plain method, which computes every
 * distance (a reference copy of the ranking kept here). */
#include <stdlib.h>

#include "testutil.h"

#include "core/core.h"

/* The plain method: every distance computed, the three closest within strlen(name) / 2 + 2 kept. */
static void suggest_all(const char *name, const char *const *cand, size_t n, char *out, size_t out_n) {
  size_t best[3] = {(size_t)-1, (size_t)-1, (size_t)-1}, idx[3] = {0, 0, 0};
  for (size_t i = 0; i < n; i++) {
    size_t d = util_edit_distance(name, cand[i]);
    if (strstr(cand[i], name) || strstr(name, cand[i])) d = d < 2 ? d : 2;
    for (size_t k = 0; k < 3; k++)
      if (d < best[k]) {
        for (size_t m = 2; m > k; m--) best[m] = best[m - 1], idx[m] = idx[m - 1];
        best[k] = d, idx[k] = i;
        break;
      }
  }
  out[0] = '\0';
  size_t limit = strlen(name) / 2 + 2;
  for (size_t k = 0; k < 3 && best[k] != (size_t)-1 && best[k] <= limit; k++) {
    size_t len = strlen(out);
    snprintf(out + len, out_n - len, "%s%s", k ? ", " : "", cand[idx[k]]);
  }
}

static void test_suggest_matches_plain_method(void **s) {
  (void)s;
  static const char *const cand[] = {"tp",       "pp",        "dp",   "cp",       "ep",     "vpp",  "mbs",
                                     "gbs",      "schedule",  "zero", "recompute", "order", "sequence_parallel",
                                     "offload",  "num_layers", "x",   "hidden_size", "moe_ffn_hidden_size"};
  const size_t n = sizeof cand / sizeof cand[0];
  const char *names[] = {"tp", "t", "tpp", "shedule", "recompte", "hidden", "hiden_size", "sequence-parallel", "TP",
                         "", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                         "num_layers_and_more_text_after_it", "a_very_long_key_that_contains_schedule_inside"};
  char a[256], b[256], junk[200];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    util_suggest(names[i], cand, n, a, sizeof a);
    suggest_all(names[i], cand, n, b, sizeof b);
    if (strcmp(a, b) != 0) fail_msg("\"%s\": \"%s\" against \"%s\"", names[i], a, b);
  }
  /* pseudo-random names of every length up to 150 (past the distance's 128-character cap too) */
  uint64_t x = 12345;
  for (int len = 0; len < 150; len++)
    for (int rep = 0; rep < 4; rep++) {
      for (int k = 0; k < len; k++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        junk[k] = "tpdcevmbgsholzrqnuaix_"[(x >> 33) % 22];
      }
      junk[len] = '\0';
      util_suggest(junk, cand, n, a, sizeof a);
      suggest_all(junk, cand, n, b, sizeof b);
      if (strcmp(a, b) != 0) fail_msg("\"%s\": \"%s\" against \"%s\"", junk, a, b);
    }
  util_suggest("shedule", cand, n, a, sizeof a);
  assert_string_equal(a, "schedule");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_suggest_matches_plain_method)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
