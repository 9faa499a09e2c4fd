"""`plot_report` on reports written by hand (no model run): the panels' fallbacks, the title per mode, which variants
the difference panel draws, and what the figure file and pyplot hold afterwards."""

from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from rnnir.check.multicall.report import VariantResult

plt = pytest.importorskip("matplotlib.pyplot")


def _variant(name: str, chunk: int | None, *, per_call: list[float] | None = None, trace: list[float] | None = None) -> VariantResult:
    return VariantResult(name, chunk, 3, "persistent", None, 0.0, per_call=per_call or [], trace=trace or [])


def _report(variants: list[VariantResult], *, mode: str = "time", health: dict | None = None) -> SimpleNamespace:
    return SimpleNamespace(model="/m/vad.onnx", status="fail", mode=mode, watched="y", tol=1e-3, variants=variants, health=health or {})


def test_a_report_without_broken_variants_or_state_says_so_in_its_panels() -> None:
    from rnnir.check.plot import plot_report

    fig = plot_report(_report([_variant("persistent", 4, trace=[1.0, 2.0, 3.0])]))
    _, ax_diff, ax_norm = fig.axes[:3]
    assert [t.get_text() for t in ax_diff.texts] == ["no broken variant was run"]
    assert [t.get_text() for t in ax_norm.texts] == ["no state"]
    assert [line.get_label() for line in ax_diff.get_lines()] == ["tolerance 0.001"]
    plt.close(fig)


def test_the_difference_panel_draws_each_broken_variant_with_calls_floored_at_a_hundredth_of_tol() -> None:
    from rnnir.check.plot import plot_report

    variants = [
        _variant("persistent", 4, per_call=[9.0, 9.0], trace=[0.5, 0.5]),  # its own reference: never on this panel
        _variant("reinit", 4, per_call=[0.0, 0.5, float("inf")]),
        _variant("stale", 4),  # no per-call numbers: nothing to draw
        _variant("reinit", 8, per_call=[7.0]),  # another chunk size: not this figure's
    ]
    fig = plot_report(_report(variants))
    ax_diff = fig.axes[1]
    drawn = {line.get_label(): [float(v) for v in line.get_ydata()] for line in ax_diff.get_lines()}
    assert list(drawn) == ["reinit", "tolerance 0.001"]
    assert drawn["reinit"][:2] == [1e-5, 0.5] and drawn["reinit"][2] != drawn["reinit"][2]  # floor, value, NaN for inf
    assert [t.get_text() for t in ax_diff.texts] == []
    assert fig._suptitle.get_text() == "vad.onnx: FAIL, chunk 4"
    plt.close(fig)


def test_the_title_names_a_chunk_only_for_time_chunked_reports() -> None:
    from rnnir.check.plot import plot_report

    by_calls = plot_report(_report([_variant("persistent", 1, trace=[1.0])], mode="calls"))
    no_chunk = plot_report(_report([_variant("persistent", None, trace=[1.0])]))
    assert by_calls._suptitle.get_text() == no_chunk._suptitle.get_text() == "vad.onnx: FAIL"
    plt.close(by_calls)
    plt.close(no_chunk)


def test_a_written_plot_is_a_110_dpi_png_even_without_a_suffix_and_leaves_no_figure_open(tmp_path: Path) -> None:
    from rnnir.check.plot import PlotError, plot_report

    report = _report([_variant("persistent", 4, trace=[1.0, 2.0])])
    before = set(plt.get_fignums())
    out = tmp_path / "run"  # no suffix: matplotlib's default format
    plot_report(report, out)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1100, 990)  # IHDR: 10 x 9 inches at 110 dpi
    assert set(plt.get_fignums()) == before
    with pytest.raises(PlotError):
        plot_report(report, tmp_path / "missing" / "run.png")
    with pytest.raises(PlotError):
        plot_report(report, tmp_path / "run.unknown-format")
    assert set(plt.get_fignums()) == before


def test_plots_are_drawn_on_the_file_only_backend_whatever_was_chosen_before() -> None:
    import matplotlib

    from rnnir.check.plot import require_matplotlib

    matplotlib.use("pdf")
    require_matplotlib()
    assert matplotlib.get_backend().lower() == "agg"
