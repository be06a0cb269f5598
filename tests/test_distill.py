"""Student training from cached teacher signals: the signals themselves, every student x method pair, stages,
TAKD's assistant chain, and reloading a trained student."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import TINY_BERT
from safetensors.torch import load_file
from transformers import AutoTokenizer

from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.errors import UserError
from kdflow.core.intermediates import DamagedFile
from kdflow.distillation.assistant import compute_assistant_signals
from kdflow.distillation.distill import distill
from kdflow.distillation.methods.registry import available_methods
from kdflow.students.loading import load_distilled
from kdflow.students.tokens import student_tokenizer, transfer_words
from kdflow.teachers.pseudo_heads import load_heads, teacher_outputs, train_pseudo_heads
from kdflow.training.batching import batches, tokenize
from kdflow.training.hf_models import load_classifier, model_inputs
from kdflow.training.loop import EAGER, StepCompiler, subset_indices
from kdflow.transfer.frames import transfer_frame
from kdflow.transfer.labelling import compute_signals
from kdflow.transfer.signals import SIGNALS, SignalCache, register_signal, stored_signals

CPU = torch.device("cpu")
HEADS = dict(learning_rate=1e-2, batch_size=32, epochs=2, warmup_ratio=0.0, weight_decay=0.0, seed=0, max_seq_length=32)
STUDENT_HP = dict(learning_rate=2e-3, batch_size=16, epochs=1, max_seq_length=32, eval_batch_size=64, log_every=50)
TINY_EMBEDDINGS = {"source": "random", "dim": 8}
STUDENTS = {
    "bert_k": {"type": "bert_k", "layers": 2},
    "hf": {"type": "hf", "architecture": {**TINY_BERT["architecture"], "hidden_size": 16}},
    "bert_s": {"type": "bert_s", "hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 2,
               "intermediate_size": 24, "embeddings": {"source": "teacher"}},
    "bilstm": {"type": "bilstm", "layers": 2, "hidden_size": 16, "embeddings": TINY_EMBEDDINGS},
    "bilstm_s": {"type": "bilstm_s", "lstm_size": 10, "fc_size": 12, "embeddings": TINY_EMBEDDINGS},
    "gated_cnn": {"type": "gated_cnn", "layers": 2, "hidden_size": 16, "embeddings": TINY_EMBEDDINGS},
}
# Methods that learn from the teacher's signals (takd learns from an assistant's: tested on its own below).
TEACHER_METHODS = [name for name in available_methods() if name != "takd"]


@pytest.fixture(scope="module")
def teacher(trained_teacher, separable, tmp_path_factory):
    """The trained tiny teacher, its pseudo-heads and its signals on train (every registered signal)."""
    teacher_dir, _ = trained_teacher
    heads_dir = tmp_path_factory.mktemp("heads")
    train_pseudo_heads(separable, teacher_dir, HEADS, heads_dir, CPU)
    signals = heads_dir / "signals.safetensors"
    compute_signals(transfer_frame(separable), "train", teacher_dir, heads_dir / "heads.safetensors", list(SIGNALS), 32,
                    64, CPU, signals)
    return teacher_dir, heads_dir / "heads.safetensors", signals


def run(task, teacher, out, student="bilstm", method="kd", options=None, stages=None, **hp):
    teacher_dir, _, signals = teacher
    hp = Hyperparameters(**{**STUDENT_HP, **hp})
    return distill(task, None, teacher_dir, signals, STUDENTS[student], method, options or {},
                   stages or [{"epochs": hp.epochs}], hp, out, CPU)


def test_signals_match_a_direct_teacher_forward_pass(teacher, separable):
    teacher_dir, heads_path, signals_path = teacher
    signals = load_file(str(signals_path))
    train = separable.split("train")
    np.testing.assert_array_equal(signals["idx"].numpy(), train["idx"].to_numpy())
    assert signals["head_logits"].shape == (len(train), 2, 2) and signals["layers"].shape == (len(train), 2, 32)

    model = load_classifier(teacher_dir / "model").eval()
    heads, pooling = load_heads(heads_path)
    split = tokenize(train, AutoTokenizer.from_pretrained(teacher_dir / "model"), 32, False)
    batch = next(batches(split, 8, False))  # unshuffled: the first 8 rows
    with torch.no_grad():
        direct = model(**model_inputs(model, batch)).logits
    _, pooled = teacher_outputs(model, batch, pooling)
    torch.testing.assert_close(signals["logits"][:8], direct, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(signals["head_logits"][:8], heads(pooled), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(signals["layers"][:8].float(), pooled, atol=1e-2, rtol=1e-2)  # stored in float16


def test_a_file_holds_the_signals_every_method_needs_and_those_on_demand_that_its_methods_need():
    assert stored_signals([]) == stored_signals(["logits", "head_logits"]) == ["logits", "head_logits"]
    assert stored_signals(["layers", "logits"]) == ["logits", "head_logits", "layers"]
    with pytest.raises(UserError, match=r"^unknown teacher signals \['layer'\]; registered: \["):
        stored_signals(["layer"])


def test_a_registered_signal_is_computed_from_the_teacher_pass_and_stored_in_its_dtype(teacher, separable, tmp_path):
    """A signal of the teacher's tokens (docs/development.md's recipe kind): the mean of the top layer's token
    vectors over each example's mask, against the model's own forward pass."""
    teacher_dir, heads_path, _ = teacher

    def token_mean(forward):
        mask = forward.attention_mask[..., None].to(forward.hidden_states[-1].dtype)
        return (forward.hidden_states[-1] * mask).sum(1) / mask.sum(1)

    register_signal("test_token_mean", lambda layers, width, classes: (width,), torch.float16)(token_mean)
    try:
        compute_signals(transfer_frame(separable), "train", teacher_dir, heads_path, ["test_token_mean"], 32, 64, CPU,
                        tmp_path / "signals.safetensors")
        with pytest.raises(ValueError, match="teacher signal 'test_token_mean' is registered twice"):
            register_signal("test_token_mean", lambda layers, width, classes: (width,))(token_mean)
    finally:
        del SIGNALS["test_token_mean"]
    stored = load_file(str(tmp_path / "signals.safetensors"))
    assert set(stored) == {"idx", "logits", "head_logits", "test_token_mean"}
    assert stored["test_token_mean"].dtype == torch.float16 and stored["test_token_mean"].shape == (len(stored["idx"]), 32)
    model = load_classifier(teacher_dir / "model").eval()
    batch = next(batches(tokenize(separable.split("train"), AutoTokenizer.from_pretrained(teacher_dir / "model"), 32,
                                  False), 4, False))
    with torch.no_grad():
        top = model(**model_inputs(model, batch), output_hidden_states=True).hidden_states[-1]
    mask = batch["attention_mask"][..., None].float()
    torch.testing.assert_close(stored["test_token_mean"][:4].float(), (top * mask).sum(1) / mask.sum(1), atol=1e-2,
                               rtol=1e-2)
    cache = SignalCache(tmp_path / "signals.safetensors", CPU, stored["idx"].numpy())
    read = cache[torch.tensor([0, 1])]
    assert read.layers is None and torch.equal(read["test_token_mean"], stored["test_token_mean"][:2].float())


def test_signal_cache_refuses_signals_of_other_examples(teacher, separable):
    _, _, signals = teacher
    idx = separable.split("train")["idx"].to_numpy()
    with pytest.raises(DamagedFile, match="its examples are not the transfer set's"):
        SignalCache(signals, CPU, idx[::-1])


@pytest.mark.parametrize("student", sorted(STUDENTS))
def test_every_student_trains_with_every_method(student, teacher, separable, tmp_path):
    """One optimiser step (16 examples) of each pair, then dev and test predictions from the best state."""
    for method in TEACHER_METHODS:
        out = tmp_path / method
        report = run(separable, teacher, out, student, method, max_train_examples=16)
        assert 0 <= report["scores"]["dev"]["accuracy"] <= 1, (student, method)
        assert [record["epoch"] for record in report["history"]] == [1], (student, method)
        assert np.isfinite(report["history"][0]["train_loss"]), (student, method)
    predictions = pd.read_parquet(out / "predictions.parquet")
    assert set(predictions["split"]) == {"dev", "test"}


def test_kd_from_cached_signals_learns_the_task(teacher, separable, tmp_path):
    report = run(separable, teacher, tmp_path, "bilstm", "kd", {"beta": 1.0}, epochs=3, learning_rate=2e-2,
                 warmup_ratio=0.0)  # no gold labels: the teacher alone
    assert report["scores"]["dev"]["accuracy"] >= 0.9


def test_two_stage_schedule_switches_weights_and_keeps_the_best_dev_state(teacher, separable, tmp_path):
    stages = [{"epochs": 2}, {"epochs": 1, "weights": {"alpha": 1, "beta": 0, "gamma": 0}}]
    report = run(separable, teacher, tmp_path, "bert_k", "universal_kd_il", {"beta": 0.5}, stages, max_train_examples=64)
    assert [(r["stage"], r["epoch"]) for r in report["history"]] == [(1, 1), (1, 2), (2, 1)]
    # each term's training curve: stage 1 is 0.5 kd + 0.5 inter (alpha 0; ce is computed, not weighted), stage 2 ce
    # alone; 64 examples in 4 equal batches, so the term means weigh like the loss's mean over steps
    for record in report["history"][:2]:
        assert record["train_loss"] == pytest.approx(0.5 * record["train_kd"] + 0.5 * record["train_inter"], rel=1e-4)
        assert record["train_ce"] > 0
    assert report["history"][2]["train_loss"] == pytest.approx(report["history"][2]["train_ce"], rel=1e-4)
    assert "train_kd" not in report["history"][2]  # not computed when its weight is 0
    best = max(report["history"], key=lambda r: r["dev_accuracy"])  # first of equals, as the loop keeps it
    assert report["best"] == {"stage": best["stage"], "epoch": best["epoch"]}
    reloaded = load_distilled(tmp_path, teacher[0], separable.num_labels)  # the saved state is the best one
    dev = separable.split("dev")
    tokenizer_dir = teacher[0] / "model"
    split = tokenize(dev, AutoTokenizer.from_pretrained(tokenizer_dir), 32, True)
    with torch.no_grad():
        logits = torch.cat([reloaded(b).logits for b in batches(split, 64, False)])
    accuracy = (logits.argmax(-1).numpy() == split.labels).mean()
    assert accuracy == pytest.approx(report["scores"]["dev"]["accuracy"])
    assert json.loads((tmp_path / "metrics.json").read_text())["stages"] == stages


def test_keep_final_keeps_the_last_stages_final_model(teacher, separable, tmp_path):
    stages = [{"epochs": 1}, {"epochs": 2}]
    report = run(separable, teacher, tmp_path, "bilstm", "kd", stages=stages, max_train_examples=64, keep="final")
    assert report["best"] == {"stage": 2, "epoch": 2}
    assert report["scores"]["dev"]["accuracy"] == pytest.approx(report["history"][-1]["dev_accuracy"])


def test_a_student_whose_loss_turns_nan_ends_its_schedule_and_writes_its_outputs(teacher, separable, loss_turns_nan,
                                                                                 tmp_path):
    stages = [{"epochs": 1}, {"epochs": 2}]  # 4 steps per epoch: step 6 of the job is stage 2's second
    losses = loss_turns_nan(6)
    run(separable, teacher, tmp_path, "bilstm", "kd", stages=stages, max_train_examples=64)
    assert len(losses) == 8 and math.isnan(losses[5])  # read back at the epoch's end, which named step 6
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["diverged"] == {"stage": 2, "epoch": 1, "step": 2, "what": "training loss nan"} and saved["best"] == {"stage": 2, "epoch": 1}
    assert [(r["stage"], r["epoch"]) for r in saved["history"]] == [(1, 1)]
    assert all(math.isnan(value) for value in saved["scores"]["dev"].values())
    assert set(pd.read_parquet(tmp_path / "predictions.parquet")["split"]) == {"dev", "test"}
    load_distilled(tmp_path, teacher[0], separable.num_labels)  # its weights load like any student's


def test_takd_learns_from_its_assistants_logits(teacher, separable, tmp_path):
    assistant_dir = tmp_path / "assistant"
    run(separable, teacher, assistant_dir, "bert_k", "kd", max_train_examples=64)
    signals = tmp_path / "assistant_signals.safetensors"
    compute_assistant_signals(transfer_frame(separable), "train", separable.num_labels, assistant_dir, teacher[0], 32, 64, CPU, signals)
    cached = load_file(str(signals))
    assert set(cached) == {"logits", "idx"}  # an assistant has no pseudo-heads: logit methods only

    assistant = load_distilled(assistant_dir, teacher[0], separable.num_labels)
    train = tokenize(separable.split("train"), AutoTokenizer.from_pretrained(teacher[0] / "model"), 32, False)
    with torch.no_grad():
        direct = torch.cat([assistant(b).logits for b in batches(train, 64, False)])
    torch.testing.assert_close(cached["logits"], direct)
    teacher_logits = load_file(str(teacher[2]))["logits"]
    assert not torch.allclose(cached["logits"], teacher_logits)

    report = distill(separable, None, teacher[0], signals, STUDENTS["bilstm_s"], "takd", {"assistant": "bert_2"},
                     [{"epochs": 1}], Hyperparameters(**{**STUDENT_HP, "max_train_examples": 16}), tmp_path / "s", CPU)
    assert report["method_options"]["assistant"] == "bert_2"
    with pytest.raises(ValueError, match="takd needs an 'assistant'"):
        run(separable, teacher, tmp_path / "bad", "bilstm_s", "takd", max_train_examples=16)


def test_a_student_deeper_than_its_teacher_needs_an_explicit_mapping(teacher, separable, tmp_path):
    deep = {**STUDENTS["hf"], "architecture": {**STUDENTS["hf"]["architecture"], "num_hidden_layers": 3}}
    with pytest.raises(ValueError, match="give the method a 'mapping'"):
        distill(separable, None, teacher[0], teacher[2], deep, "pkd", {}, [{"epochs": 1}], Hyperparameters(**STUDENT_HP),
                tmp_path, CPU)
    report = distill(separable, None, teacher[0], teacher[2], deep, "pkd", {"mapping": [1, 2]}, [{"epochs": 1}],
                     Hyperparameters(**{**STUDENT_HP, "max_train_examples": 16}), tmp_path, CPU)
    assert report["method_options"]["mapping"] == [1, 2]


def test_a_hidden_space_method_without_cached_layers_is_a_clear_error(teacher, separable, tmp_path):
    teacher_dir, heads_path, _ = teacher
    signals = tmp_path / "signals.safetensors"
    compute_signals(transfer_frame(separable), "train", teacher_dir, heads_path, [], 32, 64, CPU, signals)
    assert "layers" not in load_file(str(signals))
    with pytest.raises(ValueError, match="needs the teacher's layers"):
        distill(separable, None, teacher_dir, signals, STUDENTS["bert_k"], "pkd", {}, [{"epochs": 1}],
                Hyperparameters(**STUDENT_HP), tmp_path / "out", CPU)


WORD_STUDENTS = {
    "bilstm_s": {"type": "bilstm_s", "lstm_size": 10, "fc_size": 12},
    "bert_s": {"type": "bert_s", "hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 2,
               "intermediate_size": 24},
}


@pytest.mark.parametrize("student", sorted(WORD_STUDENTS))
def test_a_word_level_student_trains_and_reloads_identically_without_its_vectors_file(student, teacher, separable,
                                                                                      tmp_path):
    """The vocabulary is the words of the examples it learns from, saved with its weights; reloading reads the
    vectors file's header only (the trained vectors replace it) and tokenises as the student job did."""
    teacher_dir, _, signals = teacher
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("3 8\n" + "".join(f"{word} {' '.join([str(i / 10)] * 8)}\n"
                                         for i, word in enumerate(["good", "bad", "film"])))
    spec = {**WORD_STUDENTS[student], "tokens": "words",
            "embeddings": {"source": "file", "path": str(vectors), "mode": "multichannel"}}
    hp = Hyperparameters(**{**STUDENT_HP, "max_train_examples": 16})
    out = tmp_path / "run"
    distill(separable, None, teacher_dir, signals, spec, "kd", {}, [{"epochs": 1}], hp, out, CPU)  # one step

    vectors.write_text("3 8\nno vectors here\n")  # reading past the header would fail: only the width is read
    reloaded = load_distilled(out, teacher_dir, separable.num_labels)
    reader = student_tokenizer(reloaded, AutoTokenizer.from_pretrained(teacher_dir / "model"))
    learnt_from = transfer_frame(separable).iloc[subset_indices(len(separable.split("train")), 16, hp.seed)]
    assert getattr(reader, "tokenizer", reader).words == transfer_words(learnt_from)

    dev = tokenize(separable.split("dev"), reader, 32, True)
    with torch.no_grad():
        logits = torch.cat([reloaded(b).logits for b in batches(dev, 64, False)]).numpy()
    saved = pd.read_parquet(out / "predictions.parquet").query("split == 'dev'")
    np.testing.assert_array_equal(np.stack(saved["logits"]), logits)


@pytest.mark.parametrize("student", sorted(STUDENTS))
def test_a_training_step_never_waits_for_the_host_for_any_student_or_method(student, teacher, separable, tmp_path,
                                                                           training_syncs):
    """Twice the optimiser steps with the same evaluations (a half batch, one epoch) read the host no more often:
    every sync of a run is at its evaluation, none in its steps (on a GPU each would stall the step)."""
    from kdflow.distillation import distill as module

    for method in TEACHER_METHODS:
        def job(batch_size):
            return lambda: run(separable, teacher, tmp_path / f"{method}-{batch_size}", student, method,
                               max_train_examples=64, batch_size=batch_size, log_every=10_000)

        few, few_steps = training_syncs(module, job(16))
        many, many_steps = training_syncs(module, job(8))
        assert many_steps == 2 * few_steps
        assert many == few, (student, method, dict(many - few))


@pytest.mark.slow
@pytest.mark.parametrize("student, method", [("gated_cnn", "universal_kd_ca"), ("bilstm_s", "pkd")])
def test_a_student_trained_with_its_step_compiled_trains_as_the_eager_one(student, method, teacher, separable,
                                                                           tmp_path):
    """The distill job with the step compiled whole (aot_eager: the tracing, without a C++ toolchain) gives the
    eager job's losses, per-term curves and predictions, dropout off (the compiled graph draws its own masks)."""
    teacher_dir, _, signals = teacher
    spec = {**STUDENTS[student], "dropout": 0.0}
    hp = Hyperparameters(**{**STUDENT_HP, "max_train_examples": 48, "epochs": 2})
    reports = {}
    for name, compiler in (("eager", EAGER), ("compiled", StepCompiler(backend="aot_eager"))):
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        reports[name] = distill(separable, None, teacher_dir, signals, spec, method, {}, [{"epochs": 2}], hp,
                                tmp_path / name, CPU, compiler=compiler)
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        assert graphs == 0 if name == "eager" else 1 <= graphs <= 9  # one graph per shape: 8 buckets, a last batch
    eager, graphed = (pd.DataFrame(reports[name]["history"]) for name in ("eager", "compiled"))
    terms = [column for column in eager if column.startswith("train_")]
    assert "train_kd" in terms or len(terms) > 1
    np.testing.assert_allclose(graphed[terms].to_numpy(), eager[terms].to_numpy(), rtol=1e-4)
    predictions = {name: pd.read_parquet(tmp_path / name / "predictions.parquet") for name in reports}
    np.testing.assert_allclose(np.stack(predictions["compiled"]["logits"]), np.stack(predictions["eager"]["logits"]),
                               atol=1e-4)


PACKED = {  # a family and a method of each kind (logits, hidden states, attention over layers), one two-staged
    "gated_cnn-kd": ("gated_cnn", "kd", [{"epochs": 1}, {"epochs": 1, "weights": {"alpha": 1.0}}]),
    "bilstm_s-pkd": ("bilstm_s", "pkd", [{"epochs": 2}]),
    "bert_k-alp": ("bert_k", "alp", [{"epochs": 2}]),
}


@pytest.mark.parametrize("case", PACKED)
def test_a_pack_of_students_writes_what_each_writes_trained_alone(case, teacher, separable, tmp_path, monkeypatch):
    """Three students that differ in seed (so in initialisation, training subset and data order), learning rate,
    weight decay and (KD's) loss weights, distilled as one pack: each one's metrics (history with its loss terms, kept evaluation, scores)
    and predictions are those of the student distilled alone, to float tolerance (dropout off: a pack's members
    draw other masks than a student alone)."""
    from kdflow.distillation import distill as module
    from kdflow.distillation.distill import distill_pack

    def without_dropout(*args, **kwargs):
        student = build_student(*args, **kwargs)
        for layer in student.modules():
            if isinstance(layer, torch.nn.Dropout):
                layer.p = 0.0
        return student

    build_student = module.build_student
    monkeypatch.setattr(module, "build_student", without_dropout)
    student, method, stages = PACKED[case]
    teacher_dir, _, signals = teacher
    spec = STUDENTS[student]
    hps = [Hyperparameters(**{**STUDENT_HP, "seed": seed, "learning_rate": rate, "weight_decay": decay,
                              "max_train_examples": 48})
           for seed, rate, decay in ((1, 2e-3, 0.01), (2, 4e-3, 0.0), (3, 1e-3, 0.01))]
    options = [{"alpha": 0.5, "beta": 0.5}, {"alpha": 0.2, "beta": 0.8}, {"alpha": 0.5, "beta": 0.5}]
    options = options if method == "kd" else [{}] * len(hps)  # KD's loss weights differ between its members
    alone = [distill(separable, None, teacher_dir, signals, spec, method, member_options, stages, hp,
                     tmp_path / f"alone{k}", CPU) for k, (member_options, hp) in enumerate(zip(options, hps))]
    packed = distill_pack(separable, None, teacher_dir, signals, spec, method, options, stages, hps,
                          [tmp_path / f"pack{k}" for k in range(len(hps))], CPU)
    for k, (mine, theirs) in enumerate(zip(packed, alone)):
        assert mine["best"] == theirs["best"] and mine["hyperparameters"] == theirs["hyperparameters"]
        mine_history, their_history = pd.DataFrame(mine["history"]), pd.DataFrame(theirs["history"])
        assert list(mine_history.columns) == list(their_history.columns)
        numbers = [c for c in their_history if c not in ("seconds",)]
        np.testing.assert_allclose(mine_history[numbers].to_numpy(float), their_history[numbers].to_numpy(float),
                                   rtol=1e-4, atol=1e-6, err_msg=f"member {k}")
        mine_predictions, their_predictions = (pd.read_parquet(tmp_path / f"{side}{k}" / "predictions.parquet")
                                               for side in ("pack", "alone"))
        logits = [c for c in their_predictions if c.startswith("logit")]
        assert logits
        for column in logits:
            np.testing.assert_allclose(np.stack(mine_predictions[column]), np.stack(their_predictions[column]),
                                       rtol=1e-4, atol=1e-5)
    assert len({json.dumps(p["history"][-1]["train_loss"]) for p in packed}) == len(hps)  # members trained apart
