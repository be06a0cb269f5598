"""Registry of the downstream tasks: GLUE (Wang et al. 2018) and Sara (Sučík 2020, §3.1.3).

A :class:`Task` says everything the workflow needs to know about a task: its text fields, its label set (or
that it is a regression), its official metrics, where its splits live in the classic GLUE TSV layout and in
the Hugging Face hub copy of GLUE, and which split selects models (always a dev split, never test).

Label ids follow the Hugging Face ``nyu-mll/glue`` ordering so that hub and TSV ingestion give identical ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TsvLayout:
    """How one split is stored in the classic GLUE TSV layout (or Sara's thesis layout)."""

    filename: str
    text_columns: tuple[str, ...] | tuple[int, ...]
    label_column: str | int | None = None  # None: the split is unlabelled (GLUE test sets)
    header: bool = True
    n_columns: int | None = None  # only for header-less files, where it cannot be read off the header


@dataclass(frozen=True)
class Task:
    name: str
    labels: tuple[str, ...] | None  # None: regression, or label names read from the data (Sara)
    metrics: tuple[str, ...]  # the first one is the task's main metric, used for model selection
    tsv: dict[str, TsvLayout]  # split -> layout; 'train', 'dev', 'test' and extra eval splits
    hub: dict[str, str] = field(default_factory=dict)  # split -> nyu-mll/glue split name
    hub_config: str | None = None
    hub_text_columns: tuple[str, ...] = ()
    # Raw label values in the TSV files, in label-id order (e.g. "0"/"1" for CoLA, names for RTE).
    tsv_label_values: tuple[str, ...] | None = None
    tsv_dir: str = ""  # directory name under the GLUE data root (e.g. "SST-2")
    source: str = "glue"
    regression: bool = False
    score_range: tuple[float, float] | None = None  # a regression task's scale (STS-B: 0-5)

    @property
    def is_pair(self) -> bool:
        return len(self.tsv["train"].text_columns) == 2

    @property
    def main_metric(self) -> str:
        return self.metrics[0]

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self.tsv)

    @property
    def eval_splits(self) -> tuple[str, ...]:
        """Labelled splits that are not train: scored after training. 'dev' selects models."""
        return tuple(s for s in self.tsv if s != "train" and self.tsv[s].label_column is not None)


def _glue(
    name, tsv_dir, hub_config, labels, metrics, text, label, hub_text, tsv_label_values=None, extra=None,
    score_range=None,
):
    """A GLUE task whose train/dev files have a header with ``label`` and whose test file has ``index``."""
    tsv = {
        "train": TsvLayout("train.tsv", text, label),
        "dev": TsvLayout("dev.tsv", text, label),
        "test": TsvLayout("test.tsv", text),
    }
    hub = {"train": "train", "dev": "validation", "test": "test"}
    for split, (layout, hub_split) in (extra or {}).items():
        tsv[split] = layout
        hub[split] = hub_split
    return Task(
        name=name,
        labels=labels,
        regression=labels is None,
        metrics=metrics,
        tsv=tsv,
        hub=hub,
        hub_config=hub_config,
        hub_text_columns=hub_text,
        tsv_label_values=tsv_label_values if labels is None else (tsv_label_values or tuple(map(str, range(len(labels))))),
        tsv_dir=tsv_dir,
        score_range=score_range,
    )


_NLI = ("entailment", "not_entailment")
_MNLI_TEXT = ("sentence1", "sentence2")
_MNLI_LABELS = ("entailment", "neutral", "contradiction")

TASKS: dict[str, Task] = {
    "cola": Task(
        name="cola",
        labels=("unacceptable", "acceptable"),
        metrics=("mcc", "accuracy"),
        # train/dev: source, label, original label (often empty), sentence; no header.
        tsv={
            "train": TsvLayout("train.tsv", (3,), 1, header=False, n_columns=4),
            "dev": TsvLayout("dev.tsv", (3,), 1, header=False, n_columns=4),
            "test": TsvLayout("test.tsv", ("sentence",)),
        },
        hub={"train": "train", "dev": "validation", "test": "test"},
        hub_config="cola",
        hub_text_columns=("sentence",),
        tsv_label_values=("0", "1"),
        tsv_dir="CoLA",
    ),
    "sst2": _glue("sst2", "SST-2", "sst2", ("negative", "positive"), ("accuracy",), ("sentence",), "label", ("sentence",)),
    "mrpc": _glue(
        "mrpc",
        "MRPC",
        "mrpc",
        ("not_equivalent", "equivalent"),
        ("accuracy", "f1"),
        ("#1 String", "#2 String"),
        "Quality",
        ("sentence1", "sentence2"),
    ),
    "qqp": _glue(
        "qqp",
        "QQP",
        "qqp",
        ("not_duplicate", "duplicate"),
        ("accuracy", "f1"),
        ("question1", "question2"),
        "is_duplicate",
        ("question1", "question2"),
    ),
    "stsb": _glue(
        "stsb", "STS-B", "stsb", None, ("pearson", "spearman"), ("sentence1", "sentence2"), "score", ("sentence1", "sentence2"),
        score_range=(0.0, 5.0),  # similarity from 0 (unrelated) to 5 (equivalent), GLUE's annotation scale
    ),
    "mnli": Task(
        name="mnli",
        labels=_MNLI_LABELS,
        metrics=("accuracy",),
        tsv={
            "train": TsvLayout("train.tsv", _MNLI_TEXT, "gold_label"),
            "dev": TsvLayout("dev_matched.tsv", _MNLI_TEXT, "gold_label"),
            "dev_mismatched": TsvLayout("dev_mismatched.tsv", _MNLI_TEXT, "gold_label"),
            "test": TsvLayout("test_matched.tsv", _MNLI_TEXT),
            "test_mismatched": TsvLayout("test_mismatched.tsv", _MNLI_TEXT),
        },
        hub={
            "train": "train",
            "dev": "validation_matched",
            "dev_mismatched": "validation_mismatched",
            "test": "test_matched",
            "test_mismatched": "test_mismatched",
        },
        hub_config="mnli",
        hub_text_columns=("premise", "hypothesis"),
        tsv_label_values=_MNLI_LABELS,
        tsv_dir="MNLI",
    ),
    "qnli": _glue("qnli", "QNLI", "qnli", _NLI, ("accuracy",), ("question", "sentence"), "label", ("question", "sentence"), _NLI),
    "rte": _glue("rte", "RTE", "rte", _NLI, ("accuracy",), ("sentence1", "sentence2"), "label", ("sentence1", "sentence2"), _NLI),
    # Sara (thesis §3.1.3): `intent_id<TAB>text`, no header, every split labelled; 57 intents named in
    # int_to_intent.tsv. Scored with micro-F1, which equals accuracy for single-label classification.
    "sara": Task(
        name="sara",
        labels=None,  # the 57 intent names are read from int_to_intent.tsv at ingestion
        metrics=("f1_micro", "accuracy"),
        tsv={
            "train": TsvLayout("train.tsv", (1,), 0, header=False, n_columns=2),
            "dev": TsvLayout("dev.tsv", (1,), 0, header=False, n_columns=2),
            "test": TsvLayout("test.tsv", (1,), 0, header=False, n_columns=2),
        },
        source="sara",
    ),
}


# (task, split) -> the file the GLUE test server expects for it
GLUE_FILES = {
    ("cola", "test"): "CoLA.tsv",
    ("sst2", "test"): "SST-2.tsv",
    ("mrpc", "test"): "MRPC.tsv",
    ("qqp", "test"): "QQP.tsv",
    ("stsb", "test"): "STS-B.tsv",
    ("mnli", "test"): "MNLI-m.tsv",
    ("mnli", "test_mismatched"): "MNLI-mm.tsv",
    ("qnli", "test"): "QNLI.tsv",
    ("rte", "test"): "RTE.tsv",
}


def get_task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise KeyError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}") from None
