"""Regenerate ``tests/data/ort/``: what users really ship after onnxruntime's own tools.

Runs with the project's own dependencies (onnx, onnxruntime, numpy; no torch)::

    python tests/data/make_ort_models.py

Two kinds of files, each made from a committed PyTorch export in
``tests/data/torch`` or ``tests/data/torch_cells``:

* ``<src>.qdyn.onnx`` -- ``onnxruntime.quantization.quantize_dynamic`` (int8
  weights). An ONNX LSTM becomes ``com.microsoft`` ``DynamicQuantizeLSTM`` (same
  state ports as LSTM: initial_h = input 5, initial_c = input 6, Y_h / Y_c =
  outputs 1 / 2); Gemm/MatMul become DynamicQuantizeLinear + MatMulInteger;
  ONNX GRU and RNN are NOT quantized (left as they are).
* ``<src>.ortopt.onnx`` -- the graph onnxruntime itself runs: a session with
  ``graph_optimization_level=ORT_ENABLE_ALL`` on the CPU provider and
  ``optimized_model_filepath`` set. It rewrites state paths (Gather -> Split +
  Squeeze, MatMul+Add -> Gemm, Gemm+Tanh -> com.microsoft FusedGemm, weight
  Slice/Concat folded in a Loop body) and imports every contrib domain.

``<src>.<kind>.calls.npz`` is the onnxruntime oracle of each file: the inputs of
the source's PyTorch oracle, the outputs of 3 chunked calls with the state fed
back (``call{k}_in_NAME``/``call{k}_out_NAME``) and, for models with a time axis,
one call over the whole sequence (``full_in_NAME``/``full_out_NAME``), plus
``pairs`` and ``time_axis`` as in the torch oracles. Dynamic quantization
quantizes each call's activations with that call's own range, so for ``.qdyn``
chunked and whole differ by quantization noise (the README gives the size);
``.ortopt`` files must match PyTorch within 1e-5 (checked here).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from describe_graph import describe, readme_lines  # noqa: E402

OUT = HERE / "ort"
NCALLS = 3
OPT_ATOL = 1e-5
#: dynamic int8 quantization (hidden size 16): a sanity bound on the drift from PyTorch's float outputs
QUANT_ATOL = 0.5


@dataclasses.dataclass(frozen=True)
class Source:
    folder: str  # "torch" or "torch_cells"
    name: str
    kind: str  # "ts" or "dynamo"
    pairs: dict[str, str]

    @property
    def path(self) -> pathlib.Path:
        return HERE / self.folder / f"{self.name}.{self.kind}.onnx"

    @property
    def oracle(self) -> pathlib.Path:
        return HERE / self.folder / f"{self.name}.calls.npz"

    def out(self, what: str) -> str:
        return f"{self.name}.{self.kind}.{what}"


LSTM = {"h0": "hn", "c0": "cn"}
QUANTIZED = (
    Source("torch", "lstm_stream", "ts", LSTM),
    Source("torch", "lstm_stream", "dynamo", LSTM),
    Source("torch", "lstm_packed_state", "ts", {"state": "stateN"}),
    Source("torch", "gru2_stream", "ts", {"h0": "hn"}),
    Source("torch_cells", "lstm_cell", "ts", LSTM),
)
OPTIMIZED = (
    Source("torch", "lstm_stream", "ts", LSTM),
    Source("torch_cells", "lstm_cell", "ts", LSTM),
    Source("torch_cells", "lstm_cell_packed", "ts", {"state": "stateN"}),
    Source("torch_cells", "gru_cell_stacked", "ts", {"h0": "hn"}),
    Source("torch_cells", "lstm_cell_keras", "ts", LSTM),
    Source("torch_cells", "gru_cell_reset_before", "ts", {"h0": "hn"}),
    Source("torch_cells", "lstm_cell_loop", "ts", LSTM),
)


def _session(path: pathlib.Path, level: ort.GraphOptimizationLevel | None = None,
             save_to: pathlib.Path | None = None) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if level is not None:
        opts.graph_optimization_level = level
    if save_to is not None:
        opts.optimized_model_filepath = str(save_to)
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def make_quantized(src: Source, dest: pathlib.Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # quantize_dynamic reads external data relative to the source: give it a private copy
        for p in src.path.parent.glob(src.path.name + "*"):
            shutil.copy(p, tmp)
        quantize_dynamic(str(pathlib.Path(tmp) / src.path.name), str(dest), weight_type=QuantType.QInt8)


def make_optimized(src: Source, dest: pathlib.Path) -> None:
    _session(src.path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, dest)


def run_oracle(src: Source, path: pathlib.Path, atol: float) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """onnxruntime's outputs of 3 chained calls and the whole call, compared to PyTorch's."""
    with np.load(src.oracle) as z:
        torch_calls = {k: z[k] for k in z.files}
    sess = _session(path)
    in_names = [i.name for i in sess.get_inputs()]
    out_names = [o.name for o in sess.get_outputs()]
    arrays: dict[str, np.ndarray] = {}
    state = {i: torch_calls[f"call0_in_{i}"] for i in src.pairs}
    err_torch = 0.0
    for k in range(NCALLS):
        feed = dict(state, x=torch_calls[f"call{k}_in_x"])
        got = dict(zip(out_names, sess.run(None, {n: feed[n] for n in in_names})))
        arrays.update({f"call{k}_in_{n}": v for n, v in feed.items()})
        arrays.update({f"call{k}_out_{n}": v for n, v in got.items()})
        err_torch = max(err_torch, *(float(np.abs(got[n] - torch_calls[f"call{k}_out_{n}"]).max()) for n in out_names))
        state = {i: got[o] for i, o in src.pairs.items()}
    stats = {"max_abs_err_vs_torch_3_calls": err_torch}
    t_dim = sess.get_inputs()[0].shape[0]
    whole_fits = not isinstance(t_dim, int) or t_dim == torch_calls.get("full_in_x", np.empty(0)).shape[0]
    if "full_in_x" in torch_calls and whole_fits:
        feed = {n: torch_calls[f"full_in_{n}"] for n in in_names}
        got = dict(zip(out_names, sess.run(None, feed)))
        arrays.update({f"full_in_{n}": v for n, v in feed.items()})
        arrays.update({f"full_out_{n}": v for n, v in got.items()})
        err_full = max(float(np.abs(got[n] - torch_calls[f"full_out_{n}"]).max()) for n in out_names)
        stats["max_abs_err_vs_torch_whole"] = err_full
        # the chunked calls' final state against the whole call's: the streaming contract
        last = NCALLS - 1
        stats["max_abs_chunked_vs_whole_state"] = max(
            float(np.abs(arrays[f"call{last}_out_{o}"] - got[o]).max()) for o in src.pairs.values())
        err_torch = max(err_torch, err_full)
    assert err_torch <= atol, f"{path.name}: |onnxruntime - torch| = {err_torch} > {atol}"
    arrays["pairs"] = torch_calls["pairs"]
    arrays["time_axis"] = torch_calls["time_axis"]
    return arrays, stats


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    report: dict = {"versions": {"onnx": onnx.__version__, "onnxruntime": ort.__version__,
                                 "numpy": np.__version__, "python": sys.version.split()[0]},
                    "files": {}}
    jobs = [(s, "qdyn", make_quantized, QUANT_ATOL) for s in QUANTIZED]
    jobs += [(s, "ortopt", make_optimized, OPT_ATOL) for s in OPTIMIZED]
    for src, what, make, atol in jobs:
        dest = OUT / src.out(what + ".onnx")
        # make it beside the destination and move it into place only once it is verified
        staged = OUT / f".{dest.name}.staged.onnx"
        make(src, staged)
        onnx.checker.check_model(str(staged), full_check=True)
        arrays, stats = run_oracle(src, staged, atol)
        staged.replace(dest)
        np.savez(OUT / src.out(what + ".calls.npz"), **arrays)  # type: ignore[arg-type]  # numpy stubs type **kwds as allow_pickle
        info = describe(dest, src.pairs)
        info.update(stats, source=f"{src.folder}/{src.path.name}", transform=what, pairs=src.pairs)
        report["files"][dest.name] = info
        print(dest.name, "ok", flush=True)
    (OUT / "manifest.json").write_text(json.dumps(report, indent=1) + "\n")
    write_readme(report)


def write_readme(report: dict) -> None:
    v = report["versions"]
    lines = ["# onnxruntime-transformed models (quantize_dynamic, optimized graphs)", "",
             "Generated by `tests/data/make_ort_models.py` (do not edit by hand; rerun it; needs only the "
             "project's dependencies).", "",
             "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".", "",
             "- `<src>.qdyn.onnx`: `onnxruntime.quantization.quantize_dynamic(src, dest, "
             "weight_type=QuantType.QInt8)`. ONNX `LSTM` -> `com.microsoft` `DynamicQuantizeLSTM` (inputs "
             "X, W, R, B, sequence_lens, initial_h, initial_c, P, W_scale, W_zero_point, R_scale, "
             "R_zero_point; outputs Y, Y_h, Y_c: the state ports are LSTM's). ONNX `GRU` is left as it is "
             "(only the head's MatMul is quantized). Gemm/MatMul -> DynamicQuantizeLinear + MatMulInteger "
             "+ Cast + Mul (+ Add).",
             "- `<src>.ortopt.onnx`: what a CPU session with `graph_optimization_level=ORT_ENABLE_ALL` and "
             "`optimized_model_filepath` writes (the graph onnxruntime really runs). Opset imports gain "
             "every contrib domain (`com.microsoft`, `com.microsoft.nchwc`, `ai.onnx.ml`, ...).",
             "- `<src>.calls.npz`: the onnxruntime oracle: the source's PyTorch-oracle inputs, "
             f"onnxruntime's outputs of {NCALLS} chained calls with the state fed back and (time-axis "
             "models) of one whole-sequence call; `pairs`, `time_axis` as in `tests/data/torch/README.md`.",
             "- `manifest.json`: the same facts, machine-readable.", "",
             f"Checked here: `onnx.checker` full_check; `.ortopt` files match PyTorch within {OPT_ATOL:g}; "
             f"`.qdyn` files within {QUANT_ATOL:g} (int8 weights, per-call activation range).", "",
             "| file | bytes |", "| --- | ---: |"]
    files = sorted(p.name for p in OUT.iterdir() if p.name != "README.md" and not p.name.startswith("."))
    for f in files:
        lines.append(f"| `{f}` | {(OUT / f).stat().st_size} |")
    lines += ["", f"Total (without README): {sum((OUT / f).stat().st_size for f in files)} bytes.", ""]
    for name, info in report["files"].items():
        lines += [f"## {name}", "", f"From `{info['source']}` by {info['transform']}. State pairs: "
                  + ", ".join(f"`{i}` -> `{o}`" for i, o in info["pairs"].items()) + ".", ""]
        lines += readme_lines(info)
        facts = [f"{k} {info[k]:.3g}" for k in ("max_abs_err_vs_torch_3_calls", "max_abs_err_vs_torch_whole",
                                               "max_abs_chunked_vs_whole_state") if k in info]
        lines += ["  - " + "; ".join(facts), ""]
    (OUT / "README.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
