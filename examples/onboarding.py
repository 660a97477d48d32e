"""Seed 002's onboarding: provision a workspace, welcome email, starter project, and a
follow-up nudge three days later, written as one plain function.

Every external call goes through ``current_step().effect`` so a crash between "email
sent" and "step recorded" cannot send a second email, however late the retry comes.
"""

from __future__ import annotations

import functools
from datetime import timedelta

from pydantic import BaseModel

from durable import App, Context, RetryPolicy, current_step
from examples.services import demo_pause, services

app = App()


class Signup(BaseModel):
    user_id: str
    email: str


class Workspace(BaseModel):
    id: str
    owner: str


@app.step(retry=RetryPolicy(max_attempts=5, initial_delay=timedelta(seconds=1)))
def provision_workspace(user_id: str) -> Workspace:
    services.maybe_fail()  # a flaky upstream, retried with backoff
    step = current_step()
    workspace_id = step.effect(
        "create-workspace",
        lambda key: services.perform("workspace", key, f"ws-{user_id}"),
        reconcile=services.lookup,
    )
    step.record_ref("workspace", workspace_id)
    return Workspace(id=workspace_id, owner=user_id)


@app.step
def send_welcome_email(user_id: str, email: str) -> str:
    demo_pause()  # the demo kills the worker here, before the email goes out
    return str(
        current_step().effect(
            "welcome-email",
            lambda key: services.perform("email", key, f"msg-welcome-{user_id}"),
            reconcile=services.lookup,
        )
    )


@app.step
def create_starter_project(workspace_id: str) -> str:
    return str(
        current_step().effect(
            "starter-project",
            lambda key: services.perform("project", key, f"proj-{workspace_id}"),
            reconcile=services.lookup,
        )
    )


@app.step
def send_follow_up_nudge(user_id: str) -> str:
    return str(
        current_step().effect(
            "nudge-email",
            lambda key: services.perform("email", key, f"msg-nudge-{user_id}"),
            reconcile=services.lookup,
        )
    )


@app.workflow(name="onboarding", version=1)
def onboarding(ctx: Context, signup: Signup) -> dict[str, str]:
    workspace = provision_workspace(signup.user_id)
    welcome = send_welcome_email(signup.user_id, signup.email)
    project = create_starter_project(workspace.id)
    ctx.sleep(timedelta(days=3))  # a durable timer, not a cron job
    nudge = send_follow_up_nudge(signup.user_id)
    return {"workspace": workspace.id, "project": project, "welcome": welcome, "nudge": nudge}


def _workspace_and_project(ctx: Context, user_id: str) -> dict[str, str]:
    """One branch: the project needs the workspace, so these two stay in order."""
    workspace = provision_workspace(user_id)
    return {"workspace": workspace.id, "project": create_starter_project(workspace.id)}


def _welcome(ctx: Context, signup: Signup) -> str:
    return send_welcome_email(signup.user_id, signup.email)


@app.workflow(name="onboarding-parallel", version=1)
def onboarding_parallel(ctx: Context, signup: Signup) -> dict[str, str]:
    """The same onboarding with the calls that do not wait for each other made at once:
    the welcome email goes out while the workspace and its project are set up. Each
    branch's steps are recorded under the parallel's position; a crash in the middle
    replays what finished and runs only what did not."""
    setup, welcome = ctx.parallel(
        functools.partial(_workspace_and_project, user_id=signup.user_id),
        functools.partial(_welcome, signup=signup),
        name="first-day",
    ).values()
    ctx.sleep(timedelta(days=3))
    nudge = send_follow_up_nudge(signup.user_id)
    return {**setup, "welcome": welcome, "nudge": nudge}
