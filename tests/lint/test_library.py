"""``rnnir.lint`` is a library under the command line: it never imports ``rnnir.cli*``, its settings are typed
and keyword-only, the old import paths still work, and its default worker pool does not fork a process that
has other threads (a forked child can wait forever on a lock a thread held at the fork)."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rnnir
from rnnir import cli, lint
from rnnir.lint import zoo
from rnnir.lint.config import Config
from rnnir.lint.settings import Overrides, SettingsError, resolve

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "sd002_hc_swap.onnx"  # exactly one finding, SD002 (its .expected.json)


# -- no import of the command line ------------------------------------------------------------


def imported_modules(path: Path, package: str) -> set[str]:
    """Every module ``path`` imports, at any depth (function bodies and ``TYPE_CHECKING`` blocks too), absolute;
    ``from X import name`` counts ``X.name`` as well, since ``name`` may be a module (``from rnnir import cli``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def cli_imports(path: Path, package: str) -> list[str]:
    return sorted(m for m in imported_modules(path, package) if m == "rnnir.cli" or m.startswith(("rnnir.cli.", "rnnir.cli_")))


LIBRARY = [(p, "rnnir.lint") for p in sorted((REPO / "rnnir" / "lint").glob("*.py"))]
RENDERERS = [(p, "rnnir.render") for p in sorted((REPO / "rnnir" / "render").glob("*.py"))]
BELOW_THE_CLI = [*LIBRARY, *RENDERERS, *((p, "rnnir.deploy") for p in sorted((REPO / "rnnir" / "deploy").glob("*.py")) if p.name != "cli.py")]


@pytest.mark.parametrize(("path", "package"), BELOW_THE_CLI, ids=[f"{p.parent.name}/{p.name}" for p, _ in BELOW_THE_CLI])
def test_the_lint_library_renderers_and_deploy_import_nothing_from_the_command_line(path, package):
    # rnnir/cli/deploy.py is the temporary shim of rnnir.cli.deploy
    assert cli_imports(path, package) == []


@pytest.mark.parametrize(("path", "package"), LIBRARY, ids=[p.name for p, _ in LIBRARY])
def test_the_lint_library_imports_no_renderer(path, package):
    # the renderers read lint results (rnnir.lint.results); lint itself never formats output
    found = imported_modules(path, package)
    assert sorted(m for m in found if m == "rnnir.render" or m.startswith("rnnir.render.")) == []


def test_the_import_check_sees_every_spelling(tmp_path):
    """Near-miss for the test above: each way of importing the command line is caught, a look-alike name is not."""
    source = tmp_path / "m.py"
    source.write_text(
        textwrap.dedent(
            """
            from ..cli import LintJob
            def f():
                from .. import cli_run
                import rnnir.cli_fix
                from rnnir import cli
                from ..client import x
            """
        )
    )
    assert cli_imports(source, "rnnir.lint") == ["rnnir.cli", "rnnir.cli.LintJob", "rnnir.cli_fix", "rnnir.cli_run"]
    assert cli_imports(REPO / "rnnir" / "cli" / "run.py", "rnnir.cli") != []  # a command module does import the CLI


# -- the old paths and the typed pieces ---------------------------------------------------------


def test_old_import_paths_name_the_library_objects():
    assert cli.LintJob is lint.LintJob and cli.lint_one is lint.lint_one and cli.collect_models is lint.collect_models
    assert cli.Target is lint.Target and cli.Settings is lint.Settings and cli.pairs_declared_in is lint.pairs_declared_in
    assert rnnir.lint_many is zoo.lint_many


def test_a_lint_job_and_settings_are_keyword_only():
    with pytest.raises(TypeError):
        lint.LintJob(str(SAMPLE))  # type: ignore[misc]
    with pytest.raises(TypeError):
        Overrides(("SD",))  # type: ignore[misc]
    result = lint.lint_one(lint.LintJob(path=str(SAMPLE)))
    assert [d.code for d in result.diagnostics] == ["SD002"]
    assert lint.lint_one(lint.LintJob(path=str(SAMPLE), ignore=("SD002",))).diagnostics == []


def test_settings_precedence_as_a_library():
    configured = Config(select=("SD",), ignore=("SD002",), entry="constant", strict=True)
    # nothing on top: the configuration as it is
    s = resolve(Overrides(), configured)
    assert (s.select, s.ignore, s.entry, s.exit, s.strict) == (("SD",), ("SD002",), "constant", "fanout", True)
    # a select on top drops the configured ignore (Ruff's rule); an ignore on top replaces it
    assert resolve(Overrides(select=("OR",)), configured).ignore == ()
    assert resolve(Overrides(ignore=("SD006,wrong-slot",)), configured).ignore == ("SD006", "SD002")
    assert resolve(Overrides(extend_select=("OR001",)), configured).select == ("SD", "OR001")
    assert resolve(Overrides(select=("ALL",)), configured).select is None
    declared = resolve(Overrides(pairs=("h0=hn",)), Config(pairs={"a": "b"}, path=Path("pyproject.toml")))
    assert (declared.pairs, declared.pairs_origin) == ({"h0": "hn"}, None)  # --pair replaces the configured pairs
    assert resolve(Overrides(), Config(pairs={"a": "b"}, path=Path("pyproject.toml"))).pairs_origin == "pyproject.toml: [tool.rnnir] pairs"
    with pytest.raises(SettingsError, match="names no rule code"):
        resolve(Overrides(select=(",",)), configured)


def test_an_unknown_code_is_a_settings_error_and_the_cli_says_it_in_one_line(capsys):
    with pytest.raises(SettingsError, match="--select: unknown rule code"):
        lint.resolve_checked(Overrides(select=("ZZ9",)), Config(), ["SD002"])
    assert cli.main(["lint", "--no-config", str(SAMPLE), "--select", "ZZ9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rnnir: error: --select: unknown rule code") and err.count("\n") == 1


def test_run_jobs_reports_a_lost_task_as_that_models_error():
    from concurrent.futures import Executor, Future

    class LosesTheSecond(Executor):
        def __init__(self) -> None:
            self.n = 0

        def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
            self.n += 1
            future: Future = Future()
            if self.n == 2:
                future.set_exception(ConnectionError("scheduler gone"))
            else:
                future.set_result(fn(*args, **kwargs))
            return future

    jobs = [lint.LintJob(path=str(SAMPLE)), lint.LintJob(path="b.onnx"), lint.LintJob(path=str(SAMPLE))]
    seen: list[str] = []
    results = lint.run_jobs(jobs, LosesTheSecond(), done=seen.append)
    assert seen == [j.path for j in jobs]
    assert [r.error is None for r in results] == [True, False, True]
    assert results[1].error == {"type": "InternalError", "message": "the executor lost this model's task: ConnectionError: scheduler gone"}


# -- no fork from a threaded process -----------------------------------------------------------

# A thread holds a lock, and a fork handler makes a forked child take it: what a child of a real threaded caller
# meets when onnxruntime's pool or a batcher thread held an allocator or I/O lock at the fork.  The worker
# started by fork waits forever; one started by forkserver never copies that lock.
HOLDER = """
import os, sys, threading, time
import rnnir
held, release = threading.Lock(), threading.Event()
def hold():
    with held:
        release.wait()
threading.Thread(target=hold, daemon=True).start()
while not held.locked():
    time.sleep(0.01)
os.register_at_fork(after_in_child=held.acquire)
models = sys.argv[1:]  # two files: two jobs, so two workers
{call}
print(sorted(d.code for r in results for d in r.diagnostics))
release.set()
"""


def run_holder(call: str, timeout: float, tmp_path: Path) -> subprocess.CompletedProcess[str] | None:
    """Run HOLDER with ``call`` on two copies of SAMPLE; None when it did not finish in ``timeout`` (its whole
    process group is killed)."""
    copy = tmp_path / "copy.onnx"
    copy.write_bytes(SAMPLE.read_bytes())
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(call=call), str(SAMPLE), str(copy)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the stuck workers too
        proc.communicate()
        return None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_lint_many_from_a_threaded_process_does_not_fork_its_workers(tmp_path):
    done = run_holder("results = rnnir.lint_many(models, max_workers=2)", 240, tmp_path)
    assert done is not None, "lint_many's workers hung: forked from a process whose other thread held a lock"
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['SD002', 'SD002']"


@pytest.mark.skipif(sys.platform != "linux", reason="fork is the default start method only on Linux (before Python 3.14)")
def test_a_forked_pool_in_the_same_process_hangs(tmp_path):
    """Near-miss: the same process with a fork-started pool does hang, so the test above can fail."""
    import multiprocessing

    if multiprocessing.get_all_start_methods()[0] != "fork":
        pytest.skip("this Python does not fork by default")
    call = "from concurrent.futures import ProcessPoolExecutor\nwith ProcessPoolExecutor(2) as pool:\n    results = rnnir.lint_many(models, executor=pool)"
    assert run_holder(call, 20, tmp_path) is None


def test_the_pool_forks_only_a_single_threaded_process():
    code = (
        "import threading; from rnnir.lint.executor import pool_context\n"
        "print(pool_context())\n"
        "e = threading.Event(); t = threading.Thread(target=e.wait); t.start()\n"
        "c = pool_context(); print(c.get_start_method() if c else None); e.set(); t.join()\n"
        "import onnxruntime\n"
        "c = pool_context(); print(c.get_start_method() if c else None)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    if sys.platform == "linux" and sys.version_info < (3, 14):
        assert done.stdout.split() == ["None", "forkserver", "forkserver"]
    else:
        assert done.stdout.split()[0] == "None"
