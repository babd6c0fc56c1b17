/* SPDX-License-Identifier: MIT */
/*
 * The listening socket and the clients behind it: admission, the sessions,
 * the fan-out of windows, and IDR requests routed through the recovery bounds.
 *
 * Admission: max_clients counts admitted (streaming) clients only; their
 * audio connections and copies of their stream have bounds of their own per
 * client slot, and an address with a client streaming is not turned away as
 * full before its HELLO says which it is. Connections still in their
 * handshake are bounded apart (max_pending), as a pool that a connect flood
 * must not be able to flush: at the bound, the connection that
 * goes is one of the address holding most of the pool, of those the one that
 * has made least progress (nothing received < bytes received < HELLO in,
 * waiting for AUTH), of those the oldest. A newcomer is such a candidate too
 * (it is refused at once when it would be the one), and a candidate that
 * seems silent is asked (MSG_PEEK) whether its bytes are in but not read yet.
 * So many addresses cycling silent connections push out each other, not a
 * client that is being served. max_per_address bounds one address's
 * connections in any state.
 */
#include "pps-server-lib.h"
#include "pps-time.h"
#include "pps-socket.h"
#include "pps-tls.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PPS_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))

typedef struct link {
	pps_session_t *session;
	struct link *next;
	char host[NI_MAXHOST];   /* the peer's address, for the per-address limit */
	uint32_t host_key;       /* a hash of host, for the pool's shares */
	uint64_t seq;            /* accepted as the seq'th connection: the age */
	bool bytes_seen;         /* MSG_PEEK found its first bytes waiting */
	bool joined;             /* its first IDR request was its join */
	bool audio_carried;      /* a pooled audio connection that carried a frame, */
	uint32_t audio_last_seq; /* the last one */
	/* Its retransmissions over the frames it carried (smoothed), read from
	 * TCP_INFO every PPS_LISTENER_POOL_LOSS_FRAMES frames: how many copies
	 * the pool needs. */
	bool audio_loss_read;
	uint32_t audio_loss_seq, audio_retrans;
	uint32_t audio_frames, audio_frames_read; /* frames pushed to it: now, and at the reading */
	double audio_loss;
	/* Not pooled: a client's first audio connection stops its others'
	 * copies while it retransmits above audio_copies_off_loss
	 * (copies_off, on the first), and they carry nothing meanwhile
	 * (audio_withheld, on the others). */
	bool audio_copies_off;
	bool audio_withheld;
	/* A copy of the stream: its place among the copies from its address
	 * (1 the first; 0 not known yet), what its windows wait. */
	unsigned copy_rank;
	/* A copy at rest or not (copy_rest): the retransmissions of the
	 * stream's own connection at the last window, and until when the copy
	 * carries the windows (monotonic; 0: at rest). */
	bool copy_retrans_read;
	uint64_t copy_retrans;
	int64_t copy_awake_until_us;
	/* Awake, what the stream's own connection and the copy had retransmitted
	 * and delivered when the current check began (0: none begun); after a
	 * failed check, until when the copy rests whatever the path says, and
	 * for how long it rested last (copy_self_check()). */
	int64_t copy_check_us;
	uint64_t copy_check_retrans;
	uint64_t copy_check_bytes;
	int64_t copy_held_until_us;
	int64_t copy_hold_us;
	pps_recovery_client_t recovery;
} link_t;

struct pps_listener {
	struct event_base *base;
	pps_listener_params_t params;
	pps_listener_callbacks_t callbacks;
	void *user;
	int listen_fd;               /* -1 until pps_listener_listen */
	struct event *accept_event;  /* its EV_READ, level-triggered */
	struct event *accept_resume; /* the accept_event back after a failed accept */
	link_t *sessions;            /* newest first */
	struct pooled_audio *pooled; /* pps_listener_push_audio()'s scratch */
	size_t pooled_size;
	struct audio_peer *peers; /* copies_off_review()'s scratch */
	size_t peers_size;
	link_t *dead; /* closed, freed from reap_event */
	unsigned reaped_since_trim;
	int64_t trim_us;
	struct event *reap_event;
	struct event *recovery_timer;
	pps_recovery_t *recovery;
	unsigned next_id;
	uint64_t next_seq; /* connections accepted, for their age in the pool */
	pps_listener_stats_t stats;
	/* Every line a peer can cause (refusals here, and everything the
	 * sessions and their transports say) passes through one rate limit. */
	pps_log_limit_t peer_log_limit;
	pps_log_t peer_log;
	pps_tls_ctx_t *tls_ctx;   /* from params.tls_cert/tls_key at listen; NULL: plaintext */
	pps_fanout_guard_t guard; /* whether the loop keeps up with the stream */
	/* Tries at the access token, per address: a token bucket each. */
	struct auth_bucket {
		uint32_t host_key;
		bool used;
		double tries;
		int64_t last_us;
	} auth[PPS_LISTENER_AUTH_ADDRESSES];
};

static int64_t
listener_now(const pps_listener_t *l)
{
	return l->params.session.clock_cb ? l->params.session.clock_cb(l->params.session.clock_user)
	                                  : pps_time_realtime_us();
}

static int64_t
limit_clock_cb(void *user)
{
	return listener_now(user);
}

/* A flood of refused connections must not become a flood of log lines. */
static void PPS_PRINTF(2, 3) log_refusal(pps_listener_t *l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pps_logv(&l->peer_log, PPS_LOG_INFO, fmt, ap);
	va_end(ap);
}

/* Sessions streaming video (a client's own connection), copies of a stream,
 * streaming audio only, and still in their handshake. */
static void
count_sessions_by_kind(const pps_listener_t *l, unsigned *streaming, unsigned *copies,
                       unsigned *audio_only, unsigned *pending)
{
	*streaming = *copies = *audio_only = *pending = 0;
	for (const link_t *k = l->sessions; k; k = k->next) {
		if (pps_session_state(k->session) != PPS_SESSION_STREAMING)
			(*pending)++;
		else if (pps_session_audio_only(k->session))
			(*audio_only)++;
		else if (pps_session_copy(k->session))
			(*copies)++;
		else
			(*streaming)++;
	}
}

static void
count_sessions(const pps_listener_t *l, unsigned *streaming, unsigned *pending)
{
	unsigned copies, audio_only;

	count_sessions_by_kind(l, streaming, &copies, &audio_only, pending);
	*streaming += copies + audio_only;
}

static link_t *
find_link(pps_listener_t *l, const pps_session_t *session)
{
	for (link_t *k = l->sessions; k; k = k->next)
		if (k->session == session)
			return k;
	return NULL;
}

/* After a flood of short connections, the memory their sessions took goes
 * back to the system (glibc keeps freed heap otherwise): once this many were
 * freed, at most once a second. */
#define TRIM_AFTER_SESSIONS 512

static void
reap_cb(evutil_socket_t fd, short what, void *user)
{
	pps_listener_t *l = user;
	int64_t now;

	while (l->dead) {
		link_t *k = l->dead;

		l->dead = k->next;
		pps_session_free(k->session);
		free(k);
		l->reaped_since_trim++;
	}
	if (l->reaped_since_trim < TRIM_AFTER_SESSIONS)
		return;
	now = listener_now(l);
	if (now - l->trim_us < 1000000 && now >= l->trim_us)
		return;
	malloc_trim(0);
	l->trim_us = now;
	l->reaped_since_trim = 0;
}

static void
session_closed_cb(pps_session_t *session, void *user)
{
	pps_listener_t *l = user;
	struct timeval now = {0, 0};

	for (link_t **k = &l->sessions; *k; k = &(*k)->next) {
		if ((*k)->session == session) {
			link_t *dead = *k;

			*k = dead->next;
			if (pps_session_state(session) == PPS_SESSION_STREAMING &&
			    l->callbacks.left_cb)
				l->callbacks.left_cb(session, l->user);
			switch (pps_session_bye_reason(session)) {
			case PPS_WIRE_BYE_UNAUTHORIZED:
				l->stats.clients_unauthorized++;
				break;
			case PPS_WIRE_BYE_TOO_SLOW:
				l->stats.clients_evicted++;
				break;
			case PPS_WIRE_BYE_VERSION: /* garbage: not even our version byte */
			case PPS_WIRE_BYE_PROTOCOL:
				if (pps_session_state(session) != PPS_SESSION_STREAMING)
					l->stats.handshakes_dropped++;
				break;
			default:
				break;
			}
			/* Freed from the loop, outside the session's own callbacks. */
			dead->next = l->dead;
			l->dead = dead;
			event_add(l->reap_event, &now);
			return;
		}
	}
}

/* The streaming session stalled longest, if at least the displacement bound. */
static pps_session_t *
most_stalled(const pps_listener_t *l)
{
	pps_session_t *worst = NULL;
	int64_t worst_us = PPS_LISTENER_DISPLACE_STALLED_US - 1;

	for (const link_t *k = l->sessions; k; k = k->next) {
		int64_t stalled_us = pps_session_stalled_us(k->session);

		if (stalled_us > worst_us) {
			worst = k->session;
			worst_us = stalled_us;
		}
	}
	return worst;
}

/* A HELLO arrived: admitted while fewer than max_clients stream, or in place
 * of a client that stopped taking data (PPS_LISTENER_DISPLACE_STALLED_US). */
static bool
session_admit_cb(pps_session_t *session, void *user)
{
	pps_listener_t *l = user;
	unsigned streaming, copies, audio_only, pending;
	pps_session_t *stalled;

	count_sessions_by_kind(l, &streaming, &copies, &audio_only, &pending);
	/* A client's audio connections are not clients: they have a bound of
	 * their own, PPS_LISTENER_AUDIO_PER_CLIENT per client slot. */
	if (pps_session_audio_only(session)) {
		if (audio_only >= l->params.max_clients * PPS_LISTENER_AUDIO_PER_CLIENT)
			return false;
		l->stats.audio_connections_total++;
		return true;
	}
	/* Nor are the copies of a stream, PPS_LISTENER_COPIES_PER_CLIENT per
	 * slot (a copy refused leaves its client the stream's own connection). */
	if (pps_session_copy(session)) {
		if (copies >= l->params.max_clients * PPS_LISTENER_COPIES_PER_CLIENT) {
			log_refusal(l, "refused copy %s: %u copies (max_clients %u x %u)",
			            pps_session_peer(session), copies, l->params.max_clients,
			            PPS_LISTENER_COPIES_PER_CLIENT);
			return false;
		}
		return true;
	}
	if (pps_fanout_guard_busy(&l->guard, listener_now(l))) {
		char why[128];

		snprintf(why, sizeof(why),
		         "server busy: writing a window to its %u clients takes %.0f%% of the time "
		         "between windows",
		         streaming, 100.0 * l->guard.load);
		/* refuse() says it to the client and logs it (rate-limited). */
		pps_session_refuse(session, PPS_WIRE_BYE_SERVER_FULL, why);
		l->stats.clients_refused++;
		l->stats.clients_refused_busy++;
		return false;
	}
	if (streaming < l->params.max_clients) {
		l->stats.clients_total++;
		return true;
	}
	stalled = most_stalled(l);
	if (stalled) {
		char why[96];

		snprintf(why, sizeof(why),
		         "too slow: took no data for %lld ms, displaced by a newcomer",
		         (long long)(pps_session_stalled_us(stalled) / 1000));
		/* Synchronous: closed_cb takes it off the list and counts it. */
		pps_session_refuse(stalled, PPS_WIRE_BYE_TOO_SLOW, why);
		l->stats.clients_total++;
		return true;
	}
	log_refusal(l, "refused %s: server full (max_clients %u)", pps_session_peer(session),
	            l->params.max_clients);
	l->stats.clients_refused++;
	return false;
}

/* The bucket of @host_key, refilled to now; with @create, a new one (in
 * place of a full one, or of the longest idle) if it has none. */
static struct auth_bucket *
auth_bucket(pps_listener_t *l, uint32_t host_key, bool create)
{
	int64_t now = listener_now(l);
	struct auth_bucket *found = NULL, *spare = NULL;

	for (size_t i = 0; i < PPS_LISTENER_AUTH_ADDRESSES; i++) {
		struct auth_bucket *b = &l->auth[i];

		if (b->used) {
			if (now > b->last_us) {
				b->tries += (double)(now - b->last_us) *
				            PPS_LISTENER_AUTH_TRIES_PER_S / 1e6;
				b->last_us = now;
			}
			if (b->tries >= PPS_LISTENER_AUTH_BURST) {
				b->tries = PPS_LISTENER_AUTH_BURST;
				b->used = false; /* full: as good as new */
			}
		}
		if (b->used && b->host_key == host_key)
			found = b;
		else if (!spare || (spare->used && (!b->used || b->last_us < spare->last_us)))
			spare = b;
	}
	if (found || !create)
		return found;
	*spare = (struct auth_bucket){
	    .host_key = host_key, .used = true, .tries = PPS_LISTENER_AUTH_BURST, .last_us = now};
	return spare;
}

static bool
session_auth_try_cb(pps_session_t *session, bool take, int64_t *wait_us, void *user)
{
	pps_listener_t *l = user;
	link_t *k = find_link(l, session);
	struct auth_bucket *b = k ? auth_bucket(l, k->host_key, take) : NULL;

	if (!b)
		return true;
	if (b->tries < 1.0) {
		*wait_us = (int64_t)((1.0 - b->tries) * 1e6 / PPS_LISTENER_AUTH_TRIES_PER_S);
		l->stats.auth_throttled++;
		return false;
	}
	if (take)
		b->tries -= 1.0;
	return true;
}

static void
session_auth_result_cb(pps_session_t *session, bool ok, void *user)
{
	pps_listener_t *l = user;
	link_t *k = find_link(l, session);
	struct auth_bucket *b = k && ok ? auth_bucket(l, k->host_key, false) : NULL;

	if (b && b->tries + 1.0 <= PPS_LISTENER_AUTH_BURST)
		b->tries += 1.0; /* a right token costs nothing */
}

static link_t *copy_owner(pps_listener_t *l, const link_t *k);

static void
arm_recovery_timer(pps_listener_t *l, int64_t when_us)
{
	int64_t wait_us = when_us - listener_now(l);
	struct timeval tv;

	tv = pps_time_us_to_timeval(wait_us);
	event_add(l->recovery_timer, &tv);
}

static void
poll_recovery(pps_listener_t *l)
{
	int64_t when = 0;
	int ret = pps_recovery_poll(l->recovery, listener_now(l), &when);

	if (ret == PPS_RECOVERY_NOW)
		l->callbacks.idr_cb(l->user);
	else if (ret == PPS_RECOVERY_DEFERRED)
		arm_recovery_timer(l, when);
}

static void
recovery_timer_cb(evutil_socket_t fd, short what, void *user)
{
	poll_recovery(user);
}

/* A client joined (it can decode nothing until an IDR) or lost base-layer
 * data (nothing more until the next IDR). */
static void
session_ready_cb(pps_session_t *session, void *user)
{
	pps_listener_t *l = user;
	link_t *k = find_link(l, session);
	int64_t when = 0;
	bool join;
	int ret;

	if (!k)
		return;
	join = !k->joined;
	k->joined = true;
	if (join && l->callbacks.joined_cb)
		l->callbacks.joined_cb(session, l->user);
	/* A copy that rests, of a stream its client decodes from another
	 * connection: its scheduler learns the stream's ADUs from the windows it
	 * rests through, that connection's IDR is this one's too, and what the
	 * copy misses, the stream's own connection brings (it asks for itself).
	 * A copy that carries every window from its join still starts from an
	 * IDR of its own: without one the client lost the first GOP's frames. */
	if (l->params.session.copy_rest && pps_session_copy_may_rest(session) && copy_owner(l, k))
		return;
	/* A relay asks for its viewers, each held to the relay's own bound per
	 * viewer: its requests are heard as joins, held only in time and in
	 * bits. Two viewers joining within 2 s of each other behind one relay
	 * would otherwise wait for the next periodic IDR. */
	ret = pps_recovery_request(l->recovery, &k->recovery, join || pps_session_is_relay(session),
	                           listener_now(l), &when);
	if (ret == PPS_RECOVERY_NOW)
		l->callbacks.idr_cb(l->user);
	else if (ret == PPS_RECOVERY_DEFERRED)
		arm_recovery_timer(l, when);
}

static void
format_host(const struct sockaddr *addr, socklen_t len, char *host, size_t host_size, char *port,
            size_t port_size)
{
	snprintf(host, host_size, "?");
	snprintf(port, port_size, "?");
	if (addr && len)
		getnameinfo(addr, len, host, (socklen_t)host_size, port, (socklen_t)port_size,
		            NI_NUMERICHOST | NI_NUMERICSERV);
}

static uint32_t
host_key_of(const char *host)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *host; host++)
		h = (h ^ (uint8_t)*host) * 16777619u;
	return h;
}

/* Whether bytes from the peer wait in the socket, not read yet. */
static bool
bytes_waiting(int fd)
{
	uint8_t b;

	return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
}

/* Progress in the handshake, for the pool: 0 nothing received, 1 bytes
 * received (TLS or a HELLO under way), 2 HELLO in, waiting for AUTH. */
static unsigned
progress_of(const link_t *k)
{
	unsigned p = pps_session_progress(k->session);

	return p == 0 && k->bytes_seen ? 1 : p;
}

/* A pool candidate: a pending session, or the newcomer (session NULL). */
typedef struct {
	link_t *link;
	unsigned host_count; /* pending connections of its address */
	unsigned progress;
	uint64_t seq;
} candidate_t;

/* Whether @a goes before @b: more of the pool, less progress, older. */
static bool
goes_before(const candidate_t *a, const candidate_t *b)
{
	if (a->host_count != b->host_count)
		return a->host_count > b->host_count;
	if (a->progress != b->progress)
		return a->progress < b->progress;
	return a->seq < b->seq;
}

/*
 * The pool is full: the connection to drop for a newcomer from @host_key
 * (which counts as a pending one of its address). NULL: the newcomer itself.
 * A silent-looking choice is checked for bytes waiting, a few times at most.
 */
static link_t *
pool_victim(pps_listener_t *l, uint32_t host_key, uint64_t newcomer_seq, int newcomer_fd)
{
	candidate_t pool[PPS_LISTENER_MAX_PENDING_LIMIT + 1];
	size_t n = 0;
	bool newcomer_seen = false;

	for (link_t *k = l->sessions; k && n < PPS_LISTENER_MAX_PENDING_LIMIT; k = k->next)
		if (pps_session_state(k->session) != PPS_SESSION_STREAMING)
			pool[n++] =
			    (candidate_t){.link = k, .progress = progress_of(k), .seq = k->seq};
	pool[n++] = (candidate_t){.link = NULL, .seq = newcomer_seq};
	for (size_t i = 0; i < n; i++) {
		uint32_t key = pool[i].link ? pool[i].link->host_key : host_key;

		for (size_t j = 0; j < n; j++)
			if ((pool[j].link ? pool[j].link->host_key : host_key) == key)
				pool[i].host_count++;
	}
	for (int tries = 0;; tries++) {
		candidate_t *v = &pool[0];

		for (size_t i = 1; i < n; i++)
			if (goes_before(&pool[i], v))
				v = &pool[i];
		if (v->progress > 0 || tries == 4)
			return v->link;
		if (v->link ? !bytes_waiting(pps_session_fd(v->link->session))
		            : newcomer_seen || !bytes_waiting(newcomer_fd))
			return v->link;
		if (v->link)
			v->link->bytes_seen = true;
		else
			newcomer_seen = true;
		v->progress = 1;
	}
}

/* A record now, before any session: sealed when the connection is TLS. */
static void
say_now(int fd, pps_tls_t *tls, const pps_wire_record_t *record)
{
	uint8_t buf[PPS_WIRE_HEADER_BYTES + 512];
	size_t n;

	if (!tls) {
		(void)pps_server_write_record_now(fd, record);
		return;
	}
	if (pps_wire_encode(record, buf, sizeof(buf), &n) == 0)
		(void)pps_tls_send(tls, buf, n);
}

int
pps_listener_add(pps_listener_t *l, int fd, const struct sockaddr *addr, socklen_t addr_len)
{
	return pps_listener_add_with_input(l, fd, addr, addr_len, NULL, 0);
}

int
pps_listener_add_with_input(pps_listener_t *l, int fd, const struct sockaddr *addr,
                            socklen_t addr_len, const uint8_t *input, size_t input_len)
{
	return pps_listener_add_routed(l, fd, addr, addr_len, NULL, input, input_len);
}

void
pps_listener_set_audio_transport(pps_listener_t *l, uint8_t transport)
{
	l->params.session.stream_info.audio_transport = transport;
}

int
pps_listener_add_routed(pps_listener_t *l, int fd, const struct sockaddr *addr, socklen_t addr_len,
                        pps_tls_t *tls, const uint8_t *input, size_t input_len)
{
	link_t *k;
	pps_session_t *session;
	char host[NI_MAXHOST], port[NI_MAXSERV], why[128];
	unsigned streaming = 0, pending = 0, same_host = 0;
	bool full, host_streams = false;
	unsigned max_pending =
	    l->params.max_pending ? l->params.max_pending : l->params.max_clients;

	if (max_pending > PPS_LISTENER_MAX_PENDING_LIMIT)
		max_pending = PPS_LISTENER_MAX_PENDING_LIMIT;

	format_host(addr, addr_len, host, sizeof(host), port, sizeof(port));
	for (k = l->sessions; k; k = k->next) {
		if (pps_session_state(k->session) == PPS_SESSION_STREAMING) {
			/* Audio connections and copies have their own bounds, at HELLO. */
			if (!pps_session_audio_only(k->session) && !pps_session_copy(k->session)) {
				streaming++;
				if (strcmp(k->host, host) == 0)
					host_streams = true;
			}
		} else {
			pending++;
		}
		if (strcmp(k->host, host) == 0)
			same_host++;
	}
	/* Full, unless a stalled client can make room at HELLO (most_stalled),
	 * or this address has a client streaming: its audio connections and
	 * copies come from there, and HELLO tells them from another client. */
	full = streaming >= l->params.max_clients && !most_stalled(l) && !host_streams;
	if (full || same_host >= l->params.max_per_address) {
		pps_wire_record_t bye = {.kind = PPS_WIRE_BYE};

		bye.u.bye.reason = PPS_WIRE_BYE_SERVER_FULL;
		if (full)
			snprintf(why, sizeof(why), "server full (%u clients)",
			         l->params.max_clients);
		else
			snprintf(why, sizeof(why), "too many connections from %.64s (max %u)", host,
			         l->params.max_per_address);
		bye.u.bye.text_len =
		    (uint8_t)snprintf(bye.u.bye.text, sizeof(bye.u.bye.text), "%s", why);
		say_now(fd, tls, &bye);
		pps_tls_free(tls);
		log_refusal(l, "refused %s:%s: %s", host, port, why);
		l->stats.clients_refused++;
		close(fd);
		return -EBUSY;
	}
	if (pending >= max_pending) {
		link_t *victim = pool_victim(l, host_key_of(host), l->next_seq, fd);

		if (!victim) {
			/* Nothing said yet, and the pool is no fairer without it: its
			 * refusal costs no more than the accept. */
			log_refusal(l, "refused %s:%s: handshake pool full (%u pending)", host,
			            port, pending);
			l->stats.handshakes_dropped++;
			pps_tls_free(tls);
			close(fd);
			return -EBUSY;
		}
		pps_session_refuse(victim->session, PPS_WIRE_BYE_PROTOCOL,
		                   "handshake not done and a newer connection needs the slot");
	}
	/* A client says a few small records a second: a receive buffer of its
	 * size, so that a peer that floods fills it at once and waits, instead
	 * of parking megabytes in the kernel (autotuning grows it to 6 MB). */
	(void)pps_socket_set_rcvbuf(fd, PPS_LISTENER_RCVBUF_BYTES);
	k = calloc(1, sizeof(*k));
	session = k ? pps_session_new(l->base, fd, addr, addr_len, ++l->next_id, &l->params.session,
	                              tls, session_ready_cb, session_closed_cb, l)
	            : (pps_tls_free(tls), NULL);
	tls = NULL; /* the session's, or freed */
	if (!session) {
		int ret = k ? -errno : -ENOMEM;

		pps_log(&l->peer_log, PPS_LOG_ERROR, "cannot accept a client: %s", strerror(-ret));
		free(k);
		close(fd);
		return ret;
	}
	k->session = session;
	snprintf(k->host, sizeof(k->host), "%s", host);
	k->host_key = host_key_of(host);
	k->seq = l->next_seq++;
	k->next = l->sessions;
	l->sessions = k;
	l->stats.connections_total++;
	if (input_len)
		pps_session_input(session, input, input_len);
	return 0;
}

/*
 * New connections, PPS_LISTENER_ACCEPTS_PER_WAKEUP at most per wake-up: the
 * listening socket is level-triggered, so a connect flood gets its turn of
 * the loop like any other socket, and the sessions it displaced are freed
 * (reap_event) before the next batch. A failed accept (out of descriptors)
 * pauses accepting for PPS_LISTENER_ACCEPT_PAUSE_US rather than waking the
 * loop in vain until a descriptor is free.
 */
static void
accept_cb(evutil_socket_t fd, short what, void *user)
{
	pps_listener_t *l = user;

	for (unsigned i = 0; i < PPS_LISTENER_ACCEPTS_PER_WAKEUP; i++) {
		struct sockaddr_storage addr;
		socklen_t len = sizeof(addr);
		int cfd = accept4(fd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0) {
			struct timeval pause = pps_time_us_to_timeval(PPS_LISTENER_ACCEPT_PAUSE_US);

			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
			    errno == ECONNABORTED)
				return;
			pps_log(&l->peer_log, PPS_LOG_ERROR, "accept: %s; accepting again in %d ms",
			        strerror(errno), PPS_LISTENER_ACCEPT_PAUSE_US / 1000);
			event_del(l->accept_event);
			event_add(l->accept_resume, &pause);
			return;
		}
		pps_listener_add(l, cfd, (struct sockaddr *)&addr, len);
	}
}

static void
accept_resume_cb(evutil_socket_t fd, short what, void *user)
{
	pps_listener_t *l = user;

	event_add(l->accept_event, NULL);
}

pps_listener_t *
pps_listener_new(struct event_base *base, const pps_listener_params_t *params,
                 const pps_listener_callbacks_t *callbacks, void *user)
{
	pps_listener_t *l;

	if (!base || !params || !callbacks || !callbacks->idr_cb || params->max_clients == 0 ||
	    params->max_per_address == 0) {
		errno = EINVAL;
		return NULL;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		goto err;
	l->base = base;
	l->params = *params;
	l->params.session.admit_cb = session_admit_cb;
	l->params.session.auth_try_cb = session_auth_try_cb;
	l->params.session.auth_result_cb = session_auth_result_cb;
	l->peer_log_limit.clock_cb = limit_clock_cb;
	l->peer_log_limit.clock_user = l;
	pps_log_limit_init(&l->peer_log_limit, &params->log, PPS_LOG_LIMIT_LINES_PER_S,
	                   PPS_LOG_LIMIT_BURST);
	l->peer_log = pps_log_limit_log(&l->peer_log_limit);
	l->params.session.log = l->peer_log;
	l->callbacks = *callbacks;
	l->user = user;
	l->recovery = pps_recovery_new(&params->recovery);
	if (!l->recovery)
		goto err_free;
	l->listen_fd = -1;
	l->reap_event = evtimer_new(base, reap_cb, l);
	l->recovery_timer = evtimer_new(base, recovery_timer_cb, l);
	if (!l->reap_event || !l->recovery_timer) {
		errno = ENOMEM;
		goto err_free;
	}
	return l;

err_free:
	pps_listener_free(l);
err:
	if (errno != EINVAL)
		errno = ENOMEM;
	return NULL;
}

/* True for 127.0.0.0/8 and ::1 (and v4-mapped loopback). */
static bool
is_loopback(const struct sockaddr *addr)
{
	if (addr->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)addr)->sin_addr.s_addr) >> 24) == 127;
	if (addr->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)addr)->sin6_addr;

		if (IN6_IS_ADDR_LOOPBACK(a))
			return true;
		return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
	}
	return false;
}

/* True for 0.0.0.0 and :: (every address of the host). */
static bool
is_wildcard(const struct sockaddr *addr)
{
	if (addr->sa_family == AF_INET)
		return ((const struct sockaddr_in *)addr)->sin_addr.s_addr == htonl(INADDR_ANY);
	if (addr->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)addr)->sin6_addr);
	return false;
}

/*
 * Where a browser finds the viewer page this listener serves: the bound
 * address (localhost for a wildcard one). A browser on another machine
 * decodes only over https: WebCodecs exists in a secure context alone, and
 * plain http is one only on loopback.
 */
static void
announce_viewer(pps_listener_t *l, const struct sockaddr *bound, const char *host, const char *port)
{
	bool wildcard = is_wildcard(bound), v6 = !wildcard && strchr(host, ':');
	const char *note = "";

	if (wildcard)
		note = l->tls_ctx ? " (from another machine: this host's name)"
		                  : " (from another machine: this host's name over https, which "
		                    "needs [server] tls_cert and tls_key)";
	else if (!is_loopback(bound) && !l->tls_ctx)
		note = " (a browser decodes this only over https: [server] tls_cert and tls_key)";
	pps_log(&l->params.log, PPS_LOG_INFO, "viewer: %s://%s%s%s:%s/%s",
	        l->tls_ctx ? "https" : "http", v6 ? "[" : "", wildcard ? "localhost" : host,
	        v6 ? "]" : "", port, note);
}

int
pps_listener_listen(pps_listener_t *l, const char *listen_at, unsigned *port_out, char *err,
                    size_t err_size)
{
	struct sockaddr_storage bound;
	socklen_t bound_len = sizeof(bound);
	char bhost[NI_MAXHOST], bport[NI_MAXSERV], why[512];
	const char *token = l->params.session.access_token;
	int ret;

	if (l->params.tls_cert && l->params.tls_cert[0] && !l->tls_ctx) {
		l->tls_ctx =
		    pps_tls_ctx_new_server(l->params.tls_cert, l->params.tls_key, why, sizeof(why));
		if (!l->tls_ctx) {
			snprintf(err, err_size, "[server] tls_cert/tls_key: %s", why);
			return -EINVAL;
		}
		l->params.session.tls_ctx = l->tls_ctx;
	}
	ret = pps_socket_listen_tcp(listen_at, PPS_LISTENER_BACKLOG, why, sizeof(why));
	if (ret < 0) {
		snprintf(err, err_size, "[server] %s", why);
		return ret;
	}
	l->listen_fd = ret;
	/* Best effort: without it, silent connections reach the pool at once. */
	(void)setsockopt(l->listen_fd, IPPROTO_TCP, TCP_DEFER_ACCEPT,
	                 &(int){PPS_LISTENER_DEFER_ACCEPT_S}, sizeof(int));
	l->accept_event = event_new(l->base, l->listen_fd, EV_READ | EV_PERSIST, accept_cb, l);
	l->accept_resume = evtimer_new(l->base, accept_resume_cb, l);
	if (!l->accept_event || !l->accept_resume || event_add(l->accept_event, NULL) < 0) {
		snprintf(err, err_size, "cannot listen on %s: out of memory", listen_at);
		return -ENOMEM;
	}
	getsockname(l->listen_fd, (struct sockaddr *)&bound, &bound_len);
	getnameinfo((struct sockaddr *)&bound, bound_len, bhost, sizeof(bhost), bport,
	            sizeof(bport), NI_NUMERICHOST | NI_NUMERICSERV);
	*port_out = (unsigned)strtoul(bport, NULL, 10);
	pps_log(&l->params.log, PPS_LOG_INFO, "listening on %s%s%s:%s",
	        strchr(bhost, ':') ? "[" : "", bhost, strchr(bhost, ':') ? "]" : "", bport);
	announce_viewer(l, (struct sockaddr *)&bound, bhost, bport);
	if (!is_loopback((struct sockaddr *)&bound) && !(token && token[0]))
		pps_log(&l->params.log, PPS_LOG_WARNING,
		        "listening beyond loopback without [server] access_token: anyone who "
		        "reaches %s can take the stream",
		        listen_at);
	if (!is_loopback((struct sockaddr *)&bound) && !l->tls_ctx)
		pps_log(&l->params.log, PPS_LOG_WARNING,
		        "listening beyond loopback without TLS ([server] tls_cert, tls_key): the "
		        "stream crosses the network unencrypted");
	return 0;
}

/* A whole window's bits for the recovery bounds. */
static void
count_recovery(pps_listener_t *l, const pps_window_t *window)
{
	pps_recovery_window_t rw = {.now_us = listener_now(l)};
	size_t n = pps_window_adu_count(window);

	for (size_t i = 0; i < n; i++) {
		const pps_adu_t *adu = pps_window_adu(window, i);
		const pps_adu_info_t *info = pps_adu_info(adu);
		uint64_t bits = 8 * (uint64_t)pps_adu_size(adu);

		rw.bits += bits;
		if (info->frame_type == PPS_ADU_FRAME_IDR) {
			if (!rw.idr_bits || info->capture_us < rw.idr_capture_us)
				rw.idr_capture_us = info->capture_us;
			rw.idr_bits += bits;
		}
	}
	rw.frames = pps_window_frames(window);
	rw.duration_us = (int64_t)rw.frames * l->params.frame_duration_us;
	pps_recovery_add_window(l->recovery, &rw);
}

/* The fan-out guard's account of one write-out (@t0: CLOCK_MONOTONIC at its start). */
static void
note_fanout(pps_listener_t *l, pps_window_t *window, int64_t t0)
{
	int64_t spent = pps_time_monotonic_us() - t0;

	unsigned streaming, pending;

	if (!pps_fanout_guard_note(&l->guard, pps_window_id(window),
	                           pps_window_first_capture_us(window), spent, listener_now(l)))
		return;
	count_sessions(l, &streaming, &pending);
	pps_log(&l->params.log, PPS_LOG_WARNING,
	        "busy: writing a window to %u clients takes %.0f%% of the time between windows "
	        "(the last: %lld of %lld ms); newcomers are refused until it takes less",
	        streaming, 100.0 * l->guard.load, (long long)(l->guard.last_spent_us / 1000),
	        (long long)(l->guard.interval_us / 1000));
}

static int link_host_cmp(const link_t *x, const link_t *y);

/* The most copies a client opens besides its own connection (client.copies
 * is at most 4): a later one waits as long as the third. */
#define PPS_LISTENER_COPY_RANK_MAX 3

/* How long a window waits before it goes to @k: a copy of the stream waits
 * copy_spacing for each copy from its address accepted before it, itself
 * included. The rank is taken once, when the copy's first window comes. */
static int64_t
copy_delay_us(pps_listener_t *l, link_t *k)
{
	int64_t spacing = l->params.session.copy_spacing_us;

	if (spacing <= 0 || !pps_session_copy(k->session))
		return 0;
	if (!k->copy_rank) {
		unsigned rank = 1;

		for (link_t *o = l->sessions; o; o = o->next)
			if (o != k && o->seq < k->seq && pps_session_copy(o->session) &&
			    !link_host_cmp(o, k))
				rank++;
		k->copy_rank =
		    rank < PPS_LISTENER_COPY_RANK_MAX ? rank : PPS_LISTENER_COPY_RANK_MAX;
	}
	return spacing * k->copy_rank;
}

/* How long a copy carries the windows after the last sign that it helps. */
#define PPS_LISTENER_COPY_AWAKE_US 10000000
/* Seconds with a retransmission on the stream's own connection, of the
 * path estimate's last few (PPS_PATH_RETRANS_SECONDS), that say its queue
 * is shared. */
#define PPS_LISTENER_COPY_LOSS_SECONDS 3

/* The stream's own connection a copy belongs to: the latest one from its
 * address accepted before it that is neither a copy nor audio only. */
static link_t *
copy_owner(pps_listener_t *l, const link_t *k)
{
	link_t *best = NULL;

	for (link_t *o = l->sessions; o; o = o->next)
		if (o->seq < k->seq && (!best || o->seq > best->seq) &&
		    pps_session_state(o->session) == PPS_SESSION_STREAMING &&
		    !pps_session_copy(o->session) && !pps_session_audio_only(o->session) &&
		    !link_host_cmp(o, k))
			best = o;
	return best;
}

/*
 * Whether copy @k, awake, makes the losses it was woken for: each
 * PPS_LISTENER_COPY_CHECK_US it carries is judged by
 * pps_listener_copy_check() on the stream's own connection and the copy
 * together. A copy that fails rests for a hold that doubles each time it
 * fails again after one (pps_listener_copy_next_hold_us()); a check it
 * passes clears the hold. (The stream's own connection alone, at rest, would
 * tell nothing: beside 20 cubic flows it retransmitted 56% of the bytes of
 * its first 3 s.)
 */
static void
copy_self_check(pps_listener_t *l, link_t *k, const pps_path_estimate_t *own, int64_t now)
{
	pps_path_estimate_t c;
	uint64_t retrans, bytes, dr, db;
	uint32_t mss = own->mss_bytes; /* set with every valid estimate */

	pps_session_get_path(k->session, &c);
	if (!c.valid) {
		k->copy_check_us = 0; /* the copy's reading joins the next check */
		return;
	}
	retrans = own->retrans_pkts + c.retrans_pkts;
	bytes = own->bytes_acked + c.bytes_acked;
	if (!k->copy_check_us || retrans < k->copy_check_retrans || bytes < k->copy_check_bytes) {
		k->copy_check_us = now;
		k->copy_check_retrans = retrans;
		k->copy_check_bytes = bytes;
		return;
	}
	if (now - k->copy_check_us < PPS_LISTENER_COPY_CHECK_US)
		return;
	dr = retrans - k->copy_check_retrans;
	db = bytes - k->copy_check_bytes;
	k->copy_check_us = now;
	k->copy_check_retrans = retrans;
	k->copy_check_bytes = bytes;
	switch (pps_listener_copy_check(dr, db, mss, own->queue_delay_us)) {
	case PPS_COPY_CHECK_UNDECIDED:
		return;
	case PPS_COPY_CHECK_PASSED:
		k->copy_hold_us = 0;
		return;
	case PPS_COPY_CHECK_FAILED:
		break;
	}
	k->copy_hold_us = pps_listener_copy_next_hold_us(k->copy_hold_us);
	k->copy_held_until_us = now + k->copy_hold_us;
	k->copy_awake_until_us = 0;
	k->copy_check_us = 0;
	pps_log(&l->peer_log, PPS_LOG_INFO,
	        "client %s: a copy of the stream rests for %" PRId64
	        " s (%.0f%% of the bytes retransmitted with it awake: "
	        "the stream fills the path's queue itself)",
	        k->host, k->copy_hold_us / 1000000, 100.0 * (double)(dr * mss) / (double)db);
}

pps_copy_check_t
pps_listener_copy_check(uint64_t retrans_pkts, uint64_t bytes, uint32_t mss,
                        uint32_t queue_delay_us)
{
	if (bytes < (uint64_t)PPS_LISTENER_COPY_CHECK_MIN_PKTS * mss)
		return PPS_COPY_CHECK_UNDECIDED;
	if (retrans_pkts * mss * 100 > bytes * PPS_LISTENER_COPY_SELF_LOSS_PCT &&
	    queue_delay_us >= PPS_LISTENER_COPY_CALM_QUEUE_US)
		return PPS_COPY_CHECK_FAILED;
	return PPS_COPY_CHECK_PASSED;
}

int64_t
pps_listener_copy_next_hold_us(int64_t hold_us)
{
	if (hold_us <= 0)
		return PPS_LISTENER_COPY_HOLD_US;
	return hold_us < PPS_LISTENER_COPY_HOLD_MAX_US / 2 ? 2 * hold_us
	                                                   : PPS_LISTENER_COPY_HOLD_MAX_US;
}

/*
 * Whether copy @k carries this window (copy_rest). A copy helps where a loss
 * on one connection is not on the others and comes again and again: after
 * the stream's own connection retransmitted with no queue of its own (a
 * lossy path), while it retransmits in PPS_LISTENER_COPY_LOSS_SECONDS of the
 * last few seconds (a queue shared with loss-based flows drops its packets
 * 2-4 times a second; a capacity step down costs the stream alone a burst
 * in a second or two, and then its own queue is what a copy would share),
 * or while its latency cap's test found the queue held by others; for
 * PPS_LISTENER_COPY_AWAKE_US after the last sign, unless copy_self_check()
 * finds the copy making the losses itself. Elsewhere a copy only halves
 * what each connection gets, and rests.
 */
static bool
copy_awake(pps_listener_t *l, link_t *k, int64_t now)
{
	pps_path_estimate_t e;
	link_t *own;

	if (!l->params.session.copy_rest || !pps_session_copy_may_rest(k->session))
		return true;
	own = copy_owner(l, k);
	if (!own)
		return true; /* nothing speaks for the path: the copy does its job */
	pps_session_get_path(own->session, &e);
	if (!e.valid)
		return now < k->copy_awake_until_us;
	if (now >= k->copy_held_until_us) {
		if (e.others_confirmed)
			k->copy_awake_until_us = now + PPS_LISTENER_COPY_AWAKE_US;
		if (k->copy_retrans_read && e.retrans_pkts > k->copy_retrans &&
		    (e.queue_delay_us < PPS_LISTENER_COPY_CALM_QUEUE_US ||
		     e.retrans_seconds >= PPS_LISTENER_COPY_LOSS_SECONDS))
			k->copy_awake_until_us = now + PPS_LISTENER_COPY_AWAKE_US;
	}
	k->copy_retrans_read = true;
	k->copy_retrans = e.retrans_pkts;
	if (now < k->copy_awake_until_us)
		copy_self_check(l, k, &e, now);
	else
		k->copy_check_us = 0;
	return now < k->copy_awake_until_us;
}

void
pps_listener_push_window(pps_listener_t *l, pps_window_t *window)
{
	int64_t t0 = pps_time_monotonic_us();

	if (!pps_window_is_open(window))
		count_recovery(l, window);
	for (link_t *k = l->sessions, *next; k; k = next) {
		next = k->next; /* a push may close (and unlink) this session */
		if (pps_session_state(k->session) != PPS_SESSION_STREAMING)
			continue;
		if (copy_awake(l, k, t0))
			pps_session_push_window_later(k->session, window, copy_delay_us(l, k));
		else
			pps_session_rest_window(k->session, window);
	}
	note_fanout(l, window, t0);
}

/* One pooled audio connection, for the choice of which get a frame. */
typedef struct pooled_audio {
	link_t *link;
	uint32_t pool;
	unsigned rank;  /* 0 idle, 1 busy, 2 overdue (its oldest frame likely lost) */
	size_t backlog; /* bytes not yet acknowledged */
	int64_t age_us; /* of its oldest unacknowledged frame */
	uint32_t rest;  /* frames since it last carried one (UINT32_MAX: never) */
} pooled_t;

/* How often a pooled connection's loss is read (frames), and the pool's
 * loss above which each frame goes on two, and on three, of its
 * connections (at most STREAM_INFO's audio_copies). A clean path takes one
 * copy: the pool still keeps it off a connection held up by a loss, and
 * copies would only queue on a thin path. */
#define PPS_LISTENER_POOL_LOSS_FRAMES 25
#define PPS_LISTENER_POOL_LOSS_TWO    0.005
#define PPS_LISTENER_POOL_LOSS_THREE  0.03

/* Reads the connection's retransmissions since the last reading, over the
 * frames it carried since (a thin stream: a packet a frame), into its
 * smoothed loss (a quarter weight per reading). */
static void
read_pool_loss(link_t *k, uint32_t seq)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (k->audio_loss_read && seq - k->audio_loss_seq < PPS_LISTENER_POOL_LOSS_FRAMES)
		return;
	memset(&ti, 0, sizeof(ti));
	if (getsockopt(pps_session_fd(k->session), IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return;
	if (k->audio_loss_read && k->audio_frames > k->audio_frames_read) {
		double sample = (double)(ti.tcpi_total_retrans - k->audio_retrans) /
		                (double)(k->audio_frames - k->audio_frames_read);

		k->audio_loss = 0.75 * k->audio_loss + 0.25 * (sample < 1 ? sample : 1);
	}
	k->audio_loss_read = true;
	k->audio_loss_seq = seq;
	k->audio_retrans = ti.tcpi_total_retrans;
	k->audio_frames_read = k->audio_frames;
}

/* Orders connections by their address (its hash first, then the address):
 * 0 for two of one address. */
static int
link_host_cmp(const link_t *x, const link_t *y)
{
	if (x->host_key != y->host_key)
		return x->host_key < y->host_key ? -1 : 1;
	return strcmp(x->host, y->host);
}

static int
pooled_cmp(const void *a, const void *b)
{
	const pooled_t *x = a, *y = b;
	int host = link_host_cmp(x->link, y->link);

	if (host)
		return host;
	if (x->pool != y->pool)
		return x->pool < y->pool ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->rank == 2 && x->age_us != y->age_us)
		return x->age_us < y->age_us ? -1 : 1;
	if (x->backlog != y->backlog)
		return x->backlog < y->backlog ? -1 : 1;
	return x->rest > y->rest ? -1 : x->rest < y->rest;
}

/* One streaming connection, for copies_off_review(). */
typedef struct audio_peer {
	link_t *link;
	bool audio; /* an audio-only connection outside a pool; else a client's video */
} audio_peer_t;

static int
audio_peer_cmp(const void *a, const void *b)
{
	const audio_peer_t *x = a, *y = b;
	int host = link_host_cmp(x->link, y->link);

	if (host)
		return host;
	if (x->audio != y->audio)
		return x->audio ? -1 : 1;
	return x->link->seq < y->link->seq ? -1 : x->link->seq > y->link->seq;
}

/*
 * Every PPS_LISTENER_POOL_LOSS_FRAMES frames: for each address with one
 * client (one video connection, its copies aside) and two or more audio
 * connections outside a pool, whether the later ones carry copies. The first one's
 * retransmissions per frame decide: above audio_copies_off_loss the copies
 * stop (a queue so short in packets that the audio's own copies fill it:
 * measured, a 0.5 Mbit/s path with a 3-packet queue retransmitted 10-13%
 * of frames with the copies, a path shared with 20 TCP flows 4-9%, 1%
 * random loss 0-2%), below half of it they resume. Where one address has
 * several clients the connections cannot be told apart: every one carries
 * every frame, as before. Sorting once per review keeps the per-frame cost
 * at a flag per connection.
 */
static void
copies_off_review(pps_listener_t *l)
{
	double off = l->params.session.audio_copies_off_loss;
	size_t n = 0;

	for (link_t *k = l->sessions; k; k = k->next) {
		k->audio_withheld = false;
		/* A copy of the stream is the same client's video: not counted. */
		if (off <= 0 || pps_session_state(k->session) != PPS_SESSION_STREAMING ||
		    pps_session_audio_pool(k->session) || pps_session_copy(k->session))
			continue;
		if (n == l->peers_size) {
			size_t size = l->peers_size ? 2 * l->peers_size : 16;
			audio_peer_t *grown = realloc(l->peers, size * sizeof(*grown));

			if (!grown)
				return; /* every connection carries every frame */
			l->peers = grown;
			l->peers_size = size;
		}
		l->peers[n++] =
		    (audio_peer_t){.link = k, .audio = pps_session_audio_only(k->session)};
	}
	if (n == 0)
		return;
	qsort(l->peers, n, sizeof(*l->peers), audio_peer_cmp);
	for (size_t i = 0; i < n;) {
		size_t end = i, audio = 0, video = 0;
		link_t *first = l->peers[i].link;

		while (end < n && link_host_cmp(l->peers[end].link, first) == 0) {
			if (l->peers[end].audio)
				audio++;
			else
				video++;
			end++;
		}
		if (audio >= 2 && video == 1 && l->peers[i].audio) {
			if (!first->audio_copies_off && first->audio_loss > off) {
				first->audio_copies_off = true;
				pps_log(&l->peer_log, PPS_LOG_INFO,
				        "client %s: audio copies off (%.1f%% of its frames "
				        "retransmitted: "
				        "the audio fills the path's queue)",
				        first->host, 100 * first->audio_loss);
			} else if (first->audio_copies_off && first->audio_loss < off / 2) {
				first->audio_copies_off = false;
				pps_log(&l->peer_log, PPS_LOG_INFO,
				        "client %s: audio copies on again (%.1f%% retransmitted)",
				        first->host, 100 * first->audio_loss);
			}
			for (size_t j = i + 1; j < i + audio; j++)
				l->peers[j].link->audio_withheld = first->audio_copies_off;
		}
		i = end;
	}
}

/* A frame goes to every audio connection outside a pool; each pool's
 * connections (one client's: same address, same pool number) get it on
 * up to audio_copies of them (one on a clean path, two or three as the pool's
 * connections retransmit more): idle ones first (nothing unacknowledged: nothing
 * written there can wait behind a lost packet), of those the one that rested
 * longest; then busy ones, least unacknowledged first; last the overdue
 * (their oldest frame unacknowledged for more than a round trip: likely lost,
 * and what is written there waits for its retransmission), youngest first;
 * each later copy audio_copy_spacing_us after the one before. */
void
pps_listener_push_audio(pps_listener_t *l, const pps_wire_audio_frame_t *frame)
{
	unsigned copies = l->params.session.stream_info.audio_copies;
	int64_t now_us = pps_time_monotonic_us();
	pps_session_audio_state_t state;
	size_t n = 0;

	for (link_t *k = l->sessions, *next; k; k = next) {
		next = k->next;
		if (copies && pps_session_audio_pool(k->session) &&
		    pps_session_state(k->session) == PPS_SESSION_STREAMING) {
			if (n == l->pooled_size) {
				size_t size = l->pooled_size ? 2 * l->pooled_size : 16;
				pooled_t *grown = realloc(l->pooled, size * sizeof(*grown));

				if (!grown) {
					/* Without room to choose, this one gets every frame. */
					pps_session_push_audio(k->session, frame);
					continue;
				}
				l->pooled = grown;
				l->pooled_size = size;
			}
			pps_session_audio_state(k->session, now_us, &state);
			read_pool_loss(k, frame->seq);
			l->pooled[n] = (pooled_t){
			    .link = k,
			    .pool = pps_session_audio_pool(k->session),
			    .rank = state.backlog_bytes == 0 ? 0
			            : state.overdue          ? 2
			                                     : 1,
			    .backlog = state.backlog_bytes,
			    .age_us = state.oldest_age_us,
			    .rest = k->audio_carried ? frame->seq - k->audio_last_seq : UINT32_MAX,
			};
			n++;
			continue;
		}
		if (pps_session_audio_only(k->session) && !pps_session_audio_pool(k->session) &&
		    pps_session_state(k->session) == PPS_SESSION_STREAMING) {
			/* Outside a pool: its retransmissions are read as a pool's
			 * are, for copies_off_review() (when the rule is on). */
			if (l->params.session.audio_copies_off_loss > 0)
				read_pool_loss(k, frame->seq);
			if (k->audio_withheld)
				continue;
			k->audio_frames++;
		}
		pps_session_push_audio(k->session, frame);
	}
	if (frame->seq % PPS_LISTENER_POOL_LOSS_FRAMES == 0)
		copies_off_review(l);
	if (n == 0)
		return;
	qsort(l->pooled, n, sizeof(*l->pooled), pooled_cmp);
	for (size_t i = 0; i < n;) {
		size_t end = i + 1;
		double loss = l->pooled[i].link->audio_loss;
		unsigned want;

		while (end < n && l->pooled[end].pool == l->pooled[i].pool &&
		       link_host_cmp(l->pooled[end].link, l->pooled[i].link) == 0)
			loss += l->pooled[end++].link->audio_loss;
		loss /= (double)(end - i);
		want =
		    1 + (loss > PPS_LISTENER_POOL_LOSS_TWO) + (loss > PPS_LISTENER_POOL_LOSS_THREE);
		if (want > copies)
			want = copies;
		for (size_t j = i; j < end && j - i < want; j++) {
			l->pooled[j].link->audio_carried = true;
			l->pooled[j].link->audio_last_seq = frame->seq;
			l->pooled[j].link->audio_frames++;
			pps_session_push_audio_later(l->pooled[j].link->session, frame,
			                             (int64_t)(j - i) *
			                                 l->params.session.audio_copy_spacing_us);
		}
		i = end;
	}
}

void
pps_listener_window_grew(pps_listener_t *l, pps_window_t *window)
{
	int64_t t0 = pps_time_monotonic_us();

	if (!pps_window_is_open(window))
		count_recovery(l, window);
	for (link_t *k = l->sessions, *next; k; k = next) {
		next = k->next;
		pps_session_window_grew(k->session);
	}
	note_fanout(l, window, t0);
}

void
pps_listener_check_timeouts(pps_listener_t *l)
{
	for (link_t *k = l->sessions, *next; k; k = next) {
		next = k->next;
		pps_session_check_timeouts(k->session);
	}
	poll_recovery(l);
}

void
pps_listener_foreach(pps_listener_t *l, pps_listener_session_cb cb, void *user)
{
	for (link_t *k = l->sessions; k; k = k->next)
		cb(k->session, user);
}

void
pps_listener_say_bye_all(pps_listener_t *l, pps_wire_bye_reason_t reason, const char *text)
{
	for (link_t *k = l->sessions; k; k = k->next)
		pps_session_say_bye(k->session, reason, text);
}

void
pps_listener_get_stats(const pps_listener_t *l, pps_listener_stats_t *stats)
{
	*stats = l->stats;
	stats->log_lines_unlogged = l->peer_log_limit.unlogged_total;
	count_sessions(l, &stats->streaming, &stats->sessions);
	stats->sessions += stats->streaming;
	pps_recovery_get_stats(l->recovery, &stats->recovery);
}

void
pps_listener_free(pps_listener_t *l)
{
	if (!l)
		return;
	if (l->accept_event)
		event_free(l->accept_event);
	if (l->accept_resume)
		event_free(l->accept_resume);
	if (l->listen_fd >= 0)
		close(l->listen_fd);
	while (l->sessions) {
		link_t *k = l->sessions;

		l->sessions = k->next;
		pps_session_free(k->session);
		free(k);
	}
	reap_cb(-1, 0, l);
	pps_log_limit_flush(&l->peer_log_limit);
	if (l->reap_event)
		event_free(l->reap_event);
	if (l->recovery_timer)
		event_free(l->recovery_timer);
	pps_recovery_free(l->recovery);
	pps_tls_ctx_free(l->tls_ctx);
	free(l->pooled);
	free(l->peers);
	free(l);
}

bool
pps_listener_raise_fd_limit(const pps_listener_params_t *params, char *why, size_t why_size)
{
	unsigned long pending = params->max_pending ? params->max_pending : params->max_clients;
	/* Every admitted client with its audio connections and copies, the
	 * handshakes, and a margin for the rest of the process. */
	unsigned long need =
	    (unsigned long)params->max_clients *
	        (1 + PPS_LISTENER_AUDIO_PER_CLIENT + PPS_LISTENER_COPIES_PER_CLIENT) +
	    pending + 64;
	unsigned long have = pps_socket_raise_fd_limit();

	if (have >= need)
		return true;
	snprintf(why, why_size,
	         "the open-files limit (%lu) is below what server.max_clients %u may need (%lu); "
	         "raise it (ulimit -n) or lower max_clients",
	         have, params->max_clients, need);
	return false;
}

bool
pps_fanout_guard_note(pps_fanout_guard_t *g, uint32_t window_id, int64_t first_capture_us,
                      int64_t spent_us, int64_t now_us)
{
	bool was_busy = pps_fanout_guard_busy(g, now_us), over = false;

	if (!g->have_window || window_id != g->window_id) {
		int64_t interval = first_capture_us - g->first_capture_us;

		/* The window written out is whole: its share of the interval goes
		 * into the smoothed load (one costly window, such as a joiner's
		 * IDR, does not make the loop busy; a run of them does). */
		if (g->have_window && g->interval_us > 0) {
			double share = (double)g->spent_us / (double)g->interval_us;

			g->load += (share - g->load) / PPS_FANOUT_LOAD_WINDOWS;
			g->last_spent_us = g->spent_us;
			over = g->load * 100 >= PPS_FANOUT_BUSY_PCT;
		}
		/* A gap (a stream that paused, or restarted) is not an interval. */
		g->interval_us =
		    g->have_window && interval > 0 && interval <= 10000000 ? interval : 0;
		g->have_window = true;
		g->window_id = window_id;
		g->first_capture_us = first_capture_us;
		g->spent_us = 0;
	}
	g->spent_us += spent_us > 0 ? spent_us : 0;
	/* Far behind on this very window: no need to wait for the average. */
	if (g->interval_us > 0 && g->spent_us >= 2 * g->interval_us) {
		g->last_spent_us = g->spent_us;
		over = true;
	}
	if (!over)
		return false;
	g->busy_until_us = now_us + PPS_FANOUT_BUSY_HOLD_US;
	if (was_busy)
		return false;
	g->episodes++;
	return true;
}

bool
pps_fanout_guard_busy(const pps_fanout_guard_t *g, int64_t now_us)
{
	return g->busy_until_us != 0 && now_us < g->busy_until_us;
}
