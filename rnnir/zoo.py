"""Temporary shim: moved to rnnir.lint.zoo."""
import sys
from typing import TYPE_CHECKING

from rnnir.lint import zoo as _moved

sys.modules[__name__] = _moved

if TYPE_CHECKING:
    from rnnir.lint.zoo import Shard as Shard  # noqa: F401
    from rnnir.lint.zoo import ShardError as ShardError  # noqa: F401
    from rnnir.lint.zoo import lint_many as lint_many  # noqa: F401
