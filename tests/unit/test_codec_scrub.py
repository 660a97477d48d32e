"""Values are scrubbed of callback tokens before any encoder that hides text writes them, and
an effect stores no token of any run (issue 44, findings 4 and 1).

A ``serdes=`` codec may write a value in a form no scan of its text reads (compressed,
base64): the write boundary scanned the codec's output and found nothing, so a token in
the value was stored. The value is now scrubbed before the codec sees it, and the workflow
gets the scrubbed value back on the first execution as on replay. An effect's reference
was redacted of this run's tokens only: another run's, echoed by the call, was stored in
the idempotency table.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr, field_serializer, field_validator

from durable import App, Context, current_step
from durable.core.model import StepKind
from durable.core.tokens import make_token
from durable.core.write_boundary import REDACTED_TOKEN
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit

TOKEN = make_token(b"a-secret-of-sixteen-bytes", "01KDVDNA00NH4Y4J45KWBET2C0", "0003", "n1")
URL = f"https://api.example.com/prod/callbacks/{TOKEN}"
SCRUBBED_URL = f"https://api.example.com/prod/callbacks/{REDACTED_TOKEN}"


class Note(BaseModel):
    text: str
    tags: list[str]


@dataclasses.dataclass(frozen=True)
class Mail:
    to: str
    links: list[str]
    meta: dict[str, str]
    pair: tuple[str, int]
    note: Note


def mail(link: str) -> Mail:
    return Mail(
        to="bob",
        links=[link, "https://example.com/a.b.c"],
        meta={link: "key too", "plain": "v1.2.3"},
        pair=(f"see {link}", 7),
        note=Note(text=f"approve at {link}", tags=[link]),
    )


class Packed:
    """Stores a ``Mail`` as a JSON string of gzipped, base64-encoded JSON: no scan of the
    stored text can read what it holds."""

    def serialize(self, value: Mail) -> str:
        plain = json.dumps(
            {
                "to": value.to,
                "links": value.links,
                "meta": value.meta,
                "pair": list(value.pair),
                "note": value.note.model_dump(),
            }
        )
        return json.dumps(base64.b64encode(gzip.compress(plain.encode(), mtime=0)).decode())

    def deserialize(self, data: str) -> Mail:
        plain = json.loads(gzip.decompress(base64.b64decode(json.loads(data))))
        return Mail(
            to=plain["to"],
            links=plain["links"],
            meta=plain["meta"],
            pair=(plain["pair"][0], plain["pair"][1]),
            note=Note.model_validate(plain["note"]),
        )


def everything(runner: LocalRunner) -> str:
    return "\n".join(
        repr(vars(store)) for store in (runner.memory_ledger, runner.effect_store, runner.payloads)
    )


def test_a_codec_that_hides_its_text_stores_no_token_and_replays_the_same() -> None:
    """GIVEN a step whose result (a dataclass holding a list, a dict, a tuple and a
    pydantic model, each with a callback URL) is stored by a gzip+base64 codec
    WHEN the run records it, suspends and replays
    THEN the stored text, decoded by the codec, holds no token, and the workflow saw the
    redacted value on the first execution and the same on the replay."""
    app = App()
    seen: list[Mail] = []

    def compose() -> Mail:
        return mail(URL)

    @app.workflow
    def flow(ctx: Context) -> None:
        seen.append(ctx.step(compose, serdes=Packed()))
        ctx.sleep(timedelta(minutes=5))

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    runner.advance(minutes=10)
    assert runner.get_run(run.run_id).status.value == "SUCCEEDED"
    (step,) = [s for s in runner.history(run.run_id) if s.kind == StepKind.STEP]
    assert step.output is not None
    decoded = Packed().deserialize(step.output)
    assert decoded == mail(SCRUBBED_URL)
    assert len(seen) == 2 and seen[0] == seen[1] == mail(SCRUBBED_URL)
    assert TOKEN not in everything(runner)


def test_a_batch_s_and_a_condition_s_codec_values_are_scrubbed_too() -> None:
    app = App()
    seen: list[Any] = []

    @app.workflow
    def flow(ctx: Context) -> None:
        batch = ctx.parallel(lambda c: mail(URL), serdes=Packed())
        seen.append(batch.values()[0])
        seen.append(
            ctx.wait_for_condition(
                lambda: mail(URL), timedelta(seconds=1), name="sent", serdes=Packed()
            )
        )

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status.value == "SUCCEEDED"
    assert seen == [mail(SCRUBBED_URL), mail(SCRUBBED_URL)]
    assert TOKEN not in everything(runner)


class Encoded(BaseModel):
    """A model whose serializer base64-encodes a field: the default path's own codec."""

    link: str
    secret: SecretStr | None = None

    @field_serializer("link")
    def _hide(self, link: str) -> str:
        return base64.b64encode(link.encode()).decode()

    @field_validator("link", mode="before")
    @classmethod
    def _show(cls, link: str) -> str:
        try:
            return base64.b64decode(link, validate=True).decode()
        except ValueError:
            return link


def test_a_pydantic_serializer_that_hides_a_field_stores_no_token() -> None:
    app = App()
    seen: list[Encoded] = []

    def make() -> Encoded:
        return Encoded(link=URL)

    @app.workflow
    def flow(ctx: Context) -> None:
        seen.append(ctx.step(make))
        ctx.sleep(timedelta(minutes=5))

    runner = LocalRunner(app)
    runner.start("flow")
    runner.run_until_idle()
    runner.advance(minutes=10)
    assert [e.link for e in seen] == [SCRUBBED_URL, SCRUBBED_URL]
    assert TOKEN not in everything(runner)


def test_scrub_value_copies_only_what_holds_a_token() -> None:
    from durable.core.tokens import scrub_value  # (imported here: new with this rule)

    clean = {"a": [1, "x.y"], "b": ("c",)}
    assert scrub_value(clean) is clean
    assert scrub_value(mail(URL)) == mail(SCRUBBED_URL)
    assert scrub_value({URL: {URL}}) == {SCRUBBED_URL: {SCRUBBED_URL}}
    secret = SecretStr(URL)
    assert scrub_value(secret).get_secret_value() == SCRUBBED_URL
    assert scrub_value(secret, secrets=False) is secret  # sealed on the default path


def test_an_effect_echoing_another_run_s_token_stores_none() -> None:
    """GIVEN a step whose effect's call answers with another run's callback URL (a mail
    API echoing the mail it sent)
    WHEN the effect records its reference
    THEN the idempotency table holds no token, and the step gets the redacted reference."""
    app = App()

    def send() -> str:
        return str(current_step().effect("mail", lambda key: f"sent: {URL}"))

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(send)

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == json.dumps(f"sent: {SCRUBBED_URL}")
    assert TOKEN not in repr(vars(runner.effect_store))
    assert REDACTED_TOKEN in repr(vars(runner.effect_store))
