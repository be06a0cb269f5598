"""The deviation ledger's page (kdflow.reporting.ledger): every entry with its structured fields, under each paper
result it concerns."""

from conftest import REPO

from kdflow.reporting.ledger import ledger_document, ledger_frame, read_ledger

ENTRIES = [
    {"tables": ["alp_kd_table1", "alp_kd_table2"], "setting": ["a.*.stages", "b.*"], "kind": "paper silent",
     "values": {"stages": [[{"epochs": 5}]], "lr": [1e-5, 2e-5]}, "paper": "silent (§4)",
     "kdflow": "5 epochs,\n  every task", "why": "W1.", "effect": "Not measured."},
    {"tables": ["alp_kd_table2"], "kind": "unavailable", "paper": "Table 1's numbers", "kdflow": "an em dash",
     "why": "W2.", "effect": "E2."},
]


def test_a_row_per_entry_with_its_settings_and_fields_on_one_line():
    frame = ledger_frame(ENTRIES)
    assert list(frame.columns) == ["results", "kind", "settings", "values", "paper", "kdflow", "why", "effect"]
    assert frame.iloc[0].to_dict() == {"results": "alp_kd_table1, alp_kd_table2", "kind": "paper silent",
                                       "settings": "a.*.stages; b.*", "values": 'stages = [{"epochs": 5}]; '
                                       "lr = 1e-05 | 2e-05", "paper": "silent (§4)",
                                       "kdflow": "5 epochs, every task", "why": "W1.", "effect": "Not measured."}
    assert frame.iloc[1].settings == frame.iloc[1]["values"] == ""  # a difference no setting shows


def test_the_page_counts_the_kinds_and_lists_each_results_entries():
    text = ledger_document(ENTRIES).markdown()
    assert "| paper silent | 1 |" in text and "| unavailable | 1 |" in text
    table1, table2 = text.split("## alp_kd_table1")[1].split("## alp_kd_table2")
    assert "5 epochs, every task" in table1 and "an em dash" not in table1
    assert "5 epochs, every task" in table2 and "an em dash" in table2


def test_the_real_ledger_renders_every_entry():
    entries = read_ledger(REPO / "reference" / "deviations.yaml")
    frame = ledger_frame(entries)
    assert len(frame) == len(entries) and (frame.paper != "").all() and (frame.kdflow != "").all()
    html = ledger_document(entries).html()
    assert all(f"<h2>{result}</h2>" in html for entry in entries for result in entry["tables"])
