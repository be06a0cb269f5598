"""The GPU check's step part (issue 65): what one training step of each model family costs on the device, eager
against compiled whole (``kdflow.training.loop.StepCompiler``: on CUDA ``mode="reduce-overhead"``, a CUDA graph per
shape), in fp32 and bf16, against the step's arithmetic floor.

    python benchmarks/gpu_step.py --device cuda --out DIR         # on the GPU: DIR/step.csv
    python benchmarks/gpu_step.py --device cpu --tiny --out DIR   # the same code on the CPU, in a minute (a test)

A step is kdflow's: zero_grad, the forward pass and loss under the precision's autocast, backward, clipping to 1.0
and torch's fused AdamW over kdflow's two parameter groups. The families are the config's students at their sizes:
the 4 x 768 BERT of the last check's 17.8 ms (on 32 x 128 tokens of joined sentences, where the issue's target is
3 ms) and, on SST-2's real lengths (its dev sentences, in length buckets as kdflow pads them), Universal-KD's BiLSTM
and Gated CNN and the thesis's LSTM_S, each with KD on cached teacher logits. Per row:
- ``ms``: the median step over ``--steps`` steps after a warm-up (compilation included there), timed with CUDA
  events on a GPU and in CPU seconds on a CPU;
- ``floor_ms``: the step's FLOPs (``torch.utils.flop_counter``: forward and backward) over the chip's peak in that
  precision (kdflow.workflow.cost_plan.PEAK_FLOPS), and ``of_floor``, ms over it;
- ``syncs``: host syncs per step (``torch.cuda.set_sync_debug_mode`` on a GPU, kdflow.training.step_counts on a
  CPU, for the eager step only);
- ``busy``: the fraction of a few steps' wall time the GPU spends in kernels (a ``torch.profiler`` trace; empty on
  a CPU).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from kdflow.core.hyperparameters import Hyperparameters  # noqa: E402
from kdflow.core.precision import resolve_precision  # noqa: E402
from kdflow.distillation.methods.registry import Shapes, build_method  # noqa: E402
from kdflow.students.registry import StudentContext, build_student  # noqa: E402
from kdflow.students.tokens import student_tokenizer  # noqa: E402
from kdflow.teachers.finetune import build_teacher  # noqa: E402
from kdflow.training import loop  # noqa: E402
from kdflow.training.batching import EncodedSplit, batches, to_device, tokenize  # noqa: E402
from kdflow.training.step_counts import StepCounts  # noqa: E402
from kdflow.transfer.signals import TeacherSignals  # noqa: E402
from kdflow.workflow.cost_plan import PEAK_FLOPS  # noqa: E402

WIDE_BERT = {"model_type": "bert", "num_hidden_layers": 4, "hidden_size": 768, "num_attention_heads": 12,
             "intermediate_size": 3072, "max_position_embeddings": 512}
TINY_BERT = {"model_type": "bert", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
             "intermediate_size": 128, "max_position_embeddings": 128}
# family -> (student spec, its tiny spec, batches of "joined" 128-token sentences or SST-2's "real" lengths)
FAMILIES = {
    "bert_4x768": ({"type": "bert_k", "layers": 4}, {"type": "bert_k", "layers": 2}, "joined"),
    "bilstm": ({"type": "bilstm"}, {"type": "bilstm", "layers": 2, "hidden_size": 32,
                                    "embeddings": {"source": "random", "dim": 32}}, "real"),
    "gated_cnn": ({"type": "gated_cnn"}, {"type": "gated_cnn", "layers": 2, "hidden_size": 32,
                                          "embeddings": {"source": "random", "dim": 32}}, "real"),
    "lstm_s": ({"type": "bilstm_s", "embeddings": {"source": "random", "dim": 300}},
               {"type": "bilstm_s", "lstm_size": 16, "fc_size": 16, "embeddings": {"source": "random", "dim": 16}},
               "real"),
}
BATCH, JOINED_LENGTH = 32, 128
HP = Hyperparameters(learning_rate=2e-5, batch_size=BATCH, epochs=1, max_grad_norm=1.0)


def device_name(device: torch.device) -> str:
    """The chip's short name as cost_plan.PEAK_FLOPS keys it ("H200"), "cpu" on a CPU."""
    if device.type != "cuda":
        return "cpu"
    full = torch.cuda.get_device_name(device)
    return next((name for name, _ in PEAK_FLOPS if name in full), full)


def sst2_sentences(data: Path | None, tiny: bool) -> pd.DataFrame:
    """SST-2's dev sentences (the carried full SST-2 where given, else the demo's excerpt)."""
    folder = data / "SST-2" if data is not None else REPO / "demo/data/glue/SST-2"
    frame = pd.read_csv(folder / "dev.tsv", sep="\t", quoting=3)
    frame = pd.DataFrame({"text_a": frame["sentence"], "text_b": None, "label": frame["label"]})
    return frame.iloc[:4 * BATCH] if tiny else frame


def step_batches(split: EncodedSplit, kind: str, count: int, device: torch.device, seed: int = 0) -> list[dict]:
    """``count`` training batches on ``device``: SST-2's shuffled (by ``seed``), in kdflow's length buckets, or
    ("joined") every row filled to 128 tokens, as the last check timed BERT."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        for batch in batches(split, BATCH, False, shuffle=True, generator=rng, length_buckets=HP.length_buckets):
            if len(batch["index"]) == BATCH:
                out.append(batch)
    out = out[:count]
    if kind == "joined":
        for batch in out:
            ids = batch["input_ids"]
            batch["input_ids"] = ids[:, 1:].repeat(1, -(-JOINED_LENGTH // (ids.shape[1] - 1)))[:, :JOINED_LENGTH]
            for key in ("token_type_ids", "attention_mask"):
                batch[key] = torch.full_like(batch["input_ids"], int(key == "attention_mask"))
            batch["lengths"] = torch.full((BATCH,), JOINED_LENGTH)
    return [to_device(batch, device) for batch in out]


def kd_step_parts(spec: dict, context: StudentContext, sample: dict, device: torch.device):
    """The student with KD on random teacher logits (the speed does not depend on them), and its loss."""
    student = build_student(spec, context).to(device)
    with torch.no_grad():
        widths = tuple(layer.shape[-1] for layer in student.eval()(sample).layers)
    model = nn.ModuleDict({"student": student, "method": build_method("kd", Shapes(widths, 1, 1, 2, False))})
    model.to(device).train()
    logits = torch.randn(100_000, 2, device=device)

    def loss_fn(model, batch):
        signals = TeacherSignals(logits[batch["index"]], None, None)
        return model["method"](model["student"](batch), signals, batch["labels"])["loss"]

    return model, loss_fn


def timed_steps(model, loss_fn, data: list[dict], precision, device: torch.device, warmup: int):
    """Milliseconds of each step after ``warmup`` steps (:func:`timed`), and the step."""
    optimizer = loop.build_optimizer(model.named_parameters(), HP)
    parameters = list(model.parameters())

    def step(batch):
        optimizer.zero_grad(set_to_none=True)
        with precision.autocast():
            loss = loss_fn(model, batch).float()
        loss.backward()
        nn.utils.clip_grad_norm_(parameters, HP.max_grad_norm)
        optimizer.step()

    return timed(step, data, device, warmup), step


def timed(step, data: list[dict], device: torch.device, warmup: int) -> list[float]:
    """Milliseconds of ``step(batch)`` for each batch after ``warmup`` of them (CUDA events on a GPU, the thread's
    CPU time on a CPU)."""
    times = []
    for i, batch in enumerate(data):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step(batch)
            end.record()
            end.synchronize()
            elapsed = start.elapsed_time(end)
        else:
            started = time.thread_time()
            step(batch)
            elapsed = 1e3 * (time.thread_time() - started)
        if i >= warmup:
            times.append(elapsed)
    return times


def step_flops(model, loss_fn, batch, precision) -> int:
    with FlopCounterMode(display=False) as counter:
        with precision.autocast():
            loss = loss_fn(model, batch).float()
        loss.backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def syncs_per_step(step, data: list[dict], device: torch.device, form: str) -> float | None:
    """Host syncs per step; None for a compiled step on a CPU, which the dispatch-mode counter cannot watch (a
    sync inside a fullgraph step would have been a graph break, an error)."""
    if device.type != "cuda":
        if form == "compiled":
            return None
        with StepCounts() as counts:
            for batch in data:
                step(batch)
        return counts.host_syncs / len(data)
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for batch in data:
                step(batch)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught) / len(data)


def busy_fraction(step, data: list[dict], device: torch.device) -> float | None:
    """The share of the steps' wall time in which a kernel ran (a profiler trace), None on a CPU."""
    if device.type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    started = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as trace:
        for batch in data:
            step(batch)
        torch.cuda.synchronize()
    wall_us = 1e6 * (time.perf_counter() - started)
    kernels = sorted((event.time_range.start, event.time_range.end) for event in trace.events()
                     if event.device_type == torch.autograd.DeviceType.CUDA)
    busy, reach = 0.0, -np.inf  # kernels of two streams may overlap: count their union
    for begin, end in kernels:
        if end > reach:
            busy += end - max(begin, reach)
            reach = end
    return busy / wall_us


def measured_order(precisions: list[str]) -> list[tuple[str, str, str]]:
    """(form, family, precision) in the order they are timed: every eager step first, then the compiled ones, the
    LSTMs' last. A compilation cannot be stopped at a deadline, and the unrolled BiLSTM's took more than 100 s on an
    H200 (2026-12-04): a check that runs out of time should lose the compiled rows, the slowest of them first."""
    last = ("bilstm", "lstm_s")
    families = [family for family in FAMILIES if family not in last] + [family for family in last if family in FAMILIES]
    return [(form, family, name) for form in ("eager", "compiled")
            for family in (FAMILIES if form == "eager" else families) for name in precisions]


def measure(device: str, precisions: list[str], tiny: bool, deadline: float, data: Path | None = None,
            steps: int | None = None, log=print, on_row=None) -> list[dict]:
    """Rows of step.csv, one per family, precision and form (eager, compiled), until ``deadline``
    (time.monotonic()), in :func:`measured_order`; ``on_row(rows)`` after each, so that a caller stopped in a
    compilation keeps the rows before it."""
    torch_device = torch.device(device)
    steps = steps or (3 if tiny else 30)
    warmup = 2 if tiny else 10
    chip = device_name(torch_device)
    teacher, tokenizer = build_teacher({"architecture": TINY_BERT if tiny else WIDE_BERT,
                                        "tokenizer": str(REPO / "demo/vocab.txt")}, num_labels=2)
    frame = sst2_sentences(data, tiny)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        teacher.save_pretrained(directory / "model")
        tokenizer.save_pretrained(directory / "model")
        context = StudentContext(2, tokenizer, str(directory))
        for form, family, name in measured_order(precisions):
            spec, tiny_spec, kind = FAMILIES[family]
            precision = resolve_precision(name, torch_device)
            if time.monotonic() >= deadline:
                log(f"step: deadline reached before {family} {name} {form}")
                return rows
            torch.manual_seed(0)
            student_spec = tiny_spec if tiny else spec
            reader = student_tokenizer(build_student(student_spec, context), tokenizer)
            split = tokenize(frame, reader, 16 if tiny else 128, labelled=True)  # tiny: short unrolls
            data = step_batches(split, kind, warmup + steps, torch_device)
            model, loss_fn = kd_step_parts(student_spec, context, data[0], torch_device)
            flops = step_flops(model, loss_fn, data[0], precision)
            if form == "compiled":
                torch._dynamo.reset()
                on_gpu = torch_device.type == "cuda"
                loss_fn = loop.StepCompiler("reduce-overhead" if on_gpu else None,
                                            "inductor" if on_gpu else "aot_eager")(loss_fn)
            started = time.monotonic()
            try:
                times, step = timed_steps(model, loss_fn, data, precision, torch_device, warmup)
            except Exception as error:  # a form that fails on this machine is a finding, not the end
                log(f"step: {family} {name} {form} failed: {type(error).__name__}: {error}")
                rows.append({"family": family, "device": chip, "precision": name, "form": form,
                             "error": f"{type(error).__name__}: {str(error)[:300]}"})
                if on_row:
                    on_row(rows)
                continue
            ms = statistics.median(times)
            peak = PEAK_FLOPS.get((chip, name))
            floor_ms = 1e3 * flops / peak if peak else None
            row = {"family": family, "device": chip, "precision": name, "form": form, "ms": ms,
                   "examples_per_s": 1e3 * BATCH / ms, "flops": flops, "floor_ms": floor_ms,
                   "of_floor": ms / floor_ms if floor_ms else None,
                   "syncs": syncs_per_step(step, data[-2:], torch_device, form),
                   "busy": busy_fraction(step, data[-5:], torch_device),
                   "tokens": int(sum(batch["input_ids"].numel() for batch in data) / len(data)),
                   "shapes": len({tuple(batch["input_ids"].shape) for batch in data}),
                   "seconds": round(time.monotonic() - started, 1)}
            log(f"step {family:<11} {name:<5} {form:<8} {ms:8.2f} ms"
                + (f" ({row['of_floor']:.0f}x its floor)" if floor_ms else ""))
            rows.append(row)
            if on_row:
                on_row(rows)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--tiny", action="store_true", help="the demo's sizes and a few steps: the code path")
    parser.add_argument("--data", type=Path, help="a GLUE folder with SST-2/dev.tsv (default: the demo's)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--families", nargs="+", choices=list(FAMILIES), help="default: every family")
    args = parser.parse_args()
    for family in set(FAMILIES) - set(args.families or FAMILIES):
        del FAMILIES[family]
    args.out.mkdir(parents=True, exist_ok=True)
    measure(args.device, args.precisions, args.tiny, time.monotonic() + args.seconds, args.data,
            on_row=lambda rows: write_rows(rows, args.out / "step.csv"))


def write_rows(rows: list[dict], path: Path) -> None:
    pd.DataFrame(rows).to_csv(path, index=False, float_format="%.6g")


if __name__ == "__main__":
    main()
