"""Complex up-sampling of grids (``Upsample``); torch's ``PixelShuffle`` / ``PixelUnshuffle``
already accept complex tensors (forward and backward) and need no cplxnet class."""

from __future__ import annotations

import torch
from torch import nn

from .. import functional as CF
from ..functional.grid_views import check_grid

__all__ = ["Upsample"]


class Upsample(nn.Upsample):
    r"""Up-samples complex ``(B, C, L)``, ``(B, C, H, W)`` or ``(B, C, D, H, W)`` grids;
    arguments (``size``, ``scale_factor``, ``mode``, ``align_corners``,
    ``recompute_scale_factor``), modes and output sizes as ``torch.nn.Upsample`` (a subclass of
    it).

    :math:`y = \mathrm{up}(\Re x) + i\,\mathrm{up}(\Im x)` with torch's real interpolation (the
    weights are real), on the contiguous parts; 'nearest' by powers of two repeats each complex
    entry instead (:func:`cplxnet.functional.interpolate`).
    ``torch.nn.PixelShuffle`` and ``torch.nn.PixelUnshuffle`` work on complex tensors as they
    are (pure index permutations).

    Examples::

        >>> up = Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        >>> up(torch.randn(1, 4, 8, 8, dtype=torch.cfloat)).shape
        torch.Size([1, 4, 16, 16])
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``input`` ``(B, C, *S)`` complex or real -> ``(B, C, *S_out)``, interpolated as
        torch's."""
        owner = type(self).__name__
        check_grid(input, owner)
        if input.dim() not in (3, 4, 5):
            raise ValueError(
                f"{owner}: expected a batched input (B, C, L), (B, C, H, W) or (B, C, D, H, W), "
                f"got shape {tuple(input.shape)}"
            )
        return CF.interpolate(
            input,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            self.recompute_scale_factor,
        )
