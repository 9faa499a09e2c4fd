"""rnnir.ir.digraph against networkx as the oracle, on random graphs."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from rnnir.ir import digraph


def _random_pair(seed: int, n: int = 40, p: float = 0.08, acyclic: bool = True):
    rng = random.Random(seed)
    ours, theirs = digraph.DiGraph(), nx.DiGraph()
    for i in range(n):
        ours.add_node(i, node=f"n{i}")
        theirs.add_node(i, node=f"n{i}")
    for u in range(n):
        for v in range(n):
            if u != v and (u < v or not acyclic) and rng.random() < p:
                ours.add_edge(u, v, kind="data")
                theirs.add_edge(u, v, kind="data")
    return ours, theirs


@pytest.mark.parametrize("seed", range(20))
def test_reachability_and_order_match_networkx(seed):
    ours, theirs = _random_pair(seed)
    for n in range(0, 40, 7):
        assert digraph.ancestors(ours, n) == nx.ancestors(theirs, n)
        assert digraph.descendants(ours, n) == nx.descendants(theirs, n)
    order = digraph.topological_sort(ours)
    pos = {n: i for i, n in enumerate(order)}
    assert sorted(order) == list(range(40)) and all(pos[u] < pos[v] for u, v in theirs.edges)
    for s, t in ((0, 39), (3, 30), (10, 11)):
        if nx.has_path(theirs, s, t):
            path = digraph.shortest_path(ours, s, t)
            assert len(path) == len(nx.shortest_path(theirs, s, t)) and all(theirs.has_edge(a, b) for a, b in zip(path, path[1:]))
        else:
            with pytest.raises(digraph.NoPath):
                digraph.shortest_path(ours, s, t)
    with pytest.raises(digraph.NoCycle):
        digraph.find_cycle(ours)
    assert sorted(ours.edges(data="kind")) == sorted(theirs.edges(data="kind"))
    same = ours.to_networkx()
    assert nx.utils.graphs_equal(same, theirs)


@pytest.mark.parametrize("seed", range(20))
def test_cycles_are_found_exactly_when_networkx_finds_one(seed):
    ours, theirs = _random_pair(seed, n=15, p=0.12, acyclic=False)
    assert digraph.is_directed_acyclic_graph(ours) == nx.is_directed_acyclic_graph(theirs)
    if not nx.is_directed_acyclic_graph(theirs):
        cycle = digraph.find_cycle(ours)
        assert cycle[0][0] == cycle[-1][1] and all(theirs.has_edge(u, v) for u, v in cycle)
        with pytest.raises(ValueError):
            digraph.topological_sort(ours)


def test_lint_does_not_import_networkx(tmp_path):
    import subprocess
    import sys

    model = tmp_path.parent / "m.onnx"
    from tests.support.onnx_models import lstm_h0c0

    model.write_bytes(lstm_h0c0().SerializeToString())
    code = (
        "import sys; from rnnir.cli import main; rc = main(['lint', sys.argv[1], '--format', 'json']); "
        "print('networkx' in sys.modules, 'onnxruntime' in sys.modules); sys.exit(rc)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(model)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False False"
