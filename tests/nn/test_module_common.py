"""Generic tests run over every entry of ``tests/module_db.py`` (add modules there, not here)."""

from __future__ import annotations

import contextlib

import module_db
import pytest
import torch
from deferred_init import assert_deferred_init_restores, every_tensor
from module_db import MODULES, ModuleInfo, make_module, output_tensors, sample_input

from cplxnet._utils import real_dtype

CDTYPES = [torch.complex64, torch.complex128]


def _params(info: ModuleInfo):
    return pytest.mark.parametrize("info", info, ids=[i.id for i in info])


ALL = _params(MODULES)

#: entries whose entry-by-entry complex128 gradcheck took seconds to tens of seconds (finite
#: differences over many parameters): checked by random projections instead (gradcheck's fast
#: mode: v^T J u against the finite difference along u, over every input and parameter at
#: once); their layers and the other entries of each family are checked entry by entry
FAST_MODE_GRADCHECK = {
    "TransformerEncoder", "TransformerEncoderLayer_prenorm_whiten",
    "TransformerEncoderLayer_real_projection", "TransformerDecoder", "Transformer",
    "TransformerDecoderLayer_prenorm_whiten_masks", "TransformerDecoderLayer_real_projection",
    "LSTM_proj", "LSTM_2layers_dropout", "UnitaryRNN", "Conv3d",
    "MultiheadAttention_real_projection", "MultiheadAttention_modulus_nobias",
}  # fmt: skip
#: entry-by-entry gradchecks that take seconds: ``slow`` (CI runs them)
SLOW_GRADCHECK = {
    "TransformerEncoderLayer", "TransformerDecoderLayer", "Conv3d_unbatched_groups_dilation",
    "Conv3d_replicate",
}  # fmt: skip


@contextlib.contextmanager
def _default_dtype(dtype):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def _run(m, info, dtype, device=None):
    args, kwargs = sample_input(info, dtype, device)
    return m(*args, **kwargs)


def _assert_tensors_dtype(m, dtype):
    for name, t in list(m.named_parameters()) + list(m.named_buffers()):
        if t.is_complex() or t.is_floating_point():
            assert t.dtype in (dtype, real_dtype(dtype)), (name, t.dtype, dtype)
            if t.is_complex():
                assert t.dtype == dtype, (name, t.dtype)


def test_ids_are_unique():
    ids = [i.id for i in MODULES]
    assert len(ids) == len(set(ids)), "give repeated classes a distinct ModuleInfo.name"
    assert set(ids) >= SLOW_GRADCHECK | FAST_MODE_GRADCHECK


@ALL
@pytest.mark.parametrize("dtype", CDTYPES, ids=["c64", "c128"])
def test_factory_kwargs_and_output_dtype(info, dtype, device):
    """On ``--device`` (default cpu): parameters, buffers and outputs on it, in the dtype."""
    m = make_module(info, dtype=dtype, device=device)
    if info.has_params:
        assert len(list(m.parameters())) > 0
    _assert_tensors_dtype(m, dtype)
    for name, t in [*m.named_parameters(), *m.named_buffers()]:
        assert t.device.type == device.type, (name, t.device)
    for out in output_tensors(_run(m, info, dtype, device)):
        assert out.dtype in (dtype, real_dtype(dtype))
        assert out.device.type == device.type
        assert torch.isfinite(torch.view_as_real(out) if out.is_complex() else out).all()


@ALL
def test_default_dtype_follows_torch_default(info):
    with _default_dtype(torch.float64):
        m = make_module(info)
        _assert_tensors_dtype(m, torch.complex128)
        out = output_tensors(_run(m, info, torch.complex128))[0]
    assert out.dtype in (torch.complex128, torch.float64)


@ALL
def test_state_dict_round_trip(info):
    dtype = torch.complex128
    torch.manual_seed(0)
    src = make_module(info, dtype=dtype)
    with torch.no_grad():  # move away from the (possibly deterministic) init
        for p in src.parameters():
            p.add_(0.1 * torch.randn_like(p))
    src.train()
    _run(src, info, dtype)  # update running statistics, if any
    torch.manual_seed(1)
    dst = make_module(info, dtype=dtype)
    dst.load_state_dict(src.state_dict())
    src.eval(), dst.eval()
    torch.manual_seed(2)
    args, kwargs = sample_input(info, dtype)
    for a, b in zip(output_tensors(src(*args, **kwargs)), output_tensors(dst(*args, **kwargs))):
        assert torch.equal(a, b)


@ALL
def test_reset_parameters_is_deterministic_under_a_seed(info):
    m = make_module(info, dtype=torch.complex64)
    if not hasattr(m, "reset_parameters"):
        assert not info.has_params, "modules with parameters need a public reset_parameters()"
        return
    torch.manual_seed(123)
    m.reset_parameters()
    first = {k: v.clone() for k, v in m.state_dict().items()}
    with torch.no_grad():
        for p in m.parameters():
            p.add_(1.0)
    torch.manual_seed(123)
    m.reset_parameters()
    for k, v in m.state_dict().items():
        assert torch.equal(v, first[k]), k


@ALL
def test_deferred_initialisation_equals_reset_parameters(info):
    """Built on the meta device, ``to_empty`` (whose memory is filled with NaN here), then
    ``reset_parameters()``: every parameter and buffer as after ``reset_parameters()`` under the
    same seed on a CPU build; a buffer no reset rebuilds would stay NaN."""
    if not info.takes_factory_kwargs:
        return
    fresh = make_module(info, dtype=torch.complex64)
    deferred = make_module(info, dtype=torch.complex64, device="meta").to_empty(device="cpu")
    if not hasattr(fresh, "reset_parameters"):
        assert not every_tensor(fresh), "modules with tensors need a public reset_parameters()"
        return
    assert_deferred_init_restores(fresh, deferred)


@pytest.mark.parametrize(
    "info",
    [
        pytest.param(i, id=i.id, marks=[pytest.mark.slow] * (i.id in SLOW_GRADCHECK))
        for i in MODULES
    ],
)
def test_gradcheck_complex128_inputs_and_params(info):
    if not info.exact_grad:
        pytest.skip("surrogate gradient (straight-through): its own test checks the backward")
    m = make_module(info, dtype=torch.complex128)
    if info.is_random:
        m.eval()
    args, kwargs = sample_input(info, torch.complex128)
    names = [n for n, p in m.named_parameters() if p.requires_grad]
    params = [
        p.detach().clone().requires_grad_() for n, p in m.named_parameters() if p.requires_grad
    ]
    diff = [
        i
        for i, a in enumerate(args)
        if isinstance(a, torch.Tensor) and (a.is_complex() or a.is_floating_point())
    ]
    leaves = [args[i].detach().clone().requires_grad_() for i in diff] + params
    assert leaves, "nothing to differentiate"

    def fn(*tensors):
        call_args = list(args)
        for i, t in zip(diff, tensors[: len(diff)]):
            call_args[i] = t
        p = dict(zip(names, tensors[len(diff) :]))
        return tuple(output_tensors(torch.func.functional_call(m, p, tuple(call_args), kwargs)))

    assert torch.autograd.gradcheck(fn, tuple(leaves), fast_mode=info.id in FAST_MODE_GRADCHECK)


@ALL
def test_repr_and_extra_repr(info):
    m = make_module(info, dtype=torch.complex64)
    text = repr(m)
    assert type(m).__name__ in text
    if info.args or info.kwargs or info.has_params:
        assert m.extra_repr(), f"{type(m).__name__} should describe its configuration"


@_params([i for i in MODULES if i.complex_input])
def test_real_input_rejected_or_handled(info):
    """A real input to a complex module gets a clear TypeError naming the module; modules that
    support real inputs (parameter-free ones) must give a real output."""
    m = make_module(info, dtype=torch.complex64)
    args, kwargs = sample_input(info, torch.complex64)
    real_args = (args[0].real.contiguous(),) + tuple(args[1:])
    if info.supports_real and not info.takes_factory_kwargs:
        for out in output_tensors(m(*real_args, **kwargs)):
            assert not out.is_complex()
        return
    with pytest.raises(TypeError, match=type(m).__name__):
        m(*real_args, **kwargs)


@_params([i for i in MODULES if i.complex_input and i.takes_factory_kwargs])
def test_precision_mismatch_is_a_clear_error(info):
    m = make_module(info, dtype=torch.complex128)
    args, kwargs = sample_input(info, torch.complex64)
    with pytest.raises(TypeError, match=f"{type(m).__name__}: .*complex64.*complex128"):
        m(*args, **kwargs)


def _as_complex(a):
    if isinstance(a, torch.Tensor) and a.is_floating_point():
        return a.to(torch.complex128)
    return a


def _copy_real_into_complex(real: torch.nn.Module, comp: torch.nn.Module) -> None:
    """The complex module with the real module's values: a complex parameter gets ``p + 0i``, a
    real one of the same shape the same values, a split-field ``(2, ...)`` one the real values
    in its real half (its imaginary half, acting on zero imaginary parts, stays random)."""
    cp = dict(comp.named_parameters())
    assert set(cp) == {n for n, _ in real.named_parameters()}, "real twin names its parameters"
    with torch.no_grad():
        for name, pr in real.named_parameters():
            pc = cp[name]
            if pc.is_complex():
                pc.copy_(torch.complex(pr, torch.zeros_like(pr)))
            elif pc.shape == pr.shape:
                pc.copy_(pr)
            else:
                assert pc.shape == (2, *pr.shape), (name, pc.shape, pr.shape)
                pc[0].copy_(pr)
                pc[1].normal_()


@_params([i for i in MODULES if i.supports_real])
def test_real_twin(info):
    """Modules that also run real-valued: a real dtype gives real parameters and outputs, and
    those outputs are the real parts of the complex module's, with the same parameters, on the
    same input with zero imaginary parts."""
    torch.manual_seed(0)
    m = make_module(info, dtype=torch.float64)
    for p in m.parameters():
        assert p.dtype == torch.float64
    with torch.no_grad():  # away from the init: gains not 1, biases not 0
        for name, p in m.named_parameters():
            gain = "weight" in name and p.dim() == 1
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if gain else 0.0))
    m.eval()
    mc = m
    if info.takes_factory_kwargs:
        mc = make_module(info, dtype=torch.complex128).eval()
        _copy_real_into_complex(m, mc)
    args, kwargs = sample_input(info, torch.float64)
    outs = output_tensors(m(*args, **kwargs))
    cargs = tuple(_as_complex(a) for a in args)
    couts = output_tensors(mc(*cargs, **{k: _as_complex(v) for k, v in kwargs.items()}))
    assert outs and len(outs) == len(couts)
    for out, cout in zip(outs, couts):
        assert out.dtype == torch.float64
        torch.testing.assert_close(out, cout.real if cout.is_complex() else cout)


#: compile entries in the fast subset (one per kind of layer; the others, seconds each, ``slow``)
FAST_COMPILE = {
    "Linear", "ModReLU", "CReLU", "MultiheadAttention", "Conv2d_unbatched", "MaxPool2d",
    "MaxUnpool2d", "AvgPool1d", "Upsample", "BatchNorm2d", "GroupNorm", "LSTMCell", "MSELoss",
}  # fmt: skip
#: compile entries left out (entry: its twin running the same cplxnet code): interpolate passes
#: the mode to torch unchanged; the 2-D and 3-D classes differ only in the ranks they accept
SAME_COMPILE_PATH = {
    "Upsample_bilinear": "Upsample", "Upsample_trilinear": "Upsample",
    "BatchNorm3d": "BatchNorm2d", "ConvTranspose2d": "ConvTranspose3d",
}  # fmt: skip
COMPILED = [i for i in MODULES if i.compile_backend and i.id not in SAME_COMPILE_PATH]


@pytest.mark.parametrize(
    "info",
    [
        pytest.param(i, id=i.id, marks=[pytest.mark.slow] * (i.id not in FAST_COMPILE))
        for i in COMPILED
    ],
)
def test_torch_compile_matches_eager(info):
    torch._dynamo.reset()
    m = make_module(info, dtype=torch.complex64).eval()
    args, kwargs = sample_input(info, torch.complex64)
    args = tuple(
        a.requires_grad_() if isinstance(a, torch.Tensor) and a.is_complex() else a for a in args
    )
    compiled = torch.compile(m, backend=info.compile_backend)
    eager_out = output_tensors(m(*args, **kwargs))
    comp_out = output_tensors(compiled(*args, **kwargs))
    for a, b in zip(eager_out, comp_out):
        torch.testing.assert_close(b, a)
    # gradients through the compiled module match eager
    loss = sum(torch.view_as_real(o).sum() if o.is_complex() else o.sum() for o in comp_out)
    grads_c = torch.autograd.grad(loss, [args[0], *m.parameters()], allow_unused=True)
    loss_e = sum(torch.view_as_real(o).sum() if o.is_complex() else o.sum() for o in eager_out)
    grads_e = torch.autograd.grad(loss_e, [args[0], *m.parameters()], allow_unused=True)
    for a, b in zip(grads_e, grads_c):
        if a is not None:
            torch.testing.assert_close(b, a)


#: stacks of layers, without a dtype of their own
_CONTAINERS = {"TransformerEncoder", "TransformerDecoder"}


def test_compile_entries_exist():
    """Linear and at least one activation are compile-tested (attention adds its own entry)."""
    ids = {i.cls.__name__ for i in MODULES if i.compile_backend}
    assert {"Linear", "CReLU"} <= ids
    compiled = {i.id for i in MODULES if i.compile_backend}
    assert compiled >= FAST_COMPILE | set(SAME_COMPILE_PATH) | set(SAME_COMPILE_PATH.values())
    assert not set(SAME_COMPILE_PATH.values()) & set(SAME_COMPILE_PATH)
    assert module_db.MODULES is MODULES


@_params([i for i in MODULES if i.takes_factory_kwargs and i.id not in _CONTAINERS])
@pytest.mark.parametrize("dtype", [None, torch.complex128], ids=["default", "c128"])
def test_public_dtype_is_the_factory_dtype_and_shown(info, dtype):
    """Every module built for a dtype keeps it one way: the public read-only ``dtype``
    (cplxnet._utils.HasDtype), shown as ``dtype=`` in its repr. (TransformerEncoder and
    TransformerDecoder are containers: their layers have the dtype.)"""
    m = make_module(info, dtype)
    want = torch.complex64 if dtype is None else dtype
    assert m.dtype == want
    assert f"dtype={want}" in m.extra_repr()


@_params([i for i in MODULES if i.complex_input])
def test_conjugate_view_input_equals_its_resolved_copy(info):
    """A lazily conjugated input (``x.conj()``, as torch's own complex layers accept) gives the
    values and gradients of the same input materialised (``x.conj().resolve_conj()``)."""
    m = make_module(info, dtype=torch.complex128)
    if info.is_random:
        m.eval()
    args, kwargs = sample_input(info, torch.complex128)
    flip = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_complex()]
    assert flip, "no complex input to conjugate"
    results = []
    for lazy in (True, False):
        leaves = [args[i].detach().clone().requires_grad_() for i in flip]
        call = list(args)
        for i, leaf in zip(flip, leaves):
            call[i] = leaf.conj() if lazy else leaf.conj().resolve_conj()
        assert call[flip[0]].is_conj() == lazy
        outs = output_tensors(m(*call, **kwargs))
        m.zero_grad()
        sum(o.real.sum() + o.imag.sum() if o.is_complex() else o.sum() for o in outs).backward()
        results.append(outs + [leaf.grad for leaf in leaves] + [p.grad for p in m.parameters()])
    for lazy, eager in zip(*results):
        if eager is None:
            assert lazy is None
        else:
            torch.testing.assert_close(lazy, eager)


#: entries whose backward reads their output, as torch's relu, tanh and sigmoid do: an in-place
#: op on it is refused by autograd ("modified by an inplace operation"), for torch's layers too
SAVES_OUTPUT = {"CReLU", "SplitTanh", "SplitSigmoid"}
#: entries served by the compiled complex64 kernels when they are switched on
COMPILED_KERNELS = {"LayerNorm", "LayerNorm_whiten", "ModReLU", "Cardioid"}


@pytest.mark.parametrize(
    "info, compiled",
    [(i, False) for i in MODULES] + [(i, True) for i in MODULES if i.id in COMPILED_KERNELS],
    ids=[i.id for i in MODULES] + [f"{i.id}-compiled-kernels" for i in MODULES
                                   if i.id in COMPILED_KERNELS],
)  # fmt: skip
def test_in_place_ops_on_the_output_as_torch_layers_allow(info, compiled):
    """A residual block's ``out = bn(conv(x)); out += identity; relu_(out)``: an in-place op on
    a layer's output trains and gives the gradients of the out-of-place op (autograd refuses it
    on a custom Function's output that is a view)."""
    import cplxnet.functional as CF

    grads = []
    previous = CF.use_compiled_kernels(compiled)
    try:
        for in_place in (False, True):
            torch.manual_seed(0)
            m = make_module(info, torch.complex64 if info.takes_factory_kwargs else None)
            m = m.eval() if info.is_random else m
            args, kwargs = sample_input(info, torch.complex64)
            leaves = list(m.parameters())
            if info.complex_input:  # a non-leaf input, as inside a network
                leaves.append(args[0].detach().requires_grad_())
                args = (leaves[-1] * 1, *args[1:])
            out = output_tensors(m(*args, **kwargs))[0]
            if not out.requires_grad:
                pytest.skip("no differentiable output")
            if not in_place:
                out = (out + 1) * 2
            elif info.id in SAVES_OUTPUT:
                out.add_(1)
                with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                    (out.abs() ** 2).sum().backward()
                return
            else:
                out.add_(1).mul_(2)
            (out.abs() ** 2).sum().backward()
            grads.append([t.grad for t in leaves])
    finally:
        CF.use_compiled_kernels(previous)
    assert sum(i.id in COMPILED_KERNELS for i in MODULES) == len(COMPILED_KERNELS)
    assert grads[0] and any(g is not None for g in grads[0])
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a)
