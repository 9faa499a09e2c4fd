"""State bound to its model and to a state version the model declares.

A saved state (or the state of a running stream) only means something to the
graph that produced it.  The fingerprint (sha256 of the graph) pins it to one
exact graph; a **state version**, declared by the model in its metadata under
``rnnir.state_version``, lets a model author say "this new graph reads the
state of the old one as it is" (same version) or "it does not" (new version).

    from rnnir.runtime.versioning import StateMigrations, VersionPolicy, with_state_version
    model = with_state_version(onnx.load("vad.onnx"), "2")      # declare it (metadata only: same fingerprint)
    steps = StateMigrations()
    steps.register("1", "2", lambda state: {"state": state["state"] * 0.5})
    session.load_state("old.state", on_version_mismatch=VersionPolicy.MIGRATE, migrations=steps)

A state moves to another model when

* both models declare a state version and the versions are equal (the author
  vouches for it, even across different graphs), or
* at least one of them declares none, and the fingerprints are equal (the same graph);

so a declared version always decides: bumping it on an unchanged graph (say,
after changing the preprocessing outside the graph) makes old states foreign.

otherwise the caller's :class:`VersionPolicy` decides: ``REFUSE`` (the default:
:class:`~rnnir.StateError`), ``RESET`` (start from the new model's initial
state) or ``MIGRATE`` (apply the registered chain of migrations from the saved
version to the model's version; no chain is an error, never a silent reset).
:class:`~rnnir.pool.SessionPool.upgrade` applies the same rules to every
running stream.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import onnx

from rnnir.errors import StateError
from rnnir.onnxio import metadata

__all__ = [
    "STATE_VERSION_KEY",
    "Migration",
    "StateMigrations",
    "StateOrigin",
    "VersionOutcome",
    "VersionPolicy",
    "compatible",
    "model_state_version",
    "reconcile",
    "with_state_version",
]

STATE_VERSION_KEY = metadata.META_STATE_VERSION

Migration = Callable[[dict[str, np.ndarray]], Mapping[str, np.ndarray]]


class VersionPolicy(enum.Enum):
    """What to do with a state whose model is not the one loading it (different graph, different state version)."""

    REFUSE = "refuse"
    RESET = "reset"
    MIGRATE = "migrate"


class VersionOutcome(enum.Enum):
    """How a state was accepted."""

    SAME_MODEL = "same-model"  # equal fingerprints
    SAME_VERSION = "same-version"  # different graphs that declare the same state version
    MIGRATED = "migrated"
    RESET = "reset"


@dataclass(frozen=True)
class StateOrigin:
    """Which model a state belongs to."""

    fingerprint: str
    state_version: str | None
    label: str

    def describe(self) -> str:
        version = "no state version" if self.state_version is None else f"state version {self.state_version!r}"
        return f"{self.label!r} (fingerprint {self.fingerprint[:12]}..., {version})"


class StateMigrations:
    """Registered one-step migrations ``from_version -> to_version``; :meth:`migrate` chains them.

    A migration takes the state (state input name -> array, as
    :attr:`~rnnir.runtime.StatefulSession.state` gives it) and returns the state
    the newer model reads.  One step per source version, so a chain is never
    ambiguous.
    """

    def __init__(self) -> None:
        self._steps: dict[str, tuple[str, Migration]] = {}

    def register(self, from_version: str, to_version: str, migration: Migration) -> None:
        if from_version == to_version:
            raise StateError(f"a migration from state version {from_version!r} to itself is not a migration")
        if from_version in self._steps:
            raise StateError(
                f"a migration from state version {from_version!r} is already registered (to {self._steps[from_version][0]!r})"
            )
        self._steps[str(from_version)] = (str(to_version), migration)

    def path(self, from_version: str, to_version: str) -> list[tuple[str, str]] | None:
        """The chain of steps from one version to another, or None when there is none."""
        steps: list[tuple[str, str]] = []
        seen = {from_version}
        here = from_version
        while here != to_version:
            step = self._steps.get(here)
            if step is None:
                return None
            steps.append((here, step[0]))
            here = step[0]
            if here in seen:
                return None  # a cycle that never reaches the target
            seen.add(here)
        return steps

    def migrate(self, state: Mapping[str, np.ndarray], from_version: str, to_version: str) -> dict[str, np.ndarray]:
        chain = self.path(from_version, to_version)
        if chain is None:
            known = ", ".join(f"{a!r} -> {b!r}" for a, (b, _) in self._steps.items()) or "none"
            raise StateError(f"no registered migration leads from state version {from_version!r} to {to_version!r} (registered: {known})")
        out = {k: np.asarray(v) for k, v in state.items()}
        for a, _ in chain:
            fn = self._steps[a][1]
            out = {k: np.asarray(v) for k, v in fn(dict(out)).items()}
        return out


def model_state_version(model: onnx.ModelProto) -> str | None:
    """The state version the model declares in its metadata, or None."""
    return metadata.read(model).get(STATE_VERSION_KEY)


def with_state_version(model: onnx.ModelProto, version: str) -> onnx.ModelProto:
    """A copy of ``model`` declaring ``version`` (metadata only: the graph, and so the fingerprint, is unchanged)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    metadata.drop(out, STATE_VERSION_KEY)
    metadata.write(out, STATE_VERSION_KEY, str(version))
    return out


def compatible(saved: StateOrigin, target: StateOrigin) -> VersionOutcome | None:
    """SAME_MODEL / SAME_VERSION when a state of ``saved`` means the same to ``target``; None when a policy must decide."""
    if saved.state_version is not None and target.state_version is not None:
        if saved.state_version != target.state_version:
            return None
        return VersionOutcome.SAME_MODEL if saved.fingerprint == target.fingerprint else VersionOutcome.SAME_VERSION
    return VersionOutcome.SAME_MODEL if saved.fingerprint == target.fingerprint else None


def reconcile(
    saved: StateOrigin,
    target: StateOrigin,
    state: Mapping[str, np.ndarray],
    policy: VersionPolicy = VersionPolicy.REFUSE,
    migrations: StateMigrations | None = None,
    *,
    where: str = "state",
) -> tuple[VersionOutcome, dict[str, np.ndarray] | None]:
    """Decide whether ``state`` (of ``saved``) may go into ``target``; returns how, and the state to use
    (None: start from the target's initial state).  Raises :class:`~rnnir.StateError` when refused."""
    policy = VersionPolicy(policy)
    same = compatible(saved, target)
    if same is not None:
        return same, dict(state)
    mismatch = f"{where} belongs to {saved.describe()}, not to {target.describe()}"
    if policy is VersionPolicy.RESET:
        return VersionOutcome.RESET, None
    if policy is VersionPolicy.MIGRATE:
        if saved.state_version is None or target.state_version is None:
            raise StateError(
                f"{mismatch}: a migration needs both models to declare a state version (metadata {STATE_VERSION_KEY!r})"
            )
        if migrations is None:
            raise StateError(f"{mismatch}: policy MIGRATE but no migrations= were given")
        return VersionOutcome.MIGRATED, migrations.migrate(state, saved.state_version, target.state_version)
    raise StateError(
        f"{mismatch}: a state only means something to the graph that produced it (or one declaring the same "
        f"{STATE_VERSION_KEY!r}); load it into that model, or choose a policy: reset, or migrate with registered migrations"
    )
