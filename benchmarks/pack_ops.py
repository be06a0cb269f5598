"""What a pack of K students costs in operators per training step, against K students trained one after another
(issue 66): on a GPU each operator is at least one kernel launch, so the ops per step of a pack are what its host
work, and so a small student's step time, grow with.

    python benchmarks/pack_ops.py                  # the demo's families, K = 1, 4, 16, KD
    python benchmarks/pack_ops.py --ks 1 2 4 8 16 32 --families gated_cnn

Not a timed test: it prints figures. A step is a pack's whole step (kdflow.training.packs: the members' forward
passes and KD losses under vmap, backward, per-member clipping and PackAdamW), counted by
kdflow.training.step_counts on CPU; the K-alone column is K times one student's step under kdflow's fused AdamW.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from step_overhead import FAMILIES, TEACHER  # noqa: E402

from kdflow.core.hyperparameters import Hyperparameters  # noqa: E402
from kdflow.distillation.methods.registry import Shapes, build_method  # noqa: E402
from kdflow.students.registry import StudentContext, build_student  # noqa: E402
from kdflow.students.tokens import student_tokenizer  # noqa: E402
from kdflow.teachers.finetune import build_teacher  # noqa: E402
from kdflow.training.batching import batches, tokenize  # noqa: E402
from kdflow.training.loop import build_optimizer  # noqa: E402
from kdflow.training.packs import Pack, PackAdamW, member_gradient_norms, stacked_batches  # noqa: E402
from kdflow.training.step_counts import StepCounts  # noqa: E402
from kdflow.transfer.signals import TeacherSignals  # noqa: E402

BATCH, STEPS = 32, 3


def measure(family: str, ks: list[int], context: StudentContext, tokenizer, frame: pd.DataFrame) -> list[dict]:
    torch.manual_seed(0)
    student = build_student(FAMILIES[family], context)
    split = tokenize(frame, student_tokenizer(student, tokenizer), 64, labelled=True)
    data = list(batches(split, BATCH, False, shuffle=True, generator=np.random.default_rng(0), length_buckets=8))
    data = [batch for batch in data if len(batch["index"]) == BATCH][:STEPS]
    with torch.no_grad():
        widths = tuple(layer.shape[-1] for layer in student.eval()(data[0]).layers)
    logits = torch.randn(len(split), 2)

    def loss(model, batch):
        return model["method"](model["student"](batch), TeacherSignals(logits[batch["index"]]), batch["labels"])["loss"]

    def member(seed: int) -> nn.ModuleDict:
        torch.manual_seed(seed)
        return nn.ModuleDict({"student": build_student(FAMILIES[family], context),
                              "method": build_method("kd", Shapes(widths, 1, 1, 2, False))}).train()

    alone = member(0)
    optimizer = build_optimizer(alone.named_parameters(), Hyperparameters(learning_rate=1e-3, batch_size=BATCH, epochs=1))
    with StepCounts() as counts:
        for batch in data:
            optimizer.zero_grad(set_to_none=True)
            loss(alone, batch).backward()
            nn.utils.clip_grad_norm_(alone.parameters(), 1.0)
            optimizer.step()
    one = counts.ops / len(data)
    rows = []
    for k in ks:
        pack = Pack([member(seed) for seed in range(k)]).train()
        pack_optimizer = PackAdamW(pack, [1e-3] * k, [0.01] * k)
        stacked = [stacked_batches([batch] * k) for batch in data]
        with StepCounts() as counts:
            for batch in stacked:
                pack_optimizer.zero_grad()
                pack.map(loss, batch).sum().backward()
                member_gradient_norms(pack, 1.0)
                pack_optimizer.step()
        rows.append({"family": family, "K": k, "pack ops": counts.ops / len(stacked), "K alone ops": k * one,
                     "syncs": counts.host_syncs / len(stacked)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--ks", nargs="+", type=int, default=[1, 4, 16])
    args = parser.parse_args()
    torch.set_num_threads(1)
    teacher, tokenizer = build_teacher(TEACHER, num_labels=2)
    frame = pd.read_csv(REPO / "demo/data/glue/SST-2/train.tsv", sep="\t", quoting=3)
    frame = pd.DataFrame({"text_a": frame["sentence"], "text_b": None, "label": frame["label"]})
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        teacher.save_pretrained(Path(directory) / "model")
        tokenizer.save_pretrained(Path(directory) / "model")
        context = StudentContext(2, tokenizer, directory)
        for family in args.families:
            rows += measure(family, args.ks, context, tokenizer, frame)
    table = pd.DataFrame(rows)
    first = table.groupby("family")["pack ops"].transform("first")
    table["growth from K=1"] = table["pack ops"] / first
    print(f"ops per optimiser step, batch {BATCH} of the demo's SST-2 per member, KD:")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.2f}"))


if __name__ == "__main__":
    main()
