/* SPDX-License-Identifier: MIT */
/*
 * ppssink: the whole server behind a sink pad.
 *
 * Two threads. GstBaseSink's streaming thread renders each buffer by copying
 * its picture into the server's capture queue (pps_server_push_frame(): the
 * same bounded queue a capture pipeline fills, oldest frame dropped and
 * counted when the encoder is behind; it never blocks). The element's loop
 * thread owns a libevent loop and a pps_server on it, as pps-server's main
 * thread does. The streaming and application threads talk to the loop only
 * through a wake-up (pps-wakeup.h) and atomic flags (end of stream, stop).
 *
 * The server starts with the first caps: their size (cropped to even, as the
 * encoder needs) and frame rate are [source] width, height and fps. Caps that
 * change size later are refused.
 *
 * Audio: the request pad "audio" (pps-sink-audio.c), requested before the
 * server starts, gives the stream an Opus track: its streaming thread hands
 * 10 ms blocks to the server from the server's start to the end of stream.
 *
 * Publishing: with publish=HOST:PORT/NAME the server listens nowhere and
 * pushes its stream to that relay as NAME, exactly as `pps-server --publish`
 * does (pps_server_params_t.publish: the relay is its one client). The
 * connection is made with the first caps, on the streaming thread (bounded
 * by the handshake timeout); when it ends, the element fails.
 */
#include "pps-gst.h"
#include "pps-server-settings.h"
#include "pps-socket.h"
#include "pps-time.h"
#include "pps-wakeup.h"

#include <errno.h>
#include <event2/event.h>
#include <gst/base/gstbasesink.h>
#include <gst/video/video.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

GST_DEBUG_CATEGORY_STATIC(pps_sink_debug);
#define GST_CAT_DEFAULT pps_sink_debug

typedef struct {
	GstBaseSink parent;
	pps_config_t *config;     /* the properties; read when the server starts */
	char settings_error[512]; /* the first property value refused, "" if none */
	guint port;               /* bound; 0 before, and when publishing */
	char *publish;            /* HOST:PORT/NAME of a relay; NULL: listen */

	/* The streaming thread's. */
	GstVideoInfo info;
	int width, height; /* the stream's: info's, cropped to even */

	/* The loop thread's (set up before it exists, freed after the join). */
	GThread *thread;
	struct event_base *base;
	pps_wakeup_t *wakeup;
	struct event *status_timer;
	pps_server_t *server;
	atomic_bool eos, stop, failed;

	pps_sink_audio_t *audio; /* the audio pad */
	gboolean audio_track;    /* the server was made with an audio track */
} GstPpsSink;

typedef struct {
	GstBaseSinkClass parent_class;
} GstPpsSinkClass;

G_DEFINE_TYPE(GstPpsSink, gst_pps_sink, GST_TYPE_BASE_SINK)

#define GST_PPS_SINK(obj) ((GstPpsSink *)(obj))

enum { PROP_0, PROP_PORT, PROP_PUBLISH, PROP_FIRST_KEY };

static pps_gst_properties_t sink_properties;

/* The picture comes from the pipeline: [source] keeps only what applies. */
static const pps_gst_property_rule_t sink_rules[] = {
    {"source", NULL, NULL, NULL},
    {"source", "timecode", "timecode",
     "stamp capture time and frame index into each picture before it is encoded (pixel "
     "timecode, a barcode in the top-left corner); auto = off, the pictures being the "
     "pipeline's"},
    {"source", "queue_frames", "queue-frames", NULL},
    {"adapt", "interval_ms", "adapt-interval-ms", NULL},
    {"audio", "source", NULL, NULL}, /* the audio pad is the source */
    {NULL, NULL, NULL, NULL},
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE(
    "sink", GST_PAD_SINK, GST_PAD_ALWAYS,
    GST_STATIC_CAPS("video/x-raw, format = (string) I420, width = (int) [ 64, 3840 ], "
                    "height = (int) [ 64, 2160 ], framerate = (fraction) [ 1/1, 120/1 ]"));

/* ---- loop thread --------------------------------------------------------- */

/* The server's messages go to GStreamer's log, not to stderr. */
static void
server_log_cb(pps_log_level_t level, const char *message, void *user)
{
	GstPpsSink *sink = user;

	if (level == PPS_LOG_INFO)
		GST_INFO_OBJECT(sink, "%s", message);
	else
		GST_WARNING_OBJECT(sink, "%s", message);
}

/* A failed encoder, or a publisher's lost relay, is an error on the bus at
 * once; render() refuses what follows. */
static void
server_state_cb(pps_server_state_t old_state, pps_server_state_t state, const char *error,
                void *user)
{
	GstPpsSink *sink = user;

	if (state != PPS_SERVER_STATE_FAILED || atomic_exchange(&sink->failed, true))
		return;
	/* Publishing, the one connection is what fails (the encoder of pushed
	 * frames hardly does); the text says which it was. */
	if (sink->publish)
		GST_ELEMENT_ERROR(sink, RESOURCE, WRITE, ("%s", error), (NULL));
	else
		GST_ELEMENT_ERROR(sink, STREAM, ENCODE, ("%s", error), (NULL));
}

static void
wake_cb(void *user)
{
	GstPpsSink *sink = user;
	bool eos = atomic_load(&sink->eos);

	if (eos || atomic_load(&sink->stop)) {
		/* Clients get a clean end: BYE normal, as at a server's shutdown. */
		pps_server_stop(sink->server);
		pps_server_say_bye(sink->server, eos ? "end of stream" : "server shutting down");
		event_base_loopbreak(sink->base);
	}
}

static void
status_cb(evutil_socket_t fd, short what, void *user)
{
	GstPpsSink *sink = user;
	pps_media_stats_t ms;
	pps_listener_stats_t ls;

	pps_server_get_stats(sink->server, &ms, &ls);
	GST_INFO_OBJECT(sink,
	                "%u clients | %" G_GUINT64_FORMAT " frames encoded, %" G_GUINT64_FORMAT
	                " raw frames dropped, %" G_GUINT64_FORMAT " windows, %" G_GUINT64_FORMAT
	                " audio frames (%" G_GUINT64_FORMAT " dropped)",
	                ls.streaming, ms.frames_encoded, ms.capture_dropped, ms.windows,
	                ms.audio_frames, ms.audio_dropped);
}

static gpointer
loop_thread(gpointer data)
{
	GstPpsSink *sink = data;
	sigset_t pipe;

	/*
	 * A write to a client that has gone raises SIGPIPE in the thread that
	 * writes, and its default action ends the whole application: pps-server
	 * ignores it in main(), an element cannot decide that for the process
	 * it lives in. Blocked in this thread, the only one that writes the
	 * clients' sockets, it stays pending and the write fails with EPIPE,
	 * which the session handles as the client's end.
	 */
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, NULL);
	event_base_dispatch(sink->base);
	return NULL;
}

/* ---- the server: built with the first caps -------------------------------- */

static void
teardown(GstPpsSink *sink)
{
	pps_sink_audio_serve(sink->audio, NULL);
	pps_server_free(sink->server);
	sink->server = NULL;
	pps_wakeup_free(sink->wakeup);
	sink->wakeup = NULL;
	if (sink->status_timer)
		event_free(sink->status_timer);
	sink->status_timer = NULL;
	if (sink->base)
		event_base_free(sink->base);
	sink->base = NULL;
	sink->port = 0;
}

static gboolean
set_source_key(GstPpsSink *sink, const char *key, long value)
{
	char text[32], as[64], err[256];

	/* The caps are what the pipeline gave: the message names them. */
	snprintf(text, sizeof(text), "%ld", value);
	snprintf(as, sizeof(as), "caps %s=", strcmp(key, "fps") == 0 ? "framerate" : key);
	if (pps_config_set_as(sink->config, "source", key, text, as, err, sizeof(err)) < 0) {
		GST_ELEMENT_ERROR(sink, CORE, NEGOTIATION, ("%s", err), (NULL));
		return FALSE;
	}
	return TRUE;
}

/* The server, as pps-server serves, and the loop thread. */
static gboolean
start_server(GstPpsSink *sink, int fps)
{
	pps_server_settings_t settings;
	struct timeval status_tv;
	char err[512];
	GError *error = NULL;

	if (!set_source_key(sink, "width", sink->width) ||
	    !set_source_key(sink, "height", sink->height) || !set_source_key(sink, "fps", fps))
		return FALSE;
	if (pps_server_settings_from_config(sink->config, &settings, err, sizeof(err)) < 0) {
		GST_ELEMENT_ERROR(sink, RESOURCE, SETTINGS, ("%s", err), (NULL));
		return FALSE;
	}
	settings.server.pushed = true;
	settings.server.publish = sink->publish;
	settings.server.log = (pps_log_t){.cb = server_log_cb, .user = sink};
	/* The track exists when the audio pad does (its data comes later). */
	sink->audio_track = pps_sink_audio_requested(sink->audio);
	settings.server.media.capture.audio =
	    sink->audio_track ? PPS_CAPTURE_AUDIO_SOURCE : PPS_CAPTURE_AUDIO_OFF;
	sink->base = event_base_new();
	if (sink->base)
		sink->wakeup = pps_wakeup_new(sink->base, wake_cb, sink);
	if (!sink->wakeup) {
		snprintf(err, sizeof(err), "cannot create the event loop: %s", g_strerror(errno));
		goto err;
	}
	sink->server = pps_server_new(sink->base, &settings.server,
	                              &(pps_server_events_t){.state_cb = server_state_cb}, sink,
	                              err, sizeof(err));
	if (!sink->server || pps_server_start(sink->server, err, sizeof(err)) < 0)
		goto err;
	sink->port = pps_server_port(sink->server);
	status_tv = pps_time_us_to_timeval(settings.status_interval_us);
	sink->status_timer = event_new(sink->base, -1, EV_PERSIST, status_cb, sink);
	if (!sink->status_timer || event_add(sink->status_timer, &status_tv) < 0) {
		snprintf(err, sizeof(err), "cannot create the status timer");
		goto err;
	}
	sink->thread = g_thread_try_new("ppssink-loop", loop_thread, sink, &error);
	if (!sink->thread) {
		snprintf(err, sizeof(err), "cannot start the loop thread: %s", error->message);
		g_clear_error(&error);
		goto err;
	}
	if (sink->audio_track)
		pps_sink_audio_serve(sink->audio, sink->server);
	pps_server_describe(sink->server, err, sizeof(err));
	if (sink->publish) {
		GST_INFO_OBJECT(sink, "publishing to %s: %s%s", sink->publish, err,
		                sink->audio_track ? ", with audio" : "");
		/* The relay took the stream: its viewers can ask for it now. */
		gst_element_post_message(
		    GST_ELEMENT(sink),
		    gst_message_new_element(GST_OBJECT(sink),
		                            gst_structure_new("pps-publishing", "publish",
		                                              G_TYPE_STRING, sink->publish, NULL)));
		return TRUE;
	}
	GST_INFO_OBJECT(sink, "listening on %s (port %u): %s%s", settings.server.listen, sink->port,
	                err, sink->audio_track ? ", with audio" : "");
	/* Applications (and tests, with listen=...:0) learn the port here. */
	gst_element_post_message(
	    GST_ELEMENT(sink),
	    gst_message_new_element(GST_OBJECT(sink),
	                            gst_structure_new("pps-listening", "listen", G_TYPE_STRING,
	                                              settings.server.listen, "port", G_TYPE_UINT,
	                                              sink->port, NULL)));
	g_object_notify(G_OBJECT(sink), "port");
	return TRUE;

err:
	GST_ELEMENT_ERROR(sink, RESOURCE, OPEN_READ_WRITE, ("%s", err), (NULL));
	teardown(sink);
	return FALSE;
}

/* ---- GstBaseSink (streaming and application threads) ----------------------- */

/*
 * Like the capture's appsink: a source that is not live (a file) is paced to
 * real time by rendering each buffer at its time; a live one is rendered as
 * it comes, since waiting for its time plus the pipeline's latency would add
 * that latency (some 60 ms with a live videotestsrc, measured on loopback).
 */
static void
choose_sync(GstPpsSink *sink)
{
	GstQuery *query = gst_query_new_latency();
	gboolean live = FALSE;

	if (gst_pad_peer_query(GST_BASE_SINK_PAD(sink), query))
		gst_query_parse_latency(query, &live, NULL, NULL);
	gst_query_unref(query);
	gst_base_sink_set_sync(GST_BASE_SINK(sink), !live);
	GST_INFO_OBJECT(sink, "upstream is %slive: %s", live ? "" : "not ",
	                live ? "frames go as they come" : "paced to real time");
}

static gboolean
gst_pps_sink_set_caps(GstBaseSink *bsink, GstCaps *caps)
{
	GstPpsSink *sink = GST_PPS_SINK(bsink);
	GstVideoInfo info;
	int fps;

	if (!gst_video_info_from_caps(&info, caps))
		return FALSE;
	if (sink->thread) {
		/* The encoder, the clients' decoders and STREAM_INFO are sized. */
		if ((GST_VIDEO_INFO_WIDTH(&info) & ~1) != sink->width ||
		    (GST_VIDEO_INFO_HEIGHT(&info) & ~1) != sink->height) {
			GST_ELEMENT_ERROR(
			    sink, CORE, NEGOTIATION,
			    ("the picture size cannot change while serving (%dx%d, now "
			     "%dx%d)",
			     sink->width, sink->height, GST_VIDEO_INFO_WIDTH(&info),
			     GST_VIDEO_INFO_HEIGHT(&info)),
			    (NULL));
			return FALSE;
		}
		sink->info = info;
		return TRUE;
	}
	choose_sync(sink);
	sink->info = info;
	sink->width = GST_VIDEO_INFO_WIDTH(&info) & ~1;
	sink->height = GST_VIDEO_INFO_HEIGHT(&info) & ~1;
	fps = (int)lround((double)GST_VIDEO_INFO_FPS_N(&info) / GST_VIDEO_INFO_FPS_D(&info));
	return start_server(sink, fps < 1 ? 1 : fps);
}

static GstFlowReturn
gst_pps_sink_render(GstBaseSink *bsink, GstBuffer *buffer)
{
	GstPpsSink *sink = GST_PPS_SINK(bsink);
	GstVideoFrame vframe;
	pps_frame_t frame = {0};
	int ret;

	if (!sink->server)
		return GST_FLOW_NOT_NEGOTIATED;
	if (atomic_load(&sink->failed))
		return GST_FLOW_ERROR;
	if (!gst_video_frame_map(&vframe, &sink->info, buffer, GST_MAP_READ))
		return GST_FLOW_ERROR;
	frame.width = sink->width;
	frame.height = sink->height;
	for (int p = 0; p < 3; p++) {
		frame.planes[p] = GST_VIDEO_FRAME_PLANE_DATA(&vframe, p);
		frame.strides[p] = GST_VIDEO_FRAME_PLANE_STRIDE(&vframe, p);
	}
	/* When the frame was taken: now less how long ago its running time
	 * was (a live source's buffers are stamped at capture). */
	frame.capture_us = pps_gst_realtime_of(
	    GST_ELEMENT(sink),
	    gst_segment_to_running_time(&bsink->segment, GST_FORMAT_TIME, GST_BUFFER_PTS(buffer)));
	/* Copied into the capture queue; never blocks. */
	ret = pps_server_push_frame(sink->server, &frame);
	gst_video_frame_unmap(&vframe);
	if (ret < 0) {
		GST_ELEMENT_ERROR(sink, STREAM, FAILED,
		                  ("cannot queue a frame: %s", g_strerror(-ret)), (NULL));
		return GST_FLOW_ERROR;
	}
	return GST_FLOW_OK;
}

static void
wake_loop(GstPpsSink *sink)
{
	if (pps_wakeup_signal(sink->wakeup) < 0)
		GST_WARNING_OBJECT(sink, "cannot wake the loop thread");
}

static gboolean
gst_pps_sink_event(GstBaseSink *bsink, GstEvent *event)
{
	GstPpsSink *sink = GST_PPS_SINK(bsink);

	if (GST_EVENT_TYPE(event) == GST_EVENT_EOS && sink->thread) {
		/* The stream ended: clients get BYE normal, then the loop returns. */
		pps_sink_audio_serve(sink->audio, NULL);
		atomic_store(&sink->eos, true);
		wake_loop(sink);
		g_thread_join(sink->thread);
		sink->thread = NULL;
	}
	return GST_BASE_SINK_CLASS(gst_pps_sink_parent_class)->event(bsink, event);
}

static gboolean
gst_pps_sink_start(GstBaseSink *bsink)
{
	GstPpsSink *sink = GST_PPS_SINK(bsink);

	if (sink->settings_error[0]) {
		GST_ELEMENT_ERROR(sink, RESOURCE, SETTINGS, ("%s", sink->settings_error), (NULL));
		return FALSE;
	}
	atomic_store(&sink->eos, false);
	atomic_store(&sink->stop, false);
	atomic_store(&sink->failed, false);
	return TRUE;
}

static gboolean
gst_pps_sink_stop(GstBaseSink *bsink)
{
	GstPpsSink *sink = GST_PPS_SINK(bsink);

	if (sink->thread) {
		atomic_store(&sink->stop, true);
		wake_loop(sink);
		g_thread_join(sink->thread);
		sink->thread = NULL;
	}
	if (sink->server) {
		pps_media_stats_t ms;
		pps_listener_stats_t ls;

		pps_server_get_stats(sink->server, &ms, &ls);
		GST_INFO_OBJECT(sink,
		                "%" G_GUINT64_FORMAT " frames encoded (%" G_GUINT64_FORMAT
		                " raw frames dropped), %" G_GUINT64_FORMAT
		                " windows, %" G_GUINT64_FORMAT " clients served, %" G_GUINT64_FORMAT
		                " refused",
		                ms.frames_encoded, ms.capture_dropped, ms.windows, ls.clients_total,
		                ls.clients_refused);
		if (sink->audio_track) {
			pps_sink_audio_stats_t as;

			pps_sink_audio_get_stats(sink->audio, &as);
			GST_INFO_OBJECT(sink,
			                "audio: %" G_GUINT64_FORMAT " blocks in, %" G_GUINT64_FORMAT
			                " frames encoded (%" G_GUINT64_FORMAT
			                " dropped at the hand-over), %" G_GUINT64_FORMAT
			                " buffers unserved, %" G_GUINT64_FORMAT " discontinuities",
			                as.blocks, ms.audio_frames, ms.audio_dropped, as.unserved,
			                as.discontinuities);
		}
	}
	teardown(sink);
	return TRUE;
}

static GstPad *
gst_pps_sink_request_new_pad(GstElement *element, GstPadTemplate *templ, const gchar *name,
                             const GstCaps *caps)
{
	(void)name;
	(void)caps;
	return pps_sink_audio_request_pad(GST_PPS_SINK(element)->audio, templ);
}

static void
gst_pps_sink_release_pad(GstElement *element, GstPad *pad)
{
	pps_sink_audio_release_pad(GST_PPS_SINK(element)->audio, pad);
}

static GstStateChangeReturn
gst_pps_sink_change_state(GstElement *element, GstStateChange transition)
{
	/* A paced audio buffer waits for PLAYING, and again after a pause. */
	if (transition == GST_STATE_CHANGE_PAUSED_TO_PLAYING ||
	    transition == GST_STATE_CHANGE_PLAYING_TO_PAUSED)
		pps_sink_audio_set_playing(GST_PPS_SINK(element)->audio,
		                           transition == GST_STATE_CHANGE_PAUSED_TO_PLAYING);
	return GST_ELEMENT_CLASS(gst_pps_sink_parent_class)->change_state(element, transition);
}

/* ---- GObject ------------------------------------------------------------- */

/* publish=HOST:PORT/NAME, checked as the configuration checks an address and
 * a relay checks a name; "" or NULL: listen. A value refused is left as it
 * was and stops the element at start, as a key's would. */
static void
set_publish(GstPpsSink *sink, const char *value)
{
	char address[300], stream[PPS_STREAM_NAME_MAX_BYTES + 1], host[256], port[16];
	char why[256], err[512];

	if (!value || !value[0]) {
		g_clear_pointer(&sink->publish, g_free);
		return;
	}
	if (pps_stream_location_split(value, address, sizeof(address), stream, sizeof(stream), why,
	                              sizeof(why)) < 0)
		snprintf(err, sizeof(err), "publish=%s: %s", value, why);
	else if (pps_socket_split_address(address, host, sizeof(host), port, sizeof(port)) < 0)
		snprintf(err, sizeof(err), "publish=%s: must be HOST:PORT/NAME", value);
	else if (!stream[0])
		snprintf(err, sizeof(err),
		         "publish=%s: name the stream (HOST:PORT/NAME), as the relay's viewers ask "
		         "for it",
		         value);
	else {
		g_free(sink->publish);
		sink->publish = g_strdup(value);
		return;
	}
	g_warning("%s: %s", GST_OBJECT_NAME(sink), err);
	if (!sink->settings_error[0])
		g_strlcpy(sink->settings_error, err, sizeof(sink->settings_error));
}

static void
gst_pps_sink_set_property(GObject *object, guint id, const GValue *value, GParamSpec *pspec)
{
	GstPpsSink *sink = GST_PPS_SINK(object);

	if (sink->base) {
		g_warning("%s: %s cannot change while the element is serving",
		          GST_OBJECT_NAME(sink), pspec->name);
		return;
	}
	if (id == PROP_PUBLISH)
		set_publish(sink, g_value_get_string(value));
	else if (!pps_gst_properties_set(&sink_properties, sink->config, object, id, value,
	                                 sink->settings_error, sizeof(sink->settings_error)))
		G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
}

static void
gst_pps_sink_get_property(GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
	GstPpsSink *sink = GST_PPS_SINK(object);

	if (id == PROP_PORT)
		g_value_set_uint(value, sink->port);
	else if (id == PROP_PUBLISH)
		g_value_set_string(value, sink->publish);
	else if (!pps_gst_properties_get(&sink_properties, sink->config, id, value))
		G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
}

static void
gst_pps_sink_finalize(GObject *object)
{
	GstPpsSink *sink = GST_PPS_SINK(object);

	pps_config_free(sink->config);
	pps_sink_audio_free(sink->audio);
	g_free(sink->publish);
	G_OBJECT_CLASS(gst_pps_sink_parent_class)->finalize(object);
}

static void
gst_pps_sink_init(GstPpsSink *sink)
{
	sink->config = pps_config_new(pps_server_settings_schema());
	g_assert(sink->config);
	sink->audio = pps_sink_audio_new(GST_ELEMENT(sink));
	/* Until the first caps (choose_sync()). */
	gst_base_sink_set_sync(GST_BASE_SINK(sink), TRUE);
	gst_base_sink_set_qos_enabled(GST_BASE_SINK(sink), FALSE);
}

static void
gst_pps_sink_class_init(GstPpsSinkClass *klass)
{
	GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
	GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
	GstBaseSinkClass *base_class = GST_BASE_SINK_CLASS(klass);

	GST_DEBUG_CATEGORY_INIT(pps_sink_debug, "ppssink", 0, "ppstream sink");
	gobject_class->set_property = gst_pps_sink_set_property;
	gobject_class->get_property = gst_pps_sink_get_property;
	gobject_class->finalize = gst_pps_sink_finalize;
	g_object_class_install_property(
	    gobject_class, PROP_PORT,
	    g_param_spec_uint("port", "port",
	                      "TCP port the server listens on, once serving (listen=HOST:0 lets "
	                      "the kernel choose; also in the pps-listening element message)",
	                      0, 65535, 0, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
	g_object_class_install_property(
	    gobject_class, PROP_PUBLISH,
	    g_param_spec_string(
	        "publish", "publish",
	        "HOST:PORT/NAME: push the stream to that relay (pps-relay) as NAME instead of "
	        "serving viewers (listen is then unused), as pps-server --publish does; the "
	        "relay's challenge is answered with access-token; a pps-publishing element "
	        "message says when the relay took it; the element fails when the connection "
	        "ends. Empty: listen",
	        NULL, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY));
	pps_gst_properties_install(gobject_class, &sink_properties, pps_server_settings_schema(),
	                           PROP_FIRST_KEY, sink_rules);

	gst_element_class_set_static_metadata(
	    element_class, "ppstream sink", "Sink/Network",
	    "Serves raw video to pps-clients with priority-progress streaming: layered x264, "
	    "adaptation windows, a progress regulator and a MIN_BUF TCP socket per client (or "
	    "publishes it to a relay, publish=HOST:PORT/NAME); the picture size and frame rate "
	    "come from the caps (width and height cropped to even); the audio pad, requested "
	    "before the first caps, adds an Opus track",
	    "ppstream");
	gst_element_class_add_static_pad_template(element_class, &sink_template);
	gst_element_class_add_static_pad_template(element_class, &pps_sink_audio_template);
	element_class->request_new_pad = gst_pps_sink_request_new_pad;
	element_class->release_pad = gst_pps_sink_release_pad;
	element_class->change_state = gst_pps_sink_change_state;

	base_class->start = gst_pps_sink_start;
	base_class->stop = gst_pps_sink_stop;
	base_class->set_caps = gst_pps_sink_set_caps;
	base_class->render = gst_pps_sink_render;
	base_class->event = gst_pps_sink_event;
}
