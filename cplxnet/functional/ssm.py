r"""Diagonal state-space sequence layers: S4D (Gu, Gupta, Goel and Ré, "On the Parameterization
and Initialization of Diagonal State Space Models", NeurIPS 2022).

Each of ``H`` channels is a linear system with ``N`` complex states and diagonal
:math:`A = -e^{a_r} + i\,a_i` (real part negative: stable), discretised with step
:math:`\Delta = e^{\log\Delta}` by zero-order hold (:math:`\bar A = e^{\Delta A}`,
:math:`\bar B = (\bar A - 1)/A`, with :math:`B = 1` as in S4D):

.. math::

    x_t = \bar A \odot x_{t-1} + \bar B\, u_t, \qquad y_t = \sum_n C_n x_{t,n} + D\, u_t.

Unrolled, :math:`y = K * u + D u` with the causal kernel

.. math::

    K_l = \sum_n C_n \frac{e^{\Delta A_n} - 1}{A_n}\, e^{l \Delta A_n}, \qquad l = 0..L-1,

which :func:`s4d_kernel` builds (the Vandermonde product) and :func:`s4d` applies by FFT in
:math:`O(L \log L)`. With complex input and states no conjugate pairs are implied: the real S4D
of the paper (:math:`y = 2\,\mathrm{Re}(\dots)` over :math:`N/2` states, real input) is this
layer with the states in conjugate pairs, restricted to real input.
"""

from __future__ import annotations

import torch

from .._utils import check_complex

__all__ = ["s4d_kernel", "s4d", "s4d_step"]


def _discretized(
    log_dt: torch.Tensor, log_a_real: torch.Tensor, a_imag: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``(dt A, B_bar)`` ``(H, N)`` complex: zero-order hold, :math:`\bar B = (e^{\Delta A} -
    1)/A` (its limit :math:`\Delta` where :math:`A` underflows to 0)."""
    a = torch.complex(-torch.exp(log_a_real), a_imag).to(dtype)
    dt = torch.exp(log_dt).unsqueeze(-1).to(dtype)
    dta = a * dt  # (H, N)
    zero = a == 0
    b_bar = torch.where(zero, dt, torch.expm1(dta) / torch.where(zero, torch.ones_like(a), a))
    return dta, b_bar


def s4d_kernel(
    log_dt: torch.Tensor,
    log_a_real: torch.Tensor,
    a_imag: torch.Tensor,
    c: torch.Tensor,
    length: int,
) -> torch.Tensor:
    r"""The ``(H, length)`` causal kernel :math:`K_l = \sum_n C_n (e^{\Delta A_n} - 1)/A_n\,
    e^{l \Delta A_n}` of :func:`s4d` (module docstring), from ``log_dt`` ``(H,)``, ``log_a_real``
    and ``a_imag`` ``(H, N)`` (real: :math:`A = -e^{a_r} + i a_i`) and ``c`` ``(H, N)``
    (complex)."""
    dta, b_bar = _discretized(log_dt, log_a_real, a_imag, c.dtype)
    steps = torch.arange(length, device=c.device, dtype=log_dt.dtype)
    vandermonde = torch.exp(dta.unsqueeze(-1) * steps)  # (H, N, L)
    return torch.einsum("hn,hnl->hl", c * b_bar, vandermonde)


def s4d_step(
    input: torch.Tensor,
    state: torch.Tensor | None,
    log_dt: torch.Tensor,
    log_a_real: torch.Tensor,
    a_imag: torch.Tensor,
    c: torch.Tensor,
    d: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""One step of the recurrence of :func:`s4d` for streaming: ``input`` :math:`u_t` ``(B, H)``
    or ``(H,)`` complex and ``state`` :math:`x_{t-1}` ``(*, H, N)`` (``None``: zeros) ->
    ``(y_t, x_t)`` with :math:`x_t = e^{\Delta A} x_{t-1} + \bar B u_t`, :math:`y_t = \sum_n
    C_n x_{t,n} + D u_t`. Stepping through a sequence gives :func:`s4d`'s output."""
    dta, b_bar = _discretized(log_dt, log_a_real, a_imag, c.dtype)
    update = b_bar * input.unsqueeze(-1)
    state = update if state is None else torch.exp(dta) * state + update
    return (c * state).sum(-1) + d * input, state


def s4d(
    input: torch.Tensor,
    log_dt: torch.Tensor,
    log_a_real: torch.Tensor,
    a_imag: torch.Tensor,
    c: torch.Tensor,
    d: torch.Tensor,
    *,
    c_reverse: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""S4D over ``input`` ``(B, L, H)`` or unbatched ``(L, H)`` complex: :math:`y = K * u +
    D u` along ``L`` (causal), with :math:`K` = :func:`s4d_kernel` and :math:`D` = ``d``
    ``(H,)`` complex. The convolution is an FFT of length :math:`2L`.

    ``c_reverse`` ``(H, N)``: bidirectional, as the S4 code's ``bidirectional``: a second kernel
    :math:`K'` (the same :math:`A`, :math:`\Delta`, with ``c_reverse``) adds the later inputs,
    :math:`y_t \mathrel{+}= \sum_{j \ge 1} K'_{j-1} u_{t+j}` (one FFT for both).

    Examples::

        >>> h, n = 4, 8
        >>> log_dt, log_a_real = torch.full((h,), -3.0), torch.full((h, n), -0.7)
        >>> a_imag = torch.pi * torch.arange(n).repeat(h, 1).float()
        >>> c, d = torch.randn(h, n, dtype=torch.cfloat), torch.ones(h, dtype=torch.cfloat)
        >>> s4d(torch.randn(2, 50, h, dtype=torch.cfloat), log_dt, log_a_real, a_imag, c, d).shape
        torch.Size([2, 50, 4])
    """
    check_complex(input, "s4d")
    if input.dim() not in (2, 3) or input.shape[-1] != c.shape[0]:
        raise ValueError(
            f"s4d: expected input (B, L, H) or (L, H) with H = {c.shape[0]}, got shape "
            f"{tuple(input.shape)}"
        )
    length = input.shape[-2]
    if input.numel() == 0:  # torch's FFT refuses empty batches and lengths
        return input * d
    kernel = s4d_kernel(log_dt, log_a_real, a_imag, c, length)  # (H, L)
    if c_reverse is not None:  # K' reversed in the second half: offsets -L..-1 of the circle
        backward = s4d_kernel(log_dt, log_a_real, a_imag, c_reverse, length)
        kernel = torch.cat([kernel, backward.flip(-1)], -1)
    n = 2 * length
    spectrum = torch.fft.fft(input, n=n, dim=-2) * torch.fft.fft(kernel, n=n, dim=-1).mT
    return torch.fft.ifft(spectrum, dim=-2).narrow(-2, 0, length) + d * input
