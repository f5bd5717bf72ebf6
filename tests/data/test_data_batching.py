"""Encoding, batching (padding at the end, mask True = padding), truncation and word vectors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cplxnet.data import (
    UNK_ID,
    DataError,
    DataSpec,
    Tokenizer,
    Vocab,
    batch_indices,
    collate,
    encode_texts,
    prepare_data,
    read_word_vectors,
)


def test_collate_pads_at_the_end_with_mask_true_on_padding():
    ids, mask = collate([[5, 6, 7], [8], [9, 10]])
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0], [9, 10, 0]]
    assert mask.tolist() == [[False] * 3, [False, True, True], [False, False, True]]
    ids, mask = collate([[5]], pad_to=3)
    assert ids.shape == mask.shape == (1, 3) and mask.tolist() == [[False, True, True]]
    assert ids.dtype == torch.long and mask.dtype == torch.bool


def test_batch_indices_cover_everything_once_and_depend_only_on_seed_and_epoch():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 50, size=1003)
    for bucket in (True, False):
        b = batch_indices(lengths, 32, bucket=bucket, seed=1, epoch=2)
        flat = np.concatenate(b)
        assert sorted(flat.tolist()) == list(range(1003))
        assert all(len(x) <= 32 for x in b)
        again = batch_indices(lengths, 32, bucket=bucket, seed=1, epoch=2)
        assert all(np.array_equal(x, y) for x, y in zip(b, again))
        other = batch_indices(lengths, 32, bucket=bucket, seed=1, epoch=3)
        assert not all(np.array_equal(x, y) for x, y in zip(b, other))


def test_bucketing_reduces_padding():
    lengths = np.random.default_rng(0).integers(1, 60, size=2000)

    def padding(batches):
        return sum(len(b) * lengths[b].max() - lengths[b].sum() for b in batches)

    bucketed = padding(batch_indices(lengths, 32, bucket=True, seed=0))
    plain = padding(batch_indices(lengths, 32, bucket=False, seed=0))
    assert bucketed < 0.2 * plain


def test_last_small_batch_is_merged_for_data_parallel():
    b = batch_indices(np.ones(65), 32, shuffle=False, bucket=False, min_batch=2)
    assert [len(x) for x in b] == [32, 33]
    b = batch_indices(np.ones(66), 32, shuffle=False, bucket=False, min_batch=2)
    assert [len(x) for x in b] == [32, 32, 2]


def test_encode_truncates_only_when_asked_and_names_the_text():
    tok, vocab = Tokenizer(), Vocab.build([["a", "b", "c"]])
    assert encode_texts(["a b c d", "!!"], tok, vocab) == [[2, 3, 4, UNK_ID], [UNK_ID, UNK_ID]]
    assert encode_texts(["a b c"], tok, vocab, max_len=2) == [[2, 3]]
    assert encode_texts([""], tok, vocab) == [[UNK_ID]]  # never an empty sequence
    with pytest.raises(
        DataError,
        match=r"f\.tsv line 4: the text has 3 tokens but the model's "
        r"max_len is 2; pass --max-len N",
    ):
        encode_texts(["a b c"], tok, vocab, max_len=2, truncate=False, where=["f.tsv line 4"])


def test_prepare_data_length_limit_error_and_truncation(tmp_path):
    p = tmp_path / "d.tsv"
    p.write_text(
        "label\ttext\n"
        + "".join(f"{'xy'[i % 2]}\tw{i} " + "v " * (i % 7) + "\n" for i in range(40))
    )
    pattern = r"line \d+: the text has [67] tokens but the model's max_len"
    with pytest.raises(DataError, match=pattern):
        prepare_data(DataSpec(str(p)), model_max_len=5)
    data = prepare_data(DataSpec(str(p), max_len=5), model_max_len=5)
    assert data.max_length() == 5


def test_unseen_label_in_dev_file_is_an_error(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("label\ttext\n" + "".join(f"{'ab'[i % 2]}\tt {i}\n" for i in range(20)))
    dev = tmp_path / "dev.tsv"
    dev.write_text("label\ttext\na\tfine\nc\tnew label\n")
    with pytest.raises(DataError, match=r"dev\.tsv line 3: label 'c' never occurs"):
        prepare_data(DataSpec(str(train), dev=str(dev)))


def test_word_vectors_glove_and_word2vec_header(tmp_path):
    vocab = Vocab.build([["good", "film", "bad", "plot"]])
    glove = tmp_path / "g.txt"
    glove.write_text("good 1 2 3\nFilm 4 5 6\nfilm 7 8 9\nzebra 0 0 0\n<unk> 9 9 9\n")
    wv = read_word_vectors(str(glove), vocab)
    assert wv.dim == 3 and wv.num_found == 2
    assert wv.vectors[vocab.stoi["good"]].tolist() == [1, 2, 3]
    assert wv.vectors[vocab.stoi["film"]].tolist() == [7, 8, 9]  # exact match beats lower-cased
    assert not wv.found[:2].any() and wv.vectors[vocab.stoi["bad"]].abs().sum() == 0
    w2v = tmp_path / "w.txt"
    w2v.write_text("2 2\nBad 1 1\nplot 2 2\n")
    wv = read_word_vectors(str(w2v), vocab)
    assert wv.dim == 2 and wv.num_found == 2 and wv.vectors[vocab.stoi["bad"]].tolist() == [1, 1]


def test_word_vector_errors(tmp_path):
    vocab = Vocab.build([["good"]])
    bad = tmp_path / "bad.txt"
    bad.write_text("good 1 2 3\nfilm 1 2\n")
    pattern = r"bad\.txt line 2: 2 numbers where the file's vectors have 3"
    with pytest.raises(DataError, match=pattern):
        read_word_vectors(str(bad), vocab)
    nan = tmp_path / "nan.txt"
    nan.write_text("good 1 x\n")
    with pytest.raises(DataError, match=r"nan\.txt line 1: numbers that do not parse"):
        read_word_vectors(str(nan), vocab)
    with pytest.raises(DataError, match="file not found; check the --vectors path"):
        read_word_vectors(str(tmp_path / "none.txt"), vocab)
