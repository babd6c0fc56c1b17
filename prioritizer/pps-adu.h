/* SPDX-License-Identifier: MIT */
/*
 * ADUs: application data units, the currency between the encoder and the
 * prioritizer. One ADU is one encoded picture of one layer: a frame at a
 * temporal layer and a quality layer. ADUs are immutable once made and
 * reference counted, so that one encoded ADU is shared by every client's
 * session without copies.
 *
 * Threading: an ADU may be created on an encoder thread and handed to the
 * event loop; the reference count is atomic, everything else is read-only.
 */
#ifndef PPS_ADU_H
#define PPS_ADU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most ADUs one ADU may depend on (the references of its picture). */
#define PPS_ADU_MAX_DEPS 4
/* Layer limits, shared with the wire format. */
#define PPS_ADU_MAX_TEMPORAL_LAYERS 4
#define PPS_ADU_MAX_QUALITY_LAYERS  4

typedef enum {
	PPS_ADU_FRAME_IDR = 0,  /* intra, resets every dependency of its layer */
	PPS_ADU_FRAME_P = 1,    /* reference, temporal layer 0 */
	PPS_ADU_FRAME_BREF = 2, /* B used as reference (hierarchical GOP middle layer) */
	PPS_ADU_FRAME_B = 3,    /* disposable B, top temporal layer */
	/* Disposable P, top temporal layer: references the anchor before it,
	 * nothing references it, decoded in display order (no reordering). */
	PPS_ADU_FRAME_PD = 4,
} pps_adu_frame_type_t;

typedef struct {
	uint32_t id;            /* unique per stream, increasing in decode order */
	uint32_t frame_index;   /* display order, from the capture */
	int64_t capture_us;     /* CLOCK_REALTIME when the frame was captured, microseconds */
	uint32_t decode_order;  /* position in the layer's bitstream */
	uint8_t frame_type;     /* pps_adu_frame_type_t */
	uint8_t temporal_layer; /* 0 = base frame rate */
	uint8_t quality_layer;  /* 0 = base quality */
	uint8_t dep_count;      /* valid entries in deps */
	uint32_t deps[PPS_ADU_MAX_DEPS]; /* ids of the ADUs this one needs to decode */
} pps_adu_info_t;

typedef struct pps_adu pps_adu_t;

/*
 * Makes an ADU from @info and a copy of @size bytes at @data. The reference
 * count starts at 1. Returns NULL with errno set (EINVAL for dep_count or
 * layers out of range, ENOMEM).
 */
pps_adu_t *pps_adu_new(const pps_adu_info_t *info, const uint8_t *data, size_t size);

/* Takes over @data (allocated with malloc) instead of copying it. */
pps_adu_t *pps_adu_new_take(const pps_adu_info_t *info, uint8_t *data, size_t size);

/* One more reference (a relay's window shares the ADU with the test that made it). */
pps_adu_t *pps_adu_ref(pps_adu_t *adu);
void pps_adu_unref(pps_adu_t *adu);

const pps_adu_info_t *pps_adu_info(const pps_adu_t *adu);
const uint8_t *pps_adu_data(const pps_adu_t *adu);
size_t pps_adu_size(const pps_adu_t *adu);

/* True if @adu lists @id among its dependencies. */
bool pps_adu_depends_on(const pps_adu_t *adu, uint32_t id);

#endif /* PPS_ADU_H */
