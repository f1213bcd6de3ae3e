"""The Python module's argument checking (issue 19, class 7): an integer that the C type it reaches cannot hold
(ctypes would wrap 2**64 + 64 to 64 and 2**32 + 1 to 1), one outside its plan field's range, a fraction where an
integer is expected, and a string with an embedded NUL (a C string ends there: "llama-3-8b\\0x" would be
"llama-3-8b") raise ValueError naming the argument, for every public function; nothing reaches the library.
Run by tests/sh_python.sh, which prints TAP lines. Usage: python3 tests/python/test_args.py BIN"""

import inspect
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_autopar import Tap, autopar  # noqa: E402  (the TAP printer, and the module from python/)

EST = dict(model="gpt2", cluster="h100:8", gbs=8, seq=1024)


class Args(unittest.TestCase):
    def refused(self, name, call):
        with self.assertRaises(ValueError) as cm:
            call()
        self.assertTrue(str(cm.exception).startswith(name + ":") or str(cm.exception).startswith("keyword"),
                        "%r does not name %s" % (str(cm.exception), name))

    def test_integers_that_would_wrap(self):
        self.refused("gbs", lambda: autopar.plan("gpt2", "h100:8", gbs=2 ** 64 + 64))
        self.refused("top", lambda: autopar.plan("gpt2", "h100:8", 8, top=2 ** 32 + 1))
        self.refused("seq", lambda: autopar.plan("gpt2", "h100:8", 8, seq=2 ** 63))
        self.refused("seq", lambda: autopar.describe("gpt2", seq=2 ** 64 + 1024))
        self.refused("gbs", lambda: autopar.compare_clusters("gpt2", "h100:8", gbs=2 ** 64 + 8))
        self.refused("tp", lambda: autopar.estimate(tp=2 ** 64 + 2, **EST))
        self.refused("stage_layers[0]", lambda: autopar.estimate(stage_layers=[2 ** 64, 1], **EST))

    def test_integers_outside_their_field(self):
        self.refused("gbs", lambda: autopar.estimate(model="gpt2", cluster="h100:8", gbs=-8))
        self.refused("seq", lambda: autopar.describe("gpt2", seq=-1))
        self.refused("tp", lambda: autopar.estimate(tp=-1, **EST))
        self.refused("mbs", lambda: autopar.plan("gpt2", "h100:8", 8, mbs=2 ** 40 + 1))

    def test_fractions_for_integers(self):
        self.refused("gbs", lambda: autopar.plan("gpt2", "h100:8", 8.5))
        self.refused("tp", lambda: autopar.estimate(tp=2.5, **EST))
        self.assertEqual(autopar.estimate(model="gpt2", cluster="h100:8", gbs=8.0, seq=1024.0),
                         autopar.estimate(**EST))  # an integral float is that integer

    def test_count_strings(self):
        # seq="8k" is 8192 as --seq 8k is (a context length counts in 2^10); other fields count in 10^3
        self.assertEqual(autopar.estimate(**dict(EST, seq="1k")), autopar.estimate(**EST))
        self.assertEqual(autopar.describe("gpt2", seq="8k"), autopar.describe("gpt2", seq=8192))
        self.assertEqual(autopar.estimate(**dict(EST, gbs="8", tp="2")), autopar.estimate(**dict(EST, tp=2)))
        self.refused("seq", lambda: autopar.describe("gpt2", seq="8x"))
        self.refused("gbs", lambda: autopar.estimate(**dict(EST, gbs="-8")))
        self.refused("seq", lambda: autopar.describe("gpt2", seq="9999999999G"))

    def test_embedded_nul(self):
        est = autopar.estimate(**EST)
        self.refused("model", lambda: autopar.describe("llama-3-8b\0x"))
        self.refused("cluster", lambda: autopar.estimate(model="gpt2", cluster="h100:8\0x", gbs=8))
        self.refused("recompute", lambda: autopar.estimate(recompute="full\0x", **EST))
        self.refused("keyword", lambda: autopar.estimate(**dict(EST, **{"tp\0x": 2})))
        self.refused("objective", lambda: autopar.plan("gpt2", "h100:8", 8, objective="throughput\0x"))
        self.refused("strategy[1]", lambda: autopar.plan("gpt2", "h100:8", 8, strategy=["grid", "stage-dp\0"]))
        self.refused("trace", lambda: autopar.simulate(trace="/tmp/t\0.json", **EST))
        self.refused("csv", lambda: autopar.validate("runs\0.csv"))
        self.refused("plan", lambda: autopar.export("p\0.json", "megatron"))
        self.refused("format", lambda: autopar.export("data/plans/llama-3-70b-64xh100.json", "megatron\0x"))
        self.refused("spec", lambda: autopar.cluster("h100:8\0x"))
        self.refused("path", lambda: autopar.report_html("/tmp/r\0.html", estimate=est))
        self.refused("title", lambda: autopar.report_html("/tmp/r.html", title="a\0b", estimate=est))
        self.refused("tokens", lambda: autopar.train(est, "1T\0x"))
        self.refused("calibration", lambda: autopar.estimate(calibration="c\0.json", **EST))

    def test_every_public_function_is_checked(self):
        names = set(autopar.__all__) | {"train"}
        for name in sorted(names):
            f = getattr(autopar, name)
            if inspect.isfunction(f) and inspect.signature(f).parameters:
                self.assertTrue(getattr(f, "_checked", False), "autopar.%s does not check its arguments" % name)


if __name__ == "__main__":
    Tap.n = int(os.environ.get("TAP_FIRST", "0"))
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(Args)
    r = unittest.TextTestRunner(resultclass=Tap, stream=open(os.devnull, "w")).run(suite)
    sys.exit(0 if r.wasSuccessful() else 1)
