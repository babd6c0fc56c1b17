/* SPDX-License-Identifier: MIT */
/*
 * The recorder keeps real time: a run of regular pictures, a freeze, a burst
 * of pictures faster than the frame rate and regular pictures again make a
 * y4m file whose length (pictures x frame time) is the run's, first picture
 * to last plus the last one's frame time, within one frame time, and a
 * Matroska file whose duration is the same, as GStreamer's discoverer reads
 * it. Display times are made up (an injected clock); nothing sleeps but the
 * Matroska writer's finish, which waits for GStreamer's threads.
 */
#include "pps-client-internal.h"
#include "pps-test.h"

#include <errno.h>
#include <gst/pbutils/pbutils.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FPS      30
#define FRAME_US (1000000 / FPS)

/* Display times of the run: 40 regular pictures (a few ms of jitter, the
 * first 3 ms early), a 1.5 s freeze, 6 pictures 2 ms
 * apart, 40 regular pictures. Returns how many; @times has room for 128. */
static int
run_times(int64_t *times)
{
	int64_t t = 1700000000000000 + FRAME_US / 2;
	int n = 0;

	for (int i = 0; i < 40; i++, t += FRAME_US)
		times[n++] = t + (i % 3 - 1) * 3000;
	t += 1500000;
	for (int i = 0; i < 6; i++, t += 2000)
		times[n++] = t;
	for (int i = 0; i < 40; i++, t += FRAME_US)
		times[n++] = t + (i % 2) * 2000;
	return n;
}

static void
record_as(const char *path, bool every, const int64_t *times, int n, pps_recorder_summary_t *sum)
{
	char err[256] = "";
	pps_recorder_t *r = pps_recorder_new(path, err, sizeof(err));
	pps_frame_t *picture = pps_frame_new(64, 48);

	CHECK(r != NULL);
	CHECK(picture != NULL);
	if (!r || !picture)
		return;
	if (every)
		pps_recorder_keep_every(r);
	for (int i = 0; i < n; i++) {
		memset(picture->planes[0], i, (size_t)picture->strides[0] * 48);
		CHECK_EQ_INT(pps_recorder_frame(r, picture, times[i], FPS, 1, err, sizeof(err)), 0);
	}
	/* One file, one size. */
	pps_frame_t *other = pps_frame_new(32, 32);
	CHECK_EQ_INT(pps_recorder_frame(r, other, times[n - 1] + 1, FPS, 1, err, sizeof(err)),
	             -EINVAL);
	CHECK(strstr(err, "size") != NULL);
	pps_frame_free(other);
	CHECK_EQ_INT(pps_recorder_finish(r, sum, err, sizeof(err)), 0);
	pps_recorder_free(r);
	pps_frame_free(picture);
}

static void
record(const char *path, const int64_t *times, int n, pps_recorder_summary_t *sum)
{
	record_as(path, false, times, n, sum);
}

/* Every picture once, in order: the burst is kept whole, the freeze is not
 * filled, and each picture in the file is the one shown (its first byte). */
static void
test_y4m_every(void)
{
	char path[] = "/tmp/pps-test-recorder-XXXXXX";
	int64_t times[128];
	int n = run_times(times), fd = mkstemp(path), pictures = 0;
	pps_recorder_summary_t sum = {0};
	char line[128];
	FILE *f;

	CHECK(fd >= 0);
	close(fd);
	record_as(path, true, times, n, &sum);
	CHECK(sum.frames_shown == (uint64_t)n);
	CHECK(sum.frames_written == (uint64_t)n);
	CHECK(sum.frames_repeated == 0 && sum.frames_replaced == 0);
	CHECK_EQ_INT(sum.duration_us, (int64_t)n * FRAME_US);
	f = fopen(path, "rb");
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK(fgets(line, sizeof(line), f) && strstr(line, " W64 H48 F30:1 "));
	while (fgets(line, sizeof(line), f)) {
		int first = fgetc(f);

		CHECK(strcmp(line, "FRAME\n") == 0);
		CHECK_EQ_INT(first, pictures);
		pictures++;
		fseek(f, 64 * 48 * 3 / 2 - 1, SEEK_CUR);
	}
	fclose(f);
	unlink(path);
	CHECK_EQ_INT(pictures, n);
}

static void
test_y4m_real_time(void)
{
	char path[] = "/tmp/pps-test-recorder-XXXXXX";
	int64_t times[128], run_us;
	int n = run_times(times), fd = mkstemp(path), pictures = 0, repeats = 0;
	pps_recorder_summary_t sum = {0};
	char line[128];
	FILE *f;

	CHECK(fd >= 0);
	close(fd);
	record(path, times, n, &sum);
	run_us = times[n - 1] - times[0] + FRAME_US;
	CHECK(sum.frames_shown == (uint64_t)n);
	CHECK(sum.frames_repeated >= 40); /* the freeze: 1.5 s is 45 frame times */
	CHECK(sum.frames_replaced >= 3);  /* the burst */
	CHECK(llabs(sum.duration_us - run_us) <= FRAME_US);

	f = fopen(path, "rb");
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK(fgets(line, sizeof(line), f) && strstr(line, " W64 H48 F30:1 "));
	while (fgets(line, sizeof(line), f)) {
		CHECK(strncmp(line, "FRAME", 5) == 0);
		pictures++;
		repeats += strcmp(line, "FRAME Xrepeat\n") == 0;
		fseek(f, 64 * 48 * 3 / 2, SEEK_CUR);
	}
	fclose(f);
	unlink(path);
	CHECK(pictures == (int)sum.frames_written);
	CHECK(repeats == (int)sum.frames_repeated);
	CHECK(llabs((int64_t)pictures * FRAME_US - run_us) <= FRAME_US);
	/* The regular pictures around the freeze are all kept. */
	CHECK(sum.frames_written - sum.frames_repeated + sum.frames_replaced == (uint64_t)n);
}

static void
test_matroska_real_time(void)
{
	char path[] = "/tmp/pps-test-recorder-XXXXXX.mkv";
	int64_t times[128], run_us;
	int n = run_times(times), fd = mkstemps(path, 4);
	pps_recorder_summary_t sum = {0};
	GstDiscoverer *discoverer;
	GstDiscovererInfo *info = NULL;
	GError *error = NULL;
	char *uri;

	CHECK(fd >= 0);
	close(fd);
	record(path, times, n, &sum);
	run_us = times[n - 1] - times[0] + FRAME_US;
	CHECK(sum.frames_written == (uint64_t)n); /* every picture, once */
	CHECK(sum.frames_repeated == 0);
	CHECK(llabs(sum.duration_us - run_us) <= 1000); /* Matroska's clock: 1 ms */

	discoverer = gst_discoverer_new(30 * GST_SECOND, &error);
	CHECK(discoverer != NULL);
	uri = gst_filename_to_uri(path, NULL);
	if (discoverer && uri)
		info = gst_discoverer_discover_uri(discoverer, uri, &error);
	CHECK(info != NULL);
	if (info) {
		GList *streams = gst_discoverer_info_get_stream_list(info);
		GstCaps *caps = streams ? gst_discoverer_stream_info_get_caps(streams->data) : NULL;
		const GstStructure *st = caps ? gst_caps_get_structure(caps, 0) : NULL;
		int64_t duration_us = (int64_t)(gst_discoverer_info_get_duration(info) / 1000);

		CHECK(g_list_length(streams) == 1);
		CHECK(st && gst_structure_has_name(st, "video/x-raw"));
		CHECK(st && g_strcmp0(gst_structure_get_string(st, "format"), "I420") == 0);
		CHECK(llabs(duration_us - run_us) <= FRAME_US);
		if (caps)
			gst_caps_unref(caps);
		gst_discoverer_stream_info_list_free(streams);
		gst_discoverer_info_unref(info);
	}
	g_clear_error(&error);
	g_free(uri);
	if (discoverer)
		g_object_unref(discoverer);
	unlink(path);
}

/* A write that fails on GStreamer's threads (a Matroska name for
 * /dev/full) comes back from a later call or from finish, with the reason. */
static void
test_matroska_write_error(void)
{
	char path[] = "/tmp/pps-test-recorder-full-XXXXXX", link_path[64], err[256] = "";
	pps_frame_t *picture = pps_frame_new(640, 480);
	pps_recorder_t *r;
	int ret = 0, fd = mkstemp(path);

	CHECK(fd >= 0);
	close(fd);
	unlink(path);
	snprintf(link_path, sizeof(link_path), "%s.mkv", path);
	if (symlink("/dev/full", link_path) != 0) {
		printf("# /dev/full: %s; skipped\n", strerror(errno));
		pps_frame_free(picture);
		return;
	}
	r = pps_recorder_new(link_path, err, sizeof(err));
	CHECK(r != NULL);
	CHECK(picture != NULL);
	for (int i = 0; r && picture && i < 300 && ret == 0; i++)
		ret = pps_recorder_frame(r, picture, 1000000 + (int64_t)i * FRAME_US, FPS, 1, err,
		                         sizeof(err));
	if (r && ret == 0)
		ret = pps_recorder_finish(r, NULL, err, sizeof(err));
	CHECK_EQ_INT(ret, -ENOSPC);
	CHECK(strstr(err, link_path) != NULL);
	CHECK(strstr(err, "No space left") != NULL);
	pps_recorder_free(r);
	pps_frame_free(picture);
	unlink(link_path);
}

static void
test_nut_refused(void)
{
	char err[256] = "";

	errno = 0;
	CHECK(pps_recorder_new("/tmp/pps-test-recorder.nut", err, sizeof(err)) == NULL);
	CHECK(errno == EINVAL);
	CHECK(strstr(err, "NUT") != NULL);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	gst_init(NULL, NULL);
	PPS_TEST_RUN(test_y4m_real_time);
	PPS_TEST_RUN(test_y4m_every);
	PPS_TEST_RUN(test_matroska_real_time);
	PPS_TEST_RUN(test_matroska_write_error);
	PPS_TEST_RUN(test_nut_refused);
	return pps_test_result();
}
