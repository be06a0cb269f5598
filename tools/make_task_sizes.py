"""Write reference/task_sizes.csv: each task's split sizes and tokens per example, which the cost plan
(kdflow.workflow.cost_plan) needs before any data is downloaded.

    python tools/make_task_sizes.py --source ../shared/data --out reference/task_sizes.csv

Counted from a local copy of the original releases (``--source``, ``glue/<Task>/*.tsv`` and ``sara/*.tsv``, read as
the workflow reads them) where a split is there; GLUE's published sizes (Wang et al. 2018, Table 1; the
``nyu-mll/glue`` dataset card) where it is not. ``other`` counts the splits other than train and dev, which every trained model predicts once at the end (test,
MNLI's mismatched ones, Sara's labelled test). ``tokens_per_example`` is what a model computes per example under
dynamic padding: the mean, over random batches of 32 training examples (dev where train is missing), of the
batch's longest example, in BERT wordpieces with [CLS] and [SEP]s, at most 128. Wordpieces are estimated as
1.15 per basic token (words and punctuation split as BERT's basic tokenizer splits them; bert-base-uncased's
vocabulary is not available offline); QQP and MNLI, of which no text is here, from their usual mean lengths
(questions of about 11 words, premises of about 22 and hypotheses of about 11) with the padding factor of the
measured pair tasks. Every row says which.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kdflow.core.data import read_sara_labels, read_tsv_split  # noqa: E402
from kdflow.core.tasks import TASKS  # noqa: E402

PIECES_PER_TOKEN = 1.15
BATCH, MAX_LENGTH, SEED = 32, 128, 0
# Published sizes (GLUE: Wang et al. 2018; nyu-mll/glue) of splits that may be missing from --source.
PUBLISHED = {
    "qqp": {"train": 363846, "dev": 40430, "test": 390965},
    "mnli": {"train": 392702, "dev": 9815, "dev_mismatched": 9832, "test": 9796, "test_mismatched": 9847},
    "qnli": {"train": 104743, "dev": 5463, "test": 5463},
}
USUAL_WORDS = {"qqp": (11, 11), "mnli": (22, 11)}  # mean words of text_a and text_b
BASIC_TOKEN = re.compile(r"\w+|[^\w\s]")


def wordpieces(text: str | None) -> float:
    return 0.0 if not text else PIECES_PER_TOKEN * len(BASIC_TOKEN.findall(text))


def padded_length(lengths: np.ndarray) -> float:
    """Mean over random batches of the longest example of the batch, capped at MAX_LENGTH."""
    order = np.random.default_rng(SEED).permutation(len(lengths))
    capped = np.minimum(lengths[order], MAX_LENGTH)
    return float(np.mean([capped[start:start + BATCH].max() for start in range(0, len(capped), BATCH)]))


def task_row(name: str, source: Path) -> dict:
    task = TASKS[name]
    directory = source / "sara" if task.source == "sara" else source / "glue" / task.tsv_dir
    label_values = (tuple(map(str, range(len(read_sara_labels(directory))))) if task.source == "sara"
                    else task.tsv_label_values)
    sizes, counted, texts = {}, [], None
    for split, layout in task.tsv.items():
        path = directory / layout.filename
        if path.is_file():
            read = read_tsv_split(path, layout, label_values if layout.label_column is not None else None,
                                  task.regression, task.score_range)
            sizes[split] = len(read)
            counted.append(split)
            if split == "train" or (split == "dev" and texts is None):
                texts = read
        else:
            sizes[split] = PUBLISHED[name][split]
    specials = 3 if task.is_pair else 2
    if texts is not None:
        lengths = np.array([specials + wordpieces(a) + wordpieces(b)
                            for a, b in zip(texts.text_a, texts.text_b or [None] * len(texts))])
        tokens, how = padded_length(lengths), f"measured on {'train' if sizes['train'] == len(texts) else 'dev'}"
    else:
        tokens, how = None, "usual mean lengths"
    published = [split for split in task.tsv if split not in counted]
    sizes_from = "; ".join(part for part in (f"counted: {', '.join(counted)}" if counted else "",
                                             f"published: {', '.join(published)}" if published else "") if part)
    return {"task": name, "train": sizes["train"], "dev": sizes["dev"],
            "other": sum(sizes[split] for split in task.tsv if split not in ("train", "dev")),
            "tokens_per_example": tokens, "sizes": sizes_from,
            "tokens": how, "mean_tokens": None if texts is None else float(np.mean(np.minimum(lengths, MAX_LENGTH)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "reference" / "task_sizes.csv")
    args = parser.parse_args()
    table = pd.DataFrame([task_row(name, args.source) for name in TASKS])
    measured_pairs = table[table.tokens_per_example.notna() & table.task.map(lambda t: TASKS[t].is_pair)]
    padding = float((measured_pairs.tokens_per_example / measured_pairs.mean_tokens).mean())
    for name, (words_a, words_b) in USUAL_WORDS.items():
        row = table.task == name
        if table.loc[row, "tokens_per_example"].isna().all():
            mean = 3 + PIECES_PER_TOKEN * (words_a + words_b)
            table.loc[row, "tokens_per_example"] = min(MAX_LENGTH, mean * padding)
            table.loc[row, "tokens"] = (f"estimated: about {words_a} + {words_b} words, padding factor {padding:.2f} "
                                        "of the measured pair tasks")
    table["tokens_per_example"] = table.tokens_per_example.round(1)
    table.drop(columns="mean_tokens").to_csv(args.out, index=False)
    print(table.drop(columns="mean_tokens").to_string(index=False))


if __name__ == "__main__":
    main()
