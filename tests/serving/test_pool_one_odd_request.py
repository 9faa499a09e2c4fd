"""A tick with exactly ONE request unlike the others is never served as if its requests were alike.

The pool serves a tick of alike requests (same input names, row shapes and dtypes, the same shared values) in one
call; a request that differs in any of these needs its own call, or is refused.  Ticks here are a run of identical
requests with one odd request at any position (first, middle, last): another row shape, another shared value, a
missing or an extra optional input, another dtype, an unknown input name, a missing required input.  Every stream
must equal its own StatefulSession run (the pool's code not involved), or the tick is refused with a FeedError that
names the odd request and no stream advances.

The model: ``streaming_models.lstm_b`` with ``x`` scaled by ``gain``, a shared input (static shape ``[]``, one
value per call) that is optional (an initializer gives its default, 1.0).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import onnx
import pytest

from rnnir.runtime import FeedError, StatefulSession
from rnnir.serving.pool import SessionPool
from tests.support import streaming_models as sm

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

TOL = 1e-5
GAIN = 1.5  # the alike requests' gain; the model's default is 1.0, the odd "other gain" -0.5

#: how the odd request differs, and the error it gets (None: it is served, equal to its solo run)
ODD: dict[str, str | None] = {
    "two steps": None,  # x of 2 time steps where the others have 1
    "other gain": None,  # another value of the shared input
    "no gain": None,  # leaves the optional shared input out (its default 1.0 applies)
    "only gain": None,  # the others leave gain out: it alone gives it
    "float64 x cast": None,  # another dtype, converted (cast_inputs=True)
    "float64 x": r"'x'.*float64",  # another dtype, refused (cast_inputs=False)
    "extra name": r"feeds 'bogus', not an input",
    "no x": r"is missing input\(s\) \['x'\]",
    "x of rank 1": r"feeds 'x' of shape \(3,\); the input has 3 dims",  # fewer dims than x's batch axis (1)
}


def optional_gain_lstm() -> onnx.ModelProto:
    model = sm.lstm_b()
    g = model.graph
    g.node[0].input[0] = "xg"
    g.node.insert(0, onnx.helper.make_node("Mul", ["x", "gain"], ["xg"]))
    g.input.append(onnx.helper.make_tensor_value_info("gain", onnx.TensorProto.FLOAT, []))
    g.initializer.append(onnx.numpy_helper.from_array(np.array(1.0, np.float32), "gain"))
    return model


MODEL = optional_gain_lstm()


def _x(rng: np.random.Generator, steps: int = 1) -> np.ndarray:
    return rng.standard_normal((steps, 1, 3)).astype(np.float32)


def _sid(k: int) -> Hashable:
    return (k, "s") if k % 3 == 2 else str(k) if k % 3 == 1 else k  # ids of several types


def _tick(rng: np.random.Generator, n: int, odd: int | None, kind: str, same_x: bool, shared_copies: bool) -> dict[Hashable, dict[str, Any]]:
    """n requests alike but request ``odd`` (None: all alike).  ``same_x``: every row the same x (one object, or
    equal copies when ``shared_copies``), so only the odd difference tells the requests apart."""
    gain = np.array(GAIN, np.float32)
    x = _x(rng)
    alike_gain = kind != "only gain"
    requests: dict[Hashable, dict[str, Any]] = {}
    for k in range(n):
        xk = (x.copy() if shared_copies else x) if same_x else _x(rng)
        feeds: dict[str, Any] = {"x": xk}
        if alike_gain:
            feeds["gain"] = gain.copy() if shared_copies else gain
        if k == odd:
            if kind == "two steps":
                feeds["x"] = _x(rng, 2)
            elif kind == "other gain":
                feeds["gain"] = np.array(-0.5, np.float32)
            elif kind == "no gain":
                del feeds["gain"]
            elif kind == "only gain":
                feeds["gain"] = gain
            elif kind.startswith("float64 x"):
                feeds["x"] = xk.astype(np.float64)
            elif kind == "extra name":
                feeds["bogus"] = xk
            elif kind == "no x":
                del feeds["x"]
            elif kind == "x of rank 1":
                feeds["x"] = xk.reshape(3)
        requests[_sid(k)] = feeds
    return requests


def _equal_solo(got: dict[Hashable, dict[str, np.ndarray]], requests: dict[Hashable, dict[str, Any]], solo: dict[Hashable, StatefulSession], where: str) -> None:
    assert list(got) == list(requests), where
    for sid, feeds in requests.items():
        want = solo[sid].run_dict(dict(feeds))
        for name in ("Y", "hn", "cn"):
            a, b = got[sid][name], want[name]
            assert a.shape == b.shape and np.max(np.abs(a - b)) <= TOL, (where, sid, name)


def check_one_odd_request(n: int, odd: int, kind: str, same_x: bool, shared_copies: bool, warm: bool, seed: int) -> None:
    where = f"n={n} odd={odd} kind={kind!r} same_x={same_x} copies={shared_copies} warm={warm}"
    cast = kind == "float64 x cast"
    pool = SessionPool(MODEL, cast_inputs=cast)
    base = StatefulSession(MODEL, cast_inputs=cast)
    rng = np.random.default_rng(seed)
    solo = {_sid(k): base.fork(reset=True) for k in range(n)}
    for sid in solo:
        pool.open(sid)
    if warm:  # an alike tick first: the probe has run, and the next tick is first offered to the fast paths
        requests = _tick(rng, n, None, "", same_x=False, shared_copies=False)
        _equal_solo(pool.run(requests), requests, solo, where + " (warm-up)")
    requests = _tick(rng, n, odd, kind, same_x, shared_copies)
    error = ODD[kind]
    if error is None:
        _equal_solo(pool.run(requests), requests, solo, where)
    else:
        with pytest.raises(FeedError, match=error):
            pool.run(requests)
    requests = _tick(rng, n, None, "", same_x=False, shared_copies=False)  # a refused tick advanced no stream
    _equal_solo(pool.run(requests), requests, solo, where + " (the tick after)")


def test_every_kind_of_odd_request_at_the_first_a_middle_and_the_last_position_is_served_alone_or_refused():
    for kind in ODD:
        for odd in range(3):
            for same_x in (True, False):
                check_one_odd_request(3, odd, kind, same_x, shared_copies=odd == 1, warm=odd != 2, seed=odd)


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(n=st.integers(2, 6), data=st.data())
def test_random_ticks_with_one_odd_request_equal_solo_runs_or_are_refused(n: int, data: Any) -> None:
    check_one_odd_request(
        n,
        data.draw(st.integers(0, n - 1), label="odd"),
        data.draw(st.sampled_from(sorted(ODD)), label="kind"),
        data.draw(st.booleans(), label="same_x"),
        data.draw(st.booleans(), label="shared_copies"),
        data.draw(st.booleans(), label="warm"),
        data.draw(st.integers(0, 2**16), label="seed"),
    )
