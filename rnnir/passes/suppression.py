"""Suppressions stored in the model itself (its ``# noqa``), and RN100 for the ones that suppress nothing.

A model lists the findings it accepts in ``metadata_props`` under :data:`rnnir.onnxio.metadata.META_NOQA`, a JSON
list such as ``["SD009", "SD006:/lstm/LSTM"]``: a rule code suppresses that rule's findings in the model;
``CODE:NAME`` only those that name ``NAME`` as an ONNX node, a value or a slot.  Codes are exact (no
prefixes), as in Ruff's ``# noqa: E501``.  A suppressed finding is not reported and not counted (Ruff's
``--statistics`` does not count ``# noqa``-ed violations either); the verdicts still see it: a suppressed
SD002 leaves its slice violated.

Like Ruff's RUF100, an entry that matched no finding of the rules that ran (``passes.verify``, and so
``rnnir lint``, runs them all), or names no rule at all, is itself reported (RN100).  An ``RN100`` entry suppresses RN100 findings and is never reported unused.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rnnir.errors import ModelError
from rnnir.onnxio.metadata import META_NOQA, NoqaFormatError, read_noqa
from rnnir.passes.diagnostics import Diagnostic
from rnnir.passes.rules.rn100_unused_suppression import RULE as UNUSED_SUPPRESSION

__all__ = ["UNUSED_SUPPRESSION", "Suppression", "SuppressionOutcome", "apply_suppressions", "suppressions_of"]


@dataclass(frozen=True)
class Suppression:
    """One entry: a rule code and, optionally, the node/value/slot name a finding must name."""

    code: str
    node: str | None = None

    @classmethod
    def parse(cls, text: str) -> Suppression:
        code, sep, node = text.strip().partition(":")  # rule codes never hold ':'; node names may
        return cls(code.strip().upper(), node if sep and node else None)

    @property
    def text(self) -> str:
        return self.code if self.node is None else f"{self.code}:{self.node}"

    def matches(self, d: Diagnostic) -> bool:
        if d.code != self.code:
            return False
        return self.node is None or self.node in _names(d)


def _names(d: Diagnostic) -> set[str | None]:
    """What a ``CODE:NAME`` entry may name in ``d``: its slot, and each location's ONNX node and value, and the IR
    node id too (a program written as IR text has no other name for its stores)."""
    return {d.slot, *(loc.onnx_node for loc in d.locations), *(loc.value for loc in d.locations), *(loc.node for loc in d.locations)}


class _Index:
    """The entries by code and name, so matching a finding costs the names it carries, not the length of the
    list: a model with 30,000 entries took 27 s to lint when every finding was tried against every entry."""

    def __init__(self, suppressions: Iterable[Suppression]) -> None:
        self.by_code: dict[str, Suppression] = {}  # the bare ``CODE`` entries
        self.by_name: dict[tuple[str, str], Suppression] = {}  # the ``CODE:NAME`` entries
        for s in suppressions:
            if s.node is None:
                self.by_code.setdefault(s.code, s)
            else:
                self.by_name.setdefault((s.code, s.node), s)

    def hits(self, d: Diagnostic) -> list[Suppression]:
        """The entries that match ``d`` (each entry once, however often it is listed)."""
        out = [self.by_code[d.code]] if d.code in self.by_code else []
        out += [self.by_name[(d.code, n)] for n in _names(d) if n is not None and (d.code, n) in self.by_name]
        return out


def suppressions_of(program: Any) -> tuple[Suppression, ...]:
    """The suppressions the model a program was lowered from declares (none for a built program)."""
    source = getattr(program, "source", None)
    model = getattr(source, "model", None)
    if model is None:
        return ()
    try:
        return tuple(Suppression.parse(e) for e in read_noqa(model))
    except NoqaFormatError as exc:
        raise ModelError(str(exc), model=getattr(source, "label", None)) from None


@dataclass(frozen=True)
class SuppressionOutcome:
    kept: list[Diagnostic]  # reported: selected, not suppressed (RN100 findings included when selected)
    suppressed: list[Diagnostic]  # selected, matched by an entry


def apply_suppressions(
    found: Sequence[Diagnostic], suppressions: Sequence[Suppression], *, ran: Iterable[str], selected: Iterable[str], known: Iterable[str]
) -> SuppressionOutcome:
    """Split the ``selected`` findings of ``found`` into kept and suppressed; add RN100 for entries that
    matched none of ``found`` although their rule ``ran`` (or that name a code not in ``known``)."""
    ran_codes, selected_codes, known_codes = set(ran), set(selected), set(known)
    index = _Index(suppressions)
    used: set[Suppression] = set()
    kept: list[Diagnostic] = []
    suppressed: list[Diagnostic] = []
    for d in found:
        hits = index.hits(d)
        used.update(hits)
        if d.code in selected_codes:
            (suppressed if hits else kept).append(d)
    if UNUSED_SUPPRESSION.code in selected_codes:
        for s in suppressions:
            if s in used or s.code == UNUSED_SUPPRESSION.code or (s.code in known_codes and s.code not in ran_codes):
                continue
            d = _unused(s, known=s.code in known_codes)
            (suppressed if index.hits(d) else kept).append(d)
    return SuppressionOutcome(sorted(kept, key=Diagnostic.sort_key), sorted(suppressed, key=Diagnostic.sort_key))


def _unused(s: Suppression, *, known: bool) -> Diagnostic:
    if not known:
        return UNUSED_SUPPRESSION.diagnostic("unknown-code", text=s.text, key=META_NOQA, code=s.code)
    if s.node is None:
        return UNUSED_SUPPRESSION.diagnostic("no-finding", text=s.text, key=META_NOQA, code=s.code)
    return UNUSED_SUPPRESSION.diagnostic("no-finding-at-node", text=s.text, key=META_NOQA, code=s.code, node=s.node)
