"""The mutation tool (tools/mutate.py) plants the bugs it says it plants, and picks a change's own mutants.

The tool is how issue 15's score is measured: a mutator that silently plants nothing, or a mutant
that is the original code again, would report a score that means nothing. Each mutant here is
compiled and run against the original function, with the answer worked out by hand.
"""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import mutate  # noqa: E402

SOURCE = textwrap.dedent(
    '''
    """A module docstring is never mutated."""


    def clamp(x, low, high):
        if x < low:
            return low
        return min(x, high)


    def both(a, b):
        return a and b


    def fill(box, value):
        box["v"] = value
    '''
).lstrip()


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository holding one module, mutate.ROOT pointed at it."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(SOURCE)
    monkeypatch.setattr(mutate, "ROOT", tmp_path)
    return tmp_path


def _run(mutant: mutate.Mutant) -> types.SimpleNamespace:
    namespace: dict[str, object] = {}
    exec(mutate.mutated_code(mutant), namespace)
    return types.SimpleNamespace(**namespace)


def test_the_planted_bugs_are_the_ones_described(tree: Path):
    found = {(m.operator, m.description): m for m in mutate.mutants_of("pkg/m.py")}
    flip = _run(found[(mutate.Operator.COMPARE, "`<` -> `>=`")])
    assert flip.clamp(5, 0, 9) == 0 and flip.clamp(-1, 0, 9) == -1  # x >= low returns low
    swapped = _run(found[(mutate.Operator.BOOLOP, "`and` -> `or`")])
    assert swapped.both(0, 7) == 7  # 0 or 7
    dropped = _run(found[(mutate.Operator.DROP_STATEMENT, "drop `box['v'] = value`")])
    box: dict[str, int] = {}
    dropped.fill(box, 3)
    assert box == {}
    replaced = _run(found[(mutate.Operator.RETURN, "return None instead of `low`")])
    assert replaced.clamp(-1, 0, 9) is None
    swap = found[(mutate.Operator.SWAP_ARGS, "swap `x`, `high`")]
    # min is symmetric, so running it cannot show the swap: the mutated tree must hold min(high, x)
    swapped_tree = mutate._apply(ast.parse(SOURCE), mutate._sites(ast.parse(SOURCE))[swap.index])
    assert "return min(high, x)" in ast.unparse(swapped_tree) and "min(x, high)" not in ast.unparse(swapped_tree)
    args = _run(swap)
    assert args.clamp(5, 0, 9) == 5  # min(9, 5): swapped but equal here ...
    assert args.clamp(12, 0, 9) == 9  # ... and here: min is symmetric, which is why such a survivor can be equivalent


def test_no_mutant_is_the_original_code(tree: Path):
    original = ast.dump(ast.parse(SOURCE))
    mutants = mutate.mutants_of("pkg/m.py")
    assert len(mutants) >= 8
    for m in mutants:
        site = mutate._sites(ast.parse(SOURCE))[m.index]
        assert ast.dump(mutate._apply(ast.parse(SOURCE), site)) != original, m.key
        assert m.source_line == SOURCE.splitlines()[m.line - 1].strip()
    assert not any(m.line == 1 for m in mutants)  # the docstring


def test_an_equivalent_entry_matches_by_text_not_by_line_number(tree: Path):
    m = next(m for m in mutate.mutants_of("pkg/m.py") if m.operator is mutate.Operator.SWAP_ARGS)
    entry = mutate.Equivalent("pkg/m.py", "swap-args", "return min(x, high)", "swap `x`, `high`", "min is symmetric")
    assert mutate.is_equivalent(m, [entry])
    assert mutate.is_equivalent(dataclasses.replace(m, line=m.line + 40), [entry])  # edits above keep it matched
    assert not mutate.is_equivalent(m, [dataclasses.replace(entry, line_text="return max(x, high)")])
    assert not mutate.is_equivalent(m, [dataclasses.replace(entry, module="pkg/other.py")])
    assert not mutate.is_equivalent(m, [dataclasses.replace(entry, operator="flip-compare")])


def test_added_lines_of_a_diff():
    diff = textwrap.dedent(
        """
        diff --git a/m.py b/m.py
        @@ -3 +3 @@ def clamp(x, low, high):
        -    if x <= low:
        +    if x < low:
        @@ -10,0 +11,2 @@ def both(a, b):
        +    x = 1
        +    y = 2
        @@ -20,3 +22,0 @@ def gone():
        """
    )
    assert mutate._added_lines(diff) == {3, 11, 12}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True, capture_output=True)


def test_since_keeps_only_the_mutants_of_changed_lines(tree: Path, capsys: pytest.CaptureFixture[str]):
    _git(tree, "init", "-q")
    _git(tree, "add", ".")
    _git(tree, "commit", "-q", "-m", "base")
    changed = SOURCE.replace("return a and b", "return a and not b")
    (tree / "pkg" / "m.py").write_text(changed)
    line = changed.splitlines().index("    return a and not b") + 1
    assert mutate.changed_lines("pkg/m.py", "HEAD") == {line}
    assert mutate.main(["pkg/m.py", "--since", "HEAD", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed and all(row.startswith(f"pkg/m.py:{line} ") for row in listed)
    everything = len(mutate.mutants_of("pkg/m.py"))
    assert len(listed) < everything
    # a module git did not have at the revision is new: all of its mutants are the change's
    (tree / "pkg" / "n.py").write_text("def f(a):\n    return a < 1\n")
    assert mutate.changed_lines("pkg/n.py", "HEAD") is None
    assert mutate.main(["pkg/n.py", "--since", "HEAD", "--list"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(mutate.mutants_of("pkg/n.py")) == 3


def test_fail_under_names_the_modules_below_it():
    rows = [mutate.Score("a.py", mutants=10, killed=8, survived=2), mutate.Score("b.py", mutants=5, killed=4, equivalent=1)]
    assert [s.percent for s in rows] == [80.0, 100.0]  # an equivalent mutant is not counted
    assert [s.module for s in mutate.under(rows, 90.0)] == ["a.py"]
    assert mutate.under(rows, 80.0) == []  # at the threshold is not under it
    assert mutate.under(rows, 0.0) == []


def test_generated_tables_are_skipped_when_a_folder_is_expanded():
    lower = mutate._expand(["rnnir/lower"])
    assert "rnnir/lower/build.py" in lower and "rnnir/lower/_opschemas.py" not in lower
    assert mutate._expand(["rnnir/lower/_opschemas.py"]) == ["rnnir/lower/_opschemas.py"]  # asked for by name, it is run


def test_twin_mutants_on_one_line_get_keys_of_their_own(tree: Path):
    (tree / "pkg" / "t.py").write_text("def f(x, y):\n    return x == 1 or y == 1\n")
    ones = [m for m in mutate.mutants_of("pkg/t.py") if m.operator is mutate.Operator.INT]
    assert [m.description for m in ones] == ["1 -> 2", "1 -> 2"]
    assert ones[0].key != ones[1].key and ones[1].key.endswith(" #2") and not ones[0].key.endswith("#1")
    assert len({m.key for m in mutate.mutants_of("pkg/t.py")}) == len(mutate.mutants_of("pkg/t.py"))
    # the two plant different bugs: f(0, 1) is True for the original, False with y's 1 made 2, True with x's
    first, second = (_run(m).f for m in ones)
    assert (first(0, 1), second(0, 1)) == (True, False)


def test_an_entry_qualified_with_a_function_matches_only_there(tree: Path, monkeypatch: pytest.MonkeyPatch):
    (tree / "pkg" / "c.py").write_text("def a(xs):\n    for x in xs:\n        continue\n\n\ndef b(xs):\n    for x in xs:\n        continue\n")
    drops = [m for m in mutate.mutants_of("pkg/c.py") if m.operator is mutate.Operator.DROP_STATEMENT]
    assert [(m.function, m.line) for m in drops] == [("a", 3), ("b", 8)]
    plain = mutate.Equivalent("pkg/c.py", "drop-statement", "continue", "drop `continue`", "why")
    only_b = dataclasses.replace(plain, function="b")
    assert [mutate.is_equivalent(m, [plain]) for m in drops] == [True, True]
    assert [mutate.is_equivalent(m, [only_b]) for m in drops] == [False, True]
    # the file's spelling of it, and what --check-equivalents says of each
    listing = tree / "eq.txt"
    listing.write_text(
        "# comment\n"
        "pkg/c.py::b | drop-statement | continue | drop `continue` | only b's loop\n"
        "pkg/c.py | drop-statement | continue | drop `continue` | both loops\n"
        "pkg/c.py | drop-statement | break | drop `break` | a line since rewritten\n"
    )
    entries = mutate.read_equivalents(listing)
    assert [e.function for e in entries] == ["b", None, None]
    problems = mutate.check_equivalents(entries)
    assert len(problems) == 2
    assert problems[0].startswith("ambiguous (matches 2 places: a:3, b:8;")
    assert problems[1].startswith("stale (matches no mutant): pkg/c.py | drop-statement | break")
    monkeypatch.setattr(mutate, "EQUIVALENT_FILE", listing)
    assert mutate.main(["--check-equivalents"]) == 1  # stale
    listing.write_text("pkg/c.py::b | drop-statement | continue | drop `continue` | only b's loop\n")
    assert mutate.main(["--check-equivalents"]) == 0


def test_an_entry_may_match_several_lines_of_one_function_but_not_two_functions(tree: Path):
    (tree / "pkg" / "d.py").write_text(
        "def a(xs):\n    for x in xs:\n        if x:\n            continue\n        continue\n\n\ndef b(xs):\n    for x in xs:\n        continue\n"
    )
    listing = tree / "eq.txt"
    listing.write_text("pkg/d.py::a | drop-statement | continue | drop `continue` | both of a's\n")
    assert mutate.check_equivalents(mutate.read_equivalents(listing)) == []
    listing.write_text("pkg/d.py | drop-statement | continue | drop `continue` | a's and b's\n")
    (problem,) = mutate.check_equivalents(mutate.read_equivalents(listing))
    assert problem.startswith("ambiguous (matches 3 places: a:4, a:5, b:10;")


def test_the_projects_equivalents_file_has_no_stale_or_ambiguous_entry():
    """Edits that change a listed line, or add a second function with the same plain line, fail here: each entry
    must still excuse exactly the mutant its reason was written for."""
    assert mutate.check_equivalents(mutate.read_equivalents()) == []


def test_the_shards_of_a_run_are_its_mutants_split_in_order(tree: Path, capsys: pytest.CaptureFixture[str]):
    assert mutate.main(["pkg/m.py", "--list"]) == 0
    whole = capsys.readouterr().out.splitlines()
    parts = []
    for k in (1, 2, 3):
        assert mutate.main(["pkg/m.py", "--list", "--shard", f"{k}/3"]) == 0
        parts.append(capsys.readouterr().out.splitlines())
    # every mutant in exactly one shard, the shards in the run's order and as even as ceil(n/3) allows
    assert parts[0] + parts[1] + parts[2] == whole
    size = -(-len(whole) // 3)
    assert [len(p) for p in parts] == [size, size, len(whole) - 2 * size] and all(parts)
    for bad in ("0/2", "3/2", "2", "a/b"):
        with pytest.raises(SystemExit):
            mutate.main(["pkg/m.py", "--list", "--shard", bad])
    assert "is not K/N with 1 <= K <= N" in capsys.readouterr().err


def test_tests_selects_files_and_folders_by_whole_path_parts():
    picked = ["tests/render", "tests/cli/test_lint.py"]
    assert mutate._selected("tests/render/test_formats.py", picked)
    assert mutate._selected("tests/cli/test_lint.py", picked)
    # a prefix that is not a whole folder name, and a sibling file, are not the selection
    assert not mutate._selected("tests/renderers/test_x.py", picked)
    assert not mutate._selected("tests/cli/test_lint_more.py", picked)
    assert mutate._selected("tests/anything/test_x.py", [])


def test_shards_of_a_trace_merge_as_one_run():
    data = {"durations": {"a::t1": 0.1}, "lines": {"m.py": {3: ["a::t1"], 4: ["*"]}}}
    mutate._merge(data, {"durations": {"b::t2": 0.2}, "lines": {"m.py": {3: ["b::t2"], 4: ["*"], 5: ["*"]}, "n.py": {1: ["b::t2"]}}})
    assert data["durations"] == {"a::t1": 0.1, "b::t2": 0.2}
    # a line both shards ran inside tests gets both tests; import-time lines stay everybody's
    assert data["lines"] == {"m.py": {3: ["a::t1", "b::t2"], 4: ["*"], 5: ["*"]}, "n.py": {1: ["b::t2"]}}


def test_a_module_level_mutant_is_imported_mutated_under_pytest():
    """A mutant of a module constant reaches the tests: pytest's assertion-rewriting import hook (rnnir is a pytest11
    plugin, so its whole distribution is marked for rewriting) once imported the file from disk instead, and every
    module-level mutant survived whatever the tests checked."""
    script = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, "tools")
        import mutate
        (m,) = [m for m in mutate.mutants_of("rnnir/lint/baseline.py") if m.source_line == "BASELINE_VERSION = 1"]
        ids = ["tests/lint/test_baseline.py::test_the_file_is_versioned_sorted_and_readable"]
        (result,) = mutate._run_with_import_hook([(m, ids)], {}, 1, [])
        print(m.description, result.outcome.value)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # the test reads version 1 from the file the mutant writes as version 2
    assert done.stdout.strip().endswith("1 -> 2 killed"), done.stdout


SPLIT_SOURCE = textwrap.dedent(
    """
    def window_start(position_in_stream, window_length, stream_length):
        if position_in_stream + window_length > stream_length:
            return max(stream_length - window_length, 0)
        return position_in_stream


    def both_states_written(hidden_state_written, cell_state_written):
        return hidden_state_written and cell_state_written


    def remember(store_of_states, name_of_slot, value_of_state):
        store_of_states[name_of_slot] = value_of_state
    """
).lstrip()


def test_moves_keeps_the_age_of_lines_a_split_moved_into_another_file(tree: Path, capsys: pytest.CaptureFixture[str]):
    (tree / "pkg" / "m.py").write_text(SPLIT_SOURCE)
    _git(tree, "init", "-q")
    _git(tree, "add", ".")
    _git(tree, "commit", "-q", "-m", "base")
    measured = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, check=True, capture_output=True, text=True).stdout.strip()
    # the module becomes a package: window_start moves unchanged, both_states_written moves with one line edited,
    # remember stays
    functions = SPLIT_SOURCE.split("\n\n\n")
    (tree / "pkg" / "m").mkdir()
    moved = "\n\n\n".join(functions[:2]).replace("written and cell", "written or cell") + "\n"
    (tree / "pkg" / "m" / "logic.py").write_text(moved)
    (tree / "pkg" / "m.py").write_text(functions[2])
    _git(tree, "add", "-A")
    _git(tree, "commit", "-q", "-m", "split")
    rows = moved.splitlines()
    edited = next(n for n, text in enumerate(rows, 1) if "written or cell" in text)
    # by diff the file is new, so every line is the change's; by blame only the edited line is
    assert mutate.changed_lines("pkg/m/logic.py", measured) is None
    assert mutate.changed_lines("pkg/m/logic.py", measured, moves=True) == {edited}
    # a line not yet committed is new
    (tree / "pkg" / "m" / "logic.py").write_text(moved.replace("return position_in_stream", "return position_in_stream + 1"))
    unsaved = rows.index("    return position_in_stream") + 1
    assert mutate.changed_lines("pkg/m/logic.py", measured, moves=True) == {edited, unsaved}
    assert mutate.main(["pkg/m/logic.py", "--since", measured, "--moves", "--list"]) == 0
    listed = {int(row.split(":")[1].split(" ")[0]) for row in capsys.readouterr().out.splitlines()}
    assert listed == {edited, unsaved}
    # every line of a file git does not track is new
    (tree / "pkg" / "m" / "new.py").write_text("def f(a):\n    return a < 1\n")
    assert mutate.changed_lines("pkg/m/new.py", measured, moves=True) is None
    with pytest.raises(SystemExit):
        mutate.main(["pkg/m/logic.py", "--moves", "--list"])
