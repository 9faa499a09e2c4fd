"""Every ``metadata_props`` key rnnir reads or writes, and the three ways it touches them.

rnnir records what it knows about a model in the model itself, so any runtime can run the file and rnnir
finds the same facts again: the caller's state pairs, each slot's initial value, the IR text of a program whose
stores plain ONNX cannot express, and a fingerprint that binds saved states to the graph.
One module owns the keys so their spelling and meaning cannot drift apart between writers and readers.
"""

from __future__ import annotations

import onnx

__all__ = ["META_FINGERPRINT", "META_IR", "META_PAIRS", "META_PROGRAM_V0", "META_SLOTS", "META_STATE_VERSION", "drop", "read", "write"]

#: JSON ``{state input: state output or null}``: the caller's contract (written by export and fix)
META_PAIRS = "rnnir.pairs"
#: JSON per slot: its initial value and storage facts (written by export and fix)
META_SLOTS = "rnnir.slots"
#: the IR text (rnnir.irtext, format version 1) of an exported program whose stores plain ONNX cannot express
#: (chain, aliases, ordering); lowering takes the stores from it (rnnir.structure)
META_IR = "rnnir.ir"
#: the JSON store structure rnnir 0.1 wrote before ``rnnir.ir``: refused with a message saying so, never read
META_PROGRAM_V0 = "rnnir.program"
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
