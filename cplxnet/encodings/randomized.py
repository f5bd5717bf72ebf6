r"""Randomized positional encodings (Ruoss, Delétang, Genewein, Grau-Moya, Csordás, Bennani, Legg,
Veness, "Randomized Positional Encodings Boost Length Generalization of Transformers", ACL
2023)."""

from __future__ import annotations

import inspect

import torch

from .._utils import check_sizes, factory_kwargs
from ._common import Positions, head_width
from .base import PositionalEncoding
from .registry import create_encoding, register_encoding

__all__ = ["RandomizedEncoding"]

# the hook of each site the wrapped encoding may act on; each must accept ``positions=``
_HOOKS = {"token": "embed", "input": "encode_input", "qk": "rotate"}
EVAL_POSITIONS = ("plain", "random")


@register_encoding
class RandomizedEncoding(PositionalEncoding):
    r"""``randomized``: in training, the wrapped encoding sees a sorted random subset of a
    larger range of positions; at evaluation, the plain positions (default) or, with
    ``eval_positions="random"``, sorted random subsets too.

    .. math::
        \text{training: } (m_0 < m_1 < \dots < m_{L-1}) = \mathrm{sort}(S),\quad
        S \subset \{0, \dots, M - 1\},\ |S| = L \text{ uniform};\qquad
        \text{evaluation: } m_t = t,

    and the wrapped encoding ``base`` is applied at the positions :math:`m_t` instead of ``t``
    (Ruoss et al. 2023, Section 3: "randomized positional encodings"), so a model trained on
    length ``L`` has seen positions up to ``M - 1``. ``M = max_positions`` (default 4 times the
    model's ``max_len``; the paper's ``M`` is 2048 for training lengths up to 40). One subset
    per forward (shared by the sequences of a batch and by every layer), drawn with
    ``torch.randperm`` from torch's random number generator on the input's device, so
    ``torch.manual_seed`` makes a run reproducible.

    ``eval_positions="random"`` is the protocol of the paper's code
    (google-deepmind/randomized_positional_encodings, whose noisy encodings sample at every
    call, evaluation included): evaluation draws sorted subsets as training does, from a
    generator of its own seeded with ``eval_seed`` each time the module enters evaluation mode
    (``.eval()``), so a score does not depend on torch's global seed and a repeated evaluation
    sees the same positions. An evaluation input then needs at most ``M`` tokens. Either way
    the encoding does not decode with a key/value cache (``supports_kv_cache`` is False):
    generation recomputes the window.

    ``base``: any registered encoding whose hooks take the keyword ``positions``: ``rotary``
    (default; its ``rotate``), ``sinusoidal``, ``trainable`` (its ``encode_input``; built with
    ``max_len = M`` rows) and ``complex-order`` (its ``embed``). Encodings acting on the logits
    or values (relative schemes) and xPos (its window-centred scale) have no absolute
    positions to replace and are refused. The base gets the model context and its default
    options; its parameters are ``base.*`` in the state_dict.

    The subset is drawn by the first hook of a forward that the model calls: ``embed`` when the
    base acts on the word embedding, else ``encode_input`` (this encoding acts on ``"input"``
    for that, a no-op there for a rotary base); the attention hooks of every layer then reuse
    it. A model built by hand calls ``x = encoding.encode_input(x)`` (or ``draw(L)``) once per
    forward, as :mod:`cplxnet.models` do; ``rotate`` refuses to run without a draw of its
    length (it would otherwise keep one set of positions for the whole training).

    Args:
        d_model, num_heads, vocab_size, max_len, causal: model context, given to ``base``.
        base: the wrapped encoding's name.
        max_positions: ``M``, the range positions are drawn from (``>= max_len``).
        eval_positions: ``"plain"`` (``0 .. L-1`` at evaluation) or ``"random"`` (sorted random
            subsets at evaluation too).
        eval_seed: the seed of the evaluation draws of ``eval_positions="random"``.
        device, dtype: model dtype.

    Examples::

        >>> from cplxnet.encodings import create_encoding
        >>> enc = create_encoding("randomized", d_model=8, num_heads=2, max_len=16)
        >>> enc.max_positions, enc.base.name
        (64, 'rotary')
    """

    name = "randomized"
    acts_on = frozenset({"input", "qk"})

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        vocab_size: int | None = None,
        max_len: int = 512,
        causal: bool = False,
        base: str = "rotary",
        max_positions: int | None = None,
        *,
        eval_positions: str = "plain",
        eval_seed: int = 0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        head_width(d_model, num_heads, owner)
        check_sizes(owner, max_len=max_len)
        if max_positions is None:
            max_positions = 4 * max_len
        check_sizes(owner, max_positions=max_positions)
        if max_positions < max_len:
            raise ValueError(
                f"{owner}: max_positions ({max_positions}) must be at least the model's max_len "
                f"({max_len}): positions are drawn from range(max_positions)"
            )
        if eval_positions not in EVAL_POSITIONS:
            raise ValueError(
                f"{owner}: eval_positions must be one of {', '.join(EVAL_POSITIONS)}, got "
                f"{eval_positions!r}"
            )
        if not isinstance(base, str) or base == self.name:
            raise ValueError(f"{owner}: base must be the name of another encoding, got {base!r}")
        self.max_positions = int(max_positions)
        self.eval_positions, self.eval_seed = eval_positions, int(eval_seed)
        self._eval_generator: torch.Generator | None = None
        self.base = create_encoding(
            base,
            d_model=d_model,
            num_heads=num_heads,
            vocab_size=vocab_size,
            max_len=self.max_positions,
            causal=causal,
            device=fk["device"],
            dtype=fk["dtype"],
        )
        unusable = sorted(self.base.acts_on - set(_HOOKS))
        refusing = [
            s
            for s in sorted(self.base.acts_on & set(_HOOKS))
            if "positions" not in inspect.signature(getattr(self.base, _HOOKS[s])).parameters
        ]
        if unusable or refusing or not self.base.acts_on:
            why = (
                f"it acts on {unusable}, where there are no absolute positions to replace"
                if unusable
                else f"its {_HOOKS[refusing[0]]} takes no positions"
                if refusing
                else "it acts nowhere"
            )
            raise ValueError(
                f"{owner}: cannot randomize the positions of {base!r}: {why}; wrap an "
                "absolute or rotary encoding (rotary, sinusoidal, trainable, complex-order)"
            )
        self.acts_on = frozenset(self.base.acts_on | {"input"})
        self.field = self.base.field
        self.complex_model = self.base.complex_model
        self._dtype = fk["dtype"]
        self._drawn: Positions | None = None

    def reset_parameters(self) -> None:
        self.base.reset_parameters()

    @property
    def randomizing(self) -> bool:
        """Whether this forward's positions are drawn: in training, and at evaluation with
        ``eval_positions="random"``."""
        return self.training or self.eval_positions == "random"

    def train(self, mode: bool = True) -> RandomizedEncoding:
        self._drawn = None  # no draw outlives a change of mode
        if not mode:
            self._eval_generator = None  # the evaluation draws restart from eval_seed
        return super().train(mode)

    def _generator(self, device: torch.device | str | None) -> torch.Generator | None:
        if self.training:
            return None  # torch's generator
        device = torch.device("cpu" if device is None else device)
        if self._eval_generator is None or self._eval_generator.device != device:
            self._eval_generator = torch.Generator(device=device).manual_seed(self.eval_seed)
        return self._eval_generator

    def draw(self, length: int, device: torch.device | str | None = None) -> Positions | None:
        """Positions for ``length`` tokens: a sorted random subset of ``range(max_positions)``
        when :attr:`randomizing` (kept for the attention hooks of this forward), else ``None``
        (``0 .. length-1``)."""
        self._drawn = None
        if not self.randomizing:
            return None
        if length > self.max_positions:
            raise ValueError(
                f"{type(self).__name__}: {length} tokens need max_positions >= {length} (got "
                f"{self.max_positions}); build it with randomized:max_positions=..."
            )
        generator = self._generator(device)
        index = torch.randperm(self.max_positions, device=device, generator=generator)
        self._drawn = Positions(index[:length].sort().values, self.max_positions)
        return self._drawn

    def _current(self, length: int, device) -> Positions | None:
        if not self.randomizing:
            return None
        drawn = self._drawn
        if drawn is None or drawn.index.shape[0] != length:
            drawn = self.draw(length, device)
        return drawn

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        if "token" not in self.base.acts_on:
            return super().embed(ids)  # the base class's error
        return self.base.embed(ids, positions=self.draw(ids.shape[1], ids.device))

    def encode_input(self, x: torch.Tensor) -> torch.Tensor:
        if "token" not in self.base.acts_on:
            positions = self.draw(x.shape[1], x.device)
        else:
            positions = self._current(x.shape[1], x.device)
        if "input" not in self.base.acts_on:
            return x
        return self.base.encode_input(x, positions=positions)

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if "qk" not in self.base.acts_on:
            return q, k, v
        if not self.randomizing:
            return self.base.rotate(q, k, v)
        if q.shape[-2] != k.shape[-2]:
            raise ValueError(
                f"{type(self).__name__}: randomized positions need as many queries as keys, got "
                f"{q.shape[-2]} queries and {k.shape[-2]} keys"
            )
        drawn = self._drawn
        if drawn is None or drawn.index.shape[0] != q.shape[-2]:
            raise ValueError(
                f"{type(self).__name__}: no positions drawn for these {q.shape[-2]} tokens; call "
                "x = encoding.encode_input(x) (or encoding.draw(L)) once per forward before the "
                "attention layers, which reuse its positions (the cplxnet.models models do)"
            )
        return self.base.rotate(q, k, v, positions=drawn)

    def extra_repr(self) -> str:
        text = f"max_positions={self.max_positions}"
        if self.eval_positions != "plain":
            text += f", eval_positions={self.eval_positions!r}, eval_seed={self.eval_seed}"
        return f"{text}, dtype={self.dtype}"
