"""Primitives on the interleaved complex layout that torch 2.13's CPU kernels run slowly: the
modulus and the copy of the real and imaginary parts into contiguous planes.

On CPU, for eager complex64/complex128 tensors, both run through NumPy, whose SIMD loops measured
(one thread, 32 x 128 x 256 complex64, benchmarks/RESULTS.md): ``np.abs`` 0.2x the time of
torch's complex ``abs`` (both are ``hypot``, finite up to the largest float), the two part planes
0.6x the time of ``x.real.contiguous()`` and ``x.imag.contiguous()``. Elsewhere (other devices,
tracing, other dtypes) they are torch's ops. Neither is differentiable: they are the building
blocks of the hand-written autograd Functions of :mod:`cplxnet.functional`.

NumPy's loops run on one thread while torch's CPU kernels use ``torch.get_num_threads()``: the
NumPy path is taken only at up to :data:`NUMPY_MAX_THREADS` torch threads, where it measured
faster (1 and 2 threads on a 2-core machine); with more threads torch's parallel kernels run.
"""

from __future__ import annotations

import numpy as np
import torch

from .._utils import runs_composed

__all__: list[str] = []  # helpers for cplxnet.functional's Functions, not part of its namespace

_NUMPY_DTYPES = (torch.complex64, torch.complex128)
#: The most torch threads at which the single-threaded NumPy loops are used (see above).
NUMPY_MAX_THREADS = 2


def numpy_ok(x: torch.Tensor, dtypes: tuple[torch.dtype, ...] = _NUMPY_DTYPES) -> bool:
    """True where :func:`modulus` and :func:`part_planes` (and the complex-order embedding's
    cos/sin, with real ``dtypes``) run through NumPy: an eager CPU tensor of one of ``dtypes``
    (outside tracing and ``torch.func`` transforms: :func:`cplxnet._utils.runs_composed`) while
    torch runs on at most :data:`NUMPY_MAX_THREADS` threads, and contiguous (torch's kernels keep
    any other layout, e.g. channels-last, in their results)."""
    return (
        x.device.type == "cpu"
        and x.dim() > 0  # NumPy gives a 0-d result as a scalar, which torch.from_numpy refuses
        and x.dtype in dtypes
        and x.is_contiguous()
        and not runs_composed()
        and torch.get_num_threads() <= NUMPY_MAX_THREADS
    )


def _numpy_view(x: torch.Tensor) -> np.ndarray:
    return x.detach().resolve_conj().contiguous().numpy()


def modulus(z: torch.Tensor) -> torch.Tensor:
    """``|z|`` of complex ``z`` as a new real tensor of ``z``'s shape (not differentiable)."""
    if numpy_ok(z):
        return torch.from_numpy(np.abs(_numpy_view(z)))
    return z.detach().abs()


def part_planes(x: torch.Tensor, size: int, axis: int = 0) -> torch.Tensor:
    """The real and imaginary parts of complex ``x`` (read as ``rows`` rows of ``size`` entries)
    copied into one contiguous real tensor (one pass; not differentiable): ``(2, rows, size)``
    for ``axis=0`` (a plane per part), ``(rows, 2, size)`` for ``axis=1`` (each row's real
    parts followed by its imaginary parts)."""
    rows = x.numel() // max(size, 1)
    shape = (2, rows, size) if axis == 0 else (rows, 2, size)
    if numpy_ok(x) and x.numel() > 0:
        src = _numpy_view(x).reshape(rows, size)
        out = torch.empty(shape, dtype=x.real.dtype)
        dst = out.numpy()
        re, im = (dst[0], dst[1]) if axis == 0 else (dst[:, 0], dst[:, 1])
        np.copyto(re, src.real)
        np.copyto(im, src.imag)
        return out
    parts = torch.view_as_real(x.detach().resolve_conj()).reshape(rows, size, 2)
    order = (2, 0, 1) if axis == 0 else (0, 2, 1)
    return parts.permute(order).clone(memory_format=torch.contiguous_format)


def real_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    r""":math:`\mathrm{Re}(a \bar b) = a_x b_x + a_y b_y` per element of complex ``a``, ``b`` of
    one shape, as a new real tensor (not differentiable)."""
    if numpy_ok(a) and numpy_ok(b) and a.shape == b.shape:
        an, bn = _numpy_view(a), _numpy_view(b)
        out = np.multiply(an.real, bn.real)
        out += an.imag * bn.imag
        return torch.from_numpy(out)
    ar, br = (torch.view_as_real(t.detach().resolve_conj()) for t in (a, b))
    return (ar * br).sum(-1)


def scale_add(
    a: torch.Tensor, s: torch.Tensor, b: torch.Tensor | None = None, t: torch.Tensor | None = None
) -> torch.Tensor:
    """``a * s + b * t`` (or ``a * s``) for complex ``a``, ``b`` and real ``s``, ``t``, all of one
    shape, as a new complex tensor (not differentiable)."""
    same = a.shape == s.shape and (b is None or b.shape == a.shape == t.shape)
    if same and numpy_ok(a) and (b is None or numpy_ok(b)):
        out = np.multiply(_numpy_view(a), s.detach().contiguous().numpy())
        if b is not None:
            out += _numpy_view(b) * t.detach().contiguous().numpy()
        return torch.from_numpy(out)
    out = a.detach() * s.detach()
    return out if b is None else out.add_(b.detach() * t.detach())
