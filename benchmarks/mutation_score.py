"""The share of planted bugs the tests catch in kdflow's core (issue 53): mutmut's mutants of each core module, run
against the fast tests that reach it.

    pip install -e '.[mutation]'
    python benchmarks/mutation_score.py                          # every core module (about an hour on 2 cores)
    python benchmarks/mutation_score.py --modules kdflow/core/statistics.py

Not a test: it runs the fast tests once per mutant (mutmut picks, per function, the tests that call it). Each module
is mutated in its own clone of the repository's HEAD (so commit first: what is measured is what is committed), and
the clone is removed afterwards. A surviving mutant is a change no test notices. Where it cannot change what kdflow
computes (an equivalent mutant), ``benchmarks/mutation/equivalent.yaml`` says why, keyed by the function and the
line as mutated; the score counts it neither way. The script prints, per module, the mutants, killed, equivalent and
other survivors, and the score killed / (mutants - equivalent), and writes them with each unexplained survivor's diff
to ``benchmarks/mutation/score.json``. It exits 1 when a module scores under 90%.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
EQUIVALENT = REPO / "benchmarks" / "mutation" / "equivalent.yaml"
SCORE = REPO / "benchmarks" / "mutation" / "score.json"
TARGET = 0.90
# The core modules (issue 53) and the test files that exercise them; mutmut runs, per mutant, those of their fast
# tests that call the mutated function. The losses are scored on test_methods.py, their hand-computed values and
# gradients: test_distill.py trains students, minutes per mutant.
MODULES = {
    "kdflow/core/statistics.py": ["test_statistics.py", "test_claims.py", "test_selection.py"],
    "kdflow/distillation/selection.py": ["test_selection.py", "test_claims.py", "test_models.py", "test_tables.py",
                                         "test_paper_tables.py", "test_status.py"],
    "kdflow/distillation/methods/logit_methods.py": ["test_methods.py"],
    "kdflow/distillation/methods/hidden_methods.py": ["test_methods.py"],
    "kdflow/distillation/methods/output_methods.py": ["test_methods.py"],
    "kdflow/reporting/protocols.py": ["test_deviations.py", "test_ledger.py"],
    "kdflow/workflow/config_files.py": ["test_config_files.py", "test_config.py"],
}
KILLED, SURVIVED = {1, 3}, {0}  # mutmut's exit codes (mutmut.stats.status_by_exit_code)


def mutmut_config(clone: Path, module: str, tests: list[str]) -> str:
    # what the tests read besides the package and tests/ (mutmut copies these into its mutants/ folder)
    others = sorted(path.name for path in clone.iterdir() if path.name not in {"kdflow", "tests", ".git"})
    return "\n".join([
        "", "[tool.mutmut]",
        'source_paths = ["kdflow"]',
        f'only_mutate = ["{module}"]',
        f"pytest_add_cli_args_test_selection = {json.dumps(['tests/' + name for name in tests])}",
        'pytest_add_cli_args = ["-p", "no:xdist", "-p", "no:cacheprovider", "-m", "not slow", "-q"]',
        f"also_copy = {json.dumps(others)}",
        'process_isolation = "forkserver"',  # torch is not fork-safe after pytest has imported it
        "",
    ])


def mutant_diff(clone: Path, name: str) -> list[str]:
    """The mutated line(s) of ``name``: the diff's removed and added lines, without their markers' file headers."""
    shown = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=clone, capture_output=True,
                           text=True, check=True).stdout
    return [line for line in shown.splitlines()
            if line[:1] in "-+" and not line.startswith(("---", "+++"))]


def signature(name: str, diff: list[str]) -> str:
    """A survivor's key in equivalent.yaml: its function and its added line(s), stable across unrelated edits (a
    mutant's number is not)."""
    function = name.rsplit(".", 1)[-1].split("__mutmut_")[0].removeprefix("x_")
    added = " / ".join(line[1:].strip() for line in diff if line.startswith("+"))
    return f"{function}: {added}"


def score_module(module: str, tests: list[str], children: int, equivalent: dict[str, str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="kdflow-mutation-") as scratch:
        clone = Path(scratch) / "repo"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        with open(clone / ".git" / "info" / "exclude", "a") as exclude:
            exclude.write("mutants/\n")
        with open(clone / "pyproject.toml", "a") as config:
            config.write(mutmut_config(clone, module, tests))
        start = time.time()
        run = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(children)], cwd=clone,
                             capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}, check=False)
        if run.returncode != 0:
            raise RuntimeError(f"mutmut failed on {module}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
        codes = json.loads((clone / "mutants" / f"{module}.meta").read_text())["exit_code_by_key"]
        survivors = {name: mutant_diff(clone, name) for name, code in codes.items() if code in SURVIVED}
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True,
                                check=True).stdout.strip()
    keys = {name: signature(name, diff) for name, diff in survivors.items()}
    explained = {name for name, key in keys.items() if key in equivalent}
    killed = sum(code in KILLED for code in codes.values())
    other = {name: code for name, code in codes.items() if code not in KILLED | SURVIVED}  # timeouts, no tests
    counted = len(codes) - len(explained)
    return {"module": module, "commit": commit, "seconds": round(time.time() - start), "mutants": len(codes),
            "killed": killed, "equivalent": len(explained), "survived": len(survivors) - len(explained),
            "other": other, "score": killed / counted if counted else 1.0,
            "survivors": {keys[name]: survivors[name] for name in sorted(survivors) if name not in explained}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", nargs="+", default=list(MODULES), choices=list(MODULES))
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    equivalent = yaml.safe_load(EQUIVALENT.read_text()) or {}
    scores = json.loads(SCORE.read_text()) if SCORE.exists() else {}
    for module in args.modules:
        result = score_module(module, MODULES[module], args.max_children, equivalent.get(module, {}))
        scores[module] = result
        SCORE.write_text(json.dumps(scores, indent=1, ensure_ascii=False) + "\n")
        print(f"{module}: {result['mutants']} mutants, {result['killed']} killed, {result['equivalent']} equivalent, "
              f"{result['survived']} survived, {len(result['other'])} other: score {result['score']:.1%} "
              f"({result['seconds']} s)", flush=True)
        for key in result["survivors"]:
            print(f"    survived: {key}")
    return 0 if all(scores[module]["score"] >= TARGET for module in args.modules) else 1


if __name__ == "__main__":
    sys.exit(main())
