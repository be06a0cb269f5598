"""The report's status page (issues 32 and 52): every numbered table and figure of the three works
(reference/paper_artifacts.csv), and for each what kdflow has of it: a paper table's cells, each filled or why not, a
figure or table it has made, one the config does not ask for, or why the work has nothing to reproduce (a diagram,
settings, prose).

The page is built last, from the config's default targets (rule ``status_page`` reads them all), so "made" means made
by this run. It counts as made only what a reader finds in the report: an item the report has an entry of its own
for, and of paper tables only those with a cell that kdflow has filled. Each item comes with its place in the report's
sidebar, category › subcategory (kdflow.reporting.report_menu, named as the menus show them), and each item the report
has an entry for is a link that opens it there (kdflow.core.documents.Link).
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from kdflow.core.documents import Bullets, Code, Document, Heading, Link, Paragraph, Span, Table, joined
from kdflow.reporting.paper_tables import NOT_IN_PAPER, column_namer
from kdflow.reporting.report_menu import paper_place, shown_name
from kdflow.reporting.works import PAPERS, item_of, produced_files
from kdflow.workflow import results_paths

PAPER_TABLES = f"{results_paths.PAPER_TABLES}/"  # where rule paper_table writes a paper table's cells (CSV)
MADE, NOT_IN_CONFIG, NOT_A_RESULT = "made", "not in the config", "not a result"
NO_OWN_ENTRY = "no entry of its own"  # made, but in a file the report files under another item (SHOWN_UNDER)
# Items that kdflow makes in a file the report files under another item of the same work, so that no entry carries
# their names: rule analyse_predictions's page holds Tables 6.1 and 6.2 and is filed under 6.2, rule
# classify_sentences's holds Tables 6.3 and C.1 and is filed under 6.3. (paper, item) -> the item it is filed under.
SHOWN_UNDER = {("thesis_sucik2020", "Table 6.1"): "Table 6.2", ("thesis_sucik2020", "Table C.1"): "Table 6.3"}
FILLED = "✓"  # a cell of a paper table that kdflow has a number for; the other cells hold a letter, their reason's
# Where a config names the file of an item kdflow has no fixed file for (kdflow.reporting.works.paper_files)
CONFIG_NAMED = {"table": "paper_tables", "figure": "attention_maps and exploration.figures"}
PLACE_SEPARATOR = " › "
NO_ENTRY = "no entry"  # an item's place where the report has no entry for it
COLUMNS = ["paper", "item", "section", "caption", "status", "made", "why", "place", "files"]
SHOWN = {".html", ".png", ".svg"}  # what the report shows in its content pane (Snakemake's by MIME type)


def status_inputs(targets: list[str], files: list[list[str]]) -> list[str]:
    """What rule status_page reads: the works' tables and figures that the config's default ``targets`` make
    (``files``: kdflow.reporting.works.paper_files of the config)."""
    return sorted({file for _, _, template in files for file in produced_files(template, targets)})


def plain(text: str) -> str:
    """A note without its Markdown code marks (``spec `tasks` ``): a table cell holds no code, so would show them."""
    return text.replace("`", "")


def spans(text: str) -> list[Span]:
    """A note's Markdown code (``spec `tasks` ``) as :class:`Code` spans, so that a page shows code, not backticks."""
    return [Code(part) if index % 2 else part for index, part in enumerate(text.split("`")) if part]


def sidebar_path(paper: str, item: str) -> str:
    """Where the report's sidebar lists a work's item: its category › subcategory."""

    place = paper_place(paper, item)
    return f"{shown_name(place['category'])}{PLACE_SEPARATOR}{shown_name(place['subcategory'])}"


def entry_path(files: str) -> str | None:
    """The report entry that shows a status row's ``files``: a paper table's page, or the file itself where the
    report shows it (a figure or a page); None for what it offers as a download only."""
    first = files.split(", ")[0]
    if first.startswith(PAPER_TABLES):
        return results_paths.PAPER_TABLE_PAGE.format(paper_table=Path(first).stem)
    return first if Path(first).suffix in SHOWN else None


def read_cells(csv_path: str | Path) -> pd.DataFrame:
    """A paper table's cells (results/tables/papers/*.csv), the empty ones with their reason (``kdflow_note``); the
    rows kdflow adds beside the paper's (ONNX Runtime's times, :data:`NOT_IN_PAPER`) are not the paper's cells."""
    table = pd.read_csv(csv_path, keep_default_na=True)
    table = table[table.paper_note != NOT_IN_PAPER].reset_index(drop=True)
    notes = table.kdflow_note.fillna("")
    table["kdflow_note"] = notes.mask(table.kdflow.isna() & (notes == ""), "no reason given")
    return table


def artifact_status(artifacts: pd.DataFrame, targets: list[str]) -> pd.DataFrame:
    """Per artifact: ``status`` (``n/m cells``, :data:`MADE`, :data:`NOT_IN_CONFIG`, :data:`NOT_A_RESULT` or
    :data:`NO_OWN_ENTRY`), ``made`` (the report has an entry of its own for it and, for a paper table, kdflow has
    filled a cell of it), ``why`` (what is missing and why), ``place`` (where the report's sidebar lists it, empty
    where the report has no entry for it) and ``files`` (kdflow's of the entry that carries it)."""
    rows = []
    for artifact in artifacts.itertuples(index=False):
        item = item_of(artifact)
        files = sorted({file for template in artifact.templates for file in produced_files(template, targets)})
        host = SHOWN_UNDER.get((artifact.paper, item))
        place = sidebar_path(artifact.paper, host or item) if files else ""
        made = False
        if artifact.not_reproduced:
            status, why = NOT_A_RESULT, artifact.not_reproduced
        elif not files:
            status, why = NOT_IN_CONFIG, (f"the config asks for no {', '.join(artifact.templates)}"
                                          if artifact.templates else f"the config's {CONFIG_NAMED[artifact.kind]} "
                                                                     "name no file for it")
        elif host:
            status, why = NO_OWN_ENTRY, f"the report shows it in {host}'s entry: kdflow makes it in {', '.join(files)}"
            files = []
        elif files[0].startswith(PAPER_TABLES):
            cells = read_cells(files[0])
            filled = int(cells.kdflow.notna().sum())
            status, made = f"{filled}/{len(cells)} cells", filled > 0
            reasons = cells[cells.kdflow.isna()].kdflow_note.value_counts()
            why = "; ".join(f"{count} empty: {plain(reason)}" for reason, count in reasons.items())
        else:
            status, made, why = MADE, True, ""
        rows.append({"paper": artifact.paper, "item": item, "section": artifact.section, "caption": artifact.caption,
                     "status": status, "made": made, "why": why, "place": place, "files": ", ".join(files)})
    return pd.DataFrame(rows, columns=COLUMNS)


def paper_table_cells(status: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    """The cells of every paper table the run has made a CSV of, per (paper, item) of ``status``."""
    tables = status[status.files.str.startswith(PAPER_TABLES)]
    return {(row.paper, row.item): read_cells(row.files.split(", ")[0]) for row in tables.itertuples()}


def cell_matrix(cells: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, tuple[str, int]]]:
    """A paper table's cells laid out as the paper lays them out: a row per student and method (and hyperparameter,
    in a table of selected hyperparameters), a column per task (and metric and split, where a task has several).
    A cell holds :data:`FILLED` where kdflow has a number, else the letter of its reason. Also returns the legend:
    letter -> (reason, how many cells it leaves empty), in the order the reasons first occur. Columns are named as
    on the table's own page ("mnli m", "sst2 params (M)")."""

    keys = [column for column in ("student", "method", "hyperparameter") if column in cells]
    column = column_namer(cells)
    empty = cells.kdflow_note[cells.kdflow.isna()]
    letters = dict(zip(dict.fromkeys(empty), string.ascii_lowercase, strict=False))
    lines: dict[tuple, dict[str, str]] = {}
    for row in cells.itertuples(index=False):
        text = FILLED if pd.notna(row.kdflow) else letters[row.kdflow_note]
        lines.setdefault(tuple(getattr(row, key) for key in keys), {})[column(row)] = text
    columns = list(dict.fromkeys(column(row) for row in cells.itertuples(index=False)))
    matrix = pd.DataFrame([[*key, *(line.get(name, "") for name in columns)] for key, line in lines.items()],
                          columns=[*keys, *columns])
    return matrix, {letter: (reason, int((empty == reason).sum())) for reason, letter in letters.items()}


def count_line(rows: pd.DataFrame) -> str:
    """How many of a work's results the run has made, why the others are not, and how many items hold no result."""
    results = rows[rows.status != NOT_A_RESULT]
    unmade = {
        "paper tables with no cell filled": (results.files.str.startswith(PAPER_TABLES) & ~results.made).sum(),
        "not in the config": (results.status == NOT_IN_CONFIG).sum(),
        "in another item's entry": (results.status == NO_OWN_ENTRY).sum(),
    }
    why = ", ".join(f"{what}: {int(count)}" for what, count in unmade.items() if count)
    return (f"{int(results.made.sum())} of {len(results)} results made" + (f" (not made: {why})" if why else "")
            + f"; items with no result to reproduce: {len(rows) - len(results)}.")


def status_document(status: pd.DataFrame, cells: Mapping[tuple[str, str], pd.DataFrame]) -> Document:
    """The page: per work, the count of what is made, every item with its status and place in the report's sidebar,
    then each paper table's cells (:func:`cell_matrix`). ``cells``: :func:`paper_table_cells`."""
    blocks = [
        Paragraph("Every numbered table and figure of the three works (reference/paper_artifacts.csv), in the "
                  "papers' order, and what this run of kdflow has of it. An item is made where the report has an "
                  "entry of its own for it, and a paper table where kdflow has filled one of its cells at least; "
                  "below each work's list, each of its paper tables cell by cell."),
        Paragraph("Where to find an item: the column \"in the report\" is its place in the report's sidebar, "
                  f"category{PLACE_SEPARATOR}subcategory, or {NO_ENTRY}; the line under each work's list opens "
                  "each of its made items in the report."),
    ]
    for paper, title in PAPERS.items():
        rows = status[status.paper == paper].sort_values("item", key=lambda item: ~item.str.startswith("Table"),
                                                         kind="stable")  # tables first, as in the report's menu
        shown = rows[["item", "caption", "status", "place", "why"]].rename(  # the rest in the CSV: the page fits
            columns={"place": "in the report"})
        blocks += [Heading(title), Paragraph(count_line(rows)),
                   Table(shown.replace({"in the report": {"": NO_ENTRY}}))]
        links = [Link(row.item, path) for row in rows.itertuples() if row.made and (path := entry_path(row.files))]
        if links:
            blocks.append(Paragraph(["Open in the report: ", *joined(links, " · "), "."]))
        for row in rows.itertuples():
            if (paper, row.item) in cells:
                blocks += matrix_blocks(row, cells[paper, row.item])
    return Document("Status: the works' tables and figures", blocks)


def matrix_blocks(row, cells: pd.DataFrame) -> list:
    """A paper table's cells under its own heading: where the report has it, the matrix and the matrix's legend."""
    matrix, legend = cell_matrix(cells)
    filled = int(cells.kdflow.notna().sum())
    reasons = [[f"{letter}: ", *spans(reason), f" ({cell_count(count)})"] for letter, (reason, count) in legend.items()]
    return [
        Heading(f"{row.item}: {row.status}", level=3),
        Paragraph(["In the report: ", Link(row.place, entry_path(row.files)) if row.place else NO_ENTRY,
                   f". A cell per number of the paper's table: {FILLED} where kdflow has one, else the letter of why "
                   "it has none."]),
        Table(matrix),
        Bullets([f"{FILLED}: kdflow has a number ({cell_count(filled)})", *reasons]),
    ]


def cell_count(count: int) -> str:
    return f"{count} cell" if count == 1 else f"{count} cells"
