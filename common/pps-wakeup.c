/* SPDX-License-Identifier: MIT */
#include "pps-wakeup.h"

#include <errno.h>
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct pps_wakeup {
	int fd;
	struct event *event;
	pps_wakeup_cb cb;
	void *user;
};

static void
readable_cb(evutil_socket_t fd, short what, void *user)
{
	pps_wakeup_t *w = user;
	uint64_t counter;
	ssize_t n;

	/* Read before the callback drains: a signal that comes while it runs
	 * makes the eventfd readable again, so nothing left is missed. EAGAIN
	 * is a spurious wake-up; nothing else can fail on a valid eventfd. */
	n = read(fd, &counter, sizeof(counter));
	(void)n;
	w->cb(w->user);
}

pps_wakeup_t *
pps_wakeup_new(struct event_base *base, pps_wakeup_cb cb, void *user)
{
	pps_wakeup_t *w = calloc(1, sizeof(*w));
	int saved;

	if (!w)
		return NULL;
	w->cb = cb;
	w->user = user;
	w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->fd < 0)
		goto err;
	w->event = event_new(base, w->fd, EV_READ | EV_PERSIST, readable_cb, w);
	if (!w->event || event_add(w->event, NULL) < 0) {
		errno = ENOMEM;
		goto err;
	}
	return w;

err:
	saved = errno;
	pps_wakeup_free(w);
	errno = saved;
	return NULL;
}

int
pps_wakeup_signal(pps_wakeup_t *w)
{
	uint64_t one = 1;

	/* EAGAIN: the counter is at its maximum, a wake-up is pending anyway. */
	if (write(w->fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return -errno;
	return 0;
}

void
pps_wakeup_free(pps_wakeup_t *w)
{
	if (!w)
		return;
	if (w->event)
		event_free(w->event);
	if (w->fd >= 0)
		close(w->fd);
	free(w);
}
