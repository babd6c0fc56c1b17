/* SPDX-License-Identifier: MIT */
/*
 * The one mapping between a pipeline's running time and ppstream's clock
 * (CLOCK_REALTIME microseconds), both ways. Each reads the two clocks at the
 * same moment and carries an age across: "this happened that long ago" is
 * the same on both, whatever their offset and whatever the pipeline's base
 * time. ppssink maps its pads' buffers to capture times with it, ppssrc its
 * frames' and audio slots' play times to buffer times, so pictures and
 * sound of the same instant get the same time on either side.
 */
#include "pps-gst.h"
#include "pps-time.h"

GstClockTime
pps_gst_running_time_at(GstElement *element, int64_t when_us)
{
	GstClock *clock = gst_element_get_clock(element);
	GstClockTime now, base, running;
	gint64 ago_ns;

	if (!clock)
		return GST_CLOCK_TIME_NONE;
	now = gst_clock_get_time(clock);
	base = gst_element_get_base_time(element);
	ago_ns = (pps_time_realtime_us() - when_us) * (gint64)GST_USECOND;
	gst_object_unref(clock);
	running = now > base ? now - base : 0;
	if (ago_ns < 0)
		ago_ns = 0;
	return running > (GstClockTime)ago_ns ? running - (GstClockTime)ago_ns : 0;
}

int64_t
pps_gst_realtime_of(GstElement *element, GstClockTime running)
{
	int64_t now_us = pps_time_realtime_us();
	GstClock *clock = gst_element_get_clock(element);
	gint64 age_ns;

	if (!clock)
		return now_us;
	age_ns = GST_CLOCK_TIME_IS_VALID(running)
	             ? (gint64)gst_clock_get_time(clock) -
	                   (gint64)(gst_element_get_base_time(element) + running)
	             : 0;
	gst_object_unref(clock);
	if (age_ns < 0 || age_ns > GST_SECOND)
		return now_us;
	return now_us - age_ns / 1000;
}
