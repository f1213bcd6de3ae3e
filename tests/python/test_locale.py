"""The Python module under a host locale with a decimal comma (issue 19, class 8): after
locale.setlocale(locale.LC_ALL, "de_DE.UTF-8") every call returns what it returns under "C" (documents parsed
from the library's JSON, texts, numbers read such as tokens="2.5e11"), and the host's locale is still its own
afterwards. Run by tests/sh_locale.sh, which prints TAP lines. Usage: python3 tests/python/test_locale.py [BIN]"""

import locale
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_autopar import Tap, autopar  # noqa: E402  (the TAP printer, and the module from python/)


def without_timing(doc):
    if isinstance(doc, dict) and isinstance(doc.get("search"), dict):
        doc = dict(doc, search={k: v for k, v in doc["search"].items() if k not in ("elapsed_s", "plans_per_s")})
    return doc


def calls():
    est = autopar.estimate("gpt2", "h100:8", gbs=8, seq=1024, tp=2)
    return [
        est,
        autopar.estimate("gpt2", "h100:8", gbs=8, seq=1024, tp=2, _text=True),
        without_timing(autopar.plan("llama-3-8b", "h100:16", 128, seq=4096, top=2, max_mem_fraction=0.75)),
        autopar.train(est, "2.5e11", price_per_gpu_hour=2.5),
        autopar.train(est, 2.5e11, price_per_gpu_hour=2.5, text=True),
        autopar.describe("llama-3-70b"),
        autopar.cluster("dgx-h100:2x8"),
    ]


class Locale(unittest.TestCase):
    def test_same_under_comma_locale(self):
        locale.setlocale(locale.LC_ALL, "C")
        in_c = calls()
        for name in ("de_DE.UTF-8", "de_DE.utf8"):
            try:
                locale.setlocale(locale.LC_ALL, name)
                break
            except locale.Error:
                continue
        else:
            self.skipTest("no de_DE.UTF-8 locale on this machine (scripts/deps.sh generates it as root)")
        try:
            self.assertEqual(locale.localeconv()["decimal_point"], ",")
            in_de = calls()
            self.assertEqual(locale.localeconv()["decimal_point"], ",", "the host's locale was not restored")
            for i, (a, b) in enumerate(zip(in_c, in_de)):
                self.assertEqual(a, b, "call %d differs under de_DE.UTF-8" % i)
        finally:
            locale.setlocale(locale.LC_ALL, "C")


if __name__ == "__main__":
    Tap.n = int(os.environ.get("TAP_FIRST", "0"))
    r = unittest.TextTestRunner(resultclass=Tap, stream=open(os.devnull, "w")).run(
        unittest.defaultTestLoader.loadTestsFromTestCase(Locale))
    sys.exit(0 if r.wasSuccessful() else 1)
