"""``rnnir run``'s numbers have upper bounds and must be meaningful (issue 26): ``--long 1e9`` or ``--streams 1e5`` ran
out of memory after minutes, ``--context input=1e9`` allocated past ``--max-slot-mb``, ``--recovery-tol inf`` passed
every check, ``--value sr=1e30`` wrapped round in an int64.  Each is refused before the model runs, naming the limit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from rnnir import StateError, cli
from rnnir.cli.run import MAX_CALLS, MAX_LONG_CALLS, MAX_STREAMS
from rnnir.runtime import StatefulSession

REPO = Path(__file__).resolve().parents[2]
LSTM = str(REPO / "samples" / "lstm_fanout.onnx")  # x[T, 1, 3] float32, (h0, c0) -> (hn, cn)


def run(capsys, *argv: str) -> tuple[int, str]:
    code = cli.main(["run", "--no-config", *argv])
    out, err = capsys.readouterr()
    return code, err


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["--long", str(MAX_LONG_CALLS + 1)], f"--long {MAX_LONG_CALLS + 1}: at most {MAX_LONG_CALLS} calls"),
        (["--streams", "100000"], f"--streams 100000: at most {MAX_STREAMS} streams"),
        (["--calls", str(MAX_CALLS + 1)], f"--calls {MAX_CALLS + 1}: at most {MAX_CALLS} calls"),
        (["--recovery-tol", "inf"], "--recovery-tol inf: give a finite number, 0 or more"),
        (["--recovery-tol", "nan"], "--recovery-tol nan: give a finite number, 0 or more"),
    ],
    ids=["long", "streams", "calls", "tol-inf", "tol-nan"],
)
def test_numbers_past_their_bound_are_refused_before_the_model_loads(capsys, argv, expected):
    code, err = run(capsys, "no-such-model.onnx", *argv)  # refused before the model is read: no model needed
    assert code == 2 and expected in err and "no such file" not in err


def test_numbers_within_their_bounds_run(capsys):  # the near misses
    code, err = run(capsys, LSTM, "--calls", "6", "--long", "8", "--recovery-tol", "0.5", "--chunk", "2")
    assert code == 0, err


def test_a_context_larger_than_max_slot_mb_is_refused_before_anything_is_allocated(capsys):
    code, err = run(capsys, LSTM, "--context", "x=1000000000", "--calls", "4")
    assert code == 2
    assert "the context kept for input 'x' would take 12,000,000,000 bytes, over the 268,435,456-byte limit per slot" in err
    code, err = run(capsys, LSTM, "--context", "x=1000", "--calls", "4", "--max-slot-mb", "0.01")
    assert code == 2 and "would take 12,000 bytes, over the 10,485-byte limit per slot" in err
    code, err = run(capsys, LSTM, "--context", "x=4", "--calls", "4")  # the near miss
    assert code == 0, err


def test_a_context_of_an_input_with_open_dims_is_bounded_at_the_first_call():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "T"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "T"])
    model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "open", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    s = StatefulSession(model, context={"x": (1000, 1)}, max_slot_bytes=100_000)  # 4,000 bytes a row: unknown rows
    with pytest.raises(StateError, match=r"the context kept for input 'x' would take 400,000 bytes, over the 100,000-byte limit"):
        s.run({"x": np.zeros((100, 3), np.float32)})
    assert s.run_dict({"x": np.ones((2, 3), np.float32)})["y"].shape == (2, 1003)  # the near miss: 8,000 bytes


def _int_input_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])
    sr = helper.make_tensor_value_info("sr", TensorProto.INT64, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    nodes = [helper.make_node("Cast", ["sr"], ["srf"], to=TensorProto.FLOAT), helper.make_node("Add", ["x", "srf"], ["y"])]
    return helper.make_model(helper.make_graph(nodes, "rate", [x, sr], [y]), opset_imports=[helper.make_opsetid("", 17)])


def test_a_value_outside_its_inputs_dtype_is_refused(tmp_path, capsys):
    path = tmp_path / "rate.onnx"
    onnx.save(_int_input_model(), path)
    code, err = run(capsys, str(path), "--value", "sr=1e30", "--calls", "3")
    assert code == 2
    assert "--value sr=1000000000000000019884624838656: input 'sr' is int64, which holds -9223372036854775808 to 9223372036854775807" in err
    code, err = run(capsys, str(path), "--value", "sr=16000", "--calls", "3")  # the near miss
    assert code == 0, err
