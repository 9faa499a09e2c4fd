"""A feed of an input with a kept context is checked (or cast) on its own, before the kept context joins it: a
float64 chunk is refused with the session's own words (not converted silently by the join) unless
cast_inputs=True, and a refused call keeps no context. The model shows what it was given (streaming_models'
context_probe); the values are hand-checked."""

from __future__ import annotations

import numpy as np
import pytest

from rnnir.runtime import StatefulSession
from rnnir.runtime.feeds import FeedError
from tests.support import streaming_models as sm


def _session(**kw):
    return StatefulSession(sm.context_probe(6), {"h_in": "h_out"}, context={"x": 2}, **kw)


def test_a_chunk_of_another_dtype_is_refused_before_the_context_joins_it_and_cast_when_asked():
    s = _session()
    with pytest.raises(FeedError, match=r"input 'x' takes float32, got a float64 array"):
        s.run({"x": np.array([[1, 2, 3, 4]], np.float64)})
    assert s.context_state == {}
    assert s.run({"x": np.array([[1, 2, 3, 4]], np.float32)})["seen"].tolist() == [[0, 0, 1, 2, 3, 4]]

    cast = _session(cast_inputs=True)
    assert cast.run({"x": np.array([[1, 2, 3, 4]], np.float64)})["seen"].tolist() == [[0, 0, 1, 2, 3, 4]]
    assert cast.run({"x": [[5, 6, 7, 8]]})["seen"].tolist() == [[3, 4, 5, 6, 7, 8]]
    assert cast.context_state["x"].dtype == np.float32


def test_every_instance_of_a_model_shares_its_spec():
    s = _session()
    assert s.spec.label == s.label == "context_probe" and list(s.spec.inputs) == ["x", "h_in"]  # the state input too
    assert s.fork().spec is s.spec and s.fork(reset=True).spec is s.spec
