"""Complex activation modules (see :mod:`cplxnet.functional.activation` for the math).

All accept complex input and, reducing to the real activation, real input too (so real twins of
complex models can share code). Parameter-free activations take no ``device``/``dtype`` (as
``torch.nn.ReLU``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .. import functional as CF
from .._utils import as_shape, check_choice, check_dtype, factory_kwargs, real_dtype

__all__ = ["CReLU", "ModReLU", "ZReLU", "Cardioid", "SplitTanh", "SplitSigmoid", "SplitGELU"]


def _check_tensor(x: object, owner: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{owner}: input must be a torch.Tensor, got {type(x).__name__}")
    if not (x.is_complex() or x.is_floating_point()):
        raise TypeError(f"{owner}: input must be a complex or floating tensor, got {x.dtype}")


class CReLU(nn.Module):
    r"""Split ReLU :math:`\max(x, 0) + i \max(y, 0)` (Trabelsi et al., ICLR 2018).

    Shape: any; complex -> complex (real -> ReLU).
    """

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        _check_tensor(z, type(self).__name__)
        return CF.crelu(z)


class ZReLU(nn.Module):
    r"""zReLU: keeps :math:`z` when :math:`0 \le \arg z \le \pi/2`, else 0 (Guberman 2016)."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        _check_tensor(z, type(self).__name__)
        return CF.zrelu(z)


class Cardioid(nn.Module):
    r"""Complex cardioid :math:`\tfrac12(1 + \cos\arg z) z` (Virtue et al., ICIP 2017)."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        _check_tensor(z, type(self).__name__)
        return CF.cardioid(z)


class SplitTanh(nn.Module):
    r"""Split tanh :math:`\tanh x + i \tanh y` (bounded; the analytic ``torch.tanh`` has poles)."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        _check_tensor(z, type(self).__name__)
        return CF.split_tanh(z)


class SplitSigmoid(nn.Module):
    r"""Split sigmoid :math:`\sigma(x) + i \sigma(y)`."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        _check_tensor(z, type(self).__name__)
        return CF.split_sigmoid(z)


class SplitGELU(nn.Module):
    r"""Split GELU :math:`\mathrm{GELU}(x) + i\,\mathrm{GELU}(y)`.

    Args:
        approximate: 'none' or 'tanh', as ``torch.nn.GELU``.
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = check_choice(
            approximate, ("none", "tanh"), type(self).__name__, "approximate"
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        _check_tensor(z, type(self).__name__)
        return CF.split_gelu(z, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class ModReLU(nn.Module):
    r"""modReLU :math:`\mathrm{ReLU}(|z| + b)\, z/|z|` with a learnable real bias per feature
    (Arjovsky et al., ICML 2016).

    Keeps the phase, shrinks the modulus by :math:`-b` and zeroes entries with :math:`|z| < -b`.
    Output and gradient are finite at :math:`z = 0` (see :func:`cplxnet.functional.modrelu`).

    Args:
        num_features: size of the trailing dim(s) the bias covers (int or shape); use 1 for one
            shared threshold.
        bias_init: initial value of every bias entry. The default 0 makes the layer start as the
            identity with the threshold learned from there (a negative start such as
            complextorch's -0.1 can leave units with small inputs dead, receiving no gradient).
        device, dtype: factory kwargs; ``dtype`` is the complex (or, for a real twin, real) dtype of
            the inputs; the bias is stored in the matching real dtype.

    Shape: ``(*, *num_features)`` -> same.
    """

    def __init__(
        self,
        num_features: int | Sequence[int],
        bias_init: float = 0.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        owner = type(self).__name__
        fk = factory_kwargs(device, dtype, owner, allow_real=True)
        super().__init__()
        self.num_features = as_shape(num_features, owner, "num_features")
        self.bias_init = float(bias_init)
        self._dtype = fk["dtype"]
        self.bias = nn.Parameter(
            torch.empty(self.num_features, device=device, dtype=real_dtype(fk["dtype"]))
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.constant_(self.bias, self.bias_init)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        owner = type(self).__name__
        check_dtype(z, self._dtype, owner)
        k = len(self.num_features)
        if self.num_features != (1,) and tuple(z.shape[-k:]) != self.num_features:
            raise ValueError(
                f"{owner}: expected input ending in dims {self.num_features}, "
                f"got shape {tuple(z.shape)}"
            )
        return CF.modrelu(z, self.bias)

    def extra_repr(self) -> str:
        nf = self.num_features[0] if len(self.num_features) == 1 else self.num_features
        return f"num_features={nf}, bias_init={self.bias_init}, dtype={self._dtype}"
