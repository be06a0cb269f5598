"""Students: every registered architecture on real batches, bert_k's copy of the teacher, padding invariance,
paper sizes, and the thesis's embedding options."""

import gzip
import logging

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import DEMO_VOCAB, TINY_BERT, VocabularyOfSize
from torch import nn
from transformers import AutoModel, AutoModelForSequenceClassification, BertTokenizer

from kdflow.students.embeddings import read_word_vectors
from kdflow.students.layers import packed_lstm, unrolled_lstm
from kdflow.students.registry import StudentContext, build_student
from kdflow.students.tokens import WordTokenizer, student_tokenizer, transfer_words
from kdflow.teachers.finetune import build_teacher
from kdflow.training.batching import collate, tokenize
from kdflow.training.hf_models import model_inputs

NUM_LABELS = 3
TINY_ROBERTA = {**TINY_BERT["architecture"], "model_type": "roberta", "max_position_embeddings": 66, "pad_token_id": 0}
TINY_EMBEDDINGS = {"source": "random", "dim": 8}
PAIRS = pd.DataFrame(
    {
        "text_a": ["the movie was good", "a man is not a dog", "the cat was bad"],
        "text_b": ["the film is great", "the dog is a man", "a great cat"],
        "label": [0, 1, 2],
    }
)
SINGLES = pd.DataFrame({"text_a": ["good film", "the dog was not bad at all"], "text_b": [None, None], "label": [1, 0]})


def save_teacher(directory, architecture):
    model, tokenizer = build_teacher({**TINY_BERT, "architecture": architecture}, NUM_LABELS)
    model.save_pretrained(directory / "model")
    tokenizer.save_pretrained(directory / "model")
    return directory


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(vocab=str(DEMO_VOCAB), do_lower_case=True)


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory):
    torch.manual_seed(0)
    return save_teacher(tmp_path_factory.mktemp("bert"), {**TINY_BERT["architecture"], "num_hidden_layers": 3})


@pytest.fixture(scope="module")
def roberta_dir(tmp_path_factory):
    torch.manual_seed(1)
    return save_teacher(tmp_path_factory.mktemp("roberta"), TINY_ROBERTA)


@pytest.fixture(scope="module")
def context(tokenizer, teacher_dir):
    return StudentContext(NUM_LABELS, tokenizer, str(teacher_dir))


def batch_of(frame, tokenizer):
    split = tokenize(frame, tokenizer, max_length=32, labelled=True)
    return collate(split, np.arange(len(frame)), regression=False)


# (spec, layer widths, names of the frozen parameters); the tiny teacher is 32 wide with 3 layers
TINY_BERT_S = dict(hidden_size=12, num_hidden_layers=2, num_attention_heads=2, intermediate_size=24)
STATIC = {**TINY_EMBEDDINGS, "mode": "static"}
STUDENTS = [
    pytest.param({"type": "bert_k", "layers": 2}, [32, 32], [], id="bert_k"),
    pytest.param(
        {"type": "hf", "architecture": {**TINY_BERT["architecture"], "hidden_size": 16}}, [16, 16], [], id="hf"
    ),
    pytest.param({"type": "hf", "architecture": TINY_ROBERTA}, [32, 32], [], id="hf-roberta"),
    pytest.param({"type": "bert_s", **TINY_BERT_S, "embeddings": {"source": "random"}}, [12, 12], [], id="bert_s"),
    pytest.param(
        {"type": "bert_s", "num_hidden_layers": 1, "embeddings": {"source": "teacher", "mode": "multichannel"}},
        [204],
        ["model.bert.embeddings.word_embeddings.channels.0.weight"],
        id="bert_s-teacher-multichannel",
    ),
    pytest.param(
        {"type": "bilstm", "layers": 2, "hidden_size": 16, "embeddings": TINY_EMBEDDINGS}, [16, 16], [], id="bilstm"
    ),
    pytest.param(
        {"type": "bilstm_s", "lstm_size": 10, "fc_size": 12}, [20, 12], ["embed.channels.0.weight"], id="bilstm_s"
    ),
    pytest.param(
        {"type": "bilstm_s", "layers": 2, "lstm_size": 6, "fc_size": 5, "embeddings": STATIC},
        [12, 12, 5],
        ["embed.channels.0.weight"],
        id="bilstm_s-2-layers-static",
    ),
    pytest.param({"type": "gated_cnn", "hidden_size": 16, "embeddings": TINY_EMBEDDINGS}, [16] * 4, [], id="gated_cnn"),
]


@pytest.mark.parametrize("spec, widths, frozen", STUDENTS)
def test_student_forwards_real_batches_and_trains_exactly_its_trainable_parameters(
    spec, widths, frozen, context, tokenizer
):
    torch.manual_seed(0)
    student = build_student(spec, context)
    for frame in (PAIRS, SINGLES):
        out = student(batch_of(frame, tokenizer))
        assert out.logits.shape == (len(frame), NUM_LABELS)
        assert [layer.shape for layer in out.layers] == [(len(frame), width) for width in widths]

    # logits and layers together, as distillation uses them: intermediate attention pools only feed the layers
    student.zero_grad()
    sum(output.square().sum() for output in [out.logits, *out.layers]).backward()
    named = dict(student.named_parameters())
    assert sorted(name for name, p in named.items() if not p.requires_grad) == frozen
    no_gradient = [name for name, p in named.items() if p.requires_grad and (p.grad is None or not p.grad.any())]
    assert no_gradient == []
    assert all(named[name].grad is None for name in frozen)



@pytest.mark.parametrize("spec, widths, frozen", STUDENTS)
def test_a_batch_padded_to_its_length_bucket_gives_every_student_its_unpadded_outputs(spec, widths, frozen, context,
                                                                                      tokenizer):
    torch.manual_seed(0)
    student = build_student(spec, context).eval()
    split = tokenize(PAIRS, tokenizer, max_length=32, labelled=True)
    shortest = collate(split, np.arange(len(PAIRS)), regression=False)
    bucketed = collate(split, np.arange(len(PAIRS)), regression=False, length_buckets=2)  # 16 or 32 tokens
    assert bucketed["input_ids"].shape[1] > shortest["input_ids"].shape[1]  # it really pads further
    with torch.no_grad():
        a, b = student(shortest), student(bucketed)
    torch.testing.assert_close(b.logits, a.logits, rtol=0, atol=1e-5)
    for layer_shortest, layer_bucketed in zip(a.layers, b.layers, strict=True):
        torch.testing.assert_close(layer_bucketed, layer_shortest, rtol=0, atol=1e-5)

def test_bert_k_copies_the_teachers_first_layers_and_reproduces_their_hidden_states(context, teacher_dir, tokenizer):
    student = build_student({"type": "bert_k", "layers": 2}, context).eval()
    teacher = AutoModelForSequenceClassification.from_pretrained(teacher_dir / "model").eval()
    teacher_weights = teacher.state_dict()
    student_weights = student.model.state_dict()
    assert student.model.config.num_hidden_layers == 2 and not any("layer.2." in name for name in student_weights)
    assert set(student_weights) == {name for name in teacher_weights if "layer.2." not in name}  # head included
    assert all(torch.equal(weight, teacher_weights[name]) for name, weight in student_weights.items())

    batch = batch_of(PAIRS, tokenizer)
    with torch.no_grad():
        layers = student(batch).layers
        hidden = teacher(**model_inputs(teacher, batch), output_hidden_states=True).hidden_states
    for j, layer in enumerate(layers, start=1):
        torch.testing.assert_close(layer, hidden[j][:, 0], rtol=0, atol=1e-6)


def test_bert_k_from_a_roberta_checkpoint_copies_its_base_and_starts_a_fresh_head(context, roberta_dir, tokenizer):
    torch.manual_seed(0)
    student = build_student({"type": "bert_k", "layers": 1, "init_from": str(roberta_dir / "model")}, context).eval()
    source = AutoModel.from_pretrained(roberta_dir / "model").eval()
    source_weights = source.state_dict()
    base = student.model.base_model.state_dict()
    assert student.model.config.model_type == "roberta" and not any("layer.1." in name for name in base)
    assert all(torch.equal(weight, source_weights[name]) for name, weight in base.items())
    trained_head = AutoModelForSequenceClassification.from_pretrained(roberta_dir / "model").classifier
    assert not torch.equal(student.model.classifier.out_proj.weight, trained_head.out_proj.weight)

    batch = batch_of(PAIRS, tokenizer)
    with torch.no_grad():
        layers = student(batch).layers
        hidden = source(**model_inputs(source, batch), output_hidden_states=True).hidden_states
    assert len(layers) == 1
    torch.testing.assert_close(layers[0], hidden[1][:, 0], rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "bilstm", "layers": 2, "hidden_size": 16, "embeddings": TINY_EMBEDDINGS},
        {"type": "bilstm_s", "layers": 2, "lstm_size": 8, "fc_size": 6},
        {"type": "gated_cnn", "hidden_size": 16, "kernel_width": 5, "embeddings": TINY_EMBEDDINGS},
    ],
    ids=lambda spec: spec["type"],
)
def test_padding_does_not_change_a_recurrent_or_convolutional_students_output(spec, context, tokenizer):
    torch.manual_seed(0)
    student = build_student(spec, context).eval()
    frame = pd.DataFrame(
        {"text_a": ["good film", "the dog was not bad at all , the cat was"], "text_b": None, "label": 0}
    )
    padded = batch_of(frame, tokenizer)
    alone = batch_of(frame.iloc[:1], tokenizer)
    assert padded["attention_mask"][0].sum() < padded["input_ids"].shape[1]  # the short one really is padded
    with torch.no_grad():
        a, b = student(alone), student(padded)
    torch.testing.assert_close(b.logits[:1], a.logits, rtol=0, atol=1e-6)
    for layer_alone, layer_padded in zip(a.layers, b.layers, strict=True):
        torch.testing.assert_close(layer_padded[:1], layer_alone, rtol=0, atol=1e-6)



@pytest.mark.parametrize("layers, bidirectional", [(1, True), (2, True), (2, False)])
def test_the_unrolled_lstm_that_torch_compile_traces_gives_the_packed_lstms_outputs_states_and_gradients(
        layers, bidirectional):
    torch.manual_seed(0)
    lstm = nn.LSTM(6, 5, layers, batch_first=True, bidirectional=bidirectional)
    lengths = torch.tensor([7, 3, 1, 5])
    mask = torch.arange(7) < lengths[:, None]
    states = torch.randn(4, 7, 6, requires_grad=True)
    results = []
    for form in (lambda: packed_lstm(lstm, states, mask, lengths), lambda: unrolled_lstm(lstm, states, mask)):
        lstm.zero_grad()
        states.grad = None
        outputs, final = form()
        (outputs.square().sum() + final.sin().sum()).backward()
        results.append((outputs, final, states.grad, [p.grad for p in lstm.parameters()]))
    (packed_out, packed_final, packed_input_grad, packed_grads), (out, final, input_grad, grads) = results
    assert torch.equal(out[~mask], torch.zeros_like(out[~mask]))  # pads are zero, as the packed form's
    torch.testing.assert_close(out, packed_out, rtol=0, atol=1e-6)
    torch.testing.assert_close(final, packed_final, rtol=0, atol=1e-6)
    torch.testing.assert_close(input_grad, packed_input_grad, rtol=0, atol=1e-5)
    for grad, packed_grad in zip(grads, packed_grads, strict=True):
        torch.testing.assert_close(grad, packed_grad, rtol=0, atol=1e-5)

def non_embedding_parameters(model: nn.Module) -> int:
    """Parameters outside embedding matrices, as the thesis counts model size (§4.3.3 footnote 8)."""
    return sum(
        p.numel()
        for module in model.modules()
        if not isinstance(module, nn.Embedding)
        for p in module.parameters(recurse=False)
    )


@pytest.mark.parametrize(
    "spec, total",
    [({"type": "bilstm"}, 25_479_938), ({"type": "gated_cnn"}, 23_554_298)],
    ids=["bilstm", "gated_cnn"],
)
def test_universal_kd_students_have_about_25m_parameters_with_bert_vocabulary(spec, total):
    student = build_student(spec, StudentContext(2, VocabularyOfSize(30522)))
    count = sum(p.numel() for p in student.parameters())
    assert count == total and abs(count - 25e6) <= 0.15 * 25e6


@pytest.mark.parametrize(
    "spec, num_labels, size",
    [
        ({"type": "bilstm_s", "embeddings": {"source": "random", "dim": 300}}, 2, 2_406_002),
        ({"type": "bilstm_s", "embeddings": {"source": "random", "dim": 1024}}, 57, 5_903_257),
        ({"type": "bert_s", "embeddings": {"source": "random"}}, 2, 2_417_888),
    ],
    ids=["lstm_s-sst2-word2vec", "lstm_s-sara-wordpieces", "bert_s-sst2"],
)
def test_thesis_students_match_table_5_2_sizes(spec, num_labels, size, tokenizer):
    """Table 5.2, trainable non-embedding parameters: LSTM_S 2.41M on SST-2 (300-wide word2vec, multichannel), 5.90M
    on Sara (1024-wide wordpieces, multichannel, 57 intents); BERT_S 2.42M on SST-2."""
    assert non_embedding_parameters(build_student(spec, StudentContext(num_labels, tokenizer))) == size


# Thesis §6.1 (Figs. 6.3, C.1): students trained from scratch, the config's lstm_s_scratch and bert_s_scratch
SCRATCH_LSTM_S = {"type": "bilstm_s", "embeddings": {"source": "random", "dim": 64, "mode": "multichannel"}}
SCRATCH_BERT_S = {"type": "bert_s", "embeddings": {"source": "random", "dim": 64, "init": "normal"}}


def test_from_scratch_lstm_s_draws_its_vectors_from_u_025_and_bert_s_from_n_0_002():
    vocabulary = VocabularyOfSize(5000)  # 320,000 draws per matrix
    torch.manual_seed(0)
    frozen, trainable = (channel.weight for channel in build_student(SCRATCH_LSTM_S, StudentContext(2, vocabulary)).embed.channels)
    assert torch.equal(frozen, trainable)  # multichannel: both copies start from one draw, as in the thesis's code
    assert frozen.min() >= -0.25 and frozen.max() <= 0.25 and frozen.min() < -0.2499 and frozen.max() > 0.2499
    assert frozen.std().item() == pytest.approx(0.25 / 3**0.5, rel=0.01)  # U(-a, a) has std a / sqrt(3)
    assert abs(frozen.mean().item()) < 1e-3

    bert_s = build_student(SCRATCH_BERT_S, StudentContext(2, vocabulary))
    embedding = bert_s.model.get_input_embeddings()
    (channel,) = embedding.channels
    vectors = channel.weight
    assert vectors.shape == (5000, 64) and embedding.projection.in_features == 64  # projected to d_h = 204
    assert vectors.std().item() == pytest.approx(0.02, rel=0.01) and abs(vectors.mean().item()) < 1e-4
    within = (vectors.abs() <= 0.04).float().mean().item()  # 2 std: 95.45% of a normal, all of a uniform of std 0.02
    assert within == pytest.approx(0.9545, abs=0.002)


def test_normal_init_is_for_random_vectors_only(context):
    with pytest.raises(ValueError, match="init 'normal' is for random vectors"):
        build_student({"type": "bert_s", "embeddings": {"source": "teacher", "init": "normal"}}, context)
    with pytest.raises(ValueError, match="unknown embeddings init 'xavier'"):
        build_student({"type": "bilstm_s", "embeddings": {"source": "random", "dim": 4, "init": "xavier"}}, context)


@pytest.fixture
def vectors_file(tmp_path):
    path = tmp_path / "vectors.txt"
    path.write_text("3 4\nmovie 1 2 3 4\nthe 0.5 0.5 0.5 0.5\nnotaword 9 9 9 9\n")
    return path


def test_word_vectors_land_on_their_tokens_and_coverage_is_logged(vectors_file, tokenizer, context, caplog):
    vocab = tokenizer.get_vocab()
    vectors, found = read_word_vectors(vectors_file, tokenizer)
    assert vectors.shape == (len(tokenizer), 4) and found == 2
    assert vectors[vocab["movie"]].tolist() == [1, 2, 3, 4]
    assert vectors[vocab["the"]].tolist() == [0.5] * 4
    assert vectors[vocab["good"]].abs().max() <= 0.25  # not in the file: U[-0.25, 0.25]

    headerless = vectors_file.with_name("glove.txt")
    headerless.write_text("\n".join(vectors_file.read_text().splitlines()[1:]) + "\n")
    assert read_word_vectors(headerless, tokenizer)[0][vocab["movie"]].tolist() == [1, 2, 3, 4]

    spec = {
        "type": "bilstm_s",
        "lstm_size": 4,
        "fc_size": 4,
        "embeddings": {"source": "file", "path": str(vectors_file)},
    }
    with caplog.at_level(logging.INFO, logger="kdflow"):
        student = build_student(spec, context)
    assert f"2 of {len(tokenizer)} vocabulary tokens" in caplog.text
    frozen, trainable = student.embed.channels  # the default multichannel mode: two copies of the same vectors
    assert frozen.weight[vocab["movie"]].tolist() == trainable.weight[vocab["movie"]].tolist() == [1, 2, 3, 4]


def test_a_malformed_vectors_file_names_its_bad_line(tmp_path, tokenizer):
    path = tmp_path / "bad.txt"
    path.write_text("movie 1 2 3\nthe 1 2\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: expected a word and 3 numbers"):
        read_word_vectors(path, tokenizer)


@pytest.mark.parametrize(
    "spec, error, message",
    [
        ({"type": "transformer_xl"}, KeyError, "unknown student type 'transformer_xl'; known: bert_k, bert_s"),
        ({"type": "bilstm", "hiden_size": 8}, ValueError, r"unknown option\(s\) \['hiden_size'\] for bilstm"),
        ({"type": "bert_k"}, ValueError, "bert_k needs `layers`"),
        ({"type": "bert_k", "layers": 4}, ValueError, "layers=4 but .* has only 3 layers"),
        ({"type": "hf"}, ValueError, "exactly one of `model`"),
        ({"type": "gated_cnn", "kernel_width": 4}, ValueError, "kernel_width must be odd"),
        ({"type": "bilstm", "embeddings": {"source": "glove"}}, ValueError, "unknown embeddings source 'glove'"),
        ({"type": "bilstm", "embeddings": {"mode": "frozen"}}, ValueError, "unknown embeddings mode 'frozen'"),
        ({"type": "bilstm", "embeddings": {"source": "file"}}, ValueError, "needs `path`"),
        ({"type": "bilstm_s", "embeddings": {"source": "teacher", "dim": 300}}, ValueError, "`dim` 300 differs"),
        ({"type": "bilstm", "embeddings": {"size": 8}}, ValueError, r"unknown option\(s\) \['size'\] for embeddings"),
    ],
    ids=lambda value: value["type"] if isinstance(value, dict) else None,
)
def test_unknown_students_and_bad_options_are_clear_errors(spec, error, message, context):
    with pytest.raises(error, match=message):
        build_student(spec, context)


def test_students_that_need_the_teacher_say_so(tokenizer):
    with pytest.raises(ValueError, match="needs the fine-tuned teacher"):
        build_student({"type": "bert_k", "layers": 1}, StudentContext(NUM_LABELS, tokenizer))


# Word-level students and LSTM_S's input (thesis §4.3.3-4.3.4; kdflow.students.tokens)
WORDS_FRAME = pd.DataFrame(
    {"text_a": ["The movie, THE film!", "Café's great", "a film the END"], "text_b": None}
)
WORD_VECTORS = {"the": [1, 2, 3, 4], "film": [0.5, 0.5, 0.5, 0.5], "great": [-1, 0, 1, 2], "unused": [9, 9, 9, 9]}


def test_transfer_words_are_lower_cased_basic_tokens_most_frequent_first():
    words = transfer_words(WORDS_FRAME)
    # counts: the 3, film 2, "," "!" "'" a cafe end great movie s 1 (accents stripped, punctuation split off)
    assert words == ["the", "film", "!", "'", ",", "a", "cafe", "end", "great", "movie", "s"]
    assert transfer_words(WORDS_FRAME.iloc[::-1]) == words  # whatever the order of the examples
    assert transfer_words(pd.DataFrame({"text_a": ["A cat"], "text_b": ["the cat"]})) == ["cat", "a", "the"]

    plain, marked = WordTokenizer(words, markers=False), WordTokenizer(words, markers=True)
    assert [plain.get_vocab()[t] for t in ("<unk>", "<pad>", "the")] == [0, 1, 2] and len(plain) == len(words) + 2
    assert [marked.get_vocab()[t] for t in ("<cls>", "<sep>", "the")] == [2, 3, 4] and len(marked) == len(words) + 4
    assert plain.pad_token_id == marked.pad_token_id == 1
    assert plain(["The unseen FILM"])["input_ids"] == [[2, 0, 3]]  # an unseen word reads as <unk>


def test_word_level_bert_s_reads_cls_and_sep_and_truncates_longest_first():
    tokenizer = WordTokenizer(transfer_words(WORDS_FRAME), markers=True)
    the, film, a = (tokenizer.get_vocab()[word] for word in ("the", "film", "a"))
    encoded = tokenizer(["the film", "a"], [None, "the film the"], truncation=True, max_length=6)
    assert encoded["input_ids"] == [[2, the, film, 3], [2, a, 3, the, film, 3]]  # b loses its last word
    assert encoded["token_type_ids"] == [[0] * 4, [0, 0, 0, 1, 1, 1]]


@pytest.fixture
def word_context(tokenizer, teacher_dir):
    return StudentContext(NUM_LABELS, tokenizer, str(teacher_dir), words=transfer_words(WORDS_FRAME))


@pytest.fixture
def word_vectors_file(tmp_path):
    path = tmp_path / "vectors.txt"
    lines = [f"{len(WORD_VECTORS)} 4"] + [" ".join([word, *map(str, v)]) for word, v in WORD_VECTORS.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def word_lstm(context, path, **options):
    spec = {"type": "bilstm_s", "lstm_size": 4, "fc_size": 4, "tokens": "words",
            "embeddings": {"source": "file", "path": str(path)}, **options}
    return build_student(spec, context)


def test_word_vectors_land_on_their_words_and_the_rest_are_seeded_uniform(word_context, word_vectors_file):
    torch.manual_seed(0)
    student = word_lstm(word_context, word_vectors_file)
    vocab = student.tokenizer.tokenizer.get_vocab()
    frozen = student.embed.channels[0].weight
    for word, vector in WORD_VECTORS.items():
        if word in vocab:
            assert frozen[vocab[word]].tolist() == vector
    unseen = [vocab[word] for word in vocab if word not in WORD_VECTORS]  # <unk>, <pad>, cafe, ...
    assert frozen[unseen].abs().max() <= 0.25 and frozen[unseen].unique().numel() == len(unseen) * 4

    torch.manual_seed(0)
    assert torch.equal(word_lstm(word_context, word_vectors_file).embed.channels[0].weight, frozen)
    torch.manual_seed(1)
    other = word_lstm(word_context, word_vectors_file).embed.channels[0].weight
    assert not torch.equal(other[unseen], frozen[unseen]) and torch.equal(other[vocab["the"]], frozen[vocab["the"]])


def test_word2vec_binary_and_gzipped_files_read_as_the_text_file(word_context, word_vectors_file, tmp_path):
    binary = tmp_path / "vectors.bin"
    with open(binary, "wb") as out:
        out.write(f"{len(WORD_VECTORS)} 4\n".encode())
        for word, vector in WORD_VECTORS.items():  # word2vec's writer: word, space, float32s, newline
            out.write(word.encode() + b" " + np.asarray(vector, dtype="<f4").tobytes() + b"\n")
    zipped = tmp_path / "vectors.bin.gz"
    zipped.write_bytes(gzip.compress(binary.read_bytes()))
    tokenizer = WordTokenizer(word_context.words, markers=False)
    torch.manual_seed(0)
    expected = read_word_vectors(word_vectors_file, tokenizer)
    for path in (binary, zipped):
        torch.manual_seed(0)
        vectors, found = read_word_vectors(path, tokenizer)
        assert found == expected[1] == 3 and torch.equal(vectors, expected[0])


def test_multichannel_words_train_only_their_trainable_copy(word_context, word_vectors_file):
    torch.manual_seed(0)
    student = word_lstm(word_context, word_vectors_file)
    frozen, trainable = student.embed.channels
    before = frozen.weight.clone(), trainable.weight.clone()
    optimiser = torch.optim.SGD(student.parameters(), lr=0.1)
    batch = batch_of(WORDS_FRAME.assign(label=0), student.tokenizer)
    student(batch).logits.square().sum().backward()
    optimiser.step()
    assert not frozen.weight.requires_grad and frozen.weight.grad is None and torch.equal(frozen.weight, before[0])
    used = batch["input_ids"][batch["attention_mask"].bool()].unique()
    changed = (trainable.weight != before[1]).any(dim=1).nonzero().flatten()
    assert torch.equal(changed, used)  # exactly the rows of the words the batch read


def test_lstm_s_reads_whole_sentences_without_cls_and_sep(context, tokenizer, word_context, word_vectors_file):
    long = pd.DataFrame({"text_a": [" ".join(["good film"] * 40), ""], "text_b": None, "label": 0})
    student = build_student({"type": "bilstm_s", "layers": 2, "lstm_size": 4, "fc_size": 4}, context)
    assert student.lstm.dropout == 0  # none between stacked layers
    split = tokenize(long, student_tokenizer(student, tokenizer), max_length=32, labelled=True)
    assert split.input_ids[0] == tokenizer(long["text_a"][0], add_special_tokens=False)["input_ids"]
    assert len(split.input_ids[0]) == 80  # not cut at the job's 32
    assert split.input_ids[1] == [tokenizer.unk_token_id]  # an empty sentence reads as one unknown token
    assert student(collate(split, np.arange(2), regression=False)).logits.shape == (2, NUM_LABELS)

    capped = build_student({"type": "bilstm_s", "lstm_size": 4, "fc_size": 4, "max_length": 5}, context)
    assert len(tokenize(long, capped.tokenizer, 32, labelled=True).input_ids[0]) == 5

    words = word_lstm(word_context, word_vectors_file)
    split = tokenize(WORDS_FRAME.assign(label=0), words.tokenizer, max_length=32, labelled=True)
    vocab = words.tokenizer.tokenizer.get_vocab()
    assert split.input_ids[0] == [vocab[w] for w in ("the", "movie", ",", "the", "film", "!")]
    assert student_tokenizer(build_student({"type": "bert_k", "layers": 1}, context), tokenizer) is tokenizer


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"type": "bilstm_s", "tokens": "characters"}, "unknown tokens 'characters'"),
        ({"type": "bilstm_s", "tokens": "words"}, "teacher's vectors are for its wordpieces"),
        ({"type": "bert_s", "tokens": "words", "embeddings": {"source": "teacher"}}, "for its wordpieces"),
    ],
)
def test_word_level_students_refuse_the_teachers_wordpiece_vectors(spec, message, word_context):
    with pytest.raises(ValueError, match=message):
        build_student(spec, word_context)


def test_a_word_level_student_needs_the_words_of_its_transfer_set(context):
    with pytest.raises(ValueError, match="needs its transfer set's words"):
        build_student({"type": "bilstm_s", "tokens": "words", "embeddings": TINY_EMBEDDINGS}, context)
