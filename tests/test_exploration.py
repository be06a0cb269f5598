"""Sučík (2020) Chapter 5 and Appendix B: the exploration's studies as jobs (Table 5.1, Tables B.1-B.2, the notes'
"Hyperparameter exploration" and "Student size scaling"), and the data of Table 5.1 and Figs. B.1-B.12 computed
from learning curves, against hand-made values."""

import copy
import json
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO

from kdflow.core.hyperparameters import Hyperparameters
from kdflow.reporting.exploration_curves import (
    curve_lines,
    explosion_curve,
    knee,
    load_run,
    size_cells,
    table51,
    table51_document,
    warmup_stretch,
)
from kdflow.reporting.figures import thesis
from kdflow.workflow import results_paths as paths
from kdflow.workflow.config_checks import check_references
from kdflow.workflow.exploration import (
    drawn_runs,
    figure_constraint,
    figure_title,
    run_files,
    student_sizes,
    study_points,
    with_exploration,
)
from kdflow.workflow.job_settings import selection_params, student_jobs, student_settings

GOOGLE_NEWS = "resources/GoogleNews-vectors-negative300.bin.gz"


def full_config(word_vectors=None):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["exploration"]["word_vectors"] = word_vectors
    return with_exploration(config)


@pytest.fixture(scope="module")
def config():
    return full_config()


def settings(config, study, point, task="cola", seed=1):
    experiment = config["experiments"][f"exploration_{study}"]
    student, method = experiment["students"][0], next(iter(experiment["methods"]))
    return student_settings(config, f"exploration_{study}", task, student, method, point, seed)


def jobs_per_study(config):
    return Counter(job["experiment"].removeprefix("exploration_") for job in student_jobs(config)
                   if job["experiment"].startswith("exploration_"))


def test_every_study_runs_its_values_times_its_repeats():
    """Table 5.1 and Appendix B: LSTM_S 7 Adam rates + Adadelta x 6 repeats; BERT_S 7 rates x (teacher, random)
    embeddings; batch 5 x 3 (LSTM_S) and 5 (BERT_S); warm-up 4 x 2 x 3 and 5 x 2; embeddings 2 x 2 on CoLA and 2 on
    SST-2 and Sara (LSTM_S 3 repeats); sizes: CoLA LSTM_S 5 x 5 x 3, BERT_S 4 x 3; SST-2 LSTM_S 7, BERT_S 6 x 4;
    Sara LSTM_S 4, BERT_S 3 x 4; and the exploding W=2, D=2 BERT_S."""
    with_vectors = jobs_per_study(full_config(GOOGLE_NEWS))
    assert with_vectors == Counter(
        lr_lstm_s=8 * 6, lr_bert_s=7 * 2, batch_lstm_s=5 * 3, warmup_lstm_s=4 * 2 * 3, warmup_bert_s=5 * 2,
        batch_bert_s=5, embeddings_lstm_s_cola=4 * 3, embeddings_bert_s_cola=4, embeddings_lstm_s_sst2=2 * 3,
        embeddings_bert_s_sst2=2, embeddings_lstm_s_sara=2 * 3, embeddings_bert_s_sara=2, size_lstm_s_cola=5 * 5 * 3,
        size_bert_s_cola=4 * 3, explosion_bert_s=1, size_lstm_s_sst2=7, size_bert_s_sst2=6 * 4, size_lstm_s_sara=4,
        size_bert_s_sara=3 * 4)
    assert sum(with_vectors.values()) == 283
    # Without the GoogleNews vectors (config.yaml's word_vectors: null) the word2vec values are not run.
    without = jobs_per_study(full_config())
    assert with_vectors - without == Counter(embeddings_lstm_s_cola=2 * 3, embeddings_bert_s_cola=2,
                                             embeddings_lstm_s_sst2=3, embeddings_bert_s_sst2=1,
                                             embeddings_lstm_s_sara=3, embeddings_bert_s_sara=1)
    assert sum(without.values()) == 267


def test_a_study_chooses_its_point_on_every_repeat_as_the_thesis_chose_from_its_mean_curves(config):
    """The thesis picked each value from the mean dev curves of all its repeats: an exploration study's selection
    seeds are all its seeds (nothing is held out or tested), unlike an experiment's default of the first seed."""
    experiment = config["experiments"]["exploration_lr_lstm_s"]
    assert experiment["seeds"] == [1, 2, 3, 4, 5, 6]
    assert selection_params(config, "exploration_lr_lstm_s")["selection_seeds"] == experiment["seeds"]
    assert selection_params(config, "thesis_table52_lstm_s")["selection_seeds"] == [1]  # the config's default


def test_learning_rate_studies_hold_the_thesis_settings_fixed(config):
    """LSTM_S: B=50, no warm-up or decay, word2vec multichannel, 30 epochs, the code's AdamW; Tang et al.'s Adadelta
    at lr 1.0, rho 0.95. BERT_S: B=256, E_w=10 of 60 epochs then decay; teacher wordpieces or from scratch."""
    adam = settings(full_config(GOOGLE_NEWS), "lr_lstm_s", "lr0.005")
    hp = adam["hyperparameters"]
    assert (hp["learning_rate"], hp["batch_size"], hp["warmup_ratio"], hp["lr_decay"], hp["epochs"]) == (
        5e-3, 50, 0.0, "none", 30)
    assert (hp["optimizer"], hp["betas"], hp["eps"], hp["weight_decay"], hp["weight_decay_all"]) == (
        "adamw", [0.9, 0.98], 1e-6, 0.01, True)
    assert adam["student"] == {"type": "bilstm_s", "tokens": "words",
                               "embeddings": {"source": "file", "mode": "multichannel", "path": GOOGLE_NEWS}}
    assert adam["method"] == "mse_logits"
    adadelta = settings(config, "lr_lstm_s", "adadelta")["hyperparameters"]
    assert (adadelta["optimizer"], adadelta["learning_rate"], adadelta["rho"], adadelta["betas"],
            adadelta["weight_decay"], adadelta["batch_size"]) == ("adadelta", 1.0, 0.95, None, 0.0, 50)
    # Without the vectors, a fixed word2vec choice becomes the teacher's wordpieces in the same mode.
    assert settings(config, "lr_lstm_s", "lr0.005")["student"]["embeddings"] == {"source": "teacher",
                                                                                  "mode": "multichannel"}
    assert list(study_points(config, "lr_lstm_s")) == [
        "lr0.005", "lr0.0015", "lr0.0005", "lr0.00015", "lr5e-05", "lr1.5e-05", "lr5e-06", "adadelta"]
    bert = settings(config, "lr_bert_s", "lr0.0005_random")
    hp = bert["hyperparameters"]
    assert (hp["batch_size"], hp["warmup_ratio"], hp["lr_decay"], hp["epochs"], hp["weight_decay"]) == (
        256, 10 / 60, "linear", 60, 0.0)
    assert bert["student"]["embeddings"] == {"source": "random", "mode": "non_static"}
    assert bert["method_options"] == {"alpha": 0.0, "beta": 1.0, "temperature": 3.0}


def test_schedule_batch_and_embedding_studies_follow_the_order_of_table_5_1(config):
    """One at a time, in Table 5.1's order: LSTM_S's batch sizes still without a schedule, its warm-up at the
    chosen B=32; BERT_S's warm-up at B=256, its batch sizes with the chosen E_w=15 and decay; the embeddings with
    every choice made so far (LSTM_S B=32, no warm-up, decay; BERT_S B=128, E_w=15 of 60, decay)."""
    hp = settings(config, "batch_lstm_s", "bs512")["hyperparameters"]
    assert (hp["batch_size"], hp["learning_rate"], hp["warmup_ratio"], hp["lr_decay"]) == (512, 5e-4, 0.0, "none")
    hp = settings(config, "warmup_lstm_s", "ew5_no_decay")["hyperparameters"]
    assert (hp["batch_size"], hp["warmup_ratio"], hp["lr_decay"]) == (32, 5 / 30, "none")
    assert settings(config, "warmup_lstm_s", "ew15_decay")["hyperparameters"]["lr_decay"] == "linear"
    hp = settings(config, "warmup_bert_s", "ew20_no_decay")["hyperparameters"]
    assert (hp["batch_size"], hp["warmup_ratio"], hp["lr_decay"]) == (256, 20 / 60, "none")
    assert list(study_points(config, "batch_bert_s")) == ["bs32", "bs64", "bs128", "bs256", "bs512"]
    hp = settings(config, "batch_bert_s", "bs64")["hyperparameters"]
    assert (hp["batch_size"], hp["warmup_ratio"], hp["lr_decay"]) == (64, 0.25, "linear")
    lstm = settings(config, "embeddings_lstm_s_cola", "wordpiece_non_static")
    assert lstm["student"] == {"type": "bilstm_s", "tokens": "wordpiece",
                               "embeddings": {"source": "teacher", "mode": "non_static"}}
    hp = lstm["hyperparameters"]
    assert (hp["batch_size"], hp["learning_rate"], hp["warmup_ratio"], hp["lr_decay"]) == (32, 5e-4, 0.0, "linear")
    hp = settings(config, "embeddings_bert_s_sara", "wordpiece_non_static", task="sara")["hyperparameters"]
    assert (hp["batch_size"], hp["warmup_ratio"], hp["lr_decay"], hp["epochs"]) == (128, 0.25, "linear", 60)


def test_student_sizes_are_tables_b1_and_b2_with_the_hand_set_learning_rates(config):
    """Table B.1 (BERT_S W -> d_h, d_I, A; D -> L) and B.2 (LSTM_S W -> d_LSTM, d_FC; D -> L), and the learning rates
    the thesis set by hand for the larger CoLA BERT_S, batch 128 as k x 128/k with dev every 100 mini-batches."""
    cola = settings(config, "size_bert_s_cola", "w3_d2")
    assert {k: v for k, v in cola["student"].items() if k != "embeddings"} == {
        "type": "bert_s", "tokens": "wordpiece", "hidden_size": 612, "intermediate_size": 2250,
        "num_attention_heads": 9, "num_hidden_layers": 10}
    hp = cola["hyperparameters"]
    assert (hp["learning_rate"], hp["batch_size"], hp["gradient_accumulation_steps"], hp["evaluate_every_steps"]) == (
        5e-5, 128, 4, 25)
    rates = {point: settings(config, "size_bert_s_cola", point)["hyperparameters"]["learning_rate"]
             for point in study_points(config, "size_bert_s_cola")}
    assert rates == {"w1_d1": 5e-4, "w1_d2": 5e-4, "w1_d3": 1e-4, "w2_d1": 1e-4, "w2_d2": 8e-5, "w2_d3": 7e-5,
                     "w3_d1": 8e-5, "w3_d2": 5e-5, "w3_d3": 5e-5, "w4_d1": 7e-5, "w4_d2": 4e-5, "w4_d3": 4e-5}
    table52 = student_settings(config, "thesis_table52_bert_s", "cola", "bert_s", "kd", "default", 1)
    assert settings(config, "size_bert_s_cola", "w4_d1")["hyperparameters"] == table52["hyperparameters"]
    smallest = settings(config, "size_bert_s_sst2", "w1-16_d1-4", task="sst2")["student"]
    assert (smallest["hidden_size"], smallest["intermediate_size"], smallest["num_attention_heads"],
            smallest["num_hidden_layers"]) == (13, 47, 1, 1)
    lstm = settings(config, "size_lstm_s_sst2", "w1-64_d1", task="sst2")["student"]
    assert (lstm["lstm_size"], lstm["fc_size"], lstm["layers"]) == (5, 6, 1)
    deep = settings(config, "size_lstm_s_cola", "w5_d5")
    assert (deep["student"]["lstm_size"], deep["student"]["fc_size"], deep["student"]["layers"]) == (1500, 2000, 5)
    assert (deep["hyperparameters"]["learning_rate"], deep["hyperparameters"]["batch_size"]) == (5e-4, 32)
    exploding = settings(config, "explosion_bert_s", "w2_d2")
    assert (exploding["student"]["hidden_size"], exploding["student"]["num_hidden_layers"]) == (408, 10)
    assert (exploding["hyperparameters"]["learning_rate"], exploding["hyperparameters"]["warmup_ratio"]) == (5e-4, 0.25)
    # What Figs. B.10-B.12's data lists beside each size: its factors, dimensions, learning rate and batch.
    assert student_sizes(config, "size_bert_s_cola")["w3_d2"] == {
        "width": "3", "depth": "2", "hidden_size": 612, "intermediate_size": 2250, "num_attention_heads": 9,
        "num_hidden_layers": 10, "learning_rate": 5e-5, "batch_size": 128, "gradient_accumulation_steps": 4}
    assert student_sizes(config, "size_lstm_s_sst2")["w1-64_d1"] == {
        "width": "1/64", "depth": "1", "lstm_size": 5, "fc_size": 6, "layers": 1, "learning_rate": 5e-4,
        "batch_size": 32, "gradient_accumulation_steps": 1}
    sara = settings(config, "size_lstm_s_sara", "w1-8_d1", task="sara")["student"]
    assert sara["embeddings"] == {"source": "teacher", "mode": "multichannel"}  # Sara's LSTM_S reads wordpieces


def test_a_figure_reads_the_curves_and_metrics_of_the_runs_it_draws(config):
    """Figs. B.8-B.9 draw their first study's first run; the others every run of their studies."""
    explosion, curves = drawn_runs(config, "B.8"), drawn_runs(config, "B.2")
    assert len(explosion) == 1 and len(curves) == len(study_points(config, "batch_lstm_s")) * 3  # 3 repeats
    files = run_files(explosion)
    run = explosion[0]
    assert files["curves"] == [paths.STUDENT_CURVES.format(**run)]
    assert files["metrics"][0].endswith("/metrics.json")
    assert figure_title(config, "B.2") == "Sučík (2020) Fig. B.2: LSTM_S batch sizes on CoLA"
    assert figure_constraint(config, "explosion") == r"B\.8"
    assert figure_constraint(config, "no such kind") == "no-figures"


def test_every_exploration_job_is_valid_and_checked(config):
    check_references(config)
    for job in student_jobs(config):
        if job["experiment"].startswith("exploration_"):
            run = student_settings(config, job["experiment"], job["task"], job["student"], job["method"],
                                   job["point"], job["seed"])
            Hyperparameters.from_dict(run["hyperparameters"])  # e.g. Adadelta takes no betas
    broken = yaml.safe_load((REPO / "config.yaml").read_text())
    broken["exploration"]["studies"]["lr_lstm_s"]["fixed"]["embeddings"] = "glove"
    broken["exploration"]["studies"]["size_bert_s_cola"]["point_settings"]["w9_d1"] = {}
    with pytest.raises(ValueError, match="invalid config") as error:
        with_exploration(broken)
    assert "unknown embeddings 'glove'" in str(error.value) and "no points ['w9_d1']" in str(error.value)
    clash = copy.deepcopy(broken)
    clash["exploration"] = yaml.safe_load((REPO / "config.yaml").read_text())["exploration"]
    clash["experiments"]["exploration_lr_lstm_s"] = clash["experiments"]["thesis_table52_lstm_s"]
    with pytest.raises(ValueError, match="also exploration studies"):
        with_exploration(clash)


# Curves: hand-made evaluations of two repeats, 4 evaluations per epoch.

EPOCHS = [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]


def evaluations(point, seed, scores, study="s", task="cola", **columns):
    return pd.DataFrame({"study": study, "task": task, "task_name": "CoLA", "metric": "mcc", "student_label": "LSTM_S",
                         "point": point, "seed": seed,
                         "epoch": EPOCHS[: len(scores)], "step": range(1, len(scores) + 1), "dev": scores,
                         "lr": 1e-3, "grad_norm_mean": 1.0, "grad_norm_max": 2.0, "parameters": 100, **columns})


def test_learning_curves_are_position_and_score_per_evaluation(tmp_path):
    """An evaluation's position is its step over the steps per epoch (10 examples in batches of 4: 3 steps)."""
    pd.DataFrame({"epoch": [1, 1, 2], "step": [2, 3, 6], "lr": [1e-3] * 3, "grad_norm_mean": [1.0] * 3,
                  "grad_norm_max": [2.0] * 3, "train_loss": [0.5] * 3, "seconds": [1.0] * 3,
                  "dev_mcc": [0.1, 0.25, -0.5], "dev_accuracy": [0.6] * 3, "stage": [1, 1, 1]}).to_parquet(
        tmp_path / "curves.parquet")
    (tmp_path / "metrics.json").write_text(json.dumps({
        "transfer": {"examples": 10}, "hyperparameters": {"batch_size": 4, "epochs": 2}, "stages": [{"epochs": 2}],
        "non_embedding_parameters": 1234}))
    run = {"study": "s", "task": "cola", "student_label": "LSTM_S", "point": "p", "seed": 1}
    frame = load_run(run, tmp_path / "curves.parquet", tmp_path / "metrics.json")
    np.testing.assert_allclose(frame["epoch"], [2 / 3, 1, 2])
    np.testing.assert_allclose(frame["dev"], [10, 25, -50])  # MCC, CoLA's main metric, x100
    assert set(frame["parameters"]) == {1234} and set(frame["seed"]) == {1} and set(frame["metric"]) == {"mcc"}


def test_curves_are_means_over_repeats_smoothed_with_the_best_single_evaluation_marked():
    """Figs. B.1-B.7: mean over repeats per evaluation, then a centred sliding average (here 0.75 epoch = 3
    evaluations, fewer at the ends), and × at the best evaluation of any repeat."""
    runs = pd.concat([evaluations("a", 1, [10, 20, 30, 40, 50, 60, 70, 80]),
                      evaluations("a", 2, [30, 20, 10, 0, 10, 20, 30, 100]),
                      evaluations("b", 1, [5, np.nan, 15, 25])], ignore_index=True)
    lines, best = curve_lines(runs, epochs=0.75)
    a = lines[lines.point == "a"]
    np.testing.assert_allclose(a["mean"], [20, 20, 20, 20, 30, 40, 50, 90])
    np.testing.assert_allclose(a["smoothed"], [20, 20, 20, 70 / 3, 30, 40, 60, 70])
    assert list(a["repeats"]) == [2] * 8
    b = lines[lines.point == "b"]  # a missing evaluation is skipped, not a zero
    np.testing.assert_allclose(b["smoothed"], [5, 10, 20, 20])
    assert best.set_index("point")[["seed", "epoch", "dev"]].to_dict("index") == {
        "a": {"seed": 2, "epoch": 2.0, "dev": 100.0}, "b": {"seed": 1, "epoch": 1.0, "dev": 25.0}}


def test_the_window_is_two_epochs_of_evaluations_by_default():
    runs = evaluations("a", 1, [0, 0, 0, 80, 0, 0, 0, 0])  # 4 evaluations per epoch: a window of 8
    lines, _ = curve_lines(runs)
    np.testing.assert_allclose(lines["smoothed"], [20, 16, 80 / 6, 80 / 7, 10, 80 / 7, 80 / 6, 16])


def test_learning_slows_where_the_curve_bends_below_its_peak():
    """Fig. B.9: up to the peak (10, at epoch 4), the point farthest above the chord from (0, 0) to (4, 10)."""
    assert knee([0, 1, 2, 3, 4, 5], [0, 6, 8, 9, 10, 7]) == 1
    assert knee([0, 1, 2, 3], [0, 1, 2, 3]) in (0, 3)  # a straight rise has no bend: an end of the chord
    assert knee([0, 1, 2], [5, 4, 3]) == 0
    curve = explosion_curve(evaluations("a", 1, [0, 10, 20, 30, 40, 50, 60, 70]), epochs=0.75)
    np.testing.assert_allclose(curve["smoothed"], [5, 10, 20, 30, 40, 50, 60, 65])
    # Read during warm-up: up to the first evaluation at the largest learning rate (all of a run without warm-up).
    warming = curve.assign(lr=[1, 2, 3, 4, 4, 3, 2, 1])
    assert list(warmup_stretch(warming)["step"]) == [1, 2, 3, 4]
    assert len(warmup_stretch(curve.assign(lr=1e-3))) == 8


def test_size_cells_take_the_best_evaluation_of_all_repeats():
    """Figs. B.10-B.12: per size the best dev over every evaluation of every repeat; a size whose runs all diverged
    has none."""
    runs = pd.concat([evaluations("w1_d1", 1, [10, 40, 30]), evaluations("w1_d1", 2, [45, 20, np.nan]),
                      evaluations("w2_d1", 1, [np.nan, np.nan], parameters=900)], ignore_index=True)
    values = {"s": {"w1_d1": {"width": "1", "depth": "1"}, "w2_d1": {"width": "2"}}}
    cells = size_cells(runs, values).set_index("point")
    assert cells.loc["w1_d1", ["width", "depth", "best_dev", "repeats", "parameters"]].tolist() == ["1", "1", 45.0, 2, 100]
    assert np.isnan(cells.loc["w2_d1", "best_dev"]) and cells.loc["w2_d1", "depth"] == "1"


def test_table_51_sets_kdflows_best_value_beside_the_thesis_choice():
    """kdflow's best: the best mean over repeats of each run's best evaluation (a: 45, b: 40), not the best single
    evaluation (b: 60)."""
    runs = pd.concat([evaluations("a", 1, [10, 40]), evaluations("a", 2, [50, 30]),
                      evaluations("b", 1, [60, 10]), evaluations("b", 2, [20, 0])], ignore_index=True)
    reference = pd.DataFrame([
        {"student": "lstm_s", "parameter": "batch size", "task": "cola", "explored": "[32, 50]", "initial": "B=50",
         "chosen": "B=32", "source": "Table 5.1"},
        {"student": "bert_s", "parameter": "batch size", "task": "cola", "explored": "[32, 50]", "initial": "",
         "chosen": "B=128", "source": "Table 5.1"}])
    studies = {"s": {"student": "lstm_s", "parameter": "batch size", "tasks": ["cola"],
                     "points": {"a": ["B=32"], "b": ["B=50"]}}}
    table = table51(reference, studies, runs)
    lstm = table.iloc[0]
    assert (lstm.thesis_chosen, lstm.kdflow_explored, lstm.kdflow_best, lstm.kdflow_best_dev, lstm.kdflow_best_std,
            lstm.repeats, lstm.kdflow_best_single, lstm.kdflow_best_single_dev) == (
        "B=32", "B=32; B=50", "B=32", 45.0, pytest.approx(5 * math.sqrt(2)), 2, "B=50", 60.0)  # sample std of 40, 50
    assert table.iloc[1].student == "bert_s" and pd.isna(table.iloc[1].kdflow_best)  # no kdflow study of it
    one_repeat = table51(reference, studies, runs[runs.seed == 1])  # one run a point: no spread to print
    page = table51_document(one_repeat).markdown()
    assert "B=50 (60.0, n=1)" in page and "nan" not in page


def test_exploration_figures_draw(tmp_path):
    runs = pd.concat([evaluations("a", 1, [10, 40, 30, 50]), evaluations("b", 1, [5, 15, 25, 35]),
                      evaluations("w1_d1", 1, [1, 2], study="t"), evaluations("w2_d1", 1, [3, 4], study="t")],
                     ignore_index=True)
    curves = runs[runs.study == "s"]
    lines, best = curve_lines(curves)
    labels = {"s": {"a": ["η=5e-4", "decay"], "b": ["η=5e-4", "no decay"]}}
    png = thesis.exploration_curves_figure(lines, best, labels, tmp_path / "curves.png", "B.3",
                                            unsmoothed=curves[curves.point == "a"])
    curve = explosion_curve(curves[curves.point == "a"])
    sizes = size_cells(runs[runs.study == "t"], {"t": {"w1_d1": {"width": "1/2"}, "w2_d1": {"width": "1"}}})
    for path in [png, thesis.explosion_figure(curve, tmp_path / "explosion.png", "B.8"),
                 thesis.learning_rate_figure(curve, 1, tmp_path / "rate.png", "B.9"),
                 thesis.size_heatmaps(sizes, tmp_path / "sizes.png", "B.11")]:
        assert path.read_bytes()[:4] == b"\x89PNG"
    assert thesis.point_styles(labels["s"])["b"]["linestyle"] == "--"  # the second axis changes the dashes


def test_points_do_not_depend_on_the_config_key_order():
    """A YAML mapping has no order: the config saved with its keys sorted (as yaml.safe_dump does) or reversed names
    the same points, in the same order, with the same settings, so that no exploration run reruns."""
    def reordered(node, reverse):
        if isinstance(node, dict):
            return {key: reordered(node[key], reverse) for key in sorted(node, reverse=reverse)}
        return [reordered(item, reverse) for item in node] if isinstance(node, list) else node

    original = yaml.safe_load((REPO / "config.yaml").read_text())
    expanded = with_exploration(original)
    for reverse in (False, True):
        other = with_exploration(reordered(original, reverse))
        generated = [name for name in other["experiments"] if name.startswith("exploration_")]
        assert generated == [name for name in expanded["experiments"] if name.startswith("exploration_")]
        for study in original["exploration"]["studies"]:
            assert json.dumps(study_points(other, study)) == json.dumps(study_points(expanded, study))
            assert json.dumps(other["experiments"][f"exploration_{study}"]["points"]) == json.dumps(
                expanded["experiments"][f"exploration_{study}"]["points"])
    assert list(study_points(expanded, "lr_bert_s"))[:2] == ["lr0.005_wordpiece_non_static", "lr0.005_random"]
    assert list(study_points(expanded, "size_bert_s_cola"))[:2] == ["w1_d1", "w1_d2"]
