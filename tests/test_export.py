"""``torch.export`` and ``torch.compile(fullgraph=True)`` on the zoo and on the layers with masks.

Checks that read tensor data (token-id ranges, padding only at the end, fully masked rows, lengths)
run in eager mode only (:func:`cplxnet.utils.is_tracing`), so the exported program has a dynamic
sequence length and equals eager on inputs of other lengths, and ``torch.compile`` captures one
graph. The tables are driven by the zoo's registry (``MODEL_CLASSES``), so a new family is covered
when it is registered.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from torch.export import Dim

import cplxnet.functional as CF
import cplxnet.models as models
import cplxnet.nn as cnn
from cplxnet.encodings import create_encoding

V = 40
TINY = {
    "fasttext": {},
    "cnn": {"num_filters": 4, "kernel_sizes": (2, 3)},
    "lstm": {"hidden_size": 4},
    "transformer": {"num_heads": 2, "dim_feedforward": 16},
    "decoder": {"num_layers": 1, "num_heads": 2, "dim_feedforward": 16},
}


def _config(family: str, complex_: bool, encoding: str = "complex-order"):
    fields = {
        "vocab_size": V,
        "d_model": 8,
        "complex": complex_,
        "encoding": encoding,
        "max_len": 32,
        "dropout": 0.0,
        **TINY.get(family, {}),
    }
    names = {f.name for f in dataclasses.fields(models.CONFIG_CLASSES[family])}
    if "num_classes" in names:
        fields["num_classes"] = 3
    return models.make_config(family, **{k: v for k, v in fields.items() if k in names})


def _batch(length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, V, (3, length), generator=g)
    lengths = torch.tensor([length, max(length - 3, 1), max(length // 2, 1)])
    mask = torch.arange(length)[None, :] >= lengths[:, None]  # True = padding, at the end
    return ids.masked_fill(mask, 0), mask


def _family_cases(fields=(True, False)):
    for family in models.MODEL_CLASSES:
        for complex_ in fields:
            marks = () if family == "fasttext" else pytest.mark.slow  # seconds per model
            yield pytest.param(family, complex_, id=f"{family}-{complex_}", marks=marks)


@pytest.mark.parametrize(("family", "complex_"), list(_family_cases()))
def test_zoo_model_exports_with_padding_and_dynamic_length(family, complex_):
    torch.manual_seed(0)
    model = models.build_model(_config(family, complex_)).eval()
    seq = Dim.DYNAMIC
    program = torch.export.export(model, _batch(7), dynamic_shapes=({1: seq}, {1: seq}))
    for length in (2, 13):  # other lengths than the one traced (2: below the CNN's widest filter)
        ids, mask = _batch(length, seed=length)
        torch.testing.assert_close(program.module()(ids, mask), model(ids, mask))


# the encodings with a fixed table grown on demand (cached_rows): traced past the table (rotary:
# max_len rows; the others 128), the rows are built in the graph and the table is left as it is
@pytest.mark.parametrize("encoding", ["rotary", "sinusoidal"])  # one table function serves all
@torch.no_grad()
def test_a_decoder_serves_lengths_past_its_position_tables(encoding):
    torch._dynamo.reset()
    torch.manual_seed(0)
    config = dataclasses.replace(_config("decoder", True, encoding), max_len=16)
    model = models.build_model(config).eval()
    reference = copy.deepcopy(model)  # eager: grows its tables
    ids = torch.randint(1, V, (2, 300))
    tables = {k: v.shape for k, v in model.named_buffers()}
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    for length in (7, 17, 300):  # within every table, past rotary's, past every table
        x = ids[:, :length].clone()
        torch.testing.assert_close(compiled(x), reference(x))
    assert {k: v.shape for k, v in model.named_buffers()} == tables  # traced: left as they were
    built = {}
    for length in (7, 200):  # within the tables: a slice of them; past them: built in the graph
        example = (ids[:, :length].clone(),)
        program = torch.export.export(model, example, dynamic_shapes=({1: Dim.DYNAMIC},))
        ops = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
        built[length] = "aten.polar.default" in ops  # e^{ikw} of the table's rows
    assert built == {7: False, 200: True}
    for length in (150, 300):  # the program traced past the tables serves lengths past them
        x = ids[:, :length].clone()
        torch.testing.assert_close(program.module()(x), reference(x))


# complex models only: the real twins' bodies are torch's own layers. The inference graph, as
# exported; tests/test_compile.py compiles each model's backward and compares its gradients.
@pytest.mark.parametrize(("family", "complex_"), list(_family_cases((True,))))
@torch.no_grad()
def test_zoo_model_compiles_to_one_graph(family, complex_):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = models.build_model(_config(family, complex_)).eval()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True, dynamic=True)
    for length in (7, 10):
        ids, mask = _batch(length)
        torch.testing.assert_close(compiled(ids, mask), model(ids, mask))


# the real twin: seconds per case, slow (CI runs them)
@pytest.mark.parametrize(
    "dtype", [torch.complex64, pytest.param(torch.float32, marks=pytest.mark.slow)]
)
@pytest.mark.parametrize("encoding", [None, "rotary", "t5"])
def test_attention_with_masks_exports(dtype, encoding):
    torch.manual_seed(0)
    D, H = 8, 2
    mha = cnn.MultiheadAttention(D, H, dtype=dtype, batch_first=True).eval()
    enc = (
        None if encoding is None else create_encoding(encoding, d_model=D, num_heads=H, dtype=dtype)
    )

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mha, self.enc = mha, enc

        def forward(self, x, pad):
            causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
            return self.mha(x, key_padding_mask=pad, attn_mask=causal, encoding=self.enc)

    def inputs(length):
        x = torch.randn(2, length, D, dtype=dtype)
        pad = torch.zeros(2, length, dtype=torch.bool)
        pad[1, length - 2 :] = True
        return x, pad

    block = Block().eval()
    seq = Dim.DYNAMIC
    program = torch.export.export(block, inputs(6), dynamic_shapes=({1: seq}, {1: seq}))
    for length in (3, 9):
        x, pad = inputs(length)
        for got, want in zip(program.module()(x, pad), block(x, pad)):
            torch.testing.assert_close(got, want)


def test_transformer_encoder_exports_with_padding():
    torch.manual_seed(0)
    enc = cnn.TransformerEncoder(
        cnn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True), 2
    ).eval()
    x = torch.randn(3, 6, 8, dtype=torch.complex64)
    pad = torch.zeros(3, 6, dtype=torch.bool)
    pad[0, 4:] = True
    seq = Dim.DYNAMIC
    program = torch.export.export(enc, (x, None, pad), dynamic_shapes=({1: seq}, None, {1: seq}))
    x2 = torch.randn(3, 10, 8, dtype=torch.complex64)
    pad2 = torch.zeros(3, 10, dtype=torch.bool)
    pad2[2, 3:] = True
    torch.testing.assert_close(program.module()(x2, None, pad2), enc(x2, None, pad2))


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        (cnn.LSTM, {"bidirectional": True, "batch_first": True}),
        # seconds each: slow (CI runs them)
        pytest.param(cnn.GRU, {"num_layers": 2}, marks=pytest.mark.slow),
        pytest.param(cnn.LSTM, {"num_layers": 2, "proj_size": 2}, marks=pytest.mark.slow),
    ],
)
def test_rnn_with_lengths_exports_with_dynamic_length(cls, kwargs):
    """Under tracing the recurrent layers run a scan over time instead of torch's packed
    sequences (data-dependent shapes): outputs and final states equal eager's on other lengths."""
    torch.manual_seed(0)
    rnn = cls(4, 3, **kwargs).eval()
    bf = kwargs.get("batch_first", False)

    def inputs(length, lengths):
        x = torch.randn(3, length, 4, dtype=torch.complex64)
        return (x if bf else x.transpose(0, 1)), torch.tensor(lengths)

    seq = Dim.DYNAMIC
    x, lengths = inputs(6, [6, 4, 2])
    program = torch.export.export(
        rnn,
        (x,),
        {"lengths": lengths},
        dynamic_shapes={"input": {1 if bf else 0: seq}, "lengths": None},
    )
    x, lengths = inputs(9, [9, 5, 1])
    got, want = program.module()(x, lengths=lengths), rnn(x, lengths=lengths)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])


# every kind both ways round; one direction once (a bidirectional run's first direction is the
# same code; the one-direction case checks the weights' indexing with dirs=1)
@pytest.mark.parametrize(
    "kind, extra, bidirectional",
    [("lstm", {}, True), ("gru", {}, True), ("lstm", {"proj_size": 2}, True),
     ("lstm", {"proj_size": 2}, False)],
)  # fmt: skip
def test_scan_rnn_equals_torchs_packed_kernel(kind, extra, bidirectional):
    """``cplxnet.functional.scan_rnn`` (eager) against torch's nn.LSTM/GRU on packed sequences
    (the LSTM also with torch's projection): outputs (zero past each length), final states, and
    gradients."""
    torch.manual_seed(0)
    ref = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(
        3,
        4,
        num_layers=2,
        bidirectional=bidirectional,
        batch_first=True,
        dtype=torch.float64,
        **extra,
    )
    x = torch.randn(3, 7, 3, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([7, 2, 5])
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, True, enforce_sorted=False)
    out, states = ref(packed)
    out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=7)
    states = list(states) if kind == "lstm" else [states]
    got, got_states = CF.scan_rnn(kind, x, ref._flat_weights, lengths, None, 2, bidirectional)
    torch.testing.assert_close(got, out)
    for a, b in zip(got_states, states):
        torch.testing.assert_close(a, b)
    g1 = torch.autograd.grad(got.square().sum() + got_states[-1].sum(), [x, ref.weight_hh_l1])
    g2 = torch.autograd.grad(out.square().sum() + states[-1].sum(), [x, ref.weight_hh_l1])
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)


def test_data_checks_stay_on_in_eager_mode():
    model = models.build_model(_config("transformer", True)).eval()
    ids, mask = _batch(5)
    with pytest.raises(IndexError, match="out of range"):
        model(ids.masked_fill(mask, V), mask)
    with pytest.raises(ValueError, match="only at the end"):
        model(ids, mask.flip(1))
