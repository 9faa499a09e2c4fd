"""State pairs and per-slice mapping on models nobody here wrote: silero-vad and PyTorch exports."""

from __future__ import annotations

import pytest

import rnnir
from tests.support import realmodels

pytestmark = pytest.mark.realmodel


def _slices(pair):
    return {s.label: s for s in pair.slices}


@pytest.mark.parametrize("name", [n for n in realmodels.SILERO_FILES if n != "silero_vad_16k_sequence.onnx"])
def test_silero_packed_state_maps_to_h_and_c(silero_dir, name):
    prog = rnnir.load(silero_dir / name)
    (pair,) = prog.state_pairs
    assert (pair.input, pair.output) == ("state", "stateN")
    s = _slices(pair)
    if name == "silero_vad_op18_ifless.onnx":
        # no LSTM node: a hand-written cell per branch, recognised (issue 8); its ports are the ground truth's
        cells = {r.provenance.branch[-1]: r for r in prog.recurrents}
        assert sorted(cells) == ["node_cond__1.else_branch", "node_cond__1.then_branch"]
        for label, port, final in (("state[0]", "initial_h", "Y_h"), ("state[1]", "initial_c", "Y_c")):
            assert sorted((e.node_id, e.port) for e in s[label].entry) == sorted((r.id, port) for r in cells.values())
            assert sorted((e.node_id, e.port) for e in s[label].exit) == sorted((r.id, final) for r in cells.values())
            assert set(s[label].exit_kind.values()) == {"final"}
        then = cells["node_cond__1.then_branch"]
        # tests/realmodels.py: state[0] is read by the weight_hh Gemm, state[1] by the forget product
        assert {"node_linear", "node_mul_168", "node_mul_182"} <= set(then.recognised_from)
        return
    sites = [site for site in realmodels.SILERO_RECURRENT_SITES[name] if site["reads_state"]]
    for label, port, final in (("state[0]", "initial_h", "Y_h"), ("state[1]", "initial_c", "Y_c")):
        entry = s[label].entry
        assert {e.port for e in entry} == {port}
        assert {e.onnx_node for e in entry} == {site["node"] for site in sites}
        exits = s[label].exit
        assert {e.port for e in exits} == {final}
        for site in sites:  # the op that reads the slice writes it back, in its own If branch
            mine = [e for e in exits if e.onnx_node == site["node"]]
            assert mine and all("/".join(e.branch).endswith(site["branch"].split("/")[-1]) for e in mine)


def test_silero_sequence_model_has_separate_h_and_c(silero_dir):
    prog = rnnir.load(silero_dir / "silero_vad_16k_sequence.onnx")
    pairs = {p.input: p for p in prog.state_pairs}
    assert set(pairs) == {"h", "c"}
    assert [(e.onnx_node, e.port) for e in pairs["h"].slices[0].entry] == [("/recurrent/LSTM", "initial_h")]
    assert [(e.onnx_node, e.port) for e in pairs["c"].slices[0].exit] == [("/recurrent/LSTM", "Y_c")]


@pytest.mark.parametrize("kind", ["ts", "dynamo"])
def test_torch_two_layer_gru_maps_each_layer(kind):
    prog = rnnir.load(realmodels.torch_models_dir() / f"gru2_stream.{kind}.onnx")
    pair = prog.pair("h0")
    s = _slices(pair)
    assert set(s) == {"h0[0]", "h0[1]"}
    l0 = {e.onnx_node for e in s["h0[0]"].entry}
    l1 = {e.onnx_node for e in s["h0[1]"].entry}
    assert len(l0) == 1 and len(l1) == 1 and l0 != l1
    assert {e.onnx_node for e in s["h0[0]"].exit} == l0
    assert {e.onnx_node for e in s["h0[1]"].exit} == l1


@pytest.mark.parametrize("kind", ["ts", "dynamo"])
def test_torch_packed_state_maps_h_and_c(kind):
    prog = rnnir.load(realmodels.torch_models_dir() / f"lstm_packed_state.{kind}.onnx")
    s = _slices(prog.pair("state"))
    assert [e.port for e in s["state[0]"].entry] == ["initial_h"] and [e.port for e in s["state[0]"].exit] == ["Y_h"]
    assert [e.port for e in s["state[1]"].entry] == ["initial_c"] and [e.port for e in s["state[1]"].exit] == ["Y_c"]


@pytest.mark.parametrize("kind", ["ts", "dynamo"])
def test_torch_bidirectional_maps_both_directions(kind):
    prog = rnnir.load(realmodels.torch_models_dir() / f"bilstm_stream.{kind}.onnx")
    s = _slices(prog.pair("h0"))
    assert {(e.port, e.direction) for sl in s.values() for e in sl.entry} == {("initial_h", 0), ("initial_h", 1)}
    assert {(e.port, e.direction) for sl in s.values() for e in sl.exit} == {("Y_h", 0), ("Y_h", 1)}


@pytest.mark.parametrize("kind", ["ts", "dynamo"])
def test_torch_stateless_encoder_has_no_pairs(kind):
    prog = rnnir.load(realmodels.torch_models_dir() / f"gru_encoder_stateless.{kind}.onnx")
    assert prog.state_pairs == () and prog.suggested_pairs == ()
