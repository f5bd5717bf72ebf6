"""Complex normalisation functions against plain (eigendecomposition-based) references."""

import complextorch.nn as ctnn
import complextorch.nn.functional as cvF
import pytest
import torch
import torch.nn.functional as F

from cplxnet import functional as CF
from cplxnet import nn as cnn

DT = torch.complex128


def _correlated(*shape, rho=0.8, scale=(2.0, 0.5), shift=1 - 2j):
    """Non-circular complex data: correlated, unequal-variance real and imaginary parts."""
    a = torch.randn(*shape, dtype=torch.float64)
    b = rho * a + (1 - rho**2) ** 0.5 * torch.randn_like(a)
    return torch.complex(scale[0] * a, scale[1] * b) + shift


def _inv_sqrt_2x2(cov):
    """(..., 2, 2) SPD -> inverse matrix square root by eigendecomposition."""
    lam, u = torch.linalg.eigh(cov)
    return u @ torch.diag_embed(lam.rsqrt()) @ u.mT


def _whiten_ref(x, dims, eps):
    """Reference whitening: per group, centre, 2x2 covariance + eps I, multiply by V^{-1/2}."""
    dims = tuple(d % x.dim() for d in dims)  # positive: unaffected by trailing (2,) / (2, 2)
    r = torch.view_as_real(x)  # (..., 2)
    mean = r.mean(dim=dims, keepdim=True)
    c = r - mean
    cov = (c.unsqueeze(-1) * c.unsqueeze(-2)).mean(dim=dims, keepdim=True)  # (..., 2, 2)
    cov = cov + eps * torch.eye(2, dtype=cov.dtype)
    w = (_inv_sqrt_2x2(cov) @ c.unsqueeze(-1)).squeeze(-1)
    return w


def _affine_ref(w, weight, bias):
    """w (..., F, 2) real; weight (2, 2, F); bias complex (F,)."""
    g = weight.permute(2, 0, 1)  # (F, 2, 2)
    y = (g @ w.unsqueeze(-1)).squeeze(-1) + torch.view_as_real(bias)
    return torch.view_as_complex(y.contiguous())


def test_split_layer_norm_equals_two_real_layer_norms():
    x = _correlated(4, 7, 12)
    w = torch.randn(2, 12, dtype=torch.float64)
    b = torch.randn(12, dtype=DT)
    ref = torch.complex(
        F.layer_norm(x.real, (12,), w[0], b.real), F.layer_norm(x.imag, (12,), w[1], b.imag)
    )
    torch.testing.assert_close(CF.layer_norm(x, (12,), w, b, 1e-5, mode="split"), ref)


def test_split_layer_norm_multi_dim_shape():
    x = _correlated(3, 4, 5)
    w = torch.randn(2, 4, 5, dtype=torch.float64)
    b = torch.randn(4, 5, dtype=DT)
    ref = torch.complex(
        F.layer_norm(x.real, (4, 5), w[0], b.real), F.layer_norm(x.imag, (4, 5), w[1], b.imag)
    )
    torch.testing.assert_close(CF.layer_norm(x, (4, 5), w, b, mode="split"), ref)


def test_whiten_layer_norm_matches_eigendecomposition_reference():
    x = _correlated(5, 6, 16)
    weight = torch.randn(2, 2, 16, dtype=torch.float64)
    bias = torch.randn(16, dtype=DT)
    ref = _affine_ref(_whiten_ref(x, (-1,), 1e-5), weight, bias)
    torch.testing.assert_close(CF.layer_norm(x, (16,), weight, bias, 1e-5, mode="whiten"), ref)
    # without affine: the whitened data itself
    ref0 = torch.view_as_complex(_whiten_ref(x, (-1,), 1e-5).contiguous())
    torch.testing.assert_close(CF.layer_norm(x, (16,), None, None, 1e-5, mode="whiten"), ref0)


def test_whiten_output_has_identity_covariance():
    x = _correlated(3, 4096)
    y = CF.layer_norm(x, (4096,), mode="whiten", eps=0.0)
    r = torch.view_as_real(y)
    cov = torch.einsum("bni,bnj->bij", r, r) / 4096
    torch.testing.assert_close(cov, torch.eye(2, dtype=torch.float64).expand(3, 2, 2))
    torch.testing.assert_close(r.mean(1), torch.zeros(3, 2, dtype=torch.float64))


def test_complextorch_whitening_layer_norm_agrees():
    """complextorch's functional layer_norm computes the same whitening (we keep ours for the
    factory kwargs/checks and because it is not faster; see benchmarks/layers.py)."""
    x = _correlated(4, 5, 8)
    weight = torch.randn(2, 2, 8, dtype=torch.float64)
    bias = torch.randn(8, dtype=DT)
    ct = cvF.layer_norm(x, (8,), weight, torch.view_as_real(bias).T.contiguous(), 1e-5)
    torch.testing.assert_close(CF.layer_norm(x, (8,), weight, bias, 1e-5, mode="whiten"), ct)


def test_batch_norm_training_matches_reference_and_updates_running_stats():
    x = _correlated(16, 3, 5)  # (B, C, L)
    weight = torch.randn(2, 2, 3, dtype=torch.float64)
    bias = torch.randn(3, dtype=DT)
    rm = torch.zeros(3, dtype=DT)
    rc = 0.5 * torch.eye(2, dtype=torch.float64).unsqueeze(-1).repeat(1, 1, 3)
    y = CF.batch_norm(x, rm, rc, weight, bias, training=True, momentum=0.1, eps=1e-5)
    xc = x.transpose(1, 2).reshape(-1, 3)  # (B*L, C)
    ref = _affine_ref(_whiten_ref(xc, (0,), 1e-5), weight, bias)
    torch.testing.assert_close(y, ref.reshape(16, 5, 3).transpose(1, 2))
    n = xc.shape[0]
    r = torch.view_as_real(xc)
    c = r - r.mean(0)
    cov_unbiased = torch.einsum("nci,ncj->ijc", c, c) / (n - 1)
    torch.testing.assert_close(rm, 0.1 * xc.mean(0))
    eye_half = 0.5 * torch.eye(2, dtype=torch.float64).unsqueeze(-1)
    torch.testing.assert_close(rc, 0.9 * eye_half + 0.1 * cov_unbiased)


def test_batch_norm_eval_uses_running_stats():
    x = _correlated(10, 4)
    rm = torch.randn(4, dtype=DT)
    a = torch.randn(4, 2, 2, dtype=torch.float64)
    rc = (a @ a.mT + torch.eye(2, dtype=torch.float64)).permute(1, 2, 0)  # SPD per channel
    y = CF.batch_norm(x, rm, rc, None, None, training=False, eps=1e-5)
    c = torch.view_as_real(x - rm)  # (B, C, 2)
    inv = _inv_sqrt_2x2(rc.permute(2, 0, 1) + 1e-5 * torch.eye(2, dtype=torch.float64))
    ref = (inv @ c.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(y, torch.view_as_complex(ref.contiguous()))


def test_rms_norm_reference_and_phase_equivariance():
    x = _correlated(4, 6, 10)
    w = torch.rand(10, dtype=torch.float64) + 0.5
    ref = x / torch.sqrt((x.abs() ** 2).mean(-1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(CF.rms_norm(x, (10,), w, 1e-6), ref)
    rot = torch.exp(1j * torch.tensor(0.7, dtype=torch.float64))
    torch.testing.assert_close(CF.rms_norm(x * rot, (10,), w), CF.rms_norm(x, (10,), w) * rot)
    xr = torch.randn(3, 10, dtype=torch.float64)
    torch.testing.assert_close(CF.rms_norm(xr, (10,), w, 1e-6), F.rms_norm(xr, (10,), w, 1e-6))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, w, b: CF.layer_norm(x, (6,), w[0], b, mode="split"),
        lambda x, w, b: CF.layer_norm(x, (6,), w, b, mode="whiten"),
        lambda x, w, b: CF.batch_norm(x.transpose(1, 2), None, None, w, b, training=True),
        lambda x, w, b: CF.rms_norm(x, (6,), w[0, 0]),
    ],
    ids=["ln_split", "ln_whiten", "batch_norm", "rms_norm"],
)
def test_gradcheck_input_and_params(fn):
    x = _correlated(3, 4, 6).requires_grad_()
    w = (torch.eye(2, dtype=torch.float64).unsqueeze(-1) + 0.1 * torch.randn(2, 2, 6)).double()
    w.requires_grad_()
    b = torch.randn(6, dtype=DT, requires_grad=True)
    assert torch.autograd.gradcheck(fn, (x, w, b))


def test_unknown_mode_lists_valid_ones():
    with pytest.raises(ValueError, match="valid modes are 'split', 'whiten'"):
        CF.layer_norm(torch.zeros(2, 3, dtype=DT), (3,), mode="bogus")


def test_complextorch_batch_norm_training_output_agrees_with_reference():
    """complextorch's whitening BatchNorm1d normalises like the reference in training mode; we
    still use our own (factory kwargs, unbiased running covariance without eps, num_features=1
    works, running covariance initialised to unit complex variance; see tests/nn/test_norm.py)."""
    x = _correlated(32, 3).to(torch.complex64)
    bn = ctnn.BatchNorm1d(3)
    ref = torch.view_as_complex(_whiten_ref(x.to(DT), (0,), 1e-5).contiguous()) / 2**0.5
    torch.testing.assert_close(bn(x).to(DT), ref, atol=1e-5, rtol=1e-4)


# ------------------------------------------------------------------------------------------------
# whitening norms on channels-last inputs: the same values and gradients, the layout kept
# ------------------------------------------------------------------------------------------------
def _whitening_calls():
    w = torch.randn(2, 2, 4, dtype=torch.float64)
    b = torch.randn(4, dtype=DT)
    rm, rc = torch.randn(4, dtype=DT), torch.eye(2, dtype=torch.float64)[..., None].repeat(1, 1, 4)
    return (
        {
            "batch_norm": lambda x, w, b: CF.batch_norm(x, None, None, w, b, training=True),
            "batch_norm_eval": lambda x, w, b: CF.batch_norm(x, rm, rc, w, b, training=False),
            "instance_norm": lambda x, w, b: CF.instance_norm(x, weight=w, bias=b),
            "group_norm": lambda x, w, b: CF.group_norm(x, 2, w, b),
        },
        w,
        b,
    )


@pytest.mark.parametrize("name", ["batch_norm", "batch_norm_eval", "instance_norm", "group_norm"])
@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("gram", [True, False], ids=["gram", "broadcast"])
def test_whitening_norms_on_channels_last_inputs(name, nd, gram, monkeypatch):
    from cplxnet.functional import whitening

    monkeypatch.setattr(whitening, "_GRAM_MAX_CHANNELS", 64 if gram else 0)
    calls, w, b = _whitening_calls()
    fn = calls[name]
    fmt = torch.channels_last if nd == 2 else torch.channels_last_3d
    x = torch.randn(3, 4, *(5,) * nd, dtype=DT) * (1 + 2j) + 0.5
    xc = x.contiguous(memory_format=fmt)
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    leaves_cl = [xc.detach().requires_grad_(), w.clone().requires_grad_(), b.clone()]
    leaves_cl[2].requires_grad_()
    want, got = fn(*leaves), fn(*leaves_cl)
    torch.testing.assert_close(got, want)
    assert got.is_contiguous(memory_format=fmt)
    gz = torch.randn_like(want)
    for g, r in zip(torch.autograd.grad(got, leaves_cl, gz), torch.autograd.grad(want, leaves, gz)):
        torch.testing.assert_close(g, r)
    assert torch.autograd.gradcheck(fn, leaves_cl, fast_mode=True)


# rms_norm adds ``eps`` to the mean squared modulus exactly once (the packed real view needs
# ``eps / 2``); an ``eps`` of the order of the data makes the factor visible, which ``eps=1e-6``
# on order-one data does not.


@pytest.mark.parametrize("eps", [0.25, 1.0, 4.0])
def test_rms_norm_eps_of_the_order_of_the_data_matches_the_formula(eps):
    torch.manual_seed(0)
    x = 0.5 * torch.randn(3, 5, 8, dtype=DT)
    w = torch.rand(8, dtype=torch.float64) + 0.5
    ref = x / torch.sqrt((x.abs() ** 2).mean(-1, keepdim=True) + eps) * w
    torch.testing.assert_close(CF.rms_norm(x, (8,), w, eps), ref)
    # without a gain, and over two trailing dims
    ref2 = x / torch.sqrt((x.abs() ** 2).mean((-2, -1), keepdim=True) + eps)
    torch.testing.assert_close(CF.rms_norm(x, (5, 8), None, eps), ref2)


def test_rms_norm_module_with_a_large_eps_on_a_real_valued_input_is_torchs():
    torch.manual_seed(0)
    # a purely real complex input: the complex layer is torch's real RMSNorm of the real part
    eps = 0.5
    xr = 0.3 * torch.randn(4, 6, dtype=torch.float64)
    ours = cnn.RMSNorm(6, eps=eps, dtype=DT)
    ref = F.rms_norm(xr, (6,), None, eps)
    torch.testing.assert_close(ours(xr.to(DT)).real, ref)
