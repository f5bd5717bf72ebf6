"""Writing and reading the files of a run folder: every file through :func:`atomic_write` (a
temporary file in the same folder, then ``os.replace``; ``metrics.jsonl`` appended by
:func:`append_line`), JSON and checkpoints read back with one-line errors, and the SHA-256 of the
data files a run recorded. A full disk is a one-line :class:`RunError` naming the folder ("no
space left on device"), and the files written before stay as they were.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from ..data.io import clip

__all__ = [
    "RUN_FORMAT",
    "RUN_MARKER",
    "TEMP_PREFIX",
    "RunError",
    "umask",
    "atomic_write",
    "replace_atomically",
    "disk_full",
    "append_line",
    "write_json",
    "read_json",
    "save_checkpoint",
    "load_checkpoint",
    "check_entries",
    "load_weights",
    "file_sha256",
    "data_hashes",
    "check_data_unchanged",
    "record_changed_data",
]

#: Format version of a run folder, stored in its ``config.json`` under :data:`RUN_MARKER`.
RUN_FORMAT = 1
RUN_MARKER = "cplxnet_run"
#: Prefix of the temporary files of :func:`atomic_write`.
TEMP_PREFIX = ".tmp-"


class RunError(Exception):
    """A problem with a run folder (exists, incomplete, not a run): the message says what to do."""


def umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str, write: Callable[[Any], None], binary: bool = False) -> None:
    """Write ``path`` through a temporary file in the same folder, then ``os.replace`` it into
    place (:func:`replace_atomically`), so a crash never leaves a half-written file under
    ``path``; a full disk is a one-line :class:`RunError` naming the folder."""
    with _disk_errors(path):
        replace_atomically(path, write, binary)


def replace_atomically(path: str, write: Callable[[Any], None], binary: bool = False) -> None:
    """``write(fh)`` into a temporary file beside ``path`` (prefix :data:`TEMP_PREFIX`, suffix
    ``-NAME``), then ``os.replace`` it onto ``path``; a failed write removes the temporary file
    and raises as it was. The file gets the permissions of a newly created file (``0o666`` less
    the umask)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix="-" + os.path.basename(path), dir=folder)
    try:
        os.fchmod(fd, 0o666 & ~umask())  # mkstemp creates 0600
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


def disk_full(err: BaseException | None) -> bool:
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


def _interrupted(err: BaseException | None) -> bool:
    """True for an error raised in place of a ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM as
    :func:`cplxnet.engine.runtime.sigterm_as_interrupt` makes it): torch's zip writer turns one
    raised in a write of ``torch.save`` into its ``RuntimeError`` ("unexpected pos ..."), the
    interrupt kept as its context."""
    seen = 0
    while err is not None and seen < 8:
        if isinstance(err, KeyboardInterrupt):
            return True
        err = err.__cause__ or err.__context__
        seen += 1
    return False


@contextlib.contextmanager
def _disk_errors(path: str) -> Iterator[None]:
    """Turn a write to a full disk into a one-line :class:`RunError` naming the file's folder,
    and an interrupt that torch's writer turned into an error back into ``KeyboardInterrupt``."""
    try:
        yield
    except Exception as err:
        if _interrupted(err):
            raise KeyboardInterrupt from None
        if not disk_full(err):
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


def record_changed_data(config: dict[str, Any], key: str, now: Any) -> None:
    """Record in a run's ``config`` that it continues on changed data (a resume with
    ``--allow-changed-data``): ``config[key]`` (the recorded SHA-256, or a mapping of them)
    becomes ``now``, and the value it replaces is appended to ``config[key + "_earlier"]``, so
    that the run's evaluation checks the data it was last trained on and the config still says
    what it was trained on before."""
    if config.get(key) != now:
        config.setdefault(key + "_earlier", []).append(config.get(key))
        config[key] = now


def check_data_unchanged(
    spec: Any, recorded: Mapping[str, str], run_dir: str, fix: str, gone: str = ""
) -> None:
    """Raise :class:`RunError` if a data file of ``spec`` no longer has the SHA-256 recorded when
    the run in ``run_dir`` was trained; the message names the file, both hashes and ``fix``. A
    recorded file that is gone is named too, with ``gone`` as the alternative to restoring it."""
    for name in recorded:
        path = getattr(spec, name, None)
        if isinstance(path, str) and not os.path.isfile(path):
            raise RunError(
                f"the {name} file {path} that {run_dir} was trained on is gone; restore it"
                f"{'; or ' + gone if gone else ''}"
            )
    for name, digest in data_hashes(spec).items():
        if name in recorded and recorded[name] != digest:
            raise RunError(
                f"the {name} file {getattr(spec, name)} changed since {run_dir} was trained "
                f"(recorded sha256 {recorded[name]}, now {digest}); {fix}"
            )
