r"""Complex-order word embeddings (Wang, Zhao, Lioma, Li, Zhang, Simonsen, "Encoding word order in
complex embeddings", ICLR 2020)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .. import functional as CF
from .._utils import check_choice, factory_kwargs, real_dtype
from ..init import check_word_init, word_init_
from ._common import (
    Positions,
    check_base,
    check_ids,
    check_offset,
    complex_features,
    sinusoid_frequencies,
)
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["ComplexOrderEncoding"]

SHARING = ("word", "shared", "dimension")
FREQUENCY_INITS = ("sinusoidal", "uniform")


@register_encoding
class ComplexOrderEncoding(PositionalEncoding):
    r"""``complex-order``: each word is a continuous function of its position,

    .. math::
        f(j, \text{pos})_d = r_{j,d}\, e^{i (w_{j,d}\, \text{pos} + \theta_{j,d})}

    (amplitude ``r``, frequency ``w``, initial phase :math:`\theta`), replacing the word
    embedding (the "token" site). It satisfies the paper's two properties: the embedding at
    ``pos + n`` is a fixed linear map (element-wise :math:`e^{i w n}`) of the one at ``pos``,
    independent of ``pos``, and it is bounded. Positions are ``0 .. L-1`` (padding at the end).

    Sharing (the paper's ablation variants), for ``frequency`` and ``amplitude``:

    * ``"word"``: one value per word and dimension, a ``(V, D)`` table (the paper's model);
    * ``"shared"``: one value per dimension shared by all words, ``(D,)``; with frequency
      ``"shared"``, amplitude ``"shared"`` fixed to one, no phase and frozen sinusoidal
      frequencies this is exactly the sinusoidal encoding :math:`e^{i\,\text{pos}\,w}`;
    * ``"dimension"``: one value per word shared by its dimensions, ``(V, 1)``;
    * frequency ``"none"``: no position at all (:math:`w = 0`; the ``complex-vanilla`` baseline).

    ``phase=False`` drops :math:`\theta` (:math:`\theta = 0`).

    Initialisation: frequencies ``frequency_init="sinusoidal"``: :math:`w_d = \text{base}^{-d/D}`
    (= :math:`10000^{-2d/d_{real}}`) in every row (for ``"dimension"`` sharing, each word draws
    :math:`\text{base}^{-u}`, :math:`u \sim U(0, 1)`, the same log-uniform spectrum);
    ``"uniform"``: :math:`U(0, \pi)` (the band of frequencies distinguishable on integer
    positions); a float: that constant. Amplitudes per word and dimension (sharing ``"word"``),
    a real table: ``init="normal"``: :math:`\mathcal{N}(0, s^2)`, by default :math:`s = 1` (as
    ``torch.nn.Embedding``; ``E|f|^2 = 1``); ``init="uniform"``: :math:`U(-s, s)`, by default
    :math:`s = 0.25`, Kim's initialisation of random word vectors (EMNLP 2014): vectors about
    seven times shorter at the start, which matters on small data sets (see
    :func:`cplxnet.init.word_init_`). Amplitudes shared over words or dimensions start at one.
    Phases :math:`U(0, 2\pi)` whatever ``init``: a phase is an angle, and the whole circle is its
    only unbiased range (``init`` sets the size of the vectors, which the amplitudes alone carry).

    ``padding_idx``: that word's outputs are zero and its rows get no gradient. ``sparse=True``:
    the per-word tables get sparse gradients (use :meth:`sparse_parameters` with
    ``torch.optim.SparseAdam`` and :meth:`dense_parameters` with a dense optimiser); dense Adam
    over three ``V x D`` tables is the dominant cost of a small classifier's step.

    Real model (``dtype`` real, width ``D`` even): ``D/2`` complex features, returned packed
    (interleaved re/im), so the real twin sees ``D`` reals. All parameters are real.

    Args:
        vocab_size: number of words ``V``.
        d_model: model width.
        padding_idx: padding token id (outputs zero, no gradient).
        phase: learn the initial phase :math:`\theta`.
        frequency: ``"word"``, ``"shared"``, ``"dimension"`` or ``"none"``.
        amplitude: ``"word"``, ``"shared"`` or ``"dimension"``.
        frequency_init: ``"sinusoidal"``, ``"uniform"`` or a float.
        base: base of the sinusoidal frequency init.
        init, init_scale: initialisation of the amplitude table (sharing ``"word"``),
            ``"normal"`` or ``"uniform"``, and its scale ``s`` (``None``: 1 for normal, 0.25
            for uniform).
        sparse: sparse gradients for the per-word tables.
        device, dtype: model dtype (complex by default; real for a real twin).

    Examples::

        >>> enc = ComplexOrderEncoding(vocab_size=10, d_model=4)
        >>> z = enc.embed(torch.tensor([[1, 2, 3]]))  # word embedding r e^{i(w pos + theta)}
        >>> z.shape, z.dtype
        (torch.Size([1, 3, 4]), torch.complex64)
    """

    name = "complex-order"
    field = "complex"
    acts_on = frozenset({"token"})
    supports_kv_cache = True

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        padding_idx: int | None = None,
        phase: bool = True,
        frequency: str = "word",
        amplitude: str = "word",
        frequency_init: str | float = "sinusoidal",
        base: float = 10000.0,
        sparse: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        init: str = "normal",
        init_scale: float | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        self.init, self.init_scale = check_word_init(init, init_scale, owner)
        if not isinstance(vocab_size, int) or vocab_size <= 0:
            raise ValueError(f"{owner}: vocab_size must be a positive int, got {vocab_size!r}")
        if padding_idx is not None and not -vocab_size <= padding_idx < vocab_size:
            raise ValueError(f"{owner}: padding_idx {padding_idx} out of range for {vocab_size}")
        if padding_idx is not None and padding_idx < 0:
            padding_idx += vocab_size
        self.frequency = check_choice(frequency, SHARING + ("none",), owner, "frequency")
        self.amplitude = check_choice(amplitude, SHARING, owner, "amplitude")
        if not isinstance(frequency_init, (int, float)):
            check_choice(frequency_init, FREQUENCY_INITS, owner, "frequency_init")
        self.frequency_init, self.base = frequency_init, check_base(base, owner)
        self.vocab_size, self.d_model, self.padding_idx = vocab_size, d_model, padding_idx
        self.phase, self.sparse = bool(phase), bool(sparse)
        self.complex_model = fk["dtype"].is_complex
        self._dtype = fk["dtype"]
        n = self.features = complex_features(d_model, self.complex_model, owner)
        rk = {"device": fk["device"], "dtype": real_dtype(fk["dtype"])}
        shapes = {"word": (vocab_size, n), "shared": (n,), "dimension": (vocab_size, 1)}
        self.amplitude_weight = nn.Parameter(torch.empty(shapes[self.amplitude], **rk))
        if self.frequency == "none":
            self.register_parameter("frequency_weight", None)
        else:
            self.frequency_weight = nn.Parameter(torch.empty(shapes[self.frequency], **rk))
        if self.phase:
            self.phase_weight = nn.Parameter(torch.empty(vocab_size, n, **rk))
        else:
            self.register_parameter("phase_weight", None)
        self.reset_parameters()

    # ----------------------------------------------------------------------------------------

    def reset_parameters(self) -> None:
        with torch.no_grad():
            a = self.amplitude_weight
            if self.amplitude == "word":
                word_init_(a, self.init, self.init_scale)
            else:
                a.fill_(1.0)
            w = self.frequency_weight
            if w is not None:
                init = self.frequency_init
                if isinstance(init, (int, float)):
                    w.fill_(float(init))
                elif init == "uniform":
                    w.uniform_(0.0, math.pi)
                elif self.frequency == "dimension":
                    w.copy_(self.base ** -torch.rand(w.shape, dtype=torch.float64))
                else:
                    w.copy_(sinusoid_frequencies(self.features, self.base).expand_as(w))
            if self.phase_weight is not None:
                self.phase_weight.uniform_(0.0, 2.0 * math.pi)
            if self.padding_idx is not None:
                for t in (a, w, self.phase_weight):
                    if t is not None and t.dim() == 2:
                        t[self.padding_idx].zero_()

    def sparse_parameters(self) -> list[nn.Parameter]:
        """Parameters that receive sparse gradients (per-word tables when ``sparse=True``)."""
        if not self.sparse:
            return []
        return [p for p in self._per_word() if p is not None]

    def dense_parameters(self) -> list[nn.Parameter]:
        """The other parameters (for a dense optimiser)."""
        sparse = {id(p) for p in self.sparse_parameters()}
        return [p for p in self.parameters() if id(p) not in sparse]

    def _per_word(self) -> list[nn.Parameter | None]:
        out = []
        if self.amplitude != "shared":
            out.append(self.amplitude_weight)
        if self.frequency in ("word", "dimension"):
            out.append(self.frequency_weight)
        out.append(self.phase_weight)
        return out

    def _lookup(self, table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        if table.dim() == 1:  # shared by all words: (n,)
            return table
        return F.embedding(ids, table, self.padding_idx, sparse=self.sparse)  # (B, L, n or 1)

    # ----------------------------------------------------------------------------------------

    def embed(
        self, ids: torch.Tensor, offset: int = 0, *, positions: Positions | None = None
    ) -> torch.Tensor:  # (B, L) -> (B, L, D)
        """The word embeddings at positions ``offset .. offset+L-1`` (``offset``: the tokens
        already in a decoder's cache; or the keyword-only ``positions``)."""
        check_ids(ids, self.vocab_size, type(self).__name__)
        check_offset(offset, type(self).__name__)
        B, L = ids.shape
        n = self.features
        # float32 at least: positions stay exact integers (bfloat16 holds them only to 256) and
        # the map has a complex type (there is no complex bfloat16); the result is cast back
        work = torch.promote_types(self.amplitude_weight.dtype, torch.float32)
        r = self._lookup(self.amplitude_weight, ids).to(work)  # (B, L, n), (B, L, 1) or (n,)
        w = theta = None
        if positions is None:
            pos = torch.arange(offset, offset + L, device=ids.device, dtype=work)[:, None]
        else:
            pos = positions.index.to(work)[:, None]
        if self.frequency_weight is not None:
            w = self._lookup(self.frequency_weight, ids).to(work)
        if self.phase_weight is not None:
            theta = self._lookup(self.phase_weight, ids).to(work)
        z = CF.complex_order(r, w, theta, pos).expand(B, L, n)  # (B, L, n) complex
        if self.padding_idx is not None and self.amplitude != "word":
            z = z * (ids != self.padding_idx).unsqueeze(-1).to(r.dtype)
        if self.complex_model:
            return z.to(self.dtype)  # (B, L, D)
        return torch.view_as_real(z).flatten(-2).to(self.dtype)  # (B, L, D) packed

    def extra_repr(self) -> str:
        return (
            f"vocab_size={self.vocab_size}, d_model={self.d_model}, "
            f"padding_idx={self.padding_idx}, phase={self.phase}, frequency={self.frequency!r}, "
            f"amplitude={self.amplitude!r}, init={self.init!r}, init_scale={self.init_scale}, "
            f"sparse={self.sparse}, dtype={self._dtype}"
        )
