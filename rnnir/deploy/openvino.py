"""``rnnir deploy openvino``: an OpenVINO stateful model built from the verified pairs, and the proof it is right.

    rnnir deploy openvino silero_vad_openvino_16k.onnx -o vad.xml --calls 50

OpenVINO's make-stateful transformation (``openvino._offline_transformations.apply_make_stateful_transformation``)
turns each ``{state input: state output}`` pair into an internal variable; given a swapped or wrong pair it
builds a wrong stateful model without a word.  Here the pairs are the ones :func:`rnnir.deploy.plan_deployment`
let through, the model is saved (``.xml`` + ``.bin``, weights not compressed), and then read back and run:
its infer request (which keeps the state across calls) against onnxruntime's hand loop
(:class:`rnnir.runtime.StatefulSession`, the state fed back by rnnir) on the same stream of calls, and
``reset_state()`` must bring back the first call.  The largest difference per output is reported with the
inference precision OpenVINO used: f32 by default, since its CPU default (bf16 or f16 where the CPU has them)
differs from onnxruntime by ~1e-3 on silero-vad's 50 calls, which says nothing about the state.

A state input whose shape is symbolic (a batch dim) is fixed to the shape the check's stream gives it, and
the same symbol in every other input with it: OpenVINO's variables need a static shape.  The saved model
keeps those shapes.

OpenVINO is imported only here, and only when this command runs (``pip install rnnir[openvino]``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rnnir.deploy import DeployPlan
from rnnir.deploy.inputs import InputError, check_flag_names, model_interface, prepare_inputs
from rnnir.errors import ModelError, RnnirError

if TYPE_CHECKING:
    import numpy as np

    from rnnir.deploy.inputs import InputFlags
    from rnnir.runtime.session import StatefulSession

__all__ = ["OpenVinoCheck", "OutputDiff", "PRECISIONS", "check_stateful", "convert", "require_openvino", "stream_feeds"]

#: --precision -> OpenVINO's INFERENCE_PRECISION_HINT value (None: the device's default)
PRECISIONS: dict[str, str | None] = {"f32": "f32", "f16": "f16", "bf16": "bf16", "default": None}
#: default largest |diff| per output: f32 agrees with onnxruntime to float rounding; lower precisions do not
DEFAULT_TOL = {"f32": 1e-5}
LOW_PRECISION_TOL = 1e-2


class OpenVinoError(RnnirError):
    """OpenVINO is missing, or cannot convert or run the model."""


def require_openvino() -> Any:
    """The ``openvino`` module, or a clear error saying how to get it."""
    try:
        import openvino
    except ImportError:
        raise OpenVinoError("rnnir deploy openvino needs OpenVINO: pip install 'rnnir[openvino]' (or pip install openvino)") from None
    return openvino


#: one failed op of OpenVINO's conversion report: ``-- Conv-15 with a message:`` then the node's name and why
_FAILED_OP = re.compile(r"^-- (?P<op>[A-Za-z0-9_]+)-(?P<opset>\d+) with a message:\s*$", re.M)
_NODE = re.compile(r"<Node\((?P<type>[^)]*)\): (?P<name>[^>]*)>")
#: lines of a failed op's report that are OpenVINO's framing, not the reason
_FRAMING = ("[ONNX Frontend]", "While validating", "FrontEnd API failed", "Check '", "Exception from")


def conversion_message(text: str) -> str:
    """OpenVINO's conversion report cut to the ops that failed: ``Conv '/x/Conv_output_0' (Conv-15): why``."""
    found = list(_FAILED_OP.finditer(text))
    if not found:
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        return lines[-1] if lines else "no reason given"
    parts = []
    for k, m in enumerate(found):
        body = text[m.end() : found[k + 1].start() if k + 1 < len(found) else len(text)]
        body = body.split("\nSummary:")[0]
        node = _NODE.search(body)
        why = [ln.strip() for ln in body.splitlines() if ln.strip() and not ln.strip().startswith(_FRAMING)]
        reason = why[-1] if why else "no reason given"
        where = f" producing {node.group('name')!r}" if node else ""
        parts.append(f"{m.group('op')}{where} (opset {m.group('opset')}): {reason}")
    return parts[0] + ("" if len(parts) == 1 else f" (and {len(parts) - 1} more: " + "; ".join(parts[1:]) + ")")


def convert(path: str | os.PathLike[str]) -> Any:
    """``openvino.convert_model(path)``; a model OpenVINO cannot convert is one :class:`ModelError` naming the op."""
    ov = require_openvino()
    try:
        return ov.convert_model(os.fspath(path))
    except Exception as exc:  # noqa: BLE001 - OpenVINO raises its own frontend types
        raise ModelError(f"OpenVINO cannot convert the model: {conversion_message(str(exc))}", model=os.fspath(path)) from None


def _port(ports: Sequence[Any], name: str) -> Any:
    return next((p for p in ports if name in p.get_names()), None)


def make_stateful(model: Any, plan: DeployPlan, state_shapes: Mapping[str, tuple[int, ...]]) -> None:
    """Fix symbolic state shapes (and their symbols in other inputs), then make each verified pair a variable."""
    from openvino._offline_transformations import apply_make_stateful_transformation

    symbols: dict[str, int] = {}
    for s in plan.states:
        for dim, value in zip(s.shape or (), state_shapes.get(s.input, ()), strict=False):
            if isinstance(dim, str):
                symbols[dim] = value
    declared = {t.name: t.shape for t in plan.inputs} | {s.input: s.shape for s in plan.states}
    new_shapes: dict[str, list[int]] = {}
    for name, shape in declared.items():
        if name in state_shapes:
            new_shapes[name] = list(state_shapes[name])
        elif shape is not None and any(isinstance(d, str) and d in symbols for d in shape):
            new_shapes[name] = [symbols[d] if isinstance(d, str) and d in symbols else d if isinstance(d, int) and d > 0 else -1 for d in shape]
    ports = list(model.inputs)
    reshape = {}
    for name, dims in new_shapes.items():
        port = _port(ports, name)
        if port is not None and port.get_partial_shape().is_dynamic:
            reshape[port] = dims
    if reshape:
        model.reshape(reshape)
    missing = [n for s in plan.states for n, ports_ in ((s.input, model.inputs), (s.output, model.outputs)) if _port(list(ports_), n) is None]
    if missing:
        raise OpenVinoError(f"OpenVINO's converted model has no tensor named {', '.join(map(repr, missing))}: cannot make its state internal")
    apply_make_stateful_transformation(model, plan.pairs)


#: calls of the check when --calls is not given and no data file sets the length
DEFAULT_CALLS = 50


def stream_feeds(plan: DeployPlan, flags: InputFlags, calls: int | None, chunk: int) -> tuple[list[dict[str, np.ndarray]], StatefulSession]:
    """The calls ``rnnir run`` would make with these flags (input context already prepended), and an onnxruntime
    session of the plan's model without any context, ready to run them."""
    from rnnir.check import multicall as testing
    from rnnir.check import streaming
    from rnnir.runtime.context import ContextKeeper
    from rnnir.runtime.session import StatefulSession

    interface = model_interface(plan.program)
    problems = check_flag_names(flags, interface)
    state_inputs = {s.input for s in plan.states}
    session = StatefulSession(
        plan.program, cast_state=True, context=flags.context or None,
        state_shapes={n: d for n, d in flags.shapes.items() if n in state_inputs} or None,
    )
    if not problems:
        prepared, problems = prepare_inputs(flags, session, interface, testing.time_axes(session), calls, chunk)
    if problems:
        raise InputError(f"{plan.label}: " + "; ".join(p.replace("\n", " ") for p in problems))
    try:
        chunks, _ = streaming.make_chunks(
            session, prepared.stream or None, calls=calls if calls is not None else DEFAULT_CALLS, chunk=chunk, input_shapes=prepared.shapes, input_values=prepared.values
        )
    except testing.StreamError as exc:
        raise InputError(f"{plan.label}: {exc}") from None
    if len(chunks) < 2:
        raise InputError(f"{plan.label}: the stream makes {len(chunks)} call(s); the check needs at least 2 (more data, or a smaller --chunk)")
    if session.context:
        keeper = ContextKeeper(session.context, {c.input: session.inputs[c.input].dtype for c in session.context})
        full = []
        for feed in chunks:
            extended, pending = keeper.extend(feed, plan.label)
            keeper.commit(pending)
            full.append(dict(extended))
        chunks = full
    plain = StatefulSession(plan.program, cast_state=True, state_shapes=prepared.state_shapes or None)
    return chunks, plain


@dataclass(frozen=True)
class OutputDiff:
    name: str
    max_abs_diff: float
    ok: bool

    def to_json(self) -> dict[str, Any]:
        return {"output": self.name, "max_abs_diff": self.max_abs_diff, "ok": self.ok}


@dataclass
class OpenVinoCheck:
    """The stateful OpenVINO model against onnxruntime's hand loop on the same calls."""

    xml: str
    pairs: dict[str, str]
    calls: int
    precision: str  # what OpenVINO reports it used (f32, bf16, ...)
    tolerance: float
    outputs: list[OutputDiff] = field(default_factory=list)
    reset: OutputDiff | None = None  # the first call again after reset_state()

    @property
    def ok(self) -> bool:
        return all(d.ok for d in self.outputs) and (self.reset is None or self.reset.ok)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "model": self.xml,
            "pairs": dict(sorted(self.pairs.items())),
            "calls": self.calls,
            "inference_precision": self.precision,
            "tolerance": self.tolerance,
            "outputs": [d.to_json() for d in self.outputs],
            "reset_state": self.reset.to_json() if self.reset else None,
            "status": "pass" if self.ok else "fail",
        }

    def text(self) -> str:
        pairs = ", ".join(f"{i} -> {o}" for i, o in sorted(self.pairs.items()))
        lines = [
            f"{self.xml}: stateful OpenVINO model ({pairs})",
            f"  checked against onnxruntime's loop over {self.calls} calls, INFERENCE_PRECISION_HINT {self.precision}, tolerance {self.tolerance:g}",
        ]
        width = max((len(d.name) for d in self.outputs), default=0)
        for d in self.outputs:
            lines.append(f"  {d.name.ljust(width)}  max |diff| {d.max_abs_diff:.3g}  {'ok' if d.ok else 'TOO LARGE'}")
        if self.reset is not None:
            lines.append(f"  reset_state(), then the first call again: max |diff| {self.reset.max_abs_diff:.3g}  {'ok' if self.reset.ok else 'STATE NOT RESET'}")
        lines.append("pass" if self.ok else "fail: the stateful OpenVINO model does not compute what the model computes with its state fed back")
        return "\n".join(lines) + "\n"


def _max_diff(a: Any, b: Any) -> float:
    import numpy as np

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        return math.inf
    if x.size == 0:
        return 0.0
    d = np.abs(x - y)
    both_nan = np.isnan(x) & np.isnan(y)
    d[both_nan] = 0.0
    d[np.isnan(d)] = math.inf
    return float(d.max())


def check_stateful(
    xml: str | os.PathLike[str], plan: DeployPlan, feeds: Sequence[Mapping[str, Any]], ort_session: StatefulSession,
    *, precision: str = "f32", tolerance: float | None = None, device: str = "CPU",
) -> OpenVinoCheck:
    """Read the saved model back, run it as one stream, and compare every plain output with ``ort_session``'s."""
    ov = require_openvino()
    tol = tolerance if tolerance is not None else DEFAULT_TOL.get(precision, LOW_PRECISION_TOL)
    config = {} if PRECISIONS[precision] is None else {"INFERENCE_PRECISION_HINT": PRECISIONS[precision]}
    core = ov.Core()
    try:
        compiled = core.compile_model(core.read_model(os.fspath(xml)), device, config)
    except Exception as exc:  # noqa: BLE001 - OpenVINO's runtime types
        raise OpenVinoError(f"{xml}: OpenVINO cannot compile the stateful model: {' '.join(str(exc).split())[-400:]}") from None
    used = str(compiled.get_property("INFERENCE_PRECISION_HINT"))
    used = {"<Type: 'float32'>": "f32", "<Type: 'bfloat16'>": "bf16", "<Type: 'float16'>": "f16"}.get(used, used)
    request = compiled.create_infer_request()
    request.reset_state()
    ort_session.reset()
    names = [o for o in ort_session.output_names if o not in set(plan.pairs.values())]
    ports = {n: _port(list(compiled.outputs), n) for n in names}
    worst = dict.fromkeys(names, 0.0)
    first_ov: dict[str, Any] = {}
    try:
        for k, feed in enumerate(feeds):
            expected = ort_session.run_dict(dict(feed))
            got = request.infer({n: v for n, v in feed.items()})
            for n in names:
                value = got[ports[n]] if ports[n] is not None else None
                worst[n] = max(worst[n], math.inf if value is None else _max_diff(value, expected[n]))
                if k == 0 and value is not None:
                    first_ov[n] = value.copy()
        request.reset_state()
        again = request.infer(dict(feeds[0]))
    except Exception as exc:  # noqa: BLE001 - OpenVINO's runtime types
        if isinstance(exc, RnnirError):
            raise
        raise OpenVinoError(f"{xml}: OpenVINO cannot run the stateful model: {' '.join(str(exc).split())[-400:]}") from None
    reset = max((_max_diff(again[ports[n]], first_ov[n]) for n in names if n in first_ov), default=0.0)
    return OpenVinoCheck(
        xml=os.fspath(xml), pairs=plan.pairs, calls=len(feeds), precision=used, tolerance=tol,
        outputs=[OutputDiff(n, worst[n], worst[n] <= tol) for n in names],
        reset=OutputDiff("reset_state", reset, reset <= tol),
    )


def save(model: Any, xml: str | os.PathLike[str]) -> Path:
    """``openvino.save_model`` with the weights kept in their own precision (its default compresses them to f16)."""
    ov = require_openvino()
    path = Path(xml)
    if path.suffix != ".xml":
        raise OpenVinoError(f"{xml}: an OpenVINO model is written as NAME.xml (its weights go to NAME.bin beside it)")
    if not path.resolve().parent.is_dir():
        raise OpenVinoError(f"{xml}: no folder {str(path.parent)!r} to write into")
    ov.save_model(model, os.fspath(path), compress_to_fp16=False)
    return path
