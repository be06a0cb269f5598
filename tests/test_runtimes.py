"""Thesis Table 4.5: which jobs make up each step of the thesis's pipeline (kdflow.workflow.runtime_jobs) and the table
summing their Snakemake benchmark files beside the thesis's hours (kdflow.reporting.runtime_table)."""

import copy

import pandas as pd
import pytest
import yaml
from conftest import REPO

from kdflow.reporting.runtime_table import read_benchmark, runtime_table, write_runtime_table
from kdflow.workflow import results_paths as paths
from kdflow.workflow.config_checks import check_references
from kdflow.workflow.runtime_jobs import runtime_jobs

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


@pytest.fixture(scope="module")
def demo_config():
    return yaml.safe_load((REPO / "demo/config.yaml").read_text())


def test_the_demos_sst2_pipeline_step_by_step(demo_config):
    """Teacher tiny_bert on SST-2, two sampling shards, and the thesis experiment's two students at one grid point
    and two seeds each: every job up to the students, in the order data flows."""
    jobs = [(job["step"], job["rule"], job["run"], job["benchmark"]) for job in runtime_jobs(demo_config)]
    student = paths.benchmark("distill_student/thesis_table52/sst2/{}/mse_logits/default/seed{}")
    assert jobs == [
        ("data_preparation", "prepare_task", "", paths.benchmark("prepare_task/sst2")),
        ("teacher_finetuning", "finetune_teacher", "", paths.benchmark("finetune_teacher/tiny_bert/sst2")),
        ("pseudo_heads", "train_pseudo_heads", "", paths.benchmark("train_pseudo_heads/tiny_bert/sst2")),
        ("gpt2_finetuning", "finetune_generator", "", paths.benchmark("finetune_generator/sst2")),
        ("augmentation_sampling", "sample_transfer_shard", "", paths.benchmark("sample_transfer_shard/sst2/0")),
        ("augmentation_sampling", "sample_transfer_shard", "", paths.benchmark("sample_transfer_shard/sst2/1")),
        ("transfer_set_assembly", "build_transfer_set", "", paths.benchmark("build_transfer_set/sst2/augmented")),
        ("teacher_logits", "compute_teacher_signals", "",
         paths.benchmark("compute_teacher_signals/tiny_bert/sst2/augmented")),
        *(("bert_student_training", "distill_student", f"mse_logits/default/seed{seed}", student.format("bert_s", seed))
          for seed in (0, 1)),
        *(("lstm_student_training", "distill_student", f"mse_logits/default/seed{seed}", student.format("lstm_s", seed))
          for seed in (0, 1)),
    ]
    assert {job["task"] for job in runtime_jobs(demo_config)} == {"sst2"}


def test_reordering_the_configs_mappings_changes_no_job(demo_config):
    """The jobs are the table rule's params: a config saved with sorted keys must not rerun it."""
    reordered = copy.deepcopy(demo_config)
    students = reordered["runtime_table"]["students"]
    reordered["runtime_table"]["students"] = dict(reversed(students.items()))
    reordered["experiments"]["thesis_table52"]["seeds"] = [1, 0]
    assert runtime_jobs(reordered) == runtime_jobs(demo_config)


@pytest.mark.parametrize("edit, problem", [
    (lambda c: c["runtime_table"].update(tasks=["cola", "mrpc"]),
     "runtime_table.tasks: teacher 'bert_large' is not trained on ['mrpc']"),
    (lambda c: c["runtime_table"]["students"]["bert_student_training"].update(experiment="universal_kd_table2"),
     "runtime_table.students.bert_student_training: experiment 'universal_kd_table2' distils 'bert_base', not "
     "'bert_large'"),
    (lambda c: c["runtime_table"]["students"]["lstm_student_training"].update(student="bert_s"),
     "runtime_table.students.lstm_student_training: experiment 'thesis_table52_lstm_s' has no student 'bert_s'"),
], ids=["task", "teacher", "student"])
def test_a_runtime_table_naming_jobs_outside_the_dag_is_rejected(edit, problem):
    config = copy.deepcopy(yaml.safe_load((REPO / "config.yaml").read_text()))
    edit(config)
    with pytest.raises(ValueError, match="invalid config") as error:
        check_references(config)
    assert problem in str(error.value)


def write_benchmark(path, *rows):
    """A Snakemake benchmark file: one row per (seconds, max_rss in MB or "-")."""
    path.write_text(HEADER + "".join(f"{s}\t0:00:00\t{rss}\t1.0\t1.0\t1.0\t0.0\t0.0\t50.0\t{s}\n" for s, rss in rows))
    return path


@pytest.fixture
def measured(tmp_path):
    """Hand-made benchmarks of seven SST-2 jobs: the teacher (30 min), two sampling shards (1 h and 2 h; the
    second benchmarked twice with `repeat`, 7,000 and 7,400 s), two LSTM_S seeds (1 h and 1.5 h) and data
    preparation (36 s, too short for a memory sample)."""
    jobs = [("data_preparation", "prepare_task", "", [(36, "-")]),
            ("teacher_finetuning", "finetune_teacher", "", [(1800, 2048)]),
            ("augmentation_sampling", "sample_transfer_shard", "", [(3600, 1024)]),
            ("augmentation_sampling", "sample_transfer_shard", "", [(7000, 3072), (7400, 4096)]),
            ("lstm_student_training", "distill_student", "mse_logits/default/seed1", [(3600, 512)]),
            ("lstm_student_training", "distill_student", "mse_logits/default/seed2", [(5400, 512)])]
    files = [write_benchmark(tmp_path / f"{number}.tsv", *rows) for number, (*_, rows) in enumerate(jobs)]
    return ([dict(step=step, task="sst2", rule=rule, run=run) for step, rule, run, _ in jobs],
            [read_benchmark(path) for path in files])


def test_a_steps_hours_are_summed_over_its_jobs_and_divided_by_its_runs(measured):
    reference = pd.read_csv(REPO / "reference/thesis_runtimes.csv")
    table = runtime_table(reference, *measured)
    rows = table.set_index(["step", "task"])
    sampling = rows.loc["augmentation_sampling", "sst2"]
    assert (sampling.kdflow_jobs, sampling.kdflow_runs) == (2, 1)
    assert sampling.kdflow_hours == sampling.kdflow_hours_per_run == pytest.approx(3.0)  # 1 h + 7,200 s
    assert sampling.kdflow_longest_job_hours == pytest.approx(2.0)
    assert sampling.kdflow_peak_rss_gb == pytest.approx(4.0)
    assert (sampling.thesis_hours, sampling.thesis_hardware) == (15, "4 GPUs in parallel (6GB each)")
    lstm = rows.loc["lstm_student_training", "sst2"]
    assert (lstm.kdflow_jobs, lstm.kdflow_runs, lstm.kdflow_rule) == (2, 2, "distill_student")
    assert (lstm.kdflow_hours, lstm.kdflow_hours_per_run, lstm.thesis_hours) == (pytest.approx(2.5), 1.25, 8)
    assert rows.loc["teacher_finetuning", "sst2"].kdflow_hours == pytest.approx(0.5)
    preparation = rows.loc["data_preparation", "sst2"]
    assert preparation.kdflow_hours == pytest.approx(0.01) and pd.isna(preparation.kdflow_peak_rss_gb)
    assert pd.isna(preparation.thesis_hours)  # kdflow's own step
    # Every thesis row is there, kdflow's empty where it has no job; tasks in the thesis's order.
    assert len(table) == len(reference) + 1
    assert pd.isna(rows.loc["teacher_finetuning", "cola"].kdflow_hours)
    assert list(dict.fromkeys(table.step)) == ["data_preparation", "teacher_finetuning", "gpt2_finetuning",
                                               "augmentation_sampling", "teacher_logits", "lstm_student_training",
                                               "bert_student_training"]  # the pipeline's order, then the thesis's
    assert list(table[table.step == "teacher_finetuning"].task) == ["cola", "sst2", "sara"]


def test_the_runtime_pages_show_kdflow_beside_the_thesis(measured, tmp_path):
    table = runtime_table(pd.read_csv(REPO / "reference/thesis_runtimes.csv"), *measured)
    pages = [tmp_path / f"runtimes.{suffix}" for suffix in ("csv", "md", "tex", "html")]
    write_runtime_table(table, *pages)
    assert pd.read_csv(pages[0]).shape == table.shape
    markdown = pages[1].read_text()
    assert "| lstm_student_training | distill_student | 1x GTX TITAN X or RTX 2080 Ti | — (5) | 1.25 (8) | — (6) |" \
        in markdown
    assert "| data_preparation | prepare_task | — |  | 0.01 (—) |  |" in markdown  # kdflow's own step
    assert r"\toprule" in pages[2].read_text() and "1.25 (8)" in pages[3].read_text()
    with pytest.raises(ValueError, match="6 jobs but 5 benchmarks"):
        runtime_table(pd.read_csv(REPO / "reference/thesis_runtimes.csv"), measured[0], measured[1][:5])


def test_a_job_measures_its_own_cpu_time_and_the_tables_read_it_over_snakemakes_sample(tmp_path, monkeypatch):
    """Snakemake's benchmark samples a job's CPU (0.5 s apart, then 30 s) and misses what a loaded machine delays;
    a rule script's own getrusage at its end misses nothing, and read_benchmark takes it where it exists."""
    from types import SimpleNamespace

    from kdflow.core.job_setup import rule_job

    monkeypatch.chdir(tmp_path)
    job = "distill_student/e/sst2/bilstm/kd/default/seed0"
    benchmark = tmp_path / paths.benchmark(job)
    benchmark.parent.mkdir(parents=True)
    benchmark.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
                         "3.0\t0:00:03\t100\t200\t90\t95\t0\t0\t50\t0.5\n")
    assert read_benchmark(benchmark)["cpu_measured"] == "sampled" and read_benchmark(benchmark)["cpu_seconds"] == 0.5
    usage = paths.job_usage(benchmark)
    usage.write_text('{"cpu_seconds": 99}')  # a stale attempt's: the next attempt removes it first
    snakemake = SimpleNamespace(log=[f"logs/{job}.log"], threads=1, input=[], rule="distill_student",
                                resources={})
    import resource

    def process_cpu() -> float:  # the test's process is the job's here: its CPU so far counts too
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    before = process_cpu()
    with rule_job(snakemake):
        assert not usage.exists()
        sum(i * i for i in range(2_000_000))  # some CPU
    measured = read_benchmark(benchmark)
    assert measured["cpu_measured"] == "job" and measured["cpu_seconds"] >= before + 0.05
    assert measured["cpu_seconds"] <= process_cpu() + 0.01
    assert measured["seconds"] == 3.0  # the wall clock stays Snakemake's
