"use strict";
// One model, fed two ways: live (a snapshot from /api/snapshot, then changes pushed over
// /api/events) or an incident (the timeline's steps applied up to the chosen time). Every view
// below renders only from the model, so both modes show the same thing for the same state.

const COLORS = { in_sync: "#2e9d4f", under_replicated: "#e8a317", under_min_isr: "#e4572e",
  offline: "#b00020", reassigning: "#3a7bd5" };
const STATE_NAMES = { in_sync: "in sync", under_replicated: "under-replicated",
  under_min_isr: "under min ISR", offline: "offline", reassigning: "reassigning" };
const LISTED = 200;

const M = {
  state: new Map(), alerts: new Map(), recent: [], controller: {}, capture: [], fenced: {},
  clusters: [], cluster: null, version: 0, t: null, loaded: null, connected: false,
  defaultMinIsr: (DATA && DATA.default_min_isr) || 1,
};
const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, text = "") => {
  const node = document.createElement(tag);
  // A style through the CSS object model: the page's Content-Security-Policy refuses style
  // attributes (and every inline style or script it does not name by its hash).
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "style") node.style.cssText = v; else node.setAttribute(k, v);
  }
  if (text !== "") node.textContent = text;
  return node;
};
// Children replaced only when what they show changed (`signature`): replacing a list of 200
// identical rows makes the browser lay them out again for nothing, every render (B8).
function fill(node, signature, make) {
  if (node.zkcdcShows === signature) return;
  node.zkcdcShows = signature;
  node.replaceChildren(...make());
}
// The "and N more" line after a list: its own element, so a growing count changes one line
// and not the list (a broker failure at 200,000 partitions: the count changes every render).
function more(list, tag, n) {
  let line = list.lastElementChild;
  if (!line || !line.classList.contains("more")) list.append((line = el(tag, { class: "more" })));
  const text = n > LISTED ? `and ${n - LISTED} more` : "";
  if (line.textContent !== text) line.textContent = text;
  line.hidden = !text;
}
// Widths read once, then kept by a ResizeObserver: reading clientWidth in a render makes the
// browser lay the whole page out there and then, twice a render (B8: most of a render's time
// at 200,000 partitions).
const WIDTHS = new Map();
const resized = new ResizeObserver((entries) => {
  let changed = false;
  for (const e of entries) {
    const w = Math.round(e.contentRect.width);
    if (w && WIDTHS.get(e.target) !== w) { WIDTHS.set(e.target, w); changed = true; }
  }
  if (changed) later();
});
function widthOf(node, fallback) {
  if (!WIDTHS.has(node)) { WIDTHS.set(node, node.clientWidth || fallback); resized.observe(node); }
  return WIDTHS.get(node) || fallback;
}
const iso = (ms) => (ms == null ? "-" : new Date(ms).toISOString().replace("T", " ").replace("Z", ""));
const ints = (xs) => (xs || []).join(",");

// Per cluster, its entities by kind and each partition's state (in sync, under-replicated, ...)
// with the counts, kept as the state changes: a render at 200,000 partitions must not walk,
// sort or classify the whole state again. The heat-map order is redone only when a partition
// comes or goes; cells are repainted only for partitions whose state changed (`dirty`).
let IDX = new Map();
function clusterIndex(cluster) {
  let ix = IDX.get(cluster);
  if (!ix) {
    ix = { name: cluster, keys: 0, brokers: new Map(), partitions: new Map(), topics: new Map(),
      groups: new Map(), controller: null, order: null, pos: null, status: new Map(),
      counts: zeroCounts(), problems: new Set(), byTopic: new Map(), dirty: new Set(), minIsr: new Map(),
      problemTopics: new Map() };  // topic -> its partitions not in sync
    const at = ix;
    ix.listed = new FirstN(LISTED, (k) => at.pos.get(k), () => at.problems);
    IDX.set(cluster, ix);
  }
  return ix;
}
function zeroCounts() { return { in_sync: 0, under_replicated: 0, under_min_isr: 0, offline: 0, reassigning: 0 }; }
function resetState() { M.state = new Map(); IDX = new Map(); heat = null; }
function indexed(key, old, value) {
  const v = value || old;
  if (!v) return;
  const slash = key.indexOf("/");
  const ix = clusterIndex(slash < 0 ? key : key.slice(0, slash));
  ix.keys += (value == null ? 0 : 1) - (old == null ? 0 : 1);
  if (v.kind === "controller") { ix.controller = value; return; }
  if (v.kind === "partition") { indexPartition(ix, key, old, value); return; }
  const into = { broker: ix.brokers, topic: ix.topics, group: ix.groups }[v.kind];
  if (!into) return;
  if (value == null) into.delete(key); else into.set(key, value);
  if (v.kind === "topic") {  // its min.insync.replicas may have changed: its partitions again
    ix.minIsr.delete(v.topic);
    for (const pk of ix.byTopic.get(v.topic) || []) classify(ix, pk, ix.partitions.get(pk));
  }
}
function indexPartition(ix, key, old, value) {
  if (old == null || value == null) {
    ix.order = null; ix.pos = null; ix.listed.items = null;
    const topic = (value || old).topic;
    let keys = ix.byTopic.get(topic);
    if (!keys) ix.byTopic.set(topic, (keys = new Set()));
    if (value == null) keys.delete(key); else keys.add(key);
  }
  if (value == null) ix.partitions.delete(key); else ix.partitions.set(key, value);
  classify(ix, key, value, (value || old || {}).topic);
}
function classify(ix, key, p, topic = p && p.topic) {
  const was = ix.status.get(key);
  const now = p == null ? undefined : partitionState(ix, p);
  if (was === now) return;
  if (was) ix.counts[was] -= 1;
  if (now) { ix.counts[now] += 1; ix.status.set(key, now); } else ix.status.delete(key);
  const bad = (s) => s != null && s !== "in_sync";
  if (bad(now) !== bad(was) && topic != null) {
    const n = (ix.problemTopics.get(topic) || 0) + (bad(now) ? 1 : -1);
    if (n > 0) ix.problemTopics.set(topic, n); else ix.problemTopics.delete(topic);
  }
  if (now && now !== "in_sync") { ix.problems.add(key); ix.listed.added(key); }
  else if (ix.problems.delete(key)) ix.listed.removed(key);
  ix.dirty.add(key);
}
function orderOf(ix) {
  if (ix.order == null) {
    const byName = (a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition);
    ix.order = [...ix.partitions].sort((a, b) => byName(a[1], b[1])).map(([key]) => key);
    ix.pos = new Map(ix.order.map((key, i) => [key, i]));
  }
  return ix.order;
}
function applyState(pairs) {
  for (const [key, value] of pairs) {
    const old = M.state.get(key);
    if (value == null) M.state.delete(key); else M.state.set(key, value);
    indexed(key, old, value);
  }
}
// The first n of items by key (ascending), without sorting them all.
function firstN(items, n, key) {
  const out = [];
  for (const item of items) {
    const k = key(item);
    if (out.length === n && k >= key(out[n - 1])) continue;
    let at = out.length;
    while (at > 0 && key(out[at - 1]) > k) at--;
    out.splice(at, 0, item);
    if (out.length > n) out.pop();
  }
  return out;
}
// The first n of a changing collection (of keys) by `key`, kept as keys come and go: a render
// reads it without walking the collection (100,000 firing alerts, or problem partitions, in a
// broker failure at 200,000 partitions: B8). Worked out again only when a key it holds leaves.
class FirstN {
  constructor(n, key, all) { this.n = n; this.key = key; this.all = all; this.items = null; }
  added(item) {
    const items = this.items;
    if (items == null) return;
    const k = this.key(item);
    if (items.length === this.n && k > this.key(items[this.n - 1])) return;
    if (items.includes(item)) return;
    if (items.length === this.n && k === this.key(items[this.n - 1])) return;
    let at = items.length;
    while (at > 0 && this.key(items[at - 1]) > k) at--;
    items.splice(at, 0, item);
    if (items.length > this.n) items.pop();
  }
  removed(item) { if (this.items != null && this.items.includes(item)) this.items = null; }
  get() {
    if (this.items == null) this.items = firstN(this.all(), this.n, this.key);
    return this.items;
  }
}

// Per cluster, its alerts as they come: the firing ones, their count by rule, the earliest
// firing (listed) and the latest started (the timeline).
let ALX = new Map();
function alertIndex(cluster) {
  let x = ALX.get(cluster);
  if (!x) {
    x = { all: new Set(), firing: new Set(), rules: {}, groups: {}, severity: {} };
    const started = (id) => M.alerts.get(id).started_ms;
    x.active = new FirstN(LISTED, started, () => x.firing);
    x.recent = new FirstN(100, (id) => -started(id), () => x.all);
    ALX.set(cluster, x);
  }
  return x;
}
function resetAlerts() { M.alerts = new Map(); ALX = new Map(); }
// What an alert is grouped under within its rule: a partition's topic, else its entity's kind
// (broker/3 -> broker), as Alertmanager's page groups by alert name and then by label.
function groupOf(entity) {
  const cut = (entity || "").lastIndexOf("/");
  return cut > 0 ? entity.slice(0, cut) : entity || "-";
}
// An entity as a person names it: a broker or a consumer group by kind and id ("broker 2"),
// a partition as topic/partition.
function entityName(entity) {
  const m = /^(broker|group)\/(.+)$/.exec(entity || "");
  return m ? `${m[1]} ${m[2]}` : entity || "-";
}
function regroup(x, a, delta) {
  const groups = (x.groups[a.rule] = x.groups[a.rule] || new Map());
  const key = groupOf(a.entity), n = (groups.get(key) || 0) + delta;
  if (n > 0) groups.set(key, n); else groups.delete(key);
  if (delta > 0) x.severity[a.rule] = a.severity;
}
function applyAlerts(alerts) {
  for (const a of alerts) {
    const old = M.alerts.get(a.alert_id);
    if (old && old.status === "RESOLVED" && a.status === "FIRING") continue;
    const now = Object.assign({}, old || {}, a), id = now.alert_id;
    M.alerts.set(id, now);
    const x = alertIndex(now.cluster);
    if (!old) { x.all.add(id); x.recent.added(id); }
    const was = old != null && old.status === "FIRING", is = now.status === "FIRING";
    if (was && !is) { x.firing.delete(id); x.rules[old.rule] -= 1; regroup(x, old, -1); x.active.removed(id); }
    if (is && !was) { x.firing.add(id); x.rules[now.rule] = (x.rules[now.rule] || 0) + 1; regroup(x, now, +1); x.active.added(id); }
  }
}
function knownClusters() {
  const found = new Set(M.clusters);
  for (const [cluster, ix] of IDX) if (ix.keys) found.add(cluster);
  return [...found].sort();
}

// ---- what the views read ----------------------------------------------------------------
function clusterView(cluster) {
  const ix = clusterIndex(cluster);
  return {
    ix,
    brokers: [...ix.brokers.values()].sort((a, b) => a.broker_id - b.broker_id),
    controller: ix.controller,
    topics: new Map([...ix.topics.values()].map((t) => [t.topic, t])),
    groups: [...ix.groups.values()],
  };
}
function minIsr(ix, topic) {  // kept per topic until the topic changes (see `indexed`)
  let n = ix.minIsr.get(topic);
  if (n === undefined) {
    const t = ix.topics.get(`${ix.name}/topic/${topic}`);
    const configured = t && t.config && t.config["min.insync.replicas"];
    ix.minIsr.set(topic, (n = configured ? parseInt(configured, 10) : M.defaultMinIsr));
  }
  return n;
}
function partitionState(ix, p) {
  if (p.offline) return "offline";
  const online = p.leader != null && p.leader !== -1;
  if (online && (p.isr || []).length < minIsr(ix, p.topic)) return "under_min_isr";
  if (p.under_replicated) return "under_replicated";
  if ((p.adding || []).length || (p.removing || []).length) return "reassigning";
  return "in_sync";
}
function brokerStatus(b) {
  const fenced = (M.fenced[M.cluster] || []).includes(b.broker_id);
  return fenced ? "fenced" : b.alive ? "up" : "down";
}

// ---- rendering ----------------------------------------------------------------------------
let drawn = [];  // the keys of the partitions in heat-map order, for clicks
let selected = null;  // [topic, partition] whose history is shown
let causesOf = null;  // the alert whose records are shown

function render() {
  const clusters = knownClusters();
  const pick = $("cluster");
  if (pick.options.length !== clusters.length || [...pick.options].some((o, i) => o.value !== clusters[i])) {
    pick.replaceChildren(...clusters.map((c) => el("option", { value: c }, c)));
  }
  if (!clusters.includes(M.cluster)) M.cluster = clusters[0] || null;
  pick.value = M.cluster || "";
  renderStatus();
  if (!M.cluster) return;
  const view = clusterView(M.cluster);
  renderBrokers(view);
  renderPartitions(view);
  renderBalance(view);
  renderGroups(view);
  renderAlerts();
  renderCapture();
  renderEvents();
  if (selected) showPartition(selected[0], selected[1]);
}

function renderStatus() {
  if (DATA.mode === "live") {
    const missing = M.loaded ? Object.entries(M.loaded).filter(([, v]) => !v).map(([k]) => k) : [];
    $("status").textContent = (M.connected ? "live" : "reconnecting…") +
      (missing.length ? ` · reading ${missing.join(", ")}…` : "") + ` · v${M.version}`;
  } else if (DATA.mode === "lake") {
    $("status").textContent = M.lakeStatus || "";
  } else {
    $("status").textContent = `${DATA.timeline.records} records · ${DATA.timeline.steps.length} changes`;
  }
}

function renderBrokers(view) {
  const alive = view.brokers.filter((b) => brokerStatus(b) === "up").length;
  $("summary").textContent = `${alive}/${view.brokers.length} up`;
  const statuses = view.brokers.map(brokerStatus);
  fill($("brokers"), JSON.stringify(view.brokers.map((b, i) => [b.broker_id, statuses[i], b.endpoints])), () => view.brokers.map((b, i) => {
    const status = statuses[i];
    const card = el("div", { class: "broker", "data-broker": b.broker_id, "data-status": status });
    card.append(el("strong", {}, `broker ${b.broker_id}`), el("small", {}, status),
      el("small", {}, (b.endpoints || []).join(" ")));
    return card;
  }));
  const c = view.controller || {};
  $("controller").textContent = c.broker_id == null
    ? "none" : `broker ${c.broker_id}, epoch ${c.epoch == null ? "-" : c.epoch}`;
  $("controller").dataset.broker = c.broker_id == null ? "" : c.broker_id;
  const rows = controllerRows();
  const last = rows.slice(-30);
  fill($("controller-timeline"), last.map((r) => `${iso(r.t)}  ${r.text}`).join("\n"), () => last.map((r) =>
    el("li", {}, `${iso(r.t)}  ${r.text}`)));
}

function renderPartitions(view) {
  const ix = view.ix;
  const topicFilter = $("filter-topic").value.trim();
  const brokerFilter = $("filter-broker").value;
  const topics = [...view.topics.keys()].sort();
  const list = $("topics");
  if (list.childElementCount !== topics.length) list.replaceChildren(...topics.map((t) => el("option", { value: t })));
  const brokerPick = $("filter-broker");
  const ids = view.brokers.map((b) => String(b.broker_id));
  if (brokerPick.options.length !== ids.length + 1) {
    brokerPick.replaceChildren(el("option", { value: "" }, "all"), ...ids.map((i) => el("option", { value: i }, i)));
    brokerPick.value = brokerFilter;
  }
  const order = orderOf(ix);
  let keys = order, counts = ix.counts, problems = ix.problems;
  if (topicFilter || brokerFilter) {  // a person's pick: one walk, over one topic where it can
    const broker = brokerFilter ? parseInt(brokerFilter, 10) : null;
    const among = topicFilter ? [...(ix.byTopic.get(topicFilter) || [])].sort((a, b) => ix.pos.get(a) - ix.pos.get(b)) : order;
    keys = among.filter((k) => broker == null || (ix.partitions.get(k).replicas || []).includes(broker));
    counts = zeroCounts();
    problems = [];
    for (const k of keys) {
      const s = ix.status.get(k);
      counts[s] += 1;
      if (s !== "in_sync") problems.push(k);
    }
  }
  drawn = keys;
  const counted = $("partition-counts");
  counted.textContent = Object.entries(counts).filter(([, n]) => n).map(([s, n]) => `${n} ${STATE_NAMES[s]}`).join(" · ") || "none";
  for (const [s, n] of Object.entries(counts)) counted.dataset[s] = n;
  if (!$("legend").childElementCount) $("legend").replaceChildren(...Object.keys(COLORS).flatMap((s) => [
    el("span", { class: "swatch", style: `background:${COLORS[s]}` }), el("span", {}, STATE_NAMES[s])]));
  drawHeatmap(ix, `${ix.name}|${topicFilter}|${brokerFilter}`);
  // Not in sync, by topic: where a broker failure's partitions are, before the rows.
  let byTopic = ix.problemTopics;
  if (problems !== ix.problems) {
    byTopic = new Map();
    for (const k of problems) { const t = ix.partitions.get(k).topic; byTopic.set(t, (byTopic.get(t) || 0) + 1); }
  }
  const topicCounts = [...byTopic].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  const byTopicText = topicCounts.slice(0, 12).map(([t, n]) => `${t}: ${n}`).join(" · ")
    + (topicCounts.length > 12 ? ` · +${topicCounts.length - 12} more topics` : "");
  const line = $("problem-topics");
  if (line.textContent !== byTopicText) line.textContent = byTopicText;
  line.dataset.topics = String(topicCounts.length);
  const listed = problems === ix.problems ? ix.listed.get() : firstN(problems, LISTED, (k) => ix.pos.get(k));
  const body = $("problem-partitions").tBodies[0];
  const many = problems.length === undefined ? problems.size : problems.length;
  const shows = listed.map((k) => {
    const p = ix.partitions.get(k);
    return `${k} ${ix.status.get(k)} ${p.leader} ${ints(p.isr)} ${ints(p.replicas)} ${p.leader_epoch}`;
  }).join("\n");
  fill(body, shows, () => listed.map((k) => {
    const p = ix.partitions.get(k), s = ix.status.get(k);
    const tr = el("tr", { "data-partition": `${p.topic}/${p.partition}`, "data-state": s });
    for (const text of [`${p.topic}/${p.partition}`, STATE_NAMES[s], p.leader == null ? "-" : p.leader,
      ints(p.isr), ints(p.replicas), p.leader_epoch]) tr.append(el("td", {}, String(text)));
    tr.onclick = () => showPartition(p.topic, p.partition);
    return tr;
  }));
  more(body, "tr", many);
}

const RGB = Object.fromEntries(Object.entries(COLORS).map(([s, c]) => [s, [1, 3, 5].map((i) => parseInt(c.slice(i, i + 2), 16))]));
let heat = null;  // what the canvas shows: its image, geometry, and which partitions in which order
function heatGeometry() {
  const canvas = $("heatmap");
  const width = widthOf(canvas, 900);
  const n = Math.max(drawn.length, 1);
  const cell = Math.max(1, Math.min(16, Math.floor(Math.sqrt((width * 240) / n))));
  const columns = Math.max(1, Math.floor(width / cell));
  return { canvas, cell, columns, rows: Math.ceil(n / columns) };
}
function paintCell(h, i, state) {
  const color = RGB[state];
  const x0 = (i % h.columns) * h.cell, y0 = Math.floor(i / h.columns) * h.cell;
  const data = h.image.data, w = h.image.width;
  for (let y = y0; y < y0 + h.cell - h.gap; y++) {
    let at = (y * w + x0) * 4;
    for (let x = 0; x < h.cell - h.gap; x++, at += 4) {
      data[at] = color[0]; data[at + 1] = color[1]; data[at + 2] = color[2]; data[at + 3] = 255;
    }
  }
}
function drawHeatmap(ix, what) {
  const g = heatGeometry();
  const same = heat && heat.what === what && heat.keys === drawn && heat.cell === g.cell && heat.columns === g.columns;
  if (same) {  // only the cells whose state changed
    if (!ix.dirty.size) return;
    const at = drawn === ix.order ? ix.pos : heat.pos;
    for (const k of ix.dirty) {
      const i = at.get(k);
      if (i != null && ix.status.has(k)) paintCell(heat, i, ix.status.get(k));
    }
  } else {
    g.canvas.width = g.columns * g.cell;
    g.canvas.height = Math.max(g.cell, g.rows * g.cell);
    const ctx = g.canvas.getContext("2d");
    heat = { what, keys: drawn, cell: g.cell, columns: g.columns, gap: g.cell > 3 ? 1 : 0,
      image: ctx.createImageData(g.canvas.width, g.canvas.height), ctx,
      pos: drawn === ix.order ? null : new Map(drawn.map((k, i) => [k, i])) };
    for (let i = 0; i < drawn.length; i++) paintCell(heat, i, ix.status.get(drawn[i]));
  }
  ix.dirty.clear();
  heat.ctx.putImageData(heat.image, 0, 0);
}
$("heatmap").addEventListener("click", (e) => {
  const g = heatGeometry();
  const rect = g.canvas.getBoundingClientRect();
  const scale = g.canvas.width / rect.width;
  const i = Math.floor(((e.clientY - rect.top) * scale) / g.cell) * g.columns + Math.floor(((e.clientX - rect.left) * scale) / g.cell);
  const p = drawn[i] && M.state.get(drawn[i]);
  if (p) showPartition(p.topic, p.partition);
});

async function showPartition(topic, partition) {
  selected = [topic, partition];
  const p = M.state.get(`${M.cluster}/partition/${topic}/${partition}`);
  $("partition-detail").hidden = false;
  $("detail-name").textContent = `${topic}/${partition}`;
  $("detail-now").textContent = p ? `now: leader ${p.leader}, isr [${ints(p.isr)}], replicas [${ints(p.replicas)}], leader epoch ${p.leader_epoch}` : "gone";
  const rows = await rowsOf(`${topic}/${partition}`, null);
  $("detail-rows").replaceChildren(...rows.map((r) => el("li", {}, `${iso(r.t)}  ${r.text}`)));
}

function renderBalance(view) {
  $("balance").replaceChildren(...view.brokers.filter((b) => b.preferred_partitions).map((b) => {
    const led = b.preferred_partitions - (b.preferred_not_led || 0);
    const share = led / b.preferred_partitions;
    const row = el("div", { class: "bar", "data-broker": b.broker_id });
    const track = el("div", { class: "track" });
    track.append(el("div", { class: "fill" + (share < 0.9 ? " low" : ""), style: `width:${(100 * share).toFixed(1)}%` }), el("div", { class: "mark" }));
    row.append(el("span", {}, `broker ${b.broker_id}`), track, el("span", {}, `${led}/${b.preferred_partitions} (${(100 * share).toFixed(0)} %)`));
    return row;
  }));
}

function renderGroups(view) {
  if (!view.groups.length) { $("groups").textContent = "none"; return; }
  const table = el("table");
  table.append(el("tr")); table.rows[0].append(...["group", "members", "owned", "as the range rebalance", "mismatches"].map((h) => el("th", {}, h)));
  for (const g of view.groups.sort((a, b) => (a.group < b.group ? -1 : 1))) {
    const owners = g.owners || {}, expected = g.expected || {};
    const keys = new Set([...Object.keys(owners), ...Object.keys(expected)]);
    const wrong = [...keys].filter((k) => owners[k] !== expected[k]).sort();
    const tr = el("tr", { "data-group": g.group });
    tr.append(el("td", {}, g.group), el("td", {}, String(Object.keys(g.members || {}).length)),
      el("td", {}, String(Object.keys(owners).length)), el("td", {}, String(Object.keys(expected).length)),
      el("td", wrong.length ? { class: "mismatch" } : {}, wrong.length ? wrong.slice(0, 8).map((k) => `${k}: ${owners[k] || "none"} (range: ${expected[k] || "none"})`).join("; ") : "none"));
    table.append(tr);
  }
  $("groups").replaceChildren(table);
}

function renderAlerts() {
  const x = alertIndex(M.cluster);
  const firing = x.firing.size;
  const active = x.active.get().map((id) => M.alerts.get(id));
  const rules = Object.entries(x.rules).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  $("active-count").textContent = `${firing} firing` + (rules.length > 1
    ? ": " + rules.map(([r, n]) => `${n} ${r}`).join(", ") : "");
  const counts = (rule) => [...(x.groups[rule] || new Map())].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  const signature = rules.map(([r, n]) => `${r}=${n}:` + counts(r).map(([g, k]) => `${g}=${k}`).join(","))
    .join(";") + "|" + active.map((a) => a.alert_id).join(" ");
  fill($("active-alerts"), signature, () => {
    if (!rules.length) return [el("li", { "data-severity": "none" }, "none")];
    // One line a rule (a broker failure reads as one line), opened to its topics and alerts.
    return rules.map(([rule, n]) => {
      const groups = counts(rule);
      // A group of one names its entity ("broker 2"), more say how many ("orders: 12"): a
      // count beside a kind would read as an id ("broker 1" for one broker down).
      const named = ([g, k]) => {
        const only = k === 1 && active.find((a) => a.rule === rule && groupOf(a.entity) === g);
        return only ? entityName(only.entity) : `${g}: ${k}`;
      };
      const head = `${x.severity[rule] || ""} ${rule}: ${n} firing` + (groups.length
        ? ` (${groups.slice(0, 6).map(named).join(", ")}${groups.length > 6 ? `, +${groups.length - 6} more` : ""})` : "");
      const details = el("details", { "data-rule": rule });
      details.append(el("summary", {}, head));
      for (const [group, k] of groups.slice(0, LISTED)) {
        const items = active.filter((a) => a.rule === rule && groupOf(a.entity) === group);
        const sub = el("ul", { "data-group": group });
        sub.append(el("li", { class: "group-head" }, `${group}: ${k}`));
        for (const a of items) {
          const li = el("li", { "data-severity": a.severity, "data-rule": a.rule, "data-entity": a.entity, title: a.summary || "" },
            `${a.entity} since ${iso(a.started_ms)}`);
          li.onclick = () => showCauses(a);
          sub.append(li);
        }
        if (k > items.length) sub.append(el("li", { class: "more" }, `and ${k - items.length} more`));
        details.append(sub);
      }
      const li = el("li", { class: "alert-group", "data-severity": x.severity[rule] || "", "data-rule": rule, "data-count": String(n) });
      li.append(details);
      return li;
    });
  });
  // The latest alerts, and the firing ones listed above: every rule firing has its lane.
  const recent = x.recent.get().map((id) => M.alerts.get(id)).reverse();
  drawAlertTimeline([...new Map([...active, ...recent].map((a) => [a.alert_id, a])).values()]);
}
// One lane a rule (a broker failure's 500 alerts are one lane, not 500 bars): its latest
// alerts as bars over time, overlapping where many were at once; how many of the rule's
// alerts fire beside its name.
// A lane's name opens that rule's alerts in the list above.
function drawAlertTimeline(shown) {
  const svg = $("alert-timeline");
  const now = M.t != null ? M.t : Date.now();
  const start = Math.min(now - 60000, ...shown.map((a) => a.started_ms));
  const width = widthOf(svg, 400), span = Math.max(now - start, 1), h = 10, label = 150;
  const lanes = new Map();
  for (const a of shown) (lanes.get(a.rule) || lanes.set(a.rule, []).get(a.rule)).push(a);
  const rules = [...lanes.keys()].sort();
  svg.setAttribute("height", String(Math.max(20, rules.length * (h + 4) + 14)));
  const ns = "http://www.w3.org/2000/svg";
  const color = (a) => a.status === "RESOLVED" ? "#9ca3af" : COLORS[a.severity === "critical" ? "offline" : a.severity === "warning" ? "under_replicated" : "reassigning"];
  const nodes = rules.flatMap((rule, i) => {
    const y = i * (h + 4), alerts = lanes.get(rule);
    const name = document.createElementNS(ns, "text");
    name.setAttribute("x", "0"); name.setAttribute("y", String(y + h)); name.setAttribute("font-size", "10");
    name.setAttribute("class", "lane"); name.setAttribute("data-rule", rule);
    const firing = (alertIndex(M.cluster).rules[rule] || 0);
    name.textContent = firing ? `${rule} · ${firing} firing` : rule;
    name.addEventListener("click", () => {
      const group = document.querySelector(`#active-alerts details[data-rule='${rule}']`);
      if (group) { group.open = true; group.scrollIntoView({ block: "nearest" }); }
    });
    const bars = alerts.map((a) => {
      const end = a.status === "RESOLVED" && a.ended_ms != null ? a.ended_ms : now;
      const rect = document.createElementNS(ns, "rect");
      rect.setAttribute("x", String(label + ((a.started_ms - start) / span) * (width - label)));
      rect.setAttribute("y", String(y));
      rect.setAttribute("width", String(Math.max(2, ((end - a.started_ms) / span) * (width - label))));
      rect.setAttribute("height", String(h));
      rect.setAttribute("fill", color(a)); rect.setAttribute("fill-opacity", "0.5");
      const title = document.createElementNS(ns, "title");
      title.textContent = `${a.status} ${a.rule} ${a.entity} ${iso(a.started_ms)} → ${a.ended_ms == null ? "now" : iso(a.ended_ms)}`;
      rect.append(title);
      rect.addEventListener("click", () => showCauses(a));
      return rect;
    });
    return [name, ...bars];
  });
  const axis = document.createElementNS(ns, "text");
  axis.setAttribute("x", String(label)); axis.setAttribute("y", String(rules.length * (h + 4) + 12));
  axis.setAttribute("font-size", "10"); axis.textContent = `${iso(start)} … ${iso(now)}`;
  svg.replaceChildren(...nodes, axis);
}
async function showCauses(a) {
  causesOf = a;
  $("alert-causes").hidden = false;
  $("causes-of").textContent = `${a.rule} ${a.entity}`;
  const rows = await rowsOf(a.entity, a.status === "RESOLVED" ? a.ended_ms : a.started_ms);
  $("causes").replaceChildren(...rows.slice(-30).map((r) => el("li", {}, `${iso(r.t)} seq ${r.seq} ${r.op} ${r.path}: ${r.text}`)));
  if (!rows.length) $("causes").replaceChildren(el("li", {}, "no change records kept for it"));
}

function renderCapture() {
  const body = $("capture").tBodies[0];
  if (!M.capture.length) { body.replaceChildren(el("tr", {}, { live: "no --capture-metrics given", lake: "(not kept in the lake)" }[DATA.mode] || "(not in a report)")); return; }
  body.replaceChildren(...M.capture.map((c) => {
    const tr = el("tr");
    for (const text of [c.url, c.up ? "yes" : "NO", c.up ? (c.active ? "active" : "standby") : "-",
      c.up ? (c.connected ? "connected" : "lost") : "-", c.lag_mean_ms == null ? "-" : `${c.lag_mean_ms} ms`,
      c.versions_skipped == null ? "-" : c.versions_skipped, c.seq == null ? "-" : c.seq]) tr.append(el("td", {}, String(text)));
    return tr;
  }));
}

function renderEvents() {
  let rows = M.recent.filter((r) => r.cluster === M.cluster);
  if (DATA.mode !== "live") {
    rows = incidentRows.filter((r) => r.cluster === M.cluster && Math.abs(r.t - M.t) <= 60000);
    $("events-title").textContent = "Changes around this time (±60 s)";
  }
  const shown = rows.slice(-200), cls = (r) => (DATA.mode !== "live" ? (r.t > M.t ? "later" : "now") : "");
  fill($("events"), shown.map((r) => `${cls(r)} ${iso(r.t)} seq ${r.seq} ${r.text}`).join("\n"), () => shown.map((r) =>
    el("li", { class: cls(r) }, `${iso(r.t)} seq ${r.seq} ${r.text}`)));
}

// ---- rows: from the server when live, from the timeline in an incident ----------------------
async function rowsOf(entity, until) {
  if (DATA.mode !== "live") {
    const limit = until == null ? M.t : Math.min(until, M.t);
    return incidentRows.filter((r) => r.cluster === M.cluster && r.t <= limit && concerns(r, entity));
  }
  const q = new URLSearchParams({ cluster: M.cluster, entity });
  if (until != null) q.set("until", String(until));
  const answer = await fetch(`api/rows?${q}`);
  return answer.ok ? answer.json() : [];
}
function concerns(row, entity) {
  if (row.entity === entity) return true;
  if (entity === "controller") return row.type.startsWith("CONTROLLER");
  if (entity.startsWith("broker/")) return String(row.broker_id) === entity.slice(7);
  if (entity.startsWith("topic/")) return row.topic === entity.slice(6);
  return false;
}
function controllerRows() {
  if (DATA.mode !== "live") return incidentRows.filter((r) => r.cluster === M.cluster && r.t <= M.t && r.type.startsWith("CONTROLLER"));
  return M.controller[M.cluster] || [];
}

// Renders follow changes at most every other render's time, so a storm of changes (a broker
// failure across 200,000 partitions) leaves the page at least half its time for people.
let pending = false;
let renderMs = 0;
let renderedAt = 0;
function later() {
  if (pending) return;
  pending = true;
  const wait = Math.max(0, renderedAt + 2 * renderMs - performance.now());
  setTimeout(() => requestAnimationFrame(() => {
    pending = false;
    const started = performance.now();
    render();
    renderedAt = performance.now();
    renderMs = renderedAt - started;
  }), wait);
}
$("cluster").addEventListener("change", (e) => { M.cluster = e.target.value; selected = null; later(); });
$("filter-topic").addEventListener("input", later);
$("filter-broker").addEventListener("change", later);

// ---- live ---------------------------------------------------------------------------------
// Partitions come in a snapshot as tables: field names once, a row per partition (its key, then
// its values), a third of the JSON (B8).
function tablePairs(tables) {
  const out = [];
  for (const t of tables || []) {
    const fields = t.fields, n = fields.length;
    for (const row of t.rows) {
      const value = {};
      for (let i = 0; i < n; i++) value[fields[i]] = row[i + 1];
      out.push([row[0], value]);
    }
  }
  return out;
}
function takeSnapshot(s) {
  resetState(); applyState(s.state); applyState(tablePairs(s.tables));
  resetAlerts(); applyAlerts(s.alerts);
  M.recent = s.recent; M.controller = s.controller; M.capture = s.capture;
  M.fenced = s.fenced || {}; M.clusters = s.clusters; M.loaded = s.loaded; M.version = s.version;
}
function takeChanges(c) {
  applyState(c.state); applyAlerts(c.alerts);
  if (c.recent.length) M.recent = M.recent.concat(c.recent).slice(-300);
  if (c.controller) M.controller = c.controller;
  if (c.capture) M.capture = c.capture;
  if (c.fenced) M.fenced = c.fenced;
  if (c.clusters) M.clusters = c.clusters;
  if (c.loaded) M.loaded = c.loaded;
  M.version = c.version;
}
async function live() {
  $("mode").textContent = "live";
  const answer = await fetch("api/snapshot");
  takeSnapshot(await answer.json());
  render();
  const source = new EventSource(`api/events?since=${M.version}`);
  source.addEventListener("open", () => { M.connected = true; later(); });
  source.addEventListener("error", () => { M.connected = false; later(); });
  source.addEventListener("changes", (e) => { takeChanges(JSON.parse(e.data)); later(); });
  source.addEventListener("snapshot", (e) => { takeSnapshot(JSON.parse(e.data)); later(); });
}

// ---- incident -----------------------------------------------------------------------------
let incidentRows = [];
let applied = 0;  // steps applied to the model so far
function seek(t) {
  const steps = DATA.timeline.steps;
  if (M.t == null || t < M.t) {
    resetState(); resetAlerts(); M.fenced = {}; incidentRows = []; applied = 0;
  }
  while (applied < steps.length && steps[applied][0] <= t) {
    const [, , cluster, upserts, alerts, rows] = steps[applied++];
    applyState(upserts); applyAlerts(alerts);
    for (const r of rows) {
      if (r.type === "BROKER_FENCED" || r.type === "BROKER_UNFENCED") {
        const set = new Set(M.fenced[cluster] || []);
        if (r.type === "BROKER_FENCED") set.add(r.broker_id); else set.delete(r.broker_id);
        M.fenced[cluster] = [...set];
      }
    }
  }
  M.t = t;
  // Rows of every step, so "around this time" also shows what comes next.
  if (!incidentRows.length) incidentRows = steps.flatMap((s) => s[5]);
  $("time").value = String(t);
  $("time-ms").value = String(t);
  $("time-text").textContent = iso(t);
  document.body.dataset.t = String(t);
  render();
}
function incident() {
  $("mode").textContent = "incident";
  $("scrubber").hidden = false;
  const tl = DATA.timeline;
  M.clusters = tl.clusters;
  const slider = $("time");
  slider.min = String(tl.start_ms || 0); slider.max = String(tl.end_ms || 0);
  slider.addEventListener("input", () => seek(parseInt(slider.value, 10)));
  $("time-ms").addEventListener("change", (e) => seek(parseInt(e.target.value, 10)));
  const times = tl.steps.map((s) => s[0]);
  $("step-next").onclick = () => { const n = times.find((x) => x > M.t); if (n != null) seek(n); };
  $("step-back").onclick = () => { const p = times.filter((x) => x < M.t).pop(); if (p != null) seek(p); };
  $("next-alert").onclick = () => { const s = tl.steps.find((x) => x[0] > M.t && x[4].length); if (s) seek(s[0]); };
  window.zkcdcSeek = seek;  // for scripts (and the tests) that pick a time
  const hash = new URLSearchParams(location.hash.slice(1)).get("t");
  seek(hash ? parseInt(hash, 10) : (tl.end_ms || 0));
}

// ---- as of, from the lake -------------------------------------------------------------------
// The server answers for one moment at a time (`api/at`): the state records then, the alerts
// then, the changes within a minute of it, and where the neighbouring changes are.
let spans = [];
let asked = 0;  // the newest question: an older answer that comes after it is dropped
async function lakeSeek(t) {
  const mine = ++asked;
  const span = spans.find((s) => s.cluster === M.cluster) || spans[0];
  if (!span) return;
  M.cluster = span.cluster;
  $("time").min = String(span.start_ms); $("time").max = String(span.end_ms);
  M.lakeStatus = `reading ${iso(t)}…`; renderStatus();
  const answer = await fetch(`api/at?${new URLSearchParams({ cluster: span.cluster, t: String(t) })}`);
  const s = await answer.json();
  if (mine !== asked) return;
  if (!answer.ok) { M.lakeStatus = s.error; renderStatus(); return; }
  resetState(); applyState(s.state); resetAlerts(); applyAlerts(s.alerts); M.fenced = {};
  incidentRows = s.rows; M.t = s.t; M.around = s;
  M.lakeStatus = `as of ${iso(s.t)}`;
  $("time").value = String(s.t); $("time-ms").value = String(s.t); $("time-text").textContent = iso(s.t);
  render();
  document.body.dataset.t = String(s.t);
}
async function lakeMode() {
  $("mode").textContent = "as of";
  $("scrubber").hidden = false;
  spans = await (await fetch("api/spans")).json();
  M.clusters = spans.map((s) => s.cluster);
  M.cluster = M.clusters[0] || null;
  const slider = $("time");
  slider.addEventListener("change", () => lakeSeek(parseInt(slider.value, 10)));
  $("time-ms").addEventListener("change", (e) => lakeSeek(parseInt(e.target.value, 10)));
  const go = (key) => () => { const t = M.around && M.around[key]; if (t != null) lakeSeek(t); };
  $("step-next").onclick = go("next_ms");
  $("step-back").onclick = go("prev_ms");
  $("next-alert").onclick = go("next_alert_ms");
  $("cluster").addEventListener("change", () => lakeSeek(M.t));
  window.zkcdcSeek = lakeSeek;
  const hash = new URLSearchParams(location.hash.slice(1)).get("t");
  const span = spans[0];
  if (span) lakeSeek(hash ? parseInt(hash, 10) : span.end_ms);
  else { M.lakeStatus = "the lake holds no changes yet"; renderStatus(); }
}

window.zkcdcModel = M;
if (DATA.mode === "incident") incident(); else if (DATA.mode === "lake") lakeMode(); else live();
