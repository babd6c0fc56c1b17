/* SPDX-License-Identifier: MIT */
/*
 * Replays a client's log (--log, JSON Lines) through the audio jitter buffer
 * with other parameters: each frame's first-copy arrival (audio_arrival
 * events: its delay from capture, its voice activity) is put at the time it
 * arrived, each slot is popped when due, and the picture's latency (frame
 * events) sets the lip-sync floor as the audio player does. It prints what
 * the run would have measured: mouth-to-ear, played, the playout delay and
 * the A/V skew. A tool, not a test: the path is the one the log recorded, the
 * policy is what changes.
 *
 *   jitter-replay LOG [--quantile Q] [--window-s S] [--cap-ms C]
 *                 [--sync-percentile P] [--sync-lead-ms L] [--min-delay-ms M]
 *                 [--hysteresis-ms H] [--trace FILE]
 *
 * --quantile 0 (default) is the delay estimate + 4 x its variation; 0 < Q < 1
 * the quantile target over --window-s (10), at most --cap-ms (150) above the
 * delay floor. --sync-percentile 0 turns lip sync
 * off; default PPS_AUDIO_SYNC_PERCENTILE of the last 64 frames shown, minus
 * --sync-lead-ms (PPS_AUDIO_SYNC_LEAD_US). Frames whose log carries no voice
 * activity are taken as the test source's ticks (two speech frames a second).
 * --hysteresis-ms is pps_jitter_params_t's hysteresis_us (default 10; under
 * a quarter frame, 5 ms at 20 ms, is the rule without it). --trace writes one
 * line per slot: its time (s from the first capture), its action
 * (pps_jitter_action_t), its voice activity, its playout delay, the target
 * after it and the lip-sync floor (ms).
 */
#include "pps-client-internal.h"
#include "pps-jitter.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The decoder's delay the player adds to each slot (pps-audio-player.c). */
#define OPUS_DELAY_US 6500
/* The picture's recent latencies lip sync looks at (pps-stats.c). */
#define RECENT_VIDEO 64
/* A skew is counted against the last slot heard at most this long before. */
#define SKEW_AUDIO_US 200000

typedef struct {
	int64_t t_us; /* arrival, or display */
	bool video;
	bool speech;
	uint32_t seq;
	int64_t capture_us; /* audio: the frame's; video: display - latency */
} event_t;

typedef struct {
	void *v;
	size_t n, cap, size;
} vec_t;

static void *
vec_push(vec_t *v)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? 2 * v->cap : 1024;
		void *p = realloc(v->v, cap * v->size);

		if (!p) {
			fprintf(stderr, "jitter-replay: out of memory\n");
			exit(1);
		}
		v->v = p;
		v->cap = cap;
	}
	return (char *)v->v + v->size * v->n++;
}

/* The number after "key": in @line; false when absent. */
static bool
field(const char *line, const char *key, double *out)
{
	char pattern[64];
	const char *p;

	snprintf(pattern, sizeof(pattern), "\"%s\":", key);
	p = strstr(line, pattern);
	if (!p)
		return false;
	*out = strtod(p + strlen(pattern), NULL);
	return true;
}

/* The boolean after "key": in @line: 1, 0, or -1 when absent. */
static int
bool_field(const char *line, const char *key)
{
	char pattern[64];
	const char *p;

	snprintf(pattern, sizeof(pattern), "\"%s\":", key);
	p = strstr(line, pattern);
	if (!p)
		return -1;
	return strncmp(p + strlen(pattern), "true", 4) == 0;
}

static int
compare_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int
compare_event(const void *a, const void *b)
{
	const event_t *x = a, *y = b;

	return (x->t_us > y->t_us) - (x->t_us < y->t_us);
}

/* Nearest rank, @p in 0 .. 100, of @v (sorted). */
static double
rank(const double *v, size_t n, double p)
{
	size_t r = (size_t)ceil(p / 100.0 * (double)n);

	return n ? v[r < 1 ? 0 : r - 1] : NAN;
}

static int
usage(void)
{
	fprintf(stderr, "usage: jitter-replay LOG [--quantile Q] [--window-s S] [--cap-ms C] "
	                "[--sync-percentile P] [--sync-lead-ms L] [--min-delay-ms M] "
	                "[--hysteresis-ms H] [--trace FILE]\n");
	return 2;
}

int
main(int argc, char **argv)
{
	double quantile = 0, window_s = 10, sync_pct = PPS_AUDIO_SYNC_PERCENTILE;
	double lead_ms = PPS_AUDIO_SYNC_LEAD_US / 1000.0, min_delay_ms = -1, cap_ms = -1;
	FILE *trace = NULL;
	double hysteresis_ms = -1;
	int64_t sync_floor_us = 0;
	vec_t events = {.size = sizeof(event_t)}, slots_m2e = {.size = sizeof(double)},
	      skews = {.size = sizeof(double)};
	int64_t first_capture_us = INT64_MIN, frame_us = 0, last_video_us = INT64_MIN;
	int64_t last_ear_us = INT64_MIN;
	double last_m2e_ms = 0, recent[RECENT_VIDEO], sorted[RECENT_VIDEO];
	uint32_t first_seq = 0, prev_seq = 0;
	int64_t prev_capture_us = INT64_MIN;
	size_t n_recent = 0, next_recent = 0, played = 0, slots = 0, in_window = 0;
	pps_jitter_params_t params;
	pps_jitter_t *j;
	pps_jitter_stats_t st;
	char line[4096];
	FILE *f;

	if (argc < 2)
		return usage();
	for (int i = 2; i < argc; i++) {
		if (i + 1 >= argc)
			return usage();
		if (!strcmp(argv[i], "--quantile"))
			quantile = atof(argv[++i]);
		else if (!strcmp(argv[i], "--window-s"))
			window_s = atof(argv[++i]);
		else if (!strcmp(argv[i], "--cap-ms"))
			cap_ms = atof(argv[++i]);
		else if (!strcmp(argv[i], "--sync-percentile"))
			sync_pct = atof(argv[++i]);
		else if (!strcmp(argv[i], "--sync-lead-ms"))
			lead_ms = atof(argv[++i]);
		else if (!strcmp(argv[i], "--min-delay-ms"))
			min_delay_ms = atof(argv[++i]);
		else if (!strcmp(argv[i], "--hysteresis-ms"))
			hysteresis_ms = atof(argv[++i]);
		else if (!strcmp(argv[i], "--trace")) {
			trace = fopen(argv[++i], "w");
			if (!trace) {
				perror(argv[i]);
				return 1;
			}
		} else
			return usage();
	}
	f = fopen(argv[1], "r");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	/* Capture times: the slots' (audio events) give the sender's timeline
	 * and its frame length; arrivals are capture + delay. */
	while (fgets(line, sizeof(line), f)) {
		double seq, capture;

		if (!strstr(line, "\"type\":\"audio\"") || !field(line, "seq", &seq) ||
		    !field(line, "capture_us", &capture))
			continue;
		if (first_capture_us == INT64_MIN) {
			first_capture_us = (int64_t)capture;
			first_seq = (uint32_t)seq;
		} else if (!frame_us && (uint32_t)seq == prev_seq + 1) {
			frame_us = ((int64_t)capture - prev_capture_us + 500) / 5000 * 5000;
		}
		prev_seq = (uint32_t)seq;
		prev_capture_us = (int64_t)capture;
	}
	if (first_capture_us == INT64_MIN || (frame_us != 10000 && frame_us != 20000)) {
		fprintf(stderr, "jitter-replay: %s: no audio slots of 10 or 20 ms frames\n",
		        argv[1]);
		return 1;
	}
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		double seq, delay, display, latency;
		int speech;
		event_t *e;

		if (strstr(line, "\"type\":\"audio_arrival\"") && field(line, "seq", &seq) &&
		    field(line, "delay_ms", &delay)) {
			e = vec_push(&events);
			e->video = false;
			e->seq = (uint32_t)seq;
			e->capture_us =
			    first_capture_us + (int64_t)(int32_t)(e->seq - first_seq) * frame_us;
			e->t_us = e->capture_us + (int64_t)llround(delay * 1000);
			speech = bool_field(line, "speech");
			e->speech = speech >= 0
			                ? speech == 1
			                : (int64_t)(e->seq % (uint32_t)(1000000 / frame_us)) <
			                      40000 / frame_us;
		} else if (strstr(line, "\"type\":\"frame\"") && strstr(line, "\"shown\":true") &&
		           field(line, "display_us", &display) &&
		           field(line, "latency_ms", &latency)) {
			e = vec_push(&events);
			e->video = true;
			e->t_us = (int64_t)display;
			e->capture_us = (int64_t)display - (int64_t)llround(latency * 1000);
		}
	}
	fclose(f);
	qsort(events.v, events.n, sizeof(event_t), compare_event);

	pps_jitter_params_init(&params, frame_us);
	params.target_quantile = quantile;
	params.quantile_window_us = (int64_t)(window_s * 1e6);
	if (min_delay_ms >= 0)
		params.min_delay_us = (int64_t)(min_delay_ms * 1000);
	if (cap_ms >= 0)
		params.quantile_cap_us = (int64_t)(cap_ms * 1000);
	if (hysteresis_ms >= 0)
		params.hysteresis_us = (int64_t)(hysteresis_ms * 1000);
	j = pps_jitter_new(&params);
	if (!j) {
		fprintf(stderr, "jitter-replay: parameters out of range\n");
		return 2;
	}
	for (size_t k = 0; k < events.n; k++) {
		const event_t *e = (const event_t *)events.v + k;
		pps_jitter_slot_t slot;
		int64_t due;

		while ((due = pps_jitter_next_due_us(j)) <= e->t_us) {
			if (sync_pct > 0 && n_recent > 0 && due - last_video_us <= 1000000) {
				memcpy(sorted, recent, n_recent * sizeof(double));
				qsort(sorted, n_recent, sizeof(double), compare_double);
				sync_floor_us =
				    (int64_t)(rank(sorted, n_recent, sync_pct) - lead_ms * 1000);
			} else {
				sync_floor_us = 0;
			}
			pps_jitter_set_floor(j, sync_floor_us);
			if (pps_jitter_pop(j, due, &slot) != 1)
				break;
			if (trace) {
				pps_jitter_stats_t now;

				pps_jitter_get_stats(j, &now);
				fprintf(trace, "%.3f %d %d %.3f %.3f %.3f\n",
				        (double)(slot.playout_us - first_capture_us) / 1e6,
				        (int)slot.action, slot.speech,
				        (double)(slot.playout_us - slot.capture_us) / 1000.0,
				        (double)now.target_delay_us / 1000.0,
				        (double)sync_floor_us / 1000.0);
			}
			if (slot.action == PPS_JITTER_SKIP)
				continue;
			slots++;
			played += slot.action == PPS_JITTER_PLAY;
			last_ear_us = slot.playout_us + OPUS_DELAY_US;
			last_m2e_ms = (double)(last_ear_us - slot.capture_us) / 1000.0;
			*(double *)vec_push(&slots_m2e) = last_m2e_ms;
		}
		if (!e->video) {
			uint8_t payload[1] = {0};

			pps_jitter_put(j, e->seq, e->capture_us, e->speech, payload,
			               sizeof(payload), e->t_us);
			continue;
		}
		recent[next_recent] = (double)(e->t_us - e->capture_us);
		next_recent = (next_recent + 1) % RECENT_VIDEO;
		if (n_recent < RECENT_VIDEO)
			n_recent++;
		last_video_us = e->t_us;
		if (last_ear_us != INT64_MIN && e->t_us >= last_ear_us &&
		    e->t_us - last_ear_us <= SKEW_AUDIO_US) {
			double skew = (double)(e->t_us - e->capture_us) / 1000.0 - last_m2e_ms;

			*(double *)vec_push(&skews) = skew;
			in_window += skew <= 45 && skew >= -125;
		}
	}
	pps_jitter_get_stats(j, &st);
	qsort(slots_m2e.v, slots_m2e.n, sizeof(double), compare_double);
	{
		double *m = slots_m2e.v, *s = skews.v;
		double abs95;
		vec_t abs_skew = {.size = sizeof(double)};

		for (size_t k = 0; k < skews.n; k++)
			*(double *)vec_push(&abs_skew) = fabs(s[k]);
		qsort(skews.v, skews.n, sizeof(double), compare_double);
		qsort(abs_skew.v, abs_skew.n, sizeof(double), compare_double);
		s = skews.v;
		abs95 = rank(abs_skew.v, abs_skew.n, 95);
		printf(
		    "mouth-to-ear p50/p95/p99 %.0f/%.0f/%.0f ms, played %.1f%% of %zu slots, late "
		    "%" PRIu64
		    ", playout delay %.0f +- %.1f ms, A/V skew p5/p50/p95 %.0f/%.0f/%.0f "
		    "ms, |skew| p95 %.0f ms, within -125..+45 ms %.1f%%\n",
		    rank(m, slots_m2e.n, 50), rank(m, slots_m2e.n, 95), rank(m, slots_m2e.n, 99),
		    slots ? 100.0 * (double)played / (double)slots : 0.0, slots, st.late,
		    st.playout_delay_mean_ms, st.playout_delay_std_ms, rank(s, skews.n, 5),
		    rank(s, skews.n, 50), rank(s, skews.n, 95), abs95,
		    skews.n ? 100.0 * (double)in_window / (double)skews.n : 0.0);
		free(abs_skew.v);
	}
	if (trace)
		fclose(trace);
	free(events.v);
	free(slots_m2e.v);
	free(skews.v);
	pps_jitter_free(j);
	return 0;
}
