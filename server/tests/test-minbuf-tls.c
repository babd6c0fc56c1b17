/* SPDX-License-Identifier: MIT */
/*
 * TLS record sizing (common/pps-tls.h, the TLS layer of pps-transport.h), with
 * a real TLS 1.3 handshake and a certificate made here (EC P-256,
 * CN=localhost, subjectAltName IP:127.0.0.1), written to a temporary directory:
 *
 *  - over a socketpair: for every MSS the writer can see (536 .. loopback's),
 *    a full packet sealed is exactly min(MSS, largest record) bytes, so its
 *    ciphertext fills at most one MSS, and the peer decrypts the same bytes;
 *    a short packet costs 22 bytes; a buffer one byte short is -EMSGSIZE;
 *  - the handshake refuses a certificate the CA file does not vouch for, or
 *    one for another IP address, and tells a plaintext peer apart;
 *  - through the TLS layer over the MIN_BUF writer on loopback TCP with
 *    TCP_MAXSEG set: the fill callback is offered MSS - 22, every record
 *    written is <= the MSS the writer read, and the client reads back every
 *    byte in order.
 * No sleeps: both ends are driven from one thread with poll(2).
 */
#include "pps-minbuf.h"
#include "pps-socket.h"
#include "pps-test.h"
#include "pps-tls.h"
#include "pps-transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char dir[64], cert_path[128], key_path[128], other_path[128], other_key_path[128];

/* A self-signed certificate for @san into @cert / @key (PEM). */
static void
make_cert(const char *san, const char *cert, const char *key)
{
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_NAME *name;
	X509_EXTENSION *ext;
	X509V3_CTX v3;
	FILE *f;

	REQUIRE(pk && x);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	REQUIRE(X509_set_pubkey(x, pk) == 1);
	name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1,
	                           -1, 0);
	REQUIRE(X509_set_issuer_name(x, name) == 1);
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
	REQUIRE(ext && X509_add_ext(x, ext, -1) == 1);
	X509_EXTENSION_free(ext);
	REQUIRE(X509_sign(x, pk, EVP_sha256()) > 0);
	REQUIRE((f = fopen(cert, "w")) && PEM_write_X509(f, x) == 1 && fclose(f) == 0);
	REQUIRE((f = fopen(key, "w")) &&
	        PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL) == 1 && fclose(f) == 0);
	X509_free(x);
	EVP_PKEY_free(pk);
}

/* Drives both handshakes to their end: the client's result. */
static int
handshake_pair(pps_tls_t *server, pps_tls_t *client, int server_fd, int client_fd, char *err,
               size_t err_size)
{
	int rs = -EAGAIN, rc = -EAGAIN;
	char serr[256];

	for (int i = 0; i < 200 && (rs == -EAGAIN || rc == -EAGAIN); i++) {
		struct pollfd p[2] = {{.fd = server_fd, .events = POLLIN},
		                      {.fd = client_fd, .events = POLLIN}};

		if (rc == -EAGAIN)
			rc = pps_tls_handshake(client, err, err_size);
		if (rs == -EAGAIN)
			rs = pps_tls_handshake(server, serr, sizeof(serr));
		if (rs == -EAGAIN || rc == -EAGAIN)
			poll(p, 2, 1000);
	}
	return rc;
}

static void
nonblocking_pair(int sv[2])
{
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	REQUIRE(pps_socket_set_nonblocking(sv[0]) == 0 && pps_socket_set_nonblocking(sv[1]) == 0);
}

/* Reads @len decrypted bytes from @t into @out, waiting with poll(2). */
static bool
read_all(pps_tls_t *t, int fd, uint8_t *out, size_t len)
{
	size_t got = 0;

	for (int idle = 0; got < len && idle < 50;) {
		ssize_t n = pps_tls_read(t, out + got, len - got);

		if (n > 0) {
			got += (size_t)n;
			idle = 0;
		} else if (n == -EAGAIN) {
			struct pollfd p = {.fd = fd, .events = POLLIN};
			poll(&p, 1, 100);
			idle++;
		} else {
			return false;
		}
	}
	return got == len;
}

static bool
send_all(int fd, const uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t k = send(fd, buf, len, MSG_NOSIGNAL);
		if (k <= 0)
			return false;
		buf += k;
		len -= (size_t)k;
	}
	return true;
}

static void
test_record_sizes(pps_tls_ctx_t *sctx, pps_tls_ctx_t *cctx)
{
	static const size_t mss_list[] = {536,  1000,  1220,  1400,  1448,  1460,  4000,  8948,
	                                  9000, 16384, 16405, 16406, 16407, 16500, 32741, 65483};
	static uint8_t plain[PPS_TLS_MAX_PLAINTEXT_BYTES], back[PPS_TLS_MAX_PLAINTEXT_BYTES],
	    wire[PPS_TLS_MAX_RECORD_BYTES + 64];
	char err[256];
	int sv[2];

	nonblocking_pair(sv);
	pps_tls_t *s = pps_tls_new(sctx, sv[0], NULL);
	pps_tls_t *c = pps_tls_new(cctx, sv[1], "127.0.0.1");
	REQUIRE(s && c);
	CHECK_EQ_INT(handshake_pair(s, c, sv[0], sv[1], err, sizeof(err)), 0);
	REQUIRE(pps_tls_handshake_done(s) && pps_tls_handshake_done(c));
	for (size_t i = 0; i < sizeof(plain); i++)
		plain[i] = (uint8_t)(i * 7 + 3);
	for (size_t k = 0; k < sizeof(mss_list) / sizeof(mss_list[0]); k++) {
		size_t mss = mss_list[k];
		/* The writer's unit and the TLS layer's room, as pps-minbuf.c and
		 * pps-transport-tls.c compute them. */
		size_t unit = mss < PPS_TLS_MAX_RECORD_BYTES ? mss : PPS_TLS_MAX_RECORD_BYTES;
		size_t room = unit - PPS_TLS_RECORD_OVERHEAD_BYTES, out = 0;

		plain[0] = (uint8_t)k;
		CHECK_EQ_INT(pps_tls_seal(s, plain, room, wire, unit, &out), 0);
		CHECK_EQ_INT(out, unit);
		CHECK(out <= mss);
		/* One record: its header says so (type 23, length of the rest). */
		CHECK_EQ_INT(wire[0], 23);
		CHECK_EQ_INT(((size_t)wire[3] << 8 | wire[4]) + 5, out);
		REQUIRE(send_all(sv[0], wire, out));
		memset(back, 0, room);
		CHECK(read_all(c, sv[1], back, room));
		CHECK(memcmp(back, plain, room) == 0);
	}
	/* A short packet (the end of a window): 22 bytes more, still one record. */
	size_t out = 0;
	CHECK_EQ_INT(pps_tls_seal(s, plain, 1, wire, sizeof(wire), &out), 0);
	CHECK_EQ_INT(out, 1 + PPS_TLS_RECORD_OVERHEAD_BYTES);
	REQUIRE(send_all(sv[0], wire, out));
	CHECK(read_all(c, sv[1], back, 1) && back[0] == plain[0]);
	/* The caller's buffer one byte short: refused, never a second record. */
	CHECK_EQ_INT(
	    pps_tls_seal(s, plain, 1000, wire, 1000 + PPS_TLS_RECORD_OVERHEAD_BYTES - 1, &out),
	    -EMSGSIZE);
	CHECK_EQ_INT(
	    pps_tls_seal(s, plain, PPS_TLS_MAX_PLAINTEXT_BYTES + 1, wire, sizeof(wire), &out),
	    -EINVAL);
	pps_tls_free(c);
	pps_tls_free(s);
	close(sv[0]);
	close(sv[1]);
}

/* A handshake the client must refuse: -EPROTO with @want in the reason. */
static void
expect_refused(pps_tls_ctx_t *sctx, pps_tls_ctx_t *cctx, const char *server_name, const char *want)
{
	char err[256] = "";
	int sv[2];

	nonblocking_pair(sv);
	pps_tls_t *s = pps_tls_new(sctx, sv[0], NULL), *c = pps_tls_new(cctx, sv[1], server_name);
	REQUIRE(s && c);
	CHECK_EQ_INT(handshake_pair(s, c, sv[0], sv[1], err, sizeof(err)), -EPROTO);
	if (!strstr(err, want)) {
		fprintf(stderr, "expected \"%s\" in \"%s\"\n", want, err);
		CHECK(strstr(err, want) != NULL);
	}
	pps_tls_free(c);
	pps_tls_free(s);
	close(sv[0]);
	close(sv[1]);
}

static void
test_verification(pps_tls_ctx_t *sctx, pps_tls_ctx_t *cctx)
{
	char err[256];
	int sv[2];
	pps_tls_ctx_t *other = pps_tls_ctx_new_client(other_path, err, sizeof(err));

	REQUIRE(other);
	/* A CA file that does not vouch for the server. */
	expect_refused(sctx, other, "127.0.0.1", "certificate verification failed");
	/* The right CA, another address or name than the certificate's. */
	expect_refused(sctx, cctx, "10.1.2.3", "IP address mismatch");
	expect_refused(sctx, cctx, "example.org", "hostname mismatch");

	/* A plaintext peer (a HELLO record starts with version 1). */
	nonblocking_pair(sv);
	pps_tls_t *s = pps_tls_new(sctx, sv[0], NULL);
	REQUIRE(s);
	REQUIRE(send_all(sv[1], (const uint8_t *)"\x01\x01\x00\x00", 4));
	CHECK_EQ_INT(pps_tls_handshake(s, err, sizeof(err)), -EPROTONOSUPPORT);
	uint8_t first = 0;
	CHECK(recv(sv[0], &first, 1, 0) == 1 && first == 1); /* still unread */
	pps_tls_free(s);
	close(sv[0]);
	close(sv[1]);
	pps_tls_ctx_free(other);
}

/* ---- through the writer on loopback TCP --------------------------------- */

#define WRITER_PACKETS 400

typedef struct {
	size_t offered_bytes; /* what fill was offered (constant) */
	bool offer_changed;
	unsigned produced;
	uint64_t produced_bytes;
	int error;
} producer_t;

static int
fill_cb(size_t mss_bytes, uint8_t *buf, size_t *len_bytes, bool *push, void *user)
{
	producer_t *p = user;

	if (p->produced == WRITER_PACKETS)
		return 0;
	if (p->offered_bytes && p->offered_bytes != mss_bytes)
		p->offer_changed = true;
	p->offered_bytes = mss_bytes;
	for (size_t i = 0; i < mss_bytes; i++)
		buf[i] = (uint8_t)(p->produced_bytes + i);
	*len_bytes = mss_bytes;
	*push = ++p->produced == WRITER_PACKETS;
	p->produced_bytes += mss_bytes;
	return 1;
}

static void
ended_cb(pps_transport_end_t how, const char *why, void *user)
{
	((producer_t *)user)->error = how == PPS_TRANSPORT_END_SEND ? -EIO : -ECONNRESET;
}

static void
test_writer(pps_tls_ctx_t *sctx, pps_tls_ctx_t *cctx, int maxseg)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), cfd = socket(AF_INET, SOCK_STREAM, 0), sfd;
	char err[256];
	static uint8_t back[PPS_TLS_MAX_PLAINTEXT_BYTES];

	REQUIRE(l >= 0 && cfd >= 0);
	REQUIRE(pps_socket_set_maxseg(l, maxseg) == 0 && pps_socket_set_maxseg(cfd, maxseg) == 0);
	REQUIRE(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 1) == 0);
	REQUIRE(getsockname(l, (struct sockaddr *)&a, &alen) == 0);
	REQUIRE(connect(cfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	REQUIRE((sfd = accept(l, NULL, NULL)) >= 0);
	close(l);
	REQUIRE(pps_socket_set_nonblocking(sfd) == 0 && pps_socket_set_nonblocking(cfd) == 0);

	pps_tls_t *s = pps_tls_new(sctx, sfd, NULL), *c = pps_tls_new(cctx, cfd, "127.0.0.1");
	REQUIRE(s && c);
	REQUIRE(handshake_pair(s, c, sfd, cfd, err, sizeof(err)) == 0);

	struct event_base *base = event_base_new();
	pps_minbuf_params_t params;
	producer_t p = {0};
	pps_minbuf_params_init(&params);
	REQUIRE(base);
	/* The layer takes the server's endpoint: freed with the transport. */
	pps_transport_t *t = pps_transport_tls_over(pps_transport_tcp_open(base, sfd, &params), s);
	REQUIRE(t);
	CHECK_EQ_INT(
	    pps_transport_set_events(
	        t, &(pps_transport_events_t){.fill_cb = fill_cb, .ended_cb = ended_cb}, &p),
	    0);
	CHECK_EQ_INT(pps_transport_start(t), 0);
	pps_transport_kick(t);

	uint64_t got = 0;
	bool in_order = true;
	for (int idle = 0; idle < 100 && p.error == 0;) {
		ssize_t n = pps_tls_read(c, back, sizeof(back));

		if (n > 0) {
			for (ssize_t i = 0; i < n; i++)
				in_order &= back[i] == (uint8_t)(got + (uint64_t)i);
			got += (uint64_t)n;
			idle = 0;
			continue;
		}
		if (n != -EAGAIN)
			break;
		if (p.produced == WRITER_PACKETS && got == p.produced_bytes)
			break;
		event_base_loop(base, EVLOOP_NONBLOCK);
		struct pollfd pf = {.fd = cfd, .events = POLLIN};
		if (poll(&pf, 1, 50) == 0)
			idle++;
	}

	pps_minbuf_stats_t st;
	REQUIRE(pps_transport_get_stats(t, &st) == 0);
	printf("maxseg %d: writer mss %u, offered %zu, %llu records, largest %u bytes\n", maxseg,
	       st.mss_bytes, p.offered_bytes, (unsigned long long)st.tls_records,
	       st.tls_max_record_bytes);
	CHECK_EQ_INT(p.error, 0);
	CHECK(!p.offer_changed);
	CHECK_EQ_INT(p.produced, WRITER_PACKETS);
	CHECK_EQ_INT(st.tls_records, WRITER_PACKETS);
	CHECK_EQ_INT(got, p.produced_bytes);
	CHECK(in_order);
	CHECK(st.mss_bytes > 0 && st.mss_bytes <= (uint32_t)maxseg);
	CHECK_EQ_INT(p.offered_bytes, st.mss_bytes - PPS_TLS_RECORD_OVERHEAD_BYTES);
	CHECK_EQ_INT(st.tls_max_record_bytes, st.mss_bytes);

	pps_transport_free(t);
	event_base_free(base);
	pps_tls_free(c);
	close(sfd);
	close(cfd);
}

/* Input of one flooded connection, as the session would see it. */
typedef struct {
	unsigned calls; /* input_cb calls */
	size_t bytes;   /* bytes handed up */
	bool in_order;
} flood_input_t;

static void
flood_input_cb(const uint8_t *buf, size_t len, void *user)
{
	flood_input_t *in = user;

	for (size_t i = 0; i < len; i++)
		in->in_order &= buf[i] == (uint8_t)(in->bytes + i);
	in->calls++;
	in->bytes += len;
}

/*
 * Two TLS peers that keep their connections full (records of the largest
 * size, more than a wake-up reads): one wake-up of the loop reads a bounded
 * share of each, both get a turn in the first pass, and every byte arrives in
 * order over the following passes.
 */
static void
test_read_budget(pps_tls_ctx_t *sctx, pps_tls_ctx_t *cctx)
{
	enum { PEERS = 2, RECORDS = 8 };
	static uint8_t plain[PPS_TLS_MAX_PLAINTEXT_BYTES];
	struct event_base *base = event_base_new();
	pps_transport_t *t[PEERS];
	pps_tls_t *c[PEERS];
	flood_input_t in[PEERS];
	int sv[PEERS][2];
	char err[256];
	pps_minbuf_params_t params;
	size_t want = 0;

	REQUIRE(base);
	pps_minbuf_params_init(&params);
	for (int p = 0; p < PEERS; p++) {
		pps_tls_t *s;

		nonblocking_pair(sv[p]);
		/* Room for the whole flood in the socket: no writer blocks. */
		REQUIRE(pps_socket_set_sndbuf(sv[p][1], 1 << 20) == 0 &&
		        pps_socket_set_rcvbuf(sv[p][0], 1 << 20) == 0);
		s = pps_tls_new(sctx, sv[p][0], NULL);
		c[p] = pps_tls_new(cctx, sv[p][1], "127.0.0.1");
		REQUIRE(s && c[p]);
		REQUIRE(handshake_pair(s, c[p], sv[p][0], sv[p][1], err, sizeof(err)) == 0);
		t[p] = pps_transport_tls_over(pps_transport_tcp_open(base, sv[p][0], &params), s);
		REQUIRE(t[p]);
		in[p] = (flood_input_t){.in_order = true};
	}
	for (int r = 0; r < RECORDS; r++) {
		for (size_t i = 0; i < sizeof(plain); i++)
			plain[i] = (uint8_t)(want + i);
		for (int p = 0; p < PEERS; p++)
			REQUIRE(pps_tls_send(c[p], plain, sizeof(plain)) == 0);
		want += sizeof(plain);
	}
	for (int p = 0; p < PEERS; p++)
		CHECK_EQ_INT(
		    pps_transport_set_events(
		        t[p], &(pps_transport_events_t){.input_cb = flood_input_cb}, &in[p]),
		    0);

	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	for (int p = 0; p < PEERS; p++) {
		printf("first pass: peer %d: %u reads, %zu of %zu bytes\n", p, in[p].calls,
		       in[p].bytes, want);
		CHECK(in[p].calls >= 1 && in[p].calls <= PPS_TRANSPORT_READS_PER_WAKEUP);
		CHECK(in[p].bytes < want);
	}
	for (int pass = 0; pass < 1000 && (in[0].bytes < want || in[1].bytes < want); pass++)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	for (int p = 0; p < PEERS; p++) {
		CHECK_EQ_INT(in[p].bytes, want);
		CHECK(in[p].in_order);
		pps_transport_free(t[p]);
		pps_tls_free(c[p]);
		close(sv[p][0]);
		close(sv[p][1]);
	}
	event_base_free(base);
}

int
main(void)
{
	char err[512];

	snprintf(dir, sizeof(dir), "/tmp/pps-test-tls-XXXXXX");
	REQUIRE(mkdtemp(dir));
	snprintf(cert_path, sizeof(cert_path), "%s/cert.pem", dir);
	snprintf(key_path, sizeof(key_path), "%s/key.pem", dir);
	snprintf(other_path, sizeof(other_path), "%s/other.pem", dir);
	snprintf(other_key_path, sizeof(other_key_path), "%s/other-key.pem", dir);
	make_cert("IP:127.0.0.1,DNS:localhost", cert_path, key_path);
	make_cert("IP:127.0.0.1,DNS:localhost", other_path, other_key_path);

	pps_tls_ctx_t *sctx = pps_tls_ctx_new_server(cert_path, key_path, err, sizeof(err));
	if (!sctx)
		fprintf(stderr, "server context: %s\n", err);
	pps_tls_ctx_t *cctx = pps_tls_ctx_new_client(cert_path, err, sizeof(err));
	if (!cctx)
		fprintf(stderr, "client context: %s\n", err);
	REQUIRE(sctx && cctx);
	/* Both or neither, and files that do not load, are named. */
	CHECK(!pps_tls_ctx_new_server(cert_path, "", err, sizeof(err)));
	CHECK(!pps_tls_ctx_new_server(cert_path, cert_path, err, sizeof(err)) &&
	      strstr(err, cert_path));
	CHECK(!pps_tls_ctx_new_client("/nonexistent.pem", err, sizeof(err)) &&
	      strstr(err, "/nonexistent.pem"));

	test_record_sizes(sctx, cctx);
	test_verification(sctx, cctx);
	test_read_budget(sctx, cctx);
	test_writer(sctx, cctx, 536);
	test_writer(sctx, cctx, 1448);
	test_writer(sctx, cctx, 8948);

	pps_tls_ctx_free(cctx);
	pps_tls_ctx_free(sctx);
	unlink(cert_path);
	unlink(key_path);
	unlink(other_path);
	unlink(other_key_path);
	rmdir(dir);
	return pps_test_result();
}
