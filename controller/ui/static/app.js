// lemon console: the Overview charts, the Audit live tail and the
// periodic refresh of list pages. Every value is set with textContent or
// an SVG attribute, never as HTML (docs/CONSOLE.md).
"use strict";

function el(tag, text) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  return e;
}

function getJSON(url) {
  return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } }).then((r) => {
    if (r.status === 401) { location.href = "/ui/login"; throw new Error("logged out"); }
    if (!r.ok) throw new Error("HTTP " + r.status);
    return r.json();
  });
}

const SVGNS = "http://www.w3.org/2000/svg";

function drawChart(svg, values) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  if (values.length === 0) return;
  const w = 300, h = 80, top = Math.max(1, ...values);
  const step = values.length > 1 ? w / (values.length - 1) : 0;
  const pts = values.map((v, i) => (i * step).toFixed(1) + "," + (h - 2 - (v / top) * (h - 6)).toFixed(1));
  const line = document.createElementNS(SVGNS, "polyline");
  line.setAttribute("points", pts.join(" "));
  svg.appendChild(line);
}

function overview() {
  const keys = ["rps", "errps", "latencyMs", "online"];
  const tick = () => getJSON("/ui/api/overview").then((pts) => {
    for (const k of keys) {
      const vals = pts.map((p) => p[k] || 0);
      drawChart(document.getElementById("c-" + k), vals);
      const last = vals.length ? vals[vals.length - 1] : 0;
      document.getElementById("v-" + k).textContent = k === "online" ? String(last) : last.toFixed(2);
    }
  }).catch(() => {});
  tick();
  setInterval(tick, 2000);
}

function auditTail() {
  const form = document.getElementById("audit-filter");
  const body = document.querySelector("#audit tbody");
  let after = 0;
  const reset = () => { after = 0; while (body.firstChild) body.removeChild(body.firstChild); tick(); };
  const tick = () => {
    const q = new URLSearchParams(new FormData(form));
    q.set("after", String(after));
    return getJSON("/ui/api/audit?" + q.toString()).then((res) => {
      for (const r of res.records) {
        after = Math.max(after, r.seq);
        const tr = el("tr");
        tr.appendChild(el("td", new Date(r.time).toISOString().slice(11, 23)));
        tr.appendChild(el("td", r.principal || ""));
        tr.appendChild(el("td", r.method));
        tr.appendChild(el("td", r.nodeId || ""));
        tr.appendChild(el("td", r.outcome));
        tr.appendChild(el("td", [r.code, r.domain].filter(Boolean).join(" ")));
        tr.appendChild(el("td", Number(r.durationMs).toFixed(1)));
        body.insertBefore(tr, body.firstChild);
      }
      while (body.rows.length > 500) body.deleteRow(body.rows.length - 1);
    }).catch(() => {});
  };
  form.addEventListener("input", reset);
  form.addEventListener("submit", (e) => { e.preventDefault(); reset(); });
  tick();
  setInterval(tick, 2000);
}

function autoRefresh() {
  const t = document.querySelector("[data-refresh]");
  if (!t) return;
  const secs = Number(t.getAttribute("data-refresh")) || 5;
  setInterval(() => {
    const a = document.activeElement;
    if (a && (a.tagName === "INPUT" || a.tagName === "SELECT")) return;
    location.reload();
  }, secs * 1000);
}

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.getAttribute("data-page");
  if (page === "overview") overview();
  if (page === "audit") auditTail();
  autoRefresh();
});
