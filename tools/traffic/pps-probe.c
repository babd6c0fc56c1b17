/* SPDX-License-Identifier: MIT */
/*
 * pps-probe: UDP measurements through the lab, with nothing but the C library.
 *
 *   echo  reflects every datagram to its sender (the far end of `ping`);
 *   ping  measures round-trip times, one probe in flight at a time;
 *   blast sends datagrams at a constant rate with a chosen IP TOS byte (ECT);
 *   sink  counts what arrives, per ECN codepoint (IP_RECVTOS), and can log
 *         every arrival with its CLOCK_MONOTONIC time.
 *
 * Servers print "ready" on stdout once bound, so a caller can wait for that
 * line instead of sleeping. Every mode stops at --duration (or SIGINT/SIGTERM).
 * Pacing uses clock_nanosleep on absolute CLOCK_MONOTONIC deadlines.
 */
#include "linkem.h"
#include "pps-version.h"
#include "pps-socket.h"
#include "pps-time.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PROGRAM "pps-probe"

#define PPS_DEFAULT_PROBE_PORT        5301
#define PPS_DEFAULT_PROBE_COUNT       20
#define PPS_DEFAULT_PROBE_INTERVAL_NS 100000000LL
#define PPS_DEFAULT_PROBE_IP_BYTES    64
#define PPS_DEFAULT_PROBE_DURATION_NS 60000000000LL
#define PPS_DEFAULT_PROBE_TIMEOUT_NS  2000000000LL

/* IPv4 (20) + UDP (8) headers: --ip-bytes counts the whole packet on the wire. */
#define PROBE_HEADER_BYTES 28
#define PROBE_MAGIC        0x70707370u /* "ppsp" */

typedef struct {
	uint32_t magic;
	uint32_t seq;
	int64_t sent_ns;
} probe_payload_t;

typedef struct {
	const char *mode;
	const char *bind_addr;
	const char *to_addr;
	uint16_t port;
	uint64_t count;
	int64_t interval_ns;
	uint64_t ip_bytes;
	uint64_t rate_bps;
	int tos;
	int64_t duration_ns;
	int64_t timeout_ns;
	int64_t idle_exit_ns;
	const char *log_path;
	bool json;
} probe_settings_t;

static volatile sig_atomic_t stop_requested;

static void
stop_handler(int signal_number)
{
	stop_requested = 1;
}

static void
sleep_until_ns(int64_t deadline_ns)
{
	struct timespec ts = pps_time_ns_to_timespec(deadline_ns);

	while (!stop_requested &&
	       clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void
usage(FILE *out)
{
	fprintf(out,
	        "Usage: " PROGRAM " echo|sink --bind ADDR [OPTION]...\n"
	        "  or:  " PROGRAM " ping|blast --to ADDR [OPTION]...\n"
	        "UDP probes for the network lab: echo and ping measure round trips, blast\n"
	        "sends at a rate, sink receives and logs.\n"
	        "\n"
	        "  --bind ADDR       echo, sink: IPv4 address to listen on\n"
	        "  --to ADDR         ping, blast: the peer's IPv4 address\n"
	        "  --port P          UDP port (default %d)\n"
	        "  --duration TIME   stop after this long (default 60s)\n"
	        "ping:  --count N (default %d), --interval TIME (default 100ms),\n"
	        "       --ip-bytes N (whole IP packet, default %d), --timeout TIME (default 2s)\n"
	        "blast: --rate RATE (e.g. 15mbit, counted on IP packets), --ip-bytes N (default "
	        "1500),\n"
	        "       --tos N (IP TOS byte: 2 = ECT(0), 1 = ECT(1))\n"
	        "sink:  --log FILE (arrival_ns seq tos ip_bytes per datagram; arrival_ns is the\n"
	        "       kernel's receive time on CLOCK_MONOTONIC),\n"
	        "       --idle-exit TIME (stop this long after the last datagram)\n"
	        "ping, sink: --json prints the summary as one JSON object\n"
	        "  -h, --help        this help\n"
	        "  -V, --version     the version\n"
	        "\n"
	        "Exit status: 0 done; 1 runtime error; 2 usage error.\n",
	        PPS_DEFAULT_PROBE_PORT, PPS_DEFAULT_PROBE_COUNT, PPS_DEFAULT_PROBE_IP_BYTES);
}

static void __attribute__((noreturn))
die_usage(const char *option, const char *value, const char *expected)
{
	fprintf(stderr, PROGRAM ": %s: '%s' is not %s\n", option, value, expected);
	exit(PPS_LINKEM_EXIT_USAGE);
}

static void
settings_parse(probe_settings_t *s, int argc, char **argv)
{
	memset(s, 0, sizeof(*s));
	s->port = PPS_DEFAULT_PROBE_PORT;
	s->count = PPS_DEFAULT_PROBE_COUNT;
	s->interval_ns = PPS_DEFAULT_PROBE_INTERVAL_NS;
	s->duration_ns = PPS_DEFAULT_PROBE_DURATION_NS;
	s->timeout_ns = PPS_DEFAULT_PROBE_TIMEOUT_NS;
	s->tos = -1;
	if (pps_cli_help_or_version(argc, argv, PROGRAM, usage))
		exit(0);
	if (argc < 2) {
		usage(stderr);
		exit(PPS_LINKEM_EXIT_USAGE);
	}
	s->mode = argv[1];
	if (strcmp(s->mode, "echo") && strcmp(s->mode, "ping") && strcmp(s->mode, "blast") &&
	    strcmp(s->mode, "sink"))
		die_usage("mode", s->mode, "echo, ping, blast or sink");
	s->ip_bytes = strcmp(s->mode, "blast") == 0 ? 1500 : PPS_DEFAULT_PROBE_IP_BYTES;

	for (int i = 2; i < argc; i++) {
		const char *option = argv[i], *value;
		uint64_t number;

		if (strcmp(option, "--json") == 0) {
			s->json = true;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, PROGRAM ": %s needs a value (see --help)\n", option);
			exit(PPS_LINKEM_EXIT_USAGE);
		}
		value = argv[++i];
		if (strcmp(option, "--bind") == 0) {
			s->bind_addr = value;
		} else if (strcmp(option, "--to") == 0) {
			s->to_addr = value;
		} else if (strcmp(option, "--port") == 0) {
			if (pps_linkem_parse_count(value, &number) < 0 || number == 0 ||
			    number > 65535)
				die_usage(option, value, "a port number");
			s->port = (uint16_t)number;
		} else if (strcmp(option, "--count") == 0) {
			if (pps_linkem_parse_count(value, &s->count) < 0 || s->count == 0)
				die_usage(option, value, "a count > 0");
		} else if (strcmp(option, "--interval") == 0) {
			if (pps_linkem_parse_duration_ns(value, &s->interval_ns) < 0)
				die_usage(option, value, "a duration >= 0");
		} else if (strcmp(option, "--ip-bytes") == 0) {
			if (pps_linkem_parse_count(value, &s->ip_bytes) < 0 ||
			    s->ip_bytes < PROBE_HEADER_BYTES + sizeof(probe_payload_t) ||
			    s->ip_bytes > 65507)
				die_usage(option, value, "a packet size in [44, 65507]");
		} else if (strcmp(option, "--rate") == 0) {
			if (pps_linkem_parse_rate_bps(value, &s->rate_bps) < 0)
				die_usage(option, value, "a rate > 0 (e.g. 15mbit)");
		} else if (strcmp(option, "--tos") == 0) {
			if (pps_linkem_parse_count(value, &number) < 0 || number > 255)
				die_usage(option, value, "a TOS byte in [0, 255]");
			s->tos = (int)number;
		} else if (strcmp(option, "--duration") == 0) {
			if (pps_linkem_parse_duration_ns(value, &s->duration_ns) < 0 ||
			    s->duration_ns == 0)
				die_usage(option, value, "a duration > 0");
		} else if (strcmp(option, "--timeout") == 0) {
			if (pps_linkem_parse_duration_ns(value, &s->timeout_ns) < 0 ||
			    s->timeout_ns == 0)
				die_usage(option, value, "a duration > 0");
		} else if (strcmp(option, "--idle-exit") == 0) {
			if (pps_linkem_parse_duration_ns(value, &s->idle_exit_ns) < 0)
				die_usage(option, value, "a duration >= 0");
		} else if (strcmp(option, "--log") == 0) {
			s->log_path = value;
		} else {
			fprintf(stderr, PROGRAM ": unknown option '%s' (see --help)\n", option);
			exit(PPS_LINKEM_EXIT_USAGE);
		}
	}
	if ((!strcmp(s->mode, "echo") || !strcmp(s->mode, "sink")) && !s->bind_addr) {
		fprintf(stderr, PROGRAM ": %s needs --bind ADDR\n", s->mode);
		exit(PPS_LINKEM_EXIT_USAGE);
	}
	if ((!strcmp(s->mode, "ping") || !strcmp(s->mode, "blast")) && !s->to_addr) {
		fprintf(stderr, PROGRAM ": %s needs --to ADDR\n", s->mode);
		exit(PPS_LINKEM_EXIT_USAGE);
	}
	if (!strcmp(s->mode, "blast") && !s->rate_bps) {
		fprintf(stderr, PROGRAM ": blast needs --rate RATE\n");
		exit(PPS_LINKEM_EXIT_USAGE);
	}
}

static int
address_make(const char *text, uint16_t port, struct sockaddr_in *addr)
{
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_port = htons(port);
	if (inet_pton(AF_INET, text, &addr->sin_addr) != 1) {
		fprintf(stderr, PROGRAM ": '%s' is not an IPv4 address\n", text);
		return -EINVAL;
	}
	return 0;
}

/* A UDP socket bound to @bind_addr:@port (or unbound when @bind_addr is NULL). */
static int
socket_open(const char *bind_addr, uint16_t port)
{
	struct sockaddr_in addr;
	int fd;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, PROGRAM ": socket: %s\n", strerror(errno));
		return -errno;
	}
	/* Ask for each datagram's TOS byte: that is where ECN CE shows. Best
	 * effort, both: without them the sink logs TOS 0 and user-space times. */
	(void)pps_socket_set_recv_tos(fd, true);
	/*
	 * And for the kernel's receive time: a TUN write delivers the datagram to
	 * the socket in the writer's context, so this is when pps-linkem let it
	 * go, free of our own scheduling delay.
	 */
	(void)pps_socket_set_timestamp_ns(fd, true);
	if (!bind_addr)
		return fd;
	if (address_make(bind_addr, port, &addr) < 0)
		goto err_bind;
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		fprintf(stderr, PROGRAM ": bind %s:%u: %s\n", bind_addr, port, strerror(errno));
		goto err_bind;
	}
	return fd;
err_bind:
	close(fd);
	return -EINVAL;
}

/* Waits at most until @deadline_ns for @fd to be readable; false on timeout or stop. */
static bool
wait_readable(int fd, int64_t deadline_ns)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	while (!stop_requested) {
		int64_t left_ns = deadline_ns - pps_time_monotonic_ns();
		int ready;

		if (left_ns <= 0)
			return false;
		ready = poll(&pfd, 1, (int)((left_ns + 999999) / 1000000));
		if (ready > 0)
			return true;
		if (ready < 0 && errno != EINTR)
			return false;
	}
	return false;
}

static void
ready_announce(void)
{
	printf("ready\n");
	fflush(stdout);
}

static int
run_echo(const probe_settings_t *s)
{
	int64_t deadline_ns = pps_time_monotonic_ns() + s->duration_ns;
	uint8_t buffer[65536];
	int fd = socket_open(s->bind_addr, s->port);

	if (fd < 0)
		return 1;
	ready_announce();
	while (wait_readable(fd, deadline_ns)) {
		struct sockaddr_in from;
		socklen_t from_len = sizeof(from);
		ssize_t n =
		    recvfrom(fd, buffer, sizeof(buffer), 0, (struct sockaddr *)&from, &from_len);

		if (n > 0)
			sendto(fd, buffer, (size_t)n, 0, (struct sockaddr *)&from, from_len);
	}
	close(fd);
	return 0;
}

static int
compare_int64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int
run_ping(const probe_settings_t *s)
{
	uint8_t buffer[65536] = {0}, reply[65536];
	size_t payload_bytes = s->ip_bytes - PROBE_HEADER_BYTES;
	int64_t *rtt_ns, start_ns = pps_time_monotonic_ns(), sum_ns = 0;
	uint64_t received = 0, sent = 0;
	struct sockaddr_in to;
	int fd;

	if (address_make(s->to_addr, s->port, &to) < 0)
		return PPS_LINKEM_EXIT_USAGE;
	rtt_ns = calloc(s->count, sizeof(*rtt_ns));
	if (!rtt_ns)
		return 1;
	fd = socket_open(NULL, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0) {
		fprintf(stderr, PROGRAM ": connect %s:%u: %s\n", s->to_addr, s->port,
		        strerror(errno));
		free(rtt_ns);
		return 1;
	}
	for (uint64_t seq = 0; seq < s->count && !stop_requested; seq++) {
		probe_payload_t probe = {.magic = PROBE_MAGIC, .seq = (uint32_t)seq};
		int64_t slot_ns = start_ns + (int64_t)seq * s->interval_ns, deadline_ns;

		sleep_until_ns(slot_ns);
		probe.sent_ns = pps_time_monotonic_ns();
		memcpy(buffer, &probe, sizeof(probe));
		if (send(fd, buffer, payload_bytes, 0) < 0) {
			fprintf(stderr, PROGRAM ": send: %s\n", strerror(errno));
			continue;
		}
		sent++;
		deadline_ns = probe.sent_ns + s->timeout_ns;
		/* Replies to earlier, timed-out probes are skipped by their sequence number. */
		while (wait_readable(fd, deadline_ns)) {
			probe_payload_t echoed;
			ssize_t n = recv(fd, reply, sizeof(reply), 0);
			int64_t arrival_ns = pps_time_monotonic_ns();

			if (n < (ssize_t)sizeof(echoed))
				continue;
			memcpy(&echoed, reply, sizeof(echoed));
			if (echoed.magic != PROBE_MAGIC || echoed.seq != probe.seq)
				continue;
			rtt_ns[received++] = arrival_ns - probe.sent_ns;
			sum_ns += arrival_ns - probe.sent_ns;
			break;
		}
	}
	close(fd);
	qsort(rtt_ns, received, sizeof(*rtt_ns), compare_int64);
	if (s->json) {
		printf("{\"sent\": %" PRIu64 ", \"received\": %" PRIu64, sent, received);
		if (received)
			printf(
			    ", \"rtt_min_ms\": %.3f, \"rtt_median_ms\": %.3f, \"rtt_mean_ms\": %.3f"
			    ", \"rtt_max_ms\": %.3f",
			    (double)rtt_ns[0] / 1e6, (double)rtt_ns[received / 2] / 1e6,
			    (double)sum_ns / (double)received / 1e6,
			    (double)rtt_ns[received - 1] / 1e6);
		printf(", \"ip_bytes\": %" PRIu64 "}\n", s->ip_bytes);
	} else if (received) {
		printf("ping %s: %" PRIu64 " sent, %" PRIu64 " received, %" PRIu64
		       "-byte IP packets; rtt min %.3f median %.3f mean %.3f max %.3f ms\n",
		       s->to_addr, sent, received, s->ip_bytes, (double)rtt_ns[0] / 1e6,
		       (double)rtt_ns[received / 2] / 1e6, (double)sum_ns / (double)received / 1e6,
		       (double)rtt_ns[received - 1] / 1e6);
	} else {
		printf("ping %s: %" PRIu64 " sent, 0 received\n", s->to_addr, sent);
	}
	free(rtt_ns);
	return received ? 0 : 1;
}

static int
run_blast(const probe_settings_t *s)
{
	uint8_t buffer[65536] = {0};
	size_t payload_bytes = s->ip_bytes - PROBE_HEADER_BYTES;
	/* Nanoseconds between packets at the requested rate, counted on whole IP packets. */
	double gap_ns = (double)s->ip_bytes * 8e9 / (double)s->rate_bps;
	int64_t start_ns = pps_time_monotonic_ns(), end_ns = start_ns + s->duration_ns;
	uint64_t sent = 0, errors = 0;
	struct sockaddr_in to;
	int fd, r;

	if (address_make(s->to_addr, s->port, &to) < 0)
		return PPS_LINKEM_EXIT_USAGE;
	fd = socket_open(NULL, 0);
	if (fd < 0)
		return 1;
	if (s->tos >= 0 && (r = pps_socket_set_ip_tos(fd, s->tos)) < 0)
		fprintf(stderr, PROGRAM ": IP_TOS %d: %s\n", s->tos, strerror(-r));
	if (connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0) {
		fprintf(stderr, PROGRAM ": connect %s:%u: %s\n", s->to_addr, s->port,
		        strerror(errno));
		close(fd);
		return 1;
	}
	for (uint64_t seq = 0; !stop_requested; seq++) {
		int64_t slot_ns = start_ns + (int64_t)((double)seq * gap_ns);
		probe_payload_t probe = {.magic = PROBE_MAGIC, .seq = (uint32_t)seq};

		if (slot_ns >= end_ns)
			break;
		sleep_until_ns(slot_ns);
		probe.sent_ns = pps_time_monotonic_ns();
		memcpy(buffer, &probe, sizeof(probe));
		if (send(fd, buffer, payload_bytes, 0) < 0)
			errors++;
		else
			sent++;
	}
	close(fd);
	printf("blast %s: %" PRIu64 " datagrams of %" PRIu64 " IP bytes sent, %" PRIu64
	       " send errors\n",
	       s->to_addr, sent, s->ip_bytes, errors);
	return 0;
}

static int
run_sink(const probe_settings_t *s)
{
	uint64_t packets = 0, bytes = 0, per_ecn[4] = {0};
	int64_t deadline_ns = pps_time_monotonic_ns() + s->duration_ns, first_ns = 0, last_ns = 0;
	uint8_t buffer[65536];
	FILE *log = NULL;
	int fd;

	if (s->log_path) {
		log = fopen(s->log_path, "w");
		if (!log) {
			fprintf(stderr, PROGRAM ": log %s: %s\n", s->log_path, strerror(errno));
			return 1;
		}
		fprintf(log, "arrival_ns\tseq\ttos\tip_bytes\n");
	}
	fd = socket_open(s->bind_addr, s->port);
	if (fd < 0) {
		if (log)
			fclose(log);
		return 1;
	}
	ready_announce();
	for (;;) {
		int64_t until_ns = deadline_ns, arrival_ns = 0;
		char control[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct timespec))];
		struct iovec iov = {.iov_base = buffer, .iov_len = sizeof(buffer)};
		struct msghdr msg = {
		    .msg_iov = &iov,
		    .msg_iovlen = 1,
		    .msg_control = control,
		    .msg_controllen = sizeof(control),
		};
		probe_payload_t probe = {0};
		int tos = 0;
		ssize_t n;

		if (packets && s->idle_exit_ns && last_ns + s->idle_exit_ns < until_ns)
			until_ns = last_ns + s->idle_exit_ns;
		if (!wait_readable(fd, until_ns))
			break;
		n = recvmsg(fd, &msg, 0);
		if (n < 0)
			continue;
		last_ns = pps_time_monotonic_ns();
		if (!packets)
			first_ns = last_ns;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS)
				tos = *(uint8_t *)CMSG_DATA(c);
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
				struct timespec ts;

				memcpy(&ts, CMSG_DATA(c), sizeof(ts));
				arrival_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
				/* Kernel stamps are CLOCK_REALTIME; the lab's clock is
				 * CLOCK_MONOTONIC. */
				arrival_ns -= pps_time_realtime_ns() - last_ns;
			}
		}
		if (!arrival_ns)
			arrival_ns = last_ns;
		packets++;
		bytes += (uint64_t)n + PROBE_HEADER_BYTES;
		per_ecn[tos & 3]++;
		if (log) {
			if (n >= (ssize_t)sizeof(probe))
				memcpy(&probe, buffer, sizeof(probe));
			fprintf(log, "%" PRId64 "\t%" PRIu32 "\t%d\t%zd\n", arrival_ns, probe.seq,
			        tos, n + PROBE_HEADER_BYTES);
		}
	}
	close(fd);
	if (log)
		fclose(log);
	if (s->json)
		printf("{\"packets\": %" PRIu64 ", \"ip_bytes\": %" PRIu64 ", \"not_ect\": %" PRIu64
		       ", \"ect1\": %" PRIu64 ", \"ect0\": %" PRIu64 ", \"ce\": %" PRIu64
		       ", \"first_ns\": %" PRId64 ", \"last_ns\": %" PRId64 "}\n",
		       packets, bytes, per_ecn[0], per_ecn[1], per_ecn[2], per_ecn[3], first_ns,
		       last_ns);
	else
		printf("sink %s: %" PRIu64 " datagrams, %" PRIu64 " IP bytes; not-ECT %" PRIu64
		       ", ECT(1) %" PRIu64 ", ECT(0) %" PRIu64 ", CE %" PRIu64 "\n",
		       s->bind_addr, packets, bytes, per_ecn[0], per_ecn[1], per_ecn[2],
		       per_ecn[3]);
	return 0;
}

int
main(int argc, char **argv)
{
	struct sigaction action = {.sa_handler = stop_handler};
	probe_settings_t s;

	settings_parse(&s, argc, argv);
	/* No SA_RESTART: a signal must cut a poll() or clock_nanosleep() short. */
	sigaction(SIGINT, &action, NULL);
	sigaction(SIGTERM, &action, NULL);
	if (strcmp(s.mode, "echo") == 0)
		return run_echo(&s);
	if (strcmp(s.mode, "ping") == 0)
		return run_ping(&s);
	if (strcmp(s.mode, "blast") == 0)
		return run_blast(&s);
	return run_sink(&s);
}
