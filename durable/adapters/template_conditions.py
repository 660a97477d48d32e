"""A template's ``!If``s decided as CloudFormation decides them, without deploying it.

CloudFormation evaluates the template's ``Conditions`` against the stack's parameters and
keeps one branch of each ``Fn::If``; ``!Ref AWS::NoValue`` there removes the property. Code
that reads the template's tables to create them on a local server (``durable.adapters.
schema``, ``infra.local.cfn_tables``) must take the same branch, or a table whose billing
mode is a parameter would reach ``CreateTable`` as ``{"If": [...]}``. Unless told otherwise
the parameters have their defaults: a local table is what a stack deployed with no
overrides gets.

Only what conditions are made of is evaluated here (``Equals``, ``Not``, ``And``, ``Or``,
``Condition``, ``Ref`` of a parameter); any other intrinsic is left as it is, for the caller
to resolve or refuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NO_VALUE = "AWS::NoValue"
_DROP = object()  # what !Ref AWS::NoValue becomes: the key or list item it stands for goes


def parameter_values(
    template: Mapping[str, Any], overrides: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Each parameter's value as a string: the override if given, else its default."""
    declared: Mapping[str, Any] = template.get("Parameters") or {}
    values = {name: str(spec["Default"]) for name, spec in declared.items() if "Default" in spec}
    return values | dict(overrides or {})


def decide(template: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, bool]:
    """Every condition of the template, true or false at these parameter values."""
    declared: Mapping[str, Any] = template.get("Conditions") or {}
    decided: dict[str, bool] = {}

    def condition(name: str, seen: tuple[str, ...]) -> bool:
        if name in seen:
            raise ValueError(f"condition {name} refers to itself: {' -> '.join((*seen, name))}")
        if name not in decided:
            if name not in declared:
                raise ValueError(f"no condition named {name!r} in the template")
            decided[name] = bool(evaluate(declared[name], (*seen, name)))
        return decided[name]

    def evaluate(node: Any, seen: tuple[str, ...]) -> Any:
        if not isinstance(node, dict) or len(node) != 1:
            return node
        ((key, arg),) = node.items()
        kind = key.removeprefix("Fn::")
        if kind == "Ref":
            if arg not in values:
                raise ValueError(f"a condition refers to {arg!r}, which is no parameter")
            return values[arg]
        if kind == "Equals":
            left, right = (evaluate(side, seen) for side in arg)
            return str(left) == str(right)  # CloudFormation compares strings
        if kind == "Not":
            return not evaluate(arg[0], seen)
        if kind == "And":
            return all(evaluate(part, seen) for part in arg)
        if kind == "Or":
            return any(evaluate(part, seen) for part in arg)
        if kind == "Condition":
            return condition(str(arg), seen)
        raise ValueError(f"{key} cannot be evaluated in a condition here")

    for name in declared:
        condition(name, ())
    return decided


def choose(value: Any, conditions: Mapping[str, bool]) -> Any:
    """``value`` with every ``If`` replaced by its branch, and what ``AWS::NoValue`` stands
    for removed (a property, or an item of a list)."""
    kept = _choose(value, conditions)
    return None if kept is _DROP else kept


def _choose(value: Any, conditions: Mapping[str, bool]) -> Any:
    if isinstance(value, list):
        items = (_choose(item, conditions) for item in value)
        return [item for item in items if item is not _DROP]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, arg),) = value.items()
        if key in ("If", "Fn::If"):
            name, yes, no = arg
            if name not in conditions:
                raise ValueError(f"!If names {name!r}, which is no condition of the template")
            return _choose(yes if conditions[name] else no, conditions)
        if key == "Ref" and arg == NO_VALUE:
            return _DROP
    chosen = {key: _choose(item, conditions) for key, item in value.items()}
    return {key: item for key, item in chosen.items() if item is not _DROP}


def with_parameters(value: Any, template: Mapping[str, Any], values: Mapping[str, str]) -> Any:
    """``value`` with each ``Ref`` of a parameter replaced by its value (a number for a
    ``Number`` parameter, as CloudFormation passes it to a property such as a capacity);
    every other intrinsic is left as it is."""
    declared: Mapping[str, Any] = template.get("Parameters") or {}
    if isinstance(value, list):
        return [with_parameters(item, template, values) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1 and "Ref" in value and value["Ref"] in declared:
        name = value["Ref"]
        text = values[name]
        if declared[name].get("Type") == "Number":
            number = float(text)
            return int(number) if number.is_integer() else number
        return text
    return {key: with_parameters(item, template, values) for key, item in value.items()}
