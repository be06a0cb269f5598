"""The papers' figures (kdflow.reporting.figures), the layer-attention weights behind Universal-KD Fig. 3 and ALP-KD
Fig. 3 (kdflow.analysis.attention_maps) and the layer outputs behind ALP-KD Fig. 4 (kdflow.analysis.layer_outputs),
recomputed from real tiny runs."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.lines import Line2D
from PIL import Image
from safetensors.torch import load_file
from transformers import AutoTokenizer

from kdflow.analysis.attention_maps import attention_weights, recompute
from kdflow.analysis.layer_outputs import (
    cosine_distance,
    layer_outputs,
    layer_outputs_table,
    panel,
    principal_components,
)
from kdflow.analysis.prediction_analysis import analyse, average_confidence_table
from kdflow.core.errors import UserError
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.distillation.distill import distill, layer_widths
from kdflow.distillation.methods.registry import Shapes, build_method
from kdflow.reporting.figures import alp_kd, style, thesis, universal_kd
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
METHODS = ("universal_kd_il", "alp", "universal_kd_cg", "kd", "pkd")
OPTIONS = {"pkd": {"mapping": [1, 2]}}  # the teacher has 2 layers: PKD-skip needs one at least as deep as the student


def is_png(path) -> bool:
    return path.stat().st_size > 1000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def drawn_to_the_edge(path) -> int:
    """How many pixels of the PNG's 4-px border are not background: 0 when nothing drawn runs off the canvas (a cut
    legend or title leaves its ink there; a constrained layout keeps 6 px, 3 points, clear round what it lays out).
    A band, not the edge alone: the edge may fall between two letters."""
    image = np.asarray(Image.open(path).convert("L"))
    return int(sum((band < 250).sum() for band in (image[:4], image[-4:], image[:, :4], image[:, -4:])))


def test_a_legend_wider_than_its_figure_takes_fewer_columns_and_a_wide_title_widens_the_figure(tmp_path):
    """Issue 52: a one-panel figure with a six-column legend lost the legend's and title's ends in the file."""
    handles = [Line2D([], [], label=f"method number {number}", color="k") for number in range(8)]

    def one_panel(title):
        figure = style.new_figure(3.4, 2.8)
        figure.subplots().plot([0, 1], [0, 1])
        figure.suptitle(title)
        return figure

    figure = one_panel("short")
    style.legend_below(figure, handles, columns=6)
    assert 1 < figure.legends[0]._ncols < 6
    path = style.save(figure, tmp_path / "legend.png")
    assert drawn_to_the_edge(path) == 0 and png_width(path) == 3.4 * style.DPI
    figure = one_panel("Experiment alp_kd_table2: the dev curve of every run, on every task")
    path = style.save(figure, tmp_path / "title.png")
    assert drawn_to_the_edge(path) == 0 and png_width(path) > 3.4 * style.DPI
    cut = one_panel("Experiment alp_kd_table2: the dev curve of every run, on every task")
    cut.savefig(tmp_path / "cut.png", dpi=style.DPI)  # what the check sees without save's widening
    assert drawn_to_the_edge(tmp_path / "cut.png") > 0


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

    path = universal_kd.pseudo_head_figure(pd.read_csv(tmp_path / "teachers.csv"), tmp_path / "out" / "heads.png")
    assert is_png(path)
    assert is_png(universal_kd.pseudo_head_figure(table, tmp_path / "in_memory.png"))
    with pytest.raises(ValueError, match="no pseudo-head rows"):
        universal_kd.pseudo_head_figure(table[table.component == "teacher"], tmp_path / "none.png")


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
    data = thesis.teacher_curves(curves, {"cola": "mcc", "sara": "f1_micro"})
    data.to_csv(tmp_path / "teacher_curves.csv", index=False)

    assert pd.read_csv(tmp_path / "teacher_curves.csv").to_dict("records") == [
        dict(task="sara", epoch=1, step=3, lr=1e-5, metric="f1_micro", dev_score=87.5),
        dict(task="cola", epoch=1, step=2, lr=4e-5, metric="mcc", dev_score=10.0),
        dict(task="cola", epoch=2, step=4, lr=0.0, metric="mcc", dev_score=35.0),
    ]
    assert is_png(thesis.teacher_curves_figure(data, tmp_path / "out" / "teacher_curves.png", "bert_large"))
    with pytest.raises(ValueError, match="no learning curves of teacher bert_large"):
        thesis.teacher_curves_figure(data.iloc[:0], tmp_path / "none.png", "bert_large")


def test_class_distribution_counts_every_class_of_every_labelled_split(tmp_path):
    """Thesis Fig. A.1's data, hand-counted on a tiny task; a class a split lacks counts 0. Then the figure, with a
    binary task beside it."""
    data = thesis.class_distribution("sara", ["affirm", "greet", "thank"],
                                      {"train": pd.Series([0, 2, 0, 0]), "dev": pd.Series([1, 0])})
    assert data[["split", "label", "class", "count", "proportion"]].to_dict("records") == [
        {"split": "train", "label": 0, "class": "affirm", "count": 3, "proportion": 0.75},
        {"split": "train", "label": 1, "class": "greet", "count": 0, "proportion": 0.0},
        {"split": "train", "label": 2, "class": "thank", "count": 1, "proportion": 0.25},
        {"split": "dev", "label": 0, "class": "affirm", "count": 1, "proportion": 0.5},
        {"split": "dev", "label": 1, "class": "greet", "count": 1, "proportion": 0.5},
        {"split": "dev", "label": 2, "class": "thank", "count": 0, "proportion": 0.0},
    ]
    assert set(data.task) == {"sara"}
    cola = thesis.class_distribution("cola", ["unacceptable", "acceptable"],
                                      {"train": pd.Series([1, 1, 0]), "dev": pd.Series([1])})
    both = pd.concat([cola, data], ignore_index=True)
    assert is_png(thesis.class_distribution_figure(both, tmp_path / "out" / "class_distribution.png"))


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

    assert is_png(thesis.probing_figure(table, tmp_path / "layers.png"))
    assert is_png(thesis.probing_figure(table, tmp_path / "depth.png", relative_depth=True))
    names = {"bert_s": "BERT$_S$", "lstm_s": "LSTM$_S$"}
    assert is_png(thesis.probing_figure(table, tmp_path / "named.png", model_names=names))
    with pytest.raises(ValueError, match="no results"):
        thesis.probing_figure(table.iloc[:0], tmp_path / "empty.png")


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
    assert is_png(thesis.confidence_heatmap(analysis, tmp_path / "confidence.png"))
    assert analysis["mistake_overlap"]["fraction_of_row"]["perfect"]["teacher"] is None  # drawn as an empty cell
    assert is_png(thesis.mistake_overlap_heatmap(analysis, tmp_path / "mistakes.png"))
    assert is_png(thesis.mistake_overlap_heatmap(analysis, tmp_path / "hits.png", of="hits"))


def test_average_confidence_figure_with_a_model_without_mistakes(analysis, tmp_path):
    """Fig. 6.6: a model that makes no mistakes has no mistakes bar (NaN) and no error bar there."""
    table = average_confidence_table(analysis)
    perfect = table[table.model == "perfect"].set_index("subset")
    assert perfect.loc["mistakes", "n"] == 0 and perfect.loc["mistakes", ["mean_confidence", "std_confidence"]].isna().all()
    assert is_png(thesis.average_confidence_figure(table, tmp_path / "average.png", "sst2"))


@pytest.mark.parametrize("models", [["t", "s"], ["tiny_bert_sst2", "lstm_s_sst2", "bert_s_sst2"],
                                    ["teacher", "universal_kd_il_student_of_sst2"]])
def test_heatmap_labels_fit_in_the_figure(models):
    """Thesis-style model names were clipped at the left edge when the heatmap had a fixed aspect."""
    figure, _ = thesis.heatmap(np.eye(len(models)), models, [["1"] * len(models)] * len(models), "viridis", (0, 1),
                                "share")
    figure.canvas.draw()
    for axes in figure.axes:  # the heatmap and its colour bar, with their tick labels
        box = axes.get_tightbbox()
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= figure.bbox.x1 and box.y1 <= figure.bbox.y1


def test_confidence_heatmap_with_an_undefined_correlation(analysis, tmp_path):
    constant = json.loads(json.dumps(analysis))
    constant["confidence_correlation"]["r"]["teacher"]["student"] = None  # a model with constant confidence
    constant["confidence_correlation"]["p"]["teacher"]["student"] = None
    assert is_png(thesis.confidence_heatmap(constant, tmp_path / "confidence.png"))


def test_attention_figure_of_records_with_and_without_gold_distances(tmp_path):
    record = {"method": "alp", "task": "rte", "split": "dev", "student_layer": 3, "student_layers": 4,
              "teacher_layers": list(range(1, 13)), "idx": list(range(10)), "texts": ["a sentence " * 8] * 10,
              "weights": np.full((10, 12), 1 / 12).tolist(), "gold_distance": np.ones((10, 12)).tolist()}
    assert is_png(universal_kd.attention_figure(record, tmp_path / "one.png", "ALP"))
    other = {**record, "method": "universal_kd_il", "idx": list(range(5)), "texts": ["b"] * 5,
             "weights": np.full((5, 12), 1 / 12).tolist(), "gold_distance": None}
    assert is_png(universal_kd.attention_figure([record, other], tmp_path / "two.png"))


# --- attention weights from trained runs ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(trained_teacher, separable, tmp_path_factory):
    """The tiny teacher, its pseudo-heads, and one 3-layer BiLSTM student per method of METHODS."""
    teacher_dir, _ = trained_teacher
    root = tmp_path_factory.mktemp("attention")
    train_pseudo_heads(separable, teacher_dir, HEADS, root / "heads", CPU)
    heads = root / "heads" / "heads.safetensors"
    signals = root / "signals.safetensors"
    compute_signals(transfer_frame(separable), "train", teacher_dir, heads, ["layers"], 32, 64, CPU, signals)
    for method in METHODS:
        distill(separable, None, teacher_dir, signals, STUDENT, method, OPTIONS.get(method, {}), [{"epochs": 1}],
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
    assert is_png(universal_kd.attention_figure(records, tmp_path / "attention.png", "Universal-KD(IL) vs ALP"))


def png_width(path) -> int:
    return int.from_bytes(path.read_bytes()[16:20], "big")


def test_alp_figure3_draws_the_first_student_layer_without_the_gold_panel(runs, separable, tmp_path):
    """ALP-KD Fig. 3: the first student layer's attention (Universal-KD Fig. 3 takes the top one that attends),
    one panel per student named by its model, no pseudo-head panel."""
    run = recompute(runs["root"] / "alp", runs["teacher"], runs["heads"], separable.directory, 6, "dev", 2)
    with torch.no_grad():
        attention = run.method.attention(run.student, run.teacher)  # [6, 2, 2]: student layers 1 and 2
    first = weights_of(runs, separable, "alp", n_examples=6, seed=2, student_layer=1)
    top = weights_of(runs, separable, "alp", n_examples=6, seed=2)
    assert (first["student_layer"], top["student_layer"]) == (1, 2)
    assert first["idx"] == top["idx"] == run.examples["idx"].tolist()
    np.testing.assert_allclose(first["weights"], attention[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(top["weights"], attention[:, 1], rtol=1e-5, atol=1e-6)
    assert not np.allclose(first["weights"], top["weights"])

    records = [{"model": "alp_3_layers", **first}, {"model": "alp_3_layers_top", **top}]
    without = universal_kd.attention_figure(records, tmp_path / "alp.png", "ALP-KD Fig. 3", gold_distance=False)
    with_gold = universal_kd.attention_figure(records, tmp_path / "ukd.png", "Universal-KD Fig. 3")
    assert is_png(without) and is_png(with_gold)
    # two panels 3.2 in wide; three, narrowed to the widest figure (attention_figure's widths)
    widths = [round((2.6 + 3.2 * 2) * style.DPI), round(style.WIDEST * style.DPI)]
    assert [png_width(without), png_width(with_gold)] == widths


# --- ALP-KD Fig. 4: principal components and cosine distances ----------------------------------------------------


def test_principal_components_of_hand_made_vectors():
    """Two clouds 6 apart on x, each spread by 2 on y: the first component is x (36 of the 40 of variance), the
    second y, and each is signed so that its largest entry is positive."""
    vectors = np.array([[3.0, 1.0], [3.0, -1.0], [-3.0, 1.0], [-3.0, -1.0]]) + [10.0, -4.0]  # centred by the PCA
    coordinates, components, explained = principal_components(vectors)
    np.testing.assert_allclose(components, np.eye(2), atol=1e-12)
    np.testing.assert_allclose(coordinates, [[3, 1], [3, -1], [-3, 1], [-3, -1]], atol=1e-12)
    np.testing.assert_allclose(explained, [0.9, 0.1])
    # fitted on the first cloud alone, the first component would be y: the spread within that cloud
    np.testing.assert_allclose(np.abs(principal_components(vectors[:2], k=1)[1]), [[0, 1]], atol=1e-12)


def test_principal_components_agree_with_the_covariance_eigenvectors_and_have_stable_signs():
    vectors = np.random.default_rng(0).normal(size=(30, 6)) * [5, 3, 2, 1, 0.5, 0.1]
    coordinates, components, explained = principal_components(vectors)
    values, vectors_of = np.linalg.eigh(np.cov(vectors.T))  # ascending
    top = vectors_of[:, ::-1][:, :2].T
    np.testing.assert_allclose(np.abs(components @ top.T), np.eye(2), atol=1e-10)  # the same axes, up to sign
    np.testing.assert_allclose(coordinates.var(0, ddof=1), values[::-1][:2])
    np.testing.assert_allclose(explained, values[::-1][:2] / values.sum())
    assert (components[np.arange(2), np.abs(components).argmax(1)] > 0).all()
    flipped_coordinates, flipped_components, _ = principal_components(-vectors)  # same axes, mirrored points
    np.testing.assert_allclose(flipped_components, components, atol=1e-10)
    np.testing.assert_allclose(flipped_coordinates, -coordinates, atol=1e-10)


def test_cosine_distance_by_hand():
    a = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 1.0], [1.0, 0.0], [3.0, 4.0]])
    b = np.array([[2.0, 0.0], [0.0, 3.0], [1.0, 0.0], [-2.0, 0.0], [4.0, 3.0]])
    np.testing.assert_allclose(cosine_distance(a, b), [0, 1, 1 - 1 / np.sqrt(2), 2, 1 - 24 / 25])


def test_a_panel_fits_one_pca_on_teacher_and_students_and_measures_each_student_against_the_teacher():
    teacher = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    students = {"alp": np.array([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), "pkd": np.array([[1.0, 1.0, 0.0], [0.0, -1.0, 0.0]])}
    result = panel(teacher, students)
    joint, _, explained = principal_components(np.concatenate([teacher, students["alp"], students["pkd"]]))
    np.testing.assert_allclose(result["teacher"]["pc"], joint[:2])
    np.testing.assert_allclose(result["students"]["alp"]["pc"], joint[2:4])
    np.testing.assert_allclose(result["students"]["pkd"]["pc"], joint[4:])
    np.testing.assert_allclose(result["explained_variance_ratio"], explained)
    np.testing.assert_allclose(result["students"]["alp"]["cosine_distance"], [0, 0], atol=1e-12)
    np.testing.assert_allclose(result["students"]["pkd"]["cosine_distance"], [1 - 1 / np.sqrt(2), 2])
    assert result["students"]["pkd"]["mean_cosine_distance"] == pytest.approx((3 - 1 / np.sqrt(2)) / 2)


def test_layer_outputs_of_real_runs(runs, separable, tmp_path):
    """The students' layers in the teacher's space (their trained projections: 16 wide, the teacher 32) on the
    same 12 examples, one joint PCA per (student layer, teacher layer) pair."""
    students = {"alp": runs["root"] / "alp", "pkd": runs["root"] / "pkd"}
    data = layer_outputs(students, runs["teacher"], runs["heads"], separable.directory, [[1, 1], [2, 2]],
                         n_examples=12, seed=5)
    json.dumps(data)
    assert data["teacher_layers"] == 2 and len(data["idx"]) == 12
    assert data["models"]["pkd"] == {"method": "pkd", "student": STUDENT, "student_layers": 3}
    by_hand = {}
    for name, run_dir in students.items():
        run = recompute(run_dir, runs["teacher"], runs["heads"], separable.directory, 12, "dev", 5)
        assert run.examples["idx"].tolist() == data["idx"]
        with torch.no_grad():
            by_hand[name] = run.method.to_teacher[1](run.student.layers[1]).double().numpy()
    teacher = run.teacher.layers[:, 1].double().numpy()
    second = data["panels"][1]
    assert (second["student_layer"], second["teacher_layer"]) == (2, 2)
    for name, student in by_hand.items():
        np.testing.assert_allclose(second["students"][name]["cosine_distance"], cosine_distance(student, teacher),
                                   rtol=1e-5, atol=1e-6)
    joint = principal_components(np.concatenate([teacher, by_hand["alp"], by_hand["pkd"]]))[0]
    np.testing.assert_allclose(second["teacher"]["pc"], joint[:12], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(second["students"]["pkd"]["pc"], joint[24:], rtol=1e-4, atol=1e-5)

    table = layer_outputs_table(data)
    table.to_csv(tmp_path / "table.csv", index=False)
    table = pd.read_csv(tmp_path / "table.csv")
    assert len(table) == 2 * 3 * 12 and set(table.model) == {"teacher", "alp", "pkd"}
    assert table[table.model == "teacher"].cosine_distance.isna().all()
    rows = table[(table.student_layer == 2) & (table.model == "pkd")]
    np.testing.assert_allclose(rows.cosine_distance, second["students"]["pkd"]["cosine_distance"])
    assert rows.idx.tolist() == data["idx"] and set(rows.layer) == {2}
    assert is_png(alp_kd.layer_outputs_figure(data, tmp_path / "layer_outputs.png"))


@pytest.mark.parametrize("layers, message", [([[3, 1]], "student layer 3 of alp is 16 wide, the teacher 32"),
                                             ([[4, 1]], "student layer 4 does not exist"),
                                             ([[1, 3]], "teacher layer 3 does not exist")],
                         ids=["top-layer-unprojected", "student-layer", "teacher-layer"])
def test_layer_outputs_name_a_layer_they_cannot_draw(runs, separable, layers, message):
    with pytest.raises(UserError, match=message):
        layer_outputs({"alp": runs["root"] / "alp"}, runs["teacher"], runs["heads"], separable.directory, layers,
                      n_examples=4)
