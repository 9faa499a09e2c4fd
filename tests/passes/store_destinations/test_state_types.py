"""SD005 state-type-mismatch, aspect by aspect (mutation survivors of rnnir/passes/store_destinations/state_types.py).

Each program is IR text written for one aspect: a slot h read as initial_h of one RNN (hidden_size 4) and written
back with its final state, through whatever the case needs.  The expected message is composed by hand from the
declared types; the ONNX dtype numbers come from onnx.helper (the ONNX spec), not from rnnir's table.
"""

from __future__ import annotations

from onnx import TensorProto, helper

from rnnir import passes
from rnnir.ir.text import parse_program

TAIL = "the state fed back at the next call is not what the slot declares"


def program(slot: str, *, attrs: str = "hidden_size=4", x: str = "float32[T,1,3]", rnn_types: str = "", body: str = "", store: str = "%hn", extra: str = "") -> str:
    """Slot h : ``slot`` read as RNN 'rnn'.initial_h; ``body`` (IR lines using %y, %hn) makes the value ``store``."""
    return f"""program @p {{
  slot @h : {slot} init=zeros
  value %x : {x}
  value %W : float32[1,4,3]
  value %R : float32[1,4,4]
{extra}
  %h = load_slot<@h, copy>()
  %y, %hn = recurrent.RNN<{attrs}>(%x, %W, %R, _, _, %h) loc{{'node': 'rnn'}}{rnn_types}
{body}
  %s = store<@h, token>({store})
  return<by runtime>(%s)
}}"""


def sd005(text: str) -> list[str]:
    return [d.message for d in passes.run(parse_program(text)) if d.code == "SD005"]


def mismatch(slot: str, aspects: str, detail: str) -> str:
    return f"slot 'h' ({slot}) and the final state written into it disagree on {aspects} ({detail}): {TAIL}"


# -- dtype -------------------------------------------------------------------------------------------------------

CAST_CODES = [
    TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64,
    TensorProto.BOOL, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.UINT32, TensorProto.UINT64, TensorProto.BFLOAT16,
]


def test_a_cast_on_the_exit_path_is_named_by_its_onnx_dtype():
    # one function for the whole table (not parametrized): a wrong entry anywhere must fail the one test a mutant runs
    for code in CAST_CODES:
        target = helper.tensor_dtype_to_np_dtype(code).name  # the ONNX spec's numbering, via onnx
        slot = "float32[1,1,4]" if target == "float64" else "float64[1,1,4]"
        text = program(slot, body=f"  %c = Cast<to={code}>(%hn)", store="%c")
        assert sd005(text) == [mismatch(slot, "dtype", f"dtype: a Cast to {target} sits on the exit path")], code


def test_a_cast_to_the_slots_own_dtype_or_a_castlike_is_no_mismatch():
    assert sd005(program("float32[1,1,4]", body=f"  %c = Cast<to={TensorProto.FLOAT}>(%hn)", store="%c")) == []
    # CastLike takes its dtype from another value: no target to compare
    like = program("float64[1,1,4]", extra="  value %proto : float64[1]", body="  %c = CastLike(%hn, %proto)", store="%c")
    assert sd005(like) == []


def test_a_cast_in_one_if_branch_names_the_branch():
    text = program(
        "float32[1,1,4]",
        extra="  value %cond : bool[]",
        body=(
            f"  %half = Cast<to={TensorProto.FLOAT16}>(%hn)\n"
            "  %c = If<region.then_branch=('then_branch',), region.else_branch=('else_branch',)>(%cond, %half, %hn)"
        ),
        store="%c",
    )
    assert sd005(text) == [mismatch("float32[1,1,4]", "dtype", "dtype: a Cast to float16 sits on the exit path in branch then_branch")]


def test_the_declared_dtype_of_the_value_written_back():
    text = program("float32[1,1,4]", body="  %c = Identity(%hn) : float16[1,1,4]", store="%c")
    assert sd005(text) == [mismatch("float32[1,1,4]", "dtype", "dtype: the value written back (%c) is float16")]
    assert sd005(program("float32[1,1,4]", body="  %c = Identity(%hn) : float32[1,1,4]", store="%c")) == []


def test_the_dtype_of_the_paired_output():
    def paired(out_type: str) -> str:
        text = program("float32[1,1,4]", extra=f"  output hn_out : {out_type}\n  pair h -> hn_out declared \"fed back\"")
        return text.replace("  return<by runtime>(%s)", "  %o = store<out:hn_out, value>(%hn)\n  return<by runtime>(%s, %o)")

    assert sd005(paired("float16[1,1,4]")) == [mismatch("float32[1,1,4]", "dtype", "dtype: paired output 'hn_out' is float16")]
    assert sd005(paired("float32[1,1,4]")) == []


# -- declared shapes ------------------------------------------------------------------------------------------------


SHAPE_CASES = [
    # rank 3: [directions or layers, batch, hidden]; the op's own direction count is checked per slice as well
    ("float32[3,1,4]", "float32[1,1,4]", "directions/layers and directions",
     "directions/layers: dim 0 is 1 in the value written back (%c), 3 in the slot; "
     "directions: h <- RNN 'rnn'.Y_h[0]: the op writes 1 direction(s), the slot holds 3"),
    ("float32[1,3,4]", "float32[1,1,4]", "batch", "batch: dim 1 is 1 in the value written back (%c), 3 in the slot"),
    ("float32[1,1,4]", "float32[1,1,6]", "hidden size", "hidden size: dim 2 is 6 in the value written back (%c), 4 in the slot"),
    # rank 2: [batch, hidden]
    ("float32[2,4]", "float32[1,4]", "batch", "batch: dim 0 is 1 in the value written back (%c), 2 in the slot"),
    ("float32[1,4]", "float32[1,6]", "hidden size", "hidden size: dim 1 is 6 in the value written back (%c), 4 in the slot"),
    # rank 4: the leading axes have no name
    ("float32[2,1,1,4]", "float32[1,1,1,4]", "dim 0", "dim 0: dim 0 is 1 in the value written back (%c), 2 in the slot"),
    ("float32[1,2,1,4]", "float32[1,1,1,4]", "dim 1", "dim 1: dim 1 is 1 in the value written back (%c), 2 in the slot"),
    ("float32[1,1,2,4]", "float32[1,1,1,4]", "batch", "batch: dim 2 is 1 in the value written back (%c), 2 in the slot"),
]


def test_each_axis_of_a_declared_shape_is_named_for_what_it_holds():
    # the value written back is a Reshape of the final state declared with its own shape
    for slot, value, aspects, detail in SHAPE_CASES:
        text = program(slot, extra="  value %shape : int64[2]", body=f"  %c = Reshape(%hn, %shape) : {value}", store="%c")
        assert sd005(text) == [mismatch(slot, aspects, detail)], slot


def test_declared_shapes_of_another_rank_or_with_symbolic_dims_are_not_compared():
    body = "  %c = Reshape(%hn, %shape) : {}"
    extra = "  value %shape : int64[2]"
    assert sd005(program("float32[1,1,4]", extra=extra, body=body.format("float32[1,4]"), store="%c")) == []
    assert sd005(program("float32[1,B,4]", extra=extra, body=body.format("float32[1,2,4]"), store="%c")) == []
    assert sd005(program("float32[1,1,4]", extra=extra, body=body.format("float32[1,N,4]"), store="%c")) == []


# -- the op that made the final state -------------------------------------------------------------------------------


def test_the_ops_hidden_size_against_the_slots_last_dim():
    assert sd005(program("float32[1,1,5]")) == [
        mismatch("float32[1,1,5]", "hidden size", "hidden size: h <- RNN 'rnn'.Y_h[0]: the op's hidden_size is 4, the slot's last dim is 5")
    ]
    assert sd005(program("float32[1,1,4]")) == []


def test_the_ops_batch_is_read_from_its_final_states_type():
    # %c = Identity(%hn) has no declared shape: only the op's own Y_h type [1,2,4] says the batch is 2
    expected = mismatch("float32[1,1,4]", "batch", "batch: h <- RNN 'rnn'.Y_h[0]: the op's batch is 2, the slot's is 1")
    assert sd005(program("float32[1,1,4]", rnn_types=" : float32[T,1,2,4], float32[1,2,4]", body="  %c = Identity(%hn)", store="%c")) == [expected]
    assert sd005(program("float32[1,2,4]", rnn_types=" : float32[T,1,2,4], float32[1,2,4]", body="  %c = Identity(%hn)", store="%c")) == []
    # a rank-2 slot is [batch, hidden]
    assert sd005(program("float32[1,4]", rnn_types=" : float32[T,1,2,4], float32[1,2,4]", body="  %c = Identity(%hn)", store="%c")) == [
        mismatch("float32[1,4]", "batch", "batch: h <- RNN 'rnn'.Y_h[0]: the op's batch is 2, the slot's is 1")
    ]
    assert sd005(program("float32[2,4]", rnn_types=" : float32[T,1,2,4], float32[1,2,4]", body="  %c = Identity(%hn)", store="%c")) == []


def test_a_layout_1_op_has_its_batch_first_and_its_directions_second():
    # layout=1: X is [batch, T, input] and Y_h is [batch, directions, hidden] = [2, 1, 4]
    def text(slot: str) -> str:
        return program(slot, attrs="hidden_size=4, layout=1", x="float32[2,T,3]", rnn_types=" : float32[2,T,1,4], float32[2,1,4]", body="  %c = Identity(%hn)", store="%c")

    assert sd005(text("float32[2,1,4]")) == []
    assert sd005(text("float32[3,1,4]")) == [mismatch("float32[3,1,4]", "batch", "batch: h <- RNN 'rnn'.Y_h[0]: the op's batch is 2, the slot's is 3")]
    assert sd005(text("float32[2,3,4]")) == [mismatch("float32[2,3,4]", "directions", "directions: h <- RNN 'rnn'.Y_h[0]: the op writes 1 direction(s), the slot holds 3")]


def test_one_direction_of_a_bidirectional_op_written_into_a_one_direction_slot_matches():
    # the fix SD006 suggests: persist Y_h[0:1] only; the slot [1,1,4] holds one direction, and so does the value
    text = """program @p {
  slot @h : float32[1,1,4] init=zeros
  value %x : float32[T,1,3]
  value %W : float32[2,4,3]
  value %R : float32[2,4,4]
  value %zero : int64[1] = dense<int64[1] [0]>
  value %one : int64[1] = dense<int64[1] [1]>
  value %r0 : float32[1,1,4] = dense<float32[1,1,4] [0.0, 0.0, 0.0, 0.0]>

  %h = load_slot<@h, copy>()
  %h0 = Concat<axis=0>(%h, %r0)
  %y, %hn = recurrent.RNN<direction='bidirectional', hidden_size=4>(%x, %W, %R, _, _, %h0) loc{'node': 'rnn'}
  %fwd = Slice(%hn, %zero, %one, %zero)
  %s = store<@h, token>(%fwd)
  return<by runtime>(%s)
}"""
    assert sd005(text) == []
    # both directions into the same slot: two directions where the slot holds one
    assert sd005(text.replace("store<@h, token>(%fwd)", "store<@h, token>(%hn)")) == [
        mismatch("float32[1,1,4]", "directions", "directions: h <- RNN 'rnn'.Y_h: the op writes 2 direction(s), the slot holds 1")
    ]


def test_a_slot_layout_that_is_time_first_or_unknown_agrees_with_a_layout_0_op():
    for layout in ["0", "seq_first", "time_first", "tbh", " TBH ", "layout=0", "weird"]:
        assert sd005(program(f'float32[1,1,4] layout="{layout}"')) == [], layout


def test_a_batch_first_slot_layout_disagrees_with_a_layout_0_op():
    for layout in ["1", "batch_first", "bth", "layout=1", "Batch_First"]:
        slot = f'float32[1,1,4] layout="{layout}"'
        assert sd005(program(slot)) == [
            mismatch(f"float32[1,1,4] layout={layout}", "layout", f"layout: h <- RNN 'rnn'.Y_h[0]: the slot is declared layout {layout!r}, the op runs layout=0")
        ], layout


def test_a_batch_first_slot_layout_agrees_with_a_layout_1_op():
    text = program('float32[1,1,4] layout="batch_first"', attrs="hidden_size=4, layout=1", x="float32[1,T,3]")
    assert sd005(text) == []


# -- quantization ----------------------------------------------------------------------------------------------------

Q = "q(scale=[0.5], zero=[0], axis=None)"
Q_TEXT = "QuantParams(scale=(0.5,), zero_point=(0,), axis=None)"


def test_a_quantized_slot_written_with_a_recurrent_ops_final_state():
    # a recurrent op's result is never quantized, typed or not
    assert sd005(program(f"float32[1,1,4] {Q}")) == [
        mismatch("float32[1,1,4] q(scale=(0.5,))", "quantization", f"quantization: the slot is quantized {Q_TEXT}, the value written back is not quantized")
    ]


def test_a_plain_slot_written_with_a_quantized_value():
    text = program("float32[1,1,4]", body=f"  %c = Identity(%hn) : float32[1,1,4] {Q}", store="%c")
    assert sd005(text) == [mismatch("float32[1,1,4]", "quantization", f"quantization: the slot is not quantized, the value written back is quantized {Q_TEXT}")]


def test_quantization_parameters_that_differ():
    text = program(f"float32[1,1,4] {Q}", body="  %c = Identity(%hn) : float32[1,1,4] q(scale=[0.25], zero=[0], axis=None)", store="%c")
    other = "QuantParams(scale=(0.25,), zero_point=(0,), axis=None)"
    assert sd005(text) == [
        mismatch("float32[1,1,4] q(scale=(0.5,))", "quantization", f"quantization: the slot is quantized {Q_TEXT}, the value written back is quantized {other}")
    ]
    assert sd005(program(f"float32[1,1,4] {Q}", body=f"  %c = Identity(%hn) : float32[1,1,4] {Q}", store="%c")) == []


def test_a_value_of_unknown_type_from_a_plain_op_is_not_called_unquantized():
    # Identity's result has no declared type and is no recurrent result: whether it is quantized is unknown
    assert sd005(program(f"float32[1,1,4] {Q}", body="  %c = Identity(%hn)", store="%c")) == []


# -- what cannot be compared is not a mismatch -------------------------------------------------------------------------


def test_nothing_unknown_is_called_a_mismatch():
    # a slot of unknown shape (other rules do complain about it: its slices cannot be lined up), also against a value
    # of known shape; a symbolic last dim; an op without a hidden_size attribute; a paired output of unknown dtype
    assert sd005(program("float32[*]")) == []
    assert sd005(program("float32[*]", body="  %c = Identity(%hn) : float32[1,1,4]", store="%c")) == []
    assert sd005(program("float32[1,1,hidden]")) == []
    assert sd005(program("float32[1,1,5]", attrs="")) == []
    text = program("float32[1,1,4]", extra='  output hn_out : ?[1,1,4]\n  pair h -> hn_out declared "fed back"')
    assert sd005(text.replace("  return<by runtime>(%s)", "  %o = store<out:hn_out, value>(%hn)\n  return<by runtime>(%s, %o)")) == []


def test_a_projected_final_state_is_not_held_to_the_ops_hidden_size():
    # MatMul(Y_h, P[4,6]) written into a [1,1,6] slot: the value is computed from the final state, its width is P's
    assert sd005(program("float32[1,1,6]", extra="  value %P : float32[4,6]", body="  %c = MatMul(%hn, %P)", store="%c")) == []
    # near miss: the same slot written with Y_h itself
    assert sd005(program("float32[1,1,6]")) == [
        mismatch("float32[1,1,6]", "hidden size", "hidden size: h <- RNN 'rnn'.Y_h[0]: the op's hidden_size is 4, the slot's last dim is 6")
    ]


def test_symbolic_directions_and_batch_dims_of_the_slot_are_not_compared_with_the_op():
    typed = " : float32[T,1,2,4], float32[1,2,4]"  # Y_h declared [1 direction, batch 2, hidden 4]
    assert sd005(program("float32[dirs,2,4]", rnn_types=typed, body="  %c = Identity(%hn)", store="%c")) == []
    assert sd005(program("float32[1,batch,4]", rnn_types=typed, body="  %c = Identity(%hn)", store="%c")) == []
    assert sd005(program("float32[batch,4]", rnn_types=typed, body="  %c = Identity(%hn)", store="%c")) == []  # rank 2: [batch, hidden]


def test_a_rank_1_slot_has_no_batch_axis_to_compare():
    # the state kept as [hidden] and unsqueezed for the op: its only dim is the hidden size (4, right), not a batch to
    # hold against Y_h's batch of 1
    text = """program @p {
  slot @h : float32[4] init=zeros
  value %x : float32[T,1,3]
  value %W : float32[1,4,3]
  value %R : float32[1,4,4]
  value %axes : int64[2] = dense<int64[2] [0, 1]>

  %h = load_slot<@h, copy>()
  %h3 = Unsqueeze(%h, %axes)
  %y, %hn = recurrent.RNN<hidden_size=4>(%x, %W, %R, _, _, %h3) loc{'node': 'rnn'} : float32[T,1,1,4], float32[1,1,4]
  %c = Squeeze(%hn, %axes)
  %s = store<@h, token>(%c)
  return<by runtime>(%s)
}"""
    assert passes.run(parse_program(text)) == []
    assert sd005(text.replace("float32[4] init", "float32[5] init")) == [
        mismatch("float32[5]", "hidden size", "hidden size: h <- RNN 'rnn'.Y_h[0]: the op's hidden_size is 4, the slot's last dim is 5")
    ]


def test_a_time_first_slot_layout_disagrees_with_a_layout_1_op():
    for layout in ["0", "seq_first", "time_first", "tbh"]:
        text = program(f'float32[1,1,4] layout="{layout}"', attrs="hidden_size=4, layout=1", x="float32[1,T,3]")
        assert sd005(text) == [
            mismatch(f"float32[1,1,4] layout={layout}", "layout", f"layout: h <- RNN 'rnn'.Y_h[0]: the slot is declared layout {layout!r}, the op runs layout=1")
        ], layout


def test_two_quantizations_that_differ_are_a_mismatch_even_when_the_dtype_is_unknown():
    text = program(f"float32[1,1,4] {Q}", body="  %c = Identity(%hn) : ?[1,1,4] q(scale=[0.25], zero=[0], axis=None)", store="%c")
    other = "QuantParams(scale=(0.25,), zero_point=(0,), axis=None)"
    assert sd005(text) == [
        mismatch("float32[1,1,4] q(scale=(0.5,))", "quantization", f"quantization: the slot is quantized {Q_TEXT}, the value written back is quantized {other}")
    ]


def _appended(cache: str, grown: str) -> str:
    """An append-only cache ``cache`` (frames on axis 1) written back as Concat(cache, 2 new frames) : ``grown``."""
    return "\n".join([
        "program @p {",
        f"  slot @cache : float32[{cache}] init=zeros",
        "  value %x : float32[1,2,2]",
        "  %cache = load_slot<@cache, copy>()",
        "  %new = Relu(%x) : float32[1,2,2]",
        f"  %cat = Concat<axis=1>(%cache, %new) : float32[{grown}]",
        "  %s = store<@cache, token>(%cat)",
        "  return<by runtime>(%s)",
        "}",
    ])


def test_an_append_only_caches_frame_axis_grows_without_a_type_mismatch_but_its_other_axes_do_not():
    # 3 cached frames and 2 new ones: the value written back holds 5 on the frame axis, by design (no SD005)
    assert sd005(_appended("1,3,2", "1,5,2")) == []
    # near miss: axis 0 differs too; SD005 names that axis alone, never the frame axis beside it
    (msg,) = sd005(_appended("1,3,2", "2,5,2"))
    assert "dim 0 is 2 in the value written back (%cat), 1 in the slot" in msg and "dim 1" not in msg
