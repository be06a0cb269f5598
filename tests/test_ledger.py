"""The deviation ledger's page (kdflow.reporting.ledger): each entry once, with the results it affects named as the
report names them and in its order, what the run does not make marked, and no empty cell."""

import re

import pytest
from conftest import REPO, snakemake_config

from kdflow.reporting.ledger import (
    NO_SETTING,
    NO_VALUES,
    ONLY_NOT_RUN,
    THESIS,
    THESIS_RESULTS,
    ledger_document,
    ledger_frame,
    read_ledger,
    result_of,
)
from kdflow.reporting.protocols import OTHER_RESULTS
from kdflow.reporting.report_menu import paper_place, paper_table_place
from kdflow.reporting.works import paper_files
from kdflow.workflow import results_paths as paths
from kdflow.workflow.config_files import load_config_file
from kdflow.workflow.exploration import exploration_experiments
from kdflow.workflow.targets import default_targets

ENTRIES = [
    {"tables": ["alp_kd_table2", "alp_kd_table1"], "setting": ["a.*.stages", "b.*"], "kind": "paper silent",
     "values": {"stages": [[{"epochs": 5}]], "lr": [1e-5, 2e-5]}, "paper": "silent (§4)",
     "kdflow": "5 epochs,\n  every task", "why": "W1.", "effect": "Not measured."},
    {"tables": ["probing", "universal_kd_table8"], "kind": "unavailable", "paper": "Table 1's numbers",
     "kdflow": "an em dash", "why": "W2.", "effect": "E2."},
]
# What a run that makes ALP-KD Tables 1 and 2 and thesis Fig. 6.1, and not Universal-KD Table 8, asks for.
TARGETS = [paths.PAPER_TABLE_MD.format(paper_table="alp_kd_table1"),
           paths.PAPER_TABLE_MD.format(paper_table="alp_kd_table2"), paths.PROBING_THESIS_PNG.format(figure="6_1")]


FILES = paper_files(snakemake_config("config.yaml"))  # which files make the works' items, as config.yaml names them


def workflow_targets(path: str) -> list[str]:
    """The default targets of a config as the workflow sees it."""
    return default_targets(snakemake_config(path), set(exploration_experiments(load_config_file(REPO / path))))


def workflow_run(path: str) -> tuple[list[str], list[list[str]]]:
    """A config's default targets and the files that make the works' items, as rule ledger_table gets them."""
    return workflow_targets(path), paper_files(snakemake_config(path))


def sections(markdown: str) -> dict[str, str]:
    """A page's level-2 sections: heading -> text."""
    parts = re.split(r"^## (.+)$", markdown, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


def rows(text: str) -> list[list[str]]:
    """The body rows of the Markdown tables in ``text``, as cells."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    bodies = [line for line, previous in zip(lines, [""] + lines) if previous.startswith("| ")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in bodies]


def test_a_row_per_entry_with_its_results_in_the_papers_order_and_its_fields_on_one_line():
    frame = ledger_frame(ENTRIES, TARGETS, FILES)
    assert list(frame.columns) == ["entry", "results", "affects", "not_run", "kind", "settings", "values", "paper",
                                   "kdflow", "why", "effect"]
    assert frame.iloc[0].to_dict() == {
        "entry": 1, "results": "alp_kd_table1; alp_kd_table2", "affects": "ALP-KD Table 1; ALP-KD Table 2",
        "not_run": "", "kind": "paper silent", "settings": "a.*.stages; b.*",
        "values": 'stages = [{"epochs": 5}]; lr = 1e-05 | 2e-05', "paper": "silent (§4)",
        "kdflow": "5 epochs, every task", "why": "W1.", "effect": "Not measured."}
    second = frame.iloc[1]
    assert second.results == "universal_kd_table8; probing"  # Universal-KD before the thesis, as in the report
    assert second.affects == "Universal-KD Table 8; Sučík (2020) probing (Figures 6.1–6.3, C.1)"
    assert second.not_run == "universal_kd_table8"
    assert second.settings == second["values"] == ""  # a difference no setting shows: empty for machines


def test_a_two_entry_ledger_renders_each_entry_once_under_its_work_with_contents():
    text = ledger_document(ENTRIES, TARGETS, FILES).markdown()
    found = sections(text)
    assert list(found) == ["Contents", "ALP-KD (Passban et al. 2021)", "Several works", "Entries by result"]
    assert ("- ALP-KD (Passban et al. 2021): 1 entry\n- Several works: 1 entry\n"
            "- Entries by result: the entries of each of the 4 results") in found["Contents"]
    assert "This config does not run Universal-KD Table 8: the entries mark them (not run)" in found["Contents"]
    assert rows(found["ALP-KD (Passban et al. 2021)"]) == [
        ["1", "ALP-KD Table 1, Table 2", "paper silent", r"a.\*.stages; b.\*",
         r'stages = \[{"epochs": 5}\]; lr = 1e-05 \| 2e-05', "silent (§4)", "5 epochs, every task", "W1.",
         "Not measured."]]
    assert rows(found["Several works"]) == [
        ["2", "Universal-KD Table 8 (not run); Sučík (2020) probing (Figures 6.1–6.3, C.1)", "unavailable",
         NO_SETTING, NO_VALUES, "Table 1's numbers", "an em dash", "W2.", "E2."]]
    assert rows(found["Entries by result"]) == [
        ["ALP-KD Table 1", "runs it", "1"], ["ALP-KD Table 2", "runs it", "1"],
        ["Universal-KD Table 8", "does not run it", "2"],
        ["Sučík (2020) probing (Figures 6.1–6.3, C.1)", "runs it", "2"]]


def test_an_entry_only_about_results_the_run_does_not_make_is_listed_apart():
    entries = [{**ENTRIES[1], "tables": ["universal_kd_table8", "universal_kd_table9"]}, ENTRIES[0]]
    found = sections(ledger_document(entries, TARGETS, FILES).markdown())
    assert list(found) == ["Contents", "ALP-KD (Passban et al. 2021)", ONLY_NOT_RUN, "Entries by result"]
    assert result_of("hyperparameter_exploration").short == (
        "hyperparameter exploration (Table 5.1 and Figures B.1–B.7)")


def test_each_result_is_named_as_the_report_names_its_items():
    assert result_of("thesis_table52").name == "Sučík (2020) Table 5.2"
    assert result_of("universal_kd_table4").name == "Universal-KD Table 4"
    assert result_of("hyperparameter_exploration").short == "hyperparameter exploration (Table 5.1 and Figures B.1–B.7)"
    assert result_of("prediction_analysis").short == ("prediction analysis (Tables 6.1–6.3, C.1 and Figures 6.5, "
                                                      "6.6, C.2)")
    assert set(THESIS_RESULTS) == OTHER_RESULTS  # every result protocols.py allows besides the paper tables
    with pytest.raises(ValueError, match="unknown paper result 'no_such_table'"):
        result_of("no_such_table")


@pytest.fixture(scope="module")
def real():
    """The real ledger against config.yaml's default targets: its entries, CSV rows and Markdown page."""
    entries = read_ledger(REPO / "reference" / "deviations.yaml")
    run = workflow_run("config.yaml")
    return entries, ledger_frame(entries, *run), ledger_document(entries, *run)


def test_the_real_ledger_has_one_row_per_entry_on_the_page_and_in_the_csv(real):
    entries, frame, document = real
    assert frame.entry.tolist() == list(range(1, len(entries) + 1))
    assert (frame.paper != "").all() and (frame.kdflow != "").all()
    assert [set(keys.split("; ")) for keys in frame.results] == [set(entry["tables"]) for entry in entries]
    page = [row for name, text in sections(document.markdown()).items() if name != "Entries by result"
            for row in rows(text)]
    assert sorted(int(row[0]) for row in page) == frame.entry.tolist()
    assert all(cell for row in page for cell in row)  # no blank cell, settings and values included
    assert "<td></td>" not in document.html()


def test_the_real_ledgers_results_are_in_the_reports_order(real):
    """The report's menus sort a work's items by their place; the works' categories by theirs."""
    entries, frame, _ = real
    tables = snakemake_config("config.yaml")["paper_tables"]

    def place(key: str) -> tuple[str, str]:
        if key in THESIS_RESULTS:
            return min(tuple(paper_place(THESIS, item).values()) for item in THESIS_RESULTS[key][1])
        return tuple(paper_table_place(tables, key).values())

    for keys in frame.results:
        places = [place(key) for key in keys.split("; ")]
        assert places == sorted(places), keys


def test_the_contents_list_every_section_of_the_page(real):
    _, _, document = real
    found = sections(document.markdown())
    contents = [line.removeprefix("- ").split(":")[0] for line in found["Contents"].splitlines()
                if line.startswith("- ")]
    assert contents == [name for name in found if name != "Contents"]
    assert "Several works" in contents and "Sučík (2020)" in contents


def test_config_yaml_runs_every_result_the_ledger_names_and_the_demo_not_universal_kd_tables_8_and_9(real):
    entries, frame, _ = real
    assert (frame.not_run == "").all()
    demo = ledger_frame(entries, *workflow_run("demo/config.yaml"))
    assert set("; ".join(demo.not_run).split("; ")) - {""} == {"universal_kd_table8", "universal_kd_table9"}
    page = ledger_document(entries, *workflow_run("demo/config.yaml")).markdown()
    assert "| does not run it |" in page and "Table 8 (not run)" in page
