/* SPDX-License-Identifier: MIT */
/*
 * ADU info <-> ADU_FRAGMENT: the one mapping, used by the scheduler (server)
 * and the reassembler (client), and the limits the two formats share.
 */
#include "pps-prioritizer.h"

#include <string.h>

_Static_assert(PPS_ADU_MAX_DEPS == PPS_WIRE_MAX_DEPS, "deps: ADU and wire limits differ");
_Static_assert(PPS_ADU_MAX_TEMPORAL_LAYERS == PPS_WIRE_MAX_TEMPORAL_LAYERS,
               "temporal layers: ADU and wire limits differ");
_Static_assert(PPS_ADU_MAX_QUALITY_LAYERS == PPS_WIRE_MAX_QUALITY_LAYERS,
               "quality layers: ADU and wire limits differ");
_Static_assert(PPS_ADU_FRAME_PD == PPS_WIRE_MAX_FRAME_TYPE,
               "frame types: ADU and wire ranges differ");
/* WINDOW_BEGIN.adus and ADU_FRAGMENT.priority (an index in the window) are u16. */
_Static_assert(PPS_WINDOW_MAX_ADUS <= UINT16_MAX, "a window's ADUs must fit the wire's u16");

void
pps_adu_info_to_wire(const pps_adu_info_t *info, pps_wire_adu_fragment_t *f)
{
	f->adu_id = info->id;
	f->frame_index = info->frame_index;
	f->capture_us = info->capture_us;
	f->decode_order = info->decode_order;
	f->frame_type = info->frame_type;
	f->temporal_layer = info->temporal_layer;
	f->quality_layer = info->quality_layer;
	f->dep_count = info->dep_count;
	memcpy(f->deps, info->deps, sizeof(f->deps));
}

void
pps_adu_info_from_wire(const pps_wire_adu_fragment_t *f, pps_adu_info_t *info)
{
	memset(info, 0, sizeof(*info));
	info->id = f->adu_id;
	info->frame_index = f->frame_index;
	info->capture_us = f->capture_us;
	info->decode_order = f->decode_order;
	info->frame_type = f->frame_type;
	info->temporal_layer = f->temporal_layer;
	info->quality_layer = f->quality_layer;
	info->dep_count = f->dep_count;
	memcpy(info->deps, f->deps, sizeof(info->deps));
}
