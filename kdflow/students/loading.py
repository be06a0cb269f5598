"""A distilled student read back from its run directory, for whatever uses it after training (probing, analysis,
TAKD assistant signals). Here rather than beside the student job, so that loading a student runs (and its jobs'
code fingerprints hold) the student architectures but not the distillation methods."""

from __future__ import annotations

import json
from pathlib import Path

from torch import nn
from transformers import AutoTokenizer

from kdflow.core import run_files
from kdflow.core.intermediates import read_json
from kdflow.core.tensor_files import TensorFile
from kdflow.students.registry import StudentContext, build_student

WORDS = "words"  # metadata of model.safetensors: a word-level student's word list (kdflow.students.tokens)


def saved_words(words: list[str] | None) -> dict[str, str] | None:
    """The metadata that saves a word-level student's word list with its weights (None: a wordpiece student)."""
    return None if words is None else {WORDS: json.dumps(words)}


def load_distilled(run_dir: Path, teacher_dir: Path, num_labels: int) -> nn.Module:
    """A trained student from its run directory (``metrics.json`` holds its spec, ``model.safetensors`` the
    best-dev weights of student and method, and a word-level student's word list), in eval mode. Word vectors are
    not read again: the saved weights replace them."""
    run_dir = Path(run_dir)
    spec = read_json(run_dir / run_files.METRICS)["student"]
    tokenizer = AutoTokenizer.from_pretrained(Path(teacher_dir) / "model")
    with TensorFile(run_dir / run_files.STUDENT_WEIGHTS) as saved:
        metadata = saved.metadata
        state = {name: saved.get(name) for name in saved.keys() if name.startswith("student.")}
    words = json.loads(metadata[WORDS]) if WORDS in metadata else None
    context = StudentContext(num_labels, tokenizer, str(teacher_dir), words, read_vector_files=False)
    student = build_student(spec, context)
    student.load_state_dict({k.removeprefix("student."): v for k, v in state.items()})
    return student.eval()
