"""The cost plan (kdflow.workflow.cost_plan): its arithmetic on a toy config's DAG, model sizes against the students'
documented ones, its jobs against Snakemake's dry run of the demo, and the rule's output on the demo."""

import copy
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from unittest import mock

import pandas as pd
import pytest
import yaml
from conftest import DEMO, REPO, copy_repo, planned_jobs, snakemake_config

from kdflow.core.errors import UserError
from kdflow.core.tasks import TASKS
from kdflow.probing.senteval import PROBING_TASKS
from kdflow.workflow import cost_plan, job_work, model_sizes, split_sizes
from kdflow.workflow import results_paths as paths
from kdflow.workflow.catalog_cache import load_catalog
from kdflow.workflow.config_files import validate_config
from kdflow.workflow.dag_jobs import workflow_jobs
from kdflow.workflow.exploration import with_exploration
from kdflow.workflow.job_settings import class_distribution_tasks

TOY = {
    "data": {"glue_dir": None, "sara_dir": "nowhere"},
    "device": "auto",
    "precision": "auto",
    "resources": {"threads": 1, "gpu": 1, "mem_mb": 1000, "runtime": 10},
    "teacher_defaults": {"learning_rate": 1e-3, "batch_size": 32, "epochs": 2, "eval_batch_size": 100},
    "pseudo_heads": {"learning_rate": 1e-2, "batch_size": 32, "epochs": 1, "eval_batch_size": 100},
    "teachers": {"t": {"architecture": {"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2,
                                        "num_attention_heads": 2, "intermediate_size": 128},
                       "tokenizer": "demo/vocab.txt", "tasks": ["rte"]}},
    "student_defaults": {"learning_rate": 1e-3, "batch_size": 32, "epochs": 1, "eval_batch_size": 100},
    "students": {"s": {"type": "bert_k", "layers": 1}},
    "experiments": {"e": {"teacher": "t", "tasks": ["rte"], "students": ["s"], "methods": {"kd": None},
                          "grid": {"beta": [0.5, 0.7]}, "seeds": [1]}},
}
# RTE as the toy sees it: 640 training examples (20 batches of 32), 200 dev (2 batches of 100), 100 test, 50 tokens.
TOY_SIZES = pd.DataFrame([{"task": task, "train": 640, "dev": 200, "other": 100, "tokens_per_example": 50.0}
                          for task in TASKS])
TOY_PARAMETERS = 2 * (4 * 64**2 + 2 * 64 * 128)  # the teacher: 2 layers of attention and feed-forward, 65,536


def toy_config():
    config = copy.deepcopy(TOY)
    validate_config(config, REPO / "schemas/config.schema.yaml")
    return config


def toy_jobs(config=None, sharing_speedups=None) -> pd.DataFrame:
    """The toy config's plan: its DAG as Snakemake builds it (kdflow.workflow.dag_jobs), priced."""
    config = config or toy_config()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as configfile:
        yaml.safe_dump(config, configfile)
        configfile.flush()
        dag = workflow_jobs([configfile.name], directory=REPO)
    config = config | with_exploration(config)
    sizes = split_sizes.task_sizes(config, TOY_SIZES)
    return pd.DataFrame(job_work.planned_jobs(dag, config, sizes, load_catalog(), {}, sharing_speedups))


def test_the_toy_config_plans_every_job_of_its_dag_with_its_work():
    jobs = toy_jobs()
    assert Counter(jobs.rule) == Counter(
        prepare_task=1, figure_class_distribution=1, finetune_teacher=1, evaluate_teacher=1, train_pseudo_heads=1,
        evaluate_pseudo_heads=1, teacher_table=1, figure_pseudo_heads=1, figure_teacher_curves=1,
        compute_teacher_signals=1, distill_student=2, select_students=1, experiment_table=1,
        figure_experiment_curves=1, glue_submission=1,
        plan=1, status_page=1, plan_measured=1)
    teacher = jobs[jobs.rule == "finetune_teacher"].iloc[0]
    # 2 epochs of 640 examples in 20 batches; dev (200) after each epoch: 400 examples in 2 x 2 batches of 100
    assert (teacher.train_examples, teacher.train_batches) == (1280, 40)
    assert (teacher.infer_examples, teacher.infer_batches) == (400, 4)
    evaluation = jobs[jobs.rule == "evaluate_teacher"].iloc[0]
    assert (evaluation.train_examples, evaluation.infer_examples, evaluation.infer_batches) == (0, 300, 3)  # dev, test
    assert (teacher.parameters, teacher.layers, teacher.tokens) == (TOY_PARAMETERS, 2, 50.0)
    heads = jobs.set_index("rule").loc[["train_pseudo_heads", "evaluate_pseudo_heads", "compute_teacher_signals"]]
    assert list(heads.infer_examples) == [640 + 200, 200, 640]  # frozen features of train and dev; dev; train
    students = jobs[jobs.rule == "distill_student"]
    assert list(students.section) == ["e", "e"]  # one per beta
    assert (students.parameters == TOY_PARAMETERS / 2).all()  # bert_k with 1 of the teacher's 2 layers
    assert (students.train_examples == 640).all() and (students.infer_examples == 200 + 300).all()


def test_the_class_distribution_draws_every_prepared_task_with_classes():
    """Thesis Fig. A.1: the teachers' tasks once each, in config order, but the regression tasks; none: no job."""
    assert class_distribution_tasks({"teachers": {"a": {"tasks": ["stsb", "cola"]}, "b": {"tasks": ["sara", "cola"]}}}
                                    ) == ["cola", "sara"]
    config = toy_config()
    config["teachers"]["t"]["tasks"] = config["experiments"]["e"]["tasks"] = ["stsb"]
    assert "figure_class_distribution" not in set(toy_jobs(config).rule)


def test_evaluations_every_n_steps_accumulation_stages_and_subsets_count_in_the_work():
    config = toy_config()
    config["experiments"]["e"] |= {"schedule": [{"epochs": 2}, {"epochs": 1}],
                                   "hyperparameters": {"evaluate_every_steps": 8, "gradient_accumulation_steps": 2,
                                                       "max_train_examples": 320}}
    student = toy_jobs(config).query("rule == 'distill_student'").iloc[0]
    # 320 examples: 10 steps an epoch, 3 epochs, each step 2 micro-batches; dev at 3 epoch ends and at steps
    # 8, 16 (stage 1: 20 steps) and 8 (stage 2: 10 steps)
    assert (student.train_examples, student.train_batches) == (960, 60)
    assert student.infer_examples == (3 + 3) * 200 + 300


def test_augmented_and_unlabelled_transfer_sets_add_their_sentences(tmp_path):
    text = tmp_path / "rte.txt"
    text.write_text("a\tb\n\nc\td\n")  # two lines, a blank one not counted
    config = toy_config()
    config["generation"] = {"generator": {"architecture": {"model_type": "gpt2", "n_embd": 64, "n_layer": 2,
                                                           "n_head": 2}, "tokenizer": "demo/vocab.txt"},
                            "hyperparameters": {"learning_rate": 1e-3, "batch_size": 16, "epochs": 1,
                                                "eval_batch_size": 100},
                            "sampling": {"sentences": 1000, "shards": 3, "batch_size": 10, "max_length": 40}}
    config["unlabelled"] = {"files": {"rte": str(text)}}
    config["experiments"]["e"]["transfer"] = "unlabelled_augmented"
    validate_config(config, REPO / "schemas/config.schema.yaml")
    jobs = toy_jobs(config)
    assert (jobs[jobs.rule == "distill_student"].train_examples == 640 + 1000 + 2).all()
    shards = jobs[jobs.rule == "sample_transfer_shard"]
    # 334, 333 and 333 sentences of min(50 tokens, max_length 40): 40 steps of 10 slots a sentence
    assert list(shards.decode_examples) == [334 * 40, 333 * 40, 333 * 40]
    assert list(shards.decode_batches) == [1336, 1332, 1332]
    generator = jobs[jobs.rule == "finetune_generator"].iloc[0]
    vocabulary = len((REPO / "demo/vocab.txt").read_text().splitlines())
    # its blocks (GPT-2's feed-forward is 4 x 64 wide) and its output layer over the vocabulary
    assert generator.parameters == 2 * (4 * 64**2 + 2 * 64 * 256) + vocabulary * 64


def test_estimate_adds_start_up_floor_and_flops_on_a_cpu_and_takes_the_larger_on_a_gpu():
    jobs = toy_jobs()
    rates = pd.DataFrame([{"family": "transformer", "kind": kind, "device": device, "precision": precision,
                           "floor_seconds_per_layer": 0.01, "flops_per_second": 1e9, "source": f"toy {device}"}
                          for kind in ("train", "infer") for device, precision in (("cpu", "fp32"), ("G", "bf16"))])
    rates = rates.set_index(["family", "kind", "device", "precision"])
    startup = dict.fromkeys(jobs.rule, 1.0)
    train_flops = 6 * TOY_PARAMETERS * 50 * 1280 / 1e9  # 25.17 s
    infer_flops = 2 * TOY_PARAMETERS * 50 * 400 / 1e9  # 2.62 s: dev after each epoch (the final scores: evaluate_teacher)
    floors = 40 * 0.01 * 2, 4 * 0.01 * 2  # batches x floor per layer x 2 layers
    on_cpu = cost_plan.estimate(jobs, rates, startup, ("cpu", "fp32")).set_index("rule").loc["finetune_teacher"]
    assert on_cpu.seconds == pytest.approx(1 + floors[0] + train_flops + floors[1] + infer_flops)
    assert (on_cpu.device, on_cpu.source) == ("cpu", "toy cpu")
    on_gpu = cost_plan.estimate(jobs, rates, startup, ("G", "bf16")).set_index("rule")
    # on a GPU the host launches while the device computes: each kind of work costs the larger of its two parts
    teacher = on_gpu.loc["finetune_teacher"]
    assert teacher.seconds == pytest.approx(1 + cost_plan.GPU_START_SECONDS + max(floors[0], train_flops)
                                            + max(floors[1], infer_flops))
    assert teacher.seconds == pytest.approx(teacher.startup_seconds + teacher.floor_seconds + teacher.compute_seconds)
    assert teacher.floor_seconds == 0 and teacher.compute_seconds == pytest.approx(train_flops + infer_flops)
    assert (on_gpu.loc["teacher_table"].seconds, on_gpu.loc["teacher_table"].device) == (1.0, "cpu")
    estimated = cost_plan.estimate(jobs, rates, startup, ("G", "bf16"))
    table = cost_plan.plan_table(estimated, cost_plan.section_order(toy_config()))
    assert list(table.section.unique()) == ["data", "teachers", "e", "paper tables and figures", "plan"]
    students = table.set_index("rule").loc["distill_student"]
    assert (students.jobs, students.examples_x_epochs, students.device) == (2, 1280, "G")
    per_table = cost_plan.paper_table_hours(table, {**toy_config(), "paper_tables": {"tables": {"x": {
        "experiments": ["e"]}}}})
    assert per_table.gpu_hours.iloc[0] == pytest.approx(table[table.section == "e"].query("device == 'G'").hours.sum())


def test_model_sizes_match_the_students_documented_parameter_counts():
    """Non-embedding parameters as the students' docstrings count them, less biases, pooling and classifier."""
    catalog = load_catalog()
    base = model_sizes.transformer(12, 768, 3072)
    assert base["parameters"] == 84_934_656  # BERT-base without its embeddings
    bilstm = model_sizes.student_model({"type": "bilstm"}, base, catalog)  # 25,479,938 with 30,522 x 512 embeddings
    assert bilstm["parameters"] == pytest.approx(25_479_938 - 30_522 * 512, rel=0.005)
    cnn = model_sizes.student_model({"type": "gated_cnn"}, base, catalog)  # 23,554,298 with 30,522 x 300 embeddings
    assert cnn["parameters"] == pytest.approx(23_554_298 - 30_522 * 300, rel=0.005)
    lstm_s = model_sizes.student_model({"type": "bilstm_s", "embeddings": {"source": "file", "path": "x"}}, base, catalog)
    assert lstm_s["parameters"] == pytest.approx(2_406_002, rel=0.005)  # Table 5.2: 2.41M (300-wide multichannel)
    bert_4 = model_sizes.student_model({"type": "bert_k", "layers": 4}, base, catalog)
    assert (bert_4["layers"], bert_4["parameters"]) == (4, base["parameters"] / 3)
    assert model_sizes.architecture_model({"model": "roberta-large"}) == model_sizes.transformer(24, 1024, 4096)


def test_the_plan_sizes_every_registered_student_type_and_names_where_to_add_one():
    catalog = load_catalog()
    assert set(model_sizes.STUDENT_SIZES) == set(catalog["students"])
    teacher = model_sizes.transformer(4, 32, 64)
    for kind in catalog["students"]:
        required = {"hf": {"architecture": {"model_type": "bert", "num_hidden_layers": 2, "hidden_size": 32}},
                    "bert_k": {"layers": 2}}  # the options without a usable default
        spec = {"type": kind, **required.get(kind, {})}
        assert model_sizes.student_model(spec, teacher, catalog)["parameters"] > 0, kind
    with pytest.raises(UserError, match=r"student type 'new'.*add it to STUDENT_SIZES \(kdflow/workflow/model_sizes"):
        model_sizes.student_model({"type": "new"}, teacher, {"students": {"new": {"defaults": {}}}})


def test_a_checkpoint_the_table_lacks_is_sized_from_its_config_in_a_folder_or_the_hub_cache(tmp_path, monkeypatch):
    """A teacher at a local folder, or a hub model downloaded once (its config.json in the Hugging Face cache), is
    sized from its config.json: the plan, the first default target, no longer stops at a model HUB_ARCHITECTURES
    lacks. One neither there nor cached stops it with what to do."""
    import huggingface_hub

    minilm = {"model_type": "bert", "num_hidden_layers": 6, "hidden_size": 384, "intermediate_size": 1536}
    (tmp_path / "minilm").mkdir()
    (tmp_path / "minilm/config.json").write_text(json.dumps(minilm))
    assert model_sizes.architecture_model({"model": str(tmp_path / "minilm")}) == model_sizes.transformer(6, 384, 1536)
    snapshot = tmp_path / "cache/models--org--tiny-gpt2/snapshots/0123abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2, "n_embd": 64}))
    (tmp_path / "cache/models--org--tiny-gpt2/refs").mkdir()
    (tmp_path / "cache/models--org--tiny-gpt2/refs/main").write_text("0123abc")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    assert model_sizes.architecture_model({"model": "org/tiny-gpt2"}) == model_sizes.transformer(2, 64, 256)
    for missing in ("org/never-downloaded", str(tmp_path / "no-such-folder")):
        with pytest.raises(UserError, match="give a local checkpoint folder, download it once"):
            model_sizes.architecture_model({"model": missing})


def test_the_plan_module_imports_no_torch():
    """The workflow imports it while planning (rules/common.smk), which must not cost a torch import."""
    code = "import sys\nimport kdflow.workflow.cost_plan\nprint('torch' in sys.modules, 'transformers' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "False"]


def test_the_demo_plan_prices_every_job_of_the_demo_dry_run():
    """The plan lists no job itself: Snakemake's DAG, priced job by job, has the dry run's jobs but `all`."""
    config = snakemake_config("demo/config.yaml")
    files = {task: str(REPO / config["probing"]["data_dir"] / name) for task, name in PROBING_TASKS.items()}
    sizes = split_sizes.task_sizes(config, pd.read_csv(REPO / split_sizes.TASK_SIZES))
    dag = workflow_jobs([REPO / "demo/config.yaml"], directory=REPO)
    jobs = job_work.planned_jobs(dag, config, sizes, load_catalog(), files)
    dry_run = planned_jobs(*DEMO, "--forceall") - Counter(all=1)
    assert Counter(job["rule"] for job in jobs) == dry_run
    assert (sizes["sst2"]["train"], sizes["sst2"]["dev"], sizes["sst2"]["other"]) == (240, 80, 40)  # the excerpt
    assert sizes["qqp"]["sizes"] == split_sizes.TASK_SIZES  # the demo has no QQP: the table's
    students = [job for job in jobs if job["rule"] == "distill_student"]
    assert {job["section"] for job in students} == {job["wildcards"]["experiment"] for job in dag
                                                   if job["rule"] == "distill_student"}
    assert all(job["train_examples"] > 0 for job in students)


def test_a_rule_that_runs_a_model_must_name_its_section_and_a_new_table_or_figure_needs_nothing():
    """A rule with work (job_work.WORK) must say which section of the plan its jobs go to, not fail with a KeyError;
    a new table's or figure's rule goes to the papers' section, its start-up the median of the measured tables' and
    figures', and the plan says so."""
    config = toy_config()
    sizes = split_sizes.task_sizes(config, TOY_SIZES)
    dag = [{"rule": "new_rule", "wildcards": {}, "params": {}, "resources": {}, "benchmark": "b.tsv"}]
    with pytest.raises(UserError, match="rule new_rule has no section in the cost plan: add it to SECTIONS"), \
            mock.patch.dict(job_work.WORK, new_rule=job_work.WORK["probe_model"]):
        job_work.planned_jobs(dag, config, sizes, load_catalog(), {})
    jobs = pd.DataFrame(job_work.planned_jobs(dag, config, sizes, load_catalog(), {}))
    assert jobs.section.tolist() == [job_work.TABLES_AND_FIGURES]
    startup = {"paper_table": 1.0, "status_page": 2.0, "plan": 4.0, "probe_model": 100.0}  # probe_model runs a model
    estimated = cost_plan.estimate(jobs, cost_plan.read_throughput(), startup, ("cpu", "fp32")).iloc[0]
    assert (estimated.seconds, estimated.source) == (2.0, cost_plan.ASSUMED_START_UP)


def test_make_plan_writes_the_demo_plan_without_running_anything_else(tmp_path):
    """Through `make plan` as the README and Makefile say, with Snakemake options in PLAN_ARGS (--config among them,
    which would take the target for a value if it came after them); the virtualenv is this one (-o: not rebuilt)."""
    workdir = copy_repo(tmp_path / "kdflow")
    options = " ".join(DEMO) + " --config 'plan={gpu: A100}'"
    result = subprocess.run(["make", "-o", ".venv/.installed", "plan", f"BIN={Path(sys.executable).parent}",
                             f"PLAN_ARGS={options}"], cwd=workdir, capture_output=True, text=True)
    assert result.returncode == 0 and "2 of 2 steps (100%) done" in result.stderr, result.stdout + result.stderr
    table = pd.read_csv(workdir / paths.PLAN_CSV)
    assert table.jobs.sum() == 195 - 1  # every job of the demo's DAG but `all`
    assert set(table.device) == {"cpu"} and (table.hours > 0).all()  # the demo runs on the CPU
    students = table[table.rule == "distill_student"]
    assert set(students.section) == set(snakemake_config("demo/config.yaml")["experiments"])
    page = (workdir / paths.PLAN_MD).read_text()
    assert "GPU-hours" in page and "measured-cpu" in page and "# Cost plan" in page
    # Nothing has run: the calibrated page, which make prints, is the plan's figures and says so.
    assert "No job of the plan has run yet: the 194 jobs are priced by the plan's figures" in result.stdout
    assert (pd.read_csv(workdir / paths.PLAN_FIGURES_CSV).figures == "plan").all()


@pytest.mark.slow
def test_a_config_without_probing_or_generation_plans_its_dag(tmp_path):
    """The toy config has no `probing` section: the plan rule must not ask for the SentEval files."""
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump(toy_config()))
    dry_run = planned_jobs("--configfile", str(config), "--replace-workflow-config", "--forceall", paths.PLAN_CSV)
    assert dry_run == Counter(plan=1)
    assert planned_jobs("--configfile", str(config), "--replace-workflow-config", "--forceall") - Counter(all=1) == \
        Counter(job["rule"] for job in toy_jobs().to_dict("records"))


def test_the_plan_against_the_run_sums_the_jobs_that_ran_and_compares_cpu_time_or_gpu_hours(tmp_path):
    """Per section and rule: planned jobs and hours, and of the jobs whose benchmark file exists, the planned
    hours beside the measured ones; a CPU job compares its CPU time, a GPU job its wall clock."""
    from kdflow.reporting.plan_pages import measured_against_plan, measured_document

    (tmp_path / "b").mkdir()
    for name, wall, cpu in [("a1", 7200, 3600), ("g1", 1800, 900)]:
        (tmp_path / "b" / f"{name}.tsv").write_text(f"s\th:m:s\tmax_rss\tcpu_time\n{wall}\t-\t-\t{cpu}\n")
    jobs = pd.DataFrame([
        {"section": "e", "rule": "distill_student", "task": "rte", "device": "cpu", "precision": "fp32",
         "seconds": 1800.0, "benchmark": "b/a1.tsv"},
        {"section": "e", "rule": "distill_student", "task": "rte", "device": "cpu", "precision": "fp32",
         "seconds": 3600.0, "benchmark": "b/a2.tsv"},  # not run yet
        {"section": "e", "rule": "probe_model", "task": "", "device": "h100", "precision": "bf16",
         "seconds": 3600.0, "benchmark": "b/g1.tsv"},
    ])
    table = measured_against_plan(jobs, tmp_path)
    student, probe = table.to_dict("records")
    assert (student["jobs"], student["ran"], student["planned_hours"], student["ran_planned_hours"]) == (2, 1, 1.5, 0.5)
    assert (student["wall_hours"], student["cpu_hours"], student["ratio"]) == (2.0, 1.0, 2.0)  # CPU time / planned
    assert (probe["wall_hours"], probe["ratio"]) == (0.5, 0.5)  # a GPU job: its wall clock
    page = measured_document(table).markdown()
    assert "2 of 3 planned jobs have run" in page and "CPU jobs: 0.5 planned, 1 measured (2.00x) CPU-hours" in page
    none = measured_against_plan(jobs.assign(benchmark="b/missing.tsv"), tmp_path)
    assert none.ran.sum() == 0 and none.ratio.isna().all()
    assert "0 of 3 planned jobs have run" in measured_document(none).markdown()


def test_no_rate_counts_above_its_gpus_peak():
    """A fit can give a rate above what the chip can do (the 2026-11-28 H200 fp32 fit: 98 TFLOP/s against a 67 peak):
    the plan caps it, so that its arithmetic takes at least FLOPs / peak."""
    jobs = toy_jobs()
    rates = pd.DataFrame([{"family": "transformer", "kind": kind, "device": "H200", "precision": "fp32",
                           "floor_seconds_per_layer": 0.0, "flops_per_second": 1e20, "source": "unresolved"}
                          for kind in ("train", "infer")]).set_index(["family", "kind", "device", "precision"])
    teacher = cost_plan.estimate(jobs, rates, dict.fromkeys(jobs.rule, 1.0), ("H200", "fp32")).set_index(
        "rule").loc["finetune_teacher"]
    peak = cost_plan.PEAK_FLOPS["H200", "fp32"]
    assert teacher.compute_seconds == pytest.approx(6 * TOY_PARAMETERS * 50 * 1280 / peak + 2 * TOY_PARAMETERS * 50 * 400 / peak)


def test_a_pack_is_charged_its_members_examples_in_one_members_batches_and_its_members_links_nothing():
    """Two runs of the toy's student packed (student_packs): the pack job counts both runs' examples (the arithmetic
    of two) in one run's batches (one launch of every operator a step), the members' own jobs only their start-up."""
    config = toy_config()
    config["experiments"]["e"]["grid"] = {"learning_rate": [1e-3, 2e-3]}
    config["student_packs"] = {"bert_k": 2}
    jobs = toy_jobs(config)
    pack = jobs[jobs.rule == "distill_pack"]
    assert len(pack) == 1 and pack.iloc[0].section == "e"
    assert (pack.iloc[0].train_examples, pack.iloc[0].train_batches) == (2 * 640, 20)
    assert (pack.iloc[0].infer_examples, pack.iloc[0].parameters) == (2 * (200 + 300), TOY_PARAMETERS / 2)
    members = jobs[jobs.rule == "distill_student"]
    assert len(members) == 2 and (members[[c for c in jobs if c.endswith(("_examples", "_batches"))]] == 0).all(None)
