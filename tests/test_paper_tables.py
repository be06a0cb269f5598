"""The papers' tables next to kdflow's results, on hand-made kdflow outputs."""

import json

import pandas as pd
import pytest
import yaml
from conftest import REPO

from kdflow.core.deviation_entries import RUN_ONLY, STAND_IN
from kdflow.reporting.paper_tables import (
    SPREAD_LEGEND,
    hyperparameter_document,
    hyperparameter_runs,
    hyperparameter_table,
    input_files,
    kdflow_score,
    load_inputs,
    paper_caption,
    paper_document,
    paper_latex,
    paper_table,
    read_reference,
    required_inputs,
    run_key,
    split_by_task,
    table_inputs,
    write_paper_table,
)
from kdflow.reporting.protocols import deviations_of
from kdflow.workflow import results_paths as paths
from kdflow.workflow.exploration import protocol_config
from kdflow.workflow.job_settings import scale_note

REFERENCE = read_reference(REPO / "reference" / "paper_results.csv")

UKD, ALP = "universal_kd_wu2021", "alp_kd_passban2021"
SPECS = {  # as in config.yaml
    "universal_kd_table2": dict(source=UKD, table="2", teacher="bert_base",
                                experiments=["universal_kd_table2", "alp_kd_table1"], students={"bert-4": "bert_4"}),
    "universal_kd_table3": dict(source=UKD, table="3", teacher="bert_base",
                                experiments=["universal_kd_table2", "alp_kd_table1"], students={"bert-4": "bert_4"}),
    "universal_kd_table4": dict(source=UKD, table="4", teacher="roberta_large", experiments=["universal_kd_table4"],
                                students={"distilroberta": "distilroberta"}),
    "universal_kd_table5": dict(source=UKD, table="5", teacher="bert_base", experiments=["universal_kd_table5"],
                                students={"bilstm": "bilstm", "gated_cnn": "gated_cnn"}),
    "universal_kd_table6": dict(source=UKD, table="6", teacher="roberta_large", experiments=["universal_kd_table4"],
                                students={"distilroberta": "distilroberta"}),
    "alp_kd_table1": dict(source=ALP, table="1", teacher="bert_base", experiments=["alp_kd_table1"],
                          students={"bert-4": "bert_4"}),
    "alp_kd_table2": dict(source=ALP, table="2", teacher="bert_base", experiments=["alp_kd_table2"],
                          students={"bert-6": "bert_6"}),
    "alp_kd_table3": dict(source=ALP, table="3", teacher="bert_base", experiments=["alp_kd_table3"],
                          students={"bert-2": "bert_2"}),
    "thesis_table52": dict(
        source="thesis_sucik2020", table=5.2, teacher="bert_large",
        experiments=["thesis_table52_lstm_s", "thesis_table52_bert_s"],
        students={"bilstm_s": "lstm_s", "bert_s": "bert_s"},
        student_methods={"bilstm_s": {"kd": "mse_logits"}},
        inference={"bert-large (teacher)": {"sst2": "bert_large_sst2"}, "bilstm_s": {"sst2": "lstm_s_sst2"}},
    ),
}
ROWS = {"universal_kd_table2": 63, "universal_kd_table3": 52, "universal_kd_table4": 63, "universal_kd_table5": 63,
        "universal_kd_table6": 12, "alp_kd_table1": 81, "alp_kd_table2": 81, "alp_kd_table3": 72, "thesis_table52": 36}
GLUE = ["cola", "mnli", "mrpc", "qnli", "qqp", "rte", "sst2", "stsb"]
MAIN_METRIC = {"cola": "mcc", "stsb": "pearson", "sara": "f1_micro"}

# Every teacher scores 0.5 on dev (and Sara's test); every GLUE student 40 + the task's position in GLUE.
TEACHER = {task: {"scores": {"dev": {MAIN_METRIC.get(task, "accuracy"): 0.5}}} for task in GLUE}
TEACHER["sara"] = {"scores": {"dev": {"f1_micro": 0.5}, "test": {"f1_micro": 0.9}}}


def student_scores(student, method, tasks=GLUE):
    return [dict(task=task, student=student, method=method, split="dev", metric=MAIN_METRIC.get(task, "accuracy"),
                 headline=40.0 + i, mean=40.0 + i, std=1.0, seeds=1, selected="default")
            for i, task in enumerate(tasks)]


EXPERIMENTS = {
    "universal_kd_table2": pd.DataFrame(student_scores("bert_4", "kd") + student_scores("bert_4", "no_kd", ["sst2"])),
    # ALP-KD Table 1's runs: kd as well, which Universal-KD Table 2 must take from its own experiment
    "alp_kd_table1": pd.DataFrame(student_scores("bert_4", "pkd") + student_scores("bert_4", "kd", ["cola"])
                                  + student_scores("bert_4", "ckd_no", ["rte"])).assign(mean=lambda f: f["mean"] + 10,
                                                                                  headline=lambda f: f["mean"]),
    "thesis_table52_lstm_s": pd.DataFrame([
        dict(task="sst2", student="lstm_s", method="mse_logits", split="dev", metric="accuracy", headline=90.0,
             mean=90.0, std=0.5, seeds=3, selected="default"),
        dict(task="sara", student="lstm_s", method="mse_logits", split="test", metric="f1_micro", headline=85.0,
             mean=85.0, std=0.2, seeds=3, selected="default"),
    ]),
}
INFERENCE = {"bert_large_sst2": {"params_millions_non_embedding": 303.36, "ms_per_example_cpu": 40.0},
             "lstm_s_sst2": {"params_millions_non_embedding": 2.41, "ms_per_example_cpu": 0.5}}


def table_of(name):
    return paper_table(REFERENCE, SPECS[name], TEACHER, EXPERIMENTS, INFERENCE)


def cell(table, student, method, task, metric=None, split="dev"):
    rows = table[(table.student == student) & (table.method == method) & (table.task == task) & (table.split == split)]
    return (rows if metric is None else rows[rows.metric == metric]).squeeze()


@pytest.mark.parametrize("name", SPECS)
def test_every_paper_row_is_present_in_the_papers_order(name):
    table = table_of(name)
    ours = table[table.metric == "ms_per_example_onnxruntime_cpu"]  # rows kdflow adds (issue 55), not the paper's
    assert len(table) - len(ours) == ROWS[name] and ours.paper.isna().all()
    table_paper = table.drop(index=ours.index)
    paper = REFERENCE[(REFERENCE.source == SPECS[name]["source"]) & (REFERENCE.table == str(SPECS[name]["table"]))]
    assert table_paper.paper.fillna(-1).tolist() == paper.value.fillna(-1).tolist()
    assert table_paper[["student", "method", "task", "metric", "split"]].values.tolist() == paper[
        ["student", "method", "task", "metric", "split"]].values.tolist()
    scores = ~table.metric.isin(["params_millions_non_embedding", "ms_per_example_cpu"])
    # only scores that both have differ
    assert (table.difference.isna() == (table.kdflow.isna() | table.paper.isna() | ~scores)).all()
    assert (table.kdflow.notna() | (table.kdflow_note != "")).all()  # every empty cell says why


def test_students_and_teachers_get_kdflow_values_and_differences():
    table = table_of("universal_kd_table2")
    kd_cola = cell(table, "bert-4", "kd", "cola")
    assert (kd_cola.kdflow, kd_cola.paper, kd_cola.kdflow_std, kd_cola.seeds) == (40.0, 29.2, 1.0, 1)
    assert kd_cola.difference == pytest.approx(10.8)
    assert (kd_cola.kdflow_student, kd_cola.kdflow_method) == ("bert_4", "kd")
    assert kd_cola.kdflow_from == "universal_kd_table2"
    teacher = cell(table, "bert-base (teacher)", "teacher", "stsb")
    assert (teacher.kdflow, teacher.difference, teacher.kdflow_student) == (50.0, pytest.approx(50 - 88.9), "bert_base")
    missing = cell(table, "bert-4", "alp", "rte")
    assert pd.isna(missing.kdflow)
    assert missing.kdflow_note == "not in the tables of experiments universal_kd_table2, alp_kd_table1"
    assert missing.paper_note == "taken from ALP-KD paper"


def test_universal_kd_takes_pkd_from_alp_kd_table1_and_its_own_methods_from_its_own_experiment():
    """Universal-KD Table 2's PKD and ALP are "taken from" ALP-KD: the experiments are searched in order, so kd
    comes from universal_kd_table2 although alp_kd_table1 has it too, and pkd from alp_kd_table1."""
    table = table_of("universal_kd_table2")
    pkd = cell(table, "bert-4", "pkd", "rte")
    assert (pkd.kdflow, pkd.kdflow_from, pkd.paper) == (55.0, "alp_kd_table1", 65.7)
    kd = cell(table, "bert-4", "kd", "cola")
    assert (kd.kdflow, kd.kdflow_from) == (40.0, "universal_kd_table2")


def test_alp_kd_table1_shows_kdflow_beside_a_dash_where_the_paper_is_not_transcribed():
    table = table_of("alp_kd_table1")
    ckd = cell(table, "bert-4", "ckd_no", "rte")
    assert ckd.kdflow == 50.0 and pd.isna(ckd.paper) and pd.isna(ckd.difference)
    assert cell(table, "bert-4", "pkd", "cola").paper == 32.1  # as Universal-KD Table 2 quotes it
    text = paper_document(table, "ALP-KD Table 1").markdown()
    assert "| bert-4 | ckd_no | bert_4 / ckd_no | — (—) | — (—) | — (—) | — (—) | — (—) |" in text  # cola-qqp
    assert "| bert-4 | ckd_no | bert_4 / ckd_no | 50.0 (—) |" in text  # rte, first of the second table
    assert "| bert-4 | pkd | bert_4 / pkd | 50.0 (32.1) |" in text


def test_averages_are_kdflows_over_the_same_tasks_only_when_it_has_them_all():
    table = table_of("universal_kd_table2")
    assert cell(table, "bert-4", "kd", "average").kdflow == 43.5  # mean of 40..47
    assert cell(table, "bert-base (teacher)", "teacher", "average").kdflow == 50.0
    no_kd = cell(table, "bert-4", "no_kd", "average")
    assert pd.isna(no_kd.kdflow) and no_kd.kdflow_note == "kdflow lacks some of the scores this averages"


def test_an_average_of_several_metrics_per_task_averages_within_each_task_first():
    """GLUE's rule (Universal-KD Table 3's 72.6 for PKD): MRPC's F1 and accuracy count as one task."""
    reference = pd.DataFrame([
        dict(source="toy", table="1", teacher="t", student="t (teacher)", method="teacher", task=task, metric=metric,
             split="dev", value=value, note="")
        for task, metric, value in [("mrpc", "f1", 80.0), ("mrpc", "accuracy", 70.0), ("rte", "accuracy", 60.0),
                                    ("average", "mean", 67.5)]
    ])
    teacher = {"mrpc": {"scores": {"dev": {"f1": 0.9, "accuracy": 0.8}}}, "rte": {"scores": {"dev": {"accuracy": 0.5}}}}
    spec = dict(source="toy", table=1, teacher="t", experiments=["e"])
    table = paper_table(reference, spec, teacher, {}, {})
    assert table.kdflow.tolist() == [90.0, 80.0, 50.0, 67.5]  # ((90 + 80) / 2 + 50) / 2
    assert table.difference.iloc[-1] == 0.0


def test_glue_test_scores_stay_empty_and_point_to_the_submission_files():
    table = table_of("universal_kd_table3")
    assert table.kdflow.isna().all()
    glue = table[table.task != "average"]
    submission = paths.GLUE_SUBMISSION.format(experiment="universal_kd_table2")
    assert glue.kdflow_note.str.contains(f"{submission}/").all()
    assert required_inputs(SPECS["universal_kd_table3"], REFERENCE) == {
        "teacher_tasks": [], "experiments": [], "inference_models": []}


def test_mnli_scores_map_to_kdflows_matched_and_mismatched_splits():
    assert kdflow_score("mnli", "accuracy", "dev") == ("dev", "accuracy")  # the papers' MNLI dev is matched
    assert kdflow_score("mnli", "accuracy_matched", "test") == ("test", "accuracy")
    assert kdflow_score("mnli", "accuracy_mismatched", "test") == ("test_mismatched", "accuracy")
    assert kdflow_score("sara", "f1_micro", "test") == ("test", "f1_micro")


def test_the_thesis_lstm_s_is_kdflows_lstm_s_with_mse_logits_and_sara_test_is_scored():
    table = table_of("thesis_table52")
    lstm = cell(table, "bilstm_s", "kd", "sst2", "accuracy")
    assert (lstm.kdflow_student, lstm.kdflow_method) == ("lstm_s", "mse_logits")
    assert lstm.kdflow_from == "thesis_table52_lstm_s"
    assert (lstm.kdflow, lstm.kdflow_std, lstm.seeds) == (90.0, 0.5, 3)
    assert lstm.difference == pytest.approx(-1.2)
    assert cell(table, "bilstm_s", "kd", "sara", "f1_micro", "test").kdflow == 85.0  # Sara's test set is labelled
    assert cell(table, "bert-large (teacher)", "teacher", "sara", "f1_micro", "test").kdflow == 90.0
    assert pd.isna(cell(table, "bilstm_s", "kd", "sst2", "accuracy", "test").kdflow)  # GLUE test
    bert_s = cell(table, "bert_s", "kd", "sst2", "accuracy")
    assert (bert_s.kdflow_method, pd.isna(bert_s.kdflow)) == ("kd", True)


def test_the_thesis_sizes_and_speeds_come_from_the_inference_measurements():
    table = table_of("thesis_table52")
    size = cell(table, "bert-large (teacher)", "teacher", "sst2", "params_millions_non_embedding", "-")
    assert (size.kdflow, size.kdflow_from) == (303.36, "bert_large_sst2")
    speed = cell(table, "bilstm_s", "kd", "sst2", "ms_per_example_cpu")
    assert speed.kdflow == 0.5
    assert pd.isna(size.difference) and pd.isna(speed.difference)  # hardware and implementation, not a result
    unmeasured = cell(table, "bert_s", "kd", "sst2", "ms_per_example_cpu")
    assert pd.isna(unmeasured.kdflow) and "spec `inference`" in unmeasured.kdflow_note


def test_tasks_limit_the_cells_kdflow_fills_and_the_inputs_it_needs():
    spec = {**SPECS["universal_kd_table2"], "tasks": ["sst2"]}
    assert required_inputs(spec, REFERENCE) == {
        "teacher_tasks": ["sst2"], "experiments": ["universal_kd_table2", "alp_kd_table1"], "inference_models": []}
    table = paper_table(REFERENCE, spec, TEACHER, EXPERIMENTS, INFERENCE)
    assert table[table.kdflow.notna()].task.unique().tolist() == ["sst2"]
    assert "kdflow does not run this task" in cell(table, "bert-4", "kd", "cola").kdflow_note


def test_the_rule_reads_scores_for_a_table_of_scores_and_selections_for_one_of_hyperparameters():
    tables = {"reference": "ref.csv", "selected_hyperparameters": "sel.csv",
              "tables": {"scores": {**SPECS["universal_kd_table2"], "tasks": ["sst2"]},
                         "chosen": {"kind": "hyperparameters", "experiments": ["a", "b"]}}}
    assert table_inputs(tables, "scores", REFERENCE) == {"reference": "ref.csv", **input_files(
        tables["tables"]["scores"], REFERENCE)}
    assert table_inputs(tables, "chosen", REFERENCE) == {
        "reference": "sel.csv", "selections": [paths.SELECTION.format(experiment=name) for name in ("a", "b")]}


def test_inputs_are_listed_then_read_back_by_name(tmp_path, monkeypatch):
    spec = SPECS["thesis_table52"]
    files = input_files(spec, REFERENCE)
    assert files == {
        "teacher_metrics": [paths.TEACHER_METRICS.format(teacher="bert_large", task=task)
                            for task in ("cola", "sst2", "sara")],
        "experiment_tables": [paths.EXPERIMENT_TABLE_CSV.format(experiment=experiment)
                              for experiment in ("thesis_table52_lstm_s", "thesis_table52_bert_s")],
        "inference": [paths.INFERENCE.format(model=model) for model in ("bert_large_sst2", "lstm_s_sst2")],
    }
    monkeypatch.chdir(tmp_path)
    for task, path in zip(("cola", "sst2", "sara"), files["teacher_metrics"]):
        (tmp_path / path).parent.mkdir(parents=True)
        (tmp_path / path).write_text(json.dumps({"scores": {"dev": {task: 1.0}}}))
    (tmp_path / f"{paths.TABLES}/experiments").mkdir(parents=True)
    for path in files["experiment_tables"]:
        EXPERIMENTS["thesis_table52_lstm_s"].to_csv(path, index=False)
    (tmp_path / f"{paths.RESULTS}/inference").mkdir()
    for model, path in zip(("bert_large_sst2", "lstm_s_sst2"), files["inference"]):
        (tmp_path / path).write_text(json.dumps(INFERENCE[model]))
    inputs = load_inputs(spec, REFERENCE, files)
    assert inputs["teacher_metrics"]["sara"] == {"scores": {"dev": {"sara": 1.0}}}
    assert inputs["experiment_tables"]["thesis_table52_bert_s"]["mean"].tolist() == [90.0, 85.0]
    assert inputs["inference"] == INFERENCE


def test_a_misspelt_name_in_a_spec_is_an_error():
    with pytest.raises(ValueError, match=r"students names \['bert_4'\]"):
        paper_table(REFERENCE, {**SPECS["universal_kd_table2"], "students": {"bert_4": "bert_4"}}, TEACHER, {}, {})
    with pytest.raises(ValueError, match="no rows for universal_kd_wu2021 Table 9"):
        required_inputs({**SPECS["universal_kd_table2"], "table": 9}, REFERENCE)


def test_markdown_shows_kdflow_and_paper_per_cell_and_marks_missing_values():
    page = paper_document(table_of("universal_kd_table2"), "Universal-KD Table 2")
    text = page.markdown()
    assert text.startswith("# Universal-KD Table 2\n")
    assert ("| student | method | kdflow | cola | mnli | mrpc | qnli | qqp |\n"
            "|---|---|---|" + "---:|" * 5) in text  # scores right-aligned, five tasks a table
    assert "| student | method | kdflow | rte | sst2 | stsb | average |\n" in text
    assert "| bert-4 | kd | bert_4 / kd | 40.0 (29.2) | 41.0 (79.3) |" in text
    assert "| bert-4 | no_kd | bert_4 / no_kd | — (31.0) |" in text
    assert "| bert-4 | kd | bert_4 / kd | +10.8 | −38.3 |" in text  # kdflow − paper, a minus sign
    assert "- paper: taken from ALP-KD paper (bert-4 / pkd, bert-4 / alp)" in text
    assert "<li>paper: taken from ALP-KD paper (bert-4 / pkd, bert-4 / alp)</li>" in page.html()


def test_a_page_quotes_the_papers_caption_and_names_the_experiment_of_each_kdflow_number():
    """Issue 52: Universal-KD Table 2 takes PKD from ALP-KD Table 1's experiment; the page says so."""
    caption = paper_caption(REPO / "reference" / "paper_artifacts.csv", SPECS["universal_kd_table2"])
    text = paper_document(table_of("universal_kd_table2"), "Universal-KD Table 2", caption=caption).markdown()
    assert text.startswith("# Universal-KD Table 2\n\n*Universal-KD Table 2 in the paper (§5.4):* “4-layer BERT-base "
                           "student results on GLUE dev set.”")
    provenance = text.split("## Where kdflow's numbers come from")[1].split("##")[0]
    assert "| bert-4 | pkd | bert_4 / pkd | alp_kd_table1 |" in provenance
    assert "| bert-4 | kd | bert_4 / kd | universal_kd_table2 |" in provenance
    assert "| bert-base (teacher) | teacher | bert_base | teacher |" in provenance
    assert paper_caption(REPO / "reference" / "paper_artifacts.csv", {"source": "alp_kd_passban2021", "table": 9}) is None


def test_the_ledgers_entries_of_a_table_are_listed_under_it():
    entries = deviations_of(REPO / "reference" / "deviations.yaml", "universal_kd_table4")
    assert entries and all("universal_kd_table4" in entry["tables"] for entry in entries)
    assert deviations_of(REPO / "reference" / "deviations.yaml", "no_such_table") == deviations_of(None, "x") == []
    page = paper_document(table_of("universal_kd_table4"), "Table 4", deviations=entries)
    assert "## Differences from the paper's protocol" in page.markdown()
    assert f"- *{entries[0]['kind']}*: kdflow: {' '.join(entries[0]['kdflow'].split())[:30]}" in page.markdown()
    assert f"<li><em>{entries[0]['kind']}</em>: " in page.html()


def run_deviations_page(config_path, table):
    config = yaml.safe_load((REPO / config_path).read_text())
    spec = config["paper_tables"]["tables"][table]
    entries = deviations_of(REPO / "reference/deviations.yaml", table,
                            protocol_config(config, spec.get("experiments", []), spec.get("teacher")),
                            REPO / "reference/protocols.yaml", spec)
    return entries, paper_document(table_of(table), "Table", deviations=entries).markdown()


def test_a_runs_deviation_section_states_its_own_settings_and_stand_ins_not_config_yamls():
    entries, text = run_deviations_page("demo/config.yaml", "alp_kd_table2")
    section = text.split("## Differences from the paper's protocol")[1]
    assert "Students train for 5 epochs." not in section  # the ledger's prose, for config.yaml's 5 epochs
    assert 'This run: stages [{"epochs": 2}].' in section.replace("\\[", "[").replace("\\]", "]")
    assert "In this run bert_3 stands for bert_6, tiny_bert stands for bert_base" in section
    assert "- *this run only*: student.bert_3.layers: paper 6, this run 3." in section  # a 3-layer student, 6-layer table
    assert "- *this run only*: teacher spec.model: paper bert-base-uncased, this run none." in section
    assert {entry["kind"] for entry in entries} >= {STAND_IN, RUN_ONLY}


def test_config_yamls_own_deviation_sections_are_the_ledgers_words():
    for table, words in (("alp_kd_table2", "Students train for 5 epochs."), ("thesis_table52", "LSTM_S")):
        entries, text = run_deviations_page("config.yaml", table)
        assert entries and not [entry for entry in entries if "this_run" in entry or entry["kind"] in (STAND_IN, RUN_ONLY)]
        assert "config.yaml's full reproduction) ran" in text and "stands for" not in text and words in text


def test_thesis_markdown_names_each_score_of_a_task():
    text = paper_document(table_of("thesis_table52"), "Table 5.2").markdown()
    assert "| cola mcc dev | cola mcc test | cola params (M) | cola ms/example (CPU; lower is better) |" in text
    assert "| bilstm_s | kd | lstm_s / mse_logits |" in text


def test_thesis_markdown_compares_scores_but_not_sizes_and_speeds():
    scores, differences = paper_document(table_of("thesis_table52"), "Table 5.2").markdown().split("## kdflow − paper")
    assert "| 303.36 (340.00) | 40.00 (750.00) |" in scores
    assert ("| student | method | kdflow | cola mcc dev | cola mcc test | sst2 accuracy dev | sst2 accuracy test |"
            ) in differences and "| student | method | kdflow | sara f1_micro dev | sara f1_micro test |" in differences
    # kdflow's seed interval (mean ± t_{0.975,2} s sqrt(4/3)): SST-2 90.0 ± 2.48 holds the paper's 91.2, Sara
    # 85.0 ± 0.99 does not hold its 86.4
    assert "| bilstm_s | kd | lstm_s / mse_logits | — | — | −1.2 ✓ | — |" in differences
    assert "| bilstm_s | kd | lstm_s / mse_logits | — | −1.4 ✗ |" in differences
    table = table_of("thesis_table52")
    assert cell(table, "bilstm_s", "kd", "sst2", "accuracy").within_spread == True  # noqa: E712 (numpy bool)
    assert cell(table, "bilstm_s", "kd", "sara", "f1_micro", split="test").within_spread == False  # noqa: E712
    assert pd.isna(cell(table, "bilstm_s", "kd", "cola", "mcc").within_spread)  # kdflow has no CoLA score here


def test_latex_is_a_booktabs_tabular_with_escaped_names():
    text = paper_latex(table_of("universal_kd_table2"), "Universal-KD Table 2")
    lines = text.splitlines()
    assert lines[1:3] == [r"\begin{tabular}{lllrrrrrrrrr}", r"\toprule"]
    assert lines[3] == r"student & method & kdflow & cola & mnli & mrpc & qnli & qqp & rte & sst2 & stsb & average \\"
    assert r"bert-4 & kd & bert\_4 / kd & 40.0 (29.2) & 41.0 (79.3)" in text
    assert r"bert-4 & no\_kd & bert\_4 / no\_kd & --- (31.0) &" in text
    assert lines[-2:] == [r"\bottomrule", r"\end{tabular}"] and "—" not in text


def test_written_csv_keeps_every_row_and_leaves_missing_values_empty(tmp_path):
    table = table_of("universal_kd_table6")
    write_paper_table(table, "Table 6", tmp_path / "t.csv", tmp_path / "t.md", tmp_path / "t.tex", tmp_path / "t.html")
    written = pd.read_csv(tmp_path / "t.csv")
    assert len(written) == 12 and written.kdflow.isna().all() and written.paper.iloc[0] == 86.8
    assert (tmp_path / "t.md").read_text().startswith("# Table 6") and (tmp_path / "t.tex").exists()
    assert "<h1>Table 6</h1>" in (tmp_path / "t.html").read_text()


# Universal-KD Tables 7-9: the paper's selected hyperparameters beside kdflow's selection.

SELECTED = read_reference(REPO / "reference" / "selected_hyperparameters.csv")
TABLE9 = dict(kind="hyperparameters", source=UKD, table="9", experiments=["universal_kd_table5"],
              students={"bilstm": "bilstm", "gated_cnn": "gated_cnn"})


def selected(table, student, task, hyperparameter):
    rows = SELECTED[(SELECTED.table == table) & (SELECTED.student == student) & (SELECTED.task == task)
                    & (SELECTED.hyperparameter == hyperparameter)]
    return rows.value.squeeze()


def test_selected_hyperparameters_are_transcribed_from_the_paper():
    """Cells checked by hand against Universal-KD Tables 7-9 (Appendix A)."""
    assert len(SELECTED) == 8 * (3 + 3 + 2 * 4)
    assert (selected("7", "bert-4", "rte", "batch_size"), selected("7", "bert-4", "qqp", "beta")) == (16, 0.7)
    assert selected("7", "bert-4", "sst2", "learning_rate") == 2e-5
    assert (selected("8", "distilroberta", "cola", "learning_rate"), selected("8", "distilroberta", "sst2",
                                                                              "batch_size")) == (2e-5, 16)
    assert selected("9", "bilstm", "cola", "learning_rate") == 2e-4 and selected("9", "bilstm", "mrpc", "beta") == 0.7
    assert selected("9", "bilstm", "qnli", "student.dropout") == 0.2
    assert [selected("9", "gated_cnn", t, "batch_size") for t in GLUE] == [64, 64, 16, 32, 32, 16, 64, 8]
    assert [selected("9", "gated_cnn", t, "learning_rate") for t in GLUE] == [
        2e-4, 2e-5, 3e-5, 2e-5, 3e-5, 1e-5, 5e-5, 1e-5]
    assert set(SELECTED.method) == {"universal_kd_il", "universal_kd_cg", "universal_kd_ca"}


def test_hyperparameter_tables_show_the_grid_point_kdflow_selected_beside_the_papers():
    runs = hyperparameter_runs(SELECTED, TABLE9)
    assert len(runs) == 16 and runs[0] == {"task": "cola", "student": "bilstm", "method": "universal_kd_ca",
                                           "hyperparameters": ["learning_rate", "batch_size", "student.dropout", "beta"]}
    point = {"learning_rate": 2e-4, "batch_size": 32, "student.dropout": 0.4, "beta": 0.5}
    values = {"universal_kd_table5": {run_key("cola", "bilstm", "universal_kd_ca"): {"p": point, "q": {}}}}
    selections = {"universal_kd_table5": {"selections": [
        {"task": "cola", "student": "bilstm", "method": "universal_kd_ca", "selected": "p"},
        {"task": "cola", "student": "bilstm", "method": "kd", "selected": "q"}]}}
    table = hyperparameter_table(SELECTED, TABLE9, selections, values)
    assert len(table) == 64
    cola = table[(table.student == "bilstm") & (table.task == "cola")].set_index("hyperparameter")
    assert cola.kdflow.to_dict() == point and cola.kdflow_point.unique().tolist() == ["p"]
    assert cola.agrees.to_dict() == {"learning_rate": True, "batch_size": False, "student.dropout": True, "beta": True}
    missing = table[(table.student == "gated_cnn")].iloc[0]
    assert pd.isna(missing.kdflow) and not missing.agrees
    assert missing.kdflow_note == "not in the selections of experiments universal_kd_table5"
    text = hyperparameter_document(table, "Universal-KD Table 9").markdown()
    assert "| student | method | hyperparameter | cola | mnli |" in text
    assert "| bilstm | universal_kd_ca | batch_size | 32 (8) | — (64) |" in text
    assert "kdflow selected the paper's value in 3 of 4 cells it has." in text
    entries = deviations_of(REPO / "reference" / "deviations.yaml", "universal_kd_table9")
    assert entries and "## Differences from the paper's protocol" not in text
    assert "## Differences from the paper's protocol" in hyperparameter_document(table, "T9", entries).markdown()
    # the experiments the table reads open from it in the report (issue 69), and are named with their page's path
    linked = hyperparameter_document(table, "T9", experiments=["universal_kd_table5"])
    page = paths.EXPERIMENT_TABLE_PAGE.format(experiment="universal_kd_table5")
    assert f'<a href="{page}" data-result="{page}">universal_kd_table5</a>' in linked.html()
    assert f"reads, each with its runs and seeds: universal_kd_table5 (`{page}`)." in linked.markdown()


def test_a_wide_table_splits_by_task_with_its_key_columns_repeated():
    wide = pd.DataFrame([["s", "m", "k", *range(8)]],
                        columns=["student", "method", "kdflow", "cola mcc dev", "cola mcc test", "sst2 dev",
                                 "sst2 test", "sara dev", "sara test", "rte", "average"])
    parts = split_by_task(wide, per_table=4)
    assert [list(part.columns[3:]) for part in parts] == [
        ["cola mcc dev", "cola mcc test", "sst2 dev", "sst2 test"], ["sara dev", "sara test", "rte", "average"]]
    assert all(list(part.columns[:3]) == ["student", "method", "kdflow"] for part in parts)
    assert [list(part.columns[3:]) for part in split_by_task(wide, per_table=1)][:2] == [
        ["cola mcc dev", "cola mcc test"], ["sst2 dev", "sst2 test"]]  # a task's columns stay together


def test_the_headline_is_shown_and_the_spread_check_uses_only_the_held_out_seeds():
    # The selection seed's 95.0 chose the point (the headline, beside the paper's best dev score); the held-out
    # seeds' mean 89.0 ± 0.5 over 3 is what the spread check uses: the paper's 90.4 lies in 89.0 ± 4.303 * 0.5 *
    # sqrt(4/3) = [86.5, 91.5], whereas the headline is 4.6 above it.
    experiments = {**EXPERIMENTS, "universal_kd_table2": pd.DataFrame([dict(
        task="sst2", student="bert_4", method="kd", split="dev", metric="accuracy", headline=95.0, mean=89.0, std=0.5,
        seeds=3, selected="beta0.5")])}
    table = paper_table(REFERENCE, SPECS["universal_kd_table2"], TEACHER, experiments, INFERENCE)
    kd = cell(table, "bert-4", "kd", "sst2")
    assert (kd.kdflow, kd.kdflow_held_out, kd.seeds) == (95.0, 89.0, 3)
    assert kd.difference == pytest.approx(95.0 - 90.4) and kd.within_spread
    experiments["universal_kd_table2"]["mean"] = 80.0  # held-out seeds far below the paper: outside the spread
    table = paper_table(REFERENCE, SPECS["universal_kd_table2"], TEACHER, experiments, INFERENCE)
    assert not cell(table, "bert-4", "kd", "sst2").within_spread


@pytest.mark.parametrize("seeds, std", [(2, 0.5), (3, 0.0)], ids=["two-seeds", "zero-spread"])
def test_seeds_that_cannot_decide_mark_no_cell(seeds, std):
    """A 2-seed interval (t = 12.7) or seeds that all scored the same (a student predicting the majority class: a
    point interval that any paper number misses) give no ✓/✗, and the legend says why."""
    experiments = {**EXPERIMENTS, "universal_kd_table2": pd.DataFrame([dict(
        task="sst2", student="bert_4", method="kd", split="dev", metric="accuracy", headline=60.0, mean=60.0, std=std,
        seeds=seeds, selected="beta0.5")])}
    table = paper_table(REFERENCE, SPECS["universal_kd_table2"], TEACHER, experiments, INFERENCE)
    assert pd.isna(cell(table, "bert-4", "kd", "sst2").within_spread)
    differences = paper_document(table, "Table 2").markdown().split("## kdflow − paper")[1]
    difference = f"{cell(table, 'bert-4', 'kd', 'sst2').difference:+.1f}".replace("-", "\u2212")  # a minus sign
    rows = [line for line in differences.splitlines() if line.startswith("| bert-4 | kd |") and difference in line]
    assert rows and f"| {difference} |" in rows[0]  # the number, with no mark
    assert "a zero spread" in SPREAD_LEGEND


def test_a_page_of_a_randomly_initialised_teachers_run_says_it_is_a_demonstration():
    demo, full = (yaml.safe_load((REPO / name).read_text()) for name in ("demo/config.yaml", "config.yaml"))
    for config, expected in ((demo, True), (full, False)):
        for spec in config["paper_tables"]["tables"].values():
            assert bool(scale_note(config, spec.get("experiments", []), spec.get("teacher"))) == expected
    note = scale_note(demo, [], "tiny_bert")
    assert "teacher tiny_bert is randomly initialised" in note
    page = paper_document(table_of("universal_kd_table2"), "Table 2", scale_note=note).markdown()
    assert page.split("\n\n")[1] == f"*{note}*"  # first, under the title
    assert note not in paper_document(table_of("universal_kd_table2"), "Table 2").markdown()
