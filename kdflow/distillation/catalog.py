"""What the workflow needs to know about the registered methods and students, as JSON: each method's options
(with defaults, and the weights that default to another's complement), the teacher signals it needs and whether it learns from a TAKD assistant; each student's options;
the embedding options. ``python -m kdflow.distillation.catalog`` prints it.

The workflow plans without importing torch (:mod:`kdflow.workflow.catalog_cache` runs this module in a subprocess when
the code behind it changed, and reads a cached copy otherwise), so that planning 10,000 jobs stays fast, yet every
option is checked against the code that will run it.
"""

from __future__ import annotations

import json

from kdflow.distillation.methods.registry import METHODS
from kdflow.students.embeddings import EMBEDDING_DEFAULTS, INITS, MODES, SOURCES
from kdflow.students.registry import STUDENTS


def catalog() -> dict:
    return {
        "methods": {
            name: {"defaults": method.defaults, "complement": method.complement, "needs": sorted(method.needs),
                   "learns_from_assistant": method.learns_from_assistant}
            for name, method in sorted(METHODS.items())
        },
        "students": {name: {"defaults": student.defaults} for name, student in sorted(STUDENTS.items())},
        "embeddings": {"defaults": EMBEDDING_DEFAULTS, "sources": list(SOURCES), "modes": list(MODES),
                       "inits": list(INITS)},
    }


if __name__ == "__main__":
    print(json.dumps(catalog(), sort_keys=True))
