"""Training step of the zoo U-Net compiled with ``torch.compile`` (inductor) against eager.

    python benchmarks/compiled_unet.py                        # all rows, ~10 min on 2 busy cores
    python benchmarks/compiled_unet.py --out benchmarks/COMPILED_UNET.md
    python benchmarks/compiled_unet.py --steps 4 --only complex:crelu   # does it run

Setup of ``benchmarks/unet.py``: :func:`cplxnet.models.undersampled_fourier_pairs` (32 x 32
complex images, 4x undersampled, zero-filled input), batch 16, U-Net depth 2, base 8 complex
channels (the real twin: ``UNet(2, 2, 16, dtype=torch.float32)`` on ``as_channels`` of the
input), transposed-convolution upsampling, Adam lr 1e-3, :class:`cplxnet.nn.MSELoss`; one
training step = forward, loss, ``zero_grad``, backward, ``Adam.step`` (only the model is
compiled, as ``torch.compile(net)``: default backend inductor, default mode).

Rows: the complex U-Net and its real twin, each with ``activation="crelu"`` (a split
activation; the twin's restriction is ``nn.ReLU``) and ``"modrelu"`` (compiled, the complex
modReLU is the opaque operator ``cplxnet::activation`` of :mod:`cplxnet.functional.opaque`,
run eagerly with a ``torch.func.vjp`` backward; the twin's is the real ModReLU, composed ops).

Per row: an eager net and a compiled deep copy with the same weights, each with its own Adam,
fed the same batches in the same order. The first ``--check`` steps of both run first: their
losses' relative differences are reported per step (step 1 on the same weights; later steps
after the two Adams' updates, which amplify tiny gradient differences), and the relative
difference of all parameter gradients after step 1. The compiled net's first step (Dynamo
trace, AOT autograd, inductor codegen and C++ builds of forward and backward, plus the step
itself) is the compile time, cold: each row gets a fresh inductor cache directory and cleared
in-memory caches (what a user sees the first time; ``--warm-cache`` keeps torch's default
cache). Then the harness (``benchmarks/harness.py``, :func:`harness.measure`) warms both up and
times ``--steps`` rounds of one step each, alternating which goes first; reported: the median
step times and the median over rounds of the per-round ratio compiled / eager. One thread
(``torch.set_num_threads(1)``, ``OMP_NUM_THREADS=1``), glibc malloc thresholds raised (the
script re-executes itself with them).
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from malloc_env import reexec_with_malloc_settings  # noqa: E402

if __name__ == "__main__":
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the re-executed process
    reexec_with_malloc_settings()

import harness  # noqa: E402  (benchmarks/ is on the path: see malloc_env above)
import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from torch._inductor.utils import clear_inductor_caches  # noqa: E402

import cplxnet  # noqa: E402
from cplxnet.models import UNet, as_channels, from_channels, undersampled_fourier_pairs  # noqa: E402

ROWS = ("complex:crelu", "complex:modrelu", "real twin:crelu", "real twin:modrelu")


class Step:
    """One Adam training step of ``fn`` (the net or its compiled form; ``net`` owns the weights)
    on the next of ``batches``; the complex net sees the complex batch, the twin its channels."""

    def __init__(self, net: torch.nn.Module, fn, batches: list, lr: float) -> None:
        self.net, self.fn, self.batches = net, fn, batches
        self.twin = not next(net.parameters()).is_complex()
        self.opt = torch.optim.Adam(net.parameters(), lr=lr)
        self.loss_fn = cplxnet.nn.MSELoss()
        self.i = 0
        self.last = float("nan")
        net.train()

    def __call__(self) -> None:
        x, y = self.batches[self.i % len(self.batches)]
        self.i += 1
        out = from_channels(self.fn(as_channels(x))) if self.twin else self.fn(x)
        loss = self.loss_fn(out, y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.last = float(loss.detach())


def build(kind: str, activation: str, a: argparse.Namespace) -> torch.nn.Module:
    torch.manual_seed(a.seed)
    if kind == "complex":
        return UNet(1, 1, a.base, a.depth, activation=activation)
    return UNet(2, 2, 2 * a.base, a.depth, activation=activation, dtype=torch.float32)


def grad_difference(a: torch.nn.Module, b: torch.nn.Module) -> float:
    """``||g_b - g_a|| / ||g_a||`` over all parameter gradients of two nets of the same shape."""
    num = den = 0.0
    for p, q in zip(a.parameters(), b.parameters()):
        num += float((q.grad - p.grad).abs().pow(2).sum())
        den += float(p.grad.abs().pow(2).sum())
    return (num / den) ** 0.5


def run_row(name: str, a: argparse.Namespace, batches: list) -> tuple[str, str]:
    """The table line of row ``name`` (``kind:activation``) and a note (graph count)."""
    kind, activation = name.split(":")
    torch._dynamo.reset()
    net = build(kind, activation, a)
    twin = copy.deepcopy(net)
    compiled = torch.compile(twin)
    eager, comp = Step(net, net, batches, a.lr), Step(twin, compiled, batches, a.lr)
    graphs0 = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    diffs, grad_diff, first = [], float("nan"), []
    for k in range(a.check):
        eager()
        t0 = time.perf_counter()
        comp()
        first.append(time.perf_counter() - t0)
        if k == 0:
            grad_diff = grad_difference(net, twin)  # same weights, same batch
        diffs.append(abs(comp.last - eager.last) / abs(eager.last))
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs0
    cfg = harness.Config(rounds=a.steps, warmup=a.warmup, threads=1, min_time=0.0)
    case = harness.Case(comp, {"eager": eager}, label="compiled")
    _, ratio, t_comp, t_eager = harness.measure(case, cfg)[0]
    recompiled = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs0 - graphs
    line = (
        f"| {kind} | {activation} | {t_eager:.1f} | {t_comp:.1f} | {ratio:.2f}x | "
        f"{first[0]:.1f} | {', '.join(f'{d:.1e}' for d in diffs)} | {grad_diff:.1e} |"
    )
    note = (
        f"{name}: {graphs} compiled graph(s) in the first {a.check} steps"
        + (f", {recompiled} more during timing" if recompiled else "")
        + f"; compiled steps 1-{a.check}: {', '.join(f'{t:.2f}' for t in first)} s"
    )
    return line, note


def run_cold(name: str, a: argparse.Namespace, batches: list) -> tuple[str, str]:
    """:func:`run_row` with a fresh inductor cache directory and inductor's in-memory caches
    cleared (unless ``--warm-cache``): every row compiles from scratch."""
    if a.warm_cache:
        return run_row(name, a, batches)
    previous = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-cold-")
    clear_inductor_caches()
    try:
        return run_row(name, a, batches)
    finally:
        shutil.rmtree(os.environ["TORCHINDUCTOR_CACHE_DIR"], ignore_errors=True)
        if previous is None:
            del os.environ["TORCHINDUCTOR_CACHE_DIR"]
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=40, help="timed rounds (one step each)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps of each before timing")
    p.add_argument("--check", type=int, default=3, help="steps whose losses are compared")
    p.add_argument("--only", nargs="+", choices=ROWS, help="rows to run (default: all)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--base", type=int, default=8)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-seed", type=int, default=1)
    p.add_argument("--warm-cache", action="store_true", help="keep torch's inductor cache")
    p.add_argument("--out", help="also write the markdown to this file")
    p.add_argument("--no-reexec", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(a.data_seed)
    n = a.check + a.warmup + a.steps
    batches = [undersampled_fourier_pairs(a.batch, a.size, generator=g) for _ in range(n)]
    before = harness.loadavg()
    t_start = time.perf_counter()
    lines = [
        "| model | activation | eager ms/step | compiled ms/step | compiled / eager | "
        f"compile s | loss rel. diff, steps 1-{a.check} | grad rel. diff, step 1 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    notes, failed = [], []
    for name in a.only or ROWS:
        try:
            line, note = run_cold(name, a, batches)
        except Exception as e:  # noqa: BLE001 - a failing row is reported, the others still run
            msg = str(e).strip().splitlines()
            failed.append(f"{name}: {type(e).__name__}: {msg[0] if msg else ''}")
            print(failed[-1], flush=True)
            continue
        lines.append(line)
        notes.append(note)
        print(line, flush=True)
    minutes = (time.perf_counter() - t_start) / 60
    cache = (
        "warm inductor cache"
        if a.warm_cache
        else "cold: a fresh inductor cache directory and cleared in-memory caches per row"
    )
    text = "\n".join(
        [
            "# The zoo U-Net compiled with torch.compile against eager",
            "",
            f"`python benchmarks/compiled_unet.py --steps {a.steps}` on "
            f"{time.strftime('%Y-%m-%d')}, torch {torch.__version__}, 1 thread "
            f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}), "
            f"MALLOC_MMAP_THRESHOLD_={os.environ.get('MALLOC_MMAP_THRESHOLD_')}. "
            f"Training step of `UNet(1, 1, {a.base}, {a.depth})` (complex64) and its real twin "
            f"`UNet(2, 2, {2 * a.base}, {a.depth}, dtype=torch.float32)`, batch {a.batch} of "
            f"{a.size} x {a.size} undersampled-Fourier images, Adam lr {a.lr}, "
            "`cplxnet.nn.MSELoss`; `torch.compile(net)` (inductor, default mode) against the "
            "same weights eager.",
            "",
            *lines,
            "",
            f"- ms/step: medians over {a.steps} rounds of one step of each (order alternating), "
            f"after {a.check} checked and {a.warmup} warm-up steps; compiled / eager: median of "
            "the per-round ratios (< 1: compiled is faster).",
            f"- compile s: wall time of the compiled net's first training step, the step "
            f"included ({cache}).",
            "- loss rel. diff: |loss compiled - loss eager| / loss eager at each of the first "
            f"{a.check} steps (step 1: same weights; later steps after the two Adams' updates, "
            "which amplify small gradient differences: Adam's first steps move every weight by "
            "about lr whatever the gradient's size); grad rel. diff: ||g compiled - g eager|| / "
            "||g eager|| over all parameters after step 1.",
            *(f"- {n_}" for n_ in notes),
            *(f"- **failed** {f}" for f in failed),
            "",
            f"Load average (1/5/15 min) before: {before}; after: {harness.loadavg()}; "
            f"whole run {minutes:.1f} min.",
        ]
    )
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
