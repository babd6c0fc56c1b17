/* SPDX-License-Identifier: MIT */
/*
 * Capture: a GStreamer pipeline ending in ppstream's appsink.
 *
 * Threads: GStreamer's streaming thread copies each frame into a bounded
 * queue (appsink callback, never blocks: when the queue is full the oldest
 * frame is dropped and counted); the capture's own delivery thread pops
 * frames, numbers them, stamps the pixel timecode and calls frame_cb. Bus
 * messages are handled synchronously (errors and end of file wake the
 * delivery thread), so there is no GLib main loop to run.
 */
#include "pps-codec.h"
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

	pthread_mutex_t lock;
	pthread_cond_t cond;
	pps_frame_t **queue; /* ring of queue_frames entries */
	int queue_frames, queue_head, queue_count;
	pps_frame_t **free_frames;
	int free_count;
	bool stopping, failed, eos, got_frame, thread_started;
	char error[512];
	pps_capture_stats_t stats;
	uint32_t next_index;
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

static GstBusSyncReply
bus_message_cb(GstBus *bus, GstMessage *msg, gpointer data)
{
	pps_capture_t *c = data;

	(void)bus;
	if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
		GError *error = NULL;
		char *debug = NULL;

		gst_message_parse_error(msg, &error, &debug);
		pthread_mutex_lock(&c->lock);
		/* The debug string is "file(line): function: element path:\nreason";
		 * the reason alone keeps the message to one line. */
		fail_locked(c, error ? error->message : "GStreamer error",
		            debug && strrchr(debug, '\n') ? strrchr(debug, '\n') + 1 : debug);
		pthread_mutex_unlock(&c->lock);
		g_clear_error(&error);
		g_free(debug);
	}
	/* Nobody pops the bus: drop everything so it cannot grow. */
	return GST_BUS_DROP;
}

/* When the frame left the source, in CLOCK_REALTIME: now minus the time the
 * buffer spent in the pipeline, from its running time. */
static int64_t
capture_time_us(pps_capture_t *c, GstSample *sample, GstBuffer *buffer)
{
	int64_t now_us = pps_time_realtime_us();
	GstClock *clock = gst_element_get_clock(c->pipeline);
	const GstSegment *segment = gst_sample_get_segment(sample);
	int64_t age_ns;
	GstClockTime running;

	if (!clock)
		return now_us;
	running =
	    segment ? gst_segment_to_running_time(segment, GST_FORMAT_TIME, GST_BUFFER_PTS(buffer))
	            : GST_CLOCK_TIME_NONE;
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
	gst_video_frame_unmap(&vframe);
	gst_sample_unref(sample);

	queue_slot(c, frame);
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

/*
 * videorate drop-only=true: a plain videorate holds every frame until the
 * next one arrives, to choose between them: one frame interval (33 ms at
 * 30 frames/s, measured with pad probes around it) between capture and the
 * encoder. In drop-only mode it passes each frame on at once and only drops
 * frames of a faster source; it cannot make a slower source (a 25 frames/s
 * file) meet the caps, so for those pps_capture_start() falls back to the
 * plain videorate and its hold.
 */
static char *
describe_pipeline(pps_capture_t *c, const pps_capture_params_t *params, bool drop_only)
{
	const char *pattern = params->pattern;
	int fps = params->fps;
	const char *videorate = drop_only ? "videorate drop-only=true" : "videorate";
	char caps[160];

	snprintf(caps, sizeof(caps),
	         "video/x-raw,format=I420,width=%d,height=%d,framerate=%d/1,"
	         "pixel-aspect-ratio=1/1",
	         c->width, c->height, fps);
	switch (c->type) {
	case PPS_CAPTURE_SOURCE_TEST:
		/* Static patterns scroll, so that the encoder has motion to code. */
		return g_strdup_printf(
		    "videotestsrc is-live=true pattern=%s%s ! %s ! appsink name=pps_sink", pattern,
		    strcmp(pattern, "ball") && strcmp(pattern, "snow") ? " horizontal-speed=2" : "",
		    caps);
	case PPS_CAPTURE_SOURCE_CAMERA:
		return g_strdup_printf("v4l2src name=pps_src ! videoconvert ! videoscale ! "
		                       "%s ! %s ! appsink name=pps_sink",
		                       videorate, caps);
	case PPS_CAPTURE_SOURCE_FILE:
		return g_strdup_printf("filesrc name=pps_src ! decodebin ! "
		                       "videoconvert ! videoscale ! %s ! %s ! "
		                       "appsink name=pps_sink",
		                       videorate, caps);
	case PPS_CAPTURE_SOURCE_URI:
		/* Only the video pad links; other streams (audio) stay unlinked,
		 * which demuxers tolerate while one stream is linked. */
		return g_strdup_printf("uridecodebin name=pps_src ! videoconvert ! videoscale ! "
		                       "%s ! %s ! appsink name=pps_sink",
		                       videorate, caps);
	default:
		return g_strdup_printf("%s ! videoconvert ! videoscale ! %s ! %s ! "
		                       "appsink name=pps_sink",
		                       params->input, videorate, caps);
	}
}

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
	gst_object_unref(c->pipeline);
	c->appsink = NULL;
	c->pipeline = NULL;
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
	if (!gst_is_initialized())
		gst_init(NULL, NULL);
	name_source(params, name, sizeof(name));
	c = capture_alloc(params, frame_cb, user, name, err, err_size);
	if (!c)
		return NULL;
	c->type = type;
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
		c->fallback_description = describe_pipeline(c, params, false);
	description = describe_pipeline(c, params, true);
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

/* Plays the pipeline and waits for its first frame: 0, or -EIO with c->error
 * (*timed_out: no error, just no frame). Main thread. */
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
	if (gst_element_set_state(c->pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
		pthread_mutex_lock(&c->lock);
		fail_locked(c, "cannot start", NULL);
		pthread_mutex_unlock(&c->lock);
	}
	/* Wait for the first frame: it proves the source exists and negotiates. */
	deadline = pps_time_ns_to_timespec(pps_time_realtime_ns() +
	                                   (int64_t)START_TIMEOUT_S * PPS_TIME_NS_PER_S);
	pthread_mutex_lock(&c->lock);
	while (!c->got_frame && !c->failed && r == 0)
		r = pthread_cond_timedwait(&c->cond, &c->lock, &deadline);
	if (!c->failed && !c->got_frame) {
		fail_locked(c, "no frame within 10 s", NULL);
		*timed_out = true;
	}
	r = c->failed ? -EIO : 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}

int
pps_capture_start(pps_capture_t *c, char *err, size_t err_size)
{
	bool timed_out = false;
	/* Pushed by the application: nothing to play, nothing to wait for. */
	int r = c->pipeline ? play_until_first_frame(c, &timed_out) : 0;

	if (r < 0 && !timed_out && c->fallback_description) {
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
		c->failed = c->eos = c->got_frame = false;
		c->error[0] = '\0';
		memset(&c->stats, 0, sizeof(c->stats));
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
