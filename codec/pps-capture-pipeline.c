/* SPDX-License-Identifier: MIT */
/*
 * The GStreamer pipeline a capture's parameters describe: the video's, as
 * before there was audio, and the audio branch's after it, in one
 * description so that both share the pipeline's clock and base time.
 * Strings only: pps-capture.c builds and runs them.
 */
#include "pps-codec-internal.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>

pps_capture_branch_t
pps_capture_branch(const pps_capture_params_t *params)
{
	switch (params->audio) {
	case PPS_CAPTURE_AUDIO_SOURCE:
		switch (params->type) {
		case PPS_CAPTURE_SOURCE_TEST:
			return PPS_CAPTURE_BRANCH_TICKS;
		case PPS_CAPTURE_SOURCE_FILE:
		case PPS_CAPTURE_SOURCE_URI:
			return PPS_CAPTURE_BRANCH_DECODED;
		case PPS_CAPTURE_SOURCE_PIPELINE:
			/* A reference to a missing element would not parse. */
			return params->input && strstr(params->input, "pps_audio_src")
			           ? PPS_CAPTURE_BRANCH_USER
			           : PPS_CAPTURE_BRANCH_NONE;
		default:
			return PPS_CAPTURE_BRANCH_NONE; /* a camera has no sound of its own */
		}
	case PPS_CAPTURE_AUDIO_TICKS:
		return PPS_CAPTURE_BRANCH_TICKS;
	case PPS_CAPTURE_AUDIO_MIC:
		return PPS_CAPTURE_BRANCH_MIC;
	default:
		return PPS_CAPTURE_BRANCH_NONE;
	}
}

bool
pps_capture_ticks_live(pps_capture_source_t type)
{
	return type == PPS_CAPTURE_SOURCE_TEST || type == PPS_CAPTURE_SOURCE_CAMERA;
}

/* The audio branch's part of the description, after the video's ("" for
 * none, and for the microphone, added later). */
static char *
describe_audio(const pps_capture_params_t *params)
{
	switch (pps_capture_branch(params)) {
	case PPS_CAPTURE_BRANCH_TICKS:
		/* 480 samples per buffer: 10 ms blocks as they are made. */
		return g_strdup_printf("audiotestsrc is-live=%s wave=ticks freq=1000 "
		                       "sine-periods-per-tick=20 tick-interval=%lld "
		                       "samplesperbuffer=%d ! " PPS_CAPTURE_AUDIO_TAIL,
		                       pps_capture_ticks_live(params->type) ? "true" : "false",
		                       (long long)PPS_CAPTURE_TICK_PERIOD_US * 1000,
		                       PPS_AUDIO_BLOCK_SAMPLES);
	case PPS_CAPTURE_BRANCH_DECODED:
		return g_strdup_printf(
		    "%s. ! audio/x-raw ! queue name=pps_audio_in ! " PPS_CAPTURE_AUDIO_TAIL,
		    params->type == PPS_CAPTURE_SOURCE_FILE ? "pps_dec" : "pps_src");
	case PPS_CAPTURE_BRANCH_USER:
		return g_strdup(
		    "pps_audio_src. ! queue name=pps_audio_in ! " PPS_CAPTURE_AUDIO_TAIL);
	default:
		return g_strdup("");
	}
}

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
describe_video(const pps_capture_params_t *params, bool drop_only)
{
	bool decoded = pps_capture_branch(params) == PPS_CAPTURE_BRANCH_DECODED;
	const char *pattern = params->pattern;
	int fps = params->fps;
	const char *videorate = drop_only ? "videorate drop-only=true" : "videorate";
	char caps[160];

	snprintf(caps, sizeof(caps),
	         "video/x-raw,format=I420,width=%d,height=%d,framerate=%d/1,"
	         "pixel-aspect-ratio=1/1",
	         params->width, params->height, fps);
	switch (params->type) {
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
		/* With the file's audio, each of decodebin's pads goes to the
		 * branch of its kind. */
		if (decoded)
			return g_strdup_printf(
			    "filesrc name=pps_src ! decodebin name=pps_dec "
			    "pps_dec. ! video/x-raw ! videoconvert ! videoscale ! "
			    "%s ! %s ! appsink name=pps_sink",
			    videorate, caps);
		return g_strdup_printf("filesrc name=pps_src ! decodebin ! "
		                       "videoconvert ! videoscale ! %s ! %s ! "
		                       "appsink name=pps_sink",
		                       videorate, caps);
	case PPS_CAPTURE_SOURCE_URI:
		/* Without the audio branch only the video pad links; other
		 * streams (audio) stay unlinked, which demuxers tolerate while
		 * one stream is linked. */
		if (decoded)
			return g_strdup_printf(
			    "uridecodebin name=pps_src "
			    "pps_src. ! video/x-raw ! videoconvert ! videoscale ! "
			    "%s ! %s ! appsink name=pps_sink",
			    videorate, caps);
		return g_strdup_printf("uridecodebin name=pps_src ! videoconvert ! videoscale ! "
		                       "%s ! %s ! appsink name=pps_sink",
		                       videorate, caps);
	default:
		return g_strdup_printf("%s ! videoconvert ! videoscale ! %s ! %s ! "
		                       "appsink name=pps_sink",
		                       params->input, videorate, caps);
	}
}

char *
pps_capture_describe(const pps_capture_params_t *params, bool drop_only)
{
	char *video = describe_video(params, drop_only);
	char *audio = describe_audio(params);
	char *all;

	if (!audio[0]) {
		g_free(audio);
		return video; /* exactly the video's pipeline */
	}
	all = g_strdup_printf("%s %s", video, audio);
	g_free(video);
	g_free(audio);
	return all;
}
