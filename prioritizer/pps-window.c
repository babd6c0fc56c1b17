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
	pps_adu_t **adus; /* send order */
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

uint32_t
pps_window_first_adu_id(const pps_window_t *window)
{
	return window->first_adu_id;
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
	free(w);
}

static int
close_open_window(pps_windower_t *w)
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
	window->adus = malloc(w->n_adus * sizeof(*window->adus));
	if (!window->adus) {
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
	ret = pps_priority_sort(window->adus, window->n_adus, w->policy);
	if (ret < 0) {
		free(window->adus);
		free(window);
		return ret;
	}
	w->n_adus = 0;
	w->open = false;
	w->closed_any = true;
	w->last_closed_id = window->id;
	w->window_cb(window, w->user);
	return 0;
}

int
pps_windower_add(pps_windower_t *w, pps_adu_t *adu)
{
	uint32_t id = pps_window_index_of_frame(pps_adu_info(adu)->frame_index, w->window_frames);
	int ret;

	if ((w->open && id < w->open_id) || (w->closed_any && id <= w->last_closed_id)) {
		pps_adu_unref(adu);
		return -ESTALE;
	}
	if (w->open && id > w->open_id) {
		ret = close_open_window(w);
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
	return 0;
}

int
pps_windower_frames_done(pps_windower_t *w, uint32_t last_frame)
{
	/* The open window's last frame is id * W; it is done once that is. */
	if (w->open && (uint64_t)w->open_id * w->window_frames <= last_frame)
		return close_open_window(w);
	return 0;
}

int
pps_windower_flush(pps_windower_t *w)
{
	return close_open_window(w);
}
