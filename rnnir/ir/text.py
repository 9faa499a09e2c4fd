"""The IR's text format: :func:`print_program` writes it and :func:`parse_program` reads it back (xDSL's habit:
an IR that verifies, prints *and parses*, so IR-level cases are written as text).

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

import ast
import dataclasses
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rnnir.errors import IRError
from rnnir.ir import digraph
from rnnir.ir.core import (
    Compute,
    LoadKind,
    LoadSlot,
    Node,
    OrderingLayer,
    Output,
    Program,
    Provenance,
    QuantParams,
    Recurrent,
    Region,
    Return,
    Slot,
    SlotInit,
    Store,
    StoreResult,
    TensorType,
    Value,
)
from rnnir.ir.pairs import PairSource, StatePair
from rnnir.ir.recurrence import Recognition

__all__ = ["IR_SUFFIX", "MAX_IR_TEXT_BYTES", "MAX_PRINTED_ELEMENTS", "IRParseError", "parse_program", "print_program", "read_program"]

#: the file suffix of IR text: ``rnnir.load``, ``rnnir lint`` and ``rnnir show`` read such files as programs
IR_SUFFIX = ".rnnir"
MAX_IR_TEXT_BYTES = 64 << 20  # IR text keeps no weights: a larger file is not IR text rnnir wrote or anyone typed

MAX_PRINTED_ELEMENTS = 4096  # the lowering keeps constants up to this size (indices, shapes, initial states)
ELIDED_FLOATS = 16  # float constants larger than this print as ``dense<float32[4,8] ...>`` and parse as zeros

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_EXCERPT_CHARS = 120  # of a line quoted in an error message
#: the most elements a ``dense<...>`` constant may have (an elided one, ``...``, is allocated as zeros)
MAX_DENSE_ELEMENTS = 1 << 27
#: the longest attribute value read as a Python literal: ``ast.literal_eval`` takes some 500 bytes of memory per
#: character (2 MB of text took 973 MB); longer lists of plain numbers are read as JSON, in a few bytes each
MAX_LITERAL_CHARS = 1 << 16
_DENSE_KINDS = "biufc"  # numbers and booleans: what the printer writes
_DIRECTIONS = ("forward", "reverse", "bidirectional")
_RECURRENT_FIELDS = ("direction", "hidden_size", "layout", "activations", "activation_alpha", "activation_beta", "clip",
                     "linear_before_reset", "input_forget")


class IRParseError(IRError):
    """IR text that does not follow the format; the message names the line."""


# -- printing --------------------------------------------------------------------------------------


def _name(text: str) -> str:
    return text if _IDENT.match(text) else json.dumps(text)


def _dim(d: int | str | None) -> str:
    if d is None:
        return "?"
    if isinstance(d, int):
        return str(d)
    return d if _IDENT.match(d) else json.dumps(d)


def _type(t: TensorType) -> str:
    text = (t.dtype or "?") + ("[*]" if t.shape is None else "[" + ",".join(_dim(d) for d in t.shape) + "]")
    if t.layout:
        text += f" layout={json.dumps(t.layout)}"
    if t.quant is not None:
        text += f" q(scale={list(t.quant.scale)!r}, zero={list(t.quant.zero_point)!r}, axis={t.quant.axis!r})"
    return text


def _dense(arr: np.ndarray) -> str:
    a = np.asarray(arr)
    shape = ",".join(str(d) for d in a.shape)
    if a.dtype.kind in "fc" and a.size > ELIDED_FLOATS:
        return f"dense<{a.dtype}[{shape}] ...>"  # weights: the analyses read indices and shapes, never weights
    values = [x.item() if hasattr(x, "item") else x for x in a.ravel()]
    return f"dense<{a.dtype}[{shape}] {values!r}>"


def _literal(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return _dense(v)
    if isinstance(v, np.generic):
        return repr(v.item())
    if isinstance(v, tuple):
        return repr(tuple(_plain(x) for x in v))
    if isinstance(v, list):
        return repr([_plain(x) for x in v])
    return repr(v)


def _plain(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def _init(init: SlotInit) -> str:
    if init.kind == "constant" and init.value is not None:
        return "constant " + _dense(np.asarray(init.value))
    return init.kind


def _operand(v: Value | None) -> str:
    return "_" if v is None else "%" + _name(v.name)


def _loc(node: Node) -> str:
    p = node.provenance
    loc: dict[str, Any] = {"id": node.id}
    if p.node:
        loc["node"] = p.node
    first = next(node.results(), None)
    if p.value and (first is None or p.value != first.name):
        loc["value"] = p.value
    if p.branch:
        loc["branch"] = tuple(p.branch)
    return f" loc{loc!r}"


def _attrs(node: Node) -> str:
    if isinstance(node, LoadSlot):
        return f"<@{_name(node.slot.name if node.slot else '?')}, {node.kind.value}>"
    if isinstance(node, Store):
        dest = "?" if node.dest is None else (f"@{_name(node.dest.name)}" if isinstance(node.dest, Slot) else f"out:{_name(node.dest.name)}")
        return f"<{dest}, {node.result.value}>"
    if isinstance(node, Return):
        return f"<by {node.layer.value}>"
    items: list[str] = []
    if isinstance(node, Recurrent):
        for f in _RECURRENT_FIELDS:
            v = getattr(node, f)
            if v is not None and (v != 0 or f == "hidden_size"):
                items.append(f"{f}={_literal(v)}")
        if node.recognition is not Recognition.OP:
            items.append(f"recognition={node.recognition.value!r}")
        if node.recognised_from:
            items.append(f"recognised_from={_literal(tuple(node.recognised_from))}")
    elif isinstance(node, Compute):
        for k, v in sorted(node.attributes.items()):
            if isinstance(v, bytes):
                continue
            if isinstance(v, np.ndarray) and v.size > MAX_PRINTED_ELEMENTS:
                continue
            items.append(f"{_name(k)}={_literal(v)}")
        for rname, region in node.regions.items():
            items.append(f"region.{rname}={tuple(region.path)!r}")
    return "<" + ", ".join(items) + ">" if items else ""


def _opname(node: Node) -> str:
    if isinstance(node, Compute):
        return _name(node.op) if not node.domain else _name(f"{node.domain}.{node.op}")
    return node.opname


def _node_line(node: Node) -> str:
    outs = ", ".join(_operand(v) for v in node.outputs)
    lhs = f"{outs} = " if node.outputs else ""
    ins = ", ".join(_operand(v) for v in node.inputs)
    results = list(node.results())
    known = any(v.type.dtype or v.type.shape is not None for v in results)
    typed = ", ".join(_type(v.type) for v in results) if known and not isinstance(node, (LoadSlot, Store)) else ""
    return f"{lhs}{_opname(node)}{_attrs(node)}({ins}){_loc(node)}" + (f" : {typed}" if typed else "")


def print_program(program: Program) -> str:
    """The program as IR text (format version 1); :func:`parse_program` reads it back."""
    lines = [f"program @{_name(program.name)} {{"]
    for s in program.slots:
        extra = ""
        if s.address != f"slot:{s.name}":
            extra += f" address {json.dumps(s.address)}"
        if s.alias_of is not None:
            extra += f" aliases {'slot' if isinstance(s.alias_of, Slot) else 'out'}:{_name(s.alias_of.name)}"
        if s.provenance.value and s.provenance.value != s.name:
            extra += f" loc {json.dumps(s.provenance.value)}"
        lines.append(f"  slot @{_name(s.name)} : {_type(s.type)} init={_init(s.init)}{extra}")
    for o in program.outputs:
        lines.append(f"  output {_name(o.name)} : {_type(o.type)}")
    used = [v for v in program.externals.values() if v.uses]
    for v in used:
        const = ""
        if v.const is not None and np.asarray(v.const).size <= MAX_PRINTED_ELEMENTS:
            const = " = " + _dense(np.asarray(v.const))
        lines.append(f"  value %{_name(v.name)} : {_type(v.type)}{const}")
    for kind, pairs in (("pair", program.state_pairs), ("suggested pair", program.suggested_pairs)):
        for p in pairs:
            out = "<nothing>" if p.output is None else _name(p.output)
            lines.append(f"  {kind} {_name(p.input)} -> {out} {p.source.value} {json.dumps(p.reason)}")
    lines.append("")
    for node in program.nodes:
        lines.append("  " + _node_line(node))
    for u, v, data in sorted(program.graph.edges(data=True)):
        if data.get("kind") == "order":
            a, b = program.node(u), program.node(v)
            lines.append(f"  order {_node_ref(a)} -> {_node_ref(b)}")
    lines.append("}")
    return "\n".join(lines)


def _node_ref(node: Node) -> str:
    """An ordering edge names a node by its first result, or by its id (``#id``) when it has none."""
    first = next(node.results(), None)
    return _operand(first) if first is not None else "#" + _name(node.id)


# -- parsing ---------------------------------------------------------------------------------------


class _Scanner:
    """Characters of one line, with the few token kinds the format needs."""

    def __init__(self, text: str, lineno: int) -> None:
        self.text = text
        self.pos = 0
        self.lineno = lineno

    def error(self, what: str) -> IRParseError:
        return IRParseError(f"line {self.lineno}: {what} at column {self.pos + 1}: {_excerpt(self.text, self.pos)}")

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1

    def peek(self, s: str) -> bool:
        self.skip()
        return self.text.startswith(s, self.pos)

    def eat(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str) -> None:
        if not self.eat(s):
            raise self.error(f"expected {s!r}")

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def name(self) -> str:
        self.skip()
        if self.pos < len(self.text) and self.text[self.pos] == '"':
            return self.string()
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*").match(self.text, self.pos)
        if not m:
            raise self.error("expected a name")
        self.pos = m.end()
        return m.group(0)

    def string(self) -> str:
        self.skip()
        try:
            value, end = json.JSONDecoder().raw_decode(self.text, self.pos)
        except json.JSONDecodeError:
            raise self.error("expected a string") from None
        if not isinstance(value, str):
            raise self.error("expected a string")
        self.pos = end
        return value

    def until_balanced(self, closing: str) -> str:
        """Text up to the matching ``closing`` bracket (the opening one already eaten), skipping strings."""
        opening = {">": "<", ")": "(", "]": "[", "}": "{"}[closing]
        depth, start, i = 1, self.pos, self.pos
        quote: str | None = None
        while i < len(self.text):
            c = self.text[i]
            if quote:
                if c == "\\":
                    i += 1
                elif c == quote:
                    quote = None
            elif c in "\"'":
                quote = c
            elif c == opening or (closing == ">" and c in "<"):
                depth += 1
            elif c == closing:
                depth -= 1
                if depth == 0:
                    self.pos = i + 1
                    return self.text[start:i]
            i += 1
        raise self.error(f"no matching {closing!r}")

    def word(self) -> str:
        self.skip()
        m = re.compile(r"[^\s,()<>\[\]{}]+").match(self.text, self.pos)
        if not m:
            raise self.error("expected a word")
        self.pos = m.end()
        return m.group(0)


def _short(text: str) -> str:
    """``text`` quoted for a message, cut to :data:`_EXCERPT_CHARS` (a 10 MB line is not echoed)."""
    if len(text) <= _EXCERPT_CHARS:
        return repr(text)
    return repr(text[:_EXCERPT_CHARS]) + f"... ({len(text)} characters)"


def _excerpt(line: str, pos: int) -> str:
    """The line around column ``pos`` for a message: all of it when short, else :data:`_EXCERPT_CHARS` around it."""
    text = line.strip()
    if len(text) <= _EXCERPT_CHARS:
        return repr(text)
    start = max(0, pos - _EXCERPT_CHARS // 2)
    return ("..." if start else "") + repr(line[start : start + _EXCERPT_CHARS]) + f"... (a line of {len(line)} characters)"


def _enum(cls: Any, word: str, sc: _Scanner, what: str) -> Any:
    """``cls(word)`` for an enum of the format, or an error that lists the words it takes."""
    try:
        return cls(word)
    except ValueError:
        raise sc.error(f"{what} {_short(word)} is not one of {', '.join(m.value for m in cls)}") from None


def _unquote(text: str, sc: _Scanner) -> str:
    """A name as written in an operand or key: plain, or a JSON string."""
    if not text.startswith('"'):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, str):
        raise sc.error(f"bad quoted name {_short(text)}")
    return value


def _split_top(text: str) -> list[str]:
    """Comma-separated items at bracket depth 0 (strings respected)."""
    items, depth, quote, start = [], 0, None, 0
    for i, c in enumerate(text):
        if quote:
            if c == quote and text[i - 1] != "\\":
                quote = None
            continue
        if c in "\"'":
            quote = c
        elif c in "<([{":
            depth += 1
        elif c in ">)]}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        items.append(tail)
    return items


def _parse_dense(text: str, sc: _Scanner) -> np.ndarray:
    m = re.fullmatch(r"\s*dense<(\w+)\[([0-9,]*)\]\s*(.*)>\s*", text, re.S)
    if not m:
        raise sc.error(f"bad dense constant {_short(text[:40])}")
    dtype_text, shape_text, values = m.groups()
    try:
        dtype = np.dtype(dtype_text)
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in _DENSE_KINDS:
        raise sc.error(f"bad dense constant: {_short(dtype_text)} is not a numeric dtype (float32, int64, bool, ...)")
    try:
        shape = tuple(int(d) for d in shape_text.split(",") if d)
    except ValueError:
        raise sc.error(f"bad dense constant: shape [{_short(shape_text)}] is not a list of whole numbers") from None
    count = 1
    for d in shape:
        count *= d
    if count > MAX_DENSE_ELEMENTS:
        raise sc.error(f"dense constant of shape {list(shape)}: {count} elements, over the limit of {MAX_DENSE_ELEMENTS}")
    if values.strip() == "...":
        return np.zeros(shape, dtype=dtype)
    flat = _literal_value(values, sc)
    try:
        return np.asarray(flat, dtype=dtype).reshape(shape)
    except (ValueError, TypeError, OverflowError) as exc:
        raise sc.error(f"bad dense constant ({_short(str(exc))})") from None


def _literal_value(text: str, sc: _Scanner) -> Any:
    """A Python literal (an attribute value, a dense constant's values), long lists of numbers read as JSON."""
    stripped = text.strip()
    if stripped[:1] == "[" and len(stripped) > MAX_LITERAL_CHARS:
        try:
            return json.loads(stripped)
        except (ValueError, RecursionError):
            raise sc.error(f"a value of {len(stripped)} characters is read only as a JSON list of numbers, and this is none") from None
    if len(stripped) > MAX_LITERAL_CHARS:
        raise sc.error(f"a value of {len(stripped)} characters, over the limit of {MAX_LITERAL_CHARS} for one that is not a list of numbers")
    try:
        return ast.literal_eval(stripped)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        raise sc.error(f"bad attribute value {_short(stripped)}") from None


def _parse_value(text: str, sc: _Scanner) -> Any:
    if text.lstrip().startswith("dense<"):
        return _parse_dense(text, sc)
    return _literal_value(text, sc)


def _parse_type(sc: _Scanner) -> TensorType:
    sc.skip()
    m = re.compile(r"(\w+|\?)\[").match(sc.text, sc.pos)
    if not m:
        raise sc.error("expected a tensor type")
    dtype = None if m.group(1) == "?" else m.group(1)
    sc.pos = m.end()
    inner = sc.until_balanced("]")
    shape: tuple[int | str | None, ...] | None
    if inner == "*":
        shape = None
    else:
        dims: list[int | str | None] = []
        for d in _split_top(inner):
            if d == "?":
                dims.append(None)
            elif re.fullmatch(r"-?\d{1,18}", d):
                dims.append(int(d))
            elif _IDENT.match(d) or d.startswith('"'):
                dims.append(_unquote(d, sc))
            else:
                raise sc.error(f"bad dim {_short(d)}: a whole number, ?, or a name")
        shape = tuple(dims)
    layout = None
    quant = None
    while True:
        if sc.eat("layout="):
            layout = sc.string()
        elif sc.eat("q("):
            quant = _parse_quant(sc.until_balanced(")"), sc)
        else:
            break
    return TensorType(dtype=dtype, shape=shape, layout=layout, quant=quant)


def _parse_quant(text: str, sc: _Scanner) -> QuantParams:
    """``q(scale=[...], zero=[...], axis=N)``: what the printer writes for a quantized type."""
    body: dict[str, Any] = {}
    for item in _split_top(text):
        key, sep, raw = item.partition("=")
        if not sep or key.strip() not in ("scale", "zero", "axis") or key.strip() in body:
            raise sc.error(f"bad quantization {_short(item)}: write q(scale=[...], zero=[...], axis=N)")
        body[key.strip()] = _literal_value(raw, sc)
    if set(body) != {"scale", "zero", "axis"}:
        raise sc.error("bad quantization: write q(scale=[...], zero=[...], axis=N)")
    scale, zero, axis = body["scale"], body["zero"], body["axis"]
    numbers = (int, float)
    if not (isinstance(scale, (list, tuple)) and all(isinstance(x, numbers) and not isinstance(x, bool) for x in scale)
            and isinstance(zero, (list, tuple)) and all(isinstance(x, numbers) and not isinstance(x, bool) for x in zero)
            and (axis is None or (isinstance(axis, int) and not isinstance(axis, bool)))):
        raise sc.error("bad quantization: scale and zero are lists of numbers, axis a whole number or None")
    return QuantParams(tuple(scale), tuple(zero), axis)


def _check_loc(loc: Any, sc: _Scanner) -> dict[str, Any]:
    """A node's ``loc{...}``: a dict of strings (``branch`` a tuple of them), as the printer writes it."""
    if not isinstance(loc, dict) or not all(isinstance(k, str) for k in loc):
        raise sc.error("loc must be a dict such as loc{'id': 'n0', 'node': 'lstm'}")
    for key, value in loc.items():
        if key not in ("id", "node", "value", "branch"):
            raise sc.error(f"unknown loc key {_short(key)}; loc takes id, node, value, branch")
        ok = isinstance(value, (tuple, list)) and all(isinstance(b, str) for b in value) if key == "branch" else isinstance(value, str)
        if not ok:
            raise sc.error(f"loc {key} must be {'a tuple of branch names' if key == 'branch' else 'a string'}, not {_short(repr(value))}")
    return loc


def _check_recurrent_fields(fields: dict[str, Any], sc: _Scanner) -> None:
    """A recurrence's attributes have the types and words ONNX allows: a misspelt direction is no forward one."""
    direction = fields.get("direction", "forward")
    if direction not in _DIRECTIONS:
        raise sc.error(f"direction {_short(repr(direction))} is not one of {', '.join(_DIRECTIONS)}")

    def whole(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    checks: dict[str, tuple[Callable[[Any], bool], str]] = {
        "hidden_size": (lambda v: whole(v) and v > 0, "a positive whole number"),
        "layout": (lambda v: v in (0, 1) and whole(v), "0 or 1"),
        "linear_before_reset": (lambda v: v in (0, 1) and whole(v), "0 or 1"),
        "input_forget": (lambda v: v in (0, 1) and whole(v), "0 or 1"),
        "clip": (number, "a number"),
        "activations": (lambda v: isinstance(v, tuple) and all(isinstance(a, str) for a in v), "a list of activation names"),
        "activation_alpha": (lambda v: isinstance(v, tuple) and all(number(a) for a in v), "a list of numbers"),
        "activation_beta": (lambda v: isinstance(v, tuple) and all(number(a) for a in v), "a list of numbers"),
    }
    for name, (ok, what) in checks.items():
        if name in fields and fields[name] is not None and not ok(fields[name]):
            raise sc.error(f"{name} must be {what}, not {_short(repr(fields[name]))}")


class _Parser:
    def __init__(self, text: str) -> None:
        self.lines = [_without_comment(line) for line in text.splitlines()]
        self.program: Program | None = None
        self.values: dict[str, Value] = {}
        self.producers: dict[str, Node] = {}
        self.by_id: dict[str, Node] = {}
        self.aliases: list[tuple[Slot, str, str, int]] = []  # resolved at the end: a slot may alias a later one
        self.pair_lines: list[tuple[StatePair, int, bool]] = []  # checked at the end: a pair line may come first
        self.order_lines: dict[tuple[str, str], int] = {}

    def value(self, name: str, sc: _Scanner) -> Value:
        v = self.values.get(name)
        if v is None:
            raise sc.error(f"%{name} is used before it is defined")
        return v

    def operands(self, sc: _Scanner) -> list[Value | None]:
        sc.expect("(")
        inner = sc.until_balanced(")")
        out: list[Value | None] = []
        for item in _split_top(inner):
            if item == "_":
                out.append(None)
            elif item.startswith("%"):
                out.append(self.value(_unquote(item[1:], sc), sc))
            else:
                raise sc.error(f"bad operand {_short(item)}")
        return out

    def results(self, sc: _Scanner) -> list[str | None]:
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
            sc = _Scanner(line, lineno)
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
            sc = _Scanner(line, lineno)
            if sc.at_end():
                continue
            if sc.eat("}"):
                self._finish()
                return self.program
            self.item(sc)
        raise IRParseError("the program's closing '}' is missing")

    def item(self, sc: _Scanner) -> None:
        prog = self.program
        assert prog is not None
        if sc.eat("slot @"):
            name = sc.name()
            sc.expect(":")
            t = _parse_type(sc)
            sc.expect("init=")
            word = sc.word()
            if word not in ("zeros", "constant", "caller"):
                raise sc.error(f"slot init {_short(word)} is not one of zeros, constant, caller")
            init = SlotInit(word) if word != "constant" else SlotInit("constant", _parse_dense(self._dense_text(sc), sc))
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
            t = _parse_type(sc)
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
            t = _parse_type(sc)
            const = _parse_dense(self._dense_text(sc), sc) if sc.eat("=") else None
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
            source = _enum(PairSource, sc.word(), sc, "pair source")
            reason = sc.string() if not sc.at_end() else ""
            if not sc.at_end():
                raise sc.error("unexpected text after a pair")
            self.pair_lines.append((StatePair(inp, out, source, reason), sc.lineno, suggested))
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

    def _dense_text(self, sc: _Scanner) -> str:
        sc.skip()
        start = sc.pos
        sc.expect("dense<")
        sc.until_balanced(">")
        return sc.text[start : sc.pos]

    def _node_by_ref(self, sc: _Scanner) -> Node:
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

    def node(self, sc: _Scanner) -> None:
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
            loc = _check_loc(_parse_value("{" + sc.until_balanced("}") + "}", sc), sc)
        types: list[TensorType] = []
        if sc.eat(":"):
            types.append(_parse_type(sc))
            while sc.eat(","):
                types.append(_parse_type(sc))
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

    def _make(self, op: str, attrs_text: str, inputs: list[Value | None], outputs: list[Value | None], prov: Provenance, sc: _Scanner) -> Node:
        prog = self.program
        assert prog is not None
        items = _split_top(attrs_text)
        if op == "load_slot":
            slot_name, kind = self._two(items, sc)
            slot = self._slot(slot_name.lstrip("@"), sc)
            for v in outputs:
                if v is not None:
                    v.type = slot.type
            return LoadSlot(inputs=inputs, outputs=outputs, provenance=prov, slot=slot, kind=_enum(LoadKind, kind, sc, "load kind"))
        if op == "store":
            dest_text, result = self._two(items, sc)
            dest: Slot | Output
            if dest_text.startswith("@"):
                dest = self._slot(dest_text[1:], sc)
            elif dest_text.startswith("out:"):
                dest = self._output(dest_text[4:], sc)
            else:
                raise sc.error(f"bad store destination {_short(dest_text)}")
            return Store(inputs=inputs, outputs=outputs, provenance=prov, dest=dest, result=_enum(StoreResult, result, sc, "store result"))
        if op == "return":
            if len(items) != 1 or not items[0].startswith("by "):
                raise sc.error("return takes <by LAYER>")
            return Return(inputs=inputs, outputs=outputs, provenance=prov, layer=_enum(OrderingLayer, items[0][3:].strip(), sc, "return layer"))
        attrs: dict[str, Any] = {}
        for item in items:
            if "=" not in item:
                raise sc.error(f"bad attribute {_short(item)}")
            key, raw = item.split("=", 1)
            attrs[_unquote(key.strip(), sc)] = _parse_value(raw, sc)
        if op.startswith("recurrent."):
            kind = op[len("recurrent.") :]
            fields: dict[str, Any] = {}
            for f in _RECURRENT_FIELDS:
                if f in attrs:
                    val = attrs.pop(f)
                    fields[f] = tuple(val) if isinstance(val, list) else val
            recognition_word = attrs.pop("recognition", "op")
            recognition = _enum(Recognition, recognition_word if isinstance(recognition_word, str) else repr(recognition_word), sc, "recognition")
            recognised_from = attrs.pop("recognised_from", ())
            if not isinstance(recognised_from, (tuple, list)) or not all(isinstance(n, str) for n in recognised_from):
                raise sc.error("recognised_from must be a tuple of node names")
            recognised_from = tuple(recognised_from)
            if attrs:
                raise sc.error(f"unknown recurrent attribute(s) {_short(', '.join(map(str, attrs)))}")
            _check_recurrent_fields(fields, sc)
            try:
                return Recurrent(inputs=inputs, outputs=outputs, provenance=prov, kind=kind, recognition=recognition,
                                 recognised_from=recognised_from, **fields)
            except (IRError, TypeError) as exc:
                raise sc.error(str(exc)) from None
        regions = {k[len("region.") :]: attrs.pop(k) for k in [k for k in attrs if k.startswith("region.")]}
        for rname, path in regions.items():
            if not isinstance(path, (tuple, list)) or not all(isinstance(p, str) for p in path):
                raise sc.error(f"region.{_short(rname)} must be a tuple of branch names")
        domain, _, name = op.rpartition(".")
        node = Compute(inputs=inputs, outputs=outputs, provenance=prov, op=name, domain=domain, attributes=attrs)
        if regions:
            n = len(outputs)
            node.regions = {
                r: Region(r, tuple(path), yields=inputs[1 + k * n : 1 + (k + 1) * n]) for k, (r, path) in enumerate(regions.items())
            }
        return node

    def _two(self, items: list[str], sc: _Scanner) -> tuple[str, str]:
        if len(items) != 2:
            raise sc.error("expected <TARGET, KIND>")
        return items[0], items[1]

    def _slot(self, name: str, sc: _Scanner) -> Slot:
        assert self.program is not None
        name = json.loads(name) if name.startswith('"') else name
        try:
            return self.program.slot(name)
        except KeyError:
            raise sc.error(f"no slot @{name}") from None

    def _output(self, name: str, sc: _Scanner) -> Output:
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
            sc = _Scanner("", lineno)
            slot.alias_of = self._slot(target, sc) if kind == "slot" else self._output(target, sc)
        if self.order_lines and not digraph.is_directed_acyclic_graph(prog.graph):
            cycle = digraph.find_cycle(prog.graph)
            lineno = min((self.order_lines[e] for e in cycle if e in self.order_lines), default=0)
            path = " -> ".join([str(cycle[0][0]), *(str(v) for _, v in cycle)])
            raise _Scanner("", lineno).error(f"the ordering edges close a cycle ({_short(path)})")
        outputs = {o.name for o in prog.outputs}
        declared: list[StatePair] = []
        offered: list[StatePair] = []
        for pair, lineno, suggested in self.pair_lines:
            sc = _Scanner("", lineno)
            try:
                pair_slot: Slot | None = prog.slot(pair.input)
            except KeyError:
                pair_slot = None
                if not suggested:  # a declared pair of no slot checks nothing: never a silent "verified"
                    raise sc.error(f"pair {pair.input} -> {pair.output}: the program has no slot @{pair.input}") from None
            if pair.output is not None and pair.output not in outputs and not suggested:
                raise sc.error(f"pair {pair.input} -> {pair.output}: the program has no output {pair.output}")
            (offered if suggested else declared).append(dataclasses.replace(pair, slot=pair_slot))
        prog.state_pairs = declared
        prog.suggested_pairs = offered


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


def parse_program(text: str) -> Program:
    """Read IR text (format version 1) into a :class:`Program`, as written: nothing is traced (the slice maps
    are :mod:`rnnir.analysis`'s, computed when asked)."""
    return _Parser(text.removeprefix("\ufeff")).parse()  # a byte-order mark, as some editors write, is no text


def read_program(path: str | os.PathLike[str], *, label: str | None = None) -> Program:
    """The one program of an IR text file (``.rnnir``), read as safely as a model file is.

    Raises :class:`rnnir.ModelError` for a file that cannot be read (a FIFO, a device, too large, not UTF-8)
    or that holds no program or several, and :class:`IRParseError` (naming the line) for text that does not parse.
    """
    from rnnir.errors import ModelError
    from rnnir.lower.source import read_regular_file

    label = label or str(path)
    data = read_regular_file(Path(path), label, limit=MAX_IR_TEXT_BYTES)
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
