"""Named models (kdflow.distillation.named_models) and their per-layer encodings (kdflow.probing.encodings)."""

import json

import numpy as np
import pytest
import torch

from kdflow.core.errors import UserError
from kdflow.core.model_references import reference_kind
from kdflow.distillation.named_models import load_model, student_model
from kdflow.distillation.selection import selected_run
from kdflow.probing.encodings import (
    encode_sentences,
    encoding_layers,
    read_layer,
    write_encodings,
)
from kdflow.probing.senteval import ProbingData, ProbingSplit
from kdflow.students.registry import StudentContext, build_student
from kdflow.teachers.pseudo_heads import pool_layers
from kdflow.workflow.config import check_references

SENTENCES = ["good movie", "a bad , bad film with a long and winding plot", "story", "good music scene ending"]


@pytest.fixture(scope="module")
def teacher_model(trained_teacher):
    out, _ = trained_teacher
    return load_model({"teacher": "t", "task": "sst2"}, {"teacher_model": out / "model"}, num_labels=2)


def test_reference_kinds_and_a_clear_error_for_anything_else():
    assert reference_kind({"pretrained": "bert_large"}) == "pretrained"
    assert reference_kind({"teacher": "t", "task": "sst2"}) == "teacher"
    assert reference_kind({"experiment": "e", "task": "sst2", "student": "s", "method": "kd"}) == "student"
    with pytest.raises(UserError, match="expected one of"):
        reference_kind({"teacher": "t"})


def test_the_selected_run_is_the_selected_points_best_dev_seed():
    selection = {"selections": [
        {"task": "sst2", "student": "s", "method": "kd", "selected": "lr0.01",
         "grid": {"lr0.01": {"dev_by_seed": {"1": 0.7, "2": 0.9, "3": 0.9}}, "lr0.1": {"dev_by_seed": {"1": 1.0}}}}]}
    assert selected_run(selection, "sst2", "s", "kd") == ("lr0.01", "2")
    with pytest.raises(UserError, match="no run of student 's' with method 'pkd'"):
        selected_run(selection, "sst2", "s", "pkd")


def test_max_pooling_ignores_padding():
    states = [torch.tensor([[[1.0, -5.0], [3.0, -1.0], [100.0, 100.0]]])]  # one layer, 3 tokens, last is padding
    mask = torch.tensor([[1, 1, 0]])
    assert pool_layers(states, mask, "max").tolist() == [[[3.0, -1.0]]]
    assert pool_layers(states, mask, "mean").tolist() == [[[2.0, -3.0]]]


def test_encodings_are_in_input_order_whatever_the_batching(teacher_model):
    batched = encode_sentences(teacher_model, SENTENCES, "mean", batch_size=3, max_length=32, device=torch.device("cpu"))
    assert len(batched) == 3  # embeddings + 2 transformer layers
    for i, sentence in enumerate(SENTENCES):
        alone = encode_sentences(teacher_model, [sentence], "mean", 1, 32, torch.device("cpu"))
        for layer, single in zip(batched, alone):
            torch.testing.assert_close(layer[i], single[0], atol=2e-3, rtol=1e-3)  # float16 storage


def test_the_top_layers_cls_encoding_is_what_the_classifier_reads(teacher_model):
    (cls_top,) = encode_sentences(teacher_model, SENTENCES[:1], "cls", 1, 32, torch.device("cpu"))[-1:]
    batch = teacher_model.tokenizer(SENTENCES[:1], return_tensors="pt", return_token_type_ids=True)
    with torch.no_grad():
        hidden = teacher_model.module(**batch, output_hidden_states=True).hidden_states[-1][:, 0]
    torch.testing.assert_close(cls_top.float(), hidden, atol=2e-3, rtol=1e-3)


def probing_data(n=6):
    rng = np.random.default_rng(0)
    split = lambda: ProbingSplit([SENTENCES[i % 4] for i in range(n)], rng.integers(0, 2, n))  # noqa: E731
    return ProbingData(("A", "B"), split(), split(), split())


def test_encoding_cache_holds_every_layer_of_every_split(teacher_model, tmp_path):
    path = tmp_path / "Length.safetensors"
    summary = write_encodings(teacher_model, probing_data(), path, "mean", 4, 32, torch.device("cpu"))
    assert summary["layers"] == 3 and encoding_layers(path) == [0, 1, 2]
    layer = read_layer(path, 2)
    assert {split: x.shape for split, x in layer.items()} == {s: (6, 32) for s in ("train", "dev", "test")}
    assert layer["train"].dtype == np.float32


def test_a_recurrent_student_gives_its_own_layer_vectors_numbered_from_one(teacher_model, tmp_path):
    spec = {"type": "bilstm_s", "lstm_size": 8, "fc_size": 6, "embeddings": {"source": "random", "dim": 10}}
    student = build_student(spec, StudentContext(2, teacher_model.tokenizer))
    path = tmp_path / "Tense.safetensors"
    write_encodings(student_model(student, teacher_model.tokenizer), probing_data(), path, "mean", 4, 32,
                    torch.device("cpu"))
    assert encoding_layers(path) == [1, 2]  # the BiLSTM's final states, then the FC layer
    assert read_layer(path, 1)["dev"].shape == (6, 16) and read_layer(path, 2)["dev"].shape == (6, 6)


def test_config_references_of_models_probing_and_analysis_are_checked():
    config = {
        "teachers": {"t": {"tasks": ["sst2", "stsb"]}},
        "models": {"t_sst2": {"teacher": "t", "task": "sst2"}, "t_cola": {"teacher": "t", "task": "cola"},
                   "t_stsb": {"teacher": "t", "task": "stsb"},
                   "ghost": {"experiment": "nope", "task": "sst2", "student": "s", "method": "kd"}},
        "probing": {"models": ["t_sst2", "missing"]},
        "analysis": {"sst2": {"teacher": "t_sst2", "students": ["t_stsb"]}, "stsb": {"teacher": "t_stsb", "students": []}},
    }
    with pytest.raises(ValueError) as error:
        check_references(config)
    message = str(error.value)
    for expected in ["models.t_cola: teacher 't' is not trained on 'cola'", "models.ghost: unknown experiment 'nope'",
                     "probing.models: unknown model 'missing'", "analysis.sst2: model 't_stsb' is not a fine-tuned model",
                     "analysis.stsb: the analysis needs class predictions"]:
        assert expected in message, expected
    assert json.dumps(config)  # the config itself is left untouched
