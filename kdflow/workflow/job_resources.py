"""A job's threads and resources, read from the config by the rules: the ``resources`` of the job's config section
(``teachers.<teacher>``, ``experiments.<experiment>``, ``generation``, ``probing``) over the config's top-level
``resources``; memory and time grow with each retry (the SLURM profile's ``retries``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

GROWING = ("mem_mb", "runtime")  # resources a retry multiplies by its attempt number


def configured_resource(config: Mapping, name: str, section: str) -> Callable:
    """Resource ``name`` of a job, as the function of its wildcards and attempt that Snakemake calls; ``section``
    is a key path with wildcards, e.g. ``teachers.{teacher}``."""

    def resource(wildcards, attempt):
        node = config
        for key in section.format(**dict(wildcards.items())).split("."):
            node = node[key]
        value = node.get("resources", {}).get(name)
        value = value if value is not None else config["resources"][name]
        return value * attempt if name in GROWING else value

    return resource


def configured_resources(config: Mapping, section: str, one_process: bool = False) -> dict[str, Callable]:
    """A model job's ``gpu``, ``mem_mb`` and ``runtime`` (:func:`configured_resource`). With ``one_process``, at
    most one GPU: of a teacher's jobs only fine-tuning uses several (kdflow.training.parallel); a job that runs in
    one process would hold the rest idle."""
    gpu = configured_resource(config, "gpu", section)
    return {
        "gpu": (lambda wildcards, attempt: min(1, gpu(wildcards, attempt))) if one_process else gpu,
        "mem_mb": configured_resource(config, "mem_mb", section),
        "runtime": configured_resource(config, "runtime", section),
    }
