"""Complex-valued layers with torch.nn conventions (factory kwargs, reset_parameters, repr)."""

from .activation import *  # noqa: F403
from .attention import *  # noqa: F403
from .conv import *  # noqa: F403
from .dropout import *  # noqa: F403
from .embedding import *  # noqa: F403
from .kspace import *  # noqa: F403
from .kv_cache import *  # noqa: F403
from .linear import *  # noqa: F403
from .loss import *  # noqa: F403
from .norm import *  # noqa: F403
from .pooling import *  # noqa: F403
from .readout import *  # noqa: F403
from .rnn import *  # noqa: F403
from .rnn_cell import *  # noqa: F403
from .ssm import *  # noqa: F403
from .transformer import *  # noqa: F403
from .transformer_decoder import *  # noqa: F403
from .unitary_rnn import *  # noqa: F403
from .upsampling import *  # noqa: F403
from .whitening import *  # noqa: F403
