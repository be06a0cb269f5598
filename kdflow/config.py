"""Resolve the workflow config into the settings of one job.

The Snakefile passes these resolved dictionaries to rules as ``params``: Snakemake reruns a job when its params
change, so editing one task's teacher hyperparameters reruns exactly that teacher and what depends on it.
Keys are sorted so that merely reordering the config file changes no params and reruns nothing.
"""

from __future__ import annotations

from kdflow.tasks import get_task


def canonical(value):
    """``value`` with every mapping's keys sorted, recursively."""
    if isinstance(value, dict):
        return {key: canonical(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [canonical(item) for item in value]
    return value


def teacher_settings(config: dict, teacher: str, task: str) -> dict:
    """Model spec and hyperparameters of ``teacher`` on ``task``: defaults < teacher's < teacher's per-task."""
    spec = config["teachers"][teacher]
    get_task(task)
    hyperparameters = {
        **config["teacher_defaults"],
        **spec.get("hyperparameters", {}),
        **spec.get("task_hyperparameters", {}).get(task, {}),
    }
    model = {key: spec[key] for key in ("model", "architecture", "tokenizer") if spec.get(key) is not None}
    return canonical({"spec": model, "hyperparameters": hyperparameters})


def pseudo_head_settings(config: dict, teacher: str) -> dict:
    return canonical({**config["pseudo_heads"], **config["teachers"][teacher].get("pseudo_heads", {})})


def teacher_jobs(config: dict) -> list[tuple[str, str]]:
    """Every (teacher, task) pair the config asks for, in config order."""
    return [(name, task) for name, spec in config["teachers"].items() for task in spec["tasks"]]

