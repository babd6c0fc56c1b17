/* SPDX-License-Identifier: MIT */
/*
 * The relay's stream table and door (server/pps-relay.h) on loopback, the
 * loop driven one pass at a time until the answer a raw peer waits for is
 * in its socket: the stream bound, a taken name, bad names, an unknown name,
 * a publisher's garbage, and a window rebuilt and routed to a subscriber.
 */
#include "pps-prioritizer.h"
#include "pps-relay.h"
#include "pps-server-settings.h"
#include "pps-test.h"
#include "pps-time.h"

#include <errno.h>
#include <event2/event.h>
#include <poll.h>

typedef struct {
	struct event_base *base;
	pps_relay_t *relay;
	unsigned port;
	pps_config_t *config; /* the settings' strings point into it */
} fixture_t;

static void
log_cb(pps_log_level_t level, const char *message, void *user)
{
	fprintf(stderr, "relay: %s\n", message);
}

static void
fixture_new(fixture_t *f, unsigned max_streams, const char *token)
{
	pps_relay_params_t p = {.max_streams = max_streams, .log = {.cb = log_cb}};
	/* The listener's parameters as pps-relay reads them: the server's defaults. */
	static pps_server_settings_t settings;
	char err[256];

	f->config = pps_config_new(pps_server_settings_schema());
	REQUIRE(f->config &&
	        pps_server_settings_from_config(f->config, &settings, err, sizeof(err)) == 0);
	p.listener = settings.server.listener;
	p.listener.max_clients = 4;
	p.listener.session.access_token = token;
	f->base = event_base_new();
	REQUIRE(f->base);
	f->relay = pps_relay_new(f->base, &p, err, sizeof(err));
	if (!f->relay)
		fprintf(stderr, "relay: %s\n", err);
	REQUIRE(f->relay);
	REQUIRE(pps_relay_listen(f->relay, "127.0.0.1:0", &f->port, err, sizeof(err)) == 0);
}

static void
fixture_free(fixture_t *f)
{
	pps_relay_free(f->relay);
	event_base_free(f->base);
	pps_config_free(f->config);
}

static int
peer_connect(fixture_t *f)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	REQUIRE(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	return fd;
}

static void
peer_send(int fd, const pps_wire_record_t *r)
{
	uint8_t buf[2048];
	size_t n;

	REQUIRE(pps_wire_encode(r, buf, sizeof(buf), &n) == 0);
	REQUIRE(send(fd, buf, n, 0) == (ssize_t)n);
}

static void
peer_hello(int fd, const char *stream, bool publish)
{
	pps_wire_record_t r = {.kind = PPS_WIRE_HELLO};

	r.u.hello.protocol_version = PPS_WIRE_VERSION;
	if (stream) {
		r.u.hello.flags = PPS_WIRE_HELLO_STREAM | (publish ? PPS_WIRE_HELLO_PUBLISH : 0);
		r.u.hello.stream_len = (uint8_t)strlen(stream);
		memcpy(r.u.hello.stream, stream, r.u.hello.stream_len);
	}
	peer_send(fd, &r);
}

/* The next record the relay sends @fd (the loop runs until it is in), or
 * kind 0 once the relay closed the connection. */
static pps_wire_record_t
peer_read(fixture_t *f, int fd, pps_wire_parser_t *parser)
{
	pps_wire_record_t out = {0};

	/* Up to 2000 idle passes of 5 ms: 10 s without a byte. */
	for (int idle = 0; idle < 2000;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		uint8_t byte;
		ssize_t n;

		event_base_loop(f->base, EVLOOP_NONBLOCK);
		if (poll(&pfd, 1, 5) <= 0) {
			idle++;
			continue;
		}
		/* One byte at a time: the rest stays for the next call. */
		n = recv(fd, &byte, 1, 0);
		if (n <= 0)
			return out;
		{
			const uint8_t *p = &byte;
			size_t len = 1;
			int ret = pps_wire_parser_next(parser, &p, &len, &out);

			if (ret == 0)
				return out;
			REQUIRE(ret == -EAGAIN);
		}
	}
	REQUIRE(!"no answer from the relay");
	return out;
}

/* HELLO, and the first record of the answer. */
static pps_wire_record_t
peer_ask(fixture_t *f, int fd, pps_wire_parser_t *parser, const char *stream, bool publish)
{
	peer_hello(fd, stream, publish);
	return peer_read(f, fd, parser);
}

/* A publisher's STREAM_INFO (128x96, one layer), and the loop run until the
 * relay has read it: the stream is known to subscribers then. */
static void
publish_stream_info(fixture_t *f, int pub)
{
	pps_wire_record_t info = {.kind = PPS_WIRE_STREAM_INFO};

	info.u.stream_info = (pps_wire_stream_info_t){.protocol_version = PPS_WIRE_VERSION,
	                                              .codec = 1,
	                                              .width = 128,
	                                              .height = 96,
	                                              .base_width = 64,
	                                              .base_height = 48,
	                                              .fps_num = 30,
	                                              .fps_den = 1,
	                                              .window_frames = 1,
	                                              .temporal_layers = 1,
	                                              .quality_layers = 1,
	                                              .latency_budget_ms = 60000,
	                                              .gop_frames = 60};
	peer_send(pub, &info);
	for (int i = 0; i < 200; i++) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		poll(NULL, 0, 1);
	}
}

static void
test_stream_table(void)
{
	fixture_t f;
	pps_wire_parser_t *pa = pps_wire_parser_new(65536), *pb = pps_wire_parser_new(65536);
	pps_wire_parser_t *pc = pps_wire_parser_new(65536), *pd = pps_wire_parser_new(65536);
	pps_wire_record_t r;
	pps_relay_stats_t stats;
	int a, b, c, d;

	REQUIRE(pa && pb && pc && pd);
	fixture_new(&f, 1, NULL);
	/* The first publisher of room/a gets the relay's HELLO. */
	a = peer_connect(&f);
	r = peer_ask(&f, a, pa, "room/a", true);
	CHECK_EQ_INT(r.kind, PPS_WIRE_HELLO);
	CHECK(r.u.hello.flags & PPS_WIRE_HELLO_AUDIO);
	/* The name is taken; the relay is full for another name. */
	b = peer_connect(&f);
	r = peer_ask(&f, b, pb, "room/a", true);
	CHECK_EQ_INT(r.kind, PPS_WIRE_BYE);
	CHECK_EQ_INT(r.u.bye.reason, PPS_WIRE_BYE_STREAM_TAKEN);
	c = peer_connect(&f);
	r = peer_ask(&f, c, pc, "room/b", true);
	CHECK_EQ_INT(r.kind, PPS_WIRE_BYE);
	CHECK_EQ_INT(r.u.bye.reason, PPS_WIRE_BYE_SERVER_FULL);
	/* Before STREAM_INFO the stream is not there for viewers. */
	d = peer_connect(&f);
	r = peer_ask(&f, d, pd, "room/a", false);
	CHECK_EQ_INT(r.kind, PPS_WIRE_BYE);
	CHECK_EQ_INT(r.u.bye.reason, PPS_WIRE_BYE_NO_STREAM);
	CHECK(strstr(r.u.bye.text, "no stream named room/a") != NULL);
	close(b);
	close(c);
	close(d);
	/* The publisher leaves: the name is free again, for a new publisher. */
	close(a);
	pps_relay_get_stats(f.relay, &stats);
	for (int i = 0; i < 200 && stats.streams; i++) {
		event_base_loop(f.base, EVLOOP_NONBLOCK);
		poll(NULL, 0, 1);
		pps_relay_get_stats(f.relay, &stats);
	}
	CHECK_EQ_INT(stats.streams, 0);
	CHECK_EQ_INT(stats.publishers_total, 1);
	CHECK_EQ_INT(stats.publishers_refused, 2);
	CHECK_EQ_INT(stats.subscribers_no_stream, 1);
	pps_wire_parser_free(pb);
	pb = pps_wire_parser_new(65536);
	b = peer_connect(&f);
	r = peer_ask(&f, b, pb, "room/b", true);
	CHECK_EQ_INT(r.kind, PPS_WIRE_HELLO);
	close(b);
	fixture_free(&f);
	pps_wire_parser_free(pa);
	pps_wire_parser_free(pb);
	pps_wire_parser_free(pc);
	pps_wire_parser_free(pd);
}

static void
test_bad_names(void)
{
	static const char *const bad[] = {"room//a", "../etc", "room a", "/room", "room/"};
	fixture_t f;

	fixture_new(&f, 4, NULL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pps_wire_parser_t *p = pps_wire_parser_new(65536);
		int fd = peer_connect(&f);
		pps_wire_record_t r = peer_ask(&f, fd, p, bad[i], true);

		CHECK_EQ_INT(r.kind, PPS_WIRE_BYE);
		CHECK_EQ_INT(r.u.bye.reason, PPS_WIRE_BYE_PROTOCOL);
		close(fd);
		pps_wire_parser_free(p);
	}
	{
		/* A publisher without a name, a viewer without one. */
		pps_wire_parser_t *p = pps_wire_parser_new(65536);
		int fd = peer_connect(&f);
		pps_wire_record_t r;

		peer_hello(fd, NULL, false);
		r = peer_read(&f, fd, p);
		CHECK_EQ_INT(r.kind, PPS_WIRE_BYE);
		CHECK_EQ_INT(r.u.bye.reason, PPS_WIRE_BYE_NO_STREAM);
		close(fd);
		pps_wire_parser_free(p);
	}
	fixture_free(&f);
}

static void
test_token(void)
{
	fixture_t f;
	pps_wire_parser_t *p = pps_wire_parser_new(65536);
	pps_wire_record_t r, auth = {.kind = PPS_WIRE_AUTH};
	const char *token = "relay-unit-token-0123";
	int fd;

	fixture_new(&f, 4, token);
	/* Without the challenge flag: refused. */
	fd = peer_connect(&f);
	r = peer_ask(&f, fd, p, "room/a", true);
	CHECK_EQ_INT(r.kind, PPS_WIRE_BYE);
	CHECK_EQ_INT(r.u.bye.reason, PPS_WIRE_BYE_UNAUTHORIZED);
	close(fd);
	pps_wire_parser_free(p);
	/* With it, the right MAC: admitted. */
	p = pps_wire_parser_new(65536);
	fd = peer_connect(&f);
	{
		pps_wire_record_t h = {.kind = PPS_WIRE_HELLO};

		h.u.hello.protocol_version = PPS_WIRE_VERSION;
		h.u.hello.flags =
		    PPS_WIRE_HELLO_STREAM | PPS_WIRE_HELLO_PUBLISH | PPS_WIRE_HELLO_CHALLENGE;
		h.u.hello.stream_len = 6;
		memcpy(h.u.hello.stream, "room/a", 6);
		peer_send(fd, &h);
	}
	r = peer_read(&f, fd, p);
	REQUIRE(r.kind == PPS_WIRE_CHALLENGE);
	auth.u.auth.method = PPS_WIRE_AUTH_HMAC_SHA256;
	pps_wire_auth_mac(token, strlen(token), r.u.challenge.nonce, auth.u.auth.mac);
	peer_send(fd, &auth);
	r = peer_read(&f, fd, p);
	CHECK_EQ_INT(r.kind, PPS_WIRE_HELLO);
	/* A viewer of the stream without the challenge flag: told why (BYE
	 * unauthorized), as pps-server tells it, not just closed. */
	{
		pps_wire_parser_t *pv = pps_wire_parser_new(65536);
		int viewer;

		publish_stream_info(&f, fd);
		viewer = peer_connect(&f);
		r = peer_ask(&f, viewer, pv, "room/a", false);
		CHECK_EQ_INT(r.kind, PPS_WIRE_BYE);
		CHECK_EQ_INT(r.u.bye.reason, PPS_WIRE_BYE_UNAUTHORIZED);
		close(viewer);
		pps_wire_parser_free(pv);
	}
	close(fd);
	pps_wire_parser_free(p);
	fixture_free(&f);
}

/* A publisher's window goes whole to a subscriber; garbage ends the stream
 * and its subscriber hears so. */
static void
test_window_routed(void)
{
	fixture_t f;
	pps_wire_parser_t *pp = pps_wire_parser_new(65536), *ps = pps_wire_parser_new(65536);
	pps_wire_record_t r;
	pps_wire_record_t begin = {.kind = PPS_WIRE_WINDOW_BEGIN},
	                  end = {.kind = PPS_WIRE_WINDOW_END};
	pps_wire_record_t frag = {.kind = PPS_WIRE_ADU_FRAGMENT};
	static const uint8_t payload[3000] = {1, 2, 3};
	int pub, sub;
	bool begun = false, got_fragment = false, ended = false;

	fixture_new(&f, 4, NULL);
	pub = peer_connect(&f);
	r = peer_ask(&f, pub, pp, "room/a", true);
	REQUIRE(r.kind == PPS_WIRE_HELLO);
	/* The subscriber: once the stream is known. */
	publish_stream_info(&f, pub);
	sub = peer_connect(&f);
	r = peer_ask(&f, sub, ps, "room/a", false);
	CHECK_EQ_INT(r.kind, PPS_WIRE_STREAM_INFO);
	CHECK_EQ_INT(r.u.stream_info.width, 128);
	/* Window 0: one IDR ADU of 3000 bytes in two fragments. */
	begin.u.window_begin = (pps_wire_window_begin_t){.window_id = 0,
	                                                 .first_capture_us = pps_time_realtime_us(),
	                                                 .frames = 1,
	                                                 .adus = 1,
	                                                 .bytes = sizeof(payload),
	                                                 .first_adu_id = 0};
	peer_send(pub, &begin);
	frag.u.adu_fragment =
	    (pps_wire_adu_fragment_t){.window_id = 0,
	                              .adu_id = 0,
	                              .capture_us = begin.u.window_begin.first_capture_us,
	                              .total_bytes = sizeof(payload),
	                              .payload_len = 1500,
	                              .payload = payload};
	peer_send(pub, &frag);
	frag.u.adu_fragment.offset = 1500;
	frag.u.adu_fragment.payload = payload + 1500;
	peer_send(pub, &frag);
	end.u.window_end =
	    (pps_wire_window_end_t){.window_id = 0, .adus_sent = 1, .bytes_sent = sizeof(payload)};
	peer_send(pub, &end);
	while (!ended) {
		r = peer_read(&f, sub, ps);
		REQUIRE(r.kind != 0);
		if (r.kind == PPS_WIRE_WINDOW_BEGIN) {
			begun = true;
			CHECK_EQ_INT(r.u.window_begin.adus, 1);
			CHECK_EQ_INT(r.u.window_begin.bytes, sizeof(payload));
		} else if (r.kind == PPS_WIRE_ADU_FRAGMENT) {
			got_fragment = true;
			CHECK_EQ_INT(r.u.adu_fragment.total_bytes, sizeof(payload));
		} else if (r.kind == PPS_WIRE_WINDOW_END) {
			ended = true;
			CHECK_EQ_INT(r.u.window_end.adus_sent, 1);
			CHECK_EQ_INT(r.u.window_end.bytes_sent, sizeof(payload));
		}
	}
	CHECK(begun && got_fragment);
	/* Garbage from the publisher: it is told, and so is the subscriber. */
	REQUIRE(send(pub, "\x01\x63\x00\x00", 4, 0) == 4);
	/* (The subscriber's join went upstream first: a RECOVERY_REQUEST; and the
	 * stream reports its viewers' paths upstream every 250 ms: PATH_REPORTs.) */
	do
		r = peer_read(&f, pub, pp);
	while (r.kind == PPS_WIRE_RECOVERY_REQUEST || r.kind == PPS_WIRE_PATH_REPORT);
	CHECK_EQ_INT(r.kind, PPS_WIRE_BYE);
	CHECK_EQ_INT(r.u.bye.reason, PPS_WIRE_BYE_PROTOCOL);
	do
		r = peer_read(&f, sub, ps);
	while (r.kind != 0 && r.kind != PPS_WIRE_BYE);
	CHECK_EQ_INT(r.kind, PPS_WIRE_BYE);
	CHECK(strstr(r.u.bye.text, "ended") != NULL);
	close(pub);
	close(sub);
	pps_wire_parser_free(pp);
	pps_wire_parser_free(ps);
	fixture_free(&f);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	PPS_TEST_RUN(test_stream_table);
	PPS_TEST_RUN(test_bad_names);
	PPS_TEST_RUN(test_token);
	PPS_TEST_RUN(test_window_routed);
	return pps_test_result();
}
