"""Resumable training: a run interrupted mid-epoch resumes from its checkpoint and ends exactly where an
uninterrupted run ends; checkpoints of other settings are never resumed; writes are atomic."""

import json
import os
import signal

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from kdflow.core.errors import Terminated
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.io import atomic_output, write_json
from kdflow.training.checkpoint import Checkpoint, job_fingerprint, resumable_chunks
from kdflow.training.curves import write_curves
from kdflow.training.loop import train

HP = Hyperparameters(learning_rate=1e-2, batch_size=8, epochs=3, seed=3, log_every=1000)
ACCUMULATING = Hyperparameters(**{**vars(HP), "gradient_accumulation_steps": 2, "evaluate_every_steps": 3})
X = torch.randn(60, 5, generator=torch.Generator().manual_seed(0))
Y = (X[:, 0] > 0).long()


class Interrupted(Exception):
    pass


def model() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(5, 16), nn.Dropout(0.3), nn.ReLU(), nn.Linear(16, 2))  # dropout: torch RNG


def batches(rng: np.random.Generator):
    order = rng.permutation(len(X))
    for start in range(0, len(order), HP.batch_size):
        index = order[start:start + HP.batch_size]
        yield {"x": X[index], "y": Y[index]}


def evaluate(net) -> dict:
    net.eval()
    with torch.no_grad():
        return {"accuracy": float((net(X).argmax(1) == Y).float().mean()), "loss": float(net(X).sum())}


def run(checkpoint=None, interrupt_at=None, name="train", steps=None, hp=HP):
    """Train a fresh model; ``interrupt_at`` raises at that call of the loss (an optimiser step without gradient
    accumulation), like a kill; ``steps`` records the calls."""
    net, calls = model(), [0]

    def loss_fn(net, batch):
        calls[0] += 1
        if steps is not None:
            steps.append(calls[0])
        if calls[0] == interrupt_at:
            raise Interrupted
        return nn.functional.cross_entropy(net(batch["x"]), batch["y"])

    result = train(net, loss_fn, batches, len(X), evaluate, "accuracy", hp, torch.device("cpu"),
                   checkpoint=checkpoint, run=name)
    return net, result


def scores(result):
    return [{k: v for k, v in record.items() if k != "seconds"} for record in result.history]


def assert_equal_states(a: dict, b: dict):
    """The same tensors under the same names: keys first, as zip would stop at the shorter and pair by position."""
    assert list(a) == list(b)
    for name, x in a.items():
        assert torch.equal(x, b[name]), name


def assert_same(a, b):
    (net_a, result_a), (net_b, result_b) = a, b
    assert_equal_states(net_a.state_dict(), net_b.state_dict())
    assert scores(result_a) == scores(result_b)
    assert result_a.best_epoch == result_b.best_epoch
    assert_equal_states(result_a.best_state, result_b.best_state)


@pytest.mark.parametrize("interrupt_at", [5, 8, 17])  # mid-epoch 1, right after epoch 1's end, mid-epoch 3
def test_an_interrupted_run_resumes_and_ends_bitwise_like_an_uninterrupted_one(tmp_path, interrupt_at):
    uninterrupted = run()
    path = tmp_path / "job.ckpt"
    with pytest.raises(Interrupted):
        run(Checkpoint(path, "job", every_minutes=None, every_steps=3), interrupt_at=interrupt_at)
    assert path.exists()
    saved_steps = (interrupt_at - 1) // 3 * 3  # the last multiple of 3 before the interruption
    steps = []
    resumed = run(Checkpoint(path, "job", every_minutes=None, every_steps=3), steps=steps)
    epoch_ends = [8, 16]  # 60 examples in batches of 8: 8 steps per epoch, a checkpoint after every epoch
    restart = max([saved_steps] + [end for end in epoch_ends if end < interrupt_at])
    assert len(steps) == 3 * 8 - restart  # only the steps after the checkpoint are trained again
    assert_same(resumed, uninterrupted)


def test_sigterm_saves_a_checkpoint_after_the_step_in_progress_and_the_rerun_resumes_there(tmp_path):
    """SIGTERM (SLURM's time limit, preemption or scancel) mid-step: the step finishes, a checkpoint is saved at
    once (none was due: every 100 steps) and the run stops with a message; the rerun trains only what is left and
    ends bitwise like an uninterrupted run. SIGTERM's handler is the previous one again afterwards."""
    uninterrupted = run()
    path = tmp_path / "job.ckpt"
    net, calls = model(), [0]

    def loss_fn(net, batch):
        calls[0] += 1
        if calls[0] == 10:  # step 10 of 24, in epoch 2
            os.kill(os.getpid(), signal.SIGTERM)
        return nn.functional.cross_entropy(net(batch["x"]), batch["y"])

    before = signal.getsignal(signal.SIGTERM)
    checkpoint = Checkpoint(path, "job", every_minutes=None, every_steps=100)
    with pytest.raises(Terminated, match="run train stopped by SIGTERM at epoch 2, step 10, after saving its "
                                         "checkpoint: a rerun resumes from it"):
        train(net, loss_fn, batches, len(X), evaluate, "accuracy", HP, torch.device("cpu"), checkpoint=checkpoint)
    assert signal.getsignal(signal.SIGTERM) is before
    steps = []
    resumed = run(Checkpoint(path, "job", every_minutes=None, every_steps=100), steps=steps)
    assert len(steps) == 24 - 10
    assert_same(resumed, uninterrupted)


# loss calls (two per step): step 4's 1st, step 6's 2nd, step 8's 1st (saved after step 6's evaluation), step 10's 2nd
@pytest.mark.parametrize("interrupt_at", [7, 12, 15, 20])
def test_a_run_with_accumulation_and_step_evaluations_resumes_bitwise_like_an_uninterrupted_one(tmp_path,
                                                                                               interrupt_at):
    uninterrupted = run(hp=ACCUMULATING)
    path = tmp_path / "job.ckpt"
    with pytest.raises(Interrupted):
        run(Checkpoint(path, "job", every_minutes=None, every_steps=2), interrupt_at=interrupt_at, hp=ACCUMULATING)
    steps = []
    resumed = run(Checkpoint(path, "job", every_minutes=None, every_steps=2), steps=steps, hp=ACCUMULATING)
    saved_steps = (interrupt_at - 1) // 2 // 2 * 2  # steps done, down to the last checkpoint (every 2 steps)
    assert len(steps) == 2 * (24 - saved_steps)  # resumed at an optimiser step, its micro-batches all redone
    assert_same(resumed, uninterrupted)
    assert [r["step"] for r in resumed[1].history] == [3, 6, 8, 9, 12, 15, 16, 18, 21, 24]  # each evaluation once


def test_a_resumed_run_writes_the_learning_curves_of_an_uninterrupted_one(tmp_path):
    path = tmp_path / "job.ckpt"
    with pytest.raises(Interrupted):  # in step 6: resumed from step 4, which the evaluation at step 6 averages over
        run(Checkpoint(path, "job", every_minutes=None, every_steps=2), interrupt_at=12, hp=ACCUMULATING)
    resumed = run(Checkpoint(path, "job", every_minutes=None, every_steps=2), hp=ACCUMULATING)
    for name, (_, result) in {"uninterrupted": run(hp=ACCUMULATING), "resumed": resumed}.items():
        write_curves(tmp_path / f"{name}.parquet", result.history)
    uninterrupted, resumed = (pd.read_parquet(tmp_path / f"{name}.parquet").drop(columns="seconds")
                              for name in ("uninterrupted", "resumed"))
    pd.testing.assert_frame_equal(resumed, uninterrupted, check_exact=True)
    assert {"lr", "grad_norm_mean", "grad_norm_max"} <= set(resumed.columns)


def test_a_finished_run_is_not_trained_again_and_later_runs_resume(tmp_path):
    """A student's stages: stage 1 finished, stage 2 interrupted -> stage 1 is restored, not retrained."""
    path = tmp_path / "job.ckpt"
    checkpoint = Checkpoint(path, "job", every_minutes=None, every_steps=5)
    first = run(checkpoint, name="stage1")
    with pytest.raises(Interrupted):
        run(checkpoint, name="stage2", interrupt_at=12)
    steps = []
    again = run(Checkpoint(path, "job", every_minutes=None, every_steps=5), name="stage1", steps=steps)
    assert steps == [] and scores(again[1]) == scores(first[1])
    assert_equal_states(again[0].state_dict(), first[0].state_dict())


def test_a_checkpoint_of_other_settings_is_not_resumed(tmp_path):
    path = tmp_path / "job.ckpt"
    with pytest.raises(Interrupted):
        run(Checkpoint(path, "old settings", every_minutes=None, every_steps=2), interrupt_at=10)
    steps = []
    fresh = run(Checkpoint(path, "new settings", every_minutes=None, every_steps=2), steps=steps)
    assert len(steps) == 24
    assert_same(fresh, run())


def test_checkpoints_are_written_atomically(tmp_path, monkeypatch):
    path = tmp_path / "job.ckpt"
    checkpoint = Checkpoint(path, "job", every_minutes=None)
    checkpoint.save("train", {"finished": True, "value": torch.ones(3)})

    def torn_save(obj, target):
        with open(target, "wb") as f:
            f.write(b"half a checkp")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", torn_save)
    with pytest.raises(OSError):
        checkpoint.save("train", {"finished": True, "value": torch.zeros(3)})
    monkeypatch.undo()
    assert torch.equal(Checkpoint(path, "job").load("train")["value"], torch.ones(3))


def test_the_job_fingerprint_follows_params_and_inputs(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.parquet").write_text("a")
    base = job_fingerprint({"settings": {"lr": 1e-3}, "code": "abc"}, [str(data)])
    assert base == job_fingerprint({"code": "abc", "settings": {"lr": 1e-3}}, [str(data)])
    assert base != job_fingerprint({"settings": {"lr": 2e-3}, "code": "abc"}, [str(data)])
    assert base != job_fingerprint({"settings": {"lr": 1e-3}, "code": "abd"}, [str(data)])
    (data / "train.parquet").write_text("ab")  # a retrained input
    assert base != job_fingerprint({"settings": {"lr": 1e-3}, "code": "abc"}, [str(data)])


def test_outputs_are_replaced_whole_or_not_at_all(tmp_path):
    metrics = tmp_path / "run" / "metrics.json"
    write_json(metrics, {"score": 1})
    with pytest.raises(RuntimeError):
        with atomic_output(metrics) as temporary:
            temporary.write_text('{"sco')  # killed mid-write
            raise RuntimeError
    assert json.loads(metrics.read_text()) == {"score": 1}
    model = tmp_path / "run" / "model"
    for version in ("old", "new"):
        with atomic_output(model) as temporary:
            temporary.mkdir()
            (temporary / "weights").write_text(version)
    assert (model / "weights").read_text() == "new"
    assert sorted(p.name for p in metrics.parent.iterdir()) == ["metrics.json", "model"]  # no temporaries left


def test_chunked_work_resumes_after_the_chunks_saved(tmp_path):
    """Teacher labelling and sampling shards: chunks done before the last save are not redone."""
    calls = []

    def work(index, chunk):
        calls.append(index)
        if calls == [0, 1, 2, 3]:  # the first pass is killed in chunk 3, before its save
            raise Interrupted
        return [2 * x for x in chunk]

    chunks = [[i, i + 1] for i in range(6)]
    path = tmp_path / "job.ckpt"
    with pytest.raises(Interrupted):
        resumable_chunks(chunks, work, Checkpoint(path, "job", every_minutes=None, every_steps=2))
    calls.clear()
    results = resumable_chunks(chunks, work, Checkpoint(path, "job", every_minutes=None, every_steps=2))
    assert results == [[2 * i, 2 * i + 2] for i in range(6)]
    assert calls == [2, 3, 4, 5]  # saved after chunks 0-1
