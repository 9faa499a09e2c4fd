"""Every documented rule of discovery and precedence, run row for row from the docs' own tables.

* docs/discovery.md: which ``pyproject.toml`` applies to a model (nearest wins, one without ``[tool.rnnir]`` is
  passed over, the working directory's as a fallback, ``--config`` / ``--no-config``, flags on top).  The table
  is parsed here and each row is built and linted; the oracle is the row itself.
* docs/pairing.md: where state pairs come from, strongest first.  For each two neighbouring ranks, a model on
  which both sources pair the same input with different outputs: the stronger one's pair is taken (and without
  it, the weaker one's is: both sources really apply).  The table's sources must be exactly the ones tested.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir
from rnnir import cli
from rnnir.onnxio.metadata import META_PAIRS
from tests.cli.test_cli import save, state_handed_back_lstm

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _table(path: Path, first_header: str) -> list[dict[str, str]]:
    """The Markdown table whose first header cell is ``first_header``, as one dict per row."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    header = [c.strip() for c in lines[start].strip().strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append(dict(zip(header, cells)))
    return rows


def _unquote(text: str) -> str:
    return text.strip().strip("`")


# -- configuration discovery ------------------------------------------------------------------------

CONFIG_ROWS = _table(DOCS / "discovery.md", "rule")


def test_the_discovery_table_is_there():
    assert len(CONFIG_ROWS) >= 10
    assert any("passed over" in r["rule"] for r in CONFIG_ROWS)


@pytest.mark.parametrize("row", CONFIG_ROWS, ids=[r["rule"] for r in CONFIG_ROWS])
def test_config_discovery_row(row, tmp_path, monkeypatch, capsys):
    root = tmp_path / "scratch"
    for entry in filter(None, (e.strip() for e in row["configs"].split(";"))):
        folder, _, setting = entry.partition(":")
        d = root / _unquote(folder)
        d.mkdir(parents=True, exist_ok=True)
        setting = _unquote(setting)
        if setting == "no table":
            (d / "pyproject.toml").write_text('[tool.black]\nline-length = 100\n')
        else:
            key, _, code = setting.partition("=")
            (d / "pyproject.toml").write_text(f'[tool.rnnir]\n{key} = ["{code}"]\n')
    cwd = root / _unquote(row["cwd"])
    cwd.mkdir(parents=True, exist_ok=True)
    model = (cwd / _unquote(row["model"])).resolve()
    save(state_handed_back_lstm(), model)
    monkeypatch.chdir(cwd)
    flags = _unquote(row["flags"]).split() if row["flags"] else []
    cli.main(["lint", *flags, "--format", "json", _unquote(row["model"])])
    out, _ = capsys.readouterr()
    (doc,) = json.loads(out)["files"]
    applies = _unquote(row["applies"])
    if applies == "defaults":
        assert doc["config"] is None, doc["config"]
    else:
        assert doc["config"] is not None and (cwd / doc["config"]).resolve() == (root / applies).resolve()
    expected = sorted(re.findall(r"[A-Z]{2}\d{3}", row["reports"]))
    assert sorted(d["code"] for d in doc["diagnostics"]) == expected


# -- pair sources, strongest first ----------------------------------------------------------------

H, I, T = 2, 3, 4
F = TensorProto.FLOAT


def _rnn_model(inputs: list[str], outputs: dict[str, str], metadata: dict[str, str] | None = None) -> onnx.ModelProto:
    """x -> RNN(initial_h = the second input) -> Y, Y_h; each output is ``Y``, ``Y_h`` (through Identity), ``Y_h2``
    (2 * Y_h: not the final state itself) or ``plain`` (the third input + 1: state-shaped, computed from an input)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((1, H, I)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal((1, H, H)).astype(np.float32), "R"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two"), numpy_helper.from_array(np.array(1.0, np.float32), "one")]
    nodes = [helper.make_node("RNN", [inputs[0], "W", "R", "", "", inputs[1]], ["Y", "Y_h"], hidden_size=H, name="rnn")]
    vis_out = []
    for name, what in outputs.items():
        if what == "Y":
            nodes.append(helper.make_node("Identity", ["Y"], [name]))
            vis_out.append(helper.make_tensor_value_info(name, F, [T, 1, 1, H]))
            continue
        if what == "Y_h":
            nodes.append(helper.make_node("Identity", ["Y_h"], [name]))
        elif what == "Y_h2":
            nodes.append(helper.make_node("Mul", ["Y_h", "two"], [name]))
        else:
            nodes.append(helper.make_node("Add", [inputs[2], "one"], [name]))
        vis_out.append(helper.make_tensor_value_info(name, F, [1, 1, H]))
    vis_in = [helper.make_tensor_value_info(inputs[0], F, [T, 1, I])] + [helper.make_tensor_value_info(n, F, [1, 1, H]) for n in inputs[1:]]
    model = helper.make_model(helper.make_graph(nodes, "pairs", vis_in, vis_out, inits), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    for k, v in (metadata or {}).items():
        model.metadata_props.add(key=k, value=v)
    return model


def _triton(folder: Path, inp: str, out: str) -> None:
    (folder / "config.pbtxt").write_text(
        f'name: "m"\nsequence_batching {{\n  state [\n    {{\n      input_name: "{inp}"\n      output_name: "{out}"\n'
        f'      data_type: TYPE_FP32\n      dims: [ 1, 1, {H} ]\n    }}\n  ]\n}}\n'
    )


def _pairs(tmp: Path, model: onnx.ModelProto, declared: dict[str, str] | None = None) -> dict[str, tuple[str | None, str]]:
    path = tmp / "m.onnx"
    onnx.save_model(model, str(path))
    prog = rnnir.load(path, pairs=declared) if declared else rnnir.load(path)
    return {p.input: (p.output, p.source.value) for p in prog.state_pairs}


#: (stronger, weaker) -> how to set both up on one model: the stronger pairs h_in with A, the weaker with B
def _declared_vs_metadata(tmp: Path, with_stronger: bool):
    m = _rnn_model(["x", "h_in", "z"], {"y": "Y", "A": "Y_h", "B": "Y_h", "p": "plain"}, {META_PAIRS: json.dumps({"h_in": "B"})})
    return _pairs(tmp, m, {"h_in": "A"} if with_stronger else None)


def _metadata_vs_triton(tmp: Path, with_stronger: bool):
    meta = {META_PAIRS: json.dumps({"h_in": "A"})} if with_stronger else None
    _triton(tmp, "h_in", "B")
    return _pairs(tmp, _rnn_model(["x", "h_in", "z"], {"y": "Y", "A": "Y_h", "B": "Y_h", "p": "plain"}, meta))


def _triton_vs_name(tmp: Path, with_stronger: bool):
    if with_stronger:
        _triton(tmp, "h_in", "A")
    return _pairs(tmp, _rnn_model(["x", "h_in", "z"], {"y": "Y", "A": "Y_h", "h_out": "Y_h", "p": "plain"}))


def _name_vs_dataflow(tmp: Path, with_stronger: bool):
    # dataflow would pair h_in with the first output made of its final state: B, listed before h_out
    outputs = {"y": "Y", "B": "Y_h", "h_out" if with_stronger else "C": "Y_h2", "p": "plain"}
    return _pairs(tmp, _rnn_model(["x", "h_in", "z"], outputs))


def _dataflow_vs_position(tmp: Path, with_stronger: bool):
    # position lines up (a, b) with (p, q) in order: a -> p; dataflow pairs a with q, made of a's final state
    outputs = {"y": "Y", "p": "plain", "q": "Y_h" if with_stronger else "Y_h2"}
    return _pairs(tmp, _rnn_model(["x", "a", "b"], outputs))


NEIGHBOURS = {
    ("declared", "metadata"): (_declared_vs_metadata, "h_in", "A", "B"),
    ("metadata", "triton"): (_metadata_vs_triton, "h_in", "A", "B"),
    ("triton", "name"): (_triton_vs_name, "h_in", "A", "h_out"),
    ("name", "dataflow"): (_name_vs_dataflow, "h_in", "h_out", "B"),
    ("dataflow", "position"): (_dataflow_vs_position, "a", "q", "p"),
}
PAIR_ROWS = _table(DOCS / "pairing.md", "rank")


def test_the_pairing_table_ranks_exactly_the_sources_tested_here_in_this_order():
    ranked = [_unquote(r["source"]) for r in sorted(PAIR_ROWS, key=lambda r: int(r["rank"]))]
    assert [int(r["rank"]) for r in PAIR_ROWS] == list(range(1, len(PAIR_ROWS) + 1))
    assert list(zip(ranked, ranked[1:])) == list(NEIGHBOURS)


@pytest.mark.parametrize("stronger, weaker", list(NEIGHBOURS), ids=[f"{a}-over-{b}" for a, b in NEIGHBOURS])
def test_the_stronger_source_takes_the_input_first(stronger, weaker, tmp_path):
    setup, inp, strong_out, weak_out = NEIGHBOURS[(stronger, weaker)]
    (tmp_path / "with").mkdir()
    (tmp_path / "without").mkdir()
    assert setup(tmp_path / "with", True)[inp] == (strong_out, stronger)
    # the near miss: the weaker source alone pairs the same input elsewhere, so the first answer was a choice
    assert setup(tmp_path / "without", False)[inp] == (weak_out, weaker)


def test_a_declaration_is_the_whole_contract(tmp_path):
    """docs/pairing.md: "With --pair, no other source runs" -- metadata naming another input is not read."""
    m = _rnn_model(["x", "h_in", "z"], {"y": "Y", "A": "Y_h", "p": "plain"}, {META_PAIRS: json.dumps({"z": "p"})})
    assert _pairs(tmp_path, m, {"h_in": "A"}) == {"h_in": ("A", "declared")}
    assert _pairs(tmp_path, m)["z"] == ("p", "metadata")  # the near miss: undeclared, the metadata pair is taken


# -- suppressions and baselines (docs/discovery.md) -----------------------------------------------

NOQA_ROWS = _table(DOCS / "discovery.md", "entry")
BASELINE_ROWS = _table(DOCS / "discovery.md", "change after `--write-baseline`")


def _codes(cell: str) -> list[str]:
    return sorted(re.findall(r"[A-Z]{2}\d{3}", cell))


@pytest.mark.parametrize("row", NOQA_ROWS, ids=[r["entry"] for r in NOQA_ROWS])
def test_suppression_row(row, tmp_path, monkeypatch, capsys):
    from rnnir.onnxio.metadata import write_noqa

    m = state_handed_back_lstm()
    write_noqa(m, [_unquote(row["entry"])])
    save(m, tmp_path / "m.onnx")
    monkeypatch.chdir(tmp_path)
    cli.main(["lint", "--no-config", "--format", "json", "m.onnx"])
    (doc,) = json.loads(capsys.readouterr()[0])["files"]
    assert sorted(d["code"] for d in doc["diagnostics"]) == _codes(row["reports"])
    assert doc["suppressed"] == (1 if row["suppresses"].startswith("yes") else 0)


def _change(row: str, tmp: Path, argv: list[str]) -> list[str]:
    """Apply one row's change; returns the arguments naming the model."""
    base = tmp / "base.json"
    if row == "`--strict` added":
        argv.append("--strict")
    elif row == "the model moved to another folder":
        (tmp / "moved").mkdir()
        (tmp / "m.onnx").rename(tmp / "moved" / "m.onnx")
        return ["moved/m.onnx"]
    elif row.startswith("the entry"):
        doc = json.loads(base.read_text())
        if row == "the entry deleted":
            doc["findings"] = []
        elif row == "the entry's `count` set to 0":
            doc["findings"][0]["count"] = 0
        elif row == "the entry's `slot` edited by hand":
            doc["findings"][0]["slot"] = "c0"
        else:
            raise AssertionError(f"no test for the row {row!r}")
        base.write_text(json.dumps(doc))
    elif row.startswith("the model fixed"):
        from tests.cli.test_cli import clean_lstm

        save(clean_lstm(), tmp / "m.onnx")
        if "--exit-non-zero-on-stale-baseline" in row:
            argv.append("--exit-non-zero-on-stale-baseline")
    elif row != "none":
        raise AssertionError(f"no test for the row {row!r}")
    return ["m.onnx"]


@pytest.mark.parametrize("row", BASELINE_ROWS, ids=[r["change after `--write-baseline`"] for r in BASELINE_ROWS])
def test_baseline_row(row, tmp_path, monkeypatch, capsys):
    save(state_handed_back_lstm(), tmp_path / "m.onnx")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lint", "--no-config", "--write-baseline", "base.json", "m.onnx"]) == 0
    capsys.readouterr()
    argv = ["lint", "--no-config", "--format", "json", "--baseline", "base.json"]
    names = _change(row["change after `--write-baseline`"], tmp_path, argv)
    code = cli.main([*argv, *names])
    out, _ = capsys.readouterr()
    assert code == int(row["exit"])
    if row["reports"] == "error":
        return
    (doc,) = json.loads(out)["files"]
    assert sorted(d["code"] for d in doc["diagnostics"]) == _codes(row["reports"])
    assert doc["baselined"] == int(row["baselined"])
