"""What an IR-text program may write inside a line, checked value by value (rnnir/ir/lexer.py): a type's
quantization ``q(scale=[...], zero=[...], axis=N)``, a node's ``loc{...}``, a recurrence's fields.

Every malformed value is an IRParseError that names its line, its column and what was wrong; every well-formed
value -- those exactly at each bound included -- parses to what it says and prints back as itself
(``print(parse(print(p))) == print(p)``).  Each table is one test function with a loop (the mutation tool runs one
parametrization of a test), and every case changes one line of the same small valid program.
"""

from __future__ import annotations

from typing import Any

from rnnir.ir import Recurrent
from rnnir.ir.attributes import QuantParams
from tests.support.ir_text import parse_error, read_back

BASE = """program @p {
  slot @h0 : float32[1,1,4] init=zeros
  output hn : float32[1,1,4]
  value %x : float32[T,1,3]
  value %W : float32[1,12,3]
  value %R : float32[1,12,4]
  %h0 = load_slot<@h0, copy>() loc{'id': 'load0'}
  %y, %hn = recurrent.GRU<direction='forward', hidden_size=4>(%x, %W, %R, _, _, %h0) loc{'id': 'gru0', 'node': 'gru'}
  %s1 = store<@h0, token>(%hn) loc{'id': 'store0'}
  %s2 = store<out:hn, value>(%hn) loc{'id': 'store1'}
  return<by runtime>(%s1, %s2) loc{'id': 'ret0'}
}"""
X_LINE = "  value %x : float32[T,1,3]"
GRU_ATTRS = "direction='forward', hidden_size=4"


def with_line(old: str, new: str) -> str:
    assert BASE.count(old) == 1, old
    return BASE.replace(old, new)


def with_node(line: str) -> str:
    """BASE with one more node line after the load (line 8 of the text)."""
    return with_line("  %y, %hn", line + "\n  %y, %hn")


def test_a_quantization_parses_to_its_lists_and_axis_at_every_edge():
    cases = [
        ("q(scale=[0.5, 0.25], zero=[0, 1], axis=1)", QuantParams((0.5, 0.25), (0, 1), 1)),
        ("q(scale=[2], zero=[-3], axis=None)", QuantParams((2,), (-3,), None)),  # a whole-number scale is a number
        ("q(axis=0, zero=(7,), scale=(0.125,))", QuantParams((0.125,), (7,), 0)),  # any order, tuples
        ("q(scale=[], zero=[], axis=-1)", QuantParams((), (), -1)),
        ("q( scale = [1.5] ,zero=[0],  axis = 0 )", QuantParams((1.5,), (0,), 0)),
        ('layout="NCHW" q(scale=[0.5], zero=[0], axis=None)', QuantParams((0.5,), (0,), None)),
        ('q(scale=[0.5], zero=[0], axis=None) layout="NCHW"', QuantParams((0.5,), (0,), None)),
    ]
    for written, expected in cases:
        prog = read_back(with_line(X_LINE, f"{X_LINE} {written}"))
        t = prog.externals["x"].type
        assert t.quant == expected, written
        assert t.shape == ("T", 1, 3) and t.dtype == "float32"
        assert t.layout == ("NCHW" if "layout" in written else None), written
        # the quantization is a value of its type: a slot and an output carry one the same way
    prog = read_back(with_line("  slot @h0 : float32[1,1,4] init=zeros", "  slot @h0 : int8[1,1,4] q(scale=[0.5], zero=[3], axis=None) init=zeros"))
    assert prog.slot("h0").type.quant == QuantParams((0.5,), (3,), None)


def test_a_malformed_quantization_is_refused_at_its_line_and_column():
    write = "write q(scale=[...], zero=[...], axis=N)"
    types = "scale and zero are lists of numbers, axis a whole number or None"
    cases = [
        ("q(scale)", f"bad quantization 'scale': {write}"),
        ("q(scale=[1], zero=[0], axis=None, bits=8)", f"bad quantization 'bits=8': {write}"),
        ("q(=[1], zero=[0], axis=None)", f"bad quantization '=[1]': {write}"),
        ("q(scale=[1], scale=[1], zero=[0], axis=None)", f"bad quantization 'scale=[1]': {write}"),  # written twice
        ("q(scale=[1], zero=[0], axis=None, axis=None)", f"bad quantization 'axis=None': {write}"),
        ("q(scale=[1], zero=[0])", f"bad quantization: {write}"),
        ("q(scale=[1], axis=0)", f"bad quantization: {write}"),
        ("q(zero=[1], axis=0)", f"bad quantization: {write}"),
        ("q()", f"bad quantization: {write}"),
        ("q(scale='a', zero=[0], axis=None)", f"bad quantization: {types}"),
        ("q(scale=0.5, zero=[0], axis=None)", f"bad quantization: {types}"),
        ("q(scale=[True], zero=[0], axis=None)", f"bad quantization: {types}"),
        ("q(scale=[0.5, 'a'], zero=[0], axis=None)", f"bad quantization: {types}"),
        ("q(scale=[0.5], zero=0, axis=None)", f"bad quantization: {types}"),
        ("q(scale=[0.5], zero='0', axis=None)", f"bad quantization: {types}"),
        ("q(scale=[0.5], zero=[0, False], axis=None)", f"bad quantization: {types}"),
        ("q(scale=[0.5], zero=[None], axis=None)", f"bad quantization: {types}"),
        ("q(scale=[0.5], zero=[0], axis=1.0)", f"bad quantization: {types}"),
        ("q(scale=[0.5], zero=[0], axis=True)", f"bad quantization: {types}"),
        ("q(scale=[0.5], zero=[0], axis='0')", f"bad quantization: {types}"),
        ("q(scale=[0.5], zero=[0], axis=[0])", f"bad quantization: {types}"),
        ("q(scale=[0.5, zero=[0], axis=None)", "bad attribute value '[0.5, zero=[0], axis=None'"),  # the bracket left open
    ]
    for written, message in cases:
        line = f"{X_LINE} {written}"
        assert parse_error(with_line(X_LINE, line)) == (4, message, len(line) + 1), written
        # in a node's result types, followed by another type: the column is the one after the ``)``
        node = f"  %a, %b = Split(%x) loc{{'id': 's0'}} : float32[2] {written}, float32[2]"
        assert parse_error(with_node(node)) == (8, message, node.index(", float32[2]") + 1), written
    # an unclosed q( names the bracket it misses
    assert parse_error(with_line(X_LINE, f"{X_LINE} q(scale=[1], zero=[0], axis=None"))[1] == "no matching ')'"


def test_a_loc_parses_to_the_node_id_and_provenance():
    cases = [
        ("loc{'id': 'r1'}", "r1", None, "r", ()),
        ("loc{'id': 'r1', 'node': 'onnx::Relu_3', 'value': 'v.out', 'branch': ('then_branch', 'else_branch')}",
         "r1", "onnx::Relu_3", "v.out", ("then_branch", "else_branch")),
        ("loc{'branch': ['body'], 'id': 'r2'}", "r2", None, "r", ("body",)),  # a list of names is a branch too
        ("loc{'id': 'r3', 'branch': ()}", "r3", None, "r", ()),
        ("loc{'id': 'r4', 'value': ''}", "r4", None, "", ()),
    ]
    for written, ident, node, value, branch in cases:
        prog = read_back(with_node(f"  %r = Relu(%x) {written}"))
        relu = next(n for n in prog.nodes if getattr(n, "op", None) == "Relu")
        assert relu.id == ident, written
        assert (relu.provenance.node, relu.provenance.value, relu.provenance.branch) == (node, value, branch), written


def test_a_malformed_loc_is_refused_at_its_line_and_column():
    cases = [
        ("loc{1, 2}", "loc must be a dict such as loc{'id': 'n0', 'node': 'lstm'}"),
        ("loc{'id'}", "loc must be a dict such as loc{'id': 'n0', 'node': 'lstm'}"),
        ("loc{1: 'r1'}", "loc must be a dict such as loc{'id': 'n0', 'node': 'lstm'}"),
        ("loc{'id': 'r1', 2: 'x'}", "loc must be a dict such as loc{'id': 'n0', 'node': 'lstm'}"),
        ("loc{'id': 'r1', ('node',): 'x'}", "loc must be a dict such as loc{'id': 'n0', 'node': 'lstm'}"),
        ("loc{'id': 'r1', 'ids': 'x'}", "unknown loc key 'ids'; loc takes id, node, value, branch"),
        ("loc{'id': 'r1', 'branches': ('a',)}", "unknown loc key 'branches'; loc takes id, node, value, branch"),
        ("loc{'id': 5}", "loc id must be a string, not '5'"),
        ("loc{'id': ('r1',)}", "loc id must be a string, not \"('r1',)\""),
        ("loc{'id': 'r1', 'node': None}", "loc node must be a string, not 'None'"),
        ("loc{'id': 'r1', 'node': ['n']}", "loc node must be a string, not \"['n']\""),
        ("loc{'id': 'r1', 'value': 1.5}", "loc value must be a string, not '1.5'"),
        ("loc{'id': 'r1', 'branch': 'then_branch'}", "loc branch must be a tuple of branch names, not \"'then_branch'\""),
        ("loc{'id': 'r1', 'branch': ('a', 1)}", "loc branch must be a tuple of branch names, not \"('a', 1)\""),
        ("loc{'id': 'r1', 'branch': (1,)}", "loc branch must be a tuple of branch names, not '(1,)'"),
        ("loc{'id': 'r1', 'branch': 3}", "loc branch must be a tuple of branch names, not '3'"),
        ("loc{'id': 'r1', 'branch': {'a': 'b'}}", "loc branch must be a tuple of branch names, not \"{'a': 'b'}\""),
    ]
    for written, message in cases:
        line = f"  %r = Relu(%x) {written} : float32[T,1,3]"
        assert parse_error(with_node(line)) == (8, message, line.index(" : float32") + 1), written


def _gru(prog: Any) -> Recurrent:
    return next(n for n in prog.nodes if isinstance(n, Recurrent))


def test_a_recurrence_takes_every_field_value_onnx_allows_at_its_bounds():
    cases: list[tuple[str, str, dict[str, Any]]] = [
        ("GRU", "direction='forward', hidden_size=1", {"direction": "forward", "hidden_size": 1}),
        ("GRU", "direction='reverse', hidden_size=4", {"direction": "reverse"}),
        ("GRU", "direction='bidirectional', hidden_size=4", {"direction": "bidirectional"}),
        ("GRU", "hidden_size=4", {"direction": "forward"}),  # no direction is forward
        ("GRU", "hidden_size=None", {"hidden_size": None}),
        ("GRU", "direction='forward', hidden_size=4, layout=0, linear_before_reset=0", {"layout": 0, "linear_before_reset": 0}),
        ("GRU", "direction='forward', hidden_size=4, layout=1, linear_before_reset=1", {"layout": 1, "linear_before_reset": 1}),
        ("LSTM", "direction='forward', hidden_size=4, input_forget=1", {"input_forget": 1}),
        ("LSTM", "direction='forward', hidden_size=4, input_forget=0", {"input_forget": 0}),
        ("GRU", "direction='forward', hidden_size=4, clip=0.5", {"clip": 0.5}),
        ("GRU", "direction='forward', hidden_size=4, clip=3", {"clip": 3}),
        ("GRU", "direction='forward', hidden_size=4, clip=None", {"clip": None}),
        ("GRU", "direction='forward', hidden_size=4, activations=('Sigmoid', 'Tanh')", {"activations": ("Sigmoid", "Tanh")}),
        ("GRU", "direction='forward', hidden_size=4, activations=['Sigmoid', 'Tanh']", {"activations": ("Sigmoid", "Tanh")}),
        ("GRU", "direction='forward', hidden_size=4, activations=()", {"activations": ()}),
        ("GRU", "direction='forward', hidden_size=4, activation_alpha=(0.5, 2)", {"activation_alpha": (0.5, 2)}),
        ("GRU", "direction='forward', hidden_size=4, activation_alpha=[1.5]", {"activation_alpha": (1.5,)}),
        ("GRU", "direction='forward', hidden_size=4, activation_beta=(0.5, 2)", {"activation_beta": (0.5, 2)}),
        ("GRU", "direction='forward', hidden_size=4, activation_beta=[0]", {"activation_beta": (0,)}),
        ("GRU", "direction='forward', hidden_size=4, activations=None, activation_alpha=None, activation_beta=None",
         {"activations": None, "activation_alpha": None, "activation_beta": None}),
        ("GRU", "direction=None, hidden_size=4", {}),  # refused below: a direction is a word, never None
    ]
    for kind, attrs, expected in cases:
        text = with_line(f"recurrent.GRU<{GRU_ATTRS}>", f"recurrent.{kind}<{attrs}>")
        if attrs.startswith("direction=None"):
            assert parse_error(text)[1] == "direction 'None' is not one of forward, reverse, bidirectional"
            continue
        node = _gru(read_back(text))
        assert node.kind == kind
        for field, value in expected.items():
            assert getattr(node, field) == value, (attrs, field)
            assert type(getattr(node, field)) is type(value), (attrs, field)


def test_a_recurrence_field_of_the_wrong_type_or_out_of_bounds_is_refused():
    positive = "must be a positive whole number"
    cases = [
        ("direction='sideways'", "direction \"'sideways'\" is not one of forward, reverse, bidirectional"),
        ("direction='Forward'", "direction \"'Forward'\" is not one of forward, reverse, bidirectional"),
        ("direction=1", "direction '1' is not one of forward, reverse, bidirectional"),
        ("hidden_size=0", f"hidden_size {positive}, not '0'"),
        ("hidden_size=-1", f"hidden_size {positive}, not '-1'"),
        ("hidden_size=True", f"hidden_size {positive}, not 'True'"),
        ("hidden_size=4.0", f"hidden_size {positive}, not '4.0'"),
        ("hidden_size='4'", f"hidden_size {positive}, not \"'4'\""),
        ("hidden_size=4, layout=2", "layout must be 0 or 1, not '2'"),
        ("hidden_size=4, layout=-1", "layout must be 0 or 1, not '-1'"),
        ("hidden_size=4, layout=True", "layout must be 0 or 1, not 'True'"),
        ("hidden_size=4, layout=1.0", "layout must be 0 or 1, not '1.0'"),
        ("hidden_size=4, linear_before_reset=2", "linear_before_reset must be 0 or 1, not '2'"),
        ("hidden_size=4, linear_before_reset=-1", "linear_before_reset must be 0 or 1, not '-1'"),
        ("hidden_size=4, linear_before_reset=True", "linear_before_reset must be 0 or 1, not 'True'"),
        ("hidden_size=4, linear_before_reset=0.0", "linear_before_reset must be 0 or 1, not '0.0'"),
        ("hidden_size=4, input_forget=2", "input_forget must be 0 or 1, not '2'"),
        ("hidden_size=4, input_forget=-1", "input_forget must be 0 or 1, not '-1'"),
        ("hidden_size=4, input_forget=False", "input_forget must be 0 or 1, not 'False'"),
        ("hidden_size=4, input_forget=1.0", "input_forget must be 0 or 1, not '1.0'"),
        ("hidden_size=4, clip=True", "clip must be a number, not 'True'"),
        ("hidden_size=4, clip='1'", "clip must be a number, not \"'1'\""),
        ("hidden_size=4, clip=(1,)", "clip must be a number, not '(1,)'"),
        ("hidden_size=4, activations='Tanh'", "activations must be a list of activation names, not \"'Tanh'\""),
        ("hidden_size=4, activations=('Tanh', 1)", "activations must be a list of activation names, not \"('Tanh', 1)\""),
        ("hidden_size=4, activations=(1,)", "activations must be a list of activation names, not '(1,)'"),
        ("hidden_size=4, activation_alpha=0.5", "activation_alpha must be a list of numbers, not '0.5'"),
        ("hidden_size=4, activation_alpha=(0.5, True)", "activation_alpha must be a list of numbers, not '(0.5, True)'"),
        ("hidden_size=4, activation_alpha=('a',)", "activation_alpha must be a list of numbers, not \"('a',)\""),
        ("hidden_size=4, activation_beta=1", "activation_beta must be a list of numbers, not '1'"),
        ("hidden_size=4, activation_beta=(False,)", "activation_beta must be a list of numbers, not '(False,)'"),
        ("hidden_size=4, activation_beta=(1, 'b')", "activation_beta must be a list of numbers, not \"(1, 'b')\""),
    ]
    for attrs, message in cases:
        text = with_line(f"<{GRU_ATTRS}>", f"<{attrs}>")
        line = text.splitlines()[7]
        assert parse_error(text) == (8, message, len(line) + 1), attrs
