/* SPDX-License-Identifier: MIT */
/*
 * WebSocket framing and handshake (RFC 6455), pure functions: see
 * pps-websocket.h.
 */
#include "pps-websocket.h"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* RFC 6455 section 1.3. */
#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

static const char *
find_head_end(const char *buf, size_t len)
{
	for (size_t i = 3; i < len; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' &&
		    buf[i - 3] == '\r')
			return buf + i + 1;
	return NULL;
}

/* True if the comma-separated @list holds @token (case-insensitive). */
static bool
has_token(const char *list, size_t len, const char *token)
{
	size_t tlen = strlen(token), i = 0;

	while (i < len) {
		size_t start, end;

		while (i < len && (list[i] == ' ' || list[i] == '\t' || list[i] == ','))
			i++;
		start = i;
		while (i < len && list[i] != ',')
			i++;
		end = i;
		while (end > start && (list[end - 1] == ' ' || list[end - 1] == '\t'))
			end--;
		if (end - start == tlen && strncasecmp(list + start, token, tlen) == 0)
			return true;
	}
	return false;
}

static bool
name_is(const char *name, size_t len, const char *want)
{
	return strlen(want) == len && strncasecmp(name, want, len) == 0;
}

int
pps_ws_request_parse(const char *buf, size_t len, pps_ws_request_t *out)
{
	const char *end =
	    find_head_end(buf, len < PPS_WS_MAX_REQUEST_BYTES ? len : PPS_WS_MAX_REQUEST_BYTES);
	const char *p, *line_end, *sp1, *sp2, *q;

	if (!end)
		return len >= PPS_WS_MAX_REQUEST_BYTES ? -EMSGSIZE : -EAGAIN;
	memset(out, 0, sizeof(*out));
	out->version = -1;
	out->head_bytes = (size_t)(end - buf);
	if (memchr(buf, '\0', out->head_bytes))
		return -EINVAL;

	/* Request line: METHOD SP target SP HTTP/1.x CRLF */
	line_end = memmem(buf, out->head_bytes, "\r\n", 2);
	sp1 = memchr(buf, ' ', (size_t)(line_end - buf));
	if (!sp1 || sp1 == buf || (size_t)(sp1 - buf) >= sizeof(out->method))
		return -EINVAL;
	sp2 = memchr(sp1 + 1, ' ', (size_t)(line_end - sp1 - 1));
	if (!sp2 || sp2 == sp1 + 1 || sp1[1] != '/')
		return -EINVAL;
	if (line_end - sp2 - 1 != 8 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || sp2[8] < '0' ||
	    sp2[8] > '9')
		return -EINVAL;
	memcpy(out->method, buf, (size_t)(sp1 - buf));
	out->minor_version = sp2[8] - '0';
	q = memchr(sp1 + 1, '?', (size_t)(sp2 - sp1 - 1));
	if (!q)
		q = sp2;
	if ((size_t)(q - sp1 - 1) >= sizeof(out->path))
		return -EINVAL;
	memcpy(out->path, sp1 + 1, (size_t)(q - sp1 - 1));
	if (q < sp2 && (size_t)(sp2 - q - 1) < sizeof(out->query))
		memcpy(out->query, q + 1, (size_t)(sp2 - q - 1));

	/* Header fields: name ":" OWS value OWS CRLF; the blank line ends them. */
	for (p = line_end + 2; p < end - 2; p = line_end + 2) {
		const char *colon, *v, *ve;
		size_t vlen;

		line_end = memmem(p, (size_t)(end - p), "\r\n", 2);
		colon = memchr(p, ':', (size_t)(line_end - p));
		if (!colon || colon == p || p[0] == ' ' || p[0] == '\t')
			return -EINVAL;
		for (v = colon + 1; v < line_end && (*v == ' ' || *v == '\t'); v++)
			;
		for (ve = line_end; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
			;
		vlen = (size_t)(ve - v);
		if (name_is(p, (size_t)(colon - p), "upgrade")) {
			out->upgrade_websocket |= has_token(v, vlen, "websocket");
		} else if (name_is(p, (size_t)(colon - p), "connection")) {
			out->connection_upgrade |= has_token(v, vlen, "upgrade");
		} else if (name_is(p, (size_t)(colon - p), "sec-websocket-key")) {
			if (vlen >= sizeof(out->key))
				return -EINVAL;
			memcpy(out->key, v, vlen);
			out->key[vlen] = '\0';
		} else if (name_is(p, (size_t)(colon - p), "authorization")) {
			if (vlen < sizeof(out->authorization)) {
				memcpy(out->authorization, v, vlen);
				out->authorization[vlen] = '\0';
			}
		} else if (name_is(p, (size_t)(colon - p), "sec-websocket-version")) {
			char num[8] = "";

			if (vlen == 0 || vlen >= sizeof(num))
				return -EINVAL;
			memcpy(num, v, vlen);
			out->version = (int)strtol(num, NULL, 10);
		}
	}
	return 0;
}

bool
pps_ws_request_is_upgrade(const pps_ws_request_t *request)
{
	return request->upgrade_websocket;
}

static bool
key_is_valid(const char *key)
{
	/* base64 of 16 bytes: 22 characters of the alphabet and "==". */
	if (strlen(key) != 24 || key[22] != '=' || key[23] != '=')
		return false;
	for (int i = 0; i < 22; i++) {
		char c = key[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '+' || c == '/'))
			return false;
	}
	return true;
}

void
pps_ws_accept_key(const char *key, char accept[PPS_WS_ACCEPT_BYTES])
{
	GChecksum *sha1 = g_checksum_new(G_CHECKSUM_SHA1);
	guint8 digest[20];
	gsize digest_len = sizeof(digest);
	gchar *b64;

	g_checksum_update(sha1, (const guchar *)key, (gssize)strlen(key));
	g_checksum_update(sha1, (const guchar *)WS_GUID, (gssize)strlen(WS_GUID));
	g_checksum_get_digest(sha1, digest, &digest_len);
	g_checksum_free(sha1);
	b64 = g_base64_encode(digest, digest_len);
	snprintf(accept, PPS_WS_ACCEPT_BYTES, "%s", b64);
	g_free(b64);
}

int
pps_ws_handshake(const pps_ws_request_t *request, char accept[PPS_WS_ACCEPT_BYTES],
                 const char **why)
{
	const char *reason = NULL;

	if (strcmp(request->method, "GET") != 0)
		reason = "a WebSocket upgrade must be a GET";
	else if (request->minor_version < 1)
		reason = "a WebSocket upgrade needs HTTP/1.1";
	else if (!request->upgrade_websocket)
		reason = "no Upgrade: websocket";
	else if (!request->connection_upgrade)
		reason = "no Connection: upgrade";
	else if (request->version != 13)
		reason = "Sec-WebSocket-Version must be 13";
	else if (!key_is_valid(request->key))
		reason = "Sec-WebSocket-Key is not the base64 of 16 bytes";
	if (reason) {
		if (why)
			*why = reason;
		return -EINVAL;
	}
	pps_ws_accept_key(request->key, accept);
	return 0;
}

size_t
pps_ws_frame_header(uint8_t opcode, uint64_t payload_bytes, uint8_t out[10])
{
	out[0] = (uint8_t)(0x80 | (opcode & 0x0f));
	if (payload_bytes < 126) {
		out[1] = (uint8_t)payload_bytes;
		return 2;
	}
	if (payload_bytes <= 0xffff) {
		out[1] = 126;
		out[2] = (uint8_t)(payload_bytes >> 8);
		out[3] = (uint8_t)payload_bytes;
		return 4;
	}
	out[1] = 127;
	for (int i = 0; i < 8; i++)
		out[2 + i] = (uint8_t)(payload_bytes >> (56 - 8 * i));
	return 10;
}

size_t
pps_ws_wrap_binary(uint8_t *buf, size_t payload_bytes)
{
	uint8_t header[10];
	size_t n = pps_ws_frame_header(PPS_WS_OP_BINARY, payload_bytes, header);

	/* Payloads of a packet are at most 65535 bytes: n is 2 or 4. */
	if (n < PPS_WS_DATA_HEADER_BYTES)
		memmove(buf + n, buf + PPS_WS_DATA_HEADER_BYTES, payload_bytes);
	memcpy(buf, header, n);
	return n + payload_bytes;
}

/* ---- client frames ---------------------------------------------------- */

struct pps_ws_reader {
	size_t max_message_bytes;
	uint8_t header[14];
	size_t header_len;  /* bytes of the current frame header collected */
	size_t header_need; /* 2 until the length byte says more */
	bool in_payload;
	uint8_t opcode;
	bool fin;
	uint64_t payload_bytes, payload_done;
	uint8_t mask[4];
	bool in_message; /* a fragmented binary message is open */
	uint64_t message_bytes;
	uint8_t control[PPS_WS_MAX_CONTROL_BYTES];
	int failed; /* 0, -ECONNRESET (closed by the peer) or the error */
	uint16_t close_code;
	bool close_received;
	char error[96];
	/* The Pong owed: the latest Ping's payload, one slot. */
	bool pong_owed;
	uint8_t pong_payload[PPS_WS_MAX_CONTROL_BYTES];
	size_t pong_payload_bytes;
	uint64_t pings, pings_superseded;
};

pps_ws_reader_t *
pps_ws_reader_new(size_t max_message_bytes)
{
	pps_ws_reader_t *r;

	if (max_message_bytes < 1) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	r->max_message_bytes = max_message_bytes;
	r->header_need = 2;
	return r;
}

void
pps_ws_reader_free(pps_ws_reader_t *r)
{
	free(r);
}

static int
fail(pps_ws_reader_t *r, int err, uint16_t code, const char *why)
{
	r->failed = err;
	r->close_code = code;
	snprintf(r->error, sizeof(r->error), "%s", why);
	return err;
}

/* The frame header is complete: check it against the RFC and our limits. */
static int
header_done(pps_ws_reader_t *r)
{
	const uint8_t *h = r->header;
	uint8_t len7 = h[1] & 0x7f;
	size_t at = 2;
	bool control;

	r->fin = h[0] & 0x80;
	r->opcode = h[0] & 0x0f;
	control = r->opcode & 0x08;
	if (h[0] & 0x70)
		return fail(r, -EPROTO, PPS_WS_CLOSE_PROTOCOL, "reserved bits set");
	if (!(h[1] & 0x80))
		return fail(r, -EPROTO, PPS_WS_CLOSE_PROTOCOL, "unmasked client frame");
	if (len7 == 126) {
		r->payload_bytes = (uint64_t)h[2] << 8 | h[3];
		at = 4;
	} else if (len7 == 127) {
		r->payload_bytes = 0;
		for (int i = 0; i < 8; i++)
			r->payload_bytes = r->payload_bytes << 8 | h[2 + i];
		at = 10;
	} else {
		r->payload_bytes = len7;
	}
	memcpy(r->mask, h + at, 4);
	r->payload_done = 0;
	switch (r->opcode) {
	case PPS_WS_OP_TEXT:
		return fail(r, -ENOTSUP, PPS_WS_CLOSE_UNSUPPORTED, "text message (binary only)");
	case PPS_WS_OP_BINARY:
		if (r->in_message)
			return fail(r, -EPROTO, PPS_WS_CLOSE_PROTOCOL,
			            "new message inside a fragmented one");
		r->in_message = !r->fin;
		r->message_bytes = 0;
		break;
	case PPS_WS_OP_CONTINUATION:
		if (!r->in_message)
			return fail(r, -EPROTO, PPS_WS_CLOSE_PROTOCOL, "continuation of nothing");
		r->in_message = !r->fin;
		break;
	case PPS_WS_OP_CLOSE:
	case PPS_WS_OP_PING:
	case PPS_WS_OP_PONG:
		break;
	default:
		return fail(r, -EPROTO, PPS_WS_CLOSE_PROTOCOL, "unknown opcode");
	}
	if (control && (!r->fin || r->payload_bytes > PPS_WS_MAX_CONTROL_BYTES))
		return fail(r, -EPROTO, PPS_WS_CLOSE_PROTOCOL,
		            "fragmented or over-long control frame");
	if (!control) {
		if (r->payload_bytes > r->max_message_bytes - r->message_bytes)
			return fail(r, -EMSGSIZE, PPS_WS_CLOSE_TOO_BIG, "message too big");
		r->message_bytes += r->payload_bytes;
	}
	r->in_payload = true;
	return 0;
}

/*
 * True if @code may be sent in a close frame (RFC 6455 section 7.4): the
 * codes the RFC and its IANA registry assign below 3000 that are not reserved
 * for reporting only (1004, 1005, 1006 and 1015 must never be sent), and the
 * ranges for libraries (3000-3999) and applications (4000-4999).
 */
static bool
close_code_may_be_sent(uint16_t code)
{
	return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
	       (code >= 3000 && code <= 4999);
}

/* RFC 3629 UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF. */
static bool
utf8_valid(const uint8_t *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint8_t c = s[i];
		uint32_t cp, min;
		size_t more;

		if (c < 0x80) {
			i++;
			continue;
		}
		/* The lead byte says how many continuation bytes follow and the
		 * smallest code point that needs them. */
		if ((c & 0xe0) == 0xc0) {
			more = 1;
			cp = c & 0x1f;
			min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			more = 2;
			cp = c & 0x0f;
			min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			more = 3;
			cp = c & 0x07;
			min = 0x10000;
		} else {
			return false;
		}
		if (len - i - 1 < more)
			return false;
		for (size_t k = 1; k <= more; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += 1 + more;
	}
	return true;
}

/* A close frame's payload is complete: -ECONNRESET for a valid one, else
 * the error to fail the connection with (RFC 6455 sections 5.5.1, 7.1.5). */
static int
close_done(pps_ws_reader_t *r)
{
	char why[64];
	uint16_t code;

	r->close_received = true;
	r->pong_owed = false; /* the peer reads nothing more */
	if (r->payload_bytes == 0) {
		code = 1005; /* no status code present */
	} else if (r->payload_bytes == 1) {
		return fail(r, -EPROTO, PPS_WS_CLOSE_PROTOCOL, "close frame of 1 byte");
	} else {
		code = (uint16_t)(r->control[0] << 8 | r->control[1]);
		if (!close_code_may_be_sent(code)) {
			snprintf(why, sizeof(why), "close code %u is not one to send", code);
			return fail(r, -EPROTO, PPS_WS_CLOSE_PROTOCOL, why);
		}
		if (!utf8_valid(r->control + 2, (size_t)r->payload_bytes - 2))
			return fail(r, -EPROTO, PPS_WS_CLOSE_INVALID_DATA,
			            "close reason is not UTF-8");
	}
	r->close_code = code;
	r->failed = -ECONNRESET;
	snprintf(r->error, sizeof(r->error), "closed by the peer (%u)", r->close_code);
	return -ECONNRESET;
}

/* A control frame's payload is complete. -ECONNRESET if it was a close. */
static int
control_done(pps_ws_reader_t *r)
{
	switch (r->opcode) {
	case PPS_WS_OP_PING:
		/* Only the latest Ping is answered if several come before the
		 * Pong leaves (RFC 6455 section 5.5.3): one slot, whatever the
		 * peer sends. */
		r->pings++;
		r->pings_superseded += r->pong_owed;
		r->pong_owed = true;
		r->pong_payload_bytes = (size_t)r->payload_bytes;
		memcpy(r->pong_payload, r->control, r->pong_payload_bytes);
		return 0;
	case PPS_WS_OP_CLOSE:
		return close_done(r);
	default:
		return 0; /* a Pong: nothing asked */
	}
}

int
pps_ws_reader_feed(pps_ws_reader_t *r, uint8_t *buf, size_t len, size_t *data_bytes)
{
	size_t in = 0, out = 0;
	int ret;

	*data_bytes = 0;
	if (r->failed)
		return r->failed;
	while (in < len) {
		if (!r->in_payload) {
			r->header[r->header_len++] = buf[in++];
			if (r->header_len == 2) {
				uint8_t len7 = r->header[1] & 0x7f;

				r->header_need = 2 +
				                 (len7 == 126   ? 2
				                  : len7 == 127 ? 8
				                                : 0) +
				                 ((r->header[1] & 0x80) ? 4 : 0);
			}
			if (r->header_len < r->header_need)
				continue;
			ret = header_done(r);
			r->header_len = 0;
			r->header_need = 2;
			if (ret < 0)
				return ret;
		} else {
			uint64_t left = r->payload_bytes - r->payload_done;
			size_t n = len - in < left ? len - in : (size_t)left;

			for (size_t i = 0; i < n; i++) {
				uint8_t b = buf[in + i] ^ r->mask[(r->payload_done + i) & 3];

				if (r->opcode & 0x08)
					r->control[r->payload_done + i] = b;
				else
					buf[out++] = b;
			}
			in += n;
			r->payload_done += n;
		}
		if (r->in_payload && r->payload_done == r->payload_bytes) {
			r->in_payload = false;
			if (r->opcode & 0x08) {
				ret = control_done(r);
				if (ret != 0) {
					*data_bytes = out;
					return ret;
				}
			}
		}
	}
	*data_bytes = out;
	return 0;
}

uint16_t
pps_ws_reader_close_code(const pps_ws_reader_t *r)
{
	return r->close_code;
}

const char *
pps_ws_reader_error(const pps_ws_reader_t *r)
{
	return r->error;
}

bool
pps_ws_reader_close_received(const pps_ws_reader_t *r)
{
	return r->close_received;
}

size_t
pps_ws_reader_pong_bytes(const pps_ws_reader_t *r)
{
	return r->pong_owed && !r->failed ? 2 + r->pong_payload_bytes : 0;
}

size_t
pps_ws_reader_pong(pps_ws_reader_t *r, uint8_t *out, size_t room)
{
	size_t n = pps_ws_reader_pong_bytes(r);

	if (n == 0 || n > room)
		return 0;
	pps_ws_frame_header(PPS_WS_OP_PONG, r->pong_payload_bytes, out);
	memcpy(out + 2, r->pong_payload, r->pong_payload_bytes);
	r->pong_owed = false;
	return n;
}

uint64_t
pps_ws_reader_pings(const pps_ws_reader_t *r)
{
	return r->pings;
}

uint64_t
pps_ws_reader_pings_superseded(const pps_ws_reader_t *r)
{
	return r->pings_superseded;
}
