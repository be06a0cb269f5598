"""Resolve the workflow config into the settings of one job.

The Snakefile passes these resolved dictionaries to rules as ``params``: Snakemake reruns a job when its params
change, so editing one task's teacher hyperparameters reruns exactly that teacher and what depends on it.
Keys are sorted so that merely reordering the config file changes no params and reruns nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields

from kdflow.core.errors import UserError
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.io import input_files
from kdflow.core.model_references import embeddings_source, reference_kind
from kdflow.core.tasks import get_task
from kdflow.workflow.catalog import load_catalog
from kdflow.workflow.config_files import ConfigError, schema_defaults
from kdflow.workflow.results_paths import (
    DATA,
    PSEUDO_HEADS,
    SIGNALS,
    STUDENT_RUN_DIR,
    TEACHER_MODEL,
    TRANSFER_SET,
    TRANSFER_SHARD,
)

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


def student_run_file(name: str, **run) -> str:
    """File ``name`` of one student run, ``run`` being its experiment, task, student, method, point (of the
    grid) and seed: one directory per grid point and seed, below the directory of the student and method's runs
    (what a named student model selects among; :mod:`kdflow.workflow.results_paths`)."""
    return f"{STUDENT_RUN_DIR}/{{name}}".format(name=name, **run)


RUN_KEYS = ("task", "student", "method", "point", "seed")  # a run's directory below its experiment


def experiment_runs(config: dict, experiment: str) -> list[dict]:
    """Every student run of an experiment, as the wildcards of its directory (strings), sorted: reordering the
    config must not change the selection's params."""
    runs = [{key: str(job[key]) for key in RUN_KEYS} for job in student_jobs(config) if job["experiment"] == experiment]
    return sorted(runs, key=lambda run: [run[key] for key in RUN_KEYS])


def experiment_run_files(config: dict, experiment: str, name: str = "metrics.json") -> list[str]:
    """File ``name`` of every student run of the experiment."""
    return [student_run_file(name, experiment=experiment, **run) for run in experiment_runs(config, experiment)]


def selection_inputs(config: dict, experiment: str) -> dict[str, list[str]]:
    """What rule select_students reads: every run's metrics and, where the experiment tests its methods against a
    baseline (``compare_to``), every run's predictions (the test resamples the dev examples)."""
    inputs = {"metrics": experiment_run_files(config, experiment)}
    if config["experiments"][experiment].get("compare_to"):
        inputs["predictions"] = experiment_run_files(config, experiment, "predictions.parquet")
    return inputs


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


def unlabelled_files(config: dict, task: str) -> list[str]:
    """The files of ``task``'s unlabelled-text source (a file, or a directory's visible files by name)."""
    return [str(path) for path in input_files(config["unlabelled"]["files"][task], "unlabelled-text")]


def augmented_jobs(config: dict) -> list[tuple[str, str]]:
    """(teacher, task) pairs whose augmented transfer set some experiment learns from, in config order."""
    pairs = [(spec["teacher"], task) for spec in config.get("experiments", {}).values()
             if transfer_of(spec) == "augmented" for task in spec["tasks"]]
    return list(dict.fromkeys(pairs))


def signal_needs(config: dict, teacher: str, task: str) -> bool:
    """Whether any experiment distilling ``teacher`` on ``task`` uses hidden-space methods (teacher layers)."""
    methods = load_catalog()["methods"]
    return any(
        "layers" in methods[method_entry(spec, entry)[0]]["needs"]
        for spec in config.get("experiments", {}).values()
        if spec["teacher"] == teacher and task in spec["tasks"]
        for entry in spec["methods"]
    )


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


def _reference_problems(config: dict, reference: dict, kind: str, where: str) -> list[str]:
    """What a reference of ``kind`` (a model's, or the source of an ``embeddings`` model) names that does not exist."""
    if kind == "pretrained":
        known = reference["pretrained"] in config["teachers"]
        return [] if known else [f"{where}: unknown teacher {reference['pretrained']!r}"]
    if kind == "teacher":
        teacher = config["teachers"].get(reference["teacher"])
        if teacher is None:
            return [f"{where}: unknown teacher {reference['teacher']!r}"]
        if reference["task"] not in teacher["tasks"]:
            return [f"{where}: teacher {reference['teacher']!r} is not trained on {reference['task']!r}"]
        return []
    experiment = config.get("experiments", {}).get(reference["experiment"])
    if experiment is None:
        return [f"{where}: unknown experiment {reference['experiment']!r}"]
    return [f"{where}: experiment {reference['experiment']!r} has no {key} {reference[key]!r}"
            for key, known in (("task", experiment["tasks"]), ("student", experiment["students"]),
                               ("method", list(experiment["methods"])))
            if key in reference and reference[key] not in known]


def _model_problems(config: dict) -> list[str]:
    problems, kinds = [], {}
    for name, reference in config.get("models", {}).items():
        kinds[name] = kind = reference_kind(reference)
        if kind == "embeddings":
            problems += _reference_problems(config, reference["embeddings"], embeddings_source(reference),
                                            f"models.{name}.embeddings")
        else:
            problems += _reference_problems(config, reference, kind, f"models.{name}")
    probed = config.get("probing", {}).get("models", [])
    for name in probed:
        if name not in kinds:
            problems.append(f"probing.models: unknown model {name!r} (not in `models`)")
    thesis = config.get("probing", {}).get("thesis", {})
    for thesis_model, name in thesis.get("models", {}).items():
        if name not in probed:
            problems.append(f"probing.thesis.models.{thesis_model}: {name!r} is not probed (not in probing.models)")
    for thesis_model in sorted(set(thesis.get("models", {})) & set(thesis.get("missing", {}))):
        problems.append(f"probing.thesis: {thesis_model!r} is both mapped (models) and said to be missing (missing)")
    for task, group in config.get("analysis", {}).items():
        if get_task(task).regression:
            problems.append(f"analysis.{task}: the analysis needs class predictions; {task} is a regression task")
        for name in [group["teacher"], *group["students"]]:
            if name not in kinds:
                problems.append(f"analysis.{task}: unknown model {name!r} (not in `models`)")
            elif kinds[name] in ("pretrained", "embeddings") or config["models"][name]["task"] != task:
                problems.append(f"analysis.{task}: model {name!r} is not a fine-tuned model of {task!r}")
    for task, probe in config.get("sentence_probes", {}).items():
        if get_task(task).regression:
            problems.append(f"sentence_probes.{task}: sentences need class predictions; {task} is a regression task")
        for name in probe["models"]:
            if name not in kinds:
                problems.append(f"sentence_probes.{task}: unknown model {name!r} (not in `models`)")
            elif kinds[name] == "pretrained" or config["models"][name]["task"] != task:
                problems.append(f"sentence_probes.{task}: model {name!r} is not a fine-tuned model of {task!r}")
        for name in probe.get("reported", {}):
            if name not in probe["models"]:
                problems.append(f"sentence_probes.{task}.reported: {name!r} is not one of the probe's models")
    for figure, spec in config.get("attention_maps", {}).items():
        problems += _figure_student_problems(config, kinds, f"attention_maps.{figure}", spec["task"], spec["models"])
    for task, spec in config.get("layer_outputs", {}).items():
        problems += _figure_student_problems(config, kinds, f"layer_outputs.{task}", task, spec["models"])
    for table, spec in config.get("paper_tables", {}).get("tables", {}).items():
        for models in spec.get("inference", {}).values():
            problems += [f"paper_tables.tables.{table}.inference: {name!r} is an embeddings model, which has no "
                         "classifier to time" for name in models.values() if kinds.get(name) == "embeddings"]
    return problems


def _figure_student_problems(config: dict, kinds: dict, where: str, task: str, names: list[str]) -> list[str]:
    """A figure that recomputes students' layers on the same examples (attention maps, layer outputs) needs
    students of its task (names in `models`) that learnt from one teacher."""
    problems, teachers = [], set()
    for name in names:
        if kinds.get(name) != "student" or config["models"][name]["task"] != task:
            problems.append(f"{where}: {name!r} is not a student model of {task!r} in `models`")
        elif config["models"][name]["experiment"] in config.get("experiments", {}):
            teachers.add(config["experiments"][config["models"][name]["experiment"]]["teacher"])
    if len(teachers) > 1:
        problems.append(f"{where}: the students learn from different teachers {sorted(teachers)}")
    return problems


def _student_problems(config: dict, catalog: dict) -> list[str]:
    """Every student spec names a registered student type and only options it has (embeddings included)."""
    problems = []
    for name, spec in config.get("students", {}).items():
        kind = spec.get("type")
        if kind not in catalog["students"]:
            problems.append(f"students.{name}.type: unknown student {kind!r}; known: {', '.join(catalog['students'])}")
            continue
        known = catalog["students"][kind]["defaults"]
        unknown = sorted(set(spec) - {"type"} - set(known))
        if unknown:
            problems.append(f"students.{name}: {kind} has no option(s) {unknown}; known: {', '.join(sorted(known))}")
        if isinstance(spec.get("embeddings"), dict) and "embeddings" in known:
            problems += _embedding_problems(f"students.{name}.embeddings", spec["embeddings"], catalog)
    return problems


def _embedding_problems(where: str, given: dict, catalog: dict) -> list[str]:
    """A student's ``embeddings`` option names only known options, sources and modes."""
    embeddings, problems = catalog["embeddings"], []
    unknown = sorted(set(given) - set(embeddings["defaults"]))
    if unknown:
        problems.append(f"{where}: unknown option(s) {unknown}; known: {', '.join(sorted(embeddings['defaults']))}")
    for option, allowed in (("source", embeddings["sources"]), ("mode", embeddings["modes"]),
                            ("init", embeddings["inits"])):
        if option in given and given[option] not in allowed:
            problems.append(f"{where}.{option}: {given[option]!r} is not one of {', '.join(allowed)}")
    return problems


def _experiment_option_problems(name: str, spec: dict, config: dict, catalog: dict) -> list[str]:
    """The options of an experiment's method entries, its per-task student options and its grid's axes exist in
    the code that runs them."""
    problems, methods = [], catalog["methods"]
    for task, students in spec.get("task_students", {}).items():
        where = f"experiments.{name}.task_students.{task}"
        if task not in spec["tasks"]:
            problems.append(f"{where}: {task!r} is not a task of the experiment")
        for student, options in students.items():
            if student not in spec["students"]:
                problems.append(f"{where}.{student}: not a student of the experiment")
                continue
            kind = config.get("students", {}).get(student, {}).get("type")
            unknown = sorted(set(options) - set(catalog["students"].get(kind, {}).get("defaults", options)))
            if unknown:
                problems.append(f"{where}.{student}: {kind} has no option(s) {unknown}")
    for entry in spec["methods"]:
        method, options = method_entry(spec, entry)
        unknown = sorted(set(options) - set(methods[method]["defaults"]))
        if unknown:
            problems.append(f"experiments.{name}.methods.{entry}: {method} has no option(s) {unknown}; known: "
                            + ", ".join(sorted(methods[method]["defaults"])))
        if "assistant" in options and options["assistant"] not in config.get("students", {}):
            problems.append(f"experiments.{name}.methods.{entry}.assistant: unknown student {options['assistant']!r}")
        elif methods[method]["learns_from_assistant"] and "assistant" not in options:
            problems.append(f"experiments.{name}.methods.{entry}: {method} needs an 'assistant' student")
        assistant_method = {**methods[method]["defaults"], **options}.get("assistant_method")
        if methods[method]["learns_from_assistant"] and assistant_method not in methods:
            problems.append(f"experiments.{name}.methods.{entry}.assistant_method: unknown method {assistant_method!r}")
    if "compare_to" in spec and spec["compare_to"] not in spec["methods"]:
        problems.append(f"experiments.{name}.compare_to: {spec['compare_to']!r} is not one of its method entries "
                        f"({', '.join(spec['methods'])})")
    for axis, values in (spec.get("grid") or {}).items():
        for value in values if axis in HYPERPARAMETERS else []:
            problem = Hyperparameters.value_problem(axis, value)
            if problem:
                problems.append(f"experiments.{name}.grid.{axis}: {problem}")
    searched = set(HYPERPARAMETERS).union(*(methods[method_entry(spec, e)[0]]["defaults"] for e in spec["methods"]))
    where = f"experiments.{name}.grid"
    axes = {where: list(spec.get("grid") or {})}
    for point, settings in (spec.get("points") or {}).items():
        axes[f"experiments.{name}.points.{point}"] = list(settings)
        if isinstance(settings.get("student.embeddings"), dict):
            problems += _embedding_problems(f"experiments.{name}.points.{point}.student.embeddings",
                                            settings["student.embeddings"], catalog)
    for where, names in axes.items():
        unused = [axis for axis in names if axis not in searched and not is_student_axis(axis)]
        if unused:
            problems.append(f"{where}: {unused} are neither hyperparameters nor options of its methods")
        for axis in filter(is_student_axis, names):
            option = axis.removeprefix("student.")
            lacking = [student for student in spec["students"] if student in config.get("students", {})
                       and option not in catalog["students"].get(config["students"][student].get("type"), {})
                       .get("defaults", {option: None})]
            if lacking:
                problems.append(f"{where}.{axis}: students {lacking} have no option {option!r}")
    return problems


def _runtime_table_problems(config: dict) -> list[str]:
    """Thesis Table 4.5's section (kdflow.workflow.runtime_jobs): its teacher is trained on its tasks, and its
    student steps name experiments distilling that teacher and students of those experiments."""
    spec = config.get("runtime_table")
    if spec is None:
        return []
    teacher = config["teachers"].get(spec["teacher"])
    if teacher is None:
        return [f"runtime_table.teacher: unknown teacher {spec['teacher']!r}"]
    problems = []
    missing = [task for task in spec["tasks"] if task not in teacher["tasks"]]
    if missing:
        problems.append(f"runtime_table.tasks: teacher {spec['teacher']!r} is not trained on {missing}")
    for step, run_of in spec["students"].items():
        experiment = config.get("experiments", {}).get(run_of["experiment"])
        where = f"runtime_table.students.{step}"
        if experiment is None:
            problems.append(f"{where}: unknown experiment {run_of['experiment']!r}")
        elif experiment["teacher"] != spec["teacher"]:
            problems.append(f"{where}: experiment {run_of['experiment']!r} distils {experiment['teacher']!r}, "
                            f"not {spec['teacher']!r}")
        elif run_of["student"] not in experiment["students"]:
            problems.append(f"{where}: experiment {run_of['experiment']!r} has no student {run_of['student']!r}")
    return problems


def _paper_table_problems(config: dict) -> list[str]:
    """A paper table reads experiments, a teacher and students of the config: each must exist (else Snakemake would
    only say that some experiment's table has no rule to make it)."""
    problems = []
    experiments, students = config.get("experiments", {}), config.get("students", {})
    for name, spec in config.get("paper_tables", {}).get("tables", {}).items():
        where = f"paper_tables.tables.{name}"
        unknown = [experiment for experiment in spec.get("experiments", []) if experiment not in experiments]
        if unknown:
            problems.append(f"{where}.experiments: {unknown} not in the config's experiments "
                            f"({', '.join(experiments) or 'none'}); add them under `experiments` or remove the table")
        if "teacher" in spec and spec["teacher"] not in config["teachers"]:
            problems.append(f"{where}.teacher: unknown teacher {spec['teacher']!r}")
        unknown = [student for student in spec.get("students", {}).values() if student not in students]
        if unknown:
            problems.append(f"{where}.students: unknown students {unknown}")
    return problems


def check_references(config: dict) -> None:
    """What the JSON schema cannot check, before any job runs: experiments name existing teachers, students and
    methods, tasks their teacher is trained on, and only options that the registered methods and students (and
    the training hyperparameters) have; named models point at jobs of the DAG, and so do thesis Table 4.5's
    ``runtime_table`` and the paper tables."""
    catalog = load_catalog()
    methods = catalog["methods"]
    problems = _student_problems(config, catalog)
    for transfer, task in transfer_sets(config):
        if "generated" in TRANSFER_SOURCES[transfer] and "generation" not in config:
            problems.append(f"experiments with `transfer: {transfer}` need a `generation` section")
        if "unlabelled" in TRANSFER_SOURCES[transfer]:
            path = config.get("unlabelled", {}).get("files", {}).get(task)
            if path is None:
                problems.append(f"unlabelled.files.{task}: experiments with `transfer: {transfer}` on {task} need "
                                f"the task's unlabelled text")
            else:
                try:
                    input_files(path, "unlabelled-text")
                except UserError as error:
                    problems.append(f"unlabelled.files.{task}: {error}")
    for name, spec in config.get("experiments", {}).items():
        teacher = config["teachers"].get(spec["teacher"])
        if teacher is None:
            problems.append(f"experiments.{name}.teacher: unknown teacher {spec['teacher']!r}")
            continue
        missing = [task for task in spec["tasks"] if task not in teacher["tasks"]]
        if missing:
            problems.append(f"experiments.{name}.tasks: teacher {spec['teacher']!r} is not trained on {missing}")
        unknown = [s for s in spec["students"] if s not in config.get("students", {})]
        if unknown:
            problems.append(f"experiments.{name}.students: unknown students {unknown}")
        unknown = [entry for entry in spec["methods"] if method_entry(spec, entry)[0] not in methods]
        if unknown:
            problems.append(f"experiments.{name}.methods: unknown methods {unknown}; known: {', '.join(methods)}")
            continue
        problems += _experiment_option_problems(name, spec, config, catalog)
    problems += _model_problems(config)
    problems += _runtime_table_problems(config)
    problems += _paper_table_problems(config)
    for key in ("reference", "deviations", "selected_hyperparameters"):  # read while planning
        path = config.get("paper_tables", {}).get(key)
        if path is not None and not os.path.isfile(path):
            problems.append(f"paper_tables.{key}: file {path} not found")
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))


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


def pseudo_head_job_settings(config: dict, teacher: str, task: str) -> dict:
    """The pseudo-heads' settings, with the sequence length of the teacher's fine-tuning on ``task``."""
    length = teacher_settings(config, teacher, task)["hyperparameters"].get("max_seq_length",
                                                                            Hyperparameters.max_seq_length)
    return {**pseudo_head_settings(config, teacher), "max_seq_length": length}


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
        signals = student_run_file("signals.safetensors", experiment=experiment, task=task, **assistant)
    return {"data": DATA.format(task=task), "teacher": TEACHER_MODEL.format(teacher=spec["teacher"], task=task),
            "signals": signals, **transfer_set_file(transfer, task), **({"vectors": vectors} if vectors else {})}
