"""Process-level set-up shared by every rule script: logging to the rule's log, threads, input checks and one-line
errors. No torch here: a job that reads and writes tables never imports it (kdflow.core.devices has the rest)."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import resource
import sys
from pathlib import Path

from kdflow.core.errors import Terminated, UserError
from kdflow.core.intermediates import RESULTS, DamagedFile, check_inputs
from kdflow.core.io import set_aside

log = logging.getLogger("kdflow")


def setup_logging(path: str | None = None, level: int = logging.INFO, tag: str = "", append: bool = False) -> None:
    """Send kdflow's log records (and warnings) from ``level`` up to ``path`` (the rule's log file, emptied
    first unless ``append``) and to stderr, each line marked with ``tag`` if given (a process's rank)."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if path:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        if not append:
            open(path, "w").close()
        # Append mode even for the first process: the ranks of a multi-GPU job write to the same file.
        handlers.append(logging.FileHandler(path, mode="a"))
    marker = f"[{tag}] " if tag else ""
    logging.basicConfig(
        level=level, format=f"%(asctime)s %(levelname)s {marker}%(message)s", handlers=handlers, force=True
    )
    logging.captureWarnings(True)


def set_threads(threads: int) -> None:
    """Match torch's intra-op threads to what the scheduler gave the job (rule ``threads``): through the
    environment, which torch reads when imported (a job that never imports it starts 2-3 s sooner), and directly
    where it already is."""
    threads = max(1, int(threads))
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


@contextlib.contextmanager
def rule_job(snakemake):
    """Set up a rule script's process (log file, threads), check its inputs that kdflow wrote, and turn user
    errors into one clear log line. The job's own CPU time is written beside its benchmark when it ends
    (:func:`record_usage`)."""
    setup_logging(snakemake.log[0] if snakemake.log else None)
    set_threads(snakemake.threads)
    usage = usage_file(snakemake.log[0]) if snakemake.log else None
    if usage is not None:
        usage.unlink(missing_ok=True)  # an earlier attempt's: a job killed before its end leaves none
    try:
        check_inputs(snakemake.input)
        yield
    except DamagedFile as error:
        log.error("%s", damaged_input(error, list(snakemake.input)))
        sys.exit(1)
    except Terminated as error:
        log.error("%s. %s", error, time_limit_hint(snakemake.rule, snakemake.resources.get("runtime")))
        sys.exit(1)
    except (UserError, FileNotFoundError) as error:
        log.error("%s", error)
        sys.exit(1)
    except OSError as error:  # the machine's, not kdflow's: said in one line, with what to do
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            log.error("%s (a full disk or a quota) while this job wrote its outputs or checkpoint: free space, then "
                      "run snakemake again", error.strerror)
        elif error.errno in (errno.EACCES, errno.EROFS):
            log.error("%s: %s: make it writable, then run snakemake again", error.strerror, error.filename)
        else:
            raise
        sys.exit(1)
    finally:
        if usage is not None:
            try:
                record_usage(usage)
            except OSError as error:  # a measure, never a reason to fail the job or hide its own error
                log.warning("could not record this job's CPU time at %s: %s", usage, error.strerror)


def usage_file(log_file: str | Path) -> Path | None:
    """Where a job's own CPU time goes, beside its benchmark file, which lies at its log's path (``logs/<job>.log``,
    ``results/benchmarks/<job>.tsv``): kdflow.workflow.results_paths.job_usage reads it there. None for a log
    elsewhere."""
    log, logs = Path(log_file).resolve(), Path("logs").resolve()
    if not log.is_relative_to(logs):
        return None
    return Path(RESULTS, "benchmarks", log.relative_to(logs)).with_suffix(".usage.json")


def record_usage(path: Path) -> None:
    """This process's CPU seconds (user and system, its ended children's included: a data-parallel job's ranks)
    and peak resident memory, as JSON at ``path``. Measured by the kernel, it misses nothing, where Snakemake's
    benchmark samples a job every 0.5 s for 15 s, then every 30 s, and undercounts what a loaded machine delays."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cpu_seconds": round(cpu, 3),
                                "max_rss_mb": round(max(own.ru_maxrss, children.ru_maxrss) / 1024, 1)}) + "\n")


def time_limit_hint(rule: str, runtime) -> str:
    """What to change when SIGTERM was SLURM's time limit (or a preemption, or scancel: the job cannot tell)."""
    had = f" (this attempt had {runtime} min)" if runtime else ""
    return (f"If it was stopped at its time limit{had}, give rule {rule} a larger `runtime`: under `resources` in the "
            "config section it reads (`teachers.<name>`, `experiments.<name>`, `generation` or `probing`) or the "
            "top-level `resources`; the slurm profile's retry doubles it")


def damaged_input(error: DamagedFile, inputs: list[str]) -> str:
    """Set aside the job input (file or directory) that holds a damaged file, so that the next run of snakemake
    sees it missing and reruns the job that writes it; say so. A rerun of this job alone would fail the same way."""
    holder = next((Path(p) for p in inputs if Path(p) == error.path or Path(p) in error.path.parents), None)
    if holder is None:
        return f"{error}: rebuild it with `snakemake --forcerun {error.path}`"
    aside = set_aside(holder)
    moved = "" if holder == error.path else f" {holder}"
    return f"{error}: set{moved} aside as {aside}; run snakemake again to rebuild it"
