/* SPDX-License-Identifier: MIT */
/* libgstppstream: registers ppssrc and ppssink. */
#include "pps-gst.h"

static gboolean
plugin_init(GstPlugin *plugin)
{
	/* A rank, so that playbin and uridecodebin pick ppssrc for pps:// URIs
	 * (the only handler of the scheme: it displaces nothing). */
	if (!gst_element_register(plugin, "ppssrc", GST_RANK_PRIMARY, gst_pps_src_get_type()))
		return FALSE;
#ifdef PPS_GST_HAVE_SINK
	if (!gst_element_register(plugin, "ppssink", GST_RANK_NONE, gst_pps_sink_get_type()))
		return FALSE;
#endif
	return TRUE;
}

#define PACKAGE "ppstream"
GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, ppstream,
                  "ppstream: priority-progress live video over TCP", plugin_init, PPS_VERSION,
                  "MIT", "ppstream", "https://github.com/ppstream/ppstream")
