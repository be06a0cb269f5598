# Set-up and entry points. `make demo` and `make test` each create the virtualenv (.venv) on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORES ?= 2
# pytest-xdist workers; --dist loadfile keeps a file's tests in one worker, so the demo (the module fixture of
# tests/test_demo.py, whose file holds only the tests that read its results) runs once, first (conftest.py puts
# the file first; --no-loadscope-reorder keeps that order). The other workers take the rest of the suite at a
# lower CPU priority (conftest.py), filling the cores the demo leaves idle: 3 workers on 2 cores were 10 s faster
# than 2 when the suite was smaller (docs/development.md has the suite's time and where it goes). (--dist loadgroup would do it per test, but pytest-xdist 3.8 cannot group tests under
# pytest 9.2: its group suffix goes to Node._nodeid, which pytest 9.2 no longer reads, and the demo then ran on
# both workers.) The fast tier has no demo: one worker per core.
TEST_WORKERS ?= 3
FAST_WORKERS ?= 2

.PHONY: install demo report test test-fast dry-run plan pilot clean

# torch is pinned to the 2.13.0 CPU wheel for the demo and CI; on a GPU machine install your CUDA build first.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/snakemake --configfile demo/config.yaml --replace-workflow-config --cores $(CORES)

report: demo
	$(BIN)/snakemake --configfile demo/config.yaml --replace-workflow-config --report report.html
	$(BIN)/python -m kdflow.reporting.report_search report.html

test: $(VENV)/.installed
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The inner loop: everything but the tests that run Snakemake (marked slow).
test-fast: $(VENV)/.installed
	$(BIN)/pytest -n $(FAST_WORKERS) -m "not slow"

dry-run: $(VENV)/.installed
	$(BIN)/snakemake --dry-run --quiet rules

# The cost plan of config.yaml (no GPU, no data): results/plan.csv and .md, the estimate before the run, and
# results/plan_calibrated.md, the same plan refit on the benchmark files of the jobs that have run (the plan's own
# figures until one has): hours spent and left per paper table. PLAN_ARGS passes Snakemake options, e.g.
# PLAN_ARGS="--configfile demo/config.yaml --replace-workflow-config" or PLAN_ARGS="--config 'plan={gpu: A100}'".
# They come after the targets: --config and --configfile take every word after them, and would take a target for a
# value.
plan: $(VENV)/.installed
	$(BIN)/snakemake --cores 1 results/plan.csv results/plan_calibrated.md $(PLAN_ARGS)
	cat results/plan_calibrated.md

# The pilot (kdflow/reporting/pilot.py, docs/cost-plan.md): the plan's cheapest jobs that measure every rule and
# model family of the config (results/pilot.csv, built with the plan), run with PILOT_ARGS (on a cluster:
# PILOT_ARGS="--profile slurm"), then the plan refit on them. Their outputs are the full run's own.
PILOT_ARGS ?= --cores $(CORES)
pilot: $(VENV)/.installed
	$(BIN)/snakemake --cores 1 results/plan.csv $(PLAN_ARGS)
	$(BIN)/snakemake $(PILOT_ARGS) $(PLAN_ARGS) -- $$($(BIN)/python -m kdflow.reporting.pilot results/pilot.csv)
	$(MAKE) plan

clean:
	rm -rf results logs .snakemake report.html
