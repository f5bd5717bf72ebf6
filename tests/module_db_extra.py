"""Module-table entries for the parametric and amplitude-phase activations and the losses
(merged into ``module_db.MODULES``)."""

from __future__ import annotations

import torch
from module_db import ModuleInfo, _randn, _x

from cplxnet import nn as cnn

_ACT = {"has_params": False, "takes_factory_kwargs": False, "supports_real": True}
_LOSS = {"has_params": False, "takes_factory_kwargs": False, "supports_real": True}


def _pair(*shape):
    """(input, target) of ``shape``, both floating in the requested dtype."""
    return lambda dtype, device: ((_randn(shape, dtype, device), _randn(shape, dtype, device)), {})


def _logits_and_classes(dtype, device):
    return (_randn((4, 3), dtype, device), torch.tensor([0, 2, 1, 2], device=device)), {}


def _logits_grid_and_classes(dtype, device):
    classes = torch.tensor([[[0, 2], [1, 1]], [[2, 0], [1, 0]]], device=device)
    return (_randn((2, 3, 2, 2), dtype, device), classes), {}


def _kspace(coils):
    """(image, kspace, mask, sensitivity) of an MRI data-consistency step with ``coils`` maps
    (``None`` without maps); columns 0, 2, 3 sampled."""

    def make(dtype, device):
        mask = torch.tensor([True, False, True, True, False], device=device).view(1, 1, 1, 5)
        n = coils or 1
        args = (_randn((2, 1, 4, 5), dtype, device), _randn((2, n, 4, 5), dtype, device), mask)
        return (*args, _randn((2, n, 4, 5), dtype, device)) if coils else args, {}

    return make


MODULES: list[ModuleInfo] = [
    ModuleInfo(cnn.PReLU, _x(2, 3, 4), args=(3,), supports_real=True, compile_backend="aot_eager"),
    ModuleInfo(
        cnn.PReLU,
        _x(
            5,
        ),
        name="PReLU_shared_unbatched",
        supports_real=True,
    ),
    ModuleInfo(cnn.ELU, _x(3, 5), compile_backend="aot_eager", **_ACT),
    ModuleInfo(cnn.CELU, _x(3, 5), kwargs={"alpha": 0.7}, **_ACT),
    ModuleInfo(cnn.LeakyReLU, _x(3, 5), kwargs={"negative_slope": 0.2}, **_ACT),
    ModuleInfo(cnn.ZLeakyReLU, _x(3, 5), kwargs={"negative_slope": 0.2}, **_ACT),
    ModuleInfo(cnn.ModTanh, _x(3, 5), compile_backend="aot_eager", **_ACT),
    ModuleInfo(cnn.GeorgiouKoutsougeras, _x(3, 5), kwargs={"c": 0.5, "r": 2.0}, **_ACT),
    ModuleInfo(cnn.MVN, _x(3, 5), has_params=False, takes_factory_kwargs=False),
    ModuleInfo(
        cnn.MVN,
        _x(3, 5),
        kwargs={"sectors": 6},
        has_params=False,
        takes_factory_kwargs=False,
        exact_grad=False,
        name="MVN_discrete",
    ),
    ModuleInfo(cnn.MSELoss, _pair(3, 4), compile_backend="aot_eager", **_LOSS),
    ModuleInfo(
        cnn.MSELoss, _pair(3, 4), kwargs={"reduction": "none"}, name="MSELoss_none", **_LOSS
    ),
    ModuleInfo(cnn.L1Loss, _pair(3, 4), kwargs={"reduction": "sum"}, **_LOSS),
    ModuleInfo(cnn.MagnitudeLoss, _pair(3, 4), **_LOSS),
    ModuleInfo(cnn.PhaseAwareLoss, _pair(3, 4), compile_backend="aot_eager", **_LOSS),
    ModuleInfo(cnn.CrossEntropyLoss, _logits_and_classes, **_LOSS),
    ModuleInfo(
        cnn.CrossEntropyLoss,
        _logits_grid_and_classes,
        kwargs={"score": "magnitude", "label_smoothing": 0.1},
        name="CrossEntropyLoss_magnitude_grid",
        **_LOSS,
    ),
    ModuleInfo(cnn.DataConsistency, _kspace(None), has_params=False),
    ModuleInfo(
        cnn.DataConsistency,
        _kspace(3),
        args=(0.7,),
        kwargs={"learnable": True, "centered": True, "norm": "backward"},
        name="DataConsistency_learnable_coils",
        compile_backend="aot_eager",
    ),
]
