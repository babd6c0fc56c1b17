/* SPDX-License-Identifier: MIT */
/*
 * pps-mice: the papers' "mice" cross traffic, short TCP flows that connect,
 * move a few kilobytes (20 KB by default) and close, over and over.
 *
 *   server  accepts any number of flows, reads each to its end, then closes it;
 *   client  starts one flow every --interval (or as soon as the previous one
 *           ends, if it took longer), each with its own connection, and reports
 *           flow completion times: from connect() to the server's close, which
 *           the server sends only after it has read every byte.
 *
 * Both set the congestion control on their sockets (TCP_CONGESTION), because
 * inside a fresh namespace the default is whatever the host's is, and cubic
 * cannot even be made the namespace default. Run several clients for several
 * concurrent mice. Everything stops at --duration or SIGINT/SIGTERM.
 */
#include "linkem.h"
#include "pps-version.h"
#include "pps-socket.h"
#include "pps-time.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PROGRAM "pps-mice"

#define PPS_DEFAULT_MICE_PORT        5401
#define PPS_DEFAULT_MICE_BYTES       20000
#define PPS_DEFAULT_MICE_INTERVAL_NS 1000000000LL
#define PPS_DEFAULT_MICE_DURATION_NS 60000000000LL
#define PPS_DEFAULT_MICE_CONGESTION  "cubic"
/* Concurrent flows one server holds; more wait in the listen backlog. */
#define MICE_SERVER_MAX_FLOWS 1024
/* A flow that has not finished after this long is abandoned and counted as failed. */
#define MICE_FLOW_TIMEOUT_NS 30000000000LL

typedef struct {
	const char *mode;
	const char *addr;
	uint16_t port;
	uint64_t flow_bytes;
	int64_t interval_ns;
	uint64_t count; /* 0: until --duration */
	int64_t duration_ns;
	const char *congestion;
	const char *log_path;
} mice_settings_t;

static volatile sig_atomic_t stop_requested;

static void
stop_handler(int signal_number)
{
	stop_requested = 1;
}

static void
usage(FILE *out)
{
	fprintf(out,
	        "Usage: " PROGRAM " server --bind ADDR [OPTION]...\n"
	        "  or:  " PROGRAM " client --to ADDR [OPTION]...\n"
	        "Short TCP flows for the network lab: the client opens a connection every\n"
	        "--interval, sends --bytes and logs each flow's completion time.\n"
	        "\n"
	        "  --bind ADDR       server: IPv4 address to listen on\n"
	        "  --to ADDR         client: the server's IPv4 address\n"
	        "  --port P          TCP port (default %d)\n"
	        "  --bytes N         bytes per flow (default %d)\n"
	        "  --interval TIME   time between flow starts (default 1s)\n"
	        "  --count N         stop after N flows (default: at --duration)\n"
	        "  --congestion CC   TCP_CONGESTION of every socket "
	        "(default " PPS_DEFAULT_MICE_CONGESTION ")\n"
	        "  --duration TIME   stop after this long (default 60s)\n"
	        "  --log FILE        one line per flow: start_ns fct_ns ok\n"
	        "  -h, --help        this help\n"
	        "  -V, --version     the version\n"
	        "\n"
	        "Exit status: 0 done; 1 runtime error; 2 usage error.\n",
	        PPS_DEFAULT_MICE_PORT, PPS_DEFAULT_MICE_BYTES);
}

static void __attribute__((noreturn))
die_usage(const char *option, const char *value, const char *expected)
{
	fprintf(stderr, PROGRAM ": %s: '%s' is not %s\n", option, value, expected);
	exit(PPS_LINKEM_EXIT_USAGE);
}

static void
settings_parse(mice_settings_t *s, int argc, char **argv)
{
	memset(s, 0, sizeof(*s));
	s->port = PPS_DEFAULT_MICE_PORT;
	s->flow_bytes = PPS_DEFAULT_MICE_BYTES;
	s->interval_ns = PPS_DEFAULT_MICE_INTERVAL_NS;
	s->duration_ns = PPS_DEFAULT_MICE_DURATION_NS;
	s->congestion = PPS_DEFAULT_MICE_CONGESTION;
	if (pps_cli_help_or_version(argc, argv, PROGRAM, usage))
		exit(0);
	if (argc < 2) {
		usage(stderr);
		exit(PPS_LINKEM_EXIT_USAGE);
	}
	s->mode = argv[1];
	if (strcmp(s->mode, "server") != 0 && strcmp(s->mode, "client") != 0)
		die_usage("mode", s->mode, "server or client");
	for (int i = 2; i < argc; i++) {
		const char *option = argv[i], *value;
		uint64_t number;

		if (i + 1 >= argc) {
			fprintf(stderr, PROGRAM ": %s needs a value (see --help)\n", option);
			exit(PPS_LINKEM_EXIT_USAGE);
		}
		value = argv[++i];
		if (strcmp(option, "--bind") == 0 || strcmp(option, "--to") == 0) {
			s->addr = value;
		} else if (strcmp(option, "--port") == 0) {
			if (pps_linkem_parse_count(value, &number) < 0 || number == 0 ||
			    number > 65535)
				die_usage(option, value, "a port number");
			s->port = (uint16_t)number;
		} else if (strcmp(option, "--bytes") == 0) {
			if (pps_linkem_parse_count(value, &s->flow_bytes) < 0 || s->flow_bytes == 0)
				die_usage(option, value, "a byte count > 0");
		} else if (strcmp(option, "--interval") == 0) {
			if (pps_linkem_parse_duration_ns(value, &s->interval_ns) < 0)
				die_usage(option, value, "a duration >= 0");
		} else if (strcmp(option, "--count") == 0) {
			if (pps_linkem_parse_count(value, &s->count) < 0)
				die_usage(option, value, "a count");
		} else if (strcmp(option, "--duration") == 0) {
			if (pps_linkem_parse_duration_ns(value, &s->duration_ns) < 0 ||
			    s->duration_ns == 0)
				die_usage(option, value, "a duration > 0");
		} else if (strcmp(option, "--congestion") == 0) {
			s->congestion = value;
		} else if (strcmp(option, "--log") == 0) {
			s->log_path = value;
		} else {
			fprintf(stderr, PROGRAM ": unknown option '%s' (see --help)\n", option);
			exit(PPS_LINKEM_EXIT_USAGE);
		}
	}
	if (!s->addr) {
		fprintf(stderr, PROGRAM ": %s needs %s ADDR\n", s->mode,
		        strcmp(s->mode, "server") == 0 ? "--bind" : "--to");
		exit(PPS_LINKEM_EXIT_USAGE);
	}
}

static int
tcp_socket_open(const char *congestion)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

	if (fd < 0) {
		fprintf(stderr, PROGRAM ": socket: %s\n", strerror(errno));
		return -errno;
	}
	if ((r = pps_socket_set_congestion(fd, congestion)) < 0) {
		fprintf(stderr, PROGRAM ": TCP_CONGESTION %s: %s\n", congestion, strerror(-r));
		close(fd);
		return r;
	}
	return fd;
}

/* Waits until @fd has @events or @deadline_ns passes. 1 ready, 0 timeout/stop, <0 error. */
static int
wait_for(int fd, short events, int64_t deadline_ns)
{
	struct pollfd pfd = {.fd = fd, .events = events};

	while (!stop_requested) {
		int64_t left_ns = deadline_ns - pps_time_monotonic_ns();
		int ready;

		if (left_ns <= 0)
			return 0;
		ready = poll(&pfd, 1, (int)((left_ns + 999999) / 1000000));
		if (ready > 0)
			return 1;
		if (ready < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

static int
run_server(const mice_settings_t *s)
{
	struct pollfd fds[1 + MICE_SERVER_MAX_FLOWS];
	int64_t deadline_ns = pps_time_monotonic_ns() + s->duration_ns;
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(s->port)};
	uint64_t flows = 0;
	nfds_t n_fds = 1;
	char buffer[65536];
	int listen_fd;

	if (inet_pton(AF_INET, s->addr, &addr.sin_addr) != 1)
		die_usage("--bind", s->addr, "an IPv4 address");
	listen_fd = tcp_socket_open(s->congestion);
	if (listen_fd < 0)
		return 1;
	(void)pps_socket_set_reuseaddr(listen_fd); /* only spares a wait between runs */
	if (bind(listen_fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(listen_fd, 128) < 0) {
		fprintf(stderr, PROGRAM ": listen %s:%u: %s\n", s->addr, s->port, strerror(errno));
		close(listen_fd);
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	fds[0] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
	while (!stop_requested) {
		int64_t left_ns = deadline_ns - pps_time_monotonic_ns();
		int ready;

		if (left_ns <= 0)
			break;
		/* At capacity, stop accepting until a flow ends; the backlog holds the rest. */
		fds[0].events = n_fds < 1 + MICE_SERVER_MAX_FLOWS ? POLLIN : 0;
		ready = poll(fds, n_fds, (int)((left_ns + 999999) / 1000000));
		if (ready < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, PROGRAM ": poll: %s\n", strerror(errno));
			break;
		}
		for (nfds_t i = n_fds; i-- > 1;) {
			ssize_t n;

			if (!fds[i].revents)
				continue;
			n = read(fds[i].fd, buffer, sizeof(buffer));
			if (n > 0 || (n < 0 && errno == EINTR))
				continue;
			/* End of the flow (or an error): closing it tells the client it is done. */
			close(fds[i].fd);
			fds[i] = fds[--n_fds];
		}
		if (fds[0].revents & POLLIN) {
			int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

			if (fd >= 0) {
				fds[n_fds++] = (struct pollfd){.fd = fd, .events = POLLIN};
				flows++;
			}
		}
	}
	for (nfds_t i = 0; i < n_fds; i++)
		close(fds[i].fd);
	printf("mice server %s:%u: %" PRIu64 " flows\n", s->addr, s->port, flows);
	return 0;
}

/* One flow. Returns its completion time in ns, or a negative errno. */
static int64_t
client_flow_run(const mice_settings_t *s, const struct sockaddr_in *to, const char *chunk,
                size_t chunk_bytes)
{
	int64_t start_ns = pps_time_monotonic_ns(), deadline_ns = start_ns + MICE_FLOW_TIMEOUT_NS;
	uint64_t left_bytes = s->flow_bytes;
	char sink[4096];
	int64_t result;
	int fd;

	fd = tcp_socket_open(s->congestion);
	if (fd < 0)
		return fd;
	if (connect(fd, (const struct sockaddr *)to, sizeof(*to)) < 0) {
		result = -errno;
		goto out;
	}
	while (left_bytes > 0) {
		size_t want = left_bytes < chunk_bytes ? (size_t)left_bytes : chunk_bytes;
		ssize_t n = send(fd, chunk, want, MSG_NOSIGNAL);

		if (n < 0) {
			result = errno == EINTR && !stop_requested ? 0 : -errno;
			if (result < 0)
				goto out;
			continue;
		}
		left_bytes -= (uint64_t)n;
	}
	shutdown(fd, SHUT_WR);
	for (;;) {
		int ready = wait_for(fd, POLLIN, deadline_ns);
		ssize_t n;

		if (ready <= 0) {
			result = ready < 0 ? ready : -ETIMEDOUT;
			goto out;
		}
		n = read(fd, sink, sizeof(sink));
		if (n == 0)
			break;
		if (n < 0 && errno != EINTR) {
			result = -errno;
			goto out;
		}
	}
	result = pps_time_monotonic_ns() - start_ns;
out:
	close(fd);
	return result;
}

static int
compare_int64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int
run_client(const mice_settings_t *s)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(s->port)};
	int64_t start_ns = pps_time_monotonic_ns(), end_ns = start_ns + s->duration_ns;
	size_t capacity = 1024, n_ok = 0;
	uint64_t failed = 0, flows = 0;
	int64_t *fct_ns;
	char chunk[16384];
	FILE *log = NULL;

	if (inet_pton(AF_INET, s->addr, &to.sin_addr) != 1)
		die_usage("--to", s->addr, "an IPv4 address");
	memset(chunk, 'm', sizeof(chunk));
	fct_ns = malloc(capacity * sizeof(*fct_ns));
	if (!fct_ns)
		return 1;
	if (s->log_path) {
		log = fopen(s->log_path, "w");
		if (!log) {
			fprintf(stderr, PROGRAM ": log %s: %s\n", s->log_path, strerror(errno));
			free(fct_ns);
			return 1;
		}
		fprintf(log, "start_ns\tfct_ns\tok\n");
	}
	while (!stop_requested && (s->count == 0 || flows < s->count)) {
		int64_t slot_ns = start_ns + (int64_t)flows * s->interval_ns, fct;
		struct timespec ts = pps_time_ns_to_timespec(slot_ns);

		if (slot_ns >= end_ns)
			break;
		/* Flows start on a fixed schedule; one that overran delays only itself. */
		if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			continue;
		fct = client_flow_run(s, &to, chunk, sizeof(chunk));
		flows++;
		if (log)
			fprintf(log, "%" PRId64 "\t%" PRId64 "\t%d\n", slot_ns, fct >= 0 ? fct : -1,
			        fct >= 0);
		if (fct < 0) {
			failed++;
			continue;
		}
		if (n_ok == capacity) {
			int64_t *bigger = realloc(fct_ns, 2 * capacity * sizeof(*fct_ns));

			if (!bigger)
				break;
			fct_ns = bigger;
			capacity *= 2;
		}
		fct_ns[n_ok++] = fct;
	}
	if (log)
		fclose(log);
	qsort(fct_ns, n_ok, sizeof(*fct_ns), compare_int64);
	printf("mice client %s:%u: %" PRIu64 " flows of %" PRIu64 " bytes, %zu completed, %" PRIu64
	       " failed",
	       s->addr, s->port, flows, s->flow_bytes, n_ok, failed);
	if (n_ok)
		printf("; fct p50 %.1f p95 %.1f max %.1f ms", (double)fct_ns[n_ok / 2] / 1e6,
		       (double)fct_ns[(n_ok * 95) / 100] / 1e6, (double)fct_ns[n_ok - 1] / 1e6);
	printf("\n");
	free(fct_ns);
	return 0;
}

int
main(int argc, char **argv)
{
	struct sigaction action = {.sa_handler = stop_handler};
	mice_settings_t s;

	settings_parse(&s, argc, argv);
	/* No SA_RESTART: signals must interrupt poll() and clock_nanosleep(). */
	sigaction(SIGINT, &action, NULL);
	sigaction(SIGTERM, &action, NULL);
	if (strcmp(s.mode, "server") == 0)
		return run_server(&s);
	return run_client(&s);
}
