"""Resolve the workflow config into the settings of one job: what each job runs with.

The Snakefile passes these resolved dictionaries to rules as ``params``: Snakemake reruns a job when its params
change, so editing one task's teacher hyperparameters reruns exactly that teacher and what depends on it.
Keys are sorted so that merely reordering the config file changes no params and reruns nothing.
What each job reads is :mod:`kdflow.workflow.job_inputs`; the config's cross-references are checked by
:mod:`kdflow.workflow.config_checks`.
"""

from __future__ import annotations

import json
from dataclasses import fields

from kdflow.core.errors import UserError
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.tasks import get_task
from kdflow.workflow.catalog_cache import load_catalog
from kdflow.workflow.config_files import schema_defaults
from kdflow.workflow.results_paths import RUN_KEYS

HYPERPARAMETERS = {field.name for field in fields(Hyperparameters)}


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


def pseudo_head_job_settings(config: dict, teacher: str, task: str) -> dict:
    """The pseudo-heads' settings, with the sequence length of the teacher's fine-tuning on ``task``."""
    length = teacher_settings(config, teacher, task)["hyperparameters"].get("max_seq_length",
                                                                            Hyperparameters.max_seq_length)
    return {**pseudo_head_settings(config, teacher), "max_seq_length": length}


def teacher_jobs(config: dict) -> list[tuple[str, str]]:
    """Every (teacher, task) pair the config asks for, in config order."""
    return [(name, task) for name, spec in config["teachers"].items() for task in spec["tasks"]]


def class_distribution_tasks(config: dict) -> list[str]:
    """The tasks of thesis Fig. A.1 (rule figure_class_distribution): every task the workflow prepares (the teachers'),
    in config order, but the regression tasks (STS-B), which have no classes to count."""
    tasks = dict.fromkeys(task for _, task in teacher_jobs(config))
    return [task for task in tasks if not get_task(task).regression]


# Students: experiments x tasks x students x methods x grid points x seeds.

_SHORT = {"learning_rate": "lr", "batch_size": "bs"}


def method_entry(experiment: dict, entry: str) -> tuple[str, dict]:
    """The registered method and options behind an experiment's method entry. An entry is a method name, or
    a named variant: ``pkd_6: {method: pkd, mapping: [6]}`` (ALP-KD Table 3 compares three PKD mappings)."""
    options = dict(experiment["methods"].get(entry) or {})  # not an entry: a bare method (a TAKD assistant's)
    return options.pop("method", entry), options


def grid_points(experiment: dict, entry: str) -> dict[str, dict]:
    """The grid of ``experiment`` as seen by method ``entry``: ``{point: {axis: value}}``. An axis is a
    training hyperparameter or a method option; options the method does not have (e.g. beta for no_kd) are
    dropped, so that no identical job is run twice, and so are options the entry fixes itself. A point is named by
    its values (:func:`grid_point`), e.g. ``bs16_beta0.2_lr2e-05`` (axes in name order).

    An experiment with ``points`` instead of a ``grid`` names its points itself: ``{name: {setting: value}}``, each
    taken as it is (the thesis's one-at-a-time exploration, :mod:`kdflow.workflow.exploration`)."""
    if "points" in experiment:
        return experiment["points"]
    key = json.dumps([experiment.get("grid"), experiment["methods"].get(entry), entry], sort_keys=True)
    if key not in _GRIDS:  # planning asks once per job: tens of thousands of times in the full config
        _GRIDS[key] = _grid_points(experiment, entry)
    return _GRIDS[key]


_GRIDS: dict[str, dict[str, dict]] = {}


def point_values(config: dict, experiment: str, entry: str, point: str) -> dict:
    """The values of grid point ``point`` of method ``entry`` in ``experiment`` (:func:`grid_points`), or a clear
    error naming what the config has, for a target path with a mistyped method or point."""
    spec = config["experiments"][experiment]
    if method_entry(spec, entry)[0] not in load_catalog()["methods"]:
        raise UserError(f"experiments.{experiment}: no method entry {entry!r}; its entries: "
                        f"{', '.join(spec['methods'])}")
    points = grid_points(spec, entry)
    if point not in points:
        shown = ", ".join(list(points)[:8]) + (f", ... ({len(points)} in all)" if len(points) > 8 else "")
        raise UserError(f"experiments.{experiment}.methods.{entry}: no grid point {point!r} in the config; its "
                        f"points: {shown}")
    return points[point]


def _grid_points(experiment: dict, entry: str) -> dict[str, dict]:
    methods = load_catalog()["methods"]
    method, _ = method_entry(experiment, entry)
    grid = experiment.get("grid") or {}
    fixed = method_entry(experiment, entry)[1]  # an option the entry sets is not searched
    axes = {
        name: values for name, values in grid.items()
        if name not in fixed and (name in HYPERPARAMETERS or name in methods[method]["defaults"] or is_student_axis(name))
    }
    points = [{}]
    for name in sorted(axes):
        points = [{**point, name: value} for point in points for value in axes[name]]
    return {grid_point(values): values for values in points}


def is_student_axis(name: str) -> bool:
    """``student.<option>`` grid axes set an option of every student (Universal-KD A.2 tunes their dropout)."""
    return name.startswith("student.")


def grid_point(values: dict) -> str:
    """The name of the grid point with these axis values: a run's directory and its ``point`` wildcard."""
    if not values:
        return "default"
    short = lambda name: _SHORT.get(name, name.removeprefix("student."))  # noqa: E731
    return "_".join(f"{short(name)}{values[name]:g}" if isinstance(values[name], float)
                    else f"{short(name)}{values[name]}" for name in sorted(values))


def student_jobs(config: dict) -> list[dict]:
    """Every student training job: experiment, task, student, method, point (of the grid) and seed."""
    jobs = []
    for name, experiment in config.get("experiments", {}).items():
        for task in experiment["tasks"]:
            for student in experiment["students"]:
                for method in experiment["methods"]:
                    for point in grid_points(experiment, method):
                        for seed in experiment["seeds"]:
                            jobs.append(dict(experiment=name, task=task, student=student, method=method,
                                             point=point, seed=seed))
    return jobs


def student_settings(config: dict, experiment: str, task: str, student: str, method: str, point: str,
                     seed: int) -> dict:
    """Everything one student job needs: student spec, method options, schedule and hyperparameters."""
    spec = config["experiments"][experiment]
    values = point_values(config, experiment, method, point)
    hyperparameters = {
        **config["student_defaults"],
        **spec.get("hyperparameters", {}),
        **spec.get("task_hyperparameters", {}).get(task, {}),
        **{k: v for k, v in values.items() if k in HYPERPARAMETERS},
        "seed": int(seed),
    }
    method, options = method_entry(spec, method)
    options.update({k: v for k, v in values.items() if k not in HYPERPARAMETERS and not is_student_axis(k)})
    student_spec = {**config["students"][student],
                    **spec.get("task_students", {}).get(task, {}).get(student, {}),
                    **{k.removeprefix("student."): v for k, v in values.items() if is_student_axis(k)}}
    stages = spec.get("task_schedule", {}).get(task) or spec.get("schedule") or [{"epochs": hyperparameters["epochs"]}]
    return canonical({
        "teacher": spec["teacher"],
        "transfer": transfer_of(spec),
        "student": student_spec,
        "method": method,
        "method_options": options,
        "stages": stages,
        "hyperparameters": hyperparameters,
    })


def student_code_members(settings: dict) -> tuple[tuple[str, str], ...]:
    """The registry members a student job of ``settings`` runs, (registry, name): its student type and its
    method; of the registries, only their modules count in the job's code fingerprint
    (kdflow.workflow.provenance.job_fingerprint)."""
    return (("kdflow.students", settings["student"]["type"]),
            ("kdflow.distillation.methods", settings["method"]))


def run_values(config: dict, experiment: str, task: str, student: str, method: str, names: list[str]) -> dict:
    """What every grid point of ``task``/``student``/``method`` trains with, by kdflow's names (training
    hyperparameters, method options, ``student.<option>``): ``{point: {name: value}}`` for ``names``, None
    where a run has no such setting. A table of selected hyperparameters reads the selected point's."""
    spec = config["experiments"][experiment]
    values = {}
    for point in grid_points(spec, method):
        settings = student_settings(config, experiment, task, student, method, point, spec["seeds"][0])
        known = {**settings["hyperparameters"], **settings["method_options"],
                 **{f"student.{k}": v for k, v in settings["student"].items()}}
        values[point] = {name: known.get(name) for name in names}
    return values


def assistant_run(config: dict, experiment: str, task: str, entry: str, point: str, seed) -> dict | None:
    """For a TAKD entry, the run of its teacher assistant (student, method, point, seed), which the student
    learns from; None for methods that learn from the teacher. The assistant is distilled at the same grid
    point (restricted to the axes its own method has) and seed."""
    methods = load_catalog()["methods"]
    spec = config["experiments"][experiment]
    values = point_values(config, experiment, entry, point)
    method, _ = method_entry(spec, entry)
    if not methods[method]["learns_from_assistant"]:
        return None
    options = {**methods[method]["defaults"], **method_entry(spec, entry)[1], **values}
    assistant_method = options["assistant_method"]
    points = grid_points(spec, assistant_method)
    (assistant_point,) = [name for name, own in points.items() if all(values.get(k) == v for k, v in own.items())]
    return {"student": options["assistant"], "method": assistant_method, "point": assistant_point, "seed": str(seed)}


# Augmented transfer sets.


# What each transfer set adds to the training split (kdflow.transfer.augmentation).
TRANSFER_SOURCES = {"train": (), "augmented": ("generated",), "unlabelled": ("unlabelled",),
                    "unlabelled_augmented": ("unlabelled", "generated")}


def transfer_of(experiment: dict) -> str:
    """What an experiment's students learn from: a name of ``TRANSFER_SOURCES`` (default ``train``)."""
    return experiment.get("transfer", "train")


def transfer_sets(config: dict) -> list[tuple[str, str]]:
    """(transfer set, task) of every set beyond train that some experiment learns from, in config order."""
    pairs = [(transfer_of(spec), task) for spec in config.get("experiments", {}).values()
             if transfer_of(spec) != "train" for task in spec["tasks"]]
    return list(dict.fromkeys(pairs))


def generator_tasks(config: dict) -> list[str]:
    """The tasks whose generator some transfer set samples from, in config order."""
    return list(dict.fromkeys(task for transfer, task in transfer_sets(config)
                              if "generated" in TRANSFER_SOURCES[transfer]))



def experiment_runs(config: dict, experiment: str) -> list[dict]:
    """Every student run of an experiment, as the wildcards of its directory (strings), sorted: reordering the
    config must not change the selection's params."""
    runs = [{key: str(job[key]) for key in RUN_KEYS} for job in student_jobs(config) if job["experiment"] == experiment]
    return sorted(runs, key=lambda run: [run[key] for key in RUN_KEYS])


def selection_params(config: dict, experiment: str) -> dict:
    """The runs rule select_students selects among, each task's main metric, the experiment's baseline and the
    seeds that choose grid points (the first ``selection_seeds`` of its seeds)."""
    runs = experiment_runs(config, experiment)
    spec = config["experiments"][experiment]
    return {"runs": runs, "main_metrics": {run["task"]: get_task(run["task"]).main_metric for run in runs},
            "compare_to": spec.get("compare_to"), "selection_seeds": spec["seeds"][:spec.get("selection_seeds", 1)]}


# The schema's defaults, for configs it has not filled in (e.g. the protocols' account of config.yaml as written).
# Hygiene: the thesis kept every generated sequence (thesis-original-code.md, "Data"); copies of dev or test
# examples are a leak of the evaluation data, so kdflow drops them unless told otherwise.
SAMPLING_DEFAULTS = schema_defaults("generation", "sampling")
HYGIENE_DEFAULTS = schema_defaults("generation", "hygiene")


def generator_settings(config: dict) -> dict:
    generation = config["generation"]
    return canonical({"spec": generation["generator"], "hyperparameters": generation["hyperparameters"]})


def sampling_settings(config: dict) -> dict:
    return canonical({**SAMPLING_DEFAULTS, **config["generation"]["sampling"]})


def hygiene_settings(config: dict, transfer: str) -> dict:
    """What building a transfer set drops of each of its sources
    (:func:`kdflow.transfer.augmentation.build_transfer_set`): ``{source: keep_* switches}``."""
    sections = {"generated": config.get("generation", {}), "unlabelled": config.get("unlabelled", {})}
    settings = {source: {**HYGIENE_DEFAULTS, **sections[source].get("hygiene", {})}
                for source in TRANSFER_SOURCES[transfer]}
    if "unlabelled" in settings:
        del settings["unlabelled"]["keep_unfinished"]  # the researcher's lines are whole
    return canonical(settings)


def augmented_jobs(config: dict) -> list[tuple[str, str]]:
    """(teacher, task) pairs whose augmented transfer set some experiment learns from, in config order."""
    pairs = [(spec["teacher"], task) for spec in config.get("experiments", {}).values()
             if transfer_of(spec) == "augmented" for task in spec["tasks"]]
    return list(dict.fromkeys(pairs))


def needed_signals(config: dict, teacher: str, task: str) -> list[str]:
    """The teacher signals the methods of every experiment distilling ``teacher`` on ``task`` need, sorted: those
    registered on demand are stored for these alone (kdflow.transfer.signals)."""
    methods = load_catalog()["methods"]
    return sorted({
        signal
        for spec in config.get("experiments", {}).values()
        if spec["teacher"] == teacher and task in spec["tasks"]
        for entry in spec["methods"]
        for signal in methods[method_entry(spec, entry)[0]]["needs"]
    })


# Named models: probing and prediction analysis.


def model_reference(config: dict, name: str) -> dict:
    return config["models"][name]


def pretrained_settings(config: dict, teacher: str) -> dict:
    """What a ``pretrained`` reference loads: the teacher's model spec, and its seed (a config-built teacher's
    random initialisation)."""
    spec = teacher_settings(config, teacher, config["teachers"][teacher]["tasks"][0])
    return canonical({"spec": spec["spec"], "seed": spec["hyperparameters"]["seed"]})


def embedding_settings(config: dict, reference: dict) -> dict:
    """How an ``embeddings`` reference to an experiment's student builds the vectors (before training): as the
    experiment's first run of that task and student builds its student (its first method entry, grid point and
    seed): the teacher, the student's spec and the seed; for a word-level student (``words``), whose vocabulary is
    the words of what its runs learn from, the transfer set and the training subset (``max_train_examples``)."""
    source = reference["embeddings"]
    experiment = config["experiments"][source["experiment"]]
    entry = next(iter(experiment["methods"]))
    settings = student_settings(config, source["experiment"], source["task"], source["student"], entry,
                                next(iter(grid_points(experiment, entry))), experiment["seeds"][0])
    student = settings["student"]
    words = {**load_catalog()["students"][student["type"]]["defaults"], **student}.get("tokens") == "words"
    hyperparameters = settings["hyperparameters"]
    return canonical({"teacher": settings["teacher"], "student": student, "seed": hyperparameters["seed"],
                      "words": words, "transfer": settings["transfer"] if words else None,
                      "max_train_examples": hyperparameters.get("max_train_examples") if words else None})


def probing_settings(config: dict) -> dict:
    """Encoding and probe settings (probe defaults live in :class:`kdflow.probing.probe.ProbeSettings`)."""
    probing = config["probing"]
    return canonical({"pooling": probing.get("pooling", "mean"), "max_seq_length": probing.get("max_seq_length", 128),
                      "encode_batch_size": probing.get("encode_batch_size", 128), "probe": probing.get("probe", {})})


def paper_table_models(config: dict, table: str) -> dict:
    """What a paper table (config ``paper_tables.tables``) is made of: its experiments and teacher, in the terms
    of :func:`scale_note` and exploration.protocol_config."""
    spec = config["paper_tables"]["tables"][table]
    return {"experiments": spec.get("experiments", []), "teacher": spec.get("teacher")}


def scale_note(config: dict, experiments: list[str], teacher: str | None = None) -> str:
    """The line a results page carries when what it shows cannot stand beside a paper: the teachers of these
    experiments (and ``teacher``) that the config builds from an ``architecture`` instead of a pretrained
    ``model``, randomly initialised before fine-tuning (the demo's); empty where every teacher is pretrained."""
    named = [config["experiments"][name]["teacher"] for name in experiments if name in config["experiments"]]
    random = sorted({name for name in [teacher, *named] if name and "model" not in config["teachers"].get(name, {})})
    if not random:
        return ""
    return (f"A demonstration, not a result: teacher {', '.join(random)} is randomly initialised (built from an "
            "architecture, with no pretrained weights) and trained at this config's small scale, so these numbers test "
            "the workflow and say nothing about the paper's.")
