"""Model references (config ``models:``): which model of the DAG a name stands for, told by its keys.

* ``{pretrained: <teacher>}``: the checkpoint the teacher starts from;
* ``{teacher: <teacher>, task: <task>}``: the fine-tuned teacher;
* ``{experiment: <e>, task: <t>, student: <s>, method: <m>}``: the student the experiment selected on dev;
* ``{embeddings: <source>}``: the input token vectors of a model, as a sentence encoder of their own (the thesis's
  "embed." baselines, §6.1 and Fig. 6.2): ``<source>`` is ``{pretrained: <teacher>}``, ``{teacher: <teacher>, task:
  <task>}`` or ``{experiment: <e>, task: <t>, student: <s>}``, the vectors that experiment's student starts from
  (before training, so no method).

Torch-free: the workflow resolves references while planning.
"""

from __future__ import annotations

from kdflow.core.errors import UserError

KINDS = {"pretrained": ("pretrained",), "teacher": ("teacher", "task"),
         "student": ("experiment", "task", "student", "method"), "embeddings": ("embeddings",)}
EMBEDDING_SOURCES = {"pretrained": ("pretrained",), "teacher": ("teacher", "task"),
                     "student": ("experiment", "task", "student")}


def _kind(reference, kinds: dict[str, tuple[str, ...]], what: str) -> str:
    keys = set(reference) if isinstance(reference, dict) else set()
    for kind, expected in kinds.items():
        if keys == set(expected):
            return kind
    raise UserError(f"{what} has the keys {sorted(keys)}; expected one of "
                    + "; ".join("{" + ", ".join(expected) + "}" for expected in kinds.values()))


def reference_kind(reference: dict) -> str:
    """``pretrained``, ``teacher``, ``student`` or ``embeddings``, from the keys of a reference; a clear error
    otherwise."""
    return _kind(reference, KINDS, "a model reference")


def embeddings_source(reference: dict) -> str:
    """What an ``embeddings`` reference takes its vectors from: ``pretrained``, ``teacher`` or ``student``."""
    return _kind(reference["embeddings"], EMBEDDING_SOURCES, "an `embeddings` reference")
