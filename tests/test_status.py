"""The report's status page (kdflow.reporting.status): what kdflow has of every table and figure of the three works."""

import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, rule_blocks, snakemake_config

from kdflow.reporting.paper_tables import read_reference
from kdflow.reporting.report_menu import category, paper_items, paper_place, paper_table_place, shown_name
from kdflow.reporting.paper_tables import NOT_IN_PAPER
from kdflow.reporting.status import (
    MADE,
    NO_OWN_ENTRY,
    NOT_A_RESULT,
    NOT_IN_CONFIG,
    SHOWN_UNDER,
    artifact_status,
    cell_matrix,
    paper_table_cells,
    read_cells,
    status_document,
    status_inputs,
)
from kdflow.reporting.works import PAPERS, item_of, paper_files, produced_files, read_artifacts, table_key, with_files
from kdflow.workflow import results_paths as paths
from kdflow.workflow.config_files import load_config_file
from kdflow.workflow.exploration import exploration_experiments
from kdflow.workflow.targets import default_targets


def workflow_targets(path: str) -> list[str]:
    """The default targets of a config as the workflow sees it."""
    return default_targets(snakemake_config(path), set(exploration_experiments(load_config_file(REPO / path))))


def artifacts(*rows) -> pd.DataFrame:
    """Items of the works, each with the one template that makes it (``""``: none)."""
    columns = ["paper", "kind", "number", "section", "caption", "template", "not_reproduced"]
    frame = pd.DataFrame([dict(zip(columns, row)) for row in rows], columns=columns)
    return frame.drop(columns="template").assign(templates=[[t] if t else [] for t in frame.template])


def config_files(path: str = "config.yaml") -> list[list[str]]:
    return paper_files(snakemake_config(path))


def config_artifacts(path: str = "config.yaml") -> pd.DataFrame:
    """The works' items with the templates of a config's files that make each."""
    return with_files(read_artifacts(), config_files(path))


def write_cells(path: str, **columns) -> None:
    """A paper table's CSV as rule paper_table writes it, with the columns the status page reads (``paper_note``
    empty unless given: no row of kdflow's own)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    rows = len(next(iter(columns.values())))
    pd.DataFrame({"paper_note": [""] * rows, **columns}).to_csv(path, index=False)


def place(paper: str, item: str) -> str:
    found = paper_place(paper, item)
    return f"{shown_name(found['category'])} › {shown_name(found['subcategory'])}"


ALP = "alp_kd_passban2021"
THESIS = "thesis_sucik2020"
NOT_IN_TASKS = "kdflow does not run this task for this table (spec `tasks`)"
T2_CSV, T2_MD, T3_CSV, T3_MD = (template.format(paper_table=name) for name in ("t2", "t3")
                                for template in (paths.PAPER_TABLE_CSV, paths.PAPER_TABLE_MD))
LAYERS_PNG = f"{paths.FIGURES}/layers_{{task}}.png"
SST2_ANALYSIS = paths.ANALYSIS_JSON.format(task="sst2")


def test_each_item_says_what_kdflow_has_of_it_where_the_report_files_it_and_why_not(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_cells(T2_CSV, student=["bert-6", "bert-6", "bilstm", "bilstm"], method=["kd"] * 4,
                task=["sst2", "rte"] * 2, metric=["accuracy"] * 4, split=["dev"] * 4, kdflow=[81.0, 70.5, None, None],
                kdflow_note=["", None, "no kdflow student for BiLSTM", "no kdflow student for BiLSTM"])
    found = artifact_status(artifacts(
        (ALP, "table", "2", "Experiments", "Six-layer students", T2_CSV, ""),
        (ALP, "figure", "3", "Analysis", "Attention", paths.ATTENTION_PNG, ""),
        (ALP, "figure", "4", "Analysis", "Layer outputs", LAYERS_PNG, ""),
        (ALP, "figure", "1", "Problem", "Skipped layers", "", "a diagram, not a result"),
    ), [T2_MD, paths.ATTENTION_PNG.format(figure="alp"), f"{paths.FIGURES}/other.png"])
    assert found.item.tolist() == ["Table 2", "Figure 3", "Figure 4", "Figure 1"]
    assert found.status.tolist() == ["2/4 cells", "made", NOT_IN_CONFIG, NOT_A_RESULT]
    assert found.made.tolist() == [True, True, False, False]
    assert found.why.tolist() == ["2 empty: no kdflow student for BiLSTM", "",
                                  f"the config asks for no {LAYERS_PNG}", "a diagram, not a result"]
    assert found.files.tolist() == [T2_CSV, paths.ATTENTION_PNG.format(figure="alp"), "", ""]
    # where the report's sidebar lists each: only what it has an entry for
    assert found.place.tolist() == ["ALP-KD (Passban et al. 2021) › Table 2",  # named as the menus show them
                                    "ALP-KD (Passban et al. 2021) › Figure 3", "", ""]
    page = status_document(found, paper_table_cells(found)).markdown()
    assert "2 of 3 results made (not made: not in the config: 1); items with no result to reproduce: 1." in page
    assert "| Table 2 | Six-layer students | 2/4 cells | ALP-KD (Passban et al. 2021) › Table 2 |" in page
    # each made item opens in the report: the paper table's page, the figure itself; the Markdown names the path
    assert (f"Open in the report: Table 2 (`{paths.PAPER_TABLE_PAGE.format(paper_table='t2')}`) · "
            f"Figure 3 (`{paths.ATTENTION_PNG.format(figure='alp')}`).") in page
    html = status_document(found, paper_table_cells(found)).html()
    assert html.count(f'data-result="{paths.PAPER_TABLE_PAGE.format(paper_table="t2")}"') == 2  # + matrix
    assert shown_name("02 Table 2") == "Table 2" and shown_name("Table 2") == "Table 2"
    assert "| Figure 4 | Layer outputs | not in the config | no entry |" in page
    assert "the line under each work's list opens each of its made items in the report" in page


def test_a_paper_tables_cells_are_laid_out_as_the_paper_lays_them_out_each_filled_or_why_not(tmp_path):
    write_cells(str(tmp_path / "t.csv"), student=["teacher", "teacher", "teacher", "bert-4", "bert-4", "bert-4"],
                method=["teacher", "teacher", "teacher", "kd", "kd", "kd"],
                task=["sst2", "mnli", "mnli"] * 2, metric=["accuracy", "accuracy_matched", "accuracy_mismatched"] * 2,
                split=["dev"] * 6, kdflow=[91.0, None, None, 88.0, None, None],
                kdflow_note=[None, NOT_IN_TASKS, NOT_IN_TASKS, None, "not in the tables of experiments t2", ""])
    matrix, legend = cell_matrix(read_cells(tmp_path / "t.csv"))
    assert matrix.columns.tolist() == ["student", "method", "sst2", "mnli m", "mnli mm"]  # named as on the table's page
    assert matrix.values.tolist() == [["teacher", "teacher", "✓", "a", "a"], ["bert-4", "kd", "✓", "b", "c"]]
    assert legend == {"a": (NOT_IN_TASKS, 2), "b": ("not in the tables of experiments t2", 1),
                      "c": ("no reason given", 1)}


def test_the_rows_kdflow_adds_to_a_paper_table_are_not_its_cells(tmp_path):
    """Thesis Table 5.2's ONNX Runtime rows (issue 55) are kdflow's own: the status counts the paper's cells only."""
    write_cells(str(tmp_path / "t.csv"), student=["bert_s"] * 3, method=["kd"] * 3, task=["sst2"] * 3,
                metric=["params_millions_non_embedding", "ms_per_example_cpu", "ms_per_example_onnxruntime_cpu"],
                split=["dev"] * 3, kdflow=[2.4, None, 1.5], kdflow_note=[None, "not measured", None],
                paper_note=["", "", NOT_IN_PAPER])
    cells = read_cells(tmp_path / "t.csv")
    assert cells.metric.tolist() == ["params_millions_non_embedding", "ms_per_example_cpu"]
    assert (int(cells.kdflow.notna().sum()), len(cells)) == (1, 2)


def test_a_table_of_hyperparameters_has_a_row_per_hyperparameter_and_a_column_per_task(tmp_path):
    write_cells(str(tmp_path / "t7.csv"), student=["bert-4"] * 4, method=["universal_kd_il"] * 4,
                task=["sst2", "rte"] * 2, hyperparameter=["learning_rate"] * 2 + ["beta"] * 2,
                kdflow=[1e-5, None, 0.5, None], kdflow_note=[None, "not in the selections of experiments t2"] * 2)
    matrix, legend = cell_matrix(read_cells(tmp_path / "t7.csv"))
    assert matrix.values.tolist() == [["bert-4", "universal_kd_il", "learning_rate", "✓", "a"],
                                      ["bert-4", "universal_kd_il", "beta", "✓", "a"]]
    assert matrix.columns.tolist()[-2:] == ["sst2", "rte"] and legend["a"][1] == 2


def test_a_paper_table_with_no_cell_filled_is_not_made_though_its_page_is_in_the_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_cells(T3_CSV, student=["bert-4"] * 2, method=["alp"] * 2, task=["cola", "rte"],
                metric=["mcc", "accuracy"], split=["test"] * 2, kdflow=[None, None], kdflow_note=[NOT_IN_TASKS] * 2)
    found = artifact_status(artifacts(
        ("universal_kd_wu2021", "table", "3", "§5.4", "GLUE test", T3_CSV, ""),
    ), [T3_MD])
    assert found.status.tolist() == ["0/2 cells"] and found.made.tolist() == [False]
    assert found.place.tolist() == ["Universal-KD (Wu et al. 2021) › Table 3"]  # its page, all cells empty
    page = status_document(found, paper_table_cells(found)).markdown()
    assert "0 of 1 results made (not made: paper tables with no cell filled: 1)" in page
    assert "### Table 3: 0/2 cells" in page and "- a: kdflow does not run this task for this table" in page


def test_an_item_that_no_report_entry_is_named_after_is_not_made():
    """Thesis Table 6.1 is in the prediction analysis's page, which the report files under Table 6.2."""
    found = artifact_status(artifacts(
        (THESIS, "table", "6.1", "§6.2", "Structure", paths.ANALYSIS_JSON, ""),
        (THESIS, "table", "6.2", "§6.2", "Observations", paths.ANALYSIS_JSON, ""),
    ), [SST2_ANALYSIS])
    assert found.status.tolist() == [NO_OWN_ENTRY, MADE] and found.made.tolist() == [False, True]
    assert found.place.tolist() == [place(THESIS, "Table 6.2")] * 2  # where a reader finds both
    assert found.files.tolist() == ["", SST2_ANALYSIS]
    assert found.why[0] == f"the report shows it in Table 6.2's entry: kdflow makes it in {SST2_ANALYSIS}"
    page = status_document(found, {}).markdown()
    assert "1 of 2 results made (not made: in another item's entry: 1)" in page


def test_the_page_shows_code_as_code_and_no_backtick(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_cells(T2_CSV, student=["bert-6", "bert-6"], method=["kd", "kd"],
                task=["sst2", "rte"], metric=["accuracy"] * 2, split=["dev"] * 2, kdflow=[80.0, None],
                kdflow_note=[None, NOT_IN_TASKS])
    found = artifact_status(artifacts(
        (ALP, "table", "2", "Experiments", "Six-layer students", T2_CSV, ""),
    ), [T2_MD])
    page = status_document(found, paper_table_cells(found)).html()
    assert "`" not in page
    assert "<code>tasks</code>" in page and "(spec tasks)" in page  # the legend's code, the list's plain text


def test_every_item_shown_under_another_shares_its_file_and_the_rules_file_that_there():
    """The items of :data:`SHOWN_UNDER` are those whose kdflow file another item names too, and the rule making it
    files its report entry under that other item."""
    found = pd.DataFrame(config_files(), columns=["paper", "item", "template"])
    shared = found[found.duplicated(["paper", "template"], keep=False)]
    hosts = {}
    for (paper, pattern), items in shared.groupby(["paper", "template"]):
        carried = [item for item in items.item if (paper, item) not in SHOWN_UNDER]
        assert len(carried) == 1, (pattern, carried)  # one report entry, named after one item
        hosts |= {(paper, item): carried[0] for item in items.item if item != carried[0]}
        outputs = [block.split("\n    output:")[1].split("\n    log:")[0] for block in rule_blocks().values()
                   if "\n    output:" in block]
        named = [f"paths.{name}" for name, value in vars(paths).items() if value == pattern]  # the rules' name
        making = [output for output in outputs if any(re.search(rf"{re.escape(name)}\b", output) for name in named)]
        assert len(making) == 1 and f'paper_place("{paper}", "{carried[0]}")' in making[0], pattern
    assert hosts == SHOWN_UNDER


def test_each_fixed_file_of_a_works_item_is_made_by_a_rule_filed_under_that_item_or_its_host():
    """results_paths.PAPER_ITEMS and the rules' report places name the same items: the rule writing a fixed file
    files its report entry under the item PAPER_ITEMS says it makes (or the item that item is shown under)."""
    rules = []  # per rule: the templates of its outputs (paths.X or paths.X.format(...)), its report places
    for block in rule_blocks().values():
        if "\n    output:" in block:
            output = block.split("\n    output:")[1].split("\n    log:")[0]
            rules.append(({eval(path, {"paths": paths}) for path in re.findall(r"paths\.\w+(?:\.format\([^)]*\))?",
                                                                                output)},
                          set(re.findall(r'paper_place\("([^"]+)", "([^"]+)"\)', output))))
    for (paper, item), template in paths.PAPER_ITEMS.items():
        [places] = [places for templates, places in rules if template in templates]
        assert (paper, SHOWN_UNDER.get((paper, item), item)) in places, (paper, item, template)


def test_the_config_names_the_files_of_its_paper_tables_attention_maps_and_exploration_figures():
    config = {"paper_tables": {"tables": {"mine": {"source": ALP, "table": "2"}}},
              "attention_maps": {"first_layer": {"paper": ALP, "figure": "3"}},
              "exploration": {"figures": {"B.2": {}}}}
    named = [row for row in paper_files(config) if (row[0], row[1]) not in paths.PAPER_ITEMS]
    assert named == [[ALP, "Figure 3", paths.ATTENTION_PNG.format(figure="first_layer")],
                     [ALP, "Table 2", paths.PAPER_TABLE_CSV.format(paper_table="mine")],
                     [THESIS, "Figure B.2", paths.THESIS_FIGURE_PNG.format(figure="B.2")]]
    tables = {"mine": {"source": ALP, "table": "2"}, "other": {"source": ALP, "table": "3"}}
    assert paper_files({"paper_tables": {"tables": tables}}) == paper_files(  # a YAML dump's key order reruns nothing
        {"paper_tables": {"tables": dict(reversed(tables.items()))}})
    found = with_files(read_artifacts(), paper_files(config))
    assert found[(found.paper == ALP) & (found.number == "2")].templates.tolist() == [[], [named[1][2]]]  # fig., table
    status = artifact_status(found[(found.paper == ALP) & (found.number == "3")], targets=[])
    assert status.why.tolist() == [f"the config asks for no {named[0][2]}",
                                   "the config's paper_tables name no file for it"]  # Figure 3, Table 3
    with pytest.raises(ValueError, match=r"no such table or figure .*'Table 12'"):
        with_files(read_artifacts(), paper_files({"paper_tables": {"tables": {"x": {"source": ALP, "table": "12"}}}}))


def test_config_yaml_names_each_paper_table_by_its_key():
    """The deviation ledger refers to a paper table by its key (kdflow.reporting.works.table_key)."""
    for name, spec in snakemake_config("config.yaml")["paper_tables"]["tables"].items():
        assert name == table_key(spec["source"], str(spec["table"]))


def test_a_pattern_matches_whole_path_segments_only():
    figure = paths.MISTAKE_OVERLAP_PNG
    targets = [figure.format(task="sst2"), figure.format(task="sst2").removesuffix(".png") + ".csv",
               f"{paths.FIGURES}/x/mistake_overlap_cola.png"]
    assert produced_files(figure, targets) == [targets[0]]


def test_the_list_names_every_paper_table_kdflow_reproduces_and_nothing_twice():
    found = config_artifacts()
    assert set(found.paper) == set(PAPERS)
    assert not found.duplicated(["paper", "kind", "number"]).any()
    # config.yaml makes a result of each item, or the list says why there is none
    assert ((found.templates.str.len() == 0) != (found.not_reproduced == "")).all()
    reference = read_reference(REPO / "reference/paper_results.csv")
    tables = found[found.kind == "table"]
    for source, table in reference[["source", "table"]].drop_duplicates().itertuples(index=False):
        row = tables[(tables.paper == source) & (tables.number == str(table))]
        assert len(row) == 1 and row.templates.iloc[0][0].startswith(f"{paths.PAPER_TABLES}/"), (source, table)


def test_the_full_config_makes_every_result_of_the_three_works():
    """Every table and figure that holds a result is among what config.yaml's default target makes."""
    targets = workflow_targets("config.yaml")
    missing = [f"{row.paper} {item_of(row)}" for row in config_artifacts().itertuples()
               if row.templates and not any(produced_files(template, targets) for template in row.templates)]
    assert missing == []
    assert len(status_inputs(targets, config_files())) > 40


def test_the_demo_status_page_reads_what_the_demo_makes():
    targets = workflow_targets("demo/config.yaml")
    made = status_inputs(targets, config_files("demo/config.yaml"))
    assert paths.PAPER_TABLE_CSV.format(paper_table="alp_kd_table2") in made
    assert all(path.startswith(f"{paths.RESULTS}/") for path in made)


def test_the_report_files_a_works_tables_first_then_its_figures_in_the_papers_order():
    assert category("Status") == "0 Status" and category(PAPERS[ALP]) == "1 ALP-KD (Passban et al. 2021)"
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
