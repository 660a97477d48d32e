"""The ``durable`` command: run the local stack, and operate runs over the HTTP API.

    durable init my-flows      (a project: workflows, stack template, tests, Makefile)
    durable dev --app examples.onboarding:app --time-scale 86400
    durable start onboarding --input '{"user_id": "u1", "email": "u1@example.com"}'
    durable runs --workflow onboarding
    durable show RUN_ID [--timeline]
    durable approve TOKEN   /  durable reject TOKEN --reason "over budget"
    durable signal RUN_ID NAME --payload '{"n": 1}' [--key order-7-paid]
    durable cancel RUN_ID --reason "duplicate" [--compensate]
    durable retry RUN_ID [--upgrade-to 2]   /  durable fork RUN_ID --from-step 3

The operate commands talk to ``durable dev`` (found through ``.durable/dev.json``, or the
newest dev running on this machine) or,
with ``--endpoint``, to a deployed API (requests to AWS are signed with SigV4 for the
IAM-authorized operator routes). Errors are one line saying what to do, exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

from durable.adapters.sigv4 import NoCredentials, is_aws_api, signed_headers
from durable.ops import render

DEFAULT_ENDPOINT = "http://127.0.0.1:8787"
STATE_DIR = Path(".durable")


class CliError(Exception):
    """A failure to report in one line."""


def fail(message: str) -> NoReturn:
    raise CliError(message)


def parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        fail(
            f"{what} is not valid JSON ({e.msg} at column {e.colno}); quote it, e.g. "
            f'--{what} \'{{"key": "value"}}\''
        )


# --- HTTP client ----------------------------------------------------------------------


def dev_info() -> dict[str, Any] | None:
    """The running ``durable dev`` to talk to (``durable.local.dev_file``), or None."""
    from durable.local.dev_file import running_dev

    return running_dev(STATE_DIR)


def endpoint(args: argparse.Namespace) -> str:
    if args.endpoint:
        return str(args.endpoint).rstrip("/")
    if os.environ.get("DURABLE_ENDPOINT"):
        return os.environ["DURABLE_ENDPOINT"].rstrip("/")
    dev = dev_info()
    if dev is not None:
        return str(dev["endpoint"])
    return DEFAULT_ENDPOINT


def time_scale(args: argparse.Namespace) -> float:
    """The virtual seconds per real one of the stack the CLI talks to (durable dev's
    ``--time-scale``; 1 for a deployed stack)."""
    dev = dev_info()
    if dev is None or endpoint(args) != dev.get("endpoint"):
        return 1.0
    return float(dev.get("time_scale") or 1.0)


def call(
    args: argparse.Namespace,
    method: str,
    path: str,
    payload: Any = None,
    headers: dict[str, str] | None = None,
) -> Any:
    base = endpoint(args)
    url = base + path
    body = None if payload is None else json.dumps(payload).encode()
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    if is_aws_api(base) and not getattr(args, "no_sign", False):
        try:
            all_headers = signed_headers(url, method, body, all_headers)
        except NoCredentials as e:
            fail(f"{e}, or pass --no-sign")
    request = urllib.request.Request(url, data=body, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            data = response.read()
    except urllib.error.HTTPError as e:
        detail = e.read().decode(errors="replace")
        try:
            error = json.loads(detail)["error"]
            where = f" (field {error['field']})" if error.get("field") else ""
            fail(f"{error['message']}{where}")
        except (ValueError, KeyError, TypeError):
            fail(f"HTTP {e.code} from {url}: {detail[:200]}")
    except urllib.error.URLError as e:
        fail(
            f"cannot reach {base} ({e.reason}); start the local stack with `durable dev "
            "--app module:app` or pass --endpoint"
        )
    return json.loads(data) if data else None


# --- commands -------------------------------------------------------------------------


def project_app(folder: Path) -> str | None:
    """``[tool.durable] app`` of the project in ``folder`` (``durable init`` writes it)."""
    import tomllib

    try:
        with (folder / "pyproject.toml").open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return None
    except tomllib.TOMLDecodeError as e:
        fail(f"pyproject.toml is not valid TOML ({e}); fix it or pass --app module:attribute")
    app = data.get("tool", {}).get("durable", {}).get("app")
    return str(app) if app else None


def cmd_dev(args: argparse.Namespace) -> int:
    import signal
    import threading

    from durable.local.server import DevOptions, DevServer

    if args.time_scale <= 0:
        fail("--time-scale must be positive, e.g. 86400 to make a day pass in a second")
    try:
        import moto.server  # noqa: F401 - only checking that it is there
    except ImportError:
        fail(
            "durable dev needs the library's local extra (an embedded moto server): "
            "pip install 'durable-lambda[local]' (a durable init project's dev extra has it)"
        )
    app = args.app or project_app(Path.cwd())
    if not app:
        fail(
            "which workflows? pass --app module:attribute (e.g. --app shop.workflows:app), "
            "or set app under [tool.durable] in pyproject.toml (durable init does)"
        )
    # The user's package is imported from the current folder, as `python -m` would; the
    # worker processes inherit this path.
    sys.path.insert(0, os.getcwd())
    _load_app(app)  # fails here, in one line, rather than in every worker
    if args.worker_app:
        _load_app(args.worker_app)
    from durable.local.overlay import OverlayError, local_functions

    try:  # stack.yaml: the variables and secrets of the project's own (durable.local.overlay)
        own = local_functions(Path.cwd(), os.environ)
    except OverlayError as e:
        fail(str(e))
    server = DevServer(
        DevOptions(
            app=app,
            port=args.port,
            workers=args.workers,
            worker_timeout=args.worker_timeout,
            time_scale=args.time_scale,
            storage=args.storage,
            dynamodb_port=args.dynamodb_port,
            scheduler_port=args.scheduler_port,
            verbose=args.verbose,
            worker_app=args.worker_app,
            own=own,
        )
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        server.start()
        print(f"• durable dev ready in {server.ready_seconds:.1f} s", flush=True)
        print("\n".join(server.banner()), flush=True)
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    except RuntimeError as e:  # a part that could not start says why
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1
    finally:
        print("• stopping…", flush=True)
        server.stop()
        print("• stopped", flush=True)
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    from durable.errors import InvalidInput
    from durable.scaffold import WHEELS, init, installed_from

    dest = Path(args.dir)
    try:
        written = init(dest, args.name, requirement=args.requirement)
    except InvalidInput as e:
        fail(str(e))
    shown = os.path.relpath(dest.resolve())
    print(f"created {len(written)} files in {shown}/")
    origin = installed_from()
    if args.requirement is None and origin and not (dest / WHEELS).is_dir():
        # A checkout: no wheel to copy, and its path would hold on this machine only.
        print(
            f"note: this library was installed from a folder ({origin}), not a wheel: put "
            f"its wheel in {shown}/{WHEELS}/ (pip wheel --no-deps -w {WHEELS} FOLDER) for "
            "make and sam build to find it, or they look for the pinned version on PyPI"
        )
    print("next:")
    print(f"  cd {shlex.quote(shown)}")
    print("  make test    # the example workflow's tests (LocalRunner, no servers)")
    print("  make dev     # the whole stack on this machine: API, workers, timers, DynamoDB Local")
    print("  make build   # sam build of your stack (then sam deploy --guided)")
    print(
        "your policies, environment variables and secrets go in stack.yaml (template.yaml "
        "stays the library's: an upgrade may replace it, never stack.yaml)"
    )
    return 0


def cmd_sam(args: argparse.Namespace) -> int:
    from durable.local import sam

    try:
        return sam.run(args.sam_args)
    except sam.SamError as e:
        fail(str(e))


def cmd_check_deploy(args: argparse.Namespace) -> int:
    """Replay every unfinished run against the new code (``durable.engine.deploy_check``)."""
    from durable.engine.deploy_check import ReadOnlyLedger, check_deploy

    sys.path.insert(0, os.getcwd())
    app = _load_app(args.app)
    engine = _check_engine(args, app, ReadOnlyLedger)
    workflows = [*(w.name for w in app.workflows()), *(args.workflow or [])]
    report = check_deploy(engine, workflows)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 1 if report.broken or report.unchecked else 0
    rate = len(report.runs) / report.seconds if report.seconds else 0.0
    print(
        f"checked {len(report.runs)} unfinished runs of {len(set(workflows))} workflows "
        f"in {report.seconds:.1f} s ({rate:.0f} runs/s)"
    )
    verdicts = ("ok", "nondeterministic", "fails", "unregistered", "unchecked")
    rows = [
        [name, str(version), *(str(counts.get(v, 0)) for v in verdicts)]
        for (name, version), counts in sorted(report.summary().items())
    ]
    if rows:
        print(render.table(["workflow", "version", *verdicts], rows))
    for r in report.runs:
        if r.verdict == "ok":
            continue
        if r.position:
            where = f" at {r.position}: recorded {r.recorded}, now {r.called}"
        else:
            where = f": {r.called}" if r.called else ""
        print(f"\n{r.run_id}  {r.workflow} v{r.version}  {r.verdict}{where}\n  -> {r.advice}")
    if report.broken:
        print(f"\n{len(report.broken)} run(s) would break on this code: do not deploy it as is.")
        return 1
    if report.unchecked:
        print(
            f"\n{len(report.unchecked)} run(s) could not be checked: run the check where it can "
            "open their sealed values (the stack's KMS key: DURABLE_KMS_KEY_ID)."
        )
        return 1
    print("\nevery unfinished run replays cleanly on this code.")
    return 0


def _load_app(reference: str) -> Any:
    from durable.engine.registry import App

    module_name, _, attribute = reference.partition(":")
    try:
        module = __import__(module_name, fromlist=["_"])
        app = getattr(module, attribute)
    except (ImportError, AttributeError, ValueError) as e:
        fail(f"cannot load --app {reference!r} ({e}); pass module:attribute of a durable.App")
    if not isinstance(app, App):
        fail(f"--app {reference!r} is a {type(app).__name__}, not a durable.App")
    return app


def _check_engine(args: argparse.Namespace, app: Any, read_only: Any) -> Any:
    """An engine on the ledger to check, read-only: ``--table`` (AWS, or
    ``--dynamodb-endpoint``), else the running ``durable dev``."""
    import boto3

    from durable.adapters.aws_services import DYNAMODB_CLIENT_OPTIONS
    from durable.adapters.dynamodb import DynamoLedger
    from durable.adapters.memory import MemoryEffectStore, MemoryInvoker
    from durable.core.ports import PayloadStore
    from durable.core.secrets import KeyService, LocalKeys
    from durable.engine.engine import Engine

    endpoint, table = args.dynamodb_endpoint, args.table
    keys: KeyService | None = None
    payloads: PayloadStore | None = None
    if args.payload_bucket:
        from durable.adapters.s3_payloads import S3Payloads

        payloads = S3Payloads(boto3.client("s3"), args.payload_bucket)
    if table is None:
        from durable.local.dev_file import folder_dev

        dev = folder_dev(STATE_DIR)  # this folder's: never another project's ledger
        if dev is None:
            fail(
                "no ledger to check: pass --table (the stack's LedgerTableName output) or "
                "start `durable dev` in this folder"
            )
        endpoint, table = dev["dynamodb"], dev["ledger_table"]
        keys = LocalKeys(bytes.fromhex(Path(dev["key_file"]).read_text().strip()))
        if dev.get("payload_folder"):
            from durable.adapters.payload_stores import FolderPayloads

            payloads = FolderPayloads(Path(dev["payload_folder"]))
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    elif os.environ.get("DURABLE_KMS_KEY_ID"):
        from durable.adapters.kms import KmsKeys

        keys = KmsKeys(boto3.client("kms"), os.environ["DURABLE_KMS_KEY_ID"])
    from botocore.config import Config

    client = boto3.client(
        "dynamodb", endpoint_url=endpoint, config=Config(**DYNAMODB_CLIENT_OPTIONS)
    )
    ledger = read_only(DynamoLedger(client, table))
    return Engine(app, ledger, MemoryInvoker(), MemoryEffectStore(), keys=keys, payloads=payloads)


def cmd_start(args: argparse.Namespace) -> int:
    from durable.core.ids import check_user_key
    from durable.errors import InvalidInput

    payload = parse_json(args.input, "input") if args.input is not None else None
    if args.idempotency_key:
        try:  # refused here too, to name the option rather than the header
            check_user_key(args.idempotency_key, "--idempotency-key")
        except InvalidInput as e:
            fail(str(e))
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
    name = urllib.parse.quote(args.workflow, safe="")
    chosen = {}  # only what differs from the defaults, so the URL says what was asked
    if args.if_running != "fail":
        chosen["if_running"] = args.if_running
    if args.reuse != "never":
        chosen["reuse"] = args.reuse
    query = f"?{urllib.parse.urlencode(chosen)}" if chosen else ""
    run = call(args, "POST", f"/workflows/{name}/runs{query}", payload, headers)
    if args.quiet:
        print(run["run_id"])
    elif run.get("existing"):
        # A repeated key: the run it started before is the answer; nothing new started.
        how = "attached to" if args.if_running == "attach" else "already started:"
        print(f"{how} run {run['run_id']} ({run['status']}), started {run['created_at']}")
    else:
        print(f"started run {run['run_id']} ({run['status']})")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    # The API lists one workflow at a time (an index per workflow, never a scan); without
    # --workflow the CLI asks each registered workflow and shows the newest first.
    if args.workflow or args.attention:
        names: list[str | None] = [args.workflow]
    else:
        names = [w["name"] for w in call(args, "GET", "/workflows")["workflows"]]
    runs: list[dict[str, Any]] = []
    cursors: list[str] = []
    for name in names:
        query = {
            k: v
            for k, v in (
                ("workflow", name),
                ("status", args.status),
                ("needs_attention", "true" if args.attention else None),
                ("limit", str(args.limit)),
                ("cursor", args.cursor),
            )
            if v
        }
        page = call(args, "GET", "/runs?" + urllib.parse.urlencode(query))
        runs += page["runs"]
        if page.get("next_cursor"):
            cursors.append(str(page["next_cursor"]))
    runs.sort(key=lambda r: str(r["updated_at"]), reverse=True)
    if args.json:
        # The API's run summaries as they came, newest change first, and where to go on:
        # what a script reads instead of the table.
        more = cursors[0] if len(names) == 1 and cursors else None
        print(json.dumps({"runs": runs[: args.limit], "next_cursor": more}, indent=2))
        return 0
    print(render.render_runs(runs[: args.limit], wide=args.wide) if runs else "no runs match")
    if len(names) == 1 and cursors:
        print(f"(more: --cursor {cursors[0]})")
    elif cursors or len(runs) > args.limit:
        print(f"(showing the newest {args.limit}; narrow with --workflow or --status)")
    return 0


def since_cutoff(text: str, now: datetime) -> datetime:
    """``7d``, ``24h``, ``30m`` before ``now``, or an ISO date/time (UTC if no zone)."""
    units = {"d": 86400, "h": 3600, "m": 60}
    if text[-1:] in units and text[:-1].isdigit():
        return now - timedelta(seconds=int(text[:-1]) * units[text[-1]])
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        fail(f"--since {text!r}: give 7d, 24h, 30m or an ISO date like 2026-11-01")
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def cmd_cost(args: argparse.Namespace) -> int:
    """What the runs started since a time cost, by workflow and status, at list prices."""
    cutoff = since_cutoff(args.since, datetime.now(UTC))
    stamp = cutoff.strftime("%Y-%m-%dT%H:%M:%S")
    if args.workflow:
        names = [args.workflow]
    else:
        names = [w["name"] for w in call(args, "GET", "/workflows")["workflows"]]
    ids: list[tuple[str, str]] = []
    for name in names:
        cursor: str | None = None
        while True:  # newest change first: stop at the first run untouched since the cutoff
            query = {"limit": "100", **({"cursor": cursor} if cursor else {})}
            path = f"/workflows/{urllib.parse.quote(name, safe='')}/runs?"
            page = call(args, "GET", path + urllib.parse.urlencode(query))
            fresh = [r for r in page["runs"] if str(r["updated_at"]) >= stamp]
            ids += [(name, str(r["run_id"])) for r in fresh if str(r["created_at"]) >= stamp]
            cursor = page.get("next_cursor")
            if not cursor or len(fresh) < len(page["runs"]):
                break
    rows: dict[tuple[str, str], dict[str, float]] = {}
    prices_of = ""
    for i, (name, run_id) in enumerate(ids, 1):
        if sys.stderr.isatty() or i % 50 == 0 or i == len(ids):
            print(f"\rreading runs {i}/{len(ids)}", end="", file=sys.stderr, flush=True)
        run = call(
            args,
            "GET",
            f"/workflows/{urllib.parse.quote(name, safe='')}/runs/"
            + urllib.parse.quote(run_id, safe=""),
        )
        row = rows.setdefault((name, str(run["status"])), {"runs": 0.0, "usd": 0.0})
        row["runs"] += 1
        row["usd"] += float((run.get("cost") or {}).get("usd") or 0)
        prices_of = prices_of or str((run.get("cost") or {}).get("prices_of") or "")
        for key, value in (run.get("usage") or {}).items():
            row[key] = row.get(key, 0.0) + float(value)
    if ids:
        print(file=sys.stderr)
    if not rows:
        print(f"no runs started since {stamp}Z" + (f" of {args.workflow}" if args.workflow else ""))
        return 0
    total = {"runs": 0.0, "usd": 0.0}
    lines = []
    for (name, status), row in sorted(rows.items()):
        for key, value in row.items():
            total[key] = total.get(key, 0.0) + value
        lines.append(_cost_row(name, status, row))
    lines.append(_cost_row("all", "", total))
    print(
        render.table(
            [
                "workflow",
                "status",
                "runs",
                "WCU",
                "RCU",
                "invocations",
                "Lambda s",
                "timers",
                "cost",
                "per run",
                "per 1M runs",
            ],
            lines,
        )
    )
    print(
        f"runs started since {stamp}Z, at {prices_of or 'us-east-1'} list prices "
        "(DynamoDB on-demand, Lambda arm64, Scheduler, API Gateway REST); an estimate, "
        "not an invoice: docs/operations.md#what-a-run-costs"
    )
    return 0


_ACTIONS = ("list", "pause", "resume", "run", "show")
# A fire's verdict in a column (``FireView.result``).
_VERDICT = {
    "started": "started",
    "duplicate": "repeat",
    "skipped_overlap": "skipped (overlap)",
    "skipped_missed": "missed",
}


def _fire_when(fire: dict[str, Any]) -> str:
    return "run now" if fire.get("manual") else str(fire.get("scheduled_time") or "")


def _last_fire(listed: dict[str, Any]) -> str:
    fires = listed.get("recent_fires") or []
    if not fires:
        return ""
    last = fires[0]
    return f"{_fire_when(last)} {_VERDICT.get(last['result'], last['result'])}"


def cmd_schedules(args: argparse.Namespace) -> int:
    """The app's schedules and their last fires; one's recent fires; pause, resume or run
    one now. ``durable schedules NAME`` shows NAME (unless NAME is an action's word)."""
    if args.action not in _ACTIONS:  # durable schedules NAME
        args.action, args.name = "show", args.action
    if args.action == "list":
        listed = call(args, "GET", "/schedules")["schedules"]
        if not listed:
            print("no schedules: declare one with @app.workflow(schedule=...) or app.schedule(...)")
            return 0
        rows = [
            [
                s["name"],
                s["workflow"],
                s["expression"] + ("" if s["timezone"] == "UTC" else f" {s['timezone']}"),
                s["state"],
                s.get("next_fire") or "",
                s["overlap"] if s["overlap"] != "allow" else "",
                _last_fire(s),
            ]
            for s in listed
        ]
        print(
            render.table(
                ["schedule", "workflow", "when", "state", "next fire", "overlap", "last fire"],
                rows,
            )
        )
        return 0
    if not args.name:
        fail(f"durable schedules {args.action} needs the schedule's name")
    if args.action == "show":
        return _show_schedule(args)
    path = f"/schedules/{urllib.parse.quote(args.name, safe='')}/{args.action}"
    if args.action == "run":
        headers = {"Idempotency-Key": args.key} if args.key else None
        fired = call(args, "POST", path, {}, headers=headers)
        print(f"schedule {args.name}: {fired['result']}, run {fired['run_id']}")
        return 0
    view = call(args, "POST", path, {})
    print(
        f"schedule {args.name}: {view['state']}"
        + (f", next fire {view['next_fire']}" if view.get("next_fire") else "")
    )
    return 0


def _show_schedule(args: argparse.Namespace) -> int:
    """One schedule and its recent fires, newest first, each with its verdict."""
    listed = call(args, "GET", "/schedules")["schedules"]
    found = [s for s in listed if s["name"] == args.name]
    if not found:
        known = ", ".join(s["name"] for s in listed) or "none"
        fail(f"no schedule named {args.name!r} (known: {known})")
    (s,) = found
    when = s["expression"] + ("" if s["timezone"] == "UTC" else f" {s['timezone']}")
    print(f"schedule {s['name']}: {s['workflow']} at {when}, {s['state']}")
    print(f"  overlap {s['overlap']}, missed {s['missed']}")
    if s.get("next_fire"):
        print(f"  next fire {s['next_fire']}")
    fires = s.get("recent_fires") or []
    if not fires:
        print("no fires yet")
        return 0
    rows = [
        [
            _fire_when(f),
            _VERDICT.get(f["result"], f["result"]),
            f.get("run_id") or "",
            render.short(f.get("detail") or "", 80),
        ]
        for f in fires
    ]
    print(render.table(["fire", "verdict", "run", "detail"], rows))
    return 0


def _cost_row(name: str, status: str, row: dict[str, float]) -> list[str]:
    runs = row["runs"] or 1.0
    return [
        name,
        status,
        f"{row['runs']:g}",
        f"{row.get('wcu', 0):g}",
        f"{row.get('rcu', 0):g}",
        f"{row.get('inv', 0):g}",
        f"{row.get('ms', 0) / 1000:.1f}",
        f"{row.get('timers', 0):g}",
        render.usd(row["usd"]),
        render.usd(row["usd"] / runs),
        render.usd(row["usd"] / runs * 1e6),
    ]


SCOPED_HELP = (
    "through the routes scoped to this workflow (what a per-workflow IAM policy allows, "
    "e.g. the template's approver policy)"
)


RUN_HELP = "the run's id, or key:<KEY> with --workflow: the run started under that key"


def _resolved(args: argparse.Namespace, given: str) -> str:
    """A run's id: as given, or ``key:<KEY>`` (with ``--workflow``): the run of that
    workflow started under that idempotency key (a key names one run of its workflow)."""
    if not given.startswith("key:"):
        return given
    key = given[len("key:") :]
    workflow = getattr(args, "workflow", None)
    if not workflow:
        fail(f"{given!r} names a run by its key within a workflow: add --workflow <name>")
    path = f"/workflows/{urllib.parse.quote(workflow, safe='')}/runs?"
    runs = call(args, "GET", path + urllib.parse.urlencode({"key": key}))["runs"]
    if not runs:
        fail(
            f"no run of {workflow!r} has the key {key!r} "
            f"(`durable runs --workflow {workflow}` lists its runs and their keys)"
        )
    return str(runs[0]["run_id"])


def _run_path(args: argparse.Namespace, run_id: str) -> str:
    """``/runs/RUN``, or with ``--workflow`` the route scoped to that workflow; ``RUN``
    may be ``key:<KEY>`` (``_resolved``)."""
    run_id = _resolved(args, run_id)
    quoted = urllib.parse.quote(run_id, safe="")
    workflow = getattr(args, "workflow", None)
    if workflow:
        return f"/workflows/{urllib.parse.quote(workflow, safe='')}/runs/{quoted}"
    return f"/runs/{quoted}"


def cmd_show(args: argparse.Namespace) -> int:
    if args.key is not None:
        args.run_id = f"key:{args.key}"
    if args.run_id is None:
        fail("show which run? give RUN_ID, or --key KEY with --workflow")
    run = call(args, "GET", _run_path(args, args.run_id))
    if args.json:
        print(json.dumps(run, indent=2))
        return 0
    print(render.render_run(run))
    print()
    steps = run.get("steps", [])
    if args.timeline:
        print(render.timeline(run, steps, scale=time_scale(args)))
    else:
        print(render.render_steps(steps))
    audit = render.render_audit(run)
    if audit:
        print(f"\nwho acted on this run:\n{audit}")
    return 0


def cmd_heartbeat(args: argparse.Namespace) -> int:
    """A callback's heartbeat, as the worker doing the job sends it (the token is its
    authority): the wait's expiry moves on by its heartbeat_timeout."""
    raw = str(args.token).rsplit("/callbacks/", 1)[-1].split("/", 1)[0]  # a URL, or the token
    token = urllib.parse.quote(raw, safe="")
    taken = call(args, "POST", f"/callbacks/{token}/heartbeat", {})
    print(f"heartbeat taken: run {taken['run_id']} now waits until {taken['expires_at']}")
    return 0


def cmd_answer(args: argparse.Namespace, approve: bool) -> int:
    result = (parse_json(args.result, "result") if args.result else True) if approve else None
    error = None if approve else {"type": "Rejected", "message": args.reason or "rejected"}
    body: Any
    if args.name is None:  # a callback token, as the outside party holds it
        token = urllib.parse.quote(args.run, safe="")
        path, body = (
            (f"/callbacks/{token}", result) if approve else (f"/callbacks/{token}/fail", error)
        )
    else:  # an operator: the run and the wait's name, authorized by IAM
        name = urllib.parse.quote(args.name, safe="")
        path, body = (
            f"{_run_path(args, args.run)}/waits/{name}",
            ({"result": result} if approve else {"error": error}),
        )
        if args.position:  # one of several callbacks of that name (map branches)
            body["position"] = args.position
    answer = call(args, "POST", path, body)
    print(f"{'approved' if approve else 'rejected'}: run {answer['run_id']} will resume")
    return 0


def cmd_signal(args: argparse.Namespace) -> int:
    payload = parse_json(args.payload, "payload") if args.payload else None
    # Sent whenever given, even empty (unlike `start`, which drops an empty one): an empty
    # $KEY then gets the API's 422 instead of quietly becoming an unkeyed, at-least-once send.
    headers = {"Idempotency-Key": args.key} if args.key is not None else None
    name = urllib.parse.quote(args.name, safe="")
    path = f"{_run_path(args, args.run_id)}/signals/{name}"
    sent = call(args, "POST", path, payload, headers)
    if sent.get("duplicate"):
        print(
            f"signal {args.name!r} was already sent to run {args.run_id} with this key "
            f"(signal {sent['signal_id']}); nothing new stored"
        )
    else:
        print(f"signal {args.name!r} sent to run {args.run_id} (signal {sent['signal_id']})")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    run = call(
        args,
        "POST",
        f"{_run_path(args, args.run_id)}/cancel",
        {"reason": args.reason, "compensate": args.compensate},
    )
    print(
        f"run {args.run_id}: {run['status']}"
        + (" (cancel requested; it stops at its next check)" if run["status"] != "CANCELED" else "")
    )
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    run = call(
        args, "POST", f"{_run_path(args, args.run_id)}/retry", {"upgrade_to": args.upgrade_to}
    )
    print(f"run {run['run_id']} retried: {run['status']} on version {run['version']}")
    if run.get("parent"):
        print(_parent_view(args, run))
    return 0


def _parent_view(args: argparse.Namespace, run: dict[str, Any]) -> str:
    """What a retried child's parent saw of it, and how to have the parent take the new
    outcome. A child's end is written into its parent's record at the child's position
    in the same write, and that record is final: the child's retry leaves it as it was.
    A retry of the parent reopens it (when the parent failed there) and takes the child's
    outcome as it is then, without running the child again; a parent that caught the
    failure and went on needs a fork from that step."""
    from durable.engine.children import parse_link

    parent_id, position = parse_link(str(run["parent"]))
    step = position.split(".", 1)[0].lstrip("0") or "1"
    fork = f"`durable fork {parent_id} --from-step {step}`"
    if run.get("idempotency_key"):
        refork = (
            f"{fork} runs the parent again from that step, and its keyed call takes this "
            'run\'s outcome once it has ended (a call with reuse="after_end" starts a new run)'
        )
    else:
        refork = (
            f"{fork} runs the parent again from that step, starting a new child there "
            "(this run is not keyed, so the fork cannot take it)"
        )
    try:
        parent = call(args, "GET", f"/runs/{urllib.parse.quote(parent_id, safe='')}")
    except CliError:  # a caller allowed this workflow only: say what holds whatever it is
        return (
            f"this run is a child of run {parent_id}, which recorded its failure at "
            f"position {position}; that record is final: `durable retry {parent_id}` (if "
            f"it failed there) takes this run's new outcome without running it again; "
            f"otherwise {refork}"
        )
    steps: list[dict[str, Any]] = parent.get("steps") or []
    record = next((s for s in steps if s.get("position") == position), {})
    status, error = parent.get("status"), parent.get("error") or {}
    terminal = status in ("SUCCEEDED", "FAILED", "CANCELED")
    seen = record.get("status")
    if seen == "WAITING" and not terminal:
        return (
            f"its parent run {parent_id} waits for it at position {position}: it takes "
            "this run's outcome when it ends"
        )
    if seen == "WAITING":  # the parent ended first: no report was taken
        said = f"its parent run {parent_id} ended ({status}) before this run did"
    elif seen == "TERMINAL_FAILED":
        said = (
            f"its parent run {parent_id} recorded this run's failure at position {position}, "
            "and that record is final"
        )
    else:
        return (
            f"its parent run {parent_id} ({status}) recorded no failure of it at position "
            f"{position}: nothing to change there"
        )
    if status == "FAILED" and (seen == "WAITING" or error.get("position") == position):
        there = "failed there" if seen == "TERMINAL_FAILED" else "failed"
        return (
            f"{said}: the parent {there}, so `durable retry {parent_id}` takes this run's "
            f"outcome at {position} (waiting for it to end, without running it again)"
        )
    if terminal:
        return f"{said}: the parent went on without this run's outcome and is {status}; {refork}"
    return (
        f"{said}: the parent ({status}) goes on with the failure; once it has ended, retry "
        f"it if it failed at {position}, else {refork}"
    )


def cmd_fork(args: argparse.Namespace) -> int:
    source = _resolved(args, args.run_id)
    path = _run_path(args, source)
    run = call(args, "POST", f"{path}/fork", {"from_step": args.from_step})
    print(f"forked run {run['run_id']} from {source} at step {args.from_step}")
    return 0


def cmd_console(args: argparse.Namespace) -> int:
    """The web console: durable dev's own, or a signing proxy to a deployed API."""
    base = args.endpoint or os.environ.get("DURABLE_ENDPOINT")
    if not base:
        dev = dev_info()
        if dev is None:
            fail(
                "no durable dev is running here and no --endpoint was given: start the local "
                "stack with `durable dev`, or pass --endpoint https://<id>.execute-api."
                "<region>.amazonaws.com/<stage> for a deployed one"
            )
        url = str(dev["endpoint"]) + "/console/"
        print(f"durable dev serves the console at {url}")
        _open(url, args.open)
        return 0
    from durable.console.proxy import ConsoleProxy

    proxy = ConsoleProxy(base, port=args.port, sign=not args.no_sign, region=args.region)
    try:
        proxy.start()
    except OSError as e:
        fail(f"cannot listen on 127.0.0.1:{args.port} ({e.strerror}); pass --port with a free one")
    signing = "each call signed with your AWS credentials" if proxy.sign else "unsigned"
    print(f"console for {proxy.endpoint} at {proxy.url}  ({signing}); Ctrl-C stops it")
    _open(proxy.url, args.open)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
    return 0


def _open(url: str, wanted: bool) -> None:
    if wanted:
        import webbrowser

        webbrowser.open(url)


# --- a recorded run, replayed on this machine (durable.engine.replay_file) ------------


def cmd_export(args: argparse.Namespace) -> int:
    """A run's records as one JSON document (``durable.engine.replay_file``), read from
    the ledger as ``check-deploy`` reads it: the running ``durable dev`` of this folder,
    or a deployed stack's table (``--table``) with your AWS credentials. Secrets stay
    masked, large values are fetched from the payload store when it can be read."""
    from durable.engine.deploy_check import ReadOnlyLedger
    from durable.engine.registry import App
    from durable.engine.replay_file import ReplayFileError, dumps, export_run

    # Only the ledger and the payload store are used: no workflow code is needed, and no
    # key service (sealed values are written masked, never opened).
    engine = _check_engine(args, App(), ReadOnlyLedger)
    try:
        document = export_run(engine.claims, args.run_id, chain=args.chain)
    except ReplayFileError as e:
        fail(f"{e}: give a run id as `durable runs` lists it (and --table for a deployed stack)")
    text = dumps(document)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        runs = len(document["runs"])
        print(f"wrote run {args.run_id} ({runs} run{'s' if runs > 1 else ''}) to {args.output}")
    else:
        sys.stdout.write(text)
    for missing in document.get("unresolved", []):
        print(
            f"warning: a value kept in the payload store was not fetched ({missing}); pass "
            "--payload-bucket, or the replay stops where it is needed",
            file=sys.stderr,
        )
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """The current code over a recorded run: exit 0 when it replays cleanly, 1 when it
    diverges or cannot get through (the first problem named, as check-deploy names it)."""
    from durable.adapters.memory import MemoryLedger
    from durable.engine.replay_file import ReplayFileError, replay

    sys.path.insert(0, os.getcwd())
    app_reference = args.app or project_app(Path.cwd())
    if not app_reference:
        fail("which code? pass --app module:attribute (or set app under [tool.durable])")
    app = _load_app(app_reference)
    try:
        result = replay(app, args.file, empty=MemoryLedger())
    except ReplayFileError as e:
        fail(str(e))
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(result.summary())
        if result.error is not None and args.traceback:
            import traceback

            traceback.print_exception(result.error, file=sys.stderr)
    return 0 if result.ok else 1


def _add_replay_commands(sub: Any) -> None:
    export = sub.add_parser(
        "export",
        help="a run's history as one JSON file, to replay on this machine (`durable replay`, "
        "LocalRunner.replay) or keep as a regression test; secrets stay masked",
    )
    export.add_argument("run_id", metavar="RUN_ID")
    export.add_argument("-o", "--output", help="write to this file (default: standard output)")
    export.add_argument(
        "--chain",
        action="store_true",
        help="a run that continued as new: also the runs after it, to the chain's end",
    )
    export.add_argument("--table", help="the ledger table (default: the running durable dev's)")
    export.add_argument("--dynamodb-endpoint", help="a DynamoDB endpoint other than AWS's")
    export.add_argument(
        "--payload-bucket",
        default=os.environ.get("DURABLE_PAYLOAD_BUCKET"),
        help="where the stack keeps large values (its PayloadBucketName output; default "
        "$DURABLE_PAYLOAD_BUCKET); durable dev's folder for the local stack",
    )
    export.set_defaults(func=cmd_export)

    replay = sub.add_parser(
        "replay",
        help="replay a run `durable export` wrote on the current code (no step runs, "
        "nothing is written); exit 1 at the first divergence, named as check-deploy names it",
    )
    replay.add_argument("file", help="the file durable export wrote")
    replay.add_argument(
        "--app",
        help="module:attribute of your durable.App (default: [tool.durable] app in pyproject.toml)",
    )
    replay.add_argument("--json", action="store_true", help="the result as JSON, for CI")
    replay.add_argument(
        "--traceback",
        action="store_true",
        help="print the traceback of an error the code raised while replaying",
    )
    replay.set_defaults(func=cmd_replay)


# --- parser ---------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="durable", description="Durable workflows on Lambda")
    root.add_argument("--endpoint", help="API base URL (default: the running durable dev)")
    root.add_argument("--no-sign", action="store_true", help="do not SigV4-sign AWS requests")
    sub = root.add_subparsers(dest="command", required=True)

    init = sub.add_parser("init", help="create a project of your own: workflows, stack, tests")
    init.add_argument("dir", help="the new project's folder (missing or empty)")
    init.add_argument("--name", help="project name (default: the folder's name)")
    init.add_argument(
        "--requirement",
        help="how the project depends on this library (default: durable-lambda==this "
        "version, with the wheel this copy was installed from copied into the project's "
        "wheels/ folder); a local wheel, 'durable-lambda @ file:///path/"
        "durable_lambda-0.1.0-py3-none-any.whl', is copied there and pinned the same way",
    )
    init.set_defaults(func=cmd_init)

    sam = sub.add_parser(
        "sam",
        help="the AWS SAM CLI (installed on first use; build finds python3.12): "
        "durable sam build, durable sam validate --lint, durable sam cfn-lint; build, "
        "validate, sync and cfn-lint take template.yaml merged with your stack.yaml, and "
        "deploy refuses a build older than them",
    )
    sam.add_argument("sam_args", nargs=argparse.REMAINDER, help="what to pass to sam")
    sam.set_defaults(func=cmd_sam)

    dev = sub.add_parser("dev", help="run the whole stack locally")
    dev.add_argument(
        "--app",
        help="module:attribute of your durable.App (default: [tool.durable] app in pyproject.toml)",
    )
    dev.add_argument(
        "--worker-app",
        metavar="MODULE:ATTR",
        help="run the workers on another app than the API (rehearse a deploy caught halfway: "
        "the API refuses to start versions the workers do not serve)",
    )
    dev.add_argument(
        "--verbose",
        action="store_true",
        help="the handlers' JSON logs and metrics instead of one line per run event",
    )
    dev.add_argument("--port", type=int, default=8787)
    dev.add_argument("--workers", type=int, default=2, help="worker processes")
    dev.add_argument(
        "--worker-timeout",
        type=float,
        default=60.0,
        help="seconds, like Lambda's; a killed worker's run resumes about this long after "
        "its invocation started (default 60: fits the default 30 s step budget)",
    )
    dev.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="virtual seconds per real second (86400: a day per second)",
    )
    dev.add_argument("--storage", choices=["auto", "dynamodb-local", "moto"], default="auto")
    dev.add_argument(
        "--dynamodb-port",
        type=int,
        default=0,
        help="DynamoDB Local's port on 127.0.0.1 (default: a free one, shown in the banner); "
        "a fixed one keeps a GUI or script pointed at it across restarts",
    )
    dev.add_argument(
        "--scheduler-port",
        type=int,
        default=0,
        help="the embedded moto server's port on 127.0.0.1: EventBridge Scheduler, Secrets "
        "Manager and SSM (and DynamoDB with --storage moto); default 0, a free one (shown "
        "in the banner). A fixed one suits a firewall or several stacks side by side",
    )
    dev.set_defaults(func=cmd_dev)

    console = sub.add_parser(
        "console",
        help="the web console: runs, timelines and approvals in the browser (durable dev's, "
        "or with --endpoint a deployed stack's, through a local proxy that signs each call)",
    )
    console.add_argument("--port", type=int, default=8788, help="the proxy's port (127.0.0.1)")
    console.add_argument("--open", action="store_true", help="open it in the default browser")
    console.add_argument(
        "--region", help="sign for this region (an API behind a custom domain name)"
    )
    console.set_defaults(func=cmd_console)

    cost = sub.add_parser(
        "cost",
        help="what runs cost: DynamoDB units, invocations, Lambda time, timers and dollars at "
        "list prices, by workflow and status",
    )
    cost.add_argument("--workflow", help="one workflow (default: every one)")
    cost.add_argument(
        "--since", default="7d", help="runs started since: 7d, 24h, 30m or an ISO date"
    )
    cost.set_defaults(func=cmd_cost)

    sched = sub.add_parser(
        "schedules",
        help="the app's schedules (cron and rate starts) and their last fires: list; "
        "NAME (its recent fires and their verdicts); pause|resume|run NAME",
    )
    sched.add_argument(
        "action",
        nargs="?",
        default="list",
        help="list (the default), show, pause, resume, run; or a schedule's name (show it)",
    )
    sched.add_argument("name", nargs="?", help="the schedule (show, pause, resume, run)")
    sched.add_argument("--key", help="run: an idempotency key (a retry starts nothing new)")
    sched.set_defaults(func=cmd_schedules)

    start = sub.add_parser("start", help="start a run")
    start.add_argument("workflow")
    start.add_argument("--input", help="the input as JSON")
    start.add_argument("--idempotency-key")
    start.add_argument(
        "--if-running",
        choices=("fail", "attach"),
        default="fail",
        help="a run holding the key is still going: fail (409 for another input, the "
        "default) or attach (that run is the answer)",
    )
    start.add_argument(
        "--reuse",
        choices=("never", "after_end"),
        default="never",
        help="the key's run has ended: never (the key names that run for its retention, "
        "the default) or after_end (start a new run under the key, as a recurring job "
        "does; show/signal key:KEY then name the newest)",
    )
    start.add_argument("-q", "--quiet", action="store_true", help="print only the run id")
    start.set_defaults(func=cmd_start)

    runs = sub.add_parser("runs", help="list runs")
    runs.add_argument("--workflow")
    runs.add_argument("--status")
    runs.add_argument(
        "--attention",
        action="store_true",
        help="only runs a person should look at: failed, parked by the engine, or waiting "
        "on a person's answer (a callback)",
    )
    runs.add_argument("--limit", type=int, default=50)
    runs.add_argument("--cursor", help="continue a listing of one workflow")
    runs.add_argument(
        "--json", action="store_true", help="the runs as the API gives them (JSON), for scripts"
    )
    runs.add_argument(
        "--wide", action="store_true", help="every column whole (keys, waits, errors uncut)"
    )
    runs.set_defaults(func=cmd_runs)

    show = sub.add_parser("show", help="a run and its ledger")
    show.add_argument("run_id", nargs="?", help=RUN_HELP)
    show.add_argument("--key", help="the run of --workflow started under this idempotency key")
    show.add_argument(
        "--workflow",
        help=SCOPED_HELP,
    )
    show.add_argument("--timeline", action="store_true")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_show)

    heartbeat = sub.add_parser(
        "heartbeat",
        help="say a callback's job is alive (a callback with a heartbeat_timeout): TOKEN",
    )
    heartbeat.add_argument("token", metavar="TOKEN", help="the callback's token (or its URL's end)")
    heartbeat.set_defaults(func=cmd_heartbeat)

    approve = sub.add_parser(
        "approve", help="answer a run's pending callback: RUN_ID WAIT_NAME (or a TOKEN)"
    )
    approve.add_argument("run", metavar="RUN_ID", help="the run (or a callback token alone)")
    approve.add_argument("name", metavar="WAIT_NAME", nargs="?", help="the callback's name")
    approve.add_argument("--result", help="JSON result (default: true)")
    approve.add_argument(
        "--workflow",
        help=SCOPED_HELP,
    )
    approve.add_argument(
        "--position",
        help="which callback of that name, when several wait (map branches): its position, "
        "as `durable show RUN_ID` lists it",
    )
    approve.set_defaults(func=lambda a: cmd_answer(a, True))

    reject = sub.add_parser(
        "reject", help="answer a run's pending callback with a failure: RUN_ID WAIT_NAME"
    )
    reject.add_argument("run", metavar="RUN_ID", help="the run (or a callback token alone)")
    reject.add_argument("name", metavar="WAIT_NAME", nargs="?", help="the callback's name")
    reject.add_argument(
        "--workflow",
        help=SCOPED_HELP,
    )
    reject.add_argument(
        "--position",
        help="which callback of that name, when several wait (map branches): its position, "
        "as `durable show RUN_ID` lists it",
    )
    reject.add_argument("--reason")
    reject.set_defaults(func=lambda a: cmd_answer(a, False))

    signal_ = sub.add_parser("signal", help="send a signal to a run")
    signal_.add_argument("run_id", help=RUN_HELP)
    signal_.add_argument("--workflow", help=SCOPED_HELP)
    signal_.add_argument("name")
    signal_.add_argument("--payload", help="JSON payload")
    signal_.add_argument(
        "--key",
        "--idempotency-key",
        dest="key",
        help="idempotency key: resending with it stores the signal once",
    )
    signal_.set_defaults(func=cmd_signal)

    cancel = sub.add_parser("cancel", help="cancel a run")
    cancel.add_argument("run_id", help=RUN_HELP)
    cancel.add_argument("--workflow", help=SCOPED_HELP)
    cancel.add_argument("--reason", required=True)
    cancel.add_argument("--compensate", action="store_true")
    cancel.set_defaults(func=cmd_cancel)

    retry = sub.add_parser("retry", help="re-run a failed run from its failed step")
    retry.add_argument("run_id", help=RUN_HELP)
    retry.add_argument("--workflow", help=SCOPED_HELP)
    retry.add_argument("--upgrade-to", type=int)
    retry.set_defaults(func=cmd_retry)

    check = sub.add_parser(
        "check-deploy",
        help="before a deploy: replay every unfinished run against the new code (no body "
        "runs, nothing is written); exit 1 if any would break",
    )
    check.add_argument("--app", required=True, help="module:attribute of the NEW durable.App")
    check.add_argument(
        "--workflow",
        action="append",
        help="also check runs of this workflow (one the new code no longer defines); repeatable",
    )
    check.add_argument("--table", help="the ledger table (default: the running durable dev's)")
    check.add_argument("--dynamodb-endpoint", help="a DynamoDB endpoint other than AWS's")
    check.add_argument(
        "--payload-bucket",
        default=os.environ.get("DURABLE_PAYLOAD_BUCKET"),
        help="where the stack keeps large values (its PayloadBucketName output; default "
        "$DURABLE_PAYLOAD_BUCKET); durable dev's folder when checking the local stack",
    )
    check.add_argument("--json", action="store_true", help="the report as JSON, for CI")
    check.set_defaults(func=cmd_check_deploy)

    fork = sub.add_parser("fork", help="new run re-executing from a step")
    fork.add_argument("run_id", help=RUN_HELP)
    fork.add_argument("--workflow", help=SCOPED_HELP)
    fork.add_argument("--from-step", required=True)
    fork.set_defaults(func=cmd_fork)
    _add_replay_commands(sub)  # durable export / durable replay
    return root


def _parse(argv: list[str] | None) -> argparse.Namespace:
    root = parser()
    args, extra = root.parse_known_args(argv)
    if extra:
        if getattr(args, "func", None) is not cmd_sam:
            root.error(f"unrecognized arguments: {' '.join(extra)}")
        # argparse's REMAINDER starts at the first plain word: the options before it
        # (`durable sam --version`, `durable sam --debug build`) come back as unknown,
        # and they are sam's, ahead of the rest.
        args.sam_args = [*extra, *args.sam_args]
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parse(argv)
        try:
            result: int = args.func(args)
            sys.stdout.flush()  # find a closed pipe here rather than at the exit
            return result
        except CliError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    except BrokenPipeError:
        # The reader left (`durable show RUN | head`): stop quietly, as a process ended by
        # SIGPIPE would. Python flushes stdout once more at exit: send that to /dev/null.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass  # stdout is not a file (embedded use): nothing is flushed to a pipe
        return 141  # 128 + SIGPIPE: what a shell reports for a process the signal ended


if __name__ == "__main__":
    sys.exit(main())
