/* SPDX-License-Identifier: MIT */
/* Helpers shared by the codec tests and pps-codec-bench (not in the library). */
#ifndef PPS_CODEC_TESTUTIL_H
#define PPS_CODEC_TESTUTIL_H

#include "pps-codec.h"

/* Deterministic moving, textured content for frame @index, timecode stamped. */
void pps_testutil_generate(pps_frame_t *frame, uint32_t index, int64_t capture_us);
/* Luma PSNR in dB (capped at 99) and mean luma SSIM (8x8 windows, step 4). */
double pps_testutil_psnr_y(const pps_frame_t *a, const pps_frame_t *b);
double pps_testutil_ssim_y(const pps_frame_t *a, const pps_frame_t *b);

#endif
