/* SPDX-License-Identifier: MIT */
/*
 * Socket options, in one place (as Redis keeps its socket plumbing in anet.c):
 * every setsockopt/getsockopt/ioctl ppstream and its tools apply to a socket.
 * The reason an option is set stays at the caller (MIN_BUF's cork/uncork, the
 * pacing cap, ...); what is here is the option's spelling, its argument type
 * and the error convention.
 *
 * Contract for every function: @fd is an open socket of the right kind (TCP
 * for the TCP_ options, UDP/IPv4 for the IP_ ones); returns 0, or the
 * negative errno of the failed call (-EBADF for a bad descriptor, -ENOTSOCK,
 * -ENOPROTOOPT for an option the socket's protocol has not, -ENOENT for a
 * congestion control the kernel lacks, ...), leaving out-parameters untouched
 * on failure. Nothing logs. Thread: any, as the system calls are.
 */
#ifndef PPS_SOCKET_H
#define PPS_SOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* SO_ERROR: the socket's pending error, which it clears (how a non-blocking
 * connect reports its outcome): *error is a positive errno, or 0 for none. */
int pps_socket_get_error(int fd, int *error);

/* O_NONBLOCK on (fcntl); other file status flags are kept. */
int pps_socket_set_nonblocking(int fd);

/* SO_REUSEADDR on: a listener binds again while old connections linger. */
int pps_socket_set_reuseaddr(int fd);

/* SO_LINGER: on with @seconds (0 = reset at close), or off. */
int pps_socket_set_linger(int fd, bool on, int seconds);

/* TCP_NODELAY (Nagle off when @on). */
int pps_socket_set_nodelay(int fd, bool on);

/* TCP_CORK: hold partial packets while @on; turning it off sends them. */
int pps_socket_set_cork(int fd, bool on);

/* Uncorks @fd and sends @len bytes at once, without blocking (a reply or a
 * BYE that must leave now; if uncorking fails the bytes still queue).
 * 0, the negative errno of send(2), or -EIO when the kernel took only part. */
int pps_socket_send_now(int fd, const void *buf, size_t len);

/* TCP_NOTSENT_LOWAT: writable once fewer than @bytes are unsent. */
int pps_socket_set_notsent_lowat(int fd, int bytes);

/* TCP_THIN_LINEAR_TIMEOUTS (no exponential RTO backoff while thin). */
int pps_socket_set_thin_linear_timeouts(int fd, bool on);
/* TCP_RTO_MIN_US (Linux 6.15 and later): the connection's smallest
 * retransmission timeout. -ENOPROTOOPT from a kernel without it. */
int pps_socket_set_rto_min_us(int fd, uint32_t us);

/* TCP_CONGESTION by name ("cubic", "reno", "bbr"); -ENOENT if not available. */
int pps_socket_set_congestion(int fd, const char *name);
/* The congestion control in force, NUL-terminated in @name. */
int pps_socket_get_congestion(int fd, char *name, size_t size);

/* TCP_MAXSEG: the MSS to announce / use, in bytes (set before connecting). */
int pps_socket_set_maxseg(int fd, int bytes);

/* SO_SNDBUF / SO_RCVBUF requests in bytes (the kernel doubles them, with a
 * floor); get reads back what the kernel holds. */
int pps_socket_set_sndbuf(int fd, int bytes);
int pps_socket_get_sndbuf(int fd, int *bytes);
int pps_socket_set_rcvbuf(int fd, int bytes);

/* SO_MAX_PACING_RATE in bytes per second; any value but ~0U turns on TCP's
 * internal pacing where no fq qdisc paces. */
int pps_socket_set_max_pacing_rate(int fd, int bytes_per_s);
/* The cap in force; ~0U = none. */
int pps_socket_get_max_pacing_rate(int fd, unsigned *bytes_per_s);

/*
 * TCP_INFO into @info (@size_bytes; a struct tcp_info, or a larger buffer for
 * fields newer than the installed headers). The buffer is zeroed first, so a
 * field an older kernel does not fill reads 0; *len_bytes (may be NULL) is
 * how many bytes the kernel wrote.
 */
int pps_socket_get_tcp_info(int fd, void *info, size_t size_bytes, size_t *len_bytes);

/* SIOCOUTQ: bytes in the send queue, sent-but-unacked plus not yet sent. */
int pps_socket_get_outq_bytes(int fd, int *bytes);

/* SO_MEMINFO into @meminfo (@n entries, indexed by SK_MEMINFO_*, zeroed first). */
int pps_socket_get_meminfo(int fd, uint32_t *meminfo, size_t n);

/* IP_TOS of outgoing datagrams (the ECN bits included). */
int pps_socket_set_ip_tos(int fd, int tos);

/* IP_RECVTOS: each datagram's TOS byte as ancillary data. */
int pps_socket_set_recv_tos(int fd, bool on);

/* SO_TIMESTAMPNS: each datagram's kernel receive time (CLOCK_REALTIME) as
 * ancillary data. */
int pps_socket_set_timestamp_ns(int fd, bool on);

/*
 * Splits "host:port" or "[v6addr]:port" into its host (brackets removed;
 * may be empty: any address) and port (0..65535). Returns 0 or -EINVAL if
 * it is not of that form or a part does not fit its buffer. No system call.
 */
int pps_socket_split_address(const char *address, char *host, size_t host_size, char *port,
                             size_t port_size);

/*
 * A nonblocking TCP socket listening on @listen_at ("host:port", "[v6]:port";
 * an empty host: any address) with SO_REUSEADDR and @backlog. Returns the
 * descriptor, or a negative errno with the reason in @err (-EINVAL: not
 * host:port, or a name that does not resolve).
 */
int pps_socket_listen_tcp(const char *listen_at, int backlog, char *err, size_t err_size);

/*
 * Raises this process's soft limit of open descriptors (RLIMIT_NOFILE) to its
 * hard limit, so that a server can hold the connections its settings admit.
 * Returns the soft limit in force afterwards (unchanged if raising failed).
 */
unsigned long pps_socket_raise_fd_limit(void);

/* Longest stream name (the wire's PPS_WIRE_MAX_STREAM_BYTES). */
#define PPS_STREAM_NAME_MAX_BYTES 64

/*
 * A stream name: 1..PPS_STREAM_NAME_MAX_BYTES bytes of ASCII letters, digits,
 * '.', '_' and '-' in components joined by '/' ("room/alice"); no empty
 * component, none that is "." or "..", no leading or trailing '/'. 0, or
 * -EINVAL with what is wrong in @err (may be NULL).
 */
int pps_stream_name_check(const char *name, char *err, size_t err_size);

/*
 * Splits "HOST:PORT/NAME" (or "[v6]:PORT/NAME") at its first '/': the
 * address into @address, the stream name into @stream ("" when there is no
 * '/'). 0, or -EINVAL with the reason in @err: a part does not fit its
 * buffer, or the name fails pps_stream_name_check(). The address itself is
 * not checked (pps_socket_split_address() does that).
 */
int pps_stream_location_split(const char *location, char *address, size_t address_size,
                              char *stream, size_t stream_size, char *err, size_t err_size);

#endif /* PPS_SOCKET_H */
