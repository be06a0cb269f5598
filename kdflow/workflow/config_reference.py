"""The configuration reference (docs/config-reference.md), generated from the schema so that it cannot drift:
every key of ``schemas/config.schema.yaml`` with its type, default and description, one table per top-level section.
``python -m kdflow.workflow.config_reference`` rewrites the page; tests/test_docs.py checks that it is current."""

from __future__ import annotations

import json

from kdflow.workflow.config_files import SCHEMA, load_config_file

PAGE = SCHEMA.parents[1] / "docs" / "config-reference.md"


def reference_page(schema: dict) -> str:
    lines = ["# Configuration reference", "",
             "Generated from `schemas/config.schema.yaml` by `python -m kdflow.workflow.config_reference`; the schema "
             "is what the workflow validates a config against. `<name>` stands for a key you choose (a teacher, an "
             "experiment, ...), `[]` for the items of a list.", ""]
    for section, node in schema["properties"].items():
        rows = list(_rows(section, node, schema))
        lines += [f"## `{section}`", "", _clean(_resolve(node, schema).get("description", "")), "",
                  "| key | type | default | description |", "|---|---|---|---|"]
        lines += [f"| `{path}` | {kind} | {default} | {text} |" for path, kind, default, text in rows[1:]]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _rows(path: str, node: dict, schema: dict, seen: frozenset = frozenset()):
    ref = node.get("$ref", "")
    node = _resolve(node, schema)
    default = f"`{json.dumps(node['default'])}`" if "default" in node else ""
    yield path, _kind(node), default, _clean(node.get("description", ""))
    if ref in seen:  # a recursive definition: listed once
        return
    seen = seen | {ref} if ref else seen
    for name, child in node.get("properties", {}).items():
        yield from _rows(f"{path}.{name}", child, schema, seen)
    if isinstance(node.get("additionalProperties"), dict):
        yield from _rows(f"{path}.<name>", node["additionalProperties"], schema, seen)
    if isinstance(node.get("items"), dict) and ("properties" in _resolve(node["items"], schema)):
        yield from _rows(f"{path}[]", node["items"], schema, seen)


def _resolve(node: dict, schema: dict) -> dict:
    """A ``$ref`` to ``#/$defs/<name>`` replaced by that definition, keeping the referring node's own keys."""
    if "$ref" not in node:
        return node
    target = schema
    for part in node["$ref"].removeprefix("#/").split("/"):
        target = target[part]
    return {**target, **{key: value for key, value in node.items() if key != "$ref"}}


def _kind(node: dict) -> str:
    if "enum" in node:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in node["enum"])
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    kinds = node.get("type")
    if kinds is None:
        alternatives = node.get("oneOf") or node.get("anyOf") or []
        kinds = [option.get("type", option.get("$ref", "?").rsplit("/", 1)[-1]) for option in alternatives]
    return " \\| ".join(map(str, kinds if isinstance(kinds, list) else [kinds]))


def _clean(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


if __name__ == "__main__":
    PAGE.write_text(reference_page(load_config_file(SCHEMA)))
    print(f"wrote {PAGE}")
