/* SPDX-License-Identifier: MIT */
/*
 * What a file or URI holds, before anything is built on it: GStreamer's
 * discoverer reads the container's headers (and decodes a little where they
 * do not say), so the encoder can be made for the source's own size and rate
 * before the capture pipeline runs.
 */
#include "pps-codec-internal.h"

#include <gst/gst.h>
#include <gst/pbutils/pbutils.h>
#include <stdio.h>
#include <string.h>

#define PROBE_TIMEOUT_S 10

int
pps_capture_probe(pps_capture_source_t type, const char *input, pps_capture_probe_t *probe,
                  char *err, size_t err_size)
{
	GstDiscoverer *discoverer;
	GstDiscovererInfo *info = NULL;
	GList *videos = NULL, *audios = NULL;
	GError *error = NULL;
	char *uri = NULL;
	int ret = 0;

	memset(probe, 0, sizeof(*probe));
	if (type != PPS_CAPTURE_SOURCE_FILE && type != PPS_CAPTURE_SOURCE_URI) {
		snprintf(err, err_size, "only a file or a URI can be probed");
		return -EINVAL;
	}
	if (!gst_is_initialized())
		gst_init(NULL, NULL);
	uri =
	    type == PPS_CAPTURE_SOURCE_FILE ? gst_filename_to_uri(input, &error) : g_strdup(input);
	if (!uri) {
		snprintf(err, err_size, "%s", error ? error->message : "not a file name");
		g_clear_error(&error);
		return -EINVAL;
	}
	discoverer = gst_discoverer_new(PROBE_TIMEOUT_S * GST_SECOND, &error);
	if (discoverer)
		info = gst_discoverer_discover_uri(discoverer, uri, &error);
	if (!info || gst_discoverer_info_get_result(info) != GST_DISCOVERER_OK) {
		snprintf(err, err_size, "%s", error ? error->message : "cannot be read");
		ret = -EIO;
		goto out;
	}
	videos = gst_discoverer_info_get_video_streams(info);
	audios = gst_discoverer_info_get_audio_streams(info);
	if (!videos) {
		snprintf(err, err_size, "has no video");
		ret = -ENOENT;
		goto out;
	}
	probe->width = (int)gst_discoverer_video_info_get_width(videos->data);
	probe->height = (int)gst_discoverer_video_info_get_height(videos->data);
	probe->fps_num = (int)gst_discoverer_video_info_get_framerate_num(videos->data);
	probe->fps_den = (int)gst_discoverer_video_info_get_framerate_denom(videos->data);
	probe->has_audio = audios != NULL;
	if (probe->width <= 0 || probe->height <= 0) {
		snprintf(err, err_size, "its video has no size");
		ret = -EIO;
	}
out:
	gst_discoverer_stream_info_list_free(videos);
	gst_discoverer_stream_info_list_free(audios);
	if (info)
		g_object_unref(info);
	if (discoverer)
		g_object_unref(discoverer);
	g_clear_error(&error);
	g_free(uri);
	return ret;
}
