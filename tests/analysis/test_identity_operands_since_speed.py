"""``x + 0``, ``x * 1`` as the tracer proves them (rnnir/analysis/tracer.py ``_identity_operands``) after the
lint-speed change, which reads a float constant's values without numpy: every kind of constant a lowering leaves
(pending float32/float64, pending integers, a numpy array), each neutral and near-neutral, judged by hand."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from rnnir.analysis.tracer import _identity_operands
from rnnir.ir.builder import Builder
from rnnir.ir.nodes import PendingConst
from rnnir.lower.tensors import small_const


def _judge(op: str, const: np.ndarray, *, pending: bool, state_first: bool = True, state_shape=(1, 4)) -> bool:
    b = Builder("p")
    x = b.input("x", shape=state_shape)
    c = b.const("c", const)
    if pending:  # as lowering leaves an initializer: values read when first asked
        p = small_const(numpy_helper.from_array(np.asarray(const), "c"))
        assert isinstance(p, PendingConst)
        c.__dict__["_const"] = p
    y = b.compute(op, [x, c] if state_first else [c, x])
    return _identity_operands(y.producer, 0 if state_first else 1)


def test_neutral_constants_of_every_kind_leave_the_state_as_it_is():
    cases = [
        # (op, constant, identity?) judged by hand
        ("Add", np.float32(0.0), True),
        ("Add", np.array([0.0], np.float32), True),
        ("Add", np.array([[0.0]], np.float64), True),
        ("Sub", np.array([0.0], np.float32), True),
        ("Mul", np.array([1.0], np.float32), True),
        ("Div", np.array([1.0], np.float64), True),
        ("Mul", np.array([1], np.int64), True),
        ("Add", np.array([0], np.int32), True),
        ("Add", np.array([0.5], np.float32), False),  # truncated to 0 as an int: must not pass
        ("Mul", np.array([1.5], np.float64), False),
        ("Mul", np.array([0.0], np.float32), False),  # x * 0 is no identity
        ("Add", np.array([1e-30], np.float32), False),
        ("Add", np.array([2], np.int64), False),
        ("Add", np.zeros((1, 4), np.float32), False),  # the proof is made for size-1 constants only
        ("Add", np.zeros((2,), np.float32), False),  # (1, 4) + (2,) does not even broadcast
        ("Add", np.zeros((1, 1, 1), np.float32), False),  # more axes than the state: the result gains one
        ("Mul", np.ones((1, 1), np.float32), True),
        ("Add", np.zeros((0,), np.float32), False),  # no values: an empty result
        ("Pow", np.array([1.0], np.float32), False),  # no neutral element listed
        ("Add", np.array([0.5], np.float16), False),  # float16: no numpy-free reading, ints() truncates 0.5 to 0
        ("Add", np.array([0.0], np.float16), True),
        ("Mul", np.array([1.5], np.float16), False),
    ]
    for op, const, expected in cases:
        for pending in (True, False):
            assert _judge(op, const, pending=pending) is expected, (op, const.dtype, const.shape, const.ravel()[:2].tolist(), pending)


def test_the_state_second_only_commutes():
    for pending in (True, False):
        assert _judge("Add", np.array([0.0], np.float32), pending=pending, state_first=False) is True
        assert _judge("Mul", np.array([1.0], np.float32), pending=pending, state_first=False) is True
        assert _judge("Sub", np.array([0.0], np.float32), pending=pending, state_first=False) is False  # 0 - x
        assert _judge("Div", np.array([1.0], np.float32), pending=pending, state_first=False) is False  # 1 / x


def test_a_state_of_unknown_rank_takes_only_a_scalar():
    b = Builder("p")
    x = b.input("x", shape=None)
    for const, expected in ((np.float32(0.0), True), (np.array([0.0], np.float32), False)):
        for pending in (True, False):
            c = b.const(f"c{len(b._names)}", const)
            if pending:
                c.__dict__["_const"] = small_const(numpy_helper.from_array(np.asarray(const), "c"))
            y = b.compute("Add", [x, c])
            assert _identity_operands(y.producer, 0) is expected, (const.shape, pending)
