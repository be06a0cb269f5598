"""Student-training throughput: kdflow's cached teacher signals with dynamic padding, against a straightforward
loop that runs the frozen teacher on every step and pads every batch to 128 tokens, side by side per method.

    python benchmarks/distill_throughput.py                       # MiniLM-sized teacher, 2-layer student, CPU
    python benchmarks/distill_throughput.py --teacher-size base --device cuda --precision fp32 bf16

Both loops train the same student with the same method, optimiser and batches (random initialisation: speed
does not depend on the weights). Sentences are the SST-2 excerpt the demo ships, so lengths are real ones.
The one-off cost of computing the cached signals is printed separately; it is paid once per teacher and task
and shared by every student job of the grid. Each ``--precision`` (kdflow.core.precision: autocast with float32
weights, fp16 with a gradient scaler, TF32 for the float32 matmuls left on Ampere and newer) is measured in turn
in the same process, signals included, as the jobs run them; the speed-ups of a mixed precision over the first
one listed are printed last. bf16 and fp16 speed on a CPU says nothing about a GPU's.
"""

from __future__ import annotations

import argparse
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
from kdflow.core.precision import PRECISIONS, resolve_precision  # noqa: E402
from kdflow.distillation.methods.registry import Shapes, build_method  # noqa: E402
from kdflow.students.registry import StudentContext, build_student  # noqa: E402
from kdflow.teachers.finetune import build_teacher  # noqa: E402
from kdflow.teachers.pseudo_heads import LayerHeads, teacher_outputs  # noqa: E402
from kdflow.training.batching import batches, to_device, tokenize  # noqa: E402
from kdflow.training.loop import build_optimizer  # noqa: E402
from kdflow.transfer.signals import TeacherSignals  # noqa: E402

SIZES = {  # (layers, hidden, heads, intermediate)
    "tiny": (4, 128, 2, 512),
    "minilm": (6, 384, 12, 1536),
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}
PAD_TO = 128


def padded(batch: dict, length: int) -> dict:
    """The batch right-padded to ``length`` tokens, as a fixed-length pipeline feeds it."""
    extra = length - batch["input_ids"].shape[1]
    pad = lambda t: torch.nn.functional.pad(t, (0, extra))  # noqa: E731 (pad id and mask value are 0)
    return {**batch, **{k: pad(batch[k]) for k in ("input_ids", "attention_mask", "token_type_ids")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teacher-size", choices=SIZES, default="minilm")
    parser.add_argument("--student-layers", type=int, default=2)
    parser.add_argument("--methods", nargs="+", default=["kd", "pkd", "alp", "universal_kd_il", "universal_kd_ca"])
    parser.add_argument("--examples", type=int, default=1024, help="training examples per measurement")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", nargs="+", choices=PRECISIONS, default=["fp32"],
                        help="one or more, measured side by side (auto: what a job on this device resolves to)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)

    layers, hidden, heads, intermediate = SIZES[args.teacher_size]
    spec = {
        "architecture": dict(model_type="bert", num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                             intermediate_size=intermediate, max_position_embeddings=512),
        "tokenizer": str(REPO / "demo/vocab.txt"),
    }
    teacher, tokenizer = build_teacher(spec, num_labels=2)
    teacher = teacher.to(device).eval().requires_grad_(False)
    pseudo_heads = LayerHeads(layers, hidden, 2).to(device)
    frame = pd.read_csv(REPO / "demo/data/glue/SST-2/train.tsv", sep="\t", quoting=3)
    frame = pd.DataFrame({"text_a": frame["sentence"], "text_b": None, "label": frame["label"]})
    frame = frame.sample(args.examples, replace=True, random_state=0).reset_index(drop=True)
    split = tokenize(frame, tokenizer, PAD_TO, labelled=True)
    lengths = np.array([len(ids) for ids in split.input_ids])
    print(f"teacher {args.teacher_size} ({layers}x{hidden}), student bert_k k={args.student_layers}, "
          f"{args.examples} examples of {lengths.mean():.1f} tokens on average (max {lengths.max()}), "
          f"batch {args.batch_size}, device {device}, {torch.get_num_threads()} threads")

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    precisions = [resolve_precision(name, device) for name in args.precision]
    signal_rates, rates = {}, {}  # rates[(method, precision)] = (cached, online) examples/s
    with tempfile.TemporaryDirectory() as directory:
        teacher.save_pretrained(Path(directory) / "model")
        tokenizer.save_pretrained(Path(directory) / "model")
        context = StudentContext(2, tokenizer, directory)
        for precision in precisions:
            # The cache: one teacher pass over the transfer set, in the precision (kdflow.transfer.labelling does
            # this once per teacher and task), stored in the signals file's dtypes.
            sync()
            started = time.perf_counter()
            cached = {"logits": [], "head_logits": [], "layers": []}
            for batch in batches(split, 256, regression=False):
                with precision.autocast():
                    logits, pooled = teacher_outputs(teacher, to_device(batch, device), "cls")
                    head_logits = pseudo_heads(pooled)
                cached["logits"].append(logits.float())
                cached["head_logits"].append(head_logits.detach().float())
                cached["layers"].append(pooled.half())
            cache = {name: torch.cat(parts) for name, parts in cached.items()}
            sync()
            signal_rates[precision.name] = args.examples / (time.perf_counter() - started)
            tf32 = " (TF32 for the float32 matmuls left)" if precision.tf32 else ""
            print(f"\n{precision.name}{tf32}: signals once: {args.examples / signal_rates[precision.name]:.2f} s "
                  f"({signal_rates[precision.name]:.0f} examples/s)")
            print(f"{'method':<22}{'cached + dynamic':>18}{'teacher + pad 128':>20}{'speed-up':>10}")
            for name in args.methods:
                measured = tuple(train_rate(name, online, precision, context, split, teacher, pseudo_heads, cache,
                                            layers, hidden, args, device, sync) for online in (False, True))
                rates[name, precision.name] = measured
                print(f"{name:<22}{measured[0]:>14.0f} ex/s{measured[1]:>16.0f} ex/s{measured[0] / measured[1]:>9.1f}x")
    reference = precisions[0].name
    for precision in precisions[1:]:
        print(f"\n{precision.name} over {reference} (examples/s ratio): signals "
              f"{signal_rates[precision.name] / signal_rates[reference]:.2f}x")
        for name in args.methods:
            (cached, online), (cached_ref, online_ref) = rates[name, precision.name], rates[name, reference]
            print(f"{name:<22}cached + dynamic {cached / cached_ref:.2f}x, "
                  f"teacher + pad 128 {online / online_ref:.2f}x")


def train_rate(name, online, precision, context, split, teacher, pseudo_heads, cache, layers, hidden, args, device,
               sync) -> float:
    """Examples per second of a student trained with method ``name``, from the cache or with the teacher online,
    as the training loop runs a step in ``precision``: forward in autocast, backward (fp16: scaled) outside."""
    torch.manual_seed(0)
    student = build_student({"type": "bert_k", "layers": args.student_layers}, context).to(device)
    widths = tuple(h.shape[-1] for h in student(to_device(padded(next(batches(split, 2, False)), 8), device)).layers)
    method = build_method(name, Shapes(widths, layers, hidden, 2, False)).to(device)
    model = torch.nn.ModuleDict({"student": student, "method": method}).train()
    optimizer = build_optimizer(model.named_parameters(), Hyperparameters(learning_rate=5e-5, batch_size=32, epochs=1))
    scaler = precision.grad_scaler()
    rng = np.random.default_rng(0)
    steps = 0
    for i, batch in enumerate(batches(split, args.batch_size, False, shuffle=True, generator=rng)):
        if i == 2:  # two warm-up steps, then measure
            sync()
            started, steps = time.perf_counter(), 0
        batch = to_device(padded(batch, PAD_TO) if online else batch, device)
        with precision.autocast():
            if online:
                with torch.no_grad():
                    logits, pooled = teacher_outputs(teacher, batch, "cls")
                    signals = TeacherSignals(logits.float(), pseudo_heads(pooled).float(), pooled.float())
            else:
                index = batch["index"]
                signals = TeacherSignals(cache["logits"][index], cache["head_logits"][index],
                                         cache["layers"][index].float())
            loss = method(student(batch), signals, batch["labels"])["loss"].float()
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        steps += len(batch["labels"])
    sync()
    return steps / (time.perf_counter() - started)

if __name__ == "__main__":
    main()
