"""A slice map's port references as the JSON report and the messages show them (docs/json-schema.md: entry/exit)."""

from __future__ import annotations

from rnnir.analysis.slicemaps import PortRef


def test_a_port_reference_names_its_node_port_direction_branch_and_step() -> None:
    last = PortRef("n7", "gru_b", "GRU", "Y", 1, ("if_a", "then"), "last")
    assert last.to_json() == {"node": "gru_b", "op": "GRU", "port": "Y", "direction": 1, "branch": "if_a/then", "step": "last"}
    assert last.label == "GRU 'gru_b'.Y[1]@last"
    # no step taken: the key is left out, not written as null; the whole port has no direction index
    whole = PortRef("n2", "lstm", "LSTM", "initial_c", None)
    assert whole.to_json() == {"node": "lstm", "op": "LSTM", "port": "initial_c", "direction": None, "branch": ""}
    assert whole.label == "LSTM 'lstm'.initial_c"


def test_a_port_reference_is_the_forward_direction_unless_told() -> None:
    ref = PortRef("n1", "gru", "GRU", "Y_h")
    assert ref.direction == 0
    assert ref.to_json()["direction"] == 0 and ref.label == "GRU 'gru'.Y_h[0]"
