/* SPDX-License-Identifier: MIT */
/*
 * The capture's audio branch (suite codec): the test source's ticks come in
 * contiguous 10 ms blocks, and the picture that flashes for a tick has the
 * tick's capture time (lip sync by construction); a file's audio track is
 * delivered (file and uri), a file without one still plays its video; a
 * microphone that is not there fails at start with a message naming it.
 * Usage: test-capture-audio [-t WORD] GST_LAUNCH TMPDIR
 */
#include "pps-codec.h"
#include "pps-test.h"

#include <errno.h>
#include <pthread.h>

#include <glib.h>

#include "pps-time.h"

#define BLOCK      PPS_AUDIO_BLOCK_SAMPLES
#define MAX_BLOCKS 400 /* 4 s */
#define MAX_FRAMES 200
/* Bounded waits: a capture that stalls fails the case with a message
 * instead of hanging until meson's timeout. */
#define WAIT_S 20

static const char *gst_launch, *tmpdir;

/* What the callbacks saw, under lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int16_t pcm[MAX_BLOCKS * BLOCK];
static int64_t block_us[MAX_BLOCKS];
static int blocks;
static int64_t frame_us[MAX_FRAMES];
static bool frame_flash[MAX_FRAMES];
static int frames;
static bool wrong_block_size;

static void
reset(void)
{
	pthread_mutex_lock(&lock);
	blocks = frames = 0;
	wrong_block_size = false;
	pthread_mutex_unlock(&lock);
}

static void
audio_cb(const int16_t *block, size_t samples, int64_t capture_us, void *user)
{
	(void)user;
	pthread_mutex_lock(&lock);
	if (samples != BLOCK)
		wrong_block_size = true;
	else if (blocks < MAX_BLOCKS) {
		memcpy(pcm + (size_t)blocks * BLOCK, block, BLOCK * sizeof(*block));
		block_us[blocks] = capture_us;
	}
	blocks++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void
frame_cb(const pps_frame_t *f, void *user)
{
	(void)user;
	if (!f)
		return;
	pthread_mutex_lock(&lock);
	if (frames < MAX_FRAMES) {
		frame_us[frames] = f->capture_us;
		frame_flash[frames] =
		    pps_timecode_read_flash(f->planes[0], f->strides[0], f->width, f->height);
	}
	frames++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

/* Waits until @want_blocks blocks and @want_frames frames came (or WAIT_S
 * passed): whether they did. */
static bool
wait_for(int want_blocks, int want_frames)
{
	struct timespec deadline =
	    pps_time_ns_to_timespec(pps_time_realtime_ns() + (int64_t)WAIT_S * PPS_TIME_NS_PER_S);
	int r = 0;
	bool ok;

	pthread_mutex_lock(&lock);
	while ((blocks < want_blocks || frames < want_frames) && r == 0)
		r = pthread_cond_timedwait(&cond, &lock, &deadline);
	ok = blocks >= want_blocks && frames >= want_frames;
	if (!ok)
		fprintf(stderr, "after %d s: %d blocks (want %d), %d frames (want %d)\n", WAIT_S,
		        blocks, want_blocks, frames, want_frames);
	pthread_mutex_unlock(&lock);
	return ok;
}

static pps_capture_params_t
source(pps_capture_source_t type, const char *input, pps_capture_audio_t audio)
{
	return (pps_capture_params_t){
	    .type = type,
	    .input = input,
	    .pattern = "ball",
	    .width = 320,
	    .height = 240,
	    .fps = 30,
	    .queue_frames = 8,
	    .timecode = PPS_CAPTURE_TIMECODE_AUTO,
	    .audio = audio,
	};
}

static pps_capture_t *
start(pps_capture_params_t params)
{
	char err[512] = "";
	pps_capture_t *cap = pps_capture_new(&params, frame_cb, NULL, err, sizeof(err));

	if (!cap) {
		fprintf(stderr, "new: %s\n", err);
		return NULL;
	}
	pps_capture_set_audio_cb(cap, audio_cb, NULL);
	if (pps_capture_start(cap, err, sizeof(err)) < 0) {
		fprintf(stderr, "start: %s\n", err);
		pps_capture_free(cap);
		return NULL;
	}
	return cap;
}

/* The capture time of sample @n of the blocks received. */
static int64_t
sample_us(size_t n)
{
	return block_us[n / BLOCK] + (int64_t)(n % BLOCK) * 1000000 / PPS_AUDIO_RATE_HZ;
}

/* Consecutive blocks 10 ms apart. The capture times are derived per buffer
 * from two clock reads: microseconds of jitter, ~100 us when the thread is
 * preempted between them (seen on the 2-core machine). */
static void
check_contiguous(int n)
{
	int off = 0;

	for (int b = 1; b < n; b++) {
		int64_t step = block_us[b] - block_us[b - 1];

		if (step < 9000 || step > 11000) {
			if (off++ < 5)
				fprintf(stderr, "block %d: %lld us after the previous one\n", b,
				        (long long)step);
		}
	}
	CHECK(off == 0, "%d of %d blocks not 10 ms after the previous one", off, n);
}

/*
 * The test source with audio=source: the ticks. 2.5 s of blocks; the ticks
 * at 1 s and 2 s are found in them (the one at 0 has no silence before it
 * in what was captured) and each has a flashing picture whose capture time
 * is within a frame period of the tick's.
 */
static void
capture_audio_ticks(void)
{
	pps_capture_params_t params = source(PPS_CAPTURE_SOURCE_TEST, "", PPS_CAPTURE_AUDIO_SOURCE);
	pps_capture_t *cap;
	pps_capture_stats_t st;
	size_t onsets[8], found;
	int n, flashes = 0;

	reset();
	cap = start(params);
	REQUIRE(cap);
	CHECK(pps_capture_has_audio(cap));
	CHECK(wait_for(250, 0));
	pps_capture_stop(cap);
	pps_capture_get_stats(cap, &st);

	pthread_mutex_lock(&lock);
	n = blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS;
	CHECK(!wrong_block_size);
	CHECK_EQ_INT(st.audio_blocks, (uint64_t)blocks);
	CHECK_EQ_INT(st.audio_discontinuities, 0);
	check_contiguous(n);
	found = pps_audio_find_ticks(pcm, (size_t)n * BLOCK, onsets, 8);
	fprintf(stderr, "%d blocks, %d frames, %zu ticks found\n", n, frames, found);
	CHECK(found >= 2, "ticks: %zu", found);
	for (int f = 0; f < frames && f < MAX_FRAMES; f++)
		flashes += frame_flash[f];
	/* One flash per tick, and one for the tick at 0 if its frame came. */
	CHECK(flashes >= (int)found && flashes <= (int)found + 1, "%d flashes for %zu ticks",
	      flashes, found);
	for (size_t t = 0; t < found; t++) {
		int64_t tick_us = sample_us(onsets[t]), best = INT64_MAX;

		for (int f = 0; f < frames && f < MAX_FRAMES; f++)
			if (frame_flash[f] && llabs(frame_us[f] - tick_us) < llabs(best))
				best = frame_us[f] - tick_us;
		fprintf(stderr, "tick %zu at sample %zu: flash %+lld us from it\n", t, onsets[t],
		        best == INT64_MAX ? 0 : (long long)best);
		CHECK(best != INT64_MAX && llabs(best) <= 1000000 / 30,
		      "tick %zu: no flash within a frame period", t);
	}
	pthread_mutex_unlock(&lock);
	pps_capture_free(cap);
}

/* Makes a 2-s clip at @path with gst-launch-1.0: 320x240 VP8 at 30 frames/s
 * and, @with_audio, Vorbis ticks at 44.1 kHz (resampled by the capture). */
static bool
make_clip(const char *path, bool with_audio)
{
	char location[600];
	const char *video[] = {"videotestsrc",
	                       "num-buffers=60",
	                       "!",
	                       "video/x-raw,width=320,height=240,framerate=30/1",
	                       "!",
	                       "vp8enc",
	                       "deadline=1",
	                       "!",
	                       "webmmux",
	                       "name=mux",
	                       "!",
	                       "filesink",
	                       location};
	const char *audio[] = {"audiotestsrc",
	                       "wave=ticks",
	                       "num-buffers=87",
	                       "!",
	                       "audio/x-raw,rate=44100",
	                       "!",
	                       "vorbisenc",
	                       "!",
	                       "mux."};
	char *argv[40] = {(char *)gst_launch, "-q"};
	int argc = 2, status = 0;
	GError *error = NULL;

	snprintf(location, sizeof(location), "location=%s", path);
	for (size_t i = 0; i < sizeof(video) / sizeof(video[0]); i++)
		argv[argc++] = (char *)video[i];
	for (size_t i = 0; with_audio && i < sizeof(audio) / sizeof(audio[0]); i++)
		argv[argc++] = (char *)audio[i];
	if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, &status,
	                  &error) ||
	    !g_spawn_check_wait_status(status, &error)) {
		fprintf(stderr, "gst-launch-1.0 cannot make %s: %s\n", path,
		        error ? error->message : "?");
		g_clear_error(&error);
		return false;
	}
	return true;
}

/* A file's audio (through @type file or uri): blocks at the file's pace,
 * the ticks in them, and the video too; 3 s of it, across the clip's loop
 * at 2 s, where the audio jumps back with the video. */
static void
file_with_audio(pps_capture_source_t type, const char *path)
{
	char uri[600];
	pps_capture_t *cap;
	pps_capture_stats_t st;
	size_t onsets[8], found;
	int n, jumps = 0;

	snprintf(uri, sizeof(uri), "file://%s", path);
	reset();
	cap = start(
	    source(type, type == PPS_CAPTURE_SOURCE_URI ? uri : path, PPS_CAPTURE_AUDIO_SOURCE));
	REQUIRE(cap);
	CHECK(pps_capture_has_audio(cap));
	CHECK(wait_for(300, 60));
	pps_capture_stop(cap);
	pps_capture_get_stats(cap, &st);

	pthread_mutex_lock(&lock);
	n = blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS;
	CHECK(!wrong_block_size);
	found = pps_audio_find_ticks(pcm, (size_t)n * BLOCK, onsets, 8);
	fprintf(stderr,
	        "%s: %d blocks over %.2f s, %d frames, %zu ticks, %llu loops, "
	        "%llu discontinuities (%llu samples dropped)\n",
	        pps_capture_source_names[type], n,
	        n > 1 ? (double)(block_us[n - 1] - block_us[0]) / 1e6 : 0.0, frames, found,
	        (unsigned long long)st.file_loops, (unsigned long long)st.audio_discontinuities,
	        (unsigned long long)st.audio_samples_dropped);
	/* Paced as the video is: 300 blocks over about 3 s, not at once. */
	CHECK(n > 1 && block_us[n - 1] - block_us[0] > 2000000, "audio not paced");
	CHECK(st.file_loops >= 1);
	/* The clip's tick at 1 s, and its tick at 0 again after the loop. */
	CHECK(found >= 2, "ticks: %zu", found);
	/* Time goes on across the loop: 10 ms steps but at discontinuities,
	 * where it still goes forward. */
	for (int b = 1; b < n; b++) {
		int64_t step = block_us[b] - block_us[b - 1];

		if (step < 9000 || step > 11000) {
			fprintf(stderr, "block %d: %lld us after the previous one\n", b,
			        (long long)step);
			CHECK(step > 0);
			jumps++;
		}
	}
	CHECK(jumps <= (int)st.audio_discontinuities, "%d jumps, %llu discontinuities", jumps,
	      (unsigned long long)st.audio_discontinuities);
	pthread_mutex_unlock(&lock);
	pps_capture_free(cap);
}

static void
capture_audio_av_file(void)
{
	char path[512];

	REQUIRE(gst_launch && tmpdir);
	snprintf(path, sizeof(path), "%s/pps-audio-av.webm", tmpdir);
	REQUIRE(make_clip(path, true));
	file_with_audio(PPS_CAPTURE_SOURCE_FILE, path);
	file_with_audio(PPS_CAPTURE_SOURCE_URI, path);
	unlink(path);
}

/* audio=source on a file without an audio track: its video plays, the
 * capture says it has no audio. */
static void
capture_audio_video_only_file(void)
{
	char path[512];
	pps_capture_t *cap;
	pps_capture_stats_t st;

	REQUIRE(gst_launch && tmpdir);
	snprintf(path, sizeof(path), "%s/pps-audio-v.webm", tmpdir);
	REQUIRE(make_clip(path, false));
	reset();
	cap = start(source(PPS_CAPTURE_SOURCE_FILE, path, PPS_CAPTURE_AUDIO_SOURCE));
	REQUIRE(cap);
	CHECK(!pps_capture_has_audio(cap));
	CHECK(wait_for(0, 45));
	pps_capture_stop(cap);
	pps_capture_get_stats(cap, &st);
	CHECK_EQ_INT(st.audio_blocks, 0);
	CHECK(st.frames_delivered >= 45);
	pps_capture_free(cap);
	unlink(path);
}

/* The microphone without a sound card: pps_capture_start() fails, one line
 * naming the microphone. A machine where one works has nothing to test. */
static void
capture_audio_mic_missing(void)
{
	pps_capture_params_t params = source(PPS_CAPTURE_SOURCE_TEST, "", PPS_CAPTURE_AUDIO_MIC);
	char err[512] = "";
	pps_capture_t *cap = pps_capture_new(&params, frame_cb, NULL, err, sizeof(err));
	int r;

	REQUIRE(cap);
	CHECK(pps_capture_has_audio(cap));
	pps_capture_set_audio_cb(cap, audio_cb, NULL);
	r = pps_capture_start(cap, err, sizeof(err));
	pps_capture_free(cap);
	if (r == 0) {
		fprintf(stderr, "a microphone works here: skipped\n");
		exit(77);
	}
	fprintf(stderr, "message: %s\n", err);
	CHECK_EQ_INT(r, -EIO);
	CHECK(strstr(err, "microphone (autoaudiosrc") && strstr(err, "source test"), "%s", err);
	CHECK(!strchr(err, '\n'));
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	gst_launch = argc > 1 ? argv[1] : NULL;
	tmpdir = argc > 2 ? argv[2] : NULL;
	PPS_TEST_RUN(capture_audio_ticks);
	PPS_TEST_RUN(capture_audio_video_only_file);
	PPS_TEST_RUN(capture_audio_av_file);
	PPS_TEST_RUN(capture_audio_mic_missing);
	return pps_test_result();
}
