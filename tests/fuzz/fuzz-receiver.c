/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the client's side of the stream: records parsed from
 * the input go to the receiver (reassembly, decode order, the decoder) and
 * everything it reports to the accounting (pps_stats: frames, gaps, windows),
 * with a JSON Lines log into a bounded sink, as pps-client wires them. The
 * clock advances one frame per record. Properties checked on every input:
 *  - the work and output stay bounded: every missing-frames report and
 *    window gap is bounded by what the time since the stream began allows
 *    (an id jump must be a protocol error, not 2^32 frames of accounting);
 *  - frames are accounted once: indexes reported never repeat;
 *  - the first record must be a valid STREAM_INFO, and a refused record ends
 *    the stream the way the client ends the connection.
 *
 *   CC=clang meson setup build-fuzz -Dfuzz=true && ninja -C build-fuzz
 *   build-fuzz/tests/fuzz/fuzz-receiver -max_total_time=300 tests/fuzz/corpus-receiver
 */
#include "pps-client-internal.h"
#include "pps-prioritizer.h"

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The receiver allows a gap of PPS_RECEIVER_GAP_MARGIN_WINDOWS plus twice the
 * windows the elapsed time holds; frames per window at most 64. */
#define MAX_GAP_WINDOWS(elapsed_windows)                                                           \
	(PPS_RECEIVER_GAP_MARGIN_WINDOWS + 2 * (elapsed_windows) + (elapsed_windows) / 50 + 4)
#define MAX_FRAMES_PER_REPORT(elapsed_windows)                                                     \
	((uint64_t)64 * (MAX_GAP_WINDOWS(elapsed_windows) + 2))

typedef struct {
	int64_t now_us;
	int64_t start_us;
	pps_stats_t *stats;
	const pps_receiver_t *receiver;
	int64_t highest_frame; /* highest frame index reported, -1 none */
	uint64_t frames_reported;
} sink_t;

static int64_t
fuzz_clock(void *user)
{
	return ((sink_t *)user)->now_us;
}

static uint64_t
elapsed_windows(const sink_t *s)
{
	const pps_wire_stream_info_t *info = pps_receiver_info(s->receiver);
	int64_t window_us;

	if (!info)
		return 0;
	window_us = (int64_t)info->window_frames * 1000000 * info->fps_den / info->fps_num;
	return window_us > 0 ? (uint64_t)((s->now_us - s->start_us) / window_us) : 0;
}

static void
frame_cb(const pps_receiver_frame_t *rf, void *user)
{
	sink_t *s = user;
	const pps_decoded_frame_t *df = rf->decoded;
	pps_stats_frame_t f = {
	    .window = pps_window_index_of_frame(df->frame_index,
	                                        pps_receiver_info(s->receiver)->window_frames),
	    .frame = df->frame_index,
	    .capture_us = df->capture_us,
	    .display_us = s->now_us,
	    .temporal_layers = df->temporal_layer + 1u,
	    .quality_layers = df->quality_layers,
	    .shown = true,
	    .received_us = rf->received_us,
	    .decoded_us = rf->decoded_us,
	};

	s->frames_reported++;
	pps_stats_frame(s->stats, &f);
}

static void
missing_cb(const pps_receiver_missing_t *m, void *user)
{
	sink_t *s = user;

	assert(m->first_frame >= 0);
	assert(m->count <= MAX_FRAMES_PER_REPORT(elapsed_windows(s)));
	/* Reported once: a run never starts at or below one reported before. */
	assert(m->first_frame > s->highest_frame || m->count == 0);
	if (m->count)
		s->highest_frame = m->first_frame + (int64_t)m->count - 1;
	s->frames_reported += m->count;
	pps_stats_missing(s->stats, pps_receiver_info(s->receiver)->window_frames, m->first_frame,
	                  m->count, m->first_capture_us, m->frame_interval_us, m->reason);
}

static void
window_cb(const pps_receiver_window_t *w, void *user)
{
	sink_t *s = user;
	pps_stats_window_t sw;

	pps_stats_window_from_receiver(w, &sw);
	assert(w->windows <= MAX_GAP_WINDOWS(elapsed_windows(s)));
	pps_stats_window(s->stats, &sw);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char log_buf[1 << 16];
	sink_t sink = {.now_us = 1700000000000000LL, .highest_frame = -1};
	pps_receiver_callbacks_t cb = {
	    .frame_cb = frame_cb, .missing_cb = missing_cb, .window_cb = window_cb};
	pps_wire_parser_t *parser = pps_wire_parser_new(PPS_WIRE_DEFAULT_MAX_RECORD_BYTES);
	/* The JSON Lines log goes to a fixed buffer: a full one fails writes, it never grows. */
	FILE *log = fmemopen(log_buf, sizeof(log_buf), "w");
	pps_receiver_t *receiver;
	pps_stats_summary_t summary;
	bool have_info = false;

	sink.start_us = sink.now_us;
	receiver = pps_receiver_new(&cb, fuzz_clock, &sink);
	sink.stats = pps_stats_new(log, 30.0);
	if (!parser || !log || !receiver || !sink.stats)
		abort();
	sink.receiver = receiver;
	while (size > 0) {
		pps_wire_record_t record;
		char err[256];
		int ret = pps_wire_parser_next(parser, &data, &size, &record);

		if (ret < 0) /* -EAGAIN at the input's end, or malformed */
			break;
		sink.now_us += 33333;
		if (!have_info) {
			if (record.kind != PPS_WIRE_STREAM_INFO ||
			    pps_receiver_stream_info(receiver, &record.u.stream_info, err,
			                             sizeof(err)) < 0)
				break;
			have_info = true;
			continue;
		}
		if (record.kind != PPS_WIRE_WINDOW_BEGIN && record.kind != PPS_WIRE_ADU_FRAGMENT &&
		    record.kind != PPS_WIRE_WINDOW_END)
			continue; /* the connection's, not the receiver's */
		if (pps_receiver_record(receiver, &record, err, sizeof(err)) < 0)
			break;
	}
	if (have_info)
		pps_receiver_finish(receiver);
	pps_stats_summarize(sink.stats, &summary);
	assert(summary.frames_total <= sink.frames_reported + 1);
	pps_stats_free(sink.stats);
	pps_receiver_free(receiver);
	pps_wire_parser_free(parser);
	fclose(log);
	return 0;
}
