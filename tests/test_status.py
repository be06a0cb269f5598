"""The report's status page (kdflow.reporting.status): what kdflow has of every table and figure of the three works."""

import pandas as pd
import pytest
from conftest import REPO, snakemake_config

from kdflow.reporting.paper_tables import read_reference
from kdflow.reporting.report_menu import category, paper_items, paper_place, paper_table_place
from kdflow.reporting.status import (
    NOT_IN_CONFIG,
    PAPERS,
    artifact_status,
    produced_files,
    read_artifacts,
    status_document,
    status_inputs,
)
from kdflow.workflow.config_files import load_config_file
from kdflow.workflow.exploration import exploration_experiments
from kdflow.workflow.targets import default_targets


def workflow_targets(path: str) -> list[str]:
    """The default targets of a config as the workflow sees it."""
    return default_targets(snakemake_config(path), set(exploration_experiments(load_config_file(REPO / path))))


def artifacts(*rows) -> pd.DataFrame:
    columns = ["paper", "kind", "number", "section", "caption", "kdflow", "not_reproduced"]
    return pd.DataFrame([dict(zip(columns, row)) for row in rows], columns=columns)


def test_each_item_says_what_kdflow_has_of_it_and_why_not(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results/tables/papers").mkdir(parents=True)
    pd.DataFrame({"kdflow": [81.0, None, None, 70.5],
                  "kdflow_note": ["", "no kdflow student for BiLSTM", "no kdflow student for BiLSTM", None]}).to_csv(
        "results/tables/papers/t2.csv", index=False)
    found = artifact_status(artifacts(
        ("alp_kd_passban2021", "table", "2", "Experiments", "Six-layer students", "results/tables/papers/t2.csv", ""),
        ("alp_kd_passban2021", "figure", "3", "Analysis", "Attention", "results/figures/attention_{figure}.png", ""),
        ("alp_kd_passban2021", "figure", "4", "Analysis", "Layer outputs", "results/figures/layers_{task}.png", ""),
        ("alp_kd_passban2021", "figure", "1", "Problem", "Skipped layers", "", "a diagram, not a result"),
    ), ["results/tables/papers/t2.md", "results/figures/attention_alp.png", "results/figures/other.png"])
    assert found.item.tolist() == ["Table 2", "Figure 3", "Figure 4", "Figure 1"]
    assert found.status.tolist() == ["2/4 cells", "made", NOT_IN_CONFIG, "not a result"]
    assert found.why.tolist() == ["2 empty: no kdflow student for BiLSTM", "",
                                  "the config asks for no results/figures/layers_{task}.png", "a diagram, not a result"]
    assert found.files.tolist() == ["results/tables/papers/t2.csv", "results/figures/attention_alp.png", "", ""]
    assert "2 of 3 results made; 1 items hold no result." in status_document(found).markdown()


def test_a_pattern_matches_whole_path_segments_only():
    targets = ["results/figures/mistake_overlap_sst2.png", "results/figures/mistake_overlap_sst2.csv",
               "results/figures/x/mistake_overlap_cola.png"]
    assert produced_files("results/figures/mistake_overlap_{task}.png", targets) == [targets[0]]


def test_the_list_names_every_paper_table_kdflow_reproduces_and_nothing_twice():
    found = read_artifacts()
    assert set(found.paper) == set(PAPERS)
    assert not found.duplicated(["paper", "kind", "number"]).any()
    assert ((found.kdflow == "") != (found.not_reproduced == "")).all()  # a result to make, or why there is none
    reference = read_reference(REPO / "reference/paper_results.csv")
    tables = found[found.kind == "table"]
    for source, table in reference[["source", "table"]].drop_duplicates().itertuples(index=False):
        row = tables[(tables.paper == source) & (tables.number == str(table))]
        assert len(row) == 1 and row.kdflow.iloc[0].startswith("results/tables/papers/"), (source, table)


def test_the_full_config_makes_every_result_of_the_three_works():
    """Every table and figure that holds a result is among what config.yaml's default target makes."""
    targets = workflow_targets("config.yaml")
    missing = [f"{row.paper} {row.kind} {row.number}" for row in read_artifacts().itertuples()
               if row.kdflow and not produced_files(row.kdflow, targets)]
    assert missing == []
    assert len(status_inputs(targets)) > 40


def test_the_demo_status_page_reads_what_the_demo_makes():
    targets = workflow_targets("demo/config.yaml")
    assert "results/tables/papers/alp_kd_table2.csv" in status_inputs(targets)
    assert all(path.startswith("results/") for path in status_inputs(targets))


def test_the_report_files_a_works_tables_first_then_its_figures_in_the_papers_order():
    assert category("Status") == "0 Status" and category(PAPERS["alp_kd_passban2021"]) == "1 ALP-KD (Passban et al. 2021)"
    items = paper_items("alp_kd_passban2021")
    assert items == ("Table 1", "Table 2", "Table 3", "Figure 1", "Figure 2", "Figure 3", "Figure 4")
    places = [paper_place("thesis_sucik2020", item)["subcategory"] for item in paper_items("thesis_sucik2020")]
    assert sorted(places) == places  # the menu sorts them alphabetically: their numbers keep the paper's order
    assert places[:2] == ["01 Table 4.1", "02 Table 4.2"] and "44 Figure B.10" in places
    assert paper_table_place({"tables": {"t": {"source": "universal_kd_wu2021", "table": "4"}}}, "t") == {
        "category": "2 Universal-KD (Wu et al. 2021)", "subcategory": "04 Table 4"}


def test_an_unknown_item_or_category_is_a_clear_error():
    with pytest.raises(ValueError, match="alp_kd_passban2021 has no 'Table 9'"):
        paper_place("alp_kd_passban2021", "Table 9")
    with pytest.raises(ValueError, match="unknown report category 'Paper tables'"):
        category("Paper tables")
