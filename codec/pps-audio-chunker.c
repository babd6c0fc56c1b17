/* SPDX-License-Identifier: MIT */
/*
 * The capture's audio re-chunker (see pps-codec-internal.h). Sources deliver
 * what suits them (audiotestsrc 10 ms, a decoder 1024 or 2048 samples, a
 * microphone its period); the track wants exact 10 ms blocks, each with its
 * own capture time so audio and video times stay comparable.
 */
#include "pps-codec-internal.h"

#include <string.h>

#define BYTES_PER_SAMPLE sizeof(int16_t)

/* Microseconds of @samples at 48 kHz. */
static int64_t
samples_us(size_t samples)
{
	return (int64_t)samples * 1000000 / PPS_AUDIO_RATE_HZ;
}

void
pps_audio_chunker_reset(pps_audio_chunker_t *k)
{
	memset(k, 0, sizeof(*k));
}

size_t
pps_audio_chunker_push(pps_audio_chunker_t *k, const void *pcm, size_t samples, int64_t capture_us,
                       bool discont, pps_capture_audio_cb cb, void *user)
{
	const uint8_t *in = pcm;
	size_t done = 0, blocks = 0;

	if (k->started) {
		int64_t gap_us = capture_us - k->next_us;

		if (discont || gap_us > PPS_AUDIO_CHUNKER_GAP_US ||
		    gap_us < -PPS_AUDIO_CHUNKER_GAP_US) {
			/* Padding the partial block with silence would invent
			 * samples at a time that never was: drop it instead. */
			k->discontinuities++;
			k->samples_dropped += k->block_samples;
			k->block_samples = 0;
		}
	}
	k->started = true;
	k->next_us = capture_us + samples_us(samples);
	while (done < samples) {
		size_t take = PPS_AUDIO_BLOCK_SAMPLES - k->block_samples;

		if (take > samples - done)
			take = samples - done;
		if (k->block_samples == 0)
			k->block_us = capture_us + samples_us(done);
		memcpy(k->block + k->block_samples, in + done * BYTES_PER_SAMPLE,
		       take * BYTES_PER_SAMPLE);
		k->block_samples += take;
		done += take;
		if (k->block_samples < PPS_AUDIO_BLOCK_SAMPLES)
			break;
		k->block_samples = 0;
		k->blocks++;
		blocks++;
		if (cb)
			cb(k->block, PPS_AUDIO_BLOCK_SAMPLES, k->block_us, user);
	}
	return blocks;
}
