/* SPDX-License-Identifier: MIT */
/*
 * The Opus voice track over libopus, and the PCM measurements (voice
 * activity, tick onsets).
 */
#include "pps-codec-internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <opus.h>
#include <stdlib.h>

/* The two cores are shared with x264: 5 of 10 costs about half of the
 * default's CPU for a voice track whose quality barely changes above it. */
#define ENCODER_COMPLEXITY 5

struct pps_audio_encoder {
	OpusEncoder *opus;
	int frame_samples;
};

struct pps_audio_decoder {
	OpusDecoder *opus;
};

/* libopus's error codes as errno values. */
static int
opus_errno(int opus_error)
{
	switch (opus_error) {
	case OPUS_BAD_ARG:
	case OPUS_INVALID_PACKET:
		return EINVAL;
	case OPUS_BUFFER_TOO_SMALL:
		return ENOBUFS;
	case OPUS_ALLOC_FAIL:
		return ENOMEM;
	case OPUS_UNIMPLEMENTED:
		return ENOTSUP;
	default:
		return EIO;
	}
}

/* A size for libopus, which counts bytes in an opus_int32. */
static opus_int32
opus_size(size_t bytes)
{
	return bytes > INT32_MAX ? INT32_MAX : (opus_int32)bytes;
}

static bool
bitrate_valid(int bitrate_bps)
{
	return bitrate_bps >= PPS_AUDIO_MIN_BITRATE_BPS && bitrate_bps <= PPS_AUDIO_MAX_BITRATE_BPS;
}

static bool
loss_percent_valid(int loss_percent)
{
	return loss_percent >= 0 && loss_percent <= 100;
}

void
pps_audio_encoder_params_init(pps_audio_encoder_params_t *p)
{
	*p = (pps_audio_encoder_params_t){
	    .frame_ms = PPS_DEFAULT_AUDIO_FRAME_MS,
	    .bitrate_bps = PPS_DEFAULT_AUDIO_BITRATE_BPS,
	    .fec = PPS_DEFAULT_AUDIO_FEC,
	    .loss_percent = PPS_DEFAULT_AUDIO_LOSS_PERCENT,
	};
}

pps_audio_encoder_t *
pps_audio_encoder_new(const pps_audio_encoder_params_t *p)
{
	pps_audio_encoder_t *e;
	int error = OPUS_OK;

	if ((p->frame_ms != 10 && p->frame_ms != 20) || !bitrate_valid(p->bitrate_bps) ||
	    !loss_percent_valid(p->loss_percent)) {
		errno = EINVAL;
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		errno = ENOMEM;
		return NULL;
	}
	e->frame_samples = p->frame_ms * (PPS_AUDIO_RATE_HZ / 1000);
	e->opus = opus_encoder_create(PPS_AUDIO_RATE_HZ, PPS_AUDIO_CHANNELS, OPUS_APPLICATION_VOIP,
	                              &error);
	if (!e->opus)
		goto err_free;
	/*
	 * DTX off: the playout counts one packet per frame, and a silent
	 * stretch must still move the receiver's clock.
	 *
	 * Up to super-wideband (12 kHz of audio, plenty for voice): libopus
	 * 1.3 codes in-band FEC only when its rate estimate (the bitrate less
	 * what complexity < 10 and the expected loss take off it) clears a
	 * threshold per bandwidth, and narrows the band itself to get there
	 * only above 5 % loss. At full band, complexity 5 and 5 % loss, 32
	 * kbit/s falls short and no FEC is coded at all (measured: recovery
	 * gave libopus's concealment); at super-wideband it is coded from
	 * about 30 kbit/s.
	 */
	if ((error = opus_encoder_ctl(e->opus, OPUS_SET_BITRATE(p->bitrate_bps))) != OPUS_OK ||
	    (error = opus_encoder_ctl(e->opus, OPUS_SET_COMPLEXITY(ENCODER_COMPLEXITY))) !=
	        OPUS_OK ||
	    (error = opus_encoder_ctl(e->opus, OPUS_SET_SIGNAL(OPUS_SIGNAL_VOICE))) != OPUS_OK ||
	    (error = opus_encoder_ctl(e->opus, OPUS_SET_DTX(0))) != OPUS_OK ||
	    (error = opus_encoder_ctl(
	         e->opus, OPUS_SET_MAX_BANDWIDTH(OPUS_BANDWIDTH_SUPERWIDEBAND))) != OPUS_OK ||
	    (error = opus_encoder_ctl(e->opus, OPUS_SET_INBAND_FEC(p->fec ? 1 : 0))) != OPUS_OK ||
	    (error = opus_encoder_ctl(e->opus, OPUS_SET_PACKET_LOSS_PERC(p->loss_percent))) !=
	        OPUS_OK)
		goto err_destroy;
	return e;

err_destroy:
	opus_encoder_destroy(e->opus);
err_free:
	free(e);
	errno = error == OPUS_OK ? EIO : opus_errno(error);
	return NULL;
}

void
pps_audio_encoder_free(pps_audio_encoder_t *e)
{
	if (!e)
		return;
	opus_encoder_destroy(e->opus);
	free(e);
}

int
pps_audio_encoder_encode(pps_audio_encoder_t *e, const int16_t *pcm, uint8_t *out, size_t capacity)
{
	opus_int32 n = opus_encode(e->opus, pcm, e->frame_samples, out, opus_size(capacity));

	return n < 0 ? -opus_errno(n) : n;
}

int
pps_audio_encoder_set_bitrate(pps_audio_encoder_t *e, int bitrate_bps)
{
	int r;

	if (!bitrate_valid(bitrate_bps))
		return -EINVAL;
	r = opus_encoder_ctl(e->opus, OPUS_SET_BITRATE(bitrate_bps));
	return r == OPUS_OK ? 0 : -opus_errno(r);
}

int
pps_audio_encoder_set_loss_percent(pps_audio_encoder_t *e, int loss_percent)
{
	int r;

	if (!loss_percent_valid(loss_percent))
		return -EINVAL;
	r = opus_encoder_ctl(e->opus, OPUS_SET_PACKET_LOSS_PERC(loss_percent));
	return r == OPUS_OK ? 0 : -opus_errno(r);
}

int
pps_audio_encoder_frame_samples(const pps_audio_encoder_t *e)
{
	return e->frame_samples;
}

int
pps_audio_encoder_lookahead_us(const pps_audio_encoder_t *e)
{
	opus_int32 samples = 0;

	/* A getter on a valid encoder cannot fail; the ctl takes no const. */
	opus_encoder_ctl(((pps_audio_encoder_t *)e)->opus, OPUS_GET_LOOKAHEAD(&samples));
	return (int)((int64_t)samples * 1000000 / PPS_AUDIO_RATE_HZ);
}

pps_audio_decoder_t *
pps_audio_decoder_new(void)
{
	pps_audio_decoder_t *d = calloc(1, sizeof(*d));
	int error = OPUS_OK;

	if (!d) {
		errno = ENOMEM;
		return NULL;
	}
	d->opus = opus_decoder_create(PPS_AUDIO_RATE_HZ, PPS_AUDIO_CHANNELS, &error);
	if (!d->opus) {
		free(d);
		errno = opus_errno(error);
		return NULL;
	}
	return d;
}

void
pps_audio_decoder_free(pps_audio_decoder_t *d)
{
	if (!d)
		return;
	opus_decoder_destroy(d->opus);
	free(d);
}

int
pps_audio_decoder_decode(pps_audio_decoder_t *d, const uint8_t *packet, size_t len, int16_t *pcm,
                         int max_samples)
{
	int n;

	/* libopus reads an empty packet as a lost one: that is _conceal(). */
	if (!packet || len == 0 || max_samples <= 0)
		return -EINVAL;
	n = opus_decode(d->opus, packet, opus_size(len), pcm, max_samples, 0);
	return n < 0 ? -opus_errno(n) : n;
}

int
pps_audio_decoder_conceal(pps_audio_decoder_t *d, int16_t *pcm, int samples)
{
	int n;

	if (samples <= 0)
		return -EINVAL;
	n = opus_decode(d->opus, NULL, 0, pcm, samples, 0);
	return n < 0 ? -opus_errno(n) : n;
}

int
pps_audio_decoder_recover(pps_audio_decoder_t *d, const uint8_t *next_packet, size_t len,
                          int16_t *pcm, int samples)
{
	int n;

	if (!next_packet || len == 0 || samples <= 0)
		return -EINVAL;
	n = opus_decode(d->opus, next_packet, opus_size(len), pcm, samples, 1);
	return n < 0 ? -opus_errno(n) : n;
}

bool
pps_audio_is_speech(const int16_t *pcm, size_t samples, double threshold_dbfs)
{
	double energy = 0, full_scale = 32768.0;

	if (!samples)
		return false;
	for (size_t i = 0; i < samples; i++)
		energy += (double)pcm[i] * pcm[i];
	/* RMS > full_scale * 10^(dB/20), both sides squared. */
	return energy / (double)samples >
	       full_scale * full_scale * pow(10.0, threshold_dbfs / 10.0);
}

void
pps_audio_tick_detector_init(pps_audio_tick_detector_t *d, bool after_silence)
{
	d->quiet_samples = after_silence ? PPS_AUDIO_TICK_SILENCE_SAMPLES : 0;
}

size_t
pps_audio_tick_detector_push(pps_audio_tick_detector_t *d, const int16_t *pcm, size_t samples,
                             size_t *onsets, size_t max)
{
	size_t count = 0;

	for (size_t i = 0; i < samples; i++) {
		int magnitude = pcm[i] < 0 ? -(int)pcm[i] : pcm[i];

		if (magnitude < PPS_AUDIO_TICK_LEVEL) {
			d->quiet_samples++;
			continue;
		}
		if (d->quiet_samples >= PPS_AUDIO_TICK_SILENCE_SAMPLES && count < max)
			onsets[count++] = i;
		d->quiet_samples = 0;
	}
	return count;
}

size_t
pps_audio_find_ticks(const int16_t *pcm, size_t samples, size_t *onsets, size_t max)
{
	pps_audio_tick_detector_t d;

	pps_audio_tick_detector_init(&d, false);
	return pps_audio_tick_detector_push(&d, pcm, samples, onsets, max);
}
