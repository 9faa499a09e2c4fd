"""Baseline files: adopt ``rnnir lint`` in CI on models that already have findings, and fail only on new ones.

    rnnir lint models/ --write-baseline rnnir-baseline.json   # record today's findings (commit the file)
    rnnir lint models/ --baseline rnnir-baseline.json         # report only findings not recorded there

A finding is matched by its **fingerprint**, never by its message or its position in the output:

* the rule code (``SD002``);
* the model's path relative to the folder of the baseline file (``/``-separated), so the file works from
  any working directory and on any machine;
* the slot the finding is about (``h0``), if any;
* the names of the places it points at: for each location, the If-branch path, the ONNX node name and the
  value name (``if_sr.else_branch/else_lstm/Y_c``).  Names rnnir makes up for its own IR nodes (``store1``)
  are left out: they are numbered, and a number is no identity.

So a fingerprint changes when the model is moved or renamed, the state slot or an ONNX node or value it
names is renamed, the finding moves into another If branch, or the rule changes code; it does not change
when a message is reworded or its numbers change, when other findings come or go, with the order of
files or findings, or with the severity (``--strict``).  Two findings with one fingerprint are counted:
the baseline records how many it accepts, and a third one is new.

The file is JSON (version :data:`BASELINE_VERSION`), entries sorted by model, code, slot and places, one
key per line, so a regenerated baseline diffs cleanly in review.  Each entry carries its fingerprint as a
digest of its other fields (its count included, so a count can be lowered by hand but never raised): an entry
edited by hand into something rnnir never wrote is refused (exit 2)
rather than silently matching nothing.  Entries that match nothing any more (the bug was fixed, the model
moved) are *stale*: reported on one line, an error only with ``--exit-non-zero-on-stale-baseline``.
Models the run did not lint (another shard, another folder) and rules it did not run are not judged.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rnnir.errors import RnnirError
from rnnir.passes.diagnostics import Diagnostic, Location
from rnnir.util.jsontext import JSONTextError, parse_json
from rnnir.util.regularfile import UnreadableFile, read_regular

__all__ = ["BASELINE_VERSION", "Baseline", "BaselineError", "Fingerprint", "fingerprint"]

BASELINE_VERSION = 1
#: the largest baseline file read (a baseline of a million findings is some 300 MB of JSON; nobody reviews that)
MAX_BASELINE_BYTES = 64 << 20
#: the most findings one entry accepts: more than any model has of one rule at one place (and a bound on the
#: hashing that checks a count, see Fingerprint.entry_digest)
MAX_BASELINE_COUNT = 10_000
_ABOUT = "rnnir lint --baseline: findings recorded here are not reported; regenerate with rnnir lint PATH... --write-baseline FILE"
_KEYS = {"model", "code", "slot", "where", "count", "fingerprint"}


class BaselineError(RnnirError):
    """The baseline file is missing, not a baseline, of another version, or edited into something rnnir never wrote."""


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, order=True)
class Fingerprint:
    """What identifies a finding across runs (see the module docstring for what changes it)."""

    model: str  # relative to the baseline file's folder, "/"-separated
    code: str
    slot: str
    where: tuple[str, ...]

    @property
    def digest(self) -> str:
        text = json.dumps([BASELINE_VERSION, self.model, self.code, self.slot, list(self.where)], ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def entry_digest(self, count: int) -> str:
        """The digest a baseline entry accepting ``count`` such findings carries: :attr:`digest` hashed on
        ``count - 1`` more times.  So an entry of count 1 digests as it always did, lowering a count by hand
        still verifies (:meth:`verifies`: hashing on from the lower count reaches the written digest), and
        raising one does not (the written digest lies behind it).  Like the digest, it catches edits made by
        mistake; it is no secret."""
        text = self.digest
        for _ in range(count - 1):
            text = _next_count(text)
        return text

    def verifies(self, count: int, written: str) -> bool:
        """Whether ``written`` is the digest of this finding with ``count`` or more accepted."""
        text = self.entry_digest(count)
        for _ in range(MAX_BASELINE_COUNT - count + 1):
            if text == written:
                return True
            text = _next_count(text)
        return False

    def describe(self) -> str:
        at = f" at {', '.join(self.where)}" if self.where else ""
        return f"{self.model}: {self.code}{f' (slot {self.slot})' if self.slot else ''}{at}"


def _place(loc: Location) -> str | None:
    node = loc.onnx_node if loc.onnx_node and loc.onnx_node != loc.node else None  # IR-made ids are numbered
    parts = [*loc.branch, *(p for p in (node, loc.value) if p)]
    return "/".join(parts) if parts else None


def model_key(model: str | os.PathLike[str], root: Path) -> str:
    """``model`` relative to ``root`` (the baseline file's folder), ``/``-separated."""
    return Path(os.path.relpath(Path(model).resolve(), root.resolve())).as_posix()


def fingerprint(d: Diagnostic, model: str | os.PathLike[str], root: Path) -> Fingerprint:
    where = tuple(sorted({p for p in map(_place, d.locations) if p is not None}))
    return Fingerprint(model_key(model, root), d.code, d.slot or "", where)


@dataclass
class Baseline:
    """The findings a baseline file accepts, each with how many times."""

    path: Path
    accepted: Counter[Fingerprint] = field(default_factory=Counter)

    @property
    def root(self) -> Path:
        return self.path.resolve().parent

    @classmethod
    def of(cls, path: Path, findings: Iterable[tuple[str, Diagnostic]]) -> Baseline:
        """A baseline at ``path`` accepting ``findings`` (``(model path, diagnostic)`` pairs)."""
        baseline = cls(path)
        baseline.accepted.update(fingerprint(d, model, baseline.root) for model, d in findings)
        return baseline

    def to_json(self) -> dict[str, Any]:
        entries = [
            {"model": fp.model, "code": fp.code, "slot": fp.slot, "where": list(fp.where), "count": n, "fingerprint": fp.entry_digest(n)}
            for fp, n in sorted(self.accepted.items())
        ]
        return {"version": BASELINE_VERSION, "tool": "rnnir", "about": _ABOUT, "findings": entries}

    def write(self) -> None:
        """The whole file is built first, then replaced atomically (:func:`rnnir.util.writing.write_file`): a failure
        leaves the previous baseline as it was."""
        from rnnir.util.writing import write_file

        text = json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"
        # a file-name byte that was not UTF-8 (os.fsdecode's lone surrogate) is written as the JSON escape
        # \udcNN: valid UTF-8 text, read back by json.loads as the very same path
        text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
        write_file(self.path, text, what="--write-baseline", error=BaselineError)

    @classmethod
    def load(cls, path: Path) -> Baseline:
        where = str(path)
        try:
            text = read_regular(path, MAX_BASELINE_BYTES).decode("utf-8")
        except UnreadableFile as exc:
            if exc.missing:
                raise BaselineError(f"{where}: no such baseline file; record one with rnnir lint PATH... --write-baseline {where}") from None
            raise BaselineError(f"{where}: cannot read the baseline: {exc}") from None
        except UnicodeDecodeError as exc:
            raise BaselineError(f"{where}: cannot read the baseline: not UTF-8 ({exc.reason} at byte {exc.start})") from None
        try:
            doc = parse_json(text)
        except JSONTextError as exc:
            raise BaselineError(f"{where}: not a baseline file: {exc}") from None
        if not isinstance(doc, dict) or "findings" not in doc or "version" not in doc:
            raise BaselineError(f"{where}: not a baseline file: expected a JSON object with 'version' and 'findings' (written by --write-baseline)")
        if type(doc["version"]) is not int or doc["version"] != BASELINE_VERSION:  # JSON true is no version 1
            raise BaselineError(f"{where}: baseline version {doc['version']!r} is not supported (this rnnir reads version {BASELINE_VERSION}); regenerate it with --write-baseline")
        if not isinstance(doc["findings"], list):
            raise BaselineError(f"{where}: 'findings' must be a list")
        baseline = cls(path)
        for k, entry in enumerate(doc["findings"], 1):
            fp, count = _entry(entry, f"{where}: entry {k}")
            if fp in baseline.accepted:
                raise BaselineError(f"{where}: entry {k} ({fp.describe()}) is listed twice; regenerate the baseline with --write-baseline")
            baseline.accepted[fp] = count
        return baseline

    def apply(self, findings: Sequence[tuple[str, Diagnostic]]) -> tuple[list[bool], Counter[Fingerprint]]:
        """For each finding, whether the baseline accepts it (first come, first accepted, up to each count),
        and what is left of the accepted counts (the candidates for stale entries)."""
        left = Counter(self.accepted)
        accepted: list[bool] = []
        for model, d in findings:
            fp = fingerprint(d, model, self.root)
            if left[fp] > 0:
                left[fp] -= 1
                accepted.append(True)
            else:
                accepted.append(False)
        return accepted, +left

    def stale(self, left: Counter[Fingerprint], judged: Callable[[Fingerprint], bool]) -> list[tuple[Fingerprint, int]]:
        """Entries with findings left unmatched, among those this run could have matched."""
        return [(fp, n) for fp, n in sorted(left.items()) if judged(fp)]


def _next_count(digest: str) -> str:
    return hashlib.sha256(f"rnnir-baseline-count:{digest}".encode()).hexdigest()[:16]


def _entry(entry: Any, where: str) -> tuple[Fingerprint, int]:
    if not isinstance(entry, dict) or set(entry) != _KEYS:
        keys = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
        raise BaselineError(f"{where}: expected the keys {', '.join(sorted(_KEYS))}, got {keys}")
    strings = ("model", "code", "slot", "fingerprint")
    if not all(isinstance(entry[k], str) for k in strings) or not isinstance(entry["where"], list) or not all(isinstance(w, str) for w in entry["where"]):
        raise BaselineError(f"{where}: model, code, slot and fingerprint must be strings, where a list of strings")
    count = entry["count"]
    if type(count) is not int or count < 1:  # JSON true is no count, 1.0 neither
        raise BaselineError(f"{where}: count must be a whole number of at least 1, not {count!r}")
    if count > MAX_BASELINE_COUNT:
        raise BaselineError(f"{where}: count {count} is over the limit of {MAX_BASELINE_COUNT} findings per entry; regenerate the baseline with --write-baseline")
    fp = Fingerprint(entry["model"], entry["code"], entry["slot"], tuple(entry["where"]))
    if not fp.verifies(count, entry["fingerprint"]):
        raise BaselineError(
            f"{where} ({fp.describe()}) does not match its fingerprint: it was edited by hand (a count may be lowered, never raised); "
            "delete whole entries to un-accept findings, or regenerate the baseline with --write-baseline"
        )
    return fp, count
