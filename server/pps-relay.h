/* SPDX-License-Identifier: MIT */
/*
 * The relay (pps-relay, docs/RELAY.md): many named streams on one listening
 * socket. A publisher (pps-server --publish) connects, says a HELLO with the
 * publish and stream flags, and, once admitted, is sent a HELLO of the
 * relay's: from then on the relay is its client on that connection and reads
 * its stream (STREAM_INFO, windows, audio). Each stream has a listener of its
 * own (pps_listener_t): its subscribers are sessions with their own progress
 * regulator and MIN_BUF writer, exactly as a pps-server's viewers. The relay
 * never decodes: it rebuilds each received window from its whole ADUs
 * (pps_window_new_relayed()) and pushes it into the stream's listener once
 * its WINDOW_END is in. A subscriber that joins asks for an IDR like any
 * viewer; the stream's listener bounds those requests (recovery) and the
 * relay forwards what passes as one RECOVERY_REQUEST to the publisher.
 *
 * Connections are routed by their HELLO: the relay reads it (plaintext
 * only), then hands the socket and the bytes read to the stream's listener
 * (pps_listener_add_with_input()), or refuses with BYE no-stream.
 *
 * Everything runs on the thread that owns the event_base.
 */
#ifndef PPS_RELAY_H
#define PPS_RELAY_H

#include "pps-server-lib.h"
#include "pps-tls.h"

#include <stdbool.h>
#include <stdint.h>

/* Defaults of the relay's own bounds. */
#define PPS_RELAY_DEFAULT_MAX_STREAMS 16
/* Connections reading their HELLO at once; a newcomer past it is refused. */
#define PPS_RELAY_MAX_PENDING 64
/* A HELLO (with AUTH) is at most this long; more before routing is refused. */
#define PPS_RELAY_HELLO_BYTES 512
/* ADUs being reassembled at once per stream (fragments of several ADUs may
 * interleave), and the bytes one window of a stream may hold. */
#define PPS_RELAY_ASSEMBLING_ADUS  16
#define PPS_RELAY_MAX_WINDOW_BYTES (32u << 20)
/* How often a stream's PATH_REPORT tells the publisher (or the relay it
 * subscribes to) what its subscribers' paths take. */
#define PPS_RELAY_REPORT_US 250000

typedef struct {
	/* Every stream's listener is made from this (its session params carry
	 * the access token subscribers must prove, the writer, the regulator;
	 * max_clients: subscribers per stream). The stream's STREAM_INFO, frame
	 * duration and latency budget are the publisher's. With tls_cert and
	 * tls_key, a connection whose first byte begins a TLS handshake gets
	 * TLS (the door runs the handshake, reads the HELLO or the request,
	 * and hands the endpoint on, to a viewer's session or a publisher's
	 * stream); others stay plaintext. */
	pps_listener_params_t listener;
	/* Where a stream's audio goes to its viewers ([audio] transport, as a
	 * pps-server sends it): PPS_WIRE_AUDIO_OWN_CONNECTION (connections of
	 * their own, the default) or PPS_WIRE_AUDIO_IN_STREAM. */
	unsigned audio_transport;
	unsigned audio_copies; /* with _OWN_CONNECTION: STREAM_INFO's audio_copies */
	unsigned max_streams;  /* publishers at once; 0: PPS_RELAY_DEFAULT_MAX_STREAMS */
	/* TLS to the upstream relays (pps_relay_upstream()): their certificates
	 * verified for the host named, against relay_tls_ca (NULL or "": the
	 * system's store). */
	bool relay_tls;
	const char *relay_tls_ca;
	pps_log_t log;
} pps_relay_params_t;

typedef struct {
	unsigned streams;                /* published now */
	unsigned viewers;                /* streaming now, over every stream */
	uint64_t publishers_total;       /* admitted */
	uint64_t publishers_refused;     /* name taken, bad name, full, unauthorized */
	uint64_t publishers_dropped;     /* garbage or a broken stream */
	uint64_t subscribers_routed;     /* handed to a stream's listener */
	uint64_t subscribers_no_stream;  /* refused: no stream of that name */
	uint64_t web_requests;           /* HTTP exchanges with the relay itself (pages,
	                                  * the stream list, a WebSocket for no stream) */
	uint64_t handshakes_dropped;     /* no HELLO in time, garbage, pool full */
	uint64_t windows_relayed;        /* pushed into a stream's listener */
	uint64_t recovery_requests_sent; /* RECOVERY_REQUESTs to publishers */
	uint64_t path_reports_sent;      /* PATH_REPORTs to publishers */
	uint64_t upstream_reconnects;    /* upstream streams taken again after a loss */
} pps_relay_stats_t;

typedef struct pps_relay pps_relay_t;

/* NULL with errno (EINVAL, ENOMEM) and a one-line reason in @err. */
pps_relay_t *pps_relay_new(struct event_base *base, const pps_relay_params_t *params, char *err,
                           size_t err_size);
/* Listens on @listen_at (HOST:PORT); the port bound to @port_out. 0 or a
 * negative errno with @err. */
int pps_relay_listen(pps_relay_t *relay, const char *listen_at, unsigned *port_out, char *err,
                     size_t err_size);
/*
 * A tree: subscribes to @location (HOST:PORT/NAME: another relay's stream,
 * or a pps-server's) as a viewer would, proving @token if challenged (NULL
 * or "": none; not copied, it must outlive the relay), and hosts what it
 * receives as its own stream NAME, exactly as if a publisher pushed it (its
 * viewers' joins go upstream as RECOVERY_REQUESTs). The address is resolved
 * now; connecting is the loop's: at once, and again after a backoff
 * (0.5 s doubling to 5 s) whenever the upstream cannot be reached, refuses
 * (no such stream yet, a wrong token) or the stream ends; its viewers are
 * told the stream ended and come back to it as they would to a publisher's.
 * The name stays this upstream's meanwhile. 0, or a negative errno with
 * @err (a bad location, a name that does not resolve, the name taken, the
 * relay full).
 */
int pps_relay_upstream(pps_relay_t *relay, const char *location, const char *token, char *err,
                       size_t err_size);
/* BYE normal with @text to every publisher and subscriber. */
void pps_relay_say_bye(pps_relay_t *relay, const char *text);
void pps_relay_get_stats(const pps_relay_t *relay, pps_relay_stats_t *stats);
void pps_relay_free(pps_relay_t *relay);

/*
 * The publisher's side (pps-server --publish): connects to @location
 * (HOST:PORT/NAME), runs a TLS handshake with @tls_ctx (a client context:
 * the relay's certificate verified for HOST; NULL: plaintext), says HELLO
 * with the publish and stream flags, proves @token if the relay challenges
 * (NULL or "": none), and waits for the relay's HELLO, all within
 * @timeout_us. On success the socket (non-blocking) in *fd_out, its TLS
 * endpoint in *tls_out (NULL: plaintext; for pps_listener_add_routed()),
 * its address in @addr/@addr_len, and the relay's HELLO record's bytes in
 * @hello (*hello_len of at most @hello_size). 0, or a negative errno with
 * the reason in @err (the relay's BYE text when it refused). @audio: the
 * stream's audio connection instead (HELLO with AUDIO_ONLY too, after the
 * stream's own connection, from the same host; the relay answers as an
 * audio-only client).
 */
int pps_relay_publish_connect(const char *location, bool audio, const char *token,
                              pps_tls_ctx_t *tls_ctx, int64_t timeout_us, int *fd_out,
                              pps_tls_t **tls_out, struct sockaddr_storage *addr,
                              socklen_t *addr_len, uint8_t *hello, size_t hello_size,
                              size_t *hello_len, char *err, size_t err_size);

#endif /* PPS_RELAY_H */
