"""The prediction analysis (thesis §6.2) on small hand-made prediction tables with hand-computed answers."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

from kdflow.analysis import prediction_analysis as analysis
from kdflow.analysis.prediction_analysis import average_confidence_table, column
from kdflow.analysis.sentences import (
    SentenceFileError,
    read_sentences,
    sentence_document,
    sentence_summary,
    sentence_table,
)
from kdflow.reporting.figures.thesis import average_confidence_figure

# Six dev examples; per model (prediction, confidence). Binary logits are log-probabilities, so the softmax
# gives back exactly the confidence written here.
GOLD = [0, 1, 1, 0, 1, 0]
MODELS = {
    #            idx 0      1         2         3         4          5
    "teacher": [(0, 0.9), (1, 0.8), (1, 0.6), (1, 0.7), (1, 0.95), (0, 0.55)],  # mistakes {3}
    "lstm_s": [(0, 0.6), (0, 0.7), (1, 0.9), (1, 0.8), (0, 0.65), (0, 0.75)],  # mistakes {1, 3, 4}
    "bert_s": [(1, 0.7), (0, 0.6), (1, 0.85), (0, 0.9), (0, 0.8), (1, 0.55)],  # mistakes {0, 1, 4, 5}
}


def make_table(rows, gold=GOLD, idx=None, with_test=True) -> pd.DataFrame:
    idx = list(range(len(rows))) if idx is None else idx
    logits = []
    for pred, conf in rows:
        row = np.full(2, math.log(1 - conf))
        row[pred] = math.log(conf)
        logits.append(row.astype(np.float32))
    table = pd.DataFrame(
        {"split": "dev", "idx": idx, "label": gold, "prediction": [p for p, _ in rows], "logits": logits}
    )
    if with_test:  # unlabelled test rows must be ignored
        test = pd.DataFrame(
            {"split": "test", "idx": [0, 1], "label": [None, None], "prediction": [1, 0],
             "logits": [np.array([0.0, 1.0]), np.array([2.0, 0.0])]}
        )
        table = pd.concat([table, test], ignore_index=True)
    return table


@pytest.fixture
def tables():
    return {name: make_table(rows) for name, rows in MODELS.items()}


TEXTS = pd.DataFrame(
    {"idx": [5, 4, 3, 2, 1, 0], "text_a": ["f", "e", "d", "c", "b", "a"], "text_b": [None] * 5 + ["z"]}
)


# --- confidence ---------------------------------------------------------------------------------------------


def test_confidence_is_softmax_probability_of_predicted_class():
    logits = np.array([[0.0, math.log(3)], [math.log(4), 0.0], [0.0, 0.0], [1000.0, 0.0]])
    # softmax: [1/4, 3/4], [4/5, 1/5], [1/2, 1/2], [1, ~0] (no overflow)
    np.testing.assert_allclose(analysis.confidences(logits), [0.75, 0.8, 0.5, 1.0])
    three = [np.array([0.0, math.log(2), math.log(5)])]  # probabilities 1/8, 2/8, 5/8 from a list column
    np.testing.assert_allclose(analysis.confidences(three), [0.625])
    np.testing.assert_allclose(analysis.confidences(three, predictions=[1]), [0.25])
    with pytest.raises(ValueError, match="classification"):
        analysis.confidences(np.array([[0.3], [0.7]]))


# --- alignment ----------------------------------------------------------------------------------------------


def test_align_joins_dev_rows_on_idx(tables):
    shuffled = {name: table.sample(frac=1, random_state=0) for name, table in tables.items()}
    aligned = analysis.align(shuffled)
    assert aligned["idx"].tolist() == list(range(6))
    assert aligned["label"].tolist() == GOLD
    assert analysis.models_of(aligned) == ["teacher", "lstm_s", "bert_s"]
    assert aligned[column("lstm_s", "prediction")].tolist() == [0, 0, 1, 1, 0, 0]
    assert aligned[column("lstm_s", "correct")].tolist() == [True, False, True, False, False, True]
    np.testing.assert_allclose(aligned[column("bert_s", "confidence")], [0.7, 0.6, 0.85, 0.9, 0.8, 0.55], rtol=1e-6)


def test_align_rejects_mismatched_examples_and_bad_tables(tables):
    fewer = dict(tables, lstm_s=make_table(MODELS["lstm_s"][:5], gold=GOLD[:5]))
    with pytest.raises(ValueError, match="cover different 'dev' examples.*0 idx only in 'lstm_s'.*1 only in"):
        analysis.align(fewer)
    shifted = dict(tables, bert_s=make_table(MODELS["bert_s"], idx=[0, 1, 2, 3, 4, 9]))
    with pytest.raises(ValueError, match=r"cover different.*\[9\]"):
        analysis.align(shifted)
    with pytest.raises(ValueError, match=r"'bert_s' lacks column\(s\) \['logits'\]"):
        analysis.align(dict(tables, bert_s=tables["bert_s"].drop(columns="logits")))
    with pytest.raises(ValueError, match="disagree on the gold label of idx \\[0\\]"):
        analysis.align(dict(tables, bert_s=make_table(MODELS["bert_s"], gold=[1] + GOLD[1:])))
    with pytest.raises(ValueError, match="repeats idx"):
        analysis.align({"teacher": make_table(MODELS["teacher"], idx=[0, 1, 2, 3, 4, 4])})
    with pytest.raises(ValueError, match="no 'dev_mismatched' rows"):
        analysis.align({"teacher": tables["teacher"]}, split="dev_mismatched")
    with pytest.raises(ValueError, match="without a gold label"):
        analysis.align({"teacher": tables["teacher"]}, split="test")
    with pytest.raises(ValueError, match="no prediction tables"):
        analysis.align({})


def test_texts_are_attached_by_idx(tables):
    aligned = analysis.attach_texts(analysis.align(tables), TEXTS)
    assert aligned["text"].tolist() == ["a [SEP] z", "b", "c", "d", "e", "f"]
    with pytest.raises(ValueError, match="lacks 1 examples"):
        analysis.attach_texts(analysis.align(tables), TEXTS.iloc[1:])
    with pytest.raises(ValueError, match="text_a"):
        analysis.attach_texts(analysis.align(tables), TEXTS.drop(columns="text_a"))


# --- per-model statistics -----------------------------------------------------------------------------------


def test_model_summary_by_hand(tables):
    aligned = analysis.align(tables)
    lstm = analysis.model_summary(aligned, "lstm_s")
    assert (lstm["n"], lstm["n_hits"], lstm["n_mistakes"]) == (6, 3, 3)
    assert lstm["accuracy"] == pytest.approx(0.5)
    assert lstm["mean_confidence"] == pytest.approx(4.4 / 6, rel=1e-6)
    assert lstm["mean_confidence_hits"] == pytest.approx((0.6 + 0.9 + 0.75) / 3, rel=1e-6)
    assert lstm["mean_confidence_mistakes"] == pytest.approx((0.7 + 0.8 + 0.65) / 3, rel=1e-6)
    teacher = analysis.model_summary(aligned, "teacher")
    assert teacher["accuracy"] == pytest.approx(5 / 6)
    assert teacher["mean_confidence_hits"] == pytest.approx(3.8 / 5, rel=1e-6)
    assert teacher["mean_confidence_mistakes"] == pytest.approx(0.7, rel=1e-6)
    bert = analysis.model_summary(aligned, "bert_s")
    assert bert["mean_confidence_hits"] == pytest.approx(0.875, rel=1e-6)
    assert bert["mean_confidence_mistakes"] == pytest.approx(2.65 / 4, rel=1e-6)
    perfect = analysis.align({"m": make_table([(g, 0.9) for g in GOLD])})
    assert analysis.model_summary(perfect, "m")["mean_confidence_mistakes"] is None


def test_confidence_standard_deviations_are_sample_deviations(tables):
    """Fig. 6.6's error bars: pandas' std (n - 1), as the thesis plotted them."""
    aligned = analysis.align(tables)
    lstm = analysis.model_summary(aligned, "lstm_s")
    # all: mean 4.4/6, squared deviations sum to 0.35/6 -> variance 0.35/30; hits .6, .9, .75: ((.15)² * 2) / 2
    assert lstm["std_confidence"] == pytest.approx(math.sqrt(0.35 / 30), rel=1e-6)
    assert lstm["std_confidence_hits"] == pytest.approx(0.15, rel=1e-6)
    # mistakes .7, .8, .65 (mean 2.15/3): squared deviations (1/60)² + (1/12)² + (1/15)² = 0.035/3
    assert lstm["std_confidence_mistakes"] == pytest.approx(math.sqrt(0.035 / 6), rel=1e-6)
    teacher = analysis.model_summary(aligned, "teacher")
    assert teacher["n_mistakes"] == 1 and teacher["std_confidence_mistakes"] is None  # undefined for one value


def test_average_confidence_figure_data_by_hand(tables, tmp_path):
    """Thesis Fig. 6.6's numbers, per model and subset, from the analysis JSON."""
    result = json.loads(json.dumps(analysis.analyse(tables)))
    table = average_confidence_table(result)
    assert table[["model", "subset"]].values.tolist() == [
        [model, subset] for model in MODELS for subset in ("all", "hits", "mistakes")
    ]
    rows = table.set_index(["model", "subset"])
    assert rows.loc[("lstm_s", "all")].tolist() == pytest.approx([6, 4.4 / 6, math.sqrt(0.35 / 30)], rel=1e-6)
    assert rows.loc[("lstm_s", "hits")].tolist() == pytest.approx([3, 0.75, 0.15], rel=1e-6)
    assert rows.loc[("bert_s", "hits")].tolist() == pytest.approx([2, 0.875, math.sqrt(0.025**2 * 2)], rel=1e-6)
    assert rows.loc[("bert_s", "mistakes")].tolist() == pytest.approx(  # .7, .6, .8, .55
        [4, 2.65 / 4, math.sqrt((0.0375**2 + 0.0625**2 + 0.1375**2 + 0.1125**2) / 3)], rel=1e-6)
    teacher = rows.loc[("teacher", "mistakes")]
    assert teacher["n"] == 1 and teacher["mean_confidence"] == pytest.approx(0.7)
    assert np.isnan(teacher["std_confidence"])
    path = average_confidence_figure(table, tmp_path / "average.png", "sst2")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_most_and_least_confident_hits_and_mistakes(tables):
    aligned = analysis.attach_texts(analysis.align(tables), TEXTS)
    top = analysis.extreme_examples(aligned, "lstm_s", k=2)
    ids = {category: [record["idx"] for record in records] for category, records in top.items()}
    assert ids == {
        "confident_hits": [2, 5],  # hits 0 (.6), 2 (.9), 5 (.75)
        "unconfident_hits": [0, 5],
        "confident_mistakes": [3, 1],  # mistakes 1 (.7), 3 (.8), 4 (.65)
        "unconfident_mistakes": [4, 1],
    }
    record = top["confident_hits"][0]
    assert record == {"idx": 2, "gold": 1, "text": "c", "prediction": 1, "confidence": pytest.approx(0.9)}
    assert [r["idx"] for r in analysis.extreme_examples(aligned, "lstm_s")["confident_mistakes"]] == [3, 1, 4]
    named = analysis.extreme_examples(aligned, "lstm_s", k=1, labels=["neg", "pos"])["confident_mistakes"][0]
    assert (named["gold"], named["prediction"]) == ("neg", "pos")


def test_confidence_ties_are_broken_by_idx():
    aligned = analysis.align({"m": make_table([(0, 0.7), (1, 0.7), (1, 0.9), (0, 0.7)], gold=[0, 1, 1, 0])})
    top = analysis.extreme_examples(aligned, "m", k=3)
    assert [r["idx"] for r in top["confident_hits"]] == [2, 0, 1]
    assert [r["idx"] for r in top["unconfident_hits"]] == [0, 1, 3]
    assert top["confident_mistakes"] == []


# --- model differences --------------------------------------------------------------------------------------


def test_mistake_and_hit_overlap_by_hand(tables):
    aligned = analysis.align(tables)
    mistakes = analysis.overlaps(aligned)
    # mistakes: teacher {3}, lstm_s {1, 3, 4}, bert_s {0, 1, 4, 5}
    assert mistakes["count"]["lstm_s"] == {"teacher": 1, "lstm_s": 3, "bert_s": 2}
    assert mistakes["count"]["bert_s"]["teacher"] == 0
    assert mistakes["fraction_of_row"]["lstm_s"]["bert_s"] == pytest.approx(2 / 3)
    assert mistakes["fraction_of_row"]["bert_s"]["lstm_s"] == pytest.approx(2 / 4)
    assert mistakes["fraction_of_row"]["teacher"]["lstm_s"] == 1.0
    assert mistakes["fraction_of_row"]["lstm_s"]["teacher"] == pytest.approx(1 / 3)
    assert mistakes["jaccard"]["lstm_s"]["bert_s"] == pytest.approx(2 / 5)  # union {0, 1, 3, 4, 5}
    assert mistakes["jaccard"]["teacher"]["bert_s"] == 0.0
    assert mistakes["overlap_coefficient"]["bert_s"]["lstm_s"] == pytest.approx(2 / 3)
    assert mistakes["fraction_of_row"]["bert_s"]["bert_s"] == 1.0
    hits = analysis.overlaps(aligned, of="hits")  # lstm_s {0, 2, 5}, bert_s {2, 3}
    assert hits["count"]["lstm_s"]["bert_s"] == 1
    assert hits["fraction_of_row"]["bert_s"]["lstm_s"] == pytest.approx(1 / 2)
    assert hits["jaccard"]["lstm_s"]["bert_s"] == pytest.approx(1 / 4)
    perfect = analysis.align({"a": make_table([(g, 0.9) for g in GOLD]), "b": tables["bert_s"]})
    assert analysis.overlaps(perfect)["fraction_of_row"]["a"]["b"] is None  # no mistakes to share


def test_pearson_of_confidences_against_numpy(tables):
    aligned = analysis.align(tables)
    result = analysis.confidence_correlations(aligned)
    assert result["n"] == 6
    for a in MODELS:
        for b in MODELS:
            x, y = aligned[column(a, "confidence")], aligned[column(b, "confidence")]
            assert result["r"][a][b] == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-9)
            assert result["r"][a][b] == result["r"][b][a] and result["p"][a][b] == result["p"][b][a]
    r = result["r"]["lstm_s"]["bert_s"]
    t = abs(r) * math.sqrt(4 / (1 - r * r))
    # df = 4 closed form: two-sided p = 1 - (3/4) u (1 - t²/(12 (1 + t²/4))), u = t / sqrt(1 + t²/4)
    u = t / math.sqrt(1 + t * t / 4)
    assert result["p"]["lstm_s"]["bert_s"] == pytest.approx(1 - 0.75 * u * (1 - t * t / (12 * (1 + t * t / 4))))
    assert result["p"]["teacher"]["teacher"] == 0.0


def test_pearson_p_value_with_closed_form_degrees_of_freedom():
    # n = 3 -> df = 1 (Cauchy), n = 4 -> df = 2: p-values in closed form from r
    x, y = [1.0, 2.0, 3.0], [1.0, 3.0, 2.0]  # r = 0.5
    r, p = analysis.pearson_test(x, y)
    t = 0.5 * math.sqrt(1 / 0.75)
    assert r == pytest.approx(0.5) and p == pytest.approx(1 - 2 / math.pi * math.atan(t))
    x, y = [1.0, 2.0, 3.0, 4.0], [2.0, 1.0, 4.0, 3.0]  # r = 0.6
    r, p = analysis.pearson_test(x, y)
    t = 0.6 * math.sqrt(2 / 0.64)
    assert r == pytest.approx(0.6) and p == pytest.approx(1 - t / math.sqrt(2 + t * t))
    assert analysis.pearson_test([1, 1, 1], [1, 2, 3]) == (None, None)
    assert analysis.pearson_test([1, 2], [2, 1]) == (pytest.approx(-1.0), None)


# --- knowledge distillation and the whole analysis ------------------------------------------------------------


def test_teacher_right_every_student_wrong(tables):
    aligned = analysis.attach_texts(analysis.align(tables), TEXTS)
    records = analysis.teacher_right_students_wrong(aligned, "teacher", ["lstm_s", "bert_s"])
    # teacher hits {0, 1, 2, 4, 5}; both students wrong on {1, 4}; teacher confidence 0.95 (idx 4) > 0.8 (idx 1)
    assert [r["idx"] for r in records] == [4, 1]
    assert records[0]["text"] == "e" and records[0]["gold"] == 1
    assert records[0]["lstm_s:prediction"] == 0 and records[0]["bert_s:confidence"] == pytest.approx(0.8)
    assert records[0]["teacher:confidence"] == pytest.approx(0.95)
    only_lstm = analysis.teacher_right_students_wrong(aligned, "teacher", ["lstm_s"])
    assert [r["idx"] for r in only_lstm] == [4, 1]
    assert analysis.teacher_right_students_wrong(aligned, "teacher", []) == []


# P4: per example (gold, teacher right, first student right, second student right); idx 10-18.
P4_EXAMPLES = [(1, 1, 1, 0), (0, 1, 0, 1), (1, 1, 1, 1), (0, 1, 0, 0), (1, 1, 0, 1), (0, 1, 1, 0), (1, 1, 1, 0),
               (0, 1, 0, 1), (1, 0, 1, 0)]


def p4_aligned():
    def model(position):  # right: predicts the gold label, else the other one
        return make_table([(e[0] if e[position] else 1 - e[0], 0.8) for e in P4_EXAMPLES],
                          gold=[e[0] for e in P4_EXAMPLES], idx=list(range(10, 19)), with_test=False)

    return analysis.align({"teacher": model(1), "s1": model(2), "s2": model(3)})


def test_teacher_right_exactly_one_student_right_drawn_with_seed_42():
    aligned = p4_aligned()
    # Candidates (teacher right, exactly one student right): idx 10, 14, 16 (gold 1) and 11, 15, 17 (gold 0); not
    # 12 (both right), 13 (both wrong), 18 (teacher wrong). Sorted by gold label, then idx: [11, 15, 17, 10, 14, 16].
    # numpy.random.RandomState(42).permutation(6) = [0, 1, 5, 2, 4, 3] (numpy keeps this legacy stream fixed), so
    # the draw is 11, 15, 16, 17, 14, 10 -- scikit-learn's shuffle(..., random_state=42), as the thesis drew.
    drawn = analysis.one_student_right(aligned, "teacher", ["s1", "s2"], k=3)
    assert drawn["seed"] == 42 and drawn["candidates"] == 6
    assert [r["idx"] for r in drawn["examples"]] == [11, 15, 16]
    assert [r["right_student"] for r in drawn["examples"]] == ["s2", "s1", "s1"]
    assert drawn["examples"][0]["s2:prediction"] == 0 and drawn["examples"][0]["s1:prediction"] == 1
    assert analysis.one_student_right(aligned, "teacher", ["s1", "s2"], k=3) == drawn  # reproducible
    everything = analysis.one_student_right(aligned, "teacher", ["s1", "s2"], k=10)
    assert [r["idx"] for r in everything["examples"]] == [11, 15, 16, 17, 14, 10]
    other_seed = analysis.one_student_right(aligned, "teacher", ["s1", "s2"], k=3, seed=7)
    assert [r["idx"] for r in other_seed["examples"]] == [10, 16, 11]  # RandomState(7).permutation(6)[:3] = 3, 5, 0
    with pytest.raises(ValueError, match="at least two students"):
        analysis.one_student_right(aligned, "teacher", ["s1"])


def test_confidence_gap_of_two_students(tables):
    aligned = analysis.attach_texts(analysis.align(tables), TEXTS)
    gap = analysis.confidence_gap(aligned, "lstm_s", "bert_s", k=3)
    # conf(lstm_s) - conf(bert_s) per idx: -.1, .1, .05, -.1, -.15, .2
    assert (gap["first"], gap["second"]) == ("lstm_s", "bert_s")
    assert [(r["idx"], r["gap"]) for r in gap["largest"]] == [(5, 0.2), (1, 0.1), (2, 0.05)]
    assert [(r["idx"], r["gap"]) for r in gap["smallest"]] == [(4, -0.15), (0, -0.1), (3, -0.1)]  # tie: by idx
    record = gap["largest"][0]
    assert record["text"] == "f" and record["teacher:prediction"] == 0
    assert record["bert_s:confidence"] == pytest.approx(0.55)
    only_students = analysis.confidence_gap(aligned, "bert_s", "lstm_s", k=1, models=["bert_s", "lstm_s"])
    assert only_students["largest"][0]["idx"] == 4 and "teacher:prediction" not in only_students["largest"][0]


def test_confidence_gaps_compare_confidences_rounded_to_2_decimals():
    """The thesis ranked on confidences rounded to 2 decimals: .714 - .706 is no gap at all, so idx 0 comes
    first by idx, although its unrounded gap (0) is smaller than idx 1's (.008)."""
    gold = [0, 0]
    aligned = analysis.align({"a": make_table([(0, 0.704), (0, 0.714)], gold=gold),
                              "b": make_table([(0, 0.704), (0, 0.706)], gold=gold)})
    largest = analysis.confidence_gap(aligned, "a", "b", k=2)["largest"]
    assert [(r["idx"], r["gap"]) for r in largest] == [(0, 0), (1, 0)]


def test_teacher_confidence_gap_is_the_mean_over_students(tables):
    aligned = analysis.align(tables)
    records = analysis.teacher_confidence_gap(aligned, "teacher", ["lstm_s", "bert_s"], k=3)
    # teacher - mean(students) per idx: .9 - .65, .8 - .65, .6 - .875, .7 - .85, .95 - .725, .55 - .65
    assert [(r["idx"], r["gap"]) for r in records] == [(0, 0.25), (4, 0.225), (1, 0.15)]
    assert records[0]["teacher:confidence"] == pytest.approx(0.9) and records[0]["lstm_s:prediction"] == 0
    one = analysis.teacher_confidence_gap(aligned, "teacher", ["bert_s"], k=2)  # .2, .2, -.25, -.2, .15, 0
    assert [(r["idx"], r["gap"]) for r in one] == [(0, 0.2), (1, 0.2)]
    with pytest.raises(ValueError, match="at least one student"):
        analysis.teacher_confidence_gap(aligned, "teacher", [])


def test_analyse_is_json_serialisable_and_renders(tables, tmp_path):
    paths = {}
    for name, table in tables.items():  # round trip through Parquet as the workflow writes it
        paths[name] = tmp_path / f"{name}.parquet"
        table.to_parquet(paths[name], index=False)
    result = analysis.analyse(analysis.load_predictions(paths), texts=TEXTS, k=2)
    assert json.loads(json.dumps(result, allow_nan=False)) == result
    assert result["students"] == ["lstm_s", "bert_s"] and result["n_examples"] == 6
    assert result["per_model"]["teacher"]["accuracy"] == pytest.approx(5 / 6)
    assert len(result["per_model"]["lstm_s"]["examples"]["confident_mistakes"]) == 2
    assert result["mistake_overlap"]["count"]["lstm_s"]["bert_s"] == 2
    assert [r["idx"] for r in result["teacher_right_students_wrong"]] == [4, 1]
    assert result["one_student_right"]["candidates"] == 2  # idx 0 and 5: lstm_s right, bert_s wrong
    assert [r["idx"] for r in result["one_student_right"]["examples"]] == [5, 0]  # RandomState(42).permutation(2)
    assert [r["idx"] for r in result["confidence_gap"]["largest"]] == [5, 1]
    assert [r["idx"] for r in result["teacher_confidence_gap"]] == [0, 4]
    document = analysis.analysis_document(result)
    page, html = document.markdown(), document.html()
    for name in MODELS:
        assert f"`{name}`" in page and f"| {name} |" in page and f"<code>{name}</code>" in html
    r = result["confidence_correlation"]["r"]["lstm_s"]["bert_s"]
    assert f"{r:.3f} (p=" in page and "1.000*" not in html  # the diagonal is shown as a plain 1
    assert "2 (66.7%)" in page and "Teacher right, every student wrong" in page
    assert "| lstm_s | 6 | 0.500 | 3 | 3 | 0.733 ± 0.108 | 0.750 ± 0.150 | 0.717 ± 0.076 |" in page  # P2/P3
    assert "| teacher | 6 | 0.833 | 5 | 1 | 0.750 ± 0.161 | 0.760 ± 0.178 | 0.700 |" in page  # one mistake: no std
    assert "exactly one student right (P4): 2 random of 2 examples" in page
    assert "Largest gap: `lstm_s` confident, `bert_s` not" in page
    assert "Confident teacher, unconfident students (P8)" in page
    assert page.count("Thesis (Table 6.2): ") == 5  # P2/P3, P4, P5, P7, P8
    assert "*Similar to P7; complicated examples" in page
    assert r"| a \[SEP\] z |" in page and "<td>a [SEP] z</td>" in html  # sentences are text, never Markdown
    assert r"\* marks p \< 0.05" in page and "* marks p &lt; 0.05" in html
    with pytest.raises(ValueError, match="teacher 'bert_t' is not among"):
        analysis.analyse(tables, teacher="bert_t")
    no_teacher = analysis.analyse(tables, teacher=None)
    assert no_teacher["teacher_right_students_wrong"] is None
    assert no_teacher["one_student_right"] is None and no_teacher["teacher_confidence_gap"] is None
    assert no_teacher["confidence_gap"]["first"] == "teacher"  # without a teacher every model is a student
    assert "Teacher right" not in analysis.analysis_document(no_teacher).markdown()
    one_student = analysis.analyse({name: tables[name] for name in ("teacher", "bert_s")}, k=1)
    assert one_student["one_student_right"] is None and one_student["confidence_gap"] is None
    assert [r["idx"] for r in one_student["teacher_confidence_gap"]] == [0]
    page = analysis.analysis_document(one_student).markdown()
    assert "(P4)" not in page and "Confident student" not in page and "(P8)" in page


# --- sentences and perturbed variants (thesis Tables 6.3 and C.1) --------------------------------------------

COLA_LABELS = ["unacceptable", "acceptable"]


def test_the_thesis_table_c1_list_as_shipped():
    sentences = read_sentences(REPO / "reference/thesis_table_c1_sentences.tsv", COLA_LABELS)
    frame = sentences.frame
    assert len(frame) == 70 and frame["original"].sum() == 21  # "21 interesting CoLA sentences" (§6.2)
    assert frame.groupby("group")["original"].sum().eq(1).all() and frame.groupby("group").size().min() == 2
    assert sentences.reported == ["bert_t", "bert_s", "lstm_s"]
    assert frame.iloc[0][["label", "sentence"]].tolist() == [0, "i gave pete the book to impress."]
    reported = frame.dropna(subset=["bert_t_confidence"]).set_index("sentence")  # Table 6.3's 7 sentences
    assert len(reported) == 7
    assert reported.loc["my heart is pounding me."].tolist()[2:] == [0, 0, 0.89, 1, 0.96, 1, 0.88]
    assert reported.loc["we believed john to be a bench in the park."].tolist()[2:] == [0, 0, 0.93, 1, 0.96, 1, 0.98]
    assert (reported["bert_t_prediction"] == reported["label"]).all()  # the thesis's teacher gets all 7 right


def write_sentences(tmp_path, text: str):
    path = tmp_path / "sentences.tsv"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, message",
    [
        ("label\ttext\n1\ta b c\n", r"sentences.tsv:1: unknown column 'text'"),
        ("label\n1\n", r"sentences.tsv:1: no 'sentence' column \(columns: label\)"),
        ("sentence\tt_prediction\na\t1\n", r"sentences.tsv:1: column 't_prediction' without 't_confidence'"),
        ("label\tsentence\n1\tfine.\n0\tnot fine\tat all\n", r"sentences.tsv:3: expected 2 tab-separated fields, found 3"),
        ("label\tsentence\n2\tfine.\n", r"sentences.tsv:2: label '2' is neither a label id \(0-1\) nor a label name"),
        ("label\tsentence\n1\t \n", r"sentences.tsv:2: empty sentence"),
        ("sentence\tt_prediction\tt_confidence\na\t1\t1.2\n", r"sentences.tsv:2: t_confidence '1.2' is not a probability"),
        ("sentence\tt_prediction\tt_confidence\na\t1\t\n", r"sentences.tsv:2: t_prediction and t_confidence must both"),
        ("sentence\toriginal\na\tO\n", r"sentences.tsv:2: original must be 1, 0 or empty, not 'O'"),
        ("sentence\n\n", r"sentences.tsv: no sentences"),
    ],
    ids=["unknown-column", "no-sentence", "unpaired", "fields", "label", "empty", "confidence", "half-reported",
         "original", "no-rows"],
)
def test_a_malformed_sentence_file_is_named_with_its_line(tmp_path, text, message):
    with pytest.raises(SentenceFileError, match=message):
        read_sentences(write_sentences(tmp_path, text), COLA_LABELS)


def test_every_model_beside_what_the_file_reports(tmp_path):
    path = write_sentences(tmp_path, "group\toriginal\tlabel\tsentence\tt_prediction\tt_confidence\n"
                                     "1\t1\tunacceptable\tmy heart is pounding me.\t0\t0.89\n"
                                     "1\t0\t1\tmy heart is pounding.\t\t\n"
                                     "\t\t\ta new one.\tacceptable\t0.6\n\n")
    sentences = read_sentences(path, COLA_LABELS)
    assert sentences.frame["label"].fillna(-1).tolist() == [0, 1, -1]
    assert sentences.frame["original"].tolist() == [True, False, False]
    log = math.log
    logits = {"teacher": np.array([[log(0.9), log(0.1)], [log(0.2), log(0.8)], [log(0.3), log(0.7)]]),
              "student": np.array([[log(0.4), log(0.6)], [log(0.25), log(0.75)], [log(0.5), log(0.5)]])}
    table = sentence_table(sentences, logits, COLA_LABELS, {"teacher": "t"})
    assert table.columns.tolist() == [
        "group", "original", "sentence", "label", "teacher:prediction", "teacher:confidence", "reported:t:prediction",
        "reported:t:confidence", "student:prediction", "student:confidence"]
    assert table["teacher:prediction"].tolist() == ["unacceptable", "acceptable", "acceptable"]
    np.testing.assert_allclose(table["teacher:confidence"], [0.9, 0.8, 0.7])
    assert table["student:prediction"].tolist() == ["acceptable", "acceptable", "unacceptable"]  # a tie: class 0
    assert table["reported:t:prediction"].fillna("").tolist() == ["unacceptable", "", "acceptable"]
    summary = sentence_summary(table, ["teacher", "student"], {"teacher": "t"}).set_index("model")
    assert summary.loc["teacher", ["labelled", "correct", "compared", "same_prediction"]].tolist() == [2, 2, 2, 2]
    assert summary.loc["teacher", "mean_abs_confidence_difference"] == pytest.approx((0.01 + 0.1) / 2)
    assert summary.loc["student", ["correct", "compared"]].tolist() == [1, 0]
    assert pd.isna(summary.loc["student", "reported_model"])
    unmapped = sentence_table(sentences, logits, COLA_LABELS)
    assert unmapped.columns[-2:].tolist() == ["reported:t:prediction", "reported:t:confidence"]  # last, unmapped
    with pytest.raises(SentenceFileError, match=r"reports no predictions of \['bert_t'\] \(it has: t\)"):
        sentence_table(sentences, logits, COLA_LABELS, {"teacher": "bert_t"})
    page = sentence_document(table, summary.reset_index(), "cola", "sentences.tsv").markdown()
    assert "| 1 | O | my heart is pounding me. | unacceptable | unacceptable 0.90 | unacceptable 0.89 | acceptable 0.60 |" in page
    assert "thesis Tables 6.3 and C.1" in page
