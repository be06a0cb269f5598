"""The pilot (kdflow.reporting.pilot, issue 34 item 2): on a hand-made plan, which jobs it takes, what it takes
with them, what it leaves to the calibration's pooled figures, and its targets."""

import pandas as pd
import pytest

from kdflow.reporting.pilot import ancestry, main, pilot_jobs, pilot_summary
from kdflow.workflow import results_paths as paths


def dag_job(rule: str, output: str, inputs=(), benchmark: bool = True) -> dict:
    return {"rule": rule, "output": [output], "input": list(inputs),
            "benchmark": paths.benchmark(output) if benchmark else None}


def plan_row(rule: str, seconds: float, family: str = "transformer", layers: int = 4, parameters: float = 1e6,
             task: str = "a", device: str = "H100") -> dict:
    return {"rule": rule, "section": "experiment", "task": task, "family": family, "layers": layers,
            "parameters": parameters, "device": device, "precision": "bf16", "gpu_share": 1.0, "seconds": seconds}


# Two tasks: a's teacher is cheap, b's dear. Each task's student runs on its teacher's signals. b's student is the
# cheaper run alone (10 s against 60 s) but needs b's teacher (1,000 s); a table reads both students.
DAG = [dag_job("prepare_task", "data/a"), dag_job("prepare_task", "data/b"),
       dag_job("finetune_teacher", "teacher/a", ["data/a"]), dag_job("finetune_teacher", "teacher/b", ["data/b"]),
       dag_job("compute_teacher_signals", "signals/a", ["teacher/a", "data/a"]),
       dag_job("compute_teacher_signals", "signals/b", ["teacher/b", "data/b"]),
       dag_job("distill_student", "student/a", ["signals/a", "data/a"]),
       dag_job("distill_student", "student/b", ["signals/b", "data/b"]),
       dag_job("paper_table", "table", ["student/a", "student/b"]),
       dag_job("all", "done", ["table"], benchmark=False)]
PLAN = pd.DataFrame([plan_row("prepare_task", 1, family="none", layers=0, parameters=0),
                     plan_row("prepare_task", 1, family="none", layers=0, parameters=0, task="b"),
                     plan_row("finetune_teacher", 100, layers=12, parameters=1e8),
                     plan_row("finetune_teacher", 1000, layers=12, parameters=1e8, task="b"),
                     plan_row("compute_teacher_signals", 20, layers=12, parameters=1e8),
                     plan_row("compute_teacher_signals", 200, layers=12, parameters=1e8, task="b"),
                     plan_row("distill_student", 60, family="lstm", layers=1),
                     plan_row("distill_student", 10, family="lstm", layers=1, task="b"),
                     plan_row("paper_table", 3, family="none", layers=0, parameters=0)]
                    ).assign(benchmark=[job["benchmark"] for job in DAG if job["benchmark"]])


def test_ancestry_holds_every_job_a_job_needs_directly_or_not():
    needs = ancestry([job for job in DAG if job["benchmark"]])
    assert needs[6] == {0, 2, 4} and needs[8] == set(range(8)) and needs[0] == set()


def test_each_group_gets_the_job_that_adds_least_with_what_it_needs_and_tables_are_left_out():
    """The student on a costs 60 s on top of a's teacher, taken for the teachers' group; the one on b would add
    10 + 1,000 + 200 + 1 s. The table is a start-up alone, with every experiment as input: not in the pilot."""
    pilot = pilot_jobs(PLAN, DAG)
    assert list(pilot.target) == ["data/a", "teacher/a", "signals/a", "student/a"]
    assert pilot.reason.tolist() == ["needed by teacher/a", "calibrates finetune_teacher: transformer on H100 bf16",
                                     "calibrates compute_teacher_signals: transformer on H100 bf16",
                                     "calibrates distill_student: lstm on H100 bf16"]
    assert pilot.benchmark.tolist() == [paths.benchmark(t) for t in pilot.target]


def test_a_second_model_size_is_measured_only_where_it_is_cheap():
    """A 2-layer student on b beside the 1-layer ones: it is a size of its own, but its run would add b's teacher
    and signals (1,211 s in all): within a 2,000 s limit it is taken, under 1,000 s it is left to the family's
    figures, and the summary says how many sizes are measured."""
    plan = PLAN.copy()
    plan.loc[7, "layers"] = 2
    assert "student/b" in set(pilot_jobs(plan, DAG, size_seconds=2000).target)
    pilot = pilot_jobs(plan, DAG, size_seconds=1000)
    assert "student/b" not in set(pilot.target) and "teacher/b" not in set(pilot.target)
    assert "4 of 9 jobs, 0.05 of 0.39 planned GPU-hours" in pilot_summary(pilot, plan)  # 181 s of 1,395
    assert "it measures 3 of the plan's 4 model sizes" in pilot_summary(pilot, plan)


def test_a_group_whose_cheapest_run_is_too_dear_is_left_out():
    """With a 50 s limit, no teacher fits (100 s with its data): nothing that needs one is taken either."""
    assert pilot_jobs(PLAN, DAG, family_seconds=50, size_seconds=50).empty


def test_a_plan_that_does_not_match_the_dag_is_refused():
    with pytest.raises(ValueError, match="the plan has 8 jobs but the DAG 9"):
        pilot_jobs(PLAN.iloc[:-1], DAG)


def test_the_targets_print_one_per_line(tmp_path, capsys):
    pilot_jobs(PLAN, DAG).to_csv(tmp_path / "pilot.csv", index=False)
    main(str(tmp_path / "pilot.csv"))
    assert capsys.readouterr().out.split() == ["data/a", "teacher/a", "signals/a", "student/a"]
