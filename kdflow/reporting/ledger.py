"""The deviation ledger (reference/deviations.yaml) as a page of its own: every difference between what config.yaml
runs and what a paper did, and every setting a paper leaves open, with the paper's value, kdflow's, the kind of the
difference, why and its effect. :mod:`kdflow.reporting.protocols` keeps the ledger complete; this renders it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

from kdflow.core.documents import Code, Document, Heading, Paragraph, Table

COLUMNS = ["results", "kind", "settings", "values", "paper", "kdflow", "why", "effect"]


def read_ledger(path) -> list[dict]:
    return yaml.safe_load(Path(path).read_text()) or []


def ledger_frame(entries: list[dict]) -> pd.DataFrame:
    """One row per entry: the paper results it concerns, its kind, the setting paths it names (empty for a
    difference no setting shows) and the values kdflow runs there, the paper's value, kdflow's, why and the
    effect."""
    rows = []
    for entry in entries:
        setting = entry.get("setting", [])
        rows.append({"results": ", ".join(entry["tables"]), "kind": entry["kind"],
                     "settings": "; ".join([setting] if isinstance(setting, str) else setting),
                     "values": "; ".join(f"{name} = {' | '.join(json.dumps(value) for value in values)}"
                                         for name, values in (entry.get("values") or {}).items()),
                     **{key: " ".join(str(entry[key]).split()) for key in ("paper", "kdflow", "why", "effect")}})
    return pd.DataFrame(rows, columns=COLUMNS)


def ledger_document(entries: list[dict]) -> Document:
    """The counts by kind, then each paper result's entries (an entry about several results is listed under
    each)."""
    frame = ledger_frame(entries)
    counts = frame.groupby("kind", sort=False).size().rename("entries").reset_index()
    blocks = [
        Paragraph(["Every setting a job of a paper result runs with is either the paper's value, stated with its "
                   "citation in ", Code("reference/protocols.yaml"), ", or named here: a value that differs from "
                   "the paper's, or one the paper leaves silent. The test suite fails on a setting that is neither "
                   "(tests/test_deviations.py), so this list is complete for config.yaml."]),
        Table(counts),
    ]
    results = list(dict.fromkeys(result for entry in entries for result in entry["tables"]))
    for result in results:
        mine = frame[[result in entry["tables"] for entry in entries]]
        blocks += [Heading(result), Table(mine.drop(columns="results"))]
    return Document("Deviation ledger: kdflow against the papers' protocols", blocks)
