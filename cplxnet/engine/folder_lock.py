"""One owner per folder: :class:`FolderLock`, the lock every cplxnet command that writes a folder
takes before it writes or deletes anything there (``cplxnet compare --out``, and a run folder of
``cplxnet train``, new, ``--force`` or ``--resume``: :func:`cplxnet.engine.runs.run_lock`).

The lock is a file (``OUT/.lock`` of a comparison, ``.NAME.lock`` beside a run folder ``NAME``)
held with ``flock(LOCK_EX | LOCK_NB)`` for as long as the owner runs. The file names its owner
as one JSON line: pid, host, start time (UTC) and command line, which a refused command quotes.
The kernel releases a ``flock`` when its process ends in any way (also ``kill -9`` or a crash),
so a lock file left by a process that is gone is stale by construction and the next command
takes it over. A file holding only a bare pid (a lock taken without ``flock``) counts as held
while that pid is alive on this machine.

On release the owner deletes the file while it still holds it; a command that opened the file
just before then finds, once it holds it, that the name points to another file (or none) and
tries again, so two processes never both own a folder. Locks are per open file: a second
:class:`FolderLock` on the same file in the same process is refused too.

POSIX only (``fcntl``); on a network file system the lock works where ``flock`` does (NFSv4).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import socket
import sys
import time
from typing import Any

__all__ = ["FolderLock", "lock_holder"]


def _describe_self(label: str) -> dict[str, Any]:
    now = datetime.datetime.now(datetime.timezone.utc)
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": now.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "label": label,
        "command": _command_line(),
    }


def _command_line() -> str:
    """This process's command line, as the user typed it for ``python -m cplxnet``."""
    argv = list(sys.argv)
    if argv and os.path.basename(os.path.dirname(argv[0])) == "cplxnet":
        argv[0] = "cplxnet"  # python -m cplxnet: argv[0] is cplxnet/__main__.py
    return " ".join(argv)


def _parse(text: str) -> dict[str, Any] | None:
    """The owner a lock file names, ``{"pid": N}`` for a bare pid, ``None`` if unreadable."""
    text = text.strip()
    if not text:
        return None
    if text.isdigit():
        return {"pid": int(text), "legacy": True}
    try:
        info = json.loads(text)
    except ValueError:
        return None
    return info if isinstance(info, dict) and isinstance(info.get("pid"), int) else None


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return _parse(fh.read(4096))
    except OSError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid > 0


def lock_holder(path: str) -> str | None:
    """Who holds the lock file ``path`` (``"pid N on host H, started T: COMMAND"``), or ``None``
    if nobody does. Takes nothing."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder_text(_wait_for_owner(path))
        fcntl.flock(fd, fcntl.LOCK_UN)
        info = _read(path)
        if info is not None and info.get("legacy") and _alive(info["pid"]):
            return _holder_text(info)
        return None
    finally:
        os.close(fd)


def _wait_for_owner(path: str) -> dict[str, Any] | None:
    """The owner named in a held lock file; an owner that has just taken the file may not have
    written its name yet, so this waits up to half a second for it."""
    info = None
    for _ in range(25):
        info = _read(path)
        if info is not None and not info.get("legacy") and _alive(info["pid"]):
            return info
        time.sleep(0.02)
    return info


def _holder_text(info: dict[str, Any] | None) -> str:
    if info is None:
        return "a process that has not said who it is"
    where = f"pid {info['pid']}"
    if info.get("host"):
        where += f" on host {info['host']}"
    if info.get("started"):
        where += f", started {info['started']}"
    command = str(info.get("command") or "")
    if command:
        where += ": " + (command if len(command) <= 120 else command[:117] + "...")
    return where


class FolderLock:
    """Hold the lock file ``path`` for a folder while the ``with`` block (or until
    :meth:`release`) runs.

    Args:
        path: the lock file (created if missing; its folder must exist).
        folder: the folder it guards, for the message.
        label: what the owner is (``"cplxnet compare"``), written into the file and used in
            the message of a refused command.
        fix: what the refused user can do (``"wait for it or choose another --out"``).
        error: the exception raised when another process holds the lock; its message is one
            line: ``FOLDER is in use by another LABEL (pid N on host H, started T: COMMAND);
            FIX``.

    Examples::

        >>> with FolderLock("out/.lock", "out", "cplxnet compare", "choose another --out",
        ...                 RuntimeError):
        ...     ...  # write into out/
    """

    def __init__(
        self, path: str, folder: str, label: str, fix: str, error: type[Exception]
    ) -> None:
        self.path, self.folder, self.label, self.fix, self.error = path, folder, label, fix, error
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> FolderLock:
        """Take the lock, or raise ``error`` naming the process that holds it."""
        for _ in range(50):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                self._refuse(_wait_for_owner(self.path))
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if not same:  # its owner deleted the file on release: try the new one
                os.close(fd)
                continue
            info = _read(self.path)
            if info is not None and info.get("legacy") and _alive(info["pid"]):
                os.close(fd)  # a bare-pid lock (no flock) of a live process
                self._refuse(info)
            try:
                os.ftruncate(fd, 0)
                os.write(fd, (json.dumps(_describe_self(self.label)) + "\n").encode("utf-8"))
                os.fsync(fd)
            except BaseException:  # a full disk: the file goes, as on release
                with contextlib.suppress(OSError):
                    os.remove(self.path)
                os.close(fd)
                raise
            self._fd = fd
            return self
        raise self.error(f"cannot lock {self.folder}: {self.path} keeps changing")

    def _refuse(self, info: dict[str, Any] | None) -> None:
        label = (info or {}).get("label") or self.label
        raise self.error(
            f"{self.folder} is in use by another {label} ({_holder_text(info)}); {self.fix}"
        )

    def release(self) -> None:
        """Delete the lock file and let it go (a no-op if not held)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.remove(self.path)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()
