/* SPDX-License-Identifier: MIT */
/*
 * The server library without a source or an encoder: sessions behind a
 * listener, fed through socketpairs (AF_UNIX where no data is streamed,
 * loopback TCP pairs where the MIN_BUF writer needs a TCP socket), with an
 * injected clock: handshake, handshake timeout, access token, slow-client
 * eviction, admission limits, the IDR recovery bounds (in time, per
 * client, in bits), and which clients' cut windows count for the B frames. No sleeps: the loop only
 * runs what is ready now.
 */
#include "pps-server-lib.h"
#include "pps-synth.h"
#include "pps-test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int64_t fake_now_us = 1700000000LL * 1000000;

static int64_t
fake_clock_cb(void *user)
{
	return fake_now_us;
}

static unsigned idr_count;

static void
count_idr_cb(void *user)
{
	idr_count++;
}

/* ---- fixtures ---------------------------------------------------------- */

static void
default_params(pps_listener_params_t *p)
{
	memset(p, 0, sizeof(*p));
	p->max_clients = 4;
	p->max_per_address = 4;
	p->recovery.min_interval_us = PPS_DEFAULT_RECOVERY_MIN_INTERVAL_US;
	p->recovery.client_interval_us = PPS_SESSION_LOSS_IDR_INTERVAL_US;
	p->recovery.budget_pct = 0;
	p->frame_duration_us = 33333;
	pps_minbuf_params_init(&p->session.transport);
	p->session.path.queue_target_us = 50000;
	p->session.sched.latency_budget_us = 500000;
	p->session.sched.max_windows = 8;
	p->session.hello_timeout_us = 5000000;
	p->session.evict_after_us = 3000000;
	p->session.clock_cb = fake_clock_cb;
	p->session.stream_info = (pps_wire_stream_info_t){
	    .protocol_version = PPS_WIRE_VERSION,
	    .codec = 1,
	    .width = 640,
	    .height = 480,
	    .base_width = 320,
	    .base_height = 240,
	    .fps_num = 30,
	    .fps_den = 1,
	    .window_frames = 8,
	    .temporal_layers = 3,
	    .quality_layers = 2,
	    .latency_budget_ms = 500,
	    .gop_frames = 60,
	};
}

static struct sockaddr_in
addr_of(const char *ip, unsigned port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};

	inet_pton(AF_INET, ip, &sin.sin_addr);
	return sin;
}

static void
unix_pair(int fds[2])
{
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
}

/* A client end and its parser. */
typedef struct {
	int fd;
	pps_wire_parser_t *parser;
	bool got_stream_info;
	unsigned pongs;
	bool got_bye;
	unsigned bye_reason;
	bool got_challenge;
	pps_wire_challenge_t challenge;
	bool eof;
} peer_t;

static void
peer_init(peer_t *p, int fd)
{
	memset(p, 0, sizeof(*p));
	p->fd = fd;
	p->parser = pps_wire_parser_new(PPS_WIRE_DEFAULT_MAX_RECORD_BYTES);
	REQUIRE(p->parser);
}

static void
peer_close(peer_t *p)
{
	pps_wire_parser_free(p->parser);
	close(p->fd);
}

static void
peer_send(peer_t *p, const pps_wire_record_t *r)
{
	uint8_t buf[512];
	size_t n;

	REQUIRE(pps_wire_encode(r, buf, sizeof(buf), &n) == 0);
	REQUIRE(send(p->fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n);
}

static void
peer_hello(peer_t *p, bool challenge)
{
	pps_wire_record_t r = {.kind = PPS_WIRE_HELLO};

	r.u.hello.protocol_version = PPS_WIRE_VERSION;
	if (challenge)
		r.u.hello.flags = PPS_WIRE_HELLO_CHALLENGE;
	peer_send(p, &r);
}

/* Reads whatever the server wrote so far. */
static void
peer_read(peer_t *p)
{
	for (;;) {
		uint8_t buf[4096];
		ssize_t n = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT);
		const uint8_t *data = buf;
		size_t len;
		pps_wire_record_t r;

		if (n == 0)
			p->eof = true;
		if (n <= 0)
			return;
		len = (size_t)n;
		while (pps_wire_parser_next(p->parser, &data, &len, &r) == 0) {
			if (r.kind == PPS_WIRE_STREAM_INFO)
				p->got_stream_info = true;
			if (r.kind == PPS_WIRE_CLOCK_PONG)
				p->pongs++;
			if (r.kind == PPS_WIRE_CHALLENGE) {
				p->got_challenge = true;
				p->challenge = r.u.challenge;
			}
			if (r.kind == PPS_WIRE_BYE) {
				p->got_bye = true;
				p->bye_reason = r.u.bye.reason;
			}
		}
	}
}

static void
run_loop(struct event_base *base)
{
	/* What is readable now, and the zero-delay events it schedules. */
	for (int i = 0; i < 4; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
}

typedef struct {
	struct event_base *base;
	pps_listener_t *listener;
} fixture_t;

static void
fixture_new(fixture_t *f, const pps_listener_params_t *params)
{
	f->base = event_base_new();
	REQUIRE(f->base);
	idr_count = 0;
	f->listener = pps_listener_new(f->base, params,
	                               &(pps_listener_callbacks_t){.idr_cb = count_idr_cb}, NULL);
	REQUIRE(f->listener);
}

static void
fixture_free(fixture_t *f)
{
	pps_listener_free(f->listener);
	event_base_free(f->base);
}

/* Adds the server end of a new pair from @ip; the client end goes to @peer. */
static int
connect_peer(fixture_t *f, peer_t *peer, const char *ip, bool tcp)
{
	int fds[2];
	struct sockaddr_in sin = addr_of(ip, 40000);
	int ret;

	if (tcp)
		pps_test_tcp_pair(fds);
	else
		unix_pair(fds);
	peer_init(peer, fds[0]);
	ret = pps_listener_add(f->listener, fds[1], (struct sockaddr *)&sin, sizeof(sin));
	run_loop(f->base);
	return ret;
}

static pps_listener_stats_t
stats_of(fixture_t *f)
{
	pps_listener_stats_t st;

	pps_listener_get_stats(f->listener, &st);
	return st;
}

/* ---- tests ------------------------------------------------------------- */

static void
test_handshake_ok(void)
{
	pps_listener_params_t params;
	fixture_t f;
	peer_t c;

	default_params(&params);
	fixture_new(&f, &params);
	CHECK_EQ_INT(connect_peer(&f, &c, "10.0.0.1", true), 0);
	CHECK_EQ_INT(stats_of(&f).sessions, 1);
	CHECK_EQ_INT(stats_of(&f).streaming, 0);
	peer_hello(&c, false);
	run_loop(f.base);
	peer_read(&c);
	CHECK(c.got_stream_info);
	CHECK(!c.got_bye);
	CHECK_EQ_INT(stats_of(&f).streaming, 1);
	CHECK_EQ_INT(idr_count, 1); /* a joiner needs an IDR */
	peer_close(&c);
	fixture_free(&f);
}

/* A copy that rests, of a stream its client already decodes, asks no IDR of
 * its own; a copy with no stream of its client's beside it does, and so does
 * one that carries every window (no copy-rest bit). */
static void
test_copy_join_no_idr(void)
{
	pps_listener_params_t params;
	pps_wire_record_t r = {.kind = PPS_WIRE_HELLO};
	fixture_t f;
	peer_t own, copy, lone, always;

	default_params(&params);
	params.session.copy_rest = true;
	fixture_new(&f, &params);
	r.u.hello.protocol_version = PPS_WIRE_VERSION;
	CHECK_EQ_INT(connect_peer(&f, &own, "10.0.0.1", true), 0);
	peer_hello(&own, false);
	run_loop(f.base);
	CHECK_EQ_INT(idr_count, 1);
	fake_now_us += 10000000; /* past the recovery's bounds */
	r.u.hello.flags = PPS_WIRE_HELLO_COPY | PPS_WIRE_HELLO_COPY_REST;
	CHECK_EQ_INT(connect_peer(&f, &copy, "10.0.0.1", true), 0);
	peer_send(&copy, &r);
	run_loop(f.base);
	CHECK_EQ_INT(stats_of(&f).streaming, 2);
	CHECK_EQ_INT(idr_count, 1);
	fake_now_us += 10000000;
	CHECK_EQ_INT(connect_peer(&f, &lone, "10.0.0.2", true), 0);
	peer_send(&lone, &r);
	run_loop(f.base);
	CHECK_EQ_INT(stats_of(&f).streaming, 3);
	CHECK_EQ_INT(idr_count, 2);
	fake_now_us += 10000000;
	r.u.hello.flags = PPS_WIRE_HELLO_COPY;
	CHECK_EQ_INT(connect_peer(&f, &always, "10.0.0.1", true), 0);
	peer_send(&always, &r);
	run_loop(f.base);
	CHECK_EQ_INT(stats_of(&f).streaming, 4);
	CHECK_EQ_INT(idr_count, 3);
	peer_close(&own);
	peer_close(&copy);
	peer_close(&lone);
	peer_close(&always);
	fixture_free(&f);
}

/* An awake copy's check: a quarter of the delivered bytes retransmitted
 * with a queue fails it, the same without a queue (a lossy path) or below
 * the quarter passes, too little delivered decides nothing; the rest after
 * a failure doubles to its bound. */
static void
test_copy_check(void)
{
	const uint32_t mss = 1448, queue = PPS_LISTENER_COPY_CALM_QUEUE_US;
	const uint64_t bytes = 100 * 1448;

	CHECK_EQ_INT(pps_listener_copy_check(40, bytes, mss, 30000), PPS_COPY_CHECK_FAILED);
	CHECK_EQ_INT(pps_listener_copy_check(26, bytes, mss, queue), PPS_COPY_CHECK_FAILED);
	CHECK_EQ_INT(pps_listener_copy_check(25, bytes, mss, 30000), PPS_COPY_CHECK_PASSED);
	CHECK_EQ_INT(pps_listener_copy_check(10, bytes, mss, 30000), PPS_COPY_CHECK_PASSED);
	CHECK_EQ_INT(pps_listener_copy_check(40, bytes, mss, queue - 1), PPS_COPY_CHECK_PASSED);
	CHECK_EQ_INT(pps_listener_copy_check(0, bytes, mss, 0), PPS_COPY_CHECK_PASSED);
	CHECK_EQ_INT(pps_listener_copy_check(15, 15 * 1448, mss, 30000), PPS_COPY_CHECK_UNDECIDED);
	CHECK_EQ_INT(pps_listener_copy_check(15, 16 * 1448, mss, 30000), PPS_COPY_CHECK_FAILED);
	CHECK(pps_listener_copy_next_hold_us(0) == PPS_LISTENER_COPY_HOLD_US);
	CHECK(pps_listener_copy_next_hold_us(PPS_LISTENER_COPY_HOLD_US) ==
	      2 * PPS_LISTENER_COPY_HOLD_US);
	int64_t hold = 0;
	for (int i = 0; i < 20; i++)
		hold = pps_listener_copy_next_hold_us(hold);
	CHECK(hold == PPS_LISTENER_COPY_HOLD_MAX_US);
}

/* Copies do not take client slots: a server of one client admits its copies
 * (up to PPS_LISTENER_COPIES_PER_CLIENT) and still refuses a second client. */
static void
test_copies_take_no_slot(void)
{
	pps_listener_params_t params;
	pps_wire_record_t r = {.kind = PPS_WIRE_HELLO};
	fixture_t f;
	peer_t own, copy[PPS_LISTENER_COPIES_PER_CLIENT + 1], other;

	default_params(&params);
	params.max_clients = 1;
	params.max_per_address = 8;
	fixture_new(&f, &params);
	r.u.hello.protocol_version = PPS_WIRE_VERSION;
	r.u.hello.flags = PPS_WIRE_HELLO_COPY;
	CHECK_EQ_INT(connect_peer(&f, &own, "10.0.0.1", true), 0);
	peer_hello(&own, false);
	run_loop(f.base);
	for (int i = 0; i <= PPS_LISTENER_COPIES_PER_CLIENT; i++) {
		CHECK_EQ_INT(connect_peer(&f, &copy[i], "10.0.0.1", true), 0);
		peer_send(&copy[i], &r);
		run_loop(f.base);
		peer_read(&copy[i]);
		/* The last one is one too many. */
		CHECK(copy[i].got_stream_info == (i < PPS_LISTENER_COPIES_PER_CLIENT));
	}
	CHECK_EQ_INT(stats_of(&f).streaming, 1 + PPS_LISTENER_COPIES_PER_CLIENT);
	CHECK_EQ_INT(connect_peer(&f, &other, "10.0.0.2", true), -EBUSY);
	peer_close(&other);
	/* From the client's own address, a second client is refused at HELLO. */
	CHECK_EQ_INT(connect_peer(&f, &other, "10.0.0.1", true), 0);
	peer_hello(&other, false);
	run_loop(f.base);
	peer_read(&other);
	CHECK(!other.got_stream_info && other.got_bye);
	CHECK_EQ_INT(stats_of(&f).streaming, 1 + PPS_LISTENER_COPIES_PER_CLIENT);
	peer_close(&own);
	for (int i = 0; i <= PPS_LISTENER_COPIES_PER_CLIENT; i++)
		peer_close(&copy[i]);
	peer_close(&other);
	fixture_free(&f);
}

static void
test_handshake_timeout(void)
{
	pps_listener_params_t params;
	fixture_t f;
	peer_t c;

	default_params(&params);
	fixture_new(&f, &params);
	CHECK_EQ_INT(connect_peer(&f, &c, "10.0.0.1", false), 0);
	fake_now_us += 4900000;
	pps_listener_check_timeouts(f.listener);
	run_loop(f.base);
	CHECK_EQ_INT(stats_of(&f).sessions, 1);
	fake_now_us += 200000;
	pps_listener_check_timeouts(f.listener);
	run_loop(f.base);
	peer_read(&c);
	/* It said nothing: closed without a BYE it may not understand. */
	CHECK(c.eof && !c.got_bye);
	CHECK_EQ_INT(stats_of(&f).sessions, 0);
	CHECK_EQ_INT(stats_of(&f).handshakes_dropped, 1);
	peer_close(&c);

	/* A HELLO begun and not finished: told why. */
	CHECK_EQ_INT(connect_peer(&f, &c, "10.0.0.1", false), 0);
	REQUIRE(send(c.fd, "\x01", 1, MSG_NOSIGNAL) == 1);
	run_loop(f.base);
	fake_now_us += 5100000;
	pps_listener_check_timeouts(f.listener);
	run_loop(f.base);
	peer_read(&c);
	CHECK(c.got_bye);
	CHECK_EQ_INT(c.bye_reason, PPS_WIRE_BYE_PROTOCOL);
	CHECK_EQ_INT(stats_of(&f).handshakes_dropped, 2);
	peer_close(&c);
	fixture_free(&f);
}

/* Bytes that are not our protocol (not even its version byte) before HELLO:
 * refused, and counted as a dropped handshake like any other. */
static void
test_garbage_counted(void)
{
	static const uint8_t garbage[] = "\xff\xfe\x00 not our protocol";
	pps_listener_params_t params;
	fixture_t f;
	peer_t c;

	default_params(&params);
	fixture_new(&f, &params);
	CHECK_EQ_INT(connect_peer(&f, &c, "10.0.0.1", false), 0);
	CHECK(write(c.fd, garbage, sizeof(garbage)) == (ssize_t)sizeof(garbage));
	run_loop(f.base);
	peer_read(&c);
	CHECK(c.got_bye);
	CHECK_EQ_INT(c.bye_reason, PPS_WIRE_BYE_VERSION);
	CHECK_EQ_INT(stats_of(&f).sessions, 0);
	CHECK_EQ_INT(stats_of(&f).handshakes_dropped, 1);
	peer_close(&c);
	fixture_free(&f);
}

/* Answers a challenge with the MAC of @token. */
static void
peer_auth(peer_t *p, const char *token)
{
	pps_wire_record_t r = {.kind = PPS_WIRE_AUTH};

	r.u.auth.method = PPS_WIRE_AUTH_HMAC_SHA256;
	pps_wire_auth_mac(token, strlen(token), p->challenge.nonce, r.u.auth.mac);
	peer_send(p, &r);
}

static void
test_access_token(void)
{
	pps_listener_params_t params;
	fixture_t f;
	peer_t none, plain, wrong, right;

	default_params(&params);
	params.max_per_address = 8;
	params.session.access_token = "s3cret";
	fixture_new(&f, &params);

	/* No challenge asked for: refused, whatever HELLO carries. */
	connect_peer(&f, &none, "10.0.0.1", false);
	peer_hello(&none, false);
	connect_peer(&f, &plain, "10.0.0.1", false);
	{
		pps_wire_record_t r = {.kind = PPS_WIRE_HELLO};

		r.u.hello.protocol_version = PPS_WIRE_VERSION;
		r.u.hello.auth_len = 6;
		memcpy(r.u.hello.auth, "s3cret", 6);
		peer_send(&plain, &r);
	}
	run_loop(f.base);
	peer_read(&none);
	peer_read(&plain);
	CHECK(none.got_bye && none.bye_reason == PPS_WIRE_BYE_UNAUTHORIZED);
	CHECK(plain.got_bye && plain.bye_reason == PPS_WIRE_BYE_UNAUTHORIZED);
	CHECK(!plain.got_stream_info);

	/* A MAC of another token: refused. */
	connect_peer(&f, &wrong, "10.0.0.1", true);
	peer_hello(&wrong, true);
	run_loop(f.base);
	peer_read(&wrong);
	REQUIRE(wrong.got_challenge);
	peer_auth(&wrong, "guess");
	run_loop(f.base);
	peer_read(&wrong);
	CHECK(wrong.got_bye && wrong.bye_reason == PPS_WIRE_BYE_UNAUTHORIZED);
	CHECK(!wrong.got_stream_info);

	/* The right token's MAC over this connection's nonce: streams. */
	connect_peer(&f, &right, "10.0.0.1", true);
	peer_hello(&right, true);
	run_loop(f.base);
	peer_read(&right);
	REQUIRE(right.got_challenge);
	CHECK(memcmp(right.challenge.nonce, wrong.challenge.nonce, PPS_WIRE_NONCE_BYTES) != 0);
	peer_auth(&right, "s3cret");
	run_loop(f.base);
	peer_read(&right);
	CHECK(right.got_stream_info);
	CHECK(!right.got_bye);
	CHECK_EQ_INT(stats_of(&f).clients_unauthorized, 3);
	CHECK_EQ_INT(stats_of(&f).streaming, 1);
	peer_close(&none);
	peer_close(&plain);
	peer_close(&wrong);
	peer_close(&right);
	fixture_free(&f);
}

static void
test_slow_client_evicted(void)
{
	pps_listener_params_t params;
	fixture_t f;
	peer_t c;

	default_params(&params);
	fixture_new(&f, &params);
	connect_peer(&f, &c, "10.0.0.1", true);
	peer_hello(&c, false);
	run_loop(f.base);
	CHECK_EQ_INT(stats_of(&f).streaming, 1);
	/* It took STREAM_INFO, then nothing for less than evict_after: kept. */
	fake_now_us += 2900000;
	pps_listener_check_timeouts(f.listener);
	run_loop(f.base);
	CHECK_EQ_INT(stats_of(&f).streaming, 1);
	fake_now_us += 200000;
	pps_listener_check_timeouts(f.listener);
	run_loop(f.base);
	peer_read(&c);
	CHECK(c.got_stream_info);
	CHECK(c.got_bye);
	CHECK_EQ_INT(c.bye_reason, PPS_WIRE_BYE_TOO_SLOW);
	CHECK_EQ_INT(stats_of(&f).sessions, 0);
	CHECK_EQ_INT(stats_of(&f).clients_evicted, 1);
	peer_close(&c);
	fixture_free(&f);
}

/* A full server: a newcomer takes the slot of a client that took no data for
 * PPS_LISTENER_DISPLACE_STALLED_US (slow readers that rejoin after every
 * eviction would otherwise hold their slots for good); not before. */
static void
test_stalled_client_displaced(void)
{
	pps_listener_params_t params;
	fixture_t f;
	peer_t a, b, c;

	default_params(&params);
	params.max_clients = 1;
	fixture_new(&f, &params);
	connect_peer(&f, &a, "10.0.0.1", true);
	peer_hello(&a, false);
	run_loop(f.base);
	CHECK_EQ_INT(stats_of(&f).streaming, 1);
	/* Stalled for less than the bound: the newcomer is refused. */
	fake_now_us += PPS_LISTENER_DISPLACE_STALLED_US / 2;
	CHECK_EQ_INT(connect_peer(&f, &b, "10.0.0.2", true), -EBUSY);
	peer_read(&b);
	CHECK(b.got_bye && b.bye_reason == PPS_WIRE_BYE_SERVER_FULL);
	CHECK_EQ_INT(stats_of(&f).clients_refused, 1);
	/* Past it: admitted in place of the stalled one, who is told why. */
	fake_now_us += PPS_LISTENER_DISPLACE_STALLED_US;
	CHECK_EQ_INT(connect_peer(&f, &c, "10.0.0.3", true), 0);
	peer_hello(&c, false);
	run_loop(f.base);
	peer_read(&a);
	peer_read(&c);
	CHECK(a.got_bye && a.bye_reason == PPS_WIRE_BYE_TOO_SLOW);
	CHECK(c.got_stream_info && !c.got_bye);
	CHECK_EQ_INT(stats_of(&f).streaming, 1);
	CHECK_EQ_INT(stats_of(&f).clients_evicted, 1);
	CHECK_EQ_INT(stats_of(&f).clients_refused, 1);
	peer_close(&a);
	peer_close(&b);
	peer_close(&c);
	fixture_free(&f);
}

static void
test_limits(void)
{
	pps_listener_params_t params;
	fixture_t f;
	peer_t a, b, c, d, e, g;

	/* max_clients counts streaming clients; a third is refused at accept. */
	default_params(&params);
	params.max_clients = 2;
	fixture_new(&f, &params);
	connect_peer(&f, &a, "10.0.0.1", true);
	connect_peer(&f, &b, "10.0.0.2", true);
	peer_hello(&a, false);
	peer_hello(&b, false);
	run_loop(f.base);
	CHECK_EQ_INT(stats_of(&f).streaming, 2);
	CHECK_EQ_INT(connect_peer(&f, &c, "10.0.0.3", false), -EBUSY);
	peer_read(&c);
	CHECK(c.got_bye && c.bye_reason == PPS_WIRE_BYE_SERVER_FULL);
	CHECK_EQ_INT(stats_of(&f).clients_refused, 1);
	peer_close(&a);
	peer_close(&b);
	peer_close(&c);
	fixture_free(&f);

	/* Admission at HELLO: two in their handshake, one slot. */
	default_params(&params);
	params.max_clients = 1;
	params.max_pending = 4;
	fixture_new(&f, &params);
	connect_peer(&f, &a, "10.0.0.1", true);
	connect_peer(&f, &b, "10.0.0.2", true);
	peer_hello(&a, false);
	run_loop(f.base);
	peer_hello(&b, false);
	run_loop(f.base);
	peer_read(&a);
	peer_read(&b);
	CHECK(a.got_stream_info);
	CHECK(b.got_bye && b.bye_reason == PPS_WIRE_BYE_SERVER_FULL);
	peer_close(&a);
	peer_close(&b);
	fixture_free(&f);

	/* Per address, in any state. */
	default_params(&params);
	params.max_per_address = 2;
	fixture_new(&f, &params);
	CHECK_EQ_INT(connect_peer(&f, &a, "10.0.0.5", false), 0);
	CHECK_EQ_INT(connect_peer(&f, &b, "10.0.0.5", false), 0);
	CHECK_EQ_INT(connect_peer(&f, &c, "10.0.0.5", false), -EBUSY);
	CHECK_EQ_INT(connect_peer(&f, &d, "10.0.0.6", false), 0);
	peer_read(&c);
	CHECK(c.got_bye && c.bye_reason == PPS_WIRE_BYE_SERVER_FULL);
	CHECK_EQ_INT(stats_of(&f).sessions, 3);
	peer_close(&a);
	peer_close(&b);
	peer_close(&c);
	peer_close(&d);
	fixture_free(&f);

	/* Pending handshakes bounded apart: the oldest goes for a newcomer. */
	default_params(&params);
	params.max_pending = 2;
	fixture_new(&f, &params);
	connect_peer(&f, &e, "10.0.0.1", false);
	connect_peer(&f, &g, "10.0.0.2", false);
	connect_peer(&f, &a, "10.0.0.3", false);
	peer_read(&e);
	peer_read(&g);
	CHECK(e.eof && !e.got_bye);
	CHECK(!g.eof);
	CHECK_EQ_INT(stats_of(&f).sessions, 2);
	CHECK_EQ_INT(stats_of(&f).handshakes_dropped, 1);
	peer_close(&e);
	peer_close(&g);
	peer_close(&a);
	fixture_free(&f);
}

/* One guess from @ip: connect, HELLO, and AUTH with @token if challenged.
 * 1: streams, 0: refused after its AUTH was checked, -1: refused untried. */
static int
guess(fixture_t *f, const char *ip, const char *token)
{
	peer_t p;
	int ret;

	connect_peer(f, &p, ip, true);
	peer_hello(&p, true);
	run_loop(f->base);
	peer_read(&p);
	if (!p.got_challenge) {
		CHECK(p.got_bye && p.bye_reason == PPS_WIRE_BYE_UNAUTHORIZED);
		peer_close(&p);
		return -1;
	}
	peer_auth(&p, token);
	run_loop(f->base);
	peer_read(&p);
	ret = p.got_stream_info ? 1 : 0;
	CHECK(ret == 1 || (p.got_bye && p.bye_reason == PPS_WIRE_BYE_UNAUTHORIZED));
	peer_close(&p);
	run_loop(f->base);
	return ret;
}

/*
 * Guessing the token: after a few wrong ones an address gets a try only as
 * often as PPS_LISTENER_AUTH_TRIES_PER_S; an honest client elsewhere is
 * admitted meanwhile, and one at the same address once a try is due.
 */
static void
test_auth_backoff(void)
{
	pps_listener_params_t params;
	fixture_t f;
	int tried = 0, untried = 0;

	default_params(&params);
	params.max_clients = 8;
	params.session.access_token = "s3cret";
	fixture_new(&f, &params);
	for (int i = 0; i < 50; i++) {
		int r = guess(&f, "10.0.0.66", "guess");

		CHECK(r <= 0);
		tried += r == 0;
		untried += r < 0;
	}
	CHECK_EQ_INT(tried, PPS_LISTENER_AUTH_BURST);
	CHECK_EQ_INT(untried, 50 - PPS_LISTENER_AUTH_BURST);
	CHECK_EQ_INT(stats_of(&f).auth_throttled, 50 - PPS_LISTENER_AUTH_BURST);
	/* Elsewhere, the right token streams at once. */
	CHECK_EQ_INT(guess(&f, "10.0.0.67", "s3cret"), 1);
	/* Ten seconds of guessing, one every 10 ms of the fake clock: tries
	 * at the refill rate only. */
	tried = 0;
	for (int i = 0; i < 1000; i++) {
		fake_now_us += 10000;
		tried += guess(&f, "10.0.0.66", "guess") == 0;
	}
	CHECK(tried >= 10 * PPS_LISTENER_AUTH_TRIES_PER_S - 1 &&
	      tried <= 10 * PPS_LISTENER_AUTH_TRIES_PER_S + 1);
	/* The same address with the right token, once a try is due. */
	fake_now_us += 1000000 / PPS_LISTENER_AUTH_TRIES_PER_S;
	CHECK_EQ_INT(guess(&f, "10.0.0.66", "s3cret"), 1);
	fixture_free(&f);
}

/* Adds the server end of a new pair from @ip without running the loop: a
 * burst of accepts before any read event is served. */
static int
add_unread(fixture_t *f, peer_t *peer, const char *ip, bool tcp)
{
	int fds[2];
	struct sockaddr_in sin = addr_of(ip, 40000);

	if (tcp)
		pps_test_tcp_pair(fds);
	else
		unix_pair(fds);
	peer_init(peer, fds[0]);
	return pps_listener_add(f->listener, fds[1], (struct sockaddr *)&sin, sizeof(sin));
}

/*
 * A connect flood from many addresses, faster than the loop reads: the
 * clients that have said something (a whole HELLO, or the first bytes of a
 * handshake, read or not yet) stay in the pool; the silent flood pushes out
 * only itself.
 */
static void
test_pool_flood(void)
{
	enum { ADDRESSES = 16, PER_ADDRESS = 4, ROUNDS = 50 };
	static peer_t flood[ADDRESSES * PER_ADDRESS];
	pps_listener_params_t params;
	fixture_t f;
	peer_t hello, partial, late;
	char ip[32];

	default_params(&params);
	params.max_pending = 8;
	fixture_new(&f, &params);
	for (size_t i = 0; i < ADDRESSES * PER_ADDRESS; i++)
		flood[i].fd = -1;
	/* A client whose HELLO is in the socket, not read yet; one half-way
	 * through its handshake (read already). */
	CHECK_EQ_INT(add_unread(&f, &hello, "10.1.0.1", true), 0);
	peer_hello(&hello, false);
	CHECK_EQ_INT(connect_peer(&f, &partial, "10.1.0.2", false), 0);
	REQUIRE(send(partial.fd, "\x01", 1, MSG_NOSIGNAL) == 1);
	run_loop(f.base);
	/* The flood: each connection re-opened as soon as it is dropped (here:
	 * every round), all accepted before the loop reads anything. */
	for (int round = 0; round < ROUNDS; round++) {
		for (size_t i = 0; i < ADDRESSES * PER_ADDRESS; i++) {
			if (flood[i].fd >= 0)
				peer_close(&flood[i]);
			snprintf(ip, sizeof(ip), "10.2.0.%zu", i / PER_ADDRESS + 1);
			flood[i].fd = -1;
			add_unread(&f, &flood[i], ip, false);
		}
		if (round == ROUNDS / 2) {
			/* A newcomer in the middle of it, HELLO sent with its connect. */
			CHECK_EQ_INT(add_unread(&f, &late, "10.1.0.3", true), 0);
			peer_hello(&late, false);
		}
	}
	run_loop(f.base);
	peer_read(&hello);
	peer_read(&late);
	CHECK(hello.got_stream_info && !hello.got_bye);
	CHECK(late.got_stream_info && !late.got_bye);
	peer_read(&partial);
	CHECK(!partial.got_bye && !partial.eof);
	CHECK_EQ_INT(stats_of(&f).streaming, 2);
	CHECK(stats_of(&f).sessions <= 2 + params.max_pending);
	/* Clients served are the two; the flood is only connections. */
	CHECK_EQ_INT(stats_of(&f).clients_total, 2);
	CHECK(stats_of(&f).connections_total > 1000);
	for (size_t i = 0; i < ADDRESSES * PER_ADDRESS; i++)
		if (flood[i].fd >= 0)
			peer_close(&flood[i]);
	peer_close(&hello);
	peer_close(&partial);
	peer_close(&late);

	/* One address cannot take the pool from another: its own newcomers go. */
	peer_t one[12], other;
	CHECK_EQ_INT(add_unread(&f, &other, "10.3.0.1", false), 0);
	for (int i = 0; i < 12; i++)
		add_unread(&f, &one[i], "10.3.0.2", false);
	run_loop(f.base);
	peer_read(&other);
	CHECK(!other.eof);
	for (int i = 0; i < 12; i++)
		peer_close(&one[i]);
	peer_close(&other);
	fixture_free(&f);
}

/* A PING flood is not a PONG flood: a burst is answered, then a rate; the
 * client streams on. */
static void
test_ping_flood(void)
{
	pps_listener_params_t params;
	fixture_t f;
	peer_t p;
	pps_wire_record_t ping = {.kind = PPS_WIRE_CLOCK_PING};

	default_params(&params);
	fixture_new(&f, &params);
	connect_peer(&f, &p, "10.0.0.1", true);
	peer_hello(&p, false);
	run_loop(f.base);
	for (int i = 0; i < 100; i++) {
		ping.u.clock_ping.seq = (uint32_t)i;
		peer_send(&p, &ping);
	}
	run_loop(f.base);
	peer_read(&p);
	CHECK(p.got_stream_info && !p.got_bye);
	CHECK_EQ_INT(p.pongs, PPS_SESSION_PONG_BURST);
	/* A second later: a second's worth more. */
	fake_now_us += 1000000;
	for (int i = 0; i < 100; i++)
		peer_send(&p, &ping);
	run_loop(f.base);
	peer_read(&p);
	CHECK_EQ_INT(p.pongs, PPS_SESSION_PONG_BURST + PPS_SESSION_PONGS_PER_S);
	CHECK(!p.got_bye && !p.eof);
	peer_close(&p);
	fixture_free(&f);
}

/* A burst of connects waiting in the backlog: one wake-up of the listening
 * socket accepts a bounded batch, the next wake-ups the rest. */
static void
test_accept_batches(void)
{
	enum { CONNECTS = 100 };
	pps_listener_params_t params;
	fixture_t f;
	int fds[CONNECTS];
	unsigned port = 0;
	char err[256];
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

	default_params(&params);
	params.max_per_address = 2 * CONNECTS;
	params.max_pending = 2 * CONNECTS;
	fixture_new(&f, &params);
	REQUIRE(pps_listener_listen(f.listener, "127.0.0.1:0", &port, err, sizeof(err)) == 0);
	sin.sin_port = htons((uint16_t)port);
	/* Each says its first byte: the kernel hands a connection over then. */
	for (int i = 0; i < CONNECTS; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		REQUIRE(fds[i] >= 0 && connect(fds[i], (struct sockaddr *)&sin, sizeof(sin)) == 0);
		REQUIRE(write(fds[i], "\1", 1) == 1);
	}
	event_base_loop(f.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	printf("first wake-up: %llu of %d accepted\n",
	       (unsigned long long)stats_of(&f).connections_total, CONNECTS);
	CHECK(stats_of(&f).connections_total >= 1 &&
	      stats_of(&f).connections_total <= PPS_LISTENER_ACCEPTS_PER_WAKEUP);
	for (int pass = 0; pass < 100 && stats_of(&f).connections_total < CONNECTS; pass++)
		event_base_loop(f.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	CHECK_EQ_INT(stats_of(&f).connections_total, CONNECTS);
	for (int i = 0; i < CONNECTS; i++)
		close(fds[i]);
	fixture_free(&f);
}

/* A connect churn (connections reset before they said anything) never
 * reaches the loop: accepting is deferred until a connection's first bytes,
 * and a reset ends it in the kernel. The one that speaks is the only one
 * accepted, although it connected last (the accept queue is in order). */
static void
test_accept_deferred(void)
{
	enum { CHURN = 50 };
	pps_listener_params_t params;
	fixture_t f;
	int speaker;
	unsigned port = 0;
	char err[256];
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct linger reset = {.l_onoff = 1, .l_linger = 0};

	default_params(&params);
	params.max_per_address = 2 * CHURN;
	params.max_pending = 2 * CHURN;
	fixture_new(&f, &params);
	REQUIRE(pps_listener_listen(f.listener, "127.0.0.1:0", &port, err, sizeof(err)) == 0);
	sin.sin_port = htons((uint16_t)port);
	for (int i = 0; i < CHURN; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		REQUIRE(fd >= 0 && connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
		REQUIRE(setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)) == 0);
		close(fd);
	}
	speaker = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(speaker >= 0 && connect(speaker, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	REQUIRE(write(speaker, "\1", 1) == 1);
	for (int pass = 0; pass < 1000 && stats_of(&f).connections_total == 0; pass++)
		event_base_loop(f.base, EVLOOP_ONCE);
	for (int pass = 0; pass < 10; pass++)
		event_base_loop(f.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	printf("after %d reset connects and one that spoke: %llu accepted\n", CHURN,
	       (unsigned long long)stats_of(&f).connections_total);
	CHECK_EQ_INT(stats_of(&f).connections_total, 1);
	close(speaker);
	fixture_free(&f);
}

/* A flood of refusals: a few log lines a second, the rest counted. */
static void
test_refusal_logs_bounded(void)
{
	pps_listener_params_t params;
	fixture_t f;
	peer_t a, r;

	default_params(&params);
	params.max_per_address = 1;
	fixture_new(&f, &params);
	CHECK_EQ_INT(connect_peer(&f, &a, "10.0.0.9", false), 0);
	for (int i = 0; i < 3 * PPS_LOG_LIMIT_BURST; i++) {
		CHECK_EQ_INT(connect_peer(&f, &r, "10.0.0.9", false), -EBUSY);
		peer_close(&r);
	}
	CHECK_EQ_INT(stats_of(&f).clients_refused, 3 * PPS_LOG_LIMIT_BURST);
	CHECK_EQ_INT(stats_of(&f).log_lines_unlogged, 2 * PPS_LOG_LIMIT_BURST);
	fake_now_us += 1000000; /* a new second: logged again */
	CHECK_EQ_INT(connect_peer(&f, &r, "10.0.0.9", false), -EBUSY);
	peer_close(&r);
	CHECK_EQ_INT(stats_of(&f).log_lines_unlogged, 2 * PPS_LOG_LIMIT_BURST);
	peer_close(&a);
	fixture_free(&f);
}

/* Joins through the listener: the second within min_interval is deferred,
 * not dropped, and asked for once the interval is over. */
static void
test_listener_defers_idr(void)
{
	pps_listener_params_t params;
	fixture_t f;
	peer_t a, b;

	default_params(&params);
	fixture_new(&f, &params);
	connect_peer(&f, &a, "10.0.0.1", true);
	connect_peer(&f, &b, "10.0.0.2", true);
	peer_hello(&a, false);
	run_loop(f.base);
	CHECK_EQ_INT(idr_count, 1);
	fake_now_us += 100000;
	peer_hello(&b, false);
	run_loop(f.base);
	CHECK_EQ_INT(idr_count, 1);
	CHECK_EQ_INT(stats_of(&f).recovery.deferred, 1);
	fake_now_us += 300000;
	pps_listener_check_timeouts(f.listener);
	CHECK_EQ_INT(idr_count, 1);
	fake_now_us += 200000;
	pps_listener_check_timeouts(f.listener);
	CHECK_EQ_INT(idr_count, 2);
	pps_listener_check_timeouts(f.listener);
	CHECK_EQ_INT(idr_count, 2); /* one IDR for the one deferred request */
	peer_close(&a);
	peer_close(&b);
	fixture_free(&f);
}

/* A 1 Mbit/s stream of 8-frame windows whose IDR costs ~117 kbit extra. */
static pps_recovery_window_t
window_at(int64_t now_us, bool idr)
{
	pps_recovery_window_t w = {
	    .now_us = now_us, .bits = 266667, .duration_us = 266667, .frames = 8};

	if (idr) {
		w.bits += 116667;
		w.idr_bits = 150000;
		w.idr_capture_us = now_us - 200000;
	}
	return w;
}

static void
add_window(pps_recovery_t *r, pps_recovery_window_t w)
{
	pps_recovery_add_window(r, &w);
}

static void
test_recovery_bounds(void)
{
	pps_recovery_params_t params = {
	    .min_interval_us = 500000, .client_interval_us = 2000000, .budget_pct = 10};
	pps_recovery_t *r = pps_recovery_new(&params);
	pps_recovery_client_t a = {0}, b = {0}, c = {0};
	pps_recovery_stats_t st;
	int64_t t = 1000000000, when = 0;

	REQUIRE(r);
	for (int i = 0; i < 8; i++)
		add_window(r, window_at(t += 266667, i == 4));
	pps_recovery_get_stats(r, &st);
	CHECK(st.idr_cost_bits > 100000 && st.idr_cost_bits < 130000);

	CHECK_EQ_INT(pps_recovery_request(r, &a, true, t, &when), PPS_RECOVERY_NOW);
	/* A second join: the bucket is empty; 10% of 1 Mbit/s refills one IDR's
	 * ~117 kbit in ~1.17 s, later than the 500 ms interval. */
	CHECK_EQ_INT(pps_recovery_request(r, &b, true, t + 100000, &when), PPS_RECOVERY_DEFERRED);
	CHECK(when > t + 1100000 && when < t + 1300000);
	/* Client a's loss within 2 s of its join: dropped (the pending IDR serves it). */
	CHECK_EQ_INT(pps_recovery_request(r, &a, false, t + 200000, &when), PPS_RECOVERY_DROPPED);
	CHECK_EQ_INT(pps_recovery_poll(r, t + 600000, &when), PPS_RECOVERY_DEFERRED);
	CHECK_EQ_INT(pps_recovery_poll(r, when, &when), PPS_RECOVERY_NOW);
	CHECK_EQ_INT(pps_recovery_poll(r, when + 1, &when), PPS_RECOVERY_NONE);

	/* A pending request served by an IDR the encoder made on its own. */
	t += 1300000;
	CHECK_EQ_INT(pps_recovery_request(r, &c, true, t, &when), PPS_RECOVERY_DEFERRED);
	add_window(r, window_at(t + 266667, true));
	CHECK_EQ_INT(pps_recovery_poll(r, when, &when), PPS_RECOVERY_NONE);
	pps_recovery_get_stats(r, &st);
	CHECK_EQ_INT(st.served_by_encoder, 1);
	pps_recovery_free(r);
}

/* Under a join every 100 ms for 60 s, forced IDRs add at most the budget
 * (plus the one IDR the bucket starts with). */
static void
test_recovery_budget_under_churn(void)
{
	pps_recovery_params_t params = {
	    .min_interval_us = 500000, .client_interval_us = 2000000, .budget_pct = 5};
	pps_recovery_t *r = pps_recovery_new(&params);
	pps_recovery_stats_t st;
	int64_t t = 1000000000, pending_at = 0, next_window = t, end = t + 60000000;
	uint64_t encoded_bits = 0, forced = 0;

	REQUIRE(r);
	/* The cost of an IDR is learnt from one of the encoder's own. */
	for (int i = 0; i < 8; i++, next_window += 266667) {
		pps_recovery_window_t w = window_at(next_window, i == 4);

		encoded_bits += w.bits;
		pps_recovery_add_window(r, &w);
	}
	t = next_window;
	end = t + 60000000;
	pps_recovery_get_stats(r, &st);
	REQUIRE(st.idr_cost_bits > 100000);
	for (; t < end; t += 100000) {
		pps_recovery_client_t joiner = {0};
		int64_t when = 0;
		int ret;

		while (next_window <= t) {
			pps_recovery_window_t w = window_at(next_window, false);

			next_window += 266667;
			encoded_bits += w.bits;
			pps_recovery_add_window(r, &w);
		}
		if (pending_at && t >= pending_at) {
			ret = pps_recovery_poll(r, t, &when);
			pending_at = ret == PPS_RECOVERY_DEFERRED ? when : 0;
			forced += ret == PPS_RECOVERY_NOW;
		}
		ret = pps_recovery_request(r, &joiner, true, t, &when);
		forced += ret == PPS_RECOVERY_NOW;
		if (ret == PPS_RECOVERY_DEFERRED && !pending_at)
			pending_at = when;
	}
	pps_recovery_get_stats(r, &st);
	CHECK(forced >= 20); /* joins are served, every ~2.3 s */
	/* ~117 kbit each, 5% of 1 Mbit/s: one per ~2.3 s after the first. */
	CHECK((double)(forced - 1) * (double)st.idr_cost_bits <= 0.05 * (double)encoded_bits);
	CHECK(forced <= 30);
	CHECK(st.requests == 600);
	pps_recovery_free(r);
}

/* ---- cut windows: a reader that reads, and one that stopped ------------- */

typedef struct {
	pps_listener_t *listener;
	unsigned pushed;
} push_ctx_t;

static void
push_window_cb(pps_window_t *window, void *user)
{
	push_ctx_t *ctx = user;

	pps_listener_push_window(ctx->listener, window);
	pps_window_unref(window);
	ctx->pushed++;
}

static void
add_adu_cb(pps_adu_t *adu, void *user)
{
	CHECK_EQ_INT(pps_windower_add(user, adu), 0);
}

static pps_session_t *found_session[2];

static void
find_session_cb(pps_session_t *session, void *user)
{
	unsigned id = pps_session_id(session);

	if (id >= 1 && id <= 2)
		found_session[id - 1] = session;
}

/* Frames @first..@last of @synth, captured now (fake clock) and a frame apart. */
static void
feed_frames(pps_synth_t *synth, pps_windower_t *wr, uint32_t first, uint32_t last)
{
	for (uint32_t f = first; f <= last; f++) {
		int64_t done = pps_synth_frame(synth, f, fake_now_us, add_adu_cb, wr);

		if (done >= 0)
			CHECK_EQ_INT(pps_windower_frames_done(wr, (uint32_t)done), 0);
		fake_now_us += 33333;
	}
}

/*
 * Both clients stop reading and have windows cut short at their deadlines;
 * then one reads again. Its cuts count once its writer took a packet after
 * they were seen; the other's never do, however long it stays stopped (it is
 * not helped by B frames, and must not switch them on for everyone).
 */
static void
test_cut_windows_of_readers(void)
{
	pps_listener_params_t params;
	pps_synth_params_t sp = {.fps = 30,
	                         .window_frames = 8,
	                         .temporal_layers = 3,
	                         .quality_layers = 2,
	                         .gop_frames = 64,
	                         .seed = 7,
	                         .size_scale = 8.0}; /* windows of ~400 kB: buffers fill */
	pps_synth_t *synth = pps_synth_new(&sp);
	push_ctx_t ctx = {0};
	pps_windower_t *wr;
	fixture_t f;
	peer_t live, dead;
	pps_sched_stats_t st;
	uint32_t next;

	REQUIRE(synth);
	default_params(&params);
	params.session.evict_after_us = 0; /* the stopped reader stays, however long */
	fixture_new(&f, &params);
	ctx.listener = f.listener;
	wr = pps_windower_new(8, PPS_PRIORITY_TEMPORAL_FIRST, push_window_cb, &ctx);
	REQUIRE(wr);
	connect_peer(&f, &live, "10.0.0.1", true);
	connect_peer(&f, &dead, "10.0.0.2", true);
	/* Receive buffers of 128 kB (the kernel doubles the request): a few
	 * windows fill them, and each read opens more than a loopback MSS. */
	REQUIRE(setsockopt(live.fd, SOL_SOCKET, SO_RCVBUF, &(int){65536}, sizeof(int)) == 0);
	REQUIRE(setsockopt(dead.fd, SOL_SOCKET, SO_RCVBUF, &(int){65536}, sizeof(int)) == 0);
	peer_hello(&live, false);
	peer_hello(&dead, false);
	run_loop(f.base);
	CHECK_EQ_INT(stats_of(&f).streaming, 2);
	pps_listener_foreach(f.listener, find_session_cb, NULL);
	REQUIRE(found_session[0] && found_session[1]);

	/* The first window reaches both readers whole. */
	feed_frames(synth, wr, 0, 8);
	for (int i = 0; i < 200; i++) {
		run_loop(f.base);
		peer_read(&live);
		peer_read(&dead);
		pps_session_get_sched_stats(found_session[1], &st);
		if (st.windows_complete > 0) {
			pps_session_get_sched_stats(found_session[0], &st);
			if (st.windows_complete > 0)
				break;
		}
	}
	pps_session_get_sched_stats(found_session[0], &st);
	REQUIRE(st.windows_complete > 0);
	pps_session_get_sched_stats(found_session[1], &st);
	REQUIRE(st.windows_complete > 0);
	CHECK_EQ_INT(pps_session_take_cut_windows(found_session[0]), 0);
	CHECK_EQ_INT(pps_session_take_cut_windows(found_session[1]), 0);

	/* Neither reads: eight windows (~2 MB), then their deadlines pass. */
	feed_frames(synth, wr, 9, 72);
	run_loop(f.base);
	fake_now_us += 2 * params.session.sched.latency_budget_us;
	feed_frames(synth, wr, 73, 80); /* re-arms the deadline timers at the new now */
	run_loop(f.base);
	pps_session_get_sched_stats(found_session[0], &st);
	CHECK(st.windows_short > 0);
	pps_session_get_sched_stats(found_session[1], &st);
	CHECK(st.windows_short > 0);
	/* Seen, not yet counted: neither has taken a packet since. */
	CHECK_EQ_INT(pps_session_take_cut_windows(found_session[0]), 0);
	CHECK_EQ_INT(pps_session_take_cut_windows(found_session[1]), 0);

	/* Fresh windows; one reads again and its writer moves on (the count
	 * follows the writer's next TCP_INFO reading after the acknowledgements). */
	next = 81;
	{
		uint64_t counted = 0;

		for (int i = 0; i < 400 && !counted; i++) {
			if (i % 20 == 0) {
				feed_frames(synth, wr, next, next + 7);
				next += 8;
			}
			peer_read(&live);
			run_loop(f.base);
			counted = pps_session_take_cut_windows(found_session[0]);
		}
		CHECK(counted > 0);
	}
	CHECK_EQ_INT(pps_session_take_cut_windows(found_session[0]), 0); /* counted once */
	CHECK_EQ_INT(pps_session_take_cut_windows(found_session[1]), 0);
	fake_now_us += 10 * params.session.sched.latency_budget_us;
	feed_frames(synth, wr, next, next + 7);
	run_loop(f.base);
	CHECK_EQ_INT(pps_session_take_cut_windows(found_session[1]), 0);
	CHECK(ctx.pushed >= 7);

	pps_windower_free(wr);
	pps_synth_free(synth);
	peer_close(&live);
	peer_close(&dead);
	fixture_free(&f);
	found_session[0] = found_session[1] = NULL;
}

/* The fan-out guard: busy once writing windows takes 90% of the time between
 * them on average (one costly window is not enough), or twice that time for
 * one window; held 2 s, idle again after; never on the first window. */
static void
test_fanout_guard(void)
{
	pps_fanout_guard_t g = {0};
	const int64_t t = 1000000000, frame = 200000;
	uint32_t w = 0;
	int64_t now = t;

	/* Window 0: no interval known, whatever it costs. */
	CHECK(!pps_fanout_guard_note(&g, w++, t, 300000, now += 10000));
	/* Half the interval each, a long run: never busy. */
	for (int i = 0; i < 20; i++, w++)
		CHECK(!pps_fanout_guard_note(&g, w, t + w * frame, 100000,
		                             now = t + w * frame + 100000));
	CHECK_EQ_INT(g.interval_us, frame);
	/* One window of 210 ms in two pieces (pushed, then grown): not busy. */
	CHECK(!pps_fanout_guard_note(&g, w, t + w * frame, 110000, now = t + w * frame + 110000));
	CHECK(!pps_fanout_guard_note(&g, w, t + w * frame, 100000, now += 100000));
	w++;
	CHECK(!pps_fanout_guard_note(&g, w, t + w * frame, 100000, now = t + w * frame + 100000));
	w++;
	CHECK(!pps_fanout_guard_busy(&g, now));
	/* A run of windows at 100% of the interval: busy within a few. */
	bool went = false;
	int n = 0;
	while (!went && n < 10) {
		went =
		    pps_fanout_guard_note(&g, w, t + w * frame, frame, now = t + w * frame + frame);
		w++;
		n++;
	}
	CHECK(went);
	CHECK(n >= 2 && n <= 8);
	CHECK(pps_fanout_guard_busy(&g, now));
	CHECK_EQ_INT(g.episodes, 1);
	/* Still busy: told once. */
	CHECK(!pps_fanout_guard_note(&g, w, t + w * frame, frame, now = t + w * frame + frame));
	w++;
	CHECK_EQ_INT(g.episodes, 1);
	/* Cheap windows from then on: busy for the hold, then not. */
	int64_t since = now;
	for (int i = 0; i < 30; i++, w++)
		(void)pps_fanout_guard_note(&g, w, t + w * frame, 1000, now = t + w * frame + 1000);
	CHECK(!pps_fanout_guard_busy(&g, now));
	CHECK(now - since > PPS_FANOUT_BUSY_HOLD_US);
	/* One window at twice the interval: busy at once. */
	CHECK(pps_fanout_guard_note(&g, w, t + w * frame, 2 * frame,
	                            now = t + w * frame + 2 * frame));
	CHECK_EQ_INT(g.episodes, 2);
	/* A gap in the captures (a paused stream) is not an interval. */
	w++;
	CHECK(!pps_fanout_guard_note(&g, w, t + 60000000, 190000, now = t + 60000000 + 190000));
	CHECK_EQ_INT(g.interval_us, 0);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	signal(SIGPIPE, SIG_IGN);
	PPS_TEST_RUN(test_handshake_ok);
	PPS_TEST_RUN(test_copy_join_no_idr);
	PPS_TEST_RUN(test_copies_take_no_slot);
	PPS_TEST_RUN(test_copy_check);
	PPS_TEST_RUN(test_handshake_timeout);
	PPS_TEST_RUN(test_garbage_counted);
	PPS_TEST_RUN(test_access_token);
	PPS_TEST_RUN(test_slow_client_evicted);
	PPS_TEST_RUN(test_stalled_client_displaced);
	PPS_TEST_RUN(test_cut_windows_of_readers);
	PPS_TEST_RUN(test_limits);
	PPS_TEST_RUN(test_refusal_logs_bounded);
	PPS_TEST_RUN(test_pool_flood);
	PPS_TEST_RUN(test_auth_backoff);
	PPS_TEST_RUN(test_accept_batches);
	PPS_TEST_RUN(test_accept_deferred);
	PPS_TEST_RUN(test_ping_flood);
	PPS_TEST_RUN(test_listener_defers_idr);
	PPS_TEST_RUN(test_recovery_bounds);
	PPS_TEST_RUN(test_recovery_budget_under_churn);
	PPS_TEST_RUN(test_fanout_guard);
	return pps_test_result();
}
