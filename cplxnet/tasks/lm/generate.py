"""Using a finished language-model run: load it, re-score it at any length, sample from it.

Sampling keeps each layer's keys and values (:class:`cplxnet.nn.KVCache`), so a new token costs
one step, when the encoding allows it (``supports_kv_cache``); otherwise (xpos) the window is
recomputed at every step. The model sees at most the last ``context`` tokens (a run's text:
default its training context; :func:`generate` and :func:`stream`: the whole sequence unless
given), so a trainable position table is never asked for a position it lacks: once the sequence
is longer, the window slides and is recomputed at every step (crop), since every position in it
shifts. Either way the tokens are those of recomputing the window at every step.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ...data import DataError
from ...engine.metrics import evaluating
from ...engine.runs import RunError, check_run_started, load_checkpoint, load_weights
from .data import PAD, UNK, TokenVocab, detokenize, tokenize
from .evaluate import NA, effective_length, evaluate_lengths
from .synthetic import SEP
from .task import LMOptions, LMTask, build_lm_model, load_lm_config

__all__ = [
    "LoadedLM", "load_lm_run", "rebuilt_model", "scaled_models", "evaluate_lm_run", "generate",
    "stream", "generate_text", "stream_text", "unknown_prompt_tokens", "DEFAULT_NEW_TOKENS",
]  # fmt: skip

#: Tokens :func:`stream_text` generates for a text run when ``num_tokens`` is not given.
DEFAULT_NEW_TOKENS = 200


@dataclass
class LoadedLM:
    """A trained language model (best dev weights, eval mode) with its vocabulary and data."""

    run_dir: str
    config: Any
    model: nn.Module
    vocab: TokenVocab
    run_config: dict

    @property
    def data(self) -> dict[str, Any]:
        return self.run_config["data"]

    @property
    def context(self) -> int:
        return int(self.data["context"])

    @property
    def tokens(self) -> str:
        return self.data["tokens"]

    def task(self) -> LMTask:
        """The run's data, rebuilt (a changed training file is a :class:`RunError`)."""
        return LMTask.from_spec(self.data, self.vocab)


def load_lm_run(run_dir: str) -> LoadedLM:
    """Load a language-model run folder's ``best.pt`` with its config and vocabulary."""
    if not os.path.isdir(run_dir):
        raise RunError(f"run folder {run_dir} not found")
    run_config, config, _ = load_lm_config(
        run_dir, other_task="it was trained without --task lm: give a language-model run"
    )
    best = os.path.join(run_dir, "best.pt")
    check_run_started(run_dir, "evaluation", to="use")
    if not os.path.exists(best):
        raise RunError(
            f"{run_dir} has no best.pt (no evaluation finished yet); resume it with cplxnet train "
            f"--resume {run_dir}"
        )
    model = build_lm_model(config, run_dir)
    load_weights(model, load_checkpoint(best, keys={"model": dict})["model"], best)
    model.eval()
    vocab = TokenVocab.load(os.path.join(run_dir, "vocab.json"))
    return LoadedLM(run_dir, config, model, vocab, run_config)


def rebuilt_model(run: LoadedLM, encoding_options: Mapping[str, Any]) -> nn.Module:
    """The run's best weights in a model whose encoding is built with ``encoding_options``
    (over the run's own), on the run's device, in evaluation mode: an encoding option set at
    evaluation only (the weights must fit the rebuilt model)."""
    config = run.config
    options = {**dict(config.encoding_options or {}), **dict(encoding_options)}
    model = build_lm_model(dataclasses.replace(config, encoding_options=options), run.run_dir)
    load_weights(model, run.model.state_dict(), os.path.join(run.run_dir, "best.pt"))
    return model.to(next(run.model.parameters()).device).eval()


def scaled_models(run: LoadedLM, scaling: Mapping[str, Any]) -> Callable[[int], nn.Module]:
    r"""``model_at(n)``: the run's best weights with its rotary encoding rebuilt for inputs of
    ``n`` tokens with the scaling options ``scaling`` (``{"scaling": "yarn"}``, and any option
    of :func:`cplxnet.encodings.rope_scaling.rope_frequencies`) at factor :math:`s = n / L`,
    ``L`` the longest training input (the decoder's ``max_len``) as ``original_max_len``; for
    :math:`n \le L` the run's own model (factor 1: no scaling, every scaling's identity).
    YaRN used this way needs no fine-tuning, at one factor per evaluation window (the dynamic
    form of Peng et al., ICLR 2024, Sec. 3.4, sets :math:`s = \max(1, l'/L)` at each generated
    length :math:`l'`).

    An encoding without rotary scaling, or a run trained with one, is a :class:`RunError`."""
    from ...encodings import encoding_option_parameters

    config = run.config
    name = config.encoding
    if "scaling" not in encoding_option_parameters(name):
        raise RunError(f"{run.run_dir}: its encoding {name} has no rotary scaling; scaling at "
                       "evaluation applies to rotary and xpos runs")  # fmt: skip
    own = dict(config.encoding_options or {})
    if own.get("scaling") is not None:
        raise RunError(f"{run.run_dir} was trained with scaling={own['scaling']!r}; scaling at "
                       "evaluation applies to runs trained without one")  # fmt: skip
    if "scaling" not in scaling:
        raise ValueError(f"scaled_models: scaling needs a 'scaling' key, got {dict(scaling)}")
    trained = int(config.max_len)
    models: dict[int, nn.Module] = {}

    def model_at(n: int) -> nn.Module:
        if n <= trained:
            return run.model
        if n not in models:
            options = {**scaling, "factor": n / trained, "original_max_len": trained}
            models[n] = rebuilt_model(run, options)
        return models[n]

    return model_at


def evaluate_lm_run(
    run: LoadedLM | str,
    context: int | None = None,
    *,
    evaluation: Mapping[str, Any] | None = None,
) -> dict[str, dict]:
    """Score a run's best weights on its test part: at ``context`` tokens per window, or, with
    ``None``, at every length (or bin) its results.json has. Synthetic runs with ``context``
    score the exact-match accuracy on prompts of exactly ``context`` symbols. ``evaluation``:
    encoding options set at evaluation only; with a ``scaling`` key, the rotary scaling at
    factor ``n / L`` at each length ``n`` (:func:`scaled_models`), else the options at every
    length (:func:`rebuilt_model`; e.g. ``{"eval_positions": "random"}`` of a randomized run)."""
    if isinstance(run, str):
        run = load_lm_run(run)
    if context is not None and context < 1:
        raise DataError(f"--context must be at least 1, got {context}")
    if evaluation and "scaling" in evaluation:
        model_at = scaled_models(run, evaluation)
    else:
        fixed = rebuilt_model(run, evaluation) if evaluation else run.model

        def model_at(n: int) -> nn.Module:
            return fixed

    task = run.task()
    options = LMOptions.from_dict(run.run_config["train"])
    if context is None:
        return task.test(run.model, options, model_at=model_at)
    if task.synthetic is None:
        model = model_at(effective_length(len(task.data.test), context))
        return evaluate_lengths(model, task.data.test, [context], tokens=task.tokens,
                                batch_tokens=options.batch_tokens)  # fmt: skip
    s = task.synthetic
    model = model_at(2 * context + 1)
    reason = model.unsupported_length(2 * context + 1)
    if reason is not None:
        return {str(context): {"accuracy": None, NA: reason}}
    prompts = s.test_prompts(context, context)
    return {str(context): {"accuracy": s.accuracy(model, prompts), "n": len(prompts)}}


def _unreadable(
    model: nn.Module, prompt: int, num_tokens: int, context: int | None
) -> tuple[int, str] | None:
    """``(length, reason)`` if the longest window generation would feed ``model``
    (``prompt + num_tokens - 1`` tokens, at most ``context``) is a length it cannot process
    (its ``unsupported_length``), else ``None``."""
    check = getattr(model, "unsupported_length", None)
    if num_tokens == 0 or check is None:
        return None
    longest = prompt + num_tokens - 1
    if context is not None:
        longest = min(longest, context)
    reason = check(longest)
    return None if reason is None else (longest, reason)


def _check_length(run: LoadedLM, prompt: int, num_tokens: int, context: int | None) -> None:
    """A :class:`DataError` naming the command line's fix if generation would feed the run's
    model a window it cannot process (:func:`_unreadable`)."""
    found = _unreadable(run.model, prompt, num_tokens, context)
    if found is None:
        return
    longest, reason = found
    limit = run.config.max_len
    if context is not None and context > limit:
        fix = f"use --context N <= {limit}"
    else:
        fix = f"use a prompt and --max-new-tokens of at most {limit + 1} tokens together"
    raise DataError(f"the model cannot read {longest} tokens at once ({reason}); {fix}")


#: Temperatures below this sample greedily (dividing the logits by a smaller number overflows).
GREEDY_BELOW = 1e-6


def _not_whole(value: object) -> bool:
    """Whether ``value`` is not a whole number (a bool is not one either)."""
    return isinstance(value, bool) or not isinstance(value, numbers.Integral)


def _check_banned(banned: list[int], vocab: int | None) -> None:
    """Refuse sorted ``banned`` ids that are negative or, with the model's ``vocab`` size
    known, past it or covering every token."""
    past = vocab is not None and bool(banned) and (banned[-1] >= vocab or len(banned) >= vocab)
    if banned and (banned[0] < 0 or past):
        size = "" if vocab is None else f"{vocab} "
        raise ValueError(
            f"generate: banned_ids must be ids of the model's {size}tokens and leave one "
            f"allowed, got {banned}"
        )


def _check_prompt(prompt: object) -> None:
    """Refuse a prompt that is not a tensor of integer ids (any integer dtype; bool is not)."""
    ids = isinstance(prompt, torch.Tensor) and not (
        prompt.is_floating_point() or prompt.is_complex() or prompt.dtype == torch.bool
    )
    if not ids:
        what = type(prompt).__name__ if not isinstance(prompt, torch.Tensor) else prompt.dtype
        raise ValueError(
            f"generate: the prompt must be a tensor of integer ids, got {what} (a batch of "
            "prompts: one (B, N) tensor of equal lengths)"
        )


def _check_prompt_ids(prompts: torch.Tensor, vocab: int | None) -> None:
    """Refuse prompt ids outside the model's ``vocab`` tokens when the size is known (one read
    of the prompt's smallest and largest id, before the first step)."""
    if vocab is None:
        return
    low, high = torch.stack(torch.aminmax(prompts)).tolist()
    if low < 0 or high >= vocab:
        raise ValueError(
            f"generate: prompt ids must be ids of the model's {vocab} tokens (0 to {vocab - 1}), "
            f"got ids from {low} to {high}"
        )


def generate(
    model: nn.Module,
    prompt: torch.Tensor,
    num_tokens: int,
    *,
    temperature: float = 1.0,
    seed: int = 0,
    context: int | None = None,
    cache: bool = True,
    banned_ids: Sequence[int] = (),
    top_k: int | None = None,
) -> torch.Tensor:
    """Continue ``prompt`` by ``num_tokens`` sampled tokens and return the new ids: ``(N,)`` ids
    give ``(num_tokens,)``, a batch of ``B`` prompts of one length ``(B, N)`` gives
    ``(B, num_tokens)`` (several samples of one prompt: ``prompt.expand(B, -1)``), on the
    prompt's device. The sampling is :func:`stream`'s, row by row, and the ids stay on the
    model's device until the last step (no host read per token). The rows of a batch draw from
    one generator seeded by ``seed``: the same seed and prompts give the same ids, but a row's
    ids are not those of its prompt alone under that seed (greedy rows are, up to float
    rounding).

    Examples::

        >>> from cplxnet.models import build_model, make_config
        >>> model = build_model(make_config("decoder", vocab_size=20, d_model=8, num_heads=2))
        >>> generate(model, torch.tensor([3, 4]), 5, temperature=0.8, seed=1).shape
        torch.Size([5])
        >>> generate(model, torch.tensor([[3, 4], [5, 6]]), 5).shape
        torch.Size([2, 5])
    """
    _check_prompt(prompt)
    if prompt.dim() not in (1, 2) or prompt.numel() == 0:
        raise ValueError(
            "generate: the prompt must be non-empty ids, (N,) or a batch of one length (B, N), "
            f"got shape {tuple(prompt.shape)}"
        )
    rows = prompt if prompt.dim() == 2 else prompt[None]
    new = list(_steps(model, rows, num_tokens, temperature=temperature, seed=seed,
                      context=context, cache=cache, banned_ids=banned_ids,
                      top_k=top_k))  # fmt: skip
    out = torch.stack(new, -1) if new else rows.new_empty((len(rows), 0), dtype=torch.long)
    return (out if prompt.dim() == 2 else out[0]).to(prompt.device)


def stream(
    model: nn.Module,
    prompt: torch.Tensor,
    num_tokens: int,
    *,
    temperature: float = 1.0,
    seed: int = 0,
    context: int | None = None,
    cache: bool = True,
    banned_ids: Sequence[int] = (),
    top_k: int | None = None,
) -> Iterator[int]:
    """Yield the ids of ``num_tokens`` tokens sampled after ``prompt`` (``(N,)`` ids,
    ``N >= 1``), one at a time.

    Each step feeds the model the tokens it has not seen (with a key/value cache: the prompt,
    then one token per step) or the last ``context`` tokens (all of them with ``None``) and
    samples the next token from ``softmax(logits / temperature)`` with a generator seeded by
    ``seed`` (the same seed gives the same continuation), among the ``top_k`` most likely tokens
    when given (all of them by default; ties at the k-th logit stay in); ``temperature=0`` (and
    any temperature below :data:`GREEDY_BELOW`, the limit of sampling as the temperature falls)
    takes the most likely token (greedy). The ids in ``banned_ids`` are never produced (a run's
    text: :func:`stream_text` bans ``<pad>`` and ``<unk>``, ids 0 and 1). ``cache=True`` uses
    the model's key/value cache when it has one (``model.supports_kv_cache``) while the sequence
    fits in ``context``; past it the window of the last ``context`` tokens is recomputed at
    every step (its positions shift). The tokens are those of ``cache=False`` (up to float
    rounding in the logits). A window longer than the model can read
    (``model.unsupported_length``: a trainable table's ``max_len``) is a ``ValueError`` before
    the first token; ``context`` within the model's limit avoids it. :func:`generate` takes a
    batch of prompts.
    """
    _check_prompt(prompt)
    if prompt.dim() != 1 or len(prompt) == 0:
        raise ValueError("generate: the prompt must be a non-empty 1-d tensor of ids")
    for nxt in _steps(model, prompt[None], num_tokens, temperature=temperature, seed=seed,
                      context=context, cache=cache, banned_ids=banned_ids,
                      top_k=top_k):  # fmt: skip
        yield int(nxt[0])


@torch.no_grad()
def _steps(
    model: nn.Module,
    prompts: torch.Tensor,
    num_tokens: int,
    *,
    temperature: float,
    seed: int,
    context: int | None,
    cache: bool,
    banned_ids: Sequence[int],
    top_k: int | None,
) -> Iterator[torch.Tensor]:
    """The ``(B,)`` ids sampled at each of ``num_tokens`` steps after ``prompts`` ``(B, N)``, on
    the model's device (the sampling of :func:`stream`, one row per prompt)."""
    if isinstance(temperature, torch.Tensor) and temperature.numel() == 1:
        temperature = float(temperature)  # read once, before the first step
    real = not isinstance(temperature, bool) and isinstance(temperature, numbers.Real)
    if not real or not 0 <= temperature < math.inf:  # also refuses nan
        raise ValueError(f"generate: temperature must be a finite number >= 0, got {temperature!r}")
    if _not_whole(num_tokens):
        raise ValueError(f"generate: num_tokens must be a whole number, got {num_tokens!r}")
    if num_tokens < 0:
        raise ValueError(f"generate: num_tokens must be >= 0, got {num_tokens}")
    if context is not None and (_not_whole(context) or context < 1):
        raise ValueError(f"generate: context must be a positive number of tokens, got {context!r}")
    if _not_whole(seed):
        raise ValueError(f"generate: seed must be a whole number, got {seed!r}")
    if top_k is not None and (_not_whole(top_k) or top_k < 1):
        raise ValueError(f"generate: top_k must be a positive number of tokens, got {top_k!r}")
    if any(_not_whole(i) for i in banned_ids):
        raise ValueError(f"generate: banned_ids must be token ids, got {list(banned_ids)!r}")
    banned = sorted({int(i) for i in banned_ids})
    vocab_size = getattr(getattr(model, "config", None), "vocab_size", None)
    _check_banned(banned, vocab_size)
    _check_prompt_ids(prompts, vocab_size)
    device = next(model.parameters()).device
    if device.type == "meta":
        raise ValueError(
            "generate: the model is on the meta device and has no weights; materialise it "
            "first (model.to_empty(device=...), then load or initialise its weights)"
        )
    found = _unreadable(model, prompts.shape[1], num_tokens, context)
    if found is not None:
        raise ValueError(
            f"generate: the model cannot read {found[0]} tokens at once ({found[1]}); pass "
            "context=N with N within the model's limit (the window then slides)"
        )
    g = torch.Generator(device=device).manual_seed(seed)
    seq = prompts.to(device=device, dtype=torch.long)
    never = torch.tensor(banned, dtype=torch.long, device=device) if banned else None
    cached = cache and getattr(model, "supports_kv_cache", False)
    kv, fed = None, 0  # the cache and the number of tokens of seq it holds
    with evaluating(model):
        for _ in range(num_tokens):
            if context is not None and seq.shape[1] > context:  # the window slides: recompute
                kv, logits = None, model(seq[:, -context:])
            elif cached:
                kv = model.new_cache() if kv is None else kv
                logits, fed = model(seq[:, fed:], cache=kv), seq.shape[1]
            else:
                logits = model(seq)
            logits = logits[:, -1].double()  # (B, V)
            vocab = logits.shape[-1]
            if never is not None:
                _check_banned(banned, vocab)  # a model without config.vocab_size: its logits
                logits[:, never] = float("-inf")
            if top_k is not None and top_k < vocab:  # below the k-th largest: never
                kth = logits.topk(int(top_k), dim=-1).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            if temperature < GREEDY_BELOW:
                nxt = logits.argmax(-1)
            else:
                probs = torch.softmax(logits / temperature, -1)
                nxt = torch.multinomial(probs, 1, generator=g)[:, 0]
            seq = torch.cat([seq, nxt[:, None]], 1)
            yield nxt


def generate_text(
    run: LoadedLM | str,
    prompt: str,
    num_tokens: int | None = DEFAULT_NEW_TOKENS,
    *,
    temperature: float = 1.0,
    seed: int = 0,
    context: int | None = None,
    top_k: int | None = None,
) -> str:
    """The continuation of ``prompt`` as text (see :func:`stream_text`)."""
    return "".join(stream_text(run, prompt, num_tokens, temperature=temperature, seed=seed,
                               context=context, top_k=top_k))  # fmt: skip


def stream_text(
    run: LoadedLM | str,
    prompt: str,
    num_tokens: int | None = DEFAULT_NEW_TOKENS,
    *,
    temperature: float = 1.0,
    seed: int = 0,
    context: int | None = None,
    top_k: int | None = None,
) -> Iterator[str]:
    """The continuation of ``prompt`` as text, one token's text at a time (see :func:`stream`;
    ``context`` defaults to the run's training context for text, the whole sequence for
    synthetic runs). The prompt is checked before the first token.

    A synthetic run answers a prompt of symbols: ``<sep>`` is appended and, with
    ``num_tokens=None``, it generates the answer's length plus ``<eos>``."""
    if isinstance(run, str):
        run = load_lm_run(run)
    if not prompt:
        raise DataError("the prompt is empty; give some text to continue")
    synthetic = run.tokens == "synthetic"
    pieces = list(prompt) if synthetic else tokenize(prompt, run.tokens)
    if not pieces:
        raise DataError("the prompt has no tokens (only whitespace); give some text to continue")
    if synthetic:
        unknown = sorted({p for p in pieces if p not in run.vocab.stoi})
        if unknown:
            raise DataError(
                f"the prompt has symbols the task does not use ({''.join(unknown)}); use "
                + "".join(t for t in run.vocab.itos if len(t) == 1)
            )
        pieces.append(SEP)
        if num_tokens is None:
            num_tokens = len(pieces)
    elif num_tokens is None:
        num_tokens = DEFAULT_NEW_TOKENS
    ids = run.vocab.encode(pieces)
    if context is None and not synthetic:
        context = run.context  # a synthetic answer needs its whole prompt
    _check_length(run, len(ids), num_tokens, context)
    never = run.vocab.encode([PAD, UNK]).tolist()  # never in a training stream
    return _pieces(run, stream(run.model, ids, num_tokens, temperature=temperature, seed=seed,
                               context=context, banned_ids=never, top_k=top_k),
                   synthetic)  # fmt: skip


def unknown_prompt_tokens(run: LoadedLM, prompt: str) -> list[str]:
    """The distinct tokens of a text run's ``prompt`` that its vocabulary lacks, in order of first
    appearance: :func:`stream_text` reads each as ``<unk>``, a token no training window held.
    (A synthetic run refuses such a prompt.)"""
    if run.tokens == "synthetic":
        return []
    pieces = tokenize(prompt, run.tokens)
    return list(dict.fromkeys(p for p in pieces if p not in run.vocab.stoi))


def _pieces(run: LoadedLM, ids: Iterator[int], synthetic: bool) -> Iterator[str]:
    """The text of each id (words and synthetic symbols separated by single spaces)."""
    sep = " " if synthetic else detokenize(["", ""], run.tokens)
    for i, token in enumerate(ids):
        yield (sep if i else "") + run.vocab.itos[token]
