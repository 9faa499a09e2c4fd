"""The pieces of a line of IR text: a :class:`Scanner` over its characters, and the parsers of what the
printer (:mod:`rnnir.ir.printer`) writes inside a line: names, Python literals, ``dense<...>`` constants,
tensor types with their quantization, a node's ``loc{...}`` and a recurrence's fields.

Every refusal is an :class:`IRParseError` naming the line and column, with the text around it cut to
:data:`_EXCERPT_CHARS`: a hostile file gets a short message, never a traceback or a 10 MB echo.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from rnnir.errors import IRError
from rnnir.ir.attributes import QuantParams, TensorType
from rnnir.ir.printer import PLAIN_NAME

__all__ = ["MAX_DENSE_ELEMENTS", "MAX_LITERAL_CHARS", "IRParseError", "Scanner", "check_loc", "check_recurrent_fields",
           "parse_dense", "parse_enum", "parse_type", "parse_value", "short", "split_top", "unquote"]

_EXCERPT_CHARS = 120  # of a line quoted in an error message
#: the most elements a ``dense<...>`` constant may have (an elided one, ``...``, is allocated as zeros)
MAX_DENSE_ELEMENTS = 1 << 27
#: the longest attribute value read as a Python literal: ``ast.literal_eval`` takes some 500 bytes of memory per
#: character (2 MB of text took 973 MB); longer lists of plain numbers are read as JSON, in a few bytes each
MAX_LITERAL_CHARS = 1 << 16
_DENSE_KINDS = "biufc"  # numbers and booleans: what the printer writes
_DIRECTIONS = ("forward", "reverse", "bidirectional")


class IRParseError(IRError):
    """IR text that does not follow the format; the message names the line."""


class Scanner:
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


def short(text: str) -> str:
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


def parse_enum(cls: Any, word: str, sc: Scanner, what: str) -> Any:
    """``cls(word)`` for an enum of the format, or an error that lists the words it takes."""
    try:
        return cls(word)
    except ValueError:
        raise sc.error(f"{what} {short(word)} is not one of {', '.join(m.value for m in cls)}") from None


def unquote(text: str, sc: Scanner) -> str:
    """A name as written in an operand or key: plain, or a JSON string."""
    if not text.startswith('"'):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, str):
        raise sc.error(f"bad quoted name {short(text)}")
    return value


def split_top(text: str) -> list[str]:
    """Comma-separated items at bracket depth 0 (strings respected)."""
    items, depth, quote, start = [], 0, None, 0
    escaped = False  # the character after a backslash in a string is text: 'C:\\' ends at its second quote
    for i, c in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == quote:
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


def parse_dense(text: str, sc: Scanner) -> np.ndarray:
    m = re.fullmatch(r"\s*dense<(\w+)\[([0-9,]*)\]\s*(.*)>\s*", text, re.S)
    if not m:
        raise sc.error(f"bad dense constant {short(text[:40])}")
    dtype_text, shape_text, values = m.groups()
    try:
        dtype = np.dtype(dtype_text)
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in _DENSE_KINDS:
        raise sc.error(f"bad dense constant: {short(dtype_text)} is not a numeric dtype (float32, int64, bool, ...)")
    try:
        shape = tuple(int(d) for d in shape_text.split(",") if d)
    except ValueError:
        raise sc.error(f"bad dense constant: shape [{short(shape_text)}] is not a list of whole numbers") from None
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
        raise sc.error(f"bad dense constant ({short(str(exc))})") from None


def _literal_value(text: str, sc: Scanner) -> Any:
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
        raise sc.error(f"bad attribute value {short(stripped)}") from None


def parse_value(text: str, sc: Scanner) -> Any:
    if text.lstrip().startswith("dense<"):
        return parse_dense(text, sc)
    return _literal_value(text, sc)


def parse_type(sc: Scanner) -> TensorType:
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
        for d in split_top(inner):
            if d == "?":
                dims.append(None)
            elif re.fullmatch(r"-?\d{1,18}", d):
                dims.append(int(d))
            elif PLAIN_NAME.match(d) or d.startswith('"'):
                dims.append(unquote(d, sc))
            else:
                raise sc.error(f"bad dim {short(d)}: a whole number, ?, or a name")
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


def _parse_quant(text: str, sc: Scanner) -> QuantParams:
    """``q(scale=[...], zero=[...], axis=N)``: what the printer writes for a quantized type."""
    body: dict[str, Any] = {}
    for item in split_top(text):
        key, sep, raw = item.partition("=")
        if not sep or key.strip() not in ("scale", "zero", "axis") or key.strip() in body:
            raise sc.error(f"bad quantization {short(item)}: write q(scale=[...], zero=[...], axis=N)")
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


def check_loc(loc: Any, sc: Scanner) -> dict[str, Any]:
    """A node's ``loc{...}``: a dict of strings (``branch`` a tuple of them), as the printer writes it."""
    if not isinstance(loc, dict) or not all(isinstance(k, str) for k in loc):
        raise sc.error("loc must be a dict such as loc{'id': 'n0', 'node': 'lstm'}")
    for key, value in loc.items():
        if key not in ("id", "node", "value", "branch"):
            raise sc.error(f"unknown loc key {short(key)}; loc takes id, node, value, branch")
        ok = isinstance(value, (tuple, list)) and all(isinstance(b, str) for b in value) if key == "branch" else isinstance(value, str)
        if not ok:
            raise sc.error(f"loc {key} must be {'a tuple of branch names' if key == 'branch' else 'a string'}, not {short(repr(value))}")
    return loc


def check_recurrent_fields(fields: dict[str, Any], sc: Scanner) -> None:
    """A recurrence's attributes have the types and words ONNX allows: a misspelt direction is no forward one."""
    direction = fields.get("direction", "forward")
    if direction not in _DIRECTIONS:
        raise sc.error(f"direction {short(repr(direction))} is not one of {', '.join(_DIRECTIONS)}")

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
            raise sc.error(f"{name} must be {what}, not {short(repr(fields[name]))}")
