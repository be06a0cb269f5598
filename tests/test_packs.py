"""Packs: K students trained as one stacked computation equal each student trained alone by kdflow's optimiser
(AdamW, two parameter groups, gradient clipping) on its own batches, per family and for a method of each kind; a
planted change of one member's learning rate shows in that member alone. Trained by the one training loop, each
member leaves what the loop leaves for it alone (schedule, evaluations, kept state, divergence, resumption)."""

import copy
import math

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import DEMO_VOCAB, TINY_BERT
from torch import nn
from transformers import BertTokenizer

from kdflow.core.hyperparameters import Hyperparameters
from kdflow.distillation.methods.registry import Shapes, build_method
from kdflow.students.registry import StudentContext, build_student
from kdflow.students.tokens import student_tokenizer
from kdflow.teachers.finetune import build_teacher
from kdflow.training.batching import batches, tokenize
from kdflow.training.checkpoint import Checkpoint
from kdflow.training.loop import build_optimizer, train
from kdflow.training.packs import Pack, PackAdamW, member_gradient_norms, stacked_batches
from kdflow.training.step_counts import StepCounts
from kdflow.transfer.signals import TeacherSignals

SENTENCES = pd.DataFrame({"text_a": ["the movie was good", "a man is not a dog at all", "bad", "the cat was bad",
                                     "a great film", "not good at all", "the dog", "what a bad movie it was"],
                          "text_b": None, "label": [1, 0, 0, 0, 1, 0, 1, 0]})
RANDOM = {"source": "random", "dim": 8}
FAMILIES = {
    "bert_k": {"type": "bert_k", "layers": 2},
    "bilstm": {"type": "bilstm", "layers": 2, "hidden_size": 8, "embeddings": RANDOM, "dropout": 0.0},
    "gated_cnn": {"type": "gated_cnn", "layers": 2, "hidden_size": 8, "embeddings": RANDOM, "dropout": 0.0},
    "bilstm_s": {"type": "bilstm_s", "lstm_size": 4, "fc_size": 6, "embeddings": RANDOM, "dropout": 0.0},
}
TEACHER_LAYERS, TEACHER_WIDTH, K, STEPS = 3, 32, 3, 3
LEARNING_RATES = [1e-3, 3e-3, 5e-4]
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("teacher")
    architecture = {**TINY_BERT["architecture"], "num_hidden_layers": TEACHER_LAYERS, "hidden_dropout_prob": 0.0,
                    "attention_probs_dropout_prob": 0.0}
    model, tokenizer = build_teacher({**TINY_BERT, "architecture": architecture}, 2)
    model.save_pretrained(directory / "model")
    tokenizer.save_pretrained(directory / "model")
    return StudentContext(2, BertTokenizer(vocab=str(DEMO_VOCAB), do_lower_case=True), str(directory))


def members_and_batches(family, method_name, context):
    """K members (seeds 0..K-1), each a student and its method, and each member's own shuffled batches."""
    members = []
    for seed in range(K):
        torch.manual_seed(seed)
        student = build_student(FAMILIES[family], context)
        if family == "bert_k":
            student.model.config.hidden_dropout_prob = 0.0
            for module in student.modules():
                if isinstance(module, nn.Dropout):
                    module.p = 0.0
        split = tokenize(SENTENCES, student_tokenizer(student, context.tokenizer), 16, labelled=True)
        with torch.no_grad():
            widths = tuple(layer.shape[-1] for layer in student.eval()(next(batches(split, 2, False))).layers)
        method = build_method(method_name, Shapes(widths, TEACHER_LAYERS, TEACHER_WIDTH, 2, False))
        members.append(nn.ModuleDict({"student": student, "method": method}).train())
    orders = [list(batches(split, 4, False, shuffle=True, generator=np.random.default_rng(seed), length_buckets=2))
              for seed in range(K)]
    return members, [[order[step % len(order)] for order in orders] for step in range(STEPS)]


_generator = torch.Generator().manual_seed(7)
# the teacher's cached signals of the 8 sentences, drawn once (drawn inside vmap, each member would draw its own)
SIGNALS = TeacherSignals(torch.randn(8, 2, generator=_generator),
                         torch.randn(8, TEACHER_LAYERS, 2, generator=_generator),
                         torch.randn(8, TEACHER_LAYERS, TEACHER_WIDTH, generator=_generator))


def signals_for(index):
    return TeacherSignals(SIGNALS.logits[index], SIGNALS.head_logits[index], SIGNALS.layers[index])


def member_loss(model, batch):
    return model["method"](model["student"](batch), signals_for(batch["index"]), batch["labels"])["loss"]


def train_alone(member, member_batches, learning_rate, max_norm=1.0):
    hp = Hyperparameters(learning_rate=learning_rate, batch_size=4, epochs=1, weight_decay=0.01)
    optimizer = build_optimizer(member.named_parameters(), hp)
    for batch in member_batches:
        optimizer.zero_grad(set_to_none=True)
        member_loss(member, batch).backward()
        nn.utils.clip_grad_norm_(member.parameters(), max_norm)
        optimizer.step()
    return member.state_dict()


def train_packed(members, steps, learning_rates, max_norm=1.0):
    pack = Pack(members).train()
    optimizer = PackAdamW(pack, learning_rates, [0.01] * len(learning_rates))
    for member_batches in steps:
        optimizer.zero_grad()
        pack.map(member_loss, stacked_batches(member_batches)).sum().backward()  # members' losses are independent
        member_gradient_norms(pack, max_norm)
        optimizer.step()
    return [pack.member_state(k) for k in range(K)]


@pytest.mark.parametrize("method_name", ["kd", "pkd", "alp"])  # logits, hidden states, attention over layers
@pytest.mark.parametrize("family", FAMILIES)
def test_each_member_of_a_pack_trains_as_it_would_alone(family, method_name, context):
    members, steps = members_and_batches(family, method_name, context)
    alone = [train_alone(copy.deepcopy(member), [step[k] for step in steps], LEARNING_RATES[k])
             for k, member in enumerate(members)]
    packed = train_packed(members, steps, LEARNING_RATES)
    for k in range(K):
        moved = max((alone[k][name] - members[k].state_dict()[name]).abs().max() for name in alone[k])
        assert moved > 1e-4  # the members trained
        for name, value in alone[k].items():
            torch.testing.assert_close(packed[k][name], value, rtol=1e-4, atol=1e-6, msg=f"member {k}: {name}")


def test_a_planted_change_of_one_members_learning_rate_changes_that_member_alone(context):
    members, steps = members_and_batches("gated_cnn", "kd", context)
    reference = train_packed([copy.deepcopy(m) for m in members], steps, LEARNING_RATES)
    planted = train_packed([copy.deepcopy(m) for m in members], steps, [LEARNING_RATES[0], 2 * LEARNING_RATES[1],
                                                                        LEARNING_RATES[2]])
    differs = [any(not torch.allclose(planted[k][name], reference[k][name]) for name in reference[k])
               for k in range(K)]
    assert differs == [False, True, False]


def test_a_pack_refuses_members_of_different_shapes(context):
    torch.manual_seed(0)
    small = build_student(FAMILIES["gated_cnn"], context)
    wide = build_student({**FAMILIES["gated_cnn"], "hidden_size": 16}, context)
    with pytest.raises(ValueError, match="one architecture"):
        Pack([small, wide])


def test_the_ops_benchmark_shows_a_packs_operators_per_step_not_growing_with_its_size():
    """benchmarks/pack_ops.py for one family at K = 1 and 4: it runs, and a pack of 4 dispatches at most 10% more
    operators a step than a pack of 1 (the figures are the benchmark's to print)."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(repo / "benchmarks/pack_ops.py"), "--families", "gated_cnn", "--ks", "1",
                          "4"], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines() if line.split()[:1] == ["gated_cnn"]]
    ops = {int(row[1]): float(row[2]) for row in rows}
    assert set(ops) == {1, 4} and ops[4] <= 1.1 * ops[1], out


# The one training loop trains a pack: each member's results as the loop leaves them for the member alone.
LOOP_HP = dict(batch_size=4, epochs=2, warmup_ratio=0.25, weight_decay=0.01, length_buckets=2)


def loop_members(family, method_name, context):
    """K members (seeds 0..K-1) with a module no loss reaches beside the student and its method, the training
    split, one member's batches of it from a shuffler, and its dev batch."""
    members, _ = members_and_batches(family, method_name, context)
    for k, member in enumerate(members):
        torch.manual_seed(100 + k)
        member["unused"] = nn.Linear(3, 3)
    split = tokenize(SENTENCES, student_tokenizer(members[0]["student"], context.tokenizer), 16, labelled=True)
    dev = next(batches(split, len(SENTENCES), False))
    return members, split, lambda rng: batches(split, 4, False, shuffle=True, generator=rng, length_buckets=2), dev


def dev_score(model, batch):
    """A continuous dev score (minus the cross-entropy): no ties to break between the kept evaluations."""
    return -nn.functional.cross_entropy(model["student"](batch).logits, batch["labels"])


def pack_evaluator(dev, size):
    """A pack's evaluation: each of its ``size`` members' :func:`dev_score` on ``dev``."""
    stacked_dev = stacked_batches([dev] * size)

    def evaluate(pack):
        pack.eval()
        with torch.no_grad():
            return [{"score": score} for score in pack.map(dev_score, stacked_dev).tolist()]

    return evaluate


def train_with_the_loop(members, split, member_batches, dev, learning_rates, packed, loss=member_loss, **options):
    hps = [Hyperparameters(learning_rate=rate, seed=k, **{**LOOP_HP, **options})
           for k, rate in enumerate(learning_rates)]
    if not packed:
        def evaluate(model):
            model.eval()
            with torch.no_grad():
                return {"score": dev_score(model, dev).item()}

        return [train(member, loss, member_batches, len(split), evaluate, "score", hp, CPU)
                for member, hp in zip(members, hps)]
    return train(Pack(members), lambda pack, batch: pack.map(loss, batch), member_batches, len(split),
                 pack_evaluator(dev, len(members)), "score", hps, CPU)


def assert_same_results(packed, alone):
    for k, (mine, theirs) in enumerate(zip(packed, alone)):
        assert (mine.best_epoch, mine.best_step, mine.diverged) == (theirs.best_epoch, theirs.best_step,
                                                                    theirs.diverged), f"member {k}"
        for field in ("lr", "train_loss", "grad_norm_mean", "grad_norm_max", "dev_score"):
            np.testing.assert_allclose([r[field] for r in mine.history], [r[field] for r in theirs.history],
                                       rtol=1e-4, err_msg=f"member {k}: {field}")
        for name, value in theirs.best_state.items():
            torch.testing.assert_close(mine.best_state[name], value, rtol=1e-4, atol=1e-6, msg=f"member {k}: {name}")


@pytest.mark.parametrize("family, method_name", [("bert_k", "alp"), ("bilstm", "pkd"), ("gated_cnn", "kd")])
def test_the_training_loop_trains_a_pack_as_each_member_alone(family, method_name, context):
    """Each member of a pack trained by the one loop leaves what it leaves trained alone by it: its own data order
    (its seed's shuffler), warm-up and decay at its own rate, its gradient norms, evaluations, kept evaluation and
    state; a weight no loss reaches stays where it started, as torch's AdamW leaves it."""
    members, split, member_batches, dev = loop_members(family, method_name, context)
    alone = train_with_the_loop([copy.deepcopy(m) for m in members], split, member_batches, dev, LEARNING_RATES,
                                packed=False)
    packed = train_with_the_loop(members, split, member_batches, dev, LEARNING_RATES, packed=True)
    assert [len(r.history) for r in packed] == [2] * K
    assert_same_results(packed, alone)
    for k, member in enumerate(members):
        torch.testing.assert_close(packed[k].best_state["unused.weight"], member["unused"].weight.detach(),
                                   rtol=0, atol=0)


def test_a_member_whose_loss_turns_non_finite_stops_and_the_others_train_on(context):
    """Member 1's loss turns NaN at step 3 (of 4): it stops there with its divergence, the others finish as they
    would without it."""
    members, split, member_batches, dev = loop_members("gated_cnn", "kd", context)
    clean = train_with_the_loop([copy.deepcopy(m) for m in members], split, member_batches, dev, LEARNING_RATES,
                                packed=True)
    poison = torch.tensor([0.0, math.nan, 0.0])
    calls_by_member = [0]

    def losses(pack, batch):
        loss = pack.map(member_loss, batch)
        if pack.training:
            calls_by_member[0] += 1
            if calls_by_member[0] >= 3:
                loss = loss + poison
        return loss

    hps = [Hyperparameters(learning_rate=rate, seed=k, **LOOP_HP) for k, rate in enumerate(LEARNING_RATES)]
    evaluate = pack_evaluator(dev, K)

    results = train(Pack(members), losses, member_batches, len(split), evaluate, "score", hps, CPU)
    assert results[1].diverged == {"epoch": 2, "step": 3, "what": "training loss nan"}
    assert math.isnan(results[1].best_score) and len(results[1].history) == 1
    assert_same_results([results[0], results[2]], [clean[0], clean[2]])


def test_a_pack_refuses_members_that_would_train_differently(context):
    members, split, member_batches, dev = loop_members("gated_cnn", "kd", context)
    hps = [Hyperparameters(learning_rate=1e-3, seed=k, **{**LOOP_HP, "batch_size": 4 + k}) for k in range(K)]
    with pytest.raises(ValueError, match="differ in learning_rate, weight_decay, seed alone; these differ: batch_size"):
        train(Pack(members), member_loss, member_batches, len(split), lambda pack: [], "score", hps, CPU)


class Interrupted(Exception):
    pass


def test_a_killed_pack_resumes_from_its_checkpoint_like_an_uninterrupted_one(context, tmp_path):
    """Killed in step 4 of 4 (checkpoints every step): the rerun trains step 4 alone, on the batches the killed
    run had drawn for it (each member's shuffler restored at epoch 2's start, its first batch skipped), and leaves
    each member the uninterrupted run's results (optimiser moments and running averages restored)."""
    members, split, member_batches, dev = loop_members("bilstm", "kd", context)
    uninterrupted = train_with_the_loop([copy.deepcopy(m) for m in members], split, member_batches, dev,
                                        LEARNING_RATES, packed=True)
    hps = [Hyperparameters(learning_rate=rate, seed=k, **LOOP_HP) for k, rate in enumerate(LEARNING_RATES)]
    evaluate = pack_evaluator(dev, K)

    steps = []

    def losses(pack, batch, interrupt_at=None):
        if pack.training:
            steps.append(batch["index"])
            if len(steps) == interrupt_at:
                raise Interrupted
        return pack.map(member_loss, batch)

    def checkpoint():
        return Checkpoint(tmp_path / "pack.ckpt", "job", every_minutes=None, every_steps=1)

    with pytest.raises(Interrupted):
        train(Pack([copy.deepcopy(m) for m in members]), lambda p, b: losses(p, b, interrupt_at=4), member_batches,
              len(split), evaluate, "score", hps, CPU, checkpoint=checkpoint())
    trained_before = [index.clone() for index in steps]
    steps.clear()
    resumed = train(Pack([copy.deepcopy(m) for m in members]), losses, member_batches, len(split), evaluate, "score",
                    hps, CPU, checkpoint=checkpoint())
    assert len(steps) == 1 and torch.equal(steps[0], trained_before[3])
    assert_same_results(resumed, uninterrupted)
    assert [[r["step"] for r in result.history] for result in resumed] == [[2, 4]] * K


def test_a_packs_steps_never_wait_for_the_host(context):
    """Twice the optimiser steps (half the batch) with the same evaluations read the host no more often: a pack's
    syncs are at its evaluations and its set-up, none in its steps."""
    members, split, _, dev = loop_members("gated_cnn", "kd", context)
    evaluate = pack_evaluator(dev, K)

    def syncs(batch_size):
        hps = [Hyperparameters(learning_rate=rate, seed=k, **{**LOOP_HP, "batch_size": batch_size})
               for k, rate in enumerate(LEARNING_RATES)]
        with StepCounts() as counts:
            results = train(Pack([copy.deepcopy(m) for m in members]), lambda pack, batch: pack.map(member_loss, batch),
                            lambda rng: batches(split, batch_size, False, shuffle=True, generator=rng),
                            len(split), evaluate, "score", hps, CPU)
        return counts.syncs, results[0].history[-1]["step"]

    (few, few_steps), (many, many_steps) = syncs(4), syncs(2)
    assert (few_steps, many_steps) == (4, 8)
    assert many == few, dict(many - few)


def test_a_pack_whose_first_member_stopped_evaluates_the_others_once_at_each_epochs_end(context):
    """Evaluations every 2 steps, which are the epochs' ends: member 0 stops at step 1, and the others are evaluated
    once at steps 2 and 4 (the epoch's end sees the evaluation already made, whichever member made it)."""
    members, split, member_batches, dev = loop_members("gated_cnn", "kd", context)
    poison = torch.tensor([math.nan, 0.0, 0.0])
    hps = [Hyperparameters(learning_rate=rate, seed=k, evaluate_every_steps=2, **LOOP_HP)
           for k, rate in enumerate(LEARNING_RATES)]
    evaluate = pack_evaluator(dev, K)

    results = train(Pack(members), lambda pack, batch: pack.map(member_loss, batch) + poison, member_batches,
                    len(split), evaluate, "score", hps, CPU)
    assert results[0].diverged["step"] == 1 and results[0].history == []
    assert [[r["step"] for r in result.history] for result in results[1:]] == [[2, 4], [2, 4]]
