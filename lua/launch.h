/* launch.h: the launcher shared by `moonshard -n N` (main.c) and ms.spawn (l_launch.c). */
#ifndef MS_LUA_LAUNCH_H
#define MS_LUA_LAUNCH_H

/* Runs `$MS_MPIRUN (default mpirun) -np nprocs <flags> -- exe words...` as a child and waits.
 * SIGINT/SIGTERM to this process end the job (mpirun ends the ranks; it is killed if it has not
 * within a few seconds) and print one line. Returns the status to exit with: mpirun's, 128 +
 * the signal, or 1 when mpirun cannot start (printed, naming `what`). */
int launch_mpirun(const char *what, long nprocs, const char *exe, int nwords, const char *const *words);

#endif
