r"""Complex activation functions.

Two families (Barrachina et al., "Theory and Implementation of Complex-Valued Neural Networks",
2023, Sec. 4):

* split ("type A"): a real function applied to the real and imaginary parts separately,
  :math:`f(x + iy) = g(x) + i g(y)` -- :func:`crelu`, :func:`split_tanh`, :func:`split_sigmoid`,
  :func:`split_gelu`, :func:`split_leaky_relu`;
* phase-aware: :func:`modrelu` (keeps the phase, thresholds the modulus), :func:`zrelu` (keeps
  the first quadrant), :func:`cardioid` (phase-dependent gain);
* split with a parameter: :func:`split_prelu`, :func:`split_elu`, :func:`split_celu`,
  :func:`zleaky_relu` (first quadrant kept, the rest scaled);
* amplitude-phase ("type B", phase kept, modulus squashed): :func:`modtanh` (Hirose),
  :func:`georgiou_koutsougeras`, :func:`mvn` (Aizenberg's multi-valued neuron).

Every function but :func:`mvn` (whose sectors need a phase) also accepts a real tensor, on
which it reduces to the real activation
(``crelu`` -> ``relu``, ``modrelu`` -> ``relu(|x| + b) sign(x)``, ``zrelu``/``cardioid`` ->
``relu``), so real twins of complex models can share code. Split functions run one real kernel on
the zero-copy view ``torch.view_as_real(z)``: no copies of the real and imaginary parts.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from .._utils import (
    as_complex,
    dense_order,
    eager_complex,
    function_output,
    grad_via_composed,
    inverse_order,
    real_view,
    without_autocast,
)
from . import compiled as _kernels
from . import interleaved as _il
from . import opaque as _opaque

__all__ = [
    "crelu",
    "split_tanh",
    "split_sigmoid",
    "split_gelu",
    "split_leaky_relu",
    "split_prelu",
    "split_elu",
    "split_celu",
    "modrelu",
    "zrelu",
    "zleaky_relu",
    "cardioid",
    "modtanh",
    "georgiou_koutsougeras",
    "mvn",
]


def _split(fn: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor) -> torch.Tensor:
    """Apply the real element-wise function ``fn`` to both parts of ``z`` through
    ``view_as_real``; a dense non-contiguous ``z`` (e.g. channels-last) is first permuted to its
    contiguous order and the result permuted back (same memory; measured 3.7-6.9x faster than
    the permuted strides for ReLU's forward and backward)."""
    if not z.is_complex():
        return fn(z)
    order = dense_order(z)
    if order is not None:
        out = as_complex(fn(torch.view_as_real(z.permute(order).resolve_conj())))
        return out.permute(inverse_order(order))
    return as_complex(fn(real_view(z)))  # fn sees (..., 2) real


def crelu(z: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    r"""Split ReLU :math:`\mathrm{CReLU}(x + iy) = \max(x, 0) + i \max(y, 0)`.

    Trabelsi et al., "Deep Complex Networks", ICLR 2018, Sec. 3.4. In place only with
    ``inplace=True`` (as ``torch.nn.functional.relu``; complextorch's ``CReLU`` always
    overwrites its input, through ``nn.ReLU(inplace=True)`` on views of it).
    """
    if inplace and z.is_complex() and not z.is_conj():
        F.relu(torch.view_as_real(z), inplace=True)
        return z
    if inplace and not z.is_complex():
        return F.relu(z, inplace=True)
    if inplace:  # a lazy conjugate has no real view: write the result back
        return z.copy_(_split(F.relu, z))
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


@without_autocast
def split_prelu(z: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    r"""Split PReLU :math:`\mathrm{PReLU}_a(x) + i\,\mathrm{PReLU}_a(y)` with the real slope
    ``weight`` :math:`a` (one entry, or one per channel on dim 1 as
    :func:`torch.nn.functional.prelu`; He et al., "Delving Deep into Rectifiers", ICCV 2015;
    the split form as complextorch's ``CPReLU``). The real and imaginary parts of a channel share
    its slope."""
    if not z.is_complex():
        return F.prelu(z, weight)
    if z.dim() < 2 and weight.numel() != 1:  # torch refuses the real counterpart too
        raise ValueError(
            f"split_prelu: an input of {z.dim()} dim(s) has no channel dim (dim 1), so weight "
            f"must have 1 element, got {weight.numel()}"
        )
    if z.dim() == 0:
        return as_complex(F.prelu(real_view(z).unsqueeze(0), weight).squeeze(0))
    return as_complex(F.prelu(real_view(z), weight))  # dim 1 stays the channel dim


def _split_with_inplace(fn: Callable, z: torch.Tensor, inplace: bool) -> torch.Tensor:
    """``fn(t, inplace=...)`` (a real element-wise function with torch's ``inplace``) on both
    parts of ``z``; with ``inplace=True`` ``z`` is overwritten through its real view (a lazy
    conjugate, which has no real view, gets the result written back) and returned."""
    if inplace and z.is_complex() and not z.is_conj():
        fn(torch.view_as_real(z), inplace=True)
        return z
    if inplace and z.is_complex():
        return z.copy_(_split(fn, z))
    return _split(lambda t: fn(t, inplace=inplace), z)


def split_elu(z: torch.Tensor, alpha: float = 1.0, inplace: bool = False) -> torch.Tensor:
    r"""Split ELU :math:`\mathrm{ELU}(x) + i\,\mathrm{ELU}(y)`,
    :math:`\mathrm{ELU}(t) = t` for :math:`t > 0`, else :math:`\alpha (e^t - 1)` (Clevert et al.,
    "Fast and Accurate Deep Network Learning by Exponential Linear Units", ICLR 2016). With
    ``inplace=True`` ``z`` is overwritten through its real view and returned."""
    return _split_with_inplace(lambda t, inplace=False: F.elu(t, alpha, inplace), z, inplace)


def split_celu(z: torch.Tensor, alpha: float = 1.0, inplace: bool = False) -> torch.Tensor:
    r"""Split CELU :math:`\mathrm{CELU}(x) + i\,\mathrm{CELU}(y)`,
    :math:`\mathrm{CELU}(t) = \max(0, t) + \min(0, \alpha (e^{t/\alpha} - 1))` (Barron,
    "Continuously Differentiable Exponential Linear Units", 2017). ``inplace`` as
    :func:`split_elu`."""
    return _split_with_inplace(lambda t, inplace=False: F.celu(t, alpha, inplace), z, inplace)


def split_leaky_relu(
    z: torch.Tensor, negative_slope: float = 0.01, inplace: bool = False
) -> torch.Tensor:
    r"""Split leaky ReLU :math:`\mathrm{LReLU}(x) + i\,\mathrm{LReLU}(y)`,
    :math:`\mathrm{LReLU}(t) = t` for :math:`t \ge 0`, else :math:`a t` with :math:`a` =
    ``negative_slope`` (Maas et al., "Rectifier Nonlinearities Improve Neural Network Acoustic
    Models", ICML 2013; on each part as complex MRI U-Nets use it). ``inplace`` as
    :func:`split_elu`; real input gives torch's leaky ReLU."""
    return _split_with_inplace(
        lambda t, inplace=False: F.leaky_relu(t, negative_slope, inplace), z, inplace
    )


def _modrelu_autograd(z: torch.Tensor, bias: torch.Tensor | float) -> torch.Tensor:
    """modReLU composed of differentiable torch ops (real inputs, tracing, double backward):
    the unit phase ``z / |z|`` times ``relu(|z| + b)``, and ``z relu(b)`` at the origin, so that
    the first derivative needs only ``1 / |z|`` (``relu(|z| + b) / |z|^2`` would overflow
    complex64 at ``|z| ~ 1e-19`` when ``b > 0``)."""
    mag = z.abs()
    pos = mag >= torch.finfo(mag.dtype).tiny  # subnormal moduli count as the origin, as in eager
    safe = torch.where(pos, z, torch.ones((), dtype=z.dtype, device=z.device))
    unit = torch.where(pos, safe / safe.abs(), torch.zeros((), dtype=z.dtype, device=z.device))
    return torch.where(pos, unit * F.relu(mag + bias), z * F.relu(bias))


def _inverse_modulus(r: torch.Tensor, at0: float) -> torch.Tensor:
    """``1 / r`` with ``at0`` where ``1 / r`` overflows (``r = 0``, and moduli below the
    reciprocal of the largest float, which the callers treat as the origin). Two arithmetic
    kernels: a comparison or ``torch.where`` with a scalar measured 2-4x slower than a
    multiplication on CPU."""
    return r.reciprocal().nan_to_num_(nan=math.nan, posinf=at0)


class _ModReLU(torch.autograd.Function):
    r"""modReLU with a hand-written backward on the interleaved layout of ``z``.

    With :math:`r = |z|`, :math:`s = \mathrm{ReLU}(r + b) / r` and the incoming gradient
    :math:`g` (torch's convention), :math:`\partial_z = s\, g + z\, (\mathbb 1[r + b > 0] - s)
    \langle g, z\rangle / r^2` and :math:`\partial_b = \mathbb 1[r + b > 0] \langle g, z\rangle / r`
    (:math:`\langle g, z\rangle = \mathrm{Re}(g \bar z)`); at :math:`z = 0`, :math:`r` is replaced
    by 1 in the denominators, as in the forward. The backward computes
    :math:`s\, g + u\, (\mathbb 1[r + b > 0] - s) \langle g, u\rangle` with :math:`u = z / r`, so
    that no power of :math:`1/r` beyond the first is formed (:math:`s / r` would overflow
    complex64 at :math:`r \approx 10^{-19}` when :math:`b > 0`). The modulus, the inner product and
    the products with the real gains run on the complex data itself
    (:mod:`cplxnet.functional.interleaved`: NumPy's SIMD loops on CPU), the gains on real tensors
    of half the size: forward one modulus, five real half-size passes and one product; backward
    one product for :math:`u`, one inner product, four real passes and one sum of two products.
    """

    @staticmethod
    def forward(ctx, z, bias):  # noqa: D102 (autograd.Function)
        r = _il.modulus(z)
        inv = _inverse_modulus(r, 1.0)
        s = r.add_(bias).relu_().mul_(inv)
        ctx.save_for_backward(z, bias, inv, s)
        return _il.scale_add(z, s)

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        z, bias, inv, s = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composed form
            return grad_via_composed(_modrelu_autograd, (z, bias), ctx, grad)
        u = _il.scale_add(z.resolve_conj(), inv)  # z / r
        q = _il.real_dot(grad, u)  # <g, z> / r
        on = torch.sign(s)  # 1[r + b > 0] as 0./1. (s >= 0): no boolean mask
        grad_bias = (q * on).sum_to_size(bias.shape) if ctx.needs_input_grad[1] else None
        k = on.sub_(s).mul_(q)
        return _il.scale_add(grad, s, u, k), grad_bias


class _ModReLUCompiled(torch.autograd.Function):
    """:class:`_ModReLU` with forward and backward as compiled kernels on the complex64 words
    (:mod:`cplxnet.functional.compiled`); ``bias`` has one entry or one per last-dim feature."""

    @staticmethod
    def forward(ctx, z, bias):  # noqa: D102 (autograd.Function)
        ctx.save_for_backward(z, bias)
        w = _kernels.as_words(z)
        b = bias.detach().reshape(-1)
        out = _kernels.kernel("modrelu_forward")(w.reshape(-1, w.shape[-1]), b)
        return function_output(_kernels.words_to_complex(out).reshape(z.shape))

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        z, bias = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composed form
            return grad_via_composed(_modrelu_autograd, (z, bias), ctx, grad)
        w = _kernels.as_words(z).reshape(-1, z.shape[-1])
        gw = _kernels.as_words(grad).reshape(w.shape)
        b = bias.detach().reshape(-1)
        grad_w, grad_bias = _kernels.kernel("modrelu_backward")(w, b, gw)
        grad_z = _kernels.words_to_complex(grad_w).reshape(z.shape)
        return grad_z, grad_bias.sum_to_size(bias.shape) if ctx.needs_input_grad[1] else None


def modrelu(z: torch.Tensor, bias: torch.Tensor | float) -> torch.Tensor:
    r"""modReLU :math:`\mathrm{ReLU}(|z| + b)\, z / |z|` (Arjovsky et al., "Unitary Evolution
    Recurrent Neural Networks", ICML 2016, Eq. 8).

    The output keeps the phase of ``z`` and the modulus becomes :math:`\max(|z| + b, 0)`, so
    entries with :math:`|z| < -b` are zeroed. ``bias`` is real and broadcasts against ``z``.
    Computed as :math:`z \cdot \mathrm{ReLU}(|z| + b) / |z|` with the denominator replaced by 1
    where :math:`z = 0`, so output (0) and gradient (at most :math:`\max(b, 0)`) are finite at the
    origin; in eager mode moduli below 1 / the largest float (subnormal ones, about 3e-39 in
    complex64) count as the origin, where the compiled kernels compute them exactly. For complex
    eager inputs the backward is written by hand (:class:`_ModReLU`: one
    modulus, no ``abs``/``where`` backward passes); real inputs, ``torch.export``, ``torch.func``
    and double backward use the composed form; compiled, it runs as an opaque operator
    (:mod:`cplxnet.functional.opaque`).
    After :func:`cplxnet.functional.use_compiled_kernels`, complex64 inputs with a bias of one
    entry or one per last-dim feature run as compiled kernels (:class:`_ModReLUCompiled`).
    """
    b = torch.as_tensor(bias, dtype=z.real.dtype, device=z.device)
    if _opaque.applies(z):
        return _opaque.call("modrelu", z, b)
    if not eager_complex(z):
        return _modrelu_autograd(z, b)
    shape = torch.broadcast_shapes(z.shape, b.shape)
    if shape != z.shape:  # a bias of more dims than z: the output takes the broadcast shape
        z = z.expand(shape).contiguous()
    if (
        _kernels.applies(z)
        and z.dim() > 0
        and z.numel() > 0
        and b.dim() <= 1
        and b.numel() in (1, z.shape[-1])
    ):
        return _ModReLUCompiled.apply(z, b)
    return _ModReLU.apply(z, b)


def zrelu(z: torch.Tensor) -> torch.Tensor:
    r"""zReLU: :math:`z` if :math:`0 \le \arg z \le \pi/2` (both parts non-negative), else 0;
    a NaN in either part stays in the output, as :func:`torch.nn.functional.relu` keeps NaN.

    Guberman, "On Complex Valued Convolutional Neural Networks", 2016, Sec. 3.3.
    """
    if not z.is_complex():
        return F.relu(z)
    keep = ((z.real >= 0) & (z.imag >= 0)) | z.isnan()  # NaN stays NaN, as in torch's relu
    return torch.where(keep, z, torch.zeros((), dtype=z.dtype, device=z.device))


def zleaky_relu(
    z: torch.Tensor, negative_slope: float = 0.01, inplace: bool = False
) -> torch.Tensor:
    r"""zLeakyReLU: :math:`z` if :math:`0 \le \arg z \le \pi/2` (both parts non-negative), else
    :math:`a z` with :math:`a` = ``negative_slope`` (zReLU of Guberman 2016 with a leak, as
    torchcvnn's ``zLeakyReLU``; :math:`a = 0` is :func:`zrelu`). On real input: leaky ReLU.
    ``inplace=True`` writes the result into ``z`` and returns it. Compiled, complex input runs as
    an opaque operator (:mod:`cplxnet.functional.opaque`)."""
    if not z.is_complex():
        return F.leaky_relu(z, negative_slope, inplace)
    if _opaque.applies(z) and not inplace:
        return _opaque.call("zleaky_relu", z, None, negative_slope)
    keep = (z.real >= 0) & (z.imag >= 0)
    out = torch.where(keep, z, z * negative_slope)
    return z.copy_(out) if inplace else out


def _unit_phase_scale(r: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor], at0: float):
    """``fn(r) / r`` with the value ``at0`` (its limit) where ``r = 0``."""
    pos = r > 0
    safe = torch.where(pos, r, 1.0)
    return torch.where(pos, fn(safe) / safe, at0)


def modtanh(z: torch.Tensor) -> torch.Tensor:
    r"""Amplitude-phase tanh :math:`\tanh(|z|)\, e^{i \arg z}` (Hirose, "Continuous complex-valued
    back-propagation learning", Electronics Letters 28(20), 1992): the phase is kept and the
    modulus squashed into [0, 1). Computed as :math:`z \tanh(|z|)/|z|` (1 at the origin, its
    limit), so output and gradient are finite everywhere. On real input: :math:`\tanh`. Compiled,
    complex input runs as an opaque operator (:mod:`cplxnet.functional.opaque`)."""
    if not z.is_complex():
        return torch.tanh(z)
    if _opaque.applies(z):
        return _opaque.call("modtanh", z)
    return z * _unit_phase_scale(z.abs(), torch.tanh, 1.0)


def georgiou_koutsougeras(z: torch.Tensor, c: float = 1.0, r: float = 1.0) -> torch.Tensor:
    r"""Georgiou-Koutsougeras activation :math:`z / (c + |z| / r)` (Georgiou & Koutsougeras,
    "Complex domain backpropagation", IEEE TCAS-II 39(5), 1992; complextorch's ``CVSigLog``): the
    phase is kept and the modulus :math:`|z| / (c + |z|/r)` saturates at :math:`r`. ``c > 0`` and
    ``r > 0``. Smooth in :math:`(x, y)` away from the origin and continuous there."""
    if c <= 0 or r <= 0:
        raise ValueError(f"georgiou_koutsougeras: c and r must be positive, got c={c}, r={r}")
    return z / (c + z.abs() / r)


class _MVNStraightThrough(torch.autograd.Function):
    """Forward: the sector root of unity; backward: the gradient of the continuous MVN
    ``z / |z|`` (a straight-through estimator; the staircase itself has zero gradient)."""

    @staticmethod
    def forward(ctx, z, sectors):  # noqa: D102 (autograd.Function)
        ctx.save_for_backward(z)
        two_pi = 2.0 * torch.pi
        angle = torch.remainder(torch.angle(z), two_pi)
        # a root of unity lands a rounding error below its own edge: within 16 ulp of the
        # sector scale, an edge counts as reached
        slack = 16 * torch.finfo(angle.dtype).eps * sectors
        j = torch.remainder(torch.floor(angle * (sectors / two_pi) + slack), sectors)
        return torch.polar(torch.ones_like(angle), j * (two_pi / sectors))

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        (z,) = ctx.saved_tensors
        with torch.enable_grad():
            zz = z.detach().requires_grad_()
            out = mvn(zz)
        (g,) = torch.autograd.grad(out, zz, grad, create_graph=torch.is_grad_enabled())
        return g, None


def mvn(z: torch.Tensor, sectors: int | None = None) -> torch.Tensor:
    r"""Multi-valued neuron activation (Aizenberg & Aizenberg, "CNN based on multi-valued neuron
    as a model of associative memory for grey scale images", 1992; Aizenberg, "Complex-Valued
    Neural Networks with Multi-Valued Neurons", Springer 2011).

    ``sectors=None``: the continuous MVN :math:`P(z) = z / |z|` (the unit circle; 0 at the
    origin, where the phase is undefined, and below a modulus of 1 / the largest float, where
    :math:`1/|z|` and so the derivative overflow, as the modulus activations treat it).
    ``sectors=k``: the discrete MVN :math:`P(z) = \varepsilon^j`,
    :math:`\varepsilon = e^{2\pi i / k}`, :math:`j = \lfloor k \arg(z) / 2\pi \rfloor` with
    :math:`\arg z \in [0, 2\pi)`: the k-th root of unity opening the sector :math:`z` lies in (a
    point on a sector's lower edge belongs to that sector, and so does one less than
    :math:`16 \epsilon k` sectors below it, the rounding of a root's angle, so each root maps to
    itself; the origin to sector 0). The
    staircase has zero derivative almost everywhere, so its backward is the continuous MVN's
    (straight-through; Aizenberg trains the discrete neuron with an error-correction rule
    instead, which cplxnet does not provide).
    """
    if not z.is_complex():
        raise TypeError(f"mvn: input must be complex, got {z.dtype}")
    if sectors is None:  # z / |z| as one division: its derivative needs 1/|z|, not 1/|z|^2
        tiny = 1.0 / torch.finfo(z.real.dtype).max  # below it 1/|z| overflows: the origin
        pos = z.abs() > tiny
        safe = torch.where(pos, z, torch.ones((), dtype=z.dtype, device=z.device))
        return torch.where(pos, safe / safe.abs(), 0)
    if isinstance(sectors, bool) or not isinstance(sectors, int) or sectors < 2:
        raise ValueError(f"mvn: sectors must be an integer >= 2 (or None), got {sectors!r}")
    return _MVNStraightThrough.apply(z, sectors)


def _cardioid_autograd(z: torch.Tensor) -> torch.Tensor:
    """Cardioid composed of differentiable torch ops (tracing, double backward, ``torch.func``):
    ``z (1 + Re(z)/|z|) / 2`` with ``Re(z)/|z|`` read as 0 at the origin through a safe
    denominator, so that derivatives of every order are finite there (``torch.sgn``'s second
    derivative is NaN at 0)."""
    pos = z != 0
    safe = torch.where(pos, z, torch.ones((), dtype=z.dtype, device=z.device))
    cos = torch.where(pos, safe.real / safe.abs(), 0.0)
    return z * (0.5 + 0.5 * cos)


class _Cardioid(torch.autograd.Function):
    r"""Cardioid with a hand-written backward on the interleaved layout of ``z = x + iy``.

    :math:`s = \tfrac12 (1 + x / r)`, :math:`\partial_x s = \tfrac12 y^2 / r^3`,
    :math:`\partial_y s = -\tfrac12 x y / r^3`, so with :math:`t = \tfrac12 \langle g, z\rangle
    y / r^3`: :math:`\partial_x = s g_x + t y`, :math:`\partial_y = s g_y - t x`, i.e.
    :math:`\partial_z = s g + t \cdot (-i z)`, computed as :math:`s g + t' \cdot (-i u)` with
    :math:`u = z / r` and :math:`t' = \tfrac12 \langle g, u\rangle\, u_y`, so that no power of
    :math:`1/r` beyond the first is formed (it would overflow complex64 at :math:`r \approx
    10^{-13}`); :math:`1/r` is replaced by 0 at :math:`z = 0` (gradient :math:`g / 2` there, as
    ``sgn``'s backward gives). The modulus,
    :math:`\langle g, z\rangle` and the products with the real gains run on the complex data
    (:mod:`cplxnet.functional.interleaved`), as in :class:`_ModReLU`.
    """

    @staticmethod
    def forward(ctx, z):  # noqa: D102 (autograd.Function)
        zr = z.resolve_conj()
        inv = _inverse_modulus(_il.modulus(zr), 0.0)
        s = (zr.real * inv).mul_(0.5).add_(0.5)
        ctx.save_for_backward(z, inv, s)  # the input itself: the composed form differentiates it
        return _il.scale_add(zr, s)

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        z, inv, s = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composed form
            return grad_via_composed(_cardioid_autograd, (z,), ctx, grad)
        u = _il.scale_add(z.resolve_conj(), inv)  # z / r
        t = _il.real_dot(grad, u).mul_(u.imag).mul_(0.5)
        return _il.scale_add(grad, s, u * -1j, t)


class _CardioidCompiled(torch.autograd.Function):
    """:class:`_Cardioid` with forward and backward as compiled kernels on the complex64 words
    (:mod:`cplxnet.functional.compiled`)."""

    @staticmethod
    def forward(ctx, z):  # noqa: D102 (autograd.Function)
        ctx.save_for_backward(z)
        out = _kernels.kernel("cardioid_forward")(_kernels.as_words(z))
        return function_output(_kernels.words_to_complex(out))

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        (z,) = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composed form
            return grad_via_composed(_cardioid_autograd, (z,), ctx, grad)
        gw = _kernels.as_words(grad)
        grad_w = _kernels.kernel("cardioid_backward")(_kernels.as_words(z), gw)
        return _kernels.words_to_complex(grad_w)


def cardioid(z: torch.Tensor) -> torch.Tensor:
    r"""Complex cardioid :math:`\tfrac12 (1 + \cos \arg z)\, z` (Virtue, Yu & Lustig, "Better than
    Real: Complex-valued Neural Nets for MRI Fingerprinting", ICIP 2017, Eq. 3).

    :math:`\cos \arg z = \mathrm{Re}(z) / |z|` (0 at the origin; in eager mode also below 1 / the
    largest float, subnormal moduli, which the compiled kernels compute exactly); output and
    gradient are finite everywhere (the gradient at ``z = 0`` is 0.5, the average over
    directions). On real inputs it
    equals ReLU. Complex eager inputs use the hand-written backward of :class:`_Cardioid`;
    ``torch.export``, ``torch.func`` and double backward the composed form (finite derivatives of
    every order at 0); compiled, an opaque operator (:mod:`cplxnet.functional.opaque`). After
    :func:`cplxnet.functional.use_compiled_kernels`, complex64 inputs run as compiled kernels
    (:class:`_CardioidCompiled`).
    """
    if not z.is_complex():
        return F.relu(z)
    if _opaque.applies(z):
        return _opaque.call("cardioid", z)
    if not eager_complex(z):
        return _cardioid_autograd(z)
    if _kernels.applies(z) and z.numel() > 0:
        return _CardioidCompiled.apply(z)
    return _Cardioid.apply(z)


_opaque.register("modrelu", lambda z, bias, _: modrelu(z, bias))
_opaque.register("cardioid", lambda z, _, __: cardioid(z))
_opaque.register("modtanh", lambda z, _, __: modtanh(z))
_opaque.register("zleaky_relu", lambda z, _, slope: zleaky_relu(z, slope))
