"""SD004 for stores under If branches (mutation survivors of store_destinations/write_back.py).

Stores carry the If-branch path they run under (IR text ``loc{'branch': (...)}``). Two stores into one slot
clash unless they sit in the two alternatives of one If; the finding counts the clashing stores and names the
branch path when they all share one. Expected findings are composed by hand from the paths.
"""

from __future__ import annotations

from rnnir import passes
from rnnir.ir.text import parse_program

THEN, ELSE = "If_0.then_branch", "If_0.else_branch"
TAIL = "a write-after-write on persistent state; which value the next call sees depends on store order"


def sd004(*paths: tuple[str, ...]) -> list[str]:
    """Slot h written with RNN 'rnn'.Y_h once per path in ``paths``."""
    stores = "\n".join(f"  %s{i} = store<@h, token>(%hn) loc{{'branch': {p!r}}}" for i, p in enumerate(paths))
    waits = ", ".join(f"%s{i}" for i in range(len(paths)))
    text = f"""program @p {{
  slot @h : float32[1,1,4] init=zeros
  value %x : float32[T,1,3]
  value %W : float32[1,4,3]
  value %R : float32[1,4,4]

  %h = load_slot<@h, copy>()
  %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h) loc{{'node': 'rnn'}}
{stores}
  return<by runtime>({waits})
}}"""
    return [d.message for d in passes.run(parse_program(text)) if d.code == "SD004"]


def test_the_two_alternatives_of_one_if_never_run_together():
    assert sd004((THEN,), (ELSE,)) == []
    assert sd004((THEN, "If_1.then_branch"), (THEN, "If_1.else_branch")) == []  # nested: the inner If's two sides


def test_two_stores_in_the_same_branch_name_it():
    assert sd004((THEN,), (THEN,)) == [f"slot 'h' is written 2 times in one call on branch path {THEN} (%hn, %hn): {TAIL}"]


def test_branches_of_two_different_ifs_can_both_run():
    assert sd004((THEN,), ("If_1.else_branch",)) == [f"slot 'h' is written 2 times in one call (%hn, %hn): {TAIL}"]


def test_only_the_stores_that_clash_are_counted():
    # then, else, then: the two then-stores clash, the else-store is exclusive with both
    assert sd004((THEN,), (ELSE,), (THEN,)) == [f"slot 'h' is written 2 times in one call on branch path {THEN} (%hn, %hn): {TAIL}"]
