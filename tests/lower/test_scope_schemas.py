"""Where rnnir/lower/scope.py takes op schemas from (issue 15's mutation survivors): its generated table when the
installed onnx is the release the table was made from, else onnx.defs.  The release is read from an already
imported onnx's ``__version__``, else from the single ``onnx-<version>.dist-info`` folder beside the package.
The expected rules are the ONNX spec's (Gather: data and indices required, axis an INT; Clip: only the input
required, min and max optional; Concat: variadic inputs, axis required)."""

from __future__ import annotations

import importlib.machinery
import sys
import types

import onnx
import pytest
from onnx import AttributeProto

from rnnir.lower import scope
from rnnir.lower._opschemas import ONNX_VERSION

INT_MAX = 2**31 - 1  # onnx's max_input for a variadic input


@pytest.fixture
def from_onnx_defs(monkeypatch):
    """op_rules as it runs when the table was made from another onnx release."""
    monkeypatch.setattr(scope, "_table_matches_onnx", lambda: False)


def test_gather_rules_from_onnx_defs(from_onnx_defs):
    rules = scope.op_rules("Gather", 13)
    assert rules == scope._OpRules(attr_types={"axis": AttributeProto.INT}, required_attrs=(), required_inputs=(0, 1), max_inputs=2, max_outputs=1)


def test_clip_rules_from_onnx_defs_stop_at_the_first_optional_input(from_onnx_defs):
    rules = scope.op_rules("Clip", 13)
    assert (rules.required_inputs, rules.max_inputs, rules.max_outputs, rules.attr_types) == ((0,), 3, 1, {})


def test_concat_rules_from_onnx_defs_require_its_axis(from_onnx_defs):
    rules = scope.op_rules("Concat", 13)
    assert (rules.required_attrs, rules.required_inputs, rules.max_inputs, rules.attr_types) == (("axis",), (), INT_MAX, {"axis": AttributeProto.INT})


def test_unknown_ops_from_onnx_defs_have_no_rules(from_onnx_defs):
    assert scope.op_rules("NoSuchOp", 17) is None
    assert scope.op_rules("GridSample", 15) is None  # added at opset 16
    assert scope.op_rules("GridSample", 16) is not None


# -- which release is installed --------------------------------------------------------------------


@pytest.fixture
def fresh_answer():
    """_table_matches_onnx is answered once per process: ask it again, and forget the test's answer after."""
    scope._table_matches_onnx.cache_clear()
    yield scope._table_matches_onnx
    scope._table_matches_onnx.cache_clear()


def fake_onnx(monkeypatch, version=None, spec=None):
    mod = types.ModuleType("onnx")
    if version is not None:
        mod.__version__ = version
    mod.__spec__ = spec
    monkeypatch.setitem(sys.modules, "onnx", mod)


def site_with(tmp_path, *entries):
    """A site-packages folder holding an ``onnx`` package and ``entries``; the spec of that package."""
    site = tmp_path / "site"
    (site / "onnx").mkdir(parents=True)
    for e in entries:
        (site / e).mkdir()
    spec = importlib.machinery.ModuleSpec("onnx", None, is_package=True)
    spec.submodule_search_locations = [str(site / "onnx")]
    return spec


def test_the_installed_onnx_matches_the_table_here(fresh_answer):
    assert fresh_answer() is (onnx.__version__ == ONNX_VERSION)


def test_an_imported_onnx_of_the_tables_release_matches(fresh_answer, monkeypatch, tmp_path):
    fake_onnx(monkeypatch, ONNX_VERSION, site_with(tmp_path, "onnx-0.0.1.dist-info"))  # __version__ decides, not the folder
    assert fresh_answer() is True


def test_an_imported_onnx_of_another_release_does_not_match(fresh_answer, monkeypatch, tmp_path):
    fake_onnx(monkeypatch, "0.0.1", site_with(tmp_path, f"onnx-{ONNX_VERSION}.dist-info"))
    assert fresh_answer() is False


def test_without_a_version_the_dist_info_folder_decides(fresh_answer, monkeypatch, tmp_path):
    # beside it: another package's dist-info, an old egg-info of onnx, the package folder itself
    fake_onnx(monkeypatch, None, site_with(tmp_path, f"onnx-{ONNX_VERSION}.dist-info", "numpy-1.0.dist-info", "onnx-0.0.1.egg-info"))
    assert fresh_answer() is True


def test_a_dist_info_of_another_release_does_not_match(fresh_answer, monkeypatch, tmp_path):
    fake_onnx(monkeypatch, None, site_with(tmp_path, "onnx-0.0.1.dist-info"))
    assert fresh_answer() is False


def test_two_onnx_dist_infos_are_no_answer(fresh_answer, monkeypatch, tmp_path):
    fake_onnx(monkeypatch, None, site_with(tmp_path, f"onnx-{ONNX_VERSION}.dist-info", "onnx-0.0.1.dist-info"))
    assert fresh_answer() is False


def test_an_unreadable_location_is_skipped_for_the_next(fresh_answer, monkeypatch, tmp_path):
    spec = site_with(tmp_path, f"onnx-{ONNX_VERSION}.dist-info")
    spec.submodule_search_locations = [str(tmp_path / "gone" / "onnx"), *spec.submodule_search_locations]
    fake_onnx(monkeypatch, None, spec)
    assert fresh_answer() is True


def test_only_an_unreadable_location_does_not_match(fresh_answer, monkeypatch, tmp_path):
    spec = importlib.machinery.ModuleSpec("onnx", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path / "gone" / "onnx")]
    fake_onnx(monkeypatch, None, spec)
    assert fresh_answer() is False


def test_an_onnx_without_a_spec_does_not_match(fresh_answer, monkeypatch):
    fake_onnx(monkeypatch, None, None)  # find_spec raises ValueError for a loaded module without __spec__
    assert fresh_answer() is False


def test_an_onnx_that_is_no_package_does_not_match(fresh_answer, monkeypatch):
    fake_onnx(monkeypatch, None, importlib.machinery.ModuleSpec("onnx", None))
    assert fresh_answer() is False


def test_no_onnx_to_be_found_does_not_match(fresh_answer, monkeypatch, tmp_path):
    monkeypatch.delitem(sys.modules, "onnx")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert fresh_answer() is False
