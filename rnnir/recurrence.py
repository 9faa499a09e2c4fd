"""Temporary shim: moved to rnnir.ir.recurrence."""
import sys
from typing import TYPE_CHECKING

from rnnir.ir import recurrence as _moved

if TYPE_CHECKING:  # what mypy needs to see through the shim: the names imported from the old path
    from rnnir.ir.recurrence import KINDS as KINDS  # noqa: F401
    from rnnir.ir.recurrence import Recognition as Recognition  # noqa: F401
    from rnnir.ir.recurrence import RecurrenceKind as RecurrenceKind  # noqa: F401
    from rnnir.ir.recurrence import kind_for_op as kind_for_op  # noqa: F401
    from rnnir.ir.recurrence import kind_named as kind_named  # noqa: F401

sys.modules[__name__] = _moved
