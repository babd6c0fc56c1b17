/* SPDX-License-Identifier: MIT */
/*
 * A synthetic layered stream with the GOP structure and dependencies that
 * codec/ produces, and sizes of the same order: for tests and benchmarks of
 * the prioritizer and the transport without running an encoder (pps-synth.h).
 *
 * GOP: mini-GOPs of M+1 frames (M = 0, 1 or 3 B frames, the largest the
 * temporal layers allow with M+1 dividing the window), anchors (P) at frames
 * = 0 mod (M+1), an IDR every G frames (G a multiple of the window), and the
 * M frames before an IDR coded as P so that nothing crosses it (closed GOP).
 */
#include "pps-synth.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	bool used;
	uint32_t frame_index;
	int64_t capture_us;
} pending_t;

struct pps_synth {
	pps_synth_params_t p;
	unsigned mini_gop; /* M + 1 */
	unsigned gop;
	uint32_t next_id;
	uint32_t decode_order[PPS_ADU_MAX_QUALITY_LAYERS];
	uint32_t anchor_id[PPS_ADU_MAX_QUALITY_LAYERS]; /* last anchor, per quality layer */
	bool have_anchor;
	pending_t pending[4]; /* B frames waiting for their anchor */
	uint32_t rng;
	int64_t done_through;
};

pps_synth_t *
pps_synth_new(const pps_synth_params_t *params)
{
	pps_synth_t *s;
	unsigned m;

	if (params->window_frames < 1 || params->temporal_layers < 1 ||
	    params->temporal_layers > 3 || params->quality_layers < 1 ||
	    params->quality_layers > 3 || params->fps < 1) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->p = *params;
	if (s->p.size_scale <= 0)
		s->p.size_scale = 1.0;
	m = params->temporal_layers == 3 ? 3 : params->temporal_layers == 2 ? 1 : 0;
	while (m > 0 && params->window_frames % (m + 1) != 0)
		m = m == 3 ? 1 : 0;
	s->mini_gop = m + 1;
	s->gop =
	    params->gop_frames < params->window_frames ? params->window_frames : params->gop_frames;
	s->gop =
	    (s->gop + params->window_frames - 1) / params->window_frames * params->window_frames;
	s->rng = params->seed ? params->seed : 0x9e3779b9u;
	s->done_through = -1;
	return s;
}

void
pps_synth_free(pps_synth_t *s)
{
	free(s);
}

static uint32_t
next_random(pps_synth_t *s)
{
	/* xorshift32: deterministic per seed, good enough for sizes. */
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 17;
	s->rng ^= s->rng << 5;
	return s->rng;
}

static size_t
adu_size(pps_synth_t *s, pps_adu_frame_type_t type, unsigned quality)
{
	/* Bytes at 640x480, 30 frames/s, for the base; enhancement 1.5x. */
	static const double base[] = {14000, 3200, 1600, 700};
	double size = base[type] * (quality ? 1.5 : 1.0) * s->p.size_scale;
	double jitter = 0.7 + 0.6 * (next_random(s) % 1000) / 1000.0;
	size_t bytes = (size_t)(size * jitter);

	return bytes < 16 ? 16 : bytes;
}

/*
 * Emits one frame in every quality layer. @refs[r][q] is the id of reference
 * picture r in quality layer q; an enhancement also depends on the layer
 * below it of the same frame. The new ids are written to @ids_out.
 */
static void
emit(pps_synth_t *s, uint32_t frame, int64_t capture_us, pps_adu_frame_type_t type,
     unsigned temporal, const uint32_t *const refs[], unsigned n_refs, uint32_t *ids_out,
     pps_synth_adu_cb cb, void *user)
{
	for (unsigned q = 0; q < s->p.quality_layers; q++) {
		pps_adu_info_t info;
		size_t size = adu_size(s, type, q);
		uint8_t *data = malloc(size);
		pps_adu_t *adu;

		if (!data)
			continue;
		memset(&info, 0, sizeof(info));
		info.id = s->next_id++;
		/* A payload derived from the id, so tests can check the bytes. */
		for (size_t i = 0; i < size; i++)
			data[i] = (uint8_t)(info.id * 31 + i);
		info.frame_index = frame;
		info.capture_us = capture_us;
		info.decode_order = s->decode_order[q]++;
		info.frame_type = (uint8_t)type;
		info.temporal_layer = (uint8_t)temporal;
		info.quality_layer = (uint8_t)q;
		for (unsigned r = 0; r < n_refs; r++)
			info.deps[info.dep_count++] = refs[r][q];
		if (q > 0)
			info.deps[info.dep_count++] = ids_out[q - 1];
		ids_out[q] = info.id;
		adu = pps_adu_new_take(&info, data, size);
		if (!adu) {
			free(data);
			continue;
		}
		cb(adu, user);
	}
}

int64_t
pps_synth_frame(pps_synth_t *s, uint32_t frame, int64_t capture_us, pps_synth_adu_cb cb, void *user)
{
	unsigned m = s->mini_gop - 1;
	bool idr = frame % s->gop == 0 || !s->have_anchor;
	/* The M frames before an IDR are P frames: nothing crosses the IDR. */
	bool before_idr = m > 0 && frame % s->mini_gop != 0 &&
	                  (frame / s->mini_gop + 1) * s->mini_gop % s->gop == 0;
	uint32_t prev[PPS_ADU_MAX_QUALITY_LAYERS], ids[PPS_ADU_MAX_QUALITY_LAYERS];
	uint32_t bref[PPS_ADU_MAX_QUALITY_LAYERS], b_ids[PPS_ADU_MAX_QUALITY_LAYERS];

	if (!idr && !before_idr && frame % s->mini_gop != 0) {
		pending_t *p = &s->pending[frame % s->mini_gop - 1];

		p->used = true;
		p->frame_index = frame;
		p->capture_us = capture_us;
		return s->done_through;
	}
	memcpy(prev, s->anchor_id, sizeof(prev));
	if (idr) {
		emit(s, frame, capture_us, PPS_ADU_FRAME_IDR, 0, NULL, 0, ids, cb, user);
	} else {
		const uint32_t *refs[1] = {prev};

		emit(s, frame, capture_us, PPS_ADU_FRAME_P, 0, refs, 1, ids, cb, user);
	}
	memcpy(s->anchor_id, ids, sizeof(ids));
	s->have_anchor = true;

	/* This anchor releases the B frames of its mini-GOP, in decode order. */
	if (m == 1 && s->pending[0].used) {
		const uint32_t *refs[2] = {prev, ids};

		emit(s, s->pending[0].frame_index, s->pending[0].capture_us, PPS_ADU_FRAME_B, 1,
		     refs, 2, b_ids, cb, user);
	} else if (m == 3 && s->pending[1].used) {
		const uint32_t *bref_refs[2] = {prev, ids};

		emit(s, s->pending[1].frame_index, s->pending[1].capture_us, PPS_ADU_FRAME_BREF, 1,
		     bref_refs, 2, bref, cb, user);
		if (s->pending[0].used) {
			const uint32_t *refs[2] = {prev, bref};

			emit(s, s->pending[0].frame_index, s->pending[0].capture_us,
			     PPS_ADU_FRAME_B, 2, refs, 2, b_ids, cb, user);
		}
		if (s->pending[2].used) {
			const uint32_t *refs[2] = {bref, ids};

			emit(s, s->pending[2].frame_index, s->pending[2].capture_us,
			     PPS_ADU_FRAME_B, 2, refs, 2, b_ids, cb, user);
		}
	}
	/* Pending frames were before this anchor; they are released or, if
	 * the capture skipped their anchor, lost. */
	memset(s->pending, 0, sizeof(s->pending));
	s->done_through = frame;
	return s->done_through;
}
