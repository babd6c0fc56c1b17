/* SPDX-License-Identifier: MIT */
/*
 * The audio track on the client: AUDIO_FRAME records into the adaptive
 * jitter buffer (pps-jitter.h), each slot decoded (Opus, with its in-band FEC
 * and loss concealment) when it is due and handed to the output (an SDL
 * audio device, a WAV file, the GStreamer source's pad), and accounted in
 * the stats: mouth-to-ear latency, played / recovered / concealed / late,
 * the playout delay.
 *
 * The clock. Slots are timed on the client's clock (capture times moved
 * there through the PING/PONG offset), from a one-shot timer armed at the
 * next slot's time: nothing polls. The output device has its own clock; what
 * it holds is read before each slot (SDL_GetQueuedAudioSize) and counted in
 * the slot's time to the ear, and if it drifts past OUTPUT_MAX_QUEUED_US
 * ahead (a device slower than our clock) it is cleared, counted, rather than
 * letting the delay grow.
 *
 * Lip sync. The picture is the laggard on every path that matters (a window
 * of video is larger than a frame of audio and waits behind more), so audio
 * waits for it: the jitter buffer's smallest delay is kept at the video's
 * recent median latency minus [audio] sync_lead_ms, a change the buffer
 * applies at the next talkspurt like its own.
 */
#include "pps-audio.h"
#include "pps-client-internal.h"
#include "pps-jitter.h"
#include "pps-time.h"

#include <SDL.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <unistd.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Opus's decoder-side delay at 48 kHz in the VOIP application (2.5 ms of
 * CELT overlap + 4 ms of SILK's resampler): what the listener hears at a
 * slot's output time was captured this much before the slot's first sample. */
#define OPUS_DELAY_US 6500
/* The device may hold this much before it is cleared (its clock ran slow). */
#define OUTPUT_MAX_QUEUED_US 120000
/* Sequence numbers remembered for duplicates (5 s of 20 ms frames). */
#define SEEN_FRAMES 256
/* Slots handled per timer wake-up at most (a late loop catches up in a few). */
#define MAX_SLOTS_PER_WAKE 16

const char *const pps_audio_output_names[] = {
    [PPS_AUDIO_OUTPUT_AUTO] = "auto",
    [PPS_AUDIO_OUTPUT_SDL] = "sdl",
    [PPS_AUDIO_OUTPUT_NONE] = "none",
    [PPS_AUDIO_OUTPUT_COUNT] = NULL,
};

struct pps_audio_player {
	struct event_base *base;
	pps_audio_params_t params;
	const pps_clock_t *clock;
	pps_stats_t *stats;
	pps_audio_callbacks_t callbacks;
	void *user;
	struct event *timer;

	pps_jitter_t *jitter; /* from STREAM_INFO on */
	pps_audio_decoder_t *decoder;
	int frame_samples;
	int16_t *pcm;

	SDL_AudioDeviceID device; /* 0: none */
	int64_t device_buffer_us; /* the device's own period */
	char output_name[320];
	uint64_t output_resets;

	FILE *wav;
	uint64_t wav_samples;

	/* The last frames' sequence numbers: a second copy (several audio
	 * connections) is not a frame. */
	uint32_t seen[SEEN_FRAMES];
	bool seen_valid[SEEN_FRAMES];
	uint64_t duplicates;
};

/* ---- WAV file -------------------------------------------------------------- */

static void
put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* The 44-byte header of a mono 16-bit PCM WAV file of @samples samples. */
static void
wav_header(uint8_t h[44], uint64_t samples)
{
	uint32_t data = samples > 0x7ffffff0u / 2 ? 0x7ffffff0u : (uint32_t)(samples * 2);

	memcpy(h, "RIFF", 4);
	put_le32(h + 4, 36 + data);
	memcpy(h + 8, "WAVEfmt ", 8);
	put_le32(h + 16, 16);
	h[20] = 1; /* PCM */
	h[21] = 0;
	h[22] = PPS_AUDIO_CHANNELS;
	h[23] = 0;
	put_le32(h + 24, PPS_AUDIO_RATE_HZ);
	put_le32(h + 28, PPS_AUDIO_RATE_HZ * 2 * PPS_AUDIO_CHANNELS);
	h[32] = 2 * PPS_AUDIO_CHANNELS;
	h[33] = 0;
	h[34] = 16;
	h[35] = 0;
	memcpy(h + 36, "data", 4);
	put_le32(h + 40, data);
}

static void
wav_close(pps_audio_player_t *a)
{
	uint8_t h[44];

	if (!a->wav)
		return;
	wav_header(h, a->wav_samples);
	if (fseek(a->wav, 0, SEEK_SET) == 0)
		fwrite(h, 1, sizeof(h), a->wav);
	fclose(a->wav);
	a->wav = NULL;
}

/* ---- output ------------------------------------------------------------------ */

static int open_device_now(pps_audio_player_t *a, SDL_AudioSpec *have, char *err, size_t err_size);

/*
 * While a device is only tried (output auto), the sound libraries' own
 * complaints (ALSA prints "cannot find card" on a machine without one) are
 * not the user's business: the fallback is said in one line instead. The
 * program's stderr is pointed at /dev/null for that time; this runs at
 * start-up, before any other thread of the program writes there.
 */
static int
quiet_stderr(void)
{
	int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (saved >= 0 && null >= 0)
		dup2(null, STDERR_FILENO);
	if (null >= 0)
		close(null);
	return saved;
}

static void
restore_stderr(int saved)
{
	if (saved < 0)
		return;
	dup2(saved, STDERR_FILENO);
	close(saved);
}

static int
open_device(pps_audio_player_t *a, bool quiet, char *err, size_t err_size)
{
	SDL_AudioSpec have;
	int saved = quiet ? quiet_stderr() : -1;
	int ret = open_device_now(a, &have, err, err_size);

	restore_stderr(saved);
	if (ret < 0)
		return ret;
	a->device_buffer_us = (int64_t)have.samples * 1000000 / PPS_AUDIO_RATE_HZ;
	snprintf(a->output_name, sizeof(a->output_name), "SDL audio (%s)",
	         SDL_GetCurrentAudioDriver() ? SDL_GetCurrentAudioDriver() : "?");
	SDL_PauseAudioDevice(a->device, 0);
	return 0;
}

static int
open_device_now(pps_audio_player_t *a, SDL_AudioSpec *have, char *err, size_t err_size)
{
	SDL_AudioSpec want = {0};

	if (SDL_InitSubSystem(SDL_INIT_AUDIO) < 0) {
		snprintf(err, err_size, "audio output: SDL: %s", SDL_GetError());
		return -ENODEV;
	}
	want.freq = PPS_AUDIO_RATE_HZ;
	want.format = AUDIO_S16SYS;
	want.channels = PPS_AUDIO_CHANNELS;
	want.samples = PPS_AUDIO_BLOCK_SAMPLES; /* 10 ms periods */
	a->device = SDL_OpenAudioDevice(NULL, 0, &want, have, 0);
	if (!a->device) {
		snprintf(err, err_size, "audio output: no SDL audio device: %s", SDL_GetError());
		SDL_QuitSubSystem(SDL_INIT_AUDIO);
		return -ENODEV;
	}
	return 0;
}

/* What the output holds ahead of a slot written now: the time until it is
 * heard. */
static int64_t
output_latency_us(pps_audio_player_t *a)
{
	int64_t queued_us;

	if (!a->device)
		return 0;
	queued_us = (int64_t)SDL_GetQueuedAudioSize(a->device) / (2 * PPS_AUDIO_CHANNELS) *
	            1000000 / PPS_AUDIO_RATE_HZ;
	if (queued_us > OUTPUT_MAX_QUEUED_US) {
		SDL_ClearQueuedAudio(a->device);
		a->output_resets++;
		queued_us = 0;
	}
	return queued_us + a->device_buffer_us;
}

static void
output(pps_audio_player_t *a, const int16_t *pcm, int samples, int64_t play_us)
{
	if (a->device)
		SDL_QueueAudio(a->device, pcm, (Uint32)samples * 2u);
	if (a->wav && fwrite(pcm, 2, (size_t)samples, a->wav) == (size_t)samples)
		a->wav_samples += (uint64_t)samples;
	if (a->callbacks.pcm_cb)
		a->callbacks.pcm_cb(pcm, samples, play_us, a->user);
}

/* ---- slots ---------------------------------------------------------------------- */

static void arm_timer(pps_audio_player_t *a);

/* One due slot: decoded (or recovered, or concealed), out, accounted. */
static void
play_slot(pps_audio_player_t *a, const pps_jitter_slot_t *slot, int64_t now_us)
{
	const char *how;
	int n;

	switch (slot->action) {
	case PPS_JITTER_PLAY:
		n = pps_audio_decoder_decode(a->decoder, slot->payload, slot->len, a->pcm,
		                             a->frame_samples);
		how = PPS_AUDIO_PLAYED;
		if (n < 0) { /* a packet libopus refuses: conceal it */
			n = pps_audio_decoder_conceal(a->decoder, a->pcm, a->frame_samples);
			how = PPS_AUDIO_CONCEALED;
		}
		break;
	case PPS_JITTER_RECOVER:
		n = pps_audio_decoder_recover(a->decoder, slot->payload, slot->len, a->pcm,
		                              a->frame_samples);
		how = PPS_AUDIO_RECOVERED;
		break;
	case PPS_JITTER_CONCEAL:
		n = pps_audio_decoder_conceal(a->decoder, a->pcm, a->frame_samples);
		how = PPS_AUDIO_CONCEALED;
		break;
	case PPS_JITTER_SKIP:
		/* Decoded, not played: the decoder's state stays continuous. */
		(void)pps_audio_decoder_decode(a->decoder, slot->payload, slot->len, a->pcm,
		                               a->frame_samples);
		pps_stats_audio_skipped(a->stats, slot->seq);
		return;
	default:
		return;
	}
	if (n <= 0) {
		memset(a->pcm, 0, (size_t)a->frame_samples * sizeof(*a->pcm));
		n = a->frame_samples;
	}
	{
		/* A slot handled late (the loop was busy) still goes out now. */
		int64_t play_us = now_us > slot->playout_us ? now_us : slot->playout_us;
		int64_t ear_us = play_us + output_latency_us(a) + OPUS_DELAY_US;
		pps_stats_audio_t s = {
		    .seq = slot->seq,
		    .capture_us = slot->capture_us,
		    .ear_us = ear_us,
		    .playout_delay_us = slot->playout_us - slot->capture_us,
		    .how = how,
		};

		output(a, a->pcm, n, play_us);
		pps_stats_audio(a->stats, &s);
	}
}

static void
timer_cb(evutil_socket_t fd, short what, void *user)
{
	pps_audio_player_t *a = user;
	pps_jitter_slot_t slot;
	int64_t now = pps_time_realtime_us();

	(void)fd;
	(void)what;
	if (!a->jitter)
		return;
	if (a->params.lip_sync) {
		int64_t video_us =
		    pps_stats_video_latency_recent_us(a->stats, now, PPS_AUDIO_SYNC_PERCENTILE);

		pps_jitter_set_floor(a->jitter, video_us ? video_us - a->params.sync_lead_us : 0);
	}
	for (int i = 0; i < MAX_SLOTS_PER_WAKE && pps_jitter_pop(a->jitter, now, &slot) == 1; i++)
		play_slot(a, &slot, now);
	arm_timer(a);
}

static void
arm_timer(pps_audio_player_t *a)
{
	int64_t due = a->jitter ? pps_jitter_next_due_us(a->jitter) : INT64_MAX;
	struct timeval tv;

	if (due == INT64_MAX) {
		event_del(a->timer);
		return;
	}
	tv = pps_time_us_to_timeval(due - pps_time_realtime_us());
	event_add(a->timer, &tv);
}

/* ---- the object ------------------------------------------------------------------ */

pps_audio_player_t *
pps_audio_player_new(struct event_base *base, const pps_audio_params_t *params,
                     const pps_clock_t *clock, pps_stats_t *stats,
                     const pps_audio_callbacks_t *callbacks, void *user, char *err, size_t err_size)
{
	pps_audio_player_t *a;
	int ret;

	if (!base || !params || !clock || !stats ||
	    (unsigned)params->output >= PPS_AUDIO_OUTPUT_COUNT || params->min_delay_us < 0 ||
	    params->max_delay_us < params->min_delay_us || params->playout_quantile < 0 ||
	    params->playout_quantile >= 1 || params->hysteresis_us < 0) {
		snprintf(err, err_size, "audio: bad parameters");
		errno = EINVAL;
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		snprintf(err, err_size, "audio: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	a->base = base;
	a->params = *params;
	a->params.wav_path = NULL; /* not kept: opened below */
	a->clock = clock;
	a->stats = stats;
	if (callbacks)
		a->callbacks = *callbacks;
	a->user = user;
	snprintf(a->output_name, sizeof(a->output_name), "none");
	a->timer = evtimer_new(base, timer_cb, a);
	if (!a->timer) {
		snprintf(err, err_size, "audio: out of memory");
		errno = ENOMEM;
		goto err;
	}
	if (params->output != PPS_AUDIO_OUTPUT_NONE) {
		char why[256];

		ret = open_device(a, params->output == PPS_AUDIO_OUTPUT_AUTO, why, sizeof(why));
		if (ret < 0 && params->output == PPS_AUDIO_OUTPUT_SDL) {
			snprintf(err, err_size, "%s", why);
			errno = -ret;
			goto err;
		}
		if (ret < 0)
			snprintf(a->output_name, sizeof(a->output_name), "none (%s)", why);
	}
	if (params->wav_path && params->wav_path[0]) {
		uint8_t h[44];

		a->wav = fopen(params->wav_path, "wb");
		if (!a->wav) {
			int saved = errno;

			snprintf(err, err_size, "audio output %s: %s", params->wav_path,
			         strerror(errno));
			errno = saved;
			goto err;
		}
		wav_header(h, 0);
		fwrite(h, 1, sizeof(h), a->wav);
	}
	return a;

err : {
	int saved = errno;

	pps_audio_player_free(a);
	errno = saved;
	return NULL;
}
}

void
pps_audio_player_free(pps_audio_player_t *a)
{
	if (!a)
		return;
	if (a->timer)
		event_free(a->timer);
	if (a->device) {
		SDL_CloseAudioDevice(a->device);
		SDL_QuitSubSystem(SDL_INIT_AUDIO);
	}
	wav_close(a);
	pps_jitter_free(a->jitter);
	pps_audio_decoder_free(a->decoder);
	free(a->pcm);
	free(a);
}

int
pps_audio_player_stream(pps_audio_player_t *a, const pps_wire_stream_info_t *info, char *err,
                        size_t err_size)
{
	pps_jitter_params_t jp;

	pps_audio_player_reset(a);
	if (!info->audio_codec)
		return 0;
	if (info->audio_codec != PPS_WIRE_AUDIO_CODEC_OPUS || info->audio_channels != 1 ||
	    info->audio_rate_hz != PPS_AUDIO_RATE_HZ ||
	    (info->audio_frame_us != 10000 && info->audio_frame_us != 20000)) {
		snprintf(err, err_size,
		         "audio track: codec %u, %u channel(s), %u Hz, %u us frames; this client "
		         "plays mono Opus at 48 kHz in 10 or 20 ms frames",
		         info->audio_codec, info->audio_channels, info->audio_rate_hz,
		         info->audio_frame_us);
		return -EPROTO;
	}
	a->frame_samples = (int)((int64_t)info->audio_frame_us * PPS_AUDIO_RATE_HZ / 1000000);
	pps_jitter_params_init(&jp, info->audio_frame_us);
	jp.min_delay_us = a->params.min_delay_us;
	jp.max_delay_us = a->params.max_delay_us;
	jp.target_quantile = a->params.playout_quantile;
	jp.hysteresis_us = a->params.hysteresis_us;
	/* The frames held must cover the longest delay. */
	if ((int64_t)jp.max_frames * jp.frame_us <= jp.max_delay_us)
		jp.max_frames = (int)(jp.max_delay_us / jp.frame_us) + 2;
	a->jitter = pps_jitter_new(&jp);
	a->decoder = pps_audio_decoder_new();
	a->pcm = calloc((size_t)a->frame_samples, sizeof(*a->pcm));
	if (!a->jitter || !a->decoder || !a->pcm) {
		snprintf(err, err_size, "audio track: out of memory");
		pps_audio_player_reset(a);
		return -ENOMEM;
	}
	return 0;
}

void
pps_audio_player_frame(pps_audio_player_t *a, const pps_wire_audio_frame_t *f, int64_t now_us,
                       unsigned conn)
{
	int ret;

	if (!a->jitter)
		return; /* no track announced: the connection refuses such a frame before */
	{
		size_t i = f->seq % SEEN_FRAMES;

		if (a->seen_valid[i] && a->seen[i] == f->seq) {
			/* A later copy (another audio connection): its delay too,
			 * for the log; how far the copies' delays go together is
			 * what more connections can buy. */
			char event[128];

			a->duplicates++;
			snprintf(event, sizeof(event),
			         "\"type\":\"audio_copy\",\"seq\":%" PRIu32
			         ",\"delay_ms\":%.3f,\"conn\":%u",
			         f->seq,
			         (double)(now_us - pps_clock_to_client(a->clock, f->capture_us)) /
			             1000.0,
			         conn);
			pps_stats_event(a->stats, event);
			return;
		}
		a->seen[i] = f->seq;
		a->seen_valid[i] = true;
	}
	{
		/* Each frame's arrival (first copy), for the log: the network's
		 * delay distribution that the playout delay answers. */
		char event[128];

		snprintf(event, sizeof(event),
		         "\"type\":\"audio_arrival\",\"seq\":%" PRIu32
		         ",\"delay_ms\":%.3f,\"speech\":%s,\"conn\":%u",
		         f->seq,
		         (double)(now_us - pps_clock_to_client(a->clock, f->capture_us)) / 1000.0,
		         f->flags & PPS_WIRE_AUDIO_SPEECH ? "true" : "false", conn);
		pps_stats_event(a->stats, event);
	}
	ret = pps_jitter_put(a->jitter, f->seq, pps_clock_to_client(a->clock, f->capture_us),
	                     (f->flags & PPS_WIRE_AUDIO_SPEECH) != 0, f->payload, f->payload_len,
	                     now_us);
	if (ret == -ESTALE)
		pps_stats_audio_late(a->stats, f->seq);
	arm_timer(a);
}

void
pps_audio_player_reset(pps_audio_player_t *a)
{
	event_del(a->timer);
	pps_jitter_free(a->jitter);
	pps_audio_decoder_free(a->decoder);
	free(a->pcm);
	a->jitter = NULL;
	a->decoder = NULL;
	a->pcm = NULL;
	memset(a->seen_valid, 0, sizeof(a->seen_valid));
}

const char *
pps_audio_player_output(const pps_audio_player_t *a)
{
	return a->output_name;
}
