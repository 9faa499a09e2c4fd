"""More recogniser cases for rnnir/lower/cells.py, written for the survivors of its first full mutation run.

The cells are built op by op (with the helpers of ``test_pinned_cells``), so what each computes is known by
construction: the expected weights are the arrays put into the model, the expected names are the names given to
its nodes and values, and the expected numbers are worked out by hand in the comments.
"""

from __future__ import annotations

import numpy as np

from tests.lower.cells import test_constant_initial_state as pc
from tests.lower.cells.test_constant_initial_state import H, I, Net, f32, rnn_step, scan


def test_a_match_is_anchored_at_the_node_that_makes_its_new_state():
    # RNN: the activation; GRU: the candidate's tanh; LSTM: the Add that makes c' (the names Net gives: n_<output>)
    g = Net()
    x, h = g.input("x", [1, I]), g.input("h0", [1, H])
    rnn_step(g, x, h, out="hn")
    (m,) = scan(g.model(["hn"]), ["h0"])[0].matches
    assert len(m.nodes) > 1 and m.anchor == "n_hn"
    (m,) = scan(pc.lstm_model(), ["h0", "c0"])[0].matches
    assert len(m.nodes) > 1 and m.anchor == "n_c1"
    (m,) = scan(pc.gru(), ["h0"])[0].matches
    tanh = next(n.name for n in pc.gru().graph.node if n.op_type == "Tanh")
    assert len(m.nodes) > 1 and m.anchor == tanh


def test_an_input_declared_without_a_shape_leaves_the_cell_unverified():
    # x is a float tensor of unknown rank (no shape field at all, and nothing to infer one from): not a scalar
    g = Net()
    x, h = g.input("x", None), g.input("h0", [1, H])
    rnn_step(g, x, h, out="hn")
    s, _ = scan(g.model(["hn"]), ["h0"])
    assert s.matches == []
    assert [(c.kind, c.reason) for c in s.candidates] == [("RNN", "cell-like structure at node 'n_hn': the shape of its input 'x' is unknown")]


def test_a_pre_activation_plus_the_truncated_difference_of_input_and_state_is_no_rnn():
    # pre = x W^T + h R^T + b + trunc(x - h), x and h both H wide: the probes (unit vectors) read trunc(+-1) = +-1, so
    # the extracted cell is tanh(x (W+I)^T + h (R-I)^T + b), which equals the model only where trunc(x - h) = x - h:
    # on data where x equals h, never on independent random x and h (the checks must draw them independently)
    g = Net()
    x, h = g.input("x", [1, H]), g.input("h0", [1, H])
    W = f32(np.random.default_rng(5).standard_normal((H, H)) * 0.5)
    gx = g.op("Gemm", [x, g.const(W), g.const(pc.B4)], transB=1)
    gh = g.op("MatMul", [h, g.const(pc.R4.T.copy())])
    trunc = g.op("Cast", [g.op("Cast", [g.op("Sub", [x, h])], to=pc.TensorProto.INT32)], to=pc.TensorProto.FLOAT)
    g.op("Tanh", [g.op("Add", [g.op("Add", [gx, gh]), trunc])], out="hn")
    s, _ = scan(g.model(["hn"]), ["h0"])
    assert s.matches == []
    (c,) = s.candidates
    assert c.kind == "RNN" and "does not compute an RNN cell" in c.reason


# -- a cell inside an If branch, where the branch reuses names of the main graph (ONNX scoping allows it) -------------


def rnn_in_a_branch(shadow_output: bool = False, main_reads: str = ""):
    """hn = If(cond): then h' = tanh(Gemm(x) + h0 R^T) with h0 and x read from the main graph, else h0.

    ``shadow_output``: the main graph also makes a value 'o' (Identity(h0)), the name of the branch's product h0 R^T.
    ``main_reads``: the main graph also makes a value of that name from x, read by a main-graph Relu."""
    from onnx import TensorProto, helper, numpy_helper

    W, b, RT = pc.W4, pc.B4, pc.R4.T.copy()
    then_nodes = [
        helper.make_node("Gemm", ["x", "W", "b"], ["gx"], transB=1, name="b_gemm"),
        helper.make_node("MatMul", ["h0", "RT"], ["o"], name="b_matmul"),
        helper.make_node("Add", ["gx", "o"], ["pre"], name="b_add"),
        helper.make_node("Tanh", ["pre"], ["hb"], name="b_tanh"),
    ]
    then_g = helper.make_graph(then_nodes, "then", [], [helper.make_tensor_value_info("hb", TensorProto.FLOAT, [1, H])])
    else_g = helper.make_graph([helper.make_node("Identity", ["h0"], ["he"])], "else", [], [helper.make_tensor_value_info("he", TensorProto.FLOAT, [1, H])])
    nodes = [helper.make_node("If", ["cond"], ["hn"], then_branch=then_g, else_branch=else_g, name="if")]
    outputs = ["hn"]
    if shadow_output:
        nodes.append(helper.make_node("Identity", ["h0"], ["o"], name="main_o"))
        outputs.append("o")
    if main_reads:
        nodes += [helper.make_node("Identity", ["x"], [main_reads], name="main_same_name"), helper.make_node("Relu", [main_reads], ["q"], name="main_relu")]
        outputs.append("q")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, I]), helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, H]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b"), numpy_helper.from_array(RT, "RT")]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    return m


def branch_rnn(model) -> None:
    s, _ = scan(model, ["h0"])
    assert s.candidates == []
    (m,) = s.matches
    assert (m.kind, m.scope_path != (), m.h_in, m.h_out, m.x) == ("RNN", True, "h0", "hb", ("x",))
    np.testing.assert_allclose(m.weights.W[0], pc.W4, atol=1e-5)
    np.testing.assert_allclose(m.weights.R[0], pc.R4, atol=1e-5)


def test_a_cell_in_a_branch_is_found_when_its_product_has_the_name_of_a_main_graph_value():
    # the branch's MatMul reads the main graph's h0 and makes its own 'o': it lives in the branch, not in the main graph
    branch_rnn(rnn_in_a_branch(shadow_output=True))


def test_a_cell_in_a_branch_is_found_when_a_main_graph_node_reads_a_value_of_the_same_name():
    # the main graph's Relu reads the main graph's 'pre', not the branch's: it is no reader of the cell's values
    branch_rnn(rnn_in_a_branch(main_reads="pre"))


def test_an_lstm_shape_on_a_branchs_own_value_of_the_states_name_is_outside_the_cone():
    # the main graph: an RNN step on the state h0. An If branch has its own initializer named h0 (ONNX scoping: it
    # shadows the main graph's) and an LSTM-shaped structure on it and on x: nothing there depends on the state, so
    # it is no candidate (a reader of the branch's h0 is no reader of the state)
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(8)
    mats = {k: f32(rng.standard_normal((H, H))) for k in "iofg"}
    inits = [numpy_helper.from_array(f32(np.ones((1, H))), "h0")] + [numpy_helper.from_array(mats[k], f"R{k}") for k in "iofg"]
    nodes = [helper.make_node("MatMul", ["h0", f"R{k}"], [f"p{k}"]) for k in "iofg"]
    nodes += [helper.make_node("Tanh" if k == "g" else "Sigmoid", [f"p{k}"], [f"a{k}"]) for k in "iofg"]
    nodes += [
        helper.make_node("Identity", ["x"], ["cx"]),
        helper.make_node("Mul", ["af", "cx"], ["fc"]),
        helper.make_node("Mul", ["ai", "ag"], ["ig"]),
        helper.make_node("Add", ["fc", "ig"], ["cb"], name="branch_c"),
        helper.make_node("Tanh", ["cb"], ["tc"]),
        helper.make_node("Mul", ["ao", "tc"], ["hb"]),
    ]
    then_g = helper.make_graph(nodes, "then", [], [helper.make_tensor_value_info("hb", TensorProto.FLOAT, [1, H])], inits)
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["xe"])], "else", [], [helper.make_tensor_value_info("xe", TensorProto.FLOAT, [1, H])])
    g = Net()
    x, h = g.input("x", [1, H]), g.input("h0", [1, H])
    g.input("cond", [], TensorProto.BOOL)
    rnn_step(g, x, h, W=f32(np.eye(H)), out="hn")
    g.nodes.append(helper.make_node("If", ["cond"], ["side"], then_branch=then_g, else_branch=else_g, name="if"))
    s, _ = scan(g.model(["hn", "side"]), ["h0"])
    assert [(m.kind, m.h_in, m.h_out) for m in s.matches] == [("RNN", "h0", "hn")]
    assert s.candidates == []


def state_through(owner: str):
    """h' = tanh(Gemm(x) + h0 R^T + s) where s depends on the state h0 through a node with a subgraph:

    "If": s = If(cond) then Identity(h0) else Neg(h0); "Loop": s = Reshape(Loop(1 trip) whose body yields h0 as a scan
    output, read from the main graph). Neither is affine, so this is no RNN cell (and nothing worth a candidate)."""
    from onnx import TensorProto, helper

    def graph(nodes, name, inputs, outs):
        return helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT if o != "c_out" else TensorProto.BOOL, None) for o in outs])

    g = Net()
    x, h = g.input("x", [1, I]), g.input("h0", [1, H])
    g.input("cond", [], TensorProto.BOOL)
    if owner == "If":
        then_g = graph([helper.make_node("Identity", ["h0"], ["t_s"])], "t", [], ["t_s"])
        else_g = graph([helper.make_node("Neg", ["h0"], ["e_s"])], "e", [], ["e_s"])
        g.nodes.append(helper.make_node("If", ["cond"], ["s"], then_branch=then_g, else_branch=else_g, name="if"))
        s = "s"
    else:
        body_inputs = [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c_in", TensorProto.BOOL, [])]
        body = graph([helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Identity", ["h0"], ["y"])], "body", body_inputs, ["c_out", "y"])
        g.nodes.append(helper.make_node("Loop", [g.const(np.array(1, np.int64)), "cond"], ["ys"], body=body, name="loop"))
        s = g.op("Reshape", ["ys", g.const(np.array([1, H], np.int64))])
    gx = g.op("Gemm", [x, g.const(pc.W4), g.const(pc.B4)], transB=1)
    gh = g.op("MatMul", [h, g.const(pc.R4.T.copy())])
    g.op("Tanh", [g.op("Add", [g.op("Add", [gx, gh]), s])], out="hn")
    return g.model(["hn"])


def test_a_pre_activation_that_reads_the_state_through_an_if_is_no_rnn():
    # s depends on h0 (through either branch): it is no input x of a cell, and an If is no affine op
    s, _ = scan(state_through("If"), ["h0"])
    assert s.matches == [] and s.candidates == []


def test_a_pre_activation_that_reads_the_state_through_a_loop_is_no_rnn():
    s, _ = scan(state_through("Loop"), ["h0"])
    assert s.matches == [] and s.candidates == []


def rnn_on_an_if_of_x(side: str):
    """h' = tanh(Gemm(u) + h0 R^T) where u = If(cond) of x: then Identity(x), else Neg(x), each branch yielding 's'.

    ``side`` "sibling": another If, on the state, whose branches also yield values named 's';
    ``side`` "shadow": u's branches name their value 'h0', the state's name (their own value, from x)."""
    from onnx import TensorProto, helper

    def branch(op: str, src: str, out: str, tag: str):
        return helper.make_graph([helper.make_node(op, [src], [out], name=f"{tag}_{op}")], tag, [], [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)])

    g = Net()
    g.input("x", [1, I])
    h = g.input("h0", [1, H])
    g.input("cond", [], TensorProto.BOOL)
    name = "h0" if side == "shadow" else "s"
    g.nodes.append(helper.make_node("If", ["cond"], ["u"], then_branch=branch("Identity", "x", name, "ut"), else_branch=branch("Neg", "x", name, "ue"), name="if_x"))
    outs = ["hn"]
    if side == "sibling":
        g.nodes.append(helper.make_node("If", ["cond"], ["v"], then_branch=branch("Identity", "h0", "s", "vt"), else_branch=branch("Neg", "h0", "s", "ve"), name="if_h"))
        outs.append("v")
    gx = g.op("Gemm", ["u", g.const(pc.W4), g.const(pc.B4)], transB=1)
    gh = g.op("MatMul", [h, g.const(pc.R4.T.copy())])
    g.op("Tanh", [g.op("Add", [gx, gh])], out="hn")
    m = g.model(outs)
    m.graph.value_info.append(helper.make_tensor_value_info("u", TensorProto.FLOAT, [1, I]))  # u's shape, as exporters declare it
    return m


def rnn_with_input_u(model) -> None:
    s, _ = scan(model, ["h0"])
    assert [(m.kind, m.x, m.h_in, m.h_out) for m in s.matches] == [("RNN", ("u",), "h0", "hn")]
    np.testing.assert_allclose(s.matches[0].weights.W[0], pc.W4, atol=1e-5)


def test_an_if_of_the_input_is_the_cells_input_beside_an_if_on_the_state_whose_branches_use_the_same_names():
    rnn_with_input_u(rnn_on_an_if_of_x("sibling"))


def test_an_if_of_the_input_is_the_cells_input_when_its_branches_name_their_value_like_the_state():
    rnn_with_input_u(rnn_on_an_if_of_x("shadow"))


def rnn_on_the_first_output_of_an_if(domain: str = "", node_outputs: int = 2):
    """h' = tanh(Gemm(u) + h0 R^T) with (u, v) = If(cond): u from x in both branches, v from the state h0.

    ``domain`` another domain's op named If; ``node_outputs`` 1: that node names only u (its branches yield two)."""
    from onnx import TensorProto, helper

    def branch(op: str, tag: str):
        nodes = [helper.make_node(op, ["x"], [f"{tag}_u"]), helper.make_node(op, ["h0"], [f"{tag}_v"])]
        return helper.make_graph(nodes, tag, [], [helper.make_tensor_value_info(f"{tag}_{o}", TensorProto.FLOAT, None) for o in "uv"])

    g = Net()
    g.input("x", [1, I])
    h = g.input("h0", [1, H])
    g.input("cond", [], TensorProto.BOOL)
    g.nodes.append(helper.make_node("If", ["cond"], ["u", "v"][:node_outputs], then_branch=branch("Identity", "t"), else_branch=branch("Neg", "e"), name="if", domain=domain or None))
    gx = g.op("Gemm", ["u", g.const(pc.W4), g.const(pc.B4)], transB=1)
    gh = g.op("MatMul", [h, g.const(pc.R4.T.copy())])
    g.op("Tanh", [g.op("Add", [gx, gh])], out="hn")
    m = g.model(["hn", "v"][:node_outputs])
    m.graph.value_info.append(helper.make_tensor_value_info("u", TensorProto.FLOAT, [1, I]))
    return m


def test_only_the_if_output_its_branches_compute_from_the_state_depends_on_it():
    rnn_with_input_u(rnn_on_the_first_output_of_an_if())


def test_another_domains_if_with_more_branch_outputs_than_outputs_is_scanned_without_error():
    # its branches' second output (from the state) has no node output to flow to
    rnn_with_input_u(rnn_on_the_first_output_of_an_if(domain="custom.test", node_outputs=1))


# -- which weights are constants: only what a run cannot change and the recogniser can read ---------------------------


def rnn_with_recurrent_weight(make_r):
    """h' = tanh(Gemm(x) + h0 R^T) where ``make_r(g)`` makes the value 'RT' (R^T) the MatMul reads."""
    g = Net()
    x, h = g.input("x", [1, I]), g.input("h0", [1, H])
    gx = g.op("Gemm", [x, g.const(pc.W4), g.const(pc.B4)], transB=1)
    gh = g.op("MatMul", [h, make_r(g)])
    g.op("Tanh", [g.op("Add", [gx, gh])], out="hn")
    return g.model(["hn"])


def no_cell(model) -> None:
    # a matmul of the state by a weight that is no constant: not affine in the state, so no cell and no candidate
    s, _ = scan(model, ["h0"])
    assert s.matches == [] and s.candidates == []


def test_an_initializer_recurrent_weight_is_a_constant():
    s, _ = scan(rnn_with_recurrent_weight(lambda g: g.const(pc.R4.T.copy(), "RT")), ["h0"])
    (m,) = s.matches
    np.testing.assert_allclose(m.weights.R[0], pc.R4, atol=1e-5)


def test_a_recurrent_weight_that_is_a_graph_input_with_a_default_is_no_constant():
    # an initializer of a graph input's name is only its default: the caller may feed another weight
    def make(g):
        g.input("RT", [H, H])
        return g.const(pc.R4.T.copy(), "RT")

    no_cell(rnn_with_recurrent_weight(make))


def test_a_recurrent_weight_made_by_another_domains_constant_is_no_constant():
    from onnx import helper, numpy_helper

    def make(g):
        g.nodes.append(helper.make_node("Constant", [], ["RT"], domain="custom.test", value=numpy_helper.from_array(pc.R4.T.copy())))
        return "RT"

    no_cell(rnn_with_recurrent_weight(make))


def external_rt():
    from onnx import TensorProto

    t = TensorProto(name="RT", data_type=TensorProto.FLOAT, dims=[H, H])
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value="weights.bin")
    return t


def test_a_recurrent_weight_whose_data_lives_in_an_external_file_not_loaded_is_no_constant():
    def make(g):
        g.inits.append(external_rt())
        return "RT"

    no_cell(rnn_with_recurrent_weight(make))


def test_a_constant_node_whose_tensor_lives_in_an_external_file_not_loaded_is_no_constant():
    from onnx import helper

    def make(g):
        g.nodes.append(helper.make_node("Constant", [], ["RT"], value=external_rt()))
        return "RT"

    no_cell(rnn_with_recurrent_weight(make))


def test_a_fill_shaped_at_run_time_is_an_input_of_the_cell_not_a_constant():
    # pre = Gemm(x) + h0 R^T + ConstantOfShape(shape) with shape a graph input: the fill is a run-time value (its
    # shape declared [1, H]), so it is one of the cell's inputs, its columns the identity in W
    from onnx import TensorProto, helper

    g = Net()
    x, h = g.input("x", [1, I]), g.input("h0", [1, H])
    g.input("shape", [2], TensorProto.INT64)
    g.nodes.append(helper.make_node("ConstantOfShape", ["shape"], ["fill"], name="fill", value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])))
    gx = g.op("Gemm", [x, g.const(pc.W4), g.const(pc.B4)], transB=1)
    gh = g.op("MatMul", [h, g.const(pc.R4.T.copy())])
    g.op("Tanh", [g.op("Add", [g.op("Add", [gx, gh]), "fill"])], out="hn")
    model = g.model(["hn"])
    model.graph.value_info.append(helper.make_tensor_value_info("fill", TensorProto.FLOAT, [1, H]))
    s, _ = scan(model, ["h0"])
    (m,) = s.matches
    assert sorted(m.x) == ["fill", "x"]
    at = {name: sum(H if n == "fill" else I for n in m.x[:j]) for j, name in enumerate(m.x)}  # first column of each
    np.testing.assert_allclose(m.weights.W[0][:, at["x"] : at["x"] + I], pc.W4, atol=1e-5)
    np.testing.assert_allclose(m.weights.W[0][:, at["fill"] : at["fill"] + H], np.eye(H), atol=1e-5)


def test_a_recurrent_weight_computed_by_another_domains_op_from_a_constant_is_no_constant():
    # custom.test's Neg is not ONNX's: what it computes is unknown here, so its output is a run-time value
    no_cell(rnn_with_recurrent_weight(lambda g: g.op("Neg", [g.const(-pc.R4.T)], domain="custom.test")))


def test_another_domains_size_is_an_input_of_the_cell_not_the_number_of_elements():
    # pre = Gemm(x) + h0 R^T + Reshape(Cast(custom Size(x)), [1, 1]) V: only ONNX's Size is folded from x's shape (3);
    # custom.test's is a run-time value, an input of the cell whose column in W is V
    from onnx import TensorProto, helper

    V = f32(np.arange(1, H + 1).reshape(1, H))
    g = Net()
    x, h = g.input("x", [1, I]), g.input("h0", [1, H])
    size = g.op("Cast", [g.op("Size", [x], domain="custom.test")], to=TensorProto.FLOAT)
    size = g.op("Reshape", [size, g.const(np.array([1, 1], np.int64))], out="size")
    gx = g.op("Gemm", [x, g.const(pc.W4), g.const(pc.B4)], transB=1)
    gh = g.op("MatMul", [h, g.const(pc.R4.T.copy())])
    g.op("Tanh", [g.op("Add", [g.op("Add", [gx, gh]), g.op("MatMul", [size, g.const(V)])])], out="hn")
    model = g.model(["hn"])
    model.graph.value_info.append(helper.make_tensor_value_info("size", TensorProto.FLOAT, [1, 1]))
    (m,) = scan(model, ["h0"])[0].matches
    assert sorted(m.x) == ["size", "x"]
    at = 0 if m.x[0] == "size" else I
    np.testing.assert_allclose(m.weights.W[0][:, at], V[0], atol=1e-5)
    np.testing.assert_allclose(m.weights.B[0, :H] + m.weights.B[0, H:], pc.B4, atol=1e-5)


def test_a_state_whose_default_has_another_batch_than_declared_is_probed_with_a_batch_of_one():
    # h0 is declared [N, H] (N symbolic: batch 1 for the checks) and defaults to zeros of 2 rows: its declared shape
    # counts, the default only fills it when the caller gives none
    from onnx import TensorProto, helper

    g = Net()
    x = g.input("x", [1, I])
    g.inputs.append(helper.make_tensor_value_info("h0", TensorProto.FLOAT, ["N", H]))
    g.const(np.zeros((2, H), np.float32), "h0")
    rnn_step(g, x, "h0", out="hn")
    (m,) = scan(g.model(["hn"]), ["h0"])[0].matches
    assert (m.kind, m.hidden_size, m.h_in) == ("RNN", H, "h0")
    np.testing.assert_allclose(m.weights.R[0], pc.R4, atol=1e-5)


def test_zeros_shaped_by_a_graph_input_are_no_zero_start_and_no_error():
    # h = ConstantOfShape(shape) with shape fed at run time, read as a matmul's data: its size is unknown, so it is
    # no constant state (and the model has no other state): nothing to report
    from onnx import TensorProto, helper

    g = Net()
    x = g.input("x", [1, I])
    g.input("shape", [2], TensorProto.INT64)
    g.nodes.append(helper.make_node("ConstantOfShape", ["shape"], ["z"], name="zeros"))
    rnn_step(g, x, "z", out="hn")
    s, index = scan(g.model(["hn"]))
    assert s.matches == [] and s.candidates == [] and not s.is_zero_start(index.root, "z")


def test_quieting_float_errors_before_numpy_is_imported_leaves_numpy_unimported(monkeypatch):
    # a lint that never computes must not import numpy (it costs more than linting most models): before numpy is
    # imported, float errors are silenced as the RuntimeWarnings they are then, without touching numpy
    import sys
    import warnings

    import rnnir.lower.cells.execute as execute

    class NoNumpy:
        def __getattr__(self, name: str):
            raise AssertionError(f"numpy.{name} was used")

    monkeypatch.delitem(sys.modules, "numpy")
    monkeypatch.setattr(execute, "np", NoNumpy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with execute.quiet_float_errors():
            warnings.warn("overflow encountered in exp", RuntimeWarning, stacklevel=1)  # silenced, not raised
    assert "numpy" not in sys.modules


def test_a_sparse_constant_the_cell_reads_is_an_input_of_its_declared_shape():
    # s = Constant(sparse_value) [1, 2], which the recogniser cannot evaluate: a run-time input of the cell, of the
    # shape the model declares for it, read through the projection s V (V's rows are its two columns in W)
    from onnx import TensorProto, helper, numpy_helper

    V = f32(np.arange(2 * H).reshape(2, H) / 8)
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(f32([1.0]), "v"), numpy_helper.from_array(np.array([1], np.int64), "i"), [1, 2])
    g = Net()
    x, h = g.input("x", [1, I]), g.input("h0", [1, H])
    g.nodes.append(helper.make_node("Constant", [], ["s"], sparse_value=sparse, name="sparse"))
    gx = g.op("Gemm", [x, g.const(pc.W4), g.const(pc.B4)], transB=1)
    gh = g.op("MatMul", [h, g.const(pc.R4.T.copy())])
    g.op("Tanh", [g.op("Add", [g.op("Add", [gx, gh]), g.op("MatMul", ["s", g.const(V)])])], out="hn")
    model = g.model(["hn"])
    model.graph.value_info.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 2]))
    (m,) = scan(model, ["h0"])[0].matches
    assert sorted(m.x) == ["s", "x"]
    at = 0 if m.x[0] == "s" else I
    np.testing.assert_allclose(m.weights.W[0][:, at : at + 2], V.T, atol=1e-5)


def test_zeros_whose_raw_bytes_are_no_whole_number_of_floats_are_no_zero_start():
    # 17 bytes for a [1, 4] float tensor: unreadable, so no zeros the cell starts from (and no error)
    from onnx import TensorProto

    def make(g):
        g.inits.append(TensorProto(name="z", data_type=TensorProto.FLOAT, dims=[1, H], raw_data=bytes(17)))
        return "z"

    assert not pc.zero_start(pc.zero_reader(make))


def rnn_on_a_view_chain(length: int):
    """h' = tanh(Gemm(x) + h0 R1^T + v R2^T) with v = h0 passed through ``length`` Identity ops: v holds h0's elements."""
    g = Net()
    x, h = g.input("x", [1, I]), g.input("h0", [1, H])
    v = h
    for _ in range(length):
        v = g.op("Identity", [v])
    R2 = f32(np.eye(H) * 0.5)
    gx = g.op("Gemm", [x, g.const(pc.W4), g.const(pc.B4)], transB=1)
    gh = g.op("Add", [g.op("MatMul", [h, g.const(pc.R4.T.copy())]), g.op("MatMul", [v, g.const(R2.T.copy())])])
    g.op("Tanh", [g.op("Add", [gx, gh])], out="hn")
    return g.model(["hn"]), v, R2


def test_a_state_read_directly_and_through_a_view_is_one_state_input():
    model, v, R2 = rnn_on_a_view_chain(2)
    (m,) = scan(model, ["h0"])[0].matches
    assert m.x == ("x",) and sorted(m.h_views) == sorted(["h0", v])
    np.testing.assert_allclose(m.weights.R[0], pc.R4 + R2, atol=1e-5)


def test_another_domains_if_near_the_outputs_without_onnxs_branches_is_walked_past():
    # looking for zeros near the outputs follows an If's branches; another domain's "If" may have no else branch
    # and a then branch that yields nothing: it is walked past, and the cell beside it is found
    from onnx import TensorProto, helper

    g = Net()
    x, h = g.input("x", [1, I]), g.input("h0", [1, H])
    g.input("cond", [], TensorProto.BOOL)
    empty = helper.make_graph([], "then", [], [])
    g.nodes.append(helper.make_node("If", ["cond"], ["side"], then_branch=empty, domain="custom.test", name="custom_if"))
    rnn_step(g, x, h, out="hn")
    (m,) = scan(g.model(["hn", "side"]), ["h0"])[0].matches
    assert (m.kind, m.h_in, m.h_out) == ("RNN", "h0", "hn")


def lstm_step(g: Net, x: str, h: str, c: str, Wk: dict, Rk: dict, bk: dict, tag: str) -> tuple[str, str]:
    """c' = f*c + i*g, h' = o*tanh(c'), gate k = act(x Wk^T + h Rk^T + bk); returns (h', c')."""
    act = {}
    for k in "iofg":
        pre = g.op("Add", [g.op("Gemm", [x, g.const(Wk[k]), g.const(bk[k])], transB=1), g.op("MatMul", [h, g.const(Rk[k].T.copy())])])
        act[k] = g.op("Tanh" if k == "g" else "Sigmoid", [pre])
    c_new = g.op("Add", [g.op("Mul", [act["f"], c]), g.op("Mul", [act["i"], act["g"]])], out=f"c{tag}")
    return g.op("Mul", [act["o"], g.op("Tanh", [c_new])], out=f"h{tag}"), c_new


def test_a_graph_state_input_is_tried_as_h_before_a_cells_output():
    # layer 1: an LSTM on (x, h0a, c0a) with weights W (on x) and R (on h). Layer 2: an LSTM on c0b whose gates read
    # h0b through W and layer 1's h1 through R. Read with h1 as its state, layer 2 would be a second step of layer 1
    # (same weights); the graph's state input h0b is tried as h first, and layer 2 is a cell on (h0b, c0b) with h1
    # as its input
    rng = np.random.default_rng(12)
    Wk, Rk, bk = ({k: f32(rng.standard_normal(shape) * 0.5) for k in "iofg"} for shape in ((H, H), (H, H), (H,)))
    g = Net()
    x, h0a, c0a, h0b, c0b = (g.input(n, [1, H]) for n in ("x", "h0a", "c0a", "h0b", "c0b"))
    h1, _ = lstm_step(g, x, h0a, c0a, Wk, Rk, bk, "1")
    h2, c2 = lstm_step(g, h0b, h1, c0b, Wk, Rk, bk, "2")
    s, _ = scan(g.model([h2, c2]), ["h0a", "c0a", "h0b", "c0b"])
    assert [(m.h_in, m.c_in, m.x, m.h_out) for m in s.matches] == [("h0a", "c0a", ("x",), "h1"), ("h0b", "c0b", ("h1",), "h2")]
    np.testing.assert_allclose(s.matches[1].weights.R[0], np.concatenate([Wk[k] for k in "iofg"]), atol=1e-5)


def test_a_gru_whose_new_state_is_the_third_blend_found_is_still_found():
    # h' = h + z*(n - h) (z the write ratio), beside a side output aux = z*((n-h) + (n-h)): walking out from n, the
    # blends of n, z and h met are z*(n-h), then aux (through the sum that reads n-h twice), then h' itself, the
    # third; up to three are tried, each once
    g = Net()
    x, h = g.input("x", [1, I]), g.input("h0", [1, H])

    def lin(v, Wm, b):
        return g.op("Gemm", [v, g.const(f32(Wm)), g.const(f32(b))], transB=1)

    z = g.op("Sigmoid", [g.op("Add", [lin(x, pc.GW["z"], pc.GBW["z"]), lin(h, pc.GR["z"], pc.GBR["z"])])])
    r = g.op("Sigmoid", [g.op("Add", [lin(x, pc.GW["r"], pc.GBW["r"]), lin(h, pc.GR["r"], pc.GBR["r"])])])
    n = g.op("Tanh", [g.op("Add", [lin(x, pc.GW["n"], pc.GBW["n"]), g.op("Mul", [r, lin(h, pc.GR["n"], pc.GBR["n"])])])])
    d = g.op("Sub", [n, h])
    twice = g.op("Add", [d, d])  # made before z*(n-h): the walk meets it first
    aux = g.op("Mul", [z, twice], out="aux")
    h_new = g.op("Add", [h, g.op("Mul", [z, d])], out="hn")
    s, _ = scan(g.model([h_new, aux]), ["h0"])
    (m,) = s.matches
    assert (m.kind, m.h_in, m.h_out) == ("GRU", "h0", "hn")
    np.testing.assert_allclose(m.weights.R[0], np.concatenate([pc.GR[k] for k in "zrn"]) * np.repeat([-1, 1, 1], H)[:, None], atol=1e-5)


def expanded(value, shape):
    """A zero_reader maker: z = Expand(value, shape), whose rank, size and values only evaluating it tells."""
    return lambda g: g.op("Expand", [g.const(np.asarray(value)), g.const(np.array(shape, np.int64))], out="z")


def test_only_float_zeros_of_rank_two_with_elements_made_by_expand_are_a_zero_start():
    assert pc.zero_start(pc.zero_reader(expanded(np.float32(0.0), [1, H])))
    assert not pc.zero_start(pc.zero_reader(expanded(np.float32(0.0), [H])))  # rank 1: a bias
    assert not pc.zero_start(pc.zero_reader(expanded(np.float32(0.5), [1, H])))  # not zeros: a weight
    assert not pc.zero_start(pc.zero_reader(expanded(np.int64(0), [1, H]), read="concat_second"))  # int64: pads a signal
    assert not pc.zero_start(pc.zero_reader(expanded(np.float32(0.0), [0, H]), read="concat_second"))  # no elements


def test_zeros_shaped_by_another_constant_of_shape_are_a_zero_start():
    # z = ConstantOfShape(ConstantOfShape([2], value=H)): zeros of [H, H], whose shape only evaluating tells (the
    # inner node's value attribute is its fill, not the shape)
    from onnx import TensorProto, helper

    def make(g):
        shape = g.op("ConstantOfShape", [g.const(np.array([2], np.int64))], value=helper.make_tensor("v", TensorProto.INT64, [1], [H]))
        return g.op("ConstantOfShape", [shape], out="z")

    assert pc.zero_start(pc.zero_reader(make))


def test_zeros_read_through_an_op_that_is_no_view_are_not_looked_for():
    # z -> Relu -> MatMul: Relu(0) is 0, but only layout views carry a state to where it meets run-time data
    def make(g):
        g.const(np.zeros((1, H), np.float32), "z0")
        return g.op("Relu", ["z0"], out="z")

    s, index = scan(pc.zero_reader(make))
    assert not s.is_zero_start(index.root, "z0") and not s.is_zero_start(index.root, "z")


def test_zeros_that_only_give_castlike_its_type_are_no_state():
    # CastLike(x, z) takes only z's element type: z never reaches the MatMul that reads the CastLike's output
    g = Net()
    x = g.input("x", [1, H])
    g.const(np.zeros((1, H), np.float32), "z")
    y = g.op("MatMul", [g.op("CastLike", [x, "z"]), g.const(pc.R4)])
    s, index = scan(g.model([y]))
    assert not s.is_zero_start(index.root, "z")


def test_zeros_whose_name_a_branch_reads_as_its_own_value_are_no_state():
    # the main graph's zeros z feed only a Relu; an If branch has its own initializer z, which its MatMul reads
    from onnx import TensorProto, helper, numpy_helper

    then_g = helper.make_graph(
        [helper.make_node("MatMul", ["z", "R"], ["t"])], "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(f32(np.ones((1, H))), "z")],
    )
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    g = Net()
    g.input("x", [1, H])
    g.input("cond", [], TensorProto.BOOL)
    g.const(np.zeros((1, H), np.float32), "z")
    g.const(pc.R4, "R")
    g.nodes.append(helper.make_node("If", ["cond"], ["side"], then_branch=then_g, else_branch=else_g, name="if"))
    y = g.op("Relu", ["z"])
    s, index = scan(g.model([y, "side"]))
    assert not s.is_zero_start(index.root, "z")


def test_a_cell_on_the_output_of_an_onnx_rnn_op_reads_it_as_its_input():
    # an ONNX RNN op on state hA (its own state ports are lowering's business), then a cell written as plain ops on
    # state h0b whose input is the op's Y_h: the op's results are no values of the cell's state cone
    from onnx import TensorProto, helper

    g = Net()
    x, ha, hb = g.input("x", [1, 1, I]), g.input("hA", [1, 1, H]), g.input("h0b", [1, H])
    W, R = g.const(f32(pc.W4[None])), g.const(f32(pc.R4[None]))
    g.nodes.append(helper.make_node("RNN", [x, W, R, "", "", ha], ["", "yh"], hidden_size=H, name="rnn_op"))
    u = g.op("Reshape", ["yh", g.const(np.array([1, H], np.int64))], out="u")
    rnn_step(g, u, hb, W=f32(np.eye(H)), out="hn")
    model = g.model(["hn", "yh"])
    model.graph.value_info.append(helper.make_tensor_value_info("u", TensorProto.FLOAT, [1, H]))
    (m,) = scan(model, ["hA", "h0b"])[0].matches
    assert (m.kind, m.h_in, m.x, m.h_out) == ("RNN", "h0b", ("u",), "hn")
    np.testing.assert_allclose(m.weights.W[0], np.eye(H), atol=1e-5)


def test_zeros_carried_into_a_loop_are_not_followed_into_its_body():
    # z (zeros, read as a matmul's data: a zero start) is also carried into a Loop: the body input it becomes is
    # not looked for as a state (only state inputs are followed into Loop bodies)
    from onnx import TensorProto, helper

    body_inputs = [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c_in", TensorProto.BOOL, []), helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [1, H])]
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Neg", ["s_in"], ["s_out"])],
        "body", body_inputs,
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [1, H])],
    )
    g = Net()
    x = g.input("x", [1, I])
    g.input("cond", [], TensorProto.BOOL)
    z = g.const(np.zeros((1, H), np.float32), "z")
    g.nodes.append(helper.make_node("Loop", [g.const(np.array(2, np.int64)), "cond", z], ["carried"], body=body, name="loop"))
    h = rnn_step(g, x, z, out="hn")
    s, index = scan(g.model([h, "carried"]))
    assert [(m.h_source, m.h_out) for m in s.matches] == [("z", "hn")] and s.is_zero_start(index.root, "z")
    assert s.loop_carried == {}


def test_a_scan_whose_scan_input_count_is_negative_carries_only_its_inputs():
    # num_scan_inputs -1 would make two carried values of one input: the one input there is carries h0
    from onnx import TensorProto, helper

    body = helper.make_graph(
        [helper.make_node("Neg", ["s_in"], ["s_out"])], "body", [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [1, H])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [1, H])],
    )
    g = Net()
    g.input("h0", [1, H])
    g.nodes.append(helper.make_node("Scan", ["h0"], ["h1"], body=body, num_scan_inputs=-1, name="scan"))
    s, index = scan(g.model(["h1"]), ["h0"])
    assert [(sc.path, name, node.name, slot) for (sc, name), (node, _, slot) in s.loop_carried.items()] == [(("scan.body",), "s_in", "scan", 0)]


def test_a_state_reshaped_to_the_shape_of_an_initializer_is_a_view_of_it():
    # Shape(like) of a [1, H] initializer folds to [1, H] from its dims: Reshape(h, Shape(like)) only relabels h
    g = Net()
    x, h = g.input("x", [1, I]), g.input("h0", [H])
    like = g.const(np.ones((1, H), np.float32), "like")
    hv = g.op("Reshape", [h, g.op("Shape", [like])], out="hv")
    rnn_step(g, x, hv, out="hn")
    (m,) = scan(g.model(["hn"]), ["h0"])[0].matches
    assert (m.h_in, m.h_source) == ("hv", "h0")
    np.testing.assert_allclose(m.weights.R[0], pc.R4, atol=1e-5)


def test_a_node_of_the_state_cone_with_an_omitted_output_is_scanned_past():
    # Dropout(h0) -> (hd, ""): the mask output is omitted; the cone goes on through hd, and the cell on h0 is found
    from onnx import helper

    g = Net()
    x, h = g.input("x", [1, I]), g.input("h0", [1, H])
    g.nodes.append(helper.make_node("Dropout", [h], ["hd", ""], name="dropout"))
    rnn_step(g, x, h, out="hn")
    (m,) = scan(g.model(["hn", "hd"]), ["h0"])[0].matches
    assert (m.kind, m.h_in, m.h_out) == ("RNN", "h0", "hn")


def test_a_scan_whose_body_takes_fewer_inputs_than_it_carries_is_scanned_past():
    # Scan(h0) with no scan inputs carries h0, but its body declares no input to carry it into: nothing is mapped,
    # and the cell beside it is found (the ONNX checker fixes a Scan body's outputs, not its inputs)
    from onnx import TensorProto, helper

    body = helper.make_graph([helper.make_node("Constant", [], ["s_out"], value=helper.make_tensor("v", TensorProto.FLOAT, [1, H], [0.0] * H))], "body", [], [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [1, H])])
    g = Net()
    x, h = g.input("x", [1, I]), g.input("h0", [1, H])
    g.nodes.append(helper.make_node("Scan", [h], ["h1"], body=body, num_scan_inputs=0, name="scan"))
    rnn_step(g, x, h, out="hn")
    s, _ = scan(g.model(["hn", "h1"]), ["h0"])
    assert [(m.kind, m.h_in, m.h_out) for m in s.matches] == [("RNN", "h0", "hn")] and s.loop_carried == {}
