"""``stack.yaml``: a project's own policies, environment variables and secrets.

A step that sends mail through SES, reads a partner's API key from Secrets Manager and
needs a setting of its own needs three things from the stack the library's
``template.yaml`` does not give it. Editing that 1000-line file works until the next
library upgrade replaces it; so a project lists its additions in ``stack.yaml`` beside it
(``durable init`` writes one, every line a commented example), and ``durable sam build``,
``validate`` and ``sync`` hand SAM the two merged (``.aws-sam/durable/template.yaml``).
``template.yaml`` stays the library's, and an upgrade may replace it; ``stack.yaml`` is
the project's, and nothing of the library ever writes it once ``durable init`` has.

What the file may say, per function (``worker`` runs the workflows' steps)::

    functions:
      worker:
        policies:       # IAM statements, SAM policy templates, managed policy names/ARNs
        environment:    # NAME: value (a string, or an intrinsic such as !Ref Stage)
        secrets:        # NAME: a Secrets Manager secret's name or ARN, or ssm:<parameter>
    parameters:  conditions:  resources:  outputs:   # added to the template's own

A secret is granted to exactly the functions that list it (``GetSecretValue`` on that
secret, ``GetParameter`` on that parameter) and its *name* is passed in the variable: the
value never enters the template. Everything is checked before anything is written; an
error names the field and the fix. The merge runs on the developer's machine (PyYAML, the
``local`` extra): the deployed functions never read YAML.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OVERLAY = "stack.yaml"
TEMPLATE = "template.yaml"
MERGED = Path(".aws-sam") / "durable" / "template.yaml"
METADATA_KEY = "DurableStackOverlay"  # in the merged template's Metadata: what it was made of
SECTIONS = ("parameters", "conditions", "resources", "outputs")
FUNCTION_FIELDS = ("policies", "environment", "secrets")

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_NAME = re.compile(r"^[A-Za-z0-9/_+=.@-]{1,512}$")
_SECRET_ARN = re.compile(
    r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$"
)
_SSM_NAME = re.compile(r"^/?[A-Za-z0-9_.\-/]{1,2048}$")
_SSM_ARN = re.compile(r"^arn:aws[a-z-]*:ssm:[a-z0-9-]+:\d{12}:parameter/[A-Za-z0-9_.\-/]+$")
_LOGICAL_ID = re.compile(r"^[A-Za-z0-9]{1,255}$")
# What Lambda keeps for itself, and the library's own settings (set through parameters).
_RESERVED_ENV = re.compile(r"^(AWS_|LAMBDA_|_HANDLER$|_X_AMZN_|TZ$|DURABLE_)")
# Values that are credentials, not names: known key prefixes, PEM blocks.
_CREDENTIAL = re.compile(
    r"^(sk|pk|rk)_(live|test)_|^AKIA[0-9A-Z]{12}|^ASIA[0-9A-Z]{12}|^gh[pousr]_|^xox[abprs]-|"
    r"^glpat-|-----BEGIN|^eyJ[A-Za-z0-9_-]{10,}\.|^SG\.[A-Za-z0-9_-]{10,}\."
)
_READ_ONLY = re.compile(r"^[a-z0-9-]+:(Get|List|Describe|BatchGet|Query|Scan|Head)[A-Za-z]*$")
# The one Transform the template uses: its functions are SAM ones.
_FUNCTION_TYPE = "AWS::Serverless::Function"


class OverlayError(ValueError):
    """``stack.yaml`` says something the stack cannot take; the message names the field."""

    def __init__(self, where: str, message: str, file: str = OVERLAY) -> None:
        super().__init__(f"{file}: {where}: {message}")
        self.where = where


@dataclass
class FunctionAdditions:
    """What one function gets: its policies (as SAM's ``Policies`` items), variables."""

    policies: list[Any] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, Secret] = field(default_factory=dict)


@dataclass(frozen=True)
class Secret:
    """A secret a function reads: where it is (``kind`` ``secretsmanager`` or ``ssm``) and
    what the variable holds (its name or ARN, never its value)."""

    kind: str
    reference: str

    @property
    def local_name(self) -> str:
        """The name ``durable dev`` creates it under in its local Secrets Manager or SSM."""
        if self.kind == "secretsmanager" and self.reference.startswith("arn:"):
            return self.reference.split(":secret:", 1)[1]
        if self.kind == "ssm" and self.reference.startswith("arn:"):
            name = self.reference.split(":parameter", 1)[1]
            return name if name.count("/") > 1 else name.lstrip("/")
        return self.reference

    def statement(self, sid: str) -> dict[str, Any]:
        if self.kind == "secretsmanager":
            if self.reference.startswith("arn:"):
                # A full ARN ends in -<6 characters>; a partial one (the name only) needs
                # them matched: both forms, and nothing that merely shares the prefix.
                resource: Any = [self.reference, f"{self.reference}-??????"]
            else:
                resource = {
                    "Fn::Sub": "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:"
                    f"${{AWS::AccountId}}:secret:{self.reference}-??????"
                }
            action: Any = "secretsmanager:GetSecretValue"
        else:
            if self.reference.startswith("arn:"):
                resource = self.reference
            else:
                resource = {
                    "Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:"
                    f"parameter/{self.reference.lstrip('/')}"
                }
            action = ["ssm:GetParameter", "ssm:GetParameters"]
        return {"Sid": sid, "Effect": "Allow", "Action": action, "Resource": resource}


@dataclass
class Overlay:
    """``stack.yaml``, checked against the template it is merged into."""

    functions: dict[str, FunctionAdditions] = field(default_factory=dict)  # by logical id
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)  # Parameters, ...
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = []
        for logical, adds in self.functions.items():
            counts = [
                f"{len(adds.policies)} polic{'y' if len(adds.policies) == 1 else 'ies'}",
                f"{len(adds.environment)} variable{'' if len(adds.environment) == 1 else 's'}",
                f"{len(adds.secrets)} secret{'' if len(adds.secrets) == 1 else 's'}",
            ]
            parts.append(f"{logical}: {', '.join(counts)}")
        for section, items in self.sections.items():
            if items:
                parts.append(f"{len(items)} {section.lower()}")
        return "; ".join(parts) or "nothing added yet"


# --- reading and writing CloudFormation YAML ---------------------------------------------


def _yaml() -> Any:
    try:
        import yaml
    except ImportError as e:  # `durable sam` alone runs on the standard library
        raise OverlayError(
            "(file)",
            "merging it needs PyYAML: pip install 'durable-lambda[local]' (a durable init "
            "project's dev extra has it)",
        ) from e
    return yaml


def load_cfn(text: str, source: str) -> Any:
    """A CloudFormation YAML document with its short tags (``!Ref``, ``!GetAtt A.B``) in
    their full form, as SAM reads them; dates stay strings (``Version: 2012-10-17``)."""
    yaml = _yaml()

    class Loader(yaml.SafeLoader):  # type: ignore[misc,name-defined]
        pass

    def intrinsic(loader: Any, suffix: str, node: Any) -> Any:
        name = suffix if suffix in ("Ref", "Condition") else f"Fn::{suffix}"
        if suffix == "GetAtt" and isinstance(node, yaml.ScalarNode):
            return {name: loader.construct_scalar(node).split(".", 1)}
        if isinstance(node, yaml.ScalarNode):
            return {name: loader.construct_scalar(node)}
        if isinstance(node, yaml.SequenceNode):
            return {name: loader.construct_sequence(node, deep=True)}
        return {name: loader.construct_mapping(node, deep=True)}

    Loader.add_multi_constructor("!", intrinsic)
    Loader.add_constructor(
        "tag:yaml.org,2002:timestamp", lambda loader, node: loader.construct_scalar(node)
    )
    try:
        return yaml.load(text, Loader=Loader)  # a SafeLoader subclass
    except yaml.YAMLError as e:
        raise OverlayError("(file)", f"not valid YAML: {e}", file=source) from e


def dump_cfn(data: Mapping[str, Any]) -> str:
    yaml = _yaml()

    class Dumper(yaml.SafeDumper):  # type: ignore[misc,name-defined]
        def ignore_aliases(self, data: Any) -> bool:
            return True

    def text(dumper: Any, value: str) -> Any:
        # An account id or other digits with a leading 0 must stay a string for every parser.
        style = "'" if value.startswith("0") else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    dumped: str = yaml.dump(
        dict(data), Dumper=Dumper, sort_keys=False, default_flow_style=False, width=4096
    )
    return dumped


# --- checking ----------------------------------------------------------------------------


def function_names(template: Mapping[str, Any]) -> dict[str, str]:
    """``worker`` -> ``WorkerFunction``: each SAM function by its short name (its logical
    id without ``Function``, in kebab case) and by its logical id."""
    names: dict[str, str] = {}
    for logical, resource in template.get("Resources", {}).items():
        if isinstance(resource, Mapping) and resource.get("Type") == _FUNCTION_TYPE:
            short = re.sub(r"(?<!^)(?=[A-Z])", "-", logical.removesuffix("Function")).lower()
            names[short] = logical
            names[logical] = logical
    return names


def parse(data: Any, template: Mapping[str, Any]) -> Overlay:
    """``stack.yaml``'s content (``None`` for a file of comments only), checked."""
    overlay = Overlay()
    if data is None:
        return overlay
    if not isinstance(data, Mapping):
        raise OverlayError("(top level)", f"expected a mapping with {_known_top()}")
    for key in data:
        if key != "functions" and key not in SECTIONS:
            raise OverlayError(str(key), f"unknown section; {OVERLAY} takes {_known_top()}")
    functions = data.get("functions") or {}
    if not isinstance(functions, Mapping):
        raise OverlayError("functions", "expected a mapping of function name to additions")
    names = function_names(template)
    for name, adds in functions.items():
        logical = names.get(str(name))
        if logical is None:
            shorts = ", ".join(sorted(n for n in names if not n.endswith("Function")))
            raise OverlayError(
                f"functions.{name}",
                f"the stack has no such function; its functions are {shorts} (worker runs "
                "your workflows' steps)",
            )
        additions = _function(f"functions.{name}", adds, overlay.warnings)
        if logical in overlay.functions:
            raise OverlayError(f"functions.{name}", f"{logical} is listed twice")
        overlay.functions[logical] = additions
    for section in SECTIONS:
        overlay.sections[section.capitalize()] = _section(section, data.get(section), template)
    return overlay


def _known_top() -> str:
    return "functions:, " + ", ".join(f"{s}:" for s in SECTIONS)


def _function(where: str, adds: Any, warnings: list[str]) -> FunctionAdditions:
    if adds is None:
        return FunctionAdditions()
    if not isinstance(adds, Mapping):
        raise OverlayError(where, f"expected a mapping with {', '.join(FUNCTION_FIELDS)}")
    for key in adds:
        if key not in FUNCTION_FIELDS:
            raise OverlayError(
                f"{where}.{key}",
                f"unknown field; a function takes {', '.join(FUNCTION_FIELDS)}",
            )
    result = FunctionAdditions()
    policies = adds.get("policies") or []
    if not isinstance(policies, list):
        raise OverlayError(f"{where}.policies", "expected a list (each item starts with -)")
    for i, policy in enumerate(policies):
        result.policies.append(_policy(f"{where}.policies[{i}]", policy, warnings))
    environment = adds.get("environment") or {}
    if not isinstance(environment, Mapping):
        raise OverlayError(f"{where}.environment", "expected a mapping of NAME: value")
    for name, value in environment.items():
        result.environment[str(name)] = _variable(f"{where}.environment.{name}", name, value)
    secrets = adds.get("secrets") or {}
    if not isinstance(secrets, Mapping):
        raise OverlayError(f"{where}.secrets", "expected a mapping of NAME: a secret's name or ARN")
    for name, reference in secrets.items():
        spot = f"{where}.secrets.{name}"
        _env_name(spot, name)
        if name in result.environment:
            raise OverlayError(spot, "also under environment: a variable is one or the other")
        result.secrets[str(name)] = _secret(spot, reference)
    return result


def _env_name(where: str, name: Any) -> None:
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise OverlayError(
            where, "a variable's name is letters, digits and _, not starting with a digit"
        )
    if _RESERVED_ENV.match(name):
        raise OverlayError(
            where,
            "reserved: AWS_*, LAMBDA_*, _HANDLER and TZ are Lambda's, DURABLE_* are the "
            "library's settings (change those through template.yaml's parameters); pick "
            "another name",
        )


def _variable(where: str, name: Any, value: Any) -> Any:
    _env_name(where, name)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, Mapping) and len(value) == 1:
        return dict(value)  # an intrinsic: !Ref Stage, !Sub "...", !GetAtt X.Arn
    if not isinstance(value, str):
        raise OverlayError(where, "expected a string (quote it) or an intrinsic like !Ref Stage")
    if _looks_like_credential(value) or (
        re.search(r"KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL", name.upper())
        and not re.search(r"_(NAME|ARN|ID|URL|PREFIX|PATH)$", name.upper())
        and _looks_random(value)
    ):
        raise OverlayError(
            where,
            "this looks like a secret value: anyone who can read the stack or the function's "
            "configuration would see it. Store it in Secrets Manager (aws secretsmanager "
            "create-secret --name <name> --secret-string ...) and list <name> under secrets:",
        )
    return value


def _secret(where: str, reference: Any) -> Secret:
    if not isinstance(reference, str) or not reference:
        raise OverlayError(
            where, "expected a Secrets Manager secret's name or ARN, or ssm:<parameter name>"
        )
    if reference.startswith("ssm:"):
        name = reference.removeprefix("ssm:")
        if not (_SSM_NAME.match(name) or _SSM_ARN.match(name)):
            raise OverlayError(where, f"{name!r} is not an SSM parameter name or ARN")
        return Secret("ssm", name)
    if _looks_like_credential(reference) or (
        "/" not in reference and not reference.startswith("arn:") and _looks_random(reference)
    ):
        raise OverlayError(
            where,
            "this looks like the secret's value, not its name: the stack must never hold "
            "it. Store it (aws secretsmanager create-secret --name partner/api-key "
            "--secret-string ...) and write its name or ARN here",
        )
    if reference.startswith("arn:"):
        if not _SECRET_ARN.match(reference):
            raise OverlayError(
                where,
                "not a Secrets Manager ARN (arn:aws:secretsmanager:<region>:<account>:"
                "secret:<name>); an SSM parameter is written ssm:<name>",
            )
        return Secret("secretsmanager", reference)
    if not _SECRET_NAME.match(reference):
        raise OverlayError(
            where,
            "a secret's name holds letters, digits and / _ + = . @ - only; give its name "
            "(partner/api-key), its ARN, or ssm:<parameter name>",
        )
    return Secret("secretsmanager", reference)


def _looks_like_credential(value: str) -> bool:
    return bool(_CREDENTIAL.search(value.strip())) or "\n" in value.strip()


def _looks_random(value: str) -> bool:
    """A long token of letters and digits: a key, not a word or a path."""
    if len(value) < 24 or not re.fullmatch(r"[A-Za-z0-9+/=_.-]+", value):
        return False
    digits = sum(c.isdigit() for c in value)
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value)
    return digits >= len(value) // 5 or (mixed and digits >= 3)


def _policy(where: str, policy: Any, warnings: list[str]) -> Any:
    """One ``Policies`` item: a managed policy (string), a SAM policy template
    (``{SESCrudPolicy: {IdentityName: x}}``), a policy document or one statement."""
    if isinstance(policy, str):
        return policy
    if not isinstance(policy, Mapping):
        raise OverlayError(where, _POLICY_FORMS)
    if "Effect" in policy or "Action" in policy:
        _statement(where, policy, warnings)
        return {"Version": "2012-10-17", "Statement": [dict(policy)]}
    if "Statement" in policy:
        statements = policy["Statement"]
        if not isinstance(statements, list):
            statements = [statements]
        for i, statement in enumerate(statements):
            _statement(f"{where}.Statement[{i}]", statement, warnings)
        return {"Version": "2012-10-17", **dict(policy)}
    if len(policy) == 1:
        (name, arguments) = next(iter(policy.items()))
        if not str(name).endswith("Policy"):
            raise OverlayError(where, f"{name!r}: " + _POLICY_FORMS)
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise OverlayError(
                f"{where}.{name}",
                "a SAM policy template takes a mapping of its parameters ({} when none)",
            )
        return {str(name): dict(arguments)}
    raise OverlayError(where, _POLICY_FORMS)


_POLICY_FORMS = (
    "a policy is an IAM statement (Effect, Action, Resource), a SAM policy template "
    "(SESCrudPolicy: {IdentityName: example.com}) or a managed policy's name or ARN"
)


def _statement(where: str, statement: Any, warnings: list[str]) -> None:
    if not isinstance(statement, Mapping):
        raise OverlayError(where, "a statement is a mapping with Effect, Action and Resource")
    for needed in ("Effect", "Action", "Resource"):
        if needed not in statement and not (needed != "Effect" and f"Not{needed}" in statement):
            raise OverlayError(
                where, f"an IAM statement needs Effect, Action and Resource; it has no {needed}"
            )
    if statement["Effect"] not in ("Allow", "Deny"):
        raise OverlayError(f"{where}.Effect", "is Allow or Deny")
    actions = statement.get("Action", [])
    actions = [actions] if isinstance(actions, str) else actions
    resources = statement.get("Resource", [])
    resources = [resources] if isinstance(resources, str) else resources
    if statement["Effect"] == "Allow" and isinstance(actions, list):
        broad = [a for a in actions if isinstance(a, str) and (a == "*" or a.endswith(":*"))]
        if broad:
            warnings.append(
                f"{where}: Action {broad[0]!r} allows every action of the service; list the "
                "ones the step calls"
            )
        if isinstance(resources, list) and "*" in resources:
            writes = [a for a in actions if isinstance(a, str) and not _READ_ONLY.match(a)]
            if writes:
                warnings.append(
                    f"{where}: Resource '*' lets {writes[0]} act on every resource of the "
                    "account; name the resources (e.g. the SES identity's ARN) unless the "
                    "action has no resource-level permissions"
                )


_SINGULAR = {
    "parameters": "parameter",
    "conditions": "condition",
    "resources": "resource",
    "outputs": "output",
}


def _section(section: str, items: Any, template: Mapping[str, Any]) -> dict[str, Any]:
    if items is None:
        return {}
    if not isinstance(items, Mapping):
        raise OverlayError(section, "expected a mapping of logical name to definition")
    existing = template.get(section.capitalize(), {}) or {}
    needs = {"parameters": "Type", "resources": "Type", "outputs": "Value"}.get(section)
    for name, body in items.items():
        where = f"{section}.{name}"
        if not isinstance(name, str) or not _LOGICAL_ID.match(name):
            raise OverlayError(where, "a logical name is letters and digits only")
        if name in existing:
            raise OverlayError(
                where,
                f"template.yaml already has {_SINGULAR[section]} {name} (the library's): "
                "choose another name",
            )
        if needs and (not isinstance(body, Mapping) or needs not in body):
            raise OverlayError(where, f"needs {needs}:")
    return dict(items)


# --- merging -----------------------------------------------------------------------------


def merge(template: Mapping[str, Any], overlay: Overlay) -> dict[str, Any]:
    """A copy of ``template`` with ``overlay`` added; ``template`` is left as it was."""
    merged = copy.deepcopy(dict(template))
    for section, items in overlay.sections.items():
        if items:
            merged.setdefault(section, {}).update(copy.deepcopy(items))
    for logical, adds in overlay.functions.items():
        props = merged["Resources"][logical].setdefault("Properties", {})
        if adds.environment or adds.secrets:
            variables = props.setdefault("Environment", {}).setdefault("Variables", {})
            variables.update(copy.deepcopy(adds.environment))
            for name, secret in adds.secrets.items():
                variables[name] = secret.reference
        policies = props.get("Policies", [])
        policies = list(policies) if isinstance(policies, list) else [policies]
        policies += copy.deepcopy(adds.policies)
        if adds.secrets:
            policies.append(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        secret.statement(f"Secret{_sid(name)}")
                        for name, secret in adds.secrets.items()
                    ],
                }
            )
        if policies:
            props["Policies"] = policies
    return merged


def _sid(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_") if part)


def digest(template_text: str, overlay_text: str) -> str:
    """What a merged template was made of: a deploy refuses a build of older files."""
    both = f"{template_text}\0{overlay_text}".encode()
    return hashlib.sha256(both).hexdigest()


@dataclass
class Merged:
    path: Path
    overlay: Overlay
    digest: str


def read(project: Path, template_path: Path | None = None) -> tuple[dict[str, Any], Overlay, str]:
    """The project's template and overlay, checked, and their digest (nothing written)."""
    template_path = template_path or project / TEMPLATE
    overlay_path = template_path.parent / OVERLAY
    template_text = template_path.read_text(encoding="utf-8")
    overlay_text = overlay_path.read_text(encoding="utf-8")
    template = load_cfn(template_text, str(template_path.name))
    if not isinstance(template, dict) or not isinstance(template.get("Resources"), dict):
        raise OverlayError("(file)", "no Resources: not a stack template", file=template_path.name)
    overlay = parse(load_cfn(overlay_text, OVERLAY), template)
    return template, overlay, digest(template_text, overlay_text)


def write_merged(project: Path, template_path: Path | None = None) -> Merged:
    """``template.yaml`` + ``stack.yaml`` -> ``.aws-sam/durable/template.yaml`` (relative
    to ``project``); nothing is written when the overlay is refused."""
    template_path = (template_path or project / TEMPLATE).resolve()
    template, overlay, made_of = read(project, template_path)
    merged = merge(template, overlay)
    out = (project / MERGED).resolve()
    _relocate(merged, template_path.parent, out.parent)
    merged.setdefault("Metadata", {})[METADATA_KEY] = {
        "Note": f"made by durable sam from {TEMPLATE} and {OVERLAY}: edit those, not this",
        "Digest": made_of,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dump_cfn(merged), encoding="utf-8")
    return Merged(out, overlay, made_of)


# SAM's properties that name a local folder or file, read relative to the template.
_LOCAL_PATHS = {
    "AWS::Serverless::Function": ("CodeUri",),
    "AWS::Serverless::LayerVersion": ("ContentUri",),
    "AWS::Serverless::Api": ("DefinitionUri",),
    "AWS::Serverless::HttpApi": ("DefinitionUri",),
    "AWS::Serverless::StateMachine": ("DefinitionUri",),
    "AWS::Serverless::Application": ("Location",),
    "AWS::Lambda::Function": ("Code",),
    "AWS::Lambda::LayerVersion": ("Content",),
}


def _relocate(template: dict[str, Any], source: Path, dest: Path) -> None:
    """Local paths rewritten so they still name the same files from ``dest``."""

    def moved(value: Any) -> Any:
        if not isinstance(value, str) or "://" in value or value.startswith("s3:"):
            return value
        absolute = (source / value).resolve()
        relative = os.path.relpath(absolute, dest)
        return relative + ("/" if value.endswith("/") else "")

    function_globals = template.get("Globals", {}).get("Function", {})
    if "CodeUri" in function_globals:
        function_globals["CodeUri"] = moved(function_globals["CodeUri"])
    for resource in template.get("Resources", {}).values():
        for prop in _LOCAL_PATHS.get(resource.get("Type", ""), ()):
            props = resource.get("Properties", {})
            if prop in props:
                props[prop] = moved(props[prop])


def recorded_digest(template_path: Path) -> str | None:
    """The digest a merged (or built) template carries; None for any other template."""
    try:
        data = load_cfn(template_path.read_text(encoding="utf-8"), template_path.name)
    except (OSError, OverlayError):
        return None
    if not isinstance(data, Mapping):
        return None
    found = (data.get("Metadata") or {}).get(METADATA_KEY) or {}
    value = found.get("Digest") if isinstance(found, Mapping) else None
    return str(value) if value else None


# --- durable dev -------------------------------------------------------------------------

LOCAL_SECRET_PREFIX = "DURABLE_LOCAL_SECRET_"
_PSEUDO = {
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
}


@dataclass
class LocalFunction:
    """What ``durable dev`` gives one function's processes from ``stack.yaml``."""

    environment: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, Secret] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def local_functions(
    project: Path, environ: Mapping[str, str], stage: str = "dev"
) -> dict[str, LocalFunction]:
    """By logical id, the variables each function gets locally: a variable already set in
    the developer's shell wins; a secret's variable holds its name, under which ``durable
    dev`` creates it locally from ``DURABLE_LOCAL_SECRET_<NAME>``."""
    if not (project / OVERLAY).is_file() or not (project / TEMPLATE).is_file():
        return {}
    template, overlay, _ = read(project)
    parameters = {
        name: str(spec.get("Default", ""))
        for name, spec in {
            **(template.get("Parameters") or {}),
            **overlay.sections.get("Parameters", {}),
        }.items()
        if isinstance(spec, Mapping)
    }
    parameters["Stage"] = stage
    found: dict[str, LocalFunction] = {}
    for logical, adds in overlay.functions.items():
        local = LocalFunction(secrets=dict(adds.secrets))
        for name, value in adds.environment.items():
            resolved = _resolve(value, parameters)
            if name in environ:
                local.environment[name] = environ[name]
            elif resolved is None:
                local.notes.append(
                    f"{name}: durable dev cannot work out {value} here; set {name} in your "
                    "shell to give it a value"
                )
            else:
                local.environment[name] = resolved
        for name, secret in adds.secrets.items():
            local.environment[name] = environ.get(name, secret.local_name)
        found[logical] = local
    return found


def _resolve(value: Any, parameters: Mapping[str, str]) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and "Ref" in value:
        ref = str(value["Ref"])
        return parameters.get(ref, _PSEUDO.get(ref))
    if isinstance(value, Mapping) and isinstance(value.get("Fn::Sub"), str):
        missing: list[str] = []

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            known = parameters.get(name, _PSEUDO.get(name))
            if known is None:
                missing.append(name)
                return ""
            return known

        text = re.sub(r"\$\{([^}!]+)\}", one, str(value["Fn::Sub"]))
        return None if missing else text
    return None
