"""The IR's text format: :func:`print_program` writes it (:mod:`rnnir.ir.printer`) and :func:`parse_program` reads
it back (xDSL's habit: an IR that verifies, prints *and parses*, so IR-level cases are written as text).
This module is the reader: the parser of a program's lines (a line's pieces are :mod:`rnnir.ir.lexer`'s) and
:func:`read_program`, which reads a ``.rnnir`` file as safely as a model file is read.

Version 1 of the format, one item per line inside ``program @NAME { ... }``::

    slot @state : float32[2,1,4] init=zeros                      # address "...", aliases out:NAME, loc "..."
    output stateN : float32[2,1,4]
    value %W : float32[1,16,3] = dense<float32[1,16,3] [0.5, ...]>   # a value from outside: weights, inputs
    pair state -> stateN name "naming convention"

    %y, %hn = recurrent.GRU<direction='forward', hidden_size=4>(%x, %W, %R, _, _, %h0) loc{'id': 'gru0', 'node': 'gru'}
    %store.h0 = store<@h0, token>(%hn)
    return<by runtime>(%store.h0)
    order %a -> %b                                                   # an explicit ordering edge

``//`` starts a comment to the end of the line (outside quoted names and strings).  Names that are not plain
identifiers are written as JSON strings (``%"onnx::LSTM_94"``).  Attribute values
are Python literals (``ast.literal_eval``) or ``dense<DTYPE[SHAPE] [values]>`` for arrays; float arrays larger
than :data:`ELIDED_FLOATS` (weights) print their type only, ``dense<float32[1,16,3] ...>``, and parse as zeros.
Constants larger than :data:`MAX_PRINTED_ELEMENTS` are not written (what the analyses need -- indices, shapes, small initial
states -- is small), so ``print(parse(print(p))) == print(p)`` always holds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rnnir.errors import IRError, ModelError
from rnnir.ir import digraph
from rnnir.ir.attributes import LoadKind, OrderingLayer, Provenance, SlotInit, StoreResult, TensorType
from rnnir.ir.core import Program
from rnnir.ir.lexer import (
    MAX_DENSE_ELEMENTS,
    MAX_LITERAL_CHARS,
    IRParseError,
    Scanner,
    check_loc,
    check_recurrent_fields,
    parse_dense,
    parse_enum,
    parse_type,
    parse_value,
    short,
    split_top,
    unquote,
)
from rnnir.ir.nodes import Compute, LoadSlot, Node, Output, Recurrent, Region, Return, Slot, Store, Value
from rnnir.ir.pairs import PairSource, StatePair
from rnnir.ir.printer import ELIDED_FLOATS, MAX_PRINTED_ELEMENTS, RECURRENT_FIELDS, print_program
from rnnir.ir.recurrence import Recognition
from rnnir.util.regularfile import UnreadableFile, read_regular

__all__ = ["ELIDED_FLOATS", "IR_SUFFIX", "MAX_DENSE_ELEMENTS", "MAX_IR_TEXT_BYTES", "MAX_LITERAL_CHARS", "MAX_PRINTED_ELEMENTS", "IRParseError",
           "iter_programs", "parse_program", "print_program", "read_program"]

#: the file suffix of IR text: ``rnnir.load``, ``rnnir lint`` and ``rnnir show`` read such files as programs
IR_SUFFIX = ".rnnir"
MAX_IR_TEXT_BYTES = 64 << 20  # IR text keeps no weights: a larger file is not IR text rnnir wrote or anyone typed


class _Parser:
    def __init__(self, text: str, trace: bool = True) -> None:
        self.trace = trace
        self.lines = [_without_comment(line) for line in text.splitlines()]
        self.program: Program | None = None
        self.values: dict[str, Value] = {}
        self.producers: dict[str, Node] = {}
        self.by_id: dict[str, Node] = {}
        self.aliases: list[tuple[Slot, str, str, int]] = []  # resolved at the end: a slot may alias a later one
        self.pair_lines: list[tuple[StatePair, int, bool]] = []  # checked at the end: a pair line may come first
        self.order_lines: dict[tuple[str, str], int] = {}

    def value(self, name: str, sc: Scanner) -> Value:
        v = self.values.get(name)
        if v is None:
            raise sc.error(f"%{name} is used before it is defined")
        return v

    def operands(self, sc: Scanner) -> list[Value | None]:
        sc.expect("(")
        inner = sc.until_balanced(")")
        out: list[Value | None] = []
        for item in split_top(inner):
            if item == "_":
                out.append(None)
            elif item.startswith("%"):
                out.append(self.value(unquote(item[1:], sc), sc))
            else:
                raise sc.error(f"bad operand {short(item)}")
        return out

    def results(self, sc: Scanner) -> list[str | None]:
        names: list[str | None] = []
        save = sc.pos
        while True:
            if sc.eat("_"):
                names.append(None)
            elif sc.eat("%"):
                names.append(sc.name())
            else:
                break
            if not sc.eat(","):
                break
        if names and sc.eat("="):
            return names
        sc.pos = save
        return []

    def parse(self) -> Program:
        lines = iter(enumerate(self.lines, 1))
        for lineno, line in lines:
            sc = Scanner(line, lineno)
            if sc.at_end():
                continue
            sc.expect("program")
            sc.expect("@")
            name = sc.name()
            sc.expect("{")
            self.program = Program(name)
            break
        if self.program is None:
            raise IRParseError("no 'program @NAME {' line")
        for lineno, line in lines:
            sc = Scanner(line, lineno)
            if sc.at_end():
                continue
            if sc.eat("}"):
                self._finish()
                return self.program
            self.item(sc)
        raise IRParseError("the program's closing '}' is missing")

    def item(self, sc: Scanner) -> None:
        prog = self.program
        assert prog is not None
        if sc.eat("slot @"):
            name = sc.name()
            sc.expect(":")
            t = parse_type(sc)
            sc.expect("init=")
            word = sc.word()
            if word not in ("zeros", "constant", "caller"):
                raise sc.error(f"slot init {short(word)} is not one of zeros, constant, caller")
            init = SlotInit(word) if word != "constant" else SlotInit("constant", parse_dense(self._dense_text(sc), sc))
            slot = Slot(name=name, type=t, init=init, provenance=Provenance(value=name))
            while not sc.at_end():
                if sc.eat("address"):
                    slot.address = sc.string()
                elif sc.eat("aliases"):
                    kind = "slot" if sc.eat("slot:") else "out" if sc.eat("out:") else None
                    if kind is None:
                        raise sc.error("expected aliases slot:NAME or aliases out:NAME")
                    self.aliases.append((slot, kind, sc.name(), sc.lineno))
                elif sc.eat("loc"):
                    slot.provenance = Provenance(value=sc.string())
                else:
                    raise sc.error("unexpected text after a slot")
            try:
                prog.add_slot(slot)
            except IRError:
                raise sc.error(f"slot @{slot.name} is declared twice") from None
            return
        if sc.eat("output "):
            name = sc.name()
            sc.expect(":")
            t = parse_type(sc)
            if not sc.at_end():
                raise sc.error("unexpected text after an output")
            try:
                prog.output(name)
            except KeyError:
                prog.add_output(Output(name, t))
                return
            raise sc.error(f"output {name} is declared twice")
        if sc.eat("value %"):
            name = sc.name()
            sc.expect(":")
            t = parse_type(sc)
            const = parse_dense(self._dense_text(sc), sc) if sc.eat("=") else None
            if not sc.at_end():
                raise sc.error("unexpected text after a value")
            if name in self.values:
                raise sc.error(f"%{name} is defined twice")
            self.values[name] = prog.external(name, t, const)
            return
        suggested = sc.eat("suggested pair ")
        if suggested or sc.eat("pair "):
            inp = sc.name()
            sc.expect("->")
            out = None if sc.eat("<nothing>") else sc.name()
            source = parse_enum(PairSource, sc.word(), sc, "pair source")
            reason = sc.string() if not sc.at_end() else ""
            if not sc.at_end():
                raise sc.error("unexpected text after a pair")
            pair = StatePair(inp, out, source, reason)
            if suggested:
                prog.suggested_pairs = (*prog.suggested_pairs, pair)
            else:
                prog.state_pairs = (*prog.state_pairs, pair)
            self.pair_lines.append((pair, sc.lineno, suggested))
            return
        if sc.eat("order "):
            a = self._node_by_ref(sc)
            sc.expect("->")
            b = self._node_by_ref(sc)
            if not sc.at_end():
                raise sc.error("unexpected text after an ordering edge")
            if a is b:
                raise sc.error(f"ordering edge from {a.id} to itself")
            prog.add_order(a, b)
            self.order_lines.setdefault((a.id, b.id), sc.lineno)  # a cycle is looked for once, at the end
            return
        self.node(sc)

    def _dense_text(self, sc: Scanner) -> str:
        sc.skip()
        start = sc.pos
        sc.expect("dense<")
        sc.until_balanced(">")
        return sc.text[start : sc.pos]

    def _node_by_ref(self, sc: Scanner) -> Node:
        if sc.eat("#"):
            ident = sc.name()
            node = self.by_id.get(ident)
            if node is None:
                raise sc.error(f"no node with id {ident!r}")
            return node
        sc.expect("%")
        name = sc.name()
        producer = self.producers.get(name)
        if producer is None:
            raise sc.error(f"%{name} is produced by no node")
        return producer

    def node(self, sc: Scanner) -> None:
        prog = self.program
        assert prog is not None
        names = self.results(sc)
        sc.skip()
        op = sc.name()
        attrs_text = sc.until_balanced(">") if sc.eat("<") else ""
        inputs = self.operands(sc)
        loc: dict[str, Any] = {}
        if sc.eat("loc"):
            sc.expect("{")
            loc = check_loc(parse_value("{" + sc.until_balanced("}") + "}", sc), sc)
        types: list[TensorType] = []
        if sc.eat(":"):
            types.append(parse_type(sc))
            while sc.eat(","):
                types.append(parse_type(sc))
        if not sc.at_end():
            raise sc.error("unexpected text after the node")
        first = next((n for n in names if n is not None), None)
        prov = Provenance(node=loc.get("node"), value=loc.get("value", first if "id" in loc else None), branch=tuple(loc.get("branch", ())))
        outputs: list[Value | None] = []
        for n in names:
            if n is None:
                outputs.append(None)
                continue
            if n in self.values:
                raise sc.error(f"%{n} is defined twice")
            v = Value(name=n)
            self.values[n] = v
            outputs.append(v)
        results = [v for v in outputs if v is not None]
        if types and len(types) != len(results):
            raise sc.error(f"{len(types)} result types for {len(results)} results")
        for v, t in zip(results, types):
            v.type = t
        node = self._make(op, attrs_text, inputs, outputs, prov, sc)
        node.id = loc.get("id", "")
        try:
            prog.add(node)
        except IRError as exc:
            raise sc.error(str(exc)) from None
        self.by_id[node.id] = node
        for v in node.results():
            self.producers[v.name] = node
            if isinstance(node, Store) and node.dest is not None:
                v.type = node.dest.type
                v.kind = node.result.value

    def _make(self, op: str, attrs_text: str, inputs: list[Value | None], outputs: list[Value | None], prov: Provenance, sc: Scanner) -> Node:
        prog = self.program
        assert prog is not None
        items = split_top(attrs_text)
        if op == "load_slot":
            slot_name, kind = self._two(items, sc)
            slot = self._slot(slot_name.lstrip("@"), sc)
            for v in outputs:
                if v is not None:
                    v.type = slot.type
            return LoadSlot(inputs=inputs, outputs=outputs, provenance=prov, slot=slot, kind=parse_enum(LoadKind, kind, sc, "load kind"))
        if op == "store":
            dest_text, result = self._two(items, sc)
            dest: Slot | Output
            if dest_text.startswith("@"):
                dest = self._slot(dest_text[1:], sc)
            elif dest_text.startswith("out:"):
                dest = self._output(dest_text[4:], sc)
            else:
                raise sc.error(f"bad store destination {short(dest_text)}")
            return Store(inputs=inputs, outputs=outputs, provenance=prov, dest=dest, result=parse_enum(StoreResult, result, sc, "store result"))
        if op == "return":
            if len(items) != 1 or not items[0].startswith("by "):
                raise sc.error("return takes <by LAYER>")
            return Return(inputs=inputs, outputs=outputs, provenance=prov, layer=parse_enum(OrderingLayer, items[0][3:].strip(), sc, "return layer"))
        attrs: dict[str, Any] = {}
        for item in items:
            if "=" not in item:
                raise sc.error(f"bad attribute {short(item)}")
            key, raw = item.split("=", 1)
            attrs[unquote(key.strip(), sc)] = parse_value(raw, sc)
        if op.startswith("recurrent."):
            kind = op[len("recurrent.") :]
            fields: dict[str, Any] = {}
            for f in RECURRENT_FIELDS:
                if f in attrs:
                    val = attrs.pop(f)
                    fields[f] = tuple(val) if isinstance(val, list) else val
            recognition_word = attrs.pop("recognition", "op")
            recognition = parse_enum(Recognition, recognition_word if isinstance(recognition_word, str) else repr(recognition_word), sc, "recognition")
            recognised_from = attrs.pop("recognised_from", ())
            if not isinstance(recognised_from, (tuple, list)) or not all(isinstance(n, str) for n in recognised_from):
                raise sc.error("recognised_from must be a tuple of node names")
            recognised_from = tuple(recognised_from)
            if attrs:
                raise sc.error(f"unknown recurrent attribute(s) {short(', '.join(map(str, attrs)))}")
            check_recurrent_fields(fields, sc)
            try:
                return Recurrent(inputs=inputs, outputs=outputs, provenance=prov, kind=kind, recognition=recognition,
                                 recognised_from=recognised_from, **fields)
            except (IRError, TypeError) as exc:
                raise sc.error(str(exc)) from None
        regions = {k[len("region.") :]: attrs.pop(k) for k in [k for k in attrs if k.startswith("region.")]}
        for rname, path in regions.items():
            if not isinstance(path, (tuple, list)) or not all(isinstance(p, str) for p in path):
                raise sc.error(f"region.{short(rname)} must be a tuple of branch names")
        domain, _, name = op.rpartition(".")
        node = Compute(inputs=inputs, outputs=outputs, provenance=prov, op=name, domain=domain, attributes=attrs)
        if regions:
            n = len(outputs)
            node.regions = {
                r: Region(r, tuple(path), yields=inputs[1 + k * n : 1 + (k + 1) * n]) for k, (r, path) in enumerate(regions.items())
            }
        return node

    def _two(self, items: list[str], sc: Scanner) -> tuple[str, str]:
        if len(items) != 2:
            raise sc.error("expected <TARGET, KIND>")
        return items[0], items[1]

    def _slot(self, name: str, sc: Scanner) -> Slot:
        assert self.program is not None
        name = json.loads(name) if name.startswith('"') else name
        try:
            return self.program.slot(name)
        except KeyError:
            raise sc.error(f"no slot @{name}") from None

    def _output(self, name: str, sc: Scanner) -> Output:
        assert self.program is not None
        name = json.loads(name) if name.startswith('"') else name
        try:
            return self.program.output(name)
        except KeyError:
            raise sc.error(f"no output {name}") from None

    def _finish(self) -> None:
        prog = self.program
        assert prog is not None
        for slot, kind, target, lineno in self.aliases:
            sc = Scanner("", lineno)
            slot.alias_of = self._slot(target, sc) if kind == "slot" else self._output(target, sc)
        if self.order_lines and not digraph.is_directed_acyclic_graph(prog.graph):
            cycle = digraph.find_cycle(prog.graph)
            lineno = min((self.order_lines[e] for e in cycle if e in self.order_lines), default=0)
            path = " -> ".join([str(cycle[0][0]), *(str(v) for _, v in cycle)])
            raise Scanner("", lineno).error(f"the ordering edges close a cycle ({short(path)})")
        outputs = {o.name for o in prog.outputs}
        for pair, lineno, suggested in self.pair_lines:
            sc = Scanner("", lineno)
            try:
                pair.slot = prog.slot(pair.input)
            except KeyError:
                pair.slot = None
                if not suggested:  # a declared pair of no slot checks nothing: never a silent "verified"
                    raise sc.error(f"pair {pair.input} -> {pair.output}: the program has no slot @{pair.input}") from None
            if pair.output is not None and pair.output not in outputs and not suggested:
                raise sc.error(f"pair {pair.input} -> {pair.output}: the program has no output {pair.output}")
        if self.trace:
            from rnnir.slices import analyse_state

            analyse_state(prog)



def _without_comment(line: str) -> str:
    """``line`` up to a ``//`` comment; a ``//`` inside a quoted name or string is text, not a comment."""
    quote = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1  # an escaped character, e.g. \" inside a JSON string
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif line.startswith("//", i):
            return line[:i].rstrip()
        i += 1
    return line


def parse_program(text: str, *, trace: bool = True) -> Program:
    """Read IR text (format version 1) into a :class:`Program`; its state pairs' slices are traced unless
    ``trace=False`` (a reader that wants only the program's structure, such as its stores)."""
    return _Parser(text.removeprefix("\ufeff"), trace).parse()  # a byte-order mark, as some editors write, is no text


def read_program(path: str | os.PathLike[str], *, label: str | None = None) -> Program:
    """The one program of an IR text file (``.rnnir``), read as safely as a model file is.

    Raises :class:`rnnir.ModelError` for a file that cannot be read (a FIFO, a device, too large, not UTF-8)
    or that holds no program or several, and :class:`IRParseError` (naming the line) for text that does not parse.
    """
    label = label or str(path)
    try:
        data = read_regular(Path(path), MAX_IR_TEXT_BYTES, limit_hint="IR text keeps no weights",
                            regular_only="only regular files are read as programs")
    except UnreadableFile as exc:
        raise ModelError(str(exc), model=label) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelError(f"not IR text: not UTF-8 ({exc.reason} at byte {exc.start})", model=label) from None
    text = text.removeprefix("\ufeff")
    blocks = sum(1 for line in text.splitlines() if line.startswith("program "))
    if blocks != 1:
        what = "no `program @NAME {` line" if blocks == 0 else f"{blocks} programs (a file read as a model holds one)"
        raise ModelError(f"not one IR program: the file has {what}", model=label)
    try:
        return parse_program(text)
    except IRParseError as exc:
        raise IRParseError(f"{label}: {exc}") from None


def iter_programs(text: str) -> Iterator[str]:
    """The ``program @... { ... }`` blocks of a file that holds several (filecheck-style test files)."""
    block: list[str] = []
    for line in text.splitlines():
        if line.startswith("program "):
            block = [line]
        elif block:
            block.append(line)
            if line.startswith("}"):
                yield "\n".join(block)
                block = []
