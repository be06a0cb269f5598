"""Data-parallel training (kdflow.training.parallel: DDP in 2 CPU processes over gloo, launched by torchrun): the same
weights as one process on the same global batches (with gradient accumulation too), rank 0 alone writes, a resumed
run ends like an uninterrupted one, a failing rank fails the job instead of hanging it, a teacher fine-tuned
through the rule's entry point matches one process; and the workflow gives a teacher's GPUs to its fine-tuning
only."""

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from kdflow.core.hyperparameters import Hyperparameters
from kdflow.training import parallel
from kdflow.training.checkpoint import Checkpoint
from kdflow.training.loop import train
from kdflow.training.parallel import run_processes
from kdflow.workflow import results_paths as paths

REPO = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")
HP = Hyperparameters(learning_rate=1e-2, batch_size=8, epochs=2, max_grad_norm=0.5, seed=3, log_every=1000)
X = torch.randn(64, 5, generator=torch.Generator().manual_seed(0))
Y = (X[:, 0] > 0).long()
# 64 rows split 4 + 4 in every batch; 61 leave a last batch of 5 (3 + 2); 57 one of 1 (rank 1 gets no row).
SIZES = (64, 61, 57)
ACCUMULATING = Hyperparameters(**{**vars(HP), "gradient_accumulation_steps": 3})  # batches of 8 as 3 + 3 + 2


class Interrupted(Exception):
    pass


class RecordingCheckpoint(Checkpoint):
    """A checkpoint that leaves a mark of every rank that saves it."""

    def save(self, run, state):
        (self.path.parent / f"saved-by-rank{dist.get_rank()}").touch()
        super().save(run, state)


def fit(n: int, dropout: float, device=CPU, checkpoint=None, interrupt_at=None, data_parallel=None, hp=HP):
    """Train a fresh model on the first ``n`` examples; ``interrupt_at`` raises at that call of the loss."""
    torch.manual_seed(1)
    net, calls = nn.Sequential(nn.Linear(5, 16), nn.Dropout(dropout), nn.ReLU(), nn.Linear(16, 2)), [0]

    def loss_fn(net, batch):
        calls[0] += 1
        if calls[0] == interrupt_at:
            raise Interrupted
        return nn.functional.cross_entropy(net(batch["x"]), batch["y"])

    def batches(rng):
        order = rng.permutation(n)
        for start in range(0, n, HP.batch_size):
            index = order[start:start + HP.batch_size]
            yield {"x": X[index], "y": Y[index]}

    def evaluate(net):
        net.eval()
        with torch.no_grad():
            return {"accuracy": float((net(X[:n]).argmax(1) == Y[:n]).float().mean())}

    result = train(net, loss_fn, batches, n, evaluate, "accuracy", hp, device, checkpoint=checkpoint,
                   data_parallel=data_parallel)
    return net.state_dict(), result


def train_on_each_rank(out, device, data_parallel):
    """Every rank: the runs without dropout, then with dropout an uninterrupted run, and one interrupted at
    step 5 (saved at step 3) then resumed from its checkpoint by fresh objects that read the file."""
    results = {"plain": {n: fit(n, dropout=0.0, device=device, data_parallel=data_parallel) for n in SIZES}}
    results["accumulated"] = {n: fit(n, dropout=0.0, device=device, data_parallel=data_parallel, hp=ACCUMULATING)
                              for n in SIZES}
    results["all-reduces"] = {name: count_gradient_all_reduces(hp, device, data_parallel)
                              for name, hp in (("plain", HP), ("accumulated", ACCUMULATING))}
    results["dropout"] = fit(64, dropout=0.3, device=device, data_parallel=data_parallel)
    results["draw"] = torch.rand(4)  # from the generator the run reseeded by rank
    (out / "checkpoint").mkdir(exist_ok=True)

    def checkpoint():
        return RecordingCheckpoint(out / "checkpoint" / "job.ckpt", "job", every_minutes=None, every_steps=3)

    try:
        fit(64, dropout=0.3, device=device, checkpoint=checkpoint(), interrupt_at=5, data_parallel=data_parallel)
    except Interrupted:
        pass
    results["resumed"] = fit(64, dropout=0.3, device=device, checkpoint=checkpoint(), data_parallel=data_parallel)
    torch.save(results, out / f"rank{dist.get_rank()}.pt")
    fail_on_rank_1(device, data_parallel)


def count_gradient_all_reduces(hp, device, data_parallel) -> int:
    """How many times DDP all-reduced a gradient bucket while training on 64 rows (one bucket: a tiny model)."""
    count = [0]

    def counting_hook(state, bucket):
        count[0] += 1
        return default_hooks.allreduce_hook(None, bucket)

    class CountingDDP(DistributedDataParallel):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.register_comm_hook(None, counting_hook)

    # the ranks run kdflow.training.parallel as __main__: patch the module that data_parallel reads its names from
    names = data_parallel.__globals__
    names["DistributedDataParallel"] = CountingDDP
    try:
        fit(64, dropout=0.0, device=device, data_parallel=data_parallel, hp=hp)
    finally:
        names["DistributedDataParallel"] = DistributedDataParallel
    return count[0]


def fail_on_rank_1(device, data_parallel):
    def loss_fn(net, batch):
        if dist.get_rank() == 1:  # while rank 0 waits for its gradients
            raise RuntimeError("rank 1 broke")
        return net(batch["x"]).sum()

    net = nn.Linear(5, 1)
    train(net, loss_fn, lambda rng: [{"x": X[:8]}] * 4, 32, lambda net: {"score": 0.0}, "score", HP, device,
          data_parallel=data_parallel)


# The launch below takes 12 s on 2 idle cores, minutes on a busy machine. A rank 0 left waiting for the failed rank
# 1 would wait out its collective timeout (kdflow.training.parallel.COLLECTIVE_TIMEOUT, 30 minutes): the launch is
# stopped well before that, and the fixture fails, instead of hanging.
LAUNCH_LIMIT = 600


def limited_run(command, **kwargs):
    """run_processes' subprocess.run, stopped after LAUNCH_LIMIT seconds (torchrun stops its ranks on SIGTERM)."""
    with subprocess.Popen(command, **kwargs) as process:
        try:
            return subprocess.CompletedProcess(command, process.wait(timeout=LAUNCH_LIMIT))
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(timeout=60)  # torchrun gives its ranks 30 s after SIGTERM
            except subprocess.TimeoutExpired:
                process.kill()
            raise


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """One launch serves the tests below, as starting processes takes most of their time: the ranks train, save
    what they hold, then rank 1 fails while rank 0 waits for it."""
    out = tmp_path_factory.mktemp("ranks")
    log = out / "job.log"
    with pytest.MonkeyPatch.context() as patch, pytest.raises(
            RuntimeError, match="a data-parallel training process failed"):
        patch.setattr(parallel, "subprocess", SimpleNamespace(run=limited_run))
        run_processes(train_on_each_rank, {"out": out}, processes=2, device=CPU, log_path=str(log))
    results = [torch.load(out / f"rank{rank}.pt", weights_only=False) for rank in (0, 1)]
    return results, out, {"log": log.read_text()}


def assert_equal_states(a, b):
    assert list(a) == list(b)  # the same names first: a lookup by a's names misses any that b alone has
    for name, value in a.items():
        assert torch.equal(value, b[name]), name


def scores(result):
    return [{k: v for k, v in record.items() if k != "seconds"} for record in result.history]


@pytest.mark.parametrize("n", SIZES)
def test_two_ranks_train_like_one_process_on_the_same_global_batches(ranks, n):
    (rank0, rank1), _, _ = ranks
    weights, result = rank0["plain"][n]
    assert_equal_states(weights, rank1["plain"][n][0])  # the ranks hold one model
    alone, alone_result = fit(n, dropout=0.0)
    for name, value in alone.items():
        torch.testing.assert_close(weights[name], value, atol=1e-6, rtol=0)
    assert [record["train_loss"] for record in result.history] == pytest.approx(
        [record["train_loss"] for record in alone_result.history], abs=1e-6)
    assert result.best_epoch == alone_result.best_epoch == rank1["plain"][n][1].best_epoch


@pytest.mark.parametrize("n", SIZES)
def test_two_ranks_accumulating_gradients_train_like_one_process_on_whole_batches(ranks, n):
    (rank0, rank1), _, _ = ranks
    weights, result = rank0["accumulated"][n]
    assert_equal_states(weights, rank1["accumulated"][n][0])
    alone, alone_result = fit(n, dropout=0.0)
    for name, value in alone.items():
        torch.testing.assert_close(weights[name], value, atol=1e-6, rtol=0)
    assert [record["train_loss"] for record in result.history] == pytest.approx(
        [record["train_loss"] for record in alone_result.history], abs=1e-6)


def test_accumulating_micro_batches_all_reduce_the_gradient_once_per_optimiser_step(ranks):
    (rank0, rank1), _, _ = ranks
    steps = HP.epochs * 64 // HP.batch_size
    assert rank0["all-reduces"] == rank1["all-reduces"] == {"plain": steps, "accumulated": steps}  # not 3 per step


def test_ranks_draw_their_own_dropout_masks(ranks):
    (rank0, rank1), _, _ = ranks
    assert not torch.equal(rank0["draw"], rank1["draw"])
    assert_equal_states(rank0["dropout"][0], rank1["dropout"][0])  # yet train one model


def test_rank_0_alone_writes_the_checkpoint_and_a_resumed_run_ends_like_an_uninterrupted_one(ranks):
    (rank0, rank1), out, _ = ranks
    assert sorted(p.name for p in (out / "checkpoint").iterdir()) == ["job.ckpt", "saved-by-rank0"]
    for rank in (rank0, rank1):
        assert_equal_states(rank["resumed"][0], rank0["dropout"][0])  # bitwise: gloo on CPU is deterministic
        assert scores(rank["resumed"][1]) == scores(rank0["dropout"][1])


def test_a_failing_rank_fails_the_job_instead_of_hanging_it(ranks):
    _, _, launch = ranks
    # the launch ended (within LAUNCH_LIMIT, not by rank 0's collective timeout) with rank 1's error in the log
    assert "ERROR [rank 1] training failed" in launch["log"] and "RuntimeError: rank 1 broke" in launch["log"]


def test_a_teacher_fine_tuned_in_two_processes_matches_one_process(separable, tmp_path):
    # Imported here: the worker processes of the other tests import this module, and need no transformers.
    from conftest import TEACHER_HP, TINY_BERT, finetuned

    from kdflow.teachers.finetune import evaluate_teacher, finetune

    spec = {**TINY_BERT, "architecture": {**TINY_BERT["architecture"], "hidden_dropout_prob": 0.0,
                                          "attention_probs_dropout_prob": 0.0}}
    hp = Hyperparameters(**{**TEACHER_HP, "epochs": 1, "max_train_examples": 128})  # batches of 16: 8 per rank
    alone = finetuned(separable, spec, hp, tmp_path / "alone", CPU)
    log = tmp_path / "job.log"
    run_processes(finetune, dict(task=separable, spec=spec, hp=hp, out_dir=tmp_path / "ranks"), processes=2,
                  device=CPU, log_path=str(log))
    assert [p.name for p in (tmp_path / "ranks").iterdir()] == ["model"]  # written once, by rank 0
    evaluate_teacher(separable, tmp_path / "ranks" / "model", tmp_path / "ranks", CPU)
    a, b = (pd.read_parquet(tmp_path / d / "predictions.parquet") for d in ("alone", "ranks"))
    np.testing.assert_allclose(np.stack(b.logits), np.stack(a.logits), atol=1e-4)
    text = log.read_text()
    assert text.count("evaluation at epoch 1,") == 1 and "[rank 0]" in text and "[rank 1]" not in text
    together = json.loads((tmp_path / "ranks" / "metrics.json").read_text())
    assert together["scores"]["dev"] == pytest.approx(alone["scores"]["dev"])


def test_a_teachers_gpus_go_to_its_fine_tuning_and_one_to_its_other_jobs(tmp_path):
    two_gpus = tmp_path / "two_gpus.yaml"  # merged into the demo's config
    two_gpus.write_text("teachers:\n  tiny_bert:\n    resources: {gpu: 2}\n")
    targets = [paths.PSEUDO_HEADS_METRICS.format(teacher="tiny_bert", task="sst2"),
               paths.SIGNALS.format(teacher="tiny_bert", task="sst2", transfer="train")]
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--forceall", "--configfile", "demo/config.yaml", str(two_gpus),
         "--replace-workflow-config", *targets],  # --forceall: whatever results the checkout already has
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=True,
    )
    jobs = dict(re.findall(r"\nrule (\w+):\n(?:.*\n)*?    resources: (.*)\n", result.stdout))
    assert "gpu=2" in jobs["finetune_teacher"]
    assert "gpu=1" in jobs["train_pseudo_heads"] and "gpu=1" in jobs["compute_teacher_signals"]
