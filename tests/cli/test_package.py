"""``rnnir/cli/`` is thin: one module per command, each reading a typed arguments object built in one place, and no
import cycle among the command line, the renderers, the lint library and deploy (issue 24)."""

from __future__ import annotations

import argparse
import ast
import dataclasses
from pathlib import Path

import networkx as nx
import pytest

from rnnir.cli import app
from rnnir.cli.common import ModelArgs, OneModelArgs, arguments
from rnnir.cli.lint import LintArgs

REPO = Path(__file__).resolve().parents[2]
#: namespace entries that are argparse's or the command table's, not options a command reads
NOT_OPTIONS = {"help", "version", "command", "target", "func", "args_type"}


def leaf_parsers(parser: argparse.ArgumentParser, name: str = "rnnir") -> list[tuple[str, argparse.ArgumentParser]]:
    """Every parser that runs a command (``deploy``'s targets, not ``deploy`` itself)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [(name, parser)]
    return [leaf for sub in subs for child_name, child in sub.choices.items() for leaf in leaf_parsers(child, f"{name} {child_name}")]


LEAVES = leaf_parsers(app.build_parser())


def test_every_command_is_in_the_table_and_has_a_parser():
    assert [c.name for c in app.COMMAND_TABLE] == list(app.COMMANDS)
    names = [n for n, _ in LEAVES]
    assert names == ["rnnir lint", "rnnir cost", "rnnir show", "rnnir rules", "rnnir explain", "rnnir run", "rnnir fix", "rnnir deploy triton", "rnnir deploy openvino"]


@pytest.mark.parametrize(("name", "parser"), LEAVES, ids=[n for n, _ in LEAVES])
def test_every_option_is_a_field_of_the_commands_typed_arguments(name, parser):
    """An option argparse parses but the arguments dataclass lacks would be dropped without a word."""
    kind = parser.get_default("args_type")
    assert dataclasses.is_dataclass(kind) and kind.__dataclass_params__.frozen, name
    fields = {f.name for f in dataclasses.fields(kind)}
    dests = {a.dest for a in parser._actions if a.dest not in NOT_OPTIONS}
    assert dests - fields == set(), name
    assert callable(parser.get_default("func"))


def test_arguments_reads_the_namespace_into_the_dataclass():
    ns = app.build_parser("lint").parse_args(["lint", "a.onnx", "b.onnx", "--select", "SD", "--select", "AL", "--pair", "h0=hn", "-j", "3"])
    args = arguments(ns.args_type, ns)
    assert isinstance(args, LintArgs) and isinstance(args, ModelArgs) and not isinstance(args, OneModelArgs)
    assert args.paths == ("a.onnx", "b.onnx") and args.select == ("SD", "AL") and args.pair == ("h0=hn",)
    assert args.jobs == 3 and args.ignore is None and args.extend_select == ()  # options not given keep the field's default
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.jobs = 4  # type: ignore[misc]
    overrides = args.overrides()
    assert (overrides.select, overrides.pairs, overrides.ignore) == (("SD", "AL"), ("h0=hn",), None)


def test_cost_reads_lints_arguments_with_the_lint_only_options_at_their_defaults():
    ns = app.build_parser("cost").parse_args(["cost", "m.onnx", "--format", "json"])
    args = arguments(ns.args_type, ns)
    assert isinstance(args, LintArgs) and args.format == "json" and args.select is None and not args.fix and args.baseline is None


def test_a_field_the_namespace_lacks_is_an_error_only_when_it_has_no_default():
    with pytest.raises(TypeError):
        arguments(LintArgs, argparse.Namespace(format="text"))  # no paths: a parser that forgot them is a bug, not a default


def calls_getattr_on_args(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
        and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in ("args", "namespace", "ns")
    ]


CLI_MODULES = sorted((REPO / "rnnir" / "cli").glob("*.py"))


@pytest.mark.parametrize("path", CLI_MODULES, ids=[p.name for p in CLI_MODULES])
def test_no_command_reads_its_arguments_untyped(path):
    assert calls_getattr_on_args(path) == []


def test_the_untyped_read_check_sees_one(tmp_path):
    """Near-miss for the test above: ``getattr(args, ...)`` is caught; ``getattr`` of something else is not."""
    f = tmp_path / "m.py"
    f.write_text("def f(args, obj):\n    getattr(obj, 'x')\n    return getattr(args, 'shard', None)\n")
    assert calls_getattr_on_args(f) == [3]


# -- no cycle --------------------------------------------------------------------------------

PACKAGES = ("cli", "render", "lint", "deploy")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> nx.DiGraph:
    """Every import edge (function-level and ``TYPE_CHECKING`` ones too) among the modules of :data:`PACKAGES`."""
    modules = {module_name(p, root): p for pkg in PACKAGES for p in sorted((root / "rnnir" / pkg).rglob("*.py"))}
    modules.pop("rnnir.cli.deploy", None)  # the temporary shim of rnnir.cli.deploy
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [node.module or ""]) if node.level else node.module or ""
                base = base.rstrip(".")
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    graph.add_edge(name, target)
    return graph


def test_the_cli_render_lint_and_deploy_modules_import_no_cycle():
    graph = import_graph(REPO)
    assert [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1] == []
    assert graph.has_edge("rnnir.cli.lint", "rnnir.render")  # the graph does see edges (near miss: an empty graph has no cycle)


def test_the_cycle_check_sees_a_cycle(tmp_path):
    """Near-miss for the test above: a function-level import back from lint into render is a cycle."""
    for pkg in PACKAGES:
        (tmp_path / "rnnir" / pkg).mkdir(parents=True)
        (tmp_path / "rnnir" / pkg / "__init__.py").write_text("")
    (tmp_path / "rnnir" / "render" / "text.py").write_text("from rnnir.lint.results import LintResult\n")
    (tmp_path / "rnnir" / "lint" / "results.py").write_text("def f():\n    from ..render import text\n")
    assert [sorted(c) for c in nx.strongly_connected_components(import_graph(tmp_path)) if len(c) > 1] == [
        ["rnnir.lint.results", "rnnir.render.text"]
    ]
