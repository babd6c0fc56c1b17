/* SPDX-License-Identifier: MIT */
/*
 * What the client measured: the JSON Lines log (one object per event, a
 * start record first; docs/JSON.md), the rolling figures of the status line,
 * the interval records, and the summary at exit.
 *
 * Memory is bounded: per-frame and per-window samples are kept up to
 * MAX_SAMPLES each (over a day of video at 30 frames/s); past that, samples
 * are still logged and counted but no longer enter the percentiles, and the
 * summary says so.
 */
#include "pps-client-internal.h"
#include "pps-prioritizer.h"
#include "pps-time.h"
#include "pps-version.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SAMPLES (4u << 20)
/* Video frames whose latency lip sync follows (about 2 s at 30 frames/s). */
#define RECENT_VIDEO 64
/* Audio counts as playing for A/V skew while its last slot is this recent. */
#define AUDIO_ACTIVE_US 200000

const int pps_stats_tolerances_ms[6] = {100, 160, 200, 300, 500, 1000};

typedef struct {
	uint32_t frame;
	int64_t capture_us;
	int64_t display_us; /* 0 = not shown */
} frame_sample_t;

/* A gap between shown frames longer than this is a freeze. */
#define FREEZE_MS 100
/* Missing frames logged one event each up to this many at once; past it one
 * "frames_missing" event carries the count (a gap of hours is one line). */
#define MAX_FRAME_EVENTS_PER_GAP 256

static int compare_float(const void *a, const void *b);
static double percentile(const float *sorted, size_t n, double p);

enum { STAGE_NETWORK, STAGE_DECODE, STAGE_PLAYOUT, N_STAGES };
static const char *const stage_names[N_STAGES] = {"capture_to_received", "received_to_decoded",
                                                  "decoded_to_displayed"};

struct pps_stats {
	FILE *log;
	pps_peer_log_t *peer_log; /* the log's events a server's records cause */
	uint64_t frames_late, frames_undecodable, frames_dropped, frames_lost, frames_overflow,
	    frames_other;
	uint64_t windows_join;
	int64_t last_shown_us; /* display time of the last frame shown; 0 = none yet */
	int64_t freeze_longest_us, frozen_total_us;
	uint64_t freezes;
	float *stage_ms[N_STAGES]; /* per shown frame, parallel to frames[] by index */
	size_t n_stage, cap_stage;
	double fps;
	int64_t first_event_us, last_event_us;
	frame_sample_t *frames;
	size_t n_frames, cap_frames;
	uint64_t frames_total, frames_shown, frames_unsampled;
	float *window_latency_ms; /* transmitted windows */
	size_t n_windows, cap_windows;
	uint64_t windows_total, windows_dropped, windows_late, windows_transmitted;
	uint64_t within[6];
	uint64_t bytes;
	int64_t first_byte_us, last_byte_us;
	/* rolling */
	float roll_latency_ms[256];
	size_t roll_n;
	uint64_t roll_shown, roll_bytes;
	int64_t roll_start_us;
	unsigned roll_max_t, roll_max_q;

	/* audio: per played slot, mouth-to-ear and the playout delay (ms) */
	float *ear_ms, *audio_delay_ms;
	size_t n_audio, cap_audio, cap_audio_delay;
	uint64_t audio_played, audio_recovered, audio_concealed, audio_late, audio_skipped,
	    audio_unsampled;
	int64_t last_audio_us;       /* output time of the last slot (0: none yet) */
	int64_t last_ear_latency_us; /* its mouth-to-ear */
	float *skew_ms;              /* at each video frame shown while audio plays */
	size_t n_skew, cap_skew;
	/* the last video latencies, for lip sync (a ring) */
	float recent_video_ms[RECENT_VIDEO];
	size_t recent_n, recent_next;
	int64_t recent_last_us;
	uint64_t roll_audio_slots, roll_audio_played;
	float roll_ear_ms[256];
	size_t roll_ear_n;

	/* the start record, and the last STREAM_INFO, for the summaries */
	char program[32], server[256], policy[32];
	int64_t start_us;
	int64_t first_shown_us; /* the first picture's display time; 0 = none yet */
	bool have_stream;
	pps_wire_stream_info_t stream;
	/* the interval records: counters at the last one */
	int64_t iv_start_us;
	size_t iv_frame; /* frames[] index where the interval's samples start */
	uint64_t iv_total, iv_shown, iv_late, iv_lost, iv_dropped, iv_bytes, iv_windows_late,
	    iv_windows_dropped, iv_freezes, iv_audio_slots, iv_audio_played;
	int64_t iv_frozen_us;
};

pps_stats_t *
pps_stats_new(FILE *log, double fps)
{
	pps_stats_t *s = calloc(1, sizeof(*s));

	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->log = log;
	s->peer_log = pps_peer_log_new(log, PPS_PEER_LOG_JSON, PPS_PEER_LOG_JSON_BURST,
	                               PPS_PEER_LOG_JSON_INTERVAL_US);
	if (!s->peer_log) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->fps = fps > 0 ? fps : 30;
	s->roll_start_us = pps_time_realtime_us();
	return s;
}

void
pps_stats_free(pps_stats_t *s)
{
	if (!s)
		return;
	pps_peer_log_free(s->peer_log);
	free(s->frames);
	free(s->window_latency_ms);
	free(s->ear_ms);
	free(s->audio_delay_ms);
	free(s->skew_ms);
	for (int i = 0; i < N_STAGES; i++)
		free(s->stage_ms[i]);
	free(s);
}

static bool
grow(void **array, size_t *cap, size_t n, size_t elem)
{
	size_t new_cap;
	void *p;

	if (n < *cap)
		return true;
	if (*cap >= MAX_SAMPLES)
		return false;
	new_cap = *cap ? *cap * 2 : 1024;
	if (new_cap > MAX_SAMPLES)
		new_cap = MAX_SAMPLES;
	p = realloc(*array, new_cap * elem);
	if (!p)
		return false;
	*array = p;
	*cap = new_cap;
	return true;
}

void
pps_stats_frame(pps_stats_t *s, const pps_stats_frame_t *f)
{
	double latency_ms = f->shown ? (double)(f->display_us - f->capture_us) / 1000.0 : 0;
	/* Frames still waiting for their display time when the client stops
	 * are logged, but are neither shown nor lost. */
	bool in_flight = f->reason && strcmp(f->reason, "stopped") == 0;

	if (in_flight)
		goto log;
	s->frames_total++;
	if (!f->shown) {
		if (strcmp(f->reason, PPS_FRAME_LATE) == 0)
			s->frames_late++;
		else if (strcmp(f->reason, PPS_FRAME_UNDECODABLE) == 0)
			s->frames_undecodable++;
		else if (strcmp(f->reason, PPS_FRAME_DROPPED) == 0)
			s->frames_dropped++;
		else if (strcmp(f->reason, PPS_FRAME_LOST) == 0)
			s->frames_lost++;
		else if (strcmp(f->reason, PPS_FRAME_OVERFLOW) == 0)
			s->frames_overflow++;
		else
			s->frames_other++;
	}
	if (f->shown) {
		int64_t gap_us = s->last_shown_us ? f->display_us - s->last_shown_us : 0;

		if (gap_us > s->freeze_longest_us)
			s->freeze_longest_us = gap_us;
		if (gap_us > FREEZE_MS * 1000) {
			s->frozen_total_us += gap_us;
			s->freezes++;
		}
		s->last_shown_us = f->display_us;
		if (!s->first_shown_us)
			s->first_shown_us = f->display_us;
		if (f->received_us && f->decoded_us &&
		    grow((void **)&s->stage_ms[0], &s->cap_stage, s->n_stage, sizeof(float))) {
			/* All stage arrays grow together (same capacity). */
			bool ok = true;

			for (int i = 1; i < N_STAGES && ok; i++) {
				float *p = realloc(s->stage_ms[i], s->cap_stage * sizeof(float));

				if (p)
					s->stage_ms[i] = p;
				else
					ok = false;
			}
			if (ok) {
				s->stage_ms[STAGE_NETWORK][s->n_stage] =
				    (float)((double)(f->received_us - f->capture_us) / 1000.0);
				s->stage_ms[STAGE_DECODE][s->n_stage] =
				    (float)((double)(f->decoded_us - f->received_us) / 1000.0);
				s->stage_ms[STAGE_PLAYOUT][s->n_stage] =
				    (float)((double)(f->display_us - f->decoded_us) / 1000.0);
				s->n_stage++;
			}
		}
		s->frames_shown++;
		s->roll_shown++;
		s->recent_video_ms[s->recent_next] = (float)latency_ms;
		s->recent_next = (s->recent_next + 1) % RECENT_VIDEO;
		if (s->recent_n < RECENT_VIDEO)
			s->recent_n++;
		s->recent_last_us = f->display_us;
		/* A/V skew: this picture's latency against the audio heard now. */
		if (s->last_audio_us && f->display_us - s->last_audio_us < AUDIO_ACTIVE_US &&
		    grow((void **)&s->skew_ms, &s->cap_skew, s->n_skew, sizeof(float)))
			s->skew_ms[s->n_skew++] =
			    (float)(latency_ms - (double)s->last_ear_latency_us / 1000.0);
		if (s->roll_n < sizeof(s->roll_latency_ms) / sizeof(s->roll_latency_ms[0]))
			s->roll_latency_ms[s->roll_n++] = (float)latency_ms;
		if (f->temporal_layers > s->roll_max_t)
			s->roll_max_t = f->temporal_layers;
		if (f->quality_layers > s->roll_max_q)
			s->roll_max_q = f->quality_layers;
	}
	if (grow((void **)&s->frames, &s->cap_frames, s->n_frames, sizeof(*s->frames)))
		s->frames[s->n_frames++] =
		    (frame_sample_t){.frame = f->frame,
		                     .capture_us = f->capture_us,
		                     .display_us = f->shown ? f->display_us : 0};
	else
		s->frames_unsampled++;
log:
	if (!s->log)
		return;
	fprintf(s->log,
	        "{\"type\":\"frame\",\"window\":%" PRIu32 ",\"frame\":%" PRIu32
	        ",\"capture_us\":%" PRId64,
	        f->window, f->frame, f->capture_us);
	if (f->shown)
		fprintf(s->log, ",\"display_us\":%" PRId64 ",\"latency_ms\":%.3f", f->display_us,
		        latency_ms);
	else
		fprintf(s->log, ",\"display_us\":null,\"latency_ms\":null");
	fprintf(s->log, ",\"temporal_layers\":%u,\"quality_layers\":%u,\"shown\":%s",
	        f->temporal_layers, f->quality_layers, f->shown ? "true" : "false");
	if (f->reason)
		fprintf(s->log, ",\"reason\":\"%s\"", f->reason);
	/* Per-stage times (client clock); the server's encode and send times are
	 * not on the wire. */
	if (f->received_us)
		fprintf(s->log, ",\"received_us\":%" PRId64, f->received_us);
	if (f->decoded_us)
		fprintf(s->log, ",\"decoded_us\":%" PRId64, f->decoded_us);
	fprintf(s->log, "}\n");
}

void
pps_stats_audio(pps_stats_t *s, const pps_stats_audio_t *a)
{
	double ear_ms = (double)(a->ear_us - a->capture_us) / 1000.0;

	if (strcmp(a->how, PPS_AUDIO_PLAYED) == 0)
		s->audio_played++;
	else if (strcmp(a->how, PPS_AUDIO_RECOVERED) == 0)
		s->audio_recovered++;
	else
		s->audio_concealed++;
	s->roll_audio_slots++;
	if (strcmp(a->how, PPS_AUDIO_PLAYED) == 0)
		s->roll_audio_played++;
	s->last_audio_us = a->ear_us;
	s->last_ear_latency_us = a->ear_us - a->capture_us;
	if (s->roll_ear_n < sizeof(s->roll_ear_ms) / sizeof(s->roll_ear_ms[0]))
		s->roll_ear_ms[s->roll_ear_n++] = (float)ear_ms;
	if (grow((void **)&s->ear_ms, &s->cap_audio, s->n_audio, sizeof(float)) &&
	    grow((void **)&s->audio_delay_ms, &s->cap_audio_delay, s->n_audio, sizeof(float))) {
		s->ear_ms[s->n_audio] = (float)ear_ms;
		s->audio_delay_ms[s->n_audio] = (float)((double)a->playout_delay_us / 1000.0);
		s->n_audio++;
	} else {
		s->audio_unsampled++;
	}
	if (!s->log)
		return;
	fprintf(s->log,
	        "{\"type\":\"audio\",\"seq\":%" PRIu32 ",\"capture_us\":%" PRId64
	        ",\"ear_us\":%" PRId64 ",\"mouth_to_ear_ms\":%.3f,\"playout_delay_ms\":%.3f,"
	        "\"how\":\"%s\"}\n",
	        a->seq, a->capture_us, a->ear_us, ear_ms, (double)a->playout_delay_us / 1000.0,
	        a->how);
}

void
pps_stats_audio_late(pps_stats_t *s, uint32_t seq)
{
	s->audio_late++;
	pps_peer_log_printf(s->peer_log, pps_time_realtime_us(),
	                    "{\"type\":\"audio_late\",\"seq\":%" PRIu32 "}\n", seq);
}

void
pps_stats_audio_skipped(pps_stats_t *s, uint32_t seq)
{
	s->audio_skipped++;
	pps_peer_log_printf(s->peer_log, pps_time_realtime_us(),
	                    "{\"type\":\"audio_skipped\",\"seq\":%" PRIu32 "}\n", seq);
}

int64_t
pps_stats_video_latency_recent_us(const pps_stats_t *s, int64_t now_us, double pct)
{
	float v[RECENT_VIDEO];

	/* A second without a picture: no video to wait for. */
	if (s->recent_n == 0 || now_us - s->recent_last_us > 1000000)
		return 0;
	memcpy(v, s->recent_video_ms, s->recent_n * sizeof(float));
	qsort(v, s->recent_n, sizeof(float), compare_float);
	return (int64_t)(percentile(v, s->recent_n, pct) * 1000.0);
}

void
pps_stats_missing(pps_stats_t *s, uint32_t window_frames, int64_t first_frame, uint64_t count,
                  int64_t first_capture_us, int64_t frame_interval_us, const char *reason)
{
	if (count <= MAX_FRAME_EVENTS_PER_GAP) {
		for (uint64_t i = 0; i < count; i++) {
			int64_t frame = first_frame + (int64_t)i;
			pps_stats_frame_t f = {
			    .window = pps_window_index_of_frame((uint32_t)frame, window_frames),
			    .frame = (uint32_t)frame,
			    .capture_us = first_capture_us
			                      ? first_capture_us + (int64_t)i * frame_interval_us
			                      : 0,
			    .reason = reason,
			};

			pps_stats_frame(s, &f);
		}
		return;
	}
	/* Counted exactly, logged once: no per-frame samples for a gap this long. */
	s->frames_total += count;
	if (strcmp(reason, PPS_FRAME_DROPPED) == 0)
		s->frames_dropped += count;
	else if (strcmp(reason, PPS_FRAME_LOST) == 0)
		s->frames_lost += count;
	else
		s->frames_other += count;
	s->frames_unsampled += count;
	if (s->log)
		fprintf(s->log,
		        "{\"type\":\"frames_missing\",\"first_frame\":%" PRId64
		        ",\"frames\":%" PRIu64 ",\"first_capture_us\":%" PRId64
		        ",\"reason\":\"%s\"}\n",
		        first_frame, count, first_capture_us, reason);
}

void
pps_stats_window_from_receiver(const pps_receiver_window_t *w, pps_stats_window_t *out)
{
	*out = (pps_stats_window_t){
	    .window = w->window_id,
	    .windows = w->windows,
	    .first_capture_us = w->first_capture_us,
	    .complete_us = w->complete_us,
	    .status = w->status,
	    .adus_received = w->adus_received,
	    .adus_sent = w->adus_sent,
	    .adus_total = w->adus_total,
	    .bytes = w->bytes,
	};
}

void
pps_stats_window(pps_stats_t *s, const pps_stats_window_t *w)
{
	bool dropped = strcmp(w->status, PPS_WINDOW_DROPPED) == 0;
	bool join = strcmp(w->status, PPS_WINDOW_JOIN) == 0;
	double latency_ms =
	    w->complete_us ? (double)(w->complete_us - w->first_capture_us) / 1000.0 : 0;
	uint64_t windows = w->windows ? w->windows : 1;

	if (join) {
		/* In flight when this client joined: not the sender's drop. */
		s->windows_join++;
	} else if (dropped) {
		s->windows_total += windows;
		s->windows_dropped += windows;
	} else {
		s->windows_total++;
		s->windows_transmitted++;
		if (strcmp(w->status, "late") == 0)
			s->windows_late++;
		for (int i = 0; i < 6; i++)
			s->within[i] += latency_ms <= pps_stats_tolerances_ms[i];
		if (grow((void **)&s->window_latency_ms, &s->cap_windows, s->n_windows,
		         sizeof(float)))
			s->window_latency_ms[s->n_windows++] = (float)latency_ms;
	}
	if (!s->log)
		return;
	if (windows > 1) {
		/* Windows the sender discarded with their WINDOW_END: one event. */
		fprintf(s->log,
		        "{\"type\":\"window_gap\",\"window\":%" PRIu32 ",\"windows\":%" PRIu64
		        ",\"first_capture_us\":%" PRId64 ",\"status\":\"%s\"}\n",
		        w->window, windows, w->first_capture_us, w->status);
		return;
	}
	fprintf(s->log,
	        "{\"type\":\"window\",\"window\":%" PRIu32 ",\"first_capture_us\":%" PRId64
	        ",\"complete_us\":%" PRId64 ",",
	        w->window, w->first_capture_us, w->complete_us);
	if (dropped || join)
		fprintf(s->log, "\"latency_ms\":null,");
	else
		fprintf(s->log, "\"latency_ms\":%.3f,", latency_ms);
	fprintf(s->log,
	        "\"status\":\"%s\",\"adus_received\":%u,\"adus_sent\":%u,\"adus_total\":%u"
	        ",\"bytes\":%" PRIu64 "}\n",
	        w->status, w->adus_received, w->adus_sent, w->adus_total, w->bytes);
}

void
pps_stats_bytes(pps_stats_t *s, size_t bytes, int64_t now_us)
{
	if (!s->first_byte_us)
		s->first_byte_us = now_us;
	s->last_byte_us = now_us;
	s->bytes += bytes;
	s->roll_bytes += bytes;
}

void
pps_stats_event(pps_stats_t *s, const char *json_fields)
{
	pps_peer_log_printf(s->peer_log, pps_time_realtime_us(), "{%s}\n", json_fields);
}

/* @c as it stands inside a JSON string: quote, backslash and control
 * characters escaped. Returns its length in @out (at most 6). */
static int
json_char(unsigned char c, char out[8])
{
	if (c == '"' || c == '\\')
		return snprintf(out, 8, "\\%c", c);
	if (c < 0x20)
		return snprintf(out, 8, "\\u%04x", c);
	out[0] = (char)c;
	out[1] = '\0';
	return 1;
}

/* A JSON string of text we hold (names, addresses). */
static void
json_string(FILE *f, const char *text)
{
	char e[8];

	fputc('"', f);
	for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
		json_char(*c, e);
		fputs(e, f);
	}
	fputc('"', f);
}

void
pps_stats_json_text(char *dst, size_t size, const char *text)
{
	size_t n = 0;
	char e[8];

	if (size == 0)
		return;
	for (const unsigned char *c = (const unsigned char *)(text ? text : ""); *c; c++) {
		size_t len = (size_t)json_char(*c, e);

		if (n + len >= size)
			break;
		memcpy(dst + n, e, len);
		n += len;
	}
	dst[n] = '\0';
}

/* "2024-05-01T12:00:00.123456Z" */
static void
iso_time(int64_t us, char *buf, size_t size)
{
	time_t secs = (time_t)(us / 1000000);
	struct tm tm;
	size_t n;

	gmtime_r(&secs, &tm);
	n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, size - n, ".%06dZ", (int)(us % 1000000));
}

/* The start fields, without braces: the start record's and the summaries'. */
static void
write_start_fields(FILE *f, const pps_stats_t *s)
{
	char when[40];

	iso_time(s->start_us, when, sizeof(when));
	fprintf(f, "\"program\":");
	json_string(f, s->program);
	fprintf(f, ",\"version\":\"%s\",\"time_us\":%" PRId64 ",\"time\":\"%s\",\"server\":",
	        PPS_VERSION, s->start_us, when);
	json_string(f, s->server);
	fprintf(f, ",\"policy\":");
	json_string(f, s->policy);
}

static void
write_stream_fields(FILE *f, const pps_wire_stream_info_t *info)
{
	fprintf(f,
	        "\"width\":%u,\"height\":%u,\"fps\":%.3f,\"temporal_layers\":%u,"
	        "\"quality_layers\":%u,\"window_frames\":%u,\"latency_budget_ms\":%u,"
	        "\"audio\":%s",
	        info->width, info->height,
	        info->fps_den ? (double)info->fps_num / info->fps_den : 0.0, info->temporal_layers,
	        info->quality_layers, info->window_frames, info->latency_budget_ms,
	        info->audio_codec ? "true" : "false");
}

void
pps_stats_start(pps_stats_t *s, const pps_stats_start_t *start)
{
	snprintf(s->program, sizeof(s->program), "%s", start->program ? start->program : "");
	snprintf(s->server, sizeof(s->server), "%s", start->server ? start->server : "");
	snprintf(s->policy, sizeof(s->policy), "%s", start->policy ? start->policy : "");
	s->start_us = s->iv_start_us = pps_time_realtime_us();
	if (!s->log)
		return;
	fprintf(s->log, "{\"type\":\"start\",");
	write_start_fields(s->log, s);
	fprintf(s->log, "}\n");
}

void
pps_stats_stream(pps_stats_t *s, const pps_wire_stream_info_t *info)
{
	s->stream = *info;
	s->have_stream = true;
	if (!s->log)
		return;
	fprintf(s->log,
	        "{\"type\":\"stream\",\"t_us\":%" PRId64 ",\"server\":", pps_time_realtime_us());
	json_string(s->log, s->server);
	fputc(',', s->log);
	write_stream_fields(s->log, info);
	fprintf(s->log, "}\n");
}

static void json_number(FILE *f, const char *name, double v);

/* The latencies (ms) of the frames shown from the @from'th on, sorted, into
 * *@n; NULL (and *@n 0) when there are none or no memory. The caller frees. */
static float *
shown_latencies(const pps_stats_t *s, size_t from, size_t *n)
{
	float *lat = s->n_frames > from ? malloc((s->n_frames - from) * sizeof(*lat)) : NULL;

	*n = 0;
	for (size_t i = from; lat && i < s->n_frames; i++)
		if (s->frames[i].display_us)
			lat[(*n)++] =
			    (float)((double)(s->frames[i].display_us - s->frames[i].capture_us) /
			            1000.0);
	if (lat)
		qsort(lat, *n, sizeof(*lat), compare_float);
	return lat;
}

void
pps_stats_write_interval(pps_stats_t *s, int64_t now_us, const pps_stats_interval_extra_t *extra)
{
	double dt = (double)(now_us - s->iv_start_us) / 1e6;
	uint64_t slots = s->audio_played + s->audio_recovered + s->audio_concealed;
	size_t n = 0;
	float *lat = shown_latencies(s, s->iv_frame < s->n_frames ? s->iv_frame : s->n_frames, &n);
	if (dt <= 0)
		dt = 1e-6;
	if (s->log) {
		fprintf(s->log,
		        "{\"type\":\"interval\",\"t_us\":%" PRId64 ",\"interval_s\":%.3f"
		        ",\"elapsed_s\":%.3f,\"frames_total\":%" PRIu64 ",\"frames_shown\":%" PRIu64
		        ",\"frames_late\":%" PRIu64 ",\"frames_lost\":%" PRIu64
		        ",\"frames_dropped\":%" PRIu64,
		        now_us, dt, (double)(now_us - s->start_us) / 1e6,
		        s->frames_total - s->iv_total, s->frames_shown - s->iv_shown,
		        s->frames_late - s->iv_late, s->frames_lost - s->iv_lost,
		        s->frames_dropped - s->iv_dropped);
		json_number(s->log, "fps_shown", (double)(s->frames_shown - s->iv_shown) / dt);
		json_number(s->log, "latency_p50_ms", percentile(lat, n, 50));
		json_number(s->log, "latency_p95_ms", percentile(lat, n, 95));
		json_number(s->log, "received_bps", 8.0 * (double)(s->bytes - s->iv_bytes) / dt);
		fprintf(s->log,
		        ",\"windows_late\":%" PRIu64 ",\"windows_dropped\":%" PRIu64
		        ",\"freezes\":%" PRIu64,
		        s->windows_late - s->iv_windows_late,
		        s->windows_dropped - s->iv_windows_dropped, s->freezes - s->iv_freezes);
		json_number(s->log, "frozen_ms",
		            (double)(s->frozen_total_us - s->iv_frozen_us) / 1000.0);
		fprintf(s->log, ",\"audio_slots\":%" PRIu64 ",\"audio_played\":%" PRIu64,
		        slots - s->iv_audio_slots, s->audio_played - s->iv_audio_played);
		json_number(s->log, "clock_offset_ms", extra ? extra->clock_offset_ms : NAN);
		json_number(s->log, "clock_uncertainty_ms",
		            extra ? extra->clock_uncertainty_ms : NAN);
		json_number(s->log, "playout_delay_ms", extra ? extra->playout_delay_ms : NAN);
		fprintf(s->log, "}\n");
	}
	free(lat);
	s->iv_start_us = now_us;
	s->iv_frame = s->n_frames;
	s->iv_total = s->frames_total;
	s->iv_shown = s->frames_shown;
	s->iv_late = s->frames_late;
	s->iv_lost = s->frames_lost;
	s->iv_dropped = s->frames_dropped;
	s->iv_bytes = s->bytes;
	s->iv_windows_late = s->windows_late;
	s->iv_windows_dropped = s->windows_dropped;
	s->iv_freezes = s->freezes;
	s->iv_frozen_us = s->frozen_total_us;
	s->iv_audio_slots = slots;
	s->iv_audio_played = s->audio_played;
}

static int
compare_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double
percentile(const float *sorted, size_t n, double p)
{
	size_t rank;

	if (n == 0)
		return NAN;
	rank = (size_t)ceil(p / 100.0 * (double)n);
	if (rank < 1)
		rank = 1;
	return sorted[rank - 1];
}

static int
compare_frame(const void *a, const void *b)
{
	const frame_sample_t *x = a, *y = b;

	return (x->frame > y->frame) - (x->frame < y->frame);
}

/*
 * Signal delay (Salsify): for every captured frame, the time from its capture
 * until it or a newer frame is on screen. Frames never shown count against
 * us until something newer is shown.
 */
static double
signal_delay_p95(pps_stats_t *s)
{
	frame_sample_t *f = s->frames;
	size_t n = s->n_frames, m = 0;
	float *delays;
	int64_t next_shown = INT64_MAX;
	double p95;

	if (n == 0)
		return NAN;
	qsort(f, n, sizeof(*f), compare_frame);
	delays = malloc(n * sizeof(*delays));
	if (!delays)
		return NAN;
	/* Walk from the newest frame back, keeping the earliest display time of
	 * any frame at or after this one. */
	for (size_t i = n; i-- > 0;) {
		if (f[i].display_us && f[i].display_us < next_shown)
			next_shown = f[i].display_us;
		if (next_shown != INT64_MAX)
			delays[m++] = (float)((double)(next_shown - f[i].capture_us) / 1000.0);
	}
	qsort(delays, m, sizeof(*delays), compare_float);
	p95 = percentile(delays, m, 95);
	free(delays);
	return p95;
}

/* A sorted copy of @n samples (NULL when there are none or no memory). */
static float *
sorted_copy(const float *v, size_t n)
{
	float *c = n ? malloc(n * sizeof(*c)) : NULL;

	if (!c)
		return NULL;
	memcpy(c, v, n * sizeof(*c));
	qsort(c, n, sizeof(*c), compare_float);
	return c;
}

static void
summarize_audio(pps_stats_t *s, pps_stats_summary_t *o)
{
	uint64_t slots = s->audio_played + s->audio_recovered + s->audio_concealed;
	float *ear = sorted_copy(s->ear_ms, s->n_audio);
	double sum = 0, sum2 = 0;

	o->has_audio = slots > 0;
	o->audio_slots = slots;
	o->audio_played = s->audio_played;
	o->audio_recovered = s->audio_recovered;
	o->audio_concealed = s->audio_concealed;
	o->audio_late = s->audio_late;
	o->audio_skipped = s->audio_skipped;
	o->audio_played_pct = slots ? 100.0 * (double)s->audio_played / (double)slots : NAN;
	o->audio_concealed_pct =
	    slots ? 100.0 * (double)(s->audio_concealed + s->audio_recovered) / (double)slots : NAN;
	o->audio_late_pct = slots ? 100.0 * (double)s->audio_late / (double)slots : NAN;
	o->mouth_to_ear_p50_ms = ear ? percentile(ear, s->n_audio, 50) : NAN;
	o->mouth_to_ear_p95_ms = ear ? percentile(ear, s->n_audio, 95) : NAN;
	o->mouth_to_ear_p99_ms = ear ? percentile(ear, s->n_audio, 99) : NAN;
	free(ear);
	for (size_t i = 0; i < s->n_audio; i++) {
		sum += s->audio_delay_ms[i];
		sum2 += (double)s->audio_delay_ms[i] * s->audio_delay_ms[i];
	}
	o->audio_delay_mean_ms = s->n_audio ? sum / (double)s->n_audio : NAN;
	o->audio_delay_std_ms =
	    s->n_audio ? sqrt(fmax(0.0, sum2 / (double)s->n_audio -
	                                    o->audio_delay_mean_ms * o->audio_delay_mean_ms))
	               : NAN;
	o->av_skew_p50_ms = o->av_skew_abs_p95_ms = NAN;
	if (s->n_skew) {
		float *skew = sorted_copy(s->skew_ms, s->n_skew);
		float *abs_skew = malloc(s->n_skew * sizeof(float));

		if (skew)
			o->av_skew_p50_ms = percentile(skew, s->n_skew, 50);
		if (abs_skew) {
			for (size_t i = 0; i < s->n_skew; i++)
				abs_skew[i] = fabsf(s->skew_ms[i]);
			qsort(abs_skew, s->n_skew, sizeof(float), compare_float);
			o->av_skew_abs_p95_ms = percentile(abs_skew, s->n_skew, 95);
		}
		free(skew);
		free(abs_skew);
	}
}

void
pps_stats_summarize(pps_stats_t *s, pps_stats_summary_t *o)
{
	float *lat = NULL;
	size_t n = 0;

	memset(o, 0, sizeof(*o));
	o->windows_total = s->windows_total;
	o->windows_transmitted = s->windows_transmitted;
	o->windows_dropped = s->windows_dropped;
	o->windows_late = s->windows_late;
	for (int i = 0; i < 6; i++)
		o->within_pct[i] = s->windows_transmitted ? 100.0 * (double)s->within[i] /
		                                                (double)s->windows_transmitted
		                                          : 0;
	o->dropped_windows_pct =
	    s->windows_total ? 100.0 * (double)s->windows_dropped / (double)s->windows_total : 0;
	o->frames_total = s->frames_total;
	o->frames_shown = s->frames_shown;
	o->frames_shown_pct =
	    s->frames_total ? 100.0 * (double)s->frames_shown / (double)s->frames_total : 0;
	lat = shown_latencies(s, 0, &n);
	o->frame_latency_p50_ms = percentile(lat, n, 50);
	o->frame_latency_p95_ms = percentile(lat, n, 95);
	o->frame_latency_p99_ms = percentile(lat, n, 99);
	free(lat);
	if (s->n_windows) {
		float *w = malloc(s->n_windows * sizeof(*w));

		if (w) {
			memcpy(w, s->window_latency_ms, s->n_windows * sizeof(*w));
			qsort(w, s->n_windows, sizeof(*w), compare_float);
			o->window_latency_p50_ms = percentile(w, s->n_windows, 50);
			o->window_latency_p95_ms = percentile(w, s->n_windows, 95);
			free(w);
		}
	} else {
		o->window_latency_p50_ms = o->window_latency_p95_ms = NAN;
	}
	o->signal_delay_p95_ms = signal_delay_p95(s);
	o->frames_late = s->frames_late;
	o->frames_undecodable = s->frames_undecodable;
	o->frames_dropped = s->frames_dropped;
	o->frames_lost = s->frames_lost;
	o->frames_overflow = s->frames_overflow;
	o->frames_other = s->frames_other;
	o->windows_join = s->windows_join;
	o->freeze_longest_ms = (double)s->freeze_longest_us / 1000.0;
	o->frozen_total_ms = (double)s->frozen_total_us / 1000.0;
	o->first_picture_ms = s->first_shown_us && s->start_us
	                          ? (double)(s->first_shown_us - s->start_us) / 1000.0
	                          : -1.0;
	o->freezes = s->freezes;
	for (int i = 0; i < N_STAGES; i++) {
		float *v = s->n_stage ? malloc(s->n_stage * sizeof(*v)) : NULL;

		o->stage_p50_ms[i] = o->stage_p95_ms[i] = NAN;
		if (!v)
			continue;
		memcpy(v, s->stage_ms[i], s->n_stage * sizeof(*v));
		qsort(v, s->n_stage, sizeof(*v), compare_float);
		o->stage_p50_ms[i] = percentile(v, s->n_stage, 50);
		o->stage_p95_ms[i] = percentile(v, s->n_stage, 95);
		free(v);
	}
	summarize_audio(s, o);
	o->seconds = s->last_byte_us > s->first_byte_us
	                 ? (double)(s->last_byte_us - s->first_byte_us) / 1e6
	                 : 0;
	o->bits_per_second = o->seconds > 0 ? 8.0 * (double)s->bytes / o->seconds : 0;
}

static void
json_number(FILE *f, const char *name, double v)
{
	if (isnan(v))
		fprintf(f, ",\"%s\":null", name);
	else
		fprintf(f, ",\"%s\":%.3f", name, v);
}

static void
write_summary_json(FILE *out, const pps_stats_t *s, const pps_stats_summary_t *o,
                   uint64_t unsampled)
{
	fprintf(out, "{\"type\":\"summary\",\"start\":{");
	write_start_fields(out, s);
	fprintf(out, ",\"stream\":");
	if (s->have_stream) {
		fputc('{', out);
		write_stream_fields(out, &s->stream);
		fputc('}', out);
	} else {
		fprintf(out, "null");
	}
	fprintf(out,
	        "},\"windows_total\":%" PRIu64 ",\"windows_transmitted\":%" PRIu64
	        ",\"windows_dropped\":%" PRIu64 ",\"windows_late\":%" PRIu64,
	        o->windows_total, o->windows_transmitted, o->windows_dropped, o->windows_late);
	for (int i = 0; i < 6; i++) {
		char name[32];

		snprintf(name, sizeof(name), "within_%dms_pct", pps_stats_tolerances_ms[i]);
		json_number(out, name, o->within_pct[i]);
	}
	json_number(out, "dropped_windows_pct", o->dropped_windows_pct);
	fprintf(out, ",\"frames_total\":%" PRIu64 ",\"frames_shown\":%" PRIu64, o->frames_total,
	        o->frames_shown);
	json_number(out, "frames_shown_pct", o->frames_shown_pct);
	json_number(out, "frame_latency_p50_ms", o->frame_latency_p50_ms);
	json_number(out, "frame_latency_p95_ms", o->frame_latency_p95_ms);
	json_number(out, "frame_latency_p99_ms", o->frame_latency_p99_ms);
	json_number(out, "window_latency_p50_ms", o->window_latency_p50_ms);
	json_number(out, "window_latency_p95_ms", o->window_latency_p95_ms);
	json_number(out, "signal_delay_p95_ms", o->signal_delay_p95_ms);
	json_number(out, "received_bps", o->bits_per_second);
	json_number(out, "duration_s", o->seconds);
	fprintf(out, ",\"samples_capped\":%" PRIu64, unsampled);
	fprintf(out,
	        ",\"frames_late\":%" PRIu64 ",\"frames_undecodable\":%" PRIu64
	        ",\"frames_dropped\":%" PRIu64 ",\"frames_lost\":%" PRIu64
	        ",\"frames_overflow\":%" PRIu64 ",\"frames_other\":%" PRIu64
	        ",\"windows_join\":%" PRIu64 ",\"freezes\":%" PRIu64,
	        o->frames_late, o->frames_undecodable, o->frames_dropped, o->frames_lost,
	        o->frames_overflow, o->frames_other, o->windows_join, o->freezes);
	json_number(out, "freeze_longest_ms", o->freeze_longest_ms);
	json_number(out, "frozen_total_ms", o->frozen_total_ms);
	if (o->first_picture_ms >= 0)
		json_number(out, "first_picture_ms", o->first_picture_ms);
	else
		fprintf(out, ",\"first_picture_ms\":null");
	for (int i = 0; i < N_STAGES; i++) {
		char name[64];

		snprintf(name, sizeof(name), "%s_p50_ms", stage_names[i]);
		json_number(out, name, o->stage_p50_ms[i]);
		snprintf(name, sizeof(name), "%s_p95_ms", stage_names[i]);
		json_number(out, name, o->stage_p95_ms[i]);
	}
	if (o->has_audio) {
		fprintf(out,
		        ",\"audio_slots\":%" PRIu64 ",\"audio_played\":%" PRIu64
		        ",\"audio_recovered\":%" PRIu64 ",\"audio_concealed\":%" PRIu64
		        ",\"audio_late\":%" PRIu64 ",\"audio_skipped\":%" PRIu64,
		        o->audio_slots, o->audio_played, o->audio_recovered, o->audio_concealed,
		        o->audio_late, o->audio_skipped);
		json_number(out, "audio_played_pct", o->audio_played_pct);
		json_number(out, "audio_concealed_pct", o->audio_concealed_pct);
		json_number(out, "audio_late_pct", o->audio_late_pct);
		json_number(out, "mouth_to_ear_p50_ms", o->mouth_to_ear_p50_ms);
		json_number(out, "mouth_to_ear_p95_ms", o->mouth_to_ear_p95_ms);
		json_number(out, "mouth_to_ear_p99_ms", o->mouth_to_ear_p99_ms);
		json_number(out, "audio_delay_mean_ms", o->audio_delay_mean_ms);
		json_number(out, "audio_delay_std_ms", o->audio_delay_std_ms);
		json_number(out, "av_skew_p50_ms", o->av_skew_p50_ms);
		json_number(out, "av_skew_abs_p95_ms", o->av_skew_abs_p95_ms);
	}
	fprintf(out, "}\n");
}

void
pps_stats_write_summary(pps_stats_t *s, const pps_stats_summary_t *o, FILE *table)
{
	if (s->log) {
		pps_peer_log_flush(s->peer_log);
		write_summary_json(s->log, s, o, s->frames_unsampled);
		fflush(s->log);
	}
	if (!table)
		return;
	fprintf(table,
	        "\n"
	        "  pps-client summary (%.1f s)\n"
	        "  -----------------------------------------------\n"
	        "  windows                  %8" PRIu64 " (%" PRIu64 " transmitted, %" PRIu64
	        " dropped by the sender = %.1f%%)\n",
	        o->seconds, o->windows_total, o->windows_transmitted, o->windows_dropped,
	        o->dropped_windows_pct);
	for (int i = 0; i < 6; i++)
		fprintf(table, "  windows within %4d ms   %7.1f%%\n", pps_stats_tolerances_ms[i],
		        o->within_pct[i]);
	fprintf(table,
	        "  window latency p50/p95   %7.1f / %.1f ms\n"
	        "  frames shown             %8" PRIu64 " of %" PRIu64 " (%.1f%%)\n"
	        "  frame latency p50        %7.1f ms\n"
	        "  frame latency p95        %7.1f ms\n"
	        "  frame latency p99        %7.1f ms\n"
	        "  signal delay p95         %7.1f ms\n"
	        "  received                 %7.2f Mbit/s\n"
	        "  not shown                %8" PRIu64 " late, %" PRIu64 " undecodable, %" PRIu64
	        " dropped by the sender, %" PRIu64 " lost in a window, %" PRIu64 " other\n"
	        "  freezes (gaps > %d ms)   %8" PRIu64
	        ", longest gap %.0f ms, frozen %.1f s in all\n"
	        "  stages p50 (client)      capture->received %.1f, ->decoded %.1f, ->displayed "
	        "%.1f ms\n",
	        o->window_latency_p50_ms, o->window_latency_p95_ms, o->frames_shown,
	        o->frames_total, o->frames_shown_pct, o->frame_latency_p50_ms,
	        o->frame_latency_p95_ms, o->frame_latency_p99_ms, o->signal_delay_p95_ms,
	        o->bits_per_second / 1e6, o->frames_late, o->frames_undecodable, o->frames_dropped,
	        o->frames_lost, o->frames_overflow + o->frames_other, FREEZE_MS, o->freezes,
	        o->freeze_longest_ms, o->frozen_total_ms / 1000.0, o->stage_p50_ms[STAGE_NETWORK],
	        o->stage_p50_ms[STAGE_DECODE], o->stage_p50_ms[STAGE_PLAYOUT]);
	if (o->first_picture_ms >= 0)
		fprintf(table, "  first picture            %7.0f ms after the start\n",
		        o->first_picture_ms);
	if (o->has_audio)
		fprintf(table,
		        "  audio slots              %8" PRIu64
		        " (%.1f%% played, %.1f%% concealed or "
		        "recovered; %" PRIu64 " late, %" PRIu64 " skipped)\n"
		        "  mouth-to-ear p50/p95/p99 %7.1f / %.1f / %.1f ms\n"
		        "  audio playout delay      %7.1f ms mean, %.1f ms deviation\n"
		        "  A/V skew (video - audio) %7.1f ms p50, |skew| p95 %.1f ms\n",
		        o->audio_slots, o->audio_played_pct, o->audio_concealed_pct, o->audio_late,
		        o->audio_skipped, o->mouth_to_ear_p50_ms, o->mouth_to_ear_p95_ms,
		        o->mouth_to_ear_p99_ms, o->audio_delay_mean_ms, o->audio_delay_std_ms,
		        o->av_skew_p50_ms, o->av_skew_abs_p95_ms);
}

int
pps_stats_write_json(const pps_stats_t *s, const pps_stats_summary_t *o, FILE *out)
{
	write_summary_json(out, s, o, s->frames_unsampled);
	if (fflush(out) != 0 || ferror(out))
		return -(errno ? errno : EIO);
	return 0;
}

void
pps_stats_rolling(pps_stats_t *s, int64_t now_us, pps_stats_rolling_t *out)
{
	double dt = (double)(now_us - s->roll_start_us) / 1e6;

	memset(out, 0, sizeof(*out));
	if (dt <= 0)
		dt = 1;
	qsort(s->roll_latency_ms, s->roll_n, sizeof(float), compare_float);
	out->latency_p50_ms = percentile(s->roll_latency_ms, s->roll_n, 50);
	out->latency_p95_ms = percentile(s->roll_latency_ms, s->roll_n, 95);
	out->fps_shown = (double)s->roll_shown / dt;
	out->bits_per_second = 8.0 * (double)s->roll_bytes / dt;
	out->max_temporal_layers = s->roll_max_t;
	out->max_quality_layers = s->roll_max_q;
	out->windows_late = s->windows_late;
	out->windows_dropped = s->windows_dropped;
	out->freeze_longest_ms = (double)s->freeze_longest_us / 1000.0;
	out->frozen_total_ms = (double)s->frozen_total_us / 1000.0;
	out->audio_slots = s->roll_audio_slots;
	out->audio_played = s->roll_audio_played;
	qsort(s->roll_ear_ms, s->roll_ear_n, sizeof(float), compare_float);
	out->mouth_to_ear_p95_ms = percentile(s->roll_ear_ms, s->roll_ear_n, 95);
	s->roll_audio_slots = s->roll_audio_played = 0;
	s->roll_ear_n = 0;
	s->roll_n = 0;
	s->roll_shown = 0;
	s->roll_bytes = 0;
	s->roll_max_t = s->roll_max_q = 0;
	s->roll_start_us = now_us;
}

void
pps_stats_layers_text(const pps_stats_rolling_t *r, char *buf, size_t size)
{
	snprintf(buf, size, "layers t%u q%u", r->max_temporal_layers, r->max_quality_layers);
}

/* A frame's own temporal layer changes from one frame to the next (an I/P
 * frame is t1, a b frame t3): the overlay says what the status line says,
 * the layers shown in the last second, beside the picture's own latency. */
void
pps_stats_overlay_text(const pps_stats_rolling_t *r, double latency_ms, char *buf, size_t size)
{
	char layers[40];

	pps_stats_layers_text(r, layers, sizeof(layers));
	snprintf(buf, size, "%4.0f ms  %s  %4.1f fps  %.2f Mbit/s", latency_ms, layers,
	         r->fps_shown, r->bits_per_second / 1e6);
}
