"""The three works kdflow reproduces and their numbered tables and figures (reference/paper_artifacts.csv): how the
report, the status page, the paper tables and the ledger name them, which files make each (:func:`paper_files`) and
which of the config's targets those are. Below every other reporting module, which all read these names."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from kdflow.workflow.results_paths import (
    ATTENTION_PNG,
    PAPER_ITEMS,
    PAPER_TABLE_CSV,
    TABLES,
    THESIS_FIGURE_PNG,
)

ARTIFACTS = Path(__file__).resolve().parents[2] / "reference" / "paper_artifacts.csv"
PAPERS = {  # the report's order of the works, and how the status page and the report's menus name them
    "alp_kd_passban2021": "ALP-KD (Passban et al. 2021)",
    "universal_kd_wu2021": "Universal-KD (Wu et al. 2021)",
    "thesis_sucik2020": "Sučík (2020)",
}
SHORT_NAMES = {"alp_kd_passban2021": "ALP-KD", "universal_kd_wu2021": "Universal-KD",
               "thesis_sucik2020": "Sučík (2020)"}
THESIS = "thesis_sucik2020"
KEY_PREFIXES = {"alp_kd_passban2021": "alp_kd", "universal_kd_wu2021": "universal_kd", "thesis_sucik2020": "thesis"}


def table_key(paper: str, number: str) -> str:
    """A paper table's key, as config.yaml names it under ``paper_tables.tables`` and the deviation ledger refers to
    it: ``universal_kd_table4``, ``thesis_table52``."""
    return f"{KEY_PREFIXES[paper]}_table{number.replace('.', '')}"


def read_artifacts(path=ARTIFACTS) -> pd.DataFrame:
    """The works' tables and figures in the papers' order; ``number`` stays text ("5.2", "B.10")."""
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    unknown = set(table.paper) - set(PAPERS)
    if unknown:
        raise ValueError(f"{path}: unknown papers {sorted(unknown)}; known: {sorted(PAPERS)}")
    return table


def item_of(artifact) -> str:
    """A row of :func:`read_artifacts` as the papers name it: "Table 5.2", "Figure B.10"."""
    return f"{artifact.kind.capitalize()} {artifact.number}"


def paper_files(config: dict) -> list[list[str]]:
    """[paper, item, template] of every file that makes one of the works' tables and figures: the fixed ones
    (results_paths.PAPER_ITEMS), and those the config names: its paper tables (``paper_tables.tables``), attention
    maps (``attention_maps``) and the exploration's figures (thesis Figs. B.N, ``exploration.figures``). A sorted
    list of lists, as a rule's params hold it: the order of the config's keys, which a YAML dump may change,
    does not rerun the jobs that read it."""
    named = [*[[spec["source"], f"Table {spec['table']}", PAPER_TABLE_CSV.format(paper_table=name)]
               for name, spec in config.get("paper_tables", {}).get("tables", {}).items()],
             *[[spec["paper"], f"Figure {spec['figure']}", ATTENTION_PNG.format(figure=name)]
               for name, spec in config.get("attention_maps", {}).items()],
             *[[THESIS, f"Figure {figure}", THESIS_FIGURE_PNG.format(figure=figure)]
               for figure in config.get("exploration", {}).get("figures", {})]]
    return sorted([[paper, item, template] for (paper, item), template in PAPER_ITEMS.items()] + named)


def with_files(artifacts: pd.DataFrame, files: list[list[str]]) -> pd.DataFrame:
    """``artifacts`` with ``templates``: the templates of :func:`paper_files` that make each (a list, empty for
    none). A file said to make an item the works do not have is an error."""
    templates: dict[tuple[str, str], list[str]] = {}
    for paper, item, template in files:
        templates.setdefault((paper, item), []).append(template)
    items = [(artifact.paper, item_of(artifact)) for artifact in artifacts.itertuples(index=False)]
    unknown = sorted(set(templates) - set(items))
    if unknown:
        raise ValueError(f"no such table or figure in {ARTIFACTS.name}: {unknown} (made by "
                         f"{[templates[key] for key in unknown]})")
    return artifacts.assign(templates=[templates.get(key, []) for key in items])


def produced_files(pattern: str, targets: list[str]) -> list[str]:
    """The ``targets`` that a reference pattern (``results/figures/mistake_overlap_{task}.png``) names. A paper table's
    CSV counts where the targets list its Markdown (the same job writes both)."""
    regex = re.compile(re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(pattern)) + "$")
    candidates = [*targets, *(target.removesuffix(".md") + ".csv" for target in targets
                              if target.startswith(f"{TABLES}/") and target.endswith(".md"))]
    return sorted({target for target in candidates if regex.match(target)})
