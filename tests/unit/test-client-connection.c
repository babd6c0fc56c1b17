/* SPDX-License-Identifier: MIT */
/*
 * The client's side of the challenge-response (client/pps-connection.c)
 * against a scripted server on a loopback socket in the same process: the
 * token never appears in HELLO, the AUTH answer is the MAC of the server's
 * nonce, and a CHALLENGE the client did not ask for, or a second one, ends
 * the connection as a protocol error; a server silent after STREAM_INFO
 * ends it once the data timeout passes; a relay's stream name rides in
 * HELLO, and the relay's BYE for it is reported with its reason. No sleeps: the loop runs what is
 * ready, or waits for the connection's own timer.
 */
#include "pps-client-internal.h"
#include "pps-test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
	pps_connection_t *connection; /* set: STREAM_INFO starts the stream */
	int64_t window_us;
	unsigned records, pongs;
	bool got_stream_info, got_window_end;
	bool closed;
	bool failure;
	int bye_reason;
	char why[400];
} sink_t;

static int64_t
fixed_clock(void *user)
{
	return 1700000000LL * 1000000;
}

static int
record_cb(const pps_wire_record_t *record, char *err, size_t err_size, void *user)
{
	sink_t *s = user;

	s->records++;
	s->got_stream_info |= record->kind == PPS_WIRE_STREAM_INFO;
	s->got_window_end |= record->kind == PPS_WIRE_WINDOW_END;
	s->pongs += record->kind == PPS_WIRE_CLOCK_PONG;
	if (record->kind == PPS_WIRE_STREAM_INFO && s->connection)
		pps_connection_stream_started(s->connection, s->window_us);
	return 0;
}

static void
closed_cb(const pps_connection_end_t *end, void *user)
{
	sink_t *s = user;

	s->closed = true;
	s->failure = end->failure;
	s->bye_reason = end->bye_reason;
	snprintf(s->why, sizeof(s->why), "%s", end->why);
}

static void
run_loop(struct event_base *base)
{
	for (int i = 0; i < 4; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
}

/* Reads one record from the scripted server's end (waits for it): 0 or -errno. */
static int
read_record(int fd, pps_wire_parser_t *parser, pps_wire_record_t *out)
{
	for (;;) {
		uint8_t byte;
		const uint8_t *data = &byte;
		size_t len = 1;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int ret;

		if (poll(&pfd, 1, 5000) != 1 || recv(fd, &byte, 1, 0) != 1)
			return -EIO;
		ret = pps_wire_parser_next(parser, &data, &len, out);
		if (ret != -EAGAIN)
			return ret;
	}
}

static void
send_record(int fd, const pps_wire_record_t *r)
{
	uint8_t buf[512];
	size_t n;

	REQUIRE(pps_wire_encode(r, buf, sizeof(buf), &n) == 0 &&
	        send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n);
}

typedef struct {
	struct event_base *base;
	pps_connection_t *connection;
	pps_wire_parser_t *parser;
	int server_fd;
	sink_t sink;
} fixture_t;

/* A connection to a loopback listener (HOST:PORT, or HOST:PORT/@stream when
 * @stream is not NULL), accepted: its HELLO is read into @hello. */
static void
fixture_start_with(fixture_t *f, const char *token, unsigned data_timeout_windows,
                   int64_t data_timeout_min_us, const char *stream, pps_wire_record_t *hello)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = 0};
	socklen_t len = sizeof(sin);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char address[160];
	pps_connection_params_t params = {
	    .server = address,
	    .name = "unit",
	    .max_record_bytes = PPS_WIRE_DEFAULT_MAX_RECORD_BYTES,
	    .access_token = token,
	    .ping_interval_us = 1000000,
	    .handshake_timeout_us = 5000000,
	    .data_timeout_windows = data_timeout_windows,
	    .data_timeout_min_us = data_timeout_min_us,
	    .clock_cb = fixed_clock,
	};
	pps_connection_callbacks_t callbacks = {.record_cb = record_cb, .closed_cb = closed_cb};

	memset(f, 0, sizeof(*f));
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	REQUIRE(lfd >= 0 && bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	REQUIRE(listen(lfd, 1) == 0 && getsockname(lfd, (struct sockaddr *)&sin, &len) == 0);
	snprintf(address, sizeof(address), "127.0.0.1:%u%s%s", ntohs(sin.sin_port),
	         stream ? "/" : "", stream ? stream : "");
	f->base = event_base_new();
	f->parser = pps_wire_parser_new(PPS_WIRE_DEFAULT_MAX_RECORD_BYTES);
	REQUIRE(f->base && f->parser);
	f->connection = pps_connection_new(f->base, &params, &callbacks, &f->sink);
	REQUIRE(f->connection);
	pps_connection_start(f->connection);
	f->server_fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	REQUIRE(f->server_fd >= 0);
	close(lfd);
	run_loop(f->base); /* connected: HELLO goes out */
	REQUIRE(read_record(f->server_fd, f->parser, hello) == 0);
	REQUIRE(hello->kind == PPS_WIRE_HELLO);
}

static void
fixture_start(fixture_t *f, const char *token, pps_wire_record_t *hello)
{
	fixture_start_with(f, token, 0, 0, NULL, hello);
}

static void
fixture_free(fixture_t *f)
{
	pps_connection_free(f->connection);
	pps_wire_parser_free(f->parser);
	if (f->server_fd >= 0)
		close(f->server_fd);
	event_base_free(f->base);
}

static pps_wire_record_t
challenge_record(uint8_t seed)
{
	pps_wire_record_t r = {.kind = PPS_WIRE_CHALLENGE};

	r.u.challenge.method = PPS_WIRE_AUTH_HMAC_SHA256;
	for (int i = 0; i < PPS_WIRE_NONCE_BYTES; i++)
		r.u.challenge.nonce[i] = (uint8_t)(seed + 7 * i);
	return r;
}

static void
test_answers_challenge(void)
{
	fixture_t f;
	pps_wire_record_t hello, challenge = challenge_record(3), auth;
	uint8_t want[PPS_WIRE_MAC_BYTES];

	fixture_start(&f, "t0ken-secret", &hello);
	/* The token is announced by a flag, never sent. */
	CHECK(hello.u.hello.flags & PPS_WIRE_HELLO_CHALLENGE);
	CHECK_EQ_INT(hello.u.hello.auth_len, 0);
	send_record(f.server_fd, &challenge);
	run_loop(f.base);
	REQUIRE(read_record(f.server_fd, f.parser, &auth) == 0);
	CHECK_EQ_INT(auth.kind, PPS_WIRE_AUTH);
	pps_wire_auth_mac("t0ken-secret", 12, challenge.u.challenge.nonce, want);
	CHECK(pps_wire_auth_equal(want, auth.u.auth.mac));
	CHECK(!f.sink.closed);
	/* A second CHALLENGE is not answered: protocol error. */
	send_record(f.server_fd, &challenge);
	run_loop(f.base);
	CHECK(f.sink.closed && f.sink.failure);
	CHECK(strstr(f.sink.why, "unexpected CHALLENGE") != NULL);
	fixture_free(&f);
}

static void
test_unasked_challenge(void)
{
	fixture_t f;
	pps_wire_record_t hello, challenge = challenge_record(9);

	fixture_start(&f, "", &hello);
	CHECK_EQ_INT(hello.u.hello.flags & PPS_WIRE_HELLO_CHALLENGE, 0);
	send_record(f.server_fd, &challenge);
	run_loop(f.base);
	CHECK(f.sink.closed && f.sink.failure);
	CHECK(strstr(f.sink.why, "no client.access_token") != NULL);
	fixture_free(&f);
}

static pps_wire_record_t
stream_info_record(void)
{
	pps_wire_record_t info = {.kind = PPS_WIRE_STREAM_INFO};

	info.u.stream_info = (pps_wire_stream_info_t){.protocol_version = PPS_WIRE_VERSION,
	                                              .codec = 1,
	                                              .width = 64,
	                                              .height = 64,
	                                              .base_width = 32,
	                                              .base_height = 32,
	                                              .fps_num = 30,
	                                              .fps_den = 1,
	                                              .window_frames = 2,
	                                              .temporal_layers = 1,
	                                              .quality_layers = 1,
	                                              .latency_budget_ms = 250,
	                                              .gop_frames = 60};
	return info;
}

/* A server without a token answers a flagged HELLO with STREAM_INFO at once. */
static void
test_no_challenge_needed(void)
{
	fixture_t f;
	pps_wire_record_t hello, info = stream_info_record();

	fixture_start(&f, "t0ken-secret", &hello);
	send_record(f.server_fd, &info);
	run_loop(f.base);
	CHECK(f.sink.got_stream_info);
	CHECK(!f.sink.closed);
	fixture_free(&f);
}

/* A PONG answers a PING of ours, once: others never reach the records (each
 * would be one more clock event in the log, at the server's pace). */
static void
test_unasked_pong(void)
{
	fixture_t f;
	pps_wire_record_t hello, info = stream_info_record(), pong = {.kind = PPS_WIRE_CLOCK_PONG};
	pps_wire_record_t end = {.kind = PPS_WIRE_WINDOW_END};

	fixture_start(&f, "", &hello);
	f.sink.connection = f.connection;
	f.sink.window_us = 66666;
	send_record(f.server_fd, &info);
	run_loop(f.base);
	REQUIRE(f.sink.got_stream_info);
	/* The first PING went out with STREAM_INFO: seq 1. */
	for (uint32_t seq = 2; seq < 50; seq++) {
		pong.u.clock_pong.seq = seq;
		send_record(f.server_fd, &pong);
	}
	pong.u.clock_pong.seq = 1;
	send_record(f.server_fd, &pong);
	send_record(f.server_fd, &pong);
	/* Then any other record: once it is in, every PONG before it was read. */
	end.u.window_end.window_id = 1;
	send_record(f.server_fd, &end);
	for (int i = 0; i < 100 && !f.sink.got_window_end; i++)
		event_base_loop(f.base, EVLOOP_ONCE);
	CHECK(f.sink.got_window_end);
	CHECK_EQ_INT(f.sink.pongs, 1);
	CHECK(!f.sink.closed);
	fixture_free(&f);
}

/* The data timeout: N windows, never less than its floor; 0 windows = none. */
static void
test_data_timeout_length(void)
{
	pps_connection_params_t params = {.data_timeout_windows = 20,
	                                  .data_timeout_min_us = 4000000};

	CHECK_EQ_INT(pps_connection_data_timeout_us(&params, 66666), 4000000);
	CHECK_EQ_INT(pps_connection_data_timeout_us(&params, 1000000), 20000000);
	params.data_timeout_windows = 0;
	CHECK_EQ_INT(pps_connection_data_timeout_us(&params, 66666), 0);
}

/* STREAM_INFO, then silence: the connection ends as a failure, saying how
 * long it waited; the loop waits for the connection's timer, nothing else. */
static void
test_silent_after_stream_info(void)
{
	fixture_t f;
	pps_wire_record_t hello, info = stream_info_record();

	fixture_start_with(&f, "", 2, 100000, NULL, &hello);
	f.sink.connection = f.connection;
	f.sink.window_us = 10000;
	send_record(f.server_fd, &info);
	for (int i = 0; i < 100 && !f.sink.closed; i++)
		event_base_loop(f.base, EVLOOP_ONCE);
	CHECK(f.sink.got_stream_info);
	CHECK(f.sink.closed && f.sink.failure);
	if (!strstr(f.sink.why, "no record from the server for 0.1 s (")) {
		fprintf(stderr, "  got: %s\n", f.sink.why);
		CHECK(!"data timeout text");
	}
	fixture_free(&f);
}

/* A relay's viewer: the stream named after the address rides in HELLO (with
 * its flag), and the relay's BYE for a name it does not carry ends the
 * connection as a failure whose reason is the BYE's (ppssrc makes it a
 * "not found" error); a connection that just closes has no BYE reason. */
static void
test_named_stream_refused(void)
{
	fixture_t f;
	pps_wire_record_t hello, bye = {.kind = PPS_WIRE_BYE};

	fixture_start_with(&f, "", 0, 0, "room/alice", &hello);
	CHECK(hello.u.hello.flags & PPS_WIRE_HELLO_STREAM);
	CHECK_EQ_INT(hello.u.hello.stream_len, strlen("room/alice"));
	CHECK(memcmp(hello.u.hello.stream, "room/alice", hello.u.hello.stream_len) == 0);
	bye.u.bye.reason = PPS_WIRE_BYE_NO_STREAM;
	bye.u.bye.text_len = (uint8_t)snprintf(bye.u.bye.text, sizeof(bye.u.bye.text),
	                                       "no stream named room/alice on this relay");
	send_record(f.server_fd, &bye);
	run_loop(f.base);
	CHECK(f.sink.closed && f.sink.failure);
	CHECK_EQ_INT(f.sink.bye_reason, PPS_WIRE_BYE_NO_STREAM);
	CHECK(strstr(f.sink.why, "no stream named room/alice") != NULL);
	fixture_free(&f);

	fixture_start(&f, "", &hello);
	CHECK_EQ_INT(hello.u.hello.flags & PPS_WIRE_HELLO_STREAM, 0);
	close(f.server_fd);
	f.server_fd = -1;
	for (int i = 0; i < 100 && !f.sink.closed; i++)
		event_base_loop(f.base, EVLOOP_ONCE);
	CHECK(f.sink.closed && f.sink.failure);
	CHECK_EQ_INT(f.sink.bye_reason, -1);
	fixture_free(&f);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	signal(SIGPIPE, SIG_IGN);
	PPS_TEST_RUN(test_answers_challenge);
	PPS_TEST_RUN(test_unasked_challenge);
	PPS_TEST_RUN(test_no_challenge_needed);
	PPS_TEST_RUN(test_unasked_pong);
	PPS_TEST_RUN(test_data_timeout_length);
	PPS_TEST_RUN(test_silent_after_stream_info);
	PPS_TEST_RUN(test_named_stream_refused);
	return pps_test_result();
}
