"""The fast indented JSON writer is ``json.dumps(obj, indent=2, default=...)`` byte for byte.

Python's json module is the oracle, on generated documents (Hypothesis) holding every kind of value the reports
write: strings with escapes and non-ASCII text, ints, floats with NaN and the infinities, bools, None, nested and
empty containers, tuples, dict keys of every type json accepts, and bytes that only the ``default`` turns into text.
"""

from __future__ import annotations

import json
import math

import pytest

from rnnir.render import dumps_indented, render_json
from rnnir.render.jsonreport import _json_default

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.binary(max_size=6),
)
keys = st.one_of(st.text(max_size=6), st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none())
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=10,
)


@SETTINGS
@given(documents)
def test_the_writer_equals_json_dumps_with_indent_2(doc):
    assert dumps_indented(doc, default=_json_default) == json.dumps(doc, indent=2, default=_json_default)


def test_the_writer_edges_one_by_one():
    """The cases the generator may reach rarely, each against json.dumps; and json's own errors."""
    cases = [
        {1.5: "a", math.inf: "b", -math.inf: "c", True: "d", False: "e", None: "f", 7: "g"},
        [math.nan, math.inf, -math.inf, -0.0, 1e300, [], {}, (), "\x00\u2028é"],
        {"bytes": b"\xff\x00ok", "obj": object.__new__(type("Thing", (), {"__str__": lambda self: "thing"}))},
    ]
    for doc in cases:
        assert dumps_indented(doc, default=_json_default) == json.dumps(doc, indent=2, default=_json_default)
    assert dumps_indented({"a": [1, {"b": None}]}) == json.dumps({"a": [1, {"b": None}]}, indent=2)

    def wrap(value):  # a default that returns a container: its items are indented one level deeper
        return {"wrapped": [str(value)[:1], {"x": 1}]}

    assert dumps_indented({"a": [b"z"]}, default=wrap) == json.dumps({"a": [b"z"]}, indent=2, default=wrap)
    for bad, default in (({(1, 2): 1}, _json_default), ({"x": b"raw"}, None)):
        with pytest.raises(TypeError) as theirs:
            json.dumps(bad, indent=2, default=default)
        with pytest.raises(TypeError) as ours:
            dumps_indented(bad, default=default)
        assert str(ours.value) == str(theirs.value)  # json's own words


def test_the_last_resort_default_writes_bytes_and_objects_as_readable_text():
    """bytes (a protobuf string field) as UTF-8 with invalid bytes escaped; anything else by its str()."""
    thing = type("Thing", (), {"__str__": lambda self: "a thing"})()
    assert json.loads(dumps_indented([b"ok\xff", bytearray(b"\xc3\xa9"), thing], default=_json_default)) == ["ok\\xff", "é", "a thing"]


def test_a_json_report_says_it_is_schema_version_1(tmp_path):
    """docs/json-schema.md: version 1 (a key is never removed or changes meaning without bumping it)."""
    from rnnir.render import LintResult

    doc = json.loads(render_json(LintResult(files=[], rules={}, version="1", cwd=tmp_path)))
    assert doc["version"] == 1 and doc["tool"] == {"name": "rnnir", "version": "1"}
