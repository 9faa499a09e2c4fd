"""The command line of :mod:`rnnir.fixer` (``rnnir.fix``): ``rnnir fix``, and what ``rnnir lint --fix``/``--diff`` do
(:mod:`rnnir.cli.lint` declares those options itself, so a lint without them never imports this module).

    rnnir fix MODEL --expose-state [--packed] [--state-defaults] -o OUT
    rnnir fix MODEL [--select SD002,AL001] [--unsafe-fixes] (-o OUT | --in-place | --diff) [--format text|json]
    rnnir fix MODEL --suppress SD009[:NODE] [--unsuppress CODE[:NODE]] (-o OUT | --in-place)   # the model's noqa list
    rnnir lint PATH... --fix [--unsafe-fixes]      # rewrite each linted file, then report what is left
    rnnir lint PATH... --diff [--unsafe-fixes]     # show the fixes as diffs, write nothing

Like Ruff, ``lint --fix`` rewrites the files it lints (atomically, with :mod:`rnnir.util.writing`, docs/files.md: a temporary file in the same folder,
then a rename) and refuses a file it cannot write; ``rnnir fix`` writes only where ``-o`` says, or over
the model with ``--in-place``.  ``--diff`` exits 1 when there is something to fix, 0 otherwise.
A model that keeps its weights in external data is written with a new data file beside the output;
it is never rewritten in place (its data file would have to change under it).  IR text (``.rnnir``) is
linted but never fixed: ``lint --fix``/``--diff`` say so on stderr, one warning per file.

``lint --fix`` calls :func:`lint_fixes` with the jobs it made; this module never imports :mod:`rnnir.cli.lint`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import textwrap
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rnnir.cli.common import OneModelArgs, add_model_options, settings_for
from rnnir.errors import ModelError, PairingError, RnnirError
from rnnir.render.escape import printable, printable_lines

if TYPE_CHECKING:
    import onnx

    from rnnir.lint.jobs import LintJob

__all__ = ["FixArgs", "add_noqa", "add_parser", "cmd_fix", "explain_fix", "lint_fixes", "noqa_entry"]


class FixUsageError(RnnirError):
    """``rnnir fix`` was asked for something it cannot do (no output named, an unwritable file)."""


@dataclass(frozen=True, kw_only=True)
class FixArgs(OneModelArgs):
    """``rnnir fix``'s arguments."""

    expose_state: bool = False
    packed: bool = False
    state_defaults: bool = False
    select: tuple[str, ...] | None = None
    unsafe_fixes: bool = False
    suppress: tuple[str, ...] = ()
    unsuppress: tuple[str, ...] = ()
    output: str | None = None
    in_place: bool = False
    diff: bool = False
    format: str = "text"


# -- writing models --------------------------------------------------------------------------


def _has_external_data(path: Path) -> bool:
    from rnnir.onnxio.source import read_model

    return read_model(path).has_external_data


def write_model(model: onnx.ModelProto, dest: Path, *, external: bool, source: Path | None = None) -> None:
    """Write ``model`` to ``dest`` with :mod:`rnnir.util.writing` (atomic, only a regular file, links kept; the
    external data under a new name before the graph).  ``source``: the model read, whose data files stay."""
    from rnnir.onnxio.save import write_onnx_model

    write_onnx_model(model, dest, external=external, keep=_data_files(source) if external and source else (), error=FixUsageError)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _data_files(model: Path) -> list[Path]:
    """The external data files ``model`` names (kept when an edited copy is written beside it)."""
    from rnnir.onnxio.source import iter_tensors, read_model

    files = set()
    for t in iter_tensors(read_model(str(model)).model):
        for entry in t.external_data:
            if entry.key == "location":
                files.add(model.parent / entry.value)
    return sorted(files)


# -- rnnir fix -------------------------------------------------------------------------------


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "fix",
        help="edit a model: expose hidden recurrent state, repair write-back findings",
        description="Edit an ONNX model: --expose-state gives every hidden recurrent state an input/output pair; "
        "without it, the safe fixes of the selected rules are applied (see `rnnir explain CODE`).",
    )
    p.add_argument("model", metavar="MODEL", help="the ONNX model to edit")
    p.add_argument("--expose-state", action="store_true", help="add a state input and output for every recurrence that starts from zeros and returns no state")
    p.add_argument("--packed", action="store_true", help="with --expose-state: one packed 'state' tensor (silero-style) instead of h0/c0 per op")
    p.add_argument("--state-defaults", action="store_true", help="with --expose-state: give each new state input a zeros initializer as its default (onnxruntime's IOBinding cannot feed such inputs)")
    p.add_argument("--select", action="append", metavar="CODES", help="rule codes or names whose findings are repaired (default: every fixable rule; --select none for none)")
    p.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes that are not certain")
    p.add_argument(
        "--suppress", action="append", metavar="CODE[:NODE]",
        help="only add CODE (or CODE:NODE, a node, value or slot name) to the findings the model suppresses (metadata rnnir.noqa); repeatable",
    )
    p.add_argument("--unsuppress", action="append", metavar="CODE[:NODE]", help="only remove that entry from the model's suppressions; repeatable")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--output", "-o", metavar="OUT", help="write the edited model to OUT")
    out.add_argument("--in-place", action="store_true", help="rewrite MODEL itself")
    out.add_argument("--diff", action="store_true", help="show the edits as a diff and write nothing (exit 1 when there is something to fix)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="how the edits are reported (default: text)")
    add_model_options(p)
    p.set_defaults(func=cmd_fix, args_type=FixArgs)


def _codes(select: Sequence[str] | None) -> list[str] | None:
    if not select:
        return None
    from rnnir.passes.catalogue import selector_code  # a rule name (wrong-slot) is its code, as everywhere codes are taken

    codes = [selector_code(c) for v in select for c in v.split(",") if c.strip()]
    return [] if codes == ["NONE"] else codes


def cmd_fix(args: FixArgs) -> int:
    if not (args.output or args.in_place or args.diff):
        raise FixUsageError("say where the edited model goes: -o OUT, --in-place, or --diff to only show it")
    # --in-place reads, edits and replaces the model under a lock: two edits at once both land
    with _rewriting(Path(args.model) if args.in_place else None):
        if args.suppress or args.unsuppress:
            return _edit_suppressions(args)
        return _fix_model(args)


def _rewriting(path: Path | None) -> AbstractContextManager[None]:
    """The lock held while ``path`` is read and rewritten (nothing when the output is another file)."""
    from rnnir.util.writing import rewrite_lock

    return contextlib.nullcontext() if path is None else rewrite_lock(path, error=FixUsageError)


def _fix_model(args: FixArgs) -> int:
    from rnnir.fixes.diff import render_diff
    from rnnir.fixes.edits import FixError
    from rnnir.fixes.engine import fix
    from rnnir.lint.settings import pairs_declared_in
    from rnnir.onnxio.source import read_model

    settings = settings_for(args)  # --pair, [tool.rnnir] pairs, --config/--no-config: as every other command reads them
    pairs = settings.pairs
    src = Path(args.model)
    try:
        with pairs_declared_in(settings.pairs_origin):
            result = fix(str(src), expose_state=args.expose_state, codes=_codes(args.select), unsafe=args.unsafe_fixes, packed=args.packed, state_defaults=args.state_defaults, pairs=pairs)
    except FixError as exc:
        raise FixUsageError(str(exc)) from None
    original = read_model(str(src)).model
    dest = src if args.in_place else Path(args.output) if args.output else None
    write = dest is not None and (result.changed or dest != src)  # -o always produces OUT; --in-place only when changed
    if args.format == "json":
        doc = {
            "version": 1,
            "model": str(src),
            "output": None if dest is None else str(dest),
            "written": write,
            "edits": [e.to_json() for e in result.edits],
            "skipped": [e.to_json() for e in result.skipped],
        }
        text = json.dumps(doc, indent=2) + "\n"
    elif args.diff:
        text = render_diff(original, result.model, str(src), result.edits)
        text += "".join(f"# {e}\n" for e in result.skipped)
    else:
        text = "".join(f"{src}: {e}\n" for e in [*result.edits, *result.skipped])
    if write and dest is not None:
        if _same_file(dest, src) and _has_external_data(src):
            raise FixUsageError(f"{src}: keeps its weights in external data; write the edited model elsewhere with -o OUT")
        write_model(result.model, dest, external=_has_external_data(src), source=src)
        if args.format == "text":
            text += f"wrote {dest} ({len(result.edits)} edit{'s' if len(result.edits) != 1 else ''}, {len(result.skipped)} not applied)\n"
    elif args.format == "text" and not result.changed:
        text += f"{src}: nothing to change\n"
    sys.stdout.write(text if args.format == "json" else printable_lines(text))  # names come from the model and the command line
    sys.stdout.flush()
    if args.diff:
        return 1 if result.changed else 0
    return 0


def _edit_suppressions(args: FixArgs) -> int:
    """``--suppress``/``--unsuppress``: edit only the model's suppression list (metadata rnnir.noqa)."""
    from rnnir.onnxio.metadata import META_NOQA, NoqaFormatError, read_noqa, write_noqa
    from rnnir.onnxio.source import read_model
    from rnnir.passes import RULES, Suppression
    from rnnir.passes.catalogue import selector_code

    if args.diff or args.expose_state or args.select:
        raise FixUsageError("--suppress/--unsuppress edit only the suppression list: give -o OUT or --in-place, without --diff, --expose-state or --select")
    src = Path(args.model)
    source = read_model(str(src))
    try:
        entries = [Suppression.parse(e).text for e in read_noqa(source.model)]
    except NoqaFormatError as exc:
        raise FixUsageError(f"{src}: {exc}; remove the entry with any ONNX editor, or --unsuppress cannot tell what is there") from None
    for text in args.suppress or []:
        entry = Suppression.parse(text)
        if entry.code not in RULES:  # a rule name (wrong-slot) is stored as its code: the model's list names exact codes
            entry = Suppression(selector_code(text.partition(":")[0]), entry.node)
        if entry.code not in RULES:
            raise FixUsageError(f"--suppress {text!r}: {entry.code!r} is not a rule code (rnnir rules lists them; suppressions name exact codes)")
        entries.append(entry.text)
    for text in args.unsuppress or []:
        entry = Suppression.parse(text)
        if entry.text not in entries:
            raise FixUsageError(f"--unsuppress {text!r}: the model's {META_NOQA} holds {sorted(set(entries)) or 'nothing'}")
        entries = [e for e in entries if e != entry.text]
    dest = Path(args.output) if args.output else src  # else --in-place (-o and --in-place exclude each other)
    if _same_file(dest, src) and source.has_external_data:
        raise FixUsageError(f"{src}: keeps its weights in external data; write the edited model elsewhere with -o OUT")
    model = source.with_external_data() if source.has_external_data else source.model
    write_noqa(model, entries)
    write_model(model, dest, external=source.has_external_data, source=src)
    now = read_noqa(model)
    sys.stdout.write(printable(f"wrote {dest}: suppresses {', '.join(now) if now else 'nothing'}") + "\n")
    return 0


# -- rnnir lint --add-noqa ---------------------------------------------------------------------


def noqa_entry(d: Any) -> str:
    """The suppression entry ``--add-noqa`` writes for finding ``d``: its code and the most stable name it has
    (the slot, else an ONNX node name, else a value name; rnnir's own numbered ids are never used)."""
    names = [d.slot, *(loc.onnx_node for loc in d.locations if loc.onnx_node and loc.onnx_node != loc.node), *(loc.value for loc in d.locations)]
    name = next((n for n in names if n), None)
    return d.code if name is None else f"{d.code}:{name}"


def add_noqa(files: Sequence[Any]) -> int:
    """``rnnir lint --add-noqa`` (Ruff's flag): write a suppression for every reported finding into its model
    (metadata rnnir.noqa, rewritten in place like ``--fix``); returns the exit status (2 when a model could
    not take them)."""
    from rnnir.onnxio.metadata import NoqaFormatError, read_noqa, write_noqa
    from rnnir.onnxio.source import read_model

    status = 0
    added = models = 0
    for f in files:
        new = sorted({noqa_entry(d) for d in f.diagnostics if d.code != "RN100"})  # an unused entry is removed, not suppressed
        if f.error is not None or not new:
            continue
        path = Path(f.path)
        try:
            if path.suffix.lower() == ".rnnir":
                raise FixUsageError("IR text has no metadata to hold suppressions; suppress in the ONNX model it came from")
            with _rewriting(path):  # re-read under the lock: another writer's entries are kept
                source = read_model(str(path))
                if source.has_external_data:
                    raise FixUsageError(f"keeps its weights in external data; add suppressions with `rnnir fix {path} --suppress CODE -o OUT`")
                before = read_noqa(source.model)
                write_noqa(source.model, [*before, *new])
                write_model(source.model, path, external=False)
        except (RnnirError, OSError, NoqaFormatError) as exc:
            text = str(exc)
            text = text[len(f"{path}: ") :] if text.startswith(f"{path}: ") else text
            print(printable(f"rnnir: error: {path}: cannot add suppressions: {text}"), file=sys.stderr)
            status = 2
            continue
        count = len(set(new) - set(before))
        added += count
        models += bool(count)
    print(f"Added {added} suppression{'s' if added != 1 else ''} to {models} model{'s' if models != 1 else ''}.", file=sys.stderr)
    return status


# -- rnnir lint --fix / --diff --------------------------------------------------------------


def _suppressed_codes(path: str) -> set[str]:
    """Rule codes the model's own suppression list names (none for IR text, or a model that cannot be read:
    the fix reports that itself)."""
    from rnnir.onnxio.metadata import NoqaFormatError, read_noqa
    from rnnir.onnxio.source import read_model
    from rnnir.passes import Suppression

    if path.lower().endswith(".rnnir"):
        return set()
    try:
        return {Suppression.parse(e).code for e in read_noqa(read_model(path).model)}
    except (RnnirError, OSError, NoqaFormatError):
        return set()


def lint_fixes(jobs: Sequence[LintJob], *, diff: bool, unsafe: bool) -> int:
    """Fix (or, with ``--diff``, show the fixes of) every job's file, with its own settings; returns an exit status.

    ``--diff``: 1 when some file has something to fix, else 0 (2 when a file could not be fixed).
    ``--fix``: 0, or 2 when a file could not be read or written (the lint that follows reports the rest).
    """
    from rnnir.fixes.catalogue import FIXES
    from rnnir.fixes.diff import render_diff
    from rnnir.fixes.engine import fix
    from rnnir.onnxio.source import read_model
    from rnnir.passes import RULES
    from rnnir.passes.manager import selected_codes

    status = 0
    changed = False
    out: list[str] = []
    fixed_files = fixed_findings = held_back = 0
    for job in jobs:
        path = job.path
        if Path(path).suffix.lower() == ".rnnir":  # linted, but never edited: say so rather than leave it unsaid
            print(f"rnnir: warning: {path}: not fixed: --fix edits ONNX models, and this is rnnir IR text; fix the model it came from", file=sys.stderr)
            continue
        codes = selected_codes(RULES, job.select, job.ignore) & set(FIXES)
        try:
            # as Ruff's --fix leaves noqa-ed lines alone: a rule the model suppresses (wholly or for one node) is not fixed in it
            codes -= _suppressed_codes(path)
            if diff:
                result = fix(path, codes=sorted(codes), unsafe=unsafe, pairs=job.pairs)
                out.append(printable_lines(render_diff(read_model(path).model, result.model, path, result.edits)))
                changed = changed or result.changed
                continue
            with _rewriting(Path(path)):  # read, fix and replace under a lock: a concurrent edit is re-read, not lost
                result = fix(path, codes=sorted(codes), unsafe=unsafe, pairs=job.pairs)
                if result.changed:
                    if _has_external_data(Path(path)):
                        raise FixUsageError(f"{path}: keeps its weights in external data; fix it with `rnnir fix {path} -o OUT`")
                    write_model(result.model, Path(path), external=False)
            for e in result.edits:
                print(printable(f"{path}: fixed: {e}"), file=sys.stderr)
            for e in result.skipped:
                if e.reason.startswith("not certain"):
                    print(printable(f"{path}: not fixed: {e}"), file=sys.stderr)
                    held_back += 1
            fixed_files += bool(result.edits)
            fixed_findings += len(result.edits)
        except (ModelError, PairingError):
            continue  # an unreadable model, or pairs it does not have: the lint that follows reports it, once
        except (RnnirError, OSError) as exc:
            print(printable(f"rnnir: error: {path}: cannot fix: {exc}"), file=sys.stderr)
            status = 2
    if diff:
        sys.stdout.write("".join(out))
        sys.stdout.flush()
        return max(status, 1 if changed else 0)
    if fixed_findings or held_back:
        from rnnir.render.text import plural

        # as Ruff's summary: what was fixed, and what --unsafe-fixes would also fix (the lint that follows lists the rest)
        done = f"fixed {plural(fixed_findings, 'finding')} in {plural(fixed_files, 'file')}" if fixed_findings else "fixed nothing"
        more = f"; {plural(held_back, 'unsafe fix', 'unsafe fixes')} not applied (--unsafe-fixes applies {'them' if held_back != 1 else 'it'})" if held_back else ""
        print(done + more, file=sys.stderr)
    return status



def explain_fix(code: str) -> str:
    """The ``Fix`` section ``rnnir explain`` appends for a rule that has an automatic fix ("" otherwise)."""
    from rnnir.fixes.catalogue import FIXES  # not rnnir.fixer: `rnnir explain` stays free of onnx and numpy

    info = FIXES.get(code)
    if info is None:
        return ""
    how = "`rnnir lint --fix`" + (", `--unsafe-fixes` for the unsafe case" if info.safe != "safe" else "")
    body = textwrap.fill(info.text, width=96, initial_indent="    ", subsequent_indent="    ")
    return f"\nFix ({info.safe}: {how})\n{body}\n"
