"""check_multicall's verdict on models that carry part of their state and restart the rest, and on a GRU stack
written back right and in each wrong way.

Oracles: onnxruntime loops written out here (chunked calls against one whole call), and the models' construction
(a state input left unpaired, a cell state not given or constant, a state reshaped or scaled before the LSTM reads
it).  Each bug has its near-miss.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from rnnir.check.multicall.check import check_multicall
from rnnir.runtime import StatefulSession
from tests.check.test_multicall_stream import SEED_INITS, build, init, lstm, ones, rnn_node, vi

PART = "FAIL: part of the state restarts on every call while the rest is carried: "


def _ort_chunks(model, x: np.ndarray, chunk: int, carry: tuple[str, ...]) -> np.ndarray:
    """y over the stream in calls of ``chunk`` steps, each call fed the previous call's hn (and cn when carried)
    for the states named in ``carry``, zeros for the others."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    state = {"h0": np.zeros((1, 1, 2), np.float32), "c0": np.zeros((1, 1, 2), np.float32)}
    ys = []
    for start in range(0, len(x), chunk):
        y, hn, cn = sess.run(["y", "hn", "cn"], {"x": x[start : start + chunk], **state})
        ys.append(y)
        state = {"h0": hn if "h" in carry else np.zeros_like(hn), "c0": cn if "c" in carry else np.zeros_like(cn)}
    return np.concatenate(ys)


def test_an_lstm_that_carries_h_and_restarts_c_fails_and_carrying_both_passes():
    # the oracle first: one whole call equals chunks that carry h and c, and not chunks that carry h alone
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(6, 1, 1)
    dynamic = lstm()
    whole = _ort_chunks(dynamic, x, 6, ())
    np.testing.assert_allclose(_ort_chunks(dynamic, x, 2, ("h", "c")), whole, atol=1e-5)
    assert np.abs(_ort_chunks(dynamic, x, 2, ("h",)) - whole).max() > 1e-3

    # a static time axis: no whole call to compare with, so the check must see the restart in the graph itself
    static = lstm(x_shape=(2, 1, 1))
    report = check_multicall(static, {"x": x}, chunk_sizes=[2], pairs={"h0": "hn"})  # c0 stays an input fed anew
    assert report.persistent_matches_whole is None and report.status == "fail"
    assert report.verdict == PART + "LSTM 'LSTM(y)' carries initial_h across calls but its initial_c comes from the plain input 'c0', fed anew every call."

    near = check_multicall(static, {"x": x}, chunk_sizes=[2])  # both paired by name
    assert near.pairs == [("h0", "hn"), ("c0", "cn")]
    assert near.status == "pass" and "part of the state" not in near.verdict


def test_a_cell_state_not_given_restarts_at_zero_and_an_unpaired_one_at_its_initial_value():
    x = ones(6)
    not_given = check_multicall(lstm(inputs=("x", "h0", ""), outs=("y", "hn"), x_shape=(2, 1, 1)), {"x": x}, chunk_sizes=[2])
    assert not_given.pairs == [("h0", "hn")]
    assert not_given.verdict == PART + "LSTM 'LSTM(y)' carries initial_h across calls but its initial_c is not given (zeros every call)."

    unpaired = check_multicall(lstm(x_shape=(2, 1, 1)), {"x": x}, chunk_sizes=[2], pairs={"h0": "hn", "c0": None})
    assert unpaired.status == "fail"
    assert unpaired.verdict == PART + (
        "state input 'c0' has no paired output: nothing writes it back, so every call restarts it from its initial value (SD001)."
    )


def constant_c_lstm(c_source: str, steps: int | str):
    """An LSTM that carries h (h0 -> hn) and starts c every call from a constant: an initializer, a Constant node, or a
    ConstantOfShape of h's (batch-sized) shape, as exporters write a zero state."""
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c_start"], ["y", "hn"], hidden_size=2)]
    inits = [init("W", rng.standard_normal((1, 8, 1))), init("R", 0.5 * rng.standard_normal((1, 8, 2)))]
    if c_source == "initializer":
        inits.append(init("c_start", np.full((1, 1, 2), 0.3)))
    elif c_source == "Constant":
        nodes.insert(0, helper.make_node("Constant", [], ["c_start"], value=helper.make_tensor("c", TensorProto.FLOAT, [1, 1, 2], [0.3, 0.3])))
    else:
        nodes[:0] = [helper.make_node("Shape", ["h0"], ["h_shape"]),
                     helper.make_node("ConstantOfShape", ["h_shape"], ["c_start"], value=helper.make_tensor("c", TensorProto.FLOAT, [1], [0.3]))]
    state = [1, "B", 2]
    return build(nodes, [vi("x", [steps, "B", 1]), vi("h0", state)], [vi("y", None), vi("hn", state)], inits)


def test_a_cell_state_started_from_a_constant_every_call_fails_without_a_whole_call_too():
    # a bug found by a surviving mutant: this model passed when its time axis was static, while with a time axis one
    # whole call could take, the comparison with it failed (the dynamic model proves the restart wrong)
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(6, 1, 1)
    for c_source in ("initializer", "Constant", "ConstantOfShape"):
        proven = check_multicall(constant_c_lstm(c_source, "T"), {"x": x}, chunk_sizes=[2])
        assert proven.status == "fail" and proven.persistent_matches_whole is False, c_source
        report = check_multicall(constant_c_lstm(c_source, 2), {"x": x}, chunk_sizes=[2])
        assert report.verdict == PART + "LSTM 'LSTM(y)' carries initial_h across calls but its initial_c is the constant 'c_start', the same every call.", c_source


def test_an_lstm_whose_only_state_is_never_written_is_not_called_partly_carried():
    # h0 is a slot nothing writes back and c is not given: nothing is carried, so nothing is "partly" carried;
    # every variant restarts alike and the stream cannot tell
    report = check_multicall(lstm(inputs=("x", "h0", ""), outs=("y",), x_shape=(2, 1, 1)), {"x": ones(6)}, chunk_sizes=[2])
    assert report.pairs == [("h0", None)]
    assert report.status == "inconclusive" and report.verdict.startswith("INCONCLUSIVE: re-initialising the state")


def reshaped_h_lstm():
    """The h slot is stored flat ([1, 2]) and reshaped to [1, 1, 2] before the LSTM reads it (and back after); c is not given."""
    rng = np.random.default_rng(5)
    nodes = [
        helper.make_node("Reshape", ["h0", "shape3"], ["h0r"]),
        helper.make_node("LSTM", ["x", "W", "R", "", "", "h0r"], ["y", "yh"], hidden_size=2),
        helper.make_node("Reshape", ["yh", "shape2"], ["hn"]),
    ]
    inits = [init("W", rng.standard_normal((1, 8, 1))), init("R", 0.5 * rng.standard_normal((1, 8, 2))),
             init("shape3", [1, 1, 2], np.int64), init("shape2", [1, 2], np.int64)]
    return build(nodes, [vi("x", [2, 1, 1]), vi("h0", [1, 2])], [vi("y", None), vi("hn", [1, 2])], inits)


def test_a_state_reshaped_on_its_way_into_the_lstm_is_still_the_carried_one():
    report = check_multicall(reshaped_h_lstm(), {"x": ones(6)}, chunk_sizes=[2])
    assert report.pairs == [("h0", "hn")]
    assert report.verdict == PART + "LSTM 'LSTM(y)' carries initial_h across calls but its initial_c is not given (zeros every call)."


def test_a_restart_one_stream_cannot_show_is_noted_and_not_failed():
    # one chunk is the whole stream: chunked equals whole, so the stream shows nothing, but the graph still restarts c
    report = check_multicall(lstm(inputs=("x", "h0", ""), outs=("y", "hn")), {"x": ones(6)}, chunk_sizes=[6])
    assert report.persistent_matches_whole is True and report.status == "inconclusive"
    assert ("LSTM 'LSTM(y)' carries initial_h across calls but its initial_c is not given (zeros every call); this stream does "
            "not show it (chunked calls equal one whole call)") in report.notes


def test_a_reverse_rnn_run_in_one_call_equals_the_whole_call_and_gets_no_reverse_note():
    m = build([rnn_node(direction="reverse")], [vi("x", ["T", 1, 1]), vi("h0", [1, 1, 1])], [vi("y", ["T", 1, 1, 1]), vi("hn", [1, 1, 1])], SEED_INITS)
    report = check_multicall(m, {"x": ones(4)}, chunk_sizes=[4])
    assert report.persistent_matches_whole is True
    assert not any("backwards" in n for n in report.notes)



def scaled_h_lstm():
    """An LSTM whose initial_h is its h slot times a plain input ``p`` (fed every call); c is a slot of its own."""
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("Mul", ["p", "h0"], ["hs"]),
             helper.make_node("LSTM", ["x", "W", "R", "", "", "hs", "c0"], ["y", "hn", "cn"], hidden_size=2)]
    inits = [init("W", rng.standard_normal((1, 8, 1))), init("R", 0.5 * rng.standard_normal((1, 8, 2)))]
    state = [1, 1, 2]
    return build(nodes, [vi("x", ["T", 1, 1]), vi("p", [1]), vi("h0", state), vi("c0", state)], [vi("y", None), vi("hn", state), vi("cn", state)], inits)


def test_a_state_scaled_by_a_plain_input_is_not_called_restarted_from_that_input():
    # h reaches the LSTM through a Mul with the plain input p: it is still the carried h, not p fed anew.  With
    # p = 1 chunked calls equal the whole call (a pass, with no restart note); with p = 0.5 every call scales the
    # carried h again, which only the whole-call comparison shows
    session = StatefulSession(scaled_h_lstm())
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(6, 1, 1)
    report = check_multicall(session, {"x": x}, chunk_sizes=[2], input_values={"p": 1.0})
    assert report.status == "pass" and report.notes == []
    scaled = check_multicall(session, {"x": x}, chunk_sizes=[2], input_values={"p": 0.5})
    assert scaled.status == "fail" and scaled.verdict.startswith("FAIL: chunked calls with persistence differ from one call over the whole stream")


# -- a two-layer GRU stack, written back right and in each wrong way ------------------------------------------

GRU_H = 2
_GRU_RNG = np.random.default_rng(11)
GRU_INITS = [init(f"{name}{layer}", scale * _GRU_RNG.standard_normal(shape))
             for layer, inputs in ((1, 1), (2, GRU_H))
             for name, scale, shape in (("W", 1.0, (1, 3 * GRU_H, inputs)), ("R", 0.5, (1, 3 * GRU_H, GRU_H)))]
WRITE_BACKS = {  # what each state output is: (h1n, h2n)
    "correct": ("Y1h", "Y2h"),
    "never written": ("h1", "Y2h"),  # layer 1's slot returns what it was given
    "wrong slot": ("Y2h", "Y1h"),  # each layer's final state lands in the other's slot
    "chained": ("Y1h", "Y1h"),  # layer 2's slot is written layer 1's state
    "stale": ("Y1first", "Y2h"),  # layer 1's state after the chunk's first step, not its last
}


def gru_stack(write_back: str):
    h1n, h2n = WRITE_BACKS[write_back]
    nodes = [
        helper.make_node("GRU", ["x", "W1", "R1", "", "", "h1"], ["Y1", "Y1h"], hidden_size=GRU_H),
        helper.make_node("Squeeze", ["Y1", "ax1"], ["x2"]),
        helper.make_node("GRU", ["x2", "W2", "R2", "", "", "h2"], ["Y2", "Y2h"], hidden_size=GRU_H),
        helper.make_node("Squeeze", ["Y2", "ax1"], ["y"]),
        helper.make_node("Slice", ["Y1", "zero", "one", "zero"], ["Y1first4"]),
        helper.make_node("Squeeze", ["Y1first4", "zero"], ["Y1first"]),
        helper.make_node("Identity", [h1n], ["h1n"]),
        helper.make_node("Identity", [h2n], ["h2n"]),
    ]
    state = [1, 1, GRU_H]
    inits = [*GRU_INITS, init("ax1", [1], np.int64), init("zero", [0], np.int64), init("one", [1], np.int64)]
    return build(nodes, [vi("x", ["T", 1, 1]), vi("h1", state), vi("h2", state)],
                 [vi("y", ["T", 1, GRU_H]), vi("h1n", state), vi("h2n", state)], inits, opset=13)


def _ort_stream(model, x: np.ndarray, chunk: int) -> np.ndarray:
    """y over the stream in calls of ``chunk`` steps, each call fed the state outputs of the one before (h1n -> h1, h2n -> h2),
    followed by the state the last call returns (what a caller carries on with)."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    state = {"h1": np.zeros((1, 1, GRU_H), np.float32), "h2": np.zeros((1, 1, GRU_H), np.float32)}
    ys = []
    for start in range(0, len(x), chunk):
        y, h1n, h2n = sess.run(["y", "h1n", "h2n"], {"x": x[start : start + chunk], **state})
        ys.append(y)
        state = {"h1": h1n, "h2": h2n}
    return np.concatenate([np.concatenate(ys).ravel(), state["h1"].ravel(), state["h2"].ravel()])


def test_each_wrong_write_back_of_a_gru_stack_fails_where_onnxruntime_shows_it_and_the_right_one_passes():
    x = np.sin(np.arange(9, dtype=np.float32)).reshape(9, 1, 1)
    for write_back in WRITE_BACKS:
        model = gru_stack(write_back)
        session = StatefulSession(model)
        assert [(s.input, s.output) for s in session.slots] == [("h1", "h1n"), ("h2", "h2n")]
        for chunk in (1, 3):
            # the oracle: this loop's chunked calls against one whole call, both in onnxruntime
            streams = bool(np.abs(_ort_stream(model, x, chunk) - _ort_stream(model, x, len(x))).max() <= 1e-5)
            # by construction only the right write-back streams; the stale one at one step per call gives the right y
            # (first step = last), but one whole call returns the state after its first step
            assert streams == (write_back == "correct"), (write_back, chunk)
            report = check_multicall(session, {"x": x}, chunk_sizes=[chunk])
            assert report.persistent_matches_whole is streams, (write_back, chunk)
            assert report.status == ("pass" if streams else "fail"), (write_back, chunk, report.verdict)
