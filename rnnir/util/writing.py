"""Every file rnnir writes goes through :func:`write_file`: reports (``-o``), fixed models, baselines, state files.

The guarantees (docs/files.md lists them for users):

* **Only a regular file or a new path is written.**  A device, FIFO, socket or folder is refused before
  anything is written (as root, renaming over ``/dev/full`` would replace the device).  A symbolic link
  is followed: its final target is replaced, the link stays a link.
* **A file with several hard links is refused**: replacing it would split the links (the other names
  would keep the old content), and writing into it in place could leave a torn file.  Say where the
  new content goes (``-o``), or copy the file first.
* **A read-only file is refused**, also as root: its mode was set on purpose.
* **Atomic and durable**: the content is built fully in memory first, written to a temporary file in
  the target's folder, flushed to disk (``fsync``), given the old file's mode, owner and group, renamed
  over the target, and the folder is flushed too.  Any failure (a full disk) leaves the previous file
  as it was and removes the temporary file.
* **Recognisable leftovers**: a temporary file is ``.<target name>.<pid>.<random>.rnnir-tmp``; when a
  process is killed (``kill -9``) before its rename, the next write to the same target deletes the
  leftovers of processes that no longer run.
* **A model and its external data change together**: the weights go to a file with a new name
  (``<model>.<content hash>.data``), flushed, then the graph naming it replaces the old graph.  Killed in
  between, the old graph still names its old, untouched data; the next write removes orphaned data files.
* **Never over an input**: a caller names the files being read (``protect``); the output may not be one
  of them (``rnnir show m.onnx -o m.onnx``).
* **Read-modify-write under a lock**: :func:`rewrite_lock` holds an exclusive ``flock`` on the file
  being rewritten, so concurrent ``--in-place`` edits re-read each other's result instead of losing it.

One module so every writer behaves the same; the readers' side (open only a regular file, bounded)
is :mod:`rnnir.onnxio.source` and :mod:`rnnir.runtime.statefile`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rnnir.errors import RnnirError
from rnnir.util.regularfile import read_only_reason

__all__ = [
    "TEMP_SUFFIX",
    "FileWriteError",
    "WriteTarget",
    "refuse_output_over_inputs",
    "rewrite_lock",
    "write_file",
    "write_target",
]

#: the suffix of every temporary file rnnir writes beside a target
TEMP_SUFFIX = ".rnnir-tmp"

_KINDS = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


class FileWriteError(RnnirError):
    """A file cannot be written safely; nothing was changed."""


@dataclass(frozen=True)
class WriteTarget:
    """Where a write lands: ``path`` as given, ``real`` the file actually replaced (a link's final target),
    ``existing`` the stat of that file when there is one."""

    path: Path
    real: Path
    existing: os.stat_result | None


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def write_target(path: str | os.PathLike[str], *, error: type[Exception] = FileWriteError) -> WriteTarget:
    """Check that ``path`` may be written (see the module docstring); raises ``error`` saying why not."""
    given = Path(path)  # "" and "DIR/" name folders, refused below like any folder
    name = os.fspath(path)
    try:
        real = Path(os.path.realpath(given, strict=False))
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise error(f"{name}: cannot follow the symbolic link: {exc}") from None
    try:
        st: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"{name}: a symbolic link loop; nothing was written") from None
        raise error(f"{name}: cannot write: {exc.strerror or exc}") from None
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{name}: {_kind(st.st_mode)}, not a regular file; rnnir writes only regular files, nothing was written")
        if st.st_nlink > 1:
            raise error(
                f"{name}: has {st.st_nlink} hard links; replacing it would leave the other names with the old content, "
                "so nothing was written (copy the file, or write elsewhere)"
            )
        if not (st.st_mode & stat.S_IWUSR) or not os.access(real, os.W_OK):
            # the mode bit too: root may write anything, but a file marked read-only was marked so on purpose
            why = read_only_reason(real) or "is not writable"
            raise error(f"{name}: {why}; nothing was changed")
    folder = real.parent
    if not folder.is_dir():
        raise error(f"{name}: no such folder {os.fspath(folder)!r}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise error(f"{name}: cannot write into folder {os.fspath(folder)!r}")
    return WriteTarget(given, real, st)


def refuse_output_over_inputs(output: str | os.PathLike[str] | None, inputs: Iterable[str | os.PathLike[str]], *, what: str, error: type[Exception] = FileWriteError) -> None:
    """Refuse ``output`` when it is one of ``inputs`` (the same file, through any link or spelling)."""
    if not output:
        return
    out = Path(output)
    for item in inputs:
        try:
            same = out.exists() and os.path.samefile(out, item)
        except OSError:
            same = False
        same = same or os.path.normcase(os.path.realpath(out)) == os.path.normcase(os.path.realpath(item))
        if same:
            raise error(f"{what} {os.fspath(output)}: that is {os.fspath(item)}, an input of this command; write elsewhere")


def default_mode() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def remove_dead_leftovers(folder: Path, name: str) -> None:
    """Delete ``.<name>.<pid>.*.rnnir-tmp`` files whose writing process no longer runs (it was killed)."""
    pattern = re.compile(rf"^\.{re.escape(name)}\.(\d+)\.[^.]+{re.escape(TEMP_SUFFIX)}$")
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        m = pattern.match(entry)
        if m is None:
            continue
        pid = int(m.group(1))
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # still running: its temporary file is in use
        except ProcessLookupError:
            pass
        except OSError:
            continue  # another user's running process
        leftover = folder / entry
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(leftover)


def fsync_folder(folder: Path) -> None:
    try:  # make the rename itself durable; not every platform can open a folder
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_file(
    path: str | os.PathLike[str],
    content: bytes | str | Callable[[IO[bytes]], None],
    *,
    protect: Iterable[str | os.PathLike[str]] = (),
    what: str = "--output",
    error: type[Exception] = FileWriteError,
) -> Path:
    """Write ``content`` (bytes, text written as UTF-8, or a function writing into a binary file) to ``path``
    atomically, with the guarantees of this module; returns the file replaced (a link's target).

    ``protect`` names the files this command reads: ``path`` may not be one of them.
    """
    refuse_output_over_inputs(path, protect, what=what, error=error)
    target = write_target(path, error=error)
    real = target.real
    folder = real.parent
    remove_dead_leftovers(folder, real.name)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{real.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=folder)
    except OSError as exc:
        raise error(f"{os.fspath(path)}: cannot write: {exc.strerror or exc}; nothing was changed") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            if callable(content):
                content(fh)
            else:
                fh.write(content.encode("utf-8", "surrogateescape") if isinstance(content, str) else content)
            fh.flush()
            old = target.existing
            if old is not None:
                if hasattr(os, "fchown"):
                    with contextlib.suppress(OSError):  # only root may give a file away; a user keeps their own
                        os.fchown(fh.fileno(), old.st_uid, old.st_gid)
                os.chmod(tmp_name, stat.S_IMODE(old.st_mode))  # after fchown: a chown clears setuid bits
            else:
                os.chmod(tmp_name, default_mode())
            os.fsync(fh.fileno())
        os.replace(tmp_name, real)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        if isinstance(exc, OSError):
            raise error(f"{os.fspath(path)}: cannot write ({exc.strerror or exc}); the previous file, if any, is unchanged") from None
        raise
    fsync_folder(folder)
    return real


@contextlib.contextmanager
def rewrite_lock(path: str | os.PathLike[str], *, error: type[Exception] = FileWriteError) -> Iterator[None]:
    """Hold an exclusive lock on the file at ``path`` while it is read, edited and replaced.

    The lock is an ``flock`` on the file itself; a writer that replaced it meanwhile (a rename gives the
    path a new inode) is noticed and the new file is locked instead, so the caller always re-reads the
    latest content.  No lock file is left behind.  Without ``fcntl`` (Windows) nothing is locked.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    real = Path(os.path.realpath(path))
    while True:
        try:
            fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            yield  # nothing to lock: the reader reports the missing file
            return
        except OSError as exc:
            raise error(f"{os.fspath(path)}: cannot open to lock it: {exc.strerror or exc}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise error(f"{os.fspath(path)}: {_kind(st.st_mode)}, not a regular file; nothing was written")
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = os.stat(real)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_ino, now.st_dev) == (st.st_ino, st.st_dev):
                break
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        os.close(fd)  # replaced while we waited: lock the new file
    try:
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
