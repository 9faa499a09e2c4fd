"""One fast test of the external value a zero term becomes (rnnir.lower.values.external_value), so that a change to
which definitions are tried as zero terms is caught by the test the mutation tool runs first: the Cast and the
Mul of an exporter's ``state + Cast(sr * 0)`` are proven zeros, the same shape made by an Add is not. The models
and the hand-checked expectations are those of test_identities_zero_terms."""

from __future__ import annotations

import numpy as np
from onnx import helper

from tests.lower.test_identities_zero_terms import F32, _arr, _inp, _model, _mul_cast, _proven, _unproven


def test_the_cast_and_the_mul_of_a_zero_term_are_constants_and_an_add_is_not():
    _proven(_model(_mul_cast("sr", "z"), [_inp("sr", [])], [_arr("z", 0, np.int64)]), ())  # Cast(Mul(sr, 0))
    _proven(_model([helper.make_node("Mul", ["sr", "z"], ["term"])], [_inp("sr", [2])], [_arr("z", 0, np.int64)]), (2,), "int64")
    add = [helper.make_node("Add", ["sr", "z"], ["term"])]
    _unproven(_model(add, [_inp("sr", [2], F32)], [_arr("z", 0.0, np.float32)]))
