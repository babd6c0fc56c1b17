/* SPDX-License-Identifier: MIT */
#include "pps-wire.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- byte order helpers ------------------------------------------------ */

typedef struct {
	uint8_t *p;
	uint8_t *end;
	bool overflow;
} writer_t;

static void
put_bytes(writer_t *w, const void *src, size_t n)
{
	if (w->overflow || (size_t)(w->end - w->p) < n) {
		w->overflow = true;
		return;
	}
	if (n)
		memcpy(w->p, src, n);
	w->p += n;
}

static void
put_u8(writer_t *w, uint8_t v)
{
	put_bytes(w, &v, 1);
}

static void
put_u16(writer_t *w, uint16_t v)
{
	uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};

	put_bytes(w, b, 2);
}

static void
put_u32(writer_t *w, uint32_t v)
{
	uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};

	put_bytes(w, b, 4);
}

static void
put_i64(writer_t *w, int64_t v)
{
	uint64_t u = (uint64_t)v;

	put_u32(w, (uint32_t)(u >> 32));
	put_u32(w, (uint32_t)u);
}

typedef struct {
	const uint8_t *p;
	const uint8_t *end;
	bool short_read;
} reader_t;

static bool
get_bytes(reader_t *r, void *dst, size_t n)
{
	if (r->short_read || (size_t)(r->end - r->p) < n) {
		r->short_read = true;
		return false;
	}
	if (n)
		memcpy(dst, r->p, n);
	r->p += n;
	return true;
}

static uint8_t
get_u8(reader_t *r)
{
	uint8_t v = 0;

	get_bytes(r, &v, 1);
	return v;
}

static uint16_t
get_u16(reader_t *r)
{
	uint8_t b[2] = {0, 0};

	get_bytes(r, b, 2);
	return (uint16_t)(b[0] << 8 | b[1]);
}

static uint32_t
get_u32(reader_t *r)
{
	uint8_t b[4] = {0, 0, 0, 0};

	get_bytes(r, b, 4);
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static int64_t
get_i64(reader_t *r)
{
	uint64_t hi = get_u32(r);
	uint64_t lo = get_u32(r);

	return (int64_t)(hi << 32 | lo);
}

/* ---- names ------------------------------------------------------------- */

const char *
pps_wire_kind_name(unsigned kind)
{
	switch (kind) {
	case PPS_WIRE_HELLO:
		return "HELLO";
	case PPS_WIRE_STREAM_INFO:
		return "STREAM_INFO";
	case PPS_WIRE_WINDOW_BEGIN:
		return "WINDOW_BEGIN";
	case PPS_WIRE_ADU_FRAGMENT:
		return "ADU_FRAGMENT";
	case PPS_WIRE_WINDOW_END:
		return "WINDOW_END";
	case PPS_WIRE_CLOCK_PING:
		return "CLOCK_PING";
	case PPS_WIRE_CLOCK_PONG:
		return "CLOCK_PONG";
	case PPS_WIRE_BYE:
		return "BYE";
	case PPS_WIRE_CHALLENGE:
		return "CHALLENGE";
	case PPS_WIRE_AUTH:
		return "AUTH";
	case PPS_WIRE_RECOVERY_REQUEST:
		return "RECOVERY_REQUEST";
	case PPS_WIRE_AUDIO_FRAME:
		return "AUDIO_FRAME";
	case PPS_WIRE_PATH_REPORT:
		return "PATH_REPORT";
	}
	return "unknown";
}

const char *
pps_wire_bye_reason_name(unsigned reason)
{
	switch (reason) {
	case PPS_WIRE_BYE_NORMAL:
		return "normal";
	case PPS_WIRE_BYE_SERVER_FULL:
		return "server-full";
	case PPS_WIRE_BYE_PROTOCOL:
		return "protocol-error";
	case PPS_WIRE_BYE_VERSION:
		return "unsupported-version";
	case PPS_WIRE_BYE_INTERNAL:
		return "internal-error";
	case PPS_WIRE_BYE_UNAUTHORIZED:
		return "unauthorized";
	case PPS_WIRE_BYE_TOO_SLOW:
		return "too-slow";
	case PPS_WIRE_BYE_NO_STREAM:
		return "no-stream";
	case PPS_WIRE_BYE_STREAM_TAKEN:
		return "stream-taken";
	}
	return "unknown";
}

/* ---- encoding ---------------------------------------------------------- */

#define STREAM_INFO_BYTES      28
#define WINDOW_BEGIN_BYTES     32
#define FRAGMENT_FIXED_BYTES   38 /* without deps and payload */
#define WINDOW_END_BYTES       17
#define CLOCK_PING_BYTES       12
#define CLOCK_PONG_BYTES       28
#define BYE_FIXED_BYTES        3
#define HELLO_FIXED_BYTES      8
#define CHALLENGE_BYTES        (1 + PPS_WIRE_NONCE_BYTES)
#define AUTH_BYTES             (1 + PPS_WIRE_MAC_BYTES)
#define RECOVERY_REQUEST_BYTES 5
#define AUDIO_TRACK_BYTES      8 /* STREAM_INFO's audio tail */
#define AUDIO_FIXED_BYTES      15
#define PATH_REPORT_BYTES      29

size_t
pps_wire_fragment_overhead(unsigned dep_count)
{
	return PPS_WIRE_HEADER_BYTES + FRAGMENT_FIXED_BYTES + 4u * dep_count;
}

/* The body length of @r (header excluded) in *bytes; -EINVAL for a kind or a
 * length field out of range (*bytes untouched). */
static int
body_size(const pps_wire_record_t *r, size_t *bytes)
{
	switch (r->kind) {
	case PPS_WIRE_HELLO:
		if (r->u.hello.name_len > PPS_WIRE_MAX_NAME_BYTES ||
		    r->u.hello.auth_len > PPS_WIRE_MAX_AUTH_BYTES)
			return -EINVAL;
		/* The stream name travels only with its flag, and never empty. */
		if ((r->u.hello.flags & PPS_WIRE_HELLO_STREAM)
		        ? r->u.hello.stream_len == 0 ||
		              r->u.hello.stream_len > PPS_WIRE_MAX_STREAM_BYTES
		        : r->u.hello.stream_len != 0)
			return -EINVAL;
		/* A pool number travels only with its flag, and is never 0. */
		if ((r->u.hello.flags & PPS_WIRE_HELLO_AUDIO_POOL) ? r->u.hello.audio_pool == 0
		                                                   : r->u.hello.audio_pool != 0)
			return -EINVAL;
		*bytes = HELLO_FIXED_BYTES + (size_t)r->u.hello.name_len + r->u.hello.auth_len;
		if (r->u.hello.flags & PPS_WIRE_HELLO_STREAM)
			*bytes += 1 + (size_t)r->u.hello.stream_len;
		if (r->u.hello.flags & PPS_WIRE_HELLO_AUDIO_POOL)
			*bytes += 4;
		return 0;
	case PPS_WIRE_STREAM_INFO:
		*bytes = STREAM_INFO_BYTES + (r->u.stream_info.audio_codec ? AUDIO_TRACK_BYTES : 0);
		return 0;
	case PPS_WIRE_WINDOW_BEGIN:
		*bytes = WINDOW_BEGIN_BYTES;
		return 0;
	case PPS_WIRE_ADU_FRAGMENT:
		if (r->u.adu_fragment.dep_count > PPS_WIRE_MAX_DEPS)
			return -EINVAL;
		*bytes = FRAGMENT_FIXED_BYTES + 4u * (size_t)r->u.adu_fragment.dep_count +
		         r->u.adu_fragment.payload_len;
		return 0;
	case PPS_WIRE_WINDOW_END:
		*bytes = WINDOW_END_BYTES;
		return 0;
	case PPS_WIRE_CLOCK_PING:
		*bytes = CLOCK_PING_BYTES;
		return 0;
	case PPS_WIRE_CLOCK_PONG:
		*bytes = CLOCK_PONG_BYTES;
		return 0;
	case PPS_WIRE_BYE:
		if (r->u.bye.text_len > PPS_WIRE_MAX_REASON_BYTES)
			return -EINVAL;
		*bytes = BYE_FIXED_BYTES + (size_t)r->u.bye.text_len;
		return 0;
	case PPS_WIRE_CHALLENGE:
		*bytes = CHALLENGE_BYTES;
		return 0;
	case PPS_WIRE_AUTH:
		*bytes = AUTH_BYTES;
		return 0;
	case PPS_WIRE_RECOVERY_REQUEST:
		*bytes = RECOVERY_REQUEST_BYTES;
		return 0;
	case PPS_WIRE_PATH_REPORT:
		*bytes = PATH_REPORT_BYTES;
		return 0;
	case PPS_WIRE_AUDIO_FRAME:
		if (r->u.audio_frame.payload_len < 1 ||
		    r->u.audio_frame.payload_len > PPS_WIRE_MAX_AUDIO_BYTES)
			return -EINVAL;
		*bytes = AUDIO_FIXED_BYTES + (size_t)r->u.audio_frame.payload_len;
		return 0;
	}
	return -EINVAL;
}

int
pps_wire_record_size(const pps_wire_record_t *record, size_t *size)
{
	size_t body;
	int ret = body_size(record, &body);

	if (ret < 0)
		return ret;
	if (body > 65535)
		return -EINVAL;
	*size = PPS_WIRE_HEADER_BYTES + body;
	return 0;
}

int
pps_wire_encode(const pps_wire_record_t *r, uint8_t *buf, size_t capacity, size_t *written)
{
	writer_t w = {.p = buf, .end = buf + capacity};
	size_t size;
	int ret = pps_wire_record_size(r, &size);

	if (ret < 0)
		return ret;
	if (size > capacity)
		return -ENOSPC;
	put_u8(&w, PPS_WIRE_VERSION);
	put_u8(&w, (uint8_t)r->kind);
	put_u16(&w, (uint16_t)(size - PPS_WIRE_HEADER_BYTES));
	switch (r->kind) {
	case PPS_WIRE_HELLO: {
		const pps_wire_hello_t *h = &r->u.hello;

		put_u16(&w, h->protocol_version);
		put_u16(&w, h->flags);
		put_u16(&w, h->max_record_bytes);
		put_u8(&w, h->name_len);
		put_bytes(&w, h->name, h->name_len);
		put_u8(&w, h->auth_len);
		put_bytes(&w, h->auth, h->auth_len);
		if (h->flags & PPS_WIRE_HELLO_STREAM) {
			put_u8(&w, h->stream_len);
			put_bytes(&w, h->stream, h->stream_len);
		}
		if (h->flags & PPS_WIRE_HELLO_AUDIO_POOL)
			put_u32(&w, h->audio_pool);
		break;
	}
	case PPS_WIRE_STREAM_INFO: {
		const pps_wire_stream_info_t *s = &r->u.stream_info;

		put_u16(&w, s->protocol_version);
		put_u8(&w, s->codec);
		put_u8(&w, s->upscale_filter);
		put_u16(&w, s->width);
		put_u16(&w, s->height);
		put_u16(&w, s->base_width);
		put_u16(&w, s->base_height);
		put_u16(&w, s->fps_num);
		put_u16(&w, s->fps_den);
		put_u8(&w, s->window_frames);
		put_u8(&w, s->temporal_layers);
		put_u8(&w, s->quality_layers);
		put_u8(&w, s->priority_policy);
		put_u32(&w, s->latency_budget_ms);
		put_u32(&w, s->gop_frames);
		if (s->audio_codec) {
			put_u8(&w, s->audio_codec);
			put_u8(&w, s->audio_channels);
			put_u8(&w, s->audio_transport);
			put_u8(&w, s->audio_copies);
			put_u16(&w, s->audio_frame_us);
			put_u16(&w, s->audio_rate_hz);
		}
		break;
	}
	case PPS_WIRE_WINDOW_BEGIN: {
		const pps_wire_window_begin_t *b = &r->u.window_begin;

		put_u32(&w, b->window_id);
		put_i64(&w, b->first_capture_us);
		put_i64(&w, b->deadline_us);
		put_u16(&w, b->frames);
		put_u16(&w, b->adus);
		put_u32(&w, b->bytes);
		put_u32(&w, b->first_adu_id);
		break;
	}
	case PPS_WIRE_ADU_FRAGMENT: {
		const pps_wire_adu_fragment_t *f = &r->u.adu_fragment;

		put_u32(&w, f->window_id);
		put_u32(&w, f->adu_id);
		put_u32(&w, f->frame_index);
		put_i64(&w, f->capture_us);
		put_u32(&w, f->decode_order);
		put_u8(&w, f->frame_type);
		put_u8(&w, f->temporal_layer);
		put_u8(&w, f->quality_layer);
		put_u8(&w, f->dep_count);
		put_u16(&w, f->priority);
		for (unsigned i = 0; i < f->dep_count; i++)
			put_u32(&w, f->deps[i]);
		put_u32(&w, f->offset);
		put_u32(&w, f->total_bytes);
		put_bytes(&w, f->payload, f->payload_len);
		break;
	}
	case PPS_WIRE_WINDOW_END: {
		const pps_wire_window_end_t *e = &r->u.window_end;

		put_u32(&w, e->window_id);
		put_u16(&w, e->adus_sent);
		put_u16(&w, e->adus_dropped);
		put_u32(&w, e->bytes_sent);
		put_u32(&w, e->bytes_dropped);
		put_u8(&w, e->flags);
		break;
	}
	case PPS_WIRE_CLOCK_PING:
		put_u32(&w, r->u.clock_ping.seq);
		put_i64(&w, r->u.clock_ping.client_send_us);
		break;
	case PPS_WIRE_CLOCK_PONG:
		put_u32(&w, r->u.clock_pong.seq);
		put_i64(&w, r->u.clock_pong.client_send_us);
		put_i64(&w, r->u.clock_pong.server_recv_us);
		put_i64(&w, r->u.clock_pong.server_send_us);
		break;
	case PPS_WIRE_BYE:
		put_u16(&w, r->u.bye.reason);
		put_u8(&w, r->u.bye.text_len);
		put_bytes(&w, r->u.bye.text, r->u.bye.text_len);
		break;
	case PPS_WIRE_CHALLENGE:
		put_u8(&w, r->u.challenge.method);
		put_bytes(&w, r->u.challenge.nonce, PPS_WIRE_NONCE_BYTES);
		break;
	case PPS_WIRE_AUTH:
		put_u8(&w, r->u.auth.method);
		put_bytes(&w, r->u.auth.mac, PPS_WIRE_MAC_BYTES);
		break;
	case PPS_WIRE_RECOVERY_REQUEST:
		put_u32(&w, r->u.recovery_request.frame_index);
		put_u8(&w, r->u.recovery_request.quality_layer);
		break;
	case PPS_WIRE_PATH_REPORT: {
		const pps_wire_path_report_t *q = &r->u.path_report;

		put_u32(&w, q->subscribers);
		put_i64(&w, (int64_t)q->slowest_bps);
		put_u32(&w, q->slowest_min_rtt_us);
		put_i64(&w, (int64_t)q->fastest_bps);
		put_u32(&w, q->fastest_min_rtt_us);
		put_u8(&w, q->flags);
		break;
	}
	case PPS_WIRE_AUDIO_FRAME: {
		const pps_wire_audio_frame_t *a = &r->u.audio_frame;

		put_u32(&w, a->seq);
		put_i64(&w, a->capture_us);
		put_u16(&w, a->duration_us);
		put_u8(&w, a->flags);
		put_bytes(&w, a->payload, a->payload_len);
		break;
	}
	}
	if (w.overflow)
		return -ENOSPC;
	*written = size;
	return 0;
}

/* ---- parsing ----------------------------------------------------------- */

struct pps_wire_parser {
	size_t max_record_bytes;
	size_t have;            /* bytes of the current record in buf */
	size_t need;            /* header + body length once the header is in, else header */
	bool returned;          /* the record in buf was handed out by the last call */
	pps_wire_error_t error; /* PPS_WIRE_OK until it fails */
	pps_wire_sender_t sender;
	char message[192];
	uint8_t buf[]; /* max_record_bytes */
};

bool
pps_wire_kind_sent_by(unsigned kind, pps_wire_sender_t sender)
{
	bool client = kind == PPS_WIRE_HELLO || kind == PPS_WIRE_CLOCK_PING ||
	              kind == PPS_WIRE_AUTH || kind == PPS_WIRE_RECOVERY_REQUEST ||
	              kind == PPS_WIRE_PATH_REPORT;

	if (kind == PPS_WIRE_BYE || sender == PPS_WIRE_FROM_ANY)
		return true;
	return sender == PPS_WIRE_FROM_CLIENT ? client : !client;
}

void
pps_wire_parser_set_sender(pps_wire_parser_t *p, pps_wire_sender_t sender)
{
	p->sender = sender;
}

pps_wire_parser_t *
pps_wire_parser_new(size_t max_record_bytes)
{
	pps_wire_parser_t *p;

	if (max_record_bytes <= PPS_WIRE_HEADER_BYTES ||
	    max_record_bytes > PPS_WIRE_MAX_RECORD_BYTES) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p) + max_record_bytes);
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->max_record_bytes = max_record_bytes;
	p->need = PPS_WIRE_HEADER_BYTES;
	return p;
}

void
pps_wire_parser_free(pps_wire_parser_t *parser)
{
	free(parser);
}

pps_wire_error_t
pps_wire_parser_error_code(const pps_wire_parser_t *parser)
{
	return parser->error;
}

const char *
pps_wire_parser_error(const pps_wire_parser_t *parser)
{
	return parser->message;
}

size_t
pps_wire_parser_pending(const pps_wire_parser_t *parser)
{
	return parser->returned ? 0 : parser->have;
}

/* The errno a failure returns: the detail stays in the parser. */
static int
error_errno(pps_wire_error_t error)
{
	return error == PPS_WIRE_ERR_TOO_LONG ? -EMSGSIZE : -EPROTO;
}

static int
fail(pps_wire_parser_t *p, pps_wire_error_t error, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->message, sizeof(p->message), fmt, ap);
	va_end(ap);
	p->error = error;
	return error_errno(error);
}

/* Checks the body was read exactly: not short, nothing left over. */
static int
check_length(pps_wire_parser_t *p, const reader_t *r, const char *kind)
{
	if (r->short_read)
		return fail(p, PPS_WIRE_ERR_SHORT, "%s: body shorter than its fields", kind);
	if (r->p != r->end)
		return fail(p, PPS_WIRE_ERR_TRAILING, "%s: %zu bytes of trailing garbage", kind,
		            (size_t)(r->end - r->p));
	return 0;
}

static int
decode_body(pps_wire_parser_t *p, unsigned kind, reader_t *r, pps_wire_record_t *out)
{
	const char *name = pps_wire_kind_name(kind);

	memset(out, 0, sizeof(*out));
	out->kind = (pps_wire_kind_t)kind;
	switch (kind) {
	case PPS_WIRE_HELLO: {
		pps_wire_hello_t *h = &out->u.hello;

		h->protocol_version = get_u16(r);
		h->flags = get_u16(r);
		h->max_record_bytes = get_u16(r);
		h->name_len = get_u8(r);
		if (!r->short_read && h->max_record_bytes &&
		    h->max_record_bytes < PPS_WIRE_MIN_MAX_RECORD_BYTES)
			return fail(p, PPS_WIRE_ERR_FIELD, "HELLO: max_record_bytes %u below %d",
			            h->max_record_bytes, PPS_WIRE_MIN_MAX_RECORD_BYTES);
		if (h->name_len > PPS_WIRE_MAX_NAME_BYTES)
			return fail(p, PPS_WIRE_ERR_FIELD, "HELLO: name_len %u over %d",
			            h->name_len, PPS_WIRE_MAX_NAME_BYTES);
		if (!get_bytes(r, h->name, h->name_len))
			return check_length(p, r, name);
		if (memchr(h->name, '\0', h->name_len))
			return fail(p, PPS_WIRE_ERR_FIELD, "HELLO: name holds a NUL byte");
		h->name[h->name_len] = '\0';
		h->auth_len = get_u8(r);
		if (h->auth_len > PPS_WIRE_MAX_AUTH_BYTES)
			return fail(p, PPS_WIRE_ERR_FIELD, "HELLO: auth_len %u over %d",
			            h->auth_len, PPS_WIRE_MAX_AUTH_BYTES);
		if (!get_bytes(r, h->auth, h->auth_len))
			return check_length(p, r, name);
		if (h->flags & PPS_WIRE_HELLO_STREAM) {
			h->stream_len = get_u8(r);
			if (!r->short_read &&
			    (h->stream_len == 0 || h->stream_len > PPS_WIRE_MAX_STREAM_BYTES))
				return fail(p, PPS_WIRE_ERR_FIELD,
				            "HELLO: stream_len %u not in 1..%d", h->stream_len,
				            PPS_WIRE_MAX_STREAM_BYTES);
			if (!get_bytes(r, h->stream, h->stream_len))
				return check_length(p, r, name);
			if (memchr(h->stream, '\0', h->stream_len))
				return fail(p, PPS_WIRE_ERR_FIELD,
				            "HELLO: stream holds a NUL byte");
			h->stream[h->stream_len] = '\0';
		}
		if (h->flags & PPS_WIRE_HELLO_AUDIO_POOL) {
			h->audio_pool = get_u32(r);
			if (!r->short_read && h->audio_pool == 0)
				return fail(p, PPS_WIRE_ERR_FIELD, "HELLO: audio_pool 0");
		}
		return check_length(p, r, name);
	}
	case PPS_WIRE_STREAM_INFO: {
		pps_wire_stream_info_t *s = &out->u.stream_info;
		int ret;

		s->protocol_version = get_u16(r);
		s->codec = get_u8(r);
		s->upscale_filter = get_u8(r);
		s->width = get_u16(r);
		s->height = get_u16(r);
		s->base_width = get_u16(r);
		s->base_height = get_u16(r);
		s->fps_num = get_u16(r);
		s->fps_den = get_u16(r);
		s->window_frames = get_u8(r);
		s->temporal_layers = get_u8(r);
		s->quality_layers = get_u8(r);
		s->priority_policy = get_u8(r);
		s->latency_budget_ms = get_u32(r);
		s->gop_frames = get_u32(r);
		/* The audio tail, when the record has one (only a client that
		 * asked for audio is sent it). */
		if (!r->short_read && r->end - r->p == AUDIO_TRACK_BYTES) {
			s->audio_codec = get_u8(r);
			s->audio_channels = get_u8(r);
			s->audio_transport = get_u8(r);
			s->audio_copies = get_u8(r);
			s->audio_frame_us = get_u16(r);
			s->audio_rate_hz = get_u16(r);
			if (s->audio_codec != PPS_WIRE_AUDIO_CODEC_OPUS)
				return fail(p, PPS_WIRE_ERR_FIELD,
				            "STREAM_INFO: audio codec %u unknown", s->audio_codec);
			if (s->audio_channels < 1 || s->audio_channels > 2)
				return fail(p, PPS_WIRE_ERR_FIELD,
				            "STREAM_INFO: audio channels %u not 1..2",
				            s->audio_channels);
			if (s->audio_transport > PPS_WIRE_AUDIO_OWN_CONNECTION)
				return fail(p, PPS_WIRE_ERR_FIELD,
				            "STREAM_INFO: audio transport %u not 0..1",
				            s->audio_transport);
			if (s->audio_copies > PPS_WIRE_MAX_AUDIO_COPIES)
				return fail(p, PPS_WIRE_ERR_FIELD,
				            "STREAM_INFO: audio copies %u over %d", s->audio_copies,
				            PPS_WIRE_MAX_AUDIO_COPIES);
			if (s->audio_frame_us < 2500 || s->audio_frame_us > 60000)
				return fail(p, PPS_WIRE_ERR_FIELD,
				            "STREAM_INFO: audio frame %u us not 2500..60000",
				            s->audio_frame_us);
			if (s->audio_rate_hz != 8000 && s->audio_rate_hz != 12000 &&
			    s->audio_rate_hz != 16000 && s->audio_rate_hz != 24000 &&
			    s->audio_rate_hz != 48000)
				return fail(p, PPS_WIRE_ERR_FIELD,
				            "STREAM_INFO: audio rate %u Hz not an Opus rate",
				            s->audio_rate_hz);
		}
		ret = check_length(p, r, name);
		if (ret < 0)
			return ret;
		if (s->protocol_version != PPS_WIRE_VERSION)
			return fail(p, PPS_WIRE_ERR_VERSION,
			            "STREAM_INFO: protocol_version %u, expected %d",
			            s->protocol_version, PPS_WIRE_VERSION);
		if (!s->width || !s->height || !s->base_width || !s->base_height)
			return fail(p, PPS_WIRE_ERR_FIELD, "STREAM_INFO: zero picture size");
		if (!s->fps_num || !s->fps_den)
			return fail(p, PPS_WIRE_ERR_FIELD, "STREAM_INFO: frame rate %u/%u",
			            s->fps_num, s->fps_den);
		if (s->window_frames < 1 || s->window_frames > PPS_WIRE_MAX_WINDOW_FRAMES)
			return fail(p, PPS_WIRE_ERR_FIELD,
			            "STREAM_INFO: window_frames %u not 1..%d", s->window_frames,
			            PPS_WIRE_MAX_WINDOW_FRAMES);
		if (s->temporal_layers < 1 || s->temporal_layers > PPS_WIRE_MAX_TEMPORAL_LAYERS ||
		    s->quality_layers < 1 || s->quality_layers > PPS_WIRE_MAX_QUALITY_LAYERS)
			return fail(p, PPS_WIRE_ERR_FIELD,
			            "STREAM_INFO: layers %ux%u not 1..%dx1..%d", s->temporal_layers,
			            s->quality_layers, PPS_WIRE_MAX_TEMPORAL_LAYERS,
			            PPS_WIRE_MAX_QUALITY_LAYERS);
		return 0;
	}
	case PPS_WIRE_WINDOW_BEGIN: {
		pps_wire_window_begin_t *b = &out->u.window_begin;

		b->window_id = get_u32(r);
		b->first_capture_us = get_i64(r);
		b->deadline_us = get_i64(r);
		b->frames = get_u16(r);
		b->adus = get_u16(r);
		b->bytes = get_u32(r);
		b->first_adu_id = get_u32(r);
		return check_length(p, r, name);
	}
	case PPS_WIRE_ADU_FRAGMENT: {
		pps_wire_adu_fragment_t *f = &out->u.adu_fragment;

		f->window_id = get_u32(r);
		f->adu_id = get_u32(r);
		f->frame_index = get_u32(r);
		f->capture_us = get_i64(r);
		f->decode_order = get_u32(r);
		f->frame_type = get_u8(r);
		f->temporal_layer = get_u8(r);
		f->quality_layer = get_u8(r);
		f->dep_count = get_u8(r);
		f->priority = get_u16(r);
		if (r->short_read)
			return check_length(p, r, name);
		if (f->frame_type > PPS_WIRE_MAX_FRAME_TYPE)
			return fail(p, PPS_WIRE_ERR_FIELD, "ADU_FRAGMENT: frame_type %u not 0..%d",
			            f->frame_type, PPS_WIRE_MAX_FRAME_TYPE);
		if (f->temporal_layer >= PPS_WIRE_MAX_TEMPORAL_LAYERS ||
		    f->quality_layer >= PPS_WIRE_MAX_QUALITY_LAYERS)
			return fail(p, PPS_WIRE_ERR_FIELD, "ADU_FRAGMENT: layer t%u q%u not 0..%d",
			            f->temporal_layer, f->quality_layer,
			            PPS_WIRE_MAX_TEMPORAL_LAYERS - 1);
		if (f->dep_count > PPS_WIRE_MAX_DEPS)
			return fail(p, PPS_WIRE_ERR_FIELD, "ADU_FRAGMENT: dep_count %u over %d",
			            f->dep_count, PPS_WIRE_MAX_DEPS);
		for (unsigned i = 0; i < f->dep_count; i++)
			f->deps[i] = get_u32(r);
		f->offset = get_u32(r);
		f->total_bytes = get_u32(r);
		if (r->short_read)
			return check_length(p, r, name);
		f->payload_len = (uint16_t)(r->end - r->p);
		f->payload = r->p;
		r->p = r->end;
		if (f->payload_len == 0)
			return fail(p, PPS_WIRE_ERR_FIELD, "ADU_FRAGMENT: empty payload");
		if ((uint64_t)f->offset + f->payload_len > f->total_bytes)
			return fail(p, PPS_WIRE_ERR_FIELD,
			            "ADU_FRAGMENT: offset %u + length %u exceeds total_bytes %u",
			            f->offset, f->payload_len, f->total_bytes);
		return 0;
	}
	case PPS_WIRE_WINDOW_END: {
		pps_wire_window_end_t *e = &out->u.window_end;
		int ret;

		e->window_id = get_u32(r);
		e->adus_sent = get_u16(r);
		e->adus_dropped = get_u16(r);
		e->bytes_sent = get_u32(r);
		e->bytes_dropped = get_u32(r);
		e->flags = get_u8(r);
		ret = check_length(p, r, name);
		if (ret < 0)
			return ret;
		if (e->flags & ~(PPS_WIRE_WINDOW_END_DROPPED | PPS_WIRE_WINDOW_END_RESTED))
			return fail(p, PPS_WIRE_ERR_FIELD, "WINDOW_END: unknown flags 0x%02x",
			            e->flags);
		if ((e->flags & PPS_WIRE_WINDOW_END_RESTED) &&
		    !(e->flags & PPS_WIRE_WINDOW_END_DROPPED))
			return fail(p, PPS_WIRE_ERR_FIELD,
			            "WINDOW_END: window marked rested but not dropped");
		if ((e->flags & PPS_WIRE_WINDOW_END_DROPPED) && e->adus_sent)
			return fail(p, PPS_WIRE_ERR_FIELD,
			            "WINDOW_END: window marked dropped but adus_sent %u",
			            e->adus_sent);
		return 0;
	}
	case PPS_WIRE_CLOCK_PING:
		out->u.clock_ping.seq = get_u32(r);
		out->u.clock_ping.client_send_us = get_i64(r);
		return check_length(p, r, name);
	case PPS_WIRE_CLOCK_PONG:
		out->u.clock_pong.seq = get_u32(r);
		out->u.clock_pong.client_send_us = get_i64(r);
		out->u.clock_pong.server_recv_us = get_i64(r);
		out->u.clock_pong.server_send_us = get_i64(r);
		return check_length(p, r, name);
	case PPS_WIRE_BYE: {
		pps_wire_bye_t *b = &out->u.bye;

		b->reason = get_u16(r);
		b->text_len = get_u8(r);
		if (b->text_len > PPS_WIRE_MAX_REASON_BYTES)
			return fail(p, PPS_WIRE_ERR_FIELD, "BYE: text_len %u over %d", b->text_len,
			            PPS_WIRE_MAX_REASON_BYTES);
		get_bytes(r, b->text, b->text_len);
		b->text[r->short_read ? 0 : b->text_len] = '\0';
		return check_length(p, r, name);
	}
	case PPS_WIRE_CHALLENGE:
	case PPS_WIRE_AUTH: {
		/* Same layout: a method and 32 bytes (nonce or MAC). */
		uint8_t method = get_u8(r);
		uint8_t *bytes =
		    kind == PPS_WIRE_CHALLENGE ? out->u.challenge.nonce : out->u.auth.mac;
		int ret;

		get_bytes(r, bytes, PPS_WIRE_NONCE_BYTES);
		ret = check_length(p, r, name);
		if (ret < 0)
			return ret;
		if (method != PPS_WIRE_AUTH_HMAC_SHA256)
			return fail(p, PPS_WIRE_ERR_FIELD, "%s: method %u unknown", name, method);
		if (kind == PPS_WIRE_CHALLENGE)
			out->u.challenge.method = method;
		else
			out->u.auth.method = method;
		return 0;
	}
	case PPS_WIRE_RECOVERY_REQUEST: {
		int ret;

		out->u.recovery_request.frame_index = get_u32(r);
		out->u.recovery_request.quality_layer = get_u8(r);
		ret = check_length(p, r, name);
		if (ret < 0)
			return ret;
		if (out->u.recovery_request.quality_layer >= PPS_WIRE_MAX_QUALITY_LAYERS)
			return fail(
			    p, PPS_WIRE_ERR_FIELD, "RECOVERY_REQUEST: quality_layer %u not 0..%d",
			    out->u.recovery_request.quality_layer, PPS_WIRE_MAX_QUALITY_LAYERS - 1);
		return 0;
	}
	case PPS_WIRE_PATH_REPORT: {
		pps_wire_path_report_t *q = &out->u.path_report;
		int64_t slowest, fastest;
		int ret;

		q->subscribers = get_u32(r);
		slowest = get_i64(r);
		q->slowest_min_rtt_us = get_u32(r);
		fastest = get_i64(r);
		q->fastest_min_rtt_us = get_u32(r);
		q->flags = get_u8(r);
		ret = check_length(p, r, name);
		if (ret < 0)
			return ret;
		if (slowest < 0 || fastest < slowest)
			return fail(p, PPS_WIRE_ERR_FIELD,
			            "PATH_REPORT: slowest %lld and fastest %lld bit/s out of order",
			            (long long)slowest, (long long)fastest);
		if (q->subscribers == 0 && fastest != 0)
			return fail(p, PPS_WIRE_ERR_FIELD,
			            "PATH_REPORT: rates without a subscriber");
		if (q->flags & ~PPS_WIRE_PATH_FLAGS)
			return fail(p, PPS_WIRE_ERR_FIELD, "PATH_REPORT: unknown flags 0x%02x",
			            q->flags);
		q->slowest_bps = (uint64_t)slowest;
		q->fastest_bps = (uint64_t)fastest;
		return 0;
	}
	case PPS_WIRE_AUDIO_FRAME: {
		pps_wire_audio_frame_t *a = &out->u.audio_frame;

		a->seq = get_u32(r);
		a->capture_us = get_i64(r);
		a->duration_us = get_u16(r);
		a->flags = get_u8(r);
		if (r->short_read)
			return check_length(p, r, name);
		a->payload_len = (uint16_t)(r->end - r->p);
		a->payload = r->p;
		r->p = r->end;
		if (a->payload_len < 1 || a->payload_len > PPS_WIRE_MAX_AUDIO_BYTES)
			return fail(p, PPS_WIRE_ERR_FIELD,
			            "AUDIO_FRAME: payload of %u bytes not 1..%d", a->payload_len,
			            PPS_WIRE_MAX_AUDIO_BYTES);
		if (a->duration_us < 2500 || a->duration_us > 60000)
			return fail(p, PPS_WIRE_ERR_FIELD,
			            "AUDIO_FRAME: duration %u us not 2500..60000", a->duration_us);
		if (a->flags & ~PPS_WIRE_AUDIO_SPEECH)
			return fail(p, PPS_WIRE_ERR_FIELD, "AUDIO_FRAME: unknown flags 0x%02x",
			            a->flags);
		return 0;
	}
	}
	return fail(p, PPS_WIRE_ERR_KIND, "record kind %u unknown", kind);
}

int
pps_wire_parser_next(pps_wire_parser_t *p, const uint8_t **data, size_t *len,
                     pps_wire_record_t *out)
{
	if (p->error != PPS_WIRE_OK)
		return error_errno(p->error);
	if (p->returned) {
		/* The previous call returned this record; start the next one. */
		p->returned = false;
		p->have = 0;
		p->need = PPS_WIRE_HEADER_BYTES;
	}
	while (*len > 0) {
		size_t take = p->need - p->have;

		if (take > *len)
			take = *len;
		memcpy(p->buf + p->have, *data, take);
		p->have += take;
		*data += take;
		*len -= take;
		if (p->have < p->need)
			break;
		if (p->need == PPS_WIRE_HEADER_BYTES) {
			unsigned version = p->buf[0], kind = p->buf[1];
			size_t body = (size_t)p->buf[2] << 8 | p->buf[3];

			if (version != PPS_WIRE_VERSION)
				return fail(p, PPS_WIRE_ERR_VERSION,
				            "record header: version %u, expected %d", version,
				            PPS_WIRE_VERSION);
			if (kind < PPS_WIRE_HELLO || kind > PPS_WIRE_PATH_REPORT)
				return fail(p, PPS_WIRE_ERR_KIND, "record header: kind %u unknown",
				            kind);
			if (!pps_wire_kind_sent_by(kind, p->sender))
				return fail(p, PPS_WIRE_ERR_KIND, "%s is a %s record",
				            pps_wire_kind_name(kind),
				            p->sender == PPS_WIRE_FROM_CLIENT ? "server"
				                                              : "client");
			if (PPS_WIRE_HEADER_BYTES + body > p->max_record_bytes)
				return fail(p, PPS_WIRE_ERR_TOO_LONG,
				            "%s: length %zu over the maximum %zu",
				            pps_wire_kind_name(kind), body,
				            p->max_record_bytes - PPS_WIRE_HEADER_BYTES);
			p->need = PPS_WIRE_HEADER_BYTES + body;
			if (body > 0)
				continue;
		}
		{
			reader_t r = {.p = p->buf + PPS_WIRE_HEADER_BYTES, .end = p->buf + p->need};
			int ret = decode_body(p, p->buf[1], &r, out);

			if (ret < 0)
				return ret;
			p->returned = true;
			return 0;
		}
	}
	return -EAGAIN;
}
