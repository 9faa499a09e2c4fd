"""The activations ONNX's recurrent ops accept (``activations`` / ``activation_alpha`` / ``activation_beta``):
each with how it takes alpha and beta and the default of the ONNX operator of the same name.

Where ONNX and onnxruntime differ, the specification wins: a missing alpha or beta takes the default of the
corresponding ONNX operator (``Affine`` alpha 1 / beta 0, ``ThresholdedRelu`` alpha 1), whereas onnxruntime uses 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
else:
    from rnnir.util.lazymod import numpy as np

__all__ = ["ACTIVATION_NAMES", "as_name", "resolve_activations"]

if TYPE_CHECKING:  # aliases for annotations only: evaluating np.ndarray here would import numpy
    _Array = np.ndarray
    ActivationFn = Callable[[_Array], _Array]


# --------------------------------------------------------------------------
# Activations
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _ActivationKind:
    """An activation the recurrent ops accept, and how it takes alpha/beta.

    ``default_alpha`` / ``default_beta`` are the defaults of the ONNX operator
    of the same name; ``None`` where the activation takes the value but ONNX
    defines no default (the caller must then supply it).
    """

    name: str
    fn: Callable[[_Array, float, float], _Array]
    takes_alpha: bool = False
    takes_beta: bool = False
    default_alpha: float | None = None
    default_beta: float | None = None


def _sigmoid(x: _Array, alpha: float, beta: float) -> _Array:
    # Split by sign so that exp never overflows.
    e = np.exp(-np.abs(x))
    out: _Array = np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return out


def _softplus(x: _Array, alpha: float, beta: float) -> _Array:
    out: _Array = np.logaddexp(0.0, x)
    return out


def _elu(x: _Array, alpha: float, beta: float) -> _Array:
    return np.where(x >= 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


_KINDS: tuple[_ActivationKind, ...] = (
    _ActivationKind("Relu", lambda x, a, b: np.maximum(x, 0.0)),
    _ActivationKind("Tanh", lambda x, a, b: np.tanh(x)),
    _ActivationKind("Sigmoid", _sigmoid),
    _ActivationKind("Affine", lambda x, a, b: a * x + b, True, True, 1.0, 0.0),
    _ActivationKind(
        "LeakyRelu", lambda x, a, b: np.where(x >= 0, x, a * x), True, False, 0.01
    ),
    _ActivationKind(
        "ThresholdedRelu", lambda x, a, b: np.where(x > a, x, 0.0), True, False, 1.0
    ),
    _ActivationKind("ScaledTanh", lambda x, a, b: a * np.tanh(b * x), True, True),
    _ActivationKind(
        "HardSigmoid",
        lambda x, a, b: np.clip(a * x + b, 0.0, 1.0),
        True,
        True,
        0.2,
        0.5,
    ),
    _ActivationKind("Elu", _elu, True, False, 1.0),
    _ActivationKind("Softsign", lambda x, a, b: x / (1.0 + np.abs(x))),
    _ActivationKind("Softplus", _softplus),
)

_KIND_BY_NAME: dict[str, _ActivationKind] = {k.name.lower(): k for k in _KINDS}

#: The activation names the recurrent ops accept (matched case-insensitively).
ACTIVATION_NAMES: tuple[str, ...] = tuple(k.name for k in _KINDS)


def as_name(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def resolve_activations(
    op_type: str,
    names: Sequence[str | bytes] | None,
    alphas: Sequence[float] | None,
    betas: Sequence[float] | None,
    defaults: tuple[str, ...],
    num_directions: int,
) -> list[list[ActivationFn]]:
    """Bind activation names to functions, one list per direction.

    ``activation_alpha`` / ``activation_beta`` are consumed in the order of
    the activations, and only by the activations that take them (e.g. for
    ``["Sigmoid", "Affine", "LeakyRelu"]`` the first alpha goes to Affine and
    the second to LeakyRelu). An activation whose value is not supplied gets
    its ONNX default.
    """
    per_direction = len(defaults)
    wanted = per_direction * num_directions
    if names is None or len(names) == 0:
        chosen = [n for _ in range(num_directions) for n in defaults]
    else:
        chosen = [as_name(n) for n in names]
        if op_type == "RNN" and num_directions == 1 and len(chosen) == 2:
            # The RNN schema's default is ["Tanh", "Tanh"] whatever the
            # direction; a one-direction RNN uses the first entry only.
            chosen = chosen[:1]
        if len(chosen) != wanted:
            raise ValueError(
                f"{op_type}: 'activations' has {len(chosen)} entries "
                f"({chosen}); expected {per_direction} per direction, "
                f"{wanted} for {num_directions} direction(s)."
            )
    alpha_left = list(alphas or [])
    beta_left = list(betas or [])
    bound: list[ActivationFn] = []
    for name in chosen:
        kind = _KIND_BY_NAME.get(name.lower())
        if kind is None:
            raise ValueError(
                f"{op_type}: unknown activation {name!r}; expected one of "
                f"{', '.join(ACTIVATION_NAMES)}."
            )
        alpha = _take(op_type, kind, "alpha", kind.takes_alpha, alpha_left, kind.default_alpha)
        beta = _take(op_type, kind, "beta", kind.takes_beta, beta_left, kind.default_beta)
        bound.append(_bind(kind.fn, alpha, beta))
    return [bound[d * per_direction : (d + 1) * per_direction] for d in range(num_directions)]


def _take(
    op_type: str,
    kind: _ActivationKind,
    which: str,
    takes: bool,
    left: list[float],
    default: float | None,
) -> float:
    if not takes:
        return 0.0
    if left:
        return float(left.pop(0))
    if default is None:
        raise ValueError(
            f"{op_type}: activation {kind.name} needs activation_{which} and ONNX "
            f"defines no default for it; supply activation_{which}."
        )
    return default


def _bind(fn: Callable[[_Array, float, float], _Array], alpha: float, beta: float) -> ActivationFn:
    return lambda x: fn(x, alpha, beta)


