"""Model edits derived from rnnir's analysis (``rnnir.fix``): expose a recurrence's hidden state, repair findings.

- :mod:`~rnnir.fixes.engine`: :func:`~rnnir.fixes.engine.fix`, which plans a fix per finding, applies it and lints
  again (the module's docstring says what is safe and how exposing state works);
- :mod:`~rnnir.fixes.edits`: the result (:class:`~rnnir.fixes.edits.FixResult`, :class:`~rnnir.fixes.edits.Edit`) and
  a fix's declaration (:class:`~rnnir.fixes.edits.FixInfo`);
- :mod:`~rnnir.fixes.planners`: one planner per rule that has a fix, registered by one line of ``FIX_TABLE``;
  :mod:`~rnnir.fixes.catalogue`: the table ``rnnir explain`` reads (neither onnx nor numpy);
- the edit machinery the planners share: :mod:`~rnnir.fixes.onnx_edit` (ONNX graph edits),
  :mod:`~rnnir.fixes.state_plan` and :mod:`~rnnir.fixes.expose` (``--expose-state``),
  :mod:`~rnnir.fixes.final_state`, :mod:`~rnnir.fixes.store_structure`; :mod:`~rnnir.fixes.diff` shows a fix.

Importing this package imports nothing else: the catalogue stays cheap.  (It is ``fixes``, not ``fix``: a
submodule ``rnnir.fix`` would rebind the function ``rnnir.fix`` once imported.)
"""
