"""The deviation ledger's entries as a page or a model card states them: the kinds of entry a run adds (rule
run_deviations writes them; kdflow.reporting.protocols checks the ledger against the run), and one entry's statement,
which the paper tables' pages and the model cards share (the export stage cannot import the reporting one)."""

from __future__ import annotations

import json

# Kinds of the entries a run adds: a name of the ledger's (config.yaml's) that a model of the run stands for, and a
# setting where the run departs from the paper that the ledger (written for config.yaml) has no entry for.
STAND_IN, RUN_ONLY = "stand-in", "this run only"


def statement(entry: dict, label=str, code=str) -> str:
    """What an entry says after its kind: the ledger's words, or where the run ran values other than the entry
    explains, the run's (``label`` marks the field names, ``code`` a setting's name)."""
    if entry["kind"] == RUN_ONLY:
        [(setting, values)] = entry["this_run"].items()
        return f"{code(setting)}: paper {value_text(entry['paper'])}, this run {', '.join(map(value_text, values))}."
    if "this_run" in entry:
        ran = "; ".join(f"{code(setting)} {', '.join(map(value_text, values))}"
                        for setting, values in entry["this_run"].items())
        return (f"{label('Paper:')} {_line(entry['paper'])} {label('This run:')} {ran}. (The ledger's explanation is "
                "written for the values config.yaml runs, not this run's.)")
    return " ".join(f"{label(name + ':')} {_line(entry.get(key))}"
                    for name, key in (("kdflow", "kdflow"), ("Paper", "paper"), ("Why", "why"), ("Effect", "effect")))


def value_text(value) -> str:
    """A setting's value as a page prints it: none for a setting the run leaves unset, lists and mappings as JSON."""
    return "none" if value is None else json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _line(text) -> str:
    return " ".join(str(text or "").split())
