"""``build_model(config)``: the one constructor the trainer and the CLI use."""

from __future__ import annotations

import torch

from .cnn import CNN
from .common import TextClassifier
from .config import ModelConfig, config_from_dict
from .decoder import Decoder
from .fasttext import FastText
from .lstm import LSTMClassifier
from .transformer import TransformerClassifier

__all__ = ["MODEL_CLASSES", "build_model"]

MODEL_CLASSES: dict[str, type[TextClassifier] | type[Decoder]] = {
    "fasttext": FastText,
    "cnn": CNN,
    "lstm": LSTMClassifier,
    "transformer": TransformerClassifier,
    "decoder": Decoder,
}


def build_model(
    config: ModelConfig | dict,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> TextClassifier | Decoder:
    """The model of ``config`` (a :class:`models.ModelConfig` or its ``dataclasses.asdict``).

    ``dtype`` is the floating precision (``torch.float32``/``float64`` or their complex types;
    ``None``: ``torch.get_default_dtype()``): a complex model gets the complex type, a real one
    the real type, and the head is always real.
    """
    if isinstance(config, dict):
        config = config_from_dict(config)
    if not isinstance(config, ModelConfig):
        raise TypeError(
            f"build_model: expected a ModelConfig (see cplxnet.models.make_config), got "
            f"{type(config).__name__}"
        )
    return MODEL_CLASSES[config.family](config, device=device, dtype=dtype)
