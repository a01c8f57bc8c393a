/*
 * tmpreg.h - the temporary files a signal must not leave behind: a tool
 * killed by SIGINT or SIGTERM while it writes OUT (ptrepack's
 * ".OUT.ptfs-new.XXXXXX", as large as the output) removes them from its
 * handler.  Paths are kept in fixed slots, so the handler does nothing
 * but unlink(2): async-signal-safe.  SIGKILL cannot be caught: the name
 * is still tagged .ptfs-new. for a person to see.
 */
#ifndef PT_UTIL_TMPREG_H
#define PT_UTIL_TMPREG_H

/* Remember @path (a file this process made and will rename or remove);
 * silently not when every slot is taken or it is too long. */
void tmpreg_add(const char *path);
/* Forget it: renamed into place, or removed. */
void tmpreg_del(const char *path);
/* Remove every remembered file: from a signal handler. */
void tmpreg_unlink_all(void);
/* SIGINT, SIGTERM and SIGHUP: remove them, then die of the signal as
 * before.  For tools; the daemon has libfuse's handlers. */
void tmpreg_on_signals(void);

#endif
