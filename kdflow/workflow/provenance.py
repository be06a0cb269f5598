"""Code fingerprints: each rule's params carry the hash of the code its script runs, so that Snakemake reruns
exactly the jobs whose code changed (Snakemake itself tracks params, inputs and the rule's own text).

The code a script runs is derived, never listed: the script file and the import closure of its ``kdflow``
imports. Importing ``kdflow.a.b`` executes ``kdflow/__init__.py``, ``kdflow/a/__init__.py`` and
``kdflow/a/b.py``, so the closure holds the parent packages too. A registry package imports its members in its
``__init__`` (:data:`REGISTRIES`: the students, the distillation methods), so that the registry is full at run
time; for the fingerprint of a job that names its members (:func:`job_fingerprint`: a student job's student type
and method), only those members count, found by the ``@register("name")`` decorators in the members' source, so
that editing PKD's loss reruns the students trained with PKD alone. A member's module counts whole (the methods
it holds alongside), and what it imports counts too. Imports are read from the source (:mod:`ast`), so computing a
fingerprint imports nothing. A file counts by what it computes, not how it is written
(:func:`code_form`): a comment or a docstring reruns nothing.
"""

from __future__ import annotations

import ast
import hashlib
import re
from functools import cache
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the kdflow package
PACKAGE = PACKAGE_ROOT.name


def module_path(name: str) -> Path | None:
    """The source file of kdflow module or package ``name``, or None for anything else."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = PACKAGE_ROOT.joinpath(*parts[1:])
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def module_name(path: Path) -> str:
    relative = path.resolve().relative_to(PACKAGE_ROOT.parent).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def statements(body: list[ast.stmt]):
    """Every statement in ``body``, nested ones included. An import is a statement, so the search skips the
    expressions, most of a module's syntax tree (every job parses the workflow, and so this, again)."""
    for node in body:
        yield node
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):  # handlers, cases: hold statements
            yield from statements(getattr(node, block, ()))


@cache  # planning asks for the closure of every rule's script: each file is parsed once
def imported_modules(path: Path, name: str | None = None) -> frozenset[str]:
    """The kdflow modules the source file ``path`` (module ``name``; None for a script) imports anywhere in
    it: ``import a.b``, ``from a import b`` (b a module or a name of a) and relative imports."""
    package = None if name is None else (name if path.name == "__init__.py" else name.rpartition(".")[0])
    found = set()
    for node in statements(ast.parse(path.read_text(), filename=str(path)).body):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if package is None:
                    raise ValueError(f"{path}: a relative import outside the kdflow package")
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{node.module}" if node.module else anchor
            else:
                base = node.module
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from kdflow.x import module`
    return frozenset(module for module in found if module != name and module_path(module) is not None)


def with_parents(module: str) -> list[str]:
    """``kdflow.a.b`` -> ``kdflow``, ``kdflow.a``, ``kdflow.a.b``: what importing it executes."""
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


# Registry packages: their __init__ imports every member module, which registers itself there.
REGISTRIES = ("kdflow.students", "kdflow.distillation.methods")


def module_closure(*roots: str, members_of_registries: bool = True) -> list[Path]:
    """Source files of the given kdflow modules, their parent packages and everything they import, transitively;
    without ``members_of_registries``, a registry's ``__init__`` brings in none of its members (a module that
    imports a member itself still brings it)."""
    paths: dict[str, Path | None] = {}
    pending = [parent for root in roots for parent in with_parents(root)]
    while pending:
        name = pending.pop()
        if name in paths:
            continue
        path = paths[name] = module_path(name)
        if path is not None:
            imported = imported_modules(path, name)
            if not members_of_registries and name in REGISTRIES:
                imported = imported - registry_members(name).keys()
            pending.extend(parent for module in imported for parent in with_parents(module))
    return sorted({path for path in paths.values() if path is not None})


@cache
def registry_members(registry: str) -> dict[str, frozenset[str]]:
    """member module -> the names it registers (its ``@register("name", ...)`` decorators), for the members the
    registry package ``registry`` imports in its ``__init__``."""
    init = module_path(registry)
    members = {}
    for module in imported_modules(init, registry):
        if module.rpartition(".")[0] != registry or module.endswith(".registry"):
            continue
        tree = ast.parse(module_path(module).read_text())
        members[module] = frozenset(
            decorator.args[0].value for node in ast.walk(tree) if isinstance(node, (ast.ClassDef, ast.FunctionDef))
            for decorator in node.decorator_list if isinstance(decorator, ast.Call)
            and getattr(decorator.func, "id", getattr(decorator.func, "attr", None)) == "register"
            and decorator.args and isinstance(decorator.args[0], ast.Constant))
    return members


def member_module(registry: str, name: str) -> str:
    """The module of ``registry`` that registers ``name``."""
    found = [module for module, names in registry_members(registry).items() if name in names]
    if len(found) != 1:
        raise ValueError(f"{name!r} is registered by {len(found)} modules of {registry}, not one: "
                         f"{sorted(found) or 'none'}")
    return found[0]


def script_closure(script: str | Path) -> list[Path]:
    """A rule script and every kdflow source file it runs."""
    script = Path(script).resolve()
    return [script, *module_closure(*imported_modules(script))]


def fingerprint(paths: list[Path]) -> str:
    """SHA-256 (first 16 hex digits) over the files' paths from the repository root and their contents: the
    normal form of Python source (:func:`code_form`), the bytes of anything else."""
    digest = hashlib.sha256()
    root = PACKAGE_ROOT.parent
    for path in paths:
        name = path.relative_to(root) if path.is_relative_to(root) else path.name
        digest.update(Path(name).as_posix().encode() + b"\0")
        digest.update(code_form(path) if path.suffix == ".py" else path.read_bytes())
    return digest.hexdigest()[:16]


def code_form(path: Path) -> bytes:
    """:func:`file_code_form` of the file as it is now (cached per modification time and size: a long-lived process,
    such as the tests', sees an edit)."""
    stat = Path(path).stat()
    return file_code_form(Path(path), stat.st_mtime_ns, stat.st_size)


@cache
def file_code_form(path: Path, modified_ns: int, size: int) -> bytes:
    """What a Python file computes, without how it is written: its syntax tree with the docstrings dropped,
    serialised node by node (type, then each field that is set). Comments, docstrings, blank lines, line
    breaks and quotes change nothing; a renamed variable, an edited constant or a moved statement does.

    Written here rather than taken from ``ast.dump``, whose text changes between Python versions (3.13 leaves out
    empty fields): fields that are None or empty are left out, so a Python release that adds a field with an empty
    default (3.12's ``type_params``) leaves every fingerprint as it was. One that changes how a construct parses
    changes the fingerprints of the files using it, once."""
    tree = ast.parse(path.read_text(), filename=str(path))
    parts: list[str] = []

    def visit(node) -> None:
        if isinstance(node, ast.AST):
            body = getattr(node, "body", None)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                    and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body = body[1:]  # the docstring
            parts.append(type(node).__name__ + "(")
            for field, value in ast.iter_fields(node):
                value = body if field == "body" and body is not None else value
                if value is None or value == []:
                    continue
                parts.append(field + "=")
                visit(value)
                parts.append(",")
            parts.append(")")
        elif isinstance(node, list):
            parts.append("[")
            for item in node:
                visit(item)
                parts.append(",")
            parts.append("]")
        else:
            parts.append(repr(node))

    visit(tree)
    return "".join(parts).encode()


@cache
def script_fingerprint(script: str | Path) -> str:
    """The fingerprint of :func:`script_closure`: what a rule's ``code`` param holds."""
    return fingerprint(script_closure(script))


def job_closure(script: str | Path, members: dict[str, str]) -> list[Path]:
    """:func:`script_closure` with, of each registry in ``members`` ({registry: registered name}), the member
    module registering that name alone (and what it imports), the registry's other members left out."""
    script = Path(script).resolve()
    unknown = set(members) - set(REGISTRIES)
    if unknown:
        raise ValueError(f"not registries: {sorted(unknown)}; known: {REGISTRIES}")
    # the named members, and every member of a registry the job names none of, as script_closure counts them
    counted = {member_module(registry, name) for registry, name in members.items()} | {
        module for registry in REGISTRIES if registry not in members for module in registry_members(registry)}
    roots = imported_modules(script)
    whole = set(module_closure(*roots))
    files = set(module_closure(*roots, *counted, members_of_registries=False)) & whole
    return [script, *sorted(files)]


@cache
def job_fingerprint(script: str | Path, members: tuple[tuple[str, str], ...]) -> str:
    """The fingerprint of :func:`job_closure` (``members``: (registry, name) pairs): a job's ``code`` param where
    the job names the members it runs."""
    return fingerprint(job_closure(script, dict(members)))


def workflow_fingerprint(basedir: str | Path) -> str:
    """The fingerprint of the Snakefile and the rule files: what the DAG is made of (the cost plan's param, which
    prices every job of the DAG)."""
    basedir = Path(basedir)
    return fingerprint([basedir / "Snakefile", *sorted((basedir / "rules").glob("*.smk"))])


# A rule's first line: ``rule <name>:``, or ``use rule <template> as <name> with:`` for one made from a template.
RULE_HEADER = re.compile(r"^(?:rule|use rule \w+ as) (\w+)(?::| with:)", re.M)


def rule_blocks(rules_dir: str | Path) -> dict[str, str]:
    """rule -> its text in the rule files (``*.smk``) of ``rules_dir``: from its ``rule`` line (``use rule <template>
    as <rule> with:`` for one made from a template, rules/templates.smk) to the next rule's."""
    blocks = {}
    for smk in sorted(Path(rules_dir).glob("*.smk")):
        for block in re.split(r"(?m)^(?=rule |use rule )", smk.read_text()):
            rule = RULE_HEADER.match(block)
            if rule:
                blocks[rule[1]] = block
    return blocks


def rule_scripts(rules_dir: str | Path) -> dict[str, str]:
    """rule -> the script it runs, named relative to ``scripts/``: the one its ``runs(...)`` params name (the
    templates' script, rules/templates.smk), or its own ``script:``; read from the rule files in ``rules_dir``."""
    found = {}
    for rule, block in rule_blocks(rules_dir).items():
        script = re.search(r'\*\*runs\(\s*"(\w+\.py)"[,)]', block) or re.search(
            r'script:\n\s+"\.\./scripts/(\w+\.py)"', block)
        if script:
            found[rule] = script[1]
    return found
