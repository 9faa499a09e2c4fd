"""StatefulSession's public behaviour pinned with hand-checkable numbers: both run() signatures and their errors,
what the model is (inputs, slots, outputs), setting/resetting/forking the state, how a slot's initial shape is
resolved, the slot size limit, and every way a state file can be refused.  Written against the public API only, so
it holds whatever the hot path looks like.

The model is the seed recurrence ``h_t = 0.5 * h_{t-1} + x_t`` (ONNX RNN, identity activation): x = 1 at every
step gives h = 1, 1.5, 1.75, ...; onnxruntime run directly is the oracle where the numbers are not obvious."""

from __future__ import annotations

import json
import os
import re
import zipfile

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnir import ModelError, StateError
from rnnir.runtime import FeedError, IOSpec, StatefulSession

F = TensorProto.FLOAT


def vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def build(nodes, inputs, outputs, inits=(), opset=14, name="seed"):
    m = helper.make_model(helper.make_graph(nodes, name, inputs, outputs, list(inits)), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def seed(h_shape=(1, "B", 1), x_shape=("T", "B", 1), wh=0.5, h0_default=None):
    node = helper.make_node("RNN", ["x", "W", "R", "", "", "h0"], ["y", "hn"], hidden_size=1,
                            activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0])
    inits = [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"), numpy_helper.from_array(np.full((1, 1, 1), wh, np.float32), "R")]
    if h0_default is not None:
        inits.append(numpy_helper.from_array(np.asarray(h0_default, np.float32), "h0"))
    return build([node], [vi("x", list(x_shape)), vi("h0", None if h_shape is None else list(h_shape))],
                 [vi("y", ["T", 1, "B", 1]), vi("hn", None if h_shape is None else list(h_shape))], inits)


def x1(v=1.0, batch=1, steps=1):
    return {"x": np.full((steps, batch, 1), v, np.float32)}


def val(a):
    return np.asarray(a).ravel().tolist()


# -- the two run() signatures ------------------------------------------------------------------------


def test_onnxruntimes_signature_returns_a_list_of_the_plain_outputs_by_default():
    s = StatefulSession(seed())
    got = s.run(None, x1())
    assert isinstance(got, list) and len(got) == 1 and val(got[0]) == [1.0]  # y only: hn is the session's
    hn, y = s.run(["hn", "y"], x1())
    assert val(hn) == [1.5] and val(y) == [1.5]
    assert [a.name for a in s.get_inputs()] == ["x"] and [a.name for a in s.get_outputs()] == ["y"]


def test_the_dict_signature_returns_the_outputs_asked_for():
    # (which outputs run(feeds) returns by default is the hot path's choice; run_dict returns every output)
    s = StatefulSession(seed())
    got = s.run(x1())
    assert isinstance(got, dict) and val(got["y"]) == [1.0]
    assert list(s.run(x1(), ["hn"])) == ["hn"]
    assert list(s.run(x1(), outputs=["y"])) == ["y"]
    got = s.run_dict(x1())
    assert list(got) == ["y", "hn"] and val(got["hn"]) == [1.875]  # the fourth step
    assert list(s.run_dict(x1(), ["hn", "y"])) == ["hn", "y"]


def test_run_refuses_what_onnxruntime_would_not_take():
    s = StatefulSession(seed())
    with pytest.raises(FeedError, match=r"^seed: output_names is a list of names, not the string 'y'$"):
        s.run("y", x1())
    with pytest.raises(FeedError, match=r"^seed: run\(output_names, input_feed\) takes a dict of input name -> array as input_feed, got list; or call run_dict\(feeds\)$"):
        s.run(None, [np.ones((1, 1, 1), np.float32)])
    with pytest.raises(FeedError, match=re.escape("seed: the model has no output(s) ['z']; outputs are ['y', 'hn']")):
        s.run_dict(x1(), ["y", "z"])
    with pytest.raises(FeedError, match=re.escape("seed: the model has no input 'z'; inputs are ['x', 'h0']")):
        s.run_dict({"z": np.zeros(1)})
    with pytest.raises(FeedError, match=re.escape("seed: missing input(s) ['x'] (state inputs ['h0'] may be omitted)")):
        s.run_dict({})
    assert s.stats.calls == 0 and val(s.run_dict(x1())["hn"]) == [1.0]  # nothing ran before


def test_feeds_of_another_dtype_are_converted_with_cast_inputs_and_made_contiguous():
    s = StatefulSession(seed(), cast_inputs=True)
    x = np.ones((1, 2, 1), np.float64)  # float64 where float32 is declared
    assert val(s.run_dict(x1() | {"x": x})["hn"]) == [1.0, 1.0]
    strided = np.ones((2, 2, 2), np.float32)[:, :, :1]  # not contiguous
    assert not strided.flags.c_contiguous
    assert val(s.run_dict({"x": strided})["hn"]) == [1.75, 1.75]  # 1 -> 1.5 -> 1.75


def test_an_explicit_state_feed_replaces_that_call_only():
    s = StatefulSession(seed())
    s.run_dict(x1())  # h = 1
    assert val(s.run_dict(x1() | {"h0": np.full((1, 1, 1), 4.0, np.float32)})["hn"]) == [3.0]  # 0.5 * 4 + 1
    assert val(s.run_dict(x1())["hn"]) == [2.5]  # from the call's result, not from 1 or 4


# -- what the model is ---------------------------------------------------------------------------------


def test_the_model_as_the_session_describes_it():
    m = seed()
    m.graph.input[0].type.tensor_type.shape.dim[0].Clear()  # a dim with neither value nor name
    s = StatefulSession(m)
    assert s.label == "seed"
    assert s.inputs == {"x": IOSpec("x", np.dtype(np.float32), (None, "B", 1))}
    (slot,) = s.slots
    assert (slot.input, slot.output, slot.dtype, slot.shape, slot.init.kind, slot.output_dtype) == (
        "h0", "hn", np.dtype(np.float32), (1, "B", 1), "zeros", np.dtype(np.float32))
    assert [(p.input, p.output) for p in s.pairs] == [("h0", "hn")]
    assert s.output_names == ["y", "hn"] and s.optional_inputs == set() and s.length_inputs == []
    assert [(r.input, r.time_axis, r.batch_axis) for r in s.recurrent_inputs] == [("x", 0, 1)]
    assert s.state_version is None
    assert re.fullmatch(r"[0-9a-f]{64}", s.fingerprint)
    assert StatefulSession(seed()).fingerprint == StatefulSession(seed()).fingerprint != StatefulSession(seed(wh=0.25)).fingerprint
    assert "CPUExecutionProvider" in s.get_providers() and s.get_modelmeta() is not None


def test_state_bytes_and_repr():
    s = StatefulSession(seed())
    assert s.state_bytes == 0  # nothing resolved before the first call
    assert repr(s) == "<StatefulSession 'seed': h0->hn; 0 calls>"
    s.run_dict(x1(batch=3))
    assert s.state_bytes == 12  # [1, 3, 1] float32
    assert repr(s) == "<StatefulSession 'seed': h0->hn; 1 calls>"
    stateless = build([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])])
    assert repr(StatefulSession(stateless)) == "<StatefulSession 'seed': no state; 0 calls>"


def test_a_state_input_with_a_default_is_optional_and_starts_from_it():
    s = StatefulSession(seed(h_shape=(1, 1, 1), h0_default=np.full((1, 1, 1), 2.0)))
    assert s.optional_inputs == {"h0"} and s.slots[0].init.kind == "constant"
    assert val(s.initial_state()["h0"]) == [2.0]
    assert val(s.run_dict(x1())["hn"]) == [2.0]  # 0.5 * 2 + 1


def test_an_initial_constant_without_a_declared_shape_gives_the_slot_its_shape():
    s = StatefulSession(seed(h_shape=None, h0_default=np.full((1, 2, 1), 3.0)))
    assert s.initial_state()["h0"].shape == (1, 2, 1)
    assert val(s.run_dict(x1(batch=2))["hn"]) == [2.5, 2.5]


def test_onnxruntime_refusing_the_model_is_a_ModelError():
    m = seed()
    m.graph.node.append(helper.make_node("NoSuchOp", ["y"], ["z"], domain="com.example"))
    m.graph.output.append(vi("z", None))
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(ModelError, match="onnxruntime cannot load the model"):
        StatefulSession(m)


# -- the state ---------------------------------------------------------------------------------------------


def lstm_hc():
    """h0 and c0 of an LSTM: two slots, for setting one and keeping the other."""
    rng = np.random.default_rng(1)
    node = helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["y", "hn", "cn"], hidden_size=2)
    inits = [numpy_helper.from_array(rng.standard_normal((1, 8, 1)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal((1, 8, 2)).astype(np.float32), "R")]
    return build([node], [vi("x", ["T", 1, 1]), vi("h0", [1, 1, 2]), vi("c0", [1, 1, 2])],
                 [vi("y", None), vi("hn", [1, 1, 2]), vi("cn", [1, 1, 2])], inits, name="lstm")


def test_setting_one_slot_keeps_the_other():
    s = StatefulSession(lstm_hc())
    s.run_dict(x1())
    before = s.state
    s.state = {"h0": np.array([[[0.25, -0.5]]], np.float32)}
    after = s.state
    assert val(after["h0"]) == [0.25, -0.5]
    np.testing.assert_array_equal(after["c0"], before["c0"])
    # the next call starts from (set h, kept c): onnxruntime given the same is the oracle
    import onnxruntime as ort

    sess = ort.InferenceSession(lstm_hc().SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": np.ones((1, 1, 1), np.float32), "h0": after["h0"], "c0": after["c0"]})
    got = s.run_dict(x1())
    np.testing.assert_array_equal(got["hn"], want[1])
    np.testing.assert_array_equal(got["cn"], want[2])


def test_setting_the_state_converts_within_a_kind_and_refuses_the_rest():
    s = StatefulSession(seed(h_shape=(1, "B", 1)))
    s.state = {"h0": np.full((1, 2, 1), 2, np.int64)}  # int -> float32: fine; a symbolic dim takes any size
    assert s.state["h0"].dtype == np.float32 and val(s.run_dict(x1(batch=2))["hn"]) == [2.0, 2.0]
    with pytest.raises(StateError, match=r"^seed: state is set from a dict of state input name -> array, not list$"):
        s.state = [np.zeros((1, 1, 1))]
    with pytest.raises(StateError, match=re.escape("seed: ['x'] are not state inputs; the state inputs are ['h0']")):
        s.state = {"x": np.zeros((1, 1, 1))}
    with pytest.raises(StateError, match=r"^seed: state 'h0' takes float32, got complex64$"):
        s.state = {"h0": np.zeros((1, 1, 1), np.complex64)}
    with pytest.raises(StateError, match=re.escape("seed: state 'h0' is declared [1, B, 1], got shape [1, 1]")):
        s.state = {"h0": np.zeros((1, 1), np.float32)}
    with pytest.raises(StateError, match=re.escape("seed: state 'h0' is declared [1, B, 1], got shape [2, 1, 1]")):
        s.state = {"h0": np.zeros((2, 1, 1), np.float32)}
    with pytest.raises(StateError, match=re.escape("seed: state 'h0' is declared [1, B, 1], got shape [1, 1, 2]")):
        s.state = {"h0": np.zeros((1, 1, 2), np.float32)}
    assert val(s.state["h0"]) == [2.0, 2.0]  # refused assignments changed nothing


def test_reset_goes_back_to_the_initial_state_and_resolves_the_batch_again():
    s = StatefulSession(seed())
    s.run_dict(x1(batch=2))
    s.run_dict(x1(batch=2))
    s.reset()
    assert val(s.run_dict(x1(batch=3))["hn"]) == [1.0, 1.0, 1.0]


def test_fork_copies_the_state_or_starts_afresh():
    s = StatefulSession(seed())
    s.run_dict(x1())  # h = 1
    twin = s.fork()
    fresh = s.fork(reset=True)
    assert val(twin.run_dict(x1())["hn"]) == [1.5]
    assert val(fresh.run_dict(x1())["hn"]) == [1.0]
    assert val(s.run_dict(x1())["hn"]) == [1.5]  # the original went on alone
    assert twin.alias_outputs is False and s.fork(alias_outputs=True).alias_outputs is True
    assert StatefulSession(seed(), alias_outputs=True).fork().alias_outputs is True
    # a fork of a session that never ran starts from the initial state
    assert val(StatefulSession(seed()).fork().run_dict(x1())["hn"]) == [1.0]


# -- initial shapes --------------------------------------------------------------------------------------------


def test_state_shapes_resolve_what_nothing_else_can():
    m = seed(h_shape=(1, "M", 1))
    s = StatefulSession(m, state_shapes={"h0": [1, 2, 1]})
    assert s.initial_state()["h0"].shape == (1, 2, 1)
    with pytest.raises(StateError, match=re.escape("seed: state_shapes names ['x'], which are not state inputs ['h0']")):
        StatefulSession(m, state_shapes={"x": [1]})


def test_a_state_without_a_declared_shape_asks_for_state_shapes():
    with pytest.raises(StateError, match=re.escape("seed: state input 'h0' declares no shape; pass state_shapes={'h0': (...)}")):
        StatefulSession(seed(h_shape=None)).initial_state(x1())


def test_a_shared_symbol_sizes_the_state():
    s = StatefulSession(seed(h_shape=(1, "B", 1)))
    assert s.initial_state(x1(batch=4))["h0"].shape == (1, 4, 1)
    # a feed whose rank differs from its declaration says nothing about its symbols: the batch axis decides
    assert s.initial_state({"x": np.ones((2, 5, 1, 1), np.float32)})["h0"].shape == (1, 5, 1)


def plain_state(x_shape, h_shape):
    """hn = h0 + sum(x) (plain ops): no recurrent op, so no batch axis to read."""
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0), helper.make_node("Add", ["h0", "sx"], ["hn"])]
    return build(nodes, [vi("x", list(x_shape)), vi("h0", list(h_shape))], [vi("hn", list(h_shape))], opset=11, name="plain")


def test_without_a_batch_axis_the_leading_dim_of_a_dynamic_input_is_the_batch():
    s = StatefulSession(plain_state(["N", 2], ["M", 2]))
    assert s.initial_state({"x": np.ones((3, 2), np.float32)})["h0"].shape == (3, 2)
    assert val(s.run_dict({"x": np.ones((3, 2), np.float32)})["hn"]) == [6.0] * 6


def test_a_static_leading_dim_is_not_the_batch():
    s = StatefulSession(plain_state([3, "K"], ["M", 2]))
    with pytest.raises(StateError, match=re.escape(
        "plain: cannot tell dim 0 (M) of state input 'h0' (declared [M, 2]) from the feeds; pass state_shapes={'h0': (...)}"
    )):
        s.initial_state({"x": np.ones((3, 4), np.float32)})


def test_a_wrong_guess_is_dropped_with_a_clear_error_and_the_session_recovers():
    # hn = h0 + k, k a constant [2, 2]: the state's M must be 2, but x's leading dim says 3
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0), helper.make_node("Add", ["h0", "k"], ["hk"]),
             helper.make_node("Add", ["hk", "sx"], ["hn"])]
    m = build(nodes, [vi("x", ["N", 2]), vi("h0", ["M", 2])], [vi("hn", ["M", 2])],
              [numpy_helper.from_array(np.ones((2, 2), np.float32), "k")], opset=11, name="guess")
    s = StatefulSession(m)
    with pytest.raises(StateError, match=re.escape("guess: the first call failed with state shapes rnnir had to guess (h0: dim 0 = 3 (leading dim of 'x'));")):
        s.run_dict({"x": np.ones((3, 2), np.float32)})
    s.state = {"h0": np.zeros((2, 2), np.float32)}
    assert val(s.run_dict({"x": np.ones((3, 2), np.float32)})["hn"]) == [7.0] * 4  # 0 + 1 + 6


# -- the slot size limit -----------------------------------------------------------------------------------------


def test_a_slot_at_the_limit_is_allowed_and_one_byte_over_is_refused(tmp_path):
    ok = StatefulSession(seed(), max_slot_bytes=12)
    assert ok.initial_state(x1(batch=3))["h0"].shape == (1, 3, 1)  # 3 float32: 12 bytes
    tight = StatefulSession(seed(), max_slot_bytes=11)
    with pytest.raises(StateError, match=re.escape("seed: state input 'h0' of shape [1, 3, 1] would take 12 bytes, over the 11-byte limit per slot")):
        tight.initial_state(x1(batch=3))
    # a saved state is held to the same limit
    big = StatefulSession(seed())
    big.run_dict(x1(batch=3))
    path = big.save_state(tmp_path / "big.state")
    with pytest.raises(StateError, match=re.escape(f"{path}: state input 'h0' of shape [1, 3, 1] would take 12 bytes, over the 11-byte limit")):
        tight.load_state(path)


# -- state files ---------------------------------------------------------------------------------------------------


def saved_parts(s, path):
    s.save_state(path)
    with np.load(path, allow_pickle=False) as z:
        return json.loads(str(z["__rnnir_state__"])), {k: z[k] for k in z.files if k != "__rnnir_state__"}


def write_npz(path, meta, entries):
    with open(path, "wb") as f:
        np.savez(f, __rnnir_state__=np.array(meta if isinstance(meta, str) else json.dumps(meta)), **entries)


def test_a_state_file_holds_what_the_session_held_and_continues_the_stream(tmp_path):
    s = StatefulSession(seed())
    s.run_dict(x1(batch=2))
    s.run_dict(x1(batch=2))  # h = 1.5
    meta, entries = saved_parts(s, tmp_path / "s.state")
    assert meta == {"format": "rnnir.state/1", "fingerprint": s.fingerprint, "state_version": None, "model": "seed",
                    "slots": {"h0": {"dtype": "float32", "shape": [1, 2, 1]}}}
    assert list(entries) == ["slot:h0"] and val(entries["slot:h0"]) == [1.5, 1.5]
    other = StatefulSession(seed())
    outcome = other.load_state(tmp_path / "s.state")
    assert outcome is not None
    assert val(other.run_dict(x1(batch=2))["hn"]) == [1.75, 1.75]


def test_a_saved_state_of_another_batch_loads_into_a_symbolic_dim(tmp_path):
    s = StatefulSession(seed())
    s.run_dict(x1(batch=3))
    path = s.save_state(tmp_path / "s.state")
    other = StatefulSession(seed())
    other.run_dict(x1(batch=1))
    other.load_state(path)
    assert val(other.run_dict(x1(batch=3))["hn"]) == [1.5, 1.5, 1.5]


def test_a_saved_slot_of_another_rank_or_fixed_dim_is_refused(tmp_path):
    s = StatefulSession(seed())
    s.run_dict(x1())
    meta, _ = saved_parts(s, tmp_path / "s.state")
    for shape in [(1, 1), (1, 1, 1, 1), (2, 1, 1), (1, 1, 3)]:
        write_npz(tmp_path / "s.state", meta, {"slot:h0": np.zeros(shape, np.float32)})
        text = "[" + ", ".join(map(str, shape)) + "]"
        with pytest.raises(StateError, match=re.escape(f"slot 'h0' was saved with shape {text}, the model declares [1, B, 1]")):
            s.load_state(tmp_path / "s.state")


def test_state_file_errors(tmp_path):
    s = StatefulSession(seed())
    s.run_dict(x1())
    meta, entries = saved_parts(s, tmp_path / "good.state")

    def refused(path, message):
        with pytest.raises(StateError, match=message):
            s.load_state(path)

    refused(tmp_path / "missing.state", r"missing\.state: cannot read saved state: No such file or directory")
    refused(tmp_path, r": not a regular file; a saved state is a file written by save_state")
    (tmp_path / "empty.state").write_bytes(b"")
    refused(tmp_path / "empty.state", r"empty\.state: the file is empty, not a saved state")
    (tmp_path / "junk.state").write_bytes(b"PK not really")
    refused(tmp_path / "junk.state", r"junk\.state: cannot read saved state \(truncated, or not a state file\)")
    with open(tmp_path / "nometa.state", "wb") as f:
        np.savez(f, **entries)
    refused(tmp_path / "nometa.state", r"nometa\.state: not an rnnir state file \(no __rnnir_state__ entry\)")
    write_npz(tmp_path / "list.state", json.dumps([1, 2]), entries)
    refused(tmp_path / "list.state", r"list\.state: the state file's metadata is not what save_state writes")
    write_npz(tmp_path / "notjson.state", "{not json", entries)
    refused(tmp_path / "notjson.state", r"notjson\.state: the state file's metadata is not what save_state writes")
    with open(tmp_path / "vector.state", "wb") as f:
        np.savez(f, __rnnir_state__=np.array([json.dumps(meta)]), **entries)
    refused(tmp_path / "vector.state", r"vector\.state: the state file's metadata is not what save_state writes")
    with zipfile.ZipFile(tmp_path / "good.state", "a") as z:
        z.writestr("readme.txt", "hello")
    refused(tmp_path / "good.state", r"good\.state: unexpected entry 'readme\.txt'; not a file written by save_state")


def test_a_state_file_that_expands_past_the_limit_is_refused_before_reading(tmp_path):
    # the model's slot is [1, 1, 1] float32: 4 bytes, plus 1 MiB of room for the metadata; a 2 MiB entry is too much
    s = StatefulSession(seed(h_shape=(1, 1, 1)))
    meta, _ = saved_parts(s, tmp_path / "s.state")
    with zipfile.ZipFile(tmp_path / "big.state", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("__rnnir_state__.npy", b"")
        z.writestr("slot:h0.npy", b"\0" * (2 << 20))
    with pytest.raises(StateError, match=r"big\.state: the archive expands to 2,097,152 bytes, more than this model's slots may hold \(1,048,580\)"):
        s.load_state(tmp_path / "big.state")


def test_saving_into_a_missing_folder_is_a_StateError(tmp_path):
    s = StatefulSession(seed())
    s.run_dict(x1())
    with pytest.raises(StateError, match=r"folder\.state: no such folder '.*/no/such'$"):
        s.save_state(tmp_path / "no" / "such" / "folder.state")


def test_saving_replaces_an_older_file_and_leaves_no_temporary_behind(tmp_path):
    s = StatefulSession(seed())
    path = tmp_path / "s.state"
    path.write_bytes(b"old")
    s.run_dict(x1())
    assert s.save_state(str(path)) == path
    assert sorted(os.listdir(tmp_path)) == ["s.state"]
    fresh = StatefulSession(seed())
    fresh.load_state(path)
    assert val(fresh.state["h0"]) == [1.0]


def test_the_state_of_a_symbolic_slot_cannot_be_read_before_a_call_resolves_it():
    s = StatefulSession(seed())
    with pytest.raises(StateError, match=re.escape("seed: cannot tell dim 1 (B) of state input 'h0' (declared [1, B, 1]) from the feeds")):
        s.state  # noqa: B018 - reading is the behaviour under test
    assert val(StatefulSession(seed(h_shape=(1, 1, 1))).state["h0"]) == [0.0]


# -- which inputs feed a recurrent op ------------------------------------------------------------------------------


def rnn_fed_by(prefix_nodes, x_input="x", seq="", extra_inputs=(), x_shape=("T", "B", 1)):
    node = helper.make_node("RNN", [x_input, "W", "R", "", seq, "h0"], ["y", "hn"], hidden_size=1,
                            activations=["Affine"], activation_alpha=[1.0], activation_beta=[0.0])
    inits = [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"), numpy_helper.from_array(np.full((1, 1, 1), 0.5, np.float32), "R")]
    return build([*prefix_nodes, node], [vi("x", list(x_shape)), *extra_inputs, vi("h0", [1, "B", 1])], [vi("y", None), vi("hn", [1, "B", 1])], inits)


def test_an_input_reaches_x_through_identity_and_cast():
    m = rnn_fed_by([helper.make_node("Cast", ["x"], ["xc"], to=F), helper.make_node("Identity", ["xc"], ["xi"])], x_input="xi",
                   x_shape=("T", "B", 1))
    s = StatefulSession(m)
    assert [(r.input, r.time_axis, r.batch_axis) for r in s.recurrent_inputs] == [("x", 0, 1)]
    assert s.initial_state(x1(batch=2, steps=3))["h0"].shape == (1, 2, 1)


def test_an_input_through_another_op_or_a_transpose_without_perm_is_not_traced():
    relu = StatefulSession(rnn_fed_by([helper.make_node("Relu", ["x"], ["xr"])], x_input="xr"))
    assert relu.recurrent_inputs == []
    # Transpose without perm reverses the axes; the runtime does not guess: not traced, and the batch comes from
    # the leading dim of the input instead ([B, 1, T] here: 2 rows)
    flip = StatefulSession(rnn_fed_by([helper.make_node("Transpose", ["x"], ["xt"])], x_input="xt", x_shape=("B", 1, "T")))
    assert flip.recurrent_inputs == []
    assert flip.initial_state({"x": np.ones((2, 1, 5), np.float32)})["h0"].shape == (1, 2, 1)


def test_sequence_lens_through_a_cast_is_a_length_input():
    m = rnn_fed_by([helper.make_node("Cast", ["lens"], ["lens32"], to=TensorProto.INT32)], seq="lens32",
                   extra_inputs=[vi("lens", [1], TensorProto.INT64)], x_shape=("T", 1, 1))
    s = StatefulSession(m)
    assert s.length_inputs == ["lens"]
    # 3 steps, only 2 of them counted: h = 1, 1.5 and the third y row is 0
    got = s.run_dict({"x": np.ones((3, 1, 1), np.float32), "lens": np.array([2], np.int64)})
    assert val(got["hn"]) == [1.5] and val(got["y"]) == [1.0, 1.5, 0.0]
    assert StatefulSession(seed()).length_inputs == []


def bogus_archive(path, entry_bytes):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("__rnnir_state__.npy", b"")
        z.writestr("slot:h0.npy", b"\0" * entry_bytes)


def test_a_symbolic_slot_may_expand_to_its_limit_and_a_migration_to_twice_that(tmp_path):
    # h0 [1, B, 1] has no fixed size: its file may hold max_slot_bytes (1 MiB here) plus 1 MiB of metadata room;
    # when the state may be another model's (reset or migrate), an older layout may be up to twice as large
    s = StatefulSession(seed(), max_slot_bytes=1 << 20)
    path = tmp_path / "big.state"
    bogus_archive(path, (5 << 20) // 2)  # 2.5 MiB
    with pytest.raises(StateError, match=r"expands to 2,621,440 bytes, more than this model's slots may hold \(2,097,152\)"):
        s.load_state(path)
    with pytest.raises(StateError, match=r"cannot read saved state \(truncated, or not a state file\)"):  # read, then found bogus
        s.load_state(path, on_version_mismatch="reset")
    bogus_archive(path, (7 << 20) // 2)  # 3.5 MiB: over 1 + 2 MiB
    with pytest.raises(StateError, match=r"expands to 3,670,016 bytes, more than this model's slots may hold \(3,145,728\)"):
        s.load_state(path, on_version_mismatch="reset")


def test_a_sequence_lens_that_is_not_a_graph_input_is_not_a_length_input():
    m = rnn_fed_by([helper.make_node("Constant", [], ["lens"], value=numpy_helper.from_array(np.array([1], np.int32)))], seq="lens",
                   x_shape=("T", 1, 1))
    s = StatefulSession(m)
    assert s.length_inputs == []
    assert val(s.run_dict({"x": np.ones((2, 1, 1), np.float32)})["y"]) == [1.0, 0.0]  # one step of two counted


def test_a_float64_state_stays_float64():
    node = helper.make_node("Add", ["h0", "x"], ["hn"])
    m = build([node], [vi("x", [2], TensorProto.DOUBLE), vi("h0", [2], TensorProto.DOUBLE)], [vi("hn", [2], TensorProto.DOUBLE)], name="f64")
    s = StatefulSession(m)
    assert s.slots[0].dtype == np.float64
    s.run_dict({"x": np.array([0.1, 1e-12])})
    got = s.run_dict({"x": np.array([0.2, 1e-12])})["hn"]
    assert got.dtype == np.float64 and got.tolist() == [0.1 + 0.2, 2e-12]  # float32 would round both


def test_a_state_output_of_another_dtype_is_refused_unless_cast_state_is_asked_for():
    nodes = [helper.make_node("Add", ["h0", "x"], ["h32"]), helper.make_node("Cast", ["h32"], ["hn"], to=TensorProto.DOUBLE)]
    m = build(nodes, [vi("x", [1]), vi("h0", [1])], [vi("hn", [1], TensorProto.DOUBLE)], name="cast")
    s = StatefulSession(m)
    assert s.cast_state is False
    with pytest.raises(StateError, match=re.escape(
        "cast: state output 'hn' is float64 but state input 'h0' takes float32: feeding it back needs a conversion the model "
        "does not make (SD005); pass cast_state=True to convert it through numpy every call"
    )):
        s.run_dict({"x": np.ones(1, np.float32)})
    c = StatefulSession(m, cast_state=True)
    assert c.cast_state is True
    c.run_dict({"x": np.ones(1, np.float32)})
    got = c.run_dict({"x": np.ones(1, np.float32)})["hn"]
    assert got.dtype == np.float64 and val(got) == [2.0] and c.state["h0"].dtype == np.float32


def test_run_options_take_the_general_path_with_the_same_results():
    import onnxruntime as ort

    s = StatefulSession(seed())
    assert val(s.run_dict(x1())["hn"]) == [1.0]
    assert val(s.run_dict(x1())["hn"]) == [1.5]
    assert val(s.run_dict(x1(), run_options=ort.RunOptions())["hn"]) == [1.75]
    assert val(s.run(["hn"], x1(), ort.RunOptions())[0]) == [1.875]
    assert val(s.run_dict(x1())["hn"]) == [1.9375]


def test_initial_state_reads_only_the_plain_feeds():
    s = StatefulSession(seed())
    got = s.initial_state({"x": np.ones((1, 2, 1), np.float32), "h0": np.ones((1, 7, 1), np.float32), "other": 1})
    assert got["h0"].shape == (1, 2, 1) and got["h0"].dtype == np.float32 and not got["h0"].any()


def test_saving_over_a_folder_fails_cleanly_and_leaves_nothing_behind(tmp_path):
    s = StatefulSession(seed())
    s.run_dict(x1())
    (tmp_path / "taken").mkdir()
    with pytest.raises(StateError, match=r"taken: a folder, not a regular file; rnnir writes only regular files, nothing was written$"):
        s.save_state(tmp_path / "taken")
    assert sorted(os.listdir(tmp_path)) == ["taken"] and os.listdir(tmp_path / "taken") == []


def test_a_default_of_one_row_is_broadcast_to_the_resolved_batch():
    s = StatefulSession(seed(h_shape=(1, "B", 1), h0_default=np.full((1, 1, 1), 2.0)))
    got = s.initial_state(x1(batch=2))["h0"]
    assert got.shape == (1, 2, 1) and val(got) == [2.0, 2.0]
    assert val(s.run_dict(x1(batch=2))["hn"]) == [2.0, 2.0]  # 0.5 * 2 + 1


def test_a_state_without_a_declared_shape_takes_any_shape_when_set():
    s = StatefulSession(seed(h_shape=None, h0_default=np.zeros((1, 1, 1))))
    s.state = {"h0": np.full((1, 3, 1), 4.0, np.float32)}
    assert val(s.run_dict(x1(batch=3))["hn"]) == [3.0, 3.0, 3.0]
