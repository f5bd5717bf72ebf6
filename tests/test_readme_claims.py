"""Claims of README.md checked by behaviour: its two Python examples run; ``MVN(sectors=k)`` is
the layer ``torch.func`` and forward-mode AD refuse; the U-Net exports with dynamic spatial sizes
and compiles to one graph; cross-attention takes xPos and refuses relative encodings; SIGTERM
stops ``cplxnet train`` as Ctrl-C does; attention runs torch's fused kernel once at head width
2*Dh unless its score or encoding needs the weights; the zoo's presets; the sites each zoo family
supports."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest
import torch
import torch.autograd.forward_ad as fw
import torch.nn.functional as F
from torch.export import Dim
from torch.func import grad, jvp, vmap
from waiting import wait_until

import cplxnet
import cplxnet.models as models
import cplxnet.nn as cnn
from cplxnet.encodings import create_encoding

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
C = torch.complex128


def _readme_python_blocks() -> list[str]:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        blocks = re.findall(r"^```python\n(.*?)^```", fh.read(), flags=re.S | re.M)
    assert len(blocks) == 2, "README.md: the examples of 'Build your own model' and 'The zoo'"
    return blocks


def _ids_and_mask(vocab: int, lengths=(6, 4, 2)) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    L = max(lengths)
    ids = torch.randint(1, vocab, (len(lengths), L), generator=g)
    mask = torch.arange(L)[None, :] >= torch.tensor(lengths)[:, None]  # True = padding
    return ids.masked_fill(mask, 0), mask


# -- the README's Python examples ---------------------------------------------------------------


def test_the_build_your_own_model_example_trains():
    """README "Build your own model": TinyComplexClassifier runs forward and backward and gives
    real logits (B, classes)."""
    namespace: dict = {"__name__": "readme_example"}
    exec(compile(_readme_python_blocks()[0], "README.md", "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["TinyComplexClassifier"](vocab_size=20)
    ids, mask = _ids_and_mask(20)
    logits = model(ids, mask)
    assert logits.shape == (3, 2) and logits.dtype == torch.float32
    assert torch.isfinite(logits).all()
    torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 1])).backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    assert grads and all(g is not None for g in grads.values()), grads.keys()
    assert all(torch.isfinite(g.to_dense()).all() for g in grads.values())
    assert any(g.to_dense().abs().sum() > 0 for n, g in grads.items() if n.startswith("words."))


def test_the_zoo_example_builds_a_complex_model_and_its_real_twin():
    """README "The zoo": make_config / build_model / real_twin give a complex model with real
    logits and a real twin of doubled width."""
    namespace: dict = {"__name__": "readme_zoo", "V": 50}
    exec(compile(_readme_python_blocks()[1], "README.md", "exec"), namespace)
    model, twin, cfg = namespace["model"], namespace["twin"], namespace["cfg"]
    assert any(p.is_complex() for p in model.parameters())
    assert not any(p.is_complex() for p in twin.parameters())
    assert twin.config.d_model == 2 * cfg.d_model and not twin.config.complex
    ids, mask = _ids_and_mask(50)
    for m in (model, twin):
        out = m.eval()(ids, mask)
        assert out.shape == (3, 6) and not out.is_complex() and torch.isfinite(out).all()


# -- torch.func and forward-mode AD: not MVN(sectors=k) --------------------------------------------

FUNC_REFUSAL = "must override the setup_context staticmethod"
FORWARD_AD_REFUSAL = "must implement the jvp function"


def test_discrete_mvn_is_refused_by_torch_func_and_forward_mode_ad():
    """README: layers run under torch.func and forward-mode AD, "not MVN(sectors=k)"."""
    m = cnn.MVN(sectors=4)
    x = torch.randn(3, 5, dtype=C)
    v = torch.randn_like(x)
    with pytest.raises(RuntimeError, match=FUNC_REFUSAL):
        grad(lambda z: m(z).real.sum())(x)
    with pytest.raises(RuntimeError, match=FUNC_REFUSAL):
        jvp(m, (x,), (v,))
    with pytest.raises(RuntimeError, match=FUNC_REFUSAL):
        vmap(m)(torch.stack((x, v)))
    with pytest.raises(NotImplementedError, match=FORWARD_AD_REFUSAL), fw.dual_level():
        m(fw.make_dual(x, v))


def test_continuous_mvn_runs_under_torch_func_and_forward_mode_ad():
    """README: the exception is MVN *with* sectors; MVN() (z/|z|) runs under grad, jvp, vmap and
    forward-mode AD, matching autograd, a central difference and a loop."""
    m = cnn.MVN()
    x = torch.randn(3, 5, dtype=C)
    v = torch.randn_like(x)

    def loss(z):
        return (m(z) * torch.arange(5)).real.sum()

    xr = x.clone().requires_grad_()
    loss(xr).backward()
    torch.testing.assert_close(grad(loss)(x), xr.grad)
    h = 1e-6
    want = (m(x + h * v) - m(x - h * v)) / (2 * h)
    torch.testing.assert_close(jvp(m, (x,), (v,))[1], want, rtol=1e-5, atol=1e-5)
    with fw.dual_level():
        tangent = fw.unpack_dual(m(fw.make_dual(x, v))).tangent
    torch.testing.assert_close(tangent, want, rtol=1e-5, atol=1e-5)
    xs = torch.stack((x, v))
    got = vmap(m)(xs)
    for k in range(2):
        torch.testing.assert_close(got[k], m(xs[k]))


# -- the U-Net: export with dynamic spatial sizes, one compiled graph -----------------------------


@pytest.mark.slow  # seconds: tracing
@torch.no_grad()
def test_unet_exports_with_dynamic_height_and_width():
    """README: zoo models export with Dim.DYNAMIC; the example U-Net (cplxnet.models.UNet) too,
    its spatial sizes dynamic: the program equals eager on other sizes."""
    torch.manual_seed(0)
    net = models.UNet(1, 1, base_channels=2, depth=1).eval()
    x = torch.randn(2, 1, 6, 10, dtype=torch.complex64)
    spatial = {2: Dim.DYNAMIC, 3: Dim.DYNAMIC}
    program = torch.export.export(net, (x,), dynamic_shapes=(spatial,))
    for size in ((12, 4), (4, 16)):
        y = torch.randn(2, 1, *size, dtype=torch.complex64)
        torch.testing.assert_close(program.module()(y), net(y))


@pytest.mark.slow  # seconds: compilation
@torch.no_grad()
def test_unet_compiles_to_one_graph():
    """README: zoo models compile with fullgraph=True; cplxnet.models.UNet in eval mode gives
    eager's output."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    net = models.UNet(1, 1, base_channels=2, depth=1).eval()
    compiled = torch.compile(net, backend="aot_eager", fullgraph=True)
    x = torch.randn(2, 1, 6, 10, dtype=torch.complex64)
    torch.testing.assert_close(compiled(x), net(x))


# -- cross-attention: memory_encoding=xpos ---------------------------------------------------------

D, H = 8, 2


def _decoder_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    tgt = torch.randn(2, 4, D, dtype=C, generator=g)
    mem = torch.randn(2, 6, D, dtype=C, generator=g)  # longer than the target
    return tgt, mem


def _xpos():
    return create_encoding("xpos", d_model=D, num_heads=H, dtype=C)


def test_cross_attention_takes_xpos():
    """README: "cross-attention takes rotary/xpos (memory_encoding=)": xpos changes the output,
    and xpos without its decay (scale_base=inf) is rotary there."""
    layer = cnn.TransformerDecoderLayer(D, H, 12, 0.0, batch_first=True, dtype=C).eval()
    tgt, mem = _decoder_inputs()
    plain = layer(tgt, mem, tgt_is_causal=True)
    got = layer(tgt, mem, tgt_is_causal=True, memory_encoding=_xpos())
    assert got.shape == plain.shape and torch.isfinite(got).all()
    assert not torch.allclose(got, plain)
    rotary = create_encoding("rotary", d_model=D, num_heads=H, dtype=C)
    want = layer(tgt, mem, tgt_is_causal=True, memory_encoding=rotary)
    assert not torch.allclose(got, want)  # the decay acts
    flat_xpos = create_encoding("xpos", d_model=D, num_heads=H, scale_base=float("inf"), dtype=C)
    flat = layer(tgt, mem, tgt_is_causal=True, memory_encoding=flat_xpos)
    torch.testing.assert_close(flat, want)
    stack = cnn.TransformerDecoder(layer, 2)
    out = stack(tgt, mem, tgt_is_causal=True, memory_encoding=_xpos())
    assert not torch.allclose(out, stack(tgt, mem, tgt_is_causal=True))


@pytest.mark.parametrize("spec", ["xpos+t5", "xpos+shaw", "kerple"])
def test_cross_attention_refuses_relative_encodings_beside_xpos(spec):
    """README: cross-attention "refuses relative encodings", xpos joined to one too."""
    enc = create_encoding(spec, d_model=D, num_heads=H, causal=True, dtype=C)
    layer = cnn.TransformerDecoderLayer(D, H, 12, 0.0, batch_first=True, dtype=C)
    tgt, mem = _decoder_inputs()
    with pytest.raises(ValueError, match="memory_encoding .* undefined in cross-attention"):
        layer(tgt, mem, memory_encoding=enc)
    layer(tgt, mem, tgt_is_causal=True, encoding=enc)  # the self-attention takes it


# -- SIGTERM on `cplxnet train` --------------------------------------------------------------------


@pytest.mark.slow  # a subprocess run, then its resume
def test_sigterm_stops_cplxnet_train_as_ctrl_c_and_the_run_resumes(tmp_path):
    """README: "SIGTERM stops a command as Ctrl-C does": a language-model run ended by SIGTERM
    after its first checkpoint exits with Ctrl-C's status 130 and one line naming
    `cplxnet train --resume RUN`, keeps checkpoint.pt, and --resume finishes it."""
    text = tmp_path / "text.txt"
    line = "the film is a gorgeous, witty and dull story of love and loss. "
    text.write_text("\n".join(line[i % 29 :] + line[: i % 29] for i in range(300)))
    run = str(tmp_path / "run")
    checkpoint = os.path.join(run, "checkpoint.pt")
    here = os.path.dirname(os.path.dirname(cplxnet.__file__))  # the cplxnet under test
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))  # fmt: skip
    train = ["--task", "lm", "--data", str(text), "--d-model", "8", "--set", "num_layers=1",
             "--set", "num_heads=2", "--set", "dim_feedforward=16", "--context", "8",
             "--batch-size", "4", "--steps", "300", "--eval-every", "20", "--threads", "1",
             "--quiet", "--run-dir", run]  # fmt: skip
    cli = [sys.executable, "-m", "cplxnet", "train"]
    proc = subprocess.Popen([*cli, *train], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert wait_until(lambda: os.path.exists(checkpoint) or proc.poll() is not None, 120)
        assert proc.poll() is None, "the run ended before its first checkpoint was seen"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert lines[-1] == (
        f"cplxnet: error: interrupted; continue the run with: cplxnet train --resume {run}"
    ), stderr
    assert sum("--resume" in ln for ln in lines) == 1
    assert os.path.isfile(checkpoint) and not os.path.exists(os.path.join(run, "results.json"))
    done = subprocess.run([*cli, "--resume", run, "--quiet", "--threads", "1"], env=env,
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert os.path.isfile(os.path.join(run, "results.json"))


# -- attention: torch's fused kernel at head width 2*Dh --------------------------------------------


@pytest.fixture
def sdpa_calls(monkeypatch):
    """The (q, k, v) of every call of torch.nn.functional.scaled_dot_product_attention."""
    calls = []
    real = F.scaled_dot_product_attention

    def spy(q, k, v, *args, **kwargs):
        calls.append((q, k, v))
        return real(q, k, v, *args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    return calls


def _encoder_layer(score: str = "real") -> cnn.TransformerEncoderLayer:
    torch.manual_seed(0)
    return cnn.TransformerEncoderLayer(D, H, 16, 0.0, batch_first=True, score=score)


def _encoder_input() -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(2, 5, D, dtype=torch.complex64)
    pad = torch.zeros(2, 5, dtype=torch.bool)
    pad[1, 3:] = True
    return x, pad


@pytest.mark.parametrize("padded", [False, True], ids=["no-mask", "padding-mask"])
@pytest.mark.parametrize("encoding", [None, "rotary", "t5"])
def test_real_score_attention_is_one_fused_call_on_packed_heads(sdpa_calls, encoding, padded):
    """README: "attention runs torch's fused real kernel at head width 2*Dh" (score="real", the
    default; qk and logits-bias encodings keep it), and gives the explicit weights' result."""
    layer = _encoder_layer()
    enc = None if encoding is None else create_encoding(encoding, d_model=D, num_heads=H)
    x, pad = _encoder_input()
    pad = pad if padded else None
    out = layer(x, src_key_padding_mask=pad, encoding=enc)
    assert len(sdpa_calls) == 1 and torch.isfinite(out).all()
    Dh = D // H
    for t in sdpa_calls[0]:
        assert t.dtype == torch.float32 and t.shape == (2, H, 5, 2 * Dh)
    del sdpa_calls[:]
    attn = layer.self_attn
    got, _ = attn(x, x, x, key_padding_mask=pad, need_weights=False, encoding=enc)
    assert len(sdpa_calls) == 1
    want, _ = attn(x, x, x, key_padding_mask=pad, need_weights=True, encoding=enc)
    assert len(sdpa_calls) == 1  # need_weights=True: the weights computed explicitly
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize(("score", "encoding"), [("modulus", None), ("real", "shaw")])
def test_modulus_score_and_value_terms_never_call_the_fused_kernel(sdpa_calls, score, encoding):
    """README (attention): score="modulus" and an encoding with a value term (shaw) compute the
    weights explicitly; torch's scaled_dot_product_attention is never called."""
    layer = _encoder_layer(score)
    enc = None if encoding is None else create_encoding(encoding, d_model=D, num_heads=H)
    x, pad = _encoder_input()
    out = layer(x, src_key_padding_mask=pad, encoding=enc)
    out.abs().sum().backward()
    assert sdpa_calls == []
    assert torch.isfinite(out).all()


# -- the zoo: presets and sites --------------------------------------------------------------------

PRESET_NAMES = {
    "default": "cnn",
    "fasttext": "fasttext",
    "paper-cnn": "cnn",
    "paper-transformer": "transformer",
    "paper-lstm": "lstm",
    "kim-cnn": "cnn",
    "transformer-small": "transformer",
    "mr-cnn-complex-order": "cnn",
    "trec-cnn-complex-order": "cnn",
    "mr-transformer-complex-order": "transformer",
    "trec-transformer-complex-order": "transformer",
    "lm-char": "decoder",
}


def test_the_presets_are_the_readmes():
    """README: PRESETS are default, fasttext, paper-*, kim-cnn, transformer-small,
    {mr,trec}-{cnn,transformer}-complex-order, lm-char; each builds a config of its family."""
    assert set(models.PRESETS) == set(PRESET_NAMES)
    for name, family in PRESET_NAMES.items():
        config = models.preset_config(name, vocab_size=20)
        assert config.family == family, name
        if name.endswith("complex-order"):
            assert config.encoding == "complex-order" and config.complex, name
    with pytest.raises(ValueError, match="unknown preset 'paper-fasttext'"):
        models.preset_config("paper-fasttext", vocab_size=20)


SITES = {"token", "input", "layer", "qk", "logits", "values"}
FAMILY_SITES = {
    "fasttext": {"token", "input"},
    "cnn": {"token", "input"},
    "lstm": {"token", "input"},
    "transformer": SITES,
    "decoder": SITES,
}
# one encoding acting at each site (deberta with absolute layers: at "logits" too); HOOKS: the
# method of an encoding through which it acts at a site
PROBES = {
    "token": ("complex-order", {}),
    "input": ("sinusoidal", {}),
    "layer": ("deberta", {"absolute_layers": 1}),
    "qk": ("rotary", {}),
    "logits": ("t5", {}),
    "values": ("shaw", {}),
}
HOOKS = {"token": "embed", "input": "encode_input", "layer": "layer_input", "qk": "rotate",
         "logits": "logits_bias", "values": "value_term"}  # fmt: skip
SIZES = {
    "fasttext": {"num_classes": 3},
    "cnn": {"num_classes": 3, "num_filters": 4, "kernel_sizes": (2, 3)},
    "lstm": {"num_classes": 3, "hidden_size": 4},
    "transformer": {"num_classes": 3, "num_heads": 2, "dim_feedforward": 12, "num_layers": 1},
    "decoder": {"num_heads": 2, "dim_feedforward": 12, "num_layers": 1},
}


def test_the_zoo_families_support_the_readmes_sites():
    """README zoo table: fasttext, cnn, lstm support the sites token and input; transformer and
    decoder all six."""
    assert set(models.MODEL_CLASSES) == set(FAMILY_SITES)
    for family, sites in FAMILY_SITES.items():
        assert set(models.MODEL_CLASSES[family].supported_sites) == sites, family


def _recording(hook, site: str, called: set[str]):
    """``hook`` that adds ``site`` to ``called`` when it runs."""

    def spy(*args, **kwargs):
        called.add(site)
        return hook(*args, **kwargs)

    return spy


@pytest.mark.parametrize("family", list(FAMILY_SITES))
def test_a_family_builds_and_runs_exactly_the_encodings_at_its_sites(family):
    """README zoo table, by behaviour: an encoding acting on a site the family lacks is refused
    at build; one at its sites is accepted and its hooks are called in the forward."""
    ids, mask = _ids_and_mask(13)
    for site, (name, options) in PROBES.items():
        config = models.make_config(
            family, vocab_size=13, d_model=8, max_len=16, dropout=0.0, encoding=name,
            encoding_options=options, **SIZES[family],
        )  # fmt: skip
        torch.manual_seed(0)
        if site not in FAMILY_SITES[family]:
            with pytest.raises(ValueError, match=f"encoding {name!r} acts on"):
                models.build_model(config)
            continue
        model = models.build_model(config).eval()
        enc = model.encoding
        called: set[str] = set()
        for s in enc.acts_on:
            setattr(enc, HOOKS[s], _recording(getattr(enc, HOOKS[s]), s, called))
        out = model(ids) if family == "decoder" else model(ids, mask)
        assert torch.isfinite(out).all()
        assert site in enc.acts_on and called == set(enc.acts_on), (family, name, called)
