"""Reading the workflow's config files strictly, and validating the config against its schema with short messages.

Snakemake reads ``--configfile`` and ``configfile:`` with PyYAML's YAML 1.1 rules before kdflow runs: a key written
twice silently keeps its last value, and ``1.0e4`` or ``1e-5`` is a string (YAML 1.1 wants ``1.0e+4``), which a
training job meets as a TypeError. kdflow reads the same files again, in Snakemake's order, with a loader that
rejects duplicated keys and reads exponent numbers as YAML 1.2 does, and replaces Snakemake's config with the
result (:func:`workflow_config`). Every error names the file and line. Schema errors name the key and, for an
unknown key, the allowed ones, instead of printing the whole schema.

One case stays Snakemake's: a ``--configfile`` that is not valid YAML at all stops Snakemake before the workflow
starts, with a message that names neither file nor line; ``python -m kdflow.workflow.config_files FILE`` does.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

from kdflow.core.errors import UserError, not_utf8

# YAML 1.2 reads these as floats; PyYAML's 1.1 resolver needs a dot and a signed exponent (1.0e+4).
EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


class ConfigError(UserError, ValueError):
    """A config file that cannot be read, or a config that does not fit the schema."""


class StrictConstructor:
    """PyYAML's safe constructor, refusing a key written twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` merges are meant to be overridden
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: PyYAML's own error follows
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping (first at line {first + 1})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


class StrictLoader(StrictConstructor, yaml.SafeLoader):
    """PyYAML's safe loader in pure Python, with YAML 1.2's exponent floats and no key twice: its error messages
    quote the character at fault (libyaml's do not)."""


class FastStrictLoader(StrictConstructor, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """The same on libyaml's parser (where PyYAML was built with it): it reads a config about 7 times faster, and
    every job on a cluster reads the workflow's config files again."""


for loader in (StrictLoader, FastStrictLoader):
    loader.add_implicit_resolver("tag:yaml.org,2002:float", EXPONENT_FLOAT, list("-+0123456789."))


def load_config_file(path: str | Path) -> dict:
    """A config file (YAML or JSON) as a mapping; a :class:`ConfigError` naming the file and line otherwise."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} not found") from None
    except UnicodeDecodeError as error:
        raise ConfigError(not_utf8(path, error)) from None
    if text.lstrip().startswith("{"):  # JSON first, as Snakemake does (YAML 1.1 chokes on JSON's tabs)
        try:
            return json.loads(text, object_pairs_hook=lambda pairs: _unique_keys(path, pairs))
        except json.JSONDecodeError:
            pass
    try:
        try:
            value = yaml.load(text, Loader=FastStrictLoader)
        except yaml.YAMLError:  # read again by the pure-Python loader for its message
            value = yaml.load(text, Loader=StrictLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        context = ""
        if error.context and error.problem:  # where what the parser was in began, e.g. an unclosed bracket
            started = f" at line {error.context_mark.line + 1}" if error.context_mark is not None else ""
            context = f" ({error.context}{started})"
        tab = "; YAML indents with spaces, not tabs" if "'\\t'" in str(error.problem) else ""
        raise ConfigError(f"{where}: {error.problem or error.context}{context}{tab}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML ({error})") from None
    if isinstance(value, dict) and value.get("__use_yte__"):
        from snakemake.common.configfile import load_configfile  # a YTE template: Snakemake renders it

        return load_configfile(path)
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: a config file is a mapping of keys to values, not {type(value).__name__}")
    return value


def _unique_keys(path: Path, pairs: list[tuple]) -> dict:
    keys = [key for key, _ in pairs]
    for key in keys:
        if keys.count(key) > 1:
            raise ConfigError(f"{path}: key {key!r} appears twice in one mapping")
    return dict(pairs)


def merge(config: dict, update: Mapping) -> dict:
    """``update`` merged into ``config`` recursively, as Snakemake merges config files."""
    for key, value in update.items():
        if isinstance(value, Mapping):
            config[key] = merge(config[key] if isinstance(config.get(key), dict) else {}, value)
        else:
            config[key] = value
    return config


def workflow_config(workflow_files: Iterable[str | Path], settings) -> tuple[dict, dict[str, str]]:
    """The config Snakemake assembles, read strictly: the workflow's ``configfile:`` files (unless
    ``--replace-workflow-config``), then the ``--configfile`` files, then ``--config`` values (``settings`` is
    Snakemake's ``workflow.config_settings``); and where each top-level key was last set."""
    files = []
    command_line = list(settings.configfiles)
    if not (settings.replace_workflow_config and (command_line or settings.config)):
        files += [path for path in workflow_files if Path(path).exists() or not command_line]
    config, sources = {}, {}
    for path in files + command_line:
        values = load_config_file(path)
        merge(config, values)
        sources.update(dict.fromkeys(values, str(path)))
    sources.update(dict.fromkeys(settings.config, "--config"))
    return merge(config, dict(settings.config)), sources


# Validation against the schema.

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


@functools.cache
def schema_defaults(*section: str) -> dict:
    """The defaults the schema gives the properties of a config ``section`` (a key path, e.g. ``"generation",
    "sampling"``): where every default is stated, for code that reads a config the schema has not filled in."""
    node = load_config_file(SCHEMA)
    for key in section:
        node = node["properties"][key]
    return {name: spec["default"] for name, spec in node["properties"].items() if "default" in spec}


def validate_config(config: dict, schema_path: str | Path, sources: dict[str, str] | None = None) -> None:
    """Check ``config`` against the JSON schema (a YAML file) and fill in the schema's defaults; a
    :class:`ConfigError` lists every problem by key (and the file an unknown top-level key came from, given the
    ``sources`` of :func:`workflow_config`)."""
    from jsonschema import Draft202012Validator, validators

    schema = load_config_file(schema_path)
    problems = sorted({_problem(error, sources or {}) for error in Draft202012Validator(schema).iter_errors(config)})
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))

    def set_defaults(validator, properties, instance, schema):
        for name, subschema in properties.items():
            if isinstance(instance, dict) and "default" in subschema:
                instance.setdefault(name, subschema["default"])
        yield from Draft202012Validator.VALIDATORS["properties"](validator, properties, instance, schema)

    filling = validators.extend(Draft202012Validator, {"properties": set_defaults})
    for _ in filling(schema).iter_errors(config):
        pass


def _problem(error, sources: dict[str, str]) -> str:
    """One line per schema violation: where (the key path), and what, without the schema or the whole value."""
    if error.validator in ("anyOf", "oneOf") and error.context:
        from jsonschema.exceptions import best_match

        error = best_match(error.context)
    where = ".".join(map(str, error.absolute_path)) or "the top level"
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        patterns = [re.compile(p) for p in error.schema.get("patternProperties", {})]
        unknown = sorted(k for k in error.instance if k not in allowed and not any(p.search(k) for p in patterns))
        given = sorted({sources[k] for k in unknown if k in sources}) if not error.absolute_path else []
        given = f" (given in {', '.join(given)})" if given else ""
        return f"{where}: unknown key(s) {', '.join(map(repr, unknown))}{given}; allowed: {', '.join(allowed)}"
    if "propertyNames" in error.absolute_schema_path:  # jsonschema reports the name's own check (e.g. pattern)
        return f"{where}: key {error.instance!r} is not allowed here ({_short(error.message)})"
    return f"{where}: {_short(error.message)}"


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


if __name__ == "__main__":
    failed = False
    for name in sys.argv[1:]:
        try:
            load_config_file(name)
            print(f"{name}: fine")
        except ConfigError as problem:
            print(problem, file=sys.stderr)
            failed = True
    sys.exit(failed)
