r"""Decoder-only causal Transformer language model, complex or real, with any encoding."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call
from torch.utils._python_dispatch import TorchDispatchMode

import cplxnet.nn as cnn
from cplxnet.encodings import SITES, check_sites, create_encoding
from cplxnet.functional import lengths_from_padding_mask
from cplxnet.utils import check_indices, without_autocast

from .common import NumberField, TokenEmbedding
from .config import DecoderConfig
from .transformer import build_encoder

__all__ = ["Decoder", "next_token_logits", "ForwardTooLargeError", "forward_memory_limit"]

#: ``(max_bytes, allowed_length, batch_tokens)`` of the innermost :func:`forward_memory_limit`,
#: or None
_LIMIT: contextvars.ContextVar[tuple[int, int, int] | None] = contextvars.ContextVar(
    "cplxnet_decoder_memory_limit", default=None
)


def _too_large(length: int, err: BaseException) -> str:
    return (f"a sequence of {length:,} tokens does not fit in this machine's memory "
            f"({str(err).splitlines()[0][:200]})")  # fmt: skip


def _is_allocation_error(err: BaseException) -> bool:
    """Whether ``err`` is a failed allocation, or a tensor size past what a storage can hold."""
    text = str(err).lower()
    words = ("allocate", "out of memory", "overflow")
    return isinstance(err, torch.OutOfMemoryError) or any(w in text for w in words)


class ForwardTooLargeError(Exception):
    """:meth:`Decoder.unsupported_length` inside :func:`forward_memory_limit`: a forward pass
    over ``batch`` sequences of ``length`` tokens would build tensors of ``batch * largest``
    bytes (one sequence's of shape ``shape``, typically a layer's attention scores,
    ``(H, length, length)``), more than ``limit``; ``longest`` is the longest length within the
    limit (0 if none)."""

    def __init__(self, length: int, largest: int, shape: tuple[int, ...], limit: int,
                 longest: int, batch: int = 1) -> None:  # fmt: skip
        self.length, self.largest, self.shape = length, largest, tuple(shape)
        self.limit, self.longest, self.batch = limit, longest, batch
        super().__init__(
            f"one forward pass over {batch} sequence(s) of {length:,} tokens would build "
            f"tensors of shape {self.shape} ({batch * largest / 2**30:.1f} GiB), more than "
            f"{limit / 2**30:.1f} GiB; at most {longest:,} tokens fit"
        )


@contextlib.contextmanager
def forward_memory_limit(
    max_bytes: int, *, allowed: int = 0, batch_tokens: int = 1
) -> Iterator[None]:
    """Within the block, :meth:`Decoder.unsupported_length` raises :class:`ForwardTooLargeError` for
    a length ``L`` longer than ``allowed`` whose forward pass would build a tensor of more than
    ``max_bytes``: the largest tensor of one sequence (measured on the ``meta`` device, where
    attention builds its ``(1, H, L, L)`` scores) times the ``max(1, batch_tokens // L)``
    sequences a scorer batching about ``batch_tokens`` tokens runs at once. A caller that checks
    a length before scoring it so refuses one that would not fit in memory, or would run as one
    operation too long to interrupt, before computing anything."""
    token = _LIMIT.set((int(max_bytes), int(allowed), int(batch_tokens)))
    try:
        yield
    finally:
        _LIMIT.reset(token)


class _Largest(TorchDispatchMode):
    """Records the size in bytes and the shape of the largest tensor any op produces."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes, self.shape = 0, ()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.numel() * t.element_size() > self.bytes:
                self.bytes, self.shape = t.numel() * t.element_size(), tuple(t.shape)
        return out


@without_autocast
def next_token_logits(
    h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, scale: float = 1.0
) -> torch.Tensor:
    r"""Real next-token logits of hidden states:
    :math:`\ell_w = s\,\mathrm{Re}(h\, e_w^H) + b_w` (``s = scale``).

    ``h`` ``(..., D)`` complex (or real), ``weight`` ``(V, 2D)`` real: row ``w`` is the packed
    (interleaved ``re, im``) complex vector :math:`e_w` (for a real ``h``, ``(V, D)``). Every real
    linear functional of a complex vector is :math:`h \mapsto \mathrm{Re}(h\, e^H)` for some
    complex :math:`e`, and :math:`\mathrm{Re}(h e^H) = h_r \cdot e_r + h_i \cdot e_i` is the real
    dot product of the packed views, so this is one real GEMM (the cost of the equal-FLOP real
    twin's head). Returns ``(..., V)`` real. A complex ``h`` is read in its own precision under
    autocast, as the complex layers; a real ``h`` follows autocast, as ``torch.nn.Linear``.
    """
    packed = torch.view_as_real(h.resolve_conj()).flatten(-2) if h.is_complex() else h
    if scale == 1.0:
        return F.linear(packed, weight, bias)
    out = F.linear(packed, weight) * scale
    return out if bias is None else out + bias


class Decoder(nn.Module):
    r"""Decoder-only Transformer language model (Radford et al., "Improving Language Understanding
    by Generative Pre-Training", 2018): ``forward(ids (B, L)) -> logits (B, L, V)`` real, where
    position ``t`` predicts token ``t + 1`` from tokens ``0 .. t`` only.

    .. math::
        x = \mathrm{embed}(ids),\quad h = N_f(\mathrm{Layer}_{n}(\dots\mathrm{Layer}_1(x))),\quad
        \ell_{t,w} = \mathrm{Re}(h_t\, e_w^H) + b_w

    * Embedding stage: :class:`cplxnet.models.TokenEmbedding` (the encoding's ``embed`` replaces
      the word table when it acts on ``"token"`` -- complex-order --, else a word table and
      ``encode_input``).
    * Layers: :class:`cplxnet.nn.TransformerEncoder` with ``is_causal=True`` (query ``t`` attends
      to keys ``j <= t``), pre-norm with a final norm (``norm_first=True``, default) or post-norm;
      the encoding acts at every site (``layer``, ``qk``, ``logits``, ``values``) through the
      layers. The encoding is built with ``causal=True`` (encodings whose constructor accepts
      it switch to their unidirectional form).
    * Head (:func:`next_token_logits`): a real next-token score must be a real-valued function
      of the complex hidden state; the most general real-*linear* one is
      :math:`\mathrm{Re}(h\, e_w^H) + b_w`, i.e. a real linear layer on the packed view
      ``[Re h, Im h]`` (``2D -> V``). With ``tie_embeddings`` and a plain word table,
      :math:`e_w` is word ``w``'s embedding (the complex analogue of weight tying: the logit is
      the real part of the Hermitian inner product of the state and the word vector, largest when
      they are aligned in phase), scaled by ``1/sqrt(2D)`` (``1/sqrt(D)`` in a real model: the
      packed width) so that unit-variance word vectors give logits of unit scale at
      initialisation (the convention of Mesh TensorFlow's T5 for tied heads). Complex-order's
      embedding depends on the position, so it has no position-free table and its head is
      untied (``self.tied`` is False). The real twin has the same head on real states
      (ordinary weight tying).

    The model has no length limit of its own: :meth:`unsupported_length` says whether the
    encoding can represent a length (a trainable table of ``max_len`` rows cannot go beyond).

    Incremental decoding: ``forward(ids, cache=model.new_cache())`` keeps each layer's keys and
    values (:class:`cplxnet.nn.KVCache`); the next call's ``ids`` are the positions after the
    cached ones, so a new token costs one step. It gives the logits of the uncached pass over the
    whole sequence when :attr:`supports_kv_cache` (the encoding's promise that its positions do
    not change as the sequence grows).
    """

    supported_sites: ClassVar[frozenset[str]] = frozenset(SITES)
    #: query ``t`` attends to tokens ``<= t`` only (read by ``cplxnet.inspect.bias_by_distance``)
    is_causal: ClassVar[bool] = True

    def __init__(
        self,
        config: DecoderConfig,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(config, DecoderConfig):
            raise TypeError(f"Decoder: expected a DecoderConfig, got {type(config).__name__}")
        self.config = config
        self.field = field = NumberField(config.complex, device, dtype)
        self.encoding = create_encoding(
            config.encoding,
            d_model=config.d_model,
            num_heads=config.num_heads,
            vocab_size=config.vocab_size,
            max_len=config.max_len,
            causal=True,
            device=device,
            dtype=field.dtype,
            # per-word tables (complex-order, ...) take the model's padding id, sparsity and
            # initialisation unless the user's options set them
            defaults=config.word_table_options(),
            **config.encoding_options,
        )
        check_sites(self.encoding, self.supported_sites, config.family)
        cnn.check_score(getattr(config, "score", "real"), self.encoding, config.family)
        self.embedding = TokenEmbedding(config, self.encoding, field)
        self.layers = build_encoder(config, field)
        # the layers get the encoding only if it acts on one of their sites (the embedding stage
        # applies "token" and "input")
        self._layer_encoding = bool(self.encoding.acts_on & cnn.TransformerEncoder.sites)
        self.tied = config.tie_embeddings and self.embedding.word is not None
        width = 2 * config.d_model if field.complex else config.d_model  # packed real width
        V = config.vocab_size
        self.head_weight = (
            None if self.tied else nn.Parameter(torch.empty(V, width, **field.real_fk))
        )
        self.head_bias = nn.Parameter(torch.empty(V, **field.real_fk))
        self.head_scale = width**-0.5 if self.tied else 1.0
        self._reset_head()

    def _reset_head(self) -> None:
        with torch.no_grad():
            if self.head_weight is not None:  # as torch's nn.Linear(width, V)
                bound = self.head_weight.shape[1] ** -0.5
                self.head_weight.uniform_(-bound, bound)
            self.head_bias.zero_()

    def reset_parameters(self) -> None:
        """Re-initialise every parameter (embedding, encoding, layers, head)."""
        for m in self.modules():
            if m is not self and hasattr(m, "reset_parameters"):
                m.reset_parameters()
        self._reset_head()

    @property
    def is_complex(self) -> bool:
        return self.field.complex

    def output_weight(self) -> torch.Tensor:
        """The head's ``(V, 2D)`` packed (complex model) or ``(V, D)`` (real model) weight: the
        word table's when tied, else the head's own."""
        if self.head_weight is not None:
            return self.head_weight
        word = self.embedding.word
        return word.packed_weight if self.field.complex else word.weight

    @property
    def supports_kv_cache(self) -> bool:
        """True if the encoding allows incremental decoding with a key/value cache."""
        return self.encoding.supports_kv_cache

    def new_cache(self) -> list[cnn.KVCache]:
        """An empty key/value cache for :meth:`forward` (one :class:`cplxnet.nn.KVCache` per
        layer); a ValueError if the encoding cannot be cached."""
        if not self.supports_kv_cache:
            raise ValueError(
                f"{type(self).__name__}: encoding {self.config.encoding!r} cannot be cached (its "
                "logits change as the window grows); call the model on the whole window instead"
            )
        return [cnn.KVCache() for _ in range(self.config.num_layers)]

    def forward(
        self,
        ids: torch.Tensor,
        padding_mask: torch.Tensor | None = None,
        *,
        cache: list[cnn.KVCache] | None = None,
    ) -> torch.Tensor:
        """Next-token logits ``(B, L, V)`` (real) of the token ids ``(B, L)``.

        ``padding_mask`` ``(B, L)`` bool, True = padding at the end of a sequence (optional: with
        the causal mask, padding after a position never reaches it; the mask only zeroes the
        padded inputs). Padding elsewhere is a ``ValueError``: the positions of an absolute
        encoding would shift. ``cache`` (:meth:`new_cache`, no padding): ``ids`` are the positions
        after the cached ones, whose keys and values are appended to it.
        """
        owner = type(self).__name__
        if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int64, torch.int32):
            got = ids.dtype if isinstance(ids, torch.Tensor) else type(ids).__name__
            raise TypeError(f"{owner}: ids must be an int64 tensor of token ids, got {got}")
        if ids.dim() != 2 or ids.shape[1] == 0:
            raise ValueError(
                f"{owner}: ids must have shape (B, L) with L >= 1, got {tuple(ids.shape)}"
            )
        check_indices(ids, self.config.vocab_size, owner, "ids")
        if padding_mask is None:
            embed_mask = torch.zeros(ids.shape, dtype=torch.bool, device=ids.device)
        else:
            if not isinstance(padding_mask, torch.Tensor) or padding_mask.dtype != torch.bool:
                raise TypeError(f"{owner}: padding_mask must be a torch.bool tensor")
            if padding_mask.shape != ids.shape:
                raise ValueError(
                    f"{owner}: padding_mask must have the shape of ids {tuple(ids.shape)}, got "
                    f"{tuple(padding_mask.shape)}"
                )
            lengths_from_padding_mask(padding_mask, owner)  # padding only at the end
            embed_mask = padding_mask
        offset = None
        if cache is not None:
            if padding_mask is not None:
                raise ValueError(f"{owner}: a cache serves unpadded sequences; drop padding_mask")
            if not self.supports_kv_cache:
                self.new_cache()  # its error
            offset = len(cache[0]) if cache else 0
        x = self.embedding(ids, embed_mask, self.encoding, offset)  # (B, L, D)
        encoding = self.encoding if self._layer_encoding else None
        kw = {} if cache is None else {"cache": cache}  # a stack without a cache needs none
        h = self.layers(x, src_key_padding_mask=padding_mask, is_causal=True, encoding=encoding,
                        **kw)  # fmt: skip
        return next_token_logits(h, self.output_weight(), self.head_bias, self.head_scale)

    @torch.no_grad()
    def unsupported_length(self, length: int) -> str | None:
        """Why the model cannot process sequences of ``length`` tokens, or ``None`` if it can.

        The encoding decides (e.g. a trainable table of ``max_len`` rows has no position beyond
        it): one sequence of ``length`` padding ids is run through the model in evaluation mode
        on the ``meta`` device (the model's own code on shapes only: nothing is computed or
        allocated, whatever the length) and the encoding's ``ValueError`` message is returned. A
        model whose forward cannot run on ``meta`` is checked by a real forward instead.

        Inside :func:`forward_memory_limit`, a length the model can process but whose forward
        would build a tensor over the limit raises :class:`ForwardTooLargeError`.
        """
        limit = _LIMIT.get()
        reason, largest, shape = self._shape_forward(length, measure=limit is not None)
        if reason is not None or limit is None or largest is None:
            return reason
        max_bytes, allowed, batch_tokens = limit
        batch = max(1, batch_tokens // length)  # the sequences one scoring pass runs at once
        if length <= allowed or largest * batch <= max_bytes:
            return None
        lo, hi = 0, length  # the longest length within the limit: in [lo, hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            size = self._shape_forward(mid, measure=True)[1]
            fits = size is not None and size * max(1, batch_tokens // mid) <= max_bytes
            lo, hi = (mid, hi) if fits else (lo, mid)
        raise ForwardTooLargeError(length, largest, shape, max_bytes, max(lo, allowed), batch)

    def _shape_forward(
        self, length: int, measure: bool = False
    ) -> tuple[str | None, int | None, tuple[int, ...]]:
        """``(reason, bytes, shape)``: the encoding's reason to refuse ``length`` tokens (or
        ``None``) and, with ``measure``, the size and shape of the largest tensor a forward pass
        over one sequence of that length builds, from a forward on the ``meta`` device (``None``
        bytes when the model cannot run there: then a real forward gives the reason)."""
        was_training = self.training
        self.eval()
        try:
            tensors = [*self.named_parameters(), *self.named_buffers()]  # tied ones once
            state = {name: t.detach().to("meta") for name, t in tensors}
            try:  # 2**63 tokens overflow torch.full itself: a size error like the others
                ids = torch.full((1, length), self.config.padding_idx, dtype=torch.long,
                                 device="meta")  # fmt: skip
                largest = _Largest()
                with largest if measure else contextlib.nullcontext():
                    functional_call(self, state, (ids,), strict=False)
            except ValueError as err:
                return str(err), None, ()
            except (RuntimeError, NotImplementedError, TypeError) as err:  # no meta form
                if _is_allocation_error(err):  # never retried for real at this length
                    return _too_large(length, err), None, ()
                try:
                    ids = torch.full((1, length), self.config.padding_idx, dtype=torch.long,
                                     device=self.head_bias.device)  # fmt: skip
                    self(ids)
                except ValueError as err:
                    return str(err), None, ()
                except RuntimeError as err:
                    if _is_allocation_error(err):
                        return _too_large(length, err), None, ()
                    raise
                return None, None, ()
            return None, largest.bytes, largest.shape
        finally:
            self.train(was_training)

    def sparse_parameters(self) -> list[nn.Parameter]:
        """See :func:`cplxnet.models.sparse_parameters`."""
        from .common import sparse_parameters

        return sparse_parameters(self)

    def extra_repr(self) -> str:
        return (
            f"vocab_size={self.config.vocab_size}, d_model={self.config.d_model}, "
            f"num_layers={self.config.num_layers}, tied={self.tied}"
        )
