r"""Complex LSTM and GRU cells: one step of :class:`~cplxnet.nn.LSTM` / :class:`~cplxnet.nn.GRU`,
drop-ins for :class:`torch.nn.LSTMCell` / :class:`torch.nn.GRUCell`."""

from __future__ import annotations

import math

import torch
from torch import nn

from .. import functional as CF
from .._utils import HasDtype, check_choice, check_dtype, check_sizes, factory_kwargs
from ..functional.rnn import GATES

__all__ = ["LSTMCell", "GRUCell"]


class _CellBase(HasDtype, nn.Module):
    """Parameters, init, input checks and repr shared by :class:`LSTMCell` and
    :class:`GRUCell` (torch's names: ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``)."""

    _gates = 4
    _pair = True  # the state is (h, c)

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        gate: str = "split",
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        check_sizes(owner, input_size=input_size, hidden_size=hidden_size)
        if not isinstance(bias, bool):
            raise TypeError(f"{owner}: bias must be a bool, got {bias!r}")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.gate = check_choice(gate, GATES, owner, "gate")
        self._dtype = fk["dtype"]
        rows = self._gates * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(rows, input_size, **fk))
        self.weight_hh = nn.Parameter(torch.empty(rows, hidden_size, **fk))
        if bias:
            self.bias_ih = nn.Parameter(torch.empty(rows, **fk))
            self.bias_hh = nn.Parameter(torch.empty(rows, **fk))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r"""As :meth:`cplxnet.nn.LSTM.reset_parameters`: real and imaginary parts i.i.d.
        uniform on :math:`\pm 1/\sqrt{2H}` (:math:`E|w|^2 = 1/(3H)`, torch's variance for a
        complex unit; the realified weights are distributed as torch's real cell of hidden
        :math:`2H`). A real twin is initialised as torch (uniform on :math:`\pm 1/\sqrt H`)."""
        complex_ = self.dtype.is_complex
        bound = 1.0 / math.sqrt((2 if complex_ else 1) * self.hidden_size)
        with torch.no_grad():
            for w in self.parameters():
                (torch.view_as_real(w) if complex_ else w).uniform_(-bound, bound)

    def _weights(self) -> list[torch.Tensor | None]:
        return [self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh]

    def _inputs(self, x, hx):
        """Check ``x`` ``(B, D)`` / ``(D,)`` and the state(s); return batched ``x``, the states
        as a list (zeros when ``hx`` is None) and whether the input was unbatched."""
        owner = type(self).__name__
        check_dtype(x, self.dtype, owner)
        if x.dim() not in (1, 2) or x.shape[-1] != self.input_size:
            raise ValueError(
                f"{owner}: expected input of shape (B, {self.input_size}) or unbatched "
                f"({self.input_size},), got {tuple(x.shape)}"
            )
        unbatched = x.dim() == 1
        if unbatched:
            x = x[None]
        shape = (x.shape[0], self.hidden_size)
        if hx is None:
            zeros = x.new_zeros(shape)
            return x, [zeros] * (2 if self._pair else 1), unbatched
        names = ("h", "c") if self._pair else ("hx",)
        if self._pair and not (isinstance(hx, (tuple, list)) and len(hx) == 2):
            raise TypeError(
                f"{owner}: hx must be a pair (h, c) of tensors, got {type(hx).__name__}"
            )
        states = list(hx) if self._pair else [hx]
        for name, s in zip(names, states):
            check_dtype(s, self.dtype, owner, name)
            if tuple(s.shape) != (shape[1:] if unbatched else shape):
                want = (self.hidden_size,) if unbatched else shape
                raise ValueError(f"{owner}: {name} must have shape {want}, got {tuple(s.shape)}")
        return x, [s[None] for s in states] if unbatched else states, unbatched

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        return s + f", gate={self.gate!r}, dtype={self.dtype}"


class LSTMCell(_CellBase):
    r"""One step of the complex LSTM, a drop-in for :class:`torch.nn.LSTMCell`.

    .. math::
        (i, f, g, o) = \text{gates}(W_{ih} x + b_{ih} + W_{hh} h + b_{hh}),\quad
        c' = f \odot c + i \odot g,\quad h' = o \odot \tanh c'

    with the gates of :class:`cplxnet.nn.LSTM` (Hochreiter & Schmidhuber, 1997; complex gates:
    :mod:`cplxnet.functional.rnn`): ``gate="split"`` applies :math:`\sigma`/:math:`\tanh` to the
    real and imaginary parts and multiplies part-wise, which is exactly torch's real
    ``LSTMCell`` of hidden size :math:`2H` on the interleaved view ``pack(x)`` with weights
    :func:`~cplxnet.functional.realify` ``(W)``; ``gate="analytic"`` uses the holomorphic
    :math:`\sigma`, :math:`\tanh` and complex products, exactly
    ``torch.nn.LSTMCell(dtype=torch.cfloat)``. One step equals one step of
    :class:`cplxnet.nn.LSTM` with the same weights and gate.

    Args (torch's, in torch's order):
        input_size, hidden_size: features of :math:`x` and of :math:`h`, :math:`c`.
        bias: learn ``bias_ih`` and ``bias_hh``.
        device, dtype: factory kwargs (default: the complex type of the default dtype; a real
            dtype builds torch's real cell, which loads a ``torch.nn.LSTMCell`` state_dict).

    Keyword-only:
        gate: ``"split"`` (bounded, default) or ``"analytic"``.

    Parameters (torch's names and shapes, gates stacked i, f, g, o): ``weight_ih``
    ``(4H, input_size)``, ``weight_hh`` ``(4H, H)``, ``bias_ih``, ``bias_hh`` ``(4H,)``.

    Examples::

        >>> cell = cplxnet.nn.LSTMCell(10, 20)
        >>> x = torch.randn(5, 3, 10, dtype=torch.cfloat)  # (time, batch, features)
        >>> h, c = None, None
        >>> for t in range(5):
        ...     h, c = cell(x[t], None if h is None else (h, c))
        >>> h.shape
        torch.Size([3, 20])
    """

    _gates = 4
    _pair = True

    def forward(
        self, input: torch.Tensor, hx: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``input`` ``(B, input_size)`` (or unbatched ``(input_size,)``), ``hx = (h, c)`` each
        ``(B, hidden_size)`` (``None``: zeros) -> ``(h', c')`` in the input's batching."""
        x, states, unbatched = self._inputs(input, hx)
        h, c = CF.lstm_cell(x, states, *self._weights(), gate=self.gate)
        return (h[0], c[0]) if unbatched else (h, c)


class GRUCell(_CellBase):
    r"""One step of the complex GRU, a drop-in for :class:`torch.nn.GRUCell`.

    .. math::
        r = \sigma(W_{ir} x + b_{ir} + W_{hr} h + b_{hr}),\quad
        z = \sigma(W_{iz} x + b_{iz} + W_{hz} h + b_{hz}) \\
        n = \tanh(W_{in} x + b_{in} + r \odot (W_{hn} h + b_{hn})),\quad
        h' = (1 - z) \odot n + z \odot h

    (Cho et al., EMNLP 2014) with the gates of :class:`cplxnet.nn.GRU`: ``gate="split"``
    (part-wise; torch's real ``GRUCell`` of hidden :math:`2H` on ``pack(x)`` with realified
    weights) or ``gate="analytic"`` (``torch.nn.GRUCell(dtype=torch.cfloat)``). One step equals
    one step of :class:`cplxnet.nn.GRU` with the same weights and gate. Arguments as
    :class:`LSTMCell`; parameters ``weight_ih`` ``(3H, input_size)``, ``weight_hh`` ``(3H, H)``,
    ``bias_ih``, ``bias_hh`` ``(3H,)`` (gates stacked r, z, n).

    Examples::

        >>> cell = cplxnet.nn.GRUCell(10, 20)
        >>> h = cell(torch.randn(3, 10, dtype=torch.cfloat))  # hx=None: zeros
        >>> cell(torch.randn(3, 10, dtype=torch.cfloat), h).shape
        torch.Size([3, 20])
    """

    _gates = 3
    _pair = False

    def forward(self, input: torch.Tensor, hx: torch.Tensor | None = None) -> torch.Tensor:
        """``input`` ``(B, input_size)`` (or unbatched ``(input_size,)``), ``hx``
        ``(B, hidden_size)`` (``None``: zeros) -> ``h'`` in the input's batching."""
        x, states, unbatched = self._inputs(input, hx)
        h = CF.gru_cell(x, states[0], *self._weights(), gate=self.gate)
        return h[0] if unbatched else h
