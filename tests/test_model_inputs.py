"""What the jobs that load named models read (kdflow.workflow.model_inputs), on the demo's config."""

import pytest
import yaml
from conftest import REPO

from kdflow.workflow import results_paths as paths
from kdflow.workflow.job_settings import experiment_runs
from kdflow.workflow.model_inputs import analysis_inputs, model_files, model_params, recomputed_student_inputs


@pytest.fixture(scope="module")
def config():
    return yaml.safe_load((REPO / "demo/config.yaml").read_text())


def test_a_student_is_read_from_its_selection_and_every_run_it_is_selected_among(config):
    files = model_files(config, "alp_sst2")
    runs = [run for run in experiment_runs(config, "alp_kd_table2") if run["task"] == "sst2" and run["method"] == "alp"]
    runs_dir = paths.STUDENT_METHOD_DIR.format(experiment="alp_kd_table2", task="sst2", student="bert_3", method="alp")
    assert files["selection"] == paths.SELECTION.format(experiment="alp_kd_table2")
    assert files["teacher_model"] == paths.TEACHER_MODEL.format(teacher="tiny_bert", task="sst2")
    assert len(files["runs"]) == len(runs) > 0
    assert all(path.startswith(f"{runs_dir}/") for path in files["runs"])
    assert model_params(config, "alp_sst2")["runs_dir"] == runs_dir


def test_a_pretrained_model_reads_no_file_and_a_teacher_its_fine_tuned_model(config):
    assert model_files(config, "tiny_bert_init") == {}
    data, teacher_model = paths.DATA.format(task="sst2"), paths.TEACHER_MODEL.format(teacher="tiny_bert", task="sst2")
    assert model_files(config, "tiny_bert_sst2") == {"data": data, "teacher_model": teacher_model}


def test_word_vectors_of_a_word_level_student_need_its_transfer_set(config):
    files = model_files(config, "embed_words_sst2")
    assert files["data"] == paths.DATA.format(task="sst2") and "teacher_model" in files
    assert set(files) <= {"data", "teacher_model", "transfer", "vectors"}


def test_the_analysis_reads_a_teachers_predictions_and_a_students_runs(config):
    inputs = analysis_inputs(config, "sst2")
    assert inputs["tiny_bert_sst2_predictions"] == paths.TEACHER_PREDICTIONS.format(teacher="tiny_bert", task="sst2")
    assert all(path.endswith("/predictions.parquet") for path in inputs["lstm_s_sst2_runs"])
    assert "lstm_s_sst2_predictions" not in inputs


def test_a_recomputing_figure_reads_the_students_teacher_and_its_pseudo_heads(config):
    inputs = recomputed_student_inputs(config, "sst2", ["ukd_il_sst2", "alp_sst2"])
    assert inputs["heads"] == paths.PSEUDO_HEADS.format(teacher="tiny_bert", task="sst2")
    assert {"ukd_il_sst2_selection", "alp_sst2_runs"} <= set(inputs)
