/* SPDX-License-Identifier: MIT */
/*
 * Capture: bad sources fail with one clear message naming the source and
 * GStreamer's reason; the test source delivers stamped, numbered frames.
 * A file that is not live (with audio, an odd size) plays in real time,
 * loops, drops nothing and carries no barcode.
 * Usage: test-capture missing-file | missing-device | bad-pipeline | test-source | push
 *        test-capture uri-file GST_LAUNCH TMPDIR
 */
#include "pps-codec.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int frames, timecodes_ok;
static bool order_ok = true;

static void
frame_cb(const pps_frame_t *f, void *user)
{
	uint32_t index;
	int64_t us;

	(void)user;
	if (!f)
		return;
	pthread_mutex_lock(&lock);
	if (f->frame_index != (uint32_t)frames)
		order_ok = false;
	if (pps_timecode_read(f->planes[0], f->strides[0], f->width, f->height, &index, &us) == 0 &&
	    index == f->frame_index && us == f->capture_us)
		timecodes_ok++;
	frames++;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
}

/* uri-file: what the frames looked like. */
static int64_t first_capture_us, last_capture_us;
static int barcodes;

static void
file_frame_cb(const pps_frame_t *f, void *user)
{
	uint32_t index;
	int64_t us;

	(void)user;
	if (!f)
		return;
	pthread_mutex_lock(&lock);
	if (frames == 0)
		first_capture_us = f->capture_us;
	last_capture_us = f->capture_us;
	if (pps_timecode_read(f->planes[0], f->strides[0], f->width, f->height, &index, &us) == 0)
		barcodes++;
	frames++;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
}

/* The server's defaults: the test pattern at 640x480, 30 frames/s. */
static pps_capture_params_t
source(pps_capture_source_t type, const char *input, int width, int height)
{
	return (pps_capture_params_t){
	    .type = type,
	    .input = input,
	    .pattern = "ball",
	    .width = width,
	    .height = height,
	    .fps = 30,
	    .queue_frames = 8,
	    .timecode = PPS_CAPTURE_TIMECODE_AUTO,
	};
}

/* Expects failure at new or start, with every @needle in the message. */
static int
expect_failure(pps_capture_params_t params, const char *n1, const char *n2)
{
	char err[512] = "";
	pps_capture_t *cap = pps_capture_new(&params, frame_cb, NULL, err, sizeof(err));
	int ok;

	if (cap) {
		if (pps_capture_start(cap, err, sizeof(err)) == 0) {
			fprintf(stderr, "FAIL: source started\n");
			pps_capture_free(cap);
			return 1;
		}
		pps_capture_free(cap);
	}
	fprintf(stderr, "message: %s\n", err);
	ok = strstr(err, n1) && strstr(err, n2) && !strchr(err, '\n');
	if (!ok)
		fprintf(stderr, "FAIL: message lacks '%s' / '%s'\n", n1, n2);
	return ok ? 0 : 1;
}

/*
 * A 3-s clip of 321x241 video at 30 frames/s with a Vorbis audio track, made
 * with gst-launch-1.0, through source.type=uri: 120 frames (the clip, looped)
 * must come at the clip's pace, not as fast as the decoder goes (which is
 * what an unpaced file does: the 90 frames in a fraction of a second), with
 * no frame dropped and no pixel timecode in them.
 */
static int
uri_file(const char *gst_launch, const char *tmpdir)
{
	enum { CLIP_FRAMES = 90, WANT_FRAMES = 120, FPS = 30 };
	char path[512], location[600], uri[600], err[512];
	char *argv[32] = {0};
	int argc = 0, status = 0, r = 1;
	GError *error = NULL;
	pps_capture_stats_t st;
	pps_capture_t *cap;
	pps_capture_params_t params;
	double span_s;

	snprintf(path, sizeof(path), "%s/pps-odd-audio.webm", tmpdir);
	snprintf(location, sizeof(location), "location=%s", path);
	snprintf(uri, sizeof(uri), "file://%s", path);
	{
		const char *args[] = {gst_launch,
		                      "-q",
		                      "videotestsrc",
		                      "num-buffers=90",
		                      "pattern=smpte",
		                      "!",
		                      "video/x-raw,width=321,height=241,framerate=30/1",
		                      "!",
		                      "vp8enc",
		                      "deadline=1",
		                      "!",
		                      "webmmux",
		                      "name=mux",
		                      "!",
		                      "filesink",
		                      location,
		                      "audiotestsrc",
		                      "num-buffers=130",
		                      "!",
		                      "vorbisenc",
		                      "!",
		                      "mux.",
		                      NULL};

		for (; args[argc]; argc++)
			argv[argc] = (char *)args[argc];
	}
	if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, &status,
	                  &error) ||
	    !g_spawn_check_wait_status(status, &error)) {
		fprintf(stderr, "FAIL: gst-launch-1.0 cannot make the clip: %s\n",
		        error ? error->message : "?");
		g_clear_error(&error);
		return 1;
	}
	params = source(PPS_CAPTURE_SOURCE_URI, uri, 320, 240);
	cap = pps_capture_new(&params, file_frame_cb, NULL, err, sizeof(err));
	if (!cap || pps_capture_start(cap, err, sizeof(err)) < 0) {
		fprintf(stderr, "FAIL: %s\n", err);
		return 1;
	}
	pthread_mutex_lock(&lock);
	while (frames < WANT_FRAMES)
		pthread_cond_wait(&cond, &lock);
	span_s = (double)(last_capture_us - first_capture_us) / 1e6;
	pthread_mutex_unlock(&lock);
	pps_capture_stop(cap);
	pps_capture_get_stats(cap, &st);
	fprintf(stderr,
	        "%d frames over %.2f s (real time: %.2f s), %llu dropped, %llu loops, "
	        "%d with a barcode\n",
	        WANT_FRAMES, span_s, (double)(WANT_FRAMES - 1) / FPS,
	        (unsigned long long)st.frames_dropped, (unsigned long long)st.file_loops, barcodes);
	/* Paced: at least half the clip's own duration (unpaced, the 120 frames
	 * come in well under a second); looped past its 90 frames. */
	if (span_s < 0.5 * (WANT_FRAMES - 1) / FPS)
		fprintf(stderr, "FAIL: not paced to real time\n");
	else if (st.frames_dropped)
		fprintf(stderr, "FAIL: source frames dropped\n");
	else if (st.file_loops < 1)
		fprintf(stderr, "FAIL: the clip did not loop\n");
	else if (barcodes)
		fprintf(stderr, "FAIL: pixel timecode in a file's picture\n");
	else
		r = 0;
	pps_capture_free(cap);
	unlink(path);
	return r;
}

int
main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";

	if (!strcmp(what, "missing-file")) {
		return expect_failure(
		    source(PPS_CAPTURE_SOURCE_FILE, "/nonexistent/pps-missing.mp4", 640, 480),
		    "file '/nonexistent/pps-missing.mp4'", "No such file");
	}
	if (!strcmp(what, "missing-device")) {
		return expect_failure(
		    source(PPS_CAPTURE_SOURCE_CAMERA, "/dev/pps-missing-video", 640, 480),
		    "camera '/dev/pps-missing-video'", "device");
	}
	if (!strcmp(what, "bad-pipeline")) {
		return expect_failure(
		    source(PPS_CAPTURE_SOURCE_PIPELINE, "no-such-element-pps ! identity", 640, 480),
		    "pipeline 'no-such-element-pps", "no-such-element-pps");
	}
	if (!strcmp(what, "test-source")) {
		pps_capture_params_t params = source(PPS_CAPTURE_SOURCE_TEST, "", 320, 240);
		char err[512];
		pps_capture_t *cap = pps_capture_new(&params, frame_cb, NULL, err, sizeof(err));
		pps_capture_stats_t st;
		int r = 1;

		if (!cap || pps_capture_start(cap, err, sizeof(err)) < 0) {
			fprintf(stderr, "FAIL: %s\n", err);
			return 1;
		}
		/* Waits on frames (a condition), not on time. */
		pthread_mutex_lock(&lock);
		while (frames < 10)
			pthread_cond_wait(&cond, &lock);
		pthread_mutex_unlock(&lock);
		pps_capture_stop(cap);
		pps_capture_get_stats(cap, &st);
		fprintf(stderr, "captured %llu dropped %llu delivered %llu, timecodes %d/%d\n",
		        (unsigned long long)st.frames_captured,
		        (unsigned long long)st.frames_dropped,
		        (unsigned long long)st.frames_delivered, timecodes_ok, frames);
		if (order_ok && timecodes_ok == frames && st.frames_delivered == (uint64_t)frames)
			r = 0;
		pps_capture_free(cap);
		return r;
	}
	if (!strcmp(what, "push")) {
		/* Pushed pictures: numbered in order, no barcode unless asked
		 * for, a picture of another size refused. */
		pps_capture_params_t params = source(PPS_CAPTURE_SOURCE_TEST, "", 64, 64);
		char err[512];
		pps_capture_t *cap =
		    pps_capture_new_push(&params, frame_cb, NULL, err, sizeof(err));
		pps_frame_t *f = pps_frame_new(64, 64), *wrong = pps_frame_new(64, 32);
		int r = 1;

		if (!cap || !f || !wrong || pps_capture_start(cap, err, sizeof(err)) < 0) {
			fprintf(stderr, "FAIL: %s\n", err);
			return 1;
		}
		for (int i = 0; i < 5; i++) {
			memset(f->planes[0], 0x80, (size_t)f->strides[0] * 64);
			f->capture_us = 1000 + i;
			pthread_mutex_lock(&lock);
			while (frames < i)
				pthread_cond_wait(&cond, &lock);
			pthread_mutex_unlock(&lock);
			if (pps_capture_push(cap, f) < 0)
				fprintf(stderr, "FAIL: push refused\n");
		}
		pthread_mutex_lock(&lock);
		while (frames < 5)
			pthread_cond_wait(&cond, &lock);
		pthread_mutex_unlock(&lock);
		if (pps_capture_push(cap, wrong) != -EINVAL)
			fprintf(stderr, "FAIL: a picture of another size was taken\n");
		else if (!order_ok || timecodes_ok != 0)
			fprintf(stderr, "FAIL: order %d, %d barcodes\n", order_ok, timecodes_ok);
		else
			r = 0;
		pps_capture_free(cap);
		pps_frame_free(f);
		pps_frame_free(wrong);
		return r;
	}
	if (!strcmp(what, "uri-file") && argc == 4)
		return uri_file(argv[2], argv[3]);
	fprintf(stderr, "usage: test-capture missing-file|missing-device|bad-pipeline|test-source\n"
	                "       test-capture uri-file GST_LAUNCH TMPDIR\n");
	return 2;
}
