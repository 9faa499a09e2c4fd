"""A small directed graph with the networkx.DiGraph interface the IR and the passes use.

Why not networkx itself: importing networkx costs about as much as importing
onnx (0.15-0.4 s here), which alone made ``rnnir lint`` twice as slow as
``onnx.checker`` on small models.  The IR needs only insertion, adjacency,
topological order, reachability and one shortest path, all linear-time BFS/DFS
below.  :meth:`DiGraph.to_networkx` hands the same graph to networkx for
anything else (it imports networkx then, and only then).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Iterator
from typing import Any

__all__ = [
    "DiGraph",
    "NoCycle",
    "NoPath",
    "ancestors",
    "descendants",
    "find_cycle",
    "has_path",
    "is_directed_acyclic_graph",
    "shortest_path",
    "topological_sort",
]


class NoCycle(Exception):
    """find_cycle found none."""


class NoPath(Exception):
    """shortest_path found none."""


class _NodeView:
    __slots__ = ("_g",)

    def __init__(self, g: DiGraph) -> None:
        self._g = g

    def __getitem__(self, n: Hashable) -> dict[str, Any]:
        return self._g._attrs[n]

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._g._attrs)

    def __contains__(self, n: object) -> bool:
        return n in self._g._attrs

    def __len__(self) -> int:
        return len(self._g._attrs)

    def __call__(self, data: bool | str = False) -> list[Any]:
        if data is False:
            return list(self._g._attrs)
        if data is True:
            return list(self._g._attrs.items())
        return [(n, a.get(data)) for n, a in self._g._attrs.items()]


class _EdgeView:
    __slots__ = ("_g",)

    def __init__(self, g: DiGraph) -> None:
        self._g = g

    def __iter__(self) -> Iterator[tuple[Hashable, Hashable]]:
        for u, nbrs in self._g._succ.items():
            for v in nbrs:
                yield (u, v)

    def __len__(self) -> int:
        return sum(len(n) for n in self._g._succ.values())

    def __getitem__(self, edge: tuple[Hashable, Hashable]) -> dict[str, Any]:
        u, v = edge
        return self._g._succ[u][v]

    def __contains__(self, edge: object) -> bool:
        return isinstance(edge, tuple) and len(edge) == 2 and self._g.has_edge(*edge)

    def __call__(self, data: bool | str = False) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for u, nbrs in self._g._succ.items():
            for v, attrs in nbrs.items():
                if data is False:
                    out.append((u, v))
                elif data is True:
                    out.append((u, v, attrs))
                else:
                    out.append((u, v, attrs.get(data)))
        return out


class DiGraph:
    """Nodes with attribute dicts, directed edges with attribute dicts, insertion-ordered."""

    def __init__(self) -> None:
        self._attrs: dict[Hashable, dict[str, Any]] = {}
        self._succ: dict[Hashable, dict[Hashable, dict[str, Any]]] = {}
        self._pred: dict[Hashable, dict[Hashable, dict[str, Any]]] = {}
        self.changes = 0  # counts every add and removal: a Program's version includes it (its graph is public)

    # -- construction -----------------------------------------------------------------------
    def add_node(self, n: Hashable, **attr: Any) -> None:
        self.changes += 1
        if n not in self._attrs:
            self._attrs[n] = {}
            self._succ[n] = {}
            self._pred[n] = {}
        self._attrs[n].update(attr)

    def add_nodes_from(self, nodes: Iterable[Hashable]) -> None:
        for n in nodes:
            self.add_node(n)

    def add_edge(self, u: Hashable, v: Hashable, **attr: Any) -> None:
        if u in self._attrs and v in self._attrs:
            self.changes += 3  # as many as adding both ends and the edge counts (the ends are there already)
        else:
            self.add_node(u)
            self.add_node(v)
            self.changes += 1
        data = self._succ[u].get(v)
        if data is None:
            data = {}
            self._succ[u][v] = data
            self._pred[v][u] = data
        data.update(attr)

    def add_edges_from(self, edges: Iterable[tuple[Hashable, Hashable]]) -> None:
        for u, v in edges:
            self.add_edge(u, v)

    def remove_edge(self, u: Hashable, v: Hashable) -> None:
        if not self.has_edge(u, v):
            raise KeyError((u, v))
        self.changes += 1
        del self._succ[u][v]
        del self._pred[v][u]

    # -- queries ----------------------------------------------------------------------------
    @property
    def nodes(self) -> _NodeView:
        return _NodeView(self)

    @property
    def edges(self) -> _EdgeView:
        return _EdgeView(self)

    def has_node(self, n: Hashable) -> bool:
        return n in self._attrs

    def attrs_of(self, n: Hashable) -> dict[str, Any] | None:
        """Node ``n``'s attribute dict, None when there is no such node (one lookup: ``n in g and g.nodes[n]``)."""
        return self._attrs.get(n)

    def has_edge(self, u: Hashable, v: Hashable) -> bool:
        return v in self._succ.get(u, ())

    def successors(self, n: Hashable) -> Iterator[Hashable]:
        return iter(self._succ[n])

    def predecessors(self, n: Hashable) -> Iterator[Hashable]:
        return iter(self._pred[n])

    def number_of_nodes(self) -> int:
        return len(self._attrs)

    def number_of_edges(self) -> int:
        return sum(len(n) for n in self._succ.values())

    def __contains__(self, n: object) -> bool:
        return n in self._attrs

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._attrs)

    def __len__(self) -> int:
        return len(self._attrs)

    def to_networkx(self) -> Any:
        """The same graph as a ``networkx.DiGraph`` (imports networkx)."""
        import networkx as nx

        g = nx.DiGraph()
        for n, a in self._attrs.items():
            g.add_node(n, **a)
        for u, nbrs in self._succ.items():
            for v, a in nbrs.items():
                g.add_edge(u, v, **a)
        return g


def topological_sort(g: DiGraph) -> list[Hashable]:
    """Kahn's algorithm, ties broken by insertion order; raises ValueError on a cycle."""
    indeg = {n: len(p) for n, p in g._pred.items()}
    ready = deque(n for n, d in indeg.items() if d == 0)
    order: list[Hashable] = []
    while ready:
        n = ready.popleft()
        order.append(n)
        for v in g._succ[n]:
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    if len(order) != len(indeg):
        raise ValueError("graph has a cycle")
    return order


def is_directed_acyclic_graph(g: DiGraph) -> bool:
    try:
        topological_sort(g)
    except ValueError:
        return False
    return True


def find_cycle(g: DiGraph) -> list[tuple[Hashable, Hashable]]:
    """The edges of one cycle; raises NoCycle when the graph is acyclic."""
    color: dict[Hashable, int] = {}  # 1 on the stack, 2 done
    for root in g._attrs:
        if root in color:
            continue
        stack: list[tuple[Hashable, Iterator[Hashable]]] = [(root, iter(g._succ[root]))]
        path = [root]
        color[root] = 1
        while stack:
            n, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                path.pop()
                color[n] = 2
                continue
            c = color.get(nxt)
            if c == 1:
                cyc = path[path.index(nxt) :] + [nxt]
                return list(zip(cyc, cyc[1:]))
            if c is None:
                color[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(g._succ[nxt])))
    raise NoCycle("no cycle")


def _reach(adj: dict[Hashable, dict[Hashable, Any]], source: Hashable) -> set[Hashable]:
    seen = _reach_any(adj, (source,))
    seen.discard(source)
    return seen


def _reach_any(adj: dict[Hashable, dict[Hashable, Any]], sources: Iterable[Hashable]) -> set[Hashable]:
    """Every node one or more steps from one of ``sources`` (a source itself only if it is reached so)."""
    seen: set[Hashable] = set()
    todo = list(sources)
    while todo:
        n = todo.pop()
        for m in adj[n]:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def ancestors_of_any(g: DiGraph, ns: Iterable[Hashable]) -> set[Hashable]:
    """Every node with a path to one of ``ns`` (one of ``ns`` only if it has a path to another or itself)."""
    return _reach_any(g._pred, ns)


def ancestors(g: DiGraph, n: Hashable) -> set[Hashable]:
    """Every node with a path to ``n`` (not ``n`` itself)."""
    return _reach(g._pred, n)


def descendants(g: DiGraph, n: Hashable) -> set[Hashable]:
    """Every node reachable from ``n`` (not ``n`` itself)."""
    return _reach(g._succ, n)


def shortest_path(g: DiGraph, source: Hashable, target: Hashable) -> list[Hashable]:
    """Fewest-edges path by BFS; raises NoPath."""
    parent: dict[Hashable, Hashable | None] = {source: None}
    todo = deque([source])
    while todo:
        n = todo.popleft()
        if n == target:
            path = [n]
            while parent[path[-1]] is not None:
                path.append(parent[path[-1]])
            return path[::-1]
        for m in g._succ[n]:
            if m not in parent:
                parent[m] = n
                todo.append(m)
    raise NoPath(f"no path from {source!r} to {target!r}")


def has_path(g: DiGraph, source: Hashable, target: Hashable) -> bool:
    try:
        shortest_path(g, source, target)
    except NoPath:
        return False
    return True
