r"""Complex activation functions.

Two families (Barrachina et al., "Theory and Implementation of Complex-Valued Neural Networks",
2023, Sec. 4):

* split ("type A"): a real function applied to the real and imaginary parts separately,
  :math:`f(x + iy) = g(x) + i g(y)` -- :func:`crelu`, :func:`split_tanh`, :func:`split_sigmoid`,
  :func:`split_gelu`;
* phase-aware: :func:`modrelu` (keeps the phase, thresholds the modulus), :func:`zrelu` (keeps
  the first quadrant), :func:`cardioid` (phase-dependent gain).

Every function also accepts a real tensor, on which it reduces to the real activation
(``crelu`` -> ``relu``, ``modrelu`` -> ``relu(|x| + b) sign(x)``, ``zrelu``/``cardioid`` ->
``relu``), so real twins of complex models can share code. Split functions run one real kernel on
the zero-copy view ``torch.view_as_real(z)``: no copies of the real and imaginary parts.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from .._utils import as_complex

__all__ = ["crelu", "split_tanh", "split_sigmoid", "split_gelu", "modrelu", "zrelu", "cardioid"]


def _split(fn: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor) -> torch.Tensor:
    """Apply the real function ``fn`` to both parts of ``z`` through ``view_as_real``."""
    if not z.is_complex():
        return fn(z)
    return as_complex(fn(torch.view_as_real(z)))  # fn sees (..., 2) real


def crelu(z: torch.Tensor) -> torch.Tensor:
    r"""Split ReLU :math:`\mathrm{CReLU}(x + iy) = \max(x, 0) + i \max(y, 0)`.

    Trabelsi et al., "Deep Complex Networks", ICLR 2018, Sec. 3.4. Not in place (complextorch's
    ``CReLU`` uses ``nn.ReLU(inplace=True)`` on views of the input, which overwrites it).
    """
    return _split(F.relu, z)


def split_tanh(z: torch.Tensor) -> torch.Tensor:
    r"""Split tanh :math:`\tanh(x) + i \tanh(y)` (bounded, unlike the analytic complex tanh).

    Hirose & Yoshida, "Generalization characteristics of complex-valued feedforward neural
    networks in relation to signal coherence", IEEE TNNLS 2012.
    """
    return _split(torch.tanh, z)


def split_sigmoid(z: torch.Tensor) -> torch.Tensor:
    r"""Split logistic sigmoid :math:`\sigma(x) + i \sigma(y)` (bounded and pole-free)."""
    return _split(torch.sigmoid, z)


def split_gelu(z: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    r"""Split GELU :math:`\mathrm{GELU}(x) + i\,\mathrm{GELU}(y)` (``approximate`` as in torch)."""
    return _split(lambda t: F.gelu(t, approximate=approximate), z)


def modrelu(z: torch.Tensor, bias: torch.Tensor | float) -> torch.Tensor:
    r"""modReLU :math:`\mathrm{ReLU}(|z| + b)\, z / |z|` (Arjovsky et al., "Unitary Evolution
    Recurrent Neural Networks", ICML 2016, Eq. 8).

    The output keeps the phase of ``z`` and the modulus becomes :math:`\max(|z| + b, 0)`, so
    entries with :math:`|z| < -b` are zeroed. ``bias`` is real and broadcasts against ``z``.
    Computed as :math:`z \cdot \mathrm{ReLU}(|z| + b) / |z|` with the denominator replaced by 1
    where :math:`z = 0`, so output (0) and gradient (at most :math:`\max(b, 0)`) are finite at the
    origin; measured ~0.7x the time of the ``relu(|z| + b) * sgn(z)`` form (forward + backward).
    """
    mag = z.abs()
    return z * (F.relu(mag + bias) / torch.where(mag > 0, mag, 1.0))


def zrelu(z: torch.Tensor) -> torch.Tensor:
    r"""zReLU: :math:`z` if :math:`0 \le \arg z \le \pi/2` (both parts non-negative), else 0.

    Guberman, "On Complex Valued Convolutional Neural Networks", 2016, Sec. 3.3.
    """
    if not z.is_complex():
        return F.relu(z)
    keep = (z.real >= 0) & (z.imag >= 0)
    return torch.where(keep, z, torch.zeros((), dtype=z.dtype, device=z.device))


def cardioid(z: torch.Tensor) -> torch.Tensor:
    r"""Complex cardioid :math:`\tfrac12 (1 + \cos \arg z)\, z` (Virtue, Yu & Lustig, "Better than
    Real: Complex-valued Neural Nets for MRI Fingerprinting", ICIP 2017, Eq. 3).

    Uses :math:`\cos \arg z = \mathrm{Re}(\mathrm{sgn}\, z)` (one ``sgn`` instead of ``angle`` and
    ``cos``); output and gradient are finite everywhere (the gradient at ``z = 0`` is 0.5, the
    average over directions). On real inputs it equals ReLU.
    """
    if not z.is_complex():
        return F.relu(z)
    return z * (0.5 + 0.5 * torch.sgn(z).real)
