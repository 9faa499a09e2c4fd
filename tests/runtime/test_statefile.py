"""State files pinned beyond what test_pinned_runtime_api.py checks: the write is durable in the order the
docstring promises (the data reaches the disk before the rename, the folder after it, and no descriptor is
left open), and a dim the model declares as 0 (an exporter's "unknown") takes any size, as the slot does when
it is set or resolved.  The model is a one-op recurrence ``hn = h0 + x``: every number is hand-checkable."""

from __future__ import annotations

import io
import os
import stat
import zipfile

import numpy as np
import pytest
from onnx import TensorProto, helper

from rnnir import StateError
from rnnir.runtime import StatefulSession

F = TensorProto.FLOAT


def adder(h_shape, x_shape=None):
    """hn = h0 + x, both declared ``h_shape`` (x ``x_shape`` when given)."""
    g = helper.make_graph(
        [helper.make_node("Add", ["h0", "x"], ["hn"])],
        "adder",
        [helper.make_tensor_value_info("x", F, list(x_shape or h_shape)), helper.make_tensor_value_info("h0", F, list(h_shape))],
        [helper.make_tensor_value_info("hn", F, list(h_shape))],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def test_the_data_is_on_disk_before_the_rename_and_the_folder_after_it(tmp_path, monkeypatch):
    s = StatefulSession(adder([2]))
    s.run_dict({"x": np.array([1.0, 2.0], np.float32)})
    target = tmp_path / "s.state"
    real_fsync = os.fsync
    synced: list[tuple[str, int, bool]] = []  # (what the descriptor is, its size then, whether target existed then)

    def fsync(fd):
        st = os.fstat(fd)
        synced.append(("folder" if stat.S_ISDIR(st.st_mode) else "file", st.st_size, target.exists()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    s.save_state(target)
    monkeypatch.undo()
    size = target.stat().st_size
    assert synced == [("file", size, False), ("folder", synced[1][1], True)]
    fresh = StatefulSession(adder([2]))
    fresh.load_state(target)
    assert fresh.state["h0"].tolist() == [1.0, 2.0]


def test_saving_leaves_no_descriptor_open(tmp_path):
    s = StatefulSession(adder([2]))
    s.run_dict({"x": np.ones(2, np.float32)})
    s.save_state(tmp_path / "warm.state")  # anything opened once per process is open by now
    before = len(os.listdir("/proc/self/fd"))
    for k in range(3):
        s.save_state(tmp_path / f"s{k}.state")
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_dim_declared_0_takes_any_saved_size(tmp_path):
    # [1, 0] is how some exporters write an unknown dim: the slot is set with 3 columns, saved and loaded back
    s = StatefulSession(adder([1, 0]))
    s.state = {"h0": np.array([[1.0, 2.0, 3.0]], np.float32)}
    path = s.save_state(tmp_path / "s.state")
    fresh = StatefulSession(adder([1, 0]))
    fresh.load_state(path)
    assert fresh.state["h0"].tolist() == [[1.0, 2.0, 3.0]]
    # (the near miss, a fixed dim of another size refused, is test_a_saved_slot_of_another_rank_or_fixed_dim_is_refused)


def test_a_writer_that_fails_leaves_the_old_file_and_no_temporary_and_its_error_goes_through(tmp_path, monkeypatch):
    s = StatefulSession(adder([2]))
    s.run_dict({"x": np.array([1.0, 2.0], np.float32)})
    path = s.save_state(tmp_path / "s.state")
    old = path.read_bytes()
    s.run_dict({"x": np.array([1.0, 2.0], np.float32)})

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # not an OSError: not turned into a StateError, and not swallowed

    monkeypatch.setattr(np, "savez", interrupted)
    with pytest.raises(KeyboardInterrupt):
        s.save_state(path)
    assert os.listdir(tmp_path) == ["s.state"] and path.read_bytes() == old


# -- each .npy entry's header is read before its data: versions, object arrays, sizes it cannot hold ----------------


def _saved(tmp_path):
    s = StatefulSession(adder([2]))
    s.run_dict({"x": np.array([1.0, 2.0], np.float32)})
    return s, s.save_state(tmp_path / "s.state")


def _with_slot_entry(path, data: bytes) -> None:
    """Rewrite the saved file with the slot's entry replaced by ``data`` (the metadata entry kept as written)."""
    with zipfile.ZipFile(path) as zf:
        entries = {n: zf.read(n) for n in zf.namelist()}
    entries["slot:h0.npy"] = data
    with zipfile.ZipFile(path, "w") as zf:
        for name, raw in entries.items():
            zf.writestr(name, raw)


def _npy(array: np.ndarray, version) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, version=version, allow_pickle=True)
    return buf.getvalue()


def test_every_npy_version_numpy_writes_loads(tmp_path):
    for version in [(1, 0), (2, 0), (3, 0)]:  # one test: each version matters
        s, path = _saved(tmp_path)
        _with_slot_entry(path, _npy(np.array([7.0, -8.0], np.float32), version))
        s.load_state(path)
        assert s.state["h0"].tolist() == [7.0, -8.0], version


def _header(descr: str, shape: tuple[int, ...]) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


@pytest.mark.parametrize(
    "data,match",
    [
        (b"\x93NUMPY\x04\x00" + _header("<f4", (2,))[8:] + b"\0" * 8, r"unknown \.npy version \(4, 0\)"),
        (_npy(np.array([None, 1], dtype=object), (1, 0)), "Python objects"),
        (_header("<f4", (10**12,)) + b"\0" * 8, "declares 1,000,000,000,000 values"),
        (_header("<f4", (2,)) + b"\0" * 4, r"truncated \(4 of 8 bytes\)"),
    ],
    ids=["version", "object", "oversized", "truncated"],
)
def test_a_bad_npy_entry_is_named_and_the_state_kept(tmp_path, data, match):
    s, path = _saved(tmp_path)
    _with_slot_entry(path, data)
    with pytest.raises(StateError, match="'slot:h0.npy'.*" + match):
        s.load_state(path)
    assert s.state["h0"].tolist() == [1.0, 2.0]
