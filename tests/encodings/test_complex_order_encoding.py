"""complex-order and complex-vanilla word embeddings (Wang et al., ICLR 2020)."""

import math

import pytest
import torch

from cplxnet._utils import pack
from cplxnet.encodings import ComplexOrderEncoding, ComplexVanillaEncoding


def direct(enc: ComplexOrderEncoding, ids: torch.Tensor) -> torch.Tensor:
    """``f(j, pos)_d = r_{j,d} exp(i (w_{j,d} pos + theta_{j,d}))`` by loops, complex128."""
    B, L = ids.shape
    n = enc.features
    out = torch.zeros(B, L, n, dtype=torch.complex128)
    amp = enc.amplitude_weight.detach().double()
    freq = None if enc.frequency_weight is None else enc.frequency_weight.detach().double()
    theta = None if enc.phase_weight is None else enc.phase_weight.detach().double()
    for b in range(B):
        for pos in range(L):
            j = int(ids[b, pos])
            for d in range(n):
                r = amp[d] if amp.dim() == 1 else amp[j, d if amp.shape[1] > 1 else 0]
                w = 0.0
                if freq is not None:
                    w = freq[d] if freq.dim() == 1 else freq[j, d if freq.shape[1] > 1 else 0]
                th = 0.0 if theta is None else theta[j, d]
                out[b, pos, d] = r * complex(math.cos(w * pos + th), math.sin(w * pos + th))
    if enc.padding_idx is not None:
        out[ids == enc.padding_idx] = 0
    return out


@pytest.mark.parametrize("frequency", ["word", "shared", "dimension", "none"])
@pytest.mark.parametrize("amplitude", ["word", "shared", "dimension"])
@pytest.mark.parametrize("phase", [True, False])
def test_formula_all_sharings(frequency, amplitude, phase):
    V, D, B, L = 7, 3, 2, 6
    enc = ComplexOrderEncoding(
        V, D, phase=phase, frequency=frequency, amplitude=amplitude, padding_idx=0,
        frequency_init="uniform", dtype=torch.complex128,
    )  # fmt: skip
    with torch.no_grad():  # make shared amplitudes non-trivial
        enc.amplitude_weight.add_(torch.randn_like(enc.amplitude_weight))
        if amplitude != "shared":  # per-word tables keep a zero padding row (as nn.Embedding)
            enc.amplitude_weight[0] = 0
    ids = torch.randint(0, V, (B, L))
    ids[0, -2:] = 0  # padding at the end
    torch.testing.assert_close(enc.embed(ids), direct(enc, ids))


def test_real_twin_is_packed_complex():
    """Real model of width 2D: D complex features, returned packed (interleaved re/im)."""
    V, D = 8, 4
    c = ComplexOrderEncoding(V, D, dtype=torch.complex128)
    r = ComplexOrderEncoding(V, 2 * D, dtype=torch.float64)
    r.load_state_dict(c.state_dict())
    ids = torch.randint(0, V, (3, 5))
    out = r.embed(ids)
    assert out.dtype == torch.float64 and out.shape == (3, 5, 2 * D)
    torch.testing.assert_close(out, pack(c.embed(ids)))


def test_offset_is_position_free_linear_map():
    """Property 1 of the paper: ``f(j, pos + n) = f(j, pos) * exp(i w_j n)``, independent of pos."""
    V, D, n = 5, 4, 3
    enc = ComplexOrderEncoding(V, D, dtype=torch.complex128)
    ids = torch.full((1, 12), 2)
    f = enc.embed(ids)[0]
    shift = torch.exp(1j * enc.frequency_weight.detach()[2] * n)
    for pos in range(12 - n):
        torch.testing.assert_close(f[pos + n], f[pos] * shift)


def test_sinusoidal_frequency_init():
    V, D = 5, 6
    enc = ComplexOrderEncoding(V, D, dtype=torch.complex128)
    w = 10000 ** (-torch.arange(D, dtype=torch.float64) / D)  # = 10000^(-2k/d), d = 2D
    torch.testing.assert_close(enc.frequency_weight.detach(), w.expand(V, D))
    enc = ComplexOrderEncoding(V, D, frequency_init=0.5, frequency="shared")
    assert torch.all(enc.frequency_weight == 0.5)
    enc = ComplexOrderEncoding(V, D, frequency="dimension")
    assert enc.frequency_weight.shape == (V, 1)
    assert torch.all((enc.frequency_weight > 1e-4) & (enc.frequency_weight <= 1))


def test_padding_rows_zero_and_without_gradient():
    V, D = 6, 3
    enc = ComplexOrderEncoding(V, D, padding_idx=1, amplitude="shared", dtype=torch.complex128)
    ids = torch.tensor([[2, 3, 1, 1]])
    out = enc.embed(ids)
    assert torch.all(out[0, 2:] == 0) and torch.all(out[0, :2] != 0)
    torch.real(out * torch.randn_like(out)).sum().backward()
    assert enc.frequency_weight.grad[3].abs().sum() > 0  # word 3 at position 1
    assert torch.all(enc.frequency_weight.grad[1] == 0)
    assert torch.all(enc.phase_weight.grad[1] == 0)


def test_sparse_gradients_and_sparse_adam():
    V, D = 50, 4
    enc = ComplexOrderEncoding(V, D, sparse=True, frequency="word", amplitude="shared")
    sparse, dense = enc.sparse_parameters(), enc.dense_parameters()
    assert {id(p) for p in sparse} == {id(enc.frequency_weight), id(enc.phase_weight)}
    assert [id(p) for p in dense] == [id(enc.amplitude_weight)]
    ids = torch.randint(0, V, (2, 7))
    torch.real(enc.embed(ids) * torch.randn(2, 7, D, dtype=torch.cfloat)).sum().backward()
    assert enc.frequency_weight.grad.is_sparse and enc.phase_weight.grad.is_sparse
    assert not enc.amplitude_weight.grad.is_sparse
    before = enc.phase_weight.detach().clone()
    torch.optim.SparseAdam(sparse, lr=0.1).step()
    torch.optim.Adam(dense, lr=0.1).step()
    changed = (enc.phase_weight.detach() != before).any(-1)
    assert set(changed.nonzero().flatten().tolist()) == set(ids.flatten().tolist())
    # same values as the dense path
    dense_enc = ComplexOrderEncoding(V, D, frequency="word", amplitude="shared")
    dense_enc.load_state_dict(enc.state_dict())
    torch.testing.assert_close(dense_enc.embed(ids), enc.embed(ids))


def test_complex_vanilla_has_no_position():
    """``r e^{i theta}``: the same word gets the same vector at every position, and it equals
    complex-order with frequency 0."""
    V, D = 9, 5
    enc = ComplexVanillaEncoding(V, D, dtype=torch.complex128)
    ids = torch.tensor([[4, 4, 4, 7, 4]])
    out = enc.embed(ids)[0]
    torch.testing.assert_close(out[1], out[0])
    torch.testing.assert_close(out[4], out[0])
    co2 = ComplexOrderEncoding(V, D, frequency_init=0.0, dtype=torch.complex128)
    with torch.no_grad():
        co2.amplitude_weight.copy_(enc.amplitude_weight)
        co2.phase_weight.copy_(enc.phase_weight)
    torch.testing.assert_close(co2.embed(ids), enc.embed(ids))
    assert enc.frequency_weight is None and enc.name == "complex-vanilla"


def test_errors():
    enc = ComplexOrderEncoding(5, 3)
    with pytest.raises(IndexError, match="vocab_size=5"):
        enc.embed(torch.tensor([[1, 5]]))
    with pytest.raises(TypeError, match="integer"):
        enc.embed(torch.zeros(1, 2))
    with pytest.raises(ValueError, match="unknown frequency"):
        ComplexOrderEncoding(5, 3, frequency="per-word")
