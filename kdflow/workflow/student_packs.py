"""Students trained in packs (issue 66): which student runs of the DAG train together, as one computation in one job
(rule ``distill_pack``, :func:`kdflow.distillation.distill.distill_pack`).

A pack holds runs of one experiment, task, student and method that read the same inputs and whose settings differ in
seed, learning rate, weight decay (:data:`kdflow.core.hyperparameters.PACK_VARIES`) and the method's loss weights
(:data:`~kdflow.core.hyperparameters.PACK_WEIGHTS`, the same of them zero) alone: at most the config's
``student_packs[<student type>]`` of them, in the order of the experiment's grid (point, then seed). Runs that cannot
join one train alone, as every run does without ``student_packs``: a method that learns from its own assistant's
signals (TAKD), a word-level student whose vocabulary its own training subset draws, an optimiser other than AdamW,
gradient accumulation, or fp16 (whose loss scaling a pack has not).

The pack job writes each member's files into its own folder of the pack's; the member's ``distill_student`` job then
takes them from there (a hard link), so that every student's outputs stay where a student trained alone leaves them,
and a target asks for them as before. A change of one member's settings changes its pack's params: that pack trains
again, and the other packs do not.
"""

from __future__ import annotations

import json
from itertools import groupby

from kdflow.core.errors import UserError
from kdflow.core.hyperparameters import PACK_VARIES, PACK_WEIGHTS
from kdflow.workflow.catalog_cache import load_catalog
from kdflow.workflow.job_inputs import student_inputs
from kdflow.workflow.job_settings import student_jobs, student_settings
from kdflow.workflow.results_paths import STUDENT_METHOD_DIR, STUDENT_PACK_DIR, STUDENT_RUN_DIR

_CACHE: dict[int, tuple[dict, dict]] = {}  # id(config) -> (config, its packs): Snakemake asks for each job's
_INDEX: dict[int, tuple[dict, dict]] = {}  # id(config) -> (config, each packed run's pack folder)


def student_packs(config: dict) -> dict[tuple[str, str, str, str, str, int], list[dict]]:
    """Every pack of the config: (experiment, task, student, method, pack number) -> its members (point, seed, folder
    in the pack's and settings), in the grid's order; runs that train alone are in none."""
    cached = _CACHE.get(id(config))
    if cached is not None and cached[0] is config:
        return cached[1]
    sizes = pack_sizes(config)
    catalog = load_catalog() if sizes else None
    candidates = []
    for run in student_jobs(config):
        spec = config["students"][run["student"]]
        size = sizes.get(spec["type"], 1)
        if size < 2:
            continue
        settings = student_settings(config, **run)
        if packable(settings, config, catalog):
            shared = {**settings, "hyperparameters": {k: v for k, v in settings["hyperparameters"].items()
                                                      if k not in PACK_VARIES},
                      "method_options": {k: v for k, v in settings["method_options"].items() if k not in PACK_WEIGHTS},
                      "weighed_terms": weighed_terms(settings, catalog)}
            inputs = student_inputs(config, **run)
            key = (run["experiment"], run["task"], run["student"], run["method"])
            candidates.append((key, json.dumps([shared, inputs], sort_keys=True, default=str), size, run, settings))
    packs = {}
    for key, runs in groupby(candidates, key=lambda c: c[0]):
        number = 0
        for _, group in groupby(sorted(runs, key=lambda c: c[1]), key=lambda c: c[1]):
            members = list(group)
            size = members[0][2]
            for start in range(0, len(members), size):
                chunk = members[start:start + size]
                if len(chunk) > 1:  # a run alone needs no pack
                    packs[(*key, number)] = [{"point": run["point"], "seed": int(run["seed"]),
                                              "folder": member_dir(run["point"], run["seed"]), "settings": settings}
                                             for _, _, _, run, settings in chunk]
                    number += 1
    _CACHE[id(config)] = (config, packs)
    return packs


def pack_sizes(config: dict) -> dict[str, int]:
    """The config's ``student_packs``: student type -> the most members a pack of its runs takes."""
    sizes = config.get("student_packs") or {}
    types = {spec["type"] for spec in config.get("students", {}).values()}
    unknown = sorted(set(sizes) - types)
    if unknown:
        raise UserError(f"student_packs names no student type of the config: {', '.join(unknown)} (its types: "
                        f"{', '.join(sorted(types))})")
    return sizes


def packable(settings: dict, config: dict, catalog: dict) -> bool:
    """Whether a run of ``settings`` can train in a pack (the module says which cannot); ``catalog``: the registered
    methods and students (:func:`kdflow.workflow.catalog_cache.load_catalog`)."""
    hp, student = settings["hyperparameters"], settings["student"]
    reads_words = {**catalog["students"][student["type"]]["defaults"], **student}.get("tokens") == "words"
    return (not catalog["methods"][settings["method"]]["learns_from_assistant"]
            and hp.get("optimizer", "adamw") == "adamw" and hp.get("gradient_accumulation_steps", 1) == 1
            and config.get("precision") != "fp16" and not (reads_words and hp.get("max_train_examples") is not None))


def weighed_terms(settings: dict, catalog: dict) -> list[bool]:
    """Which of a run's loss weights are not zero, its method's defaults and complements resolved (as
    kdflow.distillation.methods.registry.Method resolves them): the terms its loss computes."""
    method = catalog["methods"][settings["method"]]
    options = {**method["defaults"], **settings["method_options"]}
    for weight, other in method["complement"].items():
        if options.get(weight) is None:
            options[weight] = 1.0 - options[other]
    return [bool(options.get(weight) or 0.0) for weight in PACK_WEIGHTS]


def pack_of(config: dict, experiment: str, task: str, student: str, method: str, point: str, seed) -> str | None:
    """The folder of the pack that trains this run, None if it trains alone."""
    return _member_index(config).get((experiment, task, student, method, point, int(seed)))


def pack_members(config: dict, experiment: str, task: str, student: str, method: str, pack) -> list[dict]:
    members = student_packs(config).get((experiment, task, student, method, int(pack)))
    if members is None:
        raise UserError(f"no pack {pack} of {experiment}/{task}/{student}/{method} in the config's student_packs")
    return members


def pack_inputs(config: dict, experiment: str, task: str, student: str, method: str, pack) -> dict:
    """What a pack's members learn from: the same files for each (its first member's)."""
    first = pack_members(config, experiment, task, student, method, pack)[0]
    return student_inputs(config, experiment, task, student, method, first["point"], first["seed"])


def pack_dir(experiment: str, task: str, student: str, method: str, number: int) -> str:
    return STUDENT_PACK_DIR.format(experiment=experiment, task=task, student=student, method=method, pack=number)


def member_dir(point: str, seed) -> str:
    """A member's folder inside its pack's: its run's folder, relative to its method's."""
    return STUDENT_RUN_DIR.removeprefix(f"{STUDENT_METHOD_DIR}/").format(point=point, seed=seed)


def _member_index(config: dict) -> dict[tuple, str]:
    """(experiment, task, student, method, point, seed) -> its pack's folder, for every packed run: Snakemake asks for
    each student job's, four times a job."""
    cached = _INDEX.get(id(config))
    if cached is not None and cached[0] is config:
        return cached[1]
    index = {(*key[:4], member["point"], member["seed"]): pack_dir(*key)
             for key, members in student_packs(config).items() for member in members}
    _INDEX[id(config)] = (config, index)
    return index


def distill_inputs(config: dict, experiment: str, task: str, student: str, method: str, point: str, seed) -> dict:
    """A ``distill_student`` job's inputs: what its student learns from, and its pack's folder where a pack trains
    it (the job then takes its files from there)."""
    inputs = student_inputs(config, experiment, task, student, method, point, seed)
    pack = pack_of(config, experiment, task, student, method, point, seed)
    return {**inputs, "pack": pack} if pack else inputs


def unless_packed(config: dict, resource, value):
    """A ``distill_student`` job's ``resource`` (a function of its wildcards and attempt), or ``value`` where the job
    only takes its files from its pack."""

    def job_resource(wildcards, attempt):
        w = wildcards
        if pack_of(config, w.experiment, w.task, w.student, w.method, w.point, w.seed):
            return value
        return resource(wildcards, attempt)

    return job_resource


def pack_runtime(config: dict, runtime):
    """A pack job's runtime: K times one of its students' (``runtime``, a function of the wildcards and attempt), a
    bound that holds on a CPU, which trains the members' arithmetic one after another (a GPU, in about one's time)."""

    def job_runtime(wildcards, attempt):
        w = wildcards
        return runtime(wildcards, attempt) * len(pack_members(config, w.experiment, w.task, w.student, w.method,
                                                               w.pack))

    return job_runtime
