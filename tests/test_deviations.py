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
    assert problems == [("hyperparameter_exploration: experiments.exploration_batch_lstm_s.points.batch_size is "
                        "[32, 50, 128, 256, 512, 1024] in the config, [32, 50, 128, 256, 512] in the paper, and the "
                        "ledger has no entry for it")]


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


def test_what_a_protocol_does_not_state_is_unstated_leaf_by_leaf():
    """A protocol that states none of an experiment's sections: each of its jobs' settings is unstated, one row per
    leaf, never a difference from a value the paper does not give."""
    config = load("config.yaml")
    augmented = next(name for name, spec in config["experiments"].items() if spec.get("transfer") == "augmented")
    found = account(config, {"tables": {"t": {"experiments": {"universal_kd_table2": {}, augmented: {}}}}})["t"]
    statuses = {path: status for path, status, *_ in found}
    prefix = "experiments.universal_kd_table2.sst2"
    for section in ("precision", f"{prefix}.transfer", f"{prefix}.selection"):
        assert statuses[section] == UNSTATED, section
    for section in (f"{prefix}.stages", f"{prefix}.student.", f"{prefix}.hyperparameters.", "pseudo_heads.",
                    "generation."):
        leaves = {path: status for path, status in statuses.items() if path.startswith(section)}
        assert leaves and set(leaves.values()) == {UNSTATED}, section


def test_values_compare_element_by_element_within_a_relative_tolerance():
    equal = protocols_module._equal
    assert equal([1, 2], [1, 2]) and not equal([1, 2], [1, 3]) and not equal([1, 2], [1, 2, 3])
    assert equal({"a": 1, "b": [2]}, {"b": [2], "a": 1}) and not equal({"a": 1}, {"a": 2})
    assert not equal(["a", "b"], "ab") and not equal({"a": 1}, ["a"])  # a sequence is not a string or a mapping
    assert equal(0.0, 1e-12) and not equal(0.0, 1.5e-12)  # 1e-12, and relative above 1
    assert equal(1e6, 1e6 + 1e-7) and not equal(1e6, 1e6 + 1e-5)


def test_a_silent_section_skips_the_grids_axes_and_a_stated_section_missing_in_kdflow_is_compared_key_by_key():
    compare = protocols_module._compare
    rows = list(compare("silent", {"lr": {"start": 1, "end": 2}, "epochs": 3}, "x", searched={"lr"}))
    assert rows == [("x.epochs", SILENT_SETTING, "silent", 3)]
    assert list(compare({"a": 1, "b": 2}, None, "x")) == [("x.a", DIFFERS, 1, None), ("x.b", DIFFERS, 2, None)]


def test_a_task_setting_that_is_a_mapping_replaces_a_plain_value():
    assert protocols_module._merge({"a": 1, "b": {"c": 1, "d": 2}}, {"a": {"x": 1}, "b": {"d": 3}}) == {
        "a": {"x": 1}, "b": {"c": 1, "d": 3}}


def test_the_ledgers_problems_name_each_entry_and_what_is_wrong():
    """Every kind of problem on hand-made rows and entries, with the exact words a maintainer reads."""
    row = ("experiments.e.sst2.hyperparameters.lr", DIFFERS, 1e-5, 2e-5)
    mapping = ("experiments.e.sst2.student.bert_3.options", SILENT_SETTING, "silent", {"b": 2, "a": 1})
    other = ("experiments.f.sst2.student.bert_3.options", SILENT_SETTING, "silent", {"a": 1, "b": 2})
    found = {"t": [row, mapping, other, ("experiments.e.sst2.hyperparameters.eps", UNSTATED, None, 1e-8)]}
    base = {"tables": ["t"], "kind": "cost", "paper": "p", "kdflow": "k", "why": "w", "effect": "e"}
    ledger = [
        {"tables": ["t"], "kdflow": "no kind"},  # malformed: the rest of this entry is not checked
        {**base, "kdflow": "a" * 60, "setting": "*.hyperparameters.lr", "values": {"hyperparameters.lr": [3e-5]}},
        {**base, "kdflow": "k2", "kind": "bogus", "tables": ["t", "nowhere"], "values": {}},
        {**base, "kdflow": "k3", "setting": ["*.student.bert_3.options", "*.gone"],
         "values": {"student.bert_3.options": [{"a": 1, "b": 2}]}},
        {**base, "kdflow": "k4", "extra": 1},
    ]
    assert ledger_problems(ledger, found, {"t"}) == [
        ("deviations entry 1 ('no kind'): needs ['effect', 'kind', 'paper', 'why'], allows only "
        "['effect', 'kdflow', 'kind', 'paper', 'setting', 'tables', 'values', 'why']"),
        (f"deviations entry 2 ('{'a' * 50}'): kdflow runs values: {{\"hyperparameters.lr\": [2e-05]}} where the entry "
        "pins {\"hyperparameters.lr\": [3e-05]}; check its kdflow, why and effect, then pin these"),
        "deviations entry 3 ('k2'): pins values but names no setting",
        ("deviations entry 3 ('k2'): kind 'bogus' is not one of unavailable, paper silent, original bug, leak, cost, "
        "choice, not implemented"),
        "deviations entry 3 ('k2'): unknown paper tables ['nowhere']",
        ("deviations entry 4 ('k3'): setting '*.gone' names no difference from a paper and no setting it leaves "
        "silent (stale entry)"),
        ("deviations entry 5 ('k4'): needs [], allows only "
        "['effect', 'kdflow', 'kind', 'paper', 'setting', 'tables', 'values', 'why']"),
        ("t: experiments.e.sst2.hyperparameters.eps (1e-08 in kdflow) is not in reference/protocols.yaml: state the "
        "paper's value with its citation, or silent"),
    ]
    # the two mappings differ only in key order: one value, which entry 4 pins
    assert protocols_module.entry_values(ledger[3], found) == {"student.bert_3.options": [{"a": 1, "b": 2}]}
    # an entry without tables names nothing, and a missing kdflow text is "?"
    assert not protocols_module._names({"setting": "*"}, "t", row[0], DIFFERS)
    assert ledger_problems([{"tables": ["t"]}], {}, {"t"})[0].startswith("deviations entry 1 ('?'): needs")
