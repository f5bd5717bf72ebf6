"""``MaxNumel``: records the largest tensor any op produces, to prove memory bounds in tests."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class MaxNumel(TorchDispatchMode):
    """Records the largest tensor any op produces (forward and backward)."""

    def __init__(self):
        super().__init__()
        self.max = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.max = max(self.max, t.numel())
        return out
