r"""One step of the complex LSTM and GRU (module forms: :class:`cplxnet.nn.LSTMCell`,
:class:`cplxnet.nn.GRUCell`).

The gates are those of :func:`cplxnet.functional.lstm` / :func:`cplxnet.functional.gru` (math and
derivation in :mod:`cplxnet.functional.rnn`), computed the same way: with ``gate="split"`` the
step is torch's real cell of hidden size :math:`2H` on the interleaved view ``pack(x)``, with
weights :func:`~cplxnet.functional.realify` ``(W)`` and biases ``pack(b)``; with
``gate="analytic"`` it is torch's native complex cell (``torch.nn.LSTMCell(dtype=torch.cfloat)``).
The sequence layers run the same equations in torch's fused kernels, so one step of a cell equals
one step of :class:`cplxnet.nn.LSTM` / :class:`cplxnet.nn.GRU` with the same weights. Real
tensors (a real twin) run torch's real cell unchanged: for real numbers both gate families are
the ordinary LSTM/GRU.
"""

from __future__ import annotations

import torch
from torch import _VF

from .._utils import check_choice, pack, unpack, without_autocast
from .rnn import GATES, realify

__all__ = ["lstm_cell", "gru_cell"]

_Tensor = torch.Tensor


def _cell_step(kind, x, states, weights, gate, owner):
    """``kind``'s torch cell on ``x`` ``(B, D)`` and ``states`` (each ``(B, H)``); for complex
    tensors with split gates, on their packed real views with realified weights."""
    check_choice(gate, GATES, owner, "gate")
    for name, t in [("hx", s) for s in states] + [("weight", w) for w in weights]:
        if t is not None and t.dtype != x.dtype:
            raise TypeError(
                f"{owner}: {name} has dtype {t.dtype} but the input has {x.dtype}; give every "
                "tensor the same dtype"
            )
    like = x
    split = gate == "split" and x.is_complex()
    if split:
        x = pack(x)
        states = [pack(s) for s in states]
        weights = [None if w is None else realify(w) for w in weights]
    if kind == "lstm":
        out = _VF.lstm_cell(x, tuple(states), *weights)
    else:
        out = (_VF.gru_cell(x, states[0], *weights),)
    return [unpack(s, like) for s in out] if split else list(out)


@without_autocast
def lstm_cell(
    input: _Tensor,
    hx: tuple[_Tensor, _Tensor],
    weight_ih: _Tensor,
    weight_hh: _Tensor,
    bias_ih: _Tensor | None = None,
    bias_hh: _Tensor | None = None,
    *,
    gate: str = "split",
) -> tuple[_Tensor, _Tensor]:
    r"""One LSTM step ``(h', c')`` from ``input`` ``(B, D)`` and ``hx = (h, c)`` ``(B, H)`` each.

    Gates stacked i, f, g, o as torch (``weight_ih (4H, D)``, ``weight_hh (4H, H)``, biases
    ``(4H,)``): :math:`c' = f \odot c + i \odot g`, :math:`h' = o \odot \tanh c'`, with split
    activations and part-wise products (``gate="split"``) or analytic activations and complex
    products (``gate="analytic"``), as :func:`cplxnet.functional.lstm`.
    """
    h, c = _cell_step(
        "lstm",
        input,
        list(hx),
        [weight_ih, weight_hh, bias_ih, bias_hh],
        gate,
        "cplxnet.functional.lstm_cell",
    )
    return h, c


@without_autocast
def gru_cell(
    input: _Tensor,
    hx: _Tensor,
    weight_ih: _Tensor,
    weight_hh: _Tensor,
    bias_ih: _Tensor | None = None,
    bias_hh: _Tensor | None = None,
    *,
    gate: str = "split",
) -> _Tensor:
    r"""One GRU step ``h'`` from ``input`` ``(B, D)`` and ``hx`` ``(B, H)``.

    Gates stacked r, z, n as torch (``weight_ih (3H, D)``, ``weight_hh (3H, H)``):
    :math:`n = \tanh(W_{in}x + b_{in} + r \odot (W_{hn}h + b_{hn}))`,
    :math:`h' = (1 - z) \odot n + z \odot h`, split or analytic as :func:`cplxnet.functional.gru`.
    """
    (h,) = _cell_step(
        "gru",
        input,
        [hx],
        [weight_ih, weight_hh, bias_ih, bias_hh],
        gate,
        "cplxnet.functional.gru_cell",
    )
    return h
