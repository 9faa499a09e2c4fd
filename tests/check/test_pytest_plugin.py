"""The pytest plugin: a user's own suite asserts multi-call behaviour in two lines (run with pytester)."""

from __future__ import annotations

import pathlib
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same reader, as the project depends on it there
    import tomli as tomllib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnir.check.pytest_plugin  # noqa: F401 - importable from the inner runs even when rnnir is not installed

pytest_plugins = ["pytester"]

REPO = pathlib.Path(__file__).resolve().parents[2]


def _rnn_model(write_back: bool = True) -> onnx.ModelProto:
    """docs/design.md's h_t = 0.5 h_{t-1} + x_t; without ``write_back`` the output hn returns the incoming state."""
    nodes = [helper.make_node("RNN", ["x", "W", "R", "", "", "h0"], ["y", "Yh"], hidden_size=1,
                              activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0]),
             helper.make_node("Identity", ["Yh" if write_back else "h0"], ["hn"])]
    graph = helper.make_graph(
        nodes, "seed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", "B", 1]), helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, "B", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["T", 1, "B", 1]), helper.make_tensor_value_info("hn", TensorProto.FLOAT, [1, "B", 1])],
        [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"), numpy_helper.from_array(np.full((1, 1, 1), 0.5, np.float32), "R")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


@pytest.fixture
def suite(pytester, request):
    """A scratch project holding a correct and a broken model; returns a runner for its tests."""
    onnx.save(_rnn_model(), str(pytester.path / "seed.onnx"))
    onnx.save(_rnn_model(write_back=False), str(pytester.path / "forgets.onnx"))
    # installed: the pytest11 entry point loads the plugin; from a source tree, load it by name
    args = [] if request.config.pluginmanager.hasplugin("rnnir") else ["-p", "rnnir.pytest_plugin"]
    args += ["-p", "no:cacheprovider", "-p", "no:hypothesispytest"]  # hypothesis' plugin alone costs ~1.5 s per run

    def run(source: str, *extra: str):
        pytester.makepyfile(test_user=source)
        return pytester.runpytest_inprocess(*args, *extra)

    return run


def test_a_model_that_keeps_its_state_passes_in_two_lines(suite):
    result = suite(
        """
        import numpy as np

        def test_seed(stateful):
            stateful("seed.onnx").assert_persistence({"x": np.array([1, 0, 2], np.float32).reshape(3, 1, 1)}, chunk_sizes=[1])
        """
    )
    result.assert_outcomes(passed=1)


def test_a_model_that_forgets_its_state_fails_with_the_report(suite):
    result = suite(
        """
        def test_forgets(stateful):
            stateful("forgets.onnx").assert_persistence(chunk_sizes=[4])
        """
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*multi-call check failed*", "*FAIL: chunked calls with persistence differ*", "*persistent*chunk=4*diverges at call*"])


def test_a_silent_stream_fails_as_inconclusive_unless_allowed(suite):
    result = suite(
        """
        import numpy as np
        SILENCE = {"x": np.zeros((8, 1, 1), np.float32)}

        def test_strict(stateful):
            stateful("seed.onnx").assert_persistence(SILENCE, chunk_sizes=[2])

        def test_allowed(stateful):
            report = stateful("seed.onnx").assert_persistence(SILENCE, chunk_sizes=[2], allow_inconclusive=True)
            assert report.status == "inconclusive"
        """
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*INCONCLUSIVE*cannot reveal a persistence bug*"])


def test_assert_calls_checks_each_call_against_expected_values(suite):
    result = suite(
        """
        import numpy as np
        X = [{"x": np.full((1, 1, 1), v, np.float32)} for v in (1, 0, 2)]

        def test_design_numbers(stateful):
            stateful("seed.onnx").assert_calls(X, [{"hn": [[[1.0]]]}, {"hn": [[[0.5]]]}, {"hn": [[[2.25]]]}])

        def test_reinit_numbers_are_wrong(stateful):
            stateful("seed.onnx").assert_calls(X, [{"hn": [[[1.0]]]}, {"hn": [[[0.0]]]}, {"hn": [[[2.0]]]}])
        """
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*call 1: output 'hn' differs from the expected value*"])


def test_a_relative_model_path_is_found_beside_the_test_file(pytester, suite):
    sub = pytester.mkpydir("models_here")
    onnx.save(_rnn_model(), str(sub / "local.onnx"))
    (sub / "test_local.py").write_text(
        "import numpy as np\n\n"
        "def test_local(stateful):\n"
        "    stateful('local.onnx').assert_persistence({'x': np.ones((6, 1, 1), np.float32)}, chunk_sizes=[2])\n"
    )
    result = suite("def test_nothing():\n    pass\n", str(sub / "test_local.py"))
    result.assert_outcomes(passed=1)


def test_the_plugin_is_registered_as_a_pytest11_entry_point():
    # the entry point loads a stand-in that names rnnir.pytest_plugin: loading the plugin itself would register it
    # as "rnnir", and a conftest naming rnnir.pytest_plugin would then fail with pluggy's "already registered"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["pytest11"] == {"rnnir": "rnnir.check.pytest_entry"}
    import rnnir.check.pytest_entry as entry

    assert entry.pytest_plugins == ["rnnir.pytest_plugin"]
    assert not [name for name in vars(entry) if name.startswith("pytest_") and name != "pytest_plugins"]  # no hook of its own
    assert not hasattr(entry, "stateful")


# every plugin object that provides the fixture, by the name it is registered under: exactly one, the public name
REGISTERED_ONCE = """
def test_registered_once(request, stateful):
    registered = [name for name, p in request.config.pluginmanager.list_name_plugin() if hasattr(p, "stateful")]
    assert registered == ["rnnir.pytest_plugin"], registered
"""


@pytest.mark.parametrize(
    "conftest, flags",
    [
        pytest.param(True, ["-p", "rnnir.check.pytest_entry"], id="entry-point-and-conftest"),
        pytest.param(False, ["-p", "rnnir.check.pytest_entry"], id="entry-point-alone"),
        pytest.param(True, [], id="conftest-alone"),
        pytest.param(True, ["-p", "rnnir.pytest_plugin"], id="conftest-and-dash-p"),
        pytest.param(False, ["-p", "rnnir.check.pytest_entry", "-p", "rnnir.pytest_plugin"], id="entry-point-and-dash-p"),
    ],
)
def test_the_plugin_is_registered_once_however_a_suite_asks_for_it(pytester, monkeypatch, conftest, flags):
    # autoload off: the entry point's module, loaded by -p, stands in for the installed entry point (which an
    # uninstalled source tree does not have); the next test runs the installed one
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    if conftest:
        pytester.makeconftest('pytest_plugins = ["rnnir.pytest_plugin"]')
    pytester.makepyfile(test_once=REGISTERED_ONCE)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", *flags)
    result.assert_outcomes(passed=1)


def test_the_installed_entry_point_and_a_conftest_register_the_plugin_once(pytester):
    from importlib.metadata import entry_points

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]["rnnir"]
    installed = [ep.value for ep in entry_points(group="pytest11") if ep.name == "rnnir"]
    if installed != [declared]:
        pytest.skip(f"rnnir's installed pytest11 entry point is {installed}, not {declared!r}: not installed, or installed before it changed")
    pytester.makeconftest('pytest_plugins = ["rnnir.pytest_plugin"]')
    pytester.makepyfile(test_once=REGISTERED_ONCE)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=1)


def test_streaming_assertions_pass_a_forgetting_model_and_fail_an_integrator_with_the_report(pytester, suite):
    from tests.support import streaming_models

    onnx.save(streaming_models.toy("integrator"), str(pytester.path / "integrator.onnx"))
    result = suite(
        """
        import numpy as np
        X = {"x": (0.3 * np.random.default_rng(0).standard_normal((40, 1, 1))).astype(np.float32)}
        Y = [{"x": (0.3 * np.random.default_rng(k).standard_normal((1, 4))).astype(np.float32)} for k in range(40)]

        def test_seed_recovers(stateful):
            report = stateful("seed.onnx").assert_recovers(X, drop=5, reconnect=10, within=15, chunk=1)
            assert report.check("drop").recovery <= 15

        def test_seed_is_slower_than_asked(stateful):
            stateful("seed.onnx").assert_recovers(X, drop=5, within=2, chunk=1, drop_mode="zero")

        def test_integrator_never_recovers(stateful):
            stateful("integrator.onnx", pairs={"h_in": "h_out"}).assert_streaming(Y, drop=5)
        """
    )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*recovery takes more than 2 calls*", "*streaming check failed*", "*never back within 0.001*"])
