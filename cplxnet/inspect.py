r"""``cplxnet inspect RUN``: what a trained run learned about position, as PNG plots and a short
markdown summary (``inspect.md``) in ``RUN/inspect/`` or the folder given with ``--out``.

* **Complex-order embeddings** (any :class:`~cplxnet.encodings.complex_order.ComplexOrderEncoding`
  in the model, alone or in a combination): the distributions of the learned frequencies
  :math:`|\omega|` (log scale) against :math:`2\pi/L` (``L`` the training length: a feature with
  :math:`|\omega| < 2\pi/L` never completes a turn of phase inside a training window), of the
  amplitudes and of the initial phases (mod :math:`2\pi`).
* **Attention against relative distance** (any model with :class:`cplxnet.nn.MultiheadAttention`
  layers): the mean attention weight :math:`\bar a_h(d)` over all query/key pairs at distance
  ``d = i - j``, per layer and head, at ``L`` and ``4L`` for language models (on windows of the
  test text; random sequences of the task's symbols for synthetic tasks, ``L`` the longest
  training sequence) and at ``L`` for classifiers, ``L`` their longest training text (random
  token sequences: the inputs a classifier's attention sees carry no meaning, so its positional
  part shows).
* **Position-only logits biases** (encodings acting on the ``"logits"`` site whose bias does not
  depend on the content, e.g. alibi, t5): the bias against distance, per head, at ``L`` and
  ``4L``. A bias computed from the queries and keys (shaw, xl, deberta) is zero for zero
  queries and keys and is left out.

The output folder is only ever written by inspect: it holds a ``.cplxnet-inspect`` list of the
files inspect wrote, and a folder with any other file is refused (nothing else is overwritten).
Each file is written atomically (a temporary file in the folder, then ``os.replace``) after its
name is added to the list, so the folder never holds a half-written file or one the list lacks;
a full disk is one line naming the folder, and an inspect that fails removes the folder (and the
folders above it) if it created them.

Inspect owns its output folder while it runs (:func:`~cplxnet.engine.runs.run_lock`):
a folder directly inside the run folder (the default ``RUN/inspect``) takes the run's own lock
and is refused while a ``train`` (new, ``--force`` or ``--resume``) or another inspect holds that
run; a ``--out`` folder elsewhere takes the lock ``.NAME.lock`` beside it. Reading the run needs no
lock, so ``--out`` elsewhere inspects a run whose training is still going.

Examples::

    cplxnet inspect runs/mr-decoder-rotary-real-20261201-120000
    cplxnet inspect runs/trec-transformer --out figures/trec --samples 16
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from .engine.files import disk_full, replace_atomically
from .engine.folder_lock import FolderLock
from .engine.metrics import evaluating
from .engine.runs import (
    INSPECT_MARKER,
    TEMP_PREFIX,
    RunError,
    missing_folders,
    remove_empty_folders,
    run_lock,
)

__all__ = ["inspect_run", "attention_by_distance", "bias_by_distance"]

MARKER = INSPECT_MARKER  # the list of the files inspect wrote into its folder
#: the length of a classifier's inputs when its model has no length limit of its own
DEFAULT_CLASSIFIER_LENGTH = 64
#: The most sequences the attention panels average over (they run in chunks of bounded memory).
MAX_SAMPLES = 1024
#: Attention weights one chunk of samples may hold per layer, (B, H, n, n) values in float64.
CHUNK_VALUES = 1 << 24


@dataclass
class _Run:
    """What inspect needs of a run: its model, kind, training length and sample inputs."""

    path: str
    model: nn.Module
    kind: str  # "lm" or "classifier"
    length: int | None  # the training length L (None: unknown)
    encoding: str
    inputs: Any  # callable(length, n) -> (n, length) ids, and a description
    describe: str = ""
    notes: list[str] = field(default_factory=list)


def _load(path: str, samples: int) -> _Run:
    from .tasks.lm.task import is_lm_run

    if not os.path.isdir(path):
        raise RunError(f"run folder {path} not found")
    if is_lm_run(path):
        from .tasks.lm.generate import load_lm_run

        lm = load_lm_run(path)
        task = lm.task()
        stream = task.data.test if task.data is not None else None
        # a synthetic task's symbols (not <pad>, <unk>, <sep>, <eos>); else every token
        s = task.synthetic
        low = 2 if s is None else s.first_symbol
        high = len(lm.vocab) if s is None else low + s.alphabet

        def inputs(length: int, n: int) -> torch.Tensor:
            if stream is not None and len(stream) >= length:
                starts = torch.linspace(0, len(stream) - length, n).long()
                return stream[starts[:, None] + torch.arange(length)]
            g = torch.Generator().manual_seed(0)
            return torch.randint(low, high, (n, length), generator=g)

        text = "windows of the test text" if stream is not None else "random symbol sequences"
        # L: the longest training input (a synthetic task's prompt, separator and answer)
        return _Run(path, lm.model, "lm", task.longest_input, lm.config.encoding, inputs, text)
    from .tasks.classify.inference import load_run

    run = load_run(path)
    length, notes = _classifier_length(run)
    vocab = len(run.vocab)

    def random_ids(n_tokens: int, n: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(0)
        return torch.randint(min(2, vocab - 1), vocab, (n, n_tokens), generator=g)

    return _Run(path, run.model, "classifier", length, run.config.encoding, random_ids,
                "random token sequences", notes)  # fmt: skip


def _classifier_length(run: Any) -> tuple[int, list[str]]:
    """L of a classifier run: its longest training text in tokens (at most the model's limit),
    read from the run's data; the model's limit (or :data:`DEFAULT_CLASSIFIER_LENGTH`) with a
    note when the data cannot be read."""
    from .data import DataError
    from .data.pipeline import load_splits

    limit = run.max_len
    try:
        longest = max((len(run.tokenizer(ex.text)) for ex in load_splits(run.spec).train),
                      default=0)  # fmt: skip
    except (DataError, OSError, ValueError) as err:
        length = limit if limit is not None else DEFAULT_CLASSIFIER_LENGTH
        source = "the model's limit" if limit is not None else "the default for a model without one"
        return length, [f"the training data cannot be read ({str(err).splitlines()[0][:120]}): "
                        f"L = {length}, {source}"]  # fmt: skip
    longest = max(longest, 1)
    return (longest if limit is None else min(longest, limit)), []


# ------------------------------------------------------------------------------------------------
# measurements


def _attention_layers(model: nn.Module) -> list[nn.Module]:
    from .nn import MultiheadAttention

    return [m for m in model.modules() if isinstance(m, MultiheadAttention)]


def _distance_index(lq: int, lk: int, device: torch.device) -> torch.Tensor:
    """``(Lq, Lk)`` index ``i - j + Lk - 1`` of each pair's distance ``d = i - j`` (queries at
    the end of the keys when ``Lq < Lk``)."""
    i = torch.arange(lk - lq, lk, device=device)[:, None]
    j = torch.arange(lk, device=device)[None, :]
    return i - j + lk - 1


def _mean_by_distance(values: torch.Tensor) -> torch.Tensor:
    """``values`` ``(B, H, Lq, Lk)`` -> ``(H, Lq + Lk - 1)`` means over the pairs of each distance
    ``d = -(Lk-1) .. Lq-1`` (column ``d + Lk - 1``)."""
    B, H, lq, lk = values.shape
    idx = _distance_index(lq, lk, values.device).flatten()
    sums = values.new_zeros(H, lq + lk - 1).index_add_(1, idx, values.sum(0).flatten(1))
    counts = torch.bincount(idx, minlength=lq + lk - 1).to(values.dtype) * B
    return sums / counts.clamp(min=1)


@torch.no_grad()
def attention_by_distance(model: nn.Module, ids: torch.Tensor) -> list[torch.Tensor]:
    """The mean attention weight of each head against the distance ``d = i - j``, one
    ``(H, 2L - 1)`` tensor per attention layer (column ``d + L - 1``), for the inputs ``ids``
    ``(B, L)``: the layers are run with ``need_weights=True`` through forward hooks."""
    layers = _attention_layers(model)
    captured: list[torch.Tensor | None] = [None] * len(layers)

    def pre(module, args, kwargs):
        return args, {**kwargs, "need_weights": True, "average_attn_weights": False}

    handles = []
    for n, layer in enumerate(layers):

        def post(module, args, kwargs, out, n=n):
            captured[n] = _mean_by_distance(out[1].double())

        handles.append(layer.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(layer.register_forward_hook(post, with_kwargs=True))
    try:
        with evaluating(model):
            model(ids)
    finally:
        for h in handles:
            h.remove()
    return [c for c in captured if c is not None]


@torch.no_grad()
def bias_by_distance(
    model: nn.Module, length: int, causal: bool | None = None
) -> torch.Tensor | None:
    """The encoding's position-only logits bias against the distance ``d = i - j``, ``(H, 2L - 1)``
    (column ``d + L - 1``), or ``None`` when the encoding adds no bias for zero queries and keys
    (no "logits" site, or a bias computed from the content). For a causal model (``causal``;
    default ``model.is_causal``, True for the zoo's decoder) the columns ``d < 0``, keys after
    the query that the causal mask removes, are NaN."""
    encoding = getattr(model, "encoding", None)
    layers = _attention_layers(model)
    if encoding is None or "logits" not in encoding.acts_on or not layers:
        return None
    attn = layers[0]
    width = 2 * attn.head_dim if attn.dtype.is_complex else attn.head_dim
    param = next(model.parameters())
    real = param.real.dtype if param.is_complex() else param.dtype
    zeros = torch.zeros(1, attn.num_heads, length, width, dtype=real, device=param.device)
    bias = encoding.logits_bias(zeros, zeros)
    if bias is None or not bool(bias.abs().max() > 0):
        return None
    curve = _mean_by_distance(bias.double().expand(1, attn.num_heads, length, length))
    if causal is None:
        causal = getattr(model, "is_causal", False)
    if causal:
        curve[:, : length - 1] = float("nan")  # d < 0: never applied
    return curve


def complex_order_parameters(model: nn.Module) -> dict[str, torch.Tensor] | None:
    """The learned frequencies, amplitudes and phases of the model's complex-order embedding
    (rows of its padding id left out), or ``None`` if it has none."""
    from .encodings.complex_order import ComplexOrderEncoding

    found = [m for m in model.modules() if isinstance(m, ComplexOrderEncoding)]
    if not found:
        return None
    enc = found[0]
    out = {}
    for name, weight in (("frequency", enc.frequency_weight), ("amplitude", enc.amplitude_weight),
                         ("phase", enc.phase_weight)):  # fmt: skip
        if weight is None:
            continue
        w = weight.detach().double().cpu()
        if w.dim() == 2 and enc.padding_idx is not None and w.shape[0] == enc.vocab_size:
            w = torch.cat([w[: enc.padding_idx], w[enc.padding_idx + 1 :]])
        out[name] = w.flatten()
    return out


# ------------------------------------------------------------------------------------------------
# the output folder and the plots


def _prepare_out(out: str) -> list[str]:
    """Create ``out`` or check that it holds only files inspect wrote; returns those files."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise RunError(f"--out {out} is a file; give a folder")
    if not os.path.isdir(out):
        os.makedirs(out)
        return []
    marker = os.path.join(out, MARKER)
    own: list[str] = []
    if os.path.isfile(marker):
        try:
            with open(marker, encoding="utf-8") as fh:
                own = [str(f) for f in json.load(fh)]
        except (OSError, ValueError, TypeError):
            own = []
        foreign = [name for name in own if not _own_name(name)]
        if foreign:  # a marker inspect did not write: its names are never removed
            raise RunError(
                f"{marker} lists {foreign[0]!r}, a file inspect does not write; give another "
                "folder with --out"
            )
    for name in os.listdir(out):  # the temporary file of a write a killed inspect left
        if _temporary_of(name, [*own, MARKER]):
            os.remove(os.path.join(out, name))
    others = sorted(set(os.listdir(out)) - set(own) - {MARKER})
    if others:
        raise RunError(
            f"{out} holds files inspect did not write ({', '.join(others[:3])}"
            f"{', ...' if len(others) > 3 else ''}); give another folder with --out"
        )
    return own


def _own_name(name: str) -> bool:
    """Whether ``name`` is a file inspect writes into its folder: a plain file name (no folder
    part) of ``inspect.md`` or a PNG plot."""
    plain = name == os.path.basename(name) and "/" not in name and "\\" not in name
    return plain and not name.startswith(".") and (name == "inspect.md" or name.endswith(".png"))


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _temporary_of(name: str, names: list[str]) -> bool:
    """Whether ``name`` is a temporary file of :meth:`_Output.write` for one of ``names``."""
    return name.startswith(TEMP_PREFIX) and any(name.endswith("-" + n) for n in names)


class _Output:
    """The output folder ``path``: :meth:`write` puts each file in place atomically, its name
    added first to the marker's list (``listed``, from a previous inspect too); ``written``:
    the files this inspect wrote; ``current``: the file being written."""

    def __init__(self, path: str, previous: list[str]) -> None:
        self.path, self.listed = path, set(previous)
        self.written: list[str] = []
        self.current = MARKER

    def write(self, name: str, write: Callable[[Any], None], binary: bool = False) -> None:
        if name not in self.listed:
            self.listed.add(name)
            self.write_marker(sorted(self.listed))
        self._atomic(name, write, binary)
        self.written.append(name)

    def write_marker(self, names: list[str]) -> None:
        self._atomic(MARKER, lambda fh: fh.write(json.dumps(names)), False)

    def _atomic(self, name: str, write: Callable[[Any], None], binary: bool) -> None:
        """A failed write (a full disk) leaves ``name`` as it was and no temporary file."""
        self.current = name
        replace_atomically(os.path.join(self.path, name), write, binary)

    def remove_all(self) -> None:
        """Remove every file the marker lists, the marker and then the folder (if empty)."""
        for name in [*self.listed, MARKER]:
            with contextlib.suppress(OSError):
                os.remove(os.path.join(self.path, name))
        with contextlib.suppress(OSError):
            os.rmdir(self.path)


def _save(fig, out: _Output, name: str) -> None:
    try:
        out.write(name, lambda fh: fig.savefig(fh, format="png", dpi=90), binary=True)
    finally:
        _plt().close(fig)


def _plot_complex_order(params: dict, length: int | None, out: _Output) -> str:
    plt = _plt()
    fig, axes = plt.subplots(1, len(params), figsize=(4.2 * len(params), 3.4), squeeze=False)
    lines = []
    for ax, (name, w) in zip(axes[0], params.items()):
        if name == "frequency":
            mag = w.abs().clamp(min=1e-8)
            bins = torch.logspace(math.log10(float(mag.min())), math.log10(float(mag.max())) + 1e-9,
                                  40).numpy()  # fmt: skip
            ax.hist(mag.numpy(), bins=bins)
            ax.set_xscale("log")
            ax.set_xlabel("|frequency| (radians per position)")
            if length:
                edge = 2 * math.pi / length
                ax.axvline(edge, color="k", ls="--", label=f"2π/L (L = {length})")
                ax.legend()
                slow = float((mag < edge).double().mean())
                lines.append(f"- frequencies: median |w| {float(mag.median()):.4g}; "
                             f"{100 * slow:.1f}% below 2π/L = {edge:.4g} (no full turn of phase "
                             f"inside a training window)")  # fmt: skip
        elif name == "phase":
            ax.hist(torch.remainder(w, 2 * math.pi).numpy(), bins=36, range=(0, 2 * math.pi))
            ax.set_xlabel("initial phase mod 2π")
            lines.append(f"- initial phases: circular mean resultant length "
                         f"{float(torch.polar(torch.ones_like(w), w).mean().abs()):.3f} (0: "
                         "spread uniformly, 1: all equal)")  # fmt: skip
        else:
            ax.hist(w.numpy(), bins=40)
            ax.set_xlabel("amplitude")
            lines.append(f"- amplitudes: mean {float(w.mean()):.4g}, std {float(w.std()):.4g}")
        ax.set_ylabel("count")
        ax.set_title(name)
    fig.tight_layout()
    _save(fig, out, "complex_order.png")
    return "\n".join(lines)


def _plot_by_distance(curves: list[torch.Tensor], causal: bool, title: str, ylabel: str,
                      out: _Output, name: str) -> None:  # fmt: skip
    plt = _plt()
    n = len(curves)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.4), squeeze=False, sharey=True)
    for layer, (ax, c) in enumerate(zip(axes[0], curves)):
        L = (c.shape[1] + 1) // 2
        d = torch.arange(-(L - 1), L)
        keep = d >= 0 if causal else torch.ones_like(d, dtype=torch.bool)
        for h in range(c.shape[0]):
            ax.plot(d[keep].numpy(), c[h, keep].numpy(), label=f"head {h}", lw=1)
        ax.set_xlabel("distance i - j")
        ax.set_title(f"layer {layer}" if n > 1 else title)
        if causal and ylabel.startswith("mean attention"):
            ax.set_xscale("symlog", linthresh=1)
            ax.set_yscale("log")
    axes[0][0].set_ylabel(ylabel)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, out, name)


def _mean_distance(curve: torch.Tensor, causal: bool) -> list[float]:
    """Per head: the attention-weighted mean |distance| of the by-distance curve."""
    L = (curve.shape[1] + 1) // 2
    d = torch.arange(-(L - 1), L, dtype=curve.dtype).abs()
    w = curve.clone()
    if causal:
        w[:, : L - 1] = 0
    # pairs at distance d number L - |d|: weight the per-distance means back to sums
    mass = w * (L - d)
    return (mass @ d / mass.sum(1)).tolist()


def _attention_in_chunks(run: _Run, n: int, samples: int) -> list[torch.Tensor]:
    """:func:`attention_by_distance` of ``samples`` inputs of ``n`` tokens, in chunks of as many
    sequences as keep the weights of a layer under :data:`CHUNK_VALUES` values (one sequence at
    least, whatever its size): each distance has the same number of pairs in every sequence, so
    the mean over all is the mean of the chunks' means weighted by their sizes."""
    ids = run.inputs(n, samples)
    heads = max((m.num_heads for m in _attention_layers(run.model)), default=1)
    per = max(1, CHUNK_VALUES // (heads * n * n))
    total: list[torch.Tensor] = []
    for start in range(0, samples, per):
        part = ids[start : start + per]
        curves = attention_by_distance(run.model, part)
        weighted = [c * part.shape[0] for c in curves]
        total = weighted if not total else [t + w for t, w in zip(total, weighted)]
    return [t / samples for t in total]


def inspect_run(run_dir: str, out: str | None = None, *, samples: int = 8) -> str:
    """Write the plots and ``inspect.md`` of a run folder to ``out`` (default ``RUN/inspect``)
    and return the path of ``inspect.md``. See the module docstring."""
    if not 1 <= samples <= MAX_SAMPLES:
        raise RunError(f"--samples must be 1 to {MAX_SAMPLES:,}, got {samples:,}")
    run = _load(run_dir, samples)
    path = os.path.normpath(out or os.path.join(run_dir, "inspect"))
    made = missing_folders(path)  # deepest first: what a failed inspect removes again
    output: _Output | None = None
    created = False
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with _output_lock(run_dir, path):
            created = not os.path.isdir(path)  # the output folder: made only under the lock
            output = _Output(path, _prepare_out(path))
            _inspect(run, run_dir, output, samples)
    except BaseException as err:
        if output is not None and created:  # a failed inspect leaves no folder it made
            output.remove_all()
        remove_empty_folders(made[1:])  # the folders above it
        if isinstance(err, Exception) and disk_full(err):
            where = os.path.abspath(path)
            what = (
                f"writing {output.current} in {where}"
                if output
                else f"{'creating' if made else 'taking the lock of'} {where}"
            )
            raise RunError(
                f"no space left on device: {what} failed (nothing half-written is left there): "
                "free space on that disk, then run cplxnet inspect again"
            ) from None
        raise
    return os.path.join(path, "inspect.md")


def _output_lock(run_dir: str, path: str) -> FolderLock:
    """The lock inspect holds while it writes ``path``: the run's own lock for a folder directly
    inside the run (the default ``RUN/inspect``), else ``.NAME.lock`` beside ``path``."""
    if os.path.dirname(os.path.realpath(path)) == os.path.realpath(run_dir):
        folder, fix = run_dir, "wait for it to end, or write the plots elsewhere with --out"
    else:
        folder, fix = path, "wait for it to end, or choose another --out"
    return run_lock(folder, fix)


def _inspect(run: _Run, run_dir: str, out: _Output, samples: int) -> None:
    """The plots and inspect.md of ``run`` into ``out`` (see :func:`inspect_run`)."""
    L = run.length
    md = [f"# What {os.path.basename(os.path.normpath(run_dir))} learned about position", "",
          f"Run `{run_dir}`: {'language model' if run.kind == 'lm' else 'classifier'}, encoding "
          f"`{run.encoding}`, training length L = {L}.", ""]  # fmt: skip
    md += [f"Note: {n}." for n in run.notes] + ([""] if run.notes else [])
    params = complex_order_parameters(run.model)
    if params:
        md += ["## Complex-order embedding", "", _plot_complex_order(params, L, out), "",
               "![complex-order](complex_order.png)", ""]  # fmt: skip
    causal = run.kind == "lm"
    lengths = [L, 4 * L] if run.kind == "lm" else [L]
    if _attention_layers(run.model):
        md += ["## Attention against distance", "",
               f"Mean attention weight per head against the distance i - j, on {samples} "
               f"{run.describe}; one panel per layer.", ""]  # fmt: skip
        for n in lengths:
            tag = "L" if n == L else f"{n // L}L"
            why = run.model.unsupported_length(n) if hasattr(run.model, "unsupported_length") \
                else None  # fmt: skip
            if why is not None:
                md += [f"- at {tag} = {n}: n/a ({why})", ""]
                continue
            curves = _attention_in_chunks(run, n, samples)
            name = f"attention_{tag}.png"
            _plot_by_distance(curves, causal, f"attention at {tag} = {n}",
                              "mean attention weight", out, name)  # fmt: skip
            spans = "; ".join(
                f"layer {i}: " + ", ".join(f"{v:.1f}" for v in _mean_distance(c, causal))
                for i, c in enumerate(curves)
            )
            md += [f"At {tag} = {n}, the attention-weighted mean distance per head: {spans}.",
                   "", f"![attention at {tag}]({name})", ""]  # fmt: skip
        biases = (
            [
                (n, bias_by_distance(run.model, n))
                for n in lengths
                if run.model.unsupported_length(n) is None
            ]
            if hasattr(run.model, "unsupported_length")
            else [(L, bias_by_distance(run.model, L))]
        )
        biases = [(n, b) for n, b in biases if b is not None]
        if biases:
            md += ["## Position bias of the logits", ""]
            for n, b in biases:
                tag = "L" if n == L else f"{n // L}L"
                name = f"bias_{tag}.png"
                _plot_by_distance([b], causal, f"logits bias at {tag} = {n}", "bias", out, name)
                md += [f"![bias at {tag}]({name})", ""]
    if not out.written:
        md += ["The model has no complex-order embedding and no attention: nothing to plot.", ""]
    out.write("inspect.md", lambda fh: fh.write("\n".join(md)))
    for stale in out.listed - set(out.written):  # a previous inspect's plots this one lacks
        if os.path.isfile(os.path.join(out.path, stale)):
            os.remove(os.path.join(out.path, stale))
    out.write_marker(sorted(out.written))
