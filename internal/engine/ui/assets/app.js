// The engine's status page: polls GET /ui/api/state and redraws. Plain DOM, no framework,
// no build step; every text goes through textContent, never innerHTML.
"use strict";

const POLL_MS = 1000;
const colors = ["#1971c2", "#2f9e44", "#f08c00", "#ae3ec9", "#e03131", "#0c8599"];
let previous = null; // the last state, for request rates

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") el.className = v;
    else if (k === "style") el.style.cssText = v;
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function ago(t, now) {
  if (!t) return "";
  const s = Math.max(0, Math.round((now - new Date(t)) / 1000));
  if (s < 60) return s + "s ago";
  if (s < 3600) return Math.floor(s / 60) + "m ago";
  return Math.floor(s / 3600) + "h ago";
}

function table(headers, rows, emptyText) {
  if (rows.length === 0) return h("p", { class: "empty" }, emptyText);
  return h("table", {}, h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))), h("tbody", {}, rows));
}

function computeErrors(c) {
  const out = [];
  for (const e of c.errors || []) out.push(h("div", { class: "error" }, `${e.code || "Error"}: ${e.message || ""}`, e.time ? ` (${e.time})` : ""));
  if (c.error) out.push(h("div", { class: "error" }, c.error));
  for (const n of c.nodes || []) {
    if (n.error) out.push(h("div", { class: "error" }, `node ${n.id}: ${n.error}`));
  }
  return out;
}

function computeRow(ws, c) {
  const nodes = (c.nodes || []).map((n) =>
    h("span", { class: "node", "data-state": n.state, title: `${n.id}: ${n.state}${n.job_id ? " (" + n.job_id + ")" : ""}${n.reason ? " – " + n.reason : ""}` }, n.state));
  const reasons = (c.nodes || []).filter((n) => n.reason).map((n) => h("div", { class: "muted" }, `${n.id}: ${n.reason}`));
  const scale = c.scale_settings ? `${c.scale_settings.min_node_count}–${c.scale_settings.max_node_count}` : "";
  return h("tr", { "data-compute": `${ws}/${c.name}`, "data-nodes": String((c.nodes || []).length) },
    h("td", {}, h("strong", {}, c.name)),
    h("td", {}, c.type), h("td", {}, c.vm_size || ""),
    h("td", {}, c.state || "", c.allocation_state ? ` · ${c.allocation_state}` : ""),
    h("td", {}, `${c.current_node_count} / ${c.target_node_count}`, scale ? h("div", { class: "muted" }, `scale ${scale}`) : null),
    h("td", { class: "nodes" }, nodes.length ? nodes : h("span", { class: "muted" }, "no nodes"), reasons),
    h("td", {}, computeErrors(c)));
}

function jobRow(j, now) {
  return h("tr", { "data-job": j.id, "data-status": j.status },
    h("td", {}, h("code", {}, j.id)),
    h("td", {}, j.compute),
    h("td", {}, h("span", { class: "status", "data-status": j.status }, j.status),
      j.exit_code !== undefined && j.exit_code !== null ? ` (exit ${j.exit_code})` : "",
      j.reason ? h("div", { class: "muted" }, j.reason) : null,
      j.error ? h("div", { class: "error" }, j.error) : null),
    h("td", {}, (j.nodes || []).join(", ")),
    h("td", {}, ago(j.submitted_at, now)),
    h("td", { style: "width: 45%" }, h("code", {}, (j.command || []).join(" ")),
      j.log ? h("pre", { class: "log" }, j.log) : null));
}

function rate(ws, ep, dep, stats, dt) {
  if (!previous || dt <= 0) return 0;
  const pw = previous.workspaces.find((w) => w.name === ws);
  const pe = pw && pw.endpoints.find((e) => e.name === ep);
  const ps = pe && pe.stats && pe.stats[dep];
  if (!ps) return 0;
  return Math.max(0, (stats.Requests - ps.Requests) / dt);
}

// autoscaleView shows an autoscaled deployment's bounds, held requests and last decisions.
function autoscaleView(dep) {
  const sc = dep.scale_settings;
  if (!sc || sc.type !== "target_utilization") return null;
  const decisions = (dep.scale_decisions || []).slice(-5).reverse();
  return h("div", { class: "autoscale", "data-desired": dep.desired_instances, "data-held": dep.held_requests || 0 },
    h("span", { class: "muted" }, `autoscaled ${sc.min_instances}..${sc.max_instances} · desired ${dep.desired_instances} · held ${dep.held_requests || 0}`),
    decisions.length ? h("ul", { class: "decisions" }, decisions.map((d) =>
      h("li", { class: "muted" }, `${d.time} ${d.from} → ${d.to}: ${d.reason}`))) : null);
}

function endpointRow(ws, ep, dt) {
  const traffic = ep.live_traffic || ep.traffic || {};
  const names = Object.keys(ep.deployments || {}).sort();
  const bar = h("div", { class: "bar", title: "live traffic split" },
    names.map((d, i) => (traffic[d] ? h("span", { style: `width:${traffic[d]}%;background:${colors[i % colors.length]}` }) : null)));
  const deps = names.map((d, i) => {
    const s = (ep.stats || {})[d] || { Requests: 0, Responses2xx: 0, Responses4xx: 0, Responses5xx: 0, InFlight: 0 };
    const dep = ep.deployments[d];
    const r = rate(ws, ep.name, d, s, dt);
    return h("div", { "data-deployment": d, "data-rate": r.toFixed(2) },
      h("span", { style: `color:${colors[i % colors.length]}` }, "■ "),
      h("strong", {}, d), ` ${traffic[d] || 0}%`,
      (ep.mirror_traffic || {})[d] ? ` (mirror ${ep.mirror_traffic[d]}%)` : "",
      ` · ${dep.ready_instances}/${dep.desired_instances} ready · `,
      h("span", { class: "rps" }, `${r.toFixed(1)} req/s`),
      h("span", { class: "muted" }, ` · ${s.Requests} requests, 2xx ${s.Responses2xx} 4xx ${s.Responses4xx} 5xx ${s.Responses5xx}, in flight ${s.InFlight || 0}`),
      autoscaleView(dep));
  });
  return h("tr", { "data-endpoint": `${ws}/${ep.name}` },
    h("td", {}, h("strong", {}, ep.name), h("div", { class: "muted" }, ep.scoring_uri)),
    h("td", {}, ep.provisioning_state, ep.error ? h("div", { class: "error" }, ep.error) : null),
    h("td", {}, bar), h("td", {}, deps));
}

function render(state) {
  const now = new Date(state.time);
  const dt = previous ? (now - new Date(previous.time)) / 1000 : 0;
  const app = document.getElementById("app");
  const out = [];
  if (state.workspaces.length === 0) out.push(h("p", { class: "empty" }, "No workspaces yet."));
  for (const ws of state.workspaces) {
    const active = ws.jobs.filter((j) => !["Completed", "Failed", "Canceled"].includes(j.status));
    out.push(h("section", { class: "workspace", "data-workspace": ws.name },
      h("h2", {}, ws.name, h("span", { class: "muted" }, ` · ${ws.location}`)),
      h("h3", {}, "Computes"),
      table(["Name", "Type", "Size", "State", "Nodes (current / target)", "Node states", "Errors"],
        ws.computes.map((c) => computeRow(ws.name, c)), "No computes."),
      h("h3", {}, `Jobs (${active.length} queued or running)`),
      table(["Job", "Compute", "Status", "Nodes", "Submitted", "Command and output"],
        ws.jobs.map((j) => jobRow(j, now)), "No jobs."),
      h("h3", {}, "Online endpoints"),
      table(["Endpoint", "State", "Traffic", "Deployments"],
        ws.endpoints.map((e) => endpointRow(ws.name, e, dt)), "No endpoints.")));
  }
  app.replaceChildren(...out);
  document.getElementById("engine").textContent =
    `version ${state.engine.version} · driver ${state.engine.nodes_driver || ""} · pid ${state.engine.pid}`;
  const upd = document.getElementById("updated");
  upd.textContent = `updated ${new Date().toLocaleTimeString()}`;
  upd.dataset.time = state.time;
  previous = state;
}

async function poll() {
  try {
    const res = await fetch("api/state", { cache: "no-store", credentials: "same-origin" });
    if (!res.ok) throw new Error(res.status === 401 ? "not logged in: open the link `mlcompute ui` prints" : `HTTP ${res.status}`);
    render(await res.json());
  } catch (e) {
    const upd = document.getElementById("updated");
    upd.textContent = `engine unreachable: ${e.message}`;
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

poll();
