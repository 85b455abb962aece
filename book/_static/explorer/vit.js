// The forward pass of vitedu's VisionTransformer in plain JavaScript (no library, no network), for the
// attention explorer (book/explorer.md). It computes exactly what vitedu/vit.py, blocks.py,
// attention.py and patching.py compute, in float64 from the stored float32 weights:
//
//   pixels in [0, 1] -> (x - mean) / std -> 4x4 patches, each times patch_embed.proj (a conv with
//   kernel = stride = P is a matmul) -> [CLS] first, + pos_embed -> L pre-norm blocks
//   x = x + proj(MHSA(LN1(x))), x = x + fc2(GELU(fc1(LN2(x)))) -> final LN -> head on [CLS].
//
// GELU is the exact one (erf), as nn.GELU(); LayerNorm's eps comes from the model. Besides the logits
// it returns every layer's attention weights (depth, heads, tokens, tokens) and their rollout
// (vitedu.interpret.attention_rollout: heads averaged, (A + I) / 2, layers chained).
// tests/test_explorer_browser.py runs it in headless Chromium and compares with vitedu.
(function (root) {
  "use strict";

  // --- weights ------------------------------------------------------------------------------------
  function base64Bytes(text) {
    if (typeof atob === "function") {
      const binary = atob(text);
      const bytes = new Uint8Array(binary.length);
      for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
      return bytes;
    }
    return new Uint8Array(Buffer.from(text, "base64")); // Node, for quick checks
  }

  function halfToFloat(h) {
    const sign = h & 0x8000 ? -1 : 1, exponent = (h >> 10) & 0x1f, fraction = h & 0x3ff;
    if (exponent === 0) return sign * fraction * Math.pow(2, -24); // subnormal
    if (exponent === 31) return fraction ? NaN : sign * Infinity;
    return sign * (1 + fraction / 1024) * Math.pow(2, exponent - 15);
  }

  // {name: Float64Array} from the data file's entry: tensors in state_dict order, row-major.
  function loadWeights(data, which) {
    const entry = data.weights[which];
    const bytes = base64Bytes(entry.base64);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const size = entry.dtype === "float32" ? 4 : 2;
    const out = {};
    let offset = 0;
    for (const [name, shape] of data.tensors) {
      const n = shape.reduce((a, b) => a * b, 1);
      const values = new Float64Array(n);
      for (let i = 0; i < n; i++, offset += size) {
        values[i] = size === 4 ? view.getFloat32(offset, true) : halfToFloat(view.getUint16(offset, true));
      }
      out[name] = values;
    }
    if (offset !== bytes.byteLength) throw new Error(`weights: ${bytes.byteLength - offset} bytes left over`);
    return out;
  }

  // --- the exact GELU -----------------------------------------------------------------------------
  // erf to float64 accuracy: its Taylor series below 3 (terms stay small, so little cancellation), and
  // above, erfc's continued fraction (Lentz's method), which converges fast there.
  function erf(x) {
    const ax = Math.abs(x);
    if (ax < 3) {
      let term = x, sum = x;
      const x2 = x * x;
      for (let n = 1; n < 100; n++) {
        term *= -x2 / n;
        const add = term / (2 * n + 1);
        sum += add;
        if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
      }
      return (2 / Math.sqrt(Math.PI)) * sum;
    }
    if (ax > 27) return Math.sign(x);
    // erfc(a) = exp(-a^2) / sqrt(pi) * 1 / (a + (1/2) / (a + 1 / (a + (3/2) / (a + 2 / (a + ...)))))
    const tiny = 1e-300;
    let f = ax, c = ax, d = 0;
    for (let n = 1; n < 200; n++) {
      const a = n / 2;
      d = ax + a * d;
      d = Math.abs(d) < tiny ? 1 / tiny : 1 / d;
      c = ax + a / c;
      if (Math.abs(c) < tiny) c = tiny;
      const delta = c * d;
      f *= delta;
      if (Math.abs(delta - 1) < 1e-16) break;
    }
    const erfc = Math.exp(-ax * ax) / Math.sqrt(Math.PI) / f;
    return Math.sign(x) * (1 - erfc);
  }
  const gelu = (x) => 0.5 * x * (1 + erf(x / Math.SQRT2));

  // --- layers on (tokens, dim) matrices stored row-major in Float64Arrays ---------------------------
  // y = x W^T + b, with W (out, in) as nn.Linear stores it
  function linear(x, rows, inDim, W, b, outDim) {
    const y = new Float64Array(rows * outDim);
    for (let t = 0; t < rows; t++) {
      const xo = t * inDim;
      for (let o = 0; o < outDim; o++) {
        const wo = o * inDim;
        let s = b ? b[o] : 0;
        for (let i = 0; i < inDim; i++) s += x[xo + i] * W[wo + i];
        y[t * outDim + o] = s;
      }
    }
    return y;
  }

  // nn.LayerNorm: biased variance, eps inside the square root
  function layerNorm(x, rows, dim, w, b, eps) {
    const y = new Float64Array(rows * dim);
    for (let t = 0; t < rows; t++) {
      const o = t * dim;
      let mean = 0;
      for (let i = 0; i < dim; i++) mean += x[o + i];
      mean /= dim;
      let variance = 0;
      for (let i = 0; i < dim; i++) variance += (x[o + i] - mean) ** 2;
      variance /= dim;
      const inv = 1 / Math.sqrt(variance + eps);
      for (let i = 0; i < dim; i++) y[o + i] = (x[o + i] - mean) * inv * w[i] + b[i];
    }
    return y;
  }

  // --- the model ----------------------------------------------------------------------------------
  // pixels: H * W values in [0, 1], row by row (one channel). Returns logits, probabilities, the
  // attention (depth * heads * T * T, in that order) and the rollout (T * T).
  function forward(W, cfg, pixels) {
    const P = cfg.patch_size, G = cfg.grid, S = cfg.img_size, D = cfg.embed_dim;
    const T = cfg.tokens, H = cfg.heads, dk = D / H, L = cfg.depth, M = cfg.mlp_hidden;
    const eps = cfg.norm_eps, mean = cfg.mean[0], std = cfg.std[0];
    if (cfg.in_chans !== 1 || T !== 1 + G * G) throw new Error("vit.js computes a one-channel ViT with [CLS]");
    if (pixels.length !== S * S) throw new Error(`expected ${S * S} pixels, got ${pixels.length}`);

    // patch embedding: token 1 + r * G + c is patch (r, c), its pixels in (row, column) order, as
    // patch_embed.proj.weight (D, 1, P, P) flattens
    const x = new Float64Array(T * D);
    const conv = W["patch_embed.proj.weight"], convBias = W["patch_embed.proj.bias"];
    const pos = W.pos_embed, cls = W.cls_token;
    const patch = new Float64Array(P * P);
    for (let d = 0; d < D; d++) x[d] = cls[d] + pos[d];
    for (let r = 0; r < G; r++) {
      for (let c = 0; c < G; c++) {
        for (let i = 0; i < P; i++) {
          for (let j = 0; j < P; j++) patch[i * P + j] = (pixels[(r * P + i) * S + c * P + j] - mean) / std;
        }
        const t = 1 + r * G + c;
        for (let d = 0; d < D; d++) {
          let s = convBias[d];
          for (let k = 0; k < P * P; k++) s += conv[d * P * P + k] * patch[k];
          x[t * D + d] = s + pos[t * D + d];
        }
      }
    }

    const attention = new Float64Array(L * H * T * T);
    const scale = 1 / Math.sqrt(dk);
    for (let l = 0; l < L; l++) {
      const p = `blocks.${l}.`;
      // attention: qkv is [q | k | v], head h takes features [h * dk, (h + 1) * dk) of each
      const h1 = layerNorm(x, T, D, W[p + "norm1.weight"], W[p + "norm1.bias"], eps);
      const qkv = linear(h1, T, D, W[p + "attn.qkv.weight"], W[p + "attn.qkv.bias"], 3 * D);
      const merged = new Float64Array(T * D);
      const logits = new Float64Array(T);
      for (let h = 0; h < H; h++) {
        for (let q = 0; q < T; q++) {
          const qo = q * 3 * D + h * dk;
          let max = -Infinity;
          for (let k = 0; k < T; k++) {
            const ko = k * 3 * D + D + h * dk;
            let s = 0;
            for (let i = 0; i < dk; i++) s += qkv[qo + i] * qkv[ko + i];
            logits[k] = s * scale;
            if (logits[k] > max) max = logits[k];
          }
          let sum = 0;
          for (let k = 0; k < T; k++) { logits[k] = Math.exp(logits[k] - max); sum += logits[k]; }
          const row = ((l * H + h) * T + q) * T;
          const mo = q * D + h * dk;
          for (let i = 0; i < dk; i++) merged[mo + i] = 0;
          for (let k = 0; k < T; k++) {
            const a = logits[k] / sum, vo = k * 3 * D + 2 * D + h * dk;
            attention[row + k] = a;
            for (let i = 0; i < dk; i++) merged[mo + i] += a * qkv[vo + i];
          }
        }
      }
      const attended = linear(merged, T, D, W[p + "attn.proj.weight"], W[p + "attn.proj.bias"], D);
      for (let i = 0; i < T * D; i++) x[i] += attended[i];
      // MLP
      const h2 = layerNorm(x, T, D, W[p + "norm2.weight"], W[p + "norm2.bias"], eps);
      const hidden = linear(h2, T, D, W[p + "mlp.fc1.weight"], W[p + "mlp.fc1.bias"], M);
      for (let i = 0; i < hidden.length; i++) hidden[i] = gelu(hidden[i]);
      const out = linear(hidden, T, M, W[p + "mlp.fc2.weight"], W[p + "mlp.fc2.bias"], D);
      for (let i = 0; i < T * D; i++) x[i] += out[i];
    }
    const normed = layerNorm(x.subarray(0, D), 1, D, W["norm.weight"], W["norm.bias"], eps); // [CLS] only
    const logits = Array.from(linear(normed, 1, D, W["head.weight"], W["head.bias"], cfg.num_classes));
    const top = Math.max(...logits);
    const exps = logits.map((v) => Math.exp(v - top));
    const total = exps.reduce((a, b) => a + b, 0);
    const probabilities = exps.map((v) => v / total);
    return { logits, probabilities, attention, rollout: rollout(attention, L, H, T) };
  }

  // vitedu.interpret.attention_rollout(maps)[query]: heads averaged, residual as (A + I) / 2, rows
  // renormalised, then rollout = A'_L ... A'_1.
  function rollout(attention, L, H, T) {
    let result = null;
    for (let l = 0; l < L; l++) {
      const fused = new Float64Array(T * T);
      for (let h = 0; h < H; h++) {
        const o = (l * H + h) * T * T;
        for (let i = 0; i < T * T; i++) fused[i] += attention[o + i] / H;
      }
      for (let q = 0; q < T; q++) {
        fused[q * T + q] += 1;
        let sum = 0;
        for (let k = 0; k < T; k++) { fused[q * T + k] /= 2; sum += fused[q * T + k]; }
        for (let k = 0; k < T; k++) fused[q * T + k] /= sum;
      }
      if (result === null) { result = fused; continue; }
      const next = new Float64Array(T * T);
      for (let i = 0; i < T; i++) {
        for (let m = 0; m < T; m++) {
          const a = fused[i * T + m];
          for (let j = 0; j < T; j++) next[i * T + j] += a * result[m * T + j];
        }
      }
      result = next;
    }
    return result;
  }

  const api = { loadWeights, forward, rollout, erf, gelu };
  if (typeof module === "object" && module.exports) module.exports = api;
  else root.VITEDU_VIT = api;
})(typeof window !== "undefined" ? window : this);
