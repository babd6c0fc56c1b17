// SPDX-License-Identifier: MIT
// Reassembly (fragments -> whole ADUs, per window, in decode order) and the
// layered decoder: one WebCodecs VideoDecoder per quality layer, fed the way
// codec/pps-decoder.c feeds libavcodec (see there for the why):
//  - an ADU is fed only if every ADU it depends on was decoded: a missing
//    reference raises no error in WebCodecs, it would just show garbage;
//  - an ADU holds 1..15 Annex-B pictures (u8 flags|count, u32 LE sizes);
//    only the last picture of a picture ADU is the frame, the others (and
//    every picture of a filler-only ADU) are fillers whose output is dropped;
//  - a frame is released in display order once no earlier frame can still
//    come, with the layers that decoded (base, then residuals).
// Limits: a window holds at most MAX_WINDOW_ADUS ADUs and MAX_WINDOW_BYTES.

import { KIND, WireError } from './wire.js';

export const MAX_WINDOW_ADUS = 1024;
export const MAX_WINDOW_BYTES = 64 << 20;
const MAX_PICTURES_PER_ADU = 15;
const ADU_FILLERS_ONLY = 0x80;
const ADU_COUNT_MASK = 0x0f;
const FRAME_IDR = 0;
const FRAME_PD = 4;
const DECODED_RING = 1024;
const MAX_RECORDS = 64;

export function firstFrameOf(windowId, w) { return windowId === 0 ? 0 : (windowId - 1) * w + 1; }
export function lastFrameOf(windowId, w) { return windowId === 0 ? 0 : windowId * w; }

// Fragments of the open window -> whole ADUs, handed out in decode order as
// soon as each is the next one (onAdu), the rest at WINDOW_END (onWindowEnd).
export class Reassembly {
  constructor(windowFrames, onAdu, onWindowEnd) {
    this.w = windowFrames;
    this.onAdu = onAdu;
    this.onWindowEnd = onWindowEnd;
    this.open = null;
    this.lastWindow = -1;
  }

  record(r, nowUs) {
    switch (r.kind) {
      case KIND.WINDOW_BEGIN: {
        if (this.open) throw new WireError('WINDOW_BEGIN inside a window');
        if (r.window_id <= this.lastWindow) throw new WireError('window id going back');
        if (r.adus > MAX_WINDOW_ADUS || r.bytes > MAX_WINDOW_BYTES)
          throw new WireError(`window ${r.window_id} over the limits`);
        this.open = { ...r, got: new Map(), next: r.first_adu_id, received: 0, bytes_received: 0,
          reserved: 0 };
        return;
      }
      case KIND.ADU_FRAGMENT: {
        const w = this.open;
        if (!w || r.window_id !== w.window_id) throw new WireError('fragment outside its window');
        if (r.adu_id < w.first_adu_id || r.adu_id >= w.first_adu_id + w.adus)
          throw new WireError('ADU id outside its window');
        if (r.frame_index < firstFrameOf(w.window_id, this.w) ||
            r.frame_index > lastFrameOf(w.window_id, this.w))
          throw new WireError('frame outside its window');
        let a = w.got.get(r.adu_id);
        if (!a) {
          if (r.offset !== 0) throw new WireError('fragment does not start its ADU');
          // What the ADUs claim is allocated: bounded before allocating.
          if (w.reserved + r.total_bytes > MAX_WINDOW_BYTES)
            throw new WireError('window over its byte limit');
          w.reserved += r.total_bytes;
          a = { info: r, data: new Uint8Array(r.total_bytes), have: 0, taken: false };
          w.got.set(r.adu_id, a);
        } else if (r.offset !== a.have || r.total_bytes !== a.data.byteLength) {
          throw new WireError('fragment out of order');
        }
        a.data.set(r.payload, r.offset);
        a.have += r.payload.byteLength;
        w.bytes_received += r.payload.byteLength;
        if (a.have === a.data.byteLength) {
          w.received++;
          while (w.got.has(w.next) && w.got.get(w.next).have === w.got.get(w.next).data.byteLength) {
            const next = w.got.get(w.next);
            next.taken = true;
            w.next++;
            this.onAdu(next);
          }
        }
        return;
      }
      case KIND.WINDOW_END: {
        const w = this.open;
        if (w && r.window_id !== w.window_id) throw new WireError('WINDOW_END of another window');
        if (!w && r.window_id <= this.lastWindow) throw new WireError('window id going back');
        if (!w && !(r.flags & 1)) throw new WireError('lone WINDOW_END not flagged dropped');
        if (w) {
          // Whatever is whole and not handed out yet, in decode order.
          const ids = [...w.got.keys()].sort((x, y) => x - y);
          for (const id of ids) {
            const a = w.got.get(id);
            if (!a.taken && a.have === a.data.byteLength) this.onAdu(a);
          }
        }
        this.open = null;
        this.lastWindow = r.window_id;
        this.onWindowEnd({
          window_id: r.window_id, begun: !!w, dropped: !!(r.flags & 1),
          first_capture_us: w ? w.first_capture_us : null,
          adus_total: w ? w.adus : r.adus_dropped, adus_received: w ? w.received : 0,
          adus_sent: r.adus_sent, adus_dropped: r.adus_dropped,
          bytes: w ? w.bytes_received : 0, complete_us: nowUs,
        });
        return;
      }
      default:
        throw new WireError('not a window record');
    }
  }
}

// Splits an ADU payload into its pictures; null if malformed.
export function splitPictures(data) {
  if (data.byteLength < 1) return null;
  const n = data[0] & ADU_COUNT_MASK;
  const header = 1 + 4 * n;
  if (n < 1 || n > MAX_PICTURES_PER_ADU || data.byteLength < header) return null;
  const out = [];
  let at = header;
  for (let i = 0; i < n; i++) {
    const p = 1 + 4 * i;
    const size = (data[p] | data[p + 1] << 8 | data[p + 2] << 16 | data[p + 3] << 24) >>> 0;
    if (size > data.byteLength - at) return null;
    out.push(data.subarray(at, at + size));
    at += size;
  }
  if (at !== data.byteLength) return null;
  return { fillersOnly: !!(data[0] & ADU_FILLERS_ONLY), pictures: out };
}

// True if an Annex-B access unit holds an IDR slice (nal_unit_type 5).
export function isIdrPicture(au) {
  for (let i = 0; i + 3 < au.byteLength; i++) {
    if (au[i] === 0 && au[i + 1] === 0 && au[i + 2] === 1) {
      const type = au[i + 3] & 0x1f;
      if (type === 5) return true;
      if (type === 1) return false;
      i += 2;
    }
  }
  return false;
}

// Copies a decoded I420 VideoFrame's visible planes into one buffer.
async function planesOf(frame) {
  const rect = frame.visibleRect;
  const r = { x: rect.x, y: rect.y, width: rect.width, height: rect.height };
  const size = frame.allocationSize({ rect: r });
  const buf = new Uint8Array(size);
  const layout = await frame.copyTo(buf, { rect: r });
  return { width: r.width, height: r.height, format: frame.format, buf, layout };
}

// The test source's tick flash (codec/pps-timecode.c, pps_timecode_read_flash):
// a square patch at the bottom right of the picture, black with a white
// centre on the frame of each audio tick. Read on a decoded plane (the base
// layer's luma: the patch is drawn to survive its half resolution) for the
// A/V tests; `width`, `height`: the stream's full size.
const FLASH_BLACK = 16, FLASH_WHITE = 235;
export function flashIn(plane, width, height) {
  if (!plane || !plane.layout) return false;
  let side = Math.min(64, Math.floor(width / 4), Math.floor(height / 4)) & ~1;
  side = Math.round(side * plane.width / width);
  if (side < 8) return false;
  const { offset, stride } = plane.layout[0];
  const x0 = plane.width - side, y0 = plane.height - side;
  const mean = (x, y, n) => {
    let sum = 0;
    for (let j = y; j < y + n; j++)
      for (let i = x; i < x + n; i++) sum += plane.buf[offset + j * stride + i];
    return sum / (n * n);
  };
  const mid = (FLASH_BLACK + FLASH_WHITE) / 2;
  const edge = Math.max(1, Math.floor(side / 8));
  return mean(x0 + Math.floor(side * 3 / 8), y0 + Math.floor(side * 3 / 8), Math.floor(side / 4)) > mid &&
    mean(x0, y0, edge) < mid && mean(x0 + side - edge, y0, edge) < mid &&
    mean(x0, y0 + side - edge, edge) < mid && mean(x0 + side - edge, y0 + side - edge, edge) < mid;
}

export class LayeredDecoder {
  // info: STREAM_INFO. cb.onFrame(rec): rec.frame_index, capture_us,
  // temporal_layer, planes[] (used layers, base first), undecodable.
  // cb.onError(message).
  constructor(info, cb) {
    this.info = info;
    this.cb = cb;
    const t = info.temporal_layers;
    let s = t >= 3 ? 4 : t === 2 ? 2 : 1;
    while (s > 1 && info.window_frames % s) s /= 2;
    this.minigop = s;
    this.layers = info.quality_layers;
    this.decoded = new Uint32Array(DECODED_RING);
    this.decodedCount = 0;
    this.records = new Map();
    this.safeThrough = -1;
    this.noReorder = false;
    this.laterThrough = -1;
    this.lastOutput = -1;
    this.broken = new Array(this.layers).fill(true); // until each layer's first IDR
    // A layer that decoded and then lost its reference chain asks once for
    // recovery (cb.onLayerLost), until its next IDR; not before its first.
    this.lost = new Array(this.layers).fill(true);
    this.fillerTs = -1;
    // Per layer: anchor frame of the last filler ADU fed (see release()).
    this.fillerThrough = new Array(this.layers).fill(-1);
    this.stats = { adus_decoded: 0, adus_undecodable: 0, decode_errors: 0, layers_cut: 0,
      frames_output: 0, frames_late: 0, decode_ms_sum: 0, decode_ms_n: 0,
      layers_lost: 0 };
    this.fedAt = new Map();
    this.decoders = [];
    for (let q = 0; q < this.layers; q++) this.decoders.push(this.makeDecoder(q));
  }

  makeDecoder(q) {
    const d = new VideoDecoder({
      output: (frame) => this.output(q, frame),
      error: (e) => {
        this.stats.decode_errors++;
        this.cb.onError(`layer ${q} decoder: ${e.message}`);
        // A closed decoder cannot be reused: a fresh one waits for an IDR.
        this.decoders[q] = this.makeDecoder(q);
        this.broken[q] = true;
        this.layerLost(q, -1);
      },
    });
    const w = q ? this.info.width : this.info.base_width;
    const h = q ? this.info.height : this.info.base_height;
    d.configure({ codec: 'avc1.42E01F', codedWidth: w, codedHeight: h,
      hardwareAcceleration: 'prefer-software', optimizeForLatency: true });
    return d;
  }

  layerLost(q, frameIndex) {
    if (this.lost[q]) return;
    this.lost[q] = true;
    this.stats.layers_lost++;
    this.cb.onLayerLost?.(q, frameIndex);
  }

  wasDecoded(id) {
    const n = Math.min(this.decodedCount, DECODED_RING);
    for (let i = 0; i < n; i++) if (this.decoded[i] === id) return true;
    return false;
  }

  push(adu) {
    const info = adu.info;
    const q = info.quality_layer;
    if (q >= this.layers) return;
    const split = splitPictures(adu.data);
    if (!split) { this.stats.decode_errors++; return; }
    const s = this.minigop;
    if (split.fillersOnly) {
      this.safeThrough = Math.max(this.safeThrough, info.frame_index);
    } else if (info.frame_index > 0) {
      const settled = Math.floor((info.frame_index - 1) / s) * s;
      this.safeThrough = Math.max(this.safeThrough, settled);
      this.laterThrough = Math.max(this.laterThrough, settled);
    }
    // Disposable P frames instead of B frames: nothing is reordered, so a
    // frame's top layer is its last ADU, as without B frames.
    if (info.frame_type === FRAME_PD) this.noReorder = true;
    if ((s === 1 || this.noReorder) && !split.fillersOnly && q === this.layers - 1)
      this.safeThrough = Math.max(this.safeThrough, info.frame_index);
    let decodable = info.deps.every((d) => this.wasDecoded(d));
    if (this.broken[q]) {
      if (info.frame_type === FRAME_IDR) this.broken[q] = false;
      else decodable = false;
    }
    if (info.frame_type === FRAME_IDR && decodable) this.lost[q] = false;
    else if (!decodable) this.layerLost(q, info.frame_index);
    let rec = null;
    if (!split.fillersOnly) {
      if (info.frame_index > this.lastOutput) {
        rec = this.records.get(info.frame_index);
        if (!rec) {
          if (this.records.size >= MAX_RECORDS) this.release(true);
          rec = { frame_index: info.frame_index, capture_us: info.capture_us,
            temporal_layer: info.temporal_layer, undecodable: false, expect: 0, got: 0,
            planes: [], pending: 0, heldSince: 0 };
          this.records.set(info.frame_index, rec);
        }
      } else {
        this.stats.frames_late++;
      }
    }
    if (!decodable) {
      this.stats.adus_undecodable++;
      if (rec) rec.undecodable = true;
      this.release(false);
      return;
    }
    if (rec) rec.expect |= 1 << q;
    const dec = this.decoders[q];
    split.pictures.forEach((pic, i) => {
      const frame = !split.fillersOnly && i === split.pictures.length - 1;
      // Fillers carry negative timestamps: their output is dropped.
      const ts = frame ? info.frame_index : this.fillerTs--;
      try {
        dec.decode(new EncodedVideoChunk({ type: isIdrPicture(pic) ? 'key' : 'delta',
          timestamp: ts, data: pic }));
        if (frame) {
          if (this.fedAt.size >= MAX_RECORDS * 4) this.fedAt.clear(); // outputs that never came
          this.fedAt.set(q * 1e9 + info.frame_index, performance.now());
        }
      } catch (e) {
        this.stats.decode_errors++;
        if (rec) { rec.expect &= ~(1 << q); rec.undecodable = true; }
        this.broken[q] = true;
      }
    });
    if (split.fillersOnly) this.fillerThrough[q] = Math.max(this.fillerThrough[q], info.frame_index);
    this.decoded[this.decodedCount++ % DECODED_RING] = info.adu_id;
    this.stats.adus_decoded++;
    this.release(false);
  }

  output(q, frame) {
    const ts = frame.timestamp;
    const rec = ts >= 0 ? this.records.get(ts) : null;
    if (!rec) { frame.close(); return; }
    const key = q * 1e9 + ts;
    const fed = this.fedAt.get(key);
    if (fed !== undefined) {
      this.stats.decode_ms_sum += performance.now() - fed;
      this.stats.decode_ms_n++;
      this.fedAt.delete(key);
    }
    rec.pending++;
    planesOf(frame).then((p) => {
      rec.planes[q] = p;
      rec.got |= 1 << q;
    }, () => {}).finally(() => {
      frame.close();
      rec.pending--;
      this.release(false);
    });
  }

  // Frames up to frameIndex get no more ADUs (end of their window).
  settle(frameIndex) {
    this.safeThrough = Math.max(this.safeThrough, frameIndex);
    this.laterThrough = Math.max(this.laterThrough, frameIndex);
    this.release(false);
  }

  // Called now and then (the viewer's timer): a layer holding a frame back
  // for good (its filler ADU was cut) is flushed and waits for its next IDR.
  poll() { this.release(false); }

  release(all) {
    for (;;) {
      let first = null;
      for (const r of this.records.values()) if (!first || r.frame_index < first.frame_index) first = r;
      if (!first) return;
      if (!all && first.frame_index > this.safeThrough) return;
      if (first.pending) return;
      if (!all && first.got !== first.expect) {
        // Decoding is asynchronous here: a layer's picture that has not come
        // out yet is either on its way (wait) or held back for reordering
        // because the sender cut that layer's filler ADU, which closes the
        // mini-GOP. Only the latter, once a later mini-GOP began, is flushed;
        // the layer then waits for its next IDR (codec/pps-decoder.c).
        if (first.frame_index > this.laterThrough) return;
        // Only a layer that had filler ADUs holds pictures back: a stream
        // with B frames has one after its first picture, one with disposable
        // P frames never.
        const s = this.minigop;
        const anchor = s > 1 ? Math.ceil(first.frame_index / s) * s : first.frame_index;
        const missing = first.expect & ~first.got;
        let held = 0;
        for (let q = 0; q < this.layers; q++)
          if ((missing & (1 << q)) && s > 1 && this.fillerThrough[q] >= 0 &&
              this.fillerThrough[q] < anchor) held |= 1 << q;
        if (!first.flushed) {
          if (held !== missing) return; // on its way
          // flush() outputs what the layer holds, then wants a key chunk.
          const flushes = [];
          for (let q = 0; q < this.layers; q++) {
            if (!(held & (1 << q))) continue;
            flushes.push(this.decoders[q].flush().catch(() => {}));
            this.broken[q] = true;
            this.layerLost(q, first.frame_index);
          }
          first.flushed = 'running';
          first.undecodable = true;
          this.stats.layers_cut++;
          Promise.all(flushes).then(() => {
            first.flushed = 'done';
            this.release(false);
          });
          return;
        }
        if (first.flushed !== 'done') return;
      }
      this.records.delete(first.frame_index);
      this.lastOutput = first.frame_index;
      let used = 0;
      while (used < this.layers && (first.got & (1 << used))) used++;
      this.stats.frames_output++;
      this.cb.onFrame({ frame_index: first.frame_index, capture_us: first.capture_us,
        temporal_layer: first.temporal_layer, undecodable: first.undecodable,
        planes: first.planes.slice(0, used), layers: used });
    }
  }

  close() {
    for (const d of this.decoders) if (d.state !== 'closed') d.close();
  }
}
