"""Thesis Table 4.5 (Sučík 2020, §4.4), the planning side: which jobs make up each step of the thesis's pipeline,
and where Snakemake writes their benchmarks.

Every rule that runs code declares ``benchmark:`` at its log's path with ``results/benchmarks/`` for ``logs/`` and
``.tsv`` for ``.log`` (:func:`benchmark_file`): Snakemake writes there the job's wall-clock seconds, peak memory and
CPU time. The config's ``runtime_table`` names the thesis's teacher, tasks and student runs; :func:`runtime_jobs`
lists every job of the pipeline that leads to those students, each with the step of Table 4.5 it belongs to
(:mod:`kdflow.reporting.runtime_table` sums them).
"""

from __future__ import annotations

from kdflow.workflow.job_settings import augmented_jobs, student_jobs, transfer_of
from kdflow.workflow.results_paths import benchmark

# Steps in the order data flows, named as reference/thesis_runtimes.csv names the thesis's; kdflow's own steps (data
# preparation, Universal-KD's pseudo-heads, which every teacher's signals include, and merging the generated shards
# into the transfer set) have no thesis time. The student-training steps follow, named by the config (the table
# shows them in the reference's order).
PIPELINE_STEPS = ("data_preparation", "teacher_finetuning", "pseudo_heads", "gpt2_finetuning", "augmentation_sampling",
                  "transfer_set_assembly", "teacher_logits")


def benchmark_file(rule: str, *wildcards) -> str:
    """Where the job of ``rule`` with these wildcard values (in its log path's order) writes its benchmark."""
    return benchmark("/".join([rule, *map(str, wildcards)]))


def runtime_jobs(config: dict) -> list[dict]:
    """Every job of Table 4.5's pipeline for the ``runtime_table`` section's teacher and tasks, step by step (tasks
    in the section's order): its ``step``, ``task``, ``rule``, ``run`` (which repetition of the step it belongs to:
    a student's grid point and seed, since the thesis timed one run; empty for the other steps, whose jobs together
    make one run, e.g. a task's sampling shards) and ``benchmark`` file. Student steps and runs are sorted by name:
    reordering the config (its mappings) must not change the list, a rule's params."""
    spec = config["runtime_table"]
    jobs = [dict(step=step, task=task, rule=rule, run="", benchmark=benchmark_file(rule, *wildcards))
            for task in spec["tasks"] for step, rule, wildcards in _pipeline_jobs(config, task)]
    jobs.sort(key=lambda job: PIPELINE_STEPS.index(job["step"]))  # stable: tasks stay in order within a step
    students = student_jobs(config)
    for step, run_of in sorted(spec["students"].items()):
        for task in spec["tasks"]:
            runs = sorted((job["method"], job["point"], f"seed{job['seed']}") for job in students
                          if (job["experiment"], job["task"], job["student"]) == (run_of["experiment"], task,
                                                                                 run_of["student"]))
            jobs += [dict(step=step, task=task, rule="distill_student", run="/".join(run),
                          benchmark=benchmark_file("distill_student", run_of["experiment"], task, run_of["student"],
                                                   *run))
                     for run in runs]
    return jobs


def _pipeline_jobs(config: dict, task: str):
    """(step, rule, wildcard values) of each job that precedes the students on ``task``."""
    spec = config["runtime_table"]
    teacher = spec["teacher"]
    yield "data_preparation", "prepare_task", (task,)
    yield "teacher_finetuning", "finetune_teacher", (teacher, task)
    yield "pseudo_heads", "train_pseudo_heads", (teacher, task)
    if (teacher, task) in augmented_jobs(config):
        yield "gpt2_finetuning", "finetune_generator", (task,)
        for shard in range(config["generation"]["sampling"]["shards"]):
            yield "augmentation_sampling", "sample_transfer_shard", (task, shard)
        yield "transfer_set_assembly", "build_transfer_set", (task, "augmented")
    experiments = [config["experiments"][run_of["experiment"]] for run_of in spec["students"].values()]
    for transfer in sorted({transfer_of(e) for e in experiments if task in e["tasks"]}):
        yield "teacher_logits", "compute_teacher_signals", (teacher, task, transfer)
