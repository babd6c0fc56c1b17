/* SPDX-License-Identifier: MIT */
/*
 * ppssrc: a live source that plays a pps-server stream.
 *
 * Two threads. The element's loop thread owns a libevent loop and the
 * client's player (client/: connection -> receiver -> playout, with the
 * clock and the stats): it is the only thread that touches them. When the
 * playout policy says a frame is due, the loop thread copies it into a
 * GstBuffer and queues it (bounded: queue-frames; past it the frame is not
 * taken and counted as an overflow in the log). GstBaseSrc's streaming
 * thread pops items in create(): a frame, end of stream or an error (typed
 * items, the last two once). stop() wakes the loop (pps-wakeup.h); the
 * loop says BYE and returns, and the thread is joined.
 *
 * Timestamps: a frame's PTS is the running time at which the playout showed
 * it (the pipeline clock, less the time it then spent in the queue), as a
 * camera stamps the time a frame was taken; its capture time on the server
 * (client clock, microseconds since the epoch) rides along as a
 * GstReferenceTimestampMeta with caps timestamp/x-unix.
 *
 * Audio: when a stream announces its audio track (and the audio property
 * asked for it), the loop thread adds the sometimes pad "audio"
 * (pps-src-audio.c), fed with each slot the player plays (audio_pcm_cb) and
 * stamped the same way. The picture's end of stream (the server's BYE,
 * num-buffers, an application's EOS) ends the audio too.
 *
 * Relays and URIs: location=HOST:PORT/NAME asks a relay for its stream NAME
 * (the connection puts the name in HELLO); the relay's refusal is an error
 * of code GST_RESOURCE_ERROR_NOT_FOUND (no such stream), NOT_AUTHORIZED or
 * BUSY, from the BYE's reason, so that an application can tell it from a
 * network failure (READ). pps://HOST:PORT[/NAME] (GstURIHandler) is the
 * location with a scheme: playbin and uridecodebin make a ppssrc for it.
 */
#include "pps-client-settings.h"
#include "pps-gst.h"
#include "pps-time.h"
#include "pps-wakeup.h"

#include <errno.h>
#include <event2/event.h>
#include <gst/base/gstpushsrc.h>
#include <gst/video/video.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

GST_DEBUG_CATEGORY_STATIC(pps_src_debug);
#define GST_CAT_DEFAULT pps_src_debug

/* A playout policy may make several frames due at once (a window decoded
 * late, asap after a stall): the queue holds such a burst for downstream. */
#define PPS_SRC_DEFAULT_QUEUE_FRAMES 16
#define PPS_SRC_MAX_QUEUE_FRAMES     64

/* A pps-status element message (pps-client's status line) this often while
 * a stream plays: a bus sees how it goes before the summary at stop. */
#define PPS_SRC_STATUS_INTERVAL_US 1000000

typedef enum {
	ITEM_FRAME, /* a frame due now, with its caps */
	ITEM_EOS,   /* the server ended the stream (BYE normal) */
	ITEM_ERROR, /* no stream, or it failed: the message says why */
} item_kind_t;

typedef struct {
	item_kind_t kind;
	GstBuffer *buffer;     /* ITEM_FRAME */
	GstCaps *caps;         /* ITEM_FRAME */
	int64_t display_us;    /* ITEM_FRAME: client clock when the playout showed it */
	char *message;         /* ITEM_ERROR */
	GstResourceError code; /* ITEM_ERROR */
} item_t;

typedef struct {
	GstPushSrc parent;
	pps_config_t *config;     /* the properties; read by start() only */
	char settings_error[512]; /* the first property value refused, "" if none */
	guint queue_frames;

	/* Hand-over between the loop thread and the streaming thread. */
	GMutex lock;
	GCond cond;
	GQueue items;        /* item_t *: at most queue_frames frames + one final item */
	guint frames_queued; /* ITEM_FRAME items in the queue */
	gboolean flushing;
	gboolean finished; /* the final item is queued */

	/* The loop thread's (set up by start() before the thread exists). */
	GThread *thread;
	struct event_base *base;
	pps_wakeup_t *wakeup; /* stop(): the loop stops the player and returns */
	pps_player_t *player;
	struct event *status_timer; /* PPS_SRC_STATUS_INTERVAL_US: post_status() */
	FILE *log;
	GstCaps *caps;      /* of the current stream; NULL before STREAM_INFO */
	GstVideoInfo vinfo; /* the same */
	char server[300];

	/* The streaming thread's. */
	GstClockTime frame_duration;

	/* The audio pad and its queue, task and counters. */
	pps_src_audio_t *audio;
	gboolean audio_enabled;  /* the audio property, as start() read it */
	gboolean pads_announced; /* loop thread: no-more-pads said */
} GstPpsSrc;

typedef struct {
	GstPushSrcClass parent_class;
} GstPpsSrcClass;

static void gst_pps_src_uri_handler_init(gpointer iface, gpointer data);

G_DEFINE_TYPE_WITH_CODE(GstPpsSrc, gst_pps_src, GST_TYPE_PUSH_SRC,
                        G_IMPLEMENT_INTERFACE(GST_TYPE_URI_HANDLER, gst_pps_src_uri_handler_init))

#define GST_PPS_SRC(obj) ((GstPpsSrc *)(obj))

enum { PROP_0, PROP_QUEUE_FRAMES, PROP_FIRST_KEY };

static pps_gst_properties_t src_properties;

/* Keys of the client's table that make no sense in a pipeline, and names. */
static const pps_gst_property_rule_t src_rules[] = {
    {"display", NULL, NULL, NULL},
    {"client", "server", "location", NULL},
    {"client", "name", "client-name", NULL}, /* GstObject has "name" */
    {"client", "clock", "clock-mode", NULL},
    {"log", "file", "log-file", NULL},
    {"audio", "enabled", "audio", NULL},
    {"audio", "output", NULL, NULL}, /* the audio pad is the output */
    {"audio", "connections", "audio-connections", NULL},
    {"audio", "pool", "audio-pool", NULL},
    {NULL, NULL, NULL, NULL},
};

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE(
    "src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE("I420")));

static void
item_free(item_t *item)
{
	if (item->buffer)
		gst_buffer_unref(item->buffer);
	if (item->caps)
		gst_caps_unref(item->caps);
	g_free(item->message);
	g_free(item);
}

/* ---- loop thread --------------------------------------------------------- */

/* Queues the final item (end of stream or an error of @code); later ones
 * are dropped. */
static void
queue_final(GstPpsSrc *src, item_kind_t kind, GstResourceError code, const char *message)
{
	item_t *item = g_new0(item_t, 1);

	item->kind = kind;
	item->code = code;
	item->message = g_strdup(message);
	g_mutex_lock(&src->lock);
	if (src->finished) {
		g_mutex_unlock(&src->lock);
		item_free(item);
		return;
	}
	src->finished = TRUE;
	g_queue_push_tail(&src->items, item);
	g_cond_signal(&src->cond);
	g_mutex_unlock(&src->lock);
}

static void
player_stream_cb(const pps_wire_stream_info_t *info, void *user)
{
	GstPpsSrc *src = user;
	GstVideoInfo vinfo;

	gst_video_info_set_format(&vinfo, GST_VIDEO_FORMAT_I420, info->width, info->height);
	GST_VIDEO_INFO_FPS_N(&vinfo) = info->fps_num;
	GST_VIDEO_INFO_FPS_D(&vinfo) = info->fps_den;
	GST_VIDEO_INFO_PAR_N(&vinfo) = 1;
	GST_VIDEO_INFO_PAR_D(&vinfo) = 1;
	if (src->caps)
		gst_caps_unref(src->caps);
	src->caps = gst_video_info_to_caps(&vinfo);
	src->vinfo = vinfo;
	if (src->audio_enabled && info->audio_codec)
		pps_src_audio_add_pad(src->audio, info->audio_frame_us);
	/* The stream's pads are known: a branch linked to an audio pad that
	 * does not come (no track, audio=false) gets gst-launch's "Delayed
	 * linking failed" warning. */
	if (!src->pads_announced) {
		src->pads_announced = TRUE;
		gst_element_no_more_pads(GST_ELEMENT(src));
	}
	GST_INFO_OBJECT(src,
	                "connected to %s: %ux%u@%u, %u temporal x %u quality layers, window %u "
	                "frames, budget %u ms",
	                src->server, info->width, info->height, info->fps_num,
	                info->temporal_layers, info->quality_layers, info->window_frames,
	                info->latency_budget_ms);
}

/* One slot the player played: to the audio pad. */
static void
player_audio_cb(const int16_t *pcm, int samples, int64_t play_us, void *user)
{
	GstPpsSrc *src = user;
	char event[96];

	if (pps_src_audio_push(src->audio, pcm, samples, play_us))
		return;
	/* Downstream is behind: not taken, as a frame would not be. */
	snprintf(event, sizeof(event), "\"type\":\"audio_overflow\",\"play_us\":%" G_GINT64_FORMAT,
	         (gint64)play_us);
	pps_stats_event(pps_player_stats(src->player), event);
}

static bool
player_show_cb(const pps_frame_t *picture, const pps_playout_frame_t *meta, int64_t display_us,
               void *user)
{
	GstPpsSrc *src = user;
	GstVideoInfo *vinfo = &src->vinfo;
	GstVideoFrame vframe;
	GstBuffer *buffer;
	GstCaps *ts_caps;
	item_t *item;

	g_mutex_lock(&src->lock);
	if (src->frames_queued >= src->queue_frames || src->flushing) {
		/* Downstream is behind (or flushing): not taken; the player
		 * logs it as an overflow. */
		g_mutex_unlock(&src->lock);
		return false;
	}
	g_mutex_unlock(&src->lock);

	/* The decoder's pictures have the stream's size (the receiver checks). */
	if (!src->caps || GST_VIDEO_INFO_WIDTH(vinfo) != picture->width ||
	    GST_VIDEO_INFO_HEIGHT(vinfo) != picture->height)
		return false;
	buffer = gst_buffer_new_allocate(NULL, GST_VIDEO_INFO_SIZE(vinfo), NULL);
	if (!buffer || !gst_video_frame_map(&vframe, vinfo, buffer, GST_MAP_WRITE)) {
		if (buffer)
			gst_buffer_unref(buffer);
		return false;
	}
	for (int p = 0; p < 3; p++) {
		int w = p ? picture->width / 2 : picture->width;
		int h = p ? picture->height / 2 : picture->height;
		uint8_t *dst = GST_VIDEO_FRAME_PLANE_DATA(&vframe, p);
		int stride = GST_VIDEO_FRAME_PLANE_STRIDE(&vframe, p);

		for (int y = 0; y < h; y++)
			memcpy(dst + (size_t)y * stride,
			       picture->planes[p] + (size_t)y * picture->strides[p], (size_t)w);
	}
	gst_video_frame_unmap(&vframe);
	GST_BUFFER_OFFSET(buffer) = meta->frame;
	ts_caps = gst_caps_new_empty_simple("timestamp/x-unix");
	gst_buffer_add_reference_timestamp_meta(
	    buffer, ts_caps, (GstClockTime)meta->capture_us * GST_USECOND, GST_CLOCK_TIME_NONE);
	gst_caps_unref(ts_caps);

	item = g_new0(item_t, 1);
	item->kind = ITEM_FRAME;
	item->buffer = buffer;
	item->caps = gst_caps_ref(src->caps);
	item->display_us = display_us;
	g_mutex_lock(&src->lock);
	g_queue_push_tail(&src->items, item);
	src->frames_queued++;
	g_cond_signal(&src->cond);
	g_mutex_unlock(&src->lock);
	return true;
}

static void
end_cb(evutil_socket_t fd, short what, void *user)
{
	GstPpsSrc *src = user;

	(void)fd;
	(void)what;
	pps_player_stop(src->player);
}

/* The error an application can act on (playbin, a retry loop): the server
 * (a relay) has no stream of that name, wants a token, or is full; anything
 * else is a failed read. */
static GstResourceError
end_error_code(const pps_connection_end_t *end)
{
	switch (end->bye_reason) {
	case PPS_WIRE_BYE_NO_STREAM:
		return GST_RESOURCE_ERROR_NOT_FOUND;
	case PPS_WIRE_BYE_UNAUTHORIZED:
		return GST_RESOURCE_ERROR_NOT_AUTHORIZED;
	case PPS_WIRE_BYE_SERVER_FULL:
		return GST_RESOURCE_ERROR_BUSY;
	default:
		return GST_RESOURCE_ERROR_READ;
	}
}

static void
player_closed_cb(const pps_connection_end_t *end, void *user)
{
	GstPpsSrc *src = user;
	char message[512];

	if (end->retry_in_us > 0) {
		GST_WARNING_OBJECT(src, "%s; reconnecting in %.1f s", end->why,
		                   (double)end->retry_in_us / 1e6);
		return;
	}
	if (!end->failure) {
		GST_INFO_OBJECT(src, "%s", end->why);
		queue_final(src, ITEM_EOS, 0, NULL);
	} else {
		snprintf(message, sizeof(message), "%s%s: %s",
		         pps_player_ever_streamed(src->player) ? "stream from " : "no stream from ",
		         src->server, end->why);
		queue_final(src, ITEM_ERROR, end_error_code(end), message);
	}
	/* Frames still waiting for their display time are logged "stopped",
	 * once the connection's callback has returned. */
	event_base_once(src->base, -1, EV_TIMEOUT, end_cb, src, &(struct timeval){0, 0});
}

static void
wake_cb(void *user)
{
	GstPpsSrc *src = user;

	pps_player_stop(src->player);
	event_base_loopbreak(src->base);
}

/* The loop thread's second: the rolling figures of pps-client's status line
 * as an element message, pps-status (once a stream is announced). */
static void
post_status(evutil_socket_t fd, short what, void *user)
{
	GstPpsSrc *src = user;
	pps_stats_rolling_t r;
	GstStructure *st;

	(void)fd;
	(void)what;
	pps_stats_rolling(pps_player_stats(src->player), pps_client_realtime_us(NULL), &r);
	if (!pps_player_info(src->player))
		return;
	st = gst_structure_new(
	    "pps-status", "latency-p50-ms", G_TYPE_DOUBLE,
	    isnan(r.latency_p50_ms) ? 0.0 : r.latency_p50_ms, "latency-p95-ms", G_TYPE_DOUBLE,
	    isnan(r.latency_p95_ms) ? 0.0 : r.latency_p95_ms, "fps", G_TYPE_DOUBLE, r.fps_shown,
	    "temporal-layers", G_TYPE_UINT, r.max_temporal_layers, "quality-layers", G_TYPE_UINT,
	    r.max_quality_layers, "bits-per-second", G_TYPE_DOUBLE, r.bits_per_second,
	    "windows-late", G_TYPE_UINT64, r.windows_late, "windows-dropped", G_TYPE_UINT64,
	    r.windows_dropped, "freeze-longest-ms", G_TYPE_DOUBLE, r.freeze_longest_ms, NULL);
	if (r.audio_slots)
		gst_structure_set(st, "audio-played-pct", G_TYPE_DOUBLE,
		                  100.0 * (double)r.audio_played / (double)r.audio_slots,
		                  "mouth-to-ear-p95-ms", G_TYPE_DOUBLE,
		                  isnan(r.mouth_to_ear_p95_ms) ? 0.0 : r.mouth_to_ear_p95_ms, NULL);
	gst_element_post_message(GST_ELEMENT(src), gst_message_new_element(GST_OBJECT(src), st));
}

static gpointer
loop_thread(gpointer data)
{
	GstPpsSrc *src = data;

	pps_player_start(src->player);
	event_base_dispatch(src->base);
	return NULL;
}

/* ---- GstBaseSrc (application and streaming threads) ------------------------ */

/* Everything the loop thread owns, once it has been joined (or never ran). */
static void
teardown(GstPpsSrc *src)
{
	if (src->status_timer)
		event_free(src->status_timer);
	src->status_timer = NULL;
	pps_player_free(src->player);
	src->player = NULL;
	pps_wakeup_free(src->wakeup);
	src->wakeup = NULL;
	if (src->base)
		event_base_free(src->base);
	src->base = NULL;
	if (src->log && fclose(src->log) != 0)
		GST_ELEMENT_WARNING(src, RESOURCE, WRITE,
		                    ("cannot write the log: %s", g_strerror(errno)), (NULL));
	src->log = NULL;
	if (src->caps)
		gst_caps_unref(src->caps);
	src->caps = NULL;
	g_queue_clear_full(&src->items, (GDestroyNotify)item_free);
	src->frames_queued = 0;
}

static gboolean
gst_pps_src_start(GstBaseSrc *bsrc)
{
	static const pps_player_callbacks_t callbacks = {
	    .stream_cb = player_stream_cb,
	    .show_cb = player_show_cb,
	    .closed_cb = player_closed_cb,
	};
	GstPpsSrc *src = GST_PPS_SRC(bsrc);
	pps_client_settings_t settings;
	pps_player_params_t params;
	pps_connection_params_t *conn = &params.connection;
	struct timeval status_tv = pps_time_us_to_timeval(PPS_SRC_STATUS_INTERVAL_US);
	char err[256];
	GError *error = NULL;

	if (src->settings_error[0]) {
		GST_ELEMENT_ERROR(src, RESOURCE, SETTINGS, ("%s", src->settings_error), (NULL));
		return FALSE;
	}
	if (pps_client_settings_from_config(src->config, &settings, err, sizeof(err)) < 0) {
		GST_ELEMENT_ERROR(src, RESOURCE, SETTINGS, ("%s", err), (NULL));
		return FALSE;
	}
	params = settings.player;
	g_strlcpy(src->server, conn->server, sizeof(src->server));
	if (settings.log_path[0]) {
		src->log = fopen(settings.log_path, "w");
		if (!src->log) {
			GST_ELEMENT_ERROR(src, RESOURCE, OPEN_WRITE,
			                  ("log-file %s: %s", settings.log_path, g_strerror(errno)),
			                  (NULL));
			return FALSE;
		}
	}
	params.log = src->log;
	params.program = "ppssrc";
	conn->server = src->server;
	conn->clock_cb = pps_client_realtime_us;
	/* The audio is played on the player's clock into the audio pad, never
	 * on a sound card of the element's own. */
	params.audio_params.output = PPS_AUDIO_OUTPUT_NONE;
	params.audio_pcm_cb = player_audio_cb;
	src->audio_enabled = params.audio;
	src->pads_announced = FALSE;
	pps_src_audio_reset(src->audio);

	src->flushing = FALSE;
	src->finished = FALSE;
	src->frame_duration = GST_CLOCK_TIME_NONE;
	src->base = event_base_new();
	if (src->base)
		src->wakeup = pps_wakeup_new(src->base, wake_cb, src);
	if (src->wakeup)
		src->player = pps_player_new(src->base, &params, &callbacks, src);
	if (src->player)
		src->status_timer = event_new(src->base, -1, EV_PERSIST, post_status, src);
	if (!src->status_timer || event_add(src->status_timer, &status_tv) < 0) {
		GST_ELEMENT_ERROR(
		    src, RESOURCE, FAILED,
		    ("cannot set up the client: %s", g_strerror(errno ? errno : ENOMEM)), (NULL));
		teardown(src);
		return FALSE;
	}
	src->thread = g_thread_try_new("ppssrc-loop", loop_thread, src, &error);
	if (!src->thread) {
		GST_ELEMENT_ERROR(src, RESOURCE, FAILED,
		                  ("cannot start the loop thread: %s", error->message), (NULL));
		g_clear_error(&error);
		teardown(src);
		return FALSE;
	}
	return TRUE;
}

/* The summary of the client's log, on the bus as an element message
 * "pps-summary" and at the end of log-file. */
static void
post_summary(GstPpsSrc *src)
{
	pps_stats_t *stats = pps_player_stats(src->player);
	pps_stats_summary_t s;
	GstStructure *st;

	pps_stats_summarize(stats, &s);
	pps_stats_write_summary(stats, &s, NULL);
	st = gst_structure_new(
	    "pps-summary", "frames-total", G_TYPE_UINT64, s.frames_total, "frames-shown",
	    G_TYPE_UINT64, s.frames_shown, "frames-late", G_TYPE_UINT64, s.frames_late,
	    "frames-overflow", G_TYPE_UINT64, s.frames_overflow, "frame-latency-p50-ms",
	    G_TYPE_DOUBLE, s.frame_latency_p50_ms, "frame-latency-p95-ms", G_TYPE_DOUBLE,
	    s.frame_latency_p95_ms, "freeze-longest-ms", G_TYPE_DOUBLE, s.freeze_longest_ms, NULL);
	if (s.has_audio)
		gst_structure_set(
		    st, "audio-slots", G_TYPE_UINT64, s.audio_slots, "audio-played-pct",
		    G_TYPE_DOUBLE, s.audio_played_pct, "audio-overflow", G_TYPE_UINT64,
		    pps_src_audio_overflow(src->audio), "mouth-to-ear-p50-ms", G_TYPE_DOUBLE,
		    s.mouth_to_ear_p50_ms, "av-skew-p50-ms", G_TYPE_DOUBLE, s.av_skew_p50_ms, NULL);
	if (gst_debug_category_get_threshold(GST_CAT_DEFAULT) >= GST_LEVEL_INFO) {
		char *text = gst_structure_to_string(st);

		GST_INFO_OBJECT(src, "%s", text);
		g_free(text);
	}
	gst_element_post_message(GST_ELEMENT(src), gst_message_new_element(GST_OBJECT(src), st));
}

static gboolean
gst_pps_src_stop(GstBaseSrc *bsrc)
{
	GstPpsSrc *src = GST_PPS_SRC(bsrc);

	if (src->thread) {
		if (pps_wakeup_signal(src->wakeup) < 0)
			GST_WARNING_OBJECT(src, "cannot wake the loop thread");
		g_thread_join(src->thread);
		src->thread = NULL;
		if (pps_player_ever_streamed(src->player))
			post_summary(src);
	}
	teardown(src);
	return TRUE;
}

static gboolean
gst_pps_src_unlock(GstBaseSrc *bsrc)
{
	GstPpsSrc *src = GST_PPS_SRC(bsrc);

	g_mutex_lock(&src->lock);
	src->flushing = TRUE;
	g_cond_broadcast(&src->cond);
	g_mutex_unlock(&src->lock);
	return TRUE;
}

static gboolean
gst_pps_src_unlock_stop(GstBaseSrc *bsrc)
{
	GstPpsSrc *src = GST_PPS_SRC(bsrc);

	g_mutex_lock(&src->lock);
	src->flushing = FALSE;
	g_mutex_unlock(&src->lock);
	return TRUE;
}

/* The caps come from the stream (STREAM_INFO), set with its first frame. */
static gboolean
gst_pps_src_negotiate(GstBaseSrc *bsrc)
{
	GstCaps *caps = gst_pad_get_current_caps(GST_BASE_SRC_PAD(bsrc));
	gboolean ok = TRUE;

	if (caps) {
		ok = gst_base_src_set_caps(bsrc, caps);
		gst_caps_unref(caps);
	}
	return ok;
}

static gboolean
gst_pps_src_query(GstBaseSrc *bsrc, GstQuery *query)
{
	GstPpsSrc *src = GST_PPS_SRC(bsrc);

	if (GST_QUERY_TYPE(query) == GST_QUERY_LATENCY) {
		/* A frame is stamped when the playout shows it and waits at most
		 * queue-frames frames here; one frame before the first is known. */
		GstClockTime frame = GST_CLOCK_TIME_IS_VALID(src->frame_duration)
		                         ? src->frame_duration
		                         : GST_SECOND / 30;

		gst_query_set_latency(query, TRUE, frame, frame * src->queue_frames);
		return TRUE;
	}
	return GST_BASE_SRC_CLASS(gst_pps_src_parent_class)->query(bsrc, query);
}

static GstFlowReturn
gst_pps_src_create(GstPushSrc *psrc, GstBuffer **out)
{
	GstPpsSrc *src = GST_PPS_SRC(psrc);
	GstBaseSrc *bsrc = GST_BASE_SRC(psrc);
	GstCaps *current;
	GstClockTime pts;
	item_t *item;

	g_mutex_lock(&src->lock);
	while (!src->flushing && g_queue_is_empty(&src->items))
		g_cond_wait(&src->cond, &src->lock);
	if (src->flushing) {
		g_mutex_unlock(&src->lock);
		return GST_FLOW_FLUSHING;
	}
	item = g_queue_pop_head(&src->items);
	if (item->kind == ITEM_FRAME)
		src->frames_queued--;
	g_mutex_unlock(&src->lock);

	switch (item->kind) {
	case ITEM_EOS:
		item_free(item);
		return GST_FLOW_EOS;
	case ITEM_ERROR:
		/* GST_ELEMENT_ERROR with the code chosen at run time (it takes
		 * the text). */
		GST_WARNING_OBJECT(src, "error: %s", item->message);
		gst_element_message_full(GST_ELEMENT(src), GST_MESSAGE_ERROR, GST_RESOURCE_ERROR,
		                         item->code, g_strdup(item->message), NULL, __FILE__,
		                         GST_FUNCTION, __LINE__);
		item_free(item);
		return GST_FLOW_ERROR;
	case ITEM_FRAME:
		break;
	}
	current = gst_pad_get_current_caps(GST_BASE_SRC_PAD(bsrc));
	if (!current || !gst_caps_is_equal(current, item->caps)) {
		GstVideoInfo vinfo;

		if (!gst_base_src_set_caps(bsrc, item->caps)) {
			if (current)
				gst_caps_unref(current);
			item_free(item);
			return GST_FLOW_NOT_NEGOTIATED;
		}
		gst_video_info_from_caps(&vinfo, item->caps);
		src->frame_duration = gst_util_uint64_scale(
		    GST_SECOND, GST_VIDEO_INFO_FPS_D(&vinfo), GST_VIDEO_INFO_FPS_N(&vinfo));
		/* A new stream: a longer frame changes the latency. */
		gst_element_post_message(GST_ELEMENT(src),
		                         gst_message_new_latency(GST_OBJECT(src)));
	}
	if (current)
		gst_caps_unref(current);

	/* Stamped when the playout showed it, less its time in the queue. */
	pts = pps_gst_running_time_at(GST_ELEMENT(src), item->display_us);
	if (GST_CLOCK_TIME_IS_VALID(pts))
		GST_BUFFER_PTS(item->buffer) = pts;
	GST_BUFFER_DURATION(item->buffer) = src->frame_duration;
	*out = item->buffer;
	item->buffer = NULL;
	item_free(item);
	return GST_FLOW_OK;
}

/* The picture's end of stream, whoever caused it (the server's BYE,
 * num-buffers, an application's EOS event), ends the audio too. */
static GstPadProbeReturn
video_eos_probe(GstPad *pad, GstPadProbeInfo *info, gpointer user)
{
	GstPpsSrc *src = user;

	(void)pad;
	if (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_EOS)
		pps_src_audio_end(src->audio);
	return GST_PAD_PROBE_OK;
}

static GstStateChangeReturn
gst_pps_src_change_state(GstElement *element, GstStateChange transition)
{
	GstStateChangeReturn ret =
	    GST_ELEMENT_CLASS(gst_pps_src_parent_class)->change_state(element, transition);

	/* The loop thread is joined (stop()): no pad comes any more. */
	if (transition == GST_STATE_CHANGE_PAUSED_TO_READY)
		pps_src_audio_remove_pad(GST_PPS_SRC(element)->audio);
	return ret;
}

/* ---- GstURIHandler: pps://HOST:PORT[/NAME] ----------------------------------- */

#define PPS_SRC_URI_SCHEME "pps://"

static GstURIType
gst_pps_src_uri_get_type(GType type)
{
	(void)type;
	return GST_URI_SRC;
}

static const gchar *const *
gst_pps_src_uri_get_protocols(GType type)
{
	static const gchar *const protocols[] = {"pps", NULL};

	(void)type;
	return protocols;
}

static gchar *
gst_pps_src_uri_get_uri(GstURIHandler *handler)
{
	GstPpsSrc *src = GST_PPS_SRC(handler);

	return g_strdup_printf(PPS_SRC_URI_SCHEME "%s",
	                       pps_config_get_string(src->config, "client", "server"));
}

/* The URI's location is the location property's value (HOST:PORT, or
 * HOST:PORT/NAME for a relay's stream), checked by the same loader; a
 * trailing '/' is no name. The scheme is not case-sensitive (RFC 3986). */
static gboolean
gst_pps_src_uri_set_uri(GstURIHandler *handler, const gchar *uri, GError **error)
{
	GstPpsSrc *src = GST_PPS_SRC(handler);
	size_t scheme = strlen(PPS_SRC_URI_SCHEME);
	char err[512], *location;
	int ret;

	if (src->thread) {
		g_set_error(error, GST_URI_ERROR, GST_URI_ERROR_BAD_STATE,
		            "the URI cannot change while the element is running");
		return FALSE;
	}
	if (!uri || g_ascii_strncasecmp(uri, PPS_SRC_URI_SCHEME, scheme) != 0) {
		g_set_error(error, GST_URI_ERROR, GST_URI_ERROR_UNSUPPORTED_PROTOCOL,
		            "%s: not a pps://HOST:PORT[/NAME] URI", uri ? uri : "(null)");
		return FALSE;
	}
	location = g_strdup(uri + scheme);
	if (g_str_has_suffix(location, "/"))
		location[strlen(location) - 1] = '\0';
	ret = pps_config_set_as(src->config, "client", "server", location, "uri=pps://", err,
	                        sizeof(err));
	g_free(location);
	if (ret < 0) {
		g_set_error(error, GST_URI_ERROR, GST_URI_ERROR_BAD_URI, "%s", err);
		return FALSE;
	}
	g_object_notify(G_OBJECT(src), "location");
	return TRUE;
}

static void
gst_pps_src_uri_handler_init(gpointer iface, gpointer data)
{
	GstURIHandlerInterface *uri = iface;

	(void)data;
	uri->get_type = gst_pps_src_uri_get_type;
	uri->get_protocols = gst_pps_src_uri_get_protocols;
	uri->get_uri = gst_pps_src_uri_get_uri;
	uri->set_uri = gst_pps_src_uri_set_uri;
}

/* ---- GObject ------------------------------------------------------------- */

static void
gst_pps_src_set_property(GObject *object, guint id, const GValue *value, GParamSpec *pspec)
{
	GstPpsSrc *src = GST_PPS_SRC(object);

	if (src->thread) {
		g_warning("%s: %s cannot change while the element is running", GST_OBJECT_NAME(src),
		          pspec->name);
		return;
	}
	if (id == PROP_QUEUE_FRAMES)
		src->queue_frames = g_value_get_uint(value);
	else if (!pps_gst_properties_set(&src_properties, src->config, object, id, value,
	                                 src->settings_error, sizeof(src->settings_error)))
		G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
}

static void
gst_pps_src_get_property(GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
	GstPpsSrc *src = GST_PPS_SRC(object);

	if (id == PROP_QUEUE_FRAMES)
		g_value_set_uint(value, src->queue_frames);
	else if (!pps_gst_properties_get(&src_properties, src->config, id, value))
		G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
}

static void
gst_pps_src_finalize(GObject *object)
{
	GstPpsSrc *src = GST_PPS_SRC(object);

	pps_config_free(src->config);
	pps_src_audio_free(src->audio);
	g_mutex_clear(&src->lock);
	g_cond_clear(&src->cond);
	G_OBJECT_CLASS(gst_pps_src_parent_class)->finalize(object);
}

static void
gst_pps_src_init(GstPpsSrc *src)
{
	src->config = pps_config_new(pps_client_settings_schema());
	g_assert(src->config);
	src->queue_frames = PPS_SRC_DEFAULT_QUEUE_FRAMES;
	src->frame_duration = GST_CLOCK_TIME_NONE;
	g_mutex_init(&src->lock);
	g_cond_init(&src->cond);
	g_queue_init(&src->items);
	src->audio = pps_src_audio_new(GST_ELEMENT(src));
	gst_pad_add_probe(GST_BASE_SRC_PAD(src), GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM,
	                  video_eos_probe, src, NULL);
	gst_base_src_set_live(GST_BASE_SRC(src), TRUE);
	gst_base_src_set_format(GST_BASE_SRC(src), GST_FORMAT_TIME);
}

static void
gst_pps_src_class_init(GstPpsSrcClass *klass)
{
	GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
	GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
	GstBaseSrcClass *base_class = GST_BASE_SRC_CLASS(klass);
	GstPushSrcClass *push_class = GST_PUSH_SRC_CLASS(klass);

	GST_DEBUG_CATEGORY_INIT(pps_src_debug, "ppssrc", 0, "ppstream source");
	gobject_class->set_property = gst_pps_src_set_property;
	gobject_class->get_property = gst_pps_src_get_property;
	gobject_class->finalize = gst_pps_src_finalize;
	g_object_class_install_property(
	    gobject_class, PROP_QUEUE_FRAMES,
	    g_param_spec_uint("queue-frames", "queue-frames",
	                      "decoded frames waiting for downstream at most; past it a due frame "
	                      "is not taken (logged as overflow)",
	                      1, PPS_SRC_MAX_QUEUE_FRAMES, PPS_SRC_DEFAULT_QUEUE_FRAMES,
	                      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
	                          GST_PARAM_MUTABLE_READY));
	pps_gst_properties_install(gobject_class, &src_properties, pps_client_settings_schema(),
	                           PROP_FIRST_KEY, src_rules);

	gst_element_class_set_static_metadata(
	    element_class, "ppstream source", "Source/Network",
	    "Plays a pps-server stream, or a relay's named stream (location HOST:PORT/NAME, or a "
	    "pps://HOST:PORT/NAME URI), with priority-progress streaming over TCP: decoded I420 "
	    "frames, each stamped when the playout policy shows it, and on the audio pad "
	    "(when the stream has a track) each slot of sound stamped when it is played; "
	    "while a stream plays, a pps-status element message each second (latency, layers, "
	    "rates: pps-client's status line), and the summary of frames shown and their "
	    "latency as a pps-summary element message at stop",
	    "ppstream");
	gst_element_class_add_static_pad_template(element_class, &src_template);
	gst_element_class_add_static_pad_template(element_class, &pps_src_audio_template);
	element_class->change_state = gst_pps_src_change_state;

	base_class->start = gst_pps_src_start;
	base_class->stop = gst_pps_src_stop;
	base_class->unlock = gst_pps_src_unlock;
	base_class->unlock_stop = gst_pps_src_unlock_stop;
	base_class->negotiate = gst_pps_src_negotiate;
	base_class->query = gst_pps_src_query;
	push_class->create = gst_pps_src_create;
}
