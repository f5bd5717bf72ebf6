"""``data_consistency`` against a literal transcription (complex tensors instead of fastMRI's
trailing real/imag dim) of fastMRI's ``fft2c``/``ifft2c`` (``fastmri/fftc.py``, with its own
roll-based ``fftshift``/``ifftshift``), ``VarNetBlock``'s ``sens_expand``/``sens_reduce`` and its
soft data consistency ``torch.where(mask, x - ref_kspace, 0) * dc_weight``
(``fastmri/models/varnet.py``), for odd and even sizes."""

from __future__ import annotations

import pytest
import torch

from cplxnet import functional as CF

C128 = torch.complex128


# --- fastmri/fftc.py, transcribed -------------------------------------------------------------
def roll_one_dim(x, shift, dim):
    shift = shift % x.size(dim)
    if shift == 0:
        return x
    left = x.narrow(dim, 0, x.size(dim) - shift)
    right = x.narrow(dim, x.size(dim) - shift, shift)
    return torch.cat((right, left), dim=dim)


def roll(x, shift, dim):
    for s, d in zip(shift, dim):
        x = roll_one_dim(x, s, d)
    return x


def fftshift(x, dim):
    return roll(x, [x.shape[d] // 2 for d in dim], dim)


def ifftshift(x, dim):
    return roll(x, [(x.shape[d] + 1) // 2 for d in dim], dim)


def fft2c(data, norm="ortho"):  # fft2c_new, complex dtype: dims (-2, -1) instead of (-3, -2)
    data = ifftshift(data, dim=[-2, -1])
    data = torch.fft.fftn(data, dim=(-2, -1), norm=norm)
    return fftshift(data, dim=[-2, -1])


def ifft2c(data, norm="ortho"):
    data = ifftshift(data, dim=[-2, -1])
    data = torch.fft.ifftn(data, dim=(-2, -1), norm=norm)
    return fftshift(data, dim=[-2, -1])


# --- fastmri/models/varnet.py VarNetBlock, transcribed ------------------------------------------
def sens_expand(x, sens_maps, norm="ortho"):
    return fft2c(x * sens_maps, norm)


def sens_reduce(x, sens_maps, norm="ortho"):
    return (ifft2c(x, norm) * sens_maps.conj()).sum(dim=1, keepdim=True)


def soft_dc(x, ref_kspace, mask, dc_weight):
    zero = torch.zeros(1, 1, 1, 1, dtype=x.dtype)
    return torch.where(mask, x - ref_kspace, zero) * dc_weight


def fastmri_dc(image, ref_kspace, mask, sens_maps, dc_weight, norm="ortho"):
    """The data-consistency half of a VarNet cascade, started from an image: expand, soft DC,
    reduce."""
    k = sens_expand(image, sens_maps, norm)
    return sens_reduce(k - soft_dc(k, ref_kspace, mask, dc_weight), sens_maps, norm)


def _c(*shape, seed):
    return torch.randn(*shape, dtype=C128, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("hw", [(6, 8), (5, 7), (5, 8), (6, 7), (1, 3)])
def test_centered_transform_is_fastmri_fft2c(hw):
    from cplxnet.functional.kspace import _fft

    x = _c(2, 3, *hw, seed=0)
    torch.testing.assert_close(_fft(x, (2, 3), "ortho", True, False), fft2c(x), rtol=0, atol=1e-12)
    torch.testing.assert_close(_fft(x, (2, 3), "ortho", True, True), ifft2c(x), rtol=0, atol=1e-12)
    torch.testing.assert_close(ifft2c(fft2c(x)), x)  # the pair inverts itself at odd sizes too


@pytest.mark.parametrize("hw", [(6, 8), (5, 7), (5, 8), (6, 7)])
@pytest.mark.parametrize("dc_weight", [1.0, 0.37, -0.2])
@pytest.mark.parametrize("norm", ["ortho", "backward", "forward"])
def test_equals_fastmri_sens_expand_soft_dc_sens_reduce(hw, dc_weight, norm):
    b, c = 2, 4
    image, ref, maps = _c(b, 1, *hw, seed=1), _c(b, c, *hw, seed=2), _c(b, c, *hw, seed=3)
    # fastMRI's masks: (B, 1, 1, W) lines, bool inside VarNetBlock
    mask = torch.rand(b, 1, 1, hw[1], generator=torch.Generator().manual_seed(4)) < 0.5
    w = torch.full((1,), dc_weight, dtype=torch.float64)  # nn.Parameter(torch.ones(1)) shape

    want = fastmri_dc(image, ref * mask, mask, maps, w, norm)
    got = CF.data_consistency(
        image, ref * mask, mask, w, sensitivity=maps, centered=True, norm=norm
    )
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    got_float = CF.data_consistency(
        image, ref * mask, mask.double(), dc_weight, sensitivity=maps, centered=True, norm=norm
    )
    torch.testing.assert_close(got_float, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("hw", [(6, 8), (5, 7)])
def test_uncentered_differs_from_fastmri_on_centered_data(hw):
    """The default ``centered=False`` is Schlemper's layout, not fastMRI's: a port that keeps the
    default on fastMRI k-space gets another answer (a reminder, not a requirement)."""
    image, ref, maps = _c(1, 1, *hw, seed=1), _c(1, 3, *hw, seed=2), _c(1, 3, *hw, seed=3)
    mask = torch.zeros(1, 1, 1, hw[1], dtype=torch.bool)
    mask[..., : hw[1] // 3] = True
    want = fastmri_dc(image, ref * mask, mask, maps, torch.ones(1, dtype=torch.float64))
    got = CF.data_consistency(image, ref * mask, mask, sensitivity=maps)
    assert not torch.allclose(got, want)
