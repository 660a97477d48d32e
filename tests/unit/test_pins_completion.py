"""Pins for ``durable.core.completion``: the rules' argument checks and their boundaries, the
batch size limit, and what ``BatchResult`` / ``BatchItem`` / the errors expose (each test
names the mutants of ``python -m tests.mutation --module completion`` it kills)."""

from __future__ import annotations

from typing import Any

import pytest

from durable import BatchFailed, BatchItem, BatchResult, BranchFailed, Completion
from durable.core.completion import check_batch_size, parse_completion
from durable.errors import DurableError, InvalidInput


def test_the_default_rule_is_all_with_no_count() -> None:
    # completion-cd237fae ('all' -> ''), completion-27c60581 (count 0 -> 1)
    assert Completion() == Completion.all() == Completion("all", 0, None)
    assert Completion().kind == "all" and Completion().count == 0


def test_min_successful_takes_one_and_refuses_zero_and_non_counts() -> None:
    # completion-82d56984 (n < 1 -> n <= 1)
    assert Completion.min_successful(1) == Completion("min_successful", 1)
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(InvalidInput) as e:
            Completion.min_successful(bad)  # type: ignore[arg-type]
        assert e.value.field == "completion"


@pytest.mark.parametrize("bad", ["abc", "10", "101%", "100.5%", "%", "-5%", "10 %%"])
def test_a_share_outside_0_to_100_percent_is_refused(bad: str) -> None:
    # completion-a4b8f6a8 (or -> and: "abc" would crash on match.group), completion-712d05cd
    # (100 -> 101: "100.5%" would pass), completion-86804218 (the raise deleted)
    with pytest.raises(InvalidInput) as e:
        Completion.tolerated_failures(bad)
    assert e.value.field == "completion" and "10%" in str(e.value)


def test_shares_and_counts_are_tolerated_failures_rules() -> None:
    # completion-2cbcf17a and completion-cda9df95 (the kind's name -> '')
    assert Completion.tolerated_failures("100%") == Completion("tolerated_failures", percent=100.0)
    assert Completion.tolerated_failures(" 0% ").percent == 0.0
    assert Completion.tolerated_failures(0) == Completion("tolerated_failures", 0)
    assert Completion.tolerated_failures(3).kind == "tolerated_failures"


@pytest.mark.parametrize("bad", [-1, True, False, 1.5, None])
def test_a_count_of_failures_must_be_a_whole_number_of_zero_or_more(bad: Any) -> None:
    # completion-dbfb3c11 (or -> and), completion-0cdadb85 (the raise deleted)
    with pytest.raises(InvalidInput) as e:
        Completion.tolerated_failures(bad)
    assert e.value.field == "completion"


def test_a_rule_object_is_taken_as_it_is_and_other_shapes_are_refused() -> None:
    # completion-b920fcba (return None for a Completion), completion-9757bece (and -> or:
    # a one-element list would crash unpacking its items)
    rule = Completion.min_successful(2)
    assert parse_completion(rule) is rule
    for bad in (["all"], {"min_successful": 1, "tolerated_failures": 1}, {"most": 1}, 3):
        with pytest.raises(InvalidInput) as e:
            parse_completion(bad)
        assert e.value.field == "completion"


def test_the_inline_limit_is_inclusive() -> None:
    # completion-c463d7c1 (total > limit -> total >= limit)
    check_batch_size(1000, "map 'm'", 1000)
    with pytest.raises(InvalidInput) as e:
        check_batch_size(1001, "map 'm'", 1000)
    assert e.value.field == "items" and "1001 branches" in str(e.value)


def test_branch_failed_carries_the_branch_its_type_and_message() -> None:
    # completion-0745ded4, completion-9380a7b1, completion-91475f90 (deleted assignments)
    error = BranchFailed(2, "KeyError", "no such user")
    assert str(error) == "branch 2 failed: KeyError: no such user"
    assert (error.index, error.error_type, error.error_message) == (2, "KeyError", "no such user")


def _result(ok: bool, *items: BatchItem[Any]) -> BatchResult[Any]:
    return BatchResult("fetch", "all", ok, tuple(items))


def test_values_raise_batch_failed_caused_by_the_first_failure() -> None:
    # completion-37b2dac3 (the message's super().__init__ deleted)
    first, second = ValueError("one"), ValueError("two")
    result = _result(
        False,
        BatchItem(0, "succeeded", value=1),
        BatchItem(1, "failed", error=first),
        BatchItem(2, "failed", error=second),
    )
    with pytest.raises(BatchFailed) as e:
        result.values()
    assert e.value.error is first and e.value.__cause__ is first
    assert str(e.value) == (
        "batch 'fetch' failed its completion rule (all): 2 of 3 branch(es) failed; first error: one"
    )


def test_a_failed_rule_without_a_failed_branch_says_it_was_canceled() -> None:
    # completion-0057f724 (the message -> '')
    result = _result(False, BatchItem(0, "canceled"))
    with pytest.raises(BatchFailed) as e:
        result.values()
    assert isinstance(e.value.error, DurableError)
    assert "canceled before it was decided" in str(e.value.error)


def test_the_result_reads_as_a_sequence_of_items_by_status() -> None:
    # completion-6fb292fb (values' filter negated), completion-93775aa8/1f43f9e8/40631ef9
    # (BatchItem.succeeded), completion-a4b71747 (__len__), and the succeeded / failed /
    # canceled / errors views (completion-cdeae22f, -edb9d07b, -69b34968, -a189fe68,
    # -f44835a4, -78c4131a, -2acadb22, -f7e9ce29)
    boom = RuntimeError("boom")
    items: tuple[BatchItem[Any], ...] = (
        BatchItem(0, "succeeded", value="a"),
        BatchItem(1, "failed", error=boom),
        BatchItem(2, "canceled"),
        BatchItem(3, "succeeded", value="d"),
    )
    result = _result(True, *items)
    assert len(result) == 4 and result[1] is items[1] and list(result) == list(items)
    assert result.values() == ["a", "d"]
    assert [i.succeeded for i in result] == [True, False, False, True]
    assert result.succeeded == [items[0], items[3]]
    assert result.failed == [items[1]]
    assert result.canceled == [items[2]]
    assert result.errors() == [boom]


def test_all_tolerates_no_failure_whatever_its_count() -> None:
    # completion-cf73b269 ('all' -> '' in tolerated: a count would then be tolerated)
    assert Completion("all", 2).tolerated(3) == 0
    assert Completion("all", 2).decide(3, 2, 1) is False


def test_a_share_that_is_a_whole_number_of_branches_is_not_rounded_away() -> None:
    # 18.4% of 375 is 69; in floats it is 68.99999999999999
    assert Completion.tolerated_failures("18.4%").tolerated(375) == 69
    assert Completion.tolerated_failures("10%").tolerated(15) == 1
    assert Completion.tolerated_failures("10%").tolerated(9) == 0
