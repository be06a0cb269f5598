"""Augmented transfer sets: the generator's text format, the slot-refilling KV-cache sampler, seeded shards,
hygiene, teacher labelling, unlabelled examples in student training, and the statistics."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import DEMO_VOCAB
from safetensors.torch import load_file
from transformers import AutoTokenizer

from kdflow.core.data import TaskData, prepare_task
from kdflow.core.errors import UserError
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.io import input_files
from kdflow.core.tasks import get_task
from kdflow.distillation.distill import distill
from kdflow.teachers.pseudo_heads import train_pseudo_heads
from kdflow.training.batching import batches, tokenize
from kdflow.training.checkpoint import Checkpoint
from kdflow.training.hf_models import load_classifier, model_inputs
from kdflow.training.losses import task_loss
from kdflow.transfer import sampling
from kdflow.transfer.augmentation import (
    HYGIENE_STEPS,
    build_transfer_set,
    distinct_n,
    statistics_document,
    transfer_statistics,
)
from kdflow.transfer.frames import transfer_frame
from kdflow.transfer.generation import (
    SEPARATOR,
    SamplingSettings,
    build_generator,
    encode_examples,
    evaluate_generator,
    finetune_generator,
    first_token_prefixes,
    sample,
)
from kdflow.transfer.labelling import compute_signals
from kdflow.transfer.sampling import decode_samples, sample_shard, shard_size
from kdflow.transfer.unlabelled import UnlabelledTextError, read_unlabelled
from kdflow.workflow.config_files import schema_defaults

CPU = torch.device("cpu")
TINY_GPT2 = {"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 64}
GENERATOR_HP = dict(learning_rate=5e-3, batch_size=16, epochs=4, max_seq_length=32, eval_batch_size=64, log_every=50,
                    weight_decay=1e-3)


@pytest.fixture(scope="module")
def generator():
    torch.manual_seed(0)
    model, tokenizer = build_generator({"architecture": TINY_GPT2, "tokenizer": str(DEMO_VOCAB)})
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def small_vocab_generator(tmp_path_factory):
    """A generator over 12 tokens: end-of-text is likely enough that most samples finish."""
    vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d", "e"]) + "\n")
    torch.manual_seed(0)
    model, tokenizer = build_generator({"architecture": TINY_GPT2, "tokenizer": str(vocab)})
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def trained_generator(separable, tmp_path_factory):
    out = tmp_path_factory.mktemp("generator")
    report = finetune_generator(separable, {"architecture": TINY_GPT2, "tokenizer": str(DEMO_VOCAB)},
                                Hyperparameters(**GENERATOR_HP), out, CPU)
    return out, report


def test_the_samplers_defaults_are_the_schemas():
    """The schema states each default; SamplingSettings keeps its own for direct callers (the rule passes every
    value from the validated config), so they must agree."""
    defaults = {field.name: field.default for field in dataclasses.fields(SamplingSettings)}
    assert defaults == {name: value for name, value in schema_defaults("generation", "sampling").items()
                        if name in defaults}


def test_greedy_slot_refilling_sampler_matches_generate_one_at_a_time(generator):
    """Per-slot masks and positions over a shared cache: refilled slots decode exactly as a lone sequence."""
    model, tokenizer = generator
    bos = tokenizer.bos_token_id
    prefixes = [[bos, t] for t in range(100, 111)] + [[bos]] + [[bos, 7, 8, 9]]
    settings = SamplingSettings(max_length=16, temperature=0, batch_size=3)  # 13 prefixes through 3 slots
    results = sample(model, prefixes, tokenizer.eos_token_id, settings, torch.Generator().manual_seed(0), CPU)
    for prefix, (tokens, _) in zip(prefixes, results):
        alone = model.generate(torch.tensor([prefix]), do_sample=False, max_length=16,
                               eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        assert tokens == alone[0].tolist()


def test_sampled_sequences_stop_at_end_of_text_or_max_length(small_vocab_generator):
    model, tokenizer = small_vocab_generator
    eos = tokenizer.eos_token_id
    settings = SamplingSettings(max_length=40, batch_size=8)
    results = sample(model, [[tokenizer.bos_token_id]] * 50, eos, settings, torch.Generator().manual_seed(0), CPU)
    finished = [tokens for tokens, done in results if done]
    assert len(finished) > 25
    for tokens, done in results:
        if done:
            assert tokens[-1] == eos and eos not in tokens[1:-1]  # the first end-of-text ends it
        else:
            assert len(tokens) == 40 and eos not in tokens[1:]


def test_sampling_settings_restrict_the_next_token(small_vocab_generator):
    model, tokenizer = small_vocab_generator
    prefixes = [[tokenizer.bos_token_id]] * 20
    with torch.no_grad():
        first = model(torch.tensor([[tokenizer.bos_token_id]])).logits[0, -1]
    top2 = set(first.topk(2).indices.tolist())
    results = sample(model, prefixes, tokenizer.eos_token_id, SamplingSettings(max_length=2, top_k=2, batch_size=8),
                     torch.Generator().manual_seed(0), CPU)
    assert {tokens[1] for tokens, _ in results} <= top2
    results = sample(model, prefixes, tokenizer.eos_token_id, SamplingSettings(max_length=2, top_p=1e-6, batch_size=8),
                     torch.Generator().manual_seed(0), CPU)
    assert {tokens[1] for tokens, _ in results} == {int(first.argmax())}


def test_pairs_are_joined_with_the_separator_and_split_on_it(generator):
    _, tokenizer = generator
    frame = pd.DataFrame({"text_a": ["the cat sat"], "text_b": ["a dog ran"]})
    (tokens,) = encode_examples(frame, tokenizer, 32)
    sep = tokenizer.convert_tokens_to_ids(SEPARATOR)
    assert tokens[0] == tokenizer.bos_token_id and tokens[-1] == tokenizer.eos_token_id and tokens.count(sep) == 1
    decoded = decode_samples([(tokens, True), (tokens[:3], False), (tokens[:-1] + [sep, 5, tokenizer.eos_token_id], True)],
                             tokenizer)
    assert decoded.loc[0, ["text_a", "text_b", "separators"]].tolist() == ["the cat sat", "a dog ran", 1]
    assert pd.isna(decoded.loc[1, "text_b"]) and decoded.loc[1, "separators"] == 0 and not decoded.loc[1, "finished"]
    assert decoded.loc[2, "separators"] == 2


def test_first_token_prefixes_follow_train_first_tokens():
    sequences = [[0, 5, 9, 1]] * 3 + [[0, 6, 1]] + [[0, 1]]  # the empty sentence has no first token
    prefixes = first_token_prefixes(sequences, 4000, np.random.default_rng(0))
    firsts = np.array([p[1] for p in prefixes])
    assert all(p[0] == 0 for p in prefixes) and set(firsts) == {5, 6}
    assert abs((firsts == 5).mean() - 0.75) < 0.03


def test_generator_fine_tuning_lowers_held_out_perplexity(trained_generator, separable, tmp_path):
    out, record = trained_generator
    assert record["dev_perplexity"] < 20 < record["dev_perplexity_before"]  # 10 words, 2-3 likely at each position
    assert json.loads((out / "model" / "training.json").read_text())["history"] == record["history"]
    assert not (out / "metrics.json").exists()  # the evaluation is a job of its own
    report = evaluate_generator(separable, out / "model", tmp_path, CPU)
    assert report["dev_perplexity"] == pytest.approx(record["dev_perplexity"], rel=1e-5)  # the kept model, again
    assert json.loads((tmp_path / "metrics.json").read_text())["best_epoch"] == record["best_epoch"]
    assert (tmp_path / "curves.parquet").exists()
    assert (out / "model" / "config.json").is_file()


def test_a_shard_is_reproduced_by_its_seed_and_shards_differ(separable, trained_generator, tmp_path):
    generator_dir = trained_generator[0] / "model"
    settings = SamplingSettings(max_length=24, batch_size=8)

    def shard(index, name):
        sample_shard(separable, generator_dir, index, 3, 40, 7, "first_token", settings, CPU, tmp_path / name)
        return pd.read_parquet(tmp_path / name)

    first, again, other = shard(1, "a.parquet"), shard(1, "b.parquet"), shard(2, "c.parquet")
    pd.testing.assert_frame_equal(first, again)
    assert len(first) == shard_size(40, 3, 1) == 13 and len(other) == 13
    assert not first["text_a"].equals(other["text_a"])
    assert [shard_size(40, 3, i) for i in range(3)] == [14, 13, 13]
    sample_shard(separable, generator_dir, 0, 3, 40, 7, "bos", settings, CPU, tmp_path / "bf16.parquet", "bfloat16")
    assert len(pd.read_parquet(tmp_path / "bf16.parquet")) == 14


def test_a_killed_shard_resumes_from_its_chunks_with_the_same_sentences(separable, trained_generator, tmp_path,
                                                                       monkeypatch):
    generator_dir = trained_generator[0] / "model"
    settings = SamplingSettings(max_length=24, batch_size=1)  # chunks of CHUNK_SLOTS = 16 prefixes: 3 chunks

    def shard(name, checkpoint=None):
        sample_shard(separable, generator_dir, 0, 1, 40, 7, "first_token", settings, CPU, tmp_path / name,
                     checkpoint=checkpoint)
        return pd.read_parquet(tmp_path / name)

    uninterrupted = shard("uninterrupted.parquet")
    calls = []

    def killed_in_the_third_chunk(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return sample(*args)

    monkeypatch.setattr(sampling, "sample", killed_in_the_third_chunk)
    path = tmp_path / "shard.ckpt"
    with pytest.raises(KeyboardInterrupt):
        shard("killed.parquet", Checkpoint(path, "shard", every_minutes=None, every_steps=1))
    assert not (tmp_path / "killed.parquet").exists()
    calls.clear()
    resumed = shard("resumed.parquet", Checkpoint(path, "shard", every_minutes=None, every_steps=1))
    assert len(calls) == 1  # the third chunk alone
    pd.testing.assert_frame_equal(resumed, uninterrupted)


@pytest.fixture
def pair_task(tmp_path):
    directory = tmp_path / "RTE"
    directory.mkdir()
    header = "index\tsentence1\tsentence2\tlabel"
    rows = {"train": ["0\tA man runs.\tA person moves.\tentailment", "1\tIt rains.\tIt is dry.\tnot_entailment"],
            "dev": ["0\tThe sky is blue.\tThe sky has a colour.\tentailment"]}
    for split, lines in rows.items():
        (directory / f"{split}.tsv").write_text("\n".join([header, *lines]) + "\n")
    (directory / "test.tsv").write_text("index\tsentence1\tsentence2\n0\tDogs bark.\tCats meow.\n")
    prepare_task(get_task("rte"), directory, tmp_path / "data")
    return TaskData.load(tmp_path / "data")


STRICT = dict(keep_unfinished=False, keep_duplicates=False, keep_train_copies=False, keep_dev_test_copies=False)
THESIS = dict(keep_unfinished=True, keep_duplicates=True, keep_train_copies=True, keep_dev_test_copies=False)


@pytest.fixture
def pair_shards(tmp_path):
    generated = pd.DataFrame([
        ("the sky is blue .", "the sky has a colour .", 1),  # dev, as a generator decodes it
        ("Dogs  bark.", "cats meow.", 1),  # test, other spacing and case
        ("a man runs.", "a person moves.", 1),  # a copy of train
        ("new premise", "new hypothesis", 1),
        ("new premise", "new hypothesis", 1),  # a repeat
        ("no separator", None, 0),  # malformed: always dropped
        ("two", "separators", 2),  # malformed: always dropped
        ("", "empty premise", 1),  # empty: always dropped
        ("another premise", "another hypothesis", 1),
    ], columns=["text_a", "text_b", "separators"]).assign(finished=True, tokens=10)
    shards = [tmp_path / "0.parquet", tmp_path / "1.parquet"]
    generated.iloc[:5].to_parquet(shards[0])
    generated.iloc[5:].to_parquet(shards[1])
    return shards


def test_strict_hygiene_drops_evaluation_and_train_copies_repeats_and_malformed_pairs(pair_task, pair_shards,
                                                                                    tmp_path):
    report = build_transfer_set(pair_task, tmp_path / "augmented.parquet", tmp_path / "hygiene.json",
                                shard_paths=pair_shards, generated_hygiene=STRICT)
    assert report["sources"]["generated"] == {
        "read": 9, "wrong_separators": 2, "empty": 1, "unfinished": 0, "in_dev_or_test": 2, "train_copies": 1,
        "duplicates": 1, "kept": 2, "dropped": list(HYGIENE_STEPS["generated"])}
    frame = transfer_frame(pair_task, tmp_path / "augmented.parquet")
    assert frame["idx"].tolist() == [0, 1, 2, 3]
    assert frame["origin"].tolist() == ["train", "train", "generated", "generated"]
    assert frame["label"].tolist() == [0, 1, -1, -1]  # generated examples have no gold label
    assert frame.loc[2:, "text_a"].tolist() == ["new premise", "another premise"]
    assert json.loads((tmp_path / "hygiene.json").read_text()) == report


def test_thesis_hygiene_keeps_train_copies_and_repeats_but_drops_dev_and_test_copies(pair_task, pair_shards,
                                                                                     tmp_path):
    """thesis-original-code.md: no dedup, no filtering; kdflow's default still drops dev/test copies (a leak)."""
    report = build_transfer_set(pair_task, tmp_path / "augmented.parquet", tmp_path / "hygiene.json",
                                shard_paths=pair_shards, generated_hygiene=THESIS)["sources"]["generated"]
    assert (report["in_dev_or_test"], report["train_copies"], report["duplicates"], report["kept"]) == (2, 1, 1, 4)
    assert report["dropped"] == ["wrong_separators", "empty", "in_dev_or_test"]
    frame = transfer_frame(pair_task, tmp_path / "augmented.parquet")
    assert frame.loc[2:, "text_a"].tolist() == ["a man runs.", "new premise", "new premise", "another premise"]
    leaky = build_transfer_set(pair_task, tmp_path / "a.parquet", tmp_path / "h.json", shard_paths=pair_shards,
                               generated_hygiene={**THESIS, "keep_dev_test_copies": True})["sources"]["generated"]
    assert leaky["kept"] == 6 and leaky["dropped"] == ["wrong_separators", "empty"]


def test_unfinished_sequences_can_be_dropped(separable, tmp_path):
    shard = tmp_path / "0.parquet"
    pd.DataFrame({"text_a": ["cut off here", "a whole one"], "text_b": [None, None], "separators": [0, 0],
                  "finished": [False, True], "tokens": [128, 5]}).to_parquet(shard)
    report = build_transfer_set(separable, tmp_path / "a.parquet", tmp_path / "h.json", shard_paths=[shard],
                                generated_hygiene={**THESIS, "keep_unfinished": False})["sources"]["generated"]
    assert report["unfinished"] == 1 and report["kept"] == 1


def test_unlabelled_text_joins_train_and_generated_sentences_each_after_its_hygiene(pair_task, pair_shards, tmp_path):
    """train + unlabelled + generated: the researcher's pairs are read with the task's schema, blank lines and
    dev/test copies dropped and counted; the generated shards keep their own hygiene."""
    folder = tmp_path / "text"
    folder.mkdir()
    (folder / "a.tsv").write_text("Dogs bark.\tCats  meow.\nmy premise\tmy hypothesis\n\n")  # a test copy, a blank
    (folder / "b.tsv").write_text("my premise\tmy hypothesis\r\na man runs.\ta person moves.\n")  # repeat, train copy
    (folder / ".hidden").write_text("not\tread\n")
    files = input_files(folder)
    assert [f.name for f in files] == ["a.tsv", "b.tsv"]
    report = build_transfer_set(pair_task, tmp_path / "set.parquet", tmp_path / "hygiene.json",
                                unlabelled=read_unlabelled(files, pair=True), unlabelled_hygiene=THESIS,
                                shard_paths=pair_shards, generated_hygiene=STRICT)
    assert report["sources"]["unlabelled"] == {"read": 5, "empty": 1, "in_dev_or_test": 1, "train_copies": 1,
                                               "duplicates": 1, "kept": 3, "dropped": ["empty", "in_dev_or_test"]}
    assert report["sources"]["generated"]["kept"] == 2 and report["total"] == 2 + 3 + 2
    frame = transfer_frame(pair_task, tmp_path / "set.parquet")
    assert frame["origin"].tolist() == ["train"] * 2 + ["unlabelled"] * 3 + ["generated"] * 2
    assert frame.loc[2:4, "text_b"].tolist() == ["my hypothesis", "my hypothesis", "a person moves."]
    assert (frame.loc[2:, "label"] == -1).all()


@pytest.mark.parametrize("content, pair, message", [
    (b"one sentence\twith a tab\n", False, r"a\.txt:1: 2 tab-separated fields; each line holds one sentence"),
    (b"premise\thypothesis\nno second text\n", True, r"a\.txt:2: 1 tab-separated fields; each line holds two texts"),
    (b"", False, r"a\.txt: the unlabelled-text file holds no text"),
    (b"\n  \n", False, r"a\.txt: the unlabelled-text file holds no text"),
    (b"fine\ncaf\xe9 latin-1\n", False, r"a\.txt:2: byte 0xe9 at column 4 is not UTF-8"),
])
def test_unlabelled_text_that_does_not_fit_the_task_is_an_error_naming_file_and_line(content, pair, message,
                                                                                    tmp_path):
    (tmp_path / "a.txt").write_bytes(content)
    with pytest.raises(UnlabelledTextError, match=message):
        read_unlabelled(input_files(tmp_path / "a.txt"), pair)


def test_a_missing_or_empty_unlabelled_source_is_named(tmp_path):
    with pytest.raises(UserError, match="missing: no such unlabelled-text file or directory"):
        input_files(tmp_path / "missing", "unlabelled-text")
    with pytest.raises(UserError, match="the unlabelled-text directory holds no files"):
        input_files(tmp_path, "unlabelled-text")


@pytest.fixture(scope="module")
def augmented_set(separable, trained_generator, tmp_path_factory):
    root = tmp_path_factory.mktemp("augmented")
    shards = []
    for index in range(2):
        shards.append(root / f"{index}.parquet")
        sample_shard(separable, trained_generator[0] / "model", index, 2, 60, 0, "first_token",
                     SamplingSettings(max_length=24, batch_size=16), CPU, shards[-1])
    build_transfer_set(separable, root / "augmented.parquet", root / "hygiene.json", shard_paths=shards,
                       generated_hygiene=THESIS)
    return root / "augmented.parquet"


@pytest.fixture(scope="module")
def augmented_signals(separable, trained_teacher, augmented_set, tmp_path_factory):
    """The tiny teacher's signals on the augmented set (pseudo-heads trained for the purpose)."""
    teacher_dir, _ = trained_teacher
    root = tmp_path_factory.mktemp("augmented_signals")
    train_pseudo_heads(separable, teacher_dir, dict(learning_rate=1e-2, batch_size=32, epochs=1, max_seq_length=32),
                       root, CPU)
    compute_signals(transfer_frame(separable, augmented_set), "augmented", teacher_dir, root / "heads.safetensors",
                    [], 32, 64, CPU, root / "signals.safetensors")
    return root / "signals.safetensors"


def test_teacher_labels_of_the_augmented_set_match_a_direct_forward_pass(separable, trained_teacher, augmented_set,
                                                                         augmented_signals):
    teacher_dir, _ = trained_teacher
    frame = transfer_frame(separable, augmented_set)
    signals = load_file(str(augmented_signals))
    assert signals["logits"].shape == (len(frame), 2) and signals["head_logits"].shape[0] == len(frame)
    model = load_classifier(teacher_dir / "model").eval()
    generated = frame[frame["origin"] == "generated"].iloc[:16]
    split = tokenize(generated, AutoTokenizer.from_pretrained(teacher_dir / "model"), 32, False)
    with torch.no_grad():
        direct = model(**model_inputs(model, next(batches(split, 16, False)))).logits
    torch.testing.assert_close(signals["logits"][torch.as_tensor(generated.index.tolist())], direct, atol=1e-5, rtol=1e-4)


def test_a_student_learns_from_an_augmented_set(separable, trained_teacher, augmented_set, augmented_signals, tmp_path):
    teacher_dir, _ = trained_teacher
    frame = transfer_frame(separable, augmented_set)
    hp = Hyperparameters(learning_rate=2e-3, batch_size=16, epochs=1, max_seq_length=32, eval_batch_size=64)
    student = {"type": "bilstm_s", "lstm_size": 10, "fc_size": 12, "embeddings": {"source": "random", "dim": 8}}
    report = distill(separable, augmented_set, teacher_dir, augmented_signals, student, "kd", {"alpha": 0.5, "beta": 0.5},
                     [{"epochs": 1}], hp, tmp_path, CPU)
    assert report["transfer"] == {"set": "augmented", "examples": len(frame), "unlabelled": 0,
                                  "generated": int((frame["origin"] == "generated").sum())}
    assert report["transfer"]["generated"] > 0 and np.isfinite(report["history"][0]["train_loss"])


def test_unlabelled_examples_add_nothing_to_the_hard_label_loss():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [5.0, -5.0]], requires_grad=True)
    loss = task_loss(logits, torch.tensor([0, -1, 1]), regression=False)
    expected = (np.log(1 + np.exp(-2.0)) + np.log(1 + np.exp(10.0))) / 2  # mean over the two labelled rows
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    loss.backward()
    assert torch.all(logits.grad[1] == 0)
    none = task_loss(logits, torch.tensor([-1, -1, -1]), regression=False)
    assert none.item() == 0 and none.requires_grad
    scores = task_loss(torch.tensor([[1.0], [3.0]]), torch.tensor([2.0, float("nan")]), regression=True)
    assert scores.item() == pytest.approx(1.0)


def test_distinct_n_and_statistics(separable):
    assert distinct_n(["a b a b", "a b"], 1) == pytest.approx(2 / 6)
    assert distinct_n(["a b a b", "a b"], 2) == pytest.approx(2 / 4)  # (a b), (b a) among 4 bigrams
    train = separable.split("train").assign(origin="train")
    generated = pd.DataFrame({"idx": 0, "text_a": ["good good good", "bad plot"] * 3, "text_b": None,
                              "label": -1, "origin": "generated"})
    frame = pd.concat([train, generated], ignore_index=True)
    logits = np.zeros((len(frame), 2), dtype=np.float32)
    logits[len(train):, 1] = 1.0  # the teacher calls every generated sentence positive
    hygiene = {"sources": {"generated": {"read": 9, "wrong_separators": 0, "empty": 0, "unfinished": 2,
                                         "in_dev_or_test": 1, "train_copies": 0, "duplicates": 0, "kept": 6,
                                         "dropped": ["wrong_separators", "empty", "in_dev_or_test"]}}}
    stats = transfer_statistics(separable, frame, logits, hygiene, examples=4)
    assert stats["sizes"] == {"train": len(train), "generated": 6}
    assert stats["origins"]["generated"]["teacher_labels"] == {"negative": 0.0, "positive": 1.0}
    assert stats["origins"]["generated"]["words"]["mean"] == pytest.approx(2.5)
    assert stats["origins"]["generated"]["distinct_n_on_6"]["1"] == pytest.approx(3 / 15)
    assert len(stats["examples"]) == 4 and all(e["teacher_label"] == "positive" for e in stats["examples"])
    stats["examples"][0]["text_a"] = "a *great* <b>film</b>"  # generated sentences are text, never markup
    page = statistics_document(stats)
    markdown, html = page.markdown(), page.html()
    assert ("Generated sequences: 9 sampled; wrong separators 0, empty 0, unfinished 2 (kept), in dev or test 1, "
            "train copies 0 (kept), duplicates 0 (kept); 6 kept") in markdown
    assert "| distinct-1 (6 each) | " in markdown and "|  | train | generated |\n|---|---:|---:|" in markdown
    assert r"- a \*great\* \<b\>film\</b\> — *positive* (0.73)" in markdown
    assert "<li>a *great* &lt;b&gt;film&lt;/b&gt; — <em>positive</em> (0.73)</li>" in html


def test_a_generator_step_never_waits_for_the_host(separable, training_syncs, tmp_path):
    """Its causal mask goes to the model in 4-D: transformers then asks nothing of the padding on the host."""
    from kdflow.transfer import generation

    def job(batch_size):
        hp = Hyperparameters(**{**GENERATOR_HP, "epochs": 1, "batch_size": batch_size, "log_every": 10_000,
                                "max_train_examples": 64})
        return lambda: finetune_generator(separable, {"architecture": TINY_GPT2, "tokenizer": str(DEMO_VOCAB)}, hp,
                                          tmp_path / f"generator-{batch_size}", CPU)

    few, few_steps = training_syncs(generation, job(16))
    many, many_steps = training_syncs(generation, job(8))
    assert many_steps == 2 * few_steps and many == few, dict(many - few)
