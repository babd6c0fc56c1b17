/* SPDX-License-Identifier: MIT */
/*
 * GET /metrics on the listener: the server's figures and each streaming
 * client's in the Prometheus text exposition format (version 0.0.4: a HELP and
 * a TYPE line per family, counters ending in _total, base units: seconds,
 * bytes, bits per second), or with ?format=json the same snapshot in
 * --stats-json's schema (docs/JSON.md names each metric's field).
 *
 * Bounded work per request: one snapshot serves every request for
 * PPS_SERVER_METRICS_SNAPSHOT_US, and a page is one line per family and
 * client, the clients being the listener's streaming sessions (max_clients
 * and their audio connections).
 */
#include "pps-server-lib.h"
#include "pps-time.h"
#include "pps-version.h"
#include "pps-websocket.h"

#include <errno.h>
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const pps_server_metrics_mode_names[] = {
    [PPS_SERVER_METRICS_OFF] = "off",
    [PPS_SERVER_METRICS_ON] = "on",
    [PPS_SERVER_METRICS_TOKEN] = "token",
    NULL,
};
_Static_assert(sizeof(pps_server_metrics_mode_names) / sizeof(pps_server_metrics_mode_names[0]) ==
                   PPS_SERVER_METRICS_COUNT + 1,
               "pps_server_metrics_mode_names matches pps_server_metrics_mode_t");

struct pps_server_metrics {
	pps_server_report_t *report;
	pps_server_metrics_mode_t mode;
	const char *token;
	pps_server_snapshot_t snapshot;
	bool have_snapshot;
};

pps_server_metrics_t *
pps_server_metrics_new(pps_server_report_t *report, pps_server_metrics_mode_t mode,
                       const char *token)
{
	pps_server_metrics_t *m;

	if (!report || mode >= PPS_SERVER_METRICS_COUNT ||
	    (mode == PPS_SERVER_METRICS_TOKEN && (!token || !token[0]))) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	m->report = report;
	m->mode = mode;
	m->token = token;
	return m;
}

void
pps_server_metrics_free(pps_server_metrics_t *m)
{
	if (!m)
		return;
	pps_server_snapshot_clear(&m->snapshot);
	free(m);
}

/* JSON rounds these to the millisecond; the text shows the same value. */
static double
round_ms(double seconds)
{
	return round(seconds * 1000.0) / 1000.0;
}

/* The text format names a counter's family with its _total, as its samples. */
static void
family(GString *g, const char *name, const char *type, const char *help)
{
	g_string_append_printf(g, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
value(GString *g, double v)
{
	if (v == floor(v) && fabs(v) < 9007199254740992.0)
		g_string_append_printf(g, " %.0f\n", v);
	else
		g_string_append_printf(g, " %.17g\n", v);
}

static void
sample(GString *g, const char *name, const char *type, const char *help, double v)
{
	family(g, name, type, help);
	g_string_append(g, name);
	value(g, v);
}

/* A label value: backslash, double quote and newline escaped. */
static void
label(GString *g, const char *key, const char *text, bool last)
{
	g_string_append_printf(g, "%s=\"", key);
	for (const char *c = text; *c; c++) {
		if (*c == '\\' || *c == '"')
			g_string_append_c(g, '\\');
		if (*c == '\n')
			g_string_append(g, "\\n");
		else
			g_string_append_c(g, *c);
	}
	g_string_append(g, last ? "\"" : "\",");
}

static void
client_sample(GString *g, const char *name, const pps_server_client_t *c, double v)
{
	char id[16];

	snprintf(id, sizeof(id), "%u", c->id);
	g_string_append_printf(g, "%s{", name);
	label(g, "client", id, false);
	label(g, "name", c->name, false);
	label(g, "address", c->address, true);
	g_string_append_c(g, '}');
	value(g, v);
}

/* Every client's figures, one family at a time: name, type, help, value of
 * client c. docs/JSON.md maps each to its field of --stats-json. */
#define CLIENT_FAMILIES(X)                                                                         \
	X("pps_client_joined_time_seconds", "gauge", "when the client was admitted (Unix time)",   \
	  (double)c->joined_us / 1e6)                                                              \
	X("pps_client_windows_complete_total", "counter", "windows sent whole",                    \
	  c->sched.windows_complete)                                                               \
	X("pps_client_windows_partial_total", "counter",                                           \
	  "windows sent in part (the rest dropped at its deadline)", c->sched.windows_partial)     \
	X("pps_client_windows_dropped_total", "counter",                                           \
	  "windows of which nothing was sent before their deadline", c->sched.windows_dropped)     \
	X("pps_client_windows_overflow_total", "counter",                                          \
	  "windows dropped because max_windows were queued", c->sched.windows_overflow)            \
	X("pps_client_adus_undecodable_total", "counter",                                          \
	  "ADUs skipped because something they depend on was dropped", c->sched.adus_undecodable)  \
	X("pps_client_adu_bytes_sent_total", "counter", "ADU payload bytes sent, every layer",     \
	  c->adu_bytes_sent)                                                                       \
	X("pps_client_wire_bytes_total", "counter", "bytes written to the socket",                 \
	  c->transport.bytes)                                                                      \
	X("pps_client_writes_total", "counter", "writes to the socket", c->transport.writes)       \
	X("pps_client_wakeups_total", "counter", "wake-ups of the socket writer",                  \
	  c->transport.wakeups)                                                                    \
	X("pps_client_retrans_pkts_total", "counter", "TCP retransmissions",                       \
	  c->transport.retrans_pkts)                                                               \
	X("pps_client_rto_events_total", "counter", "TCP retransmission timeouts",                 \
	  c->transport.rto_events)                                                                 \
	X("pps_client_capped_writes_total", "counter",                                             \
	  "write decisions the latency cap made smaller", c->transport.capped_writes)              \
	X("pps_client_congestion_switches_total", "counter",                                       \
	  "congestion control switches applied", c->transport.congestion_switches)                 \
	X("pps_client_audio_sent_total", "counter", "audio frames sent", c->sched.audio_sent)      \
	X("pps_client_audio_late_total", "counter", "audio frames dropped past their deadline",    \
	  c->sched.audio_late)                                                                     \
	X("pps_client_audio_overflow_total", "counter",                                            \
	  "audio frames dropped because the queue was full", c->sched.audio_overflow)              \
	X("pps_client_audio_refused_total", "counter",                                             \
	  "audio frames too long for a slot or the client's record limit", c->sched.audio_refused) \
	X("pps_client_estimate_bits_per_second", "gauge",                                          \
	  "what the path carries for this stream now", c->path.estimate_bps)                       \
	X("pps_client_min_rtt_seconds", "gauge", "the path's minimum round trip",                  \
	  (double)c->path.min_rtt_us / 1e6)                                                        \
	X("pps_client_queue_delay_seconds", "gauge", "smoothed RTT minus the minimum",             \
	  (double)c->path.queue_delay_us / 1e6)                                                    \
	X("pps_client_fair_rate_bits_per_second", "gauge",                                         \
	  "the tcp-friendly rate cap in force (0: none)", c->path.fair_rate_bps)                   \
	X("pps_client_loss_events_total", "counter",                                               \
	  "round trips with a retransmission (under the tcp-friendly cap)",                        \
	  c->path.fair_rate_bps ? c->path.loss_events : 0)

char *
pps_server_metrics_text(const pps_server_report_t *report, const pps_server_snapshot_t *snap,
                        size_t *len_out)
{
	const pps_media_stats_t *m = &snap->media;
	const pps_listener_stats_t *l = &snap->listener;
	const pps_server_report_start_t *start = pps_server_report_start(report);
	const pps_wire_stream_info_t *si = &start->info;
	GString *g = g_string_sized_new(4096 + 2048 * snap->n_clients);

	family(g, "pps_server_info", "gauge", "the server's version and stream (always 1)");
	g_string_append(g, "pps_server_info{");
	label(g, "version", PPS_VERSION, false);
	label(g, "source", start->source ? start->source : "", false);
	label(g, "transport", start->transport ? start->transport : "", true);
	g_string_append(g, "} 1\n");
	sample(g, "pps_server_start_time_seconds", "gauge", "when the server started (Unix time)",
	       (double)pps_server_report_start_us(report) / 1e6);
	sample(g, "pps_server_snapshot_time_seconds", "gauge",
	       "when these figures were read (Unix time)", (double)snap->time_us / 1e6);
	sample(g, "pps_server_uptime_seconds", "gauge", "seconds since the server started",
	       round_ms(snap->duration_s));
	sample(g, "pps_frames_encoded_total", "counter", "pictures encoded",
	       (double)m->frames_encoded);
	sample(g, "pps_raw_frames_dropped_total", "counter",
	       "raw frames the capture queue dropped before the encoder",
	       (double)m->capture_dropped);
	sample(g, "pps_windows_total", "counter", "adaptation windows closed", (double)m->windows);
	sample(g, "pps_windows_early_total", "counter",
	       "windows sent from their base layer on while the rest was still encoding",
	       (double)m->windows_early);
	sample(g, "pps_capture_to_ready_p50_seconds", "gauge",
	       "a window's first capture to the window ready to send, median",
	       m->capture_to_ready_p50_ms / 1e3);
	sample(g, "pps_capture_to_ready_p95_seconds", "gauge",
	       "a window's first capture to the window ready to send, 95th percentile",
	       m->capture_to_ready_p95_ms / 1e3);
	sample(g, "pps_sessions_open", "gauge", "connections open, in any state",
	       (double)l->sessions);
	sample(g, "pps_clients_streaming", "gauge", "clients streaming now (audio ones included)",
	       (double)l->streaming);
	sample(g, "pps_clients_total", "counter", "clients admitted to the stream",
	       (double)l->clients_total);
	sample(g, "pps_clients_left_total", "counter", "clients that streamed and left",
	       (double)snap->clients_left);
	sample(g, "pps_audio_connections_total", "counter", "audio-only connections admitted",
	       (double)l->audio_connections_total);
	sample(g, "pps_connections_total", "counter", "TCP connections accepted",
	       (double)l->connections_total);
	sample(g, "pps_clients_refused_total", "counter",
	       "clients refused (full, too many from one address)", (double)l->clients_refused);
	sample(g, "pps_clients_unauthorized_total", "counter",
	       "clients refused for a wrong access token", (double)l->clients_unauthorized);
	sample(g, "pps_clients_evicted_total", "counter", "clients dropped for taking no data",
	       (double)l->clients_evicted);
	sample(g, "pps_handshakes_dropped_total", "counter",
	       "connections dropped in their handshake", (double)l->handshakes_dropped);
	sample(g, "pps_log_lines_unlogged_total", "counter",
	       "log lines peers caused past the log's rate limit", (double)l->log_lines_unlogged);
	sample(g, "pps_auth_throttled_total", "counter",
	       "tries at the access token refused untried", (double)l->auth_throttled);
	sample(g, "pps_cpu_user_seconds_total", "counter", "CPU time in user mode",
	       round_ms(snap->cpu_user_s));
	sample(g, "pps_cpu_system_seconds_total", "counter", "CPU time in the kernel",
	       round_ms(snap->cpu_system_s));
	sample(g, "pps_idr_requests_total", "counter", "IDRs asked of the encoder",
	       (double)m->idr_requests);
	sample(g, "pps_idr_deferred_total", "counter",
	       "IDR requests that waited for the rate limit", (double)m->idr_deferred);
	sample(g, "pps_recovery_requests_total", "counter", "joins and losses asking for an IDR",
	       (double)l->recovery.requests);
	sample(g, "pps_recovery_granted_total", "counter", "forced IDRs asked of the encoder",
	       (double)l->recovery.granted);
	sample(g, "pps_recovery_deferred_total", "counter",
	       "recovery requests held back by a bound", (double)l->recovery.deferred);
	sample(g, "pps_recovery_dropped_client_total", "counter",
	       "loss requests too soon after the client's last",
	       (double)l->recovery.dropped_client);
	sample(g, "pps_recovery_served_by_encoder_total", "counter",
	       "pending requests an IDR of the encoder served",
	       (double)l->recovery.served_by_encoder);
	sample(g, "pps_idr_cost_bits", "gauge", "estimated extra bits of one IDR",
	       (double)l->recovery.idr_cost_bits);
	sample(g, "pps_audio_frames_total", "counter", "audio frames encoded",
	       (double)m->audio_frames);
	sample(g, "pps_audio_bytes_total", "counter", "audio bytes encoded",
	       (double)m->audio_bytes);
	sample(g, "pps_audio_dropped_total", "counter",
	       "audio frames dropped because the hand-over was full", (double)m->audio_dropped);
	sample(g, "pps_audio_encode_errors_total", "counter", "audio encoder failures",
	       (double)m->audio_encode_errors);
	family(g, "pps_layer_bytes_total", "counter", "bytes encoded per quality layer");
	for (unsigned q = 0; q < si->quality_layers && q < PPS_ADU_MAX_QUALITY_LAYERS; q++)
		g_string_append_printf(
		    g, "pps_layer_bytes_total{layer=\"%u\"} %" G_GUINT64_FORMAT "\n", q,
		    m->bytes[q]);
	family(g, "pps_encode_seconds_per_frame", "gauge",
	       "the encoder's wall time per frame and quality layer, mean");
	for (unsigned q = 0; q < si->quality_layers && q < PPS_ADU_MAX_QUALITY_LAYERS; q++) {
		g_string_append_printf(g, "pps_encode_seconds_per_frame{layer=\"%u\"}", q);
		value(g, round_ms(m->encode_ms_per_frame[q]) / 1e3);
	}
#define CLIENT_FAMILY(name, type, help, expr)                                                      \
	family(g, name, type, help);                                                               \
	for (size_t i = 0; i < snap->n_clients; i++) {                                             \
		const pps_server_client_t *c = &snap->clients[i];                                  \
		client_sample(g, name, c, (double)(expr));                                         \
	}
	CLIENT_FAMILIES(CLIENT_FAMILY)
#undef CLIENT_FAMILY
	*len_out = g->len;
	return g_string_free(g, FALSE);
}

/* Constant time in the length of @given: the token is not learnt a byte at
 * a time from answer times. */
static bool
token_equal(const char *given, size_t len, const char *token)
{
	size_t n = strlen(token);
	unsigned char diff = len != n;

	for (size_t i = 0; i < len; i++)
		diff |= (unsigned char)given[i] ^ (unsigned char)token[i < n ? i : 0];
	return diff == 0;
}

static int
hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The value of @key in a query string, percent-decoded into @out; false if
 * it is not there (or does not fit). */
static bool
query_value(const char *query, const char *key, char *out, size_t size)
{
	size_t klen = strlen(key);

	for (const char *p = query; p && *p; p = strchr(p, '&'), p = p ? p + 1 : NULL) {
		size_t n = 0;

		if (strncmp(p, key, klen) != 0 || p[klen] != '=')
			continue;
		for (const char *v = p + klen + 1; *v && *v != '&'; v++) {
			char c = *v;

			if (c == '%' && hex_digit(v[1]) >= 0 && hex_digit(v[2]) >= 0) {
				c = (char)(hex_digit(v[1]) * 16 + hex_digit(v[2]));
				v += 2;
			} else if (c == '+') {
				c = ' ';
			}
			if (n + 1 >= size)
				return false;
			out[n++] = c;
		}
		out[n] = '\0';
		return true;
	}
	return false;
}

static bool
authorized(const pps_server_metrics_t *m, const pps_ws_request_t *req)
{
	char given[256];

	if (m->mode != PPS_SERVER_METRICS_TOKEN)
		return true;
	if (strncasecmp(req->authorization, "Bearer ", 7) == 0) {
		const char *t = req->authorization + 7;

		while (*t == ' ')
			t++;
		return token_equal(t, strlen(t), m->token);
	}
	return query_value(req->query, "token", given, sizeof(given)) &&
	       token_equal(given, strlen(given), m->token);
}

bool
pps_server_metrics_page_cb(const pps_ws_request_t *req, pps_web_page_t *page, void *user)
{
	pps_server_metrics_t *m = user;
	int64_t now = pps_time_realtime_us();
	char format[16] = "";

	if (m->mode == PPS_SERVER_METRICS_OFF || strcmp(req->path, "/metrics") != 0)
		return false;
	if (!authorized(m, req)) {
		*page = (pps_web_page_t){
		    .status = 401,
		    .reason = "Unauthorized",
		    .extra_headers = "WWW-Authenticate: Bearer realm=\"pps-server\"\r\n",
		};
		return true;
	}
	if (!m->have_snapshot || now - m->snapshot.time_us >= PPS_SERVER_METRICS_SNAPSHOT_US ||
	    now < m->snapshot.time_us) {
		pps_server_snapshot_clear(&m->snapshot);
		m->have_snapshot = pps_server_report_snapshot(m->report, &m->snapshot) == 0;
		if (!m->have_snapshot) {
			*page = (pps_web_page_t){.status = 503, .reason = "Service Unavailable"};
			return true;
		}
	}
	*page = (pps_web_page_t){.status = 200, .reason = "OK"};
	if (query_value(req->query, "format", format, sizeof(format)) &&
	    strcmp(format, "json") == 0) {
		char *text = pps_server_report_json(m->report, &m->snapshot, "snapshot");

		/* g_malloc and malloc are one allocator since GLib 2.46. */
		page->body = text;
		page->body_len = strlen(text);
		page->content_type = "application/json";
	} else {
		page->body = pps_server_metrics_text(m->report, &m->snapshot, &page->body_len);
		page->content_type = "text/plain; version=0.0.4; charset=utf-8";
	}
	return true;
}
