"""Temporary shim: split into rnnir.cli.run (the command) and rnnir.cli.run_inputs (the input flags)."""

from rnnir.cli.run import MAX_CALLS, MAX_LONG_CALLS, MAX_STREAMS, RunProgress, cmd_run  # noqa: F401
from rnnir.cli.run_inputs import input_flags  # noqa: F401
