"""``rnnir lint`` (and the engine of ``rnnir cost``): lint models with :mod:`rnnir.lint`, report with :mod:`rnnir.render`.

    rnnir lint PATH... [--format text|json|sarif|github] [--select SD,OR] [--ignore SD006]
                       [--pair h0=hn ...] [--lower-entry dynamic|constant] [--lower-exit fanout|chain|reuse-single-store]
                       [--cost] [--jobs N] [--output FILE] [--config pyproject.toml | --no-config] [--show-settings]
                       [--baseline FILE | --write-baseline FILE] [--add-noqa]

Each model's ``[tool.rnnir]`` is the nearest one above the model (:class:`rnnir.lint.config.ConfigFinder`).
``lint --baseline FILE`` reports only findings FILE does not accept (:mod:`rnnir.lint.baseline`), and
``--write-baseline FILE`` records them; suppressions stored in a model (``rnnir.noqa`` metadata) are
applied by the passes themselves (:mod:`rnnir.passes.suppression`).

``lint`` never imports onnxruntime (nor :mod:`rnnir.runtime` / :mod:`rnnir.testing`); only ``run`` does.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rnnir import __version__
from rnnir.cli import common
from rnnir.cli.common import ModelArgs, UsageError, add_model_options, emit, isatty, print_deprecations
from rnnir.lint.executor import process_pool, run_jobs
from rnnir.lint.jobs import LintJob, Target, collect_models, job_for
from rnnir.lint.results import FileResult, LintResult
from rnnir.lint.settings import Overrides, Settings, check_selectors, config_finder, resolve_checked, split_codes
from rnnir.render import FORMATS, render
from rnnir.render.escape import printable
from rnnir.render.text import render_cost_text

if TYPE_CHECKING:
    from rnnir.lint.baseline import Baseline
    from rnnir.lint.zoo import Shard

__all__ = ["LintArgs", "Progress", "add_parser", "cmd_lint", "run_lint"]


@dataclass(frozen=True, kw_only=True)
class LintArgs(ModelArgs):
    """``rnnir lint``'s arguments (``rnnir cost`` gives the paths, format, jobs, output and model options, and
    leaves the rest at these defaults)."""

    paths: tuple[str, ...]
    format: str = "text"
    verbose: bool = False
    quiet: bool = False
    statistics: bool = False
    exit_zero: bool = False
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] | None = None
    cost: bool = False
    strict: bool = False
    jobs: int = 1
    output: str | None = None
    shard: str | None = None
    show_settings: bool = False
    baseline: str | None = None
    write_baseline: str | None = None
    add_noqa: bool = False
    exit_non_zero_on_stale_baseline: bool = False
    fix: bool = False
    diff: bool = False
    unsafe_fixes: bool = False

    def overrides(self) -> Overrides:
        """The model options' overrides with lint's rule selection and ``--strict`` on top."""
        return dataclasses.replace(super().overrides(), select=self.select, extend_select=self.extend_select, ignore=self.ignore, strict=self.strict)


def __getattr__(name: str) -> Any:
    if name == "ProcessPoolExecutor":  # multiprocessing costs a short lint run more than its own work: on demand
        from concurrent.futures import ProcessPoolExecutor

        return ProcessPoolExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Progress:
    """``[3/10] path`` on a terminal's stderr, rewritten in place; silent when stderr is not a terminal."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = total
        self.enabled = total > 1 and isatty(self.stream)
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



def _run_jobs(jobs: Sequence[LintJob], workers: int, progress: Progress) -> list[FileResult]:
    """Lint ``jobs`` serially or in ``workers`` processes (:func:`rnnir.lint.run_jobs`); results in ``jobs`` order."""
    if workers <= 1 or len(jobs) <= 1:
        if len(jobs) > 1 and not gc.isenabled():  # paused for the process (rnnir.util.gcpause): one model's garbage at a time
            left = [len(jobs)]

            def step(path: str) -> None:
                left[0] -= 1
                if left[0]:  # not after the last: the process ends with it
                    gc.collect(0)
                progress.step(path)

            return run_jobs(jobs, done=step)
        return run_jobs(jobs, done=progress.step)
    pool_class = sys.modules[__name__].ProcessPoolExecutor  # through the module (see __getattr__), so tests can swap it
    gc.enable()  # a forked worker inherits a pause (rnnir.util.gcpause.paused_for_the_process): it lints many models
    with process_pool(min(workers, len(jobs)), pool_class) as pool:
        return run_jobs(jobs, pool, done=progress.step)


# -- the command -------------------------------------------------------------------------------


def add_parser(sub: Any) -> None:
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
    add_model_options(p)
    # lint's own options for rnnir/cli/fix.py, which is imported only when --fix or --diff is given
    p.add_argument("--fix", action="store_true", help="apply the safe fixes to each linted file (rewritten in place), then report what is left")
    p.add_argument("--diff", action="store_true", help="show the fixes --fix would make as diffs and write nothing (exit 1 when there is something to fix)")
    p.add_argument("--unsafe-fixes", action="store_true", help="with --fix/--diff: also apply fixes that are not certain")
    p.set_defaults(func=cmd_lint, args_type=LintArgs)


def run_lint(args: LintArgs, *, rules: bool, cost: bool) -> int:
    """Lint (``rules``) and/or cost (``cost``) every model ``args.paths`` names; the exit status."""
    backend = common.passes_backend()
    codes = list(backend.RULES)
    overrides = args.overrides()
    check_selectors(split_codes(overrides.extend_select), codes, "--extend-select")
    finder = config_finder(overrides)
    # the flags and the working directory's configuration are checked even when no model uses it, so a
    # typo in --select fails the same way whatever is linted (Ruff reads that file as its default too)
    by_config: dict[int, Settings] = {id(finder.fallback): resolve_checked(overrides, finder.fallback, codes)}

    targets = collect_models(args.paths)
    if args.shard:
        targets = _shard(args.shard).of(targets)
    _refuse_output_over_a_model(args.output, targets)
    _refuse_output_over_a_model(args.write_baseline, targets, "--write-baseline")
    baseline = _load_baseline(args)  # before the models: a missing baseline is the first thing to fix
    jobs: list[LintJob] = []
    for t in targets:
        if t.error is None:
            config = finder.for_model(t.path)
            settings = by_config.get(id(config))
            if settings is None:
                settings = by_config[id(config)] = resolve_checked(overrides, config, codes)
            jobs.append(job_for(t.path, settings, ignore=config.ignores_for(Path(t.path)), rules=rules, cost=cost))
    print_deprecations([s.config for s in by_config.values()])
    if args.show_settings:
        emit(_settings_text(jobs), args.output)
        return 0
    fix_status = 0
    if args.fix or args.diff:  # rnnir/cli/fix.py: rewrite (or diff) first, then lint what is left
        from rnnir.cli.fix import lint_fixes

        fix_status = lint_fixes(jobs, diff=args.diff, unsafe=args.unsafe_fixes)
        if args.diff:
            return fix_status
    workers = _workers(args.jobs, len(jobs))
    progress = Progress(len(jobs))
    try:
        linted = iter(_run_jobs(jobs, workers, progress))
    finally:
        progress.close()
    files = [FileResult(t.path, error=t.error) if t.error is not None else next(linted) for t in targets]

    result = LintResult(files=files, rules=backend.RULES, version=__version__, with_cost=cost, verbose=args.verbose)
    result.quarantine()
    for f in files:
        for warning in f.warnings:
            print(printable(f"rnnir: warning: {f.path}: {warning}"), file=sys.stderr)
    # a text report on stdout already says why each failed model failed: the same words on stderr would say it twice
    report_says_it = args.format == "text" and not args.output and not any(
        (args.quiet, args.statistics, args.write_baseline, args.add_noqa)
    )
    for f in result.failed if not report_says_it else ():
        print(printable(f"rnnir: error: {f.path}: {(f.error or {}).get('message')}"), file=sys.stderr)
    if args.write_baseline:
        return _write_baseline(Path(args.write_baseline), result)
    if args.add_noqa:
        from rnnir.cli.fix import add_noqa

        return max(add_noqa(result.files), 2 if result.failed else 0)
    stale_fails = baseline is not None and _apply_baseline(baseline, result, jobs, args) and args.exit_non_zero_on_stale_baseline
    if rules and args.format == "text" and (args.quiet or args.statistics):
        text = _statistics_text(result) if args.statistics else render(result, "text").splitlines()[-1] + "\n"
    elif rules:
        text = render(result, args.format)
    elif args.format == "json":
        text = render(result, "json")
    else:
        text = _cost_text(result)
    emit(text, args.output)
    code = max(result.exit_code, fix_status, 1 if stale_fails else 0)
    return 0 if code == 1 and args.exit_zero else code


def _load_baseline(args: LintArgs) -> Baseline | None:
    if not args.baseline:
        if args.exit_non_zero_on_stale_baseline:
            raise UsageError("--exit-non-zero-on-stale-baseline needs --baseline FILE")
        return None
    from rnnir.lint.baseline import Baseline

    return Baseline.load(Path(args.baseline))


def _write_baseline(path: Path, result: LintResult) -> int:
    """``--write-baseline FILE``: record every finding of the run (exit 0; 2 when a model could not be analysed,
    since its findings are missing from the file)."""
    from rnnir.lint.baseline import Baseline

    findings = [(f.path, d) for f in result.files if f.error is None for d in f.diagnostics]
    baseline = Baseline.of(path, findings)
    baseline.write()
    models = len({f.path for f in result.files if f.diagnostics})
    print(printable(f"rnnir: wrote {path}: {len(findings)} finding{'s' if len(findings) != 1 else ''} in {models} model{'s' if models != 1 else ''} accepted"), file=sys.stderr)
    return 2 if result.failed else 0


def _apply_baseline(baseline: Baseline, result: LintResult, jobs: Sequence[LintJob], args: LintArgs) -> bool:
    """Drop the findings ``baseline`` accepts (counted per file as ``baselined``); say on stderr which entries
    matched nothing among the models and rules this run checked.  Returns whether any entry is stale."""
    from rnnir.lint.baseline import model_key
    from rnnir.passes import RULES
    from rnnir.passes.manager import selected_codes

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
        if args.verbose:
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
    from rnnir.util.writing import refuse_output_over_inputs

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
    """``--shard I/N`` (see :mod:`rnnir.lint.zoo` for how models are dealt to shards)."""
    from rnnir.lint.zoo import Shard, ShardError

    try:
        return Shard.parse(text)
    except ShardError as exc:
        raise UsageError(str(exc)) from None


def cmd_lint(args: LintArgs) -> int:
    return run_lint(args, rules=True, cost=args.cost)
