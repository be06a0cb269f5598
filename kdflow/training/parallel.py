"""Data-parallel training over the GPUs of one node: a job given N GPUs runs N processes, one per GPU, each on
its share of every batch, with the gradients of the whole batch in every process before each optimiser step.

**Processes.** :func:`run_processes` starts N workers with ``torch.multiprocessing`` (spawn: nothing of the
parent, CUDA state or thread pools, is inherited). A worker that fails or is killed makes the launcher stop the
others and raise its error, so no rank waits forever for a dead one; workers are interrupted if the launcher
dies. Rank r uses ``cuda:r`` (the r-th visible
GPU). The ranks meet through a file in a temporary directory, not a TCP port, so jobs sharing a node cannot
clash; they talk over NCCL on CUDA and gloo on CPU (the tests). Every rank runs the same function: the same
seed, so the same model and the same shuffled batches. In one process there is no process group and every
function here reduces to what a single process does.

**Gradients.** :func:`backward` gives each rank a contiguous share of each batch's rows, backpropagates the
loss on it, then all-reduces one flat buffer of every trainable gradient, each rank's weighted by its share of
the rows. For a loss that is a mean over the batch's rows this is exactly the gradient of the whole batch, also
for a last batch that does not split evenly (or leaves a rank without rows), and clipping and the optimiser
step then see the same gradient on every rank, which keeps the ranks' weights identical. Why not
``DistributedDataParallel``: it averages gradients only through its wrapper's ``forward``, while kdflow's
losses call into the model as they need (``model.config``, ``model.base_model``, the parts of a
``ModuleDict`` student); and it averages ranks equally, not by rows. What DDP does better is overlapping the
reduction with the backward pass: here it follows the backward pass (one all-reduce per step), and the buffer
holds a second copy of the gradients while it lasts.

**Where results differ from one process.** Floating-point sums run in another order (the tests see weights differ
by about 1e-7 after 16 steps; long training can amplify such differences). Each rank draws its own dropout masks
(:func:`seed_ranks_apart`), so with dropout the runs agree in distribution, not in value. A loss that is not a
mean over rows (a mean over the labelled rows only, when some are unlabelled; any statistic across the batch) is
computed per share and combined by rows, an approximation of the whole batch's.

**Agreement.** Decisions taken from a clock (is a checkpoint due) and dev scores are rank 0's on every rank
(:func:`from_main`), so ranks select the same epoch and save together; every rank evaluates the whole dev set
(no faster than one process). Rank 0 alone writes checkpoints and outputs and logs progress; every rank logs
its warnings and errors.
"""

from __future__ import annotations

import datetime
import logging
import tempfile
from collections.abc import Callable

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.multiprocessing.spawn import ProcessException, start_processes

from kdflow.core.errors import UserError
from kdflow.core.runtime import set_threads, setup_logging
from kdflow.training.batching import to_device

log = logging.getLogger("kdflow")

# Rank 0 alone saves checkpoints (gigabytes for a large teacher, maybe on a network file system) while the
# others wait in the next collective; a wait longer than this is taken for a hang and fails the job.
COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=30)

Batch = dict[str, torch.Tensor]


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def is_main() -> bool:
    return rank() == 0


def process_count(device: torch.device, gpus: int) -> int:
    """One process per GPU the job was given (its ``gpu`` resource) when it runs on CUDA, else one."""
    if device.type != "cuda" or gpus <= 1:
        return 1
    visible = torch.cuda.device_count()
    if visible < gpus:
        raise UserError(f"the job was given {gpus} GPUs but sees {visible}: check CUDA_VISIBLE_DEVICES")
    return gpus


def run_processes(fn: Callable[..., object], kwargs: dict, processes: int, device: torch.device,
                  log_path: str | None = None, threads: int = 1) -> None:
    """Call ``fn(**kwargs, device=...)`` in this process, or in ``processes`` data-parallel ranks (each logging
    to ``log_path``, with ``threads // processes`` threads). ``fn`` and ``kwargs`` must be picklable."""
    if processes == 1:
        fn(**kwargs, device=device)
        return
    log.info("training data-parallel in %d processes on %s", processes, device.type)
    with tempfile.TemporaryDirectory(prefix="kdflow-ranks-") as meeting:
        try:
            start_processes(
                _rank_main,
                args=(processes, f"file://{meeting}/store", device.type, log_path, threads, fn, kwargs),
                nprocs=processes,
                start_method="spawn",
            )
        except ProcessException as error:
            log.error("a training process failed: %s", error)
            raise


def _rank_main(rank: int, processes: int, store: str, device_type: str, log_path: str | None, threads: int,
               fn: Callable[..., object], kwargs: dict) -> None:
    # Other ranks log warnings and errors only: the log tells one story, rank 0's.
    setup_logging(log_path, level=logging.INFO if rank == 0 else logging.WARNING, tag=f"rank {rank}", append=True)
    set_threads(max(1, threads // processes))
    device = torch.device("cuda", rank) if device_type == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=store, rank=rank,
                            world_size=processes, timeout=COLLECTIVE_TIMEOUT)
    try:
        fn(**kwargs, device=device)
    finally:
        dist.destroy_process_group()


def batch_rows(batch: Batch) -> int:
    return len(next(iter(batch.values())))  # every entry of a batch has one row per example


def backward(loss_fn: Callable[[nn.Module, Batch], torch.Tensor], model: nn.Module, batch: Batch,
             device: torch.device) -> float:
    """Backpropagate ``loss_fn`` on this rank's share of ``batch`` and leave the gradient of the whole batch's
    loss in every parameter's ``.grad`` on every rank; return the whole batch's loss."""
    if world_size() == 1:
        loss = loss_fn(model, to_device(batch, device))
        loss.backward()
        return loss.item()
    share = {name: value.tensor_split(world_size())[rank()] for name, value in batch.items()}
    loss = torch.zeros((), device=device)
    if batch_rows(share):  # a last batch with fewer rows than ranks leaves some ranks without any
        loss = loss_fn(model, to_device(share, device))
        loss.backward()
    return _sum_over_ranks(model, loss.detach(), batch_rows(share) / batch_rows(batch))


def _sum_over_ranks(model: nn.Module, loss: torch.Tensor, weight: float) -> float:
    """All-reduce, in one buffer, the trainable gradients and the loss, each rank's scaled by ``weight``, and
    flags of which parameters have a gradient: one without a gradient on some rank counts as zero there, and
    stays without one (as AdamW then leaves it alone) only if it has none on any rank."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    gradients = [p.grad.reshape(-1) if p.grad is not None else p.new_zeros(p.numel()) for p in trainable]
    present = torch.tensor([p.grad is not None for p in trainable], dtype=loss.dtype, device=loss.device)
    flat = torch.cat([*gradients, loss.reshape(1), present])
    flat[: -len(trainable)].mul_(weight)
    dist.all_reduce(flat)
    sizes = [p.numel() for p in trainable]
    *summed, total_loss, counts = flat.split([*sizes, 1, len(trainable)])
    for param, gradient, count in zip(trainable, summed, counts.tolist()):
        param.grad = gradient.view_as(param) if count else None
    return total_loss.item()


def from_main(value):
    """Rank 0's ``value`` (picklable) on every rank."""
    if world_size() == 1:
        return value
    holder = [value]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]


def gather(value) -> list:
    """Every rank's ``value``, in rank order, on rank 0 (an empty list on the other ranks)."""
    if world_size() == 1:
        return [value]
    values = [None] * world_size() if is_main() else None
    dist.gather_object(value, values, dst=0)
    return values or []


def copy_main_weights(model: nn.Module) -> None:
    """Give every rank rank 0's weights and buffers. Ranks that seed alike build the same model; this makes
    sure of it, as ranks that started apart would silently train different models on averaged gradients."""
    if world_size() > 1:
        for tensor in model.state_dict().values():
            dist.broadcast(tensor, src=0)


def seed_ranks_apart(seed: int) -> None:
    """Reseed torch (CPU and CUDA) from ``seed`` and the rank, so that each rank draws its own dropout masks
    for its rows, as one process draws a mask per row: ranks seeded alike would repeat each other's masks."""
    if world_size() > 1:
        torch.manual_seed(int(np.random.SeedSequence([seed, rank()]).generate_state(1)[0]))
