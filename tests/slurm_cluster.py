"""What the tests through a local SLURM cluster share: the cluster (found, or the tests skipped), the demo set up
for it, `snakemake --profile` in the background, and the uninterrupted teacher each interrupted one must equal.
Needs a cluster with partitions `cpu` and `gpu`, a GPU gres on `gpu` (fake GPUs will do) and accounting
(slurmdbd); docs/development.md says how to start one."""

import base64
import contextlib
import fcntl
import getpass
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import typing
from pathlib import Path

import pytest
import yaml
from conftest import REPO, STALL_SECONDS, copy_repo, process_tree_cpu, snakemake, trained_outcome

from kdflow.workflow import results_paths as paths

# A run on the cluster fails when it stops moving for STALL_SECONDS (the plugin can hang, e.g. when sacct fails):
# no new log line, SLURM log or output, and no CPU used by snakemake. A job stopped by a test (SIGSTOP) until its
# one-minute limit moves nothing meanwhile, well within that.


def stdout_of(*command):
    return subprocess.run(command, capture_output=True, text=True, timeout=15, check=True).stdout


def cluster_account():
    """The current user's default account on a SLURM cluster fit for this test; skips the test otherwise."""
    if shutil.which("sinfo") is None:
        pytest.skip("no SLURM here (sinfo is not on PATH); docs/development.md: a local test cluster")
    try:
        lines = stdout_of("sinfo", "-h", "-o", "%P %G").splitlines()
        stdout_of("sacct", "-n", "-X", "--starttime", "now")
        account = stdout_of("sacctmgr", "-n", "-P", "show", "user", getpass.getuser(), "format=DefaultAccount")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as error:
        reason = getattr(error, "stderr", None) or error
        pytest.skip(f"SLURM does not answer (controller or accounting down): {reason}")
    partitions = {name.rstrip("*"): gres for name, gres in map(str.split, lines)}
    if "cpu" not in partitions or "gpu" not in partitions.get("gpu", ""):
        pytest.skip(f"the SLURM cluster lacks partitions cpu and gpu with a GPU gres: {partitions}")
    if not account.strip():
        pytest.skip(f"user {getpass.getuser()} has no default SLURM account")
    return account.strip()


@contextlib.contextmanager
def cluster_lock(exclusive):
    """The SLURM tests of two pytest-xdist workers share the cluster; one that takes its node down has it alone."""
    with open(Path(tempfile.gettempdir()) / "kdflow-tests-slurm.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield


def demo_config(edit_config=lambda config: None):
    """The demo with GPU jobs as in the full config (code still on CPU), edited by ``edit_config``."""
    config = yaml.safe_load((REPO / "demo/config.yaml").read_text())
    config["resources"]["gpu"] = 1
    config["probing"]["resources"]["gpu"] = 1
    edit_config(config)
    return config


def write_test_setup(workdir, account, edit_config=lambda config: None, retries=0, keep_going=False):
    """``demo_config(edit_config)`` as the workflow's own config (jobs on the cluster do not get
    --replace-workflow-config) and the SLURM profile with the edits a user makes for a cluster (account, GPU
    model) plus fast status checks."""
    (workdir / "config.yaml").write_text(yaml.safe_dump(demo_config(edit_config)))
    profile = yaml.safe_load((REPO / "slurm/config.yaml").read_text())
    profile["default-resources"]["slurm_account"] = account
    for resources in profile["set-resources"].values():
        resources["gpu_model"] = "fake"
    profile.update({"slurm-init-seconds-before-status-checks": 1, "latency-wait": 5, "retries": retries,
                    "keep-going": keep_going})
    (workdir / "slurm-test").mkdir()
    (workdir / "slurm-test/config.yaml").write_text(yaml.safe_dump(profile))


def submissions(output):
    """SLURM job id -> the log directory of what it ran (see GPU_SUBMISSIONS)."""
    return dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/(\w+)/", output))


class Reference(typing.NamedTuple):
    """The longer teacher trained without SLURM or interruption: its outcome (``trained_outcome``), which every
    interrupted run must end with, and the working directory it ran in."""
    outcome: object
    workdir: Path


def uninterrupted_reference(directory):
    """The longer teacher run without SLURM in ``directory`` (unless it has been already)."""
    workdir = directory / "kdflow"
    if not (workdir / TEACHER).exists():
        shutil.rmtree(workdir, ignore_errors=True)  # an earlier try that failed
        copy_repo(workdir)
        (workdir / "config.yaml").write_text(yaml.safe_dump(demo_config(longer_teacher)))
        snakemake("--cores", "1", TEACHER, cwd=workdir)
    return Reference(trained_outcome(workdir / TEACHER), workdir)


def fault_test_workdir(path, account, reference, edit_config, retries):
    """A copy of the repository set up for SLURM (``write_test_setup``) with the reference run's prepared SST-2
    split and Snakemake's record of it (same code, params and inputs: up to date), so that a fault test submits
    the teacher job alone."""
    workdir = copy_repo(path)
    write_test_setup(workdir, account, edit_config, retries=retries)
    shutil.copytree(reference.workdir / PREPARED, workdir / PREPARED)  # copy2: modification times kept
    record = Path(".snakemake/metadata") / base64.urlsafe_b64encode(PREPARED.encode()).decode()
    (workdir / record.parent).mkdir(parents=True, exist_ok=True)
    shutil.copy2(reference.workdir / record, workdir / record)
    return workdir


def longer_teacher(config):
    """The demo teacher trains 20 epochs on SST-2 (300 steps, about 15 s) and checkpoints after each epoch and every
    20 steps: long enough to be interrupted after a checkpoint and before its end."""
    config["teachers"]["tiny_bert"]["task_hyperparameters"]["sst2"] = {"epochs": 20}
    config["checkpoints"] = {"every_steps": 20, "every_minutes": None}


TEACHER = paths.TEACHER_MODEL.format(teacher="tiny_bert", task="sst2")
PREPARED = paths.DATA.format(task="sst2")
TEACHER_LOG = "logs/finetune_teacher/tiny_bert/sst2.log"
RESUMED = re.compile(r"resuming run train from its checkpoint: epoch (?P<epoch>\d+), batch (?P<batch>\d+) \(step (?P<step>\d+)\)")


def run_progress(*runs) -> tuple:
    """What moves while runs on the cluster work: their jobs' logs and SLURM logs, their snakemake output and the
    CPU time of their snakemake processes (``runs``: SnakemakeOnSlurm, or work directories)."""
    moved = []
    for run in runs:
        workdir = run.workdir if isinstance(run, SnakemakeOnSlurm) else Path(run)
        files = [path for folder in ("logs", ".snakemake/slurm_logs") for path in (workdir / folder).rglob("*")]
        moved += [(str(path), size) for path in sorted(files) if (size := file_size(path)) is not None]
        if isinstance(run, SnakemakeOnSlurm):
            moved += [run.log.stat().st_size, process_tree_cpu(run.process.pid)]
    # the queue: a job that starts, runs on (its elapsed time) or ends moves, also while its log is quiet
    queue = subprocess.run(["squeue", "-h", "-o", "%i %T %M"], capture_output=True, text=True, timeout=15, check=False)
    return (*moved, queue.stdout)


def file_size(path: Path) -> int | None:
    """``path``'s size, or None for a folder or a file gone since it was listed: the SLURM executor deletes the logs
    of jobs that succeeded while a run is being watched."""
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None


def wait_for(condition, timeout, what, progress=None):
    """Wait until ``condition()``. Without ``progress``, for at most ``timeout`` seconds (short waits on SLURM's
    state). With it (a callable, such as ``lambda: run_progress(run)``), for as long as what it returns keeps
    changing: the wait fails once it has not changed for ``timeout`` seconds."""
    last, since = progress() if progress else None, time.monotonic()
    while not condition():
        if progress is not None:
            moved = progress()
            if moved != last:
                last, since = moved, time.monotonic()
        if time.monotonic() - since > timeout:
            stalled = "with nothing moving " if progress is not None else ""
            raise AssertionError(f"timed out after {timeout} s {stalled}waiting for {what}")
        time.sleep(0.2 if progress is None else 1.0)


class SnakemakeOnSlurm:
    """`snakemake --profile slurm-test` started in the background, its output in a file; on leaving, it is killed
    if still running, and the jobs it submitted are cancelled."""

    def __init__(self, workdir, *targets, name="snakemake.out"):
        self.workdir, self.log = workdir, workdir / name
        with self.log.open("w") as sink:
            # Its own session, like a login shell's: killing the group is losing the session.
            self.process = subprocess.Popen([sys.executable, "-m", "snakemake", "--profile", "slurm-test", *targets],
                                            cwd=workdir, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self):
        return self.log.read_text()

    def jobs(self, rule="finetune_teacher"):
        """The SLURM ids of the jobs of ``rule`` this run submitted, in order."""
        return [job for job, submitted in submissions(self.output()).items() if submitted == f"rule_{rule}"]

    def wait(self, stall=STALL_SECONDS):
        """The run's exit status once it ends; it fails if it stops moving for ``stall`` seconds first."""
        wait_for(lambda: self.process.poll() is not None, stall, "snakemake to end", lambda: run_progress(self))
        return self.process.returncode

    def __enter__(self):
        return self

    def __exit__(self, *error):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        subprocess.run(["scancel", *submissions(self.output())], check=False)


def wait_for_log(workdir, text, after=0, log=TEACHER_LOG, stall=STALL_SECONDS):
    """Wait until the job's log holds ``text`` (a log is emptied when an attempt starts), for as long as the work
    directory's logs move: return the log."""
    path = workdir / log
    wait_for(lambda: path.exists() and text in path.read_text()[after:], stall, f"{text!r} in {log}",
             lambda: run_progress(workdir))
    return path.read_text()


def slurm_record(job, *fields):
    """sacct's record of ``job`` (its allocation, not its steps), one value per field."""
    line = stdout_of("sacct", "-X", "-P", "-n", "-j", job, "-o", ",".join(fields)).splitlines()[-1]
    return line.split("|")


def all_records(job, field="State"):
    """sacct's records of ``job``, one per time it ran (a requeued job has several)."""
    return stdout_of("sacct", "-X", "-P", "-n", "--duplicates", "-j", job, "-o", field).split()


def stop_job(run, job):
    """Stop (SIGSTOP) the training process of SLURM job ``job`` and return its pid: the job then holds its allocation
    without using the CPU, as a slow job would. SLURM sends SIGCONT with its SIGTERM. Returns None if the job ended
    first: on a loaded machine a job with a one-minute limit can reach its limit before the test stops it."""
    pattern = f"{run.workdir}/.snakemake/scripts/tmp.*finetune_teacher.py"

    def process():
        found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
        return next((int(pid) for pid in found if f"SLURM_JOB_ID={job}\0".encode() in job_environment(pid)), None)

    def ended():
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout
        return state.strip() not in {"RUNNING", "CONFIGURING", "PENDING"}

    wait_for(lambda: process() is not None or ended(), 60, f"the process of SLURM job {job}")
    stopped = process()
    if stopped is None:  # the job ended first
        return None
    try:
        os.kill(stopped, signal.SIGSTOP)
    except ProcessLookupError:  # it ended meanwhile
        return None
    return stopped


def end_remains(job):
    """SIGKILL what is left of SLURM job ``job``'s earlier runs: on a test cluster whose node was set down without
    failing, the job step's snakemake process can outlive its allocation (idle, but never ending)."""
    for pid in subprocess.run(["pgrep", "-f", "snakemake"], capture_output=True, text=True).stdout.split():
        if f"SLURM_JOB_ID={job}\0".encode() in job_environment(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def job_environment(pid):
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # ended meanwhile
        return b""
