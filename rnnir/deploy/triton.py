"""``rnnir deploy triton``: a Triton model repository whose sequence batcher keeps the verified state.

    REPO/<name>/config.pbtxt      backend onnxruntime, inputs/outputs, sequence_batching { state [...] }
    REPO/<name>/1/model.onnx      the model rnnir verified (weights inline; external data beside it when > 1.5 GiB)

Each verified pair becomes one implicit-state entry: ``input_name``/``output_name``, the state input's
``data_type`` and ``dims``, and an ``initial_state`` of zeros, so Triton starts every sequence from zeros
and feeds each call's state output to the next call of the same sequence.

The batch axis: Triton batches along axis 0 of every tensor, state included.  When every plain input,
plain output and state input shares one symbolic dim at axis 0 (a batch-first model), the config sets
``max_batch_size`` and leaves that axis out of every ``dims``; otherwise (an RNN state is usually
``[layers, batch, hidden]``) ``max_batch_size: 0`` and the dims are the declared shapes, a symbolic dim
written ``-1`` (``1`` in the initial state: one sequence per request).

Control inputs (``--control start,ready,end,corrid``) are opt-in: Triton's zero ``initial_state`` already
restarts the state of a new sequence, and the onnxruntime backend refuses a config that names an input the
model does not have, so each control asked for is also added to the written model as an input it ignores.

Nothing here imports tritonclient; the tests parse the file with Triton's own ``model_config`` protobuf.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rnnir.deploy import DeployPlan, TensorDecl
from rnnir.errors import RnnirError

if TYPE_CHECKING:
    import onnx

__all__ = ["CONTROLS", "TritonLayout", "config_text", "triton_layout", "write_repository"]

#: ONNX TensorProto element type -> Triton DataType name (model_config.proto)
_TRITON_TYPES = {
    1: "TYPE_FP32", 2: "TYPE_UINT8", 3: "TYPE_INT8", 4: "TYPE_UINT16", 5: "TYPE_INT16", 6: "TYPE_INT32", 7: "TYPE_INT64",
    8: "TYPE_STRING", 9: "TYPE_BOOL", 10: "TYPE_FP16", 11: "TYPE_FP64", 12: "TYPE_UINT32", 13: "TYPE_UINT64", 16: "TYPE_BF16",
}

#: --control NAME -> (Triton control kind, the input's name, its data type, and the ONNX element type)
CONTROLS = {
    "start": ("CONTROL_SEQUENCE_START", "START", "TYPE_INT32", 6),
    "ready": ("CONTROL_SEQUENCE_READY", "READY", "TYPE_INT32", 6),
    "end": ("CONTROL_SEQUENCE_END", "END", "TYPE_INT32", 6),
    "corrid": ("CONTROL_SEQUENCE_CORRID", "CORRID", "TYPE_UINT64", 13),
}

#: a model directory name Triton and every file system accept
_NAME_OK = re.compile(r"^[A-Za-z0-9_.-]+$")
#: above this many bytes of tensors the model is written with external data (protobuf's limit is 2 GiB)
_INLINE_LIMIT = 3 * 2**29


class TritonError(RnnirError):
    """The repository cannot be written as asked (a bad name, an existing folder, a type Triton lacks)."""


@dataclass(frozen=True)
class TritonLayout:
    """How the model's tensors map onto Triton's: the batch size and the axis 0 symbol it replaces."""

    max_batch_size: int
    batch_symbol: str | None  # the symbolic dim at axis 0 of every tensor, when batching


def triton_layout(plan: DeployPlan, max_batch_size: int = 8) -> TritonLayout:
    """Batch along axis 0 when every plain input/output and state input has the same symbol there."""
    tensors: list[TensorDecl] = [*plan.inputs, *plan.outputs]
    leading = {t.shape[0] if t.shape else None for t in tensors}
    leading |= {s.shape[0] if s.shape else None for s in plan.states}
    if len(leading) == 1:
        (symbol,) = leading
        if isinstance(symbol, str) and max_batch_size > 0:
            return TritonLayout(max_batch_size, symbol)
    return TritonLayout(0, None)


def _q(text: str) -> str:
    """``text`` as a protobuf text-format string literal (a tensor name may hold quotes or backslashes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _type(elem_type: int, what: str) -> str:
    name = _TRITON_TYPES.get(elem_type)
    if name is None:
        raise TritonError(f"{what}: ONNX element type {elem_type} has no Triton data type")
    return name


def _dims(shape: tuple[int | str | None, ...] | None, layout: TritonLayout, what: str, *, initial: bool = False) -> list[int]:
    """Triton dims of a declared shape: the batch axis left out when batching, a symbol -1 (1 for an initial state)."""
    if shape is None:
        raise TritonError(f"{what}: the model does not declare its rank, which Triton's config needs")
    dims = list(shape[1:] if layout.batch_symbol is not None else shape)
    return [d if isinstance(d, int) and d > 0 else (1 if initial else -1) for d in dims]


def _tensor_entry(t: TensorDecl, layout: TritonLayout) -> str:
    dims = _dims(t.shape, layout, t.name)
    lines = [f"    name: {_q(t.name)}", f"    data_type: {_type(t.elem_type, t.name)}"]
    if not dims:  # a scalar: Triton's dims may not be empty, so [1] reshaped to a scalar for the backend
        lines += ["    dims: [ 1 ]", "    reshape: { shape: [ ] }"]
    else:
        lines.append(f"    dims: [ {', '.join(map(str, dims))} ]")
    return "  {\n" + "\n".join(lines) + "\n  }"


def _list(items: Sequence[str]) -> str:
    return ",\n".join(items)


def config_text(plan: DeployPlan, name: str, layout: TritonLayout, controls: Sequence[str] = ()) -> str:
    """The ``config.pbtxt`` of ``plan`` (protobuf text format, Triton's ``ModelConfig``)."""
    out = [
        f"# written by rnnir deploy triton from {Path(plan.label).name.replace(chr(10), ' ')}: the state pairs below are the ones rnnir verified",
        f"name: {_q(name)}",
        'backend: "onnxruntime"',
        f"max_batch_size: {layout.max_batch_size}",
    ]
    if plan.inputs:
        out.append("input [\n" + _list([_tensor_entry(t, layout) for t in plan.inputs]) + "\n]")
    if plan.outputs:
        out.append("output [\n" + _list([_tensor_entry(t, layout) for t in plan.outputs]) + "\n]")
    states = []
    for s in plan.states:
        data_type = _type(s.elem_type, s.input)
        dims = _dims(s.shape, layout, s.input)
        initial = _dims(s.shape, layout, s.input, initial=True)
        note = "" if s.verified else "      # NOT verified by rnnir: deployed with --allow-unverified\n"
        states.append(
            "    {\n" + note
            + f"      input_name: {_q(s.input)}\n      output_name: {_q(s.output)}\n"
            + f"      data_type: {data_type}\n      dims: [ {', '.join(map(str, dims))} ]\n"
            + "      initial_state: {\n"
            + f"        data_type: {data_type}\n        dims: [ {', '.join(map(str, initial))} ]\n"
            + f"        zero_data: true\n        name: {_q(s.input + ' zeros')}\n      }}\n    }}"
        )
    seq = ["sequence_batching {", "  state [\n" + ",\n".join(states) + "\n  ]"]
    if controls:
        entries = []
        for c in controls:
            kind, input_name, data_type, _ = CONTROLS[c]
            values = "int32_false_true: [ 0, 1 ]\n" if data_type == "TYPE_INT32" else ""
            entries.append(
                f"    {{\n      name: {_q(input_name)}\n      control [\n        {{\n          kind: {kind}\n"
                + (f"          {values}" if values else "")
                + f"          data_type: {data_type}\n        }}\n      ]\n    }}"
            )
        seq.append("  control_input [\n" + ",\n".join(entries) + "\n  ]")
    seq.append("}")
    out.append("\n".join(seq))
    return "\n".join(out) + "\n"


def _with_controls(plan: DeployPlan, layout: TritonLayout, controls: Sequence[str]) -> onnx.ModelProto:
    """The model with an (unused) graph input per control, as the onnxruntime backend wants every config input."""
    import onnx

    model = onnx.ModelProto()
    model.CopyFrom(plan.model)
    taken = {vi.name for vi in model.graph.input}
    for c in controls:
        _, input_name, _, elem_type = CONTROLS[c]
        if input_name in taken:
            raise TritonError(f"--control {c}: the model already has an input named {input_name!r}")
        shape: list[str | int | None] = [layout.batch_symbol, 1] if layout.batch_symbol is not None else [1]
        model.graph.input.append(onnx.helper.make_tensor_value_info(input_name, elem_type, shape))
    return model


def model_name(path: str, name: str | None) -> str:
    chosen = name if name is not None else re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(path).stem) or "model"
    if not _NAME_OK.match(chosen) or chosen in (".", ".."):
        raise TritonError(f"--name {chosen!r}: a Triton model name is letters, digits, '_', '.' and '-'")
    return chosen


def write_repository(
    plan: DeployPlan, repo: str | os.PathLike[str], *, name: str | None = None, max_batch_size: int = 8,
    controls: Sequence[str] = (), force: bool = False,
) -> Path:
    """Write ``REPO/<name>/config.pbtxt`` and ``REPO/<name>/1/model.onnx``; returns the model folder.

    An existing ``config.pbtxt`` is never overwritten unless ``force``."""
    import onnx

    unknown = [c for c in controls if c not in CONTROLS]
    if unknown:
        raise TritonError(f"--control {', '.join(unknown)}: known controls are {', '.join(CONTROLS)}")
    controls = list(dict.fromkeys(controls))
    chosen = model_name(plan.label, name)
    layout = triton_layout(plan, max_batch_size)
    text = config_text(plan, chosen, layout, controls)  # before any file is written: a bad type writes nothing
    folder = Path(repo) / chosen
    config = folder / "config.pbtxt"
    if config.exists() and not force:
        raise TritonError(f"{config} exists; give --force to replace it")
    model = _with_controls(plan, layout, controls) if controls else plan.model
    (folder / "1").mkdir(parents=True, exist_ok=True)
    target = folder / "1" / "model.onnx"
    big = model.ByteSize() > _INLINE_LIMIT
    onnx.save_model(model, str(target), save_as_external_data=big, location="model.onnx.data")
    config.write_text(text, encoding="utf-8")
    return folder
