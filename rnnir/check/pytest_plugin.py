"""pytest plugin (registered as ``rnnir.pytest_plugin``, through the ``pytest11`` entry point
(:mod:`rnnir.check.pytest_entry`) or a conftest's ``pytest_plugins``): multi-call assertions in two lines.

    def test_vad_keeps_its_state(stateful):
        stateful("model.onnx").assert_persistence({"x": stream})

    def test_vad_recovers(stateful):
        stateful("model.onnx", context={"input": 64}).assert_recovers(chunks, drop=40, reconnect=100, within=200, tol=0.05)

The ``stateful`` fixture returns a factory: ``stateful(model, **session_options)``
gives a :class:`StatefulModel` around a :class:`~rnnir.runtime.StatefulSession`
(relative paths are tried against the working directory, then the test file's
folder).  Its assertions fail with the rendered multi-call report, so the
failure says which variant diverged at which call.  onnxruntime is imported
only when the fixture is used.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

if TYPE_CHECKING:
    from rnnir.check.multicall import MulticallReport
    from rnnir.check.streaming import StreamingReport

__all__ = ["StatefulModel", "stateful"]


class StatefulModel:
    """A model under test: its session, and assertions about its behaviour across calls."""

    def __init__(self, model: Any, **session_kwargs: Any) -> None:
        from rnnir.runtime.session import StatefulSession

        self.session = model if isinstance(model, StatefulSession) else StatefulSession(model, **session_kwargs)

    def check(self, stream: Any = None, chunk_sizes: Sequence[int] = (1, 7, 64), **kwargs: Any) -> MulticallReport:
        """The :class:`~rnnir.testing.MulticallReport` of ``stream`` (no assertion)."""
        from rnnir.check.multicall import check_multicall

        return check_multicall(self.session, stream, chunk_sizes, **kwargs)

    def assert_persistence(
        self, stream: Any = None, chunk_sizes: Sequence[int] = (1, 7, 64), *, allow_inconclusive: bool = False, **kwargs: Any
    ) -> MulticallReport:
        """Chunked calls with persistence equal one call over the whole stream (when the model can take it),
        and the stream is able to show a lost state.  Fails with the report otherwise; returns it when it passes.

        A stream that cannot reveal a persistence bug (silence, zeros) fails too, unless ``allow_inconclusive``.
        """
        from rnnir.check.multicall import report_to_text

        report = self.check(stream, chunk_sizes, **kwargs)
        if report.status == "pass" or (allow_inconclusive and report.status == "inconclusive"):
            return report
        pytest.fail("multi-call check failed:\n" + report_to_text(report), pytrace=False)

    def assert_calls(
        self,
        calls: Sequence[Mapping[str, Any]],
        expected: Sequence[Mapping[str, Any]],
        *,
        atol: float = 1e-5,
        reset: bool = True,
    ) -> list[dict[str, np.ndarray]]:
        """Run ``calls`` one after the other (state kept) and compare each call's outputs with ``expected``
        (a dict per call, naming only the outputs to check).  Returns the outputs."""
        if len(calls) != len(expected):
            raise ValueError(f"{len(calls)} calls but {len(expected)} expected results")
        if reset:
            self.session.reset()
        outs: list[dict[str, np.ndarray]] = []
        for k, (feed, want) in enumerate(zip(calls, expected)):
            got = self.session.run_dict(feed)
            outs.append(got)
            for name, value in want.items():
                if name not in got:
                    pytest.fail(f"call {k}: the model has no output {name!r} (outputs: {sorted(got)})", pytrace=False)
                ref = np.asarray(value)
                diff = np.abs(np.asarray(got[name], dtype=np.float64) - ref.astype(np.float64))
                if got[name].shape != ref.shape or not (diff <= atol).all():
                    worst = float(diff.max()) if diff.size and got[name].shape == ref.shape else float("inf")
                    pytest.fail(
                        f"call {k}: output {name!r} differs from the expected value (max |diff| {worst:.3g} > {atol:g}; "
                        f"got shape {got[name].shape}, expected {ref.shape})\n  got      {np.ravel(got[name])[:8]}\n"
                        f"  expected {ref.ravel()[:8]}",
                        pytrace=False,
                    )
        return outs

    def streaming(self, stream: Any = None, **kwargs: Any) -> StreamingReport:
        """The :class:`~rnnir.streaming.StreamingReport` of ``stream`` (no assertion): ``drop=``, ``reconnect=``,
        ``burst=(k, n)``, ``long=``, ``tol=`` as for :func:`rnnir.streaming.check_streaming`."""
        from rnnir.check.streaming import check_streaming

        return check_streaming(self.session, stream, **kwargs)

    def assert_streaming(self, stream: Any = None, **kwargs: Any) -> StreamingReport:
        """Every requested deployment check passes (recovers within the run, state finite, bounded over
        ``long=``).  Fails with the rendered report otherwise; returns it when it passes."""
        from rnnir.check.streaming import streaming_to_text

        report = self.streaming(stream, **kwargs)
        if not report.ok:
            pytest.fail("streaming check failed:\n" + streaming_to_text(report), pytrace=False)
        return report

    def assert_recovers(self, stream: Any = None, *, within: int, **kwargs: Any) -> StreamingReport:
        """Every requested perturbation (``drop=``, ``reconnect=``, ``burst=``) is healed within ``within`` calls."""
        from rnnir.check.streaming import streaming_to_text

        report = self.assert_streaming(stream, **kwargs)
        slow = [c for c in report.checks if c.recovery is None or c.recovery > within]
        if slow:
            pytest.fail(
                f"recovery takes more than {within} calls:\n" + streaming_to_text(report), pytrace=False
            )
        return report

    def run(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return self.session.run_dict(feeds)

    def reset(self) -> None:
        self.session.reset()

    @property
    def state(self) -> dict[str, np.ndarray]:
        return self.session.state


def _resolve(model: Any, test_dir: Path | None) -> Any:
    if isinstance(model, (str, os.PathLike)):
        p = Path(model)
        if not p.is_absolute() and not p.exists() and test_dir is not None and (test_dir / p).exists():
            return test_dir / p
    return model


@pytest.fixture
def stateful(request: pytest.FixtureRequest) -> Callable[..., StatefulModel]:
    """``stateful(model, **StatefulSession options)`` -> :class:`StatefulModel`."""
    test_path = getattr(request, "path", None) or Path(str(request.fspath))  # type: ignore[attr-defined]  # pytest < 7 has only fspath
    test_dir = Path(test_path).parent

    def make(model: Any, **session_kwargs: Any) -> StatefulModel:
        return StatefulModel(_resolve(model, test_dir), **session_kwargs)

    return make
