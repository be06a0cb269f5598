"""The README and docs/ as a reader follows them: every relative link reaches a file of the repository, and every
anchor a heading of the page it names. Hand-written over markdown-it's tokens rather than an MkDocs build, because
the pages link to the repository's configs, code and reference data, outside any docs directory MkDocs would
accept under --strict."""

import re
from pathlib import Path

import pytest
from conftest import REPO
from markdown_it import MarkdownIt

from kdflow.workflow import results_paths as paths
from kdflow.workflow.config_files import SCHEMA, load_config_file
from kdflow.workflow.config_reference import PAGE, reference_page

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but hyphens dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    tokens = MarkdownIt().parse(page.read_text())
    return {slug(tokens[i + 1].content) for i, token in enumerate(tokens) if token.type == "heading_open"}


def links(page: Path) -> list[str]:
    found = []
    for token in MarkdownIt().parse(page.read_text()):
        for child in token.children or []:
            if child.type == "link_open":
                found.append(child.attrs["href"])
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for href in links(page):
        if re.match(r"[a-z]+:", href):
            continue  # web addresses: not checked offline
        path, _, anchor = href.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists() or REPO not in [target, *target.parents]:
            broken.append(href)
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(href)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[page.relative_to(REPO).as_posix() for page in PAGES])
def test_every_link_reaches_a_file_and_every_anchor_a_heading(page):
    assert broken_links(page) == []


def test_the_readme_is_short_and_reaches_every_page_of_the_docs():
    readme = REPO / "README.md"
    assert len(readme.read_text().splitlines()) <= 150
    reached = {(readme.parent / href.partition("#")[0]).resolve() for href in links(readme)}
    assert {page.resolve() for page in PAGES[1:]} <= reached


def test_the_docs_name_every_registered_method_and_student_and_no_other():
    """The method and student lists of the README and docs/students-and-methods.md are the registries'."""
    from kdflow.distillation.methods.registry import available_methods
    from kdflow.students.registry import STUDENTS

    page = (REPO / "docs" / "students-and-methods.md").read_text()
    listed = re.search(r"\(see `kdflow/training/losses.py`\): `([^`]+)`", page)[1]
    assert sorted(name.strip() for name in listed.split(",")) == sorted(available_methods())
    readme = (REPO / "README.md").read_text()
    assert f"{len(available_methods())} distillation methods" in readme
    students = re.search(r"\A.*?A student .*?is a registered architecture with its options: (.*?)\. A method", page,
                         re.S)[1]
    assert set(re.findall(r"`(\w+)`", students)) == set(STUDENTS)


def test_the_configuration_reference_is_generated_from_the_current_schema():
    assert PAGE.read_text() == reference_page(load_config_file(SCHEMA)), \
        "run python -m kdflow.workflow.config_reference"
    assert "| `generation.sampling.temperature` | number | `1.0` |" in PAGE.read_text()


# Every command the README and docs show, by its start: the test that runs it, or why no test does.
COMMANDS = {
    "make demo": "tests/test_demo.py::test_demo_runs_the_whole_dag (the Makefile's demo call of Snakemake)",
    "make report": "tests/test_demo.py::test_demo_runs_the_whole_dag (its --report call, then every page)",
    "make test-fast": "not run by a test: the fast tier of make test, which CI runs",
    "make test": "not run by a test: CI runs it (.ci/run), on a fresh clone",
    "pip install torch": "not run by a test: the cluster's CUDA build comes from its own index",
    "pip install -e '.[cluster]'": "not run by a test: .ci/run installs '.[test]' the same way",
    "snakemake --cores 2 --until prepare_task download_probing_task": "not run by a test: it downloads GLUE and "
    "SentEval, and tests run offline",
    "snakemake --profile slurm -n": "tests/test_workflow.py::test_slurm_profile_dry_run_gives_gpu_rules_a_gpu",
    "snakemake --profile slurm --forcerun":
        "tests/test_resume.py::test_a_killed_teacher_job_resumes_from_its_checkpoint_with_the_same_result "
        "(--forcerun, without the cluster)",
    f"snakemake --profile slurm {paths.RESULTS}/":
        "tests/test_slurm.py::test_slurm_profile_gives_gpu_jobs_a_gpu_and_cpu_jobs_none (the demo's targets, on a "
        "local cluster)",
    "snakemake --profile slurm": "not run by a test: the full reproduction, about 8,000 GPU-hours",
    "make pilot": "not run by a test: it runs the plan's cheapest jobs of every kind on a cluster; "
    "tests/test_demo.py::test_the_pilot_measures_every_group_of_the_demo_plan_and_the_plan_refit_on_it_predicts_the_"
    "other_jobs checks the demo's pilot and the plan refit on its jobs",
    "python benchmarks/quality_claims.py --report-only": "not run by a test: tests/test_claims.py checks the page it "
    "writes against the record",
    "python benchmarks/quality_claims.py": "not run by a test: hours of CPU on ../shared's GLUE data",
    "python benchmarks/quality_real_data.py": "not run by a test: hours of CPU on ../shared's GLUE data",
    "python -m kdflow.workflow.dag_jobs": "tests/test_plan.py::test_the_demo_plan_prices_every_job_of_the_demo_dry_run "
    "(the jobs the command writes out)",
    "snakemake --profile slurm --omit-from":
        "tests/test_slurm.py::test_small_students_packed_two_to_a_gpu_run_at_once_in_one_job_and_equal_runs_one_at_a_time"
        " (--omit-from distill_student without the cluster, before the packs)",
    "python -m kdflow.workflow.gpu_packs":
        "tests/test_slurm.py::test_small_students_packed_two_to_a_gpu_run_at_once_in_one_job_and_equal_runs_one_at_a_time"
        " (--submit --wait on a local cluster)",
    "snakemake --cores 8": "tests/test_demo.py::test_demo_runs_the_whole_dag (the demo's config)",
    "snakemake --report report.html": "tests/test_demo.py::test_demo_runs_the_whole_dag",
    "python -m kdflow.reporting.report_search": "tests/test_report_search.py::"
    "test_the_search_finds_a_table_by_its_label_in_any_case_in_a_real_snakemake_report",
    "python benchmarks/gpu_carry.py": "not run by a test: it reads ../shared's GLUE data and the MiniLM package, and "
    "downloads a wheel; tests/test_gpu_check.py runs the check it prepares for, without it",
    "python benchmarks/gpu_check.py --device cpu --tiny":
        "tests/test_gpu_check.py::test_the_gpu_check_runs_every_part_on_cpu_in_its_tiny_profile",
    "python benchmarks/gpu_check.py --parts": "not run by a test: on a GPU node; the tiny profile runs the same parts",
    f"snakemake --cores 1 --configfile demo/config.yaml --replace-workflow-config {paths.RESULTS}/export/":
        "tests/test_demo.py::test_a_demo_student_exported_by_its_rule_predicts_in_a_pipeline_what_kdflow_recorded",
    "hf upload": "not run by a test: it publishes to the Hugging Face Hub, and tests run offline",
    "python benchmarks/gpu_check.py --adopt": "not run by a test: it rewrites reference/ and config.yaml from a GPU's "
    "results; tests/test_gpu_check.py checks that it refuses a CPU run and how it merges a rerun of one part",
}


def shown_commands(page: Path) -> list[str]:
    """The command lines of the page's bash blocks, without their comments."""
    commands = []
    for token in MarkdownIt().parse(page.read_text()):
        if token.type == "fence" and token.info.strip() == "bash":
            lines = (line.split("  #")[0].split(" # ")[0].strip() for line in token.content.splitlines())
            commands += [line for line in lines if line and not line.startswith("#")]
    return commands


def accounted(command: str) -> str | None:
    """The longest start of COMMANDS that ``command`` begins with."""
    starts = [start for start in COMMANDS if command == start or command.startswith(start + " ")
              or command.startswith(start) and start.endswith("/")]
    return max(starts, key=len, default=None)


@pytest.mark.parametrize("page", PAGES, ids=[page.relative_to(REPO).as_posix() for page in PAGES])
def test_every_command_shown_is_run_by_a_test_or_says_why_not(page):
    unaccounted = [command for command in shown_commands(page) if accounted(command) is None]
    assert unaccounted == [], "add each to COMMANDS with the test that runs it, or why none does"


def test_each_test_named_for_a_command_exists():
    for where in COMMANDS.values():
        if not where.startswith("not run"):
            path, _, name = where.split(" ")[0].partition("::")
            assert f"def {name}(" in (REPO / path).read_text(), where


def test_the_checker_finds_a_missing_file_and_a_missing_anchor(tmp_path, monkeypatch):
    monkeypatch.setattr("test_docs.REPO", tmp_path)
    (tmp_path / "a.md").write_text("# Title here\n\n[ok](b.md#part-one) [no file](c.md) [no anchor](b.md#nowhere)"
                                   " [self](#title-here) [web](https://example.org/x)\n")
    (tmp_path / "b.md").write_text("## Part one\n")
    assert broken_links(tmp_path / "a.md") == ["c.md", "b.md#nowhere"]


def test_the_readme_and_the_configuration_page_say_what_a_change_reruns_in_the_same_words():
    """One sentence, in both: a reader of either learns the same, and a test of the fingerprints
    (tests/test_package.py) checks what it says."""
    def sentence(path):
        text = " ".join(path.read_text().split())
        found = re.search(r"What a change reruns: [^.]*\([^)]*\)\.", text)
        assert found, path
        return found[0]

    assert sentence(REPO / "README.md") == sentence(REPO / "docs/configuration.md")
