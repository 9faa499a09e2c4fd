"""`rnnir run` as a newcomer types it: every mistake reported as itself, with the flag that fixes it.

The messages are pinned: each names the input, what the model declares and the flag to give.  Real data
(`--input NAME=FILE.npy`, `--audio FILE.wav`) is checked against onnxruntime run directly, call by call,
the way silero-vad's own wrapper feeds it.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from rnnir import cli
from rnnir.cli.run import RunProgress

REPO = Path(__file__).resolve().parents[2]
LSTM = REPO / "samples" / "lstm_fanout.onnx"  # x[T, 1, 3], (h0, c0) -> (hn, cn), y[T, 1, 1, 5]
ort = pytest.importorskip("onnxruntime")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["run", "--no-config", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_process(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real command in a child process: onnxruntime's own log goes to file descriptor 2, which capsys cannot see."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("RNNIR_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "rnnir", "run", "--no-config", *argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


@pytest.fixture
def silero(silero_dir, tmp_path, monkeypatch):
    """silero_vad.onnx in the working folder, so messages name it as a user would type it."""
    shutil.copy(silero_dir / "silero_vad.onnx", tmp_path / "silero_vad.onnx")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_wav(path: Path, pcm: np.ndarray, rate: int = 16000, channels: int = 1, width: int = 2) -> Path:
    """A WAV file through the standard library: ``pcm`` int16, one row per frame for several channels."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        data = pcm.astype("<i2").tobytes() if width == 2 else (pcm.astype(np.int32) << 16).astype("<i4").tobytes()
        w.writeframes(data)
    return path


def tone_and_noise(seconds: float, rate: int = 16000, seed: int = 0) -> np.ndarray:
    """A 220 Hz tone switched on and off twice a second over low noise, as int16 samples."""
    t = np.arange(int(seconds * rate)) / rate
    rng = np.random.default_rng(seed)
    x = 0.4 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 1.0 * t) > 0) + 0.02 * rng.standard_normal(t.size)
    return np.round(np.clip(x, -1, 1) * 32767).astype(np.int16)


def silero_wrapper_loop(model: Path, samples: np.ndarray, chunk: int = 512, context: int = 64) -> list[float]:
    """silero-vad's OnnxWrapper loop on onnxruntime directly: 64 samples of context before each 512, the state fed back."""
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    state = np.zeros((2, 1, 128), np.float32)
    kept = np.zeros(context, np.float32)
    probs = []
    for i in range(len(samples) // chunk):
        piece = samples[i * chunk : (i + 1) * chunk].astype(np.float32)
        out, state = sess.run(None, {"input": np.concatenate([kept, piece])[None], "state": state, "sr": np.array(16000, np.int64)})
        kept = piece[-context:]
        probs.append(float(out.item()))
    return probs


def persistent_trace(doc: dict) -> list[float]:
    return next(v for v in doc["variants"] if v["variant"] == "persistent")["trace"]


# -- 1. mistakes, each reported as itself -------------------------------------------------------

SHAPE_HELP = "give the shape with --shape input=1,N (or the data: --input input=FILE.npy, --audio input=FILE.wav)"
SR_HELP = (
    "input 'sr' (int64[]) has no value: rnnir makes up random data only for float inputs, and an integer or boolean scalar "
    "usually selects something (a sample rate, a mode); give it with --value sr=16000 (a sample rate of 16 kHz)"
)


@pytest.mark.realmodel
@pytest.mark.parametrize(
    "argv,expected",
    [
        ([], [f"input 'input' is declared float32[?, ?]: rnnir cannot tell dim 0 (?) and dim 1 (?) of one call; {SHAPE_HELP}", SR_HELP]),
        (["--shape", "input=1,576"], [SR_HELP]),
        (
            ["--shape", "inptu=1,576", "--value", "sr=16000"],
            ["--shape inptu=1,576: the model has no input 'inptu'; did you mean 'input'? (its inputs: input float32[?, ?], sr int64[]; "
             "state, fed by rnnir: state float32[2, ?, 128])"],
        ),
        (
            ["--shape", "input=576", "--value", "sr=16000"],
            ["--shape input=576: input 'input' has rank 2 (declared float32[?, ?]), so one call's shape has 2 dims, not 1; e.g. --shape input=1,576"],
        ),
        (
            ["--shape", "input=1,1,576", "--value", "sr=16000"],
            ["--shape input=1,1,576: input 'input' has rank 2 (declared float32[?, ?]), so one call's shape has 2 dims, not 3; e.g. --shape input=1,576"],
        ),
        (
            ["--shape", "input=0,576", "--value", "sr=16000"],
            ["--shape input=0,576: dim 0 is 0; every dim of one call must be at least 1 (input 'input' is declared float32[?, ?])"],
        ),
        (
            ["--shape", "input=1,576", "--value", "sr=16000", "--value", "state=0"],
            ["--value state=0: 'state' is the model's state input: rnnir feeds it from the state it keeps between calls (zeros on the first "
             "call); only its shape can be set, with --shape state=D0,D1,..."],
        ),
        (["--shape", "input=1,576", "--value", "sr=16000.5"], ["--value sr=16000.5: input 'sr' is int64: give a whole number"]),
        (
            ["--shape", "input=1,576", "--value", "sr=16000", "--shape", "state=2,1,64"],
            ["--shape state=2,1,64: state input 'state' is declared float32[2, ?, 128]: dim 2 must be 128, not 64"],
        ),
    ],
    ids=["nothing", "no-sr", "typo", "rank-short", "rank-long", "zero-dim", "value-on-state", "fractional-int", "state-fixed-dim"],
)
def test_silero_newcomer_mistakes_are_named_with_their_flag(silero, capsys, argv, expected):
    code, out, err = run(capsys, "silero_vad.onnx", "--calls", "5", *argv)
    assert code == 2 and out == ""
    assert err == "".join(f"rnnir: error: silero_vad.onnx: {line}\n" for line in expected)


@pytest.mark.realmodel
def test_silero_accepts_1x576_as_1_comma_576_and_runs_clean(silero, capsys):
    """The near miss: everything given, nothing on stderr; 1x576 means the same as 1,576."""
    results = []
    for shape in ("1,576", "1x576", "[1, 576]"):
        code, out, err = run(capsys, "silero_vad.onnx", "--calls", "6", "--shape", f"input={shape}", "--value", "sr=16000", "--format", "json")
        assert (code, err) == (0, "")
        results.append(json.loads(out))
    assert results[0]["variants"] == results[1]["variants"] == results[2]["variants"]


def test_a_bad_shape_text_says_what_a_shape_looks_like(capsys):
    code, _, err = run(capsys, str(LSTM), "--shape", "x=1;3")
    assert code == 2
    assert err == "rnnir: error: --shape x=1;3: '1;3' is not valid here; one call's dims are whole numbers, e.g. --shape input=1,576 (or 1x576)\n"


def test_lstm_typo_and_fixed_dim_mismatch(capsys):
    code, _, err = run(capsys, str(LSTM), "--shape", "xx=4,1,3")
    assert code == 2
    assert err == (
        f"rnnir: error: {LSTM}: --shape xx=4,1,3: the model has no input 'xx'; did you mean 'x'? (its inputs: x float32[T, 1, 3]; "
        "state, fed by rnnir: h0 float32[1, 1, 5], c0 float32[1, 1, 5])\n"
    )
    code, _, err = run(capsys, str(LSTM), "--shape", "x=4,1,2")
    assert code == 2 and err == f"rnnir: error: {LSTM}: --shape x=4,1,2: input 'x' is declared float32[T, 1, 3]: dim 2 must be 3, not 2\n"
    # the near miss: the time dim (T) is the stream's, any value is fine there
    code, _, err = run(capsys, str(LSTM), "--shape", "x=4,1,3", "--calls", "4", "--chunk", "2")
    assert (code, err) == (0, "")


@pytest.mark.realmodel
def test_onnxruntime_failure_names_every_input_and_its_flag_and_its_log_stays_quiet(silero):
    """sr=8000 sends silero down its 8 kHz branch, which cannot take 576 samples: onnxruntime's own red log lines
    used to reach the terminal, then a message blaming a state shape rnnir had guessed."""
    proc = run_process("silero_vad.onnx", "--calls", "5", "--shape", "input=1,576", "--value", "sr=8000", cwd=silero)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        "rnnir: error: silero_vad.onnx: onnxruntime cannot run the model on the first call: LSTM node "
        "'If_0_else_branch__Inline_0__/decoder/rnn/LSTM': Input X must have 3 dimensions only. Actual:{1,1,1,128,2}\n"
        "  the inputs rnnir fed it: input float32[1, 576] (random, shape from --shape input=1,576); sr int64[] = 8000 (--value sr=8000); "
        "state float32[2, 1, 128] (the state: zeros, declared float32[2, ?, 128]: another shape with --shape state=D0,D1,...)\n"
    )
    # -v asks for onnxruntime's own log: then its lines are there
    verbose = run_process("silero_vad.onnx", "--calls", "5", "--shape", "input=1,576", "--value", "sr=8000", "-v", cwd=silero)
    assert verbose.returncode == 2 and "[E:onnxruntime" in verbose.stderr


# -- 2. real data: --audio and --input -----------------------------------------------------------


@pytest.mark.realmodel
def test_audio_wav_through_silero_equals_the_wrappers_loop(silero, capsys):
    pcm = tone_and_noise(3.0)
    write_wav(silero / "tone.wav", pcm)
    # no --value sr: the file's rate fills it
    code, out, err = run(capsys, "silero_vad.onnx", "--audio", "tone.wav", "--shape", "input=1,512", "--context", "input=64", "--format", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    want = silero_wrapper_loop(silero / "silero_vad.onnx", pcm / 32768.0)
    assert doc["watched"] == "output" and doc["stream_length"] == len(want) == 3 * 16000 // 512
    assert np.max(np.abs(np.array(persistent_trace(doc)) - want)) <= 1e-5
    assert max(want) - min(want) > 0.1  # the tone moves the probability: the comparison can fail
    # --wav is the same option; --value sr=16000 agrees with the file; --calls takes the first calls
    code, out, _ = run(capsys, "silero_vad.onnx", "--wav", "input=tone.wav", "--shape", "input=1,512", "--context", "input=64",
                       "--value", "sr=16000", "--calls", "20", "--format", "json")
    assert code == 0 and np.max(np.abs(np.array(persistent_trace(json.loads(out))) - want[:20])) <= 1e-5


@pytest.mark.realmodel
def test_audio_stereo_is_averaged(silero, capsys):
    pcm = tone_and_noise(1.0)
    other = tone_and_noise(1.0, seed=1)
    write_wav(silero / "stereo.wav", np.stack([pcm, other], axis=1).ravel(), channels=2)
    code, out, _ = run(capsys, "silero_vad.onnx", "--audio", "stereo.wav", "--shape", "input=1,512", "--context", "input=64", "--format", "json")
    assert code == 0
    want = silero_wrapper_loop(silero / "silero_vad.onnx", (pcm.astype(np.float64) + other) / 2 / 32768.0)
    assert np.max(np.abs(np.array(persistent_trace(json.loads(out))) - want)) <= 1e-5


@pytest.mark.realmodel
@pytest.mark.parametrize(
    "argv,make,expected",
    [
        (["--audio", "tone8k.wav", "--shape", "input=1,512", "--value", "sr=16000"], "8k",
         "--audio tone8k.wav: the file is sampled at 8000 Hz, but --value sr=16000 tells the model 16000 Hz: resample the file "
         "(sox tone8k.wav -r 16000 OUT.wav) or give --value sr=8000 if the model takes that rate"),
        (["--audio", "tone.wav"], "16k",
         "--audio tone.wav: how many samples per call? Input 'input' is declared float32[?, ?]; give one call's shape with "
         "--shape input=1,512 (silero-vad: 512 samples at 16 kHz, with --context input=64)"),
        (["--audio", "w32.wav", "--shape", "input=1,512"], "32bit",
         "--audio w32.wav: 32-bit samples; --audio reads 16-bit PCM WAV (convert: sox IN -b 16 OUT.wav, or ffmpeg -i IN -c:a pcm_s16le OUT.wav)"),
        (["--audio", "missing.wav", "--shape", "input=1,512"], None, "--audio missing.wav: no such file"),
        (["--audio", "notwav.wav", "--shape", "input=1,512"], "text",
         "--audio notwav.wav: not a WAV file (it does not start with a RIFF/WAVE header)"),
        (["--audio", "inptu=tone.wav", "--shape", "input=1,512"], "16k",
         "--audio inptu=tone.wav: the model has no input 'inptu'; did you mean 'input'? (its inputs: input float32[?, ?], sr int64[]; "
         "state, fed by rnnir: state float32[2, ?, 128])"),
        (["--audio", "short.wav", "--shape", "input=1,512"], "short", "--audio short.wav: 600 samples make 1 call(s) of 512; the checks need at least 2"),
    ],
    ids=["rate-mismatch", "no-chunk-size", "32-bit", "missing", "not-wav", "typo", "too-short"],
)
def test_audio_mistakes(silero, capsys, argv, make, expected):
    if make == "8k":
        write_wav(silero / "tone8k.wav", tone_and_noise(1.0, rate=8000), rate=8000)
    elif make == "16k":
        write_wav(silero / "tone.wav", tone_and_noise(1.0))
    elif make == "32bit":
        write_wav(silero / "w32.wav", tone_and_noise(0.5), width=4)
    elif make == "text":
        (silero / "notwav.wav").write_text("not audio")
    elif make == "short":
        write_wav(silero / "short.wav", tone_and_noise(600 / 16000))
    code, out, err = run(capsys, "silero_vad.onnx", *argv)
    assert (code, out) == (2, "")
    assert err == f"rnnir: error: silero_vad.onnx: {expected}\n"


@pytest.mark.realmodel
def test_input_npy_through_silero_equals_onnxruntime_call_by_call(silero, capsys):
    frames = (0.3 * np.random.default_rng(3).standard_normal((12, 1, 576))).astype(np.float64)  # float64: numpy's default, cast
    np.save(silero / "frames.npy", frames)
    code, out, err = run(capsys, "silero_vad.onnx", "--input", "input=frames.npy", "--value", "sr=16000", "--format", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    sess = ort.InferenceSession(str(silero / "silero_vad.onnx"), providers=["CPUExecutionProvider"])
    state, want = np.zeros((2, 1, 128), np.float32), []
    for f in frames.astype(np.float32):
        prob, state = sess.run(None, {"input": f, "state": state, "sr": np.array(16000, np.int64)})
        want.append(float(prob.item()))
    assert doc["stream_length"] == 12
    assert np.max(np.abs(np.array(persistent_trace(doc)) - want)) <= 1e-5


def test_input_npy_along_the_lstms_time_axis_equals_one_onnxruntime_call(tmp_path, capsys):
    x = np.random.default_rng(4).standard_normal((40, 1, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    code, out, err = run(capsys, str(LSTM), "--input", f"x={tmp_path / 'x.npy'}", "--chunk", "8", "--format", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    sess = ort.InferenceSession(str(LSTM), providers=["CPUExecutionProvider"])
    zeros = np.zeros((1, 1, 5), np.float32)
    y = sess.run(["y"], {"x": x, "h0": zeros, "c0": zeros})[0]
    want = [float(y[k : k + 8].mean()) for k in range(0, 40, 8)]
    assert doc["stream_length"] == 40 and doc["chunk_sizes"] == [8] and doc["persistent_matches_whole"] is True
    assert np.max(np.abs(np.array(persistent_trace(doc)) - want)) <= 1e-5
    # --calls cuts a data file to the first calls
    code, out, _ = run(capsys, str(LSTM), "--input", f"x={tmp_path / 'x.npy'}", "--chunk", "8", "--calls", "3", "--format", "json")
    assert code == 0 and json.loads(out)["stream_length"] == 24


@pytest.mark.parametrize(
    "content,expected",
    [
        (None, "no such file"),
        ("npz", "is an .npz archive; save one array per file with numpy.save and give each with --input NAME=FILE.npy"),
        ("text", "not a .npy file (numpy.save writes one)"),
        ("int", "holds int16 values; input 'x' takes float32 (float32[T, 1, 3]): convert them, e.g. numpy.save(FILE, a.astype(numpy.float32))"),
        ("rank", "has shape (40, 3); input 'x' is declared float32[T, 1, 3] with its time axis at dim 0: the file holds the whole sequence "
                 "with the input's 3 dims, split into calls along dim 0"),
        ("dim", "one call's data has shape (1, 4), but input 'x' is declared float32[T, 1, 3]: dim 1 must be 3, not 4"),
        ("empty", "holds no data (shape (0, 1, 3))"),
    ],
    ids=["missing", "npz", "not-npy", "dtype", "rank", "fixed-dim", "empty"],
)
def test_input_npy_mistakes(tmp_path, capsys, content, expected):
    path = tmp_path / "x.npy"
    if content == "npz":
        np.savez(path, a=np.zeros(3))
        os.replace(str(path) + ".npz", path)
    elif content == "text":
        path.write_text("1 2 3")
    elif content == "int":
        np.save(path, np.zeros((40, 1, 3), np.int16))
    elif content == "rank":
        np.save(path, np.zeros((40, 3), np.float32))
    elif content == "dim":
        np.save(path, np.zeros((40, 1, 4), np.float32))
    elif content == "empty":
        np.save(path, np.zeros((0, 1, 3), np.float32))
    code, out, err = run(capsys, str(LSTM), "--input", f"x={path}")
    assert (code, out) == (2, "")
    assert err == f"rnnir: error: {LSTM}: --input x={path}: {expected}\n"


def test_input_names_a_state_and_input_with_shape_are_refused(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((8, 1, 3), np.float32))
    code, _, err = run(capsys, str(LSTM), "--input", f"h0={tmp_path / 'x.npy'}")
    assert code == 2 and f"--input h0={tmp_path / 'x.npy'}: 'h0' is the model's state input" in err
    code, _, err = run(capsys, str(LSTM), "--input", f"x={tmp_path / 'x.npy'}", "--shape", "x=8,1,3")
    assert code == 2 and "the file gives 'x' its data and shape; drop --shape x" in err


# -- 3. the max names its output -----------------------------------------------------------------


def test_variant_lines_name_the_output_of_each_max(capsys):
    code, out, _ = run(capsys, str(LSTM), "--calls", "10", "--chunk", "4")
    assert code == 0
    code, js, _ = run(capsys, str(LSTM), "--calls", "10", "--chunk", "4", "--format", "json")
    reinit = next(v for v in json.loads(js)["variants"] if v["variant"] == "reinit")
    per = reinit["per_output"]
    line = next(line for line in out.splitlines() if line.strip().startswith("reinit"))
    assert line.endswith(f"max |diff| {per['y']:.3g} on 'y', {per['hn']:.3g} on 'hn' (state), {per['cn']:.3g} on 'cn' (state)")
    assert per["y"] != per["hn"]  # the numbers differ: naming them is not cosmetic
    persistent = next(line for line in out.splitlines() if line.strip().startswith("persistent"))
    assert persistent.endswith("equal (max |diff| 0)")


# -- 4. a partial --pair declaration -------------------------------------------------------------

LEFT_OUT = (
    "rnnir: warning: {path}: the declared pairs (h0=hn) replace automatic pairing, so c0 -> cn (naming convention 'c0' -> 'cn') "
    "is left unpaired: 'c0' is a plain input and its state is neither kept nor checked; declare it too (--pair c0=cn)\n"
)


def test_declaring_one_pair_warns_about_the_one_left_out_in_run_and_lint(capsys):
    code, _, err = run(capsys, str(LSTM), "--calls", "4", "--chunk", "2", "--pair", "h0=hn", "-q")
    assert code == 1 and err == LEFT_OUT.format(path=LSTM)  # c0 fed zeros every call: persistence is broken, and now said why
    assert cli.main(["lint", "--no-config", str(LSTM), "--pair", "h0=hn"]) in (0, 1)
    assert capsys.readouterr().err == LEFT_OUT.format(path=LSTM)
    # near misses: both declared, or none declared
    for argv in (["--pair", "h0=hn", "--pair", "c0=cn"], []):
        run(capsys, str(LSTM), "--calls", "4", "--chunk", "2", "-q", *argv)
        assert capsys.readouterr().err == ""
        cli.main(["lint", "--no-config", str(LSTM), *argv])
        assert capsys.readouterr().err == ""


# -- progress ------------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_on_a_terminal_ten_times_a_second_and_clears_itself():
    now = [0.0]
    term = _Terminal()
    p = RunProgress(stream=term, clock=lambda: now[0])
    for k in range(1, 6):
        p.step("reinit", k, 5)
        now[0] += 0.03
    p.close()
    # calls 1 (first), 5 (last): call 2..4 come within 0.1 s of a drawn one, except call 5 which is the end
    assert term.getvalue() == "\r\x1b[Kreinit: call 1/5\r\x1b[Kreinit: call 5/5\r\x1b[K"


def test_progress_is_silent_when_piped_or_quiet():
    piped = io.StringIO()
    p = RunProgress(stream=piped)
    p.step("reinit", 1, 5)
    p.close()
    quiet = _Terminal()
    q = RunProgress(stream=quiet, enabled=False)
    q.step("reinit", 1, 5)
    q.close()
    assert piped.getvalue() == quiet.getvalue() == ""


def test_a_piped_run_writes_no_progress(tmp_path):
    proc = run_process(str(LSTM), "--calls", "30", "--chunk", "2", "--long", "50", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == ""


def _open_input_model(tmp_path: Path) -> Path:
    """y = x @ W with x declared [?, 4] and a scalar int64 'mode' the model ignores; h_out = h + sum(y) carries state."""
    from onnx import TensorProto, helper

    from tests.support.onnx_models import const, model, vi

    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["y"]),
        helper.make_node("ReduceSum", ["y"], ["s"], keepdims=0),
        helper.make_node("Add", ["h", "s"], ["h_out"]),
        helper.make_node("Cast", ["mode"], ["mode_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["mode_f", "s"], ["scaled"]),
    ]
    m = model(
        nodes,
        [vi("x", [None, 4]), vi("h", []), vi("mode", [], TensorProto.INT64)],
        [vi("y", [None, 4]), vi("h_out", []), vi("scaled", [])],
        [const("W", np.eye(4, dtype=np.float32))],
    )
    path = tmp_path / "open.onnx"
    path.write_bytes(m.SerializeToString())
    return path


def test_a_value_without_a_shape_asks_for_the_shape_only(tmp_path, capsys):
    path = _open_input_model(tmp_path)
    code, _, err = run(capsys, str(path), "--calls", "4", "--value", "x=0.5", "--value", "mode=1", "--pair", "h=h_out")
    assert code == 2
    assert err == (
        f"rnnir: error: {path}: input 'x' is declared float32[?, 4]: rnnir cannot tell dim 0 (?) of one call; give the shape with --shape x=1,4\n"
    )
    # an integer scalar is named with --value NUMBER (not a sample rate); the near miss gives both and runs
    code, _, err = run(capsys, str(path), "--calls", "4", "--shape", "x=2,4", "--pair", "h=h_out")
    assert code == 2 and err == (
        f"rnnir: error: {path}: input 'mode' (int64[]) has no value: rnnir makes up random data only for float inputs, and an integer "
        "or boolean scalar usually selects something (a sample rate, a mode); give it with --value mode=NUMBER\n"
    )
    code, _, err = run(capsys, str(path), "--calls", "4", "--shape", "x=2,4", "--value", "mode=1", "--pair", "h=h_out", "-q")
    assert (code, err) == (0, "")


def test_the_pools_failed_batch_probe_logs_nothing_either(tmp_path):
    """--streams probes a batch of 3 rows; a model whose Reshape fixes the batch at 1 fails that probe inside
    onnxruntime, which logged it in red although the pool handles it (one stream per call)."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Reshape", ["x", "shp"], ["xr"]),
        helper.make_node("Add", ["xr", "h"], ["s"]),
        helper.make_node("Tanh", ["s"], ["h_out"]),
        helper.make_node("ReduceSum", ["h_out"], ["y"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "fixed_batch",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 4]), helper.make_tensor_value_info("h", TensorProto.FLOAT, ["B", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, []), helper.make_tensor_value_info("h_out", TensorProto.FLOAT, ["B", 4])],
        [numpy_helper.from_array(np.array([1, 4], np.int64), "shp")],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    (tmp_path / "fixed.onnx").write_bytes(m.SerializeToString())
    proc = run_process("fixed.onnx", "--pair", "h=h_out", "--calls", "8", "--shape", "x=1,4", "--streams", "3", "--reconnect", "2", cwd=tmp_path)
    assert proc.returncode in (0, 1)  # 1: a reconnect that never agrees within 8 calls; the point is stderr
    assert "cold start:" in proc.stdout  # a new session was built beside the first (the reconnect's cold start)
    assert "one stream per call (a batch of 3 rows failed in onnxruntime" in proc.stdout  # the probe did fail
    assert proc.stderr == ""


def _rnn_over_samples(tmp_path: Path, features: int = 1) -> Path:
    """An ONNX RNN reading x[T, 1, features] (time first), h0 -> hn: one sample per time step when features is 1."""
    from onnx import helper

    from tests.support.onnx_models import const, model, vi

    rng = np.random.default_rng(5)
    H = 3
    m = model(
        [helper.make_node("RNN", ["x", "W", "R", "", "", "h0"], ["y", "hn"], hidden_size=H)],
        [vi("x", ["T", 1, features]), vi("h0", [1, 1, H])],
        [vi("y", ["T", 1, 1, H]), vi("hn", [1, 1, H])],
        [const("W", rng.standard_normal((1, H, features)).astype(np.float32)), const("R", 0.5 * rng.standard_normal((1, H, H)).astype(np.float32))],
    )
    path = tmp_path / f"rnn{features}.onnx"
    path.write_bytes(m.SerializeToString())
    return path


def test_audio_along_a_time_axis_equals_one_onnxruntime_call(tmp_path, capsys):
    path = _rnn_over_samples(tmp_path)
    pcm = tone_and_noise(0.05)  # 800 samples
    write_wav(tmp_path / "a.wav", pcm)
    code, out, err = run(capsys, str(path), "--audio", str(tmp_path / "a.wav"), "--chunk", "100", "--format", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    x = (pcm / 32768.0).astype(np.float32).reshape(-1, 1, 1)
    y = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(["y"], {"x": x, "h0": np.zeros((1, 1, 3), np.float32)})[0]
    assert doc["stream_length"] == 800 and doc["persistent_matches_whole"] is True
    assert np.max(np.abs(np.array(persistent_trace(doc)) - [y[k : k + 100].mean() for k in range(0, 800, 100)])) <= 1e-5
    # more than one value per time step is not audio
    wide = _rnn_over_samples(tmp_path, features=2)
    code, _, err = run(capsys, str(wide), "--audio", str(tmp_path / "a.wav"))
    assert code == 2 and err == (
        f"rnnir: error: {wide}: --audio {tmp_path / 'a.wav'}: input 'x' is declared float32[T, 1, 2]: audio runs along its time axis "
        "(dim 0) only when every other dim is 1; give --input with a .npy file instead\n"
    )


@pytest.mark.realmodel
def test_audio_against_the_sample_rate_a_model_declares_in_its_metadata(silero, capsys):
    import onnx

    m = onnx.load(str(silero / "silero_vad.onnx"))
    onnx.helper.set_model_props(m, {"sample_rate": "8000"})
    onnx.save(m, str(silero / "vad8k.onnx"))
    write_wav(silero / "tone.wav", tone_and_noise(1.0))
    code, _, err = run(capsys, "vad8k.onnx", "--audio", "tone.wav", "--shape", "input=1,512")
    assert code == 2 and err == (
        "rnnir: error: vad8k.onnx: --audio tone.wav: the file is sampled at 16000 Hz, but the model declares 8000 Hz "
        "(its metadata sample_rate=8000): resample the file\n"
    )


@pytest.mark.realmodel
def test_input_npy_of_the_inputs_own_rank_is_fed_every_call(silero, capsys):
    np.save(silero / "sr.npy", np.array(16000, np.int64))
    argv = ["silero_vad.onnx", "--shape", "input=1,576", "--calls", "6", "--format", "json"]
    code, by_file, err = run(capsys, *argv, "--input", "sr=sr.npy")
    assert (code, err) == (0, "")
    code, by_value, _ = run(capsys, *argv, "--value", "sr=16000")
    assert json.loads(by_file)["variants"] == json.loads(by_value)["variants"]


def test_an_unpaired_input_named_like_state_is_named_too(tmp_path, capsys):
    """h0 -> hn declared; 'cell' has no output the conventions would pair, but its name says state.  'x' says nothing."""
    from onnx import helper

    from tests.support.onnx_models import model, vi

    m = model(
        [helper.make_node("Add", ["x", "h0"], ["s"]), helper.make_node("Mul", ["s", "cell"], ["hn"]), helper.make_node("Identity", ["hn"], ["y"])],
        [vi("x", [1, 4]), vi("h0", [1, 4]), vi("cell", [1, 4])],
        [vi("y", [1, 4]), vi("hn", [1, 4])],
    )
    path = tmp_path / "cell.onnx"
    path.write_bytes(m.SerializeToString())
    cli.main(["lint", "--no-config", str(path), "--pair", "h0=hn"])
    assert capsys.readouterr().err == (
        f"rnnir: warning: {path}: the declared pairs (h0=hn) replace automatic pairing, and input 'cell' is named like state but left "
        "unpaired: if the caller feeds it what an output returned, declare that pair too (--pair cell=OUTPUT)\n"
    )
    cli.main(["lint", "--no-config", str(path), "--pair", "h0=hn", "--pair", "cell="])  # declared as state without an output: silent
    assert capsys.readouterr().err == ""


@pytest.mark.realmodel
def test_data_files_of_different_lengths_are_refused(silero, capsys):
    np.save(silero / "frames.npy", np.zeros((12, 1, 576), np.float32))
    np.save(silero / "rates.npy", np.full(5, 16000, np.int64))  # one rate per call, for 5 calls
    code, _, err = run(capsys, "silero_vad.onnx", "--input", "input=frames.npy", "--input", "sr=rates.npy")
    assert code == 2 and err == (
        "rnnir: error: silero_vad.onnx: the data disagree on the stream's length: --input input=frames.npy gives 12 calls, "
        "--input sr=rates.npy gives 5 calls\n"
    )
    np.save(silero / "rates.npy", np.full(12, 16000, np.int64))  # the near miss: 12 and 12
    code, _, err = run(capsys, "silero_vad.onnx", "--input", "input=frames.npy", "--input", "sr=rates.npy", "-q")
    assert (code, err) == (0, "")


@pytest.mark.realmodel
def test_a_fixed_input_with_context_takes_the_callers_part(silero_dir, tmp_path, monkeypatch, capsys):
    """silero's OpenVINO export fixes input [1, 576]: with --context input=64 the caller feeds 512 a call."""
    shutil.copy(silero_dir / "silero_vad_openvino_16k.onnx", tmp_path / "ov.onnx")
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "ov.onnx", "--context", "input=64", "--shape", "input=1,576")
    assert code == 2 and err == (
        "rnnir: error: ov.onnx: --shape input=1,576: input 'input' is fed as float32[1, 512] per call (the model declares "
        "float32[1, 576]; the kept --context fills the rest): dim 1 must be 512, not 576\n"
    )
    code, _, err = run(capsys, "ov.onnx", "--shape", "input=1,512")
    assert code == 2 and err == "rnnir: error: ov.onnx: --shape input=1,512: input 'input' is declared float32[1, 576]: dim 1 must be 576, not 512\n"
    for argv in (["--context", "input=64", "--shape", "input=1,512"], ["--shape", "input=1,576"], []):  # near misses
        code, _, err = run(capsys, "ov.onnx", "--calls", "4", "-q", *argv)
        assert (code, err) == (0, ""), argv


def test_a_state_shape_rnnir_cannot_tell_asks_for_the_flag(tmp_path, capsys):
    """h declares [N, 4] and nothing fed says what N is: the runtime's state_shapes= becomes --shape h=..."""
    from onnx import helper

    from tests.support.onnx_models import model, vi

    m = model([helper.make_node("Add", ["h", "x"], ["h_out"]), helper.make_node("ReduceSum", ["h_out"], ["y"], keepdims=0)],
              [vi("x", [1, 4]), vi("h", ["N", 4])], [vi("y", []), vi("h_out", ["N", 4])])
    path = tmp_path / "n.onnx"
    path.write_bytes(m.SerializeToString())
    code, _, err = run(capsys, str(path), "--pair", "h=h_out", "--calls", "4")
    assert code == 2 and err == (
        f"rnnir: error: {path}: cannot tell the shape of state input 'h' (declared float32[N, 4]) from the inputs; give it with --shape h=D0,4\n"
    )
    code, _, err = run(capsys, str(path), "--pair", "h=h_out", "--calls", "4", "--shape", "h=1,4", "-q")  # the near miss
    assert (code, err) == (0, "")
