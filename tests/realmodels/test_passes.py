"""The passes on models nobody here wrote, and on mutants of them planted with onnx.helper.

Clean models (the six silero-vad files, the PyTorch exports) must give no
error-level finding and the state pairs their ground truth states
(``tests/realmodels.py``).  Each mutant plants one known bug into a copy of a
real model; the bug, not the passes, decides the expected code.
"""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

import rnnir
from rnnir import passes
from tests.support import realmodels as rm  # noqa: E402

pytestmark = pytest.mark.realmodel

TORCH_FILES = [f"{n}.{k}" for n in rm.TORCH_MODELS for k in ("ts", "dynamo")]


def torch_model(name: str) -> onnx.ModelProto:
    return onnx.load(str(rm.torch_models_dir() / f"{name}.onnx"))  # loads the dynamo files' external data too


def silero_model(name: str) -> onnx.ModelProto:
    try:
        return onnx.load(str(rm.silero_path(name)))
    except rm.RealModelUnavailable as exc:
        pytest.skip(f"silero-vad unavailable: {exc}")


def load(model_or_name: onnx.ModelProto | str):
    if isinstance(model_or_name, str):
        model_or_name = torch_model(model_or_name) if model_or_name in TORCH_FILES else silero_model(model_or_name)
    return rnnir.load(model_or_name)


def findings(prog, severity=None):
    return sorted((d.code, d.severity.value) for d in passes.run(prog) if severity is None or d.severity.value == severity)


def error_codes(prog):
    return sorted({c for c, s in findings(prog) if s == "error"})


# -- mutants (onnx.helper on a copy of the graph) ----------------------------------------------------


def _producer(graph: onnx.GraphProto, name: str) -> onnx.NodeProto:
    for n in graph.node:
        if name in n.output:
            return n
    raise LookupError(f"nothing in the main graph produces {name!r}")


def _rename_output(graph: onnx.GraphProto, name: str, new: str) -> None:
    node = _producer(graph, name)
    node.output[list(node.output).index(name)] = new


def swap_concat_inputs(m: onnx.ModelProto, out: str) -> onnx.ModelProto:
    """The Concat that packs ``out`` takes its parts in the other order (h/c, layer 0/1)."""
    node = _producer(m.graph, out)
    assert node.op_type == "Concat" and len(node.input) == 2, node
    node.input[0], node.input[1] = node.input[1], node.input[0]
    return m


def swap_outputs(m: onnx.ModelProto, a: str, b: str) -> onnx.ModelProto:
    """Outputs ``a`` and ``b`` (e.g. hn and cn) return each other's value."""
    _rename_output(m.graph, a, a + "__orig")
    _rename_output(m.graph, b, b + "__orig")
    m.graph.node.extend([helper.make_node("Identity", [b + "__orig"], [a]), helper.make_node("Identity", [a + "__orig"], [b])])
    return m


def hand_back(m: onnx.ModelProto, inp: str, out: str) -> onnx.ModelProto:
    """``out`` returns the incoming state ``inp`` unchanged."""
    _rename_output(m.graph, out, out + "__dead")
    m.graph.node.append(helper.make_node("Identity", [inp], [out]))
    return m


def return_as_float16(m: onnx.ModelProto, out: str) -> onnx.ModelProto:
    """``out`` is Cast to float16 (and declared so) while its state input stays float32."""
    _rename_output(m.graph, out, out + "__f32")
    m.graph.node.append(helper.make_node("Cast", [out + "__f32"], [out], to=TensorProto.FLOAT16))
    next(o for o in m.graph.output if o.name == out).type.tensor_type.elem_type = TensorProto.FLOAT16
    return m


def start_from_zeros(m: onnx.ModelProto) -> onnx.ModelProto:
    """Every RNN/GRU/LSTM, in every (sub)graph, drops initial_h/initial_c: it starts from zeros."""

    def walk(g: onnx.GraphProto) -> int:
        n_rec = 0
        for n in g.node:
            if n.op_type in ("RNN", "GRU", "LSTM"):
                for k in (5, 6):
                    if k < len(n.input):
                        n.input[k] = ""
                n_rec += 1
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    n_rec += walk(a.g)
        return n_rec

    assert walk(m.graph) > 0
    return m


# -- clean real models ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", TORCH_FILES)
def test_torch_export_has_no_error_and_the_right_pairs(name):
    prog = load(name)
    model = name.rsplit(".", 1)[0]
    assert {p.input: p.output for p in prog.state_pairs} == rm.TORCH_STATE_PAIRS[model]
    assert error_codes(prog) == []


@pytest.mark.parametrize("name", rm.SILERO_FILES)
def test_silero_vad_has_no_error_and_the_right_pairs(name):
    prog = load(name)
    assert {p.input: p.output for p in prog.state_pairs} == rm.SILERO_STATE_PAIRS[name]
    assert error_codes(prog) == []
    assert ("SD003", "warning") not in findings(prog)


def test_silero_zero_term_on_the_state_is_seen_through():
    # silero_vad_16k_op15: stateN = Add(Concat(Y_h, Y_c), Cast(sr * 0)); sr is int64, so sr * 0 is exactly 0
    prog = load("silero_vad_16k_op15.onnx")
    assert passes.run(prog) == []
    assert [s.verdict.value for s in passes.verify(prog).slices] == ["verified", "verified"]


@pytest.mark.parametrize("name", ["silero_vad.onnx", "silero_vad_half.onnx", "silero_vad_16k_op15.onnx"])
def test_silero_reset_branch_is_not_a_finding(name):
    # decoder/If_1's else branch runs its LSTM from ConstantOfShape zeros while the then branch reads the state
    assert not {c for c, _ in findings(load(name))} & {"SD001", "SD003", "SD007"}


def test_silero_plain_cell_is_recognised_and_clean():
    prog = load("silero_vad_op18_ifless.onnx")
    # one LSTM cell written as plain ops per If branch, recognised and confirmed by execution
    assert [(r.kind, r.recognition.value) for r in prog.recurrents] == [("LSTM", "cell"), ("LSTM", "cell")]
    assert findings(prog) == []


@pytest.mark.parametrize("name", ["bilstm_stream.ts", "bilstm_stream.dynamo"])
def test_persisted_bidirectional_state_is_SD006_warning_only(name):
    assert findings(load(name)) == [("SD006", "warning"), ("SD006", "warning")]  # one per slot: h0, c0


# -- planted mutants ------------------------------------------------------------------------------


MUTANTS = [
    # (model, mutation, expected error codes)
    ("lstm_packed_state.ts", lambda m: swap_concat_inputs(m, "stateN"), ["SD002"]),
    ("lstm_packed_state.dynamo", lambda m: swap_concat_inputs(m, "stateN"), ["SD002"]),
    ("silero_vad_half.onnx", lambda m: swap_concat_inputs(m, "stateN"), ["SD002"]),
    ("silero_vad_openvino_16k.onnx", lambda m: swap_concat_inputs(m, "stateN"), ["SD002"]),
    ("silero_vad_16k_sequence.onnx", lambda m: swap_outputs(m, "hn", "cn"), ["SD002"]),
    ("lstm_stream.ts", lambda m: swap_outputs(m, "hn", "cn"), ["SD002"]),
    ("gru2_stream.ts", lambda m: swap_concat_inputs(m, "hn"), ["SD002"]),
    ("gru2_stream.dynamo", lambda m: swap_concat_inputs(m, "hn"), ["SD002"]),
    ("lstm_packed_state.ts", lambda m: hand_back(m, "state", "stateN"), ["SD001"]),
    ("gru_stream.dynamo", lambda m: hand_back(m, "h0", "hn"), ["SD001"]),
    ("silero_vad.onnx", lambda m: hand_back(m, "state", "stateN"), ["SD001"]),
    ("silero_vad_op18_ifless.onnx", lambda m: hand_back(m, "state", "stateN"), ["SD001"]),
    ("gru_stream.ts", lambda m: return_as_float16(m, "hn"), ["SD005"]),
    ("lstm_packed_state.dynamo", lambda m: return_as_float16(m, "stateN"), ["SD005"]),
    ("silero_vad_half.onnx", lambda m: return_as_float16(m, "stateN"), ["SD005"]),
    ("gru_stream.ts", start_from_zeros, ["SD007"]),
    ("lstm_stream.dynamo", start_from_zeros, ["SD007"]),
    ("lstm_packed_state.ts", start_from_zeros, ["SD007"]),
    ("silero_vad_half.onnx", start_from_zeros, ["SD007"]),
    ("silero_vad_openvino_16k.onnx", start_from_zeros, ["SD007"]),
]


@pytest.mark.parametrize(
    "name, mutate, expected",
    MUTANTS,
    ids=[f"{n}-{e[0]}-{i}" for i, (n, _, e) in enumerate(MUTANTS)],
)
def test_planted_mutant_is_caught_with_the_right_code(name, mutate, expected):
    model = torch_model(name) if name in TORCH_FILES else silero_model(name)
    original = rnnir.load(model)
    assert error_codes(original) == []  # the bug is the mutation's, not the model's
    mutant = mutate(model)
    onnx.checker.check_model(mutant)
    prog = rnnir.load(mutant)
    assert {p.input: p.output for p in prog.state_pairs} == {p.input: p.output for p in original.state_pairs}
    assert error_codes(prog) == expected, [d.message for d in passes.run(prog)]


def test_hc_swap_message_names_slot_slices_and_op():
    prog = rnnir.load(swap_concat_inputs(torch_model("lstm_packed_state.ts"), "stateN"))
    (d,) = [d for d in passes.run(prog) if d.code == "SD002"]
    assert d.slot == "state"
    assert "state[0] (initial_h of LSTM '/rnn/LSTM')" in d.message and "state[1] (initial_c of LSTM '/rnn/LSTM')" in d.message
    assert "Y_c" in d.message and "Y_h" in d.message


def test_layer_swap_message_names_both_layers():
    prog = rnnir.load(swap_concat_inputs(torch_model("gru2_stream.ts"), "hn"))
    (d,) = [d for d in passes.run(prog) if d.code == "SD002"]
    assert "'/rnn/GRU'" in d.message and "'/rnn/GRU_1'" in d.message and "h0[0]" in d.message and "h0[1]" in d.message


def test_silero_state_ignored_names_the_branch_ops():
    prog = rnnir.load(start_from_zeros(silero_model("silero_vad_half.onnx")))
    (d,) = [d for d in passes.run(prog) if d.code == "SD007"]
    assert "'/decoder/rnn/LSTM'" in d.message and "zeros (no initial_h input)" in d.message
