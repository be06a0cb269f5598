"""A `scancel` the SLURM executor plugin would not notice (issue 33).

For a job cancelled by a user or an admin, `sacct` reports the state ``CANCELLED by <uid>``. The plugin
(snakemake-executor-plugin-slurm, checked on 2.8.0) compares the whole string with its failure states, so it
takes such a job for a running one and Snakemake waits for it forever, retrying nothing. The old cookiecutter
profile had the same bug and fixed it the same way (Snakemake-Profiles/slurm PR #22). Until the plugin reads the
state's first word, :func:`recognise_cancelled_jobs` wraps its status query to do so; nothing else changes.
"""

from __future__ import annotations

import functools


def first_word(states: dict[str, str] | None) -> dict[str, str] | None:
    """SLURM job id -> its state, "CANCELLED by 1000" as "CANCELLED" (other states are one word already)."""
    return None if states is None else {job: state.split(" ", 1)[0] for job, state in states.items()}


def recognise_cancelled_jobs() -> None:
    """Wrap the installed plugin's status query, once per process; a no-op where the plugin is not installed or
    no longer queries through ``query_job_status``."""
    try:
        import snakemake_executor_plugin_slurm as plugin
    except ImportError:
        return
    query = getattr(plugin, "query_job_status", None)
    if query is None or getattr(query, "recognises_cancelled_jobs", False):
        return

    @functools.wraps(query)
    async def query_first_word(*args, **kwargs):
        states, seconds = await query(*args, **kwargs)
        return first_word(states), seconds

    query_first_word.recognises_cancelled_jobs = True
    plugin.query_job_status = query_first_word
