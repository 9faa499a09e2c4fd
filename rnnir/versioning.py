"""Temporary shim: moved to rnnir.runtime.versioning."""
import sys
from typing import TYPE_CHECKING

from rnnir.runtime import versioning as _moved

sys.modules[__name__] = _moved

if TYPE_CHECKING:
    from rnnir.runtime.versioning import StateMigrations as StateMigrations  # noqa: F401
    from rnnir.runtime.versioning import StateOrigin as StateOrigin
    from rnnir.runtime.versioning import VersionOutcome as VersionOutcome
    from rnnir.runtime.versioning import VersionPolicy as VersionPolicy
    from rnnir.runtime.versioning import compatible as compatible
    from rnnir.runtime.versioning import reconcile as reconcile
