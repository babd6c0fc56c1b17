/* SPDX-License-Identifier: MIT */
/*
 * For the implementations of pps-transport.h: the part of a layer every
 * layer shares, and the calls a layer makes on the layers around it.
 */
#ifndef PPS_TRANSPORT_INTERNAL_H
#define PPS_TRANSPORT_INTERNAL_H

#include <errno.h>

#include "pps-transport.h"

struct event;

/* A read operation's result once the layer itself ended the connection
 * (pps_transport_end()): the reading stops, nothing more is reported. */
#define PPS_TRANSPORT_ENDED (-ECONNABORTED)

/* The first member of every layer's struct. */
struct pps_transport {
	const pps_transport_ops_t *ops;
	pps_transport_t *underlying; /* the layer below; NULL: the socket's own */
	pps_transport_t *over;       /* the layer above; NULL: the top, the owner's */
	struct event_base *base;
	int fd;                        /* the one socket under the whole stack */
	struct event *read_event;      /* the socket's EV_READ: the bottom layer's */
	pps_transport_events_t events; /* the owner's: the top's only */
	void *user;
	bool stopped;
	bool input_seen; /* the top's: pps_transport_input_ready() ran */
	/* The top's read budget (PPS_TRANSPORT_READS_BURST, then
	 * PPS_TRANSPORT_READS_PER_S): a token bucket, and the timer that takes
	 * reading up again once it paused. */
	double read_tokens;
	int64_t read_refill_us;
	struct event *read_resume;
	/* Bytes read from the socket (decrypted) before the stack had it,
	 * returned first by this layer's reads (pps_transport_replay()). */
	uint8_t *replay;
	size_t replay_len, replay_off;
};

/* Sets up @t with @ops over @underlying (NULL for a bottom transport, which
 * passes its @base and @fd; a layer takes its underlying's). */
void pps_transport_init(pps_transport_t *t, const pps_transport_ops_t *ops,
                        pps_transport_t *underlying, struct event_base *base, int fd);

/* Going up: a packet from the layer above @t (or the owner's fill_cb), a
 * reading handed on, the end of the connection told to the owner (after
 * stopping the stack). */
int pps_transport_fill_above(pps_transport_t *t, size_t mss_bytes, uint8_t *buf, size_t *len_bytes,
                             bool *push);
void pps_transport_sample_above(pps_transport_t *t, const pps_minbuf_sample_t *sample);
void pps_transport_end(pps_transport_t *t, pps_transport_end_t how, const char *why);
/* The socket is readable (the bottom's read event): reads through the top
 * layer and hands the bytes to the owner, until -EAGAIN where a layer
 * buffers input, else once. */
void pps_transport_input_ready(pps_transport_t *t);
/* Runs pps_transport_input_ready() from the loop, as if the socket had
 * turned readable (a handshake finished with bytes already in). */
void pps_transport_wake_input(pps_transport_t *t);

/* Going down, from @t itself (its operation, else its underlying's). */
ssize_t pps_transport_read(pps_transport_t *t, uint8_t *buf, size_t size);
int pps_transport_send_now(pps_transport_t *t, const void *buf, size_t len);
ssize_t pps_transport_write(pps_transport_t *t, const void *buf, size_t len);
int pps_transport_flush(pps_transport_t *t);
int pps_transport_start_packets(pps_transport_t *t, size_t max_packet_bytes);

#endif /* PPS_TRANSPORT_INTERNAL_H */
