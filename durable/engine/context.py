"""What workflow and step code see: ``Context`` and ``StepContext``.

Both are thin facades over the engine's per-invocation ``Execution``; they hold no state
of their own beyond identifiers, so everything a workflow observes comes from the ledger.
"""

from __future__ import annotations

import logging
import uuid as _uuid
from collections.abc import Callable, Coroutine, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar, TypeVarTuple, overload

from durable.core.callables import Semantics, return_annotation
from durable.core.tokens import refuse_token
from durable.core.values import NO_STATE
from durable.engine.active import _active_context
from durable.errors import InvalidInput

if TYPE_CHECKING:
    from durable.core.codecs import Serdes
    from durable.core.completion import BatchResult
    from durable.core.retry import RetryPolicy
    from durable.engine.children import ChildHandle
    from durable.engine.engine_parts import IfRunning, Reuse
    from durable.engine.execution_parts import ExecutionParts
    from durable.engine.waits import Callback

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
T = TypeVar("T")
V = TypeVar("V")
In = TypeVar("In")
Out = TypeVar("Out")
Ts = TypeVarTuple("Ts")

logger = logging.getLogger("durable.workflow")


class Context:
    """The workflow's handle on durable operations. Passed as the first argument.

    ``logger`` writes only while the workflow code runs for the first time, never on
    replay, and tags each record with the run id, workflow, version and position
    (``durable.engine.run_logging``).
    """

    def __init__(self, execution: ExecutionParts) -> None:
        from durable.engine.run_logging import WorkflowLogger

        self._exec = execution
        self.logger: logging.LoggerAdapter[logging.Logger] = WorkflowLogger(execution)

    @property
    def run_id(self) -> str:
        """The id of the run being executed (a 26-character ULID)."""
        return self._exec.run.run_id

    @property
    def workflow(self) -> str:
        """The name the workflow is registered under."""
        return self._exec.workflow.name

    @property
    def version(self) -> int:
        """The workflow version this run is on (a run stays on the version it started on)."""
        return self._exec.workflow.version

    # Two typed forms of one call. A ParamSpec cannot take keyword options besides its
    # own (PEP 612 allows none between ``*args: P.args`` and ``**kwargs: P.kwargs``), so:
    # without options, every argument is checked against ``fn``; with options, the
    # positional ones are (a TypeVarTuple), and ``fn``'s keyword arguments go through
    # ``functools.partial``, as a same-named one must already. Runtime is the one below.
    # Each form comes first for an ``async def`` ``fn``, whose awaited value is the result.
    @overload
    def step(
        self, fn: Callable[P, Coroutine[Any, Any, R]], /, *args: P.args, **kwargs: P.kwargs
    ) -> R: ...

    @overload
    def step(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R: ...

    @overload
    def step(
        self,
        fn: Callable[[*Ts], Coroutine[Any, Any, R]],
        /,
        *args: *Ts,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: timedelta | None = None,
        semantics: Semantics | None = None,
        compensate: Callable[..., Any] | None = None,
    ) -> R: ...

    @overload
    def step(
        self,
        fn: Callable[[*Ts], R],
        /,
        *args: *Ts,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: timedelta | None = None,
        semantics: Semantics | None = None,
        compensate: Callable[..., Any] | None = None,
        serdes: Serdes[R] | None = None,
    ) -> R: ...

    # The first form's **kwargs could, to a checker, hold an option's name with another
    # type; at run time those names are the options' (RESERVED_STEP_OPTIONS).
    def step(  # type: ignore[misc]
        self,
        fn: Callable[..., R],
        *args: Any,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: timedelta | None = None,
        semantics: Semantics | None = None,
        compensate: Callable[..., Any] | None = None,
        serdes: Serdes[R] | None = None,
        **kwargs: Any,
    ) -> R:
        """Run ``fn(*args, **kwargs)`` as a durable step and return its (decoded) result.

        A recorded result is returned without running anything. The option names are
        reserved: pass a same-named argument of ``fn`` through ``functools.partial``.
        A type checker checks the arguments against ``fn`` and infers its result. With an
        option given it checks the positional ones, and refuses a keyword argument of
        ``fn`` (the call runs all the same): bind it with ``functools.partial`` there.

        ``compensate=undo`` registers ``undo(result, *args, **kwargs)`` once the step is
        done. If the run then fails, or is canceled with compensation, the registered
        undos run newest first, each as a durable step of its own. **A compensation runs
        at least once and may run more than once** (a worker that dies after the undo's
        body but before its record runs it again on takeover), so make it safe to repeat:
        pass ``current_step().idempotency_key`` to the other system, or treat "already
        undone" as success.

        ``serdes=codec`` (a ``durable.Serdes``) stores the result as ``codec`` writes it,
        in place of the encoding by ``fn``'s return annotation: for a type pydantic does
        not cover. The step returns ``codec.deserialize(codec.serialize(result))`` on its
        first execution as on every replay; a codec that fails fails the step for good.
        """
        result: R = self._exec.call_step(
            fn,
            args,
            kwargs,
            name=name,
            retry=retry,
            timeout=timeout,
            semantics=semantics,
            compensate=compensate,
            serdes=serdes,
        )
        return result

    def sleep(self, duration: timedelta, *, name: str = "sleep") -> None:
        """Wait durably: the wake time is computed once and recorded; the run suspends.

        Any length works (minutes to years); short ones may be served in-process.
        """
        if not isinstance(duration, timedelta) or duration < timedelta(0):
            raise ValueError("sleep(duration) needs a non-negative datetime.timedelta")
        try:
            when = self._exec.wake_time(duration)
        except OverflowError:  # past any date (timedelta.max): refused, not a crash
            raise ValueError(
                f"sleep(duration) of {duration} is longer than the run's max_run_lifetime "
                f"({self._exec.config.max_run_lifetime}): sleep less, or continue as a new "
                "run (ctx.continue_as_new)"
            ) from None
        self._exec.sleep_until(when, name)

    def sleep_until(self, when: datetime, *, name: str = "sleep") -> None:
        """Wait durably until ``when`` (an aware datetime)."""
        if not isinstance(when, datetime) or when.tzinfo is None:
            raise ValueError("sleep_until(when) needs a timezone-aware datetime")
        self._exec.sleep_until(when, name)

    # ``result_type=Decision`` types the answer as a ``Decision``; a type that is not a
    # class (``Literal[...]``, a union) is still decoded by, but typed as Any. A codec
    # (``serdes=``) types it as what the codec decodes.
    @overload
    def create_callback(
        self,
        name: str,
        timeout: timedelta | None = None,
        *,
        result_type: type[T],
        heartbeat_timeout: timedelta | None = None,
    ) -> Callback[T]: ...

    @overload
    def create_callback(
        self,
        name: str,
        timeout: timedelta | None = None,
        *,
        heartbeat_timeout: timedelta | None = None,
        serdes: Serdes[T],
    ) -> Callback[T]: ...

    @overload
    def create_callback(
        self,
        name: str,
        timeout: timedelta | None = None,
        *,
        result_type: Any = None,
        heartbeat_timeout: timedelta | None = None,
    ) -> Callback[Any]: ...

    def create_callback(
        self,
        name: str,
        timeout: timedelta | None = None,
        *,
        result_type: Any = None,
        heartbeat_timeout: timedelta | None = None,
        serdes: Serdes[Any] | None = None,
    ) -> Callback[Any]:
        """Mint a callback (``.token``, ``.url``); ``.result()`` waits for its answer.

        The wait is recorded WAITING with its expiry before the token exists, so an
        answer can never arrive for a wait the ledger does not know. The answer is the
        JSON body the sender posts to the URL; with ``result_type`` (a class, such as a
        pydantic model of the sender's payload) one that does not fit is refused with a
        422 naming the field, and ``.result()`` returns the decoded value.

        With ``heartbeat_timeout``, the party doing the work says it is alive by posting
        to ``.url + "/heartbeat"`` (``durable heartbeat TOKEN``) at least that often: a
        missed heartbeat times the wait out early (``CallbackTimeout``), ``timeout`` still
        bounding the whole wait.

        With ``serdes=codec`` (a ``durable.Serdes``, in place of ``result_type``) the
        answer, stored as the JSON text the sender posted, is decoded by
        ``codec.deserialize``; the API then accepts any JSON answer.
        """
        from durable.engine.waits import create_callback

        return create_callback(
            self._exec, name, timeout, result_type, heartbeat_timeout, serdes=serdes
        )

    @overload
    def wait_for_callback(
        self,
        name: str,
        timeout: timedelta | None = None,
        submit: Callable[[Callback[T]], object] | None = None,
        *,
        result_type: type[T],
        heartbeat_timeout: timedelta | None = None,
    ) -> T: ...

    @overload
    def wait_for_callback(
        self,
        name: str,
        timeout: timedelta | None = None,
        submit: Callable[[Callback[T]], object] | None = None,
        *,
        heartbeat_timeout: timedelta | None = None,
        serdes: Serdes[T],
    ) -> T: ...

    @overload
    def wait_for_callback(
        self,
        name: str,
        timeout: timedelta | None = None,
        submit: Callable[[Callback[Any]], object] | None = None,
        *,
        result_type: Any = None,
        heartbeat_timeout: timedelta | None = None,
    ) -> Any: ...

    def wait_for_callback(
        self,
        name: str,
        timeout: timedelta | None = None,
        submit: Callable[[Callback[Any]], object] | None = None,
        *,
        result_type: Any = None,
        heartbeat_timeout: timedelta | None = None,
        serdes: Serdes[Any] | None = None,
    ) -> Any:
        """Create a callback, run ``submit(callback)`` as the durable step ``<name>.submit``
        (email the approver its URL, say), and wait for the answer.

        Returns the answer's JSON, or with ``result_type=Decision`` the ``Decision`` it
        decodes to (typed so: a type checker infers ``Decision``); raises
        ``CallbackFailed`` when the sender reported a failure (a rejection) and
        ``CallbackTimeout`` after ``timeout``, or early when a ``heartbeat_timeout``
        passes without a heartbeat (see ``create_callback``). With ``serdes=codec`` the
        answer is what ``codec.deserialize`` makes of its JSON text (typed so).
        """
        from durable.engine.waits import wait_for_callback

        return wait_for_callback(
            self._exec, name, timeout, submit, result_type, heartbeat_timeout, serdes=serdes
        )

    def wait_for_signal(self, name: str, timeout: timedelta | None = None) -> Any:
        """Wait for the next signal ``name`` sent to this run (buffered if sent earlier).

        Signals are consumed in the order they arrived; raises ``CallbackTimeout``.
        """
        from durable.engine.waits import wait_for_signal

        return wait_for_signal(self._exec, name, timeout)

    # An ``async def`` check runs like a step body; its awaited value is what counts.
    @overload
    def wait_for_condition(
        self,
        check: Callable[[], Coroutine[Any, Any, R]],
        interval: timedelta,
        timeout: timedelta | None = None,
        *,
        name: str | None = None,
        backoff: float = 1.5,
        max_interval: timedelta | None = None,
        max_attempts: int | None = None,
        jitter: Literal["none", "full"] = "none",
    ) -> R: ...

    @overload
    def wait_for_condition(
        self,
        check: Callable[[], R],
        interval: timedelta,
        timeout: timedelta | None = None,
        *,
        name: str | None = None,
        backoff: float = 1.5,
        max_interval: timedelta | None = None,
        max_attempts: int | None = None,
        jitter: Literal["none", "full"] = "none",
        serdes: Serdes[R] | None = None,
    ) -> R: ...

    @overload
    def wait_for_condition(
        self,
        check: Callable[[S], Coroutine[Any, Any, S]],
        interval: timedelta,
        timeout: timedelta | None = None,
        *,
        initial_state: S,
        until: Callable[[S], object] | None = None,
        name: str | None = None,
        backoff: float = 1.5,
        max_interval: timedelta | None = None,
        max_attempts: int | None = None,
        jitter: Literal["none", "full"] = "none",
    ) -> S: ...

    @overload
    def wait_for_condition(
        self,
        check: Callable[[S], S],
        interval: timedelta,
        timeout: timedelta | None = None,
        *,
        initial_state: S,
        until: Callable[[S], object] | None = None,
        name: str | None = None,
        backoff: float = 1.5,
        max_interval: timedelta | None = None,
        max_attempts: int | None = None,
        jitter: Literal["none", "full"] = "none",
        serdes: Serdes[S] | None = None,
    ) -> S: ...

    def wait_for_condition(
        self,
        check: Callable[..., Any],
        interval: timedelta,
        timeout: timedelta | None = None,
        *,
        initial_state: Any = NO_STATE,
        until: Callable[[Any], object] | None = None,
        name: str | None = None,
        backoff: float = 1.5,
        max_interval: timedelta | None = None,
        max_attempts: int | None = None,
        jitter: Literal["none", "full"] = "none",
        serdes: Serdes[Any] | None = None,
    ) -> Any:
        """Poll ``check()`` (a database flag, an external job's status) until it returns a
        truthy value, which is recorded and returned. Polls back off from ``interval``
        by ``backoff`` up to ``max_interval`` (default 10x interval), each delay a random
        share of itself with ``jitter="full"``; retryable errors count as "not yet",
        terminal ones raise ``StepFailed``; ``CallbackTimeout`` after ``timeout``, or after
        ``max_attempts`` checks that were not met.

        With ``initial_state``, a check carries state from one poll to the next:
        ``check(state)`` returns the next state until ``until(state)`` is true (default:
        the state is truthy); the last state is returned. The state is recorded each time
        the run parks between checks, with the next check's time, so a resumed or
        replayed run goes on from there; checks a worker ran in memory (waits shorter
        than the step budget) since the last park run again after a crash, as a step's
        body would. ``until`` raising fails the wait (``StepFailed``), recorded.

        ``serdes=codec`` (a ``durable.Serdes``) stores the result and the state as the
        codec writes them, in place of the encoding by ``check``'s return annotation;
        ``until`` and each check see the state the codec decodes, parked or not. A codec
        that cannot encode one fails the wait, recorded (``StepFailed``).

        ``check`` may be ``async def``: each poll runs it to its end, as ``ctx.step``
        runs an async step.
        """
        from durable.engine.waits import wait_for_condition

        return wait_for_condition(
            self._exec,
            check,
            interval,
            timeout,
            name=name,
            backoff=backoff,
            max_interval=max_interval,
            initial_state=initial_state,
            until=until,
            max_attempts=max_attempts,
            jitter=jitter,
            serdes=serdes,
        )

    def parallel(
        self,
        *branches: Callable[[Context], Any],
        name: str = "parallel",
        max_concurrency: int | None = None,
        completion: Any = None,
        branch_names: Sequence[str] | None = None,
        serdes: Serdes[Any] | None = None,
    ) -> BatchResult[Any]:
        """Run ``branches`` (each a function taking a ``Context``) at the same time and
        return their outcomes in branch order.

        Each branch is workflow code with its own positions under this call's (it may run
        steps, sleep, wait for callbacks and signals, compensate, even nest a batch); its
        step bodies run concurrently on threads, under the run's lease. ``completion``
        decides when the batch is over: every branch succeeded (the default, ``"all"``),
        ``"first_successful"``, ``{"min_successful": n}``, ``{"tolerated_failures": n}``
        or ``{"tolerated_failures": "10%"}``; branches still running then are canceled at
        their next durable call and their compensations run. When every open branch
        waits, the run suspends until the first of them can go on. ``.values()`` on the
        result gives the values, or raises ``BatchFailed`` when the rule failed;
        ``.completion_reason`` says why it was decided.

        Each branch is named in the batch's record (``durable show`` and the console print
        it, ``BatchItem.name``): ``branch_names`` in branch order, else each function's name.

        ``serdes=codec`` (a ``durable.Serdes``) encodes every branch's value, in place of
        the encoding by each branch's return annotation; a branch whose value it cannot
        encode fails (``BranchFailed``, error type "SerdesError").
        """
        from durable.core.codecs import coded
        from durable.engine.fanout import run_batch

        codec = coded(serdes, f"parallel {name!r}")
        return run_batch(
            self._exec,
            name,
            [(b, return_annotation(b) if codec is None else codec) for b in branches],
            max_concurrency=max_concurrency,
            completion=completion,
            names=(
                branch_names
                if branch_names is not None
                else [_branch_label(b, i) for i, b in enumerate(branches, 1)]
            ),
        )

    # A distributed map's codec decodes each child's result (its JSON form): the items'
    # values are what the codec decodes, whatever the child returns. Inline, the codec
    # encodes ``fn``'s results: of ``fn``'s return type.
    @overload
    def map(
        self,
        fn: Callable[[Context, T], object] | str,
        items: Iterable[T],
        *,
        name: str = "map",
        max_concurrency: int | None = None,
        completion: Any = None,
        distributed: Literal[True],
        item_name: None = None,
        serdes: Serdes[V],
    ) -> BatchResult[V]: ...

    # An ``async def`` workflow mapped as child runs (``distributed``): the results are
    # its awaited values. (Inline, a branch is plain code: an async one is refused.)
    @overload
    def map(
        self,
        fn: Callable[[Context, T], Coroutine[Any, Any, R]],
        items: Iterable[T],
        *,
        name: str = "map",
        max_concurrency: int | None = None,
        completion: Any = None,
        distributed: bool | None = None,
        item_name: Callable[[T, int], str] | None = None,
    ) -> BatchResult[R]: ...

    @overload
    def map(
        self,
        fn: Callable[[Context, T], R] | str,
        items: Iterable[T],
        *,
        name: str = "map",
        max_concurrency: int | None = None,
        completion: Any = None,
        distributed: bool | None = None,
        item_name: Callable[[T, int], str] | None = None,
        serdes: Serdes[R] | None = None,
    ) -> BatchResult[R]: ...

    def map(
        self,
        fn: Callable[[Context, T], Any] | str,
        items: Iterable[T],
        *,
        name: str = "map",
        max_concurrency: int | None = None,
        completion: Any = None,
        distributed: bool | None = None,
        item_name: Callable[[T, int], str] | None = None,
        serdes: Serdes[Any] | None = None,
    ) -> BatchResult[Any]:
        """Run ``fn(ctx, item)`` for each item as a branch of one batch (see ``parallel``);
        results come back in item order, decoded by ``fn``'s return annotation.

        Up to 1000 items run inline, in this invocation, ``max_concurrency`` at a time
        (by default up to 64 at once). ``distributed=True`` (the default past 1000 items)
        runs each item as a child run of ``fn``, which must then be a registered workflow
        taking the item as its input: ``max_concurrency`` children at a time (default
        100) across all workers, started in batches, each child's end recorded under
        this map with the same atomic write that ends it (``durable.engine.distributed``).

        With ``item_name(item, index)`` (the AWS SDK's ``item_namer``) each inline branch
        is named in the map's record (``durable show``, the console, ``BatchItem.name``);
        without it, none is stored and they show as "item N". The name is stored: name by
        an id, not by a secret. A distributed map's items are child runs, each named by
        its own id (``item_name`` is ignored when a map goes distributed by its size,
        refused with ``distributed=True``).

        ``serdes=codec`` (a ``durable.Serdes``) encodes each item's result, in place of
        the encoding by ``fn``'s return annotation (an item whose result it cannot encode
        fails); a distributed map's items are child runs, whose results (their JSON
        form) it decodes, as ``run_child``'s ``serdes=`` does.
        """
        from durable.core.codecs import coded
        from durable.core.completion import check_batch_size
        from durable.engine.fanout import INLINE_LIMIT, run_batch

        refuse_token(name, "name", "map name")  # before a distributed map names its children
        codec = coded(serdes, f"map {name!r}")
        values = list(items)
        if (
            isinstance(fn, str)
            or distributed
            or (distributed is None and len(values) > INLINE_LIMIT)
        ):
            from durable.engine.children import resolve_workflow
            from durable.engine.distributed import run_distributed

            if item_name is not None and distributed:
                raise InvalidInput(
                    f"map {name!r}: item_name= names inline branches; a distributed map's "
                    "items are child runs, named by their run ids",
                    field="item_name",
                )
            try:
                wf = resolve_workflow(self._exec.engine, fn)
            except Exception as e:
                if distributed is None:  # too many to run inline, and not a workflow
                    check_batch_size(len(values), f"map {name!r}", INLINE_LIMIT)
                raise InvalidInput(
                    f"map {name!r} with distributed=True runs each item as a child run: {e}",
                    field="fn",
                ) from e
            distributed_result: BatchResult[Any] = run_distributed(
                self._exec,
                name,
                wf,
                values,
                max_concurrency=max_concurrency,
                completion=completion,
                codec=codec,
            )
            return distributed_result
        from durable.engine.fanout import check_plain_branch

        check_plain_branch(fn, f"map {name!r}'s function")
        annotation = return_annotation(fn) if codec is None else codec

        def branch(item: T) -> Callable[[Context], Any]:
            return lambda c: fn(c, item)

        result: BatchResult[Any] = run_batch(
            self._exec,
            name,
            [(branch(v), annotation) for v in values],
            max_concurrency=max_concurrency,
            completion=completion,
            names=_item_labels(values, item_name),
        )
        return result

    # A workflow function passed as itself types the call: its input parameter checks
    # ``input``, its return annotation is the result's type (an ``async def`` one's
    # awaited value). By name, both are Any. With a codec (``serdes=``) the result is
    # what the codec decodes, whatever the child returns (its JSON form).
    @overload
    def run_child(
        self,
        workflow: Callable[[Context, In], Coroutine[Any, Any, Out]],
        input: In,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
    ) -> Out: ...

    @overload
    def run_child(
        self,
        workflow: Callable[[Context], Coroutine[Any, Any, Out]],
        input: None = None,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
    ) -> Out: ...

    @overload
    def run_child(
        self,
        workflow: Callable[[Context, In], Out],
        input: In,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
    ) -> Out: ...

    @overload
    def run_child(
        self,
        workflow: Callable[[Context], Out],
        input: None = None,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
    ) -> Out: ...

    @overload
    def run_child(
        self,
        workflow: Callable[[Context, In], object],
        input: In,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
        serdes: Serdes[V],
    ) -> V: ...

    @overload
    def run_child(
        self,
        workflow: Callable[[Context], object],
        input: None = None,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
        serdes: Serdes[V],
    ) -> V: ...

    @overload
    def run_child(
        self,
        workflow: str,
        input: Any = None,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
        serdes: Serdes[V],
    ) -> V: ...

    @overload
    def run_child(
        self,
        workflow: str,
        input: Any = None,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
    ) -> Any: ...

    def run_child(
        self,
        workflow: str | Callable[..., Any],
        input: Any = None,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
        serdes: Serdes[Any] | None = None,
    ) -> Any:
        """Start a run of ``workflow`` (a registered workflow, or its name) as this run's
        child and wait for its result, which comes back decoded by that workflow's return
        annotation; a child that failed or was canceled raises ``ChildFailed``.

        The child is a run of its own (own lease and ledger partition, pinned to its
        workflow's newest version, listed with its parent). ``id`` (optional) is its
        idempotency key within its workflow: the same id is the same run. Canceling this
        run cancels the children it waits for. The wait costs nothing while it lasts:
        this run suspends and the child's end wakes it.

        ``if_running`` says what a key a running run already holds means: ``"fail"``
        (``InvalidInput``) or ``"attach"``: wait for that run instead of starting one
        (it stays that run's, not this one's: this run's cancel leaves it running).

        ``reuse`` says what an ``id`` whose run has ended means: ``"never"`` (the
        default: a key names one run for its retention, so the same input adopts that
        run's outcome and another is refused) or ``"after_end"``: start a new run under
        it (a recurring job keyed by its business key); the ended run stays readable.

        ``serdes=codec`` (a ``durable.Serdes``) decodes the child's result (the JSON text
        its workflow's return annotation wrote) in place of that annotation: the child
        returns a JSON form, the parent gets the value ``codec.deserialize`` makes of it.
        The input is the child's to decode, by its own parameter's annotation."""
        from durable.engine.children import start_child

        return start_child(self._exec, workflow, input, id, if_running, serdes, reuse).result()

    @overload
    def start_child(
        self,
        workflow: Callable[[Context, In], Coroutine[Any, Any, Out]],
        input: In,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
    ) -> ChildHandle[Out]: ...

    @overload
    def start_child(
        self,
        workflow: Callable[[Context], Coroutine[Any, Any, Out]],
        input: None = None,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
    ) -> ChildHandle[Out]: ...

    @overload
    def start_child(
        self,
        workflow: Callable[[Context, In], Out],
        input: In,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
    ) -> ChildHandle[Out]: ...

    @overload
    def start_child(
        self,
        workflow: Callable[[Context], Out],
        input: None = None,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
    ) -> ChildHandle[Out]: ...

    @overload
    def start_child(
        self,
        workflow: Callable[[Context, In], object],
        input: In,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
        serdes: Serdes[V],
    ) -> ChildHandle[V]: ...

    @overload
    def start_child(
        self,
        workflow: Callable[[Context], object],
        input: None = None,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
        serdes: Serdes[V],
    ) -> ChildHandle[V]: ...

    @overload
    def start_child(
        self,
        workflow: str,
        input: Any = None,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
        serdes: Serdes[V],
    ) -> ChildHandle[V]: ...

    @overload
    def start_child(
        self,
        workflow: str,
        input: Any = None,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
    ) -> ChildHandle[Any]: ...

    def start_child(
        self,
        workflow: str | Callable[..., Any],
        input: Any = None,
        *,
        id: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
        serdes: Serdes[Any] | None = None,
    ) -> ChildHandle[Any]:
        """Start a child run (see ``run_child``) without waiting: ``handle.result()``
        waits for it later, and never calling it is fire and forget: the child runs to its
        end even after this run succeeds or fails. Canceling this run cancels it, awaited
        or not, while it runs. With ``if_running="attach"`` a run already running under
        ``id`` is taken instead ("start it unless it is running"): the handle names it.
        ``serdes``: the codec that decodes the child's result (see ``run_child``)."""
        from durable.engine.children import start_child

        return start_child(self._exec, workflow, input, id, if_running, serdes, reuse)

    def changed(self, patch_id: str) -> bool:
        """Ship a small fix to runs already in flight, without a new version.

        ``if ctx.changed("fix-tax-rounding"): <new code> else: <old code>``: False for a
        run that ran the old code past this point (its ledger recorded something else
        here), True for every other run, which records that it took the new code (a
        marker position). Once no run can return False any more, delete the ``else``
        branch but keep the call, or register a new version. ``durable check-deploy``
        replays runs through it like any other call.
        """
        return self._exec.changed(patch_id)

    def now(self) -> datetime:
        """The current time, recorded on first execution and replayed after."""
        value: datetime = self._exec.record_value("now", "now")
        return value

    def uuid(self) -> _uuid.UUID:
        """A random UUID, recorded on first execution and replayed after."""
        value: _uuid.UUID = self._exec.record_value("uuid", "uuid")
        return value

    def random(self) -> float:
        """A float in [0, 1), recorded on first execution and replayed after."""
        value: float = self._exec.record_value("random", "random")
        return value

    def compensate(self) -> None:
        """Run the compensations registered so far, newest first, and forget them.

        For workflows that catch a failure and roll back without failing. Raises
        ``StepFailed`` if a compensation fails for good (the rest are not run). Like
        every step, each compensation runs at least once and may be repeated after a
        crash: it must be safe to run twice.
        """
        from durable.engine.sagas import run_compensations

        failure = run_compensations(self._exec, mark_status=False)
        if failure is not None:
            raise failure

    def continue_as_new(self, input: Any = None) -> None:
        """End this run and start a fresh one (new ledger) of the same workflow with ``input``."""
        self._exec.continue_as_new(input)

    def set_progress(self, done: int, total: int | None = None, note: str | None = None) -> None:
        """Report how far the run has got: ``done`` of ``total`` (non-negative ints, ``done``
        at most ``total``; ``total`` may be unknown) and a short ``note`` (at most 200
        characters). Shown by ``durable runs``, ``durable show``, the console and the API's
        run view (``progress: {done, total, note, at}``).

        Not a durable operation: it takes no position and writes nothing by itself. The
        value set last rides in the next write the run makes anyway (a lease renewal, a
        checkpoint, its suspension, its end), so it is cheap to call per item. Replayed
        code that set a value before is not taken again (the value stored stays); a value
        set just before a worker crashes, ahead of any write, is lost. A run continued as
        new starts with no progress. The note is stored: a token in it is redacted, and it
        is not a place for a secret. ``InvalidInput`` names a wrong field.
        """
        self._exec.set_progress(done, total, note)


def _branch_label(branch: Callable[..., Any], index: int) -> str:
    """A parallel branch's default name: its function's, or "branch N" for a lambda."""
    label = getattr(branch, "__name__", "") or ""
    return label if label and label != "<lambda>" else f"branch {index}"


def _item_labels(
    values: list[Any], item_name: Callable[[Any, int], str] | None
) -> list[str] | None:
    """A map's branch names: ``item_name(item, index)``; without it none is recorded (the
    console and ``durable show`` say "item N"): an item's own text may be personal data,
    and a thousand names would weigh on the map's record for nothing."""
    if item_name is None:
        return None
    labels = []
    for i, value in enumerate(values):
        try:
            label = item_name(value, i)
        except Exception as e:
            raise InvalidInput(
                f"item_name raised {type(e).__name__} for item {i}: {e}", field="item_name"
            ) from e
        refuse_token(label, "item_name", f"the name item_name gave item {i}")
        labels.append(label)
    return labels


def active_context() -> Context | None:
    """The workflow context when called from workflow code (not inside a step body)."""
    ctx = _active_context.get()
    return ctx if isinstance(ctx, Context) else None
