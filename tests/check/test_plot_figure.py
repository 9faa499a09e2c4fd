"""What `rnnir run --plot` draws, read back from the matplotlib Figure plot_report returns: the title, each panel's
lines (the report's own per-call numbers, floored at tol/100 on the log panel), labels, legends and sizes."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from rnnir.check.multicall.check import check_multicall

REPO = Path(__file__).resolve().parents[2]
FANOUT = REPO / "samples" / "lstm_fanout.onnx"


def test_the_figure_draws_the_reports_numbers_with_its_labels():
    pytest.importorskip("matplotlib")
    from rnnir.check.plot import plot_report

    x = np.random.default_rng(7).standard_normal((12, 1, 3)).astype(np.float32)
    report = check_multicall(str(FANOUT), {"x": x}, chunk_sizes=[3], tol=1e-4)
    fig = plot_report(report)
    assert fig._suptitle.get_text() == f"lstm_fanout.onnx: {report.status.upper()}, chunk 3"
    assert fig._suptitle.get_fontsize() == 12 and tuple(fig.get_size_inches()) == (10.0, 9.0)
    ax_out, ax_diff, ax_norm = fig.axes[:3]
    runs = {v.variant: v for v in report.variants if v.chunk == 3}
    assert {line.get_label(): list(line.get_ydata()) for line in ax_out.get_lines()} == {n: list(r.trace) for n, r in runs.items()}
    assert ax_out.get_ylabel() == "y\n(mean per call)"
    assert ax_out.get_title() == "the persistent run against the re-initialised and stale variants" and ax_out.title.get_fontsize() == 10
    assert [t.get_text() for t in ax_out.get_legend().get_texts()] == list(runs)
    floor = 1e-4 / 100
    drawn = {line.get_label(): list(line.get_ydata()) for line in ax_diff.get_lines()}
    expected = {n: [max(d, floor) if math.isfinite(d) else float("nan") for d in r.per_call] for n, r in runs.items() if n != "persistent" and r.per_call}
    assert expected and {k: v for k, v in drawn.items() if k in expected} == expected
    assert [k for k in drawn if k not in expected] == ["tolerance 0.0001"] and list(drawn["tolerance 0.0001"]) == [1e-4, 1e-4]
    assert ax_diff.get_yscale() == "log"
    assert {line.get_label(): list(line.get_ydata()) for line in ax_norm.get_lines()} == {
        f"{slot} ({h.trend})": list(h.norm) for slot, h in report.health.items()
    } and report.health
    assert ax_diff.get_ylabel() == "max |diff| from\npersistent" and ax_diff.get_legend() is not None
    assert all(t.get_fontsize() == 8 for t in ax_diff.get_legend().get_texts())
    assert ax_norm.get_ylabel() == "state L2 norm" and ax_norm.get_xlabel() == "call"
    assert ax_norm.get_legend() is not None and all(t.get_fontsize() == 8 for t in ax_norm.get_legend().get_texts())
    assert all(t.get_fontsize() == 8 for t in ax_out.get_legend().get_texts())
