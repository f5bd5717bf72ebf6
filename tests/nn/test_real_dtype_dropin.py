"""Every cplxnet.nn layer with a torch counterpart, built with a real ``dtype``, is a drop-in for
it: the same state_dict keys and shapes, torch's state_dict loads (strict), and on the same real
input the same output and input gradient (in training and in eval mode, so normalisation
layers' running statistics are compared too), positional arguments included.

One row per case of :data:`CASES`: ``(cplxnet class, torch class, positional arguments,
keyword arguments, input shape)``. A layer added to cplxnet.nn with a torch counterpart gets a
row here; :func:`test_every_layer_with_a_torch_counterpart_has_a_row` fails until it has one.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn

import cplxnet.nn as cnn

DT = torch.float64

CASES = [
    (cnn.Linear, nn.Linear, (5, 3), {}, (2, 4, 5)),
    (cnn.Linear, nn.Linear, (5, 3, False), {}, (4, 5)),
    (cnn.Conv1d, nn.Conv1d, (4, 6, 3), {}, (2, 4, 9)),
    (cnn.Conv1d, nn.Conv1d, (4, 6, 3, 2, 1, 2, 2, False), {}, (2, 4, 11)),
    (cnn.Conv1d, nn.Conv1d, (4, 6, 3), {"padding": "same", "padding_mode": "reflect"}, (4, 9)),
    (cnn.Conv2d, nn.Conv2d, (3, 4, (3, 2)), {}, (2, 3, 7, 6)),
    (cnn.Conv2d, nn.Conv2d, (4, 4, 3, 1, 1, 1, 4, True, "circular"), {}, (2, 4, 6, 6)),
    (cnn.Embedding, nn.Embedding, (11, 4), {}, "ids"),
    (cnn.Embedding, nn.Embedding, (11, 4, 0), {}, "ids"),
    (cnn.LSTM, nn.LSTM, (4, 5), {}, (6, 2, 4)),
    (cnn.LSTM, nn.LSTM, (4, 5, 2, True, True, 0.0, True), {}, (2, 6, 4)),
    (cnn.LSTM, nn.LSTM, (4, 5), {"proj_size": 3, "batch_first": True}, (2, 6, 4)),
    (cnn.GRU, nn.GRU, (4, 5), {}, (6, 2, 4)),
    (cnn.GRU, nn.GRU, (4, 5, 2, False, True, 0.0, True), {}, (2, 6, 4)),
    (cnn.BatchNorm1d, nn.BatchNorm1d, (4,), {}, (5, 4)),
    (cnn.BatchNorm1d, nn.BatchNorm1d, (4, 1e-3, 0.2, True, True), {}, (5, 4, 3)),
    (cnn.BatchNorm1d, nn.BatchNorm1d, (4, 1e-5, None, False, False), {}, (5, 4)),
    (cnn.LayerNorm, nn.LayerNorm, (4,), {}, (2, 3, 4)),
    (cnn.LayerNorm, nn.LayerNorm, ((3, 4),), {"eps": 1e-3, "bias": False}, (2, 3, 4)),
    (cnn.RMSNorm, nn.RMSNorm, (4,), {"eps": 1e-6}, (2, 3, 4)),
    (cnn.MultiheadAttention, nn.MultiheadAttention, (4, 2), {"batch_first": True}, (2, 3, 4)),
    (cnn.TransformerEncoderLayer, nn.TransformerEncoderLayer, (4, 2, 8, 0.0), {}, (3, 2, 4)),
    (cnn.Conv3d, nn.Conv3d, (2, 3, 3), {"padding": 1}, (2, 2, 4, 5, 4)),
    (cnn.ConvTranspose1d, nn.ConvTranspose1d, (4, 3, 3, 2, 1, 1), {}, (2, 4, 5)),
    (cnn.ConvTranspose2d, nn.ConvTranspose2d, (4, 2, 2, 2), {}, (2, 4, 3, 3)),
    (cnn.ConvTranspose3d, nn.ConvTranspose3d, (2, 2, 3), {"groups": 2}, (1, 2, 3, 3, 3)),
    (cnn.BatchNorm2d, nn.BatchNorm2d, (3,), {}, (4, 3, 5, 5)),
    (cnn.SyncBatchNorm, nn.SyncBatchNorm, (3,), {}, (4, 3, 5, 5)),
    (cnn.BatchNorm3d, nn.BatchNorm3d, (3, 1e-3, None), {}, (2, 3, 3, 2, 2)),
    (cnn.InstanceNorm1d, nn.InstanceNorm1d, (3,), {}, (2, 3, 6)),
    (cnn.InstanceNorm2d, nn.InstanceNorm2d, (3, 1e-5, 0.1, True, True), {}, (2, 3, 4, 4)),
    (cnn.InstanceNorm3d, nn.InstanceNorm3d, (3,), {"affine": True}, (2, 3, 3, 3, 3)),
    (cnn.GroupNorm, nn.GroupNorm, (2, 4), {}, (3, 4, 5)),
    (cnn.BatchNorm2d, nn.BatchNorm2d, (3,), {"bias": False}, (4, 3, 5, 5)),
    (cnn.InstanceNorm1d, nn.InstanceNorm1d, (3,), {"affine": True, "bias": False}, (2, 3, 6)),
    (cnn.GroupNorm, nn.GroupNorm, (2, 4), {"bias": False}, (3, 4, 5)),
    (cnn.LSTMCell, nn.LSTMCell, (4, 5), {}, (3, 4)),
    (cnn.GRUCell, nn.GRUCell, (4, 5, False), {}, (3, 4)),
    (cnn.PReLU, nn.PReLU, (3, 0.1), {}, (2, 3, 4)),
    (cnn.TransformerDecoderLayer, nn.TransformerDecoderLayer, (4, 2, 8, 0.0), {}, (3, 2, 4)),
    (cnn.Transformer, nn.Transformer, (4, 2, 1, 1, 8, 0.0), {}, (3, 2, 4)),
    # unbatched (L, D) inputs, as torch takes them
    (cnn.TransformerEncoderLayer, nn.TransformerEncoderLayer, (4, 2, 8, 0.0), {}, (3, 4)),
    (cnn.TransformerDecoderLayer, nn.TransformerDecoderLayer, (4, 2, 8, 0.0), {}, (3, 4)),
    (cnn.Transformer, nn.Transformer, (4, 2, 1, 1, 8, 0.0), {"batch_first": True}, (3, 4)),
]

_TWO_INPUTS = (nn.TransformerDecoderLayer, nn.Transformer)  # (tgt, memory) / (src, tgt)

#: cplxnet.nn classes with a torch.nn namesake that take no ``dtype`` (no parameters of their
#: own, or built from layers that do), each with the reason it has no row above.
NO_DTYPE = {
    "Dropout": "no parameters; real inputs go through torch's dropout",
    "TransformerEncoder": "built from a TransformerEncoderLayer, which has rows",
    "TransformerDecoder": "built from a TransformerDecoderLayer, which has rows",
    "ELU": "no parameters; real input gives torch's ELU (tests/nn/test_activation.py)",
    "CELU": "no parameters; real input gives torch's CELU (tests/nn/test_activation.py)",
    "LeakyReLU": "no parameters; real input gives torch's (tests/nn/test_activation_extra.py)",
    "Dropout1d": "no parameters; whole channels dropped as torch's",
    "Dropout2d": "no parameters; whole channels dropped as torch's",
    "Dropout3d": "no parameters; whole channels dropped as torch's",
    "MSELoss": "no parameters; real tensors give torch's loss (tests/nn/test_loss.py)",
    "L1Loss": "no parameters; real tensors give torch's loss (tests/nn/test_loss.py)",
    "CrossEntropyLoss": "no parameters; real logits give torch's loss (tests/nn/test_loss.py)",
    "Upsample": "no parameters; real input gives torch's interpolation",
    "AvgPool1d": "no parameters; real input gives torch's pool",
    "AvgPool2d": "no parameters; real input gives torch's pool",
    "AvgPool3d": "no parameters; real input gives torch's pool",
    "AdaptiveAvgPool1d": "no parameters; real input gives torch's pool",
    "AdaptiveAvgPool2d": "no parameters; real input gives torch's pool",
    "AdaptiveAvgPool3d": "no parameters; real input gives torch's pool",
    "MaxUnpool1d": "no parameters; scatters by torch's indices",
    "MaxUnpool2d": "no parameters; scatters by torch's indices",
    "MaxUnpool3d": "no parameters; scatters by torch's indices",
}
#: Max pools select by modulus; on real input that is the entry of largest |x| (sign kept), the
#: complex layer's restriction to the reals, not torch's max by value: use torch.nn's max pool
#: in a real model.
for _name in ("MaxPool", "AdaptiveMaxPool"):
    for _rank in "123":
        NO_DTYPE[f"{_name}{_rank}d"] = "no parameters; selects by |x| (not torch's max by value)"


def _ids(case) -> str:
    return f"{case[0].__name__}{case[2]}{case[3] or ''}"


def _randomize(module: nn.Module) -> None:
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.5)


def _input(shape, torch_layer: nn.Module) -> torch.Tensor:
    if shape == "ids":
        return torch.randint(0, torch_layer.num_embeddings, (3, 5))
    return torch.randn(shape, dtype=DT, requires_grad=True)


def _flat(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for item in out if item is not None for t in _flat(item)]


@pytest.mark.parametrize(("ours", "theirs", "args", "kwargs", "shape"), CASES, ids=map(_ids, CASES))
def test_a_real_dtype_layer_is_torchs(ours, theirs, args, kwargs, shape):
    torch.manual_seed(0)
    t = theirs(*args, **kwargs, dtype=DT)
    m = ours(*args, **kwargs, dtype=DT)
    _randomize(t)
    assert {k: (v.shape, v.dtype) for k, v in m.state_dict().items()} == {
        k: (v.shape, v.dtype) for k, v in t.state_dict().items()
    }
    m.load_state_dict(t.state_dict())  # strict
    for train in (True, False):
        m.train(train)
        t.train(train)
        x = _input(shape, t)
        xs = (x, x, x) if theirs is nn.MultiheadAttention else (x,)
        xs = (x, x) if theirs in _TWO_INPUTS else xs
        got, want = _flat(m(*xs)), _flat(t(*xs))
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert not a.is_complex()
            torch.testing.assert_close(a, b)
        if x.requires_grad:
            loss = sum((o * torch.randn_like(o)).sum() for o in want)
            (g_want,) = torch.autograd.grad(loss, x)
            torch.manual_seed(1)
            got = _flat(m(*xs))
            torch.manual_seed(1)
            want = _flat(t(*xs))
            weights = [torch.randn_like(o) for o in want]
            (g1,) = torch.autograd.grad(sum((o * w).sum() for o, w in zip(got, weights)), x)
            (g2,) = torch.autograd.grad(sum((o * w).sum() for o, w in zip(want, weights)), x)
            torch.testing.assert_close(g1, g2)
            del g_want
        # running statistics (normalisation) moved alike
        for (k, a), (_, b) in zip(m.state_dict().items(), t.state_dict().items()):
            torch.testing.assert_close(a, b, msg=k)


CONVERSIONS = {
    "float": lambda m: m.float(),
    "to-float32": lambda m: m.to(torch.float32),
    "to-device-dtype": lambda m: m.to("cpu", torch.float32),
    "type-float32": lambda m: m.type(torch.float32),
}


@pytest.mark.parametrize("conversion", list(CONVERSIONS))
@pytest.mark.parametrize(("ours", "theirs", "args", "kwargs", "shape"), CASES, ids=map(_ids, CASES))
def test_a_real_dtype_layer_converts_as_torchs(ours, theirs, args, kwargs, shape, conversion):
    """``.float()``, ``.to(dtype)``, ``.type(dtype)`` of a layer built in float64 give torch's
    layer's tensors (dtypes and values) and its float32 output; ``dtype`` follows."""
    torch.manual_seed(0)
    t = theirs(*args, **kwargs, dtype=DT)
    m = ours(*args, **kwargs, dtype=DT)
    _randomize(t)
    m.load_state_dict(t.state_dict())
    assert CONVERSIONS[conversion](m) is m
    CONVERSIONS[conversion](t)
    assert m.dtype == torch.float32
    for (k, a), (_, b) in zip(m.state_dict().items(), t.state_dict().items()):
        assert a.dtype == b.dtype, k
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=k)
    m.eval()
    t.eval()
    x = _input(shape, t)
    x = x if shape == "ids" else x.detach().float()
    xs = (x, x, x) if theirs is nn.MultiheadAttention else (x,)
    xs = (x, x) if theirs in _TWO_INPUTS else xs
    for a, b in zip(_flat(m(*xs)), _flat(t(*xs))):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b)


def test_every_layer_with_a_torch_counterpart_has_a_row():
    covered = {case[0].__name__ for case in CASES}
    for name, cls in vars(cnn).items():
        if not (inspect.isclass(cls) and issubclass(cls, nn.Module)) or not hasattr(nn, name):
            continue
        if "dtype" not in inspect.signature(cls.__init__).parameters:
            assert name in NO_DTYPE, f"{name} has a torch counterpart: add a row to CASES"
            continue
        assert name in covered, f"{name} has a torch counterpart: add a row to CASES"


def test_the_complex_default_is_unchanged():
    """A real dtype is the drop-in; the default (and any complex dtype) builds the complex
    layer."""
    for ours, theirs, args, _, _ in CASES:
        m = ours(*args)
        assert m.dtype.is_complex and not isinstance(m, theirs), ours.__name__
        m = ours(*args, dtype=torch.complex128)
        assert m.dtype == torch.complex128 and not isinstance(m, theirs), ours.__name__


def test_a_real_layer_is_both_classes_copies_pickles_and_refuses_complex_only_options():
    import copy
    import io
    import pickle

    m = cnn.Linear(5, 3, dtype=DT)
    assert isinstance(m, cnn.Linear) and isinstance(m, nn.Linear) and m.dtype == DT
    assert repr(m) == repr(nn.Linear(5, 3, dtype=DT))
    x = torch.randn(2, 5, dtype=DT)
    for twin in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert type(twin) is type(m)
        torch.testing.assert_close(twin(x), m(x))
    buffer = io.BytesIO()
    torch.save(m.state_dict(), buffer)
    assert m.float().dtype == torch.float32  # torch's conversions, as torch's layer
    with pytest.raises(TypeError, match=r"^Linear: weight_field applies to the complex layer only"):
        cnn.Linear(5, 3, weight_field="real", dtype=DT)
    with pytest.raises(TypeError, match=r"^Embedding: init applies to the complex layer only"):
        cnn.Embedding(5, 3, init="uniform", dtype=DT)
