"""Per If branch, only that branch's final state is checked against the slice (mutation survivors of
rnnir/passes/coverage.py).

In its own file because the mutation tool took only the fastest covering test of each file when these
mutants were measured (before it ran the module's own test files first), and in test_pinned_coverage.py a faster branch test is chosen whose branches agree, so it cannot tell them apart."""

from __future__ import annotations

from tests.passes.test_coverage import _IF_HEAD, _RNN_READS_H, _in, _sd009


def test_a_branch_writing_back_the_state_of_an_rnn_that_reads_another_slot_is_named_with_its_branch():
    # then: rnn's own final state (it read h); else: rnn_g's, which read g -- only the else branch is wrong
    head = _IF_HEAD + """  slot @g : float32[1,1,4] init=zeros
  output gn : float32[1,1,4]
  pair g -> gn declared "a second state"
"""
    body = _RNN_READS_H + f"""
  %g = load_slot<@g, copy>()
  %yg, %gn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %g) {_in('else', 'rnn_g')}
  %v = If<region.then_branch=('if0.then_branch',), region.else_branch=('if0.else_branch',)>(%reset, %hn, %gn) loc{{'id': 'if0', 'node': 'if0'}} : float32[1,1,4]
  %s = store<@h, token>(%v)
  %o = store<out:hn, value>(%v)
  %sg = store<@g, token>(%gn)
  %og = store<out:gn, value>(%gn)
  return<by runtime>(%s, %o, %sg, %og)"""
    assert _sd009(body, head) == [
        ("state 'h' is not verified: 'h' in branch if0.else_branch is written back with RNN 'rnn_g'.Y_h[0], which does not read this slice", ("rnn_g",))
    ]
