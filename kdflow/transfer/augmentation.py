"""Transfer sets: the examples a student learns from, each labelled by the teacher (thesis §3.2, §4.3.2).

``train`` is the task's training split. The other sets add, after their hygiene, sentences from one or two sources:
``augmented`` those sampled from a fine-tuned generator (:mod:`kdflow.transfer.generation`, in independent seeded
shards), ``unlabelled`` the researcher's own text (:mod:`kdflow.transfer.unlabelled`), ``unlabelled_augmented``
both. The hygiene of each source:

* a sequence with the wrong number of separators (a pair without one, or a single sentence with one) and an
  empty sentence are always dropped: they are not an input of the task;
* the hygiene options (config ``generation.hygiene``, ``unlabelled.hygiene``) drop unfinished generated sequences
  (cut at ``max_length``), copies of a training example, repeats of an earlier sequence of the source, and copies
  of a dev or test example. The thesis kept all of these (thesis-original-code.md, "Data"); kdflow follows it
  except for dev/test copies, which stay dropped by default, so that nothing of the evaluation data leaks into
  training through the generator or the researcher's text. Copies are compared case- and whitespace-
  insensitively, because a generator's decoded text differs from the raw text in spacing (WordPiece:
  ``it ' s``) and, for uncased vocabularies, in case.

Every step is counted (the matching sequences, whether dropped or kept). ``<set>.parquet`` has the prepared
splits' columns plus ``origin`` (train, unlabelled or generated); added examples have no gold label (null in the
file; -1, or NaN for regression, in memory: see :func:`kdflow.training.losses.task_loss`).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from kdflow.core import statistics
from kdflow.core.data import Split, TaskData
from kdflow.core.documents import Bullets, Document, Emphasis, Paragraph, Table
from kdflow.core.intermediates import read_parquet, write_parquet
from kdflow.core.io import atomic_output, write_json

log = logging.getLogger("kdflow")

# What each source's hygiene counts, in order: the sequences read, each step's matches, the sequences kept.
HYGIENE_STEPS = {
    "generated": ("wrong_separators", "empty", "unfinished", "in_dev_or_test", "train_copies", "duplicates"),
    "unlabelled": ("empty", "in_dev_or_test", "train_copies", "duplicates"),
}

# The hygiene option that keeps what a step matches (config `generation.hygiene`, `unlabelled.hygiene`).
KEEP_OPTIONS = {"unfinished": "keep_unfinished", "in_dev_or_test": "keep_dev_test_copies",
                "train_copies": "keep_train_copies", "duplicates": "keep_duplicates"}


def match_key(text_a: pd.Series, text_b: pd.Series | None) -> pd.Series:
    """Case- and whitespace-insensitive identity of an example (see the module docstring)."""
    squash = lambda s: s.fillna("").str.lower().map(lambda t: re.sub(r"\s+", "", t))  # noqa: E731
    key = squash(text_a)
    return key if text_b is None else key + "\t" + squash(text_b)


def _hygiene(source: str, frame: pd.DataFrame, task: TaskData, options: dict) -> tuple[pd.DataFrame, dict]:
    """``frame`` after the source's hygiene steps, and the count of every step (``dropped`` lists the steps that
    dropped what they matched; the others only counted it). ``options``: the ``keep_*`` switches."""
    pair = task.meta["pair"]
    counts, dropped = {"read": len(frame)}, []
    key = lambda rows: match_key(rows["text_a"], rows["text_b"] if pair else None)  # noqa: E731
    evaluation = {k for name in task.meta["splits"] if name != "train" for k in key(task.split(name))}
    train = set(key(task.split("train")))
    matches = {
        "wrong_separators": lambda rows: rows["separators"] != (1 if pair else 0),
        "empty": lambda rows: (rows["text_a"].str.strip() == "")
        | (pair & (rows["text_b"].fillna("").str.strip() == "")),
        "unfinished": lambda rows: ~rows["finished"],
        "in_dev_or_test": lambda rows: key(rows).isin(evaluation),
        "train_copies": lambda rows: key(rows).isin(train),
        "duplicates": lambda rows: key(rows).duplicated(),
    }
    for step in HYGIENE_STEPS[source]:
        mask = matches[step](frame)
        counts[step] = int(mask.sum())
        if not options.get(KEEP_OPTIONS.get(step), False):  # malformed and empty sequences are always dropped
            dropped.append(step)
            frame = frame[~mask]
    return frame, {**counts, "kept": len(frame), "dropped": dropped}


def build_transfer_set(task: TaskData, out_path: Path, report_path: Path, *, shard_paths: list[Path] = (),
                       generated_hygiene: dict | None = None, unlabelled: pd.DataFrame | None = None,
                       unlabelled_hygiene: dict | None = None) -> dict:
    """Train plus the unlabelled text (``unlabelled``: text_a, text_b) and the generated shards, each source after
    its hygiene, into one transfer set (``origin``: train, unlabelled or generated), and the count of every
    step per source. Copies across the two sources are not looked for."""
    pair = task.meta["pair"]
    train = task.split("train")
    parts, sources = [train.drop(columns="idx").assign(origin="train")], {}
    inputs = {"unlabelled": (unlabelled, unlabelled_hygiene),
              "generated": (pd.concat([read_parquet(p) for p in shard_paths], ignore_index=True)
                            if shard_paths else None, generated_hygiene)}
    for source, (frame, options) in inputs.items():
        if frame is None:
            continue
        kept, sources[source] = _hygiene(source, frame, task, options or {})
        kept = kept.assign(label=None, origin=source)[["text_a", "text_b", "label", "origin"]]
        if not pair:
            kept["text_b"] = None
        parts.append(kept)
    merged = pd.concat(parts, ignore_index=True)
    merged.insert(0, "idx", np.arange(len(merged)))
    merged = merged.astype(object).where(merged.notna(), None)  # NaN -> null in the file
    columns = Split(merged["idx"].tolist(), merged["text_a"].tolist(), merged["text_b"].tolist(),
                    merged["label"].tolist())  # the prepared splits' schema; label null where unlabelled
    table = columns.to_table(task.meta["regression"]).append_column("origin", pa.array(merged["origin"], pa.string()))
    with atomic_output(out_path) as path:
        write_parquet(table, path)
    report = {"task": task.meta["task"], "train": len(train), "total": len(merged), "sources": sources}
    write_json(report_path, report)
    log.info("transfer set: %s", report)
    return report


# Statistics for the report (thesis Table 4.5 and §4.3.2's sample sentences).


def distinct_n(texts: list[str], n: int) -> float:
    """Distinct-n (Li et al. 2016): unique word n-grams / all word n-grams of the corpus."""
    grams = [tuple(words[i:i + n]) for words in (t.lower().split() for t in texts) for i in range(len(words) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def length_summary(texts: pd.Series) -> dict:
    words = texts.fillna("").str.split().str.len()
    edges = [0, 5, 10, 20, 30, 50, 80, np.inf]
    histogram = pd.cut(words, edges, right=False).value_counts(normalize=True, sort=False)
    return {
        "mean": float(words.mean()), "median": float(words.median()),
        "p10": float(words.quantile(0.1)), "p90": float(words.quantile(0.9)), "max": int(words.max()),
        "histogram": {f"{int(i.left)}-{'' if np.isinf(i.right) else int(i.right) - 1}": round(float(v), 4)
                      for i, v in histogram.items()},
    }


def transfer_statistics(task: TaskData, frame: pd.DataFrame, teacher_logits: np.ndarray, hygiene: dict,
                        examples: int = 20, seed: int = 0) -> dict:
    """Generated vs real (train) sentences of an augmented transfer set: word-length distribution, distinct-n
    (on equal-size random samples, since distinct-n falls with corpus size), the teacher's label distribution,
    and ``examples`` random generated examples with the teacher's label."""
    meta, rng = task.meta, np.random.default_rng(seed)
    text = frame["text_a"] if not meta["pair"] else frame["text_a"] + " " + frame["text_b"].fillna("")
    origins = {o: np.flatnonzero(frame["origin"].to_numpy() == o) for o in ("train", "generated")}
    size = min(len(rows) for rows in origins.values())
    stats = {"task": meta["task"], "hygiene": hygiene, "sizes": {o: len(r) for o, r in origins.items()}, "origins": {}}
    for origin, rows in origins.items():
        sample_rows = rng.choice(rows, size=size, replace=False) if size else rows[:0]
        entry = {
            "words": length_summary(text.iloc[rows]),
            f"distinct_n_on_{size}": {str(n): distinct_n(text.iloc[sample_rows].tolist(), n) for n in (1, 2, 3)},
        }
        if meta["regression"]:
            scores = teacher_logits[rows, 0]
            entry["teacher_score"] = {"mean": float(scores.mean()), "std": statistics.sample_std(scores)}
        else:
            predicted = np.bincount(teacher_logits[rows].argmax(-1), minlength=len(meta["labels"])) / max(1, len(rows))
            entry["teacher_labels"] = dict(zip(meta["labels"], map(float, predicted)))
        stats["origins"][origin] = entry
    if not meta["regression"]:
        gold = np.bincount(frame["label"].to_numpy()[origins["train"]], minlength=len(meta["labels"]))
        stats["origins"]["train"]["gold_labels"] = dict(zip(meta["labels"], map(float, gold / gold.sum())))
    picked = rng.choice(origins["generated"], size=min(examples, len(origins["generated"])), replace=False)
    logits = teacher_logits[picked]
    probs = np.exp(logits - logits.max(-1, keepdims=True))  # softmax in numpy: the job that builds the set needs no torch
    probs /= probs.sum(-1, keepdims=True)
    stats["examples"] = [
        {"text_a": frame["text_a"].iloc[i], "text_b": frame["text_b"].iloc[i] if meta["pair"] else None,
         **({"teacher_score": float(teacher_logits[i, 0])} if meta["regression"] else
            {"teacher_label": meta["labels"][int(p.argmax())], "confidence": float(p.max())})}
        for i, p in zip(picked, probs)
    ]
    return stats


def statistics_document(stats: dict) -> Document:
    """A readable page of :func:`transfer_statistics` for the report."""
    train, generated = stats["origins"]["train"], stats["origins"]["generated"]
    rows = [(f"words {key}", f"{train['words'][key]:.1f}", f"{generated['words'][key]:.1f}")
            for key in ("mean", "median", "p10", "p90", "max")]
    distinct = next(k for k in train if k.startswith("distinct_n_on_"))
    rows += [(f"distinct-{n} ({distinct.rsplit('_', 1)[1]} each)", f"{train[distinct][n]:.3f}",
              f"{generated[distinct][n]:.3f}") for n in ("1", "2", "3")]
    rows += [(f"teacher: {label}", f"{train['teacher_labels'][label]:.3f}", f"{generated['teacher_labels'][label]:.3f}")
             for label in train.get("teacher_labels", {})]
    if "teacher_score" in train:
        rows.append(("teacher score mean", f"{train['teacher_score']['mean']:.2f}",
                     f"{generated['teacher_score']['mean']:.2f}"))
    examples = []
    for example in stats["examples"]:
        text = example["text_a"] + (f" ||| {example['text_b']}" if example["text_b"] else "")
        label = example.get("teacher_label", example.get("teacher_score"))
        confidence = f" ({example['confidence']:.2f})" if "confidence" in example else ""
        examples.append([text, " — ", Emphasis(str(label)), confidence])
    counts = stats["hygiene"]["sources"]["generated"]
    hygiene = ", ".join(f"{k.replace('_', ' ')} {counts[k]:,}{'' if k in counts['dropped'] else ' (kept)'}"
                        for k in HYGIENE_STEPS["generated"])  # matched, and dropped or kept by the options
    hygiene = f"{counts['read']:,} sampled; {hygiene}; {counts['kept']:,} kept"
    return Document(f"Augmented transfer set: {stats['task']}", [
        Paragraph(f"Train {stats['sizes']['train']:,} + generated {stats['sizes']['generated']:,} examples."),
        Paragraph(f"Generated sequences: {hygiene}"),
        Table(pd.DataFrame(rows, columns=["", "train", "generated"])),
        Paragraph("Random generated examples (teacher's label):"),
        Bullets(examples),
    ])
