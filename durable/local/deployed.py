"""A deployed stack on this machine: what ``sam build`` made, run as Lambda would run it.

``build_for_host`` runs ``sam build`` of a stack's template, as a user's ``make build`` or
``durable sam build`` does, for this machine's CPU (the template says arm64; the wheels of
an arm64 build cannot run on an x86_64 host, and that is the only difference). Then
``DeployedStack`` serves the built functions:

* each function runs in a ``Sandbox`` (``durable.local.lambda_sandbox``): a bare
  ``python3.12`` that sees its build folder and the standard library, nothing else;
* with the environment the built template gives it (``Globals`` and its own variables,
  intrinsic functions resolved to this machine's resources), plus what the Lambda service
  sets (region, function name, credentials) and endpoints: DynamoDB Local for the tables,
  moto's server for Scheduler, Secrets Manager and KMS, and a small Lambda Invoke endpoint
  here for the worker's hand-offs and the API's questions to the worker;
* the template's tables, schedule group, secrets and KMS key are created on those servers
  from the built template itself.

The one setting a deployed stack does not have is the clock: every function reads a
clock file (``DURABLE_CLOCK_FILE``, as under ``durable dev``) so a test can let three
days pass (``advance``); a jump restarts the containers, as a real wait would find them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import re
import secrets
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import boto3

from durable.adapters.schema import create_tables, load_template
from durable.local.apigw import from_proxy_result, to_rest_event
from durable.local.clock import Epoch
from durable.local.lambda_sandbox import FunctionError, Sandbox

ACCOUNT = "123456789012"
REGION = "us-east-1"
PARTITION = "aws"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "deployed",
    "AWS_SECRET_ACCESS_KEY": "deployed",
    "AWS_SESSION_TOKEN": "deployed",
}


def local_client(service: str, endpoint: str) -> Any:
    """A client of a local server (DynamoDB Local, moto) with the stack's own credentials,
    the ones its functions get: never the machine's (a laptop may have none, and
    `make smoke` must not need any), and the same key as the functions, which DynamoDB
    Local keeps tables apart by unless it shares one database."""
    make: Any = boto3.client  # typed per service name; this one takes any
    return make(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=CREDENTIALS["AWS_SESSION_TOKEN"],
    )


# The template's own time, for the scheduled events: one minute is what EventBridge sends.
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}

__all__ = ["DeployedStack", "FunctionError", "build_for_host", "host_architecture"]


def host_architecture() -> str:
    """This machine's CPU as Lambda names it."""
    machine = platform.machine().lower()
    return {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}[machine]


def build_for_host(template: Path, out: Path, sam: list[str], *, env: Mapping[str, str]) -> Path:
    """``sam build`` of ``template`` for this machine's CPU into ``out/build``.

    A copy of the template is built, its ``Architectures`` set to this machine's and its
    relative ``CodeUri`` made absolute (the copy lives in ``out``), and the Makefile told
    the same CPU (``DURABLE_ARCHITECTURE``); nothing else changes.
    Returns the build folder (one folder per function, and the built template)."""
    text = template.read_text()
    text = re.sub(r"Architectures:\s*\[[^\]]*\]", f"Architectures: [{host_architecture()}]", text)

    def absolute(match: re.Match[str]) -> str:
        uri = match.group(2)
        if "://" in uri:
            return match.group(0)
        return f"{match.group(1)}{(template.parent / uri).resolve()}/"

    text = re.sub(r"^(\s*CodeUri:\s*)([^\s#]+)", absolute, text, flags=re.MULTILINE)
    out.mkdir(parents=True, exist_ok=True)
    copy = out / "template.yaml"
    copy.write_text(text)
    build = out / "build"
    done = subprocess.run(
        [*sam, "build", "--template-file", str(copy), "--build-dir", str(build)],
        cwd=out,
        # deploy/lambda/Makefile picks the wheels by this, as the template copy says.
        env={
            **env,
            "SAM_CLI_TELEMETRY": "0",
            "AWS_DEFAULT_REGION": REGION,
            "DURABLE_ARCHITECTURE": host_architecture(),
        },
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"sam build failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return build


class Intrinsics:
    """CloudFormation's intrinsic functions, resolved to this machine's values.

    ``refs`` names what ``Ref`` and ``GetAtt`` of a resource give (``"LedgerTable"``,
    ``"SecretsKey.Arn"``), made on first use by ``make(logical, attribute)``. A name
    neither knows is an error naming it: a template that grew a resource the functions
    read must grow a local stand-in here too."""

    def __init__(
        self,
        template: Mapping[str, Any],
        parameters: Mapping[str, str],
        make: Callable[[str, str | None], str],
    ) -> None:
        self.template = template
        declared = template.get("Parameters", {})
        self.parameters = {
            name: str(spec.get("Default", "")) for name, spec in declared.items()
        } | dict(parameters)
        self.pseudo = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": PARTITION,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": f"durable-{self.parameters.get('Stage', 'local')}",
        }
        self._make = make
        self._made: dict[str, str] = {}

    def resource(self, logical: str, attribute: str | None = None) -> str:
        key = f"{logical}.{attribute}" if attribute else logical
        if key not in self._made:
            self._made[key] = self._make(logical, attribute)
        return self._made[key]

    def ref(self, name: str) -> Any:
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.parameters:
            kind = self.template.get("Parameters", {}).get(name, {}).get("Type", "String")
            value = self.parameters[name]
            return value.split(",") if kind == "CommaDelimitedList" else value
        if "." in name:  # SAM's !Ref Function.Version
            logical, attribute = name.split(".", 1)
            return self.resource(logical, attribute)
        return self.resource(name)

    def condition(self, name: str) -> bool:
        return bool(self.value(self.template["Conditions"][name]))

    def value(self, node: Any) -> Any:
        """``node`` with every intrinsic function evaluated."""
        if isinstance(node, list):
            return [self.value(item) for item in node]
        if not isinstance(node, dict):
            return node
        if len(node) != 1:
            return {key: self.value(item) for key, item in node.items()}
        ((kind, arg),) = node.items()
        kind = kind.removeprefix("Fn::")
        if kind == "Ref":
            return self.ref(arg)
        if kind == "GetAtt":
            logical, attribute = arg.split(".", 1) if isinstance(arg, str) else arg
            return self.resource(logical, attribute)
        if kind == "Sub":
            return self._sub(arg)
        if kind == "Join":
            separator, items = arg
            return str(separator).join(str(v) for v in self.value(items))
        if kind == "If":
            name, yes, no = arg
            return self.value(yes if self.condition(name) else no)
        if kind == "Equals":
            left, right = (self.value(v) for v in arg)
            return left == right
        if kind == "Not":
            return not self.value(arg[0])
        if kind == "And":
            return all(self.value(v) for v in arg)
        if kind == "Or":
            return any(self.value(v) for v in arg)
        if kind == "Condition":
            return self.condition(arg)
        return {key: self.value(item) for key, item in node.items()}

    def _sub(self, arg: Any) -> str:
        text, names = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in names:
                return str(self.value(names[name]))
            if "." in name and name.split(".", 1)[0] in self.template["Resources"]:
                logical, attribute = name.split(".", 1)
                return self.resource(logical, attribute)
            return str(self.ref(name))

        return re.sub(r"\$\{([^}!]+)\}", one, str(text))


class FakeLambda:
    """Lambda's Invoke API on 127.0.0.1 for the functions' own calls: every invocation is
    of the worker (its hand-offs, the sweeper's and the API's wake-ups, the API's and the
    deploy hook's questions to it). Asynchronous ones queue until ``take``; a synchronous
    one is answered by ``answer(event)``, as Lambda answers (a function error in the
    header). It also takes CodeDeploy's one call the deploy hook makes, the hook's verdict
    (``verdicts``), which no local server implements."""

    def __init__(self, answer: Callable[[Any], Any]) -> None:
        self.queued: list[dict[str, Any]] = []
        self.calls: list[str] = []  # the function names invoked, as the callers named them
        self.verdicts: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                event = json.loads(self.rfile.read(length) or b"{}")
                target = self.headers.get("X-Amz-Target") or ""
                if target.endswith(".PutLifecycleEventHookExecutionStatus"):
                    with fake._lock:
                        fake.verdicts.append(event)
                    hook = {
                        "lifecycleEventHookExecutionId": event.get("lifecycleEventHookExecutionId")
                    }
                    return self._reply(200, {}, hook)
                found = re.match(r"^/2015-03-31/functions/([^/]+)/invocations", self.path)
                if not found:
                    return self._reply(404, {}, {"message": f"no route {self.path}"})
                with fake._lock:
                    fake.calls.append(unquote(found.group(1)))
                kind = self.headers.get("X-Amz-Invocation-Type") or "RequestResponse"
                if kind == "Event":
                    with fake._lock:
                        fake.queued.append(event)
                    return self._reply(202, {}, None)
                try:
                    return self._reply(200, {}, answer(event))
                except FunctionError as error:
                    said = {"errorType": error.error_type, "errorMessage": error.error_message}
                    return self._reply(200, {"X-Amz-Function-Error": "Unhandled"}, said)

            def _reply(self, status: int, headers: dict[str, str], data: Any) -> None:
                body = b"" if data is None else json.dumps(data).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def take(self) -> list[dict[str, Any]]:
        with self._lock:
            taken, self.queued = self.queued, []
        return taken

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class DeployedStack:
    """The built functions of one stack, on DynamoDB Local and moto's server."""

    def __init__(
        self,
        build: Path,
        *,
        dynamodb: str,
        moto: str,
        python: str,
        work: Path,
        parameters: Mapping[str, str] | None = None,
        overlay: Path | None = None,
    ) -> None:
        """``build``: a ``sam build`` folder; ``overlay``: a folder put before each
        function's own on its path (another boto3, say); ``work``: logs and the clock."""
        self.build = build
        self.python = python
        self.work = work
        self.overlay = overlay
        self.dynamodb_endpoint = dynamodb
        self.moto_endpoint = moto
        self.template = load_template(build / "template.yaml")
        self.stage = "d" + secrets.token_hex(4)  # every stack gets its own tables and names
        self.resources: dict[str, Any] = self.template["Resources"]
        self.intrinsics = Intrinsics(
            self.template, {"Stage": self.stage, **(parameters or {})}, self._local_resource
        )
        self.dynamodb = local_client("dynamodb", dynamodb)
        self._moto: dict[str, Any] = {
            service: local_client(service, moto)
            for service in ("scheduler", "secretsmanager", "kms", "s3")
        }
        self.clock_file = work / "clock.json"
        self._set_clock(0.0)
        self.offset = 0.0
        self.sandboxes: dict[str, Sandbox] = {}
        self._locks: dict[str, threading.Lock] = {}
        self.cold_starts: dict[str, list[Sandbox]] = {}
        self.lambda_api = FakeLambda(lambda event: self.invoke("WorkerFunction", event))
        self._create_tables()

    # --- the resources, made on this machine's servers --------------------------------

    def _properties(self, logical: str) -> dict[str, Any]:
        resource = self.resources.get(logical)
        if resource is None:
            raise KeyError(f"the template has no resource {logical!r}")
        properties: dict[str, Any] = resource.get("Properties", {})
        return properties

    def _local_resource(self, logical: str, attribute: str | None) -> str:
        kind = self.resources.get(logical, {}).get("Type")
        value = self.intrinsics.value
        if kind == "AWS::DynamoDB::Table" and attribute is None:
            return str(value(self._properties(logical)["TableName"]))
        if kind == "AWS::Scheduler::ScheduleGroup" and attribute is None:
            name = str(value(self._properties(logical)["Name"]))
            with contextlib.suppress(self._moto["scheduler"].exceptions.ConflictException):
                self._moto["scheduler"].create_schedule_group(Name=name)
            return name
        if kind == "AWS::SecretsManager::Secret" and attribute is None:
            name = str(value(self._properties(logical)["Name"]))
            made = self._moto["secretsmanager"].create_secret(
                Name=name, SecretString=secrets.token_hex(32)
            )
            return str(made["ARN"])
        if kind == "AWS::KMS::Key":
            key = self._moto["kms"].create_key(Description=f"{logical} of {self.stage}")
            return str(key["KeyMetadata"]["Arn" if attribute == "Arn" else "KeyId"])
        if kind == "AWS::S3::Bucket" and attribute is None:
            name = f"{self.stage}-{logical}".lower()
            with contextlib.suppress(self._moto["s3"].exceptions.BucketAlreadyOwnedByYou):
                self._moto["s3"].create_bucket(Bucket=name)
            return name
        if kind == "AWS::IAM::Role" and attribute == "Arn":
            return f"arn:{PARTITION}:iam::{ACCOUNT}:role/{self.stage}-{logical}"
        if kind == "AWS::Serverless::Api" and attribute is None:
            return f"{self.stage}api"
        if kind == "AWS::Serverless::Function":
            name = str(value(self._properties(logical).get("FunctionName", logical)))
            arn = f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:{name}"
            return f"{arn}:1" if attribute == "Version" else arn
        raise KeyError(
            f"no local stand-in for {logical}{'.' + attribute if attribute else ''} "
            f"({kind}): teach durable/local/deployed.py to make one"
        )

    def table(self, logical: str) -> str:
        return self.intrinsics.resource(logical)

    def _create_tables(self) -> None:
        names = {
            logical: self.table(logical)
            for logical, resource in self.resources.items()
            if resource.get("Type") == "AWS::DynamoDB::Table"
        }
        create_tables(self.dynamodb, names, template=self.build / "template.yaml")

    # --- the functions -----------------------------------------------------------------

    def environment(self, function: str) -> dict[str, str]:
        """What ``function`` runs with: the template's variables, resolved, and what the
        Lambda service and this machine add."""
        globals_ = self.template.get("Globals", {}).get("Function", {})
        own = self._properties(function)
        variables = {
            **globals_.get("Environment", {}).get("Variables", {}),
            **own.get("Environment", {}).get("Variables", {}),
        }
        env = {name: str(self.intrinsics.value(v)) for name, v in variables.items()}
        name = str(self.intrinsics.value(own.get("FunctionName", function)))
        memory = self.intrinsics.value(own.get("MemorySize", globals_.get("MemorySize", 128)))
        return {
            **env,
            **CREDENTIALS,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_LAMBDA_FUNCTION_NAME": name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
            "LAMBDA_TASK_ROOT": str(self.build / function),
            "TZ": ":UTC",
            "LANG": "en_US.UTF-8",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb_endpoint,
            "AWS_ENDPOINT_URL_SCHEDULER": self.moto_endpoint,
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": self.moto_endpoint,
            "AWS_ENDPOINT_URL_KMS": self.moto_endpoint,
            "AWS_ENDPOINT_URL_S3": self.moto_endpoint,
            "AWS_ENDPOINT_URL_LAMBDA": self.lambda_api.endpoint,
            "AWS_ENDPOINT_URL_CODEDEPLOY": self.lambda_api.endpoint,
            "DURABLE_CLOCK_FILE": str(self.clock_file),
        }

    def sandbox(self, function: str) -> Sandbox:
        """``function``'s warm container, started (a cold start) when there is none."""
        if function not in self.sandboxes:
            own = self._properties(function)
            globals_ = self.template.get("Globals", {}).get("Function", {})

            def setting(name: str, default: Any) -> Any:
                return self.intrinsics.value(own.get(name, globals_.get(name, default)))

            code = [self.build / function]
            if self.overlay is not None:
                code.insert(0, self.overlay)
            made = Sandbox(
                function,
                code,
                str(setting("Handler", None)),
                self.environment(function),
                python=self.python,
                log=self.work / f"{function}.log",
                memory_mb=int(setting("MemorySize", 128)),
                timeout=float(setting("Timeout", 3)),
            )
            self.sandboxes[function] = made
            self.cold_starts.setdefault(function, []).append(made)
            self._locks.setdefault(function, threading.Lock())
        return self.sandboxes[function]

    def invoke(self, function: str, event: Any) -> Any:
        box = self.sandbox(function)
        with self._locks[function]:
            return box.invoke(event)

    def cold(self) -> None:
        """Every container stops: the next event of each function is a cold start."""
        for box in self.sandboxes.values():
            box.stop()
        self.sandboxes.clear()

    # --- what the outside world does -----------------------------------------------------

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """An HTTP request to the API, as API Gateway hands it to the function."""
        raw = b"" if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Host": "localapi"}
        result = self.invoke("ApiFunction", to_rest_event(method, path, headers, raw))
        status, _, data = from_proxy_result(result)
        return status, json.loads(data) if data else None

    def drain(self, limit: int = 100) -> list[Any]:
        """The worker runs what was handed to it (asynchronous invocations, in order),
        until nothing is left; its answers."""
        answers: list[Any] = []
        for _ in range(limit):
            taken = self.lambda_api.take()
            if not taken:
                return answers
            answers += [self.invoke("WorkerFunction", event) for event in taken]
        raise AssertionError(f"the worker was still being invoked after {limit} rounds")

    def sweep(self) -> Any:
        """The sweeper's scheduled invocation (EventBridge's event, as the rule sends it)."""
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": ACCOUNT,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.now())),
            "region": REGION,
            "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{self.stage}-sweep"],
            "detail": {},
        }
        return self.invoke("SweeperFunction", event)

    def now(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        """Lets ``seconds`` pass on every function's clock; containers start cold after."""
        self.offset += seconds
        self._set_clock(self.offset)
        self.cold()

    def _set_clock(self, offset: float) -> None:
        now = time.time()
        epoch = Epoch(scale=1.0, real_epoch=now, virtual_epoch=now + offset)
        self.clock_file.write_text(json.dumps(dataclasses.asdict(epoch)))

    def expire(self, run_id: str) -> Any:
        """What TTL does to a finished run past its retention, and what follows: the run
        item deleted, the stream's record of that delete handed to the purge function."""
        ledger = self.table("LedgerTable")
        keys = {"pk": {"S": f"RUN#{run_id}"}, "sk": {"S": "RUN"}}
        self.dynamodb.delete_item(TableName=ledger, Key=keys)
        record = self._removal(ledger, keys)
        return self.invoke("PurgeFunction", {"Records": [record]})

    def _removal(self, table: str, keys: dict[str, Any]) -> dict[str, Any]:
        streams = local_client("dynamodbstreams", self.dynamodb_endpoint)
        arn = self.dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            iterator = streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            for record in _records(streams, iterator):
                change = record["dynamodb"]
                if record["eventName"] == "REMOVE" and change["Keys"] == keys:
                    change["ApproximateCreationDateTime"] = change[
                        "ApproximateCreationDateTime"
                    ].timestamp()
                    # What Lambda adds to a stream record, and what TTL's deletes carry.
                    return {**record, "eventSourceARN": arn, "userIdentity": TTL_IDENTITY}
        raise AssertionError(f"the stream of {table} has no REMOVE of {keys}")

    def close(self) -> None:
        self.cold()
        self.lambda_api.close()
        for name in [n for n in self.dynamodb.list_tables()["TableNames"] if self.stage in n]:
            with contextlib.suppress(Exception):
                self.dynamodb.delete_table(TableName=name)


def _records(streams: Any, iterator: str | None) -> Iterator[dict[str, Any]]:
    while iterator:
        page = streams.get_records(ShardIterator=iterator)
        yield from page["Records"]
        if not page["Records"]:
            return
        iterator = page.get("NextShardIterator")


def runtime_python() -> str:
    """The functions' runtime interpreter (python3.12), found as ``durable sam`` finds it."""
    from durable.local.sam import find_runtime_python

    found = find_runtime_python()
    if found is None:
        raise RuntimeError("python3.12 (the functions' runtime) is not installed here")
    return str(found)


def sdk_overlay(folder: Path, version: str | None, python: str) -> Path:
    """``boto3`` and ``botocore`` at ``version`` (the newest when None) and what they
    need, installed into ``folder`` for the runtime's interpreter: put before a function's
    own folder, they replace the locked SDK. Returns ``folder``."""
    shutil.rmtree(folder, ignore_errors=True)
    spec = [f"boto3=={version}", f"botocore=={version}"] if version else ["boto3"]
    done = subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
            "--target",
            str(folder),
            *spec,
        ],
        capture_output=True,
        text=True,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(spec)} failed:\n{done.stdout}{done.stderr}")
    return folder
