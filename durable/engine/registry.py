"""The authoring API: ``App`` with its ``@workflow`` and ``@step`` decorators."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from durable.core import serde
from durable.core.callables import (
    Semantics,
    StepDeclaration,
    WorkflowDef,
    callable_name,
    resolve_annotation,
    return_annotation,
)
from durable.core.config import MAX_DURATION
from durable.core.flow import Concurrency, RateLimit, concurrency_of
from durable.core.retry import RetryPolicy
from durable.core.serde import NO_ANNOTATION
from durable.engine.context import Context, active_context
from durable.errors import InvalidInput, RegistrationError, WorkflowNotFound

if TYPE_CHECKING:
    # Imported where a schedule or a hook is declared: an app without them (and a worker
    # running one) never loads the schedules' engine, the cron and rate parser or the
    # senders' signature checks.
    from durable.engine.schedules import Missed, Overlap, Schedule
    from durable.hooks import HookSpec

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

SEMANTICS: tuple[str, ...] = ("at_least_once", "at_most_once_per_attempt")
# ``Context.step`` keeps these keyword names for itself; user arguments with the same
# name go through ``functools.partial``.
RESERVED_STEP_OPTIONS = frozenset({"name", "retry", "timeout", "semantics", "compensate", "serdes"})


def reject_async_generator(fn: Callable[..., Any], what: str) -> None:
    """``async def`` steps and workflows are fine (``durable.engine.async_workflow``); an async
    generator yields many values where a step or a workflow records one."""
    if inspect.isasyncgenfunction(fn):
        raise RegistrationError(
            f"{what} {getattr(fn, '__name__', fn)!r} is an async generator (async def with "
            "yield): a step or a workflow returns one value, which is recorded. Collect the "
            "items and return them (a list), or make each item a step of its own"
        )


@dataclass(frozen=True, slots=True)
class StepOptions:
    retry: RetryPolicy | None = None
    timeout: timedelta | None = None
    semantics: Semantics = "at_least_once"
    version: int = 1  # recorded as step_version: which code produced a stored result


class StepFunction(StepDeclaration, Generic[P, R]):
    """A step function: durable when called inside a workflow, a plain call elsewhere.

    An ``async def`` one called in an ``async def`` workflow returns an awaitable, as the
    function does (``await fetch(url)``, ``asyncio.gather(fetch(a), fetch(b))``): the step
    takes its position at the call and its body runs when awaited, concurrently with
    other awaited steps (``durable.engine.async_workflow``)."""

    def __init__(self, fn: Callable[P, R], name: str, options: StepOptions) -> None:
        self.fn = fn
        self.name = name
        self.options = options
        self.return_annotation = return_annotation(fn)
        self.is_async = inspect.iscoroutinefunction(fn)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        ctx = active_context()
        if ctx is None:
            return self.fn(*args, **kwargs)
        if self.is_async:
            from durable.engine.async_workflow import await_step

            awaitable: R = await_step(ctx._exec, self, args, kwargs)  # type: ignore[assignment]
            return awaitable
        # Reserved option names cannot collide: they are keyword-only in Context.step and
        # a step needing one takes it through functools.partial.
        result: R = ctx.step(self, *args, **kwargs)
        return result

    def __repr__(self) -> str:
        return f"<step {self.name}>"


def _check_context_parameter(fn: Callable[..., Any], first: inspect.Parameter, name: str) -> None:
    """The first parameter is the Context. ``def greet(name: str)`` was accepted as a
    workflow taking no input, and every start with a name then failed "takes no input":
    a first parameter annotated with a concrete class that is not a Context is refused
    here, at the declaration, with the signature meant. Anything that may stand for the
    context is left alone (no annotation, a string, ``Any``, ``object``, a protocol, a
    type variable, a union holding a Context): this runs at import, where a false refusal
    would stop every handler of the app."""

    try:
        annotation = resolve_annotation(fn, first.name)
    except Exception:  # an annotation that does not resolve: not this check's to judge
        return
    if annotation in (NO_ANNOTATION, Any, object) or not isinstance(annotation, type):
        return  # (``Any`` is a class since Python 3.11)
    if issubclass(annotation, Context) or getattr(annotation, "_is_protocol", False):
        return
    shown = f"{first.name}: {annotation.__name__}"
    raise RegistrationError(
        f"workflow {name!r}: its first parameter is the run's Context, but `{shown}` looks "
        f"like an input: declare it def {getattr(fn, '__name__', name)}(ctx: Context, {shown})"
    )


def _workflow_signature(fn: Callable[..., Any], name: str) -> tuple[bool, Any]:
    params = list(inspect.signature(fn).parameters.values())
    kinds_ok = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    if not params or len(params) > 2 or not kinds_ok:
        raise RegistrationError(
            f"workflow {name!r} must take ctx plus at most one input parameter, "
            "for example def onboarding(ctx: Context, signup: Signup)"
        )
    _check_context_parameter(fn, params[0], name)
    if len(params) == 1:
        return False, NO_ANNOTATION
    try:
        return True, resolve_annotation(fn, params[1].name)
    except Exception as e:
        raise RegistrationError(
            f"workflow {name!r}: cannot resolve the input annotation ({e}); define or import "
            "the type at module level"
        ) from e


class App:
    """An explicit registry of workflows and steps (no global singleton).

    ``default_retry`` applies to steps that set no policy of their own.
    """

    def __init__(self, *, default_retry: RetryPolicy | None = None) -> None:
        self.default_retry = default_retry
        self._workflows: dict[str, dict[int, WorkflowDef]] = {}
        self._schedules: dict[str, Schedule] = {}

    @overload
    def workflow(self, fn: F, /) -> F: ...

    @overload
    def workflow(
        self,
        *,
        name: str | None = None,
        version: int = 1,
        hook: HookSpec | None = None,
        schedule: str | None = None,
        timezone: str = "UTC",
        concurrency: int | Concurrency | None = None,
        rate_limit: RateLimit | None = None,
        max_lifetime: timedelta | None = None,
    ) -> Callable[[F], F]: ...

    def workflow(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        version: int = 1,
        hook: HookSpec | None = None,
        schedule: str | None = None,
        timezone: str = "UTC",
        concurrency: int | Concurrency | None = None,
        rate_limit: RateLimit | None = None,
        max_lifetime: timedelta | None = None,
    ) -> Any:
        """Register a workflow function ``(ctx[, input]) -> result``.

        Several versions of one name may be registered side by side; a run stays pinned to
        the version it started on. ``hook`` names the sender whose signed deliveries to
        ``POST /hooks/<name>`` may start it (``durable.hooks``: ``github()``, ``stripe()``,
        ``slack()``, ``shopify()``; default our own ``durable()`` scheme).

        ``schedule`` starts it on a clock, with no input: ``"cron(0 9 ? * MON-FRI *)"``
        or ``"rate(1 hour)"``, read in ``timezone`` (``durable.engine.schedules``; ``schedule()``
        takes an input and the overlap and lateness rules).

        ``concurrency`` (an int, or ``Concurrency(limit, key="customer")`` for a limit per
        value of an input field) keeps at most that many runs active; the others wait in
        line, in order. ``rate_limit=RateLimit(100, timedelta(minutes=1))`` lets at most
        that many runs start in any period; the others start later, in order
        (``durable.core.flow``).

        ``max_lifetime`` (a ``timedelta``) declares how long any run of it may live: every
        item of its runs is then written with a TTL (its start plus that lifetime plus the
        retention), so DynamoDB deletes them for free instead of the purge; a run still
        going at the end of its lifetime fails (``durable.core.lifetime``). The stack's
        ``max_run_lifetime`` still bounds every run, when it is the shorter.
        """
        limit = concurrency_of(concurrency)
        if max_lifetime is not None and (
            not isinstance(max_lifetime, timedelta)
            or not timedelta(hours=1) <= max_lifetime <= MAX_DURATION
        ):
            raise RegistrationError(
                "max_lifetime= takes a datetime.timedelta from 1 hour to 3650 days"
            )
        if rate_limit is not None and not isinstance(rate_limit, RateLimit):
            raise RegistrationError("rate_limit= takes a durable.RateLimit")

        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            wf_name = name or getattr(f, "__name__", None)
            if not wf_name:
                raise RegistrationError("a workflow needs a name")
            reject_async_generator(f, "workflow")
            if not isinstance(version, int) or version < 1:
                raise RegistrationError(f"workflow {wf_name!r}: version must be an int >= 1")
            takes_input, annotation = _workflow_signature(f, wf_name)
            versions = self._workflows.setdefault(wf_name, {})
            if version in versions:
                raise RegistrationError(
                    f"workflow {wf_name!r} version {version} is already registered; "
                    "bump version= for the new code"
                )
            if hook is not None:
                from durable.hooks import HookSpec  # its maker imported it already

                if not isinstance(hook, HookSpec):
                    raise RegistrationError(
                        f"workflow {wf_name!r}: hook= takes a durable.hooks spec, e.g. github()"
                    )
            keyed = any(g is not None and g.key is not None for g in (limit, rate_limit))
            if keyed and not takes_input:
                raise RegistrationError(
                    f"workflow {wf_name!r}: a limit per key reads the key from the input, "
                    "but the workflow takes none"
                )
            versions[version] = WorkflowDef(
                wf_name,
                version,
                f,
                takes_input,
                annotation,
                return_annotation(f),
                hook,
                concurrency=limit,
                rate_limit=rate_limit,
                max_lifetime=max_lifetime,
            )
            if schedule is not None:
                self.schedule(wf_name, schedule, timezone=timezone)
            return f

        return register(fn) if fn is not None else register

    @overload
    def step(self, fn: Callable[P, R], /) -> StepFunction[P, R]: ...

    @overload
    def step(
        self,
        *,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: timedelta | None = None,
        semantics: Semantics = "at_least_once",
        version: int = 1,
    ) -> Callable[[Callable[P, R]], StepFunction[P, R]]: ...

    def step(
        self,
        fn: Callable[P, R] | None = None,
        *,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: timedelta | None = None,
        semantics: Semantics = "at_least_once",
        version: int = 1,
    ) -> Any:
        """Declare a step function with default options (overridable per call).

        ``version`` is recorded with each result (``step_version``) so a changed step body
        can be told apart in the ledger, and in checkpoints read by newer code.
        """

        def wrap(f: Callable[P, R]) -> StepFunction[P, R]:
            reject_async_generator(f, "step")
            check_step_options(retry, timeout, semantics)
            if not isinstance(version, int) or version < 1:
                raise RegistrationError("version= must be an int >= 1")
            options = StepOptions(retry, timeout, semantics, version)
            return StepFunction(f, callable_name(f, name), options)

        return wrap(fn) if fn is not None else wrap

    def get_workflow(self, name: str, version: int | None = None) -> WorkflowDef:
        """The registered workflow ``name`` at ``version`` (default: its newest); raises
        ``WorkflowNotFound`` naming the registered ones."""
        versions = self._workflows.get(name)
        if not versions:
            known = ", ".join(sorted(self._workflows)) or "none"
            raise WorkflowNotFound(f"no workflow named {name!r} is registered (known: {known})")
        if version is None:
            return versions[max(versions)]
        if version not in versions:
            raise WorkflowNotFound(
                f"workflow {name!r} has no version {version} (registered: "
                f"{', '.join(str(v) for v in sorted(versions))}); keep old versions registered "
                "until their runs finish"
            )
        return versions[version]

    def schedule(
        self,
        workflow: str,
        expression: str,
        *,
        name: str | None = None,
        timezone: str = "UTC",
        input: Any = None,
        overlap: Overlap = "allow",
        missed: Missed = "skip",
        grace: timedelta = timedelta(minutes=15),
    ) -> Schedule:
        """Start ``workflow`` with ``input`` on a clock (``engine.schedules``): ``expression``
        is Scheduler's ``cron(...)`` or ``rate(...)``; ``overlap="skip"`` drops a fire
        while the schedule's last run is still going, ``overlap="buffer_one"`` keeps one
        fire waiting for it (and drops the rest); ``missed="catch_up"`` starts a fire
        delivered more than ``grace`` late instead of dropping it."""
        from durable.engine.schedules import Schedule

        declared = Schedule(
            name or workflow, workflow, expression, timezone, input, overlap, missed, grace
        )
        if declared.name in self._schedules:
            raise RegistrationError(
                f"schedule {declared.name!r} is already declared; give this one name=..."
            )
        self._schedules[declared.name] = declared
        return declared

    def schedules(self) -> dict[str, Schedule]:
        """Every declared schedule by name, each checked against its workflow."""
        for declared in self._schedules.values():
            wf = self.get_workflow(declared.workflow)  # WorkflowNotFound names the fix
            if declared.input is not None and not wf.takes_input:
                raise RegistrationError(
                    f"schedule {declared.name!r}: workflow {wf.name!r} takes no input"
                )
            if declared.overlap == "buffer_one" and wf.concurrency is not None:
                raise RegistrationError(
                    f"schedule {declared.name!r}: overlap='buffer_one' keeps the schedule's "
                    f"runs in a gate of their own, and workflow {wf.name!r} has a concurrency "
                    "limit (a run takes one gate): use overlap='skip', or drop one of the two"
                )
            if wf.takes_input:
                # Checked here, not at a fire: a fire that cannot start would only be
                # retried by Scheduler, and nobody would see why.
                try:
                    serde.validate_input(declared.input, wf.input_annotation, wf.name)
                except InvalidInput as e:
                    raise RegistrationError(f"schedule {declared.name!r}: {e}") from None
        return dict(self._schedules)

    def include(self, other: App) -> App:
        """Register every workflow of ``other`` here too (compose an app from modules)."""
        for declared in other._schedules.values():
            mine = self._schedules.setdefault(declared.name, declared)
            if mine is not declared:
                raise RegistrationError(f"schedule {declared.name!r} is declared in both apps")
        for wf in other.workflows():
            versions = self._workflows.setdefault(wf.name, {})
            if wf.version in versions and versions[wf.version] is not wf:
                raise RegistrationError(
                    f"workflow {wf.name!r} version {wf.version} is registered in both apps"
                )
            versions[wf.version] = wf
        return self

    def workflows(self) -> list[WorkflowDef]:
        """Every registered workflow, one entry per version."""
        return [wf for versions in self._workflows.values() for wf in versions.values()]


def check_step_options(
    retry: RetryPolicy | None, timeout: timedelta | None, semantics: str
) -> None:
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise RegistrationError("retry= must be a durable.RetryPolicy")
    if timeout is not None and (not isinstance(timeout, timedelta) or timeout <= timedelta(0)):
        raise RegistrationError("timeout= must be a positive datetime.timedelta")
    if semantics not in SEMANTICS:
        raise RegistrationError(f"semantics= must be one of {', '.join(SEMANTICS)}")
