/* SPDX-License-Identifier: MIT */
/*
 * pps_process: one child process on a libevent loop, for pps_call. It runs
 * in a process group of its own, gets SIGTERM when the parent dies
 * (PR_SET_PDEATHSIG), reads /dev/null, and its stdout and stderr are pipes
 * the loop reads (one read per wake-up), passed on line by line. Its exit is
 * the owner's to learn (a SIGCHLD event and waitpid: the owner reaps, then
 * calls pps_process_reaped). Thread: the loop's.
 */
#ifndef PPS_PROCESS_H
#define PPS_PROCESS_H

#include <event2/event.h>
#include <stdbool.h>
#include <sys/types.h>

/* Longest line passed on; longer lines are cut in pieces of this size. */
#define PPS_PROCESS_MAX_LINE_BYTES 1024

typedef struct pps_process pps_process_t;

typedef struct {
	/* One line the process wrote, without its newline (a last line without
	 * one too), from its stdout (@on_stdout) or its stderr. */
	void (*line_cb)(bool on_stdout, const char *line, void *user);
} pps_process_events_t;

/* NULL with errno on failure. Nothing runs yet. */
pps_process_t *pps_process_new(struct event_base *base, const pps_process_events_t *events,
                               void *user);

/*
 * Runs @argv (argv[0] a path, NULL-terminated; copied by the exec) as the
 * process. 0, or a negative errno (pipes, fork; -EBUSY while one runs). An
 * exec that fails shows as an exit with status 127 and a line on stderr.
 */
int pps_process_spawn(pps_process_t *proc, char *const argv[]);

/* Its pid while it runs (until pps_process_reaped), else 0. */
pid_t pps_process_pid(const pps_process_t *proc);

/* @sig to its process group (the process and whatever it started); nothing
 * when it does not run. */
void pps_process_signal(pps_process_t *proc, int sig);

/*
 * The owner has reaped the process: what it wrote is in its pipes, at most a
 * pipe's capacity each. Passes that on (a bounded number of reads: something
 * it left behind may hold the pipes still) and closes them; pid is 0 after.
 */
void pps_process_reaped(pps_process_t *proc);

/* A process still running is killed (SIGKILL to its group) and reaped. */
void pps_process_free(pps_process_t *proc);

#endif
