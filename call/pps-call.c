/* SPDX-License-Identifier: MIT */
/*
 * pps-call: the command line of one participant of a call (pps-call.h,
 * docs/RELAY.md#calls). It finds pps-server and pps-client, makes the call
 * object on the loop and prints what its children say, each line after the
 * participant it concerns ("[bob] pps-client: ...").
 */
#include "pps-call.h"
#include "pps-config.h"
#include "pps-version.h"

#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* --set and --client-set each, at most (a child's command line is bounded). */
#define CLI_MAX_SETTINGS 16

typedef struct {
	struct event_base *base;
	pps_call_t *call;
	char relay[256];
	const char *room;
	const char *name;
	const char *peers[PPS_CALL_MAX_PEERS];
	unsigned n_peers;
	const char *server_settings[CLI_MAX_SETTINGS];
	unsigned n_server_settings;
	const char *client_settings[CLI_MAX_SETTINGS];
	unsigned n_client_settings;
	double duration_s;
	const char *display;
	const char *log_dir, *output_dir;
	bool quiet;
	int exit_status;
	struct event *sigint_event, *sigterm_event;
} cli_t;

static void
usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: pps-call [OPTION]... RELAY_HOST:PORT/ROOM --name NAME --peer NAME...\n"
	    "Take part in a call through a pps-relay: publish this participant's source as\n"
	    "ROOM/NAME (a child pps-server --publish) and show each peer's ROOM/PEER (a child\n"
	    "pps-client each). A peer that has not published yet is asked for again every\n"
	    "second until it has or the call ends. docs/RELAY.md (Calls).\n"
	    "\n"
	    "  --name NAME              this participant: publishes ROOM/NAME\n"
	    "  --peer NAME              a participant to show (1 to %d of them)\n"
	    "  --duration SECONDS       end the call after this long (default: until SIGINT or\n"
	    "                           SIGTERM)\n"
	    "  --display auto|sdl|none  each viewer's pps-client --display (default auto)\n"
	    "  --log-dir DIR            each viewer's --log DIR/PEER.jsonl, the publisher's\n"
	    "                           DIR/NAME.jsonl (docs/JSON.md)\n"
	    "  --output-dir DIR         each viewer's --output DIR/PEER.y4m\n"
	    "  --set SECTION.KEY=VALUE  a setting of the publisher (pps-server's keys, e.g.\n"
	    "                           source.pattern=smpte); up to %d; the publisher starts\n"
	    "                           from " PPS_CALL_PUBLISHER_DEADLINES " (a call favours\n"
	    "                           latency over throughput share), which --set overrides\n"
	    "  --client-set SECTION.KEY=VALUE\n"
	    "                           a setting of every viewer (pps-client's keys); up to %d\n"
	    "  -q, --quiet              the children print no status lines\n"
	    "  -h, --help               this help\n"
	    "  -V, --version            the version\n"
	    "\n"
	    "pps-server and pps-client are taken from the directory of pps-call's own\n"
	    "executable, else from ../server and ../client beside it (the build tree).\n"
	    "Their lines are printed after the participant they concern: [NAME] for the\n"
	    "publisher, [PEER] for a viewer; pps-call's own lines start with \"pps-call:\".\n"
	    "\n"
	    "Examples:\n"
	    "  a relay first, then one command per participant, in any order:\n"
	    "    pps-relay --listen 127.0.0.1:7500\n"
	    "  two parties:\n"
	    "    pps-call 127.0.0.1:7500/room --name alice --peer bob\n"
	    "    pps-call 127.0.0.1:7500/room --name bob --peer alice\n"
	    "  three parties, each showing the other two:\n"
	    "    pps-call 127.0.0.1:7500/room --name alice --peer bob --peer carol\n"
	    "    pps-call 127.0.0.1:7500/room --name bob --peer alice --peer carol\n"
	    "    pps-call 127.0.0.1:7500/room --name carol --peer alice --peer bob\n"
	    "  headless for a minute, a log per peer, the SMPTE bars as the source:\n"
	    "    pps-call 127.0.0.1:7500/room --name dave --peer alice --display none \\\n"
	    "      --duration 60 --log-dir logs --set source.pattern=smpte\n"
	    "\n"
	    "Exit status: 0 the call ended cleanly (--duration, SIGINT, SIGTERM); 1 runtime\n"
	    "error (the publisher failed, pps-server or pps-client not found); 2 usage error\n"
	    "(a child refusing the --set or --client-set it was given too).\n",
	    PPS_CALL_MAX_PEERS, CLI_MAX_SETTINGS, CLI_MAX_SETTINGS);
}

static void
log_cb(pps_log_level_t level, const char *message, void *user)
{
	fprintf(stderr, "pps-call: %s%s\n", level == PPS_LOG_WARNING ? "warning: " : "", message);
}

static void
line_cb(const char *who, bool on_stdout, const char *line, void *user)
{
	FILE *out = on_stdout ? stdout : stderr;

	fprintf(out, "[%s] %s\n", who, line);
	fflush(out);
}

static void
ended_cb(int exit_status, const char *why, void *user)
{
	cli_t *cli = user;

	cli->exit_status = exit_status;
	if (exit_status != 0)
		fprintf(stderr, "pps-call: %s\n", why);
	else if (!cli->quiet)
		fprintf(stderr, "pps-call: call ended: %s\n", why);
	event_base_loopbreak(cli->base);
}

static void
stop_cb(evutil_socket_t sig, short what, void *user)
{
	cli_t *cli = user;

	fprintf(stderr, "pps-call: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
	pps_call_stop(cli->call, 0, sig == SIGINT ? "SIGINT" : "SIGTERM");
}

/* SECTION.KEY=VALUE, as the children's --set takes it. */
static bool
setting_valid(const char *s)
{
	const char *dot = strchr(s, '.'), *eq = strchr(s, '=');

	return dot && eq && dot > s && eq > dot + 1;
}

static int
add_setting(const char **list, unsigned *n, const char *value, const char *option, char *err,
            size_t err_size)
{
	if (!setting_valid(value)) {
		snprintf(err, err_size, "%s %s: expected SECTION.KEY=VALUE", option, value);
		return -EINVAL;
	}
	if (*n == CLI_MAX_SETTINGS) {
		snprintf(err, err_size, "%s: at most %d", option, CLI_MAX_SETTINGS);
		return -EINVAL;
	}
	list[(*n)++] = value;
	return 0;
}

/* RELAY_HOST:PORT/ROOM: the relay's address up to the first '/', the room after it. */
static int
parse_location(cli_t *cli, const char *location, char *err, size_t err_size)
{
	const char *slash = strchr(location, '/');
	size_t host_len = slash ? (size_t)(slash - location) : 0;

	if (!slash || host_len == 0 || host_len >= sizeof(cli->relay) ||
	    !memchr(location, ':', host_len)) {
		snprintf(err, err_size, "'%s': expected RELAY_HOST:PORT/ROOM", location);
		return -EINVAL;
	}
	memcpy(cli->relay, location, host_len);
	cli->relay[host_len] = '\0';
	cli->room = slash + 1;
	if (!pps_call_name_valid(cli->room, true)) {
		snprintf(err, err_size,
		         "room '%s': names are letters, digits, '.', '_' and '-', in components "
		         "joined by '/' (docs/RELAY.md)",
		         cli->room);
		return -EINVAL;
	}
	return 0;
}

static int
parse_options(cli_t *cli, int argc, char **argv)
{
	static const struct option options[] = {
	    {"name", required_argument, NULL, 'n'},
	    {"peer", required_argument, NULL, 'p'},
	    {"duration", required_argument, NULL, 'd'},
	    {"display", required_argument, NULL, 'D'},
	    {"log-dir", required_argument, NULL, 'l'},
	    {"output-dir", required_argument, NULL, 'o'},
	    {"set", required_argument, NULL, 's'},
	    {"client-set", required_argument, NULL, 'c'},
	    {"quiet", no_argument, NULL, 'q'},
	    {NULL, 0, NULL, 0},
	};
	char err[512], *end;
	int opt;

	if (pps_cli_refuse_abbreviated(argc, argv, options, "pps-call"))
		return PPS_EXIT_USAGE;
	while ((opt = getopt_long(argc, argv, "q", options, NULL)) != -1) {
		switch (opt) {
		case 'n':
			cli->name = optarg;
			break;
		case 'p':
			if (cli->n_peers == PPS_CALL_MAX_PEERS) {
				snprintf(err, sizeof(err), "--peer: at most %d",
				         PPS_CALL_MAX_PEERS);
				goto err_message;
			}
			cli->peers[cli->n_peers++] = optarg;
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
		case 'D':
			if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "sdl") != 0 &&
			    strcmp(optarg, "none") != 0) {
				snprintf(err, sizeof(err),
				         "--display %s: expected auto, sdl or none", optarg);
				goto err_message;
			}
			cli->display = optarg;
			break;
		case 'l':
			cli->log_dir = optarg;
			break;
		case 'o':
			cli->output_dir = optarg;
			break;
		case 's':
			if (add_setting(cli->server_settings, &cli->n_server_settings, optarg,
			                "--set", err, sizeof(err)) < 0)
				goto err_message;
			break;
		case 'c':
			if (add_setting(cli->client_settings, &cli->n_client_settings, optarg,
			                "--client-set", err, sizeof(err)) < 0)
				goto err_message;
			break;
		case 'q':
			cli->quiet = true;
			break;
		default:
			usage(stderr);
			return PPS_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		snprintf(err, sizeof(err), "no RELAY_HOST:PORT/ROOM given (see --help)");
		goto err_message;
	}
	if (optind + 1 < argc) {
		snprintf(err, sizeof(err), "unexpected argument '%s' (see --help)",
		         argv[optind + 1]);
		goto err_message;
	}
	if (parse_location(cli, argv[optind], err, sizeof(err)) < 0)
		goto err_message;
	if (!cli->name || !pps_call_name_valid(cli->name, false)) {
		snprintf(err, sizeof(err),
		         cli->name
		             ? "--name %s: one name component (letters, digits, '.', '_', '-')"
		             : "--name NAME is needed%s",
		         cli->name ? cli->name : "");
		goto err_message;
	}
	if (cli->n_peers == 0) {
		snprintf(err, sizeof(err), "--peer NAME is needed (once per participant to show)");
		goto err_message;
	}
	for (unsigned i = 0; i < cli->n_peers; i++) {
		if (!pps_call_name_valid(cli->peers[i], false)) {
			snprintf(err, sizeof(err),
			         "--peer %s: one name component (letters, digits, '.', '_', '-')",
			         cli->peers[i]);
			goto err_message;
		}
		if (strcmp(cli->peers[i], cli->name) == 0) {
			snprintf(err, sizeof(err), "--peer %s: that is this participant's --name",
			         cli->peers[i]);
			goto err_message;
		}
		for (unsigned j = 0; j < i; j++)
			if (strcmp(cli->peers[i], cli->peers[j]) == 0) {
				snprintf(err, sizeof(err), "--peer %s: given twice", cli->peers[i]);
				goto err_message;
			}
		if (strlen(cli->room) + 1 + strlen(cli->peers[i]) > 64 ||
		    strlen(cli->room) + 1 + strlen(cli->name) > 64) {
			snprintf(err, sizeof(err), "ROOM/NAME: at most 64 characters");
			goto err_message;
		}
	}
	return 0;

err_message:
	fprintf(stderr, "pps-call: %s\n", err);
	return PPS_EXIT_USAGE;
}

/* A directory for the viewers' files: made if missing (one level). */
static int
ensure_dir(const char *option, const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
		fprintf(stderr, "pps-call: %s %s: %s\n", option, dir, strerror(errno));
		return -1;
	}
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "pps-call: %s %s: not a directory\n", option, dir);
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	cli_t cli = {.display = "auto"};
	char self[PATH_MAX], server_program[PATH_MAX], client_program[PATH_MAX], err[1024];
	pps_call_params_t params = {0};
	const pps_call_events_t events = {.line_cb = line_cb, .ended_cb = ended_cb};
	ssize_t n;
	int ret;

	signal(SIGPIPE, SIG_IGN);
	if (pps_cli_help_or_version(argc, argv, "pps-call", usage))
		return 0;
	ret = parse_options(&cli, argc, argv);
	if (ret != 0)
		return ret;

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0) {
		fprintf(stderr, "pps-call: /proc/self/exe: %s\n", strerror(errno));
		return 1;
	}
	self[n] = '\0';
	dirname(self);
	if (pps_call_find_program(self, "pps-server", "server", server_program,
	                          sizeof(server_program), err, sizeof(err)) < 0 ||
	    pps_call_find_program(self, "pps-client", "client", client_program,
	                          sizeof(client_program), err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-call: %s\n", err);
		return 1;
	}
	if ((cli.log_dir && ensure_dir("--log-dir", cli.log_dir) < 0) ||
	    (cli.output_dir && ensure_dir("--output-dir", cli.output_dir) < 0))
		return 1;

	cli.base = event_base_new();
	if (!cli.base) {
		fprintf(stderr, "pps-call: cannot create the event loop\n");
		return 1;
	}
	params = (pps_call_params_t){
	    .server_program = server_program,
	    .client_program = client_program,
	    .relay = cli.relay,
	    .room = cli.room,
	    .name = cli.name,
	    .peers = cli.peers,
	    .n_peers = cli.n_peers,
	    .duration_s = cli.duration_s,
	    .display = cli.display,
	    .log_dir = cli.log_dir,
	    .output_dir = cli.output_dir,
	    .server_settings = cli.server_settings,
	    .n_server_settings = cli.n_server_settings,
	    .client_settings = cli.client_settings,
	    .n_client_settings = cli.n_client_settings,
	    .quiet = cli.quiet,
	    .log = {.cb = log_cb},
	};
	cli.call = pps_call_new(cli.base, &params, &events, &cli, err, sizeof(err));
	if (!cli.call) {
		fprintf(stderr, "pps-call: %s\n", err);
		event_base_free(cli.base);
		return errno == EINVAL ? PPS_EXIT_USAGE : 1;
	}
	cli.sigint_event = evsignal_new(cli.base, SIGINT, stop_cb, &cli);
	cli.sigterm_event = evsignal_new(cli.base, SIGTERM, stop_cb, &cli);
	event_add(cli.sigint_event, NULL);
	event_add(cli.sigterm_event, NULL);
	if (!cli.quiet)
		fprintf(
		    stderr,
		    "pps-call: %s in %s/%s: publishing %s/%s, showing %u peer(s); the room in a "
		    "browser: http://%s/room.html?room=%s\n",
		    cli.name, cli.relay, cli.room, cli.room, cli.name, cli.n_peers, cli.relay,
		    cli.room);
	if (pps_call_start(cli.call, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-call: %s\n", err);
		cli.exit_status = 1;
	} else {
		event_base_dispatch(cli.base);
	}

	pps_call_free(cli.call);
	event_free(cli.sigint_event);
	event_free(cli.sigterm_event);
	event_base_free(cli.base);
	return cli.exit_status;
}
