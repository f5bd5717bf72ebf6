"""Rotary scaling (linear, ntk, yarn) against the published formulas, written plainly here, and
its effect in rotary and xpos (frequencies changed, yarn's attention factor applied)."""

import math

import pytest
import torch

from cplxnet._utils import pack
from cplxnet.encodings import (
    ROPE_SCALINGS,
    RotaryEncoding,
    XPosEncoding,
    create_encoding,
    rope_frequencies,
)

C, R = torch.complex128, torch.float64


def theta(dim, base):
    """RoFormer: base^(-2j/dim), j < dim/2."""
    return [base ** (-2 * j / dim) for j in range(dim // 2)]


def yarn_reference(dim, base, s, length, beta_fast=32, beta_slow=1):
    """YaRN (Peng et al. 2023, as its code and Hugging Face): the dimension at which a frequency
    turns r times over the training length L is d(r) = dim ln(L / (2 pi r)) / (2 ln base); the
    ramp runs from floor(d(beta_fast)) (clamped at 0) to ceil(d(beta_slow)) (clamped at dim - 1); at
    index j, ramp = clamp((j - low) / (high - low), 0, 1) and the new frequency is
    theta_j / s * ramp + theta_j * (1 - ramp); attention factor 0.1 ln s + 1 (1 if s <= 1)."""

    def d(r):
        return dim * math.log(length / (2 * math.pi * r)) / (2 * math.log(base))

    low = max(math.floor(d(beta_fast)), 0)
    high = min(math.ceil(d(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    out = []
    for j, t in enumerate(theta(dim, base)):
        ramp = min(max((j - low) / (high - low), 0.0), 1.0)
        out.append(t / s * ramp + t * (1 - ramp))
    return out, (0.1 * math.log(s) + 1 if s > 1 else 1.0)


def test_registry_of_scalings():
    assert set(ROPE_SCALINGS) == {"linear", "ntk", "yarn"}


@pytest.mark.parametrize("dim,base,s", [(8, 10000.0, 4.0), (64, 10000.0, 2.5), (128, 500.0, 8.0)])
def test_linear_and_ntk_frequencies(dim, base, s):
    f, a = rope_frequencies(None, dim, base)
    assert f.tolist() == pytest.approx(theta(dim, base), rel=1e-13) and a == 1.0
    f, a = rope_frequencies("linear", dim, base, s)
    assert f.tolist() == pytest.approx([t / s for t in theta(dim, base)], rel=1e-13) and a == 1.0
    f, a = rope_frequencies("ntk", dim, base, s)
    ntk = theta(dim, base * s ** (dim / (dim - 2)))
    assert f.tolist() == pytest.approx(ntk, rel=1e-13) and a == 1.0
    # NTK-aware: the fastest frequency is kept, the slowest is interpolated by exactly s
    assert f[0].item() == 1.0
    assert f[-1].item() == pytest.approx(theta(dim, base)[-1] / s, rel=1e-12)


@pytest.mark.parametrize(
    "dim,base,s,length,bf,bs",
    [
        (128, 10000.0, 4.0, 4096, 32, 1),
        (64, 10000.0, 16.0, 2048, 32, 1),
        (64, 500000.0, 8.0, 8192, 32, 1),
        (16, 10000.0, 2.0, 64, 32, 1),
        (128, 10000.0, 4.0, 4096, 16, 2),
        (8, 10000.0, 0.5, 512, 32, 1),
    ],
)
def test_yarn_frequencies_and_attention_factor(dim, base, s, length, bf, bs):
    ref, ref_a = yarn_reference(dim, base, s, length, bf, bs)
    opts = dict(original_max_len=length, beta_fast=bf, beta_slow=bs)
    f, a = rope_frequencies("yarn", dim, base, s, **opts)
    assert f.tolist() == pytest.approx(ref, rel=1e-13)
    assert a == pytest.approx(ref_a, rel=1e-15)
    # the paper's reading: frequencies turning at least beta_fast times over L are kept, those
    # turning at most beta_slow times are interpolated (theta / s), the others lie between
    orig = theta(dim, base)
    for new, old in zip(f.tolist(), orig):
        turns = length * old / (2 * math.pi)
        if turns >= bf:
            assert new == pytest.approx(old, rel=1e-13)
        elif turns <= bs:
            assert new == pytest.approx(old / s, rel=1e-13)
        else:
            assert min(old, old / s) <= new * (1 + 1e-13) and new <= max(old, old / s) * (1 + 1e-13)


def test_yarn_attention_factor_values():
    assert rope_frequencies("yarn", 8, 1e4, 4.0, original_max_len=64)[1] == pytest.approx(
        1 + 0.1 * math.log(4)
    )
    assert rope_frequencies("yarn", 8, 1e4, 1.0, original_max_len=64)[1] == 1.0


def test_linear_is_position_interpolation():
    """Linear scaling by s puts position s*m where the unscaled rotary puts position m."""
    enc = RotaryEncoding(4, 1, scaling="linear", factor=3.0, dtype=C)
    plain = RotaryEncoding(4, 1, dtype=C)
    x = torch.randn(1, 1, 1, 4, dtype=C).expand(1, 1, 30, 4)
    torch.testing.assert_close(enc.rotate_one(x)[..., ::3, :], plain.rotate_one(x)[..., :10, :])


@pytest.mark.parametrize("name", ["rotary", "xpos"])
@pytest.mark.parametrize("layout", ["complex", "interleaved", "half"])
def test_yarn_applied_in_rotate(name, layout):
    """q and k each get the attention factor a = 0.1 ln s + 1 (the logits a^2, Hugging Face's
    cos/sin scaling), on top of the rotation by the yarn frequencies; the xpos decay is kept."""
    kind = C if layout == "complex" else R
    lay = "interleaved" if layout == "complex" else layout
    opts = dict(layout=lay, scaling="yarn", factor=4.0, original_max_len=32, dtype=kind)
    if name == "xpos":
        opts["scale_base"] = 8.0
    enc = create_encoding(name, d_model=8, num_heads=1, **opts)
    n = 8 if kind.is_complex else 4
    freqs, a = yarn_reference(2 * n, 10000.0, 4.0, 32)
    assert a == pytest.approx(1 + 0.1 * math.log(4))
    assert enc.frequencies.tolist() == pytest.approx(freqs, rel=1e-13)
    L = 6
    q, k = (torch.randn(1, 1, L, 8, dtype=kind) for _ in range(2))
    q2, k2, _ = enc.rotate(q, k, k)
    qc, kc = (torch.view_as_complex(pack(t).unflatten(-1, (-1, 2))) for t in (q, k))
    if layout == "half":
        qc, kc = (torch.complex(t[..., :n], t[..., n:]) for t in (q, k))
    scores = pack(q2)[0, 0] @ pack(k2)[0, 0].T
    for m in range(L):
        for j in range(L):
            s = 0.0
            for f in range(n):
                z = (f / n + 0.4) / 1.4 if name == "xpos" else 1.0
                w = z ** ((m - j) / 8.0) * complex(
                    math.cos((m - j) * freqs[f]), math.sin((m - j) * freqs[f])
                )
                s += (complex(qc[0, 0, m, f]) * complex(kc[0, 0, j, f]).conjugate() * w).real
            assert scores[m, j].item() == pytest.approx(a * a * s, rel=1e-10, abs=1e-12)


def test_values_do_not_get_the_attention_factor():
    enc = RotaryEncoding(4, 1, rotate_values=True, scaling="yarn", factor=4.0, dtype=C)
    plain = RotaryEncoding(4, 1, rotate_values=True, dtype=C)
    plain.frequencies = enc.frequencies
    plain._freqs = plain._build(4, None)
    q = torch.randn(1, 1, 5, 4, dtype=C)
    q2, _, v2 = enc.rotate(q, q, q)
    torch.testing.assert_close(v2, plain.rotate_one(q))
    torch.testing.assert_close(q2, plain.rotate_one(q) * enc.attention_factor)


def test_original_max_len_defaults_to_the_model_length():
    enc = create_encoding("rotary", d_model=8, num_heads=2, max_len=100, scaling="yarn", factor=2.0)
    ref, _ = yarn_reference(8, 10000.0, 2.0, 100)
    assert enc.frequencies.tolist() == pytest.approx(ref, rel=1e-13)
    assert "scaling='yarn', factor=2" in repr(enc)


def test_bad_scaling_options():
    with pytest.raises(ValueError, match="unknown scaling 'cubic'"):
        RotaryEncoding(8, 2, scaling="cubic")
    with pytest.raises(ValueError, match="factor apply only with scaling="):
        RotaryEncoding(8, 2, factor=2.0)
    with pytest.raises(
        ValueError, match="beta_fast does not apply to scaling='linear'; it applies to 'yarn'"
    ):
        RotaryEncoding(8, 2, scaling="linear", factor=2.0, beta_fast=16)
    with pytest.raises(ValueError, match="beta_slow < beta_fast"):
        XPosEncoding(8, 2, scaling="yarn", factor=2.0, beta_fast=1, beta_slow=32)
    with pytest.raises(ValueError, match="factor must be a finite positive"):
        RotaryEncoding(8, 2, scaling="linear", factor=0.0)
    with pytest.raises(ValueError, match="dim must be an even int >= 4"):
        RotaryEncoding(2, 2, scaling="ntk", factor=2.0)


def hf_yarn(
    dim, base, s, length, truncate=True, mscale=None, mscale_all_dim=None, attention_factor=None
):
    """Hugging Face's ``_compute_yarn_parameters`` (transformers 5.x) transcribed: ramp bounds
    rounded only with ``truncate``, the factor from mscale / mscale_all_dim or given."""

    def get_mscale(scale, m=1):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = get_mscale(s, mscale) / get_mscale(s, mscale_all_dim)
        else:
            attention_factor = get_mscale(s)

    def d(r):
        return dim * math.log(length / (r * 2 * math.pi)) / (2 * math.log(base))

    low, high = d(32), d(1)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    out = []
    for j, t in enumerate(theta(dim, base)):
        extrapolation = 1 - min(max((j - low) / (high - low), 0.0), 1.0)
        out.append(t / s * (1 - extrapolation) + t * extrapolation)
    return out, attention_factor


@pytest.mark.parametrize(
    "opts",
    [
        dict(truncate=False),
        dict(mscale=0.707, mscale_all_dim=0.707),
        dict(mscale=1.0, mscale_all_dim=0.5),
        dict(mscale=1.0),  # one of the two alone: the default factor, as Hugging Face
        dict(attention_factor=1.25, truncate=False),
    ],
)
def test_yarn_accepts_hugging_face_options(opts):
    """Each option matches Hugging Face's rule and changes the result (but mscale alone); the
    encodings accept them (complex heads of 32 features: rotary width 64)."""
    ref, ref_a = hf_yarn(64, 10000.0, 8.0, 2048, **opts)
    f, a = rope_frequencies("yarn", 64, 10000.0, 8.0, original_max_len=2048, **opts)
    assert f.tolist() == pytest.approx(ref, rel=1e-13) and a == pytest.approx(ref_a, rel=1e-15)
    default_f, default_a = rope_frequencies("yarn", 64, 10000.0, 8.0, original_max_len=2048)
    same = f.tolist() == default_f.tolist() and a == default_a
    assert same == (opts == dict(mscale=1.0))
    for name in ("rotary", "xpos"):
        enc = create_encoding(
            name, d_model=32, num_heads=1, max_len=2048, scaling="yarn", factor=8.0, **opts
        )
        assert enc.frequencies.tolist() == pytest.approx(ref, rel=1e-13)
        assert enc.attention_factor == pytest.approx(ref_a, rel=1e-15)


def test_yarn_options_are_checked_and_belong_to_yarn():
    with pytest.raises(TypeError, match="truncate must be True or False"):
        RotaryEncoding(8, 2, scaling="yarn", factor=2.0, truncate="no")
    with pytest.raises(ValueError, match="mscale must be a finite number"):
        RotaryEncoding(8, 2, scaling="yarn", factor=2.0, mscale=float("nan"))
    with pytest.raises(ValueError, match="attention_factor must be a finite positive"):
        RotaryEncoding(8, 2, scaling="yarn", factor=2.0, attention_factor=0.0)
    with pytest.raises(ValueError, match="mscale does not apply to scaling='ntk'"):
        RotaryEncoding(8, 2, scaling="ntk", factor=2.0, mscale=1.0)
    assert "truncate=False" in repr(
        RotaryEncoding(8, 2, scaling="yarn", factor=2.0, truncate=False)
    )


def test_ntk_is_the_static_base_change_and_equals_hugging_face_dynamic_at_one_length():
    """Hugging Face's "dynamic" NTK base at length L: b (s L / L0 - (s - 1))^(dim/(dim-2));
    equal to the static ntk base only at L = L0 (2s - 1) / s."""
    dim, b, s, L0 = 16, 10000.0, 4.0, 64
    static, _ = rope_frequencies("ntk", dim, b, s)

    def dynamic(length):
        return theta(dim, b * (s * length / L0 - (s - 1)) ** (dim / (dim - 2)))

    assert static.tolist() == pytest.approx(dynamic(L0 * (2 * s - 1) / s), rel=1e-12)
    for length in (L0 * 2, L0 * 4, L0 * 8):
        assert static.tolist() != pytest.approx(dynamic(length), rel=1e-6)
