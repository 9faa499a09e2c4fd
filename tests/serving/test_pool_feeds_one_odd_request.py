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
from rnnir.serving.pool.feeds import groups
from tests.serving.test_pool import gained_lstm

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

TOL = 1e-5
GAIN = 1.5  # the alike requests' gain; the model's default is 1.0, the odd "other gain" -0.5

#: how the odd request differs, and the error it gets (None: it is served, equal to its solo run)
ODD: dict[str, str | None] = {
    "two steps": None,  # x of 2 time steps where the others have 1
    "two steps, x alone": None,  # the same, every request leaving gain out: x is the only input that differs
    "other gain": None,  # another value of the shared input
    "no gain": None,  # leaves the optional shared input out (its default 1.0 applies)
    "only gain": None,  # the others leave gain out: it alone gives it
    "float64 x cast": None,  # another dtype, converted (cast_inputs=True)
    "float64 x": r"'x'.*float64",  # another dtype, refused (cast_inputs=False)
    "extra name": r"feeds 'bogus', not an input",
    "no x": r"is missing input\(s\) \['x'\]",
    "x of rank 1": r"request \d of the tick feeds 'x' of shape \(3,\): it has no batch axis 1 to stack",
}


def optional_gain_lstm() -> onnx.ModelProto:
    model = gained_lstm()
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(1.0, np.float32), "gain"))  # the default
    return model


MODEL = optional_gain_lstm()
_BASES = {cast: StatefulSession(MODEL, cast_inputs=cast) for cast in (False, True)}  # each case forks its streams


def _x(rng: np.random.Generator, steps: int = 1) -> np.ndarray:
    return rng.standard_normal((steps, 1, 3)).astype(np.float32)


def _sid(k: int) -> Hashable:
    return (k, "s") if k % 3 == 2 else str(k) if k % 3 == 1 else k  # ids of several types


def _tick(rng: np.random.Generator, n: int, odd: int | None, kind: str, same_x: bool, shared_copies: bool) -> dict[Hashable, dict[str, Any]]:
    """n requests alike but request ``odd`` (None: all alike).  ``same_x``: every row the same x (one object, or
    equal copies when ``shared_copies``), so only the odd difference tells the requests apart."""
    gain = np.array(GAIN, np.float32)
    x = _x(rng)
    alike_gain = kind not in ("only gain", "two steps, x alone")
    requests: dict[Hashable, dict[str, Any]] = {}
    for k in range(n):
        xk = (x.copy() if shared_copies else x) if same_x else _x(rng)
        feeds: dict[str, Any] = {"x": xk}
        if alike_gain:
            feeds["gain"] = gain.copy() if shared_copies else gain
        if k == odd:
            if kind.startswith("two steps"):
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
    base = _BASES[cast]
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


def _every_kind_at_every_position(n: int) -> None:
    # same_x: every request's x equal, so that nothing but the odd difference tells the requests apart
    for kind in ODD:
        for odd in range(n):
            check_one_odd_request(n, odd, kind, same_x=True, shared_copies=odd == 1, warm=odd % 2 == 0, seed=odd)


def test_every_kind_of_odd_request_in_a_tick_of_two_is_served_alone_or_refused():
    _every_kind_at_every_position(2)  # the odd request is the whole rest of the tick: every one of its inputs compared


def test_every_kind_of_odd_request_at_the_first_the_middle_and_the_last_of_three_is_served_alone_or_refused():
    _every_kind_at_every_position(3)


@settings(max_examples=15, deadline=None, derandomize=True, database=None)
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


def test_a_tick_whose_every_request_lacks_the_batch_axis_is_refused_before_anything_runs():
    pool = SessionPool(MODEL)
    solo = {_sid(k): _BASES[False].fork(reset=True) for k in range(3)}
    rng = np.random.default_rng(4)
    for warm in range(2):  # the second tick is offered to the fast paths first
        requests = _tick(rng, 3, None, "", same_x=False, shared_copies=False)
        _equal_solo(pool.run(requests, open_missing=True), requests, solo, f"tick {warm}")
    with pytest.raises(FeedError, match=r"request 0 of the tick feeds 'x' of shape \(3,\): it has no batch axis 1 to stack"):
        pool.run({sid: {"x": _x(rng).reshape(3), "gain": np.array(GAIN, np.float32)} for sid in solo})
    requests = _tick(rng, 3, None, "", same_x=False, shared_copies=False)
    _equal_solo(pool.run(requests), requests, solo, "the tick after")


# -- the grouping itself, against a grouping written here ----------------------------------------------------------

AXES: dict[str, int | None] = {"x": 1, "gain": None}
#: what one checked request can look like: x of one or two steps (float32, or float64 where a pool casts), gain
#: present or left out, of one value or another
_X = {"x1": np.ones((1, 1, 3), np.float32), "x2": np.ones((2, 1, 3), np.float32), "x1 f64": np.ones((1, 1, 3), np.float64)}
_GAIN = {"1.5": np.array(1.5, np.float32), "-0.5": np.array(-0.5, np.float32), "none": None}


def _alike_key(feeds: dict[str, np.ndarray]) -> tuple[Any, ...]:
    """Two requests may share a call exactly when these are equal: the input names in order, each input's dtype and
    row shape, and each shared input's value."""
    return tuple((n, str(a.dtype), a.shape, a.tolist() if AXES.get(n) is None else None) for n, a in feeds.items())


def _request(x: str, gain: str, gain_first: bool, copy: bool) -> dict[str, np.ndarray]:
    xa, ga = _X[x], _GAIN[gain]
    if copy:  # equal values in another object: compared by value, not identity
        xa = xa.copy()
        ga = None if ga is None else ga.copy()
    return {"x": xa} if ga is None else ({"gain": ga, "x": xa} if gain_first else {"x": xa, "gain": ga})


_VARIANTS = [(x, g, first, copy) for x in sorted(_X) for g in sorted(_GAIN) for first in (False, True) for copy in (False, True)]


def _check_groups(feeds: list[dict[str, np.ndarray]]) -> None:
    want: dict[tuple[Any, ...], list[int]] = {}
    for i, f in enumerate(feeds):
        want.setdefault(_alike_key(f), []).append(i)
    assert groups(feeds, AXES) == list(want.values()), [_alike_key(f) for f in feeds]


def test_every_tick_of_alike_requests_and_one_odd_one_at_any_position_is_grouped_exactly():
    for odd_variant in _VARIANTS:
        odd = _request(*odd_variant)
        for alike_variant in _VARIANTS:
            for n in (2, 3):
                for position in range(n):
                    _check_groups([odd if k == position else _request(*alike_variant) for k in range(n)])


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(_VARIANTS), min_size=1, max_size=6))
def test_requests_share_a_group_exactly_when_names_shapes_dtypes_and_shared_values_are_alike(plan: list[tuple[str, str, bool, bool]]) -> None:
    _check_groups([_request(*v) for v in plan])
