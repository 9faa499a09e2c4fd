"""Regenerate the PyTorch-exported recurrent *cells* in ``tests/data/torch_cells/``.

These are the models of issue 8 whose recurrence is NOT an ONNX RNN/GRU/LSTM
node at the top level: ``nn.LSTMCell``/``nn.GRUCell``/``nn.RNNCell`` steps
(exported as plain Gemm/Split/Sigmoid/Tanh/Mul/Add/Sub), hand-written cells in
other gate orders, a Python loop the exporter unrolls, a ``torch.jit.script``
loop exported as an ONNX ``Loop`` and a ``torch`` ``scan`` exported as an ONNX
``Scan``. Run once by hand (outputs are committed; tests never need torch)::

    python -m venv /work/venvs/torch
    /work/venvs/torch/bin/pip install torch==2.13.0 onnx==1.23.2 onnxscript onnxruntime numpy
    /work/venvs/torch/bin/python tests/data/make_torch_cells.py

For every model this writes (where the exporter can produce it)

* ``<name>.ts.onnx``      -- TorchScript exporter (``dynamo=False``), opset 17,
  dynamic batch ``B`` (and time ``T`` where the model has a dynamic time axis);
* ``<name>.dynamo.onnx``  -- dynamo exporter (``dynamo=True``), opset 18, static
  shapes except where said, weights INLINE (``external_data=False``: the cells
  are tiny and the mutants in ``tests/mutants.py`` rewrite single files);
* ``<name>.calls.npz``    -- PyTorch's outputs of 3 consecutive calls with the
  state fed back, plus (models with a time axis) one call over the whole
  sequence of 12 steps;

and ``README.md`` + ``manifest.json`` documenting inputs, outputs, state pairs
and, for every state input and output, where it goes in each graph. Every file
is checked with ``onnx.checker`` (full_check) and run in onnxruntime against the
PyTorch oracle (atol 1e-5) before it is written; the script fails otherwise.

``<name>.calls.npz`` keys (``NAME`` = a graph input/output name)::

    call{k}_in_NAME    feed of call k (k = 0, 1, 2); state inputs of call k>0
                       are PyTorch's paired outputs of call k-1
    call{k}_out_NAME   PyTorch result of call k
    full_in_NAME       (time-axis models) the whole sequence, initial state
    full_out_NAME      (time-axis models) PyTorch result of that single call
    pairs              str array [[state_input, state_output], ...]
    time_axis          int: time axis of x and y, -1 for a single-step cell
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sys
import tempfile
import warnings
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from describe_graph import describe, readme_lines  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent / "torch_cells"
IN, HID, HEAD = 8, 16, 4
BATCH = 2
T_FULL, CHUNK, NCALLS = 12, 4, 3
TS_OPSET, DYNAMO_OPSET = 17, 18
ATOL = 1e-5


# --------------------------------------------------------------------- models


class LstmCellStep(nn.Module):
    """nn.LSTMCell(8, 16) one step + Linear(16, 4) on h'."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(IN, HID)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, h0, c0):
        h, c = self.cell(x, (h0, c0))
        return self.head(h), h, c


class GruCellStep(nn.Module):
    """nn.GRUCell(8, 16) one step + Linear(16, 4)."""

    def __init__(self, bias: bool = True) -> None:
        super().__init__()
        self.cell = nn.GRUCell(IN, HID, bias=bias)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, h0):
        h = self.cell(x, h0)
        return self.head(h), h


class RnnCellStep(nn.Module):
    """nn.RNNCell(8, 16, tanh) one step + Linear(16, 4)."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.RNNCell(IN, HID, nonlinearity="tanh")
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, h0):
        h = self.cell(x, h0)
        return self.head(h), h


class LstmCellPacked(nn.Module):
    """silero-vad style: h and c packed in state[2, B, 16]; stateN = stack(h', c')."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(IN, HID)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, state):
        h, c = self.cell(x, (state[0], state[1]))
        return self.head(h), torch.stack([h, c])


class GruCellStacked(nn.Module):
    """Two stacked GRUCells; h0[l] is layer l's state; hn = stack(layer 0, layer 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.cell0 = nn.GRUCell(IN, HID)
        self.cell1 = nn.GRUCell(HID, HID)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, h0):
        h_a = self.cell0(x, h0[0])
        h_b = self.cell1(h_a, h0[1])
        return self.head(h_b), torch.stack([h_a, h_b])


class RnnCellStacked(nn.Module):
    """Two stacked nn.RNNCell (tanh); h0[l] is layer l's state; hn = stack(layer 0, layer 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.cell0 = nn.RNNCell(IN, HID, nonlinearity="tanh")
        self.cell1 = nn.RNNCell(HID, HID, nonlinearity="tanh")
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, h0):
        h_a = self.cell0(x, h0[0])
        h_b = self.cell1(h_a, h0[1])
        return self.head(h_b), torch.stack([h_a, h_b])


class LstmCellKeras(nn.Module):
    """Keras LSTMCell math written in torch ops: gate order i, f, c, o; x @ kernel (MatMul)."""

    def __init__(self) -> None:
        super().__init__()
        self.kernel = nn.Parameter(0.3 * torch.randn(IN, 4 * HID))
        self.recurrent_kernel = nn.Parameter(0.3 * torch.randn(HID, 4 * HID))
        self.bias = nn.Parameter(0.1 * torch.randn(4 * HID))
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, h0, c0):
        z = x @ self.kernel + h0 @ self.recurrent_kernel + self.bias
        i, f, g, o = torch.split(z, HID, dim=-1)
        c = torch.sigmoid(f) * c0 + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return self.head(h), h, c


class GruCellResetBefore(nn.Module):
    """Keras GRU with reset_after=False, gate order z, r, h: the reset gate multiplies h
    BEFORE the recurrent matmul, and h' = z*h + (1-z)*n (Keras' convention)."""

    def __init__(self) -> None:
        super().__init__()
        self.kernel = nn.Parameter(0.3 * torch.randn(IN, 3 * HID))
        self.recurrent_zr = nn.Parameter(0.3 * torch.randn(HID, 2 * HID))
        self.recurrent_h = nn.Parameter(0.3 * torch.randn(HID, HID))
        self.bias = nn.Parameter(0.1 * torch.randn(3 * HID))
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, h0):
        xz, xr, xh = torch.split(x @ self.kernel + self.bias, HID, dim=-1)
        hz, hr = torch.split(h0 @ self.recurrent_zr, HID, dim=-1)
        z = torch.sigmoid(xz + hz)
        r = torch.sigmoid(xr + hr)
        n = torch.tanh(xh + (r * h0) @ self.recurrent_h)
        h = z * h0 + (1 - z) * n
        return self.head(h), h


class LstmCellUnrolled(nn.Module):
    """A Python for-loop of nn.LSTMCell over x[T, B, 8]: tracing unrolls it (T fixed to 4)."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(IN, HID)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, h0, c0):
        h, c = h0, c0
        ys = []
        for t in range(x.shape[0]):
            h, c = self.cell(x[t], (h, c))
            ys.append(self.head(h))
        return torch.stack(ys), h, c


class LstmCellLoop(nn.Module):
    """nn.LSTMCell in a time loop meant for torch.jit.script (dynamic T)."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(IN, HID)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, h0, c0):
        h, c = h0, c0
        ys = []
        for t in range(x.size(0)):
            h, c = self.cell(x[t], (h, c))
            ys.append(h)
        return self.head(torch.stack(ys)), h, c


class LstmHandLoop(nn.Module):
    """A hand-written LSTM step (PyTorch gate order i, f, g, o; two Linear layers) in a
    time loop meant for torch.jit.script: the Loop body is plain ops, no LSTM node."""

    def __init__(self) -> None:
        super().__init__()
        self.ih = nn.Linear(IN, 4 * HID)
        self.hh = nn.Linear(HID, 4 * HID)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, h0, c0):
        h, c = h0, c0
        ys = []
        for t in range(x.size(0)):
            gates = self.ih(x[t]) + self.hh(h)
            i, f, g, o = gates.chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            ys.append(h)
        return self.head(torch.stack(ys)), h, c


class LstmCellScan(nn.Module):
    """nn.LSTMCell under torch's ``scan`` higher-order op: the dynamo exporter writes an
    ONNX Scan whose body is the plain-op cell, carrying h and c, with dynamic T."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(IN, HID)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, h0, c0):
        from torch._higher_order_ops.scan import scan

        def step(carry, xt):
            h, c = carry
            h2, c2 = self.cell(xt, (h, c))
            return (h2, c2), h2.clone()

        (hn, cn), ys = scan(step, (h0, c0), x)
        return self.head(ys), hn, cn


class Time:
    NONE = "none"        # one step per call: x [B, 8]
    STATIC = "static"    # x [4, B, 8], T baked into the graph
    DYNAMIC = "dynamic"  # x [T, B, 8], any T


@dataclasses.dataclass(frozen=True)
class Spec:
    factory: Callable[[], nn.Module]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    pairs: dict[str, str]
    #: per state input: the shape with "B" for the batch
    state_shapes: dict[str, tuple[int | str, ...]]
    time: str
    desc: str
    layout: str = ""
    exporters: tuple[str, ...] = ("ts", "dynamo")
    script: bool = False  # torch.jit.script the module before the TorchScript export


S1 = ("B", HID)
S2 = (2, "B", HID)
LSTM_IO = dict(inputs=("x", "h0", "c0"), outputs=("y", "hn", "cn"), pairs={"h0": "hn", "c0": "cn"})
GRU_IO = dict(inputs=("x", "h0"), outputs=("y", "hn"), pairs={"h0": "hn"})

SPECS: dict[str, Spec] = {
    "lstm_cell": Spec(LstmCellStep, **LSTM_IO, state_shapes={"h0": S1, "c0": S1}, time=Time.NONE,
                      desc="nn.LSTMCell(8, 16), one step, + Linear(16, 4) on h'"),
    "gru_cell": Spec(GruCellStep, **GRU_IO, state_shapes={"h0": S1}, time=Time.NONE,
                     desc="nn.GRUCell(8, 16), one step, + Linear(16, 4)"),
    "rnn_cell": Spec(RnnCellStep, **GRU_IO, state_shapes={"h0": S1}, time=Time.NONE,
                     desc="nn.RNNCell(8, 16, nonlinearity='tanh'), one step, + Linear(16, 4)"),
    "gru_cell_nobias": Spec(lambda: GruCellStep(bias=False), **GRU_IO, state_shapes={"h0": S1},
                            time=Time.NONE, desc="nn.GRUCell(8, 16, bias=False), one step, + Linear(16, 4)"),
    "lstm_cell_packed": Spec(LstmCellPacked, inputs=("x", "state"), outputs=("y", "stateN"),
                             pairs={"state": "stateN"}, state_shapes={"state": S2}, time=Time.NONE,
                             desc="nn.LSTMCell(8, 16) with silero-style packed state",
                             layout="state[0] = h, state[1] = c; stateN = stack(h', c')"),
    "gru_cell_stacked": Spec(GruCellStacked, **GRU_IO, state_shapes={"h0": S2}, time=Time.NONE,
                             desc="two stacked nn.GRUCell (8->16, 16->16), + Linear(16, 4) on layer 1",
                             layout="h0[0] = layer 0, h0[1] = layer 1; hn = stack(h0', h1')"),
    "lstm_cell_keras": Spec(LstmCellKeras, **LSTM_IO, state_shapes={"h0": S1, "c0": S1}, time=Time.NONE,
                            desc="hand-written Keras-style LSTM step in torch ops: z = x@kernel + h@recurrent_kernel + bias "
                                 "(MatMul, not Gemm), gate order i, f, c, o split with torch.split",
                            layout="c' = sigmoid(f)*c0 + sigmoid(i)*tanh(g), h' = sigmoid(o)*tanh(c')"),
    "gru_cell_reset_before": Spec(GruCellResetBefore, **GRU_IO, state_shapes={"h0": S1}, time=Time.NONE,
                                  desc="hand-written Keras GRU (reset_after=False), gate order z, r, h: "
                                       "n = tanh(x@Wh + (r*h0)@Uh + b), h' = z*h0 + (1-z)*n",
                                  layout="the reset gate multiplies h0 before the recurrent matmul"),
    "lstm_cell_unrolled": Spec(LstmCellUnrolled, **LSTM_IO, state_shapes={"h0": S1, "c0": S1}, time=Time.STATIC,
                               desc="Python `for t in range(T)` over nn.LSTMCell, x[4, B, 8]; the exporter unrolls "
                                    "it into 4 copies of the cell (T fixed to 4 in the graph)",
                               layout="hn/cn = the 4th step's h'/c'; y[t] = Linear(h_t)"),
    "lstm_cell_loop": Spec(LstmCellLoop, **LSTM_IO, state_shapes={"h0": S1, "c0": S1}, time=Time.DYNAMIC,
                           desc="torch.jit.script-ed time loop over nn.LSTMCell, x[T, B, 8] with dynamic T, "
                                "exported as an ONNX Loop carrying h and c (its body holds an ONNX LSTM node "
                                "of one step: TorchScript's symbolic for aten::lstm_cell)",
                           exporters=("ts",), script=True),
    "lstm_hand_loop": Spec(LstmHandLoop, **LSTM_IO, state_shapes={"h0": S1, "c0": S1}, time=Time.DYNAMIC,
                           desc="torch.jit.script-ed time loop over a hand-written LSTM step (two nn.Linear, "
                                "chunk(4) in order i, f, g, o), exported as an ONNX Loop whose body is plain ops",
                           exporters=("ts",), script=True),
    "lstm_cell_scan": Spec(LstmCellScan, **LSTM_IO, state_shapes={"h0": S1, "c0": S1}, time=Time.DYNAMIC,
                           desc="nn.LSTMCell under torch's `scan` higher-order op (torch._higher_order_ops.scan), "
                                "exported by dynamo as an ONNX Scan carrying h and c; dynamic T",
                           exporters=("dynamo",)),
    # last, so the models above keep their seeds (build() seeds by position)
    "rnn_cell_stacked": Spec(RnnCellStacked, **GRU_IO, state_shapes={"h0": S2}, time=Time.NONE,
                             desc="two stacked nn.RNNCell (8->16, 16->16, tanh), + Linear(16, 4) on layer 1",
                             layout="h0[0] = layer 0, h0[1] = layer 1; hn = stack(h0', h1')"),
}


# --------------------------------------------------------------------- oracle


def build(name: str) -> nn.Module:
    torch.manual_seed(4321 + list(SPECS).index(name))
    return SPECS[name].factory().eval()


def _shape(shape: tuple[int | str, ...]) -> tuple[int, ...]:
    return tuple(BATCH if d == "B" else int(d) for d in shape)


def make_inputs(name: str) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The x stream (3 steps for a cell, 12 steps otherwise) and non-zero initial states."""
    spec = SPECS[name]
    g = torch.Generator().manual_seed(77 + list(SPECS).index(name))
    steps = NCALLS if spec.time == Time.NONE else T_FULL
    x = torch.randn(steps, BATCH, IN, generator=g)
    # non-zero initial states: a persistence or h/c-swap bug changes the results
    states = {n: 0.5 * torch.randn(*_shape(s), generator=g) for n, s in spec.state_shapes.items()}
    return x, states


def call_x(name: str, x: torch.Tensor, k: int) -> torch.Tensor:
    return x[k] if SPECS[name].time == Time.NONE else x[k * CHUNK:(k + 1) * CHUNK]


def run_torch(model: nn.Module, spec: Spec, feed: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        res = model(*[feed[n] for n in spec.inputs])
    return dict(zip(spec.outputs, res))


def oracle(name: str, model: nn.Module) -> dict[str, np.ndarray]:
    spec = SPECS[name]
    x, states = make_inputs(name)
    arrays: dict[str, torch.Tensor] = {}
    cur = dict(states)
    for k in range(NCALLS):
        feed = dict(cur, x=call_x(name, x, k))
        outs = run_torch(model, spec, feed)
        arrays.update({f"call{k}_in_{n}": v for n, v in feed.items()})
        arrays.update({f"call{k}_out_{n}": v for n, v in outs.items()})
        cur = {i: outs[o] for i, o in spec.pairs.items()}
    if spec.time != Time.NONE:
        feed = dict(states, x=x)
        arrays.update({f"full_in_{n}": v for n, v in feed.items()})
        arrays.update({f"full_out_{n}": v for n, v in run_torch(model, spec, feed).items()})
    out = {k: v.detach().numpy().astype(np.float32) for k, v in arrays.items()}
    out["pairs"] = np.array(list(spec.pairs.items()), dtype=str).reshape(-1, 2)
    out["time_axis"] = np.array(-1 if spec.time == Time.NONE else 0, dtype=np.int64)
    return out


# --------------------------------------------------------------------- export


def example_args(name: str) -> tuple[torch.Tensor, ...]:
    spec = SPECS[name]
    x, states = make_inputs(name)
    return (call_x(name, x, 0), *[states[n] for n in spec.inputs[1:]])


def _batch_axes(name: str) -> dict[str, dict[int, str]]:
    spec = SPECS[name]
    dyn: dict[str, dict[int, str]] = {}
    for n in ("x", "y"):
        if spec.time == Time.NONE:
            dyn[n] = {0: "B"}
        elif spec.time == Time.STATIC:
            dyn[n] = {1: "B"}
        else:
            dyn[n] = {0: "T", 1: "B"}
    for i, o in spec.pairs.items():
        axis = spec.state_shapes[i].index("B")
        dyn[i] = {axis: "B"}
        dyn[o] = {axis: "B"}
    return dyn


def export_ts(name: str, model: nn.Module, path: pathlib.Path) -> None:
    spec = SPECS[name]
    module = torch.jit.script(model) if spec.script else model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example_args(name), str(path), dynamo=False, opset_version=TS_OPSET,
                          input_names=list(spec.inputs), output_names=list(spec.outputs),
                          dynamic_axes=_batch_axes(name))


def export_dynamo(name: str, model: nn.Module, path: pathlib.Path) -> None:
    """Static shapes, except the time axis of a model that has a dynamic one."""
    spec = SPECS[name]
    dynamic_shapes = None
    if spec.time == Time.DYNAMIC:
        t = torch.export.Dim("T", min=1)
        dynamic_shapes = ({0: t},) + (None,) * (len(spec.inputs) - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, example_args(name), str(path), dynamo=True, external_data=False,
                          opset_version=DYNAMO_OPSET, input_names=list(spec.inputs),
                          output_names=list(spec.outputs), dynamic_shapes=dynamic_shapes)


def _session(path: pathlib.Path) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def verify(name: str, path: pathlib.Path, arrays: dict[str, np.ndarray]) -> dict[str, float | bool]:
    """onnxruntime vs the PyTorch oracle: 3 calls with ORT's own state fed back, and the
    whole sequence in one call where the graph accepts it. Raises on any mismatch."""
    spec = SPECS[name]
    onnx.checker.check_model(str(path), full_check=True)
    sess = _session(path)
    names = [o.name for o in sess.get_outputs()]
    assert [i.name for i in sess.get_inputs()] == list(spec.inputs), path
    assert names == list(spec.outputs), path
    state = {i: arrays[f"call0_in_{i}"] for i in spec.pairs}
    worst = 0.0
    for k in range(NCALLS):
        got = dict(zip(names, sess.run(None, dict(state, x=arrays[f"call{k}_in_x"]))))
        for n in names:
            err = float(np.abs(got[n] - arrays[f"call{k}_out_{n}"]).max())
            assert err <= ATOL, f"{path.name} call {k} output {n}: |ort - torch| = {err}"
            worst = max(worst, err)
        state = {i: got[o] for i, o in spec.pairs.items()}
    result: dict[str, float | bool] = {"max_abs_err_3_calls": worst, "runs_whole_sequence": False}
    if spec.time == Time.NONE:
        return result
    x_dim = sess.get_inputs()[0].shape[0]
    if isinstance(x_dim, int) and x_dim != T_FULL:
        return result  # the time axis is baked in: the whole-sequence call cannot run
    feed = {n: arrays[f"full_in_{n}"] for n in spec.inputs}
    got = dict(zip(names, sess.run(None, feed)))
    err = max(float(np.abs(got[n] - arrays[f"full_out_{n}"]).max()) for n in names)
    assert err <= ATOL, f"{path.name} whole sequence: |ort - torch| = {err}"
    result.update(max_abs_err_whole=err, runs_whole_sequence=True)
    return result


def loop_carries(path: pathlib.Path, op: str, pairs: dict[str, str]) -> list[str]:
    """Assert the graph holds one ``op`` (Loop/Scan) whose carried values come from the
    state inputs and whose carried results are the state outputs; returns its node name."""
    model = onnx.load(str(path))
    nodes = [n for n in model.graph.node if n.op_type == op]
    assert len(nodes) == 1, f"{path.name}: {len(nodes)} {op} nodes"
    node = nodes[0]
    first = 2 if op == "Loop" else 0
    producer = {o: n for n in model.graph.node for o in n.output}

    def root(name: str) -> str:  # back through Identity/Squeeze/... to a graph input
        while name in producer and producer[name].op_type in ("Identity", "Squeeze", "Unsqueeze", "Cast"):
            name = producer[name].input[0]
        return name

    carried_in = [root(i) for i in node.input[first:first + len(pairs)]]
    assert carried_in == list(pairs), f"{path.name}: {op} carries {carried_in}, not {list(pairs)}"
    consumers = {i: n for n in model.graph.node for i in n.input}
    outs = []
    for o in node.output[:len(pairs)]:
        while o not in {g.name for g in model.graph.output}:
            o = consumers[o].output[0]
        outs.append(o)
    assert outs == list(pairs.values()), f"{path.name}: {op} results go to {outs}"
    return [node.name]


def dynamo_of_scripted(name: str, model: nn.Module) -> str:
    """What the dynamo exporter makes of a model meant for torch.jit.script (not committed)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "m.onnx"
        try:
            export_dynamo(name, model, path)
        except Exception as exc:  # record what happened; nothing to commit
            return f"dynamo export failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        m = onnx.load(str(path))
        dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in m.graph.input}
        ops = describe(path, SPECS[name].pairs)["ops"]
        loops = [op for op in ops if op in ("Loop", "Scan")]
        return (f"dynamo exporter (torch.export, dynamic_shapes T) on the eager module: no "
                f"{'Loop' if not loops else loops}; x declared {dims['x']} (T specialised to the example's "
                f"{CHUNK} without an error) and the cell unrolled: " + ", ".join(f"{k}x{v}" for k, v in ops.items()))


def ts_attempt(name: str, model: nn.Module) -> str:
    """What the TorchScript exporter makes of a model committed only as a dynamo export."""
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "m.onnx"
        try:
            export_ts(name, model, path)
        except Exception as exc:  # record what happened; nothing to commit
            return f"TorchScript exporter failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
        ops = describe(path, SPECS[name].pairs)["ops"]
        return "TorchScript exporter (not committed): " + ", ".join(f"{k}x{v}" for k, v in ops.items())


def versions() -> dict[str, str]:
    import onnxscript
    return {"torch": torch.__version__, "onnx": onnx.__version__, "onnxscript": onnxscript.__version__,
            "onnxruntime": ort.__version__, "numpy": np.__version__, "python": sys.version.split()[0]}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    report: dict = {"versions": versions(), "batch": BATCH, "models": {}}
    for name, spec in SPECS.items():
        model = build(name)
        arrays = oracle(name, model)
        entry: dict = {"desc": spec.desc, "layout": spec.layout, "time": spec.time, "pairs": spec.pairs,
                       "state_shapes": {k: list(v) for k, v in spec.state_shapes.items()},
                       "exports": {}, "notes": []}
        for kind in ("ts", "dynamo"):
            path = OUT / f"{name}.{kind}.onnx"
            if kind not in spec.exporters:
                if path.exists():
                    path.unlink()
                continue
            # export beside the destination and move it into place only once it is verified
            staged = OUT / f".{path.name}.staged.onnx"
            (export_ts if kind == "ts" else export_dynamo)(name, model, staged)
            checks = verify(name, staged, arrays)
            staged.replace(path)
            info = describe(path, spec.pairs)
            info.update(checks)
            if name in ("lstm_cell_loop", "lstm_hand_loop"):
                info["loop_node"] = loop_carries(path, "Loop", spec.pairs)[0]
            if name == "lstm_cell_scan":
                info["scan_node"] = loop_carries(path, "Scan", spec.pairs)[0]
            entry["exports"][kind] = info
        if spec.script:
            entry["notes"].append(dynamo_of_scripted(name, build(name)))
        if "ts" not in spec.exporters:
            entry["notes"].append(ts_attempt(name, build(name)))
        np.savez(OUT / f"{name}.calls.npz", **arrays)
        report["models"][name] = entry
        print(name, "ok", flush=True)
    (OUT / "manifest.json").write_text(json.dumps(report, indent=1) + "\n")
    write_readme(report)


def write_readme(report: dict) -> None:
    v = report["versions"]
    lines = ["# PyTorch-exported recurrent cells, unrolled loops, Loop and Scan", "",
             "Generated by `tests/data/make_torch_cells.py` (do not edit by hand; rerun it). "
             "Tests use these files and never need torch.", "",
             "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".", "",
             "None of these graphs has an ONNX RNN/GRU/LSTM node at the top level: the recurrence is plain "
             "ops (Gemm or MatMul, Split, Sigmoid, Tanh, Mul, Add, Sub), repeated for an unrolled loop, or "
             "inside a Loop/Scan body. (`lstm_cell_loop`'s Loop body holds a one-step ONNX LSTM.)", "",
             f"- `<name>.ts.onnx`: TorchScript exporter (`dynamo=False`), opset {TS_OPSET}, dynamic batch `B` "
             "(and `T` for the Loop models), weights inline.",
             f"- `<name>.dynamo.onnx`: dynamo exporter (`dynamo=True, external_data=False`), opset {DYNAMO_OPSET}, "
             f"weights inline, static shapes (batch {BATCH}) except `T` of `lstm_cell_scan`.",
             f"- `<name>.calls.npz`: PyTorch oracle: {NCALLS} consecutive calls with the state fed back "
             "(`call{k}_in_NAME`, `call{k}_out_NAME`); single-step cells take x[k] of a 3-step stream "
             f"(`time_axis` = -1); time-axis models take chunks of {CHUNK} of a {T_FULL}-step stream "
             f"(`time_axis` = 0) and also have `full_in_NAME`/`full_out_NAME` (all {T_FULL} steps in one "
             "call; `lstm_cell_unrolled`'s graphs only accept T=4, so only torch computed that one). "
             "`pairs` = [[state input, state output], ...].",
             "- `manifest.json`: the same facts, machine-readable (per export: inputs, outputs, ops, "
             "`state_in`/`state_out` chains, max error vs torch, `loop_node`/`scan_node`).", "",
             "Every file passed `onnx.checker.check_model(full_check=True)` and onnxruntime matched PyTorch "
             f"within {ATOL:g} on the 3 chained calls (and the whole sequence where the graph accepts it) "
             "before it was written.", "",
             "Dataflow lines: `in:` follows a state input through layout-only ops (Gather, Slice, Squeeze, "
             "Unsqueeze, Concat, Identity, ...) to the ops that use it, `=>` entering a Loop/Scan body or If "
             "branch; `out:` goes from the op that computes a state output to the graph output. "
             "`(input k)` is the operand position; node names are in quotes.", "",
             "| file | bytes |", "| --- | ---: |"]
    files = sorted(p.name for p in OUT.iterdir() if p.name != "README.md" and not p.name.startswith("."))
    for f in files:
        lines.append(f"| `{f}` | {(OUT / f).stat().st_size} |")
    lines += ["", f"Total (without README): {sum((OUT / f).stat().st_size for f in files)} bytes.", ""]
    for name, e in report["models"].items():
        lines += [f"## {name}", "", e["desc"] + ".", ""]
        if e["layout"]:
            lines += [e["layout"] + ".", ""]
        lines.append("State pairs (input -> output): "
                     + ", ".join(f"`{i}` -> `{o}`" for i, o in e["pairs"].items())
                     + "; state shapes " + ", ".join(f"`{k}` {v}" for k, v in e["state_shapes"].items()) + ".")
        lines.append("")
        for x in e["exports"].values():
            lines += readme_lines(x)
            lines.append(f"  - max |onnxruntime - torch|: {x['max_abs_err_3_calls']:.3g} over the 3 calls"
                         + (f", {x['max_abs_err_whole']:.3g} over the whole sequence"
                            if x["runs_whole_sequence"] else ""))
            for key in ("loop_node", "scan_node"):
                if key in x:
                    lines.append(f"  - {key}: `{x[key]}` (checked: carries h0/c0 in, hn/cn out)")
        for note in e["notes"]:
            lines.append(f"- note: {note}")
        lines.append("")
    (OUT / "README.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
