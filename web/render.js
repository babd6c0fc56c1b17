// SPDX-License-Identifier: MIT
// WebGL2 combine of base + residual layers, in YUV planes, bit-exact with
// codec/pps-decoder.c: the base planes are upscaled with the codec's own
// fixed-point bilinear taps (codec/pps-upscale.c: Q8 positions, horizontal
// pass in Q8, vertical pass rounded from Q16; integer math in the shader,
// texelFetch only), each residual adds (r - 128) with a clamp, and only then
// BT.601 (limited range) turns YUV into RGB. Summing on RGB textures would
// clip the residual (measured -4 to -6 dB).

const VERTEX = `#version 300 es
out vec2 pos;
void main() {
  vec2 p = vec2(float((gl_VertexID & 1) << 2) - 1.0, float((gl_VertexID & 2) << 1) - 1.0);
  gl_Position = vec4(p, 0.0, 1.0);
}`;

const FRAGMENT = `#version 300 es
precision highp float;
precision highp int;
precision highp usampler2D;
uniform usampler2D base[3];
uniform usampler2D res1[3];
uniform usampler2D res2[3];
uniform usampler2D res3[3];
uniform ivec2 outSize;   // full-resolution luma size
uniform ivec2 baseSize;  // base luma size
uniform int layers;      // 1 = base only
uniform int mode;        // 0 = RGB, 1 = combined luma in red (read-back)
out vec4 color;

// codec/pps-upscale.c build_taps(): source index and Q8 fraction of sample i.
void tap(int i, int srcLen, int dstLen, out int idx, out int frac) {
  uint num = uint(2 * i + 1) * uint(srcLen) * 256u;
  int pos = int(num / uint(2 * dstLen)) - 128;
  pos = clamp(pos, 0, (srcLen - 1) * 256);
  idx = pos >> 8;
  frac = pos & 255;
  if (idx >= srcLen - 1) { idx = srcLen - 1; frac = 0; }
}

int sampleBase(usampler2D b, ivec2 xy, ivec2 src, ivec2 dst) {
  if (src == dst) return int(texelFetch(b, xy, 0).r);
  int xi, xf, yi, yf;
  tap(xy.x, src.x, dst.x, xi, xf);
  tap(xy.y, src.y, dst.y, yi, yf);
  int x1 = xf > 0 ? xi + 1 : xi;
  int y1 = yf > 0 ? yi + 1 : yi;
  // Horizontal pass in Q8 (the right tap is 0 when frac is 0), then vertical.
  int a0 = int(texelFetch(b, ivec2(xi, yi), 0).r);
  int b0 = xf > 0 ? int(texelFetch(b, ivec2(x1, yi), 0).r) : 0;
  int r0 = a0 * (256 - xf) + b0 * xf;
  int a1 = int(texelFetch(b, ivec2(xi, y1), 0).r);
  int b1 = xf > 0 ? int(texelFetch(b, ivec2(x1, y1), 0).r) : 0;
  int r1 = yf > 0 ? a1 * (256 - xf) + b1 * xf : r0;
  return (r0 * (256 - yf) + r1 * yf + 32768) >> 16;
}

int residual(usampler2D t, ivec2 xy, int v) {
  return clamp(v + int(texelFetch(t, xy, 0).r) - 128, 0, 255);
}

// Sampler arrays take constant indices only (GLSL ES 3.00): one call per plane.
int plane(usampler2D b, usampler2D r1, usampler2D r2, usampler2D r3, ivec2 xy, ivec2 src,
          ivec2 dst) {
  int v = sampleBase(b, xy, src, dst);
  if (layers > 1) v = residual(r1, xy, v);
  if (layers > 2) v = residual(r2, xy, v);
  if (layers > 3) v = residual(r3, xy, v);
  return v;
}

void main() {
  ivec2 xy = ivec2(gl_FragCoord.xy);
  xy.y = outSize.y - 1 - xy.y; // the picture's first row at the top
  int y = plane(base[0], res1[0], res2[0], res3[0], xy, baseSize, outSize);
  if (mode == 1) { color = vec4(float(y) / 255.0, 0.0, 0.0, 1.0); return; }
  int u = plane(base[1], res1[1], res2[1], res3[1], xy / 2, baseSize / 2, outSize / 2);
  int v = plane(base[2], res1[2], res2[2], res3[2], xy / 2, baseSize / 2, outSize / 2);
  float Y = 1.164383 * (float(y) - 16.0);
  float U = float(u) - 128.0;
  float V = float(v) - 128.0;
  color = vec4(clamp(vec3(Y + 1.596027 * V, Y - 0.391762 * U - 0.812968 * V, Y + 2.017232 * U)
                     / 255.0, 0.0, 1.0), 1.0);
}`;

function compile(gl, type, src) {
  const s = gl.createShader(type);
  gl.shaderSource(s, src);
  gl.compileShader(s);
  if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
  return s;
}

export class Combiner {
  constructor(canvas) {
    const gl = canvas.getContext('webgl2', { antialias: false, depth: false, stencil: false });
    if (!gl) throw new Error('WebGL2 is not available');
    this.gl = gl;
    this.canvas = canvas;
    this.kind = 'webgl2';
    gl.pixelStorei(gl.UNPACK_ALIGNMENT, 1);
    const prog = gl.createProgram();
    gl.attachShader(prog, compile(gl, gl.VERTEX_SHADER, VERTEX));
    gl.attachShader(prog, compile(gl, gl.FRAGMENT_SHADER, FRAGMENT));
    gl.linkProgram(prog);
    if (!gl.getProgramParameter(prog, gl.LINK_STATUS)) throw new Error(gl.getProgramInfoLog(prog));
    this.prog = prog;
    gl.useProgram(prog);
    // 4 layers x 3 planes, one texture unit each.
    this.textures = [];
    const names = ['base', 'res1', 'res2', 'res3'];
    for (let l = 0; l < 4; l++) {
      const row = [];
      for (let p = 0; p < 3; p++) {
        const t = gl.createTexture();
        const unit = l * 3 + p;
        gl.activeTexture(gl.TEXTURE0 + unit);
        gl.bindTexture(gl.TEXTURE_2D, t);
        gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
        gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
        gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_S, gl.CLAMP_TO_EDGE);
        gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_T, gl.CLAMP_TO_EDGE);
        // Complete from the start: an unused layer's sampler must still be valid.
        gl.texImage2D(gl.TEXTURE_2D, 0, gl.R8UI, 1, 1, 0, gl.RED_INTEGER, gl.UNSIGNED_BYTE,
          new Uint8Array([128]));
        gl.uniform1i(gl.getUniformLocation(prog, `${names[l]}[${p}]`), unit);
        row.push(t);
      }
      this.textures.push(row);
    }
    this.loc = {};
    for (const n of ['outSize', 'baseSize', 'layers', 'mode'])
      this.loc[n] = gl.getUniformLocation(prog, n);
    this.vao = gl.createVertexArray();
    this.current = null;
  }

  upload(layer, planes) {
    const gl = this.gl;
    const { width, height, buf, layout } = planes;
    for (let p = 0; p < 3; p++) {
      const w = p ? width >> 1 : width;
      const h = p ? height >> 1 : height;
      gl.activeTexture(gl.TEXTURE0 + layer * 3 + p);
      gl.bindTexture(gl.TEXTURE_2D, this.textures[layer][p]);
      gl.pixelStorei(gl.UNPACK_ROW_LENGTH, layout[p].stride);
      gl.texImage2D(gl.TEXTURE_2D, 0, gl.R8UI, w, h, 0, gl.RED_INTEGER, gl.UNSIGNED_BYTE,
        buf.subarray(layout[p].offset));
    }
    gl.pixelStorei(gl.UNPACK_ROW_LENGTH, 0);
  }

  // frame.planes: [base, residual 1, ...] (decode.js); draws with `layers` of them.
  draw(frame, layers = frame.planes.length, mode = 0) {
    const gl = this.gl;
    const full = frame.planes.length > 1 ? frame.planes[1] : null;
    const outW = this.outW, outH = this.outH;
    if (this.current !== frame) {
      frame.planes.forEach((p, l) => this.upload(l, p));
      this.current = frame;
    }
    if (this.canvas.width !== outW || this.canvas.height !== outH) {
      this.canvas.width = outW;
      this.canvas.height = outH;
    }
    gl.viewport(0, 0, outW, outH);
    gl.useProgram(this.prog);
    gl.uniform2i(this.loc.outSize, outW, outH);
    gl.uniform2i(this.loc.baseSize, frame.planes[0].width, frame.planes[0].height);
    gl.uniform1i(this.loc.layers, Math.min(layers, frame.planes.length));
    gl.uniform1i(this.loc.mode, mode);
    gl.bindVertexArray(this.vao);
    gl.drawArrays(gl.TRIANGLES, 0, 3);
    return full;
  }

  setOutputSize(w, h) { this.outW = w; this.outH = h; }

  // The combined luma of `frame` with `layers` layers, rows top first (tests, PSNR).
  readLuma(frame, layers) {
    const gl = this.gl;
    this.draw(frame, layers, 1);
    const w = this.outW, h = this.outH;
    const rgba = new Uint8Array(w * h * 4);
    gl.readPixels(0, 0, w, h, gl.RGBA, gl.UNSIGNED_BYTE, rgba);
    const y = new Uint8Array(w * h);
    // readPixels rows are bottom first; the shader flipped rows, so row r of
    // the picture is GL row h - 1 - r.
    for (let r = 0; r < h; r++) {
      const src = (h - 1 - r) * w * 4;
      for (let x = 0; x < w; x++) y[r * w + x] = rgba[src + 4 * x];
    }
    return y;
  }
}

// codec/pps-upscale.c build_taps(): per destination sample, the source index
// and its Q8 fraction.
function buildTaps(srcLen, dstLen) {
  const index = new Int32Array(dstLen), frac = new Int32Array(dstLen);
  for (let i = 0; i < dstLen; i++) {
    let pos = Math.floor((2 * i + 1) * srcLen * 256 / (2 * dstLen)) - 128;
    pos = Math.min(Math.max(pos, 0), (srcLen - 1) * 256);
    index[i] = pos >> 8;
    frac[i] = pos & 255;
    if (index[i] >= srcLen - 1) { index[i] = srcLen - 1; frac[i] = 0; }
  }
  return { index, frac };
}

// The same combine in JavaScript, with the codec's integer arithmetic, then
// the browser's own YUV -> RGB (an I420 VideoFrame drawn on a 2D canvas): for
// software-only WebGL (SwiftShader in headless Chromium: measured 160-230 ms
// per 640x480 combine on a loaded 2-core VM, against 13-15 ms here), and as
// the reference the WebGL2 combine is checked against.
export class CpuCombiner {
  constructor(canvas) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d');
    if (!this.ctx) throw new Error('no 2D canvas');
    this.taps = new Map();
    this.kind = 'cpu';
  }

  setOutputSize(w, h) {
    this.outW = w;
    this.outH = h;
    // The combined planes, contiguous: an I420 VideoFrame is made from them.
    this.i420 = new Uint8Array(w * h * 3 / 2);
    this.planes = [this.i420.subarray(0, w * h), this.i420.subarray(w * h, w * h * 5 / 4),
      this.i420.subarray(w * h * 5 / 4)];
    this.rows = new Uint32Array(w * h); // horizontal pass, Q8
  }

  tapsFor(src, dst) {
    const key = `${src}:${dst}`;
    if (!this.taps.has(key)) this.taps.set(key, buildTaps(src, dst));
    return this.taps.get(key);
  }

  // One plane of the output: upscaled base + residuals, into this.planes[p].
  plane(frame, layers, p) {
    const w = p ? this.outW >> 1 : this.outW, h = p ? this.outH >> 1 : this.outH;
    const b = frame.planes[0];
    const sw = p ? b.width >> 1 : b.width, sh = p ? b.height >> 1 : b.height;
    const src = b.buf, so = b.layout[p].offset, ss = b.layout[p].stride;
    const out = this.planes[p];
    if (sw === w && sh === h) {
      for (let y = 0; y < h; y++) out.set(src.subarray(so + y * ss, so + y * ss + w), y * w);
    } else {
      const tx = this.tapsFor(sw, w), ty = this.tapsFor(sh, h);
      const xi = tx.index, xf = tx.frac, rows = this.rows;
      for (let y = 0; y < sh; y++) {
        const s = so + y * ss, r = y * w;
        for (let x = 0; x < w; x++) {
          const i = s + xi[x], f = xf[x];
          // f = 0 only where i + 1 may be past the row: the weight is 0 then.
          rows[r + x] = src[i] * (256 - f) + (f === 0 ? 0 : src[i + 1] * f);
        }
      }
      const yi = ty.index, yf = ty.frac;
      for (let y = 0; y < h; y++) {
        const r0 = yi[y] * w, g = yf[y], r1 = g ? r0 + w : r0, o = y * w, g0 = 256 - g;
        for (let x = 0; x < w; x++) out[o + x] = (rows[r0 + x] * g0 + rows[r1 + x] * g + 32768) >>> 16;
      }
    }
    for (let l = 1; l < layers; l++) {
      const r = frame.planes[l], rb = r.buf, ro = r.layout[p].offset, rs = r.layout[p].stride;
      for (let y = 0; y < h; y++) {
        const o = y * w, s = ro + y * rs;
        for (let x = 0; x < w; x++) {
          const v = out[o + x] + rb[s + x] - 128;
          out[o + x] = v < 0 ? 0 : v > 255 ? 255 : v;
        }
      }
    }
  }

  draw(frame, layers = frame.planes.length) {
    const w = this.outW, h = this.outH;
    for (let p = 0; p < 3; p++) this.plane(frame, Math.min(layers, frame.planes.length), p);
    if (this.canvas.width !== w || this.canvas.height !== h) {
      this.canvas.width = w;
      this.canvas.height = h;
    }
    // YUV -> RGB by the browser's own converter (BT.601, limited range).
    const vf = new VideoFrame(this.i420, {
      format: 'I420', codedWidth: w, codedHeight: h, timestamp: frame.frame_index,
      colorSpace: { matrix: 'smpte170m', primaries: 'smpte170m', transfer: 'smpte170m',
        fullRange: false },
    });
    this.ctx.drawImage(vf, 0, 0);
    vf.close();
  }

  readLuma(frame, layers) {
    this.plane(frame, Math.min(layers, frame.planes.length), 0);
    return this.planes[0].slice();
  }
}

// True if WebGL2 here is a software rasterizer (SwiftShader, llvmpipe).
export function webglIsSoftware() {
  const gl = document.createElement('canvas').getContext('webgl2');
  if (!gl) return true;
  const ext = gl.getExtension('WEBGL_debug_renderer_info');
  const name = ext ? gl.getParameter(ext.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER);
  gl.getExtension('WEBGL_lose_context')?.loseContext();
  return /swiftshader|llvmpipe|software/i.test(String(name));
}
