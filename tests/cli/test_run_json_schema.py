"""docs/json-schema.md's `rnnir run --format json` section lists exactly the keys the command writes.

The oracle is the command's own output (run in process on a committed sample with every streaming
check switched on); the doc's tables are parsed, so a key added to the report without its doc line,
or a doc line for a key that is gone, fails here instead of rotting.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from rnnir.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "json-schema.md"
SECTION = "## `rnnir run --format json`"


TYPE_WORDS = {"int": "integer", "number": "number", "bool": "boolean", "string": "string", "object": "object", "array": "array", "null": "null"}


def documented_types(text: str) -> dict[str, dict[str, set[str]]]:
    """Heading path -> key -> its JSON types, from the type column ('' is the section's own table).  A heading
    naming two paths (`a` and `b`) gives both the same keys; a row naming two keys with two types (`status`, `ok` |
    string, bool) pairs them up."""
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    tables: dict[str, dict[str, set[str]]] = {}
    paths = [""]
    for line in text[start:end].splitlines():
        if line.startswith("### "):
            paths = re.findall(r"`([^`]+)`", line)
            continue
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        keys = re.findall(r"`([^`]+)`", cells[0])
        kinds = [k.strip() for k in cells[1].split(",")]
        for path in paths:
            for i, key in enumerate(keys):
                cell = kinds[i] if len(kinds) == len(keys) else cells[1]
                tables.setdefault(path, {})[key] = {TYPE_WORDS[w] for w in re.findall(r"[a-z]+", cell) if w in TYPE_WORDS}
    return tables


def documented_keys(text: str) -> dict[str, set[str]]:
    """Heading path -> the keys in its table's first column ('' is the section's own table)."""
    return {path: set(keys) for path, keys in documented_types(text).items()}


def emitted_keys(doc: dict) -> dict[str, list[set[str]]]:
    """The same paths in an emitted document -> the key sets of every object found there."""
    s = doc["streaming"]
    return {
        "": [set(doc)],
        "streaming": [set(s)],
        "streaming.latency": [set(s["latency"]), set(s["long"]["latency"])],
        "streaming.checks[]": [set(c) for c in s["checks"]],
        "streaming.burst_health.SLOT": [set(v) for v in s["burst_health"].values()],
        "streaming.long.slots.SLOT": [set(v) for v in s["long"]["slots"].values()],
        "streaming.cold_start": [set(s["cold_start"])],
        "streaming.long": [set(s["long"])],
        "streaming.isolation": [set(s["isolation"])],
    }


def mismatches(documented: dict[str, set[str]], emitted: dict[str, list[set[str]]]) -> list[str]:
    out = []
    if set(documented) != set(emitted):
        out.append(f"documented objects {sorted(documented)} != emitted {sorted(emitted)}")
    for path, found in emitted.items():
        want = documented.get(path, set())
        assert found, f"{path}: the run wrote no such object (switch the check on)"
        for keys in found:
            if keys != want:
                out.append(f"{path or 'top level'}: undocumented {sorted(keys - want)}, documented but not written {sorted(want - keys)}")
    return out


@pytest.fixture(scope="module")
def run_doc(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("run") / "run.json"
    code = main([
        "run", str(ROOT / "samples" / "gru_fanout.onnx"), "--calls", "40", "--chunk", "2", "--drop", "10", "--reconnect", "20",
        "--burst", "25:3", "--long", "50", "--streams", "3", "--format", "json", "--output", str(out),
    ])
    assert code == 0
    return json.loads(out.read_text())


def test_the_documented_run_keys_are_exactly_the_written_ones(run_doc):
    documented = documented_keys(DOC.read_text())
    assert len(documented) == 9 and all(documented.values())  # every table parsed: top level, streaming and 7 more
    assert mismatches(documented, emitted_keys(run_doc)) == []


def test_a_key_missing_from_the_doc_or_from_the_output_is_caught(run_doc):
    text = DOC.read_text()
    dropped = text.replace("| `state_bytes` | int |", "| state bytes | int |", 1)  # the doc line no longer names the key
    assert dropped != text
    assert mismatches(documented_keys(dropped), emitted_keys(run_doc)) == ["streaming: undocumented ['state_bytes'], documented but not written []"]
    run_doc = json.loads(json.dumps(run_doc))
    run_doc["streaming"]["isolation"]["rows_leaked"] = 0  # the report grows a key the doc does not have
    assert mismatches(documented_keys(text), emitted_keys(run_doc)) == ["streaming.isolation: undocumented ['rows_leaked'], documented but not written []"]
