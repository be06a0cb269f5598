"""The deviation ledger: every difference between config.yaml and a paper's stated protocol has an entry, and every
entry with a setting covers one (reference/protocols.yaml, reference/deviations.yaml, kdflow.workflow.protocols)."""

import copy

import pytest
import yaml
from conftest import REPO

from kdflow.workflow.protocols import differences, ledger_problems


def load(name):
    return yaml.safe_load((REPO / name).read_text())


@pytest.fixture(scope="module")
def config():
    return load("config.yaml")


@pytest.fixture(scope="module")
def protocols():
    return load("reference/protocols.yaml")


def test_every_paper_table_states_its_papers_protocol(config, protocols):
    assert set(protocols) == set(config["paper_tables"]["tables"])


def test_every_difference_from_the_papers_protocol_is_in_the_ledger(config, protocols):
    found = differences(config, protocols)
    assert ledger_problems(load("reference/deviations.yaml"), found, set(config["paper_tables"]["tables"])) == []


def problems_of(ledger, config, protocols):
    return ledger_problems(ledger, differences(config, protocols), set(config["paper_tables"]["tables"]))


def test_a_new_difference_without_an_entry_fails(config, protocols):
    ledger = load("reference/deviations.yaml")
    edited = copy.deepcopy(config)
    edited["experiments"]["alp_kd_table2"]["hyperparameters"]["batch_size"] = 64
    before = problems_of(ledger, config, protocols)
    problems = [problem for problem in problems_of(ledger, edited, protocols) if problem not in before]
    assert problems == ["alp_kd_table2: experiments.alp_kd_table2.cola.hyperparameters.batch_size is 64 in the "
                        "config, 32 in the paper, and the ledger has no entry for it"] + [
        f"alp_kd_table2: experiments.alp_kd_table2.{task}.hyperparameters.batch_size is 64 in the config, 32 in the "
        "paper, and the ledger has no entry for it" for task in ["sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte"]]


def test_a_stale_or_malformed_entry_fails(config, protocols):
    ledger = load("reference/deviations.yaml") + [
        {"tables": ["alp_kd_table2"], "setting": "experiments.alp_kd_table2.*.hyperparameters.batch_size",
         "kind": "cost", "what": "a stale entry", "why": "-", "effect": "-"},
        {"tables": ["no_such_table"], "kind": "guess", "what": "malformed", "why": "-", "effect": "-"},
        {"tables": ["alp_kd_table2"], "what": "no kind"},
    ]
    before = problems_of(load("reference/deviations.yaml"), config, protocols)
    problems = [problem for problem in problems_of(ledger, config, protocols) if problem not in before]
    assert [problem.split(": ", 1)[1].split(" ")[0] for problem in problems] == ["setting", "kind", "unknown", "needs"]


def test_settings_a_config_leaves_out_compare_as_the_job_runs_them(protocols):
    """A paper's value is compared with what the job uses, defaults included (the method's complement weights)."""
    config = load("config.yaml")
    found = differences(config, {"t": {"experiments": {"alp_kd_table2": {
        "hyperparameters": {"optimizer": "adamw", "max_grad_norm": 1.0},
        "method_options": {"kd": {"temperature": 1.0}, "pkd": {"alpha": 1.0}}}}}})["t"]  # alpha = 1 - beta = 1 - 0
    assert found == []
    found = differences(config, {"t": {"experiments": {"alp_kd_table2": {
        "method_options": {"kd": {"temperature": 2.0}}}}}})["t"]
    assert [path for path, *_ in found][:1] == ["experiments.alp_kd_table2.cola.method_options.kd.temperature"]
