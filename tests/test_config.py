"""Config resolution: the settings of every job (what makes reruns after config edits precise)."""

import copy
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import REPO

from kdflow.core.errors import UserError
from kdflow.reporting.report_menu import attention_report_entry
from kdflow.workflow import results_paths as paths
from kdflow.workflow.config_checks import check_references
from kdflow.workflow.job_inputs import raw_task_files, selection_inputs, student_inputs, transfer_set_inputs
from kdflow.workflow.job_settings import (
    assistant_run,
    grid_points,
    hygiene_settings,
    needed_signals,
    pseudo_head_job_settings,
    pseudo_head_settings,
    run_values,
    selection_params,
    student_jobs,
    student_settings,
    teacher_jobs,
    teacher_settings,
)
from kdflow.workflow.config_files import validate_config
from kdflow.workflow.split_sizes import counted_files
from kdflow.workflow.exploration import exploration_experiments, with_exploration
from kdflow.workflow.targets import default_targets


def full_config():
    return yaml.safe_load((REPO / "config.yaml").read_text())


def test_teacher_settings_layer_defaults_teacher_and_task():
    config = full_config()
    sara = teacher_settings(config, "bert_large", "sara")
    cola = teacher_settings(config, "bert_large", "cola")
    assert sara["spec"] == {"model": "bert-large-uncased"}
    # thesis Table 4.1: 5e-5, batch 36, 3 epochs, 10 on Sara; the rest from teacher_defaults
    assert (sara["hyperparameters"]["learning_rate"], sara["hyperparameters"]["batch_size"]) == (5e-5, 36)
    assert sara["hyperparameters"]["epochs"] == 10 and cola["hyperparameters"]["epochs"] == 3
    assert cola["hyperparameters"]["warmup_ratio"] == 0.1
    assert teacher_settings(config, "bert_base", "rte")["hyperparameters"]["learning_rate"] == 2e-5


def test_teacher_jobs_and_pseudo_head_settings():
    config = full_config()
    jobs = teacher_jobs(config)
    assert len(jobs) == 19 and ("bert_large", "sara") in jobs and ("bert_base", "sara") not in jobs
    assert pseudo_head_settings(config, "bert_base")["pooling"] == "cls"


def test_reordering_the_config_changes_no_job_settings():
    config = full_config()
    reordered = yaml.safe_load(yaml.safe_dump(config, sort_keys=True))
    reordered["teacher_defaults"] = dict(reversed(list(config["teacher_defaults"].items())))
    assert repr(teacher_settings(config, "bert_base", "cola")) == repr(teacher_settings(reordered, "bert_base", "cola"))
    assert repr(pseudo_head_settings(config, "bert_base")) == repr(pseudo_head_settings(reordered, "bert_base"))


def test_grid_points_keep_only_axes_the_method_has():
    config = full_config()
    ukd = config["experiments"]["universal_kd_table2"]
    assert len(grid_points(ukd, "universal_kd_il")) == 18  # batch 3 x lr 2 x beta 3
    assert list(grid_points(ukd, "no_kd")) == [f"bs{b}_lr{lr}" for b in (8, 16, 32) for lr in ("2e-05", "5e-05")]
    assert grid_points(ukd, "kd")["bs16_beta0.2_lr5e-05"] == {"beta": 0.2, "batch_size": 16, "learning_rate": 5e-5}
    annealing = config["experiments"]["universal_kd_table4"]
    assert len(grid_points(annealing, "annealing_kd")) == 6  # the entry fixes beta, so beta is not searched
    alp = config["experiments"]["alp_kd_table3"]
    assert len(grid_points(alp, "pkd_6")) == 48 and len(grid_points(alp, "kd")) == 12  # kd has no gamma
    cross = config["experiments"]["universal_kd_table5"]  # Table 9's picks are grid points: lr 3e-5, batch 16
    assert len(grid_points(cross, "kd")) == 4 * 5 * 3 * 4 and "bs16_beta0.7_lr3e-05_dropout0.4" in grid_points(cross, "kd")


def test_student_settings_layer_defaults_experiment_task_and_grid_point():
    config = full_config()
    settings = student_settings(config, "universal_kd_table2", "cola", "bert_4", "universal_kd_il", "bs8_beta0.7_lr2e-05", 1)
    assert settings["method"] == "universal_kd_il" and settings["method_options"] == {"beta": 0.7}
    hp = settings["hyperparameters"]
    assert (hp["batch_size"], hp["learning_rate"], hp["seed"]) == (8, 2e-5, 1)
    assert [stage["epochs"] for stage in settings["stages"]] == [50, 10]  # CoLA's schedule
    sst2 = student_settings(config, "universal_kd_table2", "sst2", "bert_4", "kd", "bs32_beta0.2_lr5e-05", 1)
    assert [stage["epochs"] for stage in sst2["stages"]] == [20, 10]
    assert sst2["stages"][1]["weights"] == {"alpha": 1, "beta": 0, "gamma": 0}
    pkd = student_settings(config, "alp_kd_table3", "rte", "bert_2", "pkd_12", "beta0.5_gamma0.2_lr1e-05", 1)
    assert pkd["method"] == "pkd" and pkd["method_options"] == {"mapping": [12], "beta": 0.5, "gamma": 0.2}
    thesis = student_settings(config, "thesis_table52_bert_s", "sara", "bert_s", "kd", "default", 3)
    assert thesis["method_options"] == {"alpha": 0.0, "beta": 1.0, "temperature": 3.0}
    assert thesis["hyperparameters"]["epochs"] == 60 and thesis["stages"] == [{"epochs": 60}]


def test_student_axes_set_student_options():
    config = full_config()
    point = "bs8_beta0.5_lr2e-05_dropout0.3"
    assert point in grid_points(config["experiments"]["universal_kd_table5"], "kd")
    settings = student_settings(config, "universal_kd_table5", "rte", "gated_cnn", "kd", point, 1)
    assert settings["student"] == {"type": "gated_cnn", "dropout": 0.3}
    assert settings["method_options"] == {"beta": 0.5}


def test_thesis_students_follow_the_thesis_code_and_are_larger_on_cola():
    """thesis-original-code.md: Table 5.2's CoLA BERT_S is L=5, d_h=816, A=12, d_I=3000 at lr 7e-5 with batch
    128 as 4 x 32, its CoLA LSTM_S 2 x 600 with FC 800; the other tasks keep the default sizes."""
    config = full_config()
    cola = student_settings(config, "thesis_table52_bert_s", "cola", "bert_s", "kd", "default", 1)
    assert cola["student"] == {"type": "bert_s", "num_hidden_layers": 5, "hidden_size": 816,
                               "num_attention_heads": 12, "intermediate_size": 3000}
    hp = cola["hyperparameters"]
    assert (hp["learning_rate"], hp["batch_size"], hp["gradient_accumulation_steps"]) == (7e-5, 128, 4)
    assert (hp["betas"], hp["eps"], hp["weight_decay"], hp["max_grad_norm"]) == ([0.9, 0.98], 1e-6, 0.0, None)
    # dev every 100 mini-batches of 32, i.e. 25 steps of 4 accumulated mini-batches
    assert (hp["warmup_ratio"], hp["epochs"], hp["evaluate_every_steps"], hp["keep"]) == (0.25, 60, 25, "best")
    sst2 = student_settings(config, "thesis_table52_bert_s", "sst2", "bert_s", "kd", "default", 1)
    assert sst2["student"] == {"type": "bert_s"} and sst2["hyperparameters"]["learning_rate"] == 5e-4
    lstm = student_settings(config, "thesis_table52_lstm_s", "cola", "lstm_s", "mse_logits", "default", 1)
    assert lstm["student"] == {"type": "bilstm_s", "layers": 2, "lstm_size": 600, "fc_size": 800}
    hp = lstm["hyperparameters"]
    assert (hp["weight_decay"], hp["weight_decay_all"], hp["warmup_ratio"], hp["batch_size"]) == (0.01, True, 0.0, 32)
    teacher = teacher_settings(config, "bert_large", "cola")["hyperparameters"]
    assert (teacher["weight_decay"], teacher["keep"], teacher["batch_size"]) == (0.0, "final", 36)


def test_the_earlier_cola_bert_s_of_the_thesis_authors_probing_results_is_w2_d2():
    """BERT_S-s[CoLA] (thesis-original-code.md, "Student size scaling"): W=2, D=2 (L=10, d_h=408, A=6, d_I=1500) at
    lr 8e-5 with batch 128 as 2 x 64, dev every 100 mini-batches of 64, otherwise Table 5.2's BERT_S; one seed."""
    config = full_config()
    small = student_settings(config, "thesis_bert_s_w2d2", "cola", "bert_s", "kd", "default", 1)
    table52 = student_settings(config, "thesis_table52_bert_s", "cola", "bert_s", "kd", "default", 1)
    assert small["student"] == {"type": "bert_s", "num_hidden_layers": 10, "hidden_size": 408,
                                "num_attention_heads": 6, "intermediate_size": 1500}
    assert small["hyperparameters"] == {**table52["hyperparameters"], "learning_rate": 8e-5,
                                        "gradient_accumulation_steps": 2, "evaluate_every_steps": 50}  # batch 128
    assert (small["method"], small["method_options"], small["transfer"]) == ("kd", table52["method_options"], "augmented")
    assert config["experiments"]["thesis_bert_s_w2d2"]["seeds"] == [1]


def test_run_values_give_every_grid_point_the_settings_it_trains_with():
    """What a table of selected hyperparameters (Universal-KD Table 9) reads for the point kdflow selected."""
    config = full_config()
    names = ["learning_rate", "batch_size", "beta", "student.dropout", "gamma"]
    values = run_values(config, "universal_kd_table5", "rte", "gated_cnn", "universal_kd_ca", names)
    assert len(values) == 240
    assert values["bs16_beta0.5_lr1e-05_dropout0.4"] == {
        "learning_rate": 1e-5, "batch_size": 16, "beta": 0.5, "student.dropout": 0.4, "gamma": None}


def test_the_selection_reads_every_run_and_its_predictions_where_it_tests_against_a_baseline():
    config = yaml.safe_load((REPO / "demo/config.yaml").read_text())
    config["experiments"]["alp_kd_table2"].pop("compare_to")
    runs = selection_params(config, "universal_kd_table2")["runs"]
    assert runs == sorted(runs, key=lambda run: list(run.values())) and len(runs) == 5  # kd, il x 2 betas; no_kd once
    inputs = selection_inputs(config, "universal_kd_table2")
    run_dir = paths.STUDENT_RUN_DIR.format(experiment="universal_kd_table2", **runs[0])
    assert inputs["metrics"][0] == f"{run_dir}/metrics.json"
    assert [path.replace("predictions.parquet", "metrics.json") for path in inputs["predictions"]] == inputs["metrics"]
    assert set(selection_inputs(config, "alp_kd_table2")) == {"metrics"}  # no baseline: no bootstrap
    assert selection_params(config, "universal_kd_table2")["compare_to"] == "kd"


def test_the_default_target_asks_for_what_the_config_has():
    config = yaml.safe_load((REPO / "demo/config.yaml").read_text())
    config = {**config, **with_exploration(config)}
    explored = set(exploration_experiments(yaml.safe_load((REPO / "demo/config.yaml").read_text())))
    targets = default_targets(config, explored)
    assert targets[0] == paths.PLAN_CSV and paths.PROBING_TABLE_CSV in targets
    assert not any(f"experiments/{name}.md" in target or f"glue_submission/{name}" in target
                   for name in explored for target in targets)  # exploration runs feed figures, not tables
    without = default_targets({key: value for key, value in config.items() if key != "probing"}, explored)
    assert [target for target in targets if target not in without] == [
        paths.PROBING_TABLE_CSV, paths.PROBING_PNG, paths.PROBING_THESIS_CSV,
        *(paths.PROBING_THESIS_PNG.format(figure=name) for name in ("6_1", "6_2", "6_3", "C_1"))]


def demo_config():
    """The demo's config as the workflow sees it: the schema's defaults filled in."""
    config = yaml.safe_load((REPO / "demo/config.yaml").read_text())
    validate_config(config, REPO / "schemas/config.schema.yaml")
    return config


def test_ingestion_reads_the_raw_files_that_exist_and_the_plan_counts_them(monkeypatch):
    monkeypatch.chdir(REPO)
    config = demo_config()
    files = raw_task_files(config, "sst2")
    assert files == sorted(files) and {path.rsplit("/", 1)[1] for path in files} >= {"train.tsv", "dev.tsv"}
    assert raw_task_files({**config, "data": {"glue_dir": None, "sara_dir": None}}, "sst2") == []  # from the hub
    counted = counted_files(config, ["no/such/probing_file.txt"])
    assert set(files) <= set(counted) and "no/such/probing_file.txt" not in counted


def test_a_transfer_set_reads_its_sources_and_a_student_its_signals():
    config = demo_config()
    shards = config["generation"]["sampling"]["shards"]
    assert len(transfer_set_inputs(config, "augmented", "sst2")["shards"]) == shards
    assert set(transfer_set_inputs(config, "train", "sst2")) == {"data"}
    point = next(iter(grid_points(config["experiments"]["universal_kd_table4"], "takd")))
    takd = student_inputs(config, "universal_kd_table4", "sst2", "tiny_roberta", "takd", point, 0)
    assistant = paths.STUDENT_METHOD_DIR.format(experiment="universal_kd_table4", task="sst2", student="bert_3",
                                                method="kd")
    assert takd["signals"].startswith(f"{assistant}/")  # its assistant's
    kd = student_inputs(config, "universal_kd_table2", "sst2", "bert_3", "kd", "beta0.3", 0)
    assert kd["signals"] == paths.SIGNALS.format(teacher="tiny_bert", task="sst2", transfer="train")
    assert pseudo_head_job_settings(config, "tiny_bert", "sst2")["max_seq_length"] == teacher_settings(
        config, "tiny_bert", "sst2")["hyperparameters"]["max_seq_length"]


def test_a_teachers_signals_are_those_its_experiments_methods_need_on_the_task():
    config = {"experiments": {
        "logits": {"teacher": "t", "tasks": ["sst2"], "methods": {"kd": None, "universal_kd_il": None}},
        "hidden": {"teacher": "t", "tasks": ["cola"], "methods": {"pkd": None}},
        "other": {"teacher": "u", "tasks": ["sst2"], "methods": {"alp": None}}}}
    assert needed_signals(config, "t", "sst2") == ["head_logits", "logits"]
    assert needed_signals(config, "t", "cola") == needed_signals(config, "u", "sst2") == ["layers", "logits"]
    assert needed_signals(config, "t", "mrpc") == []


def test_an_attention_figure_is_filed_under_its_paper():
    entry = attention_report_entry(demo_config(), "alp_kd_figure3")
    assert entry["category"] == "1 ALP-KD (Passban et al. 2021)" and entry["subcategory"] == "06 Figure 3"
    assert entry["labels"]["student layer"] == "1"
    assert attention_report_entry(demo_config(), "universal_kd_figure3")["labels"]["student layer"] == "top attending"


def test_takd_students_learn_from_an_assistant_at_the_same_grid_point():
    config = full_config()
    run = assistant_run(config, "universal_kd_table4", "rte", "takd", "bs16_beta0.5_lr2e-05", 1)
    assert run == {"student": "roberta_base", "method": "kd", "point": "bs16_beta0.5_lr2e-05", "seed": "1"}
    assert assistant_run(config, "universal_kd_table4", "rte", "kd", "bs16_beta0.5_lr2e-05", 1) is None
    jobs = student_jobs(config)
    assert len({(j["experiment"], j["task"], j["student"], j["method"], j["point"], j["seed"]) for j in jobs}) == len(jobs)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda e: e.update(teacher="gpt"), "unknown teacher 'gpt'"),
        (lambda e: e.update(tasks=["cola", "sara"]), "is not trained on ['sara']"),
        (lambda e: e.update(students=["bert_5"]), "unknown students ['bert_5']"),
        (lambda e: e["methods"].update(fitnet=None), "unknown methods ['fitnet']"),
        (lambda e: e["methods"].update(takd={"assistant": "bert_12"}), "unknown student 'bert_12'"),
        (lambda e: e["methods"].update(takd=None), "takd needs an 'assistant'"),
        (lambda e: e["grid"].update(learning_rat=[1e-5]), "['learning_rat'] are neither hyperparameters nor options"),
    ],
    ids=["teacher", "task", "student", "method", "assistant", "no-assistant", "grid-typo"],
)
def test_experiments_must_reference_what_exists(change, message):
    config = full_config()
    change(config["experiments"]["universal_kd_table2"])
    with pytest.raises(ValueError, match="experiments.universal_kd_table2") as error:
        check_references(config)
    assert message in str(error.value)


# Every option is checked against the registered methods and students before any job runs.


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c["experiments"]["universal_kd_table2"]["methods"].update(pkd_1={"method": "pkd", "mappin": [3]}),
         "experiments.universal_kd_table2.methods.pkd_1: pkd has no option(s) ['mappin']"),
        (lambda c: c["students"]["bert_2"].update(layerz=3), "students.bert_2: bert_k has no option(s) ['layerz']"),
        (lambda c: c["students"]["bert_2"].update(type="bert_kk"), "students.bert_2.type: unknown student 'bert_kk'"),
        (lambda c: c["students"]["lstm_s"].update(embeddings={"source": "file", "moed": "static"}),
         "students.lstm_s.embeddings: unknown option(s) ['moed']"),
        (lambda c: c["students"]["lstm_s"].update(embeddings={"mode": "frozen"}),
         "students.lstm_s.embeddings.mode: 'frozen' is not one of"),
        (lambda c: c["students"]["lstm_s"].update(embeddings={"source": "random", "dim": 8, "init": "gauss"}),
         "students.lstm_s.embeddings.init: 'gauss' is not one of uniform, normal"),
        (lambda c: c["experiments"]["universal_kd_table2"]["grid"].update({"student.dropuot": [0.1]}),
         "experiments.universal_kd_table2.grid.student.dropuot: students"),
        (lambda c: c["experiments"]["universal_kd_table2"]["grid"].update(temprature=[2.0]),
         "experiments.universal_kd_table2.grid: ['temprature'] are neither"),
        (lambda c: c["experiments"]["universal_kd_table2"]["methods"].update(t={"method": "takd", "assistant": "bert_2",
                                                                              "assistant_method": "kdd"}),
         "experiments.universal_kd_table2.methods.t.assistant_method: unknown method 'kdd'"),
        (lambda c: c["experiments"]["universal_kd_table2"].update(compare_to="pkd"),
         "experiments.universal_kd_table2.compare_to: 'pkd' is not one of its method entries (no_kd, kd, mhkd, "
         "universal_kd_il)"),
        (lambda c: c["experiments"]["thesis_table52_bert_s"]["task_students"]["cola"]["bert_s"].update(hiden_size=8),
         "experiments.thesis_table52_bert_s.task_students.cola.bert_s: bert_s has no option(s) ['hiden_size']"),
        (lambda c: c["experiments"]["thesis_table52_bert_s"]["task_students"].update(rte={"bert_s": {}}),
         "experiments.thesis_table52_bert_s.task_students.rte: 'rte' is not a task of the experiment"),
        (lambda c: c["experiments"]["thesis_table52_bert_s"]["task_students"]["cola"].update(lstm_s={}),
         "experiments.thesis_table52_bert_s.task_students.cola.lstm_s: not a student of the experiment"),
        (lambda c: c["sentence_probes"]["cola"]["models"].append("bert_s_sst2"),
         "sentence_probes.cola: model 'bert_s_sst2' is not a fine-tuned model of 'cola'"),
        (lambda c: c["sentence_probes"]["cola"]["reported"].update(lstm_s_sst2="lstm_s"),
         "sentence_probes.cola.reported: 'lstm_s_sst2' is not one of the probe's models"),
        (lambda c: c["sentence_probes"].update(stsb={"models": ["bert_large_cola"]}),
         "sentence_probes.stsb: sentences need class predictions; stsb is a regression task"),
        (lambda c: c["attention_maps"]["alp_kd_figure3"].update(task="rte"),
         "attention_maps.alp_kd_figure3: 'alp_bert2_sst2' is not a student model of 'rte' in `models`"),
        (lambda c: c["layer_outputs"]["sst2"]["models"].append("bert_large_sst2"),
         "layer_outputs.sst2: 'bert_large_sst2' is not a student model of 'sst2' in `models`"),
        (lambda c: (c["models"].update(cg_sst2={"experiment": "universal_kd_table4", "task": "sst2",
                                                 "student": "distilroberta", "method": "universal_kd_cg"}),
                    c["layer_outputs"]["sst2"]["models"].append("cg_sst2")),
         "layer_outputs.sst2: the students learn from different teachers ['bert_base', 'roberta_large']"),
        (lambda c: c["paper_tables"]["tables"]["alp_kd_table2"].update(experiments=["alp_kd_tabel2"]),
         "paper_tables.tables.alp_kd_table2.experiments: ['alp_kd_tabel2'] not in the config's experiments"),
        (lambda c: c["paper_tables"]["tables"]["alp_kd_table2"].update(teacher="bert_bas"),
         "paper_tables.tables.alp_kd_table2.teacher: unknown teacher 'bert_bas'"),
        (lambda c: c["paper_tables"]["tables"]["alp_kd_table2"]["students"].update({"bert-4": "bert4"}),
         "paper_tables.tables.alp_kd_table2.students: unknown students ['bert4']"),
    ],
    ids=["method-option", "student-option", "student-type", "embedding-option", "embedding-mode", "embedding-init",
         "student-axis", "grid-axis", "assistant-method", "compare-to", "task-student-option", "task-student-task",
         "task-student-name", "sentence-model-task", "sentence-reported", "sentence-regression",
         "attention-map-task", "layer-outputs-teacher-model", "layer-outputs-two-teachers", "paper-table-experiment",
         "paper-table-teacher", "paper-table-student"],
)
def test_every_option_is_checked_before_any_job_runs(edit, message):
    config = full_config()
    edit(config)
    with pytest.raises(ValueError, match="invalid config") as error:
        check_references(config)
    assert message in str(error.value)


def test_a_typo_in_a_named_model_names_the_key():
    """A `models:` entry is one of several shapes (oneOf): jsonschema's own message for a typo is "... is not valid
    under any of the given schemas"; the schema check names the misspelt key instead."""
    config = full_config()
    config["models"]["typo_sst2"] = {"experiment": "alp_kd_table2", "task": "sst2", "studnet": "bert_3",
                                     "method": "kd"}
    with pytest.raises(ValueError, match="invalid config") as error:
        validate_config(config, REPO / "schemas/config.schema.yaml")
    message = str(error.value)
    assert "models.typo_sst2: unknown key(s)" in message and "'studnet'" in message
    assert "is not valid under any of the given schemas" not in message


@pytest.mark.parametrize("unlabelled, message", [
    (None, "unlabelled.files.sst2: experiments with `transfer: unlabelled` on sst2 need the task's unlabelled text"),
    ({"files": {"sst2": "no/such/file.txt"}}, "unlabelled.files.sst2: no/such/file.txt: no such unlabelled-text file or "
                                              "directory"),
    ({"files": {"sst2": "{empty}"}}, "unlabelled.files.sst2: {empty}: the unlabelled-text directory holds no files"),
], ids=["no-section", "missing-file", "empty-directory"])
def test_an_unlabelled_transfer_set_needs_the_tasks_text(unlabelled, message, tmp_path):
    (tmp_path / ".hidden").write_text("a dot-file is not text to read\n")
    if unlabelled:
        unlabelled = {"files": {"sst2": unlabelled["files"]["sst2"].format(empty=tmp_path)}}
        message = message.format(empty=tmp_path)
    config = full_config()
    config["experiments"]["thesis_table52_lstm_s"]["transfer"] = "unlabelled"
    if unlabelled:
        config["unlabelled"] = unlabelled
    with pytest.raises(ValueError, match="invalid config") as error:
        check_references(config)
    assert message in str(error.value)


def test_transfer_sets_hygiene_settings_cover_their_sources_only():
    config = {"generation": {"hygiene": {"keep_duplicates": False}},
              "unlabelled": {"files": {}, "hygiene": {"keep_train_copies": False}}}
    assert hygiene_settings(config, "augmented") == {"generated": {
        "keep_dev_test_copies": False, "keep_duplicates": False, "keep_train_copies": True, "keep_unfinished": True}}
    assert hygiene_settings(config, "unlabelled") == {"unlabelled": {
        "keep_dev_test_copies": False, "keep_duplicates": True, "keep_train_copies": False}}
    assert set(hygiene_settings(config, "unlabelled_augmented")) == {"generated", "unlabelled"}


def test_the_full_config_passes_its_checks():
    config = full_config()
    validate_config(config, REPO / "schemas/config.schema.yaml")  # as the workflow checks it: the schema first
    check_references(config)
    # A check that passed anything would pass here too: it reads every experiment of this config, so a teacher
    # unknown to any one of them fails it.
    assert config["experiments"]  # the loop is not vacuous
    for name in config["experiments"]:
        broken = copy.deepcopy(config)
        broken["experiments"][name]["teacher"] = "no_such_teacher"
        with pytest.raises(ValueError, match=f"experiments.{name}.teacher: unknown teacher 'no_such_teacher'"):
            check_references(broken)


def test_planning_imports_neither_torch_nor_transformers():
    code = ("import sys, yaml\n"
            "from kdflow.workflow import config_checks, job_inputs, job_settings\n"
            "c = yaml.safe_load(open('config.yaml'))\n"
            "config_checks.check_references(c)\n"
            "print(len(job_settings.student_jobs(c)), 'torch' in sys.modules, 'transformers' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    jobs, torch, transformers = result.stdout.split()
    assert int(jobs) > 10_000 and (torch, transformers) == ("False", "False")


@pytest.mark.slow
def test_catalog_is_rebuilt_when_a_method_changes(tmp_path, monkeypatch):
    """The cached catalog is keyed by the code behind it: an edit to a method file gives a new key."""
    from kdflow.workflow import catalog_cache, provenance

    copy = tmp_path / "kdflow"
    shutil.copytree(REPO / "kdflow", copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(provenance, "PACKAGE_ROOT", copy)
    monkeypatch.setattr(catalog_cache, "PACKAGE_ROOT", copy)
    catalog_cache.load_catalog.cache_clear()
    first = catalog_cache.load_catalog(tmp_path / "cache")
    with open(copy / "distillation" / "methods" / "logit_methods.py", "a") as file:
        file.write('\n\n@register("kd_copy")\nclass KDCopy(KD):\n    defaults = {**KD.defaults, "extra": 1}\n')
    catalog_cache.load_catalog.cache_clear()
    second = catalog_cache.load_catalog(tmp_path / "cache")
    catalog_cache.load_catalog.cache_clear()
    assert "kd_copy" not in first["methods"] and second["methods"]["kd_copy"]["defaults"]["extra"] == 1
    assert len(list((tmp_path / "cache").glob("catalog-*.json"))) == 2


@pytest.mark.parametrize("method, point, message", [
    ("kd", "dropuot0.1", "experiments.universal_kd_table2.methods.kd: no grid point 'dropuot0.1' in the config; its "
                         "points: "),
    ("kdd", "beta0.5", "experiments.universal_kd_table2: no method entry 'kdd'; its entries: no_kd, kd"),
], ids=["point", "method"])
def test_a_target_with_a_run_the_config_lacks_names_what_it_has(method, point, message):
    """A mistyped target path (.../kd/dropuot0.1/seed1/...) reaches the input functions with wildcards the config
    has no run for: the error names the experiment, the method and the points it has."""
    config = full_config()
    with pytest.raises(UserError) as error:
        student_inputs(config, "universal_kd_table2", "rte", "bert_4", method, point, 1)
    assert str(error.value).startswith(message)
