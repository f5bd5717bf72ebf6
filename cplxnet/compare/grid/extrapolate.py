"""Length extrapolation: train on texts of at most ``L`` tokens, test on longer ones.

Two kinds of data, both cut into the same length bins
(:func:`cplxnet.tasks.classify.synthetic.length_bins`: ``[1, L]``, ``(L, 2L]``, ``(2L, 4L]`` by
default):

* a real dataset (MR, TREC, a file): its train and dev splits keep only texts of at most ``L``
  tokens (the vocabulary is built from those; the label set from the whole training split), and
  its test split is scored per length bin (texts longer than the last bin are dropped and
  counted);
* the synthetic order task (:class:`~cplxnet.tasks.classify.synthetic.SyntheticOrderTask`): training
  lengths at most ``L`` and, in the longer bins, marker distances never seen in training.

Early stopping uses the in-distribution dev split only; the weights of the best dev epoch are
scored on every bin. The model's ``max_len`` is the last bin's upper end, so a trainable position
table has rows that training never reaches (that is what is measured).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ...data import (
    DataError,
    LabelMap,
    PreparedData,
    Splits,
    Vocab,
    encode_split,
    load_splits,
)
from ...engine.runs import clear_run_folder
from ...tasks.classify.synthetic import LengthBin, SyntheticOrderTask, length_bins
from .cells import CompareError, data_spec
from .expand import cell_config
from .store import read_history, result_fields

__all__ = [
    "DEFAULT_TRAIN_LEN",
    "train_len_for",
    "synthetic_task",
    "synthetic_data",
    "length_split_data",
    "train_extrapolation_cell",
]

DEFAULT_TRAIN_LEN = {"synthetic": 16, "mr": 16, "trec": 8}
DEFAULT_FACTORS = (1, 2, 4)


def train_len_for(data: str, options: Any) -> int:
    """``L`` for ``data``: ``options.extrapolate["train_len"]`` (an int, or a dict by dataset),
    else :data:`DEFAULT_TRAIN_LEN` (16 for other files)."""
    given = options.extrapolate.get("train_len")
    if isinstance(given, int):
        return given
    if isinstance(given, dict) and data in given:
        return int(given[data])
    return DEFAULT_TRAIN_LEN.get(data, 16)


def _factors(options: Any) -> tuple[int, ...]:
    return tuple(options.extrapolate.get("factors") or DEFAULT_FACTORS)


def synthetic_task(options: Any) -> SyntheticOrderTask:
    """The synthetic task of the grid options (``options.extrapolate["synthetic"]`` sizes)."""
    sizes = dict(options.extrapolate.get("synthetic") or {})
    return SyntheticOrderTask(
        train_len=train_len_for("synthetic", options), factors=_factors(options), **sizes
    )


def check_synthetic(options: Any) -> None:
    """The synthetic task of ``options`` can be made (its sizes and length checked); else a
    :class:`CompareError` naming the options."""
    try:
        synthetic_task(options)
    except ValueError as err:
        raise CompareError(
            f"--data synthetic: the task cannot be made ({err}); --train-len must be at least 2 "
            "(a text holds two markers) and --synthetic-size at least 2"
        ) from None


def _prepared(
    spec: Any,
    tokenizer: Any,
    train: list,
    dev: list,
    test: list,
    labels: LabelMap,
    how: str,
    min_freq: int = 1,
    max_size: int | None = None,
) -> tuple[PreparedData, Vocab]:
    vocab = Vocab.build((tokenizer(ex.text) for ex in train), min_freq=min_freq, max_size=max_size)
    enc = {
        name: encode_split(part, tokenizer, vocab, labels)
        for name, part in (("train", train), ("dev", dev), ("test", test))
    }
    data = PreparedData(spec, tokenizer, vocab, labels, Splits(train, dev, test, how), **enc)
    return data, vocab


def synthetic_data(options: Any, cell: Any, bins: bool = True):
    """The synthetic task as prepared data (test: the in-distribution bin); with ``bins`` also
    ``{bin label: EncodedSplit}`` of every test bin."""
    from ...data import DataSpec

    task = synthetic_task(options)
    spec = DataSpec(data="synthetic")
    tokenizer = spec.tokenizer
    train, dev, test_bins = task.train(), task.dev(), task.test_bins()
    labels = LabelMap.build(train)
    first = next(iter(test_bins))
    how = f"synthetic order task {json.dumps(task.to_dict(), sort_keys=True)}"
    data, vocab = _prepared(spec, tokenizer, train, dev, test_bins[first], labels, how)
    if not bins:
        return data
    encoded = {
        label: encode_split(part, tokenizer, vocab, labels) for label, part in test_bins.items()
    }
    return data, encoded, task.bins, 0


def length_split_data(cell: Any, options: Any):
    """A real dataset cut by length (see the module docstring): ``(data, {bin: split}, bins,
    dropped)`` where ``dropped`` counts test texts longer than the last bin."""
    spec = data_spec(cell, options)
    if spec.max_len is not None:
        raise DataError("--max-len (truncation) cannot be combined with length extrapolation")
    L = train_len_for(cell.data, options)
    bins = length_bins(L, _factors(options))
    splits = load_splits(spec)
    tokenizer = spec.tokenizer

    def length(ex: Any) -> int:
        return max(1, len(tokenizer(ex.text)))

    train = [ex for ex in splits.train if length(ex) <= L]
    dev = [ex for ex in splits.dev if length(ex) <= L]
    if len(train) < 2 or len(dev) < 1:
        raise DataError(
            f"{cell.data}: only {len(train)} training and {len(dev)} dev texts have at most {L} "
            "tokens; choose a larger --train-len"
        )
    labels = LabelMap.build(splits.train)
    parts: dict[str, list] = {b.label: [] for b in bins}
    dropped = 0
    for ex in splits.test:
        n = length(ex)
        for b in bins:
            if n in b:
                parts[b.label].append(ex)
                break
        else:
            dropped += 1
    how = (
        f"{splits.description}; train/dev texts of at most {L} tokens "
        f"({len(train)} of {len(splits.train)}, {len(dev)} of {len(splits.dev)})"
    )
    data, vocab = _prepared(
        spec,
        tokenizer,
        train,
        dev,
        parts[bins[0].label],
        labels,
        how,
        min_freq=spec.min_freq,
        max_size=spec.max_size,
    )
    encoded = {label: encode_split(part, tokenizer, vocab, labels) for label, part in parts.items()}
    return data, encoded, bins, dropped


def _bin_rows(model: Any, encoded: dict, bins: list[LengthBin], batch_size: int) -> list[dict]:
    from ...tasks.classify.task import evaluate

    out = []
    for b in bins:
        split = encoded[b.label]
        acc = evaluate(model, split, batch_size)["accuracy"] if len(split) else None
        out.append({"bin": b.label, "lo": b.lo, "hi": b.hi, "n": len(split), "accuracy": acc})
    return out


def train_extrapolation_cell(
    cell: Any, options: Any, run_dir: str, callback: Any = None
) -> dict[str, Any]:
    """Train one extrapolation cell from scratch and score every length bin."""
    import cplxnet.models as models

    from ...tasks.classify import task as engine

    clear_run_folder(run_dir)  # an interrupted attempt: start again (the data is in memory)
    os.makedirs(os.path.dirname(run_dir), exist_ok=True)
    if cell.data == "synthetic":
        data, encoded, bins, dropped = synthetic_data(options, cell)
    else:
        data, encoded, bins, dropped = length_split_data(cell, options)
    config = cell_config(cell.family, cell.encoding, cell.number, options, max_len=bins[-1].hi)
    topts = engine.TrainOptions(**options.train, seed=cell.seed)
    results = engine.train(
        config, data, run_dir, topts, vectors=options.vectors, quiet=True, callback=callback
    )
    with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as fh:
        fitted = models.config_from_dict(json.load(fh)["model"])
    model = models.build_model(fitted)
    model.load_state_dict(engine.load_checkpoint(os.path.join(run_dir, "best.pt"))["model"])
    model.eval()
    out = result_fields(results)
    out.update(
        train_len=bins[0].hi,
        bins=_bin_rows(model, encoded, bins, topts.eval_batch_size),
        dropped_longer=dropped,
        history=read_history(run_dir),
    )
    return out
