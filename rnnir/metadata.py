"""Every ``metadata_props`` key rnnir reads or writes, and the three ways it touches them.

rnnir records what it knows about a model in the model itself, so any runtime can run the file and rnnir
finds the same facts again: the caller's state pairs, each slot's initial value, the store structure an IR
program had (for bugs plain ONNX cannot express), and a fingerprint that binds saved states to the graph.
One module owns the keys so their spelling and meaning cannot drift apart between writers and readers.
"""

from __future__ import annotations

import onnx

__all__ = ["META_FINGERPRINT", "META_PAIRS", "META_PROGRAM", "META_SLOTS", "META_STATE_VERSION", "drop", "read", "write"]

#: JSON ``{state input: state output or null}``: the caller's contract (written by export and fix)
META_PAIRS = "rnnir.pairs"
#: JSON per slot: its initial value and storage facts (written by export and fix)
META_SLOTS = "rnnir.slots"
#: JSON store structure (chain, aliases, ordering) of an exported IR program that plain ONNX cannot express
META_PROGRAM = "rnnir.program"
#: sha256 of the graph a saved state belongs to
META_FINGERPRINT = "rnnir.fingerprint"
#: the state version the model declares: a saved state loads across graphs of the same version (versioning.py)
META_STATE_VERSION = "rnnir.state_version"


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
