/* SPDX-License-Identifier: MIT */
/*
 * A server session's transport stack (pps-transport.h) on loopback TCP pairs,
 * without TLS (test-minbuf-tls covers that layer) and without a session:
 *
 *  - pps-client's bytes: the browser layer steps aside after the first byte,
 *    records reach the owner as sent, records said now leave raw, the
 *    writer's packets arrive whole after pps_transport_start(), and the
 *    peer's close ends the connection;
 *  - a browser's GET: the file is answered and the exchange ends (FINISHED),
 *    the log callback hears of it;
 *  - a browser's WebSocket: the client's binary messages reach the owner as
 *    records, a record said now (CHALLENGE) is a binary message, each packet
 *    is one binary message, a BYE is followed by a close frame, and an
 *    unmasked client frame ends the connection as a framing error;
 *  - bytes read before the stack had the socket, replayed through it;
 *  - names and capabilities of modes minbuf and tcp.
 * No sleeps: the loop runs what is ready, the peer waits for bytes with
 * poll(2).
 */
#include "pps-minbuf.h"
#include "pps-socket.h"
#include "pps-test.h"
#include "pps-time.h"
#include "pps-transport.h"
#include "pps-web.h"
#include "pps-websocket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* What the owner saw. */
typedef struct {
	uint8_t input[4096];
	size_t input_len;
	bool ended;
	pps_transport_end_t how;
	char why[256];
	unsigned packets_left; /* the fill callback's supply */
	unsigned samples;
	char log[4096];
} owner_t;

static int
fill_cb(size_t mss_bytes, uint8_t *buf, size_t *len_bytes, bool *push, void *user)
{
	owner_t *o = user;
	size_t len = mss_bytes < 100 ? mss_bytes : 100;

	if (o->packets_left == 0)
		return 0;
	memset(buf, 'a' + (int)(o->packets_left % 26), len);
	*len_bytes = len;
	*push = --o->packets_left == 0;
	return 1;
}

static void
sample_cb(const pps_minbuf_sample_t *sample, void *user)
{
	((owner_t *)user)->samples++;
}

static void
input_cb(const uint8_t *buf, size_t len, void *user)
{
	owner_t *o = user;

	if (len > sizeof(o->input) - o->input_len)
		len = sizeof(o->input) - o->input_len;
	memcpy(o->input + o->input_len, buf, len);
	o->input_len += len;
}

static void
ended_cb(pps_transport_end_t how, const char *why, void *user)
{
	owner_t *o = user;

	o->ended = true;
	o->how = how;
	snprintf(o->why, sizeof(o->why), "%s", why ? why : "");
}

static void
log_cb(pps_log_level_t level, const char *message, void *user)
{
	owner_t *o = user;
	size_t len = strlen(o->log);

	snprintf(o->log + len, sizeof(o->log) - len, "%s\n", message);
}

static const pps_transport_events_t events = {
    .fill_cb = fill_cb,
    .sample_cb = sample_cb,
    .input_cb = input_cb,
    .ended_cb = ended_cb,
};

typedef struct {
	struct event_base *base;
	int peer, fd;
	owner_t owner;
	pps_transport_t *t;
} fixture_t;

static void
fixture_new(fixture_t *f, pps_minbuf_mode_t mode)
{
	int fds[2];
	pps_transport_params_t params = {.peer = "127.0.0.1:1"};

	memset(f, 0, sizeof(*f));
	pps_minbuf_params_init(&params.writer);
	params.writer.mode = mode;
	params.log = (pps_log_t){.cb = log_cb, .user = &f->owner};
	pps_test_tcp_pair(fds);
	f->peer = fds[0];
	f->fd = fds[1];
	f->base = event_base_new();
	REQUIRE(f->base);
	f->t = pps_transport_open(f->base, f->fd, &params, &events, &f->owner);
	REQUIRE(f->t);
}

static void
fixture_free(fixture_t *f)
{
	pps_transport_free(f->t);
	event_base_free(f->base);
	close(f->fd);
	close(f->peer);
}

static void
run_loop(fixture_t *f)
{
	/* What is readable or writable now, and what that schedules. */
	for (int i = 0; i < 8; i++)
		event_base_loop(f->base, EVLOOP_NONBLOCK);
}

static void
peer_send(fixture_t *f, const void *buf, size_t len)
{
	REQUIRE(send(f->peer, buf, len, MSG_NOSIGNAL) == (ssize_t)len);
	run_loop(f);
}

/* Exactly @len bytes the server sent, waiting for them (the loop runs in
 * between: a long answer needs the server's EV_WRITE). */
static bool
peer_recv(fixture_t *f, uint8_t *buf, size_t len)
{
	size_t got = 0;

	for (int idle = 0; got < len && idle < 20;) {
		struct pollfd p = {.fd = f->peer, .events = POLLIN};
		ssize_t n;

		run_loop(f);
		if (poll(&p, 1, 100) == 0) {
			idle++;
			continue;
		}
		n = recv(f->peer, buf + got, len - got, MSG_DONTWAIT);
		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return got == len;
}

static size_t
encode(const pps_wire_record_t *r, uint8_t *buf, size_t size)
{
	size_t n = 0;

	REQUIRE(pps_wire_encode(r, buf, size, &n) == 0);
	return n;
}

static const pps_wire_record_t ping = {
    .kind = PPS_WIRE_CLOCK_PING,
    .u.clock_ping = {.seq = 7, .client_send_us = 123456789},
};

/* ---- pps-client's bytes ------------------------------------------------- */

static void
test_plain_client(void)
{
	fixture_t f;
	char name[64];
	uint8_t rec[64], back[512];
	size_t n;
	pps_minbuf_stats_t st;

	fixture_new(&f, PPS_MINBUF_MODE_MINBUF);
	pps_transport_describe(f.t, name, sizeof(name));
	CHECK(strcmp(name, "minbuf") == 0, "%s", name);
	CHECK(pps_transport_handshake_pending(f.t) == NULL);
	CHECK(!(pps_transport_caps(f.t) & PPS_TRANSPORT_CAP_BUFFERED_INPUT));
	CHECK_EQ_INT(pps_transport_get_stats(f.t, &st), -ENOENT);
	CHECK_EQ_INT(st.packets, 0);
	CHECK_EQ_INT(pps_transport_pending_bytes(f.t), 0);

	/* Records reach the owner as sent. */
	n = encode(&ping, rec, sizeof(rec));
	peer_send(&f, rec, n);
	CHECK_EQ_INT(f.owner.input_len, n);
	CHECK(memcmp(f.owner.input, rec, n) == 0);

	/* Said now, before streaming: the record itself. */
	pps_wire_record_t challenge = {.kind = PPS_WIRE_CHALLENGE};
	challenge.u.challenge.method = PPS_WIRE_AUTH_HMAC_SHA256;
	n = encode(&challenge, rec, sizeof(rec));
	CHECK_EQ_INT(pps_transport_send_record(f.t, &challenge), 0);
	CHECK(peer_recv(&f, back, n) && memcmp(back, rec, n) == 0);

	/* Streaming: three packets of 100 bytes, as the owner filled them. */
	f.owner.packets_left = 3;
	CHECK_EQ_INT(pps_transport_start(f.t), 0);
	pps_transport_kick(f.t);
	CHECK(peer_recv(&f, back, 300));
	CHECK(back[0] == 'a' + 3 && back[100] == 'a' + 2 && back[299] == 'a' + 1);
	CHECK(f.owner.samples > 0);
	CHECK_EQ_INT(pps_transport_get_stats(f.t, &st), 0);
	CHECK_EQ_INT(st.packets, 3);
	CHECK_EQ_INT(st.tls_records, 0);

	/* The peer leaves. */
	shutdown(f.peer, SHUT_WR);
	run_loop(&f);
	CHECK(f.owner.ended && f.owner.how == PPS_TRANSPORT_END_CLOSED);
	CHECK(f.owner.log[0] == '\0', "%s", f.owner.log);
	fixture_free(&f);
}

static void
test_names_and_caps(void)
{
	fixture_t f;
	char name[64];

	fixture_new(&f, PPS_MINBUF_MODE_MINBUF);
	CHECK(
	    (pps_transport_caps(f.t) & (PPS_TRANSPORT_CAP_LATENCY_CAP | PPS_TRANSPORT_CAP_RATE_CAP |
	                                PPS_TRANSPORT_CAP_CONGESTION)) ==
	    (PPS_TRANSPORT_CAP_LATENCY_CAP | PPS_TRANSPORT_CAP_RATE_CAP |
	     PPS_TRANSPORT_CAP_CONGESTION));
	fixture_free(&f);
	/* Mode tcp leaves the kernel's buffer alone: no latency cap. */
	fixture_new(&f, PPS_MINBUF_MODE_TCP);
	pps_transport_describe(f.t, name, sizeof(name));
	CHECK(strcmp(name, "tcp") == 0, "%s", name);
	CHECK(!(pps_transport_caps(f.t) & PPS_TRANSPORT_CAP_LATENCY_CAP));
	CHECK(pps_transport_caps(f.t) & PPS_TRANSPORT_CAP_RATE_CAP);
	fixture_free(&f);
	/* An audio-only connection: other writer parameters before the start
	 * (a thin stream), not after; thin needs mode tcp. */
	fixture_new(&f, PPS_MINBUF_MODE_MINBUF);
	{
		pps_minbuf_params_t thin;

		pps_minbuf_params_init(&thin);
		thin.thin = true;
		CHECK(pps_transport_set_writer(f.t, &thin) == -EINVAL);
		thin.mode = PPS_MINBUF_MODE_TCP;
		CHECK(pps_transport_set_writer(f.t, &thin) == 0);
		pps_transport_describe(f.t, name, sizeof(name));
		CHECK(strstr(name, "thin") == name, "%s", name);
		CHECK(pps_transport_start(f.t) == 0);
		CHECK(pps_transport_set_writer(f.t, &thin) == -EALREADY);
	}
	fixture_free(&f);
}

/* ---- a browser ---------------------------------------------------------- */

static void
test_http_get(void)
{
	static const char get[] = "GET /viewer.js HTTP/1.1\r\nHost: x\r\n\r\n";
	const pps_web_file_t *file = pps_web_file_find("/viewer.js");
	static uint8_t back[1 << 20];
	fixture_t f;
	char head[] = "HTTP/1.1 200 OK\r\n";

	REQUIRE(file && file->size < sizeof(back));
	fixture_new(&f, PPS_MINBUF_MODE_MINBUF);
	peer_send(&f, get, sizeof(get) - 1);
	CHECK_EQ_INT(f.owner.input_len, 0);
	CHECK(peer_recv(&f, back, sizeof(head) - 1) && memcmp(back, head, sizeof(head) - 1) == 0);
	/* The rest of the head, then the file. */
	size_t got = sizeof(head) - 1;
	while (got < 4 || memcmp(back + got - 4, "\r\n\r\n", 4) != 0) {
		if (!peer_recv(&f, back + got, 1))
			break;
		got++;
	}
	CHECK(peer_recv(&f, back, file->size) && memcmp(back, file->data, file->size) == 0);
	run_loop(&f);
	CHECK(f.owner.ended && f.owner.how == PPS_TRANSPORT_END_FINISHED);
	CHECK(strstr(f.owner.log, "http 127.0.0.1:1: 200 OK") != NULL, "%s", f.owner.log);
	fixture_free(&f);
}

/* Bytes read before the stack had the socket (a relay read the request to
 * route it): replayed through every layer, as if they had just come. */
static void
test_replay(void)
{
	static const char get[] = "GET /viewer.js HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char head[] = "HTTP/1.1 200 OK\r\n";
	uint8_t back[sizeof(head) - 1];
	fixture_t f;

	fixture_new(&f, PPS_MINBUF_MODE_MINBUF);
	CHECK(pps_transport_replay(f.t, (const uint8_t *)get, sizeof(get) - 1) == 0);
	CHECK(pps_transport_replay(f.t, (const uint8_t *)get, sizeof(get) - 1) == -EALREADY);
	/* Nothing from the peer: the replayed request alone is answered. */
	CHECK(peer_recv(&f, back, sizeof(back)) && memcmp(back, head, sizeof(back)) == 0);
	fixture_free(&f);

	/* Wire records replayed reach the owner as they were; then the socket's. */
	fixture_new(&f, PPS_MINBUF_MODE_MINBUF);
	{
		uint8_t rec[64];
		size_t n = encode(&ping, rec, sizeof(rec));

		CHECK(pps_transport_replay(f.t, rec, n) == 0);
		run_loop(&f);
		CHECK_EQ_INT(f.owner.input_len, n);
		CHECK(memcmp(f.owner.input, rec, n) == 0);
		peer_send(&f, rec, n);
		CHECK_EQ_INT(f.owner.input_len, 2 * n);
		/* Once the socket was read, there is nothing to replay before it. */
		CHECK(pps_transport_replay(f.t, rec, n) == -EALREADY);
	}
	fixture_free(&f);
}

/* A masked client frame carrying @len bytes of @payload. */
static size_t
client_frame(uint8_t opcode, const uint8_t *payload, size_t len, uint8_t *out)
{
	static const uint8_t mask[4] = {0x12, 0x34, 0x56, 0x78};

	REQUIRE(len < 126);
	out[0] = 0x80 | opcode;
	out[1] = 0x80 | (uint8_t)len;
	memcpy(out + 2, mask, 4);
	for (size_t i = 0; i < len; i++)
		out[6 + i] = payload[i] ^ mask[i % 4];
	return 6 + len;
}

/* Upgrades @f's connection to a WebSocket and reads the 101. */
static void
upgrade(fixture_t *f)
{
	static const char req[] = "GET /stream HTTP/1.1\r\n"
	                          "Host: x\r\n"
	                          "Upgrade: websocket\r\n"
	                          "Connection: Upgrade\r\n"
	                          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	                          "Sec-WebSocket-Version: 13\r\n\r\n";
	static const char want[] = "HTTP/1.1 101 Switching Protocols\r\n"
	                           "Upgrade: websocket\r\n"
	                           "Connection: Upgrade\r\n"
	                           "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
	uint8_t back[sizeof(want)];

	peer_send(f, req, sizeof(req) - 1);
	CHECK(peer_recv(f, back, sizeof(want) - 1) && memcmp(back, want, sizeof(want) - 1) == 0);
}

static void
test_websocket(void)
{
	fixture_t f;
	uint8_t rec[64], frame[128], back[512];
	size_t n, k;

	fixture_new(&f, PPS_MINBUF_MODE_MINBUF);
	upgrade(&f);
	CHECK(strstr(f.owner.log, "WebSocket /stream") != NULL, "%s", f.owner.log);

	/* A client's message: its record reaches the owner. */
	n = encode(&ping, rec, sizeof(rec));
	k = client_frame(PPS_WS_OP_BINARY, rec, n, frame);
	peer_send(&f, frame, k);
	CHECK_EQ_INT(f.owner.input_len, n);
	CHECK(memcmp(f.owner.input, rec, n) == 0);

	/* Said now: a binary message holding the record. */
	pps_wire_record_t challenge = {.kind = PPS_WIRE_CHALLENGE};
	challenge.u.challenge.method = PPS_WIRE_AUTH_HMAC_SHA256;
	n = encode(&challenge, rec, sizeof(rec));
	CHECK_EQ_INT(pps_transport_send_record(f.t, &challenge), 0);
	CHECK(peer_recv(&f, back, 2 + n));
	CHECK(back[0] == 0x82 && back[1] == n && memcmp(back + 2, rec, n) == 0);

	/* Each packet one binary message: 100 bytes of records each. */
	f.owner.packets_left = 2;
	CHECK_EQ_INT(pps_transport_start(f.t), 0);
	pps_transport_kick(f.t);
	CHECK(peer_recv(&f, back, 2 * 102));
	CHECK(back[0] == 0x82 && back[1] == 100 && back[2] == 'a' + 2);
	CHECK(back[102] == 0x82 && back[103] == 100 && back[104] == 'a' + 1);

	/* The last words: the BYE in a message, then a close frame. */
	pps_wire_record_t bye = {.kind = PPS_WIRE_BYE};
	bye.u.bye.reason = PPS_WIRE_BYE_NORMAL;
	n = encode(&bye, rec, sizeof(rec));
	CHECK_EQ_INT(pps_transport_send_record(f.t, &bye), 0);
	CHECK(peer_recv(&f, back, 2 + n + 4));
	CHECK(back[0] == 0x82 && memcmp(back + 2, rec, n) == 0);
	CHECK(back[2 + n] == 0x88 && back[2 + n + 1] == 2);
	CHECK_EQ_INT(back[2 + n + 2] << 8 | back[2 + n + 3], PPS_WS_CLOSE_GOING_AWAY);
	fixture_free(&f);
}

static void
test_websocket_bad_frame(void)
{
	fixture_t f;
	uint8_t frame[16] = {0x82, 0x02, 0x01, 0x01}; /* unmasked */

	fixture_new(&f, PPS_MINBUF_MODE_MINBUF);
	upgrade(&f);
	peer_send(&f, frame, 4);
	CHECK(f.owner.ended && f.owner.how == PPS_TRANSPORT_END_PROTOCOL);
	CHECK(strstr(f.owner.why, "unmasked") != NULL, "%s", f.owner.why);
	CHECK_EQ_INT(f.owner.input_len, 0);
	fixture_free(&f);
}

/*
 * Pings: each answered with a Pong carrying its data, between frames. Before
 * the writer starts, at once; then in front of the writer's next packet (the
 * Pong alone while there is nothing to stream), and two Pings that come
 * before the writer could send get one Pong, the latest's.
 */
static void
test_websocket_ping(void)
{
	fixture_t f;
	uint8_t frame[64], back[512];
	size_t n;
	pps_minbuf_stats_t st;

	fixture_new(&f, PPS_MINBUF_MODE_MINBUF);
	upgrade(&f);
	n = client_frame(PPS_WS_OP_PING, (const uint8_t *)"early", 5, frame);
	peer_send(&f, frame, n);
	CHECK(peer_recv(&f, back, 7) && memcmp(back,
	                                       "\x8a\x05"
	                                       "early",
	                                       7) == 0);

	/* Streaming with nothing to send: two Pings in one segment. */
	CHECK_EQ_INT(pps_transport_start(f.t), 0);
	pps_transport_kick(f.t);
	n = client_frame(PPS_WS_OP_PING, (const uint8_t *)"one", 3, frame);
	n += client_frame(PPS_WS_OP_PING, (const uint8_t *)"two", 3, frame + n);
	peer_send(&f, frame, n);
	CHECK(peer_recv(&f, back, 5) && memcmp(back,
	                                       "\x8a\x03"
	                                       "two",
	                                       5) == 0);
	/* Nothing else was owed: next comes the packet the owner fills. */
	f.owner.packets_left = 1;
	pps_transport_kick(f.t);
	CHECK(peer_recv(&f, back, 102) && back[0] == 0x82 && back[1] == 100);

	/* With packets to send: the Pong goes in front of the first one's
	 * message, in the same packet. */
	f.owner.packets_left = 2;
	n = client_frame(PPS_WS_OP_PING, (const uint8_t *)"x", 1, frame);
	peer_send(&f, frame, n);
	CHECK(peer_recv(&f, back, 3 + 2 * 102));
	CHECK(memcmp(back, "\x8a\x01x", 3) == 0);
	CHECK(back[3] == 0x82 && back[4] == 100 && back[5] == 'a' + 2);
	CHECK(back[105] == 0x82 && back[106] == 100 && back[107] == 'a' + 1);
	/* The writer's packets: the Pong alone, then three of the owner's. */
	CHECK_EQ_INT(pps_transport_get_stats(f.t, &st), 0);
	CHECK_EQ_INT(st.packets, 4);
	CHECK_EQ_INT(f.owner.input_len, 0);
	CHECK(!f.owner.ended);
	fixture_free(&f);
}

/* The close frame that answers the peer's @payload (@len bytes): its code.
 * A valid close ends the connection as closed by the peer (the transport
 * answers it); an invalid one as a protocol error (the session refuses it). */
static int
answer_to_close(const uint8_t *payload, size_t len)
{
	fixture_t f;
	uint8_t frame[160], back[4];
	pps_wire_record_t bye = {.kind = PPS_WIRE_BYE};
	int code = -1;
	size_t n;

	fixture_new(&f, PPS_MINBUF_MODE_MINBUF);
	upgrade(&f);
	n = client_frame(PPS_WS_OP_CLOSE, payload, len, frame);
	peer_send(&f, frame, n);
	CHECK(f.owner.ended && (f.owner.how == PPS_TRANSPORT_END_PROTOCOL ||
	                        f.owner.how == PPS_TRANSPORT_END_CLOSED));
	if (f.owner.how == PPS_TRANSPORT_END_PROTOCOL) {
		/* What the session does then: refuse it with a BYE. The peer,
		 * which closed, is told nothing but the close frame. */
		bye.u.bye.reason = PPS_WIRE_BYE_PROTOCOL;
		CHECK_EQ_INT(pps_transport_send_record(f.t, &bye), 0);
	}
	if (peer_recv(&f, back, 4) && back[0] == 0x88 && back[1] == 2)
		code = back[2] << 8 | back[3];
	fixture_free(&f);
	return code;
}

static void
test_websocket_close_codes(void)
{
	static const uint16_t invalid[] = {0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535};
	static const uint16_t valid[] = {1000, 1001, 3000, 4999};
	uint8_t payload[8];

	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
		payload[0] = (uint8_t)(invalid[i] >> 8);
		payload[1] = (uint8_t)invalid[i];
		CHECK_EQ_INT(answer_to_close(payload, 2), PPS_WS_CLOSE_PROTOCOL);
	}
	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
		payload[0] = (uint8_t)(valid[i] >> 8);
		payload[1] = (uint8_t)valid[i];
		CHECK_EQ_INT(answer_to_close(payload, 2), valid[i]);
	}
	/* A reason that is not UTF-8 (an overlong '/'). */
	memcpy(payload, "\x03\xe8\xc0\xaf", 4);
	CHECK_EQ_INT(answer_to_close(payload, 4), PPS_WS_CLOSE_INVALID_DATA);
}

/* Input of the read-budget test: calls only. */
static void
count_input_cb(const uint8_t *buf, size_t len, void *user)
{
	(*(unsigned *)user)++;
}

/*
 * A peer that keeps its connection full gets PPS_TRANSPORT_READS_BURST reads
 * at once, then PPS_TRANSPORT_READS_PER_S: between, the socket is not read
 * (its TCP window closes), however often the loop turns; reading resumes
 * by itself.
 */
static void
test_read_budget(void)
{
	enum { CHUNKS = 400 };
	static uint8_t chunk[4096];
	struct event_base *base = event_base_new();
	pps_minbuf_params_t params;
	pps_transport_t *t;
	unsigned reads = 0;
	int fds[2];
	int64_t start, elapsed_us;
	size_t sent = 0;

	REQUIRE(base);
	pps_minbuf_params_init(&params);
	pps_test_tcp_pair(fds);
	REQUIRE(pps_socket_set_nonblocking(fds[0]) == 0);
	t = pps_transport_tcp_open(base, fds[1], &params);
	REQUIRE(t);
	CHECK_EQ_INT(pps_transport_set_events(
	                 t, &(pps_transport_events_t){.input_cb = count_input_cb}, &reads),
	             0);
	start = pps_time_monotonic_us();
	for (int pass = 0; pass < 2000; pass++) {
		/* Keep the socket full. */
		while (sent < CHUNKS * sizeof(chunk)) {
			ssize_t n = send(fds[0], chunk, sizeof(chunk), MSG_NOSIGNAL | MSG_DONTWAIT);

			if (n <= 0)
				break;
			sent += (size_t)n;
		}
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	}
	elapsed_us = pps_time_monotonic_us() - start;
	printf("2000 passes in %.1f ms: %u reads\n", (double)elapsed_us / 1000, reads);
	CHECK(reads >= PPS_TRANSPORT_READS_BURST);
	CHECK(reads <= PPS_TRANSPORT_READS_BURST + 2 +
	                   (unsigned)((double)elapsed_us * PPS_TRANSPORT_READS_PER_S / 1e6));
	/* Reading resumes without a new byte: the next read is due within
	 * 1 / PPS_TRANSPORT_READS_PER_S. */
	unsigned before = reads;
	struct timeval wait = {0, 200000};
	event_base_loopexit(base, &wait);
	event_base_dispatch(base);
	CHECK(reads > before);
	pps_transport_free(t);
	close(fds[0]);
	event_base_free(base);
}

int
main(void)
{
	test_plain_client();
	test_names_and_caps();
	test_http_get();
	test_replay();
	test_websocket();
	test_websocket_bad_frame();
	test_websocket_ping();
	test_websocket_close_codes();
	test_read_budget();
	return pps_test_result();
}
