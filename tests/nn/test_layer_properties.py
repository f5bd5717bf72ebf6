"""Hypothesis property tests of the core layers: symmetries the math implies.

* complex-linear maps without bias (Linear, Conv1d) and MultiheadAttention without biases (both
  scores) commute with a global phase rotation ``x -> e^{i t} x``;
* RMSNorm and modReLU (real gains / real thresholds on the modulus) commute with it too, and
  RMSNorm ignores a positive rescaling of its input;
* the split LayerNorm ignores a positive rescaling and a shift of either part;
* a convolution commutes with a shift in time (away from the borders).
"""

import cmath

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cplxnet import functional as CF
from cplxnet import nn as cnn

DT = torch.complex128
angles = st.floats(-3.14, 3.14)
seeds = st.integers(0, 2**16)
SETTINGS = settings(max_examples=25, deadline=None)


def _phase(t: float) -> complex:
    return cmath.exp(1j * t)


def _x(seed: int, *shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=DT, generator=g)


@SETTINGS
@given(seed=seeds, t=angles)
def test_linear_and_conv_without_bias_commute_with_a_global_phase(seed, t):
    torch.manual_seed(seed)
    lin = cnn.Linear(5, 3, bias=False, dtype=DT)
    conv = cnn.Conv1d(4, 2, 3, padding=1, bias=False, dtype=DT)
    x, s = _x(seed, 2, 5), _phase(t)
    torch.testing.assert_close(lin(s * x), s * lin(x))
    y = _x(seed + 1, 2, 4, 7)
    torch.testing.assert_close(conv(s * y), s * conv(y))


@SETTINGS
@given(seed=seeds, t=angles, score=st.sampled_from(["real", "modulus"]))
def test_attention_without_bias_commutes_with_a_global_phase(seed, t, score):
    """q, k, v -> e^{it} q, e^{it} k, e^{it} v leaves Re(q k^H) and |q k^T| = |e^{2it} q k^T|
    unchanged, so the weights are unchanged and the output rotates with v."""
    torch.manual_seed(seed)
    mha = cnn.MultiheadAttention(4, 2, bias=False, score=score, dtype=DT, batch_first=True).eval()
    x, s = _x(seed, 2, 5, 4), _phase(t)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    torch.testing.assert_close(
        mha(s * x, key_padding_mask=pad)[0], s * mha(x, key_padding_mask=pad)[0]
    )


@SETTINGS
@given(seed=seeds, t=angles, c=st.floats(0.01, 100.0))
def test_rms_norm_and_modrelu_commute_with_phase_and_rms_norm_ignores_scale(seed, t, c):
    torch.manual_seed(seed)
    rms = cnn.RMSNorm(6, eps=0.0, dtype=DT)
    with torch.no_grad():
        rms.weight.uniform_(0.5, 1.5)
    act = cnn.ModReLU(6, bias_init=-0.5, dtype=DT)
    x, s = _x(seed, 3, 6), _phase(t)
    torch.testing.assert_close(rms(s * x), s * rms(x))
    torch.testing.assert_close(rms(c * x), rms(x))
    torch.testing.assert_close(act(s * x), s * act(x))


@SETTINGS
@given(
    seed=seeds,
    a=st.floats(0.1, 10.0),
    b=st.floats(0.1, 10.0),
    shift=st.complex_numbers(max_magnitude=5.0, allow_nan=False, allow_infinity=False),
)
def test_split_layer_norm_ignores_per_part_scale_and_shift(seed, a, b, shift):
    ln = cnn.LayerNorm(8, eps=0.0, dtype=DT)
    x = _x(seed, 3, 8)
    moved = torch.complex(a * x.real, b * x.imag) + shift
    torch.testing.assert_close(ln(moved), ln(x))


@SETTINGS
@given(seed=seeds, shift=st.integers(1, 4))
def test_convolution_commutes_with_a_time_shift(seed, shift):
    x = _x(seed, 1, 3, 12)
    w = _x(seed + 1, 2, 3, 3)
    y = CF.conv1d(x, w)  # (1, 2, 10): y_t = sum_j w_j x_{t+j}
    shifted = CF.conv1d(x[..., shift:], w)
    torch.testing.assert_close(shifted, y[..., shift:])
