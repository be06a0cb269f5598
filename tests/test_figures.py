"""The papers' figures (kdflow.reporting.figures) and the layer-attention weights behind Universal-KD Fig. 3
(kdflow.analysis.attention_maps), recomputed from real tiny runs."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer

from kdflow.analysis.attention_maps import attention_weights
from kdflow.analysis.predictions import analyse
from kdflow.core.errors import UserError
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.distillation.distill import distill, layer_widths
from kdflow.distillation.methods.registry import Shapes, build_method
from kdflow.reporting import figures
from kdflow.reporting.tables import teacher_table
from kdflow.students.loading import load_distilled
from kdflow.teachers.pseudo_heads import load_heads, teacher_outputs, train_pseudo_heads
from kdflow.training.batching import batches, tokenize
from kdflow.training.hf_models import load_classifier
from kdflow.transfer.frames import transfer_frame
from kdflow.transfer.labelling import compute_signals
from kdflow.transfer.signals import TeacherSignals

CPU = torch.device("cpu")
HEADS = dict(learning_rate=1e-2, batch_size=32, epochs=2, warmup_ratio=0.0, weight_decay=0.0, seed=0, max_seq_length=32)
STUDENT_HP = dict(learning_rate=2e-3, batch_size=16, epochs=1, max_seq_length=32, eval_batch_size=64,
                  max_train_examples=32)
# Three layers, 16 wide (the teacher is 32 wide): two attending layers, and ALP needs its projections.
STUDENT = {"type": "bilstm", "layers": 3, "hidden_size": 16, "embeddings": {"source": "random", "dim": 8}}
METHODS = ("universal_kd_il", "alp", "universal_kd_cg", "kd")


def is_png(path) -> bool:
    return path.stat().st_size > 1000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- figures from hand-made inputs ------------------------------------------------------------------------------


def test_pseudo_head_figure_from_the_teacher_table_csv(tmp_path):
    """Teachers of different depths, read back from CSV as the rule would."""
    report = tmp_path / "teacher.json"
    scores = {"mcc": 0.5, "accuracy": 0.8}
    report.write_text(json.dumps({"scores": {"dev": scores, "test": scores}}))
    paths = []
    for depth in (2, 4):
        heads = tmp_path / f"heads{depth}.json"
        layers = [{"layer": i, "mcc": i / depth / 2, "accuracy": 0.5 + i / depth / 4, "gold_distance": 1 - i / depth}
                  for i in range(1, depth + 1)]
        heads.write_text(json.dumps({"layers": layers}))
        paths.append(heads)
    table = teacher_table([("small", "cola"), ("large", "cola")], [report, report], paths)
    table.to_csv(tmp_path / "teachers.csv", index=False)

    path = figures.pseudo_head_figure(pd.read_csv(tmp_path / "teachers.csv"), tmp_path / "out" / "heads.png")
    assert is_png(path)
    assert is_png(figures.pseudo_head_figure(table, tmp_path / "in_memory.png"))
    with pytest.raises(ValueError, match="no pseudo-head rows"):
        figures.pseudo_head_figure(table[table.component == "teacher"], tmp_path / "none.png")


def test_teacher_curves_keep_each_tasks_main_metric_and_the_learning_rate(tmp_path):
    """Thesis Fig. 4.2's data from two curves.parquet tables as the teacher writes them (a 2-epoch CoLA run of 4
    steps evaluated every 2 steps and a 1-epoch Sara run), read back from the CSV as the rule writes it."""
    common = dict(grad_norm_mean=1.0, grad_norm_max=2.0, train_loss=0.5, seconds=3.0)
    cola = pd.DataFrame([dict(epoch=1, step=2, lr=4e-5, **common, dev_mcc=0.1, dev_accuracy=0.6),
                         dict(epoch=2, step=4, lr=0.0, **common, dev_mcc=0.35, dev_accuracy=0.7)])
    sara = pd.DataFrame([dict(epoch=1, step=3, lr=1e-5, **common, dev_f1_micro=0.875, dev_accuracy=0.875)])
    for name, table in (("cola", cola), ("sara", sara)):
        table.to_parquet(tmp_path / f"{name}.parquet", index=False)
    curves = {task: pd.read_parquet(tmp_path / f"{task}.parquet") for task in ("sara", "cola")}
    data = figures.teacher_curves(curves, {"cola": "mcc", "sara": "f1_micro"})
    data.to_csv(tmp_path / "teacher_curves.csv", index=False)

    assert pd.read_csv(tmp_path / "teacher_curves.csv").to_dict("records") == [
        dict(task="sara", epoch=1, step=3, lr=1e-5, metric="f1_micro", dev_score=87.5),
        dict(task="cola", epoch=1, step=2, lr=4e-5, metric="mcc", dev_score=10.0),
        dict(task="cola", epoch=2, step=4, lr=0.0, metric="mcc", dev_score=35.0),
    ]
    assert is_png(figures.teacher_curves_figure(data, tmp_path / "out" / "teacher_curves.png", "bert_large"))
    with pytest.raises(ValueError, match="no learning curves of teacher bert_large"):
        figures.teacher_curves_figure(data.iloc[:0], tmp_path / "none.png", "bert_large")


def probing_rows(model, layers, tasks):
    return [dict(model=model, task=task, layer=layer, kind="probe", test_accuracy=50 + layer, dev_accuracy=50 + layer,
                 hidden_size=50, dropout=0.1) for task in tasks for layer in layers]


def test_probing_figure_handles_different_depths_and_missing_baselines(tmp_path):
    tasks = ["Length", "Tense", "OddManOut"]
    rows = (probing_rows("bert_t", range(25), tasks) + probing_rows("bert_s", range(6), tasks)
            + probing_rows("lstm_s", [2], tasks[:2]))  # a BiLSTM probed at its top layer only, not on every task
    rows += [dict(model="majority", task=task, layer=pd.NA, kind="majority", test_accuracy=50.0) for task in tasks[:2]]
    rows += [dict(model="morphology", task="Tense", layer=pd.NA, kind="morphology", test_accuracy=70.0)]
    table = pd.DataFrame(rows).astype({"layer": "Int64"})

    assert is_png(figures.probing_figure(table, tmp_path / "layers.png"))
    assert is_png(figures.probing_figure(table, tmp_path / "depth.png", relative_depth=True))
    names = {"bert_s": "BERT$_S$", "lstm_s": "LSTM$_S$"}
    assert is_png(figures.probing_figure(table, tmp_path / "named.png", model_names=names))
    with pytest.raises(ValueError, match="no results"):
        figures.probing_figure(table.iloc[:0], tmp_path / "empty.png")


@pytest.fixture(scope="module")
def analysis():
    """Three models on 12 dev examples: the teacher errs on 2, a student on 4, an always-right student never."""
    rng = np.random.default_rng(0)
    labels = np.tile([0, 1], 6)

    def table(wrong):
        prediction = np.where(np.isin(np.arange(12), wrong), 1 - labels, labels)
        logits = [np.eye(2)[p] * rng.uniform(0.5, 3) for p in prediction]
        return pd.DataFrame({"split": "dev", "idx": range(12), "label": labels, "prediction": prediction,
                             "logits": logits})

    return analyse({"teacher": table([0, 5]), "student": table([0, 5, 7, 9]), "perfect": table([])})


def test_confidence_and_overlap_heatmaps(analysis, tmp_path):
    assert is_png(figures.confidence_heatmap(analysis, tmp_path / "confidence.png"))
    assert analysis["mistake_overlap"]["fraction_of_row"]["perfect"]["teacher"] is None  # drawn as an empty cell
    assert is_png(figures.mistake_overlap_heatmap(analysis, tmp_path / "mistakes.png"))
    assert is_png(figures.mistake_overlap_heatmap(analysis, tmp_path / "hits.png", of="hits"))


@pytest.mark.parametrize("models", [["t", "s"], ["tiny_bert_sst2", "lstm_s_sst2", "bert_s_sst2"],
                                    ["teacher", "universal_kd_il_student_of_sst2"]])
def test_heatmap_labels_fit_in_the_figure(models):
    """Thesis-style model names were clipped at the left edge when the heatmap had a fixed aspect."""
    figure, _ = figures.heatmap(np.eye(len(models)), models, [["1"] * len(models)] * len(models), "viridis", (0, 1),
                                "share")
    figure.canvas.draw()
    for axes in figure.axes:  # the heatmap and its colour bar, with their tick labels
        box = axes.get_tightbbox()
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= figure.bbox.x1 and box.y1 <= figure.bbox.y1


def test_confidence_heatmap_with_an_undefined_correlation(analysis, tmp_path):
    constant = json.loads(json.dumps(analysis))
    constant["confidence_correlation"]["r"]["teacher"]["student"] = None  # a model with constant confidence
    constant["confidence_correlation"]["p"]["teacher"]["student"] = None
    assert is_png(figures.confidence_heatmap(constant, tmp_path / "confidence.png"))


def test_attention_figure_of_records_with_and_without_gold_distances(tmp_path):
    record = {"method": "alp", "task": "rte", "split": "dev", "student_layer": 3, "student_layers": 4,
              "teacher_layers": list(range(1, 13)), "idx": list(range(10)), "texts": ["a sentence " * 8] * 10,
              "weights": np.full((10, 12), 1 / 12).tolist(), "gold_distance": np.ones((10, 12)).tolist()}
    assert is_png(figures.attention_figure(record, tmp_path / "one.png", "ALP"))
    other = {**record, "method": "universal_kd_il", "idx": list(range(5)), "texts": ["b"] * 5,
             "weights": np.full((5, 12), 1 / 12).tolist(), "gold_distance": None}
    assert is_png(figures.attention_figure([record, other], tmp_path / "two.png"))


# --- attention weights from trained runs ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(trained_teacher, separable, tmp_path_factory):
    """The tiny teacher, its pseudo-heads, and one 3-layer BiLSTM student per method of METHODS."""
    teacher_dir, _ = trained_teacher
    root = tmp_path_factory.mktemp("attention")
    train_pseudo_heads(separable, teacher_dir, HEADS, root / "heads", CPU)
    heads = root / "heads" / "heads.safetensors"
    signals = root / "signals.safetensors"
    compute_signals(transfer_frame(separable), "train", teacher_dir, heads, True, 32, 64, CPU, signals)
    for method in METHODS:
        distill(separable, None, teacher_dir, signals, STUDENT, method, {}, [{"epochs": 1}],
                Hyperparameters(**STUDENT_HP), root / method, CPU)
    return {"teacher": teacher_dir, "heads": heads, "root": root}


def weights_of(runs, separable, method, **options):
    return attention_weights(runs["root"] / method, runs["teacher"], runs["heads"], separable.directory, **options)


def recomputed(runs, separable, method, idx):
    """One dev example through the teacher, its heads and the run's student and method, directly."""
    teacher_model = load_classifier(runs["teacher"] / "model").eval()
    heads, pooling = load_heads(runs["heads"])
    dev = separable.split("dev")
    tokenizer = AutoTokenizer.from_pretrained(runs["teacher"] / "model")
    batch = next(batches(tokenize(dev[dev["idx"] == idx], tokenizer, 32, True), 1, False))
    logits, pooled = teacher_outputs(teacher_model, batch, pooling)
    teacher = TeacherSignals(logits, heads(pooled), pooled.half().float())  # the cache keeps layers in float16
    student = load_distilled(runs["root"] / method, runs["teacher"], separable.num_labels)
    report = json.loads((runs["root"] / method / "metrics.json").read_text())
    shapes = Shapes(layer_widths(student, batch), 2, 32, separable.num_labels, False)
    module = build_method(method, shapes, report["method_options"])
    state = load_file(str(runs["root"] / method / "model.safetensors"))
    module.load_state_dict({k.removeprefix("method."): v for k, v in state.items() if k.startswith("method.")})
    return module.eval(), student(batch), teacher, batch["labels"]


@pytest.mark.parametrize("method", ["universal_kd_il", "alp", "universal_kd_cg"])
def test_weights_are_distributions_over_every_teacher_layer(runs, separable, method):
    record = weights_of(runs, separable, method)
    weights = np.array(record["weights"])
    assert weights.shape == (10, 2) and record["teacher_layers"] == [1, 2]
    np.testing.assert_allclose(weights.sum(1), 1, rtol=1e-5)
    assert record["student_layer"] == (3 if method == "universal_kd_cg" else 2)  # the top layer that attends
    assert np.array(record["gold_distance"]).shape == (10, 2)
    dev = separable.split("dev").set_index("idx")
    assert record["labels"] == dev.loc[record["idx"], "label"].tolist()
    assert record["texts"] == dev.loc[record["idx"], "text_a"].tolist()
    json.dumps(record)


@pytest.mark.parametrize("method", ["universal_kd_il", "alp"])
def test_weights_equal_the_methods_own_attention_for_one_example(runs, separable, method):
    record = weights_of(runs, separable, method, student_layer=1, n_examples=4, seed=3)
    row, idx = 2, record["idx"][2]
    module, student, teacher, _ = recomputed(runs, separable, method, idx)
    with torch.no_grad():
        if method == "alp":
            direct = module.attention(student, teacher)
        else:
            logits = torch.stack([head(h) for head, h in zip(module.heads, student.layers[:-1])], dim=1)
            direct = module.attention(module.distribution(logits), module.distribution(teacher.head_logits))
    torch.testing.assert_close(torch.tensor(record["weights"][row]), direct[0, 0], atol=1e-5, rtol=1e-4)


def test_output_attention_weights_are_the_ones_the_capacity_gap_loss_uses(runs, separable):
    """Universal-KD(CG) computes its attention inside its loss (Eq. 8): the weights must reproduce that loss."""
    record = weights_of(runs, separable, "universal_kd_cg", n_examples=3)
    module, student, teacher, labels = recomputed(runs, separable, "universal_kd_cg", record["idx"][0])
    with torch.no_grad():
        aggregate = torch.tensor(record["weights"][:1]) @ module.distribution(teacher.head_logits)[0]
        expected = module.divergence(aggregate, student.logits).mean()
        torch.testing.assert_close(module.terms(student, teacher, labels)["inter"], expected, atol=1e-5, rtol=1e-4)


def test_every_run_of_a_task_sees_the_same_examples(runs, separable):
    universal, alp = (weights_of(runs, separable, name, n_examples=5, seed=7) for name in ("universal_kd_il", "alp"))
    assert universal["idx"] == alp["idx"] and len(set(universal["idx"])) == 5
    np.testing.assert_allclose(universal["gold_distance"], alp["gold_distance"])


def test_a_method_without_attention_or_a_layer_that_does_not_attend_is_a_clear_error(runs, separable):
    with pytest.raises(UserError, match="kd has no attention over teacher layers; methods that do: alp"):
        weights_of(runs, separable, "kd")
    with pytest.raises(UserError, match=r"attends from student layers \[1, 2\], not 3"):
        weights_of(runs, separable, "alp", student_layer=3)


def test_attention_figure_of_real_runs(runs, separable, tmp_path):
    records = [weights_of(runs, separable, method) for method in ("universal_kd_il", "alp")]
    assert is_png(figures.attention_figure(records, tmp_path / "attention.png", "Universal-KD(IL) vs ALP"))
