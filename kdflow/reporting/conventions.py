"""The conventions kdflow's code fixes: what a job computes that no config key names (issue 56).

The ledger (:mod:`kdflow.reporting.protocols`) compares every setting the config names, and the registries' option
defaults, with the papers. What the code fixes outside them (which parameters an optimiser decays, a layer map
derived from depths, a head's bias, a pooling, a tokeniser's flag, a figure's split) it cannot see. This module
finds those values mechanically, so that each is named in ``reference/protocols.yaml`` (``conventions``) and from
there compared with the papers like any setting.

Where it looks: every kdflow module that a computing job's script imports (:func:`job_modules`: the rules of the
stages data to export, read from the rule files; reporting only draws and tabulates), read from source with
:mod:`ast`, without importing it. Three kinds of value, each keyed by where it lives:

* ``module:NAME``, a module-level constant in upper case whose value is a literal (a number, string, tuple, list,
  dict or set of literals);
* ``module:function(parameter)``, a literal default of a function's parameter (None, which means "not set", left
  out);
* ``module:function>callee(keyword)``, a literal keyword argument of a call to one of :data:`BUILDERS` (layers,
  losses, optimisers, initialisers, tokenisers: the calls whose flags change what is computed), inside
  ``function`` (``<module>`` at the top level); ``#2`` and on for the second and later such call.

And, by running the code (torch): the optimiser's decay groups over a model with every kind of parameter, and the
layer maps of the depths the configs run (:func:`derived_conventions`).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from torch import nn

from kdflow.core.hyperparameters import Hyperparameters
from kdflow.distillation.methods.registry import buckets, skip_mapping
from kdflow.training.loop import build_optimizer
from kdflow.workflow.provenance import PACKAGE_ROOT, rule_scripts, script_closure

REPO = PACKAGE_ROOT.parent
# The stages whose rules compute (tests/test_package.py's order); a reporting rule draws or tabulates what they wrote.
COMPUTING_STAGES = ("core", "training", "teachers", "transfer", "students", "distillation", "probing", "analysis",
                    "export")
# Stages whose code computes nothing a paper reports: the export (kdflow's own ONNX rows are beside the papers')
# and the workflow's planning.
UNREPORTED_STAGES = ("export", "workflow")
# Callees whose literal keyword arguments are conventions: they build layers, losses, optimisers and schedules,
# initialise weights, or tokenise. (Pandas, file and logging calls compute nothing a paper reports.)
BUILDERS = frozenset({
    "Linear", "LSTM", "GRU", "Conv1d", "Embedding", "Dropout", "LayerNorm", "MultiheadAttention",
    "cross_entropy", "mse_loss", "kl_div", "log_softmax", "softmax", "binary_cross_entropy_with_logits", "glu",
    "AdamW", "Adam", "Adadelta", "SGD", "LambdaLR", "clip_grad_norm_", "normal_", "uniform_", "xavier_uniform_",
    "token_embedding", "tokenize", "tokenizer", "batches", "from_pretrained", "from_config",
    "pack_padded_sequence", "generate", "multinomial", "topk",
})
# The depths (teacher layers, student layers) the configs run, for the derived layer maps.
DEPTHS = ((12, 6), (12, 4), (12, 2), (24, 6), (4, 3), (4, 2))


def job_modules(rules_dir: Path = REPO / "rules") -> list[Path]:
    """The kdflow source files that the scripts of the computing rules import (their code fingerprints' files)."""
    found = set()
    for code in rule_scripts(rules_dir).values():
        closure = script_closure(REPO / "scripts" / code)
        stages = {path.relative_to(PACKAGE_ROOT).parts[0] for path in closure if path.is_relative_to(PACKAGE_ROOT)
                  and len(path.relative_to(PACKAGE_ROOT).parts) > 1}
        if stages <= set(COMPUTING_STAGES) | {"workflow"}:
            found |= {path for path in closure if path.is_relative_to(PACKAGE_ROOT)}
    return sorted(path for path in found if path.relative_to(PACKAGE_ROOT).parts[0] not in UNREPORTED_STAGES)


def _literal(node: ast.AST):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL


_NOT_LITERAL = object()


def _plain(value):
    """A literal as JSON would hold it (tuples and sets as lists), so that YAML can pin it."""
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(item) for item in value)
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return value


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def module_conventions(path: Path) -> dict[str, object]:
    """The conventions of one source file, keyed as the module's docstring says."""
    module = path.resolve().relative_to(REPO).as_posix()
    tree = ast.parse(path.read_text(), filename=str(path))
    found = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        names = [target.id for target in targets if isinstance(target, ast.Name) and target.id.isupper()]
        if names and node.value is not None and (value := _literal(node.value)) is not _NOT_LITERAL:
            found.update({f"{module}:{name}": _plain(value) for name in names})
    calls: dict[str, int] = {}

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = child.name if scope == "<module>" else f"{scope}.{child.name}"
                arguments = child.args
                positional = arguments.posonlyargs + arguments.args
                defaulted = positional[len(positional) - len(arguments.defaults):]
                pairs = list(zip(defaulted, arguments.defaults, strict=True))
                pairs += [(arg, default) for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
                          if default]
                for arg, default in pairs:
                    value = _literal(default)
                    if value is not _NOT_LITERAL and value is not None:
                        found[f"{module}:{name}({arg.arg})"] = _plain(value)
                visit(child, name)
            elif isinstance(child, ast.ClassDef):
                visit(child, child.name if scope == "<module>" else f"{scope}.{child.name}")
            else:
                if isinstance(child, ast.Call) and _callee(child) in BUILDERS:
                    literal = {keyword.arg: _literal(keyword.value) for keyword in child.keywords if keyword.arg}
                    literal = {arg: value for arg, value in literal.items() if value is not _NOT_LITERAL}
                    if literal:
                        base = f"{module}:{scope}>{_callee(child)}"
                        calls[base] = calls.get(base, 0) + 1
                        suffix = "" if calls[base] == 1 else f"#{calls[base]}"
                        found.update({f"{base}{suffix}({arg})": _plain(value) for arg, value in literal.items()})
                visit(child, scope)

    visit(tree, "<module>")
    return found


def code_conventions(paths: list[Path] | None = None) -> dict[str, object]:
    """Every convention of the given source files (default: :func:`job_modules`), key -> value."""
    found = {}
    for path in paths if paths is not None else job_modules():
        found.update(module_conventions(path))
    return dict(sorted(found.items()))


def derived_conventions() -> dict[str, object]:
    """Conventions read by running the code: which parameters the optimiser decays (over a model with an embedding,
    a linear layer, a LayerNorm and an LSTM, with and without ``weight_decay_all``) and the layer maps of
    :data:`DEPTHS`."""
    model = nn.ModuleDict({"embedding": nn.Embedding(3, 2), "linear": nn.Linear(2, 2), "norm": nn.LayerNorm(2),
                           "lstm": nn.LSTM(2, 2)})
    names = {id(parameter): name for name, parameter in model.named_parameters()}
    found = {}
    for decay_all in (False, True):
        hp = Hyperparameters(learning_rate=1e-3, batch_size=2, epochs=1, weight_decay=0.01, weight_decay_all=decay_all)
        optimizer = build_optimizer(model.named_parameters(), hp)
        decayed = sorted(names[id(parameter)] for group in optimizer.param_groups if group["weight_decay"]
                         for parameter in group["params"])
        found[f"kdflow/training/loop.py:build_optimizer[weight_decay_all={decay_all}] decays"] = decayed
    for teacher, student in DEPTHS:
        where = f"kdflow/distillation/methods/registry.py:{{}}({teacher}, {student})"
        found[where.format("skip_mapping")] = skip_mapping(teacher, student)
        for overlap in (False, True):
            found[where.format(f"buckets[overlap={overlap}]")] = buckets(teacher, student, overlap)
    return json.loads(json.dumps(found, default=int))  # numpy integers as plain ones


def convention_values(conventions: dict, found: dict[str, object]) -> dict[str, dict[str, object]]:
    """Per named convention (``conventions``: protocols.yaml's), kdflow's value now: its code keys' values."""
    return {name: {key: found.get(key, MISSING) for key in spec["code"]} for name, spec in conventions.items()}


MISSING = "(not in the code)"


def convention_problems(conventions: dict, found: dict[str, object]) -> list[str]:
    """What protocols.yaml's ``conventions`` miss: a value the code fixes that no convention names, a named code key
    the code no longer has, and a pinned value the code changed (its papers' values must be read again)."""
    claimed = {}
    problems = []
    for name, spec in conventions.items():
        for key, pinned in spec["code"].items():
            if key in claimed:
                problems.append(f"{key} is named by conventions {claimed[key]} and {name}")
            claimed[key] = name
            if key not in found:
                problems.append(f"conventions.{name}: {key} is not in the code any more")
            elif json.dumps(found[key], sort_keys=True) != json.dumps(pinned, sort_keys=True):
                problems.append(f"conventions.{name}: {key} is {json.dumps(found[key])} in the code, pinned as "
                                f"{json.dumps(pinned)}: check what the papers say of the new value, then pin it")
    for key in sorted(set(found) - set(claimed)):
        problems.append(f"a convention no entry names: {key} = {json.dumps(found[key])} (name it in "
                        "reference/protocols.yaml's conventions, with the papers' value, or as one without effect)")
    return problems
