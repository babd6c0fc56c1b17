/* SPDX-License-Identifier: MIT */
/*
 * pps-peer-score's mapping of shown pictures to source buffers, on a made-up
 * shown.y4m: videotestsrc ball buffers 40..159, each with its own timecode
 * and a little noise, except the first, which shows buffer 42's picture (a
 * poor first picture, nearer a later buffer than its own; ball has no noise
 * square to tell them apart). Every picture must still be scored against its
 * own buffer. Then a shown.y4m whose first eight pictures show the buffer
 * after their own (the anchor's pictures, all misleading): the scorer anchors
 * a buffer late, its reference checks name n - 1 (ref_best), and --shift -1
 * scores every later picture against its own buffer again. Last, first
 * pictures that match no buffer (flat grey) leave the anchor at the frame
 * index.
 * Usage: test-peer-score PPS-PEER-SCORE DIR.
 */
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pps-codec.h"
#include "pps-test.h"

#define W     640
#define H     480
#define FIRST 40
#define LAST  159

/* Scores @path with @scorer: every picture against its own buffer (the
 * timecode's frame index), a row for each. -1 if the scorer cannot run. */
static int
check_own_buffers(const char *scorer, const char *path, const char *what)
{
	char cmd[8400], line[512];
	FILE *scores;
	int rows = 0;

	snprintf(cmd, sizeof(cmd), "'%s' --pattern ball '%s'", scorer, path);
	scores = popen(cmd, "r");
	if (!scores)
		return -1;
	while (fgets(line, sizeof(line), scores)) {
		long ordinal, ok, index, ref;
		long long capture;

		if (sscanf(line, "%ld\t%ld\t%ld\t%lld\t%ld", &ordinal, &ok, &index, &capture,
		           &ref) != 5)
			continue; /* the header */
		rows++;
		CHECK(ok == 1 && ref == index, "%s: picture %ld (timecode %ld) scored against %ld",
		      what, ordinal, index, ref);
	}
	CHECK(pclose(scores) == 0, "pps-peer-score failed");
	CHECK(rows == LAST - FIRST + 1, "%s: %d rows", what, rows);
	return 0;
}

int
main(int argc, char **argv)
{
	static uint8_t frames[LAST + 1][W * H * 3 / 2];
	const size_t fs = sizeof(frames[0]);
	GstElement *pipeline;
	GstElement *sink;
	char path[4096], cmd[8400], line[512];
	FILE *out, *scores;
	uint32_t seed = 1;
	int rows = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: test-peer-score PPS-PEER-SCORE DIR\n");
		return 2;
	}
	gst_init(NULL, NULL);
	/* The scorer's own reference pipeline (pps-peer-score.c). */
	pipeline = gst_parse_launch("videotestsrc pattern=ball ! video/x-raw,format=I420,width=640,"
	                            "height=480,framerate=30/1,pixel-aspect-ratio=1/1 ! "
	                            "appsink name=sink sync=false max-buffers=4",
	                            NULL);
	if (!pipeline) {
		fprintf(stderr, "no videotestsrc\n");
		return 77;
	}
	sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
	gst_element_set_state(pipeline, GST_STATE_PLAYING);
	for (int n = 0; n <= LAST; n++) {
		GstSample *sample = gst_app_sink_pull_sample(GST_APP_SINK(sink));
		GstVideoInfo info;
		GstVideoFrame frame;

		if (!sample || !gst_video_info_from_caps(&info, gst_sample_get_caps(sample)) ||
		    !gst_video_frame_map(&frame, &info, gst_sample_get_buffer(sample),
		                         GST_MAP_READ)) {
			fprintf(stderr, "videotestsrc buffer %d\n", n);
			return 1;
		}
		for (int p = 0, o = 0; p < 3; p++) {
			int w = p ? W / 2 : W, h = p ? H / 2 : H;

			for (int y = 0; y < h; y++, o += w)
				memcpy(frames[n] + o,
				       (const uint8_t *)GST_VIDEO_FRAME_PLANE_DATA(&frame, p) +
				           (size_t)y * GST_VIDEO_FRAME_PLANE_STRIDE(&frame, p),
				       (size_t)w);
		}
		gst_video_frame_unmap(&frame);
		gst_sample_unref(sample);
	}
	gst_element_set_state(pipeline, GST_STATE_NULL);
	gst_object_unref(sink);
	gst_object_unref(pipeline);

	snprintf(path, sizeof(path), "%s/peer-score-shown.y4m", argv[2]);
	out = fopen(path, "wb");
	if (!out)
		return 1;
	fprintf(out, "YUV4MPEG2 W%d H%d F30:1 Ip A1:1 C420jpeg\n", W, H);
	for (int n = FIRST; n <= LAST; n++) {
		static uint8_t pic[W * H * 3 / 2];

		memcpy(pic, frames[n == FIRST ? FIRST + 2 : n], fs);
		for (int i = 0; i < W * H; i++) {
			int v;

			seed = seed * 1664525u + 1013904223u;
			v = pic[i] + (int)(seed >> 29) - 4; /* -4 .. 3 */
			pic[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
		}
		pps_timecode_stamp(pic, W, W, H, (uint32_t)n,
		                   1700000000000000LL + (int64_t)n * 1000000 / 30);
		fprintf(out, "FRAME\n");
		fwrite(pic, 1, fs, out);
	}
	fclose(out);

	if (check_own_buffers(argv[1], path, "noisy start") < 0)
		return 1;

	out = fopen(path, "wb");
	if (!out)
		return 1;
	fprintf(out, "YUV4MPEG2 W%d H%d F30:1 Ip A1:1 C420jpeg\n", W, H);
	for (int n = FIRST; n <= LAST; n++) {
		pps_timecode_stamp(frames[n < FIRST + 8 ? n + 1 : n], W, W, H, (uint32_t)n,
		                   1700000000000000LL + (int64_t)n * 1000000 / 30);
		fprintf(out, "FRAME\n");
		fwrite(frames[n < FIRST + 8 ? n + 1 : n], 1, fs, out);
	}
	fclose(out);
	for (int shift = 0; shift >= -1; shift--) {
		int named = 0, checked = 0;

		rows = 0;
		snprintf(cmd, sizeof(cmd), "'%s' --pattern ball --shift %d '%s'", argv[1], shift,
		         path);
		scores = popen(cmd, "r");
		if (!scores)
			return 1;
		while (fgets(line, sizeof(line), scores)) {
			long ordinal, ok, index, ref, check, best;
			long long capture;
			char psnr[32], ssim[32];
			int got =
			    sscanf(line, "%ld\t%ld\t%ld\t%lld\t%ld\t%31s\t%31s\t%ld\t%ld", &ordinal,
			           &ok, &index, &capture, &ref, psnr, ssim, &check, &best);

			if (got < 8)
				continue; /* the header */
			rows++;
			if (index < FIRST + 8)
				continue;
			CHECK(ref == index + 1 + shift, "shift %d: picture %ld scored against %ld",
			      shift, index, ref);
			if (got == 9) {
				checked++;
				named += best == (shift ? 0 : -1);
			}
		}
		CHECK(pclose(scores) == 0, "pps-peer-score --shift %d failed", shift);
		CHECK(rows == LAST - FIRST + 1, "%d rows", rows);
		CHECK(checked >= 3 && named == checked, "shift %d: %d of %d checks as expected",
		      shift, named, checked);
	}
	/* First pictures that match no buffer (flat grey: a broken start):
	 * the frame index holds, every later picture is its own buffer. */
	out = fopen(path, "wb");
	if (!out)
		return 1;
	fprintf(out, "YUV4MPEG2 W%d H%d F30:1 Ip A1:1 C420jpeg\n", W, H);
	for (int n = FIRST; n <= LAST; n++) {
		static uint8_t pic[W * H * 3 / 2];

		if (n < FIRST + 8)
			memset(pic, 100 + 3 * (n - FIRST), fs);
		else
			memcpy(pic, frames[n], fs);
		pps_timecode_stamp(pic, W, W, H, (uint32_t)n,
		                   1700000000000000LL + (int64_t)n * 1000000 / 30);
		fprintf(out, "FRAME\n");
		fwrite(pic, 1, fs, out);
	}
	fclose(out);
	if (check_own_buffers(argv[1], path, "grey start") < 0)
		return 1;
	snprintf(cmd, sizeof(cmd), "'%s' --shift 99 '%s' >/dev/null 2>&1", argv[1], path);
	CHECK(system(cmd) != 0, "--shift 99 accepted");
	remove(path);
	return pps_test_failures ? 1 : 0;
}
