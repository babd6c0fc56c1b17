/* SPDX-License-Identifier: MIT */
/*
 * pps-server: captures a live source, encodes it once in layers, and streams
 * it to every client with its own priority-progress session over its own
 * MIN_BUF (or tcp) connection. One libevent loop on the main thread owns every
 * socket; capture and encoding run on their own threads (server/pps-media.c).
 *
 * This file is the command line and the wiring: it reads the configuration,
 * creates the library's objects (pps-server-lib.h: media, listener, closed
 * loop, --log), connects their callbacks and prints status lines.
 */
#include "pps-server-lib.h"
#include "pps-time.h"
#include "pps-version.h"

#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The program's wiring: it holds the objects, no stage's state. */
typedef struct {
	pps_config_t *config;
	struct event_base *base;
	pps_media_t *media;
	pps_listener_t *listener;
	pps_adapt_loop_t *adapt; /* NULL with adapt.mode=fixed */
	pps_server_log_t *log;   /* --log */
	pps_server_report_t *report;
	pps_listener_params_t listener_params;
	pps_wire_stream_info_t info;
	bool quiet;
	int exit_status;
	struct event *status_timer;
	struct event *sigint_event, *sigterm_event;
	struct event *duration_timer;
	const char *stats_json;
} server_t;

static void
usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: pps-server [OPTION]...\n"
	    "Stream a live source to pps-client over TCP with priority-progress streaming.\n"
	    "\n"
	    "  --listen HOST:PORT       address to listen on (same as --set server.listen=...)\n"
	    "  --port-file FILE         write the port actually bound (for --listen HOST:0)\n"
	    "  --duration SECONDS       stop after this long (default: until SIGINT/SIGTERM)\n"
	    "  --stats-json FILE        write final counters as JSON here on exit\n"
	    "  --log FILE               JSON Lines once a second: each client's path estimate\n"
	    "                           and the encoder's layer rates (see the README)\n"
	    "  -q, --quiet              no status line\n"
	    "  -h, --help               this help\n"
	    "  -V, --version            the version\n");
	pps_config_print_usage(out);
	fprintf(out,
	        "\n"
	        "Settings are in config/server.ini (every key, with its default) and the README.\n"
	        "Examples:\n"
	        "  pps-server                                   test pattern on 127.0.0.1:7400\n"
	        "  pps-server --set transport.mode=tcp          the kernel's buffering, for "
	        "comparison\n"
	        "  pps-server --set source.type=camera --set source.device=/dev/video0\n"
	        "\n"
	        "Exit status: 0 stopped cleanly (SIGINT, SIGTERM, --duration); 1 runtime error\n"
	        "(source, socket, an output that cannot be written); 2 usage or configuration "
	        "error.\n");
}

static void
status_cb(evutil_socket_t fd, short what, void *user)
{
	server_t *srv = user;
	const char *error = pps_media_error(srv->media);

	if (error[0]) {
		fprintf(stderr, "pps-server: source failed: %s\n", error);
		srv->exit_status = 1;
		event_base_loopbreak(srv->base);
		return;
	}
	if (!srv->quiet)
		pps_server_report_status(srv->report);
}

static void
window_cb(pps_window_t *window, void *user)
{
	server_t *srv = user;

	pps_listener_push_window(srv->listener, window);
	pps_window_unref(window);
}

static void
window_grew_cb(pps_window_t *window, void *user)
{
	server_t *srv = user;

	pps_listener_window_grew(srv->listener, window);
}

static void
idr_cb(void *user)
{
	server_t *srv = user;

	pps_media_request_idr(srv->media);
}

static void
stop_cb(evutil_socket_t sig, short what, void *user)
{
	server_t *srv = user;

	if (sig >= 0 && !srv->quiet)
		fprintf(stderr, "pps-server: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
	event_base_loopbreak(srv->base);
}

/* The library's log lines (pps-log.h), on stderr after the program's name. */
static void
log_cb(pps_log_level_t level, const char *message, void *user)
{
	fprintf(stderr, "pps-server: %s%s\n", level == PPS_LOG_WARNING ? "warning: " : "", message);
}

/* --port-file: the port actually bound, once listening. */
static int
write_port_file(const char *path, unsigned port)
{
	FILE *f = fopen(path, "w");

	if (!f || fprintf(f, "%u\n", port) < 0 || fclose(f) != 0) {
		fprintf(stderr, "pps-server: --port-file %s: %s\n", path, strerror(errno));
		return -EIO;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option options[] = {
	    {"listen", required_argument, NULL, 'l'},
	    {"port-file", required_argument, NULL, 'p'},
	    {"duration", required_argument, NULL, 'd'},
	    {"stats-json", required_argument, NULL, 'j'},
	    {"log", required_argument, NULL, 'L'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	server_t srv = {.exit_status = 0};
	pps_listener_params_t *lp = &srv.listener_params;
	pps_session_params_t *sp = &lp->session;
	const char *log_path = NULL;
	unsigned port = 0;
	char err[512];
	const char *port_file = NULL;
	double duration_s = 0;
	int opt;
	struct timeval status_tv;

	signal(SIGPIPE, SIG_IGN);
	srv.config = pps_config_new(PPS_CONFIG_PROGRAM_SERVER);
	if (!srv.config) {
		fprintf(stderr, "pps-server: out of memory\n");
		return 1;
	}
	if (pps_cli_help_or_version(argc, argv, "pps-server", usage)) {
		pps_config_free(srv.config);
		return 0;
	}
	if (pps_config_parse_args(srv.config, &argc, argv, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-server: %s\n", err);
		pps_config_free(srv.config);
		return PPS_EXIT_USAGE;
	}
	while ((opt = getopt_long(argc, argv, "qhV", options, NULL)) != -1) {
		char *end;

		switch (opt) {
		case 'l': {
			char assignment[300];

			snprintf(assignment, sizeof(assignment), "server.listen=%s", optarg);
			if (pps_config_set(srv.config, assignment, err, sizeof(err)) < 0) {
				fprintf(stderr, "pps-server: %s\n", err);
				goto err_usage;
			}
			break;
		}
		case 'p':
			port_file = optarg;
			break;
		case 'd':
			duration_s = strtod(optarg, &end);
			if (*end || end == optarg || !isfinite(duration_s) || duration_s <= 0 ||
			    duration_s > 1e9) {
				fprintf(
				    stderr,
				    "pps-server: --duration %s: expected seconds, > 0 and finite\n",
				    optarg);
				goto err_usage;
			}
			break;
		case 'j':
			srv.stats_json = optarg;
			break;
		case 'L':
			log_path = optarg;
			break;
		case 'q':
			srv.quiet = true;
			break;
		default:
			usage(stderr);
			goto err_usage;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "pps-server: unexpected argument '%s' (see --help)\n",
		        argv[optind]);
		goto err_usage;
	}

	if (pps_listener_params_from_config(srv.config, lp, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-server: %s\n", err);
		goto err_usage;
	}
	lp->log = (pps_log_t){.cb = log_cb};

	srv.base = event_base_new();
	if (!srv.base) {
		fprintf(stderr, "pps-server: cannot create the event loop\n");
		pps_config_free(srv.config);
		return 1;
	}
	srv.media = pps_media_new(
	    srv.base, srv.config,
	    &(pps_media_events_t){.window_cb = window_cb, .window_grew_cb = window_grew_cb}, &srv,
	    err, sizeof(err));
	if (!srv.media) {
		fprintf(stderr, "pps-server: %s\n", err);
		srv.exit_status = 1;
		goto out;
	}
	pps_media_stream_info(srv.media, &srv.info);
	sp->stream_info = srv.info;
	lp->frame_duration_us = (int64_t)srv.info.fps_den * 1000000 / srv.info.fps_num;
	srv.listener =
	    pps_listener_new(srv.base, lp, &(pps_listener_callbacks_t){.idr_cb = idr_cb}, &srv);
	if (!srv.listener) {
		fprintf(stderr, "pps-server: cannot create the listener: %s\n", strerror(errno));
		srv.exit_status = 1;
		goto out;
	}
	if (log_path) {
		srv.log = pps_server_log_new(srv.base, log_path, srv.info.quality_layers, srv.media,
		                             srv.listener, err, sizeof(err));
		if (!srv.log) {
			fprintf(stderr, "pps-server: %s\n", err);
			srv.exit_status = 1; /* an output that cannot be written, as --port-file */
			goto out;
		}
	}
	if (pps_config_get_enum(srv.config, "adapt", "mode") == PPS_ADAPT_MODE_CLOSED_LOOP) {
		srv.adapt =
		    pps_adapt_loop_new(srv.base, srv.config, &srv.info, sp->sched.latency_budget_us,
		                       srv.media, srv.listener);
		if (!srv.adapt) {
			srv.exit_status = 1;
			goto out;
		}
	}
	if (pps_listener_listen(srv.listener, pps_config_get_string(srv.config, "server", "listen"),
	                        &port, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-server: %s\n", err);
		srv.exit_status = 1;
		goto out;
	}
	if (port_file && write_port_file(port_file, port) < 0) {
		srv.exit_status = 1;
		goto out;
	}
	if (pps_media_start(srv.media, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-server: %s\n", err);
		srv.exit_status = 1;
		goto out;
	}
	if (!srv.quiet) {
		const pps_wire_stream_info_t *si = &srv.info;

		fprintf(stderr,
		        "pps-server: %s source %ux%u@%u, %u temporal x %u quality layers, "
		        "window %u frames, budget %u ms, %s transport\n",
		        pps_config_key_find("source", "type")
		            ->choices[pps_config_get_enum(srv.config, "source", "type")],
		        si->width, si->height, si->fps_num, si->temporal_layers, si->quality_layers,
		        si->window_frames, si->latency_budget_ms,
		        pps_minbuf_mode_name(sp->transport.mode));
	}

	srv.report = pps_server_report_new(srv.media, srv.listener, srv.info.quality_layers,
	                                   srv.adapt != NULL);
	if (!srv.report) {
		fprintf(stderr, "pps-server: out of memory\n");
		srv.exit_status = 1;
		goto out;
	}
	srv.status_timer = event_new(srv.base, -1, EV_PERSIST, status_cb, &srv);
	status_tv.tv_sec = (time_t)pps_config_get_int(srv.config, "server", "status_interval_s");
	status_tv.tv_usec = 0;
	event_add(srv.status_timer, &status_tv);
	srv.sigint_event = evsignal_new(srv.base, SIGINT, stop_cb, &srv);
	srv.sigterm_event = evsignal_new(srv.base, SIGTERM, stop_cb, &srv);
	event_add(srv.sigint_event, NULL);
	event_add(srv.sigterm_event, NULL);
	if (duration_s > 0) {
		struct timeval tv =
		    pps_time_us_to_timeval((int64_t)(duration_s * PPS_TIME_US_PER_S));

		srv.duration_timer = evtimer_new(srv.base, stop_cb, &srv);
		event_add(srv.duration_timer, &tv);
	}

	event_base_dispatch(srv.base);

	pps_media_stop(srv.media);
	if (pps_server_report_final(srv.report, srv.quiet, srv.stats_json) < 0)
		srv.exit_status = 1;
	pps_listener_say_bye_all(srv.listener, PPS_WIRE_BYE_NORMAL, "server shutting down");
out:
	pps_server_report_free(srv.report);
	pps_listener_free(srv.listener);
	pps_adapt_loop_free(srv.adapt);
	if (pps_server_log_close(srv.log) < 0)
		srv.exit_status = 1;
	if (srv.status_timer)
		event_free(srv.status_timer);
	if (srv.duration_timer)
		event_free(srv.duration_timer);
	if (srv.sigint_event)
		event_free(srv.sigint_event);
	if (srv.sigterm_event)
		event_free(srv.sigterm_event);
	pps_media_free(srv.media);
	if (srv.base)
		event_base_free(srv.base);
	pps_config_free(srv.config);
	return srv.exit_status;

err_usage:
	pps_config_free(srv.config);
	return PPS_EXIT_USAGE;
}
