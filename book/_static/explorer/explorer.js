// The attention explorer (book/explorer.md): plain JavaScript, no library, no network.
// It reads window.VITEDU_EXPLORER, written by tools/make_explorer_data.py from the shipped
// weights, and draws, for the query token you pick, its attention weights over the 64 patches in
// every layer and head, and its attention rollout, for the trained and the untrained model.
(function () {
  "use strict";
  const D = window.VITEDU_EXPLORER;
  const root = document.getElementById("vitedu-explorer");
  if (!root) return;
  if (!D) {
    root.textContent = "The explorer's data (explorer_data.js) did not load.";
    return;
  }
  const T = D.tokens, G = D.grid, L = D.depth, H = D.heads;
  const PREFIX = T - G * G; // 1: the [CLS] token comes first
  const MODELS = [
    ["trained", "Trained: the shipped weights"],
    ["untrained", "Untrained: random initialisation (seed 0)"],
  ];
  const CELL = 7; // pixels per patch in a small map
  const BIG = 256; // the canvas you click on, in CSS pixels
  // viridis, five stops, linearly interpolated
  const STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];

  const letter = {};
  for (let i = 0; i < D.code.length; i++) letter[D.code[i]] = i;
  function decode(text, scale) {
    const out = new Float32Array(text.length / 2);
    for (let i = 0; i < out.length; i++) {
      out[i] = (letter[text[2 * i]] * 64 + letter[text[2 * i + 1]]) / scale;
    }
    return out;
  }
  const cache = new Map();
  function canvasData(c) {
    if (!cache.has(c)) {
      const raw = D.canvases[c];
      const entry = { pixels: decode(raw.pixels, 1) };
      for (const [name] of MODELS) {
        entry[name] = {
          attention: decode(raw[name].attention, D.scale),
          rollout: decode(raw[name].rollout, D.scale),
        };
      }
      cache.set(c, entry);
    }
    return cache.get(c);
  }

  // The colour scale runs from 0 to vmax, with a square-root spacing (stated on the colour bars):
  // weights near the uniform 1/65 stay visible next to a head that puts 0.9 on one patch.
  function colour(v) {
    const x = Math.sqrt(Math.max(0, Math.min(1, v))) * (STOPS.length - 1);
    const i = Math.min(STOPS.length - 2, Math.floor(x));
    const f = x - i;
    const rgb = STOPS[i].map((a, j) => Math.round(a + f * (STOPS[i + 1][j] - a)));
    return `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`;
  }
  const fmt = (v) => v.toFixed(3);
  function tokenName(q) {
    if (q < PREFIX) return "[CLS]";
    const p = q - PREFIX;
    return `patch (${Math.floor(p / G)}, ${p % G})`;
  }
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    for (const child of children) node.append(child);
    return node;
  }

  // --- the page's elements ---------------------------------------------------------------
  const state = { canvas: 0, query: 0 };
  const picker = el("div", { class: "vx-picker", role: "group", "aria-label": "test canvases" });
  const big = el("canvas", {
    class: "vx-big", width: BIG, height: BIG, role: "img",
    "aria-label": "the test canvas: click a patch to pick the query",
  });
  const clsButton = el("button", { type: "button", class: "vx-cls" }, "[CLS] as the query");
  const readout = el("p", { class: "vx-readout", "aria-live": "polite" });
  const scales = el("div", { class: "vx-scales" });
  const panels = el("div", { class: "vx-panels" });
  root.append(
    picker,
    el("div", { class: "vx-top" }, big, el("div", { class: "vx-side" }, clsButton, readout, scales)),
    panels,
  );

  D.canvases.forEach((canvas, c) => {
    const thumb = el("canvas", { width: D.img_size, height: D.img_size });
    const button = el("button", { type: "button", "data-canvas": c, title: `test canvas ${canvas.index}` },
      thumb, el("span", {}, `digit ${canvas.label}`));
    button.addEventListener("click", () => { state.canvas = c; state.query = defaultQuery(c); render(); });
    picker.append(button);
    drawImage(thumb, canvasData(c).pixels, 1);
  });

  function defaultQuery(c) {
    // the patch at the centre of the digit
    const [top, left, h, w] = D.canvases[c].box;
    const r = Math.floor((top + h / 2) / D.patch_size), col = Math.floor((left + w / 2) / D.patch_size);
    return PREFIX + Math.min(G - 1, r) * G + Math.min(G - 1, col);
  }

  function drawImage(canvas, pixels, scale) {
    const ctx = canvas.getContext("2d");
    const n = D.img_size;
    for (let y = 0; y < n; y++) {
      for (let x = 0; x < n; x++) {
        const g = pixels[y * n + x];
        ctx.fillStyle = `rgb(${g},${g},${g})`;
        ctx.fillRect(x * scale, y * scale, scale, scale);
      }
    }
  }

  function drawBig() {
    const ctx = big.getContext("2d");
    const s = BIG / D.img_size, p = BIG / G;
    drawImage(big, canvasData(state.canvas).pixels, s);
    ctx.strokeStyle = "rgba(255,255,255,0.25)";
    ctx.lineWidth = 1;
    for (let i = 1; i < G; i++) {
      ctx.beginPath(); ctx.moveTo(i * p, 0); ctx.lineTo(i * p, BIG); ctx.stroke();
      ctx.beginPath(); ctx.moveTo(0, i * p); ctx.lineTo(BIG, i * p); ctx.stroke();
    }
    const [top, left, h, w] = D.canvases[state.canvas].box;
    ctx.strokeStyle = "#4caf50";
    ctx.lineWidth = 2;
    ctx.strokeRect(left * s, top * s, w * s, h * s);
    if (state.query >= PREFIX) {
      const q = state.query - PREFIX;
      ctx.strokeStyle = "#ff4081";
      ctx.lineWidth = 3;
      ctx.strokeRect((q % G) * p + 1.5, Math.floor(q / G) * p + 1.5, p - 3, p - 3);
    }
  }

  big.addEventListener("click", (event) => {
    const rect = big.getBoundingClientRect();
    const col = Math.floor(((event.clientX - rect.left) / rect.width) * G);
    const row = Math.floor(((event.clientY - rect.top) / rect.height) * G);
    if (row < 0 || row >= G || col < 0 || col >= G) return;
    state.query = PREFIX + row * G + col;
    render();
  });
  clsButton.addEventListener("click", () => { state.query = 0; render(); });

  // one query's weights over the patches (the [CLS] key left out: its weight is printed)
  function attentionRow(name, l, h) {
    const a = canvasData(state.canvas)[name].attention;
    const start = ((l * H + h) * T + state.query) * T;
    return a.subarray(start, start + T);
  }
  function rolloutRow(name) {
    const r = canvasData(state.canvas)[name].rollout;
    return r.subarray(state.query * T, (state.query + 1) * T);
  }

  function smallMap(row, vmax, attrs, caption) {
    const canvas = el("canvas", { width: G * CELL, height: G * CELL });
    const ctx = canvas.getContext("2d");
    let best = PREFIX;
    for (let k = PREFIX; k < T; k++) {
      if (row[k] > row[best]) best = k;
      const p = k - PREFIX;
      ctx.fillStyle = colour(row[k] / vmax);
      ctx.fillRect((p % G) * CELL, Math.floor(p / G) * CELL, CELL, CELL);
    }
    if (state.query >= PREFIX) {
      const q = state.query - PREFIX;
      ctx.strokeStyle = "#ff4081";
      ctx.lineWidth = 1.5;
      ctx.strokeRect((q % G) * CELL + 0.75, Math.floor(q / G) * CELL + 0.75, CELL - 1.5, CELL - 1.5);
    }
    const figure = el("figure", { class: "vx-map", ...attrs, "data-max": fmt(row[best]) },
      canvas, el("figcaption", {}, `max ${fmt(row[best])}`));
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", `${caption}: largest weight ${fmt(row[best])} on ${tokenName(best)}`);
    return figure;
  }

  function colourBar(label, vmax) {
    const bar = el("canvas", { width: 120, height: 10, class: "vx-bar", role: "img",
      "aria-label": `${label} colour scale, 0 to ${fmt(vmax)}, square-root spacing` });
    const ctx = bar.getContext("2d");
    for (let x = 0; x < 120; x++) { ctx.fillStyle = colour(x / 119); ctx.fillRect(x, 0, 1, 10); }
    return el("div", { class: "vx-scale" }, el("span", {}, label), el("span", {}, "0"), bar,
      el("span", { class: "vx-vmax" }, fmt(vmax)));
  }

  function maxOver(rows) {
    let m = 1e-3;
    for (const row of rows) for (let k = PREFIX; k < T; k++) m = Math.max(m, row[k]);
    return m;
  }

  function render() {
    for (const b of picker.querySelectorAll("button")) {
      b.setAttribute("aria-pressed", String(Number(b.dataset.canvas) === state.canvas));
    }
    drawBig();
    const rows = [], rolls = [];
    for (const [name] of MODELS) {
      rolls.push(rolloutRow(name));
      for (let l = 0; l < L; l++) for (let h = 0; h < H; h++) rows.push(attentionRow(name, l, h));
    }
    // one colour scale for every attention map of both models, one for the rollouts: 0 to the
    // largest weight on a patch among them (never a per-map stretch)
    const vmax = maxOver(rows), rmax = maxOver(rolls);
    const canvas = D.canvases[state.canvas];
    readout.textContent = `Test canvas ${canvas.index} (digit ${canvas.label}); query: ${tokenName(state.query)}.`;
    readout.setAttribute("data-query", String(state.query));
    scales.replaceChildren(colourBar("attention", vmax), colourBar("rollout", rmax),
      el("p", { class: "vx-note" }, "Colours: square-root scale, shared by both models."));
    panels.replaceChildren();
    for (const [name, title] of MODELS) {
      const info = canvas[name];
      const grid = el("div", { class: "vx-grid" }, el("span", {}, ""));
      for (let h = 0; h < H; h++) grid.append(el("span", {}, `head ${h + 1}`));
      for (let l = 0; l < L; l++) {
        grid.append(el("span", { class: "vx-row" }, `layer ${l + 1}`));
        for (let h = 0; h < H; h++) {
          const row = attentionRow(name, l, h);
          const map = smallMap(row, vmax, { "data-model": name, "data-layer": l, "data-head": h },
            `${name}, layer ${l + 1}, head ${h + 1}`);
          map.setAttribute("data-cls", fmt(row[0]));
          map.querySelector("figcaption").append(el("br"), `[CLS] ${fmt(row[0])}`);
          grid.append(map);
        }
      }
      const roll = el("div", { class: "vx-roll" },
        smallMap(rolloutRow(name), rmax, { "data-model": name, "data-rollout": "1" },
          `${name}, rollout through all layers`),
        el("span", {}, "rollout through all layers (its own colour scale)"));
      panels.append(el("section", { class: "vx-panel", "data-model": name },
        el("h3", {}, title),
        el("p", {}, `predicts ${info.prediction} (probability ${info.confidence.toFixed(2)}); ` +
          `the digit is ${canvas.label}`),
        grid, roll));
    }
  }

  state.query = defaultQuery(0);
  render();
})();
