"""What kdflow's training loop adds to a step, per model family: its host time, the operators it dispatches and
its host syncs per optimiser step, against a bare loop (zero_grad, loss, backward, gradient clipping, fused AdamW
step) over the same model, loss and batches.

    python benchmarks/step_overhead.py                      # the demo's tiny BERT, BiLSTM, Gated CNN and LSTM_S, KD
    python benchmarks/step_overhead.py --methods kd pkd alp --steps 64

Not a timed test: it prints figures. On CPU a tiny model's step is mostly host work (Python, dispatch, the
optimiser), so what the loop adds there is what a GPU would wait on. Each figure is per step, from two runs of N
and 2N steps (their difference over N), so that set-up, the final evaluation and the kept model's copy cancel;
times are the median over ``--repeats`` such pairs, in CPU seconds of the one thread that runs the step (torch's
intra-op threads are 1), so that other processes on a busy machine take little from them. Batches are the demo's
SST-2 excerpt (real lengths), the teacher's signals random (speed does not depend on them). Ops and syncs are counted by
:mod:`kdflow.training.step_counts` in separate runs from the timed ones.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kdflow.core.hyperparameters import Hyperparameters  # noqa: E402
from kdflow.distillation.methods.registry import Shapes, build_method  # noqa: E402
from kdflow.students.registry import StudentContext, build_student  # noqa: E402
from kdflow.students.tokens import student_tokenizer  # noqa: E402
from kdflow.teachers.finetune import build_teacher  # noqa: E402
from kdflow.training import loop  # noqa: E402
from kdflow.training.batching import batches, to_device, tokenize  # noqa: E402
from kdflow.training.step_counts import StepCounts  # noqa: E402
from kdflow.transfer.signals import TeacherSignals  # noqa: E402

TEACHER = {"architecture": dict(model_type="bert", hidden_size=64, num_hidden_layers=4, num_attention_heads=2,
                                intermediate_size=128, max_position_embeddings=128),  # the demo's teacher
           "tokenizer": str(REPO / "demo/vocab.txt")}
RANDOM = {"source": "random", "dim": 64}
FAMILIES = {  # the demo's students
    "tiny_bert": {"type": "bert_k", "layers": 2},
    "bilstm": {"type": "bilstm", "layers": 2, "hidden_size": 64, "embeddings": RANDOM},
    "gated_cnn": {"type": "gated_cnn", "layers": 2, "hidden_size": 64, "embeddings": RANDOM},
    "lstm_s": {"type": "bilstm_s", "lstm_size": 32, "fc_size": 32, "embeddings": RANDOM},
}
HP = dict(learning_rate=1e-3, batch_size=32, epochs=1, warmup_ratio=0.1, weight_decay=0.01, max_grad_norm=1.0,
          max_seq_length=64, log_every=10_000, seed=0)


def kdflow_run(model, loss_fn, split, steps: int) -> None:
    """``steps`` optimiser steps of kdflow's loop (one epoch), evaluated once at its end (a constant)."""
    hp = Hyperparameters(**HP)
    loop.train(model, loss_fn, lambda rng: batches(split, hp.batch_size, False, shuffle=True, generator=rng),
               steps * hp.batch_size, lambda model: {"score": 0.0}, "score", hp, torch.device("cpu"))


def bare_run(model, loss_fn, split, steps: int) -> None:
    """The same steps with nothing but zero_grad, the loss, backward, clipping and a fused AdamW step: the same
    computation as kdflow's step (it clips to ``max_grad_norm``, and its AdamW spares biases and norms' weights
    from decay: two parameter groups), without the loop around it."""
    optimizer = loop.build_optimizer(model.named_parameters(), Hyperparameters(**HP))  # kdflow's: the same groups
    order = batches(split, HP["batch_size"], False, shuffle=True, generator=np.random.default_rng(0))
    for _, batch in zip(range(steps), order):
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model, to_device(batch, torch.device("cpu"))).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), HP["max_grad_norm"])
        optimizer.step()


def per_step(runs: dict, fresh, steps: int, repeats: int) -> dict:
    """Per ``runs`` entry: host seconds, operators and syncs per step (from N and 2N steps). The runs' timings
    alternate, repeat by repeat, so that a machine's drifting load falls on both alike."""
    def timed(run, n: int) -> float:
        model, loss_fn, split = fresh(n)
        started = time.thread_time()
        run(model, loss_fn, split, n)
        return time.thread_time() - started

    def counted(run, n: int) -> StepCounts:
        model, loss_fn, split = fresh(n)
        with StepCounts() as counts:
            run(model, loss_fn, split, n)
        return counts

    seconds = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            seconds[name].append((timed(run, 2 * steps) - timed(run, steps)) / steps)
    figures = {}
    for name, run in runs.items():
        few, many = counted(run, steps), counted(run, 2 * steps)
        figures[name] = {"ms": 1e3 * statistics.median(seconds[name]), "ops": (many.ops - few.ops) / steps,
                         "syncs": (many.host_syncs - few.host_syncs) / steps}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--methods", nargs="+", default=["kd"])
    parser.add_argument("--steps", type=int, default=32, help="N: the runs take N and 2N steps")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    teacher, tokenizer = build_teacher(TEACHER, num_labels=2)
    frame = pd.read_csv(REPO / "demo/data/glue/SST-2/train.tsv", sep="\t", quoting=3)
    frame = pd.DataFrame({"text_a": frame["sentence"], "text_b": None, "label": frame["label"]})
    layers, hidden = teacher.config.num_hidden_layers, teacher.config.hidden_size
    print(f"{len(frame)} SST-2 sentences of the demo, batch {HP['batch_size']}, 1 thread; per optimiser step:")
    print(f"{'family':<11}{'method':<18}{'kdflow ms':>10}{'bare ms':>9}{'ratio':>7}{'kdflow ops':>12}"
          f"{'bare ops':>10}{'ratio':>7}{'kdflow syncs':>14}{'bare syncs':>12}")
    with tempfile.TemporaryDirectory() as directory:
        teacher.save_pretrained(Path(directory) / "model")
        tokenizer.save_pretrained(Path(directory) / "model")
        context = StudentContext(2, tokenizer, directory)
        for family in args.families:
            for method_name in args.methods:
                torch.manual_seed(0)
                student = build_student(FAMILIES[family], context)
                reader = student_tokenizer(student, tokenizer)
                sample = frame.sample(2 * args.steps * HP["batch_size"], replace=True, random_state=0)
                splits = {n: tokenize(sample.iloc[:n * HP["batch_size"]].reset_index(drop=True), reader,
                                      HP["max_seq_length"], labelled=True) for n in (args.steps, 2 * args.steps)}
                split = splits[2 * args.steps]
                student.eval()
                with torch.no_grad():
                    widths = tuple(h.shape[-1] for h in student(next(batches(split, 2, False))).layers)
                method = build_method(method_name, Shapes(widths, layers, hidden, 2, False))
                generator = torch.Generator().manual_seed(0)
                signals = TeacherSignals(torch.randn(len(split), 2, generator=generator),
                                         torch.randn(len(split), layers, 2, generator=generator),
                                         torch.randn(len(split), layers, hidden, generator=generator))
                template = torch.nn.ModuleDict({"student": student, "method": method}).train()

                def loss_fn(model, batch):
                    index = batch["index"]
                    cached = TeacherSignals(signals.logits[index], signals.head_logits[index],
                                            signals.layers[index])
                    return model["method"](model["student"](batch), cached, batch["labels"])["loss"]

                def fresh(steps):
                    return copy.deepcopy(template), loss_fn, splits[steps]

                figures = per_step({"kdflow": kdflow_run, "bare": bare_run}, fresh, args.steps, args.repeats)
                ours, bare = figures["kdflow"], figures["bare"]
                print(f"{family:<11}{method_name:<18}{ours['ms']:>10.2f}{bare['ms']:>9.2f}"
                      f"{ours['ms'] / bare['ms']:>7.2f}{ours['ops']:>12.0f}{bare['ops']:>10.0f}"
                      f"{ours['ops'] / bare['ops']:>7.2f}{ours['syncs']:>14.1f}{bare['syncs']:>12.1f}", flush=True)


if __name__ == "__main__":
    main()
