/* SPDX-License-Identifier: MIT */
/*
 * Capture: bad sources fail with one clear message naming the source and
 * GStreamer's reason; the test source delivers stamped, numbered frames.
 * Usage: test-capture missing-file | missing-device | bad-pipeline | test-source
 */
#include "pps-codec.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int frames, timecodes_ok;
static bool order_ok = true;

static void
on_frame(const pps_frame_t *f, void *user)
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

static pps_config_t *
config_with(const char *const *sets)
{
	pps_config_t *c = pps_config_new(PPS_CONFIG_PROGRAM_SERVER);
	char err[256];

	for (; *sets; sets++)
		if (pps_config_set(c, *sets, err, sizeof(err)) < 0) {
			fprintf(stderr, "%s\n", err);
			exit(1);
		}
	return c;
}

/* Expects failure at new or start, with every @needle in the message. */
static int
expect_failure(const char *const *sets, const char *n1, const char *n2)
{
	pps_config_t *c = config_with(sets);
	char err[512] = "";
	pps_capture_t *cap = pps_capture_new(c, on_frame, NULL, err, sizeof(err));
	int ok;

	if (cap) {
		if (pps_capture_start(cap, err, sizeof(err)) == 0) {
			fprintf(stderr, "FAIL: source started\n");
			pps_capture_free(cap);
			pps_config_free(c);
			return 1;
		}
		pps_capture_free(cap);
	}
	fprintf(stderr, "message: %s\n", err);
	ok = strstr(err, n1) && strstr(err, n2) && !strchr(err, '\n');
	pps_config_free(c);
	if (!ok)
		fprintf(stderr, "FAIL: message lacks '%s' / '%s'\n", n1, n2);
	return ok ? 0 : 1;
}

int
main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";

	if (!strcmp(what, "missing-file")) {
		const char *sets[] = { "source.type=file", "source.file=/nonexistent/pps-missing.mp4",
				       NULL };
		return expect_failure(sets, "file '/nonexistent/pps-missing.mp4'", "No such file");
	}
	if (!strcmp(what, "missing-device")) {
		const char *sets[] = { "source.type=camera", "source.device=/dev/pps-missing-video",
				       NULL };
		return expect_failure(sets, "camera '/dev/pps-missing-video'", "device");
	}
	if (!strcmp(what, "bad-pipeline")) {
		const char *sets[] = { "source.type=pipeline",
				       "source.pipeline=no-such-element-pps ! identity", NULL };
		return expect_failure(sets, "pipeline 'no-such-element-pps", "no-such-element-pps");
	}
	if (!strcmp(what, "test-source")) {
		const char *sets[] = { "source.width=320", "source.height=240", NULL };
		pps_config_t *c = config_with(sets);
		char err[512];
		pps_capture_t *cap = pps_capture_new(c, on_frame, NULL, err, sizeof(err));
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
			(unsigned long long)st.frames_captured, (unsigned long long)st.frames_dropped,
			(unsigned long long)st.frames_delivered, timecodes_ok, frames);
		if (order_ok && timecodes_ok == frames && st.frames_delivered == (uint64_t)frames)
			r = 0;
		pps_capture_free(cap);
		pps_config_free(c);
		return r;
	}
	fprintf(stderr, "usage: test-capture missing-file|missing-device|bad-pipeline|test-source\n");
	return 2;
}
