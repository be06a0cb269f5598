"""Learning curves: the table every training job writes beside its metrics, and the optional TensorBoard events."""

import os
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from kdflow.core.hyperparameters import Hyperparameters
from kdflow.training.checkpoint import Checkpoint
from kdflow.training.curves import TENSORBOARD_DIR, tensorboard_for_job, write_curves
from kdflow.training.loop import train

X = torch.randn(60, 5, generator=torch.Generator().manual_seed(0))
Y = (X[:, 0] > 0).long()
# 8 steps per epoch, 16 in all: 4 of warm-up, then linear decay; evaluations every 3 steps and at epoch ends
HP = Hyperparameters(learning_rate=1e-2, batch_size=8, epochs=2, seed=3, log_every=1000, evaluate_every_steps=3,
                     warmup_ratio=0.25)


def batches(rng: np.random.Generator):
    order = rng.permutation(len(X))
    for start in range(0, len(order), HP.batch_size):
        index = order[start:start + HP.batch_size]
        yield {"x": X[index], "y": Y[index]}


@torch.no_grad()
def accuracy(net) -> dict:
    net.eval()
    return {"accuracy": float((net(X).argmax(1) == Y).float().mean())}


class Interrupted(Exception):
    pass


def fit(checkpoint=None, interrupt_at=None):
    """A fresh model's run; ``interrupt_at`` raises at that optimiser step, like a kill."""
    torch.manual_seed(1)
    net, steps = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 2)), [0]

    def loss_fn(net, batch):
        steps[0] += 1
        if steps[0] == interrupt_at:
            raise Interrupted
        return nn.functional.cross_entropy(net(batch["x"]), batch["y"])

    return train(net, loss_fn, batches, len(X), accuracy, "accuracy", HP, torch.device("cpu"), checkpoint=checkpoint)


def test_a_run_writes_one_row_per_evaluation_with_its_learning_rate_and_gradient_norms(tmp_path):
    result = fit()
    write_curves(tmp_path / "curves.parquet", result.history)
    curves = pd.read_parquet(tmp_path / "curves.parquet")
    assert list(curves.columns) == ["epoch", "step", "lr", "grad_norm_mean", "grad_norm_max", "skipped_steps",
                                    "train_loss", "seconds", "dev_accuracy"]
    assert curves.to_dict("records") == result.history
    assert curves.step.tolist() == [3, 6, 8, 9, 12, 15, 16] and curves.epoch.tolist() == [1, 1, 1, 2, 2, 2, 2]
    factors = [3 / 4, 11 / 12, 9 / 12, 8 / 12, 5 / 12, 2 / 12, 1 / 12]  # the schedule's, at each evaluation's step
    assert curves.lr.tolist() == pytest.approx([HP.learning_rate * factor for factor in factors])
    assert (curves.grad_norm_mean > 0).all() and np.isfinite(curves.grad_norm_max).all()
    assert (curves.grad_norm_mean <= curves.grad_norm_max).all()
    assert (curves.skipped_steps == 0).all()  # float32: no gradient scaler skips a step


def test_tensorboard_is_named_after_the_job_and_off_unless_the_config_turns_it_on(monkeypatch):
    # set, then deleted: monkeypatch records the variable and removes what tensorboard_for_job sets, which would
    # otherwise reach every later workflow run of the session and send all its jobs' events to one directory
    monkeypatch.setenv(TENSORBOARD_DIR, "unset by this test")
    monkeypatch.delenv(TENSORBOARD_DIR)
    job = SimpleNamespace(config={"tensorboard": False}, log=["logs/finetune_teacher/bert_base/sst2.log"])
    tensorboard_for_job(job)
    assert TENSORBOARD_DIR not in os.environ
    job.config["tensorboard"] = True
    tensorboard_for_job(job)
    assert os.environ[TENSORBOARD_DIR] == "logs/tensorboard/finetune_teacher/bert_base/sst2"


def test_tensorboard_events_follow_the_evaluations_and_a_resumed_run_logs_each_once(tmp_path, monkeypatch):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    uninterrupted = fit()
    monkeypatch.setenv(TENSORBOARD_DIR, str(tmp_path / "events"))
    checkpoint = tmp_path / "job.ckpt"
    with pytest.raises(Interrupted):  # at step 8: saved at step 4, evaluated (and logged) at step 6 since
        fit(Checkpoint(checkpoint, "job", every_minutes=None, every_steps=4), interrupt_at=8)
    fit(Checkpoint(checkpoint, "job", every_minutes=None, every_steps=4))
    events = event_accumulator.EventAccumulator(str(tmp_path / "events/train"))
    events.Reload()
    for name in ["lr", "grad_norm_max", "train_loss", "dev_accuracy", "epoch"]:
        logged = events.Scalars(name)
        assert [event.step for event in logged] == [record["step"] for record in uninterrupted.history], name
        assert [event.value for event in logged] == pytest.approx([record[name] for record in uninterrupted.history])
