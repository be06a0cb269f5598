"""A distilled student read back from its run directory, for whatever uses it after training (probing, analysis,
TAKD assistant signals). Here rather than beside the student job, so that loading a student runs (and its jobs'
code fingerprints hold) the student architectures but not the distillation methods."""

from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import load_file
from torch import nn
from transformers import AutoTokenizer

from kdflow.students.registry import StudentContext, build_student


def load_distilled(run_dir: Path, teacher_dir: Path, num_labels: int) -> nn.Module:
    """A trained student from its run directory (``metrics.json`` holds its spec, ``model.safetensors`` the
    best-dev weights of student and method), in eval mode."""
    run_dir = Path(run_dir)
    spec = json.loads((run_dir / "metrics.json").read_text())["student"]
    tokenizer = AutoTokenizer.from_pretrained(Path(teacher_dir) / "model")
    student = build_student(spec, StudentContext(num_labels, tokenizer, str(teacher_dir)))
    state = load_file(str(run_dir / "model.safetensors"))
    student.load_state_dict({k.removeprefix("student."): v for k, v in state.items() if k.startswith("student.")})
    return student.eval()
