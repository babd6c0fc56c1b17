/* SPDX-License-Identifier: MIT */
/*
 * A synthetic layered ADU source, for tests only: the GOP structure,
 * dependencies and sizes of codec/'s encoder without running one, so the
 * prioritizer's tests feed windows without x264. Not part of the
 * prioritizer's library (prioritizer_synth_dep links it).
 */
#ifndef PPS_SYNTH_H
#define PPS_SYNTH_H

#include <stdint.h>

#include "pps-adu.h"

typedef struct {
	unsigned fps;
	unsigned window_frames;
	unsigned temporal_layers; /* 1..3 */
	unsigned quality_layers;  /* 1..3 */
	unsigned gop_frames;      /* IDR period, rounded up to whole windows */
	uint32_t seed;
	double size_scale; /* 1.0 = about 1.5 Mbit/s at 30 frames/s for 2 layers */
} pps_synth_params_t;

typedef void (*pps_synth_adu_cb)(pps_adu_t *adu, void *user);

typedef struct pps_synth pps_synth_t;

pps_synth_t *pps_synth_new(const pps_synth_params_t *params);
void pps_synth_free(pps_synth_t *synth);

/*
 * Feeds one captured frame. Emits, in decode order, the ADUs that an encoder
 * with the GOP of codec/ would emit after this frame (an anchor releases the
 * B frames before it); @adu_cb takes each reference. Returns the highest
 * frame index all of whose ADUs have now been emitted, or -1 if none yet.
 */
int64_t pps_synth_frame(pps_synth_t *synth, uint32_t frame_index, int64_t capture_us,
                        pps_synth_adu_cb adu_cb, void *user);

#endif /* PPS_SYNTH_H */
