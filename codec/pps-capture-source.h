/* SPDX-License-Identifier: MIT */
/*
 * The choices of a capture's source (STYLE habit 5): [source] type and
 * [source] timecode. Each enum sits beside its name table, indexed by the
 * enum and NULL-terminated; config/pps-config-keys.c uses these tables as
 * the keys' choices, so the index pps_config_get_enum() returns is the enum
 * value (codec/pps-capture.c switches on it).
 *
 * The tables are defined in this header, not in a .c of the codec library,
 * because config/ is below codec/ in the link order (the capture reads its
 * configuration): config includes this header and links nothing of codec.
 * The header includes nothing but <stddef.h> for that reason.
 */
#ifndef PPS_CAPTURE_SOURCE_H
#define PPS_CAPTURE_SOURCE_H

#include <stddef.h>

/* Where the pictures come from ([source] type). */
typedef enum {
	PPS_CAPTURE_SOURCE_TEST = 0,     /* videotestsrc, [source] pattern */
	PPS_CAPTURE_SOURCE_CAMERA = 1,   /* V4L2, [source] device */
	PPS_CAPTURE_SOURCE_FILE = 2,     /* [source] file, real time, looped */
	PPS_CAPTURE_SOURCE_URI = 3,      /* [source] uri */
	PPS_CAPTURE_SOURCE_PIPELINE = 4, /* [source] pipeline, a gst-launch description */
	PPS_CAPTURE_SOURCE_COUNT
} pps_capture_source_t;

static const char *const pps_capture_source_names[] = {
    [PPS_CAPTURE_SOURCE_TEST] = "test",         [PPS_CAPTURE_SOURCE_CAMERA] = "camera",
    [PPS_CAPTURE_SOURCE_FILE] = "file",         [PPS_CAPTURE_SOURCE_URI] = "uri",
    [PPS_CAPTURE_SOURCE_PIPELINE] = "pipeline", [PPS_CAPTURE_SOURCE_COUNT] = NULL,
};
_Static_assert(sizeof(pps_capture_source_names) / sizeof(pps_capture_source_names[0]) ==
                   PPS_CAPTURE_SOURCE_COUNT + 1,
               "a name for every pps_capture_source_t");

/* Whether the pixel timecode is stamped into the picture ([source] timecode). */
typedef enum {
	PPS_CAPTURE_TIMECODE_AUTO = 0, /* only for the test source */
	PPS_CAPTURE_TIMECODE_ON = 1,
	PPS_CAPTURE_TIMECODE_OFF = 2,
	PPS_CAPTURE_TIMECODE_COUNT
} pps_capture_timecode_t;

static const char *const pps_capture_timecode_names[] = {
    [PPS_CAPTURE_TIMECODE_AUTO] = "auto",
    [PPS_CAPTURE_TIMECODE_ON] = "true",
    [PPS_CAPTURE_TIMECODE_OFF] = "false",
    [PPS_CAPTURE_TIMECODE_COUNT] = NULL,
};
_Static_assert(sizeof(pps_capture_timecode_names) / sizeof(pps_capture_timecode_names[0]) ==
                   PPS_CAPTURE_TIMECODE_COUNT + 1,
               "a name for every pps_capture_timecode_t");

#endif /* PPS_CAPTURE_SOURCE_H */
