/* SPDX-License-Identifier: MIT */
/*
 * The closed loop, every [adapt] interval_ms: the clients' path estimates and
 * what each layer produced since the last step go to the rate allocator
 * (adapt/), and what it decides to the encoder (applied at its next mini-GOP).
 * The same step looks at what the clients' regulators dropped and decides
 * whether the windows carry B frames (pps_b_frames_t).
 */
#include "pps-server-lib.h"
#include "pps-time.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pps_adapt_loop {
	pps_media_t *media;
	pps_listener_t *listener;
	pps_ratealloc_t *ratealloc; /* NULL: the rates are not steered */
	pps_b_frames_t *b_frames;
	bool dropped;    /* filled by drops_cb during one step */
	bool competing;  /* filled by drops_cb during one step */
	bool starting;   /* filled by drops_cb: a client's start is not read yet */
	char clean[160]; /* filled by drops_cb: whose start read clean, for the log */
	char why[160];   /* the first client that did either, for the log */
	pps_log_t log;

	struct event *timer;
	int64_t last_us;
	uint64_t last_bytes[PPS_ADU_MAX_QUALITY_LAYERS];
	/* filled by collect_cb during one step */
	pps_ratealloc_client_t clients[PPS_ADAPT_MAX_CLIENTS];
	size_t n_clients;
	int64_t audio_max_bps; /* the configured audio rate: the loop only lowers it */
	/* The drain (pps_adapt_loop_window_ready): the most CRF it adds (0:
	 * off) and a window's duration. */
	int drain_crf;
	int64_t window_us;
};

/* A viewer whose writer took no packet for this long has stopped reading:
 * its queue says nothing about the encoder's rate. */
#define DRAIN_READER_US 1000000

static void
collect_cb(pps_session_t *session, void *user)
{
	pps_adapt_loop_t *a = user;
	pps_ratealloc_client_t span[2];
	uint32_t viewers;
	size_t n;

	if (pps_session_state(session) != PPS_SESSION_STREAMING)
		return;
	/* A relay counts as its slowest and its fastest subscriber. */
	n = pps_session_path_span(session, span, &viewers);
	for (size_t i = 0; i < n && a->n_clients < PPS_ADAPT_MAX_CLIENTS; i++)
		a->clients[a->n_clients++] = span[i];
}

/* Whether the session's regulator dropped to keep its deadlines for a reader
 * that still reads (a stopped one is not helped by B frames and must not
 * slow everyone else's windows), and whether its path is shared with other
 * flows (the latency cap stepped aside for them). */
/* The reason logged with a switch on: the first one of the step. */
static void
say_why(pps_adapt_loop_t *a, const char *before, const char *peer, const char *after)
{
	if (!a->dropped && !a->competing)
		snprintf(a->why, sizeof(a->why), "%s%s%s", before, peer, after);
}

/* Whether the session's regulator dropped to keep its deadlines for a reader
 * that still reads (a stopped one is not helped by B frames and must not
 * slow everyone else's windows), whether its path is shared with other
 * flows (the latency cap stepped aside for them), and whether its start was
 * read: still unread, clean, or lossy (counts as a drop). */
static void
drops_cb(pps_session_t *session, void *user)
{
	pps_adapt_loop_t *a = user;
	uint64_t cut = pps_session_take_cut_windows(session);
	bool competing = pps_session_take_competing(session);

	bool relay_start_read = false;
	uint8_t reported = pps_session_take_report_flags(session, &relay_start_read);

	/* What a relay reports of its subscribers counts as theirs; a start it
	 * has not read yet is a join (B frames on until it reads clean). */
	if (relay_start_read)
		snprintf(a->clean, sizeof(a->clean), "the start of new subscriber(s) of relay %s",
		         pps_session_peer(session));
	if (reported & PPS_WIRE_PATH_STARTING) {
		a->starting = true;
		if (pps_b_frames_join(a->b_frames))
			say_why(a, "new subscriber(s) of relay ", pps_session_peer(session),
			        ", until their paths read clean");
	}
	if (reported & (PPS_WIRE_PATH_CUT | PPS_WIRE_PATH_START_LOSSY)) {
		say_why(a, "subscribers of relay ", pps_session_peer(session),
		        " had windows cut short or a lossy start");
		a->dropped = true;
	}
	if (reported & PPS_WIRE_PATH_COMPETING) {
		say_why(a, "a path behind relay ", pps_session_peer(session),
		        " is shared with other flows");
		a->competing = true;
	}
	switch (pps_session_take_start(session)) {
	case PPS_SESSION_START_UNREAD:
		a->starting = true;
		break;
	case PPS_SESSION_START_CLEAN:
		snprintf(a->clean, sizeof(a->clean), "the start of client %s",
		         pps_session_peer(session));
		break;
	case PPS_SESSION_START_LOSSY:
		say_why(a, "the start of client ", pps_session_peer(session),
		        " had retransmissions or a shared path");
		a->dropped = true;
		break;
	case PPS_SESSION_START_OVER:
		break;
	}
	if (cut > 0) {
		if (!a->dropped && !a->competing)
			snprintf(a->why, sizeof(a->why), "%llu window(s) of client %s cut short",
			         (unsigned long long)cut, pps_session_peer(session));
		a->dropped = true;
	}
	if (competing) {
		say_why(a, "the path of client ", pps_session_peer(session),
		        " is shared with other flows");
		a->competing = true;
	}
}

static void
to_encoder_rates(const pps_layer_rates_t *r, int layers, pps_encoder_rates_t *er)
{
	memset(er, 0, sizeof(*er));
	for (int q = 0; q < layers && q < PPS_ADAPT_MAX_LAYERS && q < PPS_ADU_MAX_QUALITY_LAYERS;
	     q++) {
		er->kbps[q] = r->kbps[q];
		er->buffer_kbit[q] = r->buffer_kbit[q];
		er->crf[q] = r->crf[q];
	}
}

/* The audio's bit rate: at most AUDIO_SHARE_PCT of the slowest client's
 * path, between the Opus floor and the configured rate. Voice at 16 kbit/s
 * is still intelligible; what it gives back goes to the video's base. */
#define AUDIO_SHARE_PCT 4

static void
steer_audio(pps_adapt_loop_t *a)
{
	uint64_t slowest = UINT64_MAX;
	int64_t bps;

	if (!pps_media_has_audio(a->media) || a->n_clients == 0)
		return;
	for (size_t i = 0; i < a->n_clients; i++)
		if (a->clients[i].estimate_bps < slowest)
			slowest = a->clients[i].estimate_bps;
	bps = (int64_t)(slowest / 100 * AUDIO_SHARE_PCT);
	if (bps > a->audio_max_bps)
		bps = a->audio_max_bps;
	if (bps < PPS_AUDIO_MIN_BITRATE_BPS)
		bps = PPS_AUDIO_MIN_BITRATE_BPS;
	/* Steps of 2 kbit/s: no change per estimate wobble. */
	bps = bps / 2000 * 2000;
	if (bps < PPS_AUDIO_MIN_BITRATE_BPS)
		bps = PPS_AUDIO_MIN_BITRATE_BPS;
	if (bps != pps_media_audio_bitrate(a->media))
		(void)pps_media_set_audio_bitrate(a->media, (int)bps);
}

static void
step_cb(evutil_socket_t fd, short what, void *user)
{
	pps_adapt_loop_t *a = user;
	uint64_t encoded_bps[PPS_ADU_MAX_QUALITY_LAYERS] = {0};
	pps_media_stats_t ms;
	pps_layer_rates_t r;
	int64_t now = pps_time_realtime_us();
	double dt = (double)(now - a->last_us) / 1e6;

	if (a->b_frames) {
		bool was = pps_b_frames_on(a->b_frames), on;
		bool for_start = pps_b_frames_for_start(a->b_frames);

		a->dropped = false;
		a->competing = false;
		a->starting = false;
		a->clean[0] = '\0';
		pps_listener_foreach(a->listener, drops_cb, a);
		on = pps_b_frames_update(a->b_frames, now, a->dropped, a->competing, a->starting);
		if (on && !was)
			pps_log(&a->log, PPS_LOG_INFO, "B frames on: %s", a->why);
		else if (!on && was && for_start)
			pps_log(&a->log, PPS_LOG_INFO,
			        "B frames off: %s read clean (no retransmission, no shared path)",
			        a->clean[0] ? a->clean : "the start of a client that left");
		else if (!on && was)
			pps_log(&a->log, PPS_LOG_INFO,
			        "B frames off: no window cut short and no shared path for %.1f s",
			        (double)pps_b_frames_hold_us(a->b_frames) / 1e6);
		pps_media_set_b_frames(a->media, on);
	}
	if (!a->ratealloc)
		return;
	pps_media_get_stats(a->media, &ms);
	for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS && dt > 0; q++)
		encoded_bps[q] = (uint64_t)(8.0 * (double)(ms.bytes[q] - a->last_bytes[q]) / dt);
	memcpy(a->last_bytes, ms.bytes, sizeof(a->last_bytes));
	a->last_us = now;
	a->n_clients = 0;
	pps_listener_foreach(a->listener, collect_cb, a);
	if (pps_ratealloc_update(a->ratealloc, now, a->clients, a->n_clients, encoded_bps, &r) ==
	    1) {
		pps_encoder_rates_t er;

		to_encoder_rates(&r, PPS_ADU_MAX_QUALITY_LAYERS, &er);
		pps_media_set_rates(a->media, &er);
	}
	steer_audio(a);
}

/* The least wait of the video viewers that read and carry the windows (a
 * copy at rest has nothing waiting, whatever its stream's queue; -1: none),
 * at now_us. */
typedef struct {
	int64_t now_us;
	int64_t least_wait_us;
} backlog_t;

static void
backlog_cb(pps_session_t *session, void *user)
{
	backlog_t *b = user;
	int64_t since = pps_session_unsent_since_us(session);
	int64_t wait;

	if (pps_session_state(session) != PPS_SESSION_STREAMING ||
	    pps_session_audio_only(session) || pps_session_resting(session) ||
	    pps_session_stalled_us(session) > DRAIN_READER_US)
		return;
	wait = since == INT64_MAX ? 0 : b->now_us - since;
	if (b->least_wait_us < 0 || wait < b->least_wait_us)
		b->least_wait_us = wait;
}

/*
 * The drain. A window's pictures wait in this sender for its own span and
 * their encoding, and the previous window is normally on the wire by the
 * time the next one is ready. When every viewer still has part of an
 * earlier window unsent (in the regulator or in the kernel behind the
 * pacer), the stream offers more than the paths take right now (an AIMD
 * that took 30% off at a loss, a large picture): what is queued drains
 * only as fast as the paths exceed the encoder's rate, and under a
 * tcp-friendly rate that is filled to 85% it took a second and more, each
 * picture meanwhile as late as the queue. Coding the next pictures coarser
 * drains it in a few windows; the rates and CRFs the closed loop set stay
 * as they are and come back the window after the queue is gone. The least
 * wait of the viewers decides: one viewer behind is what its regulator's
 * drops are for, and must not coarsen everyone's pictures.
 */
void
pps_adapt_loop_window_ready(pps_adapt_loop_t *a)
{
	backlog_t b = {.least_wait_us = -1};

	if (!a || !a->ratealloc || a->drain_crf <= 0)
		return;
	b.now_us = pps_time_realtime_us();
	pps_listener_foreach(a->listener, backlog_cb, &b);
	pps_media_set_drain(a->media, pps_drain_crf(b.least_wait_us, a->window_us, a->drain_crf));
}

pps_adapt_loop_t *
pps_adapt_loop_new(struct event_base *base, const pps_adapt_loop_params_t *p,
                   const pps_wire_stream_info_t *si, int64_t latency_budget_us, pps_media_t *media,
                   pps_listener_t *listener, char *err, size_t err_size)
{
	pps_ratealloc_params_t ap = {
	    .quality_layers = si->quality_layers,
	    .base_share_pct = p->base_share_pct,
	    .base_memory_us = p->base_memory_us,
	    .probe_pct = p->probe_pct,
	    .min_base_kbps = p->min_base_kbps,
	    .min_crf = p->min_crf,
	    .latency_budget_us = latency_budget_us,
	    .window_us = (int64_t)si->window_frames * 1000000 / (si->fps_num ? si->fps_num : 30),
	    .interval_us = p->interval_us,
	};
	int base_max = p->base_vbv_kbps;
	int enh_max = p->enhancement_vbv_kbps;
	pps_adapt_loop_t *a;
	pps_layer_rates_t r;
	pps_encoder_rates_t er;
	struct timeval tv;

	for (int q = 0; q < ap.quality_layers; q++) {
		int crf = q ? p->enhancement_crf - 6 * (q - 1) : p->base_crf;
		int max = q ? enh_max : base_max;

		ap.max_kbps[q] = max > 0 ? max : 100000;
		if (ap.max_kbps[q] < ap.min_base_kbps)
			ap.max_kbps[q] = ap.min_base_kbps;
		ap.max_crf[q] = crf < 0 ? 0 : crf;
		if (ap.min_crf > ap.max_crf[q])
			ap.min_crf = ap.max_crf[q];
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		snprintf(err, err_size, "[adapt]: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	a->media = media;
	a->listener = listener;
	a->log = p->log;
	a->drain_crf = p->drain_crf;
	a->window_us = ap.window_us;
	a->audio_max_bps = pps_media_audio_bitrate(media);
	/* Windows of one frame have no B frames to switch. */
	if (p->b_frames.policy != PPS_B_FRAMES_ALWAYS && si->temporal_layers > 1) {
		a->b_frames = pps_b_frames_new(&p->b_frames);
		if (!a->b_frames) {
			snprintf(err, err_size, "[pps] b_frames: %s", strerror(errno));
			goto err;
		}
		pps_media_set_b_frames(media, pps_b_frames_on(a->b_frames));
	}
	if (p->steer_rates) {
		if (ap.quality_layers > 1 && enh_max > 0 &&
		    enh_max < PPS_RATEALLOC_MIN_ENHANCEMENT_KBPS) {
			snprintf(
			    err, err_size,
			    "[encoder] enhancement_vbv_kbps = %d is below the rate allocator's "
			    "floor "
			    "for an enhancement layer (%d kbit/s): raise it, 0 for uncapped, or "
			    "adapt.mode = fixed",
			    enh_max, PPS_RATEALLOC_MIN_ENHANCEMENT_KBPS);
			errno = EINVAL;
			goto err;
		}
		a->ratealloc = pps_ratealloc_new(&ap);
		if (!a->ratealloc) {
			snprintf(err, err_size, "[adapt]: cannot start the rate allocator: %s",
			         strerror(errno));
			goto err;
		}
		pps_ratealloc_get(a->ratealloc, &r);
		to_encoder_rates(&r, ap.quality_layers, &er);
		pps_media_set_rates(media, &er);
	}
	a->last_us = pps_time_realtime_us();
	a->timer = event_new(base, -1, EV_PERSIST, step_cb, a);
	tv = pps_time_us_to_timeval(ap.interval_us);
	if (!a->timer || event_add(a->timer, &tv) < 0) {
		snprintf(err, err_size, "event loop: cannot create the adaptation timer");
		errno = ENOMEM;
		goto err;
	}
	return a;

err:
	pps_adapt_loop_free(a);
	return NULL;
}

void
pps_adapt_loop_joined(pps_adapt_loop_t *a, pps_session_t *session)
{
	if (!a || !a->b_frames || !pps_b_frames_join(a->b_frames))
		return;
	pps_log(&a->log, PPS_LOG_INFO, "B frames on: new client %s, until its path reads clean",
	        pps_session_peer(session));
	pps_media_set_b_frames(a->media, true);
}

void
pps_adapt_loop_free(pps_adapt_loop_t *a)
{
	if (!a)
		return;
	if (a->timer)
		event_free(a->timer);
	pps_ratealloc_free(a->ratealloc);
	pps_b_frames_free(a->b_frames);
	free(a);
}
