"""The causal decoder of the zoo: causality for every registered encoding (complex and real), the
next-token head against its formula, the real twin, lengths an encoding cannot represent, and a
complex128 gradcheck."""

from __future__ import annotations

import pytest
import torch
from torch.func import functional_call

from cplxnet.encodings import available_encodings
from cplxnet.models import (
    LM_FAMILIES,
    Decoder,
    build_model,
    config_from_dict,
    make_config,
    next_token_logits,
    real_twin,
)

V = 13


def tiny(encoding="none", complex=True, **fields):
    base = {
        "vocab_size": V,
        "encoding": encoding,
        "d_model": 8,
        "num_heads": 2,
        "dim_feedforward": 12,
        "num_layers": 2,
        "max_len": 16,
        "complex": complex,
    }
    base.update(fields)
    return make_config("decoder", **base)


def randomize(model: torch.nn.Module, seed: int = 0) -> None:
    """Every parameter random (zero-initialised biases and tables would hide a leak)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            noise = torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5
            p.copy_(noise.to(p.dtype) if not p.is_complex() else noise * (1 + 1j) / 2**0.5)


@pytest.mark.parametrize("complex_", [True, False], ids=["complex", "real"])
@pytest.mark.parametrize("encoding", available_encodings())
def test_changing_later_tokens_never_changes_earlier_logits(encoding, complex_):
    config = tiny(encoding, complex_)
    model = build_model(config if complex_ else real_twin(config), dtype=torch.float64).eval()
    randomize(model)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, V, (3, 12), generator=g)
    before = model(ids)
    for t in (0, 4, 10):
        changed = ids.clone()
        changed[:, t + 1 :] = torch.randint(1, V, (3, 11 - t), generator=g)
        assert not torch.equal(changed, ids)
        after = model(changed)
        torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], rtol=1e-10, atol=1e-10)
        assert not torch.allclose(after[:, t + 1 :], before[:, t + 1 :])  # later logits do move


@pytest.mark.parametrize("encoding", ["none", "rotary", "t5", "complex-order"])
def test_padding_at_the_end_changes_nothing_before_it(encoding):
    model = build_model(tiny(encoding), dtype=torch.float64).eval()
    randomize(model)
    ids = torch.randint(1, V, (1, 7))
    padded = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], 1)
    mask = torch.zeros(1, 10, dtype=torch.bool)
    mask[:, 7:] = True
    torch.testing.assert_close(model(padded, mask)[:, :7], model(ids), rtol=1e-10, atol=1e-10)


def test_registered_as_a_language_model_family():
    assert LM_FAMILIES == ("decoder",)
    config = tiny("rotary")
    assert isinstance(build_model(config), Decoder)
    assert config_from_dict(config.to_dict()) == config
    assert config.num_classes == V  # the next-token classes


def test_tied_head_is_re_of_hermitian_product_with_the_word_vectors():
    model = build_model(tiny("rotary"), dtype=torch.float64).eval()
    randomize(model)
    assert model.tied and model.head_weight is None
    ids = torch.randint(1, V, (2, 5))
    x = model.embedding(ids, torch.zeros(2, 5, dtype=torch.bool), model.encoding)
    h = model.layers(x, encoding=model.encoding, is_causal=True)  # (2, 5, D) complex
    e = model.embedding.word.weight  # (V, D) complex
    want = (h @ e.conj().T).real / 16**0.5 + model.head_bias  # scaled by 1/sqrt(2D)
    torch.testing.assert_close(model(ids), want, rtol=1e-12, atol=1e-12)
    # the same as a loop over words of the real parts of the Hermitian products
    loop = torch.stack([(h * e[w].conj()).sum(-1).real for w in range(V)], -1)
    torch.testing.assert_close(next_token_logits(h, model.output_weight()), loop)
    lazy = h.detach().conj()  # a lazily conjugated h: the logits of its values
    torch.testing.assert_close(
        next_token_logits(lazy, model.output_weight()),
        next_token_logits(lazy.resolve_conj(), model.output_weight()),
    )
    untied = build_model(tiny("complex-order"), dtype=torch.float64)
    assert untied.head_scale == 1.0


def test_token_site_encodings_get_an_untied_head():
    model = build_model(tiny("complex-order"))
    assert not model.tied and model.head_weight.shape == (V, 16)  # packed 2D
    assert not build_model(tiny("none", tie_embeddings=False)).tied


def test_real_twin_has_the_same_head_shape_and_doubled_widths():
    config = tiny("rotary")
    twin = real_twin(config)
    assert (twin.d_model, twin.dim_feedforward, twin.complex) == (16, 24, False)
    complex_model, real_model = build_model(config), build_model(twin)
    assert complex_model.output_weight().shape == real_model.output_weight().shape == (V, 16)
    assert not any(p.is_complex() for p in real_model.parameters())
    assert real_model(torch.randint(0, V, (2, 4))).dtype == torch.float32


def test_unsupported_length_reports_the_encodings_reason():
    model = build_model(tiny("trainable", max_len=8))
    assert model.unsupported_length(8) is None
    reason = model.unsupported_length(9)
    assert reason is not None and "max_len=8" in reason
    assert model.training  # restored
    for encoding in ("none", "rotary", "sinusoidal", "complex-order", "t5"):
        assert build_model(tiny(encoding, max_len=8)).unsupported_length(40) is None


def test_input_errors():
    model = build_model(tiny())
    with pytest.raises(TypeError, match="int64"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match=r"\(B, L\)"):
        model(torch.zeros(3, dtype=torch.long))
    with pytest.raises(IndexError):
        model(torch.full((1, 3), V))
    with pytest.raises(ValueError, match="shape of ids"):
        model(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 4, dtype=torch.bool))
    ids = torch.ones(2, 4, dtype=torch.long)
    for padded in ([0, 1], [1, 2]):  # left or middle padding would shift absolute positions
        mask = torch.zeros(2, 4, dtype=torch.bool)
        mask[1, padded] = True
        with pytest.raises(ValueError, match="only at the end"):
            model(ids, mask)


@pytest.mark.parametrize("encoding", ["rotary", "complex-order", "t5"])
def test_gradcheck_complex128(encoding):
    """By random projections (gradcheck's fast mode: v^T J u against the finite difference
    along u, over every parameter at once; entry by entry took 8-40 s of CPU per encoding);
    the decoder's layers and encodings are checked entry by entry in their own tests."""
    torch.manual_seed(2)
    config = tiny(encoding, d_model=4, num_heads=2, dim_feedforward=4, num_layers=2, vocab_size=7)
    model = build_model(config, dtype=torch.float64).eval()
    ids = torch.tensor([[1, 5, 2, 6], [3, 3, 4, 1]])
    names = [n for n, _ in model.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for _, p in model.named_parameters())

    def f(*ps):
        return functional_call(model, dict(zip(names, ps)), (ids,))

    assert torch.autograd.gradcheck(f, params, eps=1e-6, atol=1e-5, fast_mode=True)
