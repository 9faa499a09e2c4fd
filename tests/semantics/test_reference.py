"""Specification of ``rnnir.semantics.reference``, the numpy RNN / GRU / LSTM.

Three kinds of evidence, each independent of the code under test:

1. onnxruntime and ``onnx.reference.ReferenceEvaluator`` on one-op models
   with random weights, over the product of the attributes;
2. the hand-checkable numbers of docs/design.md ("Reference numbers");
3. hand-built cases that pin the subtle conventions (reverse direction with
   ``sequence_lens``, length-0 entries, ``input_forget``, ``clip``, the
   routing of ``activation_alpha`` / ``activation_beta``).

What ReferenceEvaluator (onnx 1.23) gets wrong or leaves out for these ops,
each checked by running it against onnxruntime (so the oracle choice below is
deliberate, not a guess):

* ``clip`` is ignored (RNN, GRU, LSTM);
* ``sequence_lens`` is ignored: every entry runs the full sequence, so Y past
  an entry's length is not zeroed and Y_h / Y_c are wrong for shorter entries;
* GRU and LSTM ignore ``activations`` (always Sigmoid / Tanh / Tanh);
* LSTM ignores ``input_forget``;
* RNN supports only Tanh and Affine, applies ``activations[0]`` with
  ``activation_alpha[0]`` / ``activation_beta[0]`` to *both* directions of a
  bidirectional op, and refuses alpha / beta lists whose length is not the
  number of directions (so ``["Tanh", "Affine"]`` with one alpha fails).

Where one of those applies, onnxruntime is the only oracle. onnxruntime in
turn refuses ``layout=1`` for these ops; layout-1 cases run there as the
equivalent layout-0 model with X and the states transposed.
"""

from __future__ import annotations

import itertools
import math
import zlib
from dataclasses import dataclass

import numpy as np
import pytest

from rnnir.semantics.reference import gru, lstm, rnn, run_node
from tests.support.onnx_cases import (
    build_model,
    run_onnxruntime,
    run_onnxruntime_via_layout0,
    run_reference_evaluator,
)

ATOL = 1e-5  # float32 inputs: ours computes in float64, the oracles in float32
SEQ, BATCH, INPUT, HIDDEN = 4, 3, 2, 3
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DIRECTIONS = ("forward", "reverse", "bidirectional")

# Activations that take alpha / beta, per the operator spec. Used to supply
# exactly one value per consumer: onnxruntime's defaults for Affine,
# ThresholdedRelu and ScaledTanh differ from ONNX's (see the test
# test_onnxruntime_affine_default_differs_from_the_spec), so oracle cases
# never leave those to a default.
TAKES_ALPHA = {"Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu"}
TAKES_BETA = {"Affine", "ScaledTanh", "HardSigmoid"}
ALPHAS = (0.7, 1.3, 0.45, 0.9, 1.1, 0.6)
BETAS = (0.3, -0.2, 0.5, 0.1, 0.25, 0.4)


@dataclass(frozen=True)
class ActivationSet:
    """Activations for the forward and the backward direction."""

    name: str
    forward: tuple[str, ...]
    backward: tuple[str, ...]
    explicit: bool = True  # supply one alpha / beta per consumer

    def attributes(self, direction: str) -> dict[str, object]:
        names = list(self.forward)
        if direction == "bidirectional":
            names += self.backward
        attrs: dict[str, object] = {"activations": names}
        if self.explicit:
            n_alpha = sum(n in TAKES_ALPHA for n in names)
            n_beta = sum(n in TAKES_BETA for n in names)
            if n_alpha:
                attrs["activation_alpha"] = list(ALPHAS[:n_alpha])
            if n_beta:
                attrs["activation_beta"] = list(BETAS[:n_beta])
        return attrs


# Together these put each of the eleven activations into every slot kind of
# every op (RNN f; GRU f, g; LSTM f, g, h), interleave takers and non-takers
# of alpha / beta, and give the two directions different activations. The
# "defaults" sets leave alpha / beta out for the activations whose ONNX and
# onnxruntime defaults agree (LeakyRelu, HardSigmoid, Elu).
ACTIVATION_SETS: dict[str, tuple[ActivationSet, ...]] = {
    "RNN": (
        ActivationSet("relu_affine", ("Relu",), ("Affine",)),
        ActivationSet("leaky_thresholded", ("LeakyRelu",), ("ThresholdedRelu",)),
        ActivationSet("scaledtanh_hardsigmoid", ("ScaledTanh",), ("HardSigmoid",)),
        ActivationSet("elu_softsign", ("Elu",), ("Softsign",)),
        ActivationSet("softplus_sigmoid", ("Softplus",), ("Sigmoid",)),
        ActivationSet("defaults", ("LeakyRelu",), ("Elu",), explicit=False),
    ),
    "GRU": (
        ActivationSet("a", ("Relu", "Affine"), ("LeakyRelu", "ThresholdedRelu")),
        ActivationSet("b", ("ScaledTanh", "HardSigmoid"), ("Elu", "Softsign")),
        ActivationSet("c", ("Softplus", "Sigmoid"), ("Tanh", "Relu")),
        ActivationSet("d", ("HardSigmoid", "ScaledTanh"), ("Sigmoid", "Elu")),
        ActivationSet("e", ("Affine", "Tanh"), ("ThresholdedRelu", "Softplus")),
        ActivationSet("defaults", ("HardSigmoid", "LeakyRelu"), ("Sigmoid", "Elu"), explicit=False),
    ),
    "LSTM": (
        ActivationSet(
            "a", ("HardSigmoid", "Affine", "LeakyRelu"),
            ("Sigmoid", "ScaledTanh", "ThresholdedRelu"),
        ),
        ActivationSet("b", ("Relu", "Elu", "Softsign"), ("Softplus", "Tanh", "Sigmoid")),
        ActivationSet("c", ("LeakyRelu", "Tanh", "Affine"), ("Elu", "ScaledTanh", "HardSigmoid")),
        ActivationSet(
            "d", ("Affine", "Softsign", "ScaledTanh"), ("ThresholdedRelu", "Relu", "Elu")
        ),
        ActivationSet("e", ("Softsign", "Softplus", "Relu"), ("Tanh", "HardSigmoid", "Softplus")),
        ActivationSet(
            "defaults", ("HardSigmoid", "Elu", "LeakyRelu"), ("Sigmoid", "LeakyRelu", "Elu"),
            explicit=False,
        ),
    ),
}

SEQUENCE_LENS = {
    "absent": None,
    "full": np.full(BATCH, SEQ, dtype=np.int32),
    "ragged": np.array([2, SEQ, 0], dtype=np.int32),  # a short, a full, an empty entry
}


@dataclass(frozen=True)
class Case:
    """One generated one-op model: which inputs are present, which attributes."""

    op: str
    direction: str
    layout: int = 0
    seq_lens: str = "absent"
    optional: str = "all"  # "all" present, "none" present, or "partial"
    clip: float | None = None
    activations: ActivationSet | None = None
    linear_before_reset: int = 0
    input_forget: int = 0
    peepholes: bool = False

    @property
    def id(self) -> str:
        parts = [self.op, self.direction, f"layout{self.layout}", f"seq_{self.seq_lens}",
                 f"opt_{self.optional}", "clip" if self.clip else "noclip",
                 f"act_{self.activations.name}" if self.activations else "act_default"]
        if self.op == "GRU":
            parts.append(f"lbr{self.linear_before_reset}")
        if self.op == "LSTM":
            parts += [f"if{self.input_forget}", "peep" if self.peepholes else "nopeep"]
        return "-".join(parts)

    def attributes(self) -> dict[str, object]:
        attrs: dict[str, object] = {
            "hidden_size": HIDDEN,
            "direction": self.direction,
            "layout": self.layout,
        }
        if self.clip is not None:
            attrs["clip"] = self.clip
        if self.activations is not None:
            attrs.update(self.activations.attributes(self.direction))
        if self.op == "GRU":
            attrs["linear_before_reset"] = self.linear_before_reset
        if self.op == "LSTM":
            attrs["input_forget"] = self.input_forget
        return attrs

    def inputs(self) -> list[np.ndarray | None]:
        """Random float32 inputs in ONNX order, seeded by the case id."""
        rng = np.random.default_rng(zlib.crc32(self.id.encode()))
        dirs = 2 if self.direction == "bidirectional" else 1
        gates = GATES[self.op]

        def uniform(*shape: int, scale: float = 1.0) -> np.ndarray:
            return (scale * rng.uniform(-1.0, 1.0, shape)).astype(np.float32)

        def state() -> np.ndarray:
            s = uniform(dirs, BATCH, HIDDEN)
            return np.ascontiguousarray(s.transpose(1, 0, 2)) if self.layout else s

        x = uniform(SEQ, BATCH, INPUT)
        if self.layout:
            x = np.ascontiguousarray(x.transpose(1, 0, 2))
        # Weights of 0.5 keep unbounded activations (Relu, Softplus, ...) in
        # gate slots within a few units over SEQ steps, so float32 stays
        # well inside ATOL.
        w = uniform(dirs, gates * HIDDEN, INPUT, scale=0.5)
        r = uniform(dirs, gates * HIDDEN, HIDDEN, scale=0.5)
        b = uniform(dirs, 2 * gates * HIDDEN, scale=0.5)
        h0, c0 = state(), state()
        present = {
            "all": (True, True, True),
            "none": (False, False, False),
            "partial": (True, False, True),  # B and initial_c given, initial_h not
        }[self.optional]
        inputs = [x, w, r, b if present[0] else None, SEQUENCE_LENS[self.seq_lens],
                  h0 if present[1] else None]
        if self.op == "LSTM":
            p = uniform(dirs, 3 * HIDDEN, scale=0.5) if self.peepholes else None
            inputs += [c0 if present[2] else None, p]
        return inputs

    def reference_evaluator_applies(self) -> bool:
        """Whether ReferenceEvaluator implements every attribute of this case.

        See the module docstring for what it ignores; each was verified
        against onnxruntime with onnx 1.23.
        """
        return (
            self.clip is None
            and self.seq_lens != "ragged"
            and self.activations is None
            and not self.input_forget
        )


def structural_cases() -> list[Case]:
    """direction x layout x sequence_lens x optional inputs x clip x op options
    x activations (the defaults, or one explicit set taken round-robin)."""
    cases = []
    for op in ("RNN", "GRU", "LSTM"):
        op_options: list[dict[str, object]] = [{}]
        if op == "GRU":
            op_options = [{"linear_before_reset": v} for v in (0, 1)]
        if op == "LSTM":
            op_options = [
                {"input_forget": f, "peepholes": p}
                for f, p in itertools.product((0, 1), (False, True))
            ]
        sets = ACTIVATION_SETS[op]
        for k, (direction, layout, seq, optional, clip, options, explicit) in enumerate(
            itertools.product(
                DIRECTIONS, (0, 1), tuple(SEQUENCE_LENS), ("all", "none", "partial"),
                (None, 0.4), op_options, (False, True),
            )
        ):
            cases.append(Case(
                op, direction, layout, seq, optional, clip,
                sets[k % len(sets)] if explicit else None, **options,  # type: ignore[arg-type]
            ))
    return cases


def activation_cases() -> list[Case]:
    """Every activation set x direction x clip, for every op."""
    return [
        Case(op, direction, clip=clip, activations=acts, seq_lens="ragged",
             **({"peepholes": True} if op == "LSTM" else {}))  # type: ignore[arg-type]
        for op in ("RNN", "GRU", "LSTM")
        for acts in ACTIVATION_SETS[op]
        for direction in DIRECTIONS
        for clip in (None, 0.4)
    ]


def _ours(case: Case) -> list[np.ndarray]:
    return run_node(case.op, case.inputs(), case.attributes())


def _assert_outputs_close(ours: list[np.ndarray], theirs: list[np.ndarray], who: str) -> None:
    names = ("Y", "Y_h", "Y_c")
    assert len(ours) == len(theirs)
    for name, a, b in zip(names, ours, theirs):
        assert a.shape == b.shape, f"{name}: shape {a.shape} vs {who} {b.shape}"
        assert a.dtype == b.dtype, f"{name}: dtype {a.dtype} vs {who} {b.dtype}"
        np.testing.assert_allclose(a, b, rtol=0, atol=ATOL, err_msg=f"{name} vs {who}")


def _ort_version() -> tuple[int, ...]:
    import onnxruntime

    return tuple(int(p) for p in onnxruntime.__version__.split(".")[:2] if p.isdigit())


# onnxruntime 1.23 (the last release for Python 3.10) has RNN kernel bugs that later releases fixed:
# without an `activations` attribute it zeroes negative outputs, and a bidirectional RNN with
# clip and Elu/Softsign aborts the whole process.  Seen with 1.23.2; 1.32.0 agrees with the spec.
_OLD_ORT_RNN = _ort_version() < (1, 24)


def _onnxruntime(case: Case) -> list[np.ndarray]:
    if _OLD_ORT_RNN and case.op == "RNN":
        pytest.skip("onnxruntime < 1.24 RNN kernel is wrong or aborts here; RNN is compared with onnx.reference where it supports the attributes")
    run = run_onnxruntime_via_layout0 if case.layout == 1 else run_onnxruntime
    return run(case.op, case.inputs(), case.attributes())


# --------------------------------------------------------------------------
# 1. Against onnxruntime and ReferenceEvaluator
# --------------------------------------------------------------------------


@pytest.mark.parametrize("case", structural_cases(), ids=lambda c: c.id)
def test_matches_onnxruntime_on_every_attribute_combination(case: Case) -> None:
    _assert_outputs_close(_ours(case), _onnxruntime(case), "onnxruntime")


@pytest.mark.parametrize(
    "case",
    [c for c in structural_cases() if c.reference_evaluator_applies()],
    ids=lambda c: c.id,
)
def test_matches_reference_evaluator_where_it_implements_the_attributes(case: Case) -> None:
    _assert_outputs_close(
        _ours(case), run_reference_evaluator(case.op, case.inputs(), case.attributes()),
        "ReferenceEvaluator",
    )


@pytest.mark.parametrize("case", activation_cases(), ids=lambda c: c.id)
def test_matches_onnxruntime_for_every_activation_and_alpha_beta_routing(case: Case) -> None:
    # onnxruntime only: ReferenceEvaluator ignores GRU/LSTM activations and
    # mishandles bidirectional RNN activations (module docstring).
    _assert_outputs_close(_ours(case), _onnxruntime(case), "onnxruntime")


def test_the_generated_cases_exercise_clip_and_sequence_lens() -> None:
    """Guard against a generator whose clip or lengths never change a number."""
    case = Case("LSTM", "bidirectional", peepholes=True, seq_lens="full")
    inputs, attrs = case.inputs(), case.attributes()
    plain = run_node("LSTM", inputs, attrs)
    clipped = run_node("LSTM", inputs, {**attrs, "clip": 0.4})
    assert not np.allclose(plain[0], clipped[0], atol=1e-3)
    ragged = run_node("LSTM", [*inputs[:4], SEQUENCE_LENS["ragged"], *inputs[5:]], attrs)
    assert not np.allclose(plain[1], ragged[1], atol=1e-3)


# --------------------------------------------------------------------------
# 2. docs/design.md reference numbers
# --------------------------------------------------------------------------

IDENTITY = {"activations": ["Affine"], "activation_alpha": [1.0], "activation_beta": [0.0]}


def _scalar_rnn(w: float, r: float, **attrs: object):
    """A 1x1 RNN; returns a function of (xs, h0) giving (Y, Y_h) as flat lists."""
    W = np.array([[[w]]])
    R = np.array([[[r]]])

    def run(xs: list[float], h0: float | None = None) -> tuple[list[float], float]:
        X = np.array(xs, dtype=np.float64).reshape(-1, 1, 1)
        init = None if h0 is None else np.array([[[h0]]])
        y, y_h = rnn(X, W, R, initial_h=init, **attrs)  # type: ignore[arg-type]
        return y.ravel().tolist(), float(y_h.ravel()[0])

    return run


def test_half_decay_recurrence_gives_1_then_half_then_2_25() -> None:
    run = _scalar_rnn(1.0, 0.5, **IDENTITY)
    y, y_h = run([1.0, 0.0, 2.0])
    assert y == pytest.approx([1.0, 0.5, 2.25], abs=1e-12)
    assert y_h == pytest.approx(2.25, abs=1e-12)


def test_half_decay_three_one_step_calls_persisting_state_give_2_25() -> None:
    run = _scalar_rnn(1.0, 0.5, **IDENTITY)
    h: float | None = None
    for x in (1.0, 0.0, 2.0):
        _, h = run([x], h)
    assert h == pytest.approx(2.25, abs=1e-12)


def test_half_decay_three_one_step_calls_reinitialised_give_2() -> None:
    run = _scalar_rnn(1.0, 0.5, **IDENTITY)
    finals = [run([x])[1] for x in (1.0, 0.0, 2.0)]
    assert finals[-1] == pytest.approx(2.0, abs=1e-12)


def test_doubling_recurrence_persistence_and_reinitialisation_diverge_from_call_2() -> None:
    run = _scalar_rnn(1.0, 2.0, **IDENTITY)
    persisted: list[float] = []
    h: float | None = None
    for _ in range(3):
        _, h = run([1.0], h)
        persisted.append(h)
    reinitialised = [run([1.0])[1] for _ in range(3)]
    assert persisted == pytest.approx([1.0, 3.0, 7.0], abs=1e-12)
    assert reinitialised == pytest.approx([1.0, 1.0, 1.0], abs=1e-12)
    # One call over the whole stream equals the persisted chunks.
    assert run([1.0, 1.0, 1.0])[0] == pytest.approx(persisted, abs=1e-12)


def test_tanh_rnn_two_dimensional_numbers() -> None:
    X = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float64).reshape(3, 1, 2)
    W = np.eye(2)[None]
    R = 0.5 * np.eye(2)[None]
    y, y_h = rnn(X, W, R)  # default activation: Tanh
    expected = [[0.761594, 0.0], [0.363399, 0.761594], [0.827987, 0.881130]]
    np.testing.assert_allclose(y[:, 0, 0, :], expected, rtol=0, atol=5e-7)
    np.testing.assert_allclose(y_h[0, 0], expected[-1], rtol=0, atol=5e-7)


def test_scalar_tanh_rnn_numbers() -> None:
    y, _ = _scalar_rnn(0.5, 0.8)([1.0, 0.0])
    assert y == pytest.approx([0.462117, 0.353724], abs=5e-7)


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p / (1.0 - p))


def _lstm_step_with_gates(
    c_prev: list[float], i: list[float], o: list[float], f: list[float], g: list[float]
) -> tuple[np.ndarray, np.ndarray]:
    """One LSTM step whose gate values are exactly i, o, f, g.

    Zero W and R; each gate's pre-activation comes from the biases, split
    between Wb and Rb so that both halves must be added: sigmoid(b) = i, o, f
    and tanh(b) = g. Gate order in B is i, o, f, c.
    """
    n = len(c_prev)
    pre = np.concatenate([
        _logit(np.array(i)), _logit(np.array(o)), _logit(np.array(f)), np.arctanh(np.array(g))
    ])
    w_bias = pre - 0.25
    r_bias = np.full(4 * n, 0.25)
    B = np.concatenate([w_bias, r_bias])[None]
    X = np.ones((1, 1, 3))
    W = np.zeros((1, 4 * n, 3))
    R = np.zeros((1, 4 * n, n))
    h0 = np.full((1, 1, n), 0.7)
    c0 = np.array(c_prev, dtype=np.float64).reshape(1, 1, n)
    _, y_h, y_c = lstm(X, W, R, B, initial_h=h0, initial_c=c0)
    return y_h[0, 0], y_c[0, 0]


def test_lstm_step_c_prev_1_gives_c_0_95_and_h_0_591826() -> None:
    h, c = _lstm_step_with_gates([1.0], i=[0.1], o=[0.8], f=[0.9], g=[0.5])
    assert c.tolist() == pytest.approx([0.95], abs=5e-7)
    assert h.tolist() == pytest.approx([0.591826], abs=5e-7)


def test_lstm_step_two_dimensional_numbers() -> None:
    h, c = _lstm_step_with_gates(
        [1.0, -1.0], i=[0.1, 0.75], o=[0.8, 0.5], f=[0.9, 0.2], g=[0.5, -0.2]
    )
    assert c.tolist() == pytest.approx([0.95, -0.35], abs=5e-7)
    assert h.tolist() == pytest.approx([0.591826, -0.168188], abs=5e-7)


@pytest.mark.parametrize(
    ("forget", "steps", "design_value", "design_rel"),
    [
        (0.99, 20, 0.8179069376, 1e-9),
        (0.8, 20, 0.0115292150, 1e-8),
        (0.99, 100, 0.366, 2e-3),
        (0.9, 100, 2.66e-5, 2e-3),
        (0.99, 500, 0.0066, 1e-2),
    ],
)
def test_lstm_cell_over_steps_is_the_forget_gate_product(
    forget: float, steps: int, design_value: float, design_rel: float
) -> None:
    # Affine (identity) gate activation makes the gates exactly their biases:
    # i = 0, f = forget, o = 1; c starts at 1, so c_T = forget ** T.
    n = 1
    B = np.zeros((1, 8 * n))
    B[0, 2 * n] = forget  # gate order i o f c: f is the third block
    B[0, n] = 1.0  # o
    _, _, y_c = lstm(
        np.zeros((steps, 1, 1)), np.zeros((1, 4, 1)), np.zeros((1, 4, 1)), B,
        initial_c=np.ones((1, 1, 1)),
        activations=["Affine", "Tanh", "Tanh"], activation_alpha=[1.0], activation_beta=[0.0],
    )
    c = float(y_c.ravel()[0])
    assert c == pytest.approx(forget**steps, rel=1e-12)
    assert c == pytest.approx(design_value, rel=design_rel)


def test_gru_update_gate_is_the_keep_ratio_old_2_candidate_6_z_0_75_gives_3() -> None:
    # z = sigmoid(log 3) = 0.75; the candidate is exactly 6 through an
    # identity g and the bias Wbh. Write-ratio semantics would give 5.
    B = np.zeros((1, 6))
    B[0, 0] = math.log(3.0)  # Wbz
    B[0, 2] = 6.0  # Wbh
    _, y_h = gru(
        np.zeros((1, 1, 1)), np.zeros((1, 3, 1)), np.zeros((1, 3, 1)), B,
        initial_h=np.full((1, 1, 1), 2.0),
        activations=["Sigmoid", "Affine"], activation_alpha=[1.0], activation_beta=[0.0],
    )
    assert float(y_h.ravel()[0]) == pytest.approx(3.0, abs=1e-12)


@pytest.mark.parametrize(("linear_before_reset", "expected"), [(0, [1.0, 1.0]), (1, [3.0, 0.0])])
def test_gru_linear_before_reset_applies_r_before_or_after_the_projection(
    linear_before_reset: int, expected: list[float]
) -> None:
    # h = (1, 2), r = (1, 0), Rh rows (1, 1), (1, -1). With identity f and g
    # and zero W, z = 0 and r are their biases, so Y_h is the candidate's
    # pre-activation: Rh (r * h) = (1, 1), or r * (Rh h) = (3, 0).
    B = np.zeros((1, 12))
    B[0, 2:4] = [1.0, 0.0]  # Wbr
    R = np.zeros((1, 6, 2))
    R[0, 4:6] = [[1.0, 1.0], [1.0, -1.0]]  # Rh
    _, y_h = gru(
        np.zeros((1, 1, 1)), np.zeros((1, 6, 1)), R, B,
        initial_h=np.array([[[1.0, 2.0]]]),
        activations=["Affine", "Affine"], activation_alpha=[1.0, 1.0], activation_beta=[0.0, 0.0],
        linear_before_reset=linear_before_reset,
    )
    assert y_h[0, 0].tolist() == pytest.approx(expected, abs=1e-12)


# --------------------------------------------------------------------------
# 3. Conventions that are easy to get wrong
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("length", "h0", "y", "y_h"),
    [
        (3, 0.0, [1.5, 1.0, 2.0], 1.5),
        (2, 0.0, [1.0, 0.0, 0.0], 1.0),
        (2, 4.0, [2.0, 2.0, 0.0], 2.0),
        (0, 5.0, [0.0, 0.0, 0.0], 0.0),
    ],
)
def test_reverse_runs_each_entry_backwards_over_its_own_length(
    length: int, h0: float, y: list[float], y_h: float
) -> None:
    # h_t = 0.5 h + x over x = (1, 0, 2) backwards: length 3 sees 2, 0, 1
    # (h = 2, 1, 1.5); length 2 sees 0, 1 (h = 0.5 h0, 0.25 h0 + 1). Y_h is
    # Y at t = 0; steps past the length are zeros; length 0 gives Y_h = 0
    # whatever h0.
    out_y, out_h = rnn(
        np.array([1.0, 0.0, 2.0]).reshape(3, 1, 1), np.ones((1, 1, 1)), np.full((1, 1, 1), 0.5),
        sequence_lens=np.array([length], dtype=np.int32), initial_h=np.full((1, 1, 1), h0),
        direction="reverse", **IDENTITY,  # type: ignore[arg-type]
    )
    assert out_y.ravel().tolist() == pytest.approx(y, abs=1e-12)
    assert float(out_h.ravel()[0]) == pytest.approx(y_h, abs=1e-12)


@pytest.mark.parametrize("layout", [0, 1])
def test_reverse_with_sequence_lens_has_y_h_equal_to_y_at_t0(layout: int) -> None:
    case = Case("GRU", "bidirectional", layout=layout, seq_lens="ragged")
    y, y_h = _ours(case)
    if layout == 1:  # to [seq, dirs, batch, H] / [dirs, batch, H]
        y, y_h = y.transpose(1, 2, 0, 3), y_h.transpose(1, 0, 2)
    lengths = SEQUENCE_LENS["ragged"]
    for b, n in enumerate(lengths):
        if n == 0:
            continue
        np.testing.assert_array_equal(y_h[1, b], y[0, 1, b])  # backward: t = 0
        np.testing.assert_array_equal(y_h[0, b], y[n - 1, 0, b])  # forward: last step
        assert not y[n:, :, b].any()


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_a_length_0_entry_gives_zero_state_like_onnxruntime(op: str) -> None:
    # The spec is silent; onnxruntime returns zeros for Y_h / Y_c of an
    # empty entry, not its initial state. Pin both ours and theirs.
    case = Case(op, "bidirectional", seq_lens="ragged")
    empty = int(np.flatnonzero(SEQUENCE_LENS["ragged"] == 0)[0])
    inputs = case.inputs()
    assert inputs[5][:, empty].any()  # a non-zero initial_h to lose
    for outputs in (_ours(case), _onnxruntime(case)):
        assert not outputs[0][:, :, empty].any()
        for state in outputs[1:]:
            assert not state[:, empty].any()


def test_input_forget_couples_f_to_1_minus_i_and_ignores_the_forget_weights() -> None:
    # Identity gates: i = 0.25, o = 1, forget bias 0.5 (must be ignored),
    # candidate tanh(0) = 0, c_prev = 2 -> c = (1 - 0.25) * 2 = 1.5.
    B = np.zeros((1, 8))
    B[0, :3] = [0.25, 1.0, 0.5]  # i, o, f
    args = (np.zeros((1, 1, 1)), np.zeros((1, 4, 1)), np.zeros((1, 4, 1)), B)
    kwargs = dict(initial_c=np.full((1, 1, 1), 2.0), activations=["Affine", "Tanh", "Tanh"],
                  activation_alpha=[1.0], activation_beta=[0.0])
    _, _, coupled = lstm(*args, input_forget=1, **kwargs)  # type: ignore[arg-type]
    _, _, free = lstm(*args, input_forget=0, **kwargs)  # type: ignore[arg-type]
    assert float(coupled.ravel()[0]) == pytest.approx(1.5, abs=1e-12)
    assert float(free.ravel()[0]) == pytest.approx(1.0, abs=1e-12)


def test_clip_bounds_the_pre_activation_not_the_activation_output() -> None:
    # Affine(alpha=2): clipping x = 3 to 0.5 before the activation gives 1.0;
    # clipping after it would give 0.5, not clipping at all 6.0.
    y, _ = _scalar_rnn(1.0, 0.0, activations=["Affine"], activation_alpha=[2.0],
                       activation_beta=[0.0], clip=0.5)([3.0, -3.0])
    assert y == pytest.approx([1.0, -1.0], abs=1e-12)


def test_clip_covers_the_lstm_peephole_term_like_onnxruntime() -> None:
    # i's pre-activation is 0 from the weights plus Pi * c_prev = 4 * 1 from
    # the peephole; clipped to 1, Affine i = 1, so c = 1 * c_prev + 1 * g.
    B = np.zeros((1, 8))
    B[0, 3] = 0.5  # candidate pre-activation; identity g -> g = 0.5
    B[0, 1] = 1.0  # o
    P = np.array([[4.0, 0.0, 0.0]])  # peepholes i, o, f
    inputs = [np.zeros((1, 1, 1), np.float32), np.zeros((1, 4, 1), np.float32),
              np.zeros((1, 4, 1), np.float32), B.astype(np.float32), None,
              None, np.ones((1, 1, 1), np.float32), P.astype(np.float32)]
    attrs = {"hidden_size": 1, "clip": 1.0, "activations": ["Affine", "Affine", "Affine"],
             "activation_alpha": [1.0, 1.0, 1.0], "activation_beta": [0.0, 0.0, 0.0]}
    # f = Affine(0) = 0, so c = 0 * 1 + i * 0.5 with i = clip(4) = 1.
    ours = run_node("LSTM", inputs, attrs)
    assert float(ours[2].ravel()[0]) == pytest.approx(0.5, abs=1e-7)
    _assert_outputs_close(ours, run_onnxruntime("LSTM", inputs, attrs), "onnxruntime")


def test_alpha_beta_go_only_to_activations_that_take_them_in_order() -> None:
    # Bidirectional RNN with ["Relu", "Affine"]: Relu takes nothing, so the
    # first alpha / beta belong to the backward direction's Affine.
    X = np.array([-1.0, 2.0]).reshape(2, 1, 1)
    W, R = np.ones((2, 1, 1)), np.zeros((2, 1, 1))
    y, _ = rnn(X, W, R, direction="bidirectional", activations=["Relu", "Affine"],
               activation_alpha=[3.0], activation_beta=[0.5])
    assert y[:, 0, 0, 0].tolist() == pytest.approx([0.0, 2.0], abs=1e-12)  # relu
    assert y[:, 1, 0, 0].tolist() == pytest.approx([-2.5, 6.5], abs=1e-12)  # 3x + 0.5


def test_alpha_beta_are_consumed_across_gates_and_directions() -> None:
    # Bidirectional GRU: the alphas go to LeakyRelu (0.1), ScaledTanh (2.0)
    # and HardSigmoid (0.3), the betas to ScaledTanh (0.5) and HardSigmoid
    # (0.6); Sigmoid takes neither. onnxruntime consumes the lists this way.
    attrs = {"hidden_size": 1, "direction": "bidirectional",
             "activations": ["LeakyRelu", "ScaledTanh", "Sigmoid", "HardSigmoid"],
             "activation_alpha": [0.1, 2.0, 0.3], "activation_beta": [0.5, 0.6]}
    rng = np.random.default_rng(7)
    inputs = [rng.uniform(-1, 1, (3, 2, 1)).astype(np.float32),
              rng.uniform(-1, 1, (2, 3, 1)).astype(np.float32),
              rng.uniform(-1, 1, (2, 3, 1)).astype(np.float32)]
    ours = run_node("GRU", inputs, attrs)
    _assert_outputs_close(ours, run_onnxruntime("GRU", inputs, attrs), "onnxruntime")
    # Moving one beta to the other consumer changes the numbers.
    swapped = run_node("GRU", inputs, {**attrs, "activation_beta": [0.6, 0.5]})
    assert not np.allclose(ours[0], swapped[0], atol=1e-4)


def test_affine_without_alpha_beta_uses_the_onnx_default_identity() -> None:
    run = _scalar_rnn(1.0, 0.0, activations=["Affine"])
    assert run([0.3, -2.0])[0] == pytest.approx([0.3, -2.0], abs=1e-12)


def test_onnxruntime_affine_default_differs_from_the_spec() -> None:
    # Documents why oracle cases always spell out alpha / beta: onnxruntime
    # defaults Affine (and ThresholdedRelu, ScaledTanh) to alpha = beta = 0,
    # while ONNX says Affine alpha = 1, beta = 0. If this starts failing,
    # onnxruntime changed; revisit the note in rnnir/semantics/reference.py.
    inputs = [np.full((1, 1, 1), 0.5, np.float32), np.ones((1, 1, 1), np.float32),
              np.zeros((1, 1, 1), np.float32)]
    attrs = {"hidden_size": 1, "activations": ["Affine"]}
    assert run_onnxruntime("RNN", inputs, attrs)[0].ravel().tolist() == [0.0]
    assert run_node("RNN", inputs, attrs)[0].ravel().tolist() == [0.5]


def test_scaled_tanh_without_alpha_is_refused() -> None:
    with pytest.raises(ValueError, match="ScaledTanh.*activation_alpha"):
        _scalar_rnn(1.0, 0.0, activations=["ScaledTanh"])([1.0])


# --------------------------------------------------------------------------
# API behaviour
# --------------------------------------------------------------------------


def test_run_node_takes_attributes_as_decoded_from_an_onnx_node() -> None:
    from onnx import helper

    case = Case("LSTM", "bidirectional", clip=0.4, activations=ACTIVATION_SETS["LSTM"][0],
                input_forget=1, peepholes=True, seq_lens="ragged")
    node = build_model("LSTM", case.inputs(), case.attributes()).graph.node[0]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert isinstance(attrs["direction"], bytes)  # what onnx hands a simulator
    # The proto stores clip / alpha / beta as float32, hence a tolerance.
    _assert_outputs_close(run_node("LSTM", case.inputs(), attrs), _ours(case), "direct call")


def test_run_node_accepts_a_short_input_list() -> None:
    case = Case("GRU", "forward", optional="none")
    full = _ours(case)
    short = run_node("GRU", case.inputs()[:3], case.attributes())
    for a, b in zip(full, short):
        np.testing.assert_array_equal(a, b)


def test_hidden_size_is_inferred_and_checked() -> None:
    case = Case("RNN", "forward")
    attrs = case.attributes()
    del attrs["hidden_size"]
    np.testing.assert_array_equal(run_node("RNN", case.inputs(), attrs)[0], _ours(case)[0])
    with pytest.raises(ValueError, match="hidden_size"):
        run_node("RNN", case.inputs(), {**attrs, "hidden_size": HIDDEN + 1})


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_outputs_come_back_in_the_input_dtype(dtype: type) -> None:
    X = np.ones((2, 1, 1), dtype)
    y, y_h, y_c = lstm(X, np.ones((1, 4, 1), dtype), np.ones((1, 4, 1), dtype))
    assert y.dtype == y_h.dtype == y_c.dtype == np.dtype(dtype)


@pytest.mark.parametrize(
    ("op", "inputs", "attrs", "message"),
    [
        ("RNN", 3, {"activations": ["Relu", "Relu", "Relu"]}, "activations"),
        ("RNN", 3, {"activations": ["Swish"]}, "unknown activation"),
        ("RNN", 3, {"direction": "sideways"}, "direction"),
        ("RNN", 3, {"clip": 0.0}, "clip"),
        ("GRU", 3, {"layout": 2}, "layout"),
        ("Conv", 3, {}, "unsupported op"),
        ("RNN", 3, {"nonsense": 1}, "unknown attribute"),
    ],
)
def test_invalid_nodes_raise_value_error(op: str, inputs: int, attrs: dict, message: str) -> None:
    case = Case("RNN" if op in ("RNN", "Conv") else op, "forward")
    with pytest.raises(ValueError, match=message):
        run_node(op, case.inputs()[:inputs], attrs)


@pytest.mark.parametrize("lengths", [[5, 1, 1], [-1, 1, 1], [1, 1]])
def test_sequence_lens_out_of_range_raise(lengths: list[int]) -> None:
    case = Case("RNN", "forward")
    inputs = case.inputs()
    inputs[4] = np.array(lengths, dtype=np.int32)
    with pytest.raises(ValueError, match="sequence_lens"):
        run_node("RNN", inputs, case.attributes())
