"""The papers' protocols beside the config, and the ledger that accounts for every setting kdflow runs them with.

``reference/protocols.yaml`` says, per paper result (a key of the config's ``paper_tables.tables``, or one of the
thesis's :data:`OTHER_RESULTS`), what its paper ran, in the terms of kdflow's resolved job settings
(:mod:`kdflow.workflow.job_settings`). Each setting is the paper's value (cited by the section's ``source``, or written
``{paper: value, cite: where}``) or ``silent``:

* ``precision``: the number format of the jobs' forward passes;
* ``teachers.<teacher>``: the teacher's ``spec`` and ``hyperparameters`` on every task it is trained on;
* ``pseudo_heads``: the settings of the teacher's pseudo classifiers (Universal-KD);
* ``generation``: the generator's ``spec`` and ``hyperparameters``, the ``sampling`` of the augmented transfer
  sets and their ``hygiene``;
* ``experiments.<experiment>``: ``grid`` (axis -> values, compared as sets) or, for the thesis's exploration
  studies, ``points`` (every setting its named points set -> the values they take, compared as sets), and every
  student job's ``student.<student>`` (its resolved spec), ``transfer``, ``stages``, ``hyperparameters``,
  ``selection`` and ``method_options.<entry>`` (``method_options.*`` for the options every entry shares;
  ``"1 - beta"`` is a weight that complements another);
* ``probing``: the encodings' and the probe's settings;

and any of them with a ``task_settings.<task>`` override.

:func:`account` resolves every job of every paper result as the rules do (the first grid point and seed stand for
the rest, whose grid is compared on its own) and classifies each of its settings: the paper's value, a value that
differs from it, a setting the paper leaves ``silent``, or one ``protocols.yaml`` does not state. The ledger,
``reference/deviations.yaml``, must name each difference and each silent setting (an entry's ``setting`` is a
pattern over the setting paths, ``*`` matching any part, or a list of them); :func:`ledger_problems` lists what it
misses, the settings nobody has stated, and the entries that name nothing. So a new option of a student, a method
or the training loop fails the test suite until someone says where the papers stand on it. An entry with a
``setting`` also pins the ``values`` kdflow runs there (:func:`entry_values`), so that its prose cannot go stale
when the config changes a value it explains.

The ledger is written for config.yaml. :func:`account_of_run` compares any other run (the demo's, a user's) with a
paper's protocol, its models standing for the protocol's, and :func:`deviations_of` gives each paper result's
entries as they hold for that run (rule run_deviations), for its page.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import MISSING, fields
from fnmatch import fnmatchcase
from pathlib import Path

import yaml

from kdflow.core.deviation_entries import RUN_ONLY, STAND_IN
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.distillation.selection import SELECTION_RULE
from kdflow.probing.probe import ProbeSettings
from kdflow.reporting.conventions import code_conventions, convention_values, derived_conventions
from kdflow.reporting.ledger import read_ledger
from kdflow.workflow.catalog_cache import load_catalog
from kdflow.workflow.exploration import with_exploration
from kdflow.workflow.job_settings import (
    canonical,
    generator_settings,
    grid_points,
    hygiene_settings,
    method_entry,
    probing_settings,
    pseudo_head_settings,
    sampling_settings,
    student_settings,
    teacher_settings,
    transfer_of,
)

# What a run uses for a hyperparameter the config leaves out: a paper's value is compared with this.
HYPERPARAMETER_DEFAULTS = {f.name: f.default for f in fields(Hyperparameters) if f.default is not MISSING}
SILENT = "silent"
_UNSTATED = object()  # a setting protocols.yaml does not state

# Why a difference exists: a resource kdflow cannot have, a setting the paper leaves open (the config chooses), a
# bug of the original code not reproduced, a leak of evaluation data kdflow refuses, compute kdflow saves, a
# deliberate choice (said why), or something kdflow does not implement yet.
KINDS = ("unavailable", "paper silent", "original bug", "leak", "cost", "choice", "not implemented")
# The thesis's results that are not paper tables: its probing and prediction analysis (Chapter 6), its hyperparameter
# exploration (Table 5.1, Figs. B.1-B.7) and student sizes (Figs. B.8-B.12), config.yaml's `exploration`, and its
# data's class distribution (Fig. A.1).
OTHER_RESULTS = {"probing", "prediction_analysis", "hyperparameter_exploration", "student_sizes",
                 "class_distribution"}
ENTRY_KEYS = {"tables", "setting", "values", "kind", "paper", "kdflow", "why", "effect"}
REQUIRED_KEYS = ENTRY_KEYS - {"setting", "values"}
# What a resolved job setting is, against its paper.
EQUAL, DIFFERS, SILENT_SETTING, UNSTATED = "equal", "differs", "silent", "unstated"
_COMPLEMENT = re.compile(r"^1 - (\w+)$")


def account(config: dict, protocols: dict) -> dict[str, list[tuple[str, str, object, object]]]:
    """Per paper result, every resolved setting as ``(path, status, the paper's value, kdflow's value)``; the
    status is :data:`EQUAL`, :data:`DIFFERS`, :data:`SILENT_SETTING` or :data:`UNSTATED`. Settings that change no
    score (``protocols["without_effect"]``, by name) are left out. One row per setting path, not per job."""
    config = with_exploration(config)  # the thesis's exploration studies are experiments too
    catalog, values = load_catalog(), _code_values(protocols)
    return {table: _result_rows(config, protocol, table, protocols, catalog, values)
            for table, protocol in protocols["tables"].items()}


def _code_values(protocols: dict) -> dict:
    """kdflow's value of each of protocols.yaml's conventions, from its code."""
    conventions = protocols.get("conventions", {})
    return convention_values(conventions, {**code_conventions(), **derived_conventions()}) if conventions else {}


def _result_rows(config: dict, protocol: dict, table: str, protocols: dict, catalog: dict, values: dict) -> list:
    """One paper result's rows of :func:`account`: its jobs' settings and its code conventions, once per path."""
    rows = list(_table_rows(config, protocol, catalog)) + list(
        _convention_rows(protocols.get("conventions", {}), values, table))
    inert = set(protocols.get("without_effect", {}))
    return list({path: (path, status, paper, actual) for path, status, paper, actual in rows
                 if path.rsplit(".", 1)[-1] not in inert}.values())


def account_of_run(config: dict, protocols: dict, table: str, spec: dict | None = None) -> tuple[list[tuple], dict]:
    """:func:`account`'s rows for one paper result of any run's config (the demo's, a user's), whose teachers,
    experiments and students need not carry the names protocols.yaml gives them (config.yaml's): the rows of
    :func:`in_protocol_names`'s view (of what the run has of the protocol), and what each renamed protocol name
    stands for in the run."""
    view, names = in_protocol_names(with_exploration(config), protocols["tables"][table], spec or {})
    protocol = {key: ({name: value for name, value in stated.items() if name in view[key]}
                      if key in ("teachers", "experiments") else stated)
                for key, stated in protocols["tables"][table].items()}
    return _result_rows(view, protocol, table, protocols, load_catalog(), _code_values(protocols)), names


def deviations_of(ledger_path, paper_table: str, config: dict | None = None, protocols_path=None,
                  spec: dict | None = None) -> list[dict]:
    """The ledger entries (reference/deviations.yaml) of one paper table; none without a ledger. With the run's
    ``config`` and ``protocols_path`` (reference/protocols.yaml), checked against what the run ran
    (:func:`run_deviations`): an entry whose settings the run runs otherwise carries
    ``this_run``, one the run does not differ at is left out, and entries of kind :data:`STAND_IN` and
    :data:`RUN_ONLY` are added."""
    if not ledger_path:
        return []
    ledger = read_ledger(ledger_path)
    if config is None or protocols_path is None:
        return [entry for entry in ledger if paper_table in entry["tables"]]
    found = run_deviations(ledger, yaml.safe_load(Path(protocols_path).read_text()), config, paper_table, spec)
    stand_ins = [{"kind": STAND_IN, "tables": [paper_table], "ledger_name": name, "run_name": run_name}
                 for name, run_name in found["stand_ins"].items()]
    run_only = [{"kind": RUN_ONLY, "tables": [paper_table], "setting": setting, "paper": paper,
                 "this_run": {setting: values}} for setting, paper, values in found["unexplained"]]
    return stand_ins + found["entries"] + run_only


def run_deviations(ledger: list[dict], protocols: dict, config: dict, table: str, spec: dict | None = None) -> dict:
    """The ledger's entries of one paper result, checked against the run of ``config``: ``entries`` are the entries
    that name the result, each with ``this_run`` (setting -> the run's values) where the run runs a value at its
    settings that the entry does not pin (its prose explains config.yaml's values, not the run's), and without the
    entries whose settings the run does not differ at; ``unexplained`` are the run's differences from the paper and
    the settings it leaves silent that no entry names, as ``(setting, the paper's value, the run's values)``;
    ``stand_ins`` maps the protocol's (config.yaml's) teacher, experiment and student names to the run's."""
    rows, names = account_of_run(config, protocols, table, spec)
    found = {table: rows}
    entries = []
    for entry in (entry for entry in ledger if table in entry.get("tables", [])):
        if "setting" not in entry:
            entries.append(entry)
            continue
        running = entry_values({**entry, "tables": [table]}, found)
        pinned = {name: {_canonical(value) for value in values} for name, values in entry.get("values", {}).items()}
        other = {name: values for name, values in running.items()
                 if not {_canonical(value) for value in values} <= pinned.get(name, set())}
        if running:
            entries.append({**entry, "this_run": {_in_run_names(name, names): values for name, values in other.items()}}
                           if other else entry)
    unexplained = defaultdict(set)
    for path, status, paper, actual in rows:
        if status in (DIFFERS, SILENT_SETTING) and not any(_names(entry, table, path, status) for entry in ledger):
            unexplained[(_run_setting(path, names), _canonical(paper))].add(_canonical(actual))
    return {"entries": entries, "stand_ins": names,
            "unexplained": [(setting, json.loads(paper), [json.loads(value) for value in sorted(values)])
                            for (setting, paper), values in sorted(unexplained.items())]}


def _run_setting(path: str, names: dict[str, str]) -> str:
    """A setting path as a run's page names it: less its experiment and task, in the run's names, a teacher's
    prefixed ``teacher``."""
    setting = _in_run_names(_setting_name(path), names)
    return f"teacher {setting}" if path.startswith("teachers.") else setting


def _in_run_names(setting: str, names: dict[str, str]) -> str:
    return ".".join(names.get(part, part) for part in setting.split("."))


def in_protocol_names(config: dict, protocol: dict, spec: dict) -> tuple[dict, dict[str, str]]:
    """``config`` as ``protocol`` names it, and what each renamed name stands for in the run. Each of the
    protocol's experiments is the run's experiment of that name, else the first of the paper table's (``spec``'s)
    experiments that holds one of its students, else the next unused one; one the run lacks is left out. Its
    students are the protocol's ones the run has, or the run's one student standing for the protocol's one; the
    table's teacher (or its experiments') stands for the protocol's. So a demo's 3-layer student in a 6-layer
    table is compared with the paper's 6-layer student, and the difference shows."""
    run_experiments = _experiments_of(config, spec)
    unused, experiments, students, names = dict(run_experiments), {}, dict(config["students"]), {}
    for name, expected in protocol.get("experiments", {}).items():
        wanted = list(expected["student"]) if isinstance(expected.get("student"), dict) else []
        holding = [run for run, experiment in run_experiments.items() if set(wanted) & set(experiment["students"])]
        chosen = name if name in run_experiments else (holding or list(unused) or [None])[0] if spec else None
        if chosen is None:
            continue
        unused.pop(chosen, None)
        experiment = dict(run_experiments[chosen])
        kept = [student for student in experiment["students"] if student in wanted]
        if not kept and len(wanted) == 1 and len(experiment["students"]) == 1:
            [standing], [stand_in] = wanted, experiment["students"]
            names[standing], students[standing] = stand_in, config["students"][stand_in]
            experiment["task_students"] = {task: {standing: overrides[stand_in]}
                                           for task, overrides in experiment.get("task_students", {}).items()
                                           if stand_in in overrides}
            kept = wanted
        experiments[name] = {**experiment, "students": kept or experiment["students"]}
        if chosen != name:
            names[name] = chosen
    teachers = dict(config["teachers"])
    run_teacher = spec.get("teacher") or next((experiment["teacher"] for experiment in experiments.values()), None)
    for teacher in protocol.get("teachers", {}):
        if run_teacher is not None and teacher != run_teacher:
            teachers[teacher], names[teacher] = config["teachers"][run_teacher], run_teacher
            for experiment in experiments.values():
                if experiment["teacher"] == run_teacher:
                    experiment["teacher"] = teacher
    return {**config, "experiments": experiments, "students": students, "teachers": teachers}, names


def _experiments_of(config: dict, spec: dict) -> dict[str, dict]:
    """The run's experiments a paper result reads: its spec's, in order, or (a thesis result with no spec) all."""
    return {name: config["experiments"][name] for name in spec.get("experiments", config["experiments"])
            if name in config["experiments"]}


def _table_rows(config: dict, protocol: dict, catalog: dict):
    methods = catalog["methods"]
    yield from _compare(protocol.get("precision", _UNSTATED), config.get("precision", "auto"), "precision")
    for teacher, expected in protocol.get("teachers", {}).items():
        for task in config["teachers"][teacher]["tasks"]:
            actual = teacher_settings(config, teacher, task)
            actual["hyperparameters"] = _with_defaults(actual["hyperparameters"])
            yield from _compare(_with_task(expected, task), actual, f"teachers.{teacher}.{task}")
    experiments = [config["experiments"][name] for name in protocol.get("experiments", {})]
    if any("head_logits" in methods[method_entry(experiment, entry)[0]]["needs"]
           for experiment in experiments for entry in experiment["methods"]):
        for teacher in {experiment["teacher"] for experiment in experiments}:
            yield from _compare(protocol.get("pseudo_heads", _UNSTATED),
                                _with_defaults(pseudo_head_settings(config, teacher)), f"pseudo_heads.{teacher}")
    if any(transfer_of(experiment) == "augmented" for experiment in experiments):
        actual = {**generator_settings(config), "sampling": sampling_settings(config),
                  "hygiene": hygiene_settings(config, "augmented")}
        actual["hyperparameters"] = _with_defaults(actual["hyperparameters"])
        yield from _compare(protocol.get("generation", _UNSTATED), actual, "generation")
    if "probing" in protocol:
        actual = probing_settings(config)
        defaults = {f.name: list(f.default) if isinstance(f.default, tuple) else f.default
                    for f in fields(ProbeSettings) if f.name not in ("device", "precision")}
        actual["probe"] = {**defaults, **actual["probe"]}
        yield from _compare(protocol["probing"], actual, "probing")
    for name, expected in protocol.get("experiments", {}).items():
        experiment = config["experiments"][name]
        searched = set()
        for kind, axes in (("grid", experiment.get("grid") or {}), ("points", _point_axes(experiment))):
            stated = expected.get(kind, {})
            searched |= set(stated)
            for axis in sorted(set(stated) | set(axes)):
                if _as_set(axes.get(axis, [])) != _as_set(stated.get(axis, [])):
                    yield f"experiments.{name}.{kind}.{axis}", DIFFERS, stated.get(axis), axes.get(axis)
        for task in experiment["tasks"]:
            yield from _job_rows(config, name, task, _with_task(expected, task), searched, catalog)


def _convention_rows(conventions: dict, values: dict, table: str):
    """The conventions of the code (:mod:`kdflow.reporting.conventions`) that change ``table``'s result, as settings
    ``conventions.<name>``: kdflow's value is its code's, the paper's ``same`` (kdflow's), ``silent`` or a value of
    its own (``{paper: ..., cite: ...}``)."""
    for name, spec in conventions.items():
        if table not in spec.get("tables", []):
            continue
        paper = spec["paper"]
        path, actual = f"conventions.{name}", values[name]
        if paper == "same":
            yield path, EQUAL, actual, actual
        elif paper == SILENT:
            yield path, SILENT_SETTING, SILENT, actual
        else:
            yield path, DIFFERS, paper["paper"], actual


def _as_set(values: list) -> list[str]:
    return sorted(repr(canonical(value)) for value in values)


def _point_axes(experiment: dict) -> dict[str, list]:
    """An experiment of named points (the thesis's exploration): every setting its points set, with the values
    they take (each once), compared with the paper's as a set like a grid's axis."""
    axes = {}
    for point in experiment.get("points", {}).values():
        for name, value in point.items():
            if value not in axes.setdefault(name, []):
                axes[name].append(value)
    return axes


def _job_rows(config: dict, name: str, task: str, expected: dict, searched: set[str], catalog: dict):
    """The settings of the student jobs of one experiment and task: one job per student and method entry (the
    first grid point and seed stand for the rest; the grid's axes are compared on their own)."""
    experiment = config["experiments"][name]
    prefix = f"experiments.{name}.{task}"
    yield from _compare(expected.get("transfer", _UNSTATED), transfer_of(experiment), f"{prefix}.transfer")
    yield from _compare(expected.get("selection", _UNSTATED), SELECTION_RULE, f"{prefix}.selection")
    student_axes = {axis.removeprefix("student.") for axis in searched}
    for student in experiment["students"]:
        for entry in experiment["methods"]:
            point = next(iter(grid_points(experiment, entry)))
            settings = effective_settings(student_settings(config, name, task, student, entry, point,
                                                           experiment["seeds"][0]), catalog)
            yield from _compare(expected.get("student", {}).get(student, _UNSTATED), settings["student"],
                                f"{prefix}.student.{student}", searched=student_axes)
            yield from _compare(expected.get("stages", _UNSTATED), settings["stages"], f"{prefix}.stages")
            yield from _compare(expected.get("hyperparameters", {}), settings["hyperparameters"],
                                f"{prefix}.hyperparameters", searched=searched)
            stated = expected.get("method_options", {})
            options = settings["method_options"]
            shared = {key: value for key, value in stated.get("*", {}).items() if key in options}
            own = stated.get(entry, {})
            wanted = own if own == SILENT else {key: _complement(value, options)
                                                for key, value in {**shared, **own}.items()}
            yield from _compare(wanted, options, f"{prefix}.method_options.{entry}", searched=searched)


def _complement(value, options: dict):
    """A paper's weight written ``"1 - beta"``: 1 minus the job's beta."""
    match = _COMPLEMENT.match(value) if isinstance(value, str) else None
    return 1.0 - options[match.group(1)] if match and match.group(1) in options else value


def _compare(expected, actual, path: str, searched: set[str] = frozenset()):
    """``(path, status, paper, actual)`` for every leaf of ``actual`` and every setting ``expected`` states that
    ``actual`` lacks; a leaf named in ``searched`` is a grid axis, compared with the grid."""
    if isinstance(expected, dict) and set(expected) == {"paper", "cite"}:
        expected = expected["paper"]
    if expected is _UNSTATED:
        for leaf, value in _leaves(actual, path):
            yield leaf, UNSTATED, None, value
    elif expected == SILENT:
        for leaf, value in _leaves(actual, path):
            if leaf.removeprefix(f"{path}.").split(".")[0] not in searched:
                yield leaf, SILENT_SETTING, SILENT, value
    elif isinstance(expected, dict) and (isinstance(actual, dict) or actual is None):
        actual = actual or {}
        for key in sorted(set(actual) | set(expected)):
            if key in searched:
                continue
            yield from _compare(expected.get(key, _UNSTATED), actual.get(key), f"{path}.{key}")
    else:
        yield path, EQUAL if _equal(expected, actual) else DIFFERS, expected, actual


def _leaves(value, path: str):
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}")
    else:
        yield path, value


def _equal(expected, actual) -> bool:
    if isinstance(expected, (int, float)) and not isinstance(expected, bool) and isinstance(actual, (int, float)):
        return abs(expected - actual) <= 1e-12 * max(1.0, abs(expected))
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(_equal(e, a) for e, a in zip(expected, actual))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return set(expected) == set(actual) and all(_equal(expected[k], actual[k]) for k in expected)
    return expected == actual


def _with_task(section: dict, task: str) -> dict:
    """``section`` with its ``task_settings.<task>`` merged in, mapping by mapping."""
    return _merge({key: value for key, value in section.items() if key != "task_settings"},
                  section.get("task_settings", {}).get(task, {}))


def _merge(base, override: dict) -> dict:
    merged = dict(base) if isinstance(base, dict) else {}
    for key, value in override.items():
        merged[key] = _merge(merged.get(key, {}), value) if isinstance(value, dict) else value
    return merged


def _with_defaults(hyperparameters: dict) -> dict:
    """A run's hyperparameters with the ones the config leaves out as the run uses them."""
    return {**HYPERPARAMETER_DEFAULTS, **hyperparameters}


def effective_settings(settings: dict, catalog: dict) -> dict:
    """A student job's settings with what the config leaves out filled in as the job will run it: the defaults
    of the hyperparameters, of the student and of the method (``catalog``: :func:`load_catalog`, with its complement
    weights, e.g. alpha = 1 - beta), and every stage's epochs (the one place a job's epochs are stated)."""
    method = catalog["methods"][settings["method"]]
    options = {**method["defaults"], **settings["method_options"]}
    for weight, other in method["complement"].items():
        if options.get(weight) is None:
            options[weight] = 1.0 - options[other]
    student = {**catalog["students"][settings["student"]["type"]]["defaults"], **settings["student"]}
    hyperparameters = _with_defaults(settings["hyperparameters"])
    epochs = hyperparameters.pop("epochs")  # a stage's own epochs override it (kdflow.distillation.distill)
    stages = [{"epochs": epochs, **stage} for stage in settings["stages"]]
    return {**settings, "hyperparameters": hyperparameters, "method_options": options, "student": student,
            "stages": stages}


def _setting_name(path: str) -> str:
    """A setting path less its experiment (or teacher) and task: ``experiments.x.cola.hyperparameters.seed`` ->
    ``hyperparameters.seed``, ``experiments.x.grid.beta`` -> ``grid.beta``."""
    parts = path.split(".")
    if parts[0] in ("experiments", "teachers") and len(parts) > 3:
        return ".".join(parts[2:] if parts[2] in ("grid", "points") else parts[3:])
    return path


def _canonical(values) -> str:
    return json.dumps(values, sort_keys=True)


def _patterns(entry: dict) -> list[str]:
    setting = entry.get("setting", [])
    return [setting] if isinstance(setting, str) else list(setting)


def _names(entry: dict, table: str, path: str, status: str) -> bool:
    """Whether ``entry`` accounts for setting ``path`` of ``table``: a difference needs an entry that says why kdflow
    differs (any kind but paper silent), a silent setting any entry. So a broad pattern over settings a paper leaves
    silent cannot swallow a later difference from a value the paper states."""
    return (status in (DIFFERS, SILENT_SETTING) and table in entry.get("tables", [])
            and not (status == DIFFERS and entry.get("kind") == "paper silent")
            and any(fnmatchcase(path, pattern) for pattern in _patterns(entry)))


def entry_values(entry: dict, found: dict[str, list[tuple]]) -> dict[str, list]:
    """Every value kdflow runs at the settings ``entry`` names: setting (its path within a job, e.g.
    ``hyperparameters.learning_rate``, or within an experiment, e.g. ``grid.beta``) -> its distinct values, sorted.
    This is what the entry's ``values`` pins."""
    values = defaultdict(set)
    for table in entry.get("tables", []):
        for path, status, _, actual in found.get(table, []):
            if _names(entry, table, path, status):
                values[_setting_name(path)].add(json.dumps(actual, sort_keys=True))
    return {name: [json.loads(value) for value in sorted(values[name])] for name in sorted(values)}


def ledger_problems(ledger: list[dict], found: dict[str, list[tuple]], tables: set[str]) -> list[str]:
    """What keeps the ledger from being complete and exact: malformed entries, settings no paper protocol states,
    differences and silent settings no entry names (:func:`_names`), entries whose ``setting`` names none (stale),
    and entries whose pinned ``values`` are no longer what kdflow runs."""
    problems = []
    for number, entry in enumerate(ledger, 1):
        where = f"deviations entry {number} ({str(entry.get('kdflow', '?'))[:50]!r})"
        missing = REQUIRED_KEYS - set(entry)
        if missing or set(entry) - ENTRY_KEYS:
            problems.append(f"{where}: needs {sorted(missing)}, allows only {sorted(ENTRY_KEYS)}")
            continue
        if "values" in entry and "setting" not in entry:
            problems.append(f"{where}: pins values but names no setting")
        if entry["kind"] not in KINDS:
            problems.append(f"{where}: kind {entry['kind']!r} is not one of {', '.join(KINDS)}")
        unknown = set(entry["tables"]) - tables - OTHER_RESULTS
        if unknown:
            problems.append(f"{where}: unknown paper tables {sorted(unknown)}")
        for pattern in _patterns(entry):
            if not any(_names({**entry, "setting": pattern}, table, path, status) for table in entry["tables"]
                       for path, status, *_ in found.get(table, [])):
                problems.append(f"{where}: setting {pattern!r} names no difference from a paper and no setting it "
                                "leaves silent (stale entry)")
        running = entry_values(entry, found) if "setting" in entry else None
        if running and _canonical(entry.get("values")) != _canonical(running):
            problems.append(f"{where}: kdflow runs values: {json.dumps(running)} where the entry pins "
                            f"{json.dumps(entry.get('values'))}; check its kdflow, why and effect, then pin these")
    for table, rows in found.items():
        for path, status, paper, actual in rows:
            if status == UNSTATED:
                problems.append(f"{table}: {path} ({actual!r} in kdflow) is not in reference/protocols.yaml: state "
                                "the paper's value with its citation, or silent")
            elif status in (DIFFERS, SILENT_SETTING) and not any(
                    _names(entry, table, path, status) for entry in ledger):
                said = "the paper leaves it silent" if status == SILENT_SETTING else f"{paper!r} in the paper"
                problems.append(f"{table}: {path} is {actual!r} in the config, {said}, and the ledger has no entry "
                                "for it")
    return problems
