"""The SLURM profile on a real cluster: part of the demo through `snakemake --profile`, checked in SLURM's
accounting (GPU jobs were given a GPU, CPU jobs none). Needs a cluster with partitions `cpu` and `gpu`, a GPU
gres on `gpu` (fake GPUs will do) and accounting (slurmdbd); skipped where none answers."""

import getpass
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml
from conftest import REPO, copy_repo, snakemake, trained_outcome

from kdflow.workflow.slurm_status import first_word, recognise_cancelled_jobs

# Two rounds of submissions, GPU and CPU jobs, single and grouped: the SST-2 data and teacher, and the probing of
# the demo teacher's random initialisation (its encodings, then two probe jobs as one group job).
TARGETS = ["results/teachers/tiny_bert/sst2/metrics.json",
           *(f"results/probing/scores/tiny_bert_init/{task}.json" for task in ["Length", "BigramShift"])]
# Submissions by their log directory: rule_<rule>, or group_<group id>_<its rules> for a group job.
GPU_SUBMISSIONS = {"rule_finetune_teacher", "rule_evaluate_teacher", "rule_encode_probing_tasks", "group_probes_tiny_bert_init_probe_model"}
CPU_SUBMISSIONS = {"rule_prepare_task"}
RUN_TIMEOUT = 420  # seconds; the plugin can hang (e.g. when sacct fails), so the run is killed after this


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


def write_test_setup(workdir, account, edit_config=lambda config: None, retries=0):
    """The demo with GPU jobs as in the full config (code still on CPU), edited by ``edit_config``, and the SLURM
    profile with the edits a user makes for a cluster (account, GPU model) plus fast status checks."""
    config = yaml.safe_load((REPO / "demo/config.yaml").read_text())
    config["resources"]["gpu"] = 1
    config["probing"]["resources"]["gpu"] = 1
    edit_config(config)
    # The demo as the workflow's own config: jobs on the cluster do not get --replace-workflow-config.
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))

    profile = yaml.safe_load((REPO / "slurm/config.yaml").read_text())
    profile["default-resources"]["slurm_account"] = account
    for resources in profile["set-resources"].values():
        resources["gpu_model"] = "fake"
    profile.update({"slurm-init-seconds-before-status-checks": 1, "latency-wait": 5, "retries": retries,
                    "keep-going": False})
    (workdir / "slurm-test").mkdir()
    (workdir / "slurm-test/config.yaml").write_text(yaml.safe_dump(profile))


def submissions(output):
    """SLURM job id -> the log directory of what it ran (see GPU_SUBMISSIONS)."""
    return dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/(\w+)/", output))


def accounting(jobs):
    """SLURM job id -> (partition, allocated TRES, state): the records the plugin's status checks read."""
    lines = stdout_of("sacct", "-X", "-P", "-n", "-j", ",".join(jobs), "-o", "JobIDRaw,Partition,AllocTRES,State")
    return {job: tuple(record) for job, *record in (line.split("|") for line in lines.splitlines())}


@pytest.mark.slow
def test_slurm_profile_gives_gpu_jobs_a_gpu_and_cpu_jobs_none(tmp_path):
    account = cluster_account()
    workdir = copy_repo(tmp_path / "kdflow")
    write_test_setup(workdir, account)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "snakemake", "--profile", "slurm-test", *TARGETS],
            cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=RUN_TIMEOUT,
        )
    except subprocess.TimeoutExpired as timeout:  # run() has killed snakemake; its jobs are SLURM's to cancel
        output = (timeout.output or b"").decode(errors="replace")
        subprocess.run(["scancel", *submissions(output)], check=False)
        raise AssertionError(f"snakemake did not finish in {RUN_TIMEOUT} s:\n{output}") from None
    assert result.returncode == 0, result.stdout
    assert all((workdir / target).exists() for target in TARGETS)

    jobs = submissions(result.stdout)
    assert sorted(jobs.values()) == sorted(GPU_SUBMISSIONS | CPU_SUBMISSIONS), result.stdout
    records = accounting(jobs)
    assert records.keys() == jobs.keys(), records
    for job, (partition, tres, state) in records.items():
        on_gpu = jobs[job] in GPU_SUBMISSIONS
        assert state == "COMPLETED", (jobs[job], state)
        assert partition == ("gpu" if on_gpu else "cpu"), (jobs[job], partition)
        # One GPU each, also for the group of two probe jobs: they ran one after another on it.
        assert bool(re.search(r"gres/gpu=1(,|$)", tres)) == on_gpu, (jobs[job], tres)


def longer_teacher(config):
    """The demo teacher trains 20 epochs on SST-2 (300 steps) and checkpoints after each epoch and every 20 steps:
    long enough to be interrupted after a checkpoint and before its end."""
    config["teachers"]["tiny_bert"]["task_hyperparameters"]["sst2"] = {"epochs": 20}
    config["checkpoints"] = {"every_steps": 20, "every_minutes": None}


TEACHER = "results/teachers/tiny_bert/sst2/model"
TEACHER_LOG = "logs/finetune_teacher/tiny_bert/sst2.log"


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


@pytest.mark.slow
def test_a_job_cancelled_with_scancel_is_retried_and_resumes_from_its_checkpoint(tmp_path):
    """Issue 33, fault 1: `scancel` of the running teacher job. Its SIGTERM makes the job save a checkpoint after
    the step in progress and stop; the profile's retry resubmits it, resumes from that checkpoint (its log says
    from which step) and ends with the weights' bytes and training record of an uninterrupted run (the same
    config, run without SLURM)."""
    account = cluster_account()
    workdir = copy_repo(tmp_path / "kdflow")
    write_test_setup(workdir, account, longer_teacher, retries=1)
    output = workdir / "snakemake.out"
    with output.open("w") as sink:
        run = subprocess.Popen([sys.executable, "-m", "snakemake", "--profile", "slurm-test", TEACHER], cwd=workdir,
                               stdout=sink, stderr=subprocess.STDOUT)
    try:
        log = workdir / TEACHER_LOG
        wait_for(lambda: log.exists() and "checkpoint saved" in log.read_text(), RUN_TIMEOUT, "a checkpoint")
        job = next(job for job, rule in submissions(output.read_text()).items() if rule == "rule_finetune_teacher")
        subprocess.run(["scancel", job], check=True)
        run.wait(timeout=RUN_TIMEOUT)
    finally:
        if run.poll() is None:
            run.kill()
            subprocess.run(["scancel", *submissions(output.read_text())], check=False)
    assert run.returncode == 0, output.read_text()
    attempts = [job for job, rule in submissions(output.read_text()).items() if rule == "rule_finetune_teacher"]
    assert len(attempts) == 2 and accounting(attempts[:1])[attempts[0]][2].startswith("CANCELLED"), attempts
    resumed = re.search(r"resuming run train from its checkpoint: epoch \d+, batch \d+ \(step (\d+)\)",
                        (workdir / TEACHER_LOG).read_text())
    assert resumed and int(resumed.group(1)) >= 15, (workdir / TEACHER_LOG).read_text()  # an epoch: 15 steps
    # The cancelled attempt saved a checkpoint on SLURM's SIGTERM and exited with kdflow's error (status 1), not
    # killed by the signal: the retry lost at most the step in progress.
    slurm_logs = workdir / ".snakemake/slurm_logs/rule_finetune_teacher/tiny_bert_sst2"
    cancelled = (slurm_logs / f"{attempts[0]}.log").read_text()
    assert "finetune_teacher.py' returned non-zero exit status 1." in cancelled, cancelled

    uninterrupted = copy_repo(tmp_path / "uninterrupted")
    shutil.copy(workdir / "config.yaml", uninterrupted / "config.yaml")
    snakemake("--cores", "1", TEACHER, cwd=uninterrupted)
    assert trained_outcome(workdir / TEACHER) == trained_outcome(uninterrupted / TEACHER)


def test_a_cancelled_jobs_state_reads_as_cancelled_for_the_plugin():
    """sacct's "CANCELLED by <uid>" reaches the SLURM plugin as "CANCELLED", one of its failure states; the
    wrapper goes around the plugin's status query once, however often the Snakefile is read."""
    import asyncio

    plugin = pytest.importorskip("snakemake_executor_plugin_slurm")
    assert first_word({"1": "CANCELLED by 1000", "2": "COMPLETED", "3": "RUNNING"}) == {
        "1": "CANCELLED", "2": "COMPLETED", "3": "RUNNING"}
    assert first_word(None) is None  # a failed query stays one
    original = plugin.query_job_status
    try:
        async def query(command, logger):
            return {"7": "CANCELLED by 0"}, 0.1

        plugin.query_job_status = query
        recognise_cancelled_jobs()
        recognise_cancelled_jobs()
        assert asyncio.run(plugin.query_job_status("sacct", None)) == ({"7": "CANCELLED"}, 0.1)
        assert plugin.query_job_status.__wrapped__ is query
    finally:
        plugin.query_job_status = original
