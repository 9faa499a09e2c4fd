"""Temporary shim: moved to rnnir.render.graph."""
import sys
from typing import TYPE_CHECKING

from rnnir.render import graph as _moved

sys.modules[__name__] = _moved

if TYPE_CHECKING:
    from rnnir.render.graph import print_program as print_program  # noqa: F401
    from rnnir.render.graph import to_dot as to_dot  # noqa: F401
    from rnnir.render.graph import to_mermaid as to_mermaid  # noqa: F401
