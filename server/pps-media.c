/* SPDX-License-Identifier: MIT */
/*
 * Capture and encoding off the main thread, handed to the loop.
 *
 * The capture's delivery thread runs the encoder (codec/ owns that thread);
 * each ADU and each "frames complete" mark goes into a bounded queue, and an
 * eventfd wakes the loop, which feeds the windower on its own thread (the way
 * Weston's remoting plugin hands GStreamer's messages to its loop through a
 * pipe). The loop never blocks on the encoder; the encoder waits only when
 * the loop is PPS_MEDIA_QUEUE_ITEMS items behind.
 */
#include "pps-server-internal.h"
#include "pps-time.h"
#include "pps-wakeup.h"

#include "pps-audio.h"
#include "pps-codec.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the encoder thread hands to the loop: a tagged item (STYLE, "Typed
 * messages across threads"). */
typedef enum {
	ITEM_ADU,         /* payload.adu: one reference, for the windower */
	ITEM_FRAMES_DONE, /* payload.frames_complete: every ADU of frames 0 .. n-1 is out */
	ITEM_AUDIO,       /* payload.audio: one encoded audio frame, the loop frees it */
} item_kind_t;

/* One encoded audio frame, from the audio thread to the loop. */
typedef struct {
	uint32_t seq;
	int64_t capture_us;
	uint16_t duration_us;
	uint8_t flags; /* PPS_WIRE_AUDIO_SPEECH */
	uint16_t len;
	uint8_t data[];
} audio_item_t;

typedef struct {
	item_kind_t kind;
	union {
		pps_adu_t *adu;
		uint32_t frames_complete;
		audio_item_t *audio;
	} payload;
} item_t;

#define READY_BIN_US 100
#define READY_BINS   10001

static void
item_clear(item_t *item)
{
	if (item->kind == ITEM_ADU)
		pps_adu_unref(item->payload.adu);
	else if (item->kind == ITEM_AUDIO)
		free(item->payload.audio);
}

/* A gap in the audio's capture times larger than this starts a new frame
 * (a file loop, a dropped buffer): the partial one is dropped. */
#define AUDIO_DISCONT_US 5000

struct pps_media {
	struct event_base *base;
	pps_media_events_t events;
	void *user;
	pps_log_t log;
	pps_capture_t *capture;
	pps_encoder_t *encoder;
	pps_windower_t *windower;
	pps_stream_params_t stream;
	pps_wire_stream_info_t info;
	pps_wakeup_t *wakeup;
	bool failure_reported; /* failed_cb called (set by the loop thread, under lock) */
	atomic_bool idr_requested;
	atomic_bool b_frames;        /* wanted: the loop sets, the encoder thread takes */
	atomic_int drain_crf;        /* wanted: the loop sets, the encoder thread takes */
	int64_t last_idr_request_us; /* loop thread only */
	struct event *idr_timer;     /* a deferred request */
	uint64_t idr_requests, idr_deferred;
	pps_encoder_rates_t rates; /* loop thread: last handed over */
	bool rate_adaptive;

	pthread_mutex_t lock;
	pthread_cond_t room;
	item_t items[PPS_MEDIA_QUEUE_ITEMS];
	size_t head, count;
	pps_encoder_rates_t pending_rates; /* under lock */
	bool rates_pending;                /* under lock */
	bool stopping;
	bool failed;
	char error[256];
	char probe_note[512];              /* why the source's own size is not known; "": none */
	pps_media_stats_t stats;           /* under lock */
	pps_encoder_stats_t encoder_stats; /* under lock: as of the last frame encoded */

	/* The audio track: encoded on the capture's audio thread (a 20 ms
	 * Opus frame costs well under a millisecond), handed over as items. */
	pps_audio_encoder_t *audio_encoder; /* NULL: no audio track */
	pps_media_audio_params_t audio_params;
	int audio_frame_samples;
	int16_t *audio_pcm; /* one frame being filled */
	int audio_fill;     /* samples in it */
	int64_t audio_frame_capture_us;
	uint32_t audio_seq;
	int audio_bitrate_bps;         /* audio thread: in force */
	atomic_int audio_bitrate_want; /* loop thread: asked */
	/* under lock: capture -> ready, 0.1 ms bins, the last one for >= 1 s */
	uint32_t ready_hist[READY_BINS];
};

static void
wake_loop(pps_media_t *m)
{
	/* A failed write (the eventfd gone) is a bug; the counter never fills. */
	int ret = pps_wakeup_signal(m->wakeup);

	assert(ret == 0);
	(void)ret;
}

/*
 * Encoder thread: queue one item, waiting while the queue is full. Wakes the
 * loop when the queue was empty: otherwise a wake-up is pending already (the
 * loop reads the eventfd before it drains, and drains everything queued), so
 * an ADU reaches the loop at once (a base goes out while its enhancement is
 * encoded) without a write per item.
 */
static void
push_item(pps_media_t *m, item_t item)
{
	bool was_empty;

	pthread_mutex_lock(&m->lock);
	while (m->count == PPS_MEDIA_QUEUE_ITEMS && !m->stopping) {
		m->stats.queue_waits++;
		pthread_cond_wait(&m->room, &m->lock);
	}
	if (m->stopping) {
		pthread_mutex_unlock(&m->lock);
		item_clear(&item);
		return;
	}
	was_empty = m->count == 0;
	m->items[(m->head + m->count) % PPS_MEDIA_QUEUE_ITEMS] = item;
	m->count++;
	pthread_mutex_unlock(&m->lock);
	if (was_empty)
		wake_loop(m);
}

/* Audio thread: queue an encoded frame unless the queue is full (then it
 * is dropped and counted: audio must not wait, a late frame is worthless). */
static void
push_audio_item(pps_media_t *m, audio_item_t *audio)
{
	bool was_empty;

	pthread_mutex_lock(&m->lock);
	if (m->count == PPS_MEDIA_QUEUE_ITEMS || m->stopping) {
		m->stats.audio_dropped++;
		pthread_mutex_unlock(&m->lock);
		free(audio);
		return;
	}
	was_empty = m->count == 0;
	m->items[(m->head + m->count) % PPS_MEDIA_QUEUE_ITEMS] =
	    (item_t){.kind = ITEM_AUDIO, .payload.audio = audio};
	m->count++;
	m->stats.audio_frames++;
	m->stats.audio_bytes += audio->len;
	pthread_mutex_unlock(&m->lock);
	if (was_empty)
		wake_loop(m);
}

/* The capture's audio thread: 10 ms blocks into frames, each frame encoded. */
static void
capture_audio_cb(const int16_t *pcm, size_t samples, int64_t capture_us, void *user)
{
	pps_media_t *m = user;
	uint8_t packet[PPS_SCHED_MAX_AUDIO_BYTES];
	audio_item_t *item;
	int want, n;

	if (m->audio_fill > 0 && llabs(capture_us - (m->audio_frame_capture_us +
	                                             (int64_t)m->audio_fill * 1000000 /
	                                                 PPS_AUDIO_RATE_HZ)) > AUDIO_DISCONT_US)
		m->audio_fill = 0; /* a discontinuity: start the frame again */
	while (samples > 0) {
		size_t take = (size_t)(m->audio_frame_samples - m->audio_fill);

		if (take > samples)
			take = samples;
		if (m->audio_fill == 0)
			m->audio_frame_capture_us = capture_us;
		memcpy(m->audio_pcm + m->audio_fill, pcm, take * sizeof(*pcm));
		m->audio_fill += (int)take;
		pcm += take;
		samples -= take;
		capture_us += (int64_t)take * 1000000 / PPS_AUDIO_RATE_HZ;
		if (m->audio_fill < m->audio_frame_samples)
			break;
		m->audio_fill = 0;
		want = atomic_load(&m->audio_bitrate_want);
		if (want != m->audio_bitrate_bps &&
		    pps_audio_encoder_set_bitrate(m->audio_encoder, want) == 0)
			m->audio_bitrate_bps = want;
		n = pps_audio_encoder_encode(m->audio_encoder, m->audio_pcm, packet,
		                             sizeof(packet));
		if (n <= 0) {
			pthread_mutex_lock(&m->lock);
			m->stats.audio_encode_errors++;
			pthread_mutex_unlock(&m->lock);
			continue;
		}
		item = malloc(sizeof(*item) + (size_t)n);
		if (!item) {
			pthread_mutex_lock(&m->lock);
			m->stats.audio_dropped++;
			pthread_mutex_unlock(&m->lock);
			continue;
		}
		item->seq = m->audio_seq++;
		item->capture_us = m->audio_frame_capture_us;
		item->duration_us =
		    (uint16_t)(m->audio_frame_samples * 1000000LL / PPS_AUDIO_RATE_HZ);
		item->flags = pps_audio_is_speech(m->audio_pcm, (size_t)m->audio_frame_samples,
		                                  m->audio_params.speech_threshold_dbfs)
		                  ? PPS_WIRE_AUDIO_SPEECH
		                  : 0;
		item->len = (uint16_t)n;
		memcpy(item->data, packet, (size_t)n);
		push_audio_item(m, item);
	}
}

static void
encoder_adu_cb(pps_adu_t *adu, void *user)
{
	push_item(user, (item_t){.kind = ITEM_ADU, .payload.adu = adu});
}

/* Capture delivery thread. */
static void
capture_frame_cb(const pps_frame_t *frame, void *user)
{
	pps_media_t *m = user;
	pps_encoder_stats_t es;
	int ret;

	if (!frame) {
		pthread_mutex_lock(&m->lock);
		m->failed = true;
		snprintf(m->error, sizeof(m->error), "%s", pps_capture_error(m->capture));
		pthread_mutex_unlock(&m->lock);
		wake_loop(m);
		return;
	}
	if (atomic_exchange(&m->idr_requested, false))
		pps_encoder_request_idr(m->encoder);
	pps_encoder_set_anchor_windows(m->encoder, !atomic_load(&m->b_frames));
	pps_encoder_set_crf_offset(m->encoder, atomic_load(&m->drain_crf));
	pthread_mutex_lock(&m->lock);
	if (m->rates_pending) {
		pps_encoder_rates_t rates = m->pending_rates;

		m->rates_pending = false;
		pthread_mutex_unlock(&m->lock);
		/* Its only error, -EINVAL, was ruled out on the loop
		 * (pps_media_set_rates); x264 refusing it later is counted in
		 * the encoder's reconfig_errors. */
		pps_encoder_set_rates(m->encoder, &rates);
	} else {
		pthread_mutex_unlock(&m->lock);
	}
	ret = pps_encoder_encode(m->encoder, frame, encoder_adu_cb, m);
	pps_encoder_get_stats(m->encoder, &es);
	pthread_mutex_lock(&m->lock);
	m->encoder_stats = es;
	if (ret < 0) {
		m->failed = true;
		snprintf(m->error, sizeof(m->error), "encoder: %s", strerror(-ret));
	}
	pthread_mutex_unlock(&m->lock);
	if (ret < 0)
		wake_loop(m);
	else
		push_item(m, (item_t){.kind = ITEM_FRAMES_DONE,
		                      .payload.frames_complete =
		                          pps_encoder_frames_complete(m->encoder)});
}

static void idr_timer_cb(evutil_socket_t fd, short what, void *user);

/* The window is whole (or closed short): its ready time for the stats. */
static void
count_ready(pps_media_t *m, const pps_window_t *window)
{
	int64_t held_us = pps_time_realtime_us() - pps_window_first_capture_us(window);
	int64_t bin = held_us < 0 ? 0 : held_us / READY_BIN_US;

	pthread_mutex_lock(&m->lock);
	m->stats.windows++;
	m->ready_hist[bin < READY_BINS - 1 ? bin : READY_BINS - 1]++;
	m->stats.ready_samples++;
	pthread_mutex_unlock(&m->lock);
}

static void
windower_window_cb(pps_window_t *window, void *user)
{
	pps_media_t *m = user;

	if (!pps_window_is_open(window)) {
		count_ready(m, window);
	} else {
		pthread_mutex_lock(&m->lock);
		m->stats.windows_early++;
		pthread_mutex_unlock(&m->lock);
	}
	m->events.window_cb(window, m->user);
}

static void
windower_grow_cb(pps_window_t *window, void *user)
{
	pps_media_t *m = user;

	if (!pps_window_is_open(window))
		count_ready(m, window);
	m->events.window_grew_cb(window, m->user);
}

/* Loop thread: drain the queue into the windower. */
static void
wake_cb(void *user)
{
	pps_media_t *m = user;
	item_t batch[64];
	char error[sizeof(m->error)];
	bool failed_now = false;
	size_t n;

	do {
		pthread_mutex_lock(&m->lock);
		/* A failed source or encoder is announced once, after what it
		 * encoded before failing, within the lock the drain takes anyway. */
		if (m->failed && !m->failure_reported) {
			memcpy(error, m->error, sizeof(error));
			m->failure_reported = failed_now = true;
		}
		n = m->count < 64 ? m->count : 64;
		for (size_t i = 0; i < n; i++) {
			batch[i] = m->items[m->head];
			m->head = (m->head + 1) % PPS_MEDIA_QUEUE_ITEMS;
			switch (batch[i].kind) {
			case ITEM_ADU: {
				const pps_adu_t *adu = batch[i].payload.adu;

				m->stats.adus++;
				m->stats.bytes[pps_adu_info(adu)->quality_layer] +=
				    pps_adu_size(adu);
				break;
			}
			case ITEM_FRAMES_DONE:
				m->stats.frames_encoded = batch[i].payload.frames_complete;
				break;
			case ITEM_AUDIO:
				break;
			}
		}
		m->count -= n;
		pthread_cond_signal(&m->room);
		pthread_mutex_unlock(&m->lock);
		for (size_t i = 0; i < n; i++) {
			int ret = 0;

			switch (batch[i].kind) {
			case ITEM_ADU: /* the windower takes the reference, even when it refuses it
			                */
				if (m->events.adu_cb)
					m->events.adu_cb(batch[i].payload.adu, m->user);
				ret = pps_windower_add(m->windower, batch[i].payload.adu);
				break;
			case ITEM_FRAMES_DONE:
				if (batch[i].payload.frames_complete > 0)
					ret = pps_windower_frames_done(
					    m->windower, batch[i].payload.frames_complete - 1);
				break;
			case ITEM_AUDIO: {
				const audio_item_t *a = batch[i].payload.audio;
				pps_wire_audio_frame_t frame = {
				    .seq = a->seq,
				    .capture_us = a->capture_us,
				    .duration_us = a->duration_us,
				    .flags = a->flags,
				    .payload_len = a->len,
				    .payload = a->data,
				};

				if (m->events.audio_cb)
					m->events.audio_cb(&frame, m->user);
				free(batch[i].payload.audio);
				break;
			}
			}
			if (ret < 0)
				pps_log(&m->log, PPS_LOG_WARNING, "windower: %s", strerror(-ret));
		}
	} while (n == 64);
	if (failed_now && m->events.failed_cb)
		m->events.failed_cb(error, m->user);
}

/* The audio track of a capture that has one: its encoder, its frame buffer,
 * and the STREAM_INFO tail that announces it. */
static int
setup_audio(pps_media_t *m, const pps_media_params_t *params, char *err, size_t err_size)
{
	m->audio_params = params->audio;
	m->audio_encoder = pps_audio_encoder_new(&params->audio.encoder);
	if (!m->audio_encoder) {
		snprintf(err, err_size,
		         "audio: cannot create the Opus encoder (%d ms, %d bit/s): %s",
		         params->audio.encoder.frame_ms, params->audio.encoder.bitrate_bps,
		         strerror(errno));
		return -1;
	}
	m->audio_frame_samples = pps_audio_encoder_frame_samples(m->audio_encoder);
	m->audio_pcm = calloc((size_t)m->audio_frame_samples, sizeof(*m->audio_pcm));
	if (!m->audio_pcm) {
		snprintf(err, err_size, "audio: out of memory");
		return -1;
	}
	m->audio_bitrate_bps = params->audio.encoder.bitrate_bps;
	atomic_store(&m->audio_bitrate_want, m->audio_bitrate_bps);
	pps_capture_set_audio_cb(m->capture, capture_audio_cb, m);
	m->info.audio_codec = PPS_WIRE_AUDIO_CODEC_OPUS;
	m->info.audio_channels = PPS_AUDIO_CHANNELS;
	m->info.audio_transport = (uint8_t)params->audio.transport;
	m->info.audio_copies = params->audio.transport == PPS_WIRE_AUDIO_OWN_CONNECTION
	                           ? (uint8_t)params->audio.copies
	                           : 0;
	m->info.audio_frame_us = (uint16_t)(m->audio_frame_samples * 1000000LL / PPS_AUDIO_RATE_HZ);
	m->info.audio_rate_hz = PPS_AUDIO_RATE_HZ;
	return 0;
}

/* The encoder's bounds on a picture: larger sources are scaled down to fit,
 * keeping their shape; sizes are made even. */
#define SOURCE_MAX_WIDTH  3840
#define SOURCE_MAX_HEIGHT 2160
#define SOURCE_MIN_SIDE   64

static int
even_in(int v, int lo, int hi)
{
	v = v < lo ? lo : v > hi ? hi : v;
	return v & ~1;
}

/* A file or URI at its own size and rate (pps_media_params_t size_set,
 * fps_set), on @p, a copy of the caller's; one line says what was done.
 * When the file cannot be probed, that line goes to @note instead, said
 * once the source has started (a source that fails to start says why
 * itself, in one line). */
static void
adapt_to_source(pps_media_params_t *p, char *note, size_t note_size)
{
	pps_capture_params_t *c = &p->capture;
	const char *name = c->input, *slash = strrchr(c->input, '/');
	pps_capture_probe_t probe;
	char err[256], rate[32], size_note[96] = "", rate_note[64] = "";
	int w, h, fps;
	double native_fps;

	if (c->type == PPS_CAPTURE_SOURCE_FILE && slash && slash[1])
		name = slash + 1;
	if (pps_capture_probe(c->type, c->input, &probe, err, sizeof(err)) < 0) {
		snprintf(note, note_size, "source: %s: %s; sent at %dx%d, %d fps as source.* say",
		         name, err, c->width, c->height, c->fps);
		return;
	}
	native_fps =
	    probe.fps_num > 0 && probe.fps_den > 0 ? (double)probe.fps_num / probe.fps_den : 0;
	if (native_fps > 0)
		snprintf(rate, sizeof(rate), " at %.*f fps", probe.fps_num % probe.fps_den ? 2 : 0,
		         native_fps);
	else
		snprintf(rate, sizeof(rate), " (no frame rate)");
	w = probe.width;
	h = probe.height;
	if (w > SOURCE_MAX_WIDTH || h > SOURCE_MAX_HEIGHT) {
		double k = (double)SOURCE_MAX_WIDTH / w < (double)SOURCE_MAX_HEIGHT / h
		               ? (double)SOURCE_MAX_WIDTH / w
		               : (double)SOURCE_MAX_HEIGHT / h;

		w = (int)(w * k);
		h = (int)(h * k);
	}
	w = even_in(w, SOURCE_MIN_SIDE, SOURCE_MAX_WIDTH);
	h = even_in(h, SOURCE_MIN_SIDE, SOURCE_MAX_HEIGHT);
	if (p->size_set) {
		if (c->width != probe.width || c->height != probe.height)
			snprintf(size_note, sizeof(size_note),
			         "; scaled to %dx%d as source.width/height say", c->width,
			         c->height);
	} else {
		if (w != probe.width || h != probe.height)
			snprintf(size_note, sizeof(size_note),
			         "; scaled to %dx%d (the encoder's "
			         "bounds, even sizes)",
			         w, h);
		c->width = p->encoder.width = w;
		c->height = p->encoder.height = h;
	}
	fps = native_fps > 0 ? (int)(native_fps + 0.5) : c->fps;
	fps = fps < 1 ? 1 : fps > 120 ? 120 : fps;
	if (p->fps_set) {
		if (native_fps <= 0 || fabs(native_fps - c->fps) > 0.005)
			snprintf(rate_note, sizeof(rate_note), "; at %d fps as source.fps says",
			         c->fps);
	} else {
		if (native_fps <= 0 || fabs(native_fps - fps) > 0.005)
			snprintf(rate_note, sizeof(rate_note), "; at %d fps", fps);
		c->fps = p->encoder.fps = fps;
	}
	pps_log(&p->log, PPS_LOG_INFO, "source: %s is %dx%d%s%s%s%s%s", name, probe.width,
	        probe.height, rate, size_note, rate_note,
	        !size_note[0] && !rate_note[0] ? "; sent as is" : "",
	        probe.has_audio && c->audio == PPS_CAPTURE_AUDIO_OFF
	            ? "; its sound is dropped (audio.source = off)"
	            : "");
}

static pps_media_t *
media_new(struct event_base *base, const pps_media_params_t *params, bool pushed,
          const pps_media_events_t *events, void *user, char *err, size_t err_size)
{
	pps_media_t *m = calloc(1, sizeof(*m));
	pps_media_params_t adapted = *params;
	const pps_encoder_params_t *ep = &adapted.encoder;

	if (!m) {
		snprintf(err, err_size, "out of memory");
		return NULL;
	}
	if (!pushed && (params->capture.type == PPS_CAPTURE_SOURCE_FILE ||
	                params->capture.type == PPS_CAPTURE_SOURCE_URI))
		adapt_to_source(&adapted, m->probe_note, sizeof(m->probe_note));
	params = &adapted;
	m->base = base;
	m->events = *events;
	m->user = user;
	m->log = params->log;
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->room, NULL);

	m->rate_adaptive = ep->rate_adaptive;
	atomic_init(&m->b_frames, !ep->anchor_windows);
	atomic_init(&m->drain_crf, 0);
	m->encoder = pps_encoder_new(ep);
	if (!m->encoder) {
		snprintf(err, err_size, "encoder: cannot create the x264 encoders for %dx%d: %s",
		         ep->width, ep->height, strerror(errno));
		goto err;
	}
	pps_encoder_get_stream_params(m->encoder, &m->stream);
	m->windower = pps_windower_new((unsigned)m->stream.window_frames, params->priority_policy,
	                               windower_window_cb, m);
	if (!m->windower) {
		snprintf(err, err_size, "windower: %s", strerror(errno));
		goto err;
	}
	/* One temporal layer: each frame is its own round, the base ADU comes
	 * out before the enhancement is encoded (codec/), and the window can
	 * start sending then, where the windower allows it (-EINVAL: one
	 * layer, or layers it cannot append in send order; whole windows then).
	 * An ADU to come is bounded by twice a raw picture (x264 never comes
	 * near it). */
	if (m->stream.temporal_layers == 1)
		(void)pps_windower_set_early(m->windower, (unsigned)m->stream.quality_layers,
		                             (size_t)m->stream.width * (size_t)m->stream.height * 3,
		                             windower_grow_cb);
	/* With B frames, windows of anchors alone when asked for: each of
	 * their frames is its quality layers' ADUs and their filler ADUs. With
	 * disposable P frames every window goes out as it is encoded: nothing
	 * waits for a later frame, and there are no fillers. */
	else if ((params->anchor_windows || ep->disposable_p) && m->stream.minigop_frames > 1 &&
	         pps_windower_set_anchor_windows(
	             m->windower, (ep->disposable_p ? 1 : 2) * (unsigned)m->stream.quality_layers,
	             (size_t)m->stream.width * (size_t)m->stream.height * 3, windower_grow_cb) < 0)
		pps_log(&m->log, PPS_LOG_WARNING,
		        "windower: windows of %d frames cannot be published as anchors alone",
		        m->stream.window_frames);
	m->wakeup = pps_wakeup_new(base, wake_cb, m);
	if (!m->wakeup) {
		snprintf(err, err_size, "event loop: cannot watch the encoder: %s",
		         strerror(errno));
		goto err;
	}
	m->idr_timer = evtimer_new(base, idr_timer_cb, m);
	if (!m->idr_timer) {
		snprintf(err, err_size, "event loop: cannot create a timer");
		goto err;
	}
	m->capture =
	    pushed ? pps_capture_new_push(&params->capture, capture_frame_cb, m, err, err_size)
	           : pps_capture_new(&params->capture, capture_frame_cb, m, err, err_size);
	if (!m->capture)
		goto err;

	pps_stream_params_to_wire(&m->stream, (unsigned)params->priority_policy,
	                          params->latency_budget_ms, &m->info);
	/* A pushed capture has no audio branch: its program says whether it
	 * pushes audio (pps_media_push_audio()) through capture.audio. */
	if ((pushed ? params->capture.audio != PPS_CAPTURE_AUDIO_OFF
	            : pps_capture_has_audio(m->capture)) &&
	    setup_audio(m, params, err, err_size) < 0)
		goto err;
	return m;

err:
	pps_media_free(m);
	return NULL;
}

pps_media_t *
pps_media_new(struct event_base *base, const pps_media_params_t *params,
              const pps_media_events_t *events, void *user, char *err, size_t err_size)
{
	return media_new(base, params, false, events, user, err, err_size);
}

pps_media_t *
pps_media_new_pushed(struct event_base *base, const pps_media_params_t *params,
                     const pps_media_events_t *events, void *user, char *err, size_t err_size)
{
	return media_new(base, params, true, events, user, err, err_size);
}

int
pps_media_push_frame(pps_media_t *m, const pps_frame_t *frame)
{
	return pps_capture_push(m->capture, frame);
}

int
pps_media_push_audio(pps_media_t *m, const int16_t *pcm, size_t samples, int64_t capture_us)
{
	if (!m->audio_encoder)
		return -ENOENT;
	if (samples != PPS_AUDIO_BLOCK_SAMPLES)
		return -EINVAL;
	/* The same path as a capture's audio blocks, on the caller's thread. */
	capture_audio_cb(pcm, samples, capture_us, m);
	return 0;
}

int
pps_media_start(pps_media_t *m, char *err, size_t err_size)
{
	int ret = pps_capture_start(m->capture, err, err_size);

	if (ret == 0 && m->probe_note[0])
		pps_log(&m->log, PPS_LOG_WARNING, "%s", m->probe_note);
	return ret;
}

void
pps_media_stop(pps_media_t *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->stopping = true;
	pthread_cond_broadcast(&m->room);
	pthread_mutex_unlock(&m->lock);
	if (m->capture)
		pps_capture_stop(m->capture);
}

void
pps_media_free(pps_media_t *m)
{
	if (!m)
		return;
	pps_media_stop(m);
	pps_capture_free(m->capture);
	for (size_t i = 0; i < m->count; i++)
		item_clear(&m->items[(m->head + i) % PPS_MEDIA_QUEUE_ITEMS]);
	pps_wakeup_free(m->wakeup);
	if (m->idr_timer)
		event_free(m->idr_timer);
	pps_windower_free(m->windower);
	pps_encoder_free(m->encoder);
	pps_audio_encoder_free(m->audio_encoder);
	free(m->audio_pcm);
	pthread_cond_destroy(&m->room);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

/* Fewer IDRs than this apart cost bits and buy little: a client that lost
 * its base again so soon is on a path the base does not fit. */
#define IDR_REQUEST_MIN_INTERVAL_US 500000

static void
idr_now(pps_media_t *m, int64_t now)
{
	m->last_idr_request_us = now;
	m->idr_requests++;
	atomic_store(&m->idr_requested, true);
}

static void
idr_timer_cb(evutil_socket_t fd, short what, void *user)
{
	idr_now(user, pps_time_realtime_us());
}

void
pps_media_request_idr(pps_media_t *m)
{
	int64_t now = pps_time_realtime_us();
	int64_t wait_us;
	struct timeval tv;

	if (!m->last_idr_request_us ||
	    now - m->last_idr_request_us >= IDR_REQUEST_MIN_INTERVAL_US) {
		idr_now(m, now);
		return;
	}
	/* Too soon: one IDR at the end of the interval serves every request
	 * made meanwhile (a joiner must not wait for the next periodic IDR). */
	if (evtimer_pending(m->idr_timer, NULL))
		return;
	m->idr_deferred++;
	wait_us = m->last_idr_request_us + IDR_REQUEST_MIN_INTERVAL_US - now;
	tv = pps_time_us_to_timeval(wait_us);
	if (evtimer_add(m->idr_timer, &tv) < 0)
		idr_now(m, now); /* no timer: too soon rather than never */
}

int
pps_media_set_rates(pps_media_t *m, const pps_encoder_rates_t *rates)
{
	if (!m->rate_adaptive)
		return -EINVAL;
	for (int q = 0; q < m->stream.quality_layers; q++) {
		if (rates->kbps[q] < 1 || rates->buffer_kbit[q] < 1 || rates->crf[q] < 0 ||
		    rates->crf[q] > 51)
			return -EINVAL;
	}
	m->rates = *rates;
	pthread_mutex_lock(&m->lock);
	m->pending_rates = *rates;
	m->rates_pending = true;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

void
pps_media_set_b_frames(pps_media_t *m, bool on)
{
	atomic_store(&m->b_frames, on);
}

void
pps_media_set_drain(pps_media_t *m, int crf_offset)
{
	atomic_store(&m->drain_crf, crf_offset);
}

void
pps_media_get_rates(pps_media_t *m, pps_encoder_rates_t *rates)
{
	*rates = m->rates;
}

void
pps_media_stream_info(const pps_media_t *m, pps_wire_stream_info_t *info)
{
	*info = m->info;
}

/* Under lock: the bin's upper edge in ms holding fraction @q of the windows. */
static double
ready_percentile(const pps_media_t *m, double q)
{
	uint64_t want, seen = 0;

	if (m->stats.ready_samples == 0)
		return 0.0;
	want = (uint64_t)(q * (double)m->stats.ready_samples + 0.5);
	if (want < 1)
		want = 1;
	for (size_t b = 0; b < READY_BINS; b++) {
		seen += m->ready_hist[b];
		if (seen >= want)
			return (double)((b + 1) * READY_BIN_US) / 1000.0;
	}
	return (double)(READY_BINS * READY_BIN_US) / 1000.0;
}

void
pps_media_get_stats(pps_media_t *m, pps_media_stats_t *stats)
{
	pps_capture_stats_t cs;

	pthread_mutex_lock(&m->lock);
	*stats = m->stats;
	stats->capture_to_ready_p50_ms = ready_percentile(m, 0.50);
	stats->capture_to_ready_p95_ms = ready_percentile(m, 0.95);
	for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS; q++)
		stats->encode_ms_per_frame[q] = m->encoder_stats.frames
		                                    ? (double)m->encoder_stats.wall_us[q] / 1000.0 /
		                                          (double)m->encoder_stats.frames
		                                    : 0;
	stats->windows_anchors = m->encoder_stats.anchor_windows;
	stats->b_frames_switches = m->encoder_stats.anchor_switches;
	stats->windows_drained = m->encoder_stats.drained_minigops;
	pthread_mutex_unlock(&m->lock);
	pps_capture_get_stats(m->capture, &cs);
	stats->capture_frames = cs.frames_captured;
	stats->capture_dropped = cs.frames_dropped;
	stats->idr_requests = m->idr_requests;
	stats->idr_deferred = m->idr_deferred;
}

bool
pps_media_has_audio(const pps_media_t *m)
{
	return m->audio_encoder != NULL;
}

int
pps_media_set_audio_bitrate(pps_media_t *m, int bitrate_bps)
{
	if (!m->audio_encoder)
		return -ENOENT;
	if (bitrate_bps < PPS_AUDIO_MIN_BITRATE_BPS || bitrate_bps > PPS_AUDIO_MAX_BITRATE_BPS)
		return -EINVAL;
	atomic_store(&m->audio_bitrate_want, bitrate_bps);
	return 0;
}

int
pps_media_audio_bitrate(pps_media_t *m)
{
	return m->audio_encoder ? atomic_load(&m->audio_bitrate_want) : 0;
}

const char *
pps_media_error(pps_media_t *m)
{
	const char *error;

	pthread_mutex_lock(&m->lock);
	error = m->failed ? m->error : "";
	pthread_mutex_unlock(&m->lock);
	return error;
}
