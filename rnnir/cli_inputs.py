"""Temporary shim: moved to rnnir.deploy.inputs."""
import sys

from rnnir.deploy import inputs as _moved

sys.modules[__name__] = _moved
