"""The conda environments of the rules (`snakemake --sdm conda`): envs/onnx.yaml, for the rules that run ONNX
Runtime, is envs/kdflow.yaml plus the `onnx` extra of pyproject.toml, pinned within the extra's bounds."""

import tomllib

import yaml
from conftest import REPO
from packaging.requirements import Requirement


def pip_pins(name: str) -> dict[str, str]:
    """package -> pinned version, from the pip section of envs/<name>.yaml."""
    dependencies = yaml.safe_load((REPO / "envs" / name).read_text())["dependencies"]
    pins = next(entry["pip"] for entry in dependencies if isinstance(entry, dict))
    return dict(pin.split("==") for pin in pins)


def test_the_onnx_environment_is_kdflows_plus_the_onnx_extra():
    extra = [Requirement(line) for line in
             tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["onnx"]]
    base, onnx = pip_pins("kdflow.yaml"), pip_pins("onnx.yaml")
    assert {name: version for name, version in onnx.items() if name not in base} == {
        name: onnx.get(name) for name in (requirement.name for requirement in extra)}
    assert {name: onnx[name] for name in base} == base
    assert all(requirement.specifier.contains(onnx[requirement.name]) for requirement in extra)
    base_rest = yaml.safe_load((REPO / "envs/kdflow.yaml").read_text())["dependencies"][:-1]
    assert yaml.safe_load((REPO / "envs/onnx.yaml").read_text())["dependencies"][:-1] == base_rest
