"""Progress on stderr: a bar when stderr is a terminal (a pseudo-terminal from Python's pty module), nothing
when it is a pipe or with --quiet, and stdout the same in all three. Prints TAP lines; run by
tests/sh_progress.sh. Usage: test_progress.py BIN"""

import os
import pty
import select
import subprocess
import sys

BIN = sys.argv[1] if len(sys.argv) > 1 else "bin/autopar"
CSV = "tests/data/runs_small.csv"
n = 0
failed = 0


def check(what, ok, detail=""):
    global n, failed
    n += 1
    failed += not ok
    print("%s %d - %s%s" % ("ok" if ok else "not ok", n, what, "" if ok or not detail else "\n  " + detail[:400]),
          flush=True)


def run_on_pty(args):
    """Runs BIN args with stderr on a pseudo-terminal; returns (exit status, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([BIN] + args, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    got = b""
    out = b""
    while True:
        r, _, _ = select.select([master, p.stdout], [], [], 60)
        if not r:
            break
        if p.stdout in r:
            chunk = p.stdout.read1(65536)
            out += chunk
        if master in r:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed: the program ended
                chunk = b""
            if not chunk and p.poll() is not None:
                break
            got += chunk
        if p.poll() is not None and p.stdout in r and not chunk:
            break
    out += p.stdout.read()
    rc = p.wait()
    os.close(master)
    return rc, out.decode(), got.decode(errors="replace")


def main():
    args = ["validate", CSV]
    rc, out, tty = run_on_pty(args)
    check("validate on a terminal exits 0", rc == 0, tty)
    check("the bar is drawn on the terminal", "autopar validate [#" in tty and "100%" in tty, repr(tty[:300]))
    check("the bar's line is cleared at the end", tty.rstrip("\r\n").endswith("\x1b[K"), repr(tty[-80:]))
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=120)
    check("validate on a pipe exits 0", p.returncode == 0, p.stderr)
    check("no bar when stderr is a pipe", p.stderr == "", repr(p.stderr[:300]))
    check("stdout is the same on a terminal and a pipe", out.replace("\r\n", "\n") == p.stdout)
    rc, out, tty = run_on_pty(args + ["--quiet"])
    check("no bar on a terminal with --quiet", rc == 0 and tty == "", repr(tty[:300]))
    # A short plan (well under a second) draws nothing even on a terminal.
    rc, out, tty = run_on_pty(["plan", "--model", "llama-3-8b", "--cluster", "h100:8", "--gbs", "64"])
    check("a plan under a second draws no bar", rc == 0 and tty == "", repr(tty[:300]))


if __name__ == "__main__":
    main()
    sys.exit(1 if failed else 0)
