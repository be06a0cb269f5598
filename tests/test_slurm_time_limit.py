"""A teacher job past its SLURM time limit (issue 33, fault 2), through a local cluster: retried with more time, or
failing with the resource to raise. Its own file so that it runs beside the other SLURM tests (test_slurm.py and
test_slurm_restarts.py, one pytest-xdist worker each). Skipped where no cluster answers (slurm_cluster.py)."""

import re

import pytest
from conftest import trained_outcome
from slurm_cluster import (RESUMED, RUN_TIMEOUT, TEACHER, TEACHER_LOG, SnakemakeOnSlurm, fault_test_workdir, longer_teacher,
                           slurm_record, stop_job, wait_for)


def one_minute_teacher(config):
    """The longer teacher, given one minute a job (two on the retry)."""
    longer_teacher(config)
    config["teachers"]["tiny_bert"]["resources"] = {"runtime": 1}


@pytest.mark.slow
def test_a_job_past_its_time_limit_is_retried_with_more_time_and_fails_naming_runtime_when_retries_run_out(
        tmp_path, cluster, uninterrupted_teacher):
    """Issue 33, fault 2: teacher jobs killed by SLURM at their time limit (`runtime`: one minute). A job is made
    slower than its limit without using the CPU: the test stops its process (SIGSTOP) after a checkpoint, and
    SLURM's own time limit ends it (state TIMEOUT). With a retry, the retry gets twice the time, resumes from the
    checkpoint and ends as an uninterrupted run. Without one (a second run beside it, `retries: 0`), the failure
    Snakemake reports names the resource to raise."""
    retried = fault_test_workdir(tmp_path / "retried", cluster, uninterrupted_teacher, one_minute_teacher, retries=1)
    failing = fault_test_workdir(tmp_path / "failing", cluster, uninterrupted_teacher, one_minute_teacher, retries=0)
    with SnakemakeOnSlurm(retried, TEACHER) as run, SnakemakeOnSlurm(failing, TEACHER) as doomed:
        # Each stopped late in training (epoch 12 of 20), so that the retry's two minutes suffice on a busy machine,
        # and as soon as it gets there (the two runs do not keep step: one may be ahead by more than 8 epochs).
        running = [run, doomed]

        def stop_those_at_epoch_12():
            for each in [each for each in running if "checkpoint saved: train epoch 12" in log_text(each.workdir)]:
                stop_job(each, each.jobs()[0])
                running.remove(each)
            return not running

        wait_for(stop_those_at_epoch_12, RUN_TIMEOUT, "both teachers at epoch 12")
        assert doomed.wait() == 1, doomed.output()
        assert run.wait() == 0, run.output()
    attempts = run.jobs()
    records = [slurm_record(job, "State", "Timelimit") for job in attempts + doomed.jobs()]
    assert records == [["TIMEOUT", "00:01:00"], ["COMPLETED", "00:02:00"], ["TIMEOUT", "00:01:00"]], records
    resumed = RESUMED.search((retried / TEACHER_LOG).read_text())
    assert resumed and int(resumed.group(1)) >= 11 * 15, (retried / TEACHER_LOG).read_text()
    assert trained_outcome(retried / TEACHER) == uninterrupted_teacher.outcome
    # Snakemake's report of the failure shows the job's log (the profile's show-failed-logs): what to raise.
    hint = r"stopped by SIGTERM .*\(this attempt had 1 min\), give rule finetune_teacher a larger `runtime`"
    assert re.search(hint, doomed.output()), doomed.output()


def log_text(workdir):
    log = workdir / TEACHER_LOG
    return log.read_text() if log.exists() else ""
