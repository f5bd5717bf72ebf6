"""Forward+backward time of the whitening batch, instance and group norms against the real
layers on the same number of real values, complextorch's and torchcvnn's batch norms and
cplxnet's own earlier BatchNorm1d, side by side in one process (the harness
``benchmarks/harness.py``: interleaved rounds, median of per-round ratios).

    python benchmarks/norms.py --threads 1                  # the table
    python benchmarks/norms.py --threads 1 --out benchmarks/RESULTS.md
    python benchmarks/norms.py --quick                      # tiny shapes: every row runs

Shapes: ``BatchNorm1d`` on ``(32, C, 128)`` (the layers.py row), the 2-D layers on
``(16, C, 32, 32)``, ``BatchNorm3d`` on ``(8, C, 8, 16, 16)``; the real baselines have ``2C``
channels on the same spatial size (``nn.BatchNorm2d(2C)`` on ``(16, 2C, 32, 32)``: as many real
values as the complex input has real and imaginary parts). All in training mode.

"cplxnet at <rev>" is the ``batch_norm`` of ``cplxnet/functional/norm.py`` at git revision
``--before`` (default ``af1ba7e``, the grouped-layout BatchNorm1d that copied the input into
contiguous parts), loaded from git into this process so that it runs on the same data; the row
is left out when git or the revision is missing. torchcvnn is optional (``pip install --no-deps
torchcvnn``; it is no dependency of cplxnet).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from malloc_env import reexec_with_malloc_settings  # noqa: E402

if __name__ == "__main__":
    reexec_with_malloc_settings()

_HERE = os.path.dirname(os.path.abspath(__file__))

import harness  # noqa: E402  (benchmarks/ is on the path: see malloc_env above)
import torch  # noqa: E402
from torch import nn  # noqa: E402

import cplxnet  # noqa: E402
from cplxnet import nn as cnn  # noqa: E402

Case, Config, cinput, rinput, fwd_bwd = (
    harness.Case, harness.Config, harness.cinput, harness.rinput, harness.fwd_bwd
)  # fmt: skip

try:
    import complextorch.nn as ctnn
except ImportError:  # pragma: no cover
    ctnn = None
try:
    import torchcvnn.nn as tcnn
except ImportError:  # pragma: no cover
    tcnn = None

BEFORE = "af1ba7e"


def load_batch_norm_at(rev: str):
    """``batch_norm`` of ``cplxnet/functional/norm.py`` at git revision ``rev``, executed as a
    module of the package ``cplxnet.functional`` (its relative imports resolve there); None when
    git or the revision is unavailable."""
    root = os.path.dirname(_HERE)
    try:
        src = subprocess.run(
            ["git", "show", f"{rev}:cplxnet/functional/norm.py"],
            cwd=root, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    mod = types.ModuleType(f"cplxnet.functional.norm_at_{rev}")
    mod.__package__ = "cplxnet.functional"
    exec(compile(src, f"norm.py@{rev}", "exec"), mod.__dict__)  # noqa: S102
    return getattr(mod, "batch_norm", None)


class _Functional(nn.Module):
    """A batch norm module's parameters and buffers run through another ``batch_norm``."""

    def __init__(self, module: nn.Module, fn) -> None:
        super().__init__()
        self.m, self.fn = module, fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.m
        rm, rc = m.running_mean.clone(), m.running_cov.clone()
        return self.fn(x, rm, rc, m.weight, m.bias, True, 0.1, m.eps)


def _others(case: Case, name: str, shape: tuple, cfg: Config, *args) -> Case:
    """complextorch's and torchcvnn's layer ``name`` (when they have it) on the complex shape,
    built from ``args`` (default: the channel count)."""
    for label, lib in (("complextorch", ctnn), ("torchcvnn", tcnn)):
        if lib is not None and hasattr(lib, name):
            layer = getattr(lib, name)(*(args or (shape[1],)))
            case.baselines[f"{label} {name}"] = fwd_bwd(layer, cinput(cfg, *shape))
    return case


def _batch_norm_case(cls, real, name, shape, cfg, before):
    n, c, *rest = shape
    m = cls(c)
    base = {f"real nn.{name}(2C)": fwd_bwd(real(2 * c), rinput(cfg, n, 2 * c, *rest))}
    case = _others(Case(fwd_bwd(m, cinput(cfg, *shape)), base), name, shape, cfg)
    if before is not None and cls is cnn.BatchNorm1d:
        case.baselines[f"cplxnet at {BEFORE}"] = fwd_bwd(
            _Functional(m, before), cinput(cfg, *shape)
        )
    return case


def rows(cfg: Config, before) -> dict:
    """The rows for shapes scaled by ``cfg`` (``cfg.seq`` is the 1-D length)."""
    s = 32 if cfg.seq >= 128 else 4
    out = {}

    def _row(name: str):
        def deco(fn):
            out[name] = fn
            return fn

        return deco

    @_row("BatchNorm1d (B, C, L)")
    def _bn1(d, cfg):
        shape = (cfg.batch, d, cfg.seq)
        return _batch_norm_case(cnn.BatchNorm1d, nn.BatchNorm1d, "BatchNorm1d", shape, cfg, before)

    @_row("BatchNorm2d (N, C, H, W)")
    def _bn2(d, cfg):
        shape = (cfg.batch // 2, d, s, s)
        return _batch_norm_case(cnn.BatchNorm2d, nn.BatchNorm2d, "BatchNorm2d", shape, cfg, None)

    @_row("BatchNorm2d channels-last (N, C, H, W)")
    def _bn2_cl(d, cfg):
        n, cl = cfg.batch // 2, torch.channels_last
        x = cinput(cfg, n, d, s, s).detach().contiguous(memory_format=cl).requires_grad_()
        xr = rinput(cfg, n, 2 * d, s, s)
        xr_cl = xr.detach().contiguous(memory_format=cl).requires_grad_()
        base = {
            "real nn.BatchNorm2d(2C), channels-last": fwd_bwd(nn.BatchNorm2d(2 * d), xr_cl),
            "real nn.BatchNorm2d(2C), contiguous": fwd_bwd(nn.BatchNorm2d(2 * d), xr),
        }
        return Case(fwd_bwd(cnn.BatchNorm2d(d), x), base)

    @_row("BatchNorm3d (N, C, D, H, W)")
    def _bn3(d, cfg):
        shape = (cfg.batch // 4, d, s // 4, s // 2, s // 2)
        return _batch_norm_case(cnn.BatchNorm3d, nn.BatchNorm3d, "BatchNorm3d", shape, cfg, None)

    @_row("GroupNorm(8, C) (N, C, H, W)")
    def _gn(d, cfg):
        n = cfg.batch // 2
        x, xr = cinput(cfg, n, d, s, s), rinput(cfg, n, 2 * d, s, s)
        base = {
            "real nn.GroupNorm(8, 2C)": fwd_bwd(nn.GroupNorm(8, 2 * d), xr),
            "real nn.BatchNorm2d(2C)": fwd_bwd(nn.BatchNorm2d(2 * d), xr),
        }
        return _others(Case(fwd_bwd(cnn.GroupNorm(8, d), x), base), "GroupNorm", x.shape, cfg, 8, d)

    @_row("InstanceNorm2d (N, C, H, W)")
    def _in(d, cfg):
        n = cfg.batch // 2
        x, xr = cinput(cfg, n, d, s, s), rinput(cfg, n, 2 * d, s, s)
        base = {
            "real nn.InstanceNorm2d(2C)": fwd_bwd(nn.InstanceNorm2d(2 * d), xr),
            "real nn.BatchNorm2d(2C)": fwd_bwd(nn.BatchNorm2d(2 * d), xr),
        }
        return Case(fwd_bwd(cnn.InstanceNorm2d(d), x), base)

    return out


SECTION = "norms.py: whitening batch, instance and group norms"


def run(cfg: Config, before_rev: str, only=None, log=print) -> str:
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(0)
    before = load_batch_norm_at(before_rev) if before_rev else None
    table = rows(cfg, before)
    start = harness.loadavg()
    one_d = {k: v for k, v in table.items() if k.startswith("BatchNorm1d")}
    grid = {k: v for k, v in table.items() if not k.startswith("BatchNorm1d")}
    dims_1d = (256,) if cfg.seq >= 128 else (8,)
    dims_grid = (64,) if cfg.seq >= 128 else (8,)
    lines = [
        f"torch {torch.__version__}, cplxnet {cplxnet.__version__}, "
        f"{torch.get_num_threads()} thread(s), {cfg.dtype}, training mode, median of "
        f"{cfg.rounds} interleaved rounds (forward + backward) after {cfg.warmup} warm-up calls, "
        f"ratio = median of per-round ratios, MALLOC_MMAP_THRESHOLD_="
        f"{os.environ.get('MALLOC_MMAP_THRESHOLD_')}",
        "",
        *harness.run_rows(one_d, cfg, only, log, dims=dims_1d, column="C"),
        *harness.run_rows(grid, cfg, only, log, dims=dims_grid, column="C")[2:],
        "",
        f"Load average (1/5/15 min) before: {start}; after: {harness.loadavg()}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="write the table as the 'norms.py' section of this markdown file")
    p.add_argument("--quick", action="store_true", help="tiny shapes and 3 rounds (smoke test)")
    p.add_argument("--rounds", type=int)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--before", default=BEFORE, help="git revision of the earlier BatchNorm1d")
    p.add_argument("--only", nargs="+", help="row names to run")
    p.add_argument("--no-reexec", action="store_true", help="do not re-exec with malloc settings")
    a = p.parse_args(argv)
    cfg = Config(threads=a.threads, rounds=15)
    if a.quick:
        cfg = Config(batch=4, seq=8, rounds=3, warmup=1, threads=a.threads, min_time=0.0)
    if a.rounds:
        cfg.rounds = a.rounds
    table = run(cfg, a.before, a.only)
    print()
    print(table)
    if a.out:
        harness.write_section(a.out, SECTION, table)


if __name__ == "__main__":
    main()
