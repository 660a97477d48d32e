"""Issue 47 item 6: ``durable sam`` hands sam every argument, options before the command
included (``durable sam --version`` was refused by our own parser)."""

from __future__ import annotations

import pytest

from durable import cli

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["--info"],
        ["--debug", "build", "--use-container"],
        ["--region", "eu-west-1", "deploy", "--guided"],
        ["build", "--use-container", "--cached"],
        ["validate", "--lint"],
    ],
)
def test_every_argument_reaches_sam_in_order(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from durable.local import sam

    ran: list[list[str]] = []

    def run(given: list[str]) -> int:
        ran.append(list(given))
        return 0

    monkeypatch.setattr(sam, "run", run)
    assert cli.main(["sam", *args]) == 0
    assert ran == [args]


def test_other_commands_still_refuse_what_they_do_not_know(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["runs", "--version"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --version" in capsys.readouterr().err
