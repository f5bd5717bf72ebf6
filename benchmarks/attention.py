"""Benchmark: complex attention kernel (forward + backward) against real and naive baselines.

Rows (per model width d, complex head width Dh = 64, H = d / 64 heads):

* ``cplxnet``      -- :func:`cplxnet.functional.scaled_dot_product_attention` (complex64, packed
  into one fused real SDPA call);
* ``real-2Dh``     -- torch's real ``scaled_dot_product_attention`` with head width ``2 Dh``
  (float32): the target, same real FLOPs;
* ``naive``        -- explicit complex matmuls: ``softmax(Re(q k^H) s) v``;
* ``complextorch`` -- ``complextorch.nn.ScaledDotProductAttention(softmax_on="real")`` (same
  math, no masks), if importable.

Conventions (``shared/notes/performance.md``): glibc allocator thresholds set (the script
re-executes itself with them), 2 threads, warm-up, the variants interleaved round by round in a
shuffled order, and the reported number is the median over rounds of each variant's time divided
by the ``real-2Dh`` time of the same round. Defaults: batch 32, sequence 128, d 256 and 512.

Usage: ``python benchmarks/attention.py [--batch 32 --seq 128 --dims 256 512 --rounds 15]``;
``--tiny`` runs a seconds-long smoke setting.
"""

from __future__ import annotations

import argparse
import math
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
import torch.nn.functional as F  # noqa: E402

import cplxnet.functional as CF  # noqa: E402


def _naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    s = 1.0 / math.sqrt(q.shape[-1])
    w = torch.softmax((q @ k.conj().transpose(-2, -1)).real * s, dim=-1)
    return w.to(v.dtype) @ v


def _variants(batch: int, seq: int, d: int, dh: int) -> dict[str, Callable[[], None]]:
    heads = d // dh
    shape = (batch, heads, seq)

    def leaf(dtype: torch.dtype, width: int) -> list[torch.Tensor]:
        return [torch.randn(*shape, width, dtype=dtype, requires_grad=True) for _ in range(3)]

    cq = leaf(torch.complex64, dh)  # (B, H, L, Dh) complex
    rq = leaf(torch.float32, 2 * dh)  # (B, H, L, 2Dh) real
    g_c = torch.randn(*shape, dh, dtype=torch.complex64)
    g_r = torch.randn(*shape, 2 * dh)

    keep = torch.ones(batch, 1, 1, seq, dtype=torch.bool)  # key padding: True = may attend
    keep[: batch // 2, ..., seq - seq // 4 :] = False

    def step(
        fn: Callable[..., torch.Tensor], inputs: list[torch.Tensor], grad: torch.Tensor, **kw
    ) -> Callable[[], None]:
        def run() -> None:
            for t in inputs:
                t.grad = None
            fn(*inputs, **kw).backward(grad)

        return run

    out = {
        "cplxnet": step(CF.scaled_dot_product_attention, cq, g_c),
        "real-2Dh": step(F.scaled_dot_product_attention, rq, g_r),
        "naive": step(_naive, cq, g_c),
        "cplxnet+pad": step(CF.scaled_dot_product_attention, cq, g_c, attn_mask=keep),
        "real-2Dh+pad": step(F.scaled_dot_product_attention, rq, g_r, attn_mask=keep),
    }
    try:
        from complextorch.nn import ScaledDotProductAttention

        ct = ScaledDotProductAttention(math.sqrt(dh), attn_dropout=0.0, softmax_on="real")
        # check it computes the same function before timing it
        with torch.no_grad():
            ref = CF.scaled_dot_product_attention(*cq)
            torch.testing.assert_close(ct(*cq), ref, atol=1e-4, rtol=1e-4)
        out["complextorch"] = step(ct, cq, g_c)
    except Exception as exc:  # pragma: no cover - optional baseline
        print(f"complextorch baseline skipped: {exc}", file=sys.stderr)
    return out


def bench(
    batch: int, seq: int, d: int, dh: int, rounds: int, warmup: int, inner: int
) -> dict[str, float]:
    variants = _variants(batch, seq, d, dh)
    for _ in range(warmup):
        for run in variants.values():
            run()
    ratios: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for _ in range(rounds):
        random.shuffle(names)
        times = {}
        for name in names:
            t0 = time.perf_counter()
            for _ in range(inner):
                variants[name]()
            times[name] = (time.perf_counter() - t0) / inner
        for name in variants:
            base = "real-2Dh+pad" if name.endswith("+pad") else "real-2Dh"
            ratios[name].append(times[name] / times[base])
    return {name: statistics.median(r) for name, r in ratios.items()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--dims", type=int, nargs="+", default=[256, 512])
    p.add_argument("--head", type=int, default=64, help="complex head width Dh")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--inner", type=int, default=1, help="calls per timed block")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tiny", action="store_true", help="smoke setting (batch 2, seq 16, d 64)")
    a = p.parse_args(argv)
    if a.tiny:
        a.batch, a.seq, a.dims, a.head, a.rounds, a.warmup, a.inner = 2, 16, [64], 16, 5, 2, 5
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    random.seed(0)
    print(
        f"# attention fwd+bwd, batch {a.batch}, seq {a.seq}, complex head {a.head}, "
        f"{a.threads} threads, median of {a.rounds} per-round ratios to real SDPA "
        f"(head {2 * a.head})"
    )
    cols = ("cplxnet", "naive", "complextorch", "cplxnet+pad")
    print(f"{'d':>5} " + " ".join(f"{n:>13}" for n in cols))
    for d in a.dims:
        r = bench(a.batch, a.seq, d, a.head, a.rounds, a.warmup, a.inner)
        cells = [f"{r[n]:>12.2f}x" if n in r else f"{'n/a':>13}" for n in cols]
        print(f"{d:>5} " + " ".join(cells))
    print("# cplxnet+pad: with a key-padding bool mask, relative to real SDPA with the same mask")


if __name__ == "__main__":
    main()
