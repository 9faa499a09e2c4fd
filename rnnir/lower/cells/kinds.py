"""The cell kinds the recogniser looks for, in the order it checks each anchor (an LSTM claims its gates before the
GRU check sees them, a GRU its candidate before the RNN check): a kind whose semantics :mod:`rnnir.semantics.reference`
knows is one module and one line here."""

from __future__ import annotations

from rnnir.lower.cells.gru import GruPattern
from rnnir.lower.cells.lstm import LstmPattern
from rnnir.lower.cells.pattern import CellPattern
from rnnir.lower.cells.rnn import RnnPattern

PATTERNS: tuple[CellPattern, ...] = (LstmPattern(), GruPattern(), RnnPattern())
