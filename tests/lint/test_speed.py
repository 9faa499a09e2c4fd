"""What keeps ``rnnir lint`` cheap (issue 13): no ``import onnx``/numpy for models that need neither, and the
stand-ins for onnx's helpers agree with onnx itself.

The oracles are onnx's own functions (``onnx.defs.get_schema``, ``onnx.numpy_helper.to_array``,
``onnx.helper.get_attribute_value``, ``onnx.ModelProto``) and the list of modules a fresh process imported.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnx.defs
import onnx.shape_inference
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir import cli
from rnnir.lower import scope
from rnnir.lower._opschemas import ONNX_VERSION, SCHEMAS
from rnnir.onnxio import proto as onnxproto

ROOT = Path(__file__).resolve().parents[2]
TORCH = ROOT / "tests" / "data" / "torch"
CELLS = ROOT / "tests" / "data" / "torch_cells"


def _lint_in_fresh_process(model: Path, extra: str = "") -> dict[str, object]:
    code = textwrap.dedent(
        f"""
        import contextlib, io, json, sys
        from rnnir.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["lint", sys.argv[1], "--format", "json", "--no-config"])
        {extra}
        print(json.dumps({{"code": code, "numpy": "numpy" in sys.modules, "onnx": "onnx" in sys.modules,
                           "networkx": "networkx" in sys.modules, "onnxruntime": "onnxruntime" in sys.modules,
                           "report": json.loads(out.getvalue())}}))
        """
    )
    done = subprocess.run([sys.executable, "-c", code, str(model)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_lint_of_an_exported_lstm_imports_neither_onnx_nor_numpy():
    got = _lint_in_fresh_process(TORCH / "lstm_stream.ts.onnx")
    assert got["code"] == 0
    assert (got["numpy"], got["onnx"], got["networkx"], got["onnxruntime"]) == (False, False, False, False)
    report = got["report"]["files"][0]  # the lint itself ran: a pair was found, no error
    assert report.get("error") is None and report["state_pairs"]


def test_lint_that_needs_shape_inference_does_not_import_onnx():
    # two stacked Keras LSTM loops: the upper one reads the lower one's Loop output, whose shape nothing declares
    # and no zeros run tells (tests/lower/cells/test_undeclared_shapes.py): onnx's C++ inference supplies it through its extension
    # alone; both Loops' cells are still recognised as LSTMs
    model = ROOT / "tests" / "data" / "keras" / "keras_lstm_stacked_packed.onnx"
    got = _lint_in_fresh_process(model)
    assert got["onnx"] is False and got["numpy"] is True  # numpy runs the cell; onnx is not imported
    entries = [e["op"] for p in got["report"]["files"][0]["state_pairs"] for sl in p["slices"] for e in sl["entry"]]
    assert entries == ["LSTM", "LSTM", "LSTM", "LSTM"]
    # afterwards onnx itself imports and works in that process (its extension is the one already loaded)
    extra = (
        "import onnx, onnx.checker, onnx.shape_inference\n"
        "        onnx.checker.check_model(sys.argv[1], full_check=True)\n"
        "        assert onnx.shape_inference.infer_shapes(onnx.load(sys.argv[1])).graph.value_info\n"
    )
    after = _lint_in_fresh_process(model, extra=extra)
    assert after["onnx"] is True and after["report"] == got["report"]


def _affine_model(x_is_input: bool) -> bytes:
    """y = bias + x @ W: x a graph input (a run-time value) or an initializer (then y is a constant, 0.5 + 1*2 = 2.5)."""
    w = helper.make_tensor("W", TensorProto.FLOAT, [1, 1], [2.0])
    bias = helper.make_tensor("bias", TensorProto.FLOAT, [1], [0.5])
    inits = [w, bias] + ([] if x_is_input else [helper.make_tensor("x", TensorProto.FLOAT, [1, 1], [1.0])])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])] if x_is_input else []
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["bias", "xw"], ["y"])],
        "affine", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])], inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("x_is_input", [True, False])
def test_asking_whether_a_run_time_value_is_constant_converts_no_tensor(tmp_path, x_is_input):
    # bias + x @ W with x an input: no constant, found without reading bias into numpy (the FSMN-VAD case);
    # near miss: x an initializer, where the answer needs the values and numpy computes 2.5
    path = tmp_path / "affine.onnx"
    path.write_bytes(_affine_model(x_is_input))
    code = (
        "import sys, json\nfrom rnnir.onnxio.proto import messages\nfrom rnnir.lower.scope import ModelIndex\n"
        "from rnnir.lower.cells.net import Net\nm = messages().ModelProto()\nm.ParseFromString(open(sys.argv[1], 'rb').read())\n"
        "index = ModelIndex(m, 'affine')\nnet = Net(index)\nk = net.key(index.root, 'y')\nc = net.const(k)\n"
        "print(json.dumps({'const': None if c is None else c.ravel().tolist(), 'numpy': 'numpy' in sys.modules}))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got == ({"const": None, "numpy": False} if x_is_input else {"const": [2.5], "numpy": True})


def test_infer_shapes_matches_onnx_shape_inference():
    for model in (CELLS / "lstm_hand_loop.ts.onnx", TORCH / "gru_stream.ts.onnx"):
        proto = onnx.load(str(model))
        assert onnxproto.infer_shapes(proto) == onnx.shape_inference.infer_shapes(proto), model.name


def test_the_import_check_sees_an_import():
    # near miss: the same process, then something that needs onnx (the export): the probe must say so
    got = _lint_in_fresh_process(TORCH / "lstm_stream.ts.onnx", extra="import rnnir; rnnir.export")
    assert got["onnx"] is True and got["numpy"] is True


def test_lint_results_do_not_depend_on_whether_onnx_was_imported_first():
    # the same lint in a process that imported onnx and numpy before rnnir (rnnir then uses onnx's own modules
    # and numpy from the start): identical JSON, for exported ops and for hand-written cells checked by execution
    probe = (
        "import onnx, numpy, sys, io, contextlib\nfrom rnnir.cli import main\nout = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n    main(['lint', sys.argv[1], '--format', 'json', '--no-config'])\nprint(out.getvalue())"
    )
    for model in (TORCH / "gru2_stream.dynamo.onnx", CELLS / "lstm_cell.ts.onnx", CELLS / "gru_cell_stacked.ts.onnx"):
        plain = _lint_in_fresh_process(model)
        first = subprocess.run([sys.executable, "-c", probe, str(model)], capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout) == plain["report"], model.name


def test_messages_are_onnx_own_classes():
    m = onnxproto.messages()
    assert m.ModelProto is onnx.ModelProto and m.TensorProto is onnx.TensorProto
    proto = m.ModelProto()
    proto.ParseFromString((TORCH / "gru_stream.ts.onnx").read_bytes())
    assert isinstance(proto, onnx.ModelProto) and proto == onnx.load(str(TORCH / "gru_stream.ts.onnx"))


def test_messages_load_without_the_onnx_package():
    code = "import sys; from rnnir.onnxio import proto; m = proto.messages(); print(m.__name__, 'onnx' in sys.modules, m.ModelProto.__module__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["rnnir._onnx_ml_pb2", "False", "onnx.onnx_ml_pb2"]


def test_attribute_value_matches_onnx_helper():
    node = helper.make_node(
        "X", ["a"], ["b"], f=1.5, i=3, s="text", fs=[1.0, 2.0], is_=[1, 2], ss=["a", "b"],
        t=numpy_helper.from_array(np.arange(3, dtype=np.float32)), g=helper.make_graph([], "g", [], []),
    )
    for attr in node.attribute:
        assert onnxproto.attribute_value(attr) == helper.get_attribute_value(attr), attr.name


def _tensors() -> list[onnx.TensorProto]:
    out = []
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64, np.uint32, np.uint64, np.bool_):
        arr = (rng.standard_normal((2, 3)) * 50).astype(dtype)
        raw = numpy_helper.from_array(arr, "raw")  # raw_data
        out.append(raw)
        typed = helper.make_tensor("typed", helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape, arr.ravel().tolist())
        out.append(typed)  # typed fields (int32_data for the small types)
    out.append(helper.make_tensor("scalar", TensorProto.INT64, [], [7]))
    out.append(helper.make_tensor("empty", TensorProto.FLOAT, [0, 4], []))
    out.append(helper.make_tensor("neg8", TensorProto.INT8, [3], [-1, -128, 127]))
    return out


@pytest.mark.parametrize("t", _tensors(), ids=lambda t: f"{TensorProto.DataType.Name(t.data_type)}-{'raw' if t.HasField('raw_data') else 'typed'}")
def test_tensor_to_array_and_ints_match_numpy_helper(t):
    want = numpy_helper.to_array(t)
    assert onnxproto.surely_converts(t)
    got = onnxproto.tensor_to_array(t)
    assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    ints = onnxproto.tensor_ints(t)
    if np.issubdtype(want.dtype, np.integer):
        assert ints == [int(x) for x in want.ravel()]
    else:
        assert ints is None
    floats = onnxproto.tensor_floats(t)
    if want.dtype in (np.float32, np.float64):
        assert floats == want.ravel().tolist()
    else:
        assert floats is None  # float16, integers, bool: not read without numpy


def test_tensor_floats_reads_the_float_types_numpy_helper_does():
    # every dtype in one test: each entry matters (float32 and float64 read, raw and typed; no other type)
    for t in _tensors():
        want = numpy_helper.to_array(t)
        floats = onnxproto.tensor_floats(t)
        if want.dtype in (np.float32, np.float64):
            assert floats == want.ravel().tolist(), t.name
        else:
            assert floats is None, (t.name, want.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_float_constant_beside_the_final_state_is_read_without_numpy(tmp_path, dtype):
    # hn = Yh * c: c = 1 is the final state itself (verified), c = 0.5 is not (SD009), c [2] never an identity;
    # none of them loads numpy (their float values are read from the tensor's bytes)
    from tests.support.recurrent_op_models import H, I, T, model, vi, weights

    verdicts = {}
    for value in ([1.0], [0.5], [1.0, 1.0]):
        nodes = [helper.make_node("GRU", ["x", "W", "R", "", "", "h0"], ["Y", "Yh"], hidden_size=H, name="gru"),
                 helper.make_node("Mul", ["Yh", "c"], ["hn"], name="scale")]
        inits = [*weights("GRU"), numpy_helper.from_array(np.array(value, dtype=dtype), "c")]
        m = model(nodes, [vi("x", [T, 1, I]), vi("h0", [1, 1, H])], [vi("hn", [1 if len(value) == 1 else 2, 1, H])], inits)
        path = tmp_path / f"m{len(verdicts)}.onnx"
        onnx.save(m, str(path))
        got = _lint_in_fresh_process(path)
        assert got["numpy"] is False, value
        verdicts[tuple(value)] = [v["verdict"] for v in got["report"]["files"][0]["verdicts"]["slices"]]
    assert verdicts[(1.0,)] == ["verified"]
    assert "verified" not in verdicts[(0.5,)] and "verified" not in verdicts[(1.0, 1.0)]


def test_tensor_floats_refuses_what_numpy_helper_cannot_read():
    short = numpy_helper.from_array(np.arange(6, dtype=np.float64))
    short.raw_data = short.raw_data[:-8]
    assert onnxproto.tensor_floats(short) is None
    assert onnxproto.tensor_floats(numpy_helper.from_array(np.arange(5, dtype=np.float64))) == [0.0, 1.0, 2.0, 3.0, 4.0]  # near miss


def test_lint_of_a_cache_traced_element_by_element_does_not_import_numpy(tmp_path):
    # GTCRN's conv_cache: windows on the time axis of a small static cache, traced on element ids in plain Python
    from tests.analysis.test_elements_window import window_cache

    path = tmp_path / "cache.onnx"
    onnx.save(window_cache(((1, 1), (2, 1))), str(path))
    got = _lint_in_fresh_process(path)
    assert got["numpy"] is False
    report = got["report"]["files"][0]
    (pair,) = report["state_pairs"]
    assert pair["slices"][0]["windows"][""]["segments"] == [[0, 2], [2, 3]]
    assert [v["verdict"] for v in report["verdicts"]["slices"]] == ["verified"]


def test_surely_converts_refuses_what_numpy_helper_cannot_read():
    short = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3))
    short.raw_data = short.raw_data[:-4]  # one element missing
    with pytest.raises(ValueError):
        numpy_helper.to_array(short)
    assert not onnxproto.surely_converts(short)
    fields = helper.make_tensor("f", TensorProto.INT64, [2], [1, 2])
    fields.dims[0] = 3  # two values for three elements
    with pytest.raises(ValueError):
        numpy_helper.to_array(fields)
    assert not onnxproto.surely_converts(fields)
    external = helper.make_tensor("e", TensorProto.FLOAT, [2], [1.0, 2.0])
    external.data_location = TensorProto.EXTERNAL
    assert not onnxproto.surely_converts(external)
    assert onnxproto.surely_converts(helper.make_tensor("ok", TensorProto.INT64, [3], [1, 2, 3]))  # near miss


def test_dtype_names_match_onnx_helper():
    for code in onnxproto.PLAIN_DTYPES:
        assert onnxproto.dtype_name(code) == str(np.dtype(helper.tensor_dtype_to_np_dtype(code)))
    assert onnxproto.dtype_name(TensorProto.BFLOAT16) == str(np.dtype(helper.tensor_dtype_to_np_dtype(TensorProto.BFLOAT16)))


@pytest.mark.skipif(onnx.__version__ != ONNX_VERSION, reason="the schema table is only used with the onnx release it was made from")
def test_schema_table_matches_onnx_defs_for_every_op_and_version():
    assert scope._table_matches_onnx()
    checked = 0
    for name, versions in SCHEMAS.items():
        for since, *_ in versions:
            for opset in (since, since + 1):
                table = scope.op_rules(name, opset)
                schema = onnx.defs.get_schema(name, opset, "")
                formal = list(schema.inputs)
                required: list[int] = []
                for k, f in enumerate(formal):
                    if f.option != onnx.defs.OpSchema.FormalParameterOption.Single:
                        break
                    required.append(k)
                assert table is not None
                assert table.attr_types == {n: int(a.type) for n, a in schema.attributes.items()}, (name, opset)
                assert table.required_attrs == tuple(n for n, a in schema.attributes.items() if a.required), (name, opset)
                assert table.required_inputs == tuple(required) and table.max_inputs == schema.max_input and table.max_outputs == schema.max_output
                checked += 1
    assert checked > 400


def test_schema_table_knows_no_more_ops_than_onnx():
    assert scope.op_rules("NoSuchOp", 17) is None
    with pytest.raises(onnx.defs.SchemaError):
        onnx.defs.get_schema("NoSuchOp", 17, "")
    # an op that exists, asked for an opset before it existed (onnx.defs refuses that too)
    assert scope.op_rules("GridSample", 15) is None
    with pytest.raises(onnx.defs.SchemaError):
        onnx.defs.get_schema("GridSample", 15, "")
    assert scope.op_rules("GridSample", 16) is not None  # near miss


@pytest.mark.parametrize(
    "doc",
    [
        {},
        [],
        {"a": [], "b": {}, "c": [[], [{}]]},
        [1, 2.5, -0.0, float("nan"), float("inf"), -float("inf"), True, False, None, 'x\u00e9\n"\x1b', 10**30, 1e300, 1e-300, 0.1],
        {7: "int key", 2.5: "float key", True: "bool key", None: "null key", "s": (1, (2, 3))},
        {"bytes": b"v\xff", "object": object.__new__(type("Thing", (), {"__str__": lambda self: "thing"}))},
    ],
)
def test_dumps_indented_is_json_dumps_indent_2(doc):
    from rnnir.render.jsonreport import _json_default, dumps_indented

    assert dumps_indented(doc, default=_json_default) == json.dumps(doc, indent=2, default=_json_default)


def test_dumps_indented_refuses_what_json_refuses():
    from rnnir.render import dumps_indented

    with pytest.raises(TypeError):
        json.dumps({(1, 2): "tuple key"}, indent=2)
    with pytest.raises(TypeError):
        dumps_indented({(1, 2): "tuple key"})
    with pytest.raises(TypeError):
        dumps_indented({"x": object()})  # no default: like json.dumps
    assert dumps_indented({"x": 1}) == json.dumps({"x": 1}, indent=2)  # near miss


def test_lint_json_report_is_what_json_dumps_writes(capsys):
    # the whole report of real models, through the CLI: parse it, dump it with json, compare the text
    from rnnir.cli import main

    for model in (TORCH / "lstm_stream.ts.onnx", CELLS / "gru_cell_stacked.ts.onnx", ROOT / "samples" / "sd002_hc_swap.onnx"):
        main(["lint", str(model), "--format", "json", "--no-config"])
        text = capsys.readouterr().out
        assert text == json.dumps(json.loads(text), indent=2) + "\n", model.name


def test_lint_builds_only_its_own_subcommand():
    # the other subcommands' modules stay unimported; `rnnir --help` (near miss) still lists every command
    code = (
        "import contextlib, io, sys\nfrom rnnir.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['lint', sys.argv[1], '--format', 'json', '--no-config'])\n"
        "print(code, sorted(m for m in sys.modules if m in ('rnnir.cli.run', 'rnnir.cli.run_inputs', 'rnnir.cli.deploy', 'rnnir.deploy', 'rnnir.deploy.inputs')))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(TORCH / "lstm_stream.ts.onnx")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0 []"
    done = subprocess.run([sys.executable, "-c", "import sys; from rnnir.cli import main; sys.exit(main())", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0
    listed = re.findall(r"^    ([a-z]+) ", done.stdout, flags=re.MULTILINE)
    assert listed == ["lint", "cost", "show", "rules", "explain", "run", "fix", "deploy"]


@pytest.mark.parametrize(
    "words",
    [
        ["lint", "m.onnx", "--format", "json", "--select", "SD", "-q", "--no-config"],
        ["lint", "a.onnx", "b.onnx", "--pair", "h0=hn", "--lower-exit", "chain", "--strict", "-j", "2"],
        ["show", "m.onnx", "--full", "--format", "dot"],
        ["explain", "SD002"],
        ["rules", "--format", "json"],
        ["cost", "m.onnx", "--format", "json"],
        ["run", "m.onnx"],
    ],
)
def test_a_one_subcommand_parser_parses_as_the_whole_one(words):
    whole = cli.build_parser().parse_args(words)
    alone = cli.build_parser(words[0]).parse_args(words)
    assert vars(alone) == vars(whole)


def _index_summary(index: scope.ModelIndex) -> list[object]:
    """Everything indexing records, by names and positions (node objects by their position in their graph)."""
    where = {id(n): (sc.path, k) for sc in index.scopes() for k, n in enumerate(sc.nodes)}
    out: list[object] = []
    for sc in index.scopes():
        out.append((sc.path, sorted((o, where[id(n)], i) for o, (n, i) in sc.producers.items()), sorted(sc.positions.items()),
                    sc.node_inputs, sc.node_ops, sorted(c.path for c in sc.children.values())))
    out.append(sorted((name, [where[id(n)] for n in nodes]) for name, nodes in index.consumers.items()))
    out.append([(sc.path, where[id(n)]) for sc, n in index.recurrent])
    out.append(sorted((where[k], v) for k, v in index.node_op.items()))
    out.append(sorted((where[k], v) for k, v in index.node_outputs.items()))
    return out


@pytest.mark.parametrize(
    "model",
    [TORCH / "lstm_stream.ts.onnx", TORCH / "bilstm_stream.dynamo.onnx", CELLS / "lstm_hand_loop.ts.onnx", CELLS / "lstm_cell_scan.dynamo.onnx",
     ROOT / "samples" / "lstm_packed_if.onnx", ROOT / "samples" / "sd002_hc_swap_if_branch.onnx"],
    ids=lambda p: p.name,
)
def test_indexing_all_nodes_at_once_records_what_node_by_node_does(model, monkeypatch):
    # the oracle is the node-by-node walk (which also raises every model error): both must record the same index
    proto = onnx.load(str(model))
    at_once = scope.ModelIndex(proto, model.name)
    monkeypatch.setattr(scope.ModelIndex, "_index_nodes_at_once", lambda self, sc, work: False)
    one_by_one = scope.ModelIndex(proto, model.name)
    assert _index_summary(at_once) == _index_summary(one_by_one)
    assert at_once.recurrent or any(sc.children for sc in at_once.scopes())  # the models exercise subgraphs or recurrent ops
