"""Deploy what rnnir verified: the state pairs a serving stack must keep, and nothing it would have to guess.

    from rnnir.deploy import plan_deployment
    plan = plan_deployment("silero_vad.onnx")          # raises DeployRefused when a pair is not proven
    [(s.input, s.output, s.shape) for s in plan.states]

A serving stack that keeps state inside the server (Triton's sequence batcher with implicit state,
OpenVINO's stateful models) needs the same pairs rnnir finds, and checks none of them: given a swapped
pair it serves a wrong model without a word.  :func:`plan_deployment` is the gate every deploy path
goes through (:mod:`rnnir.deploy.triton`, :mod:`rnnir.deploy.openvino`):

* a pair any rule reports (a violated slice, or any error-level finding) is refused, always;
* a pair rnnir could not verify (SD009) is refused unless ``allow_unverified``;
* a pair rnnir would have to *guess* is refused even then: one found only by the naming convention or by
  position that rnnir did not verify, or no pair at all.  The refusal says which ``--pair IN=OUT`` to give:
  a declared pair is the user's statement of the contract, not rnnir's guess.

The package imports neither OpenVINO nor tritonclient: only the deploy command that needs one does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rnnir.errors import ModelError, RnnirError
from rnnir.ir.pairs import PairSource, StatePair

if TYPE_CHECKING:
    import onnx

    from rnnir.ir.core import Program
    from rnnir.passes import SliceVerdict, Verification

__all__ = ["DeployPlan", "DeployRefused", "DeployedState", "Refusal", "TensorDecl", "graph_io", "plan_deployment"]

#: pair sources that are rnnir's guess, not the caller's statement of the contract
GUESSED_SOURCES = (PairSource.NAME, PairSource.POSITION)


@dataclass(frozen=True)
class TensorDecl:
    """A graph input or output as the model declares it: ONNX element type and dims (int, symbol, or None)."""

    name: str
    elem_type: int
    shape: tuple[int | str | None, ...] | None


@dataclass(frozen=True)
class DeployedState:
    """One verified state pair, with the state input's declaration."""

    input: str
    output: str
    source: PairSource
    elem_type: int
    shape: tuple[int | str | None, ...] | None
    verified: bool  # False only when allow_unverified let an unverified, declared pair through


@dataclass(frozen=True)
class Refusal:
    """Why one pair (or the model) cannot be deployed, and what to type to get past it."""

    subject: str  # the pair ``in -> out``, or the model
    reason: str
    fix: str = ""

    def text(self) -> str:
        return f"{self.subject}: {self.reason}" + (f"; {self.fix}" if self.fix else "")


class DeployRefused(RnnirError):
    """The model's state cannot be deployed as rnnir knows it: a pair is violated, unverified, or a guess.

    The CLI exits 1 on it (a finding, as ``lint`` does), printing each refusal."""

    def __init__(self, model: str, refusals: Sequence[Refusal]) -> None:
        self.model = model
        self.refusals = tuple(refusals)
        super().__init__(f"{model}: deploy refused: " + "; ".join(r.text() for r in self.refusals))


@dataclass(frozen=True)
class DeployPlan:
    """What a deploy path writes: the model, its plain inputs/outputs and its verified states."""

    label: str
    model: onnx.ModelProto  # external data loaded
    program: Program
    verification: Verification
    states: tuple[DeployedState, ...]
    inputs: tuple[TensorDecl, ...]  # plain inputs (state inputs and initializers left out)
    outputs: tuple[TensorDecl, ...]  # plain outputs (state outputs left out)

    @property
    def pairs(self) -> dict[str, str]:
        return {s.input: s.output for s in self.states}


def graph_io(model: onnx.ModelProto) -> tuple[dict[str, TensorDecl], dict[str, TensorDecl]]:
    """The graph's inputs (initializers left out) and outputs, by name, in graph order."""

    def decl(vi: onnx.ValueInfoProto) -> TensorDecl:
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            return TensorDecl(vi.name, tt.elem_type, None)
        dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
        return TensorDecl(vi.name, tt.elem_type, dims)

    inits = {t.name for t in model.graph.initializer}
    inputs = {vi.name: decl(vi) for vi in model.graph.input if vi.name not in inits}
    outputs = {vi.name: decl(vi) for vi in model.graph.output}
    return inputs, outputs


def _pair_flags(pairs: Sequence[tuple[str, str | None]]) -> str:
    return " ".join(f"--pair {i}={o or ''}" for i, o in pairs)


def refusals(program: Program, verification: Verification, *, allow_unverified: bool) -> list[Refusal]:
    """Every reason the program's state cannot be deployed (empty: it can), in pair order."""
    from rnnir.passes import Severity, Verdict

    found: list[Refusal] = []
    pairs: list[StatePair] = list(program.state_pairs)
    if not pairs:
        from rnnir.analysis.suggest import suggested_pairs

        suggested = [(p.input, p.output) for p in suggested_pairs(program)]
        fix = (
            f"if the model keeps state, say which input is fed from which output: {_pair_flags(suggested)} (suggested by the dataflow)"
            if suggested else "if the model keeps state, say which input is fed from which output with --pair IN=OUT"
        )
        return [Refusal("the model", "rnnir found no state pair, so there is no state to deploy and none it will guess", fix)]
    by_pair: dict[tuple[str, str | None], list[SliceVerdict]] = {}
    for v in verification.slices:
        by_pair.setdefault((v.input, v.output), []).append(v)
    for pair in pairs:
        subject = f"pair {pair.input} -> {pair.output or '<nothing>'}"
        if pair.output is None:
            found.append(Refusal(subject, "the state input is fed from no output, so a server cannot carry it across calls"))
            continue
        verdicts = by_pair.get((pair.input, pair.output), [])
        violated = [v for v in verdicts if v.verdict is Verdict.VIOLATED]
        unverified = [v for v in verdicts if v.verdict is Verdict.UNVERIFIED]
        if violated:
            findings: dict[tuple[tuple[str, ...], str], list[str]] = {}
            for v in violated:  # one finding often names several slices (an h/c swap names both)
                findings.setdefault((v.codes, v.reason), []).append(v.slice)
            for (codes, reason), slices in findings.items():
                code = "/".join(codes) or "violated"
                fix = f"fix the model (see rnnir explain {codes[0]}; rnnir fix may repair it)" if codes else "fix the model"
                found.append(Refusal(subject, f"{code} ({', '.join(slices)}): {reason}", fix))
            continue
        guessed = pair.source in GUESSED_SOURCES
        if unverified:
            why = "; ".join(f"{v.slice}: {v.reason}" for v in unverified)
            if not allow_unverified:
                fix = "check the pair yourself, then give --allow-unverified" + (f" and declare it: {_pair_flags([(pair.input, pair.output)])}" if guessed else "")
                found.append(Refusal(subject, f"SD009 not verified ({why})", fix))
            elif guessed:
                found.append(Refusal(
                    subject, f"only a guess from the model's {pair.source.value}s ({pair.reason}) and not verified ({why}); rnnir will not deploy a guess",
                    f"declare it if it is right: {_pair_flags([(pair.input, pair.output)])}",
                ))
        elif not verdicts and guessed:  # no slice verdict at all: nothing proves the guess
            found.append(Refusal(subject, f"only a guess from the model's {pair.source.value}s ({pair.reason})", f"declare it: {_pair_flags([(pair.input, pair.output)])}"))
    seen = {r.reason for r in found}
    for d in verification.diagnostics:  # an error not tied to one slice (or tied to a slice already refused) still blocks
        if d.severity is Severity.ERROR and not any(d.message in s for s in seen):
            found.append(Refusal(f"slot {d.slot}" if d.slot else "the model", f"{d.code} {d.message}", d.hint))
    return found


def plan_deployment(
    model: str | os.PathLike[str],
    pairs: Mapping[str, str | None] | None = None,
    *,
    allow_unverified: bool = False,
) -> DeployPlan:
    """Load, lint and gate ``model``: a :class:`DeployPlan` when every pair is proven (or, with
    ``allow_unverified``, declared), else :class:`DeployRefused` listing every refusal.

    ``pairs`` declares the pairs (``--pair``), exactly as for :func:`rnnir.load`.  Raises
    :class:`~rnnir.ModelError` for a model rnnir cannot read (and for IR text: there is no graph to serve).
    """
    from rnnir import passes
    from rnnir.lower import Policy, lower, read_model
    from rnnir.passes import Verdict
    from rnnir.util.gcpause import paused_gc

    label = os.fspath(model)
    if label.endswith(".rnnir"):
        raise ModelError("IR text has no ONNX graph to deploy; deploy the .onnx model it describes", model=label)
    with paused_gc():
        src = read_model(model)
        program = lower(src, pairs, Policy.named("dynamic", "fanout"))  # the model as a server runs it
    verification = passes.verify(program)
    problems = refusals(program, verification, allow_unverified=allow_unverified)
    if problems:
        raise DeployRefused(label, problems)
    onnx_model = src.with_external_data()
    inputs, outputs = graph_io(onnx_model)
    unverified = {v.input for v in verification.slices if v.verdict is not Verdict.VERIFIED}
    states = []
    for pair in program.state_pairs:
        assert pair.output is not None  # refused above
        decl = inputs.get(pair.input)
        if decl is None or pair.output not in outputs:
            raise ModelError(f"state pair {pair.input} -> {pair.output} names no graph input/output", model=label)
        states.append(DeployedState(pair.input, pair.output, pair.source, decl.elem_type, decl.shape, pair.input not in unverified))
    state_in = {s.input for s in states}
    state_out = {s.output for s in states}
    return DeployPlan(
        label=label,
        model=onnx_model,
        program=program,
        verification=verification,
        states=tuple(states),
        inputs=tuple(d for n, d in inputs.items() if n not in state_in),
        outputs=tuple(d for n, d in outputs.items() if n not in state_out),
    )
