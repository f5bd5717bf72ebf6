"""Time and peak memory of the relative encodings against naive (n, n, d) formulations.

For Shaw, Transformer-XL and DeBERTa this compares the encodings of :mod:`cplxnet.encodings`
(which multiply ``q`` by the few relative embeddings and gather the result into ``(n, n)``)
with the textbook formulation that first materialises one embedding per (query, key) pair, an
``(n, n, d)`` tensor, and contracts it with ``q``. Both compute the same numbers (checked at the
end of every case with n <= 256). T5 is left out: its bias has no feature dimension
(``(H, n, n)`` is both the output and the naive form).

Setting: one sequence (B = 1), a complex model with d_model = 128 complex features and 4 heads,
so packed real head width P = 64; float32; forward + backward of the logits bias (and, for Shaw,
of the value term on the softmax of those logits) with random upstream gradients.

How memory is measured (CPU): every (scheme, implementation, n) runs in a **fresh subprocess**.
After imports, input creation and a warm-up call on 8 tokens, the worker reads its current resident
set size (RSS, from ``/proc/self/statm``), runs forward + backward once, and reads the process's
high-water RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``). The reported peak is the
difference: the extra resident memory the call needed at its worst moment, including allocator
overhead and autograd buffers, which is what a user's machine has to provide. Caveat: ``ru_maxrss``
is a high-water mark of the whole process; if start-up had already touched more memory than the
call adds, the difference under-reports (the worker flags this with ``*``). Times are the median of
``--repeats`` further runs in the same worker (after the measured run), with
``torch.set_num_threads(1)``; on a shared machine expect noise of tens of percent.

Naive cases whose (n, n, d) tensors would need more than ``--max-naive-gb`` (estimated as
two such float32 tensors: activation and gradient) are skipped and reported as such.

Model mode (``--model``): the peak memory of one **training step** (forward, cross-entropy,
backward, Adam step) of the complex Transformer classifier of :mod:`models` (1 layer, the
d_model and heads above, feed-forward 256, batch 1, ids of length n) with each relative encoding
(shaw, xl, t5, deberta, rotary, and none as the baseline), and, for shaw/xl/deberta, with the
encoding's ``logits_bias`` (and Shaw's ``value_term``) replaced by the naive (n, n, d) forms
above (:func:`naive_bias`, :func:`naive_values`), same fresh-process method (a warm-up step on 8
tokens first, which also allocates Adam's state).

Usage::

    python benchmarks/relative_memory.py                 # n = 128, 512, 2048
    python benchmarks/relative_memory.py --sizes 128     # quick check
    python benchmarks/relative_memory.py --model --sizes 512 2048 --out benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

D_MODEL, HEADS = 128, 4  # complex features, heads -> complex head width 32, packed P = 64
P = 2 * D_MODEL // HEADS
SCHEMES = ("shaw", "xl", "deberta")
SHAW_K = 16  # Shaw's clipping distance
DEBERTA_K = 256  # DeBERTa's k (table of 2k rows); larger than n = 128 on purpose


def naive_elements(scheme: str, n: int) -> int:
    """Elements of the (n, n, d) tensors a naive formulation materialises (one copy)."""
    if scheme == "shaw":
        return 2 * n * n * P  # keys and values tables per pair
    if scheme == "xl":
        return n * n * (2 * D_MODEL + HEADS * P)  # R_{i-j} and W_{K,R} R_{i-j}
    return 2 * n * n * HEADS * P  # K_r and Q_r per pair and head


# ------------------------------------------------------------------------------ naive forms


def naive_bias(enc, q, k):
    """The textbook (n, n, d) versions, written as plainly as possible."""
    import torch

    from cplxnet.encodings._common import complex_sinusoid, sinusoid_frequencies

    Lq, Lk = q.shape[-2], k.shape[-2]
    scale = enc.content_scale(P)
    i = torch.arange(Lq)[:, None]
    j = torch.arange(Lk)[None, :]
    if enc.name == "shaw":
        kmax = enc.max_relative_position
        idx = (j - i).clamp(-kmax, kmax) + kmax
        a_k = enc.rel_keys[idx]  # (Lq, Lk, P)
        return torch.einsum("bhip,ijp->bhij", q, a_k) * scale
    if enc.name == "xl":
        r = (i - j).flatten()
        freqs = sinusoid_frequencies(enc.features, enc.base)
        R = complex_sinusoid(r, freqs, q.dtype).view(Lq, Lk, -1)  # (Lq, Lk, 2n)
        WR = (R @ enc.rel_proj.T).view(Lq, Lk, HEADS, P)  # (Lq, Lk, H, P)
        bd = torch.einsum("bhip,ijhp->bhij", q + enc.v[:, None, :], WR)
        c = torch.einsum("hp,bhjp->bhj", enc.u, k)[:, :, None, :]
        return (bd + c) * scale
    c2p_idx, p2c_idx = enc.indices(Lq, Lk)
    Kr = (enc.rel_embeddings[c2p_idx] @ enc.pos_key_proj.T).view(Lq, Lk, HEADS, P)
    Qr = enc.rel_embeddings[p2c_idx] @ enc.pos_query_proj.T + enc.pos_query_bias
    Qr = Qr.view(Lq, Lk, HEADS, P)
    c2p = torch.einsum("bhip,ijhp->bhij", q, Kr)
    p2c = torch.einsum("bhjp,ijhp->bhij", k, Qr)
    return (c2p + p2c) * scale


def naive_values(enc, w):
    import torch

    Lq, Lk = w.shape[-2:]
    kmax = enc.max_relative_position
    idx = (torch.arange(Lk)[None, :] - torch.arange(Lq)[:, None]).clamp(-kmax, kmax) + kmax
    a_v = enc.rel_values[idx]  # (Lq, Lk, P)
    return torch.einsum("bhij,ijp->bhip", w, a_v)


# ----------------------------------------------------------------------------------- worker


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def worker(scheme: str, impl: str, n: int, repeats: int) -> dict:
    import torch

    from cplxnet.encodings import create_encoding

    torch.set_num_threads(1)
    torch.manual_seed(0)
    opts = {"shaw": {"max_relative_position": SHAW_K}, "xl": {},
            "deberta": {"max_relative_positions": DEBERTA_K}}[scheme]  # fmt: skip
    enc = create_encoding(scheme, d_model=D_MODEL, num_heads=HEADS, dtype=torch.complex64, **opts)
    q = torch.randn(1, HEADS, n, P, requires_grad=True)
    k = torch.randn(1, HEADS, n, P, requires_grad=True)
    g1 = torch.randn(1, HEADS, n, n)
    g2 = torch.randn(1, HEADS, n, P)

    def run(which: str, q=q, k=k, g1=g1, g2=g2):
        bias = enc.logits_bias(q, k) if which == "ours" else naive_bias(enc, q, k)
        loss = (bias * g1).sum()
        if scheme == "shaw":
            w = torch.softmax(bias, -1)
            vt = enc.value_term(w) if which == "ours" else naive_values(enc, w)
            loss = loss + (vt * g2).sum()
        loss.backward()
        return bias.detach()

    # warm-up on 8 tokens: pays one-time costs (lazy kernels, thread pools) without raising the
    # high-water mark noticeably
    small = [torch.randn(1, HEADS, 8, P, requires_grad=True) for _ in range(2)]
    run(impl, *small, torch.randn(1, HEADS, 8, 8), torch.randn(1, HEADS, 8, P))
    before, high_before = rss_bytes(), maxrss_bytes()
    run(impl)
    high_after = maxrss_bytes()
    peak = high_after - before
    flagged = high_after <= high_before  # the call never exceeded the earlier high-water mark
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run(impl)
        times.append(time.perf_counter() - t0)
    if n <= 256:  # both forms agree (after the measurements, which it would disturb)
        assert torch.allclose(run("ours"), run("naive"), atol=1e-4, rtol=1e-4)
    return {"peak_mb": peak / 2**20, "flagged": flagged, "ms": 1e3 * statistics.median(times)}


MODEL_SCHEMES = ("none", "shaw", "xl", "t5", "deberta", "rotary")
NAIVE_SCHEMES = ("shaw", "xl", "deberta")


def model_worker(scheme: str, impl: str, n: int, repeats: int) -> dict:
    """Peak RSS of one training step of the Transformer classifier (see the module docstring)."""
    import torch
    import torch.nn.functional as F

    import cplxnet.models as models

    torch.set_num_threads(1)
    torch.manual_seed(0)
    opts = {"shaw": {"max_relative_position": SHAW_K},
            "deberta": {"max_relative_positions": DEBERTA_K}}.get(scheme, {})  # fmt: skip
    cfg = models.make_config(
        "transformer", vocab_size=1000, num_classes=2, d_model=D_MODEL, num_heads=HEADS,
        dim_feedforward=2 * D_MODEL, encoding=scheme, encoding_options=opts, max_len=max(n, 8),
        dropout=0.0, attention_dropout=0.0, sparse_embeddings=False,
    )  # fmt: skip
    model = models.build_model(cfg)
    enc = model.encoding
    if impl == "naive":
        enc.logits_bias = lambda q, k: naive_bias(enc, q, k)
        if scheme == "shaw":
            enc.value_term = lambda w: naive_values(enc, w)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(length: int) -> None:
        ids = torch.randint(1, 1000, (1, length))
        loss = F.cross_entropy(model(ids), torch.tensor([1]))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step(8)  # warm-up: lazy kernels, Adam's state
    before, high_before = rss_bytes(), maxrss_bytes()
    step(n)
    high_after = maxrss_bytes()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step(n)
        times.append(time.perf_counter() - t0)
    return {
        "peak_mb": (high_after - before) / 2**20,
        "flagged": high_after <= high_before,
        "ms": 1e3 * statistics.median(times),
    }


def model_table(sizes: list[int], repeats: int, max_naive_gb: float) -> str:
    lines = [
        f"Training step (forward, backward, Adam) of the complex Transformer classifier "
        f"(d_model={D_MODEL} complex, {HEADS} heads, ffn {2 * D_MODEL}, batch 1); peak = extra "
        f"RSS of the step in a fresh process; time = median of {repeats} steps, 1 thread. "
        "Naive: the encoding's bias (and Shaw's value term) computed through (n, n, d) tensors.",
        "",
        "| encoding | n | ours MB | ours ms | naive MB | naive ms | naive / ours memory |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for scheme in MODEL_SCHEMES:
        for n in sizes:
            row = {}
            for impl in ("ours", "naive"):
                if impl == "naive" and scheme not in NAIVE_SCHEMES:
                    row[impl] = "n/a"
                    continue
                est_gb = 2 * 4 * naive_elements(scheme, n) / 2**30 if impl == "naive" else 0
                if est_gb > max_naive_gb:
                    row[impl] = f"skipped (~{est_gb:.0f} GB)"
                    continue
                cmd = [sys.executable, os.path.abspath(__file__), "--model", "--worker", scheme,
                       impl, str(n), "--repeats", str(repeats)]  # fmt: skip
                res = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if res.returncode != 0:
                    row[impl] = f"failed ({res.stderr.strip().splitlines()[-1][:80]})"
                    continue
                row[impl] = json.loads(res.stdout.strip().splitlines()[-1])

            def cells(r):
                if isinstance(r, str):
                    return f"{r} | "
                return f"{r['peak_mb']:.1f}{'*' if r['flagged'] else ''} | {r['ms']:.0f}"

            o, v = row["ours"], row["naive"]
            ratio = (
                f"{v['peak_mb'] / max(o['peak_mb'], 0.1):.1f}x"
                if isinstance(o, dict) and isinstance(v, dict)
                else ""
            )
            line = f"| {scheme} | {n} | {cells(o)} | {cells(v)} | {ratio} |"
            print(line, flush=True)
            lines.append(line)
    lines += ["", "`*`: the step stayed below the process's earlier high-water mark."]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------- driver


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 512, 2048])
    ap.add_argument("--schemes", nargs="+", default=list(SCHEMES), choices=SCHEMES)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-naive-gb", type=float, default=3.0)
    ap.add_argument("--model", action="store_true", help="training step of the classifier")
    ap.add_argument("--out", help="--model: write the table as a section of this markdown file")
    ap.add_argument("--worker", nargs=3, metavar=("SCHEME", "IMPL", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        scheme, impl, n = args.worker
        run = model_worker if args.model else worker
        print(json.dumps(run(scheme, impl, int(n), args.repeats)))
        return
    if args.model:
        table = model_table(args.sizes, args.repeats, args.max_naive_gb)
        if args.out:
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from harness import write_section

            title = "relative_memory.py --model: peak memory of a Transformer training step"
            write_section(args.out, title, table)
        return

    print(
        f"complex d_model={D_MODEL}, heads={HEADS}, packed head width P={P}, float32, B=1, "
        f"forward+backward; peak = extra RSS in a fresh process; time = median of "
        f"{args.repeats}\n"
    )
    header = f"{'scheme':8} {'n':>5} | {'ours ms':>9} {'ours MB':>9} | {'naive ms':>9} "
    header += f"{'naive MB':>9} | {'mem ratio':>9}"
    print(header)
    print("-" * len(header))
    t_start = time.perf_counter()
    for scheme in args.schemes:
        for n in args.sizes:
            row = {}
            for impl in ("ours", "naive"):
                est_gb = 2 * 4 * naive_elements(scheme, n) / 2**30
                if impl == "naive" and est_gb > args.max_naive_gb:
                    row[impl] = None
                    row["skip"] = est_gb
                    continue
                cmd = [sys.executable, os.path.abspath(__file__), "--worker", scheme, impl, str(n),
                       "--repeats", str(args.repeats)]  # fmt: skip
                res = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if res.returncode != 0:
                    raise SystemExit(f"{scheme} {impl} n={n} failed:\n{res.stderr}")
                row[impl] = json.loads(res.stdout.strip().splitlines()[-1])

            skip = row.get("skip", 0.0)

            def fmt(r, skip=skip):
                if r is None:
                    return f"{'skipped':>9} {f'(~{skip:.0f} GB)':>9}"
                star = "*" if r["flagged"] else ""
                return f"{r['ms']:9.1f} {r['peak_mb']:8.1f}{star or ' '}"

            ratio = "" if row["naive"] is None else (
                f"{row['naive']['peak_mb'] / max(row['ours']['peak_mb'], 0.1):9.1f}"
            )  # fmt: skip
            print(f"{scheme:8} {n:5d} | {fmt(row['ours'])} | {fmt(row['naive'])} | {ratio}")
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s")
    if math.isfinite(args.max_naive_gb):
        print(f"naive cases estimated above {args.max_naive_gb} GB skipped (--max-naive-gb)")


if __name__ == "__main__":
    main()
