/* SPDX-License-Identifier: MIT */
/*
 * pps-connect-flood: a TCP connect flood on loopback, for the attack table.
 *
 * Holds --per-address connections from each of --addresses source addresses
 * (127.0.0.F, 127.0.0.F+1, ...) to 127.0.0.1:PORT, silent, and re-opens each
 * the moment the server drops it, until --duration. Connects are
 * nonblocking on one epoll; a connection is closed with a reset (SO_LINGER 0)
 * so that the attacker keeps no TIME_WAIT and its ports come back at once.
 * --max-rate caps new connects per second (0: as fast as they are dropped).
 * --cycle closes each connection (a reset) the moment its handshake is done
 * and opens it again: a flood of connects at the rate the attacker reaches,
 * whatever the server keeps. --speak sends one byte (the wire's version
 * byte, or a TLS handshake record's first) once a connection is made and
 * nothing more: a server that waits for a client's first bytes before it
 * accepts (TCP_DEFER_ACCEPT) gets it at once, as it gets a real client.
 *
 * Prints one JSON object at the end: connects tried (connect() calls), made
 * (the TCP handshake done),
 * drops seen (EOF or reset from the server), failed connects, the seconds it
 * ran and connects per second in each whole second. A connect not done
 * within 2 s is abandoned (failed) and tried again.
 */
#include "pps-time.h"
#include "pps-version.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define PROGRAM "pps-connect-flood"

#define PPS_DEFAULT_FLOOD_ADDRESSES   16
#define PPS_DEFAULT_FLOOD_PER_ADDRESS 4
#define PPS_DEFAULT_FLOOD_FIRST       2
#define FLOOD_MAX_SLOTS               4096
#define FLOOD_MAX_SECONDS             600
#define FLOOD_CONNECT_TIMEOUT_NS      2000000000LL

typedef struct {
	int fd;
	bool connected;
	int64_t opened_ns;
	struct in_addr source;
} flood_slot_t;

typedef struct {
	uint16_t port;
	unsigned addresses;
	unsigned per_address;
	unsigned first;
	double duration_s;
	double max_rate;
	bool cycle;
	int speak; /* the byte sent once connected; -1: none */
} flood_settings_t;

typedef struct {
	uint64_t attempts; /* connect() calls started */
	uint64_t connects;
	uint64_t drops;
	uint64_t failed;
	uint64_t per_second[FLOOD_MAX_SECONDS];
} flood_counts_t;

static volatile sig_atomic_t stop_requested;

static void
stop_handler(int signal_number)
{
	(void)signal_number;
	stop_requested = 1;
}

static void
usage(FILE *out)
{
	fprintf(out,
	        "Usage: " PROGRAM " --port P --duration SECONDS [OPTION]...\n"
	        "Holds silent TCP connections to 127.0.0.1:P and re-opens each the moment it\n"
	        "is dropped; prints what it did as one JSON object.\n"
	        "\n"
	        "  --port P           the server's port on 127.0.0.1\n"
	        "  --duration SECONDS stop after this long (at most %d)\n"
	        "  --addresses N      source addresses 127.0.0.FIRST and up (default %d)\n"
	        "  --first N          the last byte of the first source address (default %d)\n"
	        "  --per-address N    connections held from each (default %d)\n"
	        "  --max-rate N       new connects per second at most (default 0: no cap)\n"
	        "  --cycle            close each connection as soon as it is made, and re-open it\n"
	        "  --speak BYTE       send this one byte (0..255) once a connection is made\n"
	        "  -h, --help         this help\n"
	        "  -V, --version      the version\n"
	        "\n"
	        "Exit status: 0 done; 1 runtime error; 2 usage error.\n",
	        FLOOD_MAX_SECONDS, PPS_DEFAULT_FLOOD_ADDRESSES, PPS_DEFAULT_FLOOD_FIRST,
	        PPS_DEFAULT_FLOOD_PER_ADDRESS);
}

static void __attribute__((noreturn))
die_usage(const char *option, const char *value, const char *expected)
{
	fprintf(stderr, PROGRAM ": %s: '%s' is not %s\n", option, value ? value : "", expected);
	exit(2);
}

static double
parse_number(const char *option, const char *value, double low, double high)
{
	char *end = NULL;
	double x;

	if (!value)
		die_usage(option, value, "given");
	errno = 0;
	x = strtod(value, &end);
	if (errno || end == value || *end || x < low || x > high)
		die_usage(option, value, "a number in range");
	return x;
}

static void
settings_parse(flood_settings_t *s, int argc, char **argv)
{
	memset(s, 0, sizeof(*s));
	s->addresses = PPS_DEFAULT_FLOOD_ADDRESSES;
	s->per_address = PPS_DEFAULT_FLOOD_PER_ADDRESS;
	s->first = PPS_DEFAULT_FLOOD_FIRST;
	s->speak = -1;
	if (pps_cli_help_or_version(argc, argv, PROGRAM, usage))
		exit(0);
	for (int i = 1; i < argc; i += 2) {
		const char *option = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(option, "--cycle")) {
			s->cycle = true;
			i--; /* no value */
			continue;
		}
		if (!strcmp(option, "--speak"))
			s->speak = (int)parse_number(option, value, 0, 255);
		else if (!strcmp(option, "--port"))
			s->port = (uint16_t)parse_number(option, value, 1, 65535);
		else if (!strcmp(option, "--duration"))
			s->duration_s = parse_number(option, value, 0.1, FLOOD_MAX_SECONDS);
		else if (!strcmp(option, "--addresses"))
			s->addresses = (unsigned)parse_number(option, value, 1, 250);
		else if (!strcmp(option, "--first"))
			s->first = (unsigned)parse_number(option, value, 1, 254);
		else if (!strcmp(option, "--per-address"))
			s->per_address = (unsigned)parse_number(option, value, 1, 1024);
		else if (!strcmp(option, "--max-rate"))
			s->max_rate = parse_number(option, value, 0, 1e9);
		else
			die_usage("option", option, "known");
	}
	if (!s->port || !s->duration_s)
		die_usage("--port and --duration", "", "given");
	if (s->first + s->addresses > 255 || s->addresses * s->per_address > FLOOD_MAX_SLOTS)
		die_usage("--addresses", "", "within 127.0.0.255 and 4096 connections");
}

/* Starts a nonblocking connect for @slot; false if the socket could not be made. */
static bool
slot_open(flood_slot_t *slot, int epfd, uint16_t port, uint32_t index)
{
	struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr = slot->source};
	struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(port)};
	struct linger reset = {.l_onoff = 1, .l_linger = 0};
	struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP, .data.u32 = index};
	int one = 1;

	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	slot->connected = false;
	slot->opened_ns = pps_time_monotonic_ns();
	slot->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (slot->fd < 0)
		return false;
	setsockopt(slot->fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
	/* The port is chosen at connect(), by the whole 4-tuple: more of them. */
	setsockopt(slot->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (bind(slot->fd, (struct sockaddr *)&src, sizeof(src)) < 0 ||
	    (connect(slot->fd, (struct sockaddr *)&dst, sizeof(dst)) < 0 && errno != EINPROGRESS) ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, slot->fd, &ev) < 0) {
		close(slot->fd);
		slot->fd = -1;
		return false;
	}
	return true;
}

static void
slot_close(flood_slot_t *slot)
{
	if (slot->fd >= 0)
		close(slot->fd); /* also leaves the epoll set */
	slot->fd = -1;
}

static void
print_counts(const flood_counts_t *c, double ran_s)
{
	unsigned whole = (unsigned)ran_s;

	printf("{\"attempts\": %" PRIu64 ", \"connects\": %" PRIu64 ", \"drops\": %" PRIu64
	       ", \"failed\": %" PRIu64 ", \"seconds\": %.3f, \"per_second\": [",
	       c->attempts, c->connects, c->drops, c->failed, ran_s);
	for (unsigned i = 0; i < whole && i < FLOOD_MAX_SECONDS; i++)
		printf("%s%" PRIu64, i ? ", " : "", c->per_second[i]);
	printf("]}\n");
}

int
main(int argc, char **argv)
{
	static flood_slot_t slots[FLOOD_MAX_SLOTS];
	static flood_counts_t counts;
	struct epoll_event events[256];
	flood_settings_t s;
	unsigned n;
	int epfd;
	int64_t start_ns, end_ns, now_ns;
	double budget = 0;
	int64_t budget_ns;

	settings_parse(&s, argc, argv);
	signal(SIGTERM, stop_handler);
	signal(SIGINT, stop_handler);
	signal(SIGPIPE, SIG_IGN);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0) {
		perror(PROGRAM ": epoll_create1");
		return 1;
	}
	n = s.addresses * s.per_address;
	for (unsigned i = 0; i < n; i++) {
		slots[i].fd = -1;
		slots[i].source.s_addr = htonl(0x7f000000u | (s.first + i / s.per_address));
	}
	start_ns = now_ns = budget_ns = pps_time_monotonic_ns();
	end_ns = start_ns + (int64_t)(s.duration_s * 1e9);
	while (!stop_requested && now_ns < end_ns) {
		int ready, timeout_ms = 10;

		/* Closed slots are re-opened at once, or as the rate cap allows. */
		if (s.max_rate > 0) {
			budget += (double)(now_ns - budget_ns) * 1e-9 * s.max_rate;
			budget = budget > s.max_rate / 100 + 1 ? s.max_rate / 100 + 1 : budget;
			budget_ns = now_ns;
		}
		for (unsigned i = 0; i < n; i++) {
			/* A SYN the server's full backlog dropped is retried by a new socket. */
			if (slots[i].fd >= 0 && !slots[i].connected &&
			    now_ns - slots[i].opened_ns > FLOOD_CONNECT_TIMEOUT_NS) {
				counts.failed++;
				slot_close(&slots[i]);
			}
			if (slots[i].fd >= 0 || (s.max_rate > 0 && budget < 1))
				continue;
			if (!slot_open(&slots[i], epfd, s.port, i))
				counts.failed++;
			else
				counts.attempts++;
			budget -= 1;
		}
		ready = epoll_wait(epfd, events, 256, timeout_ms);
		if (ready < 0 && errno != EINTR) {
			perror(PROGRAM ": epoll_wait");
			break;
		}
		now_ns = pps_time_monotonic_ns();
		for (int k = 0; k < ready; k++) {
			flood_slot_t *slot = &slots[events[k].data.u32];
			uint32_t ev = events[k].events;
			char buf[4096];
			int error = 0;
			socklen_t len = sizeof(error);

			if (slot->fd < 0)
				continue;
			if (!slot->connected) {
				getsockopt(slot->fd, SOL_SOCKET, SO_ERROR, &error, &len);
				if (error || (ev & (EPOLLERR | EPOLLHUP) && !(ev & EPOLLOUT))) {
					counts.failed++;
					slot_close(slot);
					continue;
				}
				if (ev & EPOLLOUT) {
					struct epoll_event in = {.events = EPOLLIN | EPOLLRDHUP,
					                         .data.u32 = events[k].data.u32};

					slot->connected = true;
					counts.connects++;
					if ((now_ns - start_ns) / 1000000000 < FLOOD_MAX_SECONDS)
						counts
						    .per_second[(now_ns - start_ns) / 1000000000]++;
					if (s.cycle) {
						slot_close(slot);
						continue;
					}
					if (s.speak >= 0)
						(void)send(slot->fd, &(uint8_t){(uint8_t)s.speak},
						           1, MSG_NOSIGNAL);
					epoll_ctl(epfd, EPOLL_CTL_MOD, slot->fd, &in);
				}
			}
			if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
				/* What the server says (a BYE) is read away; EOF or a reset is a
				 * drop. */
				ssize_t got = recv(slot->fd, buf, sizeof(buf), 0);

				if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
					counts.drops += slot->connected;
					counts.failed += !slot->connected;
					slot_close(slot);
				}
			}
		}
	}
	for (unsigned i = 0; i < n; i++)
		slot_close(&slots[i]);
	close(epfd);
	print_counts(&counts, (double)(pps_time_monotonic_ns() - start_ns) * 1e-9);
	return 0;
}
