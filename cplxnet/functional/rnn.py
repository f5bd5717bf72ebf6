r"""Complex recurrent networks: LSTM and GRU on torch's fused kernels, and the unitary RNN.

Two gate families are offered for the LSTM and the GRU.

``gate="split"`` (bounded, default)
    Every gate is a *split* activation, applied to the real and imaginary parts separately
    (Trabelsi et al., "Deep Complex Networks", ICLR 2018), and every gate product is taken
    part-wise as well: the real part of the cell is gated by the real part of the gate and the
    imaginary part by the imaginary part. For the LSTM, with :math:`z_r, z_i` the parts of a
    complex pre-activation :math:`z = W_{i\cdot} x + b_{i\cdot} + W_{h\cdot} h + b_{h\cdot}`:

    .. math::

        i = \sigma(z^i_r) + \mathrm{i}\,\sigma(z^i_i), \quad
        f = \sigma(z^f_r) + \mathrm{i}\,\sigma(z^f_i), \quad
        g = \tanh(z^g_r) + \mathrm{i}\,\tanh(z^g_i), \quad
        o = \sigma(z^o_r) + \mathrm{i}\,\sigma(z^o_i),

        c_r = f_r c_r + i_r g_r, \quad c_i = f_i c_i + i_i g_i, \quad
        h_r = o_r \tanh(c_r), \quad h_i = o_i \tanh(c_i).

    **Derivation of the fused path.** Write a complex vector :math:`v \in \mathbb{C}^n` as the
    interleaved real vector :math:`\mathrm{pack}(v) = [v_{r,0}, v_{i,0}, v_{r,1}, v_{i,1},
    \dots] \in \mathbb{R}^{2n}` (:func:`cplxnet._utils.pack`, a zero-copy view). A complex
    linear map :math:`W = A + \mathrm{i}B` (:math:`m \times n`) acts on it as the real matrix
    :math:`R(W) \in \mathbb{R}^{2m \times 2n}` with the :math:`2 \times 2` block
    :math:`\begin{pmatrix} A_{jk} & -B_{jk} \\ B_{jk} & A_{jk} \end{pmatrix}` in rows
    :math:`2j, 2j+1` and columns :math:`2k, 2k+1`, because
    :math:`(Wv)_r = A v_r - B v_i` and :math:`(Wv)_i = B v_r + A v_i`; a complex bias becomes
    :math:`\mathrm{pack}(b)`. Since torch stacks the gates of ``weight_ih`` row-wise
    (:math:`4H` rows: i, f, g, o), complex row :math:`gH + j` becomes real rows
    :math:`2(gH + j)` and :math:`2(gH+j)+1`, which is exactly unit :math:`2j` / :math:`2j+1` of
    gate :math:`g` of a real LSTM with hidden size :math:`2H`. In that real LSTM, real unit
    :math:`2j` sees the pre-activation :math:`z_r` of complex unit :math:`j` and unit
    :math:`2j+1` sees :math:`z_i`; the real LSTM applies :math:`\sigma`/:math:`\tanh` and the
    element-wise products unit by unit, which are exactly the part-wise equations above.
    Hence the complex split LSTM *is* the real LSTM on ``pack(x)`` with hidden size :math:`2H`,
    weights :math:`R(W)` and biases ``pack(b)``; its output, ``h_n`` and ``c_n`` are ``pack``
    of the complex ones (layers and directions included, since every layer's input is the
    previous layer's packed output). The same holds for the GRU (torch's gate order r, z, n;
    :math:`n = \tanh(W_{in}x + b_{in} + r \odot (W_{hn}h + b_{hn}))` with a part-wise
    :math:`\odot`). So both run on torch's fused kernels (``torch._VF.lstm`` / ``_VF.gru``,
    packed sequences for variable lengths), with :math:`R(W)` rebuilt from the complex
    parameters on every call (a cheap differentiable copy). Cost: that of ``torch.nn.LSTM``
    with hidden size :math:`2H` (the same real FLOPs).

    Why part-wise products rather than complex products of split gates (complextorch's
    choice)? With :math:`f = \sigma(a) + \mathrm{i}\sigma(b)`, the complex product
    :math:`f c` rotates the cell by :math:`\arg f \in (0, \pi/2)` at every step and can
    amplify it by up to :math:`\sqrt 2`, so the forget gate no longer bounds the cell; with
    part-wise products each part keeps the LSTM's guarantees (:math:`|c_t| \le |c_{t-1}| + 1`
    per part, :math:`|h_r|, |h_i| < 1`). All the complex structure lives in the weights, as in
    any split-activation network.

``gate="analytic"``
    Analytic (holomorphic) :math:`\sigma(z) = 1/(1+e^{-z})` and :math:`\tanh(z)` with complex
    gate products, i.e. exactly ``torch.nn.LSTM(dtype=torch.cfloat)``; torch's native complex
    kernel is called (it supports backward in torch >= 2.4). The analytic gates have poles:
    :math:`\sigma` at :math:`z = \mathrm{i}\pi(2k+1)` and :math:`\tanh` at
    :math:`z = \mathrm{i}\pi(k + 1/2)`, :math:`k \in \mathbb{Z}`; near them the gates, the cell
    and :math:`h` are unbounded (:math:`|h|` reached 5.5 on random data), so keep
    pre-activations small (the default init does) or prefer ``gate="split"``.

Variable lengths: ``lengths`` (``(B,)`` integers in ``[1, L]``) runs each sequence only over
its real steps; outputs at padded steps are zero, the final states are those at each sequence's
last real step, and the reverse direction starts at each sequence's own last real token.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import _VF
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from .._utils import (
    assert_on_device,
    check_choice,
    check_complex,
    check_last_dim,
    is_tracing,
    pack,
    unpack,
    without_autocast,
)
from .activation import modrelu
from .dropout import entry_dropout

__all__ = [
    "GATES",
    "realify",
    "lengths_from_padding_mask",
    "lstm",
    "gru",
    "unitary_matrix",
    "unitary_rnn_cell",
    "unitary_rnn",
]

GATES = ("split", "analytic")
"""Valid ``gate=`` values of :func:`lstm`, :func:`gru`, :class:`cplxnet.nn.LSTM` and ``GRU``."""

_Tensor = torch.Tensor


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------


def realify(w: _Tensor) -> _Tensor:
    r"""The real form of a complex weight or bias in the interleaved (``pack``) layout.

    A matrix :math:`W = A + \mathrm{i}B` of shape ``(m, n)`` gives the ``(2m, 2n)`` real matrix
    with block :math:`\begin{pmatrix} A_{jk} & -B_{jk} \\ B_{jk} & A_{jk} \end{pmatrix}` at rows
    ``2j, 2j+1`` and columns ``2k, 2k+1``, so that ``pack(x @ W.T) == pack(x) @ realify(W).T``.
    A vector ``(m,)`` gives ``pack(b)`` ``(2m,)``. Differentiable; real tensors pass unchanged.
    """
    if not w.is_complex():
        return w
    if w.dim() == 1:
        return torch.view_as_real(w).flatten()
    if w.dim() != 2:
        raise ValueError(f"realify: expected a vector or a matrix, got shape {tuple(w.shape)}")
    a, b = w.real, w.imag
    m, n = w.shape
    top = torch.stack((a, -b), dim=-1)  # (m, n, 2): row 2j
    bottom = torch.stack((b, a), dim=-1)  # (m, n, 2): row 2j+1
    return torch.stack((top, bottom), dim=1).reshape(2 * m, 2 * n)


def lengths_from_padding_mask(padding_mask: _Tensor, owner: str = "lengths_from_padding_mask"):
    """``(B,)`` int64 lengths from a ``(B, L)`` bool padding mask (True marks padding).

    Padding must be at the end of each sequence: otherwise a ValueError naming ``owner`` on CPU,
    a device-side assertion on an accelerator (checked without a host read,
    :func:`cplxnet._utils.assert_on_device`).
    """
    if not isinstance(padding_mask, _Tensor) or padding_mask.dtype != torch.bool:
        got = padding_mask.dtype if isinstance(padding_mask, _Tensor) else type(padding_mask)
        raise TypeError(f"{owner}: padding_mask must be a torch.bool tensor, got {got}")
    if padding_mask.dim() != 2:
        raise ValueError(
            f"{owner}: padding_mask must have shape (B, L), got {tuple(padding_mask.shape)}"
        )
    lengths = (~padding_mask).sum(dim=1)
    steps = torch.arange(padding_mask.shape[1], device=padding_mask.device)
    assert_on_device(  # no host read (a device-side assertion off the CPU)
        (padding_mask == (steps >= lengths[:, None])).all(),
        lambda: ValueError(
            f"{owner}: padding_mask must mark padding (True) only at the end of each sequence"
        ),
    )
    return lengths


def _check_lengths(lengths: _Tensor | None, batch: int, steps: int, owner: str):
    """Validate ``lengths``; return it as int64 on CPU, or None when every length is ``steps``."""
    if lengths is None:
        return None
    if not isinstance(lengths, _Tensor):
        lengths = torch.as_tensor(lengths)
    if lengths.dtype.is_floating_point or lengths.dtype.is_complex or lengths.dtype == torch.bool:
        raise TypeError(f"{owner}: lengths must be an integer tensor, got {lengths.dtype}")
    if tuple(lengths.shape) != (batch,):
        raise ValueError(
            f"{owner}: lengths must have shape (batch,) = ({batch},), got {tuple(lengths.shape)}"
        )
    lengths = lengths.detach().to("cpu", torch.int64)
    if is_tracing():  # the checks below read data: eager mode only
        return lengths
    if batch and (int(lengths.min()) < 1 or int(lengths.max()) > steps):
        raise ValueError(
            f"{owner}: every length must be in [1, {steps}] (the sequence length); got "
            f"min {int(lengths.min())}, max {int(lengths.max())}"
        )
    if bool((lengths == steps).all()):
        return None
    return lengths


def _check_input(x: _Tensor, owner: str) -> None:
    check_complex(x, owner)
    if x.dim() != 3:
        raise ValueError(
            f"{owner}: expected a 3-D input (batch, seq, features) with batch_first=True or "
            f"(seq, batch, features) otherwise, got shape {tuple(x.shape)}"
        )


def _check_state(h: _Tensor, shape: tuple, x: _Tensor, owner: str, name: str) -> None:
    check_complex(h, owner, name)
    if tuple(h.shape) != shape:
        raise ValueError(f"{owner}: {name} must have shape {shape}, got {tuple(h.shape)}")
    if h.dtype != x.dtype:
        raise TypeError(f"{owner}: {name} has dtype {h.dtype} but the input has {x.dtype}")


def _modrelu(z: _Tensor, bias: _Tensor | None) -> _Tensor:
    r"""modReLU (:func:`cplxnet.functional.modrelu`, finite at 0), or the identity without bias."""
    return z if bias is None else modrelu(z, bias)


# ----------------------------------------------------------------------------------------------
# LSTM / GRU on the fused kernels
# ----------------------------------------------------------------------------------------------


def _vf_call(kind, data, batch_sizes, hxs, flat, has_bias, num_layers, bidirectional, bf):
    fn = _VF.lstm if kind == "lstm" else _VF.gru
    hx = tuple(hxs) if kind == "lstm" else hxs[0]
    if batch_sizes is None:
        res = fn(data, hx, flat, has_bias, num_layers, 0.0, False, bidirectional, bf)
    else:
        res = fn(data, batch_sizes, hx, flat, has_bias, num_layers, 0.0, False, bidirectional)
    return res[0], list(res[1:])


def _fused_rnn(
    kind: str,
    x: _Tensor,
    weights: Sequence[_Tensor],
    hx,
    lengths,
    num_layers: int,
    bidirectional: bool,
    gate: str,
    dropout: float,
    training: bool,
    batch_first: bool,
    owner: str,
):
    check_choice(gate, GATES, owner, "gate")
    _check_input(x, owner)
    dirs = 2 if bidirectional else 1
    n_gates = 4 if kind == "lstm" else 3
    weights = list(weights)
    per_dir = len(weights) // max(num_layers * dirs, 1)
    # per layer and direction: weight_ih, weight_hh[, bias_ih, bias_hh][, weight_hr (LSTM)]
    counts = (2, 3, 4, 5) if kind == "lstm" else (2, 4)
    if num_layers < 1 or per_dir not in counts or per_dir * num_layers * dirs != len(weights):
        raise ValueError(
            f"{owner}: expected "
            + " or ".join(str(c * num_layers * dirs) for c in counts)
            + " weights (weight_ih, weight_hh[, bias_ih, bias_hh]"
            + ("[, weight_hr]" if kind == "lstm" else "")
            + f" per layer and direction), got {len(weights)}"
        )
    has_bias = per_dir >= 4
    has_proj = per_dir in (3, 5)
    hidden = weights[0].shape[0] // n_gates
    out_size = weights[1].shape[-1]  # the width of h: proj_size with weight_hr, else hidden
    rows = n_gates * hidden
    if (
        weights[0].shape[0] != rows
        or weights[1].shape[0] != rows
        or (not has_proj and out_size != hidden)
    ):
        width = "proj_size" if has_proj else f"hidden_size = {hidden}"
        raise ValueError(
            f"{owner}: weight_ih_l0 must have {n_gates} * hidden_size rows and weight_hh_l0 "
            f"shape ({n_gates} * hidden_size, {width}), got {tuple(weights[0].shape)} and "
            f"{tuple(weights[1].shape)}"
        )
    if has_proj and weights[per_dir - 1].shape != (out_size, hidden):
        raise ValueError(
            f"{owner}: weight_hr_l0 must have shape (proj_size, hidden_size) = ({out_size}, "
            f"{hidden}) (proj_size: weight_hh_l0's width), got {tuple(weights[per_dir - 1].shape)}"
        )
    if has_proj and out_size >= hidden:
        raise ValueError(
            f"{owner}: with weight_hr the projection must be narrower than the cell: proj_size "
            f"(weight_hh_l0's width, {out_size}) must be smaller than hidden_size = {hidden}"
        )
    if any(w.dtype != x.dtype for w in weights):
        raise TypeError(
            f"{owner}: input dtype {x.dtype} does not match the weights' dtype {weights[0].dtype}; "
            "convert the input (x.to(dtype)) or the module (module.to(dtype))"
        )
    check_last_dim(x, weights[0].shape[1], owner)
    batch, steps = (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])
    lengths = _check_lengths(lengths, batch, steps, owner)

    state_shapes = [(num_layers * dirs, batch, out_size), (num_layers * dirs, batch, hidden)]
    n_states = 2 if kind == "lstm" else 1
    if hx is None:
        hxs = [x.new_zeros(shape) for shape in state_shapes[:n_states]]
    else:
        hxs = list(hx) if kind == "lstm" else [hx]
        if kind == "lstm" and len(hxs) != 2:
            raise ValueError(f"{owner}: hx must be a pair (h_0, c_0)")
        for name, h, shape in zip(("h_0", "c_0"), hxs, state_shapes):
            _check_state(h, shape, x, owner, name)

    split = gate == "split"
    # the fused kernel runs on the real interleaved view (split) or on complex data (analytic)
    flat = [realify(w) for w in weights] if split else weights
    hxs = [pack(h).contiguous() for h in hxs] if split else hxs
    data = pack(x)  # (B, L, 2D) real view
    batch_sizes = sorted_idx = unsorted_idx = None
    if split and is_tracing():
        # torch.export / torch.compile: a scan over time instead of packed sequences or the
        # fused kernel (whose oneDNN CPU form AOTAutograd cannot trace in training; real
        # arithmetic only: the analytic gates keep the fused path, which does not export)
        from .rnn_scan import scan_layers

        seq = data.transpose(0, 1) if batch_first else data  # (L, B, F)
        if lengths is None:
            lengths = torch.full(seq.shape[1:2], seq.shape[0], device=seq.device)
        seq, out_states = scan_layers(
            kind, seq, lengths, hxs, flat, per_dir, num_layers, dirs, dropout, training, split
        )
        data = seq.transpose(0, 1) if batch_first else seq
        return unpack(data, x), [unpack(s, x) for s in out_states]
    if lengths is not None:
        packed = pack_padded_sequence(data, lengths, batch_first, enforce_sorted=False)
        data, batch_sizes = packed.data, packed.batch_sizes  # (N, 2D)
        sorted_idx, unsorted_idx = packed.sorted_indices, packed.unsorted_indices
        hxs = [h.index_select(1, sorted_idx) for h in hxs]
    if not split:
        data = unpack(data, x)

    if dropout > 0.0 and training and num_layers > 1:
        # layer by layer, so that whole complex entries are dropped between layers
        per_layer = per_dir * dirs
        states: list[list[_Tensor]] = [[] for _ in hxs]
        for layer in range(num_layers):
            if layer:
                data = entry_dropout(data, dropout, interleaved=split)
            sl = slice(layer * dirs, (layer + 1) * dirs)
            data, new = _vf_call(
                kind,
                data,
                batch_sizes,
                [h[sl] for h in hxs],
                flat[layer * per_layer : (layer + 1) * per_layer],
                has_bias,
                1,
                bidirectional,
                batch_first,
            )
            for acc, s in zip(states, new):
                acc.append(s)
        out_states = [torch.cat(acc, dim=0) for acc in states]
    else:
        data, out_states = _vf_call(
            kind, data, batch_sizes, hxs, flat, has_bias, num_layers, bidirectional, batch_first
        )

    if lengths is not None:
        packed = PackedSequence(pack(data), batch_sizes, sorted_idx, unsorted_idx)
        data, _ = pad_packed_sequence(packed, batch_first=batch_first, total_length=steps)
        out_states = [s.index_select(1, unsorted_idx) for s in out_states]
    out = unpack(data, x) if (split or lengths is not None) else data
    if split:
        out_states = [unpack(s, x) for s in out_states]
    return out, out_states


@without_autocast
def lstm(
    x: _Tensor,
    weights: Sequence[_Tensor],
    hx: tuple[_Tensor, _Tensor] | None = None,
    lengths: _Tensor | None = None,
    *,
    num_layers: int = 1,
    bidirectional: bool = False,
    gate: str = "split",
    dropout: float = 0.0,
    training: bool = False,
    batch_first: bool = True,
) -> tuple[_Tensor, tuple[_Tensor, _Tensor]]:
    r"""Complex multi-layer LSTM (module form: :class:`cplxnet.nn.LSTM`; math: module docstring).

    Args:
        x: ``(B, L, D)`` complex (``(L, B, D)`` if ``batch_first=False``).
        weights: complex tensors in torch's ``_flat_weights`` order: for each layer, for each
            direction, ``weight_ih (4H, D_in)``, ``weight_hh (4H, H)``, optionally
            ``bias_ih (4H,)``, ``bias_hh (4H,)`` and optionally ``weight_hr (P, H)``; gates
            stacked i, f, g, o. With ``weight_hr`` (torch's ``proj_size = P < H``) the output
            and the state are projected, :math:`h_t = W_{hr} (o_t \odot \tanh c_t)`, and
            ``weight_hh`` is ``(4H, P)``; with split gates :math:`W_{hr}` enters the real LSTM of
            hidden ``2H`` as its projection :math:`R(W_{hr})` (``2P x 2H``), so the fused path
            and the equivalence of the module docstring are unchanged.
        hx: optional ``(h_0, c_0)``, each ``(num_layers * dirs, B, H)`` complex (``h_0``:
            ``(num_layers * dirs, B, P)`` with ``weight_hr``).
        lengths: optional ``(B,)`` integer lengths in ``[1, L]`` (padding at the end).
        gate: ``"split"`` (bounded, fused real kernel) or ``"analytic"`` (native complex).
        dropout, training: inter-layer dropout of whole complex entries when ``training``.

    Returns:
        ``output (B, L, dirs * H)`` (zero at padded steps) and ``(h_n, c_n)``, each
        ``(num_layers * dirs, B, H)``, taken at each sequence's last real step (with
        ``weight_hr``: ``output`` and ``h_n`` ``P`` wide instead of ``H``).
    """
    out, (h, c) = _fused_rnn(
        "lstm",
        x,
        weights,
        hx,
        lengths,
        num_layers,
        bidirectional,
        gate,
        dropout,
        training,
        batch_first,
        "cplxnet.functional.lstm",
    )
    return out, (h, c)


@without_autocast
def gru(
    x: _Tensor,
    weights: Sequence[_Tensor],
    hx: _Tensor | None = None,
    lengths: _Tensor | None = None,
    *,
    num_layers: int = 1,
    bidirectional: bool = False,
    gate: str = "split",
    dropout: float = 0.0,
    training: bool = False,
    batch_first: bool = True,
) -> tuple[_Tensor, _Tensor]:
    r"""Complex multi-layer GRU (module form: :class:`cplxnet.nn.GRU`).

    torch's GRU equations (gates stacked r, z, n):
    :math:`r = \sigma(W_{ir}x + b_{ir} + W_{hr}h + b_{hr})`, :math:`z = \sigma(\dots)`,
    :math:`n = \tanh(W_{in}x + b_{in} + r \odot (W_{hn}h + b_{hn}))`,
    :math:`h' = (1 - z) \odot n + z \odot h`, with split activations and part-wise products
    (``gate="split"``, equal to a real GRU of hidden ``2H`` on the packed view, see the module
    docstring) or analytic activations and complex products (``gate="analytic"``). Arguments
    and returns as :func:`lstm` (weights ``(3H, D_in)``, ``(3H, H)``, ``(3H,)``; one state).
    """
    out, (h,) = _fused_rnn(
        "gru",
        x,
        weights,
        hx,
        lengths,
        num_layers,
        bidirectional,
        gate,
        dropout,
        training,
        batch_first,
        "cplxnet.functional.gru",
    )
    return out, h


# ----------------------------------------------------------------------------------------------
# unitary RNN
# ----------------------------------------------------------------------------------------------


def unitary_matrix(generator: _Tensor) -> _Tensor:
    r"""The unitary :math:`U = \exp(S)` with :math:`S = G - G^H` skew-Hermitian.

    Only the skew-Hermitian part of ``generator`` ``(H, H)`` matters. :math:`U^H U = I` holds to
    rounding for any :math:`G` (``torch.linalg.matrix_exp``), so an unconstrained optimiser
    step on :math:`G` keeps :math:`U` unitary (Lezcano-Casado & Martinez-Rubio, "Cheap
    Orthogonal Constraints in Neural Networks", ICML 2019).
    """
    return torch.linalg.matrix_exp(generator - generator.mH)


def unitary_rnn_cell(
    x: _Tensor,
    h: _Tensor,
    weight_ih: _Tensor,
    weight_hh: _Tensor,
    bias: _Tensor | None = None,
) -> _Tensor:
    r"""One step :math:`h' = \mathrm{modReLU}(U h + W x;\, b)` (Arjovsky et al., ICML 2016).

    ``x (B, D)``, ``h (B, H)`` complex; ``weight_ih`` :math:`W` ``(H, D)``; ``weight_hh`` the
    (unitary) :math:`U` ``(H, H)``, e.g. :func:`unitary_matrix`; ``bias`` the real modReLU bias
    ``(H,)`` (None: no non-linearity).
    """
    return _modrelu(x @ weight_ih.transpose(0, 1) + h @ weight_hh.transpose(0, 1), bias)


def _reverse_index(lengths: _Tensor | None, batch: int, steps: int, device) -> _Tensor | None:
    """``(B, L)`` index reversing each sequence within its length (an involution)."""
    if lengths is None:
        return None
    t = torch.arange(steps, device=device).expand(batch, steps)
    lens = lengths.to(device)[:, None]
    return torch.where(t < lens, lens - 1 - t, t)


def _scan_unitary(xw, unitary, bias, h, valid):
    """Loop ``h_t = modReLU(xw_t + U h_{t-1})`` over ``xw (B, L, H)``; ``valid (L, B, 1)``."""
    u_t = unitary.transpose(0, 1)
    outs = []
    steps = xw.unbind(1)  # never xw[:, t] in the loop (quadratic backward)
    masks = valid.unbind(0) if valid is not None else [None] * len(steps)
    for xt, m in zip(steps, masks):
        h_new = _modrelu(xt + h @ u_t, bias)
        h = h_new if m is None else torch.where(m, h_new, h)
        outs.append(h)
    return torch.stack(outs, dim=1), h  # (B, L, H), (B, H)


def unitary_rnn(
    x: _Tensor,
    weights: Sequence[tuple[_Tensor, _Tensor, _Tensor | None]],
    h0: _Tensor | None = None,
    lengths: _Tensor | None = None,
    *,
    num_layers: int = 1,
    bidirectional: bool = False,
    dropout: float = 0.0,
    training: bool = False,
    batch_first: bool = True,
) -> tuple[_Tensor, _Tensor]:
    r"""Multi-layer (bi)directional unitary RNN (module form: :class:`cplxnet.nn.UnitaryRNN`).

    Each layer and direction runs :func:`unitary_rnn_cell` over time as a Python loop (the
    input projection :math:`W x_t` for all steps is one matmul beforehand).

    Args:
        x: ``(B, L, D)`` complex (``(L, B, D)`` if ``batch_first=False``).
        weights: per layer, per direction, ``(weight_ih (H, D_in), weight_hh (H, H) unitary,
            bias (H,) real or None)``.
        h0: optional ``(num_layers * dirs, B, H)`` complex initial state.
        lengths: optional ``(B,)`` integer lengths in ``[1, L]``.

    Returns:
        ``output (B, L, dirs * H)`` (zero at padded steps) and ``h_n (num_layers * dirs, B, H)``
        at each sequence's last real step (the reverse direction starts at that step).
    """
    owner = "cplxnet.functional.unitary_rnn"
    _check_input(x, owner)
    dirs = 2 if bidirectional else 1
    weights = list(weights)
    if num_layers < 1 or len(weights) != num_layers * dirs:
        raise ValueError(
            f"{owner}: expected {num_layers * dirs} (weight_ih, weight_hh, bias) triples, "
            f"got {len(weights)}"
        )
    if any(t.dtype != x.dtype for w in weights for t in w[:2]):
        raise TypeError(
            f"{owner}: input dtype {x.dtype} does not match the weights' dtype "
            f"{weights[0][0].dtype}; convert the input (x.to(dtype)) or the module"
        )
    hidden = weights[0][1].shape[0]
    check_last_dim(x, weights[0][0].shape[1], owner)
    if not batch_first:
        x = x.transpose(0, 1)
    batch, steps = x.shape[0], x.shape[1]
    lengths = _check_lengths(lengths, batch, steps, owner)
    shape = (num_layers * dirs, batch, hidden)
    if h0 is None:
        h0 = x.new_zeros(shape)
    else:
        _check_state(h0, shape, x, owner, "h_0")

    valid = rev = None
    if lengths is not None:
        lens = lengths.to(x.device)
        valid = (torch.arange(steps, device=x.device)[:, None] < lens)[..., None]  # (L, B, 1)
        rev = _reverse_index(lengths, batch, steps, x.device)  # (B, L)

    def flip(t: _Tensor) -> _Tensor:
        if rev is None:
            return t.flip(1)
        return t.gather(1, rev[..., None].expand_as(t))

    out, finals = x, []
    for layer in range(num_layers):
        if layer and training and dropout > 0.0:
            out = entry_dropout(out, dropout, interleaved=False)
        outs = []
        for d in range(dirs):
            w_ih, u, b = weights[layer * dirs + d]
            inp = out if d == 0 else flip(out)
            xw = inp @ w_ih.transpose(0, 1)  # (B, L, H)
            seq, h_last = _scan_unitary(xw, u, b, h0[layer * dirs + d], valid)
            outs.append(seq if d == 0 else flip(seq))
            finals.append(h_last)
        out = outs[0] if dirs == 1 else torch.cat(outs, dim=-1)
        if valid is not None:
            out = out * valid.transpose(0, 1)  # zero at padded steps
    if not batch_first:
        out = out.transpose(0, 1)
    return out, torch.stack(finals, dim=0)
