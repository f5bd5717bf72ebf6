"""Normalisation modules: references, train/eval behaviour, parameters and error messages."""

import math

import pytest
import torch
from torch import nn

from cplxnet import nn as cnn

DT = torch.complex128


def _data(*shape):
    a = torch.randn(*shape, dtype=torch.float64)
    b = 0.6 * a + 0.8 * torch.randn_like(a)
    return torch.complex(3 * a + 1, 0.5 * b - 2)


def test_layer_norm_split_equals_two_torch_layer_norms():
    ln = cnn.LayerNorm(8, dtype=DT)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 2)
        ln.bias.normal_()
    re, im = nn.LayerNorm(8, dtype=torch.float64), nn.LayerNorm(8, dtype=torch.float64)
    with torch.no_grad():
        re.weight.copy_(ln.weight[0]), re.bias.copy_(ln.bias.real)
        im.weight.copy_(ln.weight[1]), im.bias.copy_(ln.bias.imag)
    x = _data(4, 5, 8)
    torch.testing.assert_close(ln(x), torch.complex(re(x.real), im(x.imag)))


def test_layer_norm_parameter_shapes_and_dtypes():
    s = cnn.LayerNorm(6, dtype=torch.complex64)
    assert s.weight.shape == (2, 6) and s.weight.dtype == torch.float32
    assert s.bias.shape == (6,) and s.bias.dtype == torch.complex64
    w = cnn.LayerNorm((3, 6), mode="whiten", dtype=DT)
    assert w.weight.shape == (2, 2, 3, 6) and w.weight.dtype == torch.float64
    eye = torch.eye(2, dtype=torch.float64)
    torch.testing.assert_close(w.weight[:, :, 1, 2], eye / math.sqrt(2))
    assert cnn.LayerNorm(6, bias=False).bias is None
    n = cnn.LayerNorm(6, elementwise_affine=False)
    assert n.weight is None and n.bias is None and len(list(n.parameters())) == 0


def test_whiten_layer_norm_at_init_gives_identity_over_two_covariance():
    """Train-time output of the whitening LayerNorm at init: 2x2 covariance I/2 per position
    (whitened to I, then Trabelsi's I/sqrt2 scale), i.e. E|y|^2 = 1; I without the affine map."""
    x = _data(2, 4096)
    for ln, target in [
        (cnn.LayerNorm(4096, mode="whiten", eps=0.0, dtype=DT), 0.5),
        (cnn.LayerNorm(4096, mode="whiten", eps=0.0, elementwise_affine=False, dtype=DT), 1.0),
    ]:
        r = torch.view_as_real(ln(x))
        cov = torch.einsum("bni,bnj->bij", r, r) / 4096
        torch.testing.assert_close(cov, target * torch.eye(2, dtype=torch.float64).expand(2, 2, 2))


def test_real_dtype_layer_norm_is_torch_layer_norm():
    ln = cnn.LayerNorm(5, dtype=torch.float64)
    ref = nn.LayerNorm(5, dtype=torch.float64)
    x = torch.randn(3, 5, dtype=torch.float64)
    torch.testing.assert_close(ln(x), ref(x))
    with pytest.raises(ValueError, match="mode='whiten' needs a complex dtype"):
        cnn.LayerNorm(5, mode="whiten", dtype=torch.float32)


def test_batch_norm_train_whitens_and_updates_running_stats():
    bn = cnn.BatchNorm1d(3, affine=False, dtype=DT)
    x = _data(512, 3)
    y = bn(x)
    r = torch.view_as_real(y)
    cov = torch.einsum("nci,ncj->cij", r, r) / 512
    eye = torch.eye(2, dtype=torch.float64).expand(3, 2, 2)
    torch.testing.assert_close(cov, eye, atol=1e-4, rtol=0)
    assert bn.num_batches_tracked.item() == 1
    torch.testing.assert_close(bn.running_mean, 0.1 * x.mean(0))
    assert bn.running_cov.shape == (2, 2, 3)


def test_batch_norm_eval_uses_running_stats_and_untrained_eval_is_identity():
    bn = cnn.BatchNorm1d(4, dtype=DT)
    x = _data(6, 4, 5)  # (B, C, L)
    bn.eval()
    # running mean 0, cov I/2, weight I/sqrt2: identity up to eps
    torch.testing.assert_close(bn(x), x, rtol=1e-4, atol=1e-4)
    bn.train()
    for _ in range(200):  # converge running stats to the data's statistics
        bn(x)
    bn.eval()
    y_eval = bn(x)
    bn.train()
    y_train = bn(x)
    # population statistics ~ batch statistics (up to the unbiased factor n/(n-1), n = 30)
    torch.testing.assert_close(y_eval * math.sqrt(30 / 29), y_train, atol=1e-6, rtol=1e-6)
    assert bn.num_batches_tracked.item() == 201


def test_batch_norm_cumulative_average_and_no_tracking():
    bn = cnn.BatchNorm1d(2, momentum=None, dtype=DT)
    xs = [_data(8, 2) for _ in range(3)]
    for x in xs:
        bn(x)
    torch.testing.assert_close(bn.running_mean, torch.stack([x.mean(0) for x in xs]).mean(0))
    free = cnn.BatchNorm1d(2, track_running_stats=False, dtype=DT).eval()
    assert free.running_mean is None
    x = _data(8, 2)
    torch.testing.assert_close(free(x), free.train()(x))


def _bn_ref(x, mean, cov, weight, bias, eps):
    """Plain per-channel whitening of ``x (B, C[, L])``: ``W (V + eps I)^{-1/2} (x - mean) + b``
    with the 2x2 covariance ``V`` of (real, imaginary), ``cov (2, 2, C)``, inverted through its
    eigendecomposition; ``W (2, 2, C)`` real, ``b (C,)`` complex."""
    r = torch.view_as_real(x.movedim(1, -1) - mean)  # (..., C, 2)
    evals, evecs = torch.linalg.eigh(cov.permute(2, 0, 1) + eps * torch.eye(2, dtype=cov.dtype))
    inv_sqrt = evecs @ torch.diag_embed(evals**-0.5) @ evecs.transpose(-1, -2)  # (C, 2, 2)
    w = torch.einsum("cij,...cj->...ci", weight.permute(2, 0, 1) @ inv_sqrt, r)
    return (torch.view_as_complex(w.contiguous()) + bias).movedim(-1, 1)


def _batch_cov(x, unbiased):
    """Mean ``(C,)`` and 2x2 covariance ``(2, 2, C)`` of each channel of ``x (B, C[, L])``."""
    z = x.movedim(1, -1).reshape(-1, x.shape[1])  # (n, C)
    r = torch.view_as_real(z - z.mean(0))  # (n, C, 2)
    cov = torch.einsum("nci,ncj->ijc", r, r) / (z.shape[0] - (1 if unbiased else 0))
    return z.mean(0), cov


@pytest.mark.parametrize("shape", [(16, 1), (5, 1, 4)], ids=["BC", "BCL"])
def test_batch_norm_single_channel_values(shape):
    """One channel: training output, running statistics and evaluation output equal the plain
    formula, and the same channel of a three-channel layer with the same parameters."""
    torch.manual_seed(0)
    bn = cnn.BatchNorm1d(1, dtype=DT)
    with torch.no_grad():
        bn.weight.copy_(torch.randn(2, 2, 1, dtype=torch.float64))
        bn.bias.normal_()
    x = _data(*shape)
    mean, cov = _batch_cov(x, unbiased=False)
    y = bn(x)
    torch.testing.assert_close(y, _bn_ref(x, mean, cov, bn.weight, bn.bias, bn.eps))
    mean_u, cov_u = _batch_cov(x, unbiased=True)
    torch.testing.assert_close(bn.running_mean, 0.1 * mean_u)
    eye = torch.eye(2, dtype=torch.float64).unsqueeze(-1)
    torch.testing.assert_close(bn.running_cov, 0.9 * 0.5 * eye + 0.1 * cov_u)
    wide = cnn.BatchNorm1d(3, dtype=DT)
    with torch.no_grad():
        wide.weight[..., 1:2].copy_(bn.weight)
        wide.bias[1:2].copy_(bn.bias)
    x3 = torch.cat((_data(*shape), x, _data(*shape)), dim=1)
    torch.testing.assert_close(wide(x3)[:, 1:2], y)
    bn.eval()
    z = _data(*shape)
    want = _bn_ref(z, bn.running_mean, bn.running_cov, bn.weight, bn.bias, bn.eps)
    torch.testing.assert_close(bn(z), want)


def test_rms_norm_module():
    rn = cnn.RMSNorm(6, eps=1e-6, dtype=DT)
    assert rn.weight.dtype == torch.float64 and not rn.weight.is_complex()
    with torch.no_grad():
        rn.weight.uniform_(0.5, 1.5)
    x = _data(3, 6)
    ref = x / torch.sqrt((x.abs() ** 2).mean(-1, keepdim=True) + 1e-6) * rn.weight
    torch.testing.assert_close(rn(x), ref)
    real = cnn.RMSNorm(6, dtype=torch.float64)
    xr = torch.randn(2, 6, dtype=torch.float64)
    torch.testing.assert_close(real(xr), nn.RMSNorm(6, dtype=torch.float64)(xr))


def test_error_messages():
    ln = cnn.LayerNorm(4, dtype=DT)
    with pytest.raises(ValueError, match="unknown mode 'pca'; valid modes are 'split', 'whiten'"):
        cnn.LayerNorm(4, mode="pca")
    with pytest.raises(TypeError, match="LayerNorm: input must be a complex tensor"):
        ln(torch.randn(2, 4, dtype=torch.float64))
    msg = "LayerNorm: input has dtype torch.complex64 but the module's parameters are "
    msg += "torch.complex128"
    with pytest.raises(TypeError, match=msg):
        ln(torch.randn(2, 4, dtype=torch.complex64))
    with pytest.raises(ValueError, match=r"normalized_shape=\(4,\), got shape \(2, 5\)"):
        ln(torch.randn(2, 5, dtype=DT))
    bn = cnn.BatchNorm1d(3, dtype=DT)
    with pytest.raises(ValueError, match=r"BatchNorm1d: expected input \(B, 3\) or \(B, 3, L\)"):
        bn(torch.randn(2, 4, dtype=DT))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        bn(torch.randn(1, 3, dtype=DT))
    with pytest.raises(TypeError, match="BatchNorm1d: dtype must be complex"):
        cnn.BatchNorm1d(3, dtype=torch.int32)  # a real float dtype is torch's (real_dtype_dropin)
    with pytest.raises(ValueError, match="BatchNorm1d: num_features must be a positive integer"):
        cnn.BatchNorm1d(-1)
    with pytest.raises(ValueError, match="normalized_shape must be non-empty with positive sizes"):
        cnn.RMSNorm(0)
