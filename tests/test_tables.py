"""The teacher table on small hand-made metrics files."""

import json

import pandas as pd

from kdflow.reporting.tables import markdown, teacher_table, write_table


def _write(path, payload):
    path.write_text(json.dumps(payload))
    return path


def test_teacher_table_rows_and_markdown(tmp_path):
    teacher = _write(tmp_path / "t.json", {"scores": {"dev": {"f1_micro": 0.9, "accuracy": 0.9}, "test": {"f1_micro": 0.85, "accuracy": 0.85}}})
    heads = _write(tmp_path / "h.json", {"layers": [
        {"layer": 1, "f1_micro": 0.5, "accuracy": 0.5, "gold_distance": 0.7},
        {"layer": 2, "f1_micro": 0.8, "accuracy": 0.8, "gold_distance": 0.3},
    ]})
    cola = _write(tmp_path / "c.json", {"scores": {"dev": {"mcc": 0.25, "accuracy": 0.7}}})
    cola_heads = _write(tmp_path / "ch.json", {"layers": [{"layer": 1, "mcc": 0.1, "accuracy": 0.6, "gold_distance": 0.6}]})
    table = teacher_table([("big", "sara"), ("big", "cola")], [teacher, cola], [heads, cola_heads])

    rows = table[(table.component == "teacher") & (table.task == "sara")]
    assert len(rows) == 4 and set(rows.split) == {"dev", "test"}
    assert rows.set_index(["split", "metric"]).loc[("test", "f1_micro"), "value"] == 85.0
    head = table[(table.component == "pseudo_head") & (table.layer == 2) & (table.metric == "f1_micro")]
    assert head.value.item() == 80.0 and head.gold_distance.item() == 0.3

    write_table(table, tmp_path / "t.csv", tmp_path / "t.md")
    assert len(pd.read_csv(tmp_path / "t.csv")) == len(table)
    text = (tmp_path / "t.md").read_text()
    assert "| big | sara | f1_micro | 90.0 | 85.0 |" in text  # main metric first, as in the task registry
    assert "| big | cola | mcc | 25.0 | — |" in text  # no test score: an explicit empty mark
    assert "| task | metric | L1 | L2 |" in text and "| cola | mcc | 10.0 | — |" in text


def test_markdown_formats_missing_values_and_numbers():
    frame = pd.DataFrame({"a": ["x", "y"], "b": [1.234, float("nan")]})
    assert markdown(frame) == "| a | b |\n|---|---|\n| x | 1.2 |\n| y | — |\n"
