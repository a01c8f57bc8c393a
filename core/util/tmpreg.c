/*
 * tmpreg.c - temporary files removed when a signal ends the process
 * (tmpreg.h).  A slot is filled, then marked in use; the handler reads
 * only slots marked in use, and a slot is marked free before it is
 * filled again, so the handler never sees half a path.
 */
#define _POSIX_C_SOURCE 200809L
#include "util/tmpreg.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#define SLOTS	8
#define PATHMAX	4096

static char slot[SLOTS][PATHMAX];
static volatile sig_atomic_t used[SLOTS];

void tmpreg_add(const char *path)
{
	size_t n = strlen(path);

	if (n >= PATHMAX)
		return;
	for (int i = 0; i < SLOTS; i++)
		if (!__atomic_load_n(&used[i], __ATOMIC_ACQUIRE) &&
		    !__atomic_exchange_n(&used[i], -1, __ATOMIC_ACQ_REL)) {
			memcpy(slot[i], path, n + 1);
			__atomic_store_n(&used[i], 1, __ATOMIC_RELEASE);
			return;
		}
}

void tmpreg_del(const char *path)
{
	for (int i = 0; i < SLOTS; i++)
		if (__atomic_load_n(&used[i], __ATOMIC_ACQUIRE) == 1 &&
		    !strcmp(slot[i], path)) {
			__atomic_store_n(&used[i], 0, __ATOMIC_RELEASE);
			return;
		}
}

void tmpreg_unlink_all(void)
{
	for (int i = 0; i < SLOTS; i++)
		if (__atomic_load_n(&used[i], __ATOMIC_ACQUIRE) == 1)
			(void)unlink(slot[i]);
}

static void on_signal(int sig)
{
	tmpreg_unlink_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

void tmpreg_on_signals(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (unsigned i = 0; i < sizeof(sigs) / sizeof(*sigs); i++) {
		struct sigaction old;

		/* a signal ignored by whoever started us stays ignored */
		if (!sigaction(sigs[i], NULL, &old) &&
		    old.sa_handler != SIG_IGN)
			(void)sigaction(sigs[i], &sa, NULL);
	}
}
