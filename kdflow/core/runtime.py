"""Process-level set-up shared by every rule script: logging to the rule's log, seeds, device, threads."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys

import numpy as np
import torch

from kdflow.core.errors import UserError

log = logging.getLogger("kdflow")


def setup_logging(path: str | None = None, level: int = logging.INFO, tag: str = "", append: bool = False) -> None:
    """Send kdflow's log records (and warnings) from ``level`` up to ``path`` (the rule's log file, emptied
    first unless ``append``) and to stderr, each line marked with ``tag`` if given (a process's rank)."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if path:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        if not append:
            open(path, "w").close()
        # Append mode even for the first process: the ranks of a multi-GPU job write to the same file.
        handlers.append(logging.FileHandler(path, mode="a"))
    marker = f"[{tag}] " if tag else ""
    logging.basicConfig(
        level=level, format=f"%(asctime)s %(levelname)s {marker}%(message)s", handlers=handlers, force=True
    )
    logging.captureWarnings(True)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def select_device(preferred: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available; anything else is passed to :class:`torch.device`."""
    if preferred == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(preferred)


def set_threads(threads: int) -> None:
    """Match torch's intra-op threads to what the scheduler gave the job (rule ``threads``)."""
    torch.set_num_threads(max(1, int(threads)))


@contextlib.contextmanager
def rule_job(snakemake):
    """Set up a rule script's process (log file, threads) and turn user errors into one clear log line."""
    setup_logging(snakemake.log[0] if snakemake.log else None)
    set_threads(snakemake.threads)
    try:
        yield
    except (UserError, FileNotFoundError) as error:
        log.error("%s", error)
        sys.exit(1)
