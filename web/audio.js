// SPDX-License-Identifier: MIT
// The audio track, the page's side: whether this browser decodes it, the
// output (an AudioContext with the renderer of audio-worklet.js, muted until
// a user gesture lets it run), and the worker that runs the track
// (audio-worker.js: connection, decoder, jitter buffer, slots; see there).
// The page hands the worker what only it knows: the output's clock, its
// clock offset, the video's recent latency (lip sync), and with transport =
// window the frames that come on the video's WebSocket. It keeps the A/V
// skew (each picture shown against the audio heard then) and the figures the
// worker sends for the overlay, window.ppsStats() and window.ppsAudio().

import * as wire from './wire.js';
import { ChunkQueue } from './audio-worklet.js';

export const RATE_HZ = 48000;
export const OPUS_CONFIG = { codec: 'opus', sampleRate: RATE_HZ, numberOfChannels: 1 };
const CLOCK_INTERVAL_MS = 100; // the output's clock to the worker
const AUDIO_ACTIVE_US = 200000; // audio counts as playing for the A/V skew this long
const RECENT_SLOTS = 64;
const MAX_SKEWS = 1 << 16;

function nowUs() { return (performance.timeOrigin + performance.now()) * 1000; }

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
  if (!('Worker' in window)) return { supported: false, reason: 'no Web Workers' };
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
    this.input = null; // where the worker's slots go: a port of the renderer's
    this.node = null; // the renderer: an AudioWorkletNode, or a ScriptProcessorNode
    this.queue = null; // the ScriptProcessor's slots
    this.rendererStats = null;
    this.onClock = null; // the clock changed (the player tells its worker)
    this.ready = null; // open()'s promise
  }

  open() {
    this.ready = this.openNow();
    return this.ready;
  }

  changed() {
    this.onClock?.();
    this.onChange?.();
  }

  async openNow() {
    this.ctx = new AudioContext({ sampleRate: RATE_HZ, latencyHint: 'interactive' });
    const ctx = this.ctx;
    this.gain = ctx.createGain();
    this.gain.connect(ctx.destination);
    ctx.onstatechange = () => this.changed();
    try {
      await ctx.audioWorklet.addModule('audio-worklet.js');
      const node = new AudioWorkletNode(ctx, 'pps-audio',
        { numberOfInputs: 0, numberOfOutputs: 1, outputChannelCount: [1] });
      node.port.onmessage = (ev) => { this.rendererStats = ev.data.stats; };
      node.connect(this.gain);
      this.node = node;
      this.kind = 'worklet';
    } catch (e) {
      // A browser without AudioWorklet: the same queue, rendered on this thread.
      this.fallback = e.message;
      const queue = new ChunkQueue();
      const node = ctx.createScriptProcessor(1024, 1, 1);
      node.onaudioprocess = (ev) => {
        queue.render(ev.outputBuffer.getChannelData(0), Math.round(ev.playbackTime * ctx.sampleRate));
        this.rendererStats = queue.stats;
      };
      node.connect(this.gain);
      this.node = node;
      this.queue = queue;
      this.kind = 'script-processor';
    }
    this.input = this.newInput();
    this.changed();
  }

  // A port into the renderer for one worker (each connection's track has
  // its own worker; the renderer takes slots from every port it was given).
  newInput() {
    const channel = new MessageChannel();
    if (this.queue) channel.port1.onmessage = (ev) => this.queue.push(ev.data.at, ev.data.pcm);
    else this.node.port.postMessage({ port: channel.port1 }, [channel.port1]);
    return channel.port2;
  }

  // The port for the next worker: the one made at open, then a new one each time.
  takeInput() {
    if (!this.node) return null;
    const port = this.input ?? this.newInput();
    this.input = null;
    return port;
  }

  get running() { return this.ctx?.state === 'running' && this.kind !== 'none'; }
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
    return r.finally(() => this.changed());
  }

  mute() {
    this.userMuted = true;
    if (this.gain) this.gain.gain.value = 0;
    this.changed();
  }

  // The output's clock for the worker: the position rendered at a time and
  // when positions reach the ear (getOutputTimestamp: the device's latency
  // included), all on the viewer's clock (us since 1970).
  clock() {
    const c = this.ctx;
    if (!c) return { running: false, heard: false, latency_us: 0 };
    const ts = c.getOutputTimestamp ? c.getOutputTimestamp() : null;
    const have = ts && ts.performanceTime > 0;
    return {
      running: this.running, heard: this.heard, rate_hz: c.sampleRate,
      frame: c.currentTime * c.sampleRate, at_us: nowUs(),
      out_context_time: have ? ts.contextTime : null,
      out_at_us: have ? (performance.timeOrigin + ts.performanceTime) * 1000 : null,
      latency_us: ((c.baseLatency || 0) + (c.outputLatency || 0)) * 1e6,
    };
  }
}

// ---- the player ------------------------------------------------------------------

export class AudioPlayer {
  // output: an AudioOutput or null (measured, never heard). onError(message).
  constructor(output, onError) {
    this.output = output;
    this.onError = onError;
    this.worker = null;
    this.info = null;
    this.last = null; // the worker's last figures
    this.recent = []; // the last slots: {out_us, latency_us}
    this.skewMs = [];
    this.offsetUs = 0;
    this.requests = new Map();
    this.requestId = 0;
    this.queued = []; // frames before the worker started
    this.started = false;
    this.stopped = false;
    if (output) output.onClock = () => this.sendClock();
  }

  // The stream has a playable track (STREAM_INFO): the worker starts it;
  // with `connection` ({url, name, token}), on its own WebSocket.
  start(info, connection, lipSync, offsetUs) {
    this.info = info;
    this.offsetUs = offsetUs;
    const w = new Worker(new URL('audio-worker.js', import.meta.url), { type: 'module' });
    this.worker = w;
    w.onmessage = (ev) => this.message(ev.data);
    w.onerror = (ev) => this.onError(`audio worker: ${ev.message || 'failed'}`);
    // The renderer's port once the output is open (it normally is by now).
    const ready = this.output?.ready ?? Promise.resolve();
    ready.catch(() => {}).then(() => {
      if (this.stopped) return;
      const port = this.output?.takeInput() ?? null;
      w.postMessage({ type: 'start', info, connection, lipSync, offsetUs: this.offsetUs,
        port, clock: this.output?.clock() ?? null }, port ? [port] : []);
      if (port) this.clockTimer = setInterval(() => this.sendClock(), CLOCK_INTERVAL_MS);
      this.started = true;
      for (const [m, t] of this.queued) w.postMessage(m, t);
      this.queued = [];
    });
  }

  // The track's connection ended (or the page closes): the worker says
  // BYE on its own WebSocket and ends.
  stop() {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.clockTimer);
    this.worker?.postMessage({ type: 'close' });
    for (const resolve of this.requests.values()) resolve(null);
    this.requests.clear();
  }

  post(m, transfer = []) {
    if (!this.worker || this.stopped) return;
    if (this.started) this.worker.postMessage(m, transfer);
    else if (this.queued.length < 64) this.queued.push([m, transfer]);
  }

  sendClock() {
    if (this.started && this.output) this.worker.postMessage({ type: 'output', clock: this.output.clock() });
  }

  message(m) {
    if (this.stopped) return;
    switch (m.type) {
      case 'slot':
        if (this.recent.length >= RECENT_SLOTS) this.recent.shift();
        this.recent.push(m);
        return;
      case 'stats':
        this.last = m.snapshot;
        return;
      case 'pong':
        this.onPong?.(m.record, m.nowUs);
        return;
      case 'error':
        this.onError(m.message);
        return;
      case 'full': {
        const resolve = this.requests.get(m.id);
        this.requests.delete(m.id);
        resolve?.(m.snapshot);
        return;
      }
      default:
    }
  }

  // An AUDIO_FRAME from the video's WebSocket (transport = window).
  frame(r, arrivalUs) {
    const payload = r.payload.slice().buffer;
    this.post({ type: 'frame', arrivalUs, record: { seq: r.seq, capture_us: r.capture_us,
      duration_us: r.duration_us, flags: r.flags, payload } }, [payload]);
  }

  // The page's clock offset (server - viewer, as applied) changed.
  setOffset(offsetUs) {
    if (offsetUs === this.offsetUs) return;
    this.offsetUs = offsetUs;
    this.post({ type: 'clock', offsetUs });
  }

  // Lip sync: the picture's recent latency (0: none lately).
  setVideoLatency(latencyUs) { this.post({ type: 'video', latencyUs }); }

  // A picture shown at displayUs with latency latencyMs: the A/V skew
  // (video latency - audio latency; positive: the picture is behind the
  // sound) against the slot heard then, if audio plays.
  videoShown(latencyMs, displayUs) {
    let cur = null;
    for (const r of this.recent) if (r.out_us <= displayUs && (!cur || r.out_us > cur.out_us)) cur = r;
    if (!cur || displayUs - cur.out_us > AUDIO_ACTIVE_US) return;
    if (this.skewMs.length >= MAX_SKEWS) this.skewMs.splice(0, MAX_SKEWS / 2);
    this.skewMs.push(latencyMs - cur.latency_us / 1000);
  }

  skew() {
    return {
      av_skew_p5_ms: percentile(this.skewMs, 5),
      av_skew_p50_ms: percentile(this.skewMs, 50),
      av_skew_p95_ms: percentile(this.skewMs, 95),
      av_skew_abs_p95_ms: percentile(this.skewMs.map(Math.abs), 95),
      av_skew_samples: this.skewMs.length,
    };
  }

  // The worker's last figures (at most 250 ms old), the output's and the skew.
  snapshot() {
    return { ...(this.last || {}), ...this.outputFigures(), ...this.skew() };
  }

  outputFigures() {
    const o = this.output;
    return { state: o ? o.state() : 'off', output: o ? o.kind : 'none',
      output_fallback: o?.fallback ?? null, renderer: o?.rendererStats ?? null };
  }

  // The same with the per-slot records and the tick onsets: a Promise.
  full() {
    if (!this.worker) return Promise.resolve(null);
    const id = ++this.requestId;
    return new Promise((resolve) => {
      this.requests.set(id, (s) => resolve(s && { ...s, ...this.outputFigures(), ...this.skew() }));
      this.post({ type: 'full', id });
    });
  }
}

// ---- the page's audio ---------------------------------------------------------------

// What the viewer holds of the audio: whether it is wanted and supported,
// the output, the player once the stream announces a track, the sound
// button (and the first gesture anywhere, for the autoplay policy), the
// overlay's line and the figures for tests.
export class PageAudio {
  constructor(wanted, button) {
    this.wanted = wanted;
    this.button = button;
    this.support = null;
    addEventListener('pagehide', () => this.player?.stop());
    this.output = null;
    this.player = null;
    this.error = null;
    button.addEventListener('click', (ev) => {
      ev.stopPropagation();
      if (!this.output) return;
      if (this.output.state() === 'playing') this.output.mute();
      else this.output.unmute().catch((e) => this.failed(`cannot start the sound: ${e.message}`));
    });
    // Autoplay policy: the first gesture anywhere on the page (but the
    // button, whose click decides for itself) starts the sound.
    for (const kind of ['pointerdown', 'keydown']) {
      addEventListener(kind, (ev) => {
        if (ev.target !== button && this.output && !this.output.running && !this.output.userMuted)
          this.output.unmute().catch(() => {});
      });
    }
  }

  // At load: whether to ask for audio (this browser decodes it); the output
  // opens now (suspended until a gesture where the autoplay policy says so).
  async init() {
    this.support = this.wanted ? await audioSupport()
      : { supported: false, reason: 'off (audio=0)' };
    if (!this.support.supported) {
      if (this.wanted) console.warn('ppstream: no audio:', this.support.reason);
      return false;
    }
    try {
      this.output = new AudioOutput(() => this.update());
      this.output.open().catch((e) => this.failed(`audio output: ${e.message}`));
    } catch (e) {
      this.output = null;
      this.failed(`audio output: ${e.message}`);
    }
    return true;
  }

  failed(message) {
    this.error = message;
    console.warn('ppstream:', message);
    this.update();
  }

  // STREAM_INFO announced a track. connection: {url, name, token} for the
  // audio's own WebSocket; onPong(record, nowUs) takes that one's PONGs.
  start(info, connection, lipSync, offsetUs, onPong) {
    if (!trackPlayable(info)) {
      this.failed(`audio track not playable here: codec ${info.audio_codec}, ` +
        `${info.audio_channels} channel(s), ${info.audio_rate_hz} Hz, ` +
        `${info.audio_frame_us} us frames`);
      return;
    }
    this.player = new AudioPlayer(this.output, (m) => this.failed(m));
    this.player.onPong = onPong;
    this.player.start(info, info.audio_transport === wire.AUDIO_OWN_CONNECTION ? connection : null,
      lipSync, offsetUs);
    this.update();
  }

  // The stream's connection ended: its track with it (the next STREAM_INFO
  // starts a new one; the output stays, muted or not as the user left it).
  stop() {
    this.player?.stop();
    this.player = null;
    this.error = null;
    this.update();
  }

  frame(r, arrivalUs) { this.player?.frame(r, arrivalUs); }
  videoShown(latencyMs, displayUs) { this.player?.videoShown(latencyMs, displayUs); }

  // Now and then: lip sync's video latency and the clock offset to the worker.
  tick(videoLatencyUs, offsetUs) {
    if (!this.player) return;
    this.player.setVideoLatency(videoLatencyUs);
    this.player.setOffset(offsetUs);
  }

  // The sound button: "unmute" until the AudioContext runs and is not muted.
  update() {
    this.button.hidden = !this.player || !this.output;
    this.button.textContent = this.output?.state() === 'playing' ? 'mute' : 'unmute';
  }

  line() {
    if (!this.wanted) return 'audio off';
    if (this.support && !this.support.supported) return `audio: ${this.support.reason}`;
    if (!this.player) return this.error ? `audio: ${this.error}` : 'audio: none in this stream';
    const a = this.player.snapshot();
    const f = (x, n = 0) => (x === null || x === undefined ? '-' : x.toFixed(n));
    const skew = a.av_skew_p50_ms === null ? '-'
      : (a.av_skew_p50_ms >= 0 ? '+' : '') + f(a.av_skew_p50_ms);
    return `audio ${a.state === 'muted' ? 'muted (click to unmute)' : a.state}  ` +
      `mouth-to-ear ${f(a.mouth_to_ear_last_ms)} ms (p50 ${f(a.mouth_to_ear_p50_ms)})  ` +
      `played ${f(a.played_pct, 1)}%  late ${a.late ?? '-'}  A/V ${skew} ms` +
      (this.error ? `\n${this.error}` : '');
  }

  // For window.ppsStats().
  summary() {
    if (!this.player) return null;
    const a = this.player.snapshot();
    return { state: a.state, transport: a.transport, slots: a.slots, played_pct: a.played_pct,
      late: a.late, mouth_to_ear_p50_ms: a.mouth_to_ear_p50_ms,
      mouth_to_ear_p95_ms: a.mouth_to_ear_p95_ms, av_skew_p50_ms: a.av_skew_p50_ms,
      av_skew_abs_p95_ms: a.av_skew_abs_p95_ms };
  }

  // For window.ppsAudio(): the state and the player's figures; with full
  // (a Promise), its per-slot records and tick onsets too.
  figures(full = false) {
    const c = this.output?.ctx;
    const base = { wanted: this.wanted, support: this.support, error: this.error,
      context: c ? { state: c.state, sample_rate: c.sampleRate, base_latency_s: c.baseLatency,
        output_latency_s: c.outputLatency } : null };
    if (!full) return { ...base, track: this.player ? this.player.snapshot() : null };
    return (this.player ? this.player.full() : Promise.resolve(null))
      .then((track) => ({ ...base, track }));
  }
}
