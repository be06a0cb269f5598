"""The thesis's probing scores beside kdflow's (thesis §6.1, Figs. 6.1-6.3 and C.1; kdflow.reporting.probing_reference),
on a hand-made reference and probing table, and the figures drawn from them."""

import io

import pandas as pd
import pytest
from conftest import REPO
from matplotlib.axes import Axes
from test_figures import is_png

from kdflow.core.errors import UserError
from kdflow.reporting.figures.thesis import REFERENCE_STYLES, thesis_probing_figure
from kdflow.reporting.probing_reference import (
    comparison_document,
    kdflow_layer,
    read_reference_lines,
    read_thesis_scores,
    thesis_comparison,
)

HEADER = "model,family,downstream_task,variant,pooling,task,task_type,layer,score,devacc,nhid,dropout,thesis_figures\n"
THESIS = HEADER + """\
BERT_T[SST-2],teacher,SST-2,,avg,Length,surface,E,98.0,97.0,100,0.1,6.1
BERT_T[SST-2],teacher,SST-2,,avg,Length,surface,2,90.0,89.5,100,0.1,6.1
BERT_T[SST-2],teacher,SST-2,,avg,Length,surface,6,80.0,79.0,50,0.0,6.1
BERT_T[SST-2],teacher,SST-2,,max,Length,surface,2,85.0,84.0,50,0.0,
BERT_T[SST-2],teacher,SST-2,,avg,Tense,semantic,E,70.0,71.0,50,0.0,6.1
BERT_T[SST-2],teacher,SST-2,,avg,Depth,syntactic,E,40.0,41.0,50,0.0,6.1
LSTM_S[SST-2],LSTM_S student,SST-2,,avg,Length,surface,last (BiLSTM),60.0,61.0,200,0.2,6.2 C.1
embed.word[SST-2],embeddings (word),SST-2,,avg,Length,surface,embed.,50.0,52.0,50,0.0,6.2
LSTM_S-hard-logits[SST-2],LSTM_S student (hard-logits),SST-2,hard-logits,avg,Length,surface,last (BiLSTM),55.0,54.0,50,0.0,
BERT_S-s[CoLA],BERT_S student (BERT-s),CoLA,BERT-s,avg,Length,surface,1,95.0,94.0,50,0.0,
"""
MODELS = {"BERT_T[SST-2]": "teacher", "LSTM_S[SST-2]": "lstm", "embed.word[SST-2]": "embed"}
MISSING = {"LSTM_S-hard-logits[SST-2]": "hard-logit students are not run"}


def probing_rows(model, task, accuracies):
    """results/tables/probing.csv rows: (layer, test, dev) per probed layer, accuracies x100."""
    return [dict(model=model, task=task, layer=layer, kind="probe", test_accuracy=test, dev_accuracy=dev)
            for layer, test, dev in accuracies]


@pytest.fixture
def probing():
    rows = (probing_rows("teacher", "Length", [(0, 96.0, 95.0), (1, 93.0, 92.0), (2, 91.5, 91.0), (3, 88.0, 87.0),
                                               (4, 84.0, 83.0)])
            + probing_rows("lstm", "Length", [(1, 70.0, 69.0), (2, 62.5, 62.0), (3, 40.0, 41.0)])  # BiLSTM 1, 2; FC
            + probing_rows("embed", "Length", [(0, 47.0, 48.0)])
            + probing_rows("unrelated", "Length", [(0, 10.0, 10.0)]))
    rows.append(dict(model="majority", task="Length", layer=pd.NA, kind="majority", test_accuracy=20.0,
                     dev_accuracy=float("nan")))
    return pd.DataFrame(rows).astype({"layer": "Int64"})


@pytest.fixture
def thesis():
    return read_thesis_scores(io.StringIO(THESIS))


def test_thesis_layers_map_onto_kdflows_layer_numbers():
    assert kdflow_layer("E", list(range(25))) == 0 and kdflow_layer("12", list(range(25))) == 12
    assert kdflow_layer("6", list(range(5))) is None  # a 4-layer model has no layer 6
    assert kdflow_layer("last (BiLSTM)", [1, 2, 3]) == 2  # 2 BiLSTM layers, then the FC layer
    assert kdflow_layer("last (BiLSTM)", [1, 2]) == 1 and kdflow_layer("last (BiLSTM)", [1]) is None
    assert kdflow_layer("embed.", [0]) == 0
    with pytest.raises(UserError, match="unknown thesis layer 'top'"):
        kdflow_layer("top", [0, 1])


def test_every_thesis_score_stands_beside_kdflows_or_says_why_not(probing, thesis):
    table = thesis_comparison(probing, thesis, MODELS, MISSING, pooling="mean")
    assert len(table) == len(thesis)  # no thesis score is dropped
    expected = [  # (kdflow model, kdflow layer, kdflow, thesis, note)
        ("teacher", 0, 96.0, 98.0, ""),
        ("teacher", 2, 91.5, 90.0, ""),
        ("teacher", None, None, 80.0, "teacher has no layer that is the thesis's 6"),
        ("teacher", None, None, 85.0, "pooled by max in the thesis; kdflow probes with mean pooling"),
        ("teacher", None, None, 70.0, "kdflow does not probe Tense (probing.tasks)"),
        ("teacher", None, None, 40.0, "kdflow does not probe Depth (probing.tasks)"),
        ("lstm", 2, 62.5, 60.0, ""),
        ("embed", 0, 47.0, 50.0, ""),
        (None, None, None, 55.0, "no kdflow counterpart: hard-logit students are not run"),
        (None, None, None, 95.0, "no kdflow counterpart (not mapped in probing.thesis)"),
    ]
    for row, (model, layer, kdflow, score, note) in zip(table.itertuples(), expected, strict=True):
        assert (None if pd.isna(row.model) else row.model, row.note, row.thesis) == (model, note, score)
        assert (None if pd.isna(row.layer) else row.layer) == layer
        if kdflow is None:
            assert pd.isna(row.kdflow) and pd.isna(row.difference)
        else:
            assert row.kdflow == kdflow and row.difference == pytest.approx(kdflow - score)
    assert table.loc[1, "kdflow_dev"] == 91.0 and table.loc[1, "thesis_dev"] == 89.5
    assert list(table.loc[6, ["thesis_layer", "thesis_figures"]]) == ["last (BiLSTM)", "6.2 C.1"]


def test_a_misspelt_mapping_or_an_unprobed_model_is_a_clear_error(probing, thesis):
    with pytest.raises(UserError, match=r"do not have: \['BERT_T\[SST2\]'\]"):
        thesis_comparison(probing, thesis, {"BERT_T[SST2]": "teacher"}, {}, "mean")
    with pytest.raises(UserError, match=r"onto \['ghost'\], which are not probed"):
        thesis_comparison(probing, thesis, {"BERT_T[SST-2]": "ghost"}, {}, "mean")


def test_the_page_lists_every_thesis_model_and_shows_kdflow_beside_the_thesis(probing, thesis):
    table = thesis_comparison(probing, thesis, MODELS, MISSING, pooling="mean")
    text = comparison_document(table, [{"kind": "choice", "paper": "P.", "kdflow": "K.", "why": "Y.",
                                                 "effect": "E."}]).markdown()
    summary = text[text.index("| thesis model |"):]
    assert ("| BERT_T\\[SST-2\\] | avg | teacher | 5 | 2 | -0.25 | 1.75 | 6.1 | teacher has no layer that is the "
            "thesis's 6; kdflow does not probe Tense, Depth (probing.tasks) |") in summary  # (-2 + 1.5) / 2, (2 + 1.5) / 2
    assert "| LSTM_S-hard-logits\\[SST-2\\] | avg | — | 1 | 0 | — | — | — | no kdflow counterpart: hard-logit" in text
    assert "| BERT_T\\[SST-2\\] | max | teacher | 1 | 0 | — | — | — | pooled by max in the thesis" in text
    assert "## BERT_T\\[SST-2\\] (avg) and kdflow's teacher: kdflow (thesis)" in text
    assert ("| thesis layer | kdflow layer | Length | Depth | Tense |\n|---|---:|---:|---:|---:|\n"
            "| E | 0 | 96.0 (98.0) | — (40.0) | — (70.0) |\n| 2 | 2 | 91.5 (90.0) | — | — |\n"
            "| 6 | — | — (80.0) | — | — |") in text
    assert "| last (BiLSTM) | 2 | 62.5 (60.0) |" in text and "| embed. | 0 | 47.0 (50.0) |" in text
    assert "hard-logits" not in text.split("## ")[-2]  # a model without kdflow values gets no per-layer table
    assert "Differences from the paper's protocol" in text and "kdflow: K. Paper: P. Why: Y. Effect: E." in text


def test_the_shipped_reference_is_the_thesis_figures_numbers():
    scores = read_thesis_scores(REPO / "reference/thesis_probing_scores.csv")
    assert len(scores) == 1150 and scores["model"].nunique() == 31
    fig62 = scores[scores["thesis_figures"].str.split().map(lambda figures: "6.2" in figures)]
    assert set(fig62["model"]) == {f"{student}[{task}]" for student in ("BERT_S", "LSTM_S") for task in
                                   ("CoLA", "SST-2", "Sara")} | {"embed.word[CoLA]", "embed.word[SST-2]",
                                                                 "embed.wordpiece[Sara]"}
    cola_top = scores.query("model == 'BERT_S[CoLA]' and task == 'WordContent' and layer == '5'")
    assert cola_top["score"].tolist() == [0.82]  # the collapse of the top layer's WordContent (Fig. 6.2)


def test_the_shipped_reference_lines_are_those_the_thesis_draws():
    """Figs. 6.1-6.3 and C.1: human performance and the majority class (Conneau et al. 2018) in all four, Conneau et
    al.'s best model in Fig. 6.1, the morphology guess on Tense, SubjNumber and ObjNumber in Fig. 6.3; the numbers
    of the thesis author's plotting code."""
    lines = read_reference_lines(REPO / "reference/thesis_probing_baselines.csv")
    figures_of = lines.groupby("baseline")["thesis_figures"].agg(set).to_dict()
    assert figures_of == {"majority": {"6.1 6.2 6.3 C.1"}, "human": {"6.1 6.2 6.3 C.1"}, "conneau_best": {"6.1"},
                          "morphology": {"6.3"}}
    assert lines.groupby("baseline").size().to_dict() == {"conneau_best": 10, "human": 10, "majority": 10,
                                                          "morphology": 3}
    score = lines.set_index(["baseline", "task"])["score"]
    assert (score["human", "Depth"], score["majority", "TopConstituents"], score["conneau_best", "Length"],
            score["morphology", "SubjNumber"]) == (84.0, 5.0, 99.3, 62.52)
    assert (lines["paper"] != "").all() and lines["read_in"].str.startswith("samsucik/knowledge-distil-bert@").all()


def test_a_reference_line_of_an_unknown_baseline_or_task_is_a_clear_error():
    header = "baseline,task,score,thesis_figures,paper,table,read_in\n"
    with pytest.raises(UserError, match=r"unknown baseline \['chance'\]"):
        read_reference_lines(io.StringIO(header + "chance,Length,20.0,6.1,P,T,R\n"))
    with pytest.raises(UserError, match=r"unknown task \['SentLen'\]"):
        read_reference_lines(io.StringIO(header + "human,SentLen,100,6.1,P,T,R\n"))
    with pytest.raises(UserError, match=r"missing columns \['read_in'\]"):
        read_reference_lines(io.StringIO("baseline,task,score,thesis_figures,paper,table\n"))


@pytest.mark.parametrize("figure_id, expected", [
    ("6.1", {("human", 100.0), ("human", 85.0), ("human", 84.0), ("majority", 20.0), ("majority", 50.0),
             ("majority", 17.9), ("conneau_best", 99.3), ("conneau_best", 91.5), ("conneau_best", 63.8)}),
    ("C.1", {("human", 100.0), ("majority", 20.0)}),  # Length alone; Conneau et al.'s best is Fig. 6.1's
])
def test_thesis_figures_draw_the_thesis_reference_lines_where_the_thesis_does(probing, thesis, figure_id, expected,
                                                                              tmp_path, monkeypatch):
    drawn, axhline = [], Axes.axhline
    monkeypatch.setattr(Axes, "axhline", lambda axes, y=0, **style: drawn.append((style.get("label"), y))
                        or axhline(axes, y, **style))
    table = thesis_comparison(probing, thesis, MODELS, MISSING, pooling="mean")
    reference = read_reference_lines(REPO / "reference/thesis_probing_baselines.csv")
    assert is_png(thesis_probing_figure(table, probing, figure_id, tmp_path / "figure.png", reference))
    labels = {label: baseline for baseline, (label, _) in REFERENCE_STYLES.items()}
    assert {(labels[label], y) for label, y in drawn if label in labels} == expected
    assert ("majority class", 20.0) in drawn  # kdflow's own majority baseline stays beside the thesis's


@pytest.mark.parametrize("figure_id", ["6.1", "6.2", "C.1"])
def test_thesis_figures_draw_kdflow_beside_the_thesis(probing, thesis, figure_id, tmp_path):
    table = thesis_comparison(probing, thesis, MODELS, MISSING, pooling="mean")
    assert is_png(thesis_probing_figure(table, probing, figure_id, tmp_path / "figure.png"))


def test_a_figure_without_thesis_models_is_a_clear_error(probing, thesis, tmp_path):
    table = thesis_comparison(probing, thesis, MODELS, MISSING, pooling="mean")
    with pytest.raises(ValueError, match="no thesis model is drawn in Fig. 6.3"):
        thesis_probing_figure(table, probing, "6.3", tmp_path / "figure.png")
    with pytest.raises(ValueError, match="the thesis's probing figures are 6.1, 6.2, 6.3, C.1, not '6.4'"):
        thesis_probing_figure(table, probing, "6.4", tmp_path / "figure.png")
