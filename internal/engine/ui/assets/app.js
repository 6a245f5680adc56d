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

function computeRow(ws, c, hist, now) {
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
    h("td", {}, computeErrors(c)),
    h("td", {}, computePlot(ws, c, hist, now)));
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

function endpointRow(ws, ep, dt, hist, now) {
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
      autoscaleView(dep),
      deploymentPlot(ws, ep.name, d, hist, now));
  });
  return h("tr", { "data-endpoint": `${ws}/${ep.name}` },
    h("td", {}, h("strong", {}, ep.name), h("div", { class: "muted" }, ep.scoring_uri)),
    h("td", {}, ep.provisioning_state, ep.error ? h("div", { class: "error" }, ep.error) : null),
    h("td", {}, bar), h("td", {}, deps));
}

// --- Pipelines: a graph per pipeline job, drawn as inline SVG (no library, nothing fetched).

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// bindingSource reads "parent.jobs.<step>.outputs.<output>" (a step's output) or
// "parent.inputs.<name>" (the pipeline's input).
function bindingSource(b) {
  let m = /^parent\.jobs\.([^.]+)\.outputs\.(.+)$/.exec(b || "");
  if (m) return { step: m[1], output: m[2] };
  m = /^parent\.inputs\.(.+)$/.exec(b || "");
  return m ? { input: m[1] } : null;
}

// pipelineEdges are the bindings from one step's outputs to another's inputs, one edge per
// pair of steps, labelled "output → input" for each binding it carries.
function pipelineEdges(steps) {
  const names = new Set(steps.map((st) => st.name));
  const edges = new Map();
  for (const st of steps) {
    for (const input of Object.keys(st.input_bindings || {}).sort()) {
      const src = bindingSource(st.input_bindings[input]);
      if (!src || !src.step || !names.has(src.step)) continue;
      const key = src.step + "\u0000" + st.name;
      if (!edges.has(key)) edges.set(key, { from: src.step, to: st.name, labels: [] });
      edges.get(key).labels.push(src.output === input ? input : `${src.output} → ${input}`);
    }
    for (const up of st.upstream || []) { // an upstream step with no binding read (older engines)
      const key = up + "\u0000" + st.name;
      if (names.has(up) && !edges.has(key)) edges.set(key, { from: up, to: st.name, labels: [] });
    }
  }
  return [...edges.values()];
}

// layers places each step one layer right of the furthest step it takes outputs from;
// steps of one layer keep the pipeline's order.
function layers(steps, edges) {
  const ups = new Map(steps.map((st) => [st.name, []]));
  for (const e of edges) ups.get(e.to).push(e.from);
  const layer = new Map();
  const visit = (name, seen) => {
    if (layer.has(name)) return layer.get(name);
    if (seen.has(name)) return 0; // a cycle: the engine refuses those at submit
    seen.add(name);
    const l = Math.max(-1, ...ups.get(name).map((u) => visit(u, seen))) + 1;
    layer.set(name, l);
    return l;
  };
  for (const st of steps) visit(st.name, new Set());
  return layer;
}

// clip shortens a text to n characters for a box; the box's tooltip has it whole.
function clip(text, n) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }

const BOX_W = 180, BOX_H = 58, GAP_X = 70, GAP_Y = 18, PAD = 10;

function pipelineGraph(ws, p) {
  const steps = p.steps || [];
  const edges = pipelineEdges(steps);
  const layer = layers(steps, edges);
  const rows = new Map();
  const pos = new Map();
  for (const st of steps) {
    const l = layer.get(st.name);
    const r = rows.get(l) || 0;
    rows.set(l, r + 1);
    pos.set(st.name, { x: PAD + l * (BOX_W + GAP_X), y: PAD + r * (BOX_H + GAP_Y) });
  }
  // An edge between neighbouring layers is one curve; an edge that skips layers runs in a
  // channel below the boxes of the layers it passes, so it never crosses a box.
  const bottom = (from, to) => Math.max(0, ...steps.filter((st) => layer.get(st.name) > from && layer.get(st.name) < to)
    .map((st) => pos.get(st.name).y + BOX_H));
  const routes = edges.map((e) => {
    const a = pos.get(e.from), b = pos.get(e.to);
    const x1 = a.x + BOX_W, y1 = a.y + BOX_H / 2, x2 = b.x - 2, y2 = b.y + BOX_H / 2;
    if (layer.get(e.to) - layer.get(e.from) <= 1) {
      const mx = (x1 + x2) / 2;
      return { e, d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, lx: mx, ly: (y1 + y2) / 2 - 4 };
    }
    const yc = Math.max(y1, y2, bottom(layer.get(e.from), layer.get(e.to))) + GAP_Y / 2 + 6;
    const c = GAP_X / 2 - 10;
    return { e, yc, d: `M${x1},${y1} C${x1 + c},${y1} ${x1 + c},${yc} ${x1 + 2 * c},${yc} L${x2 - 2 * c},${yc} C${x2 - c},${yc} ${x2 - c},${y2} ${x2},${y2}`,
      lx: (x1 + x2) / 2, ly: yc - 4 };
  });
  const width = PAD * 2 + (Math.max(0, ...layer.values()) + 1) * (BOX_W + GAP_X) - GAP_X;
  const height = Math.max(PAD * 2 + Math.max(1, ...rows.values()) * (BOX_H + GAP_Y) - GAP_Y,
    ...routes.map((r) => (r.yc || 0) + PAD));
  const marker = `arrow-${ws}-${p.id}`.replace(/[^A-Za-z0-9_-]/g, "_");
  const paths = routes.map(({ e, d, lx, ly }) => {
    const label = e.labels.join(", ");
    return svg("g", { class: "edge", "data-from": e.from, "data-to": e.to, "data-label": label },
      svg("path", { d, "marker-end": `url(#${marker})` }),
      label ? svg("text", { x: lx, y: ly, "text-anchor": "middle" }, label) : null,
      svg("title", {}, `${e.from} → ${e.to}${label ? ": " + label : ""}`));
  });
  const boxes = steps.map((st) => {
    const { x, y } = pos.get(st.name);
    const inputs = Object.entries(st.input_bindings || {})
      .map(([name, b]) => [name, bindingSource(b)]).filter(([, src]) => src && src.input)
      .map(([name]) => name).sort();
    const detail = st.reused_from ? `reused ${st.reused_from}` : (st.compute || "");
    return svg("g", { class: "step", "data-step": st.name, "data-status": st.status, "data-reused-from": st.reused_from || null, transform: `translate(${x},${y})` },
      svg("rect", { width: BOX_W, height: BOX_H, rx: 5 }),
      svg("text", { x: 8, y: 17, class: "name" }, clip(st.name, 26)),
      svg("text", { x: 8, y: 33, class: "state" }, st.status + (st.retries ? ` · retry ${st.retries}` : "")),
      svg("text", { x: 8, y: 49, class: "detail" }, clip(detail, 30)),
      svg("title", {}, [`${st.name}: ${st.status}`, st.job && `job ${st.job}`, st.compute && `compute ${st.compute}`,
        st.reused_from && `reused from ${st.reused_from}`, inputs.length && `pipeline inputs: ${inputs.join(", ")}`,
        st.reason].filter(Boolean).join("\n")));
  });
  return h("div", { class: "pipeline", "data-pipeline": `${ws}/${p.id}`, "data-status": p.status },
    h("div", {}, h("code", {}, p.id), " ", h("span", { class: "status", "data-status": p.status }, p.status),
      h("span", { class: "muted" }, ` · ${steps.length} steps`)),
    h("div", { class: "graph" }, svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `pipeline ${p.id}` },
      svg("defs", {}, svg("marker", { id: marker, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        svg("path", { d: "M0,0 L10,5 L0,10 z" }))),
      paths, boxes)));
}

// --- The last hour: small plots from the engine's history (GET /v1/workspaces/{ws}/history,
// sent with the state), one per compute and per deployment.

const PLOT_W = 260, PLOT_H = 64, PLOT_PAD = 4;

// plot draws series over the hour before now. Each series is { name, color, axis ("left"
// for counts, "right" for rates), points: [{ t: Date, v: number }] }; each axis scales to
// its own largest value.
function plot(kind, key, now, series) {
  const from = now - 3600 * 1000;
  const x = (t) => PLOT_PAD + ((t - from) / (3600 * 1000)) * (PLOT_W - 2 * PLOT_PAD);
  const top = { left: 1, right: 0 };
  for (const se of series) for (const p of se.points) top[se.axis] = Math.max(top[se.axis], p.v);
  const y = (axis, v) => PLOT_H - PLOT_PAD - (top[axis] > 0 ? v / top[axis] : 0) * (PLOT_H - 2 * PLOT_PAD - 10);
  const count = Math.max(0, ...series.map((se) => se.points.length));
  const lines = series.map((se) => {
    const pts = se.points.filter((p) => p.t >= from);
    const last = pts[pts.length - 1];
    return svg("g", { class: "series", "data-series": se.name, "data-count": pts.length, "data-last": last ? String(last.v) : null },
      svg("polyline", { points: pts.map((p) => `${x(p.t).toFixed(1)},${y(se.axis, p.v).toFixed(1)}`).join(" "), stroke: se.color }),
      last ? svg("circle", { cx: x(last.t).toFixed(1), cy: y(se.axis, last.v).toFixed(1), r: 2.2, fill: se.color }) : null,
      svg("title", {}, `${se.name}: ${last ? fmt(last.v) : "no data"}`));
  });
  const rightMax = series.some((se) => se.axis === "right") ? svg("text", { x: PLOT_W - PLOT_PAD, y: 10, "text-anchor": "end" }, `${fmt(top.right)}/s`) : null;
  return h("div", { class: "plot", "data-plot": `${kind}:${key}`, "data-points": String(count) },
    svg("svg", { width: PLOT_W, height: PLOT_H, viewBox: `0 0 ${PLOT_W} ${PLOT_H}`, role: "img", "aria-label": `last hour of ${key}` },
      svg("rect", { class: "frame", x: 0.5, y: 0.5, width: PLOT_W - 1, height: PLOT_H - 1 }),
      svg("text", { x: PLOT_PAD, y: 10 }, String(top.left)), rightMax, lines),
    h("div", { class: "legend" }, series.map((se) => h("span", { style: `color:${se.color}` }, `■ ${se.name}`)),
      count ? null : h("span", { class: "muted" }, " · no samples yet")));
}

function fmt(v) { return Number.isInteger(v) ? String(v) : v.toFixed(2); }

function computePlot(ws, c, hist, now) {
  const hc = ((hist && hist.computes) || []).find((x) => x.compute === c.name);
  const pts = (hc && hc.points) || [];
  const at = (f) => pts.map((p) => ({ t: new Date(p.time), v: f(p) }));
  return plot("compute", `${ws}/${c.name}`, now, [
    { name: "nodes", color: colors[0], axis: "left", points: at((p) => p.nodes) },
    { name: "queued", color: colors[2], axis: "left", points: at((p) => p.jobs_queued) },
    { name: "running", color: colors[1], axis: "left", points: at((p) => p.jobs_running) },
  ]);
}

function deploymentPlot(ws, ep, dep, hist, now) {
  const hd = ((hist && hist.deployments) || []).find((x) => x.endpoint === ep && x.deployment === dep);
  const pts = (hd && hd.points) || [];
  const at = (f) => pts.map((p) => ({ t: new Date(p.time), v: f(p) }));
  return plot("deployment", `${ws}/${ep}/${dep}`, now, [
    { name: "instances", color: colors[0], axis: "left", points: at((p) => p.instances) },
    { name: "req/s", color: colors[3], axis: "right", points: at((p) => p.request_rate) },
  ]);
}

// --- Environments and their builds.

function environmentRow(ws, e) {
  const kind = e.python ? `python · ${(e.python.requirements || []).length} requirements${e.python.find_links ? " · offline wheels" : ""}`
    : e.user_managed ? `user managed · ${e.user_managed.interpreter_path}` : "";
  const builds = (e.builds || []).map((b) =>
    h("div", { class: "build", "data-hash": b.content_hash, "data-state": b.state, "data-current": String(b.current) },
      h("code", {}, b.content_hash.slice(0, 12)), b.current ? h("span", { class: "muted" }, " (current)") : h("span", { class: "muted" }, " (earlier)"),
      " ", h("span", { class: "badge", "data-state": b.state }, b.state),
      h("span", { class: "muted" }, ` · ${b.jobs} job${b.jobs === 1 ? "" : "s"}`,
        b.last_job ? ` · last ${b.last_job} (${b.last_job_status})` : "",
        b.nodes && b.nodes.length ? ` · on ${b.nodes.join(", ")}` : ""),
      b.error ? h("pre", { class: "log" }, b.error) : null));
  return h("tr", { "data-environment": `${ws}/${e.name}` },
    h("td", {}, h("strong", {}, e.name)), h("td", {}, kind), h("td", {}, builds));
}

function render(state) {
  const now = new Date(state.time);
  const dt = previous ? (now - new Date(previous.time)) / 1000 : 0;
  const app = document.getElementById("app");
  const out = [];
  if (state.workspaces.length === 0) out.push(h("p", { class: "empty" }, "No workspaces yet."));
  for (const ws of state.workspaces) {
    const active = ws.jobs.filter((j) => !["Completed", "Failed", "Canceled"].includes(j.status));
    const pipelines = ws.pipelines || [];
    out.push(h("section", { class: "workspace", "data-workspace": ws.name },
      h("h2", {}, ws.name, h("span", { class: "muted" }, ` · ${ws.location}`)),
      h("h3", {}, "Computes"),
      table(["Name", "Type", "Size", "State", "Nodes (current / target)", "Node states", "Errors", "Last hour"],
        ws.computes.map((c) => computeRow(ws.name, c, ws.history, now)), "No computes."),
      h("h3", {}, `Jobs (${active.length} queued or running)`),
      table(["Job", "Compute", "Status", "Nodes", "Submitted", "Command and output"],
        ws.jobs.map((j) => jobRow(j, now)), "No jobs."),
      h("h3", {}, "Pipelines"),
      pipelines.length ? pipelines.map((p) => pipelineGraph(ws.name, p)) : h("p", { class: "empty" }, "No pipelines."),
      h("h3", {}, "Online endpoints"),
      table(["Endpoint", "State", "Traffic", "Deployments"],
        ws.endpoints.map((e) => endpointRow(ws.name, e, dt, ws.history, now)), "No endpoints."),
      h("h3", {}, "Environments"),
      table(["Environment", "Definition", "Builds (by content hash)"],
        (ws.environments || []).map((e) => environmentRow(ws.name, e)), "No environments.")));
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
