"""The tokens of a line of IR text (rnnir/ir/lexer.py): names, strings, bracketed text, attribute lists, tensor
types and ``dense<...>`` constants.  What is well formed reads as what it says and prints back as itself; what is
not is an IRParseError at its line and column with a message naming the token.  Tables are one test function
each, with a loop (the mutation tool runs one parametrization of a test).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rnnir.ir import Compute
from rnnir.ir.text import parse_program, print_program
from tests.support.ir_text import parse_error, read_back

HEAD = """program @p {
  slot @h : float32[2] init=zeros
  output y : float32[2]
  value %x : float32[2]
"""
TAIL = """  %s = store<out:y, value>(%x) loc{'id': 'st'}
  return<by runtime>(%s) loc{'id': 'ret'}
}"""
LINE = 5  # the line of the first line a case adds


def program(*lines: str) -> str:
    return HEAD + "".join(f"  {line}\n" for line in lines) + TAIL


def node_of(line: str) -> Compute:
    prog = read_back(program(line))
    return next(n for n in prog.nodes if isinstance(n, Compute) and n.id == "u")


def same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and bool((a == b).all())
    return type(a) is type(b) and a == b


def test_attribute_lists_split_at_top_level_commas_and_brackets_close_past_quoted_text():
    cases: list[tuple[str, dict[str, Any]]] = [
        ("Foo<a='x>y', b=(1, (2, 3)), c=[4, 5]>", {"a": "x>y", "b": (1, (2, 3)), "c": [4, 5]}),
        ("Foo<a='x\\'>,y'>", {"a": "x'>,y"}),  # an escaped quote does not end the string
        ('Foo<a="q\\",r", b=1>', {"a": 'q",r', "b": 1}),
        ("Foo<a={'k': '}'}, b='<'>", {"a": {"k": "}"}, "b": "<"}),
        ("Foo<a=1,>", {"a": 1}),  # a trailing comma adds no item
        ("Foo< a = 1 ,  b = 'two' >", {"a": 1, "b": "two"}),
        ("Foo<w=dense<int64[2] [1, 2]>, n=3>", {"w": np.array([1, 2], dtype=np.int64), "n": 3}),  # a < inside <...>
        ("Foo<w= dense<int32[2,1] [[7], [8]]>>", {"w": np.array([[7], [8]], dtype=np.int32)}),
        ('Foo<"odd key"=1>', {"odd key": 1}),
        ("Foo<>", {}),
    ]
    for attrs, expected in cases:
        node = node_of(f"%u = {attrs}(%x) loc{{'id': 'u'}}")
        assert node.attributes.keys() == expected.keys(), attrs
        assert all(same(node.attributes[k], v) for k, v in expected.items()), (attrs, node.attributes)
    # a loc's braces close past a brace inside a string
    assert node_of("%u = Relu(%x) loc{'id': 'u', 'node': 'a}b'}").provenance.node == "a}b"


def test_names_and_strings_plain_or_quoted():
    node = node_of('%"onnx::Gru_7 out" = "my.Op"(%x) loc{\'id\': \'u\'}')
    assert node.op == "Op" and node.domain == "my" and node.outputs[0].name == "onnx::Gru_7 out"
    node = node_of("%v.1_a = Relu(%x) loc{'id': 'u'}")
    assert node.outputs[0].name == "v.1_a"
    prog = parse_program(program().replace("init=zeros", 'init=zeros address "mem:\\"h\\"" loc "h_in"'))
    assert prog.slot("h").address == 'mem:"h"' and prog.slot("h").provenance.value == "h_in"
    bad = [
        ("%1v = Relu(%x) loc{'id': 'u'}", "expected a name", 2),
        ("%u = Relu(%\"x\\q\") loc{'id': 'u'}", "bad quoted name '\"x\\\\q\"'", len("%u = Relu(%\"x\\q\")") + 1),
        ("%u = Relu(%x, 7) loc{'id': 'u'}", "bad operand '7'", len("%u = Relu(%x, 7)") + 1),
        ("%u = Relu(%nowhere) loc{'id': 'u'}", "%nowhere is used before it is defined", len("%u = Relu(%nowhere)") + 1),
        ("%u = Relu(%x loc{'id': 'u'}", "no matching ')'", len("%u = Relu(") + 1),  # the column after the bracket
        ("%u = Foo<a=1(%x) loc{'id': 'u'}", "no matching '>'", len("%u = Foo<") + 1),
        ("%u = Relu(%x) loc{'id': 'u'", "no matching '}'", len("%u = Relu(%x) loc{") + 1),
        ("%u = Relu(%x) loc{'id': 'u} : float32[2]", "no matching '}'", len("%u = Relu(%x) loc{") + 1),
        ("%u = Relu(%x) loc('id', 'u')", "expected '{'", len("%u = Relu(%x) loc") + 1),
    ]
    for line, message, column in bad:
        assert parse_error(program(line)) == (LINE, message, column + 2), line  # + the line's two spaces
    slot_line = "  slot @h : float32[2] init=zeros"
    # a string that is a number, unclosed or missing: the column is where it should start
    for tail, at in ((" address 5", " address "), (' address "mem', " address "), (" loc", " loc")):
        column = len(slot_line + at) + 1
        assert parse_error(program().replace(slot_line, slot_line + tail)) == (2, "expected a string", column), tail


def test_a_tensor_type_takes_whole_numbers_unknowns_and_names_as_dims():
    cases: list[tuple[str, str | None, tuple[Any, ...] | None]] = [
        ("?[*]", None, None),
        ("float32[*]", "float32", None),
        ("int64[]", "int64", ()),
        ("float32[?, -1, 0, 123456789012345678]", "float32", (None, -1, 0, 123456789012345678)),  # 18 digits: the most a dim has
        ('float16[N.k, _b, "n m", "3"]', "float16", ("N.k", "_b", "n m", "3")),
    ]
    for written, dtype, shape in cases:
        t = node_of(f"%u = Relu(%x) loc{{'id': 'u'}} : {written}").outputs[0].type
        assert (t.dtype, t.shape) == (dtype, shape), written
    bad = [
        ("float32[1234567890123456789]", "bad dim '1234567890123456789': a whole number, ?, or a name"),
        ("float32[2, 3x]", "bad dim '3x': a whole number, ?, or a name"),
        ("float32[2, +3]", "bad dim '+3': a whole number, ?, or a name"),
        ("float32[?x]", "bad dim '?x': a whole number, ?, or a name"),
        ('float32["a\\q"]', "bad quoted name '\"a\\\\q\"'"),
    ]
    for written, message in bad:
        line = f"%u = Relu(%x) loc{{'id': 'u'}} : {written}"
        assert parse_error(program(line)) == (LINE, message, len(line) + 3), written
    for written in ("[2]", "float32", "float32 [2]", "float-32[2]"):
        line = f"%u = Relu(%x) loc{{'id': 'u'}} : {written}"
        assert parse_error(program(line)) == (LINE, "expected a tensor type", len("%u = Relu(%x) loc{'id': 'u'} : ") + 3), written


def test_a_dense_constant_reads_every_numeric_dtype_and_refuses_the_rest():
    cases: list[tuple[str, np.ndarray]] = [
        ("dense<int64[] 5>", np.array(5, dtype=np.int64)),
        ("dense<bool[2] [True, False]>", np.array([True, False])),
        ("dense<uint8[2] [0, 255]>", np.array([0, 255], dtype=np.uint8)),
        ("dense<int8[2] [-128, 127]>", np.array([-128, 127], dtype=np.int8)),
        ("dense<complex64[1] [(1+2j)]>", np.array([1 + 2j], dtype=np.complex64)),
        ("dense<float32[0] []>", np.zeros(0, dtype=np.float32)),
        ("dense<float64[2,2] [0.5, 1.5, 2.5, 3.5]>", np.array([[0.5, 1.5], [2.5, 3.5]])),
        ("dense<float32[2,3] ...>", np.zeros((2, 3), dtype=np.float32)),
        ("  dense<int16[1] [3]>  ", np.array([3], dtype=np.int16)),
    ]
    for written, expected in cases:
        assert same(node_of(f"%u = Foo<w={written}>(%x) loc{{'id': 'u'}}").attributes["w"], expected), written
    prog = parse_program(program().replace("init=zeros", "init=constant dense<float32[2] [0.25, 0.5]>"))
    assert same(prog.slot("h").init.value, np.array([0.25, 0.5], dtype=np.float32))
    bad = [
        ("dense<bogus[1] ...>", "bad dense constant: 'bogus' is not a numeric dtype (float32, int64, bool, ...)"),  # no dtype at all
        ("dense<float33[1] ...>", "bad dense constant: 'float33' is not a numeric dtype (float32, int64, bool, ...)"),
        ("dense<datetime64[1] ...>", "bad dense constant: 'datetime64' is not a numeric dtype (float32, int64, bool, ...)"),
        ("dense<U3[1] ['a']>", "bad dense constant: 'U3' is not a numeric dtype (float32, int64, bool, ...)"),
        ("dense<V8[1] ...>", "bad dense constant: 'V8' is not a numeric dtype (float32, int64, bool, ...)"),
        ("dense<float32 [1]>", "bad dense constant 'dense<float32 [1]>'"),
        ("dense<float32[2x] [1]>", "bad dense constant 'dense<float32[2x] [1]>'"),
        ("dense<uint8[1] [256]>", "bad dense constant ('Python integer 256 out of bounds for uint8')"),
        ("dense<float32[3] [1, 2]>", "bad dense constant ('cannot reshape array of size 2 into shape (3,)')"),
        ("dense<int64[2] [1, 'a']>", "bad dense constant (\"invalid literal for int() with base 10: 'a'\")"),
        ("dense<int64[1] [1,]]>", "bad attribute value '[1,]]'"),
    ]
    for written, message in bad:
        line = f"value %c : float32[2] = {written}"
        assert parse_error(program(line)) == (LINE, message, len(line) + 3), written


def test_a_name_or_string_that_ends_in_a_backslash_prints_and_parses_back():
    # an escaped backslash before the closing quote ends the string: 'C:\\' is a whole string, and so is "x\\"
    # (it used to be read as an escaped quote, so the comma after it was taken for part of the name or string)
    from rnnir.ir.builder import Builder

    b = Builder("p")
    x, z = b.input("x\\"), b.input("z")
    v = b.compute("Foo", [x, z], attributes={"a": "C:\\", "b": "\\\\", "c": 'q"\\'})
    b.store(v, b.output("y"), "value")
    printed = print_program(b.build())
    prog = parse_program(printed)
    assert print_program(prog) == printed
    foo = next(n for n in prog.nodes if isinstance(n, Compute) and n.op == "Foo")
    assert foo.attributes == {"a": "C:\\", "b": "\\\\", "c": 'q"\\'}
    assert [v.name for v in foo.inputs if v is not None] == ["x\\", "z"]


def test_a_token_missing_at_the_end_of_a_line_or_malformed_inside_one_is_named():
    slot_line = "  slot @h : float32[2] init=zeros"
    cases = [  # (the line, the edited line, its number, the message, the text before the column named)
        (slot_line, "  slot @", 2, "expected a name", "  slot @"),
        (slot_line, "  slot @h : float32[2] init=", 2, "expected a word", "  slot @h : float32[2] init="),
        (slot_line, "  slot @h : float32[2] init=(zeros)", 2, "expected a word", "  slot @h : float32[2] init="),
        (slot_line, "  slot @h :", 2, "expected a tensor type", "  slot @h :"),
        ("  output y : float32[2]", "  output ", 3, "expected a name", "  output "),
        ("  output y : float32[2]", "  output y float32[2]", 3, "expected ':'", "  output y "),
    ]
    for old, new, lineno, message, before in cases:
        assert parse_error(program().replace(old, new)) == (lineno, message, len(before) + 1), new
    # inside a type's brackets a < is text like any other (only <...> nests it): a bad dim, not an unclosed bracket
    line = "%u = Relu(%x) loc{'id': 'u'} : float32[2<3]"
    assert parse_error(program(line)) == (LINE, "bad dim '2<3': a whole number, ?, or a name", len(line) + 3)
    # a shape too long to be a number is refused by name
    digits = "1" * 5000
    line = f"value %c : float32[2] = dense<int8[{digits}] ...>"
    lineno, message, column = parse_error(program(line))
    assert (lineno, column) == (LINE, len(line) + 3)
    assert message == f"bad dense constant: shape [{'1' * 120!r}... (5000 characters)] is not a list of whole numbers"


def test_spaces_around_tokens_and_at_the_ends_of_lines_are_not_text():
    text = program("%u = Foo<a=1,b=2,c=[3,4]>(%x)   loc{'id':'u'}   ", "   ", "%v = Relu( %u ) loc{ 'id': 'v' } :   float32[ 2 ]  ")
    text = text.replace("  slot @h : float32[2] init=zeros", "  slot @h :float32[2]  init=zeros   \n\n")
    text = text.replace("  output y :", "  output   y   :").replace("program @p {", "program   @p   {  ")
    prog = parse_program(text)
    foo = next(n for n in prog.nodes if isinstance(n, Compute) and n.op == "Foo")
    assert foo.attributes == {"a": 1, "b": 2, "c": [3, 4]}
    relu = next(n for n in prog.nodes if isinstance(n, Compute) and n.op == "Relu")
    assert relu.id == "v" and list(relu.inputs) == [foo.outputs[0]] and relu.outputs[0].type.shape == (2,)
    assert prog.slot("h").type.shape == (2,) and prog.name == "p" and [o.name for o in prog.outputs] == ["y"]
