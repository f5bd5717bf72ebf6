"""A small 2-D U-Net, complex or real, and a synthetic undersampled-Fourier reconstruction task.

The complex U-Net is torch's U-Net with ``torch.nn`` replaced by ``cplxnet.nn``: the layers take
the same arguments and give the same shapes, so one class builds both (``layers = cplxnet.nn if
complex else torch.nn``). Ronneberger et al., "U-Net: Convolutional Networks for Biomedical Image
Segmentation", MICCAI 2015; complex U-Nets for MRI as in Cole et al., "Analysis of deep complex-
valued convolutional neural networks for MRI reconstruction and phase-focused applications",
MRM 2021.

>>> net = UNet(1, 1, base_channels=8, depth=2)                    # complex64
>>> twin = UNet(2, 2, base_channels=16, depth=2, dtype=torch.float32)  # equal-FLOP real twin
>>> x, y = undersampled_fourier_pairs(4, 32, generator=torch.Generator().manual_seed(0))
>>> net(x).shape, twin(as_channels(x)).shape
(torch.Size([4, 1, 32, 32]), torch.Size([4, 2, 32, 32]))
"""

from __future__ import annotations

import math

import torch
from torch import nn

import cplxnet.nn as cnn
from cplxnet import complex_dtype

__all__ = ["UNet", "undersampled_fourier_pairs", "as_channels", "from_channels"]


class _DoubleConv(nn.Sequential):
    """(3x3 conv, batch norm, activation) twice, as Ronneberger et al.'s blocks (with BN)."""

    def __init__(self, layers, c_in: int, c_out: int, activation: str, fk: dict) -> None:
        super().__init__(
            layers.Conv2d(c_in, c_out, 3, padding=1, bias=False, **fk),
            layers.BatchNorm2d(c_out, **fk),
            cnn.activation_module(activation, 1, **fk),
            layers.Conv2d(c_out, c_out, 3, padding=1, bias=False, **fk),
            layers.BatchNorm2d(c_out, **fk),
            cnn.activation_module(activation, 1, **fk),
        )


class UNet(nn.Module):
    r"""U-Net of ``depth`` down/up levels: a double conv per level, 2x2 max pooling down
    (complex: by modulus), 2x2 transposed convolutions (``upsample="transpose"``) or bilinear
    upsampling followed by a 1x1 convolution (``"bilinear"``) up, skip connections concatenated
    on the channel dim, a 1x1 output convolution, and the input added to the output
    (``residual=True``: the network learns the correction, as in reconstruction networks).

    A complex ``dtype`` (default: the complex type of the default dtype) builds it from
    ``cplxnet.nn`` (complex convolutions, whitening :class:`cplxnet.nn.BatchNorm2d`, modulus max
    pooling, the complex ``activation``); a real ``dtype`` from ``torch.nn`` with the real
    restriction of the activation. The equal-FLOP real twin of ``UNet(c_in, c_out, C)`` is
    ``UNet(2 c_in, 2 c_out, 2 C, dtype=float)`` on :func:`as_channels` of the input: a complex
    convolution costs four real multiply-adds per weight, as a real one with twice the channels
    on both sides. In channels-last (``net.to(memory_format=torch.channels_last)`` and a
    channels-last input) every layer keeps that format and the convolutions copy nothing
    (``benchmarks/UNET_CHANNELS_LAST.md``).

    Args:
        in_channels, out_channels: image channels (complex channels for a complex net).
        base_channels: channels of the first level (doubled at each level down).
        depth: number of pooling steps.
        activation: a name of :func:`cplxnet.nn.activation_module` (``crelu``, ``modrelu``,
            ``cardioid``, ...; modReLU gets one shared threshold).
        upsample: ``"transpose"`` or ``"bilinear"``.
        residual: add the input to the output (needs ``in_channels == out_channels``).
    """

    def __init__(
        self,
        in_channels: int = 1,
        out_channels: int = 1,
        base_channels: int = 16,
        depth: int = 2,
        *,
        activation: str = "crelu",
        upsample: str = "transpose",
        residual: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        dtype = complex_dtype() if dtype is None else dtype
        if upsample not in ("transpose", "bilinear"):
            raise ValueError(f"UNet: upsample must be 'transpose' or 'bilinear', got {upsample!r}")
        if residual and in_channels != out_channels:
            raise ValueError("UNet: residual=True needs in_channels == out_channels")
        layers = cnn if dtype.is_complex else nn
        fk = {"device": device, "dtype": dtype}
        self.residual = residual
        widths = [base_channels * 2**k for k in range(depth + 1)]
        self.down = nn.ModuleList()
        c = in_channels
        for w in widths:
            self.down.append(_DoubleConv(layers, c, w, activation, fk))
            c = w
        self.pool = layers.MaxPool2d(2)
        self.up = nn.ModuleList()
        self.merge = nn.ModuleList()
        for w in reversed(widths[:-1]):
            if upsample == "transpose":
                self.up.append(layers.ConvTranspose2d(2 * w, w, 2, stride=2, **fk))
            else:
                self.up.append(
                    nn.Sequential(
                        layers.Upsample(scale_factor=2, mode="bilinear"),
                        layers.Conv2d(2 * w, w, 1, **fk),
                    )
                )
            self.merge.append(_DoubleConv(layers, 2 * w, w, activation, fk))
        self.out = layers.Conv2d(widths[0], out_channels, 1, **fk)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(B, in_channels, H, W)`` with H, W divisible by ``2**depth`` ->
        ``(B, out_channels, H, W)``."""
        step = 2 ** (len(self.down) - 1)
        eager = not (torch.compiler.is_compiling() or torch.compiler.is_exporting())
        if eager and x.dim() == 4 and (x.shape[-2] % step or x.shape[-1] % step):
            pad_h, pad_w = -x.shape[-2] % step, -x.shape[-1] % step
            raise ValueError(
                f"UNet: height and width must be divisible by 2**depth = {step}, got "
                f"{x.shape[-2]} x {x.shape[-1]}; pad the input, e.g. "
                f"torch.nn.functional.pad(x, (0, {pad_w}, 0, {pad_h})), and crop the output"
            )
        skips = []
        h = x
        for k, block in enumerate(self.down):
            h = block(h if k == 0 else self.pool(h))
            skips.append(h)
        skips.pop()
        for up, merge in zip(self.up, self.merge):
            h = merge(torch.cat([skips.pop(), up(h)], dim=1))
        out = self.out(h)
        return x + out if self.residual else out


def as_channels(z: torch.Tensor) -> torch.Tensor:
    """Complex ``(N, C, H, W)`` -> real ``(N, 2C, H, W)`` (channel ``2c`` the real part of ``c``,
    ``2c + 1`` its imaginary part): the input of the real twin."""
    n, c = z.shape[:2]
    return torch.view_as_real(z.resolve_conj()).movedim(-1, 2).reshape(n, 2 * c, *z.shape[2:])


def from_channels(x: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`as_channels`."""
    n, c2 = x.shape[:2]
    parts = x.reshape(n, c2 // 2, 2, *x.shape[2:]).movedim(2, -1).contiguous()
    return torch.view_as_complex(parts)


def undersampled_fourier_pairs(
    n: int,
    size: int = 32,
    *,
    acceleration: int = 4,
    center_fraction: float = 0.08,
    blobs: int = 6,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.complex64,
    return_kspace: bool = False,
) -> tuple[torch.Tensor, ...]:
    """``n`` synthetic complex images ``(n, 1, size, size)`` and their zero-filled
    reconstructions from undersampled Fourier data (the MRI setting of Zbontar et al.'s fastMRI
    masks): ``(zero_filled, image)``; with ``return_kspace=True`` also the measurements and the
    mask, ``(zero_filled, image, kspace, mask)``, as :class:`cplxnet.nn.DataConsistency` takes
    them with its defaults: ``kspace`` ``(n, 1, size, size)`` is ``fft2(image, norm="ortho")``
    where sampled and zero elsewhere, ``mask`` ``(n, 1, 1, size)`` bool (both with the zero
    frequency first, torch's FFT layout).

    Each image is a sum of ``blobs`` Gaussian blobs with random centres, widths and magnitudes,
    each carrying a linear phase ramp of random slope (so the phase varies smoothly and a model
    that ignores it cannot reconstruct the image). Its 2-D FFT keeps the central
    ``center_fraction`` of the phase-encoding columns and a random ``1/acceleration`` of the rest
    (one mask per image); the inverse FFT of the masked k-space is the network's input. Images
    are scaled to unit RMS.
    """
    g = generator
    real = torch.float64
    coords = torch.linspace(-1.0, 1.0, size, dtype=real)
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    centre = torch.rand(n, blobs, 2, generator=g, dtype=real) * 1.6 - 0.8
    width = torch.rand(n, blobs, 1, 1, generator=g, dtype=real) * 0.25 + 0.05
    amp = torch.rand(n, blobs, 1, 1, generator=g, dtype=real) + 0.2
    slope = (torch.rand(n, blobs, 2, generator=g, dtype=real) * 2 - 1) * math.pi * 2
    offset = torch.rand(n, blobs, 1, 1, generator=g, dtype=real) * 2 * math.pi
    dy = yy - centre[..., 0, None, None]
    dx = xx - centre[..., 1, None, None]
    magnitude = amp * torch.exp(-(dx**2 + dy**2) / (2 * width**2))
    phase = slope[..., 0, None, None] * yy + slope[..., 1, None, None] * xx + offset
    image = torch.polar(magnitude, phase).sum(1, keepdim=True)  # (n, 1, size, size)
    image = image / image.abs().pow(2).mean(dim=(-2, -1), keepdim=True).sqrt()
    kspace = torch.fft.fftshift(torch.fft.fft2(image, norm="ortho"), dim=(-2, -1))
    keep = torch.rand(n, 1, 1, size, generator=g, dtype=real) < 1.0 / acceleration
    half = max(1, round(size * center_fraction / 2))
    mid = size // 2
    keep[..., mid - half : mid + half] = True
    masked = torch.fft.ifftshift(kspace * keep, dim=(-2, -1))
    zero_filled = torch.fft.ifft2(masked, norm="ortho")
    if not return_kspace:
        return zero_filled.to(dtype), image.to(dtype)
    mask = torch.fft.ifftshift(keep, dim=-1)
    return zero_filled.to(dtype), image.to(dtype), masked.to(dtype), mask
