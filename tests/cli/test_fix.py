"""``rnnir fix`` and ``rnnir lint --fix / --diff`` from the command line (exit codes, files written or not)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
TORCH = ROOT / "tests" / "data" / "torch"
STATELESS = ROOT / "tests" / "data" / "torch_stateless"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import rnnir  # noqa: E402
from rnnir import passes  # noqa: E402
from rnnir.cli import main  # noqa: E402
from tests.support.runnable_samples import exported_ir_sample  # noqa: E402  # tests/ is on sys.path (rootdir conftest)


def _copy(tmp_path: Path, *names: str) -> list[Path]:
    out = []
    for n in names:
        dst = tmp_path / f"{n}.onnx"
        shutil.copy(SAMPLES / f"{n}.onnx", dst)
        out.append(dst)
    return out


def _codes(path: Path) -> list[str]:
    return sorted(d.code for d in passes.run(rnnir.load(path)) if d.severity.value == "error")


def test_fix_expose_state_writes_the_output_only(tmp_path: Path, capsys) -> None:
    src = tmp_path / "enc.onnx"
    shutil.copy(STATELESS / "lstm_encoder_stateless.ts.onnx", src)
    before = src.read_bytes()
    out = tmp_path / "streaming.onnx"
    assert main(["fix", "--expose-state", str(src), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "EXPOSE [safe] exposed the h state of LSTM '/rnn/LSTM'" in text
    assert f"wrote {out} (3 edits, 0 not applied)" in text
    assert src.read_bytes() == before
    onnx.checker.check_model(str(out), full_check=True)
    assert {p.input: p.output for p in rnnir.load(out).state_pairs} == {"h0": "hn", "c0": "cn"}
    assert main(["run", str(out), "--calls", "4", "--chunk", "3"]) == 0  # the multi-call check passes
    assert "PASS" in capsys.readouterr().out


def test_fix_packed_json(tmp_path: Path, capsys) -> None:
    out = tmp_path / "s.onnx"
    assert main(["fix", "--expose-state", "--packed", str(STATELESS / "gru2_encoder_stateless.ts.onnx"), "-o", str(out), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["written"] is True and doc["output"] == str(out)
    assert doc["edits"][0]["target"] == "graph input 'state' / output 'stateN'"
    assert [i.name for i in onnx.load(str(out)).graph.input] == ["x", "state"]


def test_fix_external_data_model_gets_its_own_data_file(tmp_path: Path) -> None:
    out = tmp_path / "gru.onnx"
    assert main(["fix", "--expose-state", str(TORCH / "gru_encoder_stateless.dynamo.onnx"), "-o", str(out)]) == 0
    # the data file is named after the model and its content (rnnir.util.writing: new data under a new name, then the graph)
    assert [p.name for p in tmp_path.glob("gru.onnx.*.data")] == [p.name for p in tmp_path.iterdir() if p.name != "gru.onnx"]
    assert len(list(tmp_path.glob("gru.onnx.*.data"))) == 1
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(str(out), opts, providers=["CPUExecutionProvider"])
    x = np.zeros((4, 1, 8), np.float32)
    y, hn = sess.run(["y", "hn"], {"x": x, "h0": np.zeros((1, 1, 16), np.float32)})
    assert y.shape == (4, 1, 4) and hn.shape == (1, 1, 16)
    # rewriting an external-data model in place is refused (its data file would change under it)
    src = tmp_path / "in_place.onnx"
    shutil.copy(TORCH / "gru_encoder_stateless.dynamo.onnx", src)
    shutil.copy(TORCH / "gru_encoder_stateless.dynamo.onnx.data", tmp_path / "gru_encoder_stateless.dynamo.onnx.data")
    assert main(["fix", "--expose-state", str(src), "--in-place"]) == 2


def test_fix_needs_a_destination(capsys) -> None:
    assert main(["fix", "--expose-state", str(STATELESS / "lstm_encoder_stateless.ts.onnx")]) == 2
    assert "-o OUT, --in-place, or --diff" in capsys.readouterr().err


def test_fix_diff_writes_nothing(tmp_path: Path, capsys) -> None:
    (path,) = _copy(tmp_path, "sd002_layer_swap")
    before = path.read_bytes()
    assert main(["fix", str(path), "--diff"]) == 1
    out = capsys.readouterr().out
    assert "+  hn = Concat<axis=0>(hn_l0, hn_l1)  # concat_hn" in out
    assert path.read_bytes() == before
    (clean,) = _copy(tmp_path, "gru_fanout")
    assert main(["fix", str(clean), "--diff"]) == 0


def test_fix_in_place(tmp_path: Path, capsys) -> None:
    (path,) = _copy(tmp_path, "sd002_hc_swap")
    assert main(["fix", str(path), "--in-place"]) == 0
    assert _codes(path) == []


def test_lint_fix_rewrites_files_and_reports_the_rest(tmp_path: Path, capsys) -> None:
    (tmp_path / "al001_chain.onnx").write_bytes(exported_ir_sample("al001_chain").SerializeToString())  # the chain in rnnir.ir
    paths = [tmp_path / "al001_chain.onnx", *_copy(tmp_path, "sd002_hc_swap", "sd002_hc_swap_if_branch", "sd002_layer_swap", "sd003_other_op", "gru_fanout")]
    clean_before = paths[-1].read_bytes()
    code = main(["lint", str(tmp_path), "--fix"])
    captured = capsys.readouterr()
    assert code == 1  # sd003_other_op is left: its fix is unsafe
    assert "sd003_other_op.onnx: gru_b: SD003 [error]" in captured.out  # the ONNX node whose final state is stored
    assert "1 error" in captured.out
    fixed_lines = [line for line in captured.err.splitlines() if ": fixed: " in line]
    assert len(fixed_lines) == 4
    assert "fixed 4 findings in 4 files; 1 unsafe fix not applied (--unsafe-fixes applies it)" in captured.err
    assert "not fixed: SD003 [unsafe, not applied]" in captured.err
    for p in paths[:4]:
        assert _codes(p) == [], p.name
    assert paths[-1].read_bytes() == clean_before  # nothing to fix: not rewritten
    assert main(["lint", str(paths[4]), "--fix", "--unsafe-fixes"]) == 0
    assert _codes(paths[4]) == []


def test_lint_fix_with_only_unsafe_fixes_says_nothing_was_fixed(tmp_path: Path, capsys) -> None:
    paths = _copy(tmp_path, "sd003_other_op", "sd007_zero_init")
    before = [p.read_bytes() for p in paths]
    assert main(["lint", str(tmp_path), "--fix"]) == 1
    assert "fixed nothing; 2 unsafe fixes not applied (--unsafe-fixes applies them)" in capsys.readouterr().err
    assert [p.read_bytes() for p in paths] == before
    (clean,) = _copy(tmp_path, "gru_fanout")
    assert main(["lint", str(clean), "--fix"]) == 0
    assert "fixed" not in capsys.readouterr().err  # nothing to fix, nothing held back: no summary


def test_lint_diff_exit_codes(tmp_path: Path, capsys) -> None:
    (path,) = _copy(tmp_path, "sd008_last_step_seqlens")
    before = path.read_bytes()
    assert main(["lint", str(path), "--diff"]) == 1
    assert "+  hn = Identity(gru_Y_h)  # fix_hn" in capsys.readouterr().out
    assert path.read_bytes() == before
    assert main(["lint", str(path), "--diff", "--select", "OR"]) == 0  # no fixable rule selected


def test_lint_fix_respects_ignore(tmp_path: Path, capsys) -> None:
    (path,) = _copy(tmp_path, "sd002_hc_swap")
    before = path.read_bytes()
    assert main(["lint", str(path), "--fix", "--ignore", "SD002"]) == 0
    assert path.read_bytes() == before


def test_lint_fix_refuses_a_read_only_file(tmp_path: Path, capsys) -> None:
    (path,) = _copy(tmp_path, "sd002_hc_swap")
    before = path.read_bytes()
    os.chmod(path, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    try:
        assert main(["lint", str(path), "--fix"]) == 2
    finally:
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    err = capsys.readouterr().err
    assert "is read-only (mode 0444); make it writable (chmod u+w) to replace it; nothing was changed" in err
    assert path.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_explain_mentions_the_fix(capsys) -> None:
    assert main(["explain", "SD002"]) == 0
    assert "Fix (safe: `rnnir lint --fix`)" in capsys.readouterr().out
    assert main(["explain", "SD003"]) == 0
    assert "`--unsafe-fixes` for the unsafe case" in capsys.readouterr().out
    assert main(["explain", "SD005"]) == 0
    assert "Fix (" not in capsys.readouterr().out


def test_lint_fix_reports_an_unreadable_model_once(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not onnx")
    assert main(["lint", str(bad), "--fix"]) == 2
    out, err = capsys.readouterr()
    assert (out + err).count("bad.onnx") == 1 and "cannot fix" not in err


def test_fix_of_a_missing_model_is_a_clear_error(tmp_path: Path, capsys) -> None:
    assert main(["fix", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "out.onnx")]) == 2
    assert "missing.onnx: no such file" in capsys.readouterr().err
    assert not (tmp_path / "out.onnx").exists()


def test_fix_takes_declared_pairs(tmp_path: Path, capsys) -> None:
    """The pairs come from --pair like every command's: declaring 'memory' without an output leaves nothing to fix."""
    m = onnx.load(str(SAMPLES / "sd002_hc_swap.onnx"))
    for vi in (*m.graph.input, *m.graph.output):
        vi.name = {"state": "memory", "stateN": "memory_updated"}.get(vi.name, vi.name)
    for n in m.graph.node:
        n.input[:] = ["memory" if i == "state" else i for i in n.input]
        n.output[:] = ["memory_updated" if o == "stateN" else o for o in n.output]
    src = tmp_path / "m.onnx"
    onnx.save(m, str(src))
    assert main(["fix", str(src), "--diff", "--no-config", "--pair", "memory="]) == 0  # SD001 only: no automatic fix
    assert main(["fix", str(src), "--diff", "--no-config", "--pair", "memory=memory_updated"]) == 1
    assert "Concat<axis=0>(Y_h, Y_c)" in capsys.readouterr().out


def test_lint_fix_exposes_state_only_with_unsafe_fixes(tmp_path: Path, capsys) -> None:
    (path,) = _copy(tmp_path, "sd010_gru_no_initial_state")
    before = path.read_bytes()
    assert main(["lint", str(path), "--fix", "--strict"]) == 1  # SD010, an error with --strict, is left
    assert path.read_bytes() == before
    assert "not fixed: SD010 [unsafe, not applied]" in capsys.readouterr().err
    assert main(["lint", str(path), "--fix", "--unsafe-fixes", "--strict"]) == 0
    assert [i.name for i in onnx.load(str(path)).graph.input] == ["x", "h0"]


def test_fix_json_documents_skipped_fixes(tmp_path: Path, capsys) -> None:
    (path,) = _copy(tmp_path, "sd003_other_op")
    assert main(["fix", str(path), "--diff", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["written"] is False and doc["output"] is None and doc["edits"] == []
    assert doc["skipped"] == [
        {
            "code": "SD003",
            "target": "output 'hn'",
            "before": "GRU 'gru_b'(x_b, gru_b_W, gru_b_R, gru_b_B)",
            "after": "gru_a.Y_h",
            "safe": False,
            "message": "slot 'h0': returned the final state of the op that reads it",
            "applied": False,
            "fixable": True,
            "reason": "not certain: pass unsafe=True (--unsafe-fixes) to apply it",
        }
    ]
