"""Ingestion: every reader on the shipped fixtures, the hub path on a stand-in, and broken inputs."""

import sys
import types

import pytest
from conftest import demo_task_dir

from kdflow.core.data import DataError, TaskData, prepare_task, read_hub
from kdflow.core.tasks import TASKS, get_task

DEMO_TASKS = ["cola", "sst2", "mrpc", "stsb", "rte", "sara"]


@pytest.mark.parametrize("task_name", DEMO_TASKS)
def test_fixture_ingestion_gives_the_common_schema(prepared, task_name):
    data = prepared(task_name)
    task = get_task(task_name)
    assert set(data.meta["splits"]) == set(task.splits)
    for split in task.splits:
        frame = data.split(split)
        assert list(frame.columns) == ["idx", "text_a", "text_b", "label"]
        assert len(frame) == data.meta["splits"][split] > 0
        assert frame["text_a"].str.len().gt(0).all()
        assert frame["text_b"].notna().all() == task.is_pair
        assert frame["label"].notna().all() == (split in task.eval_splits or split == "train")
    train = data.split("train")
    if task.regression:
        assert train["label"].between(0, 5).all()
    else:
        assert set(train["label"]) == set(range(data.num_labels))


def test_layout_quirks(prepared):
    mrpc = prepared("mrpc").split("train")  # starts with a BOM; label column is 'Quality'
    assert not mrpc["text_a"].str.startswith("\ufeff").any()
    cola = prepared("cola").split("dev")  # no header: the first line is data
    with open(demo_task_dir("cola") / "dev.tsv") as f:
        first = f.readline().rstrip("\n").split("\t")
    assert cola["text_a"].iloc[0] == first[3] and cola["label"].iloc[0] == int(first[1])
    rte = prepared("rte")  # labels by name, in the hub's order
    assert rte.meta["labels"] == ["entailment", "not_entailment"]
    stray_quote = prepared("rte").split("train")["text_a"].str.contains('"')
    assert stray_quote.any(), "quoting is off: sentences keep their stray quotes"
    sara = prepared("sara")
    assert len(sara.meta["labels"]) == 57 and sara.meta["labels"][0] == "affirm"
    assert sara.is_labelled("test")
    sst2_test = prepared("sst2").split("test")
    assert sst2_test["label"].isna().all() and sst2_test["idx"].tolist() == sorted(sst2_test["idx"])


def test_meta_records_sources_with_checksums(prepared):
    meta = prepared("sst2").meta
    assert meta["source"]["kind"] == "local"
    assert len(meta["source"]["files"]) == 3
    assert all(len(digest) == 64 for digest in meta["source"]["files"].values())


def test_hub_ingestion_maps_columns_and_hidden_test_labels(monkeypatch, tmp_path):
    """The hub path on a stand-in for `datasets` (the hub is unreachable here)."""
    calls = []

    class FakeSplit:
        def __init__(self, split):
            labelled = not split.startswith("test")
            self.data = {
                "premise": ["a man sleeps", "a dog runs"],
                "hypothesis": ["someone rests", "a cat runs"],
                "label": [0, 2] if labelled else [-1, -1],
                "idx": [0, 1],
            }

        def to_dict(self):
            return self.data

    def load_dataset(name, config, split):
        calls.append((name, config, split))
        return FakeSplit(split)

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    meta = prepare_task(get_task("mnli"), None, tmp_path / "mnli")
    assert ("nyu-mll/glue", "mnli", "validation_mismatched") in calls
    assert meta["source"] == {"kind": "hub", "dataset": "nyu-mll/glue", "config": "mnli"}
    data = TaskData.load(tmp_path / "mnli")
    dev = data.split("dev_mismatched")
    assert dev["text_b"].tolist() == ["someone rests", "a cat runs"] and dev["label"].tolist() == [0, 2]
    assert data.split("test")["label"].isna().all()
    assert sorted(data.meta["labelled_splits"]) == ["dev", "dev_mismatched", "train"]


def test_sara_is_not_on_the_hub():
    with pytest.raises(DataError, match="not on the Hugging Face hub"):
        read_hub(get_task("sara"))


# Broken inputs: one clear message naming the file (and line), never a deep traceback.


def _rte_dir(tmp_path, train_text):
    directory = tmp_path / "RTE"
    directory.mkdir()
    src = demo_task_dir("rte")
    for name in ("dev.tsv", "test.tsv"):
        (directory / name).write_bytes((src / name).read_bytes())
    (directory / "train.tsv").write_text(train_text)
    return directory


HEADER = "index\tsentence1\tsentence2\tlabel\n"


@pytest.mark.parametrize(
    "train_text, message",
    [
        (HEADER + "0\ta\tb\tentailment\n1\ta\tb\n", r"train.tsv:3: expected 4 tab-separated fields, found 3"),
        (HEADER + "0\ta\tb\tentailment\n1\ta\tb\tmaybe\n", r"train.tsv:3: unknown label 'maybe'"),
        ("index\tsentence1\tsentence2\tgold\n0\ta\tb\tentailment\n", r"train.tsv: missing column 'label'"),
        (HEADER, r"train.tsv: no examples \(empty split\)"),
        ("", r"train.tsv: empty file"),
        (HEADER + "zero\ta\tb\tentailment\n", r"train.tsv:2: index 'zero' is not an integer"),
    ],
    ids=["ragged", "unknown-label", "missing-column", "empty-split", "empty-file", "bad-index"],
)
def test_broken_tsv_gives_a_clear_error(tmp_path, train_text, message):
    with pytest.raises(DataError, match=message):
        prepare_task(get_task("rte"), _rte_dir(tmp_path, train_text), tmp_path / "out")


def test_missing_file_and_directory(tmp_path):
    directory = _rte_dir(tmp_path, HEADER + "0\ta\tb\tentailment\n")
    (directory / "dev.tsv").unlink()
    with pytest.raises(DataError, match=r"RTE/dev.tsv: file not found"):
        prepare_task(get_task("rte"), directory, tmp_path / "out")
    with pytest.raises(DataError, match="data directory for task 'rte' not found"):
        prepare_task(get_task("rte"), tmp_path / "nowhere", tmp_path / "out")


def test_bad_regression_score_and_bad_sara_labels(tmp_path):
    stsb = tmp_path / "STS-B"
    stsb.mkdir()
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    (stsb / "train.tsv").write_text(header + "0\tg\tf\ty\t0\ts\ts\ta\tb\thigh\n")
    with pytest.raises(DataError, match=r"train.tsv:2: score 'high' is not a number"):
        prepare_task(get_task("stsb"), stsb, tmp_path / "out")

    sara = tmp_path / "sara"
    sara.mkdir()
    (sara / "int_to_intent.tsv").write_text("0\taffirm\n2\tdeny\n")
    with pytest.raises(DataError, match="intent ids must be 0, 1, 2"):
        prepare_task(get_task("sara"), sara, tmp_path / "out")
    (sara / "int_to_intent.tsv").write_text("0\taffirm\n1\tdeny\n")
    for split in ("train", "dev", "test"):
        (sara / f"{split}.tsv").write_text("0\tyes\n1\tno\n")
    (sara / "dev.tsv").write_text("0\tyes\n7\tmaybe\n")
    with pytest.raises(DataError, match=r"dev.tsv:2: unknown label '7'"):
        prepare_task(get_task("sara"), sara, tmp_path / "out")


def test_task_registry_is_complete():
    assert set(TASKS) == {"cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "sara"}
    assert get_task("cola").main_metric == "mcc" and get_task("stsb").main_metric == "pearson"
    assert get_task("sara").main_metric == "f1_micro" and get_task("mrpc").metrics == ("accuracy", "f1")
    assert get_task("mnli").eval_splits == ("dev", "dev_mismatched")
    with pytest.raises(KeyError, match="unknown task 'wnli'"):
        get_task("wnli")
