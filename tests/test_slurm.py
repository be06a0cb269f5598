"""The SLURM profile on a real cluster: part of the demo through `snakemake --profile`, checked in SLURM's
accounting (GPU jobs were given a GPU, CPU jobs none). Needs a cluster with partitions `cpu` and `gpu`, a GPU
gres on `gpu` (fake GPUs will do) and accounting (slurmdbd); skipped where none answers."""

import getpass
import os
import re
import signal
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import REPO, copy_repo, snakemake, trained_outcome

from kdflow.workflow import slurm_status
from kdflow.workflow.slurm_status import (active_jobs, correct_slurm_plugin, earlier_job, first_word,
                                          record_submission, recorded_submissions, with_names)

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
    """The demo teacher trains 20 epochs on SST-2 (300 steps, about 15 s) and checkpoints after each epoch and every
    20 steps: long enough to be interrupted after a checkpoint and before its end."""
    config["teachers"]["tiny_bert"]["task_hyperparameters"]["sst2"] = {"epochs": 20}
    config["checkpoints"] = {"every_steps": 20, "every_minutes": None}


TEACHER = "results/teachers/tiny_bert/sst2/model"
TEACHER_LOG = "logs/finetune_teacher/tiny_bert/sst2.log"
RESUMED = re.compile(r"resuming run train from its checkpoint: epoch \d+, batch \d+ \(step (\d+)\)")


@pytest.fixture(scope="module")
def uninterrupted_teacher(tmp_path_factory):
    """What every interrupted run of the longer teacher must end with: the same config, run without SLURM."""
    cluster_account()  # skip before training where the tests cannot run
    workdir = copy_repo(tmp_path_factory.mktemp("uninterrupted") / "kdflow")
    (workdir / "config.yaml").write_text(yaml.safe_dump(demo_config(longer_teacher)))
    snakemake("--cores", "1", TEACHER, cwd=workdir)
    return trained_outcome(workdir / TEACHER)


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


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

    def wait(self, timeout=RUN_TIMEOUT):
        self.process.wait(timeout=timeout)
        return self.process.returncode

    def __enter__(self):
        return self

    def __exit__(self, *error):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        subprocess.run(["scancel", *submissions(self.output())], check=False)


def wait_for_log(workdir, text, after=0, log=TEACHER_LOG, timeout=RUN_TIMEOUT):
    """Wait until the job's log holds ``text`` (a log is emptied when an attempt starts): return the log."""
    path = workdir / log
    wait_for(lambda: path.exists() and text in path.read_text()[after:], timeout, f"{text!r} in {log}")
    return path.read_text()


def training_process(workdir, script="finetune_teacher.py"):
    """The pid of the job process that runs ``script`` from ``workdir`` (Snakemake copies it to .snakemake/scripts)."""
    pattern = f"{workdir}/.snakemake/scripts/tmp.*{script}"
    wait_for(lambda: subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0, 60, pattern)
    return int(subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()[0])


def slurm_record(job, *fields):
    """sacct's record of ``job`` (its allocation, not its steps), one value per field."""
    line = stdout_of("sacct", "-X", "-P", "-n", "-j", job, "-o", ",".join(fields)).splitlines()[-1]
    return line.split("|")


@pytest.mark.slow
def test_a_job_cancelled_with_scancel_is_retried_and_resumes_from_its_checkpoint(tmp_path, uninterrupted_teacher):
    """Issue 33, fault 1: `scancel` of the running teacher job. Its SIGTERM makes the job save a checkpoint after
    the step in progress and stop; the profile's retry resubmits it, resumes from that checkpoint (its log says
    from which step) and ends with the weights' bytes and training record of an uninterrupted run."""
    account = cluster_account()
    workdir = copy_repo(tmp_path / "kdflow")
    write_test_setup(workdir, account, longer_teacher, retries=1)
    with SnakemakeOnSlurm(workdir, TEACHER) as run:
        wait_for_log(workdir, "checkpoint saved")
        subprocess.run(["scancel", run.jobs()[0]], check=True)
        assert run.wait() == 0, run.output()
    attempts = run.jobs()
    assert len(attempts) == 2 and slurm_record(attempts[0], "State")[0].startswith("CANCELLED"), attempts
    resumed = RESUMED.search((workdir / TEACHER_LOG).read_text())
    assert resumed and int(resumed.group(1)) >= 15, (workdir / TEACHER_LOG).read_text()  # an epoch: 15 steps
    # The cancelled attempt saved a checkpoint on SLURM's SIGTERM and exited with kdflow's error (status 1), not
    # killed by the signal: the retry lost at most the step in progress.
    slurm_logs = workdir / ".snakemake/slurm_logs/rule_finetune_teacher/tiny_bert_sst2"
    cancelled = (slurm_logs / f"{attempts[0]}.log").read_text()
    assert "finetune_teacher.py' returned non-zero exit status 1." in cancelled, cancelled
    assert trained_outcome(workdir / TEACHER) == uninterrupted_teacher


def one_minute_teacher(config):
    """The longer teacher, given one minute a job (two on the retry)."""
    longer_teacher(config)
    config["teachers"]["tiny_bert"]["resources"] = {"runtime": 1}


def stop_job(run, job):
    """Stop (SIGSTOP) the training process of SLURM job ``job``: it then holds its allocation without using the CPU,
    as a job slower than its time limit would. SLURM sends SIGCONT with its SIGTERM."""
    pattern = f"{run.workdir}/.snakemake/scripts/tmp.*finetune_teacher.py"

    def process():
        found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
        return next((int(pid) for pid in found if f"SLURM_JOB_ID={job}\0".encode() in job_environment(pid)), None)

    wait_for(lambda: process() is not None, 60, f"the process of SLURM job {job}")
    os.kill(process(), signal.SIGSTOP)


def job_environment(pid):
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # ended meanwhile
        return b""


@pytest.mark.slow
def test_a_job_past_its_time_limit_is_retried_with_more_time_and_fails_naming_runtime_when_retries_run_out(
        tmp_path, uninterrupted_teacher):
    """Issue 33, fault 2: teacher jobs killed by SLURM at their time limit (`runtime`: one minute). A job is made
    slower than its limit without using the CPU: the test stops its process (SIGSTOP) after a checkpoint, and
    SLURM's own time limit ends it (state TIMEOUT). With a retry, the retry gets twice the time, resumes from the
    checkpoint and ends as an uninterrupted run. Without one (a second run beside it, `retries: 0`), the failure
    Snakemake reports names the resource to raise."""
    account = cluster_account()
    retried, failing = copy_repo(tmp_path / "retried"), copy_repo(tmp_path / "failing")
    write_test_setup(retried, account, one_minute_teacher, retries=1)
    write_test_setup(failing, account, one_minute_teacher, retries=0)
    with SnakemakeOnSlurm(retried, TEACHER) as run, SnakemakeOnSlurm(failing, TEACHER) as doomed:
        for each in (run, doomed):
            wait_for_log(each.workdir, "checkpoint saved")
            stop_job(each, each.jobs()[0])
        assert doomed.wait() == 1, doomed.output()
        assert run.wait() == 0, run.output()
    attempts = run.jobs()
    records = [slurm_record(job, "State", "Timelimit") for job in attempts + doomed.jobs()]
    assert records == [["TIMEOUT", "00:01:00"], ["COMPLETED", "00:02:00"], ["TIMEOUT", "00:01:00"]], records
    resumed = RESUMED.search((retried / TEACHER_LOG).read_text())
    assert resumed and int(resumed.group(1)) >= 15, (retried / TEACHER_LOG).read_text()
    assert trained_outcome(retried / TEACHER) == uninterrupted_teacher
    # Snakemake's report of the failure shows the job's log (the profile's show-failed-logs): what to raise.
    hint = r"stopped by SIGTERM .*\(this attempt had 1 min\), give rule finetune_teacher a larger `runtime`"
    assert re.search(hint, doomed.output()), doomed.output()


@pytest.mark.slow
def test_a_restart_after_losing_the_snakemake_process_follows_its_running_job_instead_of_submitting_it_again(
        tmp_path, uninterrupted_teacher):
    """Issue 33, fault 3: the `snakemake` process is killed (SIGKILL to its session) while its teacher job runs.
    After `--unlock`, the restarted run submits nothing for the teacher: it follows the running SLURM job to its
    end, records its metadata (a dry run then has nothing to do) and ends with the result of an uninterrupted
    run, trained once."""
    account = cluster_account()
    workdir = copy_repo(tmp_path / "kdflow")
    write_test_setup(workdir, account, longer_teacher, retries=1)
    with SnakemakeOnSlurm(workdir, TEACHER) as lost:
        wait_for_log(workdir, "checkpoint saved")
        os.killpg(lost.process.pid, signal.SIGKILL)
        lost.process.wait()
        [job] = lost.jobs()
        assert slurm_record(job, "State") == ["RUNNING"]
        snakemake("--unlock", cwd=workdir)
        with SnakemakeOnSlurm(workdir, TEACHER, name="restart.out") as restart:
            assert restart.wait() == 0, restart.output()
    assert restart.jobs() == [], restart.output()
    assert f"as SLURM job {job}, submitted by an earlier snakemake run: following it" in restart.output()
    assert slurm_record(job, "State") == ["COMPLETED"]
    assert "resuming" not in (workdir / TEACHER_LOG).read_text()  # trained once, from the start
    assert trained_outcome(workdir / TEACHER) == uninterrupted_teacher
    assert "Nothing to be done" in snakemake("-n", TEACHER, cwd=workdir).stdout


def all_records(job, field="State"):
    """sacct's records of ``job``, one per time it ran (a requeued job has several)."""
    return stdout_of("sacct", "-X", "-P", "-n", "--duplicates", "-j", job, "-o", field).split()


def start_requeued(job):
    """SLURM holds a requeued job back for about two minutes (its begin time); start it now, as an admin can, once
    the processes of its last run have ended."""
    wait_for(lambda: "PENDING" in all_records(job), 60, f"SLURM job {job} back in the queue")
    old_run = f"slurmstepd: \\[{job}\\."
    wait_for(lambda: subprocess.run(["pgrep", "-f", old_run], capture_output=True).returncode == 1, 120,
             f"the processes of SLURM job {job}'s last run to end")
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True, timeout=15)


@pytest.mark.slow
def test_a_requeued_job_resumes_from_its_checkpoint_as_the_same_slurm_job(tmp_path, uninterrupted_teacher):
    """Issue 33, fault 5: `scontrol requeue` of the running teacher job (what preemption with requeue does). SLURM
    stops it (SIGTERM: a checkpoint) and runs it again under the same job id; Snakemake keeps waiting for it
    (no retry is configured), and the job resumes and ends as an uninterrupted run."""
    account = cluster_account()
    workdir = copy_repo(tmp_path / "kdflow")
    write_test_setup(workdir, account, longer_teacher, retries=0)
    with SnakemakeOnSlurm(workdir, TEACHER) as run:
        wait_for_log(workdir, "checkpoint saved")
        [job] = run.jobs()
        subprocess.run(["scontrol", "requeue", job], check=True, timeout=15)
        start_requeued(job)
        assert run.wait() == 0, run.output()
    assert run.jobs() == [job] and all_records(job) == ["REQUEUED", "COMPLETED"], all_records(job)
    resumed = RESUMED.search((workdir / TEACHER_LOG).read_text())
    assert resumed and int(resumed.group(1)) >= 15, (workdir / TEACHER_LOG).read_text()
    assert trained_outcome(workdir / TEACHER) == uninterrupted_teacher


def node_back(node):
    """Resume ``node`` unless it is in service (the cluster's ReturnToService may have brought it back); True once
    it is."""
    if any(state in stdout_of("sinfo", "-h", "-n", node, "-o", "%T") for state in ("down", "drain")):
        subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False, timeout=15)
        return False
    return True


@pytest.mark.slow
def test_a_job_on_a_node_that_fails_is_requeued_and_leaves_no_partial_output(tmp_path, uninterrupted_teacher):
    """Issue 33, fault 4: the node of the running teacher job goes down (`scontrol update state=down`). SLURM ends
    the job (NODE_FAIL) and, with the profile's `slurm-requeue`, queues it again; no output of it exists
    meanwhile, and once the node is back the job resumes from its last checkpoint and ends as an uninterrupted
    run. kdflow writes every output and checkpoint under a temporary name and renames it into place
    (kdflow.core.io), so a node that fails mid-write leaves the old file or none, never half of one
    (tests/test_checkpoint.py)."""
    account = cluster_account()
    workdir = copy_repo(tmp_path / "kdflow")
    write_test_setup(workdir, account, longer_teacher, retries=0)
    with SnakemakeOnSlurm(workdir, TEACHER) as run:
        wait_for_log(workdir, "checkpoint saved")
        [job] = run.jobs()
        [node] = slurm_record(job, "NodeList")
        try:
            subprocess.run(["scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=kdflow-test"], check=True,
                           timeout=15)
            wait_for(lambda: "NODE_FAIL" in all_records(job), 60, f"SLURM job {job} ended by the node failure")
            assert not (workdir / TEACHER).parent.exists() or not any((workdir / TEACHER).parent.iterdir())
        finally:
            wait_for(lambda: node_back(node), 60, f"node {node} back in service")
        # SLURM starts the requeued job after its begin time, about two minutes on: starting it sooner on a test
        # cluster's one node, which did not really fail, races with the old run's remains on it (the launch fails,
        # drains the node and holds the job).
        assert run.wait() == 0, run.output()
    assert run.jobs() == [job] and all_records(job) == ["NODE_FAIL", "COMPLETED"], all_records(job)
    assert RESUMED.search((workdir / TEACHER_LOG).read_text()), (workdir / TEACHER_LOG).read_text()
    assert trained_outcome(workdir / TEACHER) == uninterrupted_teacher


def test_the_plugin_reads_cancelled_states_and_also_queries_the_jobs_it_follows(monkeypatch):
    """sacct's "CANCELLED by <uid>" reaches the SLURM plugin as "CANCELLED", one of its failure states; its status
    query also asks for the jobs of earlier runs that this run follows; each correction wraps the plugin once,
    however often the Snakefile is read."""
    import asyncio

    plugin = pytest.importorskip("snakemake_executor_plugin_slurm")
    assert first_word({"1": "CANCELLED by 1000", "2": "COMPLETED", "3": "RUNNING"}) == {
        "1": "CANCELLED", "2": "COMPLETED", "3": "RUNNING"}
    assert first_word(None) is None  # a failed query stays one
    commands = []

    async def query(command, logger):
        commands.append(command)
        return {"7": "CANCELLED by 0"}, 0.1

    monkeypatch.setattr(plugin, "query_job_status", query)
    for method in ("run_job", "report_job_submission"):  # restored after the test
        monkeypatch.setattr(plugin.Executor, method, getattr(plugin.Executor, method))
    run_job = plugin.Executor.run_job
    correct_slurm_plugin()
    correct_slurm_plugin()
    monkeypatch.setattr(slurm_status, "followed_runs", {"run-b", "run-a"})
    assert asyncio.run(plugin.query_job_status("sacct -X --name this-run --noheader", None)) == ({"7": "CANCELLED"}, 0.1)
    assert commands == ["sacct -X --name this-run,run-a,run-b --noheader"]
    assert plugin.query_job_status.__wrapped__ is query and plugin.Executor.run_job.__wrapped__ is run_job
    assert with_names("squeue --states=all --name=this-run", set()) == "squeue --states=all --name=this-run"


def fake_job(*outputs):
    return SimpleNamespace(output=list(outputs), is_group=lambda: False, jobid=1)


def fake_group(*jobs):
    return SimpleNamespace(jobs=list(jobs), is_group=lambda: True, jobid=2)


def test_a_job_is_followed_only_where_one_earlier_slurm_job_still_writes_all_its_outputs(tmp_path, monkeypatch):
    """The record of which SLURM job writes which output, and the choice it makes on a restart: follow the one
    earlier job still running, submit where none runs, fail (rather than run twice) where an earlier job covers
    only part of a group job."""
    from snakemake_interface_common.exceptions import WorkflowError

    monkeypatch.chdir(tmp_path)
    teacher, student, probe = fake_job("results/teacher/model"), fake_job("results/a.json", "results/b.json"), \
        fake_job("results/probe.json")
    record_submission(teacher, "11")
    record_submission(fake_group(student, fake_job("results/c.json")), "12")
    assert recorded_submissions(student) == {"12"} and recorded_submissions(probe) == set()
    running = {}
    monkeypatch.setattr(slurm_status, "active_jobs", lambda ids, workdir, run_id: {
        job: running[job] for job in ids if job in running})
    executor = SimpleNamespace(run_uuid="this-run")
    assert earlier_job(executor, teacher) is None  # job 11 has ended: submit
    running["11"] = {"state": "RUNNING", "name": "earlier-run", "log": "11.log"}
    assert earlier_job(executor, teacher) == ("11", running["11"])
    running["12"] = {"state": "PENDING", "name": "earlier-run", "log": "12.log"}
    assert earlier_job(executor, fake_group(student, fake_job("results/c.json")))[0] == "12"
    with pytest.raises(WorkflowError, match="SLURM job.s. 12 of an earlier snakemake run still write outputs"):
        earlier_job(executor, fake_group(student, probe))


def test_a_slurm_job_counts_as_earlier_only_if_queued_or_running_here_under_another_run(tmp_path, monkeypatch):
    """squeue's answer, read: jobs of this run, of another directory or no longer active are not followed."""
    here = str(tmp_path)
    lines = [f"5|RUNNING|earlier|{here}|{here}/.snakemake/slurm_logs/rule_x/%j.log",
             f"6|RUNNING|this-run|{here}|{here}/6.log", f"7|PENDING|earlier|/elsewhere|/elsewhere/7.log",
             f"8|COMPLETED|earlier|{here}|{here}/8.log"]
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: SimpleNamespace(stdout="\n".join(lines)))
    assert active_jobs({"5", "6", "7", "8"}, here, "this-run") == {
        "5": {"state": "RUNNING", "name": "earlier", "log": f"{here}/.snakemake/slurm_logs/rule_x/5.log"}}
