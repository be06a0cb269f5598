"""SentEval's probing tasks (Conneau et al. 2018; thesis §3.3, §4.3.6): the ten tasks and their files, the
file reader, the download from SentEval's repository, and the majority and morphology baselines (thesis Fig. 6.3).
Torch-free: the workflow reads the task list while planning."""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kdflow.core.errors import UserError, not_utf8

PROBING_TASKS: dict[str, str] = {
    "Length": "sentence_length.txt",
    "WordContent": "word_content.txt",
    "Depth": "tree_depth.txt",
    "TopConstituents": "top_constituents.txt",
    "BigramShift": "bigram_shift.txt",
    "Tense": "past_present.txt",
    "SubjNumber": "subj_number.txt",
    "ObjNumber": "obj_number.txt",
    "OddManOut": "odd_man_out.txt",
    "CoordinationInversion": "coordination_inversion.txt",
}
SPLIT_TAGS = {"tr": "train", "va": "dev", "te": "test"}
# Thesis Fig. 6.3 and its footnote 6: a label is guessed from whether ANY word ends in the suffix.
MORPHOLOGY_RULES: dict[str, tuple[str, str, str]] = {  # task -> (suffix, label if found, label otherwise)
    "Tense": ("d", "PAST", "PRES"),
    "SubjNumber": ("s", "NNS", "NN"),
    "ObjNumber": ("s", "NNS", "NN"),
}


class ProbingDataError(UserError, ValueError):
    """A probing data file that does not follow SentEval's ``split<TAB>label<TAB>sentence`` format."""


@dataclass(frozen=True)
class ProbingSplit:
    sentences: list[str]
    labels: np.ndarray  # int64 indices into ProbingData.label_names


@dataclass(frozen=True)
class ProbingData:
    label_names: tuple[str, ...]  # sorted, as SentEval's label -> index map
    train: ProbingSplit
    dev: ProbingSplit
    test: ProbingSplit


def read_probing_file(path: str | Path) -> ProbingData:
    """Read one SentEval probing file: lines ``tr|va|te<TAB>label<TAB>sentence`` (thesis §3.3).

    Sentences are whitespace-normalised (SentEval splits them on whitespace). As in SentEval, the label vocabulary
    is the sorted set of training labels; a dev/test label unseen in training is an error, since no probe could
    predict it."""
    path = Path(path)
    try:
        return _read_probing_file(path)
    except UnicodeDecodeError as error:
        raise ProbingDataError(not_utf8(path, error)) from None


def _read_probing_file(path: Path) -> ProbingData:
    rows: dict[str, list[tuple[int, str, str]]] = {split: [] for split in SPLIT_TAGS.values()}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) != 3:
                raise ProbingDataError(f"{path}:{number}: expected 3 tab-separated fields (split, label, "
                                       f"sentence), found {len(fields)}")
            tag, label, sentence = fields
            if tag not in SPLIT_TAGS:
                raise ProbingDataError(f"{path}:{number}: unknown split tag {tag!r}; expected one of tr, va, te")
            if not label.strip() or not sentence.strip():
                raise ProbingDataError(f"{path}:{number}: empty label or sentence")
            rows[SPLIT_TAGS[tag]].append((number, label, " ".join(sentence.split())))
    for split, split_rows in rows.items():
        if not split_rows:
            raise ProbingDataError(f"{path}: the {split} split is empty")
    label_names = tuple(sorted({label for _, label, _ in rows["train"]}))
    index = {label: i for i, label in enumerate(label_names)}
    for split in ("dev", "test"):
        for number, label, _ in rows[split]:
            if label not in index:
                raise ProbingDataError(f"{path}:{number}: {split} label {label!r} does not occur in training")
    splits = {split: ProbingSplit([s for _, _, s in split_rows],
                                  np.array([index[label] for _, label, _ in split_rows], dtype=np.int64))
              for split, split_rows in rows.items()}
    return ProbingData(label_names, **splits)


def load_probing_task(task: str, data_dir: str | Path) -> ProbingData:
    """Read a task by its name in the papers (e.g. ``"Tense"``) from a SentEval ``probing/`` directory."""
    if task not in PROBING_TASKS:
        raise ValueError(f"unknown probing task {task!r}; known: {', '.join(PROBING_TASKS)}")
    return read_probing_file(Path(data_dir) / PROBING_TASKS[task])


def majority_baseline(train_labels: np.ndarray, test_labels: np.ndarray) -> float:
    """Test accuracy of always predicting the most frequent training label (ties: the smallest label id)."""
    majority = np.bincount(np.asarray(train_labels)).argmax()
    return float(np.mean(np.asarray(test_labels) == majority))


def morphology_guess(sentences: list[str], task: str) -> list[str]:
    """The thesis's "morphology-guessing" model (§6.1, Fig. 6.3): PAST if any word ends in "d" (else PRES) for
    Tense, NNS if any word ends in "s" (else NN) for SubjNumber/ObjNumber. Taken literally, so function words
    such as "and" or "his" count too; matching ignores case."""
    if task not in MORPHOLOGY_RULES:
        raise ValueError(f"no morphology guess for {task!r}; defined for {', '.join(MORPHOLOGY_RULES)}")
    suffix, found, otherwise = MORPHOLOGY_RULES[task]
    return [found if any(word.lower().endswith(suffix) for word in sentence.split()) else otherwise
            for sentence in sentences]


def morphology_baseline(task: str, data: ProbingData) -> float:
    """Test accuracy of :func:`morphology_guess`."""
    gold = [data.label_names[label] for label in data.test.labels]
    return float(np.mean([guess == label for guess, label in zip(morphology_guess(data.test.sentences, task), gold)]))


SENTEVAL_PROBING_URL = "https://raw.githubusercontent.com/facebookresearch/SentEval/main/data/probing/{file}"


def download_probing_file(filename: str, path: str | Path) -> None:
    """Fetch one of SentEval's probing files from its GitHub repository (written atomically, then checked)."""
    if filename not in PROBING_TASKS.values():
        raise ValueError(f"{filename!r} is not a SentEval probing file")
    path = Path(path)
    partial = path.with_suffix(".part")
    url = SENTEVAL_PROBING_URL.format(file=filename)
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            partial.write_bytes(response.read())
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        raise UserError(f"could not download {url} ({getattr(error, 'reason', error)}): where there is no internet, "
                        f"put SentEval's probing files in a directory and set `probing.data_dir` to it") from None
    read_probing_file(partial)
    partial.replace(path)
