"""Code fingerprints: a rule's params carry the hash of the kdflow modules its script imports (transitively),
so that Snakemake reruns exactly the jobs whose code changed (Snakemake itself only tracks the script file).
"""

from __future__ import annotations

import ast
import hashlib
from functools import cache
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent


def _module_path(name: str) -> Path | None:
    parts = name.split(".")
    if parts[0] != "kdflow":
        return None
    base = PACKAGE_ROOT.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _kdflow_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from kdflow import x`
    return {name for name in names if name.split(".")[0] == "kdflow"}


def module_closure(*roots: str) -> list[Path]:
    """Source files of the given kdflow modules and of every kdflow module they import, transitively."""
    seen: dict[str, Path] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        path = _module_path(name)
        if path is None or name in seen:
            continue
        seen[name] = path
        pending.extend(_kdflow_imports(path))
    return sorted(set(seen.values()))


@cache
def code_fingerprint(*roots: str) -> str:
    """SHA-256 (first 16 hex digits) over the sources of ``module_closure(*roots)``."""
    digest = hashlib.sha256()
    for path in module_closure(*roots):
        digest.update(path.relative_to(PACKAGE_ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
