"""cplxnet._utils: pack/unpack/as_complex (property tests over shapes and strides), dtype helpers
and the input checks shared by every module."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cplxnet._utils import (
    as_complex,
    check_mask,
    check_sizes,
    complex_dtype,
    pack,
    real_dtype,
    resolve_dtype,
    unpack,
)

shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3)


@settings(max_examples=40, deadline=None)
@given(shape=shapes, d=st.integers(1, 5), transpose=st.booleans(), offset=st.booleans())
def test_pack_is_the_interleaved_real_view_and_unpack_inverts_it(shape, d, transpose, offset):
    z = torch.randn(*shape, d + int(offset), dtype=torch.complex128)
    if offset:  # a view starting one complex entry into the storage
        z = z[..., 1:]
    if transpose and z.dim() > 2:
        z = z.transpose(0, 1)
    p = pack(z)
    assert p.shape == (*z.shape[:-1], 2 * d) and p.dtype == torch.float64
    torch.testing.assert_close(p[..., 0::2], z.real, rtol=0, atol=0)
    torch.testing.assert_close(p[..., 1::2], z.imag, rtol=0, atol=0)
    assert p.data_ptr() == torch.view_as_real(z).data_ptr()  # zero-copy
    back = unpack(p, z)
    assert back.dtype == z.dtype and torch.equal(back, z)
    assert back.data_ptr() == z.data_ptr()  # a packed view comes back as a view, never a copy


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 6), d=st.integers(1, 6))
def test_packed_dot_product_is_real_part_of_hermitian_product(n, d):
    a = torch.randn(n, d, dtype=torch.complex128)
    b = torch.randn(n, d, dtype=torch.complex128)
    torch.testing.assert_close(pack(a) @ pack(b).T, (a @ b.conj().T).real)


def test_real_tensors_pass_through_pack_and_unpack():
    x = torch.randn(3, 4)
    assert pack(x) is x and unpack(x, x) is x


def test_as_complex_copies_only_when_the_strides_forbid_a_view():
    r = torch.randn(3, 4, 2)
    assert as_complex(r).data_ptr() == r.data_ptr()
    moved = torch.randn(5, 3, 2).transpose(0, 1)  # not contiguous, but still viewable
    assert not moved.is_contiguous() and as_complex(moved).data_ptr() == moved.data_ptr()
    strided = torch.randn(2, 3, 4).transpose(0, 2)[..., :2]  # last-dim stride != 1
    out = as_complex(strided)
    torch.testing.assert_close(torch.view_as_real(out), strided)


def test_as_complex_of_empty_and_size_one_tensors_with_odd_strides():
    """``contiguous()`` keeps the odd strides of an empty tensor (it counts as contiguous), which
    ``view_as_complex`` rejects: the copy must have canonical strides (an empty batch through
    the split layer norm failed here)."""
    y = torch.zeros(0, 5, 2, 8, requires_grad=True).movedim(-2, -1)  # (0, 5, 8, 2)
    assert y.stride(-1) != 1
    z = as_complex(y)
    assert z.shape == (0, 5, 8) and z.requires_grad


def test_dtype_helpers():
    assert complex_dtype(torch.float64) is torch.complex128
    assert complex_dtype(torch.complex64) is torch.complex64
    assert real_dtype(torch.complex128) is torch.float64
    assert real_dtype(torch.float32) is torch.float32
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert resolve_dtype(None, "M") is torch.complex128
    finally:
        torch.set_default_dtype(old)
    assert resolve_dtype(torch.float32, "M", allow_real=True) is torch.float32
    with pytest.raises(TypeError, match="M: dtype must be complex"):
        resolve_dtype(torch.float32, "M")
    with pytest.raises(TypeError, match="no complex dtype corresponds to torch.int64"):
        complex_dtype(torch.int64)


def test_check_sizes_and_check_mask():
    check_sizes("M", a=1, b=7)
    for bad in (0, -2, 2.0, True, None):
        with pytest.raises(ValueError, match=f"M: b must be a positive integer, got {bad!r}"):
            check_sizes("M", a=1, b=bad)
    check_mask(None, (2, 3), "M")
    check_mask(torch.zeros(2, 3, dtype=torch.bool), (2, 3), "M")
    with pytest.raises(TypeError, match="M: mask must be a torch.bool tensor, got torch.int64"):
        check_mask(torch.zeros(2, 3, dtype=torch.long), (2, 3), "M")
    with pytest.raises(ValueError, match=r"M: pad must have shape \(2, 3\), got \(3, 2\)"):
        check_mask(torch.zeros(3, 2, dtype=torch.bool), (2, 3), "M", "pad")


def test_real_view_backward_keeps_a_strided_gradient_a_view():
    from cplxnet._utils import real_view

    z = torch.randn(2, 3, 4, 5, dtype=torch.complex128)
    z = z.contiguous(memory_format=torch.channels_last).requires_grad_()
    g = torch.randn(2, 3, 4, 5, 2, dtype=torch.float64)
    g_cl = torch.view_as_real(
        torch.view_as_complex(g).contiguous(memory_format=torch.channels_last)
    )
    (got,) = torch.autograd.grad(real_view(z), z, g_cl)
    (want,) = torch.autograd.grad(torch.view_as_real(z), z, g_cl)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert got.is_contiguous(memory_format=torch.channels_last)  # torch's own: contiguous copy
    assert not want.is_contiguous(memory_format=torch.channels_last)
    assert torch.autograd.gradcheck(lambda z: real_view(z).square(), (z,))
    assert torch.autograd.gradgradcheck(lambda z: real_view(z).square(), (z,))


def test_an_unknown_choice_lists_the_valid_ones_in_plain_english():
    from cplxnet._utils import check_choice

    for what, plural in (("mode", "modes"), ("frequency", "frequencies"), ("bias", "biases"),
                         ("key", "keys"), ("padding_mode", "padding_modes")):  # fmt: skip
        with pytest.raises(ValueError, match=f"^X: unknown {what} 'z'; valid {plural} are 'a'"):
            check_choice("z", ("a", "b"), "X", what)
    assert check_choice("b", ("a", "b"), "X") == "b"


def test_a_function_output_that_views_its_input_is_copied_and_others_are_not():
    """:func:`cplxnet._utils.function_output`: a view of a tensor made in the forward is
    detached (same memory, no copy); a view of an input is copied, so an in-place op on the
    output leaves the input alone."""
    from cplxnet._utils import function_output

    class Reshaped(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, fresh):
            ctx.scale = 2 if fresh else 1
            return function_output((x * ctx.scale).reshape(-1) if fresh else x.reshape(-1), x)

        @staticmethod
        def backward(ctx, g):
            return g.reshape(2, 3) * ctx.scale, None

    for fresh in (False, True):
        leaf = torch.arange(6.0).reshape(2, 3).requires_grad_()
        x = leaf * 1
        y = Reshaped.apply(x, fresh)
        y += 1  # refused by autograd for a Function's view output
        assert torch.equal(x, torch.arange(6.0).reshape(2, 3))  # the input is unchanged
        assert y._base is None
        y.sum().backward()
        assert torch.equal(leaf.grad, torch.full((2, 3), 2.0 if fresh else 1.0))
    plain = torch.ones(3)
    assert function_output(plain) is plain
    internal = torch.ones(4)
    view = internal[:2]
    assert function_output(view).data_ptr() == view.data_ptr()  # detached, not copied


def test_an_output_in_the_input_s_memory_leaves_the_input_alone_under_inference_mode():
    """``Upsample(scale_factor=1)`` returns its input's values: an in-place op on the output
    never changes the input, with gradients on and under ``torch.inference_mode`` (which records
    no views)."""
    import cplxnet.nn as cnn

    x = torch.randn(1, 2, 4, dtype=torch.complex64)
    with torch.inference_mode():
        inner = x.clone()
        cnn.Upsample(scale_factor=1)(inner).add_(1)
        assert torch.equal(inner, x)
    leaf = x.clone().requires_grad_()
    out = cnn.Upsample(scale_factor=1)(leaf)
    out.add_(1)
    out.abs().sum().backward()
    assert torch.equal(leaf.detach(), x) and leaf.grad is not None
