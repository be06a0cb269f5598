"""The report's status page (issue 32): every numbered table and figure of the three works
(reference/paper_artifacts.csv), and for each what kdflow has of it: the share of a paper table's cells it has
filled, a figure or table it has made, one the config does not ask for, or why the work has nothing to reproduce
(a diagram, settings, prose).

The page is built last, from the config's default targets (rule ``status_page`` reads them all), so "made" means made
by this run; the cells kdflow leaves empty in a paper table carry their reason (``kdflow_note``) in the table's CSV.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from kdflow.core.documents import Document, Heading, Paragraph, Table

ARTIFACTS = Path(__file__).resolve().parents[2] / "reference" / "paper_artifacts.csv"
PAPERS = {  # the report's order of the works, and how the status page and the report's menus name them
    "alp_kd_passban2021": "ALP-KD (Passban et al. 2021)",
    "universal_kd_wu2021": "Universal-KD (Wu et al. 2021)",
    "thesis_sucik2020": "Sučík (2020)",
}
SHORT_NAMES = {"alp_kd_passban2021": "ALP-KD", "universal_kd_wu2021": "Universal-KD", "thesis_sucik2020": "Sučík (2020)"}
NOT_IN_CONFIG = "not in the config"


def read_artifacts(path=ARTIFACTS) -> pd.DataFrame:
    """The works' tables and figures in the papers' order; ``number`` stays text ("5.2", "B.10")."""
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    unknown = set(table.paper) - set(PAPERS)
    if unknown:
        raise ValueError(f"{path}: unknown papers {sorted(unknown)}; known: {sorted(PAPERS)}")
    return table


def status_inputs(targets: list[str], path=ARTIFACTS) -> list[str]:
    """What rule status_page reads: the works' tables and figures that the config's default ``targets`` make."""
    artifacts = read_artifacts(path)
    return sorted({file for pattern in artifacts.kdflow if pattern for file in produced_files(pattern, targets)})


def produced_files(pattern: str, targets: list[str]) -> list[str]:
    """The ``targets`` that a reference pattern (``results/figures/mistake_overlap_{task}.png``) names. A paper table's
    CSV counts where the targets list its Markdown (the same job writes both)."""
    regex = re.compile(re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(pattern)) + "$")
    candidates = [*targets, *(target.removesuffix(".md") + ".csv" for target in targets
                              if target.startswith("results/tables/") and target.endswith(".md"))]
    return sorted({target for target in candidates if regex.match(target)})


def table_cells(csv_path: str | Path) -> tuple[int, int, dict[str, int]]:
    """(filled, total, reasons): the cells of a paper table (results/tables/papers/*.csv) that hold a kdflow number,
    all its cells, and how many empty cells each ``kdflow_note`` explains."""
    table = pd.read_csv(csv_path, keep_default_na=True)
    empty = table[table.kdflow.isna()]
    reasons = empty.kdflow_note.fillna("").replace("", "no reason given").value_counts().to_dict()
    return int(table.kdflow.notna().sum()), len(table), reasons


def artifact_status(artifacts: pd.DataFrame, targets: list[str]) -> pd.DataFrame:
    """Per artifact: ``status`` (``n/m cells``, ``made``, :data:`NOT_IN_CONFIG` or ``not a result``), ``why``
    (what is missing and why) and ``files`` (kdflow's, where it has made them)."""
    rows = []
    for artifact in artifacts.itertuples(index=False):
        files = produced_files(artifact.kdflow, targets) if artifact.kdflow else []
        if artifact.not_reproduced:
            status, why = "not a result", artifact.not_reproduced
        elif not files:
            status, why = NOT_IN_CONFIG, f"the config asks for no {artifact.kdflow}"
        elif "/tables/papers/" in artifact.kdflow:
            filled, total, reasons = table_cells(files[0])
            status = f"{filled}/{total} cells"
            why = "; ".join(f"{count} empty: {reason}" for reason, count in reasons.items())
        else:
            status, why = "made", ""
        rows.append({"paper": artifact.paper, "item": f"{artifact.kind.capitalize()} {artifact.number}",
                     "section": artifact.section, "caption": artifact.caption, "status": status, "why": why,
                     "files": ", ".join(files)})
    return pd.DataFrame(rows, columns=["paper", "item", "section", "caption", "status", "why", "files"])


def status_document(status: pd.DataFrame) -> Document:
    blocks = [Paragraph(
        "Every numbered table and figure of the three works (reference/paper_artifacts.csv), in the papers' order, "
        "and what this run of kdflow has of it: the cells of a paper table it has filled (and why the others are "
        "empty), the figures and tables it has made, those the config does not ask for, and the items that hold no "
        "result to reproduce. The report files each made item under its paper, named as the paper names it.")]
    for paper, title in PAPERS.items():
        rows = status[status.paper == paper].sort_values("item", key=lambda item: ~item.str.startswith("Table"),
                                                         kind="stable")  # tables first, as in the report's menu
        made = (rows.status != "not a result") & (rows.status != NOT_IN_CONFIG)
        blocks += [Heading(title), Paragraph(
            f"{int(made.sum())} of {int((rows.status != 'not a result').sum())} results made; "
            f"{int((rows.status == 'not a result').sum())} items hold no result."),
            Table(rows.drop(columns=["paper", "section", "files"]))]  # in the CSV: the page fits the report's frame
    return Document("Status: the works' tables and figures", blocks)
