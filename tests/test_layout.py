"""The workflow layer mirrors the package: one rule file per stage, named after it, holding the rules whose scripts
belong to that stage; common.smk holds only what several rule files share (tests/test_package.py maps modules)."""

import re

from conftest import REPO, rule_scripts
from test_package import STAGES

from kdflow.workflow.provenance import imported_modules

RULES = REPO / "rules"
SHARED = {"common", "config"}  # the shared helpers, and the config's reading and validation: no rules of their own


def rule_files() -> dict[str, str]:
    """rule file (without .smk) -> its text."""
    return {path.stem: path.read_text() for path in sorted(RULES.glob("*.smk"))}


def stage_of_script(script: str) -> str:
    """The latest stage a rule's script imports from; ``data`` for the ingestion, which needs only kdflow.core."""
    stages = {module.split(".")[1] for module in imported_modules(REPO / "scripts" / script)
              if module.startswith("kdflow.")}
    latest = max(stages, key=STAGES.index)
    return "data" if latest == "core" else latest


def test_each_rule_lives_in_the_rule_file_of_its_scripts_stage():
    scripts = rule_scripts()
    misplaced = [f"{rule} ({scripts[rule][0]}: {stage_of_script(scripts[rule][0])}) in {name}.smk"
                 for name, text in rule_files().items() for rule in re.findall(r"^(?:rule|checkpoint) (\w+):", text, re.M)
                 if stage_of_script(scripts[rule][0]) != name]
    assert misplaced == []
    assert set(rule_files()) - SHARED <= set(STAGES) | {"data"}
    assert all(not re.search(r"^rule ", rule_files()[name], re.M) for name in SHARED)


def test_the_snakefile_includes_every_rule_file_in_stage_order():
    included = re.findall(r'^include: "rules/(\w+)\.smk"', (REPO / "Snakefile").read_text(), re.M)
    assert set(included) == set(rule_files())
    stages = [name for name in included if name not in SHARED]
    assert stages == sorted(stages, key=lambda name: -1 if name == "data" else STAGES.index(name))


def test_common_keeps_each_helper_under_the_rule_file_it_serves():
    """Snakemake's linter wants helpers apart from rules, so all of them are in common.smk: first those two or more
    files use (the Snakefile counts), directly or through another helper; then, under a ``# rules/<file>.smk``
    line, those that one rule file uses."""
    files = {name: text for name, text in rule_files().items() if name != "common"}
    files["Snakefile"] = (REPO / "Snakefile").read_text()
    common = rule_files()["common"]
    section, sections, bodies = None, {}, {}
    for chunk in re.split(r"^(?=def \w+|[A-Z_]+ = |# rules/\w+\.smk$)", common, flags=re.M):
        header = re.match(r"# rules/(\w+)\.smk$", chunk, re.M)
        section = header[1] if header else section
        helper = re.match(r"def (\w+)|([A-Z_]+) = ", chunk)
        if helper:
            name = helper[1] or helper[2]
            sections[name], bodies[name] = section, chunk

    def used(name: str, text: str) -> bool:
        return re.search(rf"(?<![\w.]){name}\b", text) is not None

    users = {name: {file for file, text in files.items() if used(name, text)} for name in bodies}
    for _ in bodies:  # through other helpers, to a fixed point
        for name in bodies:
            for other in bodies:
                if other != name and used(name, bodies[other].split("\n", 1)[1]):
                    users[name] |= users[other]
    placed = {name: sections[name] for name in bodies}
    expected = {name: (None if len(found - {"Snakefile"}) != 1 else (found - {"Snakefile"}).pop())
                for name, found in users.items()}
    assert placed == expected
    assert all(found for found in users.values())  # no helper nobody uses
