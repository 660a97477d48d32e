"""A template's !If decided at its parameters, as CloudFormation decides it (issue 48: the
tables' billing mode is a parameter, and local tables are created from the template)."""

from __future__ import annotations

import pytest

from durable.adapters.template_conditions import (
    choose,
    decide,
    parameter_values,
    with_parameters,
)

TEMPLATE = {
    "Parameters": {
        "Mode": {"Type": "String", "Default": "A"},
        "Size": {"Type": "Number", "Default": 5},
        "Topic": {"Type": "String", "Default": ""},
    },
    "Conditions": {
        "IsB": {"Equals": [{"Ref": "Mode"}, "B"]},
        "HasTopic": {"Not": [{"Equals": [{"Ref": "Topic"}, ""]}]},
        "BWithTopic": {"Fn::And": [{"Condition": "IsB"}, {"Condition": "HasTopic"}]},
        "BOrTopic": {"Or": [{"Condition": "IsB"}, {"Condition": "HasTopic"}]},
    },
}
PROPS = {
    "Mode": {"If": ["IsB", "b", "a"]},
    "Capacity": {"If": ["IsB", {"Units": {"Ref": "Size"}}, {"Ref": "AWS::NoValue"}]},
    "List": [{"Fn::If": ["HasTopic", {"Ref": "Topic"}, {"Ref": "AWS::NoValue"}]}, "kept"],
    "Name": {"Sub": "t-${Mode}"},
}


def test_the_defaults_decide_unless_overridden() -> None:
    assert decide(TEMPLATE, parameter_values(TEMPLATE)) == {
        "IsB": False,
        "HasTopic": False,
        "BWithTopic": False,
        "BOrTopic": False,
    }
    chosen = decide(TEMPLATE, parameter_values(TEMPLATE, {"Mode": "B", "Topic": "t"}))
    assert chosen == {"IsB": True, "HasTopic": True, "BWithTopic": True, "BOrTopic": True}


def test_no_value_removes_the_property_or_the_item_and_other_intrinsics_stay() -> None:
    at_defaults = choose(PROPS, decide(TEMPLATE, parameter_values(TEMPLATE)))
    assert at_defaults == {"Mode": "a", "List": ["kept"], "Name": {"Sub": "t-${Mode}"}}
    values = parameter_values(TEMPLATE, {"Mode": "B", "Size": "7"})
    chosen = with_parameters(choose(PROPS, decide(TEMPLATE, values)), TEMPLATE, values)
    # a Number parameter is a number in the property, as CloudFormation passes it
    assert chosen["Mode"] == "b" and chosen["Capacity"] == {"Units": 7}


def test_a_condition_that_cannot_be_decided_is_named() -> None:
    broken = {**TEMPLATE, "Conditions": {"Odd": {"Equals": [{"Ref": "Nope"}, "x"]}}}
    with pytest.raises(ValueError, match="Nope"):
        decide(broken, parameter_values(broken))
    with pytest.raises(ValueError, match="Missing"):
        choose({"If": ["Missing", 1, 2]}, {})
    looped = {"Conditions": {"A": {"Condition": "B"}, "B": {"Condition": "A"}}}
    with pytest.raises(ValueError, match="itself"):
        decide(looped, {})
