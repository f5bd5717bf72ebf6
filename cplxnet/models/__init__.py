"""Models built from cplxnet's public API: the text classifiers FastText, Kim CNN, (bi)LSTM,
Transformer and the decoder language model, each complex or real; and a 2-D :class:`UNet` for
complex images with a synthetic undersampled-Fourier task (:func:`undersampled_fourier_pairs`).

>>> from cplxnet.models import make_config, build_model
>>> model = build_model(make_config("transformer", vocab_size=1000, num_classes=6,
...                                 encoding="complex-order"))
>>> logits = model(ids, padding_mask)  # (B, L) long, (B, L) bool True = padding -> (B, 6)

``make_config("decoder", ...)`` is the causal language model (:class:`Decoder`: ``(B, L)`` ids
-> ``(B, L, V)`` next-token logits; trained by :mod:`cplxnet.lm`).

``complex=False`` builds the real twin (same code, real layers); :func:`real_twin` doubles the
widths for the equal-FLOP twin. See :mod:`cplxnet.models.config` for the width convention.
"""

from .build import MODEL_CLASSES, build_model
from .cnn import CNN
from .common import (
    NumberField,
    ParameterCount,
    TextClassifier,
    TokenEmbedding,
    count_parameters,
    sparse_parameters,
)
from .config import (
    CONFIG_CLASSES,
    FAMILIES,
    LM_FAMILIES,
    LM_PRESET_TRAINING,
    PRESET_TRAINING,
    PRESETS,
    CNNConfig,
    DecoderConfig,
    FastTextConfig,
    LSTMConfig,
    ModelConfig,
    TransformerConfig,
    config_from_dict,
    make_config,
    preset_config,
    real_twin,
)
from .decoder import Decoder, next_token_logits
from .fasttext import FastText
from .lstm import LSTMClassifier
from .transformer import TransformerClassifier
from .unet import UNet, as_channels, from_channels, undersampled_fourier_pairs

__all__ = [
    "UNet",
    "as_channels",
    "from_channels",
    "undersampled_fourier_pairs",
    "FAMILIES",
    "LM_FAMILIES",
    "LM_PRESET_TRAINING",
    "DecoderConfig",
    "Decoder",
    "next_token_logits",
    "PRESETS",
    "PRESET_TRAINING",
    "CONFIG_CLASSES",
    "MODEL_CLASSES",
    "ModelConfig",
    "FastTextConfig",
    "CNNConfig",
    "LSTMConfig",
    "TransformerConfig",
    "make_config",
    "config_from_dict",
    "preset_config",
    "real_twin",
    "build_model",
    "count_parameters",
    "sparse_parameters",
    "ParameterCount",
    "TextClassifier",
    "TokenEmbedding",
    "NumberField",
    "FastText",
    "CNN",
    "LSTMClassifier",
    "TransformerClassifier",
]
