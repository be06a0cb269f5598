"""Student training: a registered student, a registered method and cached teacher signals, trained by the one
training loop of :mod:`kdflow.training.loop` through a schedule of stages.

A schedule is a list of stages, each with its epochs and the loss weights it sets, e.g. Universal-KD §4.2 and
Appendix A: ``[{epochs: 20}, {epochs: 10, weights: {alpha: 1, beta: 0, gamma: 0}}]`` (stage 1 with the
method's own weights, stage 2 cross-entropy only). Every stage gets a fresh optimiser and learning-rate
schedule. The checkpoint with the best dev score over all stages is kept (dev only, never test).

A stage whose training diverges (:mod:`kdflow.training.loop`) ends the schedule: the student is written as it
diverged, its scores NaN and ``diverged`` (stage, epoch and step) in its metrics, so that a grid of students goes
on and model selection passes the run over.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pandas as pd
import torch
from torch import nn
from transformers import AutoTokenizer

from kdflow.core import metrics
from kdflow.core.data import TaskData
from kdflow.core.devices import seed_everything
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.intermediates import write_parquet
from kdflow.core.io import atomic_output, write_json
from kdflow.core.precision import FP32, Precision
from kdflow.core.tensor_files import save_tensors
from kdflow.distillation.methods.registry import Shapes, build_method, method_class
from kdflow.students.embeddings import non_embedding_parameters
from kdflow.students.loading import saved_words
from kdflow.students.registry import StudentContext, build_student
from kdflow.students.tokens import reads_words, student_tokenizer, transfer_words
from kdflow.training.batching import batches, tokenize
from kdflow.training.checkpoint import Checkpoint
from kdflow.training.curves import write_curves
from kdflow.training.loop import EAGER, StepCompiler, predict, subset_indices, train
from kdflow.training.predictions import prediction_table
from kdflow.transfer.frames import ADDED_ORIGINS, transfer_frame
from kdflow.transfer.signals import SignalCache

log = logging.getLogger("kdflow")


def layer_widths(student: nn.Module, sample: dict) -> tuple[int, ...]:
    student.eval()
    with torch.no_grad():
        return tuple(h.shape[-1] for h in student(sample).layers)


def distill(
    task: TaskData,
    transfer_set: Path | None,
    teacher_dir: Path,
    signals_path: Path,
    student_spec: dict,
    method_name: str,
    method_options: dict,
    stages: list[dict],
    hp: Hyperparameters,
    out_dir: Path,
    device: torch.device,
    checkpoint: Checkpoint | None = None,
    precision: Precision = FP32,
    compiler: StepCompiler = EAGER,
) -> dict:
    """Train one student on a transfer set of ``task`` (train, or a built set's file, ``results/transfer/<task>/
    <set>.parquet``) with ``method``, its forward passes in ``precision``; write weights (float32), predictions and
    metrics. Unlabelled and generated examples have no gold label: they add nothing to the hard-label term (see
    :func:`kdflow.training.losses.task_loss`) and learn from the teacher alone. Every split is tokenised as the
    student reads text (:mod:`kdflow.students.tokens`); a word-level student's vocabulary is the words of the
    transfer set it learns from, saved with its weights. ``compiler`` runs the student's forward pass and the
    method's loss (:class:`kdflow.training.loop.StepCompiler`: eager by default)."""
    started = time.perf_counter()
    seed_everything(hp.seed)
    regression, metric_names = task.meta["regression"], task.meta["metrics"]
    tokenizer = AutoTokenizer.from_pretrained(Path(teacher_dir) / "model")
    frames = {name: transfer_frame(task, transfer_set) if name == "train" else task.split(name)
              for name in task.meta["splits"]}
    cache = SignalCache(signals_path, device, frames["train"]["idx"].to_numpy(), method_class(method_name).needs)
    rows = subset_indices(len(frames["train"]), hp.max_train_examples, hp.seed)  # train position -> signal row
    frames["train"] = frames["train"].iloc[rows].reset_index(drop=True)
    rows = torch.as_tensor(rows, device=device)

    words = transfer_words(frames["train"]) if reads_words(student_spec) else None  # its vocabulary: what it learns from
    student = build_student(student_spec, StudentContext(task.num_labels, tokenizer, str(teacher_dir), words))
    reader = student_tokenizer(student, tokenizer)
    encoded = {name: tokenize(f, reader, hp.max_seq_length, name == "train" or task.is_labelled(name))
               for name, f in frames.items()}
    train_split, dev_split = encoded["train"], encoded["dev"]

    widths = layer_widths(student, next(batches(train_split, 2, regression)))
    shapes = Shapes(widths, cache.teacher_layers, cache.teacher_width, task.num_labels, regression)
    missing = sorted(method_class(method_name).needs - cache.available)
    if missing:
        raise ValueError(f"{method_name} needs the teacher's {', '.join(missing)}, which {signals_path} does not hold "
                         "(hidden-space signals are cached only when the config gives the teacher a method that needs them)")
    method = build_method(method_name, shapes, method_options)
    model = nn.ModuleDict({"student": student, "method": method}).to(device)
    log.info("student %s (%.2fM parameters, layers %s) with %s %s", student_spec["type"],
             sum(p.numel() for p in student.parameters()) / 1e6, widths, method_name, method.options)

    # Each term's mean over the training batches since the last evaluation (unweighted, as the method computes it),
    # for the curves: which term a method's loss is made of as it trains (train_ce, train_kd, train_inter). The
    # sums stay on the device until the evaluation reads them.
    term_sums: dict[str, torch.Tensor | int] = {}
    term_segments: list[dict[str, float]] = []

    # the step's pure part, which ``compiler`` may compile; the bookkeeping below stays eager
    terms_of = compiler(lambda model, batch: model["method"](model["student"](batch), cache[rows[batch["index"]]],
                                                             batch["labels"]))

    def loss_fn(model, batch):
        terms = terms_of(model, batch)
        if model.training:
            rows_in_batch = len(batch["index"])
            for name, value in terms.items():
                if name != "loss":
                    term_sums[name] = term_sums.get(name, 0.0) + value.detach().double() * rows_in_batch
            term_sums["rows"] = term_sums.get("rows", 0) + rows_in_batch
        return terms["loss"]

    def student_logits(split):
        model.eval()
        return predict(lambda batch: model["student"](batch).logits, batches(split, hp.eval_batch_size, regression),
                       device, precision)

    def evaluate(model):
        seen = term_sums.pop("rows", 0)
        totals = dict(zip(term_sums, torch.stack(list(term_sums.values()))
                          .tolist())) if term_sums else {}  # one read-back for every term
        term_segments.append({f"train_{name}": total / seen for name, total in totals.items()} if seen else {})
        term_sums.clear()
        return metrics.score_logits(metric_names, student_logits(dev_split), dev_split.labels, regression)

    history, best, diverged = [], None, None
    for number, stage in enumerate(stages, start=1):
        method.set_weights(**stage.get("weights", {}))
        stage_hp = Hyperparameters(**{**vars(hp), "epochs": stage.get("epochs", hp.epochs)})
        log.info("stage %d: %d epochs, weights %s", number, stage_hp.epochs, method.weights)
        result = train(
            model, loss_fn,
            lambda rng: batches(train_split, hp.batch_size, regression, shuffle=True, generator=rng,
                                length_buckets=hp.length_buckets),
            len(train_split), evaluate, metric_names[0], stage_hp, device,
            on_epoch_start=lambda epoch, epochs=stage_hp.epochs: method.start_epoch(epoch, epochs),
            checkpoint=checkpoint, run=f"stage{number}", precision=precision,
        )
        # a resumed stage recorded the terms of its evaluations since the checkpoint only: they are the last ones
        segments = [{}] * (len(result.history) - len(term_segments)) + term_segments[-len(result.history):]
        history += [{"stage": number, **record, **terms} for record, terms in zip(result.history, segments)]
        term_segments.clear()
        if result.diverged:
            diverged = {"stage": number, **result.diverged}
            best = {"stage": number, "epoch": result.best_epoch, "state": result.best_state}
            break
        if best is None or hp.keep == "final" or result.best_score > best["score"]:  # final: the last stage's
            best = {"stage": number, "epoch": result.best_epoch, "score": result.best_score, "state": result.best_state}
    model.load_state_dict(best["state"])

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_output(out_dir / "model.safetensors") as path:
        save_tensors(best["state"], path, saved_words(words))
    scores, tables = {}, []
    for name, split in encoded.items():
        if name == "train":
            continue
        logits = student_logits(split)
        if split.labels is not None:
            scores[name] = (metrics.nan_scores(metric_names) if diverged
                            else metrics.score_logits(metric_names, logits, split.labels, regression))
        tables.append(prediction_table(name, frames[name], logits, split, regression, task.meta["labels"]))
    with atomic_output(out_dir / "predictions.parquet") as path:
        write_parquet(pd.concat(tables, ignore_index=True), path)
    report = {
        "task": task.meta["task"],
        "transfer": {"set": "train" if transfer_set is None else Path(transfer_set).stem,
                     "examples": len(frames["train"]),
                     **{origin: int((frames["train"]["origin"] == origin).sum()) for origin in ADDED_ORIGINS}},
        "student": student_spec,
        "method": method_name,
        "method_options": method.options,
        "stages": stages,
        "best": {"stage": best["stage"], "epoch": best["epoch"]},
        "diverged": diverged,
        "scores": scores,
        "parameters_millions": sum(p.numel() for p in student.parameters()) / 1e6,
        "non_embedding_parameters": non_embedding_parameters(student),  # the thesis's size (Tables 5.2, B.1-B.2)
        "history": history,
        "hyperparameters": vars(hp),
        "precision": precision.name,
        "seconds": time.perf_counter() - started,
    }
    write_json(out_dir / "metrics.json", report, default=str)
    write_curves(out_dir / "curves.parquet", history)
    log.info("student done: %s", json.dumps(scores))
    return report
