"""Forward+backward time of cplxnet layers relative to equal-FLOP real PyTorch layers and to
complextorch, measured side by side in one process.

    python benchmarks/layers.py                      # full run: d = 256 and 512, 25 rounds
    python benchmarks/layers.py --out results/layers.md
    python benchmarks/layers.py --quick              # tiny shapes: checks that every row runs
    python benchmarks/layers.py --only Linear Conv1d

Method (shared/notes/performance.md): batch 32, sequence 128, ``torch.set_num_threads(2)``,
glibc malloc thresholds raised (the script re-executes itself with ``MALLOC_MMAP_THRESHOLD_`` and
``MALLOC_TRIM_THRESHOLD_`` set; ``--no-reexec`` disables that), warm-up, then rounds in which every
variant of a row runs once in alternating order; a variant runs ``reps`` times per measurement so
that cheap element-wise layers are timed over >= ~20 ms. The table reports the median over rounds of
the per-round ratio ours / baseline (< 1 means ours is faster) next to median times.

Baselines: the real PyTorch layer with the same real FLOPs / element count (``nn.Linear(2d, 2d)``
for a complex ``Linear(d, d)``, ``nn.Conv1d(2C, 2C, 3)`` for a complex ``Conv1d(C, C, 3)``, a real
norm/activation over ``2d`` features for ``d`` complex ones) and complextorch's layer where it has
one.

Adding a row (attention, LSTM, ...): write one function decorated with ``@row(name)`` that takes
``(d, cfg)`` and returns ``Case(ours=step, baselines={label: step, ...})``; build steps with
``fwd_bwd(module_or_fn, *inputs)``::

    @row("MultiheadAttention")
    def _mha(d, cfg):
        x = cinput(cfg, cfg.batch, cfg.seq, d)
        ours = fwd_bwd(cnn.MultiheadAttention(d, d // 64), x)
        real = rinput(cfg, cfg.batch, cfg.seq, 2 * d)
        ref = nn.MultiheadAttention(2 * d, d // 64, batch_first=True)
        base = {"real nn.MultiheadAttention(2d)": fwd_bwd(lambda t: ref(t, t, t)[0], real)}
        return Case(ours, base)
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "1073741824", "MALLOC_TRIM_THRESHOLD_": "4294967296"}

_NEEDS_ENV = any(os.environ.get(k) != v for k, v in _MALLOC_ENV.items())
if __name__ == "__main__" and "--no-reexec" not in sys.argv and _NEEDS_ENV:
    os.environ.update(_MALLOC_ENV)
    os.execv(sys.executable, [sys.executable, *sys.argv])

import torch  # noqa: E402
from torch import nn  # noqa: E402

import cplxnet  # noqa: E402
from cplxnet import nn as cnn  # noqa: E402

try:  # complextorch is a runtime dependency, but keep the harness usable without it
    import complextorch.nn as ctnn  # noqa: E402
except ImportError:  # pragma: no cover
    ctnn = None

Step = Callable[[], None]


@dataclass
class Config:
    batch: int = 32
    seq: int = 128
    dims: tuple = (256, 512)
    rounds: int = 25
    warmup: int = 3
    threads: int = 2
    min_time: float = 0.02  # seconds per measurement (reps chosen to reach it)
    dtype: torch.dtype = torch.complex64


@dataclass
class Case:
    ours: Step
    baselines: dict[str, Step] = field(default_factory=dict)
    label: str = "cplxnet"


ROWS: dict[str, Callable[[int, Config], Case]] = {}


def row(name: str):
    """Register a benchmark row ``name``: a function ``(d, cfg) -> Case``."""

    def deco(fn):
        ROWS[name] = fn
        return fn

    return deco


def cinput(cfg: Config, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=cfg.dtype).requires_grad_()


def rinput(cfg: Config, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=cplxnet.real_dtype(cfg.dtype)).requires_grad_()


def _first_tensor(out):
    while isinstance(out, (tuple, list)):
        out = out[0]
    return out


def fwd_bwd(fn: Callable, *inputs, **kwargs) -> Step:
    """A step running ``fn(*inputs, **kwargs)`` forward and backward (fixed random cotangent on
    the first output tensor); gradients of parameters and inputs are reset each time."""
    params = list(fn.parameters()) if isinstance(fn, nn.Module) else []
    leaves = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad] + params
    out = _first_tensor(fn(*inputs, **kwargs))
    grad = torch.randn_like(out)

    def step() -> None:
        for t in leaves:
            t.grad = None
        y = _first_tensor(fn(*inputs, **kwargs))
        y.backward(grad)

    return step


# ------------------------------------------------------------------------------------------------
# rows: core layers
# ------------------------------------------------------------------------------------------------
@row("Linear")
def _linear(d: int, cfg: Config) -> Case:
    B, L = cfg.batch, cfg.seq
    base = {"real nn.Linear(2d, 2d)": fwd_bwd(nn.Linear(2 * d, 2 * d), rinput(cfg, B, L, 2 * d))}
    if ctnn is not None:
        base["complextorch Linear"] = fwd_bwd(ctnn.Linear(d, d), cinput(cfg, B, L, d))
    return Case(fwd_bwd(cnn.Linear(d, d), cinput(cfg, B, L, d)), base)


@row("Conv1d k=3")
def _conv1d(d: int, cfg: Config) -> Case:
    B, L = cfg.batch, cfg.seq
    real = nn.Conv1d(2 * d, 2 * d, 3, padding=1)
    base = {"real nn.Conv1d(2C, 2C)": fwd_bwd(real, rinput(cfg, B, 2 * d, L))}
    if ctnn is not None:
        base["complextorch Conv1d"] = fwd_bwd(ctnn.Conv1d(d, d, 3, padding=1), cinput(cfg, B, d, L))
    return Case(fwd_bwd(cnn.Conv1d(d, d, 3, padding=1), cinput(cfg, B, d, L)), base)


@row("Embedding V=20000")
def _embedding(d: int, cfg: Config) -> Case:
    V = 20000
    ids = torch.randint(0, V, (cfg.batch, cfg.seq))
    base = {"real nn.Embedding(V, 2d)": fwd_bwd(nn.Embedding(V, 2 * d), ids)}
    return Case(fwd_bwd(cnn.Embedding(V, d), ids), base)


def _elementwise(ours: nn.Module, real: nn.Module, ct: Callable[[], nn.Module] | None, d, cfg):
    B, L = cfg.batch, cfg.seq
    base = {f"real {type(real).__name__}(2d)": fwd_bwd(real, rinput(cfg, B, L, 2 * d))}
    if ct is not None and ctnn is not None:
        base[f"complextorch {type(ct()).__name__}"] = fwd_bwd(ct(), cinput(cfg, B, L, d))
    return Case(fwd_bwd(ours, cinput(cfg, B, L, d)), base)


@row("LayerNorm split")
def _ln_split(d: int, cfg: Config) -> Case:
    return _elementwise(cnn.LayerNorm(d), nn.LayerNorm(2 * d), None, d, cfg)


@row("LayerNorm whiten")
def _ln_whiten(d: int, cfg: Config) -> Case:
    ct = (lambda: ctnn.LayerNorm(d)) if ctnn is not None else None
    return _elementwise(cnn.LayerNorm(d, mode="whiten"), nn.LayerNorm(2 * d), ct, d, cfg)


@row("RMSNorm")
def _rms(d: int, cfg: Config) -> Case:
    ct = (lambda: ctnn.RMSNorm(d)) if ctnn is not None else None
    return _elementwise(cnn.RMSNorm(d), nn.RMSNorm(2 * d), ct, d, cfg)


@row("BatchNorm1d (B, C, L)")
def _bn(d: int, cfg: Config) -> Case:
    B, L = cfg.batch, cfg.seq
    base = {"real nn.BatchNorm1d(2C)": fwd_bwd(nn.BatchNorm1d(2 * d), rinput(cfg, B, 2 * d, L))}
    if ctnn is not None:
        base["complextorch BatchNorm1d"] = fwd_bwd(ctnn.BatchNorm1d(d), cinput(cfg, B, d, L))
    return Case(fwd_bwd(cnn.BatchNorm1d(d), cinput(cfg, B, d, L)), base)


@row("Dropout p=0.1")
def _dropout(d: int, cfg: Config) -> Case:
    ct = (lambda: ctnn.Dropout(0.1)) if ctnn is not None else None
    return _elementwise(cnn.Dropout(0.1), nn.Dropout(0.1), ct, d, cfg)


@row("CReLU")
def _crelu(d: int, cfg: Config) -> Case:
    ct = (lambda: ctnn.CReLU(inplace=False)) if ctnn is not None else None
    return _elementwise(cnn.CReLU(), nn.ReLU(), ct, d, cfg)


@row("SplitGELU")
def _gelu(d: int, cfg: Config) -> Case:
    ct = (lambda: ctnn.CGELU()) if ctnn is not None else None
    return _elementwise(cnn.SplitGELU(), nn.GELU(), ct, d, cfg)


@row("ModReLU")
def _modrelu(d: int, cfg: Config) -> Case:
    case = _elementwise(cnn.ModReLU(d, bias_init=-0.1), nn.ReLU(), None, d, cfg)
    if ctnn is not None:  # complextorch's per-feature modReLU is channel-first: (B, d, L)
        x = cinput(cfg, cfg.batch, d, cfg.seq)
        case.baselines["complextorch AdaptiveModReLU"] = fwd_bwd(ctnn.AdaptiveModReLU(d), x)
    return case


@row("Cardioid")
def _cardioid(d: int, cfg: Config) -> Case:
    ct = (lambda: ctnn.CVCardiod()) if ctnn is not None else None
    return _elementwise(cnn.Cardioid(), nn.ReLU(), ct, d, cfg)


@row("MeanPool (masked)")
def _meanpool(d: int, cfg: Config) -> Case:
    B, L = cfg.batch, cfg.seq
    mask = torch.arange(L)[None, :] >= torch.randint(1, L + 1, (B,))[:, None]
    pool = cnn.MeanPool()
    real = fwd_bwd(pool, rinput(cfg, B, L, 2 * d), mask)
    return Case(fwd_bwd(pool, cinput(cfg, B, L, d), mask), {"same pool on real (B, L, 2d)": real})


# ---- attention / LSTM rows: add below with @row(...) ----


# ------------------------------------------------------------------------------------------------
# harness
# ------------------------------------------------------------------------------------------------
def _time(step: Step, reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        step()
    return (time.perf_counter() - t0) / reps


def measure(case: Case, cfg: Config) -> list[tuple[str, float, float, float]]:
    """Rows ``(baseline, median ratio ours/baseline, ours ms, baseline ms)``."""
    variants = {case.label: case.ours, **case.baselines}
    reps = {}
    for k, f in variants.items():  # warm-up and choose repetitions per measurement
        t = min(_time(f, 1) for _ in range(max(cfg.warmup, 1)))
        reps[k] = max(1, math.ceil(cfg.min_time / max(t, 1e-6)))
    times: dict[str, list[float]] = {k: [] for k in variants}
    items = list(variants.items())
    for r in range(cfg.rounds):
        for k, f in items if r % 2 == 0 else items[::-1]:
            times[k].append(_time(f, reps[k]))
    ours = times[case.label]
    out = []
    for k in case.baselines:
        ratios = [a / b for a, b in zip(ours, times[k])]
        out.append(
            (
                k,
                statistics.median(ratios),
                statistics.median(ours) * 1e3,
                statistics.median(times[k]) * 1e3,
            )
        )
    return out


def run(cfg: Config, only: list[str] | None = None, log=print) -> str:
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(0)
    lines = [
        f"torch {torch.__version__}, cplxnet {cplxnet.__version__}, "
        f"{torch.get_num_threads()} threads, batch {cfg.batch}, sequence {cfg.seq}, {cfg.dtype}, "
        f"median of {cfg.rounds} interleaved rounds (forward + backward), "
        f"MALLOC_MMAP_THRESHOLD_={os.environ.get('MALLOC_MMAP_THRESHOLD_')}",
        "",
        "| layer | d | baseline | ours / baseline | ours ms | baseline ms |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for name, build in ROWS.items():
        if only and name not in only:
            continue
        for d in cfg.dims:
            torch.manual_seed(0)
            for base, ratio, t_ours, t_base in measure(build(d, cfg), cfg):
                line = f"| {name} | {d} | {base} | {ratio:.2f}x | {t_ours:.2f} | {t_base:.2f} |"
                lines.append(line)
                log(line)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="write the markdown table to this file")
    p.add_argument("--quick", action="store_true", help="tiny shapes and 3 rounds (smoke test)")
    p.add_argument("--rounds", type=int)
    p.add_argument("--dims", type=int, nargs="+")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", nargs="+", help="row names to run")
    p.add_argument("--no-reexec", action="store_true", help="do not re-exec with malloc settings")
    a = p.parse_args(argv)
    cfg = Config(threads=a.threads)
    if a.quick:
        cfg = Config(
            batch=2, seq=8, dims=(16,), rounds=3, warmup=1, threads=a.threads, min_time=0.0
        )
    if a.rounds:
        cfg.rounds = a.rounds
    if a.dims:
        cfg.dims = tuple(a.dims)
    unknown = set(a.only or ()) - set(ROWS)
    if unknown:
        p.error(f"unknown rows {sorted(unknown)}; available: {list(ROWS)}")
    table = run(cfg, a.only, log=print)
    print()
    print(table)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(table)


if __name__ == "__main__":
    main()
