"""`rnnir show`: the state's journey by default, the full program under --full, images through Graphviz.

Oracles: the samples' construction (samples/make_samples.py: which port feeds which slot), the
ground-truth table of the silero-vad files in tests/realmodels.py, and Graphviz itself (a PNG's
size read from its header, an SVG parsed as XML).
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import onnx
import pytest

import rnnir
from rnnir import cli
from rnnir.render.graph import to_dot, to_mermaid
from rnnir.render.journey import ArrowKind, BoxKind, journey, journey_text

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def show(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["show", "--no-config", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_module(*argv: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "rnnir", *argv], capture_output=True, text=True, env=env, timeout=300)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])  # IHDR, the first chunk
    return width, height


def incoming(text: str, box: str) -> list[str]:
    """The ``<- ...`` lines under the first line of the journey text that starts with ``box``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  " + box))
    out = []
    for line in lines[start + 1 :]:
        if not line.startswith("    <- "):
            break
        out.append(line[len("    <- ") :])
    return out


# -- the journey on samples ----------------------------------------------------------------------


def test_journey_of_a_fanout_lstm_shows_each_final_state_read_by_two_stores(capsys):
    code, out, _ = show(capsys, str(SAMPLES / "lstm_fanout.onnx"))
    assert code == 0
    # lstm_fanout: h0/c0 feed initial_h/initial_c; Y_h/Y_c fan out to the slots and to hn/cn
    assert incoming(out, "LSTM lstm") == ["load h0: h0 → initial_h", "load c0: c0 → initial_c"]
    assert incoming(out, "fan-out: %hn") == ["LSTM lstm: Y_h → h0"]
    assert incoming(out, "fan-out: %cn") == ["LSTM lstm: Y_c → c0"]
    assert incoming(out, "store → slot h0") == ["fan-out: %hn"] and incoming(out, "store → output hn") == ["fan-out: %hn"]
    assert "Gather" not in out and "program @" not in out  # no IR text by default


def test_journey_shows_an_hc_swap_where_the_correct_model_shows_none(capsys):
    code, swapped, _ = show(capsys, str(SAMPLES / "sd002_hc_swap.onnx"))
    assert code == 0
    # sd002_hc_swap writes Concat(Y_c, Y_h): Y_c lands in state[0], which is read as initial_h
    assert incoming(swapped, "LSTM lstm") == ["load state: state[0] → initial_h; state[1] → initial_c; via Slice"]
    assert incoming(swapped, "fan-out: %stateN") == ["LSTM lstm: Y_c → state[0]; Y_h → state[1]; via Concat"]


def test_journey_of_a_chain_draws_the_store_reading_the_other_store(capsys):
    code, out, _ = show(capsys, str(SAMPLES / "al001_chain.rnnir"))
    assert code == 0
    assert incoming(out, "store → output hn") == ["store → slot h0: store result"]
    assert incoming(out, "store → slot h0") == ["GRU gru: Y_h → h0"]  # near miss: the slot store reads the final state


def test_journey_marks_value_changing_ops_and_layout_only_ops_differently():
    prog = rnnir.load(SAMPLES / "lstm_fanout.onnx")
    pic = journey(prog)
    assert {a.kind for a in pic.arrows} <= {ArrowKind.DATA, ArrowKind.READ, ArrowKind.WRITE}  # layout only: no CHANGED arrow
    kinds = [b.kind for b in pic.boxes]
    assert kinds.count(BoxKind.SLOT) == 2 and kinds.count(BoxKind.STORE) == 5 and kinds.count(BoxKind.RECURRENT) == 1


def test_full_shows_every_node_and_the_journey_fewer(capsys):
    prog = rnnir.load(SAMPLES / "lstm_packed_if.onnx")
    full = to_dot(prog)
    short = to_dot(prog, journey=True)
    node_lines = re.compile(r'^  "[^"]+" \[', re.M)
    assert len(node_lines.findall(full)) == len(prog) + len(prog.slots) + len(prog.outputs)
    assert len(node_lines.findall(short)) < len(node_lines.findall(full))
    code, out, _ = show(capsys, str(SAMPLES / "lstm_packed_if.onnx"), "--full", "--format", "dot")
    assert code == 0 and out == full + "\n"


def test_mermaid_journey_has_labelled_arrows():
    mer = to_mermaid(rnnir.load(SAMPLES / "lstm_fanout.onnx"), journey=True)
    assert mer.startswith("flowchart LR")
    assert re.search(r'-->\|"h0 → initial_h"\| n\d+', mer)


# -- silero-vad: a real model on one screen ------------------------------------------------------


@pytest.mark.realmodel
def test_silero_vad_journey_follows_the_ground_truth(silero_dir, capsys):
    code, out, _ = show(capsys, str(silero_dir / "silero_vad.onnx"))
    assert code == 0
    assert len(out.splitlines()) < 40  # 149 lines of IR text before
    # realmodels.py: state[0] -> initial_h, state[1] -> initial_c of the LSTM in each If_1.then branch;
    # the If_1.else LSTMs start from zeros; stateN = Concat(Y_h, Y_c) goes to the slot and the output
    for rate in ("If_0.then", "If_0.else"):
        assert incoming(out, f"LSTM decoder/rnn/LSTM; forward, hidden 128; in {rate} › If_1.then") == [
            "load state: state[0] → initial_h; state[1] → initial_c; via Gather, Unsqueeze, Identity"
        ]
        assert f"LSTM decoder/rnn_1/LSTM; forward, hidden 128; in {rate} › If_1.else; state in: not from a slot" in out
    into_fanout = incoming(out, "fan-out: %stateN; read by 2 stores")
    assert len(into_fanout) == 4 and all("Y_h → state[0]; Y_c → state[1]" in line for line in into_fanout)
    assert incoming(out, "store → slot state") == ["fan-out: %stateN"] == incoming(out, "store → output stateN")


@pytest.mark.realmodel
@needs_dot
def test_silero_vad_png_fits_on_one_screen(silero_dir, tmp_path):
    target = tmp_path / "fanout.png"
    done = run_module("show", str(silero_dir / "silero_vad.onnx"), "-o", str(target))
    assert done.returncode == 0, done.stderr
    width, height = png_size(target)
    assert width <= 2800 and height <= 1000, (width, height)  # the full program was 20,580 x 2,611


@needs_dot
def test_svg_is_rendered_by_graphviz_with_the_journey_labels(tmp_path):
    target = tmp_path / "fanout.svg"
    done = run_module("show", str(SAMPLES / "lstm_fanout.onnx"), "-o", str(target), "--no-config")
    assert done.returncode == 0, done.stderr
    root = ET.parse(target).getroot()
    texts = {t.text for t in root.iter("{http://www.w3.org/2000/svg}text")}
    assert {"h0 → initial_h", "Y_h → h0", "store → slot h0"} <= texts


def test_image_without_graphviz_is_a_clear_error(tmp_path):
    target = tmp_path / "fanout.svg"
    empty = tmp_path / "empty-path"
    empty.mkdir()
    done = run_module("show", str(SAMPLES / "lstm_fanout.onnx"), "-o", str(target), env_extra={"PATH": str(empty)})
    assert done.returncode == 2
    assert "needs Graphviz's `dot` program, which is not on PATH" in done.stderr and "Traceback" not in done.stderr
    assert not target.exists()


def test_output_suffix_chooses_the_text_format(tmp_path, capsys):
    for suffix, start in ((".dot", "digraph "), (".mmd", "flowchart LR"), (".txt", "state journey of @"), (".json", "{")):
        target = tmp_path / f"picture{suffix}"
        code, out, _ = show(capsys, str(SAMPLES / "lstm_fanout.onnx"), "-o", str(target))
        assert code == 0 and out == ""
        assert target.read_text(encoding="utf-8").startswith(start)


def test_image_with_a_text_format_is_refused(tmp_path, capsys):
    code, _, err = show(capsys, str(SAMPLES / "lstm_fanout.onnx"), "-o", str(tmp_path / "x.png"), "--format", "mermaid")
    assert code == 2 and ("does not apply" in err or "Graphviz" in err)


def test_journey_text_of_a_builder_program_without_pairs():
    b = rnnir.Builder("nothing")
    b.store(b.compute("Relu", [b.input("x")]), b.output("y"))
    text = journey_text(b.build())
    assert text.startswith("state journey of @nothing")
    assert incoming(text, "store → output y") == []  # Relu of a plain input: no state travels there


def test_journey_draws_an_explicit_ordering_and_none_where_nothing_orders(capsys):
    # gru_view_load_ordered: an ordering edge puts the state_norm store before the slot store (make_samples.py)
    code, ordered, _ = show(capsys, str(SAMPLES / "gru_view_load_ordered.rnnir"))
    assert code == 0
    assert "store → output state_norm: runs first" in incoming(ordered, "store → slot state")
    # or002_view_war: the same model with nothing ordering the two
    code, unordered, _ = show(capsys, str(SAMPLES / "or002_view_war.rnnir"))
    assert code == 0 and "runs first" not in unordered
    assert incoming(unordered, "store → output state_norm") == ["load state: via ReduceL2; value changed by ReduceL2"]


def test_journey_of_a_model_without_state_says_so(capsys):
    code, out, _ = show(capsys, str(REPO / "tests" / "data" / "torch" / "gru_encoder_stateless.ts.onnx"))
    assert code == 0
    assert out.splitlines()[1] == "  no state pairs: nothing persists across calls"
    assert "state in: not from a slot" in out


def test_journey_text_escapes_a_newline_inside_a_name(tmp_path, capsys):
    """One box a line: a name with a newline in it is shown escaped, not broken over two lines."""
    from onnx import TensorProto, helper, numpy_helper

    rnn = helper.make_node("RNN", ["x", "W", "R", "", "", "h\nzero"], ["y", "h\nn"], name="r\nnn", hidden_size=2)
    graph = helper.make_graph(
        [rnn], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 1, 1]), helper.make_tensor_value_info("h\nzero", TensorProto.FLOAT, [1, 1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["T", 1, 1, 2]), helper.make_tensor_value_info("h\nn", TensorProto.FLOAT, [1, 1, 2])],
        [numpy_helper.from_array(np.ones((1, 2, 1), np.float32), "W"), numpy_helper.from_array(np.ones((1, 2, 2), np.float32), "R")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "newline.onnx"
    onnx.save(model, str(path))
    code, out, _ = show(capsys, str(path), "--pair", "h\nzero=h\nn")
    assert code == 0
    lines = out.splitlines()
    assert "  pair h\\nzero -> h\\nn (declared: declared by the caller)" in lines
    assert "  RNN r\\nnn; forward, hidden 2" in lines
    assert "  store → slot h\\nzero" in lines
    assert all(line.startswith(("state journey", "  ")) for line in lines if line)  # no line starts mid-name
