"""The GPU check's packs part (issue 66): what K students of one shape trained as one pack (kdflow.training.packs)
deliver together, K = 1 to 32, per packable family at SST-2's real lengths.

    python benchmarks/gpu_pack_curve.py --device cuda --out DIR         # on the GPU: DIR/packs.csv
    python benchmarks/gpu_pack_curve.py --device cpu --tiny --out DIR   # the same code on the CPU (a test)

A pack's step is the training loop's (kdflow.training.loop.train with a Pack): zero_grad, the K members' KD losses
through ``Pack.map`` under the precision's autocast, backward of their sum, each member's gradient clipped to 1.0
and PackAdamW. Each member has its own weights (its seed's) and its own batches of SST-2's dev sentences (its own
shuffled order in kdflow's length buckets, a step's K batches padded to the longest), batch 32 as the papers'. The
families and their sizes are the step part's (benchmarks/gpu_step.py). Per row:
- ``ms``: the median step over ``--steps`` steps after a warm-up (CUDA events; the thread's CPU time on a CPU);
- ``examples_per_s``: K x 32 examples over it, and ``speedup``: over K = 1 of the same family in the same run (a
  ratio measured side by side); the sharing part (benchmarks/gpu_sharing.py) measures K processes taking turns;
- ``peak_mb``: the most GPU memory allocated during the steps (none on a CPU).
:func:`recommend` names each family's pack size: the smallest K within 5% of its best throughput.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

import gpu_step  # noqa: E402
from kdflow.core.precision import resolve_precision  # noqa: E402
from kdflow.students.registry import StudentContext, build_student  # noqa: E402
from kdflow.students.tokens import student_tokenizer  # noqa: E402
from kdflow.teachers.finetune import build_teacher  # noqa: E402
from kdflow.training.batching import tokenize  # noqa: E402
from kdflow.training.packs import Pack, PackAdamW, member_gradient_norms, stacked_batches  # noqa: E402

KS = (1, 2, 4, 8, 16, 32)
FAMILY_KS = {"bert_4x768": (1, 2, 4, 8)}  # a 4 x 768 BERT member holds about 0.8 GB of weights and moments
WITHIN = 0.05  # recommend(): the smallest K whose throughput is within this fraction of the family's best


def pack_step(members: list, loss_fn, precision, device: torch.device):
    """One training step of ``members`` as a pack (the loop's for a Pack, kdflow.training.loop.train)."""
    pack = Pack(members).to(device).train()
    hp = gpu_step.HP
    optimizer = PackAdamW(pack, [hp.learning_rate] * pack.size, [hp.weight_decay] * pack.size)

    def step(batch):
        optimizer.zero_grad()
        with precision.autocast():
            losses = pack.map(loss_fn, batch).float()
        losses.sum().backward()
        member_gradient_norms(pack, hp.max_grad_norm)
        optimizer.step()

    return step


def measure(device: str, precision_name: str, tiny: bool, deadline: float, data: Path | None = None,
            families: tuple[str, ...] | None = None, ks: tuple[int, ...] | None = None, steps: int | None = None,
            log=print) -> list[dict]:
    """Rows of packs.csv, one per family and K, until ``deadline`` (time.monotonic())."""
    torch_device = torch.device(device)
    steps, warmup = steps or (2 if tiny else 20), 1 if tiny else 5
    precision = resolve_precision(precision_name, torch_device)
    teacher, tokenizer = build_teacher({"architecture": gpu_step.TINY_BERT if tiny else gpu_step.WIDE_BERT,
                                        "tokenizer": str(REPO / "demo/vocab.txt")}, num_labels=2)
    frame = gpu_step.sst2_sentences(data, tiny)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        teacher.save_pretrained(Path(folder) / "model")
        tokenizer.save_pretrained(Path(folder) / "model")
        context = StudentContext(2, tokenizer, folder)
        for family in families or tuple(gpu_step.FAMILIES):
            spec, tiny_spec, kind = gpu_step.FAMILIES[family]
            spec = tiny_spec if tiny else spec
            reader = student_tokenizer(build_student(spec, context), tokenizer)
            split = tokenize(frame, reader, 16 if tiny else 128, labelled=True)
            alone = None
            for k in ks or FAMILY_KS.get(family, KS):
                if time.monotonic() >= deadline:
                    log(f"packs: deadline reached before {family} K={k}")
                    return rows
                member_data = [gpu_step.step_batches(split, kind, warmup + steps, torch_device, seed=seed)
                               for seed in range(k)]
                data_ = [stacked_batches(step_batches) for step_batches in zip(*member_data)]
                members, loss_fn = [], None
                for seed in range(k):
                    torch.manual_seed(seed)
                    model, member_loss = gpu_step.kd_step_parts(spec, context, member_data[seed][0], torch_device)
                    members.append(model)
                    loss_fn = loss_fn or member_loss  # the members' logits tables alike (random): one serves all
                started = time.monotonic()
                if torch_device.type == "cuda":
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats(torch_device)
                try:
                    times = gpu_step.timed(pack_step(members, loss_fn, precision, torch_device), data_, torch_device,
                                           warmup)
                except Exception as error:  # a pack too large for the GPU is a finding, not the end
                    log(f"packs: {family} K={k} failed: {type(error).__name__}: {error}")
                    rows.append({"family": family, "k": k, "precision": precision_name,
                                 "error": f"{type(error).__name__}: {str(error)[:300]}"})
                    break
                ms = statistics.median(times)
                examples = 1e3 * k * gpu_step.BATCH / ms
                alone = alone or examples
                row = {"family": family, "k": k, "precision": precision_name,
                       "device": gpu_step.device_name(torch_device), "ms": ms, "examples_per_s": examples,
                       "speedup": examples / alone,
                       "peak_mb": (torch.cuda.max_memory_allocated(torch_device) / 2**20
                                   if torch_device.type == "cuda" else None),
                       "seconds": round(time.monotonic() - started, 1)}
                log(f"packs {family:<11} K={k:<3} {ms:8.2f} ms  {examples:9.0f} ex/s  x{row['speedup']:.2f}")
                rows.append(row)
                del members, data_, member_data
    return rows


def recommend(frame: pd.DataFrame) -> dict[str, int]:
    """Each family's pack size: the smallest K within :data:`WITHIN` of its best examples per second."""
    if "examples_per_s" not in frame:
        return {}
    sizes = {}
    for family, rows in frame.dropna(subset=["examples_per_s"]).groupby("family"):
        best = rows.examples_per_s.max()
        sizes[family] = int(rows[rows.examples_per_s >= (1 - WITHIN) * best].k.min())
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--tiny", action="store_true", help="the demo's sizes and a few steps: the code path")
    parser.add_argument("--families", nargs="+", choices=list(gpu_step.FAMILIES))
    parser.add_argument("--ks", nargs="+", type=int)
    parser.add_argument("--data", type=Path, help="a GLUE folder with SST-2/dev.tsv (default: the demo's)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=600)
    args = parser.parse_args()
    rows = measure(args.device, args.precision, args.tiny, time.monotonic() + args.seconds, args.data,
                   tuple(args.families) if args.families else None, tuple(args.ks) if args.ks else None)
    args.out.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(rows)
    frame.to_csv(args.out / "packs.csv", index=False, float_format="%.6g")
    print("recommended pack sizes:", recommend(frame))


if __name__ == "__main__":
    main()
