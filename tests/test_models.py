"""Named models (kdflow.distillation.named_models) and their per-layer encodings (kdflow.probing.encodings)."""

import json

import numpy as np
import pytest
import torch
from conftest import TINY_BERT

from kdflow.core.errors import UserError
from kdflow.core.model_references import embeddings_source, reference_kind
from kdflow.distillation.named_models import embedding_model, load_model, student_model
from kdflow.distillation.selection import selected_run
from kdflow.probing.encodings import (
    encode_sentences,
    encoding_layers,
    read_layer,
    write_encodings,
)
from kdflow.probing.senteval import ProbingData, ProbingSplit
from kdflow.students.registry import StudentContext, build_student
from kdflow.students.tokens import WordTokenizer
from kdflow.teachers.pseudo_heads import pool_layers
from kdflow.workflow.config_checks import check_references

SENTENCES = ["good movie", "a bad , bad film with a long and winding plot", "story", "good music scene ending"]


@pytest.fixture(scope="module")
def teacher_model(trained_teacher):
    out, _ = trained_teacher
    return load_model({"teacher": "t", "task": "sst2"}, {"teacher_model": out / "model"}, num_labels=2)


def test_reference_kinds_and_a_clear_error_for_anything_else():
    assert reference_kind({"pretrained": "bert_large"}) == "pretrained"
    assert reference_kind({"teacher": "t", "task": "sst2"}) == "teacher"
    assert reference_kind({"experiment": "e", "task": "sst2", "student": "s", "method": "kd"}) == "student"
    assert reference_kind({"embeddings": {"experiment": "e", "task": "sst2", "student": "s"}}) == "embeddings"
    assert embeddings_source({"embeddings": {"pretrained": "t"}}) == "pretrained"
    assert embeddings_source({"embeddings": {"experiment": "e", "task": "sst2", "student": "s"}}) == "student"
    with pytest.raises(UserError, match="expected one of"):
        reference_kind({"teacher": "t"})
    with pytest.raises(UserError, match=r"an `embeddings` reference has the keys \['experiment', 'method', 'student'"):
        embeddings_source({"embeddings": {"experiment": "e", "task": "sst2", "student": "s", "method": "kd"}})


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
                   "ghost": {"experiment": "nope", "task": "sst2", "student": "s", "method": "kd"},
                   "embed_cola": {"embeddings": {"teacher": "t", "task": "cola"}},
                   "embed_ghost": {"embeddings": {"experiment": "nope", "task": "sst2", "student": "s"}},
                   "embed_t": {"embeddings": {"pretrained": "t"}}},
        "probing": {"models": ["t_sst2", "missing"], "thesis": {"models": {"BERT_T[SST-2]": "t_sst2", "BERT_T[CoLA]": "t_cola"},
                                                                 "missing": {"BERT_T[SST-2]": "why"}}},
        "analysis": {"sst2": {"teacher": "t_sst2", "students": ["t_stsb", "embed_t"]},
                     "stsb": {"teacher": "t_stsb", "students": []}},
    }
    with pytest.raises(ValueError) as error:
        check_references(config)
    message = str(error.value)
    for expected in ["models.t_cola: teacher 't' is not trained on 'cola'", "models.ghost: unknown experiment 'nope'",
                     "probing.models: unknown model 'missing'", "analysis.sst2: model 't_stsb' is not a fine-tuned model",
                     "analysis.stsb: the analysis needs class predictions",
                     "models.embed_cola.embeddings: teacher 't' is not trained on 'cola'",
                     "models.embed_ghost.embeddings: unknown experiment 'nope'",
                     "analysis.sst2: model 'embed_t' is not a fine-tuned model",
                     "probing.thesis.models.BERT_T[CoLA]: 't_cola' is not probed",
                     "probing.thesis: 'BERT_T[SST-2]' is both mapped (models) and said to be missing"]:
        assert expected in message, expected
    assert json.dumps(config)  # the config itself is left untouched


# Thesis §6.1, Fig. 6.2: the "embed." baselines, sentences as the mean of their tokens' raw input vectors


def test_an_embedding_model_averages_the_raw_vectors_of_its_tokens_without_special_tokens():
    words = WordTokenizer(["good", "movie", "bad"], markers=True)  # <unk> 0, <pad> 1, <cls> 2, <sep> 3, good 4, ...
    vectors = torch.tensor([[float(i), 10.0 * i] for i in range(len(words))])  # row i = (i, 10 i)
    model = embedding_model(vectors, words)
    sentences = ["good movie", "Bad, unheard", "movie"]
    (layer,) = encode_sentences(model, sentences, "mean", batch_size=2, max_length=32, device=torch.device("cpu"))
    # good (4) and movie (5); bad (6), "," and "unheard" (both <unk>, 0); with <cls>/<sep> the first would be (3.5, 35)
    assert layer.tolist() == [[4.5, 45.0], [2.0, 20.0], [5.0, 50.0]]


def test_embeddings_of_a_pretrained_teacher_are_its_wordpiece_vectors_averaged(tmp_path):
    pretrained = {"spec": TINY_BERT, "seed": 3}
    model = load_model({"embeddings": {"pretrained": "t"}}, {}, 2, pretrained)
    teacher = load_model({"pretrained": "t"}, {}, 2, pretrained)
    table = teacher.module.get_input_embeddings().weight
    sentence = "a bad , bad film with a long and winding plot"
    ids = teacher.tokenizer(sentence, add_special_tokens=False)["input_ids"]
    assert teacher.tokenizer.cls_token_id not in ids and len(ids) > 5
    (layer,) = encode_sentences(model, [sentence], "mean", 1, 32, torch.device("cpu"))
    torch.testing.assert_close(layer[0].float(), table[ids].mean(0), atol=1e-3, rtol=1e-3)  # float16 storage
    assert write_encodings(model, probing_data(), tmp_path / "Tense.safetensors", "mean", 4, 32,
                           torch.device("cpu"))["layers"] == 1
    assert encoding_layers(tmp_path / "Tense.safetensors") == [0]


def test_embeddings_of_a_fine_tuned_teacher_are_its_own_wordpiece_vectors(teacher_model, trained_teacher):
    model = load_model({"embeddings": {"teacher": "t", "task": "sst2"}}, {"teacher_model": trained_teacher[0] / "model"}, 2)
    assert torch.equal(model.module.weight, teacher_model.module.get_input_embeddings().weight)
    assert model.logits is None  # no classifier: probing only


def test_embeddings_of_a_word_level_student_are_its_file_vectors_over_its_transfer_set_words(separable, trained_teacher,
                                                                                             tmp_path):
    vectors_file = tmp_path / "vectors.txt"
    vectors_file.write_text("2 3\ngood 1 2 3\nmovie 3 2 -1\n")
    spec = {"type": "bilstm_s", "lstm_size": 4, "fc_size": 4, "tokens": "words",
            "embeddings": {"source": "file", "path": str(vectors_file)}}  # multichannel: the frozen copy is the raw one
    settings = {"student": spec, "seed": 0, "max_train_examples": None}
    files = {"data": separable.directory, "teacher_model": trained_teacher[0] / "model", "transfer": None}
    model = load_model({"embeddings": {"experiment": "e", "task": "sst2", "student": "lstm_s"}}, files, 2,
                       embeddings=settings)
    assert model.module.weight.shape == (2 + 10, 3)  # <unk>, <pad> and the 10 words of the transfer set
    (layer,) = encode_sentences(model, ["Good movie", "good"], "mean", 2, 32, torch.device("cpu"))
    assert layer.tolist() == [[2.0, 2.0, 1.0], [1.0, 2.0, 3.0]]


def test_embeddings_of_a_wordpiece_student_are_the_vectors_it_starts_from(separable, trained_teacher, teacher_model):
    """BERT_S starts from the fine-tuned teacher's wordpieces (then projects them to d_h): its "embed." baseline."""
    spec = {"type": "bert_s", "num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 2,
            "intermediate_size": 16, "embeddings": {"source": "teacher"}}
    files = {"data": separable.directory, "teacher_model": trained_teacher[0] / "model"}
    model = load_model({"embeddings": {"experiment": "e", "task": "sst2", "student": "bert_s"}}, files, 2,
                       embeddings={"student": spec, "seed": 0, "words": False})
    table = teacher_model.module.get_input_embeddings().weight
    assert torch.equal(model.module.weight, table)  # the teacher's 32-wide vectors, before the projection to 8
    sentence = "good film with a long plot"
    ids = teacher_model.tokenizer(sentence, add_special_tokens=False)["input_ids"]
    (layer,) = encode_sentences(model, [sentence], "mean", 1, 32, torch.device("cpu"))
    torch.testing.assert_close(layer[0].float(), table[ids].mean(0), atol=1e-3, rtol=1e-3)
