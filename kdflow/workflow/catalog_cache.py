"""The catalog of registered methods and students, as the workflow reads it without importing torch: cached.

:mod:`kdflow.distillation.catalog` imports the registries (and so torch) and prints what planning needs.
Here it is run in a subprocess once per version of the code behind it and cached under ``.snakemake/kdflow/``, keyed by
that code's fingerprint: after an edit to a method or a student the next plan reads the new catalog, otherwise
loading the workflow costs no torch import (seconds on every cluster job, which parses the workflow again).
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

from kdflow.core.errors import UserError
from kdflow.core.io import atomic_output
from kdflow.workflow.provenance import PACKAGE_ROOT, fingerprint, module_closure

CATALOG_MODULE = "kdflow.distillation.catalog"
CACHE_DIR = Path(".snakemake") / "kdflow"  # relative to the working directory, beside Snakemake's own state


def catalog_file(cache_dir: Path = CACHE_DIR) -> Path:
    """Where the catalog of the current code is cached: its name holds the code's fingerprint."""
    return Path(cache_dir) / f"catalog-{fingerprint(module_closure(CATALOG_MODULE))}.json"


@cache
def load_catalog(cache_dir: Path = CACHE_DIR) -> dict:
    """``{"methods": {name: {defaults, needs, learns_from_assistant}}, "students": {name: {defaults}},
    "embeddings": {defaults, sources, modes, inits}}``, from the cache or freshly computed."""
    path = catalog_file(cache_dir)
    if path.is_file():
        return json.loads(path.read_text())
    # Run from the package's parent directory, so that the subprocess imports this very package.
    result = subprocess.run([sys.executable, "-m", CATALOG_MODULE], capture_output=True, text=True,
                            cwd=PACKAGE_ROOT.parent)
    if result.returncode != 0:
        raise UserError(f"could not import kdflow's methods and students ({CATALOG_MODULE}):\n{result.stderr}")
    catalog = json.loads(result.stdout)
    try:
        with atomic_output(path) as partial:
            partial.write_text(result.stdout)
    except OSError:  # a read-only working directory: plan without the cache
        pass
    return catalog
