"""Atomic, durable outputs: a job killed while writing (a time limit, a preemption) leaves its previous file or none,
never half of one, and a file renamed into place survives a crash of the node. Everything is written under a
temporary name beside its destination, flushed to disk (fsync) and renamed into place; the rename is flushed too.
Without the flushes a crash soon after the rename can leave the new name pointing at a file the disk never got
all of: a truncated file that every later job would trip over. Also: the files of an input that may be a file or
a directory, listed the same way by the planner and by the job.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kdflow.core.errors import UserError


@contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write the file or directory ``path`` to; it replaces ``path`` on success and
    is removed on failure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield temporary
        sync(temporary)
        if path.is_dir():
            shutil.rmtree(path)  # a directory cannot be renamed over another one
        os.replace(temporary, path)
        _sync_directory(path.parent)
    finally:
        if temporary.is_dir():
            shutil.rmtree(temporary)
        else:
            temporary.unlink(missing_ok=True)


def sync(path: str | Path) -> None:
    """Flush the file ``path`` (or every file and directory under the directory ``path``) to disk."""
    path = Path(path)
    if path.is_dir():
        for root, _, names in os.walk(path):
            for name in names:
                _sync_file(Path(root) / name)
            _sync_directory(Path(root))
    elif path.exists():
        _sync_file(path)


def _sync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _sync_directory(path: Path) -> None:
    """Flush a directory's entries (a rename into it). Not every file system can open a directory for it."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def set_aside(path: str | Path) -> Path:
    """Rename a damaged file or directory to ``<path>.damaged`` (replacing an older one), keeping it for a look
    rather than deleting it; a job then sees it as missing and rebuilds it. Returns the new name."""
    path = Path(path)
    aside = path.with_name(path.name + ".damaged")
    if not path.exists():
        return aside  # set aside already, by another process that read it
    if aside.is_dir():
        shutil.rmtree(aside)
    else:
        aside.unlink(missing_ok=True)
    try:
        os.replace(path, aside)
    except FileNotFoundError:
        pass
    return aside


def link_or_copy(source: str | Path, destination: str | Path) -> None:
    """``destination`` as a hard link to ``source`` (no second copy of a model's bytes), or a copy where the two
    are on different file systems; an existing ``destination`` is replaced."""
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.unlink(missing_ok=True)
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


def write_json(path: str | Path, value, **dumps) -> None:
    """``value`` as indented JSON, atomically."""
    with atomic_output(path) as temporary:
        temporary.write_text(json.dumps(value, indent=2, **dumps) + "\n")


def input_files(path: str | Path, what: str = "input") -> list[Path]:
    """The files of an input that is a file, or a directory's visible (not dot-) files sorted by name; ``what``
    names the input in the errors for a missing path and an empty directory."""
    path = Path(path)
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        if not files:
            raise UserError(f"{path}: the {what} directory holds no files")
        return files
    raise UserError(f"{path}: no such {what} file or directory")
