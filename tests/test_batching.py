"""Batching: vectorised collation against a row-by-row reference, the length buckets and how many shapes an
epoch has, and the examples' order left as it was."""

import numpy as np
import pytest
import torch

from kdflow.training.batching import EncodedSplit, batches, bucket_lengths, collate, padded_length


def random_split(rng, n, max_length, labelled=True):
    lengths = rng.integers(1, max_length + 1, size=n)
    ids = [list(rng.integers(5, 1000, size=length)) for length in lengths]
    types = [list(rng.integers(0, 2, size=length)) for length in lengths]
    labels = rng.integers(0, 3, size=n) if labelled else None
    return EncodedSplit(ids, types, labels, pad_id=1, max_length=max_length)


def row_by_row(split, indices, width):
    """The padded batch built one row at a time, as kdflow did before collation was vectorised."""
    input_ids = torch.full((len(indices), width), split.pad_id, dtype=torch.long)
    token_type_ids = torch.zeros((len(indices), width), dtype=torch.long)
    attention_mask = torch.zeros((len(indices), width), dtype=torch.long)
    for row, i in enumerate(indices):
        n = len(split.input_ids[i])
        input_ids[row, :n] = torch.tensor(split.input_ids[i])
        token_type_ids[row, :n] = torch.tensor(split.token_type_ids[i])
        attention_mask[row, :n] = 1
    return input_ids, token_type_ids, attention_mask


@pytest.mark.parametrize("buckets", [None, 8, 3])
def test_vectorised_collation_equals_padding_row_by_row(buckets):
    rng = np.random.default_rng(0)
    split = random_split(rng, 50, 40)
    indices = rng.permutation(50)[:17]
    batch = collate(split, indices, regression=False, length_buckets=buckets)
    longest = max(len(split.input_ids[i]) for i in indices)
    width = padded_length(longest, 40, buckets)
    assert batch["input_ids"].shape == (17, width) and width >= longest
    for got, expected in zip((batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]),
                             row_by_row(split, indices, width), strict=True):
        assert got.dtype == torch.long
        assert torch.equal(got, expected)
    assert torch.equal(batch["labels"], torch.as_tensor(split.labels[indices]))
    assert torch.equal(batch["index"], torch.as_tensor(indices))
    assert torch.equal(batch["lengths"], batch["attention_mask"].sum(1))


def test_regression_labels_are_float_and_an_unlabelled_split_has_none():
    rng = np.random.default_rng(1)
    split = random_split(rng, 6, 10)
    assert collate(split, np.arange(6), regression=True)["labels"].dtype == torch.float32
    assert "labels" not in collate(random_split(rng, 6, 10, labelled=False), np.arange(6), regression=False)


def test_bucket_lengths_are_few_multiples_of_eight_ending_at_the_limit():
    assert bucket_lengths(128, 8) == [16, 32, 48, 64, 80, 96, 112, 128]
    assert bucket_lengths(100, 8) == [16, 32, 48, 64, 80, 96, 100]
    assert bucket_lengths(64, 8) == [8, 16, 24, 32, 40, 48, 56, 64]
    assert bucket_lengths(12, 8) == [8, 12]
    assert padded_length(17, 128, 8) == 32 and padded_length(16, 128, 8) == 16 and padded_length(99, 100, 8) == 100
    assert padded_length(17, 128, None) == 17


def test_an_epoch_has_at_most_its_buckets_and_one_last_batch_of_shapes_in_the_order_it_had():
    rng = np.random.default_rng(2)
    split = random_split(rng, 1000, 128)
    shapes, order = set(), []
    for batch in batches(split, 32, False, shuffle=True, generator=np.random.default_rng(3), length_buckets=8):
        shapes.add(tuple(batch["input_ids"].shape))
        order.extend(batch["index"].tolist())
    assert len(shapes) <= 8 + 1  # the last batch has its own row count (1000 = 31 x 32 + 8)
    assert {rows for rows, _ in shapes} == {32, 8}
    unbucketed = [batch["index"].tolist() for batch in
                  batches(split, 32, False, shuffle=True, generator=np.random.default_rng(3))]
    assert order == [i for indices in unbucketed for i in indices]  # which examples share a batch is unchanged
    dynamic = {tuple(batch["input_ids"].shape) for batch in
               batches(split, 32, False, shuffle=True, generator=np.random.default_rng(3))}
    assert len(dynamic) > len(shapes)  # what the buckets replace: a padded length of its own nearly every batch


def test_a_reordered_split_is_its_examples_in_that_order():
    rng = np.random.default_rng(4)
    split = random_split(rng, 9, 12)
    order = np.argsort(split.lengths, kind="stable")
    sorted_split = split.reordered(order)
    assert sorted_split.input_ids == [split.input_ids[i] for i in order]
    assert np.array_equal(sorted_split.labels, split.labels[order])
    assert torch.equal(collate(sorted_split, np.arange(9), False)["input_ids"],
                       collate(split, order, False)["input_ids"])
