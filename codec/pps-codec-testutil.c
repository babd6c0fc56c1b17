/* SPDX-License-Identifier: MIT */
#include "pps-codec-testutil.h"

#include <math.h>
#include <stdlib.h>

static uint32_t
hash(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352d;
	x ^= x >> 15;
	x *= 0x846ca68b;
	x ^= x >> 16;
	return x;
}

void
pps_testutil_generate(pps_frame_t *f, uint32_t n, int64_t capture_us)
{
	int w = f->width, h = f->height;
	int bx = (int)(n * 3) % w, by = h / 3 + (int)(20 * sin(n / 7.0));

	for (int y = 0; y < h; y++) {
		uint8_t *row = f->planes[0] + (size_t)y * f->strides[0];

		for (int x = 0; x < w; x++) {
			/* Scrolling texture blocks over a smooth moving wave. */
			int tex = (int)(hash((uint32_t)((x + (int)n * 2) / 4) * 7919u +
			                     (uint32_t)(y / 4)) %
			                41) -
			          20;
			double wave = 60.0 * sin((x + 2.0 * n) / 17.0) * cos((y - 1.0 * n) / 23.0);
			int v = 120 + (int)wave + tex;

			if (abs(x - bx) < w / 10 && abs(y - by) < h / 8)
				v = 220 - (x - bx) - (y - by); /* a moving bright box */
			row[x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
		}
	}
	for (int y = 0; y < h / 2; y++) {
		uint8_t *u = f->planes[1] + (size_t)y * f->strides[1];
		uint8_t *v = f->planes[2] + (size_t)y * f->strides[2];

		for (int x = 0; x < w / 2; x++) {
			u[x] = (uint8_t)(128 + 40 * sin((x + (int)n) / 20.0));
			v[x] = (uint8_t)(128 + 40 * cos((y + (int)n) / 15.0));
		}
	}
	f->frame_index = n;
	f->capture_us = capture_us;
	pps_timecode_stamp(f->planes[0], f->strides[0], w, h, n, capture_us);
}

double
pps_testutil_psnr_y(const pps_frame_t *a, const pps_frame_t *b)
{
	double sse = 0;

	for (int y = 0; y < a->height; y++)
		for (int x = 0; x < a->width; x++) {
			int d = a->planes[0][(size_t)y * a->strides[0] + x] -
			        b->planes[0][(size_t)y * b->strides[0] + x];
			sse += d * d;
		}
	if (sse == 0)
		return 99.0;
	return 10.0 * log10(255.0 * 255.0 * a->width * a->height / sse);
}

double
pps_testutil_ssim_y(const pps_frame_t *a, const pps_frame_t *b)
{
	const double c1 = 6.5025, c2 = 58.5225; /* (0.01*255)^2, (0.03*255)^2 */
	double total = 0;
	int count = 0;

	for (int y = 0; y + 8 <= a->height; y += 4)
		for (int x = 0; x + 8 <= a->width; x += 4) {
			double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;

			for (int j = 0; j < 8; j++)
				for (int i = 0; i < 8; i++) {
					double pa =
					    a->planes[0][(size_t)(y + j) * a->strides[0] + x + i];
					double pb =
					    b->planes[0][(size_t)(y + j) * b->strides[0] + x + i];

					sa += pa;
					sb += pb;
					saa += pa * pa;
					sbb += pb * pb;
					sab += pa * pb;
				}
			double ma = sa / 64, mb = sb / 64;
			double va = saa / 64 - ma * ma, vb = sbb / 64 - mb * mb;
			double cov = sab / 64 - ma * mb;

			total += ((2 * ma * mb + c1) * (2 * cov + c2)) /
			         ((ma * ma + mb * mb + c1) * (va + vb + c2));
			count++;
		}
	return count ? total / count : 1.0;
}
