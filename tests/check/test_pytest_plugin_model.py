"""The ``stateful`` fixture's model object called directly (no inner pytest run): its assertions on a model whose
every output is worked out by hand, an accumulator ``y = s + x`` that stores ``y`` as its state."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from rnnir.check.pytest_plugin import StatefulModel, _resolve


def _accumulator(path: Path, *, forgets: bool = False) -> Path:
    """x[T, 1] -> y[T, 1]: the running sum of x after the state s; y's last row is stored as the state."""
    start = "zero" if forgets else "s_in"  # the forgetting twin ignores the state it is given
    nodes = [
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", TensorProto.FLOAT, [1, 1], [0.0])),
        helper.make_node("CumSum", ["x", "axis0"], ["run"]),
        helper.make_node("Add", ["run", start], ["y"]),
        helper.make_node("Slice", ["y", "minus1", "big", "axis0"], ["s_out"]),
    ]
    init = [
        helper.make_tensor("axis0", TensorProto.INT64, [1], [0]),
        helper.make_tensor("minus1", TensorProto.INT64, [1], [-1]),
        helper.make_tensor("big", TensorProto.INT64, [1], [1 << 30]),
    ]
    graph = helper.make_graph(
        nodes,
        "acc",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 1]), helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["T", 1]), helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [1, 1])],
        init,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.fixture
def acc(tmp_path: Path) -> StatefulModel:
    return StatefulModel(str(_accumulator(tmp_path / "acc.onnx")), pairs={"s_in": "s_out"})


def _x(*values: float) -> dict[str, np.ndarray]:
    return {"x": np.array([[v] for v in values], dtype=np.float32)}


def test_assert_calls_keeps_the_state_between_calls_and_returns_every_output(acc: StatefulModel) -> None:
    outs = acc.assert_calls([_x(1), _x(2), _x(3, 4)], [{"y": [[1.0]]}, {"y": [[3.0]]}, {"y": [[6.0], [10.0]]}])
    assert [o["y"].ravel().tolist() for o in outs] == [[1.0], [3.0], [6.0, 10.0]]
    assert acc.state["s_in"].tolist() == [[10.0]]


def test_assert_calls_starts_afresh_unless_reset_is_false(acc: StatefulModel) -> None:
    acc.run(_x(5))
    acc.assert_calls([_x(1)], [{"y": [[1.0]]}])  # reset first: 5 is forgotten
    acc.assert_calls([_x(1)], [{"y": [[2.0]]}], reset=False)  # and kept when asked
    acc.reset()
    assert acc.run(_x(2))["y"].tolist() == [[2.0]]


def test_assert_calls_fails_on_a_value_a_shape_or_a_name_with_what_differs(acc: StatefulModel) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"call 1: output 'y' differs .*max \|diff\| 0\.5 > 1e-05; got shape \(1, 1\), expected \(1, 1\)"):
        acc.assert_calls([_x(1), _x(2)], [{"y": [[1.0]]}, {"y": [[3.5]]}])
    with pytest.raises(pytest.fail.Exception, match=r"call 0: output 'y' differs .*max \|diff\| inf .*got shape \(1, 1\), expected \(2, 1\)"):
        acc.assert_calls([_x(1)], [{"y": [[1.0], [1.0]]}])
    with pytest.raises(pytest.fail.Exception, match=r"call 0: the model has no output 'h' \(outputs: \['s_out', 'y'\]\)"):
        acc.assert_calls([_x(1)], [{"h": [[1.0]]}])
    with pytest.raises(ValueError, match="2 calls but 1 expected results"):
        acc.assert_calls([_x(1), _x(2)], [{"y": [[1.0]]}])
    acc.assert_calls([_x(1)], [{"y": [[1.0 + 1e-6]]}])  # within atol: passes


def test_check_runs_the_documented_chunk_sizes(acc: StatefulModel) -> None:
    stream = {"x": np.linspace(0.1, 1.0, 80, dtype=np.float32).reshape(80, 1)}
    report = acc.check(stream)
    assert report.chunk_sizes == [1, 7, 64]
    assert acc.assert_persistence(stream).chunk_sizes == [1, 7, 64]


def test_a_forgetting_model_fails_even_when_inconclusive_is_allowed(tmp_path: Path) -> None:
    forgets = StatefulModel(str(_accumulator(tmp_path / "f.onnx", forgets=True)), pairs={"s_in": "s_out"})
    stream = {"x": np.linspace(0.1, 1.0, 80, dtype=np.float32).reshape(80, 1)}
    assert forgets.check(stream).status == "fail"
    with pytest.raises(pytest.fail.Exception, match="multi-call check failed"):
        forgets.assert_persistence(stream, allow_inconclusive=True)


def test_a_relative_model_path_is_tried_beside_the_test_file_only_when_the_working_directory_lacks_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    beside, cwd = tmp_path / "tests", tmp_path / "work"
    beside.mkdir()
    cwd.mkdir()
    (beside / "m.onnx").write_bytes(b"")
    monkeypatch.chdir(cwd)
    assert _resolve("m.onnx", beside) == beside / "m.onnx"
    assert _resolve("m.onnx", None) == "m.onnx"  # no test file known
    assert _resolve("other.onnx", beside) == "other.onnx"  # found nowhere: left for the session to report
    (cwd / "m.onnx").write_bytes(b"")
    assert _resolve("m.onnx", beside) == "m.onnx"  # the working directory wins
    absolute = str(tmp_path / "elsewhere" / "m.onnx")
    assert _resolve(absolute, beside) == absolute
    model = object()
    assert _resolve(model, beside) is model
