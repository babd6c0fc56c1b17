/* SPDX-License-Identifier: MIT */
/* Configuration: defaults, files, --set precedence, every kind of error with
 * its message, and the shipped examples and docs/CONFIGURATION.md's reference
 * against the programs' key tables. argv[1] is the source root. */
#include "pps-client-settings.h"
#include "pps-config.h"
#include "pps-server-settings.h"
#include "pps-socket.h"
#include "pps-test.h"

#define SERVER pps_server_settings_schema()
#define CLIENT pps_client_settings_schema()

#include <errno.h>
#include <string.h>
#include <unistd.h>

static const char *source_root = ".";

static char *
write_temp(const char *name, const char *text)
{
	static char dir[256], path[512];
	FILE *f;

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "%s/pps-test-XXXXXX", P_tmpdir);
		REQUIRE(mkdtemp(dir));
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	REQUIRE(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static char *
read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *text;
	long size;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fseek(f, 0, SEEK_SET);
	text = calloc(1, (size_t)size + 1);
	REQUIRE(text);
	REQUIRE(fread(text, 1, (size_t)size, f) == (size_t)size);
	fclose(f);
	return text;
}

static void
test_defaults(void)
{
	pps_config_t *c = pps_config_new(SERVER);

	REQUIRE(c);
	CHECK_EQ_INT(pps_config_get_int(c, "pps", "window_frames"), 2);
	CHECK(strcmp(pps_config_get_string(c, "server", "listen"), "127.0.0.1:7400") == 0);
	CHECK_EQ_INT(pps_config_get_enum(c, "transport", "mode"), 1); /* minbuf */
	CHECK(!pps_config_get_bool(c, "transport", "ecn"));
	CHECK(strcmp(pps_config_get_origin(c, "pps", "window_frames"), "default") == 0);
	pps_config_free(c);
}

static void
test_file_and_set_precedence(void)
{
	pps_config_t *c = pps_config_new(SERVER);
	char err[256];
	char *path = write_temp("server.ini", "# comment\n[pps]\nwindow_frames = 4\n"
	                                      "latency_budget_ms=300\n[transport]\nmode = tcp\n"
	                                      "[source]\nfile = /tmp/a b.mkv\n");
	char *argv[] = {"prog",  "--set", "pps.window_frames=8",      "--config",
	                path,    "-q",    "--set=transport.ecn=true", "--",
	                "--set", NULL};
	int argc = 9;

	REQUIRE(c);
	CHECK_EQ_INT(pps_config_parse_args(c, &argc, argv, err, sizeof(err)), 0);
	/* The file applies first wherever it stands; --set after it, in order. */
	CHECK_EQ_INT(pps_config_get_int(c, "pps", "window_frames"), 8);
	CHECK_EQ_INT(pps_config_get_int(c, "pps", "latency_budget_ms"), 300);
	CHECK_EQ_INT(pps_config_get_enum(c, "transport", "mode"), 0);
	CHECK(pps_config_get_bool(c, "transport", "ecn"));
	CHECK(strcmp(pps_config_get_string(c, "source", "file"), "/tmp/a b.mkv") == 0);
	CHECK(strcmp(pps_config_get_origin(c, "pps", "window_frames"), "--set") == 0);
	CHECK(strcmp(pps_config_get_origin(c, "pps", "latency_budget_ms"), path) == 0);
	/* What is not ours stays, in order, and "--" ends our options. */
	CHECK_EQ_INT(argc, 4);
	CHECK(strcmp(argv[1], "-q") == 0 && strcmp(argv[2], "--") == 0 &&
	      strcmp(argv[3], "--set") == 0 && argv[4] == NULL);
	unlink(path);
	pps_config_free(c);
}

static void
expect_file_error(const char *text, const char *message)
{
	pps_config_t *c = pps_config_new(SERVER);
	char err[256] = "";
	char *path = write_temp("server.ini", text);

	REQUIRE(c);
	CHECK(pps_config_load_file(c, path, err, sizeof(err)) < 0);
	if (strcmp(err, message) != 0) {
		fprintf(stderr, "  got:      %s\n  expected: %s\n", err, message);
		CHECK(!"error message");
	}
	unlink(path);
	pps_config_free(c);
}

static void
test_file_errors(void)
{
	expect_file_error("[pps]\nwindow_frames = 0\n",
	                  "server.ini: [pps] window_frames = 0: must be 1..64");
	expect_file_error("[pps]\nwindow_frames = two\n",
	                  "server.ini: [pps] window_frames = two: must be 1..64");
	expect_file_error("[pps]\nwindow_frames = 99999999999999999999\n",
	                  "server.ini: [pps] window_frames = 99999999999999999999: must be 1..64");
	expect_file_error("[pps]\nwindw_frames = 2\n",
	                  "server.ini: [pps] windw_frames: unknown key");
	expect_file_error("[ppz]\nwindow_frames = 2\n",
	                  "server.ini: [ppz]: unknown section (pps-server reads [server] [source] "
	                  "[audio] [encoder] [pps] [transport] [adapt])");
	expect_file_error("[ppz]\n",
	                  "server.ini: [ppz]: unknown section (pps-server reads [server] "
	                  "[source] [audio] [encoder] [pps] [transport] [adapt])");
	/* A picture's size is even (4:2:0): refused here, not by the encoder at run time. */
	expect_file_error("[source]\nwidth = 641\n",
	                  "server.ini: [source] width = 641: must be an even number 64..3840");
	expect_file_error("[source]\nheight = 481\n",
	                  "server.ini: [source] height = 481: must be an even number 64..2160");
	expect_file_error("[transport]\necn = maybe\n",
	                  "server.ini: [transport] ecn = maybe: must be true or false");
	expect_file_error("[transport]\nmode = fast\n",
	                  "server.ini: [transport] mode = fast: must be one of tcp, minbuf");
	expect_file_error("[server]\nlisten = 7400\n",
	                  "server.ini: [server] listen = 7400: must be HOST:PORT or [V6ADDR]:PORT");
	expect_file_error(
	    "[server]\nlisten = ::1:7400\n",
	    "server.ini: [server] listen = ::1:7400: must be HOST:PORT or [V6ADDR]:PORT");
	expect_file_error("[server]\nlisten = localhost:70000\n",
	                  "server.ini: [server] listen = localhost:70000: must be HOST:PORT or "
	                  "[V6ADDR]:PORT");
	/* A client's section in a server's file. */
	expect_file_error("[playout]\npolicy = fixed\n",
	                  "server.ini: [playout]: unknown section (pps-server reads [server] "
	                  "[source] [audio] [encoder] [pps] [transport] [adapt])");
	{
		pps_config_t *c = pps_config_new(SERVER);
		char err[256];

		CHECK_EQ_INT(pps_config_load_file(c, "/nonexistent/server.ini", err, sizeof(err)),
		             -ENOENT);
		CHECK(strstr(err, "/nonexistent/server.ini") != NULL);
		pps_config_free(c);
	}
	/* Not an INI file at all. */
	{
		pps_config_t *c = pps_config_new(CLIENT);
		char err[256];
		char *path = write_temp("client.ini", "this is not = an ini file\n");

		CHECK(pps_config_load_file(c, path, err, sizeof(err)) < 0);
		CHECK(strstr(err, path) != NULL);
		unlink(path);
		pps_config_free(c);
	}
}

static void
test_set_errors(void)
{
	pps_config_t *c = pps_config_new(CLIENT);
	char err[256];

	REQUIRE(c);
	CHECK(pps_config_set(c, "playout.tolerance_ms=-1", err, sizeof(err)) < 0);
	CHECK(strcmp(err, "--set: [playout] tolerance_ms = -1: must be 0..10000") == 0);
	CHECK(pps_config_set(c, "playout=3", err, sizeof(err)) < 0);
	CHECK(strcmp(err, "--set playout=3: expected section.key=value") == 0);
	CHECK(pps_config_set(c, "playout.tolerance_ms", err, sizeof(err)) < 0);
	CHECK(pps_config_set(c, ".x=1", err, sizeof(err)) < 0);
	CHECK(pps_config_set(c, "playout.=1", err, sizeof(err)) < 0);
	CHECK(pps_config_set(c, "playout.tolerance_ms=", err, sizeof(err)) < 0);
	CHECK(strcmp(err, "--set: [playout] tolerance_ms = (empty): must be 0..10000") == 0);
	/* A failed --set changes nothing. */
	CHECK_EQ_INT(pps_config_get_int(c, "playout", "tolerance_ms"),
	             0); /* the default: from the stream */
	CHECK_EQ_INT(pps_config_set(c, "playout.policy=adaptive", err, sizeof(err)), 0);
	CHECK_EQ_INT(pps_config_get_enum(c, "playout", "policy"), 2);
	pps_config_free(c);
	c = pps_config_new(SERVER);
	REQUIRE(c);
	CHECK(pps_config_set(c, "source.width=641", err, sizeof(err)) < 0);
	CHECK(strcmp(err, "--set: [source] width = 641: must be an even number 64..3840") == 0,
	      "%s", err);
	CHECK_EQ_INT(pps_config_get_int(c, "source", "width"), 640);
	CHECK_EQ_INT(pps_config_set(c, "source.width=642", err, sizeof(err)), 0);
	/* An option standing for a key: the message names the option, not the key. */
	CHECK(pps_config_set_as(c, "server", "listen", "7400", "--listen ", err, sizeof(err)) < 0);
	CHECK(strcmp(err, "--listen 7400: must be HOST:PORT or [V6ADDR]:PORT") == 0, "%s", err);
	CHECK_EQ_INT(
	    pps_config_set_as(c, "server", "listen", "127.0.0.1:0", "--listen ", err, sizeof(err)),
	    0);
	CHECK(strcmp(pps_config_get_string(c, "server", "listen"), "127.0.0.1:0") == 0);
	CHECK(strcmp(pps_config_get_origin(c, "server", "listen"), "--listen") == 0);
	{
		char *argv[] = {"prog", "--set", NULL};
		int argc = 2;

		CHECK(pps_config_parse_args(c, &argc, argv, err, sizeof(err)) < 0);
		CHECK(strcmp(err, "--set: missing value") == 0);
	}
	{
		char *argv[] = {"prog", "--config", "a", "--config", "b", NULL};
		int argc = 5;

		CHECK(pps_config_parse_args(c, &argc, argv, err, sizeof(err)) < 0);
	}
	pps_config_free(c);
}

static void
test_split_address(void)
{
	char host[64], port[8];

	CHECK_EQ_INT(
	    pps_socket_split_address("127.0.0.1:7400", host, sizeof(host), port, sizeof(port)), 0);
	CHECK(strcmp(host, "127.0.0.1") == 0 && strcmp(port, "7400") == 0);
	CHECK_EQ_INT(pps_socket_split_address("[::1]:0", host, sizeof(host), port, sizeof(port)),
	             0);
	CHECK(strcmp(host, "::1") == 0 && strcmp(port, "0") == 0);
	CHECK_EQ_INT(pps_socket_split_address(":7400", host, sizeof(host), port, sizeof(port)), 0);
	CHECK(host[0] == '\0');
	CHECK_EQ_INT(pps_socket_split_address("[::1]7400", host, sizeof(host), port, sizeof(port)),
	             -EINVAL);
	CHECK_EQ_INT(pps_socket_split_address("host:", host, sizeof(host), port, sizeof(port)),
	             -EINVAL);
	CHECK_EQ_INT(pps_socket_split_address("host:12x", host, sizeof(host), port, sizeof(port)),
	             -EINVAL);
}

/* Every key's default passes its own validation, and names are sane. */
static void
check_table(const pps_config_schema_t *schema)
{
	const pps_config_key_t *keys = schema->keys;

	CHECK(schema->n_keys > 10);
	for (size_t i = 0; i < schema->n_keys; i++) {
		pps_config_t *c = pps_config_new(schema);
		char assignment[512], err[256];

		REQUIRE(c);
		snprintf(assignment, sizeof(assignment), "%s.%s=%s", keys[i].section, keys[i].key,
		         keys[i].default_value);
		CHECK_EQ_INT(pps_config_set(c, assignment, err, sizeof(err)), 0);
		CHECK(keys[i].help && keys[i].help[0]);
		CHECK(pps_config_schema_find(schema, keys[i].section, keys[i].key) == &keys[i]);
		pps_config_free(c);
	}
}

static void
test_table(void)
{
	check_table(SERVER);
	check_table(CLIENT);
}

/* The typed settings: the defaults as the modules take them, and the
 * combinations that are each valid but not together. */
static void
test_settings(void)
{
	pps_config_t *c = pps_config_new(SERVER);
	pps_server_settings_t s;
	pps_client_settings_t cs;
	char err[256];

	REQUIRE(c);
	CHECK_EQ_INT(pps_server_settings_from_config(c, &s, err, sizeof(err)), 0);
	CHECK_EQ_INT(s.server.media.encoder.window_frames, 2);
	CHECK(s.server.media.encoder.rate_adaptive && s.server.closed_loop);
	CHECK(strcmp(s.server.media.encoder.preset, "veryfast") == 0);
	CHECK(s.server.media.capture.type == PPS_CAPTURE_SOURCE_TEST);
	CHECK(strcmp(s.server.media.capture.pattern, "ball") == 0);
	CHECK(s.server.listener.session.transport.mode == PPS_MINBUF_MODE_MINBUF);
	CHECK_EQ_INT(s.server.listener.session.sched.latency_budget_us, 250000);
	CHECK_EQ_INT(s.server.adapt.interval_us, 250000);
	CHECK_EQ_INT(s.status_interval_us, 5000000);
	CHECK(strcmp(s.server.listen, "127.0.0.1:7400") == 0);
	/* The droppable pictures: B frames unless asked for disposable P frames. */
	CHECK(!s.server.media.encoder.disposable_p);
	CHECK_EQ_INT(pps_config_set(c, "pps.droppable=p-frames", err, sizeof(err)), 0);
	CHECK_EQ_INT(pps_server_settings_from_config(c, &s, err, sizeof(err)), 0);
	CHECK(s.server.media.encoder.disposable_p);
	CHECK(pps_config_set(c, "pps.droppable=i-frames", err, sizeof(err)) < 0);
	CHECK_EQ_INT(pps_config_set(c, "pps.droppable=b-frames", err, sizeof(err)), 0);
	CHECK_EQ_INT(pps_config_set(c, "source.type=file", err, sizeof(err)), 0);
	CHECK(pps_server_settings_from_config(c, &s, err, sizeof(err)) < 0);
	CHECK(strcmp(err, "source file: [source] file is not set") == 0);
	/* source.uri: a URI as it is, a plain path as the file:// URI it means. */
	CHECK_EQ_INT(pps_config_set(c, "source.type=uri", err, sizeof(err)), 0);
	CHECK_EQ_INT(pps_config_set(c, "source.uri=rtsp://camera/stream", err, sizeof(err)), 0);
	CHECK_EQ_INT(pps_server_settings_from_config(c, &s, err, sizeof(err)), 0);
	CHECK(strcmp(s.server.media.capture.input, "rtsp://camera/stream") == 0, "%s",
	      s.server.media.capture.input);
	CHECK_EQ_INT(pps_config_set(c, "source.uri=/videos/a clip.mp4", err, sizeof(err)), 0);
	CHECK_EQ_INT(pps_server_settings_from_config(c, &s, err, sizeof(err)), 0);
	CHECK(strcmp(s.server.media.capture.input, "file:///videos/a%20clip.mp4") == 0, "%s",
	      s.server.media.capture.input);
	/* A relative path: against the current folder. */
	CHECK_EQ_INT(pps_config_set(c, "source.uri=clip.mp4", err, sizeof(err)), 0);
	CHECK_EQ_INT(pps_server_settings_from_config(c, &s, err, sizeof(err)), 0);
	{
		const char *uri = s.server.media.capture.input;
		size_t len = strlen(uri);

		CHECK(strncmp(uri, "file:///", 8) == 0 && len > 17 &&
		          strcmp(uri + len - 9, "/clip.mp4") == 0,
		      "%s", uri);
	}
	CHECK_EQ_INT(pps_config_set(c, "source.type=test", err, sizeof(err)), 0);
	CHECK_EQ_INT(pps_config_set(c, "server.tls_cert=x.pem", err, sizeof(err)), 0);
	CHECK(pps_server_settings_from_config(c, &s, err, sizeof(err)) < 0);
	CHECK(strcmp(err, "[server] tls_key: needed with tls_cert (TLS takes both or neither)") ==
	      0);
	pps_config_free(c);

	c = pps_config_new(CLIENT);
	REQUIRE(c);
	CHECK_EQ_INT(pps_client_settings_from_config(c, &cs, err, sizeof(err)), 0);
	CHECK(cs.player.policy == PPS_PLAYOUT_ASAP);
	CHECK(strcmp(cs.player.connection.server, "127.0.0.1:7400") == 0);
	CHECK_EQ_INT(cs.player.connection.handshake_timeout_us, 5000000);
	CHECK(cs.display_mode == PPS_DISPLAY_AUTO);
	/* Lip sync's lead reaches the audio player, within BT.1359's 45 ms. */
	CHECK_EQ_INT(cs.player.audio_params.sync_lead_us, PPS_AUDIO_SYNC_LEAD_US);
	CHECK_EQ_INT(pps_config_set(c, "audio.sync_lead_ms=10", err, sizeof(err)), 0);
	CHECK_EQ_INT(pps_client_settings_from_config(c, &cs, err, sizeof(err)), 0);
	CHECK_EQ_INT(cs.player.audio_params.sync_lead_us, 10000);
	CHECK(pps_config_set(c, "audio.sync_lead_ms=46", err, sizeof(err)) < 0);
	pps_config_free(c);
}

/* The shipped example files are exactly what the tables generate, and each
 * loads cleanly into its program. */
static void
test_examples_match_table(void)
{
	const pps_config_schema_t *schemas[] = {SERVER, CLIENT};

	for (size_t i = 0; i < 2; i++) {
		const char *name = schemas[i]->program;
		char path[512], err[256];
		char *buf = NULL, *shipped;
		size_t size = 0;
		FILE *mem = open_memstream(&buf, &size);
		pps_config_t *c = pps_config_new(schemas[i]);

		REQUIRE(mem && c);
		pps_config_write_example(schemas[i], mem);
		fclose(mem);
		snprintf(path, sizeof(path), "%s/config/%s.ini", source_root, name);
		shipped = read_file(path);
		CHECK(shipped != NULL);
		if (shipped && strcmp(shipped, buf) != 0) {
			fprintf(stderr,
			        "%s differs from the key table: regenerate it with "
			        "`scripts/update-docs.sh`\n",
			        path);
			CHECK(!"example file up to date");
		}
		CHECK_EQ_INT(pps_config_load_file(c, path, err, sizeof(err)), 0);
		free(shipped);
		free(buf);
		pps_config_free(c);
	}
}

/* docs/CONFIGURATION.md's option reference is the tables', and names every key. */
static void
test_reference(void)
{
	const pps_config_schema_t *schemas[] = {SERVER, CLIENT};
	char path[512];
	char *doc, *begin, *end, *buf = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&buf, &size);

	snprintf(path, sizeof(path), "%s/docs/CONFIGURATION.md", source_root);
	doc = read_file(path);
	REQUIRE(doc && mem);
	pps_config_write_reference(SERVER, mem);
	fputc('\n', mem);
	pps_config_write_reference(CLIENT, mem);
	fclose(mem);
	begin = strstr(doc, "<!-- options:begin -->\n");
	end = strstr(doc, "<!-- options:end -->");
	CHECK(begin && end && end > begin);
	if (begin && end) {
		begin += strlen("<!-- options:begin -->\n");
		*end = '\0';
		for (size_t s = 0; s < 2; s++) {
			for (size_t i = 0; i < schemas[s]->n_keys; i++) {
				const pps_config_key_t *k = &schemas[s]->keys[i];
				char needle[128];

				snprintf(needle, sizeof(needle), "| `%s` | `", k->key);
				if (!strstr(begin, needle)) {
					fprintf(stderr, "%s lacks [%s] %s\n", path, k->section,
					        k->key);
					CHECK(!"key in the reference");
				}
			}
		}
		if (strcmp(begin, buf) != 0) {
			fprintf(stderr,
			        "%s: the option reference differs from the key tables: "
			        "regenerate it with `scripts/update-docs.sh`\n",
			        path);
			CHECK(!"reference up to date");
		}
	}
	free(doc);
	free(buf);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	if (argc > 1)
		source_root = argv[1];
	PPS_TEST_RUN(test_defaults);
	PPS_TEST_RUN(test_file_and_set_precedence);
	PPS_TEST_RUN(test_file_errors);
	PPS_TEST_RUN(test_set_errors);
	PPS_TEST_RUN(test_split_address);
	PPS_TEST_RUN(test_table);
	PPS_TEST_RUN(test_settings);
	PPS_TEST_RUN(test_examples_match_table);
	PPS_TEST_RUN(test_reference);
	{
		char dir[512];

		snprintf(dir, sizeof(dir), "%s", write_temp("x", ""));
		unlink(dir);
		*strrchr(dir, '/') = '\0';
		rmdir(dir);
	}
	return pps_test_result();
}
