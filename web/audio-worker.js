// SPDX-License-Identifier: MIT
// The audio track's pipeline, in a dedicated worker, as
// client/pps-audio-player.c runs it in pps-client: AUDIO_FRAME records ->
// a WebCodecs AudioDecoder (each frame decoded as it arrives, in order: Opus
// keeps state from frame to frame) -> the adaptive jitter buffer (jitter.js)
// -> one slot per frame, due on the viewer's clock -> the renderer
// (audio-worklet.js, through a MessagePort: the page's main thread is not on
// the way) -> statistics.
//
// Why a worker: the page's main thread decodes, combines and draws the
// video; on a loaded 2-core machine it stalls for 100-250 ms at times
// (measured at start-up). On that thread the audio's arrival times, decoder
// outputs and slot timer all waited behind those stalls, which the jitter
// buffer took for network delay (its playout delay jumped by 200 ms). Here
// only the page's messages to the worker wait: the output clock (rarely,
// and extrapolated), lip sync's video latency, and with transport = window
// the frames themselves (they arrive on the video's WebSocket).
//
// Where each slot goes. The page sends the AudioContext's clock (the
// position rendered at a time, and getOutputTimestamp()'s mapping of
// positions to the time they reach the ear, the device's latency included),
// which stays linear between messages. A slot is placed OUTPUT_SLACK_US past
// the position rendered at its due time, the next one right after it (no
// gap, no overlap); the position moves only in a silent slot (the output's
// clock drifted from the viewer's) or when the next one was already
// rendered (counted: underruns). So when a slot is heard is known, not
// guessed. Not running (no user gesture yet: autoplay policy): slots are
// decoded, played out on the clock and measured all the same, their time to
// the ear estimated from the slack and the announced latencies, flagged
// "heard": false.
//
// Lip sync (pps_jitter_set_floor): audio is the master and the picture the
// laggard, so the audio's playout delay is kept at least at the video's
// recent latency minus SYNC_LEAD_US minus the output's own delay: heard at
// most about 30 ms before its picture is shown, from the next talkspurt.
//
// Missing frames: WebCodecs has no Opus loss concealment or in-band FEC, so
// a missing frame after sound repeats the last one fading out (once), and is
// silence otherwise.
//
// Messages from the page: start {info, connection: {url, name, token} |
// null, port (to the renderer) | null, lipSync}, frame {record, arrivalUs},
// output {clock}, clock {offsetUs}, video {latencyUs}, full {id}, close. To
// the page: slot {out_us, latency_us}, stats {snapshot}, pong {record,
// nowUs}, error {message}, full {id, snapshot}.

import * as wire from './wire.js';
import { JitterBuffer, PLAY, CONCEAL, INSERT, SKIP } from './jitter.js';

const RATE_HZ = 48000;
const OPUS_CONFIG = { codec: 'opus', sampleRate: RATE_HZ, numberOfChannels: 1 };
// Opus's decoder-side delay in the VOIP application at 48 kHz (2.5 ms of
// CELT overlap + 4 ms of SILK's resampler): decoded sample i of a frame was
// captured this much before capture_us + i / rate (client/pps-audio-player.c).
const OPUS_DELAY_US = 6500;
const SYNC_LEAD_US = 30000; // PPS_AUDIO_SYNC_LEAD_US
// A slot is placed this far past the position rendered at its due time:
// what the worker's timer may be late by (measured on the 2-core test
// machine: 15 ms at most after the first second) before a slot is heard late.
const OUTPUT_SLACK_US = 20000;
const OUTPUT_MIN_AHEAD_US = 3000; // a position closer than this to the rendered one is too late
const OUTPUT_MOVE_US = 10000; // in a silent slot, the drift that moves the position
const TICK_LEVEL = 1000 / 32768; // codec/pps-audio.h: PPS_AUDIO_TICK_LEVEL
const TICK_QUIET_SAMPLES = 4800; // 100 ms of quiet before a tick
const MAX_SAMPLES = 1 << 16; // latencies kept (about 20 min of 20 ms slots)
const SLOTS_KEPT = 3000; // per-slot records for tests: the last 60 s
const TICKS_KEPT = 256;
const PENDING_LIMIT = 64; // frames in the decoder at once
const SLOTS_PER_WAKE = 64;
const STATS_INTERVAL_MS = 250;
const PING_INTERVAL_MS = 1000;

function nowUs() { return (performance.timeOrigin + performance.now()) * 1000; }

function pushBounded(list, value, limit) {
  if (list.length >= limit) list.splice(0, list.length - limit + 1);
  list.push(value);
}

function percentile(values, p) {
  if (!values.length) return null;
  const v = Float64Array.from(values).sort();
  return v[Math.max(1, Math.ceil(p / 100 * v.length)) - 1];
}

// ---- the output's positions --------------------------------------------------------

class OutputPlacer {
  constructor(port) {
    this.port = port; // to the renderer (worklet or the page's fallback)
    this.clock = null; // the page's last reading (AudioOutput.clock() in audio.js)
    this.nextAt = null; // the position after the last slot placed
    this.pathUs = null; // a slot's due time to the ear, chosen when the output starts
    this.stats = { underruns: 0, moves: 0 };
  }

  update(clock) {
    this.clock = clock;
    if (!clock.running) this.nextAt = this.pathUs = null;
  }

  get running() { return !!(this.port && this.clock?.running); }
  get heard() { return this.running && this.clock.heard; }
  nominalDelayUs() { return OUTPUT_SLACK_US + (this.clock ? this.clock.latency_us : 0); }

  renderingAt(tUs) { return this.clock.frame + (tUs - this.clock.at_us) * this.clock.rate_hz / 1e6; }
  inTime(at, tUs) { return at >= this.renderingAt(tUs) + OUTPUT_MIN_AHEAD_US * this.clock.rate_hz / 1e6; }

  // The position that reaches the ear at earUs (null without the mapping).
  atForEar(earUs) {
    const c = this.clock;
    if (c.out_at_us === null) return null;
    return (c.out_context_time + (earUs - c.out_at_us) / 1e6) * c.rate_hz;
  }

  // When position `at` reaches the ear (viewer's clock, us).
  earUs(at) {
    const c = this.clock;
    if (c.out_at_us === null)
      return c.at_us + (at - c.frame) * 1e6 / c.rate_hz + c.latency_us;
    return c.out_at_us + (at / c.rate_hz - c.out_context_time) * 1e6;
  }

  // Places one slot of `samples` samples due at dueUs (now nowUs); `pause`:
  // a silent slot, where the position may move. {at, earUs}, or null if the
  // output does not run. Its sound goes to put().
  place(dueUs, samples, pause, tUs) {
    if (!this.running) {
      this.nextAt = null;
      return null;
    }
    const sr = this.clock.rate_hz;
    const rendering = this.renderingAt(tUs);
    const soonest = Math.ceil(rendering + OUTPUT_MIN_AHEAD_US * sr / 1e6);
    // Where it should be: heard pathUs after its due time, pathUs being the
    // slack plus the device's delay as the output started. Placed by the
    // position-to-ear mapping (getOutputTimestamp), steady, not by the
    // rendered position, which the page reads in steps of the device's
    // bursts (10-15 ms here: moves for nothing). A slot handled late keeps
    // its time if it can, else goes out at once.
    if (this.pathUs === null) this.pathUs = this.earUs(rendering) - tUs + OUTPUT_SLACK_US;
    const ideal = this.atForEar(dueUs + this.pathUs) ??
      rendering + (dueUs - tUs + OUTPUT_SLACK_US) * sr / 1e6;
    const want = Math.max(soonest, Math.round(ideal));
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

  put(at, pcm) { this.port.postMessage({ at, pcm }, [pcm.buffer]); }
}

// ---- ticks -----------------------------------------------------------------------

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

// A decoder output of another length (not seen with Opus): padded with
// silence or cut, so that slots keep their length.
function fit(pcm, samples) {
  const out = new Float32Array(samples);
  out.set(pcm.subarray(0, samples));
  return out;
}

// ---- the track ----------------------------------------------------------------------

class AudioTrack {
  constructor(info, placer, lipSync) {
    this.frameUs = info.audio_frame_us;
    this.samples = Math.round(this.frameUs * RATE_HZ / 1e6);
    this.transport = info.audio_transport === wire.AUDIO_OWN_CONNECTION ? 'connection' : 'window';
    this.output = placer;
    this.lipSync = lipSync;
    this.videoLatencyUs = 0; // the page's recent video latency (0: no picture lately)
    this.offsetUs = 0; // server clock - viewer clock, as the page applies it
    this.jitter = new JitterBuffer(this.frameUs);
    this.pending = new Map(); // chunk index (timestamp / frame) -> frame being decoded
    this.decodeIndex = 0;
    this.decoder = this.makeDecoder();
    this.timer = 0;
    this.timerDue = Infinity;
    this.lastPcm = null; // the last slot's sound, for concealment
    this.concealRun = 0;
    this.pathUs = null; // the last slot's due time to the ear (the output's delay)
    this.ticks = new TickDetector();
    this.slotLog = [];
    this.tickLog = [];
    this.earMs = [];
    this.stats = { frames: 0, slots: 0, played: 0, concealed: 0, inserted: 0, skipped: 0,
      decoded_late: 0, undecoded: 0, outputs_unmatched: 0, decode_errors: 0,
      decoder_overflow: 0, heard_slots: 0, wake_late_max_ms: 0, wakes: 0,
      wakes_late_10ms: 0, wakes_late_20ms: 0 };
  }

  makeDecoder() {
    const d = new AudioDecoder({
      output: (data) => this.decoded(data),
      error: (e) => {
        this.stats.decode_errors++;
        post({ type: 'error', message: `audio decoder: ${e.message}` });
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
    for (const f of frames) {
      f.failed = true;
      if (f.placed) this.decodedLate(f);
    }
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

  // An AUDIO_FRAME record (payload: Uint8Array), arrived at arrivalUs.
  frame(r, arrivalUs) {
    const capture = r.capture_us - this.offsetUs;
    this.stats.frames++;
    const frame = { seq: r.seq, captureUs: capture, speech: !!(r.flags & wire.AUDIO_SPEECH),
      serverCaptureUs: r.capture_us, offsetUs: this.offsetUs, arrivalUs, pcm: null, placed: null };
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
      frame.failed = true; // concealed in its slot
    }
    this.jitter.put(frame, arrivalUs);
    this.arm();
  }

  arm() {
    const due = this.jitter.nextDue();
    if (due === this.timerDue && this.timer) return;
    clearTimeout(this.timer);
    this.timer = 0;
    this.timerDue = due;
    if (due === Infinity) return;
    this.timer = setTimeout(() => this.wake(), Math.max(0, (due - nowUs()) / 1000));
  }

  wake() {
    this.timer = 0;
    const now = nowUs();
    if (this.timerDue !== Infinity) {
      // How late the timer fires: what the output's slack must cover.
      const lateMs = (now - this.timerDue) / 1000;
      this.stats.wakes++;
      this.stats.wake_late_max_ms = Math.max(this.stats.wake_late_max_ms, lateMs);
      if (lateMs > 10) this.stats.wakes_late_10ms++;
      if (lateMs > 20) this.stats.wakes_late_20ms++;
    }
    const path = this.pathUs ?? this.output.nominalDelayUs();
    const video = this.lipSync ? this.videoLatencyUs : 0;
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

  play(slot, tUs) {
    const s = this.stats;
    if (slot.action === SKIP) { // decoded already (the decoder's state runs on), not played
      s.skipped++;
      return;
    }
    // Still in the decoder (its output is a task of this thread's too).
    const waiting = slot.action === PLAY && !slot.frame.pcm && !slot.frame.failed;
    const placed = this.output.place(slot.dueUs, this.samples, !slot.speech, tUs);
    // Not running (no gesture yet): where it would have been heard.
    const outUs = placed ? placed.earUs : slot.dueUs + this.output.nominalDelayUs();
    const heard = placed !== null && this.output.heard;
    if (heard) s.heard_slots++;
    this.pathUs = outUs - slot.dueUs;
    const earUs = outUs + OPUS_DELAY_US;
    const latencyUs = earUs - slot.captureUs;
    pushBounded(this.earMs, latencyUs / 1000, MAX_SAMPLES);
    post({ type: 'slot', out_us: outUs, latency_us: latencyUs });
    // On the server's clock, with the offset that mapped the frame's times
    // (the page's offset may have moved since).
    const f = slot.frame, offset = f ? f.offsetUs : this.offsetUs;
    const entry = { seq: slot.seq, how: slot.action,
      capture_us: f ? f.serverCaptureUs : slot.captureUs + offset,
      arrival_us: f ? f.arrivalUs + offset : null,
      ear_us: earUs + offset, due_us: slot.dueUs + offset, heard };
    pushBounded(this.slotLog, entry, SLOTS_KEPT);
    s.slots++;
    if (waiting) {
      // Its decoder output has not come yet: it still plays if it comes
      // before its position is rendered.
      this.lastPcm = null;
      slot.frame.placed = { entry, at: placed ? placed.at : null };
      return;
    }
    let how = slot.action;
    if (how === PLAY && !slot.frame.pcm) {
      how = CONCEAL;
      s.undecoded++;
    }
    this.sound(entry, how, how === PLAY ? slot.frame.pcm : null, placed ? placed.at : null);
  }

  // What a slot sounds like: the frame (PLAY), a concealment (CONCEAL), or
  // silence (INSERT); out to its position, its ticks found, counted.
  sound(entry, how, pcm, at) {
    if (how === CONCEAL) pcm = this.conceal();
    else this.concealRun = 0;
    this.lastPcm = how === PLAY ? pcm : null;
    entry.how = how;
    this.stats[how]++;
    this.ticks.push(pcm, this.samples, (i) => {
      const after = i * 1e6 / RATE_HZ;
      pushBounded(this.tickLog, { seq: entry.seq, sample: i, how, heard: entry.heard,
        capture_us: entry.capture_us + after - OPUS_DELAY_US,
        ear_us: entry.ear_us - OPUS_DELAY_US + after }, TICKS_KEPT);
    });
    if (pcm && at !== null && this.output.running) this.output.put(at, pcm.slice());
  }

  // A frame out of the decoder after its slot was placed.
  decodedLate(frame) {
    const p = frame.placed;
    frame.placed = null;
    const inTime = frame.pcm && (p.at === null || this.output.running && this.output.inTime(p.at, nowUs()));
    if (inTime) this.stats.decoded_late++;
    else this.stats.undecoded++;
    this.sound(p.entry, inTime ? PLAY : CONCEAL, frame.pcm, p.at);
  }

  close() {
    clearTimeout(this.timer);
    this.timer = 0;
    if (this.decoder.state !== 'closed') this.decoder.close();
  }

  // The figures; with `full`, the per-slot records and tick onsets too
  // (server clock: capture_us as on the wire; ear_us when heard).
  snapshot(full = false) {
    const s = this.stats;
    const out = {
      transport: this.transport, frame_ms: this.frameUs / 1000,
      ...s,
      late: this.jitter.stats.late, // came after their slot: dropped
      played_pct: s.slots ? 100 * s.played / s.slots : null,
      concealed_pct: s.slots ? 100 * (s.concealed + s.inserted) / s.slots : null,
      mouth_to_ear_p50_ms: percentile(this.earMs, 50),
      mouth_to_ear_p95_ms: percentile(this.earMs, 95),
      mouth_to_ear_last_ms: this.earMs.length ? this.earMs[this.earMs.length - 1] : null,
      output_delay_ms: this.pathUs === null ? null : this.pathUs / 1000,
      output_underruns: this.output.stats.underruns,
      output_moves: this.output.stats.moves,
      jitter: this.jitter.snapshot(),
    };
    if (full) {
      out.slots_log = this.slotLog.slice();
      out.ticks = this.tickLog.slice();
    }
    return out;
  }
}

// ---- the audio's own connection ---------------------------------------------------

// transport = connection (STREAM_INFO audio_transport 1): a second WebSocket
// to /stream, HELLO with audio | audio only (and the challenge flag with a
// token); STREAM_INFO, then AUDIO_FRAME and CLOCK_PONG only. It pings too
// (its PONGs go to the page's clock): its round trips are not behind the
// video's bytes.
class AudioConnection {
  constructor({ url, name, token }, expected, onFrame) {
    this.state = 'connecting';
    this.info = null;
    this.bye = null;
    this.bytes = 0;
    const ws = new WebSocket(url);
    const parser = new wire.RecordParser(wire.DEFAULT_MAX_RECORD_BYTES);
    let seq = 0, challenged = false;
    this.ws = ws;
    ws.binaryType = 'arraybuffer';
    this.send = (bytes) => { if (ws.readyState === 1) ws.send(bytes); };
    ws.onopen = () => {
      this.send(wire.encodeHello(name, token, wire.DEFAULT_MAX_RECORD_BYTES,
        wire.HELLO_AUDIO | wire.HELLO_AUDIO_ONLY));
    };
    // Pings once admitted (STREAM_INFO): with a token, only AUTH may follow HELLO before.
    const startPings = () => {
      const ping = () => this.send(wire.encodeClockPing(seq++, nowUs()));
      ping();
      this.pingTimer = setInterval(ping, PING_INTERVAL_MS);
    };
    const onRecord = (r) => {
      const now = nowUs();
      switch (r.kind) {
        case wire.KIND.STREAM_INFO:
          if (this.info) throw new wire.WireError('second STREAM_INFO');
          if (!r.audio_codec) throw new wire.WireError('audio connection without an audio track');
          // The same track as announced on the video's connection.
          if (r.audio_codec !== expected.audio_codec || r.audio_frame_us !== expected.audio_frame_us ||
              r.audio_rate_hz !== expected.audio_rate_hz ||
              r.audio_channels !== expected.audio_channels)
            throw new wire.WireError('another audio track than the video connection\'s');
          this.info = r;
          this.state = 'streaming';
          startPings();
          return;
        case wire.KIND.AUDIO_FRAME:
          if (!this.info) throw new wire.WireError('AUDIO_FRAME before STREAM_INFO');
          onFrame(r, now);
          return;
        case wire.KIND.CLOCK_PONG:
          post({ type: 'pong', record: r, nowUs: now });
          return;
        case wire.KIND.CHALLENGE:
          if (this.info || !token || challenged) throw new wire.WireError('unexpected CHALLENGE');
          challenged = true;
          wire.encodeAuth(token, r.nonce).then(this.send,
            (e) => this.close(`cannot answer the challenge: ${e.message}`));
          return;
        case wire.KIND.BYE:
          this.bye = { reason: wire.BYE_REASON[r.reason] || 'unknown', text: r.text };
          return;
        default:
          throw new wire.WireError(`unexpected record ${r.kind}`);
      }
    };
    ws.onmessage = (ev) => {
      const bytes = new Uint8Array(ev.data);
      this.bytes += bytes.byteLength;
      try {
        parser.feed(bytes, onRecord);
      } catch (e) {
        if (!(e instanceof wire.WireError)) throw e;
        this.send(wire.encodeBye(2, e.message));
        this.close(`audio connection: protocol error: ${e.message}`);
      }
    };
    ws.onclose = (ev) => {
      this.close(this.bye
        ? `audio connection: server: ${this.bye.reason}${this.bye.text ? ': ' + this.bye.text : ''}`
        : `audio connection closed (${ev.code})`);
    };
  }

  close(message) {
    clearInterval(this.pingTimer);
    if (this.state !== 'closed') {
      this.state = 'closed';
      if (message) post({ type: 'error', message });
    }
    if (this.ws.readyState <= 1) this.ws.close();
  }

  leave(text) {
    this.send(wire.encodeBye(0, text));
    this.close(null);
  }
}

// ---- the worker ---------------------------------------------------------------------

const post = (m) => self.postMessage(m);
let track = null, connection = null, placer = null, statsTimer = 0;

function snapshot(full) {
  if (!track) return null;
  const out = track.snapshot(full);
  out.connection = connection ? connection.state : null;
  return out;
}

self.onmessage = (ev) => {
  const m = ev.data;
  switch (m.type) {
    case 'start':
      placer = new OutputPlacer(m.port);
      if (m.clock) placer.update(m.clock);
      track = new AudioTrack(m.info, placer, m.lipSync);
      track.offsetUs = m.offsetUs || 0;
      if (m.connection)
        connection = new AudioConnection(m.connection, m.info, (r, now) => track.frame(r, now));
      statsTimer = setInterval(() => post({ type: 'stats', snapshot: snapshot(false) }),
        STATS_INTERVAL_MS);
      return;
    case 'frame':
      track?.frame({ ...m.record, payload: new Uint8Array(m.record.payload) }, m.arrivalUs);
      return;
    case 'output':
      placer?.update(m.clock);
      return;
    case 'clock':
      if (track) track.offsetUs = m.offsetUs;
      return;
    case 'video':
      if (track) track.videoLatencyUs = m.latencyUs;
      return;
    case 'full':
      post({ type: 'full', id: m.id, snapshot: snapshot(true) });
      return;
    case 'close':
      clearInterval(statsTimer);
      connection?.leave('page closed');
      track?.close();
      self.close();
      return;
    default:
  }
};
