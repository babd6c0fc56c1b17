/* SPDX-License-Identifier: MIT */
/*
 * pps_process (pps-process.h): fork and exec with the signals blocked across
 * the fork, so that the loop's handlers (which write to the parent's signal
 * socket) are reset in the child before any signal can reach them; pipes
 * for stdout and stderr, read by events.
 */
#include "pps-process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Reads of a pipe after the process was reaped, at most. */
#define PROCESS_DRAIN_READS 64

typedef struct {
	int fd; /* -1: closed */
	struct event *event;
	char line[PPS_PROCESS_MAX_LINE_BYTES + 1];
	size_t len;
} process_pipe_t;

struct pps_process {
	struct event_base *base;
	pps_process_events_t events;
	void *user;
	pid_t pid;
	process_pipe_t out, err;
};

static void
pipe_close(process_pipe_t *p)
{
	if (p->event)
		event_free(p->event);
	p->event = NULL;
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	p->len = 0;
}

static void
pipe_line(pps_process_t *proc, process_pipe_t *p)
{
	p->line[p->len] = '\0';
	p->len = 0;
	if (proc->events.line_cb)
		proc->events.line_cb(p == &proc->out, p->line, proc->user);
}

/* One read (the loop comes back for more); each whole line passed on, one
 * longer than the buffer in pieces. 1: read something, 0: nothing there now,
 * -1: the pipe ended (and is closed, its last line passed on). */
static int
pipe_read(pps_process_t *proc, process_pipe_t *p)
{
	char buf[4096];
	ssize_t n = read(p->fd, buf, sizeof(buf));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		if (p->len > 0)
			pipe_line(proc, p);
		pipe_close(p);
		return -1;
	}
	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] == '\n' || p->len == PPS_PROCESS_MAX_LINE_BYTES) {
			pipe_line(proc, p);
			if (buf[i] == '\n')
				continue;
		}
		p->line[p->len++] = buf[i];
	}
	return 1;
}

static void
pipe_cb(evutil_socket_t fd, short what, void *user)
{
	pps_process_t *proc = user;

	pipe_read(proc, fd == proc->out.fd ? &proc->out : &proc->err);
}

static int
pipe_open(pps_process_t *proc, process_pipe_t *p, int fds[2])
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	p->fd = fds[0];
	p->len = 0;
	p->event = event_new(proc->base, p->fd, EV_READ | EV_PERSIST, pipe_cb, proc);
	if (!p->event) {
		close(fds[1]);
		fds[1] = -1;
		pipe_close(p);
		return -ENOMEM;
	}
	return 0;
}

/* The child's side of the fork: async-signal-safe calls only, then exec. */
static void __attribute__((noreturn))
child_exec(char *const argv[], int out_fd, int err_fd, pid_t parent)
{
	struct sigaction default_action = {.sa_handler = SIG_DFL};
	int null_fd = open("/dev/null", O_RDONLY);
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &default_action, NULL);
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(127);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
	    dup2(err_fd, STDERR_FILENO) < 0)
		_exit(127);
	execv(argv[0], argv);
	{
		static const char msg[] = "cannot run the program (exec failed)\n";
		ssize_t n = write(STDERR_FILENO, msg, sizeof(msg) - 1);

		(void)n;
	}
	_exit(127);
}

pps_process_t *
pps_process_new(struct event_base *base, const pps_process_events_t *events, void *user)
{
	pps_process_t *proc = calloc(1, sizeof(*proc));

	if (!proc)
		return NULL;
	proc->base = base;
	if (events)
		proc->events = *events;
	proc->user = user;
	proc->out.fd = proc->err.fd = -1;
	return proc;
}

int
pps_process_spawn(pps_process_t *proc, char *const argv[])
{
	int out_fds[2] = {-1, -1}, err_fds[2] = {-1, -1}, ret;
	pid_t pid, parent = getpid();
	sigset_t all, old_mask;

	if (proc->pid > 0)
		return -EBUSY;
	if ((ret = pipe_open(proc, &proc->out, out_fds)) < 0 ||
	    (ret = pipe_open(proc, &proc->err, err_fds)) < 0)
		goto err_pipes;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old_mask);
	pid = fork();
	if (pid == 0)
		child_exec(argv, out_fds[1], err_fds[1], parent);
	ret = -errno;
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	if (pid < 0)
		goto err_pipes;
	/* Both sides set the group, whichever runs first: a signal to the
	 * group must not miss the child. */
	setpgid(pid, pid);
	close(out_fds[1]);
	close(err_fds[1]);
	event_add(proc->out.event, NULL);
	event_add(proc->err.event, NULL);
	proc->pid = pid;
	return 0;

err_pipes:
	if (out_fds[1] >= 0)
		close(out_fds[1]);
	if (err_fds[1] >= 0)
		close(err_fds[1]);
	pipe_close(&proc->out);
	pipe_close(&proc->err);
	return ret;
}

pid_t
pps_process_pid(const pps_process_t *proc)
{
	return proc->pid;
}

void
pps_process_signal(pps_process_t *proc, int sig)
{
	if (proc->pid > 0)
		kill(-proc->pid, sig);
}

void
pps_process_reaped(pps_process_t *proc)
{
	process_pipe_t *pipes[2] = {&proc->out, &proc->err};

	proc->pid = 0;
	for (int i = 0; i < 2; i++) {
		for (int reads = 0; pipes[i]->fd >= 0 && reads < PROCESS_DRAIN_READS; reads++)
			if (pipe_read(proc, pipes[i]) <= 0)
				break;
		if (pipes[i]->fd >= 0 && pipes[i]->len > 0)
			pipe_line(proc, pipes[i]);
		pipe_close(pipes[i]);
	}
}

void
pps_process_free(pps_process_t *proc)
{
	if (!proc)
		return;
	if (proc->pid > 0) {
		kill(-proc->pid, SIGKILL);
		waitpid(proc->pid, NULL, 0);
	}
	pipe_close(&proc->out);
	pipe_close(&proc->err);
	free(proc);
}
