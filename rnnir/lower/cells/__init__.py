"""Recognise recurrent cells written as plain ONNX ops, and confirm each one by running it.

Exporters write LSTM, GRU and RNN cells as ``Gemm``/``MatMul``, ``Split``/``Slice``,
``Sigmoid``/``Tanh``, ``Mul``, ``Add`` and ``Sub`` (PyTorch's ``nn.LSTMCell`` with the dynamo
exporter, silero-vad's ``silero_vad_op18_ifless.onnx``, hand-written time loops). This package
finds them and says exactly which values are the cell's state entries and exits.

How, in three steps, all restricted to the *state cone* (values that depend on a state source; besides the state
inputs, the zeros a cell starts from, looked for near the graph outputs only: see :func:`rnnir.lower.cells.zeros.constant_states`):

1. **Structure.** Anchors are the nonlinear skeleton, found by role, never by name or gate
   order: an LSTM is ``c' = f*c + i*g`` with ``h' = o*act(c')`` (``f`` the sigmoid that
   multiplies a state input, ``i`` the one that multiplies the candidate ``g``, ``o`` the one
   that multiplies ``act(c')``); a GRU is a ``tanh`` ``n`` whose input holds a sigmoid-gated
   product (the reset gate ``r``), blended with a state input ``h`` by a second sigmoid ``z``
   through ``Add``/``Sub``/``Mul``/``Neg`` in any algebraic arrangement; an RNN is
   ``act(affine(x, h))`` with a matmul on ``h``.
2. **Cut.** From each gate's pre-activation the recogniser walks back through affine and
   layout-only ops (``Gemm``, ``MatMul``, ``Add``, ``Sub``, ``Concat``, ``Split``, ``Slice``,
   ``Gather``, ``Reshape``, ...). The walk stops at constants, at *state views* (values a
   layout-only chain derives from a state source: ``Squeeze(Gather(state, 0))``), and at values
   that do not depend on state (the cell input ``x``; a constant-weight projection of ``x`` is
   walked through so that ``W`` is the model's input weight). State views of one source that
   hold the same elements (decided by running their layout chains on random data) are one
   state input, so a GRU that reads ``h`` through two different rearrangements has one ``h``.
3. **Execution.** The pre-activations are affine in (x, h): probing them with zeros and unit
   vectors reads ``W``, ``R`` and ``b`` per gate off the model. Those weights, put in ONNX gate
   order, build :mod:`rnnir.semantics.reference`'s cell (LSTM/GRU/RNN, one step); the matched subgraph
   run alone on fresh random inputs must give the same new state. GRU roles that structure
   cannot fix (reset before or after the matmul, ``z`` as keep or write ratio) are tried and
   the one that reproduces the model is kept.

A structure that looks like a cell but does not compute one is returned as a
:class:`CellCandidate` with a reason, never as a match. Execution uses
:mod:`rnnir.semantics.evaluate` (numpy): ``rnnir lint`` never imports onnxruntime.

Details that matter on real exports: gates may be ``Sigmoid`` or ``HardSigmoid`` (one kind for all gates, as
the ONNX ops require); a fixed batch (dynamo's static batch 2) is probed through its first row and checked on
every row, the hidden size being a gate's width; a confirmed cell's outputs are state sources at once, so the
steps of an unrolled loop and the layers of a stack are found in one pass. What keeps it cheap and honest:
only the state cone is scanned, each anchor is executed at most once, an RNN cell must read an input that is
not state (``act(W h)`` alone is an MLP layer on the state), a cell reads at most four state inputs, and a
gate's affine part spans at most a few hundred values.

Where each step lives: ``net`` (the model by value key: constants, shapes), ``zeros`` (zero initial states),
``cone`` (the state cone, its views, the recogniser's record), ``walk`` (the cut and the state inputs), ``probe`` and
``execute`` (reading weights off by running the subgraph; the probe data), one module per cell kind (``lstm``,
``gru``, ``rnn``: each a :class:`~rnnir.lower.cells.pattern.CellPattern`, listed in ``kinds.PATTERNS``), and ``scan``
(the passes over the cone, :func:`find_cells`). A kind whose semantics :mod:`rnnir.semantics.reference` knows is one module
and one line in ``kinds``.
"""

from __future__ import annotations

from rnnir.lower.cells.ops import carry_layout
from rnnir.lower.cells.results import CellCandidate, CellMatch, CellWeights
from rnnir.lower.cells.scan import CellScan, find_cells

__all__ = ["CellCandidate", "CellMatch", "CellScan", "CellWeights", "carry_layout", "find_cells"]
