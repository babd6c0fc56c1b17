/* SPDX-License-Identifier: MIT */
/*
 * pps-server: captures a live source, encodes it once in layers, and streams
 * it to every client with its own priority-progress session over its own
 * MIN_BUF (or tcp) connection. One libevent loop on the main thread owns every
 * socket; capture and encoding run on their own threads (server/pps-media.c).
 *
 * This file is the command line only: the settings (pps-server-settings.h)
 * become a pps_server (pps-server-lib.h), whose messages and state changes
 * are printed here, with a status line every status_interval_s.
 */
#include "pps-server-settings.h"
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

typedef struct {
	struct event_base *base;
	pps_server_t *server;
	bool quiet;
	int exit_status;
} cli_t;

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
	    "                           and the encoder's layer rates (see docs/)\n"
	    "  -q, --quiet              no status line\n"
	    "  -h, --help               this help\n"
	    "  -V, --version            the version\n");
	pps_config_print_usage(out);
	fprintf(out,
	        "\n"
	        "Settings are in config/server.ini (every key, with its default) and\n"
	        "docs/CONFIGURATION.md.\n"
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

/* The library's messages: "pps-server: " in front, "warning: " for warnings. */
static void
log_cb(pps_log_level_t level, const char *message, void *user)
{
	fprintf(stderr, "pps-server: %s%s\n", level == PPS_LOG_WARNING ? "warning: " : "", message);
}

static void
state_cb(pps_server_state_t old_state, pps_server_state_t state, const char *error, void *user)
{
	cli_t *cli = user;

	if (state == PPS_SERVER_STATE_FAILED) {
		cli->exit_status = 1;
		event_base_loopbreak(cli->base);
	}
}

static void
status_cb(evutil_socket_t fd, short what, void *user)
{
	cli_t *cli = user;

	if (!cli->quiet)
		pps_server_write_status(cli->server, stderr);
}

static void
stop_cb(evutil_socket_t sig, short what, void *user)
{
	cli_t *cli = user;

	if (sig >= 0 && !cli->quiet)
		fprintf(stderr, "pps-server: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
	event_base_loopbreak(cli->base);
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

/* The options that are not settings; 0, or PPS_EXIT_USAGE after a message. */
static int
parse_options(int argc, char **argv, pps_config_t *config, pps_server_settings_t *settings,
              const char **port_file, double *duration_s, const char **stats_json, bool *quiet)
{
	static const struct option options[] = {
	    {"listen", required_argument, NULL, 'l'}, {"port-file", required_argument, NULL, 'p'},
	    {"duration", required_argument, NULL, 'd'}, {"stats-json", required_argument, NULL, 'j'},
	    {"log", required_argument, NULL, 'L'},      {"quiet", no_argument, NULL, 'q'},
	    {NULL, 0, NULL, 0},
	};
	const char *log_path = NULL;
	char err[512], assignment[300], *end;
	int opt;

	while ((opt = getopt_long(argc, argv, "q", options, NULL)) != -1) {
		switch (opt) {
		case 'l':
			snprintf(assignment, sizeof(assignment), "server.listen=%s", optarg);
			if (pps_config_set(config, assignment, err, sizeof(err)) < 0)
				goto err_message;
			break;
		case 'p':
			*port_file = optarg;
			break;
		case 'd':
			*duration_s = strtod(optarg, &end);
			if (*end || end == optarg || !isfinite(*duration_s) || *duration_s <= 0 ||
			    *duration_s > 1e9) {
				snprintf(err, sizeof(err),
				         "--duration %s: expected seconds, > 0 and finite", optarg);
				goto err_message;
			}
			break;
		case 'j':
			*stats_json = optarg;
			break;
		case 'L':
			log_path = optarg;
			break;
		case 'q':
			*quiet = true;
			break;
		default:
			usage(stderr);
			return PPS_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		snprintf(err, sizeof(err), "unexpected argument '%s' (see --help)", argv[optind]);
		goto err_message;
	}
	if (pps_server_settings_from_config(config, settings, err, sizeof(err)) < 0)
		goto err_message;
	settings->server.log_path = log_path;
	return 0;

err_message:
	fprintf(stderr, "pps-server: %s\n", err);
	return PPS_EXIT_USAGE;
}

int
main(int argc, char **argv)
{
	cli_t cli = {.exit_status = 0};
	pps_config_t *config = pps_config_new(pps_server_settings_schema());
	pps_server_settings_t settings;
	const char *port_file = NULL, *stats_json = NULL;
	double duration_s = 0;
	struct event *status_timer = NULL, *sigint = NULL, *sigterm = NULL, *timeout = NULL;
	struct timeval tv;
	char err[512];
	int ret;

	signal(SIGPIPE, SIG_IGN);
	if (!config) {
		fprintf(stderr, "pps-server: out of memory\n");
		return 1;
	}
	if (pps_cli_help_or_version(argc, argv, "pps-server", usage)) {
		pps_config_free(config);
		return 0;
	}
	if (pps_config_parse_args(config, &argc, argv, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-server: %s\n", err);
		ret = PPS_EXIT_USAGE;
	} else {
		ret = parse_options(argc, argv, config, &settings, &port_file, &duration_s,
		                    &stats_json, &cli.quiet);
	}
	if (ret != 0 || !(cli.base = event_base_new())) {
		if (ret == 0)
			fprintf(stderr, "pps-server: cannot create the event loop\n");
		pps_config_free(config);
		return ret ? ret : 1;
	}
	settings.server.log = (pps_log_t){.cb = log_cb};
	cli.server = pps_server_new(cli.base, &settings.server,
	                            &(pps_server_events_t){.state_cb = state_cb}, &cli, err,
	                            sizeof(err));
	if (!cli.server || pps_server_start(cli.server, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-server: %s\n", err);
		cli.exit_status = 1;
		goto out;
	}
	if (port_file && write_port_file(port_file, pps_server_port(cli.server)) < 0) {
		cli.exit_status = 1;
		goto out;
	}
	if (!cli.quiet) {
		const pps_wire_stream_info_t *si = pps_server_stream_info(cli.server);

		fprintf(stderr,
		        "pps-server: %s source %ux%u@%u, %u temporal x %u quality layers, "
		        "window %u frames, budget %u ms, %s transport\n",
		        pps_capture_source_names[settings.server.media.capture.type], si->width,
		        si->height, si->fps_num, si->temporal_layers, si->quality_layers,
		        si->window_frames, si->latency_budget_ms,
		        pps_minbuf_mode_name(settings.server.listener.session.transport.mode));
	}
	status_timer = event_new(cli.base, -1, EV_PERSIST, status_cb, &cli);
	tv = pps_time_us_to_timeval(settings.status_interval_us);
	event_add(status_timer, &tv);
	sigint = evsignal_new(cli.base, SIGINT, stop_cb, &cli);
	sigterm = evsignal_new(cli.base, SIGTERM, stop_cb, &cli);
	event_add(sigint, NULL);
	event_add(sigterm, NULL);
	if (duration_s > 0) {
		tv = pps_time_us_to_timeval((int64_t)(duration_s * 1e6));
		timeout = evtimer_new(cli.base, stop_cb, &cli);
		event_add(timeout, &tv);
	}

	event_base_dispatch(cli.base);

	pps_server_stop(cli.server);
	if (pps_server_finish(cli.server, cli.quiet ? NULL : stderr, stats_json, err,
	                      sizeof(err)) < 0) {
		fprintf(stderr, "pps-server: %s\n", err);
		cli.exit_status = 1;
	}
	pps_server_say_bye(cli.server, "server shutting down");
out:
	pps_server_free(cli.server);
	if (status_timer)
		event_free(status_timer);
	if (timeout)
		event_free(timeout);
	if (sigint)
		event_free(sigint);
	if (sigterm)
		event_free(sigterm);
	event_base_free(cli.base);
	pps_config_free(config);
	return cli.exit_status;
}
