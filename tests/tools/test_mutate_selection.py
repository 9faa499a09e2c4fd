"""Which covering tests a mutant runs (tools/mutate.py's select_tests), worked out by hand from made-up durations.

The selection decides both what a score means and how long a run takes: a file's fastest covering test is
always taken so every file that reaches a line has its say, except a test that alone costs more than the
whole budget (the fuzz suite's 2,000 models), which made each mutant of the store-destination rules cost
30-60 s while the focused tests had already run.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import mutate  # noqa: E402

DURATIONS = {
    "tests/test_a.py::test_one": 1.0,
    "tests/test_a.py::test_two": 2.0,
    "tests/test_a.py::test_three": 3.0,
    "tests/test_b.py::test_quick": 0.5,
    "tests/test_fuzz.py::test_thousands": 38.0,
    "tests/test_fuzz.py::test_small": 3.0,
}


def test_a_files_fastest_test_is_taken_after_the_budget_is_spent():
    # a: 1 + 2 + 3 = 6 > 5 spends the budget (the third is taken while 3 < 5); b's 0.5 comes first anyway;
    # test_fuzz's 3.0 test is its file's fastest and fits the budget on its own: taken although the budget is spent
    ids = {"tests/test_a.py::test_one", "tests/test_a.py::test_two", "tests/test_a.py::test_three", "tests/test_b.py::test_quick", "tests/test_fuzz.py::test_small"}
    assert mutate.select_tests(ids, DURATIONS, 5.0) == [
        "tests/test_b.py::test_quick", "tests/test_a.py::test_one", "tests/test_a.py::test_two", "tests/test_a.py::test_three", "tests/test_fuzz.py::test_small",
    ]


def test_a_files_only_test_that_alone_exceeds_the_budget_is_left_out_once_the_budget_is_spent():
    ids = {"tests/test_a.py::test_one", "tests/test_a.py::test_two", "tests/test_a.py::test_three", "tests/test_fuzz.py::test_thousands"}
    assert mutate.select_tests(ids, DURATIONS, 5.0) == ["tests/test_a.py::test_one", "tests/test_a.py::test_two", "tests/test_a.py::test_three"]


def test_a_test_over_the_budget_still_runs_while_budget_is_left():
    # 1 + 2 = 3 < 5 when the 38 s test comes up: the budget is not spent yet, so it runs
    ids = {"tests/test_a.py::test_one", "tests/test_a.py::test_two", "tests/test_fuzz.py::test_thousands"}
    assert mutate.select_tests(ids, DURATIONS, 5.0) == ["tests/test_a.py::test_one", "tests/test_a.py::test_two", "tests/test_fuzz.py::test_thousands"]


def test_a_lines_only_covering_test_runs_however_slow():
    assert mutate.select_tests({"tests/test_fuzz.py::test_thousands"}, DURATIONS, 5.0) == ["tests/test_fuzz.py::test_thousands"]


def test_budget_zero_runs_every_covering_test():
    ids = {"tests/test_a.py::test_one", "tests/test_fuzz.py::test_thousands", "tests/test_fuzz.py::test_small"}
    assert mutate.select_tests(ids, DURATIONS, 0) == sorted(ids)


def test_one_parametrization_per_function_first_the_rest_while_budget_is_left():
    durations = {"tests/test_a.py::test_p[x]": 1.0, "tests/test_a.py::test_p[y]": 0.5, "tests/test_a.py::test_p[z]": 9.0}
    # [y] is the function's fastest; then [x] (0.5 < 2); then 1.5 < 2 still, so [z] too
    assert mutate.select_tests(set(durations), durations, 2.0) == ["tests/test_a.py::test_p[y]", "tests/test_a.py::test_p[x]", "tests/test_a.py::test_p[z]"]
    # with a budget of 1: [y] (0.5), then [x] while 0.5 < 1, then 1.5 >= 1 stops before [z]
    assert mutate.select_tests(set(durations), durations, 1.0) == ["tests/test_a.py::test_p[y]", "tests/test_a.py::test_p[x]"]


def test_files_run_grouped_cheapest_file_first_and_fastest_first_within_a_file():
    # with -x a mutant stops at the first failing test: a fast focused test should come before a slow broad one,
    # but a file's tests stay together (its module fixtures are set up once)
    durations = {"tests/test_a.py::test_slow": 4.0, "tests/test_a.py::test_fast": 0.1, "tests/test_b.py::test_mid": 0.2}
    assert mutate.select_tests(set(durations), durations, 10.0) == ["tests/test_a.py::test_fast", "tests/test_a.py::test_slow", "tests/test_b.py::test_mid"]


def test_the_modules_own_test_files_go_first_within_the_budget():
    # 100 broad tests of 0.1 s would fill a 5 s budget by themselves; the module's own tests (0.3 s each) are
    # slower but written for it: they are taken first, then the broad ones while budget is left
    durations = {f"tests/test_broad.py::test_{i:03d}": 0.1 for i in range(100)}
    own = "tests/passes/store_destinations/test_state_types.py"
    durations.update({f"{own}::test_cast": 0.3, f"{own}::test_shape": 0.3})
    chosen = mutate.select_tests(set(durations), durations, 5.0, mutate.Focus("tests/passes/store_destinations/", "state_types"))
    assert chosen[:2] == [f"{own}::test_cast", f"{own}::test_shape"]
    # 0.6 s spent on them, then broad tests while spent < 5: 0.6 + 44 * 0.1 = 5.0 (the 45th is taken at 4.9 < 5)
    assert len(chosen) == 2 + 45
    # without the focus only the file's fastest test gets in, as any file's representative; its second never does
    unfocused = mutate.select_tests(set(durations), durations, 5.0)
    assert f"{own}::test_cast" in unfocused and f"{own}::test_shape" not in unfocused


def test_the_subject_folder_comes_before_the_rest_and_the_modules_own_files_before_the_folder():
    # one test per file, each 1 s, budget 2.5 s: the fastest of each file is always in (each costs <= budget), so the
    # order says what the focus did: own file, then the folder's other file, then the broad one (all 1 s: by id)
    durations = {"tests/a/test_broad.py::test_x": 1.0, "tests/passes/test_ordering.py::test_x": 1.0, "tests/passes/test_coverage_hc.py::test_x": 1.0}
    chosen = mutate.select_tests(set(durations), durations, 2.5, mutate.Focus("tests/passes/", "coverage"))
    assert chosen == ["tests/passes/test_coverage_hc.py::test_x", "tests/passes/test_ordering.py::test_x", "tests/a/test_broad.py::test_x"]
    # a folder that is the module's own (empty stem): all of it first, in cost then id order
    chosen = mutate.select_tests(set(durations), durations, 2.5, mutate.Focus("tests/passes/", ""))
    assert chosen == ["tests/passes/test_coverage_hc.py::test_x", "tests/passes/test_ordering.py::test_x", "tests/a/test_broad.py::test_x"]
    # no folder: the stem alone decides, wherever the file is
    chosen = mutate.select_tests(set(durations), durations, 2.5, mutate.Focus("", "broad"))
    assert chosen[0] == "tests/a/test_broad.py::test_x"


def test_a_modules_focus_is_its_subject_folder_under_tests(tmp_path):
    for folder in ("tests/lower/cells", "tests/passes/store_destinations", "tests/analysis"):
        (tmp_path / folder).mkdir(parents=True)
    assert mutate.focus_of("rnnir/lower/cells.py", tmp_path) == mutate.Focus("tests/lower/cells/", "")
    assert mutate.focus_of("rnnir/lower/cells/gru.py", tmp_path) == mutate.Focus("tests/lower/cells/", "gru")
    assert mutate.focus_of("rnnir/lower/scope.py", tmp_path) == mutate.Focus("tests/lower/", "scope")
    assert mutate.focus_of("rnnir/passes/store_destinations/state_types.py", tmp_path) == mutate.Focus("tests/passes/store_destinations/", "state_types")
    assert mutate.focus_of("rnnir/passes/store_destinations/__init__.py", tmp_path) == mutate.Focus("tests/passes/store_destinations/", "")
    assert mutate.focus_of("rnnir/analysis/slices.py", tmp_path) == mutate.Focus("tests/analysis/", "slices")
    # a module tests/ has no folder for: its stem, anywhere
    assert mutate.focus_of("rnnir/slices.py", tmp_path) == mutate.Focus("", "slices")
    assert mutate.focus_of("rnnir/__init__.py", tmp_path) == mutate.Focus("", "rnnir")


def test_the_real_test_tree_has_the_subject_folders_the_default_targets_need():
    # the cells recogniser's own folder: its cases run first for every mutant of it (they replaced two files that
    # re-ran them all in one test for the time budget)
    assert mutate.focus_of("rnnir/lower/cells.py").folder == "tests/lower/cells/"
    assert any((mutate.ROOT / "tests" / "lower" / "cells").glob("test_*.py"))
