"""Owner-only paths: the control socket's directory, the run directory and the files the
scheduler writes into it, and who listens on a Unix socket.

A scheduler often runs as root, next to other users, with its socket and its files in a
world-writable temporary directory.  Whatever another user can plant there (a symbolic link,
a directory of theirs, a socket they listen on) must not make the scheduler write, replace,
delete or talk to something that is not its own (docs/reference/security.md, "The control
socket" and "Attacks tried, and what stops them").  The rules, as in the Linux manual's
``open(2)`` (``O_NOFOLLOW``, ``O_EXCL``) and ``unix(7)`` (``SO_PEERCRED``):

::

    directory   mkdir(mode 0700) ─► lstat: a real directory (not a link), our uid,
                no group/other bits?  ── no ─► UnsafePathError (path, why, what to do)
    file        open(O_CREAT | O_NOFOLLOW, 0600) ─► fstat: a regular file; ours and wider
                than 0600 (an older run's) ─► fchmod 0600
    socket      connected ─► SO_PEERCRED: the uid of the process that listens

Nothing here resolves a path (``Path.resolve`` would follow a planted link); paths are made
absolute with :func:`os.path.abspath`, which does not look at the file system.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path

from ._exceptions import UnsafePathError

__all__ = ["UnsafePathError", "describe", "open_private", "owner_only_dir", "peer_uid",
           "private_dir", "write_private"]


def describe(st: os.stat_result) -> str:
    """What a ``lstat`` result is, in words: ``a symbolic link``, ``a directory`` …"""
    mode = st.st_mode
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a regular file"),
                       (stat.S_ISFIFO, "a FIFO")):
        if test(mode):
            return name
    return "a device or other special file"


def _problem(st: os.stat_result) -> str | None:
    """Why a directory's ``lstat`` result is not an owner-only directory of ours, or None."""
    if not stat.S_ISDIR(st.st_mode):
        return f"is {describe(st)}, not a directory"
    if st.st_uid != os.getuid():
        return f"belongs to uid {st.st_uid}, not to uid {os.getuid()}"
    if st.st_mode & 0o077:
        return f"is open to others (mode {stat.S_IMODE(st.st_mode):04o}, expected 0700)"
    return None


def owner_only_dir(path: str | os.PathLike[str], *, create: bool = True,
                   hint: str = "remove it, or choose another path") -> Path:
    """A directory that only this user can enter: made with mode 0700 when ``create`` and
    missing (its parent must exist), then checked without following links.

    Args:
        path: the directory.
        create: make it when missing (one level, ``mkdir`` with mode 0700).
        hint: what the user can do, appended to the error.

    Returns:
        The absolute path (not resolved).

    Raises:
        UnsafePathError: it is a link or not a directory, belongs to another uid, or has
            group or other permission bits; or it is missing and ``create`` is false.
        OSError: it cannot be made (its parent is missing, no permission).
    """
    p = Path(os.path.abspath(path))
    if create:
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        raise UnsafePathError(f"{p} does not exist; {hint}") from None
    why = _problem(st)
    if why is not None:
        raise UnsafePathError(f"{p} {why}; refusing to use it: {hint}")
    return p


def private_dir(path: str | os.PathLike[str]) -> Path:
    """The run or state directory: made (with its parents) when missing, then narrowed to
    mode 0700 when it is ours and wider (``fchmod`` through a descriptor opened with
    ``O_NOFOLLOW``, so that a link there, planted or swapped in, is never followed).

    Returns:
        The absolute path (not resolved).

    Raises:
        UnsafePathError: it is a link or not a directory, or belongs to another uid.
        OSError: it cannot be made.
    """
    p = Path(os.path.abspath(path))
    if not os.path.lexists(p):
        p.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass
    try:
        fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        st = os.lstat(p)
        raise UnsafePathError(f"{p} is {describe(st)}, not a directory; refusing to use it "
                              f"({exc.strerror}): give a directory of yours") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise UnsafePathError(f"{p} belongs to uid {st.st_uid}, not to uid {os.getuid()}; "
                                  "refusing to write there: give a directory of yours")
        if st.st_mode & 0o077:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return p


def open_private(path: str | os.PathLike[str], flags: int, *, follow: bool = False) -> int:
    """Open (creating it with mode 0600) a file the scheduler writes; return the descriptor.

    Without ``follow``, a regular file of ours that is wider than 0600 (left by an older
    run) is narrowed to 0600.  With ``follow``, an existing file keeps its mode.

    Args:
        path: the file.
        flags: ``os.O_WRONLY | os.O_TRUNC``, ``os.O_WRONLY | os.O_APPEND``, ``os.O_RDWR``,
            … (``O_CREAT``, ``O_CLOEXEC`` and ``O_NOFOLLOW`` are added).
        follow: for a path the user named (``--log``): a link at the last component is
            followed when it is the user's or root's own (``--log /dev/stderr``), as the
            kernel's ``fs.protected_symlinks`` would in a sticky directory; never used for a
            file in the run directory.

    Raises:
        UnsafePathError: ``follow`` and the path is a link of another uid.
        OSError: it cannot be opened; ``ELOOP`` when it is a link (not followed).
    """
    nofollow = os.O_NOFOLLOW
    if follow:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            if st.st_uid not in (os.getuid(), 0):
                raise UnsafePathError(f"{path} is a symbolic link of uid {st.st_uid}; "
                                      "refusing to follow it: give a path of yours")
            nofollow = 0
    fd = os.open(path, flags | os.O_CREAT | os.O_CLOEXEC | nofollow, 0o600)
    try:
        st = os.fstat(fd)
        if (not follow and stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid()
                and st.st_mode & 0o077):
            os.fchmod(fd, 0o600)
    except OSError:
        os.close(fd)
        raise
    return fd


def write_private(path: str | os.PathLike[str], data: str | bytes, *, mode: int = 0o600,
                  encoding: str = "utf-8") -> Path:
    """Write ``data`` to ``path`` (replaced in place, never through a link), owner-only.

    Args:
        mode: 0600, or 0700 for a script the scheduler runs itself.

    Raises:
        OSError: it cannot be written (``ELOOP``: a link is there).
    """
    raw = data.encode(encoding) if isinstance(data, str) else data
    with os.fdopen(open_private(path, os.O_WRONLY | os.O_TRUNC), "wb") as fh:
        if mode != 0o600:
            os.fchmod(fh.fileno(), mode)
        fh.write(raw)
    return Path(path)


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end of a connected Unix socket (``SO_PEERCRED``,
    Linux: for a client, the uid of the process that listens), or None where it cannot be
    read."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    try:
        _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, opt,
                                                              struct.calcsize("3i")))
    except OSError:
        return None
    return uid
