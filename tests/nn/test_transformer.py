"""TransformerEncoderLayer / TransformerEncoder: real twin vs torch, complex reductions, gradcheck,
padding invariance, the encoding hooks, construction forms and errors."""

import pytest
import torch
from torch.func import functional_call

import cplxnet.nn as cnn
from cplxnet.encodings.base import PositionalEncoding

D, H, F, B, L = 8, 2, 12, 3, 6


def _padding():
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[0, L - 2 :] = True
    pad[1, L - 1 :] = True
    return pad


def _randomize(module):
    """Non-trivial values for every parameter (biases and norm gains included)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            gain = "norm" in name and name.endswith("weight")
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if gain else 0.0))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize(("ours", "theirs"), [("crelu", "relu"), ("gelu", "gelu")])
def test_real_twin_equals_torch_layer(norm_first, ours, theirs):
    m = cnn.TransformerEncoderLayer(
        D,
        H,
        F,
        dropout=0.0,
        activation=ours,
        norm_first=norm_first,
        dtype=torch.float64,
        batch_first=True,
    ).eval()
    _randomize(m)
    t = torch.nn.TransformerEncoderLayer(
        D,
        H,
        F,
        dropout=0.0,
        activation=theirs,
        norm_first=norm_first,
        batch_first=True,
        dtype=torch.float64,
    ).eval()
    t.load_state_dict(m.state_dict())
    x = torch.randn(B, L, D, dtype=torch.float64)
    pad = _padding()
    got, want = m(x, src_key_padding_mask=pad), t(x, src_key_padding_mask=pad)
    torch.testing.assert_close(got[~pad], want[~pad])


def test_real_twin_attn_mask_follows_torch_src_mask():
    """The same bool mask (True = not allowed to attend) to ours and torch's layer/encoder."""
    m = cnn.TransformerEncoderLayer(
        D, H, F, dropout=0.0, dtype=torch.float64, batch_first=True
    ).eval()
    _randomize(m)
    t = torch.nn.TransformerEncoderLayer(
        D, H, F, dropout=0.0, batch_first=True, dtype=torch.float64
    ).eval()
    t.load_state_dict(m.state_dict())
    x = torch.randn(B, L, D, dtype=torch.float64)
    pad = _padding()
    banned = torch.rand(L, L) < 0.4
    banned.fill_diagonal_(False)
    got = m(x, banned, pad)
    torch.testing.assert_close(got[~pad], t(x, banned, pad)[~pad])
    assert not torch.allclose(got[~pad], m(x, src_key_padding_mask=pad)[~pad])
    enc = cnn.TransformerEncoder(m, 2).eval()
    t_enc = torch.nn.TransformerEncoder(t, 2, enable_nested_tensor=False).eval()
    t_enc.load_state_dict(enc.state_dict())
    torch.testing.assert_close(enc(x, banned, pad)[~pad], t_enc(x, banned, pad)[~pad])


def test_real_twin_encoder_equals_torch_encoder():
    layer = cnn.TransformerEncoderLayer(
        D, H, F, dropout=0.0, norm_first=True, dtype=torch.float64, batch_first=True
    )
    enc = cnn.TransformerEncoder(layer, 3, norm="split").eval()
    assert isinstance(enc.norm, torch.nn.LayerNorm)
    _randomize(enc)
    t_layer = torch.nn.TransformerEncoderLayer(
        D, H, F, dropout=0.0, norm_first=True, batch_first=True, dtype=torch.float64
    )
    t = torch.nn.TransformerEncoder(
        t_layer, 3, norm=torch.nn.LayerNorm(D, dtype=torch.float64), enable_nested_tensor=False
    ).eval()
    t.load_state_dict(enc.state_dict())  # same keys: layers.i.*, norm.*
    x = torch.randn(B, L, D, dtype=torch.float64)
    pad = _padding()
    torch.testing.assert_close(
        enc(x, src_key_padding_mask=pad)[~pad], t(x, src_key_padding_mask=pad)[~pad]
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_complex_with_zero_imaginary_parts_reduces_to_real_layer(norm_first):
    kw = {"dropout": 0.0, "norm_first": norm_first, "norm": "split", "activation": "crelu"}
    mc = cnn.TransformerEncoderLayer(D, H, F, dtype=torch.complex128, **kw, batch_first=True).eval()
    mr = cnn.TransformerEncoderLayer(D, H, F, dtype=torch.float64, **kw, batch_first=True).eval()
    _randomize(mr)
    pc = dict(mc.named_parameters())
    with torch.no_grad():
        for name, pr in mr.named_parameters():
            if pc[name].is_complex():
                pc[name].copy_(torch.complex(pr, torch.zeros_like(pr)))
            else:  # split layer-norm gains (2, D): real part gain = the real gain
                pc[name][0].copy_(pr)
                pc[name][1].normal_()
    x = torch.randn(B, L, D, dtype=torch.float64)
    pad = _padding()
    out_c = mc(x.to(torch.complex128), src_key_padding_mask=pad)
    torch.testing.assert_close(out_c.real, mr(x, src_key_padding_mask=pad))
    assert out_c.imag.abs().max() == 0


@pytest.mark.parametrize("norm_first", [False, True])
def test_pre_and_post_norm_follow_their_formulas(norm_first):
    m = cnn.TransformerEncoderLayer(
        D, H, F, dropout=0.3, norm_first=norm_first, batch_first=True
    ).eval()
    _randomize(m)
    x = torch.randn(B, L, D, dtype=torch.complex64)
    pad = _padding()

    def sa(y):
        return m.self_attn(y, key_padding_mask=pad, need_weights=False)[0]

    def ff(y):
        return m.linear2(m.activation(m.linear1(y)))

    if norm_first:
        y = x + sa(m.norm1(x))
        y = y + ff(m.norm2(y))
    else:
        y = m.norm1(x + sa(x))
        y = m.norm2(y + ff(y))
    torch.testing.assert_close(m(x, src_key_padding_mask=pad), y)


def test_pre_and_post_norm_differ():
    post = cnn.TransformerEncoderLayer(
        D, H, F, dropout=0.0, norm_first=False, batch_first=True
    ).eval()
    pre = cnn.TransformerEncoderLayer(
        D, H, F, dropout=0.0, norm_first=True, batch_first=True
    ).eval()
    pre.load_state_dict(post.state_dict())
    x = torch.randn(B, L, D, dtype=torch.complex64)
    assert not torch.allclose(pre(x), post(x))


@pytest.mark.parametrize(
    ("norm_first", "norm", "score"),
    [(False, "split", "real"), pytest.param(True, "whiten", "real", marks=pytest.mark.slow),
     pytest.param(True, "rms", "modulus", marks=pytest.mark.slow)],
)  # fmt: skip
def test_gradcheck_complex128_eval(norm_first, norm, score):
    m = cnn.TransformerEncoderLayer(
        4,
        2,
        6,
        dropout=0.1,
        activation="gelu",
        norm_first=norm_first,
        norm=norm,
        score=score,
        dtype=torch.complex128,
        batch_first=True,
    ).eval()
    params = dict(m.named_parameters())
    names = [
        "self_attn.in_proj_weight",
        "linear1.weight",
        "norm1.bias" if norm != "rms" else "norm1.weight",
    ]
    x = torch.randn(2, 3, 4, dtype=torch.complex128, requires_grad=True)
    pad = torch.tensor([[False, False, True], [False, False, False]])

    def fn(x, *ps):
        return functional_call(
            m, {**params, **dict(zip(names, ps))}, (x,), {"src_key_padding_mask": pad}
        )

    inputs = (x, *(params[n].detach().clone().requires_grad_() for n in names))
    assert torch.autograd.gradcheck(fn, inputs)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("score", ["real", "modulus"])
@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32])
def test_padding_never_influences_real_positions(norm_first, score, dtype):
    enc = cnn.TransformerEncoder.from_sizes(
        D,
        H,
        2,
        dim_feedforward=F,
        norm_first=norm_first,
        score=score,
        dtype=dtype,
        final_norm="split",
        batch_first=True,
    ).eval()
    pad = _padding()
    x = torch.randn(B, L, D, dtype=dtype)
    y = x.clone()
    y[pad] = torch.randn_like(y[pad]) * 30
    out_x, out_y = enc(x, src_key_padding_mask=pad), enc(y, src_key_padding_mask=pad)
    torch.testing.assert_close(out_x[~pad], out_y[~pad])
    assert not torch.allclose(out_x[pad], out_y[pad])


class RecordingEncoding(PositionalEncoding):
    """Adds a per-layer constant at the layer input and a constant logits bias; records calls."""

    name = "test-recording"
    acts_on = frozenset({"layer", "logits"})

    def __init__(self, table):
        super().__init__()
        self.table = table
        self.calls = []

    def layer_input(self, x, layer, num_layers):
        self.calls.append((layer, num_layers, tuple(x.shape)))
        return x + (layer + 1)

    def logits_bias(self, q, k):
        return self.table


def test_encoding_hooks_in_encoder():
    enc = cnn.TransformerEncoder.from_sizes(
        D, H, 3, dim_feedforward=F, dropout=0.0, norm_first=True, batch_first=True
    ).eval()
    table = torch.randn(1, H, L, L)
    rec = RecordingEncoding(table)
    x = torch.randn(B, L, D, dtype=torch.complex64)
    pad = _padding()
    out = enc(x, src_key_padding_mask=pad, encoding=rec)
    assert rec.calls == [(i, 3, (B, L, D)) for i in range(3)]
    # the same computation done by hand through the layers
    y = x
    for i, layer in enumerate(enc.layers):
        y = layer(y + (i + 1), table, pad)
    torch.testing.assert_close(out, y)
    assert "table" not in " ".join(enc.state_dict())  # the model owns the encoding
    with pytest.raises(TypeError, match="encoding must be a cplxnet.encodings.base"):
        enc(x, src_key_padding_mask=pad, encoding="rotary")


def test_dropout_train_vs_eval():
    m = cnn.TransformerEncoderLayer(D, H, F, dropout=0.3, batch_first=True)
    x = torch.randn(B, L, D, dtype=torch.complex64)
    assert not torch.allclose(m(x), m(x))
    m.eval()
    torch.testing.assert_close(m(x), m(x))
    assert isinstance(m.dropout, cnn.Dropout)
    r = cnn.TransformerEncoderLayer(D, H, F, dropout=0.3, dtype=torch.float32, batch_first=True)
    assert isinstance(r.dropout, torch.nn.Dropout) and isinstance(r.norm1, torch.nn.LayerNorm)
    assert isinstance(r.linear1, torch.nn.Linear) and isinstance(r.activation, torch.nn.ReLU)


def test_submodule_kinds_and_defaults():
    m = cnn.TransformerEncoderLayer(D, H, batch_first=True)
    assert m.dtype == torch.complex64 and m.linear1.out_features == 2048  # torch's default
    assert isinstance(m.norm1, cnn.LayerNorm) and m.norm1.mode == "split"
    assert isinstance(m.activation, cnn.CReLU) and m.self_attn.dropout == 0.1
    assert isinstance(
        cnn.TransformerEncoderLayer(D, H, norm="rms", batch_first=True).norm2, cnn.RMSNorm
    )
    assert isinstance(
        cnn.TransformerEncoderLayer(D, H, norm="rms", dtype=torch.float64, batch_first=True).norm2,
        torch.nn.RMSNorm,
    )
    assert isinstance(
        cnn.TransformerEncoderLayer(D, H, activation="modrelu", batch_first=True).activation,
        cnn.ModReLU,
    )
    act = cnn.Cardioid()
    assert cnn.TransformerEncoderLayer(D, H, activation=act, batch_first=True).activation is act
    assert (
        cnn.TransformerEncoderLayer(D, H, attention_dropout=0.0, batch_first=True).self_attn.dropout
        == 0.0
    )
    assert "norm_first=False, norm='split'" in repr(m)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("cls", ["TransformerEncoderLayer", "TransformerDecoderLayer"])
def test_attention_submodules_read_the_layers_layout(cls, batch_first):
    """self_attn (and multihead_attn) take the layer's batch_first, as torch's: calling them on a
    tensor in the layer's layout (e.g. for the attention maps) gives torch's output and weights."""
    m = getattr(cnn, cls)(D, H, F, dropout=0.0, batch_first=batch_first, dtype=torch.float64)
    t = getattr(torch.nn, cls)(D, H, F, dropout=0.0, batch_first=batch_first, dtype=torch.float64)
    _randomize(m)
    t.load_state_dict(m.state_dict())
    m.eval(), t.eval()
    x = torch.randn(B, L, D, dtype=torch.float64)
    x = x if batch_first else x.transpose(0, 1)
    names = ["self_attn"] + (["multihead_attn"] if cls == "TransformerDecoderLayer" else [])
    for name in names:
        ours, theirs = getattr(m, name), getattr(t, name)
        assert ours.batch_first == theirs.batch_first == batch_first
        for a, b in zip(ours(x, x, x), theirs(x, x, x)):
            torch.testing.assert_close(a, b)
    pad = _padding()
    args = (x,) if cls == "TransformerEncoderLayer" else (x, x)
    kw = {"src_key_padding_mask" if len(args) == 1 else "tgt_key_padding_mask": pad}
    torch.testing.assert_close(m(*args, **kw), t(*args, **kw))


@pytest.mark.parametrize(
    ("fn", "kind"),
    [(torch.tanh, cnn.SplitTanh), (torch.sigmoid, cnn.SplitSigmoid), (torch.relu, cnn.CReLU)],
)
def test_torch_activation_functions_are_read_as_names_as_documented(fn, kind):
    """torch's functions become the complex activations of their names (torch.tanh: split tanh,
    not the analytic tanh torch would apply), and the docstring says so."""
    assert isinstance(cnn.TransformerEncoderLayer(D, H, F, activation=fn).activation, kind)
    assert f"torch.{fn.__name__}" in " ".join(cnn.TransformerEncoderLayer.__doc__.split())


def test_encoder_construction_forms():
    layer = cnn.TransformerEncoderLayer(D, H, F, batch_first=True)
    enc = cnn.TransformerEncoder(layer, 2)
    assert enc.layers[0] is layer and enc.norm is None
    w0, w1 = (lay.self_attn.in_proj_weight for lay in enc.layers)
    assert not torch.equal(w0, w1)  # copies are re-initialised independently
    keys = set(enc.state_dict())
    assert "layers.0.self_attn.in_proj_weight" in keys and "layers.1.norm2.bias" in keys
    fac = cnn.TransformerEncoder(
        lambda i: cnn.TransformerEncoderLayer(D, H, F + i, batch_first=True), 3
    )
    assert [lay.linear1.out_features for lay in fac.layers] == [F, F + 1, F + 2]
    cfg = cnn.TransformerEncoder.from_sizes(
        D, H, 2, dim_feedforward=F, norm="whiten", final_norm="rms", batch_first=True
    )
    assert cfg.layers[1].norm1.mode == "whiten" and isinstance(cfg.norm, cnn.RMSNorm)
    assert "norm.weight" in cfg.state_dict()
    final = cnn.LayerNorm(D)
    assert cnn.TransformerEncoder(layer, 1, norm=final).norm is final
    x = torch.randn(B, L, D, dtype=torch.complex64)
    assert cfg(x, src_key_padding_mask=_padding()).shape == (B, L, D)
    assert cfg(x, is_causal=True).shape == (B, L, D)


def test_errors():
    m = cnn.TransformerEncoderLayer(D, H, F, batch_first=True)
    x = torch.randn(B, L, D, dtype=torch.complex64)
    with pytest.raises(ValueError, match="unknown norm 'batch'; valid norms are 'split'"):
        cnn.TransformerEncoderLayer(D, H, norm="batch", batch_first=True)
    with pytest.raises(ValueError, match="unknown activation 'swish'; valid activations are"):
        cnn.TransformerEncoderLayer(D, H, activation="swish", batch_first=True)
    with pytest.raises(TypeError, match="activation must be a name"):
        cnn.TransformerEncoderLayer(D, H, activation=3, batch_first=True)
    with pytest.raises(ValueError, match="embed_dim"):
        cnn.TransformerEncoderLayer(10, 3, batch_first=True)
    with pytest.raises(TypeError, match=r"input has dtype torch.float32 but the layer is"):
        m(x.real)
    with pytest.raises(ValueError, match=r"expected input of shape \(B, L, 8\)"):
        m(x[..., :4])
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(3, 6\)"):
        m(x, src_key_padding_mask=torch.zeros(B, L - 1, dtype=torch.bool))
    with pytest.raises(ValueError, match="num_layers must be a positive int"):
        cnn.TransformerEncoder(m, 0)
    for bad in (2.5, True):
        with pytest.raises(ValueError, match="TransformerEncoder: num_layers must be a positive"):
            cnn.TransformerEncoder(m, bad)
        with pytest.raises(ValueError, match="TransformerEncoder: num_layers must be a positive"):
            cnn.TransformerEncoder.from_sizes(D, H, bad, batch_first=True)
    with pytest.raises(ValueError, match="TransformerEncoderLayer: dim_feedforward must be a pos"):
        cnn.TransformerEncoderLayer(D, H, 1.5, batch_first=True)
    with pytest.raises(TypeError, match="norm must be None, a module or a kind"):
        cnn.TransformerEncoder(m, 2, 3)
    with pytest.raises(TypeError, match=r"encoder_layer must be a layer module.*from_sizes"):
        cnn.TransformerEncoder(D, H)
    with pytest.raises(ValueError, match="unknown norm"):
        cnn.TransformerEncoder(m, 2, norm="batch")
    with pytest.raises(TypeError, match="TransformerEncoder: input has dtype torch.complex128"):
        cnn.TransformerEncoder(m, 2)(x.to(torch.complex128))


@pytest.mark.parametrize("kind", ["split", "rms"])
@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32])
def test_final_norm_by_kind_follows_the_layers_eps_and_bias(kind, dtype):
    enc = cnn.TransformerEncoder.from_sizes(
        D,
        H,
        2,
        final_norm=kind,
        dim_feedforward=F,
        layer_norm_eps=1e-3,
        bias=False,
        dtype=dtype,
        batch_first=True,
    )
    assert enc.norm.eps == 1e-3 == enc.layers[0].norm1.eps
    if kind == "split":
        assert enc.norm.bias is None and enc.layers[0].norm1.bias is None
    default = cnn.TransformerEncoder.from_sizes(
        D, H, 1, final_norm=kind, dim_feedforward=F, dtype=dtype, batch_first=True
    )
    assert default.norm.eps == 1e-5
    if kind == "split":
        assert default.norm.bias is not None


@pytest.mark.parametrize("norm_first", [False, True])
def test_real_projection_layer_equals_complex_layer_with_real_weights(norm_first):
    """projection="real" makes every projection weight real (attention and feed-forward): the
    layer equals the complex-weight layer with weights W + 0i, same state_dict keys."""
    torch.manual_seed(0)
    m = cnn.TransformerEncoderLayer(
        D,
        H,
        F,
        dropout=0.0,
        norm_first=norm_first,
        projection="real",
        dtype=torch.complex128,
        batch_first=True,
    ).eval()
    real = {n for n, p in m.named_parameters() if not p.is_complex()}
    assert {"self_attn.in_proj_weight", "self_attn.out_proj.weight", "linear1.weight",
            "linear2.weight"} <= real  # fmt: skip
    ref = cnn.TransformerEncoderLayer(
        D, H, F, dropout=0.0, norm_first=norm_first, dtype=torch.complex128, batch_first=True
    ).eval()
    assert list(ref.state_dict()) == list(m.state_dict())
    with torch.no_grad():
        for name, p in m.named_parameters():
            ref.get_parameter(name).copy_(p.to(ref.get_parameter(name).dtype))
    x = torch.randn(B, L, D, dtype=torch.complex128)
    pad = _padding()
    torch.testing.assert_close(m(x, src_key_padding_mask=pad), ref(x, src_key_padding_mask=pad))
    assert "projection='real'" in repr(m)
    enc = cnn.TransformerEncoder.from_sizes(
        D, H, 2, dim_feedforward=F, projection="real", batch_first=True
    )
    assert all(not lay.linear1.weight.is_complex() for lay in enc.layers)
