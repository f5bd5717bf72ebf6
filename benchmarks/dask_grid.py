"""Wall time of one small comparison grid on each executor of ``cplxnet compare``, and the
scheduling overhead per cell.

The grid: the synthetic order task, fasttext and cnn x none and complex-order (natural number
fields) x 4 seeds = 16 cells, one epoch each, tiny widths (``d_model`` 16), one torch thread per
cell. It runs, in this one process, one after the other, into fresh folders:

* ``local, 1 job``: every cell in this process (after one warm-up cell that is not counted):
  the baseline, and the cells' own time ``T`` (the mean of their ``seconds``: data, model,
  training, scoring);
* ``local, 2 jobs``: the process pool (a new ``python -m cplxnet.compare.grid.worker`` per cell);
* ``dask, LocalCluster of 2``: :class:`~cplxnet.compare.grid.executors.DaskExecutor` with a
  ``LocalCluster`` of 2 single-threaded worker processes started for the grid (start-up
  included; reported separately too);
* ``dask, running cluster of 2``: the same cells again (another folder) on a cluster that was
  already running and had trained a cell in each worker (``--scheduler ADDRESS``): the steady
  state of a long grid.

Scheduling overhead per cell = ``(wall x slots - cells x T) / cells``: the slot-seconds a cell
costs beyond its own training (process start-up and imports, scheduling, moving the row back,
idle slots at the end). The accuracies of the three runs are checked to be equal.

Usage::

    python benchmarks/dask_grid.py --out benchmarks/dask_grid.md
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _grid():
    from cplxnet.compare import (
        GridOptions,
        expand_grid,
        parse_encodings,
        parse_numbers,
    )

    options = GridOptions(
        train={"epochs": 1, "batch_size": 32},
        sets={"*": {"d_model": 16}, "cnn": {"num_filters": 16, "kernel_sizes": [2, 3]}},
        extrapolate={
            "train_len": 12,
            "synthetic": {"n_train": 600, "n_dev": 100, "n_test": 100, "vocab": 20},
        },
    )
    cells, _ = expand_grid(
        ["synthetic"],
        ["fasttext", "cnn"],
        parse_encodings("none,complex-order"),
        parse_numbers("natural"),
        [0, 1, 2, 3],
        [None],
        options,
    )
    return cells, options


def _run(name, cells, options, executor, root):
    from cplxnet.compare import run_grid

    stamps: list[tuple[float, str]] = []
    start = time.perf_counter()
    rows = run_grid(
        cells,
        os.path.join(root, name.replace(" ", "-").replace(",", "")),
        options,
        executor=executor,
        log=lambda m: stamps.append((time.perf_counter() - start, m)),
    )
    wall = time.perf_counter() - start
    bad = [r["cell_id"] for r in rows if r["status"] != "ok"]
    if bad:
        raise SystemExit(f"{name}: cells failed: {bad}")
    ready = next((t for t, m in stamps if m.startswith("dask: scheduler")), None)
    return {"name": name, "wall": wall, "rows": rows, "slots": executor.slots, "ready": ready}


@contextlib.contextmanager
def _running_cluster():
    """A 2-worker cluster started apart from the executor (as `dask scheduler` + workers)."""
    import logging

    import distributed

    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=logging.CRITICAL,
    )
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="write the markdown table here")
    args = parser.parse_args(argv)

    import torch

    from cplxnet.compare import run_grid
    from cplxnet.compare.grid.executors import DaskExecutor, LocalExecutor

    torch.set_num_threads(1)
    cells, options = _grid()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="dask-grid-") as root:
        run_grid(cells[:1], os.path.join(root, "warm-up"), options, threads=1, log=lambda m: None)
        runs = [
            _run("local, 1 job", cells, options, LocalExecutor(1, 1), root),
            _run("local, 2 jobs", cells, options, LocalExecutor(2, 1), root),
            _run("dask, LocalCluster of 2", cells, options, DaskExecutor(jobs=2, threads=1), root),
        ]
        with _running_cluster() as address:
            warm = DaskExecutor(address, threads=1)
            run_grid(cells[:2], os.path.join(root, "warm-dask"), options, executor=warm,
                     log=lambda m: None)  # fmt: skip
            warm = DaskExecutor(address, threads=1)
            runs.append(_run("dask, running cluster of 2", cells, options, warm, root))
    load_after = os.getloadavg()
    base = runs[0]
    accuracies = [[r["test_accuracy"] for r in run["rows"]] for run in runs]
    assert all(a == accuracies[0] for a in accuracies), "the executors gave other accuracies"
    n = len(cells)
    t_cell = sum(float(r["seconds"]) for r in base["rows"]) / n
    lines = [
        f"{n} cells (synthetic task, fasttext and cnn x none and complex-order x 4 seeds, one "
        f"epoch, d_model 16, 1 torch thread per cell); mean training time of a cell in-process "
        f"T = {t_cell:.2f} s. Load average (1 min) {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after, on {os.cpu_count()} cores. Accuracies equal on all "
        f"{len(runs)} runs.",
        "",
        "| executor | slots | wall (s) | vs local 1 job | overhead per cell (slot-s) | "
        "cluster start-up (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in runs:
        overhead = (run["wall"] * run["slots"] - n * t_cell) / n
        ready = "" if run["ready"] is None else f"{run['ready']:.1f}"
        lines.append(
            f"| {run['name']} | {run['slots']} | {run['wall']:.1f} | "
            f"{run['wall'] / base['wall']:.2f}x | {overhead:.2f} | {ready} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        header = (
            "# `cplxnet compare` executors: one small grid, wall time and overhead per cell\n\n"
            "`python benchmarks/dask_grid.py --out benchmarks/dask_grid.md` (one run of each; "
            "see the script's docstring for the definitions).\n\n"
        )
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(header + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
