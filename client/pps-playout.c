/* SPDX-License-Identifier: MIT */
/*
 * Playout policies.
 *
 *  fixed:    display at capture time + tolerance; what is ready later is late.
 *            Tolerance 0 (the default) = what the stream can meet: the
 *            server's latency budget (STREAM_INFO) + the measured round trip
 *            (half for the one-way delay, half for queueing on the way)
 *            + a decode margin.
 *  asap:     display as soon as a frame is decoded; the frames of a window
 *            that come out together keep their capture spacing, and no
 *            frame follows the one shown before it sooner than half their
 *            capture spacing (catching up after a stall at most twice as
 *            fast as real time: every frame stays on screen).
 *  adaptive: display at capture time + (u + 4 v), where u and v estimate the
 *            delay and its variation (Zhang, Wang, Keshav, section 4.1, after
 *            Ramjee et al.'s algorithm 2), with alpha = 0.998002 and beta = 4.
 *            NORMAL mode: u is a running average of the delay. SPIKE mode,
 *            entered when the delay rises steeply, lets u follow the delay
 *            directly; it ends when the delay's change is no longer violent.
 *            The estimate is updated per window and applied from the next
 *            window on, so playout never jitters inside a window.
 *
 *  smooth:   display at capture time + D, where D is the 90th percentile of
 *            the window delays of the last 2 s plus a decode margin. D rises
 *            at once when the path slows and falls by 1/8 of its excess per
 *            window when it recovers, so the display speeds up gently. A
 *            frame that arrives after its time is shown at once, not dropped:
 *            the delay is what the path shows now instead of the adaptive
 *            policy's estimate + 4 x variation, and what it costs in evenness
 *            is the 10% of windows above the percentile. (A 10 s horizon at
 *            the 95th percentile was measured too: under congestion it held
 *            every frame near the worst delay of the last 10 s.)
 *
 * Spike rule (the papers leave it to the implementation): enter SPIKE when a
 * window's delay exceeds the previous one by more than max(2 v + 100 ms,
 * 100 ms); track spike_var = spike_var / 2 + |2 d_i - d_{i-1} - d_{i-2}| / 8
 * and go back to NORMAL when it falls under 10 ms.
 */
#include "pps-client-internal.h"
#include "pps-names.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const pps_playout_policy_names[] = {
    [PPS_PLAYOUT_FIXED] = "fixed",       [PPS_PLAYOUT_ASAP] = "asap",
    [PPS_PLAYOUT_ADAPTIVE] = "adaptive", [PPS_PLAYOUT_SMOOTH] = "smooth",
    [PPS_PLAYOUT_POLICY_COUNT] = NULL,
};
_Static_assert(sizeof(pps_playout_policy_names) / sizeof(pps_playout_policy_names[0]) ==
                   PPS_PLAYOUT_POLICY_COUNT + 1,
               "a name for every pps_playout_policy_t");

#define BETA           4.0
#define SPIKE_ENTER_US 100000.0
#define SPIKE_EXIT_US  10000.0
/* Decoding and display after the last byte arrived. */
#define DECODE_MARGIN_US 10000
/* Until a round trip is measured. */
#define UNKNOWN_RTT_US 100000

typedef struct {
	pps_frame_t *picture;
	pps_playout_frame_t meta;
	int64_t display_us;
} queued_t;

struct pps_playout {
	pps_playout_policy_t policy;
	int64_t tolerance_us; /* 0 = from the stream */
	pps_playout_discard_cb discard_cb;
	void *user;
	/* the stream */
	int64_t budget_us, window_us;
	int64_t rtt_us; /* best measured, 0 = none yet */
	/* adaptive */
	bool have_estimate; /* adaptive or smooth: a window has set delay_us */
	bool spike;
	double u, v;   /* delay estimate and variation, microseconds */
	double d1, d2; /* last two delays */
	double spike_var;
	int64_t delay_us; /* in force for the next window */
	unsigned windows;
	/* smooth: the last window delays, a ring */
	int64_t recent_us[PPS_PLAYOUT_SMOOTH_WINDOWS];
	size_t recent_next, recent_count;
	/* asap pacing: the first frame shown of the current window */
	uint32_t anchor_window;
	int64_t anchor_capture_us, anchor_display_us;
	bool have_anchor;
	int64_t last_display_us; /* of the last frame queued */
	bool have_last;
	/* asap: the last frame shown (popped), for the catch-up bound */
	int64_t shown_us, shown_capture_us;
	bool have_shown;
	/* the queue, in display order */
	queued_t queue[PPS_PLAYOUT_MAX_FRAMES];
	size_t head, count;
	size_t bytes;
	uint64_t overflows;
};

const char *
pps_playout_policy_name(pps_playout_policy_t policy)
{
	return pps_names_get(pps_playout_policy_names, (int)policy, "unknown");
}

int
pps_playout_policy_from_name(const char *name, pps_playout_policy_t *out)
{
	int i = pps_names_find(pps_playout_policy_names, name);

	if (i < 0)
		return i;
	*out = (pps_playout_policy_t)i;
	return 0;
}

pps_playout_t *
pps_playout_new(pps_playout_policy_t policy, int64_t tolerance_us,
                pps_playout_discard_cb discard_cb, void *user)
{
	pps_playout_t *p;

	if ((unsigned)policy >= PPS_PLAYOUT_POLICY_COUNT || tolerance_us < 0) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->policy = policy;
	p->tolerance_us = tolerance_us;
	p->discard_cb = discard_cb;
	p->user = user;
	p->budget_us = 200000; /* until STREAM_INFO */
	p->window_us = 66667;
	p->delay_us = pps_playout_stream_delay_us(p);
	return p;
}

void
pps_playout_free(pps_playout_t *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->count; i++)
		pps_frame_free(p->queue[(p->head + i) % PPS_PLAYOUT_MAX_FRAMES].picture);
	free(p);
}

int64_t
pps_playout_stream_delay_us(const pps_playout_t *p)
{
	int64_t rtt = p->rtt_us ? p->rtt_us : UNKNOWN_RTT_US;

	if (p->tolerance_us > 0)
		return p->tolerance_us;
	return p->budget_us + rtt + DECODE_MARGIN_US;
}

void
pps_playout_set_stream(pps_playout_t *p, int64_t latency_budget_us, int64_t window_us)
{
	p->budget_us = latency_budget_us;
	p->window_us = window_us > 0 ? window_us : 1;
	/* The adaptive policy starts from the stream's delay; smooth starts
	 * from the first window and must not be reset by later calls. */
	if (p->policy == PPS_PLAYOUT_ADAPTIVE && !p->have_estimate)
		p->delay_us = pps_playout_stream_delay_us(p);
}

void
pps_playout_set_rtt(pps_playout_t *p, int64_t rtt_us)
{
	p->rtt_us = rtt_us > 0 ? rtt_us : 1;
	if (p->policy == PPS_PLAYOUT_ADAPTIVE && !p->have_estimate)
		p->delay_us = pps_playout_stream_delay_us(p);
}

static int
compare_int64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static void
smooth_window(pps_playout_t *p, int64_t delay_us)
{
	int64_t sorted[PPS_PLAYOUT_SMOOTH_WINDOWS];
	size_t horizon = (size_t)(PPS_PLAYOUT_SMOOTH_HORIZON_MS * 1000 / p->window_us) + 1;
	size_t n, rank;
	int64_t target;

	if (delay_us < 0)
		delay_us = 0;
	p->recent_us[p->recent_next] = delay_us;
	p->recent_next = (p->recent_next + 1) % PPS_PLAYOUT_SMOOTH_WINDOWS;
	if (p->recent_count < PPS_PLAYOUT_SMOOTH_WINDOWS)
		p->recent_count++;
	if (horizon > PPS_PLAYOUT_SMOOTH_WINDOWS)
		horizon = PPS_PLAYOUT_SMOOTH_WINDOWS;
	n = p->recent_count < horizon ? p->recent_count : horizon;
	for (size_t i = 0; i < n; i++)
		sorted[i] = p->recent_us[(p->recent_next + PPS_PLAYOUT_SMOOTH_WINDOWS - 1 - i) %
		                         PPS_PLAYOUT_SMOOTH_WINDOWS];
	qsort(sorted, n, sizeof(sorted[0]), compare_int64);
	rank = (n * PPS_PLAYOUT_SMOOTH_PERCENTILE + 99) / 100; /* ceil, in integers */
	target = sorted[rank > 0 ? rank - 1 : 0] + DECODE_MARGIN_US;
	if (!p->have_estimate || target >= p->delay_us)
		p->delay_us = target;
	else
		p->delay_us -=
		    (p->delay_us - target + PPS_PLAYOUT_SMOOTH_FALL - 1) / PPS_PLAYOUT_SMOOTH_FALL;
	p->have_estimate = true;
}

void
pps_playout_window(pps_playout_t *p, int64_t delay_us)
{
	double d = (double)delay_us;
	double alpha = exp(-(double)p->window_us / (PPS_PLAYOUT_SETTLE_MS * 1000.0));

	p->windows++;
	if (p->policy == PPS_PLAYOUT_SMOOTH) {
		smooth_window(p, delay_us);
		return;
	}
	if (p->policy != PPS_PLAYOUT_ADAPTIVE)
		return;
	if (!p->have_estimate) {
		double start = (double)pps_playout_stream_delay_us(p);

		p->u = d;
		/* Start where the stream's budget says it can be; the variation
		 * term shrinks to what the path shows. */
		p->v = start > d ? (start - d) / BETA : d / 8;
		p->d1 = p->d2 = d;
		p->have_estimate = true;
	} else {
		if (!p->spike && d - p->d1 > fmax(2 * p->v + SPIKE_ENTER_US, SPIKE_ENTER_US)) {
			p->spike = true;
			p->spike_var = 0;
		}
		if (p->spike) {
			p->spike_var = p->spike_var / 2 + fabs(2 * d - p->d1 - p->d2) / 8;
			p->u = p->u + (d - p->d1);
			if (p->spike_var < SPIKE_EXIT_US)
				p->spike = false;
		} else {
			p->u = alpha * p->u + (1 - alpha) * d;
		}
		p->v = alpha * p->v + (1 - alpha) * fabs(p->u - d);
		p->d2 = p->d1;
		p->d1 = d;
	}
	p->delay_us = (int64_t)(p->u + BETA * p->v);
	if (p->delay_us < 0)
		p->delay_us = 0;
}

int64_t
pps_playout_display_time(const pps_playout_t *p, int64_t capture_us, int64_t now_us)
{
	switch (p->policy) {
	case PPS_PLAYOUT_ASAP:
		return now_us;
	case PPS_PLAYOUT_ADAPTIVE:
		return capture_us + p->delay_us;
	case PPS_PLAYOUT_SMOOTH:
		/* Until the first window: as soon as decoded. */
		return p->have_estimate ? capture_us + p->delay_us : now_us;
	case PPS_PLAYOUT_FIXED:
	default:
		return capture_us + pps_playout_stream_delay_us(p);
	}
}

int64_t
pps_playout_delay_us(const pps_playout_t *p)
{
	switch (p->policy) {
	case PPS_PLAYOUT_ASAP:
		return 0;
	case PPS_PLAYOUT_ADAPTIVE:
		return p->delay_us;
	case PPS_PLAYOUT_SMOOTH:
		return p->have_estimate ? p->delay_us : 0;
	case PPS_PLAYOUT_FIXED:
	default:
		return pps_playout_stream_delay_us(p);
	}
}

bool
pps_playout_drops_late(const pps_playout_t *p)
{
	return p->policy == PPS_PLAYOUT_FIXED || p->policy == PPS_PLAYOUT_ADAPTIVE;
}

const char *
pps_playout_mode(const pps_playout_t *p)
{
	return p->spike ? "spike" : "normal";
}

static size_t
picture_bytes(const pps_frame_t *f)
{
	return (size_t)f->width * (size_t)f->height * 3 / 2;
}

static void
drop_head(pps_playout_t *p, const char *reason)
{
	queued_t *q = &p->queue[p->head];

	if (p->discard_cb)
		p->discard_cb(&q->meta, reason, p->user);
	p->bytes -= picture_bytes(q->picture);
	pps_frame_free(q->picture);
	q->picture = NULL;
	p->head = (p->head + 1) % PPS_PLAYOUT_MAX_FRAMES;
	p->count--;
}

int
pps_playout_push(pps_playout_t *p, const pps_frame_t *picture, const pps_playout_frame_t *meta,
                 int64_t now_us)
{
	int64_t display = pps_playout_display_time(p, meta->capture_us, now_us);
	size_t bytes = picture_bytes(picture);
	queued_t *q;

	if (p->policy == PPS_PLAYOUT_ASAP) {
		/* Frames of one window that come out together keep their capture
		 * spacing instead of flashing by in a burst; a new window starts
		 * as soon as it is decoded, and frames of older windows still
		 * waiting for their paced time become due now, so pacing never
		 * accumulates when windows arrive back to back after a stall. */
		if (p->have_anchor && meta->window == p->anchor_window &&
		    meta->capture_us > p->anchor_capture_us) {
			int64_t paced =
			    p->anchor_display_us + (meta->capture_us - p->anchor_capture_us);

			if (paced > display)
				display = paced;
		} else if (!p->have_anchor || meta->window != p->anchor_window) {
			for (size_t i = 0; i < p->count; i++) {
				queued_t *waiting =
				    &p->queue[(p->head + i) % PPS_PLAYOUT_MAX_FRAMES];

				if (waiting->display_us > display)
					waiting->display_us = display;
			}
			if (p->have_last && p->last_display_us > display)
				p->last_display_us = display;
			p->have_anchor = true;
			p->anchor_window = meta->window;
			p->anchor_capture_us = meta->capture_us;
			p->anchor_display_us = display;
		}
	} else if (display < now_us - 1000) {
		if (pps_playout_drops_late(p))
			return -ETIME;
		display = now_us; /* smooth: late is shown at once */
	}
	/* Display order is capture order: a delay that shrank between windows
	 * must not show a frame before the one queued ahead of it. */
	if (p->have_last && display < p->last_display_us)
		display = p->last_display_us;
	p->have_last = true;
	p->last_display_us = display;
	while (p->count > 0 &&
	       (p->count == PPS_PLAYOUT_MAX_FRAMES || p->bytes + bytes > PPS_PLAYOUT_MAX_BYTES)) {
		/* Bounded: the oldest waiting frame goes (it is the most overdue). */
		p->overflows++;
		drop_head(p, PPS_FRAME_OVERFLOW);
	}
	q = &p->queue[(p->head + p->count) % PPS_PLAYOUT_MAX_FRAMES];
	q->picture = pps_frame_new(picture->width, picture->height);
	if (!q->picture)
		return -ENOMEM;
	pps_frame_copy(q->picture, picture);
	q->meta = *meta;
	q->display_us = display;
	p->count++;
	p->bytes += bytes;
	return 0;
}

/* When the head may be shown: its display time, and with asap no sooner
 * than half its capture spacing after the frame shown before it, so that
 * catching up after a stall runs at most twice as fast as real time and
 * every frame stays on screen for one refresh of a 60 Hz display (at 30
 * frames/s) instead of flashing by. */
static int64_t
head_due_us(const pps_playout_t *p)
{
	const queued_t *q = &p->queue[p->head];
	int64_t due = q->display_us;

	if (p->policy == PPS_PLAYOUT_ASAP && p->have_shown &&
	    q->meta.capture_us > p->shown_capture_us) {
		int64_t bound = p->shown_us + (q->meta.capture_us - p->shown_capture_us) / 2;

		if (bound > due)
			due = bound;
	}
	return due;
}

int64_t
pps_playout_next_due_us(const pps_playout_t *p)
{
	return p->count ? head_due_us(p) : INT64_MAX;
}

pps_frame_t *
pps_playout_pop_due(pps_playout_t *p, int64_t now_us, pps_playout_frame_t *meta)
{
	queued_t *q;
	pps_frame_t *picture;

	/* A timer may fire a little early; a millisecond is not worth a re-arm. */
	if (!p->count || head_due_us(p) > now_us + 1000)
		return NULL;
	q = &p->queue[p->head];
	picture = q->picture;
	*meta = q->meta;
	p->have_shown = true;
	p->shown_us = now_us;
	p->shown_capture_us = q->meta.capture_us;
	q->picture = NULL;
	p->bytes -= picture_bytes(picture);
	p->head = (p->head + 1) % PPS_PLAYOUT_MAX_FRAMES;
	p->count--;
	return picture;
}

void
pps_playout_flush(pps_playout_t *p)
{
	while (p->count > 0)
		drop_head(p, PPS_FRAME_STOPPED);
	p->have_anchor = false;
	p->have_last = false;
	p->have_shown = false;
}
