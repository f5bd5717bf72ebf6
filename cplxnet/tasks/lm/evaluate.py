"""Scoring a language model on a token stream at any evaluation length.

The stream is cut into non-overlapping windows of ``n`` inputs
(:func:`cplxnet.tasks.lm.data.windows`): every token but the first is predicted exactly once, with
the context of its own window (the evaluation of Press et al., "Train Short, Test Long", ICLR 2022,
"nonoverlapping inference"). The last window is shorter when the stream does not divide evenly; its
tokens are scored with the context they have. Character streams report bits per character (mean
cross-entropy / ln 2), word streams perplexity (exp of the mean cross-entropy); both also give
``loss`` (nats per token).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from ...engine.metrics import evaluating
from .data import windows

__all__ = [
    "METRICS",
    "BATCH_TOKENS",
    "metric_name",
    "score_stream",
    "evaluate_lengths",
    "effective_length",
    "NA",
]

METRICS = {"char": "bpc", "word": "perplexity", "synthetic": "accuracy"}
NA = "n/a"  # key of the reason when a length cannot be scored
_LOGIT_BUDGET = 1 << 23  # at most this many logits per forward pass (large word vocabularies)
#: about this many tokens per forward pass of the scorers (fewer for a large vocabulary)
BATCH_TOKENS = 16384


def metric_name(tokens: str) -> str:
    """``"bpc"`` for characters, ``"perplexity"`` for words."""
    return METRICS[tokens]


def _metric(loss: float, tokens: str) -> float:
    return loss / math.log(2) if tokens == "char" else math.exp(min(loss, 700.0))


@torch.no_grad()
def score_stream(
    model: nn.Module,
    stream: torch.Tensor,
    length: int,
    *,
    tokens: str = "char",
    batch_tokens: int = BATCH_TOKENS,
) -> dict[str, float]:
    """Mean next-token cross-entropy of ``model`` on ``stream`` in windows of ``length`` inputs.

    Args:
        model: ``(B, n)`` ids -> ``(B, n, V)`` logits (causal).
        stream: ``(N,)`` int64 token ids.
        length: inputs per window.
        tokens: ``"char"`` (adds ``bpc``) or ``"word"`` (adds ``perplexity``).
        batch_tokens: about this many tokens per forward pass (fewer for a large vocabulary:
            at most 2**23 logits at a time).

    Returns ``{"bpc" | "perplexity": ..., "loss": nats per token, "tokens": predicted tokens,
    "windows": number of windows, "window": the longest window scored}``; ``window`` is less
    than ``length`` when the stream is shorter than one window (see :func:`effective_length`).
    """
    if stream.dim() != 1 or len(stream) < 2:
        raise ValueError("score_stream: need a 1-d stream of at least 2 tokens")
    with evaluating(model):
        device = next(model.parameters()).device
        cuts = windows(len(stream), length)
        full = [s for s, e in cuts if e - s == length]
        tail = [(s, e) for s, e in cuts if e - s != length]
        vocab = getattr(getattr(model, "config", None), "vocab_size", 1)
        per_batch = max(1, min(batch_tokens, _LOGIT_BUDGET // vocab) // length)
        total = torch.zeros((), dtype=torch.float64)
        count = 0
        offsets = torch.arange(length + 1)
        for i in range(0, len(full), per_batch):
            starts = torch.tensor(full[i : i + per_batch])
            chunk = stream[starts[:, None] + offsets].to(device)  # (b, n + 1)
            logits = model(chunk[:, :-1])
            total += F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten(),
                                     reduction="sum").double().cpu()  # fmt: skip
            count += chunk[:, 1:].numel()
        for s, e in tail:
            chunk = stream[s : e + 1].to(device)[None]
            logits = model(chunk[:, :-1])
            total += F.cross_entropy(logits[0], chunk[0, 1:], reduction="sum").double().cpu()
            count += e - s
    loss = float(total) / count
    return {metric_name(tokens): _metric(loss, tokens), "loss": loss, "tokens": count,
            "windows": len(cuts), "window": effective_length(len(stream), length)}  # fmt: skip


def effective_length(stream_tokens: int, length: int) -> int:
    """The longest window actually scored at evaluation length ``length`` on a stream of
    ``stream_tokens`` tokens: ``length``, or ``stream_tokens - 1`` (the whole stream as one
    window) when the stream is shorter."""
    return min(length, stream_tokens - 1)


def evaluate_lengths(
    model: nn.Module,
    stream: torch.Tensor,
    lengths: Iterable[int],
    *,
    tokens: str = "char",
    batch_tokens: int = BATCH_TOKENS,
) -> dict[str, dict]:
    """:func:`score_stream` at each length, keyed by the length as a string (JSON keys).

    A length longer than the stream is scored as one window of the whole stream; its entry says
    so in ``window`` (the effective length), its key stays the length asked for. A length the
    model cannot represent (``model.unsupported_length(n)`` gives a reason, e.g. a
    trainable table of ``max_len`` rows) gets ``{"bpc": None, "n/a": reason}`` instead of a score.
    """
    out: dict[str, dict] = {}
    check = getattr(model, "unsupported_length", None)
    for n in lengths:
        # the model only ever sees the effective length (a length past the stream is one window)
        reason = check(effective_length(len(stream), n)) if check is not None else None
        if reason is not None:
            out[str(n)] = {metric_name(tokens): None, NA: reason}
        else:
            out[str(n)] = score_stream(model, stream, n, tokens=tokens, batch_tokens=batch_tokens)
    return out
