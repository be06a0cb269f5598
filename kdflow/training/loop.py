"""The one training loop of kdflow: an optimiser (AdamW by default), linear warm-up then linear or no decay,
gradient accumulation, dev evaluation at epoch ends (or every N optimiser steps) and the best-dev (or the final)
model kept. Teachers, pseudo-heads and students differ only in the ``loss`` they pass in; a pack of K students of one
shape (:mod:`kdflow.training.packs`) trains as K runs at once, each member with its own bookkeeping.
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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from kdflow.core.errors import Terminated
from kdflow.core.hyperparameters import PACK_VARIES, Hyperparameters
from kdflow.core.precision import FP32, Precision
from kdflow.training.batching import batch_rows, to_device
from kdflow.training.checkpoint import Checkpoint, random_states, restore_random_states
from kdflow.training.curves import LiveCurves
from kdflow.training.packs import Pack, PackAdamW, member_gradient_norms, stacked_batches

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
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor(total_steps, warmup_ratio, decay))


def lr_factor(total_steps: int, warmup_ratio: float, decay: str = "linear") -> Callable[[int], float]:
    """:func:`lr_schedule`'s factor of the base learning rate at each (0-based) optimiser step."""
    warmup = int(total_steps * warmup_ratio)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if decay == "none":
            return 1.0
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return factor


def train(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, Batch], torch.Tensor],
    train_batches: Callable[[np.random.Generator], Iterable[Batch]],
    n_train: int,
    evaluate: Callable[[nn.Module], dict[str, float]],
    select_metric: str,
    hp: Hyperparameters | Sequence[Hyperparameters],
    device: torch.device,
    on_epoch_start: Callable[[int], None] | None = None,
    checkpoint: Checkpoint | None = None,
    run: str = "train",
    data_parallel: MakeBackward | None = None,
    precision: Precision = FP32,
) -> TrainResult | list[TrainResult]:
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

    A :class:`~kdflow.training.packs.Pack` of K members trains as K runs at once: ``hp`` is then the members'
    hyperparameters, alike but for :data:`~kdflow.core.hyperparameters.PACK_VARIES`; each member draws its own
    batches from ``train_batches`` (or from its own of K of them: members with their own training subsets) with its
    own seed's shuffler, stacked into one batch a step; ``loss_fn`` returns the members' K losses and ``evaluate``
    their K score dicts, and the result is the K members' :class:`TrainResult`, each what the member trained alone
    would leave (its own schedule, gradient norm and clipping, evaluations and kept state). A member whose loss or
    dev score turns non-finite stops alone (:meth:`PackAdamW.stop`); the run ends when every member has. A pack
    trains with AdamW in bf16 or fp32, on whole batches, in one process.
    """
    pack = model if isinstance(model, Pack) else None
    hps = _pack_hyperparameters(pack, hp, data_parallel, precision) if pack is not None else [hp]
    hp = hps[0]  # what every member shares
    members = range(len(hps))
    batch_makers = [train_batches] * len(hps) if callable(train_batches) else list(train_batches)
    model.to(device)
    steps_per_epoch = -(-n_train // hp.batch_size)
    factor = lr_factor(steps_per_epoch * hp.epochs, hp.warmup_ratio, hp.lr_decay)
    if pack is None:
        optimizer = build_optimizer(model.named_parameters(), hp)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    else:
        optimizer = PackAdamW(pack, [h.learning_rate for h in hps], [h.weight_decay for h in hps],
                              **({"betas": hp.betas} if hp.betas else {}), **({"eps": hp.eps} if hp.eps else {}),
                              decay_all=hp.weight_decay_all)
        scheduler = None
    shufflers = [np.random.default_rng(h.seed) for h in hps]
    results = [TrainResult() for _ in members]
    step, first_epoch, batches_done, elapsed = 0, 1, 0, 0.0
    # each member's (loss, learning rate, gradient norm) of each optimiser step since its last evaluation, read back
    running = [[] for _ in members]
    pending = []  # (step, members' learning rates, loss, gradient norm) of the steps since the last read-back
    stopped = set()  # the members that diverged
    parameters = list(model.parameters())
    scaler = precision.grad_scaler()
    backward = (data_parallel or _backward_in_one_process)(model, _in_precision(loss_fn, precision), device, scaler)
    rank = dist.get_rank() if dist.is_initialized() else 0
    saved = checkpoint.load(run) if checkpoint is not None else None
    if saved is not None:
        model.load_state_dict(saved["model"])
        results = [TrainResult(**r) for r in (saved["result"] if pack is not None else [saved["result"]])]
        stopped = {k for k in members if results[k].diverged}
        if saved["finished"]:
            log.info("run %s finished before: weights and results restored from the checkpoint", run)
            return results if pack is not None else results[0]
        optimizer.load_state_dict(saved["optimizer"])
        if scheduler is not None:
            scheduler.load_state_dict(saved["scheduler"])
        if saved["precision"] != precision.name:  # `auto` on another machine, e.g. a requeued job: weights are float32
            log.warning("run %s was checkpointed in %s and goes on in %s", run, saved["precision"], precision.name)
        if saved["scaler"] and scaler.is_enabled():  # the fp16 scale reached; another precision's run starts its own
            scaler.load_state_dict(saved["scaler"])
        for shuffler, state in zip(shufflers, saved["epoch_shuffler"] if pack is not None
                                   else [saved["epoch_shuffler"]]):
            shuffler.bit_generator.state = state
        if rank < len(saved["random"]):  # the saving run's ranks; a rank beyond keeps its new seed
            restore_random_states(saved["random"][rank])
        step, first_epoch, batches_done = saved["step"], saved["epoch"], saved["batches_done"]
        running = saved["running"] if pack is not None else [saved["running"]]
        elapsed = saved["seconds"]
        log.info("resuming run %s from its checkpoint: epoch %d, batch %d (step %d)", run, first_epoch,
                 batches_done, step)
    if pack is not None:
        # the weights no member's loss reaches, which torch's optimiser would leave alone: traced on a first batch
        optimizer.reached.copy_(pack.reached_by(_in_precision(loss_fn, precision), to_device(stacked_batches(
            [next(iter(make(np.random.default_rng(h.seed)))) for make, h in zip(batch_makers, hps)]), device)))
    # the step of the last evaluation (a member that stopped records no more of them)
    evaluated_at = max((result.history[-1]["step"] for result in results if result.history), default=-1)
    lives = [LiveCurves(run if pack is None else f"{run}/member{k}", resumed_at_step=step, writes=rank == 0)
             for k in members]

    def one_or_all(values: list):
        """A pack's checkpoint holds its members' values, a model's its one."""
        return values if pack is not None else values[0]

    def rates_of(at: int) -> list[float]:
        if pack is None:
            return [optimizer.param_groups[0]["lr"]]
        return [0.0 if k in stopped else h.learning_rate * factor(at) for k, h in enumerate(hps)]

    def read_back() -> dict[int, tuple[int, float]]:
        """Move the pending steps' losses and norms to ``running`` in one transfer; each member's first step whose
        loss is not finite, and that loss (the members that already stopped aside)."""
        if not pending:
            return {}
        losses = torch.stack([loss.reshape(-1) for _, _, loss, _ in pending]).tolist()
        norms = torch.stack([norm.reshape(-1) for _, _, _, norm in pending]).tolist()
        first = {}
        for (at, rates, _, _), step_losses, step_norms in zip(pending, losses, norms):
            for k in members:
                if k in stopped:
                    continue
                if not math.isfinite(step_losses[k]):
                    first.setdefault(k, (at, step_losses[k]))
                running[k].append((step_losses[k], rates[k], step_norms[k]))
        pending.clear()
        return first

    def save(epoch: int, batches: int, epoch_shufflers: list[dict], seconds: float, finished: bool = False) -> None:
        generators = None if finished else _every_ranks(random_states())
        if rank != 0:
            return
        state = {"finished": finished, "model": model.state_dict(), "result": one_or_all([vars(r) for r in results])}
        if not finished:
            state.update(optimizer=optimizer.state_dict(), precision=precision.name, scaler=scaler.state_dict(),
                         epoch_shuffler=one_or_all(epoch_shufflers), random=generators, step=step, epoch=epoch,
                         batches_done=batches, running=one_or_all(running), seconds=seconds)
            if scheduler is not None:
                state["scheduler"] = scheduler.state_dict()
        checkpoint.save(run, state)

    def keep(k: int, epoch: int, at_step: int, score: float) -> None:
        result = results[k]
        result.best_epoch, result.best_step, result.best_score = epoch, at_step, score
        state = pack.member_state(k) if pack is not None else model.state_dict()
        result.best_state = copy.deepcopy({name: value.detach().cpu() for name, value in state.items()})

    def diverge(k: int, epoch: int, at_step: int, what: str) -> bool:
        """Stop member ``k`` where it diverged; True when no member trains on (the run is over)."""
        log.warning("run %s%s diverged at epoch %d, step %d (%s): stopped", run,
                    f" member {k}" if pack is not None else "", epoch, at_step, what)
        results[k].diverged = {"epoch": epoch, "step": at_step, "what": what}
        keep(k, epoch, at_step, float("nan"))
        stopped.add(k)
        if pack is not None:
            optimizer.stop(k)
        if len(stopped) < len(hps):
            return False
        for live in lives:
            live.close()
        if checkpoint is not None:
            save(epoch, 0, [], 0.0, finished=True)
        return True

    def training_losses(epoch: int) -> bool:
        """Read back the pending steps and stop the members whose loss turned non-finite; True when none is left."""
        return any([diverge(k, epoch, at, f"training loss {loss}") for k, (at, loss) in read_back().items()])

    def evaluation(epoch: int) -> bool:
        """Evaluate on dev, record it, keep each member's model if it is its best so far and stop the members whose
        selection score is not finite; True when no member is left."""
        nonlocal elapsed, started, seen, evaluated_at
        read_back()  # the caller has looked for a divergence already
        with precision.autocast():
            scores = _rank_0s(evaluate(model))  # ranks select alike even if their floats differ
        done = False
        for k, member_scores in enumerate(scores if pack is not None else [scores]):
            if k in stopped:
                continue
            losses, rates, norms = zip(*running[k])
            # fp16: a step whose gradient norm is not finite was skipped, and the norms are those of the steps taken
            skipped = sum(not math.isfinite(norm) for norm in norms) if scaler.is_enabled() else 0
            taken = ([norm for norm in norms if math.isfinite(norm)] or [math.nan]) if skipped else norms
            record = {"epoch": epoch, "step": step, "lr": rates[-1], "grad_norm_mean": float(np.mean(taken)),
                      "grad_norm_max": max(taken), "skipped_steps": skipped, "train_loss": float(np.mean(losses)),
                      "seconds": elapsed + time.perf_counter() - started}
            record.update({f"dev_{name}": value for name, value in member_scores.items()})
            results[k].history.append(record)
            lives[k].add(record)
            log.info("evaluation at epoch %d, step %d%s: train loss %.4f, dev %s", epoch, step,
                     f", member {k}" if pack is not None else "", record["train_loss"], _fmt(member_scores))
            running[k].clear()
            score = member_scores[select_metric]
            if not math.isfinite(score):
                done = diverge(k, epoch, step, f"dev {select_metric} {score}")
            elif hp.keep == "best" and score > results[k].best_score:
                keep(k, epoch, step, score)
        elapsed, started, seen, evaluated_at = 0.0, time.perf_counter(), 0, step
        return done

    def epoch_batches() -> Iterable[tuple[Batch, int]]:
        """The epoch's batches and their rows (a member's), from each member's shuffler."""
        if pack is None:
            return ((batch, batch_rows(batch)) for batch in train_batches(shufflers[0]))
        return ((stacked_batches(step_batches), batch_rows(step_batches[0]))
                for step_batches in zip(*(make(shuffler) for make, shuffler in zip(batch_makers, shufflers))))

    # SIGTERM (a SLURM time limit, preemption or scancel) saves a checkpoint after the step in progress and stops
    in_main_thread = threading.current_thread() is threading.main_thread()  # where signal handlers can be set
    with checkpoint.stop_on_sigterm() if checkpoint is not None and in_main_thread else contextlib.nullcontext():
        for epoch in range(first_epoch, hp.epochs + 1):
            if on_epoch_start is not None:
                on_epoch_start(epoch)
            model.train()
            epoch_shufflers = [shuffler.bit_generator.state for shuffler in shufflers]  # rebuilt from on resume
            started, seen = time.perf_counter(), 0
            for position, (batch, rows) in enumerate(epoch_batches()):
                if position < batches_done:
                    continue  # trained on before the checkpoint
                optimizer.zero_grad(set_to_none=True)
                parts = _micro_batches(batch, hp.gradient_accumulation_steps)
                loss = backward(parts[0], batch_rows(parts[0]) / rows if pack is None else 1.0, len(parts) == 1)
                for i, part in enumerate(parts[1:], start=2):
                    loss = loss + backward(part, batch_rows(part) / rows, i == len(parts))
                if pack is None:
                    scaler.unscale_(optimizer)  # the true gradient, to measure and clip
                    norm = _gradient_norm(parameters, hp.max_grad_norm)
                else:
                    norm = member_gradient_norms(pack, hp.max_grad_norm)
                pending.append((step + 1, rates_of(step), loss, norm))
                if pack is None:
                    scaler.step(optimizer)  # fp16: skipped if the gradient is not finite (the scaler reads it back)
                    scaler.update()
                    with warnings.catch_warnings():  # a skipped first step makes torch warn the schedule runs ahead
                        warnings.filterwarnings("ignore", "Detected call of `lr_scheduler.step", UserWarning)
                        scheduler.step()
                else:
                    optimizer.step(factor(step))
                step += 1
                seen += rows
                due = step % hp.log_every == 0 or (hp.evaluate_every_steps and step % hp.evaluate_every_steps == 0)
                saving = checkpoint is not None and _rank_0s(checkpoint.due(step))  # ranks' clocks differ
                # every rank reads the whole batches' losses alike, so all stop at the same step
                if (due or saving) and training_losses(epoch):
                    return one_or_all(results)
                if step % hp.log_every == 0:
                    log.info("epoch %d step %d/%d loss %s lr %.2e %.1f ex/s", epoch, step,
                             steps_per_epoch * hp.epochs,
                             " ".join(f"{np.mean([r[0] for r in running[k][-hp.log_every:]]):.4f}"
                                      for k in members if k not in stopped and running[k]),
                             max(rates_of(step - 1)), seen / (time.perf_counter() - started))
                if hp.evaluate_every_steps and step % hp.evaluate_every_steps == 0:
                    if evaluation(epoch):
                        return one_or_all(results)
                    model.train()  # evaluate() may have switched to eval mode
                if saving:
                    save(epoch, position + 1, epoch_shufflers, elapsed + time.perf_counter() - started)
                    if _rank_0s(checkpoint.terminated):
                        raise Terminated(f"run {run} stopped by SIGTERM at epoch {epoch}, step {step}, after saving "
                                         "its checkpoint: a rerun resumes from it")
            if training_losses(epoch):
                return one_or_all(results)
            if evaluated_at != step:  # unless evaluated at this step already
                if evaluation(epoch):
                    return one_or_all(results)
            if hp.keep == "final" and epoch == hp.epochs:
                for k in members:
                    if k not in stopped:
                        keep(k, epoch, step, results[k].history[-1][f"dev_{select_metric}"])
            batches_done = 0
            if checkpoint is not None:
                save(epoch + 1, 0, [shuffler.bit_generator.state for shuffler in shufflers], 0.0,
                     finished=epoch == hp.epochs)
        for live in lives:
            live.close()
        for k in members:
            log.info("kept the %s model%s: dev %s %.4f at epoch %d, step %d", hp.keep,
                     f" of member {k}" if pack is not None else "", select_metric, results[k].best_score,
                     results[k].best_epoch, results[k].best_step)
        return one_or_all(results)


def _pack_hyperparameters(pack: Pack, hp, data_parallel, precision: Precision) -> list[Hyperparameters]:
    """A pack's members' hyperparameters, refused (ValueError) where they or the run are not what a pack trains."""
    hps = list(hp) if not isinstance(hp, Hyperparameters) else [hp] * pack.size
    if len(hps) != pack.size:
        raise ValueError(f"a pack of {pack.size} members needs {pack.size} members' hyperparameters, got {len(hps)}")
    shared = [{k: v for k, v in vars(h).items() if k not in PACK_VARIES} for h in hps]
    differing = sorted({k for h in shared[1:] for k in h if h[k] != shared[0][k]})
    if differing:
        raise ValueError(f"a pack's members may differ in {', '.join(PACK_VARIES)} alone; these differ: "
                         f"{', '.join(differing)} (train those members in separate packs)")
    if hps[0].optimizer != "adamw":
        raise ValueError(f"a pack trains with AdamW (PackAdamW), not {hps[0].optimizer}")
    if hps[0].gradient_accumulation_steps != 1:
        raise ValueError("a pack trains on whole batches: gradient_accumulation_steps must be 1")
    if data_parallel is not None or precision.grad_scaler().is_enabled():
        raise ValueError("a pack trains in one process, in bf16 or fp32 (no data parallelism, no fp16 loss scaling)")
    return hps


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
    :func:`kdflow.students.layers.unrolled_lstm`, which reads ``nn.LSTM``'s weights without calling it: dynamo
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
        # a pack's members' losses [K] are independent: their sum's gradient is each member's own
        scaler.scale(loss.sum() if loss.ndim else loss).backward()
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
