"""The workflow layer mirrors the package: a rule file per stage, named after it, holding the rules whose scripts
belong to that stage, or several (``<stage>_<part>.smk``) where one would be long; common.smk holds only what several
rule files share (tests/test_package.py maps modules)."""

import itertools
import re
from pathlib import Path

import pytest
from conftest import REPO, rule_blocks, rule_scripts
from test_package import STAGES

from kdflow.workflow import results_paths as paths
from kdflow.workflow.provenance import RULE_HEADER, imported_modules

RULES = REPO / "rules"
SHARED = {"common", "config", "templates"}  # shared helpers, the config's reading, the rules' templates (no jobs)
LONGEST = 300  # lines of a rule file


def rule_files() -> dict[str, str]:
    """rule file (without .smk) -> its text."""
    return {path.stem: path.read_text() for path in sorted(RULES.glob("*.smk"))}


def stage_of_file(name: str) -> str:
    """The stage of a rule file: ``reporting`` for reporting.smk and for its parts, reporting_<part>.smk."""
    return name if name in SHARED else name.split("_")[0]


def stage_of_script(script: str) -> str:
    """The latest stage a rule's script imports from; ``data`` for the ingestion, which needs only kdflow.core."""
    stages = {module.split(".")[1] for module in imported_modules(REPO / "scripts" / script)
              if module.startswith("kdflow.")}
    latest = max(stages, key=STAGES.index)
    return "data" if latest == "core" else latest


def test_each_rule_lives_in_the_rule_file_of_its_scripts_stage():
    scripts = rule_scripts()
    rules = [(name, rule) for name, text in rule_files().items()
             for rule in RULE_HEADER.findall(text) if rule in scripts]
    assert {rule for _, rule in rules} == set(scripts)
    misplaced = [f"{rule} ({scripts[rule]}: {stage_of_script(scripts[rule])}) in {name}.smk"
                 for name, rule in rules if stage_of_script(scripts[rule]) != stage_of_file(name)]
    assert misplaced == []
    assert {stage_of_file(name) for name in rule_files()} - SHARED <= set(STAGES) | {"data"}
    assert all(not re.search(r"^(?:use )?rule ", rule_files()[name], re.M) for name in SHARED - {"templates"})


def test_the_snakefile_includes_every_rule_file_in_stage_order():
    included = re.findall(r'^include: "rules/(\w+)\.smk"', (REPO / "Snakefile").read_text(), re.M)
    assert set(included) == set(rule_files())
    stages = [stage_of_file(name) for name in included if name not in SHARED]
    assert stages == sorted(stages, key=lambda name: -1 if name == "data" else STAGES.index(name))


# What a rule restates rather than chooses: where its log and benchmark go, its environment, threads, resources and
# script, and the device and precision params; rules/templates.smk states most of it once.
TEMPLATES = {"kdflow_job", "kdflow_device_job"}  # rules/templates.smk
BOILERPLATE_DIRECTIVES = {"log", "benchmark", "conda", "threads", "resources", "script"}
BOILERPLATE_PARAMS = re.compile(r"\s+(device|precision)=config\[")


def rule_lines() -> dict[str, list[str]]:
    """rule -> its non-blank lines, from its ``rule`` (or ``use rule``) line to its last directive: its block
    without the comments and code that follow it."""
    found = {}
    for rule, block in rule_blocks().items():
        header, *rest = block.splitlines()
        body = itertools.takewhile(lambda line: line.startswith(" ") or not line.strip(), rest)
        found[rule] = [header, *(line for line in body if line.strip())]
    return found


def test_a_rule_reads_as_one_page():
    """Issue 68: rules under 25 lines on average, at most a quarter of their lines boilerplate (50 rules of 34.2
    lines, 41% boilerplate, before the templates). The templates, which state it once, are read once, not with
    each rule, and are left out."""
    rules = {rule: lines for rule, lines in rule_lines().items() if rule not in TEMPLATES}
    boilerplate = 0
    for lines in rules.values():
        directive = None
        for line in lines[1:]:
            if keyword := re.match(r"    (\w+):", line):
                directive = keyword[1]
            boilerplate += directive in BOILERPLATE_DIRECTIVES or bool(BOILERPLATE_PARAMS.match(line))
    total = sum(len(lines) for lines in rules.values())
    assert total / len(rules) < 25 and boilerplate / total <= 0.25, (total, len(rules), boilerplate)


def test_no_rule_file_is_long():
    """A stage whose rules would make a long file has several, each of the rules that make one kind of result."""
    lengths = {name: len(text.splitlines()) for name, text in rule_files().items()}
    assert {name: length for name, length in lengths.items() if length > LONGEST} == {}


def test_the_rule_files_lie_in_rules_itself():
    """Not in folders below it: the rules' relative paths (``../scripts``, ``../report``, ``../envs``) are relative
    to their rule file, and a rule's code is its script's path as written (moving a rule a folder down would rerun
    its jobs); the workflow fingerprint (the plan's param) and the rule blocks these tests read are rules/*.smk."""
    assert sorted(path.relative_to(RULES).as_posix() for path in RULES.rglob("*.smk")) == sorted(
        f"{name}.smk" for name in rule_files())


def test_common_holds_only_what_several_rule_files_share():
    """Each helper of common.smk is used by two or more other files (the Snakefile counts), directly or through
    another helper; what one rule file needs is a function of the package."""
    files = {name: text for name, text in rule_files().items() if name != "common"}
    files["Snakefile"] = (REPO / "Snakefile").read_text()
    common = rule_files()["common"]
    bodies = {}
    for chunk in re.split(r"^(?=def \w+|[A-Z_]+ = )", common, flags=re.M):
        helper = re.match(r"def (\w+)|([A-Z_]+) = ", chunk)
        if helper:
            bodies[helper[1] or helper[2]] = chunk

    def used(name: str, text: str) -> bool:
        return re.search(rf"(?<![\w.]){name}\b", text) is not None

    users = {name: {file for file, text in files.items() if used(name, text)} for name in bodies}
    for _ in bodies:  # through other helpers, to a fixed point
        for name in bodies:
            for other in bodies:
                if other != name and used(name, bodies[other].split("\n", 1)[1]):
                    users[name] |= users[other]
    assert {name: sorted(found) for name, found in users.items() if len(found) < 2} == {}
    assert len(common.splitlines()) < 200


# a demo student (tests/test_demo.py exports it too)
EXPORTED = paths.EXPORT.format(experiment="alp_kd_table2", task="sst2", student="bert_3", method="alp")


@pytest.mark.slow  # it builds the demo's DAG through Snakemake (about 11 s)
def test_data_flows_one_way_between_the_stages_rule_files():
    """No rule reads an output of a rule in a later stage's file: the demo's DAG (its default target, an export and
    the calibrated plan, which the default leaves out) read from Snakemake, edge by edge. Between the files of one
    stage (reporting_*.smk) data may flow either way. Every rule is in the DAG but download_probing_task, which
    reads nothing (the demo ships its probing data); the thesis's BERT_S students train in a pack (student_packs),
    so that distill_pack is in it too."""
    from kdflow.workflow.dag_jobs import built_dag

    def order(snakefile: str) -> int:
        stage = stage_of_file(Path(snakefile).stem)
        return -1 if stage == "data" else STAGES.index(stage)

    with built_dag([REPO / "demo/config.yaml"], config={"student_packs": {"bert_s": 2}},
                   targets=["all", EXPORTED, paths.PLAN_CALIBRATED_CSV], directory=REPO) as workflow:
        dag = workflow.dag
        edges = {(producer.rule, consumer.rule) for consumer in dag.jobs
                 for producer in dag.dependencies[consumer]
                 if consumer.rule.name != "all"}  # the Snakefile's target rule reads from every stage
        planned = {job.rule.name for job in dag.jobs}
    backwards = sorted(f"{consumer.name} ({Path(consumer.snakefile).name}) reads {producer.name} "
                       f"({Path(producer.snakefile).name})" for producer, consumer in edges
                       if order(producer.snakefile) > order(consumer.snakefile))
    assert backwards == []
    assert set(rule_scripts()) - planned == {"download_probing_task"}
    assert len(edges) > 100


def test_every_figures_caption_opens_with_the_runs_scale_note():
    """Issue 69: a figure of a demonstration says so where the report shows it, in its caption (Snakemake renders
    captions with the job's params): every figure rule passes the run's scale note, and its captions open with it."""
    figures = {rule: block for rule, block in rule_blocks().items() if rule.startswith("figure_")}
    assert len(figures) >= 12
    for rule, block in figures.items():
        assert "scale_note=RUN_SCALE_NOTE," in block, rule
        for caption in re.findall(r'caption="\.\./(report/[\w.]+)"', block):
            assert (REPO / caption).read_text().startswith("{{ snakemake.params.scale_note }}\n"), (rule, caption)
