/* SPDX-License-Identifier: MIT */
/*
 * The upscale filter of the quality layers. The enhancement residual is coded
 * against this prediction, so encoder and decoder must compute it bit for bit
 * alike: fixed-point integer arithmetic only, no SIMD variants.
 */
#include "pps-codec-internal.h"

#include <stdlib.h>

/* Source position of destination sample i, in Q8, pixel centres aligned. */
static void
build_taps(int src_len, int dst_len, int *index, int *frac)
{
	for (int i = 0; i < dst_len; i++) {
		int64_t pos = ((int64_t)(2 * i + 1) * src_len * 256) / (2 * dst_len) - 128;

		if (pos < 0)
			pos = 0;
		if (pos > (int64_t)(src_len - 1) * 256)
			pos = (int64_t)(src_len - 1) * 256;
		index[i] = (int)(pos >> 8);
		frac[i] = (int)(pos & 255);
		if (index[i] >= src_len - 1) { /* last sample: no right neighbour */
			index[i] = src_len - 1;
			frac[i] = 0;
		}
	}
}

void
pps_upscale_plane(const uint8_t *src, int src_stride, int src_width, int src_height, uint8_t *dst,
                  int dst_stride, int dst_width, int dst_height)
{
	int *xi = malloc(sizeof(int) * (size_t)(2 * dst_width + 2 * dst_height));
	uint16_t *rows = malloc(sizeof(uint16_t) * (size_t)dst_width * (size_t)src_height);
	int *xf, *yi, *yf;

	if (!xi || !rows) {
		/* Cannot happen at sane sizes; keep the output defined anyway. */
		for (int y = 0; y < dst_height; y++)
			for (int x = 0; x < dst_width; x++)
				dst[(size_t)y * dst_stride + x] = 128;
		free(xi);
		free(rows);
		return;
	}
	xf = xi + dst_width;
	yi = xf + dst_width;
	yf = yi + dst_height;
	build_taps(src_width, dst_width, xi, xf);
	build_taps(src_height, dst_height, yi, yf);

	/* Horizontal pass on every source row, kept in Q8 (max 255 * 256). */
	for (int y = 0; y < src_height; y++) {
		const uint8_t *s = src + (size_t)y * src_stride;
		uint16_t *r = rows + (size_t)y * dst_width;

		for (int x = 0; x < dst_width; x++) {
			int i = xi[x], f = xf[x];
			int b = f ? s[i + 1] : 0;

			r[x] = (uint16_t)(s[i] * (256 - f) + b * f);
		}
	}
	/* Vertical pass, rounding Q16 to the nearest integer. */
	for (int y = 0; y < dst_height; y++) {
		const uint16_t *r0 = rows + (size_t)yi[y] * dst_width;
		const uint16_t *r1 = yf[y] ? r0 + dst_width : r0;
		uint32_t g = (uint32_t)yf[y];
		uint8_t *d = dst + (size_t)y * dst_stride;

		for (int x = 0; x < dst_width; x++)
			d[x] = (uint8_t)((r0[x] * (256 - g) + r1[x] * g + 32768) >> 16);
	}
	free(xi);
	free(rows);
}
