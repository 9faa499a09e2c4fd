"""The model's ``# noqa`` entries against any findings (a property of :func:`rnnir.passes.suppression.apply_suppressions`):
an entry ``CODE`` matches every finding of that rule, ``CODE:NAME`` only those naming ``NAME`` as their slot, an ONNX
node, a value or an IR node id. The suppressions are looked up through an index (by code, by code and name); the
oracle here is the one-entry-at-a-time reading of that rule, written out in the test, and
:meth:`Suppression.matches` must agree with it too."""

from __future__ import annotations

import pytest

from rnnir.passes.diagnostics import Diagnostic, Location, Severity
from rnnir.passes.suppression import Suppression, apply_suppressions

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

CODES = ("SD001", "SD002", "AL001")
KNOWN = (*CODES, "RN100")
NAMES = ("h", "c", "/lstm/LSTM", "store0", "x:y")
_SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None)

name = st.one_of(st.none(), st.sampled_from(NAMES))
location = st.builds(Location, node=name, onnx_node=name, value=name)
finding = st.builds(
    lambda code, slot, locs, k: Diagnostic(code, "made-up", Severity.ERROR, f"finding {k}", tuple(locs), slot=slot),
    st.sampled_from(CODES), name, st.lists(location, max_size=2), st.integers(0, 10**6),
)
entry = st.builds(lambda code, n: Suppression(code, n), st.sampled_from(CODES), name)


def _oracle(s: Suppression, d: Diagnostic) -> bool:
    names = {d.slot} | {getattr(loc, a) for loc in d.locations for a in ("node", "onnx_node", "value")}
    return s.code == d.code and (s.node is None or s.node in names)


@_SETTINGS
@given(st.lists(finding, max_size=6), st.lists(entry, max_size=6))
def test_a_finding_is_suppressed_exactly_when_some_entry_matches_it(found, entries):
    for d in found:
        assert [s.matches(d) for s in entries] == [_oracle(s, d) for s in entries]
    out = apply_suppressions(found, entries, ran=CODES, selected=CODES, known=KNOWN)  # RN100 not selected
    assert sorted(d.message for d in out.suppressed) == sorted(d.message for d in found if any(_oracle(s, d) for s in entries))
    assert sorted(d.message for d in out.kept) == sorted(d.message for d in found if not any(_oracle(s, d) for s in entries))


@_SETTINGS
@given(st.lists(finding, max_size=6), st.lists(entry, max_size=6))
def test_rn100_names_exactly_the_entries_that_matched_no_finding(found, entries):
    out = apply_suppressions(found, entries, ran=CODES, selected=KNOWN, known=KNOWN)
    unused = sorted(s.text for s in entries if not any(_oracle(s, d) for d in found))  # as often as listed
    assert sorted(d.message.split("'")[1] for d in out.kept if d.code == "RN100") == unused


def test_a_named_entry_matches_through_each_kind_of_name_and_no_other():
    d = Diagnostic("SD002", "made-up", Severity.ERROR, "m", (Location(node="store3", onnx_node="/lstm/LSTM", value="hn"),), slot="h")
    for n in ("h", "store3", "/lstm/LSTM", "hn", None):
        assert Suppression("SD002", n).matches(d)
        assert apply_suppressions([d], [Suppression("SD002", n)], ran=CODES, selected=CODES, known=KNOWN).suppressed == [d]
    for s in (Suppression("SD002", "c"), Suppression("SD001", "h"), Suppression("SD001")):
        assert not s.matches(d)
        assert apply_suppressions([d], [s], ran=CODES, selected=CODES, known=KNOWN).kept == [d]
