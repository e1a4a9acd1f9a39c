// The traceparse dashboard: the runs under the logdir, and the chosen run's report.
//
// TensorBoard's plugin_entry.html (and `traceparse serve`'s page) import this
// module with <base href> at the plugin's routes, so "runs" and "report" below
// are /data/plugin/traceparse/runs and .../report. The report is the page
// `traceparse report --format html` writes, shown in a frame; this module only
// lists runs and says how far their analyses are. Every name goes in as text
// (textContent, URLSearchParams), never as markup.

const BUSY_POLL_MS = 1000; // while a run is being analysed
const IDLE_POLL_MS = 10000; // otherwise: a new capture appears within this long

const STYLE = `
  body { font: 14px system-ui, sans-serif; margin: 16px; color: #222; }
  h1 { font-size: 18px; margin: 0 0 4px; }
  .logdir { color: #666; margin-bottom: 12px; }
  table.runs { border-collapse: collapse; margin-bottom: 16px; }
  table.runs th, table.runs td { text-align: left; padding: 4px 10px; border-bottom: 1px solid #ddd;
    vertical-align: top; }
  table.runs tr.run { cursor: pointer; }
  table.runs tr.run:hover { background: #f3f6fb; }
  table.runs tr.chosen { background: #e3ecfa; }
  .pending { color: #8a6d00; }
  .error { color: #b00020; }
  .peak { font-variant-numeric: tabular-nums; white-space: nowrap; }
  td.pending, td.error { max-width: 40em; overflow-wrap: anywhere; }
  iframe.report { width: 100%; height: 80vh; border: 1px solid #ccc; }
`;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) {
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

function allocatorsCell(run) {
  const cell = el("td", { class: "peak" });
  for (const a of run.allocators || []) {
    const host = run.hosts.length > 1 ? `${a.host} ` : "";
    const failed = a.failed ? " (failed)" : "";
    cell.append(el("div", {}, `${host}${a.allocator}: peak ${a.peak}${failed}`));
  }
  return cell;
}

function verdictCell(run) {
  const verdicts = [...new Set((run.allocators || []).map((a) => a.leak_verdict))];
  return el("td", {}, verdicts.join(", "));
}

function statusCell(run) {
  if (run.status === "pending") return el("td", { class: "pending" }, `analysing: ${run.progress}`);
  if (run.status === "error") return el("td", { class: "error" }, run.error);
  return el("td", {}, "ready");
}

export async function render() {
  document.head.append(el("style", {}, STYLE));
  const status = el("div", { class: "logdir" }, "Looking for captures…");
  const body = el("tbody");
  const table = el(
    "table",
    { class: "runs" },
    el("thead", {}, el("tr", {}, ...["Run", "Hosts", "Peak per allocator", "Leak", "Status"].map(
      (h) => el("th", {}, h)))),
    body,
  );
  const view = el("div", { class: "view" });
  document.body.append(el("h1", {}, "traceparse memory"), status, table, view);

  let chosen = null;
  let frame = null;

  function choose(name) {
    chosen = name;
    for (const row of body.querySelectorAll("tr.run")) {
      row.classList.toggle("chosen", row.dataset.run === name);
    }
    // The report route answers "analysing…" (and refreshes itself) until the
    // record is ready, and asking for it puts the run first in the queue.
    frame = el("iframe", { class: "report", title: `traceparse report of ${name}` });
    frame.src = "report?" + new URLSearchParams({ run: name }).toString();
    frame.addEventListener("load", () => {
      try {
        const height = frame.contentDocument.documentElement.scrollHeight;
        if (height > 200) frame.style.height = `${height + 20}px`;
      } catch (e) {
        // not readable: keep the default height
      }
    });
    view.replaceChildren(frame);
  }

  async function poll() {
    let busy = false;
    try {
      const answer = await fetch("runs", { cache: "no-store" });
      if (!answer.ok) throw new Error(`runs: HTTP ${answer.status}`);
      const data = await answer.json();
      const runs = data.runs;
      busy = runs.some((r) => r.status === "pending");
      const count = (s) => runs.filter((r) => r.status === s).length;
      const failed = count("error") ? `, ${count("error")} failed to load` : "";
      const waiting = count("pending") ? `, ${count("pending")} being analysed` : "";
      status.textContent = runs.length
        ? `${data.logdir}: ${runs.length} run(s) with captures, ${count("ready")} ready${failed}${waiting}`
        : `${data.logdir}: no profiler captures yet`;
      body.replaceChildren(
        ...runs.map((run) => {
          const row = el(
            "tr",
            { class: run.run === chosen ? "run chosen" : "run" },
            el("td", {}, run.run),
            el("td", {}, run.hosts.join(", ")),
            allocatorsCell(run),
            verdictCell(run),
            statusCell(run),
          );
          row.dataset.run = run.run;
          row.addEventListener("click", () => choose(run.run));
          return row;
        }),
      );
      if (chosen === null && runs.length) choose(runs[runs.length - 1].run); // the newest
    } catch (e) {
      status.textContent = `Cannot list the runs: ${e.message}`;
    }
    setTimeout(poll, busy ? BUSY_POLL_MS : IDLE_POLL_MS);
  }

  await poll();
}
