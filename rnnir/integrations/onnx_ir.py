"""rnnir's verification as an onnx-ir pass, for compilers that run ``onnx_ir.passes.PassManager`` pipelines.

    import onnx_ir as ir
    from onnx_ir.passes.common import RemoveUnusedNodesPass
    from rnnir.integrations.onnx_ir import VerifyStatePass

    verify = VerifyStatePass(strict=True)            # raise on an error-level finding
    manager = ir.passes.PassManager([RemoveUnusedNodesPass(), verify])
    manager(ir.load("model.onnx"))                   # StateVerificationError if the optimised model is wrong
    verify.last_result.diagnostics                   # the findings of the last run (also without strict)

The pass is an analysis: it never changes the model.  It declares so the way onnx-ir's pass table says a
side-effect-only pass does (``in_place=True``: it returns the model it was given; ``changes_input=False``),
so a pipeline that checks those properties, or :func:`onnx_ir.passes.functionalize`, treats it right.  The
model is serialised with :func:`onnx_ir.to_proto` and linted by rnnir exactly as ``rnnir lint`` would
(:func:`rnnir.passes.verify`); the findings come back on the returned :class:`StateVerificationResult` (a
``PassResult``) and on the pass's ``last_result``, since a ``PassManager`` returns a plain ``PassResult``.

Needs the ``onnx-ir`` package (``pip install 'rnnir[onnx-ir]'``); rnnir imports this module only when asked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import onnx_ir as ir
from onnx_ir.passes import PassBase, PassResult

from rnnir.errors import RnnirError

if TYPE_CHECKING:
    from rnnir.passes import Diagnostic, Verification

__all__ = ["StateVerificationError", "StateVerificationResult", "VerifyStatePass"]


class StateVerificationError(RnnirError):
    """``VerifyStatePass(strict=True)`` found error-level findings; ``result`` holds them all."""

    def __init__(self, result: StateVerificationResult) -> None:
        self.result = result
        errors = result.errors
        head = f"{result.label}: {len(errors)} state error(s) rnnir found"
        super().__init__(head + "".join(f"\n  {d.code} {d.message}" for d in errors))


@dataclasses.dataclass
class StateVerificationResult(PassResult):
    """onnx-ir's ``PassResult`` (the same model, ``modified=False``) with rnnir's findings and verdicts."""

    verification: Verification | None = None
    label: str = "<onnx_ir.Model>"

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return [] if self.verification is None else list(self.verification.diagnostics)

    @property
    def errors(self) -> list[Diagnostic]:
        from rnnir.passes import Severity

        return [d for d in self.diagnostics if d.severity is Severity.ERROR]

    @property
    def ok(self) -> bool:
        return not self.errors


class VerifyStatePass(PassBase):
    """Lint the model's state with rnnir; never modifies it.

    ``pairs`` declares the state pairs (``{"h0": "hn"}``) as ``--pair`` does; ``select``/``ignore`` choose
    rules as ``rnnir lint`` does; ``strict=True`` raises :class:`StateVerificationError` when an
    error-level finding remains (``strict_unverified=True`` also makes SD009/SD010 errors, as ``lint --strict``).
    """

    def __init__(
        self,
        *,
        strict: bool = False,
        pairs: Mapping[str, str | None] | None = None,
        select: Sequence[str] | None = None,
        ignore: Sequence[str] | None = None,
        strict_unverified: bool = False,
    ) -> None:
        self.strict = strict
        self.pairs = dict(pairs) if pairs is not None else None
        self.select = list(select) if select is not None else None
        self.ignore = list(ignore) if ignore is not None else None
        self.strict_unverified = strict_unverified
        self.last_result: StateVerificationResult | None = None

    @property
    def in_place(self) -> bool:
        return True  # returns the model it was given ...

    @property
    def changes_input(self) -> bool:
        return False  # ... and never changes it: onnx-ir's "side-effect-only pass"

    def call(self, model: ir.Model) -> StateVerificationResult:
        import rnnir
        from rnnir import passes

        label = model.graph.name or "<onnx_ir.Model>"
        proto = ir.to_proto(model)
        program = rnnir.load(proto, self.pairs, label=label)
        verification = passes.verify(program, select=self.select, ignore=self.ignore, strict=self.strict_unverified)
        result = StateVerificationResult(model, False, verification=verification, label=label)
        self.last_result = result
        if self.strict and not result.ok:
            raise StateVerificationError(result)
        return result
