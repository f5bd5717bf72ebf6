"""Complex initialisers: total variance E|w|^2 on a large draw, unitarity, errors; complextorch's
xavier/kaiming checked against the same targets."""

import math

import complextorch.nn.init as ct_init
import pytest
import torch

from cplxnet import init as cinit

DT = torch.complex128
TOL = 0.03  # relative; the std of the sample mean of |w|^2 over 262144 draws is < 0.4%


def _total_var(w):
    return (w.abs() ** 2).mean().item()


def _check(w, target):
    assert abs(_total_var(w) / target - 1) < TOL, (_total_var(w), target)
    # real and imaginary parts share the variance and are centred
    assert abs(w.real.var().item() / (target / 2) - 1) < TOL
    assert abs(w.imag.var().item() / (target / 2) - 1) < TOL
    assert abs(w.mean().abs().item()) < 0.01 * math.sqrt(target)


@pytest.mark.parametrize("shape", [(512, 512), (256, 1024), (128, 64, 3)])
@pytest.mark.parametrize("fn", ["xavier_uniform_", "xavier_normal_"])
def test_glorot_total_variance(fn, shape):
    w = torch.empty(shape, dtype=DT)
    getattr(cinit, fn)(w, gain=1.5)
    rf = math.prod(shape[2:])
    fan_in, fan_out = shape[1] * rf, shape[0] * rf
    _check(w, 2 * 1.5**2 / (fan_in + fan_out))


@pytest.mark.parametrize("mode", ["fan_in", "fan_out"])
@pytest.mark.parametrize("fn", ["kaiming_uniform_", "kaiming_normal_"])
def test_he_total_variance(fn, mode):
    w = torch.empty(256, 1024, dtype=DT)
    getattr(cinit, fn)(w, mode=mode, nonlinearity="relu")
    fan = 1024 if mode == "fan_in" else 256
    _check(w, 2.0 / fan)
    getattr(cinit, fn)(w, a=0.1, mode=mode, nonlinearity="leaky_relu")
    _check(w, 2.0 / (1 + 0.01) / fan)


@pytest.mark.parametrize("criterion", ["glorot", "he"])
def test_rayleigh_variance_and_uniform_phase(criterion):
    w = torch.empty(512, 512, dtype=DT)
    cinit.rayleigh_(w, criterion)
    target = 2 / 1024 if criterion == "glorot" else 2 / 512
    _check(w, target)
    hist = torch.histc(torch.angle(w).flatten(), bins=8, min=-math.pi, max=math.pi)
    assert (hist / w.numel() - 1 / 8).abs().max() < 0.01


@pytest.mark.parametrize("shape", [(64, 64), (96, 32), (32, 96), (16, 8, 3)])
def test_unitary(shape):
    w = torch.empty(shape, dtype=DT)
    cinit.unitary_(w, gain=2.0)
    m = w.reshape(shape[0], -1)
    rows, cols = m.shape
    eye = torch.eye(min(rows, cols), dtype=DT)
    gram = m.mH @ m if rows >= cols else m @ m.mH
    torch.testing.assert_close(gram, 4.0 * eye, atol=1e-5, rtol=0)


def test_unitary_complex64_and_haar_phases():
    w = cinit.unitary_(torch.empty(128, 128, dtype=torch.complex64))
    torch.testing.assert_close(w.mH @ w, torch.eye(128, dtype=torch.complex64), atol=1e-5, rtol=0)
    # phase correction: the diagonal of Haar matrices has uniform phase (without it, QR's
    # convention makes R's diagonal real positive and biases Q)
    diag_phases = torch.cat(
        [
            torch.angle(torch.diagonal(cinit.unitary_(torch.empty(64, 64, dtype=DT))))
            for _ in range(20)
        ]
    )
    assert abs(diag_phases.mean().item()) < 0.3
    assert (diag_phases < 0).double().mean().item() > 0.35


def test_generator_makes_draws_reproducible():
    a, b = torch.empty(8, 8, dtype=DT), torch.empty(8, 8, dtype=DT)
    for fn in ("xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"):
        getattr(cinit, fn)(a, generator=torch.Generator().manual_seed(1))
        getattr(cinit, fn)(b, generator=torch.Generator().manual_seed(1))
        assert torch.equal(a, b)
    cinit.rayleigh_(a, generator=torch.Generator().manual_seed(2))
    cinit.rayleigh_(b, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b)
    cinit.unitary_(a, generator=torch.Generator().manual_seed(3))
    cinit.unitary_(b, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b)


def test_works_on_parameters_in_place():
    p = torch.nn.Parameter(torch.empty(64, 32, dtype=torch.complex64))
    assert cinit.xavier_normal_(p) is p
    assert p.requires_grad and p.grad_fn is None


def test_errors():
    with pytest.raises(TypeError, match="cplxnet.init.xavier_uniform_: expects a complex tensor"):
        cinit.xavier_uniform_(torch.empty(3, 3))
    msg = "unknown mode 'fan_avg'; valid modes are 'fan_in', 'fan_out'"
    with pytest.raises(ValueError, match=msg):
        cinit.kaiming_normal_(torch.empty(3, 3, dtype=DT), mode="fan_avg")
    with pytest.raises(ValueError, match="at least 2 dims"):
        cinit.xavier_normal_(torch.empty(3, dtype=DT))
    with pytest.raises(ValueError, match="valid criteria are 'glorot', 'he'"):
        cinit.rayleigh_(torch.empty(3, 3, dtype=DT), "lecun")
    with pytest.raises(ValueError, match="cplxnet.init.kaiming_uniform_: Unsupported nonlin"):
        cinit.kaiming_uniform_(torch.empty(3, 3, dtype=DT), nonlinearity="swish")


@pytest.mark.parametrize(
    "fn", ["xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]
)
def test_complextorch_initialisers_hit_the_same_targets(fn):
    w = torch.empty(512, 512, dtype=DT)
    getattr(ct_init, fn)(w)
    target = 2 / 1024 if fn.startswith("xavier") else 2 / 512  # kaiming default: leaky_relu a=0
    _check(w, target)


def test_torch_uniform_inits_double_the_complex_variance():
    """Why cplxnet.init exists: in torch 2.13 the *uniform* initialisers (and so the default init
    of nn.Linear/nn.Conv with a complex dtype) draw each part with the full real variance, twice
    the target; the normal ones happen to be right (complex normal_ splits the variance)."""
    for fn, target in [("xavier_uniform_", 2 / 1024), ("kaiming_uniform_", 2 / 512)]:
        w = torch.empty(512, 512, dtype=DT)
        getattr(torch.nn.init, fn)(w)
        assert abs(_total_var(w) / target - 2) < 2 * TOL
    for fn, target in [("xavier_normal_", 2 / 1024), ("kaiming_normal_", 2 / 512)]:
        w = torch.empty(512, 512, dtype=DT)
        getattr(torch.nn.init, fn)(w)
        assert abs(_total_var(w) / target - 1) < TOL


# ---- laws beyond the variance, torch's defaults, edge cases ------------------------------------
FNS = ["xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]


@pytest.mark.parametrize("fn", FNS)
def test_defaults_are_torchs(fn):
    import inspect

    ours = inspect.signature(getattr(cinit, fn)).parameters
    theirs = inspect.signature(getattr(torch.nn.init, fn)).parameters
    assert list(ours) == list(theirs)
    assert [p.default for p in ours.values()] == [p.default for p in theirs.values()]
    ours = inspect.signature(cinit.unitary_).parameters
    theirs = inspect.signature(torch.nn.init.orthogonal_).parameters
    assert [(n, p.default) for n, p in ours.items()] == [(n, p.default) for n, p in theirs.items()]


@pytest.mark.parametrize("fn", ["xavier_uniform_", "kaiming_uniform_"])
def test_uniform_parts_reach_their_bound_and_no_further(fn):
    w = getattr(cinit, fn)(
        torch.empty(256, 512, dtype=DT), generator=torch.Generator().manual_seed(0)
    )
    var = 2 / 768 if fn.startswith("xavier") else 1 / 256  # kaiming: leaky_relu a=0, gain^2=2
    bound = math.sqrt(3 * var / 2)
    parts = torch.view_as_real(w)
    assert parts.abs().max().item() <= bound
    assert parts.abs().max().item() > 0.999 * bound


def test_kaiming_reads_the_negative_slope():
    w = cinit.kaiming_uniform_(torch.empty(512, 512, dtype=DT), a=math.sqrt(5))  # nn.Linear's
    _check(w, (2 / (1 + 5)) / 512)


@pytest.mark.parametrize("criterion", ["glorot", "he"])
def test_rayleigh_modulus_is_rayleigh_on_a_rectangular_weight(criterion):
    stats = pytest.importorskip("scipy.stats")
    w = cinit.rayleigh_(torch.empty(200, 100, dtype=DT), criterion,
                        generator=torch.Generator().manual_seed(0))  # fmt: skip
    sigma = 1 / math.sqrt(300 if criterion == "glorot" else 100)
    assert stats.kstest(w.abs().flatten().numpy(), stats.rayleigh(scale=sigma).cdf).pvalue > 1e-3


def test_unitary_matrices_are_haar_no_bias_on_the_diagonal():
    """Without the phase correction QR's positive diagonal of R biases Q: E[Re U_11] is about
    -0.14 for 4 x 4 (Haar: 0)."""
    gen = torch.Generator().manual_seed(0)
    d = torch.stack([cinit.unitary_(torch.empty(4, 4, dtype=DT), generator=gen)[0, 0]
                     for _ in range(3000)])  # fmt: skip
    assert abs(d.real.mean().item()) < 0.04 and abs(d.imag.mean().item()) < 0.04


@pytest.mark.parametrize("fn", [*FNS, "rayleigh_", "unitary_"])
def test_empty_tensors_conjugate_views_and_complex32(fn):
    init = getattr(cinit, fn)
    empty = torch.empty(0, 5, dtype=DT)
    if fn == "unitary_":
        assert init(empty) is empty
    else:
        with pytest.warns(UserWarning, match="zero-element tensors is a no-op"):
            assert init(empty) is empty
    base = torch.zeros(64, 32, dtype=DT)
    view = base.conj()
    assert init(view, generator=torch.Generator().manual_seed(0)) is view
    plain = init(torch.zeros(64, 32, dtype=DT), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(view.resolve_conj(), plain.conj())  # the same draw, conjugated
    half = init(torch.zeros(64, 32, dtype=torch.complex32))
    assert half.dtype == torch.complex32 and bool(half.abs().float().gt(0).any())


def test_mode_is_case_insensitive_as_torchs():
    a = cinit.kaiming_normal_(torch.empty(8, 4, dtype=DT), mode="FAN_OUT",
                              generator=torch.Generator().manual_seed(0))  # fmt: skip
    b = cinit.kaiming_normal_(torch.empty(8, 4, dtype=DT), mode="fan_out",
                              generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert torch.equal(a, b)
