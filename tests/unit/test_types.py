"""Types that hold (issue 33): a user's ``mypy --strict`` sees what the authoring API
returns and refuses a call that cannot work.

mypy runs in-process on this checkout's ``durable`` (its ``mypy_path``: mypy does not
follow the import hook of an editable install), with errors inside ``durable`` itself
silenced: the repo's own mypy run answers for those. The runs share one cache, so
only the first analyses the library.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import mypy.api
import pytest

from durable.scaffold import init
from durable.testing import LocalRunner

ROOT = Path(__file__).resolve().parents[2]
EVERY_CALL = ROOT / "tests" / "typecheck" / "app_uses_every_call.py"

CONFIG = """\
[mypy]
strict = True
python_version = 3.11
mypy_path = {root}
pretty = False
show_error_codes = True

[mypy-durable.*]
follow_imports = silent

[mypy-moto.*,pynamodb.*,aws_xray_sdk.*]
ignore_missing_imports = True
"""

# Each wrong call, with the code of the error mypy must give on its line (`# error: <code>`;
# mypy may add a second one, from another form of ``ctx.step`` it tried: the async one).
WRONG_CALLS = """\
from datetime import timedelta

from pydantic import BaseModel

from durable import App, Context

app = App()


class Decision(BaseModel):
    approved: bool


class Count:
    def __init__(self, n: int) -> None:
        self.n = n


class CountCodec:
    def serialize(self, value: Count) -> str:
        return str(value.n)

    def deserialize(self, data: str) -> Count:
        return Count(int(data))


@app.step
def reserve(order_id: str, quantity: int = 1) -> list[str]:
    return [order_id] * quantity


@app.workflow
def child(ctx: Context, order_id: str) -> int:
    return len(order_id)


@app.workflow
def flow(ctx: Context) -> None:
    ctx.step(reserve, "o", quantity="two")  # error: arg-type
    ctx.step(reserve, 3)  # error: arg-type
    ctx.step(reserve, "o", colour="red")  # error: call-arg
    ctx.step(reserve)  # error: call-arg
    ctx.step(reserve, 3, name="reserve")  # error: arg-type
    # Runs, but is refused: with options, bind fn's keyword arguments (functools.partial).
    ctx.step(reserve, "o", quantity=2, name="reserve")  # error: call-arg
    late: int = ctx.wait_for_callback("approval", result_type=Decision)  # error: assignment
    ctx.run_child(child, 3)  # error: arg-type
    count: str = ctx.run_child(child, "o")  # error: assignment
    charged: str = ctx.start_child(child, "o").result()  # error: assignment
    # A codec must be one of the step's result type (mypy says so of the first form of
    # ctx.step, which takes no option); what a codec decodes is the call's result.
    ctx.step(reserve, "o", serdes=CountCodec())  # error: call-arg
    seen: str = ctx.run_child(child, "o", serdes=CountCodec())  # error: assignment
    ctx.wait_for_condition(lambda: 1, timedelta(seconds=1), serdes=CountCodec())  # error: arg-type


async def count(sku: str) -> int:
    return len(sku)


@app.step
async def rate(currency: str) -> float:
    return 1.0


@app.workflow
async def priced(ctx: Context) -> None:
    ctx.step(count, 3)  # error: arg-type
    label: str = ctx.step(count, "o")  # error: assignment
    quoted: str = await rate("EUR")  # error: assignment
    await rate(1)  # error: arg-type
    ctx.run_child(priced, "o")  # error: arg-type
"""

_ERROR = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<message>.*)\[(?P<code>[a-z-]+)\]$")


Check = Callable[[list[Path], Path], tuple[list[str], int]]


@pytest.fixture(scope="module")
def check(tmp_path_factory: pytest.TempPathFactory) -> Check:
    """``check(files, cwd)``: mypy's report lines and exit status, under ``CONFIG``."""
    work = tmp_path_factory.mktemp("mypy")
    config = work / "mypy.ini"
    config.write_text(CONFIG.format(root=ROOT))

    def run(files: list[Path], cwd: Path) -> tuple[list[str], int]:
        # mypy puts its working folder first on the import path: run it in the project
        # checked, or a scaffold's ``tests`` package would meet this repo's.
        before = Path.cwd()
        os.chdir(cwd)
        try:
            out, err, status = mypy.api.run(
                ["--config-file", str(config), "--cache-dir", str(work / "cache")]
                + [str(f) for f in files]
            )
        finally:
            os.chdir(before)
        return out.splitlines() + err.splitlines(), status

    return run


def test_an_app_using_every_call_type_checks_with_the_types_it_asserts(check: Check) -> None:
    """Every ``assert_type`` in the module holds: the inference of ``ctx.step``,
    ``wait_for_callback(result_type=...)``, ``run_child``/``start_child``, ``effect``,
    ``map`` and the rest did not fall back to ``Any`` or change."""
    report, status = check([EVERY_CALL], ROOT)
    assert status == 0, "\n".join(report)


def test_the_app_using_every_call_registers_and_its_step_forms_run() -> None:
    """The module is real code: it registers, and its ``pay`` workflow (every form of
    ``ctx.step`` it types, options and ``functools.partial`` included) runs to its end."""
    from tests.typecheck import app_uses_every_call as every

    assert sorted(every.app.schedules()) == ["hourly", "nightly-3am"]
    runner = LocalRunner(every.app)
    run = runner.start("pay", {"order_id": "o-1", "amount": 3})
    runner.run_until_idle()
    receipt = runner.result(run.run_id)
    assert isinstance(receipt, every.Receipt)
    assert receipt.order_id == "o-1" and receipt.charge_id.startswith("ch-effect:")
    # The async forms run as typed: ``restock`` awaits and gathers, ``reorder`` runs it
    # as a child three ways.
    order = {"order_id": "o-2", "amount": 1}
    restocked = runner.start("restock", order)
    reordered = runner.start("reorder", order)
    runner.run_until_idle()
    assert runner.result(restocked.run_id) == [1.25, 1.0]
    assert runner.result(reordered.run_id) == 1.0


def test_the_example_of_the_context_reference_type_checks(check: Check, tmp_path: Path) -> None:
    """docs/reference/context.md's "What a type checker sees", as written."""
    page = (ROOT / "docs" / "reference" / "context.md").read_text()
    section = page.split("## What a type checker sees", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "context_example.py").write_text(example)
    report, status = check([tmp_path / "context_example.py"], tmp_path)
    assert status == 0, "\n".join(report)


def test_the_scaffold_of_durable_init_type_checks_strictly(check: Check, tmp_path: Path) -> None:
    project = tmp_path / "flows"
    init(project)
    report, status = check([project / "flows", project / "handlers", project / "tests"], project)
    assert status == 0, "\n".join(report)


def test_a_wrong_call_is_an_error_on_its_line(check: Check, tmp_path: Path) -> None:
    """A wrong argument to ``ctx.step`` (its type, a name ``fn`` lacks, one missing), a
    wrong input to ``run_child``, a result used as another type and a codec (``serdes=``)
    of another type than the call's value are each refused, for an ``async def`` step or
    workflow as for a plain one."""
    (tmp_path / "wrong_calls.py").write_text(WRONG_CALLS)
    report, status = check([tmp_path / "wrong_calls.py"], tmp_path)
    assert status == 1, "\n".join(report)
    expected = {
        n: line.rsplit("# error: ", 1)[1]
        for n, line in enumerate(WRONG_CALLS.splitlines(), 1)
        if "# error: " in line
    }
    errors = [m for m in map(_ERROR.match, report) if m is not None]
    found: dict[int, set[str]] = {}
    for m in errors:
        found.setdefault(int(m["line"]), set()).add(m["code"])
    # Every wrong line, and no other, is an error, of the kind expected.
    assert found.keys() == expected.keys(), "\n".join(report)
    assert all(code in found[n] for n, code in expected.items()), "\n".join(report)
    messages = {m["message"].strip() for m in errors}
    assert (
        'Argument "quantity" to "step" of "Context" has incompatible type "str"; expected "int"'
        in messages
    )
    assert 'Unexpected keyword argument "colour" for "step" of "Context"' in messages
    assert (
        'Argument 1 to "wait_for_condition" of "Context" has incompatible type '
        '"Callable[[], int]"; expected "Callable[[], Count]"' in messages
    )
