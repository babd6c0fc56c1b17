// SPDX-License-Identifier: MIT
// The audio output's last step, on the audio rendering thread: decoded
// slots, each placed at an absolute sample position of the AudioContext's
// timeline (so its time to the ear is known exactly, from
// AudioContext.getOutputTimestamp), rendered into the output as the context
// reaches them; silence where nothing was placed. audio-worker.js decides
// the positions and sends the slots straight here (a MessagePort the page
// hands over first); this only copies. The same queue serves the ScriptProcessor
// fallback on the main thread (audio.js imports ChunkQueue from here).
//
// Bounded: MAX_CHUNKS slots queued (2.5 s of 20 ms frames); past it the
// oldest goes, counted. A slot that comes after its position was rendered is
// late: its past part is lost (counted in samples), its rest still plays.

export const MAX_CHUNKS = 128;
const STATS_EVERY_QUANTA = 100; // about 0.27 s at 48 kHz

export class ChunkQueue {
  constructor() {
    this.chunks = []; // {at, pcm}, in position order
    this.renderedTo = 0; // the end of the last rendered block (a sample position)
    this.stats = { chunks: 0, late_chunks: 0, late_samples: 0, overflow: 0, quanta: 0,
      quanta_with_sound: 0 };
  }

  push(at, pcm) {
    this.stats.chunks++;
    if (at < this.renderedTo) {
      this.stats.late_chunks++;
      this.stats.late_samples += Math.min(pcm.length, this.renderedTo - at);
      if (at + pcm.length <= this.renderedTo) return;
    }
    if (this.chunks.length >= MAX_CHUNKS) {
      this.chunks.shift();
      this.stats.overflow++;
    }
    let i = this.chunks.length;
    while (i > 0 && this.chunks[i - 1].at > at) i--;
    this.chunks.splice(i, 0, { at, pcm });
  }

  // Fills `out` (Float32Array) with the samples from position t0 on.
  render(out, t0) {
    out.fill(0);
    const t1 = t0 + out.length;
    while (this.chunks.length && this.chunks[0].at + this.chunks[0].pcm.length <= t0)
      this.chunks.shift();
    let sound = false;
    for (const c of this.chunks) {
      if (c.at >= t1) break;
      const from = Math.max(t0, c.at), to = Math.min(t1, c.at + c.pcm.length);
      if (to > from) {
        out.set(c.pcm.subarray(from - c.at, to - c.at), from - t0);
        sound = true;
      }
    }
    this.renderedTo = Math.max(this.renderedTo, t1);
    this.stats.quanta++;
    if (sound) this.stats.quanta_with_sound++;
  }
}

if (typeof registerProcessor === 'function') {
  class PpsAudioProcessor extends AudioWorkletProcessor {
    constructor() {
      super();
      this.queue = new ChunkQueue();
      // The slots come from the audio worker, on a port of their own.
      this.port.onmessage = (ev) => {
        ev.data.port.onmessage = (m) => this.queue.push(m.data.at, m.data.pcm);
      };
    }

    process(inputs, outputs) {
      const out = outputs[0];
      // currentFrame: the position of this render quantum's first sample.
      this.queue.render(out[0], currentFrame);
      for (let c = 1; c < out.length; c++) out[c].set(out[0]);
      if (this.queue.stats.quanta % STATS_EVERY_QUANTA === 0)
        this.port.postMessage({ stats: this.queue.stats, rendered_to: this.queue.renderedTo });
      return true;
    }
  }
  registerProcessor('pps-audio', PpsAudioProcessor);
}
