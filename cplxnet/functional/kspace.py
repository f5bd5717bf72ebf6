r"""k-space data consistency for MRI reconstruction networks: the step of an unrolled network
that brings the current image back to the measured k-space samples.

With the current image :math:`x`, the measured k-space :math:`k_0`, the sampling mask :math:`m`,
optional coil sensitivity maps :math:`S_c` and a weight :math:`w`,

.. math::

    \hat{k}_c = \mathcal{F}(S_c\, x), \qquad
    \tilde{k}_c = \hat{k}_c + w\, m \odot (k_{0,c} - \hat{k}_c), \qquad
    y = \sum_c \overline{S_c}\, \mathcal{F}^{-1}(\tilde{k}_c)

(without sensitivity maps, :math:`S = 1` and there is no sum). :math:`\mathcal{F}` is the
discrete Fourier transform over the spatial dims (``torch.fft.fftn`` with torch's ``norm``;
``centered=True`` puts the zero frequency in the middle of the array, as fastMRI stores k-space:
:math:`\mathcal{F} = \mathrm{fftshift} \circ \mathrm{fftn} \circ \mathrm{ifftshift}`).

The weight chooses the scheme:

- :math:`w = 1` with a 0/1 mask replaces the sampled entries by the measurements (noiseless
  data consistency, Schlemper et al., "A Deep Cascade of Convolutional Neural Networks for
  Dynamic MR Image Reconstruction", IEEE TMI 2018, :math:`\lambda \to \infty`). It is a
  projection: applying it twice gives the same image.
- :math:`w = \lambda / (1 + \lambda)` is their noisy form,
  :math:`\tilde{k} = (\hat{k} + \lambda k_0) / (1 + \lambda)` on the sampled entries (their
  code's ``noise_lvl`` is :math:`\lambda`, and its ``None`` or 0 means noiseless, here
  :math:`w = 1`; :math:`w = 0` here leaves the image unchanged).
- A learned :math:`w = \eta` is the soft data-consistency term
  :math:`\hat{k} - \eta\, m (\hat{k} - k_0)` of the end-to-end variational network (Sriram et
  al., MICCAI 2020) applied to an image: its coil expansion and sensitivity-weighted
  combination (``sens_expand``, ``sens_reduce``) are :math:`S_c x` and the sum above. VarNet
  itself keeps multi-coil k-space as its state and subtracts this term and its regulariser's
  in parallel; with maps normalised to :math:`\sum_c |S_c|^2 = 1` an all-zero mask returns
  :math:`x`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch

from .._utils import check_complex, real_dtype
from .grid_views import cl_format, is_channels_last

__all__ = ["data_consistency"]

_NORMS = ("backward", "ortho", "forward")


def check_options(
    weight: float | torch.Tensor,
    dim: int | Sequence[int],
    norm: str,
    centered: bool,
    coil_dim: int,
    owner: str,
) -> tuple[int, ...]:
    """One-line errors for options of the wrong kind; ``dim`` as a tuple (its range is checked
    against the k-space at the call)."""
    if not isinstance(weight, torch.Tensor):
        number = (numbers.Real, torch.SymFloat, torch.SymInt)  # symbolic under torch.compile
        if isinstance(weight, bool) or not isinstance(weight, number):
            raise TypeError(f"{owner}: weight must be a real number or tensor, got {weight!r}")
        if not -math.inf < weight < math.inf:
            raise ValueError(f"{owner}: weight must be finite, got {weight}")
    given = (dim,) if isinstance(dim, int) else tuple(dim) if isinstance(dim, Sequence) else None
    if not given or any(isinstance(d, bool) or not isinstance(d, int) for d in given):
        raise TypeError(f"{owner}: dim must be an int or a sequence of ints, got {dim!r}")
    if len(set(given)) != len(given):
        raise ValueError(f"{owner}: dim {given} names a dim twice")
    if norm not in _NORMS:
        raise ValueError(f"{owner}: norm must be one of {', '.join(_NORMS)}, got {norm!r}")
    if not isinstance(centered, bool):
        raise TypeError(f"{owner}: centered must be True or False, got {centered!r}")
    if isinstance(coil_dim, bool) or not isinstance(coil_dim, int):
        raise TypeError(f"{owner}: coil_dim must be an int, got {coil_dim!r}")
    return given


def _dims(given: tuple[int, ...], ndim: int, owner: str) -> tuple[int, ...]:
    """``given`` (distinct as written, :func:`check_options`) as non-negative dims of a
    ``ndim``-dim tensor, still distinct (``-1`` and ``ndim - 1`` are one dim)."""
    out = []
    for d in given:
        if not -ndim <= d < ndim:
            raise ValueError(
                f"{owner}: dim {d} is out of range for k-space of {ndim} dims (expected "
                f"{-ndim}..{ndim - 1})"
            )
        out.append(d % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{owner}: dim {given} names a dim twice")
    return tuple(out)


def _fft(x: torch.Tensor, dims: tuple[int, ...], norm: str, centered: bool, inverse: bool):
    """The n-dim DFT (or its inverse) of ``x`` over ``dims``, zero frequency in the middle if
    ``centered``."""
    if centered:
        x = torch.fft.ifftshift(x, dim=dims)
    x = (torch.fft.ifftn if inverse else torch.fft.fftn)(x, dim=dims, norm=norm)
    return torch.fft.fftshift(x, dim=dims) if centered else x


def _check_broadcast(t: torch.Tensor, shape: torch.Size, owner: str, name: str) -> None:
    try:
        ok = torch.broadcast_shapes(t.shape, shape) == shape
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"{owner}: {name} of size {list(t.shape)} does not broadcast to the k-space size "
            f"{list(shape)}; give it size 1 on the dims it shares"
        )


def _check_operands(
    input: torch.Tensor,
    kspace: torch.Tensor,
    mask: torch.Tensor,
    weight: float | torch.Tensor,
    sensitivity: torch.Tensor | None,
    given: tuple[int, ...],
    coil_dim: int,
    owner: str,
) -> tuple[int, ...]:
    """One-line errors for inputs of the wrong kind, dtype or size; the transformed dims."""
    check_complex(input, owner, "input")
    check_complex(kspace, owner, "kspace")
    dims = _dims(given, kspace.dim(), owner)
    part = real_dtype(kspace.dtype)
    if input.dtype != kspace.dtype:
        raise TypeError(
            f"{owner}: input is {input.dtype} but kspace is {kspace.dtype}; convert one so both "
            "have one dtype"
        )
    if kspace.dtype == torch.complex32 and kspace.device.type == "cpu":
        raise TypeError(f"{owner}: torch has no complex32 FFT on the CPU; convert to complex64")
    if sensitivity is None:
        if input.shape != kspace.shape:
            raise ValueError(
                f"{owner}: input has size {list(input.shape)} but kspace has size "
                f"{list(kspace.shape)}; give them one size (or pass the coil sensitivity maps)"
            )
    else:
        check_complex(sensitivity, owner, "sensitivity")
        if sensitivity.dtype != kspace.dtype:
            raise TypeError(
                f"{owner}: sensitivity is {sensitivity.dtype} but kspace is {kspace.dtype}; "
                "convert it"
            )
        if not -kspace.dim() <= coil_dim < kspace.dim():
            raise ValueError(
                f"{owner}: coil_dim {coil_dim} is out of range for k-space of {kspace.dim()} dims"
            )
        if coil_dim % kspace.dim() in dims:
            raise ValueError(f"{owner}: coil_dim {coil_dim} is one of the transformed dims {given}")
        want = list(kspace.shape)
        want[coil_dim] = 1
        if list(input.shape) != want:
            raise ValueError(
                f"{owner}: with sensitivity maps the input needs kspace's size with size 1 on "
                f"coil_dim {coil_dim} ({want}), got input of size {list(input.shape)}"
            )
        _check_broadcast(sensitivity, kspace.shape, owner, "sensitivity")
    if not isinstance(mask, torch.Tensor) or mask.is_complex():
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(f"{owner}: mask must be a bool or real tensor (1 = sampled), got {got}")
    _check_broadcast(mask, kspace.shape, owner, "mask")
    if isinstance(weight, torch.Tensor):
        if weight.dtype != part:
            raise TypeError(
                f"{owner}: weight must be a real {part} tensor for {kspace.dtype} k-space, got "
                f"{weight.dtype}"
            )
        _check_broadcast(weight, kspace.shape, owner, "weight")
    return dims


def data_consistency(
    input: torch.Tensor,
    kspace: torch.Tensor,
    mask: torch.Tensor,
    weight: float | torch.Tensor = 1.0,
    *,
    sensitivity: torch.Tensor | None = None,
    dim: int | Sequence[int] = (-2, -1),
    norm: str = "ortho",
    centered: bool = False,
    coil_dim: int = 1,
) -> torch.Tensor:
    r"""Bring the image ``input`` to the measured k-space samples (module docstring for the math).

    Args:
        input: the current image, complex; with ``sensitivity``, of k-space's size but 1 on
            ``coil_dim`` (``(N, 1, H, W)``), else of k-space's size.
        kspace: the measured k-space :math:`k_0`, complex, same dtype (zero where not sampled;
            with a bool mask its entries outside the mask are never read).
        mask: the sampling mask, bool or real (1 = sampled; values in between weight the
            entries), broadcasting to k-space (``(H, W)``, or ``(1, 1, 1, W)`` for lines).
        weight: :math:`w`: 1 replaces the sampled entries, :math:`\lambda/(1+\lambda)` is the
            noisy form; a float, or a real tensor of the parts' dtype (a learned step)
            broadcasting to k-space.
        sensitivity: coil sensitivity maps :math:`S_c` broadcasting to k-space's size
            (``(N, C, H, W)``, or ``(1, C, H, W)`` for one set of maps); the result is combined
            over ``coil_dim``.
        dim: the spatial dims transformed (default the last two).
        norm: torch's FFT normalisation, ``"ortho"`` (default), ``"backward"`` or ``"forward"``.
        centered: k-space stored with the zero frequency in the middle (fastMRI's layout).
        coil_dim: the coil dim of k-space and the maps (used only with ``sensitivity``).

    Returns:
        The image, of ``input``'s size and dtype.

    Examples::

        >>> x = torch.randn(1, 1, 8, 8, dtype=torch.cfloat)
        >>> k0 = torch.fft.fftn(torch.randn(1, 1, 8, 8, dtype=torch.cfloat), dim=(-2, -1),
        ...                     norm="ortho")
        >>> mask = torch.rand(8) < 0.3  # sampled columns
        >>> y = cplxnet.functional.data_consistency(x, k0 * mask, mask)
        >>> k = torch.fft.fftn(y, dim=(-2, -1), norm="ortho")
        >>> torch.allclose(k[..., mask], k0[..., mask], atol=1e-5)
        True
    """
    owner = "data_consistency"
    given = check_options(weight, dim, norm, centered, coil_dim, owner)
    dims = _check_operands(input, kspace, mask, weight, sensitivity, given, coil_dim, owner)
    if kspace.numel() == 0:  # torch's FFT refuses empty tensors; no entry, or a sum of no coils
        return input.clone() if sensitivity is None else torch.zeros_like(input)
    coils = input if sensitivity is None else sensitivity * input
    k = _fft(coils, dims, norm, centered, inverse=False)
    if mask.dtype == torch.bool:  # k-space outside the mask is never read (NaN there stays out)
        residual = torch.where(mask, kspace - k, 0)
    else:
        residual = mask.to(real_dtype(k.dtype)) * (kspace - k)
    if isinstance(weight, torch.Tensor) or weight != 1:
        residual = residual * weight
    out = _fft(k + residual, dims, norm, centered, inverse=True)
    if sensitivity is not None:
        out = (sensitivity.conj() * out).sum(dim=coil_dim, keepdim=True)
    nd = len(dims)
    if is_channels_last(input, nd):  # as torch's layers, the output keeps the input's format
        return out.contiguous(memory_format=cl_format(nd))
    return out
