"""Model size and CPU speed as the thesis's Table 5.2 reports them."""

import math

import pytest
import torch
from conftest import VocabularyOfSize
from torch import nn
from transformers import BertConfig, BertForSequenceClassification

from kdflow.analysis.inference import measure, non_embedding_parameters, time_inference
from kdflow.students.registry import StudentContext, build_student


def student(spec: dict, num_labels: int) -> nn.Module:
    return build_student(spec, StudentContext(num_labels, VocabularyOfSize(100)))


def test_only_embedding_tables_are_left_out():
    model = nn.Sequential(nn.Embedding(10, 4), nn.LayerNorm(4), nn.Linear(4, 3))
    assert non_embedding_parameters(model) == 2 * 4 + 4 * 3 + 3


@pytest.mark.parametrize(
    "dim, num_labels, size",
    [(300, 2, 2_406_002), (1024, 57, 5_903_257)],
    ids=["sst2-word2vec", "sara-wordpieces"],
)
def test_lstm_s_sizes_are_table_5_2s(dim, num_labels, size):
    """BiLSTM 2 x 4 x 300 x (2 dim + 300 + 2) + FC (600 x 400 + 400) + classifier (400 x C + C), over multichannel
    vectors (2 x dim wide): 2.41M on SST-2, 5.90M on Sara."""
    spec = {"type": "bilstm_s", "embeddings": {"source": "random", "dim": dim, "mode": "multichannel"}}
    assert non_embedding_parameters(student(spec, num_labels)) == size


@pytest.mark.parametrize("dim", [204, 600, 1024], ids=["no-projection", "word2vec-multichannel", "wordpieces"])
@pytest.mark.parametrize("num_labels, size", [(2, 2_417_888), (57, 2_429_163)], ids=["sst2", "sara"])
def test_bert_s_size_leaves_out_the_projection_of_its_token_vectors(dim, num_labels, size):
    """5 layers of 475,050 + pooler 41,820 + embeddings' LayerNorm 408 + classifier (204 x C + C): Table 5.2's 2.42M
    (SST-2, 600-wide word2vec) and 2.43M (Sara, 1024-wide wordpieces) whatever the vectors' width."""
    spec = {"type": "bert_s", "embeddings": {"source": "random", "dim": dim}}
    assert non_embedding_parameters(student(spec, num_labels)) == size


def test_bert_large_has_303m_non_embedding_parameters_and_335m_in_all():
    """24 layers of 12,596,224 + pooler 1,049,600 + embeddings' LayerNorm 2,048 + classifier 2,050; the
    embeddings add 31,780,864: Table 5.2's "340M" is the total."""
    config = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
    with torch.device("meta"):  # shapes only: no memory, no initialisation
        model = BertForSequenceClassification(config)
    assert non_embedding_parameters(model) == 303_363_074
    assert sum(p.numel() for p in model.parameters()) == 303_363_074 + 31_780_864


def tiny_batches(sizes):
    return [{"input_ids": torch.ones(n, 5, dtype=torch.long), "attention_mask": torch.ones(n, 5)} for n in sizes]


def test_time_inference_is_a_positive_time_per_example_without_gradients():
    model = nn.Sequential(nn.Embedding(10, 8), nn.Linear(8, 2))
    seen_grad = []

    def forward(batch):
        seen_grad.append(torch.is_grad_enabled())
        return model(batch["input_ids"]).mean(1)

    threads = torch.get_num_threads()
    ms = time_inference(forward, tiny_batches([4, 4, 2]), warmup=2, threads=1)
    assert 0 < ms and math.isfinite(ms)
    assert seen_grad == [False] * 5  # two warm-up runs, then the three batches
    assert torch.get_num_threads() == threads  # the caller's setting is restored


def test_measure_reports_size_speed_and_what_they_were_measured_on():
    model = nn.Sequential(nn.Embedding(10, 8), nn.Linear(8, 2)).train()
    result = measure(model, lambda batch: model(batch["input_ids"]), tiny_batches([256, 256, 10]), threads=1)
    assert not model.training
    assert result["params_millions_non_embedding"] == 18 / 1e6
    assert result["ms_per_example_cpu"] > 0
    assert (result["batch_size"], result["examples"], result["threads"]) == (256, 522, 1)
