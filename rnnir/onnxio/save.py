"""Writing an ONNX model and its external data as one change (see :mod:`rnnir.util.writing` for the rules).

The weights go to a file with a new name, content-addressed, written and flushed before the graph that names
it; the previous graph keeps naming its own data until the new graph replaces it.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from rnnir.util.writing import (
    TEMP_SUFFIX,
    FileWriteError,
    default_mode,
    fsync_folder,
    refuse_output_over_inputs,
    remove_dead_leftovers,
    write_file,
    write_target,
)

if TYPE_CHECKING:
    import onnx

__all__ = ["write_onnx_model"]


def _data_pattern(model_name: str) -> re.Pattern[str]:
    """The names :func:`write_onnx_model` gives a model's data file (and the older ``<model>.data``)."""
    return re.compile(rf"^{re.escape(model_name)}(\.[0-9a-f]{{16}})?\.data$")


def write_onnx_model(
    model: onnx.ModelProto,
    path: str | os.PathLike[str],
    *,
    external: bool,
    protect: Iterable[str | os.PathLike[str]] = (),
    keep: Iterable[str | os.PathLike[str]] = (),
    error: type[Exception] = FileWriteError,
) -> Path:
    """Write ``model`` to ``path`` with :func:`write_file`; with ``external``, tensors of 1 KiB or more go to
    a data file beside it, named after the model and its content, written and flushed before the graph.

    ``model``'s large tensors are moved out of it (onnx's converter works in place).  Data files of
    earlier writes of ``path`` that the new graph no longer names are removed afterwards, except ``keep``
    (data files an input model still uses).  Returns the graph file written.
    """
    if not external:
        return write_file(path, model.SerializeToString(), protect=protect, error=error)
    import hashlib

    from onnx.external_data_helper import convert_model_to_external_data, write_external_data_tensors

    from rnnir.onnxio.source import iter_tensors

    refuse_output_over_inputs(path, protect, what="--output", error=error)
    target = write_target(path, error=error)
    real, folder = target.real, target.real.parent
    remove_dead_leftovers(folder, real.name)
    placeholder = "weights.data"
    try:
        with tempfile.TemporaryDirectory(dir=folder, prefix=f".{real.name}.{os.getpid()}.", suffix=TEMP_SUFFIX) as tmp:
            convert_model_to_external_data(model, all_tensors_to_one_file=True, location=placeholder, size_threshold=1024)
            write_external_data_tensors(model, tmp)
            data = Path(tmp) / placeholder
            data_name = None
            if data.exists():
                digest = hashlib.sha256()
                with open(data, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        digest.update(block)
                    os.fsync(fh.fileno())
                data_name = f"{real.name}.{digest.hexdigest()[:16]}.data"
                write_target(folder / data_name, error=error)  # a device or FIFO squatting on the name is refused
                os.chmod(data, default_mode())
                os.replace(data, folder / data_name)  # a new name: the old graph still names its own, untouched data
                fsync_folder(folder)
            for t in iter_tensors(model):
                for entry in t.external_data:
                    if entry.key == "location" and entry.value == placeholder and data_name is not None:
                        entry.value = data_name
    except OSError as exc:
        raise error(f"{os.fspath(path)}: cannot write the external data ({exc.strerror or exc}); the previous files are unchanged") from None
    written = write_file(path, model.SerializeToString(), error=error)
    kept = {os.path.realpath(k) for k in keep}
    pattern = _data_pattern(real.name)
    for entry in os.listdir(folder):
        old = folder / entry
        if entry != data_name and pattern.match(entry) and os.path.realpath(old) not in kept and old.is_file() and not old.is_symlink():
            with contextlib.suppress(OSError):
                os.unlink(old)  # the previous graph's data, or an orphan of a write killed before its graph
    return written
