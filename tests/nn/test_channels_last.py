"""A channels-last input (``torch.channels_last``, ``torch.channels_last_3d``) through the grid
layers, the whitening norms and the element-wise activations: the same values and gradients as
the contiguous input, and a channels-last output, as torch's layers keep the format."""

import itertools

import pytest
import torch

from cplxnet import nn as cnn

DT = torch.complex128


def _layers():
    """(id, rank, module factory); every module built in complex128."""
    kw = {"dtype": DT}
    return [
        ("Conv2d", 2, lambda: cnn.Conv2d(4, 6, 3, padding=1, **kw)),
        ("Conv3d", 3, lambda: cnn.Conv3d(4, 6, 3, padding=1, **kw)),
        ("ConvTranspose2d", 2, lambda: cnn.ConvTranspose2d(4, 6, 2, stride=2, **kw)),
        ("ConvTranspose3d", 3, lambda: cnn.ConvTranspose3d(4, 6, 2, stride=2, **kw)),
        ("BatchNorm2d", 2, lambda: cnn.BatchNorm2d(4, **kw)),
        ("BatchNorm2d-eval", 2, lambda: _eval(cnn.BatchNorm2d(4, **kw))),
        ("BatchNorm3d", 3, lambda: cnn.BatchNorm3d(4, **kw)),
        ("InstanceNorm2d", 2, lambda: cnn.InstanceNorm2d(4, affine=True, **kw)),
        ("GroupNorm", 2, lambda: cnn.GroupNorm(2, 4, **kw)),
        ("MaxPool2d", 2, lambda: cnn.MaxPool2d(2)),
        ("MaxPool3d-overlapping", 3, lambda: cnn.MaxPool3d(3, 2, 1)),
        ("AdaptiveMaxPool2d", 2, lambda: cnn.AdaptiveMaxPool2d(3)),
        ("MaxPool2d-MaxUnpool2d", 2, lambda: _PoolUnpool(2)),
        ("MaxPool3d-MaxUnpool3d", 3, lambda: _PoolUnpool(3)),
        ("Dropout3d", 3, lambda: _Seeded(cnn.Dropout3d(0.5))),
        ("AdaptiveAvgPool3d", 3, lambda: cnn.AdaptiveAvgPool3d(2)),
        ("InstanceNorm3d", 3, lambda: cnn.InstanceNorm3d(4, **kw)),
        ("PReLU", 2, lambda: cnn.PReLU(**kw)),
        ("ELU", 2, cnn.ELU),
        ("ZLeakyReLU", 2, cnn.ZLeakyReLU),
        ("GeorgiouKoutsougeras", 2, cnn.GeorgiouKoutsougeras),
        ("SplitGELU", 2, cnn.SplitGELU),
        ("AvgPool2d-blocks", 2, lambda: cnn.AvgPool2d(2)),
        ("AvgPool2d-k3s2p1", 2, lambda: cnn.AvgPool2d(3, 2, 1)),
        ("AvgPool3d", 3, lambda: cnn.AvgPool3d(2)),
        ("AdaptiveAvgPool2d", 2, lambda: cnn.AdaptiveAvgPool2d(3)),
        ("SpectralPool2d", 2, lambda: cnn.SpectralPool2d((2, None))),
        ("SpectralPool3d", 3, lambda: cnn.SpectralPool3d(3)),
        ("Upsample-nearest", 2, lambda: cnn.Upsample(scale_factor=2)),
        ("Upsample-bilinear", 2, lambda: cnn.Upsample(scale_factor=2, mode="bilinear")),
        ("Upsample-trilinear", 3, lambda: cnn.Upsample(scale_factor=2, mode="trilinear")),
        ("CReLU", 2, cnn.CReLU),
        ("Cardioid", 2, cnn.Cardioid),
        ("ZReLU", 2, cnn.ZReLU),
        ("SplitTanh", 2, cnn.SplitTanh),
        ("ModTanh", 2, cnn.ModTanh),
        ("DataConsistency", 2, lambda: _Measured(cnn.DataConsistency(0.5, centered=True, **kw))),
        ("DataConsistency-3d", 3, lambda: _Measured(cnn.DataConsistency(dim=(-3, -2, -1), **kw))),
    ]


class _Measured(torch.nn.Module):
    """A data-consistency step with fixed measurements of the input's size (every other column
    sampled)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        k0 = torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(0))
        mask = torch.arange(x.shape[-1]) % 2 == 0
        return self.m(x, k0, mask)


class _PoolUnpool(torch.nn.Module):
    def __init__(self, nd):
        super().__init__()
        self.pool = getattr(cnn, f"MaxPool{nd}d")(2, return_indices=True)
        self.unpool = getattr(cnn, f"MaxUnpool{nd}d")(2)

    def forward(self, x):
        return self.unpool(*self.pool(x))


class _Seeded(torch.nn.Module):
    """The same channel mask for both inputs."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        torch.manual_seed(1)
        return self.m(x)


def _eval(m):
    with torch.no_grad():
        m.running_mean.normal_()
    return m.eval()


@pytest.mark.parametrize("name, nd, make", _layers(), ids=[c[0] for c in _layers()])
def test_channels_last_input_gives_the_same_values_gradients_and_format(name, nd, make):
    torch.manual_seed(0)
    layer = make()
    fmt = torch.channels_last if nd == 2 else torch.channels_last_3d
    x = torch.randn(2, 4, *(6,) * nd, dtype=DT)
    xc = x.contiguous(memory_format=fmt)
    leaf, leaf_cl = x.clone().requires_grad_(), xc.detach().requires_grad_()
    y, y_cl = layer(leaf), layer(leaf_cl)
    torch.testing.assert_close(y_cl, y)
    assert y_cl.is_contiguous(memory_format=fmt) and not y_cl.is_contiguous()
    gz = torch.randn_like(y)
    (g,) = torch.autograd.grad(y, leaf, gz)
    (g_cl,) = torch.autograd.grad(y_cl, leaf_cl, gz)
    torch.testing.assert_close(g_cl, g)


def test_the_format_follows_torchs_rule_for_ambiguous_and_weight_channels_last_convolutions():
    x1 = torch.randn(2, 1, 6, 6, dtype=DT)  # one channel: contiguous and channels-last at once
    conv = cnn.Conv2d(1, 4, 3, padding=1, dtype=DT)
    real = torch.nn.Conv2d(2, 8, 3, padding=1, dtype=torch.float64)
    assert (
        conv(x1).is_contiguous()
        == real(torch.randn(2, 2, 6, 6, dtype=torch.float64)).is_contiguous()
    )
    conv4 = cnn.Conv2d(4, 4, 3, padding=1, dtype=DT).to(memory_format=torch.channels_last)
    y = conv4(torch.randn(2, 4, 6, 6, dtype=DT))  # a channels-last weight: channels-last output
    assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()


def _conv_pair(nd, transposed, groups, in_channels, dtype, weight_cl):
    name = ("ConvTranspose" if transposed else "Conv") + f"{nd}d"
    ref = getattr(torch.nn, name)(in_channels, 4, 2, stride=2, groups=groups, dtype=dtype)
    ours = getattr(cnn, name)(in_channels, 4, 2, stride=2, groups=groups, dtype=dtype)
    ours.load_state_dict(ref.state_dict())
    if weight_cl:
        fmt = torch.channels_last if nd == 2 else torch.channels_last_3d
        ref, ours = ref.to(memory_format=fmt), ours.to(memory_format=fmt)
    return ref, ours


def _format_cases(nd, in_channels, dtype):
    """Inputs unbatched and of batch 1 and 2, each contiguous and channels-last, with a weight
    in either format."""
    for batch, input_cl, weight_cl in itertools.product((None, 1, 2), (False, True), (False, True)):
        x = torch.randn(batch or 1, *(4,) * nd, in_channels, dtype=dtype).movedim(-1, 1)
        x = x[0] if batch is None else x
        yield (x if input_cl else x.contiguous()), weight_cl


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("groups, in_channels", [(1, 4), (2, 4), (2, 2)])  # (2, 2): depthwise
def test_2d_output_strides_equal_torchs(dtype, transposed, groups, in_channels):
    """Torch's output format rule, read from strides: a weight with one input channel per group
    is both contiguous and channels-last, and its strides decide; an unbatched input's never do."""
    for x, weight_cl in _format_cases(2, in_channels, dtype):
        ref, ours = _conv_pair(2, transposed, groups, in_channels, dtype, weight_cl)
        y, y_ref = ours(x), ref(x)
        assert y.stride() == y_ref.stride(), (tuple(x.shape), x.stride(), weight_cl)
        torch.testing.assert_close(y, y_ref)


def test_strides_are_read_as_torch_reads_them():
    """The format read from strides equals torch's ``suggest_memory_format`` on tensors of one
    channel or unit sizes (both contiguous and channels-last), permuted and sliced ones."""
    from torch._prims_common import suggest_memory_format

    from cplxnet.functional.conv import _strides_like_channels_last

    shapes = [(2, 1, 1, 1), (2, 1, 3, 1), (1, 3, 1, 4), (2, 3, 4, 5), (2, 1, 4, 4), (2, 3, 1, 1)]
    shapes += [(2, 1, 1, 1, 1), (2, 1, 3, 1, 1), (2, 3, 2, 4, 5), (1, 3, 1, 1, 4)]
    seen = set()
    for shape in shapes:
        x = torch.randn(shape)
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        last = tuple(range(x.dim() - 1, 0, -1))
        for t in (x, x.to(memory_format=fmt), x.permute(0, *last), x[..., ::2]):
            expected = suggest_memory_format(t) == fmt
            assert _strides_like_channels_last(t) == expected, (tuple(t.shape), t.stride())
            seen.add(expected)
    assert seen == {False, True}


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("groups, in_channels", [(1, 4), (2, 2)])
def test_3d_output_format_follows_the_rule(transposed, groups, in_channels):
    """3-D: channels-last exactly when the batched input or the weight is (torch 2.13's CPU
    kernels return contiguous outputs in some of these cases; values equal torch's)."""
    dtype = torch.complex64
    for x, weight_cl in _format_cases(3, in_channels, dtype):
        ref, ours = _conv_pair(3, transposed, groups, in_channels, dtype, weight_cl)
        y, y_ref = ours(x), ref(x)
        batched_cl = x.dim() == 5 and not x.is_contiguous()
        yb = y if y.dim() == 5 else y.unsqueeze(0)
        assert (not yb.is_contiguous()) == (batched_cl or weight_cl), (tuple(x.shape), weight_cl)
        torch.testing.assert_close(y, y_ref)


def test_norm_input_gradient_keeps_channels_last_for_a_contiguous_output_gradient():
    x = torch.randn(2, 4, 6, 6, dtype=DT).contiguous(memory_format=torch.channels_last)
    for layer in (cnn.BatchNorm2d(4, dtype=DT), cnn.GroupNorm(2, 4, dtype=DT)):
        leaf = x.detach().requires_grad_()
        y = layer(leaf)
        (g,) = torch.autograd.grad(y, leaf, torch.randn(y.shape, dtype=DT))  # contiguous
        assert g.is_contiguous(memory_format=torch.channels_last) and not g.is_contiguous()


@pytest.mark.parametrize(
    "make",
    [
        lambda: cnn.AvgPool3d(2),
        lambda: cnn.AvgPool3d(3, 1),
        lambda: cnn.AdaptiveMaxPool3d(2),
        lambda: cnn.AdaptiveAvgPool3d(3),
        lambda: _PoolUnpool(3),
    ],
)
def test_unbatched_volume_with_unit_depth_stride_is_not_read_as_a_batch(make):
    x = torch.randn(3, 4, 4, 6, dtype=DT).permute(0, 3, 1, 2)  # (C, D, H, W), depth stride 1
    layer = make()
    torch.testing.assert_close(layer(x), layer(x.contiguous()))


@pytest.mark.parametrize(
    "make",
    [
        lambda: cnn.AvgPool2d(2),
        lambda: cnn.AvgPool2d(3, 2, 1),
        lambda: cnn.AdaptiveAvgPool2d(3),
        lambda: cnn.MaxPool2d(2),
        lambda: cnn.Upsample(scale_factor=2),
        lambda: cnn.Upsample(scale_factor=2, mode="bilinear"),
    ],
)
def test_conjugate_view_of_a_channels_last_input(make):
    x = torch.randn(2, 3, 6, 6, dtype=DT).contiguous(memory_format=torch.channels_last)
    layer = make()
    torch.testing.assert_close(layer(x.conj()), layer(x.conj().resolve_conj().contiguous()))


@pytest.mark.parametrize("cls", [cnn.Conv2d, cnn.ConvTranspose2d])
def test_empty_batch_with_channels_last_weights(cls):
    layer = cls(3, 4, 2, dtype=DT).to(memory_format=torch.channels_last)
    real = getattr(torch.nn, cls.__name__)(6, 8, 2, dtype=torch.float64)
    want = real(torch.randn(0, 6, 5, 5, dtype=torch.float64)).shape
    assert layer(torch.randn(0, 3, 5, 5, dtype=DT)).shape == (0, 4, *want[2:])


def test_torch_func_grad_through_a_split_activation_on_channels_last_input():
    x = torch.randn(2, 3, 4, 4, dtype=DT).contiguous(memory_format=torch.channels_last)
    got = torch.func.grad(lambda z: cnn.CReLU()(z).abs().sum())(x)
    leaf = x.detach().requires_grad_()
    (want,) = torch.autograd.grad(cnn.CReLU()(leaf).abs().sum(), leaf)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize(
    "make",
    [lambda: cnn.BatchNorm2d(70, dtype=DT), lambda: cnn.GroupNorm(7, 70, dtype=DT)],
    ids=["BatchNorm2d", "GroupNorm"],
)
def test_whitening_norms_above_the_gram_channel_limit_keep_values_gradients_and_format(make):
    """Above ``_GRAM_MAX_CHANNELS`` the channels-last moments and 2x2 maps take the strided
    route; the same values, gradients and format as the contiguous input."""
    torch.manual_seed(0)
    layer = make()
    x = torch.randn(2, 70, 3, 4, dtype=DT)
    leaf = x.clone().requires_grad_()
    leaf_cl = x.contiguous(memory_format=torch.channels_last).requires_grad_()
    y, y_cl = layer(leaf), layer(leaf_cl)
    torch.testing.assert_close(y_cl, y)
    assert y_cl.is_contiguous(memory_format=torch.channels_last) and not y_cl.is_contiguous()
    gz = torch.randn_like(y)
    (g,) = torch.autograd.grad(y, leaf, gz)
    (g_cl,) = torch.autograd.grad(y_cl, leaf_cl, gz)
    torch.testing.assert_close(g_cl, g)


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("nd", [2, 3])
def test_a_channels_last_input_keeps_its_format_but_with_circular_padding(padding_mode, nd):
    """Every padding mode keeps a channels-last input's format but ``circular``, whose padded copy
    torch's convolution also returns contiguous. (Torch's own format for the other modes depends
    on the dtype and the rank: its float64 and complex Conv3d return contiguous outputs.)"""
    fmt = torch.channels_last if nd == 2 else torch.channels_last_3d
    name, kw = f"Conv{nd}d", {"padding": 1, "padding_mode": padding_mode}
    ref = getattr(torch.nn, name)(4, 6, 3, dtype=DT, **kw)
    ours = getattr(cnn, name)(4, 6, 3, dtype=DT, **kw)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(2, 4, *(5,) * nd, dtype=DT).contiguous(memory_format=fmt)
    y, y_ref = ours(x), ref(x)
    torch.testing.assert_close(y, y_ref)
    assert y.is_contiguous(memory_format=fmt) == (padding_mode != "circular")
    if padding_mode == "circular":
        assert y.is_contiguous() and y_ref.is_contiguous()
