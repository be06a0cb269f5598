"""Student training: a registered student, a registered method and cached teacher signals, trained by the one
training loop of :mod:`kdflow.training.loop` through a schedule of stages.

A schedule is a list of stages, each with its epochs and the loss weights it sets, e.g. Universal-KD §4.2 and
Appendix A: ``[{epochs: 20}, {epochs: 10, weights: {alpha: 1, beta: 0, gamma: 0}}]`` (stage 1 with the
method's own weights, stage 2 cross-entropy only). Every stage gets a fresh optimiser and learning-rate
schedule. The checkpoint with the best dev score over all stages is kept (dev only, never test).

A stage whose training diverges (:mod:`kdflow.training.loop`) ends the schedule: the student is written as it
diverged, its scores NaN and ``diverged`` (stage, epoch and step) in its metrics, so that a grid of students goes
on and model selection passes the run over.

:func:`distill_pack` trains K students of one type and method that differ in seed, learning rate and weight decay
as one pack (:mod:`kdflow.training.packs`) and writes each as :func:`distill` writes it (tests/test_distill.py: the
same histories, kept evaluations and predictions within a relative 1e-4, not bitwise: the batched operators sum in
another order).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from torch import nn
from transformers import AutoTokenizer

from kdflow.core import metrics, run_files
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
from kdflow.training.loop import EAGER, StepCompiler, TrainResult, predict, subset_indices, train
from kdflow.training.packs import Pack, stacked_batches
from kdflow.training.predictions import prediction_table
from kdflow.transfer.frames import ADDED_ORIGINS, transfer_frame
from kdflow.transfer.signals import SignalCache

log = logging.getLogger("kdflow")


def layer_widths(student: nn.Module, sample: dict) -> tuple[int, ...]:
    student.eval()
    with torch.no_grad():
        return tuple(h.shape[-1] for h in student(sample).layers)


@dataclass
class StudentRun:
    """One student run's set-up: its transfer frames (its own training subset), splits tokenised as it reads
    text, the teacher's signals and the signal row of each training position, and the student with its method."""

    student_spec: dict
    frames: dict[str, pd.DataFrame]
    encoded: dict
    cache: SignalCache
    rows: torch.Tensor
    words: list[str] | None
    student: nn.Module
    method: nn.Module
    model: nn.ModuleDict


def set_up_run(task: TaskData, transfer_set: Path | None, teacher_dir: Path, signals_path: Path, student_spec: dict,
               method_name: str, method_options: dict, hp: Hyperparameters, device: torch.device) -> StudentRun:
    """A student of ``student_spec`` initialised from ``hp.seed``, with ``method`` and what it learns from."""
    seed_everything(hp.seed)
    regression = task.meta["regression"]
    tokenizer = AutoTokenizer.from_pretrained(Path(teacher_dir) / "model")
    frames = {name: transfer_frame(task, transfer_set) if name == "train" else task.split(name)
              for name in task.meta["splits"]}
    cache = SignalCache(signals_path, device, frames["train"]["idx"].to_numpy(), method_class(method_name).needs)
    rows = subset_indices(len(frames["train"]), hp.max_train_examples, hp.seed)  # train position -> signal row
    frames["train"] = frames["train"].iloc[rows].reset_index(drop=True)

    words = transfer_words(frames["train"]) if reads_words(student_spec) else None  # its vocabulary: what it learns from
    student = build_student(student_spec, StudentContext(task.num_labels, tokenizer, str(teacher_dir), words))
    reader = student_tokenizer(student, tokenizer)
    encoded = {name: tokenize(f, reader, hp.max_seq_length, name == "train" or task.is_labelled(name))
               for name, f in frames.items()}

    widths = layer_widths(student, next(batches(encoded["train"], 2, regression)))
    shapes = Shapes(widths, cache.teacher_layers, cache.teacher_width, task.num_labels, regression,
                    cache.example_shapes)
    missing = sorted(method_class(method_name).needs - cache.available)
    if missing:
        raise ValueError(f"{method_name} needs the teacher's {', '.join(missing)}, which {signals_path} does not hold "
                         "(a signal registered on demand is stored only when the config gives the teacher and task a "
                         "method that needs it: kdflow.transfer.signals)")
    method = build_method(method_name, shapes, method_options)
    model = nn.ModuleDict({"student": student, "method": method}).to(device)
    log.info("student %s (%.2fM parameters, layers %s) with %s %s, seed %d", student_spec["type"],
             sum(p.numel() for p in student.parameters()) / 1e6, widths, method_name, method.options, hp.seed)
    return StudentRun(student_spec, frames, encoded, cache, torch.as_tensor(rows, device=device), words, student,
                      method, model)


class TermSums:
    """Each loss term's mean over the training batches since the last evaluation (unweighted, as the method computes
    it), for the curves: which term a method's loss is made of as it trains (train_ce, train_kd, train_inter). The
    sums stay on the device (a pack's: one per member) until an evaluation reads them, all in one transfer."""

    def __init__(self):
        self.sums: dict[str, torch.Tensor | float] = {}
        self.rows = 0
        self.segments: list = []  # one per evaluation: {train_<term>: mean} (a pack's: one such dict per member)

    def add(self, terms: dict[str, torch.Tensor], rows_in_batch: int) -> None:
        for name, value in terms.items():
            if name != "loss":
                self.sums[name] = self.sums.get(name, 0.0) + value.detach().double() * rows_in_batch
        self.rows += rows_in_batch

    def close_segment(self, members: int | None = None) -> None:
        """End the segment at an evaluation (``members``: a pack's size, None for one student)."""
        totals = torch.stack(list(self.sums.values())).tolist() if self.sums else []  # terms [x members]
        names, seen = list(self.sums), self.rows
        if members is None:
            self.segments.append({f"train_{n}": t / seen for n, t in zip(names, totals)} if seen else {})
        else:
            self.segments.append([{f"train_{n}": t[k] / seen for n, t in zip(names, totals)} if seen else {}
                                  for k in range(members)])
        self.sums.clear()
        self.rows = 0

    def for_history(self, history_length: int, member: int | None = None) -> list[dict]:
        """The segments of a stage's ``history_length`` evaluations (``member``'s, of a pack): a resumed stage
        recorded those since its checkpoint only, the last ones, and the earlier are left empty."""
        segments = [s if member is None else s[member] for s in self.segments]
        return [{}] * (history_length - len(segments)) + segments[-history_length:] if history_length else []


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
    regression, metric_names = task.meta["regression"], task.meta["metrics"]
    run = set_up_run(task, transfer_set, teacher_dir, signals_path, student_spec, method_name, method_options, hp,
                     device)
    model, cache, rows = run.model, run.cache, run.rows
    terms = TermSums()

    # the step's pure part, which ``compiler`` may compile; the bookkeeping below stays eager
    terms_of = compiler(lambda model, batch: model["method"](model["student"](batch), cache[rows[batch["index"]]],
                                                             batch["labels"]))

    def loss_fn(model, batch):
        step_terms = terms_of(model, batch)
        if model.training:
            terms.add(step_terms, len(batch["index"]))
        return step_terms["loss"]

    def evaluate(model):
        terms.close_segment()
        return metrics.score_logits(metric_names, student_logits(model, run.encoded["dev"], hp, regression, device,
                                                                 precision), run.encoded["dev"].labels, regression)

    history, best, diverged = [], None, None
    for number, stage in enumerate(stages, start=1):
        run.method.set_weights(**stage.get("weights", {}))
        stage_hp = Hyperparameters(**{**vars(hp), "epochs": stage.get("epochs", hp.epochs)})
        log.info("stage %d: %d epochs, weights %s", number, stage_hp.epochs, run.method.weights)
        result = train(
            model, loss_fn,
            lambda rng: batches(run.encoded["train"], hp.batch_size, regression, shuffle=True, generator=rng,
                                length_buckets=hp.length_buckets),
            len(run.encoded["train"]), evaluate, metric_names[0], stage_hp, device,
            on_epoch_start=lambda epoch, epochs=stage_hp.epochs: run.method.start_epoch(epoch, epochs),
            checkpoint=checkpoint, run=f"stage{number}", precision=precision,
        )
        segments = terms.for_history(len(result.history))
        terms.segments.clear()
        best, diverged, stop = _after_stage(number, result, segments, history, best, hp)
        if stop:
            break
    return write_student(run, task, transfer_set, best, history, diverged, method_name, stages, hp, precision,
                         out_dir, device, time.perf_counter() - started)


def distill_pack(
    task: TaskData,
    transfer_set: Path | None,
    teacher_dir: Path,
    signals_path: Path,
    student_spec: dict,
    method_name: str,
    method_options: list[dict],
    stages: list[dict],
    hps: list[Hyperparameters],
    out_dirs: list[Path],
    device: torch.device,
    checkpoint: Checkpoint | None = None,
    precision: Precision = FP32,
) -> list[dict]:
    """:func:`distill` for K students of one student type and method that differ in their seed, learning rate and
    weight decay (``hps``) and their method's loss weights (``method_options``, one per student; the same weights
    zero) alone, trained as one pack (:mod:`kdflow.training.packs`) and each written to its own of
    ``out_dirs`` as :func:`distill` writes a student trained alone. Each member draws its own initialisation, training
    subset (``max_train_examples``) and data order from its seed; the kept states' predictions are computed by each
    student alone. Members must share one shape: a word-level student's vocabulary is its subset's, and members whose
    vocabularies differ in size are refused (:class:`~kdflow.training.packs.Pack`)."""
    started = time.perf_counter()
    regression, metric_names = task.meta["regression"], task.meta["metrics"]
    runs = [set_up_run(task, transfer_set, teacher_dir, signals_path, student_spec, method_name, options, h, device)
            for options, h in zip(method_options, hps)]
    pack = Pack([run.model for run in runs]).to(device)
    cache, member_rows = runs[0].cache, torch.stack([run.rows for run in runs])  # one teacher's signals, K subsets
    terms = TermSums()

    def member_terms(model, batch, rows):
        return model["method"](model["student"](batch), cache[rows[batch["index"]]], batch["labels"])

    def loss_fn(pack, batch):
        step_terms = pack.map(member_terms, batch, member_rows)
        if pack.training:
            terms.add(step_terms, batch["index"].shape[1])
        return step_terms["loss"]

    def evaluate(pack):
        terms.close_segment(len(runs))
        pack.eval()
        dev = [run.encoded["dev"] for run in runs]  # each as its member reads text (a word-level one: its words)
        logits = predict(lambda batch: pack.map(lambda model, b: model["student"](b).logits, batch).transpose(0, 1),
                         (stacked_batches(step) for step in zip(*(batches(split, hps[0].eval_batch_size, regression)
                                                                  for split in dev))),
                         device, precision)  # examples x K x ...
        return [metrics.score_logits(metric_names, logits[:, k], split.labels, regression)
                for k, split in enumerate(dev)]

    histories, bests, divergences = [[] for _ in runs], [None] * len(runs), [None] * len(runs)
    training = list(range(len(runs)))  # the members whose schedule goes on (one stopped trains on, unread)
    for number, stage in enumerate(stages, start=1):
        for run in runs:  # each member's own loss weights, or the stage's
            run.method.set_weights(**stage.get("weights", {}))
        if len({tuple(bool(w) for w in run.method.weights.values()) for run in runs}) > 1:
            raise ValueError(f"a pack's members must weigh the same terms (the same loss weights zero) in stage "
                             f"{number}: {[run.method.weights for run in runs]}")
        pack.restack_buffers([run.model for run in runs])  # the weights each member's loss multiplies by
        method = pack.template["method"]  # the module the members' weights run through: which terms it computes
        method.set_weights(**runs[0].method.weights)
        stage_hps = [Hyperparameters(**{**vars(h), "epochs": stage.get("epochs", h.epochs)}) for h in hps]
        log.info("stage %d of a pack of %d: %d epochs, weights %s", number, len(runs), stage_hps[0].epochs,
                 method.weights)
        results = train(
            pack, loss_fn,
            [lambda rng, run=run: batches(run.encoded["train"], hps[0].batch_size, regression, shuffle=True,
                                          generator=rng, length_buckets=hps[0].length_buckets) for run in runs],
            len(runs[0].encoded["train"]), evaluate, metric_names[0], stage_hps, device,
            on_epoch_start=lambda epoch, epochs=stage_hps[0].epochs: method.start_epoch(epoch, epochs),
            checkpoint=checkpoint, run=f"stage{number}", precision=precision,
        )
        for k in list(training):
            segments = terms.for_history(len(results[k].history), member=k)
            bests[k], divergences[k], stop = _after_stage(number, results[k], segments, histories[k], bests[k],
                                                          hps[k])
            if stop:
                training.remove(k)
        terms.segments.clear()
        if not training:
            break
    seconds = time.perf_counter() - started
    return [write_student(run, task, transfer_set, best, history, diverged, method_name, stages, h, precision,
                          out_dir, device, seconds)
            for run, best, history, diverged, h, out_dir in zip(runs, bests, histories, divergences, hps, out_dirs)]


def student_logits(model: nn.ModuleDict, split, hp: Hyperparameters, regression: bool, device: torch.device,
                   precision: Precision):
    model.eval()
    return predict(lambda batch: model["student"](batch).logits, batches(split, hp.eval_batch_size, regression),
                   device, precision)


def _after_stage(number: int, result: TrainResult, segments: list[dict], history: list[dict], best: dict | None,
                 hp: Hyperparameters) -> tuple[dict, dict | None, bool]:
    """Add a stage's evaluations (with their loss terms) to ``history``; the best model over the stages so far, the
    divergence if the stage diverged, and whether the schedule stops (it did)."""
    history += [{"stage": number, **record, **terms} for record, terms in zip(result.history, segments)]
    if result.diverged:
        return {"stage": number, "epoch": result.best_epoch, "state": result.best_state}, \
            {"stage": number, **result.diverged}, True
    if best is None or hp.keep == "final" or result.best_score > best["score"]:  # final: the last stage's
        best = {"stage": number, "epoch": result.best_epoch, "score": result.best_score, "state": result.best_state}
    return best, None, False


def write_student(run: StudentRun, task: TaskData, transfer_set: Path | None, best: dict, history: list[dict],
                  diverged: dict | None, method_name: str, stages: list[dict], hp: Hyperparameters,
                  precision: Precision, out_dir: Path, device: torch.device, seconds: float) -> dict:
    """The kept student's weights, predictions on every split but train, and metrics, into ``out_dir``."""
    regression, metric_names = task.meta["regression"], task.meta["metrics"]
    run.model.load_state_dict(best["state"])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_output(out_dir / run_files.STUDENT_WEIGHTS) as path:
        save_tensors(best["state"], path, saved_words(run.words))
    scores, tables = {}, []
    for name, split in run.encoded.items():
        if name == "train":
            continue
        logits = student_logits(run.model, split, hp, regression, device, precision)
        if split.labels is not None:
            scores[name] = (metrics.nan_scores(metric_names) if diverged
                            else metrics.score_logits(metric_names, logits, split.labels, regression))
        tables.append(prediction_table(name, run.frames[name], logits, split, regression, task.meta["labels"]))
    with atomic_output(out_dir / run_files.PREDICTIONS) as path:
        write_parquet(pd.concat(tables, ignore_index=True), path)
    train_frame = run.frames["train"]
    report = {
        "task": task.meta["task"],
        "transfer": {"set": "train" if transfer_set is None else Path(transfer_set).stem,
                     "examples": len(train_frame),
                     **{origin: int((train_frame["origin"] == origin).sum()) for origin in ADDED_ORIGINS}},
        "student": run.student_spec,
        "method": method_name,
        "method_options": run.method.options,
        "stages": stages,
        "best": {"stage": best["stage"], "epoch": best["epoch"]},
        "diverged": diverged,
        "scores": scores,
        "parameters_millions": sum(p.numel() for p in run.student.parameters()) / 1e6,
        "non_embedding_parameters": non_embedding_parameters(run.student),  # the thesis's size (Tables 5.2, B.1-B.2)
        "history": history,
        "hyperparameters": vars(hp),
        "precision": precision.name,
        "seconds": seconds,
    }
    write_json(out_dir / run_files.METRICS, report, default=str)
    write_curves(out_dir / run_files.CURVES, history)
    log.info("student done: %s", json.dumps(scores))
    return report
