/* SPDX-License-Identifier: MIT */
/*
 * pps-server: the command line. The settings (pps-server-settings.h) become
 * a pps_server (pps-server-lib.h: capture and encoding on their threads, one
 * libevent loop on this one for every client's MIN_BUF socket); its messages
 * and state changes are printed here, a status line every status_interval_s.
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
	const char *port_file, *stats_json; /* NULL: none */
	const char *publish;                /* --publish HOST:PORT/NAME; NULL: listen */
	FILE *stats_json_file;              /* opened at start: an unwritable path fails then */
	double duration_s;                  /* 0: until a signal */
	struct event *events[4];            /* status timer, SIGINT, SIGTERM, --duration */
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
	    "  --publish HOST:PORT/NAME push the stream to a relay (pps-relay) as NAME instead\n"
	    "                           of serving viewers (docs/RELAY.md)\n"
	    "  --duration SECONDS       stop after this long (default: until SIGINT/SIGTERM)\n"
	    "  --stats-json FILE        write the summary (final counters, every client served) "
	    "as\n"
	    "                           one JSON object here on exit (docs/JSON.md)\n"
	    "  --log FILE               JSON Lines: a start record, paths and rates once a "
	    "second,\n"
	    "                           the summary (docs/JSON.md)\n"
	    "  --record FILE.mkv        record the stream as encoded: each quality layer's H.264\n"
	    "                           in one Matroska track, at its capture times; same as\n"
	    "                           --set server.record=...\n"
	    "  -q, --quiet              no status line\n"
	    "  -h, --help               this help\n"
	    "  -V, --version            the version\n");
	pps_config_print_usage(out);
	fprintf(out,
	        "\n"
	        "Browser viewer:\n"
	        "  The listener serves a viewer page too: open http://HOST:PORT/ (the listen\n"
	        "  address; printed at start as \"viewer: http://...\") in a recent Chromium,\n"
	        "  Chrome or Edge. It asks for the access token if the server has one, and\n"
	        "  reconnects by itself when the server restarts. From another machine it needs\n"
	        "  https (server.tls_cert, server.tls_key). docs/BROWSER.md.\n"
	        "\n"
	        "Settings: config/server.ini (every key, its default), docs/CONFIGURATION.md.\n"
	        "Examples:\n"
	        "  pps-server                                   test pattern on 127.0.0.1:7400\n"
	        "  pps-server --set transport.mode=tcp          the kernel's buffering\n"
	        "  pps-server --set source.type=camera --set source.device=/dev/video0\n\n"
	        "Exit status: 0 stopped cleanly (SIGINT, SIGTERM, --duration); 1 runtime error\n"
	        "(source, socket, an unwritable output); 2 usage or configuration error.\n");
}

/* The library's messages: "pps-server: " in front, "warning: " for warnings. */
static void
log_cb(pps_log_level_t level, const char *message, void *user)
{
	fprintf(stderr, "pps-server: %s%s\n", level == PPS_LOG_WARNING ? "warning: " : "", message);
}

/* A failed source was logged ("source failed: ..."): stop with status 1. */
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

static int /* --port-file: the port actually bound, once listening */
write_port_file(const char *path, unsigned port)
{
	FILE *f = fopen(path, "w");

	if (!f || fprintf(f, "%u\n", port) < 0 || fclose(f) != 0) {
		fprintf(stderr, "pps-server: --port-file %s: %s\n", path, strerror(errno));
		return -EIO;
	}
	return 0;
}

/* The settings (--config, --set) and the other options; 0, or
 * PPS_EXIT_USAGE after a message. */
static int
parse_options(cli_t *cli, int argc, char **argv, pps_config_t *config,
              pps_server_settings_t *settings)
{
	static const struct option options[] = {
	    {"listen", required_argument, NULL, 'l'},
	    {"port-file", required_argument, NULL, 'p'},
	    {"publish", required_argument, NULL, 'P'},
	    {"duration", required_argument, NULL, 'd'},
	    {"stats-json", required_argument, NULL, 'j'},
	    {"log", required_argument, NULL, 'L'},
	    {"record", required_argument, NULL, 'R'},
	    {"quiet", no_argument, NULL, 'q'},
	    {NULL, 0, NULL, 0},
	};
	const char *log_path = NULL;
	char err[512], assignment[4200], *end;
	int opt;

	if (pps_config_parse_args(config, &argc, argv, err, sizeof(err)) < 0)
		goto err_message;
	if (pps_cli_refuse_abbreviated(argc, argv, options, "pps-server"))
		return PPS_EXIT_USAGE;
	while ((opt = getopt_long(argc, argv, "q", options, NULL)) != -1) {
		switch (opt) {
		case 'l':
			if (pps_config_set_as(config, "server", "listen", optarg, "--listen ", err,
			                      sizeof(err)) < 0)
				goto err_message;
			break;
		case 'R':
			snprintf(assignment, sizeof(assignment), "server.record=%s", optarg);
			if (pps_config_set(config, assignment, err, sizeof(err)) < 0)
				goto err_message;
			break;
		case 'p':
			cli->port_file = optarg;
			break;
		case 'P':
			cli->publish = optarg;
			break;
		case 'd':
			cli->duration_s = strtod(optarg, &end);
			if (*end || end == optarg || !isfinite(cli->duration_s) ||
			    cli->duration_s <= 0 || cli->duration_s > 1e9) {
				snprintf(err, sizeof(err),
				         "--duration %s: expected seconds, > 0 and finite", optarg);
				goto err_message;
			}
			break;
		case 'j':
			cli->stats_json = optarg;
			break;
		case 'L':
			log_path = optarg;
			break;
		case 'q':
			cli->quiet = true;
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
	settings->server.publish = cli->publish;
	return 0;

err_message:
	fprintf(stderr, "pps-server: %s\n", err);
	return PPS_EXIT_USAGE;
}

int
main(int argc, char **argv)
{
	cli_t cli = {.exit_status = 0};
	pps_config_t *config;
	pps_server_settings_t settings;
	struct timeval tv;
	char err[512];
	int ret;

	signal(SIGPIPE, SIG_IGN);
	if (pps_cli_help_or_version(argc, argv, "pps-server", usage))
		return 0;
	config = pps_config_new(pps_server_settings_schema());
	if (!config) {
		fprintf(stderr, "pps-server: out of memory\n");
		return 1;
	}
	ret = parse_options(&cli, argc, argv, config, &settings);
	if (ret != 0 || !(cli.base = event_base_new())) {
		if (ret == 0)
			fprintf(stderr, "pps-server: cannot create the event loop\n");
		pps_config_free(config);
		return ret ? ret : 1;
	}
	if (cli.stats_json && !(cli.stats_json_file = fopen(cli.stats_json, "w"))) {
		fprintf(stderr, "pps-server: --stats-json %s: %s\n", cli.stats_json,
		        strerror(errno));
		event_base_free(cli.base);
		pps_config_free(config);
		return 1;
	}
	settings.server.log = (pps_log_t){.cb = log_cb};
	if (!pps_listener_raise_fd_limit(&settings.server.listener, err, sizeof(err)))
		fprintf(stderr, "pps-server: warning: %s\n", err);
	cli.server =
	    pps_server_new(cli.base, &settings.server, &(pps_server_events_t){.state_cb = state_cb},
	                   &cli, err, sizeof(err));
	if (!cli.server || pps_server_start(cli.server, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-server: %s\n", err);
		cli.exit_status = 1;
		goto out;
	}
	if (cli.port_file && write_port_file(cli.port_file, pps_server_port(cli.server)) < 0) {
		cli.exit_status = 1;
		goto out;
	}
	if (!cli.quiet) {
		pps_server_describe(cli.server, err, sizeof(err));
		fprintf(stderr, "pps-server: %s\n", err);
	}
	tv = pps_time_us_to_timeval(settings.status_interval_us);
	cli.events[0] = event_new(cli.base, -1, EV_PERSIST, status_cb, &cli);
	cli.events[1] = evsignal_new(cli.base, SIGINT, stop_cb, &cli);
	cli.events[2] = evsignal_new(cli.base, SIGTERM, stop_cb, &cli);
	event_add(cli.events[0], &tv);
	event_add(cli.events[1], NULL);
	event_add(cli.events[2], NULL);
	if (cli.duration_s > 0) {
		tv = pps_time_us_to_timeval((int64_t)(cli.duration_s * 1e6));
		cli.events[3] = evtimer_new(cli.base, stop_cb, &cli);
		event_add(cli.events[3], &tv);
	}

	event_base_dispatch(cli.base);

	pps_server_stop(cli.server);
	if (pps_server_finish(cli.server, cli.quiet ? NULL : stderr, cli.stats_json_file,
	                      cli.stats_json, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-server: %s\n", err);
		cli.exit_status = 1;
	}
	pps_server_say_bye(cli.server, "server shutting down");
out:
	if (cli.stats_json_file && fclose(cli.stats_json_file) != 0 && cli.exit_status == 0) {
		fprintf(stderr, "pps-server: --stats-json %s: %s\n", cli.stats_json,
		        strerror(errno));
		cli.exit_status = 1;
	}
	pps_server_free(cli.server);
	for (size_t i = 0; i < sizeof(cli.events) / sizeof(cli.events[0]); i++)
		if (cli.events[i])
			event_free(cli.events[i]);
	event_base_free(cli.base);
	pps_config_free(config);
	return cli.exit_status;
}
