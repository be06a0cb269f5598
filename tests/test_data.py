"""Ingestion: every reader on the shipped fixtures, the hub path on a local copy in the hub's schema, and broken
inputs."""

import datasets
import pytest
from conftest import demo_task_dir

from kdflow.core import data as data_module
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


# nyu-mll/glue on the Hugging Face hub, as its dataset card declares it (written down here independently of
# kdflow.core.tasks): text columns, label names (None: STS-B's float score), splits. Test labels are -1.
HUB_GLUE = {
    "cola": (("sentence",), ("unacceptable", "acceptable"), ("train", "validation", "test")),
    "sst2": (("sentence",), ("negative", "positive"), ("train", "validation", "test")),
    "mrpc": (("sentence1", "sentence2"), ("not_equivalent", "equivalent"), ("train", "validation", "test")),
    "qqp": (("question1", "question2"), ("not_duplicate", "duplicate"), ("train", "validation", "test")),
    "stsb": (("sentence1", "sentence2"), None, ("train", "validation", "test")),
    "mnli": (("premise", "hypothesis"), ("entailment", "neutral", "contradiction"),
             ("train", "validation_matched", "validation_mismatched", "test_matched", "test_mismatched")),
    "qnli": (("question", "sentence"), ("entailment", "not_entailment"), ("train", "validation", "test")),
    "rte": (("sentence1", "sentence2"), ("entailment", "not_entailment"), ("train", "validation", "test")),
}


@pytest.fixture(scope="module")
def hub_copy(tmp_path_factory):
    """A local copy of nyu-mll/glue in the hub's own layout (a dataset card with `configs`, one Parquet file per
    config and split, `datasets` features), which `datasets.load_dataset` reads like the hub repository."""
    root = tmp_path_factory.mktemp("hub") / "glue"
    card = ["---", "configs:"]
    for config, (columns, names, splits) in HUB_GLUE.items():
        label = datasets.Value("float32") if names is None else datasets.ClassLabel(names=list(names))
        features = datasets.Features({**{column: datasets.Value("string") for column in columns},
                                      "label": label, "idx": datasets.Value("int32")})
        card += [f"- config_name: {config}", "  data_files:"]
        for split in splits:
            hidden = split.startswith("test")
            labels = [-1, -1] if hidden else ([4.5, 0.25] if names is None else [len(names) - 1, 0])
            rows = {**{column: [f"{config} {split} {column} {i}" for i in range(2)] for column in columns},
                    "label": labels, "idx": [0, 1]}
            (root / config).mkdir(parents=True, exist_ok=True)
            datasets.Dataset.from_dict(rows, features=features).to_parquet(
                root / config / f"{split}-00000-of-00001.parquet")
            card += [f"  - split: {split}", f"    path: {config}/{split}-*"]
    (root / "README.md").write_text("\n".join([*card, "---", ""]))
    return root


@pytest.mark.parametrize("task_name", sorted(HUB_GLUE))
def test_hub_ingestion_reads_the_hubs_own_schema(hub_copy, task_name, monkeypatch, tmp_path):
    """The hub branch through the real `datasets.load_dataset`, offline, on a copy in the hub's schema: every split
    found under its hub name, the text columns, label ids in the hub's order, hidden test labels."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data_module, "HUB_DATASET", str(hub_copy))
    columns, names, _ = HUB_GLUE[task_name]
    task = get_task(task_name)
    assert task.labels == names  # kdflow's label ids are the hub's
    meta = prepare_task(task, None, tmp_path / task_name)
    assert meta["source"] == {"kind": "hub", "dataset": str(hub_copy), "config": task_name}
    data = TaskData.load(tmp_path / task_name)
    assert set(data.meta["splits"]) == set(task.splits)
    for split, hub_split in task.hub.items():
        frame = data.split(split)
        assert frame["text_a"].tolist() == [f"{task_name} {hub_split} {columns[0]} {i}" for i in range(2)]
        if task.is_pair:
            assert frame["text_b"].tolist() == [f"{task_name} {hub_split} {columns[1]} {i}" for i in range(2)]
        if hub_split.startswith("test"):
            assert frame["label"].isna().all()
        else:
            expected = [4.5, 0.25] if names is None else [len(names) - 1, 0]
            assert frame["label"].tolist() == pytest.approx(expected)


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
