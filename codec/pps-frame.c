/* SPDX-License-Identifier: MIT */
#include "pps-codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

pps_frame_t *
pps_frame_new(int width, int height)
{
	size_t luma = (size_t)width * (size_t)height;
	pps_frame_t *frame;

	if (width <= 0 || height <= 0 || (width | height) & 1) {
		errno = EINVAL;
		return NULL;
	}
	/* Header and pixels in one block: one free, no partial states. */
	frame = calloc(1, sizeof(*frame) + luma + luma / 2);
	if (!frame) {
		errno = ENOMEM;
		return NULL;
	}
	frame->width = width;
	frame->height = height;
	frame->planes[0] = (uint8_t *)(frame + 1);
	frame->planes[1] = frame->planes[0] + luma;
	frame->planes[2] = frame->planes[1] + luma / 4;
	frame->strides[0] = width;
	frame->strides[1] = frame->strides[2] = width / 2;
	return frame;
}

void
pps_frame_free(pps_frame_t *frame)
{
	free(frame);
}

void
pps_frame_copy(pps_frame_t *dst, const pps_frame_t *src)
{
	for (int p = 0; p < 3; p++) {
		int w = p ? src->width / 2 : src->width;
		int h = p ? src->height / 2 : src->height;

		for (int y = 0; y < h; y++)
			memcpy(dst->planes[p] + (size_t)y * dst->strides[p],
			       src->planes[p] + (size_t)y * src->strides[p], (size_t)w);
	}
	dst->frame_index = src->frame_index;
	dst->capture_us = src->capture_us;
}
