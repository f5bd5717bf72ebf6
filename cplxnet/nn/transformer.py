r"""Transformer encoder layers for complex (and real) sequences (Vaswani et al., NeurIPS 2017)."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable

import torch
from torch import nn

from .._utils import HasDtype, check_choice, check_mask, check_sizes, factory_kwargs
from .activation import ACTIVATIONS, activation_module
from .attention import MultiheadAttention, _check_encoding
from .dropout import Dropout
from .linear import Linear
from .norm import LayerNorm, RMSNorm

__all__ = ["TransformerEncoderLayer", "TransformerEncoder", "NORMS"]

NORMS = ("split", "whiten", "rms")


def _activation(activation: str | nn.Module, width: int, fk: dict, owner: str) -> nn.Module:
    if isinstance(activation, nn.Module):
        return activation
    if not isinstance(activation, str):
        raise TypeError(
            f"{owner}: activation must be a name ({', '.join(map(repr, ACTIVATIONS))}) or an "
            f"nn.Module, got {type(activation).__name__}"
        )
    check_choice(activation, ACTIVATIONS, owner, "activation")
    return activation_module(activation, width, **fk)


def _norm(kind: str, d_model: int, eps: float, bias: bool, fk: dict) -> nn.Module:
    """Complex ``LayerNorm(mode=kind)`` / ``RMSNorm``; for a real dtype torch's LayerNorm/RMSNorm
    (the real restriction of both layer-norm modes is the ordinary layer norm)."""
    if fk["dtype"].is_complex:
        if kind == "rms":
            return RMSNorm(d_model, eps=eps, **fk)
        return LayerNorm(d_model, mode=kind, eps=eps, bias=bias, **fk)
    if kind == "rms":
        return nn.RMSNorm(d_model, eps=eps, **fk)
    return nn.LayerNorm(d_model, eps=eps, bias=bias, **fk)


class TransformerEncoderLayer(HasDtype, nn.Module):
    r"""One Transformer encoder layer: self-attention and a feed-forward block, each with a
    residual connection and a normalisation, post-norm (Vaswani et al., 2017) or pre-norm
    (Xiong et al., "On Layer Normalization in the Transformer Architecture", ICML 2020).

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

    Args:
        d_model: model width ``D``.
        nhead: attention heads (``D`` divisible by ``nhead``).
        dim_feedforward: hidden width of the feed-forward block.
        dropout: dropout of the feed-forward hidden layer and of both residual branches.
        attention_dropout: dropout on the attention weights (``None``: ``dropout``, as torch).
        activation: a name -- ``"crelu"`` (``"relu"``), ``"modrelu"``, ``"zrelu"``,
            ``"cardioid"``, ``"split_gelu"`` (``"gelu"``), ``"split_tanh"`` (``"tanh"``),
            ``"split_sigmoid"`` (``"sigmoid"``) -- or a module. For a real dtype crelu, zrelu and
            cardioid are ``nn.ReLU`` (their restriction to the reals), split_gelu ``nn.GELU``.
        norm_first: pre-norm (``True``) or post-norm (``False``).
        norm: ``"split"`` or ``"whiten"`` (:class:`cplxnet.nn.LayerNorm` modes) or ``"rms"``
            (:class:`cplxnet.nn.RMSNorm`).
        score: attention score, ``"real"`` or ``"modulus"``
            (:func:`cplxnet.functional.scaled_dot_product_attention`).
        projection: ``"complex"`` (default) or ``"real"``: the number field of every projection
            weight -- the attention's four and the feed-forward's two (``weight_field`` of
            :class:`~cplxnet.nn.Linear`); ``"real"`` shares one real matrix between the real and
            imaginary parts (the Complex Order paper's Table 4 "shared projections"). Ignored
            for a real dtype.
        layer_norm_eps: ``eps`` of the normalisations.
        bias: biases in the linear layers and the layer norms.
        device, dtype: factory kwargs (default: the complex type of the default dtype).

    Shape: ``(B, L, D)`` -> ``(B, L, D)``.
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 512,
        dropout: float = 0.1,
        activation: str | nn.Module = "crelu",
        norm_first: bool = False,
        norm: str = "split",
        score: str = "real",
        projection: str = "complex",
        attention_dropout: float | None = None,
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        check_sizes(owner, d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward)
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{owner}: dropout must be in [0, 1], got {dropout}")
        self.norm_kind = check_choice(norm, NORMS, owner, "norm")
        self.d_model = d_model
        self.nhead = nhead
        self._dtype = fk["dtype"]
        self.norm_first = bool(norm_first)
        self.layer_norm_eps = float(layer_norm_eps)  # also read by TransformerEncoder(norm=kind)
        self.bias = bool(bias)
        attention_dropout = dropout if attention_dropout is None else attention_dropout
        is_complex = fk["dtype"].is_complex
        # the feed-forward's weights in the same field as the attention's projections
        linear = functools.partial(Linear, weight_field=projection) if is_complex else nn.Linear
        drop = Dropout if is_complex else nn.Dropout

        self.self_attn = MultiheadAttention(
            d_model,
            nhead,
            bias=bias,
            dropout=attention_dropout,
            score=score,
            projection=projection,
            **fk,
        )
        self.projection = self.self_attn.projection
        self.linear1 = linear(d_model, dim_feedforward, bias=bias, **fk)
        self.activation = _activation(activation, dim_feedforward, fk, owner)
        self.dropout = drop(dropout)
        self.linear2 = linear(dim_feedforward, d_model, bias=bias, **fk)
        self.norm1 = _norm(norm, d_model, layer_norm_eps, bias, fk)
        self.norm2 = _norm(norm, d_model, layer_norm_eps, bias, fk)
        self.dropout1 = drop(dropout)
        self.dropout2 = drop(dropout)

    def reset_parameters(self) -> None:
        for m in (self.self_attn, self.linear1, self.linear2, self.norm1, self.norm2):
            m.reset_parameters()
        if hasattr(self.activation, "reset_parameters"):
            self.activation.reset_parameters()

    def _sa_block(self, x, padding_mask, attn_mask, is_causal, encoding) -> torch.Tensor:
        x = self.self_attn(
            x,
            key_padding_mask=padding_mask,
            attn_mask=attn_mask,
            is_causal=is_causal,
            encoding=encoding,
        )
        return self.dropout1(x)

    def _ff_block(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))  # (B, L, D)
        return self.dropout2(x)

    def forward(
        self,
        x: torch.Tensor,
        *,
        padding_mask: torch.Tensor | None = None,
        encoding: nn.Module | None = None,
        layer: int = 0,
        num_layers: int = 1,
        attn_mask: torch.Tensor | None = None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        """``x`` ``(B, L, D)``; everything else is keyword-only (torch's ``forward(src,
        src_mask, src_key_padding_mask)`` has a different order, so a ported ``layer(x, mask)``
        raises a TypeError instead of reading an attention mask as a padding mask).
        ``padding_mask`` ``(B, L)`` bool, True = padding; ``encoding``
        the model's positional encoding, whose ``layer_input(x, layer, num_layers)`` is applied
        first and whose attention hooks act in the self-attention; ``attn_mask`` ``(L, L)`` (or
        broadcastable to ``(B, H, L, L)``) as torch's ``src_mask``: bool **True = not allowed to
        attend**, or a real float mask added to the logits; ``is_causal``: query ``i`` attends to
        keys ``j <= i`` (see :class:`~cplxnet.nn.MultiheadAttention`)."""
        owner = type(self).__name__
        if not isinstance(x, torch.Tensor) or x.dtype != self.dtype:
            got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
            raise TypeError(
                f"{owner}: input has dtype {got} but the layer is {self.dtype}; convert the input "
                f"with .to({self.dtype}) or build the layer with the input's dtype"
            )
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"{owner}: expected input of shape (B, L, {self.d_model}), got {tuple(x.shape)}"
            )
        check_mask(padding_mask, x.shape[:2], owner, "padding_mask")
        if encoding is not None:
            _check_encoding(encoding, owner)
            x = encoding.layer_input(x, layer, num_layers)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), padding_mask, attn_mask, is_causal, encoding)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, padding_mask, attn_mask, is_causal, encoding))
            x = self.norm2(x + self._ff_block(x))
        return x

    def extra_repr(self) -> str:
        s = f"norm_first={self.norm_first}, norm={self.norm_kind!r}"
        if self.projection != "complex":
            s += f", projection={self.projection!r}"
        return s + f", dtype={self.dtype}"


def _reset_all(module: nn.Module) -> None:
    for m in module.modules():
        if m is not module and hasattr(m, "reset_parameters"):
            m.reset_parameters()


class TransformerEncoder(nn.Module):
    r"""A stack of encoder layers (in ``self.layers``, an ``nn.ModuleList``: state_dict keys
    ``layers.0.…``, as ``torch.nn.TransformerEncoder``) and an optional final normalisation
    ``norm`` (needed after pre-norm layers).

    Three ways to build it:

    * ``TransformerEncoder(layer, num_layers, norm=None)`` with a layer *module*: ``num_layers``
      deep copies, each re-initialised independently (``reset_parameters`` of its submodules;
      torch keeps identical copies);
    * ``TransformerEncoder(factory, num_layers, norm=None)`` with a callable ``factory(i)``
      returning layer ``i``;
    * ``TransformerEncoder(d_model, nhead, num_layers, norm=None, **layer_kwargs)``: layers
      ``TransformerEncoderLayer(d_model, nhead, **layer_kwargs)``; the layers' normalisation kind
      is passed as ``layer_norm=`` (``norm`` is the final one).

    ``norm`` is ``None``, a module, or a kind (``"split"``, ``"whiten"``, ``"rms"``) built with the
    width, dtype, ``layer_norm_eps`` and ``bias`` of the layers (those of the first layer; a layer
    without ``layer_norm_eps``/``bias`` attributes gets torch's defaults ``1e-5`` and ``True``).

    ``forward(x, *, padding_mask=None, encoding=None)`` calls layer ``i`` as
    ``layer(x, padding_mask=padding_mask, encoding=encoding, layer=i, num_layers=n)``.
    """

    def __init__(
        self,
        layer: nn.Module | Callable[[int], nn.Module] | int,
        nhead_or_num_layers: int,
        num_layers: int | None = None,
        norm: nn.Module | str | None = None,
        **layer_kwargs,
    ) -> None:
        owner = type(self).__name__
        super().__init__()
        if isinstance(layer, int) and not isinstance(layer, bool):
            if num_layers is None:
                raise TypeError(f"{owner}: use TransformerEncoder(d_model, nhead, num_layers, ...)")
            if "layer_norm" in layer_kwargs:
                layer_kwargs["norm"] = layer_kwargs.pop("layer_norm")
            d_model, nhead = layer, nhead_or_num_layers
            n = num_layers
            check_sizes(owner, num_layers=n)
            layers = [TransformerEncoderLayer(d_model, nhead, **layer_kwargs) for _ in range(n)]
        else:
            if num_layers is not None or layer_kwargs:
                raise TypeError(
                    f"{owner}: with a layer module or factory pass only (layer, num_layers, norm)"
                )
            n = nhead_or_num_layers
            check_sizes(owner, num_layers=n)
            if isinstance(layer, nn.Module):
                layers = [layer] + [copy.deepcopy(layer) for _ in range(n - 1)]
                for clone in layers[1:]:
                    _reset_all(clone)
            elif callable(layer):
                layers = [layer(i) for i in range(n)]
            else:
                raise TypeError(
                    f"{owner}: first argument must be a layer module, a factory(i) or d_model, "
                    f"got {type(layer).__name__}"
                )
        self.layers = nn.ModuleList(layers)
        self.num_layers = n
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
            norm = _norm(norm, first.d_model, eps, bias, fk)
        elif norm is not None and not isinstance(norm, nn.Module):
            raise TypeError(f"{owner}: norm must be None, a module or a kind in {NORMS}")
        self.norm = norm

    def reset_parameters(self) -> None:
        """Re-initialise every layer (and the final norm) independently."""
        for m in [*self.layers, self.norm]:
            if m is not None and hasattr(m, "reset_parameters"):
                m.reset_parameters()

    def forward(
        self,
        x: torch.Tensor,
        *,
        padding_mask: torch.Tensor | None = None,
        encoding: nn.Module | None = None,
        attn_mask: torch.Tensor | None = None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        """``(B, L, D)`` -> ``(B, L, D)``; the rest keyword-only (as the layer's forward);
        ``padding_mask`` ``(B, L)`` bool, True = padding;
        ``attn_mask`` bool True = not allowed to attend (as torch's ``mask``) or a float mask
        added to the logits, and ``is_causal``, passed to every layer."""
        dtype = getattr(self.layers[0], "dtype", None)
        if isinstance(dtype, torch.dtype) and (
            not isinstance(x, torch.Tensor) or x.dtype != dtype
        ):
            got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
            raise TypeError(
                f"{type(self).__name__}: input has dtype {got} but the layers are {dtype}; "
                f"convert the input with .to({dtype}) or build the encoder with the input's dtype"
            )
        n = self.num_layers
        extra = {}
        if attn_mask is not None or is_causal:
            extra = {"attn_mask": attn_mask, "is_causal": is_causal}
        for i, layer in enumerate(self.layers):
            x = layer(
                x, padding_mask=padding_mask, encoding=encoding, layer=i, num_layers=n, **extra
            )
        if self.norm is not None:
            x = self.norm(x)
        return x

    def extra_repr(self) -> str:
        return f"num_layers={self.num_layers}"
