/* SPDX-License-Identifier: MIT */
/*
 * Pixel timecodes: frame index (32 bits), capture time (64 bits) and a
 * CRC-16/CCITT (16 bits) as a 14 x 8 grid of luma blocks. Blocks are 16 px so
 * that at half resolution they are still 8 px, a full 8x8 transform block of
 * the base layer: a coarse quantizer blurs edges but keeps block means far
 * from the threshold. The reader looks only at each block's centre.
 */
#include "pps-codec.h"

#include <errno.h>
#include <string.h>

#define COLS  14
#define ROWS  8
#define BITS  (COLS * ROWS)
#define BLACK 16
#define WHITE 235

static int
block_size(int width, int height)
{
	int b = 16;

	while (b > 2 && (b * COLS > width || b * ROWS > height))
		b -= 2;
	return b;
}

static uint16_t
crc16(const uint8_t *data, int len)
{
	uint16_t crc = 0xffff;

	for (int i = 0; i < len; i++) {
		crc ^= (uint16_t)(data[i] << 8);
		for (int k = 0; k < 8; k++)
			crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
	}
	return crc;
}

static void
pack(uint8_t bytes[14], uint32_t frame_index, int64_t capture_us)
{
	uint64_t t = (uint64_t)capture_us;
	uint16_t crc;

	for (int i = 0; i < 4; i++)
		bytes[i] = (uint8_t)(frame_index >> (24 - 8 * i));
	for (int i = 0; i < 8; i++)
		bytes[4 + i] = (uint8_t)(t >> (56 - 8 * i));
	crc = crc16(bytes, 12);
	bytes[12] = (uint8_t)(crc >> 8);
	bytes[13] = (uint8_t)crc;
}

void
pps_timecode_stamp(uint8_t *y_plane, int stride, int width, int height, uint32_t frame_index,
                   int64_t capture_us)
{
	int b = block_size(width, height);
	uint8_t bytes[BITS / 8];

	if (b * COLS > width || b * ROWS > height)
		return;
	pack(bytes, frame_index, capture_us);
	for (int bit = 0; bit < BITS; bit++) {
		uint8_t v = bytes[bit / 8] >> (7 - bit % 8) & 1 ? WHITE : BLACK;
		int x0 = bit % COLS * b, y0 = bit / COLS * b;

		for (int y = y0; y < y0 + b; y++)
			for (int x = x0; x < x0 + b; x++)
				y_plane[(size_t)y * stride + x] = v;
	}
}

int
pps_timecode_read(const uint8_t *y_plane, int stride, int width, int height, uint32_t *frame_index,
                  int64_t *capture_us)
{
	int b = block_size(width, height);
	int q = b / 4; /* sample the centre half of each block */
	uint8_t bytes[BITS / 8] = {0};
	uint64_t t = 0;
	uint32_t index = 0;

	if (b * COLS > width || b * ROWS > height)
		return -ENOENT;
	for (int bit = 0; bit < BITS; bit++) {
		int x0 = bit % COLS * b + q, y0 = bit / COLS * b + q;
		int n = 0, sum = 0;

		for (int y = y0; y < y0 + b - 2 * q; y++)
			for (int x = x0; x < x0 + b - 2 * q; x++, n++)
				sum += y_plane[(size_t)y * stride + x];
		if (n && sum / n > (BLACK + WHITE) / 2)
			bytes[bit / 8] |= (uint8_t)(1 << (7 - bit % 8));
	}
	if (crc16(bytes, 12) != (uint16_t)(bytes[12] << 8 | bytes[13]))
		return -ENOENT;
	for (int i = 0; i < 4; i++)
		index = index << 8 | bytes[i];
	for (int i = 0; i < 8; i++)
		t = t << 8 | bytes[4 + i];
	*frame_index = index;
	*capture_us = (int64_t)t;
	return 0;
}

/*
 * The tick flash. The patch is drawn on every frame of a source that has it,
 * black but for the flash, so the picture's own content (the ball, snow)
 * never shows there and cannot pass for a flash; the reader also wants the
 * border dark, which a picture without the patch rarely is around a bright
 * centre. Quarter-side parts stay 8 px at the base layer's half resolution
 * for a 64 px patch: a whole transform block, robust to coarse quantizers.
 */
static int
flash_side(int width, int height)
{
	int side = 64;

	if (side > width / 4)
		side = width / 4;
	if (side > height / 4)
		side = height / 4;
	return side & ~1;
}

void
pps_timecode_stamp_flash(pps_frame_t *frame, bool flash)
{
	int side = flash_side(frame->width, frame->height);
	int x0 = frame->width - side, y0 = frame->height - side;

	if (side < 8)
		return;
	for (int y = 0; y < side; y++) {
		uint8_t *row = frame->planes[0] + (size_t)(y0 + y) * frame->strides[0] + x0;
		bool inner_row = y >= side / 4 && y < side - side / 4;

		for (int x = 0; x < side; x++)
			row[x] = flash && inner_row && x >= side / 4 && x < side - side / 4 ? WHITE
			                                                                    : BLACK;
	}
	for (int p = 1; p < 3; p++)
		for (int y = y0 / 2; y < (y0 + side) / 2; y++)
			memset(frame->planes[p] + (size_t)y * frame->strides[p] + x0 / 2, 128,
			       (size_t)side / 2);
}

/* Mean luma of the square [x0, x0 + n) x [y0, y0 + n). */
static int
mean_luma(const uint8_t *y_plane, int stride, int x0, int y0, int n)
{
	int sum = 0;

	for (int y = y0; y < y0 + n; y++)
		for (int x = x0; x < x0 + n; x++)
			sum += y_plane[(size_t)y * stride + x];
	return sum / (n * n);
}

bool
pps_timecode_read_flash(const uint8_t *y_plane, int stride, int width, int height)
{
	int side = flash_side(width, height);
	int x0 = width - side, y0 = height - side;
	int edge = side / 8; /* the border's outer half: clear of the inner square's blur */
	int mid = (BLACK + WHITE) / 2;

	if (side < 8)
		return false;
	/* Centre quarter of the inner half bright, and the four corners of the
	 * border dark. */
	return mean_luma(y_plane, stride, x0 + side * 3 / 8, y0 + side * 3 / 8, side / 4) > mid &&
	       mean_luma(y_plane, stride, x0, y0, edge) < mid &&
	       mean_luma(y_plane, stride, x0 + side - edge, y0, edge) < mid &&
	       mean_luma(y_plane, stride, x0, y0 + side - edge, edge) < mid &&
	       mean_luma(y_plane, stride, x0 + side - edge, y0 + side - edge, edge) < mid;
}
