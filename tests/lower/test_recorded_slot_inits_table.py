"""The slots' initial values an rnnir export records (metadata ``rnnir.slots``), read back by lowering: one table,
row for row, of what each recorded entry gives the slot, including every entry lowering must pass over (zeros,
the default of a model without the record). The model is the plain LSTM of tests.support.onnx_models with the
metadata written by hand; a round trip through rnnir.export is the independent check of the format."""

from __future__ import annotations

import json

import numpy as np

import rnnir
from tests.support.onnx_models import lstm_h0c0


def _inits(raw: str | None):
    m = lstm_h0c0()
    if raw is not None:
        m.metadata_props.add(key="rnnir.slots", value=raw)
    out = {}
    for s in rnnir.load(m).slots:
        v = s.init.value
        out[s.name] = (s.init.kind, None if v is None else (str(np.asarray(v).dtype), np.asarray(v).tolist()))
    return out


ZEROS = ("zeros", None)
CONST = ("constant", ("float32", [[[1.0, 2.0, 3.0, 4.0]]]))


def test_each_recorded_entry_and_each_entry_passed_over():
    table = [  # (recorded metadata, h0's init, c0's init)
        (None, ZEROS, ZEROS),
        ({"h0": {"init": "caller"}, "c0": {"init": "zeros"}}, ("caller", None), ZEROS),
        ({"h0": {"init": "constant", "value": [[[1, 2, 3, 4]]], "value_dtype": "float32", "value_shape": [1, 1, 4]}}, CONST, ZEROS),
        ({"h0": {"init": "constant", "value": [1, 2], "value_dtype": "int64"}}, ("constant", ("int64", [1, 2])), ZEROS),  # no shape: flat
        ({"h0": {"init": "constant", "value": [[1.5], [2.5]]}}, ("constant", ("float32", [1.5, 2.5])), ZEROS),  # no dtype: float32
        ({"h0": {"init": "constant"}}, ZEROS, ZEROS),  # no value: nothing to start from
        # an unreadable constant is passed over, and does not take the previous entry's value
        ({"c0": {"init": "constant", "value": [[[1, 2, 3, 4]]], "value_shape": [1, 1, 4]},
          "h0": {"init": "constant", "value": [1, 2, 3], "value_shape": [2, 2]}}, ZEROS, CONST),
        ({"h0": {"init": "constant", "value": ["x"]}}, ZEROS, ZEROS),
        ({"h0": {"init": "constant", "value": [1.0], "value_dtype": "no-such-type"}}, ZEROS, ZEROS),
        ({"h0": {"init": "ones"}}, ZEROS, ZEROS),
        ({"h0": {"init": "ones", "value": [1.0]}}, ZEROS, ZEROS),  # a value, but not of a constant init
        ({"h0": "caller"}, ZEROS, ZEROS),  # an entry that is not an object
        ([{"h0": {"init": "caller"}}], ZEROS, ZEROS),  # a record that is not an object
        ("{not json", ZEROS, ZEROS),
    ]
    for recorded, h0, c0 in table:
        raw = recorded if recorded is None or isinstance(recorded, str) else json.dumps(recorded)
        assert _inits(raw) == {"h0": h0, "c0": c0}, recorded
    _an_exported_programs_slot_inits_come_back_from_its_record()  # one test function: the mutation tool runs the fastest first


def _an_exported_programs_slot_inits_come_back_from_its_record():
    b = rnnir.Builder("cell")
    h = b.slot("h", "float32", (1, 1, 4), init=np.array([[[0.5, -1.0, 2.0, 0.0]]], np.float32))
    c = b.slot("c", "float32", (1, 1, 4), init="caller")
    x = b.input("x", "float32", (5, 1, 3))
    rng = np.random.default_rng(0)
    w = b.const("W", rng.standard_normal((1, 16, 3)).astype(np.float32))
    r = b.const("R", rng.standard_normal((1, 16, 4)).astype(np.float32))
    _, hn, cn = b.recurrent("LSTM", x, w, r, initial_h=b.load(h), initial_c=b.load(c), hidden_size=4, name="lstm", outputs=["Y", "Yh", "Yc"])
    b.store(hn, h)
    b.store(cn, c)
    back = {s.name: s.init for s in rnnir.load(rnnir.export(b.build())).slots}
    assert back["h"].kind == "constant" and back["h"].value.tolist() == [[[0.5, -1.0, 2.0, 0.0]]]
    assert back["c"].kind == "caller"
