"""Resumable training: periodic, atomic checkpoints of a running job, so that a job killed by a time limit, a
preemption or a crash resumes where it stopped instead of starting again.

A checkpoint holds everything the rest of a run depends on: the weights, the optimiser and learning-rate
schedule, every random generator (Python, NumPy, torch CPU and CUDA, of every rank in a data-parallel job;
the training loop's shuffler as it was when the current epoch started), the position in the data (epoch and
batches done) and the results so far.
Resuming therefore ends with the same weights and metrics as an uninterrupted run (bitwise on CPU with the same
thread count). A job made of several training runs (a student's stages) keeps one entry per run: finished runs
are not repeated. Jobs that work through their input in chunks (teacher labelling, sampling shards) save the
results of the chunks done (:func:`resumable_chunks`).

The file is written to a temporary name, flushed to disk and renamed, so it is always either the previous or the new
checkpoint, never half of one. One that cannot be read all the same (a copy cut short, a disk that lost its end) is
set aside as ``<name>.damaged`` and the job starts afresh, rather than failing on it at every rerun. It is keyed by the job's fingerprint (its parameters, code fingerprint and the identity of
its input files): a checkpoint left by different settings, code or inputs is discarded, never resumed. It is
deleted once the job's outputs are written.

SIGTERM (what SLURM sends at a time limit, a preemption or a ``scancel``, some 30 s before SIGKILL) makes a
checkpoint due at once (:meth:`Checkpoint.stop_on_sigterm`): the training loop saves it after the step in
progress and stops the job with :class:`kdflow.core.errors.Terminated`, so that a retry loses at most one step.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import random
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch

from kdflow.core.io import atomic_output, set_aside

log = logging.getLogger("kdflow")
T, R = TypeVar("T"), TypeVar("R")


class Checkpoint:
    """The checkpoint file of one job: ``due()`` says when to save, ``save``/``load`` one run's entry.

    The file is read on first use, not on construction: a checkpoint handed to the worker processes of a
    data-parallel job (:mod:`kdflow.training.parallel`) is read by each of them rather than copied into the job's
    description."""

    def __init__(self, path: str | Path, fingerprint: str, every_minutes: float | None = 10.0,
                 every_steps: int | None = None):
        self.path = Path(path)
        self.fingerprint = fingerprint
        self.every_seconds = None if every_minutes is None else every_minutes * 60
        self.every_steps = every_steps
        self.last_saved = time.monotonic()
        self.terminated = False  # set by SIGTERM while stop_on_sigterm is in force

    @functools.cached_property
    def runs(self) -> dict[str, dict]:
        if not self.path.exists():
            return {}
        try:
            stored = torch.load(self.path, map_location="cpu", weights_only=True)
            if not isinstance(stored, dict) or not isinstance(stored.get("runs"), dict):
                raise ValueError("not a kdflow checkpoint")
        except FileNotFoundError:  # set aside by another process of the same job
            return {}
        except Exception as error:  # unpickling a torn file fails in many ways, all meaning the same here
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            aside = set_aside(self.path)
            log.warning("checkpoint %s cannot be read (%s): set aside as %s; starting afresh", self.path, reason, aside)
            return {}
        if stored.get("fingerprint") != self.fingerprint:
            log.info("checkpoint %s belongs to other settings, code or inputs: starting afresh", self.path)
            return {}
        log.info("checkpoint %s found: runs %s", self.path, {k: _position(v) for k, v in stored["runs"].items()})
        return stored["runs"]

    def due(self, step: int) -> bool:
        """Whether a checkpoint is due after optimiser step ``step`` (every N steps, every M minutes, or at once
        after a SIGTERM)."""
        if self.terminated or (self.every_steps and step % self.every_steps == 0):
            return True
        return self.every_seconds is not None and time.monotonic() - self.last_saved >= self.every_seconds

    @contextlib.contextmanager
    def stop_on_sigterm(self):
        """While in force (in the process's main thread), SIGTERM sets :attr:`terminated` instead of ending the
        process: the loop then saves and stops. The previous handler comes back on exit."""
        def request_stop(signum, frame):
            log.warning("SIGTERM: saving a checkpoint after this step, then stopping")
            self.terminated = True

        previous = signal.signal(signal.SIGTERM, request_stop)
        try:
            yield self
        finally:
            signal.signal(signal.SIGTERM, previous)

    def load(self, run: str) -> dict | None:
        return self.runs.get(run)

    def save(self, run: str, state: dict) -> None:
        self.runs[run] = _snapshot(state)  # later saves rewrite every run: keep this one's values as of now
        with atomic_output(self.path) as temporary:  # the old or the new checkpoint, never a torn one
            torch.save({"fingerprint": self.fingerprint, "runs": self.runs}, temporary)
        self.last_saved = time.monotonic()
        log.info("checkpoint saved: %s %s", run, _position(state))

    def remove(self) -> None:
        """The job's outputs are written: its checkpoint has served."""
        self.path.unlink(missing_ok=True)


def _snapshot(value):
    """A copy of ``value`` whose tensors are CPU copies, detached from the live model and optimiser."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {key: _snapshot(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_snapshot(item) for item in value)
    return value


def _position(state: dict) -> str:
    if state.get("finished"):
        return "finished"
    if "chunks_done" in state:
        return f"{state['chunks_done']} chunks done"
    return f"epoch {state['epoch']} batch {state['batches_done']}"


def resumable_chunks(chunks: Iterable[T], work: Callable[[int, T], R], checkpoint: Checkpoint | None,
                     run: str = "chunks") -> list[R]:
    """``work(index, chunk)`` for every chunk, in order. With a ``checkpoint``, the results so far are saved
    whenever it is due (counting chunks as steps), and a rerun skips the chunks already done. ``work`` must
    depend on its arguments alone (seed each chunk's randomness from its index), so that a resumed job
    ends with the same results as an uninterrupted one."""
    saved = checkpoint.load(run) if checkpoint is not None else None
    results = list(saved["results"]) if saved is not None else []
    if results:
        log.info("resuming %s from its checkpoint: %d chunks done", run, len(results))
    for index, chunk in enumerate(chunks):
        if index < len(results):
            continue
        results.append(work(index, chunk))
        if checkpoint is not None and checkpoint.due(index + 1):
            checkpoint.save(run, {"finished": False, "chunks_done": len(results), "results": results})
    return results


def random_states() -> dict:
    """Every global random generator's state, in types ``torch.load(weights_only=True)`` accepts."""
    version, internal, gauss = random.getstate()
    numpy_state = np.random.get_state(legacy=False)
    return {
        "python": [version, list(internal), gauss],
        "numpy": {**numpy_state, "state": {"key": numpy_state["state"]["key"].tolist(),
                                          "pos": int(numpy_state["state"]["pos"])}},
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def restore_random_states(states: dict) -> None:
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    numpy_state = states["numpy"]
    np.random.set_state({**numpy_state, "state": {"key": np.array(numpy_state["state"]["key"], dtype=np.uint32),
                                                  "pos": numpy_state["state"]["pos"]}})
    torch.set_rng_state(states["torch"])
    if states["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def job_fingerprint(params: dict, inputs: list[str]) -> str:
    """The identity of a job's work: its parameters (settings and code fingerprint) and, per input file, its
    path, size and modification time (a retrained teacher invalidates its students' checkpoints)."""
    files = []
    for name in sorted(inputs):
        root = Path(name)
        paths = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        files += [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in paths if p.exists()]
    text = json.dumps({"params": params, "inputs": files}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def job_name(snakemake) -> Path:
    """A rule job's name as a path, ``<rule>/<wildcards>``: its log path without ``logs/`` and the suffix. The
    job's checkpoint and its TensorBoard events are named after it."""
    log_path = Path(snakemake.log[0])
    relative = log_path.relative_to("logs") if log_path.parts[0] == "logs" else log_path
    return relative.with_suffix("")


def job_checkpoint(snakemake) -> Checkpoint:
    """The checkpoint of a rule job: ``<checkpoints.dir>/<job name>.ckpt``, saved as often as ``checkpoints`` in
    the config says. Read from the config rather than params, so that changing how often checkpoints are saved
    reruns nothing."""
    settings = {"dir": "checkpoints", "every_minutes": 10.0, "every_steps": None,
                **snakemake.config.get("checkpoints", {})}
    fingerprint = job_fingerprint({"rule": snakemake.rule, **dict(snakemake.params.items())}, list(snakemake.input))
    return Checkpoint(Path(settings["dir"]) / f"{job_name(snakemake)}.ckpt", fingerprint,
                      settings["every_minutes"], settings["every_steps"])
