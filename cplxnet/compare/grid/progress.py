"""Progress of a running grid: durations as text and the remaining time estimated from the cells
that finished."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from .cells import Cell

__all__ = [
    "fmt_duration",
    "Eta",
]


def fmt_duration(seconds: float) -> str:
    """``42s``, ``3m05s`` or ``2h07m``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"


class Eta:
    """Remaining time from the mean duration of finished cells of the same family and mode."""

    def __init__(self, previous: Iterable[dict[str, Any]]) -> None:
        self.times: dict[tuple[str, str], list[float]] = {}
        for row in previous:
            if row.get("status") == "ok" and row.get("seconds"):
                self.add(row["family"], row.get("mode", "grid"), float(row["seconds"]))

    def add(self, family: str, mode: str, seconds: float) -> None:
        self.times.setdefault((family, mode), []).append(seconds)

    def estimate(self, cell: Cell) -> float | None:
        times = self.times.get((cell.family, cell.mode))
        if times:
            return sum(times) / len(times)
        every = [t for ts in self.times.values() for t in ts]
        return sum(every) / len(every) if every else None

    def remaining(self, queued: Sequence[Cell], running: dict[str, tuple[Cell, float]], jobs: int):
        total = 0.0
        for cell in queued:
            est = self.estimate(cell)
            if est is None:
                return None
            total += est
        now = time.perf_counter()
        for cell, start in running.values():
            est = self.estimate(cell)
            if est is None:
                return None
            total += max(0.0, est - (now - start))
        return total / max(1, jobs)
