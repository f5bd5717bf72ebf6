"""Every entry of ``tests/module_db.py`` on the inputs complex-valued imaging and signal work
feeds its layers: exact zeros (zero-padded k-space, masked radar returns, silence), half-zero
inputs, and the sample input scaled to very small and very large magnitudes.

Each input is derived from the entry's own sample input (same shapes and keyword arguments; only
the complex tensor arguments change). In training and in eval mode the forward outputs must be
finite, and the backward of a random real projection of the outputs must give finite gradients
for every complex input and every parameter, as torch's real layers give on the same data: a
norm of an all-zero input is its bias (the eps keeps the denominator positive), an activation at
0 takes the value and the gradient the library documents there (``cardioid``: gradient 1/2;
``mvn``, ``modrelu``: 0 at the origin), and a layer homogeneous in its input stays finite from
1e-20 to 1e15 (complex64) / 1e150 (complex128).

:data:`EXPECTED_GRAD_OVERFLOW` lists where a non-finite gradient is the right answer, and
:data:`TORCH_LIMITS` the cases where torch's own op fails today (each an ``xfail(strict=True)``,
so that a torch that fixes it shows up as an unexpected pass). ``test_scale_equivariance`` also
checks the values, not only their finiteness, for layers whose output scales exactly with their
input.
"""

from __future__ import annotations

import pytest
import torch
from module_db import MODULES, ModuleInfo, make_module, output_tensors, sample_input

C64, C128 = torch.complex64, torch.complex128
CDTYPES = [C64, C128]
TINY = 1e-20
#: large scales whose squares stay finite (|z|^2 ~ 1e30 < 3.4e38 and 1e300 < 1.8e308): a layer
#: that forms |z|^2 (norms, moduli) must not overflow there
HUGE = {C64: 1e15, C128: 1e150}


def _zero_half(t: torch.Tensor) -> torch.Tensor:
    """The trailing half of the last dimension set to zero (a zero-padded k-space line); a last
    dimension of size 1 gets every other entry zero instead."""
    t = t.clone()
    n = t.shape[-1]
    if n > 1:
        t[..., (n + 1) // 2 :] = 0
    else:
        t.view(-1)[::2] = 0
    return t


TRANSFORMS = {
    "zeros": torch.zeros_like,
    "half_zero": _zero_half,
    "tiny": lambda t: t * TINY,
    "huge": lambda t: t * HUGE[t.dtype],
}

#: (entry, dtype or None for both, input) -> why the layer fails there today: each is a limit of
#: torch's own op (the exact value is finite), which the layer calls as torch's layer does
TORCH_LIMITS = {
    ("MultiheadAttention_modulus_nobias", C64, "tiny"): (
        "|q k^T| of 1e-20 inputs is subnormal (~1e-40) in complex64; torch.abs's backward "
        "(torch.sgn) returns inf for a subnormal complex64 (upstream torch), the exact "
        "gradient is a unit phase"
    ),
    **{
        (name, None, "huge"): (
            "torch's complex sigmoid 1/(1 + exp(-z)) is NaN for Re z < -88 (complex64) / -709 "
            "(complex128) with Im z != 0, where sigma(z) ~ exp(z) ~ 0 (torch.nn.LSTMCell("
            "dtype=torch.cfloat), which gate='analytic' calls, gives the same NaN; an input "
            "scale of 100 suffices; away from the poles at i*pi*(2k+1) the gate is finite)"
        )
        for name in (
            "LSTM_analytic",
            "GRU_analytic",
            "LSTMCell_analytic",
            "LSTMCell_analytic_zero_state",
            "GRUCell_analytic",
        )
    },
}

#: (entry, dtype, input) -> why a non-finite gradient is correct there; the forward output must
#: still be finite
EXPECTED_GRAD_OVERFLOW = {
    ("TransformerDecoder", C128, "huge"): (
        "pre-norm cross-attention reads the un-normalised memory (1e150) as keys: the saturated "
        "softmax's backward leaves a rounding residue ~1e-16 |dP| that the keys multiply by "
        "1e150 in each of the two layers (~1e268), and the next norm's backward overflows; "
        "torch's real nn.TransformerDecoder (norm_first=True, RMSNorm, d_model=8, 2 heads: the "
        "packed head width of this entry) overflows on float64 inputs of 1e150 too"
    ),
}


#: (entry, dtype or None for both, input) -> why an infinite output is the exact answer there
EXPECTED_OUTPUT_OVERFLOW = {
    ("DataConsistency_learnable_coils", None, "huge"): (
        "the sensitivity maps enter twice and the image once (sum_c conj(S_c) F^-1(F(S_c x))), "
        "so scaling every complex input by s scales the output by s^3: 1e45 in complex64, "
        "1e450 in complex128, beyond the largest float"
    ),
}


def _defect(info: ModuleInfo, dtype: torch.dtype, kind: str) -> str | None:
    return TORCH_LIMITS.get((info.id, dtype, kind)) or TORCH_LIMITS.get((info.id, None, kind))


def _map_complex(obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj) if obj.is_complex() else obj
    if isinstance(obj, (tuple, list)):
        return type(obj)(_map_complex(o, fn) for o in obj)
    if isinstance(obj, dict):
        return {k: _map_complex(v, fn) for k, v in obj.items()}
    return obj


def _real(t: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


def _finite(t: torch.Tensor) -> bool:
    return bool(torch.isfinite(_real(t)).all())


def _projection_loss(outs: list[torch.Tensor]) -> torch.Tensor | None:
    """A random real projection ``sum <v, out>`` of the differentiable outputs (linear in them,
    so it cannot overflow on its own where the outputs are finite)."""
    gen = torch.Generator().manual_seed(1234)
    terms = []
    for o in outs:
        if o.requires_grad:
            r = _real(o)
            terms.append((r * torch.randn(r.shape, generator=gen, dtype=r.dtype)).sum())
    return sum(terms) if terms else None


def _build(info: ModuleInfo, dtype: torch.dtype, train: bool) -> torch.nn.Module:
    m = make_module(info, dtype=dtype) if info.takes_factory_kwargs else make_module(info)
    return m.train(train)


def _run(m, info, dtype, fn):
    """Forward on the sample input with ``fn`` applied to its complex tensors, which become
    leaves; returns (outputs, input leaves)."""
    args, kwargs = sample_input(info, dtype)
    args, kwargs = _map_complex((args, kwargs), lambda t: fn(t).detach().requires_grad_())
    leaves = [t for t in output_tensors((args, kwargs)) if t.is_complex()]
    assert leaves, f"{info.id}: no complex tensor in the sample input"
    return output_tensors(m(*args, **kwargs)), leaves


def _grads(m, outs, leaves):
    """Gradients of the projection loss: [(name, grad)] over the inputs and the parameters."""
    loss = _projection_loss(outs)
    named = [(f"input{i}", t) for i, t in enumerate(leaves)]
    named += [(n, p) for n, p in m.named_parameters() if p.requires_grad]
    if loss is None:
        return []
    grads = torch.autograd.grad(loss, [t for _, t in named], allow_unused=True)
    return [(n, g) for (n, _), g in zip(named, grads) if g is not None]


def _cases():
    for info in MODULES:
        if not info.complex_input:
            continue
        for dtype in CDTYPES:
            for kind in TRANSFORMS:
                reason = _defect(info, dtype, kind)
                marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
                dname = "c64" if dtype == C64 else "c128"
                yield pytest.param(info, dtype, kind, marks=marks, id=f"{info.id}-{dname}-{kind}")


@pytest.mark.parametrize("info, dtype, kind", list(_cases()))
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_forward_and_gradients_are_finite(info, dtype, kind, train):
    m = _build(info, dtype, train)
    outs, leaves = _run(m, info, dtype, TRANSFORMS[kind])
    assert outs, f"{info.id}: no floating output"
    if {(info.id, dtype, kind), (info.id, None, kind)} & EXPECTED_OUTPUT_OVERFLOW.keys():
        assert not all(_finite(o) for o in outs), f"{info.id} {kind}: expected an overflow"
        return
    for i, o in enumerate(outs):
        assert _finite(o), f"{info.id} {kind}: output {i} not finite"
    grads = _grads(m, outs, leaves)
    if (info.id, dtype, kind) in EXPECTED_GRAD_OVERFLOW:
        return
    bad = [n for n, g in grads if not _finite(g)]
    assert not bad, f"{info.id} {kind}: non-finite gradients of {bad}"


def test_expectations_name_existing_entries():
    ids = {i.id for i in MODULES}
    keys = list(TORCH_LIMITS) + list(EXPECTED_GRAD_OVERFLOW)
    assert {name for name, _, _ in keys} <= ids
    assert {kind for _, _, kind in keys} <= set(TRANSFORMS)


#: entries positively homogeneous of degree 1 in their (complex) input, parameters fixed:
#: f(s x) = s f(x) for s > 0, so input gradients are scale-invariant and parameter gradients
#: scale with s
DEGREE_ONE = {
    "CReLU", "ZReLU", "Cardioid", "ZLeakyReLU", "PReLU", "PReLU_shared_unbatched", "Magnitude",
    "RealPart", "ConcatRealImag", "MeanPool", "MaxMagnitudePool", "MaxMagnitudePool_time",
    "Linear_nobias", "Conv3d_unbatched_groups_dilation", "ConvTranspose1d_unbatched_dilation",
}  # fmt: skip
DEGREE_ONE_PREFIXES = (
    "MaxPool", "AvgPool", "AdaptiveAvgPool", "AdaptiveMaxPool", "SpectralPool", "Upsample",
    "MaxUnpool",
)  # fmt: skip
#: degree 0: f(s x) = f(x), input gradients scale with 1/s
DEGREE_ZERO = {"MVN", "MVN_discrete"}
#: normalisations in training mode (batch statistics): degree 0 once eps is negligible, i.e. at
#: the large scale only
NORM_PREFIXES = ("LayerNorm", "RMSNorm", "BatchNorm", "InstanceNorm", "GroupNorm")


def _degree(info: ModuleInfo, kind: str) -> int | None:
    if info.id in DEGREE_ONE or info.id.startswith(DEGREE_ONE_PREFIXES):
        return 1
    if info.id in DEGREE_ZERO or (kind == "huge" and info.id.startswith(NORM_PREFIXES)):
        return 0
    return None


#: (entry, dtype, scale) -> why the scaled values are wrong today, a limit of torch's own op (a
#: finite but inexact result counts too: the test compares values)
TORCH_EQUIVARIANCE_LIMITS = {
    **{
        ("RMSNorm", dtype, "huge"): (
            "upstream torch: F.rms_norm's backward (which RMSNorm calls on the packed real view) "
            "drops its x <x, g> rsqrt(ms)^3 term when rsqrt(ms)^3 underflows (ms ~ 1e30 / "
            "1e300); torch's real rms_norm gives the same finite, wrong input gradient"
        )
        for dtype in CDTYPES
    },
}


def _equivariance_cases():
    for info in MODULES:
        for dtype in CDTYPES:
            for kind in ("tiny", "huge"):
                if _degree(info, kind) is None:
                    continue
                reason = TORCH_EQUIVARIANCE_LIMITS.get((info.id, dtype, kind)) or _defect(
                    info, dtype, kind
                )
                marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
                dname = "c64" if dtype == C64 else "c128"
                yield pytest.param(info, dtype, kind, marks=marks, id=f"{info.id}-{dname}-{kind}")


@pytest.mark.parametrize("info, dtype, kind", list(_equivariance_cases()))
def test_scale_equivariance(info, dtype, kind):
    """Outputs and gradients at the scale ``ref * s`` equal those at ``ref`` times the power of
    ``s`` the layer's homogeneity gives (random layers in eval mode, norms in training mode)."""
    degree = _degree(info, kind)
    train = info.id.startswith(NORM_PREFIXES)
    ref = 1e3 if train else 1.0  # norms: a reference scale where eps is negligible too
    s = (TINY if kind == "tiny" else HUGE[dtype]) / ref
    results = []
    for scale in (ref, ref * s):
        torch.manual_seed(0)
        m = _build(info, dtype, train)
        outs, leaves = _run(m, info, dtype, lambda t, c=scale: t * c)
        grads = _grads(m, outs, leaves)
        assert grads, f"{info.id}: nothing to differentiate"
        results.append((outs, grads))
    (outs1, grads1), (outs_s, grads_s) = results
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == C64 else {"rtol": 1e-9, "atol": 1e-12}
    for a, b in zip(outs1, outs_s):
        torch.testing.assert_close(b.detach() / s**degree, a.detach(), **tol)
    for (name, a), (_, b) in zip(grads1, grads_s):
        power = degree - 1 if name.startswith("input") else degree
        torch.testing.assert_close(b / s**power, a, **tol, msg=lambda m, n=name: f"{n}: {m}")
