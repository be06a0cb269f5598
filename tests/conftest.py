import fcntl
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from kdflow.core.data import TaskData, prepare_task
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.precision import FP32
from kdflow.core.tasks import get_task
from kdflow.teachers.finetune import build_teacher, evaluate_teacher, finetune
from kdflow.training import loop
from kdflow.training.step_counts import StepCounts
from kdflow.workflow import provenance
from kdflow.workflow.catalog_cache import CACHE_DIR, catalog_file, load_catalog
from kdflow.workflow.config_files import load_config_file, validate_config
from kdflow.workflow.exploration import with_exploration

# The tests' models are tiny: a second intra-op thread buys nothing, and on a busy 2-core machine OpenMP threads
# waiting for each other made a 60-step BiLSTM run take 85 s instead of 4 s. The environment carries it to the
# processes tests start (the multi-process and benchmark tests; rule jobs set their rule's threads).
torch.set_num_threads(1)
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
DEMO_DATA = REPO / "demo" / "data"
DEMO_VOCAB = REPO / "demo" / "vocab.txt"
DEMO_TESTS = "test_demo.py"  # the file whose module fixture runs the demo
SLURM_TESTS = {"test_slurm.py", "test_slurm_restarts.py"}  # the tests through a local SLURM cluster


def pytest_collection_modifyitems(items):
    """Under `make test` (--dist loadfile --no-loadscope-reorder) files go to the workers in this order: the demo's
    file first, so that one worker starts the demo, the suite's longest chain of jobs, at once; then the SLURM
    tests, few but long, which mostly wait on the cluster and so overlap well with the rest; then the files that
    run Snakemake most, so that the last files handed out are short ones that balance the workers' ends (a stable
    sort keeps the rest in order)."""
    snakemake_runs = Counter(item.path for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: (item.path.name != DEMO_TESTS, item.path.name not in SLURM_TESTS,
                                 -snakemake_runs[item.path]))


priority_lowered = False


def pytest_runtest_setup(item):
    """A pytest-xdist worker lowers its CPU priority (once) before its first test outside the demo's file and the
    SLURM tests': the demo's jobs keep the cores they can use, and the other tests fill what the demo leaves idle,
    instead of both slowing each other down until the tests that read the demo run alone on one core at the end.
    Processes a test starts inherit the priority. The SLURM tests, which run first beside the demo, keep theirs:
    they use little CPU, but their chain (the reference teacher every fault test starts from, then SLURM's own
    clocks) is as long as the demo's, and at a lower priority the reference alone took 280 s under the demo."""
    global priority_lowered
    if (os.environ.get("PYTEST_XDIST_WORKER") and item.path.name not in {DEMO_TESTS, *SLURM_TESTS}
            and not priority_lowered):
        os.nice(10)
        priority_lowered = True


def demo_task_dir(task_name: str) -> Path:
    task = get_task(task_name)
    return DEMO_DATA / "sara" if task.source == "sara" else DEMO_DATA / "glue" / task.tsv_dir


@pytest.fixture(scope="session")
def prepared(tmp_path_factory):
    """Prepare a demo task once per session: prepared("sst2") -> TaskData."""
    cache = {}

    def get(task_name: str) -> TaskData:
        if task_name not in cache:
            out = tmp_path_factory.mktemp("data") / task_name
            prepare_task(get_task(task_name), demo_task_dir(task_name), out)
            cache[task_name] = TaskData.load(out)
        return cache[task_name]

    return get


TINY_BERT = {
    "architecture": {
        "model_type": "bert",
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": 64,
    },
    "tokenizer": str(DEMO_VOCAB),
}

TEACHER_HP = dict(learning_rate=2e-3, batch_size=16, epochs=2, max_seq_length=32, eval_batch_size=64, log_every=5)


@pytest.fixture(scope="session")
def separable(tmp_path_factory):
    """A sentiment task any working model learns: 'good ...' sentences are positive, 'bad ...' negative."""
    rng = np.random.default_rng(0)
    words = ["movie", "film", "plot", "actor", "story", "music", "scene", "ending"]
    root = tmp_path_factory.mktemp("separable")

    def rows(n):
        for _ in range(n):
            label = int(rng.integers(2))
            yield " ".join(["good" if label else "bad", *rng.choice(words, 4)]), label

    directory = root / "SST-2"
    directory.mkdir()
    for split, n in (("train", 320), ("dev", 64)):
        lines = ["sentence\tlabel"] + [f"{text}\t{label}" for text, label in rows(n)]
        (directory / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    test = ["index\tsentence"] + [f"{i}\t{text}" for i, (text, _) in enumerate(rows(8))]
    (directory / "test.tsv").write_text("\n".join(test) + "\n")
    prepare_task(get_task("sst2"), directory, root / "data")
    return TaskData.load(root / "data")


def finetuned(task, spec, hp, out_dir, device, checkpoint=None, precision=FP32) -> dict:
    """A teacher fine-tuned and evaluated, as rules finetune_teacher and evaluate_teacher do: its metrics."""
    finetune(task, spec, hp, out_dir, device, checkpoint, precision=precision)
    return evaluate_teacher(task, Path(out_dir) / "model", out_dir, device, precision)


@pytest.fixture(scope="session")
def untrained_teacher(tmp_path_factory):
    """An untrained tiny BERT teacher saved as a fine-tuned one is (``<directory>/model``): what bert_k copies and
    every wordpiece student tokenises with. -> (directory, model, tokenizer)"""
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("untrained_teacher")
    model, tokenizer = build_teacher(TINY_BERT, 2)
    model.save_pretrained(directory / "model")
    tokenizer.save_pretrained(directory / "model")
    return directory, model, tokenizer


@pytest.fixture(scope="session")
def trained_teacher(separable, tmp_path_factory):
    out = tmp_path_factory.mktemp("teacher")
    report = finetuned(separable, TINY_BERT, Hyperparameters(**{**TEACHER_HP, "epochs": 3}), out, torch.device("cpu"))
    return out, report




@pytest.fixture
def loss_turns_nan(monkeypatch):
    """loss_turns_nan(k): the loss of the k-th training step from now on is NaN (steps counted across runs, such as
    a student's stages), a divergence at a known step. Returns the list of the losses the loop sees, step by step."""
    losses = []

    def at(step: int) -> list[float]:
        real, calls = loop._backward_in_one_process, itertools.count(1)

        def turning_nan(model, loss_fn, device, scaler):
            def scaled_loss(model, batch):
                return (float("nan") if next(calls) == step else 1.0) * loss_fn(model, batch)

            backward = real(model, scaled_loss, device, scaler)

            def recorded(batch, weight, last):
                losses.append(backward(batch, weight, last))
                return losses[-1]

            return recorded

        monkeypatch.setattr(loop, "_backward_in_one_process", turning_nan)
        return losses

    return at


@pytest.fixture
def training_syncs(monkeypatch):
    """training_syncs(module, job): run ``job()`` with the ``train`` that ``module`` imported counted
    (kdflow.training.step_counts); the host syncs of its training loops (set-up and outputs left out) and their
    optimiser steps. Two jobs that differ only in their steps' count tell the syncs of a step from those of the
    evaluations."""

    def measure(module, job) -> tuple[Counter, int]:
        found, steps, real = Counter(), [], module.train

        def counted(*args, **kwargs):
            with StepCounts() as counts:
                result = real(*args, **kwargs)
            found.update(counts.syncs)
            steps.append(result.history[-1]["step"])
            return result

        monkeypatch.setattr(module, "train", counted)
        try:
            job()
        finally:
            monkeypatch.setattr(module, "train", real)
        return found, sum(steps)

    return measure


def rule_blocks() -> dict[str, str]:
    """rule -> its text in this repository's rule files."""
    return provenance.rule_blocks(REPO / "rules")


def rule_scripts() -> dict[str, str]:
    """rule -> the script it runs, from this repository's rule files."""
    return provenance.rule_scripts(REPO / "rules")


class VocabularyOfSize:
    """All a random-embedding student reads from a tokenizer: its size and pad id (for full-size counts)."""

    pad_token_id = 0

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size


# Snakemake in a subprocess, as users run it: the tests of the workflow, the demo, faults, resume and the plan
DEMO = ["--configfile", "demo/config.yaml", "--replace-workflow-config"]


# A command that has neither printed nor computed for this long is hung (a stale lock, a scheduler call that never
# returns); one that is merely slow on a busy machine keeps computing, and is waited for however long it takes.
STALL_SECONDS = 300


def process_tree_cpu(pid: int) -> int:
    """CPU ticks (user and system) of process ``pid``, its descendants and their ended children, from /proc."""
    ticks, children = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended while we looked
        child = int(stat.parent.name)
        children.setdefault(int(fields[1]), []).append(child)
        ticks[child] = sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    total, pending = 0, [pid]
    while pending:
        process = pending.pop()
        total += ticks.get(process, 0)
        pending.extend(children.get(process, []))
    return total


def run_while_progressing(command, stall=STALL_SECONDS, merged=True, **options) -> subprocess.CompletedProcess:
    """``command`` to its end, as long as it moves: it prints, or it or a process it started uses the CPU. One that
    does neither for ``stall`` seconds is killed (its process group) and the test fails, naming the stall and showing
    the output so far. Its output is the result's stdout, stderr included unless ``merged`` is false."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT if merged else err, text=True,
                                   start_new_session=True, **options)
        last, since = None, time.monotonic()
        while process.poll() is None:
            moved = (out.tell(), err.tell(), process_tree_cpu(process.pid))
            if moved != last:
                last, since = moved, time.monotonic()
            elif time.monotonic() - since > stall:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                out.seek(0), err.seek(0)
                raise AssertionError(f"{' '.join(map(str, command))} neither printed nor computed for {stall} s:\n"
                                     f"{out.read()[-5000:]}{err.read()[-5000:]}")
            time.sleep(1)
        out.seek(0), err.seek(0)
        return subprocess.CompletedProcess(command, process.returncode, out.read(), None if merged else err.read())


def snakemake(*args, cwd=REPO, check=True, stall=STALL_SECONDS, env=None):
    result = run_while_progressing([sys.executable, "-m", "snakemake", *args], stall, cwd=cwd, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout}")
    return result


def planned_jobs(*args, cwd=REPO) -> Counter:
    """Jobs a dry run would execute, per rule."""
    return job_stats(snakemake("-n", *args, cwd=cwd).stdout)


def job_stats(out: str) -> Counter:
    """The jobs per rule of a dry run's output (its 'Job stats' table)."""
    if "Nothing to be done" in out:
        return Counter()
    stats = out[out.index("Job stats:") :].splitlines()[3:]
    jobs = Counter()
    for line in stats:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        jobs[parts[0]] = int(parts[1])
    return jobs


def planned_outputs(*args, cwd=REPO) -> dict[str, list[list[str]]]:
    """The outputs of each job a dry run would execute, per rule."""
    out = snakemake("-n", *args, cwd=cwd).stdout
    outputs = {}
    for rule, files in re.findall(r"^(?:local)?rule (\w+):\n(?:    (?!output:).*\n)*    output: (.*)$", out, flags=re.M):
        outputs.setdefault(rule, []).append(files.split(", "))
    return outputs


def copy_repo(destination: Path) -> Path:
    """A scratch copy of the repository without its runs. It keeps what each copy's first `snakemake` would
    otherwise compute again: the compiled modules (valid: copytree keeps the sources' modification times) and the
    catalog of methods and students (kdflow.workflow.catalog_cache: 4.5 CPU-s, importing torch; an edited method or
    student changes its name, so the copy then computes its own)."""
    ignore = shutil.ignore_patterns(".git", ".venv", ".snakemake", "results", "logs", "*.egg-info")
    shutil.copytree(REPO, destination, ignore=ignore)
    catalog = repository_catalog()
    (destination / CACHE_DIR).mkdir(parents=True)
    shutil.copy2(catalog, destination / CACHE_DIR / catalog.name)
    return destination


def repository_catalog() -> Path:
    """The catalog's cache file in the repository's own `.snakemake`, computed by the first worker that asks."""
    cache_dir = REPO / CACHE_DIR
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / "catalog.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        load_catalog(cache_dir)
    return catalog_file(cache_dir)


def snakemake_config(path: str) -> dict:
    """The config a run with ``path`` (relative to the repository) sees: validated, the exploration's experiments
    added."""
    config = load_config_file(REPO / path)
    validate_config(config, REPO / "schemas/config.schema.yaml")
    return config | with_exploration(config)


def trained_outcome(model_dir: Path, record_file: str = "training.json"):
    """A fine-tuned model's training record (a student's: metrics.json), less the seconds, and its weights' bytes (the
    evaluation's scores follow from the weights): equal for a resumed run and an uninterrupted one."""
    record = json.loads((model_dir / record_file).read_text())
    record["history"] = [{k: v for k, v in entry.items() if k != "seconds"} for entry in record["history"]]
    return {k: v for k, v in record.items() if k != "seconds"}, (model_dir / "model.safetensors").read_bytes()


# The fixtures of the tests through a local SLURM cluster (their helpers are in slurm_cluster.py, which imports
# this file: imported here when used).
@pytest.fixture
def cluster():
    """The SLURM account for a test, on the cluster the other SLURM tests may use at the same time; skips the test
    where no cluster answers."""
    from slurm_cluster import cluster_account, cluster_lock

    account = cluster_account()
    with cluster_lock(exclusive=False):
        yield account


@pytest.fixture
def cluster_alone():
    """The SLURM account for a test that no other SLURM test may run beside (it takes the node down)."""
    from slurm_cluster import cluster_account, cluster_lock

    account = cluster_account()
    with cluster_lock(exclusive=True):
        yield account


@pytest.fixture(scope="session")
def uninterrupted_teacher(tmp_path_factory):
    """The longer SLURM test teacher trained without SLURM or interruption (slurm_cluster.Reference), once per
    `make test`: the first worker to ask trains it in the directory the workers share (pytest-xdist's base
    temporary directory), the others wait for it and read it."""
    from slurm_cluster import cluster_account, uninterrupted_reference

    cluster_account()  # skip before training where the tests cannot run
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    shared = tmp_path_factory.getbasetemp().parent if worker else tmp_path_factory.getbasetemp()
    with open(shared / "uninterrupted_teacher.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return uninterrupted_reference(shared / "uninterrupted_teacher")
