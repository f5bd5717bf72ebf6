"""Complex affine map."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["linear"]


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    r"""Complex affine map :math:`y = x W^T + b` with :math:`x, W, b` complex.

    In real terms, with :math:`x = x_r + i x_i` and :math:`W = A + iB`:
    :math:`y_r = x_r A^T - x_i B^T + b_r` and :math:`y_i = x_r B^T + x_i A^T + b_i`, i.e. the real
    block matrix ``[[A, -B], [B, A]]`` acting on ``[x_r, x_i]`` (Trabelsi et al., "Deep Complex
    Networks", ICLR 2018, Sec. 3.2). PyTorch's native complex GEMM is used: it costs about as much
    as the real layer of twice the width (same real FLOPs) and is faster than four real products
    (``shared/notes/performance.md``).
    """
    return F.linear(x, weight, bias)
