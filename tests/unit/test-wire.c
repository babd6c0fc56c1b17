/* SPDX-License-Identifier: MIT */
/* Wire format: round trip of every record kind, any split of the byte stream,
 * and each rejection with its error code. */
#include "pps-test.h"
#include "pps-wire.h"

#include <errno.h>
#include <string.h>

static uint8_t payload[1200];

static size_t
make_records(pps_wire_record_t *r)
{
	size_t n = 0;

	memset(r, 0, 14 * sizeof(*r));
	r[n].kind = PPS_WIRE_HELLO;
	r[n].u.hello.protocol_version = PPS_WIRE_VERSION;
	r[n].u.hello.max_record_bytes = 1500;
	r[n].u.hello.name_len = 7;
	memcpy(r[n].u.hello.name, "viewer1", 8);
	r[n].u.hello.auth_len = 3;
	memcpy(r[n].u.hello.auth, "\x01\x02\x03", 3);
	n++;
	r[n].kind = PPS_WIRE_STREAM_INFO;
	r[n].u.stream_info = (pps_wire_stream_info_t){.protocol_version = PPS_WIRE_VERSION,
	                                              .codec = 1,
	                                              .upscale_filter = 1,
	                                              .width = 640,
	                                              .height = 480,
	                                              .base_width = 320,
	                                              .base_height = 240,
	                                              .fps_num = 30,
	                                              .fps_den = 1,
	                                              .window_frames = 2,
	                                              .temporal_layers = 3,
	                                              .quality_layers = 2,
	                                              .priority_policy = 0,
	                                              .latency_budget_ms = 250,
	                                              .gop_frames = 60};
	n++;
	r[n].kind = PPS_WIRE_WINDOW_BEGIN;
	r[n].u.window_begin = (pps_wire_window_begin_t){.window_id = 77,
	                                                .first_capture_us = 1700000000123456LL,
	                                                .deadline_us = 1700000000373456LL,
	                                                .frames = 2,
	                                                .adus = 4,
	                                                .bytes = 12345,
	                                                .first_adu_id = 998};
	n++;
	r[n].kind = PPS_WIRE_ADU_FRAGMENT;
	r[n].u.adu_fragment = (pps_wire_adu_fragment_t){.window_id = 77,
	                                                .adu_id = 1001,
	                                                .frame_index = 153,
	                                                .capture_us = 1700000000123456LL,
	                                                .decode_order = 99,
	                                                .frame_type = 2,
	                                                .temporal_layer = 1,
	                                                .quality_layer = 1,
	                                                .dep_count = 3,
	                                                .priority = 5,
	                                                .deps = {990, 995, 1000},
	                                                .offset = 100,
	                                                .total_bytes = 5000,
	                                                .payload_len = sizeof(payload),
	                                                .payload = payload};
	n++;
	r[n].kind = PPS_WIRE_WINDOW_END;
	r[n].u.window_end = (pps_wire_window_end_t){.window_id = 77,
	                                            .adus_sent = 3,
	                                            .adus_dropped = 1,
	                                            .bytes_sent = 9000,
	                                            .bytes_dropped = 3345};
	n++;
	r[n].kind = PPS_WIRE_CLOCK_PING;
	r[n].u.clock_ping = (pps_wire_clock_ping_t){.seq = 9, .client_send_us = -5};
	n++;
	r[n].kind = PPS_WIRE_CLOCK_PONG;
	r[n].u.clock_pong = (pps_wire_clock_pong_t){.seq = 9,
	                                            .client_send_us = -5,
	                                            .server_recv_us = 1700000000000001LL,
	                                            .server_send_us = 1700000000000002LL};
	n++;
	r[n].kind = PPS_WIRE_BYE;
	r[n].u.bye.reason = PPS_WIRE_BYE_SERVER_FULL;
	r[n].u.bye.text_len = 11;
	memcpy(r[n].u.bye.text, "server full", 12);
	n++;
	r[n].kind = PPS_WIRE_CHALLENGE;
	r[n].u.challenge.method = PPS_WIRE_AUTH_HMAC_SHA256;
	for (int i = 0; i < PPS_WIRE_NONCE_BYTES; i++)
		r[n].u.challenge.nonce[i] = (uint8_t)(i * 13 + 1);
	n++;
	r[n].kind = PPS_WIRE_AUTH;
	r[n].u.auth.method = PPS_WIRE_AUTH_HMAC_SHA256;
	for (int i = 0; i < PPS_WIRE_MAC_BYTES; i++)
		r[n].u.auth.mac[i] = (uint8_t)(255 - i);
	n++;
	r[n].kind = PPS_WIRE_RECOVERY_REQUEST;
	r[n].u.recovery_request =
	    (pps_wire_recovery_request_t){.frame_index = 4000000001u, .quality_layer = 1};
	n++;
	r[n].kind = PPS_WIRE_AUDIO_FRAME;
	r[n].u.audio_frame = (pps_wire_audio_frame_t){.seq = 4000000002u,
	                                              .capture_us = 1700000000123456LL,
	                                              .duration_us = 20000,
	                                              .flags = PPS_WIRE_AUDIO_SPEECH,
	                                              .payload_len = 80,
	                                              .payload = payload};
	n++;
	/* A STREAM_INFO with the audio track, as a client that asked for audio gets it. */
	r[n] = r[1];
	r[n].u.stream_info.audio_codec = PPS_WIRE_AUDIO_CODEC_OPUS;
	r[n].u.stream_info.audio_channels = 1;
	r[n].u.stream_info.audio_transport = PPS_WIRE_AUDIO_OWN_CONNECTION;
	r[n].u.stream_info.audio_frame_us = 20000;
	r[n].u.stream_info.audio_rate_hz = 48000;
	n++;
	r[n].kind = PPS_WIRE_PATH_REPORT;
	r[n].u.path_report =
	    (pps_wire_path_report_t){.subscribers = 3,
	                             .slowest_bps = 480000,
	                             .slowest_min_rtt_us = 50000,
	                             .fastest_bps = 8100000000ull,
	                             .fastest_min_rtt_us = 4000000000u,
	                             .flags = PPS_WIRE_PATH_CUT | PPS_WIRE_PATH_STARTING};
	n++;
	return n;
}

static bool
same_record(const pps_wire_record_t *a, const pps_wire_record_t *b)
{
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case PPS_WIRE_HELLO:
		return a->u.hello.protocol_version == b->u.hello.protocol_version &&
		       a->u.hello.max_record_bytes == b->u.hello.max_record_bytes &&
		       a->u.hello.name_len == b->u.hello.name_len &&
		       strcmp(a->u.hello.name, b->u.hello.name) == 0 &&
		       a->u.hello.auth_len == b->u.hello.auth_len &&
		       memcmp(a->u.hello.auth, b->u.hello.auth, a->u.hello.auth_len) == 0 &&
		       a->u.hello.flags == b->u.hello.flags &&
		       a->u.hello.stream_len == b->u.hello.stream_len &&
		       strcmp(a->u.hello.stream, b->u.hello.stream) == 0 &&
		       a->u.hello.audio_pool == b->u.hello.audio_pool;
	case PPS_WIRE_STREAM_INFO:
		return memcmp(&a->u.stream_info, &b->u.stream_info, sizeof(a->u.stream_info)) == 0;
	case PPS_WIRE_WINDOW_BEGIN:
		return memcmp(&a->u.window_begin, &b->u.window_begin, sizeof(a->u.window_begin)) ==
		       0;
	case PPS_WIRE_ADU_FRAGMENT: {
		const pps_wire_adu_fragment_t *x = &a->u.adu_fragment, *y = &b->u.adu_fragment;

		return x->window_id == y->window_id && x->adu_id == y->adu_id &&
		       x->frame_index == y->frame_index && x->capture_us == y->capture_us &&
		       x->decode_order == y->decode_order && x->frame_type == y->frame_type &&
		       x->temporal_layer == y->temporal_layer &&
		       x->quality_layer == y->quality_layer && x->dep_count == y->dep_count &&
		       x->priority == y->priority &&
		       memcmp(x->deps, y->deps, x->dep_count * sizeof(x->deps[0])) == 0 &&
		       x->offset == y->offset && x->total_bytes == y->total_bytes &&
		       x->payload_len == y->payload_len &&
		       memcmp(x->payload, y->payload, x->payload_len) == 0;
	}
	case PPS_WIRE_WINDOW_END:
		return memcmp(&a->u.window_end, &b->u.window_end, sizeof(a->u.window_end)) == 0;
	case PPS_WIRE_CLOCK_PING:
		return memcmp(&a->u.clock_ping, &b->u.clock_ping, sizeof(a->u.clock_ping)) == 0;
	case PPS_WIRE_CLOCK_PONG:
		return memcmp(&a->u.clock_pong, &b->u.clock_pong, sizeof(a->u.clock_pong)) == 0;
	case PPS_WIRE_BYE:
		return a->u.bye.reason == b->u.bye.reason &&
		       strcmp(a->u.bye.text, b->u.bye.text) == 0;
	case PPS_WIRE_CHALLENGE:
		return memcmp(&a->u.challenge, &b->u.challenge, sizeof(a->u.challenge)) == 0;
	case PPS_WIRE_AUTH:
		return memcmp(&a->u.auth, &b->u.auth, sizeof(a->u.auth)) == 0;
	case PPS_WIRE_RECOVERY_REQUEST:
		return a->u.recovery_request.frame_index == b->u.recovery_request.frame_index &&
		       a->u.recovery_request.quality_layer == b->u.recovery_request.quality_layer;
	case PPS_WIRE_PATH_REPORT:
		return memcmp(&a->u.path_report, &b->u.path_report, sizeof(a->u.path_report)) == 0;
	case PPS_WIRE_AUDIO_FRAME: {
		const pps_wire_audio_frame_t *x = &a->u.audio_frame, *y = &b->u.audio_frame;

		return x->seq == y->seq && x->capture_us == y->capture_us &&
		       x->duration_us == y->duration_us && x->flags == y->flags &&
		       x->payload_len == y->payload_len &&
		       memcmp(x->payload, y->payload, x->payload_len) == 0;
	}
	}
	return false;
}

/* Feeds @stream to a fresh parser split at @split (and in 1-byte steps when
 * @bytewise); checks the records come back equal. */
static void
check_stream(const uint8_t *stream, size_t size, const pps_wire_record_t *expect, size_t n,
             size_t split, bool bytewise)
{
	pps_wire_parser_t *p = pps_wire_parser_new(PPS_WIRE_MAX_RECORD_BYTES);
	size_t got = 0, offset = 0;

	REQUIRE(p);
	while (offset < size) {
		size_t chunk = bytewise ? 1 : (offset < split ? split - offset : size - offset);
		const uint8_t *data = stream + offset;
		size_t len = chunk;
		pps_wire_record_t out;
		int ret;

		while ((ret = pps_wire_parser_next(p, &data, &len, &out)) == 0) {
			CHECK(got < n && same_record(&out, &expect[got]));
			got++;
		}
		CHECK_EQ_INT(ret, -EAGAIN);
		CHECK_EQ_INT(len, 0);
		offset += chunk;
	}
	CHECK_EQ_INT(got, n);
	CHECK_EQ_INT(pps_wire_parser_pending(p), 0);
	pps_wire_parser_free(p);
}

static void
test_round_trip(void)
{
	pps_wire_record_t records[14];
	size_t n = make_records(records);
	uint8_t stream[4096];
	size_t size = 0;

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7 + 3);
	for (size_t i = 0; i < n; i++) {
		size_t len = 0, expect = 0;

		CHECK_EQ_INT(
		    pps_wire_encode(&records[i], stream + size, sizeof(stream) - size, &len), 0);
		CHECK(len > 0);
		CHECK_EQ_INT(pps_wire_record_size(&records[i], &expect), 0);
		CHECK_EQ_INT(len, expect);
		CHECK(strcmp(pps_wire_kind_name(records[i].kind), "unknown") != 0);
		size += len;
	}
	/* Every split point, and byte by byte. */
	for (size_t split = 0; split <= size; split++)
		check_stream(stream, size, records, n, split, false);
	check_stream(stream, size, records, n, 0, true);

	/* Each record alone, byte by byte, also returns it with nothing left. */
	for (size_t i = 0; i < n; i++) {
		uint8_t one[2048];
		size_t len = 0;

		CHECK_EQ_INT(pps_wire_encode(&records[i], one, sizeof(one), &len), 0);
		check_stream(one, len, &records[i], 1, 0, true);
	}
}

static void
test_encode_limits(void)
{
	pps_wire_record_t r[14];
	uint8_t small[16];
	size_t n = 7;

	make_records(r);
	CHECK_EQ_INT(pps_wire_encode(&r[3], small, sizeof(small), &n), -ENOSPC);
	CHECK_EQ_INT(n, 7); /* nothing written on failure */
	r[0].u.hello.name_len = PPS_WIRE_MAX_NAME_BYTES + 1;
	CHECK_EQ_INT(pps_wire_record_size(&r[0], &n), -EINVAL);
	r[3].u.adu_fragment.dep_count = PPS_WIRE_MAX_DEPS + 1;
	CHECK_EQ_INT(pps_wire_encode(&r[3], small, sizeof(small), &n), -EINVAL);
	CHECK_EQ_INT(pps_wire_fragment_overhead(0), 42);
}

/*
 * Parses @bytes in one chunk; returns what the parser's accessor says was
 * wrong (PPS_WIRE_OK for a record), after checking the call's errno matches
 * it and that the failure stays.
 */
static pps_wire_error_t
parse_one(const uint8_t *bytes, size_t size, size_t max, char *message, size_t message_size)
{
	pps_wire_parser_t *p = pps_wire_parser_new(max);
	pps_wire_record_t out;
	const uint8_t *data = bytes;
	size_t len = size;
	pps_wire_error_t code;
	int ret;

	REQUIRE(p);
	CHECK_EQ_INT(pps_wire_parser_error_code(p), PPS_WIRE_OK);
	ret = pps_wire_parser_next(p, &data, &len, &out);
	code = pps_wire_parser_error_code(p);
	snprintf(message, message_size, "%s", pps_wire_parser_error(p));
	if (ret == 0 || ret == -EAGAIN) {
		CHECK_EQ_INT(code, PPS_WIRE_OK);
		CHECK(message[0] == '\0');
	} else {
		uint8_t more[1] = {0};
		const uint8_t *m = more;
		size_t mlen = 1;

		/* -EMSGSIZE for a length over the maximum, -EPROTO for the rest. */
		CHECK_EQ_INT(ret, code == PPS_WIRE_ERR_TOO_LONG ? -EMSGSIZE : -EPROTO);
		CHECK(code != PPS_WIRE_OK && message[0] != '\0');
		/* A failed parser stays failed, with the same detail. */
		CHECK_EQ_INT(pps_wire_parser_next(p, &m, &mlen, &out), ret);
		CHECK_EQ_INT(pps_wire_parser_error_code(p), code);
	}
	pps_wire_parser_free(p);
	return code;
}

static long
encode_into(pps_wire_record_t *r, uint8_t *buf)
{
	size_t n = 0;

	REQUIRE(pps_wire_encode(r, buf, 2048, &n) == 0 && n > 0);
	return (long)n;
}

static void
test_rejections(void)
{
	pps_wire_record_t r[14];
	uint8_t buf[2048];
	char msg[256];
	long n;

	make_records(r);

	/* A good record: no error to report. */
	n = encode_into(&r[5], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_OK);
	/* A record cut short is not an error yet: -EAGAIN, nothing to report. */
	CHECK_EQ_INT(parse_one(buf, (size_t)n - 1, 4096, msg, sizeof(msg)), PPS_WIRE_OK);

	/* Unknown version in the header. */
	n = encode_into(&r[5], buf);
	buf[0] = 2;
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_VERSION);
	CHECK(strstr(msg, "version 2") != NULL);

	/* Unknown version inside STREAM_INFO. */
	r[1].u.stream_info.protocol_version = 9;
	n = encode_into(&r[1], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_VERSION);
	CHECK(strstr(msg, "protocol_version 9") != NULL);
	r[1].u.stream_info.protocol_version = PPS_WIRE_VERSION;

	/* CHALLENGE and AUTH: a method other than HMAC-SHA256, a short nonce. */
	r[8].u.challenge.method = 2;
	n = encode_into(&r[8], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	CHECK(strstr(msg, "CHALLENGE: method 2") != NULL);
	r[8].u.challenge.method = PPS_WIRE_AUTH_HMAC_SHA256;
	n = encode_into(&r[9], buf);
	buf[3] = (uint8_t)(buf[3] - 1); /* the MAC one byte short */
	CHECK_EQ_INT(parse_one(buf, (size_t)n - 1, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_SHORT);

	/* The audio frame's fields: flags, duration, an empty or oversize payload. */
	r[11].u.audio_frame.flags = 0x80;
	n = encode_into(&r[11], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	CHECK(strstr(msg, "AUDIO_FRAME: unknown flags") != NULL);
	r[11].u.audio_frame.flags = 0;
	r[11].u.audio_frame.duration_us = 100;
	n = encode_into(&r[11], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	CHECK(strstr(msg, "AUDIO_FRAME: duration 100") != NULL);
	r[11].u.audio_frame.duration_us = 20000;
	n = encode_into(&r[11], buf);
	buf[3] = 15; /* header fields only: no payload */
	CHECK_EQ_INT(parse_one(buf, 4 + 15, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	CHECK(strstr(msg, "AUDIO_FRAME: payload of 0 bytes") != NULL);
	{
		pps_wire_record_t big = r[11];
		size_t size;

		big.u.audio_frame.payload_len = PPS_WIRE_MAX_AUDIO_BYTES + 1;
		CHECK_EQ_INT(pps_wire_record_size(&big, &size), -EINVAL);
		/* The same on the wire, hand-made: refused by the parser. */
		n = encode_into(&r[11], buf);
		buf[2] = (uint8_t)((15 + PPS_WIRE_MAX_AUDIO_BYTES + 1) >> 8);
		buf[3] = (uint8_t)((15 + PPS_WIRE_MAX_AUDIO_BYTES + 1) & 0xff);
		memset(buf + n, 0, 4 + 15 + PPS_WIRE_MAX_AUDIO_BYTES + 1 - (size_t)n);
		CHECK_EQ_INT(
		    parse_one(buf, 4 + 15 + PPS_WIRE_MAX_AUDIO_BYTES + 1, 4096, msg, sizeof(msg)),
		    PPS_WIRE_ERR_FIELD);
		CHECK(strstr(msg, "AUDIO_FRAME: payload of 1276 bytes") != NULL);
	}
	/* The STREAM_INFO audio tail: unknown codec, transport, rate. */
	r[12].u.stream_info.audio_transport = 2;
	n = encode_into(&r[12], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	CHECK(strstr(msg, "audio transport 2") != NULL);
	r[12].u.stream_info.audio_transport = 0;
	r[12].u.stream_info.audio_rate_hz = 44100;
	n = encode_into(&r[12], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	CHECK(strstr(msg, "audio rate 44100") != NULL);
	r[12].u.stream_info.audio_rate_hz = 48000;
	r[12].u.stream_info.audio_codec = 9;
	n = encode_into(&r[12], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	CHECK(strstr(msg, "audio codec 9") != NULL);
	/* A tail of another size is trailing garbage, as before. */
	r[12].u.stream_info.audio_codec = PPS_WIRE_AUDIO_CODEC_OPUS;
	n = encode_into(&r[12], buf);
	buf[3] = (uint8_t)(buf[3] - 1);
	CHECK_EQ_INT(parse_one(buf, (size_t)n - 1, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_TRAILING);

	/* PATH_REPORT: rates out of order, rates without a subscriber, unknown flags. */
	for (int bad = 0; bad < 3; bad++) {
		pps_wire_record_t q = {.kind = PPS_WIRE_PATH_REPORT};

		q.u.path_report = (pps_wire_path_report_t){.subscribers = bad == 1 ? 0 : 2,
		                                           .slowest_bps = bad == 0 ? 900 : 100,
		                                           .fastest_bps = 800,
		                                           .flags = bad == 2 ? 0x40 : 0};
		n = encode_into(&q, buf);
		CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
		CHECK(strstr(msg, "PATH_REPORT") != NULL);
	}

	/* Unknown kind (the one after PATH_REPORT, and far beyond). */
	n = encode_into(&r[5], buf);
	buf[1] = PPS_WIRE_PATH_REPORT + 1;
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_KIND);
	buf[1] = 42;
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_KIND);

	/* Length over the configured maximum: refused from the header alone. */
	n = encode_into(&r[3], buf);
	CHECK_EQ_INT(parse_one(buf, PPS_WIRE_HEADER_BYTES, 512, msg, sizeof(msg)),
	             PPS_WIRE_ERR_TOO_LONG);
	CHECK(strstr(msg, "ADU_FRAGMENT") && strstr(msg, "maximum"));

	/* A huge length claimed by garbage does not make the parser allocate. */
	{
		uint8_t evil[4] = {PPS_WIRE_VERSION, PPS_WIRE_ADU_FRAGMENT, 0xff, 0xff};

		CHECK_EQ_INT(parse_one(evil, 4, 1500, msg, sizeof(msg)), PPS_WIRE_ERR_TOO_LONG);
	}

	/* Fragment whose offset + length exceeds the ADU's total. */
	r[3].u.adu_fragment.offset = 4000;
	n = encode_into(&r[3], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	CHECK(strstr(msg, "offset 4000") && strstr(msg, "total_bytes 5000"));
	r[3].u.adu_fragment.offset = 100;

	/* Offset near 2^32 must not wrap around the check. */
	r[3].u.adu_fragment.offset = 0xffffff00u;
	r[3].u.adu_fragment.total_bytes = 0xffffffffu;
	n = encode_into(&r[3], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	r[3].u.adu_fragment.offset = 100;
	r[3].u.adu_fragment.total_bytes = 5000;

	/* Trailing garbage: a fixed-size record with extra body bytes. */
	n = encode_into(&r[5], buf);
	buf[3] += 2; /* body length 12 -> 14 */
	buf[n] = 0xaa;
	buf[n + 1] = 0xbb;
	CHECK_EQ_INT(parse_one(buf, (size_t)n + 2, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_TRAILING);
	CHECK(strstr(msg, "CLOCK_PING") && strstr(msg, "2 bytes"));

	/* Short body. */
	n = encode_into(&r[4], buf);
	buf[3] -= 3;
	CHECK_EQ_INT(parse_one(buf, (size_t)n - 3, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_SHORT);

	/* HELLO name longer than allowed, and a NUL inside it. */
	n = encode_into(&r[0], buf);
	buf[4 + 6] = PPS_WIRE_MAX_NAME_BYTES + 1;
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	n = encode_into(&r[0], buf);
	buf[4 + 7 + 2] = 0;
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	/* A record limit too small to be honoured. */
	r[0].u.hello.max_record_bytes = 100;
	n = encode_into(&r[0], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	CHECK(strstr(msg, "max_record_bytes 100") != NULL);
	r[0].u.hello.max_record_bytes = 1500;
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);

	/* Layers and dependency counts out of range. */
	r[3].u.adu_fragment.dep_count = 1;
	n = encode_into(&r[3], buf);
	buf[4 + 27] = 5; /* dep_count */
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	n = encode_into(&r[3], buf);
	buf[4 + 25] = 7; /* temporal_layer */
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	/* Frame types: 4 (a disposable P frame) is the last there is. */
	n = encode_into(&r[3], buf);
	buf[4 + 24] = 4; /* frame_type */
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_OK);
	buf[4 + 24] = 5;
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);

	/* WINDOW_END: dropped flag with ADUs sent, unknown flags. */
	r[4].u.window_end.flags = PPS_WIRE_WINDOW_END_DROPPED;
	n = encode_into(&r[4], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	r[4].u.window_end.flags = 0x80;
	n = encode_into(&r[4], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	/* Rested: only with dropped (and so no ADU sent). */
	r[4].u.window_end.adus_sent = 0;
	r[4].u.window_end.flags = PPS_WIRE_WINDOW_END_RESTED;
	n = encode_into(&r[4], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	CHECK(strstr(msg, "rested but not dropped") != NULL);
	r[4].u.window_end.flags = PPS_WIRE_WINDOW_END_DROPPED | PPS_WIRE_WINDOW_END_RESTED;
	n = encode_into(&r[4], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_OK);

	/* STREAM_INFO with a zero frame rate or window. */
	r[1].u.stream_info.fps_den = 0;
	n = encode_into(&r[1], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	r[1].u.stream_info.fps_den = 1;
	r[1].u.stream_info.window_frames = 0;
	n = encode_into(&r[1], buf);
	CHECK_EQ_INT(parse_one(buf, (size_t)n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);

	/* Trailing bytes at the end of a stream stay visible as pending. */
	{
		pps_wire_parser_t *p = pps_wire_parser_new(4096);
		pps_wire_record_t out;
		const uint8_t *data;
		size_t len;

		make_records(r);
		n = encode_into(&r[5], buf);
		buf[n] = PPS_WIRE_VERSION;
		data = buf;
		len = (size_t)n + 1;
		CHECK_EQ_INT(pps_wire_parser_next(p, &data, &len, &out), 0);
		CHECK_EQ_INT(pps_wire_parser_next(p, &data, &len, &out), -EAGAIN);
		CHECK_EQ_INT(pps_wire_parser_pending(p), 1);
		pps_wire_parser_free(p);
	}

	/* Parser size limits. */
	CHECK(pps_wire_parser_new(PPS_WIRE_HEADER_BYTES) == NULL && errno == EINVAL);
	CHECK(pps_wire_parser_new(PPS_WIRE_MAX_RECORD_BYTES + 1) == NULL);
}

/* The MAC against an independent HMAC-SHA256 (Python's hmac module):
 * hmac.new(b"s3cret", b"ppstream-auth-v1" + bytes(range(32)), "sha256"). */
/* A parser told who sends refuses the other side's kinds at the header,
 * naming them, even when their body would not parse (a client's STREAM_INFO
 * of another version is not an "unsupported version"). */
static void
test_sender(void)
{
	pps_wire_record_t r[14];
	uint8_t buf[2048];
	const uint8_t *data;
	size_t len;
	pps_wire_record_t out;
	pps_wire_parser_t *p;

	make_records(r);
	for (unsigned kind = PPS_WIRE_HELLO; kind <= PPS_WIRE_PATH_REPORT; kind++) {
		bool client = kind == PPS_WIRE_HELLO || kind == PPS_WIRE_CLOCK_PING ||
		              kind == PPS_WIRE_AUTH || kind == PPS_WIRE_RECOVERY_REQUEST ||
		              kind == PPS_WIRE_PATH_REPORT;

		CHECK(pps_wire_kind_sent_by(kind, PPS_WIRE_FROM_ANY));
		CHECK(pps_wire_kind_sent_by(kind, PPS_WIRE_FROM_CLIENT) ==
		      (client || kind == PPS_WIRE_BYE));
		CHECK(pps_wire_kind_sent_by(kind, PPS_WIRE_FROM_SERVER) == !client);
	}
	r[1].u.stream_info.protocol_version = 9;
	len = (size_t)encode_into(&r[1], buf);
	data = buf;
	p = pps_wire_parser_new(4096);
	REQUIRE(p);
	pps_wire_parser_set_sender(p, PPS_WIRE_FROM_CLIENT);
	CHECK_EQ_INT(pps_wire_parser_next(p, &data, &len, &out), -EPROTO);
	CHECK_EQ_INT(pps_wire_parser_error_code(p), PPS_WIRE_ERR_KIND);
	CHECK(strcmp(pps_wire_parser_error(p), "STREAM_INFO is a server record") == 0);
	pps_wire_parser_free(p);

	for (int i = 0; i < 14; i++) {
		if (r[i].kind != PPS_WIRE_HELLO && r[i].kind != PPS_WIRE_BYE)
			continue;
		len = (size_t)encode_into(&r[i], buf);
		data = buf;
		p = pps_wire_parser_new(4096);
		REQUIRE(p);
		pps_wire_parser_set_sender(p, PPS_WIRE_FROM_SERVER);
		if (r[i].kind == PPS_WIRE_BYE) {
			CHECK_EQ_INT(pps_wire_parser_next(p, &data, &len, &out), 0);
		} else {
			CHECK_EQ_INT(pps_wire_parser_next(p, &data, &len, &out), -EPROTO);
			CHECK(strcmp(pps_wire_parser_error(p), "HELLO is a client record") == 0);
		}
		pps_wire_parser_free(p);
	}
}

static void
test_auth_mac(void)
{
	static const char expect[] =
	    "527943d4db84f182da178982a90d7e9e3d93d72f6b55c485670a6c2551a0b62d";
	uint8_t nonce[PPS_WIRE_NONCE_BYTES], mac[PPS_WIRE_MAC_BYTES], other[PPS_WIRE_MAC_BYTES];
	char hex[2 * PPS_WIRE_MAC_BYTES + 1];

	for (int i = 0; i < PPS_WIRE_NONCE_BYTES; i++)
		nonce[i] = (uint8_t)i;
	pps_wire_auth_mac("s3cret", 6, nonce, mac);
	for (int i = 0; i < PPS_WIRE_MAC_BYTES; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
	CHECK(strcmp(hex, expect) == 0);
	CHECK(pps_wire_auth_equal(mac, mac));
	memcpy(other, mac, sizeof(mac));
	other[PPS_WIRE_MAC_BYTES - 1] ^= 1;
	CHECK(!pps_wire_auth_equal(mac, other));
	pps_wire_auth_mac("s3creT", 6, nonce, other);
	CHECK(!pps_wire_auth_equal(mac, other));
	/* Two nonces from the kernel differ. */
	CHECK_EQ_INT(pps_wire_auth_nonce(nonce), 0);
	CHECK_EQ_INT(pps_wire_auth_nonce(other), 0);
	CHECK(memcmp(nonce, other, PPS_WIRE_NONCE_BYTES) != 0);
}

/* @r encodes, and the record parsed back from its bytes is *out. */
static bool
parses_back(const pps_wire_record_t *r, pps_wire_record_t *out)
{
	uint8_t buf[512];
	size_t n = 0;
	const uint8_t *data = buf;
	pps_wire_parser_t *p;
	bool ok;

	if (pps_wire_encode(r, buf, sizeof(buf), &n) < 0)
		return false;
	p = pps_wire_parser_new(4096);
	if (!p)
		return false;
	ok = pps_wire_parser_next(p, &data, &n, out) == 0;
	pps_wire_parser_free(p);
	return ok;
}

/* The stream name: only with its flag, never empty, round trip, and a HELLO
 * without it still parses as the first revision's. */
static void
test_hello_stream(void)
{
	pps_wire_record_t r = {.kind = PPS_WIRE_HELLO}, out;
	uint8_t buf[512];
	char msg[256];
	size_t n = 0, plain = 0;

	r.u.hello.protocol_version = PPS_WIRE_VERSION;
	REQUIRE(pps_wire_encode(&r, buf, sizeof(buf), &plain) == 0);
	CHECK_EQ_INT(plain, 4 + 8);
	r.u.hello.flags = PPS_WIRE_HELLO_STREAM | PPS_WIRE_HELLO_PUBLISH;
	CHECK_EQ_INT(pps_wire_encode(&r, buf, sizeof(buf), &n), -EINVAL); /* empty */
	r.u.hello.stream_len = 10;
	memcpy(r.u.hello.stream, "room/alice", 11);
	REQUIRE(pps_wire_encode(&r, buf, sizeof(buf), &n) == 0);
	CHECK_EQ_INT(n, plain + 11);
	CHECK(parses_back(&r, &out) && same_record(&r, &out));
	/* A name without the flag is not encoded. */
	r.u.hello.flags = 0;
	CHECK_EQ_INT(pps_wire_encode(&r, buf, sizeof(buf), &n), -EINVAL);
	/* The flag with a stream_len of 0 on the wire, or a NUL in the name. */
	r.u.hello.flags = PPS_WIRE_HELLO_STREAM;
	REQUIRE(pps_wire_encode(&r, buf, sizeof(buf), &n) == 0);
	buf[4 + 8] = 0;
	CHECK_EQ_INT(parse_one(buf, n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	buf[4 + 8] = 10;
	buf[4 + 9 + 4] = 0;
	CHECK_EQ_INT(parse_one(buf, n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	/* The flag but no name at all: short. */
	buf[3] = 8;
	CHECK_EQ_INT(parse_one(buf, 4 + 8, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_SHORT);
}

/* The audio pool: a number only with its flag, never 0, after the stream
 * name when there is one; STREAM_INFO's audio_copies within its bound. */
static void
test_audio_pool(void)
{
	pps_wire_record_t r = {.kind = PPS_WIRE_HELLO}, out;
	pps_wire_record_t info = {.kind = PPS_WIRE_STREAM_INFO};
	uint8_t buf[512];
	char msg[256];
	size_t n = 0, plain = 0;

	r.u.hello.protocol_version = PPS_WIRE_VERSION;
	r.u.hello.flags = PPS_WIRE_HELLO_AUDIO | PPS_WIRE_HELLO_AUDIO_ONLY;
	REQUIRE(pps_wire_encode(&r, buf, sizeof(buf), &plain) == 0);
	r.u.hello.flags |= PPS_WIRE_HELLO_AUDIO_POOL;
	CHECK_EQ_INT(pps_wire_encode(&r, buf, sizeof(buf), &n), -EINVAL); /* pool 0 */
	r.u.hello.audio_pool = 0xdeadbeef;
	REQUIRE(pps_wire_encode(&r, buf, sizeof(buf), &n) == 0);
	CHECK_EQ_INT(n, plain + 4);
	CHECK(parses_back(&r, &out) && same_record(&r, &out));
	CHECK_EQ_INT(out.u.hello.audio_pool, 0xdeadbeef);
	/* 0 on the wire; the flag without the number (short). */
	REQUIRE(pps_wire_encode(&r, buf, sizeof(buf), &n) == 0);
	memset(buf + n - 4, 0, 4);
	CHECK_EQ_INT(parse_one(buf, n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	buf[3] = (uint8_t)(buf[3] - 4);
	CHECK_EQ_INT(parse_one(buf, n - 4, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_SHORT);
	/* A number without the flag is not encoded. */
	r.u.hello.flags = PPS_WIRE_HELLO_AUDIO_ONLY;
	CHECK_EQ_INT(pps_wire_encode(&r, buf, sizeof(buf), &n), -EINVAL);
	/* With a stream name too: the number comes after it. */
	r.u.hello.flags =
	    PPS_WIRE_HELLO_AUDIO_ONLY | PPS_WIRE_HELLO_AUDIO_POOL | PPS_WIRE_HELLO_STREAM;
	r.u.hello.stream_len = 4;
	memcpy(r.u.hello.stream, "room", 5);
	REQUIRE(pps_wire_encode(&r, buf, sizeof(buf), &n) == 0);
	CHECK_EQ_INT(buf[n - 1], 0xef);
	CHECK(parses_back(&r, &out) && same_record(&r, &out));
	CHECK_EQ_INT(strcmp(out.u.hello.stream, "room"), 0);

	/* STREAM_INFO's copies: round trip, and over the bound refused. */
	info.u.stream_info.protocol_version = PPS_WIRE_VERSION;
	info.u.stream_info.width = info.u.stream_info.base_width = 64;
	info.u.stream_info.height = info.u.stream_info.base_height = 48;
	info.u.stream_info.fps_num = 30;
	info.u.stream_info.fps_den = 1;
	info.u.stream_info.window_frames = 1;
	info.u.stream_info.temporal_layers = 1;
	info.u.stream_info.quality_layers = 1;
	info.u.stream_info.codec = 1;
	info.u.stream_info.audio_codec = PPS_WIRE_AUDIO_CODEC_OPUS;
	info.u.stream_info.audio_channels = 1;
	info.u.stream_info.audio_transport = PPS_WIRE_AUDIO_OWN_CONNECTION;
	info.u.stream_info.audio_frame_us = 20000;
	info.u.stream_info.audio_rate_hz = 48000;
	info.u.stream_info.audio_copies = 2;
	CHECK(parses_back(&info, &out));
	CHECK_EQ_INT(out.u.stream_info.audio_copies, 2);
	info.u.stream_info.audio_copies = PPS_WIRE_MAX_AUDIO_COPIES + 1;
	REQUIRE(pps_wire_encode(&info, buf, sizeof(buf), &n) == 0);
	CHECK_EQ_INT(parse_one(buf, n, 4096, msg, sizeof(msg)), PPS_WIRE_ERR_FIELD);
	CHECK(strstr(msg, "audio copies") != NULL);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	PPS_TEST_RUN(test_round_trip);
	PPS_TEST_RUN(test_auth_mac);
	PPS_TEST_RUN(test_encode_limits);
	PPS_TEST_RUN(test_rejections);
	PPS_TEST_RUN(test_sender);
	PPS_TEST_RUN(test_hello_stream);
	PPS_TEST_RUN(test_audio_pool);
	return pps_test_result();
}
