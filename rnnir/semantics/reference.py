"""A numpy reference of the ONNX recurrent ops ``RNN``, ``GRU`` and ``LSTM``, and of onnxruntime's contrib
``DynamicQuantizeLSTM`` (an LSTM of dequantized weights) and ``AttnLSTM`` (an LSTM in Bahdanau attention):
every kind of :data:`rnnir.ir.recurrence.KINDS` (:data:`UNSUPPORTED_KINDS` lists any it refuses, with why).

The reference exists so that rnnir can check a model's numbers without
trusting the runtime it is checking. It implements every attribute of the
operators as the ONNX specification (opset 14 and later) defines them:
``direction``, ``layout``, ``activations`` with ``activation_alpha`` /
``activation_beta``, ``clip``, GRU ``linear_before_reset``, LSTM
``input_forget`` and peepholes, ``sequence_lens``, and every optional input
left out.

Shapes and gate orders follow the specification (``G`` gates, ``H`` hidden
size, ``D`` directions)::

    X          layout 0: [seq, batch, input]     layout 1: [batch, seq, input]
    W          [D, G*H, input]                   gates: RNN -, GRU z r h, LSTM i o f c
    R          [D, G*H, H]
    B          [D, 2*G*H]                        W biases then R biases
    P          [D, 3*H]                          LSTM peepholes i o f
    initial_*  layout 0: [D, batch, H]           layout 1: [batch, D, H]
    Y          layout 0: [seq, D, batch, H]      layout 1: [batch, seq, D, H]
    Y_h, Y_c   like initial_*

Computation runs in float64; results come back in X's dtype.

Where the specification leaves a choice open, the reference follows
onnxruntime and says so:

* ``sequence_lens``: batch entry ``b`` runs over its first ``sequence_lens[b]``
  steps only. The reverse direction runs each entry backwards over its own
  length, so its ``Y_h`` is ``Y`` at ``t = 0``. Steps past an entry's length
  are zeros in ``Y``. An entry of length 0 yields zeros for ``Y_h`` and
  ``Y_c`` (not its initial state).
* ``clip`` bounds the complete input of each gate activation to
  ``[-clip, clip]``, peephole terms included; the cell state itself and the
  input of the LSTM output activation ``h`` are not clipped.

Where the specification is explicit and onnxruntime differs, the
specification wins: a missing ``activation_alpha`` / ``activation_beta`` takes
the default of the corresponding ONNX operator (``Affine`` alpha 1 / beta 0,
``ThresholdedRelu`` alpha 1), whereas onnxruntime uses 0. ``ScaledTanh`` has
no default in ONNX, so it needs both values supplied.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rnnir.errors import RnnirError
from rnnir.semantics.activations import ACTIVATION_NAMES, as_name, resolve_activations

if TYPE_CHECKING:
    import numpy as np
else:
    from rnnir.util.lazymod import numpy as np


__all__ = [
    "ACTIVATION_NAMES",
    "UNSUPPORTED_KINDS",
    "UnsupportedKindError",
    "attn_lstm",
    "dequantize_weights",
    "dynamic_quantize_lstm",
    "gru",
    "lstm",
    "rnn",
    "run_node",
    "supports",
]

if TYPE_CHECKING:  # aliases for annotations only: evaluating np.ndarray here would import numpy
    _Array = np.ndarray
    from rnnir.semantics.activations import ActivationFn


# --------------------------------------------------------------------------
# Shared plumbing
# --------------------------------------------------------------------------


def _num_directions(op_type: str, direction: str | bytes) -> tuple[int, tuple[bool, ...]]:
    """Number of directions and, per direction, whether it runs in reverse."""
    name = as_name(direction)
    if name == "forward":
        return 1, (False,)
    if name == "reverse":
        return 1, (True,)
    if name == "bidirectional":
        return 2, (False, True)
    raise ValueError(
        f"{op_type}: direction must be 'forward', 'reverse' or 'bidirectional', got {name!r}."
    )


@dataclass(frozen=True)
class _Prepared:
    """Inputs of one op, validated and brought to layout 0 in float64."""

    x: _Array  # [seq, batch, input]
    w: _Array  # [D, G*H, input]
    r: _Array  # [D, G*H, H]
    b: _Array  # [D, 2*G*H]
    lengths: _Array  # [batch] int
    states: tuple[_Array, ...]  # each [D, batch, H]
    hidden_size: int
    reverse: tuple[bool, ...]
    clip: float | None
    dtype: np.dtype
    layout: int


def _prepare(
    op_type: str,
    gates: int,
    X: _Array,
    W: _Array,
    R: _Array,
    B: _Array | None,
    sequence_lens: _Array | None,
    initial_states: Sequence[_Array | None],
    hidden_size: int | None,
    direction: str | bytes,
    layout: int,
    clip: float | None,
) -> _Prepared:
    X, W, R = np.asarray(X), np.asarray(W), np.asarray(R)
    num_dirs, reverse = _num_directions(op_type, direction)
    if layout not in (0, 1):
        raise ValueError(f"{op_type}: layout must be 0 or 1, got {layout!r}.")
    if X.ndim != 3 or W.ndim != 3 or R.ndim != 3:
        raise ValueError(
            f"{op_type}: X, W and R must be 3-D, got shapes {X.shape}, {W.shape}, {R.shape}."
        )
    x = X.astype(np.float64)
    if layout == 1:
        x = x.transpose(1, 0, 2)
    seq, batch, inp = x.shape
    hidden = R.shape[-1]
    if hidden_size is not None and int(hidden_size) != hidden:
        raise ValueError(
            f"{op_type}: hidden_size={hidden_size} but R has shape {R.shape} "
            f"(hidden size {hidden})."
        )
    expected_w = (num_dirs, gates * hidden, inp)
    expected_r = (num_dirs, gates * hidden, hidden)
    if W.shape != expected_w or R.shape != expected_r:
        raise ValueError(
            f"{op_type}: expected W {expected_w} and R {expected_r} for "
            f"direction={as_name(direction)!r}, got W {W.shape} and R {R.shape}."
        )
    if B is None:
        b = np.zeros((num_dirs, 2 * gates * hidden))
    else:
        b = np.asarray(B, dtype=np.float64)
        if b.shape != (num_dirs, 2 * gates * hidden):
            raise ValueError(
                f"{op_type}: expected B of shape {(num_dirs, 2 * gates * hidden)}, got {b.shape}."
            )
    if sequence_lens is None:
        lengths = np.full(batch, seq, dtype=np.int64)
    else:
        lengths = np.asarray(sequence_lens).astype(np.int64).reshape(-1)
        if lengths.shape != (batch,) or (lengths < 0).any() or (lengths > seq).any():
            raise ValueError(
                f"{op_type}: sequence_lens must hold {batch} values in [0, {seq}], "
                f"got {np.asarray(sequence_lens).tolist()}."
            )
    states = []
    for name, value in zip(("initial_h", "initial_c"), initial_states):
        if value is None:
            states.append(np.zeros((num_dirs, batch, hidden)))
            continue
        s = np.asarray(value, dtype=np.float64)
        if layout == 1:
            s = s.transpose(1, 0, 2)
        if s.shape != (num_dirs, batch, hidden):
            raise ValueError(
                f"{op_type}: {name} has shape {np.asarray(value).shape}, expected "
                f"{(num_dirs, batch, hidden) if layout == 0 else (batch, num_dirs, hidden)} "
                f"for layout={layout}."
            )
        states.append(s)
    if clip is not None and not clip > 0:
        raise ValueError(f"{op_type}: clip must be positive, got {clip!r}.")
    return _Prepared(
        x=x,
        w=W.astype(np.float64),
        r=R.astype(np.float64),
        b=b,
        lengths=lengths,
        states=tuple(states),
        hidden_size=hidden,
        reverse=reverse,
        clip=None if clip is None else float(clip),
        dtype=X.dtype,
        layout=layout,
    )


def _clipper(clip: float | None) -> Callable[[_Array], _Array]:
    if clip is None:
        return lambda v: v
    return lambda v: np.clip(v, -clip, clip)


if TYPE_CHECKING:
    _Step = Callable[..., tuple[_Array, ...]]


def _scan(
    x: _Array, lengths: _Array, reverse: bool, initial: tuple[_Array, ...], step: _Step
) -> tuple[_Array, tuple[_Array, ...]]:
    """Run ``step`` over time for one direction.

    ``step(x_t, *states) -> new_states`` with ``new_states[0]`` the hidden
    state. Batch entry ``b`` sees its first ``lengths[b]`` steps, backwards
    if ``reverse``. Returns Y ``[seq, batch, H]`` (zeros past each entry's
    length) and the final states (zeros for entries of length 0).
    """
    seq, batch = x.shape[:2]
    hidden = initial[0].shape[-1]
    y = np.zeros((seq, batch, hidden))
    states = tuple(s.copy() for s in initial)
    entries = np.arange(batch)
    for k in range(seq):
        active = k < lengths
        if not active.any():
            break
        t = np.where(active, lengths - 1 - k if reverse else k, 0)
        new = step(x[t, entries], *states)
        keep = active[:, None]
        states = tuple(np.where(keep, n, s) for n, s in zip(new, states))
        y[t[active], entries[active]] = states[0][active]
    ran = (lengths > 0)[:, None]
    return y, tuple(np.where(ran, s, 0.0) for s in states)


def _run_directions(
    p: _Prepared, make_step: Callable[[int], _Step]
) -> tuple[_Array, ...]:
    """Run every direction and assemble ``(Y, Y_h[, Y_c])`` in ``p.layout``."""
    ys: list[_Array] = []
    finals: list[tuple[_Array, ...]] = []
    for d, reverse in enumerate(p.reverse):
        y, final = _scan(p.x, p.lengths, reverse, tuple(s[d] for s in p.states), make_step(d))
        ys.append(y)
        finals.append(final)
    y_all = np.stack(ys, axis=1)  # [seq, D, batch, H]
    states = [np.stack([f[k] for f in finals], axis=0) for k in range(len(p.states))]
    if p.layout == 1:
        y_all = y_all.transpose(2, 0, 1, 3)
        states = [s.transpose(1, 0, 2) for s in states]
    return tuple(a.astype(p.dtype) for a in (y_all, *states))


# --------------------------------------------------------------------------
# The ops
# --------------------------------------------------------------------------


def rnn(
    X: _Array,
    W: _Array,
    R: _Array,
    B: _Array | None = None,
    sequence_lens: _Array | None = None,
    initial_h: _Array | None = None,
    *,
    hidden_size: int | None = None,
    direction: str = "forward",
    layout: int = 0,
    activations: Sequence[str] | None = None,
    activation_alpha: Sequence[float] | None = None,
    activation_beta: Sequence[float] | None = None,
    clip: float | None = None,
) -> tuple[_Array, _Array]:
    """ONNX ``RNN``: ``H_t = f(clip(X_t W^T + H_{t-1} R^T + Wb + Rb))``.

    One activation ``f`` per direction (default ``Tanh``). Returns
    ``(Y, Y_h)``; see the module docstring for shapes and conventions.
    """
    p = _prepare(
        "RNN", 1, X, W, R, B, sequence_lens, [initial_h],
        hidden_size, direction, layout, clip,
    )
    acts = resolve_activations(
        "RNN", activations, activation_alpha, activation_beta, ("Tanh",), len(p.reverse)
    )
    clipped = _clipper(p.clip)

    def make_step(d: int) -> _Step:
        (f,) = acts[d]
        w, r = p.w[d].T, p.r[d].T
        bias = p.b[d, : p.hidden_size] + p.b[d, p.hidden_size :]

        def step(x_t: _Array, h: _Array) -> tuple[_Array]:
            return (f(clipped(x_t @ w + h @ r + bias)),)

        return step

    y, y_h = _run_directions(p, make_step)
    return y, y_h


def gru(
    X: _Array,
    W: _Array,
    R: _Array,
    B: _Array | None = None,
    sequence_lens: _Array | None = None,
    initial_h: _Array | None = None,
    *,
    hidden_size: int | None = None,
    direction: str = "forward",
    layout: int = 0,
    activations: Sequence[str] | None = None,
    activation_alpha: Sequence[float] | None = None,
    activation_beta: Sequence[float] | None = None,
    clip: float | None = None,
    linear_before_reset: int = 0,
) -> tuple[_Array, _Array]:
    """ONNX ``GRU`` with gate order ``z r h``; returns ``(Y, Y_h)``.

    ::

        z = f(clip(X Wz^T + H Rz^T + Wbz + Rbz))      update gate (keep ratio)
        r = f(clip(X Wr^T + H Rr^T + Wbr + Rbr))      reset gate
        linear_before_reset = 0:  h~ = g(clip(X Wh^T + (r * H) Rh^T + Rbh + Wbh))
        linear_before_reset != 0: h~ = g(clip(X Wh^T + r * (H Rh^T + Rbh) + Wbh))
        H' = (1 - z) * h~ + z * H

    Activations ``f, g`` per direction (default ``Sigmoid, Tanh``).
    """
    p = _prepare(
        "GRU", 3, X, W, R, B, sequence_lens, [initial_h],
        hidden_size, direction, layout, clip,
    )
    acts = resolve_activations(
        "GRU", activations, activation_alpha, activation_beta, ("Sigmoid", "Tanh"), len(p.reverse)
    )
    clipped = _clipper(p.clip)
    n = p.hidden_size

    def make_step(d: int) -> _Step:
        f, g = acts[d]
        wz, wr, wh = (p.w[d, k * n : (k + 1) * n].T for k in range(3))
        rz, rr, rh = (p.r[d, k * n : (k + 1) * n].T for k in range(3))
        wbz, wbr, wbh, rbz, rbr, rbh = (p.b[d, k * n : (k + 1) * n] for k in range(6))

        def step(x_t: _Array, h: _Array) -> tuple[_Array]:
            z = f(clipped(x_t @ wz + h @ rz + wbz + rbz))
            r = f(clipped(x_t @ wr + h @ rr + wbr + rbr))
            if linear_before_reset:
                pre = x_t @ wh + r * (h @ rh + rbh) + wbh
            else:
                pre = x_t @ wh + (r * h) @ rh + rbh + wbh
            candidate = g(clipped(pre))
            return ((1.0 - z) * candidate + z * h,)

        return step

    y, y_h = _run_directions(p, make_step)
    return y, y_h


def lstm(
    X: _Array,
    W: _Array,
    R: _Array,
    B: _Array | None = None,
    sequence_lens: _Array | None = None,
    initial_h: _Array | None = None,
    initial_c: _Array | None = None,
    P: _Array | None = None,
    *,
    hidden_size: int | None = None,
    direction: str = "forward",
    layout: int = 0,
    activations: Sequence[str] | None = None,
    activation_alpha: Sequence[float] | None = None,
    activation_beta: Sequence[float] | None = None,
    clip: float | None = None,
    input_forget: int = 0,
) -> tuple[_Array, _Array, _Array]:
    """ONNX ``LSTM`` with gate order ``i o f c`` and peepholes ``i o f``.

    ::

        i  = f(clip(X Wi^T + H Ri^T + Pi * C + Wbi + Rbi))
        f_ = f(clip(X Wf^T + H Rf^T + Pf * C + Wbf + Rbf))   or 1 - i if input_forget
        c~ = g(clip(X Wc^T + H Rc^T + Wbc + Rbc))
        C' = f_ * C + i * c~
        o  = f(clip(X Wo^T + H Ro^T + Po * C' + Wbo + Rbo))
        H' = o * h(C')

    Activations ``f, g, h`` per direction (default ``Sigmoid, Tanh, Tanh``).
    Returns ``(Y, Y_h, Y_c)``.
    """
    p = _prepare(
        "LSTM", 4, X, W, R, B, sequence_lens, [initial_h, initial_c],
        hidden_size, direction, layout, clip,
    )
    num_dirs = len(p.reverse)
    n = p.hidden_size
    if P is None:
        peep = np.zeros((num_dirs, 3 * n))
    else:
        peep = np.asarray(P, dtype=np.float64)
        if peep.shape != (num_dirs, 3 * n):
            raise ValueError(f"LSTM: expected P of shape {(num_dirs, 3 * n)}, got {peep.shape}.")
    acts = resolve_activations(
        "LSTM", activations, activation_alpha, activation_beta,
        ("Sigmoid", "Tanh", "Tanh"), num_dirs,
    )
    clipped = _clipper(p.clip)

    def make_step(d: int) -> _Step:
        return _lstm_cell(p.w[d], p.r[d], p.b[d], peep[d], acts[d], clipped, input_forget)

    y, y_h, y_c = _run_directions(p, make_step)
    return y, y_h, y_c


def _lstm_cell(
    w: _Array, r: _Array, b: _Array, peep: _Array, acts: Sequence[ActivationFn],
    clipped: Callable[[_Array], _Array], input_forget: int,
) -> Callable[[_Array, _Array, _Array], tuple[_Array, _Array]]:
    """One direction's LSTM step ``(x_t, h, c) -> (h', c')`` (``w``: ``[4H, K]``, ``r``: ``[4H, H]``, ``b``: ``[8H]``)."""
    n = r.shape[-1]
    f, g, h_act = acts
    wi, wo, wf, wc = (w[k * n : (k + 1) * n].T for k in range(4))
    ri, ro, rf, rc = (r[k * n : (k + 1) * n].T for k in range(4))
    bias = b[: 4 * n] + b[4 * n :]
    bi, bo, bf, bc = (bias[k * n : (k + 1) * n] for k in range(4))
    pi, po, pf = (peep[k * n : (k + 1) * n] for k in range(3))

    def step(x_t: _Array, h: _Array, c: _Array) -> tuple[_Array, _Array]:
        i = f(clipped(x_t @ wi + h @ ri + pi * c + bi))
        if input_forget:
            forget = 1.0 - i
        else:
            forget = f(clipped(x_t @ wf + h @ rf + pf * c + bf))
        cell = forget * c + i * g(clipped(x_t @ wc + h @ rc + bc))
        o = f(clipped(x_t @ wo + h @ ro + po * cell + bo))
        return o * h_act(cell), cell

    return step


# --------------------------------------------------------------------------
# Dispatch by ONNX op type
# --------------------------------------------------------------------------

# --------------------------------------------------------------------------
# onnxruntime's DynamicQuantizeLSTM: an LSTM whose W and R are int8 (or uint8)
# --------------------------------------------------------------------------


def dequantize_weights(q: _Array, scale: _Array, zero_point: _Array | None) -> _Array:
    """``(q - zero_point) * scale`` for a ``[D, K, G*H]`` quantized weight with a scale (and zero point) per
    direction (``[D]``) or per output column (``[D, G*H]``), returned transposed to the ONNX ``[D, G*H, K]``."""
    q64 = np.asarray(q).astype(np.float64)
    d = q64.shape[0]
    s64 = np.asarray(scale, np.float64).reshape(d, 1, -1)
    z64 = np.zeros_like(s64) if zero_point is None else np.asarray(zero_point).astype(np.float64).reshape(d, 1, -1)
    return np.transpose((q64 - z64) * s64, (0, 2, 1))


def dynamic_quantize_lstm(
    X: _Array, W: _Array, R: _Array, B: _Array | None = None, sequence_lens: _Array | None = None,
    initial_h: _Array | None = None, initial_c: _Array | None = None, P: _Array | None = None,
    W_scale: _Array | None = None, W_zero_point: _Array | None = None,
    R_scale: _Array | None = None, R_zero_point: _Array | None = None, **attributes: Any,
) -> tuple[_Array, _Array, _Array]:
    """com.microsoft ``DynamicQuantizeLSTM``: the LSTM of the dequantized weights.

    ``W`` is ``[D, input, 4H]`` and ``R`` ``[D, H, 4H]`` (transposed against ONNX LSTM), with scales and zero
    points per direction or per column.  onnxruntime also quantizes ``X`` and ``h`` to uint8 at every step
    (one scale per tensor), which this reference does not: the two differ by that rounding, at most half a
    quantization step of each input times the weights it meets (the contract test derives its tolerance so).
    """
    if W_scale is None or R_scale is None:
        raise ValueError("DynamicQuantizeLSTM: W_scale and R_scale are required")
    w = dequantize_weights(W, W_scale, W_zero_point)
    r = dequantize_weights(R, R_scale, R_zero_point)
    return lstm(X, w, r, B, sequence_lens, initial_h, initial_c, P, **attributes)


# --------------------------------------------------------------------------
# onnxruntime's AttnLSTM: an LSTM wrapped in Bahdanau attention over a memory
# --------------------------------------------------------------------------


def attn_lstm(
    X: _Array, W: _Array, R: _Array, B: _Array | None = None, sequence_lens: _Array | None = None,
    initial_h: _Array | None = None, initial_c: _Array | None = None, P: _Array | None = None,
    QW: _Array | None = None, MW: _Array | None = None, V: _Array | None = None, M: _Array | None = None,
    memory_seq_lens: _Array | None = None, AW: _Array | None = None,
    *,
    hidden_size: int | None = None,
    direction: str = "forward",
    activations: Sequence[str] | None = None,
    activation_alpha: Sequence[float] | None = None,
    activation_beta: Sequence[float] | None = None,
    clip: float | None = None,
    input_forget: int = 0,
) -> tuple[_Array, _Array, _Array]:
    """com.microsoft ``AttnLSTM`` (TensorFlow's AttentionWrapper around an LSTM cell, Bahdanau attention)::

        [i o f c] from  concat(x_t, a_{t-1})  (W is [D, 4H, input + A]), h_{t-1}, c_{t-1}: the LSTM equations
        keys    = M MW                                           [batch, memory steps, attention size]
        score_m = V . tanh(keys_m + h_t QW)   (-inf past memory_seq_lens)
        context = sum_m softmax(score)_m M_m                     [batch, memory depth]
        a_t     = concat(h_t, context) AW     (context itself without AW);  a_0 = 0

    ``Y``, ``Y_h`` and ``Y_c`` are the LSTM's; the attention ``a`` is internal, so it restarts from zeros at
    every call (the op has no input for it).  Checked against onnxruntime's kernel (forward, bidirectional,
    with and without AW, a memory shorter than its padding).
    """
    if QW is None or MW is None or V is None or M is None:
        raise ValueError("AttnLSTM: QW, MW, V and M are required")
    x_in = np.asarray(X)
    inp = x_in.shape[-1]
    w_all = np.asarray(W)
    p = _prepare(
        "AttnLSTM", 4, x_in, w_all[:, :, :inp], R, B, sequence_lens, [initial_h, initial_c],
        hidden_size, direction, 0, clip,
    )
    num_dirs = len(p.reverse)
    n = p.hidden_size
    peep = np.zeros((num_dirs, 3 * n)) if P is None else np.asarray(P, dtype=np.float64).reshape(num_dirs, 3 * n)
    acts = resolve_activations(
        "AttnLSTM", activations, activation_alpha, activation_beta, ("Sigmoid", "Tanh", "Tanh"), num_dirs
    )
    clipped = _clipper(p.clip)
    memory = np.asarray(M, dtype=np.float64)
    batch, steps, depth = memory.shape
    lengths = np.full(batch, steps) if memory_seq_lens is None else np.asarray(memory_seq_lens).astype(np.int64).reshape(-1)
    valid = np.arange(steps)[None, :] < lengths[:, None]
    attention_size = depth if AW is None else int(np.asarray(AW).shape[-1])
    if w_all.shape[-1] != inp + attention_size:
        raise ValueError(f"AttnLSTM: W must have {inp} + {attention_size} columns (input and attention), got {w_all.shape}.")

    def make_step(d: int) -> _Step:
        w = np.concatenate([p.w[d], w_all[d, :, inp:].astype(np.float64)], axis=1)  # over (x, attention)
        lstm_step = _lstm_cell(w, p.r[d], p.b[d], peep[d], acts[d], clipped, input_forget)
        keys = memory @ np.asarray(MW, dtype=np.float64)[d]
        query_w = np.asarray(QW, dtype=np.float64)[d]
        v = np.asarray(V, dtype=np.float64)[d]
        layer = None if AW is None else np.asarray(AW, dtype=np.float64)[d]

        def step(x_t: _Array, h: _Array, c: _Array, a: _Array) -> tuple[_Array, _Array, _Array]:
            h_new, cell = lstm_step(np.concatenate([x_t, a], axis=1), h, c)
            score = np.where(valid, np.tanh(keys + (h_new @ query_w)[:, None, :]) @ v, -np.inf)
            e = np.exp(score - score.max(axis=1, keepdims=True))
            context = np.einsum("bm,bmd->bd", e / e.sum(axis=1, keepdims=True), memory)
            a_new = context if layer is None else np.concatenate([h_new, context], axis=1) @ layer
            return h_new, cell, a_new

        return step

    ys: list[_Array] = []
    finals: list[tuple[_Array, ...]] = []
    for d, reverse in enumerate(p.reverse):
        start = (p.states[0][d], p.states[1][d], np.zeros((batch, attention_size)))
        y, final = _scan(p.x, p.lengths, reverse, start, make_step(d))
        ys.append(y)
        finals.append(final)
    y_all = np.stack(ys, axis=1)
    y_h = np.stack([f[0] for f in finals], axis=0)
    y_c = np.stack([f[1] for f in finals], axis=0)
    return y_all.astype(p.dtype), y_h.astype(p.dtype), y_c.astype(p.dtype)


# --------------------------------------------------------------------------
# Dispatch by ONNX op type / registered recurrence kind
# --------------------------------------------------------------------------

_INPUT_COUNTS = {"RNN": 6, "GRU": 6, "LSTM": 8, "DynamicQuantizeLSTM": 12, "AttnLSTM": 14}
_ATTRIBUTES = {
    "RNN": frozenset(
        {"hidden_size", "direction", "layout", "activations", "activation_alpha",
         "activation_beta", "clip"}
    ),
}
_ATTRIBUTES["GRU"] = _ATTRIBUTES["RNN"] | {"linear_before_reset"}
_ATTRIBUTES["LSTM"] = _ATTRIBUTES["RNN"] | {"input_forget"}
_ATTRIBUTES["DynamicQuantizeLSTM"] = _ATTRIBUTES["LSTM"]
_ATTRIBUTES["AttnLSTM"] = _ATTRIBUTES["LSTM"] - {"layout"}
_OPS: dict[str, Callable[..., tuple[_Array, ...]]] = {
    "RNN": rnn, "GRU": gru, "LSTM": lstm, "DynamicQuantizeLSTM": dynamic_quantize_lstm, "AttnLSTM": attn_lstm,
}

#: registered recurrence kinds (rnnir.ir.recurrence.KINDS) the reference refuses, and why (none today: a kind
#: added to the registry without a reference goes here, and the simulator then refuses it by name)
UNSUPPORTED_KINDS: Mapping[str, str] = {}


class UnsupportedKindError(RnnirError, ValueError):
    """The reference has no implementation of this op or recurrence kind (the message says why)."""


def _equations_of(kind: str) -> str | None:
    """The op whose equations ``kind`` computes: itself when the reference has it, else the ``semantics`` of a
    registered recurrence kind with that op's very ports (a vendor LSTM under another name runs as an LSTM)."""
    if kind in _OPS:
        return kind
    from rnnir.ir.recurrence import KINDS

    registered = KINDS.get(kind)
    if registered is None or registered.semantics not in _OPS:
        return None
    known = KINDS.get(registered.semantics)
    if known is None or (registered.inputs, registered.outputs) != (known.inputs, known.outputs):
        return None  # other ports (quantized weights, an attention memory): equations of its own are needed
    return registered.semantics


def supports(kind: str) -> bool:
    """Whether :func:`run_node` runs ``kind`` (an ONNX op type or a registered recurrence kind's name)."""
    return _equations_of(kind) is not None


def run_node(
    op_type: str, inputs: Sequence[_Array | None], attributes: Mapping[str, Any]
) -> list[_Array]:
    """Run one ONNX ``RNN`` / ``GRU`` / ``LSTM`` node, or com.microsoft ``DynamicQuantizeLSTM`` / ``AttnLSTM``.

    ``inputs`` follow the op's input order (``X, W, R, B, sequence_lens,
    initial_h`` and, for LSTM, ``initial_c, P``; then ``W_scale, W_zero_point,
    R_scale, R_zero_point`` for DynamicQuantizeLSTM, ``QW, MW, V, M,
    memory_seq_lens, AW`` for AttnLSTM); ``None`` or a missing
    trailing entry marks an absent optional input. ``attributes`` uses the
    ONNX attribute names; strings may be ``bytes``. Returns all outputs
    (``[Y, Y_h]`` or ``[Y, Y_h, Y_c]``).  A kind listed in :data:`UNSUPPORTED_KINDS`, or any
    other op, raises :class:`UnsupportedKindError`.
    """
    equations = _equations_of(op_type)
    op = None if equations is None else _OPS[equations]
    if op is None or equations is None:
        why = UNSUPPORTED_KINDS.get(op_type)
        if why is not None:
            raise UnsupportedKindError(f"run_node: {op_type} is not supported: {why}")
        raise UnsupportedKindError(f"run_node: unsupported op type {op_type!r}; expected one of {', '.join(_OPS)}.")
    if not 3 <= len(inputs) <= _INPUT_COUNTS[equations]:
        raise ValueError(
            f"{op_type}: expected 3 to {_INPUT_COUNTS[equations]} inputs, got {len(inputs)}."
        )
    unknown = set(attributes) - _ATTRIBUTES[equations]
    if unknown:
        raise ValueError(f"{op_type}: unknown attribute(s) {sorted(unknown)}.")
    kwargs: dict[str, Any] = dict(attributes)
    if "direction" in kwargs:
        kwargs["direction"] = as_name(kwargs["direction"])
    if kwargs.get("activations") is not None:
        kwargs["activations"] = [as_name(a) for a in kwargs["activations"]]
    return list(op(*inputs, **kwargs))
