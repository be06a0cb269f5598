"""The prediction analysis (thesis §6.2) on small hand-made prediction tables with hand-computed answers."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from kdflow.analysis import predictions as analysis
from kdflow.analysis.predictions import column

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
    document = analysis.analysis_document(result)
    page, html = document.markdown(), document.html()
    for name in MODELS:
        assert f"`{name}`" in page and f"| {name} |" in page and f"<code>{name}</code>" in html
    r = result["confidence_correlation"]["r"]["lstm_s"]["bert_s"]
    assert f"{r:.3f} (p=" in page and "1.000*" not in html  # the diagonal is shown as a plain 1
    assert "2 (66.7%)" in page and "Teacher right, every student wrong" in page
    assert r"| a \[SEP\] z |" in page and "<td>a [SEP] z</td>" in html  # sentences are text, never Markdown
    assert r"\* marks p \< 0.05" in page and "* marks p &lt; 0.05" in html
    with pytest.raises(ValueError, match="teacher 'bert_t' is not among"):
        analysis.analyse(tables, teacher="bert_t")
    no_teacher = analysis.analyse(tables, teacher=None)
    assert no_teacher["teacher_right_students_wrong"] is None
    assert "Teacher right" not in analysis.analysis_document(no_teacher).markdown()
