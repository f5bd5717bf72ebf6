"""Complex affine map, with a complex or a real weight."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._utils import as_complex, without_autocast

__all__ = ["linear"]


@without_autocast
def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    r"""Complex affine map :math:`y = x W^T + b` with :math:`x, b` complex and :math:`W` complex
    or real.

    Complex :math:`W = A + iB`: in real terms, with :math:`x = x_r + i x_i`,
    :math:`y_r = x_r A^T - x_i B^T + b_r` and :math:`y_i = x_r B^T + x_i A^T + b_i`, i.e. the real
    block matrix ``[[A, -B], [B, A]]`` acting on ``[x_r, x_i]`` (Trabelsi et al., "Deep Complex
    Networks", ICLR 2018, Sec. 3.2). PyTorch's native complex GEMM is used: it costs about as much
    as the real layer of twice the width (same real FLOPs) and is faster than four real products
    (``benchmarks/RESULTS.md``: Linear 0.90-0.96x a real layer of twice the width).

    Real :math:`W` (``weight`` a real tensor, ``x`` complex): :math:`y = W x_r + i\, W x_i + b`,
    one real matrix shared by the real and imaginary parts -- the complex map with weight
    :math:`W + 0i` (the "shared projection" of Wang et al., "Encoding Word Order in Complex
    Embeddings", ICLR 2020, Table 4). It runs as one real GEMM on the stacked parts
    (half the multiplications of a complex weight), never casting :math:`W` to complex. The bias
    may be complex or real (a real bias shifts the real part only).
    """
    if weight.is_complex() or not x.is_complex():
        return F.linear(x, weight, bias)
    parts = torch.view_as_real(x.resolve_conj()).transpose(-1, -2)  # (..., 2, in): x_r, x_i stacked
    y = as_complex(F.linear(parts, weight).transpose(-1, -2))  # (..., out) = W x_r + i W x_i
    return y if bias is None else y + bias
