"""Packs: K students trained as one stacked computation equal each student trained alone by kdflow's optimiser
(AdamW, two parameter groups, gradient clipping) on its own batches, per family and for a method of each kind; a
planted change of one member's learning rate shows in that member alone."""

import copy

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
from kdflow.training.loop import build_optimizer
from kdflow.training.packs import Pack, PackAdamW, member_gradient_norms, stacked_batches
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
    optimizer = PackAdamW(pack)
    optimizer.lr.copy_(torch.tensor(learning_rates))
    optimizer.weight_decay.fill_(0.01)
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
