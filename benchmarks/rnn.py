"""Benchmark: complex LSTM / GRU (forward + backward) against real and complex baselines.

Rows (per complex width d: input d, hidden d, one layer, batch first), each timed as one
forward + backward over the whole sequence:

* ``split``        -- :class:`cplxnet.nn.LSTM` ``gate="split"`` (complex64; torch's fused real
  LSTM kernel on the packed view, weights ``[[A, -B], [B, A]]`` rebuilt per call);
* ``split+len``    -- the same with variable lengths (packed sequences; a quarter of the batch at
  half length), relative to the real LSTM with the same lengths;
* ``analytic``     -- :class:`cplxnet.nn.LSTM` ``gate="analytic"`` (torch's complex kernel);
* ``native-cfloat``-- ``torch.nn.LSTM(d, d, dtype=torch.cfloat)`` (the same math as analytic);
* ``complextorch`` -- ``complextorch.nn.LSTM(d, d)`` (a Python loop over cells), if importable;
* ``gru-split``    -- :class:`cplxnet.nn.GRU` ``gate="split"``, relative to ``nn.GRU(2d, 2d)``.

The base of every LSTM ratio is ``torch.nn.LSTM(2d, 2d)`` in float32: hidden ``2d`` real units
carry the same real FLOPs as ``d`` complex units. The target for ``split`` is <= 1.5x.

Conventions (``shared/notes/performance.md``): glibc allocator thresholds set (the script
re-executes itself with them), 2 threads, warm-up, the variants interleaved round by round in a
shuffled order, and the reported number is the median over rounds of each variant's time divided
by its base's time in the same round. Defaults: batch 32, sequence 128, d 256 and 512.

Usage: ``python benchmarks/rnn.py [--batch 32 --seq 128 --dims 256 512 --rounds 9]``;
``--tiny`` runs a seconds-long smoke setting; ``--no-complextorch`` drops the slowest row.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable

_ALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "1073741824", "MALLOC_TRIM_THRESHOLD_": "4294967296"}
if any(os.environ.get(k) != v for k, v in _ALLOC_ENV.items()):
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **_ALLOC_ENV})

import torch  # noqa: E402
from torch import nn  # noqa: E402

import cplxnet.nn as cnn  # noqa: E402

# variant -> the real baseline its time is divided by
BASE = {
    "split": "real-2d",
    "analytic": "real-2d",
    "native-cfloat": "real-2d",
    "complextorch": "real-2d",
    "split+len": "real-2d+len",
    "gru-split": "real-gru-2d",
}


def _variants(batch: int, seq: int, d: int, with_ct: bool) -> dict[str, Callable[[], None]]:
    cx = torch.randn(batch, seq, d, dtype=torch.complex64, requires_grad=True)
    rx = torch.randn(batch, seq, 2 * d, requires_grad=True)
    lengths = torch.full((batch,), seq, dtype=torch.int64)
    lengths[: max(batch // 4, 1)] = max(seq // 2, 1)

    def step(module: nn.Module, x: torch.Tensor, *args) -> Callable[[], None]:
        params = list(module.parameters())

        def run() -> None:
            for t in [x, *params]:
                t.grad = None
            out = module(x, *args)[0]
            grad = torch.ones_like(out) if not out.is_complex() else torch.ones_like(out) * (1 + 1j)
            out.backward(grad)

        return run

    class PackedLSTM(nn.Module):
        """torch.nn.LSTM through pack_padded_sequence (the real counterpart of ``lengths``)."""

        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(2 * d, 2 * d, batch_first=True)

        def forward(self, x: torch.Tensor, lens: torch.Tensor):
            p = nn.utils.rnn.pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False)
            out, st = self.lstm(p)
            out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=seq)
            return out, st

    out = {
        "real-2d": step(nn.LSTM(2 * d, 2 * d, batch_first=True), rx),
        "split": step(cnn.LSTM(d, d, gate="split", dtype=torch.complex64), cx),
        "analytic": step(cnn.LSTM(d, d, gate="analytic", dtype=torch.complex64), cx),
        "native-cfloat": step(nn.LSTM(d, d, batch_first=True, dtype=torch.complex64), cx),
        "real-2d+len": step(PackedLSTM(), rx, lengths),
        "split+len": step(cnn.LSTM(d, d, dtype=torch.complex64), cx, lengths),
        "real-gru-2d": step(nn.GRU(2 * d, 2 * d, batch_first=True), rx),
        "gru-split": step(cnn.GRU(d, d, dtype=torch.complex64), cx),
    }
    if with_ct:
        try:
            from complextorch.nn import LSTM as CTLSTM

            out["complextorch"] = step(CTLSTM(d, d, batch_first=True), cx)
        except Exception as exc:  # pragma: no cover - optional baseline
            print(f"complextorch baseline skipped: {exc}", file=sys.stderr)
    return out


def bench(
    batch: int, seq: int, d: int, rounds: int, warmup: int, inner: int, with_ct: bool
) -> dict[str, float]:
    variants = _variants(batch, seq, d, with_ct)
    for _ in range(warmup):
        for run in variants.values():
            run()
    ratios: dict[str, list[float]] = {name: [] for name in variants if name in BASE}
    names = list(variants)
    for _ in range(rounds):
        random.shuffle(names)
        times = {}
        for name in names:
            t0 = time.perf_counter()
            for _ in range(inner):
                variants[name]()
            times[name] = (time.perf_counter() - t0) / inner
        for name in ratios:
            ratios[name].append(times[name] / times[BASE[name]])
    return {name: statistics.median(r) for name, r in ratios.items()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--dims", type=int, nargs="+", default=[256, 512])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--inner", type=int, default=1, help="calls per timed block")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-complextorch", action="store_true", help="skip the slow loop baseline")
    p.add_argument("--tiny", action="store_true", help="smoke setting (batch 2, seq 16, d 64)")
    a = p.parse_args(argv)
    if a.tiny:
        a.batch, a.seq, a.dims, a.rounds, a.warmup, a.inner = 2, 16, [64], 5, 2, 5
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    random.seed(0)
    print(
        f"# complex LSTM/GRU fwd+bwd, batch {a.batch}, seq {a.seq}, {a.threads} threads, median "
        f"of {a.rounds} per-round ratios to the real layer of hidden 2d (same real FLOPs)"
    )
    cols = ("split", "split+len", "analytic", "native-cfloat", "complextorch", "gru-split")
    print(f"{'d':>5} " + " ".join(f"{n:>13}" for n in cols))
    for d in a.dims:
        r = bench(a.batch, a.seq, d, a.rounds, a.warmup, a.inner, not a.no_complextorch)
        cells = [f"{r[n]:>12.2f}x" if n in r else f"{'n/a':>13}" for n in cols]
        print(f"{d:>5} " + " ".join(cells))
    print(
        "# split+len: variable lengths, vs real nn.LSTM(2d) through packed sequences; "
        "gru-split: vs real nn.GRU(2d)"
    )


if __name__ == "__main__":
    main()
