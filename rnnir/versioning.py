"""Temporary shim: moved to rnnir.runtime.versioning."""
import sys
from typing import TYPE_CHECKING

from rnnir.runtime import versioning as _moved

sys.modules[__name__] = _moved

if TYPE_CHECKING:
    from rnnir.runtime.versioning import StateMigrations as StateMigrations, StateOrigin as StateOrigin, VersionOutcome as VersionOutcome, VersionPolicy as VersionPolicy, compatible as compatible, reconcile as reconcile  # noqa: F401
