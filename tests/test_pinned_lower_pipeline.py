"""lower()'s own lines (rnnir/lower/build.py), which every lowering runs. Kept apart from
tests/test_pinned_lowering_stages.py on purpose: tools/mutate.py gives a line that thousands of tests execute
only the fastest covering test of each file, so a case pinning such a line must be the fastest of its file (and
the file's first test pays for the lazy imports: each test here checks the whole rule on its own)."""

from __future__ import annotations

import onnx
from _pinned_models import I, model, vi
from onnx import helper

import rnnir


def _passthrough(graph_name):
    m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", [1, I])], [vi("y", [1, I])])
    m.graph.name = graph_name
    return m


def test_a_program_is_named_after_its_graph_else_model():
    assert rnnir.load(_passthrough("encoder")).name == "encoder"
    assert rnnir.load(_passthrough("")).name == "model"  # no graph name and no file


def test_an_unnamed_graph_read_from_a_file_is_named_after_the_file(tmp_path):
    path = tmp_path / "streaming_vad.onnx"
    onnx.save(_passthrough(""), path)
    assert rnnir.load(path).name == "streaming_vad"
    assert rnnir.load(path.read_bytes()).name == "model"  # near-miss: the same bytes, no file
    assert rnnir.load(_passthrough("encoder")).name == "encoder"  # a graph name comes first
