"""What a trained student of benchmarks/quality_claims.py learned: each loss term on training examples, and the
attention over teacher layers that ALP-KD (Eq. 5-6) and Universal-KD (Eq. 4) put on each student layer.

    python benchmarks/claims_diagnostics.py --workdir /tmp/kdflow-quality \\
        claims_universal/sst2/bert_3/universal_kd_il/beta0.5/seed1 claims_alp/sst2/bert_3/alp/gamma0.5/seed1

For each run directory (under results/students/): the student and its method's trained parts are rebuilt from
metrics.json and loaded from model.safetensors (the kept checkpoint), and evaluated on the first ``--examples``
training examples with the cached teacher signals. Printed per run: ce, kd and inter (the terms of Universal-KD
Eq. 10 / ALP-KD Eq. 7, unweighted) and, for attention methods, the mean attention weight of each student layer over
the teacher's layers, with the dev scores of the teacher's pseudo-heads where they exist. Not a test: it reads a
work directory of the benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers import AutoTokenizer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kdflow.distillation.methods.registry import attentive_methods  # noqa: E402
from kdflow.core import run_files  # noqa: E402
from kdflow.core.data import TaskData  # noqa: E402
from kdflow.core.tensor_files import load_tensors  # noqa: E402
from kdflow.distillation.distill import layer_widths  # noqa: E402
from kdflow.distillation.methods.registry import Shapes, build_method  # noqa: E402
from kdflow.students.registry import StudentContext, build_student  # noqa: E402
from kdflow.training.batching import batches, tokenize  # noqa: E402
from kdflow.transfer.signals import SignalCache  # noqa: E402
from kdflow.workflow import results_paths as paths  # noqa: E402


def attention(method, output, signals) -> torch.Tensor | None:
    """The weights [B, rows, N] the method puts on the teacher's layers, or None for a method without them."""
    return method.layer_attention(output, signals)[0] if method.name in attentive_methods() else None


def diagnose(workdir: Path, run: str, examples: int) -> dict:
    directory = workdir / paths.STUDENTS / run
    report = json.loads((directory / run_files.METRICS).read_text())
    task_name = run.split("/")[1]
    teacher = workdir / paths.TEACHER_DIR.format(teacher="minilm", task=task_name)
    task = TaskData.load(workdir / paths.DATA.format(task=task_name))
    tokenizer = AutoTokenizer.from_pretrained(workdir / paths.TEACHER_MODEL.format(teacher="minilm", task=task_name))
    frame = task.split("train").iloc[:examples]
    cache = SignalCache(workdir / paths.SIGNALS.format(teacher="minilm", task=task_name, transfer="train"),
                        torch.device("cpu"), task.split("train")["idx"].to_numpy())
    student = build_student(report["student"], StudentContext(task.num_labels, tokenizer, str(teacher), None))
    split = tokenize(frame, tokenizer, report["hyperparameters"]["max_seq_length"], True)
    regression = task.meta["regression"]
    widths = layer_widths(student, next(batches(split, 2, regression)))
    shapes = Shapes(widths, cache.teacher_layers, cache.teacher_width, task.num_labels, regression)
    method = build_method(report["method"], shapes, report["method_options"])
    model = nn.ModuleDict({"student": student, "method": method})
    model.load_state_dict(load_tensors(directory / run_files.STUDENT_WEIGHTS))
    model.eval()
    terms, weights = {}, []
    with torch.no_grad():
        for batch in batches(split, 128, regression):
            output = student(batch)
            signals = cache[batch["index"]]
            method.set_weights(**{w: 1.0 if t in ("ce", *method.provides) else 0.0
                                  for w, t in zip(("alpha", "beta", "gamma"), ("ce", "kd", "inter"))})
            for name, value in method(output, signals, batch["labels"]).items():
                terms.setdefault(name, []).append(float(value) * len(batch["index"]))
            found = attention(method, output, signals)
            if found is not None:
                weights.append(found.sum(0))
    result = {"run": run, "dev": report["scores"]["dev"], "best": report["best"],
              "terms": {name: sum(values) / len(frame) for name, values in terms.items() if name != "loss"}}
    if weights:
        result["attention"] = (torch.stack(weights).sum(0) / len(frame)).numpy().round(3).tolist()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/kdflow-quality"))
    parser.add_argument("--examples", type=int, default=1024)
    parser.add_argument("runs", nargs="+", help=f"run directories under {paths.STUDENTS}/")
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.chdir(args.workdir)  # the student's `init_from: minilm` names the work directory's link to the checkpoint
    for run in args.runs:
        result = diagnose(args.workdir.resolve(), run, args.examples)
        print(json.dumps(result))
        if "attention" in result:
            for row, values in enumerate(result["attention"], start=1):
                peak = int(np.argmax(values)) + 1
                weights = " ".join(f"{v:.2f}" for v in values)
                print(f"  student row {row}: {weights}  (peak: teacher layer {peak})")
    for path in sorted(args.workdir.glob(paths.PSEUDO_HEADS_METRICS.format(teacher="minilm", task="*"))):
        layers = json.loads(path.read_text())["layers"]
        print(f"pseudo-heads {path.parent.name}: " + ", ".join(
            f"L{layer['layer']} {100 * next(v for k, v in layer.items() if k not in ('layer', 'gold_distance')):.1f}"
            for layer in layers))


if __name__ == "__main__":
    main()
