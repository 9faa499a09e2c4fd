"""Regenerate the PyTorch-exported streaming models in ``tests/data/torch/``.

Run once by hand (the outputs are committed; tests never need torch)::

    pip install torch==2.13.0 onnxscript     # CPU wheel; not a project dependency
    python tests/data/make_torch_models.py

For every model below this writes

* ``<name>.ts.onnx``      -- TorchScript exporter (``dynamo=False``), opset 17;
* ``<name>.dynamo.onnx``  -- dynamo exporter (``dynamo=True``), opset 18, with
  its weights as external data in ``<name>.dynamo.onnx.data`` next to it;
* ``<name>.calls.npz``    -- a PyTorch-computed oracle: a fixed input sequence
  (T=12), the initial state(s) and the outputs of three consecutive calls of
  4 steps each with the state fed back, plus one call over the whole sequence.

and ``README.md`` documenting them.  Everything is seeded, so a rerun on the same
torch/onnx versions produces numerically identical weights and oracles.

``<name>.calls.npz`` keys (``NAME`` is a graph input/output name)::

    call{k}_in_NAME    feed of call k (k = 0, 1, 2); state inputs of call k>0
                       are the paired outputs of call k-1
    call{k}_out_NAME   PyTorch result of call k
    full_in_NAME       the whole sequence (T=12) with the initial state
    full_out_NAME      PyTorch result of that single call
    pairs              str array [[state_input, state_output], ...] (shape (0, 2)
                       for a stateless model)
    time_axis          int: the time axis of the sequence input/outputs
"""

from __future__ import annotations

import json
import pathlib
import sys
import warnings

import numpy as np
import onnx
import torch
from torch import nn

OUT = pathlib.Path(__file__).resolve().parent / "torch"
IN, HID, HEAD = 8, 16, 4
T, CHUNK, NCALLS = 12, 4, 3
TS_OPSET, DYNAMO_OPSET = 17, 18


# --------------------------------------------------------------------- models


class GruStream(nn.Module):
    """GRU(8, 16) + Linear head; forward(x, h0) -> (y, hn); x [T, B, 8]."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(IN, HID)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, h0):
        y, hn = self.rnn(x, h0)
        return self.head(y), hn


class LstmStream(nn.Module):
    """LSTM(8, 16) + head; forward(x, h0, c0) -> (y, hn, cn)."""

    def __init__(self, batch_first=False):
        super().__init__()
        self.rnn = nn.LSTM(IN, HID, batch_first=batch_first)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, h0, c0):
        y, (hn, cn) = self.rnn(x, (h0, c0))
        return self.head(y), hn, cn


class Gru2Stream(nn.Module):
    """Two stacked GRU layers; the layers' states share one tensor [2, B, 16]."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(IN, HID, num_layers=2)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, h0):
        y, hn = self.rnn(x, h0)
        return self.head(y), hn


class LstmPackedState(nn.Module):
    """silero-vad style: h and c packed in one `state` [2, B, 16] -> `stateN`."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(IN, HID)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x, state):
        h0 = state[0].unsqueeze(0)
        c0 = state[1].unsqueeze(0)
        y, (hn, cn) = self.rnn(x, (h0, c0))
        return self.head(y), torch.cat([hn, cn], dim=0)


class BiLstmStream(nn.Module):
    """Bidirectional LSTM; h0/c0 [2 directions, B, 16]."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(IN, HID, bidirectional=True)
        self.head = nn.Linear(2 * HID, HEAD)

    def forward(self, x, h0, c0):
        y, (hn, cn) = self.rnn(x, (h0, c0))
        return self.head(y), hn, cn


class GruEncoderStateless(nn.Module):
    """GRU called without an initial state: no state input, no state output."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(IN, HID)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


# name -> (factory, batch, batch_first, input names, output names,
#          {state input: state output}, state shape, description)
SPECS = {
    "gru_stream": (GruStream, 2, False, ["x", "h0"], ["y", "hn"],
                   {"h0": "hn"}, (1, HID),
                   "nn.GRU(8, 16) + Linear(16, 4)"),
    "lstm_stream": (LstmStream, 1, False, ["x", "h0", "c0"], ["y", "hn", "cn"],
                    {"h0": "hn", "c0": "cn"}, (1, HID),
                    "nn.LSTM(8, 16) + Linear(16, 4)"),
    "gru2_stream": (Gru2Stream, 2, False, ["x", "h0"], ["y", "hn"],
                    {"h0": "hn"}, (2, HID),
                    "nn.GRU(8, 16, num_layers=2) + Linear(16, 4); h0[l] is layer l"),
    "lstm_packed_state": (LstmPackedState, 1, False, ["x", "state"], ["y", "stateN"],
                          {"state": "stateN"}, (2, HID),
                          "nn.LSTM(8, 16) + Linear(16, 4); state[0]=h, state[1]=c, "
                          "stateN = cat(hn, cn) (silero-vad layout)"),
    "bilstm_stream": (BiLstmStream, 2, False, ["x", "h0", "c0"], ["y", "hn", "cn"],
                      {"h0": "hn", "c0": "cn"}, (2, HID),
                      "nn.LSTM(8, 16, bidirectional=True) + Linear(32, 4); "
                      "h0[0]/c0[0] forward, h0[1]/c0[1] reverse direction"),
    "lstm_batch_first": (lambda: LstmStream(batch_first=True), 2, True,
                         ["x", "h0", "c0"], ["y", "hn", "cn"],
                         {"h0": "hn", "c0": "cn"}, (1, HID),
                         "nn.LSTM(8, 16, batch_first=True) + Linear(16, 4); "
                         "x/y are [B, T, .], h0/c0 stay [1, B, 16]"),
    "gru_encoder_stateless": (GruEncoderStateless, 1, False, ["x"], ["y"],
                              {}, None,
                              "nn.GRU(8, 16) called without h0 + Linear(16, 4); "
                              "no state pairs"),
}


# --------------------------------------------------------------------- oracle


def build(name):
    factory = SPECS[name][0]
    torch.manual_seed(1234 + sorted(SPECS).index(name))
    model = factory().eval()
    return model


def make_inputs(name):
    _, batch, batch_first, in_names, _, pairs, sshape, _ = SPECS[name]
    g = torch.Generator().manual_seed(99 + sorted(SPECS).index(name))
    xshape = (batch, T, IN) if batch_first else (T, batch, IN)
    x = torch.randn(*xshape, generator=g)
    # non-zero initial states: a persistence or h/c-swap bug changes results
    states = {n: 0.5 * torch.randn(sshape[0], batch, sshape[1], generator=g)
              for n in in_names[1:]}
    return x, states


def run(model, in_names, out_names, feed):
    with torch.no_grad():
        res = model(*[feed[n] for n in in_names])
    if not isinstance(res, tuple):
        res = (res,)
    return dict(zip(out_names, res))


def oracle(name, model):
    _, _, batch_first, in_names, out_names, pairs, _, _ = SPECS[name]
    tax = 1 if batch_first else 0
    x, states = make_inputs(name)
    arrays = {}
    feed = dict(states, x=x)
    for k, v in run(model, in_names, out_names, feed).items():
        arrays[f"full_out_{k}"] = v
    for k, v in feed.items():
        arrays[f"full_in_{k}"] = v
    cur = dict(states)
    for call in range(NCALLS):
        xs = x.narrow(tax, call * CHUNK, CHUNK)
        feed = dict(cur, x=xs)
        outs = run(model, in_names, out_names, feed)
        for k, v in feed.items():
            arrays[f"call{call}_in_{k}"] = v
        for k, v in outs.items():
            arrays[f"call{call}_out_{k}"] = v
        cur = {i: outs[o] for i, o in pairs.items()}
    arrays = {k: v.detach().numpy().astype(np.float32) for k, v in arrays.items()}
    arrays["pairs"] = np.array(list(pairs.items()), dtype=str).reshape(-1, 2)
    arrays["time_axis"] = np.array(tax, dtype=np.int64)
    return arrays, (x, states)


# --------------------------------------------------------------------- export


def example_args(name):
    _, _, batch_first, in_names, _, _, _, _ = SPECS[name]
    tax = 1 if batch_first else 0
    x, states = make_inputs(name)
    return tuple([x.narrow(tax, 0, CHUNK)] + [states[n] for n in in_names[1:]])


def export_ts(name, model, path):
    _, _, batch_first, in_names, out_names, _, _, _ = SPECS[name]
    tax = 1 if batch_first else 0
    bax = 0 if batch_first else 1
    dyn = {"x": {tax: "T", bax: "B"}, "y": {tax: "T", bax: "B"}}
    for n in in_names[1:] + out_names[1:]:
        dyn[n] = {1: "B"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, example_args(name), str(path), dynamo=False,
                          opset_version=TS_OPSET, input_names=in_names,
                          output_names=out_names, dynamic_axes=dyn)


def export_dynamo(name, model, path):
    """Dynamo export with static shapes (T=4, the chunk length; fixed batch).

    torch 2.13's ``torch.export`` specialises the time axis of nn.GRU/nn.LSTM
    ("You marked T as dynamic but your code specialized it to be a constant
    (4)"); ``torch.onnx.export(dynamo=True, dynamic_shapes=...)`` then still
    writes ``x: [T, B, 8]`` but bakes T=4 into a Reshape after the RNN, so the
    file only runs at T=4.  A static export is at least honest about that.
    """
    _, _, _, in_names, out_names, _, _, _ = SPECS[name]
    for suffix in ("", ".data"):
        p = pathlib.Path(str(path) + suffix)
        if p.exists():
            p.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, example_args(name), str(path), dynamo=True,
                          external_data=True, opset_version=DYNAMO_OPSET,
                          input_names=in_names, output_names=out_names)


RECURRENT = {"RNN": ("X", "W", "R", "B", "sequence_lens", "initial_h"),
             "GRU": ("X", "W", "R", "B", "sequence_lens", "initial_h"),
             "LSTM": ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")}
OUTS = {"RNN": ("Y", "Y_h"), "GRU": ("Y", "Y_h"), "LSTM": ("Y", "Y_h", "Y_c")}


def graph_io(path):
    """Inputs, outputs, op counts, external-data files and recurrent dataflow."""
    m = onnx.load(str(path), load_external_data=False)
    g = m.graph
    inits = {i.name for i in g.initializer}

    def dims(vi):
        return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]

    ins = [(i.name, dims(i)) for i in g.input if i.name not in inits]
    outs = [(o.name, dims(o)) for o in g.output]
    ops = {}
    for n in g.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    ext = sorted({e.value for i in g.initializer for e in i.external_data
                  if e.key == "location"})
    producer = {o: n for n in g.node for o in n.output}
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    graph_ins = {i for i, _ in ins}
    graph_outs = {o for o, _ in outs}
    consts = {i.name: onnx.numpy_helper.to_array(i) for i in g.initializer
              if not i.external_data}
    for n in g.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = onnx.numpy_helper.to_array(n.attribute[0].t)

    def label(n, pos=None):
        """op type plus the index constants that decide which slice is taken."""
        args = [consts[i].tolist() for i in n.input[1:] if i in consts and consts[i].size <= 4]
        args += [f"{a.name}={onnx.helper.get_attribute_value(a)}" for a in n.attribute
                 if a.name == "axis"]
        if pos is not None:
            args.append(f"input {pos}")
        show = n.op_type in ("Slice", "Gather", "Concat", "Split", "Squeeze", "Unsqueeze")
        return f"{n.op_type}({', '.join(map(str, args))})" if show and args else n.op_type

    def back(name):  # follow the first non-constant input up to a graph input
        chain = []
        while name not in graph_ins:
            n = producer.get(name)
            if n is None:
                return ["<const>"] + chain
            chain.insert(0, label(n))
            data = [i for i in n.input if i and i not in inits and
                    (i in graph_ins or i in producer and producer[i].op_type != "Constant")]
            if not data:
                return ["<const>"] + chain
            name = data[0]
        return [name] + chain

    def fwd(name):  # every graph output reached through single-path ops
        found, todo, seen = [], [(name, [])], set()
        while todo:
            cur, chain = todo.pop()
            if cur in seen:
                continue
            seen.add(cur)
            if cur in graph_outs:
                found.append(chain + [cur])
            for n in consumers.get(cur, []):
                if n.op_type in RECURRENT or n.op_type in ("MatMul", "Gemm"):
                    continue
                pos = list(n.input).index(cur) if n.op_type == "Concat" else None
                for o in n.output:
                    todo.append((o, chain + [label(n, pos)]))
        return found

    rec = []
    for n in g.node:
        if n.op_type not in RECURRENT:
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        direction = attrs.get("direction", b"forward")
        entry = {"op": n.op_type,
                 "direction": direction.decode() if isinstance(direction, bytes) else direction,
                 "layout": attrs.get("layout", 0),
                 "linear_before_reset": attrs.get("linear_before_reset"),
                 "state_in": {}, "state_out": {}}
        for k, role in enumerate(RECURRENT[n.op_type]):
            if role.startswith("initial_") and k < len(n.input) and n.input[k]:
                entry["state_in"][role] = " -> ".join(back(n.input[k]))
        for k, role in enumerate(OUTS[n.op_type]):
            if role != "Y" and k < len(n.output) and n.output[k]:
                paths = fwd(n.output[k])
                entry["state_out"][role] = [" -> ".join(p) for p in paths] or ["(internal)"]
        rec.append(entry)
    return ins, outs, ops, ext, rec


def check_onnx(path, arrays):
    """Cross-check an export with onnxruntime against the PyTorch oracle."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    in_names = [i.name for i in sess.get_inputs()]
    out_names = [o.name for o in sess.get_outputs()]
    worst = 0.0
    for call in range(NCALLS):
        feed = {n: arrays[f"call{call}_in_{n}"] for n in in_names}
        got = sess.run(None, feed)
        for n, g in zip(out_names, got):
            worst = max(worst, float(np.abs(g - arrays[f"call{call}_out_{n}"]).max()))
    return worst


def describe(path, arrays):
    ins, outs, ops, ext, rec = graph_io(path)
    return {"file": path.name, "inputs": ins, "outputs": outs, "ops": ops,
            "external_data": ext, "recurrent": rec,
            "max_abs_err_vs_torch": check_onnx(path, arrays)}


def versions():
    import onnxruntime
    import onnxscript
    return {"torch": torch.__version__, "onnx": onnx.__version__,
            "onnxscript": onnxscript.__version__, "onnxruntime": onnxruntime.__version__,
            "numpy": np.__version__, "python": sys.version.split()[0]}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    report = {"versions": versions(), "models": {}}
    for name in SPECS:
        model = build(name)
        arrays, _ = oracle(name, model)
        np.savez(OUT / f"{name}.calls.npz", **arrays)
        _, batch, batch_first, in_names, out_names, pairs, _, desc = SPECS[name]
        entry = {"desc": desc, "batch": batch, "batch_first": batch_first,
                 "pairs": pairs, "exports": {}}
        ts = OUT / f"{name}.ts.onnx"
        export_ts(name, model, ts)
        onnx.checker.check_model(str(ts), full_check=True)
        entry["exports"]["ts"] = describe(ts, arrays)
        dy = OUT / f"{name}.dynamo.onnx"
        try:
            export_dynamo(name, model, dy)
            onnx.checker.check_model(str(dy), full_check=True)
            entry["exports"]["dynamo"] = describe(dy, arrays)
        except Exception as exc:  # record, skip only this export
            for suffix in ("", ".data"):
                p = pathlib.Path(str(dy) + suffix)
                if p.exists():
                    p.unlink()
            entry["dynamo_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        report["models"][name] = entry
        print(name, "ok" if "dynamo_error" not in entry else entry["dynamo_error"],
              flush=True)
    (OUT / "manifest.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    write_readme(report)


def _size(name):
    p = OUT / name
    return p.stat().st_size if p.exists() else 0


def _io(items):
    return ", ".join(f"`{n}` {list(d)}" for n, d in items)


def write_readme(report):
    v = report["versions"]
    L = ["# PyTorch-exported streaming models", "",
         "Generated by `tests/data/make_torch_models.py` (do not edit by hand; rerun it).",
         "Tests use these files and never need torch.", "",
         "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".", "",
         "- `<name>.ts.onnx`: TorchScript exporter (`torch.onnx.export(..., dynamo=False)`), "
         f"opset {TS_OPSET}, dynamic axes `T` (time) and `B` (batch), weights inline.",
         "- `<name>.dynamo.onnx` + `<name>.dynamo.onnx.data`: dynamo exporter "
         "(`torch.onnx.export(..., dynamo=True, external_data=True)`), "
         f"opset {DYNAMO_OPSET}, weights as EXTERNAL DATA in the `.data` sidecar "
         "(load with `onnx.load(path)` from this folder, or give onnxruntime the path). "
         f"Static shapes: T={CHUNK} (one call's chunk) and the batch below -- see "
         "'Exporter problems'.",
         f"- `<name>.calls.npz`: PyTorch oracle. Fixed input (T={T}), non-zero random initial "
         f"state(s), outputs of {NCALLS} consecutive calls of {CHUNK} steps with the state fed "
         "back (`call{k}_in_NAME`, `call{k}_out_NAME`), and one call over all "
         f"{T} steps (`full_in_NAME`, `full_out_NAME`); `pairs` = [[state input, state "
         "output], ...]; `time_axis`. Names are the graph input/output names, the same in "
         "both exports.",
         "- `manifest.json`: the same facts as this file, machine-readable.", "",
         "In the dataflow lines below, `Slice(starts, ends, axes)`, `Gather(indices, axis)` "
         "and `Concat(axis, input k)` show the constants that select which layer, direction "
         "or h/c slice of a state tensor an op reads or writes.", "",
         "All files:", "", "| file | bytes |", "| --- | ---: |"]
    files = sorted(p.name for p in OUT.iterdir() if p.name != "README.md")
    for f in files:
        L.append(f"| `{f}` | {_size(f)} |")
    L += ["", f"Total (without README): {sum(_size(f) for f in files)} bytes.", ""]
    for name, e in report["models"].items():
        L += [f"## {name}", "", e["desc"] + f"; batch B={e['batch']}"
              + (", batch_first" if e["batch_first"] else "") + ".", ""]
        if e["pairs"]:
            L.append("State pairs (input -> output): "
                     + ", ".join(f"`{i}` -> `{o}`" for i, o in e["pairs"].items()) + ".")
        else:
            L.append("State pairs: none (stateless; the GRU starts from zeros every call).")
        L.append("")
        for x in e["exports"].values():
            L += [f"- `{x['file']}`"
                  + (f" + `{', '.join(x['external_data'])}`" if x["external_data"] else ""),
                  f"  - inputs: {_io(x['inputs'])}",
                  f"  - outputs: {_io(x['outputs'])}",
                  "  - ops: " + ", ".join(f"{k}x{c}" for k, c in x["ops"].items())]
            for r in x["recurrent"]:
                extra = (f", linear_before_reset={r['linear_before_reset']}"
                         if r["linear_before_reset"] is not None else "")
                L.append(f"  - {r['op']} (direction={r['direction']}, layout={r['layout']}{extra})")
                for role, chain in r["state_in"].items():
                    L.append(f"    - {role} <- {chain}")
                for role, chains in r["state_out"].items():
                    L.append(f"    - {role} -> " + "; ".join(chains))
            L.append(f"  - max |onnxruntime - torch| over the 3 calls: "
                     f"{x['max_abs_err_vs_torch']:.3g}")
        if "dynamo_error" in e:
            L.append(f"- dynamo export FAILED, skipped: {e['dynamo_error']}")
        L.append("")
    L += ["## Exporter problems", "",
          "- dynamo + dynamic time axis: `torch.export` (torch 2.13) specialises the time axis "
          "of nn.GRU/nn.LSTM to the example's length (`Constraints violated (T)! ... your "
          "code specialized it to be a constant (4)`). Through "
          "`torch.onnx.export(dynamo=True, dynamic_shapes=...)` this did not fail: the file "
          "declared `x: [T, B, 8]` but a Reshape after the RNN kept the constant shape "
          "[4, B, 16] (ORT at T=12: `The input tensor cannot be reshaped to the requested "
          "shape. Input shape:{12,2,1,16}, requested shape:{4,2,16}`), and for the "
          "bidirectional LSTM T was silently made static. So the dynamo files are exported "
          "with static shapes; the 3-call oracle (chunks of 4) runs on them, `full_*` "
          "(T=12) only on the `.ts.onnx` files.",
          "- Without `input_names`/`output_names` the dynamo exporter names inputs after the "
          "`forward` arguments (`x`, `h0`, `state`) but outputs after FX nodes "
          "(`linear`, `getitem_1`, `cat`): nothing marks `getitem_1` as the partner of "
          "`h0`. The files here pass explicit names, so both exports share the names above.",
          ""]
    (OUT / "README.md").write_text("\n".join(L))


if __name__ == "__main__":
    main()
