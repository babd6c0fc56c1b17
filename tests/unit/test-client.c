/* SPDX-License-Identifier: MIT */
/* The client's pure parts: reassembly of untrusted window records, and the
 * playout policies (adaptive: NORMAL/SPIKE with window-boundary updates). */
#include "pps-client-internal.h"
#include "pps-test.h"

#include <errno.h>
#include <string.h>

static uint8_t payload[4000];

static pps_wire_record_t
begin(uint32_t window, uint16_t adus, uint32_t bytes, uint32_t first_adu)
{
	pps_wire_record_t r = {.kind = PPS_WIRE_WINDOW_BEGIN};

	r.u.window_begin = (pps_wire_window_begin_t){.window_id = window,
	                                             .first_capture_us = 1000000,
	                                             .deadline_us = 1250000,
	                                             .frames = 2,
	                                             .adus = adus,
	                                             .bytes = bytes,
	                                             .first_adu_id = first_adu};
	return r;
}

static pps_wire_record_t
fragment(uint32_t window, uint32_t adu, uint32_t offset, uint16_t len, uint32_t total)
{
	pps_wire_record_t r = {.kind = PPS_WIRE_ADU_FRAGMENT};

	r.u.adu_fragment = (pps_wire_adu_fragment_t){.window_id = window,
	                                             .adu_id = adu,
	                                             .frame_index = window * 2, /* W = 2 */
	                                             .capture_us = 1000000,
	                                             .offset = offset,
	                                             .total_bytes = total,
	                                             .payload_len = len,
	                                             .payload = payload + offset};
	return r;
}

static pps_wire_record_t
end(uint32_t window, uint16_t sent, uint16_t dropped, uint8_t flags)
{
	pps_wire_record_t r = {.kind = PPS_WIRE_WINDOW_END};

	r.u.window_end = (pps_wire_window_end_t){
	    .window_id = window, .adus_sent = sent, .adus_dropped = dropped, .flags = flags};
	return r;
}

static int
feed(pps_reasm_t *r, pps_wire_record_t rec, char *err)
{
	return pps_reasm_record(r, &rec, err, 256);
}

static void
test_reasm_window(void)
{
	pps_reasm_t *r = pps_reasm_new(2);
	pps_reasm_window_t w;
	pps_adu_t **adus, *early;
	size_t n;
	char err[256];

	REQUIRE(r);
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)i;
	CHECK_EQ_INT(feed(r, begin(5, 3, 3000, 100), err), 0);
	/* Priority order, not id order: ADU 102 first, then 100 in two parts. */
	CHECK_EQ_INT(feed(r, fragment(5, 102, 0, 500, 500), err), 0);
	CHECK_EQ_INT(feed(r, fragment(5, 100, 0, 1000, 2000), err), 0);
	CHECK(pps_reasm_take_next(r, 100) == NULL); /* not whole yet */
	CHECK_EQ_INT(feed(r, fragment(5, 100, 1000, 1000, 2000), err), 0);
	early = pps_reasm_take_next(r, 100);
	CHECK(early && pps_adu_size(early) == 2000 && pps_adu_data(early)[1500] == (uint8_t)1500);
	CHECK(pps_reasm_take_next(r, 100) == NULL); /* handed out once */
	pps_adu_unref(early);
	CHECK(pps_reasm_in_window(r));
	CHECK_EQ_INT(feed(r, end(5, 2, 1, 0), err), 0);
	CHECK(!pps_reasm_in_window(r)); /* complete: taken next */
	pps_reasm_take(r, &w, &adus, &n);
	CHECK_EQ_INT(w.window_id, 5);
	CHECK_EQ_INT(w.first_adu_id, 100);
	CHECK_EQ_INT(w.adus_received, 2);
	CHECK_EQ_INT(w.adus_dropped, 1);
	CHECK_EQ_INT(n, 1); /* 100 went early; 101 never came */
	CHECK(n == 1 && pps_adu_info(adus[0])->id == 102);
	for (size_t i = 0; i < n; i++)
		pps_adu_unref(adus[i]);
	free(adus);
	/* A window the sender never began. */
	CHECK_EQ_INT(feed(r, end(7, 0, 4, PPS_WIRE_WINDOW_END_DROPPED), err), 0);
	pps_reasm_take(r, &w, &adus, &n);
	CHECK(w.dropped && w.window_id == 7 && n == 0);
	free(adus);
	CHECK_EQ_INT(pps_reasm_last_window(r), 7);
	pps_reasm_free(r);
}

/* Each broken rule is refused with a reason naming it. */
static void
expect_error(pps_wire_record_t setup, pps_wire_record_t bad, const char *text)
{
	pps_reasm_t *r = pps_reasm_new(2);
	char err[256] = "";

	REQUIRE(r);
	if (setup.kind)
		REQUIRE(feed(r, setup, err) == 0);
	CHECK_EQ_INT(feed(r, bad, err), -EPROTO);
	if (!strstr(err, text)) {
		fprintf(stderr, "  got: %s\n  expected to contain: %s\n", err, text);
		CHECK(!"error text");
	}
	pps_reasm_free(r);
}

static void
test_reasm_rejections(void)
{
	pps_wire_record_t none = {.kind = 0};
	pps_wire_record_t open = begin(5, 2, 1000, 100);

	expect_error(none, fragment(5, 100, 0, 10, 10), "outside its window");
	expect_error(open, fragment(6, 100, 0, 10, 10), "outside its window");
	expect_error(open, fragment(5, 103, 0, 10, 10), "outside window 5's ids 100..101");
	expect_error(open, fragment(5, 99, 0, 10, 10), "outside window 5's ids");
	expect_error(open, fragment(5, 100, 0, 10, 5000), "over the 1000 bytes");
	expect_error(open, fragment(5, 100, 10, 10, 100), "first fragment at offset 10");
	expect_error(open, begin(6, 1, 10, 200), "inside window 5");
	expect_error(none, end(5, 1, 0, 0), "without its WINDOW_BEGIN");
	expect_error(none, begin(1, 2000, 10, 0), "over the limits");
	{
		/* A fragment that does not continue its ADU. */
		pps_reasm_t *r = pps_reasm_new(2);
		char err[256];

		REQUIRE(r && feed(r, open, err) == 0);
		CHECK_EQ_INT(feed(r, fragment(5, 100, 0, 10, 100), err), 0);
		CHECK_EQ_INT(feed(r, fragment(5, 100, 50, 10, 100), err), -EPROTO);
		CHECK(strstr(err, "does not continue it") != NULL);
		pps_reasm_free(r);
	}
	{
		/* Window ids only go forward. */
		pps_reasm_t *r = pps_reasm_new(2);
		char err[256];

		REQUIRE(r);
		CHECK_EQ_INT(feed(r, end(7, 0, 1, PPS_WIRE_WINDOW_END_DROPPED), err), 0);
		CHECK_EQ_INT(feed(r, begin(7, 1, 10, 0), err), -EPROTO);
		CHECK(strstr(err, "ids must increase") != NULL);
		pps_reasm_free(r);
	}
	{
		/* The announced total bounds the sum of all ADUs, not each alone. */
		pps_reasm_t *r = pps_reasm_new(2);
		char err[256];

		REQUIRE(r && feed(r, open, err) == 0);
		CHECK_EQ_INT(feed(r, fragment(5, 100, 0, 10, 800), err), 0);
		CHECK_EQ_INT(feed(r, fragment(5, 101, 0, 10, 800), err), -EPROTO);
		pps_reasm_free(r);
	}
}

static void
test_playout(void)
{
	pps_playout_t *fixed = pps_playout_new(PPS_PLAYOUT_FIXED, 200000, NULL, NULL);
	pps_playout_t *asap = pps_playout_new(PPS_PLAYOUT_ASAP, 200000, NULL, NULL);
	pps_playout_t *adaptive = pps_playout_new(PPS_PLAYOUT_ADAPTIVE, 200000, NULL, NULL);
	int64_t before, during;

	REQUIRE(fixed && asap && adaptive);
	CHECK_EQ_INT(pps_playout_display_time(fixed, 1000000, 1050000), 1200000);
	CHECK_EQ_INT(pps_playout_display_time(asap, 1000000, 1050000), 1050000);
	/* Before any window the adaptive policy uses the tolerance. */
	CHECK_EQ_INT(pps_playout_display_time(adaptive, 1000000, 0), 1200000);
	/* Steady 100 ms windows: the delay settles near u + 4 v. */
	for (int i = 0; i < 2000; i++)
		pps_playout_window(adaptive, i % 2 ? 90000 : 110000);
	before = pps_playout_delay_us(adaptive);
	CHECK(before > 100000 && before < 160000);
	CHECK(strcmp(pps_playout_mode(adaptive), "normal") == 0);
	/* A spike: a steep rise switches to SPIKE and the estimate follows it. */
	pps_playout_window(adaptive, 600000);
	CHECK(strcmp(pps_playout_mode(adaptive), "spike") == 0);
	during = pps_playout_delay_us(adaptive);
	CHECK(during > before + 400000);
	/* It decays back; once the change is no longer violent, NORMAL again. */
	for (int64_t d = 550000; d > 100000; d -= 50000)
		pps_playout_window(adaptive, d);
	for (int i = 0; i < 20; i++)
		pps_playout_window(adaptive, 100000);
	CHECK(strcmp(pps_playout_mode(adaptive), "normal") == 0);
	CHECK(pps_playout_delay_us(adaptive) < during);
	CHECK_EQ_INT(pps_playout_delay_us(asap), 0);
	pps_playout_free(fixed);
	pps_playout_free(asap);
	pps_playout_free(adaptive);
}

typedef struct {
	unsigned overflow, stopped;
} discards_t;

static void
discard_cb(const pps_playout_frame_t *frame, const char *reason, void *user)
{
	discards_t *d = user;

	(void)frame;
	if (strcmp(reason, PPS_FRAME_OVERFLOW) == 0)
		d->overflow++;
	else if (strcmp(reason, PPS_FRAME_STOPPED) == 0)
		d->stopped++;
}

/* The fixed delay the stream can meet, and the adaptive policy settling
 * from it in seconds (an injected clock: times are arguments). */
static void
test_playout_stream_delay(void)
{
	pps_playout_t *fixed = pps_playout_new(PPS_PLAYOUT_FIXED, 0, NULL, NULL);
	pps_playout_t *adaptive = pps_playout_new(PPS_PLAYOUT_ADAPTIVE, 0, NULL, NULL);
	int64_t window_us = 66667, t;

	REQUIRE(fixed && adaptive);
	pps_playout_set_stream(fixed, 250000, window_us);
	pps_playout_set_rtt(fixed, 50000);
	/* budget + round trip + 10 ms decode margin */
	CHECK_EQ_INT(pps_playout_stream_delay_us(fixed), 310000);
	CHECK_EQ_INT(pps_playout_display_time(fixed, 1000000, 0), 1310000);
	pps_playout_set_stream(adaptive, 250000, window_us);
	pps_playout_set_rtt(adaptive, 50000);
	CHECK_EQ_INT(pps_playout_delay_us(adaptive), 310000);
	/* Windows at a steady 60 ms: from 310 ms to under 100 ms within 5 s
	 * of windows, and no lower than the windows' own delay. */
	pps_playout_window(adaptive, 60000);
	CHECK(pps_playout_delay_us(adaptive) > 300000);
	for (t = window_us; t < 5000000; t += window_us)
		pps_playout_window(adaptive, 60000 + (t / window_us % 2) * 4000);
	CHECK(pps_playout_delay_us(adaptive) < 100000);
	CHECK(pps_playout_delay_us(adaptive) >= 60000);
	pps_playout_free(fixed);
	pps_playout_free(adaptive);
}

/* Smooth: a percentile of the last window delays + 10 ms; up at once, down
 * by 1/PPS_PLAYOUT_SMOOTH_FALL of the excess per window; late frames are
 * shown at once, never dropped (times injected). */
static void
test_playout_smooth(void)
{
	pps_playout_t *p = pps_playout_new(PPS_PLAYOUT_SMOOTH, 0, NULL, NULL);
	pps_frame_t *pic = pps_frame_new(16, 16), *out;
	pps_playout_frame_t m = {.window = 1, .frame = 1, .capture_us = 1000000}, got;
	const int64_t window_us = 66667;
	/* Windows in the horizon, the percentile's rank among them, and how
	 * many slow windows it takes to move it. */
	const int horizon = (int)(PPS_PLAYOUT_SMOOTH_HORIZON_MS * 1000 / window_us) + 1;
	const int rank = (horizon * PPS_PLAYOUT_SMOOTH_PERCENTILE + 99) / 100;
	const int slow_to_move = horizon - rank + 1;
	int64_t up, prev;

	REQUIRE(p && pic && slow_to_move >= 2);
	pps_playout_set_stream(p, 250000, window_us);
	CHECK(!pps_playout_drops_late(p));
	/* Before any window: as soon as decoded. */
	CHECK_EQ_INT(pps_playout_display_time(p, 1000000, 1040000), 1040000);
	/* A full horizon at 60 ms with one fewer slow window (100 ms, an
	 * IDR's) than moves the percentile: it stays at 60 ms. */
	for (int i = 0; i < horizon; i++)
		pps_playout_window(p, i >= horizon - (slow_to_move - 1) ? 100000 : 60000);
	CHECK_EQ_INT(pps_playout_delay_us(p), 70000);
	CHECK_EQ_INT(pps_playout_display_time(p, 1000000, 0), 1070000);
	/* A new round-trip measurement (every second) leaves it alone. */
	pps_playout_set_rtt(p, 50000);
	CHECK_EQ_INT(pps_playout_delay_us(p), 70000);
	/* The path slows for enough windows: up at once. */
	for (int i = 0; i < slow_to_move; i++)
		pps_playout_window(p, 400000);
	up = pps_playout_delay_us(p);
	CHECK_EQ_INT(up, 410000);
	/* It recovers: D holds while the slow windows can still reach the
	 * percentile, then falls gradually, never in a jump. */
	for (int i = 0; i < horizon - slow_to_move; i++)
		pps_playout_window(p, 60000);
	CHECK_EQ_INT(pps_playout_delay_us(p), up);
	pps_playout_window(p, 60000);
	CHECK_EQ_INT(pps_playout_delay_us(p),
	             up - (up - 70000 + PPS_PLAYOUT_SMOOTH_FALL - 1) / PPS_PLAYOUT_SMOOTH_FALL);
	for (int i = 0; i < 100; i++) {
		prev = pps_playout_delay_us(p);
		pps_playout_window(p, 60000);
		CHECK(pps_playout_delay_us(p) <= prev);
		CHECK(prev - pps_playout_delay_us(p) <=
		      (410000 - 70000) / PPS_PLAYOUT_SMOOTH_FALL + 1);
	}
	CHECK(pps_playout_delay_us(p) < 72000);
	CHECK(pps_playout_delay_us(p) >= 70000);
	/* A frame past its display time is queued for now, not refused. */
	m.capture_us = 1000000;
	CHECK_EQ_INT(pps_playout_push(p, pic, &m, 2000000), 0);
	CHECK_EQ_INT(pps_playout_next_due_us(p), 2000000);
	out = pps_playout_pop_due(p, 2000000, &got);
	CHECK(out != NULL);
	pps_frame_free(out);
	pps_frame_free(pic);
	pps_playout_free(p);
}

static void
test_playout_queue(void)
{
	discards_t d = {0};
	pps_playout_t *p = pps_playout_new(PPS_PLAYOUT_FIXED, 100000, discard_cb, &d);
	pps_playout_t *asap = pps_playout_new(PPS_PLAYOUT_ASAP, 0, discard_cb, &d);
	pps_frame_t *pic = pps_frame_new(32, 32), *out;
	pps_playout_frame_t m = {.window = 1, .frame = 1, .capture_us = 1000000}, got;

	REQUIRE(p && asap && pic);
	/* Late: its display time (capture + 100 ms) has passed. */
	CHECK_EQ_INT(pps_playout_push(p, pic, &m, 1200000), -ETIME);
	CHECK_EQ_INT(pps_playout_next_due_us(p), INT64_MAX);
	/* Bounded: the 49th frame pushes out the oldest. */
	for (uint32_t i = 0; i <= PPS_PLAYOUT_MAX_FRAMES; i++) {
		m.frame = i;
		m.capture_us = 1000000 + i * 33333;
		CHECK_EQ_INT(pps_playout_push(p, pic, &m, 1000000), 0);
	}
	CHECK_EQ_INT(d.overflow, 1);
	CHECK_EQ_INT(pps_playout_next_due_us(p), 1000000 + 33333 + 100000);
	/* Each frame at its own time: not due a moment early, due at its time. */
	CHECK(pps_playout_pop_due(p, 1133333 - 2000, &got) == NULL);
	out = pps_playout_pop_due(p, 1133333, &got);
	CHECK(out && got.frame == 1);
	pps_frame_free(out);
	pps_playout_flush(p);
	CHECK_EQ_INT(d.stopped, PPS_PLAYOUT_MAX_FRAMES - 1);
	/* asap: frames of a window decoded together keep their spacing; the
	 * next window starts when it is decoded. */
	m = (pps_playout_frame_t){.window = 5, .frame = 9, .capture_us = 0};
	CHECK_EQ_INT(pps_playout_push(asap, pic, &m, 100000), 0);
	m.frame = 10;
	m.capture_us = 33333;
	CHECK_EQ_INT(pps_playout_push(asap, pic, &m, 100500), 0);
	m.window = 6;
	m.frame = 11;
	m.capture_us = 66666;
	CHECK_EQ_INT(pps_playout_push(asap, pic, &m, 120000), 0);
	CHECK_EQ_INT(pps_playout_next_due_us(asap), 100000);
	pps_frame_free(pps_playout_pop_due(asap, 100000, &got));
	/* Window 6 arrived before frame 10's paced time: frame 10 became due
	 * at once (no pacing that piles up behind a stall), frame 11 half a
	 * capture spacing after it (catching up at twice real time, each frame
	 * on screen), not at once. */
	CHECK_EQ_INT(pps_playout_next_due_us(asap), 120000);
	pps_frame_free(pps_playout_pop_due(asap, 120000, &got));
	CHECK_EQ_INT(got.frame, 10);
	CHECK_EQ_INT(pps_playout_next_due_us(asap), 120000 + 33333 / 2);
	CHECK(pps_playout_pop_due(asap, 125000, &got) == NULL);
	pps_frame_free(pps_playout_pop_due(asap, 120000 + 33333 / 2, &got));
	CHECK_EQ_INT(got.frame, 11);
	/* Its own next frame is paced again. */
	m.frame = 12;
	m.capture_us = 99999;
	CHECK_EQ_INT(pps_playout_push(asap, pic, &m, 121000), 0);
	CHECK_EQ_INT(pps_playout_next_due_us(asap), 153333);
	pps_frame_free(pic);
	pps_playout_free(p);
	pps_playout_free(asap);
}

/* Every frame counted once whatever its path; join windows are not the
 * sender's; long gaps are one log line; freezes measured on display times. */
static void
test_stats_accounting(void)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *log = open_memstream(&buf, &size);
	pps_stats_t *s = pps_stats_new(log, 30);
	pps_stats_summary_t o;
	const int64_t shown_at_ms[] = {0, 33, 66, 300, 333, 900};
	pps_stats_window_t join = {.window = 3, .status = PPS_WINDOW_JOIN};
	pps_stats_window_t gap = {.window = 4, .windows = 5000, .status = PPS_WINDOW_DROPPED};
	unsigned lines = 0;

	REQUIRE(log && s);
	pps_stats_window(s, &join);
	pps_stats_window(s, &gap);
	for (size_t i = 0; i < sizeof(shown_at_ms) / sizeof(shown_at_ms[0]); i++) {
		pps_stats_frame_t f = {.frame = (uint32_t)i,
		                       .capture_us = 1000000 + (int64_t)i * 33333,
		                       .display_us = 1200000 + shown_at_ms[i] * 1000,
		                       .shown = true,
		                       .received_us = 1000000 + (int64_t)i * 33333 + 30000,
		                       .decoded_us = 1000000 + (int64_t)i * 33333 + 35000};

		pps_stats_frame(s, &f);
	}
	{
		pps_stats_frame_t late = {.frame = 6, .reason = PPS_FRAME_LATE};
		pps_stats_frame_t stopped = {.frame = 7, .reason = PPS_FRAME_STOPPED};

		pps_stats_frame(s, &late);
		pps_stats_frame(s, &stopped); /* in flight at exit: not counted */
	}
	pps_stats_missing(s, 2, 8, 3, 0, 33333, PPS_FRAME_LOST);
	pps_stats_missing(s, 2, 11, 100000, 0, 33333, PPS_FRAME_DROPPED);
	pps_stats_missing(s, 2, 100011, 1, 0, 33333, PPS_FRAME_UNDECODABLE);
	pps_stats_summarize(s, &o);
	pps_stats_write_summary(s, &o, NULL);
	fclose(log);
	for (char *c = buf; c && *c; c++)
		lines += *c == '\n';
	CHECK_EQ_INT(o.windows_total, 5000);
	CHECK_EQ_INT(o.windows_dropped, 5000);
	CHECK_EQ_INT(o.windows_join, 1);
	CHECK_EQ_INT(o.frames_shown, 6);
	CHECK_EQ_INT(o.frames_late, 1);
	CHECK_EQ_INT(o.frames_lost, 3);
	CHECK_EQ_INT(o.frames_dropped, 100000);
	CHECK_EQ_INT(o.frames_undecodable, 1);
	CHECK_EQ_INT(o.frames_total, 6 + 1 + 3 + 100000 + 1);
	CHECK_EQ_INT(o.frames_total, o.frames_shown + o.frames_late + o.frames_lost +
	                                 o.frames_dropped + o.frames_undecodable +
	                                 o.frames_overflow + o.frames_other);
	/* Gaps 33, 33, 234, 33, 567 ms: two freezes over 100 ms. */
	CHECK_EQ_INT(o.freezes, 2);
	CHECK(o.freeze_longest_ms > 566.9 && o.freeze_longest_ms < 567.1);
	CHECK(o.frozen_total_ms > 800.9 && o.frozen_total_ms < 801.1);
	CHECK(o.stage_p50_ms[0] > 29.9 && o.stage_p50_ms[0] < 30.1);
	CHECK(o.stage_p50_ms[1] > 4.9 && o.stage_p50_ms[1] < 5.1);
	/* 2 window events, 8 frames, 3 lost, 1 frames_missing, 1 undecodable, summary */
	CHECK_EQ_INT(lines, 2 + 8 + 3 + 1 + 1 + 1);
	CHECK(buf &&
	      strstr(buf, "\"type\":\"frames_missing\",\"first_frame\":11,\"frames\":100000"));
	CHECK(buf && strstr(buf, "\"freeze_longest_ms\":567.000"));
	/* No start recorded: no time to the first picture. */
	CHECK(o.first_picture_ms < 0);
	CHECK(buf && strstr(buf, "\"first_picture_ms\":null"));
	CHECK(buf && strstr(buf, "\"status\":\"join\""));
	free(buf);
	pps_stats_free(s);
}

/* Server text reaches the terminal as printable ASCII only. */
static void
test_sanitize(void)
{
	char out[64];

	pps_connection_sanitize(out, sizeof(out), "ok \x1b[2J\x07\xff end", 13);
	CHECK(strcmp(out, "ok ?[2J?? end") == 0);
	pps_connection_sanitize(out, 4, "abcdef", 6);
	CHECK(strcmp(out, "abc") == 0);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	PPS_TEST_RUN(test_reasm_window);
	PPS_TEST_RUN(test_reasm_rejections);
	PPS_TEST_RUN(test_playout);
	PPS_TEST_RUN(test_playout_stream_delay);
	PPS_TEST_RUN(test_playout_smooth);
	PPS_TEST_RUN(test_playout_queue);
	PPS_TEST_RUN(test_stats_accounting);
	PPS_TEST_RUN(test_sanitize);
	return pps_test_result();
}
