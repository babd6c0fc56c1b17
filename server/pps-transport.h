/* SPDX-License-Identifier: MIT */
/*
 * A session's connection, as one table of operations.
 *
 * What a transport is. Everything a session does with its client's bytes
 * that is not the wire protocol itself: receive (and decrypt, and unframe),
 * say a record now (CHALLENGE, BYE), and stream packets through a writer that
 * pulls them from the session's regulator when the network has room, steered
 * by the session's path estimate (latency cap, rate cap, congestion control).
 * The session holds a pps_transport_t and calls the functions below; it never
 * learns which transport, or which layers, it talks through. Its log line
 * names them (pps_transport_describe(): "minbuf, TLS").
 *
 * Layers. A transport is a stack, the way libevent's filter bufferevents wrap
 * an underlying bufferevent: at the bottom the socket's own transport (the
 * MIN_BUF writer, pps-transport-tcp.c, in mode minbuf or tcp), and over it
 * layers that each hold their underlying transport:
 *
 *     session  <->  web (HTTP / WebSocket)  <->  TLS  <->  tcp (MIN_BUF writer)  <->  socket
 *
 * Every layer has the same pps_transport_ops_t; an operation a layer leaves
 * NULL is its underlying's, so a layer only writes what it changes. Calls go
 * down the stack (read, send, steering, stats), the writer's packets come up
 * it: when the MIN_BUF writer has room it asks the layer above for a packet
 * of at most one MSS (the fill operation), that layer asks the one above it
 * for a smaller one, and so on up to the session's fill callback; each layer
 * then frames what it got on the way down. TLS seals each packet as exactly
 * one record (its plaintext MSS - 22 bytes, so that the record is at most one
 * MSS and leaves as one TCP segment), the WebSocket layer makes each one
 * binary message. The writer counts and pushes whatever bytes come back, so
 * the MIN_BUF rule holds for ciphertext and frames exactly as for plaintext.
 * Readings of TCP_INFO go up the same way (the sample operation).
 *
 * The stack of a server session (pps_transport_open()): tcp, TLS when the
 * listener has a certificate (its handshake runs before HELLO, within the
 * session's handshake timeout), and the browser layer, which reads the first
 * bytes: an HTTP request turns it into the HTTP server and, after an upgrade,
 * the WebSocket framing (server/pps-web.h); anything else (a HELLO) and it
 * stays out of the way for good.
 *
 * Adding a transport. A thin-stream audio connection, say (small packets,
 * TCP_THIN_LINEAR_TIMEOUTS, no latency cap): a bottom transport is a struct
 * whose first member is a pps_transport_t, initialised with
 * pps_transport_init() (pps-transport-internal.h) and a static
 * pps_transport_ops_t filled with designated initializers: read, send_now,
 * write, start (create its writer at admission), kick, pending_bytes, the
 * steering it supports, get_stats, stop, free, name and caps; its writer calls
 * pps_transport_fill_above() for packets, pps_transport_sample_above() for its
 * readings and pps_transport_end() when it fails. caps says what it does not
 * steer (no PPS_TRANSPORT_CAP_LATENCY_CAP): the session then does not ask. A
 * layer (QUIC's framing over UDP would be a bottom transport; a compression
 * layer would be a layer) fills only what it changes and calls the same
 * functions on its underlying for the rest.
 *
 * Threading: the thread of the event_base, like the session that owns it.
 * Errors: 0 or a negative errno; constructors return NULL with errno set.
 */
#ifndef PPS_TRANSPORT_H
#define PPS_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pps-log.h"
#include "pps-minbuf.h"
#include "pps-web.h"
#include "pps-wire.h"

struct event_base;
typedef struct pps_tls pps_tls_t;
typedef struct pps_tls_ctx pps_tls_ctx_t;
typedef struct pps_transport pps_transport_t;

/* How a connection ended: what the owner logs, and whether it still refuses
 * the peer with a BYE. */
typedef enum {
	PPS_TRANSPORT_END_CLOSED,   /* the peer closed the connection */
	PPS_TRANSPORT_END_FINISHED, /* a layer's own exchange is over (an HTTP answer written) */
	PPS_TRANSPORT_END_RECEIVE,  /* receiving failed: @why */
	PPS_TRANSPORT_END_SEND,     /* the packet writer failed: @why */
	/* The peer does not speak the transport (a failed TLS handshake, a
	 * plaintext client on a TLS listener); the layer told it so itself. */
	PPS_TRANSPORT_END_REFUSED,
	/* The peer broke a layer's framing (a bad WebSocket frame): the owner
	 * refuses it, its BYE through pps_transport_send_record(). */
	PPS_TRANSPORT_END_PROTOCOL,
} pps_transport_end_t;

/* What a transport emits to its owner, on the loop's thread, with the user
 * pointer given with them. None may free the transport. */
typedef struct {
	/* One packet for the writer (pps_minbuf_fill_cb's contract): @mss_bytes
	 * is what the layers leave of a packet once they framed it. */
	pps_minbuf_fill_cb fill_cb;
	/* Every TCP_INFO reading before a write decision; it may steer the
	 * transport (pps_transport_set_latency_cap() and the others). */
	pps_minbuf_sample_cb sample_cb;
	/* Bytes of wire records received, decrypted and unframed. */
	void (*input_cb)(const uint8_t *buf, size_t len, void *user);
	/* The connection ended; @why says why (NULL for CLOSED and FINISHED).
	 * Reading and handshaking have stopped (pps_transport_stop()). */
	void (*ended_cb)(pps_transport_end_t how, const char *why, void *user);
} pps_transport_events_t;

/* What a transport can do (pps_transport_caps()). */
typedef enum {
	PPS_TRANSPORT_CAP_LATENCY_CAP = 1u << 0, /* pps_transport_set_latency_cap() bounds it */
	PPS_TRANSPORT_CAP_RATE_CAP = 1u << 1,    /* pps_transport_set_rate_cap() paces it */
	PPS_TRANSPORT_CAP_CONGESTION = 1u << 2,  /* pps_transport_set_congestion() switches it */
	/* A layer holds received bytes the socket no longer signals (TLS
	 * records OpenSSL already read): a wake-up reads on while the layer
	 * says it holds some (input_buffered), PPS_TRANSPORT_READS_PER_WAKEUP
	 * reads at most, then yields the loop and comes back. */
	PPS_TRANSPORT_CAP_BUFFERED_INPUT = 1u << 3,
} pps_transport_cap_t;

/* Reads per wake-up of a layer with PPS_TRANSPORT_CAP_BUFFERED_INPUT. */
#define PPS_TRANSPORT_READS_PER_WAKEUP 8

/* Reads of one connection over time (each at most 4 KiB): a burst, then a
 * rate. Past it the connection is not read until a read is due again, so its
 * peer's TCP window closes: a client says a few records a second, a flood
 * gets no more of the loop than this. */
#define PPS_TRANSPORT_READS_BURST 64
#define PPS_TRANSPORT_READS_PER_S 32

/*
 * The operations of one layer. A NULL operation is the underlying's (the
 * layer is transparent to it), except stop and free, which every layer that
 * has them runs. fill and sample go up the stack: a layer that frames
 * packets (fill) or watches readings (sample) gets them from below and hands
 * them on with pps_transport_fill_above() / pps_transport_sample_above().
 */
typedef struct pps_transport_ops {
	/* In logs ("minbuf", "tcp", "TLS"); NULL or NULL returned: not named. */
	const char *(*name)(const pps_transport_t *t);
	/* pps_transport_cap_t bits, the underlying's included. */
	unsigned (*caps)(const pps_transport_t *t);

	/* -- receiving */
	/* Bytes for the layer above: > 0, 0 when the peer closed, -EAGAIN, a
	 * negative errno, or PPS_TRANSPORT_ENDED after pps_transport_end(). */
	ssize_t (*read)(pps_transport_t *t, uint8_t *buf, size_t size);
	/* The name of a layer whose handshake still runs ("TLS"), else NULL. */
	const char *(*handshake_pending)(const pps_transport_t *t);
	/* Received bytes the layer holds that the socket will not signal again. */
	bool (*input_buffered)(const pps_transport_t *t);

	/* -- saying something now, beside the packet writer */
	/* One record now, uncorked (CHALLENGE, BYE): 0 or a negative errno. */
	int (*send_record)(pps_transport_t *t, const pps_wire_record_t *record);
	/* @len bytes now, uncorked: 0 once the kernel has them (or the layer
	 * keeps a tail that goes first with the next bytes), or a negative errno. */
	int (*send_now)(pps_transport_t *t, const void *buf, size_t len);
	/* As much of @buf as the socket takes now: the bytes taken, -EAGAIN
	 * (wait for EV_WRITE) or a negative errno. */
	ssize_t (*write)(pps_transport_t *t, const void *buf, size_t len);
	/* What the layer keeps from send_now or write: 0 once it is all out,
	 * -EAGAIN, or a negative errno. */
	int (*flush)(pps_transport_t *t);

	/* -- streaming: the packet writer */
	/* The writer's parameters, before start (the bottom transport's). */
	int (*set_writer)(pps_transport_t *t, const pps_minbuf_params_t *writer);
	/* Starts the writer (at admission). @max_packet_bytes: the largest
	 * packet the layers above can frame as one unit, 0 = any. */
	int (*start)(pps_transport_t *t, size_t max_packet_bytes);
	/* The owner has data: the writer runs now or when room appears. */
	void (*kick)(pps_transport_t *t);
	/* Bytes of a batch the kernel took only in part (0 between packets). */
	size_t (*pending_bytes)(const pps_transport_t *t);
	/* Up: one packet for the layer below, at most @mss_bytes, framed from
	 * one the layer gets from above (pps_transport_fill_above()); the
	 * contract of pps_minbuf_fill_cb. */
	int (*fill)(pps_transport_t *t, size_t mss_bytes, uint8_t *buf, size_t *len_bytes,
	            bool *push);
	/* Up: a TCP_INFO reading, handed on with pps_transport_sample_above(). */
	void (*sample)(pps_transport_t *t, const pps_minbuf_sample_t *sample);
	/* Steering (pps-minbuf.h): only what caps says the layer supports. */
	void (*set_latency_cap)(pps_transport_t *t, uint32_t cap_pkts);
	int (*set_rate_cap)(pps_transport_t *t, uint64_t bits_per_s);
	int (*set_congestion)(pps_transport_t *t, pps_minbuf_congestion_t cc);
	/* The counters: the writer's, the layers' filled in over them. */
	int (*get_stats)(const pps_transport_t *t, pps_minbuf_stats_t *out);

	/* -- life */
	void (*stop)(pps_transport_t *t); /* no more reading or handshaking */
	void (*free)(pps_transport_t *t); /* this layer only */
} pps_transport_ops_t;

/* ---- a server session's connection ------------------------------------- */

typedef struct {
	pps_minbuf_params_t writer; /* the socket's writer: mode minbuf or tcp */
	/* TLS over the socket, its handshake first; NULL: plaintext. Not owned,
	 * it must outlive the transport. */
	pps_tls_ctx_t *tls_ctx;
	/* Or an endpoint already made on this socket (a relay's door ran its
	 * handshake to read the HELLO): the stack's from now on, freed with it
	 * (and by pps_transport_open() if it fails). Wins over tls_ctx. */
	pps_tls_t *tls;
	const char *peer; /* "addr:port", for the browser layer's log lines */
	pps_log_t log;
	pps_web_pages_t pages; /* the owner's HTTP pages (pps-web.h); zeroed: none */
} pps_transport_params_t;

/*
 * The stack of a server session on the accepted socket @fd (not owned: the
 * caller closes it after pps_transport_free()): tcp, TLS if @params->tls_ctx,
 * and the browser layer; reading starts now. Nothing is set on the socket
 * until pps_transport_start(). NULL with errno: EINVAL, ENOMEM, EIO (the
 * loop refused the descriptor).
 */
pps_transport_t *pps_transport_open(struct event_base *base, int fd,
                                    const pps_transport_params_t *params,
                                    const pps_transport_events_t *events, void *user);

/* ---- the layers, for stacks of one's own ------------------------------- */

/* The socket's own transport: the MIN_BUF writer (or mode tcp) on the TCP
 * socket @fd (not owned), created at pps_transport_start(). Receiving is a
 * plain recv(2). NULL with errno. */
pps_transport_t *pps_transport_tcp_open(struct event_base *base, int fd,
                                        const pps_minbuf_params_t *params);
/* TLS over @underlying with the endpoint @tls on the same socket (its
 * handshake done or not: reads run it first). Both are the layer's from now
 * on, freed with it, and freed here if it cannot be made (NULL, errno). */
pps_transport_t *pps_transport_tls_over(pps_transport_t *underlying, pps_tls_t *tls);
/* The browser layer over @underlying (see pps-web.h); @underlying is the
 * layer's from now on, freed here on failure. @check_bound: the writer's
 * parameters for the independent MIN_BUF check (PPS_WEB_CHECK_BOUND), NULL
 * for none. @peer and @pages (NULL: none) are copied. NULL with errno. */
pps_transport_t *pps_transport_web_over(pps_transport_t *underlying, const char *peer,
                                        const pps_minbuf_params_t *check_bound,
                                        const pps_log_t *log, const pps_web_pages_t *pages);
/* The owner's callbacks, on the top of a stack; reading starts if @events
 * has an input_cb. 0, or -EIO when the loop refused the descriptor. */
int pps_transport_set_events(pps_transport_t *t, const pps_transport_events_t *events, void *user);

/* ---- what the owner calls, on the top of the stack --------------------- */

/* The layers' names from the socket up, ", "-separated ("minbuf, TLS"). */
void pps_transport_describe(const pps_transport_t *t, char *buf, size_t size);
unsigned pps_transport_caps(const pps_transport_t *t);
/* The layer still in its handshake ("TLS"), or NULL. */
const char *pps_transport_handshake_pending(const pps_transport_t *t);
/* A layer holds received bytes the socket will not signal again. */
bool pps_transport_input_buffered(const pps_transport_t *t);
/* The socket has signalled input (bytes, or the peer's end) at least once. */
bool pps_transport_input_seen(const pps_transport_t *t);
/* Input read before the transport had the socket (a relay routes a connection
 * by its HELLO) counts as seen: the peer spoke, so it is told why it goes. */
void pps_transport_note_input(pps_transport_t *t);
/* Bytes read from the socket before the stack had it (a relay read an HTTP
 * request to route it; over TLS, decrypted): copied, they come first out of
 * the reads of the layer under the top, as if that layer had just delivered
 * them; a read runs from the loop. 0, -EALREADY (bytes already replayed or
 * read), -ENOMEM. */
int pps_transport_replay(pps_transport_t *t, const uint8_t *buf, size_t len);
/* One record now, uncorked, between packets: the caller checks that
 * pps_transport_pending_bytes() is 0 first. 0 or a negative errno. */
int pps_transport_send_record(pps_transport_t *t, const pps_wire_record_t *record);
/* Other parameters for the packet writer than the stack was opened with
 * (an audio-only connection's thin stream), before pps_transport_start():
 * 0, -EALREADY once started, -EINVAL. */
int pps_transport_set_writer(pps_transport_t *t, const pps_minbuf_params_t *writer);
/* Starts the packet writer (the client was admitted). 0 or a negative errno. */
int pps_transport_start(pps_transport_t *t);
/* The producer has new data (pps_minbuf_kick()); a no-op before start. */
void pps_transport_kick(pps_transport_t *t);
/* Bytes of a packet batch the kernel took only in part; 0 before start. */
size_t pps_transport_pending_bytes(const pps_transport_t *t);
/* Steering, from the sample callback (see pps-minbuf.h for what each does).
 * Not supported (pps_transport_caps()): a no-op, -EOPNOTSUPP. */
void pps_transport_set_latency_cap(pps_transport_t *t, uint32_t cap_pkts);
int pps_transport_set_rate_cap(pps_transport_t *t, uint64_t bits_per_s);
int pps_transport_set_congestion(pps_transport_t *t, pps_minbuf_congestion_t cc);
/* 0, or -ENOENT before start (then @out is zeroed). */
int pps_transport_get_stats(const pps_transport_t *t, pps_minbuf_stats_t *out);
/* Stops reading and handshaking for good (the owner is closing). */
void pps_transport_stop(pps_transport_t *t);
/* Frees the whole stack; the socket stays open. NULL is a no-op. */
void pps_transport_free(pps_transport_t *t);

#endif /* PPS_TRANSPORT_H */
