"""``torch.compile`` runs every model of the zoo (the 4 classifier families and the decoder,
complex and real) with outputs and gradients matching eager.

The tests use ``backend="aot_eager"`` (dynamo graph capture + AOTAutograd, the part where complex
tensors and graph breaks can fail) because inductor's code generation takes 10-60 s per tiny
model on 2 cores, too long for the suite; inductor itself is exercised by
``benchmarks/models.py`` (its compile rows) and by ``cplxnet train --compile``, and here by one
training step of the modulus activations between convolutions (the opaque operators of
:mod:`cplxnet.functional.opaque`; the others of that test are ``slow``).
Embedding tables use dense gradients, as ``cplxnet train --compile`` does (the sparse backward of
packed complex tables does not compile in torch 2.13).
"""

from __future__ import annotations

import pytest
import torch

import cplxnet.functional as CF
import cplxnet.models as models
import cplxnet.nn as cnn
from cplxnet.functional.activation import _modrelu_autograd

V, B, L = 40, 3, 7
WIDTHS = {
    "fasttext": {},
    "cnn": {"num_filters": 4, "kernel_sizes": (2, 3)},
    "lstm": {"hidden_size": 4},
    "transformer": {"num_heads": 2, "dim_feedforward": 16, "attention_dropout": 0.0},
    "decoder": {"num_layers": 1, "num_heads": 2, "dim_feedforward": 16, "attention_dropout": 0.0},
}
# complex-order replaces the word table (the paper's setting); the word-table path (cplxnet's
# packed complex Embedding) with encoding "none" for one family
CASES = [(f, c, "complex-order") for f in WIDTHS for c in (True, False)]
CASES += [("cnn", True, "none")]


def _model(family: str, complex_: bool, encoding: str) -> torch.nn.Module:
    cfg = models.make_config(
        family,
        vocab_size=V,
        **({} if family == "decoder" else {"num_classes": 3}),
        d_model=8,
        complex=complex_,
        encoding=encoding,
        sparse_embeddings=False,
        dropout=0.0,
        max_len=16,
        **WIDTHS[family],
    )
    torch.manual_seed(0)
    return models.build_model(cfg, dtype=torch.float64)


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, V, (B, L), generator=g)
    mask = torch.zeros(B, L, dtype=torch.bool)
    mask[0, 5:] = True  # padding at the end of two sequences
    mask[2, 3:] = True
    return ids.masked_fill(mask, 0), mask


@pytest.mark.parametrize(
    ("family", "complex_", "encoding"),
    # seconds per model: the complex FastText in the fast subset, the others slow
    [pytest.param(*c, marks=[pytest.mark.slow] * (c[:2] != ("fasttext", True))) for c in CASES],
)
def test_compiled_model_matches_eager(family, complex_, encoding):
    torch._dynamo.reset()
    model = _model(family, complex_, encoding)
    ids, mask = _batch()
    compiled = torch.compile(model, backend="aot_eager")

    out = compiled(ids, mask)
    out.square().sum().backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)

    ref = model(ids, mask)
    ref.square().sum().backward()
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    want = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert got.keys() == want.keys() and want
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-9, atol=1e-10, msg=name)

    if family == "transformer" and complex_:  # a second length recompiles and still matches
        ids2, mask2 = ids[:, :5], mask[:, :5]
        got2 = compiled(ids2, mask2)
        torch.testing.assert_close(got2, model(ids2, mask2), rtol=1e-10, atol=1e-10)


def test_compile_covers_every_family_both_fields():
    families = {*models.FAMILIES, *models.LM_FAMILIES}
    assert {(f, c) for f, c, _ in CASES} == {(f, c) for f in families for c in (True, False)}


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
@pytest.mark.parametrize("with_lengths", [False, True])
def test_split_gate_rnns_compile_in_training_on_data_without_grad(name, with_lengths):
    """On raw data (no input gradient) in training, AOTAutograd cannot trace torch's oneDNN
    RNN kernel; compiled, the split-gate LSTM/GRU run their scan over time instead, with and
    without lengths, in one graph, matching eager in outputs and parameter gradients."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    rnn = getattr(cnn, name)(5, 4, batch_first=True, bidirectional=True)
    x = torch.randn(2, 7, 5, dtype=torch.complex64)
    kwargs = {"lengths": torch.tensor([7, 4])} if with_lengths else {}
    compiled = torch.compile(rnn, backend="aot_eager", fullgraph=True)
    outs = [m(x, **kwargs)[0] for m in (rnn, compiled)]
    torch.testing.assert_close(outs[1], outs[0])
    grads = [torch.autograd.grad(o.abs().sum(), list(rnn.parameters())) for o in outs]
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a)


def _train_step_matches_eager(make, x: torch.Tensor, backend: str = "inductor") -> None:
    """A compiled training step (``fullgraph=True``) gives eager's outputs and gradients."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    eager, model = make(), make()
    model.load_state_dict(eager.state_dict())
    outs = [m(x) for m in (eager, torch.compile(model, backend=backend, fullgraph=True))]
    for out in outs:
        out.abs().sum().backward()
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(model.named_parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4, msg=name)


MODULUS_ACTIVATIONS = {
    "ModReLU": lambda: cnn.ModReLU((3, 1, 1), bias_init=-0.1),
    "Cardioid": cnn.Cardioid,
    "ModTanh": cnn.ModTanh,
    "ZLeakyReLU": cnn.ZLeakyReLU,
}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=[pytest.mark.slow] * (n != "ModReLU")) for n in MODULUS_ACTIVATIONS],
)
def test_modulus_activations_between_convolutions_train_under_inductor(name):
    """With inductor (the default back end) the gradient reaches an activation from a
    convolution in a channels-last layout, where inductor's own lowering of these activations'
    complex backward fails in torch 2.13; compiled, they run as the opaque operators of
    :mod:`cplxnet.functional.opaque`, and a training step equals eager (about 15 s each)."""
    activation = MODULUS_ACTIVATIONS[name]
    x = torch.randn(2, 3, 8, 8, dtype=torch.complex64)
    _train_step_matches_eager(
        lambda: torch.nn.Sequential(
            cnn.Conv2d(3, 3, 3, padding=1), activation(), cnn.Conv2d(3, 4, 3, padding=1)
        ),
        x,
    )


@pytest.mark.slow
def test_zoo_unet_with_modrelu_trains_under_inductor():
    x = torch.randn(2, 1, 8, 8, dtype=torch.complex64)
    _train_step_matches_eager(lambda: models.UNet(1, 1, 4, 1, activation="modrelu"), x)


def test_opaque_activations_only_while_compiling_for_autograd():
    """Compiled, the activations appear as ``cplxnet::activation`` calls; exported, as aten ops
    only (an exported program runs without cplxnet); eager and inside ``torch.func`` they never
    call the operator."""
    from cplxnet.functional import opaque

    m = torch.nn.Sequential(cnn.ModReLU(3, bias_init=-0.1), cnn.Cardioid(), cnn.ModTanh())
    x = torch.randn(2, 3, dtype=torch.complex64)
    calls = []

    def count(gm, example_inputs):
        calls.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm

    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(m, backend=count, fullgraph=True)(x), m(x))
    assert sum("cplxnet.activation" in c for c in calls) == 3, calls
    exported = torch.export.export(m, (x,))
    targets = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    assert targets and not any("cplxnet" in t for t in targets), targets
    assert not opaque.applies(x)
    seen = []
    out = torch.func.vmap(lambda t: (seen.append(opaque.applies(t)), m(t))[1])(x)
    assert seen == [False]
    torch.testing.assert_close(out, m(x))


def test_opaque_activations_do_not_recompile_on_the_second_step():
    """The first run of the operator sets its re-entry flag; a compiled model must not read that
    as a changed global and compile again on the next step (a second compile of a U-Net takes
    seconds to minutes)."""
    from cplxnet.functional import opaque

    m = torch.nn.Sequential(cnn.Conv2d(2, 2, 3, padding=1), cnn.ModReLU((2, 1, 1)))
    x = torch.randn(2, 2, 6, 6, dtype=torch.complex64)
    torch._dynamo.reset()
    vars(opaque._INSIDE).clear()  # a fresh thread's flag, as in a new process
    compiled = torch.compile(m, backend="aot_eager")
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(3):
            compiled(x).abs().sum().backward()


@pytest.mark.parametrize("zs,bs", [((2, 3), (3,)), ((3,), (2, 3)), ((), ()), ((0, 3), (3,))])
def test_opaque_operator_fake_matches_real(zs, bs):
    """torch.library.opcheck: the fake implementation gives the real one's shape, dtype and
    strides (a bias of more dims than z, 0-dim, empty, transposed input)."""
    z = torch.randn(zs, dtype=torch.complex64, requires_grad=True)
    b = torch.randn(bs, requires_grad=True)
    torch.library.opcheck(torch.ops.cplxnet.activation.default, ("modrelu", z, b, 0.0))
    zt = torch.randn(4, 3, dtype=torch.complex64).t().requires_grad_()
    torch.library.opcheck(torch.ops.cplxnet.activation.default, ("cardioid", zt, None, 0.0))


def test_compiled_modrelu_bias_gradient_and_broadcast():
    torch._dynamo.reset()
    z = torch.randn(3, dtype=torch.complex64, requires_grad=True)
    b = torch.randn(2, 3, requires_grad=True)
    out = torch.compile(CF.modrelu, backend="aot_eager", fullgraph=True)(z, b)
    ref = CF.modrelu(z, b)
    assert out.shape == ref.shape == (2, 3)
    torch.testing.assert_close(out, ref)
    got = torch.autograd.grad(out.abs().sum(), (z, b))
    exp = torch.autograd.grad(ref.abs().sum(), (z, b))
    for a, e in zip(got, exp, strict=True):
        torch.testing.assert_close(a, e)


def test_compiled_zleaky_relu_inplace_writes_input():
    torch._dynamo.reset()

    def f(t):
        u = t.clone()
        out = CF.zleaky_relu(u, 0.2, inplace=True)
        return out, u

    z = torch.randn(2, 3, dtype=torch.complex64)
    out, u = torch.compile(f, backend="aot_eager", fullgraph=True)(z)
    torch.testing.assert_close(u, CF.zleaky_relu(z, 0.2))
    torch.testing.assert_close(out, u)


@pytest.mark.parametrize("dtype", [torch.complex128, torch.float64])
def test_composed_modrelu_gradient_at_origin_is_relu_bias(dtype):
    z = torch.zeros(4, dtype=dtype, requires_grad=True)
    b = torch.tensor([0.5, -0.5, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    g = torch.autograd.grad(_modrelu_autograd(z, b).real.sum(), z)[0]
    torch.testing.assert_close(g, torch.tensor([0.5, 0.0, 0.0, 2.0], dtype=torch.float64).to(dtype))


def test_modrelu_float_bias_outside_the_eager_complex_path():
    """A float bias on real input and inside torch.func (the composed form)."""
    x = torch.tensor([0.0, 1.0, -2.0])
    torch.testing.assert_close(CF.modrelu(x, 0.5), torch.tensor([0.0, 1.5, -2.5]))
    z = torch.ones(2, 3, dtype=torch.complex64)
    out = torch.func.vmap(lambda t: CF.modrelu(t, 0.5))(z)
    torch.testing.assert_close(out, CF.modrelu(z, 0.5))
