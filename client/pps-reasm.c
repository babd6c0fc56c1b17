/* SPDX-License-Identifier: MIT */
/*
 * Reassembly of one window at a time. Nothing the server says is trusted:
 * every length is checked against what WINDOW_BEGIN announced and against
 * hard limits before memory is allocated, so a broken or hostile server costs
 * at most PPS_REASM_MAX_WINDOW_BYTES of buffers, then a clear error.
 */
#include "pps-client-internal.h"
#include "pps-prioritizer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The client takes every ADU the server puts in one window. */
_Static_assert(PPS_REASM_MAX_ADUS >= PPS_WINDOW_MAX_ADUS,
               "the reassembler holds fewer ADUs than a window may have");

typedef struct {
	pps_adu_info_t info;
	uint32_t total_bytes;
	uint32_t received;
	uint8_t *data;
	bool taken; /* handed out early by pps_reasm_take_next */
} partial_adu_t;

struct pps_reasm {
	unsigned window_frames;
	bool open;
	int64_t last_window; /* -1 before the first */
	pps_reasm_window_t window;
	partial_adu_t adus[PPS_REASM_MAX_ADUS];
	size_t n_adus;
	uint64_t allocated; /* bytes of ADU buffers in this window */
	bool ready;         /* a window is complete and waits for pps_reasm_take */
};

pps_reasm_t *
pps_reasm_new(unsigned window_frames)
{
	pps_reasm_t *r;

	if (window_frames < 1) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	r->window_frames = window_frames;
	r->last_window = -1;
	return r;
}

static void
clear_adus(pps_reasm_t *r)
{
	for (size_t i = 0; i < r->n_adus; i++)
		free(r->adus[i].data);
	r->n_adus = 0;
	r->allocated = 0;
}

void
pps_reasm_free(pps_reasm_t *r)
{
	if (!r)
		return;
	clear_adus(r);
	free(r);
}

bool
pps_reasm_in_window(const pps_reasm_t *r)
{
	return r->open;
}

int64_t
pps_reasm_last_window(const pps_reasm_t *r)
{
	return r->last_window;
}

static int error(char *err, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
error(char *err, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, size, fmt, ap);
	va_end(ap);
	return -EPROTO;
}

static int
begin(pps_reasm_t *r, const pps_wire_window_begin_t *b, char *err, size_t err_size)
{
	if (r->open)
		return error(err, err_size, "WINDOW_BEGIN %u inside window %u", b->window_id,
		             r->window.window_id);
	if ((int64_t)b->window_id <= r->last_window)
		return error(err, err_size, "WINDOW_BEGIN %u after window %lld (ids must increase)",
		             b->window_id, (long long)r->last_window);
	if (b->adus > PPS_REASM_MAX_ADUS || b->bytes > PPS_REASM_MAX_WINDOW_BYTES)
		return error(err, err_size,
		             "WINDOW_BEGIN %u: %u ADUs / %u bytes over the limits (%u / %u)",
		             b->window_id, b->adus, b->bytes, PPS_REASM_MAX_ADUS,
		             PPS_REASM_MAX_WINDOW_BYTES);
	clear_adus(r);
	memset(&r->window, 0, sizeof(r->window));
	r->window.window_id = b->window_id;
	r->window.first_capture_us = b->first_capture_us;
	r->window.deadline_us = b->deadline_us;
	r->window.frames = b->frames;
	r->window.adus_total = b->adus;
	r->window.bytes_total = b->bytes;
	r->window.first_adu_id = b->first_adu_id;
	r->window.begun = true;
	r->open = true;
	return 0;
}

static partial_adu_t *
find_adu(pps_reasm_t *r, uint32_t id)
{
	/* Fragments of one ADU come together: the last one is the likely hit.
	 * A window holds a few dozen ADUs, so a scan is cheap. */
	for (size_t i = r->n_adus; i-- > 0;) {
		if (r->adus[i].info.id == id)
			return &r->adus[i];
	}
	return NULL;
}

static int
fragment(pps_reasm_t *r, const pps_wire_adu_fragment_t *f, char *err, size_t err_size)
{
	partial_adu_t *a;

	if (!r->open || f->window_id != r->window.window_id)
		return error(err, err_size, "ADU_FRAGMENT of window %u outside its window",
		             f->window_id);
	/* Frame numbers are bound to window ids (PROTOCOL.md), so a frame
	 * number cannot jump further than the window ids do. */
	if (pps_window_index_of_frame(f->frame_index, r->window_frames) != f->window_id)
		return error(err, err_size, "ADU %u: frame %u is not in window %u (%u frames each)",
		             f->adu_id, f->frame_index, f->window_id, r->window_frames);
	a = find_adu(r, f->adu_id);
	if (!a) {
		if (f->offset != 0)
			return error(err, err_size, "ADU %u: first fragment at offset %u",
			             f->adu_id, f->offset);
		if (f->adu_id - r->window.first_adu_id >= r->window.adus_total)
			return error(err, err_size, "ADU %u outside window %u's ids %u..%u",
			             f->adu_id, r->window.window_id, r->window.first_adu_id,
			             r->window.first_adu_id + r->window.adus_total - 1);
		if (r->n_adus == r->window.adus_total || r->n_adus == PPS_REASM_MAX_ADUS)
			return error(err, err_size, "window %u: more ADUs than the %u announced",
			             r->window.window_id, r->window.adus_total);
		if (f->total_bytes > r->window.bytes_total ||
		    r->allocated + f->total_bytes > r->window.bytes_total)
			return error(
			    err, err_size, "ADU %u: %u bytes over the %u bytes window %u announced",
			    f->adu_id, f->total_bytes, r->window.bytes_total, r->window.window_id);
		a = &r->adus[r->n_adus];
		memset(a, 0, sizeof(*a));
		a->data = malloc(f->total_bytes);
		if (!a->data)
			return error(err, err_size, "out of memory for a %u byte ADU",
			             f->total_bytes);
		r->n_adus++;
		r->allocated += f->total_bytes;
		a->total_bytes = f->total_bytes;
		pps_adu_info_from_wire(f, &a->info);
	} else if (f->total_bytes != a->total_bytes || f->offset != a->received ||
	           f->frame_index != a->info.frame_index) {
		return error(err, err_size,
		             "ADU %u: fragment at offset %u of %u bytes does not continue it "
		             "(%u of %u received)",
		             f->adu_id, f->offset, f->total_bytes, a->received, a->total_bytes);
	}
	memcpy(a->data + f->offset, f->payload, f->payload_len);
	a->received += f->payload_len;
	r->window.bytes_received += f->payload_len;
	if (a->received == a->total_bytes)
		r->window.adus_received++;
	return 0;
}

static int
end(pps_reasm_t *r, const pps_wire_window_end_t *e, char *err, size_t err_size)
{
	if ((e->flags & PPS_WIRE_WINDOW_END_DROPPED) &&
	    !(r->open && e->window_id == r->window.window_id)) {
		/* A window the sender never began. */
		if (r->open)
			return error(err, err_size, "dropped WINDOW_END %u inside window %u",
			             e->window_id, r->window.window_id);
		if ((int64_t)e->window_id <= r->last_window)
			return error(err, err_size, "WINDOW_END %u after window %lld", e->window_id,
			             (long long)r->last_window);
		clear_adus(r);
		memset(&r->window, 0, sizeof(r->window));
		r->window.window_id = e->window_id;
		r->window.dropped = true;
		r->window.adus_dropped = e->adus_dropped;
	} else {
		if (!r->open || e->window_id != r->window.window_id)
			return error(err, err_size, "WINDOW_END %u without its WINDOW_BEGIN",
			             e->window_id);
		/* Begun, but nothing whole was sent before the deadline. */
		r->window.dropped = (e->flags & PPS_WIRE_WINDOW_END_DROPPED) != 0;
		r->window.adus_sent = e->adus_sent;
		r->window.adus_dropped = e->adus_dropped;
	}
	r->open = false;
	r->last_window = e->window_id;
	r->ready = true;
	return 0;
}

int
pps_reasm_record(pps_reasm_t *r, const pps_wire_record_t *record, char *err, size_t err_size)
{
	switch (record->kind) {
	case PPS_WIRE_WINDOW_BEGIN:
		return begin(r, &record->u.window_begin, err, err_size);
	case PPS_WIRE_ADU_FRAGMENT:
		return fragment(r, &record->u.adu_fragment, err, err_size);
	case PPS_WIRE_WINDOW_END:
		return end(r, &record->u.window_end, err, err_size);
	default:
		return error(err, err_size, "%s is not a window record",
		             pps_wire_kind_name(record->kind));
	}
}

pps_adu_t *
pps_reasm_take_next(pps_reasm_t *r, uint32_t id)
{
	partial_adu_t *a;
	pps_adu_t *adu;

	if (!r->open)
		return NULL;
	a = find_adu(r, id);
	if (!a || a->taken || a->received != a->total_bytes)
		return NULL;
	adu = pps_adu_new_take(&a->info, a->data, a->total_bytes);
	if (adu) {
		a->data = NULL;
		a->taken = true;
	}
	return adu;
}

static int
compare_id(const void *a, const void *b)
{
	uint32_t x = pps_adu_info(*(pps_adu_t *const *)a)->id;
	uint32_t y = pps_adu_info(*(pps_adu_t *const *)b)->id;

	return (x > y) - (x < y);
}

void
pps_reasm_take(pps_reasm_t *r, pps_reasm_window_t *window, pps_adu_t ***adus, size_t *n_adus)
{
	size_t n = 0;

	*window = r->window;
	*adus = NULL;
	*n_adus = 0;
	if (!r->ready)
		return;
	r->ready = false;
	if (r->n_adus)
		*adus = calloc(r->n_adus, sizeof(**adus));
	for (size_t i = 0; i < r->n_adus && *adus; i++) {
		partial_adu_t *a = &r->adus[i];

		/* A partly received ADU (the sender hit the deadline inside it) is
		 * useless to the decoder. */
		if (a->received != a->total_bytes || a->taken)
			continue;
		(*adus)[n] = pps_adu_new_take(&a->info, a->data, a->total_bytes);
		if ((*adus)[n]) {
			a->data = NULL;
			n++;
		}
	}
	/* They arrived in priority order; the decoder wants decode order. */
	if (n > 1)
		qsort(*adus, n, sizeof(**adus), compare_id);
	*n_adus = n;
	clear_adus(r);
}
