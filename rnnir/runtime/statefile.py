"""State files: what :meth:`~rnnir.runtime.StatefulSession.save_state` writes and ``load_state`` reads.

A state file is a zip of ``.npy`` entries (``slot:NAME``, ``context:NAME``) plus ``__rnnir_state__``, the
metadata binding it to the model's fingerprint and state version.  It is written atomically and read
defensively: only a regular file, sizes checked before anything is decompressed.
"""

from __future__ import annotations

import json
import os
import stat
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rnnir.errors import StateError
from rnnir.util.writing import write_file

if TYPE_CHECKING:
    from rnnir.runtime.spec import SlotSpec

__all__ = ["STATE_FORMAT", "check_saved_shape", "read_state_file", "shape_text", "write_atomically"]

STATE_FORMAT = "rnnir.state/1"


def write_atomically(target: Path, write: Any) -> None:
    """``write(file)`` into a temporary file beside ``target``, fsync it, rename it over ``target``
    (:func:`rnnir.util.writing.write_file`: only a regular file, a link's target, never a device); any failure is a
    StateError and leaves the previous file as it was."""
    write_file(target, write, what="state file", error=StateError)


def read_state_file(target: Path, limit: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The metadata and the entries (``slot:NAME``, ``context:NAME``) of a state file; every way the file can be
    bad is a StateError.

    Only a regular file is opened (a FIFO would block); the archive's declared sizes are summed
    before anything is decompressed, so a small file that expands to gigabytes is refused.
    """
    try:
        st = os.stat(target)
    except OSError as exc:
        raise StateError(f"{target}: cannot read saved state: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise StateError(f"{target}: not a regular file; a saved state is a file written by save_state")
    if st.st_size == 0:
        raise StateError(f"{target}: the file is empty, not a saved state")
    try:
        with open(target, "rb") as fh, zipfile.ZipFile(fh) as zf:
            infos = zf.infolist()
            names = [i.filename for i in infos]
            if "__rnnir_state__.npy" not in names:
                raise StateError(f"{target}: not an rnnir state file (no __rnnir_state__ entry)")
            expanded = sum(i.file_size for i in infos)
            if expanded > limit:
                raise StateError(f"{target}: the archive expands to {expanded:,} bytes, more than this model's slots may hold ({limit:,})")
            entries: dict[str, np.ndarray] = {}
            for info in infos:
                if not info.filename.endswith(".npy"):
                    raise StateError(f"{target}: unexpected entry {info.filename!r}; not a file written by save_state")
                with zf.open(info) as member:
                    entries[info.filename[: -len(".npy")]] = _read_entry(member, info, target)
    except StateError:
        raise
    except (
        OSError, ValueError, KeyError, EOFError, SyntaxError, MemoryError, RecursionError, zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError,
    ) as exc:
        raise StateError(f"{target}: cannot read saved state (truncated, or not a state file): {exc}") from None
    raw = entries.pop("__rnnir_state__")
    try:
        meta = json.loads(str(raw[()])) if raw.shape == () else None
    except (ValueError, TypeError):
        meta = None
    if not isinstance(meta, dict):
        raise StateError(f"{target}: the state file's metadata is not what save_state writes")
    return meta, entries


def _read_entry(member: Any, info: zipfile.ZipInfo, target: Path) -> np.ndarray:
    """One ``.npy`` entry, its header checked first: the array it declares must fit in the entry's size
    (a crafted header claiming 10^12 elements would otherwise be allocated before a byte is read)."""
    fmt = np.lib.format
    version = fmt.read_magic(member)
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise StateError(f"{target}: entry {info.filename!r} has an unknown .npy version {version}")
    header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
    shape, fortran, dtype = header(member)  # 3.0 headers differ from 2.0 only in their text encoding
    if dtype.hasobject:
        raise StateError(f"{target}: entry {info.filename!r} holds Python objects; a state file holds numbers only")
    count = 1
    for d in shape:
        count *= int(d)
    if count * dtype.itemsize > info.file_size:
        raise StateError(f"{target}: entry {info.filename!r} declares {count:,} values of {dtype}, more than its {info.file_size:,} bytes hold")
    nbytes = count * dtype.itemsize
    data = member.read(nbytes)
    if len(data) != nbytes:
        raise StateError(f"{target}: entry {info.filename!r} is truncated ({len(data):,} of {nbytes:,} bytes)")
    array: np.ndarray = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()
    return array


def check_saved_shape(target: Path, spec: SlotSpec, shape: tuple[int, ...]) -> None:
    """A saved slot has the declared rank and every fixed dim; symbolic dims may take any size."""
    declared = spec.shape
    if declared is None:
        return
    fixed_ok = all(not (isinstance(d, int) and d > 0) or d == n for d, n in zip(declared, shape))
    if len(declared) != len(shape) or not fixed_ok:
        raise StateError(f"{target}: slot {spec.input!r} was saved with shape {shape_text(shape)}, the model declares {shape_text(declared)}")


def shape_text(shape: Sequence[int | str | None] | None) -> str:
    if shape is None:
        return "[*]"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
