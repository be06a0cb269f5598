"""The papers' stated protocols beside the config, and the ledger of every difference between them.

``reference/protocols.yaml`` states, per paper table (a key of the config's ``paper_tables.tables``), what its
paper ran, in the terms of kdflow's resolved job settings (:mod:`kdflow.workflow.config`):

* ``teachers.<teacher>``: a subset of the teacher's settings, on every task it is trained on
  (``task_settings.<task>`` adds per-task values);
* ``generation``: a subset of the generator's ``spec`` and ``hyperparameters`` and of the ``sampling`` settings
  of the augmented transfer sets;
* ``experiments.<experiment>``: ``grid`` (axis -> values, compared as sets), and a subset of the settings of every
  student job: ``student.<student>`` (its resolved spec), ``stages``, ``hyperparameters`` (grid axes left out),
  ``method_options.<entry>``, each with a ``task_settings.<task>`` override.

:func:`differences` resolves the config and lists every setting that differs, each named by a path such as
``experiments.thesis_table52_bert_s.cola.hyperparameters.learning_rate``. ``reference/deviations.yaml``, the
ledger, must cover each of them (an entry's ``setting`` is a pattern over these paths, ``*`` matching any part):
the test suite fails on a difference without an entry and on an entry that covers none. Entries without a
``setting`` record differences no config value shows (an unavailable resource, a bug of the original code that is
not reproduced). The report shows each paper table's entries under it.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from fnmatch import fnmatchcase

from kdflow.core.hyperparameters import Hyperparameters
from kdflow.workflow.catalog import load_catalog
from kdflow.workflow.config import (
    generator_settings,
    grid_points,
    sampling_settings,
    student_settings,
    teacher_settings,
)

# What a run uses for a hyperparameter the config leaves out: a paper's value is compared with this.
HYPERPARAMETER_DEFAULTS = {f.name: f.default for f in fields(Hyperparameters) if f.default is not MISSING}

# Why a difference exists: a resource kdflow cannot have, a setting the paper leaves open (the config chooses), a
# bug of the original code not reproduced, a leak of evaluation data kdflow refuses, compute kdflow saves, or a
# deliberate choice (said why), or something kdflow does not implement yet.
KINDS = ("unavailable", "paper silent", "original bug", "leak", "cost", "choice", "not implemented")
# The thesis's results that are not paper tables: its probing and prediction analysis (Chapter 6), its hyperparameter
# exploration (Table 5.1, Figs. B.1-B.7) and student sizes (Figs. B.8-B.12), config.yaml's `exploration`.
OTHER_RESULTS = {"probing", "prediction_analysis", "hyperparameter_exploration", "student_sizes"}
ENTRY_KEYS = {"tables", "setting", "kind", "what", "why", "effect"}


def _leaves(expected, actual, path: str):
    """(path, expected, actual) for every leaf of ``expected`` that ``actual`` does not match."""
    if isinstance(expected, dict):
        actual = actual if isinstance(actual, dict) else {}
        for key, value in expected.items():
            yield from _leaves(value, actual.get(key), f"{path}.{key}")
    elif not _equal(expected, actual):
        yield path, expected, actual


def _equal(expected, actual) -> bool:
    if isinstance(expected, (int, float)) and not isinstance(expected, bool) and isinstance(actual, (int, float)):
        return abs(expected - actual) <= 1e-12 * max(1.0, abs(expected))
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(_equal(e, a) for e, a in zip(expected, actual))
    return expected == actual


def _with_task(section: dict, task: str) -> dict:
    """``section`` with its ``task_settings.<task>`` merged in, mapping by mapping."""
    return _merge({key: value for key, value in section.items() if key != "task_settings"},
                  section.get("task_settings", {}).get(task, {}))


def _merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        merged[key] = _merge(merged.get(key, {}), value) if isinstance(value, dict) else value
    return merged


def differences(config: dict, protocols: dict) -> dict[str, list[tuple[str, object, object]]]:
    """Per paper table, every (setting path, the paper's value, the config's value) that differs."""
    found = {}
    for table, protocol in protocols.items():
        rows = []
        for teacher, expected in protocol.get("teachers", {}).items():
            for task in config["teachers"][teacher]["tasks"]:
                actual = teacher_settings(config, teacher, task)
                actual["hyperparameters"] = {**HYPERPARAMETER_DEFAULTS, **actual["hyperparameters"]}
                rows += _leaves(_with_task(expected, task), actual, f"teachers.{teacher}.{task}")
        if "generation" in protocol:
            actual = {**generator_settings(config), "sampling": sampling_settings(config)}
            actual["hyperparameters"] = {**HYPERPARAMETER_DEFAULTS, **actual["hyperparameters"]}
            rows += _leaves(protocol["generation"], actual, "generation")
        for name, expected in protocol.get("experiments", {}).items():
            experiment = config["experiments"][name]
            grid = experiment.get("grid") or {}
            for axis, values in expected.get("grid", {}).items():
                if sorted(map(repr, grid.get(axis, []))) != sorted(map(repr, values)):
                    rows.append((f"experiments.{name}.grid.{axis}", values, grid.get(axis)))
            for task in experiment["tasks"]:
                rows += _job_differences(config, name, task, _with_task(expected, task))
        unique = {path: (path, paper, actual) for path, paper, actual in rows}  # one per setting, not per job
        found[table] = list(unique.values())
    return found


def _job_differences(config: dict, name: str, task: str, expected: dict):
    """Differences of the student jobs of one experiment and task: one job per student and method entry (the
    first grid point and seed stand for the rest; the grid axes themselves are compared separately)."""
    experiment = config["experiments"][name]
    axes = set(experiment.get("grid") or {})
    for student in experiment["students"]:
        for entry in experiment["methods"]:
            point = next(iter(grid_points(experiment, entry)))
            settings = effective_settings(student_settings(config, name, task, student, entry, point,
                                                           experiment["seeds"][0]))
            prefix = f"experiments.{name}.{task}"
            if student in expected.get("student", {}):
                yield from _leaves(expected["student"][student], settings["student"], f"{prefix}.student.{student}")
            if "stages" in expected:
                yield from _leaves(expected["stages"], settings["stages"], f"{prefix}.stages")
            hyperparameters = {k: v for k, v in expected.get("hyperparameters", {}).items() if k not in axes}
            yield from _leaves(hyperparameters, settings["hyperparameters"], f"{prefix}.hyperparameters")
            if entry in expected.get("method_options", {}):
                options = {k: v for k, v in expected["method_options"][entry].items() if k not in axes}
                yield from _leaves(options, settings["method_options"], f"{prefix}.method_options.{entry}")


def effective_settings(settings: dict) -> dict:
    """A student job's settings with what the config leaves out filled in as the job will run it: the defaults
    of the hyperparameters, of the student and of the method (with its complement weights, e.g. alpha = 1 - beta)."""
    catalog = load_catalog()
    method = catalog["methods"][settings["method"]]
    options = {**method["defaults"], **settings["method_options"]}
    for weight, other in method["complement"].items():
        if options.get(weight) is None:
            options[weight] = 1.0 - options[other]
    student = {**catalog["students"][settings["student"]["type"]]["defaults"], **settings["student"]}
    return {**settings, "hyperparameters": {**HYPERPARAMETER_DEFAULTS, **settings["hyperparameters"]},
            "method_options": options, "student": student}


def ledger_problems(ledger: list[dict], found: dict[str, list[tuple]], tables: set[str]) -> list[str]:
    """What keeps the ledger from being complete and exact: malformed entries, differences no entry covers, and
    entries whose ``setting`` covers no difference (stale)."""
    problems = []
    for number, entry in enumerate(ledger, 1):
        where = f"deviations entry {number} ({entry.get('what', '?')[:50]!r})"
        missing = {"tables", "kind", "what", "why", "effect"} - set(entry)
        if missing or set(entry) - ENTRY_KEYS:
            problems.append(f"{where}: needs {sorted(missing)}, allows only {sorted(ENTRY_KEYS)}")
            continue
        if entry["kind"] not in KINDS:
            problems.append(f"{where}: kind {entry['kind']!r} is not one of {', '.join(KINDS)}")
        unknown = set(entry["tables"]) - tables - OTHER_RESULTS
        if unknown:
            problems.append(f"{where}: unknown paper tables {sorted(unknown)}")
        if "setting" in entry and not any(fnmatchcase(path, entry["setting"])
                                          for table in entry["tables"] for path, *_ in found.get(table, [])):
            problems.append(f"{where}: setting {entry['setting']!r} differs from no paper's protocol (stale entry)")
    for table, rows in found.items():
        for path, paper, actual in rows:
            if not any(table in e.get("tables", []) and "setting" in e and fnmatchcase(path, e["setting"])
                       for e in ledger):
                problems.append(f"{table}: {path} is {actual!r} in the config, {paper!r} in the paper, and the ledger "
                                "has no entry for it")
    return problems

