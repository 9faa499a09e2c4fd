"""``rnnir run --plot run.png``: a multi-call report as a picture (needs matplotlib: ``pip install 'rnnir[plot]'``).

Three panels over the calls of the smallest chunk size (the most calls):

1. the watched output (the first output that is not state; its mean per call) of the persistent run,
   the run that re-initialises the state every call and the run that reads a state one call stale;
2. how far each broken variant is from the persistent run, per call (max |diff| over every output,
   log scale, the tolerance as a line): a lost state shows as a jump off the floor;
3. the L2 norm of every slot over the longest persistent run: growth, decay or saturation.

matplotlib is imported only here, and only when a plot is asked for.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

from rnnir.errors import RnnirError

if TYPE_CHECKING:
    from rnnir.check.multicall.report import MulticallReport

__all__ = ["PlotError", "PlotUnavailable", "plot_report", "require_matplotlib"]

_STYLES = {"persistent": ("-", "#1f77b4"), "reinit": ("--", "#d62728"), "stale": (":", "#ff7f0e"), "hc-swapped": ("-.", "#9467bd")}


class PlotError(RnnirError):
    """A plot could not be made or written."""


class PlotUnavailable(PlotError):
    """matplotlib is not installed: plots are an optional extra."""


def require_matplotlib() -> Any:
    """The ``matplotlib.pyplot`` module on the non-interactive Agg backend, or :class:`PlotUnavailable`."""
    try:
        import matplotlib
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib, which is not installed: pip install 'rnnir[plot]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")  # files only: never open a window, work without a display
    import matplotlib.pyplot as plt

    return plt


def plot_report(report: MulticallReport, path: str | os.PathLike[str] | None = None) -> Any:
    """Draw ``report`` (see the module docstring); save it to ``path`` (format from its suffix) when given.

    Returns the matplotlib Figure, so a notebook can show or restyle it.
    """
    plt = require_matplotlib()
    chunk = min((v.chunk for v in report.variants if v.chunk is not None), default=None)
    runs = {v.variant: v for v in report.variants if v.chunk == chunk}
    fig, (ax_out, ax_diff, ax_norm) = plt.subplots(3, 1, figsize=(10, 9), sharex=True, constrained_layout=True)
    per_chunk = "" if chunk is None or report.mode == "calls" else f", chunk {chunk}"
    fig.suptitle(f"{os.path.basename(report.model)}: {report.status.upper()}{per_chunk}", fontsize=12)

    for name, run in runs.items():
        if run.trace:
            style, color = _STYLES.get(name, ("-", None))
            ax_out.plot(range(len(run.trace)), run.trace, style, color=color, label=name, linewidth=1.4)
    ax_out.set_ylabel(f"{report.watched or 'output'}\n(mean per call)")
    ax_out.set_title("the persistent run against the re-initialised and stale variants", fontsize=10)
    ax_out.legend(loc="best", fontsize=8)

    floor = report.tol / 100 if report.tol > 0 else 1e-12
    drew = False
    for name, run in runs.items():
        if name == "persistent" or not run.per_call:
            continue
        style, color = _STYLES.get(name, ("-", None))
        values = [max(d, floor) if math.isfinite(d) else float("nan") for d in run.per_call]
        ax_diff.plot(range(len(values)), values, style, color=color, label=name, linewidth=1.4)
        drew = True
    ax_diff.axhline(report.tol, color="grey", linewidth=0.8, label=f"tolerance {report.tol:g}")
    ax_diff.set_yscale("log")
    ax_diff.set_ylabel("max |diff| from\npersistent")
    ax_diff.legend(loc="best", fontsize=8)
    if not drew:
        ax_diff.text(0.5, 0.5, "no broken variant was run", transform=ax_diff.transAxes, ha="center", va="center")

    for slot, health in report.health.items():
        ax_norm.plot(range(len(health.norm)), health.norm, label=f"{slot} ({health.trend})", linewidth=1.4)
    ax_norm.set_ylabel("state L2 norm")
    ax_norm.set_xlabel("call")
    if report.health:
        ax_norm.legend(loc="best", fontsize=8)
    else:
        ax_norm.text(0.5, 0.5, "no state", transform=ax_norm.transAxes, ha="center", va="center")

    if path is not None:
        from rnnir.util.writing import write_file  # atomic, and never over a device, FIFO or hard-linked file

        fmt = os.path.splitext(os.fspath(path))[1][1:].lower() or None
        try:
            write_file(path, lambda fh: fig.savefig(fh, format=fmt, dpi=110), what="--plot", error=PlotError)
        except PlotError:
            plt.close(fig)
            raise
        except (OSError, ValueError) as exc:  # a missing folder, an unknown suffix
            plt.close(fig)
            raise PlotError(f"{os.fspath(path)}: cannot write the plot: {exc}") from None
        plt.close(fig)  # no pyplot state left behind by a CLI or a loop of reports
    return fig
