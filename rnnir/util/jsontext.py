"""JSON from a file or a model's metadata, with every way it can fail as one :class:`ValueError` that says why.

``json.loads`` raises :class:`json.JSONDecodeError` for bad syntax, but :class:`RecursionError` for text nested a few
thousand levels deep and a bare :class:`ValueError` for an integer of more than 4,300 digits (Python's limit on
integer strings); a reader that caught only the first reported the others as internal errors.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["JSONTextError", "parse_json"]


class JSONTextError(ValueError):
    """Text that is not usable JSON; the message says why and where, without the text itself."""


def parse_json(text: str) -> Any:
    """``json.loads(text)``, every failure a :class:`JSONTextError`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JSONTextError(f"invalid JSON at line {exc.lineno} column {exc.colno} ({exc.msg})") from None
    except RecursionError:
        raise JSONTextError("JSON nested too deeply to read") from None
    except ValueError as exc:  # an integer past Python's digit limit for int(str)
        raise JSONTextError(f"unreadable JSON value: {exc}") from None
