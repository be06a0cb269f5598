"""torch's side of a job's set-up: the seeds and the device it runs on."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

from kdflow.core.errors import UserError


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def select_device(preferred: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available; anything else is passed to :class:`torch.device`, if this machine has
    it (the config is planned on one machine and run on others: a login node without GPUs plans fine)."""
    if preferred == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(preferred)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"the config says `device: {preferred}` but torch sees no CUDA device on this machine "
                        f"({os.uname().nodename}): set `device: auto` (CUDA where there is one) or `device: cpu`")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise UserError(f"the config says `device: {preferred}` but this machine has {torch.cuda.device_count()} "
                        "CUDA device(s): set `device: cuda` or `device: auto`")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise UserError("the config says `device: mps` but torch sees no Apple GPU on this machine: set "
                        "`device: auto` or `device: cpu`")
    return device
