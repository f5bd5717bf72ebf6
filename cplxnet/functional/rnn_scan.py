r"""Recurrent layers over sequences of given lengths as a ``scan`` over time.

Packed sequences (``pack_padded_sequence`` + torch's fused kernels) have shapes that depend on the
lengths' values, which ``torch.export`` and ``torch.compile(fullgraph=True)`` cannot trace with a
dynamic length. :func:`scan_rnn` computes the same result with torch's gate equations
(LSTM: gates i, f, g, o; GRU: r, z, n) in a ``scan`` over time: a step past a sequence's end keeps
the state and outputs zero, and the reverse direction runs on each sequence reversed within its
length. :func:`cplxnet.functional.lstm` / ``gru`` (split gates) use it under tracing.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .dropout import entry_dropout

_Tensor = torch.Tensor

__all__ = ["scan_rnn"]


def _cell(kind: str, xt: _Tensor, h: _Tensor, c: _Tensor | None, w_hh: _Tensor, b_hh, w_hr=None):
    """One step of torch's LSTM (gates i, f, g, o; with ``w_hr`` the projection
    ``h' = (o * tanh(c')) W_hr^T``) or GRU (r, z, n) given the input projection
    ``xt = x W_ih^T + b_ih`` ``(B, G * H)``; returns ``(h', c')`` (``c' = None`` for a GRU)."""
    hh = h @ w_hh.T
    if b_hh is not None:
        hh = hh + b_hh
    if kind == "lstm":
        i, f, g, o = (xt + hh).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return (h if w_hr is None else h @ w_hr.T), c
    xr, xz, xn = xt.chunk(3, dim=-1)
    hr, hz, hn = hh.chunk(3, dim=-1)
    r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
    n = torch.tanh(xn + r * hn)
    return (1 - z) * n + z * h, None


def scan_layers(
    kind, data, lengths, hxs, flat, per_dir, num_layers, dirs, dropout, training, interleaved
):
    """The fused kernel's result with ``lengths``, as a ``scan`` over time: the form
    ``torch.export``/``torch.compile`` trace with a dynamic length (packed sequences have
    data-dependent shapes). ``data`` ``(L, B, F)`` time-major, ``hxs`` ``[(layers * dirs, B, H)]``,
    ``per_dir`` weights per layer and direction (2 or 4, with ``weight_hr`` 3 or 5).
    A step past a sequence's end keeps its state and outputs zero; the reverse direction runs on
    each sequence reversed within its length."""
    from torch._higher_order_ops.scan import scan

    steps = data.shape[0]
    t = torch.arange(steps, device=data.device)[:, None]  # (L, 1)
    lens = lengths.to(data.device)[None, :]  # (1, B)
    valid = (t < lens)[..., None]  # (L, B, 1)
    rev = torch.where(t < lens, lens - 1 - t, t)[..., None]  # (L, B, 1) reversal within length
    states: list[list[_Tensor]] = [[] for _ in hxs]
    for layer in range(num_layers):
        if layer and dropout > 0.0 and training:
            data = entry_dropout(data, dropout, interleaved=interleaved)
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            w_ih, w_hh, *rest = flat[k * per_dir : (k + 1) * per_dir]
            b_ih, b_hh = rest[:2] if per_dir >= 4 else (None, None)
            w_hr = rest[-1] if per_dir in (3, 5) else None
            seq = data if d == 0 else data.gather(0, rev.expand(-1, -1, data.shape[-1]))
            xs = seq @ w_ih.T + (0 if b_ih is None else b_ih)  # (L, B, G * H)
            init = tuple(h[k].clone() for h in hxs)  # (h_0,) or (h_0, c_0), unaliased

            def step(carry, inp, w_hh=w_hh, b_hh=b_hh, w_hr=w_hr):
                xt, v = inp
                new = _cell(kind, xt, carry[0], carry[-1], w_hh, b_hh, w_hr)[: len(carry)]
                new = tuple(torch.where(v, a, b) for a, b in zip(new, carry))
                return new, new[0] * v

            final, out = scan(step, init, (xs, valid))
            if d == 1:
                out = out.gather(0, rev.expand(-1, -1, out.shape[-1]))
            outs.append(out)
            for acc, state in zip(states, final):
                acc.append(state)
        data = torch.cat(outs, dim=-1) if dirs == 2 else outs[0]
    return data, [torch.stack(acc, dim=0) for acc in states]


def scan_rnn(
    kind: str,
    x: _Tensor,
    weights: Sequence[_Tensor],
    lengths: _Tensor,
    hx: _Tensor | tuple[_Tensor, _Tensor] | None = None,
    num_layers: int = 1,
    bidirectional: bool = False,
    batch_first: bool = True,
) -> tuple[_Tensor, list[_Tensor]]:
    """torch's LSTM (``kind="lstm"``) or GRU over sequences of ``lengths``, as a ``scan`` over
    time with torch's gate equations and weight order (``weights`` = ``weight_ih, weight_hh[,
    bias_ih, bias_hh][, weight_hr]`` per layer and direction, as ``module._flat_weights``; the
    LSTM's ``weight_hr`` projects ``h`` to ``proj_size`` as torch's ``proj_size``): the result of
    ``pack_padded_sequence`` + the fused kernel, in a form ``torch.export`` and ``torch.compile``
    trace with a dynamic length. ``x`` ``(B, L, F)`` real (``(L, B, F)`` if not batch_first),
    ``lengths`` ``(B,)`` in ``[1, L]``, ``hx`` each ``(num_layers * dirs, B, H)`` (``h``:
    ``proj_size`` wide with ``weight_hr``; ``None``: zeros). Returns ``output``
    ``(B, L, dirs * H)`` (``H``: the width of ``h``; zero past each length) and the final
    states ``[h_n]`` or ``[h_n, c_n]`` at each sequence's last real step. Eval-mode semantics (no
    inter-layer dropout)."""
    dirs = 2 if bidirectional else 1
    per_dir = len(weights) // (num_layers * dirs)
    hidden = weights[0].shape[0] // (4 if kind == "lstm" else 3)
    out_size = weights[per_dir - 1].shape[0] if per_dir in (3, 5) else hidden  # h's width
    batch = x.shape[0] if batch_first else x.shape[1]
    if hx is None:
        hxs = [x.new_zeros(num_layers * dirs, batch, out_size)]
        if kind == "lstm":
            hxs.append(x.new_zeros(num_layers * dirs, batch, hidden))
    else:
        hxs = list(hx) if kind == "lstm" else [hx]
    seq = x.transpose(0, 1) if batch_first else x
    out, states = scan_layers(
        kind, seq, lengths, hxs, list(weights), per_dir, num_layers, dirs, 0.0, False, True
    )
    return (out.transpose(0, 1) if batch_first else out), states
