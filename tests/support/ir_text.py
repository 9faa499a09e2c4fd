"""Reading IR text in tests: the parts of a parse error, and a program read back through a print."""

from __future__ import annotations

import re

import pytest

from rnnir.ir import Program
from rnnir.ir.text import IRParseError, parse_program, print_program


def parse_error(text: str) -> tuple[int, str, int]:
    """(line, message, column) of the IRParseError that parsing ``text`` raises."""
    with pytest.raises(IRParseError) as ei:
        parse_program(text)
    m = re.fullmatch(r"line (\d+): (.*?) at column (\d+): .*", str(ei.value), re.S)
    assert m, str(ei.value)
    return int(m.group(1)), m.group(2), int(m.group(3))


def read_back(text: str) -> Program:
    """``text`` parsed, after checking that what it prints is a fixed point: ``print(parse(print(p))) == print(p)``."""
    prog = parse_program(text)
    printed = print_program(prog)
    assert print_program(parse_program(printed)) == printed
    return prog
