"""The Snakemake workflow without running it whole: lint, formatting, config validation, the full dry run, the
SLURM profile, the bf16 path and the rule scripts' imports. The demo end to end is tests/test_demo.py."""

import json
import os
import re
import subprocess
import sys
import sysconfig
from collections import Counter
from pathlib import Path

import pytest
import yaml
from conftest import (DEMO, REPO, copy_repo, planned_jobs, planned_outputs, rule_blocks, run_while_progressing,
                      snakemake)
from safetensors import safe_open

from kdflow.core.intermediates import read_training_record
from kdflow.teachers.pseudo_heads import training_record
from kdflow.workflow import results_paths as paths
from kdflow.workflow.dag_jobs import built_dag
from kdflow.workflow.job_resources import configured_resource, configured_resources
from kdflow.workflow.provenance import script_fingerprint


@pytest.mark.slow
def test_lint_is_clean():
    result = snakemake("--lint", check=False)
    assert result.returncode == 0 and "Congratulations" in result.stdout, result.stdout


def test_snakefmt_is_clean():
    result = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "Snakefile", "rules"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_every_rule_that_logs_writes_its_benchmark_at_its_logs_path():
    """Every job's wall time and memory are recorded (thesis Table 4.5): every rule that runs a script logs, and
    every rule that logs writes its benchmark where kdflow.workflow.runtime_jobs.benchmark_file looks for it: at
    kdflow.workflow.results_paths.benchmark of its log's path."""
    for rule, block in rule_blocks().items():
        if "    output:" not in block:  # `all`, and the templates of rules/templates.smk: never jobs that log
            continue
        log = re.search(r"^    log:\n\s+\"logs/(.+)\.log\"", block, flags=re.M)
        assert log or "**runs(" not in block, rule
        if log:
            benchmark = re.search(r"^    benchmark:\n\s+paths\.benchmark\(\s*\"(.+)\"\s*\)", block, flags=re.M)
            assert benchmark and benchmark.group(1) == log.group(1), rule


@pytest.mark.slow
def test_every_job_runs_the_script_its_code_param_fingerprints_in_kdflows_environment():
    """Every rule is made from a template of rules/templates.smk: its jobs run the script their ``runs(...)`` params
    name, whose code their ``code`` param fingerprints (a student job's: its own members', provenance.job_closure),
    in kdflow's conda environment (ONNX's for export), with memory and time; the templates are never jobs."""
    own_members = {"distill_student", "distill_pack"}
    with built_dag([REPO / "demo/config.yaml"], directory=REPO) as workflow:
        templates = {rule.name for rule in workflow.rules if not rule.output and rule.name != "all"}
        jobs = [job for job in workflow.dag.jobs if job.rule.name != "all"]
        assert templates == {"kdflow_job", "kdflow_device_job"}
        assert {job.rule.name for job in jobs}.isdisjoint(templates) and len(jobs) > 150
        for job in jobs:
            script = REPO / "scripts" / job.params.script
            assert script.is_file(), job.rule.name
            if job.rule.name not in own_members:
                assert job.params.code == script_fingerprint(script), job.rule.name
            assert Path(job.rule.conda_env).name in {"kdflow.yaml", "onnx.yaml"}, job.rule.name
            assert job.resources["mem_mb"] > 0 and job.resources["runtime"] > 0, job.rule.name
        assert {Path(job.rule.conda_env).name for job in jobs if job.rule.name == "export_student"} == {"onnx.yaml"}


def test_every_report_item_has_labels():
    """The report lists an item without labels by its path. A rule declares its items with report() or, for a page
    and its CSV, with page_and_csv() (rules/common.smk, which adds each one's "format" to the labels it is given)."""
    for path in (REPO / "rules").glob("*.smk"):
        if path.name == "common.smk":  # page_and_csv's own report(): no rules there (tests/test_layout.py)
            continue
        text = path.read_text()
        declarations = re.findall(r"(?:\breport|\bpage_and_csv)\((.*?)\n\s*\),", text, flags=re.S)
        assert len(declarations) == len(re.findall(r"\breport\(|\bpage_and_csv\(", text)), path.name
        for declaration in declarations:
            assert "labels=" in declaration, f"{path.name}: {declaration.strip().splitlines()[0]}"


@pytest.mark.slow
def test_full_dry_run_plans_every_teacher_pseudo_head_and_student_of_every_grid():
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    pairs = [(teacher, task) for teacher, spec in config["teachers"].items() for task in spec["tasks"]]
    assert len(pairs) == 19  # BERT-base and RoBERTa-large on 8 GLUE tasks, BERT-large on CoLA, SST-2, Sara
    # Grids (points per task): Universal-KD Tables 2/4: batch 3 x lr 2 (x beta 3 for methods with beta); Table 5:
    # batch 4 x lr 5 (x beta 3) x dropout 4; ALP-KD: lr 3 x eta 4 x lambda 4 (kd has no lambda; no_kd neither);
    # seeds 1, the thesis's students 3.
    ukd2 = 8 * (6 + 3 * 18)  # no_kd + kd, mhkd, universal_kd_il (PKD and ALP are ALP-KD Table 1's)
    alp1 = alp2 = 8 * (3 + 12 + 6 * 48)  # no_kd, kd, pkd, ckd_no/po, alp_no/po, alp
    alp3 = 8 * (3 + 12 + 5 * 48)  # no_kd, kd, pkd_1/6/12, ckd, alp
    ukd4 = 8 * (6 + 6 + 5 * 18)  # no_kd, annealing_kd (beta fixed), kd, takd, dih, cg, att_on_losses
    assistants = 8 * 18  # TAKD's RoBERTa-base assistant, one per grid point
    ukd5 = 8 * 2 * 4 * (20 + 2 * 60)  # bilstm, gated_cnn x 4 dropouts: no_kd (20) + kd, universal_kd_ca (60)
    # two students on CoLA, SST-2, Sara, three seeds; both from scratch, and both from hard logits, one seed; the
    # earlier CoLA BERT_S (W=2, D=2) of the thesis author's probing results, one seed
    thesis = 2 * 3 * 3 + 2 * 3 + 2 * 3 + 1
    exploration = 267  # thesis Chapter 5 / Appendix B without the word2vec vectors: 19 studies (test_exploration.py)
    augmented = 3  # the thesis's students learn from BERT-large's augmented sets of CoLA, SST-2 and Sara
    assert planned_jobs() == Counter(
        prepare_task=9, finetune_teacher=19, evaluate_teacher=19, train_pseudo_heads=19, evaluate_pseudo_heads=19, teacher_table=1, all=1,
        claims_table=1,  # the committed real-data evidence (config `evidence`)
        compute_teacher_signals=16 + augmented,  # BERT-base and RoBERTa-large on train, BERT-large on augmented
        finetune_generator=augmented, evaluate_generator=augmented, sample_transfer_shard=augmented * config["generation"]["sampling"]["shards"],
        build_transfer_set=augmented, transfer_statistics=augmented,
        distill_student=ukd2 + alp1 + alp2 + alp3 + ukd4 + assistants + ukd5 + thesis + exploration,
        compute_assistant_signals=assistants,
        select_students=len(config["experiments"]),
        experiment_table=len(config["experiments"]),
        figure_experiment_curves=len(config["experiments"]),  # every run's learning curve, beside its page
        glue_submission=len(config["experiments"]),  # every experiment has a GLUE task
        # evidence: 27 models probed on SentEval's 10 tasks (files downloaded once: the teachers, the thesis's
        # students, from the teacher, from scratch and from hard logits, the earlier CoLA BERT_S, and 4 "embed."
        # baselines), the thesis's scores beside them,
        # 3 analyses, 9 paper tables of scores and 3 of selected hyperparameters, thesis Table 5.2's 9 measured
        # models, the figures
        download_probing_task=10, encode_probing_tasks=27, probe_model=27 * 10, probing_table=1, figure_probing=1,
        probing_thesis_table=1, figure_probing_thesis=1,
        analyse_predictions=3, figure_analysis=3, paper_table=9 + 3, measure_inference=9, figure_pseudo_heads=1,
        # Universal-KD Fig. 3 and ALP-KD Fig. 3; ALP-KD Fig. 4: computed (analysis), then drawn (reporting)
        compute_attention_maps=2, figure_attention_maps=2, compute_layer_outputs=1, figure_layer_outputs=1,
        classify_sentences=1,  # thesis Tables 6.3/C.1: the CoLA teacher and students
        figure_teacher_curves=3, runtime_table=1,  # thesis Fig. 4.2 per teacher, Table 4.5
        figure_class_distribution=1,  # thesis Fig. A.1: the 8 tasks with classes (STS-B has none)
        ledger_table=1,  # the deviation ledger's page
        run_deviations=12 + 2,  # its entries as they hold for this config: per paper table, probing, exploration
        status_page=1,  # the report's status page: every table and figure of the three works
        # thesis Table 5.1 and Figs. B.1-B.7 (curves), B.8-B.9 (the exploding BERT_S), B.10-B.12 (student sizes)
        exploration_table=1, figure_exploration_curves=7, figure_gradient_explosion=2, figure_student_sizes=3,
        plan=1,  # the cost plan (results/plan.csv)
        plan_measured=1,  # the plan against the hours the jobs took, built last
    )


@pytest.mark.slow
def test_jobs_that_read_a_teachers_evaluation_declare_it():
    """The prediction analysis reads the teacher's predictions, evaluate_teacher's output: without it as an input
    the analysis could run before the evaluation (the demo on 2 idle cores once did)."""
    assert planned_jobs(*DEMO, "--forceall", paths.ANALYSIS_JSON.format(task="sst2"))["evaluate_teacher"] == 1
    source = (REPO / "kdflow/analysis/attention_maps.py").read_text()
    assert 'teacher_dir / "metrics.json"' not in source  # the teacher's settings come from model/training.json


def test_every_training_job_writes_its_learning_curves_beside_its_metrics():
    outputs = planned_outputs(*DEMO, "--forceall")  # every job, whatever results a checkout already has
    for rule in ["evaluate_teacher", "evaluate_pseudo_heads", "evaluate_generator", "distill_student"]:
        assert outputs[rule], rule
        for files in outputs[rule]:
            metrics = next(name for name in files if name.endswith("/metrics.json"))
            assert metrics.replace("/metrics.json", "/curves.parquet") in files, rule


@pytest.mark.slow
@pytest.mark.parametrize(
    "override, message",
    [
        ("teacher_defaults={'learning_rate': 'fast', 'batch_size': 8, 'epochs': 1}", "'fast' is not of type 'number'"),
        ("teacher_defaults={'learning_rate': 1e-5, 'batch_size': 8, 'epochs': 1, 'epoch': 3}",
         "teacher_defaults: unknown key(s) 'epoch'; allowed: "),
        ("device=gpu", "'gpu' does not match"),
        ("precision=bf32", "precision: 'bf32' is not one of ['auto', 'bf16', 'fp16', 'fp32']"),
    ],
    ids=["wrong-type", "typo", "bad-device", "bad-precision"],
)
def test_config_errors_name_the_key(override, message):
    result = snakemake("-n", "--config", override, check=False)
    assert result.returncode != 0
    assert message in result.stdout


@pytest.mark.slow
def test_unknown_task_is_rejected():
    result = snakemake("-n", "--config", "teachers={'t': {'model': 'x', 'tasks': ['wnli']}}", check=False)
    assert result.returncode != 0 and "'wnli' is not one of" in result.stdout


@pytest.mark.slow
def test_a_teacher_and_a_student_of_the_demo_run_in_bf16(tmp_path):
    """The demo's tiny teacher, its pseudo-heads and signals and an ALP student (hidden-space: stored float16
    layers) through their rules in bf16 on CPU: each output records bf16, signals keep their dtypes."""
    workdir = copy_repo(tmp_path / "kdflow")
    student = paths.STUDENT_RUN_DIR.format(experiment="alp_kd_table2", task="sst2", student="bert_3", method="alp",
                                           point="default", seed=0)
    teacher_metrics = paths.TEACHER_METRICS.format(teacher="tiny_bert", task="sst2")
    snakemake(*DEMO, "--config", "precision=bf16", "--cores", "2", f"{student}/metrics.json", teacher_metrics,
              cwd=workdir)
    teacher = json.loads((workdir / teacher_metrics).read_text())
    heads = training_record(workdir / paths.PSEUDO_HEADS.format(teacher="tiny_bert", task="sst2"))  # their own record
    distilled = json.loads((workdir / student / "metrics.json").read_text())
    for metrics in (teacher, heads, distilled):
        assert metrics["precision"] == "bf16" and metrics["diverged"] is None
    assert teacher["evaluation_precision"] == "bf16"
    assert teacher["scores"]["dev"]["accuracy"] > 0 and distilled["scores"]["dev"]["accuracy"] > 0
    signals = workdir / paths.SIGNALS.format(teacher="tiny_bert", task="sst2", transfer="train")
    with safe_open(str(signals), framework="pt") as f:
        assert f.metadata()["precision"] == "bf16"
        dtypes = {name: f.get_slice(name).get_dtype() for name in f.keys()}
    assert dtypes == {"idx": "I64", "logits": "F32", "head_logits": "F32", "layers": "F16"}
    assert "precision bf16 on cpu" in (workdir / "logs/distill_student/alp_kd_table2/sst2/bert_3/alp/default/"
                                                 "seed0.log").read_text()


@pytest.mark.slow
def test_broken_data_fails_with_one_clear_line(tmp_path):
    workdir = copy_repo(tmp_path / "kdflow")
    train = workdir / "demo/data/glue/RTE/train.tsv"
    lines = train.read_text().splitlines(keepends=True)
    lines[5] = "\t".join(lines[5].split("\t")[:2]) + "\n"
    train.write_text("".join(lines))
    result = snakemake(*DEMO, "--cores", "1", paths.DATA.format(task="rte"), cwd=workdir, check=False)
    assert result.returncode != 0
    log = (workdir / "logs/prepare_task/rte.log").read_text()
    assert "demo/data/glue/RTE/train.tsv:6: expected 4 tab-separated fields, found 2" in log
    assert "Traceback" not in log


@pytest.mark.slow
def test_a_teacher_that_diverges_stops_with_what_to_change_and_is_kept_only_when_asked(tmp_path):
    """Issue 33: the demo teacher on STS-B at a learning rate of 1e3 turns its loss non-finite. Its fine-tuning
    job fails with the step, the loss and the keys to change, instead of handing NaN signals to its students;
    with keep_diverged it finishes, restored from the failed attempt's checkpoint rather than trained again."""
    workdir = copy_repo(tmp_path / "kdflow")
    model = paths.TEACHER_MODEL.format(teacher="tiny_bert", task="stsb")

    def run(teacher: dict):  # a config file: Snakemake's --config reads nested numbers as strings
        (workdir / "diverge.yaml").write_text(yaml.safe_dump({"teachers": {"tiny_bert": teacher}}))
        return snakemake("--configfile", "demo/config.yaml", "diverge.yaml", "--replace-workflow-config", "--cores",
                         "1", model, cwd=workdir, check=False)

    diverging = {"task_hyperparameters": {"stsb": {"learning_rate": 1000.0}}}
    result = run(diverging)
    assert result.returncode != 0 and not (workdir / model).exists()
    log = (workdir / "logs/finetune_teacher/tiny_bert/stsb.log").read_text()
    assert "teacher tiny_bert diverged on stsb at epoch 1, optimiser step" in log
    assert "lower teachers.tiny_bert.task_hyperparameters.stsb.learning_rate" in log and "Traceback" not in log
    assert run({**diverging, "keep_diverged": True}).returncode == 0
    assert "finished before: weights and results restored from the checkpoint" in (
        workdir / "logs/finetune_teacher/tiny_bert/stsb.log").read_text()
    assert read_training_record(workdir / model, "teacher")["diverged"]["what"].startswith("training loss")


@pytest.mark.slow
def test_rule_scripts_import_kdflow_without_pythonpath_or_an_installed_package(tmp_path):
    """As in a conda job environment (`--sdm conda`): an interpreter that has the dependencies but not kdflow, no
    PYTHONPATH (Snakemake clears it there), and a working directory outside the repository."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = bare / "bin" / "python"
    site_packages = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip()
    # this environment's packages, without processing its .pth files: the editable kdflow is not importable
    (Path(site_packages) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    assert subprocess.run([python, "-c", "import kdflow"], cwd=tmp_path, env=environment).returncode != 0
    workdir = copy_repo(tmp_path / "repository")
    result = run_while_progressing([python, "-m", "snakemake", "--snakefile", workdir / "Snakefile", "--directory",
                                    workdir, "--configfile", workdir / "demo/config.yaml", "--replace-workflow-config",
                                    "--cores", "1", paths.DATA.format(task="sst2")], cwd=tmp_path, env=environment)
    assert result.returncode == 0, result.stdout
    assert (workdir / paths.DATA.format(task="sst2") / "meta.json").is_file()


def test_a_jobs_resources_come_from_its_config_section_over_the_defaults_and_grow_on_a_retry():
    config = {"resources": {"threads": 2, "gpu": 1, "mem_mb": 1000, "runtime": 5},
              "teachers": {"big": {"resources": {"gpu": 4, "mem_mb": 3000}}, "small": {}}}
    big, small = {"teacher": "big"}, {"teacher": "small"}
    assert configured_resource(config, "threads", "teachers.{teacher}")(big, 1) == 2  # the default
    resources = configured_resources(config, "teachers.{teacher}")
    assert [resources[name](big, 2) for name in ("gpu", "mem_mb", "runtime")] == [4, 6000, 10]  # the second attempt
    assert [resources[name](small, 1) for name in ("gpu", "mem_mb", "runtime")] == [1, 1000, 5]
    assert configured_resources(config, "teachers.{teacher}", one_process=True)["gpu"](big, 1) == 1


def test_every_rule_that_asks_for_gpus_goes_to_the_gpu_partition_of_the_slurm_profile():
    asking = set()
    for rule, block in rule_blocks().items():
        resources = re.search(r"(?ms)^    resources:\n(.*?)(?=^    \w+:)", block)
        if resources and ("gpu=" in resources[1] or "**configured_resources(" in resources[1]):  # gpu among them
            asking.add(rule)
    profile = yaml.safe_load((REPO / "slurm/config.yaml").read_text())
    on_gpu = {rule for rule, resources in profile["set-resources"].items() if resources["slurm_partition"] == "gpu"}
    assert len(asking) == 13 and asking == on_gpu


@pytest.mark.slow
def test_slurm_profile_dry_run_gives_gpu_rules_a_gpu():
    """`snakemake --profile slurm -n` from the repository root: GPU rules on the GPU partition with a GPU, CPU
    rules on the CPU partition without; many short jobs in group jobs, never GPU and CPU jobs together."""
    takd_student = paths.STUDENT_METRICS.format(experiment="universal_kd_table4", task="rte", student="distilroberta",
                                                method="takd", point="bs32_beta0.5_lr2e-05", seed=1)
    targets = [paths.TEACHER_TABLE_CSV, paths.SELECTION.format(experiment="thesis_table52_lstm_s"), takd_student,
               paths.PROBING_SCORES.format(model="bert_large", probing_task="Length"),
               paths.INFERENCE.format(model="bert_large_cola")]
    result = snakemake("-n", "--profile", "slurm", *targets)
    jobs = re.findall(r"\n *rule (\w+):\n(?:.*\n)*? +resources: (.*)\n", result.stdout)  # group members indented
    assert Counter(rule for rule, _ in jobs) == Counter(
        prepare_task=9, finetune_teacher=19, evaluate_teacher=19, train_pseudo_heads=19, evaluate_pseudo_heads=19, teacher_table=1,
        compute_teacher_signals=3 + 1, distill_student=9 + 2, compute_assistant_signals=1, select_students=1,
        finetune_generator=3, sample_transfer_shard=120, build_transfer_set=3,
        download_probing_task=10, encode_probing_tasks=1, probe_model=1, measure_inference=1,
    )
    gpu_rules = ("finetune_teacher", "evaluate_teacher", "train_pseudo_heads", "evaluate_pseudo_heads", "compute_teacher_signals",
                 "distill_student", "compute_assistant_signals", "finetune_generator", "evaluate_generator", "sample_transfer_shard", "encode_probing_tasks",
                 "probe_model")
    for rule, resources in jobs:
        on_gpu = rule in gpu_rules
        assert ("gpu=1" in resources) == on_gpu, (rule, resources)
        assert f"slurm_partition={'gpu' if on_gpu else 'cpu'}" in resources
        assert "slurm_account=" in resources and "runtime=" in resources and "mem_mb=" in resources
    # Students in twos per experiment, task, student and method (three seeds of lstm_s on 3 tasks; the TAKD
    # student and its assistant) and each model's probes; selections and tables, which read many jobs' outputs,
    # in no group (slurm/config.yaml says why).
    groups = group_members(result.stdout)
    assert Counter(group.split("_")[0] for group, _ in groups) == Counter(students=3 * 2 + 2, probes=1)
    assert {(group.split("_")[0], rule) for group, rules in groups for rule in rules} == {
        ("students", "distill_student"), ("probes", "probe_model")}


def group_members(dry_run_output):
    """The group jobs of a dry run, each as (group id, the rules of its jobs)."""
    groups = []
    for line in dry_run_output.splitlines():
        if group := re.search(r"Group job (\w+) ", line):
            groups.append((group[1], set()))
        elif member := re.match(r" +rule (\w+):", line):
            groups[-1][1].add(member[1])
    return groups
