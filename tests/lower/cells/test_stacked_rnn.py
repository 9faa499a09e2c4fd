"""An RNN layer whose only non-state input is none: the layer below's new state is its x.

A plain-op RNN cell must read an input besides its state (``act(W h)`` alone is an MLP layer on the state). The
second layer of a stack reads only state-carrying values, its own h and the first layer's new h, so it was refused
and a correct two-layer stack got SD007 and SD003. Now the new state of a cell found already may serve as the x;
two states that read only each other's loaded values (no cell below) still are no RNN. The PyTorch export of two
stacked nn.RNNCell is tests/data/torch_cells/rnn_cell_stacked (test_cells_torch.py, the mutant catalogue).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import passes

I, H = 3, 4
RNG_SEED = 0


def two_layers(*, x_of_second: str = "h1n", swap_outputs: bool = False, with_x: bool = True) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """h1n = tanh(x W1 + h1 R1 + b1); h2n = tanh(<x_of_second> W2 + h2 R2 + b2). Returns the model and its weights."""
    rng = np.random.default_rng(RNG_SEED)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    weights: dict[str, np.ndarray] = {}

    def const(name: str, a: np.ndarray) -> str:
        weights[name] = a.astype(np.float32)
        inits.append(numpy_helper.from_array(weights[name], name))
        return name

    def layer(k: int, x: str, h: str, width: int) -> str:
        W, R, b = const(f"W{k}", rng.standard_normal((width, H)) * 0.5), const(f"R{k}", rng.standard_normal((H, H)) * 0.5), const(f"b{k}", rng.standard_normal(H) * 0.3)
        nodes.extend(
            [
                helper.make_node("MatMul", [x, W], [f"xw{k}"]),
                helper.make_node("MatMul", [h, R], [f"hr{k}"]),
                helper.make_node("Add", [f"xw{k}", f"hr{k}"], [f"s{k}"]),
                helper.make_node("Add", [f"s{k}", b], [f"t{k}"]),
                helper.make_node("Tanh", [f"t{k}"], [f"L{k}"], name=f"tanh{k}"),
            ]
        )
        return f"L{k}"

    first = layer(1, "x" if with_x else "h2", "h1", I if with_x else H)
    second = layer(2, first if x_of_second == "h1n" else x_of_second, "h2", H)
    outs = (second, first) if swap_outputs else (first, second)
    nodes += [helper.make_node("Identity", [outs[0]], ["h1n"]), helper.make_node("Identity", [outs[1]], ["h2n"])]
    vi = helper.make_tensor_value_info
    inputs = [vi("x", TensorProto.FLOAT, [1, I]), vi("h1", TensorProto.FLOAT, [1, H]), vi("h2", TensorProto.FLOAT, [1, H])]
    outputs = [vi("h1n", TensorProto.FLOAT, [1, H]), vi("h2n", TensorProto.FLOAT, [1, H])]
    if not with_x:
        nodes.append(helper.make_node("Relu", ["x"], ["y"]))
        outputs.append(vi("y", TensorProto.FLOAT, [1, I]))
    m = helper.make_model(helper.make_graph(nodes, "stack", inputs, outputs, inits), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    onnx.checker.check_model(m, full_check=True)
    return m, weights


PAIRS = {"h1": "h1n", "h2": "h2n"}


def _findings(m: onnx.ModelProto) -> list[tuple[str, str | None]]:
    return sorted((d.code, d.slot) for d in passes.run(rnnir.load(m, pairs=PAIRS)))


def test_the_second_layer_of_a_stack_is_an_rnn_whose_x_is_the_first_layers_new_state():
    m, w = two_layers()
    prog = rnnir.load(m, pairs=PAIRS)
    assert _findings(m) == []  # was SD007 (error) and SD003 on this correct model
    assert sorted((r.kind, r.recognition.value) for r in prog.recurrents) == [("RNN", "cell"), ("RNN", "cell")]
    # the weights rnnir took for layer 2 are the model's own (ONNX RNN keeps W as [H, input])
    second = next(r for r in prog.recurrents if r.provenance.node == "tanh2")
    W, R = (second.port(p) for p in ("W", "R"))
    assert W is not None and R is not None
    np.testing.assert_allclose(W.const[0], w["W2"].T, atol=1e-6)
    np.testing.assert_allclose(R.const[0], w["R2"].T, atol=1e-6)


def test_onnxruntime_agrees_the_stack_carries_each_layers_own_state():
    m, w = two_layers()
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    x, h1, h2 = (rng.standard_normal((1, n)).astype(np.float32) for n in (I, H, H))
    h1n, h2n = sess.run(["h1n", "h2n"], {"x": x, "h1": h1, "h2": h2})
    by_hand_1 = np.tanh(x @ w["W1"] + h1 @ w["R1"] + w["b1"])
    np.testing.assert_allclose(h1n, by_hand_1, atol=1e-5)
    np.testing.assert_allclose(h2n, np.tanh(by_hand_1 @ w["W2"] + h2 @ w["R2"] + w["b2"]), atol=1e-5)


def test_layers_written_back_into_each_others_slots_are_sd002_for_both():
    m, _ = two_layers(swap_outputs=True)
    assert _findings(m) == [("SD002", "h1"), ("SD002", "h2")]


def test_two_states_that_read_only_each_others_loaded_value_are_no_stack():
    # h1n = tanh(h2 W1 + h1 R1 + b1), h2n = tanh(h1 W2 + h2 R2 + b2): no cell below feeds either, so neither
    # is an RNN (an MLP on the state), and nothing is claimed about them: unverified, never an error
    m, _ = two_layers(x_of_second="h1", with_x=False)
    assert _findings(m) == [("SD009", "h1"), ("SD009", "h2")]
