/* SPDX-License-Identifier: MIT */
/*
 * pps-peer-recv: the receiving end of a peer stream (pps-peer-send).
 *
 *   tcpclientsrc | srtsrc ! tsdemux ! h264parse ! avdec_h264 ! videoconvert
 *       ! video/x-raw,format=I420 ! appsink (sync=false: a picture is "shown"
 *                                            the moment it is decoded)
 *
 * For each decoded picture, on the appsink's streaming thread: the receive
 * time (CLOCK_REALTIME, the clock the sender's timecodes use; the lab's two
 * namespaces share it), the pixel timecode, one TSV line, and the picture
 * itself appended to a y4m file that pps-peer-score compares with the source
 * afterwards. Nothing heavier happens during the run.
 */
#include <errno.h>
#include <getopt.h>
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pps-codec.h"
#include "pps-socket.h"
#include "pps-version.h"
#include "peer-common.h"
#include "pps-time.h"

#define PPS_DEFAULT_SRT_LATENCY_MS 120

typedef struct {
	GstElement *pipeline;
	GstElement *src;
	FILE *y4m;
	FILE *frames;
	uint64_t frames_decoded;
	uint64_t frames_with_timecode;
	uint64_t bytes_received;
	int64_t first_recv_us, last_recv_us;
	int fps;
} receiver_t;

static volatile sig_atomic_t stop_requested;

static void
signal_cb(int signo)
{
	(void)signo;
	stop_requested = 1;
}

static GstFlowReturn
new_sample_cb(GstAppSink *sink, gpointer user)
{
	receiver_t *r = user;
	int64_t recv_us = pps_time_realtime_us();
	GstSample *sample = gst_app_sink_pull_sample(sink);
	GstVideoInfo info;
	GstVideoFrame frame;
	uint32_t index = 0;
	int64_t capture_us = 0;
	int found;

	if (!sample)
		return GST_FLOW_OK;
	if (!gst_video_info_from_caps(&info, gst_sample_get_caps(sample)) ||
	    !gst_video_frame_map(&frame, &info, gst_sample_get_buffer(sample), GST_MAP_READ)) {
		gst_sample_unref(sample);
		return GST_FLOW_OK;
	}
	found =
	    pps_timecode_read(GST_VIDEO_FRAME_PLANE_DATA(&frame, 0),
	                      GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0), GST_VIDEO_INFO_WIDTH(&info),
	                      GST_VIDEO_INFO_HEIGHT(&info), &index, &capture_us) == 0;
	if (!r->frames_decoded) {
		r->first_recv_us = recv_us;
		fprintf(r->y4m, "YUV4MPEG2 W%d H%d F%d:1 Ip A1:1 C420jpeg\n",
		        GST_VIDEO_INFO_WIDTH(&info), GST_VIDEO_INFO_HEIGHT(&info), r->fps);
	}
	r->last_recv_us = recv_us;
	r->frames_decoded++;
	r->frames_with_timecode += found;
	fprintf(r->frames, "%" PRIu64 "\t%" PRId64 "\t%d\t%u\t%" PRId64 "\n", r->frames_decoded - 1,
	        recv_us, found, found ? index : 0, found ? capture_us : 0);
	fputs("FRAME\n", r->y4m);
	for (int p = 0; p < 3; p++) {
		int w = GST_VIDEO_FRAME_COMP_WIDTH(&frame, p);
		int h = GST_VIDEO_FRAME_COMP_HEIGHT(&frame, p);
		const uint8_t *data = GST_VIDEO_FRAME_PLANE_DATA(&frame, p);
		int stride = GST_VIDEO_FRAME_PLANE_STRIDE(&frame, p);

		for (int y = 0; y < h; y++)
			fwrite(data + (size_t)y * stride, 1, (size_t)w, r->y4m);
	}
	gst_video_frame_unmap(&frame);
	gst_sample_unref(sample);
	return GST_FLOW_OK;
}

/* Streaming thread of the source: bytes taken off the network. */
static GstPadProbeReturn
count_bytes_cb(GstPad *pad, GstPadProbeInfo *info, gpointer user)
{
	receiver_t *r = user;

	(void)pad;
	r->bytes_received += pps_peer_probe_bytes(info);
	return GST_PAD_PROBE_OK;
}

static void
usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: pps-peer-recv --source tcp|srt --connect HOST:PORT --output FILE.y4m\n"
	    "                     --frames FILE.tsv [OPTION]...\n"
	    "Receive a pps-peer-send stream, decode it and log every picture's timecode.\n\n"
	    "  --source tcp|srt         transport (tcpclientsrc, or srtsrc as caller)\n"
	    "  --connect HOST:PORT      the sender\n"
	    "  --output FILE.y4m        every decoded picture, in order\n"
	    "  --frames FILE.tsv        per picture: ordinal, recv_us, timecode_ok, frame_index,\n"
	    "                           capture_us (CLOCK_REALTIME, microseconds)\n"
	    "  --fps N                  frame rate written into the y4m header (default 30)\n"
	    "  --srt-latency-ms N       SRT latency (default %d)\n"
	    "  --duration SECONDS       stop after this long (default: until SIGINT/SIGTERM)\n"
	    "  --stats-json FILE        counters as JSON at exit\n"
	    "  -h, --help               this help\n"
	    "  -V, --version            the version\n\n"
	    "Exit status: 0 done; 1 runtime error; 2 usage error.\n",
	    PPS_DEFAULT_SRT_LATENCY_MS);
}

static void
write_stats(const char *path, const receiver_t *r, const char *source, double seconds,
            const char *srt)
{
	FILE *f = pps_peer_stats_open(path, "pps-peer-recv");

	if (!f)
		return;
	fprintf(f,
	        "{\"source\":\"%s\",\"seconds\":%.3f,\"frames_decoded\":%" PRIu64
	        ",\"frames_with_timecode\":%" PRIu64 ",\"bytes_received\":%" PRIu64
	        ",\"first_recv_us\":%" PRId64 ",\"last_recv_us\":%" PRId64,
	        source, seconds, r->frames_decoded, r->frames_with_timecode, r->bytes_received,
	        r->first_recv_us, r->last_recv_us);
	pps_peer_stats_close(f, srt);
}

int
main(int argc, char **argv)
{
	static const struct option options[] = {
	    {"source", required_argument, NULL, 's'},
	    {"connect", required_argument, NULL, 'c'},
	    {"output", required_argument, NULL, 'o'},
	    {"frames", required_argument, NULL, 'f'},
	    {"fps", required_argument, NULL, 'F'},
	    {"srt-latency-ms", required_argument, NULL, 'L'},
	    {"duration", required_argument, NULL, 'd'},
	    {"stats-json", required_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	const char *source = NULL, *connect = NULL, *output = NULL, *frames_path = NULL;
	const char *stats_path = NULL;
	int srt_latency_ms = PPS_DEFAULT_SRT_LATENCY_MS, port = 0, opt, status = 1;
	double duration_s = 0, seconds;
	char host[256], *description, *srt_stats = NULL;
	receiver_t r = {.fps = 30};
	GstAppSinkCallbacks callbacks = {0};
	GstElement *sink;
	GError *error = NULL;
	GstBus *bus;
	GstPad *pad;
	int64_t start_us, deadline_us;

	if (pps_cli_refuse_abbreviated(argc, argv, options, "pps-peer-recv"))
		return 2;
	while ((opt = getopt_long(argc, argv, "hV", options, NULL)) != -1) {
		switch (opt) {
		case 's':
			source = optarg;
			break;
		case 'c':
			connect = optarg;
			break;
		case 'o':
			output = optarg;
			break;
		case 'f':
			frames_path = optarg;
			break;
		case 'F':
			r.fps = atoi(optarg);
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
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("pps-peer-recv %s\n", PPS_VERSION);
			return 0;
		default:
			fprintf(stderr, "pps-peer-recv: see --help\n");
			return 2;
		}
	}
	if (!source || (strcmp(source, "tcp") && strcmp(source, "srt")) || !connect || !output ||
	    !frames_path || pps_peer_split_host_port(connect, host, sizeof(host), &port) < 0 ||
	    r.fps < 1 || srt_latency_ms < 0 || duration_s < 0 || optind != argc) {
		usage(stderr);
		return 2;
	}
	r.y4m = fopen(output, "w");
	r.frames = fopen(frames_path, "w");
	if (!r.y4m || !r.frames) {
		fprintf(stderr, "pps-peer-recv: cannot write %s: %s\n",
		        !r.y4m ? output : frames_path, strerror(errno));
		goto err_files;
	}
	fputs("ordinal\trecv_us\ttimecode_ok\tframe_index\tcapture_us\n", r.frames);

	gst_init(NULL, NULL);
	/* Slice threads only: frame threading would hold a decoded picture back
	 * by one frame per extra thread, a delay no live viewer would choose. */
	description = g_strdup_printf(
	    "%s name=src ! tsdemux ! h264parse ! avdec_h264 thread-type=slice ! videoconvert ! "
	    "video/x-raw,format=I420 ! appsink name=sink sync=false max-buffers=4",
	    strcmp(source, "srt") ? "tcpclientsrc" : "srtsrc");
	r.pipeline = gst_parse_launch(description, &error);
	g_free(description);
	if (!r.pipeline || error) {
		fprintf(stderr, "pps-peer-recv: cannot build the pipeline: %s\n",
		        error ? error->message : "unknown error");
		g_clear_error(&error);
		goto err_files;
	}
	r.src = gst_bin_get_by_name(GST_BIN(r.pipeline), "src");
	if (!strcmp(source, "srt")) {
		char *uri = g_strdup_printf("srt://%s:%d?mode=caller", host, port);

		g_object_set(r.src, "uri", uri, "latency", srt_latency_ms, NULL);
		g_free(uri);
	} else {
		g_object_set(r.src, "host", host, "port", port, NULL);
	}
	pad = gst_element_get_static_pad(r.src, "src");
	gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST,
	                  count_bytes_cb, &r, NULL);
	gst_object_unref(pad);
	sink = gst_bin_get_by_name(GST_BIN(r.pipeline), "sink");
	callbacks.new_sample = new_sample_cb;
	gst_app_sink_set_callbacks(GST_APP_SINK(sink), &callbacks, &r, NULL);
	gst_object_unref(sink);

	signal(SIGINT, signal_cb);
	signal(SIGTERM, signal_cb);
	start_us = pps_time_monotonic_us();
	deadline_us = duration_s > 0 ? start_us + (int64_t)(duration_s * 1e6) : INT64_MAX;
	if (gst_element_set_state(r.pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
		fprintf(stderr, "pps-peer-recv: cannot connect to %s (%s)\n", connect, source);
		goto err_pipeline;
	}
	bus = gst_element_get_bus(r.pipeline);
	status = 0;
	while (!stop_requested && pps_time_monotonic_us() < deadline_us) {
		/* The bus is the only thing waited on; 100 ms bounds how late a
		 * signal or the deadline is noticed. */
		GstMessage *msg = gst_bus_timed_pop_filtered(bus, 100 * GST_MSECOND,
		                                             GST_MESSAGE_ERROR | GST_MESSAGE_EOS);

		if (msg) {
			if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
				GError *e = NULL;

				gst_message_parse_error(msg, &e, NULL);
				fprintf(stderr, "pps-peer-recv: %s: %s\n",
				        GST_OBJECT_NAME(msg->src), e ? e->message : "error");
				g_clear_error(&e);
				status = 1;
			} else {
				fprintf(stderr, "pps-peer-recv: the sender ended the stream\n");
			}
			gst_message_unref(msg);
			break;
		}
	}
	gst_object_unref(bus);
	seconds = (double)(pps_time_monotonic_us() - start_us) / 1e6;
	if (!strcmp(source, "srt"))
		srt_stats = pps_peer_srt_stats_string(r.src);
	gst_element_set_state(r.pipeline, GST_STATE_NULL);
	if (stats_path)
		write_stats(stats_path, &r, source, seconds, srt_stats);
	g_free(srt_stats);
	fprintf(stderr,
	        "pps-peer-recv: %" PRIu64 " pictures, %" PRIu64 " with a timecode, %" PRIu64
	        " bytes\n",
	        r.frames_decoded, r.frames_with_timecode, r.bytes_received);
	gst_object_unref(r.src);
	gst_object_unref(r.pipeline);
	fclose(r.y4m);
	fclose(r.frames);
	return status;

err_pipeline:
	gst_element_set_state(r.pipeline, GST_STATE_NULL);
	gst_object_unref(r.src);
	gst_object_unref(r.pipeline);
err_files:
	if (r.y4m)
		fclose(r.y4m);
	if (r.frames)
		fclose(r.frames);
	return 1;
}
