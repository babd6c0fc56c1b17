/* SPDX-License-Identifier: MIT */
/* Shared inside codec/ only: the GOP model, the upscale filter, ADU framing. */
#ifndef PPS_CODEC_INTERNAL_H
#define PPS_CODEC_INTERNAL_H

#include "pps-codec.h"

/*
 * The GOP model, shared by the encoder (which forces x264's frame types from
 * it) and the decoder (which derives temporal layers from it).
 * S = mini-GOP frames, W = window frames (S divides W), G = IDR period (W divides G).
 */
typedef struct {
	int minigop_frames;
	int window_frames;
	int gop_frames;
	/* An IDR requested out of period restarts the period at origin; frames
	 * before it keep the previous origin. Both are multiples of W. */
	uint32_t origin;
	uint32_t previous_origin;
} pps_gop_t;

/* S for @temporal_layers: 4, 2 or 1 frames, halved until it divides
 * @window_frames. The one copy of the rule: the encoder's GOP and the
 * client's decoder parameters (pps_stream_params_from_wire) use it. */
int pps_gop_minigop_frames(int temporal_layers, int window_frames);
/* Chooses S from @temporal_layers so that S divides @window_frames; returns
 * the effective number of temporal layers. */
int pps_gop_init(pps_gop_t *gop, int temporal_layers, int window_frames, int gop_frames);
pps_adu_frame_type_t pps_gop_frame_type(const pps_gop_t *gop, uint32_t frame_index);
uint8_t pps_gop_temporal_layer(const pps_gop_t *gop, uint32_t frame_index);
/*
 * The frames whose same-layer ADUs frame @n needs (see pps-encoder.c for why a
 * B frame's references live in its next anchor's ADU). Returns the count.
 */
int pps_gop_ref_frames(const pps_gop_t *gop, uint32_t n, uint32_t refs[2]);

/*
 * Deterministic bilinear upscale in Q8 fixed point, separable, one plane.
 * Identical bits on every machine: integer arithmetic only.
 */
void pps_upscale_plane(const uint8_t *src, int src_stride, int src_width, int src_height,
                       uint8_t *dst, int dst_stride, int dst_width, int dst_height);

/*
 * ADU payload: [u8 flags | n][n x u32 little-endian size][pictures].
 * A picture ADU may carry x264 filler pictures before the real one; the real
 * picture is always the last. A filler-only ADU (PPS_CODEC_ADU_FILLERS_ONLY)
 * carries no frame: the fillers that close its frame's mini-GOP, so that
 * libavcodec outputs the mini-GOP's pictures (see pps-encoder.c).
 */
#define PPS_CODEC_ADU_FILLERS_ONLY     0x80u
#define PPS_CODEC_ADU_COUNT_MASK       0x7fu
#define PPS_CODEC_MAX_PICTURES_PER_ADU 16

#endif /* PPS_CODEC_INTERNAL_H */
