"""What a :class:`~rnnir.runtime.StatefulSession` knows of its model, shared by every instance of it: the
graph's inputs and outputs, the state pairs as slots, the inputs that feed a recurrent op's time and batch
axes, and the onnxruntime session."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import onnx
import onnxruntime as ort

from rnnir.errors import ModelError, StateError
from rnnir.ir.attributes import SlotInit
from rnnir.ir.core import Program
from rnnir.ir.pairs import StatePair
from rnnir.runtime.versioning import model_state_version

if TYPE_CHECKING:
    from rnnir.lower import ModelSource

__all__ = ["DEFAULT_MAX_SLOT_BYTES", "IOSpec", "RecurrentInput", "SessionModel", "SlotSpec"]

# A slot larger than this is refused (StatefulSession(max_slot_bytes=...), `rnnir run --max-slot-mb`):
# a 200-byte model can declare a state of terabytes, and allocating it would take the machine down.
DEFAULT_MAX_SLOT_BYTES = 256 * 2**20


@dataclass(frozen=True)
class IOSpec:
    """A graph input or output: numpy dtype and declared shape (ints, symbols, None for unknown)."""

    name: str
    dtype: np.dtype | None
    shape: tuple[int | str | None, ...] | None


@dataclass(frozen=True)
class SlotSpec:
    """One state pair as the runtime keeps it."""

    input: str
    output: str | None
    dtype: np.dtype
    shape: tuple[int | str | None, ...] | None
    init: SlotInit
    pair: StatePair = field(compare=False, repr=False)
    output_dtype: np.dtype | None = None  # as the graph output declares it



def _np_dtype(elem_type: int) -> np.dtype | None:
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return None


def _unbindable(vi: onnx.ValueInfoProto) -> str | None:
    """Why onnxruntime's IOBinding, which every call goes through, cannot take this input or output; None if it can.

    Left to the call, onnxruntime refuses such a value only then, with a bare RuntimeError ("Only binding Tensors is
    currently supported").
    """
    kind = vi.type.WhichOneof("value")
    if kind is None:
        return None  # no type declared: onnxruntime infers a tensor or refuses the model at load
    if kind != "tensor_type":
        return f"a {kind.removesuffix('_type').replace('_', ' ')}, not a tensor"
    elem = vi.type.tensor_type.elem_type
    if not elem:
        return None  # undefined: onnxruntime refuses the model at load, with its own message
    if elem == onnx.TensorProto.STRING:
        return "a string tensor"
    dtype = _np_dtype(elem)
    if dtype is None or dtype.kind not in "biuf":
        return f"a {onnx.helper.tensor_dtype_to_string(elem).removeprefix('TensorProto.').lower()} tensor, which numpy cannot hand to onnxruntime"
    return None


def _io_spec(vi: onnx.ValueInfoProto) -> IOSpec:
    tt = vi.type.tensor_type
    dtype = _np_dtype(tt.elem_type) if tt.elem_type else None
    if not tt.HasField("shape"):
        return IOSpec(vi.name, dtype, None)
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
    return IOSpec(vi.name, dtype, dims)


@dataclass(frozen=True)
class RecurrentInput:
    """A graph input that reaches a recurrent op's ``X`` through layout-only ops: where its time and batch axes are."""

    input: str
    time_axis: int
    batch_axis: int
    node: str


def _producers(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    return {o: node for node in model.graph.node for o in node.output}


def _recurrent_inputs(model: onnx.ModelProto, program: Program) -> list[RecurrentInput]:
    """Graph inputs feeding a recurrent ``X`` through Identity/Cast/Transpose, with the axes they map to."""
    producers = _producers(model)
    graph_inputs = {vi.name for vi in model.graph.input}
    found: list[RecurrentInput] = []
    for rec in program.recurrents:
        node = rec.onnx_node
        if node is None or not node.input:
            continue
        name = node.input[0]
        time_axis, batch_axis = (1, 0) if rec.layout else (0, 1)
        while name not in graph_inputs:
            prod = producers.get(name)
            if prod is None or prod.op_type not in ("Identity", "Cast", "Transpose"):
                break
            if prod.op_type == "Transpose":
                perm = next((list(a.ints) for a in prod.attribute if a.name == "perm"), None)
                if perm is None or max(time_axis, batch_axis) >= len(perm):
                    break
                time_axis, batch_axis = perm[time_axis], perm[batch_axis]
            name = prod.input[0]
        if name in graph_inputs and all(r.input != name for r in found):
            found.append(RecurrentInput(name, time_axis, batch_axis, rec.describe()))
    return found


def _length_inputs(model: onnx.ModelProto, program: Program) -> list[str]:
    """Graph inputs that are a recurrent op's ``sequence_lens`` (through Identity/Cast)."""
    producers = _producers(model)
    graph_inputs = {vi.name for vi in model.graph.input}
    found: list[str] = []
    for rec in program.recurrents:
        node = rec.onnx_node
        at = rec.spec.input_index(rec.spec.sequence_lens)
        if node is None or at is None or len(node.input) <= at or not node.input[at]:
            continue
        name = node.input[at]
        while name not in graph_inputs and name in producers and producers[name].op_type in ("Identity", "Cast"):
            name = producers[name].input[0]
        if name in graph_inputs and name not in found:
            found.append(name)
    return found


class SessionModel:
    """What every instance of one model shares: the ORT session, the pairs, the interface."""

    max_slot_bytes: int = DEFAULT_MAX_SLOT_BYTES

    def __init__(
        self,
        model: Any,
        pairs: Mapping[str, str | None] | None,
        session_options: ort.SessionOptions | None,
        providers: Sequence[Any] | None,
        ort_kwargs: dict[str, Any],
    ) -> None:
        from rnnir.lower import Policy, lower, read_model

        src: ModelSource | None
        if isinstance(model, Program):
            program = model
            src = cast("ModelSource | None", program.source)  # a Program's source is typed by the IR's protocol
            if src is None:
                try:
                    from rnnir.exporter import export as _export

                    proto = _export(program)
                except ImportError as exc:
                    raise StateError(
                        f"program {program.name!r} was not lowered from ONNX and rnnir.export is unavailable ({exc}); "
                        "pass the .onnx model instead"
                    ) from None
                src = read_model(proto, label=program.name)
                program = lower(src, pairs)
            elif pairs is not None:
                program = lower(src, pairs, Policy())
        else:
            src = read_model(model)
            program = lower(src, pairs, Policy())
        self.program = program
        self.label = src.label
        self.fingerprint = src.fingerprint
        self.state_version = model_state_version(src.model)  # rnnir.state_version metadata (rnnir.runtime.versioning)

        graph = src.model.graph
        inits = {t.name for t in graph.initializer}
        self.inputs: dict[str, IOSpec] = {vi.name: _io_spec(vi) for vi in graph.input}
        self.optional_inputs = {n for n in self.inputs if n in inits}
        self.output_specs: dict[str, IOSpec] = {vi.name: _io_spec(vi) for vi in graph.output}
        self.output_names = list(self.output_specs)
        for side, values in (("input", [vi for vi in graph.input if vi.name not in inits]), ("output", graph.output)):
            for vi in values:
                why = _unbindable(vi)
                if why is not None:
                    raise ModelError(
                        f"graph {side} {vi.name!r} is {why}; StatefulSession binds numeric tensors only "
                        "(bool, int, uint, float)",
                        model=src.label,
                    )

        slots: list[SlotSpec] = []
        for p in program.state_pairs:
            spec = self.inputs.get(p.input)
            if spec is None:
                raise StateError(
                    f"{self.label}: state input {p.input!r} is not a graph input (lowered with entry='constant'?); "
                    "export the program so the slot becomes an input/output pair"
                )
            if p.output is not None and p.output not in self.output_specs:
                raise StateError(f"{self.label}: state output {p.output!r} paired with {p.input!r} is not a graph output")
            init = p.slot.init if p.slot is not None else SlotInit("zeros")
            dtype = spec.dtype or np.dtype(np.float32)
            out_dtype = self.output_specs[p.output].dtype if p.output is not None else None
            slots.append(SlotSpec(p.input, p.output, dtype, spec.shape, init, p, out_dtype))
        self.slots = slots
        self.slot_by_input = {s.input: s for s in slots}
        self.state_outputs = {s.output for s in slots if s.output is not None}
        self.state_output_order = tuple(s.output for s in slots if s.output is not None)
        self.plain_inputs = [n for n in self.inputs if n not in self.slot_by_input]
        self.required_inputs = [n for n in self.plain_inputs if n not in self.optional_inputs]
        self.plain_outputs = [n for n in self.output_names if n not in self.state_outputs]
        self.recurrent_inputs = _recurrent_inputs(src.model, program)
        self.length_inputs = _length_inputs(src.model, program)

        opts = session_options
        if opts is None:
            opts = ort.SessionOptions()
            opts.log_severity_level = 3  # "Removing initializer ..." warnings are noise here
        if src.path is not None:
            what: Any = str(src.path)  # ORT finds external data beside the file
        else:
            what = src.with_external_data().SerializeToString()
        try:
            self.ort = ort.InferenceSession(what, sess_options=opts, providers=list(providers or ["CPUExecutionProvider"]), **ort_kwargs)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
            raise ModelError(f"onnxruntime cannot load the model: {exc}", model=self.label) from None


# -- IOBinding, with as little Python per call as onnxruntime allows ----------------------------
