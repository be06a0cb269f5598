"""Teacher fine-tuning: any Hugging Face encoder (hub name, local directory, or a configuration for a randomly
initialised model) with a sequence-classification head, trained with cross-entropy (MSE for STS-B).

Defaults follow the papers (see config.yaml): BERT-large as in the thesis Table 4.1 (AdamW 5e-5, 10% linear
warm-up then linear decay, batch 36, 3 epochs, 10 for Sara). The model of the best dev epoch is kept; its dev
logits and test predictions are written for the students and for GLUE submissions. A teacher whose training
diverged (:mod:`kdflow.training.loop`) stops its job with an error naming the step, the loss and what to change
(:func:`check_divergence`): every student would learn from it. With ``keep_diverged: true`` in the teacher's config
it writes the same outputs from the weights it diverged with instead, its scores NaN and ``diverged`` (epoch and
step) in its metrics.

Training (:func:`finetune`, rule finetune_teacher) writes the model alone, its training record in
``model/training.json``; evaluation (:func:`evaluate_teacher`, rule evaluate_teacher) writes what describes it.
Losing a description thus re-evaluates the teacher instead of fine-tuning it again and re-distilling its students.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist

from kdflow.core import metrics, run_files
from kdflow.core.data import TaskData
from kdflow.core.devices import seed_everything
from kdflow.core.errors import UserError
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.intermediates import read_training_record, write_parquet
from kdflow.core.io import atomic_output, write_json
from kdflow.core.precision import FP32, Precision
from kdflow.training.batching import EncodedSplit, batches, tokenize
from kdflow.training.checkpoint import Checkpoint
from kdflow.training.curves import write_curves
from kdflow.training.hf_models import build_classifier, build_tokenizer, load_classifier, model_inputs, save_trained
from kdflow.training.loop import predict, subset_indices, train
from kdflow.training.losses import task_loss
from kdflow.training.predictions import prediction_table

log = logging.getLogger("kdflow")


def build_teacher(spec: dict, num_labels: int):
    """A (model, tokenizer) pair from a teacher spec: ``model`` (hub name or directory) to load pre-trained
    weights, or ``architecture`` (``model_type`` plus config fields) and ``tokenizer`` for a random init."""
    tokenizer = build_tokenizer(spec)
    return build_classifier(spec.get("model"), spec.get("architecture"), tokenizer, num_labels), tokenizer


def logits_of(model):
    def forward(batch):
        return model(**model_inputs(model, batch)).logits

    return forward


def evaluate_split(model, split: EncodedSplit, task: TaskData, hp: Hyperparameters, device,
                   precision: Precision = FP32) -> tuple[np.ndarray, dict]:
    model.eval()
    regression = task.meta["regression"]
    logits = predict(logits_of(model), batches(split, hp.eval_batch_size, regression), device, precision)
    scores = metrics.score_logits(task.meta["metrics"], logits, split.labels, regression) if split.labels is not None else {}
    return logits, scores


def finetune(task: TaskData, spec: dict, hp: Hyperparameters, out_dir: Path, device: torch.device,
             checkpoint: Checkpoint | None = None, data_parallel=None, precision: Precision = FP32) -> dict | None:
    """Fine-tune a teacher on ``task`` in ``precision`` and write ``out_dir/model/`` (float32 weights whatever the
    precision, the tokenizer, and the training record ``training.json``), resuming from ``checkpoint`` if it holds
    this job's interrupted run. Every rank of a data-parallel job (:func:`kdflow.training.parallel.run_processes`)
    calls it with the job's ``data_parallel`` for the training loop; rank 0 writes the model and returns the
    training record, the other ranks return None once trained."""
    started = time.perf_counter()
    regression = task.meta["regression"]
    seed_everything(hp.seed)
    model, tokenizer = build_teacher(spec, task.num_labels)
    log.info("teacher %s: %.1fM parameters", spec.get("model") or spec["architecture"]["model_type"], _millions(model))

    train_frame = task.split("train")
    train_frame = train_frame.iloc[subset_indices(len(train_frame), hp.max_train_examples, hp.seed)]
    train_split = tokenize(train_frame.reset_index(drop=True), tokenizer, hp.max_seq_length, labelled=True)
    dev_split = tokenize(task.split("dev"), tokenizer, hp.max_seq_length, task.is_labelled("dev"))

    def loss_fn(model, batch):
        return task_loss(logits_of(model)(batch), batch["labels"], regression)

    result = train(
        model,
        loss_fn,
        lambda rng: batches(train_split, hp.batch_size, regression, shuffle=True, generator=rng,
                            length_buckets=hp.length_buckets),
        len(train_split),
        lambda model: evaluate_split(model, dev_split, task, hp, device, precision)[1],
        task.meta["metrics"][0],
        hp,
        device,
        checkpoint=checkpoint,
        data_parallel=data_parallel,
        precision=precision,
    )
    if dist.is_initialized() and dist.get_rank() != 0:
        return None
    model.load_state_dict(result.best_state)
    record = {
        "model": spec.get("model") or "random-init:" + spec["architecture"]["model_type"],
        "best_epoch": result.best_epoch,
        "diverged": result.diverged,
        "history": result.history,
        "hyperparameters": vars(hp),
        "precision": precision.name,
        "seconds": time.perf_counter() - started,
    }
    save_trained(model, tokenizer, record, Path(out_dir) / "model")
    return record


def check_divergence(record: dict, teacher: str, task: str, keep: bool) -> None:
    """Stop a teacher whose fine-tuning diverged (``record``: its training record), unless ``keep``: its students'
    signals would be NaN or meaningless. The message names the step, what turned non-finite and what to change."""
    diverged = record["diverged"]
    if diverged is None or keep:
        return
    hp = record["hyperparameters"]
    raise UserError(
        f"teacher {teacher} diverged on {task} at epoch {diverged['epoch']}, optimiser step {diverged['step']} "
        f"({diverged.get('what', 'a non-finite loss or dev score')}) with learning rate {hp['learning_rate']}: lower "
        f"teachers.{teacher}.task_hyperparameters.{task}.learning_rate (or raise warmup_ratio, lower max_grad_norm), "
        f"or set teachers.{teacher}.keep_diverged: true to keep the run and its NaN scores")


def evaluate_teacher(task: TaskData, model_dir: Path, out_dir: Path, device, precision: Precision = FP32) -> dict:
    """Score a fine-tuned teacher on every split but train (in ``precision``) and write ``predictions.parquet``
    (dev logits, test predictions), ``metrics.json`` (the scores with the training record) and ``curves.parquet``
    (from the record's history) in ``out_dir``; returns the metrics."""
    started = time.perf_counter()
    model_dir = Path(model_dir)
    record = read_training_record(model_dir, "teacher")
    hp = Hyperparameters.from_dict(record["hyperparameters"])
    tokenizer = build_tokenizer({"model": str(model_dir)})
    model = load_classifier(model_dir).to(device)
    regression = task.meta["regression"]
    scores, tables = {}, []
    for name in task.meta["splits"]:
        if name == "train":
            continue
        frame = task.split(name)
        split = tokenize(frame, tokenizer, hp.max_seq_length, task.is_labelled(name))
        logits, scores[name] = evaluate_split(model, split, task, hp, device, precision)
        if record["diverged"]:
            scores[name] = metrics.nan_scores(scores[name])
        tables.append(prediction_table(name, frame, logits, split, regression, task.meta["labels"]))
    out_dir = Path(out_dir)
    with atomic_output(out_dir / run_files.PREDICTIONS) as path:
        write_parquet(pd.concat(tables, ignore_index=True), path)
    report = {
        "task": task.meta["task"],
        "model": record["model"],
        "parameters_millions": _millions(model),
        "layers": model.config.num_hidden_layers,
        "best_epoch": record["best_epoch"],
        "diverged": record["diverged"],
        "scores": {name: s for name, s in scores.items() if s},
        "history": record["history"],
        "hyperparameters": record["hyperparameters"],
        "precision": record["precision"],
        "evaluation_precision": precision.name,
        "seconds": record["seconds"],
        "evaluation_seconds": time.perf_counter() - started,
    }
    write_json(out_dir / run_files.METRICS, report)
    write_curves(out_dir / run_files.CURVES, record["history"])
    log.info("teacher scores: %s", json.dumps(report["scores"]))
    return report


def _millions(model) -> float:
    return sum(p.numel() for p in model.parameters()) / 1e6
