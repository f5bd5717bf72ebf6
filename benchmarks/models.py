"""Training-step time of the complex classifiers of :mod:`models` against their equal-FLOP real
twins and against the same architectures assembled from complextorch's layers; ``torch.compile``
against eager; micro rows (complex-order embedding, rotary); sentences per second of
``cplxnet train``.

    python benchmarks/models.py                         # everything (~15 min on 2 busy cores)
    python benchmarks/models.py --out benchmarks/RESULTS.md   # also write its RESULTS section
    python benchmarks/models.py --quick                 # tiny models, 3 rounds: every row runs
    python benchmarks/models.py --only steps micro      # parts: steps, compile, micro, cli,
                                                        #   profile, decoder, study

Method (the harness ``benchmarks/harness.py``): 2 threads,
glibc malloc thresholds raised (the script re-executes itself with them), each variant warmed up,
then rounds in which every variant runs once, in alternating order; reported: the median over
rounds of the per-round ratio and the median times.

**Training step** = what :func:`cplxnet.train.train_step` does: collate a batch of 32 MR sentences
(indices drawn at random from the bundled MR training split, so the lengths follow MR's length
distribution; every variant gets the same batch in the same round), forward, cross-entropy,
backward, ``Adam`` on the dense parameters and ``SparseAdam`` on the embedding tables
(``models.sparse_parameters``), ``zero_grad``. Models: the paper presets with the complex-order
encoding (FastText d 100; Kim CNN d 300, 100 filters of widths 3/4/5; biLSTM d 300, hidden 128;
Transformer 1 layer, d 256, ffn 512, 8 heads), vocabulary of MR's training split.

Baselines:

* **real twin x2**: ``models.real_twin(cfg, match="flops")`` (every width doubled: the same real
  multiply-adds in every dense layer, the same embedding reals);
* **complextorch-built**: our model with its body replaced by complextorch 2.1.1 layers:
  CNN -> ``complextorch.nn.Conv1d`` + ``CReLU``; LSTM -> ``complextorch.nn.LSTM`` (bidirectional,
  a Python loop over cells); Transformer -> ``complextorch.nn.TransformerEncoderLayer`` (ReLU
  feed-forward, ``softmax_on="real"``, its MultiheadAttention block with residual and whitening
  LayerNorm). complextorch has no token embedding (and no complex-order encoding), so the
  embedding stage (cplxnet's complex-order encoding), pooling, readout and head are ours in
  every variant. complextorch's LSTM has no lengths (it runs over the padded batch and its final
  states are those at the padded end) and its attention has no key-padding mask (it attends to
  padding): the complextorch-built models compute a slightly different function on padded
  batches, with the same shapes and FLOPs. FastText's body is a masked mean (no layer), so it has
  no complextorch row.

**Compile**: ``torch.compile`` (inductor, default mode) of the model as ``cplxnet train --compile``
does it (dense gradients for the tables: the sparse backward of packed complex tables does not
compile), warmed up on 6 batches of different lengths (a static and a dynamic-shape
compilation), against eager with sparse tables (the default trainer) and eager with dense tables.

**Micro rows** (forward + backward, batch 32, sequence 128): complex-order embedding (three
sparse lookups, amplitude x e^{i(freq pos + phase)}) against one real ``nn.Embedding`` lookup of
equal width in reals (2d, sparse) and cplxnet's complex ``Embedding``; rotary (``rotate_one`` of
the rotary encoding on complex heads) against one element-wise multiply of the same tensor by the
same table, one real multiply of the packed (.., 2Dh) view, and a real ``rotate_half``
implementation (GPT-NeoX / HF style, written here).

**Decoder** (the language-model study's model, :mod:`cplxnet.lm`): one training step of the
``decoder`` (preset ``lm-char`` widened to d 128 complex, 4 layers, 4 heads, feed-forward 512,
sinusoidal encoding) on a batch of 8 windows of 257 character ids of the MR stream (256 inputs,
256 next-token targets), AdamW; against its equal-FLOP real twin (d 256, feed-forward 1024) and
the same decoder with its layers replaced by complextorch's ``TransformerEncoder`` (as the
Transformer row; complextorch's attention has no causal mask, so it attends to later positions
as well: a different function with the same shapes and FLOPs as our masked attention computed
densely). Tokens per second = 2048 / step time.

**Study decoder** (``--only study``): the study's own size, preset ``lm-char`` (d 64 complex,
2 layers, 4 heads, feed-forward 256) against its equal-FLOP real twin (d 128, feed-forward 512),
with sinusoidal, rotary and complex-order on both sides, a batch of 8 windows of 256 inputs
(2048 tokens per step), AdamW; tokens per second of each side.

**cplxnet train**: the real command, ``cplxnet train --epochs 1 --threads 2`` (default preset,
bundled MR) in a subprocess; sentences per second = training sentences / epoch seconds (the
epoch's time from ``metrics.jsonl``; it includes scoring the dev split).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from malloc_env import reexec_with_malloc_settings  # noqa: E402

if __name__ == "__main__":
    reexec_with_malloc_settings()

_HERE = os.path.dirname(os.path.abspath(__file__))


import harness  # noqa: E402  (benchmarks/ is on the path: see malloc_env above)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

import cplxnet  # noqa: E402
import cplxnet.models as models  # noqa: E402
from cplxnet.data import DataSpec, prepare_data  # noqa: E402
from cplxnet.encodings import create_encoding  # noqa: E402
from cplxnet.train import train_step  # noqa: E402

Case, Config, cinput, rinput, fwd_bwd = (
    harness.Case, harness.Config, harness.cinput, harness.rinput, harness.fwd_bwd
)  # fmt: skip
loadavg, run_rows, write_section = harness.loadavg, harness.run_rows, harness.write_section

try:
    import complextorch.nn as ctnn
except ImportError:  # pragma: no cover
    ctnn = None

SECTION = "models.py: training steps, compile, micro rows, cplxnet train"
FAMILY_PRESETS = {
    "FastText": ("fasttext", {"encoding": "complex-order"}),
    "CNN": ("paper-cnn", {}),
    "LSTM": ("paper-lstm", {}),
    "Transformer": ("paper-transformer", {}),
}
TINY = {"d_model": 8, "num_filters": 4, "hidden_size": 4, "dim_feedforward": 16, "num_heads": 2}


# ------------------------------------------------------------------------------------------------
# data and training steps
# ------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Bench:
    cfg: Config
    data: object  # cplxnet.data.PreparedData
    batches: list[np.ndarray]
    tiny: bool = False


def load_bench(cfg: Config, n_batches: int, tiny: bool) -> Bench:
    data = prepare_data(DataSpec("mr"))
    rng = np.random.default_rng(0)
    n = len(data.train)
    batches = [rng.choice(n, cfg.batch, replace=False) for _ in range(n_batches)]
    return Bench(cfg, data, batches, tiny)


def model_config(bench: Bench, family: str, **overrides) -> models.ModelConfig:
    preset, extra = FAMILY_PRESETS[family]
    fields = {
        "vocab_size": len(bench.data.vocab),
        "num_classes": len(bench.data.labels),
        "padding_idx": cplxnet.data.PAD_ID,
        "max_len": int(bench.data.train.lengths().max()),
        "sparse_embeddings": True,  # sparse tables with SparseAdam, as `cplxnet train` trains
        **extra,
        **overrides,
    }
    if bench.tiny:
        names = {f.name for f in dataclasses.fields(models.CONFIG_CLASSES[family.lower()])}
        fields.update({k: v for k, v in TINY.items() if k in names})
    return models.preset_config(preset, **fields)


def optimizers(model: nn.Module) -> list[torch.optim.Optimizer]:
    """Adam on the dense parameters, SparseAdam on the sparse tables (as the trainer)."""
    sparse = [p for p in models.sparse_parameters(model) if p.requires_grad]
    ids = {id(p) for p in sparse}
    dense = [p for p in model.parameters() if p.requires_grad and id(p) not in ids]
    out: list[torch.optim.Optimizer] = [torch.optim.Adam(dense, lr=1e-3)]
    if sparse:
        out.append(torch.optim.SparseAdam(sparse, lr=1e-3))
    return out


class TrainStep:
    """A callable training step over ``bench.batches``; ``model_fn`` is what is called (the
    model or its compiled form), ``model`` owns the parameters."""

    def __init__(self, bench: Bench, model: nn.Module, model_fn=None) -> None:
        self.bench, self.model = bench, model
        self.fn = model if model_fn is None else model_fn  # no bool(): compiled modules lack len
        self.opts = optimizers(model)
        self.i = 0
        model.train()

    def __call__(self) -> None:
        batch = self.bench.batches[self.i % len(self.bench.batches)]
        self.i += 1
        train_step(self.fn, self.bench.data.train, batch, self.opts)

    def warm(self, n: int) -> TrainStep:
        """Run ``n`` steps on the last batches (not those of the rounds), then rewind."""
        for j in range(n):
            self.i = len(self.bench.batches) - 1 - j
            self()
        self.i = 0
        return self


# ------------------------------------------------------------------------------------------------
# complextorch-built bodies (swapped into our models: embedding, pooling, head stay ours)
# ------------------------------------------------------------------------------------------------
class CTLSTMBody(nn.Module):
    """complextorch's LSTM with the call signature of :class:`cplxnet.nn.LSTM`; it has no
    lengths: it runs over the whole padded batch."""

    def __init__(self, input_size: int, hidden_size: int, bidirectional: bool) -> None:
        super().__init__()
        self.rnn = ctnn.LSTM(input_size, hidden_size, batch_first=True, bidirectional=bidirectional)

    def forward(self, x: torch.Tensor, *, lengths: torch.Tensor):
        return self.rnn(x)


class CTEncoder(nn.Module):
    """complextorch's TransformerEncoder (post-norm blocks, no key-padding mask) with the call
    signature of :class:`cplxnet.nn.TransformerEncoder`."""

    def __init__(self, c: models.TransformerConfig) -> None:
        super().__init__()
        layer = ctnn.TransformerEncoderLayer(
            c.d_model,
            c.num_heads,
            c.dim_feedforward,
            dropout=c.dropout,
            activation="relu",
            softmax_on="real",
        )
        layer.ffn.activation = ctnn.CReLU(inplace=False)  # its default CReLU is in place
        self.encoder = ctnn.TransformerEncoder(layer, c.num_layers)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        src_key_padding_mask: torch.Tensor | None = None,
        is_causal: bool | None = None,
        *,
        encoding=None,
    ) -> torch.Tensor:
        """``(B, L, D)`` -> ``(B, L, D)``; the masks and the encoding are ignored."""
        return self.encoder(x)


def complextorch_model(cfg: models.ModelConfig) -> nn.Module | None:
    """Our complex model of ``cfg`` with its body made of complextorch layers (None: no body)."""
    if ctnn is None or cfg.family == "fasttext":
        return None
    model = models.build_model(cfg)
    if cfg.family == "cnn":
        model.convs = nn.ModuleList(
            ctnn.Conv1d(cfg.d_model, cfg.num_filters, k) for k in cfg.kernel_sizes
        )
        model.activation = ctnn.CReLU(inplace=False)
    elif cfg.family == "lstm":
        model.rnn = CTLSTMBody(cfg.d_model, cfg.hidden_size, cfg.bidirectional)
    else:
        model.encoder = CTEncoder(cfg)
    return model


# ------------------------------------------------------------------------------------------------
# rows
# ------------------------------------------------------------------------------------------------
def step_rows(bench: Bench) -> dict:
    def make(family: str):
        def build(_: int, cfg: Config) -> Case:
            c = model_config(bench, family)
            torch.manual_seed(0)
            ours = TrainStep(bench, models.build_model(c))
            base = {"real twin x2 width": TrainStep(bench, models.build_model(models.real_twin(c)))}
            ct = complextorch_model(c)
            if ct is not None:
                base["complextorch-built"] = TrainStep(bench, ct)
            return Case(ours, base)

        return build

    return {f"{family} train step": make(family) for family in FAMILY_PRESETS}


def compile_rows(bench: Bench) -> dict:
    def make(family: str, complex_: bool):
        def build(_: int, cfg: Config) -> Case:
            c = model_config(bench, family)
            c = c if complex_ else models.real_twin(c)
            torch.manual_seed(0)
            dense = dataclasses.replace(c, sparse_embeddings=False)
            m = models.build_model(dense)
            compiled = TrainStep(bench, m, torch.compile(m)).warm(6)
            base = {
                "eager, sparse tables": TrainStep(bench, models.build_model(c)),
                "eager, dense tables": TrainStep(bench, models.build_model(dense)),
            }
            return Case(compiled, base, label="compiled")

        return build

    out = {}
    for family in FAMILY_PRESETS:
        out[f"{family} complex, compiled"] = make(family, True)
        out[f"{family} real x2, compiled"] = make(family, False)
    return out


class EncodingStep(nn.Module):
    """``fn(encoding, x)`` as a module owning the encoding (so the step resets its gradients)."""

    def __init__(self, encoding: nn.Module, fn) -> None:
        super().__init__()
        self.encoding, self.fn = encoding, fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(self.encoding, x)


def autograd_order(e: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """The complex-order map through autograd of ``cos``/``sin``/``complex`` (cplxnet <= 0.1's
    code; same tables, same lookups) as a baseline for the hand-written backward."""
    r, w, theta = (
        torch.nn.functional.embedding(ids, t, e.padding_idx, sparse=e.sparse)
        for t in (e.amplitude_weight, e.frequency_weight, e.phase_weight)
    )
    pos = torch.arange(ids.shape[1], dtype=r.dtype)[:, None]
    angle = w * pos + theta
    return torch.complex(r * torch.cos(angle), r * torch.sin(angle))


def rotate_half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Real rotary, GPT-NeoX / HF layout: ``x cos + rotate_half(x) sin`` with full-width
    ``cos``/``sin`` tables (L, 2Dh) precomputed once."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class DecoderStep:
    """One training step of a causal decoder on fixed windows ``ids`` ``(B, L + 1)``: next-token
    cross-entropy, backward, AdamW (what :mod:`cplxnet.lm` does per step); with
    ``compiled_kernels`` under :func:`cplxnet.functional.use_compiled_kernels`."""

    def __init__(self, model: nn.Module, ids: torch.Tensor, compiled_kernels: bool = False) -> None:
        self.model, self.ids, self.compiled_kernels = model, ids, compiled_kernels
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        model.train()

    def __call__(self) -> None:
        if self.compiled_kernels:
            previous = cplxnet.functional.use_compiled_kernels(True)
            try:
                self._step()
            finally:
                cplxnet.functional.use_compiled_kernels(previous)
        else:
            self._step()

    def _step(self) -> None:
        logits = self.model(self.ids[:, :-1])
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), self.ids[:, 1:].flatten())
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def decoder_rows(tiny: bool) -> dict:
    """The decoder at L = 256, 4 layers (d 128 complex) against its real twin (d 256) and the
    complextorch-built decoder."""
    from cplxnet.lm import prepare_lm_data

    L, B = (16, 2) if tiny else (256, 8)

    def build(d: int, cfg: Config) -> Case:
        data = prepare_lm_data("mr", "char", L)
        g = torch.Generator().manual_seed(0)
        starts = torch.randint(0, len(data.train) - L - 1, (B,), generator=g)
        ids = data.train[starts[:, None] + torch.arange(L + 1)]
        c = models.preset_config(
            "lm-char", d_model=8 if tiny else d, num_layers=4, num_heads=4 if not tiny else 2,
            dim_feedforward=16 if tiny else 4 * d, encoding="sinusoidal",
            vocab_size=len(data.vocab), padding_idx=0, max_len=L,
        )  # fmt: skip
        torch.manual_seed(0)
        base = {"real twin x2 width": DecoderStep(models.build_model(models.real_twin(c)), ids)}
        if ctnn is not None:
            ct = models.build_model(c)
            ct.layers = CTEncoder(c)
            base["complextorch-built"] = DecoderStep(ct, ids)
        torch.manual_seed(0)
        base["ours with use_compiled_kernels()"] = DecoderStep(models.build_model(c), ids, True)
        return Case(DecoderStep(models.build_model(c), ids), base,
                    note=f"{B} x {L} tokens per step")  # fmt: skip

    return {f"Decoder L={L}, 4 layers, train step": build}


STUDY_ENCODINGS = ("sinusoidal", "rotary", "complex-order")


def study_decoder_rows(tiny: bool) -> dict:
    """The language-model study's decoder (preset ``lm-char``: d 64 complex, 2 layers, 4 heads,
    feed-forward 256) at L = 256 against its equal-FLOP real twin (d 128, feed-forward 512), with
    each encoding of :data:`STUDY_ENCODINGS` on both sides."""
    from cplxnet.lm import prepare_lm_data

    L, B = (16, 2) if tiny else (256, 8)
    data = prepare_lm_data("mr", "char", L)
    g = torch.Generator().manual_seed(0)
    starts = torch.randint(0, len(data.train) - L - 1, (B,), generator=g)
    ids = data.train[starts[:, None] + torch.arange(L + 1)]

    def make(encoding: str):
        def build(d: int, cfg: Config) -> Case:
            extra = {"d_model": 8, "num_heads": 2, "dim_feedforward": 16} if tiny else {}
            c = models.preset_config("lm-char", encoding=encoding, vocab_size=len(data.vocab),
                                     padding_idx=0, max_len=L, **extra)  # fmt: skip
            torch.manual_seed(0)
            twin = DecoderStep(models.build_model(models.real_twin(c, match="flops")), ids)
            torch.manual_seed(0)
            return Case(DecoderStep(models.build_model(c), ids), {"real twin x2 width": twin},
                        note=f"{B} x {L} tokens per step")  # fmt: skip

        return build

    return {f"lm-char decoder ({e}) L={L}, train step": make(e) for e in STUDY_ENCODINGS}


def tokens_per_second(lines: list[str], tokens: int) -> list[str]:
    """A table of tokens per second of the rows of :func:`run_rows` (ours and the baseline)."""
    out = ["| row | ours tokens/s | baseline tokens/s | ours / baseline (time) |",
           "|---|---:|---:|---:|"]  # fmt: skip
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != 6 or not cells[4].replace(".", "").isdigit():
            continue
        ours, base = float(cells[4]), float(cells[5])
        out.append(f"| {cells[0]} vs {cells[2]} | {tokens / ours * 1e3:,.0f} | "
                   f"{tokens / base * 1e3:,.0f} | {cells[3]} |")  # fmt: skip
    return out


def micro_rows() -> dict:
    V = 20000

    def embedding(d: int, cfg: Config) -> Case:
        ids = torch.randint(1, V, (cfg.batch, cfg.seq))
        enc = create_encoding("complex-order", d_model=d, vocab_size=V, padding_idx=0, sparse=True)
        real = nn.Embedding(V, 2 * d, padding_idx=0, sparse=True)
        table = cplxnet.nn.Embedding(V, d, padding_idx=0, sparse=True)
        angle = torch.rand(cfg.batch, cfg.seq, d) * cfg.seq  # angles w * pos + theta

        def trig_numpy() -> None:  # what the encoding's forward pays for cos and sin
            a = angle.numpy()
            np.cos(a), np.sin(a)

        base = {
            "real nn.Embedding(V, 2d) lookup": fwd_bwd(real, ids),
            "cplxnet complex Embedding(V, d)": fwd_bwd(table, ids),
            "its cos + sin alone (NumPy, forward)": trig_numpy,
            "torch.cos + torch.sin alone (forward)": lambda: (torch.cos(angle), torch.sin(angle)),
            "autograd through cos/sin (the previous code)": fwd_bwd(
                EncodingStep(enc, autograd_order), ids
            ),
        }
        return Case(fwd_bwd(EncodingStep(enc, lambda e, ids: e.embed(ids)), ids), base)

    def embedding_compiled(d: int, cfg: Config) -> Case:
        ids = torch.randint(1, V, (cfg.batch, cfg.seq))
        enc = create_encoding("complex-order", d_model=d, vocab_size=V, padding_idx=0, sparse=True)
        real = nn.Embedding(V, 2 * d, padding_idx=0, sparse=True)

        def embed_compiled(e: nn.Module, ids: torch.Tensor) -> torch.Tensor:
            previous = cplxnet.functional.use_compiled_kernels(True)
            try:
                return e.embed(ids)
            finally:
                cplxnet.functional.use_compiled_kernels(previous)

        base = {
            "real nn.Embedding(V, 2d) lookup": fwd_bwd(real, ids),
            "cplxnet eager (the default)": fwd_bwd(EncodingStep(enc, lambda e, i: e.embed(i)), ids),
        }
        return Case(fwd_bwd(EncodingStep(enc, embed_compiled), ids), base)

    def rotary(d: int, cfg: Config) -> Case:
        H = max(d // 64, 1)
        dh = d // H
        L = cfg.seq
        enc = create_encoding("rotary", d_model=d, num_heads=H, max_len=L)
        x = cinput(cfg, cfg.batch, H, L, dh)  # (B, H, L, Dh) complex
        f = enc.rotate_one(torch.ones(1, 1, L, dh, dtype=x.dtype)).detach()  # (1, 1, L, Dh)
        xr = rinput(cfg, cfg.batch, H, L, 2 * dh)  # (B, H, L, 2Dh) real, same bytes
        fr = torch.randn(L, 2 * dh)
        ang = torch.randn(L, dh)
        cos, sin = torch.cat((ang.cos(), ang.cos()), -1), torch.cat((ang.sin(), ang.sin()), -1)
        base = {
            "one complex multiply x * f": fwd_bwd(lambda t: t * f, x),
            "one real multiply (B,H,L,2Dh)": fwd_bwd(lambda t: t * fr, xr),
            "real rotate_half (B,H,L,2Dh)": fwd_bwd(rotate_half, xr, cos, sin),
        }
        return Case(fwd_bwd(EncodingStep(enc, lambda e, t: e.rotate_one(t)), x), base)

    return {
        "complex-order embedding (sparse)": embedding,
        "complex-order embedding (sparse), compiled kernels": embedding_compiled,
        "rotary rotate_one": rotary,
    }


# ------------------------------------------------------------------------------------------------
# profiles: where a training step's time goes
# ------------------------------------------------------------------------------------------------
CATEGORIES = {
    "GEMM": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_mkldnn"),
    "conv": ("convolution",),
    "recurrent": ("lstm", "gru", "rnn"),
    "norm": ("norm",),
    "copies": ("aten::copy_", "aten::cat", "aten::stack", "aten::clone", "aten::contiguous"),
    "dropout": ("bernoulli", "dropout"),
    "embedding": ("embedding", "aten::index", "_ComplexOrder", "sparse", "coalesce", "nonzero"),
    "optimizer": ("Optimizer", "lerp", "addcdiv", "aten::sqrt"),
}


def _category(name: str) -> str:
    for cat, keys in CATEGORIES.items():
        if any(k in name for k in keys):
            return cat
    return "other"


def profile_rows(bench: Bench, steps: int, families: list[str]) -> list[str]:
    """Self CPU time of ``steps`` training steps per operator category (torch.profiler), for our
    model, its equal-FLOP real twin and the complextorch-built model."""
    from torch.profiler import ProfilerActivity, profile

    head = ["| model | variant | ms / step | " + " | ".join(CATEGORIES) + " | other |"]
    head.append("|---|---|---:|" + "---:|" * (len(CATEGORIES) + 1))
    lines = head
    for family in families:
        c = model_config(bench, family)
        torch.manual_seed(0)
        variants = {
            "ours": models.build_model(c),
            "real twin x2": models.build_model(models.real_twin(c)),
        }
        ct = complextorch_model(c)
        if ct is not None:
            variants["complextorch-built"] = ct
        for name, model in variants.items():
            step = TrainStep(bench, model).warm(2)
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(steps):
                    step()
            shares = dict.fromkeys([*CATEGORIES, "other"], 0.0)
            for ev in prof.key_averages():
                shares[_category(ev.key)] += ev.self_cpu_time_total
            total = sum(shares.values())
            cells = " | ".join(f"{100 * v / total:.0f}%" for v in shares.values())
            lines.append(f"| {family} | {name} | {total / 1e3 / steps:.0f} | {cells} |")
    return lines


# ------------------------------------------------------------------------------------------------
# cplxnet train
# ------------------------------------------------------------------------------------------------
def cli_throughput(extra: list[str], threads: int = 2, log=print) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        cmd = [sys.executable, "-m", "cplxnet", "train", "--epochs", "1", "--threads", str(threads),
               "--quiet", "--run-dir", run_dir, *extra]  # fmt: skip
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        if res.returncode != 0:
            return f"| `{' '.join(cmd[2:-2])}` | failed: {res.stderr.strip()[-200:]} | | |"
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            epoch = json.loads(f.readline())
        with open(os.path.join(run_dir, "results.json")) as f:
            n_train = json.load(f)["splits"]["train"]
    command = " ".join(["cplxnet train --epochs 1", *extra])
    rate, secs = n_train / epoch["seconds"], epoch["seconds"]
    line = f"| `{command}` | {rate:.0f} | {secs:.1f} | {wall:.1f} |"
    log(line)
    return line


# ------------------------------------------------------------------------------------------------
# driver
# ------------------------------------------------------------------------------------------------
PARTS = ("steps", "compile", "micro", "cli", "profile", "decoder", "study")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="write the tables as the 'models.py' section of this file")
    p.add_argument("--quick", action="store_true", help="tiny models, 3 rounds (smoke test)")
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--compile-rounds", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS))
    p.add_argument("--profile-steps", type=int, default=6, help="steps profiled per variant")
    p.add_argument("--families", nargs="+", choices=list(FAMILY_PRESETS), default=None)
    p.add_argument("--dims", type=int, nargs="+", default=[256, 512], help="micro rows' d")
    p.add_argument("--no-reexec", action="store_true", help="do not re-exec with malloc settings")
    a = p.parse_args(argv)
    cfg = Config(threads=a.threads, rounds=a.rounds, warmup=2, min_time=0.0)
    micro_cfg = Config(threads=a.threads, dims=tuple(a.dims), rounds=max(a.rounds, 20))
    if a.quick:
        cfg = Config(threads=a.threads, rounds=3, warmup=1, min_time=0.0)
        micro_cfg = Config(batch=2, seq=8, dims=(16,), rounds=3, warmup=1, min_time=0.0)
    torch.set_num_threads(a.threads)
    fams = a.families or list(FAMILY_PRESETS)

    def pick(rows: dict) -> dict:
        return {k: v for k, v in rows.items() if k.split()[0] in fams}

    before = loadavg()
    out = [
        f"torch {torch.__version__}, cplxnet {cplxnet.__version__}, "
        f"{torch.get_num_threads()} threads, complex64 / float32, "
        f"MALLOC_MMAP_THRESHOLD_={os.environ.get('MALLOC_MMAP_THRESHOLD_')}. "
        "Ratio = median over interleaved rounds of the per-round ratio (< 1: ours faster).",
        "",
    ]
    bench = None
    if {"steps", "compile", "profile"} & set(a.only):
        bench = load_bench(cfg, cfg.warmup + max(cfg.rounds, a.compile_rounds) + 8, a.quick)
    if "steps" in a.only:
        out += [
            f"### Training step (batch {cfg.batch} MR sentences, Adam + SparseAdam), "
            f"median of {cfg.rounds} rounds after {cfg.warmup} warm-up steps",
            "",
            *run_rows(pick(step_rows(bench)), cfg, dims=(cfg.batch,), column="batch"),
            "",
        ]
    if "compile" in a.only:
        ccfg = dataclasses.replace(cfg, rounds=3 if a.quick else a.compile_rounds)
        out += [
            f"### torch.compile (inductor) training step vs eager, median of {ccfg.rounds} rounds "
            "after 6 compile/warm-up steps",
            "",
            *run_rows(pick(compile_rows(bench)), ccfg, dims=(cfg.batch,), column="batch"),
            "",
        ]
    if "micro" in a.only:
        out += [
            f"### Micro rows (forward + backward, batch {micro_cfg.batch}, sequence "
            f"{micro_cfg.seq}, median of {micro_cfg.rounds} rounds)",
            "",
            *run_rows(micro_rows(), micro_cfg),
            "",
        ]
    if "decoder" in a.only:
        out += [
            f"### Causal decoder training step (AdamW), median of {cfg.rounds} rounds after "
            f"{cfg.warmup} warm-up steps",
            "",
            *run_rows(decoder_rows(a.quick), cfg, dims=(8 if a.quick else 128,), column="d"),
            "",
        ]
    if "study" in a.only:
        rows = run_rows(study_decoder_rows(a.quick), cfg, dims=(8 if a.quick else 64,), column="d")
        out += [
            f"### The study's decoder (lm-char) training step (AdamW), median of {cfg.rounds} "
            f"rounds after {cfg.warmup} warm-up steps",
            "",
            *rows,
            "",
            *tokens_per_second(rows, 2 * 16 if a.quick else 8 * 256),
            "",
        ]
    if "cli" in a.only:
        extra = ["--limit", "200"] if a.quick else []
        out += [
            f"### `cplxnet train` on MR (1 epoch, {a.threads} thread(s))",
            "",
            "| command | train sentences/s | epoch s (with dev scoring) | wall s (with start) |",
            "|---|---:|---:|---:|",
            cli_throughput(extra, a.threads),
            cli_throughput([*extra, "--preset", "paper-transformer"], a.threads),
            "",
        ]
    if "profile" in a.only:
        pf = [f for f in fams if f in ("Transformer", "CNN", "LSTM")]
        out += [
            f"### Where the training step's time goes (torch.profiler, self CPU time of "
            f"{a.profile_steps} steps by operator category)",
            "",
            "GEMM: mm/addmm/bmm (complex or real); conv: convolutions; recurrent: fused LSTM "
            "kernels; norm: layer/group norm forward and backward; "
            "copies: copy_/cat/stack; embedding: lookups, the complex-order map, sparse gradients; "
            "optimizer: Adam/SparseAdam arithmetic.",
            "",
            *profile_rows(bench, 1 if a.quick else a.profile_steps, pf),
            "",
        ]
    out.append(f"Load average (1/5/15 min) before: {before}; after: {loadavg()}.")
    table = "\n".join(out) + "\n"
    print()
    print(table)
    if a.out:
        write_section(a.out, SECTION, table)


if __name__ == "__main__":
    main()
