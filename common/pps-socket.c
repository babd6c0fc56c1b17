/* SPDX-License-Identifier: MIT */
#include "pps-socket.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>

#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>

#include <linux/sockios.h>
#include <netdb.h>
#include <unistd.h>

static int
set_int(int fd, int level, int name, int value)
{
	if (setsockopt(fd, level, name, &value, sizeof(value)) < 0)
		return -errno;
	return 0;
}

/* An int-sized option (unsigned ones read back through the same bits). */
static int
get_int(int fd, int level, int name, int *value)
{
	int v = 0;
	socklen_t len = sizeof(v);

	if (getsockopt(fd, level, name, &v, &len) < 0)
		return -errno;
	*value = v;
	return 0;
}

int
pps_socket_get_error(int fd, int *error)
{
	return get_int(fd, SOL_SOCKET, SO_ERROR, error);
}

int
pps_socket_set_nonblocking(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

int
pps_socket_set_reuseaddr(int fd)
{
	return set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
}

int
pps_socket_set_linger(int fd, bool on, int seconds)
{
	struct linger lg = {.l_onoff = on, .l_linger = seconds};

	if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
		return -errno;
	return 0;
}

int
pps_socket_set_nodelay(int fd, bool on)
{
	return set_int(fd, IPPROTO_TCP, TCP_NODELAY, on);
}

int
pps_socket_set_cork(int fd, bool on)
{
	return set_int(fd, IPPROTO_TCP, TCP_CORK, on);
}

int
pps_socket_set_notsent_lowat(int fd, int bytes)
{
	return set_int(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, bytes);
}

int
pps_socket_set_thin_linear_timeouts(int fd, bool on)
{
	return set_int(fd, IPPROTO_TCP, TCP_THIN_LINEAR_TIMEOUTS, on);
}

/* Not in the C library's headers before Linux 6.15's. */
#ifndef TCP_RTO_MIN_US
#define TCP_RTO_MIN_US 45
#endif

int
pps_socket_set_rto_min_us(int fd, uint32_t us)
{
	return set_int(fd, IPPROTO_TCP, TCP_RTO_MIN_US, (int)us);
}

int
pps_socket_set_congestion(int fd, const char *name)
{
	if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name)) < 0)
		return -errno;
	return 0;
}

int
pps_socket_get_congestion(int fd, char *name, size_t size)
{
	socklen_t len = size > 0 ? (socklen_t)size - 1 : 0;

	if (size == 0)
		return -EINVAL;
	memset(name, 0, size);
	if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) < 0)
		return -errno;
	return 0;
}

int
pps_socket_set_maxseg(int fd, int bytes)
{
	return set_int(fd, IPPROTO_TCP, TCP_MAXSEG, bytes);
}

int
pps_socket_set_sndbuf(int fd, int bytes)
{
	return set_int(fd, SOL_SOCKET, SO_SNDBUF, bytes);
}

int
pps_socket_get_sndbuf(int fd, int *bytes)
{
	return get_int(fd, SOL_SOCKET, SO_SNDBUF, bytes);
}

int
pps_socket_set_rcvbuf(int fd, int bytes)
{
	return set_int(fd, SOL_SOCKET, SO_RCVBUF, bytes);
}

int
pps_socket_set_max_pacing_rate(int fd, int bytes_per_s)
{
	return set_int(fd, SOL_SOCKET, SO_MAX_PACING_RATE, bytes_per_s);
}

int
pps_socket_get_max_pacing_rate(int fd, unsigned *bytes_per_s)
{
	int v = 0;
	int r = get_int(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v);

	if (r == 0)
		*bytes_per_s = (unsigned)v;
	return r;
}

int
pps_socket_get_tcp_info(int fd, void *info, size_t size_bytes, size_t *len_bytes)
{
	socklen_t len = (socklen_t)size_bytes;

	memset(info, 0, size_bytes);
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, info, &len) < 0)
		return -errno;
	if (len_bytes)
		*len_bytes = len;
	return 0;
}

int
pps_socket_get_outq_bytes(int fd, int *bytes)
{
	int v = 0;

	if (ioctl(fd, SIOCOUTQ, &v) < 0)
		return -errno;
	*bytes = v;
	return 0;
}

int
pps_socket_get_meminfo(int fd, uint32_t *meminfo, size_t n)
{
	socklen_t len = (socklen_t)(n * sizeof(*meminfo));

	memset(meminfo, 0, n * sizeof(*meminfo));
	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, meminfo, &len) < 0)
		return -errno;
	return 0;
}

int
pps_socket_set_ip_tos(int fd, int tos)
{
	return set_int(fd, IPPROTO_IP, IP_TOS, tos);
}

int
pps_socket_set_recv_tos(int fd, bool on)
{
	return set_int(fd, IPPROTO_IP, IP_RECVTOS, on);
}

int
pps_socket_set_timestamp_ns(int fd, bool on)
{
	return set_int(fd, SOL_SOCKET, SO_TIMESTAMPNS, on);
}

int
pps_socket_listen_tcp(const char *listen_at, int backlog, char *err, size_t err_size)
{
	char host[256], port[16];
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
	                         .ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	int fd, ret;

	if (pps_socket_split_address(listen_at, host, sizeof(host), port, sizeof(port)) < 0) {
		snprintf(err, err_size, "listen = %s: not host:port", listen_at);
		return -EINVAL;
	}
	ret = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (ret != 0) {
		snprintf(err, err_size, "listen = %s: %s", listen_at, gai_strerror(ret));
		return -EINVAL;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || pps_socket_set_reuseaddr(fd) < 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, backlog) < 0) {
		ret = -errno;
		snprintf(err, err_size, "cannot listen on %s: %s", listen_at, strerror(errno));
		freeaddrinfo(res);
		if (fd >= 0)
			close(fd);
		return ret;
	}
	freeaddrinfo(res);
	return fd;
}

int
pps_socket_split_address(const char *address, char *host, size_t host_size, char *port,
                         size_t port_size)
{
	const char *host_start = address, *host_end, *port_start;
	char *end;
	long number;

	if (address[0] == '[') {
		host_start = address + 1;
		host_end = strchr(host_start, ']');
		if (!host_end || host_end[1] != ':')
			return -EINVAL;
		port_start = host_end + 2;
	} else {
		host_end = strrchr(address, ':');
		if (!host_end || memchr(address, ':', (size_t)(host_end - address)))
			return -EINVAL; /* no port, or an IPv6 address without brackets */
		port_start = host_end + 1;
	}
	if ((size_t)(host_end - host_start) >= host_size || strlen(port_start) >= port_size ||
	    !*port_start)
		return -EINVAL;
	errno = 0;
	number = strtol(port_start, &end, 10);
	if (errno || *end || number < 0 || number > 65535)
		return -EINVAL;
	memcpy(host, host_start, (size_t)(host_end - host_start));
	host[host_end - host_start] = '\0';
	snprintf(port, port_size, "%s", port_start);
	return 0;
}

int
pps_socket_send_now(int fd, const void *buf, size_t len)
{
	ssize_t k;

	(void)pps_socket_set_cork(fd, false);
	k = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (k < 0)
		return -errno;
	return (size_t)k == len ? 0 : -EIO;
}

static bool
stream_name_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

int
pps_stream_name_check(const char *name, char *err, size_t err_size)
{
	size_t len = strlen(name), start = 0;
	char dummy[1];

	if (!err) {
		err = dummy;
		err_size = sizeof(dummy);
	}
	if (len == 0 || len > PPS_STREAM_NAME_MAX_BYTES) {
		snprintf(err, err_size, "a stream name has 1 to %d characters (this one %zu)",
		         PPS_STREAM_NAME_MAX_BYTES, len);
		return -EINVAL;
	}
	for (size_t i = 0; i <= len; i++) {
		if (i < len && name[i] != '/') {
			if (!stream_name_char_ok(name[i])) {
				snprintf(err, err_size,
				         "stream name: character %zu is not a letter, digit, '.', "
				         "'_', '-' or '/'",
				         i + 1);
				return -EINVAL;
			}
			continue;
		}
		/* A component ends at name[i]: name[start .. i - 1]. */
		if (i == start || (i - start == 1 && name[start] == '.') ||
		    (i - start == 2 && name[start] == '.' && name[start + 1] == '.')) {
			snprintf(err, err_size,
			         "stream name: an empty, \".\" or \"..\" component between '/'");
			return -EINVAL;
		}
		start = i + 1;
	}
	return 0;
}

int
pps_stream_location_split(const char *location, char *address, size_t address_size, char *stream,
                          size_t stream_size, char *err, size_t err_size)
{
	const char *slash = strchr(location, '/');
	size_t address_len = slash ? (size_t)(slash - location) : strlen(location);
	char why[160];

	if (address_len >= address_size) {
		snprintf(err, err_size, "%s: the address is too long", location);
		return -EINVAL;
	}
	memcpy(address, location, address_len);
	address[address_len] = '\0';
	if (!slash) {
		if (stream_size)
			stream[0] = '\0';
		return 0;
	}
	if (pps_stream_name_check(slash + 1, why, sizeof(why)) < 0) {
		snprintf(err, err_size, "%s: %s", location, why);
		return -EINVAL;
	}
	if (strlen(slash + 1) >= stream_size) {
		snprintf(err, err_size, "%s: the stream name is too long", location);
		return -EINVAL;
	}
	snprintf(stream, stream_size, "%s", slash + 1);
	return 0;
}

unsigned long
pps_socket_raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 0;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit raised = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};

		if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
			rl = raised;
	}
	return rl.rlim_cur == RLIM_INFINITY ? (unsigned long)-1 : (unsigned long)rl.rlim_cur;
}
