"""Snakemake's scheduler corrected to keep one pending re-evaluation timer (kdflow.workflow.scheduler_timers)."""

import threading
import time
from types import SimpleNamespace

import pytest
from snakemake.scheduling.job_scheduler import JobScheduler

from kdflow.workflow.scheduler_timers import correct_scheduler_timers


def timer_threads():
    return sum(isinstance(thread, threading.Timer) and thread.is_alive() for thread in threading.enumerate())


def eventually(condition, timeout=5.0) -> bool:
    """Whether ``condition`` holds within ``timeout`` seconds, polled: a timer's thread ends a moment after its
    wake-up ran, later on a busy machine."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def corrected(monkeypatch):
    """The correction, undone after the test: the rest of the process keeps the scheduler it had."""
    monkeypatch.setattr(JobScheduler, "_schedule_reevalutation", JobScheduler.__dict__["_schedule_reevalutation"])
    correct_scheduler_timers()
    correct_scheduler_timers()  # once per process, however often the Snakefile is read


def test_rounds_that_end_while_a_timer_is_pending_start_no_more_timers(corrected):
    """Each scheduling round ends by asking for a re-evaluation; 50 rounds, as after 50 jobs finished, leave one
    pending timer (Snakemake's own leaves 50, each of which starts a round and a timer again when it fires), and its
    wake-up lets the next round start a timer again."""
    scheduler = SimpleNamespace(_open_jobs=threading.Semaphore(0))
    before = timer_threads()
    for _ in range(50):
        JobScheduler._schedule_reevalutation(scheduler, 1.0)  # 1 s: pending still while the count is taken
    assert timer_threads() - before == 1
    assert scheduler._open_jobs.acquire(timeout=5)  # the one timer woke the scheduler
    assert not scheduler._open_jobs.acquire(timeout=0.5)  # once
    JobScheduler._schedule_reevalutation(scheduler, 0.01)  # the round it woke asks again: a new timer
    assert scheduler._open_jobs.acquire(timeout=5)
    assert eventually(lambda: timer_threads() == before)  # and no timer is left behind
