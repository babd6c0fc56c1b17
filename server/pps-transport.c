/* SPDX-License-Identifier: MIT */
/*
 * The stack of layers behind pps-transport.h: each call goes down to the
 * first layer that has the operation, packets and readings go up to the
 * first layer that filters them, and the owner's callbacks sit on the top.
 */
#include "pps-transport-internal.h"
#include "pps-time.h"
#include "pps-tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

/* The layer that implements @op: @t's own, else the nearest below it. */
#define DOWN_TO(t, op)                                                                             \
	while ((t) && !(t)->ops->op)                                                               \
	(t) = (t)->underlying

static pps_transport_t *
top_of(pps_transport_t *t)
{
	while (t->over)
		t = t->over;
	return t;
}

static pps_transport_t *
bottom_of(pps_transport_t *t)
{
	while (t->underlying)
		t = t->underlying;
	return t;
}

void
pps_transport_init(pps_transport_t *t, const pps_transport_ops_t *ops, pps_transport_t *underlying,
                   struct event_base *base, int fd)
{
	memset(t, 0, sizeof(*t));
	t->ops = ops;
	t->underlying = underlying;
	t->base = underlying ? underlying->base : base;
	t->fd = underlying ? underlying->fd : fd;
	if (underlying)
		underlying->over = t;
}

/* ---- going up ----------------------------------------------------------- */

int
pps_transport_fill_above(pps_transport_t *t, size_t mss_bytes, uint8_t *buf, size_t *len_bytes,
                         bool *push)
{
	for (pps_transport_t *l = t->over; l; l = l->over)
		if (l->ops->fill)
			return l->ops->fill(l, mss_bytes, buf, len_bytes, push);
	t = top_of(t);
	if (!t->events.fill_cb)
		return 0;
	return t->events.fill_cb(mss_bytes, buf, len_bytes, push, t->user);
}

void
pps_transport_sample_above(pps_transport_t *t, const pps_minbuf_sample_t *sample)
{
	for (pps_transport_t *l = t->over; l; l = l->over) {
		if (l->ops->sample) {
			l->ops->sample(l, sample);
			return;
		}
	}
	t = top_of(t);
	if (t->events.sample_cb)
		t->events.sample_cb(sample, t->user);
}

void
pps_transport_end(pps_transport_t *t, pps_transport_end_t how, const char *why)
{
	t = top_of(t);
	/* Level-triggered: a socket at its end would wake the loop forever. */
	pps_transport_stop(t);
	if (t->events.ended_cb)
		t->events.ended_cb(how, why, t->user);
}

static void
read_resume_cb(evutil_socket_t fd, short what, void *user)
{
	pps_transport_t *t = user;
	pps_transport_t *bottom = bottom_of(t);

	if (t->stopped || !bottom->read_event)
		return;
	event_add(bottom->read_event, NULL);
	/* What a layer holds the socket will not signal again. */
	event_active(bottom->read_event, EV_READ, 0);
}

/* Takes one read from @t's budget; false (and reading paused until one is
 * due) when it has none left. */
static bool
take_read(pps_transport_t *t)
{
	int64_t now = pps_time_monotonic_us();
	pps_transport_t *bottom;
	struct timeval tv;

	if (!t->read_refill_us) {
		t->read_tokens = PPS_TRANSPORT_READS_BURST;
		t->read_refill_us = now;
	} else if (now > t->read_refill_us) {
		t->read_tokens +=
		    (double)(now - t->read_refill_us) * PPS_TRANSPORT_READS_PER_S / 1e6;
		if (t->read_tokens > PPS_TRANSPORT_READS_BURST)
			t->read_tokens = PPS_TRANSPORT_READS_BURST;
		t->read_refill_us = now;
	}
	if (t->read_tokens >= 1.0) {
		t->read_tokens -= 1.0;
		return true;
	}
	bottom = bottom_of(t);
	if (!t->read_resume)
		t->read_resume = evtimer_new(t->base, read_resume_cb, t);
	if (!t->read_resume || !bottom->read_event)
		return true; /* out of memory: unpaced rather than stuck */
	event_del(bottom->read_event);
	tv = pps_time_us_to_timeval(
	    (int64_t)((1.0 - t->read_tokens) * 1e6 / PPS_TRANSPORT_READS_PER_S) + 1);
	event_add(t->read_resume, &tv);
	return false;
}

void
pps_transport_input_ready(pps_transport_t *t)
{
	uint8_t buf[4096];

	t = top_of(t);
	t->input_seen = true;
	/*
	 * A socket is level-triggered: one read per wake-up, the loop comes back
	 * for the rest after every other connection had its turn. A layer that
	 * holds bytes the socket no longer signals (TLS) is read on while it
	 * holds some, but only PPS_TRANSPORT_READS_PER_WAKEUP times: then the
	 * wake-up is queued behind the others, so that a peer keeping its
	 * connection full gets a share of the loop, never all of it.
	 */
	for (unsigned reads = 0;; reads++) {
		ssize_t n;

		if (reads == PPS_TRANSPORT_READS_PER_WAKEUP) {
			pps_transport_wake_input(t);
			return;
		}
		if (!take_read(t))
			return;
		n = pps_transport_read(t, buf, sizeof(buf));
		if (n == PPS_TRANSPORT_ENDED)
			return;
		if (n == 0) {
			pps_transport_end(t, PPS_TRANSPORT_END_CLOSED, NULL);
			return;
		}
		if (n < 0 && n != -EAGAIN) {
			pps_transport_end(t, PPS_TRANSPORT_END_RECEIVE, strerror((int)-n));
			return;
		}
		if (n > 0 && t->events.input_cb)
			t->events.input_cb(buf, (size_t)n, t->user);
		if (t->stopped || !pps_transport_input_buffered(t))
			return;
	}
}

void
pps_transport_wake_input(pps_transport_t *t)
{
	t = bottom_of(t);
	if (t->read_event)
		event_active(t->read_event, EV_READ, 0);
}

/* ---- going down --------------------------------------------------------- */

ssize_t
pps_transport_read(pps_transport_t *t, uint8_t *buf, size_t size)
{
	/* Down to the first layer that reads, or that holds replayed bytes,
	 * which come first. */
	while (t && !t->ops->read && !t->replay)
		t = t->underlying;
	if (t && t->replay) {
		size_t n = t->replay_len - t->replay_off;

		if (n > size)
			n = size;
		memcpy(buf, t->replay + t->replay_off, n);
		t->replay_off += n;
		if (t->replay_off == t->replay_len) {
			free(t->replay);
			t->replay = NULL;
		}
		return (ssize_t)n;
	}
	return t ? t->ops->read(t, buf, size) : -EOPNOTSUPP;
}

int
pps_transport_send_now(pps_transport_t *t, const void *buf, size_t len)
{
	DOWN_TO(t, send_now);
	return t ? t->ops->send_now(t, buf, len) : -EOPNOTSUPP;
}

ssize_t
pps_transport_write(pps_transport_t *t, const void *buf, size_t len)
{
	DOWN_TO(t, write);
	return t ? t->ops->write(t, buf, len) : -EOPNOTSUPP;
}

int
pps_transport_flush(pps_transport_t *t)
{
	DOWN_TO(t, flush);
	return t ? t->ops->flush(t) : 0; /* nobody keeps anything */
}

int
pps_transport_start_packets(pps_transport_t *t, size_t max_packet_bytes)
{
	DOWN_TO(t, start);
	return t ? t->ops->start(t, max_packet_bytes) : -EOPNOTSUPP;
}

int
pps_transport_set_events(pps_transport_t *t, const pps_transport_events_t *events, void *user)
{
	pps_transport_t *bottom = bottom_of(t);

	t->events = *events;
	t->user = user;
	if (events->input_cb && bottom->read_event && event_add(bottom->read_event, NULL) < 0)
		return -EIO;
	return 0;
}

void
pps_transport_describe(const pps_transport_t *t, char *buf, size_t size)
{
	const pps_transport_t *layers[8];
	size_t n = 0, len = 0;

	for (; t && n < sizeof(layers) / sizeof(layers[0]); t = t->underlying)
		layers[n++] = t;
	if (size)
		buf[0] = '\0';
	while (n-- > 0) {
		const char *name = layers[n]->ops->name ? layers[n]->ops->name(layers[n]) : NULL;
		int k;

		if (!name || len >= size)
			continue;
		k = snprintf(buf + len, size - len, "%s%s", len ? ", " : "", name);
		if (k > 0)
			len += (size_t)k;
	}
}

unsigned
pps_transport_caps(const pps_transport_t *t)
{
	DOWN_TO(t, caps);
	return t ? t->ops->caps(t) : 0;
}

const char *
pps_transport_handshake_pending(const pps_transport_t *t)
{
	DOWN_TO(t, handshake_pending);
	return t ? t->ops->handshake_pending(t) : NULL;
}

int
pps_transport_send_record(pps_transport_t *t, const pps_wire_record_t *record)
{
	pps_transport_t *l = t;
	uint8_t buf[512];
	size_t n;
	int ret;

	DOWN_TO(l, send_record);
	if (l)
		return l->ops->send_record(l, record);
	ret = pps_wire_encode(record, buf, sizeof(buf), &n);
	if (ret < 0)
		return ret;
	return pps_transport_send_now(t, buf, n);
}

int
pps_transport_set_writer(pps_transport_t *t, const pps_minbuf_params_t *writer)
{
	DOWN_TO(t, set_writer);
	return t ? t->ops->set_writer(t, writer) : -EOPNOTSUPP;
}

int
pps_transport_start(pps_transport_t *t)
{
	return pps_transport_start_packets(t, 0);
}

void
pps_transport_kick(pps_transport_t *t)
{
	DOWN_TO(t, kick);
	if (t)
		t->ops->kick(t);
}

void
pps_transport_note_input(pps_transport_t *t)
{
	if (t)
		top_of(t)->input_seen = true;
}

bool
pps_transport_input_seen(const pps_transport_t *t)
{
	while (t && t->over)
		t = t->over;
	return t && t->input_seen;
}

int
pps_transport_replay(pps_transport_t *t, const uint8_t *buf, size_t len)
{
	/* What the top layer reads from below: held by the layer under it (the
	 * plaintext side of TLS), or by a lone bottom itself. */
	pps_transport_t *top = top_of(t);
	pps_transport_t *holder = top->underlying ? top->underlying : top;

	for (pps_transport_t *l = top; l; l = l->underlying)
		if (l->replay)
			return -EALREADY;
	if (pps_transport_input_seen(t))
		return -EALREADY;
	if (len == 0)
		return 0;
	holder->replay = malloc(len);
	if (!holder->replay)
		return -ENOMEM;
	memcpy(holder->replay, buf, len);
	holder->replay_len = len;
	holder->replay_off = 0;
	pps_transport_wake_input(t);
	return 0;
}

bool
pps_transport_input_buffered(const pps_transport_t *t)
{
	for (const pps_transport_t *l = t; l; l = l->underlying)
		if (l->replay)
			return true;
	DOWN_TO(t, input_buffered);
	return t ? t->ops->input_buffered(t) : false;
}

size_t
pps_transport_pending_bytes(const pps_transport_t *t)
{
	DOWN_TO(t, pending_bytes);
	return t ? t->ops->pending_bytes(t) : 0;
}

void
pps_transport_set_latency_cap(pps_transport_t *t, uint32_t cap_pkts)
{
	DOWN_TO(t, set_latency_cap);
	if (t)
		t->ops->set_latency_cap(t, cap_pkts);
}

int
pps_transport_set_rate_cap(pps_transport_t *t, uint64_t bits_per_s)
{
	DOWN_TO(t, set_rate_cap);
	return t ? t->ops->set_rate_cap(t, bits_per_s) : -EOPNOTSUPP;
}

int
pps_transport_set_congestion(pps_transport_t *t, pps_minbuf_congestion_t cc)
{
	DOWN_TO(t, set_congestion);
	return t ? t->ops->set_congestion(t, cc) : -EOPNOTSUPP;
}

int
pps_transport_get_stats(const pps_transport_t *t, pps_minbuf_stats_t *out)
{
	int ret = -ENOENT;

	DOWN_TO(t, get_stats);
	if (t)
		ret = t->ops->get_stats(t, out);
	if (ret < 0)
		memset(out, 0, sizeof(*out));
	return ret;
}

void
pps_transport_stop(pps_transport_t *t)
{
	for (; t; t = t->underlying) {
		if (t->read_resume)
			event_del(t->read_resume);
		t->stopped = true;
		if (t->ops->stop)
			t->ops->stop(t);
	}
}

void
pps_transport_free(pps_transport_t *t)
{
	while (t) {
		pps_transport_t *next = t->underlying;

		if (t->read_resume)
			event_free(t->read_resume);
		free(t->replay);
		t->ops->free(t);
		t = next;
	}
}

/* ---- a server session's stack ------------------------------------------ */

pps_transport_t *
pps_transport_open(struct event_base *base, int fd, const pps_transport_params_t *params,
                   const pps_transport_events_t *events, void *user)
{
	const pps_minbuf_params_t *check;
	pps_transport_t *t;
	int ret;

	if (!base || fd < 0 || !params || !events) {
		pps_tls_free(params ? params->tls : NULL);
		errno = EINVAL;
		return NULL;
	}
	check = params->writer.mode == PPS_MINBUF_MODE_MINBUF ? &params->writer : NULL;
	t = pps_transport_tcp_open(base, fd, &params->writer);
	if (!t)
		pps_tls_free(params->tls);
	if (t && (params->tls || params->tls_ctx)) {
		pps_tls_t *tls = params->tls ? params->tls : pps_tls_new(params->tls_ctx, fd, NULL);

		if (!tls) {
			int saved = errno;

			pps_transport_free(t);
			errno = saved;
			return NULL;
		}
		t = pps_transport_tls_over(t, tls);
	}
	if (t)
		t = pps_transport_web_over(t, params->peer ? params->peer : "?", check,
		                           &params->log, &params->pages);
	if (!t)
		return NULL; /* errno set by the constructors */
	ret = pps_transport_set_events(t, events, user);
	if (ret < 0) {
		pps_transport_free(t);
		errno = -ret;
		return NULL;
	}
	/* An endpoint someone else read from may hold decrypted bytes the
	 * socket will not signal again. */
	if (params->tls)
		pps_transport_wake_input(t);
	return t;
}
