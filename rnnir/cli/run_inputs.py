"""The input flags of ``rnnir run`` and ``rnnir deploy openvino`` (``--shape``/``--value``/``--input``/``--audio``/
``--context``, with ``--calls`` and ``--chunk``), read into :class:`rnnir.deploy.inputs.InputFlags`; checking them
against the model, and reading the data files, is :mod:`rnnir.deploy.inputs`' (no command-line module).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rnnir.cli.common import OneModelArgs, UsageError
from rnnir.deploy.inputs import InputFlags, parse_dims

__all__ = ["InputArgs", "input_flags"]


@dataclass(frozen=True, kw_only=True)
class InputArgs(OneModelArgs):
    """What a command that runs a stream of calls is fed (``run``, ``deploy openvino``)."""

    calls: int | None = None
    chunk: int = 16
    shape: tuple[str, ...] = ()
    value: tuple[str, ...] = ()
    input: tuple[str, ...] = ()
    audio: tuple[str, ...] = ()
    context: tuple[str, ...] = ()


def input_flags(args: InputArgs) -> InputFlags:
    """``--shape``/``--value``/``--input``/``--audio``/``--context`` as typed (``run``, ``deploy openvino``)."""
    return InputFlags(
        shapes=_parse_assignments(args.shape, "--shape", parse_dims, "one call's dims are whole numbers, e.g. --shape input=1,576 (or 1x576)"),
        values=_parse_assignments(args.value, "--value", _number, "give a number, e.g. --value sr=16000"),
        files=_parse_assignments(args.input, "--input", str, "e.g. --input x=x.npy"),
        audio=list(args.audio),
        context=_parse_assignments(args.context, "--context", _context_size, "give a number of steps, e.g. --context input=64"),
    )


def _number(text: str) -> float:
    value = float(text)
    if math.isnan(value):
        raise ValueError(text)
    return value


def _context_size(text: str) -> int | tuple[int, int]:
    """``64`` or ``64:1`` (size along the input's time axis, or along the given axis)."""
    size, sep, axis = text.partition(":")
    return (int(size), int(axis)) if sep else int(size)


def _parse_assignments(items: Sequence[str], flag: str, convert: Any, how: str) -> dict[str, Any]:
    """``NAME=VALUE`` flags (``--shape input=1,576``, ``--value sr=16000``) as a dict; ``how`` says what a valid VALUE is."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"{flag} takes NAME=VALUE, got {item!r}; {how}")
        try:
            out[name] = convert(value)
        except ValueError:
            raise UsageError(f"{flag} {item}: {value!r} is not valid here; {how}") from None
    return out
