"""The small things a newcomer tripped over (issue 23), one behaviour per test.

``explain`` starts with the rule's code, name and severity and imports no model machinery; a missing model is
reported once; ``run`` prints streaming verdicts only for streaming checks that were asked for; ``--jobs 0`` is
one worker per CPU; rule names are accepted wherever codes are; ``lint --fix`` says which files it cannot fix;
``show -o`` says what it wrote; a bad ``pairs`` entry names its file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rnnir import cli
from rnnir.cli import lint as cli_lint

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"


def run_python(code: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter (so ``sys.modules`` starts empty), with this checkout first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("RNNIR_DEBUG", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


# -- rnnir explain ------------------------------------------------------------------------------


@pytest.mark.parametrize("given", ["SD002", "wrong-slot"])
def test_explain_starts_with_code_name_and_severity(capsys, given):
    assert cli.main(["explain", given]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "SD002 wrong-slot (error)"  # the catalogue's code, slug and severity (`rnnir rules` lists them)


def test_explain_heading_gives_an_info_rules_severity(capsys):
    assert cli.main(["explain", "unverified-state"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "SD009 unverified-state (info)"


@pytest.mark.parametrize("given", ["SD002", "wrong-slot"])
def test_explain_imports_neither_onnx_nor_numpy(given):
    done = run_python(
        "import sys\n"
        "from rnnir import cli\n"
        f"code = cli.main(['explain', {given!r}])\n"
        "heavy = sorted(m for m in ('onnx', 'onnxruntime', 'numpy') if m in sys.modules)\n"
        "print('HEAVY', heavy, code)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "HEAVY [] 0"
    assert "Fix (safe: `rnnir lint --fix`)" in done.stdout  # the fix section still comes (from the fix table, not the fixer)


# -- a model that cannot be read is reported once -----------------------------------------------


def test_missing_model_is_reported_once(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lint", "--no-config", "missing.onnx"]) == 2
    out, err = capsys.readouterr()
    assert (out + err).count("no such file") == 1, out + err


@pytest.mark.parametrize("flags", [["--format", "json"], ["--format", "sarif"], ["-o", "report.txt"], ["--quiet"], ["--statistics"]])
def test_missing_model_goes_to_stderr_when_the_report_does_not_show_it(tmp_path, monkeypatch, capsys, flags):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lint", "--no-config", "missing.onnx", *flags]) == 2
    out, err = capsys.readouterr()
    assert err.count("rnnir: error: missing.onnx: no such file") == 1
    if flags[0] != "--format":  # machine formats carry it in the document as well
        assert "no such file" not in out


# -- rnnir run: streaming verdicts only for streaming checks ------------------------------------


def run_text(capsys, *argv: str) -> tuple[int, str]:
    code = cli.main(["run", "--no-config", *argv])
    return code, capsys.readouterr().out


def test_run_without_a_streaming_flag_prints_no_streaming_verdict(capsys):
    code, out = run_text(capsys, str(SAMPLES / "gru_fanout.onnx"), "--calls", "8")
    assert code == 0 and ": PASS: persistence holds" in out
    assert "streaming checks" not in out  # no drop, restart, burst, long run or pool was asked for
    assert "gru_fanout.onnx: measured over 8 calls\n  latency per call: " in out  # the measurements stay, without a verdict


def test_run_failing_persistence_prints_no_streaming_pass(capsys):
    # sd002_hc_swap.onnx writes c into h's slot: the multi-call check fails; nothing streaming was asked for
    code, out = run_text(capsys, str(SAMPLES / "sd002_hc_swap.onnx"), "--calls", "8", "-q")
    assert code == 1 and ": FAIL: " in out
    assert "PASS" not in out and "streaming" not in out


def test_run_failing_persistence_with_a_passing_drop_check_does_not_say_pass(capsys):
    code, out = run_text(capsys, str(SAMPLES / "sd002_hc_swap.onnx"), "--calls", "8", "--drop", "2")
    assert code == 1 and ": FAIL: " in out
    assert "PASS" not in out
    assert "streaming checks found no failure of their own over 8 calls (tolerance 0.001); the verdict above (FAIL) stands" in out
    assert "chunk 2 dropped (skip): back within 0.001" in out  # the check's own result is still shown


def test_run_passing_persistence_with_a_drop_check_says_streaming_pass(capsys):
    code, out = run_text(capsys, str(SAMPLES / "gru_fanout.onnx"), "--calls", "8", "--drop", "2")
    assert code == 0
    assert "gru_fanout.onnx: streaming checks PASS over 8 calls (tolerance 0.001)" in out


# -- --jobs 0: one worker per CPU, for lint and cost --------------------------------------------


class InlinePool:
    """A stand-in for ProcessPoolExecutor that records its size and runs each job at once (no processes)."""

    sizes: list[int] = []

    def __init__(self, max_workers: int, mp_context: object = None) -> None:  # mp_context: rnnir.lint.executor.process_pool
        InlinePool.sizes.append(max_workers)

    def __enter__(self) -> InlinePool:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn, *args):
        from concurrent.futures import Future

        future: Future = Future()
        future.set_result(fn(*args))
        return future


@pytest.mark.parametrize("command", ["lint", "cost"])
def test_jobs_0_is_one_worker_per_cpu(tmp_path, monkeypatch, capsys, command):
    for k in range(5):
        (tmp_path / f"m{k}.onnx").write_bytes((SAMPLES / "gru_fanout.onnx").read_bytes())
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    monkeypatch.setattr(cli_lint, "ProcessPoolExecutor", InlinePool, raising=False)
    InlinePool.sizes = []
    assert cli.main([command, "--no-config", str(tmp_path), "--jobs", "0", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert InlinePool.sizes == [3] and out.count('"path"') >= 5
    assert err == ""  # 0 asks for "as many as there are CPUs": nothing was cut down, nothing to say


def test_jobs_0_with_one_file_lints_it_in_process(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli_lint, "ProcessPoolExecutor", InlinePool, raising=False)
    InlinePool.sizes = []
    assert cli.main(["lint", "--no-config", str(SAMPLES / "gru_fanout.onnx"), "--jobs", "0"]) == 0
    assert InlinePool.sizes == []


def test_jobs_help_says_what_0_means_for_lint_and_cost(capsys):
    for command in ("lint", "cost"):
        with pytest.raises(SystemExit):
            cli.build_parser().parse_args([command, "--help"])
        assert "0: one per CPU" in " ".join(capsys.readouterr().out.split())


# -- rule names wherever rule codes are taken ---------------------------------------------------
# sd002_hc_swap.onnx has exactly one finding, SD002 (samples/sd002_hc_swap.expected.json)


def lint_codes(capsys, *argv: str, cwd_args: tuple[str, ...] = ("--no-config",)) -> tuple[int, list[str], str]:
    import json

    code = cli.main(["lint", *cwd_args, str(SAMPLES / "sd002_hc_swap.onnx"), "--format", "json", *argv])
    out, err = capsys.readouterr()
    return code, ([d["code"] for f in json.loads(out)["files"] for d in f["diagnostics"]] if out else []), err


@pytest.mark.parametrize("select", ["wrong-slot", "Wrong_Slot", "SD002", "sd", "wrong-slot,not-final-state"])
def test_select_takes_a_rule_name_as_well_as_a_code(capsys, select):
    code, codes, err = lint_codes(capsys, "--select", select)
    assert (code, codes, err) == (1, ["SD002"], "")


def test_select_of_another_rules_name_leaves_the_finding_out(capsys):
    code, codes, _ = lint_codes(capsys, "--select", "not-final-state")  # near miss: SD003's name
    assert (code, codes) == (0, [])


def test_ignore_and_extend_select_take_rule_names(capsys):
    assert lint_codes(capsys, "--ignore", "wrong-slot")[:2] == (0, [])
    assert lint_codes(capsys, "--select", "SD003", "--extend-select", "wrong-slot")[:2] == (1, ["SD002"])


@pytest.mark.parametrize("flag", ["--select", "--ignore", "--extend-select"])
def test_a_misspelt_rule_name_is_refused_as_typed(capsys, flag):
    code = cli.main(["lint", "--no-config", str(SAMPLES / "sd002_hc_swap.onnx"), flag, "wrong-slots"])
    err = capsys.readouterr().err
    assert code == 2 and f"{flag}: unknown rule code, prefix or name 'wrong-slots'" in err


def test_configuration_select_ignore_and_per_file_ignores_take_rule_names(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "m.onnx"
    model.write_bytes((SAMPLES / "sd002_hc_swap.onnx").read_bytes())
    for body, expected in [
        ('select = ["wrong-slot"]', (1, ["SD002"])),
        ('ignore = ["wrong-slot"]', (0, [])),
        ('[tool.rnnir.per-file-ignores]\n"m.onnx" = ["wrong-slot"]', (0, [])),
        ('[tool.rnnir.per-file-ignores]\n"other.onnx" = ["wrong-slot"]', (1, ["SD002"])),  # near miss: another file
    ]:
        (tmp_path / "pyproject.toml").write_text(f"[tool.rnnir]\n{body}\n")
        import json

        code = cli.main(["lint", "m.onnx", "--format", "json"])
        out, err = capsys.readouterr()
        assert (code, [d["code"] for d in json.loads(out)["files"][0]["diagnostics"]]) == expected, (body, err)


def test_configuration_with_a_misspelt_rule_name_names_the_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.onnx").write_bytes((SAMPLES / "sd002_hc_swap.onnx").read_bytes())
    (tmp_path / "pyproject.toml").write_text('[tool.rnnir]\nignore = ["wrong-slots"]\n')
    assert cli.main(["lint", "m.onnx"]) == 2
    err = capsys.readouterr().err
    assert "pyproject.toml: ignore: unknown rule code, prefix or name 'wrong-slots'" in err


def test_library_selection_takes_rule_names():
    import rnnir
    from rnnir import passes

    program = rnnir.load(str(SAMPLES / "sd002_hc_swap.onnx"))
    assert [d.code for d in passes.run(program, select=["wrong-slot"])] == ["SD002"]
    assert passes.run(program, ignore=["wrong-slot"]) == []
    assert [r.error for r in rnnir.lint_many([str(SAMPLES / "sd002_hc_swap.onnx")], ignore=["wrong-slot"], max_workers=1)] == [None]


def test_fix_select_and_suppress_take_rule_names(tmp_path, capsys):
    out = tmp_path / "fixed.onnx"
    assert cli.main(["fix", "--no-config", str(SAMPLES / "sd002_hc_swap.onnx"), "--select", "wrong-slot", "-o", str(out)]) == 0
    assert lint_codes_of(capsys, out) == []  # the SD002 fix was applied
    sup = tmp_path / "suppressed.onnx"
    assert cli.main(["fix", str(SAMPLES / "sd002_hc_swap.onnx"), "--suppress", "wrong-slot", "-o", str(sup)]) == 0
    assert "suppresses SD002" in capsys.readouterr().out  # stored as the code: the model's list names exact codes
    assert lint_codes_of(capsys, sup) == []


def lint_codes_of(capsys, path: Path) -> list[str]:
    import json

    capsys.readouterr()  # what came before
    cli.main(["lint", "--no-config", str(path), "--format", "json"])
    return [d["code"] for f in json.loads(capsys.readouterr().out)["files"] for d in f["diagnostics"]]


# -- lint --fix says which files it does not fix -------------------------------------------------


@pytest.mark.parametrize("mode", ["--fix", "--diff"])
def test_lint_fix_names_an_ir_text_file_it_does_not_fix(tmp_path, monkeypatch, capsys, mode):
    monkeypatch.chdir(tmp_path)
    ir = tmp_path / "chain.rnnir"
    ir.write_bytes((SAMPLES / "al001_chain.rnnir").read_bytes())  # one AL001 finding, fixable in ONNX metadata only
    before = ir.read_bytes()
    code = cli.main(["lint", "--no-config", "chain.rnnir", mode])
    out, err = capsys.readouterr()
    assert ir.read_bytes() == before
    assert "rnnir: warning: chain.rnnir: not fixed: --fix edits ONNX models, and this is rnnir IR text" in err
    # the finding is still there: --fix reports it (exit 1); --diff has nothing to show (exit 0, as with no fix)
    assert code == (1 if mode == "--fix" else 0)
    assert ("AL001" in out) == (mode == "--fix")


def test_lint_fix_of_an_onnx_model_says_nothing_about_ir_text(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.onnx").write_bytes((SAMPLES / "sd002_hc_swap.onnx").read_bytes())
    assert cli.main(["lint", "--no-config", "m.onnx", "--fix"]) == 0
    err = capsys.readouterr().err
    assert "not fixed" not in err and "m.onnx: fixed: SD002" in err


# -- show -o says what it wrote -------------------------------------------------------------------


@pytest.fixture
def fake_dot(tmp_path, monkeypatch) -> Path:
    """A `dot` on PATH that echoes the DOT text it is given as the "image" (Graphviz itself may not be installed):
    rnnir runs ``dot -Tsvg``, reads the image from its stdout and writes the file itself."""
    if os.name == "nt":
        pytest.skip("the stand-in dot is a shell script")
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "dot"
    script.write_text('#!/bin/sh\n# dot -Tsvg: the image on stdout\ncat\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return script


def test_show_image_says_what_it_wrote(tmp_path, capsys, fake_dot):
    target = tmp_path / "x.svg"
    assert cli.main(["show", "--no-config", str(SAMPLES / "lstm_fanout.onnx"), "-o", str(target)]) == 0
    out, err = capsys.readouterr()
    assert target.read_text().startswith("digraph ")  # what the stand-in dot was given
    assert out == "" and err == f"rnnir: wrote {target}: the state's journey, drawn by Graphviz\n"


@pytest.mark.parametrize("suffix,fmt", [(".dot", "dot"), (".mmd", "mermaid"), (".json", "json"), (".txt", "text")])
def test_show_text_file_says_what_it_wrote(tmp_path, capsys, suffix, fmt):
    target = tmp_path / f"picture{suffix}"
    assert cli.main(["show", "--no-config", str(SAMPLES / "lstm_fanout.onnx"), "-o", str(target), "--full"]) == 0
    out, err = capsys.readouterr()
    what = "the state pairs" if fmt == "json" else "the whole program"
    assert out == "" and err == f"rnnir: wrote {target}: {what} as {fmt}\n" and target.stat().st_size > 0


def test_show_to_stdout_says_nothing_on_stderr(capsys):
    assert cli.main(["show", "--no-config", str(SAMPLES / "lstm_fanout.onnx")]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("state journey of @") and err == ""


# -- a bad pairs entry in pyproject.toml names the file -------------------------------------------


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """models/gru.onnx (state h0 -> hn) under a pyproject.toml whose pairs name an input the model does not have."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "gru.onnx").write_bytes((SAMPLES / "gru_fanout.onnx").read_bytes())
    (tmp_path / "models" / "pyproject.toml").write_text('[tool.rnnir]\npairs = { nope = "hn" }\n')
    return tmp_path


WHERE = f"(pairs declared in {os.path.join('models', 'pyproject.toml')}: [tool.rnnir] pairs)"


@pytest.mark.parametrize(
    "argv",
    [["lint", "models/gru.onnx", "-q"], ["show", "models/gru.onnx"], ["run", "models/gru.onnx", "--calls", "4"], ["fix", "models/gru.onnx", "--diff"]],
    ids=["lint", "show", "run", "fix"],
)
def test_configured_pair_the_model_lacks_names_the_file_and_key(project, capsys, argv):
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "declared state input 'nope' is not a graph input" in err and err.rstrip().endswith(WHERE), err


def test_configured_pair_error_in_the_text_report_names_the_file(project, capsys):
    assert cli.main(["lint", "models/gru.onnx"]) == 2
    assert WHERE in capsys.readouterr().out


def test_pair_flag_the_model_lacks_names_no_file(project, capsys):
    # near miss: the same pair typed as --pair replaces the configured one, and the user knows where it came from
    assert cli.main(["lint", "models/gru.onnx", "--pair", "nope=hn", "-q"]) == 2
    err = capsys.readouterr().err
    assert "declared state input 'nope' is not a graph input" in err and "pyproject.toml" not in err


def test_configured_pairs_the_model_has_lint_clean(project, capsys):
    (project / "models" / "pyproject.toml").write_text('[tool.rnnir]\npairs = { h0 = "hn" }\n')
    assert cli.main(["lint", "models/gru.onnx"]) == 0


def test_lint_fix_reports_a_configured_pair_the_model_lacks_once(project, capsys):
    assert cli.main(["lint", "models/gru.onnx", "--fix"]) == 2
    out, err = capsys.readouterr()
    assert (out + err).count("'nope'") == 1 and "cannot fix" not in err


def test_a_pairs_entry_that_is_not_a_string_names_the_file_and_the_entry(project, capsys):
    (project / "models" / "pyproject.toml").write_text('[tool.rnnir]\npairs = { h0 = 3 }\n')
    assert cli.main(["lint", "models/gru.onnx"]) == 2
    err = capsys.readouterr().err
    assert "pyproject.toml: [tool.rnnir] pairs entry h0 = 3: the output must be a string" in err


# -- StatefulSession refuses a feed of another dtype, as onnxruntime does ---------------------------
# gru_fanout.onnx: x float32 [T, 1, 3], state h0 float32 [1, 1, 4] -> hn


def gru_x(dtype, steps: int = 4):
    import numpy as np

    return (np.arange(steps * 3).reshape(steps, 1, 3) / 10).astype(dtype)


@pytest.mark.parametrize("dtype", ["float64", "int64", "float16"])
def test_session_refuses_a_feed_onnxruntime_refuses(dtype):
    import onnxruntime as ort

    from rnnir.runtime import FeedError, StatefulSession

    path = str(SAMPLES / "gru_fanout.onnx")
    x = gru_x(dtype)
    with pytest.raises(Exception, match="Unexpected input data type"):  # the oracle: onnxruntime's own answer
        ort.InferenceSession(path).run(None, {"x": x, "h0": gru_x("float32", 1)[..., :1].repeat(4, axis=2)})
    session = StatefulSession(path)
    with pytest.raises(FeedError) as caught:
        session.run({"x": x})
    message = str(caught.value)
    assert f"input 'x' takes float32, got a {dtype} array" in message and "cast_inputs=True" in message
    assert session.state["h0"].tolist() == [[[0.0] * 4]]  # nothing ran: the state is still the initial one


def test_session_refuses_an_explicit_state_of_another_dtype():
    import numpy as np

    from rnnir.runtime import FeedError, StatefulSession

    session = StatefulSession(str(SAMPLES / "gru_fanout.onnx"))
    with pytest.raises(FeedError, match="input 'h0' takes float32, got a float64 array"):
        session.run_dict({"x": gru_x("float32"), "h0": np.zeros((1, 1, 4))})


def test_session_with_cast_inputs_converts_and_matches_the_float32_feed():
    from rnnir.runtime import StatefulSession

    path = str(SAMPLES / "gru_fanout.onnx")
    cast = StatefulSession(path, cast_inputs=True)
    exact = StatefulSession(path)
    for _ in range(3):
        got = cast.run({"x": gru_x("float64")})["y"]
        want = exact.run({"x": gru_x("float32")})["y"]
        assert got.dtype.name == "float32" and got.tobytes() == want.tobytes()  # the same float32 feed, bit for bit
    assert cast.fork().cast_inputs  # a fork keeps the choice


def test_session_takes_a_list_as_onnxruntime_does():
    from rnnir.runtime import StatefulSession

    session = StatefulSession(str(SAMPLES / "gru_fanout.onnx"))
    out = session.run({"x": gru_x("float32").tolist()})  # a list has no dtype of its own: it takes the input's
    assert out["y"].dtype.name == "float32"


def test_session_with_context_refuses_another_dtype_before_joining_it():
    from rnnir.runtime import FeedError, StatefulSession

    session = StatefulSession(str(SAMPLES / "gru_fanout.onnx"), context={"x": 2})
    with pytest.raises(FeedError, match="input 'x' takes float32, got a float64 array"):
        session.run({"x": gru_x("float64")})
    assert StatefulSession(str(SAMPLES / "gru_fanout.onnx"), context={"x": 2}, cast_inputs=True).run({"x": gru_x("float64")})


def test_pool_refuses_another_dtype_unless_cast_inputs():
    from rnnir.runtime import FeedError
    from rnnir.serving.pool.pool import SessionPool

    pool = SessionPool(str(SAMPLES / "gru_fanout.onnx"))
    for sid in "ab":
        pool.open(sid)
    with pytest.raises(FeedError, match="input 'x' takes float32, got a float64 array"):
        pool.run({"a": {"x": gru_x("float64")}, "b": {"x": gru_x("float32")}})
    with pytest.raises(FeedError, match="input 'x' takes float32, got a float64 array"):
        pool.run_one("a", {"x": gru_x("float64")})
    cast = SessionPool(str(SAMPLES / "gru_fanout.onnx"), cast_inputs=True)
    exact = SessionPool(str(SAMPLES / "gru_fanout.onnx"))
    got = cast.run({"a": {"x": gru_x("float64")}, "b": {"x": gru_x("float64") * 2}}, open_missing=True)
    want = exact.run({"a": {"x": gru_x("float32")}, "b": {"x": (gru_x("float64") * 2).astype("float32")}}, open_missing=True)
    assert all(got[sid]["y"].tobytes() == want[sid]["y"].tobytes() for sid in "ab")


def test_pool_run_batch_refuses_another_dtype_unless_cast_inputs():
    import numpy as np

    from rnnir.runtime import FeedError
    from rnnir.serving.pool.pool import SessionPool
    from tests.support import streaming_models as sm

    model = sm.lstm_b()  # batch axis 1, open: the pool stacks streams into one call
    width = model.graph.input[0].type.tensor_type.shape.dim[2].dim_value
    stacked = np.linspace(-1, 1, 2 * width).reshape(1, 2, width)  # float64
    for cast in (False, True):
        pool = SessionPool(model, cast_inputs=cast)
        pool.run_batch(["a", "b"], {"x": stacked.astype(np.float32)}, open_missing=True)  # the first, probing, call
        for _ in range(2):  # the second tick may take the checked-signature shortcut: it must refuse too
            if cast:
                got = pool.run_batch(["a", "b"], {"x": stacked})["hn"]
                assert got.dtype.name == "float32"
            else:
                with pytest.raises(FeedError, match="input 'x' takes float32, got a float64 array"):
                    pool.run_batch(["a", "b"], {"x": stacked})


def test_check_multicall_converts_a_float64_stream_to_the_inputs_dtype():
    import numpy as np

    from rnnir.check.multicall.check import check_multicall

    stream = np.random.default_rng(0).standard_normal((48, 1, 3))  # numpy's default float64: data, not a feed
    as64 = check_multicall(str(SAMPLES / "gru_fanout.onnx"), {"x": stream}, chunk_sizes=[16])
    as32 = check_multicall(str(SAMPLES / "gru_fanout.onnx"), {"x": stream.astype(np.float32)}, chunk_sizes=[16])
    assert as64.status == as32.status == "pass"
    assert as64.variant("persistent", 16).trace == as32.variant("persistent", 16).trace


def test_run_feeds_a_float64_npy_file(tmp_path, capsys):
    import json

    import numpy as np

    np.save(tmp_path / "x.npy", np.random.default_rng(1).standard_normal((48, 1, 3)))  # float64
    code = cli.main(["run", "--no-config", str(SAMPLES / "gru_fanout.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--chunk", "16", "--format", "json"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "") and json.loads(out)["status"] == "pass"
