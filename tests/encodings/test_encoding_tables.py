"""The fixed tables of the encodings (non-persistent buffers: rotary's e^{i m theta}, the
sinusoids, ALiBi's slopes, xPos's decay): deferred initialisation rebuilds them, and a table grown
in inference mode serves later training."""

import pytest
import torch
from deferred_init import assert_deferred_init_restores

from cplxnet._utils import pack
from cplxnet.encodings import available_encodings, create_encoding

CTX = dict(d_model=8, num_heads=2, vocab_size=11, max_len=16)
CASES = [(name, {}) for name in available_encodings()] + [
    ("rotary", {"layout": "half"}),
    ("xpos", {"layout": "half"}),
    ("multiplicative", {"kind": "trainable"}),
    ("complex-order+rotary", {}),
    ("sinusoidal+alibi", {}),
]


@pytest.mark.parametrize(("name", "opts"), CASES)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32])
def test_meta_to_empty_reset_parameters_equals_a_fresh_build(name, opts, dtype):
    """Build on the meta device, ``to_empty``, ``reset_parameters()``: the same fixed tables as a
    build on the CPU, where uninitialised memory would be NaN or garbage, and the parameters
    that ``reset_parameters()`` draws on the CPU build with the same seed."""
    if opts.get("layout") == "half" and dtype.is_complex:
        pytest.skip("the half layout is for real heads")
    fresh = create_encoding(name, dtype=dtype, **CTX, **opts)
    deferred = create_encoding(name, dtype=dtype, device="meta", **CTX, **opts)
    assert_deferred_init_restores(fresh, deferred.to_empty(device="cpu"))


def _apply_every_hook(enc, x):
    """A (B, L, D) input through each site the encoding acts on, as a sum to differentiate."""
    total = 0.0
    if "input" in enc.acts_on:
        x = enc.encode_input(x)
        total = total + x.abs().sum()
    B, L, _ = x.shape
    heads = x.unflatten(-1, (2, -1)).transpose(1, 2)  # (B, H, L, Dh)
    q, k, v = enc.rotate(heads, heads * 0.5, heads)
    total = total + q.abs().sum() + k.abs().sum()
    bias = enc.logits_bias(pack(q), pack(k))
    if bias is not None:
        total = total + bias.sum()
    return total


GROWING = [
    ("rotary", {}),
    ("rotary", {"layout": "half"}),
    ("xpos", {}),
    ("sinusoidal", {}),
    ("multiplicative", {}),
    ("xl", {}),
    ("randomized", {"base": "rotary", "max_positions": 300}),
]


@pytest.mark.parametrize(("name", "opts"), GROWING)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32])
def test_a_table_grown_in_inference_mode_serves_training(name, opts, dtype):
    """Scoring past the table's length inside ``torch.inference_mode()`` (a length-generalisation
    evaluation) grows the table; the next training step at that length still backpropagates."""
    if opts.get("layout") == "half" and dtype.is_complex:
        pytest.skip("the half layout is for real heads")
    enc = create_encoding(name, dtype=dtype, **CTX, **opts).eval()
    length = 300  # past every initial table (max_len 16, sinusoids 128)
    with torch.inference_mode():
        before = _apply_every_hook(enc, torch.randn(1, length, 8, dtype=dtype))
    assert torch.isfinite(before)
    enc.train()
    x = torch.randn(1, length, 8, dtype=dtype, requires_grad=True)
    _apply_every_hook(enc, x).backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


HALF_CASES = [*available_encodings(), "complex-order+rotary"]


@pytest.mark.parametrize("name", HALF_CASES)
def test_a_bfloat16_real_twin_runs_every_encoding_close_to_float32(name):
    """bfloat16 has no complex type: the encodings that compute with complex numbers (rotary,
    xpos, multiplicative, complex-order) work in float32 and return bfloat16, so a bfloat16 real
    twin runs every encoding, within bfloat16's precision of the float32 twin, with exact
    positions past 256 (where bfloat16 integers are no longer exact)."""
    import cplxnet.nn as cnn

    ctx = dict(d_model=8, num_heads=2, vocab_size=11, max_len=400)
    torch.manual_seed(0)
    enc32 = create_encoding(name, dtype=torch.float32, **ctx).eval()
    mha32 = cnn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float32)
    enc16 = create_encoding(name, dtype=torch.bfloat16, **ctx).eval()
    mha16 = cnn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.bfloat16)
    enc16.load_state_dict(enc32.state_dict())  # the float32 twin's parameters, rounded
    mha16.load_state_dict(mha32.state_dict())
    ids = torch.randint(0, 11, (1, 300))
    x32 = torch.randn(1, 300, 8)
    outs = {}
    for enc, mha in ((enc32, mha32), (enc16, mha16)):
        x = enc.embed(ids) if "token" in enc.acts_on else x32.to(enc.dtype)
        if "input" in enc.acts_on:
            x = enc.encode_input(x)
        if "layer" in enc.acts_on:
            x = enc.layer_input(x, 0, 1)
        if enc.acts_on & {"qk", "logits", "values"}:
            x = mha(x, x, x, encoding=enc)[0]
        assert x.dtype == enc.dtype
        outs[enc.dtype] = x.float()
    torch.testing.assert_close(outs[torch.bfloat16], outs[torch.float32], rtol=0.05, atol=0.1)


@pytest.mark.parametrize("dynamics", ["mlp", "function"])
def test_a_half_precision_floater_integrates_in_float32(dynamics):
    """512 RK4 steps summed in bfloat16 drift 18% from float32 by the end; integrated in
    float32 from the same (bfloat16-exact) parameters they stay within bfloat16's rounding."""
    torch.manual_seed(0)
    w = torch.randn(4).to(torch.bfloat16)

    def rotate(p, t):  # a rotation of the halves' pairs by w t: a user's function of bfloat16
        a, b = p[..., :4], p[..., 4:]
        return torch.cat((-w.to(p.dtype) * b, w.to(p.dtype) * a), dim=-1)

    h = None if dynamics == "mlp" else rotate
    enc32 = create_encoding("floater", d_model=8, dtype=torch.float32, dynamics=h)
    with torch.no_grad():
        for q in enc32.parameters():
            q.copy_(q.to(torch.bfloat16).float())
    enc16 = create_encoding("floater", d_model=8, dtype=torch.bfloat16, dynamics=h)
    enc16.load_state_dict(enc32.state_dict())
    table16 = enc16.table(512)
    assert table16.dtype == torch.bfloat16
    error = (table16.float() - enc32.table(512)).norm(dim=-1) / enc32.table(512).norm(dim=-1)
    assert error.max() < 0.01, error.max()
    table16.float().sum().backward()  # the float32 integration reaches the bfloat16 parameters
    assert all(q.grad is not None and q.grad.dtype == torch.bfloat16 for q in enc16.parameters())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_floater_steps_in_float32_and_calls_a_function_in_its_dtype(dtype):
    seen = []
    enc = create_encoding("floater", d_model=8, dtype=dtype)
    enc.dynamics.register_forward_pre_hook(lambda m, args: seen.append(args[0].dtype))
    assert enc.table(4).dtype == dtype and set(seen) == {torch.float32}
    seen.clear()

    def h(p, t):
        seen.append((p.dtype, t.dtype))
        return -p

    enc = create_encoding("floater", d_model=8, dtype=dtype, dynamics=h)
    assert enc.table(4).dtype == dtype and set(seen) == {(dtype, dtype)}


def test_a_half_precision_floater_keeps_the_integer_buffers_of_its_dynamics():
    class Indexed(torch.nn.Module):  # dp/dt = -p[order]: an index buffer and a scale buffer
        def __init__(self):
            super().__init__()
            self.register_buffer("order", torch.arange(7, -1, -1))
            self.register_buffer("scale", torch.tensor(0.5, dtype=torch.bfloat16))

        def forward(self, p, t):
            return -self.scale * p[..., self.order]

    enc32 = create_encoding("floater", d_model=8, dtype=torch.float32, dynamics=Indexed().float())
    enc16 = create_encoding("floater", d_model=8, dtype=torch.bfloat16, dynamics=Indexed())
    enc16.p0.data.copy_(enc32.p0.data)
    torch.testing.assert_close(enc16.table(20).float(), enc32.table(20), rtol=0.01, atol=1e-3)


@pytest.mark.parametrize("name", HALF_CASES)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32])
def test_no_table_is_wider_than_the_model(name, dtype):
    """A device without float64 (Apple's MPS) holds every encoding of a single-precision model:
    no buffer or parameter is float64 or complex128, though the angles are computed in float64."""
    ctx = dict(d_model=8, num_heads=2, vocab_size=11, max_len=16, dtype=dtype)
    try:
        enc = create_encoding(name, **ctx)
    except (TypeError, ValueError):  # not defined in this field
        pytest.skip(f"{name} has no {dtype} form")
    wide = (torch.float64, torch.complex128)
    assert not [n for n, t in [*enc.named_buffers(), *enc.named_parameters()] if t.dtype in wide]


CONVERT = {
    "double": lambda m: m.double(),
    "to": lambda m: m.to(torch.float64),
    "to-device": lambda m: m.to("cpu", torch.float64),
}


@pytest.mark.parametrize("convert", list(CONVERT))
@pytest.mark.parametrize(("name", "opts"), CASES)
def test_a_real_encoding_converted_to_float64_equals_a_float64_build(name, opts, convert):
    """A real encoding converts as torch's layers do: its parameters become float64, its
    complex tables (rotary's e^{i m theta}) complex128 with the values a float64 build has, and
    a float64 build given its state computes the same."""
    torch.manual_seed(0)
    enc = create_encoding(name, dtype=torch.float32, **CTX, **opts)
    assert CONVERT[convert](enc) is enc and enc.dtype == torch.float64
    fresh = create_encoding(name, dtype=torch.float64, **CTX, **opts)
    fresh.load_state_dict(enc.state_dict())
    got, want = dict(enc.named_buffers()), dict(fresh.named_buffers())
    assert got.keys() == want.keys()
    for key, table in want.items():
        assert got[key].dtype == table.dtype and torch.equal(got[key], table), key
    for p, q in zip(enc.parameters(), fresh.parameters()):
        assert p.dtype == q.dtype == torch.float64
    enc.eval()
    fresh.eval()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    torch.testing.assert_close(_apply_every_hook(enc, x), _apply_every_hook(fresh, x), rtol=0,
                               atol=0)  # fmt: skip


def test_a_real_encoding_refuses_a_complex_dtype_with_or_without_tensors():
    for name in ("none", "rotary", "t5"):
        with pytest.raises(TypeError, match=r"dtype=torch\.complex64\) instead"):
            create_encoding(name, dtype=torch.float32, **CTX).to(torch.complex64)
