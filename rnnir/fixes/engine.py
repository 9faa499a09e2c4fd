"""Model edits derived from rnnir's analysis: expose a recurrence's hidden state, repair write-back findings.

    import rnnir
    result = rnnir.fix("encoder.onnx", expose_state=True)     # stateless export -> streaming model
    result = rnnir.fix("model.onnx")                           # the safe fixes of every rule in FIXES
    for edit in result.edits: print(edit)                      # what changed, and whether it was certain
    onnx.save(result.model, "fixed.onnx")

Exposing state
--------------
A recurrence whose initial state is absent or constant zeros (as exporters
write ``nn.GRU(x)`` without ``h0``) and whose final state nobody pairs forgets
everything between calls.  :func:`fix` with ``expose_state=True`` gives each
such state a graph input and a graph output, wires them to the op's
``initial_h``/``initial_c`` and ``Y_h``/``Y_c`` ports (through ``If`` branches:
the branch that holds the op yields its final state, the other branch hands the
state back unchanged; ops of the same kind and size in the two alternatives of
one ``If`` share one state, as silero-vad's 8 kHz and 16 kHz LSTMs do), and
records the pairs in the ``rnnir.pairs``/``rnnir.slots`` metadata as
:func:`rnnir.export` does.  Names follow a convention rnnir's pairing
recognises: ``h0``/``c0`` -> ``hn``/``cn`` for one recurrence,
``<op>_h0`` -> ``<op>_hn`` per op when there are several, and ``state`` ->
``stateN`` when ``packed=True`` puts every state slice in one tensor
(silero-style, ``[h, c, h', c', ...]`` along axis 0).

A final state the model already returns (as itself or through Identity: SD010's
case) is paired with the new input instead of being returned a second time.
Each state port is its own decision: an LSTM whose h a pair already carries gets
only its c exposed.

Default value of a new state input: ONNX graph inputs have no default values
except through an initializer of the same name, which onnxruntime treats as an
input the caller may override (IR version 4 and later).  onnxruntime's
``run()`` accepts such an override, but its IOBinding refuses to bind a numpy
array to it (``bind_input``: ``Failed to find NodeArg ... in the def list``,
onnxruntime 1.32; an ``OrtValue`` binds), so :class:`rnnir.runtime.StatefulSession`
runs such a model but fails when a state is fed explicitly (as
``check_multicall``'s broken variants do).  So by default a new state input is
*required*, with zeros recorded as the slot's ``init`` in the ``rnnir.slots``
metadata; ``StatefulSession`` feeds zeros on the first call by itself.
``state_defaults=True`` (``--state-defaults``) adds the same-name initializer as
well, for callers that use ``run()`` and never feed the state, when the state's
shape is fully static (an initializer cannot have a symbolic batch dim); it is
also the only way a non-zero constant initial state is exposed (as the default).

The wiring is planned on :class:`~rnnir.fixes.state_plan.StatePlan` values (where the initial state is
consumed, which values are the final state, per If alternative).  A cell
written as plain ops that starts from zeros (rnnir.lower.cells) is exposed the
same way: the new input replaces the zeros at every reader, in the main graph.

Repairing findings
------------------
Each fixable rule has a planner (:mod:`rnnir.fixes.planners`, one module per rule) that turns a diagnostic
into an ONNX (or ``rnnir.ir`` IR text) edit; see :data:`~rnnir.fixes.catalogue.FIXES`.  A fix is *safe* when its
result is certain and leaves the first call's other outputs as they were (the
slices of a Concat put back in the order the slot is read; a chained output
store re-pointed at the value the slot store reads; the op's own final state
instead of a step of its output sequence; a missing state output added),
*unsafe* when a choice was made for the user (which op's state to keep, whether
a constant start was a reset) or the model's interface changes (a new required
input); unsafe fixes are only applied with ``unsafe=True``.  Every applied fix is checked by linting again: a
fix that does not clear its finding is rolled back and reported as skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import onnx

from rnnir import passes
from rnnir.errors import RnnirError
from rnnir.fixes.catalogue import FIXES
from rnnir.fixes.edits import Edit, FixContext, FixError, FixResult, Plan, refusal
from rnnir.fixes.expose import expose
from rnnir.fixes.onnx_edit import check_model
from rnnir.fixes.planners import PLANNERS
from rnnir.ir.core import Program
from rnnir.lower import Policy, lower
from rnnir.onnxio.metadata import META_FINGERPRINT as _META_FINGERPRINT
from rnnir.onnxio.metadata import write as _set_meta
from rnnir.onnxio.source import graph_fingerprint, read_model
from rnnir.passes.catalogue import selector_code  # a rule name (wrong-slot) is its code, as everywhere codes are taken

if TYPE_CHECKING:
    from rnnir.passes.diagnostics import Diagnostic

__all__ = ["fix"]

#: at most this many fixes (one per round: each round plans on a fresh lowering)
_MAX_ROUNDS = 32


def fix(
    model: object,
    expose_state: bool = False,
    codes: Sequence[str] | None = None,
    unsafe: bool = False,
    *,
    packed: bool = False,
    state_defaults: bool = False,
    pairs: Mapping[str, str | None] | None = None,
) -> FixResult:
    """Edit ``model`` (a path, bytes or ``onnx.ModelProto``; never changed in place) and say what changed.

    ``expose_state`` exposes every hidden recurrent state as an input/output pair (``packed``: one
    ``state`` tensor; ``state_defaults``: a same-name initializer as each new input's default, see the module
    docstring).  ``codes`` chooses the rules whose findings are repaired (default: every rule of
    :data:`~rnnir.fixes.catalogue.FIXES`; ``[]`` repairs none); ``unsafe`` also applies fixes that are not certain.  ``pairs``
    declares the state pairs as for :func:`rnnir.load`.  Raises :class:`ModelError` for an unreadable
    model and :class:`FixError` when an edit would break it.
    """
    src = read_model(model)  # type: ignore[arg-type]
    work = onnx.ModelProto()
    work.CopyFrom(src.with_external_data())
    result = FixResult(work)
    chosen = list(FIXES) if codes is None else [selector_code(c) for c in codes]
    unknown = [c for c in chosen if c not in FIXES]
    if unknown:
        raise FixError(f"no automatic fix for {', '.join(unknown)}; fixable codes: {', '.join(FIXES)}")
    if expose_state:
        expose(work, result, packed=packed, defaults=state_defaults, pairs=pairs, label=src.label)
        chosen = [c for c in chosen if not FIXES[c].exposes_state]  # just done, with the caller's options; what is left says why
    if chosen:
        _repair(work, result, chosen, unsafe, pairs, src.label)
    if result.edits:
        check_model(work, src.with_external_data(), src.label)
        if any(p.key == _META_FINGERPRINT for p in work.metadata_props):
            _set_meta(work, _META_FINGERPRINT, graph_fingerprint(work))
    return result


def _lint(model: onnx.ModelProto, pairs: Mapping[str, str | None] | None, label: str, codes: Sequence[str]) -> tuple[Program, list[Diagnostic]]:
    program = lower(read_model(model, label=label), pairs, Policy())
    # errors only, unless the fix says it repairs warnings too (FixInfo.repairs_warnings)
    found = [d for d in passes.run(program) if d.code in codes]
    return program, [d for d in found if d.severity.value == "error" or FIXES[d.code].repairs_warnings]


def _finding_key(d: Diagnostic) -> tuple[str, str | None, str]:
    return (d.code, d.slot, d.message)


def _repair(model: onnx.ModelProto, result: FixResult, codes: Sequence[str], unsafe: bool, pairs: Mapping[str, str | None] | None, label: str) -> None:
    """Fix one finding at a time and lint again, so every plan is made on the model as it now is."""
    refused: dict[tuple[str, str | None, str], Edit] = {}
    for _ in range(_MAX_ROUNDS):
        program, diags = _lint(model, pairs, label, codes)
        progress = False
        for d in diags:
            key = _finding_key(d)
            if key in refused:
                continue
            plan = _plan_for(FixContext(model, program, pairs, label), d)
            if isinstance(plan, Edit):
                refused[key] = plan
                continue
            if not plan.edit.safe and not unsafe:
                refused[key] = Edit(**{**plan.edit.__dict__, "applied": False, "reason": "not certain: pass unsafe=True (--unsafe-fixes) to apply it"})
                continue
            backup = onnx.ModelProto()
            backup.CopyFrom(model)
            detail = plan.apply() or []
            try:
                _, after = _lint(model, pairs, label, codes)
                cleared = not any(a.code == d.code and a.slot == d.slot for a in after)
            except RnnirError as exc:
                cleared, after = False, []
                plan.edit = Edit(**{**plan.edit.__dict__, "reason": f"the edited model cannot be analysed: {exc}"})
            if not cleared:
                model.CopyFrom(backup)
                refused[key] = Edit(**{**plan.edit.__dict__, "applied": False, "fixable": False, "reason": plan.edit.reason or "the edit did not clear the finding; rolled back"})
                continue
            result.edits.append(plan.edit)
            result.edits.extend(detail)
            progress = True
            break  # the program changed: plan the next fix on a fresh lowering
        if not progress:
            break
    result.skipped.extend(refused.values())


def _plan_for(ctx: FixContext, d: Diagnostic) -> Plan | Edit:
    registered = PLANNERS.get(d.code)
    if registered is None:
        return refusal(d, "no automatic fix for this rule", safe=False)
    try:
        return registered.plan(ctx, d)
    except (KeyError, IndexError, ValueError) as exc:
        return registered.info.refuse(d, f"rnnir could not plan the edit ({type(exc).__name__}: {exc})")
