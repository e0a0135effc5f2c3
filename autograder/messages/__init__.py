"""The fixed sentences of learner-facing reports, in the learner's language.

    from autograder import messages
    messages.text("case.expected")                 # "expected:" or "期望："
    messages.text("test.title", lab="lab01", name="softmax_is_stable", score=3, max_score=9)
    messages.sentence("Keep the name `softmax` from the stub; ...")   # a fixed hint, translated if known

The language is the `lang` argument, else the COURSE_LANG environment variable, else the
"language" metadata of the notebook this kernel runs (Jupyter Server names it in
JPY_SESSION_NAME; the Chinese release carries "language": "zh"), else English. Catalogs are
JSON files next to this module: <lang>.json maps message ids to templates (str.format fields
such as {lab}); its "sentences" table maps English hint sentences to their translation, and
its "frames" table the fixed failure messages of core.py/checks.py and the notebook problems
(`your code raised {kind}: {error}`). A key of either table may be a template: `Check `{param}` first and raise {exc} ...` matches any
sentence whose fixed parts are those, and the values it captured go unchanged into the
translated template ({{ and }} stand for literal braces). Values (expected, got, numbers,
names, code) are inserted as they are, never translated. A message id missing from a
catalog falls back to English; a sentence without a translation stays English.

`hint_templates()` finds, with a static scan of the graders, every hint sentence they can
produce (f-string fields become {placeholders}); tests/test_messages.py requires a
translation of each.
"""
from __future__ import annotations

import ast
import functools
import json
import os
import re
import string
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LANG_ENV = "COURSE_LANG"
SESSION_ENV = "JPY_SESSION_NAME"   # Jupyter Server: the path of the notebook a kernel runs


@functools.lru_cache(maxsize=None)
def catalog(lang: str) -> dict:
    path = HERE / f"{lang}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def languages() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.json"))


def _known(lang) -> str | None:
    if not isinstance(lang, str) or not lang.strip():
        return None
    chosen = lang.strip().split("_")[0].split("-")[0].split(".")[0].lower()
    return chosen if chosen in languages() else None


@functools.lru_cache(maxsize=16)
def _notebook_language_cached(path: str, mtime: float) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f).get("metadata", {})
    except (OSError, ValueError, AttributeError):
        return None
    return meta.get("language") if isinstance(meta, dict) and isinstance(meta.get("language"), str) else None


def notebook_language(path) -> str | None:
    """The "language" of a notebook's metadata ("zh" for the Chinese release), or None."""
    try:
        p = Path(path).expanduser()
        return _notebook_language_cached(str(p), p.stat().st_mtime)
    except (OSError, TypeError, ValueError):
        return None


def session_notebook() -> Path | None:
    """The notebook this kernel runs, from JPY_SESSION_NAME (set by Jupyter Server in the
    kernel's environment; an absolute path, or relative to the server's root, which is
    the kernel's working folder's ancestor)."""
    name = os.environ.get(SESSION_ENV)
    if not name or not name.endswith(".ipynb"):
        return None
    p = Path(name).expanduser()
    if p.is_absolute():
        return p if p.is_file() else None
    cwd = Path.cwd().resolve()
    for base in (cwd, *cwd.parents):     # the server root is the working folder or above it
        if (base / p).is_file():
            return base / p
    return None


def language(lang: str | None = None) -> str:
    """The language to report in: `lang`, else $COURSE_LANG, else the language of the
    notebook this kernel runs ($JPY_SESSION_NAME), else "en". Unknown languages give "en"."""
    for choice in (lang, os.environ.get(LANG_ENV)):
        if choice:
            return _known(choice) or "en"
    nb = session_notebook()
    return (_known(notebook_language(nb)) if nb else None) or "en"


def text(msg_id: str, lang: str | None = None, **values) -> str:
    """The template `msg_id` in the chosen language, filled with `values`."""
    english = catalog("en")["messages"]
    if msg_id not in english:
        raise KeyError(f"`msg_id` must be one of the message ids in en.json, got {msg_id!r}.")
    template = catalog(language(lang)).get("messages", {}).get(msg_id) or english[msg_id]
    return template.format(**values)


# ---------------------------------------------------------------- sentences and templates

def fields(template: str) -> list[str]:
    """The {placeholders} of a sentence template, in order ({{ and }} are literal braces)."""
    try:
        return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError:
        return []


def _parts(template: str) -> list[tuple[str, str | None]]:
    """(literal, field) pairs: str.format syntax, but a field is only a name (no spec)."""
    out, i, lit, n = [], 0, [], len(template)
    while i < n:
        ch = template[i]
        if template.startswith("{{", i) or template.startswith("}}", i):
            lit.append(ch)
            i += 2
        elif ch == "{":
            j = template.find("}", i)
            if j < 0:
                raise ValueError(f"unbalanced '{{' in {template!r}")
            out.append(("".join(lit), template[i + 1:j]))
            lit, i = [], j + 1
        else:
            lit.append(ch)
            i += 1
    out.append(("".join(lit), None))
    return out


def fill(template: str, values: dict) -> str:
    """A template with its fields replaced by `values` (text, inserted as it is)."""
    return "".join(lit + (values[f] if f is not None else "") for lit, f in _parts(template))


def _compile(template: str) -> re.Pattern:
    pattern, seen = [], {}
    for lit, f in _parts(template):
        pattern.append(re.escape(lit))
        if f is None:
            continue
        if f in seen:
            pattern.append(f"(?P={seen[f]})")
        else:
            seen[f] = f"f{len(seen)}"
            pattern.append(f"(?P<{seen[f]}>.*?)")
    return re.compile("".join(pattern), re.DOTALL)


@functools.lru_cache(maxsize=None)
def _table(lang: str) -> dict[str, str]:
    """English -> translation: the hint "sentences" and the fixed "frames" of failure
    messages and notebook problems (your code raised ..., no function named ...)."""
    return {**catalog(lang).get("frames", {}), **catalog(lang).get("sentences", {})}


@functools.lru_cache(maxsize=None)
def _templates(lang: str) -> list[tuple[re.Pattern, list[str], str]]:
    """The template entries of a catalog's sentences, compiled once, most specific first."""
    out = []
    for key, value in _table(lang).items():
        names = list(dict.fromkeys(fields(key)))
        if not names:
            continue
        literal = sum(len(lit) for lit, _ in _parts(key))
        out.append((literal, _compile(key), names, value))
    out.sort(key=lambda t: -t[0])
    return [(rx, names, value) for _, rx, names, value in out]


def sentence(english: str, lang: str | None = None) -> str:
    """A fixed English sentence (a hint) in the chosen language, or unchanged if not in the
    catalog: an exact entry first, else the most specific template whose fixed parts match."""
    if not isinstance(english, str) or not english:
        return english
    lang = language(lang)
    if lang == "en":
        return english
    table = _table(lang)
    exact = table.get(english)
    if exact is not None and not fields(english):
        return exact
    escaped = english.replace("{", "{{").replace("}", "}}")
    if escaped in table and not fields(escaped):
        return table[escaped]
    for rx, names, value in _templates(lang):
        m = rx.fullmatch(english)
        if m and all(_balanced(v) for v in m.groups()):
            return fill(value, {n: m.group(f"f{i}") for i, n in enumerate(names)})
    return english


def _balanced(value: str) -> bool:
    """True when a captured value opens and closes its brackets in order: a value such as
    "0) (your value is in bits" means the template matched a longer sentence than it was
    written for (one with a clause added), which then stays English."""
    depth = 0
    for ch in value:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


# ---------------------------------------------------------------- finding the hint sentences

HINT_NAME = re.compile(r"hint", re.IGNORECASE)
# functions that return (sentence, hint): the element that is a hint
HINT_RETURNS = {"explain": 1}
# classes whose positional argument at this index a learner reads: core.Case's `hint` field,
# core.Test's `description` (the line under each test in feedback.md and on Gradescope)
HINT_POSITIONS = {"Case": 6, "Test": 2}


def hint_files(root: Path | None = None) -> list[Path]:
    """The modules whose hints reach a learner: the graders, checks.py, core.py and the
    isolated harness (which reports a case the way core.py does)."""
    ag = Path(root or ROOT) / "autograder"
    return [ag / "core.py", ag / "checks.py"] + sorted((ag / "graders").rglob("*.py")) + \
        sorted((ag / "isolation").glob("*.py"))


def _placeholder(node) -> str:
    name = re.sub(r"\W+", "_", ast.unparse(node)).strip("_")
    return "{" + (name or "value") + "}"


def _pytest_grader(node) -> bool:
    """True inside a lab's package of pytest graders (autograder/graders/labNN/), where an
    assert's message and @pytest.mark.cell(description=...) are what a learner reads."""
    return bool(re.fullmatch(r"lab\d\d", Path(getattr(node, "_path", "")).parent.name))


class _Scan:
    """Follows every expression that becomes a hint back to the strings it can hold."""

    def __init__(self, files):
        self.trees = {}
        self.parent = {}
        self.funcs: dict[str, list] = {}
        self.assigns: dict[tuple, list] = {}       # (scope id, name) -> value expressions
        self.calls: dict[str, list] = {}           # function name -> Call nodes
        self.found: dict[str, set] = {}
        self.seen: set = set()
        self.params_done: set = set()
        for path in files:
            tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=str(path))
            self.trees[path] = tree
            for node in ast.walk(tree):
                for child in ast.iter_child_nodes(node):
                    self.parent[child] = node
                    child._path = path
            tree._path = path
        for path, tree in self.trees.items():
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and hasattr(node, "name"):
                    self.funcs.setdefault(node.name, []).append(node)
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if isinstance(t, ast.Name):
                            self.assigns.setdefault((id(self.scope(node)), t.id), []).append((node.value, None))
                        elif isinstance(t, (ast.Tuple, ast.List)):     # a, b = f(): the i-th of what f returns
                            for i, e in enumerate(t.elts):
                                if isinstance(e, ast.Name):
                                    self.assigns.setdefault((id(self.scope(node)), e.id), []).append((node.value, i))
                        elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                            self.assigns.setdefault((id(self.scope(node)), t.value.id), []).append((node.value, None))
                if isinstance(node, ast.Call):
                    fname = self._callee(node)
                    if fname:
                        self.calls.setdefault(fname, []).append(node)
                    if (isinstance(node.func, ast.Attribute) and node.func.attr in ("update", "setdefault")
                            and isinstance(node.func.value, ast.Name)):
                        self.assigns.setdefault((id(self.scope(node)), node.func.value.id), []).extend(
                            (a, None) for a in (node.args[-1:] if node.func.attr == "setdefault" else node.args))

    @staticmethod
    def _names(target):
        if isinstance(target, ast.Name):
            return [target.id]
        if isinstance(target, (ast.Tuple, ast.List)):
            return [n for e in target.elts for n in _Scan._names(e)]
        return []

    @staticmethod
    def _callee(call):
        f = call.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None

    def scope(self, node):
        p = self.parent.get(node)
        while p is not None and not isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)):
            p = self.parent.get(p)
        return p

    def where(self, node) -> str:
        path = Path(getattr(node, "_path", "?"))
        try:
            path = path.relative_to(ROOT)
        except ValueError:
            pass
        return f"{path}:{getattr(node, 'lineno', 0)}"

    # -- seeds
    def run(self) -> dict[str, set]:
        for tree in self.trees.values():
            for node in ast.walk(tree):
                if isinstance(node, ast.keyword) and node.arg and HINT_NAME.search(node.arg):
                    self.hint(node.value)
                elif isinstance(node, ast.Dict):       # {"message": ..., "hint": ...} (the isolated child)
                    for k, v in zip(node.keys, node.values):
                        if isinstance(k, ast.Constant) and isinstance(k.value, str) and HINT_NAME.search(k.value):
                            self.hint(v)
                elif isinstance(node, ast.Assert) and node.msg is not None and _pytest_grader(node):
                    self.hint(node.msg)
                elif isinstance(node, ast.Call) and self._callee(node) == "cell" and _pytest_grader(node):
                    for k in node.keywords:
                        if k.arg == "description":
                            self.hint(k.value)
                elif isinstance(node, ast.Call) and self._callee(node) in HINT_POSITIONS:
                    i = HINT_POSITIONS[self._callee(node)]
                    if i < len(node.args) and not any(isinstance(a, ast.Starred) for a in node.args[:i + 1]):
                        self.hint(node.args[i])
                elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if isinstance(t, ast.Name) and HINT_NAME.search(t.id):
                            self.hint(node.value)
                        elif isinstance(t, (ast.Tuple, ast.List)):
                            for i, e in enumerate(t.elts):
                                if isinstance(e, ast.Name) and HINT_NAME.search(e.id):
                                    self.value(node.value, i)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
                        if HINT_NAME.search(a.arg):
                            self.param(node, a.arg)
                    if node.name in HINT_RETURNS:
                        for r in ast.walk(node):
                            if isinstance(r, ast.Return) and isinstance(r.value, ast.Tuple):
                                self.hint(r.value.elts[HINT_RETURNS[node.name]])
        return self.found

    # -- following values
    def hint(self, node):
        if node is None or id(node) in self.seen:
            return
        self.seen.add(id(node))
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str) and node.value.strip():
                self.add(node.value.replace("{", "{{").replace("}", "}}"), node)
        elif isinstance(node, (ast.JoinedStr, ast.BinOp)):
            for t in self.template(node):
                self.add(t, node)
        elif isinstance(node, ast.IfExp):
            self.hint(node.body)
            self.hint(node.orelse)
        elif isinstance(node, ast.BoolOp):
            for v in node.values:
                self.hint(v)
        elif isinstance(node, ast.Dict):
            for v in node.values:
                self.hint(v)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for v in node.elts:
                self.hint(v)
        elif isinstance(node, ast.Name):
            self.name(node.id, node)
        elif isinstance(node, ast.Subscript):
            self.hint(node.value)
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in ("get", "format", "strip", "rstrip"):
                self.hint(f.value)
                if f.attr == "get" and len(node.args) > 1:
                    self.hint(node.args[1])
            elif isinstance(f, ast.Name) and f.id in ("dict", "str"):
                for a in node.args:
                    self.hint(a)
                for k in node.keywords:
                    self.hint(k.value)
            elif isinstance(f, ast.Name) and f.id in self.funcs:
                for fn in self.funcs[f.id]:
                    for r in ast.walk(fn):
                        if isinstance(r, ast.Return) and self.scope(r) is fn:
                            self.hint(r.value)

    def name(self, name, at):
        scope = self.scope(at)
        while scope is not None:
            values = self.assigns.get((id(scope), name))
            if values:
                for v, i in values:
                    self.value(v, i)
                return
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                a = scope.args
                if name in [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]:
                    self.param(scope, name)
                    return
            scope = self.scope(scope)
        for (sid, n), values in self.assigns.items():   # imported from another scanned module
            if n == name and any(isinstance(t, ast.Module) and id(t) == sid for t in self.trees.values()):
                for v, i in values:
                    self.value(v, i)

    def value(self, node, index):
        """The hint strings of an assigned value; `index`: the element of a tuple it unpacks to."""
        if index is None:
            return self.hint(node)
        if isinstance(node, (ast.Tuple, ast.List)) and index < len(node.elts):
            return self.hint(node.elts[index])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            for fn in self.funcs.get(node.func.id, []):
                for r in ast.walk(fn):
                    if isinstance(r, ast.Return) and self.scope(r) is fn:
                        self.value(r.value, index)

    def constant(self, name, at) -> list[str] | None:
        """The templates of a name bound only to string literals (a module constant), else None."""
        scope, values = self.scope(at), None
        while scope is not None and not values:
            values = self.assigns.get((id(scope), name))
            scope = self.scope(scope)
        if not values or any(i is not None or not isinstance(v, (ast.Constant, ast.JoinedStr, ast.BinOp))
                             or (isinstance(v, ast.Constant) and not isinstance(v.value, str)) for v, i in values):
            return None
        return [t for v, _ in values for t in self.template(v)]

    def param(self, fn, name):
        key = (id(fn), name)
        if key in self.params_done:
            return
        self.params_done.add(key)
        a = fn.args
        positional = [x.arg for x in a.posonlyargs + a.args]
        defaults = dict(zip(positional[len(positional) - len(a.defaults):], a.defaults))
        defaults.update({x.arg: d for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        if name in defaults:
            self.hint(defaults[name])
        self._parametrized(fn, name)
        fname = getattr(fn, "name", None)
        if fname is None:           # a lambda: its callers are not known by name
            return
        index = positional.index(name) if name in positional else None
        home = getattr(fn, "_path", None)
        for call in self.calls.get(fname, []):
            # a grader's private helper is called from its own module; core/checks helpers from any
            if getattr(call, "_path", None) != home and Path(home).parent.name == "graders":
                continue
            if _pytest_grader(fn) and getattr(call, "_path", None) != home and (
                    Path(home).name.startswith("test_") or Path(getattr(call, "_path", "")).parent != Path(home).parent):
                continue     # a test file's helper is called from that file; a package helper from its package
            for k in call.keywords:
                if k.arg == name:
                    self.hint(k.value)
            if index is not None and index < len(call.args) and not any(
                    isinstance(x, ast.Starred) for x in call.args[:index + 1]):
                self.hint(call.args[index])

    def _parametrized(self, fn, name):
        """A pytest test's argument from @pytest.mark.parametrize("a, hint", [rows]): each row's
        element for `name` (a tuple's, a pytest.param's positional, or what a helper returns)."""
        for dec in getattr(fn, "decorator_list", []) if _pytest_grader(fn) else []:
            if not (isinstance(dec, ast.Call) and self._callee(dec) == "parametrize" and len(dec.args) >= 2
                    and isinstance(dec.args[0], ast.Constant) and isinstance(dec.args[0].value, str)):
                continue
            names = [n.strip() for n in dec.args[0].value.split(",")]
            if name not in names or not isinstance(dec.args[1], (ast.List, ast.Tuple)):
                continue
            i = names.index(name)
            for row in dec.args[1].elts:
                if isinstance(row, ast.Call) and self._callee(row) == "param" and i < len(row.args):
                    self.hint(row.args[i])
                elif isinstance(row, (ast.Tuple, ast.List)) and i < len(row.elts):
                    self.hint(row.elts[i])
                elif isinstance(row, ast.Call):       # a helper case(name, *values, ...) -> pytest.param(*values)
                    for helper in self.funcs.get(self._callee(row) or "", []):
                        if getattr(helper, "_path", None) == getattr(fn, "_path", None) or \
                                Path(getattr(helper, "_path", "")).parent == Path(getattr(fn, "_path", "")).parent:
                            k = len(helper.args.posonlyargs + helper.args.args)
                            if helper.args.vararg is not None and k + i < len(row.args):
                                self.hint(row.args[k + i])

    def template(self, node) -> list[str]:
        """The templates an f-string or a + of strings can produce."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value.replace("{", "{{").replace("}", "}}")]
        if isinstance(node, ast.JoinedStr):
            out = [""]
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts = [str(v.value).replace("{", "{{").replace("}", "}}")]
                elif isinstance(v.value, ast.Name) and v.conversion == -1 and not v.format_spec:
                    parts = self.constant(v.value.id, v) or [_placeholder(v.value)]
                else:
                    parts = [_placeholder(v.value)]
                out = [a + b for a in out for b in parts]
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.template(node.left), self.template(node.right)
            return [a + b for a in left for b in right][:64]
        if isinstance(node, ast.IfExp):
            return self.template(node.body) + self.template(node.orelse)
        if isinstance(node, ast.Name):
            return self.constant(node.id, node) or [_placeholder(node)]
        return [_placeholder(node)]

    def add(self, template, node):
        self.found.setdefault(template, set()).add(self.where(node))


def hint_templates(files=None) -> dict[str, list[str]]:
    """Every hint sentence the graders can produce (and every test description), as a
    template ({placeholder} for each f-string field or non-literal part), with where it is
    written ("path:line")."""
    found = _Scan([Path(f) for f in (files or hint_files())]).run()
    return {t: sorted(w) for t, w in sorted(found.items())}


def missing_translations(lang: str = "zh", files=None) -> list[str]:
    """The hint templates of the graders that `lang`'s catalog does not translate."""
    table = catalog(lang).get("sentences", {})
    return [t for t in hint_templates(files) if t not in table]
