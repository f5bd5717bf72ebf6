"""Run one cell of a comparison grid in its own process (used by ``cplxnet compare --jobs N``).

``python -m cplxnet.compare.grid.worker --out OUT --threads T --cell '{...}'`` reads the budget from
``OUT/grid.json``, trains the cell and writes ``OUT/cells/<id>.json``. Exit status 0 when the
cell was recorded (even as an error), 130 on interruption. With ``--watch-stdin`` (the local
executor gives each worker a pipe) the worker ends as on Ctrl-C when its stdin reaches its end:
the parent closed it or died (``kill -9``), so no worker trains on without the process that
holds the output folder's lock.
"""

from __future__ import annotations

import _thread
import argparse
import json
import os
import signal
import sys
import threading

__all__ = ["main"]


def _end_with_parent() -> None:
    """Read stdin to its end, then interrupt the main thread (a KeyboardInterrupt there)."""
    try:
        while sys.stdin.buffer.read(65536):
            pass
    except (OSError, ValueError):
        pass
    _thread.interrupt_main()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cplxnet.compare.grid.worker")
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cell", required=True, help="the cell as JSON (Cell.to_dict)")
    parser.add_argument("--keep-runs", action="store_true")
    parser.add_argument("--watch-stdin", action="store_true", help="end when stdin is closed")
    args = parser.parse_args(argv)
    if args.watch_stdin:
        # a shell's background job ("compare ... &" in a script) starts with SIGINT ignored,
        # which would make interrupt_main a no-op
        signal.signal(signal.SIGINT, signal.default_int_handler)
        threading.Thread(target=_end_with_parent, daemon=True).start()

    import torch

    torch.set_num_threads(max(1, args.threads))
    from ...engine.runtime import sigterm_as_interrupt
    from .cells import Cell, GridOptions
    from .runner import run_cell

    with open(os.path.join(args.out, "grid.json"), encoding="utf-8") as fh:
        options = GridOptions.from_dict(json.load(fh)["options"])
    cell = Cell.from_dict(json.loads(args.cell))
    try:
        with sigterm_as_interrupt():  # the parent ends its workers with SIGTERM
            row = run_cell(cell, args.out, options, keep_runs=args.keep_runs)
    except KeyboardInterrupt:
        return 130
    print(json.dumps({k: row.get(k) for k in ("cell_id", "status", "error", "seconds")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
