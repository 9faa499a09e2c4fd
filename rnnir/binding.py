"""Temporary shim: split into rnnir.runtime.binding and rnnir.runtime.ort."""
from rnnir.runtime.binding import COPY_FEED_BYTES, PingPong, SessionStats, SlotBuffers, SteadyCall, SteadyInputs  # noqa: F401
from rnnir.runtime.ort import DEVICE, NativeBinding, PublicBinding, make_binding  # noqa: F401
