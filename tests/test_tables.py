"""The teacher and probing tables on small hand-made results, and their pages."""

import json

import pandas as pd

from kdflow.reporting.tables import probing_document, probing_table, teacher_table, write_table


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

    write_table(table, tmp_path / "t.csv", tmp_path / "t.md", tmp_path / "t.html")
    assert len(pd.read_csv(tmp_path / "t.csv")) == len(table)
    text = (tmp_path / "t.md").read_text()
    assert text.startswith("# Teachers\n\n| teacher | task | metric | dev | test |\n|---|---|---|---:|---:|\n")
    assert "| big | sara | f1_micro | 90.0 | 85.0 |" in text  # main metric first, as in the task registry
    assert "| big | cola | mcc | 25.0 | — |" in text  # no test score: an explicit empty mark
    assert "# Pseudo-heads of big (dev, per layer)" in text
    assert "| task | metric | L1 | L2 |" in text and "| cola | mcc | 10.0 | — |" in text
    page = (tmp_path / "t.html").read_text()
    assert "<title>Teachers</title>" in page and '<h1 id="pseudo-heads-of-big-dev-per-layer">Pseudo-heads of big (dev, per layer)</h1>' in page
    assert "<td>f1_<wbr>micro</td>\n      <td>90.0</td>\n      <td>85.0</td>" in page  # a name may break after _


def probing_result(task: str, accuracies: list[tuple[float, float]]) -> dict:
    """A probe_encodings result: per layer (dev, test) accuracy, and the task's baselines."""
    layers = [{"layer": layer, "dev_accuracy": dev, "test_accuracy": test, "selected": {"hidden_size": 8, "dropout": 0.1, "l2": 1e-4}}
              for layer, (dev, test) in enumerate(accuracies)]
    return {"task": task, "layers": layers, "baselines": {"majority": 0.5}}


def test_probing_page_shows_the_test_accuracy_of_the_layer_best_on_dev():
    table = probing_table({"bert_<2>": [probing_result("Length", [(0.6, 0.7), (0.9, 0.8)]),
                                        probing_result("Tense", [(0.7, 0.75), (0.6, 0.9)])]})
    page = probing_document(table)
    text = page.markdown()
    assert "| model | Length | Tense |\n|---|---:|---:|\n| bert\\_\\<2\\> | 80.0 (L1) | 75.0 (L0) |" in text
    assert "| baseline: majority | 50.0 | 50.0 |" in text
    assert "## bert\\_\\<2\\>: test accuracy per layer (0 = embeddings)" in text
    assert "| layer | Length | Tense |\n|---:|---:|---:|\n| 0 | 70.0 | 75.0 |" in text
    html = page.html()
    assert "<td>bert_&lt;2&gt;</td>" in html and ">bert_&lt;2&gt;: test accuracy per layer (0 = embeddings)</h2>" in html
