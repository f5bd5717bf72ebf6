"""The timing harness of the layer benchmarks (``layers.py``, ``grid_layers.py``,
``signal_layers.py``, ``norms.py``, ``models.py``, ``device_check.py``): a row is a function
``(d, cfg) -> Case`` holding one step of ours and one per baseline; :func:`measure` runs the
variants in interleaved rounds and reports the median of the per-round ratios; :func:`run_rows`
makes the markdown table and :func:`write_section` puts it into a results file, one section per
script."""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

import cplxnet

try:  # complextorch is a runtime dependency, but keep the harness usable without it
    import complextorch.nn as ctnn
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
    rnn_seq: int = 32  # sequence of the recurrent rows (cost is linear in it, ratios are not)
    rnn_complextorch: bool = True
    rnn_slow_rounds: int = 5  # rounds of the row holding complextorch's Python-loop LSTM


@dataclass
class Case:
    """One row: the step of ours, the steps of its baselines, and optional overrides (rounds for
    expensive rows, a note printed under the table)."""

    ours: Step
    baselines: dict[str, Step] = field(default_factory=dict)
    label: str = "cplxnet"
    rounds: int | None = None
    note: str = ""


def registry(rows: dict[str, Callable[[int, Config], Case]]) -> Callable[[str], Callable]:
    """The ``@row(name)`` decorator of a script: it registers a function ``(d, cfg) -> Case``
    in ``rows`` under ``name``."""

    def row(name: str):
        def deco(fn):
            rows[name] = fn
            return fn

        return deco

    return row


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


def _time(step: Step, reps: int) -> float:
    """Seconds per call of ``step`` (mean of ``reps`` calls). On a CUDA default device
    (``with torch.device("cuda")``, as ``benchmarks/device_check.py`` runs the rows) the calls
    are timed with CUDA events between two ``torch.cuda.synchronize()``."""
    if torch.get_default_device().type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(reps):
            step()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3 / reps
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
    for r in range(case.rounds or cfg.rounds):
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


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:  # pragma: no cover - not Linux
        return "n/a"


def write_section(path: str, title: str, body: str) -> None:
    """Put ``## title`` + ``body`` into the markdown file ``path``, replacing an earlier section of
    that title and keeping the others (each benchmark script owns one section)."""
    text = "# Benchmark results\n"
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    parts = text.split("\n## ")
    head, sections = parts[0], parts[1:]
    new = f"{title}\n\n{body.strip()}\n"
    for i, sec in enumerate(sections):
        if sec.split("\n", 1)[0].strip() == title:
            sections[i] = new
            break
    else:
        sections.append(new)
    out = head.rstrip() + "\n\n" + "\n".join("## " + s.rstrip() + "\n" for s in sections)
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(out)


def run_rows(
    rows: dict[str, Callable[[int, Config], Case]],
    cfg: Config,
    only: list[str] | None = None,
    log=print,
    dims: tuple | None = None,
    column: str = "d",
) -> list[str]:
    """Markdown table lines of ``rows`` (each at every ``dims`` value), with notes below."""
    lines = [
        f"| layer | {column} | baseline | ours / baseline | ours ms | baseline ms |",
        "|---|---:|---|---:|---:|---:|",
    ]
    notes: dict[str, str] = {}
    for name, build in rows.items():
        if only and name not in only:
            continue
        for d in dims or cfg.dims:
            torch.manual_seed(0)
            case = build(d, cfg)
            if case.note:
                notes[name] = case.note + (f"; {case.rounds} rounds" if case.rounds else "")
            for base, ratio, t_ours, t_base in measure(case, cfg):
                line = f"| {name} | {d} | {base} | {ratio:.2f}x | {t_ours:.2f} | {t_base:.2f} |"
                lines.append(line)
                log(line)
    if notes:
        lines.append("")
        lines.extend(f"- {k}: {v}" for k, v in notes.items())
    return lines


def one_thread_main(
    argv: list[str] | None, *, doc: str, rows: dict, section: str, shapes: str
) -> None:
    """The command line of the scripts timed at one thread (``grid_layers.py``,
    ``signal_layers.py``):
    ``--out``, ``--quick``, ``--rounds``, ``--channels``, ``--only``; ``shapes`` describes the
    inputs in the table's header."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--out", help="write the table as a section of this markdown file")
    p.add_argument("--quick", action="store_true", help="tiny shapes, 2 rounds (smoke test)")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--channels", type=int, default=32)
    p.add_argument("--only", nargs="+", help="row names to run")
    a = p.parse_args(argv)
    unknown = set(a.only or ()) - set(rows)
    if unknown:
        p.error(f"unknown rows {sorted(unknown)}; available: {list(rows)}")
    cfg = Config(threads=1, rounds=a.rounds, dims=(a.channels,), min_time=0.05)
    if a.quick:
        cfg = Config(threads=1, rounds=2, dims=(2,), warmup=1, min_time=0.0, seq=8)
    torch.set_num_threads(1)
    before = loadavg()
    lines = [
        f"torch {torch.__version__}, 1 thread, {cfg.dtype}, forward + backward, median of "
        f"{cfg.rounds} interleaved rounds of per-round ratios (ours / baseline; < 1: ours is "
        f"faster); {shapes} "
        f"MALLOC_MMAP_THRESHOLD_={os.environ.get('MALLOC_MMAP_THRESHOLD_')}.",
        "",
        *run_rows(rows, cfg, a.only, print, column="C"),
        "",
        f"Load average (1/5/15 min) before: {before}; after: {loadavg()}.",
    ]
    table = "\n".join(lines) + "\n"
    print(table)
    if a.out:
        write_section(a.out, section, table)
