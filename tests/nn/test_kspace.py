"""k-space data consistency (``cplxnet.functional.data_consistency``,
``cplxnet.nn.DataConsistency``) against a plain formula with explicit DFT matrices and a loop
over coils, in values and gradients; its special cases (noiseless replacement, Schlemper et
al.'s noisy form, the identity cases); errors."""

from __future__ import annotations

import math

import pytest
import torch

import cplxnet
from cplxnet import functional as CF

C128 = torch.complex128


def _dft(n: int, norm: str, inverse: bool) -> torch.Tensor:
    """The ``n x n`` DFT matrix (its inverse if ``inverse``) with torch's ``norm`` convention."""
    j = torch.arange(n, dtype=torch.float64)
    sign = 1.0 if inverse else -1.0
    w = torch.exp(sign * 2j * math.pi * torch.outer(j, j).to(C128) / n)
    scale = {"ortho": n**-0.5, "backward": 1 / n if inverse else 1.0}.get(norm)
    if scale is None:  # "forward"
        scale = 1.0 if inverse else 1 / n
    return w * scale


def _transform(x, dims, norm, centered, inverse):
    for d in dims:
        n = x.shape[d]
        if centered:  # ifftshift
            x = torch.roll(x, -(n // 2), dims=d)
        x = torch.movedim(torch.movedim(x, d, -1) @ _dft(n, norm, inverse).T, -1, d)
        if centered:  # fftshift
            x = torch.roll(x, n // 2, dims=d)
    return x


def reference(image, kspace, mask, weight=1.0, sensitivity=None, dim=(-2, -1), norm="ortho",
              centered=False, coil_dim=1):  # fmt: skip
    """The data-consistency step written out: per coil, k = F(S_c x); on each entry
    k + w m (k0 - k); back with F^-1; the coils summed with conj(S_c)."""
    dims = [d % kspace.dim() for d in ((dim,) if isinstance(dim, int) else dim)]
    m = mask.to(torch.float64)
    if sensitivity is None:
        k = _transform(image, dims, norm, centered, False)
        return _transform(k + weight * m * (kspace - k), dims, norm, centered, True)
    out = 0
    for c in range(kspace.shape[coil_dim]):
        s = sensitivity.narrow(coil_dim, c, 1)
        k0 = kspace.narrow(coil_dim, c, 1)
        mc = m.narrow(coil_dim, c, 1) if m.dim() == kspace.dim() and m.shape[coil_dim] > 1 else m
        k = _transform(s * image, dims, norm, centered, False)
        out = out + s.conj() * _transform(k + weight * mc * (k0 - k), dims, norm, centered, True)
    return out


def _c(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=C128, generator=g)


CASES = {
    "2d": dict(image=(2, 1, 4, 6), kspace=(2, 1, 4, 6), mask=(1, 1, 1, 6)),
    "coils_centered_backward": dict(
        image=(2, 1, 5, 4), kspace=(2, 3, 5, 4), mask=(5, 4), sens=(2, 3, 5, 4),
        kw=dict(centered=True, norm="backward"),
    ),
    "3d_forward_norm": dict(
        image=(1, 1, 3, 4, 5), kspace=(1, 1, 3, 4, 5), mask=(3, 4, 5),
        kw=dict(dim=(-3, -2, -1), norm="forward"),
    ),
    "one_dim_float_mask_weight": dict(
        image=(2, 7), kspace=(2, 7), mask=(7,), float_mask=True, kw=dict(dim=-1), weight=0.3
    ),
    "coil_dim_2_per_coil_mask": dict(
        image=(2, 3, 1, 4), kspace=(2, 3, 2, 4), mask=(2, 3, 2, 4), sens=(2, 3, 2, 4),
        kw=dict(dim=(1, 3), coil_dim=2, centered=True),
    ),
    "learned_weight_per_entry": dict(
        image=(1, 1, 4, 4), kspace=(1, 2, 4, 4), mask=(4, 4), sens=(1, 2, 4, 4),
        weight_tensor=(1, 1, 1, 4),
    ),
}  # fmt: skip


def _inputs(case):
    image = _c(*case["image"], seed=1).requires_grad_()
    kspace = _c(*case["kspace"], seed=2).requires_grad_()
    g = torch.Generator().manual_seed(3)
    if case.get("float_mask"):
        mask = torch.rand(case["mask"], generator=g, dtype=torch.float64)
    else:
        mask = torch.rand(case["mask"], generator=g) < 0.5
    sens = _c(*case["sens"], seed=4).requires_grad_() if "sens" in case else None
    weight = case.get("weight", 1.0)
    if "weight_tensor" in case:
        weight = torch.rand(case["weight_tensor"], generator=g, dtype=torch.float64)
        weight.requires_grad_()
    return image, kspace, mask, weight, sens


@pytest.mark.parametrize("name", list(CASES))
def test_values_and_gradients_equal_the_formula(name):
    case = CASES[name]
    image, kspace, mask, weight, sens = _inputs(case)
    kw = case.get("kw", {})
    got = CF.data_consistency(image, kspace, mask, weight, sensitivity=sens, **kw)
    want = reference(image, kspace, mask, weight, sens, **kw)
    assert got.shape == image.shape and got.dtype == C128
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    leaves = [t for t in (image, kspace, sens, weight) if isinstance(t, torch.Tensor)]
    v = _c(*got.shape, seed=5)
    g1 = torch.autograd.grad((got * v.conj()).real.sum(), leaves)
    g2 = torch.autograd.grad((want * v.conj()).real.sum(), leaves)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["coils_centered_backward", "learned_weight_per_entry"])
def test_gradcheck(name):
    case = CASES[name]
    image, kspace, mask, weight, sens = _inputs(case)
    kw = case.get("kw", {})
    leaves = [t.detach().requires_grad_() for t in (image, kspace, sens, weight)
              if isinstance(t, torch.Tensor)]  # fmt: skip

    def fn(image, kspace, sens, *w):
        return CF.data_consistency(image, kspace, mask, *(w or (weight,)), sensitivity=sens, **kw)

    assert torch.autograd.gradcheck(fn, tuple(leaves))
    assert torch.autograd.gradgradcheck(fn, tuple(leaves))


def test_noiseless_form_keeps_the_samples_and_is_a_projection():
    x, truth = _c(2, 1, 8, 8, seed=1), _c(2, 1, 8, 8, seed=2)
    mask = torch.zeros(8, dtype=torch.bool)
    mask[[0, 3, 4, 6]] = True
    k0 = torch.fft.fftn(truth, dim=(-2, -1), norm="ortho") * mask
    y = CF.data_consistency(x, k0, mask)
    k = torch.fft.fftn(y, dim=(-2, -1), norm="ortho")
    torch.testing.assert_close(k[..., mask], k0[..., mask])  # the measurements, exactly
    kx = torch.fft.fftn(x, dim=(-2, -1), norm="ortho")
    torch.testing.assert_close(k[..., ~mask], kx[..., ~mask])  # the rest of the estimate
    torch.testing.assert_close(CF.data_consistency(y, k0, mask), y)  # idempotent
    # with all samples taken, the image of the measurements
    full = torch.fft.fftn(truth, dim=(-2, -1), norm="ortho")
    torch.testing.assert_close(CF.data_consistency(x, full, torch.ones(8, 8)), truth)


@pytest.mark.parametrize("lam", [0.1, 1.0, 25.0])
def test_the_noisy_form_is_schlemper_s(lam):
    """w = lambda / (1 + lambda) gives (k + lambda k0) / (1 + lambda) on the sampled entries
    (Schlemper et al. 2018, eq. 8), as their code writes it."""
    x, k0 = _c(1, 1, 6, 6, seed=1), _c(1, 1, 6, 6, seed=2)
    mask = (torch.rand(6, 6, generator=torch.Generator().manual_seed(0)) < 0.4).double()
    k = torch.fft.fft2(x, norm="ortho")
    want = torch.fft.ifft2((1 - mask) * k + mask * (k + lam * k0) / (1 + lam), norm="ortho")
    got = CF.data_consistency(x, k0, mask, lam / (1 + lam))
    torch.testing.assert_close(got, want)


def test_the_identity_cases():
    x, k0 = _c(2, 1, 4, 5, seed=1), _c(2, 3, 4, 5, seed=2)
    torch.testing.assert_close(CF.data_consistency(x, k0[:, :1], torch.ones(4, 5), 0.0), x)
    torch.testing.assert_close(CF.data_consistency(x, k0[:, :1], torch.zeros(4, 5)), x)
    maps = _c(2, 3, 4, 5, seed=3)
    maps = maps / maps.abs().pow(2).sum(1, keepdim=True).sqrt()  # sum_c |S_c|^2 = 1
    got = CF.data_consistency(x, k0, torch.zeros(4, 5), sensitivity=maps)
    torch.testing.assert_close(got, x)


def test_the_output_follows_the_inputs_dtype():
    x = torch.randn(1, 1, 4, 4, dtype=torch.cfloat)
    k0 = torch.randn(1, 1, 4, 4, dtype=torch.cfloat)
    for mask in (torch.rand(4, dtype=torch.float64), torch.ones(4, dtype=torch.bool),
                 torch.ones(4, dtype=torch.int64)):  # fmt: skip
        assert CF.data_consistency(x, k0, mask).dtype == torch.cfloat
    y = CF.data_consistency(x, k0, torch.ones(4), torch.tensor(0.5))
    assert y.dtype == torch.cfloat


def _bad(**over):
    kw = dict(image=torch.zeros(2, 1, 4, 4, dtype=torch.cfloat),
              kspace=torch.zeros(2, 1, 4, 4, dtype=torch.cfloat), mask=torch.ones(4))  # fmt: skip
    kw.update(over)
    return kw


def _with_maps(*image):
    """Bad arguments with 3-coil k-space and maps ``(2, 3, 4, 4)`` and an image of size
    ``image``."""
    coils = dict(kspace=torch.zeros(2, 3, 4, 4, dtype=torch.cfloat),
                 sensitivity=torch.zeros(2, 3, 4, 4, dtype=torch.cfloat))  # fmt: skip
    return _bad(image=torch.zeros(*image, dtype=torch.cfloat), **coils)


BAD = {
    "real image": (_bad(image=torch.zeros(2, 1, 4, 4)), "input must be a complex tensor"),
    "dtypes differ": (
        _bad(kspace=torch.zeros(2, 1, 4, 4, dtype=torch.cdouble)),
        "input is torch.complex64 but kspace is torch.complex128",
    ),
    "sizes differ": (_bad(kspace=torch.zeros(2, 1, 4, 5, dtype=torch.cfloat)), "give them one"),
    "complex mask": (_bad(mask=torch.ones(4, dtype=torch.cfloat)), "bool or real tensor"),
    "mask size": (_bad(mask=torch.ones(3)), "mask of size [3] does not broadcast"),
    "list mask": (_bad(mask=[1, 0, 1, 1]), "mask must be a bool or real tensor"),
    "weight dtype": (_bad(weight=torch.tensor(0.5, dtype=torch.float64)), "real torch.float32"),
    "weight size": (_bad(weight=torch.ones(3)), "weight of size [3] does not broadcast"),
    "weight nan": (_bad(weight=float("nan")), "weight must be finite"),
    "weight str": (_bad(weight="1"), "weight must be a real number or tensor"),
    "dim range": (_bad(dim=(-5, -1)), "dim -5 is out of range for k-space of 4 dims"),
    "dim twice": (_bad(dim=(3, -1)), "names a dim twice"),
    "dim float": (_bad(dim=(2.0, 3)), "dim must be an int or a sequence of ints"),
    "norm": (_bad(norm="unitary"), "norm must be one of backward, ortho, forward"),
    "maps dtype": (
        _bad(sensitivity=torch.zeros(2, 1, 4, 4, dtype=torch.cdouble)),
        "sensitivity is",
    ),
    "maps without a coil dim of 1": (
        _bad(
            image=torch.zeros(2, 4, 4, dtype=torch.cfloat),
            sensitivity=torch.zeros(2, 1, 4, 4, dtype=torch.cfloat),
        ),
        "with size 1 on coil_dim 1",
    ),  # fmt: skip
    "maps size": (
        _bad(sensitivity=torch.zeros(2, 3, 4, 4, dtype=torch.cfloat)),
        "sensitivity of size [2, 3, 4, 4] does not broadcast to the k-space size [2, 1, 4, 4]",
    ),
    "input broadcast by the maps": (
        _with_maps(1, 1, 4, 4),
        "with size 1 on coil_dim 1 ([2, 1, 4, 4]), got input of size [1, 1, 4, 4]",
    ),
    "input of width 1 with maps": (_with_maps(2, 1, 4, 1), "got input of size [2, 1, 4, 1]"),
    "complex32 on the CPU": (
        _bad(
            image=torch.zeros(2, 1, 4, 4, dtype=torch.complex32),
            kspace=torch.zeros(2, 1, 4, 4, dtype=torch.complex32),
        ),
        "no complex32 FFT on the CPU; convert to complex64",
    ),
    "coil_dim str": (_bad(coil_dim="1"), "coil_dim must be an int, got '1'"),
    "coil_dim bool": (_bad(coil_dim=True), "coil_dim must be an int, got True"),
    "centered str": (_bad(centered="no"), "centered must be True or False, got 'no'"),
    "coil dim transformed": (
        _bad(sensitivity=torch.zeros(2, 1, 4, 4, dtype=torch.cfloat), coil_dim=-1),
        "coil_dim -1 is one of the transformed dims",
    ),
    "coil dim range": (
        _bad(sensitivity=torch.zeros(2, 1, 4, 4, dtype=torch.cfloat), coil_dim=4),
        "coil_dim 4 is out of range",
    ),
    "mask more dims": (
        _bad(mask=torch.ones(3, 1, 1, 1, 4)),
        "mask of size [3, 1, 1, 1, 4] does not",
    ),
    "mask more coils": (_bad(mask=torch.ones(2, 2, 4, 4)), "mask of size [2, 2, 4, 4] does not"),
    "weight more dims": (
        _bad(weight=torch.ones(2, 1, 1, 1, 1)),
        "weight of size [2, 1, 1, 1, 1] does",
    ),
    "weight bool": (_bad(weight=True), "weight must be a real number or tensor, got True"),
    "dim empty": (_bad(dim=()), "dim must be an int or a sequence of ints, got ()"),
    "image with the coils, maps": (_with_maps(2, 3, 4, 4), "with size 1 on coil_dim 1"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_is_one_line(name):
    kw, message = BAD[name]
    with pytest.raises((TypeError, ValueError)) as err:
        CF.data_consistency(kw.pop("image"), kw.pop("kspace"), kw.pop("mask"), **kw)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("data_consistency: ")


def test_the_module_learns_its_weight_and_checks_its_options():
    dc = cplxnet.nn.DataConsistency(0.25, learnable=True, dim=(2, 3), dtype=C128)
    assert dc.weight.dtype == torch.float64 and dc.weight.item() == 0.25
    assert list(dc.state_dict()) == ["weight"]
    x, k0 = _c(2, 1, 4, 4, seed=1), _c(2, 3, 4, 4, seed=2)
    maps, mask = _c(2, 3, 4, 4, seed=3), torch.rand(4, 4) < 0.5
    y = dc(x, k0, mask, maps)
    torch.testing.assert_close(y, reference(x, k0, mask, 0.25, maps))
    y.abs().sum().backward()
    assert dc.weight.grad is not None and dc.weight.grad.abs() > 0
    with torch.no_grad():
        dc.weight.fill_(3.0)
    dc.reset_parameters()
    assert dc.weight.item() == 0.25
    assert repr(dc) == (
        "DataConsistency(weight=0.25, learnable=True, dim=(2, 3), norm='ortho', centered=False, "
        "coil_dim=1, dtype=torch.complex128)"
    )
    fixed = cplxnet.nn.DataConsistency(dtype=C128)
    assert fixed.weight is None and list(fixed.parameters()) == [] and not fixed.state_dict()
    torch.testing.assert_close(fixed(x, k0[:, :1], mask), reference(x, k0[:, :1], mask))
    with pytest.raises(TypeError, match="input has dtype torch.complex64 but the module"):
        fixed(x.to(torch.cfloat), k0[:, :1].to(torch.cfloat), mask)
    for bad, message in [
        (dict(dim=(1, 1)), "names a dim twice"),
        (dict(norm="x"), "norm must be one of"),
        (dict(weight=math.inf), "weight must be finite"),
        (dict(weight=torch.tensor(1.0)), "weight must be a real number, got a tensor"),
        (dict(dtype=torch.float32), "complex"),
        (dict(coil_dim=1.7), "coil_dim must be an int, got 1.7"),
        (dict(centered=1), "centered must be True or False, got 1"),
    ]:
        with pytest.raises((TypeError, ValueError), match=message):
            cplxnet.nn.DataConsistency(**bad)


@pytest.mark.parametrize(
    "kw",
    [
        dict(weight=0.4),
        dict(weight=0.6, learnable=True, centered=True, norm="backward"),
        dict(dim=(1, 3), coil_dim=2, norm="forward"),
    ],
)
def test_the_module_passes_its_options(kw):
    dc = cplxnet.nn.DataConsistency(**kw, dtype=C128)
    opts = {k: v for k, v in kw.items() if k != "learnable"}
    coil_dim = kw.get("coil_dim", 1)
    shape = [2, 3, 4, 5]
    image_shape = list(shape)
    image_shape[coil_dim] = 1
    x, k0, maps = _c(*image_shape, seed=1), _c(*shape, seed=2), _c(*shape, seed=3)
    mask = torch.rand(shape, generator=torch.Generator().manual_seed(0)) < 0.5
    torch.testing.assert_close(dc(x, k0, mask, maps), reference(x, k0, mask, sensitivity=maps,
                                                                 **opts))  # fmt: skip


def test_empty_inputs_give_empty_or_zero_images():
    """torch's FFT refuses empty tensors: an empty batch gives an empty image, no coils a sum of
    nothing (zero)."""
    x = torch.zeros(0, 1, 4, 4, dtype=C128)
    assert CF.data_consistency(x, x, torch.ones(4)).shape == (0, 1, 4, 4)
    x, k0, maps = _c(2, 1, 4, 4), torch.zeros(2, 0, 4, 4, dtype=C128), torch.zeros(2, 0, 4, 4)
    got = CF.data_consistency(x, k0, torch.ones(4), sensitivity=maps.to(C128))
    assert torch.equal(got, torch.zeros_like(x))


def test_maps_shared_over_the_batch_broadcast():
    """Maps of one subject for a whole batch, ``(1, C, H, W)``, are the expanded maps."""
    x, k0, maps = _c(2, 1, 4, 5, seed=1), _c(2, 3, 4, 5, seed=2), _c(1, 3, 4, 5, seed=3)
    mask = torch.rand(4, 5, generator=torch.Generator().manual_seed(0)) < 0.5
    got = CF.data_consistency(x, k0, mask, 0.6, sensitivity=maps, centered=True)
    want = reference(x, k0, mask, 0.6, maps.expand(2, 3, 4, 5), centered=True)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_an_empty_batch_gives_a_new_tensor():
    """The empty-input shortcut returns a copy, as the non-empty path does, never ``input``."""
    x = torch.zeros(0, 1, 4, 4, dtype=C128)
    y = CF.data_consistency(x, x, torch.ones(4))
    assert y is not x and y.shape == x.shape


@pytest.mark.parametrize("learnable", [False, True])
def test_compiles_with_dynamic_shapes_in_one_graph(learnable):
    """A fixed float weight is a symbolic float under ``dynamic=True``: checked without leaving
    the graph."""
    dc = cplxnet.nn.DataConsistency(0.5, learnable=learnable, dtype=C128)
    x, k0, maps = _c(2, 1, 4, 5, seed=1), _c(2, 3, 4, 5, seed=2), _c(2, 3, 4, 5, seed=3)
    mask = torch.rand(4, 5, generator=torch.Generator().manual_seed(0)) < 0.5
    torch._dynamo.reset()
    compiled = torch.compile(dc, backend="aot_eager", fullgraph=True, dynamic=True)
    torch.testing.assert_close(compiled(x, k0, mask, maps), dc(x, k0, mask, maps))


def test_a_bool_mask_never_reads_unsampled_kspace():
    """fastMRI's soft DC is ``torch.where(mask, ...)``: NaN or inf in k-space outside a bool mask
    stays out of the image (a real mask multiplies, so there 0 * NaN is NaN)."""
    x, k0 = _c(1, 1, 4, 4, seed=1), _c(1, 1, 4, 4, seed=2)
    mask = torch.tensor([True, False, True, False])
    want = CF.data_consistency(x, k0 * mask, mask, 0.5)
    k0[..., 1], k0[..., 3] = float("nan"), float("inf")
    got = CF.data_consistency(x, k0, mask, 0.5)
    torch.testing.assert_close(got, want)
    assert CF.data_consistency(x, k0, mask.double(), 0.5).isnan().any()
