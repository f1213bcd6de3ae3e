"""The Python module against the CLI: each call returns the same document as `autopar COMMAND --json` on the
README's examples, errors raise autopar.Error with the CLI's one-line message, and `python3 -m autopar`
mirrors the CLI's exit status. Run by tests/sh_python.sh (make test), which prints TAP lines.
Usage: python3 tests/python/test_autopar.py BIN"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import autopar  # noqa: E402

BIN = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "bin", "autopar"))


def same(doc):
    """A search document without its wall-clock figures (elapsed_s, plans_per_s), which differ run to run."""
    if isinstance(doc, dict) and isinstance(doc.get("search"), dict):
        doc = dict(doc, search={k: v for k, v in doc["search"].items() if k not in ("elapsed_s", "plans_per_s")})
    return doc


def cli_json(*args):
    out = subprocess.run([BIN, *args, "--json"], cwd=ROOT, capture_output=True, text=True)
    return out.returncode, json.loads(out.stdout) if out.stdout.strip() else None, out.stderr.strip()


class SameAsCli(unittest.TestCase):
    def test_describe(self):
        rc, doc, _ = cli_json("describe", "--model", "llama-3-70b")
        self.assertEqual(rc, 0)
        self.assertEqual(autopar.describe("llama-3-70b"), doc)

    def test_estimate(self):
        rc, doc, _ = cli_json("estimate", "--model", "gpt2", "--cluster", "h100:8", "--gbs", "8", "--seq", "1024",
                              "--tp", "2", "--recompute", "selective")
        self.assertEqual(rc, 0)
        self.assertEqual(autopar.estimate("gpt2", "h100:8", gbs=8, seq=1024, tp=2, recompute="selective"), doc)

    def test_plan_readme_example(self):
        rc, doc, _ = cli_json("plan", "--model", "llama-3-70b", "--cluster", "dgx-h100:8x8", "--gbs", "1024",
                              "--seq", "8192")
        self.assertEqual(rc, 0)
        self.assertEqual(same(autopar.plan(model="llama-3-70b", cluster="dgx-h100:8x8", gbs=1024, seq=8192)), same(doc))

    def test_plan_fixed_fields(self):
        rc, doc, _ = cli_json("plan", "--model", "llama-3-8b", "--cluster", "h100:16", "--gbs", "128", "--seq",
                              "4096", "--fix", "tp=2,recompute=none", "--top", "2")
        self.assertEqual(rc, 0)
        self.assertEqual(same(autopar.plan("llama-3-8b", "h100:16", 128, seq=4096, top=2, tp=2, recompute="none")),
                         same(doc))

    def test_validate(self):
        csv = os.path.join(ROOT, "..", "shared", "reference", "runs.csv")
        if not os.path.exists(csv):
            self.skipTest("../shared/reference/runs.csv is not beside the checkout")
        rc, doc, _ = cli_json("validate", csv)
        self.assertEqual(rc, 0)
        self.assertEqual(autopar.validate(csv), doc)

    def test_models_and_clusters(self):
        self.assertEqual(autopar.models(), cli_json("models")[1])
        self.assertEqual(autopar.clusters(), cli_json("clusters")[1])
        self.assertEqual(autopar.cluster("dgx-h100:2x8"), cli_json("clusters", "--show", "dgx-h100:2x8")[1])

    def test_export(self):
        with tempfile.TemporaryDirectory() as d:
            plan = os.path.join(d, "p.json")
            best = autopar.plan("llama-3-8b", "h100:8", 64, seq=4096, export="json")
            rc = subprocess.run([BIN, "plan", "--model", "llama-3-8b", "--cluster", "h100:8", "--gbs", "64", "--seq",
                                 "4096", "--export", "json", "-o", plan], cwd=ROOT, capture_output=True).returncode
            self.assertEqual(rc, 0)
            self.assertIn("format", best)
            cli = subprocess.run([BIN, "export", "--plan", plan, "--format", "megatron"], cwd=ROOT,
                                 capture_output=True, text=True)
            self.assertEqual(cli.returncode, 0, cli.stderr)
            self.assertEqual(autopar.export(plan, "megatron"), cli.stdout)

    def test_graph_plan_file(self):
        # An op-level plan (autopar-plan/2) read back: estimate, simulate and export as the CLI does them.
        model = "examples/onnx/resnet50.onnx"
        with tempfile.TemporaryDirectory() as d:
            plan = os.path.join(d, "p.json")
            out = subprocess.run([BIN, "plan", "--model", model, "--cluster", "h100:8", "--gbs", "32", "--strategy",
                                  "greedy", "--json"], cwd=ROOT, capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            with open(plan, "w") as f:
                f.write(out.stdout)
            written = json.loads(out.stdout)
            rc, doc, err = cli_json("estimate", "--model", model, "--cluster", "h100:8", "--plan", plan)
            self.assertEqual(rc, 0, err)
            self.assertEqual(autopar.estimate(model, "h100:8", plan=plan), doc)
            self.assertEqual(doc["time"], written["time"])
            rc, sim, err = cli_json("simulate", "--model", model, "--cluster", "h100:8", "--plan", plan)
            self.assertEqual(rc, 0, err)
            self.assertEqual(autopar.simulate(model, "h100:8", None, plan=plan), sim)
            self.assertEqual(autopar.export(plan, "json", model=model), out.stdout)
            with self.assertRaises(autopar.Error) as e:
                autopar.estimate(model, "h100:8", plan=plan, tp=2)
            self.assertEqual(e.exception.status, autopar.INVALID)
            # A pipeline of several stages on submeshes (the inter-op pass on 4 nodes) reads back the same way.
            out = subprocess.run([BIN, "plan", "--model", model, "--cluster", "dgx-h100:4x8", "--gbs", "256",
                                  "--strategy", "greedy,inter-op", "--json"], cwd=ROOT, capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            with open(plan, "w") as f:
                f.write(out.stdout)
            written = json.loads(out.stdout)
            self.assertGreater(len(written["stages"]), 1)
            doc = autopar.estimate(model, "dgx-h100:4x8", plan=plan)
            self.assertEqual((doc["time"], doc["stages"]), (written["time"], written["stages"]))
            sim = autopar.simulate(model, "dgx-h100:4x8", None, plan=plan)
            self.assertEqual(len(sim["stages"]), len(written["stages"]))
            # The pipeline's timeline as a trace, as simulate --trace writes it.
            tr = os.path.join(d, "t.json")
            rc, cli_sim, err = cli_json("simulate", "--model", model, "--cluster", "dgx-h100:4x8", "--plan", plan,
                                        "--trace", tr)
            self.assertEqual(rc, 0, err)
            os.remove(tr)
            self.assertEqual(autopar.simulate(model, "dgx-h100:4x8", tr, plan=plan), cli_sim)
            with open(tr) as f:
                trace = json.load(f)
            self.assertEqual(sum(e["ph"] == "X" for e in trace["traceEvents"]), cli_sim["timeline_events"])
            self.assertEqual(autopar.export(plan, "json", model=model), out.stdout)

    def test_compare_clusters(self):
        rc, doc, _ = cli_json("compare-clusters", "--model", "llama-3-8b", "--clusters", "h100:8,a100-80gb:16",
                              "--gbs", "64", "--seq", "4096", "--tokens", "1T", "--price-per-gpu-hour", "2.5,1.5")
        self.assertEqual(rc, 0)
        got = autopar.compare_clusters("llama-3-8b", ["h100:8", "a100-80gb:16"], 64, seq=4096, tokens="1T",
                                       price_per_gpu_hour=[2.5, 1.5])
        self.assertEqual(got, doc)


class Errors(unittest.TestCase):
    def test_unknown_model(self):
        rc, _, err = cli_json("describe", "--model", "llama-3-7b")
        self.assertEqual(rc, 2)
        with self.assertRaises(autopar.Error) as e:
            autopar.describe("llama-3-7b")
        self.assertEqual(e.exception.status, autopar.NOTFOUND)
        self.assertIn(str(e.exception), err)
        self.assertNotIn("\n", str(e.exception))

    def test_bad_plan_field(self):
        with self.assertRaises(autopar.Error) as e:
            autopar.estimate("gpt2", "h100:8", gbs=8, tp="x")
        self.assertEqual(e.exception.status, autopar.INVALID)

    def test_train_equals_cli_tokens(self):
        args = ["estimate", "--model", "gpt2", "--cluster", "h100:8", "--gbs", "8", "--seq", "1024"]
        rc, doc, _ = cli_json(*args, "--tokens", "1T", "--price-per-gpu-hour", "2.5")
        self.assertEqual(rc, 0)
        est = autopar.estimate("gpt2", "h100:8", gbs=8, seq=1024)
        self.assertEqual(autopar.train(est, "1T", 2.5), doc)
        self.assertAlmostEqual(doc["train"]["time_s"], 1e12 / est["tokens_per_s"], delta=1e-6 * doc["train"]["time_s"])
        with self.assertRaises(autopar.Error) as e:
            autopar.train(est, "lots")
        self.assertEqual(e.exception.status, autopar.INVALID)

    def test_infeasible_carries_the_closest_plans(self):
        # Offload held off: with it the planner would put the states on the host (ZeRO-Offload).
        rc, doc, _ = cli_json("plan", "--model", "llama-3-70b", "--cluster", "h100:1", "--gbs", "8", "--seq", "4096",
                              "--fix", "offload_optimizer=none,offload_param=none")
        self.assertEqual(rc, 1)
        with self.assertRaises(autopar.Error) as e:
            autopar.plan("llama-3-70b", "h100:1", 8, seq=4096, offload_optimizer="none", offload_param="none")
        self.assertEqual(e.exception.status, autopar.INFEASIBLE)
        self.assertEqual(same(e.exception.document), same(doc))


class PlanToExport(unittest.TestCase):
    """What plan() returns goes straight to export(), and plan(export=...) is the export's text (issue 22)."""

    def test_export_takes_what_plan_returns(self):
        doc = autopar.plan("llama-3-8b", "h100:8", 64, seq=4096, top=2)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.json")
            with open(path, "w") as f:
                json.dump(doc["plans"][0]["plan"], f)
            want = autopar.export(path, "megatron")
        self.assertEqual(autopar.export(doc, "megatron"), want)              # the whole document: its winner
        self.assertEqual(autopar.export(doc["plans"][0], "megatron"), want)  # one of its plans
        self.assertEqual(autopar.export(doc["plans"][0]["plan"], "megatron"), want)  # the plan object
        if len(doc["plans"]) > 1:
            self.assertNotEqual(autopar.export(doc["plans"][1], "megatron"), want)
        est = autopar.estimate("llama-3-8b", "h100:8", plan=doc, gbs=64)
        self.assertEqual(est["summary"], doc["plans"][0]["summary"])        # estimate takes it too

    def test_plan_export_returns_the_text(self):
        text = autopar.plan("llama-3-8b", "h100:8", 64, seq=4096, export="megatron")
        self.assertIsInstance(text, str)
        cli = subprocess.run([BIN, "plan", "--model", "llama-3-8b", "--cluster", "h100:8", "--gbs", "64", "--seq", "4096",
                              "--export", "megatron"], cwd=ROOT, capture_output=True, text=True)
        self.assertEqual(cli.returncode, 0, cli.stderr)
        self.assertEqual(text, cli.stdout)

    def test_errors_are_classes_with_the_cli_exit_status(self):
        rc, _, err = cli_json("describe", "--model", "llama-3-7b")
        with self.assertRaises(autopar.BadInput) as e:
            autopar.describe("llama-3-7b")
        self.assertEqual((e.exception.exit_code, rc), (2, 2))
        self.assertIn(str(e.exception), err)
        rc, _, err = cli_json("plan", "--model", "llama-3-70b", "--cluster", "h100:1", "--gbs", "8", "--seq", "4096",
                              "--fix", "offload_optimizer=none,offload_param=none")
        with self.assertRaises(autopar.Infeasible) as e:
            autopar.plan("llama-3-70b", "h100:1", 8, seq=4096, offload_optimizer="none", offload_param="none",
                         export="megatron")
        self.assertEqual((e.exception.exit_code, rc), (1, 1))
        self.assertIsInstance(e.exception.document, dict)
        self.assertIn(str(e.exception), err)
        self.assertTrue(issubclass(autopar.Infeasible, autopar.Error) and issubclass(autopar.BadInput, autopar.Error))
        with self.assertRaises(autopar.Infeasible):
            autopar.export(e.exception.document, "megatron")  # a search document without a plan
        with self.assertRaises(TypeError):
            autopar.export(42, "megatron")


class Main(unittest.TestCase):
    def run_main(self, *args):
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        return subprocess.run([sys.executable, "-m", "autopar", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True)

    def test_estimate_json_equals_cli(self):
        args = ["estimate", "--model", "gpt2", "--cluster", "h100:8", "--gbs", "8", "--seq", "1024", "--json"]
        out = self.run_main(*args)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout), cli_json(*args[:-1])[1])

    def test_estimate_text_equals_cli(self):
        args = ["estimate", "--model", "gpt2", "--cluster", "h100:8", "--gbs", "8", "--seq", "1024", "--pp", "2"]
        out = self.run_main(*args)
        cli = subprocess.run([BIN, *args], cwd=ROOT, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, cli.stdout)

    def test_listings(self):
        out = self.run_main("models")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("llama-3-70b", out.stdout.split())
        out = self.run_main("clusters")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("dgx-h100", out.stdout.split())

    def test_exit_status(self):
        self.assertEqual(self.run_main("estimate", "--model", "gpt2", "--cluster", "h100:8", "--tp").returncode, 2)
        self.assertEqual(self.run_main("describe", "--model", "llama-3-7b").returncode, 2)
        self.assertEqual(self.run_main("plan", "--model", "llama-3-70b", "--cluster", "h100:1", "--gbs", "8",
                                       "--seq", "4096", "--fix", "offload_optimizer=none").returncode, 1)
        out = self.run_main("describe", "--model", "gpt2", "--seq", "8x")  # refused by @_checked: one line, 2
        self.assertEqual((out.returncode, out.stderr.count("\n")), (2, 1), out.stderr)
        self.assertTrue(out.stderr.startswith("autopar: seq: "), out.stderr)

    def test_seq_suffix_as_cli(self):
        args = ["estimate", "--model", "gpt2", "--cluster", "h100:8", "--gbs", "8", "--seq", "1k"]
        out = self.run_main(*args)
        cli = subprocess.run([BIN, *args], cwd=ROOT, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, cli.stdout)

# One case per plan field of the field table: the canonical flags a valid plan needs beside it, the value given,
# and where the plan document keeps it (docs/plan-format.md) with the value expected there. A field added to
# the table without a case here fails test_every_field_has_a_case.
FIELD_CASES = {
    "global_batch_size": ([], "32", ("global_batch_size",), 32),
    "seq_length": ([], "512", ("seq_length",), 512),
    "dp": (["--tp", "2"], "4", ("parallel", "dp"), 4),
    "tp": ([], "2", ("parallel", "tp"), 2),
    "pp": ([], "2", ("parallel", "pp"), 2),
    "cp": ([], "2", ("parallel", "cp"), 2),
    "ep": (["--tp", "2", "--sequence-parallel", "1"], "2", ("parallel", "ep"), 2),
    "etp": (["--tp", "2", "--sequence-parallel", "1", "--ep", "2"], "1", ("parallel", "etp"), 1),
    "vpp": (["--pp", "2", "--schedule", "interleaved-1f1b"], "2", ("parallel", "vpp"), 2),
    "order": ([], "tp,cp,ep,pp,dp", ("parallel", "order"), ["tp", "cp", "ep", "pp", "dp"]),
    "schedule": (["--pp", "2"], "gpipe", ("pipeline", "schedule"), "gpipe"),
    "micro_batch_size": ([], "2", ("pipeline", "micro_batch_size"), 2),
    "n_micro_batches": (["--global-batch-size", "8"], "1", ("pipeline", "n_micro_batches"), 1),
    "stage_layers": (["--pp", "2"], "5,7", ("pipeline", "stage_layers"), [5, 7]),
    "sequence_parallel": (["--tp", "2"], "1", ("sequence_parallel",), True),
    "recompute": ([], "full", ("recompute", "granularity"), "full"),
    "recompute_layers": (["--recompute", "full"], "2", ("recompute", "num_layers"), 2),
    "zero_stage": ([], "3", ("optimizer", "zero_stage"), 3),
    "offload_optimizer": ([], "cpu", ("optimizer", "offload_optimizer"), "cpu"),
    "offload_param": (["--zero-stage", "3"], "cpu", ("optimizer", "offload_param"), "cpu"),
    "precision": ([], "fp16", ("precision",), "fp16"),
    "fused_loss": ([], "1", ("fused_loss",), True),
    "stack": ([], "torchtitan", ("stack",), "torchtitan"),
    "overlap_grad_reduce": ([], "0", ("overlap", "grad_reduce"), False),
    "overlap_param_gather": ([], "0", ("overlap", "param_gather"), False),
    "tp_comm_overlap": ([], "1", ("overlap", "tp_comm"), True),
}
# The MoE fields need a model with experts.
FIELD_MODEL = {"ep": "mixtral-8x7b", "etp": "mixtral-8x7b"}


class FieldSpellings(unittest.TestCase):
    """Every plan field of the table (autopar.plan_fields, from the library) is a CLI flag under its canonical
    name with dashes and under each alias, and a Python keyword under its canonical name and each alias; all
    spellings give the same estimate, whose plan holds the value given."""

    def test_every_field_has_a_case(self):
        self.assertEqual(sorted(f["name"] for f in autopar.plan_fields()), sorted(FIELD_CASES))

    def test_flags_and_keywords(self):
        for f in autopar.plan_fields():
            name = f["name"]
            extras, value, path, expected = FIELD_CASES[name]
            model = FIELD_MODEL.get(name, "gpt2")
            base = ["estimate", "--model", model, "--cluster", "h100:8"]
            batch = [] if name in ("global_batch_size", "seq_length") else ["--gbs", "16", "--seq", "1024"]
            if "--global-batch-size" in extras:
                batch = ["--seq", "1024"]
            docs = {}
            for flag in [f["flag"]] + ["--" + a.replace("_", "-") for a in f["aliases"]]:
                rc, doc, err = cli_json(*base, *batch, *extras, flag, value)
                self.assertEqual(rc, 0, "%s %s: %s" % (flag, value, err))
                docs[flag] = doc
            first = docs[f["flag"]]
            for flag, doc in docs.items():
                self.assertEqual(doc, first, "%s and %s differ" % (flag, f["flag"]))
            got = first["plan"]
            for k in path:
                got = got[k]
            self.assertEqual(got, expected, name)
            # The same through Python keywords: the extras by their canonical names, the field by each spelling.
            kw = {}
            args = extras + batch
            for i in range(0, len(args), 2):
                kw[args[i][2:].replace("-", "_")] = args[i + 1]
            kw = {{"gbs": "global_batch_size", "seq": "seq_length"}.get(k, k): v for k, v in kw.items()}
            for key in [name] + f["aliases"]:
                doc = autopar.estimate(model, "h100:8", **dict(kw, **{key: value}))
                self.assertEqual(doc, first, "keyword %s" % key)

    def test_range_message(self):
        rc, _, err = cli_json("estimate", "--model", "gpt2", "--cluster", "h100:8", "--seq", "99999999999")
        self.assertEqual(rc, 2)
        self.assertIn("--seq-length: expected an integer in [0, 67108864]", err)
        r = subprocess.run([BIN, "plan", "--model", "gpt2", "--cluster", "h100:8", "--gbs", "8", "--seq",
                            "99999999999"], cwd=ROOT, capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("option --seq (seq_length): expected an integer in [0, 67108864]", r.stderr)


class Tap(unittest.TextTestResult):
    """Prints one TAP line per test, the runner's format (tests/run.sh)."""
    n = 0

    def _line(self, test, ok, why=""):
        Tap.n += 1
        print("%s %d - %s%s" % ("ok" if ok else "not ok", Tap.n, test.id(), why), flush=True)

    def addSuccess(self, test):
        self._line(test, True)

    def addFailure(self, test, err):
        self._line(test, False, "\n  " + self._exc_info_to_string(err, test).replace("\n", "\n  "))

    def addError(self, test, err):
        self.addFailure(test, err)

    def addSkip(self, test, reason):
        self._line(test, True, " # SKIP " + reason)


if __name__ == "__main__":
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    r = unittest.TextTestRunner(resultclass=Tap, stream=open(os.devnull, "w")).run(suite)
    sys.exit(0 if r.wasSuccessful() else 1)
