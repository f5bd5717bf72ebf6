"""A tiny model zoo and tiny data for the training-engine tests (imported as ``test_train_zoo``).

The engine talks to a zoo through ``build_model``, ``config_from_dict`` and ``sparse_parameters``
(the interface of the ``models`` package); this one holds a bag-of-embeddings classifier small
enough to train in well under a second, so the engine's tests do not depend on the real zoo.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

import torch
from torch import nn

FAMILIES = ("tiny",)


@dataclass
class TinyConfig:
    family: str = "tiny"
    vocab_size: int = 10
    num_classes: int = 2
    d_model: int = 8
    dropout: float = 0.0
    padding_idx: int = 0
    max_len: int = 64
    sparse_embeddings: bool = True
    complex: bool = False


class TinyModel(nn.Module):
    """Masked mean of word vectors -> dropout -> tanh layer -> linear head."""

    def __init__(self, config: TinyConfig) -> None:
        super().__init__()
        self.config = config
        self.word = nn.Embedding(
            config.vocab_size,
            config.d_model,
            padding_idx=config.padding_idx,
            sparse=config.sparse_embeddings,
        )
        self.hidden = nn.Linear(config.d_model, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.d_model, config.num_classes)

    def forward(self, ids: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        if ids.shape[1] > self.config.max_len:
            raise ValueError(f"TinyModel: length {ids.shape[1]} > max_len {self.config.max_len}")
        keep = (~padding_mask).unsqueeze(-1).float()  # (B, L, 1)
        x = (self.word(ids) * keep).sum(1) / keep.sum(1).clamp(min=1)  # (B, D)
        return self.head(torch.tanh(self.hidden(self.dropout(x))))

    @torch.no_grad()
    def load_word_vectors(self, vectors: torch.Tensor, found: torch.Tensor) -> int:
        if vectors.shape != self.word.weight.shape:
            raise ValueError(
                f"vectors have shape {tuple(vectors.shape)} but the word table is "
                f"{tuple(self.word.weight.shape)}"
            )
        found = found.clone()
        found[self.config.padding_idx] = False
        self.word.weight[found] = vectors[found]
        return int(found.sum())


def make_config(family: str = "tiny", **fields) -> TinyConfig:
    if family != "tiny":
        raise ValueError(f"unknown model family {family!r}; valid families are 'tiny'")
    return TinyConfig(**fields)


def build_model(config: TinyConfig) -> TinyModel:
    return TinyModel(config)


def config_from_dict(d: dict) -> TinyConfig:
    return TinyConfig(**d)


def sparse_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [m.weight for m in model.modules() if isinstance(m, nn.Embedding) and m.sparse]


def write_toy_tsv(path, n: int = 120, seed: int = 0, labels=("neg", "pos")) -> str:
    """A separable toy task: the label is given by a cue word hidden among filler words."""
    rng = random.Random(seed)
    cues = {"neg": ["bad", "awful", "dull"], "pos": ["good", "great", "fun"], "mid": ["okay"]}
    filler = ["the", "a", "film", "plot", "actor", "scene", "was", "is", "and", "it", "very"]
    lines = ["label\ttext"]
    for i in range(n):
        label = labels[i % len(labels)]
        words = [rng.choice(filler) for _ in range(rng.randint(2, 9))]
        words.insert(rng.randint(0, len(words)), rng.choice(cues[label]))
        lines.append(f"{label}\t{' '.join(words)}")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return str(path)


def test_tiny_zoo_round_trip():
    config = make_config(vocab_size=7, d_model=4)
    assert config_from_dict(dataclasses.asdict(config)) == config
    model = build_model(config)
    assert sparse_parameters(model) == [model.word.weight]
    ids = torch.tensor([[2, 3, 0], [4, 0, 0]])
    assert model(ids, ids.eq(0)).shape == (2, 2)


def ddp_train_worker(rank, world, init_file, toy_file, runs):
    """One rank of data-parallel ``train`` runs (spawned by tests/test_ddp.py); ``runs`` is a
    list of ``(run_dir, sparse)``."""
    import sys

    import torch.distributed as dist

    from cplxnet.data import DataSpec, prepare_data
    from cplxnet.tasks.classify.task import train

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        for run_dir, sparse in runs:
            train(
                make_config(d_model=8, dropout=0.0),
                prepare_data(DataSpec(toy_file)),
                run_dir,
                ddp_options(sparse),
                zoo=sys.modules[__name__],
                quiet=True,
            )
    finally:
        dist.destroy_process_group()


def ddp_options(sparse: bool):
    from cplxnet.tasks.classify.task import TrainOptions

    return TrainOptions(epochs=1, batch_size=15, lr=0.05, seed=4, max_steps=1, sparse=sparse)
