/* SPDX-License-Identifier: MIT */
#include "peer-common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pps-socket.h"

int
pps_peer_split_host_port(const char *arg, char *host, size_t host_size, int *port)
{
	char text[16];

	if (pps_socket_split_address(arg, host, host_size, text, sizeof(text)) < 0)
		return -EINVAL;
	*port = atoi(text);
	return *port >= 1 ? 0 : -EINVAL;
}

char *
pps_peer_srt_stats_string(GstElement *element)
{
	GstStructure *st = NULL;
	char *text;

	g_object_get(element, "stats", &st, NULL);
	if (!st)
		return NULL;
	text = gst_structure_to_string(st);
	gst_structure_free(st);
	return text;
}

void
pps_peer_write_json_string(FILE *out, const char *text)
{
	if (!text) {
		fputs("null", out);
		return;
	}
	fputc('"', out);
	for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(out, "\\%c", *c);
		else if (*c < 0x20)
			fprintf(out, "\\u%04x", *c); /* control characters are not allowed raw */
		else
			fputc(*c, out);
	}
	fputc('"', out);
}

uint64_t
pps_peer_probe_bytes(GstPadProbeInfo *info)
{
	uint64_t bytes = 0;

	if (info->type & GST_PAD_PROBE_TYPE_BUFFER) {
		bytes = gst_buffer_get_size(GST_PAD_PROBE_INFO_BUFFER(info));
	} else if (info->type & GST_PAD_PROBE_TYPE_BUFFER_LIST) {
		GstBufferList *list = GST_PAD_PROBE_INFO_BUFFER_LIST(info);

		for (guint i = 0; i < gst_buffer_list_length(list); i++)
			bytes += gst_buffer_get_size(gst_buffer_list_get(list, i));
	}
	return bytes;
}

FILE *
pps_peer_stats_open(const char *path, const char *program)
{
	FILE *f = fopen(path, "w");

	if (!f)
		fprintf(stderr, "%s: cannot write %s: %s\n", program, path, strerror(errno));
	return f;
}

void
pps_peer_stats_close(FILE *f, const char *srt)
{
	fputs(",\"srt_stats\":", f);
	pps_peer_write_json_string(f, srt);
	fputs("}\n", f);
	fclose(f);
}
