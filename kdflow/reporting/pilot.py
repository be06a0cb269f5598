"""The pilot (issue 34, item 2): the fewest, cheapest jobs of the plan that calibrate it, so that a researcher
pays hours, not the plan's thousands, to learn what the plan costs on their cluster.

The calibration (:mod:`kdflow.reporting.calibration`) fits its figures per group of jobs: rule family, model
family, device and precision. The pilot takes, per rule and model family on each device and precision
(:data:`FAMILY`), the job whose run adds least to the pilot, the jobs it needs included (a student's teacher, its
teacher signals, its data), then one more per model size (:data:`SIZE`: layers and parameters) where that is cheap,
so that the fit sees sizes apart. Groups are taken in the order data flows (the DAG's rule order): the cheapest
teacher of a model comes first, and its students then cost their own runs alone. A group whose cheapest run would
add more than a limit is left to the figures of its rule family on its device; tables and figures (a start-up
each, with inputs from whole experiments) and the plan's own rules are left out.

The pilot's jobs are jobs of the full run, not shortened copies: their outputs are the run's own, so the launch
after the pilot redoes none of them, and each is measured as it will run (its epochs, dev checks and data
loading), where a run with capped steps would leave those to extrapolation. The price: a model size that only
comes in long jobs (the thesis's size exploration on large transfer sets) is not measured by the pilot; the
calibration prices it with its family's figures, and `make plan` refits it once its first job has run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from kdflow.reporting.calibration import OTHER_RULES, PLAN_RULES, with_groups
from kdflow.workflow.cost_plan import charged_share

FAMILY = ["rule", "family", "device", "precision"]  # a pilot job each (a calibration group of the rule's)
SIZE = FAMILY + ["layers", "parameters"]  # a pilot job each where it is cheap
FAMILY_SECONDS = 2 * 3600.0  # the most a calibration group's pilot job may add (its inputs' jobs included)
SIZE_SECONDS = 1800.0  # the most each further model size's may add
COLUMNS = ["rule", "section", "task", "family", "layers", "parameters", "device", "precision", "seconds", "target",
           "benchmark", "reason"]


def calibrated_jobs(plan: pd.DataFrame) -> pd.DataFrame:
    """The jobs of ``plan`` (with its rule families, :func:`kdflow.reporting.calibration.with_groups`) whose cost
    the pilot measures: all but tables and figures and the plan's own."""
    return plan[(plan.rule_family != OTHER_RULES) & ~plan.rule.isin(PLAN_RULES)]


def ancestry(dag: list[dict]) -> list[frozenset[int]]:
    """Per job of ``dag`` (:func:`kdflow.workflow.dag_jobs.workflow_jobs`), the positions of every job whose output
    it needs, directly or not. (Recursive: the depth is the DAG's, data to probes, not its number of jobs.)"""
    producer = {path: i for i, job in enumerate(dag) for path in job["output"]}
    found: dict[int, frozenset[int]] = {}

    def of(i: int) -> frozenset[int]:
        if i not in found:
            parents = {producer[path] for path in dag[i]["input"] if path in producer}
            found[i] = frozenset(parents).union(*(of(p) for p in parents))
        return found[i]

    return [of(i) for i in range(len(dag))]


def pilot_jobs(jobs: pd.DataFrame, dag: list[dict], family_seconds: float = FAMILY_SECONDS,
               size_seconds: float = SIZE_SECONDS) -> pd.DataFrame:
    """The pilot of a plan: ``jobs`` is the plan (:func:`kdflow.workflow.cost_plan.cost_plan`, one row per job of
    ``dag`` that has a benchmark file, in ``dag``'s order). Every calibration group (:data:`FAMILY`) gets the job
    whose run adds least to the pilot, if that is at most ``family_seconds``; then every model size (:data:`SIZE`)
    without a job in the pilot gets its own, if it adds at most ``size_seconds``. A group or size left out is
    priced by the figures of its rule family on its device (:mod:`kdflow.reporting.calibration`).
    Returns the pilot's jobs in the DAG's order (:data:`COLUMNS`): ``target``, the job's first output (what to ask
    Snakemake for); ``reason``, what it calibrates, or the pilot job that needs it."""
    runs = [job for job in dag if job["benchmark"]]
    if len(runs) != len(jobs):
        raise ValueError(f"the plan has {len(jobs)} jobs but the DAG {len(runs)} with a benchmark file")
    plan = with_groups(jobs.reset_index(drop=True))
    seconds = plan.seconds.to_numpy()
    needs = ancestry(runs)
    chosen: dict[int, str] = {}

    def marginal(i: int) -> float:
        return sum(seconds[j] for j in needs[i] | {i} if j not in chosen)

    def take(i: int, why: str) -> None:
        chosen[i] = why + (f"; {chosen[i]}" if i in chosen else "")
        for j in sorted(needs[i]):
            chosen.setdefault(j, f"needed by {runs[i]['output'][0]}")

    candidates = calibrated_jobs(plan)
    for columns, limit in ((FAMILY, family_seconds), (SIZE, size_seconds)):
        for key, group in candidates.groupby(columns, sort=False):  # the DAG's order: teachers before students
            if any(i in chosen for i in group.index):  # measured already, as another pilot job's input
                continue
            best = min(group.index, key=lambda i: (marginal(i), seconds[i], i))
            if marginal(best) <= limit:
                take(best, f"calibrates {key[0]}: {key[1]} on {key[2]} {key[3]}" + (
                    f", {key[4]} layers, {key[5] / 1e6:.3g}M parameters" if columns is SIZE else ""))
    order = sorted(chosen)
    return plan.loc[order].assign(target=[runs[i]["output"][0] for i in order],
                                  reason=[chosen[i] for i in order])[COLUMNS].reset_index(drop=True)


def pilot_summary(pilot: pd.DataFrame, jobs: pd.DataFrame) -> str:
    """What the pilot costs against the whole plan, and how many of the plan's model sizes it measures. The plan's
    hours are those it charges (a shared GPU's by share); the pilot's jobs run one to a GPU."""
    def hours(frame: pd.DataFrame, gpu: bool) -> float:
        return frame.seconds[(frame.device != "cpu") == gpu].sum() / 3600

    charged = jobs.assign(seconds=jobs.seconds * charged_share(jobs))

    sizes = set(calibrated_jobs(with_groups(jobs))[SIZE].itertuples(index=False, name=None))
    measured = sizes & set(pilot[SIZE].itertuples(index=False, name=None))
    gpu = (f"{hours(pilot, True):.2f} of {hours(charged, True):.2f} planned GPU-hours and "
           if (jobs.device != "cpu").any() else "")
    return (f"The pilot: {len(pilot)} of {len(jobs)} jobs, {gpu}{hours(pilot, False):.2f} of "
            f"{hours(charged, False):.2f} planned CPU-hours; it measures "
            f"{len(measured)} of the plan's {len(sizes)} model sizes (rule, model, device)" + (
                "; the others are priced by their rule family's figures." if len(measured) < len(sizes) else "."))


def main(path: str) -> None:
    """Print the pilot's targets (results/pilot.csv), one per line, for ``snakemake $(...)``."""
    print("\n".join(pd.read_csv(Path(path), keep_default_na=False).target))


if __name__ == "__main__":
    main(*sys.argv[1:2])
