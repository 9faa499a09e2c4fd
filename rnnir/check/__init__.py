"""Dynamic checks: what a model does across calls, run rather than read.

``multicall`` (:func:`~rnnir.check.multicall.check_multicall`: one stream run whole, chunked with
persistence and with each persistence bug), ``streaming`` (lost chunks, reconnection, bursts, long runs,
latency), ``simulate`` (the IR run in numpy with injectable faults), ``plot`` (a multi-call report as a
picture) and ``pytest_plugin`` (the ``stateful`` fixture).  Nothing is imported here: each check pays for
onnxruntime (or matplotlib) only when it is used.
"""
