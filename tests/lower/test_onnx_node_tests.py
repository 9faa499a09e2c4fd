"""The ONNX project's own node tests (issue 22): pairs from dataflow, no false alarm, no false PASS.

The models are written out at test time by onnx's own generator (``onnx.backend.test.case.node.collect_testcases``;
the installed wheel ships no model files).  In these graphs the inputs and outputs are named after the op's ports
(``initial_h``, ``Y_h``, ``x``, ``z``), so names say nothing about state; what the graph computes does.  The oracles
are onnxruntime, the node tests' own expected outputs (written by onnx's numpy reference), and numbers checked by
hand (a running sum is the sum of everything fed so far).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import rnnir
from rnnir.check.multicall.check import check_multicall
from rnnir.cli import main
from rnnir.ir.pairs import PairSource
from rnnir.ir.recurrence import KINDS
from rnnir.onnxio.metadata import META_PAIRS
from rnnir.passes import run as lint
from rnnir.passes.diagnostics import Severity

ORT = {"providers": ["CPUExecutionProvider"]}

#: the ops whose node tests the sweep lints: every registered recurrence, and the control flow that carries state
SWEPT_OPS = frozenset({k.op_type for k in KINDS.values() if k.onnx} | {"Loop", "Scan"})

#: node tests whose lint has an error, each with the finding it must be and why it is a true one
TRUE_ERRORS = {
    # initial_c starts the cell state every call, and the graph never returns Y_c: with h carried (initial_h -> Y_h)
    # the cell state restarts on every call -- test_lstm_with_peepholes_restarts_its_cell_state_every_call shows it
    # with onnxruntime (chunked calls differ from one call over the whole sequence)
    "test_lstm_with_peepholes": {("SD001", "initial_c")},
}


@pytest.fixture(scope="module")
def node_tests():
    """Every node test case onnx generates, by name (generated once: onnx's generator keeps a module-level list)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generator's own numpy overflow warnings (Cast cases)
        return {case.name: case for case in collect_testcases(None)}


def _swept(cases):
    return sorted(n for n, c in cases.items() if any(node.op_type in SWEPT_OPS for node in c.model.graph.node))


def _pairs(prog):
    return [(p.input, p.output, p.source) for p in prog.state_pairs]


def _errors(prog):
    return {(d.code, d.slot) for d in lint(prog) if d.severity is Severity.ERROR}


def _save(tmp_path, m, name="model.onnx"):
    path = tmp_path / name
    onnx.save(m, path)
    return str(path)


def _first_line(text):
    return text.splitlines()[0]


# -- the sweep: no false alarm ---------------------------------------------------------------------------------------


def test_every_recurrence_and_loop_node_test_lints_without_a_false_error(node_tests):
    swept = _swept(node_tests)
    # the generator's RNN/GRU/LSTM/Scan/Loop cases are all here (a filter that matched nothing would pass vacuously)
    assert {"test_lstm_with_peepholes", "test_scan9_sum", "test_scan_sum", "test_gru_defaults", "test_simple_rnn_defaults", "test_loop11"} <= set(swept)
    assert len(swept) >= 25
    errors = {name: _errors(rnnir.load(node_tests[name].model)) for name in swept}
    assert {n: e for n, e in errors.items() if e} == TRUE_ERRORS


def test_every_swept_node_test_exports_only_pairs_rnnir_verified_or_was_told(node_tests):
    from rnnir.passes import verify

    for name in _swept(node_tests):
        prog = rnnir.load(node_tests[name].model)
        recorded = json.loads({p.key: p.value for p in rnnir.export(prog).metadata_props}[META_PAIRS])
        verified = {s.input for s in verify(prog).slices if s.verdict.value == "verified"}
        unverified = {s.input for s in verify(prog).slices if s.verdict.value != "verified"}
        assert set(recorded) <= verified - unverified, name
        # what is recorded is what the next load pairs; the rest it finds again the same way
        again = rnnir.load(rnnir.export(prog))
        assert [(p.input, p.output) for p in again.state_pairs] == [(p.input, p.output) for p in prog.state_pairs], name


# -- test_identity_opt: names alone are no state -------------------------------------------------------------------


def test_identity_opt_is_no_pair_and_no_error(node_tests, tmp_path, capsys):
    m = node_tests["test_identity_opt"].model
    assert [n.op_type for n in m.graph.node] == ["Identity"] and [i.name for i in m.graph.input] == ["opt_in"]
    assert rnnir.load(m).state_pairs == ()
    assert main(["lint", _save(tmp_path, m)]) == 0
    assert "SD001" not in capsys.readouterr().out


def test_in_out_names_pair_when_state_flows_or_the_name_says_state():
    from onnx import TensorProto, helper

    def bare(op, a, b):
        g = helper.make_graph([helper.make_node(op, [a], [b])], "g", [helper.make_tensor_value_info(a, TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info(b, TensorProto.FLOAT, [1, 4])])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    assert rnnir.load(bare("Identity", "opt_in", "opt_out")).state_pairs == ()
    # near-misses: computed from the input (state flows), or named like state (a handed-back state is a bug to report)
    assert _pairs(rnnir.load(bare("Neg", "opt_in", "opt_out"))) == [("opt_in", "opt_out", PairSource.NAME)]
    handed_back = rnnir.load(bare("Identity", "h_in", "h_out"))
    assert _pairs(handed_back) == [("h_in", "h_out", PairSource.NAME)]
    assert ("SD001", "h_in") in _errors(handed_back)


# -- Scan: the state variable is the pair, never the scanned input ---------------------------------------------------


@pytest.mark.parametrize("name", ["test_scan9_sum", "test_scan_sum"])
def test_scan_pairs_its_running_sum_and_not_the_scanned_input(node_tests, name):
    m = node_tests[name].model
    prog = rnnir.load(m)
    pairs = _pairs(prog)
    assert pairs == [("initial", "y", PairSource.DATAFLOW)]
    assert prog.state_pairs[0].reason == "'initial' starts Scan state variable 0 of 'Scan(y)', whose final value 'y' returns"
    assert _errors(prog) == set()


def test_scan_export_does_not_record_a_guess_as_the_contract(node_tests):
    prog = rnnir.load(node_tests["test_scan9_sum"].model)
    recorded = json.loads({p.key: p.value for p in rnnir.export(prog).metadata_props}[META_PAIRS])
    assert "x" not in recorded and recorded == {}  # the running sum is not verified (Scan's body is not understood)
    # a declaration is the caller's contract: recorded as declared, however wrong
    declared = rnnir.load(node_tests["test_scan9_sum"].model, pairs={"initial": "y"})
    assert json.loads({p.key: p.value for p in rnnir.export(declared).metadata_props}[META_PAIRS]) == {"initial": "y"}


def _running_sum_oracle(feeds):
    """One call over every row fed so far, by hand: z is the running sum row by row, y the total."""
    xs = np.asarray(feeds["x"], np.float64)  # [calls, 3, 2]
    rows = xs.reshape(-1, xs.shape[-1])
    sums = np.cumsum(rows, axis=0)
    return {"z": sums.reshape(xs.shape).astype(np.float32), "y": sums[-1].astype(np.float32)}


def test_scan_running_sum_persists_across_calls_as_one_long_scan(node_tests):
    case = node_tests["test_scan9_sum"]
    (inputs, outputs), *_ = case.data_sets
    # onnx's own expected outputs for one call from its initial value: the hand sum agrees with them
    assert np.allclose(outputs[0], inputs[0] + inputs[1].sum(axis=0)) and np.allclose(outputs[1], inputs[0] + np.cumsum(inputs[1], axis=0))
    xs = np.random.default_rng(0).standard_normal((6, 3, 2)).astype(np.float32)
    report = check_multicall(case.model, {"x": xs}, whole=_running_sum_oracle)
    assert report.pairs == [("initial", "y")]
    assert report.persistent_matches_whole is True and report.status == "pass", report.verdict


def test_scan_with_the_scanned_input_declared_as_state_is_never_a_pass(node_tests, tmp_path, capsys):
    path = _save(tmp_path, node_tests["test_scan9_sum"].model)
    assert main(["run", path, "--pair", "x=z", "--calls", "6", "-q"]) == 0
    first = _first_line(capsys.readouterr().out)
    assert "PASS" not in first and first.startswith(f"{path}: NOT VERIFIED: the state matters"), first
    assert "'x' unverified (state 'x' reaches Scan 'Scan(y)' whose body is not understood)" in first


# -- LSTM with peepholes: initial_h -> Y_h from dataflow; a cell state that restarts is never a PASS -------------------


def test_lstm_with_peepholes_pairs_initial_h_by_dataflow_and_reports_only_the_unreturned_cell_state(node_tests, tmp_path, capsys):
    m = node_tests["test_lstm_with_peepholes"].model
    prog = rnnir.load(m)
    assert _pairs(prog) == [("initial_h", "Y_h", PairSource.DATAFLOW), ("initial_c", None, PairSource.NAME)]
    assert _errors(prog) == {("SD001", "initial_c")}
    assert main(["lint", _save(tmp_path, m)]) == 1
    out = capsys.readouterr().out
    assert "initial_h: SD001" not in out and "initial_c: SD001" in out


def _peephole_loop(model, feeds, steps, carry_c):
    """A hand loop with onnxruntime over ``steps`` one-step calls of a copy of ``model`` whose sequence axis is open and
    which also returns Y_c: h fed back every call; c fed back too or restarted from ``initial_c``.  Returns the last
    Y_h, and Y_h of one call over all the steps."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "T"
    node = m.graph.node[0]
    node.output.append("Y_c")
    m.graph.output.append(onnx.helper.make_tensor_value_info("Y_c", onnx.TensorProto.FLOAT, None))
    sess = ort.InferenceSession(m.SerializeToString(), **ORT)
    x = feeds["X"]
    xs = np.concatenate([x * (k + 1) / steps for k in range(steps)], axis=0)  # [steps, batch, input]
    batch = x.shape[1]
    whole = sess.run(["Y_h"], {**feeds, "X": xs, "sequence_lens": np.full(batch, steps, np.int32)})[0]
    h, c = feeds["initial_h"], feeds["initial_c"]
    for k in range(steps):
        yh, yc = sess.run(["Y_h", "Y_c"], {**feeds, "X": xs[k : k + 1], "sequence_lens": np.ones(batch, np.int32), "initial_h": h, "initial_c": c})
        h = yh
        c = yc if carry_c else feeds["initial_c"]
    return h, whole


def test_lstm_with_peepholes_restarts_its_cell_state_every_call(node_tests):
    case = node_tests["test_lstm_with_peepholes"]
    names = [i.name for i in case.model.graph.input]
    feeds = dict(zip(names, case.data_sets[0][0]))
    chunked, whole = _peephole_loop(case.model, feeds, 4, carry_c=False)
    assert np.abs(chunked - whole).max() > 1e-3  # the restarted cell state shows
    carried, whole = _peephole_loop(case.model, feeds, 4, carry_c=True)  # near-miss: c carried too
    np.testing.assert_allclose(carried, whole, atol=1e-5)


@pytest.mark.parametrize("flags", [[], ["--pair", "initial_h=Y_h"]])
def test_run_on_lstm_with_peepholes_fails_whatever_the_pairs(node_tests, tmp_path, capsys, flags):
    path = _save(tmp_path, node_tests["test_lstm_with_peepholes"].model)
    assert main(["run", path, "--calls", "6", "-q", *flags]) == 1
    first = _first_line(capsys.readouterr().out)
    assert first.startswith(f"{path}: FAIL: part of the state restarts on every call while the rest is carried: "), first
    if flags:
        assert "LSTM 'LSTM(Y_h)' carries initial_h across calls but its initial_c comes from the plain input 'initial_c', fed anew every call" in first
    else:
        assert "state input 'initial_c' has no paired output" in first


def test_run_passes_when_both_lstm_states_are_carried(tmp_path, capsys):
    # near-miss of the peephole run: the same LSTM returning Y_c as well, so both states are carried
    from onnx import TensorProto, helper

    rng = np.random.default_rng(1)
    inits = [onnx.numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.5, n) for n, s in (("W", (1, 12, 4)), ("R", (1, 12, 3)))]
    node = helper.make_node("LSTM", ["X", "W", "R", "", "", "initial_h", "initial_c"], ["", "Y_h", "Y_c"], hidden_size=3)
    vi = helper.make_tensor_value_info
    g = helper.make_graph([node], "g", [vi("X", TensorProto.FLOAT, ["T", 2, 4]), vi("initial_h", TensorProto.FLOAT, [1, 2, 3]), vi("initial_c", TensorProto.FLOAT, [1, 2, 3])],
                          [vi("Y_h", TensorProto.FLOAT, [1, 2, 3]), vi("Y_c", TensorProto.FLOAT, [1, 2, 3])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    assert main(["run", _save(tmp_path, m), "--calls", "6", "--chunk", "2", "-q"]) == 0
    assert ": PASS: persistence holds" in _first_line(capsys.readouterr().out)


# -- the stateless recurrences: no pairs, no error ---------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["test_lstm_", "test_gru_", "test_simple_rnn_", "test_rnn_"])
def test_recurrence_node_tests_without_initial_state_have_no_pairs(node_tests, prefix):
    names = [n for n in _swept(node_tests) if n.startswith(prefix) and n != "test_lstm_with_peepholes"]
    assert names
    for name in names:
        m = node_tests[name].model
        prog = rnnir.load(m)
        assert prog.state_pairs == (), name
        assert _errors(prog) == set(), name
        # the export computes what onnx's reference says the node computes
        inputs, outputs = node_tests[name].data_sets[0]
        sess = ort.InferenceSession(rnnir.export(prog).SerializeToString(), **ORT)
        got = sess.run(None, dict(zip([i.name for i in m.graph.input], inputs)))
        for g, want in zip(got, outputs):
            np.testing.assert_allclose(g, want, rtol=1e-3, atol=1e-5, err_msg=name)
