"""The one training loop of kdflow: an optimiser (AdamW by default), linear warm-up then linear or no decay,
gradient accumulation, dev evaluation at epoch ends (or every N optimiser steps) and the best-dev (or the final)
model kept. Teachers, pseudo-heads and students differ only in the ``loss`` they pass in.
Given a :class:`~kdflow.training.checkpoint.Checkpoint`, a run saves its state periodically and resumes from it. Run by
every rank of a data-parallel job with that job's backward step (``data_parallel``), it trains one model on the ranks'
shares of each batch; the loop itself only agrees with rank 0 through ``torch.distributed``, so that it imports no
multi-GPU code.

Forward passes (the loss's and the dev evaluation's) run in the job's :class:`~kdflow.core.precision.Precision`
(autocast; the weights and the optimiser stay float32); with fp16 a gradient scaler scales each loss before its
backward pass and skips the steps whose gradients overflowed.

A run whose training loss or dev score turns non-finite has diverged: it stops (every later step would start from
non-finite values) and returns its divergence as its result instead of raising, so that the rest of a
hyper-parameter grid goes on and the divergence is reported where the scores are (see :class:`TrainResult`).

A step never waits for the device: its loss and gradient norm stay device tensors until the loop reads them back,
all at once, at its next logging point (every ``log_every`` steps), evaluation or checkpoint. A non-finite loss is
found there, and the divergence names its own step; the steps in between trained on non-finite weights, which a
diverged run keeps anyway. The optimiser is torch's fused one where it has one (AdamW and Adam): a few kernels a
step instead of several per parameter (:mod:`kdflow.training.step_counts` counts both).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from kdflow.core.errors import Terminated
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.precision import FP32, Precision
from kdflow.training.batching import batch_rows, to_device
from kdflow.training.checkpoint import Checkpoint, random_states, restore_random_states
from kdflow.training.curves import LiveCurves

log = logging.getLogger("kdflow")

Batch = dict[str, torch.Tensor]
LossFn = Callable[[nn.Module, Batch], torch.Tensor]
# backpropagates weight x a batch's loss into .grad (scaled by the run's gradient scaler) and returns weight x loss
# (detached, on the device: reading it would make the step wait); the bool is False for every micro-batch of a step but its last (a data-parallel job all-reduces the gradients once
# per step)
Backward = Callable[[Batch, float, bool], torch.Tensor]
# makes a run's Backward from its model, its loss (already in the run's precision), device and gradient scaler
MakeBackward = Callable[[nn.Module, LossFn, torch.device, torch.amp.GradScaler], Backward]


def subset_indices(n: int, limit: int | None, seed: int) -> np.ndarray:
    """Indices of a seeded random subset of ``limit`` of ``n`` examples, in their original order (all if None)."""
    if limit is None or limit >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))


@dataclass
class TrainResult:
    """What a run leaves. ``best_*`` describe the kept model: the best dev evaluation's, or with ``keep: final``
    the final model's. A diverged run's ``diverged`` holds the epoch and the (1-based) optimiser step whose
    loss was non-finite (for a non-finite dev score: the evaluation's step) and ``what`` turned non-finite (e.g.
    "training loss nan"); its best state is then the weights
    it diverged with and its best score NaN: a run cut short is not a result of its hyper-parameters, so no
    earlier evaluation stands in for it."""

    history: list[dict] = field(default_factory=list)  # one record per evaluation (see train)
    best_epoch: int = 0
    best_step: int = 0
    best_score: float = float("-inf")
    best_state: dict[str, torch.Tensor] | None = None
    diverged: dict[str, int | str] | None = None


OPTIMIZERS = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "adadelta": torch.optim.Adadelta}
FUSED = {"adamw", "adam"}  # torch's fused kernels, on CPU and CUDA; Adadelta has none and runs its foreach form


def build_optimizer(parameters: Iterable[tuple[str, nn.Parameter]], hp: Hyperparameters) -> torch.optim.Optimizer:
    """``hp.optimizer`` over the trainable parameters, with ``hp.betas``/``eps``/``rho`` where given (else torch's
    defaults). Weight decay spares biases and LayerNorm weights (the BERT recipe) unless ``hp.weight_decay_all``
    (the thesis's LSTM_S decays every parameter); it is decoupled in AdamW, an L2 term in Adam and Adadelta."""
    decay, no_decay = [], []
    for _, param in parameters:
        if param.requires_grad:
            (decay if hp.weight_decay_all or param.ndim >= 2 else no_decay).append(param)
    groups = [{"params": decay, "weight_decay": hp.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    options = {name: getattr(hp, name) for name in ("eps", "rho") if getattr(hp, name) is not None}
    if hp.betas is not None:
        options["betas"] = tuple(hp.betas)
    if hp.optimizer in FUSED:
        options["fused"] = True
    return OPTIMIZERS[hp.optimizer](groups, lr=hp.learning_rate, **options)


def lr_schedule(optimizer: torch.optim.Optimizer, total_steps: int, warmup_ratio: float, decay: str = "linear"):
    """Learning rate rises linearly over the first ``warmup_ratio`` of the steps (rounded down), then decays
    linearly to 0 at the last step, or with ``decay="none"`` stays constant (the thesis's "no decay", Table 5.1)."""
    warmup = int(total_steps * warmup_ratio)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if decay == "none":
            return 1.0
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def train(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, Batch], torch.Tensor],
    train_batches: Callable[[np.random.Generator], Iterable[Batch]],
    n_train: int,
    evaluate: Callable[[nn.Module], dict[str, float]],
    select_metric: str,
    hp: Hyperparameters,
    device: torch.device,
    on_epoch_start: Callable[[int], None] | None = None,
    checkpoint: Checkpoint | None = None,
    run: str = "train",
    data_parallel: MakeBackward | None = None,
    precision: Precision = FP32,
) -> TrainResult:
    """Train ``model`` with ``loss_fn`` on ``train_batches(rng)`` (one shuffled epoch of ``n_train`` examples,
    batches of ``hp.batch_size``), one optimiser step per batch.

    With ``hp.gradient_accumulation_steps`` = k, a batch is backpropagated in k contiguous micro-batches (its
    rows split as ``tensor_split`` splits them), each loss weighted by its share of the rows: the step's gradient
    is the whole batch's (up to float order) in a k-th of the activation memory. ``batch_size`` is thus the
    effective batch, and a grid's batch sizes mean the same with or without accumulation (the thesis's CoLA
    BERT_S: 128 as 4 x 32). The schedule, ``evaluate_every_steps``, checkpoints and ``log_every`` count
    optimiser steps. For a loss that is not a mean over rows, weighting by rows approximates the whole batch's
    (as in data-parallel training, :mod:`kdflow.training.parallel`).

    The model is evaluated on dev after every epoch and, with ``hp.evaluate_every_steps`` = N, after every N-th
    optimiser step (counted across epochs; the thesis evaluates its students every 100 mini-batches, §4.3);
    ``history`` has one record per evaluation: epoch, step, ``lr`` (the learning rate of that step), over the
    optimiser steps since the previous evaluation the mean and max of the gradient's total 2-norm before clipping
    (``grad_norm_mean``, ``grad_norm_max``: a spike shows in the max; over the steps taken), the steps the fp16
    gradient scaler skipped (``skipped_steps``, their gradients non-finite; always 0 in bf16 and fp32) and the mean
    training loss, the seconds they took, then the dev metrics (``dev_<name>``); with TensorBoard on, each record
    also goes to the run's event files as it is made (:mod:`kdflow.training.curves`). The model kept is the
    evaluation's with the best ``select_metric`` (a dev-set metric: selection never looks at test data; the earlier
    on a tie), or with ``hp.keep == "final"`` the final model (the thesis's teachers, which select no checkpoint).
    Parameters with ``requires_grad=False`` (a frozen teacher) are left alone. ``on_epoch_start`` is called with the
    1-based epoch before it starts (epoch-dependent losses such as Annealing-KD's).

    ``precision``: the loss (forward) and ``evaluate`` run under its autocast, backward passes outside it. With fp16
    the gradients are unscaled before their norm is measured and clipped; a step whose gradients are not finite is
    skipped by the scaler (the weights and the optimiser's moments unchanged, the scale halved) but still counts
    as a step of the schedule, as an overflow is a property of the scale, not of the data. A skipped step's loss is
    finite (an infinite loss is a divergence in any precision).

    With a ``checkpoint``, the run's state is saved under the name ``run`` whenever the checkpoint is due (at an
    optimiser step, after its evaluation if one is due) and after every epoch, and a run found there continues
    from its position: the epoch's batches are rebuilt from the shuffler's state at the epoch's start and those
    already trained on are skipped. A finished run restores its final weights and returns its result without
    training; a diverged run is finished too, so that a rerun restores its divergence rather than resuming from
    the non-finite state.

    In a data-parallel job every rank calls ``train`` alike, with ``data_parallel`` making the rank's backward
    step: ``hp.batch_size`` is the global batch, every rank builds the same batches, trains on its share of each
    (micro-)batch and gets the gradient of the whole batch; rank 0's dev scores and checkpoint timing are every
    rank's, and rank 0 alone writes the checkpoint.
    """
    model.to(device)
    steps_per_epoch = -(-n_train // hp.batch_size)
    optimizer = build_optimizer(model.named_parameters(), hp)
    scheduler = lr_schedule(optimizer, steps_per_epoch * hp.epochs, hp.warmup_ratio, hp.lr_decay)
    shuffler = np.random.default_rng(hp.seed)
    result = TrainResult()
    step, first_epoch, batches_done, elapsed = 0, 1, 0, 0.0
    running = []  # (loss, learning rate, gradient norm) of each optimiser step since the last evaluation, read back
    pending = []  # (step, learning rate, loss, gradient norm) of the steps since the last read-back: device tensors
    parameters = list(model.parameters())
    scaler = precision.grad_scaler()
    backward = (data_parallel or _backward_in_one_process)(model, _in_precision(loss_fn, precision), device, scaler)
    rank = dist.get_rank() if dist.is_initialized() else 0
    saved = checkpoint.load(run) if checkpoint is not None else None
    if saved is not None:
        model.load_state_dict(saved["model"])
        result = TrainResult(**saved["result"])
        if saved["finished"]:
            log.info("run %s finished before: weights and results restored from the checkpoint", run)
            return result
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        if saved["precision"] != precision.name:  # `auto` on another machine, e.g. a requeued job: weights are float32
            log.warning("run %s was checkpointed in %s and goes on in %s", run, saved["precision"], precision.name)
        if saved["scaler"] and scaler.is_enabled():  # the fp16 scale reached; another precision's run starts its own
            scaler.load_state_dict(saved["scaler"])
        shuffler.bit_generator.state = saved["epoch_shuffler"]
        if rank < len(saved["random"]):  # the saving run's ranks; a rank beyond keeps its new seed
            restore_random_states(saved["random"][rank])
        step, first_epoch, batches_done = saved["step"], saved["epoch"], saved["batches_done"]
        running, elapsed = saved["running"], saved["seconds"]
        log.info("resuming run %s from its checkpoint: epoch %d, batch %d (step %d)", run, first_epoch,
                 batches_done, step)
    live = LiveCurves(run, resumed_at_step=step, writes=rank == 0)

    def read_back() -> tuple[int, float] | None:
        """Move the pending steps' losses and norms to ``running`` in one transfer; the first step whose loss is
        not finite, and that loss, if one is."""
        if not pending:
            return None
        losses = torch.stack([loss for _, _, loss, _ in pending]).tolist()
        norms = torch.stack([norm for _, _, _, norm in pending]).tolist()
        first = next(((at, loss) for (at, _, _, _), loss in zip(pending, losses) if not math.isfinite(loss)), None)
        running.extend((loss, rate, norm) for (_, rate, _, _), loss, norm in zip(pending, losses, norms))
        pending.clear()
        return first

    def save(epoch: int, batches: int, epoch_shuffler: dict, seconds: float, finished: bool = False) -> None:
        generators = None if finished else _every_ranks(random_states())
        if rank != 0:
            return
        state = {"finished": finished, "model": model.state_dict(), "result": vars(result)}
        if not finished:
            state.update(optimizer=optimizer.state_dict(), scheduler=scheduler.state_dict(),
                         precision=precision.name, scaler=scaler.state_dict(), epoch_shuffler=epoch_shuffler,
                         random=generators, step=step, epoch=epoch, batches_done=batches, running=running,
                         seconds=seconds)
        checkpoint.save(run, state)

    def keep(epoch: int, at_step: int, score: float) -> None:
        result.best_epoch, result.best_step, result.best_score = epoch, at_step, score
        result.best_state = copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()})

    def diverge(epoch: int, at_step: int, what: str) -> TrainResult:
        log.warning("run %s diverged at epoch %d, step %d (%s): stopped", run, epoch, at_step, what)
        result.diverged = {"epoch": epoch, "step": at_step, "what": what}
        keep(epoch, at_step, float("nan"))
        live.close()
        if checkpoint is not None:
            save(epoch, 0, {}, 0.0, finished=True)
        return result

    def evaluation(epoch: int) -> float:
        """Evaluate on dev, record it, keep the model if it is the best so far; return the selection score."""
        nonlocal elapsed, started, seen
        read_back()  # the caller has looked for a divergence already
        with precision.autocast():
            scores = _rank_0s(evaluate(model))  # ranks select alike even if their floats differ
        losses, rates, norms = zip(*running)
        # fp16: a step whose gradient norm is not finite was skipped, and the norms are those of the steps taken
        skipped = sum(not math.isfinite(norm) for norm in norms) if scaler.is_enabled() else 0
        taken = ([norm for norm in norms if math.isfinite(norm)] or [math.nan]) if skipped else norms
        record = {"epoch": epoch, "step": step, "lr": rates[-1], "grad_norm_mean": float(np.mean(taken)),
                  "grad_norm_max": max(taken), "skipped_steps": skipped, "train_loss": float(np.mean(losses)),
                  "seconds": elapsed + time.perf_counter() - started}
        record.update({f"dev_{name}": value for name, value in scores.items()})
        result.history.append(record)
        live.add(record)
        log.info("evaluation at epoch %d, step %d: train loss %.4f, dev %s", epoch, step, record["train_loss"],
                 _fmt(scores))
        score = scores[select_metric]
        if hp.keep == "best" and score > result.best_score:
            keep(epoch, step, score)
        running.clear()
        elapsed, started, seen = 0.0, time.perf_counter(), 0
        return score

    # SIGTERM (a SLURM time limit, preemption or scancel) saves a checkpoint after the step in progress and stops
    in_main_thread = threading.current_thread() is threading.main_thread()  # where signal handlers can be set
    with checkpoint.stop_on_sigterm() if checkpoint is not None and in_main_thread else contextlib.nullcontext():
        for epoch in range(first_epoch, hp.epochs + 1):
            if on_epoch_start is not None:
                on_epoch_start(epoch)
            model.train()
            epoch_shuffler = shuffler.bit_generator.state  # the epoch's order is rebuilt from it on resume
            started, seen = time.perf_counter(), 0
            for position, batch in enumerate(train_batches(shuffler)):
                if position < batches_done:
                    continue  # trained on before the checkpoint
                optimizer.zero_grad(set_to_none=True)
                rows = batch_rows(batch)
                parts = _micro_batches(batch, hp.gradient_accumulation_steps)
                loss = backward(parts[0], batch_rows(parts[0]) / rows, len(parts) == 1)
                for i, part in enumerate(parts[1:], start=2):
                    loss = loss + backward(part, batch_rows(part) / rows, i == len(parts))
                scaler.unscale_(optimizer)  # the true gradient, to measure and clip
                pending.append((step + 1, optimizer.param_groups[0]["lr"], loss,
                                _gradient_norm(parameters, hp.max_grad_norm)))
                scaler.step(optimizer)  # fp16: skipped if the gradient is not finite (the scaler reads it back)
                scaler.update()
                with warnings.catch_warnings():  # a skipped first step makes torch warn that the schedule runs ahead
                    warnings.filterwarnings("ignore", "Detected call of `lr_scheduler.step", UserWarning)
                    scheduler.step()
                step += 1
                seen += rows
                due = step % hp.log_every == 0 or (hp.evaluate_every_steps and step % hp.evaluate_every_steps == 0)
                saving = checkpoint is not None and _rank_0s(checkpoint.due(step))  # ranks' clocks differ
                if due or saving:
                    # every rank reads the whole batches' losses alike, so all stop at the same step
                    nonfinite = read_back()
                    if nonfinite is not None:
                        return diverge(epoch, nonfinite[0], f"training loss {nonfinite[1]}")
                if step % hp.log_every == 0:
                    log.info(
                        "epoch %d step %d/%d loss %.4f lr %.2e %.1f ex/s",
                        epoch, step, steps_per_epoch * hp.epochs, np.mean([r[0] for r in running[-hp.log_every:]]),
                        running[-1][1], seen / (time.perf_counter() - started),
                    )
                if hp.evaluate_every_steps and step % hp.evaluate_every_steps == 0:
                    score = evaluation(epoch)
                    if not math.isfinite(score):
                        return diverge(epoch, step, f"dev {select_metric} {score}")
                    model.train()  # evaluate() may have switched to eval mode
                if saving:
                    save(epoch, position + 1, epoch_shuffler, elapsed + time.perf_counter() - started)
                    if _rank_0s(checkpoint.terminated):
                        raise Terminated(f"run {run} stopped by SIGTERM at epoch {epoch}, step {step}, after saving "
                                         "its checkpoint: a rerun resumes from it")
            nonfinite = read_back()
            if nonfinite is not None:
                return diverge(epoch, nonfinite[0], f"training loss {nonfinite[1]}")
            if not result.history or result.history[-1]["step"] != step:  # unless evaluated at this step already
                score = evaluation(epoch)
                if not math.isfinite(score):
                    return diverge(epoch, step, f"dev {select_metric} {score}")
            if hp.keep == "final" and epoch == hp.epochs:
                keep(epoch, step, result.history[-1][f"dev_{select_metric}"])
            batches_done = 0
            if checkpoint is not None:
                save(epoch + 1, 0, shuffler.bit_generator.state, 0.0, finished=epoch == hp.epochs)
        live.close()
        log.info("kept the %s model: dev %s %.4f at epoch %d, step %d", hp.keep, select_metric, result.best_score,
                 result.best_epoch, result.best_step)
        return result


@torch.no_grad()
def predict(forward: Callable[[Batch], torch.Tensor], batch_iter: Iterable[Batch], device: torch.device,
            precision: Precision = FP32) -> np.ndarray:
    """Stack ``forward``'s outputs over batches, computed in ``precision`` and returned as float32 (eval mode is
    the caller's business)."""
    with precision.autocast():
        return torch.cat([forward(to_device(batch, device)).float().cpu() for batch in batch_iter]).numpy()


def _in_precision(loss_fn: LossFn, precision: Precision) -> LossFn:
    """``loss_fn`` with its forward pass in ``precision``; the loss itself float32, for its backward outside."""

    def loss(model: nn.Module, batch: Batch) -> torch.Tensor:
        with precision.autocast():
            return loss_fn(model, batch).float()

    return loss



@dataclass(frozen=True)
class StepCompiler:
    """How a job runs its training step's forward pass and loss: eager (``backend`` None, the default and the CPU's),
    or compiled by ``torch.compile`` as one graph. ``fullgraph``, so that a graph break is an error rather than a
    silently slower step, and ``dynamic=False``, one graph per batch shape (the length buckets,
    :mod:`kdflow.training.batching`); AOTAutograd compiles the backward pass alike. ``mode="reduce-overhead"``
    replays each graph as a CUDA graph, whose outputs the next replay overwrites: the compiled function returns
    copies of them, as the loop keeps a step's loss until its next read-back. Recurrent students are traced through
    :func:`kdflow.students.recurrent.unrolled_lstm`, which reads ``nn.LSTM``'s weights without calling it: dynamo
    refuses to touch an LSTM module unless ``allow_rnn`` is set."""

    mode: str | None = None
    backend: str | None = None

    def __call__(self, fn: Callable) -> Callable:
        if self.backend is None:
            return fn
        torch._dynamo.config.allow_rnn = True
        graphed = torch.compile(fn, fullgraph=True, dynamic=False, mode=self.mode, backend=self.backend)
        if self.mode != "reduce-overhead":
            return graphed

        def copied(*args, **kwargs):  # a step's loss, or a method's dict of loss terms
            out = graphed(*args, **kwargs)
            return {name: value.clone() for name, value in out.items()} if isinstance(out, dict) else out.clone()

        return copied


EAGER = StepCompiler()


def step_compiler(compile_step: bool, device: torch.device) -> StepCompiler:
    """The config's ``compile_step`` on ``device``: CUDA graphs (inductor, ``reduce-overhead``) on a CUDA GPU when
    it is true, eager elsewhere (on a CPU a compiled step saves little and costs its compilation)."""
    return StepCompiler("reduce-overhead", "inductor") if compile_step and device.type == "cuda" else EAGER


def _backward_in_one_process(model: nn.Module, loss_fn: LossFn, device: torch.device,
                             scaler: torch.amp.GradScaler) -> Backward:
    def backward(batch: Batch, weight: float, last: bool) -> torch.Tensor:
        loss = loss_fn(model, to_device(batch, device))
        if weight != 1:  # a micro-batch's share; a whole batch skips the multiplication
            loss = loss * weight
        scaler.scale(loss).backward()
        return loss.detach()

    return backward


def _gradient_norm(parameters: list[nn.Parameter], max_norm: float | None) -> torch.Tensor:
    """The gradient's total 2-norm before clipping (on the device), clipping it to ``max_norm`` if set
    (``clip_grad_norm_``'s two halves, so that a run without clipping measures its norm alike)."""
    norm = nn.utils.get_total_norm([p.grad for p in parameters if p.grad is not None])
    if max_norm:
        nn.utils.clip_grads_with_norm_(parameters, max_norm, norm)
    return norm


def _micro_batches(batch: Batch, parts: int) -> list[Batch]:
    """``batch``'s rows in ``parts`` contiguous, near-equal micro-batches (fewer when it has fewer rows)."""
    if parts == 1:
        return [batch]
    pieces = {name: value.tensor_split(parts) for name, value in batch.items()}
    micro = [{name: split[i] for name, split in pieces.items()} for i in range(parts)]
    return [part for part in micro if batch_rows(part)]


def _rank_0s(value):
    """Rank 0's ``value`` (picklable) on every rank of a data-parallel job."""
    if not dist.is_initialized():
        return value
    holder = [value]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]


def _every_ranks(value) -> list:
    """Every rank's ``value`` (picklable), in rank order."""
    if not dist.is_initialized():
        return [value]
    values = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values


def _fmt(scores: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.4f}" for name, value in scores.items())
