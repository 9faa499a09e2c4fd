"""What to lint and linting one model: :func:`collect_models` turns paths into :class:`Target` s,
a :class:`LintJob` carries one model's resolved settings, and :func:`lint_one` lints it.

A job is small and picklable and :func:`lint_one` is a top-level function, so a job runs the same in this
process, in a worker process or on a cluster (:mod:`rnnir.lint.executor`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rnnir.errors import ModelError, RnnirError
from rnnir.lint.results import FileResult
from rnnir.lint.settings import Settings, pairs_declared_in, shown_path

__all__ = ["REPORT_HINT", "LintJob", "Target", "collect_models", "job_for", "lint_one"]

REPORT_HINT = "this is a bug in rnnir; please report it with the model that triggers it (set RNNIR_DEBUG=1 for the traceback)"


def debug() -> bool:
    """``RNNIR_DEBUG=1``: print the traceback of an internal error."""
    return os.environ.get("RNNIR_DEBUG", "") not in ("", "0")


# -- collecting models ------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    path: str
    error: dict[str, str] | None = None  # set when the argument itself is unusable


def collect_models(arguments: Sequence[str]) -> list[Target]:
    """Files as given, folders searched recursively for ``*.onnx`` and ``*.rnnir`` (IR text, any case) in sorted
    order, duplicates dropped.

    Hidden folders (``.git``, ``.venv``) below a given folder are skipped, symlinked folders not
    followed.  A folder without any model is an error target, so a mistyped path cannot pass CI; so is a
    folder that cannot be listed (no permission, a path longer than the system allows), in the place its
    models would have been, so the run says so and exits 2 while the other models are still linted.
    """
    targets: list[Target] = []
    seen: set[str] = set()

    def add(path: str) -> None:
        path = os.path.normpath(path)
        key = os.path.normcase(os.path.abspath(path))
        if key not in seen:
            seen.add(key)
            targets.append(Target(path))

    for arg in arguments:
        if os.path.isdir(arg):
            found = _walk_models(arg)
            if not found:
                targets.append(Target(os.path.normpath(arg), {"type": "NoModelsFound", "message": "no .onnx or .rnnir files in this folder"}))
            for target in found:
                if target.error is not None:
                    targets.append(target)
                else:
                    add(target.path)
        else:
            add(arg)  # missing files are reported by the loader, with the loader's message
    return targets


def _walk_models(top: str) -> list[Target]:
    """The models below ``top`` in sorted order, and an error target for each folder that cannot be listed.

    An explicit stack, not :func:`os.walk`: on Python 3.11 that recurses once per level (1,200 nested folders
    raised RecursionError and stopped the whole run) and drops a folder it cannot list without a word.
    """
    out: list[Target] = []
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            out.append(Target(os.path.normpath(folder), {"type": "UnreadableFolder", "message": f"cannot list this folder: {exc.strerror or exc}; its models were not linted"}))
            continue
        subfolders: list[str] = []
        for entry in entries:
            try:
                is_folder = entry.is_dir()  # a symlink to a folder is a folder, never a model, and not followed
                followed = is_folder and not entry.is_symlink()
            except OSError:
                is_folder = followed = False
            if is_folder:
                if followed and not entry.name.startswith("."):
                    subfolders.append(entry.path)
            elif entry.name.lower().endswith((".onnx", ".rnnir")):
                out.append(Target(entry.path))
        stack.extend(reversed(subfolders))  # popped in sorted order: a folder's files, then each subfolder's
    return out


# -- linting one model ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class LintJob:
    """One model and the settings it is linted with."""

    path: str
    select: tuple[str, ...] | None = None  # rule codes or prefixes; None: every rule
    ignore: tuple[str, ...] = ()
    pairs: Mapping[str, str | None] | None = None
    entry: str = "dynamic"
    exit: str = "fanout"
    rules: bool = True
    cost: bool = False
    strict: bool = False
    config: str | None = None  # the configuration file these settings came from, as shown to the user
    pairs_origin: str | None = None  # Settings.pairs_origin


def job_for(path: str, settings: Settings, *, ignore: tuple[str, ...] = (), rules: bool = True, cost: bool = False) -> LintJob:
    """The job that lints ``path`` with ``settings``; ``ignore`` adds codes (a ``per-file-ignores`` match)."""
    return LintJob(
        path=path,
        select=settings.select,
        ignore=settings.ignore + tuple(c for c in ignore if c not in settings.ignore),
        pairs=settings.pairs,
        entry=settings.entry,
        exit=settings.exit,
        rules=rules,
        cost=cost,
        strict=settings.strict,
        config=shown_path(settings.config.path),
        pairs_origin=settings.pairs_origin,
    )


def _error_message(exc: BaseException, path: str) -> str:
    """The message of ``exc`` without a leading ``<path>: `` (the renderers put the path there)."""
    if isinstance(exc, ModelError):
        text = exc.detail + (f" (at {exc.where})" if exc.where else "")
    elif isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror + (f": {exc.filename}" if exc.filename and str(exc.filename) != path else "")
    else:
        text = str(exc) or type(exc).__name__
    prefix = f"{path}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def lint_one(job: LintJob) -> FileResult:
    """Lower and analyse one model; every failure becomes ``FileResult.error``, never an exception."""
    from rnnir.util.gcpause import paused_gc

    with paused_gc():  # lowering and the passes build a large, long-lived heap: see rnnir.util.gcpause
        return _lint_one(job)


def _lint_one(job: LintJob) -> FileResult:
    from rnnir import passes
    from rnnir.analysis.slices import pair_json, slice_maps
    from rnnir.analysis.suggest import suggested_pairs
    from rnnir.lower.load import load

    result = FileResult(path=job.path, config=job.config)
    try:
        with pairs_declared_in(job.pairs_origin):
            program = load(job.path, pairs=job.pairs, entry=job.entry, exit=job.exit)
        result.state_pairs = slice_maps(program).to_json()
        result.suggested_pairs = [pair_json(p) for p in suggested_pairs(program)]
        if job.pairs and program.source is not None:  # a declaration replaces automatic pairing: say what it left out
            from rnnir.lower.pairing import left_out_pair_warnings

            src = program.source
            result.warnings = left_out_pair_warnings(src.model, label=src.label, declared=job.pairs, model_path=src.path)
        if job.rules:
            verification = passes.verify(program, select=list(job.select) if job.select is not None else None, ignore=list(job.ignore), strict=job.strict)
            # ``data`` is for programmatic users; dropping it keeps results small and picklable.
            result.diagnostics = sorted((dataclasses.replace(d, data={}) for d in verification.diagnostics), key=lambda d: d.sort_key())
            result.suppressed = len(verification.suppressed)
            result.verdicts = verification.to_json()
        if job.cost:
            result.cost = passes.cost(program).to_json()
    except (RnnirError, OSError) as exc:
        result.error = {"type": type(exc).__name__, "message": _error_message(exc, job.path)}
    except (MemoryError, RecursionError) as exc:
        result.error = {"type": type(exc).__name__, "message": f"model too large or too deeply nested to analyse ({type(exc).__name__})"}
    except Exception as exc:  # a bug in rnnir: keep linting the other models
        if debug():
            import traceback

            traceback.print_exc()
        result.error = {"type": "InternalError", "message": f"internal error: {type(exc).__name__}: {exc} ({REPORT_HINT})"}
    if result.error is not None:
        # nothing of an analysis that did not finish is reported: not its findings, not the count it suppressed
        result.state_pairs, result.suggested_pairs, result.diagnostics, result.cost, result.verdicts = [], [], [], None, None
        result.suppressed = 0
    return result
