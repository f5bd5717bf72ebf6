"""Named presets of the zoo: model configs (:data:`PRESETS`, built by
:func:`cplxnet.models.preset_config`) and the training budgets that go with them
(:data:`PRESET_TRAINING` for classifiers, :data:`LM_PRESET_TRAINING` for language models)."""

from __future__ import annotations

from typing import Any

__all__ = ["PRESETS", "PRESET_TRAINING", "LM_PRESET_TRAINING"]


# Named presets: family plus field overrides. Any field can still be overridden by the caller.
PRESETS: dict[str, dict[str, Any]] = {
    # fast default of `cplxnet train` with no arguments (MR in a few minutes on 2 CPU cores)
    "default": {"family": "cnn", "d_model": 128, "num_filters": 64, "kernel_sizes": (3, 4, 5)},
    # Kim (2014) CNN as used by the Complex Order paper's CNN baseline
    "paper-cnn": {
        "family": "cnn",
        "d_model": 300,
        "kernel_sizes": (3, 4, 5),
        "num_filters": 100,
        "dropout": 0.5,
        "encoding": "complex-order",
    },
    # the Complex Order paper's Transformer classifier: 1 layer, d = 256, ffn 512, 8 heads
    "paper-transformer": {
        "family": "transformer",
        "d_model": 256,
        "num_layers": 1,
        "num_heads": 8,
        "dim_feedforward": 512,
        "encoding": "complex-order",
    },
    # the paper's (bi)LSTM baseline shape
    "paper-lstm": {
        "family": "lstm",
        "d_model": 300,
        "hidden_size": 128,
        "bidirectional": True,
        "encoding": "complex-order",
    },
    # Kim's CNN-rand (Kim, EMNLP 2014), a real model: random word vectors U(-0.25, 0.25) of size
    # 300, filter widths 3/4/5 x 100 with ReLU, max-over-time pooling, dropout .5, the l2
    # constraint s = 3 on the output layer's weight rows, mini-batches of 50 (PRESET_TRAINING);
    # the epoch is the best on dev. Adam replaces the paper's Adadelta (the engine's optimiser).
    "kim-cnn": {
        "family": "cnn",
        "complex": False,
        "d_model": 300,
        "kernel_sizes": (3, 4, 5),
        "num_filters": 100,
        "activation": "crelu",  # ReLU on real numbers
        "dropout": 0.5,
        "word_init": "uniform",
        "word_init_scale": 0.25,
        "head_max_norm": 3.0,
    },
    "fasttext": {"family": "fasttext", "d_model": 100},
    "transformer-small": {
        "family": "transformer",
        "d_model": 128,
        "num_layers": 1,
        "num_heads": 8,
        "dim_feedforward": 512,
    },
    # Complex-order models for the bundled data, no pretrained vectors, settings chosen on the dev
    # split only (benchmarks/accuracy.py runs them; benchmarks/ACCURACY.md has the numbers):
    # `cplxnet train --data trec --preset trec-cnn-complex-order --seed 0`.
    # TREC CNN: dropout .3 on the token vectors gave the best dev accuracy over 2 seeds; amplitudes
    # U(-0.25, 0.25) (Kim's init) beat normal(0, 1) on dev for both seeds (.871 against .854)
    "trec-cnn-complex-order": {
        "family": "cnn",
        "d_model": 300,
        "kernel_sizes": (3, 4, 5),
        "num_filters": 100,
        "dropout": 0.5,
        "embedding_dropout": 0.3,
        "word_init": "uniform",
        "word_init_scale": 0.25,
        "encoding": "complex-order",
    },
    # MR CNN: dropout .5 on the token vectors and .2 on whole tokens against the overfitting of
    # the three per-word tables (better dev accuracy than without, 2 seeds); amplitudes
    # U(-0.25, 0.25) (Kim's init) beat normal(0, 1) on dev for both seeds (.759 against .743)
    "mr-cnn-complex-order": {
        "family": "cnn",
        "d_model": 300,
        "kernel_sizes": (3, 4, 5),
        "num_filters": 100,
        "dropout": 0.5,
        "embedding_dropout": 0.5,
        "word_dropout": 0.2,
        "word_init": "uniform",
        "word_init_scale": 0.25,
        "encoding": "complex-order",
    },
    # d = 128 matched d = 256 on TREC in half the time; the modulus score |q k^T| (the paper's)
    # and dropout .3 (layers, attention, token vectors) gave the best dev accuracy over 2 seeds
    "trec-transformer-complex-order": {
        "family": "transformer",
        "d_model": 128,
        "num_layers": 1,
        "num_heads": 8,
        "dim_feedforward": 512,
        "dropout": 0.3,
        "attention_dropout": 0.3,
        "embedding_dropout": 0.3,
        "score": "modulus",
        "encoding": "complex-order",
    },
    # MR overfits (three per-word tables for 8.5k sentences): one frequency per dimension shared
    # by all words (per-word amplitude and phase), dropout on layers, token vectors and whole
    # tokens, and weight decay 1.0 on every parameter (dense tables, see PRESET_TRAINING)
    "mr-transformer-complex-order": {
        "family": "transformer",
        "d_model": 128,
        "num_layers": 1,
        "num_heads": 8,
        "dim_feedforward": 512,
        "dropout": 0.3,
        "attention_dropout": 0.3,
        "embedding_dropout": 0.5,
        "word_dropout": 0.2,
        "encoding": "complex-order",
        "encoding_options": {"frequency": "shared"},
    },
    # the language-model study (`cplxnet train --task lm --preset lm-char`): a small character
    # model; its real twin (real_twin) has d 128 and feed-forward 512. Budget in LM_PRESET_TRAINING
    "lm-char": {
        "family": "decoder",
        "d_model": 64,
        "num_layers": 2,
        "num_heads": 4,
        "dim_feedforward": 256,
        "dropout": 0.0,
        "attention_dropout": 0.0,
    },
}


# Training-option defaults of a preset (fields of cplxnet.train.TrainOptions): `cplxnet train
# --preset NAME` starts from these and command-line flags override them, so one command reproduces
# the benchmarked run. Presets not listed use the engine's defaults.
PRESET_TRAINING: dict[str, dict[str, Any]] = {
    "kim-cnn": {"batch_size": 50, "epochs": 20, "patience": 4},
    "trec-cnn-complex-order": {"epochs": 20, "patience": 4},
    "mr-cnn-complex-order": {"epochs": 20, "patience": 4},
    "trec-transformer-complex-order": {"epochs": 25, "patience": 5},
    "mr-transformer-complex-order": {
        "epochs": 20,
        "patience": 4,
        "sparse": False,  # dense tables so that AdamW's weight decay reaches them
        "weight_decay": 1.0,
    },
}


# Training defaults of the language-model presets (fields of cplxnet.lm.LMOptions, plus the
# training context): `cplxnet train --task lm --preset lm-char` starts from these. lm-char's 1,500
# steps take about 3 minutes of CPU time on one thread on the bundled MR stream.
LM_PRESET_TRAINING: dict[str, dict[str, Any]] = {
    "lm-char": {"steps": 1500, "batch_size": 32, "lr": 2e-3, "context": 64},
}
