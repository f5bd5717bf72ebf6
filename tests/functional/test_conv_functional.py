"""Complex convolution equals four real convolutions."""

import re

import pytest
import torch
import torch.nn.functional as F

from cplxnet import functional as CF

DT = torch.complex128


def _four_real(conv, x, w, b, **kw):
    A, B = w.real, w.imag
    re = conv(x.real, A, None, **kw) - conv(x.imag, B, None, **kw)
    im = conv(x.real, B, None, **kw) + conv(x.imag, A, None, **kw)
    out = torch.complex(re, im)
    if b is not None:
        out = out + b.reshape(-1, *([1] * (x.dim() - 2)))
    return out


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"stride": 2, "padding": 1},
        {"dilation": 2, "padding": "same"},
        {"groups": 2, "padding": 2},
    ],
)
def test_conv1d_equals_four_real_convolutions(kw):
    x = torch.randn(3, 4, 11, dtype=DT)
    w = torch.randn(6, 4 // kw.get("groups", 1), 3, dtype=DT)
    b = torch.randn(6, dtype=DT)
    torch.testing.assert_close(CF.conv1d(x, w, b, **kw), _four_real(F.conv1d, x, w, b, **kw))


def test_conv2d_equals_four_real_convolutions():
    x = torch.randn(2, 3, 7, 6, dtype=DT)
    w = torch.randn(5, 3, 3, 2, dtype=DT)
    b = torch.randn(5, dtype=DT)
    kw = {"stride": (1, 2), "padding": (1, 0)}
    torch.testing.assert_close(CF.conv2d(x, w, b, **kw), _four_real(F.conv2d, x, w, b, **kw))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_padding_modes_match_padding_each_part(mode):
    x = torch.randn(2, 3, 8, dtype=DT)
    w = torch.randn(4, 3, 3, dtype=DT)
    xp = torch.complex(F.pad(x.real, (2, 2), mode=mode), F.pad(x.imag, (2, 2), mode=mode))
    ref = _four_real(F.conv1d, xp, w, None)
    torch.testing.assert_close(CF.conv1d(x, w, None, padding=2, padding_mode=mode), ref)


def test_gradcheck():
    x = torch.randn(2, 2, 5, dtype=DT, requires_grad=True)
    w = torch.randn(3, 2, 3, dtype=DT, requires_grad=True)
    b = torch.randn(3, dtype=DT, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *t: CF.conv1d(*t, padding=1), (x, w, b))


def test_conv2d_groups_and_unbatched_match_four_real_convolutions():
    x = torch.randn(2, 4, 5, 6, dtype=DT)
    w = torch.randn(6, 2, 3, 3, dtype=DT)
    b = torch.randn(6, dtype=DT)
    kw = {"groups": 2, "padding": 1, "dilation": (1, 2)}
    torch.testing.assert_close(CF.conv2d(x, w, b, **kw), _four_real(F.conv2d, x, w, b, **kw))
    torch.testing.assert_close(CF.conv2d(x[0], w, b, **kw), _four_real(F.conv2d, x, w, b, **kw)[0])


def test_block_formulation_matches_torch_native_complex_conv_gradients():
    x = torch.randn(2, 4, 9, dtype=DT, requires_grad=True)
    w = torch.randn(6, 2, 3, dtype=DT, requires_grad=True)
    b = torch.randn(6, dtype=DT, requires_grad=True)
    g = torch.randn(2, 6, 9, dtype=DT)
    ours = torch.autograd.grad(CF.conv1d(x, w, b, padding=1, groups=2), (x, w, b), g)
    native = torch.autograd.grad(F.conv1d(x, w, b, padding=1, groups=2), (x, w, b), g)
    for a, n in zip(ours, native):
        torch.testing.assert_close(a, n)


# ------------------------------------------------------------------------------------------------
# channels-last inputs: the real view is the convolution's input, no copy of the data
# ------------------------------------------------------------------------------------------------
_CL_CASES = [
    (CF.conv2d, F.conv2d, 2, {"stride": 2, "padding": 1}, False),
    (CF.conv2d, F.conv2d, 2, {"groups": 2, "dilation": 2, "padding": 2}, False),
    (CF.conv3d, F.conv3d, 3, {"padding": 1}, False),
    (CF.conv_transpose2d, F.conv_transpose2d, 2, {"stride": 2, "output_padding": 1}, True),
    (CF.conv_transpose2d, F.conv_transpose2d, 2, {"groups": 2, "padding": 1}, True),
    (CF.conv_transpose3d, F.conv_transpose3d, 3, {"stride": 2}, True),
]


def _cl_case(nd, kw, transposed, dtype=DT):
    g = kw.get("groups", 1)
    x = torch.randn(2, 4, *(5,) * nd, dtype=dtype)
    w = torch.randn(*((4, 6 // g) if transposed else (6, 4 // g)), *(3,) * nd, dtype=dtype)
    fmt = torch.channels_last if nd == 2 else torch.channels_last_3d
    return x, w, torch.randn(6, dtype=dtype), fmt


@pytest.mark.parametrize("fn, real, nd, kw, transposed", _CL_CASES)
def test_channels_last_input_equals_the_contiguous_one_and_stays_channels_last(
    fn, real, nd, kw, transposed
):
    x, w, b, fmt = _cl_case(nd, kw, transposed)
    xc = x.contiguous(memory_format=fmt)
    assert not xc.is_contiguous()
    got = fn(xc, w, b, **kw)
    torch.testing.assert_close(got, _four_real(real, x, w, b, **kw))
    assert got.is_contiguous(memory_format=fmt)
    args = [xc.detach().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()]
    assert torch.autograd.gradcheck(lambda x, w, b: fn(x, w, b, **kw), args, fast_mode=True)
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    gz = torch.randn_like(got)
    ref = torch.autograd.grad(_four_real(real, *leaves, **kw), leaves, gz)
    out = torch.autograd.grad(fn(*args, **kw), args, gz)
    for o, r in zip(out, ref):
        torch.testing.assert_close(o, r)


class _CountCopies(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts the ops that write a tensor of at least ``numel`` elements by copying one."""

    COPIES = {
        torch.ops.aten.copy_.default,
        torch.ops.aten.clone.default,
        torch.ops.aten._to_copy.default,
    }

    def __init__(self, numel):
        super().__init__()
        self.numel, self.copies = numel, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in self.COPIES and any(
            isinstance(a, torch.Tensor) and a.numel() >= self.numel for a in args
        ):
            self.copies.append(func)
        return out


@pytest.mark.parametrize("fn, real, nd, kw, transposed", _CL_CASES)
def test_channels_last_input_is_not_copied(fn, real, nd, kw, transposed):
    x, w, b, fmt = _cl_case(nd, kw, transposed, dtype=torch.complex64)
    xc = x.contiguous(memory_format=fmt)
    with _CountCopies(x.numel()) as mode:
        fn(xc, w, b, **kw)
    assert mode.copies == []
    with _CountCopies(x.numel()) as mode:  # the contiguous input: planar copies in and out
        fn(x, w, b, **kw)
    assert mode.copies


CONJ_CASES = [
    (CF.conv1d, 1, {}),
    (CF.conv2d, 2, {"groups": 2, "padding": 1}),
    (CF.conv3d, 3, {"stride": 2}),
    (CF.conv_transpose1d, 1, {"stride": 2}),
    (CF.conv_transpose2d, 2, {"stride": 2, "padding": 1}),
    (CF.conv_transpose2d, 2, {"stride": 2}),  # the non-overlapping (GEMM) path
    (CF.conv_transpose3d, 3, {"stride": 2, "groups": 2}),
]


@pytest.mark.parametrize(("fn", "nd", "kw"), CONJ_CASES)
def test_conjugate_views_of_input_weight_and_bias_equal_their_resolved_copies(fn, nd, kw):
    """Lazily conjugated ``x.conj()``, ``w.conj()``, ``b.conj()`` (an adjoint operator's
    arguments), as torch's own complex convolutions take them: values and gradients."""
    torch.manual_seed(0)
    x = torch.randn(2, 4, *[5] * nd, dtype=DT)  # 4 channels in and out, either direction
    w = torch.randn(4, 4 // kw.get("groups", 1), *[2] * nd, dtype=DT)
    b = torch.randn(4, dtype=DT)
    leaves = [t.requires_grad_() for t in (x, w, b)]
    lazy = fn(*(t.conj() for t in leaves), **kw)
    grads = torch.autograd.grad(lazy.abs().sum(), leaves)
    plain = fn(*(t.conj().resolve_conj() for t in leaves), **kw)
    torch.testing.assert_close(lazy, plain)
    for g, h in zip(grads, torch.autograd.grad(plain.abs().sum(), leaves)):
        torch.testing.assert_close(g, h)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("transposed", [False, True])
def test_bad_operands_are_torchs_errors_in_complex_sizes(nd, transposed):
    """A weight or bias of another dtype, an input of the wrong rank or channel count: one
    RuntimeError naming the complex sizes (the real kernels see twice the channels), as torch's
    complex convolutions word it, never an error from the internal real view."""
    fn = getattr(CF, f"conv_transpose{nd}d" if transposed else f"conv{nd}d")
    name = fn.__name__
    x = torch.randn(2, 4, *[5] * nd, dtype=torch.complex64)
    shape = (4, 3, *[3] * nd) if transposed else (3, 4, *[3] * nd)
    w = torch.randn(shape, dtype=torch.complex64)
    bias = torch.zeros(3, dtype=torch.complex64)
    cases = [
        ((x, w.real), "weight is torch.float32; give both one complex dtype"),
        ((x, w.to(torch.complex128)), "weight is torch.complex128"),
        ((x, w, bias.real), "bias is torch.float32"),
        ((x[:, :3], w), "expected input [2, 3, " if not transposed else "to have 4 channels"),
        ((x[:, :3], w), "but got 3 channels instead"),
        ((x[0, 0, 0], w), f"expected {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input"),
        ((x, w, bias[:2]), "expected bias to be 1-D with 3 elements, but got bias of size [2]"),
    ]
    for args, match in cases:
        with pytest.raises(RuntimeError, match=re.escape(f"{name}: ")) as info:
            fn(*args)
        assert match in str(info.value)
    assert fn(x, w, bias).shape[:2] == (2, 3)  # the good operands still run
