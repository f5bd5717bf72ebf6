r"""FLOATER: positions as the solution of a learned ODE (Liu et al., ICML 2020).

Xuanqing Liu, Hsiang-Fu Yu, Inderjit Dhillon, Cho-Jui Hsieh, "Learning to Encode Position for
Transformer with Continuous Dynamical Model", ICML 2020.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call

from .._utils import check_sizes, factory_kwargs, pack, real_dtype, unpack
from ._common import check_offset, check_sequence, normal_
from .base import PositionalEncoding
from .registry import register_encoding

__all__ = ["FloaterEncoding", "FloaterDynamics", "rk4_solve"]


class FloaterDynamics(nn.Module):
    r"""Default dynamics :math:`h(p, t) = W_2 \tanh(W_1 [\mathrm{pack}(p); t] + b_1) + b_2`.

    A small real MLP on the packed state (``2D`` reals for a complex ``p`` of width ``D``) and the
    time; the result is unpacked to the state's dtype, so it serves complex and real models. The
    output layer starts small (std ``0.02 / sqrt(hidden)``-scaled Glorot) so initial positions
    drift slowly from ``p(0)``.

    Examples::

        >>> f = FloaterDynamics(width=4)
        >>> f(torch.zeros(1, 4), torch.tensor([0.5])).shape
        torch.Size([1, 4])
    """

    def __init__(
        self,
        width: int,
        hidden: int = 32,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.width, self.hidden = width, hidden
        self.inp = nn.Linear(width + 1, hidden, device=device, dtype=dtype)
        self.out = nn.Linear(hidden, width, device=device, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.inp.reset_parameters()
        nn.init.normal_(self.out.weight, std=0.02 / self.hidden**0.5)
        nn.init.zeros_(self.out.bias)

    def forward(self, p: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """``dp/dt`` at state ``p`` ``(*, width)`` (complex, or real for a real model) and time
        ``t`` (a scalar tensor) -> ``(*, width)`` in the dtype of ``p``."""
        z = pack(p)  # (..., W) real
        tt = t.to(z.dtype).expand(z.shape[:-1] + (1,))
        h = self.out(torch.tanh(self.inp(torch.cat((z, tt), dim=-1))))
        return unpack(h, p)

    def extra_repr(self) -> str:
        return f"width={self.width}, hidden={self.hidden}"


def rk4_solve(
    h: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    p0: torch.Tensor,
    num: int,
    delta: float,
    substeps: int = 1,
) -> torch.Tensor:
    r"""Classical fixed-step Runge-Kutta 4 for :math:`dp/dt = h(p, t)`, :math:`p(0) = p_0`.

    Returns :math:`p(t_k)` at :math:`t_k = k\,\delta`, ``k < num``, stacked ``(num, *p0.shape)``;
    each interval :math:`[t_{k-1}, t_k]` takes ``substeps`` RK4 steps of size
    :math:`\delta/\text{substeps}` (global error :math:`O((\delta/\text{substeps})^4)`).
    Differentiable (plain autograd through the steps).
    """
    rd = real_dtype(p0.dtype)
    step = delta / substeps
    out = [p0]
    p = p0
    for k in range(1, num):
        for s in range(substeps):
            t = torch.tensor((k - 1) * delta + s * step, dtype=rd, device=p0.device)
            k1 = h(p, t)
            k2 = h(p + (0.5 * step) * k1, t + 0.5 * step)
            k3 = h(p + (0.5 * step) * k2, t + 0.5 * step)
            k4 = h(p + step * k3, t + step)
            p = p + (step / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        out.append(p)
    return torch.stack(out, dim=0)


@register_encoding
class FloaterEncoding(PositionalEncoding):
    r"""``floater``: :math:`x_k \mapsto x_k + p(t_k)` where :math:`dp/dt = h(p, t)`,
    :math:`t_k = k\,\delta` (Liu et al., ICML 2020).

    :math:`p(0)` is learned; :math:`h` is :class:`FloaterDynamics` (an MLP on ``[p, t]``) or any
    user ``dynamics(p, t)`` returning ``dp/dt`` with ``p``'s shape and dtype (an ``nn.Module``
    is registered as a submodule). The ODE is integrated by :func:`rk4_solve` (fixed-step RK4 in
    torch; backpropagation through the solver steps rather than the paper's adjoint method).
    Simplification: the paper injects positions in every layer (with layer-specific initial
    values); here they are added once, to the input. Any length (cost grows linearly with it).

    With ``h(p) = i w \odot p`` and :math:`p(0) = 1` the solution is :math:`e^{i k \delta w}`:
    the sinusoidal encoding is the special case of a linear rotation generator.

    Args:
        d_model: model width.
        hidden: hidden width of the default dynamics.
        delta: time step between positions.
        substeps: RK4 steps per position interval.
        dynamics: optional ``dynamics(p, t) -> dp/dt`` replacing the default MLP.
        std: initial standard deviation of :math:`p(0)`.
        device, dtype: model dtype (complex by default; real for a real twin).

    Examples::

        >>> enc = FloaterEncoding(d_model=4)
        >>> enc.encode_input(torch.zeros(2, 5, 4, dtype=torch.cfloat)).shape
        torch.Size([2, 5, 4])
    """

    name = "floater"
    acts_on = frozenset({"input"})
    supports_kv_cache = True  # p(t_k) depends on k alone

    def __init__(
        self,
        d_model: int,
        hidden: int = 32,
        delta: float = 0.1,
        substeps: int = 1,
        dynamics: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
        std: float = 0.02,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        check_sizes(owner, d_model=d_model, hidden=hidden, substeps=substeps)
        if delta <= 0 or substeps < 1:
            raise ValueError(f"{owner}: need delta > 0 and substeps >= 1, got {delta}, {substeps}")
        self.d_model, self.delta, self.substeps, self.std = d_model, float(delta), substeps, std
        self.complex_model = fk["dtype"].is_complex
        self._dtype = fk["dtype"]
        self.p0 = nn.Parameter(torch.empty(d_model, **fk))
        if dynamics is None:
            width = 2 * d_model if self.complex_model else d_model
            dynamics = FloaterDynamics(
                width, hidden, device=fk["device"], dtype=real_dtype(fk["dtype"])
            )
        elif not callable(dynamics):
            raise TypeError(f"{owner}: dynamics must be callable(p, t), got {type(dynamics)}")
        self.dynamics = dynamics
        self.reset_parameters()

    def reset_parameters(self) -> None:
        normal_(self.p0, self.std)
        if isinstance(self.dynamics, nn.Module) and hasattr(self.dynamics, "reset_parameters"):
            self.dynamics.reset_parameters()

    def table(self, length: int) -> torch.Tensor:
        """Positions ``p(t_0) .. p(t_{length-1})``, ``(length, d_model)``. A half-precision
        (``bfloat16``, ``float16``) real twin integrates in float32 and returns its own dtype:
        hundreds of steps summed with an 8-bit mantissa drift, and ``t`` past 32 is quantised
        to 0.25 in bfloat16."""
        low = self.p0.dtype
        if low not in (torch.bfloat16, torch.float16):
            return rk4_solve(self.dynamics, self.p0, length, self.delta, self.substeps)
        if isinstance(self.dynamics, nn.Module):  # its floating tensors in float32 (autograd)
            state = {
                n: v.float() if v.is_floating_point() else v
                for n, v in [*self.dynamics.named_parameters(), *self.dynamics.named_buffers()]
            }

            def h(p: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
                return functional_call(self.dynamics, state, (p, t))
        else:  # a user function of half-precision inputs

            def h(p: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
                return self.dynamics(p.to(low), t.to(low)).float()

        return rk4_solve(h, self.p0.float(), length, self.delta, self.substeps).to(low)

    def encode_input(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:  # (B, L, D)
        """``x + p(t_k)`` at positions ``k = offset .. offset+L-1`` (the ODE is integrated from
        ``t_0`` each call)."""
        check_sequence(x, self.d_model, self.complex_model, type(self).__name__)
        check_offset(offset, type(self).__name__)
        return x + self.table(offset + x.shape[1])[offset:].to(x.dtype)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, delta={self.delta}, substeps={self.substeps}, "
            f"dtype={self.dtype}"
        )
