"""Randomized positional encodings: evaluation equals the wrapped encoding; in training (and at
evaluation with eval_positions="random") the positions are a sorted, distinct subset of
range(max_positions), reproducible from torch's seed (from eval_seed at evaluation), shared by
every layer of a forward, and the wrapped encoding's formula is applied at them."""

import pytest
import torch

from cplxnet.encodings import RandomizedEncoding, create_encoding
from cplxnet.models import build_model, make_config

CTX = dict(d_model=8, num_heads=2, vocab_size=11, max_len=6)
KINDS = [torch.complex128, torch.float64]
BASES = ["rotary", "sinusoidal", "trainable", "complex-order"]


def build(base, kind, **opts):
    torch.manual_seed(0)
    enc = create_encoding("randomized", base=base, dtype=kind, **CTX, **opts)
    with torch.no_grad():
        for p in enc.parameters():
            p.copy_(torch.randn_like(p))
    return enc


def apply(enc, ids, x, q):
    """Every hook the wrapper has, in the order a model calls them."""
    out = enc.embed(ids) if "token" in enc.acts_on else x
    out = enc.encode_input(out)
    q2, k2, _ = enc.rotate(q, q, q)
    return out, q2


def plain(base, ids, x, q):
    out = base.embed(ids) if "token" in base.acts_on else x
    out = base.encode_input(out)
    q2, _, _ = base.rotate(q, q, q)
    return out, q2


def inputs(kind, length=5):
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, 11, (2, length), generator=g)
    x = torch.randn(2, length, 8, generator=g, dtype=torch.float64).to(kind)
    q = torch.randn(2, 2, length, 4, generator=g, dtype=torch.float64).to(kind)
    return ids, x, q


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("base", BASES)
def test_evaluation_equals_the_base(base, kind):
    enc = build(base, kind).eval()
    ids, x, q = inputs(kind, 9)  # longer than max_len: plain positions have no bound
    if base == "trainable":
        ids, x, q = inputs(kind, 5)
    for a, b in zip(apply(enc, ids, x, q), plain(enc.base, ids, x, q)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("mode", ["train", "random-eval"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("base", BASES)
def test_training_applies_the_base_at_sorted_random_positions(base, kind, mode):
    """The output at token t equals the base's plain output at position m_t of a window of
    max_positions tokens holding token t at m_t (in training, and at evaluation with
    eval_positions="random")."""
    if mode == "train":
        enc = build(base, kind).train()
    else:
        enc = build(base, kind, eval_positions="random", eval_seed=5).eval()
    M = enc.max_positions
    assert 4 * CTX["max_len"] == M
    ids, x, q = inputs(kind)
    torch.manual_seed(11)
    out, q2 = apply(enc, ids, x, q)
    m = enc._drawn.index
    assert m.shape == (5,) and m.dtype == torch.long
    assert (m[1:] > m[:-1]).all() and m.min() >= 0 and m.max() < M  # sorted, distinct, in range
    assert m.max() >= 5  # not the plain positions (seeded)
    long_ids = torch.ones(2, M, dtype=torch.long)
    long_x = torch.zeros(2, M, 8, dtype=kind)
    long_q = torch.zeros(2, 2, M, 4, dtype=kind)
    long_ids[:, m], long_x[:, m], long_q[:, :, m] = ids, x, q
    ref_out, ref_q = plain(enc.base.eval(), long_ids, long_x, long_q)
    torch.testing.assert_close(out, ref_out[:, m])
    torch.testing.assert_close(q2, ref_q[:, :, m])
    if base == "rotary" and kind.is_complex:  # the formula itself: q e^{i m theta}
        theta = 10000.0 ** (-torch.arange(4, dtype=torch.float64) / 4)
        turn = torch.polar(torch.ones(5, 4, dtype=torch.float64), m[:, None] * theta)
        torch.testing.assert_close(q2, q * turn)


def test_seeded_reproducible_and_fresh_per_forward():
    enc = build("rotary", torch.complex128).train()
    x = torch.zeros(1, 7, 8, dtype=torch.complex128)
    draws = []
    for seed in (1, 1, 2):
        torch.manual_seed(seed)
        enc.encode_input(x)
        draws.append(enc._drawn.index.clone())
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])
    enc.encode_input(x)
    assert not torch.equal(enc._drawn.index, draws[2])  # a new forward draws again


def test_random_evaluation_draws_from_its_own_seed_afresh_at_each_eval():
    """eval_positions="random": every .eval() restarts the draws from eval_seed (a repeated
    evaluation sees the same positions, whatever torch's seed), torch's generator is not
    touched, successive forwards draw afresh, training draws are those of the default."""
    enc = build("rotary", torch.complex128, eval_positions="random", eval_seed=4)
    x = torch.zeros(1, 7, 8, dtype=torch.complex128)

    def evaluation(seed):
        torch.manual_seed(seed)
        enc.eval()
        state = torch.get_rng_state()
        draws = []
        for _ in range(2):
            enc.encode_input(x)
            draws.append(enc._drawn.index.clone())
        assert torch.equal(torch.get_rng_state(), state)
        return draws

    first, again = evaluation(0), evaluation(99)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], first[1])
    g = torch.Generator().manual_seed(4)
    assert torch.equal(first[0], torch.randperm(enc.max_positions, generator=g)[:7].sort().values)
    other = build("rotary", torch.complex128, eval_positions="random", eval_seed=5).eval()
    other.encode_input(x)
    assert not torch.equal(other._drawn.index, first[0])
    plain_enc = build("rotary", torch.complex128).train()
    for e in (enc.train(), plain_enc):
        torch.manual_seed(3)
        e.encode_input(x)
    assert torch.equal(enc._drawn.index, plain_enc._drawn.index)
    assert "eval_positions='random', eval_seed=4" in repr(enc)
    with pytest.raises(ValueError, match="eval_positions must be one of plain, random"):
        create_encoding("randomized", eval_positions="test", **CTX)


def test_random_evaluation_bounds_the_length_and_the_model_says_so():
    config = make_config("decoder", vocab_size=11, d_model=8, num_heads=2, dim_feedforward=8,
                         num_layers=1, max_len=6, encoding="randomized",
                         encoding_options={"eval_positions": "random"})  # fmt: skip
    model = build_model(config)
    assert model.encoding.max_positions == 24 and not model.supports_kv_cache
    assert model.unsupported_length(24) is None
    assert "25 tokens need max_positions >= 25" in model.unsupported_length(25)
    plain_model = build_model(make_config("decoder", vocab_size=11, d_model=8, num_heads=2,
                                          dim_feedforward=8, num_layers=1, max_len=6,
                                          encoding="randomized"))  # fmt: skip
    assert plain_model.unsupported_length(25) is None  # plain positions have no bound


def test_a_change_of_mode_drops_the_draw_and_rotate_reuses_it_until_a_new_draw():
    """The input hook (or ``draw``) draws once per forward; the attention hooks reuse that draw
    and refuse to run without one, which would silently keep one set of positions for the
    whole training of a hand-built model that never calls ``encode_input``."""
    enc = build("rotary", torch.complex128, eval_positions="random", eval_seed=0).train()
    q = torch.randn(1, 2, 5, 4, dtype=torch.complex128)
    with pytest.raises(ValueError, match=r"call x = encoding.encode_input\(x\)"):
        enc.rotate(q, q, q)
    torch.manual_seed(1)
    enc.encode_input(torch.zeros(1, 5, 8, dtype=torch.complex128))
    trained = enc._drawn.index.clone()
    first = enc.rotate(q, q, q)[0]
    torch.testing.assert_close(enc.rotate(q, q, q)[0], first)  # every layer: the same draw
    with pytest.raises(ValueError, match="no positions drawn for these 3 tokens"):
        enc.rotate(q[:, :, :3], q[:, :, :3], q[:, :, :3])
    enc.draw(5)
    assert not torch.equal(enc._drawn.index, trained)  # a new forward's draw
    enc.eval()
    assert enc._drawn is None
    enc.draw(5)
    g = torch.Generator().manual_seed(0)
    want = torch.randperm(enc.max_positions, generator=g)[:5].sort().values
    assert torch.equal(enc._drawn.index, want)  # from eval_seed, not the training draw
    enc.train()
    assert enc._drawn is None


def test_draws_cover_the_whole_stated_range():
    """Positions come from all of range(max_positions) (max_len 6: 24 by default), uniformly:
    the last position is drawn as often as the first, and a draw of max_positions tokens is
    every position."""
    enc = build("sinusoidal", torch.float64).train()
    torch.manual_seed(0)
    counts = torch.zeros(enc.max_positions)
    for _ in range(400):
        counts += torch.bincount(enc.draw(6).index, minlength=enc.max_positions)
    expected = 400 * 6 / enc.max_positions  # 100 per position
    assert enc.max_positions == 24 and counts.min() > 0.6 * expected
    assert counts[-1] > 0.6 * expected and counts[0] > 0.6 * expected
    assert torch.equal(enc.draw(24).index, torch.arange(24))


def test_one_draw_per_forward_shared_by_every_layer(monkeypatch):
    config = make_config(
        "decoder",
        vocab_size=11,
        encoding="randomized",
        d_model=8,
        num_heads=2,
        dim_feedforward=8,
        num_layers=3,
        max_len=6,
    )
    model = build_model(config).train()
    enc = model.encoding
    seen = []
    real_rotate = enc.base.rotate

    def spy(q, k, v, *, positions=None):
        seen.append(positions)
        return real_rotate(q, k, v, positions=positions)

    monkeypatch.setattr(enc.base, "rotate", spy)
    model(torch.randint(1, 11, (2, 6)))
    assert len(seen) == 3 and all(s is seen[0] for s in seen)
    model(torch.randint(1, 11, (2, 6)))
    assert not torch.equal(seen[3].index, seen[0].index)
    model.eval()(torch.randint(1, 11, (2, 6)))
    assert seen[6:] == [None] * 3  # plain positions at evaluation


def test_options_and_refusals():
    enc = create_encoding("randomized", max_positions=100, **CTX)
    assert enc.max_positions == 100 and isinstance(enc, RandomizedEncoding)
    assert set(enc.state_dict()) == set()  # rotary has no parameters
    assert "base.weight" in create_encoding("randomized", base="trainable", **CTX).state_dict()
    with pytest.raises(ValueError, match="at least the model's max_len"):
        create_encoding("randomized", max_positions=3, **CTX)
    refused = (("xpos", "its rotate takes no positions"), ("alibi", "acts on \\['logits'\\]"))
    for base, why in refused:
        with pytest.raises(ValueError, match=f"randomize the positions of '{base}': .*{why}"):
            create_encoding("randomized", base=base, **CTX)
    enc = create_encoding("randomized", max_positions=8, **CTX).train()
    with pytest.raises(ValueError, match="9 tokens need max_positions >= 9"):
        enc.encode_input(torch.zeros(1, 9, 8, dtype=torch.complex64))


def test_evaluation_leaves_unequal_lengths_to_the_base():
    """At evaluation the base's own rotate runs (whatever it does with Lq != Lk); in training
    the drawn positions are those of one sequence, so the lengths must agree."""
    enc = build("rotary", torch.complex128).eval()
    q = torch.randn(1, 2, 1, 4, dtype=torch.complex128)
    k = torch.randn(1, 2, 5, 4, dtype=torch.complex128)
    for a, b in zip(enc.rotate(q, k, k), enc.base.rotate(q, k, k)):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="randomized positions need as many queries as keys"):
        enc.train().rotate(q, k, k)
