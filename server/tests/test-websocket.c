/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the WebSocket framing and handshake (server/pps-websocket.c)
 * and the embedded viewer files (server/pps-web.c): no sockets.
 */
#include <errno.h>
#include <string.h>

#include "pps-test.h"
#include "pps-web.h"
#include "pps-websocket.h"

#define KEY_EXAMPLE "dGhlIHNhbXBsZSBub25jZQ=="

static const char upgrade_request[] = "GET /stream?token=x HTTP/1.1\r\n"
                                      "Host: 127.0.0.1:7400\r\n"
                                      "Upgrade: WebSocket\r\n"
                                      "Connection: keep-alive, Upgrade\r\n"
                                      "Sec-WebSocket-Key: " KEY_EXAMPLE "\r\n"
                                      "Sec-WebSocket-Version: 13\r\n"
                                      "\r\n";

static void
test_request(void)
{
	pps_ws_request_t req;
	char accept[PPS_WS_ACCEPT_BYTES];
	const char *why = NULL;
	char big[PPS_WS_MAX_REQUEST_BYTES + 10];

	/* Incomplete at every length short of the blank line. */
	for (size_t n = 0; n < sizeof(upgrade_request) - 1; n++)
		CHECK_EQ_INT(pps_ws_request_parse(upgrade_request, n, &req), -EAGAIN);
	CHECK_EQ_INT(pps_ws_request_parse(upgrade_request, sizeof(upgrade_request) - 1, &req), 0);
	CHECK(strcmp(req.method, "GET") == 0);
	CHECK(strcmp(req.path, "/stream") == 0);
	CHECK_EQ_INT(req.minor_version, 1);
	CHECK(req.upgrade_websocket);
	CHECK(req.connection_upgrade);
	CHECK_EQ_INT(req.version, 13);
	CHECK_EQ_INT(req.head_bytes, sizeof(upgrade_request) - 1);
	CHECK_EQ_INT(pps_ws_handshake(&req, accept, &why), 0);
	/* RFC 6455 section 1.3's example. */
	CHECK(strcmp(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") == 0);

	/* Bad handshakes. */
	{
		pps_ws_request_t bad = req;

		bad.version = 8;
		CHECK_EQ_INT(pps_ws_handshake(&bad, accept, &why), -EINVAL);
		bad = req;
		strcpy(bad.key, "short==");
		CHECK_EQ_INT(pps_ws_handshake(&bad, accept, &why), -EINVAL);
		bad = req;
		strcpy(bad.key, "dGhlIHNhbXBsZSBub25jZ!==");
		CHECK_EQ_INT(pps_ws_handshake(&bad, accept, &why), -EINVAL);
		bad = req;
		bad.connection_upgrade = false;
		CHECK_EQ_INT(pps_ws_handshake(&bad, accept, &why), -EINVAL);
		bad = req;
		strcpy(bad.method, "POST");
		CHECK_EQ_INT(pps_ws_handshake(&bad, accept, &why), -EINVAL);
		bad = req;
		bad.minor_version = 0;
		CHECK_EQ_INT(pps_ws_handshake(&bad, accept, &why), -EINVAL);
		CHECK(why && why[0]);
	}

	/* Plain GET; malformed heads. */
	{
		static const char get[] = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";
		static const char no_colon[] = "GET / HTTP/1.1\r\nHost x\r\n\r\n";
		static const char bad_version[] = "GET / HTTP/2.0\r\n\r\n";
		static const char no_slash[] = "GET index.html HTTP/1.1\r\n\r\n";
		static const char nul[] = "GET / HTTP/1.1\r\nA: \0\r\n\r\n";

		CHECK_EQ_INT(pps_ws_request_parse(get, strlen(get), &req), 0);
		CHECK(!pps_ws_request_is_upgrade(&req));
		CHECK(strcmp(req.path, "/") == 0);
		CHECK_EQ_INT(pps_ws_request_parse(no_colon, strlen(no_colon), &req), -EINVAL);
		CHECK_EQ_INT(pps_ws_request_parse(bad_version, strlen(bad_version), &req), -EINVAL);
		CHECK_EQ_INT(pps_ws_request_parse(no_slash, strlen(no_slash), &req), -EINVAL);
		CHECK_EQ_INT(pps_ws_request_parse(nul, sizeof(nul) - 1, &req), -EINVAL);
	}
	/* A head that never ends is refused at the limit, not buffered on. */
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	CHECK_EQ_INT(pps_ws_request_parse(big, PPS_WS_MAX_REQUEST_BYTES - 1, &req), -EAGAIN);
	CHECK_EQ_INT(pps_ws_request_parse(big, sizeof(big), &req), -EMSGSIZE);
}

static void
test_server_frames(void)
{
	uint8_t h[10], buf[PPS_WS_DATA_HEADER_BYTES + 70000];

	CHECK_EQ_INT(pps_ws_frame_header(PPS_WS_OP_BINARY, 125, h), 2);
	CHECK_EQ_INT(h[0], 0x82);
	CHECK_EQ_INT(h[1], 125);
	CHECK_EQ_INT(pps_ws_frame_header(PPS_WS_OP_BINARY, 126, h), 4);
	CHECK_EQ_INT(h[1], 126);
	CHECK_EQ_INT(h[2] << 8 | h[3], 126);
	CHECK_EQ_INT(pps_ws_frame_header(PPS_WS_OP_BINARY, 65535, h), 4);
	CHECK_EQ_INT(pps_ws_frame_header(PPS_WS_OP_CLOSE, 65536, h), 10);
	CHECK_EQ_INT(h[0], 0x88);
	CHECK_EQ_INT(h[1], 127);
	CHECK_EQ_INT(h[7], 1);

	/* A small packet: 2-byte header, payload moved up. */
	memset(buf, 0, sizeof(buf));
	memcpy(buf + PPS_WS_DATA_HEADER_BYTES, "\x01\x08\x00\x00", 4);
	CHECK_EQ_INT(pps_ws_wrap_binary(buf, 4), 6);
	CHECK(memcmp(buf, "\x82\x04\x01\x08\x00\x00", 6) == 0);
	/* An MSS-sized packet: 4-byte header, payload in place. */
	memset(buf + PPS_WS_DATA_HEADER_BYTES, 0xab, 1448);
	CHECK_EQ_INT(pps_ws_wrap_binary(buf, 1448), 1452);
	CHECK(memcmp(buf, "\x82\x7e\x05\xa8", 4) == 0);
	CHECK_EQ_INT(buf[4], 0xab);
	CHECK_EQ_INT(buf[1451], 0xab);
}

/* One masked client frame of @payload into @out; returns its length. */
static size_t
client_frame(uint8_t first, const uint8_t *payload, size_t len, uint8_t *out)
{
	static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
	size_t n = 0;

	out[n++] = first;
	if (len < 126) {
		out[n++] = (uint8_t)(0x80 | len);
	} else {
		out[n++] = 0x80 | 126;
		out[n++] = (uint8_t)(len >> 8);
		out[n++] = (uint8_t)len;
	}
	memcpy(out + n, mask, 4);
	n += 4;
	for (size_t i = 0; i < len; i++)
		out[n++] = payload[i] ^ mask[i & 3];
	return n;
}

static void
test_reader(void)
{
	static const uint8_t hello[] = {1, 1, 0, 8, 0, 1, 0, 0, 0, 0, 0, 0};
	uint8_t stream[512], buf[512], got[512];
	size_t n = 0, data, got_len = 0;
	pps_ws_reader_t *r = pps_ws_reader_new(PPS_WEB_MAX_CLIENT_MESSAGE_BYTES);

	REQUIRE(r);
	/* A record in a fragmented message with a ping between its fragments,
	 * then a whole message; fed one byte at a time. */
	n += client_frame(0x02, hello, 5, stream + n);
	n += client_frame(0x89, (const uint8_t *)"hi", 2, stream + n);
	n += client_frame(0x80, hello + 5, sizeof(hello) - 5, stream + n);
	n += client_frame(0x82, hello, sizeof(hello), stream + n);
	for (size_t i = 0; i < n; i++) {
		buf[0] = stream[i];
		CHECK_EQ_INT(pps_ws_reader_feed(r, buf, 1, &data), 0);
		CHECK(data <= 1);
		memcpy(got + got_len, buf, data);
		got_len += data;
	}
	CHECK_EQ_INT(got_len, 2 * sizeof(hello));
	CHECK(memcmp(got, hello, sizeof(hello)) == 0);
	CHECK(memcmp(got + sizeof(hello), hello, sizeof(hello)) == 0);
	CHECK_EQ_INT(pps_ws_reader_pings(r), 1);
	/* All at once, in place. */
	memcpy(buf, stream, n);
	CHECK_EQ_INT(pps_ws_reader_feed(r, buf, n, &data), 0);
	CHECK_EQ_INT(data, 2 * sizeof(hello));
	CHECK(memcmp(buf, got, data) == 0);

	/* The peer's close: -ECONNRESET and its code; data before it still handed out. */
	n = client_frame(0x82, hello, sizeof(hello), stream);
	n += client_frame(0x88, (const uint8_t *)"\x03\xe9", 2, stream + n);
	CHECK_EQ_INT(pps_ws_reader_feed(r, stream, n, &data), -ECONNRESET);
	CHECK_EQ_INT(data, sizeof(hello));
	CHECK_EQ_INT(pps_ws_reader_close_code(r), 1001);
	CHECK_EQ_INT(pps_ws_reader_feed(r, stream, n, &data), -ECONNRESET);
	pps_ws_reader_free(r);

	/* Unmasked: 1002. */
	r = pps_ws_reader_new(PPS_WEB_MAX_CLIENT_MESSAGE_BYTES);
	memcpy(stream, "\x82\x02\x01\x02", 4);
	CHECK_EQ_INT(pps_ws_reader_feed(r, stream, 4, &data), -EPROTO);
	CHECK_EQ_INT(pps_ws_reader_close_code(r), PPS_WS_CLOSE_PROTOCOL);
	CHECK(strstr(pps_ws_reader_error(r), "unmasked") != NULL);
	pps_ws_reader_free(r);

	/* Over the message limit, refused from the header alone: 1009. */
	r = pps_ws_reader_new(PPS_WEB_MAX_CLIENT_MESSAGE_BYTES);
	memcpy(stream, "\x82\xfe\x02\x01\x00\x00\x00\x00", 8); /* 513 bytes announced */
	CHECK_EQ_INT(pps_ws_reader_feed(r, stream, 8, &data), -EMSGSIZE);
	CHECK_EQ_INT(pps_ws_reader_close_code(r), PPS_WS_CLOSE_TOO_BIG);
	pps_ws_reader_free(r);
	/* ... also across the fragments of one message. */
	r = pps_ws_reader_new(16);
	memset(buf, 0, sizeof(buf));
	n = client_frame(0x02, buf, 10, stream);
	n += client_frame(0x80, buf, 10, stream + n);
	CHECK_EQ_INT(pps_ws_reader_feed(r, stream, n, &data), -EMSGSIZE);
	pps_ws_reader_free(r);

	/* Text: 1003. A 64-bit length: over any limit. Reserved bits, bad opcode,
	 * long ping, continuation of nothing: 1002. */
	{
		static const struct {
			const char *bytes;
			size_t len;
			int ret;
			uint16_t code;
		} bad[] = {
		    {"\x81\x80\0\0\0\0", 6, -ENOTSUP, PPS_WS_CLOSE_UNSUPPORTED},
		    {"\x82\xff\0\0\0\0\0\0\x10\0\0\0\0\0", 14, -EMSGSIZE, PPS_WS_CLOSE_TOO_BIG},
		    {"\xc2\x80\0\0\0\0", 6, -EPROTO, PPS_WS_CLOSE_PROTOCOL},
		    {"\x83\x80\0\0\0\0", 6, -EPROTO, PPS_WS_CLOSE_PROTOCOL},
		    {"\x89\xfe\0\x7e\0\0\0\0", 8, -EPROTO, PPS_WS_CLOSE_PROTOCOL},
		    {"\x09\x80\0\0\0\0", 6, -EPROTO, PPS_WS_CLOSE_PROTOCOL},
		    {"\x80\x80\0\0\0\0", 6, -EPROTO, PPS_WS_CLOSE_PROTOCOL},
		    {"\x88\x81\0\0\0\0\0", 7, -EPROTO, PPS_WS_CLOSE_PROTOCOL},
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			r = pps_ws_reader_new(PPS_WEB_MAX_CLIENT_MESSAGE_BYTES);
			memcpy(stream, bad[i].bytes, bad[i].len);
			CHECK_EQ_INT(pps_ws_reader_feed(r, stream, bad[i].len, &data), bad[i].ret);
			CHECK_EQ_INT(pps_ws_reader_close_code(r), bad[i].code);
			/* It stays failed. */
			CHECK_EQ_INT(pps_ws_reader_feed(r, stream, 1, &data), bad[i].ret);
			pps_ws_reader_free(r);
		}
	}
}

/* A close frame with @code and the @reason_len bytes of @reason, fed at once. */
static int
feed_close(pps_ws_reader_t *r, uint16_t code, const char *reason, size_t reason_len)
{
	uint8_t payload[PPS_WS_MAX_CONTROL_BYTES], stream[8 + PPS_WS_MAX_CONTROL_BYTES];
	size_t data, n;

	REQUIRE(reason_len + 2 <= sizeof(payload));
	payload[0] = (uint8_t)(code >> 8);
	payload[1] = (uint8_t)code;
	memcpy(payload + 2, reason, reason_len);
	n = client_frame(0x88, payload, 2 + reason_len, stream);
	return pps_ws_reader_feed(r, stream, n, &data);
}

static void
test_reader_close_codes(void)
{
	/* Codes an endpoint must not send (RFC 6455 section 7.4): below 1000,
	 * the three for reporting only, 1015, unassigned, beyond 4999. */
	static const uint16_t invalid[] = {0,    1,    999,  1004, 1005, 1006, 1015,
	                                   1016, 1100, 2000, 2999, 5000, 65535};
	static const uint16_t valid[] = {1000, 1001, 1002, 1003, 1007, 1008, 1009,
	                                 1010, 1011, 1012, 1013, 1014, 3000, 4999};
	/* Not UTF-8: a lone continuation byte, a truncated sequence, an overlong
	 * '/', a surrogate, past U+10FFFF, a byte that never appears. */
	static const char *const not_utf8[] = {"\x80",         "ok\xe2\x82",       "\xc0\xaf",
	                                       "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff"};
	pps_ws_reader_t *r;

	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
		r = pps_ws_reader_new(PPS_WEB_MAX_CLIENT_MESSAGE_BYTES);
		REQUIRE(r);
		CHECK(feed_close(r, invalid[i], "", 0) == -EPROTO, "code %u", invalid[i]);
		CHECK(pps_ws_reader_close_code(r) == PPS_WS_CLOSE_PROTOCOL, "code %u: %u",
		      invalid[i], pps_ws_reader_close_code(r));
		CHECK(pps_ws_reader_close_received(r));
		CHECK(strstr(pps_ws_reader_error(r), "close code") != NULL, "%s",
		      pps_ws_reader_error(r));
		pps_ws_reader_free(r);
	}
	/* Valid codes come back as the peer's, with or without a reason (UTF-8
	 * of two, three and four bytes included). */
	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
		static const char reason[] = "bye \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";

		r = pps_ws_reader_new(PPS_WEB_MAX_CLIENT_MESSAGE_BYTES);
		REQUIRE(r);
		CHECK(feed_close(r, valid[i], reason, i % 2 ? sizeof(reason) - 1 : 0) ==
		          -ECONNRESET,
		      "code %u: %s", valid[i], pps_ws_reader_error(r));
		CHECK_EQ_INT(pps_ws_reader_close_code(r), valid[i]);
		CHECK(pps_ws_reader_close_received(r));
		pps_ws_reader_free(r);
	}
	/* A reason that is not UTF-8: 1007, whatever the code. */
	for (size_t i = 0; i < sizeof(not_utf8) / sizeof(not_utf8[0]); i++) {
		r = pps_ws_reader_new(PPS_WEB_MAX_CLIENT_MESSAGE_BYTES);
		REQUIRE(r);
		CHECK(feed_close(r, 1000, not_utf8[i], strlen(not_utf8[i])) == -EPROTO,
		      "reason %zu", i);
		CHECK(pps_ws_reader_close_code(r) == PPS_WS_CLOSE_INVALID_DATA, "reason %zu: %u", i,
		      pps_ws_reader_close_code(r));
		pps_ws_reader_free(r);
	}
	/* No payload: no code, 1005 for the owner to answer with its own. */
	r = pps_ws_reader_new(PPS_WEB_MAX_CLIENT_MESSAGE_BYTES);
	REQUIRE(r);
	{
		uint8_t stream[8];
		size_t data, n = client_frame(0x88, NULL, 0, stream);

		CHECK_EQ_INT(pps_ws_reader_feed(r, stream, n, &data), -ECONNRESET);
		CHECK_EQ_INT(pps_ws_reader_close_code(r), 1005);
	}
	pps_ws_reader_free(r);
}

static void
test_reader_pong(void)
{
	uint8_t stream[512], out[PPS_WS_MAX_CONTROL_FRAME_BYTES];
	uint8_t big[PPS_WS_MAX_CONTROL_BYTES];
	size_t n, data;
	pps_ws_reader_t *r = pps_ws_reader_new(PPS_WEB_MAX_CLIENT_MESSAGE_BYTES);

	REQUIRE(r);
	CHECK_EQ_INT(pps_ws_reader_pong_bytes(r), 0);
	CHECK_EQ_INT(pps_ws_reader_pong(r, out, sizeof(out)), 0);
	/* A Ping: its Pong carries the same application data, once. */
	n = client_frame(0x89, (const uint8_t *)"abc", 3, stream);
	CHECK_EQ_INT(pps_ws_reader_feed(r, stream, n, &data), 0);
	CHECK_EQ_INT(data, 0);
	CHECK_EQ_INT(pps_ws_reader_pong_bytes(r), 5);
	CHECK_EQ_INT(pps_ws_reader_pong(r, out, 4), 0); /* no room: still owed */
	CHECK_EQ_INT(pps_ws_reader_pong(r, out, sizeof(out)), 5);
	CHECK(memcmp(out,
	             "\x8a\x03"
	             "abc",
	             5) == 0);
	CHECK_EQ_INT(pps_ws_reader_pong_bytes(r), 0);
	CHECK_EQ_INT(pps_ws_reader_pong(r, out, sizeof(out)), 0);

	/* Many Pings before the Pong leaves: one Pong, the latest's data. */
	memset(big, 0x5a, sizeof(big));
	n = client_frame(0x89, (const uint8_t *)"one", 3, stream);
	n += client_frame(0x89, big, sizeof(big), stream + n);
	n += client_frame(0x89, (const uint8_t *)"two", 3, stream + n);
	CHECK_EQ_INT(pps_ws_reader_feed(r, stream, n, &data), 0);
	CHECK_EQ_INT(pps_ws_reader_pong_bytes(r), 5);
	CHECK_EQ_INT(pps_ws_reader_pong(r, out, sizeof(out)), 5);
	CHECK(memcmp(out + 2, "two", 3) == 0);
	CHECK_EQ_INT(pps_ws_reader_pings(r), 4);
	CHECK_EQ_INT(pps_ws_reader_pings_superseded(r), 2);
	/* The largest, and an empty one. */
	n = client_frame(0x89, big, sizeof(big), stream);
	CHECK_EQ_INT(pps_ws_reader_feed(r, stream, n, &data), 0);
	CHECK_EQ_INT(pps_ws_reader_pong(r, out, sizeof(out)), PPS_WS_MAX_CONTROL_FRAME_BYTES);
	CHECK(out[0] == 0x8a && out[1] == PPS_WS_MAX_CONTROL_BYTES &&
	      memcmp(out + 2, big, sizeof(big)) == 0);
	n = client_frame(0x89, NULL, 0, stream);
	CHECK_EQ_INT(pps_ws_reader_feed(r, stream, n, &data), 0);
	CHECK_EQ_INT(pps_ws_reader_pong(r, out, sizeof(out)), 2);
	CHECK(out[0] == 0x8a && out[1] == 0);

	/* A Ping, then the peer's close: it reads nothing more, no Pong. */
	n = client_frame(0x89, (const uint8_t *)"x", 1, stream);
	n += client_frame(0x88, (const uint8_t *)"\x03\xe8", 2, stream + n);
	CHECK_EQ_INT(pps_ws_reader_feed(r, stream, n, &data), -ECONNRESET);
	CHECK_EQ_INT(pps_ws_reader_pong_bytes(r), 0);
	pps_ws_reader_free(r);
}

static void
test_files(void)
{
	const pps_web_file_t *f = pps_web_file_find("/");

	REQUIRE(f);
	CHECK(strcmp(f->name, "index.html") == 0);
	CHECK(strncmp(f->content_type, "text/html", 9) == 0);
	CHECK(f->size > 0);
	f = pps_web_file_find("/viewer.js");
	CHECK(f && strncmp(f->content_type, "text/javascript", 15) == 0);
	CHECK(pps_web_file_find("/../meson.build") == NULL);
	CHECK(pps_web_file_find("/nope.js") == NULL);
	CHECK(pps_web_file_find("viewer.js") == NULL);
	CHECK(pps_web_sniff((const uint8_t *)"GET", 3));
	CHECK(!pps_web_sniff((const uint8_t *)"\x01\x01", 2));
}

int
main(void)
{
	test_request();
	test_server_frames();
	test_reader();
	test_reader_close_codes();
	test_reader_pong();
	test_files();
	return pps_test_result();
}
