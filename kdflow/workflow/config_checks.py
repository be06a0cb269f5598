"""Cross-check the config before any job runs: what its JSON schema cannot check (rules/config.smk calls
:func:`check_references` after the schema). Experiments name existing teachers, students and methods, and only
options that the registered methods and students have (:mod:`kdflow.workflow.catalog_cache`); named models,
figures, thesis Table 4.5 and the paper tables name jobs of the DAG.
"""

from __future__ import annotations

import os

from kdflow.core.errors import UserError
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.io import input_files
from kdflow.core.model_references import embeddings_source, reference_kind
from kdflow.core.tasks import get_task
from kdflow.workflow.catalog_cache import load_catalog
from kdflow.workflow.config_files import ConfigError
from kdflow.workflow.job_settings import (
    HYPERPARAMETERS,
    TRANSFER_SOURCES,
    is_student_axis,
    method_entry,
    transfer_sets,
)


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
