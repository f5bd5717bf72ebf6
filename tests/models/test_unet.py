"""The zoo's U-Net (complex and real twin) and its synthetic reconstruction task."""

import re

import pytest
import torch

import cplxnet
from cplxnet.models import UNet, as_channels, from_channels, undersampled_fourier_pairs


def _data(n=4, size=16, seed=0):
    return undersampled_fourier_pairs(n, size, generator=torch.Generator().manual_seed(seed))


def test_the_task_is_undersampled_fourier_data_of_unit_rms_complex_images():
    x, y = _data(3, 32)
    assert x.shape == y.shape == (3, 1, 32, 32) and x.dtype == y.dtype == torch.complex64
    torch.testing.assert_close(y.abs().pow(2).mean(dim=(-2, -1)), torch.ones(3, 1))
    # the input is the inverse FFT of a column-masked k-space of the image
    k_in = torch.fft.fftshift(torch.fft.fft2(x.to(torch.complex128), norm="ortho"), dim=(-2, -1))
    k_full = torch.fft.fftshift(torch.fft.fft2(y.to(torch.complex128), norm="ortho"), dim=(-2, -1))
    kept = (k_in - k_full).abs().amax(dim=(1, 2)) < 1e-3  # (n, W) columns sampled
    zeroed = k_in.abs().amax(dim=(1, 2)) < 1e-3
    assert torch.all(kept | zeroed)
    assert kept[:, 15:17].all() and 0 < kept.float().mean() < 0.6
    assert (y.angle().std() > 1.0).all()  # the phase carries structure
    x2, y2 = _data(3, 32)
    assert torch.equal(x, x2) and torch.equal(y, y2)  # seeded


def test_the_measurements_are_what_data_consistency_takes():
    """``return_kspace=True``: the same pairs (the same draws), the masked k-space of the image and
    its mask; both the zero-filled input and the true image are consistent with them."""
    x, y = _data(3, 16)
    x2, y2, k0, mask = undersampled_fourier_pairs(
        3, 16, generator=torch.Generator().manual_seed(0), return_kspace=True
    )
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert k0.shape == (3, 1, 16, 16) and k0.dtype == torch.complex64
    assert mask.shape == (3, 1, 1, 16) and mask.dtype == torch.bool
    assert mask[..., 0].all() and 0 < mask.float().mean() < 0.6  # the centre, first in FFT order
    k = torch.fft.fft2(y, norm="ortho")
    torch.testing.assert_close(k0, k * mask)
    dc = cplxnet.nn.DataConsistency()
    torch.testing.assert_close(dc(x, k0, mask), x, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(dc(y, k0, mask), y, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(dc(torch.zeros_like(x), k0, mask), x, atol=1e-5, rtol=1e-5)


def test_channels_round_trip():
    z = torch.randn(2, 3, 4, 4, dtype=torch.cfloat)
    r = as_channels(z)
    assert r.shape == (2, 6, 4, 4) and torch.equal(r[:, 2], z[:, 1].real)
    assert torch.equal(from_channels(r), z)
    assert torch.equal(as_channels(z.conj()), as_channels(z.conj().resolve_conj()))


@pytest.mark.parametrize("upsample", ["transpose", "bilinear"])
@pytest.mark.parametrize("activation", ["crelu", "modrelu", "cardioid"])
def test_complex_unet_and_its_real_twin_shapes_and_equal_flops(upsample, activation):
    net = UNet(1, 1, 4, 2, activation=activation, upsample=upsample)
    twin = UNet(2, 2, 8, 2, activation=activation, upsample=upsample, dtype=torch.float32)
    x, _ = _data()
    assert net(x).shape == x.shape and net(x).dtype == torch.complex64
    assert twin(as_channels(x)).shape == (4, 2, 16, 16)
    assert isinstance(net.down[0][1], cplxnet.nn.BatchNorm2d)
    assert isinstance(twin.down[0][1], torch.nn.BatchNorm2d)
    # equal multiply-adds: each complex weight is 4 real ones, the twin has 4x the real weights
    conv_c = sum(p.numel() for n, p in net.named_parameters() if p.dim() == 4)
    conv_r = sum(p.numel() for n, p in twin.named_parameters() if p.dim() == 4)
    assert conv_r == 4 * conv_c


def test_unet_overfits_one_batch_and_beats_the_zero_filled_input():
    torch.manual_seed(0)
    net = UNet(1, 1, 4, 1)
    x, y = _data(4, 16)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    loss_fn = cplxnet.nn.MSELoss()
    start = float(loss_fn(x, y))
    for _ in range(60):
        loss = loss_fn(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss) < 0.5 * start


def test_unet_bad_arguments():
    with pytest.raises(ValueError, match="upsample must be"):
        UNet(upsample="cubic")
    with pytest.raises(ValueError, match="residual=True needs"):
        UNet(1, 2)


@pytest.mark.parametrize("upsample", ["transpose", "bilinear"])
def test_unet_in_channels_last_equals_contiguous_and_keeps_the_format(upsample):
    torch.manual_seed(0)
    net = UNet(1, 1, 4, 2, upsample=upsample, dtype=torch.complex128)
    net_cl = UNet(1, 1, 4, 2, upsample=upsample, dtype=torch.complex128)
    net_cl.load_state_dict(net.state_dict())
    net_cl = net_cl.to(memory_format=torch.channels_last)
    seen = []
    for block in (*net_cl.down, *net_cl.merge):  # the double convs: conv, norm, activation
        block.register_forward_hook(lambda m, i, out: seen.append(out))
    x = torch.randn(3, 1, 16, 16, dtype=torch.complex128)
    y, y_cl = net(x), net_cl(x.contiguous(memory_format=torch.channels_last))
    torch.testing.assert_close(y_cl, y)
    assert len(seen) == 5
    for out in seen:  # 4-16 channels: channels-last and not also contiguous
        assert out.is_contiguous(memory_format=torch.channels_last) and not out.is_contiguous()
    gz = torch.randn_like(y)
    (gz.conj() * y).real.sum().backward()
    (gz.conj() * y_cl).real.sum().backward()
    for (name, p), p_cl in zip(net.named_parameters(), net_cl.parameters()):
        torch.testing.assert_close(p_cl.grad, p.grad, msg=name)


@pytest.mark.parametrize(("depth", "size", "pad"), [(2, (30, 30), "(0, 2, 0, 2)"),
                                                     (3, (16, 20), "(0, 4, 0, 0)")])  # fmt: skip
def test_a_size_not_divisible_by_two_to_the_depth_is_one_error_with_the_padding(depth, size, pad):
    net = UNet(1, 1, base_channels=2, depth=depth)
    with pytest.raises(ValueError, match=re.escape(f"divisible by 2**depth = {2**depth}")) as err:
        net(torch.randn(1, 1, *size, dtype=torch.complex64))
    assert f"pad(x, {pad})" in str(err.value)
