"""Module-table entries for the whitening norm layers (merged into ``module_db.MODULES``):
batch norm of every rank, instance norm (batched and unbatched, with and without running
statistics) and group norm. ``tests/nn/test_whitening_norms.py`` also compiles (fullgraph) and
exports every entry listed here."""

from __future__ import annotations

import torch
from module_db import ModuleInfo

from cplxnet import nn as cnn


def _x(*shape):
    return lambda dtype, device: ((torch.randn(*shape, dtype=dtype, device=device),), {})


_NOAFFINE = {"has_params": False}

MODULES: list[ModuleInfo] = [
    ModuleInfo(cnn.BatchNorm2d, _x(3, 2, 3, 2), args=(2,), compile_backend="aot_eager"),
    ModuleInfo(
        cnn.BatchNorm2d,
        _x(2, 3, 2, 2),
        args=(3,),
        kwargs={"affine": False, "momentum": None},
        name="BatchNorm2d_noaffine_cumulative",
        **_NOAFFINE,
    ),
    ModuleInfo(
        cnn.BatchNorm2d,
        _x(2, 2, 1, 3),
        args=(2,),
        kwargs={"track_running_stats": False},
        name="BatchNorm2d_untracked",
    ),
    ModuleInfo(cnn.BatchNorm3d, _x(2, 2, 2, 1, 2), args=(2,), compile_backend="aot_eager"),
    ModuleInfo(cnn.InstanceNorm1d, _x(2, 3, 4), args=(3,), **_NOAFFINE),
    ModuleInfo(
        cnn.InstanceNorm1d, _x(2, 5), args=(2,), name="InstanceNorm1d_unbatched", **_NOAFFINE
    ),
    ModuleInfo(
        cnn.InstanceNorm2d,
        _x(2, 2, 2, 3),
        args=(2,),
        kwargs={"affine": True, "track_running_stats": True},
        name="InstanceNorm2d_affine_tracked",
        compile_backend="aot_eager",
    ),
    ModuleInfo(
        cnn.InstanceNorm2d,
        _x(2, 3, 2),
        args=(2,),
        kwargs={"affine": True},
        name="InstanceNorm2d_unbatched",
    ),
    ModuleInfo(cnn.InstanceNorm3d, _x(1, 2, 2, 2, 2), args=(2,), **_NOAFFINE),
    ModuleInfo(cnn.GroupNorm, _x(2, 4, 3, 2), args=(2, 4), compile_backend="aot_eager"),
    ModuleInfo(
        cnn.GroupNorm,
        _x(2, 6, 3),
        args=(3, 6),
        kwargs={"affine": False},
        name="GroupNorm_noaffine_1d",
        **_NOAFFINE,
    ),
    ModuleInfo(cnn.GroupNorm, _x(3, 4), args=(1, 4), name="GroupNorm_NC"),
    # torch's keyword-only bias=False: the affine matrix without the shift
    ModuleInfo(
        cnn.BatchNorm1d, _x(4, 2, 3), args=(2,), kwargs={"bias": False}, name="BatchNorm1d_nobias"
    ),
    ModuleInfo(
        cnn.InstanceNorm1d,
        _x(2, 2, 4),
        args=(2,),
        kwargs={"affine": True, "track_running_stats": True, "bias": False},
        name="InstanceNorm1d_affine_tracked_nobias",
    ),
    ModuleInfo(
        cnn.GroupNorm, _x(2, 4, 3), args=(2, 4), kwargs={"bias": False}, name="GroupNorm_nobias"
    ),
]
