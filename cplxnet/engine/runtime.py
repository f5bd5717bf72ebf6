"""The process around a training run: seeds and RNG states, the data-parallel world, the zoo,
progress output and the versions recorded in a run's ``config.json``.

Shared by the loop (:mod:`cplxnet.engine.loop`) and the tasks (:mod:`cplxnet.tasks.classify.task`,
:mod:`cplxnet.tasks.lm.task`).
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import platform
import random
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np
import torch
import torch.distributed as dist

from .runs import RunError

__all__ = [
    "MAX_SEED",
    "seed_everything",
    "dist_info",
    "resolve_zoo",
    "versions",
    "machine",
    "rng_state",
    "set_rng_state",
    "gather_rng_states",
    "Logger",
    "progress",
    "on_rank0_first",
    "run_stamp",
    "sigterm_as_interrupt",
]


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


#: The largest seed every generator takes (torch, NumPy and Python all accept 0..2**63-1).
MAX_SEED = 2**63 - 1

T = TypeVar("T")


def on_rank0_first(first: Callable[[], T], others: Callable[[], T]) -> T:
    """``first()`` on rank 0 (taking a run folder), then ``others()`` on the other ranks of a
    data-parallel run; if ``first`` fails, every other rank raises its message as a
    :class:`RunError` instead of waiting for rank 0 at the next collective. Without a process
    group: ``first()``."""
    world, rank = dist_info()
    if world == 1:
        return first()
    result, error = None, None
    if rank == 0:
        try:
            result = first()
        except Exception as err:  # noqa: BLE001 - passed to the other ranks, then raised
            error = err
    message = [None if error is None else str(error)]
    dist.broadcast_object_list(message, src=0)
    if error is not None:
        raise error
    if message[0] is not None:
        raise RunError(message[0])
    return result if rank == 0 else others()


def run_stamp() -> str:
    """The local time as ``YYYYmmdd-HHMMSS`` for a default run-folder name: rank 0's on every
    rank of a data-parallel run (one broadcast), so that ranks started a second apart name the
    same folder."""
    stamp = [datetime.datetime.now().strftime("%Y%m%d-%H%M%S")]
    if dist_info()[0] > 1:
        dist.broadcast_object_list(stamp, src=0)
    return stamp[0]


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM (``kill PID``, a batch system ending a job) raises
    :class:`KeyboardInterrupt` in the main thread, as Ctrl-C does, so that what a command holds
    is let go as on Ctrl-C: ``cplxnet compare`` ends its ``--jobs`` workers and removes its
    ``.lock``, a run removes an unfinished new folder and its lock. Outside the main thread
    (where no handler can be set) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def dist_info() -> tuple[int, int]:
    """``(world size, rank)`` of the initialised process group, ``(1, 0)`` without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


def resolve_zoo(zoo: Any) -> Any:
    """``zoo``, or :mod:`cplxnet.models` when it is ``None``."""
    if zoo is not None:
        return zoo
    try:
        import cplxnet.models as models
    except ImportError as err:  # pragma: no cover - models ships with cplxnet
        raise RunError(f"the model zoo (package 'models') cannot be imported: {err}") from err
    return models


def versions() -> dict[str, str]:
    """Versions of Python, torch, NumPy, cplxnet and complextorch (for a run's config.json)."""
    out = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__}
    for name in ("cplxnet", "complextorch"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "unknown"
    return out


def machine() -> dict[str, Any]:
    """The machine a result was computed on: :func:`versions`, the CPU model (``/proc/cpuinfo``'s
    model name where there is one, else :func:`platform.processor`), the architecture and torch's
    thread count. Float results of one seed can differ between CPU models (kernels vectorise
    differently), so a grid's cells record it."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")),
                       cpu)  # fmt: skip
    except OSError:
        pass
    return {
        **versions(),
        "cpu": cpu or "unknown",
        "arch": platform.machine(),
        "threads": torch.get_num_threads(),
    }


def rng_state() -> dict[str, Any]:
    """Every RNG state (torch, Python, NumPy) as tensors and numbers, loadable with
    ``torch.load(weights_only=True)``; :func:`set_rng_state` restores it."""
    version, mt, gauss = random.getstate()
    _, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "python_version": version,
        "python_state": torch.tensor(mt, dtype=torch.int64),
        "python_gauss": gauss,
        "numpy_keys": torch.from_numpy(keys.astype(np.int64)),
        "numpy_pos": int(pos),
        "numpy_has_gauss": int(has_gauss),
        "numpy_gauss": float(cached),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the RNG states saved by :func:`rng_state`."""
    torch.set_rng_state(state["torch"])
    random.setstate(
        (state["python_version"], tuple(state["python_state"].tolist()), state["python_gauss"])
    )
    np.random.set_state(
        (
            "MT19937",
            state["numpy_keys"].numpy().astype(np.uint32),
            state["numpy_pos"],
            state["numpy_has_gauss"],
            state["numpy_gauss"],
        )
    )


def gather_rng_states(world: int) -> list[dict]:
    """The :func:`rng_state` of every rank, in rank order (a collective call when ``world > 1``)."""
    state = rng_state()
    if world == 1:
        return [state]
    out: list[Any] = [None] * world
    dist.all_gather_object(out, state)
    return out


class Logger:
    """Prints a line on stdout, on the first rank only, unless ``quiet``."""

    def __init__(self, quiet: bool, rank: int) -> None:
        self.on = not quiet and rank == 0

    def __call__(self, message: str) -> None:
        if self.on:
            print(message, flush=True)


def progress(total: int, desc: str, quiet: bool = False, rank: int | None = None):
    """A tqdm progress bar on stderr (off when ``quiet``, off the first rank or not a terminal);
    ``rank`` defaults to this process's rank."""
    from tqdm.auto import tqdm

    if rank is None:
        rank = dist_info()[1]
    disable = quiet or rank != 0 or not sys.stderr.isatty()
    return tqdm(total=total, desc=desc, disable=disable, leave=False, dynamic_ncols=True)
