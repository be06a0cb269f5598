"""Issue 53, item 3: the papers' figures checked by what they draw, not by a PNG existing. Each figure function of
kdflow.reporting.figures and kdflow.reporting.experiment_curves draws a small hand-made input; the Figure it hands
to ``save`` is kept, and its axes are read back through matplotlib's artists: the series (their x, y and labels),
the reference lines, the bars, the heatmaps' cells and texts, the titles, axis and tick labels, and the legends. The
expected values are the input's numbers, worked out by hand."""

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import REPO
from matplotlib.colors import to_hex

from kdflow.reporting import experiment_curves
from kdflow.reporting.figures import alp_kd, thesis, universal_kd
from kdflow.reporting.figures import style as figure_style

# --- reading a drawn figure back ---------------------------------------------------------------------------------


@pytest.fixture
def drawn(monkeypatch):
    """The Figures the functions under test save, in order; each is still written by the real ``save``."""
    saved, real_save = [], figure_style.save

    def recording_save(figure, path):
        saved.append(figure)
        return real_save(figure, path)

    for module in (thesis, universal_kd, alp_kd, experiment_curves):  # each imports save by name
        monkeypatch.setattr(module, "save", recording_save)
    return saved


def label(artist) -> str:
    """An artist's label, '' where matplotlib named it (``_child3``): such an artist is not in a legend."""
    text = artist.get_label()
    return "" if text.startswith("_") else text


def series(line) -> tuple[str, list[float], list[float]]:
    """A line as (label, x, y)."""
    return (label(line), np.asarray(line.get_xdata(), dtype=float).tolist(),
            np.asarray(line.get_ydata(), dtype=float).tolist())


def style(artist) -> tuple[str, str]:
    """A line's colour (hex) and dash pattern."""
    return to_hex(artist.get_color()), artist.get_linestyle()


def data_lines(axes) -> list:
    """The lines of ``axes`` drawn in data coordinates: its series, not its horizontal or vertical reference lines."""
    return [line for line in axes.get_lines() if line.get_transform() is axes.transData]


def horizontal_lines(axes) -> list:
    """The lines ``axhline`` drew across ``axes``."""
    return [line for line in axes.get_lines() if line.get_transform() is axes.get_yaxis_transform()]


def vertical_lines(axes) -> list[float]:
    """The x of each line ``axvline`` drew across ``axes``."""
    return [float(line.get_xdata()[0]) for line in axes.get_lines()
            if line.get_transform() is axes.get_xaxis_transform()]


def at(line) -> float:
    """The y of a horizontal reference line."""
    return float(line.get_ydata()[0])


def entries(legend) -> list[str]:
    return [text.get_text() for text in legend.get_texts()]


def legend_colours(legend) -> dict[str, str]:
    """Each legend entry's colour (hex)."""
    return {text.get_text(): to_hex(handle.get_color())
            for text, handle in zip(legend.get_texts(), legend.legend_handles, strict=True)}


def tick_labels(axes, axis="x") -> list[str]:
    return [text.get_text() for text in (axes.get_xticklabels() if axis == "x" else axes.get_yticklabels())]


def with_title(figure) -> dict:
    """The figure's titled axes by title."""
    return {axes.get_title(): axes for axes in figure.axes if axes.get_title()}


def image_values(axes) -> np.ndarray:
    """A heatmap's cells, NaN where the image masks them (drawn as blank)."""
    return np.ma.filled(np.ma.asarray(axes.images[0].get_array(), dtype=float), np.nan)


def colour_bar_label(figure, number=0) -> str:
    """The label of the ``number``-th colour bar of ``figure``."""
    return [axes for axes in figure.axes if axes.get_label() == "<colorbar>"][number].get_ylabel()


# --- thesis Fig. 4.2 ---------------------------------------------------------------------------------------------


def test_teacher_curves_draw_each_tasks_dev_score_per_step_and_the_learning_rate_on_a_right_axis(drawn, tmp_path):
    """Rows as thesis.teacher_curves gives them (task in the order given), CoLA's listed out of step order."""
    data = pd.DataFrame([("sara", 1, 3, 1e-5, "f1_micro", 87.5), ("cola", 2, 4, 0.0, "mcc", 35.0),
                         ("cola", 1, 2, 4e-5, "mcc", 10.0)],
                        columns=["task", "epoch", "step", "lr", "metric", "dev_score"])
    thesis.teacher_curves_figure(data, tmp_path / "curves.png", "bert_large")
    (figure,) = drawn

    panels = [axes for axes in figure.axes if axes.get_title()]
    rates = [axes for axes in figure.axes if axes.get_ylabel() == "learning rate η"]
    assert [axes.get_title() for axes in panels] == ["sara", "cola"]
    assert [axes.get_ylabel() for axes in panels] == ["dev f1_micro (×100)", "dev mcc (×100)"]
    assert [[series(line) for line in axes.get_lines()] for axes in panels] == [
        [("", [3], [87.5])], [("", [2, 4], [10.0, 35.0])]]
    assert [[series(line) for line in axes.get_lines()] for axes in rates] == [
        [("", [3], [1e-5])], [("", [2, 4], [4e-5, 0.0])]]
    for panel, rate in zip(panels, rates, strict=True):  # each task's rate on the right axis of its own panel
        assert rate.get_shared_x_axes().joined(panel, rate) and rate.get_ylim()[0] == 0
    assert entries(figure.legends[0]) == ["dev score (main metric)", "learning rate η (right axis)"]
    assert figure.get_suptitle() == "bert_large: dev score and learning rate over fine-tuning"


# --- Universal-KD Fig. 3 ----------------------------------------------------------------------------------------


def teacher_row(teacher, task, split, metric, value):
    return {"teacher": teacher, "task": task, "component": "teacher", "layer": pd.NA, "split": split,
            "metric": metric, "value": value, "gold_distance": pd.NA}


def head_row(teacher, task, layer, metric, value, distance):
    return {"teacher": teacher, "task": task, "component": "pseudo_head", "layer": layer, "split": "dev",
            "metric": metric, "value": value, "gold_distance": distance}


def test_pseudo_heads_draw_distance_and_main_metric_per_layer_and_the_teachers_own_dev_score(drawn, tmp_path):
    """results/tables/teachers.csv rows (kdflow.reporting.tables.teacher_table): a small CoLA teacher whose main
    metric (listed first) is MCC, with its own dev and test scores, and an SST-2 teacher without its own rows."""
    table = pd.DataFrame([
        teacher_row("small", "cola", "dev", "mcc", 50.0), teacher_row("small", "cola", "dev", "accuracy", 80.0),
        teacher_row("small", "cola", "test", "mcc", 40.0),
        head_row("small", "cola", 2, "mcc", 30.0, 0.4), head_row("small", "cola", 2, "accuracy", 70.0, 0.4),
        head_row("small", "cola", 1, "mcc", 10.0, 0.9), head_row("small", "cola", 1, "accuracy", 60.0, 0.9),
        head_row("large", "sst2", 1, "accuracy", 55.0, 0.7), head_row("large", "sst2", 3, "accuracy", 85.0, 0.2),
        head_row("large", "sst2", 2, "accuracy", 75.0, 0.5),
    ]).astype({"layer": "Int64"})
    universal_kd.pseudo_head_figure(table, tmp_path / "heads.png")
    (figure,) = drawn

    distance, score = figure.axes
    assert [series(line) for line in distance.get_lines()] == [
        ("small · cola (mcc)", [1, 2], [0.9, 0.4]), ("large · sst2 (accuracy)", [1, 2, 3], [0.7, 0.5, 0.2])]
    assert [series(line)[1:] for line in data_lines(score)] == [([1, 2], [10.0, 30.0]), ([1, 2, 3], [55.0, 75.0, 85.0])]
    (own,) = horizontal_lines(score)  # the small teacher's dev MCC, not its test MCC or dev accuracy; none for large
    assert at(own) == 50.0 and style(own) == (style(distance.get_lines()[0])[0], ":")
    assert [style(line)[0] for line in data_lines(score)] == [style(line)[0] for line in distance.get_lines()]
    assert (distance.get_xlabel(), score.get_xlabel()) == ("teacher layer", "teacher layer")
    assert entries(figure.legends[0]) == ["small · cola (mcc)", "large · sst2 (accuracy)", "teacher itself (dev)"]


LONG_TEXT = "a sentence that is longer than forty characters, cut"


def attention_record(method, weights, **fields):
    return {"method": method, "task": "rte", "split": "dev", "student_layer": 2, "student_layers": 6,
            "teacher_layers": [1, 2, 3], "idx": [4, 9], "texts": ["short", LONG_TEXT], "weights": weights,
            "gold_distance": [[0.9, 0.5, 0.1], [0.8, 0.4, 0.3]], **fields}


def test_attention_draws_each_records_weights_beside_the_gold_distances_on_one_colour_scale(drawn, tmp_path):
    """Two students on the same two examples (kdflow.analysis.attention_maps.attention_weights records), one named
    by its model; then the same without the gold-distance panel (ALP-KD Fig. 3)."""
    records = [attention_record("alp", [[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]], model="alp_6"),
               attention_record("universal_kd_il", [[0.1, 0.1, 0.8], [0.7, 0.2, 0.1]])]
    universal_kd.attention_figure(records, tmp_path / "attention.png")
    universal_kd.attention_figure(records, tmp_path / "alp.png", "ALP-KD Fig. 3", gold_distance=False)
    with_gold, without = drawn

    panels = [axes for axes in with_gold.axes if axes.images]
    assert [axes.get_title() for axes in panels] == [
        "pseudo-head distance to gold", "alp_6 (alp)\nstudent layer 2 of 6", "universal_kd_il\nstudent layer 2 of 6"]
    np.testing.assert_allclose(image_values(panels[0]), [[0.9, 0.5, 0.1], [0.8, 0.4, 0.3]])
    np.testing.assert_allclose(image_values(panels[1]), [[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    np.testing.assert_allclose(image_values(panels[2]), [[0.1, 0.1, 0.8], [0.7, 0.2, 0.1]])
    assert [panel.images[0].get_clim() for panel in panels[1:]] == [(0, 0.8), (0, 0.8)]  # the largest weight of both
    assert all(tick_labels(panel) == ["1", "2", "3"] for panel in panels)
    assert tick_labels(panels[0], "y") == ["4: short", "9: a sentence that is longer than forty ch…"]
    assert panels[0].get_ylabel() == "example (idx: text)"
    assert with_gold.get_suptitle() == "Attention over teacher layers (rte, dev)"
    assert [colour_bar_label(with_gold, number) for number in (0, 1)] == ["distance to gold (lower: closer)",
                                                                          "attention weight"]
    assert [axes.get_title() for axes in without.axes if axes.images] == [
        "alp_6 (alp)\nstudent layer 2 of 6", "universal_kd_il\nstudent layer 2 of 6"]
    assert without.get_suptitle() == "ALP-KD Fig. 3"


# --- ALP-KD Fig. 4 ----------------------------------------------------------------------------------------------


def student_outputs(pc, cosine_distance):
    return {"pc": pc, "cosine_distance": cosine_distance, "mean_cosine_distance": sum(cosine_distance) / 3}


def test_layer_outputs_draw_each_models_components_and_each_students_cosine_distance_per_example(drawn, tmp_path):
    """kdflow.analysis.layer_outputs.layer_outputs' result for two layer pairs, two students and three examples."""
    first = {"student_layer": 1, "teacher_layer": 2, "explained_variance_ratio": [0.62, 0.21],
             "teacher": {"pc": [[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]]},
             "students": {"alp_s": student_outputs([[1.1, 0.1], [0.2, 0.9], [-1.0, -0.8]], [0.1, 0.2, 0.3]),
                          "pkd_s": student_outputs([[2.0, 0.0], [0.0, 2.0], [-2.0, -2.0]], [0.5, 0.4, 0.6])}}
    second = {"student_layer": 2, "teacher_layer": 4, "explained_variance_ratio": [0.5, 0.3],
              "teacher": {"pc": [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]},
              "students": {"alp_s": student_outputs([[0.1, 0.0], [1.0, 0.9], [2.2, 2.0]], [0.0, 0.0, 0.3]),
                           "pkd_s": student_outputs([[0.0, 1.0], [1.0, 0.0], [3.0, 3.0]], [0.3, 0.3, 0.3])}}
    data = {"task": "rte", "split": "dev", "idx": [7, 3, 5], "panels": [first, second],
            "models": {"alp_s": {"method": "alp"}, "pkd_s": {"method": "pkd"}}}
    alp_kd.layer_outputs_figure(data, tmp_path / "layer_outputs.png")
    (figure,) = drawn

    scatters, distances = figure.axes[:2], figure.axes[2:]
    for scatter, distance, entry in zip(scatters, distances, data["panels"], strict=True):
        assert [(collection.get_label(), collection.get_offsets().tolist()) for collection in scatter.collections] == [
            ("teacher", entry["teacher"]["pc"]), ("alp_s (alp)", entry["students"]["alp_s"]["pc"]),
            ("pkd_s (pkd)", entry["students"]["pkd_s"]["pc"])]
        assert [series(line)[1:] for line in distance.get_lines()] == [
            ([1, 2, 3], entry["students"][name]["cosine_distance"]) for name in ("alp_s", "pkd_s")]
        colours = [to_hex(collection.get_facecolor()[0]) for collection in scatter.collections]
        assert [style(line)[0] for line in distance.get_lines()] == colours[1:] and len(set(colours)) == 3
    assert [axes.get_title() for axes in scatters] == ["student layer 1, teacher layer 2",
                                                       "student layer 2, teacher layer 4"]
    assert [(axes.get_xlabel(), axes.get_ylabel()) for axes in scatters] == [
        ("PC1 (62% of variance)", "PC2 (21% of variance)"), ("PC1 (50% of variance)", "PC2 (30% of variance)")]
    assert [axes.get_ylabel() for axes in distances] == ["cosine distance to teacher layer 2",
                                                         "cosine distance to teacher layer 4"]
    assert [entries(axes.get_legend()) for axes in distances] == [["alp_s: mean 0.2", "pkd_s: mean 0.5"],
                                                                   ["alp_s: mean 0.1", "pkd_s: mean 0.3"]]
    assert entries(figure.legends[0]) == ["teacher", "alp_s (alp)", "pkd_s (pkd)"]
    assert figure.get_suptitle() == "Layer outputs of students and teacher (rte, dev, 3 examples)"


# --- the figures of recomputed students: computed by the analysis stage, drawn from its file alone ---------------


def replayed_figure(tmp_path, rule, script, analysis, params, wildcards) -> bytes:
    """Run a reporting rule's ``script`` as Snakemake would (kdflow.workflow.replay, in its own process) on the
    analysis rule's JSON ``analysis`` written as its rule writes it, in a directory that holds nothing else; the PNG
    it draws."""
    work = tmp_path / rule
    (work / "analysis").mkdir(parents=True)
    (work / "analysis/data.json").write_text(json.dumps(analysis, indent=1) + "\n")
    job = {"rule": rule, "script": script, "threads": 1, "input": {"items": ["analysis/data.json"], "names": {}},
           "output": {"items": ["figure.png"], "names": {}}, "log": {"items": [f"{rule}.log"], "names": {}},
           "params": {"items": list(params.values()), "names": {name: [i, None] for i, name in enumerate(params)}},
           "wildcards": {"items": list(wildcards.values()),
                         "names": {name: [i, None] for i, name in enumerate(wildcards)}},
           "resources": {"items": [], "names": {}}}
    (work / "jobs.json").write_text(json.dumps({"config": {}, "jobs": [job]}))
    subprocess.run([sys.executable, "-c", "from pathlib import Path; from kdflow.workflow.replay import run_job; "
                    "run_job(Path('jobs.json'), 0)"], cwd=work, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    return (work / "figure.png").read_bytes()


def test_the_figures_of_recomputed_students_are_drawn_from_the_analysis_rules_json_alone(tmp_path):
    """Issue 54: rules compute_attention_maps and compute_layer_outputs (stage analysis) recompute the students and
    write JSON; rules figure_attention_maps and figure_layer_outputs (reporting) read it and draw, loading no model.
    The PNG the reporting script draws from the file is the one drawn from the computed data itself, byte for byte:
    the JSON holds every number exactly (floats such as 1/3 included)."""
    third = 1 / 3
    records = [attention_record("alp", [[third, third, third], [0.6, 0.3, 0.1]], model="alp_6"),
               attention_record("universal_kd_il", [[0.1, 0.1, 0.8], [0.1 + 0.2, 0.2, 0.5]], model="ukd_il")]
    spec = {"task": "rte", "gold_distance": True}
    drawn = replayed_figure(tmp_path, "figure_attention_maps", "figure_attention_maps.py", records, {"spec": spec},
                            {"figure": "universal_kd_figure3"})
    direct = universal_kd.attention_figure(records, tmp_path / "attention.png",
                                           "Attention over the teacher's layers (rte, universal_kd_figure3)", True)
    assert drawn == direct.read_bytes()

    panel = {"student_layer": 1, "teacher_layer": 2, "explained_variance_ratio": [2 / 3, 0.1 + 0.2],
             "teacher": {"pc": [[1.0, 0.0], [third, 1.0], [-1.0, -1.0]]},
             "students": {"alp_s": student_outputs([[1.1, 0.1], [0.2, 0.9], [-1.0, -0.8]], [third, 0.2, 0.3]),
                          "pkd_s": student_outputs([[2.0, 0.0], [0.0, 2.0], [-2.0, -2.0]], [0.5, 0.4, 0.6])}}
    data = {"task": "rte", "split": "dev", "idx": [7, 3, 5], "panels": [panel],
            "models": {"alp_s": {"method": "alp"}, "pkd_s": {"method": "pkd"}}}
    drawn = replayed_figure(tmp_path, "figure_layer_outputs", "figure_layer_outputs.py", data,
                            {"spec": {"examples": 3}}, {"task": "rte"})
    assert drawn == alp_kd.layer_outputs_figure(data, tmp_path / "layer_outputs.png").read_bytes()


# --- thesis Figs. 6.1, 6.2, 6.3 and C.1 -------------------------------------------------------------------------


def probes(model, task, accuracies):
    """results/tables/probing.csv rows: test accuracy (x100) per probed layer."""
    return [{"model": model, "task": task, "layer": layer, "kind": "probe", "test_accuracy": accuracy,
             "dev_accuracy": accuracy} for layer, accuracy in accuracies.items()]


def baseline(kind, task, accuracy):
    return {"model": kind, "task": task, "layer": pd.NA, "kind": kind, "test_accuracy": accuracy,
            "dev_accuracy": np.nan}


def test_probing_draws_each_models_accuracy_per_layer_and_the_baselines_per_task(drawn, tmp_path):
    """A 4-layer teacher probed at layers 0, 1 and 4, a 2-layer student on Length only; the majority class of two
    seeds on Length (their mean is drawn), of one on Tense, and the morphology guess on Tense. Tense rows come first:
    panels follow SentEval's task order. Then relative depth, for the models named, in the order named."""
    table = pd.DataFrame(probes("teacher", "Tense", {0: 50.0, 4: 65.0})
                         + probes("teacher", "Length", {0: 60.0, 1: 70.0, 4: 80.0})
                         + probes("student", "Length", {0: 58.0, 1: 75.0, 2: 77.0})
                         + [baseline("majority", "Length", 48.0), baseline("majority", "Length", 52.0),
                            baseline("majority", "Tense", 51.0), baseline("morphology", "Tense", 70.0)])
    table = table.astype({"layer": "Int64"})
    thesis.probing_figure(table, tmp_path / "layers.png")
    thesis.probing_figure(table, tmp_path / "depth.png", {"student": "BERT$_S$", "teacher": "BERT$_T$"},
                           relative_depth=True)
    layers, depth = drawn

    assert list(with_title(layers)) == ["Length", "Tense"]
    length, tense = with_title(layers).values()
    assert [series(line) for line in data_lines(length)] == [("teacher", [0, 1, 4], [60.0, 70.0, 80.0]),
                                                             ("student", [0, 1, 2], [58.0, 75.0, 77.0])]
    assert [series(line) for line in data_lines(tense)] == [("teacher", [0, 4], [50.0, 65.0])]
    assert [(label(line), at(line)) for line in horizontal_lines(length)] == [("majority class", 50.0)]
    assert [(label(line), at(line)) for line in horizontal_lines(tense)] == [("majority class", 51.0),
                                                                             ("morphology guess", 70.0)]
    assert [length.xaxis.get_major_formatter()(x, 0) for x in (0, 1, 4)] == ["E", "1", "4"]
    assert (length.get_ylabel(), length.get_xlabel()) == ("test accuracy (%)", "layer (E = embeddings)")
    assert entries(layers.legends[0]) == ["teacher", "student", "majority class", "morphology guess"]

    length, tense = with_title(depth).values()
    assert [series(line) for line in data_lines(length)] == [("BERT$_S$", [0, 0.5, 1], [58.0, 75.0, 77.0]),
                                                             ("BERT$_T$", [0, 0.25, 1], [60.0, 70.0, 80.0])]
    assert [series(line) for line in data_lines(tense)] == [("BERT$_T$", [0, 1], [50.0, 65.0])]
    assert length.get_xlim() == (-0.05, 1.05) and length.get_xlabel() == "layer / layers (0 = embeddings)"
    assert entries(depth.legends[0]) == ["BERT$_S$", "BERT$_T$", "majority class", "morphology guess"]


def thesis_row(model, family, downstream, task, layer, score, kdflow_model=None, kdflow=np.nan, drawn_in="6.1"):
    """A row of kdflow.reporting.probing_reference.thesis_comparison: a thesis score and kdflow's beside it."""
    return {"thesis_model": model, "family": family, "downstream_task": downstream, "task": task,
            "thesis_layer": layer, "thesis": score, "model": kdflow_model, "kdflow": kdflow, "thesis_figures": drawn_in}


def test_thesis_probing_draws_the_thesis_dashed_beside_kdflow_solid_per_family_with_the_figures_lines(drawn, tmp_path):
    """Fig. 6.1 of a hand-made comparison: the SST-2 teacher at thesis layers E, 2 and 6 (kdflow probed its layers
    0-2), an LSTM student compared at its top BiLSTM layer only (horizontal lines), a pre-trained model (downstream
    "none") without a kdflow counterpart, and a Fig. 6.2 model that must not appear; the thesis's human line on
    both tasks and Conneau et al.'s best on Length in Fig. 6.2 only."""
    comparison = pd.DataFrame([
        thesis_row("BERT_T[SST-2]", "teacher", "SST-2", "Length", "E", 98.0, "teacher", 96.0),
        thesis_row("BERT_T[SST-2]", "teacher", "SST-2", "Length", "2", 90.0, "teacher", 91.5),
        thesis_row("BERT_T[SST-2]", "teacher", "SST-2", "Length", "6", 80.0, "teacher"),
        thesis_row("LSTM_S[SST-2]", "LSTM_S student", "SST-2", "Length", "last (BiLSTM)", 60.0, "lstm", 62.5,
                   "6.1 6.2"),
        thesis_row("BERT_base", "pre-trained", "none", "Length", "E", 97.0),
        thesis_row("BERT_base", "pre-trained", "none", "Length", "1", 95.0),
        thesis_row("BERT_T[SST-2]", "teacher", "SST-2", "Tense", "E", 70.0, "teacher"),
        thesis_row("BERT_S[CoLA]", "BERT_S student", "CoLA", "Length", "1", 93.0, drawn_in="6.2"),
    ])
    probing = pd.DataFrame(probes("teacher", "Length", {0: 96.0, 1: 93.0, 2: 91.5})
                           + probes("teacher", "Tense", {0: 68.0, 1: 66.0})
                           + probes("lstm", "Length", {1: 70.0, 2: 62.5})
                           + [baseline("majority", "Length", 20.0)]).astype({"layer": "Int64"})
    reference = pd.DataFrame({"baseline": ["human", "conneau_best", "human"], "task": ["Length", "Length", "Tense"],
                              "score": [100.0, 99.3, 95.0], "thesis_figures": ["6.1 6.2", "6.2", "6.1"]})
    thesis.thesis_probing_figure(comparison, probing, "6.1", tmp_path / "6.1.png", reference)
    (figure,) = drawn

    assert list(with_title(figure)) == ["Length", "Tense"]
    length, tense = with_title(figure).values()
    colours = legend_colours(figure.legends[0])
    teacher, lstm = colours["teacher (kdflow: teacher)"], colours["LSTM_S student (kdflow: lstm)"]
    pretrained = colours["pre-trained (thesis only)"]
    assert len({teacher, lstm, pretrained}) == 3
    assert [(series(line)[1:], style(line)) for line in data_lines(length)] == [
        (([0, 2, 6], [98.0, 90.0, 80.0]), (teacher, "--")),  # the thesis
        (([0, 1, 2], [96.0, 93.0, 91.5]), (teacher, "-")),  # kdflow, every layer it probed
        (([0, 1], [97.0, 95.0]), (pretrained, "--"))]
    assert [(label(line), at(line), style(line)) for line in horizontal_lines(length)] == [
        ("", 60.0, (lstm, "--")), ("", 62.5, (lstm, "-")),
        ("majority class", 20.0, ("#7f7f7f", ":")),
        ("human (thesis: Conneau et al. 2018)", 100.0, ("#56b4e9", "--"))]
    assert [(series(line)[1:], style(line)) for line in data_lines(tense)] == [
        (([0], [70.0]), (teacher, "--")), (([0, 1], [68.0, 66.0]), (teacher, "-"))]
    assert [(label(line), at(line)) for line in horizontal_lines(tense)] == [("human (thesis: Conneau et al. 2018)",
                                                                             95.0)]
    assert length.get_ylabel() == "SST-2\ntest accuracy (%)" and length.get_xlabel() == "layer (E = embeddings)"
    assert entries(figure.legends[0]) == ["teacher (kdflow: teacher)", "LSTM_S student (kdflow: lstm)",
                                          "pre-trained (thesis only)", "kdflow",
                                          "thesis (Sučík 2020)", "majority class",
                                          "human (thesis: Conneau et al. 2018)"]
    assert figure.get_suptitle().startswith("Thesis Fig. 6.1: probing accuracy per layer")


# --- thesis Figs. 6.5, 6.6 and C.2 ------------------------------------------------------------------------------

MODELS = ["teacher", "student", "perfect"]


def square(*rows):
    """A model-by-model matrix as kdflow.analysis.prediction_analysis.analyse writes it: row -> column -> value."""
    return {row_model: dict(zip(MODELS, row, strict=True)) for row_model, row in zip(MODELS, rows, strict=True)}


# The perfect model makes no mistakes: its row of mistake overlaps is undefined; its confidence correlation with the
# teacher is undefined (a model of constant confidence).
ANALYSIS = {
    "task": "sst2", "models": MODELS,
    "confidence_correlation": {"n": 12, "r": square([1.0, 0.5, None], [0.5, 1.0, -0.2], [None, -0.2, 1.0]),
                               "p": square([0.0, 0.01, None], [0.01, 0.0, 0.3], [None, 0.3, 0.0])},
    "mistake_overlap": {"fraction_of_row": square([1.0, 0.5, 0.0], [0.25, 1.0, 0.0], [None, None, None]),
                        "count": square([2, 1, 0], [1, 4, 0], [0, 0, 0])},
    "hit_overlap": {"fraction_of_row": square([1.0, 0.8, 1.0], [1.0, 1.0, 1.0], [0.6, 0.5, 1.0]),
                    "count": square([10, 8, 10], [8, 8, 8], [10, 8, 12])},
}


def test_confidence_heatmap_draws_each_pairs_correlation_starred_where_significant(drawn, tmp_path):
    thesis.confidence_heatmap(ANALYSIS, tmp_path / "confidence.png")
    (figure,) = drawn

    axes = figure.axes[0]
    np.testing.assert_allclose(image_values(axes), [[1.0, 0.5, np.nan], [0.5, 1.0, -0.2], [np.nan, -0.2, 1.0]])
    assert axes.images[0].get_clim() == (-1, 1)
    assert [text.get_text() for text in axes.texts] == [  # no star on the diagonal, nor for p = 0.3
        "1.00", "0.50*", "—", "0.50*", "1.00", "-0.20", "—", "-0.20", "1.00"]
    assert [(text.get_position()) for text in axes.texts[:3]] == [(0, 0), (1, 0), (2, 0)]  # row by row
    assert tick_labels(axes) == MODELS and tick_labels(axes, "y") == MODELS
    assert colour_bar_label(figure) == "Pearson r"
    assert figure.get_suptitle() == "sst2: correlation of confidences (n = 12; * p < 0.05)"


def test_mistake_overlap_heatmap_draws_the_share_of_the_row_models_mistakes_or_hits_with_counts(drawn, tmp_path):
    thesis.mistake_overlap_heatmap(ANALYSIS, tmp_path / "mistakes.png")
    thesis.mistake_overlap_heatmap(ANALYSIS, tmp_path / "hits.png", of="hits")
    mistakes, hits = drawn

    axes = mistakes.axes[0]
    np.testing.assert_allclose(image_values(axes), [[100, 50, 0], [25, 100, 0], [np.nan] * 3])
    assert axes.images[0].get_clim() == (0, 100)
    assert [text.get_text() for text in axes.texts] == [  # the perfect model's row is empty
        "100%\n(2)", "50%\n(1)", "0%\n(0)", "25%\n(1)", "100%\n(4)", "0%\n(0)", "—", "—", "—"]
    assert tick_labels(axes) == MODELS and tick_labels(axes, "y") == MODELS
    assert (axes.get_xlabel(), axes.get_ylabel()) == ("M2 (column)", "M1 (row)")
    assert colour_bar_label(mistakes) == "% of M1's mistakes"
    assert mistakes.get_suptitle() == "sst2: share of M1's mistakes that M2 also makes"

    np.testing.assert_allclose(image_values(hits.axes[0]), [[100, 80, 100], [100, 100, 100], [60, 50, 100]])
    assert [text.get_text() for text in hits.axes[0].texts][6:] == ["60%\n(10)", "50%\n(8)", "100%\n(12)"]
    assert colour_bar_label(hits) == "% of M1's hits"
    assert hits.get_suptitle() == "sst2: share of M1's hits that M2 also makes"


def test_average_confidence_draws_a_bar_per_model_and_subset_with_its_std_as_error_bar(drawn, tmp_path):
    """kdflow.analysis.prediction_analysis.average_confidence_table's rows: the teacher's one mistake has no std,
    the perfect model no mistakes at all."""
    nan = np.nan
    values = {("teacher", "all"): (0.9, 0.05), ("teacher", "hits"): (0.92, 0.04), ("teacher", "mistakes"): (0.7, nan),
              ("student", "all"): (0.8, 0.1), ("student", "hits"): (0.85, 0.08), ("student", "mistakes"): (0.66, 0.09),
              ("perfect", "all"): (0.95, 0.02), ("perfect", "hits"): (0.95, 0.02), ("perfect", "mistakes"): (nan, nan)}
    table = pd.DataFrame([{"model": model, "subset": subset, "n": 1, "mean_confidence": mean, "std_confidence": std}
                          for (model, subset), (mean, std) in values.items()])
    thesis.average_confidence_figure(table, tmp_path / "average.png", "sst2")
    (figure,) = drawn

    axes = figure.axes[0]
    bars = [container for container in axes.containers if hasattr(container, "errorbar")]
    assert [container.get_label() for container in bars] == ["all", "hits", "mistakes"]
    width = 0.8 / 3
    for offset, container, subset in zip((-width, 0, width), bars, ("all", "hits", "mistakes"), strict=True):
        means, stds = np.array([values[model, subset] for model in MODELS]).T
        np.testing.assert_allclose([bar.get_height() for bar in container], means)
        np.testing.assert_allclose([bar.get_x() + bar.get_width() / 2 for bar in container], np.arange(3) + offset)
        segments = container.errorbar.lines[2][0].get_segments()  # an error bar from mean - std to mean + std
        assert [segment[:, 1].tolist() if len(segment) else None for segment in segments] == [
            None if np.isnan(std) else pytest.approx([mean - std, mean + std]) for mean, std in zip(means, stds)]
    assert tick_labels(axes) == MODELS and axes.get_ylim() == (0, 1.1)
    assert entries(figure.legends[0]) == ["all", "hits", "mistakes"]
    assert figure.get_suptitle() == "sst2: average confidence (dev; error bars: std)"


# --- thesis Fig. A.1 ---------------------------------------------------------------------------------------------


def distribution(task, split, classes, counts):
    """thesis.class_distribution's rows of one split: per class its examples and their share of the split."""
    shares = [count / sum(counts) for count in counts]
    return [{"task": task, "split": split, "label": label, "class": name, "count": count, "proportion": share}
            for label, (name, count, share) in enumerate(zip(classes, counts, shares, strict=True))]


def test_class_distribution_draws_dev_shares_as_bars_sorted_per_task_and_other_splits_as_markers(drawn, tmp_path):
    """thesis.class_distribution rows of a binary task and a three-class task whose test split is labelled."""
    cola, sara = ["unacceptable", "acceptable"], ["affirm", "greet", "thank"]
    data = pd.DataFrame(distribution("cola", "train", cola, [6, 6]) + distribution("cola", "dev", cola, [1, 3])
                        + distribution("sara", "train", sara, [8, 8, 4]) + distribution("sara", "dev", sara, [5, 2, 3])
                        + distribution("sara", "test", sara, [6, 1, 3]))
    thesis.class_distribution_figure(data, tmp_path / "classes.png")
    (figure,) = drawn

    axes = figure.axes[0]
    assert tick_labels(axes) == ["acceptable", "unacceptable", "affirm", "thank", "greet"]
    np.testing.assert_allclose([bar.get_height() for bar in axes.patches], [75, 25, 50, 30, 20])
    colours = [to_hex(bar.get_facecolor()) for bar in axes.patches]
    assert colours[:2] == [colours[0]] * 2 and colours[2:] == [colours[2]] * 3 and colours[0] != colours[2]
    train, test = axes.get_lines()
    assert (label(train), label(test)) == ("train", "test") and train.get_linestyle() == test.get_linestyle() == "None"
    by_position = {line.get_label(): dict(zip(*series(line)[1:])) for line in (train, test)}
    assert by_position["train"] == pytest.approx({0: 50, 1: 50, 2: 40, 3: 20, 4: 40})  # each above its class's bar
    assert by_position["test"] == pytest.approx({2: 60, 3: 30, 4: 10})
    assert entries(figure.legends[0]) == ["cola (dev)", "sara (dev)", "train", "test"]
    assert axes.get_ylabel() == "% of the split's examples"


# --- thesis Figs. B.1-B.12 ---------------------------------------------------------------------------------------

STUDY = {"study": "lr", "student_label": "LSTM_S"}
TASKS = {"cola": {"task": "cola", "task_name": "CoLA", "metric": "mcc"},
         "sst2": {"task": "sst2", "task_name": "SST-2", "metric": "accuracy"}}


def smoothed_line(task, point, epochs, smoothed):
    return pd.DataFrame({**STUDY, **TASKS[task], "point": point, "epoch": epochs, "smoothed": smoothed})


def test_exploration_curves_draw_each_values_smoothed_line_and_best_evaluation_per_panel(drawn, tmp_path):
    """kdflow.reporting.exploration_curves.curve_lines' lines and best evaluations of a learning-rate study on two
    tasks (the third value not run on SST-2), and two seeds of one value unsmoothed above."""
    labels = {"lr": {"a": ["η=5e-4", "decay"], "b": ["η=5e-4", "no decay"], "c": ["η=1e-3", "decay"]}}
    lines = pd.concat([smoothed_line("cola", "b", [1, 2, 3], [12.0, 18.0, 30.0]),
                       smoothed_line("cola", "a", [1, 2, 3], [10.0, 20.0, 25.0]),
                       smoothed_line("cola", "c", [1, 2, 3], [5.0, 6.0, 7.0]),
                       smoothed_line("sst2", "a", [1, 2], [80.0, 85.0]),
                       smoothed_line("sst2", "b", [1, 2], [70.0, 75.0])],
                      ignore_index=True)
    best = pd.DataFrame([dict(**STUDY, task=task, point=point, epoch=epoch, dev=dev) for task, point, epoch, dev in [
        ("cola", "a", 2, 22.0), ("cola", "b", 3, 31.0), ("cola", "c", 3, 8.0), ("sst2", "a", 2, 86.0),
        ("sst2", "b", 1, 71.0)]])
    unsmoothed = pd.DataFrame([dict(**STUDY, **TASKS["cola"], point="a", seed=seed, epoch=epoch, dev=dev)
                               for seed, devs in ((2, [12.0, 19.0, 26.0]), (1, [8.0, 21.0, 24.0]))
                               for epoch, dev in zip([1, 2, 3], devs)])
    thesis.exploration_curves_figure(lines, best, labels, tmp_path / "curves.png", "B.3", unsmoothed)
    (figure,) = drawn

    panels = with_title(figure)
    assert list(panels) == ["LSTM_S · CoLA, η=5e-4, decay: every evaluation, unsmoothed", "LSTM_S · CoLA",
                            "LSTM_S · SST-2"]
    raw, cola, sst2 = panels.values()
    assert [series(line) for line in raw.get_lines()] == [("seed 1", [1, 2, 3], [8.0, 21.0, 24.0]),
                                                          ("seed 2", [1, 2, 3], [12.0, 19.0, 26.0])]

    def curves_and_marks(axes):
        drawn_lines = [line for line in axes.get_lines() if len(line.get_xdata())]
        curves = [line for line in drawn_lines if line.get_marker() != "x"]
        marks = [line for line in drawn_lines if line.get_marker() == "x"]
        assert [style(mark)[0] for mark in marks] == [style(curve)[0] for curve in curves]  # × in its line's colour
        return [series(curve) for curve in curves], [series(mark)[1:] for mark in marks]

    assert curves_and_marks(cola) == ([("η=5e-4, decay", [1, 2, 3], [10.0, 20.0, 25.0]),
                                       ("η=5e-4, no decay", [1, 2, 3], [12.0, 18.0, 30.0]),
                                       ("η=1e-3, decay", [1, 2, 3], [5.0, 6.0, 7.0])],
                                      [([2], [22.0]), ([3], [31.0]), ([3], [8.0])])
    assert curves_and_marks(sst2) == ([("η=5e-4, decay", [1, 2], [80.0, 85.0]),
                                       ("η=5e-4, no decay", [1, 2], [70.0, 75.0])], [([2], [86.0]), ([1], [71.0])])
    a, b, c = (line for line in cola.get_lines() if line.get_marker() != "x" and len(line.get_xdata()))
    assert style(a)[0] == style(b)[0] != style(c)[0]  # the colour follows the learning rate, the dashes the decay
    assert (style(a)[1], style(b)[1], style(c)[1]) == ("-", "--", "-")
    assert entries(cola.get_legend()) == ["η=5e-4, decay", "η=5e-4, no decay", "η=1e-3, decay",
                                          "best single evaluation"]
    assert (cola.get_ylabel(), sst2.get_ylabel(), raw.get_ylabel()) == ("dev MCC (×100)", "dev accuracy (×100)",
                                                                        "dev MCC (×100)")
    assert figure.get_suptitle() == "B.3"


def test_explosion_draws_the_score_gradient_norms_and_learning_rate_marking_the_largest_norm(drawn, tmp_path):
    """kdflow.reporting.exploration_curves.explosion_curve's rows of a run whose gradient norm peaks at epoch 0.3;
    then one without gradient norms: nothing to mark."""
    curve = pd.DataFrame({"epoch": [0.1, 0.2, 0.3, 0.4], "dev": [50.0, 60.0, 20.0, 55.0],
                          "smoothed": [50.0, 55.0, 43.0, 45.0], "grad_norm_max": [1.0, 2.0, 40.0, 3.0],
                          "grad_norm_mean": [0.5, 1.0, 10.0, 1.5], "lr": [1e-5, 2e-5, 3e-5, 4e-5],
                          "metric": "accuracy"})
    thesis.explosion_figure(curve, tmp_path / "explosion.png", "B.8")
    no_norms = curve.assign(grad_norm_max=np.nan, grad_norm_mean=np.nan)
    thesis.explosion_figure(no_norms, tmp_path / "no_norms.png", "B.8")
    figure, without_norms = drawn

    score, norms, rate = figure.axes
    epochs = [0.1, 0.2, 0.3, 0.4]
    assert [series(line) for line in data_lines(score)] == [
        ("every evaluation", epochs, [50.0, 60.0, 20.0, 55.0]),
        ("0.1-epoch sliding average", epochs, [50.0, 55.0, 43.0, 45.0])]
    assert [series(line) for line in data_lines(norms) if len(line.get_xdata())] == [
        ("max over steps", epochs, [1.0, 2.0, 40.0, 3.0]), ("mean over steps", epochs, [0.5, 1.0, 10.0, 1.5])]
    assert [series(line) for line in data_lines(rate)] == [("", epochs, [1e-5, 2e-5, 3e-5, 4e-5])]
    assert [vertical_lines(axes) for axes in (score, norms, rate)] == [[0.3]] * 3
    assert norms.get_yscale() == "log"
    assert entries(norms.get_legend()) == ["max over steps", "mean over steps", "largest gradient norm (epoch 0.30)"]
    assert entries(score.get_legend()) == ["every evaluation", "0.1-epoch sliding average"]
    assert (score.get_ylabel(), norms.get_ylabel(), rate.get_ylabel()) == ("dev accuracy (×100)", "gradient norm",
                                                                          "learning rate η")
    assert figure.get_suptitle() == "B.8"
    assert [vertical_lines(axes) for axes in without_norms.axes] == [[], [], []]


def test_learning_rate_draws_the_warmup_score_and_rate_with_lines_where_learning_slows(drawn, tmp_path):
    """kdflow.reporting.exploration_curves.warmup_stretch's rows; learning slows after the second evaluation."""
    curve = pd.DataFrame({"epoch": [0.0, 0.1, 0.2, 0.3], "smoothed": [0.0, 30.0, 40.0, 45.0],
                          "lr": [0.0, 1e-5, 2e-5, 3e-5], "metric": "mcc"})
    thesis.learning_rate_figure(curve, 1, tmp_path / "rate.png", "B.9")
    (figure,) = drawn

    score, rate = figure.axes
    assert [series(line) for line in data_lines(score)] == [("dev MCC (×100), 0.1-epoch average", [0.0, 0.1, 0.2, 0.3],
                                                             [0.0, 30.0, 40.0, 45.0])]
    assert [series(line) for line in data_lines(rate)] == [("learning rate η", [0.0, 0.1, 0.2, 0.3],
                                                            [0.0, 1e-5, 2e-5, 3e-5])]
    assert vertical_lines(score) == [0.1] and [at(line) for line in horizontal_lines(rate)] == [1e-5]
    assert entries(score.get_legend()) == ["dev MCC (×100), 0.1-epoch average", "learning rate η",
                                           "learning slows: epoch 0.10, η = 1e-05"]
    assert (score.get_xlabel(), rate.get_ylabel()) == ("epoch", "learning rate η")
    assert figure.get_suptitle() == "B.9"


def size_cell(task, width, depth, best_dev, parameters):
    return dict(study="sizes", student_label="BERT_S", **TASKS[task], width=width, depth=depth, best_dev=best_dev,
                parameters=parameters)


def test_size_heatmaps_draw_each_sizes_best_score_and_parameters_width_across_depth_down(drawn, tmp_path):
    """kdflow.reporting.exploration_curves.size_cells' rows, out of order: on CoLA 5 of 6 sizes run, one of them
    diverged (no score); on SST-2 a single size."""
    cells = pd.DataFrame([size_cell("cola", "2", "2", 50.3, 12_000_000), size_cell("cola", "1", "1", 45.0, 1_500_000),
                          size_cell("cola", "1/2", "1", 30.0, 400_000), size_cell("cola", "2", "1", np.nan, 6_000_000),
                          size_cell("cola", "1/2", "2", 35.5, 900), size_cell("sst2", "1", "1", 80.0, 1_500_000)])
    thesis.size_heatmaps(cells, tmp_path / "sizes.png", "B.11")
    (figure,) = drawn

    cola, sst2 = (axes for axes in figure.axes if axes.images)
    assert (cola.get_title(), sst2.get_title()) == ("BERT_S · CoLA", "BERT_S · SST-2")
    assert (tick_labels(cola), tick_labels(cola, "y")) == (["1/2", "1", "2"], ["1", "2"])
    assert (cola.get_xlabel(), cola.get_ylabel()) == ("width factor W", "depth factor D")
    np.testing.assert_allclose(image_values(cola), [[30.0, 45.0, np.nan], [35.5, np.nan, 50.3]])
    assert cola.images[0].get_clim() == (30.0, 50.3)
    assert [(text.get_position(), text.get_text()) for text in cola.texts] == [
        ((0, 0), "30.0\n400k"), ((1, 0), "45.0\n1.5M"), ((2, 0), "diverged\n6M"), ((0, 1), "35.5\n900"),
        ((2, 1), "50.3\n12M")]  # the size not run (W 1, D 2) is blank
    np.testing.assert_allclose(image_values(sst2), [[80.0]])
    assert sst2.images[0].get_clim() == (80.0, 81.0) and [text.get_text() for text in sst2.texts] == ["80.0\n1.5M"]
    assert [colour_bar_label(figure, number) for number in (0, 1)] == ["best dev MCC (×100)",
                                                                       "best dev accuracy (×100)"]
    assert figure.get_suptitle() == "B.11"


# --- an experiment's learning curves (issue 32) -------------------------------------------------------------------


def run_curve(task, method, point, seed, selected, devs):
    return pd.DataFrame({"task": task, "student": "bert_4", "method": method, "point": point, "seed": seed,
                         "selected": selected, "metric": "accuracy", "epoch": [1.0, 2.0][: len(devs)], "step": 3,
                         "dev": devs})


def test_experiment_curves_draw_every_runs_dev_curve_coloured_by_method_the_selected_points_bold(drawn, tmp_path):
    """kdflow.reporting.experiment_curves.experiment_curves' rows: on MRPC kd at two grid points (beta0.7 selected,
    two seeds) and pkd; on SST-2 one kd run."""
    data = pd.concat([run_curve("mrpc", "kd", "beta0.7", 1, True, [60.0, 80.0]),
                      run_curve("mrpc", "kd", "beta0.2", 1, False, [50.0, 60.0]),
                      run_curve("mrpc", "kd", "beta0.7", 2, True, [70.0, 70.0]),
                      run_curve("mrpc", "pkd", "default", 1, True, [40.0, 90.0]),
                      run_curve("sst2", "kd", "beta0.7", 1, True, [85.0, 88.0])], ignore_index=True)
    experiment_curves.experiment_curves_figure(data, tmp_path / "curves.png", "demo")
    (figure,) = drawn

    legend = figure.legends[0]
    assert entries(legend) == ["kd", "pkd", "selected grid point, each seed", "other grid points"]
    method_of = {colour: name for name, colour in legend_colours(legend).items() if name in ("kd", "pkd")}
    assert len(method_of) == 2

    def runs(axes):
        return [(method_of[style(line)[0]], line.get_alpha(), line.get_linewidth(), *series(line)[1:])
                for line in axes.get_lines()]

    mrpc, sst2 = with_title(figure).values()
    assert list(with_title(figure)) == ["mrpc, bert_4", "sst2, bert_4"]
    bold, faint = (0.95, 1.4), (0.3, 0.8)
    assert runs(mrpc) == [("kd", *faint, [1, 2], [50.0, 60.0]),  # the other grid point first, under the selected
                          ("kd", *bold, [1, 2], [60.0, 80.0]), ("kd", *bold, [1, 2], [70.0, 70.0]),
                          ("pkd", *bold, [1, 2], [40.0, 90.0])]
    assert runs(sst2) == [("kd", *bold, [1, 2], [85.0, 88.0])]
    assert (mrpc.get_xlabel(), mrpc.get_ylabel()) == ("epoch", "dev accuracy (×100)")
    assert figure.get_suptitle() == "Experiment demo: the dev curve of every run"
