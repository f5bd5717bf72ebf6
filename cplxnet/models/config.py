"""Model configurations: one dataclass per family, a shared base, named presets.

Every field is a plain Python value (ints, floats, strings, tuples, a dict of encoding options),
so ``dataclasses.asdict(config)`` is JSON-serialisable and :func:`config_from_dict` rebuilds the
same config from it (tuples may come back as JSON lists; they are normalised).

Width convention
----------------
``d_model`` (and ``num_filters``, ``hidden_size``, ``dim_feedforward``) count the features of the
model's number field: *complex* features for a complex model, *real* features for a real one. A
real twin built with ``complex=False`` and the same widths therefore has about half the real
parameters and a quarter of the multiply-adds of the complex model. The *equal-FLOP* real twin
doubles every width (a complex ``d x d`` matrix costs ``4 d^2`` real multiplications per vector,
exactly a real ``2d x 2d`` matrix, which however holds ``4 d^2`` reals against the complex
matrix's ``2 d^2``); build it with :func:`real_twin` (``match="flops"``, the default there;
``match="params"`` scales the widths by about sqrt 2 instead).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from cplxnet.functional import GATES, SCORES
from cplxnet.init import check_word_init
from cplxnet.nn import ACTIVATIONS, NORMS, READOUTS, WEIGHT_FIELDS

from .presets import LM_PRESET_TRAINING, PRESET_TRAINING, PRESETS

__all__ = [
    "ModelConfig",
    "FastTextConfig",
    "CNNConfig",
    "LSTMConfig",
    "TransformerConfig",
    "DecoderConfig",
    "FAMILIES",
    "LM_FAMILIES",
    "CONFIG_CLASSES",
    "PRESETS",
    "PRESET_TRAINING",
    "LM_PRESET_TRAINING",
    "make_config",
    "config_from_dict",
    "preset_config",
    "real_twin",
]


@dataclass
class ModelConfig:
    """Fields shared by every family.

    Args:
        vocab_size: rows of the word table (ids are ``0 .. vocab_size - 1``).
        num_classes: number of output logits.
        complex: complex-valued model (``True``) or its real twin (``False``); nothing else
            changes between the two (same layers, same code path, real layers in place of
            complex ones).
        encoding: name of a positional encoding of :func:`cplxnet.encodings.available_encodings`
            (``"none"``: no positional information besides what the architecture sees), or names
            joined by ``+`` (``"complex-order+rotary"``: each member at its own sites, see
            :mod:`cplxnet.encodings.combined`).
        encoding_options: extra keyword arguments for :func:`cplxnet.encodings.create_encoding`
            (for a combination keyed by member: ``{"rotary.base": 500}``).
        d_model: width of the token representations (complex features for a complex model,
            real features for a real one; see the module docstring).
        dropout: dropout before the classifier head (and inside the family where it applies).
        embedding_dropout: element dropout on the token representations.
        word_dropout: probability of dropping a whole token (its vector zeroed, survivors scaled
            by ``1 / (1 - p)``) during training.
        padding_idx: id of the padding token (its word vector is zero and receives no gradient).
        max_len: longest sequence the encodings must handle.
        readout: complex-to-real readout before the real linear head of a complex model:
            ``"magnitude"`` (``|z|``, D features), ``"concat"`` (``[Re z, Im z]``, 2D features),
            ``"real"`` (``Re z``, D features). Ignored by real models.
        sparse_embeddings: sparse gradients for the embedding tables (train them with
            ``torch.optim.SparseAdam``; see :func:`models.sparse_parameters`). Off by default, so
            that any torch optimiser (``torch.optim.Adam(model.parameters())``) trains the model;
            ``cplxnet train`` turns the tables sparse itself (faster with large vocabularies)
            unless ``--dense`` is given.
        word_init: initialisation of the table of word vectors (the word embedding, real or
            complex, or, when the encoding replaces it, the encoding's per-word amplitudes:
            complex-order, complex-vanilla): ``"normal"`` (``torch.nn.Embedding``'s
            ``N(0, s^2)``, ``s = 1``) or ``"uniform"`` (``U(-s, s)``,
            ``s = 0.25``: Kim's initialisation of random word vectors, EMNLP 2014); complex
            tables as :func:`cplxnet.init.word_init_`. The encoding's options ``init`` and
            ``init_scale`` override ``word_init`` and ``word_init_scale`` one by one for the
            encoding's table.
        word_init_scale: its scale ``s`` (``None``: 1 for normal, 0.25 for uniform).
        head_max_norm: if given, after every optimiser step of ``cplxnet train`` the rows of the
            classifier head's weight (one per class) whose L2 norm exceeds it are rescaled to it
            (Kim's constraint, ``s = 3``; see :meth:`models.TextClassifier.apply_constraints`).
            ``None``: no constraint. (Named apart from ``torch.nn.Embedding``'s ``max_norm``,
            which renormalises looked-up embedding rows.)
    """

    family: str = field(default="", init=False)
    vocab_size: int = 20000
    num_classes: int = 2
    complex: bool = True
    encoding: str = "none"
    encoding_options: dict[str, Any] = field(default_factory=dict)
    d_model: int = 128
    dropout: float = 0.5
    embedding_dropout: float = 0.0
    word_dropout: float = 0.0
    padding_idx: int = 0
    max_len: int = 512
    readout: str = "magnitude"
    sparse_embeddings: bool = False
    word_init: str = "normal"
    word_init_scale: float | None = None
    head_max_norm: float | None = None

    def __post_init__(self) -> None:
        name = type(self).__name__
        check_word_init(
            self.word_init, self.word_init_scale, name, ("word_init", "word_init_scale")
        )
        if self.head_max_norm is not None and (
            isinstance(self.head_max_norm, bool)
            or not isinstance(self.head_max_norm, (int, float))
            or not 0 < self.head_max_norm < float("inf")
        ):
            raise ValueError(
                f"{name}: head_max_norm must be None or a positive number, "
                f"got {self.head_max_norm!r}"
            )
        for attr in ("vocab_size", "num_classes", "d_model", "max_len"):
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name}: {attr} must be a positive int, got {value!r}")
        if self.num_classes < 2:
            raise ValueError(f"{name}: num_classes must be at least 2, got {self.num_classes}")
        if not 0 <= self.padding_idx < self.vocab_size:
            raise ValueError(
                f"{name}: padding_idx must be in [0, vocab_size) = [0, {self.vocab_size}), "
                f"got {self.padding_idx}"
            )
        for attr in ("dropout", "embedding_dropout", "word_dropout"):
            p = getattr(self, attr)
            if not 0.0 <= p < 1.0:
                raise ValueError(f"{name}: {attr} must be in [0, 1), got {p!r}")
        _check_choice(self, "readout", READOUTS)
        if not isinstance(self.encoding, str) or not self.encoding:
            raise ValueError(f"{name}: encoding must be a non-empty string, got {self.encoding!r}")
        if not isinstance(self.encoding_options, dict):
            raise TypeError(
                f"{name}: encoding_options must be a dict, "
                f"got {type(self.encoding_options).__name__}"
            )
        self.complex = bool(self.complex)
        self.sparse_embeddings = bool(self.sparse_embeddings)

    # widths scaled by real_twin(); subclasses extend
    width_fields: ClassVar[tuple[str, ...]] = ("d_model",)

    def word_table_options(self) -> dict[str, Any]:
        """Options of an encoding's per-word tables that follow the model unless the user's
        encoding options set them (padding id, sparsity, initialisation); the ``defaults`` of
        :func:`cplxnet.encodings.create_encoding`."""
        return {
            "padding_idx": self.padding_idx,
            "sparse": self.sparse_embeddings,
            "init": self.word_init,
            "init_scale": self.word_init_scale,
        }

    def to_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict(self)`` (it includes ``family``); see :func:`config_from_dict`."""
        return dataclasses.asdict(self)


def _check_choice(config: ModelConfig, attr: str, choices: tuple[str, ...]) -> None:
    """A ValueError naming the config class unless ``config.<attr>`` is one of ``choices`` (the
    tuples cplxnet defines: the library's valid values, not a copy)."""
    value = getattr(config, attr)
    if value not in choices:
        raise ValueError(
            f"{type(config).__name__}: unknown {attr} {value!r}; valid: "
            + ", ".join(map(repr, choices))
        )


def _positive_ints(values: Any, owner: str, attr: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in values)
    except TypeError:
        raise TypeError(f"{owner}: {attr} must be a sequence of ints, got {values!r}") from None
    if not values or any(v <= 0 for v in values):
        raise ValueError(f"{owner}: {attr} must be non-empty positive ints, got {values}")
    return values


@dataclass
class FastTextConfig(ModelConfig):
    """FastText (Joulin et al., "Bag of Tricks for Efficient Text Classification", EACL 2017):
    the mean of the token vectors, then a linear classifier. No hidden layer; ``dropout`` acts on
    the pooled vector."""

    family: str = field(default="fasttext", init=False)
    d_model: int = 100
    dropout: float = 0.0


@dataclass
class CNNConfig(ModelConfig):
    """Kim's CNN (Kim, "Convolutional Neural Networks for Sentence Classification", EMNLP 2014).

    Args:
        kernel_sizes: filter widths (one narrow convolution per width).
        num_filters: output channels of each convolution.
        activation: activation after the convolutions, a name of
            :data:`cplxnet.nn.ACTIVATIONS` (``"crelu"``, ``"modrelu"``, ``"zrelu"``,
            ``"cardioid"``, ``"split_tanh"``, ``"split_gelu"``, ...) built by
            :func:`cplxnet.nn.activation_module`; real twins apply the same function to real
            numbers (``crelu``/``zrelu``/``cardioid`` -> ReLU, ``modrelu`` ->
            ``relu(|x| + b) sign(x)``, ``split_tanh`` -> tanh, ``split_gelu`` -> GELU).
    """

    family: str = field(default="cnn", init=False)
    width_fields: ClassVar[tuple[str, ...]] = ("d_model", "num_filters")
    d_model: int = 300
    kernel_sizes: tuple[int, ...] = (3, 4, 5)
    num_filters: int = 100
    activation: str = "crelu"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.kernel_sizes = _positive_ints(self.kernel_sizes, type(self).__name__, "kernel_sizes")
        if self.num_filters <= 0:
            raise ValueError(f"CNNConfig: num_filters must be positive, got {self.num_filters}")
        _check_choice(self, "activation", ACTIVATIONS)


@dataclass
class LSTMConfig(ModelConfig):
    """(Bi)LSTM classifier over variable-length sequences.

    Args:
        hidden_size: hidden features per direction (``None``: ``d_model``).
        num_layers: stacked LSTM layers.
        bidirectional: run a second LSTM right to left and concatenate.
        pooling: ``"final"`` (last state of each direction, honouring the lengths), ``"mean"``
            (masked mean of the outputs) or ``"max"`` (masked max; by magnitude for complex).
        gate: complex LSTM gate nonlinearity (``"split"``: sigmoid/tanh on real and imaginary
            parts, bounded; ``"analytic"``: torch's complex sigmoid/tanh). Ignored by real models.
    """

    family: str = field(default="lstm", init=False)
    width_fields: ClassVar[tuple[str, ...]] = ("d_model", "hidden_size")
    d_model: int = 128
    hidden_size: int | None = None
    num_layers: int = 1
    bidirectional: bool = True
    pooling: str = "final"
    gate: str = "split"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden_size is None:
            self.hidden_size = self.d_model
        if self.hidden_size <= 0 or self.num_layers <= 0:
            raise ValueError("LSTMConfig: hidden_size and num_layers must be positive")
        if self.pooling not in ("final", "mean", "max"):
            raise ValueError(
                f"LSTMConfig: unknown pooling {self.pooling!r}; valid: 'final', 'mean', 'max'"
            )
        _check_choice(self, "gate", GATES)
        self.bidirectional = bool(self.bidirectional)


@dataclass
class TransformerConfig(ModelConfig):
    """Transformer encoder classifier (Vaswani et al., 2017), defaults of the Complex Order
    paper's classifier (Wang et al., ICLR 2020): 1 layer, d = 256, feed-forward 512, 8 heads.

    Args:
        num_layers, num_heads, dim_feedforward: encoder shape (``d_model`` divisible by
            ``num_heads``).
        attention_dropout: dropout on the attention weights (``None``: ``dropout``, as
            :class:`torch.nn.TransformerEncoderLayer`).
        activation: feed-forward activation, a name of
            :data:`cplxnet.nn.ACTIVATIONS` (real twins use its restriction to the reals).
        norm_first: pre-norm (``True``, with a final norm after the last layer) or post-norm.
        norm: normalisation of complex models (``"split"``, ``"whiten"`` or ``"rms"``; see
            :class:`cplxnet.nn.LayerNorm`, :class:`cplxnet.nn.RMSNorm`); real models use
            torch's ``LayerNorm`` (or ``RMSNorm`` for ``"rms"``).
        score: attention score, ``"real"`` (``Re(q k^H)``) or ``"modulus"`` (``|q k^T|``, the
            Complex Order paper's); see :class:`cplxnet.nn.MultiheadAttention`.
        projection: number field of the projection weights of a complex model (attention
            q/k/v/out and feed-forward): ``"complex"`` or ``"real"`` (one real matrix applied to
            the real and imaginary parts alike, the Complex Order paper's Table 4 ablation
            "real and imaginary projections shared"; see :class:`cplxnet.nn.Linear`'s
            ``weight_field``). Ignored by real models.
    """

    family: str = field(default="transformer", init=False)
    width_fields: ClassVar[tuple[str, ...]] = ("d_model", "dim_feedforward")
    d_model: int = 256
    num_layers: int = 1
    num_heads: int = 8
    dim_feedforward: int = 512
    dropout: float = 0.1
    attention_dropout: float | None = None
    activation: str = "crelu"
    norm_first: bool = True
    norm: str = "split"
    score: str = "real"
    projection: str = "complex"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_layers <= 0 or self.num_heads <= 0 or self.dim_feedforward <= 0:
            raise ValueError(
                "TransformerConfig: num_layers, num_heads and dim_feedforward must be positive"
            )
        if self.d_model % self.num_heads:
            raise ValueError(
                f"TransformerConfig: d_model={self.d_model} is not divisible by "
                f"num_heads={self.num_heads}"
            )
        if self.attention_dropout is not None and not 0.0 <= self.attention_dropout < 1.0:
            raise ValueError(
                "TransformerConfig: attention_dropout must be None (follow dropout) or in [0, 1), "
                f"got {self.attention_dropout!r}"
            )
        _check_choice(self, "norm", NORMS)
        _check_choice(self, "score", SCORES)
        _check_choice(self, "activation", ACTIVATIONS)
        _check_choice(self, "projection", WEIGHT_FIELDS)
        self.norm_first = bool(self.norm_first)


@dataclass
class DecoderConfig(TransformerConfig):
    """Decoder-only causal Transformer language model (:class:`cplxnet.models.Decoder`): token
    embedding stage, ``num_layers`` causal Transformer layers (pre-norm by default, with a final
    norm), and a real next-token head over the vocabulary.

    Defaults: the ``lm-char`` study shape (d = 64 complex, 2 layers, 4 heads, feed-forward 4d, no
    dropout). The fields of :class:`TransformerConfig` keep their meaning; in addition:

    Args:
        tie_embeddings: the head uses the word table (weight tying, Press & Wolf, EACL 2017; for
            a complex table the logits are ``Re(h e_w^H) + b_w``) when the model has a plain
            word table. An encoding acting on the ``"token"`` site (complex-order,
            complex-vanilla) replaces the word table by a function of the word *and its
            position*, so there is no position-free table to tie to: the head is then a free
            real-linear map (the model's ``tied`` attribute says which).
        max_len: the positions the encoding's tables hold (a trainable table has ``max_len``
            rows); the LM engine sets it to the training context. Lengths an encoding cannot
            represent are reported by :meth:`cplxnet.models.Decoder.unsupported_length`.

    ``num_classes`` is always ``vocab_size`` (the next-token classes) and ``readout`` is unused
    (the head reads the real view of the complex hidden state; see the model's docstring).
    ``sparse_embeddings`` defaults to ``False``: the tied head gives the table dense gradients.
    """

    family: str = field(default="decoder", init=False)
    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4
    dim_feedforward: int = 256
    dropout: float = 0.0
    attention_dropout: float = 0.0
    max_len: int = 64
    sparse_embeddings: bool = False
    tie_embeddings: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.vocab_size, int) and not isinstance(self.vocab_size, bool):
            self.num_classes = max(self.vocab_size, 2)
        super().__post_init__()
        if self.head_max_norm is not None:
            raise ValueError(
                "DecoderConfig: head_max_norm is a classifier option (the language-model trainer "
                "applies no constraint); leave it None"
            )
        self.tie_embeddings = bool(self.tie_embeddings)


CONFIG_CLASSES: dict[str, type[ModelConfig]] = {
    cls.family: cls
    for cls in (FastTextConfig, CNNConfig, LSTMConfig, TransformerConfig, DecoderConfig)
}
#: the text-classifier families (``cplxnet train`` / ``cplxnet compare``)
FAMILIES: tuple[str, ...] = ("fasttext", "cnn", "lstm", "transformer")
#: the language-model families (``cplxnet train --task lm``)
LM_FAMILIES: tuple[str, ...] = ("decoder",)


def _config_class(family: str) -> type[ModelConfig]:
    if family not in CONFIG_CLASSES:
        raise ValueError(
            f"unknown model family {family!r}; valid families are "
            + ", ".join(map(repr, CONFIG_CLASSES))
        )
    return CONFIG_CLASSES[family]


def make_config(family: str, /, **fields: Any) -> ModelConfig:
    """The config of ``family`` (one of :data:`FAMILIES`) with ``fields`` overriding defaults.

    ``fields`` may contain ``family`` (ignored if it matches). Unknown fields are an error that
    lists the valid ones.
    """
    cls = _config_class(family)
    given = fields.pop("family", family)
    if given != family:
        raise ValueError(f"make_config: family {family!r} given with family={given!r} in fields")
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(fields) - names)
    if unknown:
        raise TypeError(
            f"{cls.__name__}: unknown field(s) {', '.join(unknown)}; valid fields are "
            + ", ".join(sorted(names))
        )
    return cls(**fields)


def config_from_dict(d: dict[str, Any]) -> ModelConfig:
    """Rebuild a config from ``dataclasses.asdict(config)`` (which holds ``family``), e.g. after
    a JSON round trip: ``config_from_dict(json.loads(json.dumps(asdict(c)))) == c``."""
    if not isinstance(d, dict) or "family" not in d:
        raise ValueError(
            "config_from_dict: expected a dict with a 'family' key, as dataclasses.asdict(config) "
            "gives"
        )
    d = dict(d)
    return make_config(d.pop("family"), **d)


def real_twin(config: ModelConfig, *, match: str = "flops") -> ModelConfig:
    """The real twin of a complex ``config``: ``complex=False``, every other field kept except
    the widths in ``config.width_fields`` (``d_model`` and the family's hidden widths), scaled by
    ``match``:

    * ``"flops"`` (x2): the same real multiply-adds in every dense layer (a complex
      ``m x n`` matrix costs ``4mn`` real multiplications, as a real ``2m x 2n`` one) and the same
      embedding parameters (``V x 2D`` reals), but twice the dense-layer parameters;
    * ``"params"`` (x sqrt 2, rounded to even and, for the Transformer, to a multiple of
      ``num_heads``): about the same number of real parameters in the dense layers;
    * ``"width"`` (x1): the same widths (about half the parameters, a quarter of the FLOPs).

    Calling it on a real config returns an unchanged copy.
    """
    factors = {"flops": 2.0, "params": 2.0**0.5, "width": 1.0}
    if match not in factors:
        raise ValueError(
            f"real_twin: unknown match {match!r}; valid: " + ", ".join(map(repr, factors))
        )
    if not config.complex:
        return dataclasses.replace(config)
    step = 2 * getattr(config, "num_heads", 1)
    changes: dict[str, Any] = {"complex": False}
    for name in config.width_fields:
        width = getattr(config, name) * factors[match]
        if match == "params":
            width = max(step, step * round(width / step)) if name == "d_model" else round(width)
        changes[name] = int(width)
    return dataclasses.replace(config, **changes)


def preset_config(name: str, /, **overrides: Any) -> ModelConfig:
    """The config of preset ``name`` (a key of :data:`PRESETS`) with ``overrides`` applied."""
    if name not in PRESETS:
        raise ValueError(
            f"unknown preset {name!r}; valid presets are " + ", ".join(map(repr, PRESETS))
        )
    fields = copy.deepcopy(PRESETS[name])  # presets hold dicts (encoding_options): no sharing
    family = fields.pop("family")
    if "family" in overrides and overrides["family"] != family:
        raise ValueError(
            f"preset {name!r} is a {family!r} model; drop family= or pick another preset"
        )
    overrides.pop("family", None)
    fields.update(overrides)
    return make_config(family, **fields)
