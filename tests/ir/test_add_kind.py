"""Adding a recurrence kind whose equations rnnir already knows is one entry in one file; a kind with equations of
its own is that entry plus its equations in the reference (two files).

A vendor op that computes an ONNX LSTM under another name (a contrib or custom-domain op with the same ports) is
``RecurrenceKind(..., semantics="LSTM", ...)`` in the registry, and nothing else: lowering, the passes and the
verdicts all ask the registry.  The entry is added in a copy of the package (``tmp_path``), never in the checkout;
before it, the same models are unverified (SD009, info), after it the correct one is verified and the planted
bug is SD002, as for the ONNX LSTM they were made from; and the simulator runs the vendor op by the LSTM equations.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from tests.support.scaffold import copy_checkout, files, run_in

ROOT = Path(__file__).resolve().parents[2]
ENTRY = '        RecurrenceKind("StreamLSTM", "StreamLSTM", "com.example", "LSTM", _LSTM_IN, ("Y", "Y_h", "Y_c"), (_H, _C), summary="a vendor LSTM"),\n'


def _registry_file(package: Path) -> Path:
    found = [p for p in package.rglob("*.py") if "KINDS: Mapping[str, RecurrenceKind]" in p.read_text(encoding="utf-8")]
    assert len(found) == 1, found  # the registry is one place
    return found[0]


def _add_entry(copy: Path, after: str, entry: str) -> None:
    """Insert ``entry`` into the registry of the package copied to ``copy``, after the ONNX kind ``after``."""
    registry = _registry_file(copy / "rnnir")
    text = registry.read_text(encoding="utf-8")
    anchor = next(line for line in text.splitlines(keepends=True) if line.lstrip().startswith(f'RecurrenceKind("{after}", "{after}", "", "{after}"'))
    registry.write_text(text.replace(anchor, anchor + entry, 1), encoding="utf-8")


def _custom(sample: str, dest: Path) -> Path:
    """The sample with its ONNX LSTM renamed to the vendor op (same ports, same equations)."""
    model = onnx.load(ROOT / "samples" / f"{sample}.onnx")
    renamed = 0
    for node in model.graph.node:
        if node.op_type == "LSTM":
            node.op_type, node.domain = "StreamLSTM", "com.example"
            renamed += 1
    assert renamed == 1
    model.opset_import.append(onnx.helper.make_opsetid("com.example", 1))
    path = dest / f"{sample}_vendor.onnx"
    onnx.save(model, path)
    return path


def _lint(package_root: Path, *models: Path) -> tuple[int, dict[str, list[str]]]:
    done = run_in(package_root, "-m", "rnnir", "lint", "--format", "json", *map(str, models))
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    codes = {Path(f["path"]).name: sorted(d["code"] for d in f["diagnostics"]) for f in report["files"]}
    return done.returncode, codes


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, bytes], dict[str, bytes], list[Path]]:
    base = tmp_path_factory.mktemp("add_kind")
    before_copy, after_copy = (copy_checkout(base / name, ["rnnir"]) for name in ("before", "after"))
    before = files(after_copy)
    _add_entry(after_copy, "LSTM", ENTRY)
    models = [_custom(name, base) for name in ("lstm_fanout", "sd002_hc_swap")]
    return before_copy, after_copy, before, files(after_copy), models


def test_the_new_kind_is_one_line_in_one_file(copies):
    _, _, before, after, _ = copies
    assert set(before) == set(after)
    changed = sorted(p for p in before if before[p] != after[p])
    assert len(changed) == 1 and changed[0].startswith("rnnir/")


def test_without_the_entry_the_vendor_op_is_unverified_never_an_error(copies):
    before_copy, _, _, _, models = copies
    status, codes = _lint(before_copy, *models)
    assert status == 0
    assert codes == {"lstm_fanout_vendor.onnx": ["SD009", "SD009"], "sd002_hc_swap_vendor.onnx": ["SD009"]}


def test_with_the_entry_the_correct_model_is_clean_and_the_swap_is_sd002(copies):
    _, after_copy, _, _, models = copies
    status, codes = _lint(after_copy, *models)
    assert status == 1
    assert codes["lstm_fanout_vendor.onnx"] == []
    assert "SD002" in codes["sd002_hc_swap_vendor.onnx"]
    # the same verdicts as the ONNX LSTM the models were made from
    _, onnx_codes = _lint(ROOT, ROOT / "samples" / "lstm_fanout.onnx", ROOT / "samples" / "sd002_hc_swap.onnx")
    assert onnx_codes == {"lstm_fanout.onnx": codes["lstm_fanout_vendor.onnx"], "sd002_hc_swap.onnx": codes["sd002_hc_swap_vendor.onnx"]}


_SIMULATE = """
import json, sys
import numpy as np
import rnnir
from rnnir.check.simulate import run_calls
rng = np.random.default_rng(5)
calls = [{"x": rng.standard_normal((4, 1, 3)).astype(np.float32)} for _ in range(2)]
outs = run_calls(rnnir.load(sys.argv[1]), calls)
json.dump({"calls": [{k: np.asarray(v).tolist() for k, v in c.items()} for c in calls],
           "outs": [{k: np.asarray(v).tolist() for k, v in o.items()} for o in outs]}, sys.stdout)
"""


def test_with_the_entry_the_simulator_runs_the_vendor_op_by_its_equations(copies):
    # onnxruntime runs the ONNX LSTM the vendor model was made from; the copy's simulator runs the vendor op (which
    # onnxruntime cannot) through the reference's LSTM equations, carrying h and c from call to call
    ort = pytest.importorskip("onnxruntime")
    import numpy as np

    before_copy, after_copy, _, _, models = copies
    done = run_in(after_copy, "-c", _SIMULATE, str(models[0]))
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    sess = ort.InferenceSession(str(ROOT / "samples" / "lstm_fanout.onnx"), providers=["CPUExecutionProvider"])
    state = {"h0": np.zeros((1, 1, 5), np.float32), "c0": np.zeros((1, 1, 5), np.float32)}
    for call, simulated in zip(got["calls"], got["outs"]):
        y, hn, cn = sess.run(["y", "hn", "cn"], {"x": np.asarray(call["x"], np.float32), **state})
        for name, want in (("y", y), ("hn", hn), ("cn", cn)):
            np.testing.assert_allclose(np.asarray(simulated[name]), want, atol=1e-5, err_msg=name)
        state = {"h0": hn, "c0": cn}
    # the near miss: without the entry the simulator refuses the op by name, before any call
    refused = run_in(before_copy, "-c", _SIMULATE, str(models[0]))
    assert refused.returncode != 0 and "StreamLSTM" in refused.stderr


NEW_ENTRY = '        RecurrenceKind("NegRNN", "NegRNN", "com.example", "NegRNN", _RNN_IN, ("Y", "Y_h"), (_H,), summary="an RNN of -x"),\n'
NEW_EQUATIONS = '''

def neg_rnn(X, *args, **kwargs):  # a vendor RNN that reads its input negated
    return rnn(-X, *args, **kwargs)


_OPS["NegRNN"], _INPUT_COUNTS["NegRNN"], _ATTRIBUTES["NegRNN"] = neg_rnn, _INPUT_COUNTS["RNN"], _ATTRIBUTES["RNN"]
'''


def _vendor_rnn(dest: Path) -> Path:
    model = onnx.load(ROOT / "samples" / "rnn_linear_fanout.onnx")
    (node,) = model.graph.node
    node.op_type, node.domain = "NegRNN", "com.example"
    model.opset_import.append(onnx.helper.make_opsetid("com.example", 1))
    path = dest / "neg_rnn.onnx"
    onnx.save(model, path)
    return path


def test_a_kind_with_equations_of_its_own_is_its_entry_and_its_equations(tmp_path: Path):
    # two files: the registry entry, and the equations in the reference (which the simulator runs)
    import numpy as np

    ort = pytest.importorskip("onnxruntime")
    entry_only, both = (copy_checkout(tmp_path / name, ["rnnir"]) for name in ("entry", "both"))
    for copy in (entry_only, both):
        _add_entry(copy, "RNN", NEW_ENTRY)
    before = files(entry_only)
    reference = both / "rnnir" / "semantics" / "reference.py"
    reference.write_text(reference.read_text(encoding="utf-8") + NEW_EQUATIONS, encoding="utf-8")
    assert sorted(p for p in before if before[p] != files(both)[p]) == ["rnnir/semantics/reference.py"]
    model = _vendor_rnn(tmp_path)
    status, codes = _lint(both, model)
    assert (status, codes) == (0, {"neg_rnn.onnx": []})
    script = _SIMULATE.replace("(4, 1, 3)", "(4, 1, 1)")
    done = run_in(both, "-c", script, str(model))
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    # the oracle: onnxruntime's RNN fed -x, the state carried from call to call
    sess = ort.InferenceSession(str(ROOT / "samples" / "rnn_linear_fanout.onnx"), providers=["CPUExecutionProvider"])
    h = np.zeros((1, 1, 1), np.float32)
    for call, simulated in zip(got["calls"], got["outs"]):
        y, h = sess.run(["y", "hn"], {"x": -np.asarray(call["x"], np.float32), "h0": h})
        np.testing.assert_allclose(np.asarray(simulated["y"]), y, rtol=1e-5, atol=1e-5)  # a linear RNN: values grow, float32 rounds relatively
        np.testing.assert_allclose(np.asarray(simulated["hn"]), h, rtol=1e-5, atol=1e-5)
    # the near miss: the entry without equations lints the same, and the simulator refuses the op by name
    refused = run_in(entry_only, "-c", script, str(model))
    assert refused.returncode != 0 and "NegRNN" in refused.stderr
