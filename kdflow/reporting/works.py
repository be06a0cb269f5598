"""The three works kdflow reproduces and their numbered tables and figures (reference/paper_artifacts.csv): how the
report, the status page, the paper tables and the ledger name them, and which of the config's targets make each.
Below every other reporting module, which all read these names."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from kdflow.workflow.results_paths import TABLES

ARTIFACTS = Path(__file__).resolve().parents[2] / "reference" / "paper_artifacts.csv"
PAPERS = {  # the report's order of the works, and how the status page and the report's menus name them
    "alp_kd_passban2021": "ALP-KD (Passban et al. 2021)",
    "universal_kd_wu2021": "Universal-KD (Wu et al. 2021)",
    "thesis_sucik2020": "Sučík (2020)",
}
SHORT_NAMES = {"alp_kd_passban2021": "ALP-KD", "universal_kd_wu2021": "Universal-KD",
               "thesis_sucik2020": "Sučík (2020)"}


def read_artifacts(path=ARTIFACTS) -> pd.DataFrame:
    """The works' tables and figures in the papers' order; ``number`` stays text ("5.2", "B.10")."""
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    unknown = set(table.paper) - set(PAPERS)
    if unknown:
        raise ValueError(f"{path}: unknown papers {sorted(unknown)}; known: {sorted(PAPERS)}")
    return table


def produced_files(pattern: str, targets: list[str]) -> list[str]:
    """The ``targets`` that a reference pattern (``results/figures/mistake_overlap_{task}.png``) names. A paper table's
    CSV counts where the targets list its Markdown (the same job writes both)."""
    regex = re.compile(re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(pattern)) + "$")
    candidates = [*targets, *(target.removesuffix(".md") + ".csv" for target in targets
                              if target.startswith(f"{TABLES}/") and target.endswith(".md"))]
    return sorted({target for target in candidates if regex.match(target)})
