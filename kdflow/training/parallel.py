"""Data-parallel teacher fine-tuning over the GPUs of one node with torch's ``DistributedDataParallel`` (DDP): a
job given N GPUs runs N processes, one per GPU, each on its share of every batch, with the gradient of the whole
batch in every process before each optimiser step.

**Processes.** :func:`run_processes` writes the function to run and its arguments to a file and launches
``python -m torch.distributed.run --standalone --nproc-per-node N -m kdflow.training.parallel FILE``. torchrun
gives each rank its rank and a free local port to meet at (jobs sharing a node cannot clash), and when a rank
fails or is killed it stops the others and exits non-zero, which fails the job: no rank waits forever for a dead
one. The rule's own process only waits, holding no GPU. Rank r uses the r-th visible GPU; the ranks talk over
NCCL on CUDA and gloo on CPU (the tests). Every rank runs the same function with the same seed, so it builds
the same shuffled batches, and DDP gives it rank 0's weights. Rank 0 logs progress to the rule's log, every rank
its warnings and errors.

**Gradients.** DDP all-reduces the gradients through hooks that its wrapper's ``forward`` arms, so the wrapper
must see every call into the model; kdflow's losses call into the model as they need (``model.config``,
``model.base_model``, the parts of a ``ModuleDict``). :func:`data_parallel` therefore wraps a module whose
``forward`` is the loss, not the model. Each rank takes a contiguous share of each batch's rows; DDP averages
the ranks' gradients equally, so each rank scales its loss by N times its fraction of the rows, and the average
is the gradient of the whole batch for a loss that is a mean over rows. That holds for a last batch that does
not split evenly too: it splits unevenly and is weighted by rows, rather than evened out by repeating rows
(DistributedSampler) or dropping some, which would change what a step learns from and part a multi-GPU teacher
from a one-GPU one. (DDP's join is for ranks with different numbers of batches; here every rank has a share of
every batch.) A rank left without rows (a last batch with fewer rows than ranks) backpropagates one borrowed row
with weight 0, as DDP needs a backward pass on every rank. With gradient accumulation the micro-batches of a step
but its last accumulate locally under DDP's ``no_sync``, and the last one's backward all-reduces the sum: one
all-reduce per optimiser step, and the accumulated gradient is the same on every rank. Clipping and the optimiser step then see the same gradient on
every rank, which keeps the weights identical. Every trainable parameter must take part in the loss
(a sequence classifier's do); DDP fails the next step if one does not.

**Where results differ from one process.** Floating-point sums run in another order (the tests see weights differ
by under 1e-7 after 16 steps; long training can amplify such differences). Each rank draws its own dropout masks,
so with dropout the runs agree in distribution, not in value. A loss that is not a mean over rows (a mean over the
labelled rows only, when some are unlabelled; any statistic across the batch) is computed per share and
combined by rows, an approximation of the whole batch's. The training loop takes rank 0's checkpoint timing and
dev scores on every rank (:mod:`kdflow.training.loop`); every rank evaluates the whole dev set.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel

from kdflow.core.errors import UserError
from kdflow.core.job_setup import set_threads, setup_logging
from kdflow.training.batching import batch_rows, to_device
from kdflow.training.loop import Backward, Batch, LossFn

log = logging.getLogger("kdflow")

# Rank 0 alone saves checkpoints (gigabytes for a large teacher, maybe on a network file system) while the
# others wait in the next collective; a wait longer than this is taken for a hang and fails the job.
COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=30)


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
    """Call ``fn(**kwargs, device=...)`` in this process, or ``fn(**kwargs, device=..., data_parallel=...)`` in
    ``processes`` ranks started by torchrun (each logging to ``log_path``, with ``threads // processes``
    threads), where ``data_parallel`` is :func:`data_parallel` for the training loop. ``fn`` and ``kwargs`` must
    be picklable, ``fn`` importable by the ranks, which get this process's ``sys.path``."""
    if processes == 1:
        fn(**kwargs, device=device)
        return
    log.info("training data-parallel in %d processes on %s", processes, device.type)
    threads_per_rank = max(1, threads // processes)
    with tempfile.TemporaryDirectory(prefix="kdflow-ranks-") as folder:
        job = Path(folder) / "job.pickle"
        job.write_bytes(pickle.dumps(dict(fn=fn, kwargs=kwargs, device_type=device.type, log_path=log_path,
                                          threads=threads_per_rank)))
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
                       "OMP_NUM_THREADS": str(threads_per_rank)}
        launched = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
             "-m", __name__, str(job)],
            env=environment,
        )
    if launched.returncode:
        raise RuntimeError(f"a data-parallel training process failed (torchrun exited with {launched.returncode}): "
                           "its error is in the log")


@record  # hands the rank's error to torchrun, which reports the first failure
def _run_rank(job_path: str) -> None:
    job = pickle.loads(Path(job_path).read_bytes())
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])  # set by torchrun
    # Other ranks log warnings and errors only: the log tells one story, rank 0's.
    setup_logging(job["log_path"], level=logging.INFO if rank == 0 else logging.WARNING, tag=f"rank {rank}",
                  append=True)
    set_threads(job["threads"])
    cuda = job["device_type"] == "cuda"
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", timeout=COLLECTIVE_TIMEOUT)
    try:
        job["fn"](**job["kwargs"], device=device, data_parallel=data_parallel)
    except Exception:
        log.exception("training failed")  # into the rule's log; torchrun reports it on stderr
        raise
    finally:
        dist.destroy_process_group()


class _Loss(nn.Module):
    """The loss on the model as a module, so that DDP's ``forward`` sees every call the loss makes into it."""

    def __init__(self, model: nn.Module, loss_fn: LossFn):
        super().__init__()
        self.model, self.loss_fn = model, loss_fn

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.loss_fn(self.model, batch)


def data_parallel(model: nn.Module, loss_fn: LossFn, device: torch.device, scaler: torch.amp.GradScaler) -> Backward:
    """The training loop's backward step on this rank: backpropagate ``loss_fn`` on the rank's share of a batch
    (weighted by rows, see the module's docstring) and add the gradient of ``weight`` times the whole batch's loss
    to every parameter's ``.grad`` on every rank (the loop's micro-batches weigh their share of a step's rows; until
    the ``last`` of a step, each rank adds only its own share's gradient); return ``weight`` times the whole
    batch's loss. The backward pass is scaled by ``scaler`` (fp16; every rank scales alike, and all-reduces the
    scaled gradients, so that every rank finds the same overflow and skips the same steps). Wrapping ``model`` in
    DDP gives every rank rank 0's weights and
    buffers; torch is reseeded from its seed and the rank, so that each rank draws its own dropout masks for its
    rows, as one process draws a mask per row."""
    rank, ranks = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(int(np.random.SeedSequence([torch.initial_seed(), rank]).generate_state(1)[0]))
    replicas = DistributedDataParallel(_Loss(model, loss_fn), device_ids=[device] if device.type == "cuda" else None)

    def backward(batch: Batch, weight: float, last: bool) -> torch.Tensor:
        rows = batch_rows(batch)
        share = {name: value.tensor_split(ranks)[rank] for name, value in batch.items()}
        share_rows = batch_rows(share)
        if not share_rows:  # fewer rows than ranks: a borrowed row, weighted 0, keeps this rank in the all-reduce
            share = {name: value[:1] for name, value in batch.items()}
        with contextlib.nullcontext() if last else replicas.no_sync():
            loss = replicas(to_device(share, device))
            scaler.scale(loss * (weight * ranks * share_rows / rows)).backward()
        whole = loss.detach() * (weight * share_rows / rows)
        dist.all_reduce(whole)  # on the device: the loop reads it back at its logging points
        return whole

    return backward


if __name__ == "__main__":
    _run_rank(sys.argv[1])
