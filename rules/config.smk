# The config: read strictly (kdflow.workflow.config_files), validated against the schema, cross-checked.
import os
import sys

# This file and the rule scripts (child processes, here or on a cluster node) import the kdflow package
# from this repository, whether or not it is installed in the job's environment.
sys.path.insert(0, workflow.basedir)
os.environ.update(
    PYTHONPATH=os.pathsep.join(
        filter(None, [workflow.basedir, os.getenv("PYTHONPATH")])
    )
)

from kdflow.workflow.config import check_references
from kdflow.workflow.config_files import ConfigError, validate_config, workflow_config

# Read before Snakemake reads config.yaml itself, whose errors name neither file nor line; the strict reading
# (duplicated keys refused, 1.0e4 a number) then replaces Snakemake's. A config error is one message, without
# the traceback Snakemake adds to errors in workflow code.
try:
    STRICT_CONFIG, CONFIG_SOURCES = workflow_config(
        ["config.yaml"], workflow.config_settings
    )
except ConfigError as error:
    sys.exit(str(error))


configfile: "config.yaml"


config.clear()
config.update(STRICT_CONFIG)
try:
    validate_config(
        config,
        os.path.join(workflow.basedir, "schemas", "config.schema.yaml"),
        CONFIG_SOURCES,
    )
    check_references(config)
except ConfigError as error:
    sys.exit(str(error))
