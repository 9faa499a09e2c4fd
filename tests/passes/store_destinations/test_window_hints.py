"""The fix a window finding hints names the cache's own length (rnnir.passes.store_destinations.caches): the newest
3 frames of a [1, 3, 2] cache, whatever the wrong window kept.  The two-cache model is test_catalogue's."""

from __future__ import annotations

import rnnir
from rnnir import passes
from tests.rules.test_catalogue import window_model


def _error(**kw):
    (d,) = [x for x in passes.run(rnnir.load(window_model(**kw))) if x.severity.value == "error"]
    return d


def test_a_window_finding_hints_the_caches_own_length():
    for kw in ({"starts": -4}, {"starts": -2}):
        d = _error(**kw)
        assert (d.code, d.slot) == ("SD003", "c1")
        assert d.hint == "keep exactly the newest 3 frames on axis 1: Slice(Concat(c1, new, axis=1), starts=-3, axes=[1])", kw
    d = _error(crossed=True)
    assert (d.code, d.hint) == ("SD002", "write this slot's own window: Slice(Concat(c1, new, axis=1), starts=-3, axes=[1])")
