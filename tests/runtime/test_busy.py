"""One StatefulSession is one stream: a call into it while another call is inside it is refused with
SessionBusyError, never queued or interleaved.  Made deterministic without threads: the feeds are a Mapping that,
when the running call reads them, makes the second call (the same situation as a second thread arriving at that
moment, as the instance's lock is held).  The refused call must change nothing, and the running call ends as if
it had been alone.  The model: hn = h0 + x, so x = 1 per call counts the calls."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import numpy as np
import pytest
from onnx import TensorProto, helper

from rnnir.runtime import SessionBusyError, StatefulSession

F = TensorProto.FLOAT


def counter():
    vi = helper.make_tensor_value_info
    m = helper.make_model(
        helper.make_graph([helper.make_node("Add", ["h0", "x"], ["hn"])], "counter", [vi("x", F, [2]), vi("h0", F, [2])], [vi("hn", F, [2])]),
        opset_imports=[helper.make_opsetid("", 14)],
    )
    m.ir_version = 8
    return m


def ones():
    return {"x": np.ones(2, np.float32)}


class Interrupting(Mapping):
    """Feeds that run ``meanwhile`` once, the first time the session reads a value, and keep what it raised."""

    def __init__(self, feeds: dict[str, np.ndarray], meanwhile: Callable[[], object]) -> None:
        self._feeds = feeds
        self._meanwhile: Callable[[], object] | None = meanwhile
        self.raised: BaseException | None = None

    def __getitem__(self, key: str) -> np.ndarray:
        if self._meanwhile is not None:
            meanwhile, self._meanwhile = self._meanwhile, None
            try:
                meanwhile()
            except Exception as exc:  # noqa: BLE001 - kept for the test to look at
                self.raised = exc
        return self._feeds[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._feeds)

    def __len__(self) -> int:
        return len(self._feeds)


def steady_session():
    s = StatefulSession(counter())
    s.run(ones())
    s.run(ones())  # steady: the next run(feeds) of a dict takes the prepared call
    return s


def refused(s: StatefulSession, meanwhile: Callable[[], object], what: str) -> None:
    feeds = Interrupting(ones(), meanwhile)
    assert s.run(feeds, outputs=["hn"])["hn"].tolist() == [3.0, 3.0]  # the running call, undisturbed
    assert isinstance(feeds.raised, SessionBusyError), feeds.raised
    assert f"counter: {what}() while another thread is using this StatefulSession" in str(feeds.raised)
    assert s.state["h0"].tolist() == [3.0, 3.0]
    assert s.run(ones(), outputs=["hn"])["hn"].tolist() == [4.0, 4.0]  # and the session is free again


def test_a_call_while_a_call_runs_is_refused():
    s = steady_session()
    refused(s, lambda: s.run(ones()), "run")


@pytest.mark.parametrize("form", ["dict", "list"])
def test_the_prepared_steady_call_is_refused_too_while_another_call_holds_the_session(form):
    # a call on the prepared path reads no feeds before it runs, so no callback can stand in for the other thread:
    # the instance's lock is held here as another thread's call would hold it
    s = StatefulSession(counter())

    def call() -> object:
        return s.run(ones()) if form == "dict" else s.run(None, ones())

    call()
    call()  # steady: the next same call takes the prepared path
    with s._lock:
        with pytest.raises(SessionBusyError, match=r"counter: run\(\) while another thread is using this StatefulSession"):
            call()
    assert s.state["h0"].tolist() == [2.0, 2.0]
    assert s.run_dict(ones())["hn"].tolist() == [3.0, 3.0]  # free again once the other call is done


def test_setting_the_state_while_a_call_runs_is_refused():
    s = steady_session()
    refused(s, lambda: setattr(s, "state", {"h0": np.full(2, 100.0, np.float32)}), "setting state of")


def test_loading_a_state_while_a_call_runs_is_refused(tmp_path):
    s = steady_session()
    other = StatefulSession(counter())
    other.state = {"h0": np.full(2, 100.0, np.float32)}
    other.save_state(tmp_path / "other.state")
    refused(s, lambda: s.load_state(tmp_path / "other.state"), "load_state")


def test_a_reset_while_a_call_runs_is_refused():
    s = steady_session()
    refused(s, s.reset, "reset")


@pytest.mark.parametrize("dict_form", [True, False])
def test_the_interrupting_feeds_alone_are_an_ordinary_call(dict_form):
    s = steady_session()
    feeds = Interrupting(ones(), lambda: None)
    got = s.run(feeds, outputs=["hn"])["hn"] if dict_form else s.run(["hn"], feeds)[0]
    assert got.tolist() == [3.0, 3.0] and feeds.raised is None
