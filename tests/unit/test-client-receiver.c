/* SPDX-License-Identifier: MIT */
/*
 * The receiver with a real layered stream (codec/'s encoder and decoder):
 * fragments in any order decode in decode order, every frame is accounted
 * exactly once on every path (shown, dropped window, gap of windows, frames a
 * window came without, join, the window open when the stream stops), a
 * window's frames come out by its WINDOW_END, and untrusted STREAM_INFO,
 * window ids and frame numbers are refused; the same windows over two
 * connections (copies) decode once, from whichever brings them first. Time is the test's own (an
 * injected clock), never slept on.
 */
#include "pps-client-internal.h"
#include "pps-codec-testutil.h"
#include "pps-prioritizer.h"
#include "pps-test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Frames per window; 2, or 1 for the 1-frame-window test. */
static unsigned window_frames = 2;
#define W window_frames
/* Check that a window's frames are out before its WINDOW_END (no B frames). */
static bool check_before_end;
#define N_FRAMES  41 /* windows 0..20 */
#define MAX_ADUS  1024
#define MAX_FRAME 256

static pps_adu_t *adus[MAX_ADUS];
static size_t n_adus;
static pps_stream_params_t stream;

typedef struct {
	int64_t now_us;
	unsigned shown[MAX_FRAME];
	unsigned missing[MAX_FRAME];
	const char *reason[MAX_FRAME];
	int64_t last_output; /* highest frame reported so far */
	unsigned windows_join, windows_dropped, windows_gap;
} sink_t;

static int64_t
test_clock(void *user)
{
	return ((sink_t *)user)->now_us;
}

static void
frame_cb(const pps_receiver_frame_t *f, void *user)
{
	sink_t *s = user;
	uint32_t i = f->decoded->frame_index;

	REQUIRE(i < MAX_FRAME);
	CHECK(f->decoded->picture.planes[0] != NULL);
	CHECK(f->received_us > 0 && f->decoded_us >= f->received_us);
	s->shown[i]++;
	if ((int64_t)i > s->last_output)
		s->last_output = i;
}

static void
missing_cb(const pps_receiver_missing_t *m, void *user)
{
	sink_t *s = user;

	for (uint64_t k = 0; k < m->count; k++) {
		int64_t i = m->first_frame + (int64_t)k;

		REQUIRE(i >= 0 && i < MAX_FRAME);
		s->missing[i]++;
		s->reason[i] = m->reason;
		if (i > s->last_output)
			s->last_output = i;
	}
}

static void
window_cb(const pps_receiver_window_t *w, void *user)
{
	sink_t *s = user;

	if (strcmp(w->status, PPS_WINDOW_JOIN) == 0)
		s->windows_join++;
	else if (w->gap)
		s->windows_gap += (unsigned)w->windows;
	else if (strcmp(w->status, PPS_WINDOW_DROPPED) == 0)
		s->windows_dropped++;
}

static void
encoded_cb(pps_adu_t *adu, void *user)
{
	(void)user;
	REQUIRE(n_adus < MAX_ADUS);
	adus[n_adus++] = adu;
}

static void
encode_stream(int temporal_layers)
{
	pps_encoder_params_t p = {
	    .width = 128,
	    .height = 96,
	    .fps = 30,
	    .temporal_layers = temporal_layers,
	    .quality_layers = 2,
	    .base_scale = 2,
	    .gop_frames = 8,
	    .window_frames = W,
	    .preset = "ultrafast",
	    .threads = 1,
	    .base_crf = 30,
	    .enhancement_crf = 30,
	};
	pps_encoder_t *e = pps_encoder_new(&p);
	pps_frame_t *f = pps_frame_new(128, 96);

	REQUIRE(e && f);
	for (uint32_t i = 0; i < N_FRAMES; i++) {
		pps_testutil_generate(f, i, 1000000 + (int64_t)i * 33333);
		f->frame_index = i;
		f->capture_us = 1000000 + (int64_t)i * 33333;
		REQUIRE(pps_encoder_encode(e, f, encoded_cb, NULL) == 0);
	}
	pps_encoder_get_stream_params(e, &stream);
	pps_frame_free(f);
	pps_encoder_free(e);
}

static pps_wire_stream_info_t
stream_info(void)
{
	pps_wire_stream_info_t info;

	pps_stream_params_to_wire(&stream, 0, 250, &info);
	return info;
}

/* While set, send_window() records what it would feed here (the copies'
 * test replays it on two connections). */
#define MAX_RECORDS 2048
static struct {
	bool on;
	pps_wire_record_t rec[MAX_RECORDS];
	uint32_t window[MAX_RECORDS];
	size_t n;
} tape;

static uint32_t
record_window(const pps_wire_record_t *rec)
{
	switch (rec->kind) {
	case PPS_WIRE_WINDOW_BEGIN:
		return rec->u.window_begin.window_id;
	case PPS_WIRE_WINDOW_END:
		return rec->u.window_end.window_id;
	default:
		return rec->u.adu_fragment.window_id;
	}
}

static int
feed(pps_receiver_t *r, pps_wire_record_t rec)
{
	char err[256] = "";
	int ret;

	if (tape.on) {
		REQUIRE(tape.n < MAX_RECORDS);
		tape.window[tape.n] = record_window(&rec);
		tape.rec[tape.n++] = rec;
		return 0;
	}
	ret = pps_receiver_record(r, &rec, err, sizeof(err));

	if (ret < 0)
		fprintf(stderr, "  receiver: %s\n", err);
	return ret;
}

/* Bit i of @keep: send ADU i of the window (in decode order). */
typedef enum {
	SEND_ALL,
	SEND_NONE_DROPPED,
	SEND_NOTHING,
	SEND_BASE_ONLY,
	SEND_ANCHOR_OPEN, /* temporal layer 0 only, and no WINDOW_END: the stream stops */
	SEND_BEGIN_OPEN,  /* WINDOW_BEGIN only: the stream stops */
	SEND_FROM_IDR,    /* a client's first: its IDR on (what the sender can send it) */
} plan_t;

/* Sends window @id: its ADUs in reverse (priority-like) order, each ADU in
 * two fragments; under SEND_BASE_ONLY only quality layer 0 of temporal layer 0. */
static void
send_window(pps_receiver_t *r, sink_t *s, uint32_t id, plan_t plan)
{
	size_t first = n_adus, count = 0, sent = 0;
	uint32_t bytes = 0, idr_frame = UINT32_MAX;
	bool sendable[MAX_ADUS] = {false};

	if (plan == SEND_NOTHING)
		return; /* discarded with its WINDOW_END: a gap */
	for (size_t i = 0; i < n_adus; i++) {
		if (pps_window_index_of_frame(pps_adu_info(adus[i])->frame_index, W) != id)
			continue;
		if (first == n_adus)
			first = i;
		count++;
		bytes += (uint32_t)pps_adu_size(adus[i]);
	}
	REQUIRE(count > 0);
	s->now_us += 10000;
	if (plan == SEND_NONE_DROPPED) {
		pps_wire_record_t end = {.kind = PPS_WIRE_WINDOW_END};

		end.u.window_end = (pps_wire_window_end_t){.window_id = id,
		                                           .adus_dropped = (uint16_t)count,
		                                           .flags = PPS_WIRE_WINDOW_END_DROPPED};
		CHECK_EQ_INT(feed(r, end), 0);
		return;
	}
	{
		pps_wire_record_t b = {.kind = PPS_WIRE_WINDOW_BEGIN};

		b.u.window_begin = (pps_wire_window_begin_t){
		    .window_id = id,
		    .first_capture_us = pps_adu_info(adus[first])->capture_us,
		    .deadline_us = pps_adu_info(adus[first])->capture_us + 250000,
		    .frames = W,
		    .adus = (uint16_t)count,
		    .bytes = bytes,
		    .first_adu_id = pps_adu_info(adus[first])->id,
		};
		CHECK_EQ_INT(feed(r, b), 0);
	}
	for (size_t i = first; i < first + count; i++) {
		const pps_adu_info_t *info = pps_adu_info(adus[i]);

		if (info->frame_type == PPS_ADU_FRAME_IDR && info->frame_index < idr_frame)
			idr_frame = info->frame_index;
	}
	for (size_t i = first; i < first + count; i++) {
		const pps_adu_info_t *info = pps_adu_info(adus[i]);

		sendable[i] = plan == SEND_ALL ||
		              (plan == SEND_FROM_IDR && info->frame_index >= idr_frame) ||
		              (plan == SEND_ANCHOR_OPEN && info->temporal_layer == 0) ||
		              (plan == SEND_BASE_ONLY && info->quality_layer == 0 &&
		               info->temporal_layer == 0);
	}
	for (size_t k = first + count; k-- > first;) {
		const pps_adu_info_t *info = pps_adu_info(adus[k]);
		uint32_t size = (uint32_t)pps_adu_size(adus[k]);
		uint32_t half = size / 2;

		if (!sendable[k])
			continue;
		sent++;
		for (int part = 0; part < 2; part++) {
			uint32_t off = part ? half : 0, len = part ? size - half : half;
			pps_wire_record_t f = {.kind = PPS_WIRE_ADU_FRAGMENT};

			if (len == 0)
				continue;
			f.u.adu_fragment = (pps_wire_adu_fragment_t){
			    .window_id = id,
			    .adu_id = info->id,
			    .frame_index = info->frame_index,
			    .capture_us = info->capture_us,
			    .decode_order = info->decode_order,
			    .frame_type = info->frame_type,
			    .temporal_layer = info->temporal_layer,
			    .quality_layer = info->quality_layer,
			    .dep_count = info->dep_count,
			    .offset = off,
			    .total_bytes = size,
			    .payload_len = (uint16_t)len,
			    .payload = pps_adu_data(adus[k]) + off,
			};
			memcpy(f.u.adu_fragment.deps, info->deps, sizeof(info->deps));
			CHECK_EQ_INT(feed(r, f), 0);
		}
	}
	/* Without B frames a frame is out once its top layer is decoded: no
	 * wait for WINDOW_END, let alone for the next window. */
	if (check_before_end && plan == SEND_ALL && !tape.on)
		CHECK_EQ_INT(s->last_output, (int64_t)id * W);
	if (plan == SEND_ANCHOR_OPEN || plan == SEND_BEGIN_OPEN)
		return;
	{
		pps_wire_record_t end = {.kind = PPS_WIRE_WINDOW_END};

		end.u.window_end =
		    (pps_wire_window_end_t){.window_id = id,
		                            .adus_sent = (uint16_t)sent,
		                            .adus_dropped = (uint16_t)(count - sent)};
		CHECK_EQ_INT(feed(r, end), 0);
	}
	/* No hold: by its WINDOW_END every frame of the window is accounted. */
	if (!tape.on)
		CHECK_EQ_INT(s->last_output, (int64_t)id * W);
}

static pps_receiver_t *
new_receiver(sink_t *s)
{
	static const pps_receiver_callbacks_t cb = {frame_cb, missing_cb, window_cb};
	pps_wire_stream_info_t info = stream_info();
	char err[256];
	pps_receiver_t *r;

	memset(s, 0, sizeof(*s));
	s->now_us = 5000000;
	s->last_output = -1;
	r = pps_receiver_new(&cb, test_clock, s);
	REQUIRE(r);
	REQUIRE(pps_receiver_stream_info(r, &info, err, sizeof(err)) == 0);
	return r;
}

/* Every frame from @from through @to reported exactly once. */
static void
check_once(const sink_t *s, int from, int to)
{
	for (int i = 0; i < MAX_FRAME; i++) {
		unsigned n = s->shown[i] + s->missing[i];

		if (i >= from && i <= to) {
			if (n != 1)
				fprintf(stderr, "  frame %d reported %u times\n", i, n);
			CHECK(n == 1);
		} else {
			CHECK(n == 0);
		}
	}
}

static void
test_all_shown(void)
{
	sink_t s;
	pps_receiver_t *r = new_receiver(&s);

	for (uint32_t w = 0; w <= 12; w++)
		send_window(r, &s, w, SEND_ALL);
	pps_receiver_finish(r);
	check_once(&s, 0, 24);
	for (int i = 0; i <= 24; i++)
		CHECK_EQ_INT(s.shown[i], 1);
	pps_receiver_free(r);
}

static void
test_every_path(void)
{
	sink_t s;
	pps_receiver_t *r = new_receiver(&s);

	/* Join: the window in flight when the client joined comes dropped;
	 * what follows cannot decode until the next IDR (frame 8, window 4). */
	send_window(r, &s, 0, SEND_NONE_DROPPED);
	for (uint32_t w = 1; w <= 5; w++)
		send_window(r, &s, w, SEND_ALL);
	send_window(r, &s, 6, SEND_NONE_DROPPED); /* the sender dropped it */
	send_window(r, &s, 7, SEND_ALL);          /* depends on window 6 */
	send_window(r, &s, 8, SEND_ALL);          /* IDR: frame 16 */
	send_window(r, &s, 9, SEND_BASE_ONLY);    /* temporal layer 1 cut */
	send_window(r, &s, 10, SEND_NOTHING);     /* discarded with its END: a gap */
	send_window(r, &s, 11, SEND_NOTHING);
	send_window(r, &s, 12, SEND_ALL); /* IDR: frame 24 */
	send_window(r, &s, 13, SEND_ALL);
	pps_receiver_finish(r);
	CHECK_EQ_INT(s.windows_join, 1);
	CHECK_EQ_INT(s.windows_dropped, 1);
	CHECK_EQ_INT(s.windows_gap, 2);
	/* Frame 0 (window 0) was before this client's stream. */
	check_once(&s, 1, 26);
	for (int i = 1; i <= 6; i++)
		CHECK(s.missing[i] && strcmp(s.reason[i], PPS_FRAME_UNDECODABLE) == 0);
	CHECK(s.shown[8] && s.shown[9] && s.shown[10]);
	CHECK(s.missing[11] && strcmp(s.reason[11], PPS_FRAME_DROPPED) == 0);
	CHECK(s.missing[12] && strcmp(s.reason[12], PPS_FRAME_DROPPED) == 0);
	CHECK_EQ_INT(s.shown[16], 1);
	/* Window 9: frame 17 (temporal layer 1) was cut, frame 18 (base) shown. */
	CHECK(s.missing[17] && strcmp(s.reason[17], PPS_FRAME_LOST) == 0);
	CHECK_EQ_INT(s.shown[18], 1);
	for (int i = 19; i <= 22; i++)
		CHECK(s.missing[i] && strcmp(s.reason[i], PPS_FRAME_DROPPED) == 0);
	CHECK(s.shown[24] && s.shown[25] && s.shown[26]);
	pps_receiver_free(r);
}

/* A client joins with the IDR inside a window (frame 8 of frames 7-8): the
 * sender can send it the IDR on, not frame 7 (it references frame 6). Frame 7
 * is not this client's stream, like the windows in flight: not "lost". */
static void
test_join_before_idr(void)
{
	sink_t s;
	pps_receiver_t *r = new_receiver(&s);

	for (uint32_t w = 0; w <= 3; w++)
		send_window(r, &s, w, SEND_NONE_DROPPED);
	send_window(r, &s, 4, SEND_FROM_IDR);
	for (uint32_t w = 5; w <= 7; w++)
		send_window(r, &s, w, SEND_ALL);
	pps_receiver_finish(r);
	CHECK_EQ_INT(s.windows_join, 4);
	CHECK_EQ_INT(s.windows_dropped, 0);
	check_once(&s, 8, 14);
	for (int i = 8; i <= 14; i++)
		CHECK_EQ_INT(s.shown[i], 1);
	pps_receiver_free(r);
}

static void
test_undecodable(void)
{
	sink_t s;
	pps_receiver_t *r = new_receiver(&s);

	send_window(r, &s, 0, SEND_ALL);
	send_window(r, &s, 1, SEND_NONE_DROPPED);
	/* Window 2 depends on window 1's anchor: it comes, but cannot decode. */
	send_window(r, &s, 2, SEND_ALL);
	pps_receiver_finish(r);
	check_once(&s, 0, 4);
	CHECK(s.missing[3] && s.missing[4]);
	CHECK(s.missing[4] && strcmp(s.reason[4], PPS_FRAME_UNDECODABLE) == 0);
	pps_receiver_free(r);
}

/* The window open when the stream stops: its frames are in flight, logged
 * "stopped" (not lost), each once, whether or not the drain outputs some. */
static void
test_cut_at_stop(void)
{
	for (int begin_only = 0; begin_only < 2; begin_only++) {
		sink_t s;
		pps_receiver_t *r = new_receiver(&s);

		for (uint32_t w = 0; w <= 5; w++)
			send_window(r, &s, w, SEND_ALL);
		/* Window 6: frames 11 (B, temporal layer 1) and 12 (its anchor). */
		send_window(r, &s, 6, begin_only ? SEND_BEGIN_OPEN : SEND_ANCHOR_OPEN);
		pps_receiver_finish(r);
		check_once(&s, 0, 12);
		for (int i = 0; i <= 10; i++)
			CHECK_EQ_INT(s.shown[i], 1);
		CHECK(s.missing[11] && strcmp(s.reason[11], PPS_FRAME_STOPPED) == 0);
		if (begin_only)
			CHECK(s.missing[12] && strcmp(s.reason[12], PPS_FRAME_STOPPED) == 0);
		else
			CHECK_EQ_INT(s.shown[12], 1);
		pps_receiver_free(r);
	}
}

static void
expect_refused(pps_receiver_t *r, pps_wire_record_t rec, const char *text)
{
	char err[256] = "";

	CHECK_EQ_INT(pps_receiver_record(r, &rec, err, sizeof(err)), -EPROTO);
	if (!strstr(err, text)) {
		fprintf(stderr, "  got: %s\n  expected: %s\n", err, text);
		CHECK(!"error text");
	}
}

static void
test_untrusted(void)
{
	sink_t s;
	pps_receiver_t *r = new_receiver(&s);
	pps_wire_record_t end = {.kind = PPS_WIRE_WINDOW_END};
	pps_wire_record_t frag = {.kind = PPS_WIRE_ADU_FRAGMENT};
	uint8_t byte = 0;
	char err[256];

	send_window(r, &s, 0, SEND_ALL);
	send_window(r, &s, 1, SEND_ALL);
	/* A lone WINDOW_END 2^32 - 2 right after window 1: one error, not
	 * billions of dropped frames. */
	end.u.window_end = (pps_wire_window_end_t){.window_id = UINT32_MAX - 1,
	                                           .flags = PPS_WIRE_WINDOW_END_DROPPED};
	expect_refused(r, end, "window id jumps from 1 to 4294967294");
	check_once(&s, 0, 2);
	/* A plausible gap after a long pause is accounted as one run. */
	s.now_us += 10 * 1000000;
	end.u.window_end.window_id = 100;
	CHECK_EQ_INT(feed(r, end), 0);
	CHECK_EQ_INT(s.windows_gap, 98);
	CHECK_EQ_INT(s.windows_dropped, 1);
	pps_receiver_free(r);

	/* A frame number far outside its window. */
	r = new_receiver(&s);
	send_window(r, &s, 0, SEND_ALL);
	{
		pps_wire_record_t b = {.kind = PPS_WIRE_WINDOW_BEGIN};

		b.u.window_begin = (pps_wire_window_begin_t){
		    .window_id = 1, .frames = W, .adus = 1, .bytes = 10, .first_adu_id = 500};
		CHECK_EQ_INT(feed(r, b), 0);
	}
	frag.u.adu_fragment = (pps_wire_adu_fragment_t){.window_id = 1,
	                                                .adu_id = 500,
	                                                .frame_index = 1u << 30,
	                                                .total_bytes = 1,
	                                                .payload_len = 1,
	                                                .payload = &byte};
	expect_refused(r, frag, "frame 1073741824 is not in window 1");
	pps_receiver_free(r);

	/* STREAM_INFO sizes are checked before anything is sized from them. */
	r = new_receiver(&s);
	pps_receiver_reset(r);
	{
		pps_wire_stream_info_t info = stream_info();

		info.width = info.height = 4096;
		CHECK_EQ_INT(pps_receiver_stream_info(r, &info, err, sizeof(err)), -EPROTO);
		CHECK(strstr(err, "4096x4096 pictures refused") != NULL);
		info = stream_info();
		info.fps_den = 0;
		CHECK_EQ_INT(pps_receiver_stream_info(r, &info, err, sizeof(err)), -EPROTO);
		info = stream_info();
		info.base_width = 1000;
		CHECK_EQ_INT(pps_receiver_stream_info(r, &info, err, sizeof(err)), -EPROTO);
		info = stream_info();
		CHECK_EQ_INT(pps_receiver_stream_info(r, &info, err, sizeof(err)), 0);
	}
	pps_receiver_free(r);
}

/* Lone dropped WINDOW_ENDs from @first, one every @interval_us of the test's
 * clock, @count of them: how many were accepted before the first refusal
 * (its reason in @err). */
static unsigned
feed_dropped_windows(pps_receiver_t *r, sink_t *s, uint32_t first, unsigned count,
                     int64_t interval_us, char *err, size_t err_size)
{
	for (unsigned i = 0; i < count; i++) {
		pps_wire_record_t end = {.kind = PPS_WIRE_WINDOW_END};

		end.u.window_end = (pps_wire_window_end_t){.window_id = first + i,
		                                           .adus_dropped = 1,
		                                           .flags = PPS_WIRE_WINDOW_END_DROPPED};
		s->now_us += interval_us;
		if (pps_receiver_record(r, &end, err, err_size) < 0)
			return i;
	}
	return count;
}

static const pps_wire_stream_info_t *
info_copy(void)
{
	static pps_wire_stream_info_t info;

	info = stream_info();
	return &info;
}

/* Windows faster than the stream announced: a flood of tiny windows is
 * refused within a few hundred, saying the rate it saw and the one
 * announced; a catch-up after a stall, and a steady rate a few times the
 * announced one, pass. */
static void
test_window_rate(void)
{
	sink_t s;
	pps_receiver_t *r = new_receiver(&s);
	const pps_wire_stream_info_t *info = pps_receiver_info(r);
	double rate = (double)info->fps_num / info->fps_den / info->window_frames;
	int64_t interval_us = (int64_t)(1e6 / rate);
	unsigned catch_up = (unsigned)(rate * 10) + PPS_RECEIVER_GAP_MARGIN_WINDOWS;
	char err[256] = "";
	unsigned n;

	/* All at once: more than a catch-up, far fewer than the flood. */
	n = feed_dropped_windows(r, &s, 0, 100000, 0, err, sizeof(err));
	CHECK(n > catch_up && n < 1000);
	if (!strstr(err, "windows/s), the stream announced")) {
		fprintf(stderr, "  got: %s\n", err);
		CHECK(!"window rate text");
	}
	/* A new connection half a second later brings the refill of that half
	 * second, not a full bucket. */
	pps_receiver_reset(r);
	s.now_us += 500000;
	REQUIRE(pps_receiver_stream_info(r, info_copy(), err, sizeof(err)) == 0);
	n = feed_dropped_windows(r, &s, 0, 100000, 0, err, sizeof(err));
	CHECK(n <= (unsigned)(rate * PPS_RECEIVER_RATE_FACTOR) + 1);
	pps_receiver_free(r);

	/* 30 s at the announced rate, a stall of 10 s, then what the server
	 * queued and captured meanwhile at once, then the announced rate. */
	r = new_receiver(&s);
	n = feed_dropped_windows(r, &s, 0, (unsigned)(rate * 30), interval_us, err, sizeof(err));
	CHECK_EQ_INT(n, (unsigned)(rate * 30));
	s.now_us += 10 * 1000000;
	CHECK_EQ_INT(feed_dropped_windows(r, &s, n, catch_up, 0, err, sizeof(err)), catch_up);
	n += catch_up;
	CHECK_EQ_INT(feed_dropped_windows(r, &s, n, 100, interval_us, err, sizeof(err)), 100);
	pps_receiver_free(r);

	/* A minute at three times the announced rate. */
	r = new_receiver(&s);
	n = (unsigned)(rate * 3 * 60);
	CHECK_EQ_INT(feed_dropped_windows(r, &s, 0, n, interval_us / 3, err, sizeof(err)), n);
	pps_receiver_free(r);
}

/* 1-frame windows (no B frames): each frame comes out as soon as its top
 * layer is pushed, before its WINDOW_END (checked in send_window). */
static void
test_one_frame_windows(void)
{
	sink_t s;
	pps_receiver_t *r;

	for (size_t i = 0; i < n_adus; i++)
		pps_adu_unref(adus[i]);
	n_adus = 0;
	window_frames = 1;
	encode_stream(1);
	r = new_receiver(&s);
	check_before_end = true;
	for (uint32_t w = 0; w <= 12; w++)
		send_window(r, &s, w, SEND_ALL);
	check_before_end = false;
	pps_receiver_finish(r);
	check_once(&s, 0, 12);
	for (int i = 0; i <= 12; i++)
		CHECK_EQ_INT(s.shown[i], 1);
	pps_receiver_free(r);
}

static int
feed_rec(pps_receiver_t *r, unsigned copy, const pps_wire_record_t *rec)
{
	char err[256] = "";
	int ret = pps_receiver_record_copy(r, copy, rec, err, sizeof(err));

	if (ret < 0)
		fprintf(stderr, "  receiver, copy %u: %s\n", copy, err);
	return ret;
}

static int
feed_copy(pps_receiver_t *r, unsigned copy, size_t i)
{
	return feed_rec(r, copy, &tape.rec[i]);
}

/* Two connections carry the same windows: copy 1 runs ahead while copy 0 is
 * held up in the middle of window 3 (a loss on its connection); the stream
 * goes on from copy 1 at once, copy 0's late records are dropped when they
 * come, and every frame is decoded and accounted exactly once. */
static void
test_copies(void)
{
	sink_t s;
	pps_receiver_t *r = new_receiver(&s);
	size_t i0 = 0, i1 = 0, held;

	tape.on = true;
	tape.n = 0;
	for (uint32_t w = 0; w <= 12; w++)
		send_window(r, &s, w, SEND_ALL);
	tape.on = false;
	/* Windows 0..2 on both, copy 0 first. */
	while (i0 < tape.n && tape.window[i0] <= 2) {
		CHECK_EQ_INT(feed_copy(r, 0, i0++), 0);
		CHECK_EQ_INT(feed_copy(r, 1, i1++), 0);
	}
	CHECK_EQ_INT(s.last_output, 2 * (int64_t)W);
	/* Copy 0 brings WINDOW_BEGIN and one fragment of window 3, then waits. */
	CHECK_EQ_INT(feed_copy(r, 0, i0++), 0);
	CHECK_EQ_INT(feed_copy(r, 0, i0++), 0);
	held = i0;
	/* Copy 1 brings windows 3..5: they come out without copy 0. */
	while (i1 < tape.n && tape.window[i1] <= 5)
		CHECK_EQ_INT(feed_copy(r, 1, i1++), 0);
	CHECK_EQ_INT(s.last_output, 5 * (int64_t)W);
	/* Copy 0 catches up through window 8, ahead of copy 1 from window 6. */
	while (i0 < tape.n && tape.window[i0] <= 8)
		CHECK_EQ_INT(feed_copy(r, 0, i0++), 0);
	CHECK(i0 > held);
	CHECK_EQ_INT(s.last_output, 8 * (int64_t)W);
	/* Copy 1 ends (its connection closed) in the middle of window 7. */
	while (i1 < tape.n && tape.window[i1] <= 6)
		CHECK_EQ_INT(feed_copy(r, 1, i1++), 0);
	CHECK_EQ_INT(feed_copy(r, 1, i1++), 0);
	pps_receiver_drop_copy(r, 1);
	while (i0 < tape.n)
		CHECK_EQ_INT(feed_copy(r, 0, i0++), 0);
	pps_receiver_finish(r);
	check_once(&s, 0, 24);
	for (int i = 0; i <= 24; i++)
		CHECK_EQ_INT(s.shown[i], 1);
	CHECK_EQ_INT(s.windows_dropped + s.windows_gap, 0);
	/* A copy index out of range is refused. */
	{
		char err[128] = "";

		CHECK(pps_receiver_record_copy(r, PPS_RECEIVER_MAX_COPIES, &tape.rec[0], err,
		                               sizeof(err)) == -EINVAL);
		CHECK(strstr(err, "copy") != NULL);
	}
	pps_receiver_free(r);
}

/* Windows 0..12 on the tape, those in @dropped (a bit per window) as lone
 * dropped WINDOW_ENDs. */
static void
record_tape(pps_receiver_t *r, sink_t *s, uint32_t dropped)
{
	tape.on = true;
	tape.n = 0;
	for (uint32_t w = 0; w <= 12; w++)
		send_window(r, s, w, (dropped >> w) & 1 ? SEND_NONE_DROPPED : SEND_ALL);
	tape.on = false;
}

/* The tape kept for another copy; returns its length. */
static size_t
save_tape(pps_wire_record_t *rec, uint32_t *window)
{
	memcpy(rec, tape.rec, tape.n * sizeof(rec[0]));
	memcpy(window, tape.window, tape.n * sizeof(window[0]));
	return tape.n;
}

/* Feeds the stream's own connection's tape @a (windows @aw) from *@i up to
 * the end of window @last. */
static void
feed_own_through(pps_receiver_t *r, const pps_wire_record_t *a, const uint32_t *aw, size_t na,
                 size_t *i, uint32_t last)
{
	while (*i < na && aw[*i] <= last)
		CHECK_EQ_INT(feed_rec(r, 0, &a[(*i)++]), 0);
}

/* Feeds copy 1's tape from *@i up to the end of window @last. */
static void
feed_copy_through(pps_receiver_t *r, size_t *i, uint32_t last)
{
	while (*i < tape.n && tape.window[*i] <= last)
		CHECK_EQ_INT(feed_copy(r, 1, (*i)++), 0);
}

/* Each viewer has its own regulator: a copy may drop a window the other
 * brings. Copy 1 drops window 5 before copy 0 brings it: window 5 is still
 * shown. Both drop window 7: it is dropped, once. */
static void
test_copies_dropped(void)
{
	sink_t s;
	pps_receiver_t *r = new_receiver(&s);
	static pps_wire_record_t a[MAX_RECORDS];
	static uint32_t aw[MAX_RECORDS];
	size_t na, i0 = 0, i1 = 0;

	record_tape(r, &s, 1u << 7);
	na = save_tape(a, aw);
	record_tape(r, &s, 1u << 5 | 1u << 7);
	/* Windows 0..4 on both. */
	feed_own_through(r, a, aw, na, &i0, 4);
	feed_copy_through(r, &i1, 4);
	/* Copy 1's dropped window 5 first, then copy 0's whole one. */
	feed_copy_through(r, &i1, 5);
	CHECK_EQ_INT(s.windows_dropped + s.windows_gap, 0);
	feed_own_through(r, a, aw, na, &i0, 6);
	CHECK_EQ_INT(s.last_output, 6 * (int64_t)W);
	/* Window 7: copy 1 brings 6 and drops 7, nothing closes yet; copy 0's
	 * drop closes it. */
	feed_copy_through(r, &i1, 7);
	CHECK_EQ_INT(s.windows_dropped, 0);
	feed_own_through(r, a, aw, na, &i0, 7);
	CHECK_EQ_INT(s.windows_dropped, 1);
	feed_own_through(r, a, aw, na, &i0, UINT32_MAX);
	feed_copy_through(r, &i1, UINT32_MAX);
	pps_receiver_finish(r);
	check_once(&s, 0, 24);
	for (int i = 0; i <= 24; i++) {
		/* Window 7 (frames 13, 14) and frame 15, which references it
		 * (the next IDR is frame 16). */
		unsigned want = i >= 13 && i <= 15 ? 0 : 1;

		if (s.shown[i] != want)
			fprintf(stderr, "  frame %d shown %u (%s)\n", i, s.shown[i],
			        s.reason[i] ? s.reason[i] : "");
		CHECK_EQ_INT(s.shown[i], want);
	}
	CHECK_EQ_INT(s.windows_dropped, 1);
	pps_receiver_free(r);
}

/* The stream's own connection's tape into @a (its windows in @aw), and in
 * `tape` copy 1's, which rests through windows 3 and 4; returns @a's count. */
static size_t
rest_tapes(pps_receiver_t *r, sink_t *s, pps_wire_record_t *a, uint32_t *aw)
{
	size_t na;

	record_tape(r, s, 0);
	na = save_tape(a, aw);
	record_tape(r, s, 1u << 3 | 1u << 4);
	for (size_t i = 0; i < tape.n; i++)
		if (tape.window[i] == 3 || tape.window[i] == 4)
			tape.rec[i].u.window_end.flags |= PPS_WIRE_WINDOW_END_RESTED;
	return na;
}

/* The rest of both tapes from @i0 and @i1 (@a's windows in @aw): every frame shown once, no
 * window dropped or a gap; frees @r. */
static void
feed_rest_all_shown(pps_receiver_t *r, sink_t *s, const pps_wire_record_t *a, const uint32_t *aw,
                    size_t na, size_t i0, size_t i1)
{
	feed_own_through(r, a, aw, na, &i0, UINT32_MAX);
	feed_copy_through(r, &i1, UINT32_MAX);
	pps_receiver_finish(r);
	check_once(s, 0, 24);
	for (int i = 0; i <= 24; i++) {
		if (s->shown[i] != 1)
			fprintf(stderr, "  frame %d shown %u (%s)\n", i, s->shown[i],
			        s->reason[i] ? s->reason[i] : "");
		CHECK_EQ_INT(s->shown[i], 1);
	}
	CHECK_EQ_INT(s->windows_dropped + s->windows_gap, 0);
	pps_receiver_free(r);
}

/* A copy at rest: copy 1 rests through windows 3 and 4 (lone dropped
 * WINDOW_ENDs with the rested flag), then, back from rest, brings windows
 * 5 and 6 while copy 0 is held up in the middle of window 4. Window 4 is
 * not given up (copy 1 never carried it); copy 1's windows 5 and 6, begun
 * before their turn, are kept and come out the moment copy 0 closes 4; copy
 * 0's own window 5, coming after that, is not the stream's, and copy 1's
 * window 7 goes on from there. Every frame is shown. */
static void
test_copies_rest(void)
{
	sink_t s;
	pps_receiver_t *r = new_receiver(&s);
	static pps_wire_record_t a[MAX_RECORDS];
	static uint32_t aw[MAX_RECORDS];
	size_t na, i0 = 0, i1 = 0;

	na = rest_tapes(r, &s, a, aw);
	/* Windows 0..2 on both, then copy 1 rests through 3 and 4. */
	feed_own_through(r, a, aw, na, &i0, 2);
	feed_copy_through(r, &i1, 4);
	/* Copy 0: window 3, then WINDOW_BEGIN and one fragment of window 4. */
	feed_own_through(r, a, aw, na, &i0, 3);
	for (int k = 0; k < 2; k++)
		CHECK_EQ_INT(feed_rec(r, 0, &a[i0++]), 0);
	CHECK_EQ_INT(s.last_output, 3 * (int64_t)W);
	/* Copy 1, back from rest, brings windows 5 and 6: nothing is given up. */
	feed_copy_through(r, &i1, 6);
	CHECK_EQ_INT(s.windows_dropped + s.windows_gap, 0);
	CHECK_EQ_INT(s.last_output, 3 * (int64_t)W);
	/* Copy 0: the rest of window 4; copy 1's 5 and 6 follow it out. */
	feed_own_through(r, a, aw, na, &i0, 4);
	CHECK_EQ_INT(s.last_output, 6 * (int64_t)W);
	/* Copy 0's window 5's WINDOW_BEGIN and one fragment; copy 1 brings 7. */
	for (int k = 0; k < 2; k++)
		CHECK_EQ_INT(feed_rec(r, 0, &a[i0++]), 0);
	feed_copy_through(r, &i1, 7);
	CHECK_EQ_INT(s.last_output, 7 * (int64_t)W);
	CHECK_EQ_INT(s.windows_dropped + s.windows_gap, 0);
	feed_rest_all_shown(r, &s, a, aw, na, i0, i1);
}

/* A copy back from rest begins a later window while no window is open: the
 * stream's own connection closed the one before the windows the copy
 * rested through and has not begun the next. Those are not a gap. */
static void
test_copies_rest_between(void)
{
	sink_t s;
	pps_receiver_t *r = new_receiver(&s);
	static pps_wire_record_t a[MAX_RECORDS];
	static uint32_t aw[MAX_RECORDS];
	size_t na, i0 = 0, i1 = 0;

	na = rest_tapes(r, &s, a, aw);
	/* Windows 0..2 on both: nothing open. */
	feed_own_through(r, a, aw, na, &i0, 2);
	feed_copy_through(r, &i1, 2);
	/* Copy 1 rests through 3 and 4 and brings 5 and 6 before copy 0 begins 3. */
	feed_copy_through(r, &i1, 6);
	CHECK_EQ_INT(s.windows_dropped + s.windows_gap, 0);
	CHECK(s.last_output < 3 * (int64_t)W); /* nothing of window 3 on yet */
	feed_rest_all_shown(r, &s, a, aw, na, i0, i1);
}

/* The encoded stream's ADUs in windows 0 .. @last. */
static uint64_t
adus_in_windows(uint32_t last)
{
	uint64_t n = 0;

	for (size_t i = 0; i < n_adus; i++)
		if (pps_window_index_of_frame(pps_adu_info(adus[i])->frame_index, W) <= last)
			n++;
	return n;
}

/* A copy back from rest brings a later window whole while the stream's own
 * connection has brought every ADU of the window before it but not yet its
 * WINDOW_END: the copy's ADUs are next in decode order and decoded at once.
 * The own connection's WINDOW_END and its copy of that later window must not
 * take the decode cursor back: each ADU reaches the decoder once, and every
 * frame is shown. */
static void
test_copies_rest_ahead_of_end(void)
{
	sink_t s;
	pps_receiver_t *r = new_receiver(&s);
	static pps_wire_record_t a[MAX_RECORDS];
	static uint32_t aw[MAX_RECORDS];
	size_t na, i0 = 0, i1 = 0;
	pps_receiver_stats_t st;

	na = rest_tapes(r, &s, a, aw);
	feed_own_through(r, a, aw, na, &i0, 2);
	feed_copy_through(r, &i1, 4);
	/* Own: window 3, then window 4 but its WINDOW_END. */
	feed_own_through(r, a, aw, na, &i0, 3);
	while (i0 + 1 < na && aw[i0 + 1] == 4)
		CHECK_EQ_INT(feed_rec(r, 0, &a[i0++]), 0);
	REQUIRE(a[i0].kind == PPS_WIRE_WINDOW_END && aw[i0] == 4);
	/* Copy 1 brings window 5 whole: its frames come out from it. */
	feed_copy_through(r, &i1, 5);
	CHECK_EQ_INT(s.last_output, 5 * (int64_t)W);
	feed_own_through(r, a, aw, na, &i0, UINT32_MAX);
	feed_copy_through(r, &i1, UINT32_MAX);
	pps_receiver_get_stats(r, &st);
	CHECK_EQ_INT(st.adus_decoded, adus_in_windows(12));
	CHECK_EQ_INT(st.decode_errors, 0);
	feed_rest_all_shown(r, &s, a, aw, na, i0, i1);
}

/* A small deterministic generator for the interleavings below. */
static uint32_t
next_random(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return (uint32_t)(*state >> 32);
}

/* A lone dropped WINDOW_END that is not a copy's rest: its sender dropped the
 * window at its deadline. */
static bool
sender_dropped(const pps_wire_record_t *rec)
{
	return rec->kind == PPS_WIRE_WINDOW_END &&
	       (rec->u.window_end.flags & PPS_WIRE_WINDOW_END_DROPPED) &&
	       !(rec->u.window_end.flags & PPS_WIRE_WINDOW_END_RESTED);
}

/* Two to four connections' records in every kind of order: each copy rests
 * through a run of windows (or none), any connection's sender may drop a
 * window (every third round), a copy's connection may end at any record
 * (every fourth), and the tapes are fed in a random interleaving, each in
 * its own order, as TCP connections deliver them.
 * Whatever the order, every frame is accounted exactly once, each ADU reaches
 * the decoder at most once and the decoder refuses none; a window is dropped
 * only if no connection brought it, and while each window came on one of
 * them every frame is shown. */
#define MAX_CONNS PPS_RECEIVER_MAX_COPIES
static void
test_copies_interleavings(void)
{
	static pps_wire_record_t recs[MAX_CONNS][MAX_RECORDS];
	static uint32_t wins[MAX_CONNS][MAX_RECORDS];
	uint64_t state = 0x9e3779b97f4a7c15ull;
	unsigned failed = 0;

	for (unsigned round = 0; round < 600 && failed < 3; round++) {
		sink_t s;
		pps_receiver_t *r = new_receiver(&s);
		unsigned conns = 2 + round % 3;
		uint32_t rested[MAX_CONNS] = {0}, dropped[MAX_CONNS] = {0}, lost = 0x1ffe;
		unsigned weight[MAX_CONNS], cut = 0;
		size_t n[MAX_CONNS], at[MAX_CONNS] = {0}, cut_at = 0;
		pps_receiver_stats_t st;
		bool ok = true;

		for (unsigned c = 0; c < conns; c++) {
			uint32_t first = 1 + next_random(&state) % 8;
			uint32_t len = c ? next_random(&state) % 6 : 0; /* 0: never rests */

			weight[c] = 1 + next_random(&state) % 7;
			for (uint32_t w = first; w < first + len && w <= 11; w++)
				rested[c] |= 1u << w;
			for (uint32_t w = 1; w <= 12 && round % 3 == 2; w++)
				if (!((rested[c] >> w) & 1) && next_random(&state) % 6 == 0)
					dropped[c] |= 1u << w;
			lost &= rested[c] | dropped[c];
			record_tape(r, &s, rested[c] | dropped[c]);
			for (size_t i = 0; i < tape.n; i++)
				if ((rested[c] >> tape.window[i]) & 1)
					tape.rec[i].u.window_end.flags |=
					    PPS_WIRE_WINDOW_END_RESTED;
			n[c] = save_tape(recs[c], wins[c]);
		}
		/* Every fourth round a copy's connection ends at a random record:
		 * it brought only the windows it ended before that. */
		if (round % 4 == 3) {
			uint32_t brought = 0;

			cut = 1 + next_random(&state) % (conns - 1);
			cut_at = next_random(&state) % n[cut];
			for (size_t i = 0; i < cut_at; i++)
				if (recs[cut][i].kind == PPS_WIRE_WINDOW_END &&
				    !(recs[cut][i].u.window_end.flags &
				      PPS_WIRE_WINDOW_END_DROPPED))
					brought |= 1u << wins[cut][i];
			lost = 0x1ffe & ~brought;
			for (unsigned c = 0; c < conns; c++)
				if (c != cut)
					lost &= rested[c] | dropped[c];
		}
		for (;;) {
			unsigned total = 0, pick, c;

			for (c = 0; c < conns; c++)
				total += at[c] < n[c] ? weight[c] : 0;
			if (total == 0)
				break;
			pick = next_random(&state) % total;
			for (c = 0; c < conns; c++) {
				unsigned w = at[c] < n[c] ? weight[c] : 0;

				if (pick < w)
					break;
				pick -= w;
			}
			/* No connection runs more than six windows (200 ms) ahead of
			 * another: a longer stall passes the deadline, and its sender
			 * drops what it holds. A sender drops a window at its
			 * deadline, long after another connection's sender wrote it:
			 * that one's records of the window come first. */
			for (unsigned turn = 0; turn < conns; turn++) {
				unsigned o;

				for (o = 0; o < conns; o++)
					if (o != c && at[o] < n[o] &&
					    (wins[c][at[c]] > wins[o][at[o]] + 6 ||
					     (sender_dropped(&recs[c][at[c]]) &&
					      wins[o][at[o]] <= wins[c][at[c]] &&
					      !(sender_dropped(&recs[o][at[o]]) &&
					        wins[o][at[o]] == wins[c][at[c]]))))
						break;
				if (o == conns)
					break;
				c = o;
			}
			ok = ok && feed_rec(r, c, &recs[c][at[c]++]) == 0;
			if (cut && c == cut && at[c] == cut_at) {
				pps_receiver_drop_copy(r, cut);
				n[cut] = at[cut];
			}
		}
		pps_receiver_finish(r);
		pps_receiver_get_stats(r, &st);
		ok = ok && st.adus_decoded <= adus_in_windows(12) && st.decode_errors == 0;
		if (!lost)
			ok = ok && st.adus_decoded == adus_in_windows(12);
		for (int i = 0; i <= 24; i++)
			ok = ok && s.shown[i] + s.missing[i] == 1 && (lost || s.shown[i] == 1);
		/* A window every connection dropped: closed as dropped, or passed
		 * over as a gap when a later window began before the last drop.
		 * One that the ended connection had begun stays open until a later
		 * one begins: its frames not out are lost, its window not dropped. */
		if (cut)
			ok = ok && s.windows_dropped + s.windows_gap <=
			               (unsigned)__builtin_popcount(lost);
		else
			ok = ok && s.windows_dropped + s.windows_gap ==
			               (unsigned)__builtin_popcount(lost);
		if (!ok) {
			failed++;
			fprintf(stderr,
			        "  round %u: %llu ADUs decoded of %llu, %llu refused, %u dropped, "
			        "%u gaps; lost %#x; connection %u ended at record %zu\n",
			        round, (unsigned long long)st.adus_decoded,
			        (unsigned long long)adus_in_windows(12),
			        (unsigned long long)st.decode_errors, s.windows_dropped,
			        s.windows_gap, lost, cut, cut_at);
			for (unsigned c = 0; c < conns; c++)
				fprintf(stderr, "    connection %u: rested %#x, dropped %#x\n", c,
				        rested[c], dropped[c]);
			for (int i = 0; i <= 24; i++)
				if (s.shown[i] + s.missing[i] != 1 || (!lost && s.shown[i] != 1))
					fprintf(stderr, "    frame %d shown %u missing %u (%s)\n",
					        i, s.shown[i], s.missing[i],
					        s.reason[i] ? s.reason[i] : "");
		}
		pps_receiver_free(r);
	}
	CHECK_EQ_INT(failed, 0);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	encode_stream(2);
	PPS_TEST_RUN(test_all_shown);
	PPS_TEST_RUN(test_every_path);
	PPS_TEST_RUN(test_join_before_idr);
	PPS_TEST_RUN(test_undecodable);
	PPS_TEST_RUN(test_cut_at_stop);
	PPS_TEST_RUN(test_untrusted);
	PPS_TEST_RUN(test_window_rate);
	PPS_TEST_RUN(test_copies);
	PPS_TEST_RUN(test_copies_dropped);
	PPS_TEST_RUN(test_copies_rest);
	PPS_TEST_RUN(test_copies_rest_between);
	PPS_TEST_RUN(test_copies_rest_ahead_of_end);
	PPS_TEST_RUN(test_copies_interleavings);
	PPS_TEST_RUN(test_one_frame_windows);
	for (size_t i = 0; i < n_adus; i++)
		pps_adu_unref(adus[i]);
	return pps_test_result();
}
