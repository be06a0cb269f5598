"""The SLURM profile on a real cluster: part of the demo through `snakemake --profile`, checked in SLURM's
accounting (GPU jobs were given a GPU, CPU jobs none), and a teacher job cancelled or past its time limit (issue 33:
it is retried and resumes), and two small students packed onto one GPU (issue 34); with the workflow's corrections
to the SLURM plugin, tested without a cluster.
Skipped where no cluster answers (slurm_cluster.py)."""

import re
import subprocess
import sys
from datetime import datetime
from types import SimpleNamespace

import pytest
from conftest import copy_repo, run_while_progressing, snakemake, trained_outcome
from slurm_cluster import (RESUMED, STALL_SECONDS, TEACHER, TEACHER_LOG, SnakemakeOnSlurm, fault_test_workdir,
                           file_size, longer_teacher, run_progress, slurm_record, stdout_of, stop_job, submissions,
                           wait_for, wait_for_log, write_test_setup)

from kdflow.workflow import results_paths as paths
from kdflow.workflow import slurm_status
from kdflow.workflow.slurm_status import (active_jobs, correct_slurm_plugin, earlier_job, first_word,
                                          record_submission, recorded_submissions, with_names)


# Two rounds of submissions, GPU and CPU jobs, single and grouped: the SST-2 data and teacher, and the probing of
# the demo teacher's random initialisation (its encodings, then two probe jobs as one group job).
TARGETS = [paths.TEACHER_METRICS.format(teacher="tiny_bert", task="sst2"),
           *(paths.PROBING_SCORES.format(model="tiny_bert_init", probing_task=task)
             for task in ["Length", "BigramShift"])]
# Submissions by their log directory: rule_<rule>, or group_<group id>_<its rules> for a group job.
GPU_SUBMISSIONS = {"rule_finetune_teacher", "rule_evaluate_teacher", "rule_encode_probing_tasks",
                   "group_probes_tiny_bert_init_probe_model"}
CPU_SUBMISSIONS = {"rule_prepare_task"}


def accounting(jobs):
    """SLURM job id -> (partition, allocated TRES, state): the records the plugin's status checks read."""
    lines = stdout_of("sacct", "-X", "-P", "-n", "-j", ",".join(jobs), "-o", "JobIDRaw,Partition,AllocTRES,State")
    return {job: tuple(record) for job, *record in (line.split("|") for line in lines.splitlines())}


@pytest.mark.slow
def test_slurm_profile_gives_gpu_jobs_a_gpu_and_cpu_jobs_none(tmp_path, cluster):
    workdir = copy_repo(tmp_path / "kdflow")
    write_test_setup(workdir, cluster)
    with SnakemakeOnSlurm(workdir, *TARGETS) as run:  # a run that stops moving is killed, its jobs cancelled
        assert run.wait() == 0, run.output()
        output = run.output()
    assert all((workdir / target).exists() for target in TARGETS)

    jobs = submissions(output)
    assert sorted(jobs.values()) == sorted(GPU_SUBMISSIONS | CPU_SUBMISSIONS), output
    records = accounting(jobs)
    assert records.keys() == jobs.keys(), records
    for job, (partition, tres, state) in records.items():
        on_gpu = jobs[job] in GPU_SUBMISSIONS
        assert state == "COMPLETED", (jobs[job], state)
        assert partition == ("gpu" if on_gpu else "cpu"), (jobs[job], partition)
        # One GPU each, also for the group of two probe jobs: they ran one after another on it.
        assert bool(re.search(r"gres/gpu=1(,|$)", tres)) == on_gpu, (jobs[job], tres)


@pytest.mark.slow
def test_a_job_cancelled_with_scancel_is_retried_and_resumes_from_its_checkpoint(
        tmp_path, cluster, uninterrupted_teacher):
    """Issue 33, fault 1: `scancel` of the running teacher job. Its SIGTERM makes the job save a checkpoint after
    the step in progress and stop; the profile's retry resubmits it, resumes from that checkpoint (its log says
    from which step) and ends with the weights' bytes and training record of an uninterrupted run."""
    workdir = fault_test_workdir(tmp_path / "kdflow", cluster, uninterrupted_teacher, longer_teacher, retries=1)
    with SnakemakeOnSlurm(workdir, TEACHER) as run:
        wait_for_log(workdir, "checkpoint saved")
        subprocess.run(["scancel", run.jobs()[0]], check=True)
        assert run.wait() == 0, run.output()
    attempts = run.jobs()
    assert len(attempts) == 2 and slurm_record(attempts[0], "State")[0].startswith("CANCELLED"), attempts
    resumed = RESUMED.search((workdir / TEACHER_LOG).read_text())
    assert resumed and int(resumed["step"]) >= 15, (workdir / TEACHER_LOG).read_text()  # an epoch: 15 steps
    # The cancelled attempt saved a checkpoint on SLURM's SIGTERM and exited with kdflow's error (status 1), not
    # killed by the signal: the retry lost at most the step in progress.
    slurm_logs = workdir / ".snakemake/slurm_logs/rule_finetune_teacher/tiny_bert_sst2"
    cancelled = (slurm_logs / f"{attempts[0]}.log").read_text()
    assert "finetune_teacher.py' returned non-zero exit status 1." in cancelled, cancelled
    assert trained_outcome(workdir / TEACHER) == uninterrupted_teacher.outcome


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
        # The retried teacher is stopped late in training (epoch 12 of 20), or at 45 s of its minute on a busy
        # machine, so that the retry's two minutes suffice; the doomed one at its first checkpoint. The two runs do
        # not keep step: each is stopped as soon as it is due. A job that reaches its limit first times out as well.
        stopped_at, running = {}, {"retried": run, "doomed": doomed}

        def stop_those_due():
            for name, each in list(running.items()):
                positions = CHECKPOINT.findall(log_text(each.workdir))
                first, *retry = each.jobs() or [None]
                if retry:  # the first attempt reached its limit before it was due: SLURM ended it all the same
                    stopped_at[name] = (0, 0)
                elif positions and (name == "doomed" or int(positions[-1][0]) >= 12 or job_seconds(first) >= 45):
                    stopped_at[name] = tuple(map(int, positions[-1]))
                    stop_job(each, first)
                else:
                    continue
                del running[name]
            return not running

        wait_for(stop_those_due, STALL_SECONDS, "both teachers at a checkpoint", lambda: run_progress(run, doomed))
        assert doomed.wait() == 1, doomed.output()
        assert run.wait() == 0, run.output()
    attempts = run.jobs()
    records = [slurm_record(job, "State", "Timelimit") for job in attempts + doomed.jobs()]
    assert records == [["TIMEOUT", "00:01:00"], ["COMPLETED", "00:02:00"], ["TIMEOUT", "00:01:00"]], records
    resumed = RESUMED.search((retried / TEACHER_LOG).read_text())
    resumed_at = (int(resumed["epoch"]), int(resumed["batch"])) if resumed else None
    assert resumed_at and resumed_at >= stopped_at["retried"], (retried / TEACHER_LOG).read_text()
    assert trained_outcome(retried / TEACHER) == uninterrupted_teacher.outcome
    # Snakemake's report of the failure shows the job's log (the profile's show-failed-logs): what to raise.
    hint = r"stopped by SIGTERM .*\(this attempt had 1 min\), give rule finetune_teacher a larger `runtime`"
    assert re.search(hint, doomed.output()), doomed.output()


CHECKPOINT = re.compile(r"checkpoint saved: train epoch (\d+) batch (\d+)")


def job_seconds(job):
    """How long SLURM job ``job`` has run (squeue's elapsed time, [[D-]H:]M:SS), 0 once it has left the queue."""
    elapsed = stdout_of("squeue", "-h", "-j", job, "-o", "%M").strip() if job else ""
    if not elapsed or elapsed == "INVALID":
        return 0
    days, _, clock = elapsed.rpartition("-")
    seconds = 0
    for part in clock.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds + 86400 * int(days or 0)


def log_text(workdir):
    log = workdir / TEACHER_LOG
    return log.read_text() if log.exists() else ""


# Issue 34: two demo BiLSTM students whose family shares a GPU two at a time (config gpu_sharing).
PACKED = [paths.STUDENT_RUN_DIR.format(experiment="universal_kd_table5", task="sst2", student="bilstm", method="no_kd",
                                       point="default", seed=seed) for seed in (0, 1)]


def two_bilstm_students_sharing_a_gpu(config):
    config["experiments"]["universal_kd_table5"].update(students=["bilstm"], methods={"no_kd": None}, seeds=[0, 1])
    config["gpu_sharing"] = {"bilstm": 2}


def log_span(workdir, student):
    """The times of the first and last lines of a student job's log."""
    run = student.removeprefix(f"{paths.STUDENTS}/")
    lines = (workdir / "logs/distill_student" / f"{run}.log").read_text()
    stamps = [datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f") for line in lines.splitlines() if line[:2] == "20"]
    return stamps[0], stamps[-1]


@pytest.mark.slow
def test_small_students_packed_two_to_a_gpu_run_at_once_in_one_job_and_equal_runs_one_at_a_time(tmp_path, cluster):
    """Issue 34, item 4: with gpu_sharing {bilstm: 2}, kdflow.workflow.gpu_packs submits the two ready BiLSTM
    students as one SLURM job with one GPU, in which both train at the same time; run again one after the other,
    outside SLURM, they end with the same weights and records."""
    workdir = copy_repo(tmp_path / "kdflow")
    write_test_setup(workdir, cluster, two_bilstm_students_sharing_a_gpu)
    targets = [f"{student}/metrics.json" for student in PACKED]
    # the targets first: --omit-from and --forcerun take every name that follows them
    snakemake("--cores", "2", *targets, "--omit-from", "distill_student", cwd=workdir)  # what they learn from
    packed = run_while_progressing([sys.executable, "-m", "kdflow.workflow.gpu_packs", "--profile", "slurm-test",
                                    "--submit", "--wait", *targets], cwd=workdir)
    assert packed.returncode == 0, packed.stdout
    (job,) = re.findall(r"SLURM job (\d+)", packed.stdout)
    partition, tres, state = slurm_record(job, "Partition", "AllocTRES", "State")
    assert (partition, state) == ("gpu", "COMPLETED") and re.search(r"gres/gpu=1(,|$)", tres), tres
    (first_start, first_end), (second_start, second_end) = (log_span(workdir, student) for student in PACKED)
    assert first_start < second_end and second_start < first_end, "the two students did not train at once"
    at_once = [trained_outcome(workdir / student, "metrics.json") for student in PACKED]
    snakemake("--cores", "1", *targets, "--forcerun", "distill_student", cwd=workdir)  # one at a time, no SLURM
    assert [trained_outcome(workdir / student, "metrics.json") for student in PACKED] == at_once


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
    states = asyncio.run(plugin.query_job_status("sacct -X --name this-run --noheader", None))
    assert states == ({"7": "CANCELLED"}, 0.1)
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
    teacher, student, probe = fake_job(f"{paths.RESULTS}/teacher/model"), \
        fake_job(f"{paths.RESULTS}/a.json", f"{paths.RESULTS}/b.json"), fake_job(f"{paths.RESULTS}/probe.json")
    record_submission(teacher, "11")
    record_submission(fake_group(student, fake_job(f"{paths.RESULTS}/c.json")), "12")
    assert recorded_submissions(student) == {"12"} and recorded_submissions(probe) == set()
    running = {}
    monkeypatch.setattr(slurm_status, "active_jobs", lambda ids, workdir, run_id: {
        job: running[job] for job in ids if job in running})
    executor = SimpleNamespace(run_uuid="this-run")
    assert earlier_job(executor, teacher) is None  # job 11 has ended: submit
    running["11"] = {"state": "RUNNING", "name": "earlier-run", "log": "11.log"}
    assert earlier_job(executor, teacher) == ("11", running["11"])
    running["12"] = {"state": "PENDING", "name": "earlier-run", "log": "12.log"}
    assert earlier_job(executor, fake_group(student, fake_job(f"{paths.RESULTS}/c.json")))[0] == "12"
    with pytest.raises(WorkflowError, match="SLURM job.s. 12 of an earlier snakemake run still write outputs"):
        earlier_job(executor, fake_group(student, probe))


def test_a_slurm_job_counts_as_earlier_only_if_queued_or_running_here_under_another_run(tmp_path, monkeypatch):
    """squeue's answer, read: jobs of this run, of another directory or no longer active are not followed."""
    here = str(tmp_path)
    lines = [f"5|RUNNING|earlier|{here}|{here}/.snakemake/slurm_logs/rule_x/%j.log",
             f"6|RUNNING|this-run|{here}|{here}/6.log", "7|PENDING|earlier|/elsewhere|/elsewhere/7.log",
             f"8|COMPLETED|earlier|{here}|{here}/8.log"]
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: SimpleNamespace(stdout="\n".join(lines)))
    assert active_jobs({"5", "6", "7", "8"}, here, "this-run") == {
        "5": {"state": "RUNNING", "name": "earlier", "log": f"{here}/.snakemake/slurm_logs/rule_x/5.log"}}


def test_watching_a_run_skips_a_log_deleted_after_it_was_listed(tmp_path):
    """The SLURM executor deletes a succeeded job's log while the run is watched: a log listed, then gone, is no
    longer part of what moved (it once failed the watch with FileNotFoundError)."""
    log = tmp_path / "23.log"
    log.write_text("done\n")
    listed = sorted(tmp_path.rglob("*"))
    assert [file_size(path) for path in listed] == [5]
    log.unlink()
    assert [file_size(path) for path in listed] == [None]
    assert file_size(tmp_path) is None  # a folder is not a log
