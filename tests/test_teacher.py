"""Teacher fine-tuning and pseudo-heads on a tiny randomly initialised BERT."""

import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import TEACHER_HP, TINY_BERT, finetuned
from safetensors.torch import load_file
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from kdflow.core.errors import UserError
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.intermediates import DamagedFile
from kdflow.teachers.finetune import check_divergence, evaluate_teacher, logits_of
from kdflow.teachers.pseudo_heads import (
    LayerHeads,
    evaluate_pseudo_heads,
    gold_distance,
    heads_loss,
    layer_features,
    train_pseudo_heads,
)
from kdflow.training.batching import batches, tokenize
from kdflow.training.checkpoint import Checkpoint
from kdflow.training.loop import subset_indices, train

CPU = torch.device("cpu")
HP = TEACHER_HP
HEADS = dict(learning_rate=1e-2, batch_size=32, epochs=3, warmup_ratio=0.0, weight_decay=0.0, seed=0)


def test_teacher_learns_a_separable_task_and_keeps_the_best_dev_epoch(trained_teacher):
    out, report = trained_teacher
    history = report["history"]
    assert report["scores"]["dev"]["accuracy"] >= 0.95
    best = max(history, key=lambda record: record["dev_accuracy"])  # first of equals, as selection keeps it
    assert report["best_epoch"] == best["epoch"]
    assert report["scores"]["dev"]["accuracy"] == pytest.approx(best["dev_accuracy"])
    assert json.loads((out / "metrics.json").read_text())["best_epoch"] == report["best_epoch"]


def test_saved_teacher_reproduces_its_predictions(trained_teacher, separable):
    out, _ = trained_teacher
    predictions = pd.read_parquet(out / "predictions.parquet")
    assert predictions.groupby("split").size().to_dict() == {"dev": 64, "test": 8}
    assert predictions.loc[predictions.split == "test", "label"].isna().all()
    model = AutoModelForSequenceClassification.from_pretrained(out / "model").eval()
    tokenizer = AutoTokenizer.from_pretrained(out / "model")
    dev = tokenize(separable.split("dev"), tokenizer, HP["max_seq_length"], labelled=True)
    with torch.no_grad():
        logits = torch.cat([logits_of(model)(b) for b in batches(dev, 64, regression=False)]).numpy()
    saved = np.stack(predictions.loc[predictions.split == "dev", "logits"].to_numpy())
    np.testing.assert_allclose(saved, logits, atol=1e-5)
    assert (predictions.loc[predictions.split == "dev", "prediction"].to_numpy() == logits.argmax(1)).all()


def test_same_seed_same_teacher(prepared, tmp_path):
    data = prepared("rte")  # sentence pairs
    hp = Hyperparameters(**{**HP, "epochs": 1, "max_train_examples": 64})
    first = finetuned(data, TINY_BERT, hp, tmp_path / "a", CPU)
    second = finetuned(data, TINY_BERT, hp, tmp_path / "b", CPU)
    assert first["history"][0]["train_loss"] == second["history"][0]["train_loss"]
    a, b = (pd.read_parquet(tmp_path / d / "predictions.parquet") for d in "ab")
    np.testing.assert_array_equal(np.stack(a.logits), np.stack(b.logits))
    other = finetuned(data, TINY_BERT, Hyperparameters(**{**HP, "epochs": 1, "max_train_examples": 64, "seed": 1}),
                     tmp_path / "c", CPU)
    assert other["history"][0]["train_loss"] != first["history"][0]["train_loss"]


def test_a_teacher_is_evaluated_from_its_directory_and_training_record(trained_teacher, separable, tmp_path):
    teacher_dir, report = trained_teacher
    record = json.loads((teacher_dir / "model" / "training.json").read_text())
    assert record["history"] == report["history"] and record["best_epoch"] == report["best_epoch"]
    again = evaluate_teacher(separable, teacher_dir / "model", tmp_path, CPU)
    assert again["scores"] == report["scores"]  # the same weights, scored again
    shutil.copytree(teacher_dir / "model", tmp_path / "old", ignore=shutil.ignore_patterns("training.json"))
    with pytest.raises(DamagedFile, match=r"old/training.json is damaged or incomplete \(missing"):
        evaluate_teacher(separable, tmp_path / "old", tmp_path, CPU)


def test_regression_teacher_on_stsb_and_its_pseudo_heads_on_the_gold_scale(prepared, tmp_path):
    stsb = prepared("stsb")
    report = finetuned(stsb, TINY_BERT, Hyperparameters(**{**HP, "epochs": 1}), tmp_path, CPU)
    assert set(report["scores"]["dev"]) == {"pearson", "spearman"}
    predictions = pd.read_parquet(tmp_path / "predictions.parquet")
    assert predictions["prediction"].dtype == np.float32 and "prediction_name" not in predictions
    # heads whose biases started at 0 predicted about 0 after their few steps, ~2.5 below the scores' mean
    train_pseudo_heads(stsb, tmp_path, {**HEADS, "learning_rate": 1e-3, "max_seq_length": 32}, tmp_path / "h", CPU)
    evaluate_pseudo_heads(stsb, tmp_path, tmp_path / "h/heads.safetensors", tmp_path / "h", CPU)
    dev = pd.read_parquet(tmp_path / "h/dev_predictions.parquet")
    gold_mean = stsb.split("train")["label"].mean()
    assert dev.groupby("layer").prediction.mean().sub(gold_mean).abs().max() < 0.5


def test_pseudo_heads_on_every_layer(trained_teacher, separable, tmp_path):
    teacher_dir, _ = trained_teacher
    record = train_pseudo_heads(separable, teacher_dir, {**HEADS, "max_seq_length": 32}, tmp_path, CPU)
    assert not (tmp_path / "metrics.json").exists()  # the evaluation is a job of its own
    report = evaluate_pseudo_heads(separable, teacher_dir, tmp_path / "heads.safetensors", tmp_path, CPU)
    assert report["history"] == record["history"] and report["best_epoch"] == record["best_epoch"]
    assert json.loads((tmp_path / "metrics.json").read_text())["layers"] == report["layers"]
    assert pd.read_parquet(tmp_path / "curves.parquet").to_dict("records") == record["history"]
    layers = report["layers"]
    assert [layer["layer"] for layer in layers] == [1, 2]
    assert layers[-1]["accuracy"] >= 0.9  # the top layer of a teacher that solved the task separates it
    assert all(0 <= layer["gold_distance"] <= np.sqrt(2) for layer in layers)
    heads = load_file(tmp_path / "heads.safetensors")
    assert heads["weight"].shape == (2, 32, 2) and heads["bias"].shape == (2, 2)
    assert heads["feature_scale"].shape == (2, 32) and (heads["feature_scale"] > 0).all()
    dev = pd.read_parquet(tmp_path / "dev_predictions.parquet")
    assert len(dev) == 2 * 64
    for layer in layers:
        rows = dev[dev.layer == layer["layer"]]
        assert (rows.prediction == rows.label).mean() == pytest.approx(layer["accuracy"])
        assert rows.gold_distance.mean() == pytest.approx(layer["gold_distance"])
    assert not list(tmp_path.glob(".features-*")), "the feature memory map is cleaned up"


def test_a_teacher_whose_loss_turns_nan_records_where_and_writes_its_outputs(prepared, loss_turns_nan, tmp_path):
    data = prepared("stsb")  # NaN predictions used to score a Spearman of 1 here
    hp = Hyperparameters(**{**HP, "epochs": 3, "max_train_examples": 64})  # 4 steps per epoch
    checkpoint = Checkpoint(tmp_path / "job.ckpt", "fingerprint", every_minutes=None)
    losses = loss_turns_nan(6)
    report = finetuned(data, TINY_BERT, hp, tmp_path / "out", CPU, checkpoint)
    assert len(losses) == 8 and math.isnan(losses[5])  # stopped where the losses were read back: epoch 2's end
    saved = json.loads((tmp_path / "out/metrics.json").read_text())
    assert saved["diverged"] == report["diverged"] == {"epoch": 2, "step": 6, "what": "training loss nan"}
    assert all(math.isnan(value) for value in saved["scores"]["dev"].values())
    assert [record["epoch"] for record in saved["history"]] == [1]
    assert len(pd.read_parquet(tmp_path / "out/predictions.parquet")) > 0
    assert (tmp_path / "out/model/config.json").exists()

    rerun = finetuned(data, TINY_BERT, hp, tmp_path / "rerun", CPU, checkpoint)  # restored, not trained again
    assert len(losses) == 8 and rerun["diverged"] == saved["diverged"]


def test_a_non_finite_dev_score_is_a_divergence_too():
    model = torch.nn.Linear(2, 1)
    dev_scores = iter([0.5, float("nan"), 0.9])
    result = train(model, lambda model, batch: model(batch["x"]).pow(2).mean(),
                   lambda rng: ({"x": torch.ones(2, 2)} for _ in range(3)), 6,
                   lambda model: {"score": next(dev_scores)}, "score",
                   Hyperparameters(learning_rate=1e-2, batch_size=2, epochs=3), CPU)
    assert result.diverged == {"epoch": 2, "step": 6, "what": "dev score nan"} and result.best_epoch == 2 and math.isnan(result.best_score)
    torch.testing.assert_close(result.best_state["weight"], model.weight.detach())  # as it diverged


def test_pseudo_heads_that_diverge_score_nan_on_every_layer(trained_teacher, separable, loss_turns_nan, tmp_path):
    teacher_dir, _ = trained_teacher
    loss_turns_nan(3)
    train_pseudo_heads(separable, teacher_dir, {**HEADS, "max_seq_length": 32}, tmp_path, CPU)
    report = evaluate_pseudo_heads(separable, teacher_dir, tmp_path / "heads.safetensors", tmp_path, CPU)
    assert report["diverged"] == {"epoch": 1, "step": 3, "what": "training loss nan"}
    assert all(math.isnan(layer["accuracy"]) for layer in report["layers"]) and len(report["layers"]) == 2
    assert (tmp_path / "heads.safetensors").exists() and (tmp_path / "dev_predictions.parquet").exists()


def test_layer_features_match_a_direct_forward_pass():
    from kdflow.teachers.finetune import build_teacher

    torch.manual_seed(0)
    model, tokenizer = build_teacher(TINY_BERT, 2)
    model.eval()
    frame = pd.DataFrame({"text_a": ["a good movie", "bad"], "text_b": [None, None], "label": [1, 0]})
    split = tokenize(frame, tokenizer, 32, labelled=True)
    for pooling in ("cls", "mean"):
        out = np.zeros((2, 2, 32), dtype=np.float32)
        layer_features(model, split, pooling, batch_size=2, device=CPU, out=out)  # padded batch
        for i in range(2):  # each example alone, unpadded
            ids = torch.tensor([split.input_ids[i]])
            with torch.no_grad():
                hidden = model.base_model(input_ids=ids, output_hidden_states=True).hidden_states
            for layer in (1, 2):
                expected = hidden[layer][0, 0] if pooling == "cls" else hidden[layer][0].mean(0)
                np.testing.assert_allclose(out[i, layer - 1], expected.numpy(), atol=1e-5)


def test_heads_loss_is_the_sum_of_per_layer_losses_by_hand():
    outputs = torch.tensor([[[2.0, 0.0], [0.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]]])  # [B=2, N=2, C=2]
    labels = torch.tensor([0, 1])
    ce = lambda z, y: -np.log(np.exp(z[y]) / np.exp(z).sum())  # noqa: E731
    layer1 = (ce(np.array([2.0, 0.0]), 0) + ce(np.array([0.0, 1.0]), 1)) / 2
    layer2 = (ce(np.array([0.0, 0.0]), 0) + ce(np.array([1.0, 0.0]), 1)) / 2
    assert heads_loss(outputs, labels, regression=False).item() == pytest.approx(layer1 + layer2, rel=1e-6)
    regression = heads_loss(torch.tensor([[[1.0], [3.0]]]), torch.tensor([2.0]), regression=True)
    assert regression.item() == pytest.approx(1.0 + 1.0)


def test_layer_heads_are_independent_linear_classifiers():
    heads = LayerHeads(n_layers=3, hidden_size=4, n_outputs=2)
    features = torch.randn(5, 3, 4).half().float()  # heads read float16 values, as their features are stored
    out = heads(features)
    for i in range(3):
        torch.testing.assert_close(out[:, i], features[:, i] @ heads.weight[i] + heads.bias[i])
    out[:, 1].sum().backward()  # a loss on layer 2's head moves only layer 2's parameters
    assert heads.weight.grad[[0, 2]].abs().sum() == 0 and heads.weight.grad[1].abs().sum() > 0


def trained_by_adam(heads, features: np.ndarray, labels: np.ndarray, lr: float, regression: bool) -> torch.Tensor:
    """The heads after 100 full-batch Adam steps on (features, labels): their outputs on the features."""
    optimizer = torch.optim.Adam(heads.parameters(), lr=lr)
    x, y = torch.from_numpy(features), torch.from_numpy(labels)
    for _ in range(100):
        loss = heads_loss(heads(x), y, regression)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return heads(x)


def test_heads_standardise_offset_dominated_features():
    """Low layers' [CLS] vectors are a large constant plus a small signal; the fitted standardisation exposes it."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 512)
    signal = (labels[:, None] * 2 - 1) * 0.05 + rng.normal(0, 0.05, (512, 8))
    features = (20.0 + signal)[:, None, :].astype(np.float16)  # one layer, spread ~0.3% of the magnitude
    heads = LayerHeads(n_layers=1, hidden_size=8, n_outputs=2)
    heads.fit_standardisation(features)
    np.testing.assert_allclose(heads.feature_mean[0].numpy(), features[:, 0].astype(np.float64).mean(0), rtol=1e-6)
    standardised = (torch.from_numpy(features).float() - heads.feature_mean) / heads.feature_scale
    torch.testing.assert_close(standardised.std(0, unbiased=False), torch.ones(1, 8), atol=1e-3, rtol=0)
    outputs = trained_by_adam(heads, features, labels, lr=1e-2, regression=False)
    assert (outputs[:, 0].argmax(-1) == torch.from_numpy(labels)).float().mean() > 0.9


def test_heads_see_float32_layers_as_the_float16_features_they_were_trained_on():
    """The signals job applies the heads to float32 layers, training read them rounded to float16; a dimension
    that does not vary in float16 turned that rounding into an offset of 27 in one MiniLM STS-B head."""
    rng = np.random.default_rng(0)
    exact = np.concatenate([rng.normal(0, 1, (256, 1, 7)), 8.0 + rng.normal(0, 1e-4, (256, 1, 1))], axis=2)
    stored = exact.astype(np.float16)
    assert stored[:, 0, 7].std() == 0  # the last dimension is one float16 value
    heads = LayerHeads(n_layers=1, hidden_size=8, n_outputs=1)
    heads.fit_standardisation(stored)
    with torch.no_grad():
        heads.weight.fill_(0.5)
        from_stored = heads(torch.from_numpy(stored))
        torch.testing.assert_close(heads(torch.from_numpy(exact).float()), from_stored)
        # a new example one float16 step off that value moves the output by one standard unit times the weight
        shifted = stored.copy()
        shifted[:, 0, 7] = np.nextafter(np.float16(8.0), np.float16(9.0))
        assert (heads(torch.from_numpy(shifted)) - from_stored).abs().max() <= 0.5 + 1e-6


def test_regression_heads_start_at_the_label_mean_and_reach_the_gold_scale():
    """Adam moves a bias by about its learning rate a step: from 0, 100 steps of lr 1e-3 leave it near 0.1."""
    rng = np.random.default_rng(0)
    labels = rng.uniform(0, 5, 512).astype(np.float32)
    features = (labels[:, None] + rng.normal(0, 1, (512, 8)))[:, None, :].astype(np.float16)
    heads = LayerHeads(n_layers=1, hidden_size=8, n_outputs=1)
    heads.fit_standardisation(features)
    heads.start_at_label_mean(labels)
    assert heads.bias.item() == pytest.approx(labels.mean())
    outputs = trained_by_adam(heads, features, labels, lr=1e-3, regression=True)
    assert (outputs[:, 0, 0] - torch.from_numpy(labels)).abs().mean() < 1.0


def test_gold_distance_by_hand():
    logits = np.log(np.array([[[0.8, 0.2]], [[0.5, 0.5]]]))  # softmax gives back the probabilities
    distance = gold_distance(logits, np.array([0, 1]), regression=False)
    np.testing.assert_allclose(distance[:, 0], [np.sqrt(0.2**2 + 0.2**2), np.sqrt(0.5**2 + 0.5**2)])
    np.testing.assert_allclose(gold_distance(np.array([[[2.5]]]), np.array([4.0]), True), [[1.5]])


def test_hyperparameters_reject_unknown_names_and_subsets_are_seeded():
    with pytest.raises(ValueError, match=r"unknown hyperparameters \['learning_rat'\]"):
        Hyperparameters.from_dict({"learning_rat": 1e-3, "batch_size": 8, "epochs": 1})
    assert subset_indices(10, None, 0).tolist() == list(range(10))
    picked = subset_indices(100, 10, seed=3)
    assert len(set(picked)) == 10 and list(picked) == sorted(picked)
    assert (picked == subset_indices(100, 10, seed=3)).all() and not (picked == subset_indices(100, 10, 4)).all()


def test_a_diverged_teacher_stops_its_job_with_the_step_the_loss_and_what_to_change_unless_kept():
    record = {"diverged": {"epoch": 1, "step": 3, "what": "training loss nan"},
              "hyperparameters": {"learning_rate": 1000.0}}
    with pytest.raises(UserError) as error:
        check_divergence(record, "tiny_bert", "stsb", keep=False)
    assert str(error.value) == (
        "teacher tiny_bert diverged on stsb at epoch 1, optimiser step 3 (training loss nan) with learning rate "
        "1000.0: lower teachers.tiny_bert.task_hyperparameters.stsb.learning_rate (or raise warmup_ratio, lower "
        "max_grad_norm), or set teachers.tiny_bert.keep_diverged: true to keep the run and its NaN scores")
    check_divergence(record, "tiny_bert", "stsb", keep=True)  # kept: no error
    check_divergence({**record, "diverged": None}, "tiny_bert", "stsb", keep=False)


@pytest.mark.parametrize("task_name", ["sst2", "stsb"])
def test_teacher_and_pseudo_head_steps_never_wait_for_the_host(prepared, trained_teacher, separable, training_syncs,
                                                               tmp_path, task_name):
    """Twice the steps (half the batch) and the same evaluations: the same host syncs, so none is in a step."""
    from kdflow.teachers import finetune as finetune_module
    from kdflow.teachers import pseudo_heads as heads_module

    data = prepared(task_name)

    def teacher_job(batch_size):
        hp = Hyperparameters(**{**HP, "epochs": 1, "batch_size": batch_size, "max_train_examples": 64,
                                "log_every": 10_000})
        return lambda: finetuned(data, TINY_BERT, hp, tmp_path / f"teacher-{batch_size}", CPU)

    def heads_job(batch_size):
        settings = {**HEADS, "epochs": 1, "batch_size": batch_size, "log_every": 10_000}
        return lambda: train_pseudo_heads(separable, trained_teacher[0], settings, tmp_path / f"heads-{batch_size}",
                                          CPU)

    for module, job in ((finetune_module, teacher_job), (heads_module, heads_job)):
        few, few_steps = training_syncs(module, job(16))
        many, many_steps = training_syncs(module, job(8))
        assert many_steps == 2 * few_steps and many == few, (module.__name__, dict(many - few))
