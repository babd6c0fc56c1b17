/* SPDX-License-Identifier: MIT */
/*
 * pps-relay: the command line of the relay (pps-relay.h, docs/RELAY.md). It
 * reads the server's settings (the same keys, --set and --config): each
 * stream's subscribers are served as pps-server serves its viewers, with
 * [server] max_clients per stream, [server] access_token for subscribers and
 * publishers alike, [transport] and [pps] for their writers and regulators,
 * [audio] transport for where the subscribers' audio goes.
 */
#include "pps-relay.h"
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
	pps_relay_t *relay;
	bool quiet;
	const char *port_file;
	const char *upstream[8]; /* --upstream HOST:PORT/NAME, each */
	unsigned n_upstream;
	unsigned max_streams;
	double duration_s;
	struct event *events[4]; /* SIGINT, SIGTERM, --duration, the status line */
	uint64_t windows_last;   /* windows relayed at the last status line */
} cli_t;

static void
usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: pps-relay [OPTION]...\n"
	    "Relay named live streams: publishers (pps-server --publish HOST:PORT/NAME) push\n"
	    "their stream here, viewers (pps-client HOST:PORT/NAME) take it from here, each\n"
	    "with its own progress regulator and MIN_BUF writer. A browser opening\n"
	    "http://HOST:PORT/ gets the list of streams and rooms, a viewer for each, and a\n"
	    "room's grid (room.html?room=NAME). docs/RELAY.md.\n"
	    "\n"
	    "  --listen HOST:PORT       address to listen on (same as --set server.listen=...)\n"
	    "  --port-file FILE         write the port actually bound (for --listen HOST:0)\n"
	    "  --max-streams N          streams published at once (default %d)\n"
	    "  --upstream HOST:PORT/NAME  take stream NAME from another relay and serve it\n"
	    "                           here under the same name (a tree; repeatable, up to 8);\n"
	    "                           tried again (0.5 s doubling to 5 s) while it is down\n"
	    "  --duration SECONDS       stop after this long (default: until SIGINT/SIGTERM)\n"
	    "  -q, --quiet              fewer messages\n"
	    "  -h, --help               this help\n"
	    "  -V, --version            the version\n",
	    PPS_RELAY_DEFAULT_MAX_STREAMS);
	pps_config_print_usage(out);
	fprintf(
	    out,
	    "\n"
	    "Settings: the server's keys (config/server.ini, docs/CONFIGURATION.md); the relay\n"
	    "reads server.listen, server.tls_cert, server.tls_key, server.max_clients\n"
	    "(subscribers per stream), server.max_clients_per_address,\n"
	    "server.access_token (subscribers and publishers\n"
	    "prove it), [transport], [pps] and audio.transport (the viewers' audio on\n"
	    "connections of their own, or in the video's); the stream itself (size, rate,\n"
	    "layers, latency budget) is the publisher's. With server.tls_cert and tls_key,\n"
	    "whoever begins with TLS gets it (https://, pps-client with client.tls,\n"
	    "publishers and relays with server.relay_tls), the rest plaintext on the same\n"
	    "port; server.relay_tls and relay_tls_ca: TLS to the --upstream relays.\n"
	    "Examples:\n"
	    "  pps-relay --listen 127.0.0.1:7500\n"
	    "  pps-server --publish 127.0.0.1:7500/room/alice\n"
	    "  pps-client 127.0.0.1:7500/room/alice\n"
	    "  pps-relay --listen 127.0.0.1:7501 --upstream 127.0.0.1:7500/room/alice\n\n"
	    "Exit status: 0 stopped cleanly; 1 runtime error; 2 usage or configuration "
	    "error.\n");
}

static void
log_cb(pps_log_level_t level, const char *message, void *user)
{
	fprintf(stderr, "pps-relay: %s%s\n", level == PPS_LOG_WARNING ? "warning: " : "", message);
}

static void
stop_cb(evutil_socket_t sig, short what, void *user)
{
	cli_t *cli = user;

	if (sig >= 0 && !cli->quiet)
		fprintf(stderr, "pps-relay: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
	event_base_loopbreak(cli->base);
}

static int
parse_options(cli_t *cli, int argc, char **argv, pps_config_t *config,
              pps_server_settings_t *settings)
{
	static const struct option options[] = {
	    {"listen", required_argument, NULL, 'l'},
	    {"port-file", required_argument, NULL, 'p'},
	    {"max-streams", required_argument, NULL, 'm'},
	    {"upstream", required_argument, NULL, 'u'},
	    {"duration", required_argument, NULL, 'd'},
	    {"quiet", no_argument, NULL, 'q'},
	    {NULL, 0, NULL, 0},
	};
	char err[512], *end;
	long n;
	int opt;

	if (pps_config_parse_args(config, &argc, argv, err, sizeof(err)) < 0)
		goto err_message;
	if (pps_cli_refuse_abbreviated(argc, argv, options, "pps-relay"))
		return PPS_EXIT_USAGE;
	while ((opt = getopt_long(argc, argv, "q", options, NULL)) != -1) {
		switch (opt) {
		case 'l':
			if (pps_config_set_as(config, "server", "listen", optarg, "--listen ", err,
			                      sizeof(err)) < 0)
				goto err_message;
			break;
		case 'p':
			cli->port_file = optarg;
			break;
		case 'm':
			n = strtol(optarg, &end, 10);
			if (*end || end == optarg || n < 1 || n > 4096) {
				snprintf(err, sizeof(err), "--max-streams %s: expected 1..4096",
				         optarg);
				goto err_message;
			}
			cli->max_streams = (unsigned)n;
			break;
		case 'u':
			if (cli->n_upstream == sizeof(cli->upstream) / sizeof(cli->upstream[0])) {
				snprintf(err, sizeof(err), "--upstream: at most 8");
				goto err_message;
			}
			cli->upstream[cli->n_upstream++] = optarg;
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
	return 0;

err_message:
	fprintf(stderr, "pps-relay: %s\n", err);
	return PPS_EXIT_USAGE;
}

/* One line every STATUS_INTERVAL_US, on stderr. */
#define STATUS_INTERVAL_US 10000000

static void
status_cb(evutil_socket_t fd, short what, void *user)
{
	cli_t *cli = user;
	pps_relay_stats_t st;

	pps_relay_get_stats(cli->relay, &st);
	fprintf(stderr,
	        "pps-relay: %u stream(s), %u viewer(s) | %.1f windows/s relayed | publishers "
	        "refused %llu, dropped %llu | viewers refused for no stream %llu\n",
	        st.streams, st.viewers,
	        (double)(st.windows_relayed - cli->windows_last) * 1e6 / STATUS_INTERVAL_US,
	        (unsigned long long)st.publishers_refused,
	        (unsigned long long)st.publishers_dropped,
	        (unsigned long long)st.subscribers_no_stream);
	cli->windows_last = st.windows_relayed;
}

int
main(int argc, char **argv)
{
	cli_t cli = {.max_streams = PPS_RELAY_DEFAULT_MAX_STREAMS};
	pps_config_t *config;
	static pps_server_settings_t settings; /* large: the source URI */
	pps_relay_params_t params = {0};
	pps_relay_stats_t stats;
	unsigned port = 0;
	struct timeval tv;
	char err[512];
	int status = 0, ret;

	signal(SIGPIPE, SIG_IGN);
	if (pps_cli_help_or_version(argc, argv, "pps-relay", usage))
		return 0;
	config = pps_config_new(pps_server_settings_schema());
	if (!config) {
		fprintf(stderr, "pps-relay: out of memory\n");
		return 1;
	}
	ret = parse_options(&cli, argc, argv, config, &settings);
	if (ret != 0 || !(cli.base = event_base_new())) {
		if (ret == 0)
			fprintf(stderr, "pps-relay: cannot create the event loop\n");
		pps_config_free(config);
		return ret ? ret : 1;
	}
	params.listener = settings.server.listener;
	if (!pps_listener_raise_fd_limit(&settings.server.listener, err, sizeof(err)))
		fprintf(stderr, "pps-relay: warning: %s\n", err);
	params.audio_transport = settings.server.media.audio.transport;
	params.audio_copies = settings.server.media.audio.copies;
	params.relay_tls = settings.server.relay_tls;
	params.relay_tls_ca = settings.server.relay_tls_ca;
	params.max_streams = cli.max_streams;
	params.log = (pps_log_t){.cb = log_cb};
	cli.relay = pps_relay_new(cli.base, &params, err, sizeof(err));
	if (!cli.relay) {
		fprintf(stderr, "pps-relay: %s\n", err);
		status = errno == EINVAL ? PPS_EXIT_USAGE : 1;
		goto out;
	}
	if (pps_relay_listen(cli.relay, settings.server.listen, &port, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-relay: %s\n", err);
		status = 1;
		goto out;
	}
	for (unsigned i = 0; i < cli.n_upstream; i++) {
		if (pps_relay_upstream(cli.relay, cli.upstream[i],
		                       settings.server.listener.session.access_token, err,
		                       sizeof(err)) < 0) {
			fprintf(stderr, "pps-relay: %s\n", err);
			status = 1;
			goto out;
		}
	}
	if (cli.port_file) {
		FILE *f = fopen(cli.port_file, "w");

		if (!f || fprintf(f, "%u\n", port) < 0 || fclose(f) != 0) {
			fprintf(stderr, "pps-relay: --port-file %s: %s\n", cli.port_file,
			        strerror(errno));
			status = 1;
			goto out;
		}
	}
	cli.events[0] = evsignal_new(cli.base, SIGINT, stop_cb, &cli);
	cli.events[1] = evsignal_new(cli.base, SIGTERM, stop_cb, &cli);
	event_add(cli.events[0], NULL);
	event_add(cli.events[1], NULL);
	if (cli.duration_s > 0) {
		tv = pps_time_us_to_timeval((int64_t)(cli.duration_s * 1e6));
		cli.events[2] = evtimer_new(cli.base, stop_cb, &cli);
		event_add(cli.events[2], &tv);
	}

	if (!cli.quiet) {
		tv = pps_time_us_to_timeval(STATUS_INTERVAL_US);
		cli.events[3] = event_new(cli.base, -1, EV_PERSIST, status_cb, &cli);
		event_add(cli.events[3], &tv);
	}

	event_base_dispatch(cli.base);

	pps_relay_say_bye(cli.relay, "relay shutting down");
	pps_relay_get_stats(cli.relay, &stats);
	if (!cli.quiet)
		fprintf(
		    stderr,
		    "pps-relay: publishers %llu (refused %llu, dropped %llu), subscribers routed "
		    "%llu, refused for no stream %llu, windows relayed %llu, IDR requests sent "
		    "upstream %llu, path reports sent upstream %llu, upstream reconnects %llu, web "
		    "requests %llu\n",
		    (unsigned long long)stats.publishers_total,
		    (unsigned long long)stats.publishers_refused,
		    (unsigned long long)stats.publishers_dropped,
		    (unsigned long long)stats.subscribers_routed,
		    (unsigned long long)stats.subscribers_no_stream,
		    (unsigned long long)stats.windows_relayed,
		    (unsigned long long)stats.recovery_requests_sent,
		    (unsigned long long)stats.path_reports_sent,
		    (unsigned long long)stats.upstream_reconnects,
		    (unsigned long long)stats.web_requests);
out:
	pps_relay_free(cli.relay);
	for (size_t i = 0; i < sizeof(cli.events) / sizeof(cli.events[0]); i++)
		if (cli.events[i])
			event_free(cli.events[i]);
	event_base_free(cli.base);
	pps_config_free(config);
	return status;
}
