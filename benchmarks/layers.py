"""Forward+backward time of cplxnet layers relative to equal-FLOP real PyTorch layers and to
complextorch, measured side by side in one process.

    python benchmarks/layers.py                      # d = 256 and 512, 25 rounds
    python benchmarks/layers.py --out benchmarks/RESULTS.md   # section of RESULTS.md
    python benchmarks/layers.py --quick              # tiny shapes: checks that every row runs
    python benchmarks/layers.py --only Linear Conv1d

Method: batch 32, sequence 128, ``torch.set_num_threads(2)``,
glibc malloc thresholds raised (the script re-executes itself with ``MALLOC_MMAP_THRESHOLD_`` and
``MALLOC_TRIM_THRESHOLD_`` set; ``--no-reexec`` disables that), warm-up, then rounds in which every
variant of a row runs once in alternating order; a variant runs ``reps`` times per measurement so
that cheap element-wise layers are timed over >= ~20 ms. The table reports the median over rounds of
the per-round ratio ours / baseline (< 1 means ours is faster) next to median times.

Baselines: the real PyTorch layer with the same real FLOPs / element count (``nn.Linear(2d, 2d)``
for a complex ``Linear(d, d)``, ``nn.Conv1d(2C, 2C, 3)`` for a complex ``Conv1d(C, C, 3)``, a real
norm/activation over ``2d`` features for ``d`` complex ones, real ``scaled_dot_product_attention``
with head width ``2 Dh`` for complex heads of width ``Dh = 64``, ``nn.LSTM(2d, 2d)`` for a complex
``LSTM(d, d)``) and complextorch's layer where it has one (its SDPA with ``softmax_on="real"``
is checked to compute the same function before it is timed; its MultiheadAttention block also
adds a residual and a LayerNorm; its LSTM is a Python loop over cells).

Recurrent rows run over ``rnn_seq = 32`` steps (not 128): one forward + backward of
``nn.LSTM(1024, 1024)`` over 128 steps takes 5-10 s on the shared 2-core machines, and the cost
per step, hence the ratio, does not depend on the length. The row with complextorch's LSTM
runs ``rnn_slow_rounds`` rounds.

The attention and recurrent layers have their rows here too.

Adding a row: write one function decorated with ``@row(name)`` that takes ``(d, cfg)`` and
returns ``Case(ours=step, baselines={label: step, ...})``; build steps with
``fwd_bwd(module_or_fn, *inputs)``. The harness (``Config``, ``Case``, ``fwd_bwd``,
``measure``, ``run_rows``, ``write_section``) is ``benchmarks/harness.py``, shared by the other
layer and model benchmarks.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from malloc_env import reexec_with_malloc_settings  # noqa: E402

if __name__ == "__main__":
    reexec_with_malloc_settings()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import cplxnet  # noqa: E402
import cplxnet.functional as CF  # noqa: E402
from cplxnet import nn as cnn  # noqa: E402

try:  # the composed implementations the fast paths replaced (kept as the tests' references)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    import reference_ops as previous  # noqa: E402
except ImportError:  # pragma: no cover - benchmarks run without the tests folder
    previous = None
finally:
    sys.path.pop(0)

from harness import (  # noqa: E402
    Case,
    Config,
    cinput,
    ctnn,
    fwd_bwd,
    loadavg,
    registry,
    rinput,
    run_rows,
    write_section,
)

ROWS: dict[str, Callable[[int, Config], Case]] = {}
row = registry(ROWS)


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


def _previous(case: Case, fn_name: str, module: nn.Module, x: torch.Tensor, *args) -> Case:
    """Add the row "previous implementation": ``reference_ops.<fn_name>(x, *args)`` with the
    parameters of ``module`` (the composed torch ops that autograd differentiates)."""
    if previous is not None:
        fn = getattr(previous, fn_name)
        params = list(module.parameters())

        class Previous(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.params = nn.ParameterList(params)

            def forward(self, t: torch.Tensor) -> torch.Tensor:
                return fn(t, *args)

        case.baselines["previous implementation (composed ops)"] = fwd_bwd(Previous(), x)
    return case


@row("LayerNorm split")
def _ln_split(d: int, cfg: Config) -> Case:
    m = cnn.LayerNorm(d)
    case = _elementwise(m, nn.LayerNorm(2 * d), None, d, cfg)
    x = cinput(cfg, cfg.batch, cfg.seq, d)
    return _previous(case, "reference_layer_norm", m, x, (d,), m.weight, m.bias, m.eps, "split")


@row("LayerNorm whiten")
def _ln_whiten(d: int, cfg: Config) -> Case:
    ct = (lambda: ctnn.LayerNorm(d)) if ctnn is not None else None
    m = cnn.LayerNorm(d, mode="whiten")
    case = _elementwise(m, nn.LayerNorm(2 * d), ct, d, cfg)
    x = cinput(cfg, cfg.batch, cfg.seq, d)
    return _previous(case, "reference_layer_norm", m, x, (d,), m.weight, m.bias, m.eps, "whiten")


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
    m = cnn.BatchNorm1d(d)
    case = Case(fwd_bwd(m, cinput(cfg, B, d, L)), base)
    args = (m.running_mean.clone(), m.running_cov.clone(), m.weight, m.bias, True, 0.1, m.eps)
    return _previous(case, "reference_batch_norm", m, cinput(cfg, B, d, L), *args)


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
    m = cnn.ModReLU(d, bias_init=-0.1)
    case = _elementwise(m, nn.ReLU(), None, d, cfg)
    if ctnn is not None:  # complextorch's per-feature modReLU is channel-first: (B, d, L)
        x = cinput(cfg, cfg.batch, d, cfg.seq)
        case.baselines["complextorch AdaptiveModReLU"] = fwd_bwd(ctnn.AdaptiveModReLU(d), x)
    return _previous(case, "reference_modrelu", m, cinput(cfg, cfg.batch, cfg.seq, d), m.bias)


@row("Cardioid")
def _cardioid(d: int, cfg: Config) -> Case:
    ct = (lambda: ctnn.CVCardiod()) if ctnn is not None else None
    case = _elementwise(cnn.Cardioid(), nn.ReLU(), ct, d, cfg)
    return _previous(case, "reference_cardioid", nn.Module(), cinput(cfg, cfg.batch, cfg.seq, d))


class _Compiled(nn.Module):
    """Runs ``module`` with the opt-in compiled kernels switched on (``on=True``) or off."""

    def __init__(self, module: nn.Module, on: bool) -> None:
        super().__init__()
        self.module, self.on = module, on

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        previous_setting = CF.use_compiled_kernels(self.on)
        try:
            return self.module(x)
        finally:
            CF.use_compiled_kernels(previous_setting)


def _compiled_row(m: nn.Module, d: int, cfg: Config, real: nn.Module | None = None) -> Case:
    B, L = cfg.batch, cfg.seq
    x = cinput(cfg, B, L, d)
    real = nn.ReLU() if real is None else real
    base = {
        f"real {type(real).__name__}(2d)": fwd_bwd(real, rinput(cfg, B, L, 2 * d)),
        "cplxnet eager (the default)": fwd_bwd(_Compiled(m, False), x),
    }
    return Case(fwd_bwd(_Compiled(m, True), x), base)


@row("ModReLU compiled")
def _modrelu_compiled(d: int, cfg: Config) -> Case:
    return _compiled_row(cnn.ModReLU(d, bias_init=-0.1), d, cfg)


@row("LayerNorm split compiled")
def _ln_split_compiled(d: int, cfg: Config) -> Case:
    return _compiled_row(cnn.LayerNorm(d), d, cfg, nn.LayerNorm(2 * d))


@row("LayerNorm whiten compiled")
def _ln_whiten_compiled(d: int, cfg: Config) -> Case:
    return _compiled_row(cnn.LayerNorm(d, mode="whiten"), d, cfg, nn.LayerNorm(2 * d))


@row("Cardioid compiled")
def _cardioid_compiled(d: int, cfg: Config) -> Case:
    return _compiled_row(cnn.Cardioid(), d, cfg)


@row("MeanPool (masked)")
def _meanpool(d: int, cfg: Config) -> Case:
    B, L = cfg.batch, cfg.seq
    mask = torch.arange(L)[None, :] >= torch.randint(1, L + 1, (B,))[:, None]
    pool = cnn.MeanPool()
    real = fwd_bwd(pool, rinput(cfg, B, L, 2 * d), mask)
    return Case(fwd_bwd(pool, cinput(cfg, B, L, d), mask), {"same pool on real (B, L, 2d)": real})


# ------------------------------------------------------------------------------------------------
# rows: attention (kernel and module)
# ------------------------------------------------------------------------------------------------
HEAD = 64  # complex head width Dh (the real baselines use 2 Dh)


def naive_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Attention with explicit complex matmuls: ``softmax(Re(q k^H) / sqrt(Dh)) v``."""
    w = torch.softmax((q @ k.conj().transpose(-2, -1)).real / math.sqrt(q.shape[-1]), dim=-1)
    return w.to(v.dtype) @ v


def _heads(cfg: Config, d: int, dtype_complex: bool) -> list[torch.Tensor]:
    H, dh = max(d // HEAD, 1), min(HEAD, d)
    shape = (cfg.batch, H, cfg.seq, dh if dtype_complex else 2 * dh)
    make = cinput if dtype_complex else rinput
    return [make(cfg, *shape) for _ in range(3)]


@row("SDPA kernel")
def _sdpa(d: int, cfg: Config) -> Case:
    cq, rq = _heads(cfg, d, True), _heads(cfg, d, False)
    base = {
        "real SDPA head 2Dh": fwd_bwd(F.scaled_dot_product_attention, *rq),
        "naive complex matmuls": fwd_bwd(naive_sdpa, *cq),
    }
    if ctnn is not None:
        ct = ctnn.ScaledDotProductAttention(math.sqrt(cq[0].shape[-1]), 0.0, softmax_on="real")
        with torch.no_grad():  # same function before timing it
            ref = CF.scaled_dot_product_attention(*cq)
            torch.testing.assert_close(ct(*cq), ref, atol=1e-4, rtol=1e-4)
        base["complextorch SDPA (real softmax)"] = fwd_bwd(ct, *cq)
    return Case(fwd_bwd(CF.scaled_dot_product_attention, *cq), base)


@row("SDPA kernel + key padding")
def _sdpa_pad(d: int, cfg: Config) -> Case:
    cq, rq = _heads(cfg, d, True), _heads(cfg, d, False)
    L = cfg.seq
    keep = torch.ones(cfg.batch, 1, 1, L, dtype=torch.bool)  # True = may attend
    keep[: cfg.batch // 2, ..., L - L // 4 :] = False
    real = fwd_bwd(F.scaled_dot_product_attention, *rq, attn_mask=keep)
    ours = fwd_bwd(CF.scaled_dot_product_attention, *cq, attn_mask=keep)
    return Case(ours, {"real SDPA head 2Dh, same mask": real})


@row("MultiheadAttention")
def _mha(d: int, cfg: Config) -> Case:
    B, L, H = cfg.batch, cfg.seq, max(d // HEAD, 1)
    ref = nn.MultiheadAttention(2 * d, H, batch_first=True)
    rx = rinput(cfg, B, L, 2 * d)
    base = {"real nn.MultiheadAttention(2d)": fwd_bwd(lambda t: ref(t, t, t)[0], rx)}
    if ctnn is not None:  # complextorch's block adds residual + LayerNorm: a little more work
        ct = ctnn.MultiheadAttention(H, d, d // H, d // H, dropout=0.0, softmax_on="real")
        base["complextorch MultiheadAttention (+res+LN)"] = fwd_bwd(
            lambda t: ct(t, t, t), cinput(cfg, B, L, d)
        )
    mha = cnn.MultiheadAttention(d, H, batch_first=True)
    return Case(fwd_bwd(lambda t: mha(t, need_weights=False)[0], cinput(cfg, B, L, d)), base)


# ------------------------------------------------------------------------------------------------
# rows: recurrent layers (sequence cfg.rnn_seq: a full-size LSTM step takes seconds on 2 cores)
# ------------------------------------------------------------------------------------------------
class PackedLSTM(nn.Module):
    """``torch.nn.LSTM`` through packed sequences: the real counterpart of ``lengths``."""

    def __init__(self, size: int, cls: type = nn.LSTM) -> None:
        super().__init__()
        self.rnn = cls(size, size, batch_first=True)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        p = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(p)
        return nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0]


def _rnn_inputs(d: int, cfg: Config) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    B, L = cfg.batch, cfg.rnn_seq
    lengths = torch.full((B,), L, dtype=torch.int64)
    lengths[: max(B // 4, 1)] = max(L // 2, 1)  # a quarter of the batch at half length
    return cinput(cfg, B, L, d), rinput(cfg, B, L, 2 * d), lengths


@row("LSTM split")
def _lstm_split(d: int, cfg: Config) -> Case:
    cx, rx, _ = _rnn_inputs(d, cfg)
    base = {
        "real nn.LSTM(2d, 2d)": fwd_bwd(nn.LSTM(2 * d, 2 * d, batch_first=True), rx),
        "native nn.LSTM(cfloat) (analytic)": fwd_bwd(
            nn.LSTM(d, d, batch_first=True, dtype=cfg.dtype), cx
        ),
    }
    ours = fwd_bwd(cnn.LSTM(d, d, batch_first=True, gate="split"), cx)
    return Case(ours, base, note=f"sequence {cfg.rnn_seq}")


@row("LSTM split, lengths")
def _lstm_len(d: int, cfg: Config) -> Case:
    cx, rx, lengths = _rnn_inputs(d, cfg)
    real = fwd_bwd(PackedLSTM(2 * d), rx, lengths)
    ours = fwd_bwd(cnn.LSTM(d, d, batch_first=True, gate="split"), cx, lengths=lengths)
    return Case(ours, {"real nn.LSTM(2d), packed": real}, note=f"sequence {cfg.rnn_seq}")


@row("LSTM analytic")
def _lstm_analytic(d: int, cfg: Config) -> Case:
    cx, rx, _ = _rnn_inputs(d, cfg)
    base = {"real nn.LSTM(2d, 2d)": fwd_bwd(nn.LSTM(2 * d, 2 * d, batch_first=True), rx)}
    if ctnn is not None and cfg.rnn_complextorch:  # a Python loop over cells: few rounds
        base["complextorch LSTM"] = fwd_bwd(ctnn.LSTM(d, d, batch_first=True), cx)
    ours = fwd_bwd(cnn.LSTM(d, d, batch_first=True, gate="analytic"), cx)
    rounds = min(cfg.rounds, cfg.rnn_slow_rounds)
    return Case(ours, base, rounds=rounds, note=f"sequence {cfg.rnn_seq}")


@row("GRU split")
def _gru(d: int, cfg: Config) -> Case:
    cx, rx, _ = _rnn_inputs(d, cfg)
    real = fwd_bwd(nn.GRU(2 * d, 2 * d, batch_first=True), rx)
    ours = fwd_bwd(cnn.GRU(d, d, batch_first=True), cx)
    return Case(ours, {"real nn.GRU(2d, 2d)": real}, note=f"sequence {cfg.rnn_seq}")


SECTION = "layers.py: layers against equal-FLOP real layers and complextorch"


def run(cfg: Config, only: list[str] | None = None, log=print) -> str:
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(0)
    before = loadavg()
    lines = [
        f"torch {torch.__version__}, cplxnet {cplxnet.__version__}, "
        f"{torch.get_num_threads()} threads, batch {cfg.batch}, sequence {cfg.seq}, {cfg.dtype}, "
        f"median of {cfg.rounds} interleaved rounds (forward + backward) after "
        f"{cfg.warmup} warm-up calls, ratio = median of per-round ratios, "
        f"MALLOC_MMAP_THRESHOLD_={os.environ.get('MALLOC_MMAP_THRESHOLD_')}",
        "",
        *run_rows(ROWS, cfg, only, log),
        "",
        f"Load average (1/5/15 min) before: {before}; after: {loadavg()}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="write the table as the 'layers.py' section of this markdown file")
    p.add_argument("--quick", action="store_true", help="tiny shapes and 3 rounds (smoke test)")
    p.add_argument("--rounds", type=int)
    p.add_argument("--dims", type=int, nargs="+")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", nargs="+", help="row names to run")
    p.add_argument("--no-complextorch-lstm", action="store_true", help="skip the slowest baseline")
    p.add_argument("--no-reexec", action="store_true", help="do not re-exec with malloc settings")
    a = p.parse_args(argv)
    cfg = Config(threads=a.threads)
    if a.quick:
        cfg = Config(
            batch=2, seq=8, dims=(16,), rounds=3, warmup=1, threads=a.threads, min_time=0.0,
            rnn_seq=8,
        )  # fmt: skip
    if a.rounds:
        cfg.rounds = a.rounds
    if a.dims:
        cfg.dims = tuple(a.dims)
    cfg.rnn_complextorch = not a.no_complextorch_lstm
    unknown = set(a.only or ()) - set(ROWS)
    if unknown:
        p.error(f"unknown rows {sorted(unknown)}; available: {list(ROWS)}")
    table = run(cfg, a.only, log=print)
    print()
    print(table)
    if a.out:
        write_section(a.out, SECTION, table)


if __name__ == "__main__":
    main()
