/* SPDX-License-Identifier: MIT */
/*
 * The audio track's pieces without GStreamer (suite unit): Opus round trip
 * of ticks (found where they were encoded, the lookahead later), loss
 * concealment and FEC recovery, refusals; voice activity and tick finding;
 * the capture's re-chunker; the tick flash in a picture; the capture's
 * pipeline descriptions (without audio, exactly the video's as before).
 * Usage: test-audio [-t WORD]
 */
#include "pps-codec-internal.h"
#include "pps-test.h"

#include <errno.h>
#include <math.h>

#include <glib.h>

#define RATE         PPS_AUDIO_RATE_HZ
#define SECOND       RATE
#define TICK_SAMPLES (RATE / 50) /* 20 ms, as the capture's ticks */

/* A tick as audiotestsrc's: a 1 kHz sine of amplitude 0.8 from phase 0. */
static void
put_tick(int16_t *pcm, size_t at)
{
	for (size_t i = 0; i < TICK_SAMPLES; i++)
		pcm[at + i] = (int16_t)(0.8 * 32767 * sin(2 * M_PI * 1000.0 * (double)i / RATE));
}

/* 1 s with ticks at 120, 370, 620 and 870 ms: 100 ms of silence before each. */
static const size_t tick_at[] = {RATE * 120 / 1000, RATE * 370 / 1000, RATE * 620 / 1000,
                                 RATE * 870 / 1000};
#define TICKS (sizeof(tick_at) / sizeof(tick_at[0]))

static int16_t *
ticks_second(void)
{
	int16_t *pcm = calloc(SECOND, sizeof(*pcm));

	REQUIRE(pcm);
	for (size_t t = 0; t < TICKS; t++)
		put_tick(pcm, tick_at[t]);
	return pcm;
}

static pps_audio_encoder_t *
encoder(int frame_ms)
{
	pps_audio_encoder_params_t p;
	pps_audio_encoder_t *e;

	pps_audio_encoder_params_init(&p);
	p.frame_ms = frame_ms;
	e = pps_audio_encoder_new(&p);
	REQUIRE(e);
	return e;
}

/* Encodes the second of ticks in frames of @frame_ms, decodes it back: the
 * ticks are found one lookahead later, within a frame. */
static void
round_trip(int frame_ms)
{
	int16_t *in = ticks_second(), *out = calloc(SECOND, sizeof(*out));
	pps_audio_encoder_t *e = encoder(frame_ms);
	pps_audio_decoder_t *d = pps_audio_decoder_new();
	int frame = pps_audio_encoder_frame_samples(e);
	int lookahead = pps_audio_encoder_lookahead_us(e) * RATE / 1000000;
	size_t onsets[8], found, bytes = 0;

	REQUIRE(out && d);
	CHECK_EQ_INT(frame, frame_ms * 48);
	/* libopus 1.3 in VOIP mode at 48 kHz: 2.5 ms + 4 ms. */
	CHECK(lookahead > 0 && lookahead < frame, "lookahead %d samples", lookahead);
	for (int at = 0; at + frame <= SECOND; at += frame) {
		uint8_t packet[PPS_AUDIO_MAX_PACKET_BYTES];
		int n = pps_audio_encoder_encode(e, in + at, packet, sizeof(packet));

		CHECK(n > 0, "encode: %d", n);
		if (n <= 0)
			break;
		bytes += (size_t)n;
		CHECK_EQ_INT(pps_audio_decoder_decode(d, packet, (size_t)n, out + at, frame),
		             frame);
	}
	found = pps_audio_find_ticks(out, SECOND, onsets, 8);
	CHECK_EQ_INT(found, TICKS);
	for (size_t t = 0; t < found && t < TICKS; t++) {
		long error = (long)onsets[t] - (long)(tick_at[t] + (size_t)lookahead);

		CHECK(labs(error) <= frame, "tick %zu at %zu, encoded at %zu + lookahead %d", t,
		      onsets[t], tick_at[t], lookahead);
	}
	/* At most 32 kbit/s (VBR: silence costs less). */
	CHECK(bytes > 1000 && bytes < 5000, "%zu bytes for 1 s", bytes);
	fprintf(stderr, "%d ms frames: %zu bytes/s, lookahead %d us, ticks at +%zu samples\n",
	        frame_ms, bytes, pps_audio_encoder_lookahead_us(e),
	        found ? onsets[0] - tick_at[0] : 0);
	pps_audio_encoder_free(e);
	pps_audio_decoder_free(d);
	free(in);
	free(out);
}

static void
audio_opus_round_trip(void)
{
	round_trip(20);
	round_trip(10);
}

static double
rms(const int16_t *pcm, int n)
{
	double energy = 0;

	for (int i = 0; i < n; i++)
		energy += (double)pcm[i] * pcm[i];
	return sqrt(energy / n);
}

/*
 * A frame inside a tick is lost. Concealment extrapolates the frame before
 * (the tick's start); the next packet's FEC carries a coarse copy of the
 * lost frame itself: much closer to what decoding it would have given.
 * (FEC is on, loss_percent 5 and 32 kbit/s by default: libopus codes it.)
 */
static double
rms_error(const int16_t *a, const int16_t *b, int n)
{
	double energy = 0;

	for (int i = 0; i < n; i++)
		energy += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
	return sqrt(energy / n);
}

static void
audio_opus_loss(void)
{
	int16_t *in = ticks_second();
	pps_audio_encoder_t *e = encoder(20);
	pps_audio_decoder_t *ref = pps_audio_decoder_new(), *plc = pps_audio_decoder_new(),
	                    *fec = pps_audio_decoder_new();
	int frame = pps_audio_encoder_frame_samples(e);
	/* The frame after the one the second tick starts in: the tick all
	 * through (20 ms, delayed by the lookahead). */
	int lost = (int)tick_at[1] / frame + 1;
	uint8_t packets[SECOND / 960][PPS_AUDIO_MAX_PACKET_BYTES];
	int sizes[SECOND / 960];
	int16_t pcm_ref[960], pcm_plc[960], pcm_fec[960], scratch[960];
	double plc_error, fec_error;

	REQUIRE(ref && plc && fec && frame == 960);
	for (int f = 0; f < SECOND / frame; f++) {
		sizes[f] =
		    pps_audio_encoder_encode(e, in + f * frame, packets[f], sizeof(packets[f]));
		REQUIRE(sizes[f] > 0);
	}
	for (int f = 0; f < lost; f++) {
		const uint8_t *p = packets[f];
		size_t len = (size_t)sizes[f];

		CHECK_EQ_INT(pps_audio_decoder_decode(ref, p, len, scratch, frame), frame);
		CHECK_EQ_INT(pps_audio_decoder_decode(plc, p, len, scratch, frame), frame);
		CHECK_EQ_INT(pps_audio_decoder_decode(fec, p, len, scratch, frame), frame);
	}
	CHECK_EQ_INT(
	    pps_audio_decoder_decode(ref, packets[lost], (size_t)sizes[lost], pcm_ref, frame),
	    frame);
	CHECK_EQ_INT(pps_audio_decoder_conceal(plc, pcm_plc, frame), frame);
	CHECK_EQ_INT(pps_audio_decoder_recover(fec, packets[lost + 1], (size_t)sizes[lost + 1],
	                                       pcm_fec, frame),
	             frame);
	/* Both carry on with the next packet. */
	CHECK_EQ_INT(pps_audio_decoder_decode(plc, packets[lost + 1], (size_t)sizes[lost + 1],
	                                      scratch, frame),
	             frame);
	CHECK_EQ_INT(pps_audio_decoder_decode(fec, packets[lost + 1], (size_t)sizes[lost + 1],
	                                      scratch, frame),
	             frame);
	plc_error = rms_error(pcm_plc, pcm_ref, frame);
	fec_error = rms_error(pcm_fec, pcm_ref, frame);
	fprintf(stderr,
	        "lost frame %d (RMS %.0f): concealed with error RMS %.0f, recovered from "
	        "FEC with error RMS %.0f\n",
	        lost, rms(pcm_ref, frame), plc_error, fec_error);
	CHECK(rms(pcm_fec, frame) > 1000 && fec_error < plc_error / 2,
	      "FEC did no better than concealment");
	/* Concealment in 2.5 ms steps only. */
	CHECK_EQ_INT(pps_audio_decoder_conceal(plc, pcm_plc, 100), -EINVAL);
	CHECK_EQ_INT(pps_audio_decoder_conceal(plc, pcm_plc, 120), 120);
	pps_audio_encoder_free(e);
	pps_audio_decoder_free(ref);
	pps_audio_decoder_free(plc);
	pps_audio_decoder_free(fec);
	free(in);
}

static void
audio_opus_refusals(void)
{
	pps_audio_encoder_params_t p, bad;
	pps_audio_encoder_t *e;
	pps_audio_decoder_t *d = pps_audio_decoder_new();
	/* Code 3 (several frames) with a frame count of 0: no valid packet. */
	const uint8_t corrupt[] = {0xfb, 0x00, 0x11, 0x22};
	int16_t pcm[5760] = {0};
	uint8_t packet[PPS_AUDIO_MAX_PACKET_BYTES];

	REQUIRE(d);
	pps_audio_encoder_params_init(&p);
	CHECK(p.frame_ms == 20 && p.bitrate_bps == 32000 && p.fec && p.loss_percent == 5);
	{
		const struct {
			int frame_ms, bitrate_bps, loss_percent;
		} cases[] = {{5, 32000, 5},  {40, 32000, 5},  {20, 15999, 5},
		             {20, 64001, 5}, {20, 32000, -1}, {20, 32000, 101}};

		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			bad = p;
			bad.frame_ms = cases[i].frame_ms;
			bad.bitrate_bps = cases[i].bitrate_bps;
			bad.loss_percent = cases[i].loss_percent;
			errno = 0;
			e = pps_audio_encoder_new(&bad);
			CHECK(!e && errno == EINVAL, "case %zu taken", i);
			pps_audio_encoder_free(e);
		}
	}
	e = pps_audio_encoder_new(&p);
	REQUIRE(e);
	CHECK_EQ_INT(pps_audio_encoder_set_bitrate(e, 15999), -EINVAL);
	CHECK_EQ_INT(pps_audio_encoder_set_bitrate(e, 64001), -EINVAL);
	CHECK_EQ_INT(pps_audio_encoder_set_bitrate(e, 16000), 0);
	CHECK_EQ_INT(pps_audio_encoder_set_bitrate(e, 64000), 0);
	CHECK_EQ_INT(pps_audio_encoder_set_loss_percent(e, -1), -EINVAL);
	CHECK_EQ_INT(pps_audio_encoder_set_loss_percent(e, 101), -EINVAL);
	CHECK_EQ_INT(pps_audio_encoder_set_loss_percent(e, 0), 0);
	CHECK_EQ_INT(pps_audio_encoder_set_loss_percent(e, 100), 0);
	/* No room at all; a capacity caps the packet. */
	CHECK_EQ_INT(pps_audio_encoder_encode(e, pcm, packet, 0), -EINVAL);
	CHECK_EQ_INT(pps_audio_encoder_encode(e, pcm, packet, 1), 1);
	CHECK(pps_audio_encoder_encode(e, pcm, packet, sizeof(packet)) > 0);

	CHECK_EQ_INT(pps_audio_decoder_decode(d, corrupt, sizeof(corrupt), pcm, 5760), -EINVAL);
	CHECK_EQ_INT(pps_audio_decoder_decode(d, corrupt, 0, pcm, 5760), -EINVAL);
	CHECK_EQ_INT(pps_audio_decoder_recover(d, corrupt, sizeof(corrupt), pcm, 960), -EINVAL);
	/* The decoder is still usable after a corrupt packet. */
	{
		int n = pps_audio_encoder_encode(e, pcm, packet, sizeof(packet));

		REQUIRE(n > 0);
		CHECK_EQ_INT(pps_audio_decoder_decode(d, packet, (size_t)n, pcm, 5760), 960);
		/* Room for less than the packet's 20 ms. */
		CHECK_EQ_INT(pps_audio_decoder_decode(d, packet, (size_t)n, pcm, 480), -ENOBUFS);
	}
	pps_audio_encoder_free(e);
	pps_audio_decoder_free(d);
}

static void
audio_is_speech(void)
{
	int16_t pcm[480];

	memset(pcm, 0, sizeof(pcm));
	CHECK(!pps_audio_is_speech(pcm, 480, -50));
	CHECK(!pps_audio_is_speech(pcm, 0, -50));
	/* A square wave of amplitude 32768 * 10^(-40/20) = 328 is -40 dBFS. */
	for (int i = 0; i < 480; i++)
		pcm[i] = (int16_t)(i % 2 ? 328 : -328);
	CHECK(pps_audio_is_speech(pcm, 480, -50));
	CHECK(pps_audio_is_speech(pcm, 480, -40.1));
	CHECK(!pps_audio_is_speech(pcm, 480, -39.9));
	CHECK(!pps_audio_is_speech(pcm, 480, -30));
}

static void
audio_find_ticks(void)
{
	int16_t *pcm = ticks_second();
	size_t onsets[8];

	CHECK_EQ_INT(pps_audio_find_ticks(pcm, SECOND, onsets, 8), TICKS);
	for (size_t t = 0; t < TICKS; t++)
		/* The sine starts at 0: its first sample is silent, the
		 * second (1 kHz, 0.8 of full scale: 3400) is not. */
		CHECK_EQ_INT(onsets[t], tick_at[t] + 1);
	/* At most @max. */
	CHECK_EQ_INT(pps_audio_find_ticks(pcm, SECOND, onsets, 2), 2);
	CHECK_EQ_INT(onsets[1], tick_at[1] + 1);
	/* A tick at the very start has no silence before it in the buffer. */
	CHECK_EQ_INT(pps_audio_find_ticks(pcm + tick_at[0], SECOND - tick_at[0], onsets, 8),
	             TICKS - 1);
	/* Two bursts 50 ms apart are one tick. */
	put_tick(pcm, tick_at[1] + RATE / 20);
	CHECK_EQ_INT(pps_audio_find_ticks(pcm, SECOND, onsets, 8), TICKS);
	/* Noise below the level is silence. */
	for (size_t i = 0; i < 4000; i++)
		pcm[i] = (int16_t)(i % 3 ? 900 : -900);
	CHECK_EQ_INT(pps_audio_find_ticks(pcm, SECOND, onsets, 8), TICKS);
	free(pcm);
}

/* The re-chunker's output: each block's first sample and time. */
static int16_t block_first[64];
static int64_t block_us[64];
static int blocks;

static void
block_cb(const int16_t *pcm, size_t samples, int64_t capture_us, void *user)
{
	(void)user;
	CHECK_EQ_INT(samples, PPS_AUDIO_BLOCK_SAMPLES);
	if (blocks < 64) {
		block_first[blocks] = pcm[0];
		block_us[blocks] = capture_us;
	}
	blocks++;
}

static void
audio_chunker(void)
{
	pps_audio_chunker_t k;
	int16_t ramp[4096];
	/* Sample n (counted from the stream's start) holds n modulo 32768;
	 * pushed in buffers of odd sizes, at odd addresses too. */
	const size_t sizes[] = {1024, 100, 1, 379, 2048, 960, 7};
	size_t at = 0;
	int64_t t0 = 1000000000;
	uint8_t unaligned[2 * 300 + 1];

	for (int i = 0; i < 4096; i++)
		ramp[i] = (int16_t)i;
	pps_audio_chunker_reset(&k);
	blocks = 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int16_t buf[2048];

		for (size_t j = 0; j < sizes[i]; j++)
			buf[j] = (int16_t)(at + j);
		pps_audio_chunker_push(&k, buf, sizes[i], t0 + (int64_t)at * 1000000 / RATE, i == 0,
		                       block_cb, NULL);
		at += sizes[i];
	}
	CHECK_EQ_INT(blocks, (int)(at / PPS_AUDIO_BLOCK_SAMPLES));
	CHECK_EQ_INT(k.blocks, (uint64_t)blocks);
	CHECK_EQ_INT(k.discontinuities, 0);
	for (int b = 0; b < blocks && b < 64; b++) {
		CHECK_EQ_INT(block_first[b], b * PPS_AUDIO_BLOCK_SAMPLES);
		/* Each buffer's time is in whole microseconds. */
		CHECK(llabs(block_us[b] - (t0 + (int64_t)b * 10000)) <= 1, "block %d at %lld", b,
		      (long long)block_us[b]);
	}
	/* Unaligned input, contiguous in time. */
	for (size_t j = 0; j < 300; j++) {
		int16_t v = (int16_t)(at + j);

		memcpy(unaligned + 1 + 2 * j, &v, sizeof(v));
	}
	blocks = 0;
	pps_audio_chunker_push(&k, unaligned + 1, 300, t0 + (int64_t)at * 1000000 / RATE, false,
	                       block_cb, NULL);
	at += 300;
	CHECK_EQ_INT(blocks, 1);
	CHECK_EQ_INT(block_first[0], (int16_t)(at - 300 - (at - 300) % PPS_AUDIO_BLOCK_SAMPLES));
	CHECK_EQ_INT(k.discontinuities, 0);

	/* A jump of 50 ms: the partial block is dropped, the next one starts
	 * at the new time. */
	{
		size_t held = at % PPS_AUDIO_BLOCK_SAMPLES;
		int64_t jump_us = t0 + (int64_t)at * 1000000 / RATE + 50000;

		blocks = 0;
		pps_audio_chunker_push(&k, ramp, 480, jump_us, false, block_cb, NULL);
		CHECK_EQ_INT(k.discontinuities, 1);
		CHECK_EQ_INT(k.samples_dropped, held);
		CHECK_EQ_INT(blocks, 1);
		CHECK_EQ_INT(block_us[0], jump_us);
		CHECK_EQ_INT(block_first[0], 0);
		/* DISCONT flagged, same time: also a discontinuity. */
		pps_audio_chunker_push(&k, ramp, 100, jump_us + 10000, true, block_cb, NULL);
		CHECK_EQ_INT(k.discontinuities, 2);
		CHECK_EQ_INT(k.samples_dropped, held);
		/* Without a callback: counted only. */
		pps_audio_chunker_push(&k, ramp, 380, jump_us + 10000 + 100 * 1000000 / RATE, false,
		                       NULL, NULL);
		CHECK_EQ_INT(blocks, 1);
		CHECK_EQ_INT(k.blocks, (uint64_t)(at / PPS_AUDIO_BLOCK_SAMPLES) + 2);
	}
}

static void
audio_flash(void)
{
	const int sizes[][2] = {{640, 480}, {320, 240}, {96, 64}};

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		pps_frame_t *f = pps_frame_new(sizes[s][0], sizes[s][1]);

		REQUIRE(f);
		/* A mid-grey picture and a white one: neither is a flash. */
		memset(f->planes[0], 128, (size_t)f->strides[0] * f->height);
		CHECK(!pps_timecode_read_flash(f->planes[0], f->strides[0], f->width, f->height));
		memset(f->planes[0], 235, (size_t)f->strides[0] * f->height);
		CHECK(!pps_timecode_read_flash(f->planes[0], f->strides[0], f->width, f->height));
		pps_timecode_stamp_flash(f, false);
		CHECK(!pps_timecode_read_flash(f->planes[0], f->strides[0], f->width, f->height));
		pps_timecode_stamp_flash(f, true);
		CHECK(pps_timecode_read_flash(f->planes[0], f->strides[0], f->width, f->height),
		      "%dx%d", f->width, f->height);
		/* Chroma neutral, and the top-left (the timecode's) untouched. */
		CHECK_EQ_INT(
		    f->planes[1][(size_t)(f->height / 2 - 1) * f->strides[1] + f->width / 2 - 1],
		    128);
		CHECK_EQ_INT(f->planes[0][0], 235);
		pps_timecode_stamp_flash(f, false);
		CHECK(!pps_timecode_read_flash(f->planes[0], f->strides[0], f->width, f->height));
		pps_frame_free(f);
	}
}

static pps_capture_params_t
capture_params(pps_capture_source_t type, const char *input, pps_capture_audio_t audio)
{
	return (pps_capture_params_t){.type = type,
	                              .input = input,
	                              .pattern = "ball",
	                              .width = 640,
	                              .height = 480,
	                              .fps = 30,
	                              .queue_frames = 8,
	                              .audio = audio};
}

static bool
described(pps_capture_params_t params, bool drop_only, const char *expected)
{
	char *d = pps_capture_describe(&params, drop_only);
	bool same = strcmp(d, expected) == 0;

	if (!same)
		fprintf(stderr, "described:\n  %s\nexpected:\n  %s\n", d, expected);
	g_free(d);
	return same;
}

static bool
describes(pps_capture_params_t params, const char *part)
{
	char *d = pps_capture_describe(&params, true);
	bool found = strstr(d, part) != NULL;

	if (!found)
		fprintf(stderr, "described:\n  %s\nwithout:\n  %s\n", d, part);
	g_free(d);
	return found;
}

#define CAPS "video/x-raw,format=I420,width=640,height=480,framerate=30/1,pixel-aspect-ratio=1/1"
#define VR   "videorate drop-only=true"

/*
 * Without an audio branch the pipeline is the video's exactly as it was
 * before there was audio (these strings are the earlier code's); with one,
 * the branch is where it belongs.
 */
static void
audio_capture_describe(void)
{
	const char *user = "videotestsrc ! video/x-raw,width=320";
	const char *tail = "audioconvert ! audioresample ! "
	                   "audio/x-raw,format=S16LE,rate=48000,channels=1,layout=interleaved ! "
	                   "appsink name=pps_audio_sink async=false";
	char *ticks;

	for (int audio = PPS_CAPTURE_AUDIO_OFF; audio <= PPS_CAPTURE_AUDIO_MIC; audio++) {
		/* A camera and a pipeline without pps_audio_src have no sound of
		 * their own; the microphone comes later, in a bin of its own. */
		bool off = audio == PPS_CAPTURE_AUDIO_OFF || audio == PPS_CAPTURE_AUDIO_MIC;
		bool none = audio != PPS_CAPTURE_AUDIO_TICKS;

		CHECK(!off || described(capture_params(PPS_CAPTURE_SOURCE_TEST, "", audio), true,
		                        "videotestsrc is-live=true pattern=ball ! " CAPS
		                        " ! appsink name=pps_sink"));
		CHECK(!none || described(capture_params(PPS_CAPTURE_SOURCE_CAMERA, "", audio), true,
		                         "v4l2src name=pps_src ! videoconvert ! videoscale ! " VR
		                         " ! " CAPS " ! appsink name=pps_sink"));
		CHECK(!off ||
		      described(capture_params(PPS_CAPTURE_SOURCE_FILE, "/x.mp4", audio), false,
		                "filesrc name=pps_src ! decodebin ! videoconvert ! "
		                "videoscale ! videorate ! " CAPS " ! appsink name=pps_sink"));
		CHECK(!off ||
		      described(capture_params(PPS_CAPTURE_SOURCE_URI, "file:///x", audio), true,
		                "uridecodebin name=pps_src ! videoconvert ! videoscale ! " VR
		                " ! " CAPS " ! appsink name=pps_sink"));
		CHECK(!none ||
		      described(capture_params(PPS_CAPTURE_SOURCE_PIPELINE, user, audio), true,
		                "videotestsrc ! video/x-raw,width=320 ! videoconvert ! "
		                "videoscale ! " VR " ! " CAPS " ! appsink name=pps_sink"));
	}
	/* audio=source: the test picture's ticks, the file's track (decodebin's
	 * pads by kind), the user's pps_audio_src. */
	ticks = g_strdup_printf("videotestsrc is-live=true pattern=ball ! " CAPS
	                        " ! appsink name=pps_sink audiotestsrc is-live=true wave=ticks "
	                        "freq=1000 sine-periods-per-tick=20 tick-interval=1000000000 "
	                        "samplesperbuffer=480 ! %s",
	                        tail);
	CHECK(described(capture_params(PPS_CAPTURE_SOURCE_TEST, "", PPS_CAPTURE_AUDIO_SOURCE), true,
	                ticks));
	CHECK(described(capture_params(PPS_CAPTURE_SOURCE_TEST, "", PPS_CAPTURE_AUDIO_TICKS), true,
	                ticks));
	g_free(ticks);
	CHECK(describes(capture_params(PPS_CAPTURE_SOURCE_FILE, "/x.mp4", PPS_CAPTURE_AUDIO_SOURCE),
	                "filesrc name=pps_src ! decodebin name=pps_dec pps_dec. ! video/x-raw ! "
	                "videoconvert"));
	CHECK(describes(capture_params(PPS_CAPTURE_SOURCE_FILE, "/x.mp4", PPS_CAPTURE_AUDIO_SOURCE),
	                "pps_dec. ! audio/x-raw ! queue name=pps_audio_in ! audioconvert"));
	CHECK(
	    describes(capture_params(PPS_CAPTURE_SOURCE_URI, "file:///x", PPS_CAPTURE_AUDIO_SOURCE),
	              "uridecodebin name=pps_src pps_src. ! video/x-raw ! videoconvert"));
	CHECK(
	    describes(capture_params(PPS_CAPTURE_SOURCE_URI, "file:///x", PPS_CAPTURE_AUDIO_SOURCE),
	              "pps_src. ! audio/x-raw ! queue name=pps_audio_in ! audioconvert"));
	CHECK(describes(capture_params(PPS_CAPTURE_SOURCE_PIPELINE,
	                               "videotestsrc audiotestsrc name=pps_audio_src",
	                               PPS_CAPTURE_AUDIO_SOURCE),
	                "pps_audio_src. ! queue name=pps_audio_in ! audioconvert"));
	/* Ticks with a file are paced by their appsink, not live. */
	CHECK(describes(capture_params(PPS_CAPTURE_SOURCE_FILE, "/x.mp4", PPS_CAPTURE_AUDIO_TICKS),
	                "audiotestsrc is-live=false wave=ticks"));
	CHECK(describes(capture_params(PPS_CAPTURE_SOURCE_CAMERA, "", PPS_CAPTURE_AUDIO_TICKS),
	                "audiotestsrc is-live=true wave=ticks"));
	CHECK_EQ_INT(pps_capture_branch(&(pps_capture_params_t){.type = PPS_CAPTURE_SOURCE_CAMERA,
	                                                        .audio = PPS_CAPTURE_AUDIO_SOURCE}),
	             PPS_CAPTURE_BRANCH_NONE);
	CHECK_EQ_INT(pps_capture_branch(&(pps_capture_params_t){.type = PPS_CAPTURE_SOURCE_FILE,
	                                                        .audio = PPS_CAPTURE_AUDIO_MIC}),
	             PPS_CAPTURE_BRANCH_MIC);
	CHECK(!strcmp(pps_capture_audio_names[PPS_CAPTURE_AUDIO_MIC], "mic") &&
	      !pps_capture_audio_names[PPS_CAPTURE_AUDIO_COUNT]);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	PPS_TEST_RUN(audio_opus_round_trip);
	PPS_TEST_RUN(audio_opus_loss);
	PPS_TEST_RUN(audio_opus_refusals);
	PPS_TEST_RUN(audio_is_speech);
	PPS_TEST_RUN(audio_find_ticks);
	PPS_TEST_RUN(audio_chunker);
	PPS_TEST_RUN(audio_flash);
	PPS_TEST_RUN(audio_capture_describe);
	return pps_test_result();
}
