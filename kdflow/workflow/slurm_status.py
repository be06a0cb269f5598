"""Two things the SLURM executor plugin (snakemake-executor-plugin-slurm, checked on 2.8.0) gets wrong, corrected
from the workflow (issue 33); :func:`correct_slurm_plugin` installs both, once per process.

**A cancelled job.** For a job cancelled by a user or an admin, `sacct` reports the state ``CANCELLED by <uid>``.
The plugin compares the whole string with its failure states, so it takes such a job for a running one and
Snakemake waits for it forever, retrying nothing. The old cookiecutter profile had the same bug and fixed it the
same way (Snakemake-Profiles/slurm PR #22): the status query's states are read by their first word.

**Jobs of a lost `snakemake` process.** When the `snakemake` process dies (a closed SSH session, SIGKILL), its
SLURM jobs keep running and their outputs stay marked incomplete. Started again, with the profile's
`rerun-incomplete`, Snakemake submits each of them a second time, and two jobs write the same outputs at once
(tried on the local cluster): the plugin cannot adopt jobs, and Snakemake's record of a job's SLURM id, in its
incomplete marker, is overwritten by the job itself when it starts. So the workflow keeps its own record of the
SLURM job that writes each output (``.snakemake/kdflow/slurm_jobs``), and before it submits a job, asks SLURM
whether the recorded one is still queued or running in this directory; if it is, Snakemake follows that job (its
status, its log, its retry) instead of submitting a new one, and records the job's metadata when it ends, as if
it had submitted it. A group job is followed only if all its jobs belong to one earlier job; otherwise it fails
with what to do, rather than run twice.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
from pathlib import Path

# SLURM states of a job that may still write its outputs (squeue's long names).
STILL_ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
                "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "PREEMPTED", "RESV_DEL_HOLD"}


def first_word(states: dict[str, str] | None) -> dict[str, str] | None:
    """SLURM job id -> its state, "CANCELLED by 1000" as "CANCELLED" (other states are one word already)."""
    return None if states is None else {job: state.split(" ", 1)[0] for job, state in states.items()}


def with_names(command: str, names: set[str]) -> str:
    """A status query (sacct or squeue, which select the run's jobs with ``--name <run id>``) that also reports
    the jobs named ``names``: those of earlier runs that this run follows."""
    if not names:
        return command
    return re.sub(r"(--name[ =])(\S+)", lambda m: m.group(1) + ",".join([m.group(2), *sorted(names)]), command, 1)


def active_jobs(job_ids: set[str], workdir: str, run_id: str) -> dict[str, dict[str, str]]:
    """Of the SLURM jobs ``job_ids``, those still queued or running that an earlier run (a job name other than
    ``run_id``) submitted from ``workdir``: id -> their ``state``, ``name`` and ``log`` (the path of their output).
    A job SLURM no longer knows has ended."""
    if not job_ids:
        return {}
    try:
        lines = subprocess.run(
            ["squeue", "--noheader", "--jobs", ",".join(sorted(job_ids)),
             "--Format", "JobID:|,State:|,Name:|,WorkDir:|,STDOUT:"],
            capture_output=True, text=True, timeout=60, check=False,
        ).stdout.splitlines()  # empty, with an error, when SLURM knows none of them
    except (OSError, subprocess.TimeoutExpired):  # no answer: submit, as Snakemake alone would
        return {}
    found = {}
    for line in lines:
        job, state, name, directory, log = (field.strip() for field in line.split("|", 4))
        if state in STILL_ACTIVE and name != run_id and os.path.realpath(directory) == os.path.realpath(workdir):
            found[job] = {"state": state, "name": name, "log": log.replace("%j", job)}
    return found


SUBMISSIONS = Path(".snakemake/kdflow/slurm_jobs")  # one file per output: the SLURM id of the job that writes it


def members(job):
    return list(job.jobs) if job.is_group() else [job]


def submission_record(output) -> Path:
    return SUBMISSIONS / hashlib.sha1(str(output).encode()).hexdigest()


def record_submission(job, slurm_id: str) -> None:
    """Note ``slurm_id`` as the SLURM job that writes each output of ``job`` (each job of a group job)."""
    SUBMISSIONS.mkdir(parents=True, exist_ok=True)
    for member in members(job):
        for output in member.output:
            submission_record(output).write_text(slurm_id)


def recorded_submissions(job) -> set[str]:
    """The SLURM ids recorded for ``job``'s outputs."""
    paths = (submission_record(output) for output in job.output)
    return {path.read_text().strip() for path in paths if path.exists()}


def earlier_job(executor, job) -> tuple[str, dict[str, str]] | None:
    """The SLURM job of an earlier run that still writes ``job``'s outputs, as (id, its details), or None if
    there is none. Raises a WorkflowError for a group job that only partly belongs to one."""
    from snakemake_interface_common.exceptions import WorkflowError

    recorded = [recorded_submissions(member) for member in members(job)]
    alive = active_jobs(set().union(*recorded), os.getcwd(), executor.run_uuid)
    if not alive:
        return None
    if len(alive) == 1 and all(ids & alive.keys() for ids in recorded):
        return next(iter(alive.items()))
    raise WorkflowError(
        f"SLURM job(s) {', '.join(sorted(alive))} of an earlier snakemake run still write outputs of {job}, whose "
        "other jobs they do not cover: wait for them to end (squeue --jobs), or cancel them (scancel), then run "
        "snakemake again"
    )


def follow_or_submit(run_job):
    """The plugin's ``Executor.run_job``, following a job of an earlier run where one still writes the outputs."""

    @functools.wraps(run_job)
    def run_or_follow(self, job):
        from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo

        # This runs in the plugin's submission thread, which drops exceptions: each one becomes the job's error.
        try:
            earlier = earlier_job(self, job)
        except Exception as error:
            self._report_job_error_threadsafe(SubmittedJobInfo(job), str(error))
            return
        if earlier is None:
            return run_job(self, job)
        slurm_id, details = earlier
        followed_runs.add(details["name"])
        self.logger.info(f"Job {job.jobid} is still {details['state'].lower()} as SLURM job {slurm_id}, submitted by "
                         "an earlier snakemake run: following it instead of submitting it again "
                         f"(log: {details['log']}).")
        self._report_job_submission_threadsafe(
            SubmittedJobInfo(job, external_jobid=slurm_id, aux={"slurm_logfile": Path(details["log"])}))

    run_or_follow.follows_earlier_jobs = True
    return run_or_follow


followed_runs: set[str] = set()  # the SLURM job names (run ids) of earlier runs whose jobs this process follows


def record_then_report(report):
    """The plugin's ``report_job_submission``, noting first which SLURM job writes the job's outputs."""

    @functools.wraps(report)
    def report_submission(self, job_info, *args, **kwargs):
        if job_info.external_jobid:
            record_submission(job_info.job, str(job_info.external_jobid))
        return report(self, job_info, *args, **kwargs)

    report_submission.records_submissions = True
    return report_submission


def read_states(query):
    """The plugin's status query, with states by their first word and the followed jobs of earlier runs."""

    @functools.wraps(query)
    async def query_first_word(command, *args, **kwargs):
        states, seconds = await query(with_names(command, followed_runs), *args, **kwargs)
        return first_word(states), seconds

    query_first_word.recognises_cancelled_jobs = True
    return query_first_word


def correct_slurm_plugin() -> None:
    """Install both corrections in the installed plugin, once per process; a no-op where the plugin is not
    installed."""
    try:
        import snakemake_executor_plugin_slurm as plugin
    except ImportError:
        return
    query = getattr(plugin, "query_job_status", None)
    if query is not None and not getattr(query, "recognises_cancelled_jobs", False):
        plugin.query_job_status = read_states(query)
    executor = plugin.Executor
    if not getattr(executor.run_job, "follows_earlier_jobs", False):
        executor.run_job = follow_or_submit(executor.run_job)
    if not getattr(executor.report_job_submission, "records_submissions", False):
        executor.report_job_submission = record_then_report(executor.report_job_submission)
