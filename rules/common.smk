# Config validation, wildcard constraints and the helpers that turn the config into job settings.
import os
import sys

from snakemake.utils import validate

# This file and the rule scripts (child processes, here or on a cluster node) import the kdflow package
# from this repository, whether or not it is installed in the job's environment.
sys.path.insert(0, workflow.basedir)
os.environ.update(
    PYTHONPATH=os.pathsep.join(
        filter(None, [workflow.basedir, os.getenv("PYTHONPATH")])
    )
)

from kdflow.config import (
    canonical,
    pseudo_head_settings,
    teacher_jobs,
    teacher_settings,
)
from kdflow.provenance import code_fingerprint
from kdflow.tasks import TASKS

validate(config, schema="../schemas/config.schema.yaml")


wildcard_constraints:
    task="|".join(TASKS),
    teacher="|".join(config["teachers"]),


def raw_task_files(wildcards):
    """The raw files of a task that exist, so that editing them reruns ingestion. Missing files are
    reported by the ingestion script itself, with the path it looked for (dry runs stay possible).
    """
    directory = task_source_dir(wildcards.task)
    if directory is None or not os.path.isdir(directory):
        return []
    return sorted(
        os.path.join(directory, name)
        for name in os.listdir(directory)
        if name.endswith(".tsv")
    )


def task_source_dir(task):
    """Where a task's raw files live, or None to download it from the Hugging Face hub."""
    if TASKS[task].source == "sara":
        return config["data"]["sara_dir"]
    root = config["data"].get("glue_dir")
    return None if root is None else os.path.join(root, TASKS[task].tsv_dir)


def source_dir_param(wildcards):
    return task_source_dir(wildcards.task)


def teacher_params(wildcards):
    return teacher_settings(config, wildcards.teacher, wildcards.task)


def heads_params(wildcards):
    return {
        **pseudo_head_settings(config, wildcards.teacher),
        "max_seq_length": teacher_params(wildcards)["hyperparameters"][
            "max_seq_length"
        ],
    }


def teacher_resource(name):
    """A resource of the teacher's job from the config; memory and time grow with each retry."""

    def resource(wildcards, attempt):
        value = config["teachers"][wildcards.teacher].get("resources", {}).get(name)
        value = value if value is not None else config["resources"][name]
        return value * attempt if name in ("mem_mb", "runtime") else value

    return resource


def all_targets():
    return [
        "results/tables/teachers.csv",
        "results/tables/teachers.md",
        *expand(
            "results/pseudo_heads/{pair[0]}/{pair[1]}/metrics.json",
            pair=teacher_jobs(config),
        ),
    ]
