"""Zero terms lowering proves (rnnir.lower.identities), read through rnnir.load: the external value a term becomes.

An exporter keeps an input alive with ``state + Cast(sr * 0)``.  ``0 * y`` is exactly zero when ``y`` is finite: an
integer ``y`` always, a float ``y`` only when it is a constant without inf or NaN.  A proven term becomes a constant
external of zeros with the broadcast shape and the Cast's dtype; anything unproven stays an unknown external (no
constant).  Each row is hand-checkable; the near misses sit at every limit (16 constant elements read, 4,096 zero
elements made, 8 ops walked back).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import rnnir

H, I, T = 2, 3, 2
F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(term_nodes: list, inputs: list, inits: list, term_info: list | None = None) -> object:
    """GRU over x from h0; hn = Yh + term, where ``term_nodes`` compute ``term``."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((1, 3 * H, I)).astype(np.float32), "W"),
               numpy_helper.from_array(rng.standard_normal((1, 3 * H, H)).astype(np.float32), "R")]
    nodes = [helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y", "Yh"], hidden_size=H, name="gru"),
             *term_nodes, helper.make_node("Add", ["Yh", "term"], ["hn"], name="plus_term")]
    graph = helper.make_graph(
        nodes, "zero_term",
        [helper.make_tensor_value_info("x", F32, [T, 1, I]), helper.make_tensor_value_info("h0", F32, [1, 1, H]), *inputs],
        [helper.make_tensor_value_info("Y", F32, [T, 1, 1, H]), helper.make_tensor_value_info("hn", F32, [1, 1, H])],
        [*weights, *inits], value_info=term_info or [],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _term(m: object) -> tuple[object, tuple | None, str | None]:
    """(the term's constant or None, its shape, its dtype) as lowering made its external value."""
    v = rnnir.load(m).externals["term"]
    ints = v.const_ints()  # read first: a proven zero answers without making an array
    if ints is not None:
        assert ints[1] == [0] * int(np.prod(ints[0])), ints
    return v.const, v.type.shape, v.type.dtype


def _arr(name: str, value: object, dtype: object) -> object:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def _inp(name: str, shape: list, dtype: int = I64) -> object:
    return helper.make_tensor_value_info(name, dtype, shape)


def _mul_cast(a: str, b: str) -> list:
    return [helper.make_node("Mul", [a, b], ["prod"]), helper.make_node("Cast", ["prod"], ["term"], to=F32)]


def _proven(m: object, shape: tuple, dtype: str = "float32") -> None:
    const, got_shape, got_dtype = _term(m)
    assert const is not None, "not proven"
    assert const.shape == shape and const.dtype == np.dtype(dtype) and not const.any()
    assert got_shape == shape and got_dtype == dtype


def _unproven(m: object) -> None:
    assert _term(m)[0] is None


def test_a_product_with_zero_of_a_finite_factor_is_proven_zero_of_the_broadcast_shape():
    # an integer input times an integer zero: finite whatever is fed (silero op15's Cast(sr * 0))
    _proven(_model(_mul_cast("sr", "z"), [_inp("sr", [])], [_arr("z", 0, np.int64)]), ())
    _proven(_model(_mul_cast("z", "sr"), [_inp("sr", [])], [_arr("z", 0, np.int64)]), ())  # either side
    _proven(_model(_mul_cast("sr", "z"), [_inp("sr", [2, 1])], [_arr("z", [0, 0, 0], np.int64)]), (2, 3))
    _proven(_model(_mul_cast("sr", "z"), [_inp("sr", [3])], [_arr("z", np.zeros((2, 1)), np.int64)]), (2, 3))
    _proven(_model(_mul_cast("sr", "z"), [_inp("sr", [0, 1])], [_arr("z", [0, 0], np.int64)]), (0, 2))  # an empty dim stays empty
    _proven(_model(_mul_cast("sr", "z"), [_inp("sr", [1, 1])], [_arr("z", np.zeros((1, 1)), np.int64)]), (1, 1))
    _proven(_model(_mul_cast("sr", "z"), [_inp("sr", [2, 3])], [_arr("z", [[0, 0, 0]], np.int64)]), (2, 3))
    # the zero from a Constant node; a finite float constant factor
    const_zero = helper.make_node("Constant", [], ["z"], value=_arr("zv", 0, np.int64))
    _proven(_model([const_zero, *_mul_cast("sr", "z")], [_inp("sr", [4])], []), (4,))
    _proven(_model(_mul_cast("f", "z"), [], [_arr("f", [1.5, -2.0], np.float32), _arr("z", 0.0, np.float32)]), (2,))
    # the product itself (no Cast) in the factor's dtype
    mul = [helper.make_node("Mul", ["sr", "z"], ["term"])]
    _proven(_model(mul, [_inp("sr", [1, 1, H])], [_arr("z", 0, np.int64)]), (1, 1, H), "int64")


def test_a_product_that_may_not_be_zero_stays_unknown():
    _unproven(_model(_mul_cast("y", "z"), [_inp("y", [], F32)], [_arr("z", 0.0, np.float32)]))  # a float input may be inf
    for bad in (np.inf, -np.inf, np.nan):
        _unproven(_model(_mul_cast("f", "z"), [], [_arr("f", [1.0, bad], np.float32), _arr("z", 0.0, np.float32)]))
    _unproven(_model(_mul_cast("sr", "z"), [_inp("sr", [])], [_arr("z", 1, np.int64)]))  # times one
    _unproven(_model(_mul_cast("sr", "z"), [_inp("sr", [])], [_arr("z", [0, 1], np.int64)]))  # one element not zero
    _unproven(_model(_mul_cast("sr", "z"), [_inp("sr", [2])], [_arr("z", [0, 0, 0], np.int64)]))  # shapes do not broadcast
    _unproven(_model(_mul_cast("sr", "z"), [_inp("sr", ["N"])], [_arr("z", 0, np.int64)]))  # shape unknown
    _unproven(_model(_mul_cast("sr", "w"), [_inp("sr", []), _inp("w", [])], []))  # neither factor a constant
    # Cast of a nonzero constant; Cast of something unknown
    _unproven(_model([helper.make_node("Cast", ["c"], ["term"], to=F32)], [], [_arr("c", [0, 3], np.int64)]))
    _unproven(_model([helper.make_node("Cast", ["sr"], ["term"], to=F32)], [_inp("sr", [])], []))


def test_a_cast_of_zeros_is_zeros_of_the_cast_dtype():
    _proven(_model([helper.make_node("Cast", ["c"], ["term"], to=F32)], [], [_arr("c", [[0, 0]], np.int64)]), (1, 2))
    # the dtype from the Cast's `to` when no value_info gives the result's type, and from value_info when one does
    to16 = [helper.make_node("Cast", ["c"], ["term"], to=TensorProto.FLOAT16)]
    _proven(_model(to16, [], [_arr("c", [0, 0], np.int64)]), (2,), "float16")
    info = [helper.make_tensor_value_info("term", TensorProto.FLOAT16, [2])]
    _proven(_model(to16, [], [_arr("c", [0, 0], np.int64)], info), (2,), "float16")


def test_the_limits_of_what_is_read_and_made():
    # a zero factor of 16 elements is read, one of 17 is not
    _proven(_model(_mul_cast("sr", "z"), [_inp("sr", [])], [_arr("z", np.zeros(16), np.int64)]), (16,))
    _unproven(_model(_mul_cast("sr", "z"), [_inp("sr", [])], [_arr("z", np.zeros(17), np.int64)]))
    # the same for a float factor on the other side (read by numpy)
    _proven(_model(_mul_cast("z", "f"), [], [_arr("f", np.ones(16), np.float32), _arr("z", 0, np.int64)]), (16,))
    _unproven(_model(_mul_cast("z", "f"), [], [_arr("f", np.ones(17), np.float32), _arr("z", 0, np.int64)]))
    # a zero term of 4,096 elements is made into a constant, one of 4,097 is not
    _proven(_model(_mul_cast("sr", "z"), [_inp("sr", [4096])], [_arr("z", 0, np.int64)]), (4096,))
    _unproven(_model(_mul_cast("sr", "z"), [_inp("sr", [4097])], [_arr("z", 0, np.int64)]))


def _cast_chain(k: int) -> object:
    """term = Cast(Cast(... Cast(sr * 0))) with k Casts."""
    names = ["prod", *[f"c{i}" for i in range(1, k)], "term"]
    nodes = [helper.make_node("Mul", ["sr", "z"], ["prod"])]
    nodes += [helper.make_node("Cast", [names[i]], [names[i + 1]], to=F32 if i == k - 1 else I64) for i in range(k)]
    return _model(nodes, [_inp("sr", [])], [_arr("z", 0, np.int64)])


def test_a_zero_term_is_followed_back_eight_ops_and_no_further():
    _proven(_cast_chain(1), ())
    _proven(_cast_chain(8), ())  # Mul at depth 8
    _unproven(_cast_chain(9))


def test_only_a_product_is_a_zero_term():
    for op in ("Add", "Sub", "Max"):
        _unproven(_model([helper.make_node(op, ["sr", "z"], ["prod"]), helper.make_node("Cast", ["prod"], ["term"], to=F32)],
                         [_inp("sr", [])], [_arr("z", 0, np.int64)]))
