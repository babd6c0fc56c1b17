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

/* One source row, upscaled horizontally in Q8 (max 255 * 256). */
static void
horizontal(const uint8_t *s, uint16_t *r, int dst_width, const int *xi, const int *xf)
{
	for (int x = 0; x < dst_width; x++) {
		int i = xi[x], f = xf[x];
		int b = f ? s[i + 1] : 0;

		r[x] = (uint16_t)(s[i] * (256 - f) + b * f);
	}
}

/*
 * Exactly 2x both ways, the base layer's case: the same bytes in 16-bit
 * lanes. At 2x every Q8 tap is 0, 64, 192 or 256, so a horizontal value is
 * 64 h with h = 4 s (edges), 3 s[k] + s[k + 1] or s[k] + 3 s[k + 1], and the
 * vertical pass (r0 (256 - g) + r1 g + 32768) >> 16 reduces to (h0 + 2) >> 2
 * at g = 0 (first and last rows) and (3 h0 + h1 + 8) >> 4 at g = 64 (odd
 * rows; mirrored at 192): at most 4088, where the general pass needs 32-bit
 * products. Checked against the definition by the codec-upscale test.
 */
static void
horizontal_2x(const uint8_t *restrict s, int n, uint16_t *restrict h)
{
	h[0] = (uint16_t)(4 * s[0]);
	for (int k = 0; k < n - 1; k++) {
		h[2 * k + 1] = (uint16_t)(3 * s[k] + s[k + 1]);
		h[2 * k + 2] = (uint16_t)(s[k] + 3 * s[k + 1]);
	}
	h[2 * n - 1] = (uint16_t)(4 * s[n - 1]);
}

static void
vertical_edge_2x(const uint16_t *restrict h, uint8_t *restrict d, int w)
{
	for (int x = 0; x < w; x++)
		d[x] = (uint8_t)((h[x] + 2) >> 2);
}

static void
vertical_2x(const uint16_t *restrict near, const uint16_t *restrict far, uint8_t *restrict d, int w)
{
	for (int x = 0; x < w; x++)
		d[x] = (uint8_t)((3 * near[x] + far[x] + 8) >> 4);
}

static void
upscale_2x(const uint8_t *src, int src_stride, int sw, int sh, uint16_t *rows, uint8_t *dst,
           int dst_stride)
{
	int dw = 2 * sw;
	uint16_t *h[2] = {rows, rows + dw};

	horizontal_2x(src, sw, h[0]);
	vertical_edge_2x(h[0], dst, dw);
	for (int k = 0; k + 1 < sh; k++) {
		/* h[k & 1] holds source row k; row k + 1 goes in the other. */
		const uint16_t *a = h[k & 1];
		uint16_t *b = h[(k + 1) & 1];

		horizontal_2x(src + (size_t)(k + 1) * src_stride, sw, b);
		vertical_2x(a, b, dst + (size_t)(2 * k + 1) * dst_stride, dw);
		vertical_2x(b, a, dst + (size_t)(2 * k + 2) * dst_stride, dw);
	}
	vertical_edge_2x(h[(sh - 1) & 1], dst + (size_t)(2 * sh - 1) * dst_stride, dw);
}

void
pps_upscale_plane(const uint8_t *src, int src_stride, int src_width, int src_height, uint8_t *dst,
                  int dst_stride, int dst_width, int dst_height)
{
	int *xi = malloc(sizeof(int) * (size_t)(2 * dst_width + 2 * dst_height));
	/* Two horizontally upscaled source rows, the pair the vertical pass
	 * reads (rows only move forward with y): no whole-plane buffer. */
	uint16_t *rows = malloc(sizeof(uint16_t) * (size_t)dst_width * 2);
	int cached[2] = {-1, -1};
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
	if (dst_width == 2 * src_width && dst_height == 2 * src_height && src_width >= 2 &&
	    src_height >= 2) {
		upscale_2x(src, src_stride, src_width, src_height, rows, dst, dst_stride);
		free(xi);
		free(rows);
		return;
	}
	xf = xi + dst_width;
	yi = xf + dst_width;
	yf = yi + dst_height;
	build_taps(src_width, dst_width, xi, xf);
	build_taps(src_height, dst_height, yi, yf);

	/* Vertical pass, rounding Q16 to the nearest integer. */
	for (int y = 0; y < dst_height; y++) {
		int want[2] = {yi[y], yf[y] ? yi[y] + 1 : yi[y]};
		const uint16_t *r[2];
		uint32_t g = (uint32_t)yf[y];
		uint8_t *d = dst + (size_t)y * dst_stride;

		for (int k = 0; k < 2; k++) {
			int slot =
			    want[k] & 1; /* rows want[0] and want[0] + 1 never share a slot */

			if (cached[slot] != want[k]) {
				horizontal(src + (size_t)want[k] * src_stride,
				           rows + (size_t)slot * dst_width, dst_width, xi, xf);
				cached[slot] = want[k];
			}
			r[k] = rows + (size_t)slot * dst_width;
		}
		for (int x = 0; x < dst_width; x++)
			d[x] = (uint8_t)((r[0][x] * (256 - g) + r[1][x] * g + 32768) >> 16);
	}
	free(xi);
	free(rows);
}
