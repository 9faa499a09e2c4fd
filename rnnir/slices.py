"""Temporary shim: split into rnnir.analysis.tracer (the tracer) and rnnir.analysis.slices (per-pair slice maps)."""

from rnnir.analysis.slices import SliceAnalysis, TracedPair, _port_ref, slice_maps, slot_store_value  # noqa: F401
from rnnir.analysis.tracer import (  # noqa: F401
    CONST,
    EXTERNAL,
    TRACED_OPS,
    Abs,
    AbsKind,
    Origin,
    OriginKind,
    Ref,
    Tracer,
    _identity_operands,
    derived,
    exact,
    trace_value,
    tracer_for,
)
