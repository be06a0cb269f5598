"""Sučík (2020) Chapter 5 and Appendix B as experiments: the config's ``exploration`` section, a compact list of
studies, expanded into one experiment per study (``exploration_<study>``) whose named grid points (``points``) are
the values the study explores.

A study explores one student (an entry of ``exploration.students``: a config student, its method and its
settings before the exploration, thesis §4.3) on some tasks, with some seeds (the thesis's repeats):

- ``fixed``: the settings every point of the study shares (what the thesis held fixed while exploring);
- ``axes``: the points are their cross product, taken in a fixed axis order (:data:`AXIS_ORDER`, then by name)
  whatever the mapping's key order, so that rewriting the config (a YAML mapping has no order) renames and
  reruns nothing; that order names the points (``lr0.0005_random``, ``w3_d2``) and orders legends. An axis is a setting with a list of values
  (``learning_rate: [5.0e-3, ...]``), ``embeddings``, ``width`` or ``depth`` with a list of names from the
  section's tables, or any name with a mapping of named setting sets (``decay: {decay: {lr_decay: linear},
  no_decay: {lr_decay: none}}``);
- ``extra_points``: named setting sets after the cross product, by name (Tang et al.'s Adadelta beside Adam's rates);
- ``point_settings``: per point id, settings over the rest (the hand-set learning rates of the larger BERT_S).

Settings are kdflow's hyperparameters, method options and ``student.<option>``, plus three of the thesis's terms:
``warmup_epochs`` (E_w, turned into ``warmup_ratio`` = E_w / epochs), ``embeddings`` (a name of
``exploration.embeddings``: student options ``tokens`` and ``embeddings``, Table 5.1's type x mode) and
``width``/``depth`` (a factor of ``exploration.sizes.<student>``, Tables B.1-B.2). Later levels win: fixed < axis
values < point settings.

Word2vec choices (``source: file``) read ``exploration.word_vectors``, the GoogleNews vectors file. While it is
null (the file is unavailable), a point whose *explored* value is a word2vec choice is left out, and a *fixed*
word2vec choice is replaced by the teacher's wordpieces in the same mode, as thesis Table 5.2's experiments do
(reference/deviations.yaml).

``figures`` maps each thesis figure to the studies it draws (one panel per study and task), and points carry
labels for legends and heat maps (:func:`figure_runs`).
"""

from __future__ import annotations

import itertools
import re

from kdflow.workflow.job_inputs import student_run_file
from kdflow.workflow.job_settings import canonical, grid_point, paper_table_models, student_settings

PREFIX = "exploration_"
SIZE_AXES = ("width", "depth")
# The thesis's hyperparameters first, in the order its figures name them; other axes follow by name.
AXIS_ORDER = ("learning_rate", "batch_size", "warmup_epochs", *SIZE_AXES)
# Names of list axes in point ids (as grid ids name them) and in legends (the thesis's symbols).
_SHORT = {"warmup_epochs": "ew"}
_SYMBOLS = {"learning_rate": "η", "batch_size": "B", "warmup_epochs": "E_w", "width": "W", "depth": "D"}


def experiment_name(study: str) -> str:
    return PREFIX + study


def exploration_experiments(config: dict) -> dict[str, dict]:
    """The experiments of the config's ``exploration`` studies (none without the section), by study name."""
    spec = config.get("exploration")
    if not spec:
        return {}
    experiments = {}
    for name, study in sorted(spec["studies"].items()):
        base = spec["students"][study["student"]]
        experiment = {
            "paper": f"Sučík (2020) Appendix B, study {name}",
            "teacher": spec["teacher"],
            "tasks": study["tasks"],
            "students": [base["student"]],
            "methods": base["methods"],
            "hyperparameters": dict(base.get("hyperparameters", {})),
            "points": {point: entry["settings"] for point, entry in study_points(config, name).items()},
            "seeds": study["seeds"],
            # every repeat chooses, as the thesis chose from its mean curves; nothing is tested against a baseline
            "selection_seeds": len(study["seeds"]),
            "transfer": spec.get("transfer", "train"),
        }
        resources = {**base.get("resources", {}), **study.get("resources", {})}
        if resources:
            experiment["resources"] = resources
        experiments[experiment_name(name)] = experiment
    return experiments


def with_exploration(config: dict) -> dict:
    """``config`` with the exploration's experiments added to its own (a name may not be taken twice), after
    checking the section (:func:`exploration_problems`)."""
    problems = exploration_problems(config)
    if problems:
        raise ValueError("invalid config:\n  " + "\n  ".join(problems))
    generated = exploration_experiments(config)
    taken = sorted(set(generated) & set(config.get("experiments", {})))
    if taken:
        raise ValueError(f"experiments {taken} are also exploration studies' experiments; rename one")
    return {**config, "experiments": {**config.get("experiments", {}), **generated}} if generated else config


def study_points(config: dict, study: str) -> dict[str, dict]:
    """``{point id: {"settings": kdflow settings, "labels": [value label per axis], "values": the study's terms}}``
    of one study, in axis order (:func:`ordered_axes`; extra points last, by name). ``values`` are the point's settings as the study states them
    (``width``, ``warmup_epochs``, ...), fixed ones included. Points whose explored value needs the unavailable
    word vectors are left out."""
    spec = config["exploration"]
    entry = spec["studies"][study]
    student = entry["student"]
    axes = [_axis(spec, student, name, values) for name, values in ordered_axes(entry.get("axes") or {})]
    candidates = []
    for combination in itertools.product(*axes):
        point = "_".join(value_id for _, value_id, _, _ in combination) or "default"
        labels = [label for _, _, label, _ in combination]
        explored = {key: value for *_, values in combination for key, value in values.items()}
        candidates.append((point, labels, explored))
    for point, values in sorted((entry.get("extra_points") or {}).items()):
        candidates.append((point, [point.replace("_", " ")], values))
    points = {}
    for point, labels, explored in candidates:
        if spec.get("word_vectors") is None and _needs_word_vectors(spec, explored):
            continue
        values = {**entry.get("fixed", {}), **explored, **(entry.get("point_settings") or {}).get(point, {})}
        points[point] = {"settings": canonical(_settings(spec, student, values)), "labels": labels,
                         "values": canonical(values)}
    return points


def ordered_axes(axes: dict) -> list[tuple[str, object]]:
    """A study's axes in the order its points are named by: :data:`AXIS_ORDER`, then by name."""
    rank = {name: i for i, name in enumerate(AXIS_ORDER)}
    return sorted(axes.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0]))


def _axis(spec: dict, student: str, name: str, values) -> list[tuple[str, str, str, dict]]:
    """An axis as (axis, value id, value label, settings) per value."""
    if isinstance(values, dict):  # named setting sets
        return [(name, value, value.replace("_", " "), settings) for value, settings in sorted(values.items())]
    if name == "embeddings":
        return [(name, value, embedding_label(value), {"embeddings": value}) for value in values]
    if name in SIZE_AXES:
        return [(name, f"{name[0]}{value}".replace("/", "-"), f"{_SYMBOLS[name]}={value}", {name: str(value)})
                for value in values]
    symbol = _SYMBOLS.get(name, name)
    return [(name, grid_point({name: value}) if name not in _SHORT else f"{_SHORT[name]}{value:g}",
             f"{symbol}={number_label(name, value)}", {name: value}) for value in values]


def number_label(name: str, value) -> str:
    """A value as a legend shows it: learning rates as 5e-4, 1.5e-3; anything else as written."""
    if name == "learning_rate" and isinstance(value, float):
        mantissa, exponent = f"{value:e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def embedding_label(name: str) -> str:
    """``wordpiece_non_static`` -> ``wordpiece, non-static``."""
    return ", ".join(name.replace("non_static", "non-static").split("_"))


def _needs_word_vectors(spec: dict, values: dict) -> bool:
    choice = values.get("embeddings")
    return choice is not None and spec["embeddings"][choice]["embeddings"].get("source") == "file"


def _settings(spec: dict, student: str, values: dict) -> dict:
    """A study's setting set in kdflow's terms (hyperparameters, method options, ``student.<option>``)."""
    settings = {}
    for key, value in values.items():
        if key == "embeddings":
            settings.update({f"student.{option}": v for option, v in embedding_options(spec, value).items()})
        elif key in SIZE_AXES:
            table = spec["sizes"][student][key]
            settings.update({f"student.{option}": v for option, v in table[value].items()})
        elif key != "warmup_epochs":
            settings[key] = value
    if "warmup_epochs" in values:
        epochs = settings.get("epochs", spec["students"][student].get("hyperparameters", {}).get("epochs"))
        settings["warmup_ratio"] = values["warmup_epochs"] / epochs
    return settings


def embedding_options(spec: dict, choice: str) -> dict:
    """Student options ``tokens`` and ``embeddings`` of an embedding choice; a word2vec one reads
    ``exploration.word_vectors``, or, while that is null, becomes the teacher's wordpieces in the same mode."""
    options = {key: dict(value) if isinstance(value, dict) else value for key, value in spec["embeddings"][choice].items()}
    if options["embeddings"].get("source") == "file":
        if spec.get("word_vectors") is None:
            return {"tokens": "wordpiece", "embeddings": {**options["embeddings"], "source": "teacher"}}
        options["embeddings"]["path"] = spec["word_vectors"]
    return options


# Figures and Table 5.1: which runs they read, and how they label them.


def figure_runs(config: dict, figure: str) -> list[dict]:
    """Every run a figure draws, in panel order: study, its experiment, task, student (the config's and its label),
    method, point and seed."""
    spec = config["exploration"]
    return [run for study in spec["figures"][figure]["studies"] for run in study_runs(config, study)]


def study_runs(config: dict, study: str) -> list[dict]:
    spec = config["exploration"]
    entry = spec["studies"][study]
    base = spec["students"][entry["student"]]
    return [{"study": study, "experiment": experiment_name(study), "task": task, "student": base["student"],
             "student_label": base.get("label", entry["student"]), "method": method, "point": point, "seed": seed}
            for task in entry["tasks"] for method in base["methods"] for point in study_points(config, study)
            for seed in entry["seeds"]]


def student_sizes(config: dict, study: str) -> dict[str, dict]:
    """Per point of a study (of a config with the exploration's experiments), its size as Tables B.1-B.2 give it:
    the width and depth factors (1 where the study sets none), the student's dimensions and the learning rate and
    batch (as micro-batches x accumulation) it trains with."""
    first = study_runs(config, study)[0]
    sizes = {}
    for point, entry in study_points(config, study).items():
        run = student_settings(config, first["experiment"], first["task"], first["student"], first["method"], point,
                               first["seed"])
        hp = run["hyperparameters"]
        sizes[point] = {"width": str(entry["values"].get("width", "1")), "depth": str(entry["values"].get("depth", "1")),
                        **{option: value for option, value in run["student"].items()
                           if option not in ("type", "tokens", "embeddings")},
                        "learning_rate": hp["learning_rate"], "batch_size": hp["batch_size"],
                        "gradient_accumulation_steps": hp.get("gradient_accumulation_steps", 1)}
    return sizes


def table_runs(config: dict) -> list[dict]:
    """The runs of every study that explores a row of thesis Table 5.1 (a study with a ``parameter``)."""
    studies = config["exploration"]["studies"]
    return [run for name, study in sorted(studies.items()) if study.get("parameter")
            for run in study_runs(config, name)]


def table_studies(config: dict) -> dict[str, dict]:
    """Per Table 5.1 study (by name; the table's rows follow the thesis's): its student, parameter, tasks and the
    labels of its points, in order."""
    spec = config["exploration"]
    return {name: {"student": study["student"], "parameter": study["parameter"], "tasks": study["tasks"],
                   "points": {point: entry["labels"] for point, entry in study_points(config, name).items()}}
            for name, study in sorted(spec["studies"].items()) if study.get("parameter")}


def figure_kind(config: dict, figure: str) -> str:
    return config["exploration"]["figures"][figure].get("kind", "curves")


def figures_of_kind(config: dict, *kinds: str) -> list[str]:
    return [figure for figure in config.get("exploration", {}).get("figures", {}) if figure_kind(config, figure) in kinds]


def exploration_problems(config: dict) -> list[str]:
    """What the schema cannot check, before the studies are expanded: studies name known students, embedding
    choices, sizes and points; figures name known studies; ``warmup_epochs`` has epochs to divide."""
    spec = config.get("exploration")
    if not spec:
        return []
    problems = []
    for name, student in spec["students"].items():
        if student["student"] not in config.get("students", {}):
            problems.append(f"exploration.students.{name}.student: unknown student {student['student']!r}")
    for name, study in spec["studies"].items():
        problems += _study_problems(config, name, study)
    for figure, entry in spec.get("figures", {}).items():
        unknown = [study for study in entry["studies"] if study not in spec["studies"]]
        if unknown:
            problems.append(f"exploration.figures.{figure}.studies: unknown studies {unknown}")
        raw = entry.get("unsmoothed")
        if raw and not problems and (raw["study"] not in entry["studies"]
                                     or raw["point"] not in study_points(config, raw["study"])):
            problems.append(f"exploration.figures.{figure}.unsmoothed: {raw['study']!r} has no point {raw['point']!r} "
                            "in this figure")
    return problems


def _study_problems(config: dict, name: str, study: dict) -> list[str]:
    spec, where, student = config["exploration"], f"exploration.studies.{name}", study["student"]
    if student not in spec["students"]:
        return [f"{where}.student: unknown exploration student {student!r}"]
    problems = []
    axes = study.get("axes") or {}
    settings = [study.get("fixed", {}), *(study.get("extra_points") or {}).values(),
                *(study.get("point_settings") or {}).values(),
                *(values for axis in axes.values() if isinstance(axis, dict) for values in axis.values())]
    choices = [s["embeddings"] for s in settings if "embeddings" in s] + list(axes.get("embeddings", []))
    problems += [f"{where}: unknown embeddings {choice!r}; known: {', '.join(spec.get('embeddings', {}))}"
                 for choice in choices if choice not in spec.get("embeddings", {})]
    for axis in SIZE_AXES:
        table = spec.get("sizes", {}).get(student, {}).get(axis, {})
        values = [str(v) for v in axes.get(axis, [])] + [s[axis] for s in settings if axis in s]
        problems += [f"{where}: no {axis} {value!r} in exploration.sizes.{student}.{axis}"
                     for value in values if value not in table]
    epochs = spec["students"][student].get("hyperparameters", {}).get("epochs")
    if not epochs and ("warmup_epochs" in axes or any("warmup_epochs" in s for s in settings)):
        problems.append(f"{where}: warmup_epochs needs exploration.students.{student}.hyperparameters.epochs")
    if not problems:  # every point can be named
        known = set(study_points({**config, "exploration": {**spec, "word_vectors": ""}}, name))
        unknown = sorted(set(study.get("point_settings") or {}) - known)
        if unknown:
            problems.append(f"{where}.point_settings: no points {unknown}; the points are {sorted(known)}")
    return problems


# What the rules of the exploration's figures and Table 5.1 read (rules/reporting_exploration.smk).


def drawn_runs(config: dict, figure: str) -> list[dict]:
    """The runs a figure draws: every run of its studies, or (Figs. B.8-B.9) its first study's first run."""
    runs = figure_runs(config, figure)
    return runs[:1] if figure_kind(config, figure) in ("explosion", "learning_rate") else runs


def run_files(runs: list[dict]) -> dict[str, list[str]]:
    """The learning curves and metrics of ``runs`` (exploration run records), in order."""
    return {name: [student_run_file(f"{name}.{extension}", experiment=run["experiment"], task=run["task"],
                                    student=run["student"], method=run["method"], point=run["point"],
                                    seed=run["seed"]) for run in runs]
            for name, extension in (("curves", "parquet"), ("metrics", "json"))}


def run_records(runs: list[dict]) -> list[dict]:
    keys = ("study", "task", "student_label", "point", "seed")
    return [{key: run[key] for key in keys} for run in runs]


def figure_title(config: dict, figure: str) -> str:
    title = config["exploration"]["figures"][figure].get("title")
    return f"Sučík (2020) Fig. {figure}" + (f": {title}" if title else "")


def figure_labels(config: dict, figure: str) -> dict[str, dict]:
    """Per study of the figure, point -> its value labels, in the study's order."""
    return {study: {point: entry["labels"] for point, entry in study_points(config, study).items()}
            for study in config["exploration"]["figures"][figure]["studies"]}


def figure_sizes(config: dict, figure: str) -> dict[str, dict]:
    """Per study of the figure, point -> its size (Tables B.1-B.2: factors, student dimensions, learning rate)."""
    return {study: student_sizes(config, study) for study in config["exploration"]["figures"][figure]["studies"]}


def figure_constraint(config: dict, *kinds: str) -> str:
    """The wildcard constraint of a rule drawing the figures of ``kinds``."""
    return "|".join(re.escape(figure) for figure in figures_of_kind(config, *kinds)) or "no-figures"


def protocol_config(config: dict, experiments: list[str] | None = None, teacher: str | None = None) -> dict:
    """What of a run's config a page checks against the papers' protocols (a rule's param, so that the page reruns
    when it changes; :func:`kdflow.reporting.protocols.account_of_run`): the exploration expanded, and of the
    experiments and teachers only ``experiments`` (the exploration's when None) and their teachers, so that an
    edit to another experiment reruns no page."""
    generated = exploration_experiments(config)  # the workflow's config may hold them already
    expanded = {**config, "experiments": {**config.get("experiments", {}), **generated}}
    names = list(generated) if experiments is None else experiments
    kept = {name: expanded["experiments"][name] for name in names if name in expanded["experiments"]}
    teachers = {name for name in (teacher, *(experiment["teacher"] for experiment in kept.values())) if name}
    others = {key: value for key, value in expanded.items()
              if key not in ("experiments", "teachers", "exploration", "paper_tables")}
    return canonical({**others, "experiments": kept,
                      "teachers": {name: expanded["teachers"][name] for name in sorted(teachers)}})


def result_config(config: dict, result: str) -> dict:
    """:func:`protocol_config` of a paper result: a paper table's experiments and teacher, the thesis's probing
    (no experiment) or its hyperparameter exploration (the exploration's experiments)."""
    if result in config.get("paper_tables", {}).get("tables", {}):
        return protocol_config(config, **paper_table_models(config, result))
    return protocol_config(config, [] if result == "probing" else None)
