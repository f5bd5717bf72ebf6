r"""Transformer decoder layers and the encoder-decoder Transformer for complex (and real)
sequences (Vaswani et al., "Attention Is All You Need", NeurIPS 2017), drop-ins for
:class:`torch.nn.TransformerDecoderLayer`, :class:`torch.nn.TransformerDecoder` and
:class:`torch.nn.Transformer`.

Positional encodings in cross-attention. The decoder's self-attention takes ``encoding=`` as
the encoder's does (every site: "layer", "qk", "logits", "values"). Cross-attention takes its own
``memory_encoding=`` (default ``None``: content only, as Vaswani et al. and T5, where positions
enter through each side's own inputs and self-attention). Queries are target positions
``t = 0 .. T-1`` and keys source positions ``s = 0 .. S-1``, indices of two different
sequences, so:

* an encoding acting on "qk" (``rotary``, ``xpos``) is defined on each side: queries are
  rotated by their target positions and keys by their source positions, so the score depends on
  the index offset ``t - s``. This means something when target and source share a time axis
  (aligned signals at one rate, frame-synchronous speech or radar); accepted;
* a relative bias between a target and a source position ("logits"/"values": ``t5``,
  ``alibi``, ``shaw``, ``xl``, ``deberta``, ``tupe``) has no definition in general (its
  table, buckets or distances assume the two positions index one sequence); refused with a
  ValueError.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from .. import init as cinit
from .._utils import HasDtype, check_dtype, factory_kwargs, real_dtype
from .attention import MultiheadAttention, check_encoding
from .linear import Linear
from .transformer import (
    ENCODER_SITES,
    TransformerEncoder,
    TransformerEncoderLayer,
    TransformerLayerBase,
    TransformerStackBase,
    batch_mask,
)

if TYPE_CHECKING:
    from ..encodings.base import PositionalEncoding

__all__ = [
    "TransformerDecoderLayer",
    "TransformerDecoder",
    "Transformer",
    "CROSS_ATTENTION_SITES",
]

#: sites a ``memory_encoding`` may act on in cross-attention (each side by its own positions)
CROSS_ATTENTION_SITES = frozenset({"qk"})
#: sites whose hooks relate a query position to a key position of the same sequence
_RELATIVE_SITES = frozenset({"logits", "values"})


def check_memory_encoding(encoding: object, owner: str) -> None:
    """Raise unless ``encoding`` can act in cross-attention (see the module docstring)."""
    undefined = getattr(encoding, "acts_on", frozenset()) & _RELATIVE_SITES
    if undefined:
        name = getattr(encoding, "name", "") or type(encoding).__name__
        raise ValueError(
            f"{owner}: memory_encoding {name!r} acts on {sorted(undefined)}, a relative position "
            "bias between a target and a source position, which is undefined in cross-attention "
            "(the positions index different sequences); pass memory_encoding=None or an "
            "encoding acting on 'qk' only (rotary, xpos), and give the relative encoding to the "
            "self-attention as encoding="
        )
    check_encoding(encoding, owner, CROSS_ATTENTION_SITES)


class TransformerDecoderLayer(TransformerLayerBase):
    r"""One Transformer decoder layer: self-attention on the target, cross-attention from the
    target to the encoder's output (the memory) and a feed-forward block, each with a residual
    connection and a normalisation, post-norm (Vaswani et al., 2017) or pre-norm (Xiong et al.,
    ICML 2020); a drop-in for :class:`torch.nn.TransformerDecoderLayer` (same arguments in the
    same order, same defaults, same submodule names, same ``forward``).

    .. math::
        \text{post-norm:}\quad x \leftarrow N_1(x + \mathrm{SA}(x)),\quad
        x \leftarrow N_2(x + \mathrm{CA}(x, m)),\quad x \leftarrow N_3(x + \mathrm{FF}(x)) \\
        \text{pre-norm:}\quad x \leftarrow x + \mathrm{SA}(N_1(x)),\quad
        x \leftarrow x + \mathrm{CA}(N_2(x), m),\quad x \leftarrow x + \mathrm{FF}(N_3(x))

    with :math:`\mathrm{SA}(x) = \mathrm{MHA}(x, x, x)`, :math:`\mathrm{CA}(x, m) =
    \mathrm{MHA}(x, m, m)` (complex :class:`~cplxnet.nn.MultiheadAttention`, both on the packed
    real SDPA kernel of :func:`cplxnet.functional.scaled_dot_product_attention`) and the
    feed-forward block, activation, dropouts and normalisations of
    :class:`~cplxnet.nn.TransformerEncoderLayer`. With a real ``dtype`` it is torch's layer
    and loads its state_dict (submodules ``self_attn``, ``multihead_attn``, ``linear1``,
    ``linear2``, ``norm1..3``).

    Args: torch's, in torch's order, and the keyword-only ``norm``, ``score``, ``projection``,
    ``attention_dropout``, all as :class:`~cplxnet.nn.TransformerEncoderLayer` (``projection``
    and ``score`` apply to the cross-attention too).

    Examples::

        >>> layer = cplxnet.nn.TransformerDecoderLayer(d_model=16, nhead=4, batch_first=True)
        >>> memory = torch.randn(2, 10, 16, dtype=torch.cfloat)  # the encoder's output
        >>> tgt = torch.randn(2, 7, 16, dtype=torch.cfloat)
        >>> layer(tgt, memory, tgt_is_causal=True).shape
        torch.Size([2, 7, 16])
    """

    cross_attention = True
    #: the sites whose hooks ``forward`` calls with ``encoding=`` (self-attention) and with
    #: ``memory_encoding=`` (cross-attention)
    sites: ClassVar[frozenset[str]] = ENCODER_SITES
    memory_sites: ClassVar[frozenset[str]] = CROSS_ATTENTION_SITES
    self_mask_names = ("tgt_mask", "tgt_key_padding_mask")

    def _ff_block(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def _mha_block(self, x, memory, attn_mask, padding_mask, is_causal, encoding):
        x = self._attend(
            self.multihead_attn,
            ("memory_mask", "memory_key_padding_mask"),
            x,
            memory,
            attn_mask,
            padding_mask,
            is_causal,
            encoding,
        )
        return self.dropout2(x)

    def forward(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
        *,
        encoding: PositionalEncoding | None = None,
        memory_encoding: PositionalEncoding | None = None,
        layer: int = 0,
        num_layers: int = 1,
    ) -> torch.Tensor:
        """One decoder layer, as :class:`torch.nn.TransformerDecoderLayer`.

        Args:
            tgt: ``(B, T, D)`` (``(T, B, D)`` when ``batch_first=False``), or unbatched
                ``(T, D)`` (then memory ``(S, D)``, key padding masks ``(T,)``, ``(S,)``).
            memory: ``(B, S, D)`` in the same layout (the encoder's output).
            tgt_mask: ``(T, T)``, ``(B * H, T, T)`` or broadcasting to ``(B, H, T, T)``; bool
                **True = not allowed to attend**, or a real float mask added to the logits.
            memory_mask: ``(T, S)``, ``(B * H, T, S)`` or broadcasting to ``(B, H, T, S)``.
            tgt_key_padding_mask: ``(B, T)``; memory_key_padding_mask: ``(B, S)``; bool
                **True = padding**, or float (added).
            tgt_is_causal: target position ``t`` attends only to target positions ``<= t``
                (alone or with ``tgt_mask``; torch reads it as a hint about ``tgt_mask``).
            memory_is_causal: target ``t`` attends only to memory positions ``<= t``.
            encoding: positional encoding of the self-attention (keyword-only; its
                ``layer_input`` acts first, its "qk"/"logits"/"values" hooks in the
                self-attention).
            memory_encoding: positional encoding of the cross-attention, acting on "qk" only
                (module docstring); relative ones are refused.
            layer, num_layers: this layer's index in its stack and the depth ("layer" site).

        Returns:
            ``(B, T, D)`` in the layout of ``tgt``.
        """
        owner = type(self).__name__
        x = self._batch_first(tgt, "tgt")
        mem = self._batch_first(memory, "memory")
        tgt_key_padding_mask = batch_mask(tgt_key_padding_mask, tgt)
        memory_key_padding_mask = batch_mask(memory_key_padding_mask, memory)
        if tgt.dim() != memory.dim():
            raise ValueError(
                f"{owner}: tgt and memory must both be batched (3-D) or both unbatched (2-D), "
                f"got shapes {tuple(tgt.shape)} and {tuple(memory.shape)}"
            )
        if mem.shape[0] != x.shape[0]:
            raise ValueError(
                f"{owner}: tgt and memory must have the same batch size, got {x.shape[0]} and "
                f"{mem.shape[0]}"
            )
        if encoding is not None:
            check_encoding(encoding, owner, self.sites)
            x = encoding.layer_input(x, layer, num_layers)
        if memory_encoding is not None:
            check_memory_encoding(memory_encoding, owner)
        sa = (tgt_mask, tgt_key_padding_mask, tgt_is_causal, encoding)
        ca = (memory_mask, memory_key_padding_mask, memory_is_causal, memory_encoding)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), *sa)
            x = x + self._mha_block(self.norm2(x), mem, *ca)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, *sa))
            x = self.norm2(x + self._mha_block(x, mem, *ca))
            x = self.norm3(x + self._ff_block(x))
        return self._like(x, tgt)


class TransformerDecoder(TransformerStackBase):
    r"""A stack of ``num_layers`` decoder layers and an optional final normalisation, a drop-in
    for :class:`torch.nn.TransformerDecoder`: ``TransformerDecoder(decoder_layer, num_layers,
    norm=None)``; layers in ``self.layers`` (state_dict keys ``layers.0.…``), the final norm in
    ``self.norm``. ``decoder_layer`` and ``norm`` as for :class:`~cplxnet.nn.TransformerEncoder`
    (copies re-initialised independently, or a ``factory(i)``; a norm module or kind);
    :meth:`from_sizes` builds the layers from their arguments (``TransformerDecoder.from_sizes(
    d_model, nhead, num_layers, final_norm=None, **layer_kwargs)``).

    Examples::

        >>> dec = cplxnet.nn.TransformerDecoder.from_sizes(16, 4, 2, batch_first=True)
        >>> out = dec(torch.randn(2, 7, 16, dtype=torch.cfloat),
        ...           torch.randn(2, 10, 16, dtype=torch.cfloat), tgt_is_causal=True)
    """

    sites: ClassVar[frozenset[str]] = ENCODER_SITES
    memory_sites: ClassVar[frozenset[str]] = CROSS_ATTENTION_SITES
    layer_class = TransformerDecoderLayer
    layer_argument = "decoder_layer"

    def __init__(
        self,
        decoder_layer: nn.Module | Callable[[int], nn.Module],
        num_layers: int,
        norm: nn.Module | str | None = None,
    ) -> None:
        super().__init__(decoder_layer, num_layers, norm)

    def forward(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
        *,
        encoding: PositionalEncoding | None = None,
        memory_encoding: PositionalEncoding | None = None,
    ) -> torch.Tensor:
        """The layers in turn, then the final norm, as :class:`torch.nn.TransformerDecoder`.

        Args:
            tgt: ``(B, T, D)`` (``(T, B, D)`` for layers built with ``batch_first=False``);
                memory: ``(B, S, D)`` in the same layout; or both unbatched.
            tgt_mask ``(T, T)``, memory_mask ``(T, S)`` (or ``(B * H, ., .)``, or broadcasting
                to ``(B, H, ., .)``): bool **True = not allowed to attend**, or real float added.
            tgt_key_padding_mask ``(B, T)``, memory_key_padding_mask ``(B, S)``: bool
                **True = padding**, or float (added).
            tgt_is_causal, memory_is_causal: causal restriction (``None``: ``False``).
            encoding, memory_encoding: as :meth:`TransformerDecoderLayer.forward`, passed to
                every layer (with ``layer=i``, ``num_layers=n``; layers are called without the
                keywords when both are ``None``).

        Returns:
            ``(B, T, D)`` in the layout of ``tgt``.
        """
        owner = type(self).__name__
        self._check_dtype(tgt, "tgt")
        self._check_dtype(memory, "memory")
        if encoding is not None:
            check_encoding(encoding, owner, self.sites)
        if memory_encoding is not None:
            check_memory_encoding(memory_encoding, owner)
        masks = (
            tgt_mask,
            memory_mask,
            tgt_key_padding_mask,
            memory_key_padding_mask,
            bool(tgt_is_causal),
            memory_is_causal,
        )
        n = self.num_layers
        x = tgt
        for i, layer in enumerate(self.layers):
            if encoding is None and memory_encoding is None:
                x = layer(x, memory, *masks)
            else:
                x = layer(
                    x,
                    memory,
                    *masks,
                    encoding=encoding,
                    memory_encoding=memory_encoding,
                    layer=i,
                    num_layers=n,
                )
        if self.norm is not None:
            x = self.norm(x)
        return x


def _xavier_projections_(module: nn.Module) -> None:
    """Glorot-uniform on every projection matrix (attention and linear weights), as
    ``torch.nn.Transformer`` does on its matrices (complex ones variance-correct,
    :mod:`cplxnet.init`). Normalisation parameters keep their init (complex norms keep 2-D
    gains, which torch's "every parameter with dim > 1" rule would hit)."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, MultiheadAttention):
                ws = (m.in_proj_weight, m.q_proj_weight, m.k_proj_weight, m.v_proj_weight)
            elif isinstance(m, (Linear, nn.Linear)):
                ws = (m.weight,)
            else:
                continue
            for w in ws:
                if w is not None:
                    (cinit.xavier_uniform_ if w.is_complex() else nn.init.xavier_uniform_)(w)


class Transformer(HasDtype, nn.Module):
    r"""The encoder-decoder Transformer (Vaswani et al., 2017) on complex (or real) sequences, a
    drop-in for :class:`torch.nn.Transformer`: a :class:`~cplxnet.nn.TransformerEncoder` of
    ``num_encoder_layers`` layers and a :class:`TransformerDecoder` of ``num_decoder_layers``,
    each ending in a normalisation (``self.encoder``, ``self.decoder``: torch's state_dict keys).
    Like torch's, it takes embedded sequences (no token embedding, no output projection).

    Args (torch's, in torch's order, with torch's defaults): ``d_model=512``, ``nhead=8``,
    ``num_encoder_layers=6``, ``num_decoder_layers=6``, ``dim_feedforward=2048``,
    ``dropout=0.1``, ``activation="relu"``, ``custom_encoder=None``, ``custom_decoder=None``
    (modules used instead of the built stacks), ``layer_norm_eps=1e-5``, ``batch_first=False``,
    ``norm_first=False``, ``bias=True``, ``device``, ``dtype`` (default: the complex type of the
    default dtype; a real dtype is torch's Transformer). Keyword-only ``norm``, ``score``,
    ``projection``, ``attention_dropout`` as :class:`~cplxnet.nn.TransformerEncoderLayer`
    (``norm`` also gives the final normalisations). The projection matrices are re-drawn
    Glorot-uniform after construction, as torch does.

    Examples::

        >>> model = cplxnet.nn.Transformer(d_model=16, nhead=4, num_encoder_layers=2,
        ...                                num_decoder_layers=2, dim_feedforward=32)
        >>> src = torch.randn(10, 3, 16, dtype=torch.cfloat)  # (S, B, D)
        >>> tgt = torch.randn(7, 3, 16, dtype=torch.cfloat)  # (T, B, D)
        >>> mask = model.generate_square_subsequent_mask(7)
        >>> model(src, tgt, tgt_mask=mask).shape
        torch.Size([7, 3, 16])
    """

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | nn.Module | Callable[[torch.Tensor], torch.Tensor] = "relu",
        custom_encoder: nn.Module | None = None,
        custom_decoder: nn.Module | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        norm: str = "split",
        score: str = "real",
        projection: str = "complex",
        attention_dropout: float | None = None,
    ) -> None:
        fk = factory_kwargs(device, dtype, type(self).__name__, allow_real=True)
        super().__init__()
        args = (
            d_model,
            nhead,
            dim_feedforward,
            dropout,
            activation,
            layer_norm_eps,
            batch_first,
            norm_first,
            bias,
        )
        kwargs = {
            "norm": norm,
            "score": score,
            "projection": projection,
            "attention_dropout": attention_dropout,
            **fk,
        }
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(*args, **kwargs)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(*args, **kwargs)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._dtype = fk["dtype"]
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first
        _xavier_projections_(self)

    def reset_parameters(self) -> None:
        """Re-initialise both stacks, then the projection matrices Glorot-uniform (as
        construction does)."""
        for stack in (self.encoder, self.decoder):
            if hasattr(stack, "reset_parameters"):
                stack.reset_parameters()
        _xavier_projections_(self)

    @staticmethod
    def generate_square_subsequent_mask(
        sz: int, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> torch.Tensor:
        """The ``(sz, sz)`` causal float mask of torch (``-inf`` above the diagonal, ``0``
        elsewhere), real: a complex ``dtype`` gives the mask in its real dtype."""
        dtype = None if dtype is None else real_dtype(dtype)
        return nn.Transformer.generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        src_key_padding_mask: torch.Tensor | None = None,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
        *,
        src_encoding: PositionalEncoding | None = None,
        tgt_encoding: PositionalEncoding | None = None,
        memory_encoding: PositionalEncoding | None = None,
    ) -> torch.Tensor:
        """Encode ``src``, decode ``tgt`` against it, as :class:`torch.nn.Transformer`.

        Args:
            src: ``(S, B, D)`` (``(B, S, D)`` with ``batch_first=True``); tgt: ``(T, B, D)``;
                or both unbatched, ``(S, D)`` and ``(T, D)`` (key padding masks 1-D).
            src_mask ``(S, S)``, tgt_mask ``(T, T)``, memory_mask ``(T, S)`` (or ``(B * H, ., .)``
                or broadcasting to ``(B, H, ., .)``): bool **True = not allowed to attend**, or
                real float added to the logits.
            src_key_padding_mask ``(B, S)``, tgt_key_padding_mask ``(B, T)``,
                memory_key_padding_mask ``(B, S)``: bool **True = padding**, or float.
            src_is_causal, tgt_is_causal, memory_is_causal: causal restriction of each attention
                (``None``: ``False``), alone or with the masks.
            src_encoding, tgt_encoding, memory_encoding: positional encodings (keyword-only) of
                the encoder's self-attention, the decoder's self-attention and the
                cross-attention (``"qk"`` only, see :mod:`cplxnet.nn.transformer_decoder`).

        Returns:
            ``(T, B, D)`` (``(B, T, D)`` with ``batch_first=True``).
        """
        owner = type(self).__name__
        for name, x in (("src", src), ("tgt", tgt)):
            check_dtype(x, self.dtype, owner, name)
            if x.dim() not in (2, 3) or x.shape[-1] != self.d_model:
                layout = "(B, L, " if self.batch_first else "(L, B, "
                raise ValueError(
                    f"{owner}: expected {name} of shape {layout}{self.d_model}) or unbatched "
                    f"(L, {self.d_model}), got {tuple(x.shape)}"
                )
        if src.dim() != tgt.dim():
            raise ValueError(
                f"{owner}: src and tgt must both be batched (3-D) or both unbatched (2-D), got "
                f"shapes {tuple(src.shape)} and {tuple(tgt.shape)}"
            )
        b = 0 if self.batch_first else 1
        if src.dim() == 3 and src.shape[b] != tgt.shape[b]:
            raise ValueError(
                f"{owner}: src and tgt must have the same batch size, got {src.shape[b]} and "
                f"{tgt.shape[b]}"
            )
        enc = {} if src_encoding is None else {"encoding": src_encoding}
        memory = self.encoder(
            src,
            mask=src_mask,
            src_key_padding_mask=src_key_padding_mask,
            is_causal=src_is_causal,
            **enc,
        )
        dec = {
            k: v
            for k, v in (("encoding", tgt_encoding), ("memory_encoding", memory_encoding))
            if v is not None
        }
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
            **dec,
        )

    def extra_repr(self) -> str:
        s = f"d_model={self.d_model}, nhead={self.nhead}"
        if self.batch_first:
            s += ", batch_first=True"
        return s + f", dtype={self.dtype}"
