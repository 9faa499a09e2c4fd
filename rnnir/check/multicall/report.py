"""What :func:`~rnnir.check.multicall.check_multicall` returns, and how it reads: the variants compared,
their first divergences, the verdict, as text (:func:`report_to_text`) and JSON (``to_json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rnnir.check.multicall.health import SlotHealth
from rnnir.check.multicall.text import format_number, json_number

__all__ = ["BROKEN", "VARIANTS", "Divergence", "MulticallReport", "VariantResult", "report_to_text"]

VARIANTS = ("persistent", "reinit", "stale", "hc-swapped")
#: the variants that run a persistence bug on purpose
BROKEN = ("reinit", "stale", "hc-swapped")


@dataclass
class Divergence:
    """Where a variant first differs from its reference: call index (0-based), output, and by how much."""

    call: int
    output: str
    max_abs_diff: float
    chunk: int | None

    def to_json(self) -> dict[str, Any]:
        return {"call": self.call, "output": self.output, "max_abs_diff": json_number(self.max_abs_diff), "chunk": self.chunk}


@dataclass
class VariantResult:
    """One variant at one chunk size, compared with its reference (``whole`` or ``persistent``)."""

    variant: str
    chunk: int | None
    calls: int
    reference: str
    first_divergence: Divergence | None
    max_abs_diff: float
    per_output: dict[str, float] = field(default_factory=dict)
    note: str = ""
    #: per call: max |diff| from the reference over every output (broken variants; empty for ``persistent``)
    per_call: list[float] = field(default_factory=list)
    #: per call: the mean of the report's ``watched`` output (what ``rnnir run --plot`` draws)
    trace: list[float] = field(default_factory=list)

    @property
    def diverges(self) -> bool:
        return self.first_divergence is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "chunk": self.chunk,
            "calls": self.calls,
            "reference": self.reference,
            "diverges": self.diverges,
            "first_divergence": None if self.first_divergence is None else self.first_divergence.to_json(),
            "max_abs_diff": json_number(self.max_abs_diff),
            "per_output": {k: json_number(v) for k, v in self.per_output.items()},
            "note": self.note,
            "trace": [json_number(x) for x in self.trace],  # per call: the mean of the report's "watched" output
        }


@dataclass
class MulticallReport:
    """Everything :func:`check_multicall` found; render with :func:`report_to_text` or :meth:`to_json`."""

    model: str
    fingerprint: str
    mode: str  # "time" (chunks along a time axis) or "calls" (one frame per call)
    pairs: list[tuple[str, str | None]]
    time_axes: dict[str, int | None]
    stream_length: int
    chunk_sizes: list[int]
    variants: list[VariantResult]
    whole_available: bool
    persistent_matches_whole: bool | None
    revealing: bool
    status: str  # pass / fail / inconclusive / no-state
    verdict: str
    notes: list[str] = field(default_factory=list)
    health: dict[str, SlotHealth] = field(default_factory=dict)
    tol: float = 1e-5
    watched: str | None = None  # the output each variant's ``trace`` follows: the first output that is not state

    @property
    def ok(self) -> bool:
        """Persistence verified and the stream able to show it (``status == "pass"``)."""
        return self.status == "pass"

    @property
    def first_divergence(self) -> dict[str, Divergence | None]:
        """Per broken variant: its earliest divergence from ``persistent`` over every chunk size (None: never)."""
        out: dict[str, Divergence | None] = {}
        for name in BROKEN:
            runs = [v for v in self.variants if v.variant == name]
            if not runs:
                continue
            hits = [v.first_divergence for v in runs if v.first_divergence is not None]
            out[name] = min(hits, key=lambda d: (d.call, d.chunk or 0)) if hits else None
        return out

    def __str__(self) -> str:
        """The readable report (:func:`report_to_text`): ``print(report)`` shows the verdict, not a dataclass."""
        return report_to_text(self)

    def variant(self, name: str, chunk: int | None = None) -> VariantResult:
        for v in self.variants:
            if v.variant == name and (chunk is None or v.chunk == chunk):
                return v
        raise KeyError((name, chunk))

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "model": self.model,
            "fingerprint": self.fingerprint,
            "mode": self.mode,
            "status": self.status,
            "ok": self.ok,
            "verdict": self.verdict,
            "pairs": [{"input": i, "output": o} for i, o in self.pairs],
            "time_axes": dict(self.time_axes),
            "stream_length": self.stream_length,
            "chunk_sizes": list(self.chunk_sizes),
            "tol": self.tol,
            "whole_available": self.whole_available,
            "persistent_matches_whole": self.persistent_matches_whole,
            "revealing": self.revealing,
            "first_divergence": {k: None if v is None else v.to_json() for k, v in self.first_divergence.items()},
            "variants": [v.to_json() for v in self.variants],
            "health": {k: h.to_json() for k, h in self.health.items()},
            "notes": list(self.notes),
            "watched": self.watched,
        }


# -- text --------------------------------------------------------------------------------------


def report_to_text(report: MulticallReport) -> str:
    """A human-readable report: verdict first, then the variants, health and notes."""
    from rnnir.render.escape import printable  # names come from the model: one line each, no raw control character

    lines = [f"{printable(report.model)}: {report.verdict}"]
    pairs = ", ".join(f"{printable(i)} -> {printable(o) if o else '<nothing>'}" for i, o in report.pairs) or "none"
    lines.append(f"  state pairs: {pairs}")
    if report.mode == "time":
        axes = ", ".join(f"{printable(n)}[{a}]" for n, a in report.time_axes.items() if a is not None)
        lines.append(f"  stream: {report.stream_length} time steps along {axes}; chunk sizes {report.chunk_sizes}")
    else:
        lines.append(f"  stream: {report.stream_length} calls, one frame each (no input has a time axis)")
    lines.append(f"  tolerance: max |diff| <= {report.tol:g}")
    lines.append("  variants:")
    state_outputs = {o for _, o in report.pairs if o is not None}
    for v in report.variants:
        chunk = "" if v.chunk is None else f" chunk={v.chunk}"
        head = f"    {v.variant:<11}{chunk:<10} {v.calls:>5} calls vs {v.reference:<10}"
        if v.reference == "none":
            body = "not compared (no whole-stream oracle)"
        elif v.first_divergence is None:
            body = f"equal (max |diff| {_largest(v, state_outputs) if v.max_abs_diff else 0})"
        else:
            d = v.first_divergence
            body = f"diverges at call {d.call} on {d.output!r} (|diff| {format_number(d.max_abs_diff)}); max |diff| {_largest(v, state_outputs)}"
        lines.append(head + " " + body + (f"  -- {v.note}" if v.note else ""))
    if report.health:
        lines.append("  state health (longest persistent run):")
        for h in report.health.values():
            lines.append("    " + printable(h.summary()))
    for n in report.notes:
        lines.append(f"  note: {n}")
    return "\n".join(lines) + "\n"


def _largest(v: VariantResult, state_outputs: set[str]) -> str:
    """The largest difference per output, each named: a probability's 0.87 is not a state's 17.  The outputs the
    caller reads come first; a state output says so."""
    if not v.per_output:
        return format_number(v.max_abs_diff)
    ordered = sorted(v.per_output.items(), key=lambda kv: kv[0] in state_outputs)  # stable: model order within each group
    shown = [f"{format_number(d)} on {name!r}{' (state)' if name in state_outputs else ''}" for name, d in ordered[:3]]
    more = len(ordered) - len(shown)
    return ", ".join(shown) + (f" and {more} more output(s)" if more else "")
