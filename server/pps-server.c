/* SPDX-License-Identifier: MIT */
/*
 * pps-server: captures a live source, encodes it once in layers, and streams
 * it to every client with its own priority-progress session over its own
 * MIN_BUF (or tcp) connection. One libevent loop on the main thread owns every
 * socket; capture and encoding run on their own threads (server/pps-media.c).
 */
#include "pps-server-internal.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define HELLO_TIMEOUT_US (5 * 1000000)

typedef struct session_link {
	pps_session_t *session;
	struct session_link *next;
	char host[NI_MAXHOST]; /* the peer's address, for the per-address limit */
	/* --log: counters at the last log line, for per-second rates */
	uint64_t logged_sent[PPS_ADU_MAX_QUALITY_LAYERS];
	uint64_t logged_windows_dropped;
} session_link_t;

struct pps_server {
	pps_config_t *config;
	struct event_base *base;
	struct evconnlistener *listener;
	pps_media_t *media;
	pps_session_params_t session_params;
	session_link_t *sessions;
	unsigned n_sessions;
	unsigned max_clients;
	unsigned max_per_address;
	unsigned next_id;
	uint64_t clients_total, clients_refused;
	bool quiet;
	int exit_status;
	struct event *status_timer;
	struct event *sigint_event, *sigterm_event;
	struct event *duration_timer;
	/* for rates between status lines */
	int64_t last_status_us;
	pps_media_stats_t last_media;
	int64_t start_us;
	const char *stats_json;
	/* closed loop (adapt/) */
	pps_ratealloc_t *ratealloc; /* NULL with adapt.mode=fixed */
	struct event *adapt_timer;
	int64_t adapt_last_us;
	uint64_t adapt_last_bytes[PPS_ADU_MAX_QUALITY_LAYERS];
	/* --log: JSON Lines once a second */
	FILE *log;
	const char *log_path;
	struct event *log_timer;
	int64_t log_last_us;
	uint64_t log_last_bytes[PPS_ADU_MAX_QUALITY_LAYERS];
};

static void
usage(FILE *out)
{
	fprintf(out,
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
		"  -h, --help               this help\n");
	pps_config_print_usage(out);
	fprintf(out,
		"\n"
		"Settings are in config/server.ini (every key, with its default) and the README.\n"
		"Examples:\n"
		"  pps-server                                   test pattern on 127.0.0.1:7400\n"
		"  pps-server --set transport.mode=tcp          the kernel's buffering, for comparison\n"
		"  pps-server --set source.type=camera --set source.device=/dev/video0\n"
		"Exit status: 0 stopped cleanly, 1 runtime error (source, socket), 2 usage/config.\n");
}

static void
format_rate(char *buf, size_t size, double bps)
{
	if (bps >= 1e6)
		snprintf(buf, size, "%.2f Mbit/s", bps / 1e6);
	else
		snprintf(buf, size, "%.0f kbit/s", bps / 1e3);
}

static void
print_status(pps_server_t *srv, bool final)
{
	pps_media_stats_t ms;
	int64_t now = pps_server_now_us();
	double dt = (double)(now - srv->last_status_us) / 1e6;
	char line[2048];
	size_t len = 0;

	pps_media_get_stats(srv->media, &ms);
	if (dt <= 0)
		dt = 1;
	len += (size_t)snprintf(line + len, sizeof(line) - len, "pps-server: %u client%s | %.1f fps",
				srv->n_sessions, srv->n_sessions == 1 ? "" : "s",
				(double)(ms.frames_encoded - srv->last_media.frames_encoded) / dt);
	for (int q = 0; q < srv->session_params.stream_info.quality_layers; q++) {
		char rate[32];

		format_rate(rate, sizeof(rate),
			    8.0 * (double)(ms.bytes[q] - srv->last_media.bytes[q]) / dt);
		len += (size_t)snprintf(line + len, sizeof(line) - len, " | q%d %s", q, rate);
		if (srv->ratealloc) {
			pps_encoder_rates_t r;

			pps_media_get_rates(srv->media, &r);
			len += (size_t)snprintf(line + len, sizeof(line) - len, " (cap %d crf %d)",
						r.kbps[q], r.crf[q]);
		}
	}
	if (ms.capture_dropped)
		len += (size_t)snprintf(line + len, sizeof(line) - len, " | raw drops %" PRIu64,
					ms.capture_dropped);
	for (session_link_t *l = srv->sessions; l && len < sizeof(line) - 128; l = l->next) {
		pps_sched_stats_t st;

		if (pps_session_state(l->session) != PPS_SESSION_STREAMING)
			continue;
		pps_path_estimate_t e;
		char est[32];

		pps_session_get_sched_stats(l->session, &st);
		pps_session_get_path(l->session, &e);
		format_rate(est, sizeof(est), (double)e.estimate_bps);
		len += (size_t)snprintf(line + len, sizeof(line) - len, " | #%u ",
					pps_session_id(l->session));
		if (e.valid)
			len += (size_t)snprintf(line + len, sizeof(line) - len,
						"est %s rtt %u+%u ms cap %s ", est,
						e.min_rtt_us / 1000, e.queue_delay_us / 1000,
						pps_path_cap_state_name(e.cap_state));
		len += (size_t)snprintf(line + len, sizeof(line) - len,
					"windows %" PRIu64 "/%" PRIu64 "/%" PRIu64,
					st.windows_complete, st.windows_partial,
					st.windows_dropped);
	}
	if (srv->n_sessions && len < sizeof(line) - 64)
		snprintf(line + len, sizeof(line) - len, " (complete/partial/dropped)");
	fprintf(stderr, "%s\n", line);
	if (!final) {
		srv->last_media = ms;
		srv->last_status_us = now;
	}
}

/* Bytes of each quality layer sent to a client so far (all temporal layers). */
static void
sent_layer_bytes(const pps_session_t *session, uint64_t out[PPS_ADU_MAX_QUALITY_LAYERS])
{
	pps_sched_stats_t st;

	pps_session_get_sched_stats(session, &st);
	for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS; q++) {
		out[q] = 0;
		for (int t = 0; t < PPS_ADU_MAX_TEMPORAL_LAYERS; t++)
			out[q] += st.layer[t][q].bytes_sent;
	}
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void
json_string(FILE *f, const char *text)
{
	fputc('"', f);
	for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(f, "\\%c", *c);
		else if (*c < 0x20)
			fprintf(f, "\\u%04x", *c);
		else
			fputc(*c, f);
	}
	fputc('"', f);
}

/*
 * The closed loop, every [adapt] interval_ms: the clients' path estimates and
 * what each layer produced since the last step go to the rate allocator, and
 * what it decides to the encoder (applied at its next mini-GOP).
 */
static void
adapt_cb(evutil_socket_t fd, short what, void *user)
{
	pps_server_t *srv = user;
	pps_ratealloc_client_t clients[PPS_ADAPT_MAX_CLIENTS];
	size_t n = 0;
	uint64_t encoded_bps[PPS_ADU_MAX_QUALITY_LAYERS] = { 0 };
	pps_media_stats_t ms;
	pps_layer_rates_t r;
	int64_t now = pps_server_now_us();
	double dt = (double)(now - srv->adapt_last_us) / 1e6;

	pps_media_get_stats(srv->media, &ms);
	for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS && dt > 0; q++)
		encoded_bps[q] = (uint64_t)(8.0 * (double)(ms.bytes[q] - srv->adapt_last_bytes[q]) / dt);
	memcpy(srv->adapt_last_bytes, ms.bytes, sizeof(srv->adapt_last_bytes));
	srv->adapt_last_us = now;
	for (session_link_t *l = srv->sessions; l && n < PPS_ADAPT_MAX_CLIENTS; l = l->next) {
		pps_path_estimate_t e;

		if (pps_session_state(l->session) != PPS_SESSION_STREAMING)
			continue;
		pps_session_get_path(l->session, &e);
		if (!e.valid)
			continue;
		clients[n].estimate_bps = e.estimate_bps;
		clients[n].min_rtt_us = e.min_rtt_us;
		n++;
	}
	if (pps_ratealloc_update(srv->ratealloc, now, clients, n, encoded_bps, &r) == 1) {
		pps_encoder_rates_t er;

		memset(&er, 0, sizeof(er));
		for (int q = 0; q < PPS_ADAPT_MAX_LAYERS && q < PPS_ADU_MAX_QUALITY_LAYERS; q++) {
			er.kbps[q] = r.kbps[q];
			er.buffer_kbit[q] = r.buffer_kbit[q];
			er.crf[q] = r.crf[q];
		}
		pps_media_set_rates(srv->media, &er);
	}
}

static void
log_int_array(FILE *f, const char *name, const uint64_t *v, int n)
{
	fprintf(f, ",\"%s\":[", name);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%" PRIu64, i ? "," : "", v[i]);
	fputc(']', f);
}

/* --log: one "path" event per client and one "rates" event, every second. */
static void
log_cb(evutil_socket_t fd, short what, void *user)
{
	pps_server_t *srv = user;
	const int layers = srv->session_params.stream_info.quality_layers;
	int64_t now = pps_server_now_us();
	double dt = (double)(now - srv->log_last_us) / 1e6;
	pps_media_stats_t ms;
	pps_encoder_rates_t rates;
	uint64_t v[PPS_ADU_MAX_QUALITY_LAYERS];

	if (dt <= 0)
		dt = 1;
	for (session_link_t *l = srv->sessions; l; l = l->next) {
		pps_path_estimate_t e;
		pps_sched_stats_t st;
		uint64_t sent[PPS_ADU_MAX_QUALITY_LAYERS];

		if (pps_session_state(l->session) != PPS_SESSION_STREAMING)
			continue;
		pps_session_get_path(l->session, &e);
		pps_session_get_sched_stats(l->session, &st);
		sent_layer_bytes(l->session, sent);
		for (int q = 0; q < layers; q++)
			v[q] = (uint64_t)(8.0 * (double)(sent[q] - l->logged_sent[q]) / dt);
		fprintf(srv->log, "{\"event\":\"path\",\"t_us\":%" PRId64 ",\"client\":%u,\"peer\":",
			now, pps_session_id(l->session));
		json_string(srv->log, pps_session_peer(l->session));
		fprintf(srv->log,
			",\"valid\":%s,\"estimate_bps\":%" PRIu64 ",\"delivery_rate_bps\":%" PRIu64
			",\"acked_bps\":%" PRIu64 ",\"min_rtt_us\":%u,\"srtt_us\":%u"
			",\"queue_delay_us\":%u,\"retrans_pkts\":%" PRIu64 ",\"lost_pkts\":%u"
			",\"app_limited\":%s,\"congested\":%s,\"cwnd_pkts\":%u"
			",\"inflight_cap_pkts\":%u,\"cap_state\":\"%s\"",
			e.valid ? "true" : "false", e.estimate_bps, e.delivery_rate_bps, e.acked_bps,
			e.min_rtt_us, e.srtt_us, e.queue_delay_us, e.retrans_pkts, e.lost_pkts,
			e.app_limited ? "true" : "false", e.congested ? "true" : "false", e.cwnd_pkts,
			e.inflight_cap_pkts, pps_path_cap_state_name(e.cap_state));
		log_int_array(srv->log, "sent_layer_bps", v, layers);
		fprintf(srv->log, ",\"dropped_windows\":%" PRIu64 "}\n",
			st.windows_dropped - l->logged_windows_dropped);
		memcpy(l->logged_sent, sent, sizeof(l->logged_sent));
		l->logged_windows_dropped = st.windows_dropped;
	}
	pps_media_get_stats(srv->media, &ms);
	pps_media_get_rates(srv->media, &rates);
	fprintf(srv->log, "{\"event\":\"rates\",\"t_us\":%" PRId64, now);
	for (int q = 0; q < layers; q++)
		v[q] = (uint64_t)rates.kbps[q];
	log_int_array(srv->log, "target_kbps", v, layers);
	for (int q = 0; q < layers; q++)
		v[q] = (uint64_t)rates.buffer_kbit[q];
	log_int_array(srv->log, "buffer_kbit", v, layers);
	for (int q = 0; q < layers; q++)
		v[q] = (uint64_t)rates.crf[q];
	log_int_array(srv->log, "crf", v, layers);
	for (int q = 0; q < layers; q++)
		v[q] = (uint64_t)(8.0 * (double)(ms.bytes[q] - srv->log_last_bytes[q]) / dt);
	log_int_array(srv->log, "encoded_layer_bps", v, layers);
	fprintf(srv->log, ",\"idr_requests\":%" PRIu64 ",\"idr_deferred\":%" PRIu64 "}\n",
		ms.idr_requests, ms.idr_deferred);
	fflush(srv->log);
	memcpy(srv->log_last_bytes, ms.bytes, sizeof(srv->log_last_bytes));
	srv->log_last_us = now;
}

static void
status_cb(evutil_socket_t fd, short what, void *user)
{
	pps_server_t *srv = user;
	const char *error = pps_media_error(srv->media);

	if (error[0]) {
		fprintf(stderr, "pps-server: source failed: %s\n", error);
		srv->exit_status = 1;
		event_base_loopbreak(srv->base);
		return;
	}
	if (!srv->quiet)
		print_status(srv, false);
}

static void
free_session_cb(evutil_socket_t fd, short what, void *user)
{
	pps_session_free(user);
}

static void
session_closed_cb(void *user, pps_session_t *session)
{
	pps_server_t *srv = user;
	struct timeval now = { 0, 0 };

	for (session_link_t **l = &srv->sessions; *l; l = &(*l)->next) {
		if ((*l)->session == session) {
			session_link_t *dead = *l;

			*l = dead->next;
			free(dead);
			srv->n_sessions--;
			break;
		}
	}
	/* Freed from the loop, outside the session's own callbacks. */
	if (event_base_once(srv->base, -1, EV_TIMEOUT, free_session_cb, session, &now) < 0)
		pps_session_free(session);
}

/* A HELLO arrived: admitted while fewer than max_clients stream. */
static bool
session_admit_cb(void *user, pps_session_t *session)
{
	pps_server_t *srv = user;
	unsigned streaming = 0;

	for (session_link_t *l = srv->sessions; l; l = l->next)
		streaming += pps_session_state(l->session) == PPS_SESSION_STREAMING;
	if (streaming < srv->max_clients)
		return true;
	fprintf(stderr, "pps-server: refused %s: server full (max_clients %u)\n",
		pps_session_peer(session), srv->max_clients);
	srv->clients_refused++;
	return false;
}

static void
session_ready_cb(void *user, pps_session_t *session)
{
	pps_server_t *srv = user;

	/* A joining client can decode nothing until an IDR: ask for one. */
	pps_media_request_idr(srv->media);
}

static void
window_cb(void *user, pps_window_t *window)
{
	pps_server_t *srv = user;

	for (session_link_t *l = srv->sessions, *next; l; l = next) {
		next = l->next; /* a push may close (and unlink) this session */
		pps_session_push_window(l->session, window);
	}
	pps_window_unref(window);
}

static void
accept_cb(struct evconnlistener *listener, evutil_socket_t fd, struct sockaddr *addr, int len,
	  void *user)
{
	pps_server_t *srv = user;
	session_link_t *link, *oldest_pending = NULL;
	pps_session_t *session;
	char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?", why[128];
	unsigned streaming = 0, pending = 0, same_host = 0;

	evutil_make_socket_closeonexec(fd);
	getnameinfo(addr, (socklen_t)len, host, sizeof(host), port, sizeof(port),
		    NI_NUMERICHOST | NI_NUMERICSERV);
	for (session_link_t *l = srv->sessions; l; l = l->next) {
		if (pps_session_state(l->session) == PPS_SESSION_STREAMING) {
			streaming++;
		} else {
			oldest_pending = l; /* newest first: the last one is the oldest */
			pending++;
		}
		if (strcmp(l->host, host) == 0)
			same_host++;
	}
	if (streaming >= srv->max_clients || same_host >= srv->max_per_address) {
		pps_wire_record_t bye = { .kind = PPS_WIRE_BYE };

		bye.u.bye.reason = PPS_WIRE_BYE_SERVER_FULL;
		if (streaming >= srv->max_clients)
			snprintf(why, sizeof(why), "server full (%u clients)", srv->max_clients);
		else
			snprintf(why, sizeof(why), "too many connections from %s (max %u)", host,
				 srv->max_per_address);
		bye.u.bye.text_len = (uint8_t)snprintf(bye.u.bye.text, sizeof(bye.u.bye.text),
						       "%s", why);
		pps_server_write_record_now(fd, &bye);
		fprintf(stderr, "pps-server: refused %s:%s: %s\n", host, port, why);
		srv->clients_refused++;
		evutil_closesocket(fd);
		return;
	}
	/* Connections still in their handshake are bounded apart from the
	 * streaming ones, so silent connections cannot lock viewers out: at the
	 * bound the oldest of them goes (it has had the longest to say HELLO). */
	if (pending >= srv->max_clients && oldest_pending)
		pps_session_refuse(oldest_pending->session, PPS_WIRE_BYE_PROTOCOL,
				   "no HELLO yet and a newer connection needs the slot");
	link = calloc(1, sizeof(*link));
	session = link ? pps_session_new(srv->base, fd, addr, (socklen_t)len, ++srv->next_id,
					 &srv->session_params, session_ready_cb, session_closed_cb,
					 srv)
		       : NULL;
	if (!session) {
		fprintf(stderr, "pps-server: cannot accept a client: out of memory\n");
		free(link);
		evutil_closesocket(fd);
		return;
	}
	link->session = session;
	snprintf(link->host, sizeof(link->host), "%s", host);
	link->next = srv->sessions;
	srv->sessions = link;
	srv->n_sessions++;
	srv->clients_total++;
}

static void
accept_error_cb(struct evconnlistener *listener, void *user)
{
	int err = EVUTIL_SOCKET_ERROR();

	/* EMFILE and friends pass; the listener keeps going. */
	fprintf(stderr, "pps-server: accept: %s\n", evutil_socket_error_to_string(err));
}

static void
stop_cb(evutil_socket_t sig, short what, void *user)
{
	pps_server_t *srv = user;

	if (sig >= 0 && !srv->quiet)
		fprintf(stderr, "pps-server: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
	event_base_loopbreak(srv->base);
}

/* Parses "host:port" or "[v6]:port" and listens. */
static int
start_listening(pps_server_t *srv, const char *listen_at, const char *port_file)
{
	char host[256], port[16];
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	struct sockaddr_storage bound;
	socklen_t bound_len = sizeof(bound);
	char bhost[NI_MAXHOST], bport[NI_MAXSERV];
	int ret;

	/* Validated by the configuration loader already. */
	if (pps_config_split_address(listen_at, host, sizeof(host), port, sizeof(port)) < 0)
		return -EINVAL;
	ret = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (ret != 0) {
		fprintf(stderr, "pps-server: [server] listen = %s: %s\n", listen_at,
			gai_strerror(ret));
		return -EINVAL;
	}
	srv->listener = evconnlistener_new_bind(
		srv->base, accept_cb, srv,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, 64, res->ai_addr,
		(int)res->ai_addrlen);
	freeaddrinfo(res);
	if (!srv->listener) {
		fprintf(stderr, "pps-server: cannot listen on %s: %s\n", listen_at, strerror(errno));
		return -errno;
	}
	evconnlistener_set_error_cb(srv->listener, accept_error_cb);
	getsockname(evconnlistener_get_fd(srv->listener), (struct sockaddr *)&bound, &bound_len);
	getnameinfo((struct sockaddr *)&bound, bound_len, bhost, sizeof(bhost), bport,
		    sizeof(bport), NI_NUMERICHOST | NI_NUMERICSERV);
	if (port_file) {
		FILE *f = fopen(port_file, "w");

		if (!f || fprintf(f, "%s\n", bport) < 0 || fclose(f) != 0) {
			fprintf(stderr, "pps-server: --port-file %s: %s\n", port_file,
				strerror(errno));
			return -EIO;
		}
	}
	fprintf(stderr, "pps-server: listening on %s%s%s:%s\n", strchr(bhost, ':') ? "[" : "",
		bhost, strchr(bhost, ':') ? "]" : "", bport);
	return 0;
}

static void
print_final(pps_server_t *srv)
{
	pps_media_stats_t ms;
	FILE *json = NULL;
	struct rusage ru;
	double secs = (double)(pps_server_now_us() - srv->start_us) / 1e6;

	pps_media_get_stats(srv->media, &ms);
	getrusage(RUSAGE_SELF, &ru);
	if (!srv->quiet) {
		fprintf(stderr,
			"pps-server: ran %.1f s: %" PRIu64 " frames encoded (%" PRIu64
			" raw frames dropped before the encoder), %" PRIu64 " windows, %" PRIu64
			" clients served, %" PRIu64 " refused\n",
			secs, ms.frames_encoded, ms.capture_dropped, ms.windows,
			srv->clients_total, srv->clients_refused);
	}
	if (srv->stats_json) {
		json = fopen(srv->stats_json, "w");
		if (!json)
			fprintf(stderr, "pps-server: --stats-json %s: %s\n", srv->stats_json,
				strerror(errno));
	}
	if (json) {
		fprintf(json,
			"{\"seconds\":%.3f,\"frames_encoded\":%" PRIu64 ",\"raw_frames_dropped\":%" PRIu64
			",\"windows\":%" PRIu64 ",\"clients_total\":%" PRIu64
			",\"clients_refused\":%" PRIu64 ",\"cpu_user_s\":%.3f,\"cpu_system_s\":%.3f"
			",\"idr_requests\":%" PRIu64 ",\"idr_deferred\":%" PRIu64
			",\"layer_bytes\":[",
			secs, ms.frames_encoded, ms.capture_dropped, ms.windows, srv->clients_total,
			srv->clients_refused,
			(double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
			(double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6,
			ms.idr_requests, ms.idr_deferred);
		for (int q = 0; q < srv->session_params.stream_info.quality_layers; q++)
			fprintf(json, "%s%" PRIu64, q ? "," : "", ms.bytes[q]);
		fprintf(json, "],\"clients\":[");
	}
	for (session_link_t *l = srv->sessions; l; l = l->next) {
		pps_sched_stats_t st;
		pps_minbuf_stats_t ts;
		uint64_t bytes = 0;

		pps_path_estimate_t pe;

		pps_session_get_sched_stats(l->session, &st);
		pps_session_get_transport_stats(l->session, &ts);
		pps_session_get_path(l->session, &pe);
		for (int t = 0; t < PPS_ADU_MAX_TEMPORAL_LAYERS; t++)
			for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS; q++)
				bytes += st.layer[t][q].bytes_sent;
		if (!srv->quiet)
			fprintf(stderr,
				"pps-server: client #%u %s: windows %" PRIu64 " complete, %" PRIu64
				" partial, %" PRIu64 " dropped; %" PRIu64
				" ADU bytes sent; %" PRIu64 " writes, %" PRIu64
				" retransmitted packets, %" PRIu64 " RTOs\n",
				pps_session_id(l->session), pps_session_peer(l->session),
				st.windows_complete, st.windows_partial, st.windows_dropped, bytes,
				ts.writes, ts.retrans_pkts, ts.rto_events);
		if (json)
			fprintf(json,
				"%s{\"id\":%u,\"windows_complete\":%" PRIu64
				",\"windows_partial\":%" PRIu64 ",\"windows_dropped\":%" PRIu64
				",\"windows_overflow\":%" PRIu64 ",\"adus_undecodable\":%" PRIu64
				",\"adu_bytes_sent\":%" PRIu64
				",\"wire_bytes\":%" PRIu64 ",\"writes\":%" PRIu64
				",\"wakeups\":%" PRIu64
				",\"retrans_pkts\":%" PRIu64 ",\"rto_events\":%" PRIu64
				",\"capped_writes\":%" PRIu64 ",\"estimate_bps\":%" PRIu64
				",\"min_rtt_us\":%u,\"queue_delay_us\":%u,\"cap_state\":\"%s\"}",
				l == srv->sessions ? "" : ",", pps_session_id(l->session),
				st.windows_complete, st.windows_partial, st.windows_dropped,
				st.windows_overflow, st.adus_undecodable, bytes, ts.bytes, ts.writes,
				ts.wakeups,
				ts.retrans_pkts,
				ts.rto_events, ts.capped_writes, pe.estimate_bps, pe.min_rtt_us,
				pe.queue_delay_us, pps_path_cap_state_name(pe.cap_state));
	}
	if (json) {
		fprintf(json, "]}\n");
		fclose(json);
	}
}

/* The rate allocator, seeded from [encoder] and [adapt], and its timer. */
static int
start_adaptation(pps_server_t *srv)
{
	const pps_config_t *c = srv->config;
	const pps_wire_stream_info_t *si = &srv->session_params.stream_info;
	pps_ratealloc_params_t ap = {
		.quality_layers = si->quality_layers,
		.base_share_pct = (int)pps_config_get_int(c, "adapt", "base_share_pct"),
		.probe_pct = (int)pps_config_get_int(c, "adapt", "probe_pct"),
		.min_base_kbps = (int)pps_config_get_int(c, "adapt", "min_base_kbps"),
		.min_crf = (int)pps_config_get_int(c, "adapt", "min_crf"),
		.latency_budget_us = srv->session_params.sched.latency_budget_us,
		.window_us = (int64_t)si->window_frames * 1000000 / (si->fps_num ? si->fps_num : 30),
		.interval_us = pps_config_get_int(c, "adapt", "interval_ms") * 1000,
	};
	int base_max = (int)pps_config_get_int(c, "encoder", "base_vbv_kbps");
	int enh_max = (int)pps_config_get_int(c, "encoder", "enhancement_vbv_kbps");
	pps_layer_rates_t r;
	pps_encoder_rates_t er;
	struct timeval tv;

	for (int q = 0; q < ap.quality_layers; q++) {
		int crf = q ? (int)pps_config_get_int(c, "encoder", "enhancement_crf") - 6 * (q - 1)
			    : (int)pps_config_get_int(c, "encoder", "base_crf");
		int max = q ? enh_max : base_max;

		ap.max_kbps[q] = max > 0 ? max : 100000;
		if (ap.max_kbps[q] < ap.min_base_kbps)
			ap.max_kbps[q] = ap.min_base_kbps;
		ap.max_crf[q] = crf < 0 ? 0 : crf;
		if (ap.min_crf > ap.max_crf[q])
			ap.min_crf = ap.max_crf[q];
	}
	srv->ratealloc = pps_ratealloc_new(&ap);
	if (!srv->ratealloc) {
		fprintf(stderr, "pps-server: [adapt]: cannot start the rate allocator: %s\n",
			strerror(errno));
		return -errno;
	}
	pps_ratealloc_get(srv->ratealloc, &r);
	memset(&er, 0, sizeof(er));
	for (int q = 0; q < ap.quality_layers; q++) {
		er.kbps[q] = r.kbps[q];
		er.buffer_kbit[q] = r.buffer_kbit[q];
		er.crf[q] = r.crf[q];
	}
	pps_media_set_rates(srv->media, &er);
	srv->adapt_last_us = pps_server_now_us();
	srv->adapt_timer = event_new(srv->base, -1, EV_PERSIST, adapt_cb, srv);
	tv.tv_sec = (time_t)(ap.interval_us / 1000000);
	tv.tv_usec = (suseconds_t)(ap.interval_us % 1000000);
	if (!srv->adapt_timer || event_add(srv->adapt_timer, &tv) < 0) {
		fprintf(stderr, "pps-server: event loop: cannot create the adaptation timer\n");
		return -ENOMEM;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "port-file", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },
		{ "stats-json", required_argument, NULL, 'j' },
		{ "log", required_argument, NULL, 'L' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	pps_server_t srv = { .exit_status = 0 };
	char err[512];
	const char *port_file = NULL;
	double duration_s = 0;
	int opt, ret;
	struct timeval status_tv;

	signal(SIGPIPE, SIG_IGN);
	srv.config = pps_config_new(PPS_CONFIG_PROGRAM_SERVER);
	if (!srv.config) {
		fprintf(stderr, "pps-server: out of memory\n");
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			pps_config_free(srv.config);
			return 0;
		}
	}
	if (pps_config_parse_args(srv.config, &argc, argv, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-server: %s\n", err);
		pps_config_free(srv.config);
		return PPS_EXIT_USAGE;
	}
	while ((opt = getopt_long(argc, argv, "qh", options, NULL)) != -1) {
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
				fprintf(stderr, "pps-server: --duration %s: expected seconds, > 0 and finite\n",
					optarg);
				goto err_usage;
			}
			break;
		case 'j':
			srv.stats_json = optarg;
			break;
		case 'L':
			srv.log_path = optarg;
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
		fprintf(stderr, "pps-server: unexpected argument '%s' (see --help)\n", argv[optind]);
		goto err_usage;
	}

	srv.max_clients = (unsigned)pps_config_get_int(srv.config, "server", "max_clients");
	srv.max_per_address =
		(unsigned)pps_config_get_int(srv.config, "server", "max_clients_per_address");
	srv.session_params.admit_cb = session_admit_cb;
	srv.session_params.access_token =
		pps_config_get_string(srv.config, "server", "access_token");
	if (strlen(srv.session_params.access_token) > PPS_WIRE_MAX_AUTH_BYTES) {
		fprintf(stderr, "pps-server: [server] access_token: at most %d bytes\n",
			PPS_WIRE_MAX_AUTH_BYTES);
		goto err_usage;
	}
	srv.session_params.evict_after_us =
		pps_config_get_int(srv.config, "server", "evict_after_s") * 1000000;
	srv.session_params.config = srv.config;
	srv.session_params.hello_timeout_us = HELLO_TIMEOUT_US;
	srv.session_params.sched.latency_budget_us =
		pps_config_get_int(srv.config, "pps", "latency_budget_ms") * 1000;
	srv.session_params.sched.base_grace_us =
		pps_config_get_int(srv.config, "pps", "base_grace_ms") * 1000;
	srv.session_params.sched.max_windows =
		(unsigned)pps_config_get_int(srv.config, "pps", "max_windows");
	ret = pps_minbuf_params_from_config(srv.config, &srv.session_params.transport);
	if (ret < 0) {
		fprintf(stderr, "pps-server: [transport]: %s\n", strerror(-ret));
		goto err_usage;
	}
	srv.session_params.path.cap_policy = (pps_latency_cap_policy_t)pps_config_get_enum(
		srv.config, "transport", "latency_cap");
	srv.session_params.path.queue_target_us =
		pps_config_get_int(srv.config, "transport", "queue_target_ms") * 1000;
	if (srv.session_params.path.queue_target_us == 0)
		srv.session_params.path.queue_target_us = srv.session_params.sched.latency_budget_us / 5;
	if (srv.log_path) {
		srv.log = fopen(srv.log_path, "w");
		if (!srv.log) {
			fprintf(stderr, "pps-server: --log %s: %s\n", srv.log_path, strerror(errno));
			goto err_usage;
		}
	}

	srv.base = event_base_new();
	if (!srv.base) {
		fprintf(stderr, "pps-server: cannot create the event loop\n");
		return 1;
	}
	srv.media = pps_media_new(srv.base, srv.config, window_cb, &srv, err, sizeof(err));
	if (!srv.media) {
		fprintf(stderr, "pps-server: %s\n", err);
		srv.exit_status = 1;
		goto out;
	}
	pps_media_stream_info(srv.media, &srv.session_params.stream_info);
	if (pps_config_get_enum(srv.config, "adapt", "mode") == PPS_ADAPT_MODE_CLOSED_LOOP &&
	    start_adaptation(&srv) < 0) {
		srv.exit_status = 1;
		goto out;
	}
	if (start_listening(&srv, pps_config_get_string(srv.config, "server", "listen"),
			    port_file) < 0) {
		srv.exit_status = 1;
		goto out;
	}
	if (pps_media_start(srv.media, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-server: %s\n", err);
		srv.exit_status = 1;
		goto out;
	}
	if (!srv.quiet) {
		const pps_wire_stream_info_t *si = &srv.session_params.stream_info;

		fprintf(stderr,
			"pps-server: %s source %ux%u@%u, %u temporal x %u quality layers, "
			"window %u frames, budget %u ms, %s transport\n",
			pps_config_key_find("source", "type")
				->choices[pps_config_get_enum(srv.config, "source", "type")],
			si->width, si->height, si->fps_num, si->temporal_layers, si->quality_layers,
			si->window_frames, si->latency_budget_ms,
			pps_minbuf_mode_name(srv.session_params.transport.mode));
	}

	srv.start_us = srv.last_status_us = pps_server_now_us();
	srv.status_timer = event_new(srv.base, -1, EV_PERSIST, status_cb, &srv);
	status_tv.tv_sec = (time_t)pps_config_get_int(srv.config, "server", "status_interval_s");
	status_tv.tv_usec = 0;
	event_add(srv.status_timer, &status_tv);
	srv.sigint_event = evsignal_new(srv.base, SIGINT, stop_cb, &srv);
	srv.sigterm_event = evsignal_new(srv.base, SIGTERM, stop_cb, &srv);
	event_add(srv.sigint_event, NULL);
	event_add(srv.sigterm_event, NULL);
	if (duration_s > 0) {
		struct timeval tv = { .tv_sec = (time_t)duration_s,
				      .tv_usec = (suseconds_t)((duration_s - (double)(time_t)duration_s) * 1e6) };

		srv.duration_timer = evtimer_new(srv.base, stop_cb, &srv);
		event_add(srv.duration_timer, &tv);
	}

	if (srv.log) {
		struct timeval one_s = { 1, 0 };

		srv.log_last_us = srv.start_us;
		srv.log_timer = event_new(srv.base, -1, EV_PERSIST, log_cb, &srv);
		event_add(srv.log_timer, &one_s);
	}

	event_base_dispatch(srv.base);

	pps_media_stop(srv.media);
	print_final(&srv);
	for (session_link_t *l = srv.sessions; l; l = l->next)
		pps_session_say_bye(l->session, PPS_WIRE_BYE_NORMAL, "server shutting down");
out:
	while (srv.sessions) {
		session_link_t *l = srv.sessions;

		srv.sessions = l->next;
		pps_session_free(l->session);
		free(l);
	}
	/* Sessions closed just before the loop stopped are freed by their pending
	 * one-shot events: run them. */
	if (srv.base)
		event_base_loop(srv.base, EVLOOP_NONBLOCK);
	if (srv.listener)
		evconnlistener_free(srv.listener);
	if (srv.status_timer)
		event_free(srv.status_timer);
	if (srv.adapt_timer)
		event_free(srv.adapt_timer);
	if (srv.log_timer)
		event_free(srv.log_timer);
	pps_ratealloc_free(srv.ratealloc);
	if (srv.log && fclose(srv.log) != 0) {
		fprintf(stderr, "pps-server: --log %s: %s\n", srv.log_path, strerror(errno));
		srv.exit_status = 1;
	}
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
