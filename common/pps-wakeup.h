/* SPDX-License-Identifier: MIT */
/*
 * The hand-off from any thread to the thread that owns an event loop: a
 * worker (the encoder, a GStreamer streaming thread, an application thread
 * stopping an element) calls pps_wakeup_signal(), and the callback runs
 * once on the loop's thread, where it takes what the worker left behind a
 * lock or in atomics. Wake-ups coalesce: several signals before the loop
 * runs give one callback, so the callback drains everything pending.
 *
 * An eventfd watched by the loop (the way a pipe carries messages to a
 * compositor's loop in Weston's remoting): no polling, no timer.
 */
#ifndef PPS_WAKEUP_H
#define PPS_WAKEUP_H

struct event_base;

typedef struct pps_wakeup pps_wakeup_t;

/* Runs on the loop's thread after one or more pps_wakeup_signal(). */
typedef void (*pps_wakeup_cb)(void *user);

/* Watches a new eventfd on @base. NULL with errno (EMFILE, ENOMEM, ...). */
pps_wakeup_t *pps_wakeup_new(struct event_base *base, pps_wakeup_cb cb, void *user);
/* Any thread, never blocks: the callback runs soon on the loop's thread.
 * 0, or a negative errno from write(2) (the wake-up is lost). */
int pps_wakeup_signal(pps_wakeup_t *wakeup);
/* The loop's thread, with no signal racing it (the workers are stopped). */
void pps_wakeup_free(pps_wakeup_t *wakeup);

#endif /* PPS_WAKEUP_H */
