"""The deviation ledger (reference/deviations.yaml) as a page of its own: every difference between what config.yaml
runs and what a paper did, and every setting a paper leaves open, with the paper's value, kdflow's, the kind of the
difference, why and its effect. :mod:`kdflow.reporting.protocols` keeps the ledger complete; this renders it.

An entry names the results it concerns by kdflow's keys (``alp_kd_table2``: :func:`kdflow.reporting.works.table_key`,
``probing``). The page shows each entry
once, under the work it concerns (or "several works"), and names its results as the report's menus do ("ALP-KD
Table 2"), in the report's order of the works and each work's order of its items, tables first
(:func:`kdflow.reporting.report_menu.paper_items`). A result that the run's default targets do not make is marked:
the ledger is shared by every config, and the demo runs fewer results than config.yaml.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from kdflow.core.documents import Bullets, Code, Document, Fold, Heading, Paragraph, Table
from kdflow.reporting.report_menu import paper_items
from kdflow.reporting.works import PAPERS, SHORT_NAMES, THESIS, produced_files, read_artifacts, table_key

COLUMNS = ["entry", "results", "affects", "not_run", "kind", "settings", "values", "paper", "kdflow", "why", "effect"]
PAGE_COLUMNS = ["entry", "affects", "kind", "settings", "values", "paper", "kdflow", "why", "effect"]
# The thesis's results that are not paper tables (kdflow.reporting.protocols.OTHER_RESULTS): what each is called and
# the thesis's tables and figures it makes. reference/paper_artifacts.csv has the items but not this grouping.
THESIS_RESULTS = {
    "hyperparameter_exploration": ("hyperparameter exploration",
                                   ["Table 5.1", *(f"Figure B.{n}" for n in range(1, 8))]),
    "prediction_analysis": ("prediction analysis", ["Table 6.1", "Table 6.2", "Table 6.3", "Table C.1", "Figure 6.5",
                                                    "Figure 6.6", "Figure C.2"]),
    "probing": ("probing", ["Figure 6.1", "Figure 6.2", "Figure 6.3", "Figure C.1"]),
    "class_distribution": ("class distribution", ["Figure A.1"]),
    "student_sizes": ("student sizes", [f"Figure B.{n}" for n in range(8, 13)]),
}
SEVERAL_WORKS = "Several works"
ONLY_NOT_RUN = "Only results this config does not run"
BY_RESULT = "Entries by result"
NOT_RUN = "not run"
# What the page says instead of an empty cell: an entry names no setting when none that reference/protocols.yaml
# compares shows the difference, and without one it pins no value.
NO_SETTING = "none: no setting compared in reference/protocols.yaml shows it"
NO_VALUES = "none pinned: the entry names no setting"


@dataclass(frozen=True)
class Result:
    """A paper result an entry can name: its key, its work, its name within the work ("Table 2", "probing (Figures
    6.1–6.3, C.1)"), the work's items it makes (in the work's order), and its place in the report's order."""

    key: str
    paper: str
    short: str
    items: tuple[str, ...]
    place: tuple[int, int]

    @property
    def name(self) -> str:
        """As the report's menus and paper_tables.title_of name it: "ALP-KD Table 2"."""
        return f"{SHORT_NAMES[self.paper]} {self.short}"


def read_ledger(path) -> list[dict]:
    return yaml.safe_load(Path(path).read_text()) or []


def _items_text(paper: str, items: tuple[str, ...]) -> str:
    """A work's items as a reader scans them: "Tables 6.1–6.3, C.1 and Figures 6.5, 6.6", a run of three or more
    items that follow each other in the work shortened to its ends (no "; ", which separates a list's names)."""
    order = paper_items(paper)
    parts = []
    for kind in ("Table", "Figure"):
        mine = [item for item in items if item.startswith(kind + " ")]
        runs = []
        for item in mine:
            if runs and order.index(item) == order.index(runs[-1][-1]) + 1:
                runs[-1].append(item)
            else:
                runs.append([item])
        numbers = [f"{run[0].split()[1]}–{run[-1].split()[1]}" if len(run) >= 3 else ", ".join(
            item.split()[1] for item in run) for run in runs]
        if numbers:
            parts.append(f"{kind}{'s' if len(mine) > 1 else ''} {', '.join(numbers)}")
    return " and ".join(parts)


def result_of(key: str, artifacts: pd.DataFrame | None = None) -> Result:
    """The result an entry's key names: a table of the works (its :func:`~kdflow.reporting.works.table_key`) or one
    of :data:`THESIS_RESULTS`."""
    artifacts = read_artifacts() if artifacts is None else artifacts
    if key in THESIS_RESULTS:
        label, listed = THESIS_RESULTS[key]
        paper, items = THESIS, tuple(sorted(listed, key=paper_items(THESIS).index))
        short = f"{label} ({_items_text(paper, items)})"
    else:
        tables = artifacts[artifacts.kind == "table"]
        rows = tables[[table_key(paper, number) == key for paper, number in zip(tables.paper, tables.number)]]
        if rows.empty:
            raise ValueError(f"unknown paper result {key!r}: neither a table of reference/paper_artifacts.csv "
                             f"nor one of {sorted(THESIS_RESULTS)}")
        paper, items = rows.paper.iloc[0], (f"Table {rows.number.iloc[0]}",)
        short = items[0]
    return Result(key, paper, short, items, (list(PAPERS).index(paper), paper_items(paper).index(items[0])))


def _is_run(result: Result, targets: list[str], files: list[list[str]]) -> bool:
    """Whether the run's default ``targets`` make any of the result's items (``files``:
    kdflow.reporting.works.paper_files of the run's config): the status page's test for an item the config asks
    for."""
    return any(produced_files(template, targets) for paper, item, template in files
               if paper == result.paper and item in result.items)


def _results(entries: list[dict], targets: list[str], files: list[list[str]]) -> dict[str, tuple[Result, bool]]:
    """Every result the entries name, in the report's order, and whether the run makes it."""
    artifacts = read_artifacts()
    found = [result_of(key, artifacts) for key in dict.fromkeys(key for entry in entries for key in entry["tables"])]
    return {result.key: (result, _is_run(result, targets, files))
            for result in sorted(found, key=lambda result: result.place)}


def _rows(entries: list[dict], results: dict[str, tuple[Result, bool]]) -> pd.DataFrame:
    order = list(results)
    rows = []
    for number, entry in enumerate(entries, start=1):
        keys = sorted(entry["tables"], key=order.index)
        setting = entry.get("setting", [])
        rows.append({"entry": number, "results": "; ".join(keys),
                     "affects": "; ".join(results[key][0].name for key in keys),
                     "not_run": "; ".join(key for key in keys if not results[key][1]), "kind": entry["kind"],
                     "settings": "; ".join([setting] if isinstance(setting, str) else setting),
                     "values": "; ".join(f"{name} = {' | '.join(json.dumps(value) for value in values)}"
                                         for name, values in (entry.get("values") or {}).items()),
                     **{key: " ".join(str(entry[key]).split()) for key in ("paper", "kdflow", "why", "effect")}})
    return pd.DataFrame(rows, columns=COLUMNS)


def ledger_frame(entries: list[dict], targets: list[str], files: list[list[str]]) -> pd.DataFrame:
    """One row per entry, for machines: its number in the file (``entry``, as the test suite names it), the keys of
    the results it concerns in the report's order (``results``) and their names (``affects``), the keys the run's
    default ``targets`` do not make (``not_run``; ``files``: kdflow.reporting.works.paper_files of its config), its
    kind, the setting paths it names and the values kdflow runs there (both empty for a difference no setting
    shows), the paper's value, kdflow's, why and the effect. Lists are joined by "; ", an entry's values of a
    setting by " | "."""
    return _rows(entries, _results(entries, targets, files))


def _section(keys: str, results: dict[str, tuple[Result, bool]]) -> str:
    """Where the page lists an entry (``keys``: its results): apart when the run makes none of them, else under
    the one work they belong to, or under several works."""
    keys = keys.split("; ")
    if not any(results[key][1] for key in keys):
        return ONLY_NOT_RUN
    papers = {results[key][0].paper for key in keys}
    return PAPERS[papers.pop()] if len(papers) == 1 else SEVERAL_WORKS


def _affects(keys: str, results: dict[str, tuple[Result, bool]]) -> str:
    """An entry's results (``keys``) as the page names them, each work once: "ALP-KD Table 1, Table 2; Universal-KD
    Table 8 (not run)"."""
    found = [results[key] for key in keys.split("; ")]
    return "; ".join(SHORT_NAMES[paper] + " " + ", ".join(result.short + ("" if run else f" ({NOT_RUN})")
                                                           for result, run in found if result.paper == paper)
                     for paper in PAPERS if any(result.paper == paper for result, _ in found))


def _page_rows(rows: pd.DataFrame, results: dict[str, tuple[Result, bool]]) -> pd.DataFrame:
    """The entries as the page shows them: results the run does not make marked, no empty cell."""
    return rows.assign(affects=rows.results.map(lambda keys: _affects(keys, results)),
                       settings=rows.settings.replace("", NO_SETTING),
                       values=rows["values"].replace("", NO_VALUES))[PAGE_COLUMNS]


def _entries(count: int) -> str:
    return f"{count} entr{'y' if count == 1 else 'ies'}"


def ledger_document(entries: list[dict], targets: list[str], files: list[list[str]]) -> Document:
    """The contents, then each entry once, under the work it concerns (apart: entries about several works, and
    those about results the run does not make), ordered by the first result it concerns; then, per result, the
    numbers of its entries. ``targets``: the run's default targets, which say what results it makes, and ``files``
    which of the works' items each makes (kdflow.reporting.works.paper_files)."""
    results = _results(entries, targets, files)
    order = list(results)
    frame = _rows(entries, results).sort_values(
        "results", key=lambda column: column.map(lambda keys: order.index(keys.split("; ")[0])), kind="stable")
    sections = frame.results.map(lambda keys: _section(keys, results))
    present = [name for name in [*PAPERS.values(), SEVERAL_WORKS, ONLY_NOT_RUN] if (sections == name).any()]
    by_result = pd.DataFrame([{"result": result.name, "this config": "runs it" if run else f"does {NOT_RUN} it",
                               "entries": ", ".join(str(number) for number, entry in enumerate(entries, start=1)
                                                    if key in entry["tables"])}
                              for key, (result, run) in results.items()])
    not_run = [result.name for result, run in results.values() if not run]
    blocks = [
        Paragraph(["Every setting a job of a paper result runs with is either the paper's value, stated with its "
                   "citation in ", Code("reference/protocols.yaml"), ", or named here: a value that differs from "
                   "the paper's, or one the paper leaves silent. The test suite fails on a setting that is neither "
                   "(tests/test_deviations.py), so this list is complete for config.yaml. Each entry is one row, "
                   "numbered as in the file, with the results it affects in the papers' order."]),
        Heading("Contents"),
        Bullets([*(f"{name}: {_entries(int((sections == name).sum()))}" for name in present),
                 f"{BY_RESULT}: the entries of each of the {len(results)} results"]),
        Paragraph("By kind: " + ", ".join(f"{count} {kind}" for kind, count in frame.kind.value_counts().items())
                  + "."),
    ]
    if not_run:
        blocks.append(Paragraph(f"This config does not run {', '.join(not_run)}: the entries mark them "
                                f"({NOT_RUN}), and the ledger keeps them for the configs that do."))
    for name in present:
        blocks += [Heading(name), Table(_page_rows(frame[sections == name], results))]
    blocks.append(Fold(BY_RESULT, [Table(by_result)]))  # the per-result lists, opened when wanted
    return Document("Deviation ledger: kdflow against the papers' protocols", blocks)
