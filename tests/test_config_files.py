"""Reading config files strictly and validating them with short messages (kdflow.workflow.config_files), in the
process, on hand-made files: every error names the file and line, or the key."""

from types import SimpleNamespace

import pytest
import yaml
from conftest import REPO

from kdflow.workflow.config_files import (
    ConfigError,
    _short,
    load_config_file,
    merge,
    schema_defaults,
    validate_config,
    workflow_config,
)


def written(tmp_path, text: str, name: str = "config.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(path) -> str:
    with pytest.raises(ConfigError) as error:
        load_config_file(path)
    return str(error.value)


def test_yaml_reads_exponents_as_numbers_and_lets_a_merge_key_be_overridden(tmp_path):
    path = written(tmp_path, "base: &base {lr: 1e-5, epochs: 3}\nrun:\n  <<: *base\n  epochs: 4\nsmall: -2.5E+3\n")
    assert load_config_file(path) == {"base": {"lr": 1e-5, "epochs": 3}, "run": {"lr": 1e-5, "epochs": 4},
                                      "small": -2500.0}


def test_a_key_twice_is_an_error_naming_both_lines(tmp_path):
    path = written(tmp_path, "a: 1\nb:\n  c: 2\n  c: 3\n")
    assert error_of(path) == f"{path}:4: key 'c' appears twice in one mapping (first at line 3)"
    # the same key in two mappings is fine
    assert load_config_file(written(tmp_path, "a: {c: 1}\nb: {c: 2}\n")) == {"a": {"c": 1}, "b": {"c": 2}}


def test_json_is_read_as_json_with_tabs_and_a_key_twice_is_an_error(tmp_path):
    assert load_config_file(written(tmp_path, '{\n\t"a": {"b": 1e-5}\n}', "c.json")) == {"a": {"b": 1e-5}}
    path = written(tmp_path, '{"a": 1, "a": 2}', "twice.json")
    assert error_of(path) == f"{path}: key 'a' appears twice in one mapping"
    # a file that starts like JSON but is YAML (flow style) is read as YAML
    assert load_config_file(written(tmp_path, "{a: 1}\n", "flow.yaml")) == {"a": 1}


@pytest.mark.parametrize("text, message", [
    ("a: [1, 2\nb: 3\n", ":2: expected ',' or ']', but got ':' (while parsing a flow sequence at line 1)"),
    ("a:\n\tb: 1\n", (":2: found character '\\t' that cannot start any token (while scanning for the next token); "
                    "YAML indents with spaces, not tabs")),
    ("- a\n- b\n", ": a config file is a mapping of keys to values, not list"),
    ("", ": a config file is a mapping of keys to values, not NoneType"),
], ids=["unclosed-bracket", "tab", "list", "empty"])
def test_a_file_that_is_no_config_names_the_file_and_line(tmp_path, text, message):
    path = written(tmp_path, text)
    assert error_of(path) == f"{path}{message}"


def test_a_missing_or_non_utf8_file_is_a_clear_error(tmp_path):
    assert error_of(tmp_path / "nowhere.yaml") == f"config file {tmp_path / 'nowhere.yaml'} not found"
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"a: 1\nname: caf\xe9\n")
    assert error_of(path) == (f"{path}:2: byte 0xe9 at column 10 is not UTF-8 (invalid continuation byte); save the "
                              "file as UTF-8")


def test_a_yte_template_is_rendered_as_snakemake_renders_it(tmp_path):
    path = written(tmp_path, "__use_yte__: true\n?if True:\n  a: 1\n?else:\n  a: 2\n")
    assert load_config_file(path) == {"a": 1}


def test_merge_replaces_values_and_merges_mappings_as_snakemake_does():
    config = {"a": {"b": 1, "c": {"d": 2}}, "e": 3, "f": 4}
    assert merge(config, {"a": {"c": {"x": 5}}, "e": {"g": 6}, "f": 7}) == {
        "a": {"b": 1, "c": {"d": 2, "x": 5}}, "e": {"g": 6}, "f": 7}


def settings(configfiles=(), config=None, replace=False):
    return SimpleNamespace(configfiles=list(configfiles), config=config or {}, replace_workflow_config=replace)


def test_the_workflow_config_merges_its_files_in_snakemakes_order_and_says_where_each_key_came_from(tmp_path):
    workflow = written(tmp_path, "a: 1\nb: {c: 1, d: 1}\n", "workflow.yaml")
    given = written(tmp_path, "b: {c: 2}\ne: 5\n", "given.yaml")
    config, sources = workflow_config([workflow], settings([given], {"f": 6}))
    assert config == {"a": 1, "b": {"c": 2, "d": 1}, "e": 5, "f": 6}
    assert sources == {"a": str(workflow), "b": str(given), "e": str(given), "f": "--config"}
    # --replace-workflow-config drops the workflow's own file where a --configfile is given
    assert workflow_config([workflow], settings([given], replace=True))[0] == {"b": {"c": 2}, "e": 5}
    # and keeps it where none is
    assert workflow_config([workflow], settings(replace=True))[0] == {"a": 1, "b": {"c": 1, "d": 1}}
    # a workflow file that does not exist is skipped where a --configfile is given, and an error where none is
    missing = tmp_path / "missing.yaml"
    assert workflow_config([missing], settings([given]))[0] == {"b": {"c": 2}, "e": 5}
    with pytest.raises(ConfigError, match="missing.yaml not found"):
        workflow_config([missing], settings())


SCHEMA = {"type": "object", "additionalProperties": False, "properties": {
    "seed": {"type": "integer", "default": 7},
    "note": {"type": "string"},
    "tasks": {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"},
              "additionalProperties": {"type": "object", "additionalProperties": False,
                                       "patternProperties": {"^x_": {}},
                                       "properties": {"size": {"type": "integer", "default": 1}}}}}}


def test_validation_fills_defaults_and_names_each_problem_by_key(tmp_path):
    schema = written(tmp_path, yaml.safe_dump(SCHEMA), "schema.yaml")
    config = {"tasks": {"sst": {"x_note": 1}}}
    validate_config(config, schema)
    assert config == {"seed": 7, "tasks": {"sst": {"x_note": 1, "size": 1}}}
    broken = {"seed": "one", "lr": 1, "epochs": 2, "note": "n" * 300,
              "tasks": {"SST": {}, "cola": {"sizes": 2, "x_ok": 1}}}
    with pytest.raises(ConfigError) as error:
        validate_config(broken, schema, {"lr": "given.yaml", "epochs": "--config"})
    lines = str(error.value).splitlines()
    assert lines[0] == "invalid config:"
    assert [line.strip() for line in lines[1:]] == sorted([
        "the top level: unknown key(s) 'epochs', 'lr' (given in --config, given.yaml); allowed: note, seed, tasks",
        "seed: 'one' is not of type 'integer'",
        "tasks: key 'SST' is not allowed here ('SST' does not match '^[a-z]+$')",
        "tasks.cola: unknown key(s) 'sizes'; allowed: size",
    ])


def test_a_long_message_is_cut_to_200_characters(tmp_path):
    schema = written(tmp_path, yaml.safe_dump({"type": "object", "properties": {"note": {"enum": ["a" * 300]}}}),
                     "schema.yaml")
    with pytest.raises(ConfigError) as error:
        validate_config({"note": "b"}, schema)
    problem = str(error.value).splitlines()[1].strip()
    assert problem.startswith("note: 'b' is not one of") and problem.endswith("...")
    assert len(problem) == len("note: ") + 200


def test_schema_defaults_of_a_section():
    assert schema_defaults("generation", "sampling") == {
        name: spec["default"] for name, spec in yaml.safe_load((REPO / "schemas/config.schema.yaml").read_text())[
            "properties"]["generation"]["properties"]["sampling"]["properties"].items() if "default" in spec}
    assert schema_defaults("generation", "sampling")  # not vacuous


def test_a_key_twice_after_a_merge_key_is_still_an_error_and_json_may_start_after_blank_lines(tmp_path):
    path = written(tmp_path, "base: &base {lr: 1}\nrun:\n  <<: *base\n  epochs: 1\n  epochs: 2\n")
    assert error_of(path) == f"{path}:5: key 'epochs' appears twice in one mapping (first at line 4)"
    padded = written(tmp_path, '\n  {"a": 1, "a": 2}\n', "padded.json")  # read as JSON: no line in the message
    assert error_of(padded) == f"{padded}: key 'a' appears twice in one mapping"


def test_a_character_yaml_cannot_hold_is_an_error_naming_the_file(tmp_path):
    path = written(tmp_path, "a: \x07\n")
    assert error_of(path).startswith(f"{path}: not valid YAML (unacceptable character #x0007")


def test_messages_are_cut_only_past_their_limit():
    assert _short("a" * 200) == "a" * 200 and _short("a  b\n c") == "a b c"
    assert _short("a" * 201) == "a" * 197 + "..."


ALTERNATIVES = {"type": "object", "properties": {
    "student": {"anyOf": [{"type": "string"},
                          {"type": "object", "additionalProperties": False, "properties": {"layers": {}}}]},
    "names": {"type": "object", "additionalProperties": False, "patternProperties": {"^x_": {}}},
    "note": {"type": "string"},
    "nested": {"type": "object", "additionalProperties": False, "properties": {"size": {}}}}}


def test_an_alternative_names_one_problem_and_a_mapping_where_a_value_belongs_is_no_unknown_key(tmp_path):
    schema = written(tmp_path, yaml.safe_dump(ALTERNATIVES), "schema.yaml")
    with pytest.raises(ConfigError) as error:
        validate_config({"student": {"layer": 3}, "names": {"y": 1}, "note": {"a": 1}, "nested": {"sizes": 1}},
                        schema, {"sizes": "given.yaml", "layer": "given.yaml"})
    assert [line.strip() for line in str(error.value).splitlines()[1:]] == [
        "names: unknown key(s) 'y'; allowed:",  # only patterns are allowed
        "nested: unknown key(s) 'sizes'; allowed: size",  # not "given in": only top-level keys come from a file
        "note: {'a': 1} is not of type 'string'",
        "student: {'layer': 3} is not of type 'string'",  # jsonschema's best match, not "not valid under any"
    ]
