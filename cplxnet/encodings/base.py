"""The one contract through which every positional encoding acts.

An encoding declares in ``acts_on`` the sites where it acts, and overrides the hook of each site.
Models and attention call every hook unconditionally (the defaults are no-ops), so no code anywhere
branches on an encoding's name.

Sites and hooks (shapes: B batch, L length, D model width, H heads, Dh head width):

========== ============================================ =========================================
site       hook                                         meaning
========== ============================================ =========================================
"token"    ``embed(ids) -> (B, L, D)``                   replaces the word embedding (complex-order,
                                                        complex-vanilla)
"input"    ``encode_input(x) -> (B, L, D)``              acts on the token embeddings: ``x + p``
                                                        (trainable, sinusoidal, floater,
                                                        hierarchical) or ``x * p`` (multiplicative)
"layer"    ``layer_input(x, layer, num_layers)``         acts on the input of Transformer layer
                                                        ``layer`` (DeBERTa's enhanced mask decoder)
"qk"       ``rotate(q, k, v) -> (q, k, v)``              acts on queries/keys/values, (B, H, L, Dh)
                                                        (rotary, xpos)
"logits"   ``logits_bias(q, k) -> (B|1, H|1, Lq, Lk)``   adds to the attention logits after
                                                        scaling; ``q``, ``k`` arrive packed real
                                                        (:func:`cplxnet._utils.pack`) so one
                                                        implementation serves complex and real
                                                        attention (t5, alibi, shaw, xl,
                                                        deberta)
"values"   ``value_term(weights) -> (B, H, Lq, Dv)``     adds ``sum_j a_ij R_ij`` to the attention
                                                        output (packed real), given the attention
                                                        weights (shaw)
========== ============================================ =========================================

Incremental decoding (a key/value cache, :class:`cplxnet.nn.KVCache`). An encoding with
``supports_kv_cache = True`` promises that the logits at position ``t`` depend on the tokens
``<= t`` and on positions that do not change as the sequence grows, and implements the cached
call: ``embed(ids, offset=t0)``, ``encode_input(x, offset=t0)`` and ``rotate(q, k, v,
offset=t0)`` treat their rows as the positions ``t0, t0 + 1, ...`` (the model passes
``offset`` only when it decodes with a cache), and ``logits_bias(q, k)`` / ``value_term`` place
``Lq < Lk`` queries at the *last* ``Lq`` key positions (query ``i`` is position ``Lk - Lq + i``).
Encodings whose output depends on the window length (xpos's window-centred scale) keep the
default ``False``: a model then recomputes the whole window at every step.

``logit_scale`` multiplies the kernel's content-score scale ``1/sqrt(Dh)`` (DeBERTa uses
``1/sqrt(3 Dh)`` for all three of its terms, so it sets ``1/sqrt(3)``).

One encoding instance serves every layer of a model (shared parameters, as T5's bias table,
Transformer-XL's u and v, DeBERTa's relative table); the model owns it and passes it to the
attention call (``MultiheadAttention.forward(..., encoding=enc)``), so it appears once in the
state_dict. Padding is at the end of each sequence: positions are ``0 .. L-1``. Several encodings
acting at different sites combine into one (:class:`cplxnet.encodings.combined.CombinedEncoding`,
``create_encoding("complex-order+rotary", ...)``), which calls each member's hooks.

dtype conventions. Every encoding is built for a model dtype (``dtype=``: complex by default, the
complex type of ``torch.get_default_dtype()``; a real floating dtype gives the encoding of a real
twin). Encodings acting on the embeddings ("token", "input", "layer") return values in the model
dtype. Encodings acting inside attention ("logits", "values") receive *packed* real ``q, k``
(width ``P = 2 Dh`` for complex heads of width ``Dh``, ``P = Dh`` for real heads) and keep real
parameters of that packed width: a real ``2 Dh`` vector *is* a complex ``Dh`` vector and the packed
dot product is ``Re(q r^H)``, so one implementation serves complex and real attention. Terms an
encoding adds to the logits that belong with the content score are multiplied by
:meth:`PositionalEncoding.content_scale` (``logit_scale / sqrt(Dh)``, the kernel's default scale).

The complex/real algebra: for a real model of width ``D`` (even), the encodings defined as complex
numbers (``sinusoidal`` as ``exp(i k w)``, ``complex-order``, ``complex-vanilla``,
``multiplicative`` sinusoidal, ``rotary``) use ``D/2`` complex features, seen through
:func:`cplxnet._utils.pack` (interleaved ``re, im``), so the real twin sees ``D`` reals.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import nn

from .._utils import HasDtype

__all__ = ["PositionalEncoding", "SITES", "FIELDS"]

SITES = ("token", "input", "layer", "qk", "logits", "values")
FIELDS = ("complex", "real")  #: values of PositionalEncoding.field


class PositionalEncoding(HasDtype, nn.Module):
    """Base class of every encoding; subclasses set ``name``, ``acts_on`` and override hooks.

    ``dtype`` (:class:`cplxnet._utils.HasDtype`) is the model dtype the encoding was built for;
    subclasses store it as ``self._dtype`` in ``__init__`` and show it in ``extra_repr``.

    Examples::

        >>> from cplxnet.encodings import create_encoding
        >>> enc = create_encoding('sinusoidal', d_model=4)
        >>> isinstance(enc, PositionalEncoding), sorted(enc.acts_on)
        (True, ['input'])
    """

    name: ClassVar[str] = ""
    #: the encoding's natural number field, ``"complex"`` or ``"real"``: the field of the model
    #: it is defined for (complex-order's and complex-vanilla's word embeddings are complex
    #: numbers; the others are real schemes, run in complex models through the complex algebra).
    #: ``cplxnet compare`` runs an encoding in this field by default and its report treats the
    #: complex ones as the candidates and the real ones as baselines.
    field: ClassVar[str] = "real"
    #: sites of the default configuration; an instance may narrow or widen it (e.g. DeBERTa adds
    #: "layer" when ``absolute_layers > 0``), so read it from the instance when you have one.
    acts_on: frozenset[str] = frozenset()
    logit_scale: float = 1.0
    #: True when built for a complex model (packed head width ``2 Dh``), False for a real twin.
    complex_model: bool = True
    #: True when the hooks implement the cached call of incremental decoding (module docstring).
    supports_kv_cache: bool = False
    #: number options that also take ``inf`` (a limit the class documents, e.g. xpos's
    #: ``scale_base=inf``: rotary); the others must be finite in ``create_encoding`` and specs.
    infinite_options: ClassVar[frozenset[str]] = frozenset()

    def content_scale(self, packed_width: int) -> float:
        """``logit_scale / sqrt(Dh)``: the scale the kernel applies to the content score.

        ``Dh`` is the head width in the model's own numbers: ``packed_width / 2`` complex features
        for a complex model, ``packed_width`` reals for a real one. Relative terms that the paper
        adds to ``q.k`` *before* scaling (Shaw, Transformer-XL, DeBERTa) are multiplied by this,
        since ``logits_bias`` is added after scaling.
        """
        dh = packed_width // 2 if self.complex_model else packed_width
        return self.logit_scale / math.sqrt(dh)

    def register_table(self, name: str, builder: str, length: int, device=None) -> None:
        """Register the fixed table ``name`` (a non-persistent buffer: it follows ``.to(device)``
        and never enters the state_dict), built by the method named ``builder`` as
        ``builder(n, device)`` for ``n = length`` rows. :meth:`reset_tables` rebuilds it, so that
        deferred initialisation (build on the ``meta`` device, ``to_empty``,
        ``reset_parameters``) gives the table its values."""
        if "_table_builders" not in self.__dict__:
            self._table_builders: dict[str, str] = {}
        self._table_builders[name] = builder
        self.register_buffer(name, getattr(self, builder)(length, device), persistent=False)

    def reset_tables(self) -> None:
        """Rebuild every table of :meth:`register_table` at its current length and device, in
        the order they were registered."""
        for name, builder in self.__dict__.get("_table_builders", {}).items():
            table = getattr(self, name)
            with torch.inference_mode(False), torch.no_grad():
                setattr(self, name, getattr(self, builder)(table.shape[0], table.device))

    def reset_parameters(self) -> None:
        """Rebuild the fixed tables (:meth:`reset_tables`); an encoding with parameters also
        draws them again."""
        self.reset_tables()

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(f"encoding {self.name!r} does not replace the word embedding")

    def encode_input(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:  # (B, L, D)
        return x

    def layer_input(self, x: torch.Tensor, layer: int, num_layers: int) -> torch.Tensor:
        return x

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offset: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return q, k, v

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
        return None

    def value_term(self, weights: torch.Tensor) -> torch.Tensor | None:
        return None

    def logits_operands(
        self, q: torch.Tensor, k: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The packed ``q, k`` that *other* encodings' logits terms read, given the packed
        ``q, k`` this ("qk") encoding rotated (a combination passes them on,
        :class:`~cplxnet.encodings.combined.CombinedEncoding`). The default passes them as
        they are; xPos removes its window-centred scale, so that a relative term that reads
        ``q`` or ``k`` alone depends on positions only, not on the window length."""
        return q, k

    @property
    def has_value_term(self) -> bool:
        return "values" in self.acts_on

    def forward(self, *args, **kwargs):  # pragma: no cover - encodings are used through hooks
        """Not used: an encoding acts through its hooks (``embed``, ``encode_input``,
        ``layer_input``, ``rotate``, ``logits_bias``, ``value_term``); calling it raises."""
        raise TypeError(
            f"encoding {self.name!r} is applied through its hooks (embed, encode_input, rotate, "
            "logits_bias, value_term), not called directly"
        )
