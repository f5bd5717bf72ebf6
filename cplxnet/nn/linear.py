"""Complex fully connected layer."""

from __future__ import annotations

import torch
from torch import nn

from .. import functional as CF
from .. import init as cinit
from .._utils import HasDtype, check_dtype, check_last_dim, check_sizes, factory_kwargs

__all__ = ["Linear"]


class Linear(HasDtype, nn.Module):
    r"""Complex affine map :math:`y = x W^T + b` (see :func:`cplxnet.functional.linear`).

    Args:
        in_features: complex input features.
        out_features: complex output features.
        bias: learn a complex additive bias.
        device, dtype: factory kwargs; ``dtype`` defaults to the complex type of
            ``torch.get_default_dtype()``.

    Shape: ``(*, in_features)`` complex -> ``(*, out_features)`` complex.

    Initialisation: complex Glorot-uniform (:func:`cplxnet.init.xavier_uniform_`), so that the
    total variance :math:`E|w|^2 = 2/(\text{fan\_in}+\text{fan\_out})` (torch's default complex
    init would double it); bias zero.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        fk = factory_kwargs(device, dtype, type(self).__name__)
        check_sizes(type(self).__name__, in_features=in_features, out_features=out_features)
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self._dtype = fk["dtype"]
        self.weight = nn.Parameter(torch.empty(out_features, in_features, **fk))
        self.bias = nn.Parameter(torch.empty(out_features, **fk)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        cinit.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_dtype(x, self.dtype, type(self).__name__)
        check_last_dim(x, self.in_features, type(self).__name__)
        return CF.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, dtype={self.dtype}"
        )
