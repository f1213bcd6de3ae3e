#!/usr/bin/python3
"""The planner's closed form against autopar's own simulator on the five shipped ONNX models (not part of make test).

For each model and cluster: `autopar plan --model examples/onnx/M.onnx --cluster C --gbs 256 --json` (the default
strategies), then `autopar simulate --plan` of that plan; prints the predicted iteration time, the stages, the
simulated time and their difference. Usage: python3 bench/graph_agree.py [AUTOPAR_BIN] (default bin/autopar).
Figures of runs are in bench/graph_plan.txt."""
import json
import os
import subprocess
import sys
import tempfile

MODELS = ["resnet50", "vit_b_16", "unet", "gpt2_small", "t5_small"]
CLUSTERS = ["h100-sxm:8", "dgx-h100:4x8"]


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "bin/autopar"
    print(f"{'model':<12} {'cluster':<14} {'iteration s':>12} {'stages':>6} {'simulated s':>12} {'closed/sim':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for c in CLUSTERS:
            for m in MODELS:
                model = f"examples/onnx/{m}.onnx"
                plan = os.path.join(tmp, "plan.json")
                with open(plan, "w") as f:
                    subprocess.run([binary, "plan", "--model", model, "--cluster", c, "--gbs", "256", "--json"],
                                   stdout=f, stderr=subprocess.DEVNULL, check=True)
                with open(plan) as f:
                    d = json.load(f)
                out = subprocess.run([binary, "simulate", "--plan", plan, "--model", model, "--cluster", c, "--json"],
                                     capture_output=True, text=True, check=True).stdout
                sim = json.loads(out)["simulated_iteration_s"]
                t = d["time"]["iteration_s"]
                print(f"{m:<12} {c:<14} {t:>12.6g} {len(d.get('stages', [])) or 1:>6} {sim:>12.6g} {100 * (t / sim - 1):>+9.1f}%")


if __name__ == "__main__":
    main()
