"""A fuzzer for rnnir's front door: mutated models must end in exit 0, 1 or 2, never in an internal error.

    python tests/support/fuzz.py --cases 100000 [--seed 0] [--workdir DIR]     # the long run (see docs/testing.md)

Seeds are the bundled samples (``samples/*.onnx``) and the committed PyTorch exports
(``tests/data/torch``, with their external-data files).  Each case takes one seed and one mutator:

* byte level: flip bits, overwrite or insert random bytes, truncate, delete or duplicate a chunk,
  replace a name with bytes that are not UTF-8;
* protobuf level: change an attribute's type or value, drop or rename an attribute, change an op
  type, drop/duplicate/reorder nodes, rewire an input, change element types and dims, duplicate
  or invent graph outputs, change the opset, make a tensor external with a hostile location,
  nest the graph in Ifs.

A case is linted in-process exactly as ``rnnir lint`` lints one file (:func:`rnnir.cli.lint_one`), then
rendered in every report format (each must be complete: JSON/SARIF parse back, no lone surrogate);
a third of the models that lint also go through ``rnnir show`` in every format.
Outcomes: ``ok`` (linted, maybe with findings) or ``error`` (the model's error record); anything
else — an ``InternalError`` record, an exception escaping, a case slower than ``--case-seconds`` —
is a failure, printed with the seed and case number that reproduce it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import onnx
from onnx import helper

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from rnnir import __version__, cli  # noqa: E402
from rnnir.passes import RULES  # noqa: E402
from rnnir.render import LintResult, render  # noqa: E402

_OPS = ("LSTM", "GRU", "RNN", "If", "Loop", "Scan", "Identity", "Transpose", "Gather", "Concat", "Slice", "Split", "Reshape",
        "Squeeze", "Unsqueeze", "Cast", "Add", "Relu", "Constant", "ConstantOfShape", "NoSuchOp", "")
_LOCATIONS = (".", "..", "../x.bin", "/etc/passwd", "a\0b", "w.bin", "sub/../../x", "x" * 300, "C:\\x.bin", "\\\\server\\x", "./", "sub/.")
_ATTR_VALUES: tuple[object, ...] = (0, -1, 2**40, 1.5, float("nan"), "", "forward", "sideways", b"\xff\xfe", [1, 2], [0.5], ["Tanh"], [])


@dataclass
class Seed:
    name: str
    data: bytes
    folder: Path  # where the case file is written: beside the seed's external-data file, if any


@dataclass
class Case:
    seed: Seed
    mutator: str
    data: bytes


@dataclass
class Failure:
    case: int
    seed: str
    mutator: str
    what: str


@dataclass
class Summary:
    cases: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    slowest: float = 0.0
    seconds: float = 0.0
    peak_rss_mb: float = 0.0


# -- seeds ---------------------------------------------------------------------------------------


def load_seeds(workdir: Path) -> list[Seed]:
    """The samples and the committed PyTorch exports; each in its own folder with its data files."""
    seeds: list[Seed] = []
    sources = sorted((REPO / "samples").glob("*.onnx")) + sorted((REPO / "tests" / "data" / "torch").glob("*.onnx"))
    for k, path in enumerate(sources):
        folder = workdir / f"seed{k:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        for extra in path.parent.glob(path.name + ".data"):
            shutil.copy(extra, folder / extra.name)
        seeds.append(Seed(path.name, path.read_bytes(), folder))
    return seeds


# -- byte-level mutators ---------------------------------------------------------------------------


def _flip_bits(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def _overwrite(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    i = rng.randrange(len(b))
    n = rng.randint(1, 16)
    b[i : i + n] = rng.randbytes(min(n, len(b) - i))
    return bytes(b)


def _insert(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data) + 1)
    return data[:i] + rng.randbytes(rng.randint(1, 32)) + data[i:]


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data))]


def _delete_chunk(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data))
    return data[:i] + data[i + rng.randint(1, 64) :]


def _duplicate_chunk(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data))
    chunk = data[i : i + rng.randint(1, 64)]
    j = rng.randrange(len(data) + 1)
    return data[:j] + chunk + data[j:]


def _non_utf8_name(rng: random.Random, data: bytes) -> bytes:
    """Replace one occurrence of a name the model uses with as many bytes that are not UTF-8."""
    model = onnx.ModelProto.FromString(data)
    names = [n for node in model.graph.node for n in (*node.input, *node.output, node.name, node.op_type) if n]
    names += [vi.name for vi in (*model.graph.input, *model.graph.output)]
    name = rng.choice(names).encode()
    at = data.find(name)
    if at < 0:
        return data
    bad = bytes(rng.choice((0xFF, 0xFE, 0xC0, 0x80)) for _ in name)
    return data[:at] + bad + data[at + len(name) :]


BYTE_MUTATORS: dict[str, Callable[[random.Random, bytes], bytes]] = {
    "flip_bits": _flip_bits,
    "overwrite": _overwrite,
    "insert": _insert,
    "truncate": _truncate,
    "delete_chunk": _delete_chunk,
    "duplicate_chunk": _duplicate_chunk,
    "non_utf8_name": _non_utf8_name,
}


# -- protobuf-level mutators -------------------------------------------------------------------


def _all_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    out: list[onnx.NodeProto] = []
    stack = [model.graph]
    while stack:
        g = stack.pop()
        for node in g.node:
            out.append(node)
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    stack.append(a.g)
                stack.extend(a.graphs)
    return out


def _some_node(rng: random.Random, model: onnx.ModelProto) -> onnx.NodeProto | None:
    nodes = _all_nodes(model)
    if not nodes:
        return None
    interesting = [n for n in nodes if n.op_type in ("LSTM", "GRU", "RNN", "If") or n.attribute]
    return rng.choice(interesting if interesting and rng.random() < 0.7 else nodes)


def _attr_value(rng: random.Random, model: onnx.ModelProto) -> object:
    pick = rng.randrange(len(_ATTR_VALUES) + 2)
    if pick == len(_ATTR_VALUES):
        return helper.make_tensor("t", onnx.TensorProto.FLOAT, [1], [1.0])
    if pick == len(_ATTR_VALUES) + 1:
        return helper.make_graph([], "empty", [], [])
    return _ATTR_VALUES[pick]


def _m_attribute(rng: random.Random, model: onnx.ModelProto) -> None:
    node = _some_node(rng, model)
    if node is None:
        return
    choice = rng.random()
    if node.attribute and choice < 0.25:
        del node.attribute[rng.randrange(len(node.attribute))]
        return
    if node.attribute and choice < 0.4:
        node.attribute[rng.randrange(len(node.attribute))].name = rng.choice(("then_brunch", "hidden_size", "direction", "x", ""))
        return
    names = [a.name for a in node.attribute] + ["hidden_size", "direction", "activations", "clip", "layout", "axis", "perm", "to"]
    name = rng.choice(names)
    for a in [a for a in node.attribute if a.name == name]:
        node.attribute.remove(a)
    value = _attr_value(rng, model)
    try:
        node.attribute.append(helper.make_attribute(name, value))
    except (TypeError, ValueError):
        pass


def _m_op_type(rng: random.Random, model: onnx.ModelProto) -> None:
    node = _some_node(rng, model)
    if node is not None:
        node.op_type = rng.choice(_OPS)


def _m_nodes(rng: random.Random, model: onnx.ModelProto) -> None:
    g = model.graph
    if not g.node:
        return
    i = rng.randrange(len(g.node))
    choice = rng.random()
    if choice < 0.35:
        del g.node[i]
    elif choice < 0.6:
        g.node.append(g.node[i])
    else:
        nodes = list(g.node)
        rng.shuffle(nodes)
        del g.node[:]
        g.node.extend(nodes)


def _m_rewire(rng: random.Random, model: onnx.ModelProto) -> None:
    node = _some_node(rng, model)
    if node is None or not node.input:
        return
    k = rng.randrange(len(node.input))
    values = [o for n in model.graph.node for o in n.output] + [vi.name for vi in model.graph.input]
    node.input[k] = rng.choice(values + ["", "ghost"])
    if rng.random() < 0.2:
        del node.input[k:]


def _m_types(rng: random.Random, model: onnx.ModelProto) -> None:
    vis = list(model.graph.input) + list(model.graph.output)
    if not vis:
        return
    vi = rng.choice(vis)
    tt = vi.type.tensor_type
    choice = rng.random()
    if choice < 0.3:
        tt.elem_type = rng.choice((0, 1, 10, 16, 7, 9, 28, 29, 1000, 2**31 - 1))
    elif choice < 0.7 and tt.shape.dim:
        d = rng.choice(tt.shape.dim)
        v = rng.choice((0, 1, -1, 2**40, 10**9, None))
        if v is None:
            d.dim_param = rng.choice(("B", "T", "", "x" * 100))
        else:
            d.dim_value = v
    elif choice < 0.85:
        vi.type.ClearField("tensor_type")
    else:
        tt.ClearField("shape")


def _m_outputs(rng: random.Random, model: onnx.ModelProto) -> None:
    g = model.graph
    choice = rng.random()
    if choice < 0.4 and g.output:
        g.output.append(rng.choice(g.output))
    elif choice < 0.7:
        g.output.append(helper.make_tensor_value_info(rng.choice(("ghost", "x", "")), onnx.TensorProto.FLOAT, [1]))
    elif g.output:
        del g.output[rng.randrange(len(g.output))]


def _m_opset(rng: random.Random, model: onnx.ModelProto) -> None:
    if model.opset_import:
        op = rng.choice(model.opset_import)
        if rng.random() < 0.8:
            op.version = rng.choice((1, 6, 7, 13, 14, 17, 18, 21, 22, 23, 99, -1))
        else:
            op.domain = rng.choice(("com.example", "ai.onnx.ml", "ai.onnx"))
    if rng.random() < 0.2:
        model.ir_version = rng.choice((0, 1, 3, 7, 10, 99))


def _m_external(rng: random.Random, model: onnx.ModelProto) -> None:
    tensors: list[onnx.TensorProto] = list(model.graph.initializer)
    for node in _all_nodes(model):
        tensors.extend(a.t for a in node.attribute if a.type == onnx.AttributeProto.TENSOR)
    if not tensors:
        return
    t = rng.choice(tensors)
    t.data_location = onnx.TensorProto.EXTERNAL
    del t.external_data[:]
    t.external_data.add(key="location", value=rng.choice(_LOCATIONS))
    if rng.random() < 0.3:
        t.external_data.add(key=rng.choice(("offset", "length")), value=rng.choice(("-1", "x", "0", "99999999999")))


def _m_nest(rng: random.Random, model: onnx.ModelProto) -> None:
    """Wrap the main graph's nodes into the then-branch of an If, a few levels deep."""
    for _ in range(rng.randint(1, 4)):
        g = model.graph
        body = helper.make_graph(list(g.node), "body", [], list(g.output))
        other = helper.make_graph([], "other", [], list(g.output))
        cond = helper.make_node("Constant", [], ["__cond"], value=helper.make_tensor("c", onnx.TensorProto.BOOL, [], [True]))
        node = helper.make_node("If", ["__cond"], [o.name for o in g.output], then_branch=body, else_branch=other)
        del g.node[:]
        g.node.extend([cond, node])
        if rng.random() < 0.5:
            break


PROTO_MUTATORS: dict[str, Callable[[random.Random, onnx.ModelProto], None]] = {
    "attribute": _m_attribute,
    "op_type": _m_op_type,
    "nodes": _m_nodes,
    "rewire": _m_rewire,
    "types": _m_types,
    "outputs": _m_outputs,
    "opset": _m_opset,
    "external": _m_external,
    "nest": _m_nest,
}


def generate(seeds: list[Seed], rng: random.Random) -> Case:
    seed = rng.choice(seeds)
    data = seed.data
    mutators: list[str] = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if rng.random() < 0.45:
            name = rng.choice(sorted(BYTE_MUTATORS))
            try:
                data = BYTE_MUTATORS[name](rng, data) if data else data
            except Exception:  # noqa: BLE001 - a mutator that cannot apply to this input leaves it as it is
                pass
        else:
            name = rng.choice(sorted(PROTO_MUTATORS))
            try:
                model = onnx.ModelProto.FromString(data)
                PROTO_MUTATORS[name](rng, model)
                data = model.SerializeToString()
            except Exception:  # noqa: BLE001 - an earlier byte mutation may have made it unparsable
                pass
        mutators.append(name)
    return Case(seed, "+".join(mutators), data)


# -- running a case ---------------------------------------------------------------------------------


def check_case(case: Case, path: Path) -> tuple[str, str | None]:
    """Lint and render one case in-process; returns (outcome, failure or None)."""
    path.write_bytes(case.data)
    try:
        result = cli.lint_one(cli.LintJob(path=str(path), cost=bool(case.data[-1:] == b"\0")))
    except BaseException as exc:  # noqa: BLE001 - the point is to catch what escapes
        return "escaped", f"{type(exc).__name__}: {exc}"
    if result.error is not None and result.error.get("type") == "InternalError":
        return "internal", result.error["message"]
    lint = LintResult([result], RULES, __version__)
    for fmt in ("json", "sarif", "text", "github"):
        try:
            text = render(lint, fmt)
            text.encode("utf-8")
            if fmt in ("json", "sarif"):
                json.loads(text)
        except BaseException as exc:  # noqa: BLE001
            return "render", f"{fmt}: {type(exc).__name__}: {exc}"
    if result.error is None and len(case.data) % 3 == 0:  # a third of the good ones also through `rnnir show`
        for fmt, extra in (("text", []), ("text", ["--full"]), ("dot", []), ("mermaid", []), ("json", [])):
            out, err = io.StringIO(), io.StringIO()
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    code = cli.main(["show", str(path), "--no-config", "--format", fmt, *extra])
            except BaseException as exc:  # noqa: BLE001
                return "show", f"{fmt}: {type(exc).__name__}: {exc}"
            if code != 0 or "\x1b" in out.getvalue():
                return "show", f"{fmt}: exit {code}: {err.getvalue()[:300]}"
            if fmt == "json":
                json.loads(out.getvalue())
    return ("error" if result.error is not None else "ok"), None


def run(cases: int, seed: int, workdir: Path, case_seconds: float = 10.0, progress: Callable[[Summary], None] | None = None) -> Summary:
    seeds = load_seeds(workdir)
    rng = random.Random(seed)
    summary = Summary()
    start = time.perf_counter()
    for k in range(cases):
        case = generate(seeds, rng)
        t0 = time.perf_counter()
        outcome, failure = check_case(case, case.seed.folder / "case.onnx")
        took = time.perf_counter() - t0
        summary.slowest = max(summary.slowest, took)
        if failure is None and took > case_seconds:
            outcome, failure = "slow", f"took {took:.1f} s"
        summary.outcomes[outcome] += 1
        if failure is not None:
            summary.failures.append(Failure(k, case.seed.name, case.mutator, failure[:500]))
            keep = workdir / "failures"
            keep.mkdir(exist_ok=True)
            (keep / f"case{k}.onnx").write_bytes(case.data)
        summary.cases += 1
        if progress is not None and (k + 1) % 1000 == 0:
            progress(summary)
    summary.seconds = time.perf_counter() - start
    summary.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return summary


def cases_of(seed: int, n: int, workdir: Path) -> Iterator[Case]:
    """The same cases :func:`run` generates (to reproduce a failure by its case number)."""
    seeds = load_seeds(workdir)
    rng = random.Random(seed)
    for _ in range(n):
        yield generate(seeds, rng)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", help="where cases are written (default: a temporary folder); failures are kept in WORKDIR/failures")
    parser.add_argument("--case-seconds", type=float, default=10.0, help="a case slower than this is a failure")
    args = parser.parse_args(argv)
    os.environ.pop("RNNIR_DEBUG", None)
    with tempfile.TemporaryDirectory(prefix="rnnir-fuzz-") as tmp:
        workdir = Path(args.workdir) if args.workdir else Path(tmp)

        def progress(s: Summary) -> None:
            print(f"{s.cases} cases, {dict(s.outcomes)}, {len(s.failures)} failures", file=sys.stderr, flush=True)

        summary = run(args.cases, args.seed, workdir, args.case_seconds, progress)
    print(json.dumps({**dataclasses.asdict(summary), "outcomes": dict(summary.outcomes), "failures": [dataclasses.asdict(f) for f in summary.failures[:50]]}, indent=2))
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
