"""The Snakemake workflow: lint, formatting, config validation, the full dry run, and the demo end to end."""

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, rule_scripts

from kdflow.distillation.methods.registry import available_methods
from kdflow.workflow.provenance import script_closure

DEMO = ["--configfile", "demo/config.yaml", "--replace-workflow-config"]


def snakemake(*args, cwd=REPO, check=True):
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # Snakemake reports on stderr; tests read both as one stream
        text=True,
        timeout=900,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout}")
    return result


def planned_jobs(*args, cwd=REPO) -> Counter:
    """Jobs a dry run would execute, per rule (from the 'Job stats' table)."""
    out = snakemake("-n", *args, cwd=cwd).stdout
    if "Nothing to be done" in out:
        return Counter()
    stats = out[out.index("Job stats:") :].splitlines()[3:]
    jobs = Counter()
    for line in stats:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        jobs[parts[0]] = int(parts[1])
    return jobs


def planned_outputs(*args, cwd=REPO) -> dict[str, list[list[str]]]:
    """The outputs of each job a dry run would execute, per rule."""
    out = snakemake("-n", *args, cwd=cwd).stdout
    outputs = {}
    for rule, files in re.findall(r"^(?:local)?rule (\w+):\n(?:    (?!output:).*\n)*    output: (.*)$", out, flags=re.M):
        outputs.setdefault(rule, []).append(files.split(", "))
    return outputs


def copy_repo(destination: Path) -> Path:
    ignore = shutil.ignore_patterns(".git", ".venv", ".snakemake", "results", "logs", "__pycache__", "*.egg-info")
    shutil.copytree(REPO, destination, ignore=ignore)
    return destination


def test_lint_is_clean():
    result = snakemake("--lint", check=False)
    assert result.returncode == 0 and "Congratulations" in result.stdout, result.stdout


def test_snakefmt_is_clean():
    result = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "Snakefile", "rules"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_every_report_item_has_labels():
    """The report lists an item without labels by its path."""
    for path in (REPO / "rules").glob("*.smk"):
        text = path.read_text()
        declarations = re.findall(r"report\((.*?)\n\s*\),", text, flags=re.S)
        assert len(declarations) == text.count("report("), path.name
        for declaration in declarations:
            assert "labels=" in declaration, f"{path.name}: {declaration.strip().splitlines()[0]}"


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
    thesis = 2 * 3 * 3  # two students on CoLA, SST-2, Sara, three seeds
    augmented = 3  # the thesis's students learn from BERT-large's augmented sets of CoLA, SST-2 and Sara
    assert planned_jobs() == Counter(
        prepare_task=9, finetune_teacher=19, train_pseudo_heads=19, evaluate_pseudo_heads=19, teacher_table=1, all=1,
        compute_teacher_signals=16 + augmented,  # BERT-base and RoBERTa-large on train, BERT-large on augmented
        finetune_generator=augmented, sample_transfer_shard=augmented * config["generation"]["sampling"]["shards"],
        build_augmented_transfer_set=augmented, transfer_statistics=augmented,
        distill_student=ukd2 + alp1 + alp2 + alp3 + ukd4 + assistants + ukd5 + thesis,
        compute_assistant_signals=assistants,
        select_students=len(config["experiments"]),
        glue_submission=len(config["experiments"]),  # every experiment has a GLUE task
        # evidence: 10 models probed on SentEval's 10 tasks (files downloaded once), 3 analyses, 9 paper tables of
        # scores and 3 of selected hyperparameters, thesis Table 5.2's 9 measured models, the figures
        download_probing_task=10, encode_probing_tasks=10, probe_model=10 * 10, probing_table=1, figure_probing=1,
        analyse_predictions=3, figure_analysis=3, paper_table=9 + 3, measure_inference=9, figure_pseudo_heads=1,
        attention_maps=1,
    )


def test_every_training_job_writes_its_learning_curves_beside_its_metrics():
    outputs = planned_outputs(*DEMO)
    for rule in ["finetune_teacher", "evaluate_pseudo_heads", "finetune_generator", "distill_student"]:
        assert outputs[rule], rule
        for files in outputs[rule]:
            metrics = next(name for name in files if name.endswith("/metrics.json"))
            assert metrics.replace("/metrics.json", "/curves.parquet") in files, rule


@pytest.mark.parametrize(
    "override, message",
    [
        ("teacher_defaults={'learning_rate': 'fast', 'batch_size': 8, 'epochs': 1}", "'fast' is not of type 'number'"),
        ("teacher_defaults={'learning_rate': 1e-5, 'batch_size': 8, 'epochs': 1, 'epoch': 3}",
         "teacher_defaults: unknown key(s) 'epoch'; allowed: "),
        ("device=gpu", "'gpu' does not match"),
    ],
    ids=["wrong-type", "typo", "bad-device"],
)
def test_config_errors_name_the_key(override, message):
    result = snakemake("-n", "--config", override, check=False)
    assert result.returncode != 0
    assert message in result.stdout


def test_unknown_task_is_rejected():
    result = snakemake("-n", "--config", "teachers={'t': {'model': 'x', 'tasks': ['wnli']}}", check=False)
    assert result.returncode != 0 and "'wnli' is not one of" in result.stdout


# What depends on the demo's thesis students: both are probed on 3 tasks, analysed beside their teacher, and
# measured for thesis Table 5.2.
THESIS_STUDENTS_DOWNSTREAM = dict(encode_probing_tasks=2, probe_model=2 * 3, probing_table=1, figure_probing=1,
                                  analyse_predictions=1, figure_analysis=1, measure_inference=2, paper_table=1)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The demo, run once in a scratch copy of the repository."""
    workdir = copy_repo(tmp_path_factory.mktemp("demo") / "kdflow")
    result = snakemake(*DEMO, "--cores", "2", cwd=workdir)
    return workdir, result


@pytest.fixture
def demo_config(demo_run):
    """The demo run's config to edit, and a function that saves it; the original is restored after the test."""
    path = demo_run[0] / "demo/config.yaml"
    original = path.read_text()
    yield yaml.safe_load(original), lambda config: path.write_text(yaml.safe_dump(config))
    path.write_text(original)


@pytest.mark.slow
def test_demo_runs_the_whole_dag(demo_run):
    workdir, result = demo_run
    assert "100%) done" in result.stdout
    config = yaml.safe_load((workdir / "demo/config.yaml").read_text())
    tasks = config["teachers"]["tiny_bert"]["tasks"]
    table = (workdir / "results/tables/teachers.csv").read_text()
    for task in tasks:
        metrics = json.loads((workdir / f"results/teachers/tiny_bert/{task}/metrics.json").read_text())
        assert "dev" in metrics["scores"]
        heads = json.loads((workdir / f"results/pseudo_heads/tiny_bert/{task}/metrics.json").read_text())
        assert len(heads["layers"]) == config["teachers"]["tiny_bert"]["architecture"]["num_hidden_layers"]
        assert f"tiny_bert,{task},teacher" in table and f"tiny_bert,{task},pseudo_head" in table
    assert "# Pseudo-heads of tiny_bert" in (workdir / "results/tables/teachers.md").read_text()
    methods, students = set(), set()
    for name, experiment in config["experiments"].items():
        selection = json.loads((workdir / f"results/selection/{name}.json").read_text())
        chosen = {(s["student"], s["method"]) for s in selection["selections"]}
        assert chosen == {(st, m) for st in experiment["students"] for m in experiment["methods"]}, name
        assert f"# Experiment {name}" in (workdir / f"results/tables/experiments/{name}.md").read_text()
        methods |= {(spec or {}).get("method", entry) for entry, spec in experiment["methods"].items()}
        students |= {config["students"][student]["type"] for student in experiment["students"]}
        for selection in selection["selections"]:
            server_file = workdir / f"results/glue_submission/{name}/{selection['student']}/{selection['method']}"
            lines = (server_file / "SST-2.tsv").read_text().splitlines()
            assert lines[0] == "index\tprediction" and {line.split("\t")[1] for line in lines[1:]} <= {"0", "1"}
    hygiene = json.loads((workdir / "results/transfer/sst2/hygiene.json").read_text())
    assert hygiene["generated"] == config["generation"]["sampling"]["sentences"] and hygiene["kept"] > 0
    assert "Random generated examples" in (workdir / "results/transfer/sst2/statistics/tiny_bert.md").read_text()
    thesis_run = next((workdir / "results/students/thesis_table52").glob("sst2/*/*/*/seed0/metrics.json"))
    assert json.loads(thesis_run.read_text())["transfer"]["generated"] == hygiene["kept"]
    for job in [workdir / f"results/{job}" for job in ("teachers/tiny_bert/sst2", "pseudo_heads/tiny_bert/sst2",
                                                       "generators/sst2")] + [thesis_run.parent]:
        curves = pd.read_parquet(job / "curves.parquet")  # the learning curves of every kind of training job
        assert curves.to_dict("records") == json.loads((job / "metrics.json").read_text())["history"], job
        assert (curves.grad_norm_max > 0).all(), job
    assert methods == set(available_methods())  # the demo runs every method and every student type
    assert students == {"bert_k", "hf", "bilstm", "gated_cnn", "bilstm_s", "bert_s"}
    check_demo_evidence(workdir, config)
    assert planned_jobs(*DEMO, cwd=workdir) == Counter()  # a second run has nothing to do


def check_demo_evidence(workdir, config):
    """Probing, prediction analysis, paper tables, figures: every artifact of the demo's evidence stage."""
    probing = pd.read_csv(workdir / "results/tables/probing.csv")
    probes = probing[probing.kind == "probe"]
    assert set(probes.model) == set(config["probing"]["models"]) and set(probing.task) == set(config["probing"]["tasks"])
    assert set(probes[probes.model == "tiny_bert_sst2"].layer) == set(range(5))  # embeddings + 4 layers
    assert {"majority", "morphology"} <= set(probing.kind)
    analysis = json.loads((workdir / "results/analysis/sst2.json").read_text())
    assert analysis["models"] == ["tiny_bert_sst2", "lstm_s_sst2", "bert_s_sst2"] and analysis["n_examples"] > 0
    references = {kind: pd.read_csv(REPO / f"reference/{file}.csv", dtype={"table": str})
                  for kind, file in (("scores", "paper_results"), ("hyperparameters", "selected_hyperparameters"))}
    for name, spec in config["paper_tables"]["tables"].items():
        table = pd.read_csv(workdir / f"results/tables/papers/{name}.csv", dtype={"table": str})
        reference = references[spec.get("kind", "scores")]
        paper_rows = reference[(reference.source == spec["source"]) & (reference.table == str(spec["table"]))]
        assert len(table) == len(paper_rows), name  # a row for every paper row
        assert (workdir / f"results/tables/papers/{name}.tex").read_text().count("\\toprule") >= 1
        assert "—" in (workdir / f"results/tables/papers/{name}.md").read_text()  # kdflow lacks most cells
    ukd = pd.read_csv(workdir / "results/tables/papers/universal_kd_table2.csv")
    assert set(ukd[(ukd.task == "sst2") & ukd.method.isin(["pkd", "alp"])].kdflow_from) == {"alp_kd_table2"}
    selected = pd.read_csv(workdir / "results/tables/papers/universal_kd_table7.csv").query("task == 'sst2'")
    kdflow = selected.set_index("hyperparameter").kdflow  # the selected point of the demo's grid over beta
    defaults = config["student_defaults"]
    assert (kdflow.learning_rate, kdflow.batch_size) == (defaults["learning_rate"], defaults["batch_size"])
    assert kdflow.beta in (0.3, 0.7)
    thesis = pd.read_csv(workdir / "results/tables/papers/thesis_table52.csv")
    measured = thesis[(thesis.task == "sst2") & (thesis.metric == "params_millions_non_embedding")]
    assert measured.kdflow.notna().all() and (measured.kdflow > 0).all()
    for figure in ["pseudo_heads", "probing", "probing_relative_depth", "confidence_correlation_sst2",
                   "mistake_overlap_sst2", "attention_sst2"]:
        assert (workdir / f"results/figures/{figure}.png").read_bytes()[:4] == b"\x89PNG", figure
    attention = json.loads((workdir / "results/figures/attention_sst2.json").read_text())
    assert [record["method"] for record in attention] == ["universal_kd_il", "alp"]
    snakemake(*DEMO, "--report", "report.html", cwd=workdir)
    report = (workdir / "report.html").read_text()
    for category in ["Paper tables", "Universal-KD (Wu et al. 2021)", "Teachers", "Experiments", "Figure 3"]:
        assert category in report, category


@pytest.mark.slow
def test_changing_one_teacher_hyperparameter_reruns_exactly_its_jobs(demo_run, demo_config):
    workdir, _ = demo_run
    config, save = demo_config
    config["teachers"]["tiny_bert"]["task_hyperparameters"]["rte"] = {"learning_rate": 5.0e-4}
    save(config)
    result = snakemake("-n", *DEMO, cwd=workdir).stdout
    assert planned_jobs(*DEMO, cwd=workdir) == Counter(
        finetune_teacher=1, train_pseudo_heads=1, evaluate_pseudo_heads=1, teacher_table=1, figure_pseudo_heads=1,
        all=1,
    )
    assert re.search(r"rule finetune_teacher:\n(.*\n)*?\s+wildcards: teacher=tiny_bert, task=rte", result)
    assert "Params have changed since last execution" in result


@pytest.mark.slow
def test_changing_one_method_option_or_adding_a_seed_reruns_exactly_those_students(demo_run, demo_config):
    workdir, _ = demo_run
    config, save = demo_config
    config["experiments"]["alp_kd_table3"]["methods"]["pkd_1"]["mapping"] = [2]
    config["experiments"]["thesis_table52"]["seeds"].append(7)
    save(config)
    assert planned_jobs(*DEMO, cwd=workdir) == Counter(
        distill_student=1 + 2, select_students=2, glue_submission=2, paper_table=1, all=1  # alp_kd_table3's
    ) + Counter(THESIS_STUDENTS_DOWNSTREAM)


@pytest.mark.slow
def test_changing_the_sampling_reruns_the_transfer_set_and_only_the_students_learning_from_it(demo_run, demo_config):
    workdir, _ = demo_run
    config, save = demo_config
    config["generation"]["sampling"]["sentences"] += 10
    save(config)
    seeds = len(config["experiments"]["thesis_table52"]["seeds"])
    assert planned_jobs(*DEMO, cwd=workdir) == Counter(
        sample_transfer_shard=2, build_augmented_transfer_set=1, compute_teacher_signals=1, transfer_statistics=1,
        distill_student=2 * seeds, select_students=1, glue_submission=1, all=1, **THESIS_STUDENTS_DOWNSTREAM,
    )


@pytest.mark.slow
@pytest.mark.parametrize("edited", ["kdflow/distillation/methods/hidden_methods.py", "kdflow/students/recurrent.py",
                                    "kdflow/transfer/generation.py", "kdflow/reporting/figures.py"],
                         ids=["method", "student", "generator", "figures"])
def test_editing_code_reruns_exactly_the_jobs_that_run_it(demo_run, edited):
    """A code edit reruns the jobs whose scripts import the edited file, and what depends on them: the same plan
    as forcing those rules to run."""
    rules = [rule for rule, (script, _) in rule_scripts().items()
             if (REPO / edited).resolve() in script_closure(REPO / "scripts" / script)]
    assert rules
    workdir, _ = demo_run
    expected = planned_jobs(*DEMO, "--forcerun", *rules, cwd=workdir)
    path = workdir / edited
    original = path.read_text()
    path.write_text(original + "# edited\n")
    try:
        assert planned_jobs(*DEMO, cwd=workdir) == expected
    finally:
        path.write_text(original)
    assert planned_jobs(*DEMO, cwd=workdir) == Counter()


@pytest.mark.slow
def test_editing_raw_data_reruns_that_task_only(demo_run):
    workdir, _ = demo_run
    raw = workdir / "demo/data/glue/CoLA/dev.tsv"
    raw.write_text(raw.read_text().rstrip("\n") + "\nxx00\t1\t\tThe cat sat on the mat.\n")
    assert planned_jobs(*DEMO, cwd=workdir) == Counter(
        prepare_task=1, finetune_teacher=1, train_pseudo_heads=1, evaluate_pseudo_heads=1, teacher_table=1,
        figure_pseudo_heads=1, all=1,
    )
    snakemake(*DEMO, "--touch", "--cores", "1", cwd=workdir)


@pytest.mark.slow
def test_broken_data_fails_with_one_clear_line(tmp_path):
    workdir = copy_repo(tmp_path / "kdflow")
    train = workdir / "demo/data/glue/RTE/train.tsv"
    lines = train.read_text().splitlines(keepends=True)
    lines[5] = "\t".join(lines[5].split("\t")[:2]) + "\n"
    train.write_text("".join(lines))
    result = snakemake(*DEMO, "--cores", "1", "results/data/rte", cwd=workdir, check=False)
    assert result.returncode != 0
    log = (workdir / "logs/prepare_task/rte.log").read_text()
    assert "demo/data/glue/RTE/train.tsv:6: expected 4 tab-separated fields, found 2" in log
    assert "Traceback" not in log


def test_slurm_profile_dry_run_gives_gpu_rules_a_gpu():
    """`snakemake --profile slurm -n` from the repository root: GPU rules on the GPU partition with a GPU, CPU
    rules on the CPU partition without; many short jobs in group jobs, never GPU and CPU jobs together."""
    takd_student = "results/students/universal_kd_table4/rte/distilroberta/takd/bs32_beta0.5_lr2e-05/seed1/metrics.json"
    targets = ["results/tables/teachers.csv", "results/selection/thesis_table52_lstm_s.json", takd_student,
               "results/probing/scores/bert_large/Length.json", "results/inference/bert_large_cola.json"]
    result = snakemake("-n", "--profile", "slurm", *targets)
    jobs = re.findall(r"\n *rule (\w+):\n(?:.*\n)*? +resources: (.*)\n", result.stdout)  # group members indented
    assert Counter(rule for rule, _ in jobs) == Counter(
        prepare_task=9, finetune_teacher=19, train_pseudo_heads=19, evaluate_pseudo_heads=19, teacher_table=1,
        compute_teacher_signals=3 + 1, distill_student=9 + 2, compute_assistant_signals=1, select_students=1,
        finetune_generator=3, sample_transfer_shard=120, build_augmented_transfer_set=3,
        download_probing_task=10, encode_probing_tasks=1, probe_model=1, measure_inference=1,
    )
    gpu_rules = ("finetune_teacher", "train_pseudo_heads", "evaluate_pseudo_heads", "compute_teacher_signals",
                 "distill_student", "compute_assistant_signals", "finetune_generator", "sample_transfer_shard", "encode_probing_tasks",
                 "probe_model")
    for rule, resources in jobs:
        on_gpu = rule in gpu_rules
        assert ("gpu=1" in resources) == on_gpu, (rule, resources)
        assert f"slurm_partition={'gpu' if on_gpu else 'cpu'}" in resources
        assert "slurm_account=" in resources and "runtime=" in resources and "mem_mb=" in resources
    # Students in twos per experiment, task, student and method (three seeds of lstm_s on 3 tasks; the TAKD
    # student and its assistant), each model's probes, an experiment's selection, the tables.
    groups = group_members(result.stdout)
    assert Counter(group.split("_")[0] for group, _ in groups) == Counter(
        students=3 * 2 + 2, probes=1, selection=1, summaries=1
    )
    assert {(group.split("_")[0], rule) for group, rules in groups for rule in rules} == {
        ("students", "distill_student"), ("probes", "probe_model"), ("selection", "select_students"),
        ("summaries", "teacher_table"),
    }


def group_members(dry_run_output):
    """The group jobs of a dry run, each as (group id, the rules of its jobs)."""
    groups = []
    for line in dry_run_output.splitlines():
        if group := re.search(r"Group job (\w+) ", line):
            groups.append((group[1], set()))
        elif member := re.match(r" +rule (\w+):", line):
            groups[-1][1].add(member[1])
    return groups
