"""The printer's size limits, as numbers: a float constant of up to 16 elements (a 4x4 matrix, an initial state) is
written in full and one of 17 as its type only (weights: read back as zeros); any constant of up to 4096 elements
(indices, shapes) is written and one of 4097 is not written at all.  The numbers are spelled out here, not read from
the module: a change to either is a change of the format that this test must be edited for."""

from __future__ import annotations

import numpy as np

from rnnir.ir.builder import Builder
from rnnir.ir.nodes import Recurrent, Value
from rnnir.ir.text import IRParseError, parse_program, print_program


def _value_program(arr: np.ndarray) -> str:
    b = Builder("limits")
    out = b.output("y", str(arr.dtype), arr.shape)
    b.store(b.compute("Neg", [b.const("k", arr)]), out, "value")
    return print_program(b.build())


def _attribute_program(arr: np.ndarray) -> str:
    b = Builder("limits")
    x = b.input("x", "float32", (1,))
    b.store(b.compute("ConstantOfShape", [x], attributes={"value": arr}), b.output("y", "float32", (1,)), "value")
    return print_program(b.build())


def _slot_program(arr: np.ndarray) -> str:
    b = Builder("limits")
    h = b.slot("h", str(arr.dtype), arr.shape, init=arr)
    b.store(b.compute("Neg", [b.load(h)]), h)
    return print_program(b.build())


def test_float_constants_print_in_full_up_to_16_elements_and_as_their_type_above():
    for n, shape in ((16, (4, 4)), (17, (17,))):
        arr = (np.arange(1, n + 1, dtype=np.float32) / 4).reshape(shape)
        dims = ",".join(map(str, shape))
        for text, got in ((_value_program(arr), lambda p: p.externals["k"].const),
                          (_slot_program(arr), lambda p: p.slot("h").init.value),
                          (_attribute_program(arr), lambda p: p.nodes[0].attributes["value"])):
            back = np.asarray(got(parse_program(text)))
            assert back.shape == shape and back.dtype == np.float32
            if n == 16:
                assert f"dense<float32[{dims}] [0.25, 0.5, 0.75, 1.0, " in text
                np.testing.assert_array_equal(back, arr)
            else:
                assert f"dense<float32[{dims}] ...>" in text and "0.25" not in text
                np.testing.assert_array_equal(back, np.zeros(shape, np.float32))


def test_integer_constants_print_up_to_4096_elements_and_not_at_all_above():
    for n in (4096, 4097):
        arr = np.arange(1, n + 1, dtype=np.int64)
        text = _value_program(arr)
        const = parse_program(text).externals["k"].const
        attr = parse_program(_attribute_program(arr)).nodes[0].attributes.get("value")
        if n == 4096:
            assert f"value %k : int64[{n}] = dense<int64[{n}] [1, 2, 3, " in text
            np.testing.assert_array_equal(const, arr)
            np.testing.assert_array_equal(attr, arr)
        else:
            assert "value %k : int64[4097]\n" in text + "\n" and "dense<" not in text
            assert const is None and attr is None


def test_hidden_size_is_written_even_when_zero_so_the_reader_refuses_it():
    """Zero-valued recurrence fields are defaults and stay unwritten, but hidden_size has no default: a zero one is
    written, and the reader says it is wrong instead of reading no hidden size."""
    b = Builder("zero")
    x, w, r = (b.input(n, "float32", (1, 1, 1)) for n in ("x", "W", "R"))
    prog = b.program
    prog.add(Recurrent(kind="RNN", hidden_size=0, inputs=[x, w, r], outputs=[Value(name="y"), Value(name="hn")]))
    text = print_program(prog)
    assert "recurrent.RNN<direction='forward', hidden_size=0>" in text
    try:
        parse_program(text)
    except IRParseError as exc:
        assert "hidden_size must be a positive whole number, not '0'" in str(exc)
    else:
        raise AssertionError("a zero hidden_size was read back")
