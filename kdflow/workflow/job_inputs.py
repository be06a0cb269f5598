"""What each job reads, from the config and its wildcards: the files the rules of teachers, transfer and
distillation (rules/*.smk) take as ``input``, and the student runs' files that selection and the reports read.
What a job runs with is :mod:`kdflow.workflow.job_settings`; the named models' inputs are
:mod:`kdflow.workflow.model_inputs`.
"""

from __future__ import annotations

import os

from kdflow.core import run_files
from kdflow.core.io import input_files
from kdflow.core.tasks import get_task
from kdflow.workflow.job_settings import (
    TRANSFER_SOURCES,
    assistant_run,
    experiment_runs,
    student_settings,
    transfer_of,
)
from kdflow.workflow.results_paths import (
    ASSISTANT_SIGNALS,
    DATA,
    PSEUDO_HEADS,
    SIGNALS,
    STUDENT_RUN_DIR,
    TEACHER_MODEL,
    TRANSFER_SET,
    TRANSFER_SHARD,
)


def student_run_file(name: str, **run) -> str:
    """File ``name`` of one student run, ``run`` being its experiment, task, student, method, point (of the
    grid) and seed: one directory per grid point and seed, below the directory of the student and method's runs
    (what a named student model selects among; :mod:`kdflow.workflow.results_paths`)."""
    return f"{STUDENT_RUN_DIR}/{{name}}".format(name=name, **run)


def experiment_run_files(config: dict, experiment: str, name: str = run_files.METRICS) -> list[str]:
    """File ``name`` of every student run of the experiment."""
    return [student_run_file(name, experiment=experiment, **run) for run in experiment_runs(config, experiment)]


def selection_inputs(config: dict, experiment: str) -> dict[str, list[str]]:
    """What rule select_students reads: every run's metrics and, where the experiment tests its methods against a
    baseline (``compare_to``), every run's predictions (the test resamples the dev examples)."""
    inputs = {"metrics": experiment_run_files(config, experiment)}
    if config["experiments"][experiment].get("compare_to"):
        inputs["predictions"] = experiment_run_files(config, experiment, run_files.PREDICTIONS)
    return inputs


# What the rules of teachers, transfer and distillation read, from their wildcards (rules/*.smk).


def task_source_dir(config: dict, task: str) -> str | None:
    """Where a task's raw files live, or None to download it from the Hugging Face hub."""
    if get_task(task).source == "sara":
        return config["data"]["sara_dir"]
    root = config["data"].get("glue_dir")
    return None if root is None else os.path.join(root, get_task(task).tsv_dir)


def raw_task_files(config: dict, task: str) -> list[str]:
    """A task's raw files that exist, so that editing them reruns ingestion; missing ones are reported by the
    ingestion itself, with the path it looked for (dry runs stay possible)."""
    directory = task_source_dir(config, task)
    names = sorted(os.listdir(directory)) if directory and os.path.isdir(directory) else []
    return [os.path.join(directory, name) for name in names if name.endswith(".tsv")]


def unlabelled_files(config: dict, task: str) -> list[str]:
    """The files of ``task``'s unlabelled-text source (a file, or a directory's visible files by name)."""
    return [str(path) for path in input_files(config["unlabelled"]["files"][task], "unlabelled-text")]


def transfer_set_file(transfer: str | None, task: str) -> dict[str, str]:
    """The file a transfer set adds beyond the prepared task (the built set's merged examples): none for ``train``."""
    return {"transfer": TRANSFER_SET.format(task=task, transfer=transfer)} if transfer not in (None, "train") else {}


def transfer_set_inputs(config: dict, transfer: str, task: str) -> dict:
    """The prepared task and the sources of its transfer set (:data:`TRANSFER_SOURCES`)."""
    sources = TRANSFER_SOURCES[transfer]
    inputs = {"data": DATA.format(task=task)}
    if "generated" in sources:
        inputs["shards"] = [TRANSFER_SHARD.format(task=task, shard=shard)
                            for shard in range(config["generation"]["sampling"]["shards"])]
    if "unlabelled" in sources:
        inputs["unlabelled"] = unlabelled_files(config, task)
    return inputs


def teacher_signal_inputs(teacher: str, task: str, transfer: str) -> dict[str, str]:
    return {"data": DATA.format(task=task), "model": TEACHER_MODEL.format(teacher=teacher, task=task),
            "heads": PSEUDO_HEADS.format(teacher=teacher, task=task), **transfer_set_file(transfer, task)}


def student_inputs(config: dict, experiment: str, task: str, student: str, method: str, point: str,
                   seed) -> dict:
    """Data, teacher, the signals the student learns from (the teacher's, or TAKD's assistant's) and the
    word-vectors file it reads, if any: a missing file stops the plan, not a job."""
    spec = config["experiments"][experiment]
    assistant = assistant_run(config, experiment, task, method, point, seed)
    transfer = transfer_of(spec)
    settings = student_settings(config, experiment, task, student, method, point, seed)
    vectors = (settings["student"].get("embeddings") or {}).get("path")
    if assistant is None:
        signals = SIGNALS.format(teacher=spec["teacher"], task=task, transfer=transfer)
    else:
        signals = ASSISTANT_SIGNALS.format(experiment=experiment, task=task, **assistant)
    return {"data": DATA.format(task=task), "teacher": TEACHER_MODEL.format(teacher=spec["teacher"], task=task),
            "signals": signals, **transfer_set_file(transfer, task), **({"vectors": vectors} if vectors else {})}
