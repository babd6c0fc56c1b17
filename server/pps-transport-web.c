/* SPDX-License-Identifier: MIT */
/*
 * The browser layer: on the same listener as pps-client, a connection whose
 * first bytes are an HTTP request is a browser's (pps-web.h). This layer reads
 * those first bytes (decrypted, over TLS) and then either stays out of the
 * way for good (a HELLO: pps-client) or becomes the browser's: its input goes
 * through the HTTP server and, after the upgrade, the WebSocket frame reader,
 * which leave the client's wire records for the session; each packet the
 * writer pulls is made one binary message (its header fits in the MSS too);
 * records said now (CHALLENGE, BYE) go in messages of their own.
 */
#include "pps-transport-internal.h"
#include "pps-web.h"
#include "pps-websocket.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
	WEB_SNIFFING, /* nothing read yet */
	WEB_BROWSER,  /* an HTTP request came first: web is the browser's */
	WEB_NONE,     /* something else came first: out of the way */
} web_mode_t;

typedef struct {
	pps_transport_t t;
	web_mode_t mode;
	pps_web_t *web;
	char peer[160];
	pps_log_t log;
	pps_web_pages_t pages;
	bool check_bound; /* PPS_WEB_CHECK_BOUND applies (a MIN_BUF writer) */
	unsigned a, b;    /* the writer's bound */
} web_layer_t;

static void
web_done_cb(void *user)
{
	pps_transport_end(user, PPS_TRANSPORT_END_FINISHED, NULL);
}

static ssize_t
web_read(pps_transport_t *t, uint8_t *buf, size_t size)
{
	web_layer_t *l = (web_layer_t *)t;
	ssize_t n = pps_transport_read(t->underlying, buf, size);
	size_t wire = 0;

	if (n <= 0)
		return n;
	if (l->mode == WEB_SNIFFING) {
		/* A wire record starts with the protocol version, an HTTP
		 * request with its method. */
		if (pps_web_sniff(buf, (size_t)n))
			l->web =
			    pps_web_new(t->underlying, l->peer, &l->log, &l->pages, web_done_cb, t);
		l->mode = l->web ? WEB_BROWSER : WEB_NONE;
	}
	if (l->mode == WEB_NONE)
		return n;
	if (pps_web_input(l->web, buf, (size_t)n, size, &wire) < 0) {
		/* A page that left with a close frame closed the connection; one
		 * that broke the protocol is refused. */
		if (pps_web_closed_cleanly(l->web)) {
			pps_wire_record_t bye = {.kind = PPS_WIRE_BYE};

			/* The close frame back, between packets only. */
			if (pps_transport_pending_bytes(t) == 0)
				(void)pps_web_send_record(l->web, &bye);
			pps_transport_end(t, PPS_TRANSPORT_END_CLOSED, NULL);
		} else
			pps_transport_end(t, PPS_TRANSPORT_END_PROTOCOL, pps_web_error(l->web));
		return PPS_TRANSPORT_ENDED;
	}
	/* Bytes that were HTTP or frame headers only: nothing for the layer
	 * above this time (pps_transport_input_ready() reads on while a layer
	 * below holds more, within its budget). */
	return wire > 0 ? (ssize_t)wire : -EAGAIN;
}

static int
web_send_record(pps_transport_t *t, const pps_wire_record_t *record)
{
	web_layer_t *l = (web_layer_t *)t;

	if (!l->web)
		return pps_transport_send_record(t->underlying, record);
	return pps_web_send_record(l->web, record);
}

static int
web_fill(pps_transport_t *t, size_t mss_bytes, uint8_t *buf, size_t *len_bytes, bool *push)
{
	web_layer_t *l = (web_layer_t *)t;
	int ret;

	if (!l->web)
		return pps_transport_fill_above(t, mss_bytes, buf, len_bytes, push);
	/* One binary message, a Pong owed in front of it. */
	ret = pps_web_fill(l->web, t, mss_bytes, buf, len_bytes, push);
	if (ret == 1 && l->check_bound)
		pps_web_check_packet(l->web, t->fd, mss_bytes, l->a, l->b);
	return ret;
}

static void
web_sample(pps_transport_t *t, const pps_minbuf_sample_t *sample)
{
	web_layer_t *l = (web_layer_t *)t;

	if (l->web)
		pps_web_check_batch(l->web);
	pps_transport_sample_above(t, sample);
}

static void
web_free(pps_transport_t *t)
{
	web_layer_t *l = (web_layer_t *)t;

	pps_web_free(l->web);
	free(l);
}

/* Unnamed in logs: a browser's session says "joined (minbuf)" as pps-client's. */
static const pps_transport_ops_t web_ops = {
    .read = web_read,
    .send_record = web_send_record,
    .fill = web_fill,
    .sample = web_sample,
    .free = web_free,
};

pps_transport_t *
pps_transport_web_over(pps_transport_t *underlying, const char *peer,
                       const pps_minbuf_params_t *check_bound, const pps_log_t *log,
                       const pps_web_pages_t *pages)
{
	web_layer_t *l;

	if (!underlying || !peer) {
		/* A constructor that failed in the caller's expression said why. */
		int err = !underlying ? errno : EINVAL;

		pps_transport_free(underlying);
		errno = err;
		return NULL;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		pps_transport_free(underlying);
		errno = ENOMEM;
		return NULL;
	}
	pps_transport_init(&l->t, &web_ops, underlying, NULL, -1);
	snprintf(l->peer, sizeof(l->peer), "%s", peer);
	if (log)
		l->log = *log;
	if (pages)
		l->pages = *pages;
	if (check_bound) {
		l->check_bound = true;
		l->a = check_bound->a;
		l->b = check_bound->b;
	}
	return &l->t;
}
