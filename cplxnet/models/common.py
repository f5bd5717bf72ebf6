"""What every text classifier of the zoo shares: the number field, the embedding stage, the head.

A model is ``embedding stage -> family body -> dropout -> readout -> real linear head``:

* :class:`NumberField` is the one place that picks complex (cplxnet) or real (torch) layers, so a
  real twin is the same code with real layers (``complex=False`` changes only the number field).
* :class:`TokenEmbedding` is the shared embedding stage: the encoding's ``embed`` replaces the
  word table when the encoding acts on the ``"token"`` site (complex-order, ...), otherwise a word
  :class:`cplxnet.nn.Embedding` (or ``torch.nn.Embedding``) runs and ``encoding.encode_input``
  acts on its output; then word dropout, element dropout, and padded positions set to zero (so
  the tokens at padded positions never matter).
* :class:`TextClassifier` owns the encoding (one instance, once in the state_dict), checks its
  sites against the family, and ends with the complex-to-real readout and a real linear layer.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

import cplxnet.nn as cnn
from cplxnet import complex_dtype, real_dtype
from cplxnet.encodings import check_sites, create_encoding
from cplxnet.functional import lengths_from_padding_mask, scan_rnn
from cplxnet.init import check_word_init, word_init_
from cplxnet.utils import ParameterCount, check_choice, check_indices, count_parameters, is_tracing

from .config import ModelConfig

__all__ = [
    "NumberField",
    "RealEmbedding",
    "TokenEmbedding",
    "TextClassifier",
    "count_parameters",
    "sparse_parameters",
    "ParameterCount",
]


class NumberField:
    """Factory of layers over the complex numbers (cplxnet) or the reals (torch / cplxnet with a
    real dtype). Every family builds its layers through it.

    Args:
        complex: complex layers (``True``) or real ones.
        device: device of every parameter.
        dtype: real or complex floating dtype (``None``: ``torch.get_default_dtype()``); a complex
            model uses its complex type, a real model its real type.
    """

    def __init__(
        self,
        complex: bool,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        self.complex = bool(complex)
        self.device = device
        self.real_dtype = real_dtype(dtype)
        self.dtype = complex_dtype(self.real_dtype) if self.complex else self.real_dtype

    @property
    def fk(self) -> dict[str, Any]:
        """Factory kwargs of the field's layers."""
        return {"device": self.device, "dtype": self.dtype}

    @property
    def real_fk(self) -> dict[str, Any]:
        """Factory kwargs of the real layers every model has (the head)."""
        return {"device": self.device, "dtype": self.real_dtype}

    def embedding(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None,
        sparse: bool,
        init: str = "normal",
        init_scale: float | None = None,
    ) -> nn.Module:
        """A word table: :class:`cplxnet.nn.Embedding` or :class:`RealEmbedding`, initialised
        by :func:`cplxnet.init.word_init_` (``init``, ``init_scale``)."""
        cls = cnn.Embedding if self.complex else RealEmbedding
        return cls(
            num_embeddings,
            embedding_dim,
            padding_idx=padding_idx,
            sparse=sparse,
            init=init,
            init_scale=init_scale,
            **self.fk,
        )

    def dropout(self, p: float) -> nn.Module:
        # cplxnet's Dropout drops whole complex entries and is ordinary dropout on real input
        return cnn.Dropout(p) if self.complex else nn.Dropout(p)

    def conv1d(self, in_channels: int, out_channels: int, kernel_size: int) -> nn.Module:
        cls = cnn.Conv1d if self.complex else nn.Conv1d
        return cls(in_channels, out_channels, kernel_size, **self.fk)

    def activation(self, name: str, num_features: int) -> nn.Module:
        """The activation ``name`` of :func:`cplxnet.nn.activation_module` in the field's dtype
        (on real numbers each reduces to its real form: crelu, zrelu, cardioid -> ReLU; modrelu
        -> ``relu(|x| + b) sign(x)``; split_tanh -> tanh; split_gelu -> GELU)."""
        return cnn.activation_module(name, num_features, **self.fk)

    def lstm(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int,
        bidirectional: bool,
        dropout: float,
        gate: str,
    ) -> nn.Module:
        if self.complex:
            return cnn.LSTM(
                input_size,
                hidden_size,
                num_layers=num_layers,
                bidirectional=bidirectional,
                dropout=dropout,
                gate=gate,
                batch_first=True,
                **self.fk,
            )
        return RealLSTM(
            input_size,
            hidden_size,
            num_layers=num_layers,
            bidirectional=bidirectional,
            dropout=dropout,
            **self.fk,
        )

    def readout(self, mode: str, num_features: int) -> tuple[nn.Module, int]:
        """Complex-to-real readout and its output width (identity for real models)."""
        if not self.complex:
            return nn.Identity(), num_features
        check_choice(mode, cnn.READOUTS, "NumberField.readout", "readout")
        if mode == "magnitude":
            return cnn.Magnitude(), num_features
        if mode == "real":
            return cnn.RealPart(), num_features
        return cnn.ConcatRealImag(), 2 * num_features


class RealEmbedding(nn.Embedding):
    """``torch.nn.Embedding`` with the keyword-only initialisation options of
    :class:`cplxnet.nn.Embedding`: ``init="normal"`` (default, scale 1: torch's own
    :math:`\\mathcal N(0, 1)`, drawn identically) or ``"uniform"`` (:math:`U(-s, s)`, default
    ``s = 0.25``, Kim's initialisation of random word vectors); see
    :func:`cplxnet.init.word_init_`. The padding row is zero. A subclass, so its state_dict and
    everything that recognises torch's Embedding (DDP's sparse gradients) are unchanged."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *args: Any,
        init: str = "normal",
        init_scale: float | None = None,
        **kwargs: Any,
    ) -> None:
        # set before torch's __init__, which calls reset_parameters()
        self.init, self.init_scale = check_word_init(init, init_scale, type(self).__name__)
        super().__init__(num_embeddings, embedding_dim, *args, **kwargs)

    def reset_parameters(self) -> None:
        word_init_(self.weight, self.init, self.init_scale)
        self._fill_padding_idx_with_zero()

    def extra_repr(self) -> str:
        return super().extra_repr() + f", init={self.init!r}, init_scale={self.init_scale}"


class RealLSTM(nn.LSTM):
    """``torch.nn.LSTM`` (batch first) with the call signature of :class:`cplxnet.nn.LSTM`:
    ``forward(x, *, lengths) -> (output, (h_n, c_n))``, output zero at padded steps and the
    final states at each sequence's last real step (through ``pack_padded_sequence``).

    A subclass, not a wrapper, so its state_dict keys are torch's (``weight_ih_l0``, ...), the
    layout of :class:`cplxnet.nn.LSTM`: a real twin and a complex model name their parameters
    alike. State dicts whose keys carry an ``lstm.`` prefix (``lstm.weight_ih_l0``) load too.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bidirectional: bool = False,
        dropout: float = 0.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(
            input_size,
            hidden_size,
            num_layers=num_layers,
            bidirectional=bidirectional,
            dropout=dropout,
            batch_first=True,
            device=device,
            dtype=dtype,
        )

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        old = prefix + "lstm."  # keys with an "lstm." prefix
        for key in [k for k in state_dict if k.startswith(old)]:
            state_dict[prefix + key[len(old) :]] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(  # type: ignore[override]
        self, x: torch.Tensor, *, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """``x`` ``(B, L, input_size)`` real, ``lengths`` ``(B,)`` integers in ``[1, L]`` ->
        ``output`` ``(B, L, dirs * hidden_size)`` (zero at padded steps) and ``(h_n, c_n)`` each
        ``(num_layers * dirs, B, hidden_size)`` at each sequence's last real step."""
        if x.shape[0] == 0:  # torch cannot pack an empty batch; there is nothing to pack
            return super().forward(x)
        if is_tracing():  # packed sequences do not trace with a dynamic length: a scan
            weights = [getattr(self, name) for name in self._flat_weights_names]
            out, (h, c) = scan_rnn(
                "lstm", x, weights, lengths, None, self.num_layers, self.bidirectional
            )
            return out, (h, c)
        L = x.shape[1]
        packed = nn.utils.rnn.pack_padded_sequence(
            x, lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        out, (h, c) = super().forward(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=L)
        return out, (h, c)


class TokenEmbedding(nn.Module):
    """The embedding stage shared by every family: ``(B, L)`` ids -> ``(B, L, D)`` features.

    ``x = encoding.embed(ids)`` if the encoding acts on the ``"token"`` site (it replaces the word
    table), else ``x = word(ids)``; then word dropout (whole tokens zeroed, survivors scaled by
    ``1 / (1 - p)``), ``x = encoding.encode_input(x)`` (a no-op for encodings that do not act on
    the ``"input"`` site), element dropout, and ``x = 0`` at padded positions.

    The encoding is passed to :meth:`forward` (it is owned by the model, not by this stage).
    """

    def __init__(self, config: ModelConfig, encoding: nn.Module, field: NumberField) -> None:
        super().__init__()
        self.replaced = "token" in encoding.acts_on
        self.word = (
            None
            if self.replaced
            else field.embedding(
                config.vocab_size,
                config.d_model,
                config.padding_idx,
                config.sparse_embeddings,
                config.word_init,
                config.word_init_scale,
            )
        )
        self.word_dropout = config.word_dropout
        self.dropout = field.dropout(config.embedding_dropout)

    def forward(
        self,
        ids: torch.Tensor,
        padding_mask: torch.Tensor,
        encoding: nn.Module,
        offset: int | None = None,
    ) -> torch.Tensor:
        """``ids`` ``(B, L)`` token ids, ``padding_mask`` ``(B, L)`` bool (**True = padding**), the
        model's ``encoding`` -> ``(B, L, D)`` features (complex, or real for a real model), zero
        at padded positions. ``offset``: the position of the first token (incremental decoding
        with a key/value cache; passed on to the encoding's hooks)."""
        pos = {} if offset is None else {"offset": offset}
        x = encoding.embed(ids, **pos) if self.word is None else self.word(ids)  # (B, L, D)
        if self.training and self.word_dropout > 0:
            keep = torch.ones(ids.shape + (1,), device=x.device, dtype=real_dtype(x.dtype))
            x = x * F.dropout(keep, self.word_dropout, training=True)  # (B, L, 1) token mask
        x = encoding.encode_input(x, **pos)
        x = self.dropout(x)
        return x.masked_fill(padding_mask.unsqueeze(-1), 0)

    def extra_repr(self) -> str:
        return f"replaced_by_encoding={self.replaced}, word_dropout={self.word_dropout}"


class TextClassifier(nn.Module):
    """Base of the zoo: ``forward(ids (B, L) long, padding_mask (B, L) bool, True = padding)
    -> logits (B, C) real``.

    Subclasses set ``supported_sites`` and implement :meth:`build_body` (returns the width of
    the pooled features) and :meth:`features` (``(B, L, D)`` embedded tokens -> ``(B, F)``
    pooled features in the model's number field).
    """

    supported_sites: ClassVar[frozenset[str]] = frozenset({"token", "input"})

    def __init__(
        self,
        config: ModelConfig,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.field = field = NumberField(config.complex, device, dtype)
        self.encoding = create_encoding(
            config.encoding,
            d_model=config.d_model,
            num_heads=self._encoding_heads(),
            vocab_size=config.vocab_size,
            max_len=config.max_len,
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
        num_features = self.build_body(config, field)
        self.dropout = field.dropout(config.dropout)
        self.readout, readout_features = field.readout(config.readout, num_features)
        self.head = nn.Linear(readout_features, config.num_classes, **field.real_fk)

    # -- to implement ---------------------------------------------------------------------------
    def _encoding_heads(self) -> int:
        return 1

    def build_body(self, config: ModelConfig, field: NumberField) -> int:
        raise NotImplementedError

    def features(self, x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------------
    def _check_inputs(self, ids: torch.Tensor, padding_mask: torch.Tensor | None) -> torch.Tensor:
        owner = type(self).__name__
        if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int64, torch.int32):
            got = ids.dtype if isinstance(ids, torch.Tensor) else type(ids).__name__
            raise TypeError(f"{owner}: ids must be an int64 tensor of token ids, got {got}")
        if ids.dim() != 2:
            raise ValueError(f"{owner}: ids must have shape (B, L), got {tuple(ids.shape)}")
        if ids.shape[1] == 0:
            raise ValueError(f"{owner}: ids have no positions (shape {tuple(ids.shape)})")
        if ids.shape[1] > self.config.max_len:
            raise ValueError(
                f"{owner}: sequence length {ids.shape[1]} exceeds max_len={self.config.max_len}; "
                "truncate the input or build the model with a larger max_len"
            )
        check_indices(ids, self.config.vocab_size, owner, "ids")
        if padding_mask is None:
            return torch.zeros(ids.shape, dtype=torch.bool, device=ids.device)
        if not isinstance(padding_mask, torch.Tensor) or padding_mask.dtype != torch.bool:
            got = (
                padding_mask.dtype
                if isinstance(padding_mask, torch.Tensor)
                else type(padding_mask).__name__
            )
            raise TypeError(f"{owner}: padding_mask must be a torch.bool tensor, got {got}")
        if padding_mask.shape != ids.shape:
            raise ValueError(
                f"{owner}: padding_mask must have the shape of ids {tuple(ids.shape)}, got "
                f"{tuple(padding_mask.shape)}"
            )
        lengths_from_padding_mask(padding_mask, owner)  # padding only at the end of each text
        return padding_mask

    def forward(self, ids: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``(B, num_classes)`` (real) of the token ids ``(B, L)``; ``padding_mask``
        ``(B, L)`` bool marks padding with True (at the end of each sequence; ``None``: no
        padding). An empty batch (``B = 0``) gives ``(0, num_classes)`` logits."""
        padding_mask = self._check_inputs(ids, padding_mask)
        if ids.shape[0] == 0:  # an empty batch: (0, C) logits, still in the autograd graph
            return self.head(self.head.weight.new_zeros(0, self.head.in_features))
        x = self.embedding(ids, padding_mask, self.encoding)  # (B, L, D)
        h = self.features(x, padding_mask)  # (B, F)
        h = self.dropout(h)
        return self.head(self.readout(h))  # (B, C)

    def sparse_parameters(self) -> list[nn.Parameter]:
        """See :func:`models.sparse_parameters`."""
        return sparse_parameters(self)

    @torch.no_grad()
    def apply_constraints(self) -> None:
        """Enforce the config's constraints on the parameters; the trainer (``cplxnet train``,
        :func:`cplxnet.train.train_step`) calls it after every optimiser step, and so should a
        custom loop.

        ``config.head_max_norm = s``: every row of the head's weight (one per class) with L2 norm
        above ``s`` is rescaled to norm ``s`` (the l2 constraint of Kim, EMNLP 2014, with
        ``s = 3``, applied after each gradient step); rows within the bound are left as they are.
        ``None``: nothing.
        """
        s = self.config.head_max_norm
        if s is not None:
            self.head.weight.renorm_(2, 0, s)

    def _word_table(self) -> torch.Tensor:
        """The ``(V, D_w)`` table that pretrained vectors initialise: the word embedding's
        (complex or real) weight, or, when the encoding replaces the word table, its per-word
        amplitude table ``amplitude_weight`` (complex-order, complex-vanilla, also as a member of
        a combination)."""
        if self.embedding.word is not None:
            return self.embedding.word.weight
        for module in self.encoding.modules():  # the encoding, or the members of a combination
            table = getattr(module, "amplitude_weight", None)
            if (
                isinstance(table, torch.Tensor)
                and table.dim() == 2
                and table.shape[0] == self.config.vocab_size
                and table.shape[1] > 1
            ):
                return table
        raise TypeError(
            f"{type(self).__name__}.load_word_vectors: encoding {self.config.encoding!r} replaces "
            "the word table and has no per-word amplitude table (V, D) to receive pretrained "
            "vectors (with complex-order, use amplitude='word')"
        )

    @torch.no_grad()
    def load_word_vectors(self, vectors: torch.Tensor, found: torch.Tensor | None = None) -> int:
        """Initialise the word table from pretrained vectors; returns the number of rows set.

        Args:
            vectors: ``(V, D_w)`` real, row ``i`` the vector of token id ``i``; ``V`` is
                ``config.vocab_size`` and ``D_w`` the word table's width: ``d_model``, or, for
                an encoding replacing the word table in a real model, ``d_model / 2`` (its
                complex features).
            found: ``(V,)`` bool, the rows to set (others keep their initialisation); ``None``:
                every row. The padding row is never set.

        A real word table takes the vectors as they are. A complex word table takes them as
        amplitudes: entry ``w`` becomes ``v * w / |w|`` (its random initial phase kept; phase 0
        where ``w = 0``). When the encoding replaces the word table (complex-order,
        complex-vanilla), the vectors become its per-word amplitudes ``r`` (frequencies and
        phases keep their initialisation).
        """
        owner = f"{type(self).__name__}.load_word_vectors"
        V = self.config.vocab_size
        if not isinstance(vectors, torch.Tensor) or vectors.is_complex() or vectors.dim() != 2:
            raise TypeError(f"{owner}: vectors must be a real (V, D) tensor")
        table = self._word_table()
        if tuple(vectors.shape) != tuple(table.shape):
            d_model = vectors.shape[1] * self.config.d_model // table.shape[1]
            raise ValueError(
                f"{owner}: vectors have shape {tuple(vectors.shape)} but the model's word table "
                f"is {tuple(table.shape)} (vocab_size, width); build the model with the "
                f"vocabulary the vectors were aligned to and d_model={d_model}"
            )
        if found is None:
            found = torch.ones(V, dtype=torch.bool, device=vectors.device)
        if not isinstance(found, torch.Tensor) or found.dtype != torch.bool or found.shape != (V,):
            raise ValueError(f"{owner}: found must be a ({V},) bool tensor")
        rows = found.to(table.device).clone()
        rows[self.config.padding_idx] = False
        v = vectors.to(device=table.device, dtype=real_dtype(table.dtype))[rows]
        if table.is_complex():
            w = table[rows]
            phase = torch.where(w == 0, torch.ones_like(w), torch.sgn(w))
            table[rows] = v * phase
        else:
            table[rows] = v
        return int(rows.sum())


def sparse_parameters(model: nn.Module) -> list[nn.Parameter]:
    """Parameters that receive sparse gradients: those of every embedding table built with
    ``sparse=True`` (the word table -- for :class:`cplxnet.nn.Embedding` its real
    ``packed_weight`` -- and an encoding's per-word tables, as reported by the encoding's own
    ``sparse_parameters()``). Train them with ``torch.optim.SparseAdam`` and the rest with a
    dense optimiser; the two sets are disjoint."""
    seen: set[int] = set()
    out: list[nn.Parameter] = []

    def visit(module: nn.Module) -> None:
        own = getattr(module, "sparse_parameters", None)
        if module is not model and callable(own):
            found = list(own())  # the module knows which of its tables are sparse
        else:
            if getattr(module, "sparse", False) is True:
                found = list(module.parameters(recurse=False))
            else:
                found = []
            for child in module.children():
                visit(child)
        for p in found:
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)

    visit(model)
    return out
