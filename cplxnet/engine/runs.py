"""Run folders: what cplxnet writes into them, how, and what it may replace or remove (and the
memory check made before a run allocates its model).

A run folder is what ``cplxnet train`` makes (see :mod:`cplxnet.tasks.classify.task`). Its
``config.json`` carries the marker ``"cplxnet_run": RUN_FORMAT`` (the folder's format version), and
the folder holds only the files of :data:`RUN_FILES` (and, while one is being written, a temporary
file starting with ``.tmp-``) and the ``inspect`` folder ``cplxnet inspect`` writes there. cplxnet
replaces or removes a folder only when both hold, and never the current folder or a folder
containing it:

* one process owns a run folder at a time: a new run, ``--force`` and ``--resume`` hold its lock
  (:func:`run_lock`, the file ``.NAME.lock`` beside it) from before their first change to their
  end, and a second such command is refused with one line naming the owner; ``evaluate`` and
  ``predict`` only read and take no lock;
* a new run goes into a folder that does not exist yet, or that holds only cplxnet's temporary
  files (a run killed before it wrote its config.json) (:class:`RunFolder`);
* ``force=True`` (``--force``) on an existing run trains into a new sibling folder
  ``.<name>.new-*`` and puts it in place of the old run once it has written its first
  checkpoint; until then the old run is untouched, and a failure removes only the new folder;
* removal deletes the files of :data:`RUN_FILES` one by one and then the empty folder, so a file
  cplxnet did not write is never deleted (:func:`remove_run_files`).

Every file is written through :func:`atomic_write` (a temporary file in the same folder, then
``os.replace``; ``metrics.jsonl`` is appended by :func:`append_line`), with the permissions the
process umask gives a new file; a full disk is a one-line :class:`RunError` naming the folder
("no space left on device"), and the files written before stay as they were.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import tempfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from ..data.io import clip
from .folder_lock import FolderLock, lock_holder

__all__ = [
    "RUN_FORMAT",
    "RUN_MARKER",
    "RUN_FILES",
    "TEMP_PREFIX",
    "RunError",
    "atomic_write",
    "append_line",
    "write_json",
    "read_json",
    "read_run_config",
    "save_checkpoint",
    "load_checkpoint",
    "check_entries",
    "load_weights",
    "file_sha256",
    "data_hashes",
    "check_data_unchanged",
    "is_run_folder",
    "check_replaceable",
    "check_new_run_dir",
    "run_holder",
    "run_task",
    "remove_run_files",
    "clear_run_folder",
    "discard_run_files",
    "RunFolder",
    "run_lock",
    "check_model_memory",
]

#: Format version of a run folder, stored in its ``config.json`` under :data:`RUN_MARKER`.
RUN_FORMAT = 1
RUN_MARKER = "cplxnet_run"
#: Every file cplxnet writes into a run folder.
RUN_FILES = (
    "config.json",
    "vocab.json",
    "labels.json",
    "metrics.jsonl",
    "checkpoint.pt",
    "best.pt",
    "results.json",
)
#: Prefix of the temporary files of :func:`atomic_write`.
TEMP_PREFIX = ".tmp-"


class RunError(Exception):
    """A problem with a run folder (exists, incomplete, not a run): the message says what to do."""


# ------------------------------------------------------------------------------------------------
# writing and reading files


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str, write: Callable[[Any], None], binary: bool = False) -> None:
    """Write ``path`` through a temporary file in the same folder, then ``os.replace`` it into
    place, so a crash never leaves a half-written file under ``path``. The file gets the
    permissions of a newly created file (``0o666`` less the umask)."""
    folder = os.path.dirname(os.path.abspath(path))
    with _disk_errors(path):
        fd, tmp = tempfile.mkstemp(
            prefix=TEMP_PREFIX, suffix="-" + os.path.basename(path), dir=folder
        )
        try:
            os.fchmod(fd, 0o666 & ~_umask())  # mkstemp creates 0600
            with os.fdopen(
                fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})
            ) as fh:
                write(fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise


def append_line(path: str, line: str) -> None:
    """Append ``line`` and a newline to ``path`` (``metrics.jsonl``); a full disk is a
    :class:`RunError` as in :func:`atomic_write`."""
    with _disk_errors(path), open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def _disk_full(err: BaseException) -> bool:
    """True for the error of a write to a full disk: ``OSError(ENOSPC)`` (or ``EDQUOT``), also
    when ``torch.save`` wraps it in its ``RuntimeError`` ("unexpected pos ...")."""
    seen = 0
    while err is not None and seen < 8:
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(err, RuntimeError) and "unexpected pos" in str(err):
            return True  # torch's zip writer after a short write (its cause is not kept)
        err = err.__cause__ or err.__context__
        seen += 1
    return False


@contextlib.contextmanager
def _disk_errors(path: str) -> Iterator[None]:
    """Turn a write to a full disk into a one-line :class:`RunError` naming the file's folder."""
    try:
        yield
    except Exception as err:
        if not _disk_full(err):
            raise
        folder = os.path.dirname(os.path.abspath(path))
        raise RunError(
            f"no space left on device: writing {os.path.basename(path)} in {folder} failed; the "
            "files written before it are kept as they were (a run keeps its last good "
            "checkpoint): free space on that disk, then run the command again (--resume "
            "continues a run that has a checkpoint)"
        ) from None


def write_json(path: str, obj: Any, *, indent: int | None = 2) -> None:
    """Write ``obj`` as JSON (UTF-8) atomically."""

    def write(fh):
        json.dump(obj, fh, indent=indent, ensure_ascii=False)
        fh.write("\n")

    atomic_write(path, write)


def read_json(path: str) -> Any:
    """Read a run folder's JSON file; a missing or damaged file is a :class:`RunError`."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise RunError(
            f"{path} is missing; is {os.path.dirname(path) or '.'} a cplxnet run folder?"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        reason = clip(str(err).splitlines()[0] if str(err) else type(err).__name__, 100)
        raise RunError(f"{path} is not valid JSON ({reason}); the run folder is damaged") from None


def read_run_config(run_dir: str) -> dict:
    """A run folder's ``config.json``; a file without the cplxnet marker is a :class:`RunError`."""
    leftover = only_temporary_files(run_dir)
    if leftover:
        raise RunError(
            _leftover_message(run_dir, leftover) + ", so there is nothing to resume or score; "
            "start the run again with the command that made it, without --resume (it replaces "
            "the folder)"
        )
    config = read_json(os.path.join(run_dir, "config.json"))
    if not isinstance(config, dict) or RUN_MARKER not in config:
        raise RunError(
            f"{os.path.join(run_dir, 'config.json')} was not written by cplxnet train (no "
            f"{RUN_MARKER!r} marker); give the folder of a cplxnet run"
        )
    return config


def save_checkpoint(obj: dict, path: str) -> None:
    """``torch.save`` ``obj`` atomically (temporary file in the same folder + ``os.replace``)."""
    atomic_write(path, lambda fh: torch.save(obj, fh), binary=True)


def load_checkpoint(
    path: str, *, keys: Mapping[str, type | tuple[type, ...]] | None = None
) -> dict:
    """Load a checkpoint with ``torch.load(weights_only=True)`` (no arbitrary code runs).

    ``keys`` maps the entries the caller needs to their types; a file that is not a dict, or
    lacks one of them, or holds the wrong type, is a :class:`RunError` naming the file.
    """
    if not os.path.isfile(path):
        raise RunError(f"{path} is missing; the run has no checkpoint to load")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure means a damaged file
        raise RunError(
            f"{path} cannot be loaded: it is not a cplxnet checkpoint ({type(err).__name__}); "
            "the file is damaged or comes from elsewhere: restore it or train the run again"
        ) from None
    if not isinstance(state, dict):
        raise RunError(
            f"{path} is not a cplxnet checkpoint (it holds a {type(state).__name__}, not a "
            "dict); restore the run's own file or train the run again"
        )
    check_entries(state, keys or {}, path)
    return state


def check_entries(state: dict, keys: Mapping[str, type | tuple[type, ...]], path: str) -> None:
    """Every entry of ``keys`` is in the checkpoint ``state`` with its type, else a
    :class:`RunError` naming the file ``path``."""
    for key, kind in keys.items():
        if key not in state:
            raise RunError(
                f"{path} is not a cplxnet checkpoint of this kind (no {key!r} entry); restore "
                "the run's own file or train the run again"
            )
        if not isinstance(state[key], kind):
            raise RunError(
                f"{path} is not a cplxnet checkpoint of this kind ({key!r} is a "
                f"{type(state[key]).__name__}); restore the run's own file or train the run again"
            )


def load_weights(model: torch.nn.Module, state: Mapping[str, Any], path: str) -> None:
    """``model.load_state_dict(state)``; a state of another model is a one-line :class:`RunError`
    naming the file and the first mismatch."""
    if not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        raise RunError(f"{path} holds no model weights; restore the run's own file")
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        detail = clip(lines[1] if len(lines) > 1 else lines[0], 200)[1:-1] if lines else "?"
        raise RunError(
            f"{path} does not fit this run's model ({detail}); it was written by another run: "
            "restore the run's own file or train the run again"
        ) from None


def file_sha256(path: str) -> str:
    """The SHA-256 of a file, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_hashes(spec: Any) -> dict[str, str]:
    """SHA-256 of the user's data files of a ``DataSpec`` (``data``, ``dev``, ``test``; bundled
    data is part of the package and has none)."""
    out = {}
    for name in ("data", "dev", "test"):
        path = getattr(spec, name)
        if path is not None and os.path.isfile(path):
            out[name] = file_sha256(path)
    return out


def check_data_unchanged(spec: Any, recorded: Mapping[str, str], run_dir: str, fix: str) -> None:
    """Raise :class:`RunError` if a data file of ``spec`` no longer has the SHA-256 recorded when
    the run in ``run_dir`` was trained; the message names the file, both hashes and ``fix``."""
    for name, digest in data_hashes(spec).items():
        if name in recorded and recorded[name] != digest:
            raise RunError(
                f"the {name} file {getattr(spec, name)} changed since {run_dir} was trained "
                f"(recorded sha256 {recorded[name]}, now {digest}); {fix}"
            )


# ------------------------------------------------------------------------------------------------
# which folders may be replaced


def is_run_folder(path: str) -> bool:
    """True if ``path/config.json`` carries the cplxnet run marker."""
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as fh:
            config = json.load(fh)
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and isinstance(config.get(RUN_MARKER), int)


def _temporary(name: str) -> bool:
    """A temporary file of :func:`atomic_write` for one of the :data:`RUN_FILES`."""
    return name.startswith(TEMP_PREFIX) and name.endswith(tuple("-" + f for f in RUN_FILES))


def _inspect_files(folder: str) -> list[str] | None:
    """The files of ``folder`` if it is an output folder of ``cplxnet inspect`` holding only what
    inspect wrote (its marker file lists them), else None."""
    from ..inspect import MARKER

    marker = os.path.join(folder, MARKER)
    if os.path.islink(folder) or not os.path.isfile(marker):
        return None
    try:
        with open(marker, encoding="utf-8") as fh:
            listed = {str(f) for f in json.load(fh)} | {MARKER}
    except (OSError, ValueError, TypeError):
        return None
    entries = os.listdir(folder)
    plain = all(os.path.isfile(os.path.join(folder, e)) for e in entries)
    return entries if plain and set(entries) <= listed else None


def _own(path: str, name: str) -> bool:
    """Whether the entry ``name`` of the run folder ``path`` is cplxnet's: a file of
    :data:`RUN_FILES` (or a temporary one), or the ``inspect`` folder ``cplxnet inspect`` wrote
    there."""
    full = os.path.join(path, name)
    if name == "inspect" and os.path.isdir(full):
        return _inspect_files(full) is not None
    return (name in RUN_FILES or _temporary(name)) and not os.path.isdir(full)


def only_temporary_files(path: str) -> list[str]:
    """The files of ``path`` if it is a folder holding nothing but cplxnet's temporary files (a
    run killed before it wrote its ``config.json``), else ``[]``."""
    if os.path.islink(path) or not os.path.isdir(path):
        return []
    entries = sorted(os.listdir(path))
    if entries and all(
        _temporary(e) and os.path.isfile(os.path.join(path, e)) and not os.path.islink(
            os.path.join(path, e)) for e in entries
    ):  # fmt: skip
        return entries
    return []


def _leftover_message(path: str, entries: list[str]) -> str:
    shown = ", ".join(entries[:2]) + (f" and {len(entries) - 2} more" if len(entries) > 2 else "")
    return (
        f"{path} holds only temporary files of a cplxnet run that stopped before it wrote its "
        f"config.json ({shown})"
    )


def check_replaceable(path: str) -> None:
    """Raise :class:`RunError` unless ``path`` may be replaced by ``--force``: a real folder (not
    a link), not the current folder or one containing it, either empty or a cplxnet run folder
    (marker in ``config.json``) holding only files cplxnet writes."""
    refuse = f"refusing to replace {path} even with --force: "
    if os.path.islink(path) or not os.path.isdir(path):
        raise RunError(f"{refuse}it is not a folder; choose another --run-dir")
    real, here = os.path.realpath(path), os.path.realpath(os.getcwd())
    if here == real or here.startswith(real.rstrip(os.sep) + os.sep):
        raise RunError(
            f"{refuse}it is the current folder or contains it; give a new --run-dir such as "
            "runs/NAME"
        )
    entries = sorted(os.listdir(path))
    if not entries or only_temporary_files(path):
        return
    if not is_run_folder(path):
        why = (
            f"its config.json lacks the {RUN_MARKER!r} marker"
            if "config.json" in entries
            else "it has no config.json"
        )
        raise RunError(f"{refuse}it is not a cplxnet run folder ({why}); choose another --run-dir")
    foreign = [e for e in entries if not _own(path, e)]
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        shown = ", ".join(foreign[:3]) + more
        raise RunError(
            f"{refuse}it holds files cplxnet did not write ({shown}); move them away or choose "
            "another --run-dir"
        )


def _exists_message(path: str) -> str:
    has = set(os.listdir(path)) if os.path.isdir(path) else set()
    if os.path.isdir(path) and not os.path.islink(path) and not has:
        return f"run folder {path} already exists (empty); pass --force to use it or choose another"
    if not is_run_folder(path):
        return (
            f"run folder {path} already exists and is not a cplxnet run; choose another --run-dir"
        )
    if "checkpoint.pt" not in has:
        return (
            f"run folder {path} already exists; it holds no checkpoint (the run stopped before "
            "its first epoch ended), so pass --force to start it again, or choose another "
            "--run-dir"
        )
    if "results.json" not in has:
        return (
            f"run folder {path} already exists; continue its unfinished run with --resume "
            f"{path}, pass --force to replace it, or choose another --run-dir"
        )
    longer = "--steps" if run_task(path) == "lm" else "--epochs"
    return (
        f"run folder {path} already exists; pass --force to replace it (with --resume {path} "
        f"{longer} N to train it longer), or choose another --run-dir"
    )


def run_task(path: str) -> str:
    """The ``task`` of a run folder's config.json (``"lm"`` or ``"classify"``, the default)."""
    try:
        config = read_json(os.path.join(path, "config.json"))
    except RunError:
        return "classify"
    task = config.get("task") if isinstance(config, dict) else None
    return task if isinstance(task, str) else "classify"


def run_holder(path: str) -> str | None:
    """Who holds the run lock of ``path`` (:func:`run_lock`), or None; takes nothing."""
    return lock_holder(_lock_path(path))


def check_new_run_dir(path: str, force: bool) -> None:
    """Raise :class:`RunError` unless a new run may be written to ``path``: no other process
    holds it (:func:`run_lock`) and it does not exist, or holds only cplxnet's temporary files
    (:func:`only_temporary_files`), or ``force`` and :func:`check_replaceable`. Touches
    nothing."""
    holder = run_holder(path) or lock_holder(os.path.join(path, ".lock"))  # train or compare
    if holder is not None:
        raise RunError(_in_use_message(path, holder))
    _check_target(path, force)


def _check_target(path: str, force: bool) -> None:
    if not os.path.lexists(path) or only_temporary_files(path):
        return
    if not force:
        raise RunError(_exists_message(path))
    check_replaceable(path)


_IN_USE_FIX = "wait for it to end, or choose another --run-dir"


def _in_use_message(path: str, holder: str) -> str:
    return f"{path} is in use by another cplxnet process ({holder}); {_IN_USE_FIX}"


def _lock_path(path: str) -> str:
    parent, name = os.path.split(os.path.abspath(path))
    return os.path.join(parent, f".{name}.lock")


def run_lock(path: str) -> FolderLock:
    """The lock of the run folder ``path``: the file ``.NAME.lock`` beside it (it outlives the
    folder's replacement by ``--force``, and it exists before the folder does). Every command
    that writes or removes a run folder (a new run, ``--force``, ``--resume``) holds it from
    before its first change to its end; reading (``evaluate``, ``predict``) needs no lock.
    See :class:`cplxnet.engine.folder_lock.FolderLock`."""
    return FolderLock(_lock_path(path), path, "cplxnet process", _IN_USE_FIX, RunError)


def remove_run_files(path: str) -> bool:
    """Delete the files cplxnet writes (:data:`RUN_FILES`, temporary files) from ``path`` and then
    the folder if it is empty. Returns False (and leaves the folder) if other files remain."""
    for name in os.listdir(path):
        if not _own(path, name):
            continue
        full = os.path.join(path, name)
        if os.path.isdir(full):  # the inspect folder: its files, then itself
            for inner in _inspect_files(full) or []:
                os.remove(os.path.join(full, inner))
            os.rmdir(full)
        else:
            os.remove(full)
    try:
        os.rmdir(path)
    except OSError:
        return False
    return True


def clear_run_folder(path: str) -> None:
    """Make room for a fresh run at ``path`` (a grid cell's run folder): nothing to do if it
    does not exist; an empty folder, a folder of cplxnet's temporary files or a cplxnet run folder
    holding only files cplxnet writes is removed (:func:`remove_run_files`); anything else is a
    :class:`RunError` naming what it holds, and nothing is deleted."""
    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not os.path.isdir(path):
        raise RunError(f"{path} is not a folder; move it away and run the command again")
    entries = sorted(os.listdir(path))
    foreign = [e for e in entries if not _own(path, e)]
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        raise RunError(
            f"{path} holds files cplxnet did not write ({', '.join(foreign[:3])}{more}); move "
            "them away and run the command again"
        )
    if entries and not is_run_folder(path) and not only_temporary_files(path):
        raise RunError(
            f"{path} is not a cplxnet run folder (no {RUN_MARKER!r} marker in its config.json); "
            "move it away and run the command again"
        )
    remove_run_files(path)


def discard_run_files(path: str) -> None:
    """Delete a finished run's files (those cplxnet wrote) from ``path``, and the folder once
    empty; files cplxnet did not write, and so their folder, stay."""
    if os.path.isdir(path) and not os.path.islink(path):
        remove_run_files(path)


def _remove_stale_replacements(parent: str, name: str) -> None:
    """The ``.NAME.new-*`` folders of ``--force`` runs of ``NAME`` that were killed before they
    took its place (their owner's lock, now held by this process, is gone): their run files are
    deleted, and each folder once empty; other files stay."""
    prefix = f".{name}.new-"
    for entry in os.listdir(parent):
        path = os.path.join(parent, entry)
        if entry.startswith(prefix) and os.path.isdir(path) and not os.path.islink(path):
            discard_run_files(path)


class RunFolder:
    """Where a run writes: :attr:`path` (the folder to write now) and :attr:`final` (the run
    folder asked for), owned by this process (:func:`run_lock`) until :meth:`release`.

    The lock is taken before anything is written or removed, and the folder is checked again
    under it (:func:`check_new_run_dir`). A new folder is created in place. A folder holding only
    cplxnet's temporary files, or with ``force`` an existing run folder (see
    :func:`check_replaceable`), is kept until the new run calls :meth:`promote` after writing its
    first checkpoint; until then the run writes into a new sibling folder. :meth:`abort` (a
    failure before :meth:`promote`) removes only what this run wrote.
    """

    def __init__(self, final: str, force: bool = False) -> None:
        _check_target(final, force)  # fail before making anything
        self.final = final
        self.note = ""
        self._promoted = False
        self._made_parents: list[str] = []  # folders above ``final`` this run created
        parent = os.path.dirname(os.path.abspath(final))
        while not os.path.lexists(parent):
            self._made_parents.append(parent)
            parent = os.path.dirname(parent)
        os.makedirs(os.path.dirname(os.path.abspath(final)), exist_ok=True)
        lock = _lock_path(final)
        self._lock: FolderLock | None = run_lock(final)
        try:
            self._lock.acquire()
            _check_target(final, force)  # again: another run may have made it meanwhile
            name = os.path.basename(os.path.abspath(final))
            _remove_stale_replacements(os.path.dirname(lock), name)
            self._replacing = os.path.lexists(final)
            if self._replacing:
                self.path = tempfile.mkdtemp(prefix=f".{name}.new-", dir=os.path.dirname(lock))
                os.chmod(self.path, 0o777 & ~_umask())  # mkdtemp creates 0700
            else:
                os.mkdir(final)
                self.path = final
        except BaseException:
            self.release()
            self._remove_made_parents()
            raise

    @classmethod
    def existing(cls, path: str, *, lock: bool = True) -> RunFolder:
        """An existing run folder written in place (``--resume``), held by this process from
        now on; ``lock=False`` for the ranks other than 0 of a data-parallel run, which write
        nothing."""
        folder = cls.__new__(cls)
        folder.final = folder.path = path
        folder.note = ""
        folder._replacing = False
        folder._promoted = True
        folder._made_parents = []
        folder._lock = run_lock(path).acquire() if lock else None
        return folder

    @property
    def promoted(self) -> bool:
        return self._promoted

    def promote(self) -> None:
        """The new run has a checkpoint: put it in place of the run it replaces (if any)."""
        if self._promoted:
            return
        self._promoted = True
        if not self._replacing:
            return
        parent, name = os.path.split(os.path.abspath(self.final))
        old = os.path.join(parent, f".{name}.old-{secrets.token_hex(4)}")
        os.rename(self.final, old)
        os.rename(self.path, self.final)
        self.path = self.final
        if not remove_run_files(old):
            self.note = f"note: kept {old}: it holds files cplxnet did not write"

    def abort(self) -> None:
        """Remove what this run wrote, if it has not been promoted: its files, its folder and the
        parent folders it created (each only if empty); in any case, let the folder go
        (:meth:`release`)."""
        removed = not self._promoted and os.path.isdir(self.path) and remove_run_files(self.path)
        self.release()  # first: the lock file is in the parent folder
        if removed:
            self._remove_made_parents()

    def _remove_made_parents(self) -> None:
        for folder in self._made_parents:  # deepest first
            try:
                os.rmdir(folder)
            except OSError:
                break

    def release(self) -> None:
        """Let the folder go (another command may write it from now on)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None


# ------------------------------------------------------------------------------------------------
# checks before a run starts


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 16 << 30


def check_model_memory(config: Any, zoo: Any, *, limit: int | None = None) -> int:
    """Build ``config`` with ``zoo.build_model`` on the meta device (nothing is allocated) and
    raise :class:`RunError` if its parameters and buffers need more than ``limit`` bytes
    (default: half the machine's memory). Returns the number of bytes."""
    with torch.device("meta"):
        model = zoo.build_model(config)
    tensors = [*model.named_parameters(), *model.named_buffers()]
    total = sum(t.numel() * t.element_size() for _, t in tensors)
    limit = _physical_memory() // 2 if limit is None else limit
    if total > limit:
        name, big = max(tensors, key=lambda item: item[1].numel() * item[1].element_size())
        hint = {"vocab_size": "--max-vocab", "max_len": "--max-len", "d_model": "--d-model"}
        sizes = ", ".join(
            f"{hint[k]} {getattr(config, k)}" for k in hint if getattr(config, k, None) is not None
        )
        raise RunError(
            f"the model would need {total / 2**30:.1f} GiB for its parameters (the largest, "
            f"{name}, has shape {tuple(big.shape)}), more than {limit / 2**30:.1f} GiB of this "
            f"machine; make it smaller ({sizes})"
        )
    return total
