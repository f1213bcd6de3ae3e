"""TAP lines for the Python-driven tests (test_report.py, test_inputs.py): check() prints "ok N - what" or
"not ok N - what" with the detail indented under it, and counts; failed() says whether any check failed."""

_n = 0
_failed = 0


def check(what, ok, detail=""):
    global _n, _failed
    _n += 1
    if not ok:
        _failed += 1
    print("%s %d - %s%s" % ("ok" if ok else "not ok", _n, what, "" if ok or not detail else "\n  " + str(detail)[:600]),
          flush=True)


def count():
    return _n


def failed():
    return _failed > 0
