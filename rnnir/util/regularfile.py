"""Reading a file the user named, safely: only a regular file, never more than a known number of bytes.

Every file rnnir reads because a user named it (a model, IR text, a baseline, a pyproject.toml, a ``.npy``
or WAV input) goes through :func:`read_regular`: a FIFO would block the reader forever and ``/dev/zero`` (also
through a symlink) never ends, so anything that is not a regular file is refused from ``os.stat`` before it is
opened; the open is non-blocking (a regular file swapped for a FIFO in between cannot block it) and is checked
again with ``fstat``; the read stops one byte past ``limit``.  What went wrong is a :class:`UnreadableFile`, a
message without the path, so each caller puts it into its own error type and names its own flag.
"""

from __future__ import annotations

import os
import stat

__all__ = ["UnreadableFile", "file_kind", "read_only_reason", "read_regular"]

_STEP = 1 << 20  # read on in 1 MiB steps past what stat promised


class UnreadableFile(Exception):
    """Why a file cannot be read (the message leaves the path out: the caller names it)."""

    def __init__(self, message: str, *, missing: bool = False, kind: str | None = None) -> None:
        super().__init__(message)
        self.missing = missing
        self.kind = kind  # what the file is when it is not a regular file (:func:`file_kind`)


def file_kind(mode: int) -> str | None:
    """What a file that is not regular is, for messages (``"a named pipe (FIFO)"``); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_regular(path: str | os.PathLike[str], limit: int, *, limit_hint: str = "", regular_only: str = "rnnir reads only regular files") -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``limit`` bytes.

    Raises :class:`UnreadableFile` (``missing`` set for a path that does not exist, ``kind`` for one that is not
    a regular file); ``limit_hint`` is added to the message of a file over the limit (what to do instead),
    ``regular_only`` to that of a file that is not regular.
    """

    def refuse(kind: str) -> UnreadableFile:
        return UnreadableFile(f"is {kind}, not a regular file; {regular_only}", kind=kind)

    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UnreadableFile("no such file", missing=True) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        raise UnreadableFile(f"cannot read file: {getattr(exc, 'strerror', None) or exc}") from None
    kind = file_kind(st.st_mode)
    if kind is not None:
        raise refuse(kind)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise UnreadableFile(f"cannot read file: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        kind = file_kind(st.st_mode)
        if kind is not None:
            raise refuse(kind)
        hint = f"; {limit_hint}" if limit_hint else ""
        if st.st_size > limit:
            raise UnreadableFile(f"file is {st.st_size} bytes, over the {limit}-byte limit{hint}")
        # read what stat promised plus a byte, then on in 1 MiB steps: a file that grows, or one of /proc's that
        # reports size 0, is still read to its end or past the limit; fh.read(limit + 1) in one go would make
        # Python allocate the whole limit for every file, however small
        chunks: list[bytes] = []
        total, step = 0, st.st_size + 1
        try:
            while total <= limit:
                wanted = min(step, limit + 1 - total)
                chunk = fh.read(wanted)
                chunks.append(chunk)
                total += len(chunk)
                if len(chunk) < wanted:  # a buffered read returns less only at the end of the file
                    break
                step = _STEP
        except OSError as exc:
            raise UnreadableFile(f"cannot read file: {exc.strerror or exc}") from None
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if len(data) > limit:
        raise UnreadableFile(f"file grew past the {limit}-byte limit while being read")
    return data


def read_only_reason(path: str | os.PathLike[str]) -> str | None:
    """Why an existing ``path`` must not be replaced because its mode says nobody writes it (None: it may be).

    Root may write any file, so ``os.access`` says yes to a 0444 file; but a file made read-only was made so on
    purpose (a committed baseline, a model under review), and a writer respects that even as root, as ``cp``
    and ``git`` do not but ``rm -i`` and editors do.  A path that does not exist yet may be created.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode) and not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        return f"is read-only (mode {stat.S_IMODE(st.st_mode):04o}); make it writable (chmod u+w) to replace it"
    return None
