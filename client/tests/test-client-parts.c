/* SPDX-License-Identifier: MIT */
/*
 * The client's small contracts: its policy names and back, its constructors'
 * NULL + errno on bad arguments, the receiver->stats window mapping, the
 * peer log's limit and count (an injected clock), the picture latency lip
 * sync waits for, and a server's text escaped for the log.
 */
#include "pps-client-internal.h"
#include "pps-test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

static void
test_names(void)
{
	pps_playout_policy_t policy = PPS_PLAYOUT_ASAP;
	pps_clock_mode_t mode = PPS_CLOCK_AUTO;

	for (int i = 0; i < PPS_PLAYOUT_POLICY_COUNT; i++) {
		const char *name = pps_playout_policy_name((pps_playout_policy_t)i);
		CHECK(strcmp(name, pps_playout_policy_names[i]) == 0);
		CHECK(pps_playout_policy_from_name(name, &policy) == 0 && (int)policy == i);
	}
	CHECK(strcmp(pps_playout_policy_name(PPS_PLAYOUT_POLICY_COUNT), "unknown") == 0);
	policy = PPS_PLAYOUT_ASAP;
	CHECK_EQ_INT(pps_playout_policy_from_name("later", &policy), -EINVAL);
	CHECK(policy == PPS_PLAYOUT_ASAP); /* untouched */
	for (int i = 0; i < PPS_CLOCK_MODE_COUNT; i++) {
		const char *name = pps_clock_mode_name((pps_clock_mode_t)i);
		CHECK(strcmp(name, pps_clock_mode_names[i]) == 0);
		CHECK(pps_clock_mode_from_name(name, &mode) == 0 && (int)mode == i);
	}
	CHECK(strcmp(pps_clock_mode_name(PPS_CLOCK_MODE_COUNT), "unknown") == 0);
	CHECK_EQ_INT(pps_clock_mode_from_name("atomic", &mode), -EINVAL);
	for (int i = 0; i < PPS_DISPLAY_MODE_COUNT; i++)
		CHECK(pps_display_mode_names[i] && *pps_display_mode_names[i]);
	CHECK(pps_display_mode_names[PPS_DISPLAY_MODE_COUNT] == NULL);
}

static bool
show_cb(const pps_frame_t *picture, const pps_playout_frame_t *meta, int64_t display_us, void *user)
{
	return true;
}

static void
closed_cb(const pps_connection_end_t *end, void *user)
{
}

static void
test_constructors(void)
{
	char err[256] = "";

	errno = 0;
	CHECK(!pps_clock_new(PPS_CLOCK_MODE_COUNT) && errno == EINVAL);
	errno = 0;
	CHECK(!pps_playout_new(PPS_PLAYOUT_POLICY_COUNT, 0, NULL, NULL) && errno == EINVAL);
	errno = 0;
	CHECK(!pps_playout_new(PPS_PLAYOUT_FIXED, -1, NULL, NULL) && errno == EINVAL);
	errno = 0;
	CHECK(!pps_display_new(PPS_DISPLAY_MODE_COUNT, err, sizeof(err)) && errno == EINVAL);
	errno = 0;
	CHECK(!pps_recorder_new("/nonexistent-dir/out.y4m", err, sizeof(err)) && errno == ENOENT);
	CHECK(strstr(err, "/nonexistent-dir/out.y4m") != NULL);
	errno = 0;
	CHECK(!pps_recorder_new("/nonexistent-dir/out.mkv", err, sizeof(err)) && errno == ENOENT);
	CHECK(strstr(err, "/nonexistent-dir/out.mkv") != NULL);

	/* The player: missing arguments, then a part's own refusal passed on. */
	struct event_base *base = event_base_new();
	pps_player_callbacks_t callbacks = {.show_cb = show_cb, .closed_cb = closed_cb};
	pps_player_params_t params = {
	    .connection = {.server = "127.0.0.1:9",
	                   .name = "test",
	                   .max_record_bytes = 16384,
	                   .ping_interval_us = 1000000,
	                   .handshake_timeout_us = 1000000,
	                   .clock_cb = pps_client_realtime_us},
	    .clock_mode = PPS_CLOCK_AUTO,
	    .policy = PPS_PLAYOUT_ASAP,
	};
	pps_player_t *p;

	REQUIRE(base);
	errno = 0;
	CHECK(!pps_player_new(NULL, &params, &callbacks, NULL) && errno == EINVAL);
	callbacks.show_cb = NULL;
	errno = 0;
	CHECK(!pps_player_new(base, &params, &callbacks, NULL) && errno == EINVAL);
	callbacks.show_cb = show_cb;
	params.clock_mode = PPS_CLOCK_MODE_COUNT;
	errno = 0;
	CHECK(!pps_player_new(base, &params, &callbacks, NULL) && errno == EINVAL);
	params.clock_mode = PPS_CLOCK_AUTO;
	params.connection.ping_interval_us = 0;
	errno = 0;
	CHECK(!pps_player_new(base, &params, &callbacks, NULL) && errno == EINVAL);
	params.connection.ping_interval_us = 1000000;
	p = pps_player_new(base, &params, &callbacks, NULL);
	CHECK(p != NULL);
	pps_player_free(p);
	event_base_free(base);
}

static void
test_window_mapping(void)
{
	pps_receiver_window_t w = {
	    .window_id = 7,
	    .windows = 3,
	    .gap = true,
	    .first_capture_us = 1000,
	    .complete_us = 2000,
	    .status = PPS_WINDOW_COMPLETE,
	    .adus_received = 4,
	    .adus_sent = 5,
	    .adus_total = 6,
	    .bytes = 12345,
	};
	pps_stats_window_t s;

	memset(&s, 0xa5, sizeof(s));
	pps_stats_window_from_receiver(&w, &s);
	CHECK_EQ_INT(s.window, 7);
	CHECK_EQ_INT(s.windows, 3);
	CHECK_EQ_INT(s.first_capture_us, 1000);
	CHECK_EQ_INT(s.complete_us, 2000);
	CHECK(s.status == w.status);
	CHECK_EQ_INT(s.adus_received, 4);
	CHECK_EQ_INT(s.adus_sent, 5);
	CHECK_EQ_INT(s.adus_total, 6);
	CHECK_EQ_INT(s.bytes, 12345);
}

/* The number after @key in @text (the count of a suppression line), or -1. */
static long
count_after(const char *text, const char *key)
{
	const char *p = strstr(text, key);

	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

/* A burst per interval; what was held back is said once, when the next
 * interval lets a line through, and at flush; nothing when nothing was. */
static void
test_peer_log(void)
{
	char *text = NULL;
	size_t size = 0;
	FILE *out = open_memstream(&text, &size);
	pps_peer_log_t *pl;
	int64_t t = 1700000000LL * 1000000;

	REQUIRE(out);
	errno = 0;
	CHECK(!pps_peer_log_new(out, PPS_PEER_LOG_JSON, 0, 1000000) && errno == EINVAL);
	pl = pps_peer_log_new(out, PPS_PEER_LOG_JSON, 3, 1000000);
	REQUIRE(pl);
	for (int i = 0; i < 10; i++)
		pps_peer_log_printf(pl, t, "{\"n\":%d}\n", i);
	/* Still the same interval: held back too, and nothing said yet. */
	pps_peer_log_printf(pl, t + 999999, "{\"n\":%d}\n", 10);
	fflush(out);
	CHECK(strcmp(text, "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n") == 0);
	CHECK_EQ_INT(pps_peer_log_suppressed(pl), 8);
	/* The next interval: the count of the eight, then the line. */
	pps_peer_log_printf(pl, t + 1000000, "{\"n\":%d}\n", 11);
	fflush(out);
	CHECK_EQ_INT(count_after(text, "\"lines\":"), 8);
	CHECK(strstr(text, "{\"n\":2}\n{\"type\":\"log_suppressed\",\"lines\":8}\n{\"n\":11}\n") !=
	      NULL);
	/* Nothing held back: flush says nothing. Held back: said at flush, once. */
	pps_peer_log_flush(pl);
	fflush(out);
	CHECK(strstr(text, "{\"n\":11}\n") + strlen("{\"n\":11}\n") == text + size);
	pps_peer_log_printf(pl, t + 1000001, "{\"n\":%d}\n", 12);
	pps_peer_log_printf(pl, t + 1000001, "{\"n\":%d}\n", 13);
	pps_peer_log_printf(pl, t + 1000001, "{\"n\":%d}\n", 14);
	pps_peer_log_flush(pl);
	pps_peer_log_flush(pl);
	fflush(out);
	CHECK(strstr(text, "{\"n\":13}\n{\"type\":\"log_suppressed\",\"lines\":1}\n") != NULL);
	CHECK(strstr(text, "\"lines\":1}\n{\"type\"") == NULL);
	CHECK_EQ_INT(pps_peer_log_suppressed(pl), 9);
	pps_peer_log_free(pl);
	fclose(out);
	free(text);

	/* Text for a terminal; a clock that steps back begins a new interval. */
	text = NULL;
	out = open_memstream(&text, &size);
	REQUIRE(out);
	pl = pps_peer_log_new(out, PPS_PEER_LOG_TEXT, 1, 10000000);
	REQUIRE(pl);
	pps_peer_log_printf(pl, t, "pps-client: a\n");
	pps_peer_log_printf(pl, t + 1000000, "pps-client: b\n");
	pps_peer_log_printf(pl, t - 60000000, "pps-client: c\n");
	fflush(out);
	CHECK(strstr(text, "pps-client: a\n") && !strstr(text, "pps-client: b\n"));
	CHECK(strstr(text, "pps-client: 1 more message caused by the server not shown") != NULL);
	CHECK(strstr(text, "pps-client: c\n") != NULL);
	pps_peer_log_free(pl);
	fclose(out);
	free(text);
}

/* Lip sync waits for the picture's median latency: a spike of the last
 * frames shown (7 of 64 at 400 ms, the rest at 100 ms) is in the 90th
 * percentile, not in the floor; a second without a picture: no floor. */
static void
test_lip_sync_latency(void)
{
	pps_stats_t *s = pps_stats_new(NULL, 30.0);
	const int64_t t0 = INT64_C(1700000000000000);
	int64_t last = 0;

	REQUIRE(s);
	CHECK_EQ_INT(pps_stats_video_latency_recent_us(s, t0, PPS_AUDIO_SYNC_PERCENTILE), 0);
	for (uint32_t i = 0; i < 64; i++) {
		int64_t capture = t0 + (int64_t)i * 33333;
		pps_stats_frame_t f = {
		    .window = i / 2,
		    .frame = i,
		    .capture_us = capture,
		    .display_us = capture + (i >= 50 && i < 57 ? 400000 : 100000),
		    .shown = true,
		};

		pps_stats_frame(s, &f);
		last = f.display_us;
	}
	CHECK_EQ_INT(pps_stats_video_latency_recent_us(s, last, PPS_AUDIO_SYNC_PERCENTILE), 100000);
	CHECK_EQ_INT(pps_stats_video_latency_recent_us(s, last, 90), 400000);
	CHECK_EQ_INT(
	    pps_stats_video_latency_recent_us(s, last + 1000001, PPS_AUDIO_SYNC_PERCENTILE), 0);
	pps_stats_free(s);
}

/* The overlay and the status line count the same layers: the most among the
 * frames shown in the last second, not the temporal layer of the frame on
 * screen (an I/P frame is t1 while the b frames beside it make it t3). */
static void
test_overlay_layers(void)
{
	pps_stats_t *s = pps_stats_new(NULL, 30.0);
	const int64_t t0 = INT64_C(1700000000000000);
	static const unsigned temporal[] = {1, 3, 2, 3, 1};
	static const unsigned quality[] = {2, 1, 2, 1, 1};
	pps_stats_rolling_t r;
	char layers[40], overlay[96];

	REQUIRE(s);
	for (uint32_t i = 0; i < 5; i++) {
		int64_t capture = t0 + (int64_t)i * 33333;
		pps_stats_frame_t f = {
		    .window = i / 2,
		    .frame = i,
		    .capture_us = capture,
		    .display_us = capture + 50000,
		    .temporal_layers = temporal[i],
		    .quality_layers = quality[i],
		    .shown = true,
		};

		pps_stats_frame(s, &f);
	}
	pps_stats_rolling(s, t0 + 1000000, &r);
	pps_stats_layers_text(&r, layers, sizeof(layers));
	CHECK(strcmp(layers, "layers t3 q2") == 0, "%s", layers);
	/* The last frame shown was t1 q1: the overlay still says the second's. */
	pps_stats_overlay_text(&r, 50.0, overlay, sizeof(overlay));
	CHECK(strstr(overlay, layers) != NULL, "overlay '%s', status line's '%s'", overlay, layers);
	CHECK(strncmp(overlay, "  50 ms  ", 9) == 0, "%s", overlay);
	pps_stats_free(s);
}

/* A server's text inside a log event: quotes, backslashes and control
 * characters escaped, cut only between whole escapes. */
static void
test_json_text(void)
{
	char out[64];

	pps_stats_json_text(out, sizeof(out), "say \"no\" \\ now\n");
	CHECK(strcmp(out, "say \\\"no\\\" \\\\ now\\u000a") == 0, "%s", out);
	pps_stats_json_text(out, 6, "ab\"cd");
	CHECK(strcmp(out, "ab\\\"c") == 0, "%s", out);
	pps_stats_json_text(out, 4, "ab\"");
	CHECK(strcmp(out, "ab") == 0, "%s", out);
	pps_stats_json_text(out, sizeof(out), NULL);
	CHECK(out[0] == '\0', "%s", out);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	PPS_TEST_RUN(test_names);
	PPS_TEST_RUN(test_constructors);
	PPS_TEST_RUN(test_window_mapping);
	PPS_TEST_RUN(test_peer_log);
	PPS_TEST_RUN(test_lip_sync_latency);
	PPS_TEST_RUN(test_overlay_layers);
	PPS_TEST_RUN(test_json_text);
	return pps_test_result();
}
