"""cplxnet: complex-valued neural networks for PyTorch."""

from . import functional, init, nn
from ._utils import complex_dtype, real_dtype

__version__ = "0.1.0"
__all__ = ["functional", "init", "nn", "complex_dtype", "real_dtype", "__version__"]
