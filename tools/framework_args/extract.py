#!/usr/bin/env python3
"""Extracts the argument names and types that Megatron-LM, DeepSpeed and torchtitan accept, from a fetched
git snapshot of each, into one tab-separated table (tests/data/framework_args.tsv). The export test
(tests/test_export.c) parses every export autopar writes against that table, so that a flag or key a
framework does not define, or a value of the wrong type, fails a test instead of a user's job.

Only the Python standard library is used, and no framework code is imported or run: each source file is
read with `git show COMMIT:PATH` and walked with the ast module.

  Megatron-LM  megatron/training/arguments.py: every `add_argument` call (names, type, action, nargs,
               choices), and every `ArgumentGroupFactory(Cls, exclude=[...]).build_group` call, which
               turns the fields of a config dataclass into flags (megatron/training/argument_utils.py:
               `--field-name`; a bool defaulting to False is store_true, one defaulting to True becomes
               `--no-field-name` and `--disable-field-name`; `argparse_meta` metadata overrides names and
               type; fields with init=False and excluded fields are skipped).
  DeepSpeed    deepspeed/runtime/config.py: the top-level keys read with get_scalar_param(param_dict, KEY,
               DEFAULT) (type from the default in constants.py); the pydantic models DeepSpeedZeroConfig
               (zero_optimization.*, aliases too), DeepSpeedBF16Config (bf16.*) and DeepSpeedFP16Config
               (fp16.*), which forbid unknown keys (config_utils.py, extra="forbid"); the
               activation_checkpointing.* constants; the pipeline.* defaults of get_pipeline_config; the
               `deepspeed` launcher's options (launcher/runner.py, launcher:--name) and those
               deepspeed.add_config_arguments gives a training script (__init__.py, script:--name).
  torchtitan   current (the Python dataclass registry that replaced TOML in commit 9810191b): the fields
               of the dataclasses in torchtitan/config/configs.py as `section.field`, the sections being
               Trainer.Config's fields (torchtitan/trainer.py), the activation-checkpoint configs, the
               model registries (torchtitan/models/*/__init__.py `*_configs` dicts: flavor names and the
               integer sizes each flavor function sets), the full configurations of each model's
               config_registry.py and the quantization converter classes; and what an export must satisfy
               to start: the top-level modules of each model (module:MODEL, the self.NAME = ... of its class's
               __init__, bases included) and the modules torchtitan's own split puts before the first and
               after the last layer (pp:first_stage, pp:last_stage, distributed/pipeline_parallel.py); the
               checks Trainer.Config and CompileConfig raise on, each with the field that lifts it
               (check:cuda_graphs:pp, check:cuda_graphs:ep with the dispatchers it accepts, check:async_tp);
               each registry's default moe_comm_backend and the dispatcher it builds (registry:*,
               comm_backend:*); what each base configuration sets of the loss, compile and CUDA graphs
               (base:MODEL:FUNCTION:FIELD) and the dataclass defaults of those fields (default:*); and
               ChunkedLossWrapper's config (class:, fields, default:…num_chunks).
               torchtitan-toml (v0.2.2, the last release that reads TOML): the fields of the dataclasses in
               torchtitan/config/job_config.py as `section.field` (nested sections as `a.b.field`),
               sections from JobConfig's fields, the model registries of that tag (`*_args` dicts), the
               converter names register_model_converter registers, and module:* and pp:* as above (the head
               was `output` then).

Needs python3 >= 3.9 and git (Debian: python3, git); the build and the tests only read the generated table.

Usage: extract.py MEGATRON_GIT_DIR DEEPSPEED_GIT_DIR TORCHTITAN_GIT_DIR > tests/data/framework_args.tsv
(the git directories as the fetch tool leaves them, /work/.mirror/OWNER+NAME/repo; HEAD is read for
Megatron-LM, DeepSpeed and current torchtitan, tag v0.2.2 for torchtitan-toml).

Table rows: FRAMEWORK <tab> NAME <tab> TYPE [<tab> CHOICES]
  TYPE: flag (takes no value), int, float, str, bool, list:int, list:str, list:list:str, any, custom:FN (a
  Megatron parse function; the test accepts a string), enum:CLS (a member name); a trailing '?' marks an
  optional value (nargs='?'), '+' a list of values on one command line (nargs='+' or '*').
  CHOICES: comma-separated literal values where the source states them.
Special rows: `meta <tab> FRAMEWORK <tab> REPO@COMMIT` (where each part came from) and, for torchtitan,
`model:NAME:FLAVOR <tab> dims:k=v,…` (a flavor and the sizes it sets), `config:NAME:FUNCTION <tab> function`,
`class:CLS.Config <tab> object` (a config class a Python config may construct), `converter:NAME <tab>
object` (a TOML converter name), and the rows of the checks above, whose CHOICES column holds the value
(`module:llama3 <tab> list:str <tab> tok_embeddings,layers,norm,lm_head`, `check:cuda_graphs:pp <tab> needs
<tab> training.disable_cuda_graphs`: the field that must be true, `base:deepseek_v3:deepseek_v3_16b:
compile.components <tab> list:str <tab> loss`). tests/sh_framework_args.sh regenerates the table from fetched
copies at the commits it names, where they are at hand, and compares it byte for byte.
"""
import ast
import subprocess
import sys


def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True, capture_output=True,
                          text=True).stdout


def show(gitdir, commit, path):
    return git(gitdir, "show", f"{commit}:{path}")


def exists(gitdir, commit, path):
    r = subprocess.run(["git", "--git-dir", gitdir, "cat-file", "-e", f"{commit}:{path}"], capture_output=True)
    return r.returncode == 0


def const(node):
    """The literal value of a node (strings, numbers, lists/tuples of them), or None."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def kw(call, name):
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


# ---------------------------------------------------------------- module resolution (both Python repos)

class Repo:
    def __init__(self, gitdir, commit, root_pkgs):
        self.gitdir, self.commit, self.root_pkgs = gitdir, commit, root_pkgs
        self.cache = {}

    def module_file(self, mod):
        base = mod.replace(".", "/")
        for cand in (base + ".py", base + "/__init__.py"):
            if exists(self.gitdir, self.commit, cand):
                return cand
        return None

    def tree(self, path):
        if path not in self.cache:
            self.cache[path] = ast.parse(show(self.gitdir, self.commit, path))
        return self.cache[path]

    @staticmethod
    def _abs(path, level, module):
        if level == 0:
            return module
        pkg = path.rsplit("/", 1)[0].split("/")
        if not path.endswith("__init__.py"):
            pass
        pkg = pkg[: len(pkg) - (level - 1)] if level > 1 else pkg
        return ".".join(pkg + ([module] if module else []))

    def find_class(self, path, name, depth=0):
        """(path, ClassDef) of class `name` as seen from module file `path`, following imports."""
        if depth > 8 or path is None:
            return None
        tree = self.tree(path)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return path, node
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if (a.asname or a.name) == name:
                        mod = self._abs(path, node.level, node.module or "")
                        f = self.module_file(mod)
                        if f:
                            r = self.find_class(f, a.name, depth + 1)
                            if r:
                                return r
        return None

    def find_nested(self, path, dotted):
        """Trainer.Config style: a class nested in a class."""
        parts = dotted.split(".")
        r = self.find_class(path, parts[0])
        if not r:
            return None
        p, node = r
        for part in parts[1:]:
            nxt = [n for n in node.body if isinstance(n, ast.ClassDef) and n.name == part]
            if not nxt:
                return None
            node = nxt[0]
        return p, node


def ann_type(ann, enums=()):
    """A table type for a dataclass annotation."""
    if ann is None:
        return "any", None
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return "any", None
    if isinstance(ann, ast.Name):
        if ann.id in ("int", "float", "str", "bool"):
            return ann.id, None
        return ("enum:" + ann.id if ann.id in enums or ann.id.endswith("Enum") else "any"), None
    if isinstance(ann, ast.Attribute):
        return "any", None
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):  # X | None, int | float
        parts = []
        def flat(n):
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
                flat(n.left); flat(n.right)
            else:
                parts.append(n)
        flat(ann)
        parts = [p for p in parts if not (isinstance(p, ast.Constant) and p.value is None)]
        types = [ann_type(p, enums) for p in parts]
        if len(types) == 1:
            return types[0]
        names = sorted({t for t, _ in types})
        if names == ["float", "int"]:
            return "float", None
        return "any", None
    if isinstance(ann, ast.Subscript):
        head = ann.value.id if isinstance(ann.value, ast.Name) else getattr(ann.value, "attr", "")
        sl = ann.slice
        if head == "Optional":
            return ann_type(sl, enums)
        if head in ("list", "List", "Sequence", "tuple", "Tuple"):
            inner = sl.elts[0] if isinstance(sl, ast.Tuple) else sl
            t, _ = ann_type(inner, enums)
            return "list:" + t, None
        if head == "Literal":
            vals = [const(e) for e in (sl.elts if isinstance(sl, ast.Tuple) else [sl])]
            t = type(vals[0]).__name__ if vals else "str"
            return t, ",".join(str(v) for v in vals)
        if head == "Union":
            elts = [e for e in sl.elts if not (isinstance(e, ast.Constant) and e.value is None)]
            if len(elts) == 1:
                return ann_type(elts[0], enums)
            return "any", None
        if head == "Annotated":
            return ann_type(sl.elts[0], enums)
        return "any", None
    return "any", None


def dataclass_fields(repo, path, cls, seen=None):
    """[(name, annotation, default node or None, field() call or None)] of a dataclass and its bases, base
    fields first (dataclasses.fields order)."""
    out = []
    for b in cls.bases:
        bname = b.id if isinstance(b, ast.Name) else None
        if bname and bname not in ("object",):
            r = repo.find_class(path, bname)
            if r:
                out.extend(dataclass_fields(repo, r[0], r[1]))
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            ann = node.annotation
            if isinstance(ann, ast.Subscript) and getattr(ann.value, "id", "") == "ClassVar":
                continue
            fcall = None
            default = node.value
            if isinstance(node.value, ast.Call) and getattr(node.value.func, "id", getattr(node.value.func, "attr", "")) in ("field", "Field"):
                fcall = node.value
                default = kw(fcall, "default")
                if default is None and fcall.args:
                    default = fcall.args[0]
            out = [f for f in out if f[0] != node.target.id]
            out.append((node.target.id, ann, default, fcall))
    return out


# ---------------------------------------------------------------- Megatron-LM

def argparse_row(node, add):
    """The row of one parser.add_argument(...) call: its option names, type, nargs and choices."""
    names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
             and a.value.startswith("-")]
    if not names:
        return
    action = const(kw(node, "action")) if kw(node, "action") is not None else None
    t = kw(node, "type")
    nargs = const(kw(node, "nargs")) if kw(node, "nargs") is not None else None
    choices = const(kw(node, "choices")) if kw(node, "choices") is not None else None
    if action in ("store_true", "store_false", "store_const", "count", "help", "version"):
        typ = "flag"
    elif t is None:
        typ = "str"
    elif isinstance(t, ast.Name) and t.id in ("int", "float", "str"):
        typ = t.id
    elif isinstance(t, ast.Name):
        typ = "custom:" + t.id
    elif isinstance(t, ast.Attribute):
        typ = "custom:" + t.attr
    else:
        typ = "custom:lambda"
    if nargs in ("+", "*") or isinstance(nargs, int) and nargs > 1:
        typ += "+"
    elif nargs == "?":
        typ += "?"
    ch = ",".join(str(c) for c in choices) if isinstance(choices, (list, tuple)) else None
    add(names, typ, ch)


def megatron(gitdir):
    commit = git(gitdir, "rev-parse", "HEAD").strip()
    repo = Repo(gitdir, commit, ["megatron"])
    path = "megatron/training/arguments.py"
    tree = repo.tree(path)
    rows = {}

    def add(names, typ, choices=None):
        for n in names:
            rows[n] = (typ, choices)

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr == "add_argument":
            argparse_row(node, add)
        elif node.func.attr == "build_group":
            fac = node.func.value
            if isinstance(fac, ast.Name):  # x_factory.build_group: find the assignment
                for a in ast.walk(tree):
                    if isinstance(a, ast.Assign) and any(isinstance(t, ast.Name) and t.id == fac.id for t in a.targets) \
                            and isinstance(a.value, ast.Call) and getattr(a.value.func, "id", "") == "ArgumentGroupFactory":
                        if a.lineno < node.lineno:
                            fac_call = a.value
                factory_rows(repo, path, fac_call, add)
            elif isinstance(fac, ast.Call) and getattr(fac.func, "id", "") == "ArgumentGroupFactory":
                factory_rows(repo, path, fac, add)
    return commit, rows


def factory_rows(repo, path, call, add):
    cls_name = call.args[0].id
    excl = kw(call, "exclude")
    exclude = set(const(excl) or []) if excl is not None else set()
    if excl is not None and isinstance(excl, ast.Name):  # exclude=exclude: the list assigned before
        for a in ast.walk(repo.tree(path)):
            if isinstance(a, ast.Assign) and any(isinstance(t, ast.Name) and t.id == excl.id for t in a.targets):
                exclude = set(const(a.value) or [])
    r = repo.find_class(path, cls_name)
    if not r:
        raise SystemExit(f"megatron: cannot find dataclass {cls_name}")
    cpath, cls = r
    for name, ann, default, fcall in dataclass_fields(repo, cpath, cls):
        if name in exclude:
            continue
        meta = {}
        if fcall is not None:
            if const(kw(fcall, "init")) is False:
                continue
            md = kw(fcall, "metadata")
            if isinstance(md, ast.Dict):
                for k, v in zip(md.keys, md.values):
                    if const(k) == "argparse_meta" and isinstance(v, ast.Dict):
                        for k2, v2 in zip(v.keys, v.values):
                            meta[const(k2)] = v2
        typ, choices = ann_type(ann)
        dflt = const(default) if default is not None else None
        names = ["--" + name.replace("_", "-")]
        if typ == "bool":
            typ = "flag"
            if dflt is True:
                names = ["--no-" + name.replace("_", "-"), "--disable-" + name.replace("_", "-")]
        elif typ.startswith("list:"):
            typ = typ[5:] + "+"
        if "arg_names" in meta:
            names = const(meta["arg_names"]) or names
        if "type" in meta:
            t = meta["type"]
            typ = t.id if isinstance(t, ast.Name) and t.id in ("int", "float", "str") else \
                "custom:" + (t.id if isinstance(t, ast.Name) else getattr(t, "attr", "lambda"))
        if "action" in meta and const(meta["action"]) in ("store_true", "store_false"):
            typ = "flag"
        if "nargs" in meta and const(meta["nargs"]) in ("+", "*") and not typ.endswith("+"):
            typ += "+"
        if "choices" in meta and isinstance(const(meta["choices"]), (list, tuple)):
            choices = ",".join(str(c) for c in const(meta["choices"]))
        add(names, typ, choices)


# ---------------------------------------------------------------- DeepSpeed

def pydantic_rows(repo, path, cls_name, prefix, rows):
    r = repo.find_class(path, cls_name)
    if not r:
        raise SystemExit(f"deepspeed: cannot find {cls_name}")
    for name, ann, default, fcall in dataclass_fields(repo, r[0], r[1]):
        typ, choices = ann_type(ann, enums=("ZeroStageEnum",))
        if typ.startswith("enum:ZeroStageEnum"):
            typ, choices = "int", "0,1,2,3"
        if ann is not None and isinstance(ann, (ast.Name, ast.Subscript)) and typ == "any":
            # a nested model (offload_param …): an object
            typ = "object"
        rows[prefix + name] = (typ, choices)
        if fcall is not None and kw(fcall, "alias") is not None:
            rows[prefix + const(kw(fcall, "alias"))] = (typ, choices)


def deepspeed(gitdir):
    commit = git(gitdir, "rev-parse", "HEAD").strip()
    repo = Repo(gitdir, commit, ["deepspeed"])
    consts = {}
    for f in ("deepspeed/runtime/constants.py", "deepspeed/runtime/activation_checkpointing/config.py"):
        for node in repo.tree(f).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                consts[node.targets[0].id] = node.value
    rows = {}

    def typ_of(default_name):
        v = consts.get(default_name)
        val = const(v) if v is not None else None
        if isinstance(val, bool):
            return "bool"
        if isinstance(val, int):
            return "int"
        if isinstance(val, float):
            return "float"
        if isinstance(val, str):
            return "str"
        return "any"

    cfg = repo.tree("deepspeed/runtime/config.py")
    for node in ast.walk(cfg):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "get_scalar_param" and len(node.args) >= 3:
            d, k, dflt = node.args[:3]
            if isinstance(d, ast.Name) and d.id == "param_dict" and isinstance(k, ast.Name) and k.id in consts:
                key = const(consts[k.id])
                if isinstance(key, str):
                    rows[key] = (typ_of(dflt.id) if isinstance(dflt, ast.Name) else "any", None)
    # sections read as objects: the zero, precision and checkpointing models and dicts
    for key in ("zero_optimization", "bf16", "fp16", "activation_checkpointing", "pipeline"):
        rows[key] = ("object", None)
    pydantic_rows(repo, "deepspeed/runtime/zero/config.py", "DeepSpeedZeroConfig", "zero_optimization.", rows)
    pydantic_rows(repo, "deepspeed/runtime/precision_config.py", "DeepSpeedBF16Config", "bf16.", rows)
    pydantic_rows(repo, "deepspeed/runtime/precision_config.py", "DeepSpeedFP16Config", "fp16.", rows)
    for name, v in consts.items():
        if name.startswith("ACT_CHKPT_") and not name.endswith("_DEFAULT") and name not in ("ACT_CHKPT", "ACT_CHKPT_FORMAT"):
            key = const(v)
            if isinstance(key, str):
                rows["activation_checkpointing." + key] = (typ_of(name + "_DEFAULT"), None)
    # the `deepspeed` launcher's options (deepspeed/launcher/runner.py parse_args), as launcher:--name
    # and the arguments deepspeed.add_config_arguments gives a training script (deepspeed/__init__.py), script:--name
    for prefix, path in (("launcher:", "deepspeed/launcher/runner.py"), ("script:", "deepspeed/__init__.py")):
        for node in ast.walk(repo.tree(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                argparse_row(node, lambda names, typ, ch: rows.update({prefix + n: (typ, ch) for n in names}))
    for node in ast.walk(cfg):
        if isinstance(node, ast.FunctionDef) and node.name == "get_pipeline_config":
            for a in ast.walk(node):
                if isinstance(a, ast.Dict):
                    for k, v in zip(a.keys, a.values):
                        val = const(v)
                        t = "bool" if isinstance(val, bool) else "int" if isinstance(val, int) else "str"
                        rows["pipeline." + const(k)] = (t, None)
    return commit, rows


# ---------------------------------------------------------------- torchtitan

def model_dirs(repo):
    """The folders of torchtitan/models/ at the repository's commit."""
    return git(repo.gitdir, "ls-tree", "--name-only", repo.commit, "torchtitan/models/").split()


def model_files(repo, suffix):
    """(folder, folder + suffix) for each model folder that has that file."""
    return [(d, d + suffix) for d in model_dirs(repo) if exists(repo.gitdir, repo.commit, d + suffix)]


def model_registries(repo, out):
    """model:NAME:FLAVOR rows from torchtitan/models/*/__init__.py: the keys of a module-level `*_configs`
    dict, and the integer sizes the flavor's value sets (keyword or plain assignments in the function it
    names, or in the call it is)."""
    for d, path in model_files(repo, "/__init__.py"):
        name = d.rsplit("/", 1)[1]
        tree = repo.tree(path)
        funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        for node in tree.body:
            tgt = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
                node.target if isinstance(node, ast.AnnAssign) else None
            if not (isinstance(tgt, ast.Name) and tgt.id.endswith(("_configs", "_args"))
                    and isinstance(node.value, ast.Dict)):
                continue
            for k, v in zip(node.value.keys, node.value.values):
                flavor = const(k)
                if not isinstance(flavor, str):
                    continue
                body = funcs.get(v.id) if isinstance(v, ast.Name) else v
                dims = {}
                if body is not None:
                    for a in ast.walk(body):
                        if isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name):
                            val = const(a.value)
                            if isinstance(val, int) and not isinstance(val, bool):
                                dims.setdefault(a.targets[0].id, val)
                        if isinstance(a, ast.keyword) and a.arg:
                            val = const(a.value)
                            if isinstance(val, int) and not isinstance(val, bool):
                                dims.setdefault(a.arg, val)
                keep = {k2: dims[k2] for k2 in sorted(dims) if k2 in
                        ("dim", "n_layers", "n_heads", "n_kv_heads", "hidden_dim", "moe_inter_dim", "num_experts",
                         "n_dense_layers", "q_lora_rank", "kv_lora_rank", "head_dim", "vocab_size", "top_k")}
                out[f"model:{name}:{flavor}"] = ("dims:" + ",".join(f"{a}={b}" for a, b in keep.items()), None)


def class_of_annotation(ann):
    a = ann
    if isinstance(a, ast.Subscript) and getattr(a.value, "id", "") == "Annotated":
        a = a.slice.elts[0]
    if isinstance(a, ast.Name):
        return a.id
    if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name):
        return a.value.id + "." + a.attr
    return None


def nested_rows(repo, path, cls, prefix, out, depth=0):
    """`prefix.field` rows of a dataclass, descending into fields whose type is another dataclass."""
    for name, fann, d, fc in dataclass_fields(repo, path, cls):
        cname = class_of_annotation(fann)
        sub = repo.find_nested(path, cname) if cname and cname not in ("int", "float", "str", "bool") else None
        if sub is not None and depth < 3:
            out[f"{prefix}{name}"] = ("object", None)
            nested_rows(repo, sub[0], sub[1], f"{prefix}{name}.", out, depth + 1)
        else:
            t, ch = ann_type(fann)
            out[f"{prefix}{name}"] = (t, ch)


def config_functions(repo, out):
    """config:MODEL:FUNCTION rows: the full configurations torchtitan/models/MODEL/config_registry.py defines
    (selected with --module MODEL --config FUNCTION), the public top-level functions."""
    for d, path in model_files(repo, "/config_registry.py"):
        for node in repo.tree(path).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                out[f"config:{d.rsplit('/', 1)[1]}:{node.name}"] = ("function", None)


def section_rows(repo, path, root_cls, out):
    r = repo.find_nested(path, root_cls)
    if not r:
        raise SystemExit(f"torchtitan: cannot find {root_cls} in {path}")
    nested_rows(repo, r[0], r[1], "", out)


def converters(repo, out):
    """converter:NAME rows: the names register_model_converter(Cls, NAME) registers (torchtitan before the
    dataclass registry, where [model] converters lists them)."""
    for f in git(repo.gitdir, "ls-tree", "-r", "--name-only", repo.commit, "torchtitan/components/").split():
        if not f.endswith(".py"):
            continue
        for node in ast.walk(repo.tree(f)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "register_model_converter" \
                    and len(node.args) == 2 and isinstance(const(node.args[1]), str):
                out["converter:" + const(node.args[1])] = ("object", None)


def attr_chain(node):
    """"self.a.b" as ["self", "a", "b"] for a chain of attributes over a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def model_modules(repo, out):
    """module:MODEL rows: the top-level modules the model's class builds in __init__ (self.NAME = a call, as
    nn.Embedding(...), ModuleDict() or config.NAME.build()), its bases' included: the names
    module_fqns_per_model_part may list (distributed/pipeline_parallel.py _split_module sets every other child
    to None)."""
    listing = model_dirs(repo)
    for d in listing:
        name = d.rsplit("/", 1)[1]
        path = next((f for f in (d + "/model.py", d + "/model/model.py") if exists(repo.gitdir, repo.commit, f)), None)
        if path is None:
            continue

        def init_names(p, cls, depth=0):
            names = []
            for b in cls.bases:
                bn = b.id if isinstance(b, ast.Name) else None
                r = repo.find_class(p, bn) if bn and depth < 6 else None
                if r:
                    names += init_names(r[0], r[1], depth + 1)
            for f in cls.body:
                if isinstance(f, ast.FunctionDef) and f.name == "__init__":
                    for a in ast.walk(f):
                        if isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.value, ast.Call):
                            ch = attr_chain(a.targets[0])
                            if ch and len(ch) == 2 and ch[0] == "self" and ch[1] not in names:
                                names.append(ch[1])
            return names

        found = []
        for node in repo.tree(path).body:
            if isinstance(node, ast.ClassDef):
                names = init_names(path, node)
                if "tok_embeddings" in names:
                    found += [n for n in names if n not in found]
        if found:
            out[f"module:{name}"] = ("list:str", ",".join(found))


def pp_stage_modules(repo, out):
    """pp:first_stage and pp:last_stage rows: the modules torchtitan's own split puts before the first layer and
    after the last ((_)generate_llm_fqn_per_model_part, distributed/pipeline_parallel.py)."""
    path = "torchtitan/distributed/pipeline_parallel.py"
    fn = next((n for n in ast.walk(repo.tree(path)) if isinstance(n, ast.FunctionDef)
               and n.name in ("generate_llm_fqn_per_model_part", "_generate_llm_fqn_per_model_part")), None)
    if fn is None:
        raise SystemExit(f"torchtitan@{repo.commit[:8]}: no generate_llm_fqn_per_model_part in {path}")
    first, last = [], []
    for a in ast.walk(fn):
        if isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and attr_chain(a.func.value) == ["stage_modules"]:
            if a.func.attr == "append" and isinstance(const(a.args[0]), str) and not first:
                first = [const(a.args[0])]
            if a.func.attr == "extend" and isinstance(const(a.args[0]), list):
                last = const(a.args[0])
    if not first or not last:
        raise SystemExit(f"torchtitan@{repo.commit[:8]}: the split's first and last stage modules not found")
    out["pp:first_stage"] = ("list:str", ",".join(first))
    out["pp:last_stage"] = ("list:str", ",".join(last))


def raises_under(fn, test_chain):
    """Whether function fn raises inside an `if` whose test compares the attribute chain test_chain."""
    for n in ast.walk(fn):
        if isinstance(n, ast.If) and any(isinstance(c, ast.Compare) and attr_chain(c.left) == test_chain
                                         for c in ast.walk(n.test)):
            if any(isinstance(r, ast.Raise) for r in ast.walk(n)):
                return True
    return False


def escape_field(fn):
    """The field whose truth returns early from fn (`if self.a.b: return`), as "a.b", or None."""
    for n in fn.body:
        if isinstance(n, ast.If) and len(n.body) == 1 and isinstance(n.body[0], ast.Return):
            ch = attr_chain(n.test)
            if ch and ch[0] == "self":
                return ".".join(ch[1:])
    return None


def checks(repo, out):
    """check:* rows: the configurations torchtitan refuses when it builds its Trainer.Config (trainer.py
    _validate_cuda_graphs, config/configs.py CompileConfig.__post_init__), each as the field that lifts it;
    the token dispatchers CUDA graphs accept with expert parallelism; which dispatcher each model's registry
    builds by default (models/MODEL/__init__.py model_registry, models/common/config_utils.py)."""
    tree = repo.tree("torchtitan/trainer.py")
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_validate_cuda_graphs"), None)
    if fn is not None:
        esc = escape_field(fn)
        if esc and raises_under(fn, ["self", "parallelism", "pipeline_parallel_degree"]):
            out["check:cuda_graphs:pp"] = ("needs", esc)
        if esc and raises_under(fn, ["self", "parallelism", "expert_parallel_degree"]) or any(
                isinstance(r, ast.Raise) for r in ast.walk(fn)):
            ok = []
            for c in ast.walk(fn):
                if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "isinstance" and len(c.args) == 2:
                    ch = attr_chain(c.args[1])
                    if ch and len(ch) == 2 and ch[1] == "Config" and ch[0] not in ok:
                        ok.append(ch[0])
            out["check:cuda_graphs:ep"] = ("needs", esc)
            out["check:cuda_graphs:ep_dispatchers"] = ("list:str", ",".join(ok))
    cfg = repo.tree("torchtitan/config/configs.py")
    for cls in ast.walk(cfg):
        if isinstance(cls, ast.ClassDef) and cls.name == "CompileConfig":
            post = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__post_init__"), None)
            if post is not None and raises_under(post, ["self", "components"]) or post is not None and any(
                    isinstance(n, ast.If) and "enable_async_tensor_parallel" in ast.dump(n.test)
                    and "components" in ast.dump(n.test) and any(isinstance(r, ast.Raise) for r in ast.walk(n))
                    for n in ast.walk(post)):
                out["check:async_tp"] = ("needs", "compile.enable,compile.components:model")
            for name, ann, d, fc in dataclass_fields(repo, "torchtitan/config/configs.py", cls):
                dv = const(d) if d is not None else None
                if dv is None and fc is not None and isinstance(kw(fc, "default_factory"), ast.Lambda):
                    dv = const(kw(fc, "default_factory").body)
                if isinstance(dv, (bool, list)):
                    out[f"default:compile.{name}"] = ("bool" if isinstance(dv, bool) else "list:str",
                                                      str(dv) if isinstance(dv, bool) else ",".join(dv))
        if isinstance(cls, ast.ClassDef) and cls.name == "TrainingConfig":
            for name, ann, d, fc in dataclass_fields(repo, "torchtitan/config/configs.py", cls):
                if name == "disable_cuda_graphs":
                    out["default:training.disable_cuda_graphs"] = ("bool", str(const(d)))
    # the dispatcher each comm backend builds, and each registry's default backend
    cu = "torchtitan/models/common/config_utils.py"
    if exists(repo.gitdir, repo.commit, cu):
        for fn2 in ast.walk(repo.tree(cu)):
            if isinstance(fn2, ast.FunctionDef) and fn2.name == "make_token_dispatcher_config":
                for n in ast.walk(fn2):
                    if isinstance(n, ast.If) and isinstance(n.test, ast.Compare) and isinstance(const(n.test.comparators[0]), str):
                        for r in n.body:
                            if isinstance(r, ast.Return) and isinstance(r.value, ast.Call):
                                ch = attr_chain(r.value.func)
                                if ch and len(ch) == 2:
                                    out["comm_backend:" + const(n.test.comparators[0])] = ("str", ch[0])
    for d, path in model_files(repo, "/__init__.py"):
        # model_registry's default; where it passes None on, the flavor functions' one default
        defaults = {}
        for fn2 in repo.tree(path).body:
            if isinstance(fn2, ast.FunctionDef):
                args = fn2.args.args[len(fn2.args.args) - len(fn2.args.defaults):] + fn2.args.kwonlyargs
                dvs = fn2.args.defaults + [x for x in fn2.args.kw_defaults]
                for a2, dv in zip(args, dvs):
                    if a2.arg == "moe_comm_backend" and dv is not None:
                        defaults.setdefault(fn2.name == "model_registry", set()).add(const(dv))
        reg = defaults.get(True, set()) - {None}
        flav = defaults.get(False, set()) - {None}
        backend = reg if reg else flav if None in defaults.get(True, set()) and len(flav) == 1 else set()
        if len(backend) == 1:
            out[f"registry:{d.rsplit('/', 1)[1]}:moe_comm_backend"] = ("str", backend.pop())


def call_fields(call, func_body):
    """The keyword arguments of a config construction, a Name resolved to the call assigned to it in
    func_body."""
    if isinstance(call, ast.Name):
        for n in ast.walk(func_body):
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == call.id for t in n.targets) \
                    and isinstance(n.value, ast.Call):
                return n.value
        return None
    return call if isinstance(call, ast.Call) else None


def base_configs(repo, out):
    """base:MODEL:FUNCTION:FIELD rows for what the export keeps of each base configuration in
    models/MODEL/config_registry.py: the loss class it constructs (loss=X.Config(...)), its compile settings
    (compile=CompileConfig(enable=..., components=[...], ...)) and training.disable_cuda_graphs where it sets
    them, so that the checks above can be applied to base + export."""
    for d, path in model_files(repo, "/config_registry.py"):
        model = d.rsplit("/", 1)[1]
        for fn in repo.tree(path).body:
            if not (isinstance(fn, ast.FunctionDef) and not fn.name.startswith("_")):
                continue
            key = f"base:{model}:{fn.name}:"
            for n in ast.walk(fn):
                if isinstance(n, ast.Call) and attr_chain(n.func) == ["Trainer", "Config"]:
                    for k in n.keywords:
                        if k.arg == "loss" and isinstance(k.value, ast.Call):
                            ch = attr_chain(k.value.func)
                            if ch and len(ch) == 2:
                                out[key + "loss"] = ("str", ch[0])
                        if k.arg == "compile":
                            c = call_fields(k.value, fn)
                            for k2 in (c.keywords if c is not None else []):
                                v = const(k2.value)
                                if isinstance(v, bool):
                                    out[key + "compile." + k2.arg] = ("bool", str(v))
                                elif isinstance(v, list):
                                    out[key + "compile." + k2.arg] = ("list:str", ",".join(v))
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and attr_chain(n.targets[0]) == \
                        ["config", "training", "disable_cuda_graphs"] and isinstance(const(n.value), bool):
                    out[key + "training.disable_cuda_graphs"] = ("bool", str(const(n.value)))


def chunked_loss(repo, out):
    """class:ChunkedLossWrapper.Config and its fields with their defaults (components/loss.py): the chunked
    loss the base configs use, which autopar's torchtitan stack models as its fused loss."""
    path = "torchtitan/components/loss.py"
    for cls in ast.walk(repo.tree(path)):
        if isinstance(cls, ast.ClassDef) and cls.name == "ChunkedLossWrapper":
            inner = next((n for n in cls.body if isinstance(n, ast.ClassDef) and n.name == "Config"), None)
            if inner is None:
                continue
            out["class:ChunkedLossWrapper.Config"] = ("object", None)
            for name, ann, d, fc in dataclass_fields(repo, path, inner):
                t, ch = ann_type(ann)
                out[f"ChunkedLossWrapper.Config.{name}"] = (t, ch)
                if isinstance(const(d) if d is not None else None, int):
                    out[f"default:ChunkedLossWrapper.Config.{name}"] = (t, str(const(d)))


def torchtitan(gitdir):
    commit = git(gitdir, "rev-parse", "HEAD").strip()
    repo = Repo(gitdir, commit, ["torchtitan"])
    rows = {}
    section_rows(repo, "torchtitan/trainer.py", "Trainer.Config", rows)
    # activation_checkpoint takes one of these configs (torchtitan/distributed/activation_checkpoint.py)
    acp = "torchtitan/distributed/activation_checkpoint.py"
    for node in repo.tree(acp).body:
        if isinstance(node, ast.ClassDef):
            inner = [n for n in node.body if isinstance(n, ast.ClassDef) and n.name == "Config"]
            if inner:
                rows[f"class:{node.name}.Config"] = ("object", None)
                for name, fann, d, fc in dataclass_fields(repo, acp, inner[0]):
                    t, ch = ann_type(fann)
                    rows[f"{node.name}.Config.{name}"] = (t, ch)
    qpath = repo.module_file("torchtitan.components.quantization")
    if qpath:
        for node in ast.walk(repo.tree(qpath)):
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if a.name.endswith("Converter"):
                        rows[f"class:{a.name}.Config"] = ("object", None)
    model_registries(repo, rows)
    config_functions(repo, rows)
    model_modules(repo, rows)
    pp_stage_modules(repo, rows)
    checks(repo, rows)
    base_configs(repo, rows)
    chunked_loss(repo, rows)
    tag = "v0.2.2"
    toml_commit = git(gitdir, "rev-list", "-n", "1", tag).strip()
    old = Repo(gitdir, toml_commit, ["torchtitan"])
    trows = {}
    section_rows(old, "torchtitan/config/job_config.py", "JobConfig", trows)
    model_registries(old, trows)
    converters(old, trows)
    model_modules(old, trows)
    pp_stage_modules(old, trows)
    return commit, rows, toml_commit, trows


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: extract.py MEGATRON_GIT_DIR DEEPSPEED_GIT_DIR TORCHTITAN_GIT_DIR > tests/data/framework_args.tsv")
    mg_commit, mg = megatron(sys.argv[1])
    ds_commit, ds = deepspeed(sys.argv[2])
    tt_commit, tt, tt_toml_commit, tt_toml = torchtitan(sys.argv[3])
    print("# Generated by tools/framework_args/extract.py; do not edit. Columns: framework, name, type[, choices].")
    print(f"meta\tmegatron\tNVIDIA/Megatron-LM@{mg_commit}")
    print(f"meta\tdeepspeed\tdeepspeedai/DeepSpeed@{ds_commit}")
    print(f"meta\ttorchtitan\tpytorch/torchtitan@{tt_commit}")
    print(f"meta\ttorchtitan-toml\tpytorch/torchtitan@{tt_toml_commit} (v0.2.2)")
    for fw, rows in (("megatron", mg), ("deepspeed", ds), ("torchtitan", tt), ("torchtitan-toml", tt_toml)):
        for name in sorted(rows):
            t, ch = rows[name]
            print(f"{fw}\t{name}\t{t}" + (f"\t{ch}" if ch else ""))


if __name__ == "__main__":
    main()
