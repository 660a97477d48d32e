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

function live(refresh, every = REFRESH_MS) {
  // Refresh while the page is shown, no confirmation is open and no answer is being typed
  // (either would lose its input, or the caret).
  clearTimeout(timer);
  if (!current(refresh)) return;
  document.getElementById("live").classList.toggle("on", Boolean(refresh));
  if (!refresh) return;
  timer = setTimeout(async () => {
    if (!document.getElementById("confirm").open && !typing()) await refresh();
    else live(refresh, every);
  }, every);
}
function typing() {
  const focused = document.activeElement;
  return Boolean(focused && focused.tagName === "TEXTAREA" && focused.closest("section.pending"));
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
            waitsFor(run) ? h("span", { class: "flag", "data-waits": "1" }, waitsFor(run)) : null,
            progressBar(run.progress)),
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
    // An answer began to be typed while this one was on its way: draw it later.
    if (typing()) return live(refresh, refreshEvery(run));
    drawRun(run, refresh);
    live(TERMINAL.has(run.status) ? null : refresh, refreshEvery(run));
  });
  await refresh();
}

// A run's answer is about half a kilobyte a record (0.5 MB for a map of 1,000 branches):
// a large run is asked for less often, at most every 10 s.
function refreshEvery(run) {
  return Math.min(10e3, REFRESH_MS * Math.max(1, run.steps.length / 250));
}

// The run page as last drawn: opening a group or a branch, or a new window width, draws
// it again from the same answer, without asking the API.
let drawn = null;
function drawRun(run, refresh) {
  const started = performance.now();
  show(...runView(run, refresh));
  drawn = { run, refresh };
  // How long building the page took, for the browser's performance tools (and tests).
  performance.measure("durable:run-page", { start: started, end: performance.now() });
}
function redraw() {
  if (drawn && current(drawn.refresh)) drawRun(drawn.run, drawn.refresh);
}
let resizing = null;
window.addEventListener("resize", () => {
  clearTimeout(resizing);
  // Not under a person typing an answer: the next refresh draws the new width.
  resizing = setTimeout(() => typing() || redraw(), 150);
});

// What a run waits for: its parked wait (a person's answer first), or, before it starts,
// its workflow's limit holding it back.
function waitsFor(run) {
  if (run.status === "WAITING" && run.waiting_for) return waitText(run.waiting_for);
  if (run.status !== "PENDING" && run.status !== "RUNNING") return "";
  if (run.queued_at) return run.place_in_line ? `in line for a slot (#${run.place_in_line})` : "in line for a slot";
  if (run.start_at && run.updated_at < run.start_at) return `starts ${when(run.start_at)} (rate limit)`;
  return "";
}

// What the run last reported with ctx.set_progress ({done, total, note, at}): a bar when it
// said how many, the count alone when not; with ``full`` (the run page) its note and when
// it was set. None for a run that reported nothing.
function progressBar(progress, full = false) {
  if (!progress) return null;
  const { done, total, note, at } = progress;
  const count = total === null || total === undefined ? `${done} done` : `${done}/${total}`;
  const percent = total ? ` (${Math.floor((done * 100) / total)}%)` : "";
  const bar = total ? h("progress", { value: String(done), max: String(total) }) : null;
  const words = full && note ? ` · ${note}` : "";
  const set = full && at ? h("span", { class: "muted" }, ` · set ${when(at)}`) : null;
  return h("div", { class: "progress", "data-progress": `${done}/${total ?? ""}`, title: note || "" },
    bar, ` ${count}${percent}${words}`, set);
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
  viewOf(run);
  const rows = visibleRows(level(run.steps, 1), 0);
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
      progressBar(run.progress, true),
    ),
    pendingWaits(run, refresh),
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
    timeline(run, rows),
    h("h2", {}, "Steps"),
    stepsTable(run, rows),
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

// --- waits that need an answer, on top of the page -----------------------------------------

// Every callback the run waits on (an approval, wherever it is: a map's branches too) and
// every signal a wait expects, each with its form, PENDING_PAGE at a time. A typed
// callback's field starts filled with its type's shape (serde.example_answer): the person
// replaces each <…> with a value; an answer that still has one is refused here.
function pendingWaits(run, refresh) {
  const signals = run.decisions.includes("signal");
  const waits = run.steps.filter((x) => x.status === "WAITING" && (x.kind === "callback" || (x.kind === "signal" && signals)));
  if (!waits.length) return null;
  const names = branchNames(run);
  const shown = waits.slice(0, view.pending);
  const more = () => {
    view.pending += PENDING_PAGE;
    redraw();
  };
  return h("section", { class: "pending", "aria-label": "waits that need an answer" },
    h("h2", {}, waits.length === 1 ? "Waiting for an answer" : `Waiting for an answer (${waits.length})`),
    shown.map((step) => (step.kind === "callback" ? callbackForm(run, step, names, refresh) : signalForm(run, step, refresh))),
    waits.length > shown.length
      ? h("button", { type: "button", class: "more", onclick: more }, `show ${Math.min(PENDING_PAGE, waits.length - shown.length)} more (${waits.length - shown.length} not shown)`)
      : null,
  );
}

// Where a wait is, as a person reads it: "at 0001.0012.0002, item 11 of the batch at 0001".
function whereIs(step, names) {
  const parts = step.position.split(".");
  if (parts.length < 3) return `at ${step.position}`;
  const branch = parts.slice(0, 2).join(".");
  return `at ${step.position}, ${names[branch] || `item ${Number(parts[1]) - 1}`} of the batch at ${parts[0]}`;
}

// The text a field holds: kept across refreshes while the person types it.
function draftArea(key, initial) {
  const area = h("textarea", { name: key.split("@")[0], spellcheck: "false", "aria-label": key.startsWith("result") ? "result (JSON)" : "payload (JSON)",
    oninput: (e) => view.drafts.set(key, e.target.value) });
  area.value = view.drafts.has(key) ? view.drafts.get(key) : initial;
  area.rows = Math.min(12, area.value.split("\n").length);
  return area;
}

function callbackForm(run, step, names, refresh) {
  const wait = `${runPath(run)}/waits/${enc(step.name)}`;
  const key = `result@${step.position}`;
  const typed = Boolean(step.result_type);
  const shape = typed ? layoutShape(step.answer_example || "") : "true";
  const area = draftArea(key, shape);
  const error = h("p", { class: "error-text", role: "alert" });
  const label = `“${step.name}” ${whereIs(step, names)}`;
  const approve = () => {
    error.textContent = "";
    let result;
    try {
      result = JSON.parse(area.value);
    } catch (e) {
      const hole = /<[^<>"]*(?:"[^"]*"[^<>"]*)*>/.exec(area.value);
      if (hole) {
        // Select it: what the person types next replaces it.
        area.focus();
        area.setSelectionRange(hole.index, hole.index + hole[0].length);
        error.textContent = `Replace ${hole[0]} with a value: the shape's <…> are not JSON.`;
      } else {
        error.textContent = `The result is not valid JSON (${e.message}); quote text, e.g. "yes".`;
      }
      return;
    }
    confirmThen({
      title: `Approve ${label}`,
      text: `The run goes on with this result: ${JSON.stringify(result)}`,
      fields: [],
      send: async () => {
        await api("POST", wait, { result, position: step.position });
        view.drafts.delete(key);
      },
    }, refresh);
  };
  const reject = () => confirmThen({
    title: `Reject ${label}`,
    text: "The wait fails with this error; the workflow decides what follows.",
    fields: [["message", "Reason", ""]],
    send: (v) => api("POST", wait, { error: { type: "Rejected", message: v.message }, position: step.position }),
  }, refresh);
  return h("form", { class: "answer", "data-position": step.position, "data-wait": step.name, onsubmit: (e) => e.preventDefault() },
    h("p", {}, h("strong", {}, "Approval "), label,
      h("span", { class: "muted" }, ` · ${step.expires_at ? `expires ${when(step.expires_at)} (in ${lived(Date.parse(step.expires_at) - nowMs())})` : "no expiry"}`)),
    h("p", { class: "hint" },
      typed
        ? [`Result (JSON), a ${step.result_type}: `, step.answer_example ? "replace each <…> with a value" : "its fields"]
        : "Result (JSON): the run goes on with this value"),
    h("div", { class: "row" }, area,
        h("button", { type: "button", class: "approve", "data-action": "approve", onclick: approve }, "Approve"),
      h("button", { type: "button", class: "reject", "data-action": "reject", onclick: reject }, "Reject")),
    error,
  );
}

function signalForm(run, step, refresh) {
  const key = `payload@${step.position}`;
  const area = draftArea(key, "null");
  const error = h("p", { class: "error-text", role: "alert" });
  const send = () => {
    error.textContent = "";
    let payload;
    try {
      payload = parseJson(area.value, "payload");
    } catch (e) {
      error.textContent = e.message;
      return;
    }
    confirmThen({
      title: `Send signal “${step.name}”`,
      text: `Stored, then consumed by the wait at ${step.position}: ${JSON.stringify(payload)}`,
      fields: [],
      send: async () => {
        await api("POST", `${runPath(run)}/signals/${enc(step.name)}`, payload);
        view.drafts.delete(key);
      },
    }, refresh);
  };
  return h("form", { class: "answer", "data-position": step.position, "data-signal": step.name, onsubmit: (e) => e.preventDefault() },
    h("p", {}, h("strong", {}, "Signal "), `“${step.name}” awaited at ${step.position}`,
      h("span", { class: "muted" }, ` · ${dueText(step)}`)),
    h("p", { class: "hint" }, "Payload (JSON)"),
    h("div", { class: "row" }, area, h("button", { type: "button", class: "approve", "data-action": "signal", onclick: send }, "Send signal")),
    error,
  );
}

// A long shape laid out one field a line, as a person edits JSON; a short one as it is.
// (The shape is not JSON, so it is walked by hand: quoted text and <…> are kept whole.)
function layoutShape(text) {
  if (text.length <= 60) return text;
  let out = "", depth = 0, quoted = false, hole = 0;
  const pad = () => `\n${"  ".repeat(depth)}`;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      out += c;
      if (c === "\\") out += text[++i] || "";
      else if (c === '"') quoted = false;
    } else if (c === '"') {
      quoted = true;
      out += c;
    } else if (c === "<" || (hole && c === ">")) {
      hole += c === "<" ? 1 : -1;
      out += c;
    } else if (hole) {
      out += c;
    } else if ((c === "{" && text[i + 1] === "}") || (c === "[" && text[i + 1] === "]")) {
      out += c + text[++i]; // empty: kept on its line
    } else if (c === "{" || c === "[") {
      depth += 1;
      out += c + pad();
    } else if (c === "}" || c === "]") {
      depth -= 1;
      out += pad() + c;
    } else if (c === ",") {
      out += "," + pad();
      if (text[i + 1] === " ") i += 1;
    } else {
      out += c;
    }
  }
  return out;
}

// --- operator actions, each behind a confirmation ------------------------------------------

function actions(run, refresh) {
  const buttons = [];
  const path = runPath(run);
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

// --- a run's records as a tree: a parallel or map is one group of branches --------------

// A batch at position P records branch i's calls at P.i.1, P.i.2, ... (inline) or its child
// run at P.i (distributed), and its decision at P once decided. A group is built from those
// positions, so a batch still running (no decision yet) is one too.
const BRANCH_PAGE = 50; // branches an opened group lists before "show more"
const AUTO_OPEN = 10; // a group of this many branches or fewer starts opened
const PENDING_PAGE = 5; // waits listed at the top of the page before "show more": the timeline stays near
// Waiting and failed branches first: the ones a person has to look at.
const BRANCH_ORDER = { waiting: 0, failed: 1, running: 2, canceled: 3, done: 4 };
const BRANCH_BAR = { done: "ok", running: "running", waiting: "waiting", failed: "failed", canceled: "backoff" };

// The records of one level (their positions have `depth` parts): a lane each, or a group.
function level(records, depth) {
  const heads = new Map();
  for (const step of records) {
    const parts = step.position.split(".");
    const head = parts.slice(0, depth).join(".");
    if (!heads.has(head)) heads.set(head, { position: head, own: null, deeper: [] });
    const node = heads.get(head);
    if (parts.length === depth) node.own = step;
    else node.deeper.push(step);
  }
  return [...heads.values()].map((node) =>
    node.deeper.length || node.own?.kind === "batch" ? group(node, depth) : { type: "lane", step: node.own },
  );
}

function group(node, depth) {
  const header = node.own;
  // An inline batch's decision holds every branch's outcome (and name); a distributed
  // map's holds counts only, so its items' records say how each went.
  const items = header?.kind === "batch" && Array.isArray(header.output?.items) ? header.output.items : null;
  const branches = new Map();
  const add = (index) => {
    const at = `${node.position}.${String(index).padStart(4, "0")}`;
    if (!branches.has(at)) branches.set(at, { position: at, index, records: [] });
    return branches.get(at);
  };
  for (const step of node.deeper) add(Number(step.position.split(".")[depth])).records.push(step);
  (items || []).forEach((_, k) => add(k + 1)); // a branch canceled before its first call too
  const counts = { done: 0, failed: 0, waiting: 0, running: 0, canceled: 0 };
  const list = [...branches.values()].sort((a, b) => a.index - b.index).map((b) => {
    const item = items?.[b.index - 1];
    const status = branchStatus(b.records, item);
    counts[status] += 1;
    const own = b.records.find((x) => x.position === b.position);
    const inside = level(b.records.filter((x) => x !== own), depth + 2);
    return { ...b, status, name: item?.name || "", inside: own ? [{ type: "lane", step: own }, ...inside] : inside };
  });
  return { type: "group", position: node.position, header, branches: list, counts, records: node.deeper };
}

// done, failed, waiting, running or canceled: the decision's word once decided, else what
// the branch's records say.
function branchStatus(records, item) {
  if (item) return item.s === "succeeded" ? "done" : item.s;
  const open = (x) => x.status === "WAITING" || x.status === "PENDING";
  // A child record waits while its child run works: that branch is running, not waiting.
  if (records.some((x) => open(x) && x.kind !== "child")) return "waiting";
  if (records.some((x) => open(x) || x.status === "RUNNING" || x.status === "RETRYABLE_FAILED")) return "running";
  const last = records[records.length - 1];
  return last && (last.status === "TERMINAL_FAILED" || last.status === "TIMED_OUT") ? "failed" : "done";
}

function groupStatus(g) {
  if (g.header) return g.header.status;
  return g.counts.waiting && !g.counts.running ? "WAITING" : "RUNNING";
}

// What a person opened on a run's page, kept across its refreshes: groups and branches
// opened or closed (by position), how many branches each group lists, how many waits the
// top lists, and the answers being typed.
const view = { run: null, open: new Map(), shown: new Map(), pending: PENDING_PAGE, drafts: new Map() };
function viewOf(run) {
  if (view.run !== run.run_id) {
    Object.assign(view, { run: run.run_id, open: new Map(), shown: new Map(), pending: PENDING_PAGE, drafts: new Map() });
  }
  return view;
}
function isOpen(position, byDefault) {
  return view.open.has(position) ? view.open.get(position) : byDefault;
}

// The rows shown, top to bottom: a record's lane, a group, a branch of an opened group
// (waiting and failed first, BRANCH_PAGE at a time), the records of an opened branch.
function visibleRows(nodes, indent) {
  const rows = [];
  for (const node of nodes) {
    if (node.type === "lane") {
      rows.push({ type: "lane", step: node.step, indent });
      continue;
    }
    const open = isOpen(node.position, node.branches.length <= AUTO_OPEN);
    rows.push({ type: "group", group: node, indent, open });
    if (!open) continue;
    const order = [...node.branches].sort((a, b) => BRANCH_ORDER[a.status] - BRANCH_ORDER[b.status] || a.index - b.index);
    const limit = view.shown.get(node.position) || BRANCH_PAGE;
    for (const branch of order.slice(0, limit)) {
      const branchOpen = isOpen(branch.position, false);
      rows.push({ type: "branch", branch, indent: indent + 1, open: branchOpen });
      if (branchOpen) rows.push(...visibleRows(branch.inside, indent + 2));
    }
    if (order.length > limit) rows.push({ type: "more", group: node, hidden: order.length - limit, indent: indent + 1 });
  }
  return rows;
}

// --- the timeline: one lane per record or branch, one per group, time across --------------

// Where each record's bar starts and ends. Attempts carry their own times; a wait, a sleep
// or a value has only its last write, so it starts where the record before it ended (a
// workflow body is sequential between its waits).
function lanes(run, now) {
  let cursor = Date.parse(run.created_at);
  const byPosition = new Map();
  for (const step of run.steps) {
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
    const due = step.status === "WAITING" ? Date.parse(step.wake_at || step.expires_at || "") : NaN;
    byPosition.set(step.position, { step, segments, due });
  }
  return byPosition;
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

// A branch as a person reads it: its name, or "item N" (N from 0, as BatchItem.index).
function branchLabel(branch) {
  return branch.name || `item ${branch.index - 1}`;
}

// The SVG's text is 11 px monospace: about this many pixels a character. Labels are cut
// and ticks thinned by it, so nothing drawn overlaps whatever the page's width.
const CHAR_PX = 6.7;
function fit(text, px) {
  const room = Math.floor(px / CHAR_PX);
  return text.length <= room ? text : `${text.slice(0, Math.max(1, room - 1))}…`;
}

// Tick spacings a person reads without arithmetic: 1, 2, 5 ms ... 15 s, 30 s, 1 min ... 1 week.
const TICK_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 10e3, 15e3, 30e3, 60e3, 120e3,
  300e3, 600e3, 900e3, 1800e3, 3600e3, 7200e3, 10800e3, 21600e3, 43200e3, 86400e3, 172800e3, 604800e3];

// The axis: "+0" at the left, the whole span at the right, and between them ticks at the
// smallest round spacing whose labels fit side by side; a label that would still touch
// another (or the clock's note) is left out, its line kept.
function axis(t0, t1, x, left, right, note) {
  const labels = [{ t: t0, text: "+0", anchor: "start" }, { t: t1, text: `+${lived(t1 - t0)}`, anchor: "end" }];
  const widest = Math.max(...[0.5, 0.9].map((f) => `+${span(f * (t1 - t0))}`.length)) * CHAR_PX;
  const step = TICK_STEPS.find((ms) => (ms / (t1 - t0)) * (right - left) >= widest + 24);
  const ticks = [];
  for (let k = 1; step && t0 + k * step < t1; k++) ticks.push(t0 + k * step);
  const box = (label) => {
    const w = label.text.length * CHAR_PX, at = x(label.t);
    const from = label.anchor === "start" ? at : label.anchor === "end" ? at - w : at - w / 2;
    return [from - 6, from + w + 6];
  };
  const taken = [box(labels[0]), box(labels[1]), ...(note ? [[0, note.length * CHAR_PX + 4 + 6]] : [])];
  for (const t of ticks) {
    const label = { t, text: `+${span(t - t0)}`, anchor: "middle" };
    const [a, b] = box(label);
    if (taken.some(([c, d]) => a < d && c < b)) continue;
    taken.push([a, b]);
    labels.push(label);
  }
  return { ticks, labels };
}

function timeline(run, rows) {
  if (!rows.length) return h("p", { class: "muted" }, "Nothing recorded yet.");
  const now = nowMs();
  const named = branchNames(run);
  const bars = lanes(run, now);
  const t0 = Date.parse(run.created_at);
  let t1 = Math.max(t0 + 1, TERMINAL.has(run.status) ? Date.parse(run.updated_at) : now);
  for (const lane of bars.values()) for (const seg of lane.segments) t1 = Math.max(t1, seg.end);
  // Drawn at the page's width in pixels (not scaled), so the label widths above hold.
  const main = document.getElementById("main");
  const width = Math.max(420, Math.floor(main.clientWidth - 44));
  const label = Math.min(340, Math.max(170, Math.round(width * 0.3)));
  const lane = 22, groupLane = 38, top = 24;
  const x = (t) => label + ((t - t0) / (t1 - t0)) * (width - label - 10);
  const note = CLOCK.scale === 1 ? null : `virtual time ×${CLOCK.scale}`;
  const { ticks, labels } = axis(t0, t1, x, label, width - 10, note);
  const fault = run.error?.position;
  const contains = (position) => Boolean(fault) && (fault === position || fault.startsWith(`${position}.`));
  const toggle = (position, open) => (event) => {
    if (event.type === "keydown" && event.key !== "Enter" && event.key !== " ") return;
    event.preventDefault();
    view.open.set(position, !open);
    redraw();
  };
  const clickable = (position, open) => ({
    role: "button", tabindex: 0, "aria-expanded": String(open), onclick: toggle(position, open), onkeydown: toggle(position, open),
  });
  // A row that opens is clickable across the whole width, not only on its text's strokes.
  const hit = (at, tall) => s("rect", { x: 0, y: at, width, height: tall, class: "hit" });
  const segmentsOf = (records) => records.flatMap((step) => bars.get(step.position)?.segments || []);
  let y = top;
  const drawn = rows.map((row) => {
    const at = y;
    const indent = 4 + row.indent * 12;
    if (row.type === "group") {
      y += groupLane;
      return groupLaneOf(row, at, indent);
    }
    y += lane;
    if (row.type === "more") {
      const more = () => {
        view.shown.set(row.group.position, (view.shown.get(row.group.position) || BRANCH_PAGE) + BRANCH_PAGE);
        redraw();
      };
      return s("g", { class: "more", role: "button", tabindex: 0, "data-group": row.group.position, onclick: more,
        onkeydown: (e) => (e.key === "Enter" || e.key === " ") && more() },
        hit(at, lane),
        s("text", { x: indent, y: at + 14, class: "lane-label more-label" },
          `show ${Math.min(BRANCH_PAGE, row.hidden)} more (${row.hidden} not shown)`));
    }
    if (row.type === "branch") {
      const b = row.branch;
      const text = `${row.open ? "▾" : "▸"} ${b.position} ${branchLabel(b)}`;
      return s("g", { class: `branch ${b.status}${contains(b.position) ? " at-fault" : ""}`, "data-position": b.position,
        "data-status": b.status, ...clickable(b.position, row.open) },
        hit(at, lane),
        s("title", {}, `${b.position} ${branchLabel(b)}: ${b.status}, ${b.records.length} records (click to ${row.open ? "close" : "open"})`),
        s("circle", { cx: indent + 3, cy: at + 10, r: 4, class: `dot ${BRANCH_BAR[b.status]}` }),
        s("text", { x: indent + 10, y: at + 14, class: "lane-label" }, fit(text, label - indent - 14)),
        barsOf(segmentsOf(b.records), `${branchLabel(b)}`, at),
        dueOf(b.records, at),
      );
    }
    const step = row.step;
    const text = `${step.position} ${step.name}${inBranch(step.position, named)}`;
    return s("g", { class: `lane${step.position === fault ? " at-fault" : ""}`, "data-position": step.position, "data-status": step.status },
      s("text", { x: indent, y: at + 14, class: "lane-label" }, fit(text, label - indent - 6), text.length * CHAR_PX > label - indent - 6 ? s("title", {}, text) : null),
      barsOf(bars.get(step.position).segments, step.name, at),
      dueOf([step], at),
    );
  });

  function barsOf(segments, name, at) {
    return segments.map((seg) =>
      s("rect", { x: x(seg.start), y: at + 4, width: Math.max(2, x(seg.end) - x(seg.start)), height: lane - 8, rx: 3, class: `bar ${seg.cls}` },
        s("title", {}, `${name}: ${seg.tip}`)));
  }
  function dueOf(records, at) {
    return records.map((step) => {
      const due = bars.get(step.position)?.due;
      return isFinite(due) && due <= t1
        ? s("line", { x1: x(due), x2: x(due), y1: at + 2, y2: at + lane - 2, class: "due" }, s("title", {}, `due ${when(new Date(due).toISOString())}`))
        : null;
    });
  }
  // A group: its name and counts by status, and one bar across the time its branches
  // took, split by those counts; click to list its branches.
  function groupLaneOf(row, at, indent) {
    const g = row.group, c = g.counts;
    const segments = segmentsOf(g.records);
    const from = segments.length ? Math.min(...segments.map((seg) => seg.start)) : t0;
    const to = Math.max(from, ...segments.map((seg) => seg.end), g.header ? Date.parse(g.header.updated_at) : from);
    const total = g.branches.length;
    const kinds = ["done", "running", "waiting", "failed", "canceled"].filter((k) => c[k]);
    const name = g.header ? g.header.name : "batch";
    const title = `${row.open ? "▾" : "▸"} ${g.position} ${name} · ${total} branch${total === 1 ? "" : "es"}`;
    let left = x(from);
    const span_ = Math.max(2, x(to) - x(from));
    return s("g", { class: `group${contains(g.position) ? " at-fault" : ""}`, "data-group": g.position, "data-status": groupStatus(g),
      "data-branches": total, ...Object.fromEntries(Object.entries(c).map(([k, n]) => [`data-${k}`, n])),
      ...clickable(g.position, row.open) },
      hit(at, groupLane),
      s("title", {}, `${g.position} ${name}: ${kinds.map((k) => `${c[k]} ${k}`).join(", ")} (click to ${row.open ? "close" : "list"} its branches)`),
      s("text", { x: indent, y: at + 14, class: "lane-label group-label" }, fit(title, label - indent - 6)),
      s("text", { x: indent + 12, y: at + 31, class: "counts" },
        kinds.flatMap((k, i) => [i ? " · " : "", s("tspan", { class: `count ${k}`, "data-count": k }, `${c[k]} ${k}`)])),
      kinds.map((k) => {
        const w = (span_ * c[k]) / total;
        const rect = s("rect", { x: left, y: at + 4, width: Math.max(1, w), height: lane - 6, class: `bar ${BRANCH_BAR[k]}` },
          s("title", {}, `${c[k]} of ${total} ${k}`));
        left += w;
        return rect;
      }),
    );
  }

  const height = y + 6;
  return s(
    "svg",
    { class: "timeline", viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": `timeline of run ${run.run_id}` },
    ticks.map((t) => s("line", { x1: x(t), x2: x(t), y1: 16, y2: height, class: "tick" })),
    [t0, t1].map((t) => s("line", { x1: x(t), x2: x(t), y1: 16, y2: height, class: "tick" })),
    labels.map((l) => s("text", { x: x(l.t), y: 12, class: "tick-label", "text-anchor": l.anchor }, l.text)),
    // Under durable dev's time scale the axis is the ledger's virtual time: say so.
    note ? s("text", { x: 4, y: 12, class: "tick-label axis-clock" }, note) : null,
    drawn,
  );
}

// --- tables ----------------------------------------------------------------------------------

// The records the timeline shows, one row each; a group is one row (its decision, or its
// counts while it runs), its opened branches' records under it.
function stepsTable(run, rows) {
  if (!run.steps.length) return h("p", { class: "muted" }, "No steps yet.");
  const named = branchNames(run);
  const fault = run.error?.position;
  const line = (row) => {
    if (row.type === "group") {
      const g = row.group, step = g.header;
      const counts = Object.entries(g.counts).filter(([, n]) => n).map(([k, n]) => `${n} ${k}`).join(", ");
      return h("tr", { class: fault?.startsWith(`${g.position}.`) || fault === g.position ? "at-fault" : "", "data-group": g.position },
        h("td", {}, g.position),
        h("td", {}, step ? step.name : "batch"),
        h("td", {}, "batch"),
        h("td", {}, badge(groupStatus(g))),
        h("td", {}, ""),
        h("td", {}, step && step.output ? batchText(step.output) : `${g.branches.length} branches so far: ${counts}`),
      );
    }
    if (row.type !== "lane") return null;
    const step = row.step;
    return h("tr", { class: step.position === fault ? "at-fault" : "" },
      h("td", { class: `depth-${Math.min(row.indent, 6)}` }, step.position),
      h("td", {}, step.name, inBranch(step.position, named) ? h("span", { class: "muted", "data-branch": "1" }, inBranch(step.position, named)) : null),
      h("td", {}, step.kind, step.child ? [" ", h("a", { href: runLink({ workflow: step.name, run_id: step.child }), "data-child": step.child }, "open child")] : null),
      h("td", {}, badge(step.status), step.completed_by ? h("span", { class: "muted" }, ` by ${who(step.completed_by)}`) : null),
      h("td", {}, step.attempts.length || ""),
      h("td", {}, step.error_summary
        ? h("span", { class: "error-text" }, step.error_summary)
        : step.status === "WAITING" ? h("span", { class: "muted" }, dueText(step))
        : step.kind === "batch" ? batchText(step.output)
        : step.output === null ? "" : h("code", {}, JSON.stringify(step.output))),
    );
  };
  return h(
    "table",
    { class: "steps" },
    h("thead", {}, h("tr", {}, ["Position", "Name", "Kind", "Status", "Attempts", "Result or error"].map((t) => h("th", {}, t)))),
    h("tbody", {}, rows.map(line)),
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
