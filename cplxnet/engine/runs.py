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

Every file is written through :func:`cplxnet.engine.files.atomic_write` (a temporary file in the
same folder, then ``os.replace``), with the permissions the process umask gives a new file; a full
disk is a one-line :class:`RunError` naming the folder, and the files written before stay as they
were.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
from typing import Any

import torch

from .files import (
    RUN_FORMAT,
    RUN_MARKER,
    TEMP_PREFIX,
    RunError,
    append_line,
    atomic_write,
    check_data_unchanged,
    check_entries,
    data_hashes,
    file_sha256,
    load_checkpoint,
    load_weights,
    read_json,
    record_changed_data,
    save_checkpoint,
    umask,
    write_json,
)
from .folder_lock import FolderLock, lock_holder

__all__ = [
    "RUN_FORMAT",
    "RUN_MARKER",
    "RUN_FILES",
    "INSPECT_MARKER",
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
    "record_changed_data",
    "is_run_folder",
    "check_run_started",
    "begin_resume",
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
    "memory_limit",
]

#: The file of an output folder of ``cplxnet inspect`` listing the files inspect wrote there.
INSPECT_MARKER = ".cplxnet-inspect"
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
    inspect wrote (its :data:`INSPECT_MARKER` lists them; a temporary file of one of them, left by
    a killed inspect, counts as its), else None."""
    marker = os.path.join(folder, INSPECT_MARKER)
    if os.path.islink(folder) or not os.path.isfile(marker):
        return None
    try:
        with open(marker, encoding="utf-8") as fh:
            listed = {str(f) for f in json.load(fh)} | {INSPECT_MARKER}
    except (OSError, ValueError, TypeError):
        return None
    suffixes = tuple("-" + name for name in listed)
    entries = os.listdir(folder)
    for e in entries:
        temporary = e.startswith(TEMP_PREFIX) and e.endswith(suffixes)
        if not os.path.isfile(os.path.join(folder, e)) or not (e in listed or temporary):
            return None
    return entries


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


def check_run_started(run_dir: str, first: str, *, to: str = "resume") -> None:
    """A :class:`RunError` if ``run_dir`` holds no checkpoint (neither ``checkpoint.pt`` nor, for
    ``to="use"``, ``best.pt``): the run was stopped before its ``first`` round (``"epoch ended"``,
    ``"evaluation"``), so there is nothing to ``to``; the fix is to start it again. A run to use
    that another process is training (it holds :func:`run_lock`) has not reached that round
    yet."""
    names = ("checkpoint.pt",) if to == "resume" else ("checkpoint.pt", "best.pt")
    if not any(os.path.exists(os.path.join(run_dir, n)) for n in names):
        holder = None if to == "resume" else run_holder(run_dir)  # a resume holds the lock
        if holder is not None:  # training now: the checkpoint comes with its first round
            raise RunError(
                f"{run_dir} is still training ({holder}) and has no checkpoint yet; wait until "
                "it writes its first one"
            )
        raise RunError(
            f"{run_dir} has no checkpoint: the run stopped before its first {first}, so there is "
            f"nothing to {to}; start it again with the same command and --force"
        )


def begin_resume(run_dir: str, run_config: dict, done: bool) -> None:
    """The only changes a resume makes to ``run_dir`` before training: ``config.json`` is
    rewritten with ``run_config`` (the new plan of an extended run), and then, if the run was
    ``done``, its ``results.json`` is removed until the new end. In that order an interrupt
    between the two leaves a complete run whose config.json asks for the extension, which a
    plain ``--resume`` carries out if the run had reached its planned end (one that stopped
    early takes the same ``--epochs N`` again: the checkpoint still holds the stop)."""
    write_json(os.path.join(run_dir, "config.json"), run_config)
    if done:
        os.remove(os.path.join(run_dir, "results.json"))


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


def missing_folders(path: str) -> list[str]:
    """``path`` and the folders above it that do not exist yet, deepest first: what a command
    that creates ``path`` removes again (each only if empty) when it fails."""
    missing, folder = [], os.path.abspath(path)
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    return missing


def remove_empty_folders(folders: list[str]) -> None:
    """Remove ``folders`` (deepest first, as :func:`missing_folders` lists them) up to the first
    that is not empty: the folders above hold it too."""
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:
            break


def _lock_path(path: str) -> str:
    """``.NAME.lock`` beside the folder ``path`` points to (symbolic links resolved, so that
    every spelling of one folder has one lock)."""
    parent, name = os.path.split(os.path.realpath(path))
    return os.path.join(parent, f".{name}.lock")


def run_lock(path: str, fix: str = _IN_USE_FIX) -> FolderLock:
    """The lock of the run folder ``path``: the file ``.NAME.lock`` beside it (it outlives the
    folder's replacement by ``--force``, and it exists before the folder does). Every command
    that writes or removes a run folder (a new run, ``--force``, ``--resume``) holds it from
    before its first change to its end; reading (``evaluate``, ``predict``) needs no lock.
    ``fix`` ends the message of a refused command. See
    :class:`cplxnet.engine.folder_lock.FolderLock`."""
    return FolderLock(_lock_path(path), path, "cplxnet process", fix, RunError)


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
    made = re.compile(re.escape(f".{name}.new-") + r"[a-z0-9_]{8}")  # as tempfile.mkdtemp names
    for entry in os.listdir(parent):
        path = os.path.join(parent, entry)
        if made.fullmatch(entry) and os.path.isdir(path) and not os.path.islink(path):
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
        final = os.path.normpath(final)  # ``run/.`` is ``run``: the folder promote renames
        _check_target(final, force)  # fail before making anything
        self.final = final
        self.note = ""
        self._promoted = False
        # folders above ``final`` this run creates
        self._made_parents = missing_folders(os.path.dirname(os.path.abspath(final)))
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
                os.chmod(self.path, 0o777 & ~umask())  # mkdtemp creates 0700
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
        remove_empty_folders(self._made_parents)

    def release(self) -> None:
        """Let the folder go (another command may write it from now on)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None


# ------------------------------------------------------------------------------------------------
# checks before a run starts


def memory_limit() -> int:
    """Half the machine's memory (8 GiB where its size cannot be read): the most a model's
    parameters (:func:`check_model_memory`) or one tensor of an evaluation may take."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 8 << 30


def check_model_memory(config: Any, zoo: Any, *, limit: int | None = None) -> int:
    """Build ``config`` with ``zoo.build_model`` on the meta device (nothing is allocated) and
    raise :class:`RunError` if its parameters and buffers need more than ``limit`` bytes
    (default: half the machine's memory). Returns the number of bytes."""
    with torch.device("meta"):
        model = zoo.build_model(config)
    tensors = [*model.named_parameters(), *model.named_buffers()]
    total = sum(t.numel() * t.element_size() for _, t in tensors)
    limit = memory_limit() if limit is None else limit
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
