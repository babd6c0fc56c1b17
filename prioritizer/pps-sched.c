/* SPDX-License-Identifier: MIT */
/*
 * The per-client progress regulator (TOMCCAP 2008 section 7; Krasic's
 * priority-progress streaming). Windows are served strictly in order; inside
 * the head window ADUs go in the window's priority order; at a window's
 * deadline whatever is unsent is dropped and a WINDOW_END tells the client
 * what it will not get. A window published before its last ADUs were
 * encoded is sent as far as it goes; then the scheduler has nothing to send
 * (no packet, pps_sched_has_data false) until they join it, the window
 * closes short, or its deadline passes.
 *
 * Decodability is tracked per client: an ADU is sent only if every ADU it
 * depends on was sent whole to this client. A ring of recent ADU ids holds
 * that state; an id that fell out of the ring, or that this client never saw
 * (it joined later), counts as not sent, so the client waits for the next
 * intra picture of that layer instead of receiving something it cannot use.
 *
 * Restarts of an enhancement layer back off (restart_t): a client whose
 * layer was cut takes it up again at the layer's next IDR, and on a path that
 * cannot carry the layer that IDR is cut too, part-sent: its bytes only
 * delay the base behind them, at every GOP. A restart fails when its IDR is
 * cut before it was whole, or the layer is cut within RESTART_TRIAL_US of it
 * (the IDR's queue cut the pictures after it: a few enhanced pictures for
 * the price of an IDR); the client then skips the layer's next IDR, then 2,
 * 4, ... up to restart_backoff_max. A layer that lasts past the trial clears
 * it: a client whose path takes part of the layer gets it for part of each
 * GOP, and those pictures were worth their bytes.
 *
 * Deadlines per ADU (pps_deadlines_t, after Time-lined TCP, paper 004): the
 * window's deadline becomes the earliest deadline of what it has not sent,
 * each ADU's from its window (pps_window_adu_due_capture_us); windows are
 * still served strictly in order, so a window that lives past its first
 * frame's deadline delays the next one by as much.
 */
#include "pps-prioritizer.h"

#include "pps-names.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const pps_deadlines_names[] = {
    [PPS_DEADLINES_WINDOW] = "window",
    [PPS_DEADLINES_ADU] = "adu",
    [PPS_DEADLINES_PREDICTIVE] = "predictive",
    [PPS_DEADLINES_COUNT] = NULL,
};
_Static_assert(sizeof(pps_deadlines_names) / sizeof(pps_deadlines_names[0]) ==
                   PPS_DEADLINES_COUNT + 1,
               "a name for every pps_deadlines_t");

#define ADU_RING 8192 /* recent ADU ids whose sent/dropped state we remember */

typedef enum {
	ENTRY_PENDING, /* nothing of it written yet */
	ENTRY_ACTIVE,  /* WINDOW_BEGIN written, data going out */
	ENTRY_ENDED,   /* all sent or deadline passed: only its WINDOW_END is left */
} entry_state_t;

typedef struct {
	pps_window_t *window; /* released once the entry ends */
	uint32_t window_id;
	int64_t deadline_us; /* its first frame's: capture + budget */
	/* Per ADU (PPS_DEADLINES_ADU, _PREDICTIVE): once an ADU was dropped, the
	 * window ends by that ADU's deadline, since every frame the client
	 * decodes after it waits for the WINDOW_END. INT64_MAX until then. */
	int64_t cap_us;
	int64_t late_end_us; /* while late: when the base grace ends */
	entry_state_t state;
	bool begin_sent;
	bool rested;          /* pps_sched_rest_window(): its WINDOW_END says so */
	bool late;            /* past its deadline: only base anchors still go out */
	bool extended;        /* sent data after deadline_us (counted once) */
	size_t next_adu;      /* index in send order of the ADU being sent */
	uint32_t next_offset; /* bytes of it already sent */
	uint16_t adus_sent, adus_dropped;
	uint32_t bytes_sent, bytes_dropped;
	/* What WINDOW_BEGIN announced, and the ADU bytes the client has been
	 * told of since (a fragment's total_bytes): an ADU that would pass the
	 * announced bytes (one still being encoded when it began) is dropped. */
	uint32_t bytes_announced, bytes_started;
} entry_t;

typedef struct {
	uint32_t id;
	uint8_t state; /* 0 unknown, 1 sent, 2 dropped */
} ring_slot_t;

enum { ADU_UNKNOWN = 0, ADU_SENT = 1, ADU_DROPPED = 2 };

/* A restart whose layer is cut within this of its IDR going out whole
 * failed (restart_t): about ten frames at 30 frames/s. */
#define RESTART_TRIAL_US 300000

/* One quality layer's restarts for this client (quality layers 1 and up). */
typedef struct {
	bool live;          /* its last anchor went out whole */
	int64_t restart_us; /* when its last restart's IDR went out whole */
	uint8_t backoff;    /* IDRs skipped at the last failure: 1, 2, 4, ... */
	uint8_t skip;       /* IDRs still to skip before the next restart */
} restart_t;

/* Windows whose encoded bytes per quality layer the restarts' fit reads:
 * about 4 s of 2-frame windows, two GOPs. */
#define ENCODED_RING 64

/* Window starts remembered for pps_sched_unsent_since_us(): more than the
 * kernel ever holds under MIN_BUF (a few packets, each of one window or
 * more). */
#define BEGAN_RING 32

/* What the encoder made of one window, per quality layer, sent or not. */
typedef struct {
	int64_t capture_us; /* its first frame's */
	uint32_t bytes[PPS_ADU_MAX_QUALITY_LAYERS];
} encoded_t;

typedef struct {
	pps_wire_audio_frame_t frame; /* payload points into data */
	uint8_t data[PPS_SCHED_MAX_AUDIO_BYTES];
} audio_slot_t;

struct pps_sched {
	pps_sched_params_t params;
	entry_t *entries; /* ring of max_windows */
	size_t head, count;
	pps_wire_record_t control[PPS_SCHED_MAX_CONTROL];
	size_t control_head, control_count;
	audio_slot_t *audio; /* ring of PPS_SCHED_MAX_AUDIO, allocated on first use */
	size_t audio_head, audio_count;
	ring_slot_t ring[ADU_RING];
	pps_sched_stats_t stats;
	/* The predictive drop's path (pps_sched_set_path), and stats.packet_bytes
	 * when it was set: what was handed out since is queued on top. */
	pps_sched_path_t path;
	uint64_t path_mark_bytes;
	restart_t restart[PPS_ADU_MAX_QUALITY_LAYERS];
	encoded_t
	    encoded[ENCODED_RING]; /* the last windows ended, oldest first from encoded_next */
	size_t encoded_next, encoded_count;
	int64_t now_us; /* the latest time the owner gave */
	/* Where the last windows began in the bytes handed out (stats.packet_bytes
	 * before their WINDOW_BEGIN) and their first capture, oldest first from
	 * began_next: which window the kernel's unsent bytes belong to. */
	struct {
		uint64_t offset;
		int64_t capture_us;
	} began[BEGAN_RING];
	size_t began_next, began_count;
};

pps_sched_t *
pps_sched_new(const pps_sched_params_t *params)
{
	pps_sched_t *s;

	if (params->latency_budget_us <= 0 || params->max_windows < 2 ||
	    (unsigned)params->deadlines >= PPS_DEADLINES_COUNT ||
	    (params->max_record_bytes &&
	     params->max_record_bytes < PPS_WIRE_MIN_MAX_RECORD_BYTES)) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		goto err_alloc;
	s->params = *params;
	if (!s->params.max_record_bytes)
		s->params.max_record_bytes = PPS_WIRE_DEFAULT_MAX_RECORD_BYTES;
	if (!s->params.audio_deadline_us)
		s->params.audio_deadline_us = PPS_DEFAULT_AUDIO_DEADLINE_US;
	s->entries = calloc(params->max_windows, sizeof(*s->entries));
	if (!s->entries)
		goto err_entries;
	return s;

err_entries:
	free(s);
err_alloc:
	errno = ENOMEM;
	return NULL;
}

void
pps_sched_free(pps_sched_t *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->count; i++)
		pps_window_unref(s->entries[(s->head + i) % s->params.max_windows].window);
	free(s->entries);
	free(s->audio);
	free(s);
}

static entry_t *
entry_at(pps_sched_t *s, size_t i)
{
	return &s->entries[(s->head + i) % s->params.max_windows];
}

static void
ring_set(pps_sched_t *s, uint32_t id, uint8_t state)
{
	s->ring[id % ADU_RING].id = id;
	s->ring[id % ADU_RING].state = state;
}

static uint8_t
ring_get(const pps_sched_t *s, uint32_t id)
{
	const ring_slot_t *slot = &s->ring[id % ADU_RING];

	return slot->id == id ? slot->state : ADU_UNKNOWN;
}

static bool
decodable(const pps_sched_t *s, const pps_adu_t *adu)
{
	const pps_adu_info_t *info = pps_adu_info(adu);

	for (unsigned i = 0; i < info->dep_count; i++) {
		if (ring_get(s, info->deps[i]) != ADU_SENT)
			return false;
	}
	return true;
}

static pps_sched_layer_stats_t *
layer_stats(pps_sched_t *s, const pps_adu_t *adu)
{
	const pps_adu_info_t *info = pps_adu_info(adu);

	return &s->stats.layer[info->temporal_layer][info->quality_layer];
}

/* The deadline of the @i-th ADU of @e in send order, per ADU. */
static int64_t
adu_deadline_us(const pps_sched_t *s, const entry_t *e, size_t i)
{
	return pps_window_adu_due_capture_us(e->window, i) + s->params.latency_budget_us;
}

/* Keeps what the encoder made of @window, per quality layer. */
static void
encoded_add(pps_sched_t *s, const pps_window_t *window)
{
	encoded_t *w = &s->encoded[s->encoded_next];

	memset(w, 0, sizeof(*w));
	w->capture_us = pps_window_first_capture_us(window);
	for (size_t i = 0; i < pps_window_adu_count(window); i++) {
		const pps_adu_t *adu = pps_window_adu(window, i);
		unsigned q = pps_adu_info(adu)->quality_layer;

		if (q < PPS_ADU_MAX_QUALITY_LAYERS)
			w->bytes[q] += (uint32_t)pps_adu_size(adu);
	}
	s->encoded_next = (s->encoded_next + 1) % ENCODED_RING;
	if (s->encoded_count < ENCODED_RING)
		s->encoded_count++;
}

/* What the encoder made of quality layers 0..@layer over the windows kept,
 * bits/s; 0 while fewer than 8 windows are known. The oldest window's bytes
 * are left out: the span runs from its capture to the newest's. */
static uint64_t
encoded_rate_bps(const pps_sched_t *s, unsigned layer)
{
	size_t oldest = (s->encoded_next + ENCODED_RING - s->encoded_count) % ENCODED_RING;
	size_t newest = (s->encoded_next + ENCODED_RING - 1) % ENCODED_RING;
	uint64_t bytes = 0;
	int64_t span_us;

	if (s->encoded_count < 8)
		return 0;
	span_us = s->encoded[newest].capture_us - s->encoded[oldest].capture_us;
	if (span_us <= 0)
		return 0;
	for (size_t k = 1; k < s->encoded_count; k++) {
		const encoded_t *w = &s->encoded[(oldest + k) % ENCODED_RING];

		for (unsigned q = 0; q <= layer && q < PPS_ADU_MAX_QUALITY_LAYERS; q++)
			bytes += w->bytes[q];
	}
	return bytes * 8u * 1000000u / (uint64_t)span_us;
}

/* A restart of @r failed: the next IDRs of its layer are skipped. */
static void
restart_failed(const pps_sched_t *s, restart_t *r)
{
	unsigned next = r->backoff ? 2u * r->backoff : 1u;

	if (next > s->params.restart_backoff_max)
		next = s->params.restart_backoff_max;
	r->backoff = (uint8_t)next;
	r->skip = r->backoff;
}

/* An ADU of @info's layer is dropped (@part_sent: some of it went out). */
static void
restart_dropped(pps_sched_t *s, const pps_adu_info_t *info, bool part_sent)
{
	restart_t *r = &s->restart[info->quality_layer];

	if (info->quality_layer == 0 || info->temporal_layer != 0)
		return; /* the base, or a picture nothing references across windows */
	/* A restart's IDR, or a live layer's next one, cut: the path cannot
	 * take the layer's IDRs in time. A restarted layer cut within the
	 * trial: its IDR's queue cut it. */
	if ((part_sent && info->frame_type == PPS_ADU_FRAME_IDR) ||
	    (r->live && s->now_us - r->restart_us < RESTART_TRIAL_US))
		restart_failed(s, r);
	else if (r->live)
		r->backoff = 0; /* it lasted */
	r->live = false;
}

/*
 * The IDR @info of an enhancement layer is up next: true if this client skips
 * it (its layer backs off). An IDR of a live layer continues it.
 */
static bool
restart_skipped(pps_sched_t *s, const pps_adu_info_t *info)
{
	restart_t *r = &s->restart[info->quality_layer];

	if (info->quality_layer == 0 || info->frame_type != PPS_ADU_FRAME_IDR)
		return false;
	if (r->live || r->skip == 0)
		return false;
	r->skip--;
	return true;
}

/*
 * The IDR @info of an enhancement layer this client does not have is up
 * next: true if its path cannot carry the layer (restart_fit_pct of what the
 * encoder makes of it and the layers below). Without an estimate, or before
 * the encoder's rate is known, it restarts.
 */
static bool
restart_unfit(const pps_sched_t *s, const pps_adu_info_t *info)
{
	uint64_t need;

	if (info->quality_layer == 0 || info->frame_type != PPS_ADU_FRAME_IDR ||
	    s->restart[info->quality_layer].live || !s->params.restart_fit_pct || !s->path.rate_bps)
		return false;
	need = encoded_rate_bps(s, info->quality_layer);
	return need && s->path.rate_bps * 100u < need * s->params.restart_fit_pct;
}

/* An ADU went out whole: an enhancement IDR (re)starts its layer. */
static void
restart_sent(pps_sched_t *s, const pps_adu_info_t *info)
{
	restart_t *r = &s->restart[info->quality_layer];

	if (info->quality_layer == 0 || info->frame_type != PPS_ADU_FRAME_IDR)
		return;
	if (!r->live)
		r->restart_us = s->now_us;
	r->live = true;
}

/* Drops the @i-th ADU of @e in send order. */
static void
drop_adu(pps_sched_t *s, entry_t *e, size_t i)
{
	const pps_adu_t *adu = pps_window_adu(e->window, i);
	pps_sched_layer_stats_t *ls = layer_stats(s, adu);
	int64_t deadline_us = adu_deadline_us(s, e, i);

	/* The frames the client decodes after it wait for the WINDOW_END. */
	if (deadline_us < e->cap_us)
		e->cap_us = deadline_us;

	restart_dropped(s, pps_adu_info(adu), i == e->next_adu && e->next_offset > 0);
	ring_set(s, pps_adu_info(adu)->id, ADU_DROPPED);
	e->adus_dropped++;
	e->bytes_dropped += (uint32_t)pps_adu_size(adu);
	ls->adus_dropped++;
	ls->bytes_dropped += pps_adu_size(adu);
}

/* Ends an entry: what is left is dropped; counts the window's outcome. */
static void
end_entry(pps_sched_t *s, entry_t *e)
{
	if (e->state == ENTRY_ENDED)
		return;
	for (size_t i = e->next_adu; i < pps_window_adu_count(e->window); i++)
		drop_adu(s, e, i);
	/* Announced but never encoded in time (an early window): dropped too,
	 * with bytes no one knows. */
	e->adus_dropped +=
	    (uint16_t)(pps_window_adu_total(e->window) - pps_window_adu_count(e->window));
	e->next_adu = pps_window_adu_count(e->window);
	e->next_offset = 0;
	if ((e->adus_sent == 0 || e->adus_dropped > 0) && s->stats.windows_complete > 0)
		s->stats.windows_short++;
	if (e->adus_sent == 0)
		s->stats.windows_dropped++;
	else if (e->adus_dropped == 0)
		s->stats.windows_complete++;
	else
		s->stats.windows_partial++;
	e->state = ENTRY_ENDED;
	encoded_add(s, e->window);
	pps_window_unref(e->window);
	e->window = NULL;
}

void
pps_sched_push_window(pps_sched_t *s, pps_window_t *window)
{
	entry_t *e;

	if (s->count == s->params.max_windows) {
		/* Bounded: the oldest window goes, with its unsent data and its
		 * WINDOW_END; the client sees a gap in window ids. A head window
		 * whose WINDOW_BEGIN is out keeps its place (the client must see it
		 * end), and the one after it goes instead (max_windows >= 2). */
		entry_t *head = entry_at(s, 0);
		size_t victim = head->begin_sent && s->count > 1 ? 1 : 0;
		entry_t *old = entry_at(s, victim);

		end_entry(s, old);
		if (victim == 1)
			*old = *head;
		s->stats.windows_overflow++;
		s->head = (s->head + 1) % s->params.max_windows;
		s->count--;
	}
	e = entry_at(s, s->count);
	memset(e, 0, sizeof(*e));
	e->window = pps_window_ref(window);
	e->window_id = pps_window_id(window);
	e->deadline_us = pps_window_first_capture_us(window) + s->params.latency_budget_us;
	e->cap_us = INT64_MAX;
	e->state = ENTRY_PENDING;
	s->count++;
}

void
pps_sched_rest_window(pps_sched_t *s, pps_window_t *window)
{
	uint32_t first = pps_window_first_adu_id(window);
	size_t total = pps_window_adu_total(window);
	entry_t *e;

	pps_sched_push_window(s, window);
	e = entry_at(s, s->count - 1);
	/* Ids are the stream's, consecutive within a window: those still
	 * being encoded count too. */
	for (size_t i = 0; i < total; i++)
		ring_set(s, first + (uint32_t)i, ADU_SENT);
	e->adus_dropped = (uint16_t)total;
	e->rested = true;
	e->state = ENTRY_ENDED;
	pps_window_unref(e->window);
	e->window = NULL;
	s->stats.windows_rested++;
}

int
pps_sched_push_control(pps_sched_t *s, const pps_wire_record_t *record)
{
	if (s->control_count == PPS_SCHED_MAX_CONTROL) {
		s->stats.control_overflow++;
		return -ENOSPC;
	}
	s->control[(s->control_head + s->control_count) % PPS_SCHED_MAX_CONTROL] = *record;
	s->control_count++;
	return 0;
}

int
pps_sched_push_audio(pps_sched_t *s, const pps_wire_audio_frame_t *frame)
{
	audio_slot_t *slot;

	if (frame->payload_len < 1 || frame->payload_len > PPS_SCHED_MAX_AUDIO_BYTES ||
	    PPS_WIRE_AUDIO_OVERHEAD_BYTES + (size_t)frame->payload_len >
	        s->params.max_record_bytes) {
		s->stats.audio_refused++;
		return -EMSGSIZE;
	}
	if (!s->audio) {
		s->audio = calloc(PPS_SCHED_MAX_AUDIO, sizeof(*s->audio));
		if (!s->audio)
			return -ENOMEM;
	}
	if (s->audio_count == PPS_SCHED_MAX_AUDIO) {
		s->stats.audio_overflow++;
		s->audio_head = (s->audio_head + 1) % PPS_SCHED_MAX_AUDIO;
		s->audio_count--;
	}
	slot = &s->audio[(s->audio_head + s->audio_count) % PPS_SCHED_MAX_AUDIO];
	slot->frame = *frame;
	memcpy(slot->data, frame->payload, frame->payload_len);
	slot->frame.payload = slot->data;
	s->audio_count++;
	return 0;
}

static bool append(uint8_t *buf, size_t mss, size_t *pos, const pps_wire_record_t *r);

/* Audio frames first (after control): each one that is still in time, until
 * the packet is full (false). */
static bool
append_audio(pps_sched_t *s, int64_t now_us, uint8_t *buf, size_t mss, size_t *pos)
{
	while (s->audio_count > 0) {
		audio_slot_t *slot = &s->audio[s->audio_head];
		pps_wire_record_t r = {.kind = PPS_WIRE_AUDIO_FRAME};

		if (slot->frame.capture_us + s->params.audio_deadline_us <= now_us) {
			s->stats.audio_late++;
		} else {
			r.u.audio_frame = slot->frame;
			if (!append(buf, mss, pos, &r))
				return false;
			s->stats.audio_sent++;
			s->stats.audio_bytes += slot->frame.payload_len;
		}
		s->audio_head = (s->audio_head + 1) % PPS_SCHED_MAX_AUDIO;
		s->audio_count--;
	}
	return true;
}

static bool
is_base_anchor(const pps_adu_t *adu)
{
	const pps_adu_info_t *info = pps_adu_info(adu);

	return info->quality_layer == 0 && info->temporal_layer == 0;
}

/* Unsent base anchors left in @e (a partly sent ADU counts as unsent), or
 * still to come in an anchor window. */
static bool
has_base_anchor_left(const entry_t *e)
{
	if (pps_window_anchors_to_come(e->window))
		return true;
	for (size_t i = e->next_adu; i < pps_window_adu_count(e->window); i++)
		if (is_base_anchor(pps_window_adu(e->window, i)))
			return true;
	return false;
}

/*
 * When @e's unsent data is due. Per window: its deadline. Per ADU: the
 * earliest deadline of an ADU not yet sent whole, or the cap a drop set. An
 * ADU unsent at its deadline stalls every frame decoded after it until the
 * WINDOW_END, and the ADUs after it in decode order are due no earlier: so
 * the window ends then, as a window did at its deadline. A
 * window still open keeps its deadline: the ADUs to come are announced,
 * their frames not yet known.
 */
static int64_t
entry_due_us(const pps_sched_t *s, const entry_t *e)
{
	int64_t due = e->cap_us;

	if (s->params.deadlines == PPS_DEADLINES_WINDOW || !e->window ||
	    pps_window_is_open(e->window))
		return e->deadline_us;
	for (size_t i = e->next_adu; i < pps_window_adu_count(e->window); i++) {
		int64_t d = adu_deadline_us(s, e, i);

		if (d < due)
			due = d;
	}
	if (due == INT64_MAX) /* nothing left: it ends when next served */
		return e->deadline_us;
	return due > e->deadline_us ? due : e->deadline_us;
}

int
pps_sched_expire(pps_sched_t *s, int64_t now_us)
{
	int ended = 0;

	s->now_us = now_us;
	for (size_t i = 0; i < s->count; i++) {
		entry_t *e = entry_at(s, i);
		int64_t due_us;

		if (e->state == ENTRY_ENDED || e->deadline_us > now_us)
			continue;
		if (e->late) {
			if (e->late_end_us > now_us && has_base_anchor_left(e))
				continue;
			end_entry(s, e);
			ended++;
			continue;
		}
		due_us = entry_due_us(s, e);
		if (due_us > now_us)
			continue;
		/* Past the deadline: what is not a base anchor is dropped as it
		 * comes up (append_fragments); the anchors go on until the grace
		 * ends. */
		if (s->params.base_grace_us > 0 && due_us + s->params.base_grace_us > now_us &&
		    has_base_anchor_left(e)) {
			e->late = true;
			e->late_end_us = due_us + s->params.base_grace_us;
			s->stats.windows_base_late++;
			ended++;
			continue;
		}
		end_entry(s, e);
		ended++;
	}
	return ended;
}

bool
pps_sched_behind(const pps_sched_t *s)
{
	for (size_t i = 0; i < s->count; i++) {
		const entry_t *e = &s->entries[(s->head + i) % s->params.max_windows];

		if (e->state != ENTRY_ENDED && e->late)
			return true;
	}
	return false;
}

int64_t
pps_sched_unsent_since_us(const pps_sched_t *s)
{
	/* The oldest byte handed out that the kernel had not sent at the last
	 * reading (pps_sched_set_path) is in the last window begun before it. */
	if (s->path_mark_bytes > 0 && s->path.queued_bytes > 0 &&
	    s->path.queued_bytes <= s->path_mark_bytes) {
		uint64_t unsent = s->path_mark_bytes - s->path.queued_bytes;
		int64_t capture = INT64_MAX;

		for (size_t i = 0; i < s->began_count; i++) {
			size_t k = (s->began_next + BEGAN_RING - s->began_count + i) % BEGAN_RING;

			if (s->began[k].offset > unsent)
				break;
			capture = s->began[k].capture_us;
		}
		if (capture != INT64_MAX)
			return capture;
	}
	for (size_t i = 0; i < s->count; i++) {
		const entry_t *e = &s->entries[(s->head + i) % s->params.max_windows];

		if (e->state != ENTRY_ENDED && e->next_adu < pps_window_adu_count(e->window))
			return pps_window_first_capture_us(e->window);
	}
	return INT64_MAX;
}

int64_t
pps_sched_next_deadline_us(const pps_sched_t *s)
{
	int64_t next = INT64_MAX;

	for (size_t i = 0; i < s->count; i++) {
		const entry_t *e = &s->entries[(s->head + i) % s->params.max_windows];
		int64_t deadline;

		if (e->state == ENTRY_ENDED)
			continue;
		deadline = e->late ? e->late_end_us : entry_due_us(s, e);
		if (deadline < next)
			next = deadline;
	}
	return next;
}

/* The head window has sent all it holds and waits for ADUs still being encoded. */
static bool
head_waits(const pps_sched_t *s)
{
	const entry_t *e = &s->entries[s->head];

	return s->count > 0 && e->state == ENTRY_ACTIVE && pps_window_is_open(e->window) &&
	       (!e->late || pps_window_anchors_to_come(e->window)) &&
	       e->next_adu == pps_window_adu_count(e->window);
}

void
pps_sched_set_path(pps_sched_t *s, const pps_sched_path_t *path)
{
	/* The owner reads the kernel's state before it asks for packets and
	 * tells it after: what was handed out since the last reading is not in
	 * @path->queued_bytes yet. */
	uint64_t since = s->stats.packet_bytes - s->path_mark_bytes;

	s->path = *path;
	s->path.queued_bytes += since;
	s->path_mark_bytes = s->stats.packet_bytes;
}

/*
 * Predictive drop (PPS_DEADLINES_PREDICTIVE): true if @size more bytes, after
 * what is queued in the kernel and in this packet (@pending_bytes), cannot
 * reach the client by @deadline_us at the estimated rate, arriving one way
 * later (Time-lined TCP, paper 004, section 3: data that cannot arrive by its
 * deadline is not sent; here the sender still holds it, so it is not written).
 */
static bool
cannot_arrive(const pps_sched_t *s, int64_t now_us, size_t pending_bytes, size_t size,
              int64_t deadline_us)
{
	uint64_t bytes;
	int64_t drain_us;

	if (s->params.deadlines != PPS_DEADLINES_PREDICTIVE || s->path.rate_bps == 0)
		return false;
	bytes = s->path.queued_bytes + (s->stats.packet_bytes - s->path_mark_bytes) +
	        pending_bytes + size;
	drain_us = (int64_t)(bytes * 8 * 1000000 / s->path.rate_bps);
	return now_us + drain_us + s->path.one_way_us > deadline_us;
}

bool
pps_sched_has_data(const pps_sched_t *s)
{
	return s->control_count > 0 || s->audio_count > 0 || (s->count > 0 && !head_waits(s));
}

/* Appends a record if it fits; returns false (writing nothing) if not. */
static bool
append(uint8_t *buf, size_t mss, size_t *pos, const pps_wire_record_t *r)
{
	size_t n;

	/* -ENOSPC: the packet is full. -EINVAL cannot happen: the records are
	 * built here within the wire's limits (deps: a _Static_assert). */
	if (pps_wire_encode(r, buf + *pos, mss - *pos, &n) < 0)
		return false;
	*pos += n;
	return true;
}

static void
pop_head(pps_sched_t *s)
{
	assert(s->count > 0 && entry_at(s, 0)->state == ENTRY_ENDED);
	s->head = (s->head + 1) % s->params.max_windows;
	s->count--;
}

typedef enum {
	FRAGMENTS_FULL, /* the packet is full */
	FRAGMENTS_DONE, /* the window ran out of ADUs: it can end */
	FRAGMENTS_WAIT, /* sent all it holds; more are being encoded */
} fragments_t;

/* Appends fragments of the head window's ADUs. */
static fragments_t
append_fragments(pps_sched_t *s, entry_t *e, int64_t now_us, uint8_t *buf, size_t mss, size_t *pos)
{
	for (;;) {
		const pps_adu_t *adu;
		const pps_adu_info_t *info;
		size_t size, overhead, room, rest, take;
		pps_wire_record_t r;

		if (e->next_adu == pps_window_adu_count(e->window))
			/* A late window sends no enhancement: it ends rather than
			 * wait, unless an anchor window's reference pictures are
			 * still to come (they go out in the grace time). */
			return pps_window_is_open(e->window) &&
			               (!e->late || pps_window_anchors_to_come(e->window))
			           ? FRAGMENTS_WAIT
			           : FRAGMENTS_DONE;
		adu = pps_window_adu(e->window, e->next_adu);
		info = pps_adu_info(adu);
		size = pps_adu_size(adu);

		if (e->late && !is_base_anchor(adu)) {
			/* A partly sent one too: the client learns from WINDOW_END. */
			drop_adu(s, e, e->next_adu);
			e->next_adu++;
			e->next_offset = 0;
			continue;
		}
		if (e->next_offset == 0 && !decodable(s, adu)) {
			drop_adu(s, e, e->next_adu);
			s->stats.adus_undecodable++;
			e->next_adu++;
			continue;
		}
		if (e->next_offset == 0 && size > e->bytes_announced - e->bytes_started) {
			/* Encoded larger than its window's announced bound: the client
			 * would refuse it. */
			drop_adu(s, e, e->next_adu);
			e->next_adu++;
			continue;
		}
		if (e->next_offset == 0 && restart_skipped(s, info)) {
			drop_adu(s, e, e->next_adu);
			s->stats.adus_restart_skipped++;
			e->next_adu++;
			continue;
		}
		if (e->next_offset == 0 && restart_unfit(s, info)) {
			drop_adu(s, e, e->next_adu);
			s->stats.adus_restart_unfit++;
			e->next_adu++;
			continue;
		}
		/* Base anchors keep their grace and are never dropped on a guess:
		 * a lost one costs the GOP. */
		if (e->next_offset == 0 && !e->late && !is_base_anchor(adu) &&
		    cannot_arrive(s, now_us, *pos,
		                  size + pps_wire_fragment_overhead(info->dep_count),
		                  adu_deadline_us(s, e, e->next_adu))) {
			drop_adu(s, e, e->next_adu);
			s->stats.adus_predicted++;
			e->next_adu++;
			continue;
		}
		overhead = pps_wire_fragment_overhead(info->dep_count);
		rest = size - e->next_offset;
		room = mss - *pos;
		if (room <= overhead)
			return FRAGMENTS_FULL;
		take = room - overhead;
		/* A packet of a large MSS (loopback: 64 KB) holds several records:
		 * none longer than the client accepts. */
		if (take > s->params.max_record_bytes - overhead)
			take = s->params.max_record_bytes - overhead;
		if (take < rest && take < PPS_SCHED_MIN_FRAGMENT_BYTES)
			return FRAGMENTS_FULL; /* not worth a fragment: next packet */
		if (take > rest)
			take = rest;

		memset(&r, 0, sizeof(r));
		r.kind = PPS_WIRE_ADU_FRAGMENT;
		pps_adu_info_to_wire(info, &r.u.adu_fragment);
		r.u.adu_fragment.window_id = e->window_id;
		r.u.adu_fragment.priority = (uint16_t)e->next_adu;
		r.u.adu_fragment.offset = e->next_offset;
		r.u.adu_fragment.total_bytes = (uint32_t)size;
		r.u.adu_fragment.payload_len = (uint16_t)take;
		r.u.adu_fragment.payload = pps_adu_data(adu) + e->next_offset;
		if (!append(buf, mss, pos, &r))
			return FRAGMENTS_FULL;
		if (!e->extended && !e->late && now_us >= e->deadline_us) {
			e->extended = true;
			s->stats.windows_extended++;
		}
		if (e->next_offset == 0)
			e->bytes_started += (uint32_t)size;
		e->next_offset += (uint32_t)take;
		if (e->next_offset == size) {
			pps_sched_layer_stats_t *ls = layer_stats(s, adu);

			ring_set(s, info->id, ADU_SENT);
			restart_sent(s, info);
			e->adus_sent++;
			e->bytes_sent += (uint32_t)size;
			ls->adus_sent++;
			ls->bytes_sent += size;
			e->next_adu++;
			e->next_offset = 0;
		}
	}
}

int
pps_sched_next_packet(pps_sched_t *s, int64_t now_us, size_t mss, uint8_t *buf, size_t *len,
                      bool *push)
{
	size_t pos = 0;
	uint64_t begin_at = 0;
	bool full = false;

	if (mss < 128)
		return -EINVAL;
	pps_sched_expire(s, now_us);
	*push = false;

	while (s->control_count > 0) {
		if (!append(buf, mss, &pos, &s->control[s->control_head])) {
			full = true;
			break;
		}
		s->control_head = (s->control_head + 1) % PPS_SCHED_MAX_CONTROL;
		s->control_count--;
	}
	if (!full && !append_audio(s, now_us, buf, mss, &pos))
		full = true;

	while (!full && s->count > 0) {
		entry_t *e = entry_at(s, 0);
		pps_wire_record_t r;

		if (e->state == ENTRY_PENDING) {
			memset(&r, 0, sizeof(r));
			r.kind = PPS_WIRE_WINDOW_BEGIN;
			r.u.window_begin.window_id = e->window_id;
			r.u.window_begin.first_capture_us = pps_window_first_capture_us(e->window);
			r.u.window_begin.deadline_us = e->deadline_us;
			r.u.window_begin.frames = (uint16_t)pps_window_frames(e->window);
			r.u.window_begin.adus = (uint16_t)pps_window_adu_total(e->window);
			r.u.window_begin.bytes = (uint32_t)pps_window_bytes_bound(e->window);
			r.u.window_begin.first_adu_id = pps_window_first_adu_id(e->window);
			begin_at = s->stats.packet_bytes + pos;
			if (!append(buf, mss, &pos, &r)) {
				full = true;
				break;
			}
			e->state = ENTRY_ACTIVE;
			e->begin_sent = true;
			e->bytes_announced = r.u.window_begin.bytes;
			s->began[s->began_next].offset = begin_at;
			s->began[s->began_next].capture_us = r.u.window_begin.first_capture_us;
			s->began_next = (s->began_next + 1) % BEGAN_RING;
			if (s->began_count < BEGAN_RING)
				s->began_count++;
		}
		if (e->state == ENTRY_ACTIVE) {
			fragments_t f = append_fragments(s, e, now_us, buf, mss, &pos);

			if (f == FRAGMENTS_FULL) {
				full = true;
				break;
			}
			if (f == FRAGMENTS_WAIT) {
				/* What is encoded goes now (uncorked); the rest of the
				 * window follows when the windower adds it. */
				*push = pos > 0;
				break;
			}
			end_entry(s, e); /* every ADU was sent or skipped */
		}
		/* ENTRY_ENDED: its WINDOW_END is all that is left. */
		memset(&r, 0, sizeof(r));
		r.kind = PPS_WIRE_WINDOW_END;
		r.u.window_end.window_id = e->window_id;
		r.u.window_end.adus_sent = e->adus_sent;
		r.u.window_end.adus_dropped = e->adus_dropped;
		r.u.window_end.bytes_sent = e->bytes_sent;
		r.u.window_end.bytes_dropped = e->bytes_dropped;
		r.u.window_end.flags = e->adus_sent ? 0 : PPS_WIRE_WINDOW_END_DROPPED;
		if (e->rested)
			r.u.window_end.flags |= PPS_WIRE_WINDOW_END_RESTED;
		if (!append(buf, mss, &pos, &r)) {
			full = true;
			break;
		}
		pop_head(s);
		if (e->begin_sent) {
			/* The end of a window that carried data: flush it now rather
			 * than fill the packet from the next window (TOMCCAP 2008,
			 * section 4: uncork at the window's last partial packet). */
			*push = true;
			break;
		}
	}
	if (pos == 0)
		return 0;
	if (!full && !pps_sched_has_data(s))
		*push = true;
	*len = pos;
	s->stats.packets++;
	s->stats.packet_bytes += pos;
	return 1;
}

void
pps_sched_get_stats(const pps_sched_t *s, pps_sched_stats_t *out)
{
	*out = s->stats;
}
