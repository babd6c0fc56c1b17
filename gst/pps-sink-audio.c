/* SPDX-License-Identifier: MIT */
/*
 * ppssink's audio pad: a request pad "audio" (mono S16LE at 48 kHz) whose
 * buffers become the stream's Opus track. Its streaming thread re-chunks
 * each buffer into 10 ms blocks, each with the capture time of its first
 * sample mapped from its running time as the frames' are (pps-gst-clock.c,
 * so lip sync holds), and hands them to the server (pps_server_push_audio():
 * encoded on this thread, then the media's bounded hand-over to the loop, a
 * frame dropped and counted when it is full; it never blocks).
 *
 * Like the frames, a live source's buffers go as they come, and those of one
 * that is not live wait for their time on the clock, while the element is
 * PLAYING (GstBaseSink does this for the video pad; this pad is not
 * GstBaseSink's, so it waits itself). A flush, a pause or the pad's
 * deactivation releases the wait.
 */
#include "pps-audio.h"
#include "pps-gst.h"
#include "pps-server-lib.h"

#include <stdlib.h>
#include <string.h>

/* A buffer that starts further than this from where the previous one ended
 * is a gap (as for the capture's own re-chunker, codec/): the partial block
 * before it is dropped rather than placed at a time that never was. */
#define AUDIO_GAP_US 5000

/* What the Opus track is made of (codec/pps-audio.h); anything else goes
 * through audioconvert ! audioresample first. */
GstStaticPadTemplate pps_sink_audio_template = GST_STATIC_PAD_TEMPLATE(
    "audio", GST_PAD_SINK, GST_PAD_REQUEST,
    GST_STATIC_CAPS("audio/x-raw, format = (string) S16LE, rate = (int) 48000, "
                    "channels = (int) 1, layout = (string) interleaved"));

struct pps_sink_audio {
	GstElement *element; /* the ppssink, which owns this */

	GMutex lock;
	GCond cond;           /* playing or flushing changed */
	GstPad *pad;          /* NULL until requested */
	pps_server_t *server; /* where blocks go; NULL: they are not served */
	gboolean flushing;    /* the pad is inactive or flushing */
	gboolean playing;     /* the element is PLAYING: a synced wait may start */
	GstClockID wait_id;   /* the synced wait in progress */
	pps_sink_audio_stats_t stats;

	/* The streaming thread's. */
	GstSegment segment;
	gboolean sync; /* upstream is not live: each buffer waits for its time */
	int16_t block[PPS_AUDIO_BLOCK_SAMPLES];
	size_t fill;      /* samples in block */
	int64_t block_us; /* capture time of block[0] */
	int64_t next_us;  /* where the samples so far end; 0 before the first */
};

pps_sink_audio_t *
pps_sink_audio_new(GstElement *element)
{
	pps_sink_audio_t *a = g_new0(pps_sink_audio_t, 1);

	a->element = element;
	g_mutex_init(&a->lock);
	g_cond_init(&a->cond);
	a->flushing = TRUE;
	gst_segment_init(&a->segment, GST_FORMAT_TIME);
	return a;
}

void
pps_sink_audio_free(pps_sink_audio_t *a)
{
	if (!a)
		return;
	g_mutex_clear(&a->lock);
	g_cond_clear(&a->cond);
	g_free(a);
}

/* Under lock: a synced wait returns (a state change, a flush). */
static void
wake_locked(pps_sink_audio_t *a)
{
	if (a->wait_id)
		gst_clock_id_unschedule(a->wait_id);
	g_cond_broadcast(&a->cond);
}

/* Waits, while PLAYING, until @running on the clock. */
static GstFlowReturn
wait_for(pps_sink_audio_t *a, GstClockTime running)
{
	GstClockReturn done = GST_CLOCK_UNSCHEDULED;

	g_mutex_lock(&a->lock);
	while (done == GST_CLOCK_UNSCHEDULED) {
		GstClock *clock;
		GstClockID id;

		while (!a->flushing && !a->playing)
			g_cond_wait(&a->cond, &a->lock);
		if (a->flushing) {
			g_mutex_unlock(&a->lock);
			return GST_FLOW_FLUSHING;
		}
		clock = gst_element_get_clock(a->element);
		if (!clock)
			break;
		id = gst_clock_new_single_shot_id(clock,
		                                  gst_element_get_base_time(a->element) + running);
		gst_object_unref(clock);
		a->wait_id = id;
		g_mutex_unlock(&a->lock);
		done = gst_clock_id_wait(id, NULL);
		g_mutex_lock(&a->lock);
		a->wait_id = NULL;
		gst_clock_id_unref(id);
	}
	g_mutex_unlock(&a->lock);
	return GST_FLOW_OK;
}

/* Under lock, with a server: @samples S16LE samples at @data (any
 * alignment), the first captured at @capture_us, into 10 ms blocks. */
static void
push_samples(pps_sink_audio_t *a, const guint8 *data, size_t samples, int64_t capture_us,
             gboolean discont)
{
	size_t done = 0;

	if (a->next_us && (discont || llabs(capture_us - a->next_us) > AUDIO_GAP_US)) {
		if (a->fill)
			a->stats.discontinuities++;
		a->fill = 0;
	}
	a->next_us = capture_us + (int64_t)samples * 1000000 / PPS_AUDIO_RATE_HZ;
	while (done < samples) {
		size_t take = PPS_AUDIO_BLOCK_SAMPLES - a->fill;
		int ret;

		if (take > samples - done)
			take = samples - done;
		if (a->fill == 0)
			a->block_us = capture_us + (int64_t)done * 1000000 / PPS_AUDIO_RATE_HZ;
		for (size_t i = 0; i < take; i++) {
			guint16 v;

			memcpy(&v, data + (done + i) * sizeof(v), sizeof(v));
			a->block[a->fill + i] = (int16_t)GUINT16_FROM_LE(v);
		}
		a->fill += take;
		done += take;
		if (a->fill < PPS_AUDIO_BLOCK_SAMPLES)
			break;
		a->fill = 0;
		ret = pps_server_push_audio(a->server, a->block, PPS_AUDIO_BLOCK_SAMPLES,
		                            a->block_us);
		if (ret < 0)
			GST_WARNING_OBJECT(a->element, "audio block refused: %s", g_strerror(-ret));
		else
			a->stats.blocks++;
	}
}

static GstFlowReturn
chain(GstPad *pad, GstObject *parent, GstBuffer *buffer)
{
	pps_sink_audio_t *a = gst_pad_get_element_private(pad);
	GstClockTime running =
	    gst_segment_to_running_time(&a->segment, GST_FORMAT_TIME, GST_BUFFER_PTS(buffer));
	GstFlowReturn ret = GST_FLOW_OK;
	GstMapInfo map;

	(void)parent;
	if (a->sync && GST_CLOCK_TIME_IS_VALID(running))
		ret = wait_for(a, running);
	if (ret == GST_FLOW_OK && gst_buffer_map(buffer, &map, GST_MAP_READ)) {
		g_mutex_lock(&a->lock);
		if (a->server)
			push_samples(a, map.data, map.size / sizeof(int16_t),
			             pps_gst_realtime_of(a->element, running),
			             GST_BUFFER_IS_DISCONT(buffer));
		else
			a->stats.unserved++; /* before the first caps, after EOS */
		g_mutex_unlock(&a->lock);
		gst_buffer_unmap(buffer, &map);
	}
	gst_buffer_unref(buffer);
	return ret;
}

/* As the frames (ppssink's choose_sync()): a source that is not live is paced. */
static void
choose_sync(pps_sink_audio_t *a, GstPad *pad)
{
	GstQuery *query = gst_query_new_latency();
	gboolean live = FALSE;

	if (gst_pad_peer_query(pad, query))
		gst_query_parse_latency(query, &live, NULL, NULL);
	gst_query_unref(query);
	a->sync = !live;
	GST_INFO_OBJECT(a->element, "audio upstream is %slive: %s", live ? "" : "not ",
	                live ? "blocks go as they come" : "paced to real time");
}

/* The streaming thread's state, for a new stream. */
static void
restart(pps_sink_audio_t *a)
{
	gst_segment_init(&a->segment, GST_FORMAT_TIME);
	a->fill = 0;
	a->next_us = 0;
}

static void
set_flushing(pps_sink_audio_t *a, gboolean flushing)
{
	g_mutex_lock(&a->lock);
	a->flushing = flushing;
	wake_locked(a);
	g_mutex_unlock(&a->lock);
}

static gboolean
event(GstPad *pad, GstObject *parent, GstEvent *event)
{
	pps_sink_audio_t *a = gst_pad_get_element_private(pad);
	gboolean ok = TRUE;

	(void)parent;
	switch (GST_EVENT_TYPE(event)) {
	case GST_EVENT_FLUSH_START:
		set_flushing(a, TRUE);
		break;
	case GST_EVENT_FLUSH_STOP:
		set_flushing(a, FALSE);
		restart(a);
		break;
	case GST_EVENT_CAPS:
		/* The template's fixed caps: accept-caps let nothing else in. */
		choose_sync(a, pad);
		break;
	case GST_EVENT_SEGMENT: {
		const GstSegment *segment;

		gst_event_parse_segment(event, &segment);
		if (segment->format != GST_FORMAT_TIME) {
			GST_ELEMENT_ERROR(a->element, STREAM, FORMAT,
			                  ("the audio pad takes a time segment, not %s",
			                   gst_format_get_name(segment->format)),
			                  (NULL));
			ok = FALSE;
			break;
		}
		a->segment = *segment;
		break;
	}
	default:
		/* EOS too: the stream ends with the picture (a partial block
		 * is not sent). */
		break;
	}
	gst_event_unref(event);
	return ok;
}

static gboolean
activate_mode(GstPad *pad, GstObject *parent, GstPadMode mode, gboolean active)
{
	pps_sink_audio_t *a = gst_pad_get_element_private(pad);

	(void)parent;
	if (mode != GST_PAD_MODE_PUSH)
		return FALSE;
	/* Deactivating waits for the streaming thread: its wait ends first. */
	set_flushing(a, !active);
	if (active)
		restart(a);
	return TRUE;
}

GstPad *
pps_sink_audio_request_pad(pps_sink_audio_t *a, GstPadTemplate *templ)
{
	GstElement *element = a->element;
	gboolean running;
	GstPad *pad;

	GST_OBJECT_LOCK(element);
	running =
	    GST_STATE(element) > GST_STATE_READY || GST_STATE_NEXT(element) == GST_STATE_PAUSED;
	GST_OBJECT_UNLOCK(element);
	g_mutex_lock(&a->lock);
	if (a->pad) {
		g_mutex_unlock(&a->lock);
		GST_WARNING_OBJECT(element, "the stream has one audio pad, requested already");
		return NULL;
	}
	pad = gst_pad_new_from_template(templ, "audio");
	a->pad = pad;
	g_mutex_unlock(&a->lock);
	if (running)
		GST_WARNING_OBJECT(element, "audio pad requested while running: a stream that "
		                            "started before has no audio track, its samples are "
		                            "dropped");
	gst_pad_set_element_private(pad, a);
	gst_pad_set_chain_function(pad, chain);
	gst_pad_set_event_function(pad, event);
	gst_pad_set_activatemode_function(pad, activate_mode);
	if (running)
		gst_pad_set_active(pad, TRUE);
	gst_element_add_pad(element, pad);
	return pad;
}

void
pps_sink_audio_release_pad(pps_sink_audio_t *a, GstPad *pad)
{
	g_mutex_lock(&a->lock);
	if (a->pad == pad)
		a->pad = NULL;
	g_mutex_unlock(&a->lock);
	gst_pad_set_active(pad, FALSE);
	gst_element_remove_pad(a->element, pad);
}

gboolean
pps_sink_audio_requested(pps_sink_audio_t *a)
{
	gboolean requested;

	g_mutex_lock(&a->lock);
	requested = a->pad != NULL;
	g_mutex_unlock(&a->lock);
	return requested;
}

void
pps_sink_audio_serve(pps_sink_audio_t *a, pps_server_t *server)
{
	g_mutex_lock(&a->lock);
	a->server = server;
	g_mutex_unlock(&a->lock);
}

void
pps_sink_audio_set_playing(pps_sink_audio_t *a, gboolean playing)
{
	g_mutex_lock(&a->lock);
	a->playing = playing;
	wake_locked(a);
	g_mutex_unlock(&a->lock);
}

void
pps_sink_audio_get_stats(pps_sink_audio_t *a, pps_sink_audio_stats_t *stats)
{
	g_mutex_lock(&a->lock);
	*stats = a->stats;
	g_mutex_unlock(&a->lock);
}
