// The attention explorer and "draw your own" (book/explorer.md): plain JavaScript, no library, no
// network. It reads window.VITEDU_EXPLORER (explorer_data.js, written by tools/make_explorer_data.py:
// the shipped weights, the untrained ones, a few test canvases) and runs the model itself with
// window.VITEDU_VIT (vit.js): every prediction, attention map and rollout on the page is computed here.
(function () {
  "use strict";
  const D = window.VITEDU_EXPLORER, VIT = window.VITEDU_VIT;
  const root = document.getElementById("vitedu-explorer");
  const drawRoot = document.getElementById("vitedu-draw");
  if (!root && !drawRoot) return;
  if (!D || !VIT) {
    for (const r of [root, drawRoot]) if (r) r.textContent = "The explorer's data or model (explorer_data.js, vit.js) did not load.";
    return;
  }
  const cfg = D.config;
  const S = cfg.img_size, P = cfg.patch_size, G = cfg.grid, T = cfg.tokens, L = cfg.depth, H = cfg.heads;
  const PREFIX = T - G * G; // 1: the [CLS] token comes first
  const MODELS = [
    ["trained", "Trained", "the shipped weights"],
    ["untrained", "Untrained", "random weights (the recipe's initialisation, seed 0)"],
  ];
  const LEVELS = "0123456789abcdefg";
  const weights = {};
  for (const [name] of MODELS) weights[name] = VIT.loadWeights(D, name);
  // viridis, five stops, linearly interpolated
  const STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  const BOX = "#ff5722", QUERY = "#ff4081";

  // --- helpers ------------------------------------------------------------------------------------
  // The colour scale runs from 0 to vmax with square-root spacing (stated on the colour bars):
  // weights near the uniform 1/65 stay visible next to a head that puts 0.9 on one patch.
  function colour(v) {
    const x = Math.sqrt(Math.max(0, Math.min(1, v))) * (STOPS.length - 1);
    const i = Math.min(STOPS.length - 2, Math.floor(x));
    const f = x - i;
    const rgb = STOPS[i].map((a, j) => Math.round(a + f * (STOPS[i + 1][j] - a)));
    return `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`;
  }
  const fmt = (v) => v.toFixed(3);
  const patchName = (p) => `patch (${Math.floor(p / G)}, ${p % G})`;
  const tokenName = (t) => (t < PREFIX ? "[CLS]" : patchName(t - PREFIX));
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    for (const child of children) node.append(child);
    return node;
  }
  function results(source) {
    if (!source.results) {
      source.results = {};
      for (const [name] of MODELS) source.results[name] = VIT.forward(weights[name], cfg, source.pixels);
    }
    return source.results;
  }
  function argmax(values) {
    let best = 0;
    for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
    return best;
  }
  // the tight box (top, left, height, width) around pixels of at least `level`, or null
  function inkBox(pixels, level) {
    let top = S, left = S, bottom = -1, right = -1;
    for (let y = 0; y < S; y++) for (let x = 0; x < S; x++) {
      if (pixels[y * S + x] >= level) {
        top = Math.min(top, y); bottom = Math.max(bottom, y); left = Math.min(left, x); right = Math.max(right, x);
      }
    }
    return bottom < 0 ? null : [top, left, bottom - top + 1, right - left + 1];
  }
  function drawPixels(ctx, pixels, scale) {
    for (let y = 0; y < S; y++) for (let x = 0; x < S; x++) {
      const g = Math.round(255 * pixels[y * S + x]);
      ctx.fillStyle = `rgb(${g},${g},${g})`;
      ctx.fillRect(x * scale, y * scale, scale, scale);
    }
  }
  // one row of weights over the patch grid, the canvas's ink on top, the digit's box and the query
  function drawMap(canvas, source, row, vmax, query, cursor) {
    const ctx = canvas.getContext("2d");
    const s = canvas.width / S, p = canvas.width / G;
    for (let k = 0; k < G * G; k++) {
      ctx.fillStyle = colour(row[PREFIX + k] / vmax);
      ctx.fillRect((k % G) * p, Math.floor(k / G) * p, p, p);
    }
    for (let y = 0; y < S; y++) for (let x = 0; x < S; x++) {
      const v = source.pixels[y * S + x];
      if (v > 0) { ctx.fillStyle = `rgba(255,255,255,${(0.7 * v).toFixed(3)})`; ctx.fillRect(x * s, y * s, s, s); }
    }
    const width = Math.max(1.5, canvas.width / 90);
    if (source.box) {
      const [top, left, h, w] = source.box;
      ctx.strokeStyle = BOX; ctx.lineWidth = width; ctx.setLineDash([3 * width, 2 * width]);
      ctx.strokeRect(left * s, top * s, w * s, h * s);
      ctx.setLineDash([]);
    }
    // the cursor first and the query last: where they meet (the enlarged map opens with the cursor on the query,
    // and a finger leaves it there) the query stays pink
    for (const [t, style] of [[cursor, "#ffffff"], [query, QUERY]]) {
      if (t === undefined || t === null || t < PREFIX) continue;
      const k = t - PREFIX;
      ctx.strokeStyle = style; ctx.lineWidth = width;
      ctx.strokeRect((k % G) * p + width / 2, Math.floor(k / G) * p + width / 2, p - width, p - width);
    }
  }
  function colourBar(label, vmax) {
    const bar = el("canvas", { width: 120, height: 10, class: "ve-bar", role: "img",
      "aria-label": `${label} colour scale, 0 to ${fmt(vmax)}, square-root spacing` });
    const ctx = bar.getContext("2d");
    for (let x = 0; x < 120; x++) { ctx.fillStyle = colour(x / 119); ctx.fillRect(x, 0, 1, 10); }
    return el("div", { class: "ve-scale" }, el("span", { class: "ve-scale-name" }, label), el("span", {}, "0"), bar,
      el("span", { class: "ve-vmax" }, fmt(vmax)));
  }
  // the position of a pointer event on a square canvas, as a patch index, or null outside
  function patchAt(canvas, event) {
    const rect = canvas.getBoundingClientRect();
    const col = Math.floor(((event.clientX - rect.left) / rect.width) * G);
    const row = Math.floor(((event.clientY - rect.top) / rect.height) * G);
    return row < 0 || row >= G || col < 0 || col >= G ? null : row * G + col;
  }
  function maxOver(rows) {
    let m = 1e-3;
    for (const row of rows) for (let k = PREFIX; k < T; k++) m = Math.max(m, row[k]);
    return m;
  }

  // --- the sources: test canvases and the reader's drawing ----------------------------------------
  const sources = D.canvases.map((c) => ({
    kind: "test", index: c.index, label: c.label, box: c.box, mistake: c.mistake,
    pixels: Float64Array.from(c.pixels, (ch) => LEVELS.indexOf(ch) / 16),
  }));
  const drawing = { kind: "drawing", label: null, box: null, pixels: new Float64Array(S * S), drawn: false };

  // The page's forward pass, for the tests and the curious: pixels (1,024 values in [0, 1], row by row).
  window.VITEDU_EXPLORER_PAGE = {
    forward(pixels, which) {
      const r = VIT.forward(weights[which || "trained"], cfg, Float64Array.from(pixels));
      return { logits: r.logits, probabilities: r.probabilities,
        attention: Array.from(r.attention), rollout: Array.from(r.rollout) };
    },
    drawnPixels: () => Array.from(drawing.pixels),
    erf: VIT.erf,
  };

  // --- the explorer -------------------------------------------------------------------------------
  let showDrawing = () => {};
  let refreshDrawingInExplorer = () => {};
  if (root) {
    const state = { source: sources[0], query: 0, lastPatch: null };
    const picker = el("div", { class: "ve-picker", role: "group", "aria-label": "canvases" });
    const big = el("canvas", { class: "ve-big", width: 256, height: 256, tabindex: "0", role: "img" });
    const clsButton = el("button", { type: "button", class: "ve-cls", "aria-pressed": "false" }, "[CLS] as the query");
    const readout = el("p", { class: "ve-readout", "aria-live": "polite" });
    const scales = el("div", { class: "ve-scales" });
    const panels = el("div", { class: "ve-panels" });
    const tip = el("div", { class: "ve-tip", role: "tooltip", hidden: "" });
    const dialog = el("dialog", { class: "ve-dialog", "aria-labelledby": "ve-dialog-title" });
    const mistakes = D.canvases.filter((c) => c.mistake).length;
    const accuracy = (100 * (1 - D.test.wrong / D.test.canvases)).toFixed(1);
    root.replaceChildren(
      picker,
      el("p", { class: "ve-note ve-picker-note" }, `The first test canvas of each digit, and (red, dashed) the first ` +
        `${mistakes} that the trained model gets wrong: it reads ${(D.test.canvases - D.test.wrong).toLocaleString("en")} of the ` +
        `${D.test.canvases.toLocaleString("en")} test canvases right (${accuracy} %).`),
      el("div", { class: "ve-top" }, big, el("div", { class: "ve-side" }, clsButton, readout, scales,
        el("p", { class: "ve-note" }, "Hover over a map for its values; click or tap it (or focus it and press Enter) to enlarge it."))),
      panels, tip, dialog,
    );

    function defaultQuery(source) {
      if (!source.box) return 0;
      const [top, left, h, w] = source.box; // the patch at the centre of the digit
      const r = Math.min(G - 1, Math.floor((top + h / 2) / P)), c = Math.min(G - 1, Math.floor((left + w / 2) / P));
      return PREFIX + r * G + c;
    }
    function describe(source) {
      const r = results(source).trained;
      const predicted = argmax(r.probabilities);
      if (source.kind === "drawing") return `Your drawing: the trained model reads ${predicted}.`;
      const verdict = source.mistake ? ` \u2014 a mistake (the digit is ${source.label})` : "";
      return `Test canvas ${source.index}, the digit ${source.label}: the trained model reads ${predicted}${verdict}.`;
    }

    function addPickerButton(source, key) {
      const thumb = el("canvas", { width: S, height: S });
      let caption = source.kind === "drawing" ? "yours" : `digit ${source.label}`;
      if (source.mistake) caption = `${source.label}, read as ${argmax(results(source).trained.probabilities)}`;
      const button = el("button", { type: "button", "data-canvas": key,
        title: source.kind === "drawing" ? "your drawing" : `test canvas ${source.index}` +
          (source.mistake ? ": the trained model gets it wrong" : "") }, thumb, el("span", {}, caption));
      if (source.mistake) button.classList.add("ve-mistake");
      button.addEventListener("click", () => select(source));
      picker.append(button);
      drawPixels(thumb.getContext("2d"), source.pixels, 1);
      return button;
    }
    sources.forEach((source, c) => addPickerButton(source, String(c)));
    let drawingButton = null;

    function select(source) {
      state.source = source;
      state.query = defaultQuery(source);
      state.lastPatch = state.query >= PREFIX ? state.query : null;
      render();
    }
    showDrawing = () => {
      if (!drawingButton) drawingButton = addPickerButton(drawing, "drawing");
      drawPixels(drawingButton.querySelector("canvas").getContext("2d"), drawing.pixels, 1);
      select(drawing);
      root.scrollIntoView({ behavior: "smooth", block: "start" });
    };
    refreshDrawingInExplorer = () => {
      if (drawingButton) drawPixels(drawingButton.querySelector("canvas").getContext("2d"), drawing.pixels, 1);
      if (state.source === drawing) render();
    };

    function setQuery(t) {
      state.query = t;
      if (t >= PREFIX) state.lastPatch = t;
      render();
    }
    big.addEventListener("click", (event) => {
      const k = patchAt(big, event);
      if (k !== null) setQuery(PREFIX + k);
    });
    big.addEventListener("keydown", (event) => {
      const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
      if (!(event.key in moves)) return;
      event.preventDefault();
      const k = (state.query >= PREFIX ? state.query : (state.lastPatch ?? PREFIX + (G * G >> 1))) - PREFIX;
      const r = Math.max(0, Math.min(G - 1, Math.floor(k / G) + moves[event.key][0]));
      const c = Math.max(0, Math.min(G - 1, (k % G) + moves[event.key][1]));
      setQuery(PREFIX + r * G + c);
    });
    clsButton.addEventListener("click", () => {
      if (state.query < PREFIX) setQuery(state.lastPatch ?? (defaultQuery(state.source) || PREFIX + (G * G >> 1)));
      else setQuery(0);
    });

    function drawBig() {
      const ctx = big.getContext("2d");
      const s = big.width / S, p = big.width / G;
      drawPixels(ctx, state.source.pixels, s);
      ctx.strokeStyle = "rgba(255,255,255,0.25)";
      ctx.lineWidth = 1;
      for (let i = 1; i < G; i++) {
        ctx.beginPath(); ctx.moveTo(i * p, 0); ctx.lineTo(i * p, big.height); ctx.stroke();
        ctx.beginPath(); ctx.moveTo(0, i * p); ctx.lineTo(big.width, i * p); ctx.stroke();
      }
      if (state.source.box) {
        const [top, left, h, w] = state.source.box;
        ctx.strokeStyle = BOX; ctx.lineWidth = 2; ctx.setLineDash([6, 4]);
        ctx.strokeRect(left * s, top * s, w * s, h * s);
        ctx.setLineDash([]);
      }
      if (state.query >= PREFIX) {
        const k = state.query - PREFIX;
        ctx.strokeStyle = QUERY; ctx.lineWidth = 3;
        ctx.strokeRect((k % G) * p + 1.5, Math.floor(k / G) * p + 1.5, p - 3, p - 3);
      }
      big.setAttribute("aria-label", `the canvas, 8 by 8 patches; the query is ${tokenName(state.query)}. ` +
        "Click a patch or use the arrow keys to pick the query.");
    }

    // one query's weights: a view into the forward pass's attention (depth, heads, T, T) or rollout
    function attentionRow(name, l, h) {
      const start = ((l * H + h) * T + state.query) * T;
      return results(state.source)[name].attention.subarray(start, start + T);
    }
    function rolloutRow(name) {
      return results(state.source)[name].rollout.subarray(state.query * T, (state.query + 1) * T);
    }
    function mapLabel(name, l, h) {
      return l === null ? `${name}, rollout through all layers` : `${name}, layer ${l + 1}, head ${h + 1}`;
    }
    function rowOf(name, l, h) { return l === null ? rolloutRow(name) : attentionRow(name, l, h); }

    let vmax = 1, rmax = 1;
    function smallMap(name, l, h) {
      const row = rowOf(name, l, h);
      const scale = l === null ? rmax : vmax;
      const canvas = el("canvas", { width: 128, height: 128 });
      drawMap(canvas, state.source, row, scale, state.query, null);
      const best = PREFIX + argmax(row.subarray(PREFIX));
      const attrs = { class: "ve-map", tabindex: "0", role: "button", "data-model": name,
        "data-max": fmt(row[best]), "data-cls": fmt(row[0]),
        "aria-label": `${mapLabel(name, l, h)}: [CLS] ${fmt(row[0])}, largest weight ${fmt(row[best])} on ` +
          `${tokenName(best)}. Press Enter to enlarge.` };
      if (l === null) attrs["data-rollout"] = "1";
      else { attrs["data-layer"] = String(l); attrs["data-head"] = String(h); }
      const title = l === null ? "rollout" : `L${l + 1} H${h + 1}`;
      const figure = el("figure", attrs, canvas,
        el("figcaption", {}, el("span", { class: "ve-title" }, title), " ", `[CLS] ${fmt(row[0])}`));
      canvas.addEventListener("mousemove", (event) => {
        const k = patchAt(canvas, event);
        if (k === null) { tip.hidden = true; return; }
        tip.textContent = `${mapLabel(name, l, h)}: ${fmt(row[PREFIX + k])} on ${patchName(k)}`;
        tip.dataset.value = fmt(row[PREFIX + k]);
        tip.hidden = false;
        const x = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 4);
        tip.style.left = `${Math.max(4, x)}px`;
        tip.style.top = `${event.clientY + 16}px`;
      });
      canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
      figure.addEventListener("click", () => enlarge(name, l, h, figure));
      figure.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") { event.preventDefault(); enlarge(name, l, h, figure); }
      });
      return figure;
    }

    // --- one map enlarged: both models' map of that layer and head, side by side ------------------
    const dialogState = { l: null, h: null, cursor: null, opener: null };
    function enlarge(name, l, h, opener) {
      Object.assign(dialogState, { l, h, opener, cursor: state.query >= PREFIX ? state.query : PREFIX });
      tip.hidden = true;
      renderDialog();
      if (!dialog.open) dialog.showModal();
      dialog.querySelector(".ve-dialog-maps").focus();
    }
    function renderDialog() {
      const { l, h, cursor } = dialogState;
      const what = l === null ? "Rollout through all layers" : `Layer ${l + 1}, head ${h + 1}`;
      const title = el("h3", { id: "ve-dialog-title" }, `${what}; query: ${tokenName(state.query)}`);
      const maps = el("div", { class: "ve-dialog-maps", tabindex: "0",
        "aria-label": "the enlarged maps: move over them, or use the arrow keys, to read a patch's weight" });
      const value = el("p", { class: "ve-dialog-value", "aria-live": "polite" });
      const figures = [];
      for (const [name, label] of MODELS) {
        const row = rowOf(name, l, h);
        const canvas = el("canvas", { width: 320, height: 320, "data-model": name });
        drawMap(canvas, state.source, row, l === null ? rmax : vmax, state.query, cursor);
        const best = PREFIX + argmax(row.subarray(PREFIX));
        figures.push([canvas, row]);
        maps.append(el("figure", { class: "ve-big-map", "data-model": name }, canvas,
          el("figcaption", {}, `${label}: [CLS] ${fmt(row[0])}; largest ${fmt(row[best])} on ${tokenName(best)}`)));
      }
      function show(t) {
        dialogState.cursor = t;
        const parts = figures.map(([, row], i) => `${MODELS[i][1].toLowerCase()} ${fmt(row[t])}`);
        value.textContent = `${tokenName(t)}: ${parts.join(", ")}`;
        value.dataset.token = String(t);
        for (const [canvas, row] of figures) drawMap(canvas, state.source, row, l === null ? rmax : vmax, state.query, t);
      }
      for (const [canvas] of figures) {
        for (const type of ["pointerdown", "pointermove"]) { // a mouse moves, a finger taps or drags
          canvas.addEventListener(type, (event) => {
            const k = patchAt(canvas, event);
            if (k !== null && PREFIX + k !== dialogState.cursor) show(PREFIX + k);
          });
        }
      }
      maps.addEventListener("keydown", (event) => {
        const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
        if (!(event.key in moves)) return;
        event.preventDefault();
        const k = dialogState.cursor - PREFIX;
        const r = Math.max(0, Math.min(G - 1, Math.floor(k / G) + moves[event.key][0]));
        const c = Math.max(0, Math.min(G - 1, (k % G) + moves[event.key][1]));
        show(PREFIX + r * G + c);
      });
      const close = el("button", { type: "button", class: "ve-close" }, "Close");
      close.addEventListener("click", () => dialog.close());
      dialog.replaceChildren(title, maps, value,
        el("p", { class: "ve-note" }, `Both on the shared scale, 0 to ${fmt(l === null ? rmax : vmax)} ` +
          "(square-root spacing). Escape closes."), close);
      show(cursor);
    }
    dialog.addEventListener("close", () => { if (dialogState.opener && dialogState.opener.isConnected) dialogState.opener.focus(); });
    dialog.addEventListener("click", (event) => { if (event.target === dialog) dialog.close(); }); // the backdrop
    // Escape closes it even where the theme's own key handler cancels the browser's default
    dialog.addEventListener("keydown", (event) => { if (event.key === "Escape") { event.preventDefault(); dialog.close(); } });

    function render() {
      for (const b of picker.querySelectorAll("button")) {
        const key = b.dataset.canvas;
        const source = key === "drawing" ? drawing : sources[Number(key)];
        b.setAttribute("aria-pressed", String(source === state.source));
      }
      clsButton.setAttribute("aria-pressed", String(state.query < PREFIX));
      drawBig();
      const rows = [], rolls = [];
      for (const [name] of MODELS) {
        rolls.push(rolloutRow(name));
        for (let l = 0; l < L; l++) for (let h = 0; h < H; h++) rows.push(attentionRow(name, l, h));
      }
      // one colour scale for every attention map of both models, one for the rollouts: 0 to the
      // largest weight on a patch among them (never a per-map stretch)
      vmax = maxOver(rows); rmax = maxOver(rolls);
      readout.textContent = `${describe(state.source)} Query: ${tokenName(state.query)}.`;
      readout.setAttribute("data-query", String(state.query));
      scales.replaceChildren(colourBar("attention", vmax), colourBar("rollout", rmax),
        el("p", { class: "ve-note" }, "Square-root colour scales, shared by both models. Dashed box: the digit" +
          (state.source.kind === "drawing" ? " (here: your ink)" : "") + "; pink: the query."));
      panels.replaceChildren();
      for (const [name, title, what] of MODELS) {
        const r = results(state.source)[name];
        const predicted = argmax(r.probabilities);
        const truth = state.source.label;
        const grid = el("div", { class: "ve-grid" });
        for (let l = 0; l < L; l++) for (let h = 0; h < H; h++) grid.append(smallMap(name, l, h));
        const verdict = truth === null ? "" : predicted === truth ? ": right" : `: wrong, the digit is ${truth}`;
        panels.append(el("section", { class: "ve-panel", "data-model": name },
          el("h3", {}, title), el("p", { class: "ve-what" }, what),
          el("p", { class: "ve-pred", "data-prediction": String(predicted) },
            `predicts ${predicted} (probability ${r.probabilities[predicted].toFixed(2)})${verdict}`),
          grid,
          el("div", { class: "ve-roll" }, smallMap(name, null, null),
            el("span", {}, "rollout through all layers (its own scale)"))));
      }
      if (dialog.open) renderDialog();
    }
    select(sources[0]);
  }

  // --- draw your own --------------------------------------------------------------------------------
  if (drawRoot) {
    const SIDE = 288, SCALE = SIDE / S; // 9 screen pixels per model pixel
    // The pen is as wide as the strokes of the training digits (1.4 model pixels), and the dashed square is
    // where its centre goes: strokes drawn out to the square's edges leave ink DIGIT pixels tall, as tall as
    // the training digits. tests/test_explorer_browser.py measures both against the training digits.
    const DIGIT = 8, PEN = 1.4, SQUARE = DIGIT - PEN;
    const pad = el("canvas", { id: "draw-digit", width: SIDE, height: SIDE, role: "img",
      "aria-label": "a 32 by 32 pixel canvas to draw a digit on with the mouse or a finger" });
    const ink = document.createElement("canvas"); // the strokes alone, what the model reads
    ink.width = ink.height = SIDE;
    const inkCtx = ink.getContext("2d");
    const clear = el("button", { type: "button", class: "ve-clear" }, "Clear");
    const explore = el("button", { type: "button", class: "ve-explore", disabled: "" }, "Explore it in the maps above");
    const prediction = el("div", { id: "draw-prediction", "aria-live": "polite", "data-prediction": "" });
    drawRoot.replaceChildren(el("div", { class: "ve-draw-row" },
      el("div", { class: "ve-pad" }, pad, el("div", { class: "ve-buttons" }, clear, explore),
        el("p", { class: "ve-note" }, "Dashed square: draw your digit this size, anywhere; with the pen's width, " +
          `its ink is then ${DIGIT} pixels tall, the size of the digits the model was trained on. ` +
          "The grid: the model's 4\u00d74-pixel patches.")),
      prediction));

    function resetInk() {
      inkCtx.fillStyle = "#000"; inkCtx.fillRect(0, 0, SIDE, SIDE);
      drawing.pixels = new Float64Array(S * S); drawing.results = null; drawing.drawn = false; drawing.box = null;
    }
    function paintPad() {
      const ctx = pad.getContext("2d");
      ctx.drawImage(ink, 0, 0);
      ctx.strokeStyle = "rgba(255,255,255,0.18)"; ctx.lineWidth = 1;
      for (let i = 1; i < G; i++) {
        const p = i * P * SCALE + 0.5;
        ctx.beginPath(); ctx.moveTo(p, 0); ctx.lineTo(p, SIDE); ctx.stroke();
        ctx.beginPath(); ctx.moveTo(0, p); ctx.lineTo(SIDE, p); ctx.stroke();
      }
      ctx.strokeStyle = "rgba(255,255,255,0.55)"; ctx.setLineDash([5, 4]);
      ctx.strokeRect(6.5, 6.5, SQUARE * SCALE, SQUARE * SCALE);
      ctx.setLineDash([]);
    }
    // 32x32 intensities in [0, 1]: the mean of each 9x9 block of the strokes, as a canvas of the
    // task is a 32x32 grid of intensities; then vit.js normalises with pretrained_cfg's mean and std
    function downsample() {
      const data = inkCtx.getImageData(0, 0, SIDE, SIDE).data;
      const pixels = new Float64Array(S * S);
      for (let y = 0; y < SIDE; y++) for (let x = 0; x < SIDE; x++) {
        pixels[Math.floor(y / SCALE) * S + Math.floor(x / SCALE)] += data[(y * SIDE + x) * 4] / 255;
      }
      for (let i = 0; i < pixels.length; i++) pixels[i] = Math.min(1, pixels[i] / (SCALE * SCALE));
      return pixels;
    }

    const inputView = el("canvas", { width: 160, height: 160, class: "ve-input" });
    function showPrediction() {
      if (!drawing.drawn) {
        prediction.replaceChildren(el("p", { class: "ve-predicts" }, "Draw a digit: the prediction appears here."));
        prediction.dataset.prediction = "";
        prediction.removeAttribute("data-logits");
        return;
      }
      const r = results(drawing);
      const trained = r.trained, untrained = r.untrained;
      const predicted = argmax(trained.probabilities);
      const bars = el("div", { class: "ve-bars", role: "img",
        "aria-label": "probabilities: " + trained.probabilities.map((p, d) => `${d}: ${p.toFixed(2)}`).join(", ") });
      trained.probabilities.forEach((p, d) => {
        const fill = el("span", { class: "ve-fill" + (d === predicted ? " ve-top" : "") });
        fill.style.width = `${(100 * p).toFixed(1)}%`;
        bars.append(el("div", { class: "ve-barrow", "data-digit": String(d) }, el("span", { class: "ve-digit" }, String(d)),
          el("span", { class: "ve-track" }, fill), el("span", { class: "ve-prob" }, p.toFixed(2))));
      });
      // [CLS]'s rollout over the patches, on the drawing as the model reads it (32x32)
      const row = trained.rollout.subarray(0, T);
      const rmax = Math.max(1e-3, ...row.subarray(PREFIX));
      drawMap(inputView, drawing, row, rmax, null, null);
      const unPred = argmax(untrained.probabilities);
      prediction.replaceChildren(
        el("p", { class: "ve-predicts" }, `predicts ${predicted}`,
          el("span", { class: "ve-conf" }, ` (probability ${trained.probabilities[predicted].toFixed(2)})`)),
        el("div", { class: "ve-draw-out" }, bars,
          el("figure", { class: "ve-input-fig" }, inputView,
            el("figcaption", {}, "What the model reads (32\u00d732), under [CLS]'s attention rollout " +
              `(0 to ${fmt(rmax)}, square-root scale)`))),
        el("p", { class: "ve-note" }, `The untrained model, for comparison: predicts ${unPred} ` +
          `(${untrained.probabilities[unPred].toFixed(2)}), as random weights would.`));
      prediction.dataset.prediction = String(predicted);
      prediction.dataset.logits = JSON.stringify(trained.logits);
    }

    let pending = false;
    function update() {
      pending = false;
      drawing.pixels = downsample();
      drawing.results = null;
      drawing.drawn = drawing.pixels.some((v) => v > 0);
      drawing.box = inkBox(drawing.pixels, 0.25);
      showPrediction();
      explore.disabled = !drawing.drawn;
      refreshDrawingInExplorer();
    }
    function schedule() { if (!pending) { pending = true; requestAnimationFrame(update); } }

    let last = null;
    function point(event) {
      const rect = pad.getBoundingClientRect();
      return [((event.clientX - rect.left) / rect.width) * SIDE, ((event.clientY - rect.top) / rect.height) * SIDE];
    }
    function stroke(from, to) {
      inkCtx.strokeStyle = "#fff"; inkCtx.fillStyle = "#fff";
      inkCtx.lineWidth = PEN * SCALE; inkCtx.lineCap = "round"; inkCtx.lineJoin = "round";
      inkCtx.beginPath(); inkCtx.moveTo(from[0], from[1]); inkCtx.lineTo(to[0], to[1]); inkCtx.stroke();
      paintPad();
      schedule();
    }
    pad.addEventListener("pointerdown", (event) => {
      event.preventDefault();
      prediction.setAttribute("aria-busy", "true"); // screen readers hear the prediction when the stroke ends
      pad.setPointerCapture(event.pointerId);
      last = point(event);
      stroke(last, [last[0] + 0.01, last[1]]);
    });
    pad.addEventListener("pointermove", (event) => {
      if (last === null) return;
      const next = point(event);
      stroke(last, next);
      last = next;
    });
    for (const type of ["pointerup", "pointercancel"]) {
      pad.addEventListener(type, () => { last = null; prediction.setAttribute("aria-busy", "false"); });
    }
    clear.addEventListener("click", () => { resetInk(); paintPad(); update(); });
    explore.addEventListener("click", () => showDrawing());
    // for the tests: the pen's width, the dashed square's side and the ink's height, in model pixels
    window.VITEDU_EXPLORER_PAGE.pad = { pen: PEN, square: SQUARE, digit: DIGIT };
    resetInk();
    paintPad();
    showPrediction();
  }
})();
