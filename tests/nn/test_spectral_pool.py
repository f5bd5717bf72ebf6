"""Spectral pooling (``SpectralPool1d/2d/3d``, ``cplxnet.functional.spectral_pool*``) against
its formula written as explicit DFT sums (values and gradients), ``scipy.signal.resample`` along
each axis, complextorch's ``SpectralPool`` (equal for odd output sizes; for even ones it drops
the frequency +k/2), and its properties: exact resampling of a band-limited signal, the mean
kept, real input to real output, one-line errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.signal
import torch

import cplxnet.functional as CF
from cplxnet import nn as cnn

DT = torch.complex128
FNS = {1: CF.spectral_pool1d, 2: CF.spectral_pool2d, 3: CF.spectral_pool3d}
MODULES = {1: cnn.SpectralPool1d, 2: cnn.SpectralPool2d, 3: cnn.SpectralPool3d}


def _formula_matrix(n: int, k: int) -> torch.Tensor:
    """The ``(k, n)`` matrix of one axis: ``y[m] = sum_{|f| <= k/2} xhat[f mod n] e^{2 pi i f m
    / k}`` with ``xhat[f] = (1/n) sum_j x[j] e^{-2 pi i f j / n}``, summed entry by entry."""
    a = torch.zeros(k, n, dtype=DT)
    freqs = [f for f in range(-k, k + 1) if abs(f) <= k / 2]
    for m in range(k):
        for j in range(n):
            total = 0j
            for f in freqs:
                total += np.exp(2j * math.pi * f * m / k) * np.exp(-2j * math.pi * f * j / n) / n
            a[m, j] = total
    return a


def _formula(x: torch.Tensor, sizes: tuple) -> torch.Tensor:
    """The formula along each of the last ``len(sizes)`` axes whose size changes (an axis that
    keeps its size is left as it is; differentiable in ``x``)."""
    nd = len(sizes)
    out = x if x.is_complex() else x.to(DT)
    for axis, k in enumerate(sizes):
        dim = x.dim() - nd + axis
        if out.shape[dim] == k:
            continue
        a = _formula_matrix(out.shape[dim], k)
        out = torch.movedim(torch.movedim(out, dim, -1) @ a.T, -1, dim)
    return out


CASES = [  # (input shape, output_size, output sizes)
    ((2, 3, 9), 4, (4,)),
    ((2, 3, 9), 5, (5,)),
    ((2, 3, 8), 3, (3,)),
    ((3, 8), 2, (2,)),  # unbatched
    ((2, 3, 7), 1, (1,)),
    ((2, 2, 6, 7), (4, None), (4, 7)),
    ((2, 2, 6, 8), (4, None), (4, 8)),  # an even size kept (k = n: unchanged, not folded)
    ((2, 2, 6, 8), (3, 8), (3, 8)),
    ((2, 2, 6, 7), 3, (3, 3)),
    ((2, 5, 8), (2, 5), (2, 5)),  # unbatched 2-D
    ((1, 2, 4, 5, 6), (2, 3, 4), (2, 3, 4)),
    ((2, 5, 4, 7), (None, 2, None), (5, 2, 7)),  # unbatched 3-D
]


def _nd(shape, sizes):
    return len(sizes)


@pytest.mark.parametrize(("shape", "size", "sizes"), CASES)
@pytest.mark.parametrize("complex_input", [True, False])
def test_equals_the_formula_in_values_and_gradients(shape, size, sizes, complex_input):
    torch.manual_seed(0)
    dtype = DT if complex_input else torch.float64
    x = torch.randn(shape, dtype=dtype, requires_grad=True)
    nd = _nd(shape, sizes)
    ours = MODULES[nd](size)(x)
    ref = _formula(x, sizes)
    if not complex_input:
        assert ours.dtype == torch.float64
        torch.testing.assert_close(ref.imag, torch.zeros_like(ref.imag))  # real in, real out
        ref = ref.real
    assert ours.shape == shape[: len(shape) - nd] + sizes
    torch.testing.assert_close(ours, ref)
    g = torch.randn(ours.shape, dtype=ours.dtype, generator=torch.Generator().manual_seed(1))
    (a,) = torch.autograd.grad((ours * g.conj()).real.sum(), x)
    (b,) = torch.autograd.grad((ref * g.conj()).real.sum(), x)
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize(("shape", "size", "sizes"), CASES)
def test_equals_scipy_resample_along_each_axis(shape, size, sizes):
    torch.manual_seed(0)
    nd = _nd(shape, sizes)
    for x in (torch.randn(shape, dtype=DT), torch.randn(shape, dtype=torch.float64)):
        ref = x.numpy()
        for axis, k in enumerate(sizes):
            ref = scipy.signal.resample(ref, k, axis=x.dim() - nd + axis)
        torch.testing.assert_close(FNS[nd](x, size), torch.from_numpy(ref))


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_gradcheck_complex128(nd):
    torch.manual_seed(0)
    x = torch.randn((2, 2) + (6, 5, 4)[:nd], dtype=DT, requires_grad=True)
    size = (4, 3, 3)[:nd]  # even and odd output sizes
    assert torch.autograd.gradcheck(lambda t: FNS[nd](t, size), (x,))
    xr = torch.randn((2, 2) + (6, 5, 4)[:nd], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: FNS[nd](t, size), (xr,))


@pytest.mark.parametrize(("n", "k"), [(32, 8), (31, 9), (24, 10), (17, 16)])
def test_a_band_limited_signal_is_resampled_exactly_and_the_mean_kept(n, k):
    torch.manual_seed(0)
    freqs = [f for f in range(-(k // 2), k // 2 + 1) if abs(f) < k / 2]
    amps = torch.randn(len(freqs), dtype=DT)

    def signal(length):
        t = torch.arange(length, dtype=torch.float64)
        return sum(a * torch.exp(2j * math.pi * f * t / length) for a, f in zip(amps, freqs))

    x = signal(n).reshape(1, 1, n)
    y = CF.spectral_pool1d(x, k)
    torch.testing.assert_close(y.reshape(k), signal(k))
    z = torch.randn(3, 4, n, dtype=DT)
    torch.testing.assert_close(CF.spectral_pool1d(z, k).mean(-1), z.mean(-1))


def test_complextorch_agrees_for_odd_sizes_and_drops_plus_k_half_for_even_ones():
    ctnn = pytest.importorskip("complextorch.nn")
    torch.manual_seed(0)
    x = torch.randn(2, 3, 10, 9, dtype=DT)
    torch.testing.assert_close(cnn.SpectralPool2d((5, 7))(x), ctnn.SpectralPool2d((5, 7))(x))
    x = x.flatten(1, 2)
    torch.testing.assert_close(cnn.SpectralPool1d(3)(x), ctnn.SpectralPool1d(3)(x))
    n, k = 10, 4  # even: the bin of f = -k/2 also holds f = +k/2 here
    x = torch.randn(2, 3, n, dtype=DT)
    spectrum = torch.fft.fft(x, norm="forward")
    m = torch.arange(k, dtype=torch.float64)
    plus = spectrum[..., k // 2 : k // 2 + 1] * torch.exp(1j * math.pi * m)
    torch.testing.assert_close(cnn.SpectralPool1d(k)(x), ctnn.SpectralPool1d(k)(x) + plus)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32])
def test_output_follows_the_input_dtype_and_is_a_new_contiguous_tensor(dtype):
    x = torch.randn(2, 3, 8, 6, dtype=dtype)
    assert CF.spectral_pool2d(x, 4).dtype == dtype
    same = CF.spectral_pool2d(x, None)
    assert torch.equal(same, x) and same.data_ptr() != x.data_ptr()
    assert CF.spectral_pool2d(x.transpose(-1, -2), 3).is_contiguous()


@pytest.mark.parametrize(("nd", "fmt"), [(2, torch.channels_last), (3, torch.channels_last_3d)])
@pytest.mark.parametrize("dtype", [DT, torch.float64])
def test_a_channels_last_input_gives_a_channels_last_output(nd, fmt, dtype):
    x = torch.randn((2, 3) + (6, 5, 7)[:nd], dtype=dtype)
    out = FNS[nd](x.contiguous(memory_format=fmt), 3)
    assert out.is_contiguous(memory_format=fmt) and not out.is_contiguous()
    torch.testing.assert_close(out, FNS[nd](x, 3))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: CF.spectral_pool1d(torch.randn(2, 3, 5, dtype=DT), 6),
         r"^spectral_pool1d: output_size \(6,\) exceeds the input's size \(5,\); spectral "
         r"pooling only shrinks \(enlarge with Upsample\)$"),
        (lambda: cnn.SpectralPool2d((2, 0))(torch.randn(1, 2, 4, 4, dtype=DT)),
         "output_size must hold positive ints, got \\(2, 0\\)"),
        (lambda: CF.spectral_pool2d(torch.randn(1, 2, 4, 4, dtype=DT), (2, 2, 2)),
         "output_size must be an int or 2 ints"),
        (lambda: CF.spectral_pool2d(torch.randn(1, 2, 4, 4, dtype=DT), 2.0),
         "output_size must hold positive ints, got 2.0"),
        (lambda: CF.spectral_pool1d(torch.randn(1, 2, 4, dtype=DT), (2, 2)),
         r"^spectral_pool1d: output_size must be an int, got \(2, 2\)$"),
        (lambda: CF.spectral_pool3d(torch.randn(4, 4, dtype=DT), 2),
         r"expected input \(B, C, D, H, W\) or unbatched \(C, D, H, W\), got shape \(4, 4\)"),
        (lambda: CF.spectral_pool1d(torch.ones(2, 3, 4, dtype=torch.long), 2),
         "input must be a complex or floating tensor, got torch.int64"),
        (lambda: CF.spectral_pool1d(torch.randn(2, 3, 4, dtype=DT), True),
         "output_size must hold positive ints"),
    ],
)  # fmt: skip
def test_bad_input_is_one_clear_error(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_an_empty_batch_and_integer_types_of_output_size():
    x = torch.randn(0, 3, 8, 6, dtype=DT, requires_grad=True)
    out = CF.spectral_pool2d(x, (np.int64(4), None))
    assert out.shape == (0, 3, 4, 6) and out.dtype == DT and out.requires_grad
    assert CF.spectral_pool1d(torch.randn(0, 2, 5), 3).shape == (0, 2, 3)


def test_vmap_over_channels_last_samples_equals_a_loop():
    """Inside vmap the memory format cannot be queried: the input is read as contiguous."""
    x = torch.randn(3, 2, 5, 6, 4, dtype=DT).permute(0, 1, 4, 2, 3)  # each sample channels-last
    out = torch.func.vmap(lambda t: CF.spectral_pool2d(t, 3))(x)
    torch.testing.assert_close(out, torch.stack([CF.spectral_pool2d(t, 3) for t in x]))


def test_repr():
    assert repr(cnn.SpectralPool2d((4, None))) == "SpectralPool2d(output_size=(4, None))"
    assert repr(cnn.SpectralPool1d(3)) == "SpectralPool1d(output_size=3)"
