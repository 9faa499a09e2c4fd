"""What ``rnnir run`` feeds a model, checked against the model before anything runs.

A newcomer's mistakes (a typo in ``--shape inptu=...``, a missing ``--value sr=16000``, one dim too
few, a zero dim) used to surface as onnxruntime's error on the first call, blamed on a state shape
rnnir had guessed.  Here every ``--shape``/``--value``/``--input``/``--audio``/``--context`` name is
checked against the model's inputs, every input the model needs is accounted for, and shapes are
checked against the declared ones, so each problem is reported as itself, with the flag that fixes it.

Real data: ``--input NAME=FILE.npy`` (the whole sequence for one input, split into calls along its time
axis, or along a leading call axis) and ``--audio [NAME=]FILE.wav`` (16-bit PCM, also written as
WAVE_FORMAT_EXTENSIBLE; channels averaged; samples scaled to [-1, 1); chunked to one call's shape).

Shared by ``rnnir run`` (:mod:`rnnir.cli.run`) and ``rnnir deploy openvino``'s check (:mod:`rnnir.deploy.openvino`),
so it imports no command-line module: the flags are read into :class:`InputFlags` by :mod:`rnnir.cli.run_inputs`.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rnnir.errors import RnnirError
from rnnir.util.regularfile import UnreadableFile, read_regular

if TYPE_CHECKING:
    import numpy as np

    from rnnir.ir.core import Program
    from rnnir.runtime.session import StatefulSession
    from rnnir.runtime.spec import IOSpec
else:  # `rnnir lint` builds the parser that imports this module: numpy only when a run needs it
    from rnnir.util.lazymod import numpy as np

__all__ = ["InputFlags", "Interface", "PreparedInputs", "Problems", "check_flag_names", "model_interface", "parse_dims", "prepare_inputs", "read_wav", "shape_text"]

#: inputs that carry a sample rate: ``--audio`` fills them with the file's rate and checks a given --value against it
SAMPLE_RATE_NAMES = re.compile(r"^(sr|sample_?rate|sampling_?rate|rate|fs)$", re.I)
#: metadata_props keys a model may declare its sample rate under
_SAMPLE_RATE_KEYS = ("sample_rate", "sampling_rate", "sr")
_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"
_DIM_SEPARATORS = re.compile(r"[,x×*\s]+")
#: the largest ``--input`` .npy or ``--audio`` WAV file read (the whole stream is held in memory)
MAX_DATA_FILE_BYTES = 1 << 30


class InputError(RnnirError):
    """What the input flags feed does not fit the model (raised by a caller that reports the problems at once)."""


class Problems(list[str]):
    """Everything wrong with what the command line feeds the model, one message each, all reported together."""


def parse_dims(text: str) -> tuple[int, ...]:
    """``1,576``, ``1x576``, ``[1, 576]`` or ``(1, 576)`` -> ``(1, 576)``; zero is kept (the caller says why it is wrong)."""
    body = text.strip().strip("[]()").strip()
    parts = [p for p in _DIM_SEPARATORS.split(body) if p]
    if not parts:
        raise ValueError("no dims")
    dims = []
    for p in parts:
        if not p.isdigit():
            raise ValueError(p)
        dims.append(int(p))
    return tuple(dims)


def shape_text(dtype: Any, shape: Sequence[int | str | None] | None) -> str:
    """``float32[?, 576]`` (``[...]`` for an undeclared shape)."""
    dims = "..." if shape is None else ", ".join("?" if d is None else str(d) for d in shape)
    return f"{'' if dtype is None else np.dtype(dtype).name}[{dims}]"


@dataclass
class InputFlags:
    """What the command line says about the model's inputs (names as typed)."""

    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # --input NAME=FILE.npy
    audio: list[str] = field(default_factory=list)  # --audio [NAME=]FILE.wav, as typed
    context: Mapping[str, Any] = field(default_factory=dict)


def _did_you_mean(name: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in candidates}
        close = [lowered[name.lower()]] if name.lower() in lowered else []
    return f"; did you mean {close[0]!r}?" if close else ""


@dataclass(frozen=True)
class Interface:
    """A model's graph inputs as the caller sees them: the plain ones and the state ones (name -> declared spec)."""

    plain: dict[str, IOSpec]
    state: dict[str, IOSpec]

    def text(self) -> str:
        plain = ", ".join(f"{n} {shape_text(s.dtype, s.shape)}" for n, s in self.plain.items()) or "none"
        state = ", ".join(f"{n} {shape_text(s.dtype, s.shape)}" for n, s in self.state.items())
        return f"its inputs: {plain}" + (f"; state, fed by rnnir: {state}" if state else "")


def model_interface(program: Program) -> Interface:
    """The inputs of ``program``'s ONNX model, split by its state pairs (read before any onnxruntime session exists)."""
    from rnnir.runtime.spec import _io_spec

    graph = program.source.model.graph if program.source is not None else None
    specs = {vi.name: _io_spec(vi) for vi in (graph.input if graph is not None else ())}
    inits = {t.name for t in graph.initializer} if graph is not None else set()
    state = {p.input for p in program.state_pairs}
    return Interface(
        plain={n: s for n, s in specs.items() if n not in state and n not in inits},
        state={n: s for n, s in specs.items() if n in state},
    )


def audio_target(arg: str, plain: Sequence[str]) -> tuple[str | None, str]:
    """``--audio NAME=FILE`` or ``--audio FILE``: the input named (None: to be chosen) and the file."""
    name, sep, path = arg.partition("=")
    if sep and name in plain:
        return name, path
    if sep and name and not os.path.exists(arg) and "/" not in name and os.sep not in name and "." not in name:
        return name, path  # reads as NAME=FILE with an unknown NAME: the name check reports it
    return None, arg


def check_flag_names(flags: InputFlags, interface: Interface) -> Problems:
    """Every name the flags use must be an input of the model; the state is rnnir's to feed."""
    problems = Problems()
    plain = list(interface.plain)
    state = list(interface.state)
    every = plain + state
    named: list[tuple[str, str, str]] = [("--shape", n, f"{n}={','.join(map(str, d))}") for n, d in flags.shapes.items()]
    named += [("--value", n, f"{n}={_number_text(v)}") for n, v in flags.values.items()]
    named += [("--input", n, f"{n}={p}") for n, p in flags.files.items()]
    named += [("--context", n, f"{n}={v if not isinstance(v, tuple) else f'{v[0]}:{v[1]}'}") for n, v in flags.context.items()]
    for arg in flags.audio:
        name, _ = audio_target(arg, plain)
        if name is not None:
            named.append(("--audio", name, arg))
    for flag, name, typed in named:
        if name not in every:
            problems.append(f"{flag} {typed}: the model has no input {name!r}{_did_you_mean(name, every)} ({interface.text()})")
        elif name in state and flag != "--shape":
            problems.append(
                f"{flag} {typed}: {name!r} is the model's state input: rnnir feeds it from the state it keeps between calls "
                f"(zeros on the first call); only its shape can be set, with --shape {name}=D0,D1,..."
            )
    for name in flags.files:
        for flag, given in (("--value", flags.values), ("--shape", flags.shapes)):
            if name in given:
                problems.append(f"--input {name}={flags.files[name]} and {flag} {name}=...: the file gives {name!r} its data and shape; drop {flag} {name}")
    return problems


def _number_text(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(v)


def _check_shape(flag: str, name: str, given: tuple[int, ...], declared: tuple[int | str | None, ...] | None, dtype: Any,
                 time_axis: int | None, what: str, described: str | None = None) -> str | None:
    """What is wrong with ``--shape NAME=given`` for an input ``declared`` so (None: nothing); ``described`` replaces
    "declared <shape>" where the caller's shape is not the model's (a kept --context)."""
    typed = f"{flag} {name}={','.join(map(str, given))}"
    decl = described or f"declared {shape_text(dtype, declared)}"
    if declared is not None and len(given) != len(declared):
        if not declared:
            return f"{typed}: {what} {name!r} is a scalar ({decl}): it takes no --shape"
        return (f"{typed}: {what} {name!r} has rank {len(declared)} ({decl}), so one call's shape has {len(declared)} dims, "
                f"not {len(given)}; e.g. --shape {name}={_rank_example(given, declared)}")
    zeros = [k for k, d in enumerate(given) if d == 0]
    if zeros:
        return f"{typed}: dim {zeros[0]} is 0; every dim of one call must be at least 1 ({what} {name!r} is {decl})"
    for k, (g, d) in enumerate(zip(given, declared or ())):
        if k != time_axis and isinstance(d, int) and d > 0 and g != d:
            return f"{typed}: {what} {name!r} is {decl}: dim {k} must be {d}, not {g}"
    return None


def _rank_example(given: tuple[int, ...], declared: tuple[int | str | None, ...]) -> str:
    """``576`` for ``[?, ?]`` -> ``1,576`` (the batch dim forgotten); otherwise the declared dims, open ones as D<k>."""
    if len(given) < len(declared):
        dims: list[Any] = [1] * (len(declared) - len(given)) + list(given)
    elif given[: len(given) - len(declared)] == (1,) * (len(given) - len(declared)):
        dims = list(given[len(given) - len(declared) :])
    else:
        dims = [d if isinstance(d, int) and d > 0 else f"D{k}" for k, d in enumerate(declared)]
    for k, d in enumerate(declared):
        if isinstance(d, int) and d > 0:
            dims[k] = d
    return ",".join(map(str, dims))


@dataclass
class PreparedInputs:
    """The checked flags in the form the checks take: shapes, values, state shapes and the real data."""

    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    state_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)
    stream: dict[str, np.ndarray] = field(default_factory=dict)
    #: input -> where its data comes from (``--shape input=1,576``, ``--audio speech.wav``, ...), for messages
    sources: dict[str, str] = field(default_factory=dict)
    #: inputs filled from the audio file's sample rate (``--value`` was not given)
    rate_filled: dict[str, int] = field(default_factory=dict)


def prepare_inputs(
    flags: InputFlags, session: StatefulSession, interface: Interface, axes: Mapping[str, int | None], calls: int | None, chunk: int
) -> tuple[PreparedInputs, Problems]:
    """Check ``flags`` against ``session``'s inputs and load the real data; every problem found, not only the first.

    ``interface``: the shapes the model declares (``session.inputs`` gives them less any ``--context``);
    ``axes``: each plain input's time axis (:func:`rnnir.testing.time_axes`); ``calls``: the most calls to take
    from a data file (None: the whole file), ``chunk`` time steps each along a time axis.
    """
    limit = _Limit(calls, chunk)
    out = PreparedInputs()
    problems = Problems()
    inputs = session.inputs
    slots = {s.input: s for s in session.slots}
    for name, dims in flags.shapes.items():
        if name in slots:
            spec = slots[name]
            msg = _check_shape("--shape", name, dims, spec.shape, spec.dtype, None, "state input")
            problems.extend([msg] if msg else [])
            out.state_shapes[name] = dims
        elif name in inputs:
            ispec = inputs[name]
            declared = interface.plain[name].shape if name in interface.plain else ispec.shape
            described = None
            if declared != ispec.shape:  # --context keeps part of the input: the caller feeds the rest
                described = (f"fed as {shape_text(ispec.dtype, ispec.shape)} per call (the model declares "
                             f"{shape_text(ispec.dtype, declared)}; the kept --context fills the rest)")
            msg = _check_shape("--shape", name, dims, ispec.shape, ispec.dtype, axes.get(name), "input", described)
            problems.extend([msg] if msg else [])
            out.shapes[name] = dims
            out.sources[name] = f"random, shape from --shape {name}={','.join(map(str, dims))}"
    for name, value in flags.values.items():
        if name not in inputs:
            continue
        ispec = inputs[name]
        kind = ispec.dtype.kind if ispec.dtype is not None else "f"
        if kind in "iub" and not float(value).is_integer():
            problems.append(f"--value {name}={value!r}: input {name!r} is {ispec.dtype}: give a whole number")
            continue
        if not math.isfinite(value):
            problems.append(f"--value {name}={value!r}: give a finite number")
            continue
        out_of_range = _out_of_range(value, ispec.dtype)
        if out_of_range is not None:
            problems.append(f"--value {name}={_number_text(value)}: input {name!r} is {ispec.dtype}, which holds {out_of_range}")
            continue
        out.values[name] = value
        out.sources[name] = f"--value {name}={_number_text(value)}"
    for name, path in flags.files.items():
        if name in inputs:
            arr = _read_npy(name, path, inputs[name], axes.get(name), limit, problems)
            if arr is not None:
                out.stream[name] = arr
                out.sources[name] = f"--input {name}={path}"
    for arg in flags.audio:
        _add_audio(arg, flags, session, axes, limit, out, problems)
    _check_lengths(out, session, axes, problems)
    if not problems:
        _check_missing(out, session, axes, problems)
    return out, problems


def _out_of_range(value: float, dtype: np.dtype | None) -> str | None:
    """The range of ``dtype`` when ``value`` is outside it (None: it fits): 1e30 fed to an int64 wrapped round."""
    if dtype is None:
        return None
    if dtype.kind == "b":
        return None if value in (0, 1) else "only 0 and 1"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return None if info.min <= value <= info.max else f"{info.min} to {info.max}"
    if dtype.kind == "f":
        big = float(np.finfo(dtype).max)
        return None if -big <= value <= big else f"numbers up to {big:g} in size"
    return None


# -- .npy ---------------------------------------------------------------------------------------


def _read_npy(name: str, path: str, spec: IOSpec, axis: int | None, limit: _Limit, problems: Problems) -> np.ndarray | None:
    where = f"--input {name}={path}"
    if os.path.isdir(path):
        problems.append(f"{where}: is a folder, not a .npy file")
        return None
    try:
        data = read_regular(path, MAX_DATA_FILE_BYTES, limit_hint="give fewer calls' data per file")
    except UnreadableFile as exc:
        problems.append(f"{where}: {exc}")
        return None
    magic = data[:6]
    if magic.startswith(_ZIP_MAGIC):
        problems.append(f"{where}: is an .npz archive; save one array per file with numpy.save and give each with --input NAME=FILE.npy")
        return None
    if magic != _NPY_MAGIC:
        wav = f"; for a WAV file use --audio {name}={path}" if magic.startswith(b"RIFF") else ""
        problems.append(f"{where}: not a .npy file (numpy.save writes one{wav})")
        return None
    try:
        arr = _load_npy(data)
    except ValueError as exc:
        problems.append(f"{where}: not a readable .npy file ({exc})")
        return None
    decl = shape_text(spec.dtype, spec.shape)
    want = spec.dtype if spec.dtype is not None else np.dtype(np.float32)
    kinds = {"f": "f", "i": "iu", "u": "iu", "b": "b"}.get(want.kind, want.kind)
    if arr.dtype.kind not in kinds:
        problems.append(f"{where}: holds {arr.dtype} values; input {name!r} takes {want} ({decl}): convert them, e.g. numpy.save(FILE, a.astype(numpy.{want.name}))")
        return None
    if arr.size == 0:
        problems.append(f"{where}: holds no data (shape {arr.shape})")
        return None
    rank = None if spec.shape is None else len(spec.shape)
    if axis is not None:  # split along the input's time axis
        if rank is not None and arr.ndim != rank:
            problems.append(
                f"{where}: has shape {arr.shape}; input {name!r} is declared {decl} with its time axis at dim {axis}: "
                f"the file holds the whole sequence with the input's {rank} dims, split into calls along dim {axis}"
            )
            return None
        per_call = arr.shape[:axis] + arr.shape[axis + 1 :]
        declared = None if spec.shape is None else spec.shape[:axis] + spec.shape[axis + 1 :]
    elif rank is None or arr.ndim == rank + 1:  # one call per index of a leading call axis
        per_call = arr.shape[1:]
        declared = spec.shape
    elif arr.ndim == rank:  # the same array every call
        per_call = arr.shape
        declared = spec.shape
    else:
        problems.append(
            f"{where}: has shape {arr.shape}; input {name!r} is declared {decl}: give {rank + 1} dims (calls first, then one call's "
            f"{rank}), or {rank} to feed the same array every call"
        )
        return None
    for k, (g, d) in enumerate(zip(per_call, declared or ())):
        if isinstance(d, int) and d > 0 and g != d:
            problems.append(f"{where}: one call's data has shape {tuple(per_call)}, but input {name!r} is declared {decl}: dim {k} must be {d}, not {g}")
            return None
    arr = arr.astype(want, copy=False)
    if axis is not None or rank is None or arr.ndim == rank + 1:
        arr = limit.cut(arr, axis if axis is not None else 0, axis is not None)
    return np.asarray(arr)


def _load_npy(data: bytes) -> np.ndarray:
    """The array of a ``.npy`` file's bytes; :class:`ValueError` for one whose header promises more data than the
    file holds (numpy would allocate what the header says first: 1e12 elements ended in MemoryError)."""
    import io

    from numpy.lib import format as npy_format

    fh = io.BytesIO(data)
    try:
        version = npy_format.read_magic(fh)
        if version == (1, 0):
            shape, _, dtype = npy_format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, _, dtype = npy_format.read_array_header_2_0(fh)
        else:
            raise ValueError(f"format version {version[0]}.{version[1]}; numpy.save writes 1.0 or 2.0")
    except Exception as exc:  # noqa: BLE001 - numpy parses the header with ast and tokenize, which raise their own types
        raise ValueError(f"a header numpy cannot read ({type(exc).__name__}: {str(exc)[:200]})") from None
    if dtype.hasobject:
        raise ValueError("holds Python objects, which are never unpickled; save a numeric array")
    count = math.prod(int(d) for d in shape)
    need, held = count * dtype.itemsize, len(data) - fh.tell()
    if need > held:
        raise ValueError(f"its header promises shape {tuple(shape)} of {dtype} ({need} bytes), but the file holds {held} bytes of data")
    try:
        return np.asarray(np.load(io.BytesIO(data), allow_pickle=False))
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None


@dataclass(frozen=True)
class _Limit:
    """``--calls`` given with data: only the first calls' worth of it (``chunk`` steps per call along a time axis)."""

    calls: int | None
    chunk: int

    def cut(self, arr: np.ndarray, axis: int, time: bool) -> np.ndarray:
        if self.calls is None:
            return arr
        n = self.calls * (self.chunk if time else 1)
        index = [slice(None)] * arr.ndim
        index[axis] = slice(0, n)
        return arr[tuple(index)]


# -- WAV ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wav:
    samples: np.ndarray  # float32 in [-1, 1), channels averaged
    rate: int
    channels: int


def read_wav(path: str) -> Wav:
    """A 16-bit PCM WAV file (``WAVE_FORMAT_PCM``, or ``WAVE_FORMAT_EXTENSIBLE`` with the PCM subformat);
    :class:`ValueError` says what is wrong with it.

    Read here rather than with the standard library's :mod:`wave`: that module reads no extensible header before
    Python 3.12 (what sox and ffmpeg write for more than two channels or more than 16 bits), and trusts the data
    chunk's declared size, so a 40-byte file declaring 4 GB made it allocate 4 GB.
    """
    if os.path.isdir(path):
        raise ValueError("is a folder, not a WAV file")
    try:
        data = read_regular(path, MAX_DATA_FILE_BYTES, limit_hint="cut the recording into shorter files")
    except UnreadableFile as exc:
        raise ValueError(str(exc)) from None
    fmt, pcm_bytes = _wav_chunks(data)
    tag, channels, rate, _, block_align, bits = struct.unpack_from("<HHIIHH", fmt)
    if tag == _WAVE_FORMAT_EXTENSIBLE:
        if len(fmt) < 40 or fmt[26:40] != _KSDATAFORMAT_TAIL:
            raise ValueError("a WAVE_FORMAT_EXTENSIBLE file without a standard subformat; --audio reads 16-bit PCM WAV")
        tag = struct.unpack_from("<H", fmt, 24)[0]
    if tag != _WAVE_FORMAT_PCM:
        what = "floating-point samples" if tag == _WAVE_FORMAT_IEEE_FLOAT else f"format tag {tag:#06x}"
        raise ValueError(f"{what}; --audio reads 16-bit PCM WAV (convert: sox IN -b 16 OUT.wav, or ffmpeg -i IN -c:a pcm_s16le OUT.wav)")
    if bits != 16:
        raise ValueError(
            f"{bits}-bit samples; --audio reads 16-bit PCM WAV (convert: sox IN -b 16 OUT.wav, or ffmpeg -i IN -c:a pcm_s16le OUT.wav)"
        )
    if channels < 1 or block_align != 2 * channels or rate < 1:
        raise ValueError(f"a broken format chunk: {channels} channels, {block_align} bytes per frame, {rate} Hz")
    pcm = np.frombuffer(pcm_bytes[: len(pcm_bytes) - len(pcm_bytes) % block_align], dtype="<i2")
    if pcm.size == 0:
        raise ValueError("holds no samples")
    samples = (pcm.reshape(-1, channels).astype(np.float32).mean(axis=1) / 32768.0).astype(np.float32)
    return Wav(samples, rate, channels)


_WAVE_FORMAT_PCM = 0x0001
_WAVE_FORMAT_IEEE_FLOAT = 0x0003
_WAVE_FORMAT_EXTENSIBLE = 0xFFFE
#: the 14 bytes after the format tag in every KSDATAFORMAT_SUBTYPE_* GUID (PCM is 00000001-0000-0010-8000-00aa00389b71)
_KSDATAFORMAT_TAIL = b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"


def _wav_chunks(data: bytes) -> tuple[bytes, bytes]:
    """The ``fmt `` chunk's body and the ``data`` chunk's bytes of a RIFF/WAVE file."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError("not a WAV file (it does not start with a RIFF/WAVE header)")
    fmt: bytes | None = None
    pos = 12
    while pos + 8 <= len(data):
        kind, size = data[pos : pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        body = pos + 8
        if kind == b"data":
            if fmt is None:
                raise ValueError("the data chunk comes before the format chunk")
            held = len(data) - body
            if size > MAX_DATA_FILE_BYTES:
                raise ValueError(f"its data chunk declares {size} bytes, over the {MAX_DATA_FILE_BYTES}-byte limit; cut the recording into shorter files")
            if size > held:
                raise ValueError(f"its data chunk declares {size} bytes, but the file holds {held} after it: a truncated file, "
                                 "or one written to a pipe (rewrite it: sox IN OUT.wav)")
            return fmt, data[body : body + size]
        if kind == b"fmt ":
            if size < 16 or body + size > len(data):
                raise ValueError(f"a format chunk of {size} bytes; a WAV file's has at least 16")
            fmt = data[body : body + size]
        pos = body + size + (size & 1)  # chunks are padded to an even size
    raise ValueError("no format chunk" if fmt is None else "no data chunk")


def _model_rate(session: StatefulSession) -> tuple[int, str] | None:
    """The sample rate the model declares in its metadata (``sample_rate``, ``sampling_rate`` or ``sr``)."""
    src = session.program.source
    if src is None:
        return None
    for prop in src.model.metadata_props:
        if prop.key.lower() in _SAMPLE_RATE_KEYS:
            try:
                return int(float(prop.value)), f"its metadata {prop.key}={prop.value}"
            except ValueError:
                return None
    return None


def _add_audio(arg: str, flags: InputFlags, session: StatefulSession, axes: Mapping[str, int | None], limit: _Limit,
               out: PreparedInputs, problems: Problems) -> None:
    inputs = session.inputs
    name, path = audio_target(arg, list(inputs))
    if name is not None and name not in inputs:
        return  # an unknown name: reported by check_flag_names
    if name is None:
        taken = set(flags.values) | set(flags.files) | set(out.stream)
        floats = [n for n, s in inputs.items() if n not in taken and (s.dtype is None or s.dtype.kind == "f") and (s.shape is None or len(s.shape) >= 1)]
        if len(floats) != 1:
            which = ", ".join(floats) if floats else "none"
            problems.append(f"--audio {arg}: which input takes the samples? The model's float inputs left to feed: {which}; give --audio NAME={path}")
            return
        name = floats[0]
    where = f"--audio {arg}"
    spec = inputs[name]
    if spec.dtype is not None and spec.dtype.kind != "f":
        problems.append(f"{where}: input {name!r} is {spec.dtype}; --audio feeds float samples in [-1, 1)")
        return
    try:
        wav = read_wav(path)
    except ValueError as exc:
        problems.append(f"{where}: {exc}")
        return
    # the rate the model is told (--value), declares (metadata), or is about to be fed
    rate_inputs = [n for n in inputs if SAMPLE_RATE_NAMES.match(n) and n != name]
    for r in rate_inputs:
        if r in flags.values:
            if int(flags.values[r]) != wav.rate:
                problems.append(
                    f"{where}: the file is sampled at {wav.rate} Hz, but --value {r}={_number_text(flags.values[r])} tells the model "
                    f"{_number_text(flags.values[r])} Hz: resample the file (sox {path} -r {_number_text(flags.values[r])} OUT.wav) "
                    f"or give --value {r}={wav.rate} if the model takes that rate"
                )
                return
        elif r not in flags.files:
            out.values[r] = float(wav.rate)
            out.rate_filled[r] = wav.rate
            out.sources[r] = f"the sample rate of {path}"
    declared = _model_rate(session)
    if declared is not None and declared[0] != wav.rate:
        problems.append(f"{where}: the file is sampled at {wav.rate} Hz, but the model declares {declared[0]} Hz ({declared[1]}): resample the file")
        return
    axis = axes.get(name)
    shape: tuple[int | str | None, ...] | None = out.shapes.get(name) or spec.shape
    samples = wav.samples
    if axis is not None:
        others = [d for k, d in enumerate(shape or ()) if k != axis]
        if any(isinstance(d, int) and d > 1 for d in others):
            problems.append(
                f"{where}: input {name!r} is declared {shape_text(spec.dtype, spec.shape)}: audio runs along its time axis (dim {axis}) "
                "only when every other dim is 1; give --input with a .npy file instead"
            )
            return
        dims = [1] * len(shape or (0,))
        dims[axis] = len(samples)
        out.stream[name] = limit.cut(samples.reshape(dims), axis, True)
    else:
        if shape is None or not all(isinstance(d, int) and d > 0 for d in shape):
            example = ",".join(str(d) if isinstance(d, int) and d > 0 else "1" for d in (shape or ()))[:-1] + "512"
            problems.append(
                f"{where}: how many samples per call? Input {name!r} is declared {shape_text(spec.dtype, spec.shape)}; give one call's shape "
                f"with --shape {name}={example if shape else '512'} (silero-vad: 512 samples at 16 kHz, with --context {name}=64)"
            )
            return
        per_call = int(np.prod(shape))  # type: ignore[arg-type]  # all ints: checked above
        n = len(samples) // per_call
        if limit.calls is not None:
            n = min(n, limit.calls)
        if n < 2:
            problems.append(f"{where}: {len(samples)} samples make {n} call(s) of {per_call}; the checks need at least 2")
            return
        out.stream[name] = samples[: n * per_call].reshape(n, *(int(d) for d in shape))  # type: ignore[arg-type]  # all ints: checked above
    out.sources[name] = f"--audio {path}: {wav.rate} Hz, {wav.channels} channel{'s averaged' if wav.channels > 1 else ''}"
    out.shapes.pop(name, None)  # the data gives the shape


def _check_lengths(out: PreparedInputs, session: StatefulSession, axes: Mapping[str, int | None], problems: Problems) -> None:
    """The inputs of one stream must have the same number of time steps (along a time axis) or calls (a leading call axis)."""
    lengths: dict[str, int] = {}
    for name, arr in out.stream.items():
        ax = axes.get(name)
        declared = session.inputs[name].shape
        if ax is not None:
            lengths[name] = arr.shape[ax]
        elif declared is None or arr.ndim == len(declared) + 1:
            lengths[name] = arr.shape[0]
    if len(set(lengths.values())) > 1:
        unit = "time steps" if any(axes.get(n) is not None for n in lengths) else "calls"
        problems.append(
            "the data disagree on the stream's length: " + ", ".join(f"{out.sources[n]} gives {v} {unit}" for n, v in lengths.items())
        )


def _check_missing(out: PreparedInputs, session: StatefulSession, axes: Mapping[str, int | None], problems: Problems) -> None:
    """Every input the model needs must be given, or be something rnnir can generate."""
    state_symbols = {d for s in session.slots for d in (s.shape or ()) if isinstance(d, str)}
    known_symbols = set(state_symbols)
    for name in out.stream:
        declared = session.inputs[name].shape
        if declared is not None:
            known_symbols |= {d for d in declared if isinstance(d, str)}
    optional = session.optional_inputs
    lengths = set(session.length_inputs)
    for name, spec in session.inputs.items():
        if name in out.stream or name in optional or name in lengths:
            continue
        valued = name in out.values  # a --value still needs a shape to fill
        given = out.shapes.get(name)
        shape: tuple[int | str | None, ...] | None = given if given is not None else spec.shape
        dtype = spec.dtype if spec.dtype is not None else np.dtype(np.float32)
        decl = shape_text(spec.dtype, spec.shape)
        if shape is None:
            problems.append(f"input {name!r} declares no shape: give one call's shape with --shape {name}=D0,D1,... or its data with --input {name}=FILE.npy")
            continue
        scalar = all(isinstance(d, int) and d == 1 for d in shape)
        if dtype.kind != "f" and scalar and not valued:
            hint = f"--value {name}=16000 (a sample rate of 16 kHz)" if SAMPLE_RATE_NAMES.match(name) else f"--value {name}=NUMBER"
            problems.append(
                f"input {name!r} ({decl}) has no value: rnnir makes up random data only for float inputs, and an integer or boolean "
                f"scalar usually selects something (a sample rate, a mode); give it with {hint}"
            )
            continue
        batch_axes = {ri.batch_axis for ri in session.recurrent_inputs if ri.input == name}
        unknown = [
            k for k, d in enumerate(shape)
            if not (isinstance(d, int) and d > 0) and k != axes.get(name) and k not in batch_axes and not (isinstance(d, str) and d in known_symbols)
        ]
        if unknown:
            dims = " and ".join(f"dim {k} ({shape[k] or '?'})" for k in unknown)
            example = ",".join("1" if k in unknown and k == 0 else ("N" if k in unknown else str(d)) for k, d in enumerate(shape))
            data = [f"--input {name}=FILE.npy"] + ([f"--audio {name}=FILE.wav"] if dtype.kind == "f" else [])
            problems.append(
                f"input {name!r} is declared {decl}: rnnir cannot tell {dims} of one call; give the shape with --shape {name}={example}"
                + ("" if valued else f" (or the data: {', '.join(data)})")
            )
