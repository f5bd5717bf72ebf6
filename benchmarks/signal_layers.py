"""Forward+backward time of cplxnet's spectral pooling and S4D relative to the same operation
on real values of twice the channels, and to complextorch's layers, side by side in one process
with the harness ``benchmarks/harness.py``.

    python benchmarks/signal_layers.py --out benchmarks/RESULTS.md   # one thread, 15 rounds
    python benchmarks/signal_layers.py --quick                       # tiny shapes, every row runs

- ``SpectralPool2d`` on ``(8, C, 64, 64)`` to 32 x 32 against the real spectral pooling of
  ``(8, 2C, 64, 64)`` (``rfft2``, the low frequencies kept, ``irfft2``: what a real library
  computes) and complextorch's ``SpectralPool2d``.
- ``S4D`` with ``C`` complex channels and 64 complex states on ``(8, 1024, C)`` against the
  paper's real S4D with ``2C`` channels and 64 states (32 conjugate pairs, ``2 Re``; its kernel
  and ``rfft`` convolution as in the reference code) on ``(8, 1024, 2C)``, and complextorch's S4D.
"""

from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from malloc_env import reexec_with_malloc_settings  # noqa: E402

if __name__ == "__main__":
    reexec_with_malloc_settings()

import harness  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from cplxnet import nn as cnn  # noqa: E402

Case, fwd_bwd, ctnn = harness.Case, harness.fwd_bwd, harness.ctnn
SECTION = "signal_layers.py: SpectralPool2d, S4D (1 thread)"
ROWS: dict = {}


row = harness.registry(ROWS)


class RealSpectralPool2d(nn.Module):
    """Spectral pooling of real input by ``rfft2``: the rows of ``-k/2 <= f < k/2`` and the first
    ``k/2 + 1`` columns kept (``irfft2`` restores the conjugate half); the same frequencies as
    cplxnet's but for the Nyquist bins, which are not folded."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = self.size
        spec = torch.fft.rfft2(x, norm="forward")
        cols = spec[..., : k // 2 + 1]
        spec = torch.cat([cols[..., : k // 2, :], cols[..., -(k // 2) :, :]], -2)
        return torch.fft.irfft2(spec, s=(k, k), norm="forward")


class RealS4D(nn.Module):
    """The paper's S4D (its reference code): ``N/2`` complex states, kernel ``2 Re``, real ``D``,
    convolution by ``rfft``, input ``(B, L, H)``."""

    def __init__(self, h: int, n: int) -> None:
        super().__init__()
        self.log_dt = nn.Parameter(torch.rand(h) * math.log(100) + math.log(1e-3))
        self.log_A_real = nn.Parameter(torch.full((h, n // 2), math.log(0.5)))
        self.A_imag = nn.Parameter(math.pi * torch.arange(n // 2).float().repeat(h, 1))
        self.C = nn.Parameter(torch.view_as_real(torch.randn(h, n // 2, dtype=torch.cfloat)))
        self.D = nn.Parameter(torch.randn(h))

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        length = u.shape[-2]
        a = -torch.exp(self.log_A_real) + 1j * self.A_imag
        dta = a * torch.exp(self.log_dt).unsqueeze(-1)
        c = torch.view_as_complex(self.C) * (torch.exp(dta) - 1.0) / a
        powers = torch.exp(dta.unsqueeze(-1) * torch.arange(length))
        k = 2 * torch.einsum("hn,hnl->hl", c, powers).real
        spec = torch.fft.rfft(u, n=2 * length, dim=-2) * torch.fft.rfft(k, n=2 * length).mT
        y = torch.fft.irfft(spec, dim=-2)
        return y[..., :length, :] + self.D * u


@row("SpectralPool2d 64 -> 32")
def _spectral_pool(c, cfg):
    b, side = (2, 8) if cfg.seq < 16 else (8, 64)
    z = torch.randn(b, c, side, side, dtype=cfg.dtype, requires_grad=True)
    x = torch.randn(b, 2 * c, side, side, requires_grad=True)
    base = {"real rfft2 pool, 2x channels": fwd_bwd(RealSpectralPool2d(side // 2), x)}
    if ctnn is not None and hasattr(ctnn, "SpectralPool2d"):
        base["complextorch"] = fwd_bwd(ctnn.SpectralPool2d(side // 2), z)
    return Case(fwd_bwd(cnn.SpectralPool2d(side // 2), z), base)


@row("S4D N=64, L=1024")
def _s4d(c, cfg):
    b, length, n = (2, 16, 4) if cfg.seq < 16 else (8, 1024, 64)
    z = torch.randn(b, length, c, dtype=cfg.dtype, requires_grad=True)
    x = torch.randn(b, length, 2 * c, requires_grad=True)
    base = {"paper's real S4D, 2x channels": fwd_bwd(RealS4D(2 * c, n), x)}
    if ctnn is not None and hasattr(ctnn, "S4D"):
        base["complextorch"] = fwd_bwd(ctnn.S4D(c, n), z)
    return Case(fwd_bwd(cnn.S4D(c, n), z), base)


def main(argv=None):
    harness.one_thread_main(
        argv, doc=__doc__, rows=ROWS, section=SECTION,
        shapes="C complex channels against 2C real ones.",
    )  # fmt: skip


if __name__ == "__main__":
    main()
