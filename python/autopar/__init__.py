"""autopar from Python: ctypes over libautopar's public C API (include/autopar.h), standard library only.

Each function returns the same document as the CLI's ``--json`` for that command, as a dict (or a list for
the listings), and raises :class:`Error` carrying the library's one-line message on failure: :class:`BadInput`
for what the CLI exits 2 on, :class:`Infeasible` for no feasible plan (exit 1, the closest plans in
``e.document``), :class:`InternalError` for out of memory and internal errors (exit 3); ``e.exit_code`` is the
CLI's exit status for it. An integer out of its range or a string with an embedded NUL raises ValueError, naming
the argument, before any call::

    import autopar
    best = autopar.plan(model="llama-3-70b", cluster="dgx-h100:8x8", gbs=1024, seq=8192)
    est = autopar.estimate(model="gpt2", cluster="h100:8", gbs=8, seq=1024, tp=2)

Plan fields are keyword arguments named as the field table (src/plan/plan_fields.c) names them: the canonical
name (``micro_batch_size``, ``zero_stage``; the CLI's flag is it with dashes, ``--micro-batch-size``) or one of
its aliases (``mbs``, ``zero``); :func:`plan_fields` lists them, from the library. A list or tuple value becomes
a comma-separated list (``stage_layers=[20, 20]``, ``order=["tp", "cp", "ep", "pp", "dp"]``).

The shared library is found in this order: ``$AUTOPAR_LIB``; the build tree this package sits in
(``python/../build/lib``); the install prefix (``<prefix>/lib`` beside ``<prefix>/lib/python3/...``); the system's
library path. ``libautopar-full.so`` (the core with every optional part, e.g. ONNX import) is preferred over
``libautopar.so`` where it exists.
"""

import ctypes
import ctypes.util
import functools
import inspect
import json
import os
import re

__all__ = ["Error", "BadInput", "Infeasible", "InternalError", "plan_fields", "report_html", "compare_clusters", "plan", "estimate", "simulate", "validate", "describe", "export", "models", "clusters",
           "cluster", "version", "library_path"]

# Status codes of include/autopar.h (AP_STATUS_MAP); AP_INFEASIBLE is "no feasible plan".
OK, NOMEM, IO, PARSE, INVALID, NOTFOUND, UNSUPPORTED, INFEASIBLE, CANCELLED, INTERNAL = range(10)
_OUT_TEXT, _OUT_JSON = 0, 1
_VALIDATE_JSON, _VALIDATE_SEARCH = 1, 2
_PARTS = ("onnx", "ilp")


class Error(Exception):
    """A failure reported by libautopar: ``status`` is the ap_status code, ``str(e)`` the one-line message the
    CLI prints, ``exit_code`` the CLI's exit status for it (2 bad input, 1 no feasible plan, 3 internal). The
    raised class says which: :class:`BadInput`, :class:`Infeasible` (the closest plans in ``document``) or
    :class:`InternalError`; catching ``Error`` catches all three."""

    exit_code = 2

    def __init__(self, status, message, document=None):
        super().__init__(message)
        self.status = status
        self.document = document


class BadInput(Error):
    """Bad input: a file, field, option or argument that is not what was expected (the CLI's exit 2)."""
    exit_code = 2


class Infeasible(Error):
    """No plan fits (the CLI's exit 1): ``document`` holds the search document with the closest plans and what
    would make them fit."""
    exit_code = 1


class InternalError(Error):
    """Out of memory or an internal error (the CLI's exit 3)."""
    exit_code = 3


def _error(status, message, document=None):
    """The exception for a failure status, of the class the CLI's exit status maps it to (src/cli/args.c)."""
    cls = Infeasible if status == INFEASIBLE else InternalError if status in (NOMEM, INTERNAL) else BadInput
    return cls(status, message, document)


class _ReportInputs(ctypes.Structure):
    # Mirrors ap_report_inputs of include/autopar.h.
    _fields_ = [(k, ctypes.c_char_p) for k in ("title", "command", "estimate_json", "search_json", "trace_json",
                                                "validate_json", "compare_search_json")]


class _SearchOpts(ctypes.Structure):
    # Mirrors ap_search_opts of include/autopar.h field by field; ap_search_opts_init fills the defaults.
    _fields_ = [("global_batch_size", ctypes.c_int64), ("seq_length", ctypes.c_int64), ("top_k", ctypes.c_int),
                ("time_budget_s", ctypes.c_double), ("max_mem_fraction", ctypes.c_double),
                ("objective", ctypes.c_char_p), ("fix", ctypes.c_char_p), ("strategies", ctypes.c_char_p),
                ("export_format", ctypes.c_char_p), ("compare", ctypes.c_void_p),
                ("stack", ctypes.c_char_p)]


def _candidates():
    env = os.environ.get("AUTOPAR_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [os.path.join(here, "..", "..", "build", "lib")]
    # Installed: <prefix>/lib/python3/dist-packages/autopar -> <prefix>/lib
    dirs.append(os.path.join(here, "..", "..", ".."))
    for d in dirs:
        for name in ("libautopar-full.so", "libautopar.so"):
            p = os.path.normpath(os.path.join(d, name))
            if os.path.exists(p):
                yield p
    for name in ("autopar-full", "autopar"):
        found = ctypes.util.find_library(name)
        if found:
            yield found


_lib = None
_lib_path = None


def _load():
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(str(e))
            continue
        _declare(lib)
        _lib, _lib_path = lib, path
        return lib
    raise _error(IO, "libautopar.so not found (build it with `make`, or set AUTOPAR_LIB)" +
                (": " + "; ".join(errors) if errors else ""))


def _declare(lib):
    vp, cp, i64 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64
    pp = ctypes.POINTER(ctypes.c_void_p)
    sig = {
        "ap_version": (cp, []), "ap_ctx_new": (vp, []), "ap_ctx_free": (None, [vp]), "ap_ctx_error": (cp, [vp]),
        "ap_ctx_set_calibration": (ctypes.c_int, [vp, cp]), "ap_free": (None, [vp]),
        "ap_ctx_add_part": (ctypes.c_int, [vp, vp]),
        "ap_model_load": (ctypes.c_int, [vp, cp, pp]), "ap_model_free": (None, [vp]),
        "ap_model_describe_json": (ctypes.c_int, [vp, vp, i64, pp]),
        "ap_models_list_json": (ctypes.c_int, [vp, pp]),
        "ap_cluster_load": (ctypes.c_int, [vp, cp, pp]), "ap_cluster_free": (None, [vp]),
        "ap_cluster_describe_json": (ctypes.c_int, [vp, vp, pp]),
        "ap_clusters_list_json": (ctypes.c_int, [vp, pp]),
        "ap_plan_new": (ctypes.c_int, [vp, pp]), "ap_plan_load": (ctypes.c_int, [vp, cp, pp]),
        "ap_plan_parse": (ctypes.c_int, [vp, cp, pp]),
        "ap_plan_set": (ctypes.c_int, [vp, vp, cp, cp]), "ap_plan_free": (None, [vp]),
        "ap_plan_key": (cp, [ctypes.c_size_t, ctypes.POINTER(cp)]), "ap_plan_key_aliases": (cp, [ctypes.c_size_t]),
        "ap_plan_key_range": (ctypes.c_int, [ctypes.c_size_t, ctypes.POINTER(i64), ctypes.POINTER(i64)]),
        "ap_plan_key_binary_suffix": (ctypes.c_int, [ctypes.c_size_t]),
        "ap_plan_json": (ctypes.c_int, [vp, vp, pp]),
        "ap_estimate": (ctypes.c_int, [vp, vp, vp, vp, ctypes.c_int, pp]),
        "ap_simulate": (ctypes.c_int, [vp, vp, vp, vp, cp, ctypes.c_int, pp]),
        "ap_validate": (ctypes.c_int, [vp, cp, ctypes.c_int, pp]),
        "ap_export": (ctypes.c_int, [vp, vp, vp, cp, pp]),
        "ap_plan_format": (ctypes.c_int, [vp]),
        "ap_graph_plan_estimate": (ctypes.c_int, [vp, vp, vp, vp, ctypes.c_int, pp]),
        "ap_graph_plan_simulate": (ctypes.c_int, [vp, vp, vp, vp, cp, ctypes.c_int, pp]),
        "ap_graph_plan_export": (ctypes.c_int, [vp, vp, vp, pp]),
        "ap_search_opts_init": (None, [ctypes.POINTER(_SearchOpts)]),
        "ap_report_html": (ctypes.c_int, [vp, ctypes.POINTER(_ReportInputs), cp]),
        "ap_render": (ctypes.c_int, [vp, cp, cp, cp, ctypes.c_int, pp]),
        "ap_compare_clusters": (ctypes.c_int, [vp, vp, cp, ctypes.POINTER(_SearchOpts), cp, cp, ctypes.c_int, pp]),
        "ap_plan_search": (ctypes.c_int, [vp, vp, vp, ctypes.POINTER(_SearchOpts), ctypes.c_int, pp, pp]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    for part in _PARTS:
        f = getattr(lib, "ap_part_" + part, None)
        if f is not None:
            f.restype, f.argtypes = vp, []


def library_path():
    """The path of the shared library in use."""
    _load()
    return _lib_path


def version():
    """The library's version string."""
    return _load().ap_version().decode("utf-8")


def plan_fields():
    """The plan fields the keyword arguments take, from the library's field table: a list of dicts with
    ``name`` (the canonical keyword), ``aliases`` (the other accepted keywords, Python identifiers), ``flag``
    (the CLI's ``--micro-batch-size``), ``help``, ``min``/``max`` for integer fields, and ``binary_suffix``
    (True where "8k" means 8192, as for ``seq_length``; elsewhere k, M and G are 10^3, 10^6 and 10^9)."""
    lib, out = _load(), []
    i = 0
    while True:
        help_ = ctypes.c_char_p()
        key = lib.ap_plan_key(i, ctypes.byref(help_))
        if key is None:
            return out
        name = key.decode("utf-8")
        aliases = lib.ap_plan_key_aliases(i).decode("utf-8")
        field = {"name": name, "aliases": [a.replace("-", "_") for a in aliases.split("|") if a],
                 "flag": "--" + name.replace("_", "-"), "help": help_.value.decode("utf-8")}
        lo, hi = ctypes.c_int64(), ctypes.c_int64()
        if lib.ap_plan_key_range(i, ctypes.byref(lo), ctypes.byref(hi)):
            field["min"], field["max"] = lo.value, hi.value
            field["binary_suffix"] = bool(lib.ap_plan_key_binary_suffix(i))
        out.append(field)
        i += 1


def _b(s):
    return None if s is None else str(s).encode("utf-8")


# ---- Argument checking: the one converter between Python values and what reaches ctypes -------------------
# ctypes wraps an int to its C type (2**64 + 64 becomes 64 in an int64_t, 2**32 + 1 becomes 1 in an int) and a
# char * ends at the first NUL ("llama-3-8b\0x" reaches the library as "llama-3-8b"), so each public function
# checks its arguments first (@_checked): an integer outside the range of the C type it reaches, or of the plan
# field it sets (the library's field table, ap_plan_key_range), a fraction where an integer is expected, and a
# string with an embedded NUL raise ValueError naming the argument. An integer field also takes the CLI's
# count strings ("8k", "1M": binary for seq_length, where "8k" is 8192, decimal elsewhere; util_parse_count in
# src/core/util.c), so that seq="8k" means what --seq 8k means. The C type of each integer argument:
_INT_ARGS = {"top": ctypes.c_int}
# Integer arguments that are plan fields under another name: checked against the field's range.
_FIELD_ARGS = {"gbs": "global_batch_size", "seq": "seq_length"}
_field_ranges = None


def _field_range(name):
    """(min, max, binary_suffix) of the plan field a keyword names (canonical or alias), or None when it has
    no range."""
    global _field_ranges
    if _field_ranges is None:
        ranges = {}
        for f in plan_fields():
            for k in [f["name"]] + f["aliases"]:
                ranges[k] = (f["min"], f["max"], f["binary_suffix"]) if "min" in f else None
        _field_ranges = ranges
    return _field_ranges.get(name.replace("-", "_"))


_COUNT = re.compile(r"([0-9]+)([kKMG]?)\Z")


def _count(name, v, binary, strict=True):
    """The integer a count string names ("8k", "1M", "4096"), as the CLI reads it; anything that is not a str
    passes unchanged, and so does another string unless strict (then ValueError naming `name`): a plan field
    given as a keyword reaches ap_plan_set, whose AP_INVALID names the field and the value."""
    if not isinstance(v, str):
        return v
    m = _COUNT.match(v)
    if not m and not strict:
        return v
    if not m:
        raise ValueError("%s: expected an integer or a count such as 8k or 1M, got %r" % (name, v))
    power = {"": 0, "k": 1, "K": 1, "M": 2, "G": 3}[m.group(2)]
    return int(m.group(1)) * (1024 if binary else 1000) ** power


def _check(name, v, rng=None, integer=False):
    """v as it is to reach the library, or ValueError naming `name` when it cannot reach it unchanged (see
    above); an integral float where an integer is expected (gbs=8.0) becomes that integer."""
    if isinstance(v, (str, bytes, os.PathLike)):
        text = os.fspath(v)
        nul = "\0" if isinstance(text, str) else b"\0"
        if nul in text:
            raise ValueError("%s: embedded NUL character at offset %d in %r (a C string would end there)" %
                             (name, text.index(nul), v))
    elif isinstance(v, (list, tuple)):
        return type(v)(_check("%s[%d]" % (name, i), x, rng, integer) for i, x in enumerate(v))
    elif isinstance(v, bool):
        pass
    elif isinstance(v, int) or (integer and isinstance(v, float)):
        if isinstance(v, float):
            if not v.is_integer():
                raise ValueError("%s: expected an integer, got %r" % (name, v))
            v = int(v)
        lo, hi = rng if rng else (-(1 << 63), (1 << 63) - 1)
        if not lo <= v <= hi:
            raise ValueError("%s: expected an integer in [%d, %d], got %d" % (name, lo, hi, v))
    return v


def _checked(fn):
    """Checks every argument of fn before the call (see above): strings (and the strings of lists, keyword
    names included), the integers of _INT_ARGS against their C type, plan fields against the field table."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        for name, value in bound.arguments.items():
            kind = sig.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:  # plan fields given as keywords
                for key in value:
                    _check("keyword %r" % key, key)
                    rng = _field_range(key)
                    v = _count(key, value[key], rng[2], strict=False) if rng else value[key]
                    value[key] = _check(key, v, rng and rng[:2], integer=rng is not None)
            elif name in _INT_ARGS:
                bits = 8 * ctypes.sizeof(_INT_ARGS[name])
                bound.arguments[name] = _check(name, value, (-(1 << (bits - 1)), (1 << (bits - 1)) - 1), True)
            elif name in _FIELD_ARGS and value is not None:
                rng = _field_range(_FIELD_ARGS[name])
                bound.arguments[name] = _check(name, _count(name, value, rng[2]), rng[:2], integer=True)
            elif not isinstance(value, dict):  # documents (dicts) go through json.dumps, which escapes NUL
                _check(name, value)
        return fn(*bound.args, **bound.kwargs)
    wrapper._checked = True
    return wrapper


class _Ctx:
    """One context per call: errors, calibration and the optional parts the library was built with."""

    def __init__(self, calibration=None):
        self.lib = _load()
        self.ptr = self.lib.ap_ctx_new()
        if not self.ptr:
            raise _error(NOMEM, "out of memory")
        self.owned = []
        for part in _PARTS:
            f = getattr(self.lib, "ap_part_" + part, None)
            if f is not None:
                self.lib.ap_ctx_add_part(self.ptr, f())
        if calibration:
            self.check(self.lib.ap_ctx_set_calibration(self.ptr, _b(calibration)))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for free, p in reversed(self.owned):
            free(p)
        self.lib.ap_ctx_free(self.ptr)

    def check(self, status, document=None):
        if status != OK:
            raise _error(status, (self.lib.ap_ctx_error(self.ptr) or b"").decode("utf-8", "replace") or
                         "autopar error %d" % status, document)

    def new(self, loader, free, *args):
        out = ctypes.c_void_p()
        self.check(loader(self.ptr, *args, ctypes.byref(out)))
        self.owned.append((free, out))
        return out

    def text(self, status_and_out):
        status, out = status_and_out
        s = None
        if out.value:
            s = ctypes.string_at(out.value).decode("utf-8")
            self.lib.ap_free(out)
        return status, s

    def call(self, fn, *args):
        out = ctypes.c_void_p()
        status = fn(*args, ctypes.byref(out))
        return self.text((status, out))

    def model(self, m):
        return self.new(self.lib.ap_model_load, self.lib.ap_model_free, _b(m))

    def cluster(self, c):
        return self.new(self.lib.ap_cluster_load, self.lib.ap_cluster_free, _b(c))

    def plan(self, plan_file, fields):
        path, text = _plan_source(plan_file)
        if text is not None:
            p = self.new(self.lib.ap_plan_parse, self.lib.ap_plan_free, text.encode("utf-8"))
        elif path:
            p = self.new(self.lib.ap_plan_load, self.lib.ap_plan_free, _b(path))
        else:
            p = self.new(self.lib.ap_plan_new, self.lib.ap_plan_free)
        for key, value in fields.items():
            self.check(self.lib.ap_plan_set(self.ptr, p, _b(_key(key)), _b(_value(value))))
        return p


def _plan_source(plan):
    """What a plan argument names: (path, None) for a file name, (None, JSON text) for a plan given as a dict,
    (None, None) for none. A dict may be what the functions here return: the search document of :func:`plan`
    (its first plan, the winner), one of its ``plans[]`` entries or an estimate document (their ``"plan"``),
    or a plan object itself (``autopar-plan/1``, or a general graph's ``autopar-plan/2`` document)."""
    if plan is None or isinstance(plan, (str, bytes, os.PathLike)):
        return (os.fsdecode(plan) if plan is not None else None), None
    if not isinstance(plan, dict):
        raise TypeError("plan: expected a file name, a plan document (a dict as plan() or estimate() returns it) or a "
                        "plan object, got %s" % type(plan).__name__)
    fmt = plan.get("format")
    if fmt == "autopar-search/2":
        plans = plan.get("plans") or []
        if not plans:
            raise _error(INFEASIBLE, "plan: the search document holds no plan: %s" % (plan.get("message") or
                                                                                    "nothing fits"), plan)
        plan = plans[0]
        fmt = None
    if fmt not in ("autopar-plan/1", "autopar-plan/2") and isinstance(plan.get("plan"), dict):
        plan = plan["plan"]
    return None, json.dumps(plan)


def _key(k):
    # The library takes a field's canonical name or any alias, '-' and '_' alike (plan_field_find).
    return k


def _value(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def _doc(ctx, status, text):
    document = json.loads(text) if text else None
    ctx.check(status, document)
    return document


def _fmt(text):
    return _OUT_TEXT if text else _OUT_JSON


def _out(ctx, text, status, out):
    if not text:
        return _doc(ctx, status, out)
    # AP_INFEASIBLE still carries the closest plans: hand them over with the error.
    ctx.check(status, out)
    return out


def _with_batch(fields, gbs, seq):
    if gbs is not None:
        fields["global_batch_size"] = gbs
    if seq is not None:
        fields["seq_length"] = seq
    return fields


@_checked
def estimate(model, cluster, plan=None, gbs=None, seq=None, calibration=None, _text=False, **fields):
    """One plan's predicted iteration time, breakdown, tokens/s, MFU and memory per stage (``autopar estimate
    --json``). ``plan`` is an autopar plan file or a plan as :func:`export` takes it (a document or plan object
    as the functions here return them); keyword fields override it."""
    with _Ctx(calibration) as c:
        m, cl = c.model(model), c.cluster(cluster)
        p = c.plan(plan, _with_batch(fields, gbs, seq))
        if c.lib.ap_plan_format(p) == 2:  # an op-level plan of a general graph (autopar-plan/2)
            return _out(c, _text, *c.call(c.lib.ap_graph_plan_estimate, c.ptr, m, cl, p, _fmt(_text)))
        return _out(c, _text, *c.call(c.lib.ap_estimate, c.ptr, m, cl, p, _fmt(_text)))


@_checked
def simulate(model, cluster, trace, plan=None, gbs=None, seq=None, calibration=None, _text=False, **fields):
    """Simulates the plan's pipeline schedule, writes its Chrome trace to ``trace`` and returns the summary
    (``autopar simulate --json``). An op-level plan (autopar-plan/2) is played by the op-level simulator, its
    pipeline as one timeline; ``trace=None`` writes no trace for it."""
    with _Ctx(calibration) as c:
        m, cl = c.model(model), c.cluster(cluster)
        p = c.plan(plan, _with_batch(fields, gbs, seq))
        if c.lib.ap_plan_format(p) == 2:
            return _out(c, _text, *c.call(c.lib.ap_graph_plan_simulate, c.ptr, m, cl, p,
                                          None if trace is None else _b(trace), _fmt(_text)))
        return _out(c, _text, *c.call(c.lib.ap_simulate, c.ptr, m, cl, p, _b(trace), _fmt(_text)))


@_checked
def plan(model, cluster, gbs, seq=None, top=None, fix=None, objective=None, max_mem_fraction=None,
         time_budget=None, strategy=None, export=None, compare=None, calibration=None, stack=None, _text=False,
         **fixed_fields):
    """Searches for the fastest plans that fit (``autopar plan --json``). Plan fields given as keywords
    (``tp=8``) are held fixed, as ``--fix`` does; ``fix`` takes the same as a string. With ``export`` (a format of
    :func:`export`: "megatron", "deepspeed", "torchtitan", …) only plans that format can express are searched
    and the winner's export text is returned (``autopar plan --export FORMAT``), not the document. Raises
    :class:`Infeasible` (the closest plans in ``e.document``) when nothing fits, :class:`BadInput` on bad input."""
    with _Ctx(calibration) as c:
        m, cl = c.model(model), c.cluster(cluster)
        opts = _SearchOpts()
        c.lib.ap_search_opts_init(ctypes.byref(opts))
        opts.global_batch_size = int(gbs)
        if seq is not None:
            opts.seq_length = int(seq)
        if top is not None:
            opts.top_k = int(top)
        if time_budget is not None:
            opts.time_budget_s = float(time_budget)
        if max_mem_fraction is not None:
            opts.max_mem_fraction = float(max_mem_fraction)
        keep = []  # the byte strings must live through the call

        def s(v):
            keep.append(_b(v))
            return keep[-1]
        if objective is not None:
            opts.objective = s(objective)
        parts = [fix] if fix else []
        parts += ["%s=%s" % (_key(k), _value(v)) for k, v in fixed_fields.items()]
        if parts:
            opts.fix = s(",".join(parts))
        if strategy is not None:
            opts.strategies = s(_value(strategy))
        if export is not None:
            opts.export_format = s(export)
        if stack is not None:
            opts.stack = s(stack)
        if compare is not None:
            opts.compare = c.plan(compare, {})
        out, best = ctypes.c_void_p(), ctypes.c_void_p()
        status = c.lib.ap_plan_search(c.ptr, m, cl, ctypes.byref(opts), _fmt(_text),
                                      ctypes.byref(out), ctypes.byref(best) if export is not None else None)
        if best.value:
            c.owned.append((c.lib.ap_plan_free, best))
        result = _out(c, _text, *c.text((status, out)))
        if export is None:
            return result
        status, text = c.call(c.lib.ap_export, c.ptr, m, best, _b(export))
        c.check(status)
        return text


@_checked
def validate(csv, search=False, calibration=None, _text=False):
    """Predicts every measured run of a runs table (``autopar validate --json``)."""
    with _Ctx(calibration) as c:
        flags = (0 if _text else _VALIDATE_JSON) | (_VALIDATE_SEARCH if search else 0)
        return _out(c, _text, *c.call(c.lib.ap_validate, c.ptr, _b(csv), flags))


@_checked
def describe(model, seq=None):
    """Parameters, per-block breakdown and FLOP per token (``autopar describe --json``)."""
    with _Ctx() as c:
        m = c.model(model)
        return _doc(c, *c.call(c.lib.ap_model_describe_json, c.ptr, m, int(seq or 0)))


@_checked
def export(plan, format, model=None):
    """A plan as a framework's configuration (``autopar export``): returns the text. ``plan`` is a plan file's
    name, or what :func:`plan` returns (the search document, whose winner is exported, or one of its
    ``plans[]``), an estimate document, or a plan object; ``model`` defaults to the one the plan records."""
    with _Ctx() as c:
        p = c.plan(plan, {})
        m = c.model(model) if model else None
        if c.lib.ap_plan_format(p) == 2:  # an op-level plan: read against its graph, written as JSON
            if format != "json":
                raise _error(INVALID, "%s: an autopar-plan/2 plan exports as json only, not %s" %
                             (plan if isinstance(plan, (str, os.PathLike)) else "plan", format))
            status, text = c.call(c.lib.ap_graph_plan_export, c.ptr, m, p)
            c.check(status)
            return text
        status, text = c.call(c.lib.ap_export, c.ptr, m, p, _b(format))
        c.check(status)
        return text


def models():
    """The built-in model presets (``autopar models --json``)."""
    with _Ctx() as c:
        return _doc(c, *c.call(c.lib.ap_models_list_json, c.ptr))


def clusters():
    """The built-in cluster presets (``autopar clusters --json``)."""
    with _Ctx() as c:
        return _doc(c, *c.call(c.lib.ap_clusters_list_json, c.ptr))


@_checked
def cluster(spec):
    """One cluster described (``autopar clusters --show SPEC --json``)."""
    with _Ctx() as c:
        cl = c.cluster(spec)
        return _doc(c, *c.call(c.lib.ap_cluster_describe_json, c.ptr, cl))


@_checked
def report_html(path, title=None, command=None, estimate=None, search=None, trace=None, validate=None,
                compare_search=None):
    """Writes the HTML report (docs/report.md) of the documents given (dicts as the functions above return
    them; ``trace`` is the simulator's trace file as a dict; ``compare_search`` the document of ``autopar
    compare-search --json``) to ``path``."""
    def j(d):
        return None if d is None else json.dumps(d).encode("utf-8")
    with _Ctx() as c:
        r = _ReportInputs(_b(title), _b(command), j(estimate), j(search), j(trace), j(validate), j(compare_search))
        c.check(c.lib.ap_report_html(c.ptr, ctypes.byref(r), _b(path)))


@_checked
def train(document, tokens, price_per_gpu_hour=None, text=False):
    """The time and cost to train on ``tokens`` (e.g. "1T") from an estimate or plan document (a dict as
    ``estimate`` and ``plan`` return it): the document with its "train" object added, as ``--tokens`` gives it
    (docs/json.md), or with ``text=True`` the command's text with the lines on training time and cost."""
    with _Ctx() as c:
        tok = _b(tokens if isinstance(tokens, str) else repr(float(tokens)))
        price = None if price_per_gpu_hour is None else _b(_value(price_per_gpu_hour))
        status, out = c.call(c.lib.ap_render, c.ptr, json.dumps(document).encode("utf-8"), tok, price,
                             _OUT_TEXT if text else _OUT_JSON)
        c.check(status)
        return out if text else json.loads(out)


@_checked
def compare_clusters(model, clusters, gbs, seq=None, tokens=None, price_per_gpu_hour=None, fix=None,
                     calibration=None, **fixed_fields):
    """Plans the model on each cluster and ranks them by time and cost to train (``autopar compare-clusters
    --json``). ``clusters`` is a list or a comma-separated string; ``tokens`` a budget such as "1T" or a number;
    ``price_per_gpu_hour`` one price or a list with one per cluster."""
    with _Ctx(calibration) as c:
        m = c.model(model)
        opts = _SearchOpts()
        c.lib.ap_search_opts_init(ctypes.byref(opts))
        opts.global_batch_size = int(gbs)
        if seq is not None:
            opts.seq_length = int(seq)
        parts = [fix] if fix else []
        parts += ["%s=%s" % (_key(k), _value(v)) for k, v in fixed_fields.items()]
        keep = _b(",".join(parts)) if parts else None
        opts.fix = keep
        tok = None if tokens is None else _b(tokens if isinstance(tokens, str) else repr(float(tokens)))
        price = None if price_per_gpu_hour is None else _b(_value(price_per_gpu_hour))
        return _doc(c, *c.call(c.lib.ap_compare_clusters, c.ptr, m, _b(_value(clusters)), ctypes.byref(opts), tok,
                               price, _OUT_JSON))
