"""``python3 -m autopar COMMAND …``: the CLI's main commands through the Python module, with the CLI's option
names, output (text, or the same JSON document with --json) and exit status (0 ok, 1 no feasible plan, 2 bad
input, 3 internal). Plan fields are given as the CLI's flags, canonical or alias (``--tp 2 --micro-batch-size 2
--schedule 1f1b``, ``--mbs 2``), as the library's field table spells them."""

import argparse
import json
import sys

import autopar


class _BadArgs(Exception):
    pass


def _fields(rest):
    """Turns the leftover ``--key value`` pairs into plan fields; anything else is an error (exit 2)."""
    fields = {}
    i = 0
    while i < len(rest):
        k = rest[i]
        if not k.startswith("--") or i + 1 >= len(rest):
            raise _BadArgs("unexpected argument %r (plan fields are --key value)" % k)
        fields[k[2:].replace("-", "_")] = rest[i + 1]
        i += 2
    return fields


def _print(doc, as_json):
    if as_json:
        print(json.dumps(doc))
    else:
        sys.stdout.write(doc if doc.endswith("\n") else doc + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m autopar", description="autopar through its Python module")
    ap.add_argument("--version", action="version", version="autopar " + autopar.version())
    sub = ap.add_subparsers(dest="command", required=True)
    for name in ("plan", "estimate", "simulate"):
        p = sub.add_parser(name)
        p.add_argument("--model", required=True)
        p.add_argument("--cluster", required=True)
        p.add_argument("--json", action="store_true")
        p.add_argument("--calibration")
        if name == "plan":
            # The CLI's spellings of the two problem fields: canonical first, the alias after (field table).
            p.add_argument("--global-batch-size", "--gbs", dest="gbs", required=True, type=int)
            p.add_argument("--seq-length", "--seq", dest="seq")
            p.add_argument("--top", type=int)
            p.add_argument("--fix")
            p.add_argument("--objective")
            p.add_argument("--max-mem-fraction", type=float)
            p.add_argument("--time-budget", type=float)
            p.add_argument("--strategy")
            p.add_argument("--export")
            p.add_argument("--stack")
            p.add_argument("--compare")
        else:
            p.add_argument("--plan")
        if name == "simulate":
            p.add_argument("--trace", required=True)
    p = sub.add_parser("validate")
    p.add_argument("csv")
    p.add_argument("--json", action="store_true")
    p.add_argument("--search", action="store_true")
    p.add_argument("--calibration")
    p = sub.add_parser("describe")
    p.add_argument("--model", required=True)
    p.add_argument("--seq-length", "--seq", dest="seq")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("export")
    p.add_argument("--plan", required=True)
    p.add_argument("--format", required=True)
    p.add_argument("--model")
    for name in ("models", "clusters"):
        sub.add_parser(name).add_argument("--json", action="store_true")
    args, rest = ap.parse_known_args(argv)
    if rest and args.command not in ("estimate", "simulate"):
        ap.error("unrecognized arguments: " + " ".join(rest))
    text = not getattr(args, "json", True)
    try:
        if args.command == "plan":
            doc = autopar.plan(args.model, args.cluster, args.gbs, seq=args.seq, top=args.top, fix=args.fix,
                               objective=args.objective, max_mem_fraction=args.max_mem_fraction,
                               time_budget=args.time_budget, strategy=args.strategy, export=args.export,
                               compare=args.compare, calibration=args.calibration, stack=args.stack, _text=text)
            if args.export:  # the winner's export text, as `autopar plan --export FORMAT` prints it
                text = True
        elif args.command == "estimate":
            doc = autopar.estimate(args.model, args.cluster, plan=args.plan, calibration=args.calibration,
                                   _text=text, **_fields(rest))
        elif args.command == "simulate":
            doc = autopar.simulate(args.model, args.cluster, args.trace, plan=args.plan,
                                   calibration=args.calibration, _text=text, **_fields(rest))
        elif args.command == "validate":
            doc = autopar.validate(args.csv, search=args.search, calibration=args.calibration, _text=text)
        elif args.command == "describe":
            doc = autopar.describe(args.model, seq=args.seq)
            text = False if args.json else text
            if not args.json:
                doc = "%s: %d parameters (%d active)" % (doc["name"], doc["params_total"], doc["params_active"])
                text = True
        elif args.command == "export":
            doc, text = autopar.export(args.plan, args.format, model=args.model), True
        elif args.command == "models":
            doc = autopar.models()
            if not args.json:
                doc, text = "\n".join(m["name"] for m in doc["models"]), True
        else:
            doc = autopar.clusters()
            if not args.json:
                doc, text = "\n".join(c["name"] for c in doc["clusters"]), True
    except (_BadArgs, ValueError) as e:  # ValueError: an argument @_checked refused (it names the argument)
        print("autopar: %s" % e, file=sys.stderr)
        return 2
    except autopar.Error as e:
        if isinstance(e, autopar.Infeasible) and e.document is not None:
            _print(e.document, not text)
        print("autopar: %s" % e, file=sys.stderr)
        return e.exit_code
    _print(doc, not text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
