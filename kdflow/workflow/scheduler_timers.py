"""A leak in Snakemake's scheduler (checked on 9.27.1), corrected from the workflow: :func:`correct_scheduler_timers`.

With a job rate limit, which every run has (``--max-jobs-per-timespan`` defaults to 100/1s), the scheduler ends each
of its rounds by starting a timer that, one timespan later, wakes the scheduler for another round. That round starts
another timer, and so on: every wake-up that is not a timer's (a job finished, a job submitted) adds a chain of
timers that never ends. After N such events the scheduler runs about N rounds a second, each taking its lock and
looking at every ready job. On the demo (170 jobs) the main `snakemake` process held 162 pending timer threads at
the end and spent 20% of a core on them; a full run's 18,000 jobs would keep a login node's core busy with nothing.
One pending timer does what they are for (a round after the rate limit's timespan), so a round starts a new one
only when none is pending.
"""

from __future__ import annotations

import threading


def correct_scheduler_timers() -> None:
    """Make Snakemake's scheduler keep one pending re-evaluation timer at most (once per process)."""
    from snakemake.scheduling.job_scheduler import JobScheduler

    if getattr(JobScheduler._schedule_reevalutation, "one_pending_timer", False):
        return

    def schedule_reevaluation(self, delay: float) -> None:
        if getattr(self, "_kdflow_timer_pending", False):
            return
        self._kdflow_timer_pending = True

        def wake():
            self._kdflow_timer_pending = False  # before the round it starts, which may need the next timer
            self._open_jobs.release()

        timer = threading.Timer(delay, wake)
        timer.daemon = True
        timer.start()

    schedule_reevaluation.one_pending_timer = True
    JobScheduler._schedule_reevalutation = schedule_reevaluation
