r"""Complex unitary recurrent layers: :class:`UnitaryRNNCell` and the stacked :class:`UnitaryRNN`
(options, lengths and layout shared with :mod:`cplxnet.nn.rnn`'s LSTM and GRU)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from .. import functional as CF
from .. import init as cinit
from .._utils import (
    HasDtype,
    check_complex,
    check_last_dim,
    check_sizes,
    factory_kwargs,
    real_dtype,
)
from .rnn import StackedRNN, check_lengths_hx, resolve_lengths, stack_repr

__all__ = ["UnitaryRNNCell", "UnitaryRNN"]


def _init_generator_(generator: torch.Tensor) -> None:
    r"""Set ``G`` so that :math:`U = \exp(G - G^H) = Q\,\mathrm{diag}(e^{\mathrm{i}\theta})Q^H`.

    :math:`Q` is Haar-random unitary (:func:`cplxnet.init.unitary_`)
    and :math:`\theta \sim \mathcal{U}(-\pi, \pi)`: a random unitary with uniformly spread
    eigenphases, the complex analogue of expRNN's Henaff initialisation.
    """
    n = generator.shape[0]
    with torch.no_grad():
        q = cinit.unitary_(torch.empty_like(generator))  # Haar-random unitary
        theta = torch.empty(n, dtype=real_dtype(generator.dtype), device=generator.device)
        theta.uniform_(-math.pi, math.pi)
        # G = Q diag(i theta / 2) Q^H, so G - G^H = Q diag(i theta) Q^H
        generator.copy_((q * (0.5j * theta)) @ q.mH)


class UnitaryRNNCell(HasDtype, nn.Module):
    r"""One step of the unitary RNN: :math:`h' = \mathrm{modReLU}(U h + W x;\, b)`.

    Arjovsky, Shah & Bengio, "Unitary Evolution Recurrent Neural Networks", ICML 2016 (the
    recurrent baseline of Wang et al., "Encoding Word Order in Complex Embeddings", ICLR 2020).
    :math:`U = \exp(G - G^H)` (``torch.linalg.matrix_exp`` of a skew-Hermitian matrix) is
    unitary for every value of the free complex parameter ``skew_hh`` :math:`G`, so plain
    optimiser steps keep it unitary; ``weight_hh`` returns :math:`U`. modReLU
    :math:`\mathrm{relu}(|z| + b)\, z/|z|` (0 at :math:`z = 0`) with real bias ``bias``
    :math:`b` (``bias=False``: no non-linearity, a linear unitary RNN).

    Args:
        input_size, hidden_size: complex features of :math:`x` and :math:`h`.
        bias: learn the modReLU bias (init 0).
        device, dtype: factory kwargs.

    Shape: ``x (B, D)``, ``h (B, H)`` (default zeros) -> ``(B, H)``.

    Init: ``weight_ih`` complex Glorot uniform; :math:`U` a Haar-random unitary with eigenphases
    uniform on :math:`(-\pi, \pi)`.

    Examples::

        >>> cell = UnitaryRNNCell(8, 16)
        >>> h = cell(torch.randn(3, 8, dtype=torch.cfloat))
        >>> h.shape
        torch.Size([3, 16])
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        fk = factory_kwargs(device, dtype, type(self).__name__)
        check_sizes(type(self).__name__, input_size=input_size, hidden_size=hidden_size)
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self._dtype = fk["dtype"]
        self.weight_ih = nn.Parameter(torch.empty(hidden_size, input_size, **fk))
        self.skew_hh = nn.Parameter(torch.empty(hidden_size, hidden_size, **fk))
        rk = {"device": device, "dtype": real_dtype(fk["dtype"])}
        self.bias = nn.Parameter(torch.empty(hidden_size, **rk)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        cinit.xavier_uniform_(self.weight_ih)
        _init_generator_(self.skew_hh)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    @property
    def weight_hh(self) -> torch.Tensor:
        """The unitary recurrence matrix :math:`U = \\exp(G - G^H)`."""
        return CF.unitary_matrix(self.skew_hh)

    def forward(self, input: torch.Tensor, hx: torch.Tensor | None = None) -> torch.Tensor:
        """One step: ``input`` ``(*, input_size)`` and ``hx`` ``(*, hidden_size)`` (``None``:
        zeros), complex -> the new ``h`` ``(*, hidden_size)`` = ``modReLU(U h + W x)``."""
        owner = type(self).__name__
        check_complex(input, owner)
        check_last_dim(input, self.input_size, owner)
        if hx is None:
            hx = input.new_zeros(input.shape[:-1] + (self.hidden_size,))
        else:
            check_complex(hx, owner, "hx")
            check_last_dim(hx, self.hidden_size, owner, "hx")
        for name, t in (("input", input), ("hx", hx)):
            if t.dtype != self.dtype:
                raise TypeError(
                    f"{owner}: {name} dtype {t.dtype} does not match the weights' dtype "
                    f"{self.dtype}; convert it with .to({self.dtype})"
                )
        return CF.unitary_rnn_cell(input, hx, self.weight_ih, self.weight_hh, self.bias)

    def extra_repr(self) -> str:
        return (
            f"{self.input_size}, {self.hidden_size}, bias={self.bias is not None}, "
            f"dtype={self.dtype}"
        )


class UnitaryRNN(StackedRNN):
    r"""Multi-layer (bi)directional unitary RNN: :class:`UnitaryRNNCell` over time.

    Per layer and direction, parameters ``weight_ih_l{k}`` (complex ``(H, D_in)``),
    ``skew_hh_l{k}`` (complex ``(H, H)`` generator; :math:`U = \exp(G - G^H)`, see
    :meth:`weight_hh`) and ``bias_l{k}`` (real modReLU bias), ``_reverse`` suffix for the
    backward direction. The time loop is Python (over ``x.unbind(1)``), with the input
    projection of all steps done by one matmul first; :math:`U` is built once per forward.

    Args:
        input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional: as
            :class:`LSTM` (``bias`` is the modReLU bias).
        device, dtype: factory kwargs.

    Forward: ``rnn(input, hx=None, *, lengths=None, padding_mask=None)`` -> ``(output, h_n)``,
    with the arguments and length semantics of :class:`GRU`.

    Examples::

        >>> rnn = UnitaryRNN(8, 16, batch_first=True)
        >>> out, h = rnn(torch.randn(3, 5, 8, dtype=torch.cfloat))
        >>> out.shape, h.shape
        (torch.Size([3, 5, 16]), torch.Size([1, 3, 16]))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        fk = factory_kwargs(device, dtype, type(self).__name__)
        super().__init__(input_size, hidden_size, num_layers, batch_first, dropout, bidirectional)
        self._dtype = fk["dtype"]
        self.has_bias = bias
        rk = {"device": device, "dtype": real_dtype(fk["dtype"])}
        self._suffixes = []
        for layer_in, sfx in self._layout():
            self._suffixes.append(sfx)
            w_ih = nn.Parameter(torch.empty(hidden_size, layer_in, **fk))
            skew = nn.Parameter(torch.empty(hidden_size, hidden_size, **fk))
            b = nn.Parameter(torch.empty(hidden_size, **rk)) if bias else None
            for name, p in (("weight_ih", w_ih), ("skew_hh", skew), ("bias", b)):
                setattr(self, name + sfx, p)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Complex Glorot ``weight_ih``, random unitary :math:`U`, zero modReLU bias."""
        for sfx in self._suffixes:
            cinit.xavier_uniform_(getattr(self, "weight_ih" + sfx))
            _init_generator_(getattr(self, "skew_hh" + sfx))
            b = getattr(self, "bias" + sfx)
            if b is not None:
                nn.init.zeros_(b)

    def weight_hh(self, layer: int = 0, reverse: bool = False) -> torch.Tensor:
        """The unitary recurrence matrix of ``layer`` (and direction)."""
        sfx = f"_l{layer}" + ("_reverse" if reverse else "")
        return CF.unitary_matrix(getattr(self, "skew_hh" + sfx))

    def forward(
        self,
        input: torch.Tensor,
        hx: torch.Tensor | None = None,
        *,
        lengths: torch.Tensor | Sequence[int] | None = None,
        padding_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``input`` ``(L, B, input_size)`` complex (``(B, L, .)`` with ``batch_first=True``);
        ``hx`` ``(num_layers * dirs, B, hidden_size)``; ``lengths`` ``(B,)`` or
        ``padding_mask`` ``(B, L)`` bool (**True = padding**, at the end). Returns ``output``
        ``(L, B, dirs * hidden_size)`` (batch first as ``input``; zero at padded steps) and
        ``h_n`` at each sequence's last real step."""
        owner = type(self).__name__
        lengths, hx = check_lengths_hx(owner, lengths, hx, pair=False)
        check_complex(input, owner)
        check_last_dim(input, self.input_size, owner)
        lengths = resolve_lengths(owner, input, lengths, padding_mask, self.batch_first)
        weights = [
            (
                getattr(self, "weight_ih" + sfx),
                CF.unitary_matrix(getattr(self, "skew_hh" + sfx)),
                getattr(self, "bias" + sfx),
            )
            for sfx in self._suffixes
        ]
        try:
            return CF.unitary_rnn(
                input,
                weights,
                hx,
                lengths,
                num_layers=self.num_layers,
                bidirectional=self.bidirectional,
                dropout=self.dropout,
                training=self.training,
                batch_first=self.batch_first,
            )
        except (TypeError, ValueError) as err:
            raise type(err)(str(err).replace("cplxnet.functional.unitary_rnn", owner)) from None

    def extra_repr(self) -> str:
        return stack_repr(self, "", self.has_bias)
