/* SPDX-License-Identifier: MIT */
/*
 * Capture: a GStreamer pipeline ending in ppstream's appsink (its
 * description: pps-capture-pipeline.c).
 *
 * Threads: GStreamer's streaming thread copies each frame into a bounded
 * queue (appsink callback, never blocks: when the queue is full the oldest
 * frame is dropped and counted); the capture's own delivery thread pops
 * frames, numbers them, stamps the pixel timecode and calls frame_cb. Bus
 * messages are handled synchronously (errors and end of file wake the
 * delivery thread), so there is no GLib main loop to run.
 *
 * Audio, when asked for, is a second branch of the same pipeline ending in
 * the appsink pps_audio_sink: same clock, same base time, so the running
 * times of a sound and a picture captured at the same instant are equal and
 * map to the same capture_us. Its streaming thread re-chunks buffers into
 * 10 ms blocks and calls audio_cb directly (a block is small and the
 * callback copies it). With the test picture and its ticks, the video's
 * streaming thread stamps the flash on the frame of each tick the audio's
 * found (on_tick()).
 */
#include "pps-codec-internal.h"
#include "pps-time.h"

#include <errno.h>
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define START_TIMEOUT_S 10
/* The flash: tick onsets remembered (ticks are 1 s apart, and the audio is
 * never that far ahead of the pictures), and how long a picture waits for
 * the audio of its time to be looked at. */
#define TICKS_KEPT          4
#define FLASH_WAIT_AUDIO_MS 50

struct pps_capture {
	GstElement *pipeline;
	GstElement *appsink;
	pps_capture_frame_cb frame_cb;
	void *user;
	pps_capture_source_t type;
	int width, height;
	bool timecode;
	/* The pipeline's source is live (it returned NO_PREROLL): frames come
	 * at their own pace. Otherwise the appsink syncs to the clock, so a
	 * file is played in real time, and the end of stream loops. */
	bool live;
	char source_name[256]; /* "file '/x.mp4'": for messages */
	/* The pipeline without videorate drop-only, for a source it cannot
	 * handle (slower than [source] fps); NULL for the test source. */
	char *fallback_description;
	const char *src_property; /* "device", "location" or "uri" of pps_src, or NULL */
	char *src_value;
	int fps;

	pps_capture_branch_t audio_branch;
	GstElement *audio_sink; /* pps_audio_sink, or NULL */
	GstElement *mic_bin;    /* PPS_CAPTURE_BRANCH_MIC once added; owned by the pipeline */
	pps_capture_audio_cb audio_cb;
	void *audio_user;
	bool started;      /* pps_capture_start() succeeded */
	bool audio_linked; /* since started: the branch has its source */
	bool mic_failed;   /* the microphone's error: a rebuilt pipeline would fail the same */
	bool flash;        /* the test source with ticks: stamp the tick flash */
	pps_audio_chunker_t chunker; /* the audio streaming thread's */

	pthread_mutex_t lock;
	pthread_cond_t cond;
	pps_frame_t **queue; /* ring of queue_frames entries */
	int queue_frames, queue_head, queue_count;
	pps_frame_t **free_frames;
	int free_count;
	bool stopping, failed, eos, got_frame, got_audio, thread_started;
	char error[512];
	pps_capture_stats_t stats;
	uint32_t next_index;
	/* With the flash (see on_tick()): the ticks found in the audio, the
	 * last few, and where the audio looked at so far ends. */
	pps_audio_tick_detector_t ticks; /* the audio streaming thread's */
	int64_t tick_us[TICKS_KEPT];     /* capture times of onsets, a ring */
	unsigned ticks_found;
	int64_t audio_end_us; /* capture time just after the last block */
	bool audio_late;      /* a frame waited for it in vain: until it moves, none waits */
	pthread_t thread;
};

static void
fail_locked(pps_capture_t *c, const char *reason, const char *detail)
{
	if (c->failed)
		return; /* the first error is the one that explains */
	c->failed = true;
	snprintf(c->error, sizeof(c->error), "%s: %s%s%s%s", c->source_name, reason,
	         detail ? " (" : "", detail ? detail : "", detail ? ")" : "");
	pthread_cond_broadcast(&c->cond);
}

/* "microphone (autoaudiosrc chose pulsesrc)": which of the microphone's
 * elements @src is, for messages. */
static void
name_microphone(GstObject *src, char *out, size_t size)
{
	GstElementFactory *factory =
	    GST_IS_ELEMENT(src) ? gst_element_get_factory(GST_ELEMENT(src)) : NULL;
	const char *chosen = factory ? gst_plugin_feature_get_name(factory) : NULL;

	if (chosen && strcmp(chosen, "autoaudiosrc"))
		snprintf(out, size, "microphone (autoaudiosrc chose %s)", chosen);
	else
		snprintf(out, size, "microphone (autoaudiosrc)");
}

static GstBusSyncReply
bus_message_cb(GstBus *bus, GstMessage *msg, gpointer data)
{
	pps_capture_t *c = data;

	(void)bus;
	if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
		GError *error = NULL;
		char *debug = NULL, reason[200];
		const char *message;
		bool from_mic;

		gst_message_parse_error(msg, &error, &debug);
		message = error ? error->message : "GStreamer error";
		from_mic = c->mic_bin &&
		           gst_object_has_as_ancestor(GST_MESSAGE_SRC(msg), GST_OBJECT(c->mic_bin));
		if (from_mic) {
			/* GStreamer's words ("Could not open device") do not say
			 * that the microphone is what failed. */
			char mic[128];

			name_microphone(GST_MESSAGE_SRC(msg), mic, sizeof(mic));
			snprintf(reason, sizeof(reason), "%s: cannot capture audio: %s", mic,
			         message);
			message = reason;
		}
		pthread_mutex_lock(&c->lock);
		c->mic_failed |= from_mic;
		/* The debug string is "file(line): function: element path:\nreason";
		 * the reason alone keeps the message to one line. */
		fail_locked(c, message,
		            debug && strrchr(debug, '\n') ? strrchr(debug, '\n') + 1 : debug);
		pthread_mutex_unlock(&c->lock);
		g_clear_error(&error);
		g_free(debug);
	}
	/* Nobody pops the bus: drop everything so it cannot grow. */
	return GST_BUS_DROP;
}

static GstClockTime
running_time(GstSample *sample, GstBuffer *buffer)
{
	const GstSegment *segment = gst_sample_get_segment(sample);

	return segment
	           ? gst_segment_to_running_time(segment, GST_FORMAT_TIME, GST_BUFFER_PTS(buffer))
	           : GST_CLOCK_TIME_NONE;
}

/* When the frame (or the audio buffer's first sample) left the source, in
 * CLOCK_REALTIME: now minus the time the buffer spent in the pipeline, from
 * its running time. Video and audio share it, and the pipeline's clock. */
static int64_t
capture_time_us(pps_capture_t *c, GstSample *sample, GstBuffer *buffer)
{
	int64_t now_us = pps_time_realtime_us();
	GstClock *clock = gst_element_get_clock(c->pipeline);
	int64_t age_ns;
	GstClockTime running;

	if (!clock)
		return now_us;
	running = running_time(sample, buffer);
	age_ns = GST_CLOCK_TIME_IS_VALID(running)
	             ? (int64_t)gst_clock_get_time(clock) -
	                   (int64_t)(gst_element_get_base_time(c->pipeline) + running)
	             : 0;
	gst_object_unref(clock);
	if (age_ns < 0 || age_ns > GST_SECOND)
		return now_us; /* not a live timeline: now is the best we know */
	return now_us - age_ns / 1000;
}

/* The one thread that hands frames in: a picture to fill for the next frame,
 * free or else the oldest queued one (dropped and counted: the encoder is
 * behind). */
static pps_frame_t *
take_slot(pps_capture_t *c)
{
	pps_frame_t *frame;

	pthread_mutex_lock(&c->lock);
	c->stats.frames_captured++;
	if (c->free_count > 0) {
		frame = c->free_frames[--c->free_count];
	} else {
		frame = c->queue[c->queue_head];
		c->queue_head = (c->queue_head + 1) % c->queue_frames;
		c->queue_count--;
		c->stats.frames_dropped++;
	}
	pthread_mutex_unlock(&c->lock);
	return frame;
}

static void
queue_slot(pps_capture_t *c, pps_frame_t *frame)
{
	pthread_mutex_lock(&c->lock);
	c->queue[(c->queue_head + c->queue_count) % c->queue_frames] = frame;
	c->queue_count++;
	c->got_frame = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Whether the frame captured at @capture_us is the one of a tick: the first
 * to start within a frame period after a tick's onset, found in the audio
 * itself (audiotestsrc's own tick positions are not a whole number of
 * periods from its start, and live sources do not start at running time 0).
 * The audio of a frame's time is normally looked at before the frame comes
 * (a live source pushes a buffer at its start, a frame too), but the two
 * threads race: the frame waits a little for the audio to catch up.
 */
static bool
on_tick(pps_capture_t *c, int64_t capture_us)
{
	int64_t frame_period_us = 1000000 / c->fps;
	struct timespec deadline = pps_time_ns_to_timespec(pps_time_realtime_ns() +
	                                                   (int64_t)FLASH_WAIT_AUDIO_MS * 1000000);
	bool flash = false;
	int r = 0;

	pthread_mutex_lock(&c->lock);
	while (c->audio_end_us <= capture_us && !c->audio_late && !c->failed && r == 0)
		r = pthread_cond_timedwait(&c->cond, &c->lock, &deadline);
	c->audio_late |= r != 0;
	for (unsigned i = 0; i < c->ticks_found && i < TICKS_KEPT; i++) {
		int64_t since_us = capture_us - c->tick_us[i];

		flash |= since_us >= 0 && since_us < frame_period_us;
	}
	pthread_mutex_unlock(&c->lock);
	return flash;
}

static GstFlowReturn
new_sample_cb(GstAppSink *sink, gpointer data)
{
	pps_capture_t *c = data;
	GstSample *sample = gst_app_sink_pull_sample(sink);
	GstVideoInfo info;
	GstVideoFrame vframe;
	GstBuffer *buffer;
	pps_frame_t *frame;

	if (!sample)
		return GST_FLOW_OK;
	buffer = gst_sample_get_buffer(sample);
	if (!buffer || !gst_video_info_from_caps(&info, gst_sample_get_caps(sample)) ||
	    GST_VIDEO_INFO_WIDTH(&info) != c->width || GST_VIDEO_INFO_HEIGHT(&info) != c->height ||
	    !gst_video_frame_map(&vframe, &info, buffer, GST_MAP_READ)) {
		gst_sample_unref(sample);
		return GST_FLOW_OK;
	}
	frame = take_slot(c);
	for (int p = 0; p < 3; p++) {
		int w = p ? c->width / 2 : c->width;
		int h = p ? c->height / 2 : c->height;
		const uint8_t *src = GST_VIDEO_FRAME_PLANE_DATA(&vframe, p);
		int stride = GST_VIDEO_FRAME_PLANE_STRIDE(&vframe, p);

		for (int y = 0; y < h; y++)
			memcpy(frame->planes[p] + (size_t)y * frame->strides[p],
			       src + (size_t)y * stride, (size_t)w);
	}
	frame->capture_us = capture_time_us(c, sample, buffer);
	if (c->flash)
		pps_timecode_stamp_flash(frame, on_tick(c, frame->capture_us));
	gst_video_frame_unmap(&vframe);
	gst_sample_unref(sample);

	queue_slot(c, frame);
	return GST_FLOW_OK;
}

/* Each 10 ms block: its ticks for the flash, then the application's. */
static void
audio_block_cb(const int16_t *pcm, size_t samples, int64_t capture_us, void *data)
{
	pps_capture_t *c = data;

	if (c->flash) {
		size_t onsets[2];
		size_t n = pps_audio_tick_detector_push(&c->ticks, pcm, samples, onsets, 2);

		pthread_mutex_lock(&c->lock);
		for (size_t i = 0; i < n; i++)
			c->tick_us[c->ticks_found++ % TICKS_KEPT] =
			    capture_us + (int64_t)onsets[i] * 1000000 / PPS_AUDIO_RATE_HZ;
		c->audio_end_us = capture_us + (int64_t)samples * 1000000 / PPS_AUDIO_RATE_HZ;
		c->audio_late = false;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
	}
	if (c->audio_cb)
		c->audio_cb(pcm, samples, capture_us, c->audio_user);
}

static GstFlowReturn
audio_sample_cb(GstAppSink *sink, gpointer data)
{
	pps_capture_t *c = data;
	GstSample *sample = gst_app_sink_pull_sample(sink);
	GstBuffer *buffer;
	GstMapInfo map;

	if (!sample)
		return GST_FLOW_OK;
	buffer = gst_sample_get_buffer(sample);
	/* The caps before the appsink make it S16LE mono at 48 kHz. */
	if (buffer && gst_buffer_map(buffer, &map, GST_MAP_READ)) {
		pps_audio_chunker_push(&c->chunker, map.data, map.size / sizeof(int16_t),
		                       capture_time_us(c, sample, buffer),
		                       GST_BUFFER_IS_DISCONT(buffer), audio_block_cb, c);
		gst_buffer_unmap(buffer, &map);
	}
	gst_sample_unref(sample);

	pthread_mutex_lock(&c->lock);
	c->stats.audio_blocks = c->chunker.blocks;
	c->stats.audio_discontinuities = c->chunker.discontinuities;
	c->stats.audio_samples_dropped = c->chunker.samples_dropped;
	if (!c->got_audio) {
		c->got_audio = true;
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->lock);
	return GST_FLOW_OK;
}

static void
eos_cb(GstAppSink *sink, gpointer data)
{
	pps_capture_t *c = data;

	(void)sink;
	pthread_mutex_lock(&c->lock);
	if (!c->live)
		c->eos = true; /* the delivery thread seeks back to the start */
	else
		fail_locked(c, "end of stream", NULL);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void *
delivery_thread(void *data)
{
	pps_capture_t *c = data;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		pps_frame_t *frame;

		while (!c->stopping && !c->queue_count && !c->failed && !c->eos)
			pthread_cond_wait(&c->cond, &c->lock);
		if (c->stopping)
			break;
		if (c->eos) {
			c->eos = false;
			c->stats.file_loops++;
			pthread_mutex_unlock(&c->lock);
			if (!gst_element_seek_simple(c->pipeline, GST_FORMAT_TIME,
			                             GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_KEY_UNIT,
			                             0)) {
				pthread_mutex_lock(&c->lock);
				fail_locked(
				    c, "end of stream (seeking back to the start to loop failed)",
				    NULL);
				continue;
			}
			pthread_mutex_lock(&c->lock);
			continue;
		}
		if (!c->queue_count) { /* failed, queue drained */
			pthread_mutex_unlock(&c->lock);
			c->frame_cb(NULL, c->user);
			pthread_mutex_lock(&c->lock);
			break;
		}
		frame = c->queue[c->queue_head];
		c->queue_head = (c->queue_head + 1) % c->queue_frames;
		c->queue_count--;
		frame->frame_index = c->next_index++;
		c->stats.frames_delivered++;
		pthread_mutex_unlock(&c->lock);

		if (c->timecode)
			pps_timecode_stamp(frame->planes[0], frame->strides[0], frame->width,
			                   frame->height, frame->frame_index, frame->capture_us);
		c->frame_cb(frame, c->user);

		pthread_mutex_lock(&c->lock);
		c->free_frames[c->free_count++] = frame;
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

const char *const pps_capture_source_names[] = {
    [PPS_CAPTURE_SOURCE_TEST] = "test",         [PPS_CAPTURE_SOURCE_CAMERA] = "camera",
    [PPS_CAPTURE_SOURCE_FILE] = "file",         [PPS_CAPTURE_SOURCE_URI] = "uri",
    [PPS_CAPTURE_SOURCE_PIPELINE] = "pipeline", [PPS_CAPTURE_SOURCE_COUNT] = NULL,
};
const char *const pps_capture_timecode_names[] = {
    [PPS_CAPTURE_TIMECODE_AUTO] = "auto",
    [PPS_CAPTURE_TIMECODE_ON] = "true",
    [PPS_CAPTURE_TIMECODE_OFF] = "false",
    [PPS_CAPTURE_TIMECODE_COUNT] = NULL,
};
const char *const pps_capture_pattern_names[] = {"ball", "smpte", "snow", "bar", "pinwheel", NULL};
const char *const pps_capture_audio_names[] = {
    [PPS_CAPTURE_AUDIO_OFF] = "off",     [PPS_CAPTURE_AUDIO_SOURCE] = "source",
    [PPS_CAPTURE_AUDIO_TICKS] = "ticks", [PPS_CAPTURE_AUDIO_MIC] = "mic",
    [PPS_CAPTURE_AUDIO_COUNT] = NULL,
};

static void
teardown_pipeline(pps_capture_t *c)
{
	GstBus *bus;

	if (!c->pipeline)
		return;
	gst_element_set_state(c->pipeline, GST_STATE_NULL);
	bus = gst_element_get_bus(c->pipeline);
	gst_bus_set_sync_handler(bus, NULL, NULL, NULL);
	gst_object_unref(bus);
	if (c->appsink)
		gst_object_unref(c->appsink);
	if (c->audio_sink)
		gst_object_unref(c->audio_sink);
	gst_object_unref(c->pipeline);
	c->appsink = NULL;
	c->audio_sink = NULL;
	c->mic_bin = NULL;
	c->pipeline = NULL;
}

/* Whether the audio appsink syncs to the clock: a source that is not live
 * needs it for real-time pace, a live one comes at its own. The file's or
 * the user's audio is as live as its video. */
static bool
audio_sync(const pps_capture_t *c)
{
	switch (c->audio_branch) {
	case PPS_CAPTURE_BRANCH_TICKS:
		return !pps_capture_ticks_live(c->type);
	case PPS_CAPTURE_BRANCH_MIC:
		return false;
	default:
		return !c->live;
	}
}

/* Connects pps_audio_sink (found in the pipeline, or in a bin added to it):
 * 0 or -EINVAL with @err. */
static int
connect_audio_sink(pps_capture_t *c, char *err, size_t err_size)
{
	GstAppSinkCallbacks callbacks = {0};

	c->audio_sink = gst_bin_get_by_name(GST_BIN(c->pipeline), "pps_audio_sink");
	if (!c->audio_sink) {
		snprintf(err, err_size, "%s: the pipeline has no audio appsink", c->source_name);
		return -EINVAL;
	}
	/* A few buffers (a decoder's are 20-40 ms) at most: the copy is
	 * immediate. */
	g_object_set(c->audio_sink, "max-buffers", 8, "drop", TRUE, "sync", audio_sync(c), NULL);
	callbacks.new_sample = audio_sample_cb;
	gst_app_sink_set_callbacks(GST_APP_SINK(c->audio_sink), &callbacks, c, NULL);
	return 0;
}

/* Parses @description and connects the appsink and the bus: 0 or -EINVAL with @err. */
static int
build_pipeline(pps_capture_t *c, const char *description, char *err, size_t err_size)
{
	GstAppSinkCallbacks callbacks = {0};
	GError *error = NULL;
	GstElement *src;
	GstBus *bus;

	c->pipeline = gst_parse_launch(description, &error);
	if (!c->pipeline || error) {
		snprintf(err, err_size, "%s: cannot build the GStreamer pipeline: %s",
		         c->source_name, error ? error->message : "unknown error");
		g_clear_error(&error);
		if (c->pipeline) {
			gst_object_unref(c->pipeline);
			c->pipeline = NULL;
		}
		return -EINVAL;
	}
	c->appsink = gst_bin_get_by_name(GST_BIN(c->pipeline), "pps_sink");
	if (!c->appsink) {
		snprintf(err, err_size, "%s: the pipeline has no appsink", c->source_name);
		gst_object_unref(c->pipeline);
		c->pipeline = NULL;
		return -EINVAL;
	}
	src = gst_bin_get_by_name(GST_BIN(c->pipeline), "pps_src");
	if (src) {
		if (c->src_property)
			g_object_set(src, c->src_property, c->src_value, NULL);
		gst_object_unref(src);
	}
	/* The copy is immediate; GStreamer itself need not hold frames. */
	g_object_set(c->appsink, "max-buffers", 2, "drop", TRUE, "sync", !c->live, NULL);
	callbacks.new_sample = new_sample_cb;
	callbacks.eos = eos_cb;
	gst_app_sink_set_callbacks(GST_APP_SINK(c->appsink), &callbacks, c, NULL);
	if (c->audio_branch != PPS_CAPTURE_BRANCH_NONE &&
	    c->audio_branch != PPS_CAPTURE_BRANCH_MIC && connect_audio_sink(c, err, err_size) < 0) {
		teardown_pipeline(c);
		return -EINVAL;
	}
	bus = gst_element_get_bus(c->pipeline);
	gst_bus_set_sync_handler(bus, bus_message_cb, c, NULL);
	gst_object_unref(bus);
	return 0;
}

void
pps_capture_free(pps_capture_t *c)
{
	if (!c)
		return;
	pps_capture_stop(c);
	teardown_pipeline(c);
	g_free(c->fallback_description);
	free(c->src_value);
	for (int i = 0; i < c->queue_count; i++)
		pps_frame_free(c->queue[(c->queue_head + i) % c->queue_frames]);
	for (int i = 0; i < c->free_count; i++)
		pps_frame_free(c->free_frames[i]);
	free(c->queue);
	free(c->free_frames);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* What each source type's input is (NULL: none), whether it must be given,
 * and the pps_src property that takes it (NULL: the pipeline description
 * holds it). */
static const struct {
	const char *what;
	bool required;
	const char *src_property;
} source_inputs[PPS_CAPTURE_SOURCE_COUNT] = {
    [PPS_CAPTURE_SOURCE_TEST] = {NULL, false, NULL},
    [PPS_CAPTURE_SOURCE_CAMERA] = {"device", false, "device"},
    [PPS_CAPTURE_SOURCE_FILE] = {"file", true, "location"},
    [PPS_CAPTURE_SOURCE_URI] = {"uri", true, "uri"},
    [PPS_CAPTURE_SOURCE_PIPELINE] = {"pipeline", true, NULL},
};

bool
pps_capture_source_needs_input(pps_capture_source_t type)
{
	return (unsigned)type < PPS_CAPTURE_SOURCE_COUNT && source_inputs[type].required;
}

/* "source file '/x.mp4'": names the source in messages. */
static void
name_source(const pps_capture_params_t *params, char *out, size_t size)
{
	if (params->type == PPS_CAPTURE_SOURCE_TEST)
		snprintf(out, size, "source test (videotestsrc %s)", params->pattern);
	else
		snprintf(out, size, "source %s '%s'", pps_capture_source_names[params->type],
		         params->input ? params->input : "");
}

/* The capture without a pipeline: its queue and pictures, from @params'
 * width, height and queue_frames. NULL with errno and @err. */
static pps_capture_t *
capture_alloc(const pps_capture_params_t *params, pps_capture_frame_cb frame_cb, void *user,
              const char *source_name, char *err, size_t err_size)
{
	pps_capture_t *c = calloc(1, sizeof(*c));

	if (!c) {
		snprintf(err, err_size, "%s: out of memory", source_name);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->frame_cb = frame_cb;
	c->user = user;
	snprintf(c->source_name, sizeof(c->source_name), "%s", source_name);
	c->width = params->width;
	c->height = params->height;
	c->queue_frames = params->queue_frames;
	if (c->width <= 0 || c->height <= 0 || c->queue_frames <= 0) {
		snprintf(err, err_size, "%s: width, height and queue_frames must be positive",
		         c->source_name);
		pps_capture_free(c);
		errno = EINVAL;
		return NULL;
	}
	if ((c->width | c->height) & 1) {
		snprintf(err, err_size, "%s: width and height must be even", c->source_name);
		pps_capture_free(c);
		errno = EINVAL;
		return NULL;
	}
	/* queue_frames waiting plus the one being delivered. */
	c->queue = calloc((size_t)c->queue_frames, sizeof(*c->queue));
	c->free_frames = calloc((size_t)c->queue_frames + 1, sizeof(*c->free_frames));
	if (!c->queue || !c->free_frames)
		goto err_nomem;
	for (int i = 0; i <= c->queue_frames; i++) {
		pps_frame_t *f = pps_frame_new(c->width, c->height);

		if (!f)
			goto err_nomem;
		c->free_frames[c->free_count++] = f;
	}
	return c;

err_nomem:
	snprintf(err, err_size, "%s: out of memory", c->source_name);
	pps_capture_free(c);
	errno = ENOMEM;
	return NULL;
}

pps_capture_t *
pps_capture_new(const pps_capture_params_t *params, pps_capture_frame_cb frame_cb, void *user,
                char *err, size_t err_size)
{
	pps_capture_source_t type = params->type;
	const char *input = params->input ? params->input : "";
	char name[256];
	pps_capture_t *c;
	char *description;
	int ret;

	if ((unsigned)type >= PPS_CAPTURE_SOURCE_COUNT ||
	    (type == PPS_CAPTURE_SOURCE_TEST && !params->pattern)) {
		snprintf(err, err_size, "capture: no such source");
		errno = EINVAL;
		return NULL;
	}
	if ((unsigned)params->audio >= PPS_CAPTURE_AUDIO_COUNT) {
		snprintf(err, err_size, "capture: no such audio source");
		errno = EINVAL;
		return NULL;
	}
	if (!gst_is_initialized())
		gst_init(NULL, NULL);
	name_source(params, name, sizeof(name));
	c = capture_alloc(params, frame_cb, user, name, err, err_size);
	if (!c)
		return NULL;
	c->type = type;
	c->fps = params->fps;
	/* The ticks source starts with a tick: silence before it. */
	pps_audio_tick_detector_init(&c->ticks, true);
	c->audio_branch = pps_capture_branch(params);
	c->flash = type == PPS_CAPTURE_SOURCE_TEST && c->audio_branch == PPS_CAPTURE_BRANCH_TICKS &&
	           c->fps > 0;
	switch (params->timecode) {
	case PPS_CAPTURE_TIMECODE_AUTO:
		/* The barcode is for measuring: never burnt into a user's picture
		 * unless asked for. */
		c->timecode = c->type == PPS_CAPTURE_SOURCE_TEST;
		break;
	case PPS_CAPTURE_TIMECODE_ON:
		c->timecode = true;
		break;
	default:
		c->timecode = false;
	}
	c->live = c->type == PPS_CAPTURE_SOURCE_TEST;
	if (source_inputs[type].required && !input[0]) {
		snprintf(err, err_size, "%s: no %s given", c->source_name,
		         source_inputs[type].what);
		errno = EINVAL;
		goto err_free;
	}

	c->src_property = source_inputs[type].src_property;
	if (c->src_property)
		c->src_value = strdup(input);
	if (c->src_property && !c->src_value)
		goto err_nomem;
	if (c->type != PPS_CAPTURE_SOURCE_TEST)
		c->fallback_description = pps_capture_describe(params, false);
	description = pps_capture_describe(params, true);
	ret = build_pipeline(c, description, err, err_size);
	g_free(description);
	if (ret < 0 && c->fallback_description) {
		/* Caps fixed in the pipeline itself below [source] fps: drop-only
		 * cannot even link. The plain videorate's error, if any, is the
		 * one that explains. */
		ret = build_pipeline(c, c->fallback_description, err, err_size);
		g_free(c->fallback_description);
		c->fallback_description = NULL;
	}
	if (ret < 0) {
		errno = -ret;
		goto err_free;
	}
	return c;

err_nomem:
	snprintf(err, err_size, "%s: out of memory", c->source_name);
	errno = ENOMEM;
err_free : {
	int saved = errno;

	pps_capture_free(c);
	errno = saved;
}
	return NULL;
}

/*
 * The microphone's bin, added to the pipeline once it is PAUSED: whether the
 * video is live is known by then (a live element would have made the whole
 * pipeline answer NO_PREROLL, and a file's video would play unpaced). 0, or
 * -EIO with c->error (the bus handler names the microphone).
 */
static int
add_microphone(pps_capture_t *c)
{
	GError *error = NULL;
	GstElement *bin = gst_parse_bin_from_description(
	    "autoaudiosrc name=pps_mic ! " PPS_CAPTURE_AUDIO_TAIL, FALSE, &error);
	char err[256];

	if (!bin || error) {
		pthread_mutex_lock(&c->lock);
		c->mic_failed = true;
		fail_locked(c, "microphone (autoaudiosrc): cannot build its pipeline",
		            error ? error->message : NULL);
		pthread_mutex_unlock(&c->lock);
		g_clear_error(&error);
		if (bin)
			gst_object_unref(gst_object_ref_sink(bin)); /* it came floating */
		return -EIO;
	}
	gst_bin_add(GST_BIN(c->pipeline), bin); /* the pipeline owns it now */
	c->mic_bin = bin;
	if (connect_audio_sink(c, err, sizeof(err)) < 0 ||
	    !gst_element_sync_state_with_parent(bin)) {
		pthread_mutex_lock(&c->lock);
		c->mic_failed = true;
		/* A device that cannot open has posted its error already: that
		 * one explains, this one is ignored. */
		fail_locked(c, "microphone (autoaudiosrc): cannot start", NULL);
		pthread_mutex_unlock(&c->lock);
		return -EIO;
	}
	return 0;
}

/* The audio sources that always produce: a capture with one waits for its
 * first block as for the first frame. A file may have no audio track. */
static bool
audio_expected(const pps_capture_t *c)
{
	return c->audio_branch == PPS_CAPTURE_BRANCH_TICKS ||
	       c->audio_branch == PPS_CAPTURE_BRANCH_MIC;
}

/* Plays the pipeline and waits for its first frame (and first audio block,
 * see audio_expected()): 0, or -EIO with c->error (*timed_out: no error,
 * just nothing within the time). Main thread. */
static int
play_until_first_frame(pps_capture_t *c, bool *timed_out)
{
	struct timespec deadline;
	int r = 0;

	*timed_out = false;
	/* A live source answers PAUSED with NO_PREROLL. Until then the appsink
	 * syncs (a non-live source prerolls its first frame meanwhile). */
	c->live = c->type == PPS_CAPTURE_SOURCE_TEST;
	g_object_set(c->appsink, "sync", !c->live, NULL);
	switch (gst_element_set_state(c->pipeline, GST_STATE_PAUSED)) {
	case GST_STATE_CHANGE_NO_PREROLL:
		c->live = true;
		g_object_set(c->appsink, "sync", FALSE, NULL);
		break;
	case GST_STATE_CHANGE_FAILURE:
		pthread_mutex_lock(&c->lock);
		fail_locked(c, "cannot start", NULL);
		pthread_mutex_unlock(&c->lock);
		break;
	default:
		break;
	}
	if (c->audio_sink)
		g_object_set(c->audio_sink, "sync", audio_sync(c), NULL);
	if (c->audio_branch == PPS_CAPTURE_BRANCH_MIC && !c->failed)
		add_microphone(c);
	if (gst_element_set_state(c->pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
		pthread_mutex_lock(&c->lock);
		fail_locked(c, "cannot start", NULL);
		pthread_mutex_unlock(&c->lock);
	}
	/* Wait for the first frame (and block): it proves the source exists
	 * and negotiates. */
	deadline = pps_time_ns_to_timespec(pps_time_realtime_ns() +
	                                   (int64_t)START_TIMEOUT_S * PPS_TIME_NS_PER_S);
	pthread_mutex_lock(&c->lock);
	while ((!c->got_frame || (audio_expected(c) && !c->got_audio)) && !c->failed && r == 0)
		r = pthread_cond_timedwait(&c->cond, &c->lock, &deadline);
	if (!c->failed && !c->got_frame) {
		fail_locked(c, "no frame within 10 s", NULL);
		*timed_out = true;
	} else if (!c->failed && audio_expected(c) && !c->got_audio) {
		fail_locked(c,
		            c->audio_branch == PPS_CAPTURE_BRANCH_MIC
		                ? "microphone (autoaudiosrc): no audio within 10 s"
		                : "ticks (audiotestsrc): no audio within 10 s",
		            NULL);
		*timed_out = true;
	}
	r = c->failed ? -EIO : 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* Whether the audio branch has its source, once the first frame came: by
 * then decodebin has exposed every stream's pad together, and a file
 * without an audio track left the branch unlinked. */
static bool
audio_connected(pps_capture_t *c)
{
	GstElement *in;
	GstPad *pad;
	bool linked;

	if (c->audio_branch != PPS_CAPTURE_BRANCH_DECODED &&
	    c->audio_branch != PPS_CAPTURE_BRANCH_USER)
		return c->audio_branch != PPS_CAPTURE_BRANCH_NONE;
	in = gst_bin_get_by_name(GST_BIN(c->pipeline), "pps_audio_in");
	if (!in)
		return false;
	pad = gst_element_get_static_pad(in, "sink");
	linked = pad && gst_pad_is_linked(pad);
	if (pad)
		gst_object_unref(pad);
	gst_object_unref(in);
	return linked;
}

int
pps_capture_start(pps_capture_t *c, char *err, size_t err_size)
{
	bool timed_out = false;
	/* Pushed by the application: nothing to play, nothing to wait for. */
	int r = c->pipeline ? play_until_first_frame(c, &timed_out) : 0;

	if (r < 0 && !timed_out && !c->mic_failed && c->fallback_description) {
		/* Most likely a source slower than [source] fps, which videorate
		 * drop-only cannot negotiate: again with the plain videorate. A
		 * source that fails for another reason fails again, the same way. */
		teardown_pipeline(c);
		pthread_mutex_lock(&c->lock);
		while (c->queue_count > 0) {
			c->free_frames[c->free_count++] = c->queue[c->queue_head];
			c->queue_head = (c->queue_head + 1) % c->queue_frames;
			c->queue_count--;
		}
		c->failed = c->eos = c->got_frame = c->got_audio = c->mic_failed = false;
		c->error[0] = '\0';
		memset(&c->stats, 0, sizeof(c->stats));
		pps_audio_chunker_reset(&c->chunker);
		pthread_mutex_unlock(&c->lock);
		r = build_pipeline(c, c->fallback_description, err, err_size);
		if (r < 0)
			return r;
		r = play_until_first_frame(c, &timed_out);
	}
	if (r < 0) {
		pthread_mutex_lock(&c->lock);
		snprintf(err, err_size, "%s", c->error);
		pthread_mutex_unlock(&c->lock);
		gst_element_set_state(c->pipeline, GST_STATE_NULL);
		return -EIO;
	}
	if (pthread_create(&c->thread, NULL, delivery_thread, c) != 0) {
		snprintf(err, err_size, "%s: cannot start the delivery thread", c->source_name);
		if (c->pipeline)
			gst_element_set_state(c->pipeline, GST_STATE_NULL);
		return -EAGAIN;
	}
	c->thread_started = true;
	c->started = true;
	c->audio_linked = audio_connected(c);
	if (c->audio_linked && !c->live && c->audio_sink)
		/* The file has audio: from now on its appsink prerolls as the
		 * video's does. Otherwise, at each loop's flushing seek, it
		 * would go on playing while the video's re-prerolls, render
		 * the new start at once against the old base time, and give
		 * those blocks wrong capture times (measured: 10 ms steps
		 * backwards). */
		g_object_set(c->audio_sink, "async", TRUE, NULL);
	return 0;
}

void
pps_capture_stop(pps_capture_t *c)
{
	if (c->pipeline)
		gst_element_set_state(c->pipeline, GST_STATE_NULL);
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	if (c->thread_started) {
		pthread_join(c->thread, NULL);
		c->thread_started = false;
	}
}

void
pps_capture_get_stats(pps_capture_t *c, pps_capture_stats_t *stats)
{
	pthread_mutex_lock(&c->lock);
	*stats = c->stats;
	pthread_mutex_unlock(&c->lock);
}

const char *
pps_capture_error(pps_capture_t *c)
{
	return c->error;
}

void
pps_capture_set_audio_cb(pps_capture_t *c, pps_capture_audio_cb cb, void *user)
{
	c->audio_cb = cb;
	c->audio_user = user;
}

bool
pps_capture_has_audio(const pps_capture_t *c)
{
	return c->audio_branch != PPS_CAPTURE_BRANCH_NONE && (!c->started || c->audio_linked);
}

pps_capture_t *
pps_capture_new_push(const pps_capture_params_t *params, pps_capture_frame_cb frame_cb, void *user,
                     char *err, size_t err_size)
{
	pps_capture_t *c = capture_alloc(params, frame_cb, user, "source pushed by the application",
	                                 err, err_size);

	if (!c)
		return NULL;
	/* The application's own picture: a barcode only when asked for. */
	c->timecode = params->timecode == PPS_CAPTURE_TIMECODE_ON;
	c->live = true;
	return c;
}

int
pps_capture_push(pps_capture_t *c, const pps_frame_t *frame)
{
	pps_frame_t *slot;

	if (c->pipeline || frame->width != c->width || frame->height != c->height)
		return -EINVAL;
	slot = take_slot(c);
	pps_frame_copy(slot, frame); /* the delivery thread numbers it */
	queue_slot(c, slot);
	return 0;
}

void
pps_capture_push_end(pps_capture_t *c, const char *why)
{
	pthread_mutex_lock(&c->lock);
	fail_locked(c, why, NULL);
	pthread_mutex_unlock(&c->lock);
}
