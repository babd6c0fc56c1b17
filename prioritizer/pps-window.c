/* SPDX-License-Identifier: MIT */
#include "pps-prioritizer.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct pps_window {
	atomic_int refcount;
	uint32_t id;
	int64_t first_capture_us;
	unsigned frames;
	size_t bytes;
	uint32_t first_adu_id;
	size_t n_adus;
	size_t adus_total;              /* announced: n_adus once closed, more while open */
	size_t missing_adu_bound_bytes; /* bound for each ADU still to come */
	bool open;               /* published early, ADUs still to come (pps_windower_set_early) */
	bool anchor_window;      /* published by pps_windower_set_anchor_windows' rule */
	size_t announced_bytes;  /* a relayed open window: its WINDOW_BEGIN's bytes */
	uint64_t *relayed_ids;   /* a relayed open window: a bit per announced ADU id held */
	pps_adu_t **adus;        /* send order; room for adus_total */
	int64_t *due_capture_us; /* per send position: pps_window_adu_due_capture_us */
};

uint32_t
pps_window_index_of_frame(uint32_t frame_index, unsigned window_frames)
{
	return (uint32_t)(((uint64_t)frame_index + window_frames - 1) / window_frames);
}

pps_window_t *
pps_window_ref(pps_window_t *window)
{
	atomic_fetch_add_explicit(&window->refcount, 1, memory_order_relaxed);
	return window;
}

void
pps_window_unref(pps_window_t *window)
{
	if (!window)
		return;
	if (atomic_fetch_sub_explicit(&window->refcount, 1, memory_order_acq_rel) != 1)
		return;
	for (size_t i = 0; i < window->n_adus; i++)
		pps_adu_unref(window->adus[i]);
	free(window->adus);
	free(window->due_capture_us);
	free(window->relayed_ids);
	free(window);
}

uint32_t
pps_window_id(const pps_window_t *window)
{
	return window->id;
}

int64_t
pps_window_first_capture_us(const pps_window_t *window)
{
	return window->first_capture_us;
}

unsigned
pps_window_frames(const pps_window_t *window)
{
	return window->frames;
}

size_t
pps_window_adu_count(const pps_window_t *window)
{
	return window->n_adus;
}

size_t
pps_window_adu_total(const pps_window_t *window)
{
	return window->adus_total;
}

bool
pps_window_is_open(const pps_window_t *window)
{
	return window->open;
}

bool
pps_window_anchors_to_come(const pps_window_t *window)
{
	/* A relayed window may still get any of its announced ADUs, base
	 * anchors among them (a window that crossed a slow first hop reaches
	 * the relay late, its base anchors within the publisher's grace). */
	return window->open && (window->anchor_window || window->relayed_ids);
}

const pps_adu_t *
pps_window_adu(const pps_window_t *window, size_t i)
{
	return i < window->n_adus ? window->adus[i] : NULL;
}

size_t
pps_window_bytes(const pps_window_t *window)
{
	return window->bytes;
}

size_t
pps_window_bytes_bound(const pps_window_t *window)
{
	size_t bound = window->bytes;

	if (window->open)
		bound += (window->adus_total - window->n_adus) * window->missing_adu_bound_bytes;
	if (window->open && window->announced_bytes > bound)
		bound = window->announced_bytes;
	return bound < PPS_WIRE_MAX_WINDOW_BYTES ? bound : PPS_WIRE_MAX_WINDOW_BYTES;
}

uint32_t
pps_window_first_adu_id(const pps_window_t *window)
{
	return window->first_adu_id;
}

int64_t
pps_window_adu_due_capture_us(const pps_window_t *window, size_t i)
{
	return i < window->n_adus ? window->due_capture_us[i] : INT64_MAX;
}

/*
 * Fills due_capture_us for the ADUs held: the minimum capture over the ADUs
 * of id >= each one's (ids grow in decode order). O(n log n) by a suffix
 * minimum over the ids, which are first_adu_id .. + adus_total - 1.
 */
static int
window_compute_due(pps_window_t *window)
{
	size_t n = window->n_adus;
	int64_t *by_id = malloc(window->adus_total * sizeof(*by_id));

	if (!by_id)
		return -ENOMEM;
	for (size_t k = 0; k < window->adus_total; k++)
		by_id[k] = INT64_MAX;
	for (size_t i = 0; i < n; i++) {
		const pps_adu_info_t *info = pps_adu_info(window->adus[i]);
		size_t k = info->id - window->first_adu_id;

		/* A producer whose ids are not contiguous: the earliest capture of
		 * the window for every ADU, the deadline of the whole window. */
		if (info->id < window->first_adu_id || k >= window->adus_total) {
			for (size_t j = 0; j < n; j++)
				window->due_capture_us[j] = window->first_capture_us;
			free(by_id);
			return 0;
		}
		by_id[k] = info->capture_us;
	}
	for (size_t k = window->adus_total - 1; k > 0; k--)
		if (by_id[k] < by_id[k - 1])
			by_id[k - 1] = by_id[k];
	for (size_t i = 0; i < n; i++)
		window->due_capture_us[i] =
		    by_id[pps_adu_info(window->adus[i])->id - window->first_adu_id];
	free(by_id);
	return 0;
}

static int
compare_adu_id(const void *a, const void *b)
{
	uint32_t x = pps_adu_info(*(pps_adu_t *const *)a)->id;
	uint32_t y = pps_adu_info(*(pps_adu_t *const *)b)->id;

	return x < y ? -1 : x > y;
}

pps_window_t *
pps_window_new_relayed(uint32_t id, int64_t first_capture_us, unsigned frames,
                       uint32_t first_adu_id, size_t adus_total, pps_adu_t **adus, size_t n,
                       pps_priority_policy_t policy)
{
	pps_window_t *window = NULL;
	int err = EINVAL;

	if (n > adus_total || adus_total > PPS_WINDOW_MAX_ADUS || frames == 0 ||
	    frames > PPS_WIRE_MAX_WINDOW_FRAMES || (unsigned)policy >= PPS_PRIORITY_POLICY_COUNT ||
	    (uint64_t)first_adu_id + adus_total > UINT32_MAX)
		goto err;
	qsort(adus, n, sizeof(*adus), compare_adu_id);
	for (size_t i = 0; i < n; i++) {
		uint32_t adu_id = pps_adu_info(adus[i])->id;

		if (adu_id < first_adu_id || adu_id - first_adu_id >= adus_total ||
		    (i > 0 && adu_id == pps_adu_info(adus[i - 1])->id))
			goto err;
	}
	err = ENOMEM;
	window = calloc(1, sizeof(*window));
	if (!window)
		goto err;
	window->adus = malloc((adus_total ? adus_total : 1) * sizeof(*window->adus));
	window->due_capture_us = malloc((adus_total ? adus_total : 1) * sizeof(int64_t));
	if (!window->adus || !window->due_capture_us)
		goto err;
	atomic_init(&window->refcount, 1);
	window->id = id;
	window->first_capture_us = first_capture_us;
	window->frames = frames;
	window->first_adu_id = first_adu_id;
	window->adus_total = adus_total;
	for (size_t i = 0; i < n; i++) {
		window->adus[i] = adus[i];
		window->bytes += pps_adu_size(adus[i]);
	}
	window->n_adus = n;
	/* The ADUs are in decode order (their ids): the send order is the
	 * publisher's, since the policy and the ADUs are. */
	if (pps_priority_sort(window->adus, n, policy) < 0 || window_compute_due(window) < 0) {
		window->n_adus = 0;
		goto err;
	}
	return window;

err:
	if (window) {
		free(window->adus);
		free(window->due_capture_us);
		free(window);
	}
	for (size_t i = 0; i < n; i++)
		pps_adu_unref(adus[i]);
	errno = err;
	return NULL;
}

pps_window_t *
pps_window_new_relayed_open(uint32_t id, int64_t first_capture_us, unsigned frames,
                            uint32_t first_adu_id, size_t adus_total, size_t announced_bytes)
{
	pps_window_t *window;

	if (adus_total == 0 || adus_total > PPS_WINDOW_MAX_ADUS || frames == 0 ||
	    frames > PPS_WIRE_MAX_WINDOW_FRAMES ||
	    (uint64_t)first_adu_id + adus_total > UINT32_MAX) {
		errno = EINVAL;
		return NULL;
	}
	window = calloc(1, sizeof(*window));
	if (!window)
		return NULL;
	window->adus = malloc(adus_total * sizeof(*window->adus));
	window->due_capture_us = malloc(adus_total * sizeof(int64_t));
	window->relayed_ids = calloc((adus_total + 63) / 64, sizeof(uint64_t));
	if (!window->adus || !window->due_capture_us || !window->relayed_ids) {
		free(window->adus);
		free(window->due_capture_us);
		free(window->relayed_ids);
		free(window);
		errno = ENOMEM;
		return NULL;
	}
	atomic_init(&window->refcount, 1);
	window->id = id;
	window->first_capture_us = first_capture_us;
	window->frames = frames;
	window->first_adu_id = first_adu_id;
	window->adus_total = adus_total;
	window->announced_bytes = announced_bytes < PPS_WIRE_MAX_WINDOW_BYTES
	                              ? announced_bytes
	                              : PPS_WIRE_MAX_WINDOW_BYTES;
	window->open = true;
	return window;
}

int
pps_window_relayed_add(pps_window_t *window, pps_adu_t *adu)
{
	const pps_adu_info_t *info = pps_adu_info(adu);
	size_t k = info->id - window->first_adu_id;
	int64_t due = info->capture_us;

	if (!window->relayed_ids || !window->open || info->id < window->first_adu_id ||
	    k >= window->adus_total || (window->relayed_ids[k / 64] >> (k % 64) & 1)) {
		pps_adu_unref(adu);
		return -EINVAL;
	}
	/* Due: the earliest capture over the ADUs held of id >= its own (later
	 * in decode order); it lowers the due of those before it. */
	for (size_t i = 0; i < window->n_adus; i++)
		if (pps_adu_info(window->adus[i])->id > info->id && window->due_capture_us[i] < due)
			due = window->due_capture_us[i];
	for (size_t i = 0; i < window->n_adus; i++)
		if (pps_adu_info(window->adus[i])->id < info->id && due < window->due_capture_us[i])
			window->due_capture_us[i] = due;
	window->relayed_ids[k / 64] |= 1ull << (k % 64);
	window->adus[window->n_adus] = adu;
	window->due_capture_us[window->n_adus] = due;
	window->n_adus++;
	window->bytes += pps_adu_size(adu);
	if (window->n_adus == window->adus_total)
		window->open = false;
	return 0;
}

void
pps_window_relayed_close(pps_window_t *window)
{
	window->open = false;
}

/* ---- windower ---------------------------------------------------------- */

struct pps_windower {
	unsigned window_frames;
	pps_priority_policy_t policy;
	pps_windower_window_cb window_cb;
	void *user;
	bool open; /* an open window exists */
	uint32_t open_id;
	bool closed_any;
	uint32_t last_closed_id;
	size_t n_adus;
	pps_adu_t *adus[PPS_WINDOW_MAX_ADUS]; /* decode order */
	/* Early publication (pps_windower_set_early): 0 = off. */
	unsigned early_quality_layers;
	size_t early_adu_bound_bytes;
	pps_windower_grow_cb grow_cb;
	pps_window_t *published; /* published early and still open: our reference */
	/* Anchor windows (pps_windower_set_anchor_windows): 0 = off. */
	unsigned anchor_frame_adus;
};

pps_windower_t *
pps_windower_new(unsigned window_frames, pps_priority_policy_t policy,
                 pps_windower_window_cb window_cb, void *user)
{
	pps_windower_t *w;

	if (window_frames < 1 || !window_cb) {
		errno = EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		errno = ENOMEM;
		return NULL;
	}
	w->window_frames = window_frames;
	w->policy = policy;
	w->window_cb = window_cb;
	w->user = user;
	return w;
}

void
pps_windower_free(pps_windower_t *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n_adus; i++)
		pps_adu_unref(w->adus[i]);
	pps_window_unref(w->published);
	free(w);
}

int
pps_windower_set_early(pps_windower_t *w, unsigned quality_layers, size_t adu_bound_bytes,
                       pps_windower_grow_cb grow_cb)
{
	/* The ADUs still to come must be the tail of the send order: true for
	 * the last frame's one enhancement layer, or for every enhancement layer
	 * of a window of one frame (class keys grow with the quality layer when
	 * there is one temporal layer, under every policy). */
	if (quality_layers < 2 || quality_layers > PPS_ADU_MAX_QUALITY_LAYERS ||
	    (quality_layers > 2 && w->window_frames > 1) || adu_bound_bytes == 0 || !grow_cb)
		return -EINVAL;
	w->early_quality_layers = quality_layers;
	w->early_adu_bound_bytes = adu_bound_bytes;
	w->grow_cb = grow_cb;
	return 0;
}

int
pps_windower_set_anchor_windows(pps_windower_t *w, unsigned adus_per_frame, size_t adu_bound_bytes,
                                pps_windower_grow_cb grow_cb)
{
	if (w->window_frames < 2 || adus_per_frame == 0 || adu_bound_bytes == 0 || !grow_cb ||
	    (size_t)adus_per_frame * w->window_frames > PPS_WINDOW_MAX_ADUS)
		return -EINVAL;
	w->anchor_frame_adus = adus_per_frame;
	w->early_adu_bound_bytes = adu_bound_bytes;
	w->grow_cb = grow_cb;
	return 0;
}

/* The published window gets no more ADUs: what it lacks will never come. */
static void
close_published(pps_windower_t *w)
{
	pps_window_t *window = w->published;

	if (!window)
		return;
	w->published = NULL;
	if (window->open) {
		window->open = false;
		w->grow_cb(window, w->user);
	}
	pps_window_unref(window);
}

/* Appends an ADU of the published window (the tail of its send order). */
static int
append_published(pps_windower_t *w, pps_adu_t *adu)
{
	pps_window_t *window = w->published;
	const pps_adu_info_t *info = pps_adu_info(adu);

	if (window->n_adus == window->adus_total ||
	    (info->quality_layer == 0 && !window->anchor_window) ||
	    (window->anchor_window && info->temporal_layer != 0 &&
	     info->frame_type != PPS_ADU_FRAME_PD)) {
		/* Not what was announced: the producer broke its promise. */
		pps_adu_unref(adu);
		close_published(w);
		return -EPROTO;
	}
	window->adus[window->n_adus] = adu;
	/* It comes later in decode order than every ADU held. */
	window->due_capture_us[window->n_adus] = info->capture_us;
	for (size_t i = 0; i < window->n_adus; i++)
		if (info->capture_us < window->due_capture_us[i])
			window->due_capture_us[i] = info->capture_us;
	window->n_adus++;
	window->bytes += pps_adu_size(adu);
	if (window->n_adus == window->adus_total) {
		window->open = false;
		w->published = NULL;
		w->grow_cb(window, w->user);
		pps_window_unref(window);
		return 0;
	}
	w->grow_cb(window, w->user);
	return 0;
}

/* Closes the open window; @to_come more ADUs are announced and will follow
 * (through append_published) if > 0; @anchor_window: published as an anchor
 * window (its one ADU is its first frame's base). */
static int
close_open_window(pps_windower_t *w, size_t to_come, bool anchor_window)
{
	pps_window_t *window;
	uint32_t first_frame = UINT32_MAX;
	uint64_t seen_frames[2] = {0, 0}; /* bitmap over frame offsets in the window */
	int ret;

	if (!w->open)
		return 0;
	window = calloc(1, sizeof(*window));
	if (!window)
		return -ENOMEM;
	window->adus = malloc((w->n_adus + to_come) * sizeof(*window->adus));
	window->due_capture_us = malloc((w->n_adus + to_come) * sizeof(*window->due_capture_us));
	if (!window->adus || !window->due_capture_us) {
		free(window->adus);
		free(window->due_capture_us);
		free(window);
		return -ENOMEM;
	}
	atomic_init(&window->refcount, 1);
	window->id = w->open_id;
	window->first_capture_us = INT64_MAX;
	window->first_adu_id = pps_adu_info(w->adus[0])->id; /* added in decode order */
	for (size_t i = 0; i < w->n_adus; i++) {
		const pps_adu_info_t *info = pps_adu_info(w->adus[i]);
		/* Offset of the frame inside its window: 0 .. window_frames-1. */
		uint32_t offset = (info->frame_index + w->window_frames - 1) % w->window_frames;

		if (info->frame_index < first_frame)
			first_frame = info->frame_index;
		if (info->capture_us < window->first_capture_us)
			window->first_capture_us = info->capture_us;
		if (offset < 128 && !(seen_frames[offset / 64] >> (offset % 64) & 1)) {
			seen_frames[offset / 64] |= 1ull << (offset % 64);
			window->frames++;
		}
		window->bytes += pps_adu_size(w->adus[i]);
		window->adus[i] = w->adus[i];
	}
	window->n_adus = w->n_adus;
	window->adus_total = w->n_adus + to_come;
	window->open = to_come > 0;
	window->missing_adu_bound_bytes = w->early_adu_bound_bytes;
	if (anchor_window) {
		window->anchor_window = true;
		window->frames = w->window_frames;
	}
	ret = pps_priority_sort(window->adus, window->n_adus, w->policy);
	if (ret == 0)
		ret = window_compute_due(window);
	if (ret < 0) {
		free(window->adus);
		free(window->due_capture_us);
		free(window);
		return ret;
	}
	w->n_adus = 0;
	w->open = false;
	w->closed_any = true;
	w->last_closed_id = window->id;
	if (window->open)
		w->published = pps_window_ref(window);
	w->window_cb(window, w->user);
	return 0;
}

/* The last frame of window @id: frame 0 for window 0, else id * W. */
static uint64_t
last_frame_of(const pps_windower_t *w, uint32_t id)
{
	return (uint64_t)id * w->window_frames;
}

int
pps_windower_add(pps_windower_t *w, pps_adu_t *adu)
{
	const pps_adu_info_t *info = pps_adu_info(adu);
	uint32_t id = pps_window_index_of_frame(info->frame_index, w->window_frames);
	int ret;

	if (w->published && id == w->published->id)
		return append_published(w, adu);
	if (w->published && id > w->published->id)
		close_published(w);
	if ((w->open && id < w->open_id) || (w->closed_any && id <= w->last_closed_id)) {
		pps_adu_unref(adu);
		return -ESTALE;
	}
	if (w->open && id > w->open_id) {
		ret = close_open_window(w, 0, false);
		if (ret < 0) {
			pps_adu_unref(adu);
			return ret;
		}
	}
	if (!w->open) {
		w->open = true;
		w->open_id = id;
	}
	if (w->n_adus == PPS_WINDOW_MAX_ADUS) {
		pps_adu_unref(adu);
		return -ENOSPC;
	}
	w->adus[w->n_adus++] = adu;
	/* Early publication: the last frame's base is in, its enhancement
	 * layers are still being encoded. */
	if (w->early_quality_layers && info->quality_layer == 0 &&
	    info->frame_index == last_frame_of(w, id))
		return close_open_window(w, w->early_quality_layers - 1, false);
	/* An anchor window: its first frame's base came first. */
	if (w->anchor_frame_adus && w->n_adus == 1 && id > 0 && info->quality_layer == 0 &&
	    info->temporal_layer == 0 &&
	    last_frame_of(w, id) - info->frame_index + 1 == w->window_frames)
		return close_open_window(w, (size_t)w->anchor_frame_adus * w->window_frames - 1,
		                         true);
	return 0;
}

int
pps_windower_frames_done(pps_windower_t *w, uint32_t last_frame)
{
	if (w->published && last_frame_of(w, w->published->id) <= last_frame)
		close_published(w);
	/* The open window's last frame is id * W; it is done once that is. */
	if (w->open && last_frame_of(w, w->open_id) <= last_frame)
		return close_open_window(w, 0, false);
	return 0;
}

int
pps_windower_flush(pps_windower_t *w)
{
	close_published(w);
	return close_open_window(w, 0, false);
}
