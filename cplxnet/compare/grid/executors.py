"""Where the cells of a comparison grid run: :class:`LocalExecutor` (this machine: in this process
or in worker processes) and :class:`DaskExecutor` (a Dask cluster: a ``LocalCluster`` of single-
threaded worker processes, or the workers of a running ``dask scheduler``).

:func:`cplxnet.compare.grid.run_grid` chooses the cells still to run, holds the output folder's
lock and calls ``executor.run(todo, ctx)`` with a :class:`RunContext`; an executor trains the cells
and calls ``ctx.finished(cell, row, running, queued, wall)`` once per cell after its row is in
``OUT/cells/<id>.json``. With Dask the client (this process) is the only writer of the output
folder: a worker trains a cell in its own scratch folder and returns the row (and, with
``keep_runs``, the run folder as a tar archive); the client writes it atomically. What the
workers run, and how they get a user's data files, is in :mod:`.dask_tasks`.

Faults on Dask: a worker that dies while it trains a cell (killed, out of memory, its machine
lost) makes the scheduler raise ``KilledWorker`` for that cell (the ``LocalCluster`` is started
with ``distributed.scheduler.allowed-failures = 0``; a scheduler of your own applies its own
setting first); the client runs the cell again, at most ``retries`` times, then records it as
failed with the reason. An exception outside the training (a data file missing or different on a
worker) is retried by Dask (``retries=``) and then recorded the same way. A failing training is
recorded by the worker, as on the local executor. Either way the grid goes on.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import logging
import os
import shutil
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...engine.runs import RunError, clear_run_folder, discard_run_files
from . import dask_tasks
from .cells import Cell, CompareError, GridOptions, cell_kind, next_ready
from .dask_tasks import data_refs, run_cell_task
from .local import default_threads, run_parallel, run_serial
from .progress import Eta, fmt_duration
from .runner import run_cell
from .store import atomic_json, base_row

__all__ = ["RunContext", "LocalExecutor", "DaskExecutor", "DASK_INSTALL", "DATA_FILES"]

DASK_INSTALL = 'pip install "cplxnet[dask]"'
DATA_FILES = ("shared", "ship")


@dataclass
class RunContext:
    """What :func:`~cplxnet.compare.grid.run_grid` gives an executor: the output folder, the
    budget, ``keep_runs``, the per-cell callback ``finished(cell, row, running, queued, wall)``
    (``running``: ``{cell_id: (cell, perf_counter start)}``, ``queued``: cells not started), the
    log, the status-line period in seconds and the ETA estimator."""

    out: str
    options: GridOptions
    keep_runs: bool
    finished: Callable[..., None]
    log: Callable[[str], None]
    heartbeat: float
    eta: Eta


class LocalExecutor:
    """This machine: ``jobs == 1`` trains in this process (a log line per epoch); ``jobs > 1``
    runs each cell in its own ``python -m cplxnet.compare.grid.worker`` process, at most ``jobs`` at
    a time, each with ``threads`` torch threads (default ``max(1, cores // jobs)``)."""

    def __init__(self, jobs: int = 1, threads: int | None = None) -> None:
        if jobs < 1:
            raise CompareError(f"--jobs must be >= 1, got {jobs}")
        self.jobs = jobs
        self.threads = threads or default_threads(jobs)

    @property
    def slots(self) -> int:
        """Cells that run at once (for the ETA)."""
        return self.jobs

    def describe(self) -> str:
        return f"with {self.jobs} job(s) x {self.threads} thread(s)"

    def run(self, todo: Sequence[Cell], ctx: RunContext) -> None:
        if self.jobs == 1:
            run_serial(todo, ctx, self.threads)
        else:
            run_parallel(
                todo, ctx.out, self.jobs, self.threads, ctx.keep_runs, ctx.options,
                ctx.finished, ctx.log, ctx.heartbeat, ctx.eta,
            )  # fmt: skip


def require_dask() -> None:
    """Raise :class:`CompareError` naming the extra if ``distributed`` is not installed."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise CompareError(
            "--executor dask needs Dask's distributed scheduler, which is not installed: "
            f"{DASK_INSTALL} (or --executor local)"
        ) from None


class DaskExecutor:
    """A Dask cluster runs the cells.

    Args:
        scheduler: address of a running ``dask scheduler`` (``tcp://host:8786``); ``None``
            starts a ``LocalCluster`` of ``jobs`` single-threaded worker processes on this
            machine for the grid and closes it afterwards.
        jobs: worker processes of the ``LocalCluster`` (without ``scheduler``).
        threads: torch threads per cell (default: ``max(1, cores // jobs)`` on a
            ``LocalCluster``, 1 on a cluster of your own: start one single-threaded worker
            process per core, ``dask worker ADDRESS --nworkers K --nthreads 1``).
        retries: how many times a cell runs again after its worker died, and Dask's
            ``retries=`` for an exception outside the training; then the cell is recorded as
            failed.
        data_files: how a worker gets a user's data file (``--data`` FILE, ``--vectors``):
            ``"shared"`` reads the same absolute path (a shared file system), checked against
            the SHA-256 of the client's copy; ``"ship"`` sends the client's bytes with the
            tasks (scattered once, cached by Dask on each worker). Bundled data and the
            synthetic task go by name.
        kill_worker: for tests: ``{cell_id: n}`` makes the first ``n`` attempts of that cell
            kill their own worker process (SIGKILL) when they start, so the fault path runs
            deterministically.
        connect_timeout: seconds to wait for the scheduler.
    """

    def __init__(
        self,
        scheduler: str | None = None,
        *,
        jobs: int = 1,
        threads: int | None = None,
        retries: int = 2,
        data_files: str = "shared",
        kill_worker: Mapping[str, int] | None = None,
        connect_timeout: float = 30.0,
    ) -> None:
        require_dask()
        if jobs < 1:
            raise CompareError(f"--jobs must be >= 1, got {jobs}")
        if retries < 0:
            raise CompareError(f"--retries must be >= 0, got {retries}")
        if data_files not in DATA_FILES:
            raise CompareError(
                f"--data-files must be one of {', '.join(DATA_FILES)}, got {data_files!r}"
            )
        self.scheduler = scheduler
        self.jobs = jobs
        self.threads = threads or (default_threads(jobs) if scheduler is None else 1)
        self.retries = retries
        self.data_files = data_files
        self.kill_worker = dict(kill_worker or {})
        self.connect_timeout = connect_timeout
        self.slots = jobs if scheduler is None else 1
        self.connected = 0  # workers connected at the last look

    def describe(self) -> str:
        if self.scheduler is None:
            where = f"on a Dask LocalCluster of {self.jobs} worker process(es)"
        else:
            where = f"on the Dask cluster at {self.scheduler}"
        return f"{where} x {self.threads} torch thread(s) per cell"

    @contextlib.contextmanager
    def _client(self) -> Any:
        import dask
        from distributed import Client, LocalCluster

        cluster = client = None
        try:
            if self.scheduler is None:
                settings = {
                    "distributed.scheduler.allowed-failures": 0,
                    "distributed.scheduler.worker-saturation": 1.0,
                }
                try:
                    with dask.config.set(settings):
                        cluster = LocalCluster(
                            n_workers=self.jobs,
                            threads_per_worker=1,
                            processes=True,
                            dashboard_address=None,
                            silence_logs=logging.CRITICAL,
                            preload=[dask_tasks.__name__],  # dask_setup: Ctrl-C is the client's
                        )
                except (OSError, RuntimeError, TimeoutError) as err:
                    raise CompareError(
                        f"cannot start a Dask LocalCluster of {self.jobs} worker(s) ({err}); "
                        "a script that runs it must guard its code with "
                        "`if __name__ == '__main__':` (the workers are new processes)"
                    ) from None
                client = Client(cluster)
            else:
                try:
                    client = Client(self.scheduler, timeout=self.connect_timeout)
                except (OSError, TimeoutError, ValueError) as err:
                    raise CompareError(
                        f"cannot reach the Dask scheduler at {self.scheduler} ({err}); start "
                        "one with `dask scheduler` and workers with `dask worker ADDRESS "
                        "--nthreads 1`, or leave out --scheduler for a cluster on this machine"
                    ) from None
            yield client
        finally:
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()
            if cluster is not None:
                with contextlib.suppress(Exception):
                    cluster.close()

    def _workers(self, client: Any) -> dict[str, int]:
        workers = client.nthreads()
        self.connected = len(workers)
        self.slots = max(1, len(workers))  # a worker process trains one cell at a time
        return workers

    def run(self, todo: Sequence[Cell], ctx: RunContext) -> None:
        refs, contents = data_refs(todo, ctx.options, self.data_files)
        with self._client() as client:
            workers = self._workers(client)
            ctx.log(
                f"dask: scheduler {client.scheduler.address}, {len(workers)} worker(s)"
                + ("" if workers else "; the cells wait until workers connect")
            )
            many = sorted(a for a, n in workers.items() if n > 1)
            if many:
                ctx.log(
                    f"note: {len(many)} worker(s) have several threads; a worker process trains "
                    "one cell at a time (torch's random generator is per process): start "
                    "workers with --nworkers K --nthreads 1 to use K cores"
                )
            for path, content in contents.items():
                refs[path]["content"] = client.scatter(content, hash=False)
            _DaskRun(self, client, ctx, refs).run(todo)


# ------------------------------------------------------------------------------------------------
# the client side

LOST_BEFORE_START = 10  # resubmissions of a cell whose worker died before the cell started
RESULT_TIMEOUT = 60.0  # seconds to fetch the row of an ended cell before looking again later


@dataclass
class _Task:
    """A submitted cell: ``serial`` numbers its submissions, ``deaths`` counts the workers that
    died while it ran (what ``retries`` bounds), ``lost`` the submissions lost before it
    started (it waited on a worker that died)."""

    cell: Cell
    future: Any = None
    serial: int = 0
    deaths: int = 0
    lost: int = 0
    started: float | None = None
    epochs: int = 0
    kill: bool = False  # kill_worker: this submission kills its worker (tests)


class _DaskRun:
    """Submit the cells, collect their rows as they end, submit again cells whose worker died."""

    def __init__(
        self, executor: DaskExecutor, client: Any, ctx: RunContext, refs: dict[str, Any]
    ) -> None:
        self.ex = executor
        self.client = client
        self.ctx = ctx
        self.refs = refs
        self.token = uuid.uuid4().hex[:10]
        self.topic = f"cplxnet-compare-{self.token}"
        self.tasks: dict[str, _Task] = {}  # cell id -> task, in grid order, until written
        self.counts = {"ok": 0, "error": 0, "rerun": 0}
        self.hooks: str | None = None  # folder of the kill_worker acknowledgements (tests)
        self.notes: list[str] = []  # log lines from the event thread

    def _event(self, event: Any) -> None:
        """An event of a worker (runs in the client's event-loop thread)."""
        msg = event[1]
        task = self.tasks.get(msg.get("cell"))
        if task is None or task.serial != msg.get("serial"):
            return  # a cell that ended, or an earlier submission
        if msg.get("what") == "start":
            if task.started is not None:  # the scheduler's own retry after a worker died
                self.notes.append(f"{task.cell.describe()}: its worker died; the scheduler "
                                  "started it again")  # fmt: skip
            task.started = time.perf_counter()
            task.epochs = 0
        elif msg.get("what") == "epoch":
            task.epochs = int(msg.get("epoch", 0))

    def _acknowledge(self) -> None:
        """For ``kill_worker``: let the started cells that are to die do so, once the rows of
        the cells that ended before them are collected (a worker that dies loses the results
        it holds; Dask would compute them again)."""
        due = [t for t in list(self.tasks.values()) if t.started is not None and t.kill]
        if any(t.future is not None and t.future.done() for t in list(self.tasks.values())):
            return  # collect first: a cell reported started after its predecessor ended
        for task in due:
            if not os.path.exists(self._ack(task)):
                with open(self._ack(task), "w"):
                    pass

    def _ack(self, task: _Task) -> str:
        return os.path.join(str(self.hooks), f"{task.cell.cell_id}-{task.serial}")

    def _submit(self, task: _Task) -> None:
        task.serial += 1
        task.started = None
        task.epochs = 0
        task.kill = task.deaths < self.ex.kill_worker.get(task.cell.cell_id, 0)
        task.future = self.client.submit(
            run_cell_task,
            task.cell.to_dict(),
            self.ctx.options.to_dict(),
            self.refs,
            self.topic,
            task.serial,
            self.ex.threads,
            self.ctx.keep_runs,
            self._ack(task) if task.kill else None,
            key=f"cplxnet-cell-{self.token}-{task.cell.cell_id}-{task.serial}",
            pure=False,
            retries=self.ex.retries,
        )

    def _submit_ready(self) -> None:
        """Submit every task not yet submitted whose needed cell (``CellKind.needs``) has ended
        (its row collected); the others wait for the next call. A cell that reads another
        cell's kept run (a re-scoring) runs here in the client, where the run folder is."""
        held = [t for t in self.tasks.values() if t.future is None]
        pending = [cid for cid, t in self.tasks.items() if t.future is not None]
        while held:
            i = next_ready([t.cell for t in held], pending)
            if i is None:
                return
            task = held.pop(i)
            if cell_kind(task.cell.mode).needs(task.cell) is None:
                self._submit(task)
                pending.append(task.cell.cell_id)
                continue
            row = run_cell(task.cell, self.ctx.out, self.ctx.options, keep_runs=self.ctx.keep_runs)
            del self.tasks[task.cell.cell_id]
            self.counts["ok" if row.get("status") == "ok" else "error"] += 1
            self.ctx.finished(task.cell, row, self._running(), self._queued())

    def _running(self) -> dict[str, tuple[Cell, float]]:
        return {
            cid: (t.cell, t.started) for cid, t in list(self.tasks.items()) if t.started is not None
        }

    def _queued(self) -> list[Cell]:
        return [t.cell for t in list(self.tasks.values()) if t.started is None]

    def run(self, todo: Sequence[Cell]) -> None:
        if self.ex.kill_worker:
            self.hooks = tempfile.mkdtemp(prefix="cplxnet-kill-")
        self.client.subscribe_topic(self.topic, self._event)
        self.tasks = {c.cell_id: _Task(c) for c in todo}
        last_beat = last_count = time.perf_counter()
        try:
            self._submit_ready()
            while self.tasks:
                time.sleep(0.2)
                now = time.perf_counter()
                if now - last_count >= 5.0:
                    last_count = now
                    self.ex._workers(self.client)
                while self.notes:
                    self.counts["rerun"] += 1
                    self.ctx.log(self.notes.pop(0))
                if now - last_beat >= self.ctx.heartbeat:
                    last_beat = now
                    self.ctx.log(self.status())
                for cid, task in list(self.tasks.items()):
                    if task.future is not None and task.future.done():
                        self._collect(cid, task)
                        self._submit_ready()
                if self.hooks is not None:
                    self._acknowledge()
        except BaseException:
            futures = [t.future for t in self.tasks.values() if t.future is not None]
            with contextlib.suppress(Exception):
                self.client.cancel(futures)
            if futures:
                self.ctx.log(
                    f"dask: cancelled {len(futures)} submitted cell(s); finished cells are kept "
                    f"in {self.ctx.out} and the same command runs the others"
                )
            raise
        finally:
            with contextlib.suppress(Exception):
                self.client.unsubscribe_topic(self.topic)
            if self.hooks is not None:
                shutil.rmtree(self.hooks, ignore_errors=True)
        self.ctx.log(
            f"dask: {self.counts['ok']} cell(s) done, {self.counts['error']} failed, "
            f"{self.counts['rerun']} run again after a worker died"
        )

    def status(self) -> str:
        """One line: each running cell with its epochs, the counts and the ETA."""
        now = time.perf_counter()
        running = self._running()
        queued = self._queued()
        parts = [
            f"{cell.describe()} ({fmt_duration(now - start)}, "
            f"{self.tasks[cid].epochs if cid in self.tasks else 0} epoch(s) done)"
            for cid, (cell, start) in running.items()
        ]
        rest = self.ctx.eta.remaining(queued, running, self.ex.slots)
        return (
            "running: "
            + ("; ".join(parts) or "nothing yet")
            + f" | {self.counts['ok']} done, {self.counts['error']} failed, {len(queued)} "
            f"queued on {self.ex.connected} worker(s), ETA "
            + ("?" if rest is None else fmt_duration(rest))
        )

    def _collect(self, cid: str, task: _Task) -> None:
        """Write the row of an ended task, or submit it again after its worker died."""
        future = task.future
        wall = None if task.started is None else time.perf_counter() - task.started
        try:
            row, error = future.result(timeout=RESULT_TIMEOUT), ""
        except TimeoutError:
            return  # its worker was lost after it ended: Dask computes it again
        except Exception as err:  # noqa: BLE001 - every failure is retried or recorded
            row, error = None, self._failure(task, err)
        future.release()
        if row is None and error is None:
            return  # submitted again
        del self.tasks[cid]
        if row is None:
            row = base_row(task.cell, self.ctx.options)
            row.update(
                status="error",
                error=error,
                seconds=round(wall or 0.0, 1),
                finished=datetime.datetime.now().isoformat(timespec="seconds"),
            )
        self._write(task.cell, row)
        self.counts["ok" if row.get("status") == "ok" else "error"] += 1
        self.ctx.finished(task.cell, row, self._running(), self._queued())

    def _failure(self, task: _Task, err: Exception) -> str | None:
        """Submit a task whose worker died (or the scheduler dropped it) again and return
        ``None``, or return the error to record."""
        from concurrent.futures import CancelledError

        from distributed import KilledWorker

        if isinstance(err, KilledWorker):
            if task.started is None and task.lost < LOST_BEFORE_START:
                task.lost += 1  # it only waited on the worker that died
                self._submit(task)
                return None
            task.deaths += 1
            if task.deaths <= self.ex.retries:
                self._rerun(task, "its worker died")
                return None
            return (
                f"the worker running this cell died {task.deaths} time(s) (killed, out of "
                f"memory or lost): {err}"
            )
        if isinstance(err, CancelledError):  # not by us: the scheduler restarted or forgot it
            task.deaths += 1
            if task.deaths <= self.ex.retries:
                self._rerun(task, "the scheduler dropped it")
                return None
            return f"the scheduler dropped the cell {task.deaths} time(s): {err}"
        return f"{type(err).__name__}: {err}"

    def _rerun(self, task: _Task, why: str) -> None:
        self.counts["rerun"] += 1
        self.ctx.log(
            f"{task.cell.describe()}: {why}; running it again (attempt {task.deaths + 1} of "
            f"{self.ex.retries + 1})"
        )
        self._submit(task)

    def _write(self, cell: Cell, row: dict[str, Any]) -> None:
        """The client writes the row (and a kept run folder) into the output folder."""
        archive = row.pop("run_archive", None)
        run_dir = os.path.join(self.ctx.out, "runs", cell.cell_id)
        if archive is not None:
            try:
                clear_run_folder(run_dir)
            except RunError as err:  # the row is kept; the worker's run folder is not
                self.ctx.log(f"{cell.describe()}: run folder not kept: {err}")
            else:
                os.makedirs(run_dir)
                with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
                    if hasattr(tarfile, "data_filter"):
                        tar.extractall(run_dir, filter="data")
                    else:  # pragma: no cover - Python without extraction filters
                        tar.extractall(run_dir)  # noqa: S202 - an archive our own worker made
        elif row.get("status") == "ok" and not self.ctx.keep_runs:
            discard_run_files(run_dir)  # a local run of this cell, superseded
        atomic_json(os.path.join(self.ctx.out, "cells", cell.cell_id + ".json"), row)
