"""Benchmark: linting a long chain of elementwise nodes on the state path vs the same chain off it.

    python bench/long_path.py [--sizes 20000,50000,100000] [--with-gc]

Each model is an LSTM whose final hidden state passes through N ``Relu`` nodes before it becomes
``hn`` (on the path: every node is lowered, traced and analysed), or the same N nodes hanging off
the input ``x`` into a side output (off the path: indexed and validated, never lowered).  Every
measurement is one fresh process linting the file in-process (``rnnir.cli.lint_one``): wall time
and peak RSS.  The log-log slope between the sizes says whether the work is linear (slope ~1).
``--with-gc`` runs with the garbage collector left running during lowering (the behaviour before
``rnnir.util.gcpause``), for comparison.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_CHILD = r"""
import gc, json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from rnnir import cli, gcpause
if sys.argv[3] == "with-gc":
    import contextlib
    gcpause.paused_gc = contextlib.nullcontext  # the collector keeps running, as before
t = time.perf_counter()
r = cli.lint_one(cli.LintJob(sys.argv[2], None, (), None, "dynamic", "fanout"))
print(json.dumps({"seconds": time.perf_counter() - t, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "error": r.error, "findings": [d.code for d in r.diagnostics]}))
"""


def chain_model(n: int, on_path: bool):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    H, I = 4, 3
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((1, 4 * H, I)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((1, 4 * H, H)).astype(np.float32), "R"),
    ]

    def vi(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    nodes = [helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["Y", "yh", "cn"], hidden_size=H, name="lstm")]
    prev = "yh" if on_path else "x"
    for i in range(n):
        nodes.append(helper.make_node("Relu", [prev], [f"e{i}"], name=f"e{i}"))
        prev = f"e{i}"
    outputs = [vi("Y", ["T", 1, 1, H]), vi("hn", [1, 1, H]), vi("cn", [1, 1, H])]
    if on_path:
        nodes.append(helper.make_node("Identity", [prev], ["hn"]))
    else:
        nodes += [helper.make_node("Identity", ["yh"], ["hn"]), helper.make_node("Identity", [prev], ["side"])]
        outputs.append(vi("side", ["T", 1, I]))
    graph = helper.make_graph(nodes, "chain", [vi("x", ["T", 1, I]), vi("h0", [1, 1, H]), vi("c0", [1, 1, H])], outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def measure(path: Path, mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(REPO), str(path), mode], capture_output=True, text=True, check=True, timeout=3600)
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,50000,100000")
    parser.add_argument("--with-gc", action="store_true", help="also measure with the collector running during lowering")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    modes = ["paused-gc"] + (["with-gc"] if args.with_gc else [])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            for on_path in (True, False):
                path = Path(tmp) / f"chain_{n}_{'on' if on_path else 'off'}.onnx"
                path.write_bytes(chain_model(n, on_path).SerializeToString())
                for mode in modes:
                    r = measure(path, mode)
                    rows.append({"nodes": n, "path": "on" if on_path else "off", "gc": mode, **r})
                    print(f"{n:>8} {'on ' if on_path else 'off'} {mode:9} {r['seconds']:8.2f} s {r['rss_mb']:8.0f} MB {r['error'] or ''}", flush=True)
    print()
    print("| nodes | path | gc | seconds | peak RSS MB |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['nodes']:,} | {r['path']} | {r['gc']} | {r['seconds']:.2f} | {r['rss_mb']:.0f} |")
    for mode in modes:
        on = [r for r in rows if r["path"] == "on" and r["gc"] == mode]
        if len(on) >= 2:
            a, b = on[0], on[-1]
            slope = math.log(b["seconds"] / a["seconds"]) / math.log(b["nodes"] / a["nodes"])
            print(f"\non-path log-log slope ({mode}, {a['nodes']:,} -> {b['nodes']:,} nodes): {slope:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
