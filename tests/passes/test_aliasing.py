"""Aliasing rules at the edges of their scope (mutation survivors of passes/aliasing.py): how far a chain is followed
through view ops, which stores and slots each rule looks at, and what each finding points at. Programs are built
with rnnir.Builder; the expected findings are read off each program by hand."""

from __future__ import annotations

import numpy as np
import pytest

import rnnir
from rnnir import passes

H, I, T = 4, 3, 5


def cell(load="copy", slot_kw=None):
    b = rnnir.Builder("cell")
    h = b.slot("h", "float32", (1, 1, H), **(slot_kw or {}))
    x = b.input("x", "float32", (T, 1, I))
    h0 = b.load(h, load)
    rng = np.random.default_rng(1)
    w = b.const("W", rng.standard_normal((1, H, I)).astype(np.float32))
    r = b.const("R", rng.standard_normal((1, H, H)).astype(np.float32))
    _, hn = b.recurrent("RNN", x, w, r, initial_h=h0, hidden_size=H, name="rnn", outputs=["Y", "hn"])
    return b, h, h0, hn


def shape(b):
    return b.const("shape", np.array([1, 1, H], np.int64))


def codes(diags):
    return [d.code for d in diags]


def test_a_chain_is_followed_through_several_view_ops_in_a_row():
    b, h, _, hn = cell()
    res = b.store(hn, h, "value")
    v = b.compute("Identity", [b.compute("Reshape", [b.compute("Squeeze", [res]), shape(b)])])
    b.store(v, b.output("out"), "value")
    (d,) = passes.run(b.build())
    assert d.code == "AL001"
    assert "%hn" in d.message and "out:out" in d.message
    assert [loc.value for loc in d.locations] == [v.name, "hn"]  # the output store reads v; the slot store reads hn


def test_a_value_computed_from_a_slot_store_result_is_no_chain():
    # Add makes a new tensor: the output holds a sum, not the store's result (the model may be odd, but not AL001)
    b, h, _, hn = cell()
    res = b.store(hn, h, "value")
    b.store(b.compute("Add", [res, b.const("one", np.ones((1, 1, H), np.float32))]), b.output("out"), "value")
    assert "AL001" not in codes(passes.run(b.build()))


def test_a_slot_store_reading_another_slot_store_is_not_an_output_chain():
    b, h, _, hn = cell()
    g = b.slot("g", "float32", (1, 1, H))
    b.store(b.store(hn, h, "value"), g)
    b.store(hn, b.output("out"), "value")
    assert "AL001" not in codes(passes.run(b.build()))


def test_an_output_store_reading_another_output_store_is_not_a_slot_chain():
    b, h, _, hn = cell()
    b.store(hn, h)
    first = b.store(hn, b.output("out"), "alias")
    b.store(first, b.output("out2"), "alias")
    assert [c for c in codes(passes.run(b.build())) if c.startswith("AL")] == []


def test_a_slot_living_in_an_output_points_at_the_store_into_that_output():
    b, h, _, hn = cell()
    out = b.output("hn_out")
    h.alias_of = out
    st = b.store(hn, out, "value")
    (d,) = [d for d in passes.run(b.build()) if d.code == "AL002"]
    assert [loc.node for loc in d.locations] == [st.producer.id]
    assert "'h'" in d.message and "'hn_out'" in d.message


def test_a_slot_living_in_an_output_nothing_stores_points_at_the_output():
    b, h, _, hn = cell()
    h.alias_of = b.output("hn_out")
    b.store(hn, h)
    (d,) = [d for d in passes.run(b.build()) if d.code == "AL002"]
    assert [(loc.node, loc.value) for loc in d.locations] == [(None, "hn_out")]


def test_a_slot_store_of_a_view_load_with_an_alias_result_is_not_an_output_alias():
    b, h, h0, hn = cell(load="view")
    g = b.slot("g", "float32", (1, 1, H))
    b.store(hn, h)
    b.store(h0, g, "alias")  # slot-to-slot: AL002 is about graph outputs
    assert "AL002" not in codes(passes.run(b.build()))


def test_an_output_stored_as_an_alias_of_an_output_store_alias_result_is_not_AL002():
    b, h, _, hn = cell()
    b.store(hn, h)
    first = b.store(hn, b.output("out"), "alias")
    b.store(first, b.output("out2"), "alias")
    assert "AL002" not in codes(passes.run(b.build()))


def test_view_load_stored_as_an_alias_output_names_the_slot_and_the_store():
    b, h, h0, hn = cell(load="view")
    b.store(hn, h)
    st = b.store(h0, b.output("h_prev"), "alias")
    (d,) = [d for d in passes.run(b.build()) if d.code == "AL002"]
    assert d.slot == "h"
    assert "VIEW load of slot 'h'" in d.message
    assert [loc.node for loc in d.locations] == [st.producer.id]


# -- AL003 ---------------------------------------------------------------------------------------


def lstm_slots(address_c="arena:16", alias=None, extra=()):
    b = rnnir.Builder("two")
    hs = b.slot("h", "float32", (1, 1, H), address="arena:0")
    cs = b.slot("c", "float32", (1, 1, H), address=address_c, alias_of=hs if alias == "h" else alias)
    x = b.input("x", "float32", (T, 1, I))
    w, r = b.const("W", np.ones((1, 4 * H, I), np.float32)), b.const("R", np.ones((1, 4 * H, H), np.float32))
    _, yh, yc = b.recurrent("LSTM", x, w, r, initial_h=b.load(hs), initial_c=b.load(cs), hidden_size=H, name="lstm")
    b.store(yh, hs)
    b.store(yc, cs)
    for name, address in extra:
        s = b.slot(name, "float32", (1, 1, H), address=address)
        b.store(b.load(s), s)
    return b.build()


def al003(prog):
    return [d for d in passes.run(prog) if d.code == "AL003"]


def test_same_address_names_both_slots_and_the_address():
    (d,) = al003(lstm_slots(address_c="arena:0"))
    assert d.data["slots"] == ["h", "c"] and d.slot == "h"
    assert "'h' and 'c' have the same address 'arena:0'" in d.message
    assert [loc.value for loc in d.locations] == ["h", "c"]


def test_a_declared_alias_is_named_as_the_reason():
    (d,) = al003(lstm_slots(address_c="arena:16", alias="h"))
    assert d.data["slots"] == ["h", "c"]
    assert "'c' is declared an alias of 'h'" in d.message and "same address" not in d.message


def test_an_alias_of_a_slot_of_another_program_is_not_shared_storage_here():
    foreign = rnnir.Builder("other").slot("h", "float32", (1, 1, H), address="arena:99")
    assert al003(lstm_slots(address_c="arena:16", alias=foreign)) == []


def test_three_slots_chained_by_address_and_alias_are_one_group():
    # g shares h's address; c aliases h: h, c and g are one storage, reported once, every reason given
    (d,) = al003(lstm_slots(address_c="arena:16", alias="h", extra=[("g", "arena:0")]))
    assert d.data["slots"] == ["h", "c", "g"]
    assert "'c' is declared an alias of 'h'" in d.message and "'h' and 'g' have the same address 'arena:0'" in d.message


@pytest.mark.parametrize("extra", [[("g", "arena:32")], [("g", "arena:32"), ("k", "arena:48")]])
def test_distinct_addresses_are_separate_groups(extra):
    groups = [d.data["slots"] for d in al003(lstm_slots(address_c="arena:0", extra=extra))]
    assert groups == [["h", "c"]]


# -- diagnostics: severity order and the JSON of a finding ----------------------------------------


def test_severities_are_strictly_ordered_error_warning_info():
    s = passes.Severity
    assert s.ERROR.rank > s.WARNING.rank > s.INFO.rank


def test_findings_sort_errors_first_then_by_code_and_slot():
    from rnnir.passes.diagnostics import Diagnostic

    def diag(code, severity, slot=None):
        return Diagnostic(code=code, name="x", severity=severity, message="m", slot=slot)

    found = [
        diag("AL001", passes.Severity.INFO),
        diag("SD006", passes.Severity.WARNING),
        diag("SD002", passes.Severity.ERROR, "b"),
        diag("SD002", passes.Severity.ERROR, "a"),
        diag("SD002", passes.Severity.ERROR),
        diag("AL001", passes.Severity.WARNING),
    ]
    ordered = sorted(found, key=lambda d: d.sort_key())
    assert [(d.code, d.severity.value, d.slot) for d in ordered] == [
        ("SD002", "error", None),  # no slot sorts first, as the empty name
        ("SD002", "error", "a"),
        ("SD002", "error", "b"),
        ("AL001", "warning", None),
        ("SD006", "warning", None),
        ("AL001", "info", None),
    ]
    assert "slot" not in diag("AL001", passes.Severity.INFO).to_json() and diag("SD002", passes.Severity.ERROR, "a").to_json()["slot"] == "a"


def test_a_location_in_json_names_the_onnx_node_the_ir_node_the_value_and_the_branch():
    from rnnir.passes.diagnostics import Location

    loc = Location(node="n3", onnx_node="lstm", value="Y_h", branch=("gate.then_branch", "inner.else_branch"))
    assert loc.to_json() == {"node": "lstm", "ir_node": "n3", "value": "Y_h", "branch": "gate.then_branch/inner.else_branch"}


def _made_rule():
    from rnnir.passes.diagnostics import Message, rule

    return rule("XX001", "made-up", passes.Severity.WARNING, "a rule made in a test", "What it finds\n    nothing.", messages={
        "plain": Message("slot {slot!r} holds {what}", hint="write {what} into {slot!r}"),
        "per-slice": Message("slice {label} holds {what}", consequence="it restarts", hint="fix {label}"),
        "soft": Message("only {what}", hint="look", severity=passes.Severity.INFO),
    })


def test_a_message_fills_its_fields_into_text_and_hint():
    d = _made_rule().diagnostic("plain", slot="h", what="Y_c")
    assert (d.code, d.name, d.severity, d.slot) == ("XX001", "made-up", passes.Severity.WARNING, "h")
    assert d.message == "slot 'h' holds Y_c"
    assert d.hint == "write Y_c into 'h'"
    assert d.data == {}


def test_a_message_severity_overrides_the_rule_and_data_is_kept_apart():
    d = _made_rule().diagnostic("soft", data={"slice": "h[0]"}, what="x")
    assert (d.severity, d.message, d.hint, d.slot, d.data) == (passes.Severity.INFO, "only x", "look", None, {"slice": "h[0]"})


def test_a_slice_message_reads_slot_part_consequence_and_keeps_the_parts_for_merging():
    d = _made_rule().diagnostic("per-slice", slot="state", data={"slice": "state[1]"}, label="state[1]", what="c")
    assert d.message == "slot 'state': slice state[1] holds c: it restarts"
    assert d.hint == "fix state[1]"
    assert d.data == {"slice": "state[1]", "part": "slice state[1] holds c", "consequence": "it restarts"}


def test_a_field_used_only_by_the_consequence_is_required_and_filled():
    from rnnir.passes.diagnostics import Message, rule

    made = rule("XX003", "made-up-too", passes.Severity.ERROR, "made up", "What it finds\n    nothing.", messages={
        "late": Message("slice {label}", consequence="restarts at call {call}", hint="fix {label}"),
    })
    assert made.messages["late"].fields == {"label", "call"}
    d = made.diagnostic("late", slot="s", label="s[0]", call=2)
    assert d.message == "slot 's': slice s[0]: restarts at call 2" and d.data["consequence"] == "restarts at call 2"
    with pytest.raises(ValueError, match="missing: call"):
        made.diagnostic("late", slot="s", label="s[0]")


def test_two_slice_findings_of_one_rule_on_one_slot_merge_and_others_pass_through():
    from rnnir.passes.diagnostics import merge_slices

    made = _made_rule()
    a = made.diagnostic("per-slice", slot="s", label="s[0]", what="c")
    b = made.diagnostic("per-slice", slot="s", label="s[1]", what="h")
    other_slot = made.diagnostic("per-slice", slot="t", label="t[0]", what="h")
    soft = made.diagnostic("soft", slot="s", what="h")  # same slot, another severity: its own group
    merged = merge_slices([a, soft, b, other_slot])
    assert [d.message for d in merged] == [
        "slot 's': slice s[0] holds c; slice s[1] holds h: it restarts",
        "only h",
        "slot 't': slice t[0] holds h: it restarts",
    ]
    assert merged[0].hint == "fix s[0]; fix s[1]"
    assert merged[0].data == {"slices": [a.data, b.data]}
    assert merged[0].locations == ()
    # a group holding a finding that is not slice-level is left as it is
    plain = made.diagnostic("plain", slot="s", what="h")
    soft_a = made.diagnostic("per-slice", slot="s", label="s[0]", what="c")
    assert [d.message for d in merge_slices([soft_a, plain])] == ["slot 's': slice s[0] holds c: it restarts", "slot 's' holds h"]


def test_a_message_with_a_missing_or_an_unused_field_is_refused():
    made = _made_rule()
    with pytest.raises(ValueError, match=r"XX001 plain: fields do not match the message \(missing: what; unused: none\)"):
        made.diagnostic("plain", slot="h")
    with pytest.raises(ValueError, match=r"missing: slot; unused: none"):
        made.diagnostic("plain", what="x")
    with pytest.raises(ValueError, match=r"missing: none; unused: whom"):
        made.diagnostic("plain", slot="h", what="x", whom="y")


def test_an_unknown_message_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="XX001: no message 'nope'; it has plain, per-slice, soft"):
        _made_rule().diagnostic("nope")


def test_a_slice_message_needs_its_slot():
    with pytest.raises(ValueError, match="slice-level message needs its slot"):
        _made_rule().diagnostic("per-slice", label="a", what="b")


def test_an_empty_or_two_line_hint_is_refused():
    from rnnir.passes.diagnostics import Message

    with pytest.raises(ValueError, match="one-line hint"):
        Message("m", hint="")
    with pytest.raises(ValueError, match="one-line hint"):
        Message("m", hint="two\nlines")
    # a name from the model holding a line break is not a bug in the rule: the hint stays one line (issue 26)
    d = _made_rule().diagnostic("plain", slot="h", what="two\nlines")
    assert d.hint is not None and "\n" not in d.hint and "two\\nlines" in d.hint


def test_every_catalogue_message_has_a_one_line_hint_and_every_rule_words_its_findings():
    from rnnir.passes.catalogue import RULES

    for r in RULES.values():
        assert r.messages, r.code
        for key, m in r.messages.items():
            assert m.hint and "\n" not in m.hint, (r.code, key)


def test_a_rule_keeps_its_cleaned_documentation_and_refuses_none():
    from rnnir.passes.diagnostics import Rule, rule

    made = rule("XX001", "made-up", passes.Severity.WARNING, "a rule made in a test", """
        What it finds
            nothing.
        """)
    assert made == Rule("XX001", "made-up", passes.Severity.WARNING, "a rule made in a test", "What it finds\n    nothing.")
    with pytest.raises(ValueError, match="rule XX002 has no documentation"):
        rule("XX002", "undocumented", passes.Severity.ERROR, "no doc", "")
