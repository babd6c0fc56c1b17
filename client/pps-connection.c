/* SPDX-License-Identifier: MIT */
/*
 * The connection to the server: a non-blocking TCP socket on the caller's
 * libevent loop, HELLO, the wire parser, CLOCK_PING on a timer, BYE, the
 * handshake timeout and the bounded reconnect.
 *
 * Reconnect (client.reconnect): after the connection ends for any reason
 * (refused, closed, BYE, protocol error) it tries again after a backoff that
 * doubles from 0.5 s to 8 s. A connection that delivered a stream resets the
 * count; after client.reconnect_attempts tries in a row without a stream it
 * gives up, and closed_cb reports the failure.
 *
 * TLS (client.tls): after the TCP connect, a non-blocking TLS 1.3 handshake
 * (common/pps-tls.h) on the same loop, inside the handshake timeout; HELLO
 * and everything after it go through TLS. The server's certificate is always
 * verified; a failure, or a server that answers in plaintext, ends the
 * connection with the reason.
 *
 * Data timeout (client.data_timeout_windows, client.data_timeout_min_ms):
 * once STREAM_INFO is in, a server that sends no record for that many
 * windows of the stream (never less than the floor) ends the connection as a
 * failure, which a reconnect then retries. A one-shot timer, pushed back by
 * each read that brought a whole record: nothing polls. Any record counts,
 * CLOCK_PONG too: a server that still answers is not silent, only idle.
 */
#include "pps-client-internal.h"
#include "pps-socket.h"
#include "pps-time.h"
#include "pps-tls.h"

#include <errno.h>
#include <event2/event.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RECONNECT_MIN_US 500000
#define RECONNECT_MAX_US 8000000

struct pps_connection {
	struct event_base *base;
	pps_connection_params_t params;
	char server[256];  /* as given: HOST:PORT or HOST:PORT/STREAM, for messages */
	char address[256]; /* HOST:PORT */
	char stream[PPS_WIRE_MAX_STREAM_BYTES + 1]; /* "" unless a stream was named */
	char name[PPS_WIRE_MAX_NAME_BYTES + 1];
	pps_connection_callbacks_t callbacks;
	void *user;

	int fd;
	pps_tls_ctx_t *tls_ctx;  /* params.tls: made at the first start, kept */
	pps_tls_t *tls;          /* this connection's, until its socket closes */
	struct event *tls_event; /* the handshake waits for the socket to take a flight */
	char tls_ca[1024];
	char tls_server_name[256];
	bool connected; /* TCP up (and TLS), HELLO sent */
	bool streaming; /* STREAM_INFO accepted */
	bool answered;  /* CHALLENGE answered on this connection */
	bool stopped;
	int bye_reason; /* the BYE that is ending the connection, -1: none */
	struct event *read_event, *connect_event;
	struct event *reconnect_timer, *ping_timer, *handshake_timer, *data_timer;
	int64_t data_timeout_us; /* 0: none (before STREAM_INFO, or not asked for) */
	int64_t window_us;       /* the stream's window, for the data timeout's message */
	pps_wire_parser_t *parser;
	uint32_t ping_seq;
	uint32_t pong_seq; /* the last PING answered: PONGs for ping_seq only, once */
	int64_t backoff_us;
	unsigned attempts; /* in a row without a stream */
	unsigned connections;
};

static void start(pps_connection_t *c);

/* Server text for a terminal: printable ASCII only. */
void
pps_connection_sanitize(char *dst, size_t dst_size, const char *src, size_t src_len)
{
	size_t n = 0;

	if (dst_size == 0)
		return;
	for (size_t i = 0; i < src_len && src[i] && n + 1 < dst_size; i++) {
		unsigned char ch = (unsigned char)src[i];

		dst[n++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	dst[n] = '\0';
}

static void
close_socket(pps_connection_t *c)
{
	if (c->read_event) {
		event_free(c->read_event);
		c->read_event = NULL;
	}
	if (c->connect_event) {
		event_free(c->connect_event);
		c->connect_event = NULL;
	}
	if (c->tls_event) {
		event_free(c->tls_event);
		c->tls_event = NULL;
	}
	pps_tls_free(c->tls);
	c->tls = NULL;
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	event_del(c->ping_timer);
	event_del(c->handshake_timer);
	event_del(c->data_timer);
	c->data_timeout_us = 0;
	c->connected = false;
}

/* The connection ended: reconnect if asked and not out of attempts, and say so. */
static void
ended(pps_connection_t *c, const char *why, bool failure)
{
	bool had_stream = c->streaming;
	pps_connection_end_t end = {
	    .why = why, .failure = failure, .had_stream = had_stream, .bye_reason = c->bye_reason};

	c->bye_reason = -1;
	close_socket(c);
	c->streaming = false;
	c->answered = false;
	pps_wire_parser_free(c->parser);
	c->parser = NULL;
	if (c->stopped)
		return;
	if (had_stream)
		c->attempts = 0;
	if (c->params.reconnect && c->attempts < c->params.reconnect_attempts) {
		struct timeval tv;

		c->backoff_us = had_stream || !c->backoff_us ? RECONNECT_MIN_US : c->backoff_us * 2;
		if (c->backoff_us > RECONNECT_MAX_US)
			c->backoff_us = RECONNECT_MAX_US;
		end.retry_in_us = c->backoff_us;
		tv = pps_time_us_to_timeval(c->backoff_us);
		event_add(c->reconnect_timer, &tv);
	} else if (c->params.reconnect) {
		end.gave_up = true;
		end.failure = true;
	}
	c->callbacks.closed_cb(&end, c->user);
}

int
pps_connection_send(pps_connection_t *c, const pps_wire_record_t *r)
{
	uint8_t buf[256];
	size_t n;
	int ret;

	if (c->fd < 0 || !c->connected)
		return -ENOTCONN;
	ret = pps_wire_encode(r, buf, sizeof(buf), &n);
	if (ret < 0)
		return ret;
	/* Our records are tiny and rare; a full send buffer means the server
	 * is not reading, and a lost PING costs one clock sample. Through TLS
	 * the record is sealed whole and an unsent tail goes with the next one. */
	if (c->tls) {
		ret = pps_tls_send(c->tls, buf, n);
		return ret == -EAGAIN ? 0 : ret;
	}
	if (send(c->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)n)
		return -errno;
	return 0;
}

static void
ping_cb(evutil_socket_t fd, short what, void *user)
{
	pps_connection_t *c = user;
	pps_wire_record_t ping = {.kind = PPS_WIRE_CLOCK_PING};

	(void)fd;
	(void)what;
	if (!c->streaming)
		return;
	ping.u.clock_ping.seq = ++c->ping_seq;
	ping.u.clock_ping.client_send_us = c->params.clock_cb(c->user);
	pps_connection_send(c, &ping);
}

static void
arm_data_timer(pps_connection_t *c)
{
	struct timeval tv;

	if (c->data_timeout_us <= 0)
		return;
	tv = pps_time_us_to_timeval(c->data_timeout_us);
	event_add(c->data_timer, &tv);
}

int64_t
pps_connection_data_timeout_us(const pps_connection_params_t *params, int64_t window_us)
{
	int64_t timeout_us;

	if (params->data_timeout_windows == 0 || window_us <= 0)
		return 0;
	timeout_us = (int64_t)params->data_timeout_windows * window_us;
	return timeout_us > params->data_timeout_min_us ? timeout_us : params->data_timeout_min_us;
}

void
pps_connection_stream_started(pps_connection_t *c, int64_t window_us)
{
	struct timeval tv;

	c->streaming = true;
	c->attempts = 0;
	c->backoff_us = 0;
	event_del(c->handshake_timer);
	c->window_us = window_us;
	c->data_timeout_us = pps_connection_data_timeout_us(&c->params, window_us);
	arm_data_timer(c);
	tv = pps_time_us_to_timeval(c->params.ping_interval_us);
	event_add(c->ping_timer, &tv);
	ping_cb(-1, 0, c); /* a first clock sample right away */
}

void
pps_connection_fail(pps_connection_t *c, const char *why)
{
	pps_wire_record_t bye = {.kind = PPS_WIRE_BYE};
	char text[400];

	bye.u.bye.reason = PPS_WIRE_BYE_PROTOCOL;
	bye.u.bye.text_len =
	    (uint8_t)snprintf(bye.u.bye.text, sizeof(bye.u.bye.text), "%.190s", why);
	pps_connection_send(c, &bye);
	snprintf(text, sizeof(text), "protocol error from the server: %s", why);
	ended(c, text, true);
}

static void
handle_bye(pps_connection_t *c, const pps_wire_bye_t *bye)
{
	char text[PPS_WIRE_MAX_REASON_BYTES + 1], why[400];

	pps_connection_sanitize(text, sizeof(text), bye->text, bye->text_len);
	snprintf(why, sizeof(why), "server said BYE (%s%s%s)",
	         pps_wire_bye_reason_name(bye->reason), text[0] ? ": " : "", text);
	c->bye_reason = bye->reason;
	ended(c, why, bye->reason != PPS_WIRE_BYE_NORMAL || !c->streaming);
}

/* The server asks us to prove the token: HMAC over its nonce, never the
 * token itself. 0, or -EPROTO with the reason in @err. */
static int
answer_challenge(pps_connection_t *c, const pps_wire_challenge_t *challenge, char *err,
                 size_t err_size)
{
	pps_wire_record_t auth = {.kind = PPS_WIRE_AUTH};
	const char *token = c->params.access_token;

	if (!token || !token[0] || c->answered || c->streaming) {
		snprintf(err, err_size, "unexpected CHALLENGE%s",
		         !token || !token[0] ? " (no client.access_token, none asked for)" : "");
		return -EPROTO;
	}
	c->answered = true;
	auth.u.auth.method = PPS_WIRE_AUTH_HMAC_SHA256;
	pps_wire_auth_mac(token, strlen(token), challenge->nonce, auth.u.auth.mac);
	if (pps_connection_send(c, &auth) < 0) {
		snprintf(err, err_size, "cannot send AUTH");
		return -EPROTO;
	}
	return 0;
}

/* Wire bytes in (plain, or decrypted): records to the callbacks. False when
 * this connection ended meanwhile. */
static bool
handle_input(pps_connection_t *c, const uint8_t *data, size_t len)
{
	unsigned connection = c->connections;
	bool any = false;

	if (c->callbacks.bytes_cb)
		c->callbacks.bytes_cb(len, c->user);
	/* Callbacks may end this connection (and a reconnect may start the
	 * next): stop as soon as this one is gone. */
	while (c->connected && c->connections == connection) {
		pps_wire_record_t record;
		char err[256] = "";
		int ret = pps_wire_parser_next(c->parser, &data, &len, &record);

		if (ret == -EAGAIN) {
			/* Once per read, not per record: a flood of tiny
			 * records costs one timer update per read. */
			if (any)
				arm_data_timer(c);
			return true;
		}
		any = true;
		if (ret < 0) {
			char why[300];

			snprintf(why, sizeof(why), "protocol error from the server: %s",
			         pps_wire_parser_error(c->parser));
			ended(c, why, true);
			return false;
		}
		if (record.kind == PPS_WIRE_BYE) {
			handle_bye(c, &record.u.bye);
			return false;
		}
		/* A PONG answers one of our PINGs, once: others would only
		 * add clock events to the log at the server's pace. */
		if (record.kind == PPS_WIRE_CLOCK_PONG) {
			uint32_t seq = record.u.clock_pong.seq;

			if (seq <= c->pong_seq || seq > c->ping_seq)
				continue;
			c->pong_seq = seq;
		}
		if (record.kind == PPS_WIRE_CHALLENGE)
			ret = answer_challenge(c, &record.u.challenge, err, sizeof(err));
		else
			ret = c->callbacks.record_cb(&record, err, sizeof(err), c->user);
		if (ret < 0 && c->connected && c->connections == connection) {
			pps_connection_fail(c, err);
			return false;
		}
	}
	return false;
}

static void connected(pps_connection_t *c);

/*
 * The server answered a TLS ClientHello in plaintext: a plaintext server
 * (its BYE for our "garbage"), or a TLS server that refused us at accept
 * (server full), which says so before any handshake. Its BYE, if it is one,
 * says which.
 */
static void
plaintext_answer(pps_connection_t *c)
{
	uint8_t buf[1024];
	ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
	const uint8_t *data = buf;
	size_t len = n > 0 ? (size_t)n : 0;
	pps_wire_record_t record;
	char why[600], text[PPS_WIRE_MAX_REASON_BYTES + 1] = "";

	if (pps_wire_parser_next(c->parser, &data, &len, &record) == 0 &&
	    record.kind == PPS_WIRE_BYE) {
		if (record.u.bye.reason == PPS_WIRE_BYE_SERVER_FULL) {
			handle_bye(c, &record.u.bye);
			return;
		}
		pps_connection_sanitize(text, sizeof(text), record.u.bye.text,
		                        record.u.bye.text_len);
	}
	snprintf(why, sizeof(why),
	         "%s does not speak TLS: it answered in plaintext%s%s%s (client.tls = true "
	         "needs a server with tls_cert and tls_key)",
	         c->server, text[0] ? " (BYE: " : "", text, text[0] ? ")" : "");
	ended(c, why, true);
}

/* One step of the TLS handshake; HELLO once it is done. */
static void
tls_step(pps_connection_t *c)
{
	char err[300] = "", why[700];
	int ret = pps_tls_handshake(c->tls, err, sizeof(err));

	if (ret == 0) {
		connected(c);
		return;
	}
	if (ret == -EAGAIN) {
		if (pps_tls_want_write(c->tls) && event_add(c->tls_event, NULL) < 0)
			ended(c, "out of memory", true);
		return;
	}
	if (ret == -EPROTONOSUPPORT) {
		plaintext_answer(c);
		return;
	}
	snprintf(why, sizeof(why), "TLS handshake with %s failed: %s", c->server, err);
	ended(c, why, true);
}

static void
tls_event_cb(evutil_socket_t fd, short what, void *user)
{
	(void)fd;
	(void)what;
	tls_step(user);
}

/* One read, plain or through TLS: bytes, 0 when the server closed, -EAGAIN,
 * or a negative errno (-EPROTO: pps_tls_error() says why). */
static ssize_t
connection_recv(pps_connection_t *c, uint8_t *buf, size_t size)
{
	ssize_t n;

	if (c->tls)
		return pps_tls_read(c->tls, buf, size);
	n = recv(c->fd, buf, size, 0);
	if (n < 0)
		return errno == EINTR ? -EAGAIN : -errno;
	if (c->params.hello_flags & PPS_WIRE_HELLO_AUDIO_ONLY) {
		/* Acknowledge each audio frame at once, not after the delayed-ACK
		 * timer: the server sends the next frames on the connections
		 * that have nothing unacknowledged, and a prompt ACK also brings
		 * a loss to light sooner. The kernel clears it again, so it is
		 * set after every read. */
		int one = 1;

		(void)setsockopt(c->fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
	}
	return n;
}

static void
read_cb(evutil_socket_t fd, short what, void *user)
{
	pps_connection_t *c = user;
	uint8_t buf[65536];
	unsigned connection = c->connections;

	(void)fd;
	(void)what;
	if (c->tls && !pps_tls_handshake_done(c->tls)) {
		tls_step(c);
		return;
	}
	/* Plaintext: one read per wake-up (level-triggered). TLS: every whole
	 * record that is in, as the socket does not signal what OpenSSL
	 * already read from it. */
	do {
		ssize_t n = connection_recv(c, buf, sizeof(buf));
		char why[400];

		if (n == -EAGAIN)
			return;
		if (n == 0) {
			/* A server that ends its stream says BYE first: a close
			 * without it is a crash or a network failure. */
			ended(c,
			      c->streaming ? "the server closed the connection without BYE"
			                   : "the server closed the connection before STREAM_INFO",
			      true);
			return;
		}
		if (n < 0) {
			snprintf(why, sizeof(why), "connection to the server lost%s: %s",
			         c->streaming ? " without BYE" : " before STREAM_INFO",
			         c->tls && n == -EPROTO ? pps_tls_error(c->tls)
			                                : strerror((int)-n));
			ended(c, why, true);
			return;
		}
		if (!handle_input(c, buf, (size_t)n))
			return;
	} while (c->tls && c->connected && c->connections == connection);
}

static void
handshake_timeout_cb(evutil_socket_t fd, short what, void *user)
{
	pps_connection_t *c = user;
	char why[400];

	(void)fd;
	(void)what;
	snprintf(why, sizeof(why),
	         "%s: no stream within %lld ms of connecting (not a pps-server, or one that hangs)",
	         c->server, (long long)(c->params.handshake_timeout_us / 1000));
	ended(c, why, true);
}

static void
data_timeout_cb(evutil_socket_t fd, short what, void *user)
{
	pps_connection_t *c = user;
	char why[600];

	(void)fd;
	(void)what;
	snprintf(why, sizeof(why),
	         "%s went silent: no record from the server for %.1f s "
	         "(client.data_timeout_windows = %u windows of %.0f ms, at least "
	         "client.data_timeout_min_ms = %lld)",
	         c->server, (double)c->data_timeout_us / 1e6, c->params.data_timeout_windows,
	         (double)c->window_us / 1000.0, (long long)(c->params.data_timeout_min_us / 1000));
	ended(c, why, true);
}

static void
connected(pps_connection_t *c)
{
	pps_wire_record_t hello = {.kind = PPS_WIRE_HELLO};

	c->connected = true;
	hello.u.hello.protocol_version = PPS_WIRE_VERSION;
	hello.u.hello.max_record_bytes = (uint16_t)c->params.max_record_bytes;
	hello.u.hello.name_len =
	    (uint8_t)snprintf(hello.u.hello.name, sizeof(hello.u.hello.name), "%.64s", c->name);
	/* With a token we ask for a challenge; the token never goes out. */
	if (c->params.access_token && c->params.access_token[0])
		hello.u.hello.flags = PPS_WIRE_HELLO_CHALLENGE;
	hello.u.hello.flags |= c->params.hello_flags;
	if (c->stream[0]) {
		hello.u.hello.flags |= PPS_WIRE_HELLO_STREAM;
		hello.u.hello.stream_len = (uint8_t)snprintf(
		    hello.u.hello.stream, sizeof(hello.u.hello.stream), "%s", c->stream);
	}
	if (c->params.audio_pool && (c->params.hello_flags & PPS_WIRE_HELLO_AUDIO_ONLY)) {
		hello.u.hello.flags |= PPS_WIRE_HELLO_AUDIO_POOL;
		hello.u.hello.audio_pool = c->params.audio_pool;
	}
	if (pps_connection_send(c, &hello) < 0) {
		ended(c, "cannot send HELLO", true);
		return;
	}
	if (c->read_event)
		return; /* TLS: reading since the handshake began */
	c->read_event = event_new(c->base, c->fd, EV_READ | EV_PERSIST, read_cb, c);
	if (!c->read_event || event_add(c->read_event, NULL) < 0)
		ended(c, "out of memory", true);
}

/* TCP is up: HELLO, or first the TLS handshake. */
static void
tcp_connected(pps_connection_t *c)
{
	char host[256], port[16];
	const char *name = c->tls_server_name;

	if (!c->params.tls) {
		connected(c);
		return;
	}
	if (!name[0]) {
		/* Validated by the configuration loader already. */
		(void)pps_socket_split_address(c->address, host, sizeof(host), port, sizeof(port));
		name = host;
	}
	c->tls = pps_tls_new(c->tls_ctx, c->fd, name);
	c->tls_event = event_new(c->base, c->fd, EV_WRITE, tls_event_cb, c);
	c->read_event = event_new(c->base, c->fd, EV_READ | EV_PERSIST, read_cb, c);
	if (!c->tls || !c->tls_event || !c->read_event || event_add(c->read_event, NULL) < 0) {
		ended(c, "out of memory", true);
		return;
	}
	tls_step(c);
}

static void
connect_done_cb(evutil_socket_t fd, short what, void *user)
{
	pps_connection_t *c = user;
	int err = 0, r;
	char why[400];

	(void)what;
	event_free(c->connect_event);
	c->connect_event = NULL;
	if ((r = pps_socket_get_error(fd, &err)) < 0)
		err = -r;
	if (err) {
		snprintf(why, sizeof(why), "cannot connect to %s: %s", c->server, strerror(err));
		ended(c, why, true);
		return;
	}
	tcp_connected(c);
}

static void
start(pps_connection_t *c)
{
	char host[256], port[16], why[400];
	struct addrinfo hints = {
	    .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	struct timeval tv;
	int ret;

	c->connections++;
	c->attempts++;
	c->pong_seq = c->ping_seq;
	if (c->params.tls && !c->tls_ctx) {
		char err[360];

		c->tls_ctx = pps_tls_ctx_new_client(c->tls_ca, err, sizeof(err));
		if (!c->tls_ctx) {
			/* A configuration error: trying again cannot help. */
			snprintf(why, sizeof(why), "client.tls: %s", err);
			c->params.reconnect = false;
			ended(c, why, true);
			return;
		}
	}
	c->parser = pps_wire_parser_new(c->params.max_record_bytes);
	if (!c->parser) {
		ended(c, "out of memory", true);
		return;
	}
	pps_wire_parser_set_sender(c->parser, PPS_WIRE_FROM_SERVER);
	tv = pps_time_us_to_timeval(c->params.handshake_timeout_us);
	event_add(c->handshake_timer, &tv);
	/* Validated by the configuration loader already. */
	if (pps_socket_split_address(c->address, host, sizeof(host), port, sizeof(port)) < 0) {
		snprintf(why, sizeof(why), "bad server address %s", c->server);
		ended(c, why, true);
		return;
	}
	ret = getaddrinfo(host, port, &hints, &res);
	if (ret != 0) {
		snprintf(why, sizeof(why), "cannot resolve %s: %s", c->server, gai_strerror(ret));
		ended(c, why, true);
		return;
	}
	c->fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		snprintf(why, sizeof(why), "socket: %s", strerror(errno));
		freeaddrinfo(res);
		ended(c, why, true);
		return;
	}
	ret = connect(c->fd, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	if (ret == 0) {
		tcp_connected(c);
		return;
	}
	if (errno != EINPROGRESS) {
		snprintf(why, sizeof(why), "cannot connect to %s: %s", c->server, strerror(errno));
		ended(c, why, true);
		return;
	}
	c->connect_event = event_new(c->base, c->fd, EV_WRITE, connect_done_cb, c);
	if (!c->connect_event || event_add(c->connect_event, NULL) < 0)
		ended(c, "out of memory", true);
}

static void
reconnect_cb(evutil_socket_t fd, short what, void *user)
{
	(void)fd;
	(void)what;
	start(user);
}

pps_connection_t *
pps_connection_new(struct event_base *base, const pps_connection_params_t *params,
                   const pps_connection_callbacks_t *callbacks, void *user)
{
	pps_connection_t *c;

	if (!base || !params || !params->server || !params->clock_cb || !callbacks ||
	    !callbacks->record_cb || !callbacks->closed_cb || params->ping_interval_us <= 0 ||
	    params->handshake_timeout_us <= 0 || params->data_timeout_min_us < 0) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->base = base;
	c->params = *params;
	snprintf(c->server, sizeof(c->server), "%s", params->server);
	{
		char why[160];

		if (pps_stream_location_split(c->server, c->address, sizeof(c->address), c->stream,
		                              sizeof(c->stream), why, sizeof(why)) < 0) {
			free(c);
			errno = EINVAL;
			return NULL;
		}
	}
	snprintf(c->name, sizeof(c->name), "%s", params->name ? params->name : "");
	c->params.server = c->server;
	c->params.name = c->name;
	snprintf(c->tls_ca, sizeof(c->tls_ca), "%s", params->tls_ca ? params->tls_ca : "");
	snprintf(c->tls_server_name, sizeof(c->tls_server_name), "%s",
	         params->tls_server_name ? params->tls_server_name : "");
	c->params.tls_ca = c->tls_ca;
	c->params.tls_server_name = c->tls_server_name;
	c->callbacks = *callbacks;
	c->user = user;
	c->fd = -1;
	c->bye_reason = -1;
	c->reconnect_timer = evtimer_new(base, reconnect_cb, c);
	c->ping_timer = event_new(base, -1, EV_PERSIST, ping_cb, c);
	c->handshake_timer = evtimer_new(base, handshake_timeout_cb, c);
	c->data_timer = evtimer_new(base, data_timeout_cb, c);
	if (!c->reconnect_timer || !c->ping_timer || !c->handshake_timer || !c->data_timer) {
		pps_connection_free(c);
		errno = ENOMEM;
		return NULL;
	}
	return c;
}

void
pps_connection_start(pps_connection_t *c)
{
	start(c);
}

void
pps_connection_stop(pps_connection_t *c)
{
	c->stopped = true;
	event_del(c->reconnect_timer);
	if (c->connected) {
		pps_wire_record_t bye = {.kind = PPS_WIRE_BYE};

		bye.u.bye.reason = PPS_WIRE_BYE_NORMAL;
		pps_connection_send(c, &bye);
	}
	close_socket(c);
}

void
pps_connection_free(pps_connection_t *c)
{
	if (!c)
		return;
	c->stopped = true;
	close_socket(c);
	pps_tls_ctx_free(c->tls_ctx);
	pps_wire_parser_free(c->parser);
	if (c->reconnect_timer)
		event_free(c->reconnect_timer);
	if (c->ping_timer)
		event_free(c->ping_timer);
	if (c->handshake_timer)
		event_free(c->handshake_timer);
	if (c->data_timer)
		event_free(c->data_timer);
	free(c);
}
