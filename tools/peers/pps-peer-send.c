/* SPDX-License-Identifier: MIT */
/*
 * pps-peer-send: ppstream's own test source (pps_capture, pixel timecodes on)
 * encoded and sent the way a GStreamer user would stream live video without
 * ppstream, so the peer comparison (docs/PEERS.md) feeds every system the
 * same pictures:
 *
 *   pps_capture --frame_cb--> appsrc ! x264enc tune=zerolatency bitrate=KBPS
 *       ! h264parse config-interval=-1 ! mpegtsmux ! tcpserversink | srtsink
 *
 * The capture's delivery thread pushes into appsrc (bounded, leaky: the
 * oldest raw frame goes when x264 falls behind, counted); GStreamer's threads
 * do the rest. main() only waits for the deadline, a signal or a bus error.
 */
#include <errno.h>
#include <getopt.h>
#include <gst/app/gstappsrc.h>
#include <gst/gst.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pps-codec.h"
#include "pps-server-settings.h"
#include "pps-version.h"
#include "peer-common.h"
#include "pps-time.h"

#define PPS_DEFAULT_PEER_KBPS      1800
#define PPS_DEFAULT_SRT_LATENCY_MS 120
/* Raw frames appsrc may hold before it drops the oldest. */
#define APPSRC_MAX_FRAMES 4

typedef struct {
	GstElement *pipeline;
	GstElement *appsrc;
	GstElement *sink;
	size_t frame_bytes;
	uint64_t frames_pushed;
	uint64_t frames_refused;
	uint64_t bytes_sent;
	uint32_t first_index, last_index;
	int64_t first_capture_us;
	bool have_first;
} sender_t;

static volatile sig_atomic_t stop_requested;

static void
signal_cb(int signo)
{
	(void)signo;
	stop_requested = 1;
}

/* Capture delivery thread: copy the stamped picture into a GstBuffer. */
static void
capture_frame_cb(const pps_frame_t *frame, void *user)
{
	sender_t *s = user;
	GstBuffer *buffer;
	GstMapInfo map;
	uint8_t *out;

	if (!frame)
		return; /* the source failed: main notices through the stall */
	buffer = gst_buffer_new_allocate(NULL, s->frame_bytes, NULL);
	if (!buffer || !gst_buffer_map(buffer, &map, GST_MAP_WRITE)) {
		if (buffer)
			gst_buffer_unref(buffer);
		s->frames_refused++;
		return;
	}
	out = map.data;
	for (int p = 0; p < 3; p++) {
		int w = p ? frame->width / 2 : frame->width;
		int h = p ? frame->height / 2 : frame->height;

		for (int y = 0; y < h; y++, out += w)
			memcpy(out, frame->planes[p] + (size_t)y * frame->strides[p], (size_t)w);
	}
	gst_buffer_unmap(buffer, &map);
	if (!s->have_first) {
		s->have_first = true;
		s->first_index = frame->frame_index;
		s->first_capture_us = frame->capture_us;
	}
	s->last_index = frame->frame_index;
	/* appsrc stamps the running time (do-timestamp) and takes the buffer. */
	if (gst_app_src_push_buffer(GST_APP_SRC(s->appsrc), buffer) == GST_FLOW_OK)
		s->frames_pushed++;
	else
		s->frames_refused++;
}

/* Streaming thread of the sink: count what leaves for the network. */
static GstPadProbeReturn
count_bytes_cb(GstPad *pad, GstPadProbeInfo *info, gpointer user)
{
	sender_t *s = user;

	(void)pad;
	s->bytes_sent += pps_peer_probe_bytes(info);
	return GST_PAD_PROBE_OK;
}

static void
usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: pps-peer-send --sink tcp|srt --listen HOST:PORT [OPTION]...\n"
	    "Stream ppstream's test source with x264 over plain TCP (tcpserversink) or SRT\n"
	    "(srtsink, listener), for the peer comparison (docs/PEERS.md).\n\n"
	    "  --sink tcp|srt           transport\n"
	    "  --listen HOST:PORT       where the receiver connects\n"
	    "  --kbps N                 x264 bitrate (default %d)\n"
	    "  --srt-latency-ms N       SRT latency (default %d, libsrt's default)\n"
	    "  --duration SECONDS       stop after this long (default: until SIGINT/SIGTERM)\n"
	    "  --stats-json FILE        counters as JSON at exit\n"
	    "  --config FILE            read [source] settings from a server INI file\n"
	    "  --set SECTION.KEY=VALUE  source setting (source.pattern=smpte, ...); repeatable;\n"
	    "                           applied after --config\n"
	    "  -h, --help               this help\n"
	    "  -V, --version            the version\n\n"
	    "Prints \"ready\" on stdout once the sink listens.\n"
	    "Exit status: 0 done; 1 runtime error; 2 usage or configuration error.\n",
	    PPS_DEFAULT_PEER_KBPS, PPS_DEFAULT_SRT_LATENCY_MS);
}

static void
write_stats(const char *path, const sender_t *s, const pps_capture_stats_t *cap, double seconds,
            const char *sink, int kbps, const char *srt)
{
	FILE *f = pps_peer_stats_open(path, "pps-peer-send");

	if (!f)
		return;
	fprintf(f,
	        "{\"sink\":\"%s\",\"kbps\":%d,\"seconds\":%.3f,\"frames_captured\":%" PRIu64
	        ",\"frames_dropped_capture\":%" PRIu64 ",\"frames_pushed\":%" PRIu64
	        ",\"frames_refused\":%" PRIu64 ",\"bytes_sent\":%" PRIu64
	        ",\"first_index\":%u,\"last_index\":%u,\"first_capture_us\":%" PRId64,
	        sink, kbps, seconds, cap->frames_captured, cap->frames_dropped, s->frames_pushed,
	        s->frames_refused, s->bytes_sent, s->first_index, s->last_index,
	        s->first_capture_us);
	pps_peer_stats_close(f, srt);
}

int
main(int argc, char **argv)
{
	static const struct option options[] = {
	    {"sink", required_argument, NULL, 's'},
	    {"listen", required_argument, NULL, 'l'},
	    {"kbps", required_argument, NULL, 'k'},
	    {"srt-latency-ms", required_argument, NULL, 'L'},
	    {"duration", required_argument, NULL, 'd'},
	    {"stats-json", required_argument, NULL, 'j'},
	    {"set", required_argument, NULL, 'S'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	const char *sink_name = NULL, *listen = NULL, *stats_path = NULL;
	int kbps = PPS_DEFAULT_PEER_KBPS, srt_latency_ms = PPS_DEFAULT_SRT_LATENCY_MS, port = 0;
	double duration_s = 0;
	char host[256], err[512], *description, *srt_stats;
	double seconds;
	sender_t s = {0};
	pps_config_t *config;
	pps_server_settings_t settings;
	pps_capture_t *capture = NULL;
	pps_capture_stats_t cap_stats = {0};
	GError *error = NULL;
	GstBus *bus;
	GstCaps *caps;
	GstPad *pad;
	int64_t start_us, deadline_us;
	int opt, status = 1, width, height, fps;

	config = pps_config_new(pps_server_settings_schema());
	if (!config) {
		fprintf(stderr, "pps-peer-send: out of memory\n");
		return 1;
	}
	/* --config FILE and --set, as pps-server takes them (applied in that order). */
	if (pps_config_parse_args(config, &argc, argv, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-peer-send: %s\n", err);
		goto err_usage;
	}
	if (pps_cli_refuse_abbreviated(argc, argv, options, "pps-peer-send"))
		goto err_usage;
	while ((opt = getopt_long(argc, argv, "hV", options, NULL)) != -1) {
		switch (opt) {
		case 's':
			sink_name = optarg;
			break;
		case 'l':
			listen = optarg;
			break;
		case 'k':
			kbps = atoi(optarg);
			break;
		case 'L':
			srt_latency_ms = atoi(optarg);
			break;
		case 'd':
			duration_s = atof(optarg);
			break;
		case 'j':
			stats_path = optarg;
			break;
		case 'S':
			if (pps_config_set(config, optarg, err, sizeof(err)) < 0) {
				fprintf(stderr, "pps-peer-send: %s\n", err);
				goto err_usage;
			}
			break;
		case 'h':
			usage(stdout);
			pps_config_free(config);
			return 0;
		case 'V':
			printf("pps-peer-send %s\n", PPS_VERSION);
			pps_config_free(config);
			return 0;
		default:
			goto err_usage;
		}
	}
	if (!sink_name || (strcmp(sink_name, "tcp") && strcmp(sink_name, "srt")) || !listen ||
	    pps_peer_split_host_port(listen, host, sizeof(host), &port) < 0 || kbps < 64 ||
	    srt_latency_ms < 0 || duration_s < 0 || optind != argc) {
		usage(stderr);
		goto err_usage;
	}

	if (pps_server_settings_from_config(config, &settings, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-peer-send: %s\n", err);
		goto err_usage;
	}
	gst_init(NULL, NULL);
	width = settings.server.media.capture.width;
	height = settings.server.media.capture.height;
	fps = settings.server.media.capture.fps;
	s.frame_bytes = (size_t)width * (size_t)height * 3 / 2;
	/* The usual low-latency recipe: no lookahead, no B frames, sliced threads
	 * (tune=zerolatency); a keyframe every 2 s like ppstream's gop_frames=60;
	 * SPS/PPS before every keyframe so a receiver can join. SRT carries
	 * 7 TS packets per message (1316 bytes, its live payload size); with
	 * any other alignment srtsink sends one 188-byte packet per message and
	 * the receiver decodes nothing (tried). The price: mpegtsmux holds a
	 * picture's last < 7 packets until the next picture fills the message,
	 * up to one frame period (docs/PEERS.md shows the measured cost). */
	description = g_strdup_printf(
	    "appsrc name=src is-live=true format=time do-timestamp=true ! "
	    "x264enc tune=zerolatency bitrate=%d speed-preset=veryfast key-int-max=%d ! "
	    "h264parse config-interval=-1 ! mpegtsmux alignment=%d ! %s name=sink",
	    kbps, 2 * fps, strcmp(sink_name, "srt") ? -1 : 7,
	    strcmp(sink_name, "srt") ? "tcpserversink sync=false async=false"
	                             : "srtsink sync=false async=false wait-for-connection=false");
	s.pipeline = gst_parse_launch(description, &error);
	g_free(description);
	if (!s.pipeline || error) {
		fprintf(stderr, "pps-peer-send: cannot build the pipeline: %s\n",
		        error ? error->message : "unknown error");
		g_clear_error(&error);
		goto err_config;
	}
	s.appsrc = gst_bin_get_by_name(GST_BIN(s.pipeline), "src");
	s.sink = gst_bin_get_by_name(GST_BIN(s.pipeline), "sink");
	caps =
	    gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "I420", "width", G_TYPE_INT,
	                        width, "height", G_TYPE_INT, height, "framerate", GST_TYPE_FRACTION,
	                        fps, 1, "pixel-aspect-ratio", GST_TYPE_FRACTION, 1, 1, NULL);
	g_object_set(s.appsrc, "caps", caps, "max-bytes",
	             (guint64)(s.frame_bytes * APPSRC_MAX_FRAMES), "leaky-type",
	             2 /* downstream: drop the oldest */, NULL);
	gst_caps_unref(caps);
	if (!strcmp(sink_name, "srt")) {
		char *uri = g_strdup_printf("srt://%s:%d?mode=listener", host, port);

		g_object_set(s.sink, "uri", uri, "latency", srt_latency_ms, NULL);
		g_free(uri);
	} else {
		g_object_set(s.sink, "host", host, "port", port, NULL);
	}
	pad = gst_element_get_static_pad(s.sink, "sink");
	gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST,
	                  count_bytes_cb, &s, NULL);
	gst_object_unref(pad);

	if (gst_element_set_state(s.pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
		fprintf(stderr, "pps-peer-send: cannot start the %s sink on %s\n", sink_name,
		        listen);
		goto err_pipeline;
	}
	capture =
	    pps_capture_new(&settings.server.media.capture, capture_frame_cb, &s, err, sizeof(err));
	if (!capture || pps_capture_start(capture, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-peer-send: %s\n", err);
		goto err_pipeline;
	}
	signal(SIGINT, signal_cb);
	signal(SIGTERM, signal_cb);
	printf("ready\n");
	fflush(stdout);

	start_us = pps_time_monotonic_us();
	deadline_us = duration_s > 0 ? start_us + (int64_t)(duration_s * 1e6) : INT64_MAX;
	bus = gst_element_get_bus(s.pipeline);
	status = 0;
	while (!stop_requested && pps_time_monotonic_us() < deadline_us) {
		/* Waiting on the bus is this program's only loop; 100 ms bounds how
		 * late a signal or the deadline is noticed. */
		GstMessage *msg = gst_bus_timed_pop_filtered(bus, 100 * GST_MSECOND,
		                                             GST_MESSAGE_ERROR | GST_MESSAGE_EOS);

		if (msg) {
			if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
				GError *e = NULL;

				gst_message_parse_error(msg, &e, NULL);
				fprintf(stderr, "pps-peer-send: %s: %s\n",
				        GST_OBJECT_NAME(msg->src), e ? e->message : "error");
				g_clear_error(&e);
				status = 1;
			}
			gst_message_unref(msg);
			break;
		}
		if (*pps_capture_error(capture)) {
			fprintf(stderr, "pps-peer-send: %s\n", pps_capture_error(capture));
			status = 1;
			break;
		}
	}
	gst_object_unref(bus);
	pps_capture_stop(capture);
	pps_capture_get_stats(capture, &cap_stats);
	srt_stats = strcmp(sink_name, "srt") ? NULL : pps_peer_srt_stats_string(s.sink);
	seconds = (double)(pps_time_monotonic_us() - start_us) / 1e6;
	/* Stopped first, so no streaming thread updates the counters being written. */
	gst_element_set_state(s.pipeline, GST_STATE_NULL);
	if (stats_path)
		write_stats(stats_path, &s, &cap_stats, seconds, sink_name, kbps, srt_stats);
	g_free(srt_stats);
	pps_capture_free(capture);
	gst_object_unref(s.sink);
	gst_object_unref(s.appsrc);
	gst_object_unref(s.pipeline);
	pps_config_free(config);
	return status;

err_pipeline:
	pps_capture_free(capture);
	gst_element_set_state(s.pipeline, GST_STATE_NULL);
	gst_object_unref(s.sink);
	gst_object_unref(s.appsrc);
	gst_object_unref(s.pipeline);
err_config:
	pps_config_free(config);
	return 1;
err_usage:
	pps_config_free(config);
	return 2;
}
