"""Temporary shim: moved to rnnir.runtime.versioning."""
import sys
from typing import TYPE_CHECKING

from rnnir.runtime import versioning as _moved

sys.modules[__name__] = _moved

if TYPE_CHECKING:
    from rnnir.runtime.versioning import StateMigrations, StateOrigin, VersionOutcome, VersionPolicy, compatible, reconcile  # noqa: F401
