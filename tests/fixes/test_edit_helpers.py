"""The pure helpers the fixes are built on, each as a table checked by hand: what an initial-state operand is
(``classify_initial``), a state's default value, the batch of a state shape inference cannot type, fresh names,
who defines a value seen from a subgraph, dead-node pruning, and the guard that an edit never breaks a model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir.fixes.edits import FixError
from rnnir.fixes.final_state import producer_text  # imported here, so the module is loaded when tests are collected
from rnnir.fixes.onnx_edit import GraphRef, Names, check_model, dims_of, graph_refs, name_stem, producer, prune
from rnnir.fixes.state_plan import classify_initial, default_state, fallback_batch_of, reaches


def _const(name: str, out: str, arr: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [out], name=name, value=numpy_helper.from_array(arr))


def _initial_states_graph() -> onnx.GraphProto:
    zero3 = np.zeros((1, 1, 3), np.float32)
    ext = numpy_helper.from_array(np.ones((1, 1, 3), np.float32), "ext")
    ext.data_location = TensorProto.EXTERNAL
    nodes = [
        _const("k_zero", "kz", zero3),
        _const("k_one", "k1", np.full((1, 1, 3), 2.0, np.float32)),
        helper.make_node("Constant", [], ["kf"], name="k_float", value_float=1.0),
        helper.make_node("ConstantOfShape", ["dims"], ["cz"], name="cos_default"),
        helper.make_node("ConstantOfShape", ["dims"], ["ch"], name="cos_half", value=numpy_helper.from_array(np.array([0.5], np.float32))),
        helper.make_node("Unsqueeze", ["z2", "ax0"], ["uz"], name="unsq"),
        helper.make_node("Identity", ["uz"], ["iz"], name="ident"),
        helper.make_node("Relu", ["inp"], ["relu_out"], name="relu"),
        helper.make_node("Identity", ["z_init"], ["chain0"], name="chain0"),
        *[helper.make_node("Identity", [f"chain{k}"], [f"chain{k + 1}"], name=f"chain{k + 1}") for k in range(16)],
    ]
    inits = [
        numpy_helper.from_array(zero3, "z_init"),
        numpy_helper.from_array(np.full((1, 1, 3), 0.1, np.float32), "c_init"),
        numpy_helper.from_array(np.zeros((1, 3), np.float32), "z2"),
        numpy_helper.from_array(np.array([0], np.int64), "ax0"),
        numpy_helper.from_array(np.array([1, 1, 3], np.int64), "dims"),
        ext,
    ]
    return helper.make_graph(nodes, "g", [helper.make_tensor_value_info("inp", TensorProto.FLOAT, [1, 1, 3])], [], inits)


def test_what_an_initial_state_operand_is() -> None:
    g = _initial_states_graph()
    main = GraphRef(g)
    inner = GraphRef(helper.make_graph([], "branch", [], []), ((onnx.NodeProto(), "then_branch"),), main)  # sees main's names
    rows = [
        ("", "zeros", "absent (zeros)"),
        ("inp", "input", "graph input 'inp'"),
        ("z_init", "zeros", "zeros (initializer 'z_init')"),
        ("c_init", "constant", "constant initializer 'c_init'"),
        ("ext", "computed", "initializer 'ext'"),
        ("nowhere", "computed", "'nowhere'"),
        ("kz", "zeros", "Constant 'k_zero'"),
        ("k1", "constant", "Constant 'k_one'"),
        ("kf", "computed", "Constant 'k_float'"),
        ("cz", "zeros", "zeros (ConstantOfShape 'cos_default')"),
        ("ch", "computed", "ConstantOfShape 'cos_half' of np.float32(0.5)"),
        ("iz", "zeros", "zeros (initializer 'z2')"),  # through Identity and Unsqueeze
        ("relu_out", "computed", "Relu 'relu'"),
        ("chain14", "zeros", "zeros (initializer 'z_init')"),  # 15 Identity ops and the initializer: 16 look-ups
        ("chain15", "computed", "'chain15'"),  # one more: too far
    ]
    got = [(name, *classify_initial(ref, name)[::2]) for name, *_ in rows for ref in (main, inner)]
    assert got == [(name, kind, text) for name, kind, text in rows for _ in (0, 1)]
    values = {name: classify_initial(main, name)[1] for name in ("z_init", "c_init", "kz", "k1", "cz", "iz")}
    assert values["cz"] is None and not values["z_init"].any() and not values["kz"].any() and values["iz"].shape == (1, 3)
    np.testing.assert_array_equal(values["c_init"], np.full((1, 1, 3), 0.1, np.float32))
    np.testing.assert_array_equal(values["k1"], np.full((1, 1, 3), 2.0, np.float32))


def test_a_states_default_value() -> None:
    rows = [
        ([1, 2, 3], None, np.zeros((1, 2, 3), np.float32)),
        ([1, "B", 3], None, None),  # a symbolic dim: no initializer can have it
        ([1, 0, 3], None, None),
        ([1, 2, 3], np.array([[[1.0, 2.0, 3.0]]], np.float64), np.array([[[1, 2, 3], [1, 2, 3]]], np.float32)),  # broadcast, float32
        ([1, 2, 3], np.ones((4,), np.float32), None),  # does not broadcast
    ]
    for shape, value, want in rows:
        got = default_state(shape, value)
        if want is None:
            assert got is None, shape
        else:
            assert got is not None and got.dtype == np.float32 and got.flags.writeable
            np.testing.assert_array_equal(got, want)


def _with_inputs(*inputs: tuple[str, list[int | str]], inits: tuple[str, ...] = ()) -> onnx.ModelProto:
    g = helper.make_graph(
        [], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n, dims in inputs], [],
        [numpy_helper.from_array(np.zeros(1, np.float32), n) for n in inits],
    )
    return helper.make_model(g)


def test_the_batch_of_a_state_inference_cannot_type() -> None:
    rows = [
        (_with_inputs(("audio", [1, 576])), 1),
        (_with_inputs(("audio", [4, 576])), 4),
        (_with_inputs(("audio", ["B", 576])), "batch"),
        (_with_inputs(("audio", [576])), "batch"),  # one dim: no batch to take
        (_with_inputs(("audio", [0, 576])), "batch"),
        (_with_inputs(("w", [3, 3]), ("audio", [2, 576]), inits=("w",)), 2),  # an initializer's input is passed over
        (_with_inputs(("audio", ["B", 576]), ("other", [5, 5])), "batch"),  # only the first real input counts
    ]
    assert [fallback_batch_of(m) for m, _ in rows] == [want for _, want in rows]


def test_a_result_reaches_a_target_within_a_number_of_ops() -> None:
    nodes = [helper.make_node("Identity", [f"v{k}"], [f"v{k + 1}"]) for k in range(4)]
    consumers = {n.input[0]: [(n, 0)] for n in nodes}
    first = nodes[0]  # v0 -> v1 -> v2 -> v3 -> v4
    assert reaches(first, {"v1"}, consumers, 0)
    assert reaches(first, {"v4"}, consumers, 3) and not reaches(first, {"v4"}, consumers, 2)
    assert not reaches(first, {"elsewhere"}, consumers, 8)


def test_fresh_names_collide_with_nothing() -> None:
    """Every name counts as used: inputs, outputs, value_info, initializers, node inputs/outputs and node names, in
    subgraphs too."""
    branch = helper.make_graph([helper.make_node("Relu", ["a"], ["in_branch"], name="branch_node")], "b", [], [helper.make_tensor_value_info("in_branch", TensorProto.FLOAT, [1])])
    g = helper.make_graph(
        [helper.make_node("Relu", ["a"], ["a_1"], name="n"), helper.make_node("Add", ["a", "w"], ["sum"]),
         helper.make_node("If", ["cond"], ["if_out"], then_branch=branch, else_branch=branch)],
        "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])], [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1])],
        [numpy_helper.from_array(np.ones(1, np.float32), "w")], value_info=[helper.make_tensor_value_info("vi", TensorProto.FLOAT, [1])],
    )
    names = Names(helper.make_model(g))
    taken = ["a", "a_1", "n", "w", "sum", "cond", "if_out", "out", "vi", "in_branch", "branch_node"]
    assert [names.free(t) for t in taken] == [False] * len(taken)
    assert [names.fresh("a"), names.fresh("a"), names.fresh("b"), names.fresh("n"), names.fresh("w")] == ["a_2", "a_3", "b", "n_1", "w_1"]
    assert not names.free("a_3") and not names.free("b") and names.free("c") and names.free("")


def test_dims_and_stems() -> None:
    assert dims_of(None) is None
    assert dims_of(helper.make_tensor_type_proto(TensorProto.FLOAT, None)) is None  # no shape at all
    assert dims_of(helper.make_tensor_type_proto(TensorProto.FLOAT, [3, "B", None])) == [3, "B", None]
    assert [name_stem(t) for t in ("/rnn/GRU_1", "a.b-c", "///", "")] == ["rnn_GRU_1", "a_b_c", "rec", "rec"]


def test_who_defines_a_value_seen_from_a_subgraph() -> None:
    inner = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="inner_relu")], "then", [], [helper.make_tensor_value_info("r", TensorProto.FLOAT, [1])])
    outer = helper.make_graph(
        [helper.make_node("If", ["c"], ["o"], name="if", then_branch=inner, else_branch=inner)],
        "main", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])], [],
        [numpy_helper.from_array(np.ones(1, np.float32), "w")],
    )
    refs = graph_refs(helper.make_model(outer))
    main, then = refs[0], next(r for r in refs if r.owners and r.owners[-1][1] == "then_branch")
    assert [(n.name if n is not None else None, r is main if r is not None else None, kind) for n, r, kind in (
        producer(then, "r"), producer(then, "x"), producer(then, "w"), producer(then, "o"), producer(then, "nowhere"))] == [
        ("inner_relu", False, "node"), (None, True, "input"), (None, True, "initializer"), ("if", True, "node"), (None, None, "missing")]


def test_prune_removes_a_dead_chain_and_its_value_info_only() -> None:
    branch = helper.make_graph([helper.make_node("Relu", ["x"], ["br"])], "b", [], [helper.make_tensor_value_info("br", TensorProto.FLOAT, [1])])
    nodes = [
        helper.make_node("Relu", ["x"], ["y"], name="live_relu"),  # a graph output: kept
        helper.make_node("Add", ["x", "w"], ["z"], name="also_live"),
        helper.make_node("Neg", ["x"], ["orphan"], name="orphan"),  # read by nobody, but not a candidate: kept
        helper.make_node("If", ["cond"], ["if_out"], name="if_node", then_branch=branch, else_branch=branch),  # holds subgraphs: kept
        _const("k", "c", np.ones(1, np.float32)),
        helper.make_node("Identity", ["c"], ["d"], name="dead_ident"),  # the dead chain, last in the graph
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("x", "in_w")] + [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    g = helper.make_graph(
        nodes, "g", inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1]), helper.make_tensor_value_info("z", TensorProto.FLOAT, [1])],
        [numpy_helper.from_array(np.ones(1, np.float32), n) for n in ("w", "unused_w", "kept_w", "in_w")],
        value_info=[helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("c", "d", "y", "z", "x")],
    )
    model = helper.make_model(g)
    assert prune(model, {"y", "z", "orphan_input"}) == []  # nothing dead: nothing removed, value_info untouched
    assert [vi.name for vi in model.graph.value_info] == ["c", "d", "y", "z", "x"]
    assert prune(model, {"d", "y", "w", "unused_w", "if_out", "in_w"}) == ["k", "dead_ident"]  # graph order
    assert [n.name for n in model.graph.node] == ["live_relu", "also_live", "orphan", "if_node"]
    assert [vi.name for vi in model.graph.value_info] == ["y", "z"]
    # w is read, kept_w is no candidate, in_w is a graph input's default: only unused_w goes
    assert [t.name for t in model.graph.initializer] == ["w", "kept_w", "in_w"]


def test_an_edit_that_breaks_the_model_is_an_error_unless_the_model_was_broken() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    good = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])]))
    broken = helper.make_model(helper.make_graph([helper.make_node("Relu", ["nowhere"], ["y"])], "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])]))
    check_model(good, good, "m.onnx")
    check_model(broken, broken, "m.onnx")  # not ours to judge
    with pytest.raises(FixError, match=r"(?s)^m\.onnx: the edited model does not pass onnx.checker \(.*nowhere.*\); this is a bug in rnnir fix$"):
        check_model(broken, good, "m.onnx")


def test_the_text_of_what_produces_an_output() -> None:
    g = helper.make_graph(
        [helper.make_node("Gather", ["y", "t0"], ["hn"], name="first_step"), helper.make_node("LSTM", ["x", "W", "R", "", "", "h"], ["y2"])],
        "g", [], [],
    )
    assert [producer_text(g, name) for name in ("hn", "y2", "nowhere")] == ["Gather 'first_step'(y, t0)", "LSTM 'LSTM(y2)'(x, W, R, h)", "'nowhere'"]
