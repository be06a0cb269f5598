"""The deviation ledger is complete by construction: every setting of every job of every paper result is stated in
reference/protocols.yaml (the paper's value or `silent`), and every difference and silent setting has an entry in
reference/deviations.yaml (kdflow.reporting.protocols)."""

import copy
import re

import pytest
import yaml
from conftest import REPO

from kdflow.reporting import protocols as protocols_module
from kdflow.reporting.protocols import DIFFERS, EQUAL, KINDS, SILENT_SETTING, UNSTATED, account, ledger_problems


def load(name):
    return yaml.safe_load((REPO / name).read_text())


@pytest.fixture(scope="module")
def config():
    return load("config.yaml")


@pytest.fixture(scope="module")
def protocols():
    return load("reference/protocols.yaml")


@pytest.fixture(scope="module")
def ledger():
    return load("reference/deviations.yaml")


def problems_of(ledger, config, protocols):
    return ledger_problems(ledger, account(config, protocols), set(config["paper_tables"]["tables"]))


def test_every_paper_result_states_its_papers_protocol(config, protocols):
    assert set(protocols["tables"]) == set(config["paper_tables"]["tables"]) | {
        "probing", "hyperparameter_exploration", "student_sizes"}


def test_every_setting_is_stated_and_every_difference_and_silence_is_in_the_ledger(config, protocols, ledger):
    assert problems_of(ledger, config, protocols) == []


def test_the_ledger_has_structured_entries_of_the_kinds_its_header_lists(ledger):
    header = (REPO / "reference/deviations.yaml").read_text().split("\n- ", 1)[0]
    listed = re.search(r"^# kinds: (.+)$", header, re.MULTILINE).group(1).split(" | ")
    assert listed == list(KINDS)
    assert {entry["kind"] for entry in ledger} == set(KINDS)
    assert all(str(entry["paper"]).strip() and str(entry["kdflow"]).strip() for entry in ledger)


def test_a_new_difference_without_an_entry_fails(config, protocols, ledger):
    edited = copy.deepcopy(config)
    edited["experiments"]["alp_kd_table2"]["hyperparameters"]["batch_size"] = 64
    before = problems_of(ledger, config, protocols)
    problems = [problem for problem in problems_of(ledger, edited, protocols) if problem not in before]
    assert problems == [
        f"alp_kd_table2: experiments.alp_kd_table2.{task}.hyperparameters.batch_size is 64 in the config, 32 in the "
        "paper, and the ledger has no entry for it" for task in ["cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli",
                                                               "rte"]]


def test_a_small_change_of_a_numeric_setting_is_a_difference(config, protocols, ledger):
    """Learning rates are far below 1: a tolerance scaled to 1 would call 5e-5 and 7.5e-5 equal. Only float rounding
    (a value computed, as "1 - beta" is) compares equal."""
    edited = copy.deepcopy(config)
    teacher = edited["teachers"]["bert_large"]["hyperparameters"]
    assert teacher["learning_rate"] == 5e-5  # the thesis's Table 4.1, as protocols.yaml states it
    teacher["learning_rate"] = 7.5e-5
    before = problems_of(ledger, config, protocols)
    problems = [problem for problem in problems_of(ledger, edited, protocols) if problem not in before]
    assert sorted(problems) == sorted(
        f"{table}: teachers.bert_large.{task}.hyperparameters.learning_rate is 7.5e-05 in the config, 5e-05 in the "
        "paper, and the ledger has no entry for it"
        for table in ["thesis_table52", "hyperparameter_exploration", "student_sizes"] for task in ["cola", "sst2",
                                                                                                    "sara"])
    teacher["learning_rate"] = 5e-5 * (1 + 1e-15)  # one rounding away: not a difference
    assert teacher["learning_rate"] != 5e-5 and problems_of(ledger, edited, protocols) == before


def test_a_new_training_option_fails_until_the_protocols_state_it(config, protocols, ledger, monkeypatch):
    """An option added to the training loop reaches every job; until protocols.yaml says where each paper stands on
    it, the suite fails for every paper result."""
    monkeypatch.setitem(protocols_module.HYPERPARAMETER_DEFAULTS, "label_smoothing", 0.0)
    problems = problems_of(ledger, config, protocols)
    assert ("alp_kd_table1: experiments.alp_kd_table1.cola.hyperparameters.label_smoothing (0.0 in kdflow) is not in "
            "reference/protocols.yaml: state the paper's value with its citation, or silent") in problems
    tables = {problem.split(":")[0] for problem in problems if not problem.startswith("deviations entry")}
    assert tables == set(protocols["tables"]) - {"probing"}  # every result with student or teacher jobs


def test_a_silent_setting_without_an_entry_fails(config, protocols, ledger):
    without = [entry for entry in ledger if entry.get("setting") != "precision"]
    problems = problems_of(without, config, protocols)
    assert "probing: precision is 'auto' in the config, the paper leaves it silent, and the ledger has no entry for " \
           "it" in problems
    assert len(problems) == len(protocols["tables"])


def test_a_changed_value_fails_where_an_entry_pins_it(config, protocols, ledger):
    """An entry's prose explains the values it pins: when the config runs another, the suite fails until someone
    rereads the entry and pins the new value."""
    changed = {**config, "precision": "bf16"}
    problems = problems_of(ledger, changed, protocols)
    assert len(problems) == 1 and problems[0].startswith("deviations entry")
    assert 'kdflow runs values: {"precision": ["bf16"]} where the entry pins {"precision": ["auto"]}' in problems[0]
    pinned = [{**entry, "values": {"precision": ["bf16"]}} if entry.get("setting") == "precision" else entry
              for entry in ledger]
    assert problems_of(pinned, changed, protocols) == []
    unpinned = [{key: value for key, value in entry.items() if key != "values"} for entry in ledger]
    assert any("where the entry pins null" in problem for problem in problems_of(unpinned, config, protocols))


def test_a_stale_or_malformed_entry_fails(config, protocols, ledger):
    extra = [
        {"tables": ["alp_kd_table2"], "setting": "experiments.alp_kd_table2.*.hyperparameters.batch_size",
         "kind": "cost", "paper": "32", "kdflow": "a stale entry", "why": "-", "effect": "-"},
        {"tables": ["no_such_table"], "kind": "guess", "paper": "-", "kdflow": "malformed", "why": "-", "effect": "-"},
        {"tables": ["alp_kd_table2"], "kdflow": "no kind", "what": "an old field"},
    ]
    problems = problems_of(ledger + extra, config, protocols)
    assert [problem.split(": ", 1)[1].split(" ")[0] for problem in problems] == ["setting", "kind", "unknown", "needs"]


def test_an_exploration_studys_explored_values_compare_as_a_set(config, protocols, ledger):
    """Thesis Table 5.1: a value added to a study's points (or one dropped) is a difference from the paper."""
    edited = copy.deepcopy(config)
    edited["exploration"]["studies"]["batch_lstm_s"]["axes"]["batch_size"].append(1024)
    problems = [problem for problem in problems_of(ledger, edited, protocols)
                if problem not in problems_of(ledger, config, protocols)]
    assert problems == ["hyperparameter_exploration: experiments.exploration_batch_lstm_s.points.batch_size is "
                        "[32, 50, 128, 256, 512, 1024] in the config, [32, 50, 128, 256, 512] in the paper, and the "
                        "ledger has no entry for it"]


def test_settings_compare_as_the_job_runs_them():
    """Defaults the config leaves out, a weight stated as the complement of another ("1 - beta"), a value with its
    own citation and a silent section each classify as the job runs them."""
    config = load("config.yaml")
    stated = {"tables": {"t": {"experiments": {"alp_kd_table2": {
        "grid": {"beta": [0.7, 0.5, 0.2, 0.0]},
        "hyperparameters": {"optimizer": "adamw", "max_grad_norm": {"paper": 1.0, "cite": "somewhere"},
                            "batch_size": 64, "warmup_ratio": "silent"},
        "method_options": {"kd": {"alpha": "1 - beta", "temperature": 2.0}, "pkd": "silent"}}}}}}
    rows = {path: status for path, status, *_ in account(config, stated)["t"]}
    prefix = "experiments.alp_kd_table2.cola"
    assert rows[f"{prefix}.hyperparameters.optimizer"] == EQUAL
    assert rows[f"{prefix}.hyperparameters.max_grad_norm"] == EQUAL
    assert rows[f"{prefix}.hyperparameters.batch_size"] == DIFFERS  # 32
    assert rows[f"{prefix}.hyperparameters.warmup_ratio"] == SILENT_SETTING
    assert rows[f"{prefix}.method_options.kd.alpha"] == EQUAL  # alpha = 1 - beta at every grid point
    assert rows[f"{prefix}.method_options.kd.temperature"] == DIFFERS  # 1.0
    assert rows[f"{prefix}.method_options.pkd.mapping"] == SILENT_SETTING
    assert f"{prefix}.method_options.pkd.beta" not in rows  # a grid axis: compared with the grid
    assert rows[f"{prefix}.hyperparameters.eps"] == UNSTATED
    assert "experiments.alp_kd_table2.grid.beta" not in rows  # the same values, in another order
    assert rows["experiments.alp_kd_table2.grid.learning_rate"] == DIFFERS  # an axis the paper does not search
