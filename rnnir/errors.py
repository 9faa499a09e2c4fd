"""Exception types users can catch.

Every failure rnnir reports on purpose is an :class:`RnnirError`; a model that
cannot be read or analysed is a :class:`ModelError`, which names the model, the
offending value or node, and what to do about it.
"""

from __future__ import annotations


class RnnirError(Exception):
    """Base class of every error rnnir raises on purpose."""


class ModelError(RnnirError):
    """The model cannot be read or analysed (malformed, truncated, unsafe, inconsistent).

    ``model`` names the file (or ``<bytes>``/``<ModelProto>``), ``where`` the
    graph element involved when there is one.
    """

    def __init__(self, message: str, *, model: str | None = None, where: str | None = None) -> None:
        self.model = model
        self.where = where
        self.detail = message
        prefix = f"{model}: " if model else ""
        suffix = f" (at {where})" if where else ""
        super().__init__(f"{prefix}{message}{suffix}")


class PairingError(RnnirError):
    """A declared state pair names a graph input or output that does not exist."""


class IRError(RnnirError):
    """A Program is inconsistent: a builder was misused or a node refers to a foreign value."""


class ExportError(RnnirError):
    """A Program cannot be written as ONNX."""


class StateError(RnnirError):
    """Runtime state cannot be used: wrong model fingerprint, wrong shapes, missing slots."""
