"""The floor under ``SessionPool.run`` at N LSTM streams: a tick with every per-stream check left out.

    python -m compileall -q rnnir bench && python bench/pool_floor.py [--streams 64] [--rounds 21] [--ticks 300]

Issue 27 asks ``pool.run`` for >= 0.9x the bare batched ``InferenceSession.run`` at 64 streams of the LSTM
64->128 (``bench/pool.py``'s workload).  This measures what that interface costs at the least, on onnxruntime's
IOBinding and numpy alone (no rnnir code in the floor): each tick joins the requests' rows into a bound input
buffer, runs the binding (the states ping-pong between two pairs of bound buffers, as the pool's do), and hands
out one view of its row of the output in one dict per stream, without checking any request.  Then the checks
the pool's lean tick makes are added one at a time (ids and names, dtypes, shapes), and ``pool.run`` itself.

Variants run in rounds of ``--ticks`` ticks, the order rotating each round, timed in process CPU time (the
machine is shared); each is reported as the median microseconds per tick and the median over rounds of
bare / variant (the figure the issue's target is stated in).  The requests are those of ``bench/pool.py``:
four ticks of one new (1, 1, 64) float32 array per stream, used in turn.

``--one`` measures the issue's other target instead, ``pool.run`` at one stream against a ``StatefulSession``
(``bench/pool.py``'s one-stream row, where a call is ~10 us and the two differ by a few tenths of a us, less
than that benchmark's block-to-block spread): many short rounds (``--one-rounds`` of ``--one-calls`` calls per
side, in a new random order each round), process time, the median over rounds of session / side with a distribution-free
95% interval of that median (order statistics), and the session against itself as a control: its interval
is the resolution.  The bound run alone (the pool's binding, no Python around it) is the ceiling.
"""

from __future__ import annotations

import argparse
import math
import operator
import os
import pathlib
import random
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

import make_models  # noqa: E402
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

from rnnir.serving.pool.pool import SessionPool  # noqa: E402

_DTYPE = operator.attrgetter("dtype")
_SHAPE = operator.attrgetter("shape")
_X = operator.itemgetter("x")
Tick = dict[int, dict[str, np.ndarray]]


def _options() -> ort.SessionOptions:
    opts = ort.SessionOptions()  # as bench/pool.py's, one intra-op thread
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    return opts


class BoundTick:
    """The pool's bound tick on onnxruntime's IOBinding alone: the input buffer bound once, the states in two
    pairs of buffers (binding k reads pair k, writes pair 1-k), one output buffer per binding."""

    def __init__(self, sess: ort.InferenceSession, n: int) -> None:
        f32 = np.float32
        self.x = np.zeros((1, n, make_models.LSTM_IN), f32)
        states = [(np.zeros((1, n, 128), f32), np.zeros((1, n, 128), f32)) for _ in range(2)]
        self.y = [np.empty((1, n, 128), f32) for _ in range(2)]
        self.runs: list[Callable[[], object]] = []
        for k in range(2):
            b = sess.io_binding()
            for name, arr in (("x", self.x), ("h0", states[k][0]), ("c0", states[k][1])):
                b.bind_input(name, "cpu", 0, f32, list(arr.shape), arr.ctypes.data)
            for name, arr in (("hn", states[1 - k][0]), ("cn", states[1 - k][1]), ("y", self.y[k])):
                b.bind_output(name, "cpu", 0, f32, list(arr.shape), arr.ctypes.data)
            native = getattr(getattr(sess, "_sess", None), "run_with_iobinding", None)
            # the pybind method without the Python wrapper, as rnnir.runtime.ort calls it; the public call otherwise
            self.runs.append(partial(native, b._iobinding, None) if native is not None else partial(sess.run_with_iobinding, b))
        self.states = states  # the bindings hold raw pointers: keep the buffers alive
        self.flat = memoryview(self.x.reshape(-1).view(np.uint8))
        self.k = 0
        self.n = n

    def run(self) -> np.ndarray:
        k = self.k
        self.runs[k]()
        self.k = k ^ 1
        return self.y[k]


def variants(pool: SessionPool, sess: ort.InferenceSession, bound: BoundTick, n: int, bare_feeds: dict[str, np.ndarray]) -> dict[str, Callable[[Tick], object]]:
    ids = list(range(n))
    flat = bound.flat
    row = (1, 1, make_models.LSTM_IN)
    f32 = np.dtype(np.float32)
    per_stream = (n, 1, 1, 128)  # y is (1, n, 128): row k is bytes k of n, so a reshape puts the rows first

    def bare(tick: Tick) -> object:
        return sess.run(["y"], bare_feeds)

    def bound_only(tick: Tick) -> object:
        flat[:] = b"".join(list(map(_X, tick.values())))
        return bound.run()

    def checked(level: int) -> Callable[[Tick], object]:
        """The floor tick with the lean tick's checks up to ``level``: 1 ids and names, 2 dtypes, 3 shapes."""

        def tick_of(tick: Tick) -> object:
            if level:
                if list(tick) != ids:  # the pool's cheapest forms: a list of the keys, one sum of sizes
                    return None
                listed = list(tick.values())
                if sum(map(len, listed)) != n:
                    return None
                arrays = list(map(_X, listed))
                if level > 1 and list(map(_DTYPE, arrays)).count(f32) != n:
                    return None
                if level > 2 and list(map(_SHAPE, arrays)).count(row) != n:
                    return None
            else:
                arrays = list(map(_X, tick.values()))
            flat[:] = b"".join(arrays)
            y = bound.run()
            return dict(zip(ids, [{"y": p} for p in y.reshape(per_stream)]))

        return tick_of

    def pool_run(tick: Tick) -> object:
        return pool.run(tick, ["y"])

    def steady_call(tick: Tick) -> object:
        steady = pool._steady  # the pool's plan for these ids, made by the warm-up's first ticks
        return steady.call(tick) if steady is not None else pool.run(tick, ["y"])

    return {"bare batched InferenceSession.run": bare, "rows joined + bound run (no per-stream output)": bound_only,
            "floor: + one view and one dict per stream, no check": checked(0), "+ ids and names checked": checked(1),
            "+ dtypes checked": checked(2), "+ shapes checked (every check of the pool's lean tick)": checked(3),
            "the pool's lean tick alone (SteadyTick.call: no lock, no plan lookup)": steady_call, "pool.run": pool_run}


def median_interval(ratios: list[float]) -> tuple[float, float, float]:
    """The median of ``ratios`` and a distribution-free ~95% interval of it: the order statistics
    n/2 -+ 0.98 sqrt(n) (the binomial's normal approximation), clamped to the sample."""
    xs = sorted(ratios)
    n = len(xs)
    half = 0.98 * math.sqrt(n)
    lo, hi = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half) - 1)
    return statistics.median(xs), xs[lo], xs[hi]


def one_stream(rounds: int, calls: int) -> None:
    """pool.run at one stream against a StatefulSession (see the module docstring, ``--one``)."""
    from rnnir.runtime import StatefulSession

    model = make_models.build_all(only={"lstm_i64_h128_b"}, log=lambda m: None)["lstm_i64_h128_b"]
    rng = np.random.default_rng(1)
    xs = [{"x": (0.5 * rng.standard_normal((1, 1, make_models.LSTM_IN))).astype(np.float32)} for _ in range(4)]
    ticks = [{0: x} for x in xs]
    pool = SessionPool(model, session_options=_options())
    pool.open(0)
    session = StatefulSession(model, session_options=_options())
    out = ["y"]
    for r in range(8):  # the same outputs from both, and each in its steady state
        assert np.array_equal(pool.run(ticks[r & 3], out)[0]["y"], session.run(xs[r & 3], out)["y"]), "the pool computes something else"
    steady = pool._steady
    assert steady is not None and steady.lean, "the pool's one-stream tick is not on its lean path"
    bound = steady.tick.run  # the bound run: the binding, the buffer test and the arena swap (the state moves on)
    sides: dict[str, Callable[[int], object]] = {
        "StatefulSession.run": lambda r: session.run(xs[r & 3], out),
        "pool.run": lambda r: pool.run(ticks[r & 3], out),
        "StatefulSession.run again (control)": lambda r: session.run(xs[r & 3], out),
        "the pool's bound run alone (no checks, no outputs handed out)": lambda r: bound(),
    }
    names = list(sides)
    per_call: dict[str, list[float]] = {name: [] for name in names}
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    clock = time.process_time
    order = random.Random(rounds)  # a new order each round: no side always runs after the same other one
    for _ in range(rounds):
        order.shuffle(names)
        for name in names:
            step = sides[name]
            cpu = clock()
            for r in range(calls):
                step(r)
            per_call[name].append((clock() - cpu) / calls * 1e6)
    base = per_call["StatefulSession.run"]
    print(f"one LSTM stream (in 64, hidden 128, one step), {rounds} rounds of {calls} calls per side, process time; "
          f"onnxruntime {ort.__version__}, numpy {np.__version__}, Python {sys.version.split()[0]}; load average {load} at the start, "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")
    print()
    print("| call | µs per call, median | StatefulSession / this, median of rounds [95% interval] |")
    print("| --- | --- | --- |")
    for name, times in per_call.items():
        mid, lo, hi = median_interval([b / t for b, t in zip(base, times)])
        print(f"| {name} | {statistics.median(times):.2f} | {mid:.3f} [{lo:.3f}, {hi:.3f}] |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--ticks", type=int, default=300, help="ticks per round and variant")
    ap.add_argument("--one", action="store_true", help="one stream: pool.run against a StatefulSession instead")
    ap.add_argument("--one-rounds", type=int, default=201)
    ap.add_argument("--one-calls", type=int, default=500, help="calls per round and side with --one")
    args = ap.parse_args(argv)
    if args.one:
        one_stream(args.one_rounds, args.one_calls)
        return 0
    n = args.streams
    model = make_models.build_all(only={"lstm_i64_h128_b"}, log=lambda m: None)["lstm_i64_h128_b"]
    rng = np.random.default_rng(n)
    ticks = [{sid: {"x": (0.5 * rng.standard_normal((1, 1, make_models.LSTM_IN))).astype(np.float32)} for sid in range(n)} for _ in range(4)]
    pool = SessionPool(model, session_options=_options())
    for sid in range(n):
        pool.open(sid)
    sess = ort.InferenceSession(str(model), _options(), providers=["CPUExecutionProvider"])
    bound = BoundTick(sess, n)
    stacked = np.concatenate([ticks[0][sid]["x"] for sid in range(n)], axis=1)
    bare_feeds = {"x": stacked, "h0": np.zeros((1, n, 128), np.float32), "c0": np.zeros((1, n, 128), np.float32)}
    steps = variants(pool, sess, bound, n, bare_feeds)
    # the floor's outputs are the model's: the first tick from zero state against the bare call's
    first = steps["floor: + one view and one dict per stream, no check"](ticks[0])
    assert isinstance(first, dict)
    want = sess.run(["y"], bare_feeds)[0]
    assert all(np.array_equal(first[sid]["y"], want[:, sid : sid + 1]) for sid in range(n)), "the floor tick computes something else"
    for step in steps.values():  # warm up: the pool's first ticks probe the model and build its plan
        for r in range(8):
            step(ticks[r & 3])
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    per_tick: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for rnd in range(args.rounds):
        for name in names[rnd % len(names):] + names[: rnd % len(names)]:
            step = steps[name]
            cpu = time.process_time()
            for r in range(args.ticks):
                step(ticks[r & 3])
            per_tick[name].append((time.process_time() - cpu) / args.ticks * 1e6)
    bare = per_tick[names[0]]
    print(f"{n} LSTM streams (in 64, hidden 128, one step), {args.rounds} rounds of {args.ticks} ticks, process time; "
          f"onnxruntime {ort.__version__}, numpy {np.__version__}, Python {sys.version.split()[0]}; load average {load} at the start, "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")
    print()
    print("| tick | µs per tick, median (min) | bare / this, median of rounds |")
    print("| --- | --- | --- |")
    for name, times in per_tick.items():
        ratio = statistics.median(b / t for b, t in zip(bare, times))
        print(f"| {name} | {statistics.median(times):.1f} ({min(times):.1f}) | {ratio:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
