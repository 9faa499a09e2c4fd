"""The size limits of IR text (rnnir/ir/lexer.py), each tested exactly at its bound and one past it.

The bounds are written here as numbers, not read from the module: they are the documented format
(``MAX_DENSE_ELEMENTS`` = 2**27 elements of a ``dense<...>`` constant, ``MAX_LITERAL_CHARS`` = 2**16 characters of a
value read as a Python literal, 120 characters of a line or a word quoted in a message), and a test that read
the constant would move with a wrong one.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from rnnir.ir.lexer import Scanner, parse_value
from rnnir.ir.text import IRParseError, parse_program

MAX_DENSE_ELEMENTS = 1 << 27
MAX_LITERAL_CHARS = 1 << 16
EXCERPT_CHARS = 120

HEAD = """program @p {
  output y : float32[2]
  value %x : float32[2]
"""
TAIL = """  %s = store<out:y, value>(%x) loc{'id': 'st'}
  return<by runtime>(%s) loc{'id': 'ret'}
}"""


def program(*lines: str) -> str:
    return HEAD + "".join(f"  {line}\n" for line in lines) + TAIL


def message_of(text: str) -> str:
    with pytest.raises(IRParseError) as ei:
        parse_program(text)
    return str(ei.value)


def test_a_dense_constant_of_exactly_the_element_limit_is_read_and_one_more_is_refused():
    # an elided constant (``...``) is allocated as zeros: the limit is what a hostile file can make rnnir allocate
    for shape in ([MAX_DENSE_ELEMENTS], [2, MAX_DENSE_ELEMENTS // 2], [1 << 9, 1 << 9, 1 << 9]):
        dims = ",".join(map(str, shape))
        prog = parse_program(program(f"value %c : bool[{dims}] = dense<bool[{dims}] ...>", "%u = Identity(%c) loc{'id': 'u'}"))
        const = prog.externals["c"].const
        assert const.shape == tuple(shape) and const.dtype == np.bool_
        assert not const[(0,) * len(shape)] and not const[tuple(d - 1 for d in shape)]
    over = {"[134217729]": "[134217729]", "[3,44739243]": "[3, 44739243]", "[2,65536,1025]": "[2, 65536, 1025]"}
    for dims, listed in over.items():
        text = program(f"value %c : bool[2] = dense<bool{dims} ...>", "%u = Identity(%c) loc{'id': 'u'}")
        count = int(np.prod([int(d) for d in dims.strip("[]").split(",")]))
        assert re.search(rf"^line 4: dense constant of shape {re.escape(listed)}: {count} elements, over the limit of {MAX_DENSE_ELEMENTS} at column",
                         message_of(text)), dims


def test_a_value_of_exactly_the_literal_limit_is_read_as_python_and_one_more_only_as_json():
    # the value as the reader gets it from an attribute list (parse_value): a whole program would scan each 64 KiB
    # line character by character, which makes this test slow enough that the mutation tool leaves it out
    def read(value: str) -> object:
        return parse_value(value, Scanner("%u = Foo<...>(%x)", 4))

    def refusal(value: str) -> str:
        with pytest.raises(IRParseError) as ei:
            read(value)
        return str(ei.value)

    def padded(head: str, tail: str, size: int) -> str:
        return head + " " * (size - len(head) - len(tail)) + tail

    # a Python-only list (a parenthesised item, not JSON): read at the limit, refused one past it
    assert read(padded("[(1", ")]", MAX_LITERAL_CHARS)) == [1]
    assert refusal(padded("[(1", ")]", MAX_LITERAL_CHARS + 1)).startswith(
        f"line 4: a value of {MAX_LITERAL_CHARS + 1} characters is read only as a JSON list of numbers, and this is none at column 1")
    # a JSON list is read at any length
    assert read(padded("[1,", "2]", MAX_LITERAL_CHARS + 1)) == [1, 2]
    assert read(padded("[1,", "2]", 4 * MAX_LITERAL_CHARS)) == [1, 2]
    # a list nested deeper than a parser's recursion is refused by name, not a RecursionError
    deep = "[" * (MAX_LITERAL_CHARS // 2 + 1) + "]" * (MAX_LITERAL_CHARS // 2 + 1)
    assert "is read only as a JSON list of numbers, and this is none" in refusal(deep)
    # anything else: read at the limit, refused one past it, whatever its first character
    for quote in "'\"":
        assert read(quote + "a" * (MAX_LITERAL_CHARS - 2) + quote) == "a" * (MAX_LITERAL_CHARS - 2)
        assert refusal(quote + "a" * (MAX_LITERAL_CHARS - 1) + quote).startswith(
            f"line 4: a value of {MAX_LITERAL_CHARS + 1} characters, over the limit of {MAX_LITERAL_CHARS} for one that is not a list of numbers")
    assert read(padded("{1: 2", "}", MAX_LITERAL_CHARS)) == {1: 2}
    assert refusal(padded("{1: 2", "}", MAX_LITERAL_CHARS + 1)).startswith(f"line 4: a value of {MAX_LITERAL_CHARS + 1} characters, over the limit")
    # the limit counts the value, not the spaces around it
    assert read("  '" + "a" * (MAX_LITERAL_CHARS - 2) + "'  ") == "a" * (MAX_LITERAL_CHARS - 2)
    # and a program's attribute goes through the same reader
    text = program(f"%u = Foo<a='{'a' * (MAX_LITERAL_CHARS - 1)}'>(%x) loc{{'id': 'u'}}")
    assert f"a value of {MAX_LITERAL_CHARS + 1} characters, over the limit of {MAX_LITERAL_CHARS}" in message_of(text)


def test_a_message_quotes_a_line_of_up_to_120_characters_whole_and_a_longer_one_around_the_column():
    def error(text: str, pos: int) -> str:
        sc = Scanner(text, 7)
        sc.pos = pos
        return str(sc.error("what"))

    short_line = "  " + "a" * EXCERPT_CHARS + "  "  # the spaces around a line are not counted
    assert error(short_line, 3) == f"line 7: what at column 4: {'a' * EXCERPT_CHARS!r}"
    long_line = "b" * 10 + "c" * (EXCERPT_CHARS - 9)  # 121 characters
    half = EXCERPT_CHARS // 2
    # a column near the start: the first 120 characters, nothing cut before
    assert error(long_line, half) == f"line 7: what at column {half + 1}: {long_line[:EXCERPT_CHARS]!r}... (a line of 121 characters)"
    # one further: the 120 characters from 60 before the column, marked as cut at both ends
    assert error(long_line, half + 1) == f"line 7: what at column {half + 2}: ...{long_line[1:EXCERPT_CHARS + 1]!r}... (a line of 121 characters)"
    huge = "".join(chr(ord("a") + k % 26) for k in range(5000))
    assert error(huge, 3000) == f"line 7: what at column 3001: ...{huge[3000 - half:3000 + half]!r}... (a line of 5000 characters)"


def test_a_word_in_a_message_is_quoted_whole_up_to_120_characters_and_cut_after():
    def refusal(kind: str) -> str:
        return message_of(program("%h = load_slot<@h, copy>() loc{'id': 'l'}").replace(
            "  output y", "  slot @h : float32[2] init=zeros\n  output y").replace("copy>", f"{kind}>"))

    at = "k" * EXCERPT_CHARS
    assert f"load kind {at!r} is not one of view, copy" in refusal(at)
    past = "k" * (EXCERPT_CHARS + 1)
    assert f"load kind {at!r}... ({EXCERPT_CHARS + 1} characters) is not one of view, copy" in refusal(past)
