"""Text-classification data: bundled MR and TREC, file readers, tokenizer, vocabulary, splits,
batching and pretrained word vectors. See ``bundled/PROVENANCE.md`` for the data's origin."""

from .batching import EncodedSplit, batch_indices, collate, encode_split, encode_texts
from .io import BUNDLED, FORMATS, DataError, Dataset, Example, load_dataset, read_examples
from .pipeline import DataSpec, PreparedData, load_splits, prepare_data
from .splits import SPLITS, Splits, split_dataset, stratified_folds, stratified_holdout
from .text import PAD, PAD_ID, UNK, UNK_ID, LabelMap, Tokenizer, Vocab
from .vectors import WordVectors, read_word_vectors

__all__ = [
    "BUNDLED",
    "FORMATS",
    "SPLITS",
    "PAD",
    "PAD_ID",
    "UNK",
    "UNK_ID",
    "DataError",
    "Dataset",
    "Example",
    "load_dataset",
    "read_examples",
    "Tokenizer",
    "Vocab",
    "LabelMap",
    "Splits",
    "split_dataset",
    "stratified_folds",
    "stratified_holdout",
    "EncodedSplit",
    "encode_split",
    "encode_texts",
    "batch_indices",
    "collate",
    "DataSpec",
    "PreparedData",
    "load_splits",
    "prepare_data",
    "WordVectors",
    "read_word_vectors",
]
