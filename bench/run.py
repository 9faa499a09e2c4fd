"""Reproduce every benchmark table of rnnir (issue 5) with one command.

    python bench/run.py [--quick] [--reps 3] [--lint-reps 5] [--threads 1] [--only lint,passes,multicall] [--polygraphy]

Writes ``bench/results/latest.json`` (every sample) and ``bench/results/latest.md``
(the tables, the machine, and which targets are met).  Models come from
``bench/make_models.py`` (cached in ``bench/.models``), the silero-vad wheel
(``tests/support/realmodels.py``, cached in ``~/.cache/rnnir-tests``) and the committed
PyTorch exports in ``tests/data/torch``.

Three tables:

* **Lint** (issue 13) - whole-process wall time of ``rnnir lint FILE --format json``
  against ``python -c "import sys, onnx; onnx.checker.check_model(sys.argv[1], full_check=True)" FILE``
  (and ``polygraphy check lint FILE`` with ``--polygraphy``; it is not an rnnir
  dependency and takes seconds per run), paired: the two run back to back in every
  rep, in alternating order, and the ratio is the median of the per-rep ratios
  over ``--lint-reps`` (default 5) reps; the CPU ratio is the same with each
  process's user + system time (``os.wait4``), for a loaded machine.  Every real
  model (the six silero-vad files, the PyTorch exports in ``tests/data/torch``,
  ``tests/data/torch_cells`` and ``tests/data/ort``, the Keras exports in
  ``tests/data/keras``, ``samples/lstm_*.onnx``, GTCRN and FSMN-VAD from
  ``tests/support/realmodels.py``) must stay at or under 1.0x,
  the synthetic graphs (1k to 100k nodes, up to 1,000 recurrent ops) under 1.5x.
  rnnir's bytecode is compiled first (``python -m compileall``), as an installed
  wheel has it: machines that set ``PYTHONDONTWRITEBYTECODE`` would otherwise
  recompile rnnir in every process.  ``rnnir lint`` runs exactly as its console
  script does (``from rnnir.cli import main``), from a scratch folder so no
  project configuration is picked up.  Each process's peak RSS comes from GNU
  time.  A run over ``--timeout`` seconds is stopped and not repeated.
* **Passes** - in a fresh process per model: time to read and lower the model,
  then ``passes.run(program, select=[prefix])`` for every rule-code prefix, and
  all passes (with and without the pass manager's immutability fingerprint).
* **Multi-call** - per-call time of ``StatefulSession.run(feeds)`` (the default
  call users type: every output ``get_outputs()`` lists, the state kept inside),
  the hand-written loop ``outs = sess.run(None, {**feeds, **state})`` with the
  state fed back through numpy, the IOBinding floor (two pre-bound bindings per
  session whose state buffers are swapped every call, ``bind_cpu_input`` of the
  chunk and ``run_with_iobinding(binding)`` without RunOptions) and OpenVINO's
  stateful request (``MakeStateful`` on the same ONNX file; skipped when openvino
  is not installed), with the same intra-op thread count, in interleaved blocks
  (wall time and the calling thread's CPU time, which a busy machine inflates
  less); plus the bytes of state each approach copies through Python per call,
  and the Python time per call of StatefulSession and the floor with
  onnxruntime's run replaced by a no-op (where the time goes).

Timings on shared machines are noisy: every figure is a median over repetitions
with its min-max spread, and ratios compare runs made in the same invocation.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import json
import math
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
#: where rnnir and passes are imported from: this checkout, or a snapshot made by --at
CODE = pathlib.Path(os.environ.get("RNNIR_BENCH_CODE") or ROOT)
SNAPSHOT_REV = os.environ.get("RNNIR_BENCH_REV")
sys.path.insert(0, str(CODE))
sys.path.insert(0, str(HERE))

import make_models  # noqa: E402

RESULTS = HERE / "results"

# -- targets of issue 5 ---------------------------------------------------------------------
LINT_RATIO_REAL_MAX = 1.0  # rnnir lint / onnx.checker full check, every real model (issue 13)
LINT_RATIO_MAX = 1.5  # rnnir lint / onnx.checker full check, synthetic graphs up to 100k nodes / 1,000 recurrent ops
SLOPE_MAX = 1.1  # log-log slope of rnnir lint time, 10k -> 100k nodes
FLOOR_RATIO_MAX = 1.10  # StatefulSession / IOBinding floor
HAND_RATIO_SEQ1_MAX = 0.75  # StatefulSession / hand loop at sequence length 1
# issue 13, the default call run(feeds) on the LSTM 64->128 at sequence length 1
SEQ1_HAND_MAX = 0.85
SEQ1_FLOOR_MAX = 1.05
LSTM_SEQ1 = "LSTM in 64 hidden 128, seq 1"
SAME_WITHIN = 0.02  # "never slower": a paired ratio this close to 1 is noise on a shared machine

SILERO_LINT = (
    "silero_vad.onnx",
    "silero_vad_16k_op15.onnx",
    "silero_vad_16k_sequence.onnx",
    "silero_vad_half.onnx",
    "silero_vad_op18_ifless.onnx",
    "silero_vad_openvino_16k.onnx",
)
#: folders of real models, every ``*.onnx`` in each (relative to the checkout), with their group label
REAL_LINT_DIRS = (
    ("tests/data/torch", "torch export"),
    ("tests/data/torch_cells", "torch cell"),
    ("tests/data/ort", "ort-optimised"),
    ("tests/data/keras", "keras (tf2onnx)"),
)
REAL_LINT_GLOBS = (("samples", "lstm_*.onnx", "sample"),)
SYN_LINT = tuple(stem for stem, _, _ in make_models.SYNTHETIC)
NESTED = (f"nested_if_d{make_models.NESTED_DEPTH}", f"nested_if_d{make_models.NESTED_TOO_DEEP}")

QUICK_SILERO = ("silero_vad.onnx",)
QUICK_REAL = ("gru_stream.ts.onnx", "lstm_stream.dynamo.onnx", "lstm_cell.ts.onnx", "gru_cell_stacked.ts.onnx", "lstm_cell.ts.ortopt.onnx", "lstm_unrolled_cell.onnx")
QUICK_SYN = ("syn_10k_r100", "syn_100k_r1000")

PASS_MODELS = ("syn_1k_r1", "syn_10k_r1", "syn_100k_r1", "syn_1k_r10", "syn_10k_r100", "syn_100k_r1000", NESTED[0])
QUICK_PASS_MODELS = ("syn_1k_r1", "syn_1k_r10", "syn_10k_r100", NESTED[0])

#: (slope label, model at 10k nodes, model at 100k nodes)
SLOPE_PAIRS = (("1 recurrent op", "syn_10k_r1", "syn_100k_r1"), ("1 recurrent op per 100 nodes", "syn_10k_r100", "syn_100k_r1000"))


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- statistics ---------------------------------------------------------------------------------


def summary(xs: list[float]) -> dict[str, float] | None:
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def fmt_s(s: dict | None, unit: str = "s", timeout: float | None = None) -> str:
    if s is None:
        return f"> {timeout:g} s (stopped)" if timeout else "-"
    scale, suffix = {"s": (1.0, " s"), "ms": (1e3, " ms"), "us": (1e6, " µs")}[unit]
    digits = 3 if unit == "s" else 1
    med, lo, hi = s["median"] * scale, s["min"] * scale, s["max"] * scale
    if unit == "s" and med >= 10:
        digits = 1
    return f"{med:.{digits}f}{suffix} ({lo:.{digits}f}–{hi:.{digits}f})"


def slope(t_small: float, t_big: float, n_small: int, n_big: int) -> float:
    return math.log(t_big / t_small) / math.log(n_big / n_small)


# -- the machine --------------------------------------------------------------------------------


def _version(mod: str) -> str | None:
    if importlib.util.find_spec(mod) is None:
        return None
    try:
        m = __import__(mod)
        return str(getattr(m, "__version__", "?"))
    except Exception as exc:  # noqa: BLE001 - a broken optional package is reported, not fatal
        return f"unimportable ({type(exc).__name__})"


def _tree_state() -> str:
    """HEAD plus a hash of uncommitted changes to rnnir/: what the timed code was."""
    if SNAPSHOT_REV:
        return f"{SNAPSHOT_REV} (snapshot)"
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10).stdout.strip()
        diff = subprocess.run(["git", "-C", str(ROOT), "diff", "HEAD", "--", "rnnir"], capture_output=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    import hashlib

    return head + (f"+dirty:{hashlib.sha256(diff).hexdigest()[:8]}" if diff else "")


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError):
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    try:
        if SNAPSHOT_REV:
            raise StopIteration
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "rnnir"], capture_output=True, text=True, timeout=10).stdout.strip()
        commit += " (rnnir modified)" if dirty else ""
    except StopIteration:
        commit = f"{SNAPSHOT_REV} (a snapshot of the commit, not the working tree)"
    except (OSError, subprocess.SubprocessError):
        commit = "?"
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "onnx": _version("onnx"),
        "onnxruntime": _version("onnxruntime"),
        "numpy": _version("numpy"),
        "networkx": _version("networkx"),
        "polygraphy": _version("polygraphy"),
        "openvino": _openvino_version(),
        "commit": commit,
        "tree": _tree_state(),
        "loadavg_at_start": None if load is None else [round(x, 2) for x in load],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _loadavg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (shared machines: the context every timing needs)."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def _openvino_version() -> str | None:
    if importlib.util.find_spec("openvino") is None:
        return None
    try:
        import openvino

        return openvino.get_version().split("-")[0]
    except Exception as exc:  # noqa: BLE001
        return f"unimportable ({type(exc).__name__})"


# -- workloads ----------------------------------------------------------------------------------


@dataclass
class LintFile:
    name: str
    group: str
    path: pathlib.Path
    nodes: int | None = None
    recurrent: int | None = None
    note: str = ""


def _count(path: pathlib.Path) -> tuple[int | None, int | None]:
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - the too-deep model parses nowhere
        return None, None
    nodes = rec = 0
    stack = [model.graph]
    while stack:
        g = stack.pop()
        for n in g.node:
            nodes += 1
            rec += n.op_type in ("RNN", "GRU", "LSTM")
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    stack.append(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    stack.extend(a.graphs)
    return nodes, rec


def silero_dir(notes: list[str]) -> pathlib.Path | None:
    try:
        from tests.support.realmodels import silero_vad_dir

        return silero_vad_dir()
    except Exception as exc:  # noqa: BLE001 - RealModelUnavailable, or no network: skip with a note
        notes.append(f"silero-vad models unavailable, their rows are skipped: {exc}")
        return None


def real_models() -> list[tuple[str, str, pathlib.Path]]:
    """(name, group, path) of every committed real model the lint target covers, in a fixed order."""
    out: list[tuple[str, str, pathlib.Path]] = []
    for folder, group in REAL_LINT_DIRS:
        out.extend((p.name, group, p) for p in sorted((ROOT / folder).glob("*.onnx")))
    for folder, pattern, group in REAL_LINT_GLOBS:
        out.extend((p.name, group, p) for p in sorted((ROOT / folder).glob(pattern)))
    return out


def wild_models(notes: list[str]) -> list[tuple[str, str, pathlib.Path]]:
    """(name, group, path) of the real models from the wild (tests/support/realmodels.py: GTCRN, FSMN-VAD), when cached or fetchable."""
    out: list[tuple[str, str, pathlib.Path]] = []
    try:
        from tests.support.realmodels import fsmn_vad_path, gtcrn_path
    except Exception as exc:  # noqa: BLE001 - the bench runs without the tests too
        notes.append(f"GTCRN and FSMN-VAD rows are skipped: {exc}")
        return out
    for label, fetch in (("GTCRN (gtcrn_simple.onnx)", gtcrn_path), ("FSMN-VAD (model.onnx)", fsmn_vad_path)):
        try:
            out.append((label, "from the wild", fetch()))
        except Exception as exc:  # noqa: BLE001 - RealModelUnavailable, or no network: skip with a note
            notes.append(f"{label} is unavailable, its row is skipped: {exc}")
    return out


def lint_files(quick: bool, models: dict[str, pathlib.Path], silero: pathlib.Path | None, notes: list[str] | None = None) -> list[LintFile]:
    files: list[LintFile] = []
    if silero is not None:
        for name in QUICK_SILERO if quick else SILERO_LINT:
            files.append(LintFile(name, "silero-vad", silero / name))
    for name, group, path in real_models():
        if not quick or name in QUICK_REAL:
            files.append(LintFile(name, group, path))
    if not quick:
        files.extend(LintFile(name, group, path) for name, group, path in wild_models(notes if notes is not None else []))
    for stem in QUICK_SYN if quick else SYN_LINT:
        files.append(LintFile(stem, "synthetic", models[stem]))
    if not quick:
        for stem in NESTED:
            files.append(LintFile(stem, "nested If", models[stem]))
    for f in files:
        f.nodes, f.recurrent = _count(f.path)
        if f.nodes is None and f.name.startswith("nested_if"):
            depth = make_models.NESTED_TOO_DEEP
            f.nodes = make_models.nested_node_count(depth)
            f.recurrent = 1
            f.note = f"{depth} nested If: deeper than protobuf's 100-message nesting limit, so no tool can parse it"
    return files


# -- lint: whole-process timing ------------------------------------------------------------------


@dataclass
class Tool:
    key: str
    label: str
    argv: Callable[[pathlib.Path], list[str]]
    ok_codes: tuple[int, ...]
    timeout: float


def _env() -> dict[str, str]:
    """The tools' environment: this checkout first on the path, rnnir's bytecode compiled.

    An installed package runs from compiled bytecode; a checkout run with
    PYTHONDONTWRITEBYTECODE (set on some CI machines) would recompile rnnir in
    every process.  ``compileall`` writes the bytecode once, beside the sources
    (``__pycache__``, ignored by git), exactly as installing a wheel does; the
    environment is otherwise the machine's own (onnx and numpy are installed
    packages, compiled at install time).
    """
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(CODE / "rnnir")], check=False, timeout=300)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(CODE) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


CHECKER_CODE = "import sys, onnx; onnx.checker.check_model(sys.argv[1], full_check=True)"


def tools(timeout: float, poly_timeout: float, notes: list[str], polygraphy: bool) -> list[Tool]:
    py = sys.executable
    out = [
        Tool("rnnir", "rnnir lint --format json",
             lambda p: [py, "-c", "import sys; from rnnir.cli import main; sys.exit(main())", "lint", str(p), "--format", "json"],
             (0, 1), timeout),
        Tool("checker", "onnx.checker full_check", lambda p: [py, "-c", CHECKER_CODE, str(p)], (0,), timeout),
    ]
    poly = shutil.which("polygraphy")
    if not polygraphy:
        notes.append("polygraphy's column is left out (`--polygraphy` adds it; it takes seconds per run and is not an rnnir dependency)")
    elif poly is not None:
        out.append(Tool("polygraphy", "polygraphy check lint", lambda p: [poly, "check", "lint", str(p)], (0,), poly_timeout))
    else:
        notes.append("polygraphy is not installed: its column is skipped (`pip install polygraphy` to include it; it is not an rnnir dependency)")
    return out


@dataclass
class Run:
    seconds: float | None
    rss_mb: float | None
    code: int | None
    timed_out: bool = False
    detail: str = ""
    cpu_seconds: float | None = None  # user + system time of the process and everything it waited for


def _gnu_time() -> str | None:
    """``/usr/bin/time`` when it is GNU time (``-f``/``-o``): it reports its child's own peak RSS."""
    path = shutil.which("time", path="/usr/bin:/bin")
    if path is None:
        return None
    try:
        ok = subprocess.run([path, "-f", "%M", "-o", os.devnull, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return path if ok else None


GNU_TIME = _gnu_time()


def run_process(argv: list[str], timeout: float, cwd: str, env: dict[str, str]) -> Run:
    """Wall time and peak RSS of one process.

    Peak RSS comes from GNU ``/usr/bin/time`` wrapped around the command: a child
    forked straight from this (large) Python process would inherit its peak RSS
    (Linux keeps ``maxrss`` across fork and exec), so ``os.wait4`` would report
    the benchmark's own size.  Without GNU time the column is left empty.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile(suffix=".rss") as rss:
        full = [GNU_TIME, "-f", "%M", "-o", rss.name, *argv] if GNU_TIME else argv
        t0 = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd, env=env, start_new_session=True)
        # A blocking wait with a timer to stop the process: Popen.wait(timeout=...) polls with sleeps of up
        # to 50 ms, which would round every measured time up to the next poll.
        stopped = threading.Event()

        def stop() -> None:
            stopped.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)  # the session of our own child: the tool and its children, nothing else

        timer = threading.Timer(timeout, stop)
        timer.start()
        try:
            # wait4 rather than Popen.wait: its resource usage covers the child and the processes it waited for
            # (GNU time's own child), the CPU time a loaded machine inflates far less than wall time
            _, status, usage = os.wait4(proc.pid, 0)
            code = proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            timer.cancel()
        elapsed = time.perf_counter() - t0
        if stopped.is_set():
            return Run(None, None, None, timed_out=True)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
        rss_mb = None
        with contextlib.suppress(ValueError, OSError, IndexError):
            rss_mb = int(pathlib.Path(rss.name).read_text().split()[-1]) / 1024.0
    detail = _rnnir_detail(stdout) if "rnnir.cli" in " ".join(argv) else ""
    if not detail and code != 0:
        lines = (stdout + "\n" + stderr).strip().splitlines()
        errors = [ln for ln in lines if ln.startswith("[E]") and "FAILED |" not in ln]  # polygraphy's findings
        detail = (errors[0] if errors else lines[-1] if lines else "")[:240]
    return Run(elapsed, rss_mb, code, detail=detail, cpu_seconds=usage.ru_utime + usage.ru_stime)


def _rnnir_detail(stdout: str) -> str:
    try:
        doc = json.loads(stdout)
        f = doc["files"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return ""
    if f.get("error"):
        return f"error: {f['error'].get('type')}"
    codes: dict[str, int] = {}
    for d in f.get("diagnostics", []):
        codes[d.get("code", "?")] = codes.get(d.get("code", "?"), 0) + 1
    found = ", ".join(f"{c}×{n}" if n > 1 else c for c, n in sorted(codes.items())) or "no findings"
    return f"{len(f.get('state_pairs', []))} pairs; {found}"


def bench_lint(files: list[LintFile], tls: list[Tool], reps: int) -> list[dict[str, Any]]:
    env = _env()
    rows = []
    with tempfile.TemporaryDirectory(prefix="rnnir-bench-") as cwd:
        # warm the OS file cache and Python's imports once, so rep 1 is not an outlier
        for t in tls:
            run_process(t.argv(files[0].path), t.timeout, cwd, env)
        for f in files:
            runs: dict[str, list[Run]] = {t.key: [] for t in tls}
            stopped: set[str] = set()
            for rep in range(reps):
                order = tls[rep % len(tls):] + tls[: rep % len(tls)]  # rotate who goes first
                for t in order:
                    if t.key in stopped:
                        continue
                    r = run_process(t.argv(f.path), t.timeout, cwd, env)
                    runs[t.key].append(r)
                    if r.timed_out:
                        stopped.add(t.key)
            row: dict[str, Any] = {"name": f.name, "group": f.group, "path": str(f.path), "nodes": f.nodes, "recurrent": f.recurrent, "note": f.note, "tools": {}}
            for t in tls:
                rs = runs[t.key]
                good = [r for r in rs if not r.timed_out]
                row["tools"][t.key] = {
                    "seconds": [r.seconds for r in good],
                    "time": summary([r.seconds for r in good]),
                    "cpu_seconds": [r.cpu_seconds for r in good],
                    "cpu": summary([r.cpu_seconds for r in good if r.cpu_seconds is not None]),
                    "peak_rss_mb": max((r.rss_mb for r in good if r.rss_mb is not None), default=None),
                    "exit_codes": sorted({r.code for r in good}),
                    "ok": bool(good) and all(r.code in t.ok_codes for r in good),
                    "timed_out": any(r.timed_out for r in rs),
                    "timeout": t.timeout,
                    "detail": next((r.detail for r in good if r.detail), ""),
                }
            rt, ct = row["tools"]["rnnir"]["time"], row["tools"]["checker"]["time"]
            # paired: both ran in the same rep, one right after the other
            pairs = [a.seconds / b.seconds for a, b in zip(runs["rnnir"], runs["checker"]) if a.seconds and b.seconds]
            row["ratio_per_rep"] = summary(pairs)
            row["ratio"] = statistics.median(pairs) if pairs else None
            cpu_pairs = [a.cpu_seconds / b.cpu_seconds for a, b in zip(runs["rnnir"], runs["checker"]) if a.cpu_seconds and b.cpu_seconds]
            row["cpu_ratio_per_rep"] = summary(cpu_pairs)
            row["cpu_ratio"] = statistics.median(cpu_pairs) if cpu_pairs else None
            rows.append(row)
            log(f"lint {f.name}: rnnir {fmt_s(rt, timeout=tls[0].timeout)}, checker {fmt_s(ct)}"
                + (f", ratio {row['ratio']:.2f}" if row["ratio"] else "") + (f", CPU ratio {row['cpu_ratio']:.2f}" if row["cpu_ratio"] else ""))
    return rows


# -- passes: in-process, one fresh process per model -----------------------------------------------


def passes_worker(path: str, reps: int) -> None:
    """Print one JSON line per measurement (a timeout keeps what was measured so far)."""
    import gc

    t0 = time.perf_counter()
    import rnnir  # noqa: F401

    try:
        from rnnir import passes
    except ImportError:  # a snapshot (--at REV) from before the passes moved into rnnir/passes
        import passes  # type: ignore[no-redef]
    from rnnir.lower import lower, read_model

    emit = lambda **kw: print(json.dumps(kw), flush=True)  # noqa: E731
    emit(kind="import", seconds=time.perf_counter() - t0)
    prefixes = sorted({code[:2] for code in passes.RULES}, key=lambda p: [c[:2] for c in passes.RULES].index(p))
    manager_nofp = None
    with contextlib.suppress(Exception):
        from rnnir.passes.catalogue import PASSES
        from rnnir.passes.manager import PassManager

        manager_nofp = PassManager(PASSES, check_immutable=False)
    for rep in range(reps):
        gc.collect()
        t = time.perf_counter()
        src = read_model(path)
        t_read = time.perf_counter() - t
        t = time.perf_counter()
        prog = lower(src)
        t_lower = time.perf_counter() - t
        emit(kind="load", rep=rep, read=t_read, lower=t_lower, ir_nodes=len(prog), pairs=len(prog.state_pairs))
        for pre in prefixes:
            t = time.perf_counter()
            n = len(passes.run(prog, select=[pre]))
            emit(kind="pass", rep=rep, prefix=pre, seconds=time.perf_counter() - t, findings=n)
        t = time.perf_counter()
        n = len(passes.run(prog))
        emit(kind="pass", rep=rep, prefix="all", seconds=time.perf_counter() - t, findings=n)
        if manager_nofp is not None:
            t = time.perf_counter()
            manager_nofp.run(prog)
            emit(kind="pass", rep=rep, prefix="all-nofp", seconds=time.perf_counter() - t)


def bench_passes(models: list[tuple[str, pathlib.Path]], reps: int, timeout: float) -> list[dict[str, Any]]:
    rows = []
    for name, path in models:
        argv = [sys.executable, str(pathlib.Path(__file__).resolve()), "--passes-worker", str(path), "--reps", str(reps)]
        t0 = time.perf_counter()
        timed_out = False
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=str(ROOT))
            stdout, err, code = proc.stdout, proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err, code, timed_out = "", None, True
        lines = [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]
        loads = [x for x in lines if x["kind"] == "load"]
        row: dict[str, Any] = {
            "name": name, "timed_out": timed_out, "timeout": timeout, "exit_code": code,
            "error": (err.strip().splitlines() or [""])[-1][:300] if code not in (0, None) else "",
            "nodes": _count(path)[0],
            "ir_nodes": loads[0]["ir_nodes"] if loads else None,
            "reps_done": len(loads),
            "read": summary([x["read"] for x in loads]),
            "lower": summary([x["lower"] for x in loads]),
            "load": summary([x["read"] + x["lower"] for x in loads]),
            "passes": {},
        }
        for x in lines:
            if x["kind"] == "pass":
                row["passes"].setdefault(x["prefix"], []).append(x["seconds"])
        row["passes"] = {k: summary(v) for k, v in row["passes"].items()}
        rows.append(row)
        log(f"passes {name}: load {fmt_s(row['load'])}, all {fmt_s(row['passes'].get('all'))}"
            + (" (stopped)" if timed_out else "") + f" [{time.perf_counter() - t0:.0f} s]")
    return rows


# -- multi-call --------------------------------------------------------------------------------


@dataclass
class Workload:
    name: str
    path: pathlib.Path
    pairs: dict[str, str]
    make_feed: Callable[[int], dict[str, Any]]  # i -> the plain inputs of call i
    outputs: list[str]  # plain outputs handed to the caller
    seq_len: int | None = None
    state_bytes: int = 0
    ov_path: pathlib.Path | None = None
    ov_note: str = ""
    notes: list[str] = field(default_factory=list)


def workloads(quick: bool, models: dict[str, pathlib.Path], silero: pathlib.Path | None) -> list[Workload]:
    import numpy as np

    rng = np.random.default_rng(0)
    out: list[Workload] = []
    for T in (1, 16, 256):
        chunks = [(0.5 * rng.standard_normal((T, 1, make_models.LSTM_IN))).astype(np.float32) for _ in range(8)]
        out.append(Workload(
            f"LSTM in 64 hidden 128, seq {T}", models["lstm_i64_h128"], {"h0": "hn", "c0": "cn"},
            lambda i, c=chunks: {"x": c[i % len(c)]}, ["y"], seq_len=T, state_bytes=2 * make_models.LSTM_HIDDEN * 4))
    chunks = [(0.5 * rng.standard_normal((1, make_models.CACHE_C, make_models.CACHE_T))).astype(np.float32) for _ in range(8)]
    out.append(Workload(
        f"{make_models.CACHE_LAYERS} streaming caches ({make_models.cache_state_bytes() / 2**20:.1f} MiB state)", models["cache12"],
        {f"cache_{k}": f"new_cache_{k}" for k in range(make_models.CACHE_LAYERS)},
        lambda i, c=chunks: {"x": c[i % len(c)]}, ["y"], state_bytes=make_models.cache_state_bytes()))
    if silero is not None:
        audio = [(0.1 * rng.standard_normal((1, 576))).astype(np.float32) for _ in range(8)]
        out.append(Workload(
            "silero_vad_openvino_16k.onnx, 512-sample chunks", silero / "silero_vad_openvino_16k.onnx", {"state": "stateN"},
            lambda i, a=audio: {"input": a[i % len(a)]}, ["output"], state_bytes=2 * 128 * 4))
        sr = np.array(16000, dtype=np.int64)
        out.append(Workload(
            "silero_vad.onnx, 512-sample chunks", silero / "silero_vad.onnx", {"state": "stateN"},
            lambda i, a=audio: {"input": a[i % len(a)], "sr": sr}, ["output"], state_bytes=2 * 128 * 4,
            ov_note="OpenVINO's ONNX frontend cannot convert this file (Conv/ReduceMean of dynamic rank inside If); "
                    "the row above is silero's own OpenVINO export of the same network"))
    return out


def _ort_options(threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    return opts


class Approach:
    key = ""
    label = ""

    def reset(self) -> None: ...
    def step(self, feed: dict[str, Any]) -> Any: ...
    def bytes_per_call(self) -> int: return 0


class HandLoop(Approach):
    key, label = "hand", "hand-written sess.run loop"

    def __init__(self, w: Workload, threads: int) -> None:
        import numpy as np
        import onnxruntime as ort

        self.sess = ort.InferenceSession(str(w.path), _ort_options(threads), providers=["CPUExecutionProvider"])
        order = [o.name for o in self.sess.get_outputs()]
        self.state_at = [(i, order.index(o)) for i, o in w.pairs.items()]
        self.first = order.index(w.outputs[0])
        spec = {i.name: i for i in self.sess.get_inputs()}
        self.zeros = {i: np.zeros([d if isinstance(d, int) else 1 for d in spec[i].shape], dtype=np.float32) for i in w.pairs}
        self.reset()

    def reset(self) -> None:
        self.state = dict(self.zeros)

    def step(self, feed):
        # as a user writes it: every output (None), the state outputs fed back as the next call's state inputs
        outs = self.sess.run(None, {**feed, **self.state})
        self.state = {i: outs[k] for i, k in self.state_at}
        return outs[self.first]

    def bytes_per_call(self) -> int:
        return sum(v.nbytes for v in self.state.values())  # every state output comes back as a numpy array


class Floor(Approach):
    """Two IOBindings pre-bound with swapped state buffers; per call only the new chunk is bound.

    The plain output is pre-bound too (one buffer per binding) and handed to the
    caller as a copy, so the caller may keep it, as with every other approach.
    """

    key, label = "floor", "IOBinding floor"

    def __init__(self, w: Workload, threads: int, y_shape: tuple[int, ...]) -> None:
        import numpy as np
        import onnxruntime as ort

        self.sess = ort.InferenceSession(str(w.path), _ort_options(threads), providers=["CPUExecutionProvider"])
        spec = {i.name: i for i in self.sess.get_inputs()}
        self.zeros = {i: np.zeros([d if isinstance(d, int) else 1 for d in spec[i].shape], dtype=np.float32) for i in w.pairs}
        self.bufs = {i: [ort.OrtValue.ortvalue_from_numpy(z.copy()), ort.OrtValue.ortvalue_from_numpy(z.copy())] for i, z in self.zeros.items()}
        self.ys = [ort.OrtValue.ortvalue_from_shape_and_type(list(y_shape), np.float32, "cpu", 0) for _ in range(2)]
        self.bindings = []
        for k in (0, 1):
            b = self.sess.io_binding()
            for i, o in w.pairs.items():
                b.bind_ortvalue_input(i, self.bufs[i][k])
                b.bind_ortvalue_output(o, self.bufs[i][1 - k])
            b.bind_ortvalue_output(w.outputs[0], self.ys[k])
            self.bindings.append(b)
        self.run = self.sess.run_with_iobinding
        self.reset()

    def reset(self) -> None:
        for i, z in self.zeros.items():
            self.bufs[i][0].update_inplace(z)
        self.k = 0

    def step(self, feed):
        b = self.bindings[self.k]
        for name, arr in feed.items():
            b.bind_cpu_input(name, arr)
        self.run(b)  # no RunOptions
        y = self.ys[self.k].numpy().copy()  # numpy() is a view of the bound buffer, which the call after next overwrites
        self.k ^= 1
        return y

    def python_per_call(self, w: Workload) -> float | None:
        """Seconds of Python per call with onnxruntime's run replaced by a no-op."""
        real = self.run
        self.run = lambda b: None
        try:
            return _best_block(self.step, [w.make_feed(i) for i in range(8)])
        finally:
            self.run = real


class Stateful(Approach):
    key, label = "rnnir", "StatefulSession.run"

    def __init__(self, w: Workload, threads: int) -> None:
        from rnnir.runtime import StatefulSession

        self.s = StatefulSession(str(w.path), session_options=_ort_options(threads))
        found = {p.input: p.output for p in self.s.pairs}
        if found != w.pairs:
            w.notes.append(f"StatefulSession found pairs {found}, expected {w.pairs}: declared explicitly")
            self.s = StatefulSession(str(w.path), pairs=w.pairs, session_options=_ort_options(threads))
        self.outputs = list(w.outputs)
        self.first = self.outputs[0]

    def reset(self) -> None:
        self.s.reset()

    def step(self, feed):
        return self.s.run(feed)[self.first]  # the default call: the outputs get_outputs() lists, the state kept inside

    def python_per_call(self, w: Workload) -> float | None:
        """Seconds of Python per steady call with onnxruntime's run replaced by a no-op (on a fork)."""
        twin = self.s.fork()
        feeds = [w.make_feed(i) for i in range(8)]
        for i in range(3):
            twin.run(feeds[i])
        steady = twin._steady
        if steady is None or steady.fresh:  # an output onnxruntime allocates every call cannot be read without a run
            return None
        steady.pingpong.runs = [lambda: None, lambda: None]
        return _best_block(lambda f: twin.run(f), feeds)

    def bytes_per_call(self) -> int:
        st = self.s.stats
        return st.python_state_bytes + st.output_copy_bytes


class OpenVINO(Approach):
    key, label = "openvino", "OpenVINO stateful request"

    def __init__(self, w: Workload, threads: int) -> None:
        import openvino as ov
        from openvino import passes as ovp

        core = ov.Core()
        model = core.read_model(str(w.ov_path or w.path))
        mgr = ovp.Manager()
        mgr.register_pass(ovp.MakeStateful(dict(w.pairs)))
        mgr.run_passes(model)
        cfg = {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"}
        self.req = core.compile_model(model, "CPU", cfg).create_infer_request()
        if len(self.req.query_state()) != len(w.pairs):
            raise RuntimeError(f"MakeStateful made {len(self.req.query_state())} states, expected {len(w.pairs)}")
        self.reset()

    def reset(self) -> None:
        self.req.reset_state()

    def step(self, feed):
        return self.req.infer(feed, share_inputs=True)[0]  # outputs copied out, as onnxruntime's .numpy() does


def _time_block(a: Approach, w: Workload, n: int, offset: int) -> tuple[float, float]:
    """Seconds per call over n calls: wall time, and CPU time of this thread (onnxruntime runs a 1-thread
    session on the calling thread; time spent waiting for a CPU on a busy machine is left out)."""
    feeds = [w.make_feed(offset + i) for i in range(8)]
    step = a.step
    t, c = time.perf_counter(), time.thread_time()
    for i in range(n):
        step(feeds[i & 7])
    return (time.perf_counter() - t) / n, (time.thread_time() - c) / n


def _best_block(step: Callable[[Any], Any], feeds: list[Any], n: int = 20000, blocks: int = 5) -> float:
    """Least CPU time per call of this thread over a few blocks of n calls (a pure-Python loop: the minimum
    is the least disturbed by other processes)."""
    best = math.inf
    for _ in range(blocks):
        t = time.thread_time()
        for i in range(n):
            step(feeds[i & 7])
        best = min(best, (time.thread_time() - t) / n)
    return best


def bench_multicall(ws: list[Workload], threads: int, blocks: int, block_seconds: float, notes: list[str]) -> list[dict[str, Any]]:
    import numpy as np

    has_ov = importlib.util.find_spec("openvino") is not None
    if not has_ov:
        notes.append("openvino is not installed: its column is skipped (`pip install openvino` to include it; it is not an rnnir dependency)")
    rows = []
    for w in ws:
        row: dict[str, Any] = {"name": w.name, "path": str(w.path), "seq_len": w.seq_len, "state_bytes": w.state_bytes, "approaches": {}, "errors": {}}
        apps: list[Approach] = []
        hand = HandLoop(w, threads)
        y_shape = hand.step(w.make_feed(0)).shape
        hand.reset()
        apps.append(hand)
        for make in (lambda: Floor(w, threads, y_shape), lambda: Stateful(w, threads)) + ((lambda: OpenVINO(w, threads)),) * (has_ov and not w.ov_note):
            try:
                apps.append(make())
            except Exception as exc:  # noqa: BLE001 - one approach failing must not lose the others
                row["errors"][getattr(make, "__name__", "?")] = f"{type(exc).__name__}: {str(exc)[:200]}"
                log(f"multicall {w.name}: {type(exc).__name__}: {str(exc)[:200]}")
        if w.ov_note and has_ov:
            row["errors"]["openvino"] = w.ov_note
        # same results from every approach: 6 calls from the initial state
        ref = None
        for a in apps:
            a.reset()
            for i in range(6):
                y = np.asarray(a.step(w.make_feed(i)))
            if ref is None:
                ref = y
            row["approaches"].setdefault(a.key, {})["max_abs_diff_vs_hand"] = float(np.max(np.abs(y - ref)))
        # calls per block from a short calibration of the slowest approach
        per = max(_time_block(a, w, 5, 0)[0] for a in apps)
        n = int(min(5000, max(10, block_seconds / per)))
        samples: dict[str, list[float]] = {a.key: [] for a in apps}
        cpu: dict[str, list[float]] = {a.key: [] for a in apps}
        for b in range(blocks):
            order = apps[b % len(apps):] + apps[: b % len(apps)]
            for a in order:
                a.reset()
                _time_block(a, w, 3, 0)  # warm: first calls probe shapes
                wall, used = _time_block(a, w, n, b)
                samples[a.key].append(wall)
                cpu[a.key].append(used)
        for a in apps:
            overhead = getattr(a, "python_per_call", None)
            row["approaches"][a.key].update({
                "label": a.label, "per_call": summary(samples[a.key]), "samples": samples[a.key], "calls_per_block": n,
                "cpu_per_call": summary(cpu[a.key]), "cpu_samples": cpu[a.key],
                "python_state_bytes_per_call": a.bytes_per_call(),
                "python_per_call": overhead(w) if overhead is not None else None,
            })
        med = {k: v["per_call"]["median"] for k, v in row["approaches"].items()}
        if "rnnir" in med:
            for other in ("floor", "hand", "openvino"):
                if other in med:
                    # paired: the two ran in the same round of blocks, so slow spells of the machine hit both
                    per_block = [x / y for x, y in zip(samples["rnnir"], samples[other])]
                    row[f"rnnir_over_{other}_per_block"] = summary(per_block)
                    row[f"rnnir_over_{other}"] = statistics.median(per_block)
                    per_block_cpu = [x / y for x, y in zip(cpu["rnnir"], cpu[other])]
                    row[f"rnnir_over_{other}_cpu_per_block"] = summary(per_block_cpu)
                    row[f"rnnir_over_{other}_cpu"] = statistics.median(per_block_cpu)
        rows.append(row)
        log(f"multicall {w.name}: " + ", ".join(f"{k} {v * 1e6:.1f} µs" for k, v in med.items()))
        del apps
    return rows


# -- report ---------------------------------------------------------------------------------------


def _ratio_cell(x: float | None, limit: float) -> str:
    if x is None:
        return "-"
    return f"{x:.2f}" + ("" if x <= limit else " ✗")


def _is_real(row: dict[str, Any]) -> bool:
    return row["group"] not in ("synthetic", "nested If")


def lint_limit(row: dict[str, Any]) -> float:
    """The ratio a lint row must stay under: 1.0 for a real model, 1.5 for a synthetic graph (issue 13)."""
    return LINT_RATIO_REAL_MAX if _is_real(row) else LINT_RATIO_MAX


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    lint = report.get("lint") or []
    # wall-time ratios, and CPU-time ratios (user + system), which a loaded machine distorts far less
    for (real, label), (key, measure) in [(g, m) for m in (("ratio", "wall time"), ("cpu_ratio", "CPU time"))
                                          for g in ((True, f"rnnir lint ≤ {LINT_RATIO_REAL_MAX}× onnx.checker full check, every real model"),
                                                    (False, f"rnnir lint ≤ {LINT_RATIO_MAX}× onnx.checker full check, synthetic graphs to 100k nodes / 1,000 recurrent ops"))]:
        label = f"{label} ({measure})"
        rows = [r for r in lint if _is_real(r) == real and r["name"] != NESTED[1]]  # nobody can parse the too-deep one
        if not rows or (key == "cpu_ratio" and all(r.get(key) is None for r in rows)):
            continue
        bad, worst = [], None
        for r in rows:
            rt = r["tools"]["rnnir"]
            if rt["timed_out"] or r.get(key) is None:
                bad.append(f"{r['name']} (rnnir stopped after {rt['timeout']:g} s)")
                worst = math.inf
                continue
            worst = r[key] if worst is None else max(worst, r[key])
            if r[key] > lint_limit(r):
                bad.append(f"{r['name']} {r[key]:.2f}×")
        out.append({"target": label, "met": not bad,
                    "detail": f"{len(rows) - len(bad)} of {len(rows)} files; worst ratio " + ("∞" if worst == math.inf else f"{worst:.2f}×")
                    + ("; over: " + ", ".join(bad) if bad else "")})
    for s in report.get("slopes", []):
        if s["tool"] != "rnnir lint (whole process)":
            continue
        ok = s["slope"] is not None and s["slope"] <= SLOPE_MAX and not s.get("lower_bound")
        val = "-" if s["slope"] is None else ("≥ " if s.get("lower_bound") else "") + f"{s['slope']:.2f}"
        out.append({"target": f"lint log-log slope ≤ {SLOPE_MAX} from 10k to 100k nodes ({s['label']})", "met": ok, "detail": f"slope {val}"})
    mc = report.get("multicall") or []
    if mc:
        floor_bad, hand_bad, ov_bad, bytes_bad = [], [], [], []
        seq1 = None
        for r in mc:
            if "rnnir" not in r["approaches"]:
                continue
            if r.get("rnnir_over_floor") and r["rnnir_over_floor"] > FLOOR_RATIO_MAX:
                floor_bad.append(f"{r['name']} {r['rnnir_over_floor']:.2f}×")
            if r.get("rnnir_over_hand") and r["rnnir_over_hand"] > 1.0 + SAME_WITHIN:
                hand_bad.append(f"{r['name']} {r['rnnir_over_hand']:.2f}×")
            if r.get("rnnir_over_openvino") and r["rnnir_over_openvino"] >= 1.0:
                ov_bad.append(f"{r['name']} {r['rnnir_over_openvino']:.2f}×")
            if r["approaches"]["rnnir"].get("python_state_bytes_per_call"):
                bytes_bad.append(f"{r['name']} {r['approaches']['rnnir']['python_state_bytes_per_call']} B")
            if r.get("seq_len") == 1:
                seq1 = r.get("rnnir_over_hand")
        worst_floor = max((r.get("rnnir_over_floor") or 0) for r in mc)
        out.append({"target": f"StatefulSession.run ≤ {FLOOR_RATIO_MAX}× the IOBinding floor, every workload", "met": not floor_bad,
                    "detail": f"worst {worst_floor:.2f}×" + ("; over: " + ", ".join(floor_bad) if floor_bad else "")})
        out.append({"target": f"StatefulSession.run ≤ {HAND_RATIO_SEQ1_MAX}× the hand loop at seq len 1", "met": seq1 is not None and seq1 <= HAND_RATIO_SEQ1_MAX,
                    "detail": "-" if seq1 is None else f"{seq1:.2f}×"})
        out.append({"target": f"StatefulSession.run never slower than the hand loop (ratios within 1 ± {SAME_WITHIN:g} count as equal)", "met": not hand_bad,
                    "detail": "; ".join(hand_bad) or f"worst {max((r.get('rnnir_over_hand') or 0) for r in mc):.2f}×"})
        if any("openvino" in r["approaches"] for r in mc):
            out.append({"target": "StatefulSession.run faster than OpenVINO's stateful request, every workload", "met": not ov_bad,
                        "detail": "; ".join(ov_bad) or f"worst {max((r.get('rnnir_over_openvino') or 0) for r in mc):.2f}×"})
        out.append({"target": "zero bytes of state through Python per call (StatefulSession)", "met": not bytes_bad, "detail": "; ".join(bytes_bad) or "0 B on every workload"})
        lstm1 = next((r for r in mc if r["name"] == LSTM_SEQ1 and "rnnir" in r["approaches"]), None)
        if lstm1 is not None:  # issue 13: the default call, paired wall-time ratio (CPU-time ratio alongside)
            for other, limit, what in (("hand", SEQ1_HAND_MAX, "the hand-written sess.run loop"), ("floor", SEQ1_FLOOR_MAX, "the IOBinding floor")):
                x, c = lstm1.get(f"rnnir_over_{other}"), lstm1.get(f"rnnir_over_{other}_cpu")
                out.append({"target": f"run(feeds) ≤ {limit}× {what}, {LSTM_SEQ1}", "met": x is not None and x <= limit,
                            "detail": "-" if x is None else f"{x:.2f}× wall" + ("" if c is None else f", {c:.2f}× CPU")
                            + ("" if x <= limit else f" (over by {x / limit - 1:.0%})")})
    return out


def compute_slopes(lint: list[dict[str, Any]], passes_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by = {r["name"]: r for r in lint}
    pby = {r["name"]: r for r in passes_rows}
    out = []
    for label, small, big in SLOPE_PAIRS:
        if small in by and big in by:
            ns, nb = by[small]["nodes"], by[big]["nodes"]
            for key, tool in (("rnnir", "rnnir lint (whole process)"), ("checker", "onnx.checker (whole process)")):
                a, b = by[small]["tools"][key], by[big]["tools"][key]
                if a["time"] is None:
                    continue
                if b["time"] is None:  # stopped: the slope is at least what the timeout implies
                    out.append({"label": label, "tool": tool, "slope": slope(a["time"]["median"], b["timeout"], ns, nb), "lower_bound": True})
                else:
                    out.append({"label": label, "tool": tool, "slope": slope(a["time"]["median"], b["time"]["median"], ns, nb)})
        if small in pby and big in pby:
            ns, nb = pby[small]["nodes"], pby[big]["nodes"]
            for key, tool in (("load", "rnnir load (in process)"), ("all", "passes.run, all passes (in process)"), ("OR", "ordering pass OR (in process)")):
                a = pby[small]["load"] if key == "load" else pby[small]["passes"].get(key)
                b = pby[big]["load"] if key == "load" else pby[big]["passes"].get(key)
                if a and b:
                    out.append({"label": label, "tool": tool, "slope": slope(a["median"], b["median"], ns, nb)})
                elif a and pby[big]["timed_out"]:
                    out.append({"label": label, "tool": tool, "slope": slope(a["median"], pby[big]["timeout"], ns, nb), "lower_bound": True})
    return out


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    L: list[str] = []
    L.append("# rnnir benchmarks")
    L.append("")
    L.append(f"`{report['command']}` — {m['date']}, commit {m['commit']}, {report['elapsed_s']:.0f} s.")
    L.append("")
    L.append(f"Machine: {m['nproc']} CPUs ({m['cpu']}), load average at start {m['loadavg_at_start']}"
             + (f", at the end {report['loadavg_at_end']}" if report.get("loadavg_at_end") else "") + "; "
             f"Python {m['python']}, onnx {m['onnx']}, onnxruntime {m['onnxruntime']}, numpy {m['numpy']}, networkx {m['networkx']}; "
             f"polygraphy {m['polygraphy'] or 'not installed'}, openvino {m['openvino'] or 'not installed'}. "
             f"Times are median (min–max) of {report['reps']} runs ({report.get('lint_reps', report['reps'])} paired runs per lint model); intra-op threads = {report['threads']} for every runtime.")
    L.append("")
    tg = report.get("targets") or []
    if tg:
        L.append("## Targets")
        L.append("")
        L.append("| target | met | measured |")
        L.append("| --- | --- | --- |")
        for t in tg:
            L.append(f"| {t['target']} | {'yes' if t['met'] else '**no**'} | {t['detail']} |")
        L.append("")
    lint = report.get("lint")
    if lint:
        has_poly = any("polygraphy" in r["tools"] for r in lint)
        L.append("## Lint: whole-process wall time")
        L.append("")
        L.append("`rnnir lint FILE --format json` vs `python -c \"import sys, onnx; onnx.checker.check_model(sys.argv[1], full_check=True)\" FILE`"
                 + (" vs `polygraphy check lint FILE`" if has_poly else "") + ". Ratio = rnnir / checker, median of the per-rep ratios of "
                 "paired runs (back to back, alternating which goes first); CPU ratio = the same with each process's user + system "
                 "time (its own and its children's, from `wait4`), which other work on a loaded machine inflates far less; ✗ marks a ratio over the target: 1.0× for real models, "
                 "1.5× for synthetic graphs. Peak RSS is each process's own maximum resident set. Every tool runs once untimed first; "
                 "rnnir's bytecode is compiled first (`compileall`), as an installed wheel has it. "
                 f"Load average before / after the lint runs: {report.get('lint_load', {}).get('before', '-')} / {report.get('lint_load', {}).get('after', '-')}.")
        L.append("")
        head = "| model | group | nodes | rec. ops | rnnir lint | onnx.checker | ratio | CPU ratio |" + (" polygraphy |" if has_poly else "") + " peak RSS MB rnnir / checker" + (" / polygraphy" if has_poly else "") + " | rnnir result |"
        L.append(head)
        L.append("|" + " --- |" * (head.count("|") - 1))
        for r in lint:
            t = r["tools"]
            cells = [f"{r['name']}", r["group"], f"{r['nodes']:,}" if r["nodes"] else "-", str(r["recurrent"] if r["recurrent"] is not None else "-")]
            cells.append(fmt_s(t["rnnir"]["time"], timeout=t["rnnir"]["timeout"] if t["rnnir"]["timed_out"] else None))
            ck = t["checker"]
            cells.append(fmt_s(ck["time"], timeout=ck["timeout"] if ck["timed_out"] else None) + ("" if ck["ok"] else " (fails)"))
            cells.append(_ratio_cell(r["ratio"], lint_limit(r)) if ck["ok"] else f"{r['ratio']:.2f} (both fail)" if r["ratio"] else "-")
            cpu_ratio = r.get("cpu_ratio")
            cells.append(_ratio_cell(cpu_ratio, lint_limit(r)) if ck["ok"] else f"{cpu_ratio:.2f} (both fail)" if cpu_ratio else "-")
            if has_poly:
                p = t.get("polygraphy")
                cells.append("-" if p is None else fmt_s(p["time"], timeout=p["timeout"] if p["timed_out"] else None) + ("" if p["ok"] or p["time"] is None else f" (exit {','.join(map(str, p['exit_codes']))})"))
            rss = [t[k]["peak_rss_mb"] for k in ("rnnir", "checker", "polygraphy") if k in t]
            cells.append(" / ".join("-" if x is None else f"{x:.0f}" for x in rss))
            res = t["rnnir"]["detail"] or ""
            if t["rnnir"]["exit_codes"] and 2 in t["rnnir"]["exit_codes"]:
                res = (res + " (exit 2)").strip()
            cells.append(res + (f"; {r['note']}" if r["note"] else ""))
            L.append("| " + " | ".join(cells) + " |")
        L.append("")
        fails = [(r["name"], k, t) for r in lint for k, t in r["tools"].items() if k != "rnnir" and t["time"] is not None and not t["ok"]]
        if fails:
            L.append("Non-zero exits of the other tools:")
            L.append("")
            L.extend(f"- {k} on {name}: exit {','.join(map(str, t['exit_codes']))}: `{t['detail']}`" for name, k, t in fails)
            L.append("")
    slopes = report.get("slopes")
    if slopes:
        L.append("## Growth with graph size: log-log slope from 10k to 100k nodes")
        L.append("")
        L.append("| workload pair | measured | slope |")
        L.append("| --- | --- | --- |")
        for s in slopes:
            val = "-" if s["slope"] is None else ("≥ " if s.get("lower_bound") else "") + f"{s['slope']:.2f}"
            L.append(f"| {s['label']} | {s['tool']} | {val} |")
        L.append("")
    pr = report.get("passes")
    if pr:
        prefixes = [k for k in pr[0]["passes"] if k not in ("all", "all-nofp")] if pr and pr[0]["passes"] else []
        for r in pr:
            for k in r["passes"]:
                if k not in prefixes and k not in ("all", "all-nofp"):
                    prefixes.append(k)
        L.append("## Passes: time per pass vs loading the model (in process)")
        L.append("")
        L.append("load = `read_model` + `lower` (ONNX → IR with pairing and slice analysis); each prefix column is "
                 "`passes.run(program, select=[prefix])` alone (it recomputes the shared facts it needs); "
                 "*all* is `passes.run(program)`; *all, no fingerprint* is the same passes without the pass manager's "
                 "check that no pass changed the program.")
        L.append("")
        head = "| model | ONNX nodes | IR nodes | read | lower | " + " | ".join(prefixes) + " | all | all, no fingerprint |"
        L.append(head)
        L.append("|" + " --- |" * (head.count("|") - 1))
        for r in pr:
            stop = r["timeout"] if r["timed_out"] else None
            name = r["name"]
            done = r.get("reps_done", r["load"]["n"] if r.get("load") else 0)
            if r["timed_out"] and done:
                name += f" ({done} of {report['reps']} reps within {r['timeout']:g} s)"
            cells = [name, f"{r['nodes']:,}" if r["nodes"] else "-", f"{r['ir_nodes']:,}" if r["ir_nodes"] else "-",
                     fmt_s(r["read"], timeout=stop), fmt_s(r["lower"], timeout=stop)]
            for k in [*prefixes, "all", "all-nofp"]:
                s = r["passes"].get(k)
                cells.append(fmt_s(s, timeout=stop if s is None else None))
            if r["error"]:
                cells[-1] += f" (error: {r['error']})"
            L.append("| " + " | ".join(cells) + " |")
        L.append("")
    mc = report.get("multicall")
    if mc:
        L.append("## Multi-call: time per call")
        L.append("")
        L.append("Per-call wall time, median (min–max) over interleaved blocks of calls; each ratio is the median of the "
                 "per-round ratios (both approaches timed in the same round), wall time first, then the calling thread's CPU "
                 "time (less inflated by a busy machine). StatefulSession is called as users call it, `run(feeds)` (the outputs "
                 "`get_outputs()` lists; the state stays inside); the hand loop is `outs = sess.run(None, {**feeds, **state})` "
                 "with the state outputs fed back. *Python state B/call*: bytes of state copied "
                 "between numpy and the runtime per call in steady state (StatefulSession: `stats.python_state_bytes + "
                 "stats.output_copy_bytes`; hand loop: every state output comes back as a numpy array and is fed again). "
                 "*Python µs/call*: CPU time of the same call with onnxruntime's run replaced by a no-op (least of 5 blocks of 20,000), "
                 "StatefulSession / floor.")
        L.append("")
        L.append("| workload | state | StatefulSession.run | IOBinding floor | hand loop | OpenVINO stateful | rnnir / floor | rnnir / hand | rnnir / OpenVINO | CPU: rnnir / floor, / hand | Python µs/call rnnir / floor | Python state B/call rnnir / hand |")
        L.append("|" + " --- |" * 12)
        for r in mc:
            a = r["approaches"]

            def cell(k: str) -> str:
                if k in a and a[k].get("per_call"):
                    return fmt_s(a[k]["per_call"], "us")
                return "n/a" if k in r["errors"] or k == "openvino" else "-"

            def ratio(k: str, limit: float) -> str:
                x = r.get(f"rnnir_over_{k}")
                return "-" if x is None else f"{x:.2f}" + ("" if x <= limit else " ✗")

            st = r["state_bytes"]
            state = f"{st / 2**20:.1f} MiB" if st >= 2**20 else f"{st / 1024:.1f} KiB"
            bytes_cell = " / ".join(str(a[k]["python_state_bytes_per_call"]) if k in a else "-" for k in ("rnnir", "hand"))
            cpu_cell = " / ".join("-" if r.get(f"rnnir_over_{k}_cpu") is None else f"{r[f'rnnir_over_{k}_cpu']:.2f}" for k in ("floor", "hand"))
            py_cell = " / ".join("-" if k not in a or a[k].get("python_per_call") is None else f"{a[k]['python_per_call'] * 1e6:.1f}" for k in ("rnnir", "floor"))
            seq1 = r["name"] == LSTM_SEQ1
            L.append(f"| {r['name']} | {state} | {cell('rnnir')} | {cell('floor')} | {cell('hand')} | {cell('openvino')} | "
                     f"{ratio('floor', SEQ1_FLOOR_MAX if seq1 else FLOOR_RATIO_MAX)} | "
                     f"{ratio('hand', SEQ1_HAND_MAX if seq1 else HAND_RATIO_SEQ1_MAX if r.get('seq_len') == 1 else 1.0 + SAME_WITHIN)} | "
                     f"{ratio('openvino', 0.9999)} | {cpu_cell} | {py_cell} | {bytes_cell} |")
        L.append("")
        extra = []
        for r in mc:
            for k, msg in r["errors"].items():
                extra.append(f"- {r['name']}: {k}: {msg}")
            for k, v in r["approaches"].items():
                if v.get("max_abs_diff_vs_hand", 0) > 1e-3:
                    extra.append(f"- {r['name']}: {k} differs from the hand loop after 6 calls by {v['max_abs_diff_vs_hand']:.2g}")
        if extra:
            L.extend(extra)
            L.append("")
    if report.get("notes"):
        L.append("## Notes")
        L.append("")
        L.extend(f"- {n}" for n in report["notes"])
        L.append("")
    return "\n".join(L)


# -- main -----------------------------------------------------------------------------------------


def _run_at(rev: str, argv: list[str]) -> int:
    """Run this script again with rnnir and passes taken from ``git archive REV``."""
    try:
        sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"bench: cannot resolve {rev!r}: {exc}", file=sys.stderr)
        return 2
    rest = []
    skip = False
    for a in argv:  # drop --at REV / --at=REV
        if skip:
            skip = False
            continue
        if a == "--at":
            skip = True
            continue
        if not a.startswith("--at="):
            rest.append(a)
    with tempfile.TemporaryDirectory(prefix=f"rnnir-{sha}-") as tmp:
        # revisions before the move to rnnir/passes kept the passes at the top level; tests/__init__.py may not exist
        paths = [p for p in ("rnnir", "passes", "tests/__init__.py", "tests/support")
                 if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{sha}:{p}"], capture_output=True, timeout=10).returncode == 0]
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha, *paths], capture_output=True, timeout=60)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True, timeout=60)
        env = dict(os.environ, RNNIR_BENCH_CODE=tmp, RNNIR_BENCH_REV=sha)
        log(f"benchmarking rnnir and passes as of {sha} from a snapshot in {tmp}")
        return subprocess.run([sys.executable, str(pathlib.Path(__file__).resolve()), *rest], env=env).returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Reproduce rnnir's benchmark tables (lint, passes, multi-call).")
    ap.add_argument("--quick", action="store_true", help="fewer models and shorter blocks (about 2 minutes)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per measurement (median and spread; default 3)")
    ap.add_argument("--lint-reps", type=int, default=5, help="paired rnnir/checker runs per lint model (default 5: the median of 5 ratios)")
    ap.add_argument("--polygraphy", action="store_true", help="add `polygraphy check lint` to the lint table (seconds per run)")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads for onnxruntime and OpenVINO (default 1)")
    ap.add_argument("--only", default="lint,passes,multicall", help="comma-separated subset of lint,passes,multicall")
    ap.add_argument("--timeout", type=float, default=None, help="seconds before a lint run is stopped (default 60, quick 30)")
    ap.add_argument("--models", default="", help="comma-separated name fragments: keep only the lint/passes models and multi-call workloads whose names contain one")
    ap.add_argument("--out", type=pathlib.Path, default=RESULTS)
    ap.add_argument("--at", metavar="REV", help="benchmark rnnir and passes as committed at REV (a snapshot, immune to edits "
                    "in the working tree during the run) instead of the working tree")
    ap.add_argument("--render", type=pathlib.Path, help="only re-render the markdown (and targets) of a results JSON written earlier")
    ap.add_argument("--passes-worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.render:
        report = json.loads(args.render.read_text())
        report["targets"] = targets(report)
        md = markdown(report)
        args.render.with_suffix(".md").write_text(md + "\n")
        print(md)
        return 0
    if args.passes_worker:
        passes_worker(args.passes_worker, args.reps)
        return 0
    if args.reps < 1 or args.lint_reps < 1:
        ap.error("--reps and --lint-reps must be at least 1")
    if args.at:
        return _run_at(args.at, argv if argv is not None else sys.argv[1:])
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    frags = [x.strip() for x in args.models.split(",") if x.strip()]
    keep = (lambda name: any(f in name for f in frags)) if frags else (lambda name: True)
    timeout = args.timeout or (30.0 if args.quick else 60.0)
    t_start = time.perf_counter()
    notes: list[str] = []
    report: dict[str, Any] = {
        "command": "python bench/run.py" + " ".join([""] + (argv if argv is not None else sys.argv[1:])) + (f" --at {SNAPSHOT_REV}" if SNAPSHOT_REV else ""),
        "machine": machine(), "reps": args.reps, "threads": args.threads, "quick": args.quick,
    }
    log(f"machine: {report['machine']['nproc']} CPUs, {report['machine']['cpu']}; commit {report['machine']['commit']}")
    models = make_models.build_all(log=log)
    silero = silero_dir(notes)

    if "lint" in only:
        files = [f for f in lint_files(args.quick, models, silero, notes) if keep(f.name)]
        tls = tools(timeout, min(timeout, 20.0), notes, args.polygraphy)
        if GNU_TIME is None:
            notes.append("GNU /usr/bin/time is not available: peak RSS is not measured")
        log(f"lint: {len(files)} files × {len(tls)} tools × {args.lint_reps} reps")
        report["lint_reps"] = args.lint_reps
        report["lint_load"] = {"before": _loadavg()}
        report["lint"] = bench_lint(files, tls, args.lint_reps) if files else []
        report["lint_load"]["after"] = _loadavg()
        if any(r["name"] == "syn_100k_r1" for r in report["lint"]) and "polygraphy" in report["lint"][0]["tools"]:
            notes.append("`polygraphy check lint` builds an onnxruntime session and runs the model; on the 100k-node models "
                         "onnxruntime's session creation alone takes minutes, hence the stopped polygraphy runs.")
    if "passes" in only:
        names = QUICK_PASS_MODELS if args.quick else PASS_MODELS
        plist = [(n, models[n]) for n in names]
        if silero is not None:
            plist.append(("silero_vad.onnx", silero / "silero_vad.onnx"))
        plist = [(n, p) for n, p in plist if keep(n)]
        stopped = {r["name"] for r in report.get("lint") or [] if r["tools"]["rnnir"]["timed_out"]}
        if stopped & {n for n, _ in plist}:
            notes.append(f"per-pass timing skipped for {', '.join(sorted(stopped & {n for n, _ in plist}))}: "
                         f"`rnnir lint` did not finish within {timeout:g} s, so loading alone would not either")
            plist = [(n, p) for n, p in plist if n not in stopped]
        log(f"passes: {len(plist)} models × {args.reps} reps")
        report["passes"] = bench_passes(plist, args.reps, timeout)
    report["slopes"] = compute_slopes(report.get("lint") or [], report.get("passes") or [])
    if "multicall" in only:
        ws = [w for w in workloads(args.quick, models, silero) if keep(w.name)]
        blocks = max(5, 3 * args.reps) if not args.quick else max(5, args.reps)  # paired ratios: a median of at least 5
        log(f"multicall: {len(ws)} workloads, {blocks} blocks each")
        report["multicall"] = bench_multicall(ws, args.threads, blocks, 0.08 if args.quick else 0.25, notes)
    end_state = _tree_state()
    if end_state != report["machine"]["tree"]:
        start = report["machine"]["tree"].split("+")[0]
        try:
            changed = subprocess.run(["git", "-C", str(ROOT), "diff", "--name-only", start, "--", "rnnir", "passes"],
                                     capture_output=True, text=True, timeout=10).stdout.split()
        except (OSError, subprocess.SubprocessError):
            changed = []
        notes.insert(0, f"**rnnir or passes changed during this run** ({report['machine']['tree']} at the start, {end_state} at the end"
                        + (f"; files: {', '.join(changed)}" if changed else "") + "): the tables may mix code versions.")
    report["notes"] = notes
    report["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    report["targets"] = targets(report)
    report["elapsed_s"] = time.perf_counter() - t_start
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    md = markdown(report)
    (args.out / "latest.md").write_text(md + "\n")
    print(md)
    log(f"wrote {args.out / 'latest.json'} and {args.out / 'latest.md'} in {report['elapsed_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
