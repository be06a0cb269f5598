"""One module names every path under results/ (kdflow.workflow.results_paths): the package, the scripts, the rules,
the tests, the benchmarks and the tools spell none of their own, so that moving an output is an edit of that
module."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

from kdflow.core import run_files
from kdflow.workflow import results_paths

MODULE = Path(results_paths.__file__).resolve()
# Files that may spell a results/ path outside their docstrings and comments, each with the reason; ideally none.
EXCEPTIONS = {"tests/test_results_paths.py": "it checks the templates against the paths they must spell, and that "
                                             "the check finds a spelled path"}


def docstring_nodes(tree: ast.AST) -> set[int]:
    """The ids of the docstrings' nodes: the first statement of a module, class or function, if a string."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value,
                                                                                                    str):
                found.add(id(first.value))
    return found


def python_results_paths(source: str) -> list[str]:
    """Every string constant of ``source`` but its docstrings, f-strings' literal parts included, naming a path
    under results/."""
    return [f"line {line}: {value!r}" for line, value in python_strings(source) if "results/" in value]


def python_strings(source: str) -> list[tuple[int, str]]:
    """Every string constant of ``source`` but its docstrings (f-strings' literal parts included), with its line."""
    tree = ast.parse(source)
    docstrings = docstring_nodes(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


QUOTED = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')


def snakemake_results_paths(source: str) -> list[str]:
    """Every quoted string of a rule file (or the Snakefile) outside its triple-quoted docstrings and comments that
    names a path under results/."""
    return [f"line {line}: {quoted}" for line, quoted in snakemake_strings(source) if "results/" in quoted]


def snakemake_strings(source: str) -> list[tuple[int, str]]:
    """Every quoted string of a rule file outside its triple-quoted docstrings and comments, quotes kept, with its
    line."""
    code = re.sub(r'""".*?"""|\'\'\'.*?\'\'\'', lambda m: "\n" * m.group(0).count("\n"), source, flags=re.DOTALL)
    found = []
    for number, line in enumerate(code.splitlines(), 1):
        masked = QUOTED.sub(lambda m: '"' * len(m.group(0)), line)  # a # inside a string starts no comment
        comment = masked.find("#") if "#" in masked else len(line)  # what a comment holds is prose
        found += [(number, m.group(0)) for m in QUOTED.finditer(line) if m.start() < comment]
    return found


def checked_files() -> list[Path]:
    return sorted([*(REPO / "kdflow").rglob("*.py"), *(REPO / "scripts").glob("*.py"), *(REPO / "rules").glob("*.smk"),
                   REPO / "Snakefile", *(REPO / "tests").glob("*.py"), *(REPO / "benchmarks").glob("*.py"),
                   *(REPO / "tools").glob("*.py")])


def results_paths_in(path: Path) -> list[str]:
    text = path.read_text()
    return python_results_paths(text) if path.suffix == ".py" else snakemake_results_paths(text)


def test_no_results_path_is_spelled_outside_the_results_paths_module():
    found = {str(path.relative_to(REPO)): hits for path in checked_files()
             if path.resolve() != MODULE and str(path.relative_to(REPO)) not in EXCEPTIONS
             for hits in [results_paths_in(path)] if hits}
    assert found == {}, "name these paths in kdflow/workflow/results_paths.py and use its names"


def test_the_check_finds_paths_in_code_and_not_in_prose():
    python = '''"""Writes results/plan.csv."""
PLAN = "results/plan.csv"


def f(task):
    """Reads results/data/{task}."""
    return f"results/data/{task}", "data"  # results/data/x
'''
    assert python_results_paths(python) == ["line 2: 'results/plan.csv'", "line 7: 'results/data/'"]
    rules = '''# results/data/{task}: the prepared task
rule prepare_task:
    """Ingest one task into results/data/{task}."""
    output:
        directory("results/data/{task}"),  # "results/x"
    benchmark:
        paths.benchmark("prepare_task/{task}")
'''
    assert snakemake_results_paths(rules) == ['line 5: "results/data/{task}"']


def test_each_path_is_named_once_and_lies_under_results():
    paths = {name: value for name, value in vars(results_paths).items() if name.isupper() and isinstance(value, str)}
    assert all(value == results_paths.RESULTS or value.startswith(f"{results_paths.RESULTS}/")
               for value in paths.values())
    assert len(set(paths.values())) == len(paths)
    assert results_paths.benchmark("prepare_task/{task}") == "results/benchmarks/prepare_task/{task}.tsv"


RUN_FILES = Path(run_files.__file__).resolve()
RUN_FILE_NAMES = {value: name for name, value in vars(run_files).items() if name.isupper()}


def run_file_names_in(path: Path) -> list[str]:
    """The run-folder file names spelled in a source file's code (not its docstrings or comments): a string constant
    (or an f-string's literal part) that is one of them, or ends in ``/`` and one."""
    text = path.read_text()
    strings = python_strings(text) if path.suffix == ".py" else [
        (line, quoted[1:-1]) for line, quoted in snakemake_strings(text)]
    return [f"line {line}: {value!r}" for line, value in strings
            if value in RUN_FILE_NAMES or any(value.endswith(f"/{name}") for name in RUN_FILE_NAMES)]


def test_no_run_folder_file_name_is_spelled_outside_the_run_files_module():
    """metrics.json, predictions.parquet, model.safetensors and the rest are named in kdflow/core/run_files.py alone
    (results_paths composes its templates from them), so renaming one cannot leave a job reading the old name."""
    code = [path for path in checked_files() if path.resolve() != RUN_FILES and not path.is_relative_to(REPO / "tests")]
    found = {str(path.relative_to(REPO)): hits for path in code for hits in [run_file_names_in(path)] if hits}
    assert found == {}, "use the names of kdflow.core.run_files"


def test_the_run_file_check_finds_names_in_code_and_not_in_prose(tmp_path):
    python = tmp_path / "stage.py"
    python.write_text('"""Writes ``metrics.json``."""\n\n\ndef f(run_dir):\n'
                      '    return run_dir / "predictions.parquet", f"{run_dir}/curves.parquet", "not_metrics.json"\n')
    assert run_file_names_in(python) == ["line 5: 'predictions.parquet'", "line 5: '/curves.parquet'"]
    rules = tmp_path / "stage.smk"
    rules.write_text('rule r:\n    """Reads metrics.json."""\n    input:\n'
                     '        f"{DIR}/model.safetensors",  # "metrics.json"\n')
    assert run_file_names_in(rules) == ['line 4: \'{DIR}/model.safetensors\'']


def test_the_results_templates_end_in_the_run_files_names():
    assert results_paths.STUDENT_METRICS.endswith(f"/{run_files.METRICS}")
    assert results_paths.STUDENT_MODEL.endswith(f"/{run_files.STUDENT_WEIGHTS}")
    assert results_paths.PSEUDO_HEADS_PREDICTIONS.endswith(f"/{run_files.PSEUDO_HEADS_PREDICTIONS}")
    assert len(RUN_FILE_NAMES) == len([name for name in vars(run_files) if name.isupper()])  # each name spelled once


def test_the_makefile_names_only_results_paths_that_the_module_names():
    """The Makefile cannot import the paths module: every results/ path it gives Snakemake is one of its templates."""
    templates = {value for name, value in vars(results_paths).items() if name.isupper() and isinstance(value, str)}
    lines = [line for line in (REPO / "Makefile").read_text().splitlines() if not line.lstrip().startswith("#")]
    spelled = {path for line in lines for path in re.findall(r"results/[\w./{}-]+", line)}
    assert spelled and spelled <= templates, sorted(spelled - templates)
