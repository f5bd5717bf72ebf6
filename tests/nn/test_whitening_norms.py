"""The whitening batch, instance and group norms of every rank (cplxnet.nn.whitening):
the sample covariance of the output, running statistics against a plain update over several
batches, values / gradients / double backward against ``tests/reference_ops.py``, numerical
range, complextorch where it agrees, torch's argument order and defaults, errors, and
``torch.compile(fullgraph=True)`` / ``torch.export`` of the module-table entries."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from module_db import make_module, sample_input
from module_db_norm import MODULES as NORM_MODULES
from reference_ops import reference_batch_norm, reference_group_norm, reference_instance_norm
from torch import nn
from torch.export import Dim

import cplxnet.functional as CF
from cplxnet import nn as cnn

DT = torch.complex128
R = torch.float64
EYE = torch.eye(2, dtype=R)


def _x(*shape, dtype=DT, scale=1.0):
    """Non-circular data with a non-zero mean (correlated parts of unequal variance)."""
    a = torch.randn(*shape, dtype=R)
    b = 0.7 * a + 0.5 * torch.randn_like(a)
    return (torch.complex(2.0 * a + 0.3, 0.6 * b - 1.0) * scale).to(dtype)


def _leaf(t):
    return t.detach().clone().requires_grad_()


def _cov(y: torch.Tensor, dims: tuple) -> torch.Tensor:
    """Sample 2x2 covariance of (real, imaginary) over ``dims`` (about the sample mean):
    shape ``(*kept, 2, 2)``."""
    r = torch.view_as_real(y - y.mean(dim=dims, keepdim=True))
    kept = [d for d in range(y.dim()) if d not in dims]
    r = r.permute(*kept, *dims, -1).flatten(len(kept), -2)  # (*kept, n, 2)
    return r.mT @ r / r.shape[-2]


# ------------------------------------------------------------------------------------------------
# the output covariance in training mode: I/2 with the initial affine map, I without it
# ------------------------------------------------------------------------------------------------
LAYERS = [
    (lambda **kw: cnn.BatchNorm1d(3, **kw), (64, 3, 8), (0, 2)),
    (lambda **kw: cnn.BatchNorm2d(3, **kw), (16, 3, 6, 5), (0, 2, 3)),
    (lambda **kw: cnn.BatchNorm3d(2, **kw), (8, 2, 4, 3, 5), (0, 2, 3, 4)),
    (lambda **kw: cnn.InstanceNorm1d(3, **kw), (4, 3, 200), (2,)),
    (lambda **kw: cnn.InstanceNorm2d(3, **kw), (4, 3, 12, 10), (2, 3)),
    (lambda **kw: cnn.InstanceNorm3d(2, **kw), (2, 2, 5, 6, 7), (2, 3, 4)),
]


LAYER_IDS = [f"{kind}Norm{nd}d" for kind in ("Batch", "Instance") for nd in (1, 2, 3)]


@pytest.mark.parametrize(("build", "shape", "dims"), LAYERS, ids=LAYER_IDS)
@pytest.mark.parametrize("affine", [True, False])
def test_output_covariance_per_channel_or_instance(build, shape, dims, affine):
    m = build(affine=affine, eps=0.0, dtype=DT)
    y = m(_x(*shape))
    cov = _cov(y, dims)
    target = (0.5 if affine else 1.0) * EYE
    torch.testing.assert_close(cov, target.expand_as(cov), atol=1e-10, rtol=0)
    assert torch.allclose(y.mean(dim=dims), torch.zeros((), dtype=DT), atol=1e-12)


@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_output_covariance_per_group(affine):
    gn = cnn.GroupNorm(3, 6, eps=0.0, affine=affine, dtype=DT)
    x = _x(4, 6, 5, 7)
    y = gn(x).reshape(4, 3, 2, 5, 7)
    cov = _cov(y, (2, 3, 4))  # (N, G, 2, 2)
    target = (0.5 if affine else 1.0) * EYE
    torch.testing.assert_close(cov, target.expand_as(cov), atol=1e-10, rtol=0)
    # a channel of a group is not whitened on its own
    assert not torch.allclose(_cov(gn(x), (2, 3)), target.expand(4, 6, 2, 2), atol=1e-3)


# ------------------------------------------------------------------------------------------------
# running statistics over several batches against the plain update rule
# ------------------------------------------------------------------------------------------------
def _plain_stats(x: torch.Tensor, dims: tuple):
    """Mean ``(C,)`` and unbiased 2x2 covariance ``(2, 2, C)``, averaged over the batch for
    per-instance ``dims``."""
    mean = x.mean(dim=dims, keepdim=True)
    r = torch.view_as_real(x - mean)
    n = math.prod(x.shape[d] for d in dims)
    cov = torch.einsum("...i,...j->...ij", r, r).sum(dim=dims) / (n - 1)  # (*kept, 2, 2)
    mean = mean.squeeze(dims) if len(dims) else mean
    if 0 not in dims:  # per instance: the batch average
        mean, cov = mean.mean(0), cov.mean(0)
    return mean.reshape(-1), cov.permute(1, 2, 0)


@pytest.mark.parametrize(
    ("build", "shape", "dims"),
    [
        (lambda m: cnn.BatchNorm2d(3, momentum=m, dtype=DT), (5, 3, 4, 3), (0, 2, 3)),
        (lambda m: cnn.BatchNorm3d(2, momentum=m, dtype=DT), (3, 2, 2, 3, 2), (0, 2, 3, 4)),
        (
            lambda m: cnn.InstanceNorm2d(3, momentum=m, track_running_stats=True, dtype=DT),
            (4, 3, 5, 2),
            (2, 3),
        ),
    ],
    ids=["BatchNorm2d", "BatchNorm3d", "InstanceNorm2d"],
)
@pytest.mark.parametrize("momentum", [0.1, 0.3, None])
def test_running_statistics_follow_the_update_rule(build, shape, dims, momentum):
    m = build(momentum)
    mean = torch.zeros(shape[1], dtype=DT)
    cov = 0.5 * EYE.unsqueeze(-1).repeat(1, 1, shape[1])
    batches = [_x(*shape) for _ in range(4)]
    for k, x in enumerate(batches, start=1):
        m(x)
        bm, bc = _plain_stats(x, dims)
        if momentum is None and isinstance(m, cnn.InstanceNorm2d):
            continue  # torch's instance norm: momentum=None leaves the statistics unchanged
        f = 1.0 / k if momentum is None else momentum
        mean, cov = (1 - f) * mean + f * bm, (1 - f) * cov + f * bc
    torch.testing.assert_close(m.running_mean, mean)
    torch.testing.assert_close(m.running_cov, cov)
    if momentum is None and not isinstance(m, cnn.InstanceNorm2d):
        all_x = torch.cat(batches)  # the cumulative average is the average of the batch means
        torch.testing.assert_close(m.running_mean, all_x.mean(dim=dims).reshape(-1))
    m.eval()
    z = _x(*shape)
    want = reference_batch_norm(z, m.running_mean, m.running_cov, m.weight, m.bias, eps=m.eps)
    torch.testing.assert_close(m(z), want)


def test_instance_norm_tracked_updates_with_batch_average_and_counts_nothing():
    m = cnn.InstanceNorm1d(2, track_running_stats=True, dtype=DT)
    x = _x(3, 2, 9)
    m(x)
    bm, bc = _plain_stats(x, (2,))
    torch.testing.assert_close(m.running_mean, 0.1 * bm)
    torch.testing.assert_close(m.running_cov, 0.9 * 0.5 * EYE.unsqueeze(-1) + 0.1 * bc)
    assert m.num_batches_tracked.item() == 0  # as torch's InstanceNorm
    untracked = cnn.InstanceNorm1d(2, dtype=DT).eval()  # eval without buffers: instance stats
    torch.testing.assert_close(untracked(x), reference_instance_norm(x))


# ------------------------------------------------------------------------------------------------
# values and gradients against the plain reference, gradcheck and double backward
# ------------------------------------------------------------------------------------------------
def _affine(c):
    return _leaf(EYE.unsqueeze(-1) + 0.4 * torch.randn(2, 2, c, dtype=R)), _leaf(
        torch.randn(c, dtype=DT)
    )


def _grads(fn, inputs, seed=1):
    out = fn(*inputs)
    g = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(seed))
    leaves = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    return (out, *torch.autograd.grad(out, leaves, g))


CASES = [
    ("batch 2d", (4, 3, 3, 5), lambda x, w, b: CF.batch_norm(x, None, None, w, b, True),
     lambda x, w, b: reference_batch_norm(x, None, None, w, b, True)),
    ("batch 2d, 4 positions a row", (3, 2, 4, 8),
     lambda x, w, b: CF.batch_norm(x, None, None, w, b, True),
     lambda x, w, b: reference_batch_norm(x, None, None, w, b, True)),
    ("batch 3d", (2, 3, 2, 3, 2), lambda x, w, b: CF.batch_norm(x, None, None, w, b, True),
     lambda x, w, b: reference_batch_norm(x, None, None, w, b, True)),
    ("batch (N, C)", (7, 3), lambda x, w, b: CF.batch_norm(x, None, None, w, b, True),
     lambda x, w, b: reference_batch_norm(x, None, None, w, b, True)),
    ("instance 2d", (2, 3, 4, 3), lambda x, w, b: CF.instance_norm(x, None, None, w, b),
     lambda x, w, b: reference_instance_norm(x, None, None, w, b)),
    ("group 2d", (2, 6, 3, 2), lambda x, w, b: CF.group_norm(x, 2, w, b),
     lambda x, w, b: reference_group_norm(x, 2, w, b)),
    ("group 1d per channel", (3, 3, 5), lambda x, w, b: CF.group_norm(x, 3, w, b),
     lambda x, w, b: reference_group_norm(x, 3, w, b)),
    ("group (N, C) one group", (4, 6), lambda x, w, b: CF.group_norm(x, 1, w, b),
     lambda x, w, b: reference_group_norm(x, 1, w, b)),
]  # fmt: skip


@pytest.mark.parametrize(("name", "shape", "fast", "ref"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("affine", ["weight+bias", "weight", "bias", "none"])
def test_values_and_gradients_equal_reference(name, shape, fast, ref, affine):
    x = _x(*shape)
    x.view(-1)[:3] = 0  # exact zeros and a repeated value
    x.view(-1)[3:5] = 2 - 1j
    w, b = _affine(shape[1])
    w = w if "weight" in affine else None
    b = b if "bias" in affine else None
    inputs = (_leaf(x), w, b)
    for got, want in zip(_grads(fast, inputs), _grads(ref, inputs), strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize(
    ("name", "shape", "fast", "ref"),
    # seconds to tens of seconds each: only the (N, C) batch norm in the fast subset
    [pytest.param(*c, id=c[0], marks=[pytest.mark.slow] * (c[0] != "batch (N, C)"))
     for c in CASES[:5]],
)  # fmt: skip
def test_gradcheck_and_gradgradcheck(name, shape, fast, ref):
    x = _leaf(_x(*shape))
    w, b = _affine(shape[1])
    assert torch.autograd.gradcheck(fast, (x, w, b))
    # second order by random projections (fast mode): the full Jacobian of the backward took
    # tens of seconds per case; the first order above is checked entry by entry
    assert torch.autograd.gradgradcheck(fast, (x, w, b), fast_mode=True)


def test_eval_with_running_stats_gradients_equal_reference():
    x = _leaf(_x(3, 2, 4, 2))
    w, b = _affine(2)
    rm = torch.randn(2, dtype=DT)
    a = torch.randn(2, 2, 2, dtype=R)
    rc = (a @ a.mT + 0.1 * EYE).permute(1, 2, 0).contiguous()
    pairs = [
        (CF.batch_norm, reference_batch_norm),
        (
            lambda x, *a: CF.instance_norm(x, *a[:4], False),
            lambda x, *a: reference_instance_norm(x, *a[:4], False),
        ),
    ]
    for fast, ref in pairs:
        got = _grads(lambda x, w, b, f=fast: f(x, rm, rc, w, b), (x, w, b))
        want = _grads(lambda x, w, b, f=ref: f(x, rm, rc, w, b), (x, w, b))
        for g_, w_ in zip(got, want, strict=True):
            torch.testing.assert_close(g_, w_)
    assert torch.autograd.gradgradcheck(
        lambda x, w, b: CF.batch_norm(x, rm, rc, w, b), (x, w, b), fast_mode=True
    )


def test_complex64_conj_and_strided_inputs_equal_reference():
    base = _x(4, 6, 5, 6, dtype=torch.complex64)
    w, b = _affine(3)
    w, b = _leaf(w.float()), _leaf(b.to(torch.complex64))
    for x in (base[:, ::2], base[:, :3].conj(), base.permute(0, 1, 3, 2)[:, 3:]):
        x = _leaf(x)
        for fast, ref in (
            (lambda x, w, b: CF.batch_norm(x, None, None, w, b, True), reference_batch_norm),
            (lambda x, w, b: CF.group_norm(x, 3, w, b), None),
        ):
            if ref is None:

                def ref(x, w, b):
                    return reference_group_norm(x.resolve_conj(), 3, w, b)
            else:

                def ref(x, w, b, _r=ref):
                    return _r(x.resolve_conj(), None, None, w, b, True)

            for got, want in zip(_grads(fast, (x, w, b)), _grads(ref, (x, w, b)), strict=True):
                torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)


def test_composed_path_under_tracing_equals_fast_path(monkeypatch):
    x = _leaf(_x(3, 4, 3, 2))
    w, b = _affine(4)
    fns = [
        lambda x, w, b: CF.batch_norm(x, None, None, w, b, True),
        lambda x, w, b: CF.group_norm(x, 2, w, b),
        lambda x, w, b: CF.instance_norm(x, None, None, w, b),
    ]
    fast = [_grads(fn, (x, w, b)) for fn in fns]
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    for fn, want in zip(fns, fast):
        out = fn(x, w, b)
        assert "WhitenChannels" not in type(out.grad_fn).__name__
        for got, w_ in zip(_grads(fn, (x, w, b)), want, strict=True):
            torch.testing.assert_close(got, w_)


@pytest.mark.parametrize("scale", [1.0, 1e10])
@pytest.mark.parametrize("layout", ["contiguous", "channels-last", "strided"])
def test_per_channel_math_in_torch_equals_the_host_path(monkeypatch, layout, scale):
    """The per-channel 2x2 math runs in NumPy for eager CPU inputs and in torch elsewhere (other
    devices): forcing the torch path gives the same values and gradients."""
    from cplxnet.functional import whitening

    base = _x(4, 6, 5, 6, dtype=torch.complex64, scale=scale)
    x = {
        "contiguous": base,
        "channels-last": base.contiguous(memory_format=torch.channels_last),
        "strided": base[:, :, ::2],
    }[layout]
    x = _leaf(x)
    w, b = _affine(6)
    w, b = _leaf(w.float()), _leaf(b.to(torch.complex64))
    fns = [
        lambda x, w, b: CF.batch_norm(x, None, None, w, b, True),
        lambda x, w, b: CF.group_norm(x, 2, w, b),
        lambda x, w, b: CF.instance_norm(x, None, None, w, b),
    ]
    calls = []
    real_host_math = whitening._host_math
    monkeypatch.setattr(whitening, "_host_math", lambda t: calls.append(1) or real_host_math(t))
    host = [_grads(fn, (x, w, b)) for fn in fns]
    assert len(calls) == len(fns) and real_host_math(x)
    monkeypatch.setattr(whitening, "_host_math", lambda t: False)
    for fn, want in zip(fns, host):
        for got, w_ in zip(_grads(fn, (x, w, b)), want, strict=True):
            torch.testing.assert_close(got, w_, atol=1e-5 * w_.abs().max().item(), rtol=1e-4)


# ------------------------------------------------------------------------------------------------
# numerical range
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scale", [1e15, 1e10, 1e-10, 1.0])
def test_complex64_is_finite_and_accurate_at_extreme_scales(scale):
    x64 = _x(4, 6, 8, 8, dtype=torch.complex64, scale=scale)
    w = torch.randn(2, 2, 6)
    b = torch.randn(6, dtype=torch.complex64)
    x128, w128, b128 = x64.to(DT), w.double(), b.to(DT)
    pairs = [
        (lambda x, w, b: CF.batch_norm(x, None, None, w, b, True), reference_batch_norm, True),
        (lambda x, w, b: CF.group_norm(x, 2, w, b), reference_group_norm, 2),
        (lambda x, w, b: CF.instance_norm(x, None, None, w, b), reference_instance_norm, None),
    ]
    for fast, ref, arg in pairs:
        out = fast(x64, w, b)
        if arg is True:
            want = ref(x128, None, None, w128, b128, True)
        elif arg is None:
            want = ref(x128, None, None, w128, b128)
        else:
            want = ref(x128, arg, w128, b128)
        assert torch.isfinite(torch.view_as_real(out)).all()
        torch.testing.assert_close(out.to(DT), want, atol=1e-3, rtol=1e-3)
        xg, xg128 = _leaf(x64), _leaf(x128)
        gz = torch.randn_like(out)
        (gz.conj() * fast(xg, w, b)).real.sum().backward()
        (gz.to(DT).conj() * fast(xg128, w128, b128)).real.sum().backward()
        assert torch.isfinite(torch.view_as_real(xg.grad)).all()
        tol = 1e-3 * xg128.grad.abs().max().item()
        torch.testing.assert_close(xg.grad.to(DT), xg128.grad, atol=tol, rtol=1e-3)


@pytest.mark.parametrize("scale", [1e15, 1e-10])
def test_complex64_whitening_layer_norm_gradients_at_extreme_scales(scale):
    x64 = _x(4, 3, 16, dtype=torch.complex64, scale=scale)
    w, b = torch.randn(2, 2, 16), torch.randn(16, dtype=torch.complex64)
    grads = []
    for x, ww, bb in ((x64, w, b), (x64.to(DT), w.double(), b.to(DT))):
        xg = _leaf(x)
        y = CF.layer_norm(xg, (16,), ww, bb, mode="whiten")
        (torch.ones_like(y) * y).real.sum().backward()
        grads.append(xg.grad)
    assert torch.isfinite(torch.view_as_real(grads[0])).all()
    tol = 1e-3 * grads[1].abs().max().item()
    torch.testing.assert_close(grads[0].to(DT), grads[1], atol=tol, rtol=1e-3)


def test_constant_and_real_valued_channels_stay_finite():
    x = _x(4, 3, 5, 5)
    x[:, 0] = 1 + 2j  # zero variance: eps keeps it finite, output = bias
    x[:, 1] = x[:, 1].real + 0j  # real-valued: singular covariance
    bn = cnn.BatchNorm2d(3, dtype=DT)
    y = bn(x)
    assert torch.isfinite(torch.view_as_real(y)).all()
    torch.testing.assert_close(y[:, 0], torch.zeros_like(y[:, 0]))
    assert torch.allclose(y[:, 1].imag, torch.zeros((), dtype=R), atol=1e-9)


@pytest.mark.parametrize("scale", [1.0, 1e2, 1e4, 1e8])
def test_real_valued_input_in_complex64_is_real_batch_norm(scale):
    """Real data cast to complex (an image or a magnitude, imaginary part zero), at the scale of
    raw intensities: the whitening of each channel is real batch / instance / group norm scaled
    by the init affine 1/sqrt(2) (none for InstanceNorm, ``affine=False`` as torch), in values
    and gradients, in complex64 (the 2x2 map must not cancel: the widely linear form lost every
    digit at 1e8)."""
    torch.manual_seed(0)
    x = (torch.randn(4, 6, 8, 8) + 3.0) * scale
    r = torch.randn_like(x)
    cases = [
        (cnn.BatchNorm2d(6), lambda t: F.batch_norm(t, None, None, training=True)),
        (cnn.InstanceNorm2d(6), lambda t: F.instance_norm(t)),
        (cnn.GroupNorm(3, 6), lambda t: F.group_norm(t, 3)),
    ]
    for layer, real_norm in cases:
        z = torch.complex(x, torch.zeros_like(x)).requires_grad_()
        y = layer(z)
        (y.real * r).sum().backward()
        xr = x.clone().requires_grad_()
        want = real_norm(xr) / (math.sqrt(2.0) if layer.weight is not None else 1.0)
        (want * r).sum().backward()
        name = type(layer).__name__
        torch.testing.assert_close(y.real, want, rtol=1e-4, atol=1e-4, msg=name)
        assert y.imag.abs().max() == 0, name
        torch.testing.assert_close(z.grad.real, xr.grad, rtol=1e-3, atol=1e-3 / scale, msg=name)


@pytest.mark.parametrize("scale", [1.0, 1e2, 1e4, 1e8])
def test_real_valued_input_in_complex64_is_real_layer_norm(scale):
    """The whitening LayerNorm of real features cast to complex64 (imaginary part zero) is
    torch's real layer norm scaled by the init affine 1/sqrt(2), in values and gradients, at raw
    scales up to 1e8 and with a mean far from zero (the same precision check as the batch norms':
    a widely linear 2x2 map would cancel there), and the gradient along the imaginary part is
    zero."""
    torch.manual_seed(0)
    x = (torch.randn(3, 5, 32) + 3.0) * scale
    r = torch.randn_like(x)
    layer = cnn.LayerNorm(32, mode="whiten")
    z = torch.complex(x, torch.zeros_like(x)).requires_grad_()
    y = layer(z)
    (y.real * r).sum().backward()
    xr = x.clone().requires_grad_()
    want = F.layer_norm(xr, (32,), eps=layer.eps) / math.sqrt(2.0)
    (want * r).sum().backward()
    torch.testing.assert_close(y.real, want, rtol=1e-4, atol=1e-4)
    assert y.imag.abs().max() == 0
    torch.testing.assert_close(z.grad.real, xr.grad, rtol=1e-3, atol=1e-3 / scale)
    # along the imaginary part: 0 (the real output's 2x2 coefficient on x is even in V_ri and
    # multiplies the zero imaginary part elsewhere; a central difference in float64 agrees)
    torch.testing.assert_close(z.grad.imag, torch.zeros_like(x), rtol=0, atol=1e-3 / scale)


# ------------------------------------------------------------------------------------------------
# complextorch
# ------------------------------------------------------------------------------------------------
def test_complextorch_batch_and_group_norm_training_output_agree():
    """complextorch's whitening BatchNorm2d/3d and GroupNorm normalise as ours in training mode
    (variance 0.5 per part at init). Where they differ: complextorch initialises the running
    covariance to I (ours I/2, torch's ``running_var = 1`` per unit complex variance), so an
    untrained complextorch layer in eval mode scales its input by 1/sqrt(2), ours returns it."""
    ctnn = pytest.importorskip("complextorch.nn")
    for ours, theirs, shape in (
        (cnn.BatchNorm2d(3), ctnn.BatchNorm2d(3), (8, 3, 5, 4)),
        (cnn.BatchNorm3d(3), ctnn.BatchNorm3d(3), (4, 3, 3, 4, 2)),
        (cnn.GroupNorm(3, 6), ctnn.GroupNorm(3, 6), (4, 6, 5, 4)),
        (cnn.GroupNorm(2, 4, affine=False), ctnn.GroupNorm(2, 4, affine=False), (3, 4, 6)),
    ):
        x = _x(*shape, dtype=torch.complex64)
        torch.testing.assert_close(ours(x), theirs(x).detach(), atol=2e-5, rtol=1e-4)
    x = _x(4, 3, 5, 4, dtype=torch.complex64)
    theirs = ctnn.BatchNorm2d(3).eval()(x).detach()
    torch.testing.assert_close(theirs, x / math.sqrt(2), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(cnn.BatchNorm2d(3).eval()(x), x, atol=1e-4, rtol=1e-4)


# ------------------------------------------------------------------------------------------------
# torch's positional arguments and defaults
# ------------------------------------------------------------------------------------------------
def _norm_options(m: nn.Module) -> dict:
    keys = ("num_features", "num_groups", "num_channels", "eps", "momentum", "affine")
    out = {k: getattr(m, k) for k in keys if hasattr(m, k)}
    out["track_running_stats"] = getattr(m, "track_running_stats", None)
    out["params"] = sorted(n for n, _ in m.named_parameters())
    out["buffers"] = sorted(n for n, b in m.named_buffers() if b is not None)
    return out


DROPIN = [
    (cnn.BatchNorm1d, nn.BatchNorm1d, (4, 1e-3, 0.3, False, False)),
    (cnn.BatchNorm2d, nn.BatchNorm2d, (4, 1e-3, None, True, True)),
    (cnn.BatchNorm3d, nn.BatchNorm3d, (4, 1e-4, 0.2, False, True)),
    (cnn.InstanceNorm1d, nn.InstanceNorm1d, (4, 1e-3, 0.3, True, True)),
    (cnn.InstanceNorm2d, nn.InstanceNorm2d, (4, 1e-3, None, True, False)),
    (cnn.InstanceNorm3d, nn.InstanceNorm3d, (4, 1e-4, 0.2, False, True)),
    (cnn.GroupNorm, nn.GroupNorm, (2, 4, 1e-3, False)),
]


@pytest.mark.parametrize(
    ("ours", "theirs", "args"), DROPIN, ids=lambda v: getattr(v, "__name__", "")
)
def test_positional_arguments_land_where_torch_puts_them(ours, theirs, args):
    got = _norm_options(ours(*args, dtype=DT))
    want = _norm_options(theirs(*args, dtype=R))
    want["buffers"] = [b.replace("running_var", "running_cov") for b in want["buffers"]]
    assert got.pop("buffers") == sorted(want.pop("buffers"))
    assert got == want


DEFAULTS = [(a, b, c[:2] if a is cnn.GroupNorm else c[:1]) for a, b, c in DROPIN]


@pytest.mark.parametrize(
    ("ours", "theirs", "args"), DEFAULTS, ids=lambda v: getattr(v, "__name__", "")
)
def test_defaults_are_torchs(ours, theirs, args):
    got, want = _norm_options(ours(*args, dtype=DT)), _norm_options(theirs(*args, dtype=R))
    want["buffers"] = sorted(b.replace("running_var", "running_cov") for b in want["buffers"])
    assert got == want


def test_shapes_as_torch_including_unbatched_instance_norm():
    assert cnn.InstanceNorm2d(3, dtype=DT)(_x(3, 4, 5)).shape == (3, 4, 5)
    assert cnn.InstanceNorm1d(3, affine=True, dtype=DT)(_x(3, 7)).shape == (3, 7)
    assert cnn.GroupNorm(2, 4, dtype=DT)(_x(5, 4)).shape == (5, 4)


# ------------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------------
def test_errors_name_the_layer_and_the_fix():
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected input \(N, 3, H, W\), got"):
        cnn.BatchNorm2d(3, dtype=DT)(_x(2, 3, 4))
    with pytest.raises(ValueError, match=r"BatchNorm3d: expected input \(N, 3, D, H, W\)"):
        cnn.BatchNorm3d(3, dtype=DT)(_x(2, 4, 2, 2, 2))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        cnn.BatchNorm2d(3, dtype=DT)(_x(1, 3, 1, 1))
    with pytest.raises(ValueError, match="more than 1 spatial element when training"):
        cnn.InstanceNorm2d(3, dtype=DT)(_x(2, 3, 1, 1))
    with pytest.raises(ValueError, match=r"InstanceNorm1d: expected input \(N, 3, L\) or"):
        cnn.InstanceNorm1d(3, dtype=DT)(_x(2, 3, 4, 4))
    with pytest.raises(ValueError, match="match num_features"):
        cnn.InstanceNorm1d(3, affine=True, dtype=DT)(_x(2, 4, 5))
    with pytest.warns(UserWarning, match="unused since affine=False"):
        cnn.InstanceNorm1d(3, dtype=DT)(_x(2, 4, 5))
    with pytest.raises(ValueError, match=r"GroupNorm: num_channels \(4\) must be divisible"):
        cnn.GroupNorm(3, 4)
    with pytest.raises(ValueError, match=r"GroupNorm: expected input \(N, 4, \*\)"):
        cnn.GroupNorm(2, 4, dtype=DT)(_x(2, 6, 3))
    with pytest.raises(ValueError, match="group_norm: expected the 6 channels"):
        CF.group_norm(_x(2, 6, 3), 4)
    with pytest.raises(TypeError, match="batch_norm: input must be a complex tensor"):
        CF.batch_norm(torch.randn(4, 3, 2), None, None, training=True)
    with pytest.raises(TypeError, match="GroupNorm: dtype must be"):
        cnn.GroupNorm(2, 4, dtype=torch.int64)


@pytest.mark.parametrize("track", [False, True])
def test_one_spatial_element_is_refused_where_torch_uses_the_input_statistics(track):
    # torch's instance norm refuses it whenever it normalises with the input's statistics:
    # in training, and in eval mode without running statistics
    x = _x(2, 3, 1)
    for training in (True, False):
        ours = cnn.InstanceNorm1d(3, track_running_stats=track, dtype=DT).train(training)
        theirs = torch.nn.InstanceNorm1d(3, track_running_stats=track, dtype=R).train(training)
        if training or not track:
            with pytest.raises(ValueError, match="Expected more than 1 spatial element"):
                theirs(x.real)
            with pytest.raises(ValueError, match="more than 1 spatial element when training"):
                ours(x)
        else:
            assert ours(x).shape == theirs(x.real).shape


@pytest.mark.parametrize(
    "shape, groups",
    [((1, 2), 2), ((2, 2), 2), ((1, 4, 1), 4), ((1, 4, 1), 2), ((3, 2, 1), 2), ((1, 2, 1, 1), 2),
     ((1, 2, 2), 2)],
)  # fmt: skip
def test_group_norm_refuses_one_value_exactly_where_torch_does(shape, groups):
    # torch counts N * C / G * spatial values (one value per group in a larger batch passes)
    x = torch.randn(*shape, dtype=DT)
    ours = cnn.GroupNorm(groups, shape[1], dtype=DT)
    theirs = torch.nn.GroupNorm(groups, shape[1], dtype=R)
    try:
        theirs(x.real)
    except ValueError as err:
        assert "Expected more than 1 value per channel" in str(err)
        with pytest.raises(ValueError, match="group_norm: expected more than 1 value per group"):
            ours(x)
    else:
        assert ours(x).shape == x.shape


# ------------------------------------------------------------------------------------------------
# compile (one graph) and export with a dynamic spatial size, for every module-table entry
# ------------------------------------------------------------------------------------------------
#: entries the compile and export tests leave out (entry: its twin): the 1-, 2- and 3-D
#: classes share one implementation and differ only in the input ranks they accept
SAME_COMPILE_PATH = {
    "BatchNorm3d": "BatchNorm2d", "InstanceNorm3d": "InstanceNorm1d",
    "InstanceNorm2d_unbatched": "InstanceNorm1d_unbatched",
}  # fmt: skip
COMPILED = [i for i in NORM_MODULES if i.id not in SAME_COMPILE_PATH]


def test_compile_twins_exist():
    ids = {i.id for i in NORM_MODULES}
    assert ids >= set(SAME_COMPILE_PATH) | set(SAME_COMPILE_PATH.values())
    assert not set(SAME_COMPILE_PATH.values()) & set(SAME_COMPILE_PATH)


@pytest.mark.slow  # seconds per module and mode (CI runs them; the module table compiles one)
@pytest.mark.parametrize("info", COMPILED, ids=[i.id for i in COMPILED])
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_compiles_to_one_graph(info, train):
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = make_module(info, dtype=torch.complex64).train(train)
    twin = make_module(info, dtype=torch.complex64).train(train)
    twin.load_state_dict(m.state_dict())
    (x,), _ = sample_input(info, torch.complex64)
    compiled = torch.compile(twin, backend="aot_eager", fullgraph=True)
    xc = _leaf(x)
    xe = _leaf(x)
    got, want = compiled(xc), m(xe)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.view_as_real(got).sum().backward()
    torch.view_as_real(want).sum().backward()
    torch.testing.assert_close(xc.grad, xe.grad, atol=1e-4, rtol=1e-4)
    for (name, a), b in zip(m.named_buffers(), twin.buffers()):
        torch.testing.assert_close(b, a, msg=name)  # running statistics updated alike


@pytest.mark.parametrize("info", COMPILED, ids=[i.id for i in COMPILED])
def test_exports_with_a_dynamic_spatial_size(info):
    torch.manual_seed(0)
    m = make_module(info, dtype=torch.complex64).eval()
    (x,), _ = sample_input(info, torch.complex64)
    # the last dim (length / width), or the batch of an (N, C) input
    dim = 0 if info.id == "GroupNorm_NC" else x.dim() - 1
    program = torch.export.export(m, (x,), dynamic_shapes=({dim: Dim.DYNAMIC},))
    for size in (3, 6):
        shape = list(x.shape)
        shape[dim] = size
        z = torch.randn(*shape, dtype=torch.complex64)
        torch.testing.assert_close(program.module()(z), m(z))


NORMS = [
    lambda x, w, b: CF.batch_norm(x, None, None, w, b, True),
    lambda x, w, b: CF.group_norm(x, 2, w, b),
    lambda x, w, b: CF.instance_norm(x, None, None, w, b),
]


@pytest.mark.parametrize("fn", NORMS)
@pytest.mark.parametrize("cl", [False, True])
def test_whitening_norms_off_cpu_use_torch_math(fn, cl):
    """A non-CPU tensor (the meta device here, which runs the same torch code as a GPU) never
    reaches NumPy, forward or backward."""
    x = torch.randn(2, 4, 3, 4, dtype=torch.complex64, device="meta")
    x = x.contiguous(memory_format=torch.channels_last) if cl else x
    x.requires_grad_()
    w = torch.randn(2, 2, 4, device="meta", requires_grad=True)
    b = torch.randn(4, dtype=torch.complex64, device="meta", requires_grad=True)
    y = fn(x, w, b)
    gx, gw, gb = torch.autograd.grad(y, (x, w, b), torch.ones_like(y))
    assert gx.shape == x.shape and gw.shape == w.shape and gb.shape == b.shape


def test_instance_norm_running_stats_average_every_sample():
    """The running statistics of an instance norm are the batch average of the per-sample
    statistics, not the first sample's."""

    x = torch.randn(3, 2, 8, dtype=torch.complex128) * torch.tensor([1.0, 3.0, 0.2])[:, None, None]
    x = x + torch.tensor([0.0, 2.0, -1.0j])[:, None, None]
    rm, rc = (
        torch.zeros(2, dtype=torch.complex128),
        torch.eye(2, dtype=torch.float64)[..., None].repeat(1, 1, 2),
    )
    rm2, rc2 = rm.clone(), rc.clone()
    CF.instance_norm(x, rm, rc, momentum=0.5)
    reference_instance_norm(x, rm2, rc2, momentum=0.5)
    torch.testing.assert_close((rm, rc), (rm2, rc2))


def test_group_norm_backward_mean_share_is_per_sample():
    """group_norm (per-sample statistics, groups != channels) and the gradient of a loss that
    weighs the samples differently: the mean's share of the input gradient is per sample."""

    torch.manual_seed(0)
    x = torch.randn(3, 4, 5, dtype=torch.complex128, requires_grad=True)
    w = torch.randn(2, 2, 4, dtype=torch.float64, requires_grad=True)
    g = (
        torch.randn(3, 4, 5, dtype=torch.complex128)
        + torch.tensor([0.0, 5.0, -3.0j])[:, None, None]
    )
    got = torch.autograd.grad(CF.group_norm(x, 2, w), (x, w), g)
    want = torch.autograd.grad(reference_group_norm(x, 2, w), (x, w), g)
    torch.testing.assert_close(got, want)


def test_host_math_not_taken_under_proxy_tracing():
    """make_fx (real mode) must not bake the batch statistics into the graph, nor fake tensors
    reach NumPy."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    f = lambda x: CF.group_norm(x, 2)  # noqa: E731
    x1 = torch.randn(2, 4, 3, 3, dtype=torch.complex64)
    x2 = 5 * torch.randn(2, 4, 3, 3, dtype=torch.complex64) + 3
    torch.testing.assert_close(make_fx(f)(x1)(x2), f(x2))
    with FakeTensorMode():
        CF.batch_norm(torch.randn(2, 4, 3, 3, dtype=torch.complex64), None, None, training=True)


def test_host_math_accepts_numpy_eps_neg_bit_weight_and_is_silent():
    x = torch.randn(4, 3, 5, dtype=torch.complex64)
    want = CF.batch_norm(x, None, None, None, None, True, eps=1e-3)
    torch.testing.assert_close(
        CF.batch_norm(x, None, None, None, None, True, eps=np.float64(1e-3)), want
    )
    w = torch.complex(torch.zeros(2, 2, 3), -torch.eye(2)[..., None].expand(2, 2, 3)).conj().imag
    assert w.is_neg()
    torch.testing.assert_close(CF.batch_norm(x, None, None, w, None, True, eps=1e-3), want)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CF.instance_norm(torch.zeros(2, 3, 5, dtype=torch.complex64), eps=0.0)


def test_group_norm_one_group_hands_torch_only_writable_arrays(monkeypatch):
    """One group: the per-channel maps are broadcast views of the group's (read-only in NumPy);
    they must be copied before torch.from_numpy (torch may write through, undefined behaviour)."""
    real = torch.from_numpy

    def checked(a):
        assert a.flags.writeable, "torch.from_numpy of a read-only array"
        return real(a)

    monkeypatch.setattr(torch, "from_numpy", checked)
    x = torch.randn(2, 4, 6, dtype=torch.complex64, requires_grad=True)
    w = torch.randn(2, 2, 4, requires_grad=True)
    CF.group_norm(x, 1, w).abs().sum().backward()
    CF.group_norm(x.contiguous()[..., ::2], 1, w).abs().sum().backward()  # strided branch


def test_forward_under_cpu_autocast_and_mismatched_affine_dtypes():
    """Autocast (bf16) keeps the complex forward; a weight or bias of another precision than
    the input is one clear error on every device."""
    m, x = cnn.BatchNorm2d(4), torch.randn(2, 4, 3, 3, dtype=torch.complex64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert m(x).dtype == torch.complex64
    w64, b128 = torch.randn(2, 2, 4, dtype=torch.float64), torch.randn(4, dtype=torch.complex128)
    for dev in ("cpu", "meta"):
        xd = x.to(dev)
        with pytest.raises(TypeError, match="weight must be torch.float32"):
            CF.batch_norm(xd, None, None, w64.to(dev), None, True)
        with pytest.raises(TypeError, match="bias must be torch.complex64"):
            CF.group_norm(xd, 2, None, b128.to(dev))


@pytest.mark.parametrize(
    "norm",
    [
        lambda: cnn.BatchNorm2d(4),
        lambda: cnn.BatchNorm2d(4).eval(),
        lambda: cnn.GroupNorm(2, 4),
        lambda: cnn.InstanceNorm2d(4, affine=True, track_running_stats=True),
        lambda: cnn.LayerNorm([3, 3], mode="whiten"),
    ],
)
def test_a_training_step_under_autocast_equals_full_precision(norm):
    """Under CPU bf16 autocast the whitening norms compute in the input's precision, as torch's
    norms run in float32: output, gradients and running statistics equal those without
    autocast."""
    torch.manual_seed(0)
    x = torch.randn(3, 4, 3, 3, dtype=torch.complex64, requires_grad=True)
    runs = []
    for autocast in (False, True):
        m = norm()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            y = m(x)
        params = [p for p in m.parameters()]
        grads = torch.autograd.grad((y.abs() ** 2).sum(), [x, *params])
        runs.append((y, grads, [b.clone() for b in m.buffers()]))
    (y0, g0, b0), (y1, g1, b1) = runs
    assert y1.dtype == torch.complex64 and torch.equal(y0, y1)
    assert all(torch.equal(a, b) for a, b in zip(g0 + tuple(b0), g1 + tuple(b1)))


@pytest.mark.parametrize(
    "ours",
    [
        lambda: cnn.BatchNorm2d(4),
        lambda: cnn.InstanceNorm2d(4, affine=True, track_running_stats=True),
        lambda: cnn.GroupNorm(2, 4),
    ],
)
def test_an_empty_batch_gives_an_empty_output_as_torch(ours):
    """torch's BatchNorm2d, InstanceNorm2d and GroupNorm return an empty output for an empty
    batch (torch's affine InstanceNorm2d fails on it)."""
    m = ours()
    x = torch.randn(0, 4, 3, 3, dtype=torch.complex64, requires_grad=True)
    y = m(x)
    assert y.shape == x.shape
    y.abs().sum().backward()
    assert x.grad.shape == x.shape
    if getattr(m, "running_mean", None) is not None:  # nothing to average: the statistics stay
        assert torch.equal(m.running_mean, torch.zeros(4, dtype=torch.complex64))
        assert torch.equal(m.running_cov, 0.5 * torch.eye(2)[..., None].expand(2, 2, 4))


def test_a_non_finite_value_spreads_as_the_module_docstring_says():
    """Standard layout: only its channel; channels-last rows: every channel."""
    x = torch.randn(2, 4, 3, 3, dtype=torch.complex64)
    x[0, 1, 0, 0] = float("inf")
    bad = lambda y: (~torch.isfinite(y)).sum((0, 2, 3)).tolist()  # noqa: E731
    assert bad(CF.batch_norm(x, None, None, None, None, True)) == [0, 18, 0, 0]
    xc = x.contiguous(memory_format=torch.channels_last)
    assert bad(CF.batch_norm(xc, None, None, None, None, True)) == [18, 18, 18, 18]


@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    [
        ("BatchNorm1d", (3,), {}),
        ("InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True}),
        ("GroupNorm", (2, 4), {}),
    ],
)
@pytest.mark.parametrize("bias", [True, False])
def test_bias_false_drops_the_shift_as_torch(name, args, kwargs, bias):
    """torch's keyword-only ``bias``: ``False`` keeps the affine weight, drops the bias (its
    state_dict key and its repr say so); the output is the affine map without the shift."""
    ours = getattr(cnn, name)(*args, **kwargs, bias=bias, dtype=torch.complex128)
    theirs = getattr(nn, name)(*args, **kwargs, bias=bias)
    assert ours.weight is not None and (ours.bias is not None) == bias
    rename = {"running_var": "running_cov"}
    assert list(ours.state_dict()) == [rename.get(k, k) for k in theirs.state_dict()]
    assert repr(ours) == repr(theirs)[:-1] + ", dtype=torch.complex128)"
    with_shift = getattr(cnn, name)(*args, **kwargs, dtype=torch.complex128)
    with torch.no_grad():
        with_shift.weight.copy_(torch.randn_like(ours.weight))
        ours.weight.copy_(with_shift.weight)
        with_shift.bias.copy_(torch.randn_like(with_shift.bias))
        if bias:
            ours.bias.copy_(with_shift.bias)
    x = torch.randn(2, args[-1], 5, dtype=torch.complex128)
    shift = with_shift.bias.view(-1, 1)
    torch.testing.assert_close(ours(x), with_shift(x) - (0 if bias else shift))
