"""Model references (config ``models:``): which model of the DAG a name stands for, told by its keys.

* ``{pretrained: <teacher>}``: the checkpoint the teacher starts from;
* ``{teacher: <teacher>, task: <task>}``: the fine-tuned teacher;
* ``{experiment: <e>, task: <t>, student: <s>, method: <m>}``: the student the experiment selected on dev.

Torch-free: the workflow resolves references while planning.
"""

from __future__ import annotations

from kdflow.core.errors import UserError

KINDS = {"pretrained": ("pretrained",), "teacher": ("teacher", "task"),
         "student": ("experiment", "task", "student", "method")}


def reference_kind(reference: dict) -> str:
    """``pretrained``, ``teacher`` or ``student``, from the keys of a reference; a clear error otherwise."""
    for kind, keys in KINDS.items():
        if set(reference) == set(keys):
            return kind
    raise UserError(f"a model reference has the keys {sorted(reference)}; expected one of "
                    + "; ".join("{" + ", ".join(keys) + "}" for keys in KINDS.values()))
