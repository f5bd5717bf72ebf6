"""cplxnet.nn as a drop-in for torch.nn: each layer with a torch counterpart is built from the same
positional arguments as its torch counterpart, the options land where torch puts them, a real-dtype
layer loads torch's state_dict and computes torch's function, and ``forward`` takes torch's
arguments and returns what torch returns."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import cplxnet.nn as cnn

DT = torch.float64
D, H, B, L, S = 8, 2, 3, 4, 5


def _randomize(module: nn.Module) -> None:
    with torch.no_grad():
        for name, p in module.named_parameters():
            gain = "norm" in name and name.endswith("weight")
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if gain else 0.0))


def _mha_options(m: nn.Module) -> dict:
    """What torch's MultiheadAttention arguments set, read the same way from both classes."""
    return {
        "embed_dim": m.embed_dim,
        "num_heads": m.num_heads,
        "dropout": m.dropout,
        "bias": m.in_proj_bias is not None,
        "add_bias_kv": m.bias_k is not None,
        "add_zero_attn": m.add_zero_attn,
        "kdim": m.kdim,
        "vdim": m.vdim,
        "batch_first": m.batch_first,
    }


def _tel_options(m: nn.Module) -> dict:
    act = m.activation
    return {
        "d_model": m.self_attn.embed_dim,
        "nhead": m.self_attn.num_heads,
        "dim_feedforward": m.linear1.out_features,
        "dropout": (m.dropout.p, m.dropout1.p, m.dropout2.p, m.self_attn.dropout),
        "activation": "gelu"
        if isinstance(act, nn.GELU) or act is torch.nn.functional.gelu
        else "relu",
        "layer_norm_eps": (m.norm1.eps, m.norm2.eps),
        # torch keeps batch_first on the attention; cplxnet's layer transposes once for both blocks
        "batch_first": m.batch_first if hasattr(m, "batch_first") else m.self_attn.batch_first,
        "norm_first": m.norm_first,
        "bias": (m.linear1.bias is not None, m.norm1.bias is not None),
    }


def _te_options(m: nn.Module) -> dict:
    return {"num_layers": m.num_layers, "norm": type(m.norm).__name__, "n": len(m.layers)}


# (cplxnet class, torch class, positional arguments, options reader); args end with the
# arguments cplxnet and torch share before device/dtype, all set away from their defaults
CASES = [
    (cnn.MultiheadAttention, nn.MultiheadAttention, (D, H), _mha_options),
    (cnn.MultiheadAttention, nn.MultiheadAttention, (D, H, 0.25), _mha_options),
    (
        cnn.MultiheadAttention,
        nn.MultiheadAttention,
        (D, H, 0.25, False, True, True, 6, 5, False),
        _mha_options,
    ),
    (
        cnn.MultiheadAttention,
        nn.MultiheadAttention,
        (D, H, 0.0, True, False, False, 6, 5, True),
        _mha_options,
    ),
    (
        cnn.TransformerEncoderLayer,
        nn.TransformerEncoderLayer,
        (D, H, 16, 0.2, "gelu", 1e-3, True, True, False),
        _tel_options,
    ),
    (
        cnn.TransformerEncoderLayer,
        nn.TransformerEncoderLayer,
        (D, H, 12, 0.3, "relu", 1e-4, False, False, True),
        _tel_options,
    ),
]


@pytest.mark.parametrize(("ours", "theirs", "args", "options"), CASES)
def test_positional_arguments_land_where_torch_puts_them(ours, theirs, args, options):
    m, t = ours(*args, dtype=DT), theirs(*args, dtype=DT)
    got, want = options(m), options(t)
    assert got == want
    # the same parameters under the same names and shapes: torch's state_dict loads
    assert {k: v.shape for k, v in m.state_dict().items()} == {
        k: v.shape for k, v in t.state_dict().items()
    }
    m.load_state_dict(t.state_dict())


@pytest.mark.parametrize(
    ("ours", "theirs", "args"),
    [
        (cnn.MultiheadAttention, nn.MultiheadAttention, (D, H)),
        (cnn.TransformerEncoderLayer, nn.TransformerEncoderLayer, (D, H)),
    ],
)
def test_defaults_are_torchs(ours, theirs, args):
    """Every default as torch's, the layout included (``batch_first=False``)."""
    options = _mha_options if ours is cnn.MultiheadAttention else _tel_options
    got, want = options(ours(*args, dtype=DT)), options(theirs(*args, dtype=DT))
    assert got.pop("batch_first") is False and want.pop("batch_first") in (False, None)
    assert got == want


def test_transformer_encoder_takes_torchs_arguments():
    layer = cnn.TransformerEncoderLayer(D, H, 12, 0.0, dtype=DT)
    norm = nn.LayerNorm(D, dtype=DT)
    m = cnn.TransformerEncoder(layer, 3, norm, False, False)
    t = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(D, H, 12, 0.0, dtype=DT),
        3,
        nn.LayerNorm(D, dtype=DT),
        False,
        False,
    )
    assert _te_options(m) == _te_options(t) == {"num_layers": 3, "norm": "LayerNorm", "n": 3}
    assert m.norm is norm and m.layers[0] is layer
    m.load_state_dict(t.state_dict())


def _layout(x: torch.Tensor, batch_first: bool) -> torch.Tensor:
    return x if batch_first else x.transpose(0, 1)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("average", [True, False])
def test_mha_forward_and_weights_equal_torch(batch_first, average):
    """torch's positional forward ``(query, key, value, key_padding_mask, need_weights,
    attn_mask, average_attn_weights)`` and its ``(output, weights)``, for cross-attention with
    kdim/vdim, add_bias_kv and add_zero_attn, torch's 3-D mask ``(B*H, L, S)`` and a padding
    mask."""
    args = (D, H, 0.0, True, True, True, 6, 5, batch_first)
    m, t = cnn.MultiheadAttention(*args, dtype=DT), nn.MultiheadAttention(*args, dtype=DT)
    _randomize(t)
    m.load_state_dict(t.state_dict())
    q = torch.randn(B, L, D, dtype=DT, requires_grad=True)
    k, v = torch.randn(B, S, 6, dtype=DT), torch.randn(B, S, 5, dtype=DT)
    q_, k_, v_ = (_layout(a, batch_first) for a in (q, k, v))
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[1, 3:] = True
    mask3 = torch.rand(B * H, L, S) < 0.3  # torch's per-(batch, head) mask
    got = m(q_, k_, v_, pad, True, mask3, average)
    want = t(q_, k_, v_, pad, True, mask3, average)
    assert got[1].shape == ((B, L, S + 2) if average else (B, H, L, S + 2))
    assert not got[1].is_complex()
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    (g1,) = torch.autograd.grad(got[0].square().sum(), q)
    (g2,) = torch.autograd.grad(want[0].square().sum(), q)
    torch.testing.assert_close(g1, g2)
    # need_weights=False: torch's fused path, weights None
    out, w = m(q_, k_, v_, pad, False, mask3)
    assert w is None
    torch.testing.assert_close(out, want[0])


def test_mha_3d_attn_mask_is_per_batch_and_head():
    """Entry ``b * H + h`` of a ``(B*H, L, L)`` mask is batch ``b``, head ``h``: float and bool
    masks equal their 4-D views and torch's result, in the complex layer as in the real one."""
    for dtype in (torch.complex128, DT):
        m = cnn.MultiheadAttention(D, H, batch_first=True, dtype=dtype).eval()
        x = torch.randn(B, L, D, dtype=dtype)
        fmask = torch.randn(B * H, L, L, dtype=DT)
        bmask = torch.rand(B * H, L, L) < 0.4
        for mask in (fmask, bmask):
            out, w = m(x, attn_mask=mask, average_attn_weights=False)
            out4, w4 = m(x, attn_mask=mask.view(B, H, L, L), average_attn_weights=False)
            torch.testing.assert_close(out, out4)
            torch.testing.assert_close(w, w4)
            assert not torch.allclose(
                w, m(x, attn_mask=mask[:1].expand(B * H, L, L), average_attn_weights=False)[1]
            )
    t = nn.MultiheadAttention(D, H, batch_first=True, dtype=DT)
    m.load_state_dict(t.state_dict())
    torch.testing.assert_close(m(x, x, x, attn_mask=fmask)[0], t(x, x, x, attn_mask=fmask)[0])


def test_mha_unbatched_and_float_padding_and_causal_equal_torch():
    m = cnn.MultiheadAttention(D, H, batch_first=True, dtype=DT)
    t = nn.MultiheadAttention(D, H, batch_first=True, dtype=DT)
    _randomize(t)
    m.load_state_dict(t.state_dict())
    x = torch.randn(L, D, dtype=DT)  # unbatched (L, D)
    for a, b in zip(m(x, x, x), t(x, x, x)):
        torch.testing.assert_close(a, b)
    xb = torch.randn(B, L, D, dtype=DT)
    fpad = torch.zeros(B, L, dtype=DT)
    fpad[0, 2:] = -1.5  # a float key_padding_mask is added to the logits
    for a, b in zip(m(xb, xb, xb, fpad), t(xb, xb, xb, fpad)):
        torch.testing.assert_close(a, b)
    causal = nn.Transformer.generate_square_subsequent_mask(L, dtype=DT)
    for a, b in zip(
        m(xb, xb, xb, attn_mask=causal, is_causal=True),
        t(xb, xb, xb, attn_mask=causal, is_causal=True),
    ):
        torch.testing.assert_close(a, b)
    # cplxnet also takes is_causal alone
    torch.testing.assert_close(m(xb, is_causal=True)[0], t(xb, xb, xb, attn_mask=causal)[0])


def test_mha_weights_are_the_ones_applied_to_the_values():
    """Complex attention: the returned real weights, applied to the values, give the output."""
    m = cnn.MultiheadAttention(D, H, batch_first=True, dtype=torch.complex128).eval()
    x = torch.randn(B, L, D, dtype=torch.complex128)
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[2, 1:] = True
    out, w = m(x, key_padding_mask=pad, average_attn_weights=False)
    torch.testing.assert_close(w.sum(-1), torch.ones(B, H, L, dtype=DT))
    assert (w[2, :, :, 1:] == 0).all()
    v = torch.nn.functional.linear(x, m.in_proj_weight[2 * D :], m.in_proj_bias[2 * D :])
    v = v.unflatten(-1, (H, D // H)).transpose(1, 2)
    heads = (w.to(v.dtype) @ v).transpose(1, 2).reshape(B, L, D)
    torch.testing.assert_close(out, m.out_proj(heads))
    torch.testing.assert_close(m(x, key_padding_mask=pad)[1], w.mean(1))
    torch.testing.assert_close(m(x, key_padding_mask=pad, need_weights=False)[0], out)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_layer_and_encoder_equal_torch(batch_first, norm_first):
    """torch's positional ``__init__`` and ``forward(src, src_mask, src_key_padding_mask,
    is_causal)`` (and the encoder's ``(src, mask, src_key_padding_mask)``), both layouts."""
    args = (D, H, 12, 0.0, "gelu", 1e-3, batch_first, norm_first)
    m, t = cnn.TransformerEncoderLayer(*args, dtype=DT), nn.TransformerEncoderLayer(*args, dtype=DT)
    _randomize(t)
    m.load_state_dict(t.state_dict())
    m.eval(), t.eval()
    x = _layout(torch.randn(B, L, D, dtype=DT), batch_first)
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[0, 3:] = True
    banned = torch.rand(L, L) < 0.3
    banned.fill_diagonal_(False)
    keep = _layout(~pad, batch_first)
    torch.testing.assert_close(m(x, banned, pad)[keep], t(x, banned, pad)[keep])
    mask3 = torch.randn(B * H, L, L, dtype=DT)
    torch.testing.assert_close(m(x, mask3), t(x, mask3))
    em = cnn.TransformerEncoder(m, 2, nn.LayerNorm(D, dtype=DT))
    et = nn.TransformerEncoder(t, 2, nn.LayerNorm(D, dtype=DT), enable_nested_tensor=False)
    em.load_state_dict(et.state_dict())
    torch.testing.assert_close(em(x, banned, pad)[keep], et(x, banned, pad)[keep])


def test_activation_callables_as_torch():
    """torch's ``activation=F.gelu`` (a function) gives the complex layer its complex extension
    and the real layer torch's function."""
    fn = torch.nn.functional.gelu
    assert isinstance(cnn.TransformerEncoderLayer(D, H, activation=fn).activation, cnn.SplitGELU)
    assert isinstance(
        cnn.TransformerEncoderLayer(D, H, activation=torch.nn.functional.relu).activation,
        cnn.CReLU,
    )
    real = cnn.TransformerEncoderLayer(D, H, activation=fn, dtype=DT)
    assert isinstance(real.activation, nn.GELU)

    def swish(x):
        return x * torch.sigmoid(x)

    assert cnn.TransformerEncoderLayer(D, H, activation=swish, dtype=DT).activation is swish


def test_misplaced_old_positional_forms_fail_loudly():
    """Calls in the order cplxnet had before it followed torch now fail with a clear error
    instead of a silent misreading: ``MultiheadAttention(D, H, True, 0.1)`` (bias, dropout) and
    ``TransformerEncoderLayer(D, H, F, p, act, True)`` (norm_first as the 6th)."""
    with pytest.raises(ValueError, match="dropout must be a number in"):
        cnn.MultiheadAttention(D, H, True, 0.1)
    with pytest.raises(ValueError, match="layer_norm_eps must be a positive number"):
        cnn.TransformerEncoderLayer(D, H, 12, 0.1, "relu", True)
    with pytest.raises(TypeError, match="batch_first must be a bool"):
        cnn.TransformerEncoderLayer(D, H, 12, 0.1, "relu", 1e-5, "split")
