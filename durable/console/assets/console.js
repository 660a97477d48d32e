// The durable console: a client of the management API, served beside it (durable dev) or
// by `durable console --endpoint URL` (a local proxy that signs each call with SigV4).
// No framework and no build step: DOM nodes are built with h(), never from HTML text, so
// a value from a run (an input, an error message) can never become markup.
"use strict";

const TOKEN = document.querySelector('meta[name="durable-token"]').content;
const REFRESH_MS = 1500;
const TERMINAL = new Set(["SUCCEEDED", "FAILED", "CANCELED"]);
const SINCE = { "1h": 3600e3, "24h": 86400e3, "7d": 7 * 86400e3, all: Infinity };
let timer = null;
let workflows = null;

function h(tag, attrs, ...children) {
  const node = document.createElementNS(
    tag === "svg" || attrs?.svg ? "http://www.w3.org/2000/svg" : "http://www.w3.org/1999/xhtml",
    tag,
  );
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "svg" || value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
const s = (tag, attrs, ...children) => h(tag, { ...attrs, svg: true }, ...children);

async function api(method, path, body, extra) {
  const response = await fetch(path, {
    method,
    headers: { "Content-Type": "application/json", "X-Durable-Console": TOKEN, ...(extra || {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const error = data?.error || {};
    const field = error.field ? ` (field ${error.field})` : "";
    throw new Error(`${error.message || `HTTP ${response.status}`}${field}`);
  }
  return data;
}

// --- small formatting ------------------------------------------------------------------

function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return d.toISOString().replace("T", " ").slice(0, 19);
}
function span(ms) {
  if (!isFinite(ms)) return "";
  const a = Math.abs(ms);
  if (a < 1000) return `${Math.round(ms)} ms`;
  if (a < 60e3) return `${(ms / 1000).toFixed(1)} s`;
  if (a < 3600e3) return `${(ms / 60e3).toFixed(1)} min`;
  if (a < 86400e3) return `${(ms / 3600e3).toFixed(1)} h`;
  return `${(ms / 86400e3).toFixed(1)} d`;
}
// An IAM caller as people say it: "user/ann" or "assumed-role/Approver/ann", not the ARN.
function who(arn) {
  if (!arn) return "";
  // A schedule's runs carry "schedule:<name>" (durable.engine.schedules.fired_by).
  if (arn.startsWith("schedule:")) return `schedule ${arn.slice("schedule:".length)}`;
  const m = /^arn:aws[^:]*:(?:iam|sts)::\d+:(.+)$/.exec(arn);
  return m ? m[1] : arn;
}
function badge(status) {
  return h("span", { class: `badge ${status.toLowerCase()}` }, status);
}
function json(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

// Every call names the run's workflow where the API has a route for it
// (/workflows/{name}/runs/...): an IAM policy scoped to one workflow (the template's
// approver) then allows the page what it allows that person, and nothing else.
const enc = encodeURIComponent;
function runPath(run) {
  return `/workflows/${enc(run.workflow)}/runs/${enc(run.run_id)}`;
}
function runLink(run) {
  return `#${runPath(run)}`;
}
// A retried child: its parent's record of the failure is final, so say how the parent
// takes the new outcome (what `durable retry` says; docs/operations.md).
function parentView(run) {
  if (!run.parent || !(run.operations || []).some((op) => op.action === "retry")) return null;
  const at = run.parent.lastIndexOf("@");
  const [id, position] = [run.parent.slice(0, at), run.parent.slice(at + 1)];
  return h("p", { class: "muted", "data-parent-view": "1" },
    `Retried child: its parent ${id} recorded its earlier failure at position ${position}, and that record is final. `,
    `If the parent failed there, retry it (durable retry ${id}): it takes this run's outcome without running it again. `,
    `If it went on, fork it from step ${Number(position.split(".")[0])}: a keyed call takes this run's outcome, an unkeyed one starts a new child.`);
}

// A child run's parent ("<run id>@<position>"): a link to it (its workflow is not known
// here, so the plain run route), and the position that started this run.
function parentLink(parent) {
  const at = parent.lastIndexOf("@");
  const id = parent.slice(0, at);
  return [" · child of ", h("a", { href: `#/runs/${enc(id)}`, "data-parent": id }, id), ` at ${parent.slice(at + 1)}`];
}

// --- routing ---------------------------------------------------------------------------

// Each route() starts a new page; a refresh of an earlier one that answers late must not
// draw over it.
let generation = 0;

function route() {
  clearTimeout(timer);
  generation += 1;
  show(h("p", { class: "muted" }, "Loading…"));
  const [path, query] = location.hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  const scoped = /^\/workflows\/([^/]+)\/runs\/([^/]+)$/.exec(path || "/");
  if (scoped) return runPage(decodeURIComponent(scoped[2]), decodeURIComponent(scoped[1]));
  const bare = /^\/runs\/([^/]+)$/.exec(path || "/");
  if (bare) return runPage(decodeURIComponent(bare[1]), null);
  if (path === "/schedules") return schedulesPage();
  return runsPage(params);
}
window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => loadClock().finally(route));

// durable dev runs the ledger on a virtual clock (--time-scale N: N virtual seconds per real
// one); its status route says how that clock relates to this browser's. A deployed stack's
// console proxy has no such route: time is real. Durations on the page are then said in
// both clocks, and "now" (a waiting bar's end, "wakes in") is the ledger's.
const CLOCK = { scale: 1, virtual: 0, real: 0 };
async function loadClock() {
  try {
    const response = await fetch("/_local/status");
    if (!response.ok) return;
    const status = await response.json();
    if (!(status.time_scale > 0) || !status.clock) return;
    Object.assign(CLOCK, { scale: status.time_scale, virtual: Date.parse(status.clock), real: Date.now() });
  } catch (e) {
    // Not durable dev: real time.
  }
}
function nowMs() {
  return CLOCK.scale === 1 ? Date.now() : CLOCK.virtual + (Date.now() - CLOCK.real) * CLOCK.scale;
}
// A span of the ledger's clock as a person lives it: "40 ms real, 2.4 min virtual".
function lived(ms) {
  if (CLOCK.scale === 1) return span(ms);
  const real = span(ms / CLOCK.scale), virtual = span(ms);
  return real === virtual ? virtual : `${real} real, ${virtual} virtual`;
}

function live(refresh) {
  // Refresh while the page is shown and no confirmation is open (it would lose its input).
  clearTimeout(timer);
  if (!current(refresh)) return;
  document.getElementById("live").classList.toggle("on", Boolean(refresh));
  if (!refresh) return;
  timer = setTimeout(async () => {
    if (!document.getElementById("confirm").open) await refresh();
    else live(refresh);
  }, REFRESH_MS);
}

// A page's refresh function, tagged with the generation it belongs to.
function page(refresh) {
  refresh.generation = generation;
  return refresh;
}
function current(refresh) {
  return !refresh || refresh.generation === generation;
}

function show(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes.flat(Infinity).filter((node) => node !== null && node !== undefined));
}
function problem(error) {
  return h("p", { class: "error-text", role: "alert" }, String(error.message || error));
}

// --- the runs list ---------------------------------------------------------------------

async function runsPage(params) {
  const filters = {
    workflow: params.get("workflow") || "",
    status: params.get("status") || "",
    needs_attention: params.get("needs_attention") === "1",
    since: params.get("since") || "all",
  };
  const hash = (changes) => {
    const next = { ...filters, ...changes };
    const q = new URLSearchParams();
    if (next.workflow) q.set("workflow", next.workflow);
    if (next.status) q.set("status", next.status);
    if (next.needs_attention) q.set("needs_attention", "1");
    if (next.since !== "all") q.set("since", next.since);
    return `#/?${q}`;
  };
  const refresh = page(async () => {
    let runs;
    try {
      if (workflows === null) {
        // A person allowed one workflow's runs only may not list the workflows.
        workflows = await api("GET", "/workflows").then((r) => r.workflows, () => []);
      }
      if (!workflows.length && !filters.workflow) {
        return current(refresh) ? show(askWorkflow(hash)) : undefined;
      }
      runs = await listRuns(filters);
    } catch (error) {
      if (current(refresh)) show(filterBar(filters, hash), problem(error));
      return live(refresh);
    }
    if (!current(refresh)) return;
    const cutoff = nowMs() - SINCE[filters.since];
    runs = runs.filter((run) => Date.parse(run.created_at) >= cutoff);
    show(filterBar(filters, hash), runsTable(runs));
    live(refresh);
  });
  await refresh();
}

async function listRuns(filters) {
  const q = (extra) => {
    const p = new URLSearchParams({ limit: "100", ...extra });
    if (filters.status) p.set("status", filters.status);
    return p;
  };
  if (filters.needs_attention && !filters.workflow) {
    return (await api("GET", `/runs?${q({ needs_attention: "true" })}`)).runs;
  }
  // Runs are listed per workflow (an index, never a scan): all of them is one list each.
  const extra = filters.needs_attention ? { needs_attention: "true" } : {};
  const names = filters.workflow ? [filters.workflow] : workflows.map((w) => w.name);
  const pages = await Promise.all(
    names.map((name) => api("GET", `/workflows/${enc(name)}/runs?${q(extra)}`)),
  );
  return pages
    .flatMap((page) => page.runs)
    .sort((a, b) => (a.updated_at < b.updated_at ? 1 : -1));
}

function askWorkflow(hash) {
  const input = h("input", { name: "workflow", placeholder: "expense-approval" });
  return h(
    "form",
    { class: "filters", onsubmit: (e) => { e.preventDefault(); location.hash = hash({ workflow: input.value.trim() }); } },
    h("label", {}, "Your access does not list the workflows; which one's runs?", input),
    h("button", { type: "submit" }, "Show"),
  );
}

function filterBar(filters, hash) {
  const select = (label, name, options, value) =>
    h(
      "label",
      {},
      label,
      h(
        "select",
        { name, onchange: (e) => (location.hash = hash({ [name]: e.target.value })) },
        options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)),
      ),
    );
  const statuses = ["PENDING", "RUNNING", "WAITING", "COMPENSATING", "SUCCEEDED", "FAILED", "CANCELED"];
  return h(
    "form",
    { class: "filters", onsubmit: (e) => e.preventDefault() },
    select("Workflow", "workflow", workflowOptions(filters.workflow), filters.workflow),
    select("Status", "status", [["", "any"], ...statuses.map((x) => [x, x.toLowerCase()])], filters.status),
    select("Started", "since", [["all", "any time"], ["1h", "last hour"], ["24h", "last day"], ["7d", "last 7 days"]], filters.since),
    h(
      "label",
      {},
      h("input", {
        type: "checkbox",
        name: "needs_attention",
        checked: filters.needs_attention,
        onchange: (e) => (location.hash = hash({ needs_attention: e.target.checked })),
      }),
      h("span", { title: "failed, parked for a person by the engine, or waiting on a person's answer" }, "needs attention"),
    ),
  );
}

function workflowOptions(current) {
  const names = workflows.map((w) => w.name);
  if (current && !names.includes(current)) names.push(current);
  return [...(workflows.length ? [["", "all"]] : []), ...names.map((n) => [n, n])];
}

function runsTable(runs) {
  if (!runs.length) return h("p", { class: "muted" }, "No runs match. Start one with `durable start`.");
  return h(
    "table",
    { class: "runs" },
    h("thead", {}, h("tr", {}, ["Run", "Workflow", "Status", "Started", "Updated", "By", "Problem"].map((t) => h("th", {}, t)))),
    h(
      "tbody",
      {},
      runs.map((run) =>
        h(
          "tr",
          { "data-run": run.run_id },
          h("td", {}, h("a", { href: runLink(run) }, run.run_id)),
          h("td", {}, `${run.workflow} v${run.version}`),
          h("td", {}, badge(run.status), run.needs_attention ? h("span", { class: "flag" }, "needs attention") : null,
            waitsFor(run) ? h("span", { class: "flag", "data-waits": "1" }, waitsFor(run)) : null),
          h("td", {}, when(run.created_at)),
          h("td", {}, when(run.updated_at)),
          h("td", { title: run.requested_by || "" }, who(run.requested_by)),
          h("td", { class: "error-text" }, run.error ? `${run.error.type}: ${run.error.message}` : ""),
        ),
      ),
    ),
  );
}

// --- schedules -------------------------------------------------------------------------

async function schedulesPage() {
  const refresh = page(async () => {
    let listed;
    try {
      listed = (await api("GET", "/schedules")).schedules;
    } catch (error) {
      if (current(refresh)) show(problem(error));
      return live(refresh);
    }
    if (!current(refresh)) return;
    show(h("h1", {}, "Schedules"), schedulesTable(listed, refresh));
    live(refresh);
  });
  await refresh();
}

function schedulesTable(listed, refresh) {
  if (!listed.length) {
    return h("p", { class: "muted" }, "No schedules: declare one with @app.workflow(schedule=...) or app.schedule(...).");
  }
  const act = (s, action, label, text) =>
    button(label, action === "run" ? "approve" : "retry", {
      title: `${label}: ${s.name}`,
      text,
      fields: action === "run" ? [["key", "Idempotency key (blank: a new run)", ""]] : [],
      send: async (v) => {
        const path = `/schedules/${enc(s.name)}/${action}`;
        const headers = v.key ? { "Idempotency-Key": v.key } : undefined;
        const answer = await api("POST", path, {}, headers);
        if (answer.run_id) location.hash = `#/workflows/${enc(s.workflow)}/runs/${enc(answer.run_id)}`;
      },
    }, refresh);
  return h(
    "table",
    { class: "schedules" },
    h("thead", {}, h("tr", {}, ["Schedule", "Workflow", "When", "State", "Next fire", "Overlap", "Last fire", ""].map((t) => h("th", {}, t)))),
    h("tbody", {}, listed.map((s) =>
      h("tr", { "data-schedule": s.name },
        h("td", {}, s.name),
        h("td", {}, h("a", { href: `#/?workflow=${enc(s.workflow)}` }, s.workflow)),
        h("td", {}, h("code", {}, s.expression), s.timezone === "UTC" ? "" : ` ${s.timezone}`),
        h("td", {}, h("span", { class: `badge ${s.state === "enabled" ? "succeeded" : "waiting"}` }, s.state)),
        h("td", {}, s.next_fire ? when(s.next_fire) : ""),
        h("td", {}, s.overlap),
        h("td", { class: "fires" }, recentFires(s)),
        h("td", {},
          s.state === "enabled" ? act(s, "pause", "Pause", "No run starts on its clock until it is resumed; deploys keep it paused.") : null,
          s.state === "paused" ? act(s, "resume", "Resume", "It fires again at its next time.") : null,
          act(s, "run", "Run now", "Starts its workflow now, outside the clock."),
        ),
      ))),
  );
}

// What became of a fire (GET /schedules' recent_fires), in words; its badge's colour is
// the stylesheet's (.badge.fire-<result>), apart from the run statuses' classes.
const FIRE_VERDICT = {
  started: "started",
  duplicate: "repeat",
  skipped_overlap: "skipped (overlap)",
  skipped_missed: "missed",
};

function fireVerdict(fire) {
  const words = FIRE_VERDICT[fire.result] || fire.result;
  return h("span", { class: `badge fire-${fire.result}`, "data-verdict": fire.result, title: fire.detail || "" }, words);
}

// The schedules whose recent fires a person opened: kept open across the page's refreshes.
const firesOpen = new Set();

// The last fire in the row; the recent ones (newest first) open under it.
function recentFires(s) {
  const fires = s.recent_fires || [];
  if (!fires.length) return h("span", { class: "muted" }, "none yet");
  const at = (f) => (f.manual ? "run now" : when(f.scheduled_time));
  const run = (f) => (f.run_id ? h("a", { href: `#/workflows/${enc(s.workflow)}/runs/${enc(f.run_id)}` }, f.run_id) : "");
  const remember = (event) => (event.target.open ? firesOpen.add(s.name) : firesOpen.delete(s.name));
  return h("details", { open: firesOpen.has(s.name), ontoggle: remember },
    h("summary", {}, fireVerdict(fires[0]), " ", at(fires[0])),
    h("table", { class: "recent-fires" },
      h("thead", {}, h("tr", {}, ["Fire", "Verdict", "Run", "Detail"].map((t) => h("th", {}, t)))),
      h("tbody", {}, fires.map((f) =>
        h("tr", { "data-fire": f.scheduled_time },
          h("td", {}, at(f)),
          h("td", {}, fireVerdict(f)),
          h("td", {}, run(f)),
          h("td", { class: "muted" }, f.detail || ""),
        ))),
    ),
  );
}

// --- a run -----------------------------------------------------------------------------

async function runPage(runId, workflow) {
  const path = workflow ? `/workflows/${enc(workflow)}/runs/${enc(runId)}` : `/runs/${enc(runId)}`;
  const refresh = page(async () => {
    let run;
    try {
      run = await api("GET", path);
    } catch (error) {
      if (current(refresh)) show(h("p", {}, h("a", { href: "#/" }, "← runs")), problem(error));
      return live(refresh);
    }
    if (!current(refresh)) return;
    show(...runView(run, refresh));
    live(TERMINAL.has(run.status) ? null : refresh);
  });
  await refresh();
}

// What a run waits for: its parked wait (a person's answer first), or, before it starts,
// its workflow's limit holding it back.
function waitsFor(run) {
  if (run.status === "WAITING" && run.waiting_for) return waitText(run.waiting_for);
  if (run.status !== "PENDING" && run.status !== "RUNNING") return "";
  if (run.queued_at) return run.place_in_line ? `in line for a slot (#${run.place_in_line})` : "in line for a slot";
  if (run.start_at && run.updated_at < run.start_at) return `starts ${when(run.start_at)} (rate limit)`;
  return "";
}

// "callback approval until 2026-12-07T08:38:57.000Z (+1 more)" as a person reads it:
// "approval “approval” until 2026-12-07 08:38 (+1 more)".
const WAIT_WORDS = { callback: "approval", signal: "signal", child: "child run", condition: "condition", retry: "retry of step", sleep: "sleep" };
function waitText(text) {
  const m = /^(\S+) (\S+)(?: until (\S+))?(.*)$/.exec(text);
  if (!m) return text;
  const [, kind, name, until, rest] = m;
  const what = kind === "sleep" && name === "sleep" ? "sleep" : `${WAIT_WORDS[kind] || kind} “${name}”`;
  return `${what}${until ? ` until ${when(until).slice(0, 16)}` : ""}${rest}`;
}

function runView(run, refresh) {
  const fault = run.error?.position;
  return [
    h("p", {}, h("a", { href: "#/" }, "← runs")),
    h(
      "section",
      { class: "run-head" },
      h("h1", {}, `${run.workflow} `, h("small", {}, `v${run.version}`), " ", badge(run.status)),
      h("p", { class: "muted" }, `run ${run.run_id} · started ${when(run.created_at)} · updated ${when(run.updated_at)}`,
        run.requested_by ? ` · started by ${who(run.requested_by)}` : "",
        run.continued_from ? ` · continues ${run.continued_from}` : "",
        run.parent ? parentLink(run.parent) : ""),
      parentView(run),
      waitsFor(run)
        ? h("p", { class: "waits", "data-waits": "1" }, `Waiting: ${waitsFor(run)}`,
            run.queued_at ? ` since ${when(run.queued_at)}` : "", run.gate ? h("span", { class: "muted" }, ` · gate ${run.gate}`) : null)
        : null,
    ),
    run.error
      ? h(
          "section",
          { class: "fault", role: "alert" },
          h("strong", {}, run.error.type), ": ", run.error.message,
          fault ? h("span", { class: "muted" }, ` (at step ${fault}${stepName(run, fault)})`) : null,
        )
      : null,
    actions(run, refresh),
    h("h2", {}, "Timeline"),
    timeline(run),
    h("h2", {}, "Steps"),
    stepsTable(run),
    h("div", { class: "io" },
      h("div", {}, h("h2", {}, "Input"), json(run.input)),
      h("div", {}, h("h2", {}, "Output"), run.output === null ? h("p", { class: "muted" }, TERMINAL.has(run.status) ? "none" : "none yet") : json(run.output)),
    ),
    run.signals.length ? [h("h2", {}, "Signals"), signalsTable(run)] : null,
    h("h2", {}, "What it cost"),
    costView(run),
    h("h2", {}, "Who acted on this run"),
    run.audit.length
      ? h("ul", { class: "audit" }, run.audit.map((entry) =>
          h("li", {}, `${when(entry.at)} `, h("strong", {}, entry.action), ` by ${who(entry.by)}`,
            entry.what ? ` — ${entry.what}` : "")))
      : h("p", { class: "muted" }, "No one has acted on this run."),
  ];
}

function usd(amount) {
  if (amount >= 1) return `$${amount.toFixed(2)}`;
  if (amount >= 0.01) return `$${amount.toFixed(4)}`;
  return `$${amount.toFixed(7)}`;
}

function costView(run) {
  if (!run.cost) return h("p", { class: "muted" }, "No usage recorded (a run started before usage was kept).");
  const u = run.usage || {};
  const n = (key) => Number(u[key] || 0);
  const items = [
    ["DynamoDB", `${n("wcu")} write units, ${n("rcu")} read units, ${n("ddb")} requests`],
    ["Lambda", `${n("inv")} invocations, ${n("ms").toLocaleString()} ms (${n("gbs")} GB-s)`],
    ["Scheduler", `${n("timers")} timers fired`],
    ["API", `${n("api")} requests`],
  ];
  return h(
    "div",
    { class: "cost" },
    h("p", {}, h("strong", { class: "usd" }, usd(run.cost.usd)),
      h("span", { class: "muted" }, ` at ${run.cost.prices_of} list prices; so far, an estimate`)),
    h("table", { class: "usage" }, h("tbody", {}, items.map(([what, text]) => h("tr", {}, h("th", {}, what), h("td", {}, text))))),
  );
}

function stepName(run, position) {
  const step = run.steps.find((x) => x.position === position);
  return step ? `, ${step.name}` : "";
}

// --- operator actions, each behind a confirmation ------------------------------------------

function actions(run, refresh) {
  const buttons = [];
  const path = runPath(run);
  const waiting = run.steps.filter((x) => x.kind === "callback" && x.status === "WAITING");
  for (const step of waiting) {
    const wait = `${path}/waits/${encodeURIComponent(step.name)}`;
    // Several callbacks of one name wait (map branches): each button answers its own,
    // by position, and says which.
    const twins = waiting.filter((x) => x.name === step.name).length > 1;
    const label = twins ? `${step.name} at ${step.position}` : step.name;
    const which = { position: step.position };
    buttons.push(
      button(`Approve ${label}`, "approve", {
        title: `Approve “${label}”`,
        // A typed callback refuses `true`: start from a value of its type's shape.
        // A typed callback refuses `true`: its shape is shown to fill in, never sent as it
        // is (its placeholders are not JSON, so an unfilled answer is refused here).
        text: step.result_type
          ? `The run goes on with this result, a ${step.result_type}, shaped like ${step.answer_example || "its fields"}.`
          : "The run goes on with this result.",
        fields: [["result", "Result (JSON)", step.result_type ? "" : "true", step.answer_example || ""]],
        send: (v) => api("POST", wait, { result: parseJson(v.result, "result"), ...which }),
      }, refresh),
      button(`Reject ${label}`, "reject", {
        title: `Reject “${label}”`,
        text: "The wait fails with this error; the workflow decides what follows.",
        fields: [["message", "Reason", ""]],
        send: (v) => api("POST", wait, { error: { type: "Rejected", message: v.message }, ...which }),
      }, refresh),
    );
  }
  const decisions = new Set(run.decisions);
  if (decisions.has("signal")) {
    buttons.push(button("Send signal", "signal", {
      title: "Send a signal", text: "Stored, then consumed by the next wait for its name.",
      fields: [["name", "Name", waitingSignal(run)], ["payload", "Payload (JSON)", "null"]],
      send: (v) => api("POST", `${path}/signals/${encodeURIComponent(v.name)}`, parseJson(v.payload, "payload")),
    }, refresh));
  }
  for (const [decision, compensate] of [["cancel", false], ["cancel --compensate", true]]) {
    if (!decisions.has(decision)) continue;
    buttons.push(button(compensate ? "Cancel and compensate" : "Cancel", "danger", {
      title: compensate ? "Cancel the run and undo its steps" : "Cancel the run",
      text: compensate ? "Compensations of finished steps run, newest first." : "The run stops at its next step; nothing is undone.",
      fields: [["reason", "Reason (kept in the audit log)", ""]],
      send: (v) => api("POST", `${path}/cancel`, { reason: v.reason, compensate }),
    }, refresh));
  }
  const retryUpgrade = run.decisions.find((d) => d.startsWith("retry --upgrade-to"));
  if (decisions.has("retry") || retryUpgrade) {
    buttons.push(button("Retry", "retry", {
      title: "Retry from the failed step", text: "Earlier results are kept; the failed step runs again with a fresh retry budget."
        + (run.parent ? " This run is a child: its parent keeps the failure it recorded until the parent is retried too." : ""),
      fields: [["upgrade_to", "Upgrade to version (blank: keep v" + run.version + ")", ""]],
      send: (v) => api("POST", `${path}/retry`, v.upgrade_to ? { upgrade_to: Number(v.upgrade_to) } : {}),
    }, refresh));
  }
  if (decisions.has("fork")) {
    buttons.push(button("Fork", "fork", {
      title: "Fork a new run", text: "A new run starts from a copy of this one's ledger up to a step.",
      fields: [["from_step", "Re-execute from step", run.error?.position || "1"]],
      send: async (v) => {
        const forked = await api("POST", `${path}/fork`, { from_step: v.from_step });
        location.hash = runLink(forked);
      },
    }, refresh));
  }
  return buttons.length ? h("section", { class: "actions" }, buttons) : null;
}

function waitingSignal(run) {
  const step = run.steps.find((x) => x.kind === "signal" && x.status === "WAITING");
  return step ? step.name : "";
}

function parseJson(text, field) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${field} is not valid JSON (${error.message}); quote text, e.g. "yes"`);
  }
}

function button(label, kind, spec, refresh) {
  return h("button", { class: kind, "data-action": kind, onclick: () => confirmThen(spec, refresh) }, label);
}

function confirmThen(spec, refresh) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = spec.title;
  document.getElementById("confirm-text").textContent = spec.text;
  document.getElementById("confirm-error").textContent = "";
  const inputs = {};
  document.getElementById("confirm-fields").replaceChildren(
    ...spec.fields.map(([name, label, value, placeholder]) => {
      inputs[name] = h("input", { name, value, placeholder: placeholder || "" });
      return h("label", {}, label, inputs[name]);
    }),
  );
  const yes = document.getElementById("confirm-yes");
  yes.onclick = async (event) => {
    event.preventDefault();
    const values = Object.fromEntries(Object.entries(inputs).map(([k, input]) => [k, input.value]));
    yes.disabled = true;
    try {
      await spec.send(values);
      dialog.close();
      await refresh();
    } catch (error) {
      document.getElementById("confirm-error").textContent = error.message;
    } finally {
      yes.disabled = false;
    }
  };
  dialog.showModal();
}

// --- the timeline: one lane per ledger record, time across -------------------------------

// Where each record's bar starts and ends. Attempts carry their own times; a wait, a sleep
// or a value has only its last write, so it starts where the record before it ended (a
// workflow body is sequential between its waits).
function lanes(run, now) {
  let cursor = Date.parse(run.created_at);
  return run.steps.map((step) => {
    const segments = [];
    const updated = Date.parse(step.updated_at);
    if (step.attempts.length) {
      let previous = null;
      const last = step.attempts[step.attempts.length - 1];
      for (const a of step.attempts) {
        const start = Date.parse(a.started_at);
        const open = !a.finished_at;
        const end = open ? (step.status === "RUNNING" ? now : start) : Date.parse(a.finished_at);
        if (previous !== null && start > previous) {
          segments.push({ start: previous, end: start, cls: "backoff", tip: `backoff ${lived(start - previous)} before attempt ${a.n}` });
        }
        // The last attempt of a step that failed for good ended it, whatever its error's class.
        const final = a === last && step.status === "TERMINAL_FAILED";
        const cls = final || a.error_class === "terminal" ? "failed" : a.error_class ? "retried" : open ? "running" : "ok";
        const tip = `attempt ${a.n}: ${lived(end - start)}${a.error ? ` — ${a.error}` : ""}`;
        segments.push({ start, end, cls, tip });
        previous = end;
      }
      cursor = Math.max(cursor, previous);
    } else {
      const waiting = step.status === "WAITING" || step.status === "PENDING";
      const start = Math.min(cursor, updated);
      let end = waiting ? now : updated;
      const cls = step.status === "TIMED_OUT" ? "failed" : step.status === "TERMINAL_FAILED" ? "failed"
        : waiting ? "waiting" : ["step", "value", "batch"].includes(step.kind) ? "ok" : "waited";
      const due = step.wake_at || step.expires_at;
      const tip = `${step.kind} ${step.status.toLowerCase()}${due ? `, due ${when(due)}` : ""}: ${lived(end - start)}`;
      segments.push({ start, end, cls, tip });
      cursor = Math.max(cursor, end);
    }
    return { step, segments, due: step.status === "WAITING" ? Date.parse(step.wake_at || step.expires_at || "") : NaN };
  });
}

// Each branch's name by its position ("0004.0002"), from the decided batches' records.
function branchNames(run) {
  const names = {};
  for (const step of run.steps) {
    if (step.kind !== "batch" || !step.output || !Array.isArray(step.output.items)) continue;
    step.output.items.forEach((item, i) => {
      if (item.name) names[`${step.position}.${String(i + 1).padStart(4, "0")}`] = item.name;
    });
  }
  return names;
}

// " [name]" of the innermost named branch a position is in.
function inBranch(position, names) {
  const parts = position.split(".");
  for (let depth = parts.length - 1; depth > 1; depth--) {
    const label = names[parts.slice(0, depth).join(".")];
    if (label) return ` [${label}]`;
  }
  return "";
}

function timeline(run) {
  const now = nowMs();
  const named = branchNames(run);
  const rows = lanes(run, now);
  if (!rows.length) return h("p", { class: "muted" }, "Nothing recorded yet.");
  const t0 = Date.parse(run.created_at);
  const ends = rows.flatMap((r) => r.segments.map((x) => x.end));
  const t1 = Math.max(t0 + 1, ...ends, TERMINAL.has(run.status) ? Date.parse(run.updated_at) : now);
  const label = 190, width = 760, lane = 22, top = 24;
  const x = (t) => label + ((t - t0) / (t1 - t0)) * (width - label - 10);
  const height = top + rows.length * lane + 6;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => t0 + f * (t1 - t0));
  const fault = run.error?.position;
  return s(
    "svg",
    { class: "timeline", viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", "aria-label": `timeline of run ${run.run_id}` },
    ticks.map((t, i) => [
      s("line", { x1: x(t), x2: x(t), y1: 16, y2: height, class: "tick" }),
      s("text", { x: x(t), y: 12, class: "tick-label", "text-anchor": i === ticks.length - 1 ? "end" : "middle" },
        i === ticks.length - 1 ? `+${lived(t - t0)}` : `+${span(t - t0)}`),
    ]),
    // Under durable dev's time scale the axis is the ledger's virtual time: say so.
    CLOCK.scale === 1 ? null : s("text", { x: 4, y: 12, class: "tick-label axis-clock" }, `virtual time ×${CLOCK.scale}`),
    rows.map((row, i) => {
      const y = top + i * lane;
      // 0004.0002.0001: branch 2 of the batch at 0004, its first call (two levels down).
      const depth = (row.step.position.split(".").length - 1) / 2;
      return s(
        "g",
        { class: `lane${row.step.position === fault ? " at-fault" : ""}`, "data-position": row.step.position, "data-status": row.step.status },
        s("text", { x: 4 + depth * 10, y: y + 14, class: "lane-label" }, `${row.step.position} ${row.step.name}${inBranch(row.step.position, named)}`),
        row.segments.map((seg) =>
          s("rect", { x: x(seg.start), y: y + 4, width: Math.max(2, x(seg.end) - x(seg.start)), height: lane - 8, rx: 3, class: `bar ${seg.cls}` },
            s("title", {}, `${row.step.name}: ${seg.tip}`)),
        ),
        isFinite(row.due) && row.due <= t1
          ? s("line", { x1: x(row.due), x2: x(row.due), y1: y + 2, y2: y + lane - 2, class: "due" }, s("title", {}, `due ${when(new Date(row.due).toISOString())}`))
          : null,
      );
    }),
  );
}

// --- tables ----------------------------------------------------------------------------------

function stepsTable(run) {
  if (!run.steps.length) return h("p", { class: "muted" }, "No steps yet.");
  const named = branchNames(run);
  return h(
    "table",
    { class: "steps" },
    h("thead", {}, h("tr", {}, ["Position", "Name", "Kind", "Status", "Attempts", "Result or error"].map((t) => h("th", {}, t)))),
    h("tbody", {}, run.steps.map((step) =>
      h("tr", { class: step.position === run.error?.position ? "at-fault" : "" },
        h("td", {}, step.position),
        h("td", {}, step.name, inBranch(step.position, named) ? h("span", { class: "muted", "data-branch": "1" }, inBranch(step.position, named)) : null),
        h("td", {}, step.kind, step.child ? [" ", h("a", { href: runLink({ workflow: step.name, run_id: step.child }), "data-child": step.child }, "open child")] : null),
        h("td", {}, badge(step.status), step.completed_by ? h("span", { class: "muted" }, ` by ${who(step.completed_by)}`) : null),
        h("td", {}, step.attempts.length || ""),
        h("td", {}, step.error_summary
          ? h("span", { class: "error-text" }, step.error_summary)
          : step.status === "WAITING" ? h("span", { class: "muted" }, dueText(step))
          : step.kind === "batch" ? batchText(step.output)
          : step.output === null ? "" : h("code", {}, JSON.stringify(step.output))),
      ))),
  );
}

// A parallel's or map's decision: "ok (all): 2 succeeded", each branch's outcome by count.
function batchText(decision) {
  if (!decision || !Array.isArray(decision.items)) return "";
  const counts = {};
  for (const item of decision.items) counts[item.s] = (counts[item.s] || 0) + 1;
  const parts = ["succeeded", "failed", "canceled"].filter((k) => counts[k]).map((k) => `${counts[k]} ${k}`);
  const failed = decision.items.filter((item) => item.s === "failed" && item.name).map((item) => item.name);
  const named = failed.length ? `; failed: ${failed.slice(0, 3).join(", ")}${failed.length > 3 ? " …" : ""}` : "";
  return `${decision.ok ? "ok" : "failed"} (${decision.rule}): ${parts.join(", ") || "no branches"}${named}`;
}

function dueText(step) {
  if (step.wake_at) return `wakes ${when(step.wake_at)} (in ${lived(Date.parse(step.wake_at) - nowMs())})`;
  if (step.expires_at) return `expires ${when(step.expires_at)}`;
  return step.kind === "callback" ? "waiting for an answer" : `waiting for ${step.kind} ${step.name}`;
}

function signalsTable(run) {
  return h(
    "table",
    { class: "signals" },
    h("thead", {}, h("tr", {}, ["Name", "Received", "Payload", "Consumed by", "Sent by"].map((t) => h("th", {}, t)))),
    h("tbody", {}, run.signals.map((x) =>
      h("tr", {}, h("td", {}, x.name), h("td", {}, when(x.received_at)), h("td", {}, h("code", {}, JSON.stringify(x.payload))),
        h("td", {}, x.consumed_by || "not yet"), h("td", {}, who(x.sent_by))))),
  );
}
