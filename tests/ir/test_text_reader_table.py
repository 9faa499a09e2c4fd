"""The IR text reader, row by row: every malformed item is an IRParseError naming its line and saying what is wrong;
every well-formed variant reads into the objects it says.  One test function per table (a loop, not a parametrize),
so a broken row fails whichever row a runner picks.

The near miss of every error row is test_text_errors.GOOD itself (it parses, see the first test).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from rnnir.errors import ModelError
from rnnir.ir import LoadKind, OrderingLayer, StoreResult
from rnnir.ir.nodes import Compute, Output, Slot
from rnnir.ir.pairs import PairSource
from rnnir.ir.text import IRParseError, iter_programs, parse_program, print_program, read_program
from tests.ir.test_text_errors import GOOD, edited  # the small valid program every row departs from

#: (edit: old text of GOOD, new text), the line the error must name, what it must say
ERRORS: list[tuple[tuple[str, str], int, str]] = [
    # the program line
    (("program @p {", "prog @p {"), 1, "expected 'program'"),
    (("program @p {", "program p {"), 1, "expected '@'"),
    (("program @p {", "program @p"), 1, "expected '{'"),
    (("program @p {", "\n\nprogram @p"), 3, "expected '{'"),  # blank lines before are skipped and counted
    (("\n}", ""), 0, "the program's closing '}' is missing"),
    # slots
    (("slot @h0 : float32", "slot @h0 float32"), 2, "expected ':'"),
    (("[1,1,4] init=zeros", "[1,1,4] zeros"), 2, "expected 'init='"),
    (("init=zeros", "init=ones"), 2, "slot init 'ones' is not one of zeros, constant, caller"),
    (("init=zeros", "init=zeros extra"), 2, "unexpected text after a slot"),
    (("init=zeros", "init=zeros aliases h1"), 2, "expected aliases slot:NAME or aliases out:NAME"),
    (("init=zeros", "init=zeros aliases slot:ghost"), 2, "no slot @ghost"),
    (("init=zeros", "init=zeros aliases out:ghost"), 2, "no output ghost"),
    (("init=zeros", "init=zeros address 5"), 2, "expected a string"),
    (("  output hn", "  slot @h0 : float32[1] init=caller\n  output hn"), 3, "slot @h0 is declared twice"),
    # outputs
    (("output hn : float32", "output hn float32"), 3, "expected ':'"),
    (("output hn : float32[1,1,4]", "output hn : float32[1,1,4] extra"), 3, "unexpected text after an output"),
    (("  value %x", "  output hn : float32[1]\n  value %x"), 4, "output hn is declared twice"),
    # values
    (("value %x : float32", "value %x float32"), 4, "expected ':'"),
    (("value %x : float32[T,1,3]", "value %x : float32[T,1,3] extra"), 4, "unexpected text after a value"),
    (("value %x : float32[T,1,3]", "value %x : float32[T,1,3] = 5"), 4, "expected 'dense<'"),
    (("  value %W", "  value %x : float32[2]\n  value %W"), 5, "%x is defined twice"),
    # pairs
    (("pair h0 -> hn", "pair h0 hn"), 7, "expected '->'"),
    (('"the caller feeds hn back"', '"the caller" again'), 7, "unexpected text after a pair"),
    (("pair h0 -> hn", "pair ghost -> hn"), 7, "the program has no slot @ghost"),
    (("pair h0 -> hn", "pair h0 -> ghost"), 7, "the program has no output ghost"),
    # ordering edges
    (("order %h0 -> %s1", "order %h0 %s1"), 14, "expected '->'"),
    (("order %h0 -> %s1", "order %h0 -> %s1 extra"), 14, "unexpected text after an ordering edge"),
    (("order %h0 -> %s1", "order %h0 -> %h0"), 14, "ordering edge from load0 to itself"),
    (("order %h0 -> %s1", "order #load0 -> #nobody"), 14, "no node with id 'nobody'"),
    (("order %h0 -> %s1", "order %x -> %s1"), 14, "%x is produced by no node"),
    (("order %h0 -> %s1", "order h0 -> %s1"), 14, "expected '%'"),
    (("order %h0 -> %s1", "order %h0 -> %s1\n  order %s1 -> %h0"), 15, "the ordering edges close a cycle ('load0 -> gru0 -> store0 -> load0')"),
    # nodes
    (("%s1 = store<@h0, token>(%hn)", "%s1 = store<@h0, token>(%nope)"), 11, "%nope is used before it is defined"),
    (("%s1 = store<@h0, token>(%hn)", "%s1 = store<@h0, token>"), 11, "expected '('"),
    (("%s1 = store<@h0, token>(%hn)", "%s1 = store<@h0, token>(hn)"), 11, "bad operand 'hn'"),
    (("%s1 = store<@h0, token>(%hn) loc{'id': 'store0'}", "%s1 = store<@h0, token>(%hn) loc 'store0'"), 11, "expected '{'"),
    (("loc{'id': 'store0'}", "loc{'id': 'store0'} extra"), 11, "unexpected text after the node"),
    (("%s1 = store", "%h0 = store"), 11, "%h0 is defined twice"),
    (("%s1 = store", "%s1 store"), 11, "expected a name"),  # results without '=': not results, and '%' starts no op
    (("loc{'id': 'store0'}", "loc{'id': 'load0'}"), 11, "duplicate node id 'load0'"),
    (("%y, %hn = recurrent", "%y %hn = recurrent"), 10, "expected a name"),  # results are separated by commas
    (("%y, %hn = recurrent", "%y, , %hn = recurrent"), 10, "expected a name"),  # and a hole is `_`, not nothing
    (("return<by runtime>", "= return<by runtime>"), 13, "expected a name"),  # no results, no '='
    (("init=zeros", "init=constant"), 2, "expected 'dense<'"),  # a constant init has its value
    (("%y, %hn = recurrent.GRU", "%y, %hn, %hc = recurrent.GRU"), 10, "unknown recurrent"),  # placeholder: replaced below
    (("loc{'id': 'gru0', 'node': 'gru'}", "loc{'id': 'gru0', 'node': 'gru'} : float32[1]"), 10, "1 result types for 2 results"),
    (("loc{'id': 'gru0', 'node': 'gru'}", "loc{'id': 'gru0', 'node': 'gru'} : float32[1], float32[1], float32[1]"), 10, "3 result types for 2 results"),
    # loads, stores, returns
    (("load_slot<@h0, copy>", "load_slot<@h0>"), 9, "expected <TARGET, KIND>"),
    (("load_slot<@h0, copy>", "load_slot<@h0, copy, view>"), 9, "expected <TARGET, KIND>"),
    (("load_slot<@h0, copy>", "load_slot<@ghost, copy>"), 9, "no slot @ghost"),
    (("load_slot<@h0, copy>", "load_slot<@h0, borrowed>"), 9, "load kind 'borrowed' is not one of view, copy"),
    (("store<@h0, token>", "store<h0, token>"), 11, "bad store destination 'h0'"),
    (("store<out:hn, value>", "store<out:ghost, value>"), 12, "no output ghost"),
    (("store<@h0, token>", "store<@ghost, token>"), 11, "no slot @ghost"),
    (("store<@h0, token>", "store<@h0, tokn>"), 11, "store result 'tokn' is not one of"),
    (("return<by runtime>", "return<runtime>"), 13, "return takes <by LAYER>"),
    (("return<by runtime>", "return<by runtime, by caller>"), 13, "return takes <by LAYER>"),
    (("return<by runtime>", "return"), 13, "return takes <by LAYER>"),
    (("return<by runtime>", "return<by magic>"), 13, "return layer 'magic' is not one of"),
    # recurrences and computes
    (("hidden_size=4>", "hidden_size=4, depth>"), 10, "bad attribute 'depth'"),
    (("hidden_size=4>", "hidden_size=4, depth=2>"), 10, "unknown recurrent attribute(s) 'depth'"),
    (("hidden_size=4>", "hidden_size=4, recognised_from='gru'>"), 10, "recognised_from must be a tuple of node names"),
    (("hidden_size=4>", "hidden_size=4, recognised_from=(1, 2)>"), 10, "recognised_from must be a tuple of node names"),
    (("hidden_size=4>", "hidden_size=0>"), 10, "hidden_size must be a positive whole number"),
    (("hidden_size=4>", "hidden_size=4, layout=2>"), 10, "layout must be 0 or 1"),
    (("hidden_size=4>", "hidden_size=4, recognition=3>"), 10, "recognition '3' is not one of"),
    (("recurrent.GRU", "recurrent.XLSTM"), 10, "unknown recurrence kind 'XLSTM'"),
    (("  order %h0 -> %s1", "  %z = If<region.then_branch=('a', 1)>(%x)\n  order %h0 -> %s1"), 14, "region.'then_branch' must be a tuple of branch names"),
    (("  order %h0 -> %s1", "  %z = If<region.then_branch=5>(%x)\n  order %h0 -> %s1"), 14, "region.'then_branch' must be a tuple of branch names"),
    (("  order %h0 -> %s1", "  %z = Relu<alpha 2>(%x)\n  order %h0 -> %s1"), 14, "bad attribute 'alpha 2'"),
]
ERRORS = [row for row in ERRORS if row[2] != "unknown recurrent"]


def test_the_unedited_program_reads_into_what_it_says():
    prog = parse_program(GOOD)
    assert [(s.name, s.type.shape, s.init.kind) for s in prog.slots] == [("h0", (1, 1, 4), "zeros")]
    assert [(p.input, p.output, p.source, p.reason, p.slot) for p in prog.state_pairs] == [("h0", "hn", PairSource.DECLARED, "the caller feeds hn back", prog.slot("h0"))]
    assert [n.id for n in prog.nodes] == ["load0", "gru0", "store0", "store1", "ret0"]
    assert prog.loads[0].kind is LoadKind.COPY and prog.returns[0].layer is OrderingLayer.RUNTIME
    assert [(s.dest.name, s.result) for s in prog.stores] == [("h0", StoreResult.TOKEN), ("hn", StoreResult.VALUE)]
    assert [(u, v) for u, v, d in prog.graph.edges(data=True) if d.get("kind") == "order"] == [("load0", "store0")]


def test_every_malformed_item_is_an_error_naming_its_line_and_what_is_wrong():
    wrong = []
    for (old, new), line, message in ERRORS:
        text = edited(old, new)
        try:
            parse_program(text)
        except IRParseError as exc:
            got = str(exc)
            where = f"line {line}: " if line else ""
            if message not in got or not got.startswith(where) or (line and f"line {line}: " not in got[:12]):
                wrong.append(f"{old!r} -> {new!r}: {got!r} (wanted line {line}: {message!r})")
        else:
            wrong.append(f"{old!r} -> {new!r}: parsed (wanted line {line}: {message!r})")
    assert not wrong, "\n".join(wrong)


def test_no_program_line_at_all_is_an_error():
    for text in ["", "\n\n   \n", "// only a comment\n"]:
        with pytest.raises(IRParseError, match=r"^no 'program @NAME \{' line$"):
            parse_program(text)


# -- well-formed variants --------------------------------------------------------------------------


def test_every_well_formed_variant_reads_into_the_objects_it_says():
    # blank lines and comments anywhere; a pair without a reason; a pair to <nothing>; a suggested pair of no slot
    # and no output; results with holes; several result types; `#id` and `%value` references; an alias of a later
    # slot and of an output; a slot's address and loc; a constant init; a value with a constant; a BOM
    text = "\ufeff" + """
// before
program @"my prog" {

  slot @a : float32[2] init=zeros aliases slot:b address "buf 0" loc "graph input a"   // an alias of a slot declared later
  slot @b : float32[2] init=constant dense<float32[2] [0.5, 1.5]>
  slot @c : int64[*] init=caller aliases out:o
  output o : float32[2]
  value %x : float32[2]
  value %k : int64[3] = dense<int64[3] [7, 8, 9]>
  value %f : float32[17] = dense<float32[17] ...>
  pair a -> <nothing> name
  pair b -> o dataflow "it's // no comment"
  suggested pair ghost -> nowhere position "maybe"

  %la = load_slot<@a, view>()
  _, %p, _, %q = Split<axis=0, "odd key"=[1, 2], mode='a=b'>(%la, %k, _) : float32[1], ?[*]
  %sb = store<@b, alias>(%p) loc{'id': 'st', 'value': 'b', 'branch': ('if0.then_branch',)}
  %so = store<out:o, value>(%q)
  return<by device>(%sb)
  order #st -> %so
  order %so -> #return0
}
"""
    prog = parse_program(text)
    assert prog.name == "my prog"
    a, b, c = prog.slots
    assert (a.alias_of, a.address, a.provenance.value) == (b, "buf 0", "graph input a")
    assert isinstance(c.alias_of, Output) and c.alias_of.name == "o" and c.type.shape is None and c.type.dtype == "int64"
    assert (b.address, b.provenance.value, b.init.kind) == ("slot:b", "b", "constant") and b.init.value.tolist() == [0.5, 1.5]
    assert c.init.kind == "caller" and c.init.value is None
    assert prog.externals["k"].const.tolist() == [7, 8, 9] and prog.externals["k"].const.dtype == np.int64
    assert prog.externals["f"].const.tolist() == [0.0] * 17 and prog.externals["f"].const.dtype == np.float32
    assert prog.externals["x"].const is None
    assert [(p.input, p.output, p.source, p.reason, p.slot) for p in prog.state_pairs] == [
        ("a", None, PairSource.NAME, "", a), ("b", "o", PairSource.DATAFLOW, "it's // no comment", b)]
    assert [(p.input, p.output, p.source, p.reason, p.slot) for p in prog.suggested_pairs] == [("ghost", "nowhere", PairSource.POSITION, "maybe", None)]
    load, split, sb, so, ret = prog.nodes
    assert (load.kind, load.slot, load.outputs[0].type) == (LoadKind.VIEW, a, a.type)
    assert isinstance(split, Compute) and (split.op, split.domain) == ("Split", "")
    assert dict(split.attributes) == {"axis": 0, "odd key": [1, 2], "mode": "a=b"}
    assert [None if v is None else v.name for v in split.outputs] == [None, "p", None, "q"]
    assert [None if v is None else v.name for v in split.inputs] == ["la", "k", None]
    assert [(v.type.dtype, v.type.shape) for v in split.results()] == [("float32", (1,)), (None, None)]
    assert (split.provenance.node, split.provenance.value, split.provenance.branch) == (None, None, ())
    assert (sb.id, sb.dest, sb.result, sb.provenance.value, sb.provenance.branch) == ("st", b, StoreResult.ALIAS, "b", ("if0.then_branch",))
    assert (sb.outputs[0].kind, sb.outputs[0].type) == ("alias", b.type)
    assert (so.id, so.provenance.value, so.outputs[0].kind, so.outputs[0].type) == ("store0", None, "value", prog.output("o").type)
    assert (ret.id, ret.layer, [v.name for v in ret.inputs]) == ("return0", OrderingLayer.DEVICE, ["sb"])
    orders = sorted((u, v) for u, v, d in prog.graph.edges(data=True) if d.get("kind") == "order")
    assert orders == [("st", "store0"), ("store0", "return0")]
    assert print_program(parse_program(print_program(prog))) == print_program(prog)


def test_a_node_without_a_loc_keeps_no_provenance_value_and_one_with_an_id_names_its_first_result():
    prog = parse_program(GOOD.replace(" loc{'id': 'load0'}", ""))
    assert (prog.loads[0].id, prog.loads[0].provenance.value) == ("loadslot0", None)
    assert prog.recurrents[0].provenance.value == "y"  # loc with an id: the first result names it
    assert prog.recurrents[0].provenance.node == "gru"


def test_regions_take_their_yields_in_order_after_the_condition():
    text = edited("  order %h0 -> %s1", "  value %c : bool[]\n  %a, %b = If<region.then_branch=('if0.then_branch',), region.else_branch=('if0.else_branch', 'in')>(%c, %x, %W, %R, %h0)\n  order %h0 -> %s1")
    prog = parse_program(text)
    (node,) = [n for n in prog.nodes if isinstance(n, Compute)]
    assert {r: (reg.path, [v.name for v in reg.yields]) for r, reg in node.regions.items()} == {
        "then_branch": (("if0.then_branch",), ["x", "W"]), "else_branch": (("if0.else_branch", "in"), ["R", "h0"])}
    assert dict(node.attributes) == {}


def test_recurrent_fields_read_back_as_the_recurrence_holds_them():
    text = edited("hidden_size=4>", "hidden_size=4, layout=1, activations=['Sigmoid', 'Tanh'], activation_alpha=(0.5,), clip=2.5, "
                                    "linear_before_reset=1, recognition='cell', recognised_from=['Mul_1', 'Add_2']>")
    rec = parse_program(text).recurrents[0]
    assert (rec.kind, rec.direction, rec.hidden_size, rec.layout, rec.activations, rec.activation_alpha, rec.activation_beta, rec.clip,
            rec.linear_before_reset, rec.input_forget) == ("GRU", "forward", 4, 1, ("Sigmoid", "Tanh"), (0.5,), None, 2.5, 1, 0)
    assert rec.recognition.value == "cell" and rec.recognised_from == ("Mul_1", "Add_2")


def test_a_comment_ends_the_line_except_inside_quotes_of_either_kind_with_escapes():
    text = edited('pair h0 -> hn declared "the caller feeds hn back"', 'pair h0 -> hn declared "a \\" // b" // gone')
    assert parse_program(text).state_pairs[0].reason == 'a " // b'
    text = edited("loc{'id': 'gru0', 'node': 'gru'}", "loc{'id': 'gru0', 'node': 'g//r\\'u'}  // a comment")
    assert parse_program(text).recurrents[0].provenance.node == "g//r'u"
    text = edited('pair h0 -> hn declared "the caller feeds hn back"', 'pair h0 -> hn declared "ends in \\\\" // "gone"')
    assert parse_program(text).state_pairs[0].reason == "ends in \\"  # an escaped backslash does not escape the quote
    text = edited("  order %h0 -> %s1", "  // order %h0 -> %s1")
    assert not [d for _, _, d in parse_program(text).graph.edges(data=True) if d.get("kind") == "order"]
    text = edited("program @p {", "program @p {//x")
    assert parse_program(text).name == "p"


# -- files -------------------------------------------------------------------------------------------


def test_read_program_reads_one_program_and_refuses_what_is_not_one(tmp_path):
    good = tmp_path / "good.rnnir"
    good.write_text("\ufeff" + GOOD, encoding="utf-8")
    assert [n.id for n in read_program(good).nodes] == ["load0", "gru0", "store0", "store1", "ret0"]
    assert read_program(str(good)).name == "p"

    cases = {
        "none.rnnir": ("// nothing here\n", "not one IR program: the file has no `program @NAME {` line"),
        "two.rnnir": (GOOD + "\n" + GOOD.replace("@p", "@q"), "not one IR program: the file has 2 programs (a file read as a model holds one)"),
        "latin1.rnnir": (b"program @p {\n  // caf\xe9\n}\n", "not IR text: not UTF-8 (invalid continuation byte at byte 21)"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        with pytest.raises(ModelError) as ei:
            read_program(path)
        assert message in str(ei.value) and ei.value.model == str(path), (name, str(ei.value))
        with pytest.raises(ModelError) as ei:
            read_program(path, label="the label")
        assert ei.value.model == "the label"
    with pytest.raises(ModelError, match="not a regular file") as ei:
        read_program(tmp_path)
    assert ei.value.model == str(tmp_path)

    bad = tmp_path / "bad.rnnir"
    bad.write_text(edited("init=zeros", "init=ones"))
    with pytest.raises(IRParseError, match=r"^lbl: line 2: slot init 'ones'"):
        read_program(bad, label="lbl")
    with pytest.raises(IRParseError, match=rf"^{bad}: line 2: "):
        read_program(bad)


def test_read_program_refuses_a_file_over_64_mib_before_reading_it(tmp_path):
    big = tmp_path / "big.rnnir"
    with open(big, "wb") as fh:  # sparse: nothing is written, the size alone is over the limit
        fh.truncate((64 << 20) + 1)
    with pytest.raises(ModelError, match=r"file is 67108865 bytes, over the 67108864-byte limit; IR text keeps no weights"):
        read_program(big)
    os.remove(big)


def test_iter_programs_yields_each_block_with_its_lines():
    text = "// header\nprogram @a {\n  slot @h : float32[1] init=zeros\n}\n// CHECK: X\nprogram @b {\n}\ntrailing\nprogram @c {\n  never closed"
    blocks = list(iter_programs(text))
    assert blocks == ["program @a {\n  slot @h : float32[1] init=zeros\n}", "program @b {\n}"]
    assert [parse_program(b).name for b in blocks] == ["a", "b"]


def test_slots_and_outputs_parse_into_the_types_they_say():
    prog = parse_program(edited("  output hn : float32[1,1,4]", '  output hn : float32[1,1,4]\n  output "o 2" : ?[T,"b c",?]'))
    o = prog.output("o 2")
    assert (o.type.dtype, o.type.shape) == (None, ("T", "b c", None))
    assert isinstance(prog.slot("h0"), Slot)
