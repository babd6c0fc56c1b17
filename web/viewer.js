// SPDX-License-Identifier: MIT
// The ppstream browser viewer: WebSocket -> records (wire.js) -> reassembly
// and layered decoding (decode.js) -> playout (playout.js) -> WebGL2 combine
// (render.js) -> canvas + overlay. Frames are accounted as pps-client does
// (client/pps-stats.c): every frame of the stream from the first window the
// viewer saw begin is shown or not, with a reason; latency is display time
// minus capture time on the viewer's clock (offset from CLOCK_PING/PONG).
// window.ppsStats() returns the statistics as a JSON-able object.
//
// A lost connection is tried again (reconnect.js: 0.5 s, doubling to 3 s,
// jittered): a server that restarts, a BYE other than "unauthorized", a
// network cut, a server that stops answering. Each new connection is a new
// stream (its frame indices, clock and audio start again); the statistics
// add up across them and count the reconnections. The notice over the
// picture (controls.js) says why the viewer is not streaming and what to do:
// the countdown to the next try, a token field after "unauthorized", the
// browser's missing WebCodecs.
//
// URL parameters: policy=fixed|asap|adaptive|smooth (default asap, as
// pps-client), tolerance_ms (fixed policy; 0 = from the stream), stream
// (a stream's name on a relay: room/alice; the relay's front page, relay.html,
// lists them), token
// (the server's access token; else the one typed into the page's token
// field, kept for the tab in sessionStorage), name, overlay=0 (hide the overlay),
// renderer=webgl2|cpu|auto (auto: the WebGL2 combine unless WebGL is a
// software rasterizer, where the same integer combine in JavaScript is faster),
// audio=0 (do not ask for the audio track), lip_sync=0 (do not delay the
// audio to the picture's latency).
//
// The audio track (audio.js, audio-worker.js): asked for in HELLO when this
// browser decodes Opus; its frames come on this connection (the server's
// [audio] transport = window) or on a second, audio-only WebSocket that the
// audio worker opens (connection). Browsers start muted: a click on the page
// (or the sound button) starts the AudioContext. window.ppsAudio() returns
// its statistics; window.ppsAudioFull() (a Promise) adds the per-slot
// records and tick onsets, and the capture times of the frames that carried
// the test source's flash.

import * as wire from './wire.js';
import { Reassembly, LayeredDecoder, firstFrameOf, lastFrameOf, flashIn } from './decode.js';
import { Playout, MAX_QUEUE_FRAMES, DEFAULT_POLICY } from './playout.js';
import { Combiner, CpuCombiner, webglIsSoftware } from './render.js';
import { PageAudio } from './audio.js';
import { Backoff } from './reconnect.js';
import { Controls, initialToken } from './controls.js';

const PING_INTERVAL_MS = 1000;
const RECOVERY_INTERVAL_MS = 1000;
const FREEZE_MS = 100;
const MAX_LATENCIES = 1 << 17;
// A window's frames that did not come out this long after its end are lost.
const ACCOUNT_AFTER_MS = 500;
// Lip sync follows the 90th percentile of the last frames shown (about 2 s),
// while one was shown in the last second (client/pps-stats.c).
const RECENT_VIDEO = 64;
const RECENT_VIDEO_PERCENTILE = 90;
const RECENT_VIDEO_MAX_AGE_MS = 1000;
const FLASHES_KEPT = 256;
// No STREAM_INFO this long after the connection began (the challenge
// included): the server is not answering.
const HANDSHAKE_TIMEOUT_MS = 10000;
// Nothing received this long while streaming: the server or the path is
// gone without a word (PONGs alone come every PING_INTERVAL_MS).
const SILENCE_TIMEOUT_MS = 5000;

const params = new URLSearchParams(location.search);
const canvas = document.getElementById('video');
const overlay = document.getElementById('overlay');
const showOverlay = params.get('overlay') !== '0';

function nowUs() { return (performance.timeOrigin + performance.now()) * 1000; }

const clock = { bestRttUs: 0, offsetUs: 0, have: false, lastRttUs: 0 };
// "auto": the offset is applied only where it exceeds its uncertainty.
function appliedOffsetUs() {
  return clock.have && Math.abs(clock.offsetUs) > clock.bestRttUs / 2 ? clock.offsetUs : 0;
}
function toClient(serverUs) { return serverUs - appliedOffsetUs(); }

// state: connecting, streaming, reconnecting (waiting for the next try),
// token (refused: waiting for the user's token), failed (for good: no
// WebCodecs, no renderer).
const stats = {
  state: 'connecting', error: null, bye: null,
  connects: 0, reconnects: 0, streaming_at_unix_ms: null, retry_at_unix_ms: null,
  frames_total: 0, frames_shown: 0, frames_decoded: 0,
  reasons: { late: 0, undecodable: 0, dropped: 0, lost: 0, overflow: 0 },
  layers_shown: [0, 0, 0, 0, 0],
  windows: 0, windows_dropped: 0, windows_partial: 0,
  bytes: 0, freezes: 0, frozen_ms: 0, freeze_longest_ms: 0,
  base_losses: 0, last_frame_index: -1, last_display_us: 0, recovery_requests: 0,
};
const latencies = [];
const freezeLog = []; // the first freezes: frame, gap, when (for diagnosis)
const bytesLog = []; // [time_ms, bytes] of the last second
const shownLog = []; // time_ms of frames shown in the last second

let info = null, decoder = null, reasm = null, combiner = null;
const newPlayout = () => new Playout(params.get('policy') || DEFAULT_POLICY,
  Number(params.get('tolerance_ms') || 0) * 1000);
let playout = newPlayout();
let queue = []; // decoded frames waiting for their display time, in display order
let timer = 0;
let nextFrame = -1; // next frame to account
const windowEnds = []; // {last, at_ms} of windows not yet fully accounted
const droppedWindows = new Set();
// Windows whose playout delay sample waits for their last frame to decode.
const delayPending = [];
let lastShown = null;
const recentVideo = []; // latencies (ms) of the last frames shown, for lip sync
let recentVideoAtMs = -Infinity;
const flashes = []; // {frame_index, capture_us} of decoded frames with the tick flash

const audio = new PageAudio(params.get('audio') !== '0', document.getElementById('sound'));
let token = initialToken(params);
const controls = new Controls({
  onToken: (t) => {
    token = t;
    connectNow();
  },
  onRetry: () => connectNow(),
});

function makeCombiner(kind, target) {
  if (kind === 'auto') kind = webglIsSoftware() ? 'cpu' : 'webgl2';
  return kind === 'cpu' ? new CpuCombiner(target) : new Combiner(target);
}

try {
  combiner = makeCombiner(params.get('renderer') || 'auto', canvas);
} catch (e) {
  fail(`renderer: ${e.message}`);
}

// For good: nothing the viewer can try again would help.
function fail(message) {
  stats.state = 'failed';
  stats.error = message;
  controls.show(message, 'fatal');
  console.error('ppstream:', message);
}

// Bounded: only recent windows can still have frames to account.
function markDropped(id) {
  if (droppedWindows.size >= 4096) droppedWindows.delete(droppedWindows.values().next().value);
  droppedWindows.add(id);
}

function reasonOf(frame) {
  const w = info.window_frames;
  const win = frame === 0 ? 0 : Math.floor((frame - 1) / w) + 1;
  return droppedWindows.has(win) ? 'dropped' : 'lost';
}

// Frames nextFrame .. upTo that never came out of the decoder.
function accountMissing(upTo) {
  if (nextFrame < 0) return;
  for (; nextFrame <= upTo; nextFrame++) {
    stats.frames_total++;
    stats.reasons[reasonOf(nextFrame)]++;
  }
}

function delaySamples(frame, nowUsec) {
  while (delayPending.length && delayPending[0].last <= frame) {
    const w = delayPending.shift();
    playout.window((w.last === frame ? nowUsec : w.arrival) - w.capture);
  }
}

function onDecodedFrame(rec) {
  delaySamples(rec.frame_index, nowUs());
  if (nextFrame < 0 || rec.frame_index < nextFrame) return; // before the stream, or given up
  accountMissing(rec.frame_index - 1);
  nextFrame = rec.frame_index + 1;
  stats.frames_total++;
  if (rec.layers === 0) {
    stats.reasons.undecodable++;
    if (rec.undecodable) stats.base_losses++;
    return;
  }
  stats.frames_decoded++;
  if (flashIn(rec.planes[0], info.width, info.height)) {
    if (flashes.length >= FLASHES_KEPT) flashes.shift();
    flashes.push({ frame_index: rec.frame_index, capture_us: rec.capture_us });
  }
  const now = nowUs();
  const capture = toClient(rec.capture_us);
  const win = rec.frame_index === 0 ? 0 : Math.floor((rec.frame_index - 1) / info.window_frames) + 1;
  const due = playout.place(win, capture, now, queue);
  if (due === null) {
    stats.reasons.late++;
    return;
  }
  rec.due_us = due;
  rec.capture_client_us = capture;
  queue.push(rec); // place() keeps display times in capture order
  if (queue.length > MAX_QUEUE_FRAMES) {
    queue.shift();
    stats.reasons.overflow++;
  }
  schedule();
}

function schedule() {
  if (timer) clearTimeout(timer);
  timer = 0;
  if (!queue.length) return;
  timer = setTimeout(showDue, Math.max(0, (playout.dueUs(queue[0]) - nowUs()) / 1000));
}

function showDue() {
  timer = 0;
  const now = nowUs();
  let last = null;
  while (queue.length && playout.dueUs(queue[0]) <= now + 1000) {
    const f = queue.shift();
    playout.markShown(f, now);
    stats.frames_shown++;
    stats.layers_shown[f.layers]++;
    stats.last_frame_index = f.frame_index;
    if (latencies.length >= MAX_LATENCIES) latencies.splice(0, MAX_LATENCIES / 2);
    const latencyMs = (now - f.capture_client_us) / 1000;
    latencies.push(latencyMs);
    if (recentVideo.length >= RECENT_VIDEO) recentVideo.shift();
    recentVideo.push(latencyMs);
    recentVideoAtMs = performance.now();
    audio.videoShown(latencyMs, now);
    if (stats.last_display_us) {
      const gap = (now - stats.last_display_us) / 1000;
      if (gap > FREEZE_MS) {
        stats.freezes++;
        stats.frozen_ms += gap;
        if (freezeLog.length < 64) freezeLog.push({ frame: f.frame_index, gap_ms: gap, at_ms: performance.now() });
      }
      stats.freeze_longest_ms = Math.max(stats.freeze_longest_ms, gap);
    }
    stats.last_display_us = now;
    shownLog.push(performance.now());
    last = f;
  }
  if (last) lastShown = last;
  if (last && combiner && params.get('render') !== '0') combiner.draw(last);
  schedule();
}

function percentile(values, p) {
  if (!values.length) return null;
  const v = Float64Array.from(values).sort();
  return v[Math.max(1, Math.ceil(p / 100 * v.length)) - 1];
}

// The picture's recent latency (us) for lip sync; 0 without a recent
// picture, and over the first RECENT_VIDEO frames: the first window's wait
// and the decoders' warm-up put the first pictures 200-300 ms late, and the
// audio would follow that up and take seconds to come back (measured).
function recentVideoLatencyUs() {
  if (recentVideo.length < RECENT_VIDEO || performance.now() - recentVideoAtMs > RECENT_VIDEO_MAX_AGE_MS)
    return 0;
  return percentile(recentVideo, RECENT_VIDEO_PERCENTILE) * 1000;
}

function onWindowEnd(w) {
  const nowMs = performance.now();
  if (nextFrame < 0) {
    // Dropped windows before the first that brings something were in flight
    // when the viewer joined: not its stream yet (as pps-client counts them).
    if (w.dropped) return;
    nextFrame = firstFrameOf(w.window_id, info.window_frames);
  }
  stats.windows++;
  if (w.dropped) {
    stats.windows_dropped++;
    markDropped(w.window_id);
  } else if (w.adus_dropped > 0) {
    stats.windows_partial++;
  }
  // The adaptive policy's delay sample: pps-client takes the arrival of the
  // window's last byte, decoding synchronously right then; here decoding is
  // asynchronous (and slower in software), so the sample is taken when the
  // window's last frame comes out of the decoder, arrival if it never does.
  if (delayPending.length >= 256) delayPending.shift();
  if (w.begun && !w.dropped)
    delayPending.push({ last: lastFrameOf(w.window_id, info.window_frames),
      capture: toClient(w.first_capture_us), arrival: w.complete_us });
  if (w.begun) decoder.settle(lastFrameOf(w.window_id, info.window_frames));
  windowEnds.push({ last: lastFrameOf(w.window_id, info.window_frames), at: nowMs });
}

function onRecord(r) {
  const now = nowUs();
  switch (r.kind) {
    case wire.KIND.STREAM_INFO: {
      if (info) throw new wire.WireError('second STREAM_INFO');
      if (r.codec !== 1 || r.upscale_filter !== 1)
        throw new wire.WireError(`codec ${r.codec} / filter ${r.upscale_filter} not supported`);
      if (!r.width || !r.height || r.width > 4096 || r.height > 4096 || !r.fps_num || !r.fps_den)
        throw new wire.WireError('STREAM_INFO sizes out of range');
      info = r;
      // A decoder's late outputs after its connection ended go nowhere.
      const d = new LayeredDecoder(info, {
        onFrame: (rec) => { if (decoder === d) onDecodedFrame(rec); },
        onError: (m) => console.warn(m),
        onLayerLost: (layer, frame) => { if (decoder === d) requestRecovery(layer, frame); },
      });
      decoder = d;
      reasm = new Reassembly(info.window_frames, (adu) => decoder.push(adu), onWindowEnd);
      combiner?.setOutputSize(info.width, info.height);
      playout.setStream(info.latency_budget_ms * 1000,
        info.window_frames * info.fps_den / info.fps_num * 1e6);
      streaming();
      if (r.audio_codec) {
        audio.start(r, { url: streamUrl(), name: `${params.get('name') || 'browser'}-audio`, token },
          params.get('lip_sync') !== '0', appliedOffsetUs(), onPong);
      }
      return;
    }
    case wire.KIND.AUDIO_FRAME:
      if (!info || !info.audio_codec) throw new wire.WireError('AUDIO_FRAME without an audio track');
      audio.frame(r, now);
      return;
    case wire.KIND.WINDOW_BEGIN:
    case wire.KIND.ADU_FRAGMENT:
    case wire.KIND.WINDOW_END: {
      if (!info) throw new wire.WireError('window record before STREAM_INFO');
      if (r.kind !== wire.KIND.ADU_FRAGMENT) {
        // Window ids the sender skipped were discarded with their WINDOW_END.
        for (let id = reasm.lastWindow + 1; nextFrame >= 0 && id < r.window_id; id++) {
          markDropped(id);
          stats.windows++;
          stats.windows_dropped++;
        }
      }
      reasm.record(r, now);
      return;
    }
    case wire.KIND.CLOCK_PONG:
      onPong(r, now);
      return;
    case wire.KIND.BYE:
      stats.bye = { reason: wire.BYE_REASON[r.reason] || 'unknown', text: r.text };
      return;
    case wire.KIND.CHALLENGE: {
      if (info || !token || challenged) throw new wire.WireError('unexpected CHALLENGE');
      challenged = true;
      wire.encodeAuth(token, r.nonce).then((auth) => sendRecord?.(auth),
        (e) => fail(`cannot answer the challenge: ${e.message}`));
      return;
    }
    default:
      throw new wire.WireError(`unexpected ${r.kind}`);
  }
}

// A PONG, from either connection: the offset from the best round trip.
function onPong(r, now) {
  const rtt = now - r.client_send_us - (r.server_send_us - r.server_recv_us);
  if (rtt < 0 || rtt > 60e6) return;
  clock.lastRttUs = rtt;
  if (!clock.have || rtt < clock.bestRttUs) {
    clock.bestRttUs = Math.max(rtt, 1);
    clock.offsetUs = (r.server_recv_us + r.server_send_us) / 2 - (r.client_send_us + now) / 2;
    clock.have = true;
    playout.setRtt(clock.bestRttUs);
  }
}

// Recovery: a layer's reference chain broke here (not at the sender, which
// asks for an IDR by itself when it drops base data): ask for an IDR, at most
// once a second from this side (the server rate-limits as well).
let sendRecord = null;
let startPings = null;
let challenged = false;
let lastRecoveryMs = -Infinity;
function requestRecovery(layer, frame) {
  const nowMs = performance.now();
  if (!sendRecord || nowMs - lastRecoveryMs < RECOVERY_INTERVAL_MS) return;
  lastRecoveryMs = nowMs;
  stats.recovery_requests++;
  sendRecord(wire.encodeRecoveryRequest(frame, layer));
}

// ---- the connection and its retries ------------------------------------------------

const backoff = new Backoff();
// The current connection: its WebSocket (null between connections), when it
// began and began streaming (performance.now() ms, 0: not yet), its last
// message; the next try's timer, when it is due and why it is needed.
const link = { ws: null, stopPings: null, startedMs: 0, streamingMs: 0, lastDataMs: 0,
  retryTimer: 0, retryAtMs: 0, why: '' };
let withAudio = false;

// On a relay the stream is named (?stream=room/alice): its WebSocket is
// /stream/room/alice, which the relay routes to that stream.
const streamName = params.get('stream') || '';
if (streamName) document.title = `${streamName} · ppstream`;

function streamUrl() {
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  const path = streamName.split('/').map(encodeURIComponent).join('/');
  return `${scheme}://${location.host}/stream${streamName ? `/${path}` : ''}`;
}

function unixMs(perfMs) { return performance.timeOrigin + perfMs; }

function connect() {
  clearTimeout(link.retryTimer);
  link.retryTimer = 0;
  resetStream();
  stats.state = 'connecting';
  stats.bye = null;
  stats.retry_at_unix_ms = null;
  stats.connects++;
  controls.show(link.why ? `${link.why}\nreconnecting…` : 'connecting…');
  const ws = new WebSocket(streamUrl());
  const parser = new wire.RecordParser(wire.DEFAULT_MAX_RECORD_BYTES);
  let seq = 0, pingTimer = 0, opened = false;
  link.ws = ws;
  link.startedMs = link.lastDataMs = performance.now();
  link.streamingMs = 0;
  link.stopPings = () => clearInterval(pingTimer);
  ws.binaryType = 'arraybuffer';
  sendRecord = (bytes) => { if (link.ws === ws && ws.readyState === 1) ws.send(bytes); };
  ws.onopen = () => {
    opened = true;
    ws.send(wire.encodeHello(params.get('name') || 'browser', token,
      wire.DEFAULT_MAX_RECORD_BYTES, withAudio ? wire.HELLO_AUDIO : 0));
  };
  // Pings once admitted (STREAM_INFO): with a token, nothing but AUTH may
  // follow HELLO before that (wire/PROTOCOL.md, "Order").
  startPings = () => {
    const ping = () => { if (ws.readyState === 1) ws.send(wire.encodeClockPing(seq++, nowUs())); };
    ping();
    pingTimer = setInterval(ping, PING_INTERVAL_MS);
  };
  ws.onmessage = (ev) => {
    if (link.ws !== ws) return;
    const bytes = new Uint8Array(ev.data);
    link.lastDataMs = performance.now();
    stats.bytes += bytes.byteLength;
    bytesLog.push([performance.now(), bytes.byteLength]);
    try {
      parser.feed(bytes, onRecord);
    } catch (e) {
      if (!(e instanceof wire.WireError)) throw e;
      ws.send(wire.encodeBye(2, e.message));
      ended(`protocol error: ${e.message}`);
    }
  };
  ws.onclose = (ev) => {
    clearInterval(pingTimer);
    if (link.ws !== ws) return;
    const bye = stats.bye;
    if (bye) ended(byeMessage(bye));
    else if (!opened && streamName) {
      ended(`no stream named ${streamName} at ${location.host} (not published yet, or the relay is down)`);
    } else if (!opened) ended(`cannot reach the server at ${location.host}`);
    else ended(`the connection to ${location.host} was lost (WebSocket close ${ev.code})`);
  };
}

function byeMessage(bye) {
  const text = bye.text ? `: ${bye.text}` : '';
  switch (bye.reason) {
    case 'normal': return `the server ended the stream${text}`;
    case 'server-full': return `the server is full${text}`;
    case 'too-slow': return `the server dropped this viewer as too slow${text}`;
    default: return `the server said ${bye.reason}${text}`;
  }
}

// STREAM_INFO: admitted.
function streaming() {
  const now = performance.now();
  if (stats.streaming_at_unix_ms !== null) stats.reconnects++;
  stats.state = 'streaming';
  stats.error = null;
  stats.streaming_at_unix_ms = unixMs(now);
  link.streamingMs = now;
  controls.hide();
  overlay.hidden = !showOverlay;
  startPings?.();
}

// The connection ended (why: for the user): the token field after
// "unauthorized", else the next try after the backoff's delay.
function ended(why) {
  const ws = link.ws;
  const bye = stats.bye;
  link.ws = null;
  link.stopPings?.();
  sendRecord = null;
  startPings = null;
  if (ws && ws.readyState <= 1) ws.close();
  backoff.ended(link.streamingMs ? performance.now() - link.streamingMs : 0,
    bye?.reason === 'normal');
  resetStream();
  overlay.hidden = true;
  if (stats.state === 'failed') return;
  stats.error = why;
  console.warn('ppstream:', why);
  if (bye && bye.reason === 'unauthorized') {
    // The same token would be refused again: ask for another.
    stats.state = 'token';
    link.why = '';
    controls.show(token
      ? `the server refused this access token${bye.text ? ` (${bye.text})` : ''}: enter the right one`
      : 'this server needs an access token (its [server] access_token): enter it', 'token');
    return;
  }
  const delayMs = backoff.next();
  stats.state = 'reconnecting';
  link.why = why;
  link.retryAtMs = performance.now() + delayMs;
  stats.retry_at_unix_ms = unixMs(link.retryAtMs);
  link.retryTimer = setTimeout(connect, delayMs);
  showRetry();
}

function showRetry() {
  const s = Math.max(0, Math.ceil((link.retryAtMs - performance.now()) / 1000));
  controls.show(`${link.why}\nreconnecting in ${s} s`, 'retry');
}

// Not waiting for the timer: the user asked, typed a token (the field
// shows only between connections), or the page came back to the screen or
// online.
function connectNow() {
  if (stats.state === 'failed' || link.ws) return;
  connect();
}

addEventListener('online', () => { if (stats.state === 'reconnecting') connectNow(); });
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && stats.state === 'reconnecting') connectNow();
});
addEventListener('pagehide', () => {
  if (link.ws?.readyState === 1) link.ws.send(wire.encodeBye(0, 'page closed'));
});

// Timeouts the socket does not notice: no answer to the HELLO, or silence
// while streaming.
function checkTimeouts(nowMs) {
  if (!link.ws) return;
  if (stats.state === 'connecting' && nowMs - link.startedMs > HANDSHAKE_TIMEOUT_MS)
    ended(`the server at ${location.host} did not answer within ${HANDSHAKE_TIMEOUT_MS / 1000} s`);
  else if (stats.state === 'streaming' && nowMs - link.lastDataMs > SILENCE_TIMEOUT_MS)
    ended(`nothing from the server for ${SILENCE_TIMEOUT_MS / 1000} s`);
}

// A stream's state goes with its connection; the counts stay (the
// decoders' added up).
const pastDecoders = {};
function resetStream() {
  if (decoder) {
    for (const [k, v] of Object.entries(decoder.stats)) pastDecoders[k] = (pastDecoders[k] ?? 0) + v;
    decoder.close();
  }
  decoder = null;
  reasm = null;
  info = null;
  if (timer) clearTimeout(timer);
  timer = 0;
  queue = [];
  nextFrame = -1;
  windowEnds.length = 0;
  droppedWindows.clear();
  delayPending.length = 0;
  recentVideo.length = 0;
  recentVideoAtMs = -Infinity;
  lastShown = null;
  challenged = false;
  Object.assign(clock, { bestRttUs: 0, offsetUs: 0, have: false, lastRttUs: 0 });
  playout = newPlayout();
  audio.stop();
}

function trim(log, nowMs) {
  while (log.length && (Array.isArray(log[0]) ? log[0][0] : log[0]) < nowMs - 1000) log.shift();
}

function snapshot() {
  const nowMs = performance.now();
  trim(bytesLog, nowMs);
  trim(shownLog, nowMs);
  const d = { ...pastDecoders };
  for (const [k, v] of Object.entries(decoder?.stats ?? {})) d[k] = (d[k] ?? 0) + v;
  return {
    state: stats.state, error: stats.error, bye: stats.bye,
    connects: stats.connects, reconnects: stats.reconnects,
    streaming_at_unix_ms: stats.streaming_at_unix_ms,
    retry_in_ms: stats.state === 'reconnecting'
      ? Math.max(0, link.retryAtMs - performance.now()) : null,
    width: info?.width ?? 0, height: info?.height ?? 0,
    quality_layers: info?.quality_layers ?? 0,
    policy: playout.policy, playout_delay_ms: playout.currentDelayUs() / 1000,
    playout_mode: playout.mode(),
    frames_total: stats.frames_total, frames_shown: stats.frames_shown,
    frames_decoded: stats.frames_decoded,
    frames_shown_pct: stats.frames_total ? 100 * stats.frames_shown / stats.frames_total : null,
    frames_late: stats.reasons.late, frames_undecodable: stats.reasons.undecodable,
    frames_dropped: stats.reasons.dropped, frames_lost: stats.reasons.lost,
    frames_overflow: stats.reasons.overflow, frames_queued: queue.length,
    layers_shown: stats.layers_shown.slice(1, 1 + (info?.quality_layers ?? 0)),
    renderer: combiner?.kind ?? null,
    frame_latency_p50_ms: percentile(latencies, 50),
    frame_latency_p95_ms: percentile(latencies, 95),
    frame_latency_last_ms: latencies.length ? latencies[latencies.length - 1] : null,
    fps: shownLog.length,
    bits_per_second: 8 * bytesLog.reduce((a, b) => a + b[1], 0),
    bytes: stats.bytes,
    windows: stats.windows, windows_dropped: stats.windows_dropped,
    windows_partial: stats.windows_partial,
    freezes: stats.freezes, frozen_ms: stats.frozen_ms,
    freeze_longest_ms: stats.freeze_longest_ms,
    base_losses: stats.base_losses, recovery_requests: stats.recovery_requests,
    layers_lost: d.layers_lost ?? 0,
    adus_decoded: d.adus_decoded ?? 0, adus_undecodable: d.adus_undecodable ?? 0,
    decode_errors: d.decode_errors ?? 0, layers_cut: d.layers_cut ?? 0,
    decode_ms_mean: d.decode_ms_n ? d.decode_ms_sum / d.decode_ms_n : null,
    clock_offset_ms: clock.offsetUs / 1000, rtt_ms: clock.bestRttUs / 1000,
    last_frame_index: stats.last_frame_index,
    first_freezes: freezeLog,
    audio: audio.summary(),
  };
}

// For tests: the audio's statistics (ppsAudio), and with the per-slot
// records (seq, how, capture_us and ear_us on the server's clock, heard),
// the tick onsets found in the decoded audio (capture_us, ear_us) and the
// frames with the flash (ppsAudioFull, a Promise).
window.ppsAudio = () => ({ ...audio.figures(), clock_offset_ms: clock.offsetUs / 1000 });
window.ppsAudioFull = async () => ({ ...(await audio.figures(true)),
  clock_offset_ms: clock.offsetUs / 1000, flashes: flashes.slice() });

// Periodic: frames of windows long ended that never came out, the held-frame
// check of the decoder, and the overlay.
setInterval(() => {
  const nowMs = performance.now();
  decoder?.poll();
  audio.tick(recentVideoLatencyUs(), appliedOffsetUs());
  while (windowEnds.length && windowEnds[0].at < nowMs - ACCOUNT_AFTER_MS) {
    const last = windowEnds.shift().last;
    delaySamples(last - 1, 0);
    accountMissing(last);
  }
  checkTimeouts(nowMs);
  if (stats.state === 'reconnecting') showRetry();
  if (overlay.hidden || !info) return;
  const s = snapshot();
  const f = (x, n = 0) => (x === null || x === undefined ? '-' : x.toFixed(n));
  overlay.textContent =
    `latency ${f(s.frame_latency_last_ms)} ms (p50 ${f(s.frame_latency_p50_ms)}, ` +
    `p95 ${f(s.frame_latency_p95_ms)})  ${s.policy} ${f(s.playout_delay_ms)} ms\n` +
    `layers ${lastShown ? lastShown.layers : 0}/${s.quality_layers}  ` +
    `${s.width}x${s.height}  ${s.fps} fps  ${f(s.bits_per_second / 1e6, 2)} Mbit/s\n` +
    `shown ${s.frames_shown}/${s.frames_total} (${f(s.frames_shown_pct, 1)}%)  ` +
    `frozen ${f(s.frozen_ms / 1000, 1)} s  late ${s.frames_late}  dropped ${s.frames_dropped}` +
    `${s.reconnects ? `  reconnected ${s.reconnects}x` : ''}\n` +
    audio.line();
}, 250);

// For tests and dashboards: the statistics as plain JSON.
window.ppsStats = snapshot;

// For tests: the luma of the frame on screen with every layer and with the
// base alone (base64, rows top first), read back from the combine.
// With check = true, also the same from the other renderer (its own canvas):
// the WebGL2 and JavaScript combines must agree bit for bit.
window.ppsGrab = (check = false) => {
  if (!lastShown || !combiner) return null;
  const b64 = (a) => {
    let s = '';
    for (let i = 0; i < a.length; i += 0x8000) s += String.fromCharCode(...a.subarray(i, i + 0x8000));
    return btoa(s);
  };
  const full = combiner.readLuma(lastShown, lastShown.layers);
  const base = combiner.readLuma(lastShown, 1);
  combiner.draw(lastShown);
  const out = { frame_index: lastShown.frame_index, layers: lastShown.layers,
    width: info.width, height: info.height, renderer: combiner.kind,
    luma: b64(full), luma_base: b64(base) };
  if (check) {
    const other = makeCombiner(combiner.kind === 'cpu' ? 'webgl2' : 'cpu',
      document.createElement('canvas'));
    other.setOutputSize(info.width, info.height);
    out.check_renderer = other.kind;
    out.check_luma = b64(other.readLuma(lastShown, lastShown.layers));
    out.check_luma_base = b64(other.readLuma(lastShown, 1));
  }
  return out;
};

if (!('VideoDecoder' in window)) {
  fail(window.isSecureContext
    ? 'this browser has no WebCodecs VideoDecoder, which the viewer needs: open the page in ' +
      'a recent Chromium, Chrome or Edge'
    : 'WebCodecs needs a secure context: open the page over https (or on localhost)');
} else if (stats.state !== 'failed') {
  // Audio is asked for only if this browser decodes it.
  audio.init().catch(() => false).then((audioWanted) => {
    withAudio = audioWanted;
    connect();
  });
}

// For benchmarks: milliseconds per combine of the frame on screen (gl.finish).
window.ppsBenchDraw = (n = 20) => {
  if (!lastShown || !combiner) return null;
  if (combiner.kind === 'cpu') {
    const t = performance.now();
    for (let i = 0; i < n; i++) combiner.draw(lastShown);
    return { draw_ms: (performance.now() - t) / n };
  }
  const gl = combiner.gl;
  const px = new Uint8Array(4);
  const sync = () => gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, px);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    combiner.current = null;
    combiner.draw(lastShown);
    sync();
  }
  const t1 = performance.now();
  for (let i = 0; i < n; i++) {
    combiner.draw(lastShown);
    sync();
  }
  return { upload_and_draw_ms: (t1 - t0) / n, draw_ms: (performance.now() - t1) / n };
};
