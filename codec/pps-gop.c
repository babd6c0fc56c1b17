/* SPDX-License-Identifier: MIT */
#include "pps-codec-internal.h"

int
pps_gop_minigop_frames(int temporal_layers, int window_frames)
{
	int s = temporal_layers >= 3 ? 4 : temporal_layers == 2 ? 2 : 1;

	/* The mini-GOP must nest in the window (decode order never crosses a
	 * window); fall back to fewer B frames when it does not divide W. */
	while (s > 1 && window_frames % s != 0)
		s /= 2;
	return s;
}

int
pps_gop_init(pps_gop_t *gop, int temporal_layers, int window_frames, int gop_frames)
{
	int s = pps_gop_minigop_frames(temporal_layers, window_frames);

	gop->minigop_frames = s;
	gop->window_frames = window_frames;
	if (gop_frames < window_frames)
		gop_frames = window_frames;
	gop->gop_frames = (gop_frames + window_frames - 1) / window_frames * window_frames;
	gop->origin = gop->previous_origin = 0;
	gop->anchors_only = false;
	gop->disposable_p = false;
	return s == 4 ? 3 : s == 2 ? 2 : 1;
}

pps_adu_frame_type_t
pps_gop_frame_type(const pps_gop_t *gop, uint32_t n)
{
	uint32_t s = (uint32_t)gop->minigop_frames;
	uint32_t g = (uint32_t)gop->gop_frames;
	uint32_t origin = n >= gop->origin ? gop->origin : gop->previous_origin;
	uint32_t anchor;

	if ((n - origin) % g == 0)
		return PPS_ADU_FRAME_IDR;
	/* Disposable P frames close their mini-GOP (the window's last frame):
	 * the anchor before them in the window goes out first, and what a late
	 * window loses first is its tail, the disposable frame. */
	if (gop->disposable_p && s > 1 && !gop->anchors_only) {
		/* Every picture is a reference to x264, so frame_num counts the
		 * pictures since the IDR (modulo 2^k, k >= 4). A missing picture
		 * of frame_num 0 leaves libavcodec (picture order from frame_num,
		 * as x264 writes it without B frames) ordering every later one
		 * before the ones it already output, and it shows none of them:
		 * that picture stays an anchor. */
		uint32_t idr = origin + (n - origin) / g * g;

		return n % s == 0 && (n - idr) % 16 != 0 ? PPS_ADU_FRAME_PD : PPS_ADU_FRAME_P;
	}
	if (n % s == 0 || gop->anchors_only)
		return PPS_ADU_FRAME_P;
	/* Closed GOP: the frames before a forced IDR become P so nothing
	 * references across it. */
	anchor = (n / s + 1) * s;
	if (anchor >= gop->origin && n < gop->origin)
		origin = gop->origin;
	if ((anchor - origin) % g == 0)
		return PPS_ADU_FRAME_P;
	if (s == 4 && n % s == 2)
		return PPS_ADU_FRAME_BREF;
	return PPS_ADU_FRAME_B;
}

uint8_t
pps_gop_temporal_layer(const pps_gop_t *gop, uint32_t n)
{
	switch (pps_gop_frame_type(gop, n)) {
	case PPS_ADU_FRAME_IDR:
	case PPS_ADU_FRAME_P:
		return 0;
	case PPS_ADU_FRAME_BREF:
		return 1;
	default:
		return gop->minigop_frames == 4 ? 2 : 1;
	}
}

int
pps_gop_ref_frames(const pps_gop_t *gop, uint32_t n, uint32_t refs[2])
{
	uint32_t s = (uint32_t)gop->minigop_frames;
	uint32_t next_anchor = (n / s + 1) * s;

	switch (pps_gop_frame_type(gop, n)) {
	case PPS_ADU_FRAME_IDR:
		return 0;
	case PPS_ADU_FRAME_P:
		/* The previous I/P picture (n - S, or n - 1 in a forced-P run). */
		refs[0] = n - 1;
		while (pps_gop_frame_type(gop, refs[0]) >= PPS_ADU_FRAME_BREF)
			refs[0]--;
		return 1;
	case PPS_ADU_FRAME_BREF:
		refs[0] = next_anchor;
		return 1;
	default:
		refs[0] = next_anchor;
		if (s == 4) {
			refs[1] = n / s * s + 2; /* the BREF of this mini-GOP */
			return 2;
		}
		return 1;
	}
}
