"""Findings point at the ONNX graph's own nodes and values (issue 23), with the IR node id beside them.

A store exists in no ONNX graph: its finding names the node that produced the stored value (the Concat that
packs the state, the recurrent op, the Identity that hands the state back) and the value written back.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from rnnir import cli

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
ONNX_SAMPLES = sorted(SAMPLES.glob("*.onnx"))


def _graph_names(model: onnx.ModelProto) -> tuple[set[str], set[str]]:
    """Every node name and every value name of the model, subgraphs included."""
    nodes: set[str] = set()
    values: set[str] = set()

    def walk(g: onnx.GraphProto) -> None:
        values.update(v.name for v in [*g.input, *g.output, *g.value_info])
        values.update(t.name for t in g.initializer)
        for n in g.node:
            nodes.add(n.name)
            values.update(n.output)
            for a in n.attribute:
                for sub in [a.g] if a.HasField("g") else list(a.graphs):
                    walk(sub)

    walk(model.graph)
    return nodes, values


def _lint(capsys, paths, fmt):
    code = cli.main(["lint", "--no-config", *map(str, paths), "--format", fmt])
    assert code in (0, 1)
    return json.loads(capsys.readouterr().out)


@pytest.mark.skipif(not ONNX_SAMPLES, reason="samples/ not generated")
def test_every_json_location_of_every_sample_names_a_node_of_its_onnx_graph(capsys):
    doc = _lint(capsys, ONNX_SAMPLES, "json")
    seen = 0
    for f in doc["files"]:
        nodes, _ = _graph_names(onnx.load(f["path"]))
        for d in f["diagnostics"]:
            for loc in d["locations"]:
                seen += 1
                assert loc["node"] is None or loc["node"] in nodes, (f["path"], d["code"], loc)
                assert "ir_node" in loc
        for s in (f["verdicts"] or {}).get("slices", []):
            if "where" in s:
                _, values = _graph_names(onnx.load(f["path"]))
                assert s["where"] in nodes | values, (f["path"], s)
    assert seen > 20  # the samples have findings with locations to check


def test_a_store_is_located_at_the_concat_that_packs_the_state(capsys):
    path = SAMPLES / "sd002_hc_swap.onnx"
    if not path.exists():
        pytest.skip("samples/ not generated")
    model = onnx.load(path)
    (d,) = _lint(capsys, [path], "json")["files"][0]["diagnostics"]
    store = d["locations"][0]
    concat = next(n for n in model.graph.node if n.name == store["node"])
    assert concat.op_type == "Concat" and list(concat.output) == [store["value"]] == ["stateN"]
    assert store["value"] in {o.name for o in model.graph.output}  # ... whose value is the graph output
    assert store["ir_node"].startswith("store") and store["ir_node"] != store["node"]


def test_sarif_names_the_onnx_node_and_keeps_the_ir_node_as_a_property(capsys):
    path = SAMPLES / "sd002_hc_swap.onnx"
    if not path.exists():
        pytest.skip("samples/ not generated")
    (result,) = _lint(capsys, [path], "sarif")["runs"][0]["results"]
    first = result["locations"][0]
    assert first["logicalLocations"][0]["fullyQualifiedName"] == "graph/concat_state_swapped/stateN"
    assert first["properties"] == {"irNode": "store1"}
    assert all("store" not in loc["logicalLocations"][0]["fullyQualifiedName"] for loc in result["locations"])


def test_text_names_the_onnx_node_not_the_store(capsys):
    path = SAMPLES / "sd002_hc_swap.onnx"
    if not path.exists():
        pytest.skip("samples/ not generated")
    assert cli.main(["lint", "--no-config", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}: concat_state_swapped: SD002 [error]" in out.replace(str(path.relative_to(REPO)), str(path))
    assert "store1" not in out


def test_near_miss_a_store_of_the_loaded_state_has_no_onnx_node_but_its_value():
    # a program written as IR text whose store hands the loaded value straight back: no ONNX node stands behind
    # the store, so the location has none; the IR node and the value remain
    import rnnir
    from rnnir import passes

    b = rnnir.Builder("handed_back")
    h = b.slot("h", "float32", (1, 1, 2))
    h0 = b.load(h)
    b.store(h0, h)
    b.store(h0, b.output("hn"), "value")
    (d,) = [d for d in passes.run(b.build()) if d.code == "SD001"]
    (loc,) = [loc for loc in d.locations if loc.node and loc.node.startswith("store")]
    assert loc.onnx_node is None and loc.value == "h" and loc.to_json()["ir_node"] == loc.node
