"""Mutation testing for the code that decides rnnir's verdicts.

    python tools/mutate.py                       # every target module, 2 processes
    python tools/mutate.py rnnir/analysis/tracer.py       # one module (or several)
    python tools/mutate.py rnnir/passes/ --sample 40   # a random 40 mutants per module while iterating
    python tools/mutate.py rnnir/passes/aliasing.py --keep-killed last.json --json now.json   # rerun only last run's survivors
    python tools/mutate.py --since main --fail-under 90   # a change's own mutants: the lines it added or changed

Each mutant is one small planted bug of the kind a developer makes: a flipped comparison, `and`/`or`
swapped, a negated condition, an int constant off by one, a dropped statement or condition, two call
arguments swapped, a return value replaced (f-strings, annotations, docstrings and decorators are left
alone). It is applied to the AST in memory; the tree on disk is never touched. Which tests execute which
line comes from one traced run of the suite, cached in ``.mutation/`` (a test file changed since is
traced alone and merged in; a change to rnnir/, rnnir/passes/ or the tests' helpers retraces everything).
Then pytest collects once, and for each mutant a forked child swaps the mutated function's code object
in and runs the mutant's tests with ``-x`` semantics and a timeout, two children at a time (mutants in
module-level code get a forked pytest run of their own that imports the mutated module). The tests a
mutant runs: one of each test function that executes its line, those of the module's subject folder first
(tests/ mirrors the package: tests/lower/cells/ for rnnir/lower/cells.py), then fastest first, within ``--test-budget``
seconds (measured under the tracer), at least the fastest of each test file (unless it alone costs more than the budget), then more
parametrizations while budget is left; ``--test-budget 0`` runs every covering test. A mutant no test
executes survives.

Survivors that cannot change behaviour are listed in ``tools/mutation-equivalent.txt``, matched by
module, operator, the mutated line's text and the mutant's description (not its line number, so edits
elsewhere keep them matched); the score excludes them. Every other survivor is printed, for a new test
to kill.

Not part of ``.ci/run``: a full run takes over an hour on two shared cores.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import hashlib
import json
import os
import random
import signal
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = ROOT / ".mutation"
EQUIVALENT_FILE = ROOT / "tools" / "mutation-equivalent.txt"
# generated tables, skipped when a folder is expanded: a mutant of one is a wrong table entry, and
# test_lint_speed checks every entry against onnx.defs (~3,900 mutants of data, not of logic)
GENERATED = frozenset({"rnnir/lower/_opschemas.py"})
# the code that decides verdicts: the passes, slice tracing, lowering, the multi-call runtime and checks
DEFAULT_TARGETS = (
    "rnnir/passes", "rnnir/analysis", "rnnir/lower", "rnnir/semantics/evaluate.py", "rnnir/onnxio/source.py", "rnnir/runtime",
    "rnnir/check", "rnnir/serving", "rnnir/fixes", "rnnir/ir/text.py", "rnnir/ir/printer.py", "rnnir/ir/lexer.py",
    "rnnir/lint/baseline.py", "rnnir/render",
)


class Operator(enum.Enum):
    COMPARE = "flip-compare"
    BOOLOP = "swap-and-or"
    NEGATE = "negate-condition"
    INT = "int-off-by-one"
    DROP_STATEMENT = "drop-statement"
    DROP_CONDITION = "drop-condition"
    SWAP_ARGS = "swap-args"
    RETURN = "replace-return"


class Outcome(enum.Enum):
    KILLED = "killed"
    TIMEOUT = "timeout"  # counts as killed: the bug is noticed (the suite hangs)
    SURVIVED = "survived"
    NO_COVERAGE = "no-coverage"  # survived: no test executes the line
    EQUIVALENT = "equivalent"  # survived, and listed as unable to change behaviour


@dataclasses.dataclass(frozen=True)
class Mutant:
    module: str  # path relative to the repository, e.g. "rnnir/slices.py"
    index: int  # position among the module's mutants, in source order
    operator: Operator
    line: int
    end_line: int
    description: str  # e.g. "`<` -> `>=`"
    source_line: str  # the mutated line's text, stripped
    function: str | None = None  # the module-level function or method holding the mutation (None: module-level code)
    function_line: int = 0  # that function's first line (its first decorator's), as in its code object
    twin: int = 0  # how many mutants before it on its line have the same operator and description (`x == 1 or y == 1`)

    @property
    def key(self) -> str:
        # twins get a suffix: results, --keep-killed and the fork server are keyed by it, and two twins
        # sharing a key shared one outcome (a survivor could be reported killed by its twin's result)
        twin = f" #{self.twin + 1}" if self.twin else ""
        return f"{self.module}:{self.line} {self.operator.value} {self.description}{twin}"


_COMPARE_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_COMPARE_TEXT = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.GtE: ">=",
    ast.Gt: ">",
    ast.LtE: "<=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}


_NO_SWAP = frozenset({"isinstance", "issubclass", "getattr", "hasattr", "setattr", "super"})
_SWAPPABLE = (ast.Name, ast.Attribute, ast.Subscript)


def _short(node: ast.AST, limit: int = 40) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


class _Site:
    """One place a mutation can be applied: a path of (field, index) steps from the module root."""

    def __init__(self, path: tuple[tuple[str, int | None], ...], operator: Operator, choice: int, node: ast.AST, description: str):
        self.path = path
        self.operator = operator
        self.choice = choice
        self.node = node
        self.description = description


def _walk(node: ast.AST, path: tuple[tuple[str, int | None], ...] = ()) -> Iterator[tuple[ast.AST, tuple[tuple[str, int | None], ...]]]:
    yield node, path
    for field, value in ast.iter_fields(node):
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield from _walk(item, path + ((field, i),))
        elif isinstance(value, ast.AST):
            yield from _walk(value, path + ((field, None),))


def _skipped_subtrees(tree: ast.Module) -> set[int]:
    """ids of nodes not worth mutating: annotations, docstrings, `if TYPE_CHECKING`, `__repr__`/`__str__`."""
    skipped: set[int] = set()

    def skip(node: ast.AST | None) -> None:
        if node is not None:
            skipped.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in node.decorator_list:  # rule registrations and dataclass options: metadata, not logic
                skip(decorator)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            skip(node.returns)
            for arg in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
                skip(arg.annotation)
            if node.name in ("__repr__", "__str__"):
                skip(node)
        elif isinstance(node, ast.AnnAssign):
            skip(node.annotation)
        elif isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            skip(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("TypeVar", "cast"):
            skip(node)
        elif isinstance(node, ast.JoinedStr):
            skip(node)  # the text of a message, not a verdict: a wrong word there is not the bug class this hunts
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt) and _is_docstring(body[0]):
            skip(body[0])
    return skipped


def _sites(tree: ast.Module) -> list[_Site]:
    skipped = _skipped_subtrees(tree)
    sites: list[_Site] = []
    for node, path in _walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in _COMPARE_FLIP:
                    new = _COMPARE_FLIP[type(op)]
                    sites.append(_Site(path, Operator.COMPARE, i, node, f"`{_COMPARE_TEXT[type(op)]}` -> `{_COMPARE_TEXT[new]}`"))
        elif isinstance(node, ast.BoolOp):
            other = "or" if isinstance(node.op, ast.And) else "and"
            sites.append(_Site(path, Operator.BOOLOP, 0, node, f"`{'and' if other == 'or' else 'or'}` -> `{other}`"))
            for i, value in enumerate(node.values):
                sites.append(_Site(path, Operator.DROP_CONDITION, i, node, f"drop `{_short(value)}`"))
        elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
            if isinstance(node.test, ast.Compare) and len(node.test.ops) == 1 and type(node.test.ops[0]) in _COMPARE_FLIP:
                continue  # `not (a < b)` is the flipped comparison again
            sites.append(_Site(path, Operator.NEGATE, 0, node, f"not ({_short(node.test)})"))
        elif isinstance(node, ast.comprehension):
            for i, cond in enumerate(node.ifs):
                sites.append(_Site(path, Operator.NEGATE, i, node, f"not ({_short(cond)})"))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            sites.append(_Site(path, Operator.INT, 0, node, f"{node.value} -> {node.value + 1}"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            pass  # -1 is handled through its Constant child (-(1+1) == -2)
        elif isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _NO_SWAP):
            args = node.args
            for i in range(len(args) - 1):
                # two values of the same kind swapped (ports, operands): a constant or a call swapped in mostly just crashes
                if all(isinstance(a, _SWAPPABLE) for a in args[i : i + 2]) and ast.dump(args[i]) != ast.dump(args[i + 1]):
                    sites.append(_Site(path, Operator.SWAP_ARGS, i, node, f"swap `{_short(args[i], 20)}`, `{_short(args[i + 1], 20)}`"))
        elif isinstance(node, ast.Return) and node.value is not None:
            value = node.value
            if isinstance(value, ast.Constant) and value.value is None:
                continue
            if isinstance(value, ast.Constant) and isinstance(value.value, bool):
                sites.append(_Site(path, Operator.RETURN, 0, node, f"return {not value.value}"))
            else:
                sites.append(_Site(path, Operator.RETURN, 0, node, f"return None instead of `{_short(value)}`"))
        if isinstance(node, (ast.Expr, ast.AugAssign, ast.Assign, ast.Raise, ast.Continue, ast.Break)) and not _is_docstring(node):
            if isinstance(node, ast.Assign) and not isinstance(node.targets[0], (ast.Subscript, ast.Attribute)):
                continue  # dropping `x = ...` mostly leaves a NameError: only stores into containers/attributes count
            sites.append(_Site(path, Operator.DROP_STATEMENT, 0, node, f"drop `{_short(node)}`"))
    return sites


def _enclosing_function(tree: ast.Module, path: tuple[tuple[str, int | None], ...]) -> tuple[str | None, int]:
    """The outermost def holding the node at path, if it is reached only through classes and module-level blocks.

    Its code object is what a forked test process swaps in; a mutation in a default value or a decorator runs at
    import time, so it has none.
    """
    node: ast.AST = tree
    for depth, (field, index) in enumerate(path):
        value = getattr(node, field)
        node = value[index] if index is not None else value
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if path[depth + 1 : depth + 2] and path[depth + 1][0] != "body":
                return None, 0
            return node.name, min([node.lineno] + [d.lineno for d in node.decorator_list])
    return None, 0


def _resolve(tree: ast.AST, path: tuple[tuple[str, int | None], ...]) -> tuple[ast.AST, str, int | None]:
    """The parent of the node at path, and the field/index where it hangs."""
    parent = tree
    for field, index in path[:-1]:
        value = getattr(parent, field)
        parent = value[index] if index is not None else value
    field, index = path[-1]
    return parent, field, index


def _apply(tree: ast.Module, site: _Site) -> ast.Module:
    """The tree with one mutation applied (tree itself is mutated: pass a fresh parse)."""
    parent, field, index = _resolve(tree, site.path)
    node = getattr(parent, field)[index] if index is not None else getattr(parent, field)

    def replace(new: ast.AST) -> None:
        ast.copy_location(new, node)
        if index is not None:
            getattr(parent, field)[index] = new
        else:
            setattr(parent, field, new)

    op = site.operator
    if op is Operator.COMPARE:
        assert isinstance(node, ast.Compare)
        node.ops[site.choice] = _COMPARE_FLIP[type(node.ops[site.choice])]()
    elif op is Operator.BOOLOP:
        assert isinstance(node, ast.BoolOp)
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif op is Operator.DROP_CONDITION:
        assert isinstance(node, ast.BoolOp)
        del node.values[site.choice]
        if len(node.values) == 1:
            replace(node.values[0])
    elif op is Operator.NEGATE:
        if isinstance(node, ast.comprehension):
            node.ifs[site.choice] = ast.UnaryOp(op=ast.Not(), operand=node.ifs[site.choice])
        else:
            assert isinstance(node, (ast.If, ast.While, ast.IfExp))
            node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    elif op is Operator.INT:
        assert isinstance(node, ast.Constant) and isinstance(node.value, int)
        replace(ast.Constant(value=node.value + 1))
    elif op is Operator.SWAP_ARGS:
        assert isinstance(node, ast.Call)
        i = site.choice
        node.args[i], node.args[i + 1] = node.args[i + 1], node.args[i]
    elif op is Operator.RETURN:
        assert isinstance(node, ast.Return) and node.value is not None
        value = node.value
        node.value = ast.Constant(value=not value.value) if isinstance(value, ast.Constant) and isinstance(value.value, bool) else ast.Constant(value=None)
    elif op is Operator.DROP_STATEMENT:
        replace(ast.Pass())
    return ast.fix_missing_locations(tree)


def module_name(module: str) -> str:
    return module[: -len(".py")].replace("/", ".").removesuffix(".__init__")


def mutants_of(module: str) -> list[Mutant]:
    source = (ROOT / module).read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    found = []
    seen: dict[tuple[int, Operator, str], int] = {}
    for i, site in enumerate(_sites(tree)):
        line = getattr(site.node, "lineno", 1)
        end = getattr(site.node, "end_lineno", line) or line
        if isinstance(site.node, (ast.If, ast.While)):
            end = site.node.test.end_lineno or line  # the condition, not the whole block
        if isinstance(site.node, ast.comprehension):
            line = site.node.ifs[site.choice].lineno
            end = site.node.ifs[site.choice].end_lineno or line
        function, function_line = _enclosing_function(tree, site.path)
        twin = seen.get((line, site.operator, site.description), 0)
        seen[(line, site.operator, site.description)] = twin + 1
        found.append(Mutant(module, i, site.operator, line, end, site.description, lines[line - 1].strip(), function, function_line, twin))
    return found


def mutated_code(mutant: Mutant) -> types.CodeType:
    path = ROOT / mutant.module
    tree = ast.parse(path.read_text())
    site = _sites(tree)[mutant.index]
    return compile(_apply(tree, site), str(path), "exec")


# ---------------------------------------------------------------- equivalents


@dataclasses.dataclass(frozen=True)
class Equivalent:
    module: str
    operator: str
    line_text: str
    description: str
    reason: str
    function: str | None = None  # `module::function`: only in this def (for a line as plain as `continue`)


def read_equivalents(path: Path | None = None) -> list[Equivalent]:
    """Lines `module | operator | mutated line text | description | reason`; `#` starts a comment."""
    path = path or EQUIVALENT_FILE
    found: list[Equivalent] = []
    if not path.exists():
        return found
    for raw in path.read_text().splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in raw.split(" | ")]
        if len(parts) != 5:
            raise SystemExit(f"{path}: expected `module | operator | line text | description | reason`: {raw!r}")
        module, _, function = parts[0].partition("::")
        found.append(Equivalent(module, *parts[1:], function=function or None))
    return found


def is_equivalent(mutant: Mutant, equivalents: list[Equivalent]) -> bool:
    return any(
        e.module == mutant.module
        and e.operator == mutant.operator.value
        and e.line_text == mutant.source_line
        and e.description == mutant.description
        and (e.function is None or e.function == mutant.function)
        for e in equivalents
    )


# ---------------------------------------------------------------- which tests execute which line


def check_equivalents(equivalents: list[Equivalent]) -> list[str]:
    """Problems with the entries: one that matches no mutant any more (its line changed), or one that
    matches mutants in several functions (a line as plain as `continue`: a real survivor elsewhere would hide).
    Several places in one function are allowed: the entry's reason names that function's lines."""
    problems: list[str] = []
    by_module: dict[str, list[Mutant]] = {}
    for e in equivalents:
        if e.module not in by_module:
            by_module[e.module] = mutants_of(e.module) if (ROOT / e.module).exists() else []
        places = sorted({(m.function or "<module>", m.line) for m in by_module[e.module] if is_equivalent(m, [e])})
        where = f"{e.module}{'::' + e.function if e.function else ''} | {e.operator} | {e.line_text} | {e.description}"
        if not places:
            problems.append(f"stale (matches no mutant): {where}")
        elif len({f for f, _ in places}) > 1:
            at = ", ".join(f"{f}:{line}" for f, line in places)
            problems.append(f"ambiguous (matches {len(places)} places: {at}; qualify it as module::function): {where}")
    return problems


def _is_test_file(p: Path) -> bool:
    """A test module: tests/ holds one folder per subject (tests/lower/cells/test_limits.py); tests/data holds no tests."""
    parts = p.relative_to(ROOT).parts
    return parts[0] == "tests" and "data" not in parts and p.name.startswith("test_") and p.suffix == ".py"


def _source_digest(targets: list[str]) -> str:
    """The code under test and the tests' shared helpers: when these change, every test's lines may change."""
    h = hashlib.sha256()
    for folder in ("rnnir", "tests"):
        for p in sorted((ROOT / folder).rglob("*.py")):
            if _is_test_file(p):
                continue
            h.update(str(p.relative_to(ROOT)).encode())
            h.update(p.read_bytes())
    h.update(" ".join(sorted(targets)).encode())
    return h.hexdigest()[:16]


def _test_file_digests() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in sorted((ROOT / "tests").rglob("test_*.py")) if _is_test_file(p)}


def _trace(targets: list[str], files: list[str], out: Path) -> dict[str, Any]:
    """Run ``files`` (all tests when empty) under the line tracer; the plugin writes tests, lines and durations to out."""
    import subprocess

    env = dict(os.environ, MUTATE_TRACE_OUT=str(out), MUTATE_TRACE_FILES=os.pathsep.join(str(ROOT / m) for m in targets))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tools"), env.get("PYTHONPATH", "")]))
    out.unlink(missing_ok=True)
    args = ["-q", "-p", "no:cacheprovider", "-p", "mutate_plugin", "-x", *files]
    bootstrap = f"import sys, mutate_plugin; sys.exit(mutate_plugin.trace_main({args!r}))"
    rc = subprocess.call([sys.executable, "-c", bootstrap], cwd=ROOT, env=env)
    if rc != 0 or not out.exists():
        raise SystemExit("the suite must pass unmutated before mutants mean anything")
    data = json.loads(out.read_text())
    out.unlink()
    return _from_disk(data)


#: the covering tests of a line run only at import time: every test (the same list object, so a caller can tell)
IMPORT_TIME: list[str] = []


def _to_disk(data: dict[str, Any]) -> dict[str, Any]:
    """Test ids once, lines as indices into them (ids repeated per line would make the file hundreds of MB)."""
    tests = sorted(data["durations"])
    index = {t: i for i, t in enumerate(tests)}
    lines = {f: {line: ("*" if "*" in ids else [index[t] for t in ids if t in index]) for line, ids in per.items()} for f, per in data["lines"].items()}
    return {"files": data["files"], "tests": tests, "durations": data["durations"], "lines": lines}


def _from_disk(disk: dict[str, Any]) -> dict[str, Any]:
    tests = disk["tests"]
    lines = {f: {line: (["*"] if ids == "*" else [tests[i] for i in ids]) for line, ids in per.items()} for f, per in disk["lines"].items()}
    return {"files": disk.get("files", {}), "durations": disk["durations"], "lines": lines}


def _merge(data: dict[str, Any], fresh: dict[str, Any]) -> None:
    """Add a traced run of other test files to ``data`` (lines executed outside any test stay everybody's)."""
    data["durations"].update(fresh["durations"])
    for file, per_line in fresh["lines"].items():
        mine = data["lines"].setdefault(file, {})
        for line, ids in per_line.items():
            if ids != ["*"]:  # import-time lines were already everybody's
                mine[line] = sorted(set(mine.get(line, [])) | set(ids))
            elif line not in mine:
                mine[line] = ["*"]


def _trace_files(targets: list[str], files: list[str], jobs: int) -> dict[str, Any]:
    """Trace ``files`` (test files) in up to ``jobs`` processes at once, split by file, and merge what they record."""
    from concurrent.futures import ThreadPoolExecutor

    shards = [files[k::jobs] for k in range(jobs) if files[k::jobs]]
    with ThreadPoolExecutor(len(shards)) as pool:
        parts = list(pool.map(lambda n: _trace(targets, shards[n], CACHE_DIR / f"trace-{os.getpid()}-{n}.json"), range(len(shards))))
    data: dict[str, Any] = {"durations": {}, "lines": {}}
    for part in parts:
        _merge(data, part)
    return data


def _selected(path: str, tests: list[str]) -> bool:
    return not tests or any(path == t or path.startswith(t.rstrip("/") + "/") for t in tests)


def line_coverage(modules: list[str], jobs: int, tests: list[str] | None = None) -> tuple[dict[str, dict[int, list[str]]], dict[str, float]]:
    """For each module, line -> ids of the tests that execute it; and each test's duration in seconds.

    One traced run of the suite (or of the test files and folders in ``tests``: then a mutant only other tests
    would kill counts as a survivor, and every score is a lower bound), split by test file over ``jobs``
    processes and cached in .mutation/ until rnnir/ or the tests' helpers change; a test file added or edited
    since is traced alone and merged in. Lines executed outside any test (imports, session fixtures) map to
    every test.
    """
    selection = sorted(t.rstrip("/") for t in tests or [])
    all_targets = sorted(set(modules) | set(_expand(list(DEFAULT_TARGETS))))
    CACHE_DIR.mkdir(exist_ok=True)
    digest = _source_digest(all_targets + [f"tests={t}" for t in selection])
    cache = CACHE_DIR / f"coverage-{digest}.json"
    now = {f: d for f, d in _test_file_digests().items() if _selected(f, selection)}
    if not now:
        raise SystemExit(f"no test file under {' '.join(selection)}")
    if cache.exists():
        data = _from_disk(json.loads(cache.read_text()))
    else:
        what = "the suite" if not selection else " ".join(selection)
        print(f"tracing which tests execute which lines ({what}, {jobs} processes; cached in {cache.relative_to(ROOT)}) ...", flush=True)
        data = {**_trace_files(all_targets, sorted(now), jobs), "files": now}
    stale = sorted(f for f in set(now) | set(data["files"]) if now.get(f) != data["files"].get(f))
    if stale:
        gone = tuple(f + "::" for f in stale)
        data["durations"] = {t: d for t, d in data["durations"].items() if not t.startswith(gone)}
        for per_line in data["lines"].values():
            for line in list(per_line):
                per_line[line] = [t for t in per_line[line] if not t.startswith(gone)]
        present = [f for f in stale if f in now]
        if present:
            print(f"tracing the test files changed since: {' '.join(present)} ...", flush=True)
            _merge(data, _trace_files(all_targets, present, jobs))
        data["files"] = now
    if stale or not cache.exists():
        cache.write_text(json.dumps(_to_disk(data)))
    everybody = sorted(data["durations"])
    IMPORT_TIME[:] = everybody
    coverage: dict[str, dict[int, list[str]]] = {}
    for module in modules:
        lines_of: dict[int, list[str]] = {}
        # keyed by absolute path at tracing time: match by the repository-relative tail, so a moved checkout still matches
        # (a cache copied from another checkout and then topped up here holds both paths: every match counts)
        for key, traced in data["lines"].items():
            if key != str(ROOT / module) and not key.endswith(os.sep + module):
                continue
            for line, ids in traced.items():
                known = lines_of.get(int(line), [])
                if ids == ["*"] or known is IMPORT_TIME:
                    lines_of[int(line)] = IMPORT_TIME
                elif "*" in ids or known is everybody:
                    lines_of[int(line)] = everybody
                else:
                    lines_of[int(line)] = sorted(set(known) | set(ids))
        coverage[module] = lines_of
    return coverage, data["durations"]


# ---------------------------------------------------------------- running mutants


def _child(mutant: Mutant, test_ids: list[str], select_file: Path) -> None:
    """In a forked child: import the mutant instead of the module, run the selected tests, exit with pytest's code."""
    import importlib.abc
    import importlib.machinery
    import importlib.util

    code = mutated_code(mutant)
    name = module_name(mutant.module)
    origin = str(ROOT / mutant.module)

    class Loader(importlib.machinery.SourceFileLoader):
        def get_code(self, fullname: str) -> types.CodeType:
            return code

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
            if fullname != name:
                return None
            is_package = origin.endswith("__init__.py")
            return importlib.util.spec_from_file_location(
                fullname, origin, loader=Loader(fullname, origin), submodule_search_locations=[str(Path(origin).parent)] if is_package else None
            )

    sys.meta_path.insert(0, Finder())
    select_file.write_text("\n".join(test_ids))
    os.environ["MUTATE_SELECT"] = str(select_file)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    import pytest

    files = sorted({t.split("::")[0] for t in test_ids})
    # --assert=plain: rnnir's pytest11 entry point makes pytest mark the whole distribution for assertion rewriting, and
    # its import hook, put in front of the Finder above, would import the module unmutated from disk (every module-level
    # mutant would survive); the exit status is all a mutant run needs
    rc = pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-p", "mutate_plugin", "--assert=plain", "--rootdir", str(ROOT), *files])
    os._exit(int(rc))


@dataclasses.dataclass
class Result:
    mutant: Mutant
    outcome: Outcome
    seconds: float
    tests: int


def _budget(ids: list[str], durations: dict[str, float]) -> float:
    # durations were measured under the line tracer (slower than a plain run), so 3x would be generous on
    # an idle machine; a timeout counts as a kill, so the margin is wide enough that a mutant slowed down
    # only by other work on shared cores is not scored as killed
    return 60.0 + 6.0 * sum(durations.get(t, 1.0) for t in ids)


def _outcome(mutant: Mutant, code: int, equivalents: list[Equivalent]) -> Outcome:
    if code == 0:
        return Outcome.EQUIVALENT if is_equivalent(mutant, equivalents) else Outcome.SURVIVED
    if code == -9:
        return Outcome.TIMEOUT
    if code == 5:  # no tests collected: the selection went stale
        return Outcome.NO_COVERAGE
    return Outcome.KILLED


def _run_fork_server(plan: list[tuple[Mutant, list[str]]], durations: dict[str, float], jobs: int) -> dict[str, tuple[int, float]]:
    """Collect the tests once, then fork per mutant and swap the mutated function's code in: key -> (exit code, seconds)."""
    if not plan:
        return {}
    import subprocess

    CACHE_DIR.mkdir(exist_ok=True)
    # named for this run: two runs in one checkout (two modules at once) must not read each other's results
    jobs_file, results_file = CACHE_DIR / f"jobs-{os.getpid()}.json", CACHE_DIR / f"results-{os.getpid()}.jsonl"
    results_file.unlink(missing_ok=True)
    payload = []
    for m, ids in plan:
        job = dataclasses.asdict(m)
        job.update(operator=m.operator.value, key=m.key, tests=ids, budget=_budget(ids, durations))
        payload.append(job)
    jobs_file.write_text(json.dumps(payload))
    files = sorted({t.split("::")[0] for _, ids in plan for t in ids})
    env = dict(os.environ, MUTATE_SERVER=str(jobs_file), MUTATE_RESULTS=str(results_file), MUTATE_PARALLEL=str(jobs))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tools"), env.get("PYTHONPATH", "")]))
    subprocess.call([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "mutate_plugin", *files], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    found = {}
    for line in results_file.read_text().splitlines() if results_file.exists() else []:
        r = json.loads(line)
        found[r["key"]] = (r["code"], r["seconds"])
    jobs_file.unlink(missing_ok=True)
    results_file.unlink(missing_ok=True)
    return found


def select_tests(ids: set[str], durations: dict[str, float], budget: float, focus: Focus | None = None) -> list[str]:
    """The tests a mutant runs: one of each test function that executes its line (its fastest parametrization),
    fastest first, up to ``budget`` seconds of (traced) test time, and at least the fastest test of each file unless
    that test alone costs more than the budget, in run order (see the end); every covering test when budget is 0. One per function because the parametrizations of one test mostly check one thing
    on other data, while each function checks something else.

    ``focus`` is the mutated module's subject (:func:`focus_of`): the test files of its folder go first (those named
    after the module before the folder's others), before the fastest of the rest. A line that hundreds of tests
    execute (every pass runs state_types, every lowering the cell recogniser) otherwise filled the budget with the
    cheapest broad tests and never reached the tests written for that module."""
    if not budget:
        return sorted(ids)

    def cost(t: str) -> tuple[float, str]:
        return (durations.get(t, 1.0), t)

    def rank(t: str) -> tuple[int, float, str]:
        return (focus.tier(t) if focus else Focus.OTHERS, *cost(t))

    per_function: dict[str, str] = {}
    for t in ids:
        fn = t.split("[", 1)[0]
        if fn not in per_function or cost(t) < cost(per_function[fn]):
            per_function[fn] = t
    chosen: set[str] = set()
    files: set[str] = set()
    spent = 0.0
    for t in sorted(per_function.values(), key=rank):
        f = t.split("::")[0]
        # a file's fastest test is its cheap representative; one that alone costs more than the whole budget (the
        # fuzz suite's 2,000 models) is not, and taking it anyway made every mutant of the passes cost 30-60 s
        if spent < budget or (f not in files and cost(t)[0] <= budget):
            chosen.add(t)
            files.add(f)
            spent += durations.get(t, 1.0)
    for t in sorted(ids - chosen, key=cost):  # budget left: the other parametrizations, cheapest first
        if spent >= budget:
            break
        chosen.add(t)
        spent += durations.get(t, 1.0)
    # run order: the file with the cheapest test first, each file's tests fastest first; with -x a mutant that a
    # fast focused test kills stops there, and a file's module fixtures are still set up once
    first_of: dict[str, tuple[int, float, str]] = {}
    for t in chosen:
        f = t.split("::")[0]
        first_of[f] = min(first_of.get(f, rank(t)), rank(t))
    return sorted(chosen, key=lambda t: (first_of[t.split("::")[0]], cost(t)))


@dataclasses.dataclass(frozen=True)
class Focus:
    """A mutated module's own tests. tests/ mirrors the package (rnnir/lower/cells/ -> tests/lower/cells/,
    rnnir/passes/coverage.py -> tests/passes/), so a module's subject folder is the deepest folder of tests/ along
    its path. With ``stem`` empty the folder is the module's own and all of it comes first; else the folder's files
    whose name holds the stem come first, then the folder's others. A module with no folder of its own under
    tests/ (one at the package's top level) falls back to the stem alone, anywhere in tests/."""

    folder: str = ""  # e.g. "tests/passes/" (with its slash), "" when tests/ has no folder for the module
    stem: str = ""  # e.g. "coverage"; "" when the folder is the module's own

    OWN: ClassVar[int] = 0
    FOLDER: ClassVar[int] = 1
    OTHERS: ClassVar[int] = 2

    def tier(self, test_id: str) -> int:
        file = test_id.split("::")[0]
        named = bool(self.stem) and self.stem in Path(file).stem
        if not self.folder:
            return Focus.OWN if named else Focus.OTHERS
        if not file.startswith(self.folder):
            return Focus.OTHERS
        return Focus.OWN if named or not self.stem else Focus.FOLDER


def focus_of(module: str, root: Path = ROOT) -> Focus:
    """The subject of ``module`` (a path such as "rnnir/passes/coverage.py"): see :class:`Focus`."""
    parts = list(Path(module).with_suffix("").parts[1:])  # without the leading "rnnir"
    if parts and parts[-1] == "__init__":
        parts.pop()
    stem = parts[-1] if parts else Path(module).parent.name
    depth = len(parts)
    while depth and not (root / "tests" / Path(*parts[:depth])).is_dir():
        depth -= 1
    if not depth:
        return Focus("", stem)
    folder = "/".join(["tests", *parts[:depth]]) + "/"
    return Focus(folder, "" if depth == len(parts) else stem)


def run_mutants(mutants: list[Mutant], coverage: dict[str, dict[int, list[str]]], durations: dict[str, float], jobs: int, equivalents: list[Equivalent], test_budget: float = 0.0) -> list[Result]:
    results: list[Result] = []
    plan: list[tuple[Mutant, list[str]]] = []
    for m in mutants:
        covering: set[str] = set()
        for line in range(m.line, m.end_line + 1):
            covering.update(coverage[m.module].get(line, ()))
        if not covering:
            results.append(Result(m, Outcome.EQUIVALENT if is_equivalent(m, equivalents) else Outcome.NO_COVERAGE, 0.0, 0))
        else:
            plan.append((m, select_tests(covering, durations, test_budget, focus_of(m.module))))
    # a function that only runs at import (a decorator, a table built at import) must be imported mutated:
    # swapping its code after collection would change nothing
    at_import = {id(m) for m, _ in plan if all(coverage[m.module].get(line) is IMPORT_TIME for line in range(m.line, m.end_line + 1))}
    served = _run_fork_server([(m, ids) for m, ids in plan if m.function and id(m) not in at_import], durations, jobs)
    rest = []
    for m, ids in plan:
        code_seconds = served.get(m.key)
        if code_seconds is None or code_seconds[0] in (3, 4):  # module-level code, or the function was not live
            rest.append((m, ids))
        else:
            results.append(Result(m, _outcome(m, code_seconds[0], equivalents), code_seconds[1], len(ids)))
    results.extend(_run_with_import_hook(rest, durations, jobs, equivalents))
    return results


def _run_with_import_hook(plan: list[tuple[Mutant, list[str]]], durations: dict[str, float], jobs: int, equivalents: list[Equivalent]) -> list[Result]:
    """Mutants in module-level code: a forked child imports the mutated module and runs its tests (slower: collects per mutant)."""
    if not plan:
        return []
    print(f"{len(plan)} mutants in module-level code, one pytest run each ...", flush=True)
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT / "tools"))
    sys.path.insert(0, str(ROOT))  # tests/ is a package: its tests import tests.support.*
    # imported once here, so each forked child starts with them loaded; rnnir and passes are not (the child imports the mutant)
    import numpy  # noqa: F401
    import onnx  # noqa: F401
    import pytest  # noqa: F401

    results: list[Result] = []
    queue = list(plan)
    tmp = CACHE_DIR / "select"
    tmp.mkdir(parents=True, exist_ok=True)
    running: dict[int, tuple[Mutant, list[str], float, float]] = {}
    while queue or running:
        while queue and len(running) < jobs:
            m, ids = queue.pop(0)
            pid = os.fork()
            if pid == 0:
                try:
                    _child(m, ids, tmp / f"{os.getpid()}.txt")
                finally:
                    os._exit(3)
            running[pid] = (m, ids, time.monotonic(), _budget(ids, durations) + 10.0)
        time.sleep(0.05)
        for pid, (m, ids, started, budget) in list(running.items()):
            waited, status = os.waitpid(pid, os.WNOHANG)
            elapsed = time.monotonic() - started
            if waited == 0 and elapsed < budget:
                continue
            if waited == 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                code = -9
            else:
                code = os.waitstatus_to_exitcode(status)
            del running[pid]
            (tmp / f"{pid}.txt").unlink(missing_ok=True)
            results.append(Result(m, _outcome(m, code, equivalents), elapsed, len(ids)))
    return results


# ---------------------------------------------------------------- reporting


@dataclasses.dataclass
class Score:
    module: str
    mutants: int = 0
    killed: int = 0
    survived: int = 0
    equivalent: int = 0

    @property
    def percent(self) -> float:
        counted = self.mutants - self.equivalent
        return 100.0 * self.killed / counted if counted else 100.0


def scores(results: list[Result]) -> list[Score]:
    by_module: dict[str, Score] = {}
    for r in results:
        s = by_module.setdefault(r.mutant.module, Score(r.mutant.module))
        s.mutants += 1
        if r.outcome in (Outcome.KILLED, Outcome.TIMEOUT):
            s.killed += 1
        elif r.outcome is Outcome.EQUIVALENT:
            s.equivalent += 1
        else:
            s.survived += 1
    return [by_module[m] for m in sorted(by_module)]


def under(rows: list[Score], percent: float) -> list[Score]:
    """The modules scoring below ``percent`` (``--fail-under``)."""
    return [s for s in rows if s.percent < percent]


def table(rows: list[Score]) -> str:
    out = ["| module | mutants | killed | survived | equivalent | score |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    total = Score("**all**")
    for s in rows:
        out.append(f"| `{s.module}` | {s.mutants} | {s.killed} | {s.survived} | {s.equivalent} | {s.percent:.1f}% |")
        total.mutants += s.mutants
        total.killed += s.killed
        total.survived += s.survived
        total.equivalent += s.equivalent
    out.append(f"| {total.module} | {total.mutants} | {total.killed} | {total.survived} | {total.equivalent} | {total.percent:.1f}% |")
    return "\n".join(out)


def changed_lines(module: str, since: str, moves: bool = False) -> set[int] | None:
    """Lines of ``module`` (in the working tree) added or changed since the git revision ``since``.

    None when git does not track the file at ``since`` (a new module: every line is new). A line that
    only moved keeps its text but is reported by git as changed, so it is run again: that errs towards
    running a mutant, never towards skipping one. With ``moves``, ``git blame`` decides instead (see
    ``_lines_newer_than``): a module split into a package keeps the measurement of the lines it moved.
    """
    import subprocess

    if moves:
        return _lines_newer_than(module, since)
    known = subprocess.run(["git", "cat-file", "-e", f"{since}:{module}"], cwd=ROOT, capture_output=True)
    if known.returncode != 0:
        return None
    done = subprocess.run(["git", "diff", "--unified=0", "--no-color", since, "--", module], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"git diff {since} failed: {done.stderr.strip()}")
    return _added_lines(done.stdout)


def _lines_newer_than(module: str, since: str) -> set[int] | None:
    """Lines of ``module`` whose last change is not in ``since``'s history, following moves across files.

    ``git blame -w -M -C`` names, for each line of the working tree, the commit that last changed its text,
    through moves and copies from files changed in the same commit (the split of one module into several)
    and ignoring re-indentation; the line is new unless that commit is ``since`` or one of its ancestors.
    Uncommitted lines are new. None when git does not track the file at all (every line is new).
    """
    import subprocess

    done = subprocess.run(["git", "blame", "-w", "-M", "-C", "--porcelain", "--", module], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        return None
    final_commit: dict[int, str] = {}
    for row in done.stdout.splitlines():
        # a line's header: "<40 hex> <line in the origin> <line in the file>[ <lines in the group>]"
        head = row.split(" ")
        if len(head) >= 3 and len(head[0]) == 40 and head[1].isdigit() and head[2].isdigit():
            final_commit[int(head[2])] = head[0]
    old: dict[str, bool] = {}
    for commit in set(final_commit.values()):
        if commit.strip("0"):
            ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", commit, since], cwd=ROOT, capture_output=True)
            if ancestor.returncode > 1:
                raise SystemExit(f"git merge-base {since} failed: {ancestor.stderr.decode().strip()}")
            old[commit] = ancestor.returncode == 0
        else:  # the all-zero commit: not committed yet
            old[commit] = False
    return {line for line, commit in final_commit.items() if not old[commit]}


def _added_lines(diff: str) -> set[int]:
    """New-file line numbers of a ``git diff --unified=0``'s hunks (``@@ -a,b +c,d @@``: lines c .. c+d-1)."""
    lines: set[int] = set()
    for row in diff.splitlines():
        if not row.startswith("@@ "):
            continue
        new = row.split(" ")[2]  # "+c" or "+c,d"
        start, _, count = new[1:].partition(",")
        lines.update(range(int(start), int(start) + (int(count) if count else 1)))
    return lines


def _expand(targets: list[str]) -> list[str]:
    modules: list[str] = []
    for t in targets:
        p = (ROOT / t).resolve()
        if p.is_dir():
            modules.extend(str(q.relative_to(ROOT)) for q in sorted(p.rglob("*.py")) if str(q.relative_to(ROOT)) not in GENERATED)
        else:
            modules.append(str(p.relative_to(ROOT)))
    return modules


def _shard(text: str) -> tuple[int, int]:
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"{text!r} is not K/N with 1 <= K <= N (e.g. 2/3)")
    return int(k), int(n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*", default=list(DEFAULT_TARGETS), help="files or folders (default: the verdict code)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--sample", type=int, default=0, help="at most N random mutants per module (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--shard", type=_shard, metavar="K/N", help="only the K-th of N equal runs of each module's mutants, in order (a full run split across processes or machines; merge the --json files)"
    )
    parser.add_argument("--line", type=int, default=0, help="only mutants on this line (with one module)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--json", type=Path, help="also write every result here")
    parser.add_argument(
        "--test-budget",
        type=float,
        default=5.0,
        help="seconds of (traced) test time per mutant: its fastest covering tests up to this, plus the fastest per file (unless it alone costs more); 0: every covering test",
    )
    parser.add_argument("--keep-killed", type=Path, help="a --json file of an earlier run: mutants it killed (same key) are not run again")
    parser.add_argument("--since", metavar="REV", help="only mutants on lines added or changed since this git revision (a change's own mutants)")
    parser.add_argument(
        "--moves", action="store_true",
        help="with --since: a line moved or copied from another file keeps its age (git blame -M -C), so a module split into several counts only its changed lines",
    )
    parser.add_argument("--check-equivalents", action="store_true", help="list stale or ambiguous entries of the equivalents file and exit (1 if there is one)")
    parser.add_argument("--fail-under", type=float, default=0.0, metavar="PCT", help="exit 1 when a module scores below PCT percent")
    parser.add_argument(
        "--tests",
        action="append",
        metavar="PATH",
        help="trace only these test files or folders (repeatable; default: the whole suite). Faster; a mutant only other tests kill survives, so each score is a lower bound",
    )
    args = parser.parse_args(argv)
    if args.moves and not args.since:
        parser.error("--moves only qualifies --since")
    if args.check_equivalents:
        problems = check_equivalents(read_equivalents())
        print("\n".join(problems) if problems else "every equivalent entry matches mutants in one function")
        # both are errors: a stale entry's mutant counts again unexplained, an ambiguous one may hide a survivor
        return 1 if problems else 0
    modules = _expand(args.targets)
    mutants: list[Mutant] = []
    rng = random.Random(args.seed)
    for module in modules:
        found = mutants_of(module)
        if args.line:
            found = [m for m in found if m.line <= args.line <= m.end_line]
        if args.since:
            changed = changed_lines(module, args.since, moves=args.moves)
            if changed is not None:
                found = [m for m in found if changed.intersection(range(m.line, m.end_line + 1))]
        if args.shard:
            k, n = args.shard
            size = -(-len(found) // n)
            found = found[(k - 1) * size : k * size]
        if args.sample and len(found) > args.sample:
            found = sorted(rng.sample(found, args.sample), key=lambda m: m.index)
        mutants.extend(found)
    if args.list:
        for m in mutants:
            print(f"{m.key}    {m.source_line}")
        return 0
    equivalents = read_equivalents()
    coverage, durations = line_coverage(modules, max(1, args.jobs), args.tests)
    started = time.monotonic()
    earlier: list[Result] = []
    if args.keep_killed:
        killed = {r["key"] for r in json.loads(args.keep_killed.read_text()) if r["outcome"] in ("killed", "timeout")}
        earlier = [Result(m, Outcome.KILLED, 0.0, 0) for m in mutants if m.key in killed]
        mutants = [m for m in mutants if m.key not in killed]
    results = earlier + run_mutants(mutants, coverage, durations, max(1, min(args.jobs, 2)), equivalents, args.test_budget)
    survivors = [r for r in results if r.outcome in (Outcome.SURVIVED, Outcome.NO_COVERAGE)]
    for r in sorted(survivors, key=lambda r: (r.mutant.module, r.mutant.line)):
        print(f"{r.outcome.value:11} {r.mutant.key}    {r.mutant.source_line}")
    print()
    rows = scores(results)
    print(table(rows))
    if args.tests:
        print(f"\ntraced: {' '.join(args.tests)} only; each score is a lower bound")
    print(f"\n{len(results)} mutants in {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(
            json.dumps(
                [{"key": r.mutant.key, "line_text": r.mutant.source_line, "outcome": r.outcome.value, "seconds": round(r.seconds, 2), "tests": r.tests} for r in results],
                indent=1,
            )
        )
    below = under(rows, args.fail_under)
    for s in below:
        print(f"{s.module}: {s.percent:.1f}% is under --fail-under {args.fail_under:g}%")
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
