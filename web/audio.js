// SPDX-License-Identifier: MIT
// The audio track in the browser, as client/pps-audio-player.c plays it in
// pps-client: AUDIO_FRAME records -> a WebCodecs AudioDecoder (each frame
// decoded as it arrives, in order: Opus keeps state from frame to frame) ->
// the adaptive jitter buffer (jitter.js) -> one slot per frame, due on the
// viewer's clock -> the output (AudioContext, audio-worklet.js) -> stats.
//
// The output. Each slot is placed at an absolute sample position of the
// AudioContext's timeline, OUTPUT_SLACK_US past the render position at its
// due time, the next slot right after it (no gap, no overlap); the position
// moves only in a silent slot (the output clock drifted from the viewer's)
// or when the main thread fell so far behind that the next position was
// already rendered (counted: underruns). So when a slot reaches the ear is
// known, not guessed: AudioContext.getOutputTimestamp() maps the context's
// positions to performance.now(), the device's own latency included. The
// slack covers the main thread's stalls (the video's decoding and combine
// run there): a slot handed over up to that late is still heard on time.
//
// Browsers start muted: an AudioContext may not run before a user gesture
// (autoplay policy). Until it runs, slots are decoded, played out on the
// clock and measured all the same (their time to the ear estimated from the
// slack and the context's announced latency, flagged "heard": false).
//
// Lip sync, as pps-client does it (pps_jitter_set_floor): audio is the
// master and the picture the laggard, so the audio's playout delay is kept at
// least at the video's recent latency (90th percentile of the last 64 frames
// shown) minus SYNC_LEAD_US minus the output's own delay: the audio is heard
// at most about 30 ms before its picture is shown, at the next talkspurt.
//
// Missing frames: WebCodecs has no Opus packet loss concealment or in-band
// FEC, so a missing frame after sound repeats the last one fading out over
// the slot (once), and silence otherwise.

import * as wire from './wire.js';
import { JitterBuffer, PLAY, CONCEAL, INSERT, SKIP } from './jitter.js';
import { ChunkQueue } from './audio-worklet.js';

export const RATE_HZ = 48000;
export const OPUS_CONFIG = { codec: 'opus', sampleRate: RATE_HZ, numberOfChannels: 1 };
// Opus's decoder-side delay in the VOIP application at 48 kHz (2.5 ms of
// CELT overlap + 4 ms of SILK's resampler): decoded sample i of a frame was
// captured this much before capture_us + i / rate (client/pps-audio-player.c).
export const OPUS_DELAY_US = 6500;
export const SYNC_LEAD_US = 30000; // PPS_AUDIO_SYNC_LEAD_US
const OUTPUT_SLACK_US = 30000;
const OUTPUT_MIN_AHEAD_US = 3000; // a position closer than this to the render one is too late
const OUTPUT_MOVE_US = 10000; // in a silent slot, the drift that moves the position
const AUDIO_ACTIVE_US = 200000; // audio counts as playing for the A/V skew this long
const TICK_LEVEL = 1000 / 32768; // codec/pps-audio.h: PPS_AUDIO_TICK_LEVEL
const TICK_QUIET_SAMPLES = 4800; // 100 ms of quiet before a tick
const MAX_SAMPLES = 1 << 16; // latencies, skews kept (about 20 min of slots)
const SLOTS_KEPT = 3000; // per-slot records for tests: the last 60 s
const TICKS_KEPT = 256;
const PENDING_LIMIT = 64; // frames in the decoder at once
const SLOTS_PER_WAKE = 64;
const PING_INTERVAL_MS = 1000;

function clientNowUs() { return (performance.timeOrigin + performance.now()) * 1000; }

function pushBounded(list, value, limit) {
  if (list.length >= limit) list.splice(0, list.length - limit + 1);
  list.push(value);
}

export function percentile(values, p) {
  if (!values.length) return null;
  const v = Float64Array.from(values).sort();
  return v[Math.max(1, Math.ceil(p / 100 * v.length)) - 1];
}

// Whether this browser decodes the stream's audio: {supported, reason}.
export async function audioSupport() {
  if (!('AudioDecoder' in window))
    return { supported: false, reason: window.isSecureContext ? 'no WebCodecs AudioDecoder'
      : 'WebCodecs needs a secure context (https or localhost)' };
  if (!('AudioContext' in window)) return { supported: false, reason: 'no Web Audio' };
  try {
    const r = await AudioDecoder.isConfigSupported(OPUS_CONFIG);
    return r.supported ? { supported: true, reason: null }
      : { supported: false, reason: 'AudioDecoder.isConfigSupported(opus, 48000 Hz, mono): false' };
  } catch (e) {
    return { supported: false, reason: `AudioDecoder.isConfigSupported: ${e.message}` };
  }
}

// Whether pps-audio-player.c's limits hold for the stream's track.
export function trackPlayable(info) {
  return info.audio_codec === wire.AUDIO_CODEC_OPUS && info.audio_channels === 1 &&
    info.audio_rate_hz === RATE_HZ &&
    (info.audio_frame_us === 10000 || info.audio_frame_us === 20000);
}

// ---- the output ------------------------------------------------------------------

export class AudioOutput {
  constructor(onChange) {
    this.onChange = onChange;
    this.ctx = null;
    this.kind = 'none';
    this.fallback = null; // why the worklet was not used
    this.userMuted = false;
    this.send = null; // (position, samples) to the renderer, once it is loaded
    this.nextAt = null; // the position after the last slot placed
    this.queueStats = null; // the renderer's counters (ChunkQueue)
    this.stats = { underruns: 0, moves: 0 };
  }

  async open() {
    this.ctx = new AudioContext({ sampleRate: RATE_HZ, latencyHint: 'interactive' });
    const ctx = this.ctx;
    this.gain = ctx.createGain();
    this.gain.connect(ctx.destination);
    ctx.onstatechange = () => this.onChange?.();
    try {
      await ctx.audioWorklet.addModule('audio-worklet.js');
      const node = new AudioWorkletNode(ctx, 'pps-audio',
        { numberOfInputs: 0, numberOfOutputs: 1, outputChannelCount: [1] });
      node.port.onmessage = (ev) => { this.queueStats = ev.data.stats; };
      node.connect(this.gain);
      this.send = (at, pcm) => node.port.postMessage({ at, pcm }, [pcm.buffer]);
      this.kind = 'worklet';
    } catch (e) {
      // Older browsers, or a worklet refused: the same queue on the main thread.
      this.fallback = e.message;
      const queue = new ChunkQueue();
      const node = ctx.createScriptProcessor(1024, 1, 1);
      node.onaudioprocess = (ev) => {
        queue.render(ev.outputBuffer.getChannelData(0), Math.round(ev.playbackTime * ctx.sampleRate));
        this.queueStats = queue.stats;
      };
      node.connect(this.gain);
      this.send = (at, pcm) => queue.push(at, pcm);
      this.kind = 'script-processor';
    }
    this.onChange?.();
  }

  get running() { return this.ctx?.state === 'running' && this.send !== null; }
  get heard() { return this.running && !this.userMuted; }

  state() {
    if (!this.ctx) return 'off';
    return this.heard ? 'playing' : 'muted';
  }

  // A user gesture: start the context (autoplay policy) and unmute.
  unmute() {
    this.userMuted = false;
    if (this.gain) this.gain.gain.value = 1;
    const r = this.ctx && this.ctx.state !== 'running' ? this.ctx.resume() : Promise.resolve();
    return r.finally(() => this.onChange?.());
  }

  mute() {
    this.userMuted = true;
    if (this.gain) this.gain.gain.value = 0;
    this.onChange?.();
  }

  // The output's delay estimated where it cannot be read (context not running).
  nominalDelayUs() {
    const c = this.ctx;
    return OUTPUT_SLACK_US + (c ? ((c.baseLatency || 0) + (c.outputLatency || 0)) * 1e6 : 0);
  }

  // When position `at` reaches the ear, on the viewer's clock (us).
  earUs(at) {
    const c = this.ctx;
    const ts = c.getOutputTimestamp ? c.getOutputTimestamp() : null;
    if (!ts || !ts.performanceTime)
      return clientNowUs() + (at / c.sampleRate - c.currentTime) * 1e6 +
        ((c.baseLatency || 0) + (c.outputLatency || 0)) * 1e6;
    return (performance.timeOrigin + ts.performanceTime) * 1000 +
      (at / c.sampleRate - ts.contextTime) * 1e6;
  }

  // The position being rendered now and the least one still in time.
  renderingAt() { return this.ctx.currentTime * this.ctx.sampleRate; }
  inTime(at) { return at >= this.renderingAt() + OUTPUT_MIN_AHEAD_US * this.ctx.sampleRate / 1e6; }

  // Places one slot of `samples` samples due at dueUs (viewer's clock, now
  // nowUs); `pause`: a silent slot, where the position may move. Returns its
  // position ({at, earUs}: when its first sample reaches the ear, viewer's
  // clock), or null if the output does not run. Its sound goes to put().
  place(dueUs, samples, pause, nowUs) {
    if (!this.running) {
      this.nextAt = null;
      return null;
    }
    const sr = this.ctx.sampleRate;
    const rendering = this.renderingAt();
    const soonest = Math.ceil(rendering + OUTPUT_MIN_AHEAD_US * sr / 1e6);
    // A slot handled late (the main thread was busy) keeps its time if it
    // can, else goes out as soon as it can.
    const want = Math.max(soonest, Math.round(rendering + (dueUs - nowUs + OUTPUT_SLACK_US) * sr / 1e6));
    let at = this.nextAt;
    if (at !== null && at < soonest) {
      this.stats.underruns++;
      at = null;
    } else if (at !== null && pause && Math.abs(at - want) > OUTPUT_MOVE_US * sr / 1e6) {
      this.stats.moves++;
      at = null;
    }
    if (at === null) at = want;
    this.nextAt = at + samples;
    return { at, earUs: this.earUs(at) };
  }

  // The sound of a placed slot (Float32Array, handed over).
  put(at, pcm) { this.send(at, pcm); }
}

// ---- ticks --------------------------------------------------------------------

// codec/pps-audio.c's tick detector: a sample of |x| >= 1000/32768 after at
// least 100 ms below it. Starts as if after silence.
class TickDetector {
  constructor() { this.quiet = TICK_QUIET_SAMPLES; }

  // Calls onset(i) for each onset in pcm (null: `samples` of silence).
  push(pcm, samples, onset) {
    if (!pcm) {
      this.quiet += samples;
      return;
    }
    for (let i = 0; i < pcm.length; i++) {
      if (Math.abs(pcm[i]) < TICK_LEVEL) {
        this.quiet++;
        continue;
      }
      if (this.quiet >= TICK_QUIET_SAMPLES) onset(i);
      this.quiet = 0;
    }
  }
}

// ---- the track ------------------------------------------------------------------

export class AudioTrack {
  // info: STREAM_INFO with its audio tail (trackPlayable). output: an
  // AudioOutput (or null: measured only). hooks: nowUs() (the viewer's
  // clock), videoLatencyUs(nowUs) (recent video latency, 0 if none: lip
  // sync; null: off), onError(message).
  constructor(info, output, hooks) {
    this.frameUs = info.audio_frame_us;
    this.samples = Math.round(this.frameUs * RATE_HZ / 1e6);
    this.transport = info.audio_transport === wire.AUDIO_OWN_CONNECTION ? 'connection' : 'window';
    this.output = output;
    this.hooks = hooks;
    this.jitter = new JitterBuffer(this.frameUs);
    this.pending = new Map(); // chunk index (timestamp / frame) -> frame being decoded
    this.decodeIndex = 0;
    this.decoder = this.makeDecoder();
    this.timer = 0;
    this.timerDue = Infinity;
    this.offsetUs = 0; // server clock - viewer clock, as last applied to a frame
    this.lastPcm = null; // the last slot's sound, for concealment
    this.concealRun = 0;
    this.pathUs = null; // the last slot's due time to the ear (output delay)
    this.ticks = new TickDetector();
    this.recent = []; // the last slots heard: {out_us, latency_us}, for the A/V skew
    this.slotLog = [];
    this.tickLog = [];
    this.earMs = [];
    this.skewMs = [];
    this.stats = { frames: 0, slots: 0, played: 0, concealed: 0, inserted: 0, skipped: 0,
      decoded_late: 0, undecoded: 0, outputs_unmatched: 0, decode_errors: 0, decoder_overflow: 0, heard_slots: 0 };
  }

  makeDecoder() {
    const d = new AudioDecoder({
      output: (data) => this.decoded(data),
      error: (e) => {
        this.stats.decode_errors++;
        this.hooks.onError?.(`audio decoder: ${e.message}`);
        this.dropPending();
        this.decoder = this.makeDecoder(); // a closed decoder cannot be reused
      },
    });
    d.configure(OPUS_CONFIG);
    return d;
  }

  // Frames that will not come out of the decoder: concealed in their slots.
  dropPending() {
    const frames = [...this.pending.values()];
    this.pending.clear();
    for (const f of frames) if (f.placed) this.decodedLate(f);
  }

  decoded(data) {
    // Output timestamps come back recomputed from sample counts (259999 for
    // 260000 in Chromium 156): matched to the nearest frame.
    const key = Math.round(data.timestamp / this.frameUs);
    const frame = this.pending.get(key);
    try {
      if (!frame) {
        this.stats.outputs_unmatched++;
        return;
      }
      this.pending.delete(key);
      const pcm = new Float32Array(data.numberOfFrames);
      data.copyTo(pcm, { planeIndex: 0, format: 'f32-planar' });
      frame.pcm = pcm.length === this.samples ? pcm : fit(pcm, this.samples);
      if (frame.placed) this.decodedLate(frame);
    } finally {
      data.close();
    }
  }

  // An AUDIO_FRAME record, arrived at nowUs; toClient maps a server time to
  // the viewer's clock.
  frame(r, nowUs, toClient) {
    const capture = toClient(r.capture_us);
    this.offsetUs = r.capture_us - capture;
    this.stats.frames++;
    const frame = { seq: r.seq, captureUs: capture, speech: !!(r.flags & wire.AUDIO_SPEECH),
      pcm: null };
    if (this.pending.size >= PENDING_LIMIT) {
      // The decoder stopped answering: its frames will be concealed.
      this.stats.decoder_overflow++;
      this.dropPending();
    }
    const index = this.decodeIndex++;
    try {
      this.decoder.decode(new EncodedAudioChunk({ type: 'key', timestamp: index * this.frameUs,
        duration: this.frameUs, data: r.payload }));
      this.pending.set(index, frame);
    } catch (e) {
      this.stats.decode_errors++;
    }
    this.jitter.put(frame, nowUs);
    this.arm();
  }

  arm() {
    const due = this.jitter.nextDue();
    if (due === this.timerDue && this.timer) return;
    clearTimeout(this.timer);
    this.timer = 0;
    this.timerDue = due;
    if (due === Infinity) return;
    this.timer = setTimeout(() => this.wake(), Math.max(0, (due - this.hooks.nowUs()) / 1000));
  }

  wake() {
    this.timer = 0;
    const now = this.hooks.nowUs();
    const video = this.hooks.videoLatencyUs ? this.hooks.videoLatencyUs(now) : 0;
    const path = this.pathUs ?? (this.output ? this.output.nominalDelayUs() : 0);
    this.jitter.setFloor(video > 0 ? video - SYNC_LEAD_US - path - OPUS_DELAY_US : 0);
    let slot;
    for (let i = 0; i < SLOTS_PER_WAKE && (slot = this.jitter.pop(now)); i++) this.play(slot, now);
    this.timerDue = Infinity;
    this.arm();
  }

  // Repeat-with-fade: the last sound once more, fading out; then silence.
  conceal() {
    this.concealRun++;
    if (!this.lastPcm || this.concealRun > 1) return null;
    const out = new Float32Array(this.samples);
    for (let i = 0; i < out.length; i++) out[i] = this.lastPcm[i] * (1 - i / out.length);
    return out;
  }

  play(slot, nowUs) {
    const s = this.stats;
    if (slot.action === SKIP) { // decoded already (the decoder's state runs on), not played
      s.skipped++;
      return;
    }
    const waiting = slot.action === PLAY && !slot.frame.pcm; // still in the decoder
    const placed = this.output ? this.output.place(slot.dueUs, this.samples, !slot.speech, nowUs)
      : null;
    // Not running (no gesture yet): where it would have been heard.
    const outUs = placed ? placed.earUs
      : slot.dueUs + (this.output ? this.output.nominalDelayUs() : 0);
    const heard = placed !== null && this.output.heard;
    if (heard) s.heard_slots++;
    this.pathUs = outUs - slot.dueUs;
    const earUs = outUs + OPUS_DELAY_US;
    const latencyUs = earUs - slot.captureUs;
    pushBounded(this.earMs, latencyUs / 1000, MAX_SAMPLES);
    pushBounded(this.recent, { out_us: outUs, latency_us: latencyUs }, 16);
    const entry = { seq: slot.seq, how: slot.action, capture_us: slot.captureUs + this.offsetUs,
      ear_us: earUs + this.offsetUs, due_us: slot.dueUs + this.offsetUs, heard };
    pushBounded(this.slotLog, entry, SLOTS_KEPT);
    s.slots++;
    if (waiting) {
      // Its decoder output (a task on this busy thread) has not come yet: it
      // still plays if it comes before its position is rendered.
      this.lastPcm = null;
      slot.frame.placed = { entry, at: placed ? placed.at : null, outUs };
      return;
    }
    this.sound(entry, slot.action, slot.action === PLAY ? slot.frame.pcm : null,
      placed ? placed.at : null, outUs);
  }

  // What a slot sounds like: the frame (PLAY), a concealment (CONCEAL), or
  // silence (INSERT); out to its position, its ticks found, counted.
  sound(entry, how, pcm, at, outUs) {
    if (how === CONCEAL) pcm = this.conceal();
    else this.concealRun = 0;
    this.lastPcm = how === PLAY ? pcm : null;
    entry.how = how;
    this.stats[how]++;
    this.ticks.push(pcm, this.samples, (i) => {
      const after = i * 1e6 / RATE_HZ;
      pushBounded(this.tickLog, { seq: entry.seq, sample: i, how, heard: entry.heard,
        capture_us: entry.capture_us + after - OPUS_DELAY_US, ear_us: outUs + after + this.offsetUs },
      TICKS_KEPT);
    });
    if (pcm && at !== null) this.output.put(at, pcm.slice());
  }

  // A frame out of the decoder after its slot was placed.
  decodedLate(frame) {
    const p = frame.placed;
    frame.placed = null;
    const inTime = frame.pcm && (p.at === null || this.output.running && this.output.inTime(p.at));
    if (inTime) this.stats.decoded_late++;
    else this.stats.undecoded++;
    this.sound(p.entry, inTime ? PLAY : CONCEAL, frame.pcm, p.at, p.outUs);
  }

  // A video frame shown at displayUs with latency latencyMs: the A/V skew
  // (video latency - audio latency; positive: the picture is behind the
  // sound) against the slot being heard then, if audio plays.
  videoShown(latencyMs, displayUs) {
    let cur = null;
    for (const r of this.recent) if (r.out_us <= displayUs && (!cur || r.out_us > cur.out_us)) cur = r;
    if (!cur || displayUs - cur.out_us > AUDIO_ACTIVE_US) return;
    pushBounded(this.skewMs, latencyMs - cur.latency_us / 1000, MAX_SAMPLES);
  }

  close() {
    clearTimeout(this.timer);
    this.timer = 0;
    if (this.decoder.state !== 'closed') this.decoder.close();
  }

  // The figures; with `full`, the per-slot records and tick onsets too
  // (server clock: capture_us as on the wire, ear_us when heard).
  snapshot(full = false) {
    const s = this.stats;
    const out = {
      transport: this.transport, frame_ms: this.frameUs / 1000,
      output: this.output ? this.output.kind : 'none', output_fallback: this.output?.fallback ?? null,
      state: this.output ? this.output.state() : 'off',
      ...s,
      late: this.jitter.stats.late, // came after their slot: dropped
      played_pct: s.slots ? 100 * s.played / s.slots : null,
      concealed_pct: s.slots ? 100 * (s.concealed + s.inserted) / s.slots : null,
      mouth_to_ear_p50_ms: percentile(this.earMs, 50),
      mouth_to_ear_p95_ms: percentile(this.earMs, 95),
      mouth_to_ear_last_ms: this.earMs.length ? this.earMs[this.earMs.length - 1] : null,
      av_skew_p50_ms: percentile(this.skewMs, 50),
      av_skew_p5_ms: percentile(this.skewMs, 5),
      av_skew_p95_ms: percentile(this.skewMs, 95),
      av_skew_abs_p95_ms: percentile(this.skewMs.map(Math.abs), 95),
      av_skew_samples: this.skewMs.length,
      output_delay_ms: this.pathUs === null ? null : this.pathUs / 1000,
      output_underruns: this.output?.stats.underruns ?? 0,
      output_moves: this.output?.stats.moves ?? 0,
      renderer: this.output?.queueStats ?? null,
      jitter: this.jitter.snapshot(),
    };
    if (full) {
      out.slots_log = this.slotLog.slice();
      out.ticks = this.tickLog.slice();
    }
    return out;
  }
}

// A decoder output of another length (it should not happen with Opus):
// padded with silence or cut, so that slots keep their length.
function fit(pcm, samples) {
  const out = new Float32Array(samples);
  out.set(pcm.subarray(0, samples));
  return out;
}

// ---- the audio's own connection ---------------------------------------------------

// transport = connection (STREAM_INFO audio_transport 1): a second WebSocket
// to /stream, HELLO with audio | audio only (and the challenge flag with a
// token); STREAM_INFO, then AUDIO_FRAME and CLOCK_PONG only. It pings too:
// its round trips are not behind the video's bytes. hooks: onInfo(info)
// (STREAM_INFO, to check), onFrame(record, nowUs), onPong(record, nowUs),
// onClosed(message), nowUs().
export class AudioConnection {
  constructor(url, name, token, hooks) {
    this.hooks = hooks;
    this.info = null;
    this.state = 'connecting';
    this.bye = null;
    this.bytes = 0;
    const ws = new WebSocket(url);
    const parser = new wire.RecordParser(wire.DEFAULT_MAX_RECORD_BYTES);
    let seq = 0, challenged = false;
    this.ws = ws;
    ws.binaryType = 'arraybuffer';
    const send = (bytes) => { if (ws.readyState === 1) ws.send(bytes); };
    ws.onopen = () => {
      send(wire.encodeHello(name, token, wire.DEFAULT_MAX_RECORD_BYTES,
        wire.HELLO_AUDIO | wire.HELLO_AUDIO_ONLY));
      const ping = () => send(wire.encodeClockPing(seq++, hooks.nowUs()));
      ping();
      this.pingTimer = setInterval(ping, PING_INTERVAL_MS);
    };
    const onRecord = (r) => {
      const now = hooks.nowUs();
      switch (r.kind) {
        case wire.KIND.STREAM_INFO:
          if (this.info) throw new wire.WireError('second STREAM_INFO');
          if (!r.audio_codec) throw new wire.WireError('audio connection without an audio track');
          this.info = r;
          this.state = 'streaming';
          hooks.onInfo(r);
          return;
        case wire.KIND.AUDIO_FRAME:
          if (!this.info) throw new wire.WireError('AUDIO_FRAME before STREAM_INFO');
          hooks.onFrame(r, now);
          return;
        case wire.KIND.CLOCK_PONG:
          hooks.onPong(r, now);
          return;
        case wire.KIND.CHALLENGE:
          if (this.info || !token || challenged) throw new wire.WireError('unexpected CHALLENGE');
          challenged = true;
          wire.encodeAuth(token, r.nonce).then(send,
            (e) => this.close(`cannot answer the challenge: ${e.message}`));
          return;
        case wire.KIND.BYE:
          this.bye = { reason: wire.BYE_REASON[r.reason] || 'unknown', text: r.text };
          return;
        default:
          throw new wire.WireError(`unexpected record ${r.kind} on the audio connection`);
      }
    };
    ws.onmessage = (ev) => {
      const bytes = new Uint8Array(ev.data);
      this.bytes += bytes.byteLength;
      try {
        parser.feed(bytes, onRecord);
      } catch (e) {
        if (!(e instanceof wire.WireError)) throw e;
        send(wire.encodeBye(2, e.message));
        this.close(`audio connection: protocol error: ${e.message}`);
      }
    };
    ws.onclose = (ev) => {
      clearInterval(this.pingTimer);
      if (this.state === 'closed') return;
      this.state = 'closed';
      hooks.onClosed(this.bye
        ? `audio connection: server: ${this.bye.reason}${this.bye.text ? ': ' + this.bye.text : ''}`
        : `audio connection closed (${ev.code})`);
    };
    addEventListener('pagehide', () => send(wire.encodeBye(0, 'page closed')));
  }

  close(message) {
    clearInterval(this.pingTimer);
    if (this.state !== 'closed') {
      this.state = 'closed';
      this.hooks.onClosed(message);
    }
    this.ws.close();
  }
}
