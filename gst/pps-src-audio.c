/* SPDX-License-Identifier: MIT */
/*
 * ppssrc's audio pad: a sometimes pad "audio" (mono S16LE at 48 kHz) added
 * when the stream announces its audio track. Each buffer is one slot the
 * client's audio player played (its jitter buffer, Opus decoding, loss
 * concealment and lip sync are the player's), stamped with the running time
 * of the moment it was played, mapped as the frames' display times are
 * (pps-gst-clock.c), so downstream keeps the player's A/V sync.
 *
 * Two threads, as for the frames: the element's loop thread queues the slots
 * (bounded: PPS_SRC_AUDIO_QUEUE_SLOTS; past it a slot is not taken and
 * counted), the pad's own task pushes them. The end of stream is an item
 * too, queued after the slots before it.
 */
#include "pps-audio.h"
#include "pps-gst.h"

#include <string.h>

/* Audio slots (20 ms each by default) waiting for downstream: half a
 * second, as long as the video's default queue of frames. */
#define PPS_SRC_AUDIO_QUEUE_SLOTS 25

/* The client's audio player plays mono 48 kHz (codec/pps-audio.h). */
#define AUDIO_CAPS                                                                                 \
	"audio/x-raw, format = (string) S16LE, rate = (int) 48000, channels = (int) 1, "           \
	"layout = (string) interleaved"

GstStaticPadTemplate pps_src_audio_template =
    GST_STATIC_PAD_TEMPLATE("audio", GST_PAD_SRC, GST_PAD_SOMETIMES, GST_STATIC_CAPS(AUDIO_CAPS));

/* What the task pushes: a played slot, or the end. */
typedef struct {
	GstBuffer *buffer; /* NULL: end of stream */
	int64_t play_us;   /* client clock: when the player played it */
} item_t;

struct pps_src_audio {
	GstElement *element; /* the ppssrc, which owns this */

	GMutex lock;
	GCond cond;        /* items or flushing changed */
	GstPad *pad;       /* a reference of ours; NULL before the stream's track */
	GQueue items;      /* item_t *: at most PPS_SRC_AUDIO_QUEUE_SLOTS slots + the end */
	guint queued;      /* slots in items */
	gboolean flushing; /* the pad is inactive */
	gboolean ended;    /* the end is queued: no slot taken after it */
	guint64 overflow;  /* slots not taken, the queue full */
	GstClockTime slot; /* one slot's duration: the latency */

	/* The task's. */
	gboolean started;      /* stream-start, caps and segment sent */
	GstClockTime next_pts; /* where the last buffer ended */
};

static void
item_free(item_t *item)
{
	if (item->buffer)
		gst_buffer_unref(item->buffer);
	g_free(item);
}

pps_src_audio_t *
pps_src_audio_new(GstElement *element)
{
	pps_src_audio_t *a = g_new0(pps_src_audio_t, 1);

	a->element = element;
	g_mutex_init(&a->lock);
	g_cond_init(&a->cond);
	g_queue_init(&a->items);
	a->flushing = TRUE;
	pps_src_audio_reset(a);
	return a;
}

void
pps_src_audio_free(pps_src_audio_t *a)
{
	if (!a)
		return;
	pps_src_audio_remove_pad(a);
	g_mutex_clear(&a->lock);
	g_cond_clear(&a->cond);
	g_free(a);
}

void
pps_src_audio_reset(pps_src_audio_t *a)
{
	g_mutex_lock(&a->lock);
	g_queue_clear_full(&a->items, (GDestroyNotify)item_free);
	a->queued = 0;
	a->ended = FALSE;
	a->overflow = 0;
	a->slot = 20 * GST_MSECOND;
	g_mutex_unlock(&a->lock);
	a->started = FALSE;
	a->next_pts = GST_CLOCK_TIME_NONE;
}

/* ---- the task ----------------------------------------------------------------- */

static void
push_events(pps_src_audio_t *a, GstPad *pad)
{
	GstSegment segment;
	GstCaps *caps = gst_caps_from_string(AUDIO_CAPS);
	char *stream_id = gst_pad_create_stream_id(pad, a->element, "audio");

	gst_pad_push_event(pad, gst_event_new_stream_start(stream_id));
	g_free(stream_id);
	gst_pad_push_event(pad, gst_event_new_caps(caps));
	gst_caps_unref(caps);
	/* As the video's: buffers are stamped in running time. */
	gst_segment_init(&segment, GST_FORMAT_TIME);
	gst_pad_push_event(pad, gst_event_new_segment(&segment));
}

static void
task_loop(gpointer data)
{
	GstPad *pad = data;
	pps_src_audio_t *a = gst_pad_get_element_private(pad);
	item_t *item;
	GstBuffer *buffer;
	GstClockTime pts, duration;
	GstFlowReturn ret;

	g_mutex_lock(&a->lock);
	while (!a->flushing && g_queue_is_empty(&a->items))
		g_cond_wait(&a->cond, &a->lock);
	if (a->flushing) {
		g_mutex_unlock(&a->lock);
		gst_pad_pause_task(pad);
		return;
	}
	item = g_queue_pop_head(&a->items);
	if (item->buffer)
		a->queued--;
	g_mutex_unlock(&a->lock);

	if (!a->started) {
		push_events(a, pad);
		a->started = TRUE;
	}
	if (!item->buffer) {
		gst_pad_push_event(pad, gst_event_new_eos());
		item_free(item);
		gst_pad_pause_task(pad);
		return;
	}
	buffer = item->buffer;
	item->buffer = NULL;
	duration = gst_util_uint64_scale(gst_buffer_get_size(buffer) / sizeof(int16_t), GST_SECOND,
	                                 PPS_AUDIO_RATE_HZ);
	pts = pps_gst_running_time_at(a->element, item->play_us);
	item_free(item);
	if (GST_CLOCK_TIME_IS_VALID(pts)) {
		/* A slot played later than the previous one ended (after a gap
		 * in the track, a late loop) or earlier (a shorter delay). */
		if (!GST_CLOCK_TIME_IS_VALID(a->next_pts) || pts > a->next_pts + duration / 2 ||
		    pts + duration / 2 < a->next_pts)
			GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DISCONT);
		GST_BUFFER_PTS(buffer) = pts;
		a->next_pts = pts + duration;
	}
	GST_BUFFER_DURATION(buffer) = duration;
	ret = gst_pad_push(pad, buffer);
	if (ret == GST_FLOW_OK || ret == GST_FLOW_NOT_LINKED)
		return; /* a pad nobody linked: the video plays alone */
	GST_DEBUG_OBJECT(a->element, "audio task paused: %s", gst_flow_get_name(ret));
	g_mutex_lock(&a->lock);
	a->ended = TRUE;
	g_mutex_unlock(&a->lock);
	if (ret == GST_FLOW_NOT_NEGOTIATED || ret < GST_FLOW_EOS) {
		GST_ELEMENT_FLOW_ERROR(a->element, ret);
		gst_pad_push_event(pad, gst_event_new_eos());
	}
	gst_pad_pause_task(pad);
}

static gboolean
activate_mode(GstPad *pad, GstObject *parent, GstPadMode mode, gboolean active)
{
	pps_src_audio_t *a = gst_pad_get_element_private(pad);

	(void)parent;
	if (mode != GST_PAD_MODE_PUSH)
		return FALSE;
	g_mutex_lock(&a->lock);
	a->flushing = !active;
	g_cond_broadcast(&a->cond);
	g_mutex_unlock(&a->lock);
	return active ? gst_pad_start_task(pad, task_loop, pad, NULL) : gst_pad_stop_task(pad);
}

static gboolean
query(GstPad *pad, GstObject *parent, GstQuery *query)
{
	pps_src_audio_t *a = gst_pad_get_element_private(pad);

	if (GST_QUERY_TYPE(query) == GST_QUERY_LATENCY) {
		GstClockTime slot;

		/* As the frames: stamped when played, then queued at most
		 * PPS_SRC_AUDIO_QUEUE_SLOTS slots. */
		g_mutex_lock(&a->lock);
		slot = a->slot;
		g_mutex_unlock(&a->lock);
		gst_query_set_latency(query, TRUE, slot, slot * PPS_SRC_AUDIO_QUEUE_SLOTS);
		return TRUE;
	}
	return gst_pad_query_default(pad, parent, query);
}

/* ---- the loop thread and the element ------------------------------------------- */

void
pps_src_audio_add_pad(pps_src_audio_t *a, unsigned frame_us)
{
	GstPad *pad;

	g_mutex_lock(&a->lock);
	a->slot = (GstClockTime)frame_us * GST_USECOND;
	pad = a->pad;
	g_mutex_unlock(&a->lock);
	if (pad)
		return; /* a reconnection: the same pad goes on */
	pad = gst_pad_new_from_static_template(&pps_src_audio_template, "audio");
	gst_pad_set_element_private(pad, a);
	gst_pad_set_activatemode_function(pad, activate_mode);
	gst_pad_set_query_function(pad, query);
	gst_pad_use_fixed_caps(pad);
	g_mutex_lock(&a->lock);
	a->pad = gst_object_ref(pad);
	g_mutex_unlock(&a->lock);
	GST_INFO_OBJECT(a->element, "the stream has an audio track: pad audio added");
	/* The element is running: gst_element_add_pad() activates it. */
	gst_element_add_pad(a->element, pad);
}

gboolean
pps_src_audio_push(pps_src_audio_t *a, const int16_t *pcm, int samples, int64_t play_us)
{
	GstBuffer *buffer;
	GstMapInfo map;
	item_t *item;

	g_mutex_lock(&a->lock);
	if (!a->pad || a->flushing || a->ended) {
		g_mutex_unlock(&a->lock);
		return TRUE; /* nobody to take it: not an overflow */
	}
	if (a->queued >= PPS_SRC_AUDIO_QUEUE_SLOTS) {
		a->overflow++;
		g_mutex_unlock(&a->lock);
		return FALSE;
	}
	g_mutex_unlock(&a->lock);
	buffer = gst_buffer_new_allocate(NULL, (gsize)samples * sizeof(int16_t), NULL);
	if (!buffer || !gst_buffer_map(buffer, &map, GST_MAP_WRITE)) {
		if (buffer)
			gst_buffer_unref(buffer);
		return TRUE;
	}
	for (int i = 0; i < samples; i++) {
		guint16 v = GUINT16_TO_LE((guint16)pcm[i]);

		memcpy(map.data + (size_t)i * sizeof(v), &v, sizeof(v));
	}
	gst_buffer_unmap(buffer, &map);
	item = g_new0(item_t, 1);
	item->buffer = buffer;
	item->play_us = play_us;
	g_mutex_lock(&a->lock);
	g_queue_push_tail(&a->items, item);
	a->queued++;
	g_cond_signal(&a->cond);
	g_mutex_unlock(&a->lock);
	return TRUE;
}

void
pps_src_audio_end(pps_src_audio_t *a)
{
	g_mutex_lock(&a->lock);
	if (!a->ended) {
		a->ended = TRUE;
		g_queue_push_tail(&a->items, g_new0(item_t, 1));
		g_cond_broadcast(&a->cond);
	}
	g_mutex_unlock(&a->lock);
}

void
pps_src_audio_remove_pad(pps_src_audio_t *a)
{
	GstPad *pad;

	g_mutex_lock(&a->lock);
	pad = a->pad;
	a->pad = NULL;
	g_mutex_unlock(&a->lock);
	if (!pad)
		return;
	/* Stops the task (deactivating a pad joins it) before it goes. */
	gst_pad_set_active(pad, FALSE);
	gst_element_remove_pad(a->element, pad);
	gst_object_unref(pad);
}

guint64
pps_src_audio_overflow(pps_src_audio_t *a)
{
	guint64 n;

	g_mutex_lock(&a->lock);
	n = a->overflow;
	g_mutex_unlock(&a->lock);
	return n;
}
