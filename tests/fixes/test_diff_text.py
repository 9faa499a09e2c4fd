"""``rnnir lint --diff`` text (``rnnir.fixes.diff``), checked line by line by hand: an edit inside an If branch shows
in the branch's indented block; an edit that records state pairs shows the rnnir metadata it adds, never the
fingerprint (it changes with every edit) nor metadata that is not rnnir's."""

from __future__ import annotations

from pathlib import Path

import onnx

import rnnir
from rnnir.fixes.diff import render_diff

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_diff_of_a_branch_edit_and_of_new_metadata() -> None:
    path = SAMPLES / "sd002_hc_swap_if_branch.onnx"
    result = rnnir.fix(str(path))
    assert render_diff(onnx.load(str(path)), result.model, "m.onnx", result.edits).splitlines() == [
        "# SD002 [safe] slot 'state': wrote each final state back into the slice its op reads: Concat 'else_concat_state': "
        "inputs (else_Y_c, else_Y_h) -> inputs (else_Y_h, else_Y_c)",
        "--- m.onnx (before)",
        "+++ m.onnx (fixed)",
        "@@ -15,7 +15,7 @@",
        "       else_Y, else_Y_h, else_Y_c = LSTM<hidden_size=4>(x, lstm8k_W, lstm8k_R, lstm8k_B, , else_h, else_c)  # else_lstm",
        "       else_ax1 = Constant()  # else_else_ax1",
        "       else_out = Squeeze(else_Y, else_ax1)  # else_squeeze_y",
        "-      else_stateN = Concat<axis=0>(else_Y_c, else_Y_h)  # else_concat_state",
        "+      else_stateN = Concat<axis=0>(else_Y_h, else_Y_c)  # else_concat_state",
        "       output else_out",
        "       output else_stateN",
        "     graph if_sr.then_branch",
    ]
    path = SAMPLES / "sd001_no_state_output.onnx"
    result = rnnir.fix(str(path))
    fixed = result.model
    assert any(p.key == "rnnir.fingerprint" for p in fixed.metadata_props)  # recorded, but not shown
    fixed.metadata_props.add(key="author.note", value="not rnnir's")  # not shown either
    assert render_diff(onnx.load(str(path)), fixed, "m.onnx").splitlines() == [
        "--- m.onnx (before)",
        "+++ m.onnx (fixed)",
        "@@ -1,5 +1,9 @@",
        " graph sd001_no_state_output",
        "   input x: float32[T,1,3]",
        "   input h0: float32[1,1,4]",
        "-  y = GRU<hidden_size=4>(x, gru_W, gru_R, gru_B, , h0)  # gru",
        "+  y, gru_Y_h = GRU<hidden_size=4>(x, gru_W, gru_R, gru_B, , h0)  # gru",
        "+  hn = Identity(gru_Y_h)  # fix_hn",
        "   output y",
        "+  output hn",
        '+metadata rnnir.pairs = {"h0": "hn"}',
        '+metadata rnnir.slots = {"h0": {"dtype": "float32", "init": "zeros", "output": "hn", "shape": [1, 1, 4]}}',
    ]
