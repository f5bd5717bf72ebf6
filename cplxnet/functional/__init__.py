"""Functional forms of every cplxnet layer; the modules in :mod:`cplxnet.nn` delegate here."""

from .activation import *  # noqa: F403
from .attention import *  # noqa: F403
from .compiled import *  # noqa: F403
from .conv import *  # noqa: F403
from .dropout import *  # noqa: F403
from .embedding import *  # noqa: F403
from .kspace import *  # noqa: F403
from .linear import *  # noqa: F403
from .loss import *  # noqa: F403
from .norm import *  # noqa: F403
from .pooling import *  # noqa: F403
from .readout import *  # noqa: F403
from .rnn import *  # noqa: F403
from .rnn_cell import *  # noqa: F403
from .rnn_scan import *  # noqa: F403
from .spectral import *  # noqa: F403
from .ssm import *  # noqa: F403
from .upsampling import *  # noqa: F403
from .whitening import *  # noqa: F403
