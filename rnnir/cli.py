"""The ``rnnir`` command line.

    rnnir lint PATH... [--format text|json|sarif|github] [--select SD,OR] [--ignore SD006]
                       [--pair h0=hn ...] [--lower-entry dynamic|constant] [--lower-exit fanout|chain|reuse-single-store]
                       [--cost] [--jobs N] [--output FILE] [--config pyproject.toml | --no-config] [--show-settings]
                       [--baseline FILE | --write-baseline FILE] [--add-noqa]
    rnnir show MODEL [--format text|dot|mermaid|json] [--full] [-o FILE.svg|.png|.pdf|.dot|.mmd]
    rnnir rules [--format text|json]
    rnnir explain CODE-OR-NAME          (SD002, or wrong-slot)
    rnnir cost PATH... [--format text|json] [--jobs N] [--output FILE]
    rnnir run MODEL [--calls 200] [--chunk 16] [--shape IN=D0,D1] [--value IN=X] [--input IN=FILE.npy]
                    [--audio [IN=]FILE.wav] [--context IN=N[:AXIS]] [-v] [-q]
                    [--drop K [--drop-mode skip|zero]] [--reconnect K] [--burst K:N [--burst-kind noise|silence]]
                    [--long N] [--streams N] [--recovery-tol X] [--max-slot-mb 256] [--format text|json] [--output FILE] [--plot run.png]
    rnnir deploy triton MODEL -o REPO/ | deploy openvino MODEL -o model.xml   (rnnir.deploy.cli)
    rnnir --version                     (python -m rnnir ... is the same command)

``show``, ``cost`` and ``run`` take the same ``--pair``/``--lower-entry``/``--lower-exit``/``--config``/
``--no-config`` options as ``lint`` (``--entry``/``--exit`` are the deprecated old spellings of the
lowering-policy options).  Each model's ``[tool.rnnir]`` is the nearest one above the model
(:class:`rnnir.config.ConfigFinder`).  ``cost`` is ``lint --cost`` without the rules: the cost table
(or the lint JSON document with empty ``diagnostics``), exit 0 or 2.

Exit codes (every command):

* 0 — done, and no error-level finding (warnings and infos do not fail a run);
* 1 — at least one error-level finding (``lint``), or multi-call persistence broken (``run``);
* 2 — the tool could not do its job: bad arguments or configuration, an unknown rule code, or a
  model that could not be read or analysed.  With several models, **2 wins over 1**: a CI job must
  not pass (or fail "normally") when part of what it was asked to check was never checked.  The
  other models are still linted and reported; the failed one appears in the output with its
  ``error``, and on stderr as ``rnnir: error: <file>: <message>`` unless the output is a text report on
  stdout that already shows it (``--quiet``, ``--statistics``, ``-o FILE`` and the other formats keep the line).

``lint --baseline FILE`` reports only findings FILE does not accept (:mod:`rnnir.baseline`), and
``--write-baseline FILE`` records them; suppressions stored in a model (``rnnir.noqa`` metadata) are
applied by the passes themselves (:mod:`rnnir.passes.suppression`).

``lint`` never imports onnxruntime (nor :mod:`rnnir.runtime` / :mod:`rnnir.testing`); only ``run``
does.  No traceback reaches the user unless ``RNNIR_DEBUG=1`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO

from . import __version__
from .config import ENTRY_POLICIES, EXIT_POLICIES, Config, ConfigError
from .errors import ModelError, RnnirError
from .lint.executor import process_pool, run_jobs
from .lint.jobs import REPORT_HINT as _REPORT_HINT
from .lint.jobs import LintJob, Target, collect_models, job_for, lint_one
from .lint.jobs import debug as _debug
from .lint.settings import (
    Overrides,
    Settings,
    SettingsError,
    check_selectors,
    config_finder,
    deprecation_notices,
    pairs_declared_in,
    resolve,
    resolve_checked,
    split_codes,
)
from .render import FORMATS, FileResult, LintResult, printable, render, render_cost_text, unicode_text

if TYPE_CHECKING:
    from .baseline import Baseline
    from .ir import Program
    from .zoo import Shard

# LintJob, Target, collect_models, lint_one, Settings and pairs_declared_in live in rnnir.lint; imported here,
# they keep their old paths (rnnir.cli.LintJob, ...) working
__all__ = ["LintJob", "Settings", "Target", "collect_models", "lint_one", "main", "pairs_declared_in"]


class UsageError(RnnirError):
    """The command line asks for something that cannot be done (unknown rule code, empty folder, ...)."""


def __getattr__(name: str) -> Any:
    if name == "ProcessPoolExecutor":  # multiprocessing costs a short lint run more than its own work: on demand
        from concurrent.futures import ProcessPoolExecutor

        return ProcessPoolExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _passes() -> ModuleType:
    """The analysis package, imported when first needed (tests may replace this function)."""
    from rnnir import passes

    return passes


# -- settings: pyproject.toml + flags (rnnir.lint.settings) ----------------------------------


def _settings(args: argparse.Namespace, config: Config | None = None) -> Settings:
    """The settings of one model: ``config`` (default: the one found for ``args.model``, for the commands
    that take one model) with the command-line flags on top."""
    overrides = Overrides.from_namespace(args)
    if config is None:
        model = getattr(args, "model", None)
        finder = config_finder(overrides)
        config = finder.for_model(model) if model else finder.fallback
        _print_deprecations([config])
    return resolve(overrides, config)


def _print_deprecations(configs: Sequence[Config]) -> None:
    for notice in deprecation_notices(configs):
        print(printable(f"rnnir: warning: {notice}"), file=sys.stderr)



class Progress:
    """``[3/10] path`` on a terminal's stderr, rewritten in place; silent when stderr is not a terminal."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = total
        self.enabled = total > 1 and _isatty(self.stream)
        self.done = 0

    def step(self, path: str) -> None:
        self.done += 1
        if self.enabled:
            self.stream.write(f"\r\x1b[K[{self.done}/{self.total}] {printable(path)}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _run_jobs(jobs: Sequence[LintJob], workers: int, progress: Progress) -> list[FileResult]:
    """Lint ``jobs`` serially or in ``workers`` processes (:func:`rnnir.lint.run_jobs`); results in ``jobs`` order."""
    if workers <= 1 or len(jobs) <= 1:
        return run_jobs(jobs, done=progress.step)
    pool_class = sys.modules[__name__].ProcessPoolExecutor  # through the module (see __getattr__), so tests can swap it
    with process_pool(min(workers, len(jobs)), pool_class) as pool:
        return run_jobs(jobs, pool, done=progress.step)



# -- commands ---------------------------------------------------------------------------------


def _emit(text: str, output: str | None, inputs: Sequence[str] = ()) -> None:
    """``text`` to stdout, or to ``output`` with :func:`rnnir.writing.write_file` (never over one of ``inputs``,
    never over a device or FIFO, atomically)."""
    if output:
        from .writing import write_file

        write_file(output, text, protect=inputs, error=UsageError)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _lint(args: argparse.Namespace, *, rules: bool, cost: bool) -> int:
    backend = _passes()
    codes = list(backend.RULES)
    overrides = Overrides.from_namespace(args)
    check_selectors(split_codes(overrides.extend_select), codes, "--extend-select")
    finder = config_finder(overrides)
    # the flags and the working directory's configuration are checked even when no model uses it, so a
    # typo in --select fails the same way whatever is linted (Ruff reads that file as its default too)
    by_config: dict[int, Settings] = {id(finder.fallback): resolve_checked(overrides, finder.fallback, codes)}

    targets = collect_models(args.paths)
    if getattr(args, "shard", None):
        targets = _shard(args.shard).of(targets)
    _refuse_output_over_a_model(args.output, targets)
    _refuse_output_over_a_model(getattr(args, "write_baseline", None), targets, "--write-baseline")
    baseline = _load_baseline(args)  # before the models: a missing baseline is the first thing to fix
    jobs: list[LintJob] = []
    for t in targets:
        if t.error is None:
            config = finder.for_model(t.path)
            settings = by_config.get(id(config))
            if settings is None:
                settings = by_config[id(config)] = resolve_checked(overrides, config, codes)
            jobs.append(job_for(t.path, settings, ignore=config.ignores_for(Path(t.path)), rules=rules, cost=cost))
    _print_deprecations([s.config for s in by_config.values()])
    if getattr(args, "show_settings", False):
        _emit(_settings_text(jobs), args.output)
        return 0
    fix_status = 0
    if getattr(args, "fix", False) or getattr(args, "diff", False):  # rnnir/cli_fix.py: rewrite (or diff) first, then lint what is left
        from .cli_fix import lint_fixes

        fix_status = lint_fixes(args, jobs)
        if args.diff:
            return fix_status
    workers = _workers(args.jobs, len(jobs))
    progress = Progress(len(jobs))
    try:
        linted = iter(_run_jobs(jobs, workers, progress))
    finally:
        progress.close()
    files = [FileResult(t.path, error=t.error) if t.error is not None else next(linted) for t in targets]

    result = LintResult(files=files, rules=backend.RULES, version=__version__, with_cost=cost, verbose=bool(getattr(args, "verbose", False)))
    result.quarantine()
    for f in files:
        for warning in f.warnings:
            print(printable(f"rnnir: warning: {f.path}: {warning}"), file=sys.stderr)
    # a text report on stdout already says why each failed model failed: the same words on stderr would say it twice
    report_says_it = args.format == "text" and not args.output and not any(
        getattr(args, flag, False) for flag in ("quiet", "statistics", "write_baseline", "add_noqa")
    )
    for f in result.failed if not report_says_it else ():
        print(printable(f"rnnir: error: {f.path}: {(f.error or {}).get('message')}"), file=sys.stderr)
    if getattr(args, "write_baseline", None):
        return _write_baseline(Path(args.write_baseline), result)
    if getattr(args, "add_noqa", False):
        from .cli_fix import add_noqa

        return max(add_noqa(result.files), 2 if result.failed else 0)
    stale_fails = baseline is not None and _apply_baseline(baseline, result, jobs, args) and getattr(args, "exit_non_zero_on_stale_baseline", False)
    if rules and args.format == "text" and (getattr(args, "quiet", False) or getattr(args, "statistics", False)):
        text = _statistics_text(result) if getattr(args, "statistics", False) else render(result, "text").splitlines()[-1] + "\n"
    elif rules:
        text = render(result, args.format)
    elif args.format == "json":
        text = render(result, "json")
    else:
        text = _cost_text(result)
    _emit(text, args.output)
    code = max(result.exit_code, fix_status, 1 if stale_fails else 0)
    return 0 if code == 1 and getattr(args, "exit_zero", False) else code


def _load_baseline(args: argparse.Namespace) -> Baseline | None:
    if not getattr(args, "baseline", None):
        if getattr(args, "exit_non_zero_on_stale_baseline", False):
            raise UsageError("--exit-non-zero-on-stale-baseline needs --baseline FILE")
        return None
    from .baseline import Baseline

    return Baseline.load(Path(args.baseline))


def _write_baseline(path: Path, result: LintResult) -> int:
    """``--write-baseline FILE``: record every finding of the run (exit 0; 2 when a model could not be analysed,
    since its findings are missing from the file)."""
    from .baseline import Baseline

    findings = [(f.path, d) for f in result.files if f.error is None for d in f.diagnostics]
    baseline = Baseline.of(path, findings)
    baseline.write()
    models = len({f.path for f in result.files if f.diagnostics})
    print(printable(f"rnnir: wrote {path}: {len(findings)} finding{'s' if len(findings) != 1 else ''} in {models} model{'s' if models != 1 else ''} accepted"), file=sys.stderr)
    return 2 if result.failed else 0


def _apply_baseline(baseline: Baseline, result: LintResult, jobs: Sequence[LintJob], args: argparse.Namespace) -> bool:
    """Drop the findings ``baseline`` accepts (counted per file as ``baselined``); say on stderr which entries
    matched nothing among the models and rules this run checked.  Returns whether any entry is stale."""
    from rnnir.passes import RULES
    from rnnir.passes.manager import selected_codes

    from .baseline import model_key

    linted = [f for f in result.files if f.error is None]
    accepted, left = baseline.apply([(f.path, d) for f in linted for d in f.diagnostics])
    verdicts = iter(accepted)
    for f in linted:
        keep = [d for d in f.diagnostics if not next(verdicts)]
        f.baselined += len(f.diagnostics) - len(keep)
        f.diagnostics = keep
    by_path = {j.path: j for j in jobs}
    checked = {model_key(f.path, baseline.root): selected_codes(RULES, by_path[f.path].select, by_path[f.path].ignore) for f in linted if f.path in by_path}
    stale = baseline.stale(left, lambda fp: fp.code in checked.get(fp.model, ()))
    result.baseline_stale = sum(n for _, n in stale)
    if stale:
        entries = "entry matches" if result.baseline_stale == 1 else "entries match"
        print(
            printable(f"rnnir: {baseline.path}: {result.baseline_stale} baseline {entries} no finding any more (fixed, or moved); --write-baseline drops them"),
            file=sys.stderr,
        )
        if getattr(args, "verbose", False):
            for fp, n in stale:
                print(printable(f"  stale: {fp.describe()}" + (f" (x{n})" if n > 1 else "")), file=sys.stderr)
    return bool(stale)


def _settings_text(jobs: Sequence[LintJob]) -> str:
    """``--show-settings``: per model, the configuration file that applies and the settings it resolves to."""
    lines: list[str] = []
    for job in jobs:
        lines.append(f"Resolved settings for: {job.path}")
        lines.append(f"Settings path: {job.config or '(none: defaults)'}")
        lines.append(f"select = {json.dumps(list(job.select)) if job.select is not None else 'ALL'}")
        lines.append(f"ignore = {json.dumps(list(job.ignore))}")
        pairs = "(found in the model)" if job.pairs is None else "{" + ", ".join(f"{k} = {json.dumps(v or '')}" for k, v in job.pairs.items()) + "}"
        lines.append(f"pairs = {pairs}")
        lines.append(f"lower-entry = {json.dumps(job.entry)}")
        lines.append(f"lower-exit = {json.dumps(job.exit)}")
        lines.append(f"strict = {'true' if job.strict else 'false'}")
        lines.append("")
    return "\n".join(map(printable, lines))


def _statistics_text(result: LintResult) -> str:
    """``--statistics``: findings per rule code, most first (Ruff's layout), then the summary line."""
    counts: dict[tuple[str, str, str], int] = {}
    for f in result.files:
        for d in f.diagnostics:
            key = (d.code, d.name, d.severity.value)
            counts[key] = counts.get(key, 0) + 1
    width = max((len(str(n)) for n in counts.values()), default=1)
    lines = [f"{n:>{width}}  {code}  [{sev}]  {name}" for (code, name, sev), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    lines.append(render(result, "text").splitlines()[-1])
    return "\n".join(lines) + "\n"


def _workers(requested: int, files: int) -> int:
    """``--jobs N`` clamped to the files and CPUs there are (more processes only cost memory), said on stderr;
    ``--jobs 0`` is one per CPU (as ``--help`` says), clamped to the files without a word."""
    if requested < 0:
        raise UsageError(f"--jobs {requested}: give a number of worker processes, 1 or more (0: one per CPU)")
    cpus = os.cpu_count() or 1
    workers = max(1, min(requested or cpus, files, cpus))
    if workers < requested and files > 1:
        print(f"rnnir: --jobs {requested}: using {workers} worker process(es) ({files} files, {cpus} CPUs)", file=sys.stderr)
    return workers


def _refuse_output_over_a_model(output: str | None, targets: Sequence[Target], what: str = "--output") -> None:
    """``-o model.onnx`` would overwrite a model being linted with the report."""
    from .writing import refuse_output_over_inputs

    refuse_output_over_inputs(output, [t.path for t in targets], what=what, error=UsageError)


def _cost_text(result: LintResult) -> str:
    lines: list[str] = []
    for f in result.files:
        lines.append(f.path)
        if f.error is not None:
            lines.append(f"  {f.path}: error: {f.error['message']}")
        else:
            lines.extend("  " + line for line in render_cost_text(f.cost or {}))
        lines.append("")
    return "\n".join(map(printable, lines))


def _shard(text: str) -> Shard:
    """``--shard I/N`` (see :mod:`rnnir.zoo` for how models are dealt to shards)."""
    from .zoo import Shard, ShardError

    try:
        return Shard.parse(text)
    except ShardError as exc:
        raise UsageError(str(exc)) from None


def cmd_lint(args: argparse.Namespace) -> int:
    return _lint(args, rules=True, cost=args.cost)


def cmd_cost(args: argparse.Namespace) -> int:
    return _lint(args, rules=False, cost=True)


def _load(args: argparse.Namespace) -> tuple[Program, Settings]:
    import rnnir

    settings = _settings(args)
    with pairs_declared_in(settings.pairs_origin):
        return rnnir.load(args.model, pairs=settings.pairs, entry=settings.entry, exit=settings.exit), settings


#: ``rnnir show -o FILE``: suffixes Graphviz renders, and suffixes that choose a text format
_IMAGE_SUFFIXES = (".svg", ".png", ".pdf")
_TEXT_SUFFIXES = {".dot": "dot", ".gv": "dot", ".mmd": "mermaid", ".json": "json", ".txt": "text"}


def cmd_show(args: argparse.Namespace) -> int:
    from .journey import journey_text
    from .printer import print_program, to_dot, to_mermaid

    output: str | None = args.output
    from .writing import refuse_output_over_inputs

    refuse_output_over_inputs(output, [args.model], what="--output", error=UsageError)  # rnnir show m.onnx -o m.onnx
    suffix = Path(output).suffix.lower() if output else ""
    fmt = args.format or _TEXT_SUFFIXES.get(suffix, "text")
    if suffix in _IMAGE_SUFFIXES:
        import shutil

        dot = shutil.which("dot")  # before loading: a missing Graphviz is the user's first thing to fix
        if dot is None:
            raise UsageError(
                f"{output}: rendering {suffix[1:].upper()} needs Graphviz's `dot` program, which is not on PATH; install Graphviz "
                "(apt-get install graphviz, brew install graphviz, choco install graphviz) or write DOT text with -o FILE.dot / --format dot"
            )
        if args.format not in (None, "dot"):
            raise UsageError(f"{output}: an image is rendered from the DOT picture; --format {args.format} does not apply")
    program, _ = _load(args)
    journey = not args.full
    what = "the state pairs" if fmt == "json" else "the whole program" if args.full else "the state's journey"
    if suffix in _IMAGE_SUFFIXES:
        _render_image(to_dot(program, journey=journey), dot, suffix[1:], output)  # type: ignore[arg-type]
        _say_written(output, f"{what}, drawn by Graphviz")  # type: ignore[arg-type]
        return 0
    if fmt == "json":
        from .analysis.slices import pair_json, slice_maps
        from .analysis.suggest import suggested_pairs

        doc = {
            "version": 1,
            "path": unicode_text(args.model),
            "state_pairs": slice_maps(program).to_json(),
            "suggested_pairs": [pair_json(p) for p in suggested_pairs(program)],
        }
        text = json.dumps(doc, indent=2)
    elif fmt == "text":
        text = print_program(program) if args.full else journey_text(program)
    else:
        text = {"dot": to_dot, "mermaid": to_mermaid}[fmt](program, journey=journey)
    if fmt != "json":  # names come from the model: no raw escape sequence reaches the terminal
        text = "\n".join(map(printable, text.split("\n")))
    _emit(text + "\n", output, [args.model])
    if output:
        _say_written(output, f"{what} as {fmt}")
    return 0


def _say_written(output: str, what: str) -> None:
    """``rnnir: wrote FILE: WHAT`` on stderr, as ``--write-baseline`` and ``fix`` say what they wrote: a file
    written without a word leaves the user wondering whether anything happened."""
    print(printable(f"rnnir: wrote {output}: {what}"), file=sys.stderr)


def _render_image(dot_text: str, dot: str, kind: str, output: str) -> None:
    """Run Graphviz's ``dot -T<kind>`` on ``dot_text`` into ``output``."""
    import subprocess

    try:
        done = subprocess.run([dot, f"-T{kind}"], input=dot_text.encode("utf-8"), capture_output=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"{output}: Graphviz's dot could not run: {exc}") from None
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UsageError(printable(f"{output}: Graphviz's dot failed (exit {done.returncode}){': ' + detail[-1] if detail else ''}"))
    from .writing import write_file  # rnnir writes the image, not dot: atomically, never over a device

    write_file(output, done.stdout, error=UsageError)


def cmd_rules(args: argparse.Namespace) -> int:
    rules = _passes().RULES
    ordered = [rules[c] for c in sorted(rules)]
    if args.format == "json":
        doc = {
            "version": 1,
            "rules": [{"code": r.code, "name": r.name, "severity": r.severity.value, "summary": r.summary} for r in ordered],
        }
        _emit(json.dumps(doc, indent=2) + "\n", None)
        return 0
    width = max((len(r.name) for r in ordered), default=0)
    lines = [f"{r.code}  {r.name.ljust(width)}  {r.severity.value.ljust(7)}  {r.summary}" for r in ordered]
    _emit("\n".join(lines) + "\n", None)
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    """The rule's code, name, severity and summary first (as ``ruff rule F401`` starts), then its docstring and
    its automatic fix.  Imports neither onnx nor numpy: a question about a rule costs no model machinery."""
    backend = _passes()
    try:
        rule = backend.rule_for(args.code)  # a code (SD002) or a name (wrong-slot), any case
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from .cli_fix import explain_fix  # the automatic fix, where the rule has one

    doc = backend.explain(rule.code)
    head = f"{rule.code} {rule.name} ({rule.severity.value})\n{rule.summary}\n\n"
    _emit(head + (doc if doc.endswith("\n") else doc + "\n") + explain_fix(rule.code), None)
    return 0


# -- argument parsing -------------------------------------------------------------------------


class _DeprecatedSpelling(argparse.Action):
    """An old spelling of a renamed option: stores into the new option's ``dest`` and says what to type now
    (Ruff keeps renamed options working with a warning, so scripts and CI jobs keep running)."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str = "", **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        print(f"rnnir: warning: {option_string} is deprecated; use {self.new} (it picks the lowering policy for demonstrations, not an exit code)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _add_model_options(p: argparse.ArgumentParser, *, config: bool = True) -> None:
    p.add_argument("--pair", action="append", metavar="INPUT=OUTPUT", help="declare a state pair (repeatable); replaces every other way of finding pairs; INPUT= means no output")
    p.add_argument(
        "--lower-entry", choices=ENTRY_POLICIES,
        help="lowering policy for demonstrations: where state enters (default: dynamic; constant: initial states as constants)",
    )
    p.add_argument(
        "--lower-exit", choices=EXIT_POLICIES,
        help="lowering policy for demonstrations: how state is written back (default: fanout; chain and reuse-single-store lower a known-bad model)",
    )
    # the old spellings read like exit-code options: still accepted, with a warning, but no longer shown in --help
    p.add_argument("--entry", dest="lower_entry", choices=ENTRY_POLICIES, action=_DeprecatedSpelling, new="--lower-entry", help=argparse.SUPPRESS)
    p.add_argument("--exit", dest="lower_exit", choices=EXIT_POLICIES, action=_DeprecatedSpelling, new="--lower-exit", help=argparse.SUPPRESS)
    if config:
        group = p.add_mutually_exclusive_group()
        group.add_argument("--config", metavar="FILE", help="read [tool.rnnir] from FILE for every model instead of the nearest pyproject.toml above each")
        group.add_argument("--no-config", action="store_true", help="ignore any pyproject.toml")


class _SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser: an argument it does not know is reported with *its* usage (``rnnir lint
    --bogus`` shows how to call ``lint``), not with the top level's, which says nothing about ``lint``."""

    def parse_known_args(  # type: ignore[override]  # typeshed overloads on the namespace type; one signature suffices here
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


#: every subcommand, in the order ``rnnir --help`` lists them
COMMANDS = ("lint", "cost", "show", "rules", "explain", "run", "fix", "deploy")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``only`` (a name in :data:`COMMANDS`) just that subcommand's.

    One run parses one subcommand: building the other seven (and importing their modules) cost about a
    fifth of linting a small model.  ``rnnir --help`` and anything that is not a subcommand get them all.
    """

    def want(command: str) -> bool:
        return only is None or only == command

    parser = argparse.ArgumentParser(
        prog="rnnir",
        description="Verify how recurrent models keep their state across inference calls.",
        epilog="exit codes: 0 clean, 1 error-level findings, 2 the tool could not do its job",
    )
    parser.add_argument("--version", action="version", version=f"rnnir {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_SubcommandParser)
    sub.required = True

    if want("lint"):
        p = sub.add_parser("lint", help="check models for state-persistence bugs", description="Check ONNX models (files, or folders searched recursively for *.onnx) for state-persistence bugs.")
        p.add_argument("paths", nargs="+", metavar="PATH", help="ONNX files, or folders searched recursively for *.onnx")
        p.add_argument("--format", "--output-format", dest="format", choices=FORMATS, default="text", help="report format (default: text)")
        p.add_argument("--verbose", "-v", "--show-pairs", dest="verbose", action="store_true", help="text: also list each model's state pairs and slices, and clean models")
        p.add_argument("--quiet", "-q", action="store_true", help="text: print only the summary line")
        p.add_argument("--statistics", action="store_true", help="text: print a count per rule code instead of the findings")
        p.add_argument("--exit-zero", action="store_true", help="exit 0 even with error-level findings (2 still means the tool failed)")
        p.add_argument("--select", action="append", metavar="CODES", help="comma-separated rule codes, prefixes or names to run (default: all; ALL: every rule)")
        p.add_argument("--extend-select", action="append", metavar="CODES", help="rule codes, prefixes or names to run on top of --select or the configured selection")
        p.add_argument("--ignore", action="append", metavar="CODES", help="comma-separated rule codes, prefixes or names to skip")
        p.add_argument("--cost", action="store_true", help="add the per-call cost analysis")
        p.add_argument("--strict", action="store_true", help="state rnnir could not verify (SD009) or a model does not expose (SD010) is an error")
        p.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="lint in up to N worker processes (at most one per file and per CPU; 0: one per CPU)")
        p.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
        p.add_argument("--shard", metavar="I/N", help="lint only shard I of N (models dealt round-robin in sorted order), for CI job matrices")
        p.add_argument("--show-settings", action="store_true", help="print each model's configuration file and resolved settings, and lint nothing")
        adopt = p.add_mutually_exclusive_group()
        adopt.add_argument("--baseline", metavar="FILE", help="report only findings not recorded in FILE (written by --write-baseline); the summary counts the rest")
        adopt.add_argument("--write-baseline", metavar="FILE", help="record every current finding in FILE (JSON, sorted) and exit 0, for adopting rnnir in CI")
        adopt.add_argument(
            "--add-noqa", action="store_true",
            help="write a suppression for every current finding into its model (metadata rnnir.noqa, in place) and exit 0",
        )
        p.add_argument(
            "--exit-non-zero-on-stale-baseline", action="store_true",
            help="with --baseline: exit 1 when an entry of FILE matches no finding any more (default: one line on stderr)",
        )
        _add_model_options(p)
        from .cli_fix import add_lint_fix_options

        add_lint_fix_options(p)
        p.set_defaults(func=cmd_lint)

    if want("cost"):
        p = sub.add_parser("cost", help="per-call cost: bytes written to slots and outputs, copies, slot lifetimes")
        p.add_argument("paths", nargs="+", metavar="MODEL", help="ONNX files, or folders searched recursively for *.onnx")
        p.add_argument("--format", choices=("text", "json"), default="text", help="report format (default: text)")
        p.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="analyse in N worker processes (0: one per CPU)")
        p.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
        _add_model_options(p)
        p.set_defaults(func=cmd_cost, select=None, ignore=None)

    if want("show"):
        p = sub.add_parser(
            "show",
            help="draw the state's journey through a call (the fan-out), or print the IR or the state pairs",
            description="Show the state's journey through one call: slots, loads, recurrences, the stores of the fan-out and "
            "outputs, with layout-only ops and If nests folded into labelled arrows.  --full shows every node.",
        )
        p.add_argument("model", metavar="MODEL", help="the ONNX model to show")
        p.add_argument(
            "--format", choices=("text", "dot", "mermaid", "json"), default=None,
            help="text (default), dot (Graphviz), mermaid (for Markdown) or json (the state pairs); default: from -o's suffix, else text",
        )
        p.add_argument("--full", action="store_true", help="the whole program (every node), not only the state's journey")
        p.add_argument(
            "--output", "-o", metavar="FILE",
            help="write to FILE; .svg, .png and .pdf are rendered with Graphviz's dot, .dot/.gv, .mmd, .json, .txt choose the format",
        )
        _add_model_options(p)
        p.set_defaults(func=cmd_show)

    if want("rules"):
        p = sub.add_parser("rules", help="list the rule catalogue")
        p.add_argument("--format", choices=("text", "json"), default="text", help="catalogue format (default: text)")
        p.set_defaults(func=cmd_rules)

    if want("explain"):
        p = sub.add_parser("explain", help="print what a rule finds, why it matters, a bad and a fixed example")
        p.add_argument("code", metavar="RULE", help="a rule code (SD002) or name (wrong-slot), in any case")
        p.set_defaults(func=cmd_explain)

    if want("run"):
        from .cli_run import add_run_command

        add_run_command(sub, _add_model_options)

    if want("fix"):
        from .cli_fix import add_fix_command

        add_fix_command(sub, _add_model_options)

    if want("deploy"):
        from .deploy.cli import add_deploy_command

        add_deploy_command(sub, _add_model_options)
    return parser


def _edge_message(exc: BaseException, args: argparse.Namespace | None) -> str:
    """``<file>: <message>`` for the one-line ``rnnir: error:`` report."""
    if isinstance(exc, (ModelError, UsageError, SettingsError, ConfigError)):
        return str(exc)
    if isinstance(exc, OSError):
        name = exc.filename if exc.filename is not None else getattr(args, "model", None)
        return f"{name}: {exc.strerror or exc}" if name else str(exc)
    model = getattr(args, "model", None)
    text = str(exc) or type(exc).__name__
    return f"{model}: {text}" if model and not text.startswith(f"{model}:") else text


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
    try:
        args = parser.parse_args(words)
    except SystemExit as exc:  # --help, --version, or bad arguments (argparse already printed why)
        return exc.code if isinstance(exc.code, int) else 2
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except BrokenPipeError:  # output piped into `head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 2
    except (RnnirError, OSError) as exc:
        if _debug():
            import traceback

            traceback.print_exc()
        print(printable(f"rnnir: error: {_edge_message(exc, args)}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rnnir: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if _debug():
            import traceback

            traceback.print_exc()
        print(printable(f"rnnir: internal error: {type(exc).__name__}: {exc} ({_REPORT_HINT})"), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
