"""Positional encodings, every family through one contract (:mod:`cplxnet.encodings.base`).

Create one by name with :func:`create_encoding` (``available_encodings()`` lists the names); a
model passes it to its layers, which call its hooks (``embed``, ``encode_input``,
``layer_input``, ``rotate``, ``logits_bias``, ``value_term``).
"""

from .alibi import *  # noqa: F403
from .base import *  # noqa: F403
from .combined import *  # noqa: F403
from .complex_order import *  # noqa: F403
from .complex_vanilla import *  # noqa: F403
from .cope import *  # noqa: F403
from .deberta import *  # noqa: F403
from .fire import *  # noqa: F403
from .floater import *  # noqa: F403
from .hierarchical import *  # noqa: F403
from .kerple import *  # noqa: F403
from .multiplicative import *  # noqa: F403
from .none import *  # noqa: F403
from .randomized import *  # noqa: F403
from .registry import *  # noqa: F403
from .rope_scaling import *  # noqa: F403
from .rotary import *  # noqa: F403
from .shaw import *  # noqa: F403
from .sinusoidal import *  # noqa: F403
from .t5 import *  # noqa: F403
from .trainable import *  # noqa: F403
from .tupe import *  # noqa: F403
from .xl import *  # noqa: F403
from .xpos import *  # noqa: F403
