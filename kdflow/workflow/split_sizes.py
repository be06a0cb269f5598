"""The split sizes the cost plan (:mod:`kdflow.workflow.cost_plan`) counts work in: per task, its splits' examples
and tokens per example; the examples of a transfer set; the sentences of a SentEval probing file.

Split sizes come from the raw files where the config points at local ones that exist (the demo's), else from
reference/task_sizes.csv (GLUE's sizes, and the Sara split; the full config downloads GLUE only when it runs).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pandas as pd

from kdflow.core.tasks import TASKS
from kdflow.workflow.job_inputs import raw_task_files, task_source_dir, unlabelled_files
from kdflow.workflow.job_settings import TRANSFER_SOURCES, teacher_jobs, transfer_sets

TASK_SIZES = "reference/task_sizes.csv"
SENTEVAL_SENTENCES = {"train": 100_000, "dev": 10_000, "test": 10_000}  # every SentEval probing task (Conneau 2018)


# Sizes: split sizes and tokens per example, per task.


def task_sizes(config: dict, table: pd.DataFrame) -> dict[str, dict]:
    """Per task: ``train``, ``dev``, ``other`` (the splits predicted once at the end), ``tokens`` per example and
    ``sizes`` (where the sizes come from): counted in the task's raw files where the config points at a local copy
    that exists, else reference/task_sizes.csv."""
    sizes = {}
    rows = table.set_index("task")
    for name, task in TASKS.items():
        row = rows.loc[name]
        entry = {"train": int(row.train), "dev": int(row.dev), "other": int(row.other),
                 "tokens": float(row.tokens_per_example), "sizes": TASK_SIZES}
        source = task_source_dir(config, name)
        directory = None if source is None else Path(source)
        if directory is not None and all((directory / layout.filename).is_file() for layout in task.tsv.values()):
            counts = count_rows(name, directory)
            entry.update(train=counts["train"], dev=counts["dev"],
                         other=sum(n for split, n in counts.items() if split not in ("train", "dev")),
                         sizes=f"counted in {directory}")
        sizes[name] = entry
    return sizes


def counted_files(config: dict, probing_files: list[str]) -> list[str]:
    """The local files whose rows the plan counts: the raw task files, the ``probing_files`` and the unlabelled
    text that exist (editing them changes the plan)."""
    tasks = dict.fromkeys(task for _, task in teacher_jobs(config))
    files = [path for task in tasks for path in raw_task_files(config, task)]
    files += [path for path in probing_files if os.path.isfile(path)]
    for transfer, task in transfer_sets(config):
        if "unlabelled" in TRANSFER_SOURCES[transfer]:
            files += unlabelled_files(config, task)
    return sorted(set(files))


def count_rows(task: str, directory: Path) -> dict[str, int]:
    """Examples per split of a task's raw files: their non-blank lines, less the header, read as ingestion reads
    them (tab-separated, quoting disabled; kdflow.core.data, which checks each row when the task is prepared)."""
    counts = {}
    for split, layout in TASKS[task].tsv.items():
        with open(directory / layout.filename, encoding="utf-8-sig", newline="") as lines:
            rows = [row for row in csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE) if row and row != [""]]
        counts[split] = len(rows) - layout.header
    return counts


def transfer_size(config: dict, sizes: dict, transfer: str, task: str) -> int:
    """Examples of a transfer set before its hygiene: train, the sampled sentences, the unlabelled lines."""
    examples = sizes[task]["train"]
    if "generated" in TRANSFER_SOURCES[transfer]:
        examples += config["generation"]["sampling"]["sentences"]
    if "unlabelled" in TRANSFER_SOURCES[transfer]:
        examples += sum(sum(1 for line in open(path, encoding="utf-8") if line.strip())
                        for path in unlabelled_files(config, task))
    return examples


def probing_split_sizes(path: str) -> dict[str, int]:
    """Sentences per split (``tr``, ``va``, ``te``) of a SentEval probing file: counted where the file exists,
    else SentEval's sizes."""
    if not Path(path).is_file():
        return dict(zip(("tr", "va", "te"), SENTEVAL_SENTENCES.values()))
    counts = dict.fromkeys(("tr", "va", "te"), 0)
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            split = line.split("\t", 1)[0]
            if split in counts:
                counts[split] += 1
    return counts
