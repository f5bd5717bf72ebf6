"""Every cplxnet layer and functional with a torch namesake takes torch's positional arguments:
the same names in the same order with the same defaults (so a call written for torch lands
every value where torch puts it); what torch lacks comes after them as keyword-only (or, for a
layer, after torch's ``device, dtype``). The few differences are listed with their reason."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import cplxnet.functional as CF
import cplxnet.nn as cnn

_P = inspect.Parameter
_EMPTY = _P.empty

# torch's documented signatures where inspect cannot read them (C functions, *args classes)
_TORCH_DOCUMENTED = {
    "LSTM": ["input_size", "hidden_size", ("num_layers", 1), ("bias", True),
             ("batch_first", False), ("dropout", 0.0), ("bidirectional", False),
             ("proj_size", 0), ("device", None), ("dtype", None)],
    "conv1d": ["input", "weight", ("bias", None), ("stride", 1), ("padding", 0),
               ("dilation", 1), ("groups", 1)],
    "conv_transpose1d": ["input", "weight", ("bias", None), ("stride", 1), ("padding", 0),
                         ("output_padding", 0), ("groups", 1), ("dilation", 1)],
    "avg_pool1d": ["input", "kernel_size", ("stride", None), ("padding", 0),
                   ("ceil_mode", False), ("count_include_pad", True)],
    "avg_pool2d": ["input", "kernel_size", ("stride", None), ("padding", 0),
                   ("ceil_mode", False), ("count_include_pad", True), ("divisor_override", None)],
    "adaptive_avg_pool1d": ["input", "output_size"],
    "max_pool1d": ["input", "kernel_size", ("stride", None), ("padding", 0), ("dilation", 1),
                   ("ceil_mode", False), ("return_indices", False)],
    "adaptive_max_pool1d": ["input", "output_size", ("return_indices", False)],
    "linear": ["input", "weight", ("bias", None)],
    "scaled_dot_product_attention": ["query", "key", "value", ("attn_mask", None),
                                     ("dropout_p", 0.0), ("is_causal", False)],
}  # fmt: skip
_TORCH_DOCUMENTED["GRU"] = _TORCH_DOCUMENTED["LSTM"]  # torch's GRU refuses proj_size > 0, as ours
for _n in "23":
    _TORCH_DOCUMENTED[f"conv{_n}d"] = _TORCH_DOCUMENTED["conv1d"]
    _TORCH_DOCUMENTED[f"conv_transpose{_n}d"] = _TORCH_DOCUMENTED["conv_transpose1d"]
    _TORCH_DOCUMENTED[f"max_pool{_n}d"] = _TORCH_DOCUMENTED["max_pool1d"]
    _TORCH_DOCUMENTED[f"adaptive_max_pool{_n}d"] = _TORCH_DOCUMENTED["adaptive_max_pool1d"]
_TORCH_DOCUMENTED["avg_pool3d"] = _TORCH_DOCUMENTED["avg_pool2d"]

# (name, parameter) -> why cplxnet's name or default differs at the same position
_DIFFERENCES = {
    ("batch_norm", "running_var"): "running_cov: the 2x2 covariance the whitening norm keeps",
    ("instance_norm", "running_var"): "running_cov, as batch_norm",
    ("Transformer", "activation"): "'relu' by name; torch's default is F.relu, the same choice",
    ("TransformerEncoderLayer", "activation"): "as Transformer",
    ("TransformerDecoderLayer", "activation"): "as Transformer",
}


def _positional(params) -> list[tuple[str, object]]:
    out = []
    for p in params:
        if p.kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD):
            out.append((p.name, p.default))
        elif p.kind is _P.VAR_POSITIONAL:
            return [("*", None)]
    return out


def _torch_positional(name: str, obj) -> list[tuple[str, object]]:
    if name in _TORCH_DOCUMENTED:
        return [(a, _EMPTY) if isinstance(a, str) else a for a in _TORCH_DOCUMENTED[name]]
    fn = obj.__init__ if isinstance(obj, type) else obj
    params = list(inspect.signature(fn).parameters.values())
    return _positional(params[1:] if isinstance(obj, type) else params)


def _ours_positional(obj) -> list[tuple[str, object]]:
    fn = obj.__init__ if isinstance(obj, type) else obj
    params = list(inspect.signature(fn).parameters.values())
    return _positional(params[1:] if isinstance(obj, type) else params)


def _pairs():
    for name in sorted(n for n in dir(cnn) if not n.startswith("_")):
        ours = getattr(cnn, name)
        if isinstance(ours, type) and hasattr(nn, name):
            yield pytest.param(name, ours, getattr(nn, name), id=f"nn.{name}")
    for name in sorted(n for n in dir(CF) if not n.startswith("_")):
        ours = getattr(CF, name)
        if callable(ours) and hasattr(F, name):
            yield pytest.param(name, ours, getattr(F, name), id=f"functional.{name}")


PAIRS = list(_pairs())


def test_the_table_covers_the_layers_that_matter():
    names = {p.values[0] for p in PAIRS}
    assert {
        "Linear",
        "LayerNorm",
        "Embedding",
        "Dropout",
        "Conv2d",
        "LSTM",
        "MultiheadAttention",
        "embedding",
        "dropout",
        "scaled_dot_product_attention",
        "conv2d",
    } <= names


@pytest.mark.parametrize(("name", "ours", "theirs"), PAIRS)
def test_positional_arguments_are_torchs(name, ours, theirs):
    want = _torch_positional(name, theirs)
    got = _ours_positional(ours)
    assert want != [("*", None)], f"{name}: add torch's documented signature to the table"
    assert len(got) == len(want), (
        f"{name}: positional parameters {[n for n, _ in got]}, torch's {[n for n, _ in want]} "
        "(an option torch lacks must be keyword-only)"
    )
    for i, ((g, gd), (w, wd)) in enumerate(zip(got, want)):
        if (name, w) in _DIFFERENCES:
            continue
        if i == 0 and not isinstance(ours, type):  # the README names these
            assert g in ("x", "z", "ids", "input", "q"), f"{name}: its tensor argument is {g!r}"
            continue  # the tensor argument: ``x`` / ``z`` / ``q`` for torch's ``input`` / ``query``
        if not isinstance(ours, type) and i < 3 and name == "scaled_dot_product_attention":
            assert g == "qkv"[i]
            continue  # q, k, v
        assert g == w, f"{name}: positional parameter {i} is {g!r}, torch's is {w!r}"
        assert gd == wd or (gd != gd and wd != wd), f"{name}.{g}: default {gd!r}, torch's {wd!r}"


LAYER_PAIRS = [p for p in PAIRS if isinstance(p.values[1], type)]


@pytest.mark.parametrize(("name", "ours", "theirs"), LAYER_PAIRS)
def test_forward_takes_torchs_arguments_then_keyword_only_ones(name, ours, theirs):
    """``forward``: torch's parameters by name, order and default (``lstm(x, (h, c))``,
    ``layer(input=x)``; a default where torch has none, as attention's ``key=None`` for
    self-attention, only adds calls), then what torch lacks (``lengths``, ``encoding``)
    keyword-only."""
    want = list(inspect.signature(theirs.forward).parameters.values())[1:]
    got = list(inspect.signature(ours.forward).parameters.values())[1:]
    names = [p.name for p in got]
    assert names[: len(want)] == [p.name for p in want], (
        f"{name}.forward: {names}, torch's {[p.name for p in want]}"
    )
    for g, w in zip(got, want):
        assert w.default is _EMPTY or g.default == w.default, f"{name}.forward: {g.name}"
    extra = [p.name for p in got[len(want) :] if p.kind is not _P.KEYWORD_ONLY]
    assert not extra, f"{name}.forward: {extra} must be keyword-only (torch lacks them)"


def test_layers_without_a_torch_counterpart_call_their_tensor_input():
    """One name for one concept: a layer torch lacks takes ``input`` as torch's layers do (a
    recurrent cell's state ``hx``, as torch's cells)."""
    for name in sorted(n for n in dir(cnn) if not n.startswith("_")):
        layer = getattr(cnn, name)
        if isinstance(layer, type) and issubclass(layer, nn.Module) and not hasattr(nn, name):
            params = list(inspect.signature(layer.forward).parameters)[1:]
            assert params[0] == "input", f"{name}.forward({', '.join(params)})"
            assert "h" not in params, f"{name}.forward: the state is hx, as torch's cells"


def _keyword_only(fn) -> dict[str, object]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a C function: no readable keyword-only arguments
        return {}
    return {p.name: p.default for p in params if p.kind is _P.KEYWORD_ONLY}


@pytest.mark.parametrize(("name", "ours", "theirs"), PAIRS)
def test_torchs_keyword_only_arguments_are_taken_with_torchs_defaults(name, ours, theirs):
    """torch's keyword-only arguments (``bias=True`` of its batch, instance and group norms):
    ours takes each by the same name, keyword-only, with torch's default."""
    want = _keyword_only(theirs.__init__ if isinstance(theirs, type) else theirs)
    got = _keyword_only(ours.__init__ if isinstance(ours, type) else ours)
    for key, default in want.items():
        assert key in got, f"{name}: torch's keyword-only argument {key!r} is missing"
        assert got[key] == default, f"{name}.{key}: default {got[key]!r}, torch's {default!r}"


def test_positional_calls_written_for_torch_land_where_torch_puts_them():
    """The arguments that once sat elsewhere, called positionally as torch code does."""
    lin = cnn.Linear(4, 3, False, "cpu", torch.complex128)
    assert lin.bias is None and lin.weight.dtype == torch.complex128
    ln = cnn.LayerNorm(6, 1e-3, False, dtype=torch.complex128)
    assert ln.eps == 1e-3 and ln.weight is None and ln.mode == "split"
    emb = cnn.Embedding(10, 4, None, 1.0, 1.0, True, dtype=torch.complex128)
    assert (emb.max_norm, emb.norm_type, emb.scale_grad_by_freq, emb.sparse) == (
        1.0,
        1.0,
        True,
        False,
    )
    drop = cnn.Dropout(0.5, True)
    z = torch.randn(64, dtype=torch.complex128)
    out = drop(z)
    assert out is z and drop.inplace  # torch's inplace: the input overwritten, returned
    # sdpa: torch's (q, k, v, attn_mask, dropout_p, is_causal): is_causal must not be dropout_p
    q = torch.randn(1, 2, 5, 4, dtype=torch.complex128)
    causal = CF.scaled_dot_product_attention(q, q, q, None, 0.0, True)
    torch.testing.assert_close(causal, CF.scaled_dot_product_attention(q, q, q, is_causal=True))
    assert not torch.allclose(causal, CF.scaled_dot_product_attention(q, q, q))


def test_sdpa_grouped_query_attention_is_torchs():
    """``enable_gqa``: real inputs equal torch's own grouped-query attention; complex inputs
    equal the explicit repetition of the key/value heads."""
    q, k, v = (torch.randn(2, h, 5, 4, dtype=torch.float64) for h in (6, 2, 2))
    torch.testing.assert_close(
        CF.scaled_dot_product_attention(q, k, v, None, 0.0, True, enable_gqa=True),
        F.scaled_dot_product_attention(q, k, v, None, 0.0, True, enable_gqa=True),
    )
    qc, kc, vc = (torch.randn(2, h, 5, 4, dtype=torch.complex128) for h in (6, 3, 3))
    got = CF.scaled_dot_product_attention(qc, kc, vc, enable_gqa=True)
    want = CF.scaled_dot_product_attention(
        qc, kc.repeat_interleave(2, dim=1), vc.repeat_interleave(2, dim=1)
    )
    torch.testing.assert_close(got, want)
    with pytest.raises(ValueError, match="multiple of the key/value heads"):
        k4, v4 = kc.repeat(1, 2, 1, 1)[:, :4], vc.repeat(1, 2, 1, 1)[:, :4]
        CF.scaled_dot_product_attention(qc, k4, v4, enable_gqa=True)


@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.0, float("inf")])
def test_embedding_max_norm_renormalises_complex_rows_by_norm_type(norm_type):
    """torch's rule on the complex rows: a looked-up row whose p-norm of |w_j| exceeds
    ``max_norm`` is scaled by ``max_norm / (norm + 1e-7)``; others and rows not looked up stay."""
    torch.manual_seed(0)
    emb = cnn.Embedding(6, 5, max_norm=1.2, norm_type=norm_type, dtype=torch.complex128)
    with torch.no_grad():
        emb.weight[4] *= 0.01  # a row under the bound
    before = emb.weight.detach().clone()
    ids = torch.tensor([[1, 4, 1], [2, 4, 0]])
    out = emb(ids)
    norms = torch.linalg.vector_norm(before, norm_type, dim=-1)
    want = before.clone()
    for r in (0, 1, 2, 4):
        if norms[r] > 1.2:
            want[r] = before[r] * (1.2 / (norms[r] + 1e-7))
    torch.testing.assert_close(emb.weight.detach(), want)
    torch.testing.assert_close(out, want[ids])
    assert norms[[0, 1, 2]].gt(1.2).all() and norms[4] < 1.2  # the case tests both branches
    torch.testing.assert_close(emb.weight.detach()[[3, 5]], before[[3, 5]])


def test_embedding_weight_argument_shares_storage_as_torchs():
    w = torch.randn(7, 3, dtype=torch.complex128)
    emb = cnn.Embedding(7, 3, None, None, 2.0, False, False, w, True)
    assert not emb.packed_weight.requires_grad and emb.weight.dtype == torch.complex128
    with torch.no_grad():
        emb.weight[2] = 5.0
    assert w[2].eq(5.0).all()  # the table is the tensor given, not a copy (torch's _weight)
    with pytest.raises(ValueError, match=r"^Embedding: _weight must be a complex tensor of shape"):
        cnn.Embedding(7, 4, _weight=w)


def test_functional_embedding_takes_norm_type_and_refuses_sparse_complex():
    w = torch.randn(5, 3, dtype=torch.complex128) * 3
    ids = torch.tensor([1, 3])
    out = CF.embedding(ids, w.clone(), None, 1.0, 1.0)
    assert torch.linalg.vector_norm(out, 1.0, dim=-1).le(1.0 + 1e-9).all()
    real = torch.randn(5, 3, dtype=torch.float64)
    torch.testing.assert_close(
        CF.embedding(ids, real.clone(), None, 1.0, 1.0),
        F.embedding(ids, real.clone(), None, 1.0, 1.0),
    )
    with pytest.raises(ValueError, match=r"^embedding: sparse=True needs the table stored"):
        CF.embedding(ids, w, sparse=True)
