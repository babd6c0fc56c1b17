// SPDX-License-Identifier: MIT
// The ppstream wire format (wire/PROTOCOL.md) in the browser: an incremental,
// bounds-checked record parser and the encoders of the client's records.
// Every record is checked against its kind's exact size, as wire/pps-wire.c
// does; after an error the parser stays failed (the connection must go).

export const VERSION = 1;
export const HEADER_BYTES = 4;
export const DEFAULT_MAX_RECORD_BYTES = 16384;
export const MAX_DEPS = 4;

export const KIND = {
  HELLO: 1,
  STREAM_INFO: 2,
  WINDOW_BEGIN: 3,
  ADU_FRAGMENT: 4,
  WINDOW_END: 5,
  CLOCK_PING: 6,
  CLOCK_PONG: 7,
  BYE: 8,
  CHALLENGE: 9,
  AUTH: 10,
  RECOVERY_REQUEST: 11,
  AUDIO_FRAME: 12,
};
const LAST_KIND = KIND.AUDIO_FRAME;

export const HELLO_CHALLENGE = 0x0001; // HELLO flag: prove the token by challenge-response
export const HELLO_AUDIO = 0x0002; // HELLO flag: play the audio track if the stream has one
export const HELLO_AUDIO_ONLY = 0x0004; // HELLO flag: this connection carries the audio only
export const AUDIO_CODEC_OPUS = 1;
export const AUDIO_IN_STREAM = 0; // STREAM_INFO audio_transport: on the video's connection
export const AUDIO_OWN_CONNECTION = 1; // on a connection of its own
export const AUDIO_SPEECH = 0x01; // AUDIO_FRAME flag: voice activity
export const MAX_AUDIO_BYTES = 1275; // the largest Opus packet (RFC 6716)
const STREAM_INFO_BYTES = 28;
const AUDIO_TRACK_BYTES = 8;
const AUDIO_FIXED_BYTES = 15;
const OPUS_RATES_HZ = [8000, 12000, 16000, 24000, 48000];
export const AUTH_HMAC_SHA256 = 1;
const NONCE_BYTES = 32;

export const BYE_REASON = ['normal', 'server-full', 'protocol-error', 'unsupported-version',
  'internal-error', 'unauthorized', 'too-slow'];

export class WireError extends Error {}

function i64(view, at) {
  // Microseconds since 1970 stay far below 2^53: exact as a Number.
  return Number(view.getBigInt64(at));
}

function need(cond, what) {
  if (!cond) throw new WireError(what);
}

// Decodes the body of one record; throws WireError for a malformed one.
export function decodeBody(kind, body) {
  const v = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const n = body.byteLength;
  const exact = (size, name) => {
    need(n >= size, `${name}: short`);
    need(n === size, `${name}: trailing garbage`);
  };
  switch (kind) {
    case KIND.STREAM_INFO: {
      // 28 bytes, or 36 with the audio track's tail (to a client that asked).
      need(n >= STREAM_INFO_BYTES, 'STREAM_INFO: short');
      need(n === STREAM_INFO_BYTES || n === STREAM_INFO_BYTES + AUDIO_TRACK_BYTES,
        'STREAM_INFO: trailing garbage');
      const r = {
        kind, protocol_version: v.getUint16(0), codec: v.getUint8(2),
        upscale_filter: v.getUint8(3), width: v.getUint16(4), height: v.getUint16(6),
        base_width: v.getUint16(8), base_height: v.getUint16(10), fps_num: v.getUint16(12),
        fps_den: v.getUint16(14), window_frames: v.getUint8(16),
        temporal_layers: v.getUint8(17), quality_layers: v.getUint8(18),
        priority_policy: v.getUint8(19), latency_budget_ms: v.getUint32(20),
        gop_frames: v.getUint32(24),
        audio_codec: 0, audio_channels: 0, audio_transport: 0, audio_frame_us: 0,
        audio_rate_hz: 0,
      };
      need(r.window_frames >= 1 && r.window_frames <= 64, 'STREAM_INFO: window_frames');
      need(r.temporal_layers >= 1 && r.temporal_layers <= 4, 'STREAM_INFO: temporal_layers');
      need(r.quality_layers >= 1 && r.quality_layers <= 4, 'STREAM_INFO: quality_layers');
      if (n > STREAM_INFO_BYTES) {
        r.audio_codec = v.getUint8(28);
        r.audio_channels = v.getUint8(29);
        r.audio_transport = v.getUint8(30);
        r.audio_frame_us = v.getUint16(32);
        r.audio_rate_hz = v.getUint16(34);
        need(r.audio_codec === AUDIO_CODEC_OPUS, `STREAM_INFO: audio codec ${r.audio_codec}`);
        need(r.audio_channels >= 1 && r.audio_channels <= 2, 'STREAM_INFO: audio channels');
        need(r.audio_transport <= AUDIO_OWN_CONNECTION, 'STREAM_INFO: audio transport');
        need(r.audio_frame_us >= 2500 && r.audio_frame_us <= 60000, 'STREAM_INFO: audio frame');
        need(OPUS_RATES_HZ.includes(r.audio_rate_hz), 'STREAM_INFO: audio rate');
      }
      return r;
    }
    case KIND.WINDOW_BEGIN:
      exact(32, 'WINDOW_BEGIN');
      return {
        kind, window_id: v.getUint32(0), first_capture_us: i64(v, 4),
        deadline_us: i64(v, 12), frames: v.getUint16(20), adus: v.getUint16(22),
        bytes: v.getUint32(24), first_adu_id: v.getUint32(28),
      };
    case KIND.ADU_FRAGMENT: {
      need(n >= 30, 'ADU_FRAGMENT: short');
      const r = {
        kind, window_id: v.getUint32(0), adu_id: v.getUint32(4),
        frame_index: v.getUint32(8), capture_us: i64(v, 12), decode_order: v.getUint32(20),
      };
      return fragmentFields(v, body, r);
    }
    case KIND.WINDOW_END: {
      exact(17, 'WINDOW_END');
      const r = {
        kind, window_id: v.getUint32(0), adus_sent: v.getUint16(4),
        adus_dropped: v.getUint16(6), bytes_sent: v.getUint32(8),
        bytes_dropped: v.getUint32(12), flags: v.getUint8(16),
      };
      // 1 dropped, 2 rested (with 1: a copy at rest; the viewer opens no copies).
      need((r.flags & ~3) === 0, 'WINDOW_END: flags');
      need(!(r.flags & 2) || (r.flags & 1), 'WINDOW_END: rested but not dropped');
      need(!(r.flags & 1) || r.adus_sent === 0, 'WINDOW_END: dropped window with ADUs sent');
      return r;
    }
    case KIND.CLOCK_PONG:
      exact(28, 'CLOCK_PONG');
      return {
        kind, seq: v.getUint32(0), client_send_us: i64(v, 4), server_recv_us: i64(v, 12),
        server_send_us: i64(v, 20),
      };
    case KIND.AUDIO_FRAME: {
      need(n >= AUDIO_FIXED_BYTES + 1, 'AUDIO_FRAME: short');
      const r = {
        kind, seq: v.getUint32(0), capture_us: i64(v, 4), duration_us: v.getUint16(12),
        flags: v.getUint8(14), payload: body.subarray(AUDIO_FIXED_BYTES),
      };
      need(r.payload.byteLength <= MAX_AUDIO_BYTES, 'AUDIO_FRAME: payload over 1275 bytes');
      need(r.duration_us >= 2500 && r.duration_us <= 60000, 'AUDIO_FRAME: duration');
      need((r.flags & ~AUDIO_SPEECH) === 0, 'AUDIO_FRAME: flags');
      return r;
    }
    case KIND.CHALLENGE:
      exact(1 + NONCE_BYTES, 'CHALLENGE');
      need(v.getUint8(0) === AUTH_HMAC_SHA256, `CHALLENGE: method ${v.getUint8(0)} unknown`);
      return { kind, method: v.getUint8(0), nonce: body.slice(1) };
    case KIND.BYE: {
      need(n >= 3, 'BYE: short');
      const len = v.getUint8(2);
      exact(3 + len, 'BYE');
      return {
        kind, reason: v.getUint16(0),
        text: new TextDecoder().decode(body.subarray(3, 3 + len)),
      };
    }
    default:
      throw new WireError(`${kind} is not a server record`);
  }
}

// ADU_FRAGMENT's fields after the fixed 20 bytes (see PROTOCOL.md).
// u8 frame_type (24), temporal (25), quality (26), dep_count (27), u16 priority
// (28), u32 deps[dep_count], u32 offset, u32 total_bytes, payload.
function fragmentFields(v, body, r) {
  r.frame_type = v.getUint8(24);
  r.temporal_layer = v.getUint8(25);
  r.quality_layer = v.getUint8(26);
  r.dep_count = v.getUint8(27);
  need(r.dep_count <= MAX_DEPS, 'ADU_FRAGMENT: dep_count');
  const fixed = 30 + 4 * r.dep_count + 8;
  need(body.byteLength > fixed, 'ADU_FRAGMENT: short (payload of at least 1 byte)');
  r.priority = v.getUint16(28);
  r.deps = [];
  for (let i = 0; i < r.dep_count; i++) r.deps.push(v.getUint32(30 + 4 * i));
  const at = 30 + 4 * r.dep_count;
  r.offset = v.getUint32(at);
  r.total_bytes = v.getUint32(at + 4);
  r.payload = body.subarray(at + 8);
  need(r.frame_type <= 4, 'ADU_FRAGMENT: frame_type');
  need(r.temporal_layer <= 3, 'ADU_FRAGMENT: temporal_layer');
  need(r.quality_layer <= 3, 'ADU_FRAGMENT: quality_layer');
  need(r.offset + r.payload.byteLength <= r.total_bytes, 'ADU_FRAGMENT: beyond total_bytes');
  return r;
}

// Accumulates bytes (WebSocket messages: each holds whole records, but the
// parser does not depend on it) and yields records. Holds at most one record.
export class RecordParser {
  constructor(maxRecordBytes = DEFAULT_MAX_RECORD_BYTES) {
    this.max = maxRecordBytes;
    this.buf = new Uint8Array(maxRecordBytes);
    this.len = 0;
    this.error = null;
  }

  // Calls onRecord(record) for each whole record in `bytes` (a Uint8Array).
  feed(bytes, onRecord) {
    if (this.error) throw this.error;
    let at = 0;
    try {
      while (at < bytes.byteLength) {
        const want = this.len < HEADER_BYTES ? HEADER_BYTES
          : HEADER_BYTES + (this.buf[2] << 8 | this.buf[3]);
        const take = Math.min(want - this.len, bytes.byteLength - at);
        this.buf.set(bytes.subarray(at, at + take), this.len);
        this.len += take;
        at += take;
        if (this.len === HEADER_BYTES) {
          need(this.buf[0] === VERSION, `record version ${this.buf[0]}`);
          need(this.buf[1] >= 1 && this.buf[1] <= LAST_KIND,
            `record kind ${this.buf[1]}`);
          const total = HEADER_BYTES + (this.buf[2] << 8 | this.buf[3]);
          need(total <= this.max, `record of ${total} bytes over the limit ${this.max}`);
        }
        if (this.len >= HEADER_BYTES &&
            this.len === HEADER_BYTES + (this.buf[2] << 8 | this.buf[3])) {
          const kind = this.buf[1];
          const body = this.buf.slice(HEADER_BYTES, this.len);
          this.len = 0;
          onRecord(decodeBody(kind, body));
        }
      }
    } catch (e) {
      if (e instanceof WireError) this.error = e;
      throw e;
    }
  }
}

function record(kind, body) {
  const out = new Uint8Array(HEADER_BYTES + body.byteLength);
  out[0] = VERSION;
  out[1] = kind;
  out[2] = body.byteLength >> 8;
  out[3] = body.byteLength & 255;
  out.set(body, HEADER_BYTES);
  return out;
}

// With a token, HELLO asks for a challenge (the token itself never goes out:
// encodeAuth answers the CHALLENGE with its MAC). `flags`: HELLO_AUDIO,
// HELLO_AUDIO_ONLY (the challenge flag follows from the token).
export function encodeHello(name, token, maxRecordBytes, flags = 0) {
  const enc = new TextEncoder();
  const n = enc.encode(name).subarray(0, 64);
  const t = new Uint8Array(0);
  const body = new Uint8Array(8 + n.byteLength + t.byteLength);
  const v = new DataView(body.buffer);
  v.setUint16(0, VERSION);
  v.setUint16(2, (token ? HELLO_CHALLENGE : 0) | flags);
  v.setUint16(4, maxRecordBytes === DEFAULT_MAX_RECORD_BYTES ? 0 : maxRecordBytes);
  v.setUint8(6, n.byteLength);
  body.set(n, 7);
  v.setUint8(7 + n.byteLength, t.byteLength);
  body.set(t, 8 + n.byteLength);
  return record(KIND.HELLO, body);
}

export function encodeClockPing(seq, clientSendUs) {
  const body = new Uint8Array(12);
  const v = new DataView(body.buffer);
  v.setUint32(0, seq >>> 0);
  v.setBigInt64(4, BigInt(Math.round(clientSendUs)));
  return record(KIND.CLOCK_PING, body);
}

// The client lost layer `layer` from frame `frameIndex` on (its decoder
// failed): the server answers with an IDR, rate-limited per client.
export function encodeRecoveryRequest(frameIndex, layer) {
  const body = new Uint8Array(5);
  const v = new DataView(body.buffer);
  v.setUint32(0, Math.max(frameIndex, 0) >>> 0);
  v.setUint8(4, layer);
  return record(KIND.RECOVERY_REQUEST, body);
}

// AUTH: HMAC-SHA256(key = token, "ppstream-auth-v1" || nonce) (PROTOCOL.md,
// "Access control"); WebCrypto, so a secure context, as WebCodecs needs anyway.
export async function encodeAuth(token, nonce) {
  const enc = new TextEncoder();
  const key = await crypto.subtle.importKey('raw', enc.encode(token),
    { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const label = enc.encode('ppstream-auth-v1');
  const message = new Uint8Array(label.byteLength + nonce.byteLength);
  message.set(label, 0);
  message.set(nonce, label.byteLength);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, message));
  const body = new Uint8Array(1 + mac.byteLength);
  body[0] = AUTH_HMAC_SHA256;
  body.set(mac, 1);
  return record(KIND.AUTH, body);
}

export function encodeBye(reason, text) {
  const t = new TextEncoder().encode(text).subarray(0, 200);
  const body = new Uint8Array(3 + t.byteLength);
  new DataView(body.buffer).setUint16(0, reason);
  body[2] = t.byteLength;
  body.set(t, 3);
  return record(KIND.BYE, body);
}
