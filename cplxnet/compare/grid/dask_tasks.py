"""What the workers of :class:`~cplxnet.compare.grid.executors.DaskExecutor` run, and how they get a
user's data files.

:func:`run_cell_task` is the Dask task of one cell: it trains the cell in a scratch folder of the
worker (``run_cell`` into that folder) and returns the row; the client writes it. A user's file
(``--data FILE``, ``--vectors FILE``) reaches a worker as described by :func:`data_refs`: the same
absolute path, checked against the SHA-256 of the client's copy (``shared``), or the client's
bytes sent with the tasks (``ship``). :func:`dask_setup` is the preload of the ``LocalCluster``'s
workers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import shutil
import signal
import tarfile
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .cells import Cell, CompareError, GridOptions
from .runner import run_cell
from .store import base_row, by_name, sha256_file

__all__ = [
    "DataFileError",
    "dask_setup",
    "data_refs",
    "local_path",
    "run_cell_task",
    "sha256_file",
]


def sha256_bytes(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def data_refs(
    todo: Sequence[Cell], options: GridOptions, mode: str
) -> tuple[dict[str, dict[str, Any]], dict[str, bytes]]:
    """``{path as given: {"path": absolute, "sha256": hex or None}}`` for the user files of the
    cells (data and vectors), and with ``mode == "ship"`` their bytes by path."""
    paths = [c.data for c in todo if not by_name(c.data)]
    if options.vectors:
        paths.append(options.vectors)
    refs: dict[str, dict[str, Any]] = {}
    contents: dict[str, bytes] = {}
    for path in dict.fromkeys(paths):
        full = os.path.abspath(path)
        if mode == "ship":
            try:
                with open(full, "rb") as fh:
                    contents[path] = fh.read()
            except OSError as err:
                raise CompareError(
                    f"--data-files ship sends {path} to the workers but it cannot be read here "
                    f"({err.strerror}); give a readable file or use --data-files shared"
                ) from None
            refs[path] = {"path": full, "sha256": sha256_bytes(contents[path])}
        else:
            sha = sha256_file(full) if os.path.isfile(full) else None
            refs[path] = {"path": full, "sha256": sha}
    return refs, contents


def dask_setup(worker: Any) -> None:
    """Dask preload of the ``LocalCluster``'s workers: Ctrl-C in the terminal reaches every
    process of the command; the client handles it (cancels the cells, closes the cluster), so a
    worker ignores it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class DataFileError(RuntimeError):
    """A worker cannot use a data file as the client has it."""


_CELL_LOCK = threading.Lock()


def local_path(path: str, refs: Mapping[str, Any], scratch: str, where: str) -> str:
    """The path a worker reads for ``path``: a shipped copy in ``scratch`` or the shared path
    (its SHA-256 checked against the client's)."""
    ref = refs.get(path)
    if ref is None:
        return path
    if ref.get("content") is not None:
        local = os.path.join(scratch, "data", ref["sha256"][:16], os.path.basename(ref["path"]))
        if not os.path.exists(local):
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with open(local, "wb") as fh:
                fh.write(ref["content"])
        return local
    if ref.get("sha256"):
        try:
            sha = sha256_file(ref["path"])
        except OSError as err:
            raise DataFileError(
                f"{ref['path']} cannot be read on worker {where} ({err.strerror}); every worker "
                "must see the file at this path (a shared file system), or use --data-files ship"
            ) from None
        if sha != ref["sha256"]:
            raise DataFileError(
                f"{ref['path']} on worker {where} differs from the client's copy (SHA-256 "
                f"{sha[:12]}... instead of {ref['sha256'][:12]}...); make the copies equal or "
                "use --data-files ship"
            )
    return ref["path"]


def _archive(folder: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname=".")
    return buf.getvalue()


def run_cell_task(
    cell_dict: dict[str, Any],
    options_dict: dict[str, Any],
    refs: Mapping[str, Any],
    topic: str,
    serial: int,
    threads: int,
    keep_runs: bool = False,
    kill_after: str | None = None,
) -> dict[str, Any]:
    """A Dask task: train one cell in a scratch folder of this worker and return its row (the
    row of :func:`~cplxnet.compare.grid.run_cell` for the cell as the client names it; with
    ``keep_runs`` the run folder as ``row["run_archive"]``, a gzipped tar). Events on ``topic``
    tell the client when the cell starts and each epoch it finishes (``serial`` names the
    submission). ``kill_after`` (tests only): once this file exists (the client creates it when
    it has seen the start), the process kills itself with SIGKILL."""
    import torch
    from distributed import get_worker

    worker = get_worker()
    with _CELL_LOCK:  # one cell per process: torch's seeds and thread count are per process
        cell = Cell.from_dict(cell_dict)
        options = GridOptions.from_dict(options_dict)

        def event(what: str, **info: Any) -> None:
            msg = {"cell": cell.cell_id, "serial": serial, "what": what, **info}
            worker.log_event(topic, msg)

        event("start", worker=worker.address)
        if kill_after is not None:
            waited = time.perf_counter()
            while not os.path.exists(kill_after) and time.perf_counter() - waited < 120:
                time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGKILL)
        torch.set_num_threads(max(1, threads))
        scratch = tempfile.mkdtemp(prefix="cplxnet-cell-", dir=worker.local_directory)
        try:
            where = worker.address
            data = local_path(cell.data, refs, scratch, where)
            vectors = options.vectors and local_path(options.vectors, refs, scratch, where)
            local_cell = dataclasses.replace(cell, data=data)
            local_options = dataclasses.replace(options, vectors=vectors)
            row = run_cell(
                local_cell,
                scratch,
                local_options,
                keep_runs=keep_runs,
                callback=lambda epoch, metrics: event("epoch", epoch=epoch),
            )
            row.update(base_row(cell, options))
            row["worker"] = where
            run_dir = os.path.join(scratch, "runs", local_cell.cell_id)
            if keep_runs and os.path.isdir(run_dir):
                row["run_archive"] = _archive(run_dir)
            return row
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
