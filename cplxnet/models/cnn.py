"""Kim's convolutional sentence classifier, complex or real.

Kim, "Convolutional Neural Networks for Sentence Classification", EMNLP 2014: one narrow
convolution per filter width over the token vectors, a nonlinearity, max-over-time pooling of
every feature map, dropout and a linear classifier.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import cplxnet.functional as CF
from cplxnet.utils import is_tracing

from .common import NumberField, TextClassifier
from .config import CNNConfig

__all__ = ["CNN"]


class CNN(TextClassifier):
    r"""Kim CNN: for each width :math:`k` a narrow convolution :math:`h^{(k)}_t = f(\sum_{j<k}
    W^{(k)}_j x_{t+j} + b^{(k)})` (``num_filters`` channels), max-over-time pooling, the pooled
    vectors concatenated (``len(kernel_sizes) * num_filters`` features).

    Padding: the embedding stage zeroes padded positions, a batch shorter than the widest filter
    is right-padded with zeros to that width, and a window :math:`[t, t+k)` is pooled only if it
    ends inside the sequence, where a sequence of ``n`` tokens counts as ``max(n, widest filter)``
    long (shorter texts are read as padded with zero vectors up to the widest filter, as Kim's
    zero padding). So neither the tokens at padded positions nor the amount of padding change
    the output.

    Complex pooling: **max by magnitude** (:func:`cplxnet.functional.masked_max_magnitude`): per
    channel, the complex activation with the largest modulus, phase kept, then the model's
    readout. With the magnitude readout this equals "readout then max"; with the concat and real
    readouts it keeps the real and imaginary parts of one position together (a per-part max
    would mix positions). The real twin uses the same function, i.e. the entry of largest
    absolute value; after the default ``crelu`` activation (ReLU on reals) every entry is
    non-negative and this is Kim's max.
    """

    def __init__(
        self,
        config: CNNConfig,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(config, device=device, dtype=dtype)

    def build_body(self, config: CNNConfig, field: NumberField) -> int:
        self.kernel_sizes = tuple(config.kernel_sizes)
        self.convs = nn.ModuleList(
            field.conv1d(config.d_model, config.num_filters, k) for k in self.kernel_sizes
        )
        self.activation = field.activation(config.activation, config.num_filters)
        return config.num_filters * len(self.kernel_sizes)

    def features(self, x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        kmax = max(self.kernel_sizes)
        L = x.shape[1]
        if is_tracing():
            # a length-independent graph: kmax - 1 zero vectors always (the extra windows end
            # past every text and are masked below, so the result is the eager one)
            x = F.pad(x, (0, 0, 0, kmax - 1))  # (B, L + kmax - 1, D)
        elif kmax > L:  # short batch: zero vectors up to the widest filter
            x = F.pad(x, (0, 0, 0, kmax - L))  # (B, kmax, D)
        # a sequence of n tokens is read as max(n, kmax) long (zeros after its end)
        span = (~padding_mask).sum(dim=1).clamp(min=kmax)  # (B,)
        x = x.transpose(1, 2)  # (B, D, L')
        pooled = []
        for k, conv in zip(self.kernel_sizes, self.convs):
            h = conv(x).transpose(1, 2)  # (B, T, F) with T = L' - k + 1
            h = self.activation(h)
            starts = torch.arange(h.shape[1], device=h.device)  # (T,)
            outside = starts[None, :] + k > span[:, None]  # (B, T) True = window past the end
            pooled.append(CF.masked_max_magnitude(h, outside, dim=1))  # (B, F)
        return torch.cat(pooled, dim=-1)  # (B, len(kernel_sizes) * F)
