"""Edges of the engine and the tasks that the end-to-end runs do not reach: every generator
seeded, a text of exactly ``max_len`` tokens accepted, and a tie with the best evaluation
keeping the earlier one (for a classifier and a language model alike)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from cplxnet.data import DataError
from cplxnet.engine.runtime import seed_everything
from cplxnet.tasks.classify.task import ClassifyTask, _check_lengths
from cplxnet.tasks.lm.task import LMOptions, LMTask


def test_seed_everything_seeds_python_numpy_and_torch():
    def draw():
        return random.random(), float(np.random.rand()), float(torch.rand(()))

    seed_everything(3)
    first = draw()
    random.seed(99), np.random.seed(99), torch.manual_seed(99)
    seed_everything(3)
    assert draw() == first
    seed_everything(4)
    assert all(a != b for a, b in zip(draw(), first))


def _data(*lengths: int) -> SimpleNamespace:
    split = SimpleNamespace(
        ids=[list(range(n)) for n in lengths],
        examples=[SimpleNamespace(where=f"text {i + 1}") for i in range(len(lengths))],
    )
    empty = SimpleNamespace(ids=[], examples=[])
    return SimpleNamespace(train=split, dev=empty, test=empty)


def test_a_text_of_max_len_tokens_fits_and_one_more_does_not():
    config = SimpleNamespace(max_len=5)
    _check_lengths(config, _data(3, 5))
    with pytest.raises(
        DataError, match="text 2: the text has 6 tokens but the model's max_len is 5"
    ):
        _check_lengths(config, _data(3, 6))
    _check_lengths(SimpleNamespace(), _data(10**4))  # a model without max_len takes any length


_LM_LOSS = SimpleNamespace(options=LMOptions())
_LM_EXACT = SimpleNamespace(options=LMOptions(monitor="accuracy"))


@pytest.mark.parametrize(
    "task,owner,dev,best,equal",
    [
        (ClassifyTask, None, {"accuracy": 0.75}, {"dev_accuracy": 0.5}, {"dev_accuracy": 0.75}),
        (LMTask, _LM_LOSS, {"loss": 1.0, "accuracy": 0.1}, {"dev": {"loss": 2.0, "accuracy": 0.9}},
         {"dev": {"loss": 1.0, "accuracy": 0.0}}),
        (LMTask, _LM_EXACT, {"loss": 2.0, "accuracy": 0.75},
         {"dev": {"loss": 1.0, "accuracy": 0.5}}, {"dev": {"loss": 3.0, "accuracy": 0.75}}),
    ],
    ids=["classify", "lm", "lm-exact-match"],
)  # fmt: skip
def test_a_better_evaluation_is_the_best_and_a_tie_keeps_the_earlier(task, owner, dev, best,
                                                                      equal):  # fmt: skip
    assert task.improved(owner, dev, None)
    assert task.improved(owner, dev, best)
    assert not task.improved(owner, dev, equal)
