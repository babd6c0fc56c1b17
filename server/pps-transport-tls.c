/* SPDX-License-Identifier: MIT */
/*
 * TLS over the socket's transport (common/pps-tls.h). The handshake runs
 * before anything else is read (the session's handshake timeout covers it);
 * received records are decrypted; what is said now is sealed and sent; and
 * every packet the writer pulls is sealed on its way down as exactly one
 * record: the layer above is offered the unit less the record's 22 bytes, so
 * that the record fills at most one MSS (or the largest record, on paths
 * whose MSS exceeds it) and the writer below counts and pushes the
 * ciphertext as it would the plaintext, never re-sealing a partial write.
 */
#include "pps-socket.h"
#include "pps-tls.h"
#include "pps-transport-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/event.h>

typedef struct {
	pps_transport_t t;
	pps_tls_t *tls;
	struct event *write_event; /* the handshake waits for the socket to take a flight */
	uint8_t *plain;            /* one packet's plaintext before sealing (from start) */
	uint64_t records;          /* packets sealed */
	uint32_t max_record_bytes;
} tls_layer_t;

static const char *
tls_name(const pps_transport_t *t)
{
	return "TLS";
}

static unsigned
tls_caps(const pps_transport_t *t)
{
	/* OpenSSL reads whole records from the socket and keeps what it read
	 * beyond the one asked for. */
	return pps_transport_caps(t->underlying) | PPS_TRANSPORT_CAP_BUFFERED_INPUT;
}

/*
 * A plaintext peer is told so in plaintext: its first bytes are still unread,
 * and a BYE it can parse (or, for a browser at http://, an HTTP answer) is
 * the clearest answer.
 */
static void
refuse_plaintext(tls_layer_t *l)
{
	static const char http[] = "HTTP/1.1 400 Bad Request\r\n"
	                           "Content-Type: text/plain; charset=utf-8\r\n"
	                           "Content-Length: 37\r\n"
	                           "Connection: close\r\n\r\n"
	                           "This server speaks TLS: use https://\n";
	const char *why = "this server requires TLS (client: tls = true)";
	uint8_t first = 0;

	if (recv(l->t.fd, &first, 1, MSG_PEEK | MSG_DONTWAIT) == 1 && first >= 'A' &&
	    first <= 'Z') {
		/* A browser at http:// of a TLS listener: say it in HTTP. */
		why = "plain HTTP on a TLS listener (browsers: https://)";
		if (pps_transport_send_now(l->t.underlying, http, sizeof(http) - 1) < 0)
			why = "plain HTTP on a TLS listener (browsers: https://), unanswered";
	} else {
		pps_wire_record_t bye = {.kind = PPS_WIRE_BYE};

		bye.u.bye.reason = PPS_WIRE_BYE_PROTOCOL;
		bye.u.bye.text_len =
		    (uint8_t)snprintf(bye.u.bye.text, sizeof(bye.u.bye.text), "%s", why);
		pps_transport_send_record(l->t.underlying, &bye);
	}
	/* Told (logged) before the peer sees its end: whoever waits for the
	 * end then finds the reason said. The owner frees the stack later. */
	pps_transport_end(&l->t, PPS_TRANSPORT_END_REFUSED, why);
	shutdown(l->t.fd, SHUT_WR);
}

/* One step of the handshake: 0 once it is done, -EAGAIN, or
 * PPS_TRANSPORT_ENDED when it failed (the owner was told). */
static int
handshake_step(tls_layer_t *l)
{
	char err[256] = "", why[288];
	int ret = pps_tls_handshake(l->tls, err, sizeof(err));

	if (ret == 0)
		return 0;
	if (ret == -EAGAIN) {
		if (pps_tls_want_write(l->tls))
			event_add(l->write_event, NULL);
		return -EAGAIN;
	}
	if (ret == -EPROTONOSUPPORT) {
		refuse_plaintext(l);
		return PPS_TRANSPORT_ENDED;
	}
	snprintf(why, sizeof(why), "TLS handshake failed: %s", err);
	pps_transport_end(&l->t, PPS_TRANSPORT_END_REFUSED, why);
	return PPS_TRANSPORT_ENDED;
}

static void
writable_cb(evutil_socket_t fd, short what, void *user)
{
	tls_layer_t *l = user;

	if (l->t.stopped || handshake_step(l) != 0)
		return;
	/* The handshake is done: a HELLO may already be in. */
	pps_transport_wake_input(&l->t);
}

static ssize_t
tls_read(pps_transport_t *t, uint8_t *buf, size_t size)
{
	tls_layer_t *l = (tls_layer_t *)t;
	ssize_t n;

	if (!pps_tls_handshake_done(l->tls)) {
		int ret = handshake_step(l);

		if (ret < 0)
			return ret;
	}
	n = pps_tls_read(l->tls, buf, size);
	if (n == -EPROTO) {
		pps_transport_end(t, PPS_TRANSPORT_END_RECEIVE, pps_tls_error(l->tls));
		return PPS_TRANSPORT_ENDED;
	}
	return n;
}

static const char *
tls_handshake_pending(const pps_transport_t *t)
{
	const tls_layer_t *l = (const tls_layer_t *)t;

	if (!pps_tls_handshake_done(l->tls))
		return "TLS";
	return pps_transport_handshake_pending(t->underlying);
}

static bool
tls_input_buffered(const pps_transport_t *t)
{
	return pps_tls_has_pending(((const tls_layer_t *)t)->tls);
}

static int
tls_send_now(pps_transport_t *t, const void *buf, size_t len)
{
	tls_layer_t *l = (tls_layer_t *)t;
	int ret;

	if (!pps_tls_handshake_done(l->tls))
		return -ENOTCONN;
	(void)pps_socket_set_cork(t->fd, false); /* best effort; the send reports */
	ret = pps_tls_send(l->tls, buf, len);
	/* A tail the kernel did not take now goes first with the next bytes. */
	return ret == -EAGAIN ? 0 : ret;
}

static ssize_t
tls_write(pps_transport_t *t, const void *buf, size_t len)
{
	tls_layer_t *l = (tls_layer_t *)t;
	int ret = pps_tls_flush(l->tls);

	/* One record per call, and none while the last one's tail waits. */
	if (ret < 0)
		return ret;
	if (len > PPS_TLS_MAX_PLAINTEXT_BYTES)
		len = PPS_TLS_MAX_PLAINTEXT_BYTES;
	ret = pps_tls_send(l->tls, buf, len);
	return ret == 0 || ret == -EAGAIN ? (ssize_t)len : ret;
}

static int
tls_flush(pps_transport_t *t)
{
	return pps_tls_flush(((tls_layer_t *)t)->tls);
}

static int
tls_start(pps_transport_t *t, size_t max_packet_bytes)
{
	tls_layer_t *l = (tls_layer_t *)t;

	if (!l->plain && !(l->plain = malloc(PPS_TLS_MAX_PLAINTEXT_BYTES)))
		return -ENOMEM;
	/* A packet is one record: never more than the largest. */
	if (max_packet_bytes == 0 || max_packet_bytes > PPS_TLS_MAX_RECORD_BYTES)
		max_packet_bytes = PPS_TLS_MAX_RECORD_BYTES;
	return pps_transport_start_packets(t->underlying, max_packet_bytes);
}

static int
tls_fill(pps_transport_t *t, size_t mss_bytes, uint8_t *buf, size_t *len_bytes, bool *push)
{
	tls_layer_t *l = (tls_layer_t *)t;
	size_t room, len = 0, sealed = 0;
	int ret;

	if (mss_bytes <= PPS_TLS_RECORD_OVERHEAD_BYTES)
		return -EMSGSIZE;
	room = mss_bytes - PPS_TLS_RECORD_OVERHEAD_BYTES;
	ret = pps_transport_fill_above(t, room, l->plain, &len, push);
	if (ret <= 0)
		return ret;
	if (len == 0 || len > room)
		return -EMSGSIZE; /* producer bug: a packet must fit one record */
	ret = pps_tls_seal(l->tls, l->plain, len, buf, mss_bytes, &sealed);
	if (ret < 0)
		return ret;
	l->records++;
	if (sealed > l->max_record_bytes)
		l->max_record_bytes = (uint32_t)sealed;
	/* A short plaintext ends its batch like a short packet: the writer
	 * below sees a whole record where a packet was shorter than its room. */
	if (len < room)
		*push = true;
	*len_bytes = sealed;
	return 1;
}

static int
tls_get_stats(const pps_transport_t *t, pps_minbuf_stats_t *out)
{
	const tls_layer_t *l = (const tls_layer_t *)t;
	int ret = pps_transport_get_stats(t->underlying, out);

	if (ret == 0) {
		out->tls_records = l->records;
		out->tls_max_record_bytes = l->max_record_bytes;
	}
	return ret;
}

static void
tls_stop(pps_transport_t *t)
{
	event_del(((tls_layer_t *)t)->write_event);
}

static void
tls_free(pps_transport_t *t)
{
	tls_layer_t *l = (tls_layer_t *)t;

	pps_tls_free(l->tls);
	if (l->write_event)
		event_free(l->write_event);
	free(l->plain);
	free(l);
}

static const pps_transport_ops_t tls_ops = {
    .name = tls_name,
    .caps = tls_caps,
    .read = tls_read,
    .handshake_pending = tls_handshake_pending,
    .input_buffered = tls_input_buffered,
    .send_now = tls_send_now,
    .write = tls_write,
    .flush = tls_flush,
    .start = tls_start,
    .fill = tls_fill,
    .get_stats = tls_get_stats,
    .stop = tls_stop,
    .free = tls_free,
};

pps_transport_t *
pps_transport_tls_over(pps_transport_t *underlying, pps_tls_t *tls)
{
	tls_layer_t *l;

	if (!underlying || !tls) {
		/* A constructor that failed in the caller's expression said why. */
		int err = !underlying ? errno : EINVAL;

		pps_transport_free(underlying);
		pps_tls_free(tls);
		errno = err;
		return NULL;
	}
	l = calloc(1, sizeof(*l));
	if (l)
		l->write_event =
		    event_new(underlying->base, underlying->fd, EV_WRITE, writable_cb, l);
	if (!l || !l->write_event) {
		free(l);
		pps_transport_free(underlying);
		pps_tls_free(tls);
		errno = ENOMEM;
		return NULL;
	}
	pps_transport_init(&l->t, &tls_ops, underlying, NULL, -1);
	l->tls = tls;
	return &l->t;
}
