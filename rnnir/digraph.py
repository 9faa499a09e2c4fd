"""Temporary shim: moved to rnnir.ir.digraph."""
import sys
from typing import TYPE_CHECKING

from rnnir.ir import digraph as _moved

if TYPE_CHECKING:  # what mypy needs to see through the shim: the names imported from the old path
    from rnnir.ir.digraph import DiGraph as DiGraph  # noqa: F401
    from rnnir.ir.digraph import NoCycle as NoCycle  # noqa: F401
    from rnnir.ir.digraph import NoPath as NoPath  # noqa: F401
    from rnnir.ir.digraph import ancestors as ancestors  # noqa: F401
    from rnnir.ir.digraph import descendants as descendants  # noqa: F401
    from rnnir.ir.digraph import find_cycle as find_cycle  # noqa: F401
    from rnnir.ir.digraph import has_path as has_path  # noqa: F401
    from rnnir.ir.digraph import is_directed_acyclic_graph as is_directed_acyclic_graph  # noqa: F401
    from rnnir.ir.digraph import shortest_path as shortest_path  # noqa: F401
    from rnnir.ir.digraph import topological_sort as topological_sort  # noqa: F401

sys.modules[__name__] = _moved
