"""Deciding the state pairs from what the caller sees.

Order of precedence: explicit declaration (``pairs=``), rnnir metadata written
by :func:`rnnir.export`, a Triton ``config.pbtxt`` beside the model (or above its numbered
version folder, Triton's own layout), naming conventions, the dataflow (an input that starts a
recurrence's state and the output that returns that state's final value, :mod:`.dataflow`), then
position.  Each pair records its source and the reason.

The dataflow also vetoes weak guesses: a name rule pairs an input not named like state only when the
output is computed from it (``opt_in -> opt_out`` across a bare Identity is no state), and position
never pairs an input or output that streams a sequence (a recurrence's ``X``/``Y``, a Scan's scanned
inputs and scan outputs).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

from rnnir.errors import ModelError, PairingError
from rnnir.ir.pairs import PairSource, StatePair
from rnnir.onnxio.metadata import META_PAIRS
from rnnir.onnxio.metadata import read as metadata
from rnnir.util.fastinit import fast_init
from rnnir.util.jsontext import parse_json
from rnnir.util.regularfile import UnreadableFile, read_regular

if TYPE_CHECKING:
    import onnx

    from rnnir.lower.dataflow import Dataflow

# (input pattern, output templates); \g<s> is the shared stem.  First match wins.
_NAME_RULES: list[tuple[str, tuple[str, ...]]] = [
    (r"^(?P<s>.*?)state$", (r"\g<s>stateN", r"\g<s>state_n", r"\g<s>state_out", r"\g<s>new_state", r"\g<s>next_state", r"\g<s>stateOut", r"\g<s>out_state")),
    (r"^(?P<s>.*?)state(?P<n>\d+)$", (r"\g<s>state\g<n>N", r"\g<s>stateN\g<n>", r"\g<s>state\g<n>_out", r"\g<s>new_state\g<n>", r"\g<s>out_state\g<n>")),
    (r"^(?P<s>.*)_in$", (r"\g<s>_out",)),
    (r"^in_(?P<s>.*)$", (r"out_\g<s>",)),
    (r"^(?P<s>.*)_prev$", (r"\g<s>_next", r"\g<s>_new", r"\g<s>")),
    (r"^(?P<s>.*)_old$", (r"\g<s>_new",)),
    (r"^cache_(?P<s>.*)$", (r"new_cache_\g<s>", r"next_cache_\g<s>", r"cache_\g<s>_out")),
    (r"^cached_(?P<s>.*)$", (r"new_cached_\g<s>", r"next_cached_\g<s>")),
    (r"^past_(?P<s>.*)$", (r"present_\g<s>",)),
    (r"^(?P<s>[hc])(?P<sep>_?)0$", (r"\g<s>\g<sep>n", r"\g<s>\g<sep>N", r"\g<s>\g<sep>out", r"\g<s>_final")),
    (r"^(?P<s>.*?)(?P<sep>[._]?)(?P<k>[hc])0$", (r"\g<s>\g<sep>\g<k>n", r"\g<s>\g<sep>\g<k>N", r"\g<s>\g<sep>\g<k>_out")),
    (r"^(?P<s>.*?)_?(?:h|hidden|c|cell)$", ()),  # handled by the generic suffix rule below
]
_GENERIC_OUT_SUFFIXES = ("_out", "_n", "n", "N", "_next", "_new", "_final", "_output")
_GENERIC_OUT_PREFIXES = ("new_", "next_", "out_")
_STATE_WORDS = re.compile(r"(^|[_./])(h|c|h0|c0|hx|cx|hidden|cell|state\d*|cache\w*|cached\w*|past\w*|mem\w*|carry)($|[_./\d])", re.I)


@fast_init
@dataclass(frozen=True)
class GraphIO:
    name: str
    dtype: int
    rank: int | None
    dims: tuple[int | str | None, ...] | None
    has_default: bool = False


def graph_io(model: onnx.ModelProto) -> tuple[list[GraphIO], list[GraphIO]]:
    inits = {t.name for t in model.graph.initializer}

    def conv(vi: onnx.ValueInfoProto, default: bool) -> GraphIO:
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None or not tt.HasField("shape"):
            return GraphIO(vi.name, tt.elem_type if tt else 0, None, None, default)
        dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
        return GraphIO(vi.name, tt.elem_type, len(dims), dims, default)

    ins = [conv(vi, vi.name in inits) for vi in model.graph.input]
    outs = [conv(vi, False) for vi in model.graph.output]
    return ins, outs


def _compatible(a: GraphIO, b: GraphIO) -> bool:
    if a.dtype and b.dtype and a.dtype != b.dtype:
        return False
    if a.rank is not None and b.rank is not None and a.rank != b.rank:
        return False
    if a.dims and b.dims:
        for x, y in zip(a.dims, b.dims):
            if isinstance(x, int) and isinstance(y, int) and x and y and x != y:
                return False
    return True


def _meta_pairs(model: onnx.ModelProto, label: str) -> dict[str, str | None]:
    meta = metadata(model)
    raw = meta.get(META_PAIRS)
    if raw is None:
        return {}
    try:
        pairs = parse_json(raw)  # deep nesting and huge integers too: each a ValueError that says why
        if not isinstance(pairs, dict) or not all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in pairs.items()):
            raise ValueError("not an object of input -> output names")
    except ValueError as exc:
        raise ModelError(f"metadata {META_PAIRS!r} is not valid: {exc}", model=label) from None
    return pairs


_TRITON_STATE = re.compile(r"\bstate\s*:?\s*\[")
_TRITON_IN = re.compile(r"input_name\s*:\s*\"(?P<v>[^\"]+)\"")
_TRITON_OUT = re.compile(r"output_name\s*:\s*\"(?P<v>[^\"]+)\"")


_TRITON_CONFIG_MAX_BYTES = 2**20  # a config.pbtxt is a few KiB; a larger file is not one


def _triton_config(model_path: Path) -> Path | None:
    """The ``config.pbtxt`` that describes ``model_path``: beside the model, or one level up when the model
    sits in a numbered version folder, Triton's layout ``<repo>/<model>/<version>/model.onnx``.  Any other
    parent folder's config belongs to something else and is not read."""
    folders = [model_path.parent]
    if model_path.parent.name.isdigit():
        folders.append(model_path.parent.parent)
    for folder in folders:
        cfg = folder / "config.pbtxt"
        try:
            st = os.stat(cfg)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size <= _TRITON_CONFIG_MAX_BYTES:
            return cfg  # a FIFO or device is never opened; an oversized file is not a Triton config
    return None


def triton_pairs(model_path: Path | None) -> dict[str, str]:
    """State pairs from a Triton ``config.pbtxt`` (``sequence_batching { state [ {input_name, output_name} ] }``),
    found by :func:`_triton_config`."""
    if model_path is None:
        return {}
    cfg = _triton_config(model_path)
    if cfg is None:
        return {}
    try:  # through the regular-file reader: a FIFO swapped in after the stat above cannot block the open
        text = read_regular(cfg, _TRITON_CONFIG_MAX_BYTES).decode("utf-8", errors="replace")
    except UnreadableFile:
        return {}
    if "sequence_batching" not in text:
        return {}
    out: dict[str, str] = {}
    for body in _state_blocks(text):
        for ent in _top_level_entries(body):
            i = _TRITON_IN.search(ent)
            o = _TRITON_OUT.search(ent)
            if i and o:
                out[i.group("v")] = o.group("v")
    return out


def _top_level_entries(body: str) -> list[str]:
    """The ``{ ... }`` entries of a state list, each with its nested blocks (an ``initial_state: { ... }``)
    blanked out, so a nested block's fields are never read as the entry's own."""
    entries, depth, start = [], 0, 0
    own: list[str] = []
    for i, ch in enumerate(body):
        if ch == "{":
            if depth == 0:
                start, own = i + 1, []
            elif depth == 1:
                own.append(body[start:i])
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 1:
                start = i + 1
            elif depth == 0:
                own.append(body[start:i])
                entries.append(" ".join(own))
    return entries


def _state_blocks(text: str) -> list[str]:
    """Bodies of ``state [ ... ]`` lists, matching brackets (entries hold ``dims: [..]`` lists)."""
    bodies = []
    for m in _TRITON_STATE.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"[": 1, "]": -1}.get(text[i], 0)
            i += 1
        bodies.append(text[m.end() : i - 1])
    return bodies


def _template_parts(template: str) -> tuple[tuple[str, str | None], ...]:
    r"""``r"\g<s>stateN"`` as (literal, group name) pieces, so expanding it is a join (``Match.expand`` parses the
    template on every call: a thousandth of a second per state input of a big model)."""
    parts: list[tuple[str, str | None]] = []
    pos = 0
    for m in re.finditer(r"\\g<(\w+)>", template):
        parts.append((template[pos : m.start()], m.group(1)))
        pos = m.end()
    parts.append((template[pos:], None))
    return tuple(parts)


_NAME_RULES_COMPILED = [(re.compile(pattern), tuple(_template_parts(t) for t in templates)) for pattern, templates in _NAME_RULES]


def _expand(m: re.Match[str], parts: tuple[tuple[str, str | None], ...]) -> str:
    return "".join(text + ((m.group(group) or "") if group is not None else "") for text, group in parts)


def _name_candidates(name: str) -> list[str]:
    return list(_each_name_candidate(name))


def _each_name_candidate(name: str) -> Iterator[str]:
    """The output names ``name`` pairs with by convention, best first, each once: made one at a time, as pairing
    stops at the first that is an output (a state input of a big model usually pairs with its first or second)."""
    seen = {name}
    generic = chain((name + s for s in _GENERIC_OUT_SUFFIXES), (p + name for p in _GENERIC_OUT_PREFIXES))
    for c in chain(_rule_candidates(name), generic):
        if c not in seen:
            seen.add(c)
            yield c


def _rule_candidates(name: str) -> Iterator[str]:
    for pattern, templates in _NAME_RULES_COMPILED:
        m = pattern.match(name)
        if m:
            yield from (_expand(m, t) for t in templates)


def _dims_agree(a: GraphIO, b: GraphIO) -> bool:
    """Same dims; for an input named like state, a symbolic dim matches a symbolic dim of another name (shape
    inference names an output's batch after the op that made it: silero's decoder returns ``[2, Concat35_dim_1, 128]``
    for ``state [2, batch, 128]``).  Static dims must always be equal."""
    if a.dims == b.dims:
        return True
    if not looks_like_state(a.name) or a.dims is None or b.dims is None or len(a.dims) != len(b.dims):
        return False
    return all(x == y or (isinstance(x, str) and isinstance(y, str)) for x, y in zip(a.dims, b.dims))


def looks_like_state(name: str) -> bool:
    return bool(_STATE_WORDS.search(name))


def find_pairs(
    model: onnx.ModelProto,
    *,
    label: str,
    declared: Mapping[str, str | None] | None = None,
    model_path: Path | None = None,
    dataflow: Callable[[], Dataflow | None] | None = None,
) -> list[StatePair]:
    """The state pairs of ``model``'s main graph, strongest source first, each input and output used once.

    ``dataflow`` makes the model's :class:`~rnnir.lower.dataflow.Dataflow` from the caller's index (lowering has
    one); without it the model is indexed here.  Either happens only when a pairing needs the dataflow: a model
    whose names pair every state input and output never walks its graph for it."""
    ins, outs = graph_io(model)
    in_names = [i.name for i in ins]
    out_names = [o.name for o in outs]
    by_in = {i.name: i for i in ins}
    by_out = {o.name: o for o in outs}
    pairs: list[StatePair] = []
    used_in: set[str] = set()
    used_out: set[str] = set()

    def take(i: str, o: str | None, source: PairSource, reason: str) -> None:
        pairs.append(StatePair(input=i, output=o, source=source, reason=reason))
        used_in.add(i)
        if o is not None:
            used_out.add(o)

    for i, o in (declared or {}).items():
        if i not in by_in:
            raise PairingError(f"{label}: declared state input {i!r} is not a graph input (inputs: {', '.join(in_names)})")
        if o is not None and o not in by_out:
            raise PairingError(f"{label}: declared state output {o!r} is not a graph output (outputs: {', '.join(out_names)})")
        take(i, o, PairSource.DECLARED, "declared by the caller")
    if declared:
        return pairs  # a declaration is the whole contract

    for i, o in _meta_pairs(model, label).items():
        if i in by_in and (o is None or o in by_out) and i not in used_in:
            take(i, o, PairSource.METADATA, f"metadata_props {META_PAIRS}")
    for i, o in triton_pairs(model_path).items():
        if i in by_in and o in by_out and i not in used_in and o not in used_out:
            take(i, o, PairSource.TRITON, "sequence_batching.state in config.pbtxt")

    made: list[Dataflow | None] = []  # the dataflow, once asked for

    def flow() -> Dataflow | None:
        if not made:
            made.append(dataflow() if dataflow is not None else _dataflow(model, label))
        return made[0]

    for inp in ins:
        if inp.name in used_in:
            continue
        for cand in _each_name_candidate(inp.name):
            if cand in by_out and cand not in used_out and not looks_like_state(inp.name) and not _flows(flow(), inp.name, cand):
                continue  # a plain name whose output is not computed from it: no state flows between them
            if cand in by_out and cand not in used_out and _compatible(inp, by_out[cand]):
                take(inp.name, cand, PairSource.NAME, f"naming convention {inp.name!r} -> {cand!r}")
                break
            if cand in by_out and cand not in used_out and looks_like_state(inp.name):
                # a state returned in another dtype/shape is still the state: SD005 reports the mismatch
                take(inp.name, cand, PairSource.NAME, f"naming convention {inp.name!r} -> {cand!r} (types differ)")
                break

    # the dataflow's links pair only an input and an output both left over
    left_in = {i.name for i in ins if i.name not in used_in}
    linked = flow() if left_in and len(used_out) < len(outs) else None
    for link in linked.links_from(left_in) if linked is not None else ():
        start, final = by_in[link.input], by_out[link.output]
        if start.name not in used_in and final.name not in used_out and _compatible(start, final):
            take(start.name, final.name, PairSource.DATAFLOW, link.reason)

    # Position: torch exports list (x, h0, c0) -> (y, hn, cn).  Only when the leftovers line up
    # one to one with compatible, state-shaped (rank >= 2) types, and none of them streams a sequence.
    rest_in = [i for i in ins[1:] if i.name not in used_in and not i.has_default]
    rest_out = [o for o in outs[1:] if o.name not in used_out]
    if rest_in and rest_out:  # else nothing pairs by position, sequences or not
        f = flow()
        if f is not None:
            rest_in = [i for i in rest_in if i.name not in f.sequence_inputs]
            rest_out = [o for o in rest_out if o.name not in f.sequence_outputs]
    if rest_in and len(rest_in) == len(rest_out):
        ok = all(
            a.rank is not None and a.rank >= 2 and a.rank == b.rank and a.dtype == b.dtype and _compatible(a, b) and _dims_agree(a, b)
            for a, b in zip(rest_in, rest_out)
        )
        if ok:
            for a, b in zip(rest_in, rest_out):
                take(a.name, b.name, PairSource.POSITION, f"same position and type among the remaining inputs/outputs ({a.name!r} -> {b.name!r})")
    return pairs


def _flows(flow: Dataflow | None, input: str, output: str) -> bool:
    """State may flow from ``input`` to ``output``: the dataflow says so, or there is none to ask."""
    return flow is None or flow.state_flows(input, output)


def _dataflow(model: onnx.ModelProto, label: str) -> Dataflow | None:
    """The dataflow of a model :func:`find_pairs` was handed without one; None when rnnir cannot index the model
    (lowering reports why; pairing then works from names and position alone)."""
    from rnnir.lower.dataflow import Dataflow
    from rnnir.lower.scope import ModelIndex

    try:
        return Dataflow(ModelIndex(model, label))
    except ModelError:
        return None


def left_out_pairs(
    model: onnx.ModelProto, *, label: str, declared: Mapping[str, str | None], model_path: Path | None = None
) -> list[StatePair]:
    """The pairs rnnir would find without ``declared`` (metadata, Triton, names, position) that the declaration does
    not mention, neither their input nor their output.  A declaration replaces automatic pairing, so declaring ``h0``
    alone makes ``c0`` a plain input: these are the pairs a caller most likely forgot."""
    if not declared:
        return []
    try:
        found = find_pairs(model, label=label, model_path=model_path)
    except ModelError:
        return []  # the automatic sources do not work on this model; nothing to compare with
    outputs = {o for o in declared.values() if o is not None}
    return [p for p in found if p.input not in declared and (p.output is None or p.output not in outputs)]


def left_out_pair_warnings(model: onnx.ModelProto, *, label: str, declared: Mapping[str, str | None], model_path: Path | None = None) -> list[str]:
    """One warning per :func:`left_out_pairs` pair: what was declared, what is left out and why, and the flag that pairs it."""
    pairs = left_out_pairs(model, label=label, declared=declared, model_path=model_path)
    shown = " ".join(f"{i}={o or ''}" for i, o in declared.items())
    warnings = [
        f"the declared pairs ({shown}) replace automatic pairing, so {p.input} -> {p.output} ({p.reason}) is left unpaired: "
        f"{p.input!r} is a plain input and its state is neither kept nor checked; declare it too (--pair {p.input}={p.output or ''})"
        for p in pairs
    ]
    named = {p.input for p in pairs} | set(declared)
    ins, _ = graph_io(model)
    for i in ins:
        if i.name not in named and not i.has_default and looks_like_state(i.name):
            warnings.append(
                f"the declared pairs ({shown}) replace automatic pairing, and input {i.name!r} is named like state but left unpaired: "
                f"if the caller feeds it what an output returned, declare that pair too (--pair {i.name}=OUTPUT)"
            )
    return warnings
