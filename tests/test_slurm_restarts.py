"""Restarts through a local SLURM cluster (issue 33): the `snakemake` process lost while its job runs and the job
then requeued, a node failing. Each interrupted teacher ends as the same teacher trained without interruption.
Skipped where no cluster answers (slurm_cluster.py)."""

import os
import signal
import subprocess

import pytest
from conftest import snakemake, trained_outcome
from slurm_cluster import (RESUMED, STALL_SECONDS, TEACHER, TEACHER_LOG, SnakemakeOnSlurm, all_records, end_remains,
                           fault_test_workdir, longer_teacher, run_progress, slurm_record, stdout_of, stop_job, wait_for,
                           wait_for_log)


def start_requeued(job):
    """SLURM holds a requeued job back for about two minutes (its begin time); start it now, as an admin can, once
    the processes of its last run have ended."""
    wait_for(lambda: "PENDING" in all_records(job), 60, f"SLURM job {job} back in the queue")
    old_run = f"slurmstepd: \\[{job}\\."
    wait_for(lambda: subprocess.run(["pgrep", "-f", old_run], capture_output=True).returncode == 1, 120,
             f"the processes of SLURM job {job}'s last run to end")
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True, timeout=15)


@pytest.mark.slow
def test_a_restart_after_losing_the_snakemake_process_follows_its_job_through_a_requeue_without_submitting_it_again(
        tmp_path, cluster, uninterrupted_teacher):
    """Issue 33, faults 3 and 5 in one run. The `snakemake` process is killed (SIGKILL to its session) while its
    teacher job runs; after `--unlock`, the restarted run submits nothing for the teacher: it follows the running
    SLURM job. That job is then requeued (`scontrol requeue`, what preemption with requeue does): SLURM stops it
    (SIGTERM: a checkpoint) and runs it again under the same job id, the restarted run keeps following it without
    a retry (none is configured), and the job resumes from its checkpoint. The run records the job's metadata (a
    dry run then has nothing to do) and ends with the result of an uninterrupted run."""
    workdir = fault_test_workdir(tmp_path / "kdflow", cluster, uninterrupted_teacher, longer_teacher, retries=0)
    with SnakemakeOnSlurm(workdir, TEACHER) as lost:
        wait_for_log(workdir, "checkpoint saved")
        [job] = lost.jobs()
        # Stopped, the job keeps running however long the restart takes; SLURM's SIGTERM resumes it.
        assert stop_job(lost, job), "the teacher ended before it was stopped"
        os.killpg(lost.process.pid, signal.SIGKILL)
        lost.process.wait()
        assert slurm_record(job, "State") == ["RUNNING"]
        snakemake("--unlock", cwd=workdir)
        with SnakemakeOnSlurm(workdir, TEACHER, name="restart.out") as restart:
            wait_for(lambda: "following it instead of submitting it again" in restart.output(), STALL_SECONDS,
                     "the restart to follow the running job", lambda: run_progress(restart))
            subprocess.run(["scontrol", "requeue", job], check=True, timeout=15)
            start_requeued(job)
            assert restart.wait() == 0, restart.output()
    end_remains(job)  # the requeued first run's job-step snakemake can outlive it, idle (seen 50 minutes after CI)
    assert restart.jobs() == [], restart.output()
    assert f"as SLURM job {job}, submitted by an earlier snakemake run: following it" in restart.output()
    assert all_records(job) == ["REQUEUED", "COMPLETED"], all_records(job)
    resumed = RESUMED.search((workdir / TEACHER_LOG).read_text())
    assert resumed and int(resumed["step"]) >= 15, (workdir / TEACHER_LOG).read_text()  # an epoch: 15 steps
    assert trained_outcome(workdir / TEACHER) == uninterrupted_teacher.outcome
    assert "Nothing to be done" in snakemake("-n", TEACHER, cwd=workdir).stdout


def node_back(node):
    """Resume ``node`` unless it is in service (the cluster's ReturnToService may have brought it back); True once
    it is."""
    if any(state in stdout_of("sinfo", "-h", "-n", node, "-o", "%T") for state in ("down", "drain")):
        subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False, timeout=15)
        return False
    return True


@pytest.mark.slow
def test_a_job_on_a_node_that_fails_is_requeued_and_leaves_no_partial_output(
        tmp_path, cluster_alone, uninterrupted_teacher):
    """Issue 33, fault 4: the node of the running teacher job goes down (`scontrol update state=down`). SLURM ends
    the job (NODE_FAIL) and, with the profile's `slurm-requeue`, queues it again; no output of it exists
    meanwhile, and once the node is back the job resumes from its last checkpoint and ends as an uninterrupted
    run. kdflow writes every output and checkpoint under a temporary name and renames it into place
    (kdflow.core.io), so a node that fails mid-write leaves the old file or none, never half of one
    (tests/test_checkpoint.py)."""
    workdir = fault_test_workdir(tmp_path / "kdflow", cluster_alone, uninterrupted_teacher, longer_teacher, retries=0)
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
        # drains the node and holds the job), even once the old run's processes have ended.
        assert run.wait() == 0, run.output()
        end_remains(job)
    assert run.jobs() == [job] and all_records(job) == ["NODE_FAIL", "COMPLETED"], all_records(job)
    assert RESUMED.search((workdir / TEACHER_LOG).read_text()), (workdir / TEACHER_LOG).read_text()
    assert trained_outcome(workdir / TEACHER) == uninterrupted_teacher.outcome
