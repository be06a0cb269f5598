"""Atomic outputs: a job killed while writing (a time limit, a preemption) leaves its previous file or none,
never half of one. Everything is written under a temporary name beside its destination and renamed into place.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write the file or directory ``path`` to; it replaces ``path`` on success and
    is removed on failure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield temporary
        if path.is_dir():
            shutil.rmtree(path)  # a directory cannot be renamed over another one
        os.replace(temporary, path)
    finally:
        if temporary.is_dir():
            shutil.rmtree(temporary)
        else:
            temporary.unlink(missing_ok=True)


def write_json(path: str | Path, value, **dumps) -> None:
    """``value`` as indented JSON, atomically."""
    with atomic_output(path) as temporary:
        temporary.write_text(json.dumps(value, indent=2, **dumps) + "\n")
