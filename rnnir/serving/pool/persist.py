"""One stream of a pool on disk: a state file in :meth:`StatefulSession.save_state`'s format that names its
session, so that one stream's state never reaches another by mistake."""

from __future__ import annotations

import json
import os
from collections.abc import Hashable, Mapping
from pathlib import Path

import numpy as np

from rnnir.errors import StateError
from rnnir.runtime.session import StatefulSession
from rnnir.runtime.statefile import STATE_FORMAT, read_state_file, write_atomically
from rnnir.runtime.versioning import StateMigrations, StateOrigin, VersionOutcome, VersionPolicy, reconcile
from rnnir.serving.pool.arena import row_of
from rnnir.serving.pool.streams import StreamTable

__all__ = ["PoolStateFiles", "check_state", "session_key"]


class PoolStateFiles(StreamTable):
    """:meth:`save_state` and :meth:`load_state` of a :class:`~rnnir.serving.pool.SessionPool` (its base class)."""

    # -- a stream's state on disk: bound to the model, its state version and the session -----
    def save_state(self, sid: Hashable, path: str | os.PathLike[str]) -> Path:
        """Write one stream's state (and kept context) in :meth:`StatefulSession.save_state`'s format,
        naming the session: :meth:`load_state` puts it back into that session only."""
        with self._lock:
            stream = self._get(sid)
            if self._arenas is None or stream.row < 0:
                pending = self._pending.get(sid)
                snap = {k: np.array(v) for k, v in pending.items()} if pending is not None else None
            else:
                snap = {name: arena.row(stream.row) for name, arena in self._arenas.items()}
            if self._ctx_arenas is None or stream.row < 0:
                context = {name: np.array(v) for name, v in self._pending_ctx.get(sid, {}).items()}
            else:
                context = {name: arena.row(stream.row) for name, arena in self._ctx_arenas.items()}
        if snap is None:
            raise StateError(f"session {sid!r} has not run yet: its state is the initial state, nothing to save")
        meta = {
            "format": STATE_FORMAT, "fingerprint": self.fingerprint, "state_version": self.state_version, "model": self.label,
            "session": str(sid), "session_key": session_key(sid), "slots": {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in snap.items()},
        }
        target = Path(path)
        entries = {f"slot:{k}": v for k, v in snap.items()} | {f"context:{k}": v for k, v in context.items()}
        # atomic, as StatefulSession's: a full disk leaves the previous file as it was and raises StateError
        write_atomically(target, lambda f: np.savez(f, __rnnir_state__=np.array(json.dumps(meta)), **entries))  # type: ignore[arg-type]  # numpy's stub types **kwds as allow_pickle
        return target

    def load_state(
        self,
        sid: Hashable,
        path: str | os.PathLike[str],
        *,
        on_version_mismatch: VersionPolicy | str = VersionPolicy.REFUSE,
        migrations: StateMigrations | None = None,
        from_session: Hashable | None = None,
    ) -> VersionOutcome:
        """Put a saved state into stream ``sid`` (opened if needed).  A state saved from a pool names its
        session: it loads into that session only, unless ``from_session`` names it (a deliberate move;
        another stream's state is otherwise exactly the leak the pool must not allow).  A state saved by a
        StatefulSession names none.  Model and version as for :meth:`StatefulSession.load_state`.
        The kept context comes back with the state, also before the pool's first call."""
        target = Path(path)
        policy = VersionPolicy(on_version_mismatch)
        # StatefulSession's reader: only a regular file, sizes bounded before anything is decompressed
        meta, entries = read_state_file(target, self._solo.state_file_limit(exact=policy is VersionPolicy.REFUSE and migrations is None))
        arrays = {k[len("slot:") :]: v for k, v in entries.items() if k.startswith("slot:")}
        contexts = {k[len("context:") :]: v for k, v in entries.items() if k.startswith("context:")}
        if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT:
            raise StateError(f"{target}: not a state file of format {STATE_FORMAT}")
        owner = meta.get("session")
        # the typed key tells 1 from "1"; files written before it was saved name the session by str() alone
        owner_key = meta.get("session_key")
        if owner_key is not None:
            foreign = owner_key != session_key(sid) and (from_session is None or session_key(from_session) != owner_key)
        else:
            foreign = owner is not None and owner != str(sid) and (from_session is None or str(from_session) != owner)
        if foreign:
            raise StateError(
                f"{target} holds the state of session {owner!r}, not of {sid!r}: one stream's state must not reach "
                "another; pass from_session= to move it deliberately"
            )
        saved = StateOrigin(str(meta.get("fingerprint")), meta.get("state_version"), str(meta.get("model")))
        mine = StateOrigin(self.fingerprint, self.state_version, self.label)
        outcome, state = reconcile(saved, mine, arrays, policy, migrations, where=str(target))
        if state is not None:
            check_state(state, self._solo, str(target))
            self._check_rows(state, str(target))
        kept = {c.input: contexts[c.input] for c in self._contexts if c.input in contexts}
        if state is not None and self._ctx_arenas is not None:
            for name, value in kept.items():  # checked before anything changes
                if name in self._ctx_arenas:
                    row_of(value, self._ctx_arenas[name].initial.shape, f"{target}: context {name!r}")
        with self._lock:
            stream = self._streams.get(sid) or self._open(sid, self.clock())
            self._put_state(stream, state)  # None (reset policy): the initial state, and the context cleared
            self._put_context(stream, kept if state is not None else None)
        return outcome


def session_key(sid: Hashable) -> str:
    """A session id as saved in a state file: its type and repr, so that ``1``, ``"1"`` and ``("1",)`` differ."""
    return f"{type(sid).__qualname__}:{sid!r}"


def check_state(state: Mapping[str, np.ndarray], solo: StatefulSession, where: str) -> None:
    expected = {s.input: s for s in solo.slots}
    if set(state) != set(expected):
        raise StateError(f"{where}: state names {sorted(state)}, the new model's state inputs are {sorted(expected)}")
    for name, value in state.items():
        spec = expected[name]
        if value.dtype != spec.dtype:
            raise StateError(f"{where}: state {name!r} is {value.dtype}, the new model takes {spec.dtype}")
        if spec.shape is not None:
            if len(spec.shape) != value.ndim or any(isinstance(d, int) and d > 0 and d != v for d, v in zip(spec.shape, value.shape)):
                raise StateError(f"{where}: state {name!r} has shape {value.shape}, the new model declares {list(spec.shape)}")

