"""The training loop's options: optimisers and their settings, the learning-rate schedule, gradient accumulation,
evaluation every N optimiser steps, what each evaluation records and which model is kept (best dev or final)."""

import copy
import math

import numpy as np
import pytest
import torch
from torch import nn

from kdflow.core.hyperparameters import Hyperparameters
from kdflow.training import loop as loop_module
from kdflow.training.loop import build_optimizer, lr_schedule, train

CPU = torch.device("cpu")
X = torch.randn(60, 5, generator=torch.Generator().manual_seed(0))
Y = (X[:, 0] > 0).long()
BASE = dict(learning_rate=1e-2, batch_size=8, epochs=2, seed=3, log_every=1000)  # 8 steps per epoch, last batch 4


def batches(rng: np.random.Generator):
    order = rng.permutation(len(X))
    for start in range(0, len(order), BASE["batch_size"]):
        index = order[start:start + BASE["batch_size"]]
        yield {"x": X[index], "y": Y[index]}


def loss_fn(net, batch):
    assert net.training  # back in train mode after every evaluation
    return nn.functional.cross_entropy(net(batch["x"]), batch["y"])


def fit(evaluate=None, **options):
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 2))
    evaluate = evaluate or (lambda net: {"score": 0.0})
    return net, train(net, loss_fn, batches, len(X), evaluate, "score", Hyperparameters(**{**BASE, **options}), CPU)


def rates(decay: str) -> list[float]:
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule = lr_schedule(optimizer, total_steps=10, warmup_ratio=0.2, decay=decay)
    seen = []
    for _ in range(10):
        seen.append(schedule.get_last_lr()[0])
        optimizer.step()
        schedule.step()
    return seen


def test_warmup_then_linear_decay_or_constant_learning_rate():
    assert rates("linear") == pytest.approx([0.5, 1.0, 1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125])
    assert rates("none") == pytest.approx([0.5, 1.0] + [1.0] * 8)


def test_weight_decay_spares_biases_and_layer_norms_unless_it_applies_to_all():
    model = nn.Sequential(nn.Linear(3, 3), nn.LayerNorm(3))
    hp = Hyperparameters(learning_rate=1e-3, batch_size=8, epochs=1, weight_decay=0.01)
    decay, no_decay = build_optimizer(model.named_parameters(), hp).param_groups
    assert [p.shape for p in decay["params"]] == [torch.Size([3, 3])] and decay["weight_decay"] == 0.01
    assert len(no_decay["params"]) == 3 and no_decay["weight_decay"] == 0.0
    hp.weight_decay_all = True  # the thesis's LSTM_S
    decay, no_decay = build_optimizer(model.named_parameters(), hp).param_groups
    assert len(decay["params"]) == 4 and not no_decay["params"]


def test_optimizer_settings_reach_torch_and_default_to_torchs():
    params = list(nn.Linear(2, 2).named_parameters())
    default = build_optimizer(params, Hyperparameters(learning_rate=1e-3, batch_size=8, epochs=1))
    assert isinstance(default, torch.optim.AdamW)
    assert default.param_groups[0]["betas"] == (0.9, 0.999) and default.param_groups[0]["eps"] == 1e-8
    adam = build_optimizer(params, Hyperparameters(learning_rate=5e-4, batch_size=8, epochs=1, optimizer="adam",
                                                   betas=[0.9, 0.98], eps=1e-6))
    assert type(adam) is torch.optim.Adam
    assert adam.param_groups[0]["betas"] == (0.9, 0.98) and adam.param_groups[0]["eps"] == 1e-6
    adadelta = build_optimizer(params, Hyperparameters(learning_rate=1.0, batch_size=8, epochs=1,
                                                       optimizer="adadelta", rho=0.95))
    assert type(adadelta) is torch.optim.Adadelta and adadelta.param_groups[0]["rho"] == 0.95


def test_options_an_optimizer_lacks_are_rejected():
    with pytest.raises(ValueError, match="adadelta takes no betas"):
        Hyperparameters(learning_rate=1.0, batch_size=8, epochs=1, optimizer="adadelta", betas=[0.9, 0.98])
    with pytest.raises(ValueError, match="adamw takes no rho"):
        Hyperparameters(learning_rate=1.0, batch_size=8, epochs=1, rho=0.95)
    with pytest.raises(ValueError, match="keep 'last'"):
        Hyperparameters(learning_rate=1.0, batch_size=8, epochs=1, keep="last")


def test_one_adadelta_step_is_torchs():
    net = nn.Linear(5, 2)
    by_hand = copy.deepcopy(net)
    batch = {"x": X[:8], "y": Y[:8]}
    hp = Hyperparameters(learning_rate=1.0, batch_size=8, epochs=1, optimizer="adadelta", rho=0.95,
                         weight_decay=0.0, max_grad_norm=None, warmup_ratio=0.0)
    train(net, loss_fn, lambda rng: [batch], 8, lambda net: {"score": 0.0}, "score", hp, CPU)
    optimizer = torch.optim.Adadelta(by_hand.parameters(), lr=1.0, rho=0.95)
    loss_fn(by_hand, batch).backward()
    optimizer.step()
    assert not torch.equal(net.weight, nn.Linear(5, 2).weight)
    for trained, expected in zip(net.parameters(), by_hand.parameters()):
        torch.testing.assert_close(trained, expected, atol=0, rtol=0)


@pytest.mark.parametrize("micro_batches", [2, 3, 8])  # 8 rows as 4+4, 3+3+2, 1 x 8 (the last batch's 4 rows: 1 x 4)
def test_gradient_accumulation_equals_one_big_batch(micro_batches):
    net, result = fit()
    accumulated, accumulated_result = fit(gradient_accumulation_steps=micro_batches)
    for name, value in net.state_dict().items():
        torch.testing.assert_close(accumulated.state_dict()[name], value, atol=1e-6, rtol=0)
    assert [r["step"] for r in accumulated_result.history] == [8, 16]  # optimiser steps, not micro-batches
    assert [r["train_loss"] for r in accumulated_result.history] == pytest.approx(
        [r["train_loss"] for r in result.history], abs=1e-6)


class CraftedDev:
    """Dev scores from a list, one per evaluation, remembering the weights each was given."""

    def __init__(self, scores):
        self.scores, self.weights = iter(scores), []

    def __call__(self, net):
        net.eval()
        self.weights.append(copy.deepcopy(net.state_dict()))
        return {"score": next(self.scores)}


def test_evaluation_every_n_steps_and_at_epoch_ends_keeps_the_best():
    dev = CraftedDev([0.1, 0.5, 0.3, 0.9, 0.2, 0.9, 0.4])
    _, result = fit(dev, evaluate_every_steps=3)
    assert [(r["epoch"], r["step"]) for r in result.history] == [(1, 3), (1, 6), (1, 8), (2, 9), (2, 12), (2, 15),
                                                                 (2, 16)]
    assert (result.best_epoch, result.best_step, result.best_score) == (2, 9, 0.9)  # the earlier of a tie
    for name, value in dev.weights[3].items():
        assert torch.equal(result.best_state[name], value), name
    _, once = fit(CraftedDev([0.1] * 4), evaluate_every_steps=4)  # step 8 ends epoch 1: one evaluation there
    assert [r["step"] for r in once.history] == [4, 8, 12, 16]


def test_keep_final_returns_the_final_model_and_its_scores():
    net, result = fit(CraftedDev([0.9, 0.1, 0.5, 0.3]), evaluate_every_steps=6, keep="final")
    assert [r["step"] for r in result.history] == [6, 8, 12, 16]
    assert (result.best_epoch, result.best_step, result.best_score) == (2, 16, 0.3)  # not the better 0.9
    for name, value in net.state_dict().items():
        assert torch.equal(result.best_state[name], value), name


def test_each_evaluation_records_the_learning_rate_of_its_step_and_the_gradient_norms_before_clipping():
    _, result = fit(evaluate_every_steps=3, warmup_ratio=0.25, max_grad_norm=1e-3)  # 16 steps: 4 warm-up, 12 decay
    assert [r["step"] for r in result.history] == [3, 6, 8, 9, 12, 15, 16]
    factors = [3 / 4, 11 / 12, 9 / 12, 8 / 12, 5 / 12, 2 / 12, 1 / 12]  # of the step's learning rate, 0-based step-1
    assert [r["lr"] for r in result.history] == pytest.approx([1e-2 * factor for factor in factors])
    for record in result.history:
        assert 1e-3 < record["grad_norm_mean"] <= record["grad_norm_max"] < math.inf  # measured before clipping


@pytest.mark.parametrize("max_grad_norm", [1e-3, None])
def test_the_gradient_norm_is_the_whole_gradients_with_or_without_clipping(max_grad_norm):
    net = nn.Linear(5, 2)
    by_hand = copy.deepcopy(net)
    batch = {"x": X[:8], "y": Y[:8]}
    hp = Hyperparameters(learning_rate=1.0, batch_size=8, epochs=1, max_grad_norm=max_grad_norm)
    result = train(net, loss_fn, lambda rng: [batch], 8, lambda net: {"score": 0.0}, "score", hp, CPU)
    loss_fn(by_hand, batch).backward()
    norm = torch.cat([p.grad.flatten() for p in by_hand.parameters()]).norm().item()
    (record,) = result.history
    assert record["grad_norm_mean"] == record["grad_norm_max"] == pytest.approx(norm, rel=1e-6)


@pytest.mark.parametrize("optimizer", ["adamw", "adam"])
def test_the_fused_optimiser_trains_as_the_unfused_one(monkeypatch, optimizer):
    """The fused kernel (a few ops a step instead of several per parameter) computes the same update: the same loss
    history and weights as torch's foreach implementation, up to float rounding."""
    options = dict(optimizer=optimizer, weight_decay=0.01, epochs=3, evaluate_every_steps=2, log_every=3)
    fused_net, fused = fit(**options)
    assert build_optimizer(fused_net.named_parameters(), Hyperparameters(**{**BASE, **options})).defaults["fused"]
    monkeypatch.setattr(loop_module, "FUSED", set())
    unfused_net, unfused = fit(**options)
    assert [r["step"] for r in fused.history] == [r["step"] for r in unfused.history]
    for ours, theirs in zip(fused.history, unfused.history):
        for key in ("train_loss", "grad_norm_mean", "grad_norm_max", "lr"):
            assert ours[key] == pytest.approx(theirs[key], rel=1e-5, abs=1e-7), key
    for ours, theirs in zip(fused_net.parameters(), unfused_net.parameters()):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def test_a_divergence_is_found_at_the_next_logging_point_and_names_its_own_step(monkeypatch):
    """The loop reads losses back every log_every steps, not every step: a NaN at step 5 stops the run at step 6
    (log_every 3), and the divergence names step 5."""
    calls = iter(range(1, 100))

    def turning_nan(net, batch):
        return (float("nan") if next(calls) == 5 else 1.0) * loss_fn(net, batch)

    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 2))
    result = train(net, turning_nan, batches, len(X), lambda net: {"score": 0.0}, "score",
                   Hyperparameters(**{**BASE, "log_every": 3}), CPU)
    assert result.diverged == {"epoch": 1, "step": 5, "what": "training loss nan"}
    assert next(calls) == 7  # steps 1-6 ran: 6 is the logging point that read step 5's loss


def test_the_step_overhead_benchmark_counts_no_sync_in_kdflows_step():
    """benchmarks/step_overhead.py, in a few steps: it runs, and kdflow's step shows 0 host syncs and the bare
    loop's operators within 10% (the figures themselves are the benchmark's to print, not a test's to assert)."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(repo / "benchmarks/step_overhead.py"), "--families", "gated_cnn",
                          "--steps", "2", "--repeats", "1"], capture_output=True, text=True, check=True).stdout
    row = next(line.split() for line in out.splitlines() if line.startswith("gated_cnn"))
    ours_ops, bare_ops, ours_syncs = float(row[5]), float(row[6]), float(row[8])
    assert ours_syncs == 0 and ours_ops <= 1.1 * bare_ops, out


def test_the_step_is_compiled_as_cuda_graphs_on_a_gpu_only_and_only_when_the_config_asks():
    from kdflow.training.loop import EAGER, StepCompiler, step_compiler

    assert step_compiler(True, torch.device("cuda")) == StepCompiler("reduce-overhead", "inductor")
    assert step_compiler(False, torch.device("cuda")) == EAGER
    assert step_compiler(True, CPU) == EAGER
    step = lambda x: x * 2  # noqa: E731
    assert EAGER(step) is step  # eager is the function itself, not a wrapper around it
