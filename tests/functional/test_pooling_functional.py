"""Masked pooling honours the padding mask; max-magnitude picks (and back-propagates to) the
entry with the largest modulus."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from cplxnet import functional as CF

DT = torch.complex128


def _mask(lengths, length):
    """True = padding, padding at the end."""
    return torch.arange(length)[None, :] >= torch.tensor(lengths)[:, None]


def test_masked_mean_equals_mean_over_valid_positions():
    x = torch.randn(3, 6, 4, dtype=DT)
    lengths = [6, 2, 4]
    out = CF.masked_mean(x, _mask(lengths, 6))
    for b, n in enumerate(lengths):
        torch.testing.assert_close(out[b], x[b, :n].mean(0))


def test_padded_values_change_nothing_even_inf_or_nan():
    x = torch.randn(3, 6, 4, dtype=DT)
    mask = _mask([6, 2, 4], 6)
    y = x.clone()
    y[mask] = complex(float("inf"), float("nan"))
    for fn in (CF.masked_mean, CF.masked_max_magnitude):
        torch.testing.assert_close(fn(y, mask), fn(x, mask))
    z = x.clone()
    z[mask] = 1e6 + 1e6j  # larger modulus than any valid entry: must not be picked
    torch.testing.assert_close(CF.masked_max_magnitude(z, mask), CF.masked_max_magnitude(x, mask))


def test_masked_mean_gradient_is_zero_on_padding():
    x = torch.randn(2, 5, 3, dtype=DT, requires_grad=True)
    mask = _mask([5, 3], 5)
    torch.view_as_real(CF.masked_mean(x, mask)).sum().backward()
    assert torch.all(x.grad[mask] == 0)
    torch.testing.assert_close(x.grad[1, :3], torch.full((3, 3), (1 + 1j) / 3, dtype=DT))


def test_all_padding_pools_to_zeros():
    x = torch.randn(2, 4, 3, dtype=DT)
    mask = _mask([0, 4], 4)
    assert torch.all(CF.masked_mean(x, mask)[0] == 0)
    assert torch.all(CF.masked_max_magnitude(x, mask)[0] == 0)


@pytest.mark.parametrize("dtype", [DT, torch.float64])
def test_empty_batch_pools_to_an_empty_batch(dtype):
    x = torch.randn(0, 4, 2, 3, dtype=dtype)
    mask = torch.zeros(0, 4, dtype=torch.bool)
    for fn in (CF.masked_mean, CF.masked_max_magnitude):
        out = fn(x, mask)
        assert out.shape == (0, 2, 3) and out.dtype == dtype


def test_max_magnitude_returns_the_entry_with_largest_modulus():
    x = torch.randn(4, 7, 5, dtype=DT)
    mask = _mask([7, 1, 3, 5], 7)
    out = CF.masked_max_magnitude(x, mask)
    for b, n in enumerate([7, 1, 3, 5]):
        idx = x[b, :n].abs().argmax(0)  # (5,)
        torch.testing.assert_close(out[b], x[b, idx, torch.arange(5)])


def test_max_magnitude_gradient_flows_to_selected_entry_only():
    x = torch.randn(2, 6, 3, dtype=DT, requires_grad=True)
    mask = _mask([6, 4], 6)
    out = CF.masked_max_magnitude(x, mask)
    torch.view_as_real(out).sum().backward()
    sel = torch.zeros(2, 6, 3, dtype=torch.bool)
    for b, n in enumerate([6, 4]):
        sel[b, x[b, :n].abs().argmax(0), torch.arange(3)] = True
    assert torch.all(x.grad[sel] == 1 + 1j)
    assert torch.all(x.grad[~sel] == 0)


def test_max_over_time_for_conv_output_and_dim_argument():
    x = torch.randn(2, 4, 9, dtype=DT)  # (B, C, L)
    ref = torch.gather(x, -1, (x.abs()).argmax(-1, keepdim=True)).squeeze(-1)
    torch.testing.assert_close(CF.max_magnitude(x), ref)
    mask = _mask([9, 5], 9)
    torch.testing.assert_close(CF.masked_mean(x, mask, dim=-1)[1], x[1, :, :5].mean(-1))
    torch.testing.assert_close(
        CF.masked_max_magnitude(x, mask, dim=-1), CF.masked_max_magnitude(x.transpose(1, 2), mask)
    )


def test_real_inputs_pool_too():
    x = torch.tensor([[[1.0], [-3.0], [2.0]]], dtype=torch.float64)
    mask = torch.tensor([[False, False, True]])
    assert CF.masked_max_magnitude(x, mask).item() == -3.0
    assert CF.masked_mean(x, mask).item() == -1.0


@pytest.mark.parametrize("fn", [CF.masked_mean, CF.masked_max_magnitude])
def test_gradcheck(fn):
    x = torch.randn(2, 5, 3, dtype=DT, requires_grad=True)
    mask = _mask([5, 2], 5)
    assert torch.autograd.gradcheck(lambda t: fn(t, mask), (x,))


@settings(max_examples=25, deadline=None)
@given(
    lengths=st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_property_mean_ignores_padding_and_matches_loop(lengths, seed):
    g = torch.Generator().manual_seed(seed)
    B, L = len(lengths), 6
    x = torch.randn(B, L, 3, dtype=DT, generator=g)
    mask = _mask(lengths, L)
    noise = torch.randn(B, L, 3, dtype=DT, generator=g) * 100
    out = CF.masked_mean(x, mask)
    torch.testing.assert_close(CF.masked_mean(torch.where(mask[..., None], noise, x), mask), out)
    for b, n in enumerate(lengths):
        expected = x[b, :n].mean(0) if n else torch.zeros(3, dtype=DT)
        torch.testing.assert_close(out[b], expected)


def test_a_window_entirely_in_the_padding_is_one_error_exactly_where_torch_gives_inf():
    """torch's real max pool gives -inf (and an index outside the input) for a window that
    lies entirely in the padding (dilation, ceil_mode); the complex pool names that window
    instead, and runs every other configuration torch accepts."""
    import itertools

    refused = 0
    for n, k, s, p, d, c in itertools.product(
        range(1, 6), range(1, 4), range(1, 4), range(0, 2), range(1, 4), (False, True)
    ):
        real = torch.rand(1, 2, n) + 1
        try:
            want = F.max_pool1d(real, k, s, p, d, c)
        except RuntimeError:
            continue
        z = torch.complex(real, torch.zeros_like(real))
        if torch.isinf(want).any():
            refused += 1
            with pytest.raises(ValueError, match="lies entirely in the padding"):
                CF.max_pool1d(z, k, s, p, d, c)
        else:
            torch.testing.assert_close(CF.max_pool1d(z, k, s, p, d, c).real, want)
    assert refused > 10


# masked_max_magnitude never selects a padded entry, also when every real entry of a row is an
# exact zero and the padding comes first (left padding): the tie between a real zero and a
# padded entry must go to the real one (the padded score must rank below 0).
@pytest.mark.parametrize("dtype", [torch.complex128, torch.float64])
def test_left_padding_before_zero_entries_is_never_selected(dtype):
    x = torch.zeros(2, 4, 3, dtype=dtype)
    mask = torch.tensor([[True, True, False, False], [True, False, False, False]])
    x[mask] = 5.0  # padding with a large modulus, before the (zero) real entries
    x = x.requires_grad_()
    out = CF.masked_max_magnitude(x, mask)
    assert torch.all(out == 0)
    (torch.view_as_real(out) if out.is_complex() else out).sum().backward()
    assert torch.all(x.grad[mask] == 0)  # no gradient reaches the padding


def test_left_padding_tie_goes_to_the_real_entry_per_feature():
    x = torch.zeros(1, 3, 2, dtype=torch.complex128)
    x[0, 0] = 3 - 4j  # padding
    x[0, 2, 1] = 1j  # one real entry that is not zero, in the second feature
    mask = torch.tensor([[True, False, False]])
    out = CF.masked_max_magnitude(x, mask)
    torch.testing.assert_close(out, torch.tensor([[0, 1j]], dtype=torch.complex128))
