r"""Transformer encoder layers for complex (and real) sequences (Vaswani et al., NeurIPS 2017)."""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from .._utils import HasDtype, check_choice, check_sizes, factory_kwargs
from .activation import ACTIVATIONS, activation_module
from .attention import ATTENTION_SITES, MultiheadAttention, check_encoding
from .dropout import Dropout
from .kv_cache import KVCache
from .linear import Linear
from .norm import LayerNorm, RMSNorm

if TYPE_CHECKING:
    from ..encodings.base import PositionalEncoding

__all__ = ["TransformerEncoderLayer", "TransformerEncoder", "NORMS", "ENCODER_SITES"]
# build_activation, build_norm, batch_mask, TransformerLayerBase and TransformerStackBase are
# public for cplxnet.nn.transformer_decoder and not re-exported by cplxnet.nn

NORMS = ("split", "whiten", "rms")


#: torch's activation functions, read as the names of the complex activations they extend
_TORCH_FUNCTIONS = {
    torch.nn.functional.relu: "relu",
    torch.relu: "relu",
    torch.nn.functional.gelu: "gelu",
    torch.tanh: "tanh",
    torch.sigmoid: "sigmoid",
}


def build_activation(
    activation: str | nn.Module | Callable[[torch.Tensor], torch.Tensor],
    width: int,
    fk: dict,
    owner: str,
) -> nn.Module | Callable[[torch.Tensor], torch.Tensor]:
    if isinstance(activation, nn.Module):
        return activation
    if not isinstance(activation, str) and activation in _TORCH_FUNCTIONS:
        activation = _TORCH_FUNCTIONS[activation]
    if not isinstance(activation, str):
        if callable(activation):  # applied as given, as torch does
            return activation
        raise TypeError(
            f"{owner}: activation must be a name ({', '.join(map(repr, ACTIVATIONS))}), an "
            f"nn.Module or a callable, got {type(activation).__name__}"
        )
    check_choice(activation, ACTIVATIONS, owner, "activation")
    return activation_module(activation, width, **fk)


def build_norm(kind: str, d_model: int, eps: float, bias: bool, fk: dict) -> nn.Module:
    """Complex ``LayerNorm(mode=kind)`` / ``RMSNorm``; for a real dtype torch's LayerNorm/RMSNorm
    (the real restriction of both layer-norm modes is the ordinary layer norm)."""
    if fk["dtype"].is_complex:
        if kind == "rms":
            return RMSNorm(d_model, eps=eps, **fk)
        return LayerNorm(d_model, mode=kind, eps=eps, bias=bias, **fk)
    if kind == "rms":
        return nn.RMSNorm(d_model, eps=eps, **fk)
    return nn.LayerNorm(d_model, eps=eps, bias=bias, **fk)


#: sites whose hooks :class:`TransformerEncoderLayer` and :class:`TransformerEncoder` call
ENCODER_SITES = frozenset({"layer"}) | ATTENTION_SITES


class TransformerLayerBase(HasDtype, nn.Module):
    """Options, submodules and blocks shared by :class:`TransformerEncoderLayer` and
    :class:`cplxnet.nn.TransformerDecoderLayer`: the checks of torch's arguments, the
    self-attention ``self_attn``, the feed-forward block ``linear1``/``activation``/``dropout``/
    ``linear2``, ``num_blocks`` normalisations ``norm1..`` and residual dropouts
    ``dropout1..`` (torch's names), the input layout and dtype check and the repr. With
    ``cross_attention`` the layer also has torch's ``multihead_attn`` (same options as
    ``self_attn``) and three residual blocks instead of two."""

    #: the encoding sites whose hooks ``forward`` calls
    sites: ClassVar[frozenset[str]] = ENCODER_SITES
    #: a cross-attention block ``multihead_attn`` between self-attention and feed-forward
    cross_attention: ClassVar[bool] = False
    #: the layer's names of the self-attention's (mask, key padding mask) arguments
    self_mask_names: ClassVar[tuple[str, str]] = ("src_mask", "src_key_padding_mask")

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | nn.Module | Callable[[torch.Tensor], torch.Tensor] = "relu",
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
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        check_sizes(owner, d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward)
        if isinstance(dropout, bool) or not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{owner}: dropout must be a number in [0, 1], got {dropout!r}")
        if isinstance(layer_norm_eps, bool) or not layer_norm_eps > 0:
            raise ValueError(
                f"{owner}: layer_norm_eps must be a positive number, got {layer_norm_eps!r}"
            )
        for name, flag in (
            ("batch_first", batch_first),
            ("norm_first", norm_first),
            ("bias", bias),
        ):
            if not isinstance(flag, bool):
                raise TypeError(f"{owner}: {name} must be a bool, got {flag!r}")
        self.norm_kind = check_choice(norm, NORMS, owner, "norm")
        self.d_model = d_model
        self.nhead = nhead
        self._dtype = fk["dtype"]
        self.batch_first = batch_first
        self.norm_first = norm_first
        self.layer_norm_eps = float(layer_norm_eps)  # also read by TransformerEncoder(norm=kind)
        self.bias = bias
        attention_dropout = dropout if attention_dropout is None else attention_dropout
        is_complex = fk["dtype"].is_complex
        # the feed-forward's weights in the same field as the attention's projections
        linear = functools.partial(Linear, weight_field=projection) if is_complex else nn.Linear
        drop = Dropout if is_complex else nn.Dropout
        attention = functools.partial(
            MultiheadAttention,
            d_model,
            nhead,
            attention_dropout,
            bias,
            batch_first=batch_first,  # torch's, for direct calls; _attend passes its layout
            score=score,
            projection=projection,
            **fk,
        )
        self.self_attn = attention()
        if self.cross_attention:
            self.multihead_attn = attention()
        self.projection = self.self_attn.projection
        self.linear1 = linear(d_model, dim_feedforward, bias=bias, **fk)
        self.activation = build_activation(activation, dim_feedforward, fk, owner)
        self.dropout = drop(dropout)
        self.linear2 = linear(dim_feedforward, d_model, bias=bias, **fk)
        blocks = range(1, self._num_blocks() + 1)
        for i in blocks:
            setattr(self, f"norm{i}", build_norm(norm, d_model, layer_norm_eps, bias, fk))
        for i in blocks:
            setattr(self, f"dropout{i}", drop(dropout))

    @classmethod
    def _num_blocks(cls) -> int:
        """Residual blocks: (self-attention, [cross-attention,] feed-forward)."""
        return 3 if cls.cross_attention else 2

    def reset_parameters(self) -> None:
        for m in self.children():
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()

    def _batch_first(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """``x`` checked (dtype, ``(., ., d_model)`` or unbatched ``(L, d_model)``) and in the
        layout ``(B, L, D)`` (an unbatched ``x`` as a batch of one)."""
        owner = type(self).__name__
        if not isinstance(x, torch.Tensor) or x.dtype != self.dtype:
            got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
            raise TypeError(
                f"{owner}: {name} has dtype {got} but the layer is {self.dtype}; convert the "
                f"{name} with .to({self.dtype}) or build the layer with the {name}'s dtype"
            )
        layout = "(B, L, " if self.batch_first else "(L, B, "
        if x.dim() not in (2, 3) or x.shape[-1] != self.d_model:
            raise ValueError(
                f"{owner}: expected {name} of shape {layout}{self.d_model}) or unbatched "
                f"(L, {self.d_model}), got {tuple(x.shape)}"
            )
        if x.dim() == 2:
            return x.unsqueeze(0)
        return x if self.batch_first else x.transpose(0, 1)

    def _like(self, x: torch.Tensor, given: torch.Tensor) -> torch.Tensor:
        """The result ``x`` ``(B, L, D)`` in the layout of the input ``given``."""
        if given.dim() == 2:
            return x.squeeze(0)
        return x if self.batch_first else x.transpose(0, 1)

    def _attend(self, attn, names, q, kv, attn_mask, padding_mask, is_causal, encoding, cache=None):
        """``attn(q, kv, kv)``'s output (with its :class:`~cplxnet.nn.KVCache` ``cache``); its mask
        errors name this layer and the layer's mask arguments ``names = (mask, key padding
        mask)``. ``q``, ``kv`` and the output are ``(B, L, D)`` whatever ``attn.batch_first``."""
        seq_first = not attn.batch_first  # torch's layout (L, B, D): pass transposed views
        if seq_first:
            same = kv is q  # self-attention stays `kv is q` (one GEMM; a KVCache needs it)
            q = q.transpose(0, 1)
            kv = q if same else kv.transpose(0, 1)
        try:
            out = attn(
                q,
                kv,
                kv,
                key_padding_mask=padding_mask,
                need_weights=False,
                attn_mask=attn_mask,
                is_causal=is_causal,
                encoding=encoding,
                **({} if cache is None else {"cache": cache}),
            )[0]
            return out.transpose(0, 1) if seq_first else out
        except (TypeError, ValueError) as err:
            msg = str(err)
            if msg.startswith("MultiheadAttention: "):
                msg = f"{type(self).__name__}: " + msg[len("MultiheadAttention: ") :]
                msg = re.sub(r"\bkey_padding_mask\b", names[1], msg)
                msg = re.sub(r"\battn_mask\b", names[0], msg)
            raise type(err)(msg) from None

    def _sa_block(
        self, x, attn_mask, padding_mask, is_causal, encoding, cache=None
    ) -> torch.Tensor:
        x = self._attend(
            self.self_attn,
            self.self_mask_names,
            x,
            x,
            attn_mask,
            padding_mask,
            is_causal,
            encoding,
            cache,
        )
        return self.dropout1(x)

    def _ff_block(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))  # (B, L, D)
        return getattr(self, f"dropout{self._num_blocks()}")(x)

    def extra_repr(self) -> str:
        s = f"norm_first={self.norm_first}, norm={self.norm_kind!r}"
        if self.batch_first:
            s += ", batch_first=True"
        if self.projection != "complex":
            s += f", projection={self.projection!r}"
        return s + f", dtype={self.dtype}"


class TransformerEncoderLayer(TransformerLayerBase):
    r"""One Transformer encoder layer: self-attention and a feed-forward block, each with a
    residual connection and a normalisation, post-norm (Vaswani et al., 2017) or pre-norm
    (Xiong et al., "On Layer Normalization in the Transformer Architecture", ICML 2020); a
    drop-in for :class:`torch.nn.TransformerEncoderLayer` (same arguments in the same order, same
    defaults, same submodule names, same ``forward``).

    .. math::
        \text{post-norm:}\quad x \leftarrow N_1(x + \mathrm{MHA}(x)),\quad
        x \leftarrow N_2(x + \mathrm{FF}(x)) \\
        \text{pre-norm:}\quad x \leftarrow x + \mathrm{MHA}(N_1(x)),\quad
        x \leftarrow x + \mathrm{FF}(N_2(x)) \\
        \mathrm{FF}(x) = W_2\, \mathrm{drop}(\sigma(W_1 x + b_1)) + b_2

    with complex :class:`~cplxnet.nn.MultiheadAttention`, :class:`~cplxnet.nn.Linear`, a complex
    activation :math:`\sigma`, whole-entry complex :class:`~cplxnet.nn.Dropout` (also on both
    residual branches) and complex normalisation :math:`N`. With a real ``dtype`` the same class
    builds the real twin from torch's real counterparts (``nn.Linear``, ``nn.LayerNorm`` /
    ``nn.RMSNorm``, ``nn.ReLU``/``nn.GELU``, ``nn.Dropout``); the submodule names are those of
    ``torch.nn.TransformerEncoderLayer`` (``self_attn``, ``linear1``, ``linear2``, ``norm1``,
    ``norm2``), so a real twin loads its state_dict.

    Args (torch's, in torch's order, with torch's defaults):
        d_model: model width ``D``.
        nhead: attention heads (``D`` divisible by ``nhead``).
        dim_feedforward: hidden width of the feed-forward block (torch's 2048; the Complex
            Order paper's 512 is the zoo's preset).
        dropout: dropout of the feed-forward hidden layer, of both residual branches and (unless
            ``attention_dropout`` is set) of the attention weights.
        activation: a name -- ``"relu"`` (for complex: ``"crelu"``), ``"gelu"``
            (``"split_gelu"``), ``"modrelu"``, ``"zrelu"``, ``"cardioid"``, ``"split_tanh"``
            (``"tanh"``), ``"split_sigmoid"`` (``"sigmoid"``) -- a module, or a callable
            (``F.relu``/``torch.relu``, ``F.gelu``, ``torch.tanh``, ``torch.sigmoid`` map to the
            names ``"relu"``, ``"gelu"``, ``"tanh"``, ``"sigmoid"``, so a complex layer applies the
            split ``tanh``/``sigmoid``, not torch's analytic ones; other callables are applied as
            they are). For a real dtype crelu, zrelu and cardioid are ``nn.ReLU``
            (their restriction to the reals), split_gelu ``nn.GELU``.
        layer_norm_eps: ``eps`` of the normalisations.
        batch_first: ``(B, L, D)`` (``True``) or ``(L, B, D)`` (``False``, torch's default).
        norm_first: pre-norm (``True``) or post-norm (``False``).
        bias: biases in the linear layers and the layer norms.
        device, dtype: factory kwargs (default: the complex type of the default dtype).

    Keyword-only (torch has no counterpart):
        norm: ``"split"`` or ``"whiten"`` (:class:`cplxnet.nn.LayerNorm` modes) or ``"rms"``
            (:class:`cplxnet.nn.RMSNorm`).
        score: attention score, ``"real"`` or ``"modulus"``
            (:func:`cplxnet.functional.scaled_dot_product_attention`).
        projection: ``"complex"`` (default) or ``"real"``: the number field of every projection
            weight -- the attention's four and the feed-forward's two (``weight_field`` of
            :class:`~cplxnet.nn.Linear`); ``"real"`` shares one real matrix between the real and
            imaginary parts (the Complex Order paper's Table 4 "shared projections"). Ignored
            for a real dtype.
        attention_dropout: dropout on the attention weights (``None``: ``dropout``, as torch).

    Examples::

        >>> layer = TransformerEncoderLayer(16, nhead=4, dim_feedforward=32, batch_first=True)
        >>> x = torch.randn(2, 5, 16, dtype=torch.cfloat)
        >>> layer(x, src_key_padding_mask=torch.zeros(2, 5, dtype=torch.bool)).shape
        torch.Size([2, 5, 16])
    """

    def forward(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        src_key_padding_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        *,
        encoding: PositionalEncoding | None = None,
        layer: int = 0,
        num_layers: int = 1,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """One encoder layer, as :class:`torch.nn.TransformerEncoderLayer`.

        Args:
            src: ``(B, L, D)`` (``(L, B, D)`` when ``batch_first=False``), or unbatched
                ``(L, D)`` (its key padding mask ``(L,)``).
            src_mask: ``(L, L)``, ``(B * H, L, L)`` or broadcasting to ``(B, H, L, L)``; bool
                **True = not allowed to attend**, or a real float mask added to the logits.
            src_key_padding_mask: ``(B, L)``, bool **True = padding**, or float (added).
            is_causal: query ``i`` attends only to keys ``j <= i`` (alone or with ``src_mask``).
            encoding: the model's positional encoding (keyword-only); its
                ``layer_input(x, layer, num_layers)`` is applied first and its attention hooks
                ("qk", "logits", "values") act in the self-attention.
            layer, num_layers: this layer's index in its stack and the stack's depth (for the
                "layer" site).
            cache: the self-attention's :class:`~cplxnet.nn.KVCache` (incremental decoding: the
                rows of ``src`` follow the cached positions).

        Returns:
            ``(B, L, D)`` in the layout of ``src``.
        """
        owner = type(self).__name__
        x = self._batch_first(src, "input")
        src_key_padding_mask = batch_mask(src_key_padding_mask, src)
        if encoding is not None:
            check_encoding(encoding, owner, self.sites)
            x = encoding.layer_input(x, layer, num_layers)
        if self.norm_first:
            x = x + self._sa_block(
                self.norm1(x), src_mask, src_key_padding_mask, is_causal, encoding, cache
            )
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(
                x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal, encoding, cache)
            )
            x = self.norm2(x + self._ff_block(x))
        return self._like(x, src)


def batch_mask(mask: torch.Tensor | None, given: torch.Tensor) -> torch.Tensor | None:
    """A key padding mask ``(L,)`` of an unbatched input ``given`` as the batch of one ``(1, L)``
    (torch's shape for unbatched inputs); else ``mask`` unchanged."""
    return mask.unsqueeze(0) if given.dim() == 2 and mask is not None and mask.dim() == 1 else mask


def _reset_all(module: nn.Module) -> None:
    for m in module.modules():
        if m is not module and hasattr(m, "reset_parameters"):
            m.reset_parameters()


class TransformerStackBase(nn.Module):
    """``num_layers`` layers in ``self.layers`` and an optional final ``self.norm``: the
    construction shared by :class:`TransformerEncoder` and :class:`cplxnet.nn.TransformerDecoder`
    (copies of a layer or a factory, a norm module or kind, :meth:`from_sizes`, the dtype check
    of the input)."""

    #: the layer class :meth:`from_sizes` builds
    layer_class: ClassVar[type[nn.Module]]
    #: the name of the layer argument in error messages (torch's name)
    layer_argument: ClassVar[str] = "layer"

    def __init__(
        self,
        layer: nn.Module | Callable[[int], nn.Module],
        num_layers: int,
        norm: nn.Module | str | None = None,
    ) -> None:
        owner = type(self).__name__
        super().__init__()
        check_sizes(owner, num_layers=num_layers)
        if isinstance(layer, nn.Module):
            layers = [layer] + [copy.deepcopy(layer) for _ in range(num_layers - 1)]
            for clone in layers[1:]:
                _reset_all(clone)
        elif callable(layer):
            layers = [layer(i) for i in range(num_layers)]
        else:
            raise TypeError(
                f"{owner}: {self.layer_argument} must be a layer module or a factory(i) "
                f"returning one, got {type(layer).__name__}; to build the layers from their "
                f"sizes use {owner}.from_sizes(d_model, nhead, num_layers, ...)"
            )
        self.layers = nn.ModuleList(layers)
        self.num_layers = num_layers
        if isinstance(norm, str):
            first = self.layers[0]
            if not hasattr(first, "d_model") or not hasattr(first, "dtype"):
                raise TypeError(
                    f"{owner}: norm={norm!r} needs layers with d_model and dtype; pass a module"
                )
            check_choice(norm, NORMS, owner, "norm")
            device = next(first.parameters()).device
            eps = getattr(first, "layer_norm_eps", 1e-5)
            bias = getattr(first, "bias", True)
            bias = bias if isinstance(bias, bool) else True  # a layer's bias *parameter*: default
            fk = {"device": device, "dtype": first.dtype}
            norm = build_norm(norm, first.d_model, eps, bias, fk)
        elif norm is not None and not isinstance(norm, nn.Module):
            raise TypeError(f"{owner}: norm must be None, a module or a kind in {NORMS}")
        self.norm = norm

    @classmethod
    def from_sizes(
        cls,
        d_model: int,
        nhead: int,
        num_layers: int,
        *,
        final_norm: nn.Module | str | None = None,
        **layer_kwargs,
    ) -> TransformerStackBase:
        """``num_layers`` independent ``layer_class(d_model, nhead, **layer_kwargs)`` and the
        final norm ``final_norm`` (``None``, a module or a kind, as ``norm`` of the
        constructor). ``norm=`` in ``layer_kwargs`` is the layers' normalisation kind."""
        check_sizes(cls.__name__, num_layers=num_layers)
        return cls(
            lambda i: cls.layer_class(d_model, nhead, **layer_kwargs),
            num_layers,
            norm=final_norm,
        )

    def reset_parameters(self) -> None:
        """Re-initialise every layer (and the final norm) independently."""
        for m in [*self.layers, self.norm]:
            if m is not None and hasattr(m, "reset_parameters"):
                m.reset_parameters()

    def _check_dtype(self, x: torch.Tensor, name: str) -> None:
        dtype = getattr(self.layers[0], "dtype", None)
        if isinstance(dtype, torch.dtype) and (not isinstance(x, torch.Tensor) or x.dtype != dtype):
            got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
            raise TypeError(
                f"{type(self).__name__}: {name} has dtype {got} but the layers are {dtype}; "
                f"convert the {name} with .to({dtype}) or build the stack with the {name}'s "
                "dtype"
            )

    def extra_repr(self) -> str:
        return f"num_layers={self.num_layers}"


class TransformerEncoder(TransformerStackBase):
    r"""A stack of ``num_layers`` encoder layers and an optional final normalisation, a drop-in
    for :class:`torch.nn.TransformerEncoder`: ``TransformerEncoder(encoder_layer, num_layers,
    norm=None)``. The layers are in ``self.layers`` (an ``nn.ModuleList``: state_dict keys
    ``layers.0.…``, as torch), the final norm (needed after pre-norm layers) in ``self.norm``.

    Args:
        encoder_layer: a layer module, copied ``num_layers`` times (deep copies, each
            re-initialised independently by its submodules' ``reset_parameters``; torch keeps
            identical copies), or a callable ``factory(i)`` returning layer ``i``.
        num_layers: depth.
        norm: ``None``, a module, or a kind (``"split"``, ``"whiten"``, ``"rms"``) built with
            the width, dtype, ``layer_norm_eps`` and ``bias`` of the first layer (a layer without
            ``layer_norm_eps``/``bias`` attributes gets torch's defaults ``1e-5`` and ``True``).
        enable_nested_tensor, mask_check: torch's options for its nested-tensor fast path;
            accepted for compatibility and without effect (cplxnet has no such path).

    :meth:`from_sizes` builds the layers from their arguments instead
    (``TransformerEncoder.from_sizes(d_model, nhead, num_layers, final_norm=None,
    **layer_kwargs)``).

    Examples::

        >>> layer = TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True)
        >>> enc = TransformerEncoder(layer, num_layers=2)
        >>> enc(torch.randn(2, 5, 16, dtype=torch.cfloat)).shape
        torch.Size([2, 5, 16])
    """

    #: the encoding sites whose hooks ``forward`` calls (through the layers)
    sites: ClassVar[frozenset[str]] = ENCODER_SITES
    layer_class = TransformerEncoderLayer
    layer_argument = "encoder_layer"

    def __init__(
        self,
        encoder_layer: nn.Module | Callable[[int], nn.Module],
        num_layers: int,
        norm: nn.Module | str | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__(encoder_layer, num_layers, norm)
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(
        self,
        src: torch.Tensor,
        mask: torch.Tensor | None = None,
        src_key_padding_mask: torch.Tensor | None = None,
        is_causal: bool | None = None,
        *,
        encoding: PositionalEncoding | None = None,
        cache: Sequence[KVCache] | None = None,
    ) -> torch.Tensor:
        """The layers in turn, then the final norm, as :class:`torch.nn.TransformerEncoder`.

        Args:
            src: ``(B, L, D)`` (``(L, B, D)`` for layers built with ``batch_first=False``), or
                unbatched ``(L, D)``.
            mask: ``(L, L)``, ``(B * H, L, L)`` or broadcasting to ``(B, H, L, L)``; bool
                **True = not allowed to attend**, or a real float mask added to the logits.
            src_key_padding_mask: ``(B, L)``, bool **True = padding**, or float (added).
            is_causal: query ``i`` attends only to keys ``j <= i`` (``None``: ``False``).
            encoding: the model's positional encoding (keyword-only), passed to every layer as
                ``layer(x, mask, src_key_padding_mask, is_causal, encoding=encoding, layer=i,
                num_layers=n)`` (layers without an encoding are called without the keywords).
            cache: one :class:`~cplxnet.nn.KVCache` per layer (keyword-only; incremental
                decoding: the rows of ``src`` follow the cached positions).

        Returns:
            ``(B, L, D)`` in the layout of ``src``.
        """
        self._check_dtype(src, "input")
        n = self.num_layers
        if encoding is not None:
            check_encoding(encoding, type(self).__name__, self.sites)
        is_causal = bool(is_causal)
        if cache is not None and len(cache) != n:
            raise ValueError(f"{type(self).__name__}: cache must hold one KVCache per layer "
                             f"({n}), got {len(cache)}")  # fmt: skip
        x = src
        for i, layer in enumerate(self.layers):
            kw = {} if cache is None else {"cache": cache[i]}
            if encoding is None:
                x = layer(x, mask, src_key_padding_mask, is_causal, **kw)
            else:
                x = layer(
                    x,
                    mask,
                    src_key_padding_mask,
                    is_causal,
                    encoding=encoding,
                    layer=i,
                    num_layers=n,
                    **kw,
                )
        if self.norm is not None:
            x = self.norm(x)
        return x
