r"""Diagonal state-space sequence layer :class:`S4D` (see :mod:`cplxnet.functional.ssm`)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .. import functional as CF
from .._utils import HasDtype, check_dtype, check_sizes, factory_kwargs, real_dtype

__all__ = ["S4D"]


class S4D(HasDtype, nn.Module):
    r"""S4D: per channel a diagonal linear state-space system with ``d_state`` complex states,
    run as a causal convolution by FFT (Gu, Gupta, Goel and Ré, NeurIPS 2022):

    .. math::
        y = K * u + D u, \qquad K_l = \sum_n C_n \frac{e^{\Delta A_n} - 1}{A_n}\,
        e^{l \Delta A_n}, \qquad A = -e^{a_r} + i\,a_i,\ \Delta = e^{\log\Delta},

    which equals the recurrence :math:`x_t = e^{\Delta A} x_{t-1} + (e^{\Delta A} - 1)/A\, u_t`,
    :math:`y_t = C x_t + D u_t` (:func:`cplxnet.functional.s4d`). The kernel is built anew for
    each input length, so one layer takes any length; building it holds an ``(H, N, L)`` complex
    tensor (as the paper's reference code without its Vandermonde kernel).

    Args:
        d_model: channels :math:`H` (complex features).
        d_state: complex states :math:`N` per channel.
        dt_min, dt_max: range of the initial steps :math:`\Delta` (log-uniform, per channel).
        transposed: input ``(B, H, L)`` (as ``Conv1d``) instead of ``(B, L, H)``.
        bidirectional: also a kernel over the later inputs (parameter ``C_reverse``, the same
            :math:`A` and :math:`\Delta`; as the S4 code's ``bidirectional``), for tasks that see
            the whole sequence; no :meth:`step` then.
        device, dtype: factory kwargs.

    Parameters: ``log_dt`` ``(H,)``, ``log_A_real`` and ``A_imag`` ``(H, N)`` (real), ``C``
    (and ``C_reverse``) ``(H, N)`` and ``D`` ``(H,)`` (complex). Init S4D-Lin:
    :math:`A_n = -\tfrac12 + i\pi n`; ``C``, ``D`` complex normal (:math:`E|c|^2 = 1`). The
    paper's code trains ``log_dt``, ``log_A_real`` and ``A_imag`` at a learning rate of at most
    1e-3 without weight decay (a parameter group of your optimiser). The paper's real S4D
    (:math:`2\,\mathrm{Re}` over :math:`N/2` states) is this layer with states in conjugate
    pairs on real input (a test).

    Shape: ``(B, L, H)`` or unbatched ``(L, H)`` complex -> the same shape. :meth:`step` runs
    the recurrence one sample at a time (streaming).

    Examples::

        >>> ssm = S4D(8, d_state=16)
        >>> ssm(torch.randn(2, 100, 8, dtype=torch.cfloat)).shape
        torch.Size([2, 100, 8])
        >>> y, state = ssm.step(torch.randn(2, 8, dtype=torch.cfloat))  # streaming
        >>> y.shape, state.shape
        (torch.Size([2, 8]), torch.Size([2, 8, 16]))
    """

    def __init__(
        self,
        d_model: int,
        d_state: int = 64,
        *,
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        transposed: bool = False,
        bidirectional: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner)
        check_sizes(owner, d_model=d_model, d_state=d_state)
        if not 0 < dt_min <= dt_max:
            raise ValueError(f"{owner}: need 0 < dt_min <= dt_max, got {dt_min} and {dt_max}")
        super().__init__()
        self.d_model, self.d_state = d_model, d_state
        self.dt_min, self.dt_max, self.transposed = dt_min, dt_max, transposed
        self.bidirectional = bidirectional
        self._dtype = fk["dtype"]
        rk = {"device": device, "dtype": real_dtype(fk["dtype"])}
        self.log_dt = nn.Parameter(torch.empty(d_model, **rk))
        self.log_A_real = nn.Parameter(torch.empty(d_model, d_state, **rk))
        self.A_imag = nn.Parameter(torch.empty(d_model, d_state, **rk))
        self.C = nn.Parameter(torch.empty(d_model, d_state, **fk))
        self.C_reverse = (
            nn.Parameter(torch.empty(d_model, d_state, **fk)) if bidirectional else None
        )
        self.D = nn.Parameter(torch.empty(d_model, **fk))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.log_dt.uniform_(math.log(self.dt_min), math.log(self.dt_max))
            self.log_A_real.fill_(math.log(0.5))
            steps = torch.arange(self.d_state, device=self.A_imag.device, dtype=self.A_imag.dtype)
            self.A_imag.copy_(math.pi * steps.expand_as(self.A_imag))
            self.C.normal_()
            if self.C_reverse is not None:
                self.C_reverse.normal_()
            self.D.normal_()

    def kernel(self, length: int) -> torch.Tensor:
        """The ``(d_model, length)`` causal kernel :math:`K`
        (:func:`cplxnet.functional.s4d_kernel`)."""
        return CF.s4d_kernel(self.log_dt, self.log_A_real, self.A_imag, self.C, length)

    def step(
        self, input: torch.Tensor, state: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One time step for streaming: ``input`` ``(B, H)`` or ``(H,)`` complex and ``state``
        ``(B, H, N)`` or ``(H, N)`` (``None``: zeros, the start of a sequence) -> ``(output,
        new state)``; stepping through a sequence gives :meth:`forward`'s output at each step
        (:func:`cplxnet.functional.s4d_step`)."""
        owner = type(self).__name__
        if self.bidirectional:
            raise ValueError(
                f"{owner}.step: a bidirectional layer reads later inputs, so it cannot stream; "
                "build it with bidirectional=False"
            )
        check_dtype(input, self.dtype, owner)
        if input.dim() not in (1, 2) or input.shape[-1] != self.d_model:
            raise ValueError(
                f"{owner}.step: expected input (B, H) or (H,) with H = {self.d_model}, got shape "
                f"{tuple(input.shape)}"
            )
        want = (*input.shape, self.d_state)
        if state is not None:
            check_dtype(state, self.dtype, owner, "state")
            if tuple(state.shape) != want:
                raise ValueError(
                    f"{owner}.step: expected state of shape {want} for this input, got "
                    f"{tuple(state.shape)}"
                )
        return CF.s4d_step(input, state, self.log_dt, self.log_A_real, self.A_imag, self.C, self.D)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` ``(B, L, H)`` or ``(L, H)`` complex (``transposed``: ``(B, H, L)`` or
        ``(H, L)``) -> the same shape, :math:`K * u + D u` along ``L``."""
        owner = type(self).__name__
        check_dtype(input, self.dtype, owner)
        where = "(B, H, L) or (H, L)" if self.transposed else "(B, L, H) or (L, H)"
        channels = -2 if self.transposed else -1
        if input.dim() not in (2, 3) or input.shape[channels] != self.d_model:
            raise ValueError(
                f"{owner}: expected input {where} with H = {self.d_model}, got shape "
                f"{tuple(input.shape)}"
            )
        params = (self.log_dt, self.log_A_real, self.A_imag, self.C, self.D)
        if self.transposed:
            return CF.s4d(input.mT, *params, c_reverse=self.C_reverse).mT
        return CF.s4d(input, *params, c_reverse=self.C_reverse)

    def extra_repr(self) -> str:
        return (
            f"{self.d_model}, d_state={self.d_state}, dt_min={self.dt_min}, "
            f"dt_max={self.dt_max}, transposed={self.transposed}, "
            f"bidirectional={self.bidirectional}, dtype={self.dtype}"
        )
