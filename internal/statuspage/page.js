// statuspage.js draws the status page's live charts and keeps its table
// and totals current: it polls GET /status/series (and GET /status/cluster
// when the server says it has one) every second. No libraries: the charts
// are SVG paths. What each chart shows is kept in window.__nimbusCharts for
// tests and for the curious (docs/OPERATIONS.md, "The status page").
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const PALETTE = ["#3b82f6", "#f97316", "#10b981", "#a855f7", "#ef4444", "#eab308", "#06b6d4", "#64748b"];
  const MINUTES = 5;
  const state = { updates: 0, charts: {} };
  window.__nimbusCharts = state;

  function el(name, attrs, text) {
    const e = document.createElementNS(SVG, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function fmt(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    const a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(0) + "k";
    if (a >= 1e3) return (v / 1e3).toFixed(1) + "k";
    if (a >= 10) return v.toFixed(0);
    return String(Number(v.toFixed(2)));
  }
  const pct = (v) => (v === null || v === undefined ? "–" : (v * 100).toFixed(1) + "%");

  // niceMax rounds a maximum up to 1, 2 or 5 times a power of ten.
  function niceMax(m) {
    if (!(m > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(m)));
    for (const f of [1, 2, 5, 10]) if (m <= f * p) return f * p;
    return 10 * p;
  }

  // draw renders series [{name, values}] over times t (Unix ms) into the
  // SVG with id "chart-"+name. opts: max (fixed y maximum), step (draw
  // steps and whole-number gridlines, for counts), format (y labels and
  // legend), empty (message when there is nothing to draw).
  function draw(name, t, series, opts) {
    const svg = document.getElementById("chart-" + name);
    const legend = document.getElementById("legend-" + name);
    const format = opts.format || fmt;
    const w = Math.max(svg.clientWidth, 200), h = Math.max(svg.clientHeight, 120);
    const L = 44, R = 8, T = 8, B = 18;
    svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
    svg.replaceChildren();
    legend.replaceChildren();
    const now = t.length ? t[t.length - 1] : Date.now();
    const t0 = now - MINUTES * 60000;
    const x = (ms) => L + ((ms - t0) / (now - t0)) * (w - L - R);
    let ymax = opts.max;
    if (ymax === undefined) {
      let m = 0;
      for (const s of series) for (const v of s.values) if (v !== null && v > m) m = v;
      ymax = opts.step ? Math.max(4, Math.ceil(m / 4) * 4) : niceMax(m);
    }
    // Gridlines at round values: fifths of 5×10^k, quarters otherwise.
    const div = String(ymax)[0] === "5" ? 5 : 4;
    const y = (v) => T + (1 - v / ymax) * (h - T - B);
    for (let i = 0; i <= div; i++) {
      const v = (ymax * i) / div, yy = y(v);
      svg.append(el("line", { x1: L, x2: w - R, y1: yy, y2: yy, stroke: "#e3e7ee" }));
      svg.append(el("text", { x: L - 6, y: yy + 3, "text-anchor": "end" }, format(v)));
    }
    for (let m = 0; m <= MINUTES; m++) {
      const xx = x(t0 + m * 60000);
      svg.append(el("text", { x: xx, y: h - 4, "text-anchor": m === 0 ? "start" : m === MINUTES ? "end" : "middle" },
        m === MINUTES ? "now" : `−${MINUTES - m}m`));
    }
    const shown = {};
    series.forEach((s, i) => {
      const color = PALETTE[i % PALETTE.length];
      // Runs of values between nulls are paths; a dot marks the newest
      // value and any value alone between nulls, which a path would not show.
      let d = "", run = 0, dot = null;
      const dots = new Set();
      s.values.forEach((v, k) => {
        if (v === null) {
          if (run === 1) dots.add(dot);
          run = 0;
          return;
        }
        const xx = x(t[k]).toFixed(1), yy = y(Math.min(v, ymax)).toFixed(1);
        if (run === 0) d += `M${xx},${yy}`;
        else if (opts.step) d += `H${xx}V${yy}`;
        else d += `L${xx},${yy}`;
        run++; dot = `${xx},${yy}`;
      });
      if (dot) dots.add(dot);
      if (d) svg.append(el("path", { d, fill: "none", stroke: color, "stroke-width": 1.6, "stroke-linejoin": "round" }));
      for (const p of dots) {
        const [cx, cy] = p.split(",");
        svg.append(el("circle", { cx, cy, r: 2.5, fill: color }));
      }
      const item = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.background = color;
      const last = s.values.length ? s.values[s.values.length - 1] : null;
      item.append(swatch, `${s.name}: ${format(last)}`);
      legend.append(item);
      shown[s.name] = s.values;
    });
    if (!series.length || !series.some((s) => s.values.some((v) => v !== null))) {
      svg.append(el("text", { x: (L + w) / 2, y: h / 2, "text-anchor": "middle" }, opts.empty || "no data yet"));
    }
    const points = series.reduce((n, s) => n + s.values.filter((v) => v !== null).length, 0);
    svg.dataset.points = String(points);
    state.charts[name] = { series: shown, points };
  }

  function text(id, v) {
    const e = document.getElementById(id);
    if (e) e.textContent = v;
  }

  function age(s) {
    if (s === null || s === undefined) return "–";
    s = Math.round(s);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + (s % 60) + "s";
    return Math.floor(s / 3600) + "h" + Math.floor((s % 3600) / 60) + "m";
  }

  function renderTable(cluster) {
    const body = document.getElementById("instances");
    const rows = [];
    for (const d of cluster.deployments || []) {
      for (const inst of d.instances || []) {
        const tr = document.createElement("tr");
        if (inst.this) tr.className = "this";
        const cells = [String(d.index), inst.id || "", inst.address || "", age(inst.age_seconds),
          inst.inflight === null || inst.inflight === undefined ? "–" : fmt(inst.inflight),
          pct(inst.cache_hit_ratio),
          inst.cold_start_ms === null || inst.cold_start_ms === undefined ? "–" : fmt(inst.cold_start_ms) + " ms",
          inst.state || ""];
        cells.forEach((c, i) => {
          const td = document.createElement("td");
          if (i === 1 || i === 2) {
            const code = document.createElement("code");
            code.textContent = c;
            td.append(code);
          } else td.textContent = c;
          tr.append(td);
        });
        rows.push(tr);
      }
    }
    body.replaceChildren(...rows);
    if (cluster.source) text("cluster-source", "Source: " + cluster.source + ".");
  }

  // withSelf marks the answering server's row in the platform's view of the
  // cluster and fills in what that view leaves null (its cold start) from
  // the server's own.
  function withSelf(cluster, own) {
    let self = null;
    for (const d of (own && own.deployments) || []) {
      for (const inst of d.instances || []) if (inst.this) self = inst;
    }
    if (!self) return cluster;
    for (const d of cluster.deployments) {
      for (const inst of d.instances || []) {
        if (inst.id !== self.id) continue;
        inst.this = true;
        for (const k in self) if (inst[k] === null || inst[k] === undefined) inst[k] = self[k];
      }
    }
    return cluster;
  }

  function render(s, cluster) {
    const t = s.t || [];
    const deps = Object.keys(s.instances || {}).sort((a, b) => a - b);
    draw("instances", t, deps.map((d) => ({ name: "deployment " + d, values: s.instances[d] })),
      { step: true, format: (v) => (v === null ? "–" : v.toFixed(0)) });
    const ops = (s.ops || []).concat(s.rate && s.rate.other ? ["other"] : []);
    draw("throughput", t, ops.map((op) => ({ name: op, values: s.rate[op] })), { empty: "no requests in the last minutes" });
    draw("p99", t, (s.ops || []).map((op) => ({ name: op, values: s.p99_ms[op] })), { empty: "no requests in the last minutes" });
    draw("cache", t, s.cache ? [{ name: "hit ratio", values: s.cache_hit_ratio }] : [],
      { max: 1, format: pct, empty: s.cache ? "no lookups yet" : "no metadata cache on this server (nimbus serve --cache-bytes)" });

    let instances = 0, inflight = 0;
    for (const d of cluster.deployments || []) {
      for (const inst of d.instances || []) {
        instances++;
        inflight += inst.inflight || 0;
      }
    }
    const k = t.length - 1;
    let rate = null;
    if (k >= 0) {
      rate = 0;
      for (const op of ops) rate += s.rate[op][k] || 0;
    }
    text("t-deployments", String((cluster.deployments || []).length));
    text("t-instances", String(instances));
    text("t-rate", fmt(rate));
    text("t-inflight", fmt(inflight));
    text("t-cache", pct(s.cache_hit_ratio_window));
    renderTable(cluster);
    state.updates++;
  }

  async function poll() {
    const live = document.getElementById("live");
    try {
      const r = await fetch(`/status/series?minutes=${MINUTES}`, { cache: "no-store" });
      if (!r.ok) throw new Error(`GET /status/series: ${r.status}`);
      const s = await r.json();
      let cluster = s.cluster || {};
      if (s.cluster_url) {
        // The platform's view when the server has one; this server's own
        // (s.cluster) when it cannot be read or has no deployments.
        try {
          const c = await fetch(s.cluster_url, { cache: "no-store" });
          if (c.ok) {
            const j = await c.json();
            if (j && Array.isArray(j.deployments)) {
              cluster = withSelf(j, s.cluster);
              cluster.source = cluster.source || "GET " + s.cluster_url + ", the platform's view of the cluster";
            }
          }
        } catch (e) { /* keep s.cluster */ }
      }
      render(s, cluster);
      live.className = "ok";
      live.textContent = "live, updated " + new Date().toLocaleTimeString();
    } catch (e) {
      live.className = "down";
      live.textContent = "not updating: " + e.message;
    }
    setTimeout(poll, 1000);
  }
  poll();
})();
