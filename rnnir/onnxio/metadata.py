"""Every ``metadata_props`` key rnnir reads or writes, and the three ways it touches them.

rnnir records what it knows about a model in the model itself, so any runtime can run the file and rnnir
finds the same facts again: the caller's state pairs, each slot's initial value, the IR text of a program whose
stores plain ONNX cannot express, and a fingerprint that binds saved states to the graph.
One module owns the keys so their spelling and meaning cannot drift apart between writers and readers.
It also records what the user tells rnnir about the model: the findings to suppress (the model's ``# noqa``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rnnir.util.jsontext import JSONTextError, parse_json

if TYPE_CHECKING:
    import onnx


__all__ = [
    "META_FINGERPRINT",
    "META_NOQA",
    "META_IR",
    "META_PAIRS",
    "META_PROGRAM_V0",
    "META_SLOTS",
    "META_STATE_VERSION",
    "NoqaFormatError",
    "drop",
    "read",
    "read_noqa",
    "write",
    "write_noqa",
]

#: JSON ``{state input: state output or null}``: the caller's contract (written by export and fix)
META_PAIRS = "rnnir.pairs"
#: JSON per slot: its initial value and storage facts (written by export and fix)
META_SLOTS = "rnnir.slots"
#: the IR text (rnnir.irtext, format version 1) of an exported program whose stores plain ONNX cannot express
#: (chain, aliases, ordering); lowering takes the stores from it (rnnir.ir.structure)
META_IR = "rnnir.ir"
#: the JSON store structure rnnir 0.1 wrote before ``rnnir.ir``: refused with a message saying so, never read
META_PROGRAM_V0 = "rnnir.program"
#: sha256 of the graph a saved state belongs to
META_FINGERPRINT = "rnnir.fingerprint"
#: the state version the model declares: a saved state loads across graphs of the same version (versioning.py)
META_STATE_VERSION = "rnnir.state_version"
#: JSON list of suppressions (the model's noqa list): ``["SD009", "SD006:/lstm/LSTM"]`` -- a rule code, optionally
#: ``:`` and the ONNX node, value or slot name the finding must name (rnnir.passes.suppression applies them)
META_NOQA = "rnnir.noqa"
#: the longest ``rnnir.noqa`` value read (a million-entry list is some 20 MB)
MAX_NOQA_CHARS = 16 << 20


class NoqaFormatError(ValueError):
    """The ``rnnir.noqa`` entry is not a JSON list of strings."""


def read(model: onnx.ModelProto) -> dict[str, str]:
    """All of ``model``'s metadata_props as a dict (the last value wins for a repeated key)."""
    return {p.key: p.value for p in model.metadata_props}


def write(model: onnx.ModelProto, key: str, value: str) -> None:
    """Set ``key`` to ``value``, replacing an existing entry."""
    for p in model.metadata_props:
        if p.key == key:
            p.value = value
            return
    model.metadata_props.add(key=key, value=value)


def drop(model: onnx.ModelProto, key: str) -> None:
    """Remove every entry of ``key``."""
    keep = [p for p in model.metadata_props if p.key != key]
    del model.metadata_props[:]
    model.metadata_props.extend(keep)


def read_noqa(model: onnx.ModelProto) -> list[str]:
    """The suppressions ``model`` declares under :data:`META_NOQA`, as written (``[]`` when it has none).

    A model may carry the key more than once (ONNX does not forbid it; a tool appended instead of replacing):
    the entries of every copy count, in order, and :func:`write_noqa` replaces them all with one, so what the
    readers see and what ``fix --suppress`` writes never differ.
    """
    raws = [p.value for p in model.metadata_props if p.key == META_NOQA]
    entries: list[str] = []
    for raw in raws:
        entries.extend(_noqa_entries(raw))
    return entries


def _noqa_entries(raw: str) -> list[str]:
    if len(raw) > MAX_NOQA_CHARS:
        raise NoqaFormatError(f"metadata_props {META_NOQA!r} holds {len(raw)} characters, over the limit of {MAX_NOQA_CHARS}")
    try:
        entries = parse_json(raw)
    except JSONTextError as exc:
        raise NoqaFormatError(f"metadata_props {META_NOQA!r} is not valid JSON ({exc}); write a list such as [\"SD009\", \"SD006:/lstm/LSTM\"]") from None
    if not isinstance(entries, list) or not all(isinstance(e, str) and e.strip() for e in entries):
        raise NoqaFormatError(f"metadata_props {META_NOQA!r} must be a JSON list of rule codes such as [\"SD009\", \"SD006:/lstm/LSTM\"], not {raw[:80]!r}")
    return [e.strip() for e in entries]


def write_noqa(model: onnx.ModelProto, entries: Sequence[str]) -> None:
    """Set :data:`META_NOQA` to ``entries`` (sorted, without repeats; no entry at all when empty)."""
    unique = sorted({e.strip() for e in entries if e.strip()})
    if not unique:
        drop(model, META_NOQA)
        return
    # one copy is replaced in place; several become one: a reader merges them all (read_noqa), so a copy left
    # behind would still count
    copies = [p for p in model.metadata_props if p.key == META_NOQA]
    if len(copies) > 1:
        drop(model, META_NOQA)
        copies = []
    if copies:
        copies[0].value = json.dumps(unique)
    else:
        model.metadata_props.add(key=META_NOQA, value=json.dumps(unique))
