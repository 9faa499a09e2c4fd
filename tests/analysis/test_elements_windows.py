"""Sliding windows packed on one axis of a cache, proven element by element (rnnir.analysis.elements).

GTCRN's ``conv_cache`` keeps the input history of several dilated convs side by side on its time axis, each
written back as ``Concat(cache[..., p+s : p+L], new)``: its own newest ``L`` frames.  Each model here is that
cache in small -- ``cache[1, C, 6]`` with windows at frames ``0:2`` and ``2:6`` -- or one element off it.  The
oracle is onnxruntime run call by call with the cache fed back: a model rnnir proves a window must keep, in
every window, exactly the newest frames of the stream it was fed (chunked calls equal the whole stream's tail),
and each near miss must really fail that and must not be verified.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import passes
from rnnir.analysis.slices import slice_maps

F32 = TensorProto.FLOAT
INT64_MAX = 2**63 - 1
LAYOUT = ((0, 2), (2, 4))  # the two windows of the good model: frames 0:2 and 2:6


@dataclass(frozen=True)
class Part:
    """One run of the written-back cache along the time axis: ``cache[..., start:end]`` (``new`` False) or the
    call's new frames ``new[..., start:end]`` (``new`` True)."""

    start: int
    end: int
    new: bool = False


def old(start: int, end: int) -> Part:
    return Part(start, end)


def new(start: int = 0, end: int = INT64_MAX) -> Part:
    return Part(start, end, new=True)


GOOD = (old(1, 2), new(), old(3, 6), new())  # [c1, n] ++ [c3, c4, c5, n]: each window's newest frames


def cache_model(parts: tuple[Part, ...], *, channels: int = 3, frames: int = 1, length: int = 6, time_axis: int = 2) -> onnx.ModelProto:
    """cache[1, channels, length] (time on axis 2) written back as Concat of ``parts`` along it; the new frames
    are ``x * 2`` (x[1, channels, frames]), so they are computed, not a slot's."""
    shape = [1, channels, length]
    nodes = [helper.make_node("Mul", ["x", "two"], ["frames"], name="frames")]
    inits = [numpy_helper.from_array(np.array(2.0, np.float32), "two"), numpy_helper.from_array(np.array([time_axis], np.int64), "t")]
    pieces = []
    for k, p in enumerate(parts):
        inits += [numpy_helper.from_array(np.array([p.start], np.int64), f"s{k}"), numpy_helper.from_array(np.array([p.end], np.int64), f"e{k}")]
        nodes.append(helper.make_node("Slice", ["frames" if p.new else "cache", f"s{k}", f"e{k}", "t"], [f"p{k}"], name=f"part{k}"))
        pieces.append(f"p{k}")
    nodes.append(helper.make_node("Concat", pieces, ["cache_out"], axis=time_axis, name="write_back"))
    nodes.append(helper.make_node("ReduceSum", ["frames"], ["y"], keepdims=0, name="use"))
    graph = helper.make_graph(
        nodes, "cache", [helper.make_tensor_value_info("x", F32, [1, channels, frames]), helper.make_tensor_value_info("cache", F32, shape)],
        [helper.make_tensor_value_info("y", F32, []), helper.make_tensor_value_info("cache_out", F32, shape)], initializer=inits)
    # the intermediate shapes, as exporters write them: the element tracer needs the new frames' static shape
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def windows_hold_newest_frames(m: onnx.ModelProto, layout: tuple[tuple[int, int], ...] = LAYOUT, calls: int = 7) -> bool:
    """onnxruntime, call by call with the cache fed back: does every window ``(p, L)`` hold the newest ``L`` frames
    of everything fed so far (zeros before the first call), in order, on every channel?"""
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x_shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    c_shape = [d.dim_value for d in m.graph.input[1].type.tensor_type.shape.dim]
    cache = np.zeros(c_shape, np.float32)
    fed = np.zeros((1, x_shape[1], 0), np.float32)
    rng = np.random.default_rng(1)
    for _ in range(calls):
        x = rng.integers(1, 100, x_shape).astype(np.float32)
        _, cache = sess.run(None, {"x": x, "cache": cache})
        fed = np.concatenate([fed, 2 * x], axis=2)
        for p, n in layout:
            history = np.concatenate([np.zeros((1, x_shape[1], n), np.float32), fed], axis=2)[:, :, -n:]
            if not np.array_equal(cache[:, :, p : p + n], history):
                return False
    return True


def verdict(m: onnx.ModelProto) -> tuple[str, tuple[tuple[int, int], ...] | None, int | None]:
    """What rnnir says of the cache: its verdict, and the windows and new frames per call it proved (if any)."""
    prog = rnnir.load(m, pairs={"cache": "cache_out"})
    (sv,) = passes.verify(prog).slices
    (sm,) = slice_maps(prog).pair("cache").slices
    w = sm.windows.get("")
    return sv.verdict.value, (w.segments or None) if w else None, w.new_len if w else None


def test_windows_packed_on_the_time_axis_are_proven_and_really_keep_the_newest_frames():
    m = cache_model(GOOD)
    assert windows_hold_newest_frames(m)
    assert verdict(m) == ("verified", LAYOUT, 1)
    assert passes.run(rnnir.load(m, pairs={"cache": "cache_out"})) == []
    # two new frames a call: each window shifts by 2
    ok2 = cache_model((old(2, 4), new(), old(6, 8), new()), frames=2, length=8)
    assert windows_hold_newest_frames(ok2, ((0, 4), (4, 4)))
    assert verdict(ok2) == ("verified", ((0, 4), (4, 4)), 2)
    # one window over the whole axis, on one channel
    one = cache_model((old(1, 6), new()), channels=1)
    assert windows_hold_newest_frames(one, ((0, 6),))
    assert verdict(one)[0] == "verified"


NEAR_MISSES = {
    # one element off the good model each: the oracle shows the windows broken, rnnir must not verify them
    "a stale frame kept at the front of window 0": (old(0, 1), new(), old(3, 6), new()),
    "window 1 not shifted": (old(1, 2), new(), old(2, 5), new()),
    "window 1 shifted by 2, one new frame": (old(1, 2), new(), old(4, 6), new(), new()),
    "new frame first in window 0": (new(), old(1, 2), old(3, 6), new()),
    "window 0 keeps window 1's frame": (old(3, 4), new(), old(3, 6), new()),
    "window 1 reversed in time": (old(1, 2), new(), old(5, 6), old(4, 5), old(3, 4), new()),
    "new frame missing from window 1": (old(1, 2), new(), old(3, 6), old(5, 6)),
}


def test_a_cache_one_element_off_its_windows_is_never_verified():
    for what, parts in NEAR_MISSES.items():
        m = cache_model(parts)
        assert not windows_hold_newest_frames(m), what
        got, layout, _ = verdict(m)
        assert got != "verified" and layout is None, what


def test_windows_must_agree_on_every_line_of_the_cache():
    # channel 1 written with its window 1 one frame stale, channels 0 and 2 right: one bad line is enough
    m = cache_model(GOOD)
    g = m.graph
    g.initializer.extend([numpy_helper.from_array(np.array([1], np.int64), "c1"), numpy_helper.from_array(np.array([2], np.int64), "c2"),
                          numpy_helper.from_array(np.array([1], np.int64), "ch"), numpy_helper.from_array(np.array([0], np.int64), "c0"),
                          numpy_helper.from_array(np.array([3], np.int64), "c3"), numpy_helper.from_array(np.array([2], np.int64), "w1"),
                          numpy_helper.from_array(np.array([6], np.int64), "w2"), numpy_helper.from_array(np.array([5], np.int64), "w3")])
    out = next(n for n in g.node if n.name == "write_back")
    out.output[0] = "good"
    # stale = good with channel 1's frames 2:6 replaced by cache[:, 1, 2:6] (not shifted)
    g.node.extend([
        helper.make_node("Slice", ["good", "c0", "c1", "ch"], ["ch0"]),
        helper.make_node("Slice", ["good", "c2", "c3", "ch"], ["ch2"]),
        helper.make_node("Slice", ["good", "c1", "c2", "ch"], ["ch1"]),
        helper.make_node("Slice", ["ch1", "c0", "w1", "t"], ["ch1a"]),
        helper.make_node("Slice", ["cache", "c1", "c2", "ch"], ["cc1"]),
        helper.make_node("Slice", ["cc1", "w1", "w2", "t"], ["ch1b"]),
        helper.make_node("Concat", ["ch1a", "ch1b"], ["ch1n"], axis=2),
        helper.make_node("Concat", ["ch0", "ch1n", "ch2"], ["cache_out"], axis=1),
    ])
    assert not windows_hold_newest_frames(m)
    assert verdict(m)[0] != "verified"


BIG = 4200  # frames: the shift's index tensor is larger than the constants the IR keeps (SMALL_CONST, 4096)


def gather_shift_model(index: np.ndarray | None) -> onnx.ModelProto:
    """cache[1, 1, BIG] written back as Gather(Concat(cache, new, axis=2), index, axis=2): an exporter's index_select.
    ``index`` None: the index is the caller's input (unknown to rnnir)."""
    nodes = [helper.make_node("Mul", ["x", "two"], ["frames"]), helper.make_node("Concat", ["cache", "frames"], ["cat"], axis=2),
             helper.make_node("Gather", ["cat", "index"], ["cache_out"], axis=2), helper.make_node("ReduceSum", ["frames"], ["y"], keepdims=0)]
    inits = [numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    inputs = [helper.make_tensor_value_info("x", F32, [1, 1, 1]), helper.make_tensor_value_info("cache", F32, [1, 1, BIG])]
    if index is None:
        inputs.append(helper.make_tensor_value_info("index", TensorProto.INT64, [BIG]))
    else:
        inits.append(numpy_helper.from_array(index.astype(np.int64), "index"))
    graph = helper.make_graph(nodes, "shift", inputs, [helper.make_tensor_value_info("y", F32, []), helper.make_tensor_value_info("cache_out", F32, [1, 1, BIG])],
                              initializer=inits)
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def test_a_shift_written_as_a_gather_with_a_large_index_is_read_from_the_model():
    shift = gather_shift_model(np.arange(1, BIG + 1))  # frames 1..BIG of cache ++ new: the newest BIG
    assert windows_hold_newest_frames(shift, ((0, BIG),), calls=2)
    assert verdict(shift) == ("verified", ((0, BIG),), 1)
    stale = gather_shift_model(np.arange(0, BIG))  # frames 0..BIG-1: the new frame never kept
    assert not windows_hold_newest_frames(stale, ((0, BIG),), calls=2)
    assert verdict(stale)[0] != "verified"
    # the index is the caller's: nothing to read, never verified, and no crash looking for it
    assert verdict(gather_shift_model(None))[0] != "verified"


def test_an_index_whose_bytes_were_not_loaded_with_the_model_is_never_read_from_the_working_directory(tmp_path, monkeypatch):
    # the shift's index stored as external data the caller did not load: a file of that name in the current
    # directory is not the model's (the model's directory may be elsewhere), so rnnir reads nothing and proves nothing
    shift = gather_shift_model(np.arange(1, BIG + 1))
    index = next(t for t in shift.graph.initializer if t.name == "index")
    (tmp_path / "index.bin").write_bytes(index.raw_data)
    index.ClearField("raw_data")
    index.data_location = TensorProto.EXTERNAL
    index.external_data.add(key="location", value="index.bin")
    monkeypatch.chdir(tmp_path)
    assert verdict(shift)[0] != "verified"
