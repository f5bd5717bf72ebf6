"""Module-table entries for the grid layers (merged into ``module_db.MODULES``): convolutions and
transposed convolutions in 1-3 dimensions, pools, unpooling, up-sampling and channel dropout.

Entries whose only input is one grid tensor are also exported with a dynamic last spatial size
and compiled with ``fullgraph=True`` by ``tests/nn/test_grid_layers.py`` (``EXPORT``)."""

from __future__ import annotations

import torch
from module_db import ModuleInfo

from cplxnet import nn as cnn

__all__ = ["MODULES", "EXPORT"]


def grid(*shape):
    """Input factory: one random tensor of ``shape`` in the requested dtype."""
    return lambda dtype, device: ((torch.randn(*shape, dtype=dtype, device=device),), {})


def pooled(pool, *shape):
    """Input factory for an unpooling: ``pool``'s ``(values, indices)`` of a random grid."""

    def make(dtype, device):
        values, idx = pool(torch.randn(*shape, dtype=dtype, device=device))
        return (values.detach(), idx), {}

    return make


def with_output_size(size, *shape):
    """Input factory for a transposed convolution called with ``output_size=size``."""
    return lambda dtype, device: (
        (torch.randn(*shape, dtype=dtype, device=device),),
        {"output_size": size},
    )


_FREE = {"has_params": False, "takes_factory_kwargs": False, "supports_real": True}
_C = {"compile_backend": "aot_eager"}

MODULES: list[ModuleInfo] = [
    # ---- convolutions ----
    ModuleInfo(cnn.Conv3d, grid(2, 2, 4, 3, 5), args=(2, 3, 3), kwargs={"padding": 1}, **_C),
    ModuleInfo(
        cnn.Conv3d,
        grid(4, 5, 4, 7),  # unbatched
        args=(4, 2, (2, 1, 3)),
        kwargs={"stride": (1, 2, 1), "dilation": (1, 1, 2), "groups": 2, "bias": False},
        name="Conv3d_unbatched_groups_dilation",
        **_C,
    ),
    ModuleInfo(
        cnn.Conv3d,
        grid(1, 2, 3, 3, 4),
        args=(2, 2, 3),
        kwargs={"padding": 1, "padding_mode": "replicate"},
        name="Conv3d_replicate",
    ),
    ModuleInfo(cnn.Conv2d, grid(2, 4, 5), args=(2, 3, 3), name="Conv2d_unbatched", **_C),
    ModuleInfo(
        cnn.ConvTranspose1d,
        grid(2, 4, 5),
        args=(4, 6, 3),
        kwargs={"stride": 2, "padding": 1, "output_padding": 1, "groups": 2},
        **_C,
    ),
    ModuleInfo(
        cnn.ConvTranspose1d,
        grid(3, 4),  # unbatched
        args=(3, 2, 2),
        kwargs={"dilation": 2, "bias": False},
        name="ConvTranspose1d_unbatched_dilation",
    ),
    ModuleInfo(
        cnn.ConvTranspose1d,
        grid(2, 3, 5),
        args=(3, 4, 2),
        kwargs={"stride": 2},  # stride = kernel size: one complex GEMM
        name="ConvTranspose1d_stride_kernel",
        **_C,
    ),
    ModuleInfo(cnn.ConvTranspose2d, grid(2, 2, 3, 4), args=(2, 3, 2), kwargs={"stride": 2}, **_C),
    ModuleInfo(
        cnn.ConvTranspose2d,
        with_output_size((6, 8), 1, 2, 3, 4),
        args=(2, 2, 3),
        kwargs={"stride": 2, "padding": 1},
        name="ConvTranspose2d_output_size",
    ),
    ModuleInfo(
        cnn.ConvTranspose3d,
        grid(1, 2, 2, 3, 2),
        args=(2, 2, (2, 3, 2)),
        kwargs={"stride": (2, 1, 2), "output_padding": (1, 0, 0), "dilation": (1, 2, 1)},
        **_C,
    ),
    # ---- pools ----
    ModuleInfo(
        cnn.MaxPool1d, grid(2, 3, 7), args=(3,), kwargs={"stride": 2, "padding": 1}, **_C, **_FREE
    ),
    ModuleInfo(
        cnn.MaxPool1d,
        grid(3, 8),  # unbatched
        args=(2,),
        kwargs={"dilation": 2, "ceil_mode": True, "return_indices": True},
        name="MaxPool1d_unbatched_dilation_ceil_indices",
        **_FREE,
    ),
    ModuleInfo(cnn.MaxPool2d, grid(2, 2, 5, 6), args=(2,), **_C, **_FREE),
    ModuleInfo(
        cnn.MaxPool2d,
        grid(2, 5, 5),
        args=((3, 2), (2, 1), 1),
        kwargs={"ceil_mode": True, "return_indices": True},
        name="MaxPool2d_unbatched_ceil_indices",
        **_FREE,
    ),
    ModuleInfo(cnn.MaxPool3d, grid(1, 2, 4, 3, 5), args=(2,), kwargs={"stride": 1}, **_C, **_FREE),
    ModuleInfo(
        cnn.MaxUnpool1d,
        pooled(cnn.MaxPool1d(2, return_indices=True), 2, 3, 8),
        args=(2,),
        **_FREE,
    ),
    ModuleInfo(
        cnn.MaxUnpool2d,
        pooled(cnn.MaxPool2d(2, return_indices=True), 2, 2, 4, 6),
        args=(2,),
        **_C,
        **_FREE,
    ),
    ModuleInfo(
        cnn.MaxUnpool3d,
        pooled(cnn.MaxPool3d(2, return_indices=True), 2, 4, 4, 2),  # unbatched
        args=(2,),
        **_FREE,
    ),
    ModuleInfo(cnn.AvgPool1d, grid(2, 3, 7), args=(3, 2, 1), **_C, **_FREE),
    ModuleInfo(
        cnn.AvgPool1d,
        grid(3, 7),
        args=(3, 2, 1, True, False),
        name="AvgPool1d_unbatched_ceil_exclude_pad",
        **_FREE,
    ),
    ModuleInfo(cnn.AvgPool2d, grid(2, 2, 5, 6), args=(2,), **_C, **_FREE),
    ModuleInfo(
        cnn.AvgPool2d,
        grid(2, 5, 5),
        args=(3, 2, 1, True, False, 4),
        name="AvgPool2d_unbatched_divisor",
        **_FREE,
    ),
    ModuleInfo(
        cnn.AvgPool3d,
        grid(1, 2, 4, 3, 5),
        args=(2, 1, 1),
        kwargs={"ceil_mode": True},
        **_C,
        **_FREE,
    ),
    ModuleInfo(cnn.AdaptiveAvgPool1d, grid(2, 3, 7), args=(3,), **_C, **_FREE),
    ModuleInfo(
        cnn.AdaptiveAvgPool2d,
        grid(2, 5, 7),
        args=((2, None),),
        name="AdaptiveAvgPool2d_unbatched",
        **_FREE,
    ),
    ModuleInfo(cnn.AdaptiveAvgPool3d, grid(1, 2, 3, 4, 5), args=(2,), **_C, **_FREE),
    ModuleInfo(
        cnn.AdaptiveAvgPool2d,
        grid(2, 3, 4, 6),
        args=((2, 3),),  # divisible sizes: the block mean
        name="AdaptiveAvgPool2d_blocks",
        **_FREE,
    ),
    ModuleInfo(
        cnn.AdaptiveMaxPool1d,
        grid(2, 3, 7),
        args=(3,),
        kwargs={"return_indices": True},
        **_C,
        **_FREE,
    ),
    ModuleInfo(cnn.AdaptiveMaxPool2d, grid(2, 2, 5, 7), args=((2, 3),), **_C, **_FREE),
    ModuleInfo(
        cnn.AdaptiveMaxPool3d,
        grid(2, 3, 4, 5),
        args=(2,),
        name="AdaptiveMaxPool3d_unbatched",
        **_FREE,
    ),
    # ---- spectral pooling (odd and even output sizes) ----
    ModuleInfo(cnn.SpectralPool1d, grid(2, 3, 9), args=(4,), **_C, **_FREE),
    ModuleInfo(
        cnn.SpectralPool2d,
        grid(2, 3, 6, 7),
        args=((3, None),),
        name="SpectralPool2d_keep_w",
        **_C,
        **_FREE,
    ),
    ModuleInfo(
        cnn.SpectralPool3d, grid(3, 4, 5, 6), args=(3,), name="SpectralPool3d_unbatched", **_FREE
    ),
    # ---- up-sampling ----
    ModuleInfo(cnn.Upsample, grid(2, 3, 4), kwargs={"scale_factor": 2}, **_C, **_FREE),
    ModuleInfo(
        cnn.Upsample,
        grid(2, 3, 4),
        kwargs={"size": 7, "mode": "linear", "align_corners": True},
        name="Upsample_linear_align",
        **_FREE,
    ),
    ModuleInfo(
        cnn.Upsample,
        grid(1, 2, 3, 4),
        kwargs={"scale_factor": 2, "mode": "bilinear"},
        name="Upsample_bilinear",
        **_C,
        **_FREE,
    ),
    ModuleInfo(
        cnn.Upsample,
        grid(1, 2, 3, 4),
        kwargs={"scale_factor": (1.5, 2), "mode": "bicubic"},
        name="Upsample_bicubic",
        **_FREE,
    ),
    ModuleInfo(
        cnn.Upsample,
        grid(1, 2, 3, 4),
        kwargs={"size": (5, 7), "mode": "nearest-exact"},
        name="Upsample_nearest_exact",
        **_FREE,
    ),
    ModuleInfo(
        cnn.Upsample,
        grid(1, 2, 2, 3, 2),
        kwargs={"scale_factor": 2, "mode": "trilinear", "align_corners": False},
        name="Upsample_trilinear",
        **_C,
        **_FREE,
    ),
    # ---- channel dropout ----
    ModuleInfo(cnn.Dropout1d, grid(2, 3, 5), args=(0.3,), is_random=True, **_FREE),
    ModuleInfo(cnn.Dropout2d, grid(2, 3, 4, 4), args=(0.3,), is_random=True, **_FREE),
    ModuleInfo(
        cnn.Dropout3d,
        grid(3, 2, 2, 4),
        args=(0.3,),
        is_random=True,
        name="Dropout3d_unbatched",
        **_FREE,
    ),
]

# entries with one grid input (no indices, no output_size, deterministic): exported with a
# dynamic last spatial size and compiled with fullgraph=True in tests/nn/test_grid_layers.py
_NOT_EXPORTED = ("MaxUnpool", "Dropout")
EXPORT = [
    m
    for m in MODULES
    if not m.id.startswith(_NOT_EXPORTED) and m.id != "ConvTranspose2d_output_size"
]
