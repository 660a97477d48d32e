"""A production run replayed on a laptop: ``durable export`` writes a run's history as one
JSON document, and ``LocalRunner.replay`` / ``durable replay`` run the current code over
it with the deploy gate's dry replay (no step body runs, nothing is written), naming the
first divergence as ``durable check-deploy`` does."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from durable import App, Context
from durable.adapters.memory import MemoryLedger
from durable.adapters.payload_stores import MemoryPayloads
from durable.core.claim_check import ClaimCheck
from durable.engine.replay_file import FORMAT, ReplayFileError, dumps, export_run, replay
from durable.testing import LocalRunner, ReplayFailed
from tests.unit import replay_apps

pytestmark = pytest.mark.unit


def _recorded() -> tuple[LocalRunner, str]:
    """An order on the old code, asleep after its steps (one offloaded, one sealed, one
    by a codec) and a signal: what an operator would export from production."""
    runner = LocalRunner(replay_apps.old)
    run_id = runner.start("order", "o-7").run_id
    runner.run_until_idle()
    runner.signal(run_id, "go", {"n": 1})
    runner.run_until_idle()
    return runner, run_id


def _export(runner: LocalRunner, run_id: str, **options: Any) -> dict[str, Any]:
    return export_run(ClaimCheck(runner.memory_ledger, runner.payloads), run_id, **options)


def _file(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "order-7.json"
    path.write_text(dumps(document))
    return path


def test_the_same_code_replays_the_file_cleanly_and_runs_no_step() -> None:
    """GIVEN an exported run WHEN the unchanged code replays the file THEN it is ok, no
    step body runs, and the code sees every recorded value: the large one fetched into
    the file, the codec's, the signal's."""
    runner, run_id = _recorded()
    document = _export(runner, run_id)
    replay_apps.BODIES.clear()
    replay_apps.SEEN.clear()
    result = LocalRunner(replay_apps.same).replay(document)
    assert result.ok and not result.diverged and result.divergence is None
    assert result.error is None and result.verdict == "ok"
    assert replay_apps.BODIES == []  # steps returned their records
    assert replay_apps.SEEN == {
        "card": "***",  # the secret stays masked: the code sees SecretStr("***")
        "goods": replay_apps.CATALOGUE_BYTES,
        "cents": 1250,
        "go": {"n": 1},
    }
    (only,) = result.runs
    assert only.stopped_at == "0007" and only.records == 7  # the sleep: where it waits
    assert "replays cleanly" in result.summary()


def test_a_renamed_step_is_named_with_its_position_and_nothing_is_raised(tmp_path: Path) -> None:
    """GIVEN the file WHEN code that renamed the third step replays it THEN the result
    names the position and both names, as the deploy gate does; ``strict`` raises."""
    runner, run_id = _recorded()
    path = _file(tmp_path, _export(runner, run_id))
    result = LocalRunner(replay_apps.renamed).replay(path)
    assert not result.ok and result.diverged and result.verdict == "nondeterministic"
    divergence = result.divergence
    assert divergence is not None
    assert (divergence.position, divergence.recorded, divergence.called) == (
        "0003",
        "step 'charge'",
        "step 'bill'",
    )
    assert "at position 0003: recorded step 'charge', now step 'bill'" in result.summary()
    with pytest.raises(ReplayFailed, match="0003"):
        LocalRunner(replay_apps.renamed).replay(path, strict=True)
    assert LocalRunner(replay_apps.same).replay(str(path)).ok  # kept as a regression test


def test_no_secret_nor_key_in_the_file() -> None:
    """GIVEN a run holding a sealed card token THEN the exported text holds neither the
    token nor its ciphertext nor the run's wrapped data key: ``***`` as the console."""
    runner, run_id = _recorded()
    assert runner.get_run(run_id).data_key is not None  # the run did seal something
    text = dumps(_export(runner, run_id))
    assert replay_apps.CARD not in text
    assert "$sealed" not in text and "data_key" not in text
    payment = next(s for s in json.loads(text)["runs"][0]["steps"] if s["name"] == "payment")
    assert json.loads(payment["output"]) == {"customer": "o-7", "card": "***"}


def test_no_callback_token_in_the_file() -> None:
    """GIVEN a run waiting on a callback whose token a step handed on THEN the file holds
    no token, nor what one is checked against; the replay stops at the wait."""
    tokens: list[str] = []
    app = App()

    def send(cb: Any) -> str:
        tokens.append(cb.token)
        return f"approve at /callbacks/{cb.token}"

    @app.workflow(name="approval")
    def approval(ctx: Context) -> Any:
        cb = ctx.create_callback("approve")
        ctx.step(send, cb, name="send")
        return cb.result()

    runner = LocalRunner(app)
    run_id = runner.start("approval").run_id
    runner.run_until_idle()
    text = dumps(export_run(runner.memory_ledger, run_id))
    assert tokens and tokens[0] not in text
    assert "token_nonce" not in text and "token_hash" not in text
    assert runner.replay(json.loads(text)).ok


def test_the_large_value_is_in_the_file_or_listed_when_the_store_is_unreachable() -> None:
    """GIVEN a step result kept in the payload store WHEN exported with the store THEN the
    file holds the value; WHEN the store cannot be read THEN the reference stays, it is
    listed as unresolved, and the replay says it could not get through there."""
    runner, run_id = _recorded()
    fetched = dumps(_export(runner, run_id))
    assert "$durable.payload" not in fetched and "c" * 1000 in fetched

    class Unreachable(MemoryPayloads):
        def get(self, key: str) -> bytes:
            raise OSError("no route to the bucket")

    document = export_run(ClaimCheck(runner.memory_ledger, Unreachable()), run_id)
    assert "$durable.payload" in dumps(document)
    (missing,) = document["unresolved"]
    assert "'catalogue' at 0004" in missing and "no route to the bucket" in missing
    result = replay(replay_apps.same, document, empty=MemoryLedger())
    assert not result.ok and not result.diverged and result.verdict == "unchecked"
    assert "payload store" in result.summary()


def test_a_codecs_text_is_kept_as_written_and_decoded_by_the_code() -> None:
    runner, run_id = _recorded()
    document = _export(runner, run_id)
    price = next(s for s in document["runs"][0]["steps"] if s["name"] == "price")
    assert price["output"] == '"12.50 EUR"'
    replay_apps.SEEN.clear()
    assert replay(replay_apps.same, document, empty=MemoryLedger()).ok
    assert replay_apps.SEEN["cents"] == 1250


def test_a_continue_as_new_chain_is_exported_whole_on_request_and_replayed_link_by_link() -> None:
    """GIVEN a counter that continued as new twice WHEN its first run is exported THEN by
    default the file holds that run alone, and with ``chain`` every link after it too;
    a change in the last link only is found in the chain's replay, naming that run."""
    runner = LocalRunner(replay_apps.old)
    first = runner.start("counter", 0).run_id
    runner.run_until_idle()
    assert runner.result(first) == 2
    alone = _export(runner, first)
    chain = _export(runner, first, chain=True)
    assert len(alone["runs"]) == 1
    ids = [r["run"]["run_id"] for r in chain["runs"]]
    assert ids[0] == first and len(ids) == 3
    assert [r["run"].get("continued_from") for r in chain["runs"]] == [None, *ids[:2]]
    assert replay(replay_apps.same, chain, empty=MemoryLedger()).ok
    # the first link is unchanged
    assert replay(replay_apps.last_link_renamed, alone, empty=MemoryLedger()).ok
    result = replay(replay_apps.last_link_renamed, chain, empty=MemoryLedger())
    assert result.diverged and [r.ok for r in result.runs] == [True, True, False]
    problem = result.problem
    assert problem is not None and problem.verdict.run_id == ids[2]
    assert str(result.divergence) == "at position 0001: recorded step 'tick', now step 'count'"


def test_a_breakpoint_in_the_workflow_stops_there_with_the_recorded_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replay is plain Python in this process: ``breakpoint()`` in the workflow code
    reaches the debugger (here a stand-in hook) with the recorded result in scope."""
    app = App()

    def fetch() -> int:
        return 41

    @app.workflow(name="debugged")
    def debugged(ctx: Context) -> int:
        got = ctx.step(fetch, name="fetch")
        breakpoint()  # the point of the test
        return got + 1

    runner = LocalRunner(app)
    run_id = runner.start("debugged").run_id
    seen: list[Any] = []

    def hook(*args: Any, **kwargs: Any) -> None:
        caller = inspect.currentframe()
        seen.append(caller.f_back.f_locals.get("got") if caller and caller.f_back else None)

    monkeypatch.setattr(sys, "breakpointhook", hook)
    runner.run_until_idle()
    seen.clear()  # the recording run stopped there too
    assert runner.replay(export_run(runner.memory_ledger, run_id)).ok
    assert seen == [41]


def test_a_failed_run_replays_up_to_its_failure() -> None:
    app = App()

    def broken() -> str:
        raise ValueError("upstream said no")

    @app.workflow(name="sync")
    def sync(ctx: Context) -> str:
        return ctx.step(broken, name="broken")

    runner = LocalRunner(app)
    run_id = runner.start("sync").run_id
    runner.run_until_idle()
    runner.advance(days=1)  # every retry on the way
    document = export_run(runner.memory_ledger, run_id)
    assert document["runs"][0]["run"]["status"] == "FAILED"
    result = runner.replay(document)
    assert result.ok and result.runs[0].stopped_at == "0001"


def test_a_file_of_another_format_or_no_file_is_refused(tmp_path: Path) -> None:
    runner, run_id = _recorded()
    document = _export(runner, run_id)
    assert document["format"] == FORMAT == 1
    with pytest.raises(ReplayFileError, match="format 2"):
        runner.replay({**document, "format": 2})
    with pytest.raises(ReplayFileError, match="no file"):
        runner.replay(tmp_path / "missing.json")
    with pytest.raises(ReplayFileError, match="no run"):
        export_run(runner.memory_ledger, "01JZZZZZZZZZZZZZZZZZZZZZZZ")


def test_durable_replay_exits_1_at_a_divergence_and_0_when_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from durable.cli import main

    runner, run_id = _recorded()
    path = _file(tmp_path, _export(runner, run_id))
    assert main(["replay", str(path), "--app", "tests.unit.replay_apps:same"]) == 0
    clean = f"run {run_id} (order v1, WAITING, 7 records): replays cleanly"
    assert clean in capsys.readouterr().out
    assert main(["replay", str(path), "--app", "tests.unit.replay_apps:renamed"]) == 1
    out = capsys.readouterr().out
    assert "diverges at position 0003: recorded step 'charge', now step 'bill'" in out
    assert main(["replay", str(path), "--app", "tests.unit.replay_apps:renamed", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["divergence"] == {
        "position": "0003",
        "recorded": "step 'charge'",
        "called": "step 'bill'",
    }
    (tmp_path / "bad.json").write_text('{"format": 9, "runs": []}')
    assert main(["replay", str(tmp_path / "bad.json"), "--app", "tests.unit.replay_apps:same"])
    assert "format 9" in capsys.readouterr().err


def test_the_documented_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/testing.md's runnable example, as written (a doc that drifts fails here)."""
    import re

    page = (Path(__file__).parents[2] / "docs" / "testing.md").read_text()
    section = page.split("## Replaying a recorded run on your laptop", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    example = next(b for b in blocks if "export_run" in b)
    exec(compile(example, "docs/testing.md", "exec"), {"__name__": "doc_example"})
    assert "diverges at position 0002: recorded step 'charge', now step 'bill'" in (
        capsys.readouterr().out
    )


def test_a_project_made_by_durable_init_replays_its_recorded_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN a project made by ``durable init``, its greet (an approval, a sleep) and its
    greet-team (a distributed map: a child run per name) recorded and exported into the
    project WHEN ``durable replay FILE`` runs in the project (the app from its
    pyproject.toml) THEN both replay cleanly; the project's code with ``compose``
    renamed diverges at the first position, named."""
    from durable.cli import main
    from durable.scaffold import init

    project = tmp_path / "replayshop"
    init(project, requirement="durable-lambda")
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.chdir(project)
    try:
        from replayshop.workflows import app  # type: ignore[import-not-found]

        runner = LocalRunner(app)
        greet = runner.start("greet", {"name": "Ada"}).run_id
        team = runner.start("greet-team", ["Ada", "Bob"]).run_id
        runner.run_until_idle()
        runner.complete_wait(greet, "approval", True)
        runner.advance(hours=1)
        assert runner.result(greet) == "sent: Hello, Ada!"
        assert runner.result(team) == ["sent: Hello, Ada!", "sent: Hello, Bob!"]
        runs = project / "tests" / "runs"
        runs.mkdir()
        for name, run_id in (("greet", greet), ("team", team)):
            (runs / f"{name}.json").write_text(dumps(export_run(runner.memory_ledger, run_id)))
            assert main(["replay", f"tests/runs/{name}.json"]) == 0
            assert "replays cleanly" in capsys.readouterr().out
        source = (project / "replayshop" / "workflows.py").read_text()
        renamed = source.replace("def compose(", "def compose_message(").replace(
            "compose(greeting.name)", "compose_message(greeting.name)"
        )
        (project / "replayshop" / "workflows_next.py").write_text(renamed)
        next_app = "replayshop.workflows_next:app"
        assert main(["replay", "tests/runs/greet.json", "--app", next_app]) == 1
        out = capsys.readouterr().out
        assert "diverges at position 0001: recorded step 'compose', now step " in out, out
        assert "'compose_message'" in out
    finally:
        for module in [m for m in sys.modules if m.split(".")[0] == "replayshop"]:
            del sys.modules[module]
