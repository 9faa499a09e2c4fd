"""Generate the synthetic ONNX models the benchmarks run on.

    python bench/make_models.py [--out bench/.models] [--force]

Everything is deterministic (fixed seeds, no timestamps), so two runs write
byte-identical files; a model already in the cache is not rebuilt unless
``--force``.  Weights are tiny (hidden size 8) so even the 100k-node models stay
a few MB.

Lint workloads (``syn_<N>_r<K>.onnx``): ``N`` nodes in the main graph with ``K``
recurrent ops, shaped like a streaming model:

* an encoder of ordinary ops on the input ``x`` (no state flows through it);
* ``K`` recurrent layers, each preceded by ordinary ops, in three flavours that
  cycle: a GRU whose state is ``state<i>`` -> ``stateN<i>``; an LSTM with h and c
  packed in one tensor ``state<i>`` [2, 1, H] (Split -> LSTM -> Concat ->
  ``stateN<i>``, as streaming VAD/ASR exports do); an LSTM with separate
  ``h<i>_in``/``c<i>_in`` -> ``h<i>_out``/``c<i>_out``;
* a head of ordinary ops ending in the output ``y``.

The ordinary ops cycle through elementwise ops, MatMul with a shared 8x8
weight and residual Adds to an earlier value (so the graph is a DAG, not a
chain).

``nested_if_d<D>.onnx``: ``D`` If nodes nested in then-branches (each level
also holds a few ordinary ops reading outer-scope values); the innermost branch
runs a packed-state LSTM on ``state``, which every level passes out.  Python's
protobuf (upb) refuses messages nested deeper than 100, and each If level costs
three (Graph -> Node -> Attribute -> Graph), so D = 31 is the deepest model the
ONNX Python stack can read at all.  ``nested_if_d64.onnx`` is written byte by
byte (the protobuf API cannot even build it) to show how each tool rejects
deeper nesting.

Multi-call workloads: ``lstm_i64_h128.onnx`` (one LSTM layer, input 64, hidden
128, dynamic sequence length ``T``; ``h0``/``c0`` -> ``hn``/``cn``; ``lstm_i64_h128_b.onnx``
is the same layer with a free batch dim ``B``, for the session pool) and
``cache12.onnx`` (12 layers of streaming caches, ``cache_<l>`` [1, 256, 768]
f32 -> ``new_cache_<l>``: 9.4 MB of state; each call appends a 4-frame chunk).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_OUT = HERE / ".models"
OPSET = 17
IR_VERSION = 8
H = 8  # hidden size (and feature size) of the synthetic models

#: (file stem, main-graph node count, recurrent ops)
SYNTHETIC = (
    ("syn_1k_r1", 1_000, 1),
    ("syn_1k_r10", 1_000, 10),
    ("syn_10k_r1", 10_000, 1),
    ("syn_10k_r100", 10_000, 100),
    ("syn_100k_r1", 100_000, 1),
    ("syn_100k_r1000", 100_000, 1_000),
)
NESTED_DEPTH = 31  # the deepest nesting Python protobuf parses (see the docstring)
NESTED_TOO_DEEP = 64
NESTED_FILLER = 30  # ordinary ops per If level

LSTM_IN, LSTM_HIDDEN = 64, 128
CACHE_LAYERS, CACHE_C, CACHE_K, CACHE_T = 12, 256, 768, 4


def _model(graph: onnx.GraphProto) -> onnx.ModelProto:
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="rnnir-bench")
    m.ir_version = IR_VERSION
    return m


def _f32(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _init(name: str, arr: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(np.ascontiguousarray(arr), name)


class _Filler:
    """Ordinary ops that keep a [1, 1, H] float tensor's shape."""

    def __init__(self, nodes: list[onnx.NodeProto], prefix: str) -> None:
        self.nodes = nodes
        self.prefix = prefix
        self.k = 0

    def _name(self) -> str:
        self.k += 1
        return f"{self.prefix}{self.k}"

    def run(self, x: str, count: int) -> str:
        history = [x]
        for j in range(count):
            n = self._name()
            kind = j % 8
            if kind == 0:
                node = helper.make_node("Add", [x, "c_bias"], [n], name=n)
            elif kind == 1:
                node = helper.make_node("MatMul", [x, "c_w"], [n], name=n)
            elif kind == 2:
                node = helper.make_node("Tanh", [x], [n], name=n)
            elif kind == 3:
                node = helper.make_node("Mul", [x, "c_scale"], [n], name=n)
            elif kind == 4:
                node = helper.make_node("Relu", [x], [n], name=n)
            elif kind == 5:  # residual to a value a few ops back
                node = helper.make_node("Add", [x, history[max(0, len(history) - 6)]], [n], name=n)
            elif kind == 6:
                node = helper.make_node("Sigmoid", [x], [n], name=n)
            else:
                node = helper.make_node("Sub", [x, "c_bias"], [n], name=n)
            self.nodes.append(node)
            x = n
            history.append(x)
        return x


def _shared_inits() -> list[TensorProto]:
    rng = np.random.default_rng(0)
    return [
        _init("c_bias", (0.01 * rng.standard_normal(H)).astype(np.float32)),
        _init("c_scale", (1.0 + 0.01 * rng.standard_normal(H)).astype(np.float32)),
        _init("c_w", (np.eye(H) + 0.01 * rng.standard_normal((H, H))).astype(np.float32)),
        _init("axes1", np.array([1], dtype=np.int64)),
    ]


def _rnn_weights(kind: str, i: int, hidden: int = H, inp: int = H) -> list[TensorProto]:
    gates = 3 if kind == "GRU" else 4
    rng = np.random.default_rng(1000 + i)
    s = 1.0 / np.sqrt(hidden)
    return [
        _init(f"W{i}", (s * rng.standard_normal((1, gates * hidden, inp))).astype(np.float32)),
        _init(f"R{i}", (s * rng.standard_normal((1, gates * hidden, hidden))).astype(np.float32)),
        _init(f"B{i}", (0.1 * rng.standard_normal((1, 2 * gates * hidden))).astype(np.float32)),
    ]


def _layer(i: int, x: str, nodes, inputs, outputs, inits) -> str:
    """Recurrent layer ``i`` on ``x`` [1, 1, H]; returns its output [1, 1, H]. Adds 2 to 4 nodes."""
    flavour = i % 3
    y = f"Y{i}"
    if flavour == 0:  # GRU, state<i> -> stateN<i>
        inits += _rnn_weights("GRU", i)
        inputs.append(_f32(f"state{i}", [1, 1, H]))
        nodes.append(helper.make_node("GRU", [x, f"W{i}", f"R{i}", f"B{i}", "", f"state{i}"], [y, f"stateN{i}"], name=f"gru{i}", hidden_size=H))
        outputs.append(_f32(f"stateN{i}", [1, 1, H]))
    elif flavour == 1:  # LSTM, packed state<i> [2, 1, H] -> stateN<i>
        inits += _rnn_weights("LSTM", i)
        inputs.append(_f32(f"state{i}", [2, 1, H]))
        nodes.append(helper.make_node("Split", [f"state{i}"], [f"h{i}", f"c{i}"], name=f"split{i}", axis=0))
        nodes.append(helper.make_node("LSTM", [x, f"W{i}", f"R{i}", f"B{i}", "", f"h{i}", f"c{i}"], [y, f"hn{i}", f"cn{i}"], name=f"lstm{i}", hidden_size=H))
        nodes.append(helper.make_node("Concat", [f"hn{i}", f"cn{i}"], [f"stateN{i}"], name=f"concat{i}", axis=0))
        outputs.append(_f32(f"stateN{i}", [2, 1, H]))
    else:  # LSTM, h<i>_in/c<i>_in -> h<i>_out/c<i>_out
        inits += _rnn_weights("LSTM", i)
        inputs += [_f32(f"h{i}_in", [1, 1, H]), _f32(f"c{i}_in", [1, 1, H])]
        nodes.append(helper.make_node("LSTM", [x, f"W{i}", f"R{i}", f"B{i}", "", f"h{i}_in", f"c{i}_in"], [y, f"h{i}_out", f"c{i}_out"], name=f"lstm{i}", hidden_size=H))
        outputs += [_f32(f"h{i}_out", [1, 1, H]), _f32(f"c{i}_out", [1, 1, H])]
    # Y [T, num_dir, B, H] -> [T, B, H]
    nodes.append(helper.make_node("Squeeze", [y, "axes1"], [f"y{i}"], name=f"squeeze{i}"))
    return f"y{i}"


_LAYER_NODES = {0: 2, 1: 4, 2: 2}


def synthetic(n_nodes: int, n_rec: int) -> onnx.ModelProto:
    """A streaming-shaped model with exactly ``n_nodes`` main-graph nodes and ``n_rec`` recurrent ops."""
    plumbing = sum(_LAYER_NODES[i % 3] for i in range(n_rec))
    filler = n_nodes - plumbing
    if filler < n_rec + 2:
        raise ValueError(f"{n_nodes} nodes cannot hold {n_rec} recurrent layers")
    encoder = int(filler * 0.4)
    head = int(filler * 0.1)
    between = filler - encoder - head
    per_layer = [between // n_rec + (1 if i < between % n_rec else 0) for i in range(n_rec)]

    nodes: list[onnx.NodeProto] = []
    inputs = [_f32("x", [1, 1, H])]
    outputs = [_f32("y", [1, 1, H])]
    inits = _shared_inits()
    fill = _Filler(nodes, "op")
    x = fill.run("x", encoder)
    for i in range(n_rec):
        x = fill.run(x, per_layer[i])
        x = _layer(i, x, nodes, inputs, outputs, inits)
    head_out = fill.run(x, head - 1)
    nodes.append(helper.make_node("Identity", [head_out], ["y"], name="out_y"))
    assert len(nodes) == n_nodes, (len(nodes), n_nodes)
    # graph inputs first: x, then the state inputs in layer order; outputs likewise
    graph = helper.make_graph(nodes, f"syn_{n_nodes}_r{n_rec}", inputs, outputs, inits)
    return _model(graph)


# --------------------------------------------------------------------- nested If


def _nested_level(k: int, depth: int, filler: int) -> onnx.GraphProto:
    """The then-branch at nesting level ``k`` (1-based); level ``depth`` holds the LSTM."""
    nodes: list[onnx.NodeProto] = []
    fill = _Filler(nodes, f"L{k}_op")
    side = fill.run("x", filler)  # ordinary ops reading the outer-scope input
    yo, so = f"y_L{k}", f"s_L{k}"
    if k == depth:
        nodes.append(helper.make_node("Split", ["state"], [f"h_L{k}", f"c_L{k}"], name=f"L{k}_split", axis=0))
        nodes.append(helper.make_node("LSTM", [side, "W0", "R0", "B0", "", f"h_L{k}", f"c_L{k}"], [f"Y_L{k}", f"hn_L{k}", f"cn_L{k}"], name=f"L{k}_lstm", hidden_size=H))
        nodes.append(helper.make_node("Concat", [f"hn_L{k}", f"cn_L{k}"], [so], name=f"L{k}_concat", axis=0))
        nodes.append(helper.make_node("Squeeze", [f"Y_L{k}", "axes1"], [yo], name=f"L{k}_squeeze"))
    else:
        then_g = _nested_level(k + 1, depth, filler)
        nodes.append(helper.make_node("If", ["cond"], [yo, so], name=f"L{k}_if", then_branch=then_g, else_branch=_else_branch(k, side)))
    return helper.make_graph(nodes, f"then_L{k}", [], [_f32(yo, [1, 1, H]), _f32(so, [2, 1, H])])


def _else_branch(k: int, side: str) -> onnx.GraphProto:
    nodes = [
        helper.make_node("Identity", [side], [f"ye_L{k}"], name=f"L{k}_else_y"),
        helper.make_node("Identity", ["state"], [f"se_L{k}"], name=f"L{k}_else_s"),
    ]
    return helper.make_graph(nodes, f"else_L{k}", [], [_f32(f"ye_L{k}", [1, 1, H]), _f32(f"se_L{k}", [2, 1, H])])


def _nested_main(then_g: onnx.GraphProto | None, depth: int) -> tuple[onnx.GraphProto, onnx.NodeProto]:
    nodes: list[onnx.NodeProto] = []
    side = _Filler(nodes, "L0_op").run("x", NESTED_FILLER)
    if_node = helper.make_node("If", ["cond"], ["y", "stateN"], name="L0_if", else_branch=_else_branch(0, side))
    if then_g is not None:
        if_node.attribute.append(helper.make_attribute("then_branch", then_g))
    graph = helper.make_graph(
        nodes,
        f"nested_if_d{depth}",
        [_f32("x", [1, 1, H]), _f32("state", [2, 1, H]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [_f32("y", [1, 1, H]), _f32("stateN", [2, 1, H])],
        _shared_inits() + _rnn_weights("LSTM", 0),
    )
    return graph, if_node


def nested_node_count(depth: int) -> int:
    """Nodes in every graph of the nested-If model: per If level its filler, the If and a 2-node else branch; the LSTM level 4 more."""
    return depth * (NESTED_FILLER + 3) + NESTED_FILLER + 4


def nested_if(depth: int) -> onnx.ModelProto:
    """``depth`` nested If nodes (parseable only for depth <= 31)."""
    graph, if_node = _nested_main(_nested_level(1, depth, NESTED_FILLER) if depth > 1 else None, depth)
    graph.node.append(if_node)
    return _model(graph)


def _ld(field: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def nested_if_bytes(depth: int) -> bytes:
    """The same model as :func:`nested_if`, serialised by hand so that any depth can be written.

    Fields are appended to serialised messages (protobuf allows any field order;
    repeated fields keep their order): the If node gets its ``then_branch``
    attribute appended, and each graph gets its final If node appended.
    """
    # level k's graph without its If node, and the If node without then_branch
    def graph_bytes(k: int) -> bytes:
        if k == depth:
            return _nested_level(k, depth, NESTED_FILLER).SerializeToString()
        nodes: list[onnx.NodeProto] = []
        side = _Filler(nodes, f"L{k}_op").run("x", NESTED_FILLER)
        yo, so = f"y_L{k}", f"s_L{k}"
        g = helper.make_graph(nodes, f"then_L{k}", [], [_f32(yo, [1, 1, H]), _f32(so, [2, 1, H])])
        node = helper.make_node("If", ["cond"], [yo, so], name=f"L{k}_if", else_branch=_else_branch(k, side))
        return g.SerializeToString() + _ld(1, _with_then(node, graph_bytes(k + 1)))

    graph, if_node = _nested_main(None, depth)
    main = graph.SerializeToString() + _ld(1, _with_then(if_node, graph_bytes(1)))
    shell = _model(helper.make_graph([], "x", [], []))
    shell.ClearField("graph")
    return shell.SerializeToString() + _ld(7, main)


def _with_then(node: onnx.NodeProto, then_bytes: bytes) -> bytes:
    # AttributeProto: name = 1, g = 6, type = 20 (GRAPH = 5)
    attr = _ld(1, b"then_branch") + _ld(6, then_bytes) + _varint(20 << 3 | 0) + _varint(onnx.AttributeProto.GRAPH)
    return node.SerializeToString() + _ld(5, attr)


# --------------------------------------------------------------------- multi-call workloads


def lstm_layer(batch: int | str = 1) -> onnx.ModelProto:
    """One LSTM layer, input 64, hidden 128, sequence length ``T`` given per call; ``batch="B"`` leaves the
    batch dim free (the same weights), so many streams can share one call (bench/pool.py)."""
    inits = _rnn_weights("LSTM", 0, hidden=LSTM_HIDDEN, inp=LSTM_IN)
    node = helper.make_node("LSTM", ["x", "W0", "R0", "B0", "", "h0", "c0"], ["Y", "hn", "cn"], name="lstm", hidden_size=LSTM_HIDDEN)
    sq = helper.make_node("Squeeze", ["Y", "axes1"], ["y"], name="squeeze")
    graph = helper.make_graph(
        [node, sq],
        "lstm_i64_h128" if batch == 1 else "lstm_i64_h128_b",
        [_f32("x", ["T", batch, LSTM_IN]), _f32("h0", [1, batch, LSTM_HIDDEN]), _f32("c0", [1, batch, LSTM_HIDDEN])],
        [_f32("y", ["T", batch, LSTM_HIDDEN]), _f32("hn", [1, batch, LSTM_HIDDEN]), _f32("cn", [1, batch, LSTM_HIDDEN])],
        inits + [_init("axes1", np.array([1], dtype=np.int64))],
    )
    return _model(graph)


def cache_model() -> onnx.ModelProto:
    """12 streaming-cache layers: full = Concat(cache, x); new_cache = full[..., T:]; x' = full[..., -T:] + mean(full)."""
    nodes: list[onnx.NodeProto] = []
    inputs = [_f32("x", [1, CACHE_C, CACHE_T])]
    outputs = [_f32("y", [1, CACHE_C, CACHE_T])]
    inits = [
        _init("k_start", np.array([CACHE_T], dtype=np.int64)),
        _init("k_end", np.array([CACHE_T + CACHE_K], dtype=np.int64)),
        _init("t_start", np.array([CACHE_K], dtype=np.int64)),
        _init("axis2", np.array([2], dtype=np.int64)),
    ]
    x = "x"
    for lay in range(CACHE_LAYERS):
        c, nc = f"cache_{lay}", f"new_cache_{lay}"
        inputs.append(_f32(c, [1, CACHE_C, CACHE_K]))
        outputs.append(_f32(nc, [1, CACHE_C, CACHE_K]))
        full, last, mean, nxt = f"full{lay}", f"last{lay}", f"mean{lay}", f"x{lay + 1}"
        nodes += [
            helper.make_node("Concat", [c, x], [full], name=f"concat{lay}", axis=2),
            helper.make_node("Slice", [full, "k_start", "k_end", "axis2"], [nc], name=f"keep{lay}"),
            helper.make_node("Slice", [full, "t_start", "k_end", "axis2"], [last], name=f"last{lay}"),
            helper.make_node("ReduceMean", [full], [mean], name=f"mean{lay}", axes=[2], keepdims=1),
            helper.make_node("Add", [last, mean], [nxt], name=f"add{lay}"),
        ]
        x = nxt
    nodes.append(helper.make_node("Identity", [x], ["y"], name="out_y"))
    return _model(helper.make_graph(nodes, "cache12", inputs, outputs, inits))


def cache_state_bytes() -> int:
    return CACHE_LAYERS * CACHE_C * CACHE_K * 4


# --------------------------------------------------------------------- driver


def build_all(out: pathlib.Path = DEFAULT_OUT, force: bool = False, only: set[str] | None = None, log=print) -> dict[str, pathlib.Path]:
    """Write every model into ``out`` (skipping ones already there); return stem -> path."""
    out.mkdir(parents=True, exist_ok=True)
    makers = {stem: (lambda n=n, k=k: synthetic(n, k)) for stem, n, k in SYNTHETIC}
    makers[f"nested_if_d{NESTED_DEPTH}"] = lambda: nested_if(NESTED_DEPTH)
    makers[f"nested_if_d{NESTED_TOO_DEEP}"] = lambda: nested_if_bytes(NESTED_TOO_DEEP)
    makers["lstm_i64_h128"] = lstm_layer
    makers["lstm_i64_h128_b"] = lambda: lstm_layer("B")
    makers["cache12"] = cache_model
    paths: dict[str, pathlib.Path] = {}
    for stem, make in makers.items():
        if only is not None and stem not in only:
            continue
        path = out / f"{stem}.onnx"
        paths[stem] = path
        if path.is_file() and not force:
            continue
        model = make()
        data = model if isinstance(model, bytes) else model.SerializeToString()
        tmp = path.with_suffix(".onnx.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        log(f"wrote {path} ({len(data) / 1e6:.2f} MB)")
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    ap.add_argument("--force", action="store_true", help="rebuild models already in the cache")
    args = ap.parse_args(argv)
    build_all(args.out, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
