"""Incremental decoding with a key/value cache: cached logits equal the uncached pass for every
encoding that declares ``supports_kv_cache`` (complex and real decoders, a prompt of several
tokens, chunks of several tokens), the encodings that cannot be cached refuse the cache and are
recomputed, and generation gives the same tokens with and without the cache, also past the
context length (where the window is recomputed)."""

from __future__ import annotations

import math

import pytest
import torch

import cplxnet.nn as cnn
from cplxnet.encodings import available_encodings, create_encoding
from cplxnet.models import build_model, make_config, real_twin
from cplxnet.tasks.lm import generate, stream
from cplxnet.tasks.lm.generate import GREEDY_BELOW

SIZES = {"d_model": 8, "num_heads": 2, "dim_feedforward": 16, "num_layers": 2, "vocab_size": 11,
         "max_len": 16}  # fmt: skip
COMBINED = ["complex-order+rotary", "complex-order+alibi", "sinusoidal+t5", "rotary+shaw",
            "trainable+alibi"]  # fmt: skip


def caches(name: str) -> bool:
    return create_encoding(name, d_model=8, num_heads=2, vocab_size=11, max_len=16,
                           causal=True).supports_kv_cache  # fmt: skip


CACHED = [n for n in available_encodings() if caches(n)] + COMBINED
UNCACHED = [n for n in available_encodings() if not caches(n)]


def decoder(encoding: str, complex_: bool, dtype=torch.float64, **options):
    config = make_config("decoder", encoding=encoding, encoding_options=options, **SIZES)
    if not complex_:
        config = real_twin(config)
    torch.manual_seed(0)
    model = build_model(config, dtype=dtype).eval()
    with torch.no_grad():  # biases and tables away from their zero/identity initialisation
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def incremental(model, ids, chunks):
    cache, out, t = model.new_cache(), [], 0
    for n in chunks:
        out.append(model(ids[:, t : t + n], cache=cache))
        t += n
    assert t == ids.shape[1] and len(cache[0]) == t
    return torch.cat(out, dim=1)


def test_the_expected_encodings_cache():
    assert {"none", "rotary", "alibi", "t5", "sinusoidal", "trainable", "complex-order",
            "shaw"} <= set(CACHED)  # fmt: skip
    assert "xpos" in UNCACHED


def test_the_readme_names_the_encodings_that_recompute():
    import pathlib
    import re

    readme = pathlib.Path(__file__).parents[2].joinpath("README.md").read_text(encoding="utf-8")
    named = re.search(r"KV cache \(([a-z, -]+) recompute\)", readme).group(1).split(", ")
    assert sorted(named) == sorted(UNCACHED)


@pytest.mark.parametrize("complex_", [True, False], ids=["complex", "real"])
@pytest.mark.parametrize("name", CACHED)
@torch.no_grad()
def test_cached_logits_equal_the_uncached_pass(name, complex_):
    model = decoder(name, complex_)
    ids = torch.randint(2, 11, (2, 13), generator=torch.Generator().manual_seed(1))
    full = model(ids)
    # a prompt of 4 tokens, one token at a time, then a chunk of 3 (queries at the end of keys)
    got = incremental(model, ids, [4, 1, 1, 3, 1, 1, 1, 1])
    assert (got - full).abs().max() < 1e-5 * max(1.0, full.abs().max())
    assert torch.allclose(got, full, rtol=0, atol=1e-10)  # float64: exact up to rounding


@pytest.mark.parametrize(
    "options",
    [{"scaling": "yarn", "factor": 2.0}, {"rotate_values": True}, {"layout": "half"}],
    ids=["yarn", "values", "half"],
)
@torch.no_grad()
def test_rotary_variants_cache(options):
    for complex_ in (True, False):
        if options.get("layout") == "half" and complex_:
            continue
        model = decoder("rotary", complex_, **options)
        ids = torch.randint(2, 11, (1, 10), generator=torch.Generator().manual_seed(2))
        assert torch.allclose(incremental(model, ids, [3] + [1] * 7), model(ids), atol=1e-10)


@torch.no_grad()
def test_float32_cache_within_1e5():
    model = decoder("complex-order+rotary", True, dtype=torch.float32)
    ids = torch.randint(2, 11, (1, 16), generator=torch.Generator().manual_seed(3))
    assert (incremental(model, ids, [5] + [1] * 11) - model(ids)).abs().max() < 1e-5


@pytest.mark.parametrize("name", UNCACHED)
def test_encodings_that_cannot_cache_refuse_it(name):
    model = decoder(name, True)
    assert not model.supports_kv_cache
    with pytest.raises(ValueError, match="cannot be cached"):
        model.new_cache()
    with pytest.raises(ValueError, match="cannot be cached"):
        model(torch.tensor([[2, 3]]), cache=[cnn.KVCache(), cnn.KVCache()])
    prompt = torch.tensor([2, 3, 4])
    assert torch.equal(generate(model, prompt, 6, seed=1), generate(model, prompt, 6, seed=1,
                                                                    cache=False))  # fmt: skip


@pytest.mark.parametrize("name", ["rotary", "alibi", "trainable", "complex-order+rotary"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_generation_with_the_cache_equals_recomputing(name, temperature, monkeypatch):
    model = decoder(name, False)
    prompt = torch.tensor([2, 5, 7, 3, 9])
    for context in (None, 12, 4):  # passes the context length (12), prompt longer than it (4)
        kw = {"temperature": temperature, "seed": 5, "context": context}
        assert torch.equal(generate(model, prompt, 12, **kw),
                           generate(model, prompt, 12, cache=False, **kw))  # fmt: skip
    # the cached path runs one new token per call while the text fits in the context
    lengths = []
    forward = type(model).forward

    def spy(self, ids, *args, **kwargs):
        if ids.device.type != "meta":  # not the length check on shapes (unsupported_length)
            lengths.append((ids.shape[1], kwargs.get("cache") is not None))
        return forward(self, ids, *args, **kwargs)

    monkeypatch.setattr(type(model), "forward", spy)
    generate(model, prompt, 10, context=12, temperature=temperature)
    assert lengths == [(5, True)] + [(1, True)] * 7 + [(12, False)] * 2


def test_cache_misuse_is_a_clear_error():
    attn = cnn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(1, 3, 8, dtype=torch.cfloat)
    with pytest.raises(ValueError, match="self-attention"):
        attn(x, x.clone(), x.clone(), cache=cnn.KVCache())
    with pytest.raises(ValueError, match="self-attention"):
        attn(x, key_padding_mask=torch.zeros(1, 3, dtype=torch.bool), cache=cnn.KVCache())
    with pytest.raises(TypeError, match="KVCache"):
        attn(x, cache=[])
    cache = cnn.KVCache()
    attn(x, cache=cache)
    with pytest.raises(ValueError, match="new cache"):
        attn(torch.randn(2, 1, 8, dtype=torch.cfloat), cache=cache)
    model = decoder("rotary", True)
    with pytest.raises(ValueError, match="one KVCache per layer"):
        model(torch.tensor([[2]]), cache=[cnn.KVCache()])
    with pytest.raises(ValueError, match="padding_mask"):
        model(torch.tensor([[2]]), torch.tensor([[False]]), cache=model.new_cache())


@torch.no_grad()
def test_attention_layer_cache_matches_a_causal_pass():
    torch.manual_seed(0)
    for dtype in (torch.cdouble, torch.double):
        attn = cnn.MultiheadAttention(8, 2, batch_first=True, dtype=dtype).eval()
        enc = create_encoding("rotary", d_model=8, num_heads=2, dtype=dtype)
        x = torch.randn(2, 6, 8, dtype=dtype)
        full, w_full = attn(x, is_causal=True, encoding=enc)
        cache = cnn.KVCache()
        a, _ = attn(x[:, :2], is_causal=True, encoding=enc, cache=cache)
        b, w = attn(x[:, 2:], is_causal=True, encoding=enc, cache=cache)  # 4 queries, 6 keys
        assert torch.allclose(torch.cat([a, b], 1), full, atol=1e-12)
        assert torch.allclose(w, w_full[:, 2:], atol=1e-12) and len(cache) == 6


def test_banned_ids_are_never_produced_and_none_are_banned_by_default():
    model = decoder("rotary", False)
    with torch.no_grad():  # ids 0 and 1 most likely after any token
        model.head_bias.zero_()
        model.head_bias[:2] = 50.0
    prompt = torch.tensor([2, 5])
    assert set(generate(model, prompt, 8, temperature=0.0).tolist()) <= {0, 1}
    for temperature in (0.0, 1.0):
        new = generate(model, prompt, 8, temperature=temperature, banned_ids=[1, 0])
        assert not {0, 1} & set(new.tolist())
    for banned in ([-1], [11], list(range(11))):
        with pytest.raises(ValueError, match="banned_ids"):
            generate(model, prompt, 2, banned_ids=banned)

    class Bare(torch.nn.Module):  # no config: the size comes from the first logits
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, ids):
            return self.inner(ids)

    for banned in ([11], list(range(11))):
        with pytest.raises(ValueError, match="ids of the model's 11 tokens and leave one"):
            generate(Bare(), prompt, 2, banned_ids=banned)


def test_bad_arguments_are_refused_before_any_forward(monkeypatch):
    """Wrong types and a model without weights: a ValueError naming the argument, before the
    model runs (a forward that raises would show otherwise)."""
    from cplxnet.models import build_model

    model = decoder("rotary", False)
    prompt = torch.tensor([2, 5])

    def no_forward(*args, **kwargs):
        raise AssertionError("the model ran")

    monkeypatch.setattr(model, "forward", no_forward)
    cases = [
        ((model, prompt, 2.5), {}, "num_tokens must be a whole number, got 2.5"),
        ((model, prompt, True), {}, "num_tokens must be a whole number, got True"),
        ((model, prompt, 2), {"temperature": True}, "temperature must be a finite number"),
        ((model, prompt, 2), {"temperature": "1"}, "temperature must be a finite number"),
        ((model, [[2, 5], [3]], 2), {}, "tensor of integer ids, got list"),
        ((model, torch.tensor([2.0, 5.0]), 2), {}, "tensor of integer ids, got torch.float32"),
        ((model, prompt, 2), {"banned_ids": [11]}, "banned_ids must be ids of the model's"),
        ((model, prompt, 2), {"banned_ids": range(11)}, "and leave one allowed"),
        ((model, prompt, 2), {"banned_ids": ["x"]}, "banned_ids must be token ids"),
        ((model, prompt, 2), {"context": 2.5}, "context must be a positive number"),
        ((model, prompt, 2), {"seed": 1.5}, "seed must be a whole number"),
        ((model, prompt.bool(), 2), {}, "tensor of integer ids, got torch.bool"),
        ((model, torch.tensor([2, 11]), 2), {}, r"11 tokens \(0 to 10\), got ids from 2 to 11"),
        ((model, torch.tensor([[-1, 5]]), 2), {}, "got ids from -1 to 5"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            generate(*args, **kwargs)
    with pytest.raises(ValueError, match="tensor of integer ids"):
        next(stream(model, [2, 5], 2))
    monkeypatch.undo()  # the model runs again: other integer dtypes and a 0-d temperature
    expected = generate(model, prompt, 3, temperature=0.5, seed=2)
    assert torch.equal(generate(model, prompt.int(), 3, temperature=0.5, seed=2), expected)
    assert torch.equal(generate(model, prompt, 3, temperature=torch.tensor(0.5), seed=2), expected)
    meta = build_model(model.config, device="meta")
    with pytest.raises(ValueError, match="the model is on the meta device and has no weights"):
        generate(meta, prompt, 3)


def test_a_window_longer_than_the_model_reads_is_refused_before_the_first_token():
    model = decoder("trainable", False)  # a table of max_len = 16 positions
    prompt = torch.tensor([2, 5, 7])
    tokens = stream(model, prompt, 20)
    with pytest.raises(ValueError, match=r"cannot read 22 tokens.*context=N"):
        next(tokens)
    assert len(generate(model, prompt, 20, context=16)) == 20  # the window slides
    assert len(generate(model, prompt, 14)) == 14  # 16 tokens at most: no limit reached


def test_top_k_samples_among_the_k_most_likely_tokens():
    model = decoder("rotary", False)
    with torch.no_grad():  # ids 2, 3, 4 far above the rest whatever the context
        model.head_bias.zero_()
        model.head_bias[2:5] = 20.0
    prompt = torch.tensor([5, 6])
    hot = {"temperature": 50.0, "seed": 3}  # nearly uniform over all 11 ids
    assert not set(generate(model, prompt, 40, **hot).tolist()) <= {2, 3, 4}
    within = generate(model, prompt, 40, top_k=3, **hot).tolist()
    assert set(within) <= {2, 3, 4} and len(set(within)) > 1
    greedy = generate(model, prompt, 10, temperature=0.0)
    assert torch.equal(generate(model, prompt, 10, top_k=1, **hot), greedy)
    assert torch.equal(
        generate(model, prompt, 10, top_k=11, **hot), generate(model, prompt, 10, **hot)
    )
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="top_k"):
            generate(model, prompt, 2, top_k=bad)
    for bad in (-0.5, math.nan, math.inf):  # inf and nan: no distribution to sample
        with pytest.raises(ValueError, match="temperature must be a finite number >= 0"):
            generate(model, prompt, 2, temperature=bad)
    with pytest.raises(ValueError, match="num_tokens must be >= 0"):
        generate(model, prompt, -1)


def test_stream_refuses_context_0_and_reads_nothing_for_0_tokens():
    model = decoder("trainable", False)  # max_len = 16
    with pytest.raises(ValueError, match="context must be a positive"):
        generate(model, torch.tensor([2, 5]), 2, context=0)
    assert list(stream(model, torch.full((20,), 3), 0)) == []  # 20 > 16, but nothing is read


@pytest.mark.parametrize("name", ["rotary", "alibi", "xpos"])  # xpos: recomputed, no cache
def test_a_batch_of_prompts_generates_each_row(name):
    model = decoder(name, False)
    prompts = torch.tensor([[2, 5, 7], [9, 3, 3], [4, 4, 8]])
    greedy = generate(model, prompts, 9, temperature=0.0, context=6)  # the window slides too
    assert greedy.shape == (3, 9) and greedy.dtype == torch.long
    for row, prompt in zip(greedy, prompts):  # greedy rows are the prompts' own continuations
        assert torch.equal(row, generate(model, prompt, 9, temperature=0.0, context=6))
    hot = {"temperature": 5.0, "seed": 2}
    many = generate(model, prompts[0].expand(4, -1), 12, **hot)  # 4 samples of one prompt
    assert torch.equal(many, generate(model, prompts[0].expand(4, -1), 12, **hot))
    assert len({tuple(r) for r in many.tolist()}) == 4  # one generator, a fresh draw per row
    assert torch.equal(many, generate(model, prompts[0].expand(4, -1), 12, cache=False, **hot))
    assert generate(model, prompts, 0).shape == (3, 0)
    for bad in (torch.zeros(2, 0, dtype=torch.long), torch.zeros(1, 2, 2, dtype=torch.long)):
        with pytest.raises(ValueError, match=r"\(N,\) or a batch of one length \(B, N\)"):
            generate(model, bad, 2)


def test_batched_sampling_keeps_banned_ids_and_top_k_per_row():
    model = decoder("rotary", False)
    with torch.no_grad():  # ids 2, 3, 4 far above the rest, ids 0 and 1 higher still
        model.head_bias.zero_()
        model.head_bias[2:5] = 20.0
        model.head_bias[:2] = 40.0
    prompts = torch.tensor([[5, 6], [7, 8]])
    new = generate(model, prompts, 30, temperature=50.0, seed=1, top_k=3, banned_ids=[0, 1])
    assert set(new.flatten().tolist()) <= {2, 3, 4} and all(len(set(r)) > 1 for r in new.tolist())


def test_a_temperature_below_greedy_below_is_greedy_for_a_batch():
    config = make_config("decoder", encoding="rotary", d_model=8, num_heads=2, dim_feedforward=16,
                         num_layers=2, vocab_size=11, max_len=16, tie_embeddings=False)  # fmt: skip
    torch.manual_seed(0)
    model = build_model(real_twin(config), dtype=torch.float64).eval()
    with torch.no_grad():  # logits exactly tied between ids 3 and 7: greedy takes 3
        model.head_weight.zero_()
        model.head_bias.zero_()
        model.head_bias[[3, 7]] = 30.0
    prompts = torch.tensor([[2, 5], [9, 4]])
    new = generate(model, prompts, 12, temperature=GREEDY_BELOW / 10, seed=0)
    assert torch.equal(new, generate(model, prompts, 12, temperature=0.0))
    assert new.eq(3).all()
