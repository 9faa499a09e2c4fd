"""A fuzzer for what rnnir reads besides ONNX models: IR text, ``pyproject.toml``, baselines, ``rnnir.noqa``
metadata, WAV and ``.npy`` inputs.  Each reader must end in its own clear error, never in another exception,
a hang or a memory blow-up (issue 26).

    python tests/support/fuzz_inputs.py --cases 10000 [--seed 0] [--only irtext,wav]     # the long run (docs/limits.md)

``--cases`` is per target.  Each target has seeds (the samples' and ``tests/ir``'s IR text; small valid files
built here) and mutators (bytes or text: flip, insert a token, drop or duplicate a line, nest deeply, huge
numbers; and structure-aware ones per format).  A case passes when the reader returns or raises the error type it
documents (:data:`TARGETS`); anything else, or a case over ``--case-seconds`` (stopped by a timer), is a failure
printed with its target, case number and seed, so it reproduces.  Run it under a memory limit (the test does:
``RLIMIT_AS`` 4 GiB): a reader that allocates what a header claims dies instead of passing.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import random
import signal
import struct
import sys
import tempfile
import time
import types
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from rnnir.ir.text import iter_programs  # noqa: E402


class CaseTimeout(Exception):
    """A case ran past its deadline (raised by the interval timer)."""


@dataclass
class Summary:
    cases: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)  # "<target>:ok" / "<target>:error"
    failures: list[dict[str, Any]] = field(default_factory=list)
    slowest: float = 0.0


# -- text and byte mutations shared by every target ----------------------------------------------------

_TOKENS = ("{", "}", "<", ">", "(", ")", "[", "]", ",", "=", "%", "@", "'", '"', "->", "_", "?", "*", "#", ":", "//", "\\",
           "0", "-1", "1e999", "nan", "inf", "9" * 5000, "[" * 3000, "{" * 3000, "(" * 3000, "\ufeff", "\x00", "\u202e", "é",
           "sideways", "bogus", "copy", "view", "token", "value", "alias", "runtime", "graph", "declared", "zeros", "constant",
           "dense<bogus[2] [1, 2]>", "dense<float32[3] [1, 2]>", "dense<int64[2] ['a', 'b']>", "dense<float32[99999999999] ...>",
           "q(scale=[1.0])", "q(nonsense)", "loc{1, 2}", "loc[1]", "loc{'id': 5}", "loc{'branch': 3}", "region.x=5",
           "recognition='nope'", "direction='sideways'", "hidden_size='x'", "layout=3", "order %a -> %a", "aliases slot:ghost")


def _text_mutations(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    kind = rng.randrange(9)
    k = rng.randrange(len(lines)) if lines else 0
    if kind == 0 and lines:
        del lines[k]
    elif kind == 1 and lines:
        lines.insert(k, lines[rng.randrange(len(lines))])
    elif kind == 2 and len(lines) > 1:
        j = rng.randrange(len(lines))
        lines[k], lines[j] = lines[j], lines[k]
    elif kind == 3 and lines and lines[k]:
        pos = rng.randrange(len(lines[k]) + 1)
        lines[k] = lines[k][:pos] + rng.choice(_TOKENS) + lines[k][pos:]
    elif kind == 4 and lines and lines[k]:
        a = rng.randrange(len(lines[k]))
        b = min(len(lines[k]), a + rng.randrange(1, 12))
        lines[k] = lines[k][:a] + lines[k][b:]
    elif kind == 5 and lines and lines[k]:  # one word replaced by another of the file or a token
        words = lines[k].split()
        if words:
            pool = text.split() + list(_TOKENS)
            words[rng.randrange(len(words))] = rng.choice(pool)
            lines[k] = "  " + " ".join(words)
    elif kind == 6:
        return "\ufeff" + text
    elif kind == 7 and lines:  # a very long line
        lines[k] = lines[k] + " " + "x" * rng.choice((1000, 100_000, 2_000_000))
    else:
        return text[: rng.randrange(len(text) + 1)]
    return "\n".join(lines)


def _byte_mutations(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(6)
    if kind == 0 and b:
        for _ in range(rng.randrange(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == 1 and b:
        i = rng.randrange(len(b))
        b[i : i + 4] = rng.randbytes(4)
    elif kind == 2:
        i = rng.randrange(len(b) + 1)
        b[i:i] = rng.randbytes(rng.randrange(1, 16))
    elif kind == 3:
        del b[rng.randrange(len(b) + 1) :]
    elif kind == 4 and len(b) > 4:  # a little-endian 32-bit field set to an extreme
        i = rng.randrange(len(b) - 3)
        b[i : i + 4] = struct.pack("<I", rng.choice((0, 1, 0x7FFFFFFF, 0xFFFFFFFF, 0xFFFFFFF0)))
    else:
        i = rng.randrange(len(b) + 1)
        j = min(len(b), i + rng.randrange(1, 64))
        b[i:i] = b[i:j]
    return bytes(b)


# -- targets ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    name: str
    seeds: Callable[[], list[bytes]]
    mutate: Callable[[random.Random, bytes], bytes]
    #: reads one case from ``path``; returns normally or raises one of ``allowed``
    check: Callable[[Path], None]
    allowed: Callable[[], tuple[type[BaseException], ...]]
    suffix: str


def _ir_seeds() -> list[bytes]:
    texts = [p.read_text() for p in sorted((REPO / "samples").glob("*.rnnir"))]
    for p in sorted((REPO / "tests" / "ir").glob("*.rnnir")):
        texts.extend(iter_programs(p.read_text()))
    return [t.encode() for t in texts]


def _ir_mutate(rng: random.Random, data: bytes) -> bytes:
    text = data.decode("utf-8", "replace")
    for _ in range(rng.choice((1, 1, 2, 3))):
        text = _text_mutations(rng, text)
    return text.encode("utf-8", "surrogatepass")


def _ir_check(path: Path) -> None:
    import rnnir
    from rnnir import passes
    from rnnir.ir.text import parse_program, print_program

    program = rnnir.load(path)
    passes.run(program, noqa=False)
    text = print_program(program)
    parse_program(text)  # what rnnir printed must parse back
    if len(text) % 3 == 0:  # a third of the programs that parse also through `rnnir show`, every format
        from rnnir import cli

        for fmt in ("text", "json", "dot", "mermaid"):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli.main(["show", str(path), "--no-config", "--format", fmt])
            if code != 0 or "internal error" in err.getvalue():
                raise AssertionError(f"rnnir show --format {fmt}: exit {code}: {err.getvalue()[:300]}")


def _ir_allowed() -> tuple[type[BaseException], ...]:
    from rnnir.errors import ModelError
    from rnnir.ir.text import IRParseError

    return (IRParseError, ModelError)


_PYPROJECTS = (
    '[project]\nname = "m"\n\n[tool.rnnir]\nselect = ["SD", "AL001"]\nignore = ["OR002"]\nstrict = true\n',
    '[tool.rnnir]\nlower-entry = "constant"\nlower-exit = "chain"\n[tool.rnnir.pairs]\nh0 = "hn"\nc0 = ""\n',
    '[tool.rnnir]\n[tool.rnnir.per-file-ignores]\n"models/*.onnx" = ["SD009"]\n"**/x.onnx" = "RN100"\n',
    '[tool.other]\nx = 1\n',
)


def _pyproject_mutate(rng: random.Random, data: bytes) -> bytes:
    text = data.decode()
    r = rng.random()
    if r < 0.15:  # a value of another type, nested deeply or a huge number
        key = rng.choice(("select", "ignore", "strict", "lower-entry", "lower-exit", "pairs", "per-file-ignores", "entry"))
        value = rng.choice(("1", "true", '"x"', "[1, 2]", "{a = 1}", "[" * 10000 + "]" * 10000, "9" * 5000, "1e999", "nan", "[[]]", '["SD", 3]'))
        return f"[tool.rnnir]\n{key} = {value}\n".encode()
    if r < 0.2:
        return f"[tool]\nrnnir = {rng.choice(('1', '[1]', 'true', '{select = 3}'))}\n".encode()
    for _ in range(rng.choice((1, 2))):
        text = _text_mutations(rng, text) if rng.random() < 0.7 else _byte_mutations(rng, text.encode()).decode("utf-8", "replace")
    return text.encode("utf-8", "surrogatepass")


def _pyproject_check(path: Path) -> None:
    from rnnir.lint.config import ConfigFinder, load_config

    config = load_config(path)
    config.ignores_for(path.parent / "models" / "x.onnx")
    ConfigFinder(config).for_model(path.parent / "m.onnx")


def _config_allowed() -> tuple[type[BaseException], ...]:
    from rnnir.lint.config import ConfigError

    return (ConfigError,)


def _baseline_seeds() -> list[bytes]:
    from rnnir.lint.baseline import Baseline, Fingerprint

    b = Baseline(Path("base.json"))
    b.accepted[Fingerprint("m.onnx", "SD002", "h0", ("lstm/Y_h",))] = 1
    b.accepted[Fingerprint("sub/x.onnx", "AL001", "", ())] = 3
    b.accepted[Fingerprint("é.onnx", "RN100", "c0", ("if.then/a", "b"))] = 1
    return [json.dumps(b.to_json(), indent=2, ensure_ascii=False).encode()]


_JSON_VALUES: tuple[Any, ...] = (True, False, None, 0, -1, 1.5, 10**30, "", "x", [], {}, ["x"], [1], 1000, 2**63)


def _json_mutate(rng: random.Random, doc: Any) -> Any:
    """``doc`` with one value, key or list changed."""
    if isinstance(doc, dict) and doc and rng.random() < 0.8:
        key = rng.choice(sorted(doc))
        r = rng.random()
        if r < 0.2:
            return {k: v for k, v in doc.items() if k != key}
        if r < 0.3:
            return {**doc, rng.choice(("extra", "count", "version", "")): rng.choice(_JSON_VALUES)}
        if r < 0.6:
            return {**doc, key: rng.choice(_JSON_VALUES)}
        return {**doc, key: _json_mutate(rng, doc[key])}
    if isinstance(doc, list) and doc and rng.random() < 0.8:
        k = rng.randrange(len(doc))
        r = rng.random()
        if r < 0.2:
            return doc[:k] + doc[k + 1 :]
        if r < 0.4:
            return doc + [doc[k]]
        return doc[:k] + [_json_mutate(rng, doc[k])] + doc[k + 1 :]
    return rng.choice(_JSON_VALUES)


def _json_text_mutate(rng: random.Random, data: bytes) -> bytes:
    r = rng.random()
    if r < 0.55:
        doc = json.loads(data)
        for _ in range(rng.choice((1, 1, 2))):
            doc = _json_mutate(rng, doc)
        return json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode()
    if r < 0.65:
        return rng.choice(("[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000, "9" * 5000, "1" * 5000 + ".5", "1e99999", '"\\ud800"')).encode()
    return _byte_mutations(rng, data) if r < 0.8 else _text_mutations(rng, data.decode()).encode("utf-8", "surrogatepass")


def _baseline_check(path: Path) -> None:
    from rnnir.lint.baseline import MAX_BASELINE_COUNT, Baseline

    baseline = Baseline.load(path)
    assert all(type(n) is int and 1 <= n <= MAX_BASELINE_COUNT for n in baseline.accepted.values())


def _baseline_allowed() -> tuple[type[BaseException], ...]:
    from rnnir.lint.baseline import BaselineError

    return (BaselineError,)


def _noqa_seeds() -> list[bytes]:
    return [json.dumps(e).encode() for e in (["SD009"], ["SD002:/lstm/LSTM", "RN100", "AL001:h0"], ["sd002 ", "X:y:z"])]


def _noqa_check(path: Path) -> None:
    """The case is the value of ``rnnir.noqa``; a second entry is added for one case in four (the bytes' first one)."""
    import onnx

    from rnnir.passes import RULES, apply_suppressions, suppressions_of
    from rnnir.passes.diagnostics import Location
    from rnnir.passes.suppression import UNUSED_SUPPRESSION

    raw = path.read_bytes()
    value = raw.decode("utf-8", "replace")
    model = onnx.ModelProto()
    model.metadata_props.add(key="rnnir.noqa", value=value)
    if raw[:1] and raw[0] % 4 == 0:
        model.metadata_props.add(key="rnnir.noqa", value='["SD009"]')
    program = types.SimpleNamespace(source=types.SimpleNamespace(model=model, label="case.onnx"))
    found = suppressions_of(program)
    codes = list(RULES)
    finding = UNUSED_SUPPRESSION.diagnostic("no-finding", text="x", key="k", code="SD002")
    finding = dataclasses.replace(finding, locations=[Location(value="h0")])
    apply_suppressions([finding], found, ran=codes, selected=codes, known=codes)


def _noqa_allowed() -> tuple[type[BaseException], ...]:
    from rnnir.errors import ModelError

    return (ModelError,)


def _wav_bytes(samples: np.ndarray, rate: int = 16000, channels: int = 1, bits: int = 16, extensible: bool = False, tag: int = 1) -> bytes:
    data = samples.tobytes()
    block = channels * bits // 8
    if extensible:
        guid = struct.pack("<H", tag) + b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
        fmt = struct.pack("<HHIIHHHHI", 0xFFFE, channels, rate, rate * block, block, bits, 22, bits, 0) + guid
    else:
        fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * block, block, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _wav_seeds() -> list[bytes]:
    rng = np.random.default_rng(0)
    mono = (rng.standard_normal(400) * 3000).astype("<i2")
    stereo = (rng.standard_normal((300, 2)) * 3000).astype("<i2")
    return [
        _wav_bytes(mono), _wav_bytes(stereo, channels=2), _wav_bytes(stereo, channels=2, extensible=True),
        _wav_bytes(rng.standard_normal(100).astype("<f4"), bits=32, tag=3), _wav_bytes(np.arange(50, dtype=np.uint8), bits=8),
    ]


def _wav_check(path: Path) -> None:
    from rnnir.deploy.inputs import read_wav

    wav = read_wav(str(path))
    assert wav.samples.dtype == np.float32 and wav.samples.size > 0 and wav.rate > 0 and wav.channels > 0
    assert np.all(np.abs(wav.samples) <= 1.0)


def _npy_seeds() -> list[bytes]:
    out = []
    for arr in (np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.ones((5, 1, 3), np.int16), np.zeros((0, 3)), np.asfortranarray(np.eye(3)), np.float64(2.5)):
        buf = io.BytesIO()
        np.save(buf, arr)
        out.append(buf.getvalue())
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.arange(6.0), version=(2, 0))
    out.append(buf.getvalue())
    return out


def _npy_mutate(rng: random.Random, data: bytes) -> bytes:
    if rng.random() < 0.4:  # edit the header text
        end = data.find(b"\n", 10)
        header = data[10:end].decode("latin1")
        swap = rng.choice((("'shape': (", "'shape': (1000000000000, "), ("'shape': (", "'shape': (-1, "), ("'descr': '", "'descr': '|O"),
                           ("'descr': '", "'descr': 'bogus"), ("False", "True"), ("'shape': (", "'shape': ([], "), ("{", "{" * 500)))
        header = header.replace(*swap)
        head = header.encode("latin1") + b"\n"
        return data[:8] + struct.pack("<H", len(head)) + head + data[end + 1 :] if data[6] == 1 else data
    return _byte_mutations(rng, data)


def _npy_check(path: Path) -> None:
    from rnnir.deploy.inputs import _load_npy

    arr = _load_npy(path.read_bytes())
    assert isinstance(arr, np.ndarray)


def _value_error() -> tuple[type[BaseException], ...]:
    return (ValueError,)


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("irtext", _ir_seeds, _ir_mutate, _ir_check, _ir_allowed, ".rnnir"),
        Target("pyproject", lambda: [t.encode() for t in _PYPROJECTS], _pyproject_mutate, _pyproject_check, _config_allowed, ".toml"),
        Target("baseline", _baseline_seeds, _json_text_mutate, _baseline_check, _baseline_allowed, ".json"),
        Target("noqa", _noqa_seeds, _json_text_mutate, _noqa_check, _noqa_allowed, ".noqa"),
        Target("wav", _wav_seeds, lambda rng, d: _byte_mutations(rng, d), _wav_check, _value_error, ".wav"),
        Target("npy", _npy_seeds, _npy_mutate, _npy_check, _value_error, ".npy"),
    )
}


def _on_alarm(signum: int, frame: object) -> None:
    raise CaseTimeout


def run(cases: int, seed: int, workdir: Path, only: list[str] | None = None, case_seconds: float = 20.0) -> Summary:
    """``cases`` cases of each target (all, or those in ``only``)."""
    summary = Summary()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        for name in only or list(TARGETS):
            target = TARGETS[name]
            seeds = target.seeds()
            allowed = target.allowed()
            rng = random.Random(f"{seed}:{name}")
            path = workdir / f"case{target.suffix}"
            for k in range(cases):
                data = target.mutate(rng, rng.choice(seeds)) if rng.random() < 0.95 else rng.choice(seeds)
                path.write_bytes(data)
                failure = None
                t0 = time.perf_counter()
                signal.setitimer(signal.ITIMER_REAL, case_seconds)
                try:
                    target.check(path)
                    outcome = "ok"
                except CaseTimeout:
                    failure = f"no result after {case_seconds} s (a hang)"
                except allowed:
                    outcome = "error"
                except BaseException as exc:  # noqa: BLE001 - the point is to catch what escapes
                    failure = f"{type(exc).__name__}: {str(exc)[:300]}"
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                summary.slowest = max(summary.slowest, time.perf_counter() - t0)
                summary.cases[name] += 1
                if failure is not None:
                    summary.outcomes[f"{name}:failed"] += 1
                    summary.failures.append({"target": name, "case": k, "seed": seed, "what": failure})
                    keep = workdir / "failures"
                    keep.mkdir(exist_ok=True)
                    (keep / f"{name}{k}{target.suffix}").write_bytes(data)
                else:
                    summary.outcomes[f"{name}:{outcome}"] += 1
    finally:
        signal.signal(signal.SIGALRM, previous)
    return summary


def default_cases() -> int:
    """Cases per target: ``RNNIR_FUZZ_CASES`` (the long run: 10000), else a few hundred."""
    return int(os.environ.get("RNNIR_FUZZ_CASES", "300"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=default_cases(), help="cases per target (default: RNNIR_FUZZ_CASES or 300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", help=f"comma-separated targets of {', '.join(TARGETS)}")
    parser.add_argument("--workdir", help="where cases are written (default: a temporary folder); failures are kept in WORKDIR/failures")
    parser.add_argument("--case-seconds", type=float, default=20.0, help="a case running longer is stopped and counted a hang")
    args = parser.parse_args(argv)
    os.environ.pop("RNNIR_DEBUG", None)
    only = args.only.split(",") if args.only else None
    with tempfile.TemporaryDirectory(prefix="rnnir-fuzz-inputs-") as tmp:
        workdir = Path(args.workdir) if args.workdir else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        summary = run(args.cases, args.seed, workdir, only, args.case_seconds)
        seconds = time.perf_counter() - start
    doc = {**asdict(summary), "cases": dict(summary.cases), "outcomes": dict(sorted(summary.outcomes.items())),
           "failures": summary.failures[:500], "seconds": round(seconds, 1), "slowest": round(summary.slowest, 2)}
    print(json.dumps(doc, indent=2))
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
