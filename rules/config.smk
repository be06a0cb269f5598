# The config: read strictly (kdflow.workflow.config_files), validated against the schema, cross-checked.
import sys

# This file and the rule scripts import the kdflow package from this repository, whether or not it is installed
# in the job's environment: Snakemake's script preamble extends a script's sys.path with this process's, so the
# scripts find it without PYTHONPATH, which Snakemake clears in conda environments (`--sdm conda`).
sys.path.insert(0, workflow.basedir)

from kdflow.workflow.config_checks import check_references
from kdflow.workflow.config_files import (
    SCHEMA,
    ConfigError,
    validate_config,
    workflow_config,
)
from kdflow.workflow.exploration import exploration_experiments, with_exploration

# Read before Snakemake reads config.yaml itself, whose errors name neither file nor line; the strict reading
# (duplicated keys refused, 1.0e4 a number) then replaces Snakemake's. A config error is one message, without
# the traceback Snakemake adds to errors in workflow code.
try:
    STRICT_CONFIG, CONFIG_SOURCES = workflow_config(["config.yaml"], workflow.config_settings)
except ConfigError as error:
    sys.exit(str(error))


configfile: "config.yaml"


config.clear()
config.update(STRICT_CONFIG)
try:
    validate_config(config, SCHEMA, CONFIG_SOURCES)
    # The thesis's exploration studies (Chapter 5, Appendix B) become experiments of their own: their runs are
    # student jobs like any other; their figures and Table 5.1 read them (rules/reporting_exploration.smk), not a
    # selection.
    EXPLORATION_EXPERIMENTS = set(exploration_experiments(config))
    config.update(with_exploration(config))
    check_references(config)
except ConfigError as error:
    sys.exit(str(error))
