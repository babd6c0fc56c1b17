/* SPDX-License-Identifier: MIT */
/* STREAM_INFO <-> pps_stream_params_t: the one place either side maps them. */
#include "pps-codec-internal.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

void
pps_stream_params_to_wire(const pps_stream_params_t *params, unsigned priority_policy,
                          uint32_t latency_budget_ms, pps_wire_stream_info_t *info)
{
	*info = (pps_wire_stream_info_t){
	    .protocol_version = PPS_WIRE_VERSION,
	    .codec = PPS_CODEC_ID_H264_LAYERED,
	    .upscale_filter = (uint8_t)params->upscale_filter,
	    .width = (uint16_t)params->width,
	    .height = (uint16_t)params->height,
	    .base_width = (uint16_t)params->base_width,
	    .base_height = (uint16_t)params->base_height,
	    .fps_num = (uint16_t)params->fps,
	    .fps_den = 1,
	    .window_frames = (uint8_t)params->window_frames,
	    .temporal_layers = (uint8_t)params->temporal_layers,
	    .quality_layers = (uint8_t)params->quality_layers,
	    .priority_policy = (uint8_t)priority_policy,
	    .latency_budget_ms = latency_budget_ms,
	    .gop_frames = (uint32_t)params->gop_frames,
	};
}

int
pps_stream_params_from_wire(const pps_wire_stream_info_t *info, pps_stream_params_t *params)
{
	if (info->codec != PPS_CODEC_ID_H264_LAYERED || !info->fps_den ||
	    info->fps_num < info->fps_den || !info->window_frames || info->gop_frames > INT_MAX)
		return -EINVAL;
	memset(params, 0, sizeof(*params));
	params->width = info->width;
	params->height = info->height;
	params->fps = info->fps_num / info->fps_den;
	params->base_width = info->base_width;
	params->base_height = info->base_height;
	params->temporal_layers = info->temporal_layers;
	params->quality_layers = info->quality_layers;
	/* Not on the wire: the encoder's rule gives it from T and W. */
	params->minigop_frames = pps_gop_minigop_frames(info->temporal_layers, info->window_frames);
	params->window_frames = info->window_frames;
	params->gop_frames = (int)info->gop_frames;
	params->upscale_filter = info->upscale_filter;
	return 0;
}
