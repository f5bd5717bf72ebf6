"""The decoder's length check runs on the ``meta`` device (no full-size forward, whatever the
length; the same answer as a real forward, the model unchanged), ``forward_memory_limit`` turns a
length whose forward would not fit into :class:`ForwardTooLargeError`, and ``cplxnet evaluate RUN
--context N`` refuses such a context in one line before scoring anything."""

from __future__ import annotations

import pytest
import torch
from lm_cli_args import TINY_LM as TINY
from torch.utils._python_dispatch import TorchDispatchMode

import cplxnet.engine.runs as engine_runs
from cplxnet.cli import main
from cplxnet.encodings import available_encodings
from cplxnet.models import build_model, make_config
from cplxnet.models.decoder import ForwardTooLargeError, forward_memory_limit


class RealShapes(TorchDispatchMode):
    """The shapes of the tensors ops produce off the ``meta`` device (what is really computed)."""

    def __init__(self):
        super().__init__()
        self.shapes = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                self.shapes.add(tuple(t.shape))
        return out

    def batch_of(self, length: int) -> list:
        """Shapes of a batch of sequences of ``length`` tokens (ids, activations, logits); an
        encoding's own position table ``(length, D)`` is not one."""
        return [s for s in self.shapes if len(s) >= 2 and length in s[1:] and s[0] <= 8]


def tiny(encoding="none", complex=True, **fields):
    sizes = {"d_model": 8, "num_heads": 2, "dim_feedforward": 12, "num_layers": 2, "max_len": 16}
    return make_config("decoder", vocab_size=13, encoding=encoding, complex=complex,
                       **{**sizes, **fields})  # fmt: skip


def real_reason(model, length):
    model.eval()
    try:
        with torch.no_grad():
            model(torch.zeros(1, length, dtype=torch.long))
    except ValueError as err:
        return str(err)
    return None


@pytest.mark.parametrize("encoding", ["none", "trainable", "t5", "rotary", "tupe"])
def test_the_length_check_computes_nothing_of_the_length(encoding):
    model = build_model(tiny(encoding))
    length = 5000  # a real forward builds (1, 5000) ids and (1, 5000, ...) activations
    with RealShapes() as real:
        reason = model.unsupported_length(length)
    assert (reason is None) == (encoding in ("none", "t5", "rotary"))
    assert not real.batch_of(length)
    assert model.training  # restored


@pytest.mark.parametrize("complex_", [True, False], ids=["complex", "real"])
@pytest.mark.parametrize("encoding", [e for e in available_encodings() if e != "floater"])
def test_no_tensor_of_the_length_is_real_not_even_a_position_table(encoding, complex_):
    """A position table grown for the check is built on the meta device too: a length of any
    size costs no memory (floater, whose ODE runs position by position, is left out)."""
    _check_nothing_real(build_model(tiny(encoding, complex_)))


def test_the_half_layout_of_rotary_builds_its_tables_on_meta_too():
    _check_nothing_real(build_model(tiny("rotary", False, encoding_options={"layout": "half"})))


def _check_nothing_real(model) -> None:
    length = 10**5
    with RealShapes() as real:
        model.unsupported_length(length)
    assert not [s for s in real.shapes if length in s or length + 1 in s]


def test_a_length_that_cannot_be_allocated_is_a_reason_and_never_a_real_forward(monkeypatch):
    import cplxnet.models.decoder as decoder

    model = build_model(tiny("rotary"))

    def meta_pass(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8e9")

    def real_forward(*args, **kwargs):
        raise AssertionError("a real forward of the length")

    monkeypatch.setattr(decoder, "functional_call", meta_pass)
    monkeypatch.setattr(model, "forward", real_forward)
    reason = model.unsupported_length(10**9)
    assert reason.startswith("a sequence of 1,000,000,000 tokens does not fit in this machine")
    assert "can't allocate memory" in reason
    monkeypatch.undo()  # past any tensor's size: torch.full itself refuses, on meta too
    assert model.unsupported_length(2**63).startswith("a sequence of 9,223,372,036,854,775,808 ")


@pytest.mark.parametrize("complex_", [True, False], ids=["complex", "real"])
@pytest.mark.parametrize(
    "encoding",
    # floater integrates its ODE position by position: a few seconds on meta at 257
    [
        pytest.param(e, marks=pytest.mark.slow) if e == "floater" else e
        for e in available_encodings()
    ],  # fmt: skip
)
def test_the_length_check_agrees_with_a_real_forward(encoding, complex_):
    model = build_model(tiny(encoding, complex_)).eval()
    ids = torch.randint(2, 13, (2, 16))
    with torch.no_grad():
        before = model(ids)
    for length in (16, 17, 40, 257):  # max_len = 16: a table ends at 16, hierarchical at 256
        assert model.unsupported_length(length) == real_reason(model, length), length
    with torch.no_grad():
        assert torch.equal(model.eval()(ids), before)  # no buffer left on the meta device


def test_forward_memory_limit():
    model = build_model(tiny("none"))
    assert model.unsupported_length(10**5) is None  # no limit: only the encoding decides
    limit = 1 << 20
    with forward_memory_limit(limit, allowed=500):
        assert model.unsupported_length(500) is None  # allowed whatever its size
        with pytest.raises(ForwardTooLargeError) as info:
            model.unsupported_length(10**5)
    err = info.value
    assert err.length == 10**5 and err.shape == (2, 10**5, 10**5) and err.largest > limit
    assert err.longest == 500  # the allowed length is longer than what fits
    with forward_memory_limit(limit), pytest.raises(ForwardTooLargeError) as info:
        model.unsupported_length(10**5)
    longest = info.value.longest
    assert 2 * longest**2 * 4 <= limit < 2 * (longest + 1) ** 2 * 4  # float32 (H, L, L) scores
    with forward_memory_limit(limit):
        assert model.unsupported_length(longest) is None
    bad = build_model(tiny("trainable"))
    with forward_memory_limit(limit):  # the encoding's reason first
        assert "max_len=16" in bad.unsupported_length(10**5)


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    text = tmp_path_factory.mktemp("len-check-text") / "text.txt"
    text.write_text("a rose is a rose is a rose\n" * 80, encoding="utf-8")
    run = str(tmp_path_factory.mktemp("len-check-text-run") / "run")
    assert main(["train", "--data", str(text), "--context", "8", "--run-dir", run, *TINY]) == 0
    return run


@pytest.fixture(scope="module")
def copy_run(tmp_path_factory):
    run = str(tmp_path_factory.mktemp("len-check") / "run")
    argv = ["train", "--data", "synthetic:copy", "--context", "4", "--run-dir", run, *TINY]
    assert main(argv) == 0
    return run


def test_evaluate_refuses_a_context_that_does_not_fit(copy_run, capsys, monkeypatch):
    monkeypatch.setattr(engine_runs, "memory_limit", lambda: 64 << 20)
    with RealShapes() as real:
        status = main(["evaluate", copy_run, "--context", "3000"])
    err = capsys.readouterr().err
    assert status == 1 and err.startswith("cplxnet: error: ") and err.count("\n") == 1, err
    assert "--context 3,000 is too long for this machine" in err
    assert "sequences of 6,001 tokens" in err and "half of this machine's memory" in err
    assert "scored 2 sequences at a time" in err  # 16384 // 6001 sequences per forward
    # float32 (4 heads, L, L) scores of 16384 // L sequences within 64 MiB:
    # 16 L^2 (16384 // L) <= 2^26 holds up to L = 257, prompts of (L - 1) // 2 symbols
    assert err.rstrip().endswith("use --context N <= 128"), err
    assert not real.batch_of(6001)  # refused before any forward of that length
    assert main(["evaluate", copy_run, "--context", "100"]) == 0
    assert "prompt lengths 100: exact-match accuracy" in capsys.readouterr().out
    assert main(["evaluate", copy_run, "--context", "100000"]) == 1
    err = capsys.readouterr().err
    assert "scored one sequence at a time, each building a (4, 200001, 200001)" in err, err
    assert "use --context N <= 128" in err


def test_evaluate_checks_the_window_it_scores(text_run, capsys, monkeypatch):
    # the test part is one window of 107 tokens: the check counts 16384 // 107 = 153 windows per
    # pass (its bound for a long stream), whose (4, 107, 107) float32 scores take 28 MB
    monkeypatch.setattr(engine_runs, "memory_limit", lambda: 32 << 20)
    assert main(["evaluate", text_run, "--context", "100000"]) == 0  # one window: the test part
    out = capsys.readouterr().out
    assert "context 100000:" in out and "scored as one window of" in out
    monkeypatch.setattr(engine_runs, "memory_limit", lambda: 1 << 14)  # below even L = 64
    assert main(["evaluate", text_run, "--context", "100000"]) == 1
    err = capsys.readouterr().err
    assert "the model reads windows of" in err and err.rstrip().endswith("use --context N <= 64")


def test_generate_refuses_a_window_that_does_not_fit(text_run, capsys, monkeypatch):
    # one (4, L, L) float32 score tensor within 64 MiB: 16 L^2 <= 2^26 up to L = 2048
    monkeypatch.setattr(engine_runs, "memory_limit", lambda: 64 << 20)
    argv = ["generate", text_run, "a rose", "--tokens", "3000", "--context", "3000"]
    with RealShapes() as real:
        status = main(argv)
    err = capsys.readouterr().err
    assert status == 1 and err.startswith("cplxnet: error: ") and err.count("\n") == 1, err
    assert "a window of 3,000 tokens is too long for this machine" in err
    assert err.rstrip().endswith("use --context N <= 2,048"), err
    assert not real.batch_of(3000)  # refused before any forward
    assert main(["generate", text_run, "a rose", "--tokens", "5", "--context", "3000"]) == 0
