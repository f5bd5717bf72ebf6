r"""Complex recurrent layers: LSTM and GRU (the unitary RNN is in :mod:`cplxnet.nn.unitary_rnn`).

The LSTM and GRU keep torch's parameter names (``weight_ih_l0``, ``weight_hh_l0``,
``bias_ih_l0``, ``bias_hh_l0``, ``_reverse`` suffix for the backward direction), all complex,
so state_dicts look like those of ``torch.nn.LSTM(dtype=torch.cfloat)``. The math, the two gate
families and the derivation of the fused split-gate path are in :mod:`cplxnet.functional.rnn`.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from .. import functional as CF
from .._utils import (
    HasDtype,
    as_complex,
    check_choice,
    check_complex,
    check_last_dim,
    check_sizes,
    factory_kwargs,
    real_view,
)
from ..functional.rnn import GATES, lengths_from_padding_mask
from .dropin import TorchCounterpart

__all__ = ["LSTM", "GRU"]
# StackedRNN, resolve_lengths, check_lengths_hx and stack_repr are public for
# cplxnet.nn.unitary_rnn and not re-exported by cplxnet.nn


def check_lengths_hx(owner: str, lengths, hx, pair: bool):
    """``lengths`` as a tensor (a list or tuple of ints, as ``pack_padded_sequence`` takes them,
    becomes one) and ``hx`` checked to be a state: a complex tensor (or, when ``pair``, a tuple
    or list of two: LSTM's ``(h_0, c_0)``), not sequence lengths passed in torch's ``hx``
    place."""
    if isinstance(lengths, (tuple, list)):
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in lengths):
            kinds = sorted({type(n).__name__ for n in lengths})
            raise TypeError(
                f"{owner}: lengths must be a (batch,) integer tensor or a list/tuple of ints, "
                f"got a {type(lengths).__name__} of {', '.join(kinds)}"
            )
        lengths = torch.tensor(lengths, dtype=torch.int64)
    states = hx if pair and isinstance(hx, (tuple, list)) and len(hx) == 2 else (hx,)
    if hx is not None and not all(isinstance(h, torch.Tensor) and h.is_complex() for h in states):
        want = "a pair (h_0, c_0) of complex tensors" if pair else "a complex tensor h_0"
        raise TypeError(
            f"{owner}: hx (the second argument, as in torch) must be {want}; pass sequence "
            "lengths as lengths="
        )
    return lengths, hx


def _map_states(fn, state):
    """Apply ``fn`` to a state tensor or to each tensor of an ``(h, c)`` pair."""
    return tuple(fn(s) for s in state) if isinstance(state, (tuple, list)) else fn(state)


def resolve_lengths(owner, x, lengths, padding_mask, batch_first):
    if padding_mask is None:
        return lengths
    if lengths is not None:
        raise ValueError(f"{owner}: pass either lengths or padding_mask, not both")
    lengths = lengths_from_padding_mask(padding_mask, owner)
    batch, steps = (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])
    if x.dim() == 3 and tuple(padding_mask.shape) != (batch, steps):
        raise ValueError(
            f"{owner}: padding_mask must have shape (batch, seq) = ({batch}, {steps}), got "
            f"{tuple(padding_mask.shape)}"
        )
    return lengths


def stack_repr(m: nn.Module, extra: str, bias: bool) -> str:
    """``extra_repr`` of a multi-layer RNN: sizes, ``extra``, then the non-default options."""
    s = f"{m.input_size}, {m.hidden_size}"
    if m.proj_size:
        s += f", proj_size={m.proj_size}"
    s += extra
    if m.num_layers != 1:
        s += f", num_layers={m.num_layers}"
    if not bias:
        s += ", bias=False"
    if m.batch_first:
        s += ", batch_first=True"
    if m.dropout:
        s += f", dropout={m.dropout}"
    if m.bidirectional:
        s += ", bidirectional=True"
    return s + f", dtype={m.dtype}"


class StackedRNN(HasDtype, nn.Module):
    """Options and layer layout shared by the stacked RNNs (:class:`LSTM`, :class:`GRU`,
    :class:`UnitaryRNN`): checks and stores the sizes, ``batch_first``, ``dropout`` and
    ``bidirectional``; :meth:`_layout` lists each layer and direction's input width and
    parameter-name suffix (``_l{k}``, ``_reverse`` for the backward direction)."""

    proj_size: int = 0  # class default: modules pickled before LSTM had projections

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int,
        batch_first: bool,
        dropout: float,
        bidirectional: bool,
    ) -> None:
        owner = type(self).__name__
        super().__init__()
        check_sizes(owner, input_size=input_size, hidden_size=hidden_size, num_layers=num_layers)
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Number):
            raise ValueError(f"{owner}: dropout must be a number in [0, 1], got {dropout!r}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{owner}: dropout must be in [0, 1], got {dropout}")
        if dropout > 0 and num_layers == 1:  # torch's warning
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                "dropout expects num_layers greater than 1, but got dropout="
                f"{dropout} and num_layers={num_layers}",
                stacklevel=3,
            )
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = 0  # LSTM's projection width (torch keeps 0 on every RNN)

    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    def _layout(self) -> list[tuple[int, str]]:
        """``(input width, suffix)`` of every layer and direction, in torch's order."""
        out = []
        for layer in range(self.num_layers):
            width = self.proj_size or self.hidden_size  # of h, the next layer's input
            layer_in = self.input_size if layer == 0 else width * self.num_directions
            for d in range(self.num_directions):
                out.append((layer_in, f"_l{layer}" + ("_reverse" if d else "")))
        return out


def _check_proj_size(owner: str, proj_size: int, hidden_size: int, kind: str) -> int:
    """torch's rules for ``proj_size``: an integer in ``[0, hidden_size)``, non-zero for an LSTM
    only (torch's GRU takes the argument in the same place and refuses a projection)."""
    if isinstance(proj_size, bool) or not isinstance(proj_size, int):
        raise TypeError(
            f"{owner}: proj_size must be an integer (0: no projection), got {proj_size!r}"
        )
    if proj_size < 0:
        raise ValueError(f"{owner}: proj_size must be >= 0 (0: no projection), got {proj_size}")
    if proj_size and kind != "lstm":
        raise ValueError(f"{owner}: proj_size is supported by LSTM only (as in torch)")
    if proj_size >= hidden_size:
        raise ValueError(
            f"{owner}: proj_size must be smaller than hidden_size = {hidden_size}, got {proj_size}"
        )
    return proj_size


class _FusedRNNBase(StackedRNN):
    """Shared parameters and forward of :class:`LSTM` and :class:`GRU`."""

    _kind = "lstm"
    _gates = 4

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        gate: str = "split",
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner)
        super().__init__(input_size, hidden_size, num_layers, batch_first, dropout, bidirectional)
        self.proj_size = _check_proj_size(owner, proj_size, hidden_size, self._kind)
        self._dtype = fk["dtype"]
        self.gate = check_choice(gate, GATES, owner, "gate")
        self.bias = bias
        rows = self._gates * hidden_size
        h_width = proj_size or hidden_size
        self._flat_weights_names: list[str] = []
        for layer_in, sfx in self._layout():
            shapes = [("weight_ih", (rows, layer_in)), ("weight_hh", (rows, h_width))]
            if bias:
                shapes += [("bias_ih", (rows,)), ("bias_hh", (rows,))]
            if proj_size:
                shapes.append(("weight_hr", (proj_size, hidden_size)))
            for base, shape in shapes:
                setattr(self, base + sfx, nn.Parameter(torch.empty(shape, **fk)))
                self._flat_weights_names.append(base + sfx)
        self.reset_parameters()

    @property
    def flat_weights(self) -> list[torch.Tensor]:
        """The complex parameters in torch's ``_flat_weights`` order."""
        return [getattr(self, name) for name in self._flat_weights_names]

    def reset_parameters(self) -> None:
        r"""Real and imaginary parts i.i.d. uniform on :math:`\pm 1/\sqrt{2H}`.

        Then :math:`E|w|^2 = 1/(3H)`, torch's real-LSTM/GRU init variance
        (:math:`\mathcal{U}(\pm 1/\sqrt H)`) for a complex unit, and every entry of the real
        block form :math:`R(W)` is distributed exactly as torch initialises a real LSTM/GRU of
        hidden size :math:`2H` (the equivalent network of the split gates). Native
        ``nn.LSTM(dtype=cfloat)`` draws both parts on :math:`\pm 1/\sqrt H`, i.e. twice the
        variance, which also pushes analytic gates towards their poles.
        """
        bound = 1.0 / math.sqrt(2 * self.hidden_size)
        with torch.no_grad():
            for w in self.flat_weights:
                torch.view_as_real(w).uniform_(-bound, bound)

    def _run(self, x, hx, lengths, padding_mask):
        owner = type(self).__name__
        lengths, hx = check_lengths_hx(owner, lengths, hx, pair=self._kind == "lstm")
        if isinstance(x, PackedSequence):
            return self._run_packed(x, lengths, hx, padding_mask)
        check_complex(x, owner)
        unbatched = x.dim() == 2
        if unbatched:
            if lengths is not None or padding_mask is not None:
                raise ValueError(f"{owner}: lengths/padding_mask need a batched (3-D) input")
            x = x.unsqueeze(0 if self.batch_first else 1)
            if hx is not None:
                hx = _map_states(lambda h: h.unsqueeze(1), hx)
        check_last_dim(x, self.input_size, owner)
        lengths = resolve_lengths(owner, x, lengths, padding_mask, self.batch_first)
        fn = CF.lstm if self._kind == "lstm" else CF.gru
        try:
            out, state = fn(
                x,
                self.flat_weights,
                hx,
                lengths,
                num_layers=self.num_layers,
                bidirectional=self.bidirectional,
                gate=self.gate,
                dropout=self.dropout,
                training=self.training,
                batch_first=self.batch_first,
            )
        except (TypeError, ValueError) as err:  # re-label errors from the functional form
            raise type(err)(str(err).replace(f"cplxnet.functional.{self._kind}", owner)) from None
        if unbatched:
            out = out.squeeze(0 if self.batch_first else 1)
            state = _map_states(lambda s: s.squeeze(1), state)
        return out, state

    def _run_packed(self, x: PackedSequence, lengths, hx, padding_mask):
        """torch's packed input: the padded run with the sequences' lengths, its output packed
        as ``x`` is (same ``batch_sizes`` and sorting); ``hx`` and the returned state in the
        batch's own order, as torch."""
        owner = type(self).__name__
        if lengths is not None or padding_mask is not None:
            raise ValueError(
                f"{owner}: a PackedSequence carries its lengths; pass no lengths or padding_mask"
            )
        check_complex(x.data, owner)
        # torch's packing has no complex autograd: it moves the (..., 2) real views
        parts = x._replace(data=real_view(x.data))
        padded, lens = pad_packed_sequence(parts, batch_first=self.batch_first)
        out, state = self._run(as_complex(padded), hx, lens, None)
        if x.sorted_indices is not None:  # to the packing order, for the packed data below
            out = out.index_select(0 if self.batch_first else 1, x.sorted_indices)
            lens = lens.index_select(0, x.sorted_indices.to(lens.device))
        data = pack_padded_sequence(real_view(out), lens, self.batch_first, True).data
        return x._replace(data=as_complex(data)), state

    def extra_repr(self) -> str:
        return stack_repr(self, f", gate={self.gate!r}", self.bias)


class LSTM(TorchCounterpart, _FusedRNNBase, torch_class=nn.LSTM):
    r"""Complex multi-layer LSTM with split (bounded, default) or analytic gates.

    ``gate="split"``: :math:`\sigma`/:math:`\tanh` on real and imaginary parts separately and
    part-wise gate products (:math:`c_r = f_r c_r + i_r g_r`, :math:`c_i = f_i c_i + i_i g_i`,
    :math:`h_r = o_r \tanh c_r`, :math:`h_i = o_i \tanh c_i`). This is exactly a real LSTM of
    hidden size :math:`2H` on the interleaved real view ``pack(x)`` with weights
    :math:`R(A + \mathrm{i}B)` = blocks :math:`\begin{pmatrix} A & -B \\ B & A\end{pmatrix}`
    (derivation in :mod:`cplxnet.functional.rnn`), so it runs on torch's fused LSTM kernel and
    costs about as much as ``torch.nn.LSTM(hidden_size=2H)``.

    ``gate="analytic"``: the holomorphic :math:`\sigma(z) = 1/(1+e^{-z})` and :math:`\tanh z`
    with complex products, as ``torch.nn.LSTM(dtype=torch.cfloat)`` (torch's native complex
    kernel). These have poles at :math:`z = \mathrm{i}\pi(2k+1)` (sigmoid) and
    :math:`z = \mathrm{i}\pi(k+\tfrac12)` (tanh), so states are unbounded near them.

    Projection (``proj_size = P > 0``, as torch, Sak et al. 2014): :math:`h_t = W_{hr}(o_t
    \odot \tanh c_t)` with a complex ``weight_hr_l{k}`` ``(P, H)``; ``h``, the output and the
    next layer's input are ``P`` wide, ``c`` stays ``H`` wide. With split gates this is the real
    LSTM of hidden ``2H`` with projection :math:`R(W_{hr})` (``2P``), on the same fused kernel.

    Args:
        input_size, hidden_size: complex features of the input and of :math:`h`, :math:`c`.
        num_layers, bias, batch_first, bidirectional: as ``torch.nn.LSTM`` (``batch_first=False``
            by default, as torch: ``(L, B, D)`` inputs).
        dropout: inter-layer dropout (training only) of whole complex entries.
        proj_size: width of the projected :math:`h` (0: no projection; ``< hidden_size``).
        gate: ``"split"`` or ``"analytic"``.
        device, dtype: factory kwargs (dtype defaults to the complex default dtype).

    Forward: ``lstm(input, hx=None, *, lengths=None, padding_mask=None)``, torch's arguments
    then keyword-only ones; ``input`` ``(L, B, D)`` complex (``(B, L, D)`` with
    ``batch_first=True``, or unbatched ``(L, D)``) or a ``PackedSequence`` (the output then
    packed as ``input``); ``hx = (h_0, c_0)`` each ``(num_layers * dirs, B, H)``; ``lengths``
    ``(B,)`` integers in ``[1, L]`` (a tensor, or a list or tuple of ints) or ``padding_mask``
    ``(B, L)`` bool (True = padding, at the end). Returns ``output
    (L, B, dirs * H)`` (batch first as ``input``; zero at padded steps) and ``(h_n, c_n)`` at each
    sequence's last real step (the reverse direction starts at each sequence's last token);
    with ``proj_size``, ``h_0``, ``h_n`` and ``output`` are ``P`` wide instead of ``H``.

    Init: real and imaginary parts uniform on :math:`\pm 1/\sqrt{2H}` (see
    :meth:`reset_parameters`).

    Examples::

        >>> lstm = LSTM(8, 16, batch_first=True, bidirectional=True)
        >>> out, (h, c) = lstm(torch.randn(3, 5, 8, dtype=torch.cfloat))
        >>> out.shape, h.shape, c.shape
        (torch.Size([3, 5, 32]), torch.Size([2, 3, 16]), torch.Size([2, 3, 16]))
    """

    _kind = "lstm"
    _gates = 4

    def forward(
        self,
        input: torch.Tensor | PackedSequence,
        hx: tuple[torch.Tensor, torch.Tensor] | None = None,
        *,
        lengths: torch.Tensor | Sequence[int] | None = None,
        padding_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor | PackedSequence, tuple[torch.Tensor, torch.Tensor]]:
        """``input`` ``(L, B, input_size)`` complex (``(B, L, .)`` with ``batch_first=True``, or
        unbatched ``(L, input_size)``); ``hx = (h_0, c_0)`` each
        ``(num_layers * dirs, B, hidden_size)``; ``lengths`` ``(B,)`` integers in ``[1, L]`` or
        ``padding_mask`` ``(B, L)`` bool (**True = padding**, at the end). Returns ``output``
        ``(L, B, dirs * hidden_size)`` (batch first as ``input``; zero at padded steps) and
        ``(h_n, c_n)`` at each sequence's last real step (``h`` and ``output``: ``proj_size``
        wide when set). A ``PackedSequence`` ``input`` (torch's, complex data) gives a packed
        ``output``, packed as ``input``."""
        return self._run(input, hx, lengths, padding_mask)


class GRU(TorchCounterpart, _FusedRNNBase, torch_class=nn.GRU):
    r"""Complex multi-layer GRU with split (bounded, default) or analytic gates.

    torch's GRU equations (gates r, z, n; :math:`n = \tanh(W_{in}x + b_{in} + r \odot
    (W_{hn}h + b_{hn}))`, :math:`h' = (1-z) \odot n + z \odot h`) with, for ``gate="split"``,
    part-wise activations and products (exactly a real GRU of hidden size :math:`2H` on
    ``pack(x)``, run on torch's fused kernel), or for ``gate="analytic"`` the holomorphic
    activations and complex products of ``torch.nn.GRU(dtype=torch.cfloat)`` (poles as in
    :class:`LSTM`). Arguments, forward (with ``hx = h_0``) and init as :class:`LSTM`; returns
    ``(output, h_n)``. ``proj_size`` stands in torch's place and must be 0, as in torch (a
    projection is an LSTM option).

    Examples::

        >>> gru = GRU(8, 16, num_layers=2, batch_first=True)
        >>> out, h = gru(torch.randn(3, 5, 8, dtype=torch.cfloat))
        >>> out.shape, h.shape
        (torch.Size([3, 5, 16]), torch.Size([2, 3, 16]))
    """

    _kind = "gru"
    _gates = 3

    def forward(
        self,
        input: torch.Tensor | PackedSequence,
        hx: torch.Tensor | None = None,
        *,
        lengths: torch.Tensor | Sequence[int] | None = None,
        padding_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor | PackedSequence, torch.Tensor]:
        """``input`` ``(L, B, input_size)`` complex (``(B, L, .)`` with ``batch_first=True``,
        or unbatched); ``hx`` ``(num_layers * dirs, B, hidden_size)``; ``lengths`` ``(B,)`` in
        ``[1, L]`` or ``padding_mask`` ``(B, L)`` bool (**True = padding**, at the end). Returns
        ``output`` ``(L, B, dirs * hidden_size)`` (batch first as ``input``; zero at padded
        steps) and ``h_n`` at each sequence's last real step. A ``PackedSequence`` ``input``
        gives a packed ``output``, as :class:`LSTM`."""
        return self._run(input, hx, lengths, padding_mask)
