"""The conventions of the code (issue 56): every value the computing jobs' code fixes that no config key names is
found mechanically (kdflow.reporting.conventions) and named in reference/protocols.yaml's `conventions`, with the
papers' value; the ledger then accounts for them as for any setting (tests/test_deviations.py)."""

import copy
import json

import pytest
import yaml
from conftest import REPO

from kdflow.reporting import conventions as conventions_module
from kdflow.reporting.conventions import (
    code_conventions,
    convention_problems,
    derived_conventions,
    job_modules,
    module_conventions,
)
from kdflow.reporting.protocols import DIFFERS, EQUAL, SILENT_SETTING, account, ledger_problems

PLANTED = '''"""A module a job imports."""

KEPT_FRACTION = 0.9


def pool(vectors, how="cls", layers=(1, 2), scale=None):
    return torch.nn.Linear(2, 2, bias=False), nn.functional.cross_entropy(vectors, reduction="sum"), print(end="")


class Head:
    def __init__(self, width=768):
        self.dropout = nn.Dropout(p=0.1)
        self.other = nn.Dropout(p=0.2)
'''


@pytest.fixture(scope="module")
def protocols():
    return yaml.safe_load((REPO / "reference/protocols.yaml").read_text())


@pytest.fixture(scope="module")
def found():
    return {**code_conventions(), **derived_conventions()}


def test_the_finder_reads_constants_defaults_and_builders_flags_from_source(tmp_path, monkeypatch):
    monkeypatch.setattr(conventions_module, "REPO", tmp_path)
    path = tmp_path / "kdflow" / "probing" / "pooling.py"
    path.parent.mkdir(parents=True)
    path.write_text(PLANTED)
    assert module_conventions(path) == {
        "kdflow/probing/pooling.py:KEPT_FRACTION": 0.9,
        "kdflow/probing/pooling.py:pool(how)": "cls",
        "kdflow/probing/pooling.py:pool(layers)": [1, 2],  # a tuple, as YAML pins it; scale=None means unset
        "kdflow/probing/pooling.py:pool>Linear(bias)": False,
        "kdflow/probing/pooling.py:pool>cross_entropy(reduction)": "sum",  # print's end= is not a builder's flag
        "kdflow/probing/pooling.py:Head.__init__(width)": 768,
        "kdflow/probing/pooling.py:Head.__init__>Dropout(p)": 0.1,
        "kdflow/probing/pooling.py:Head.__init__>Dropout#2(p)": 0.2,
    }


def test_the_finder_reads_the_modules_of_the_computing_jobs_and_not_reporting_or_planning():
    modules = {path.relative_to(REPO).as_posix() for path in job_modules()}
    assert {"kdflow/training/loop.py", "kdflow/probing/probe.py", "kdflow/students/embeddings.py",
            "kdflow/distillation/methods/hidden_methods.py", "kdflow/transfer/generation.py"} <= modules
    assert not any(module.startswith(("kdflow/reporting/", "kdflow/workflow/", "kdflow/export/")) for module in modules)


def test_the_optimiser_and_the_layer_maps_are_read_by_running_them(found):
    """What the BERT recipe decays (weights of two or more dimensions, embeddings among them) and ALP-KD's maps."""
    assert found["kdflow/training/loop.py:build_optimizer[weight_decay_all=False] decays"] == [
        "embedding.weight", "linear.weight", "lstm.weight_hh_l0", "lstm.weight_ih_l0"]
    assert found["kdflow/distillation/methods/registry.py:skip_mapping(12, 6)"] == [2, 4, 6, 8, 10]
    assert found["kdflow/distillation/methods/registry.py:buckets[overlap=False](12, 4)"] == [
        [1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]  # ALP-KD's example


def test_every_convention_of_the_code_is_named_once_with_its_current_value(protocols, found):
    assert convention_problems(protocols["conventions"], found) == []


def test_a_new_unnamed_convention_fails_and_says_where_to_name_it(protocols, found, tmp_path, monkeypatch):
    """A constant planted in a copy of a module a job imports (the probe's), as a new default would be."""
    copy_ = tmp_path / "kdflow" / "probing" / "probe.py"
    copy_.parent.mkdir(parents=True)
    copy_.write_text((REPO / "kdflow/probing/probe.py").read_text() + "\n\nNEW_SMOOTHING = 0.1\n")
    monkeypatch.setattr(conventions_module, "REPO", tmp_path)
    problems = convention_problems(protocols["conventions"], {**found, **module_conventions(copy_)})
    assert problems == ["a convention no entry names: kdflow/probing/probe.py:NEW_SMOOTHING = 0.1 (name it in "
                        "reference/protocols.yaml's conventions, with the papers' value, or as one without effect)"]


def test_a_changed_value_or_a_vanished_key_fails_until_the_papers_are_read_again(protocols, found):
    named = next(name for name, spec in protocols["conventions"].items() if spec["paper"] == "same")
    key = next(iter(protocols["conventions"][named]["code"]))
    changed = {**found, key: "something else"}
    assert convention_problems(protocols["conventions"], changed) == [
        f"conventions.{named}: {key} is \"something else\" in the code, pinned as "
        f"{json.dumps(protocols['conventions'][named]['code'][key])}: check what the papers say of the new value, "
        "then pin it"]
    gone = {k: v for k, v in found.items() if k != key}
    assert convention_problems(protocols["conventions"], gone) == [
        f"conventions.{named}: {key} is not in the code any more"]


def test_conventions_are_settings_of_the_results_they_change_and_the_ledger_names_every_departure(protocols):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    ledger = yaml.safe_load((REPO / "reference/deviations.yaml").read_text())
    found = account(config, protocols)
    rows = {(table, path): status for table, table_rows in found.items() for path, status, *_ in table_rows
            if path.startswith("conventions.")}
    statuses = {status for status in rows.values()}
    assert {EQUAL, DIFFERS, SILENT_SETTING} <= statuses
    for name, spec in protocols["conventions"].items():
        for table in spec["tables"]:
            assert (table, f"conventions.{name}") in rows, (name, table)
    # a departure found in the code needs its entry: drop the entries that name conventions and the ledger fails
    without = [entry for entry in ledger if "conventions." not in json.dumps(entry.get("setting", ""))]
    problems = ledger_problems(without, found, set(config["paper_tables"]["tables"]))
    departures = {path for (table, path), status in rows.items() if status == DIFFERS}
    assert departures and all(any(f"{path} is" in problem for problem in problems) for path in departures)
    # a convention whose code changes from the paper's value to another is a difference the ledger must name
    same = next(name for name, spec in protocols["conventions"].items() if spec["paper"] == "same" and spec["tables"])
    edited = copy.deepcopy(protocols)
    edited["conventions"][same]["paper"] = {"paper": "another value", "cite": "a planted citation"}
    problems = ledger_problems(ledger, account(config, edited), set(config["paper_tables"]["tables"]))
    assert any(problem.endswith(f"conventions.{same} is " + repr(json.loads(json.dumps(
        dict(protocols["conventions"][same]["code"])))) + " in the config, 'another value' in the paper, and the "
        "ledger has no entry for it") for problem in problems)
