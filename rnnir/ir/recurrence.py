"""One place that knows recurrences: every kind rnnir understands, its ports and which of them carry state.

A recurrence kind names its ONNX op (type and domain), its input and output ports in ONNX order, and
which input port a state enters through and which output port the same state leaves through.  Every
module that needs a port asks here (``kind.input_index("initial_h")``, ``kind.exit_of("initial_c")``)
instead of hard-coding positions, so a new kind is one entry in :data:`KINDS` plus, for a kind not
written as one ONNX node, one recogniser (see ``rnnir.lower``).

Recurrences written as plain ops (a PyTorch ``nn.LSTMCell`` export, silero-vad's hand-written cell,
the body of a ``Loop``) are recognised as the plain kinds ``LSTM``/``GRU``/``RNN`` (their computation
is the ONNX operator's), with :attr:`Recognition` saying how they were found.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

__all__ = [
    "ENTRY_OF",
    "FINAL_OF",
    "FINAL_STATE_PORTS",
    "KINDS",
    "STATE_C",
    "STATE_H",
    "STATE_ENTRY_PORTS",
    "Recognition",
    "RecurrenceKind",
    "StatePort",
    "kind_for_op",
    "kind_named",
]


class Recognition(enum.Enum):
    """How lowering found a recurrence."""

    OP = "op"  # one ONNX node of a registered op type (RNN, GRU, LSTM, DynamicQuantizeLSTM, ...)
    CELL = "cell"  # a cell written as plain ops, matched by structure and confirmed by execution
    UNROLLED = "unrolled"  # the same recognised cell repeated over time steps
    LOOP = "loop"  # a Loop/Scan whose body carries the state through a recognised recurrence


@dataclass(frozen=True)
class StatePort:
    """One state of a recurrence: the input port it enters through and the output port it leaves through."""

    role: str  # "h" or "c"
    entry: str  # initial_h / initial_c
    exit: str  # Y_h / Y_c


@dataclass(frozen=True)
class RecurrenceKind:
    """A kind of recurrence: its op, its ports in ONNX order, and its states.

    ``semantics`` is the ONNX operator whose equations it computes (``DynamicQuantizeLSTM`` computes an
    LSTM with quantized weights): what the numpy reference and the gate-level checks use.
    """

    name: str
    op_type: str
    domain: str
    semantics: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    states: tuple[StatePort, ...]
    sequence_output: str = "Y"
    sequence_lens: str = "sequence_lens"
    summary: str = ""

    # the ports' positions and the state inputs, worked out once per kind (cached_property stores into the instance's
    # __dict__, which a frozen dataclass allows): lowering asks for them per recurrent op, tens of thousands of times
    @cached_property
    def _input_positions(self) -> Mapping[str, int]:
        return {p: self.inputs.index(p) for p in self.inputs}

    @cached_property
    def _output_positions(self) -> Mapping[str, int]:
        return {p: self.outputs.index(p) for p in self.outputs}

    def input_index(self, port: str) -> int | None:
        return self._input_positions.get(port)

    def output_index(self, port: str) -> int | None:
        return self._output_positions.get(port)

    @cached_property
    def entries(self) -> tuple[str, ...]:
        """Input ports a state enters through, in ONNX order (initial_h, initial_c)."""
        return tuple(s.entry for s in self.states)

    @cached_property
    def exits(self) -> tuple[str, ...]:
        """Output ports a final state leaves through (Y_h, Y_c)."""
        return tuple(s.exit for s in self.states)

    def exit_of(self, entry: str) -> str | None:
        return next((s.exit for s in self.states if s.entry == entry), None)

    def entry_of(self, exit: str) -> str | None:
        """The entry a final state belongs to; the sequence output ``Y`` carries h's states step by step."""
        if exit == self.sequence_output:
            return self.states[0].entry
        return next((s.entry for s in self.states if s.exit == exit), None)

    @cached_property
    def state_inputs(self) -> tuple[int, ...]:
        """Positions of the inputs the state analysis follows: sequence lengths and initial states."""
        ports = (self.sequence_lens, *self.entries)
        return tuple(i for i in (self.input_index(p) for p in ports) if i is not None)

    @property
    def onnx(self) -> bool:
        return self.domain in ("", "ai.onnx")


_H = StatePort("h", "initial_h", "Y_h")
_C = StatePort("c", "initial_c", "Y_c")
_RNN_IN = ("X", "W", "R", "B", "sequence_lens", "initial_h")
_LSTM_IN = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")

#: every recurrence kind rnnir understands, by name (read-only)
KINDS: Mapping[str, RecurrenceKind] = MappingProxyType({
    k.name: k
    for k in (
        RecurrenceKind("RNN", "RNN", "", "RNN", _RNN_IN, ("Y", "Y_h"), (_H,), summary="ONNX RNN"),
        RecurrenceKind("GRU", "GRU", "", "GRU", _RNN_IN, ("Y", "Y_h"), (_H,), summary="ONNX GRU"),
        RecurrenceKind("LSTM", "LSTM", "", "LSTM", _LSTM_IN, ("Y", "Y_h", "Y_c"), (_H, _C), summary="ONNX LSTM"),
        # onnxruntime's contrib ops: quantize_dynamic turns LSTM into DynamicQuantizeLSTM (same state ports,
        # int8 weights with their scales and zero points after P); AttnLSTM adds an attention memory
        RecurrenceKind(
            "DynamicQuantizeLSTM",
            "DynamicQuantizeLSTM",
            "com.microsoft",
            "LSTM",
            (*_LSTM_IN, "W_scale", "W_zero_point", "R_scale", "R_zero_point"),
            ("Y", "Y_h", "Y_c"),
            (_H, _C),
            summary="onnxruntime contrib LSTM with int8 weights (quantize_dynamic output)",
        ),
        RecurrenceKind(
            "AttnLSTM",
            "AttnLSTM",
            "com.microsoft",
            "LSTM",
            (*_LSTM_IN, "QW", "MW", "V", "M", "memory_seq_lens", "AW"),
            ("Y", "Y_h", "Y_c"),
            (_H, _C),
            summary="onnxruntime contrib LSTM with attention over a memory",
        ),
    )
})

#: the two states a registered kind may carry (every kind names them alike: h first, c for LSTMs)
STATE_H, STATE_C = _H, _C
#: every state port of every kind: the entry a state comes in through -> the exit it leaves through (initial_h -> Y_h)
FINAL_OF: Mapping[str, str] = MappingProxyType({s.entry: s.exit for k in KINDS.values() for s in k.states})
#: the way back, exit -> entry; the sequence output Y carries h's steps, so it belongs to initial_h
ENTRY_OF: Mapping[str, str] = MappingProxyType({**{x: e for e, x in FINAL_OF.items()}, **{k.sequence_output: k.states[0].entry for k in KINDS.values()}})
FINAL_STATE_PORTS: frozenset[str] = frozenset(FINAL_OF.values())
STATE_ENTRY_PORTS: frozenset[str] = frozenset(FINAL_OF)

_BY_OP: Mapping[tuple[str, str], RecurrenceKind] = MappingProxyType({(k.domain, k.op_type): k for k in KINDS.values()})


def kind_for_op(op_type: str, domain: str = "") -> RecurrenceKind | None:
    """The registered kind of an ONNX node, or None when the node is not a recurrent op."""
    return _BY_OP.get(("" if domain == "ai.onnx" else domain, op_type))


def kind_named(name: str) -> RecurrenceKind:
    """The kind called ``name`` (``LSTM``, ``DynamicQuantizeLSTM``, ...); KeyError for an unknown one."""
    return KINDS[name]
