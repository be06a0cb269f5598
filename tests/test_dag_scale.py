"""Issue 51: the SLURM profile's grouping and default resources keep Snakemake's dry run (its DAG and its simulated
scheduling) as linear in the jobs as Snakemake's own. A synthetic workflow with kdflow's shape (students, a selection
and a figure per experiment and a paper table that read every student) is planned with and without the profile;
benchmarks/dag_scale.py measures the real workflow."""

import resource
import sys
from string import Template

import pytest
import yaml

from conftest import REPO, run_while_progressing

from kdflow.workflow import results_paths as paths

# In kdflow's layout, less the seeds: $name stands for kdflow.workflow.results_paths.NAME
SNAKEFILE = Template('''
N = int(config["students"])
EXPERIMENTS = ["a", "b"]


def students(experiment):
    return expand("$student_method_dir/p{i}/metrics.json", experiment=experiment, task="sst2", student="bert",
                  method="kd", i=range(N))


rule all:
    input: "$tables/papers.md", expand("$figures/{e}.pdf", e=EXPERIMENTS)

rule distill_student:
    output: "$student_method_dir/{point}/metrics.json"
    resources: mem_mb=1000, runtime=lambda wildcards, attempt: 10 * attempt
    shell: "touch {output}"

rule select_students:
    input: lambda wildcards: students(wildcards.experiment)
    output: "$selection"
    resources: mem_mb=1000
    shell: "touch {output}"

rule figure_experiment_curves:
    input: "$selection", lambda wildcards: students(wildcards.experiment)
    output: "$figures/{experiment}.pdf"
    resources: mem_mb=1000
    shell: "touch {output}"

rule paper_table:
    input: expand("$selection", experiment=EXPERIMENTS), [s for e in EXPERIMENTS for s in students(e)]
    output: "$tables/papers.md"
    resources: mem_mb=1000
    shell: "touch {output}"
''').substitute(student_method_dir=paths.STUDENT_METHOD_DIR, selection=paths.SELECTION, figures=paths.FIGURES,
                 tables=paths.TABLES)
# What of slurm/config.yaml shapes the DAG and its scheduling (the rest configures the SLURM plugin, absent here).
SCHEDULING_KEYS = ("default-resources", "resources", "set-resource-scopes", "groups", "group-components")


def dry_run_cpu_seconds(workdir, students: int, *profile: str) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run_while_progressing([sys.executable, "-m", "snakemake", "-n", "--cores", "1", *profile, "--config",
                                    f"students={students}"], merged=False, cwd=workdir)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, result.stdout


@pytest.mark.slow
def test_the_profiles_grouping_and_resources_add_little_to_snakemakes_own_dry_run(tmp_path):
    """1,600 students planned with the profile cost at most twice their plain dry run, net of the start-up (a run
    of 10 students); 1.1-1.35 in three runs on 2 cores. The profile as it was (selections and tables grouped; Snakemake's default disk of twice
    the input size) cost 3.4-4 times, and grew with the square of the students: its readiness check walks a group's
    jobs and all their inputs each time one input finishes. Snakemake's own dry run is the yardstick, not the same
    profile at half the students: on 2 cores the ratio of 2n to n students varies from 1.8 to 2.8 between runs."""
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    profile = yaml.safe_load((REPO / "slurm/config.yaml").read_text())
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile/config.yaml").write_text(yaml.safe_dump({key: profile[key] for key in SCHEDULING_KEYS}))
    start_up, _ = dry_run_cpu_seconds(tmp_path, 5)
    plain, _ = dry_run_cpu_seconds(tmp_path, 800)
    with_profile, planned = dry_run_cpu_seconds(tmp_path, 800, "--profile", "profile")
    assert "Group job students_a_sst2_bert_kd" in planned  # the profile's groups are in force
    ratio = (with_profile - start_up) / (plain - start_up)
    print(f"start-up {start_up:.2f} CPU-s; 1,600 students: plain {plain:.2f}, with the profile {with_profile:.2f}, "
          f"net ratio {ratio:.2f}")
    assert ratio <= 2
