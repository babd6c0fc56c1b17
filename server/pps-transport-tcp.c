/* SPDX-License-Identifier: MIT */
/*
 * The socket's own transport: recv(2) for input, send(2) for what is said
 * now, and the MIN_BUF writer (pps-minbuf.h; mode minbuf or tcp) for the
 * stream, created when the client is admitted. Until then nothing is set on
 * the socket, so a refusal before admission leaves it as accepted.
 */
#include "pps-socket.h"
#include "pps-transport-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/event.h>

typedef struct {
	pps_transport_t t;
	pps_minbuf_params_t params;
	pps_minbuf_t *writer; /* from pps_transport_start() on */
} tcp_t;

static const char *
tcp_name(const pps_transport_t *t)
{
	const tcp_t *c = (const tcp_t *)t;

	return c->params.thin ? "thin" : pps_minbuf_mode_name(c->params.mode);
}

static unsigned
tcp_caps(const pps_transport_t *t)
{
	/* The latency cap bounds what MIN_BUF keeps in the kernel; mode tcp
	 * leaves that to the kernel. */
	return PPS_TRANSPORT_CAP_RATE_CAP | PPS_TRANSPORT_CAP_CONGESTION |
	       (((const tcp_t *)t)->params.mode == PPS_MINBUF_MODE_MINBUF
	            ? PPS_TRANSPORT_CAP_LATENCY_CAP
	            : 0);
}

static ssize_t
tcp_read(pps_transport_t *t, uint8_t *buf, size_t size)
{
	ssize_t n = recv(t->fd, buf, size, 0);

	if (n < 0)
		return errno == EINTR ? -EAGAIN : -errno;
	return n;
}

static int
tcp_send_now(pps_transport_t *t, const void *buf, size_t len)
{
	return pps_socket_send_now(t->fd, buf, len);
}

static ssize_t
tcp_write(pps_transport_t *t, const void *buf, size_t len)
{
	ssize_t k = send(t->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);

	if (k < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN : -errno;
	return k;
}

static int
writer_fill_cb(size_t mss_bytes, uint8_t *buf, size_t *len_bytes, bool *push, void *user)
{
	return pps_transport_fill_above(user, mss_bytes, buf, len_bytes, push);
}

static void
writer_sample_cb(const pps_minbuf_sample_t *sample, void *user)
{
	pps_transport_sample_above(user, sample);
}

static void
writer_error_cb(int err, void *user)
{
	pps_transport_end(user, PPS_TRANSPORT_END_SEND, strerror(-err));
}

static int
tcp_set_writer(pps_transport_t *t, const pps_minbuf_params_t *writer)
{
	tcp_t *c = (tcp_t *)t;

	if (c->writer)
		return -EALREADY;
	if (writer->thin && writer->mode != PPS_MINBUF_MODE_TCP)
		return -EINVAL;
	c->params = *writer;
	return 0;
}

static int
tcp_start(pps_transport_t *t, size_t max_packet_bytes)
{
	tcp_t *c = (tcp_t *)t;
	pps_minbuf_params_t params = c->params;

	if (c->writer)
		return -EALREADY;
	params.max_packet_bytes = max_packet_bytes;
	c->writer =
	    pps_minbuf_new(t->base, t->fd, &params, writer_fill_cb, writer_error_cb, (void *)t);
	if (!c->writer)
		return -errno;
	pps_minbuf_set_sample_cb(c->writer, writer_sample_cb, t);
	return 0;
}

static void
tcp_kick(pps_transport_t *t)
{
	pps_minbuf_kick(((tcp_t *)t)->writer);
}

static size_t
tcp_pending_bytes(const pps_transport_t *t)
{
	return pps_minbuf_pending_bytes(((const tcp_t *)t)->writer);
}

static void
tcp_set_latency_cap(pps_transport_t *t, uint32_t cap_pkts)
{
	tcp_t *c = (tcp_t *)t;

	if (c->writer)
		pps_minbuf_set_cap(c->writer, cap_pkts);
}

static int
tcp_set_rate_cap(pps_transport_t *t, uint64_t bits_per_s)
{
	tcp_t *c = (tcp_t *)t;

	return c->writer ? pps_minbuf_set_rate_cap(c->writer, bits_per_s) : -ENOTCONN;
}

static int
tcp_set_congestion(pps_transport_t *t, pps_minbuf_congestion_t cc)
{
	tcp_t *c = (tcp_t *)t;

	return c->writer ? pps_minbuf_set_congestion(c->writer, cc) : -ENOTCONN;
}

static int
tcp_get_stats(const pps_transport_t *t, pps_minbuf_stats_t *out)
{
	const tcp_t *c = (const tcp_t *)t;

	return c->writer ? pps_minbuf_get_stats(c->writer, out) : -ENOENT;
}

static void
tcp_stop(pps_transport_t *t)
{
	if (t->read_event)
		event_del(t->read_event);
}

static void
tcp_free(pps_transport_t *t)
{
	tcp_t *c = (tcp_t *)t;

	pps_minbuf_free(c->writer);
	if (t->read_event)
		event_free(t->read_event);
	free(c);
}

static const pps_transport_ops_t tcp_ops = {
    .name = tcp_name,
    .caps = tcp_caps,
    .read = tcp_read,
    .send_now = tcp_send_now,
    .write = tcp_write,
    .set_writer = tcp_set_writer,
    .start = tcp_start,
    .kick = tcp_kick,
    .pending_bytes = tcp_pending_bytes,
    .set_latency_cap = tcp_set_latency_cap,
    .set_rate_cap = tcp_set_rate_cap,
    .set_congestion = tcp_set_congestion,
    .get_stats = tcp_get_stats,
    .stop = tcp_stop,
    .free = tcp_free,
};

static void
readable_cb(evutil_socket_t fd, short what, void *user)
{
	pps_transport_input_ready(user);
}

pps_transport_t *
pps_transport_tcp_open(struct event_base *base, int fd, const pps_minbuf_params_t *params)
{
	tcp_t *c;

	if (!base || fd < 0 || !params) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL; /* errno: ENOMEM */
	pps_transport_init(&c->t, &tcp_ops, NULL, base, fd);
	c->params = *params;
	c->t.read_event = event_new(base, fd, EV_READ | EV_PERSIST, readable_cb, &c->t);
	if (!c->t.read_event) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	return &c->t;
}
