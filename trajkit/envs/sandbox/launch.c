/* The namespace sandbox's launcher, compiled: the same arguments and the same steps as launch.py (read its
 * docstring), without a Python start on every exec (about 20 ms here). trajkit.envs.sandbox.namespace builds it once per
 * source version with the host's C compiler into trajkit's cache and uses launch.py where it cannot; the
 * hostile tests run both.
 *
 *   launch ROOT CWD UID GID BASE SPAN CAPS LIMITS COMMAND [NAME=VALUE ...]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

static void fail(const char *what) {
    dprintf(2, "trajkit sandbox launcher: %s: %s\n", what, strerror(errno));
    _exit(125);
}

static long number(const char *text, const char *what) {
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || *end || end == text) {
        errno = EINVAL;
        fail(what);
    }
    return value;
}

static void set_limits(char *spec) {
    static const struct { const char *name; int resource; } known[] = {
        {"NPROC", RLIMIT_NPROC}, {"AS", RLIMIT_AS}, {"FSIZE", RLIMIT_FSIZE}, {"NOFILE", RLIMIT_NOFILE},
        {"CORE", RLIMIT_CORE}};
    for (char *item = strtok(spec, ","); item; item = strtok(NULL, ",")) {
        char *eq = strchr(item, '=');
        if (!eq) { errno = EINVAL; fail("limits"); }
        *eq = 0;
        size_t i = 0;
        while (i < sizeof known / sizeof known[0] && strcmp(known[i].name, item)) i++;
        if (i == sizeof known / sizeof known[0]) { errno = EINVAL; fail(item); }
        struct rlimit r = {(rlim_t)number(eq + 1, item), (rlim_t)number(eq + 1, item)};
        if (setrlimit(known[i].resource, &r)) fail("setrlimit");
    }
}

static void child(char **argv, uint64_t keep, int last_cap, int ready_w, int go_r) {
    char c = 0;
    long uid = number(argv[3], "uid"), gid = number(argv[4], "gid");
    if (unshare(CLONE_NEWUSER)) fail("unshare(CLONE_NEWUSER)");
    if (write(ready_w, "u", 1) != 1) fail("write");
    if (read(go_r, &c, 1) != 1 || c != 'g') { errno = EPERM; fail("the uid map was not written"); }
    if (setresgid(0, 0, 0) || setgroups(0, NULL) || setresuid(0, 0, 0)) fail("becoming root of the namespace");
    set_limits(argv[8]);
    if (chroot(argv[1]) || chdir("/")) fail("chroot");
    if (uid != 0) keep = 0;
    for (int cap = 0; cap <= last_cap; cap++)
        if (!(keep >> cap & 1) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)) fail("prctl(PR_CAPBSET_DROP)");
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) fail("prctl(PR_SET_NO_NEW_PRIVS)");
    if (uid != 0 && (setresgid(gid, gid, gid) || setresuid(uid, uid, uid))) fail("changing user");
    if (chdir(argv[2])) {
        dprintf(2, "sh: cd: %s: %s\n", argv[2], strerror(errno));
        _exit(126);
    }
    char *sh[] = {"sh", "-c", argv[9], NULL};
    execve("/bin/sh", sh, argv + 10);
    dprintf(2, "trajkit sandbox launcher: /bin/sh: %s\n", strerror(errno));
    _exit(127);
}

int main(int argc, char **argv) {
    if (argc < 10) {
        dprintf(2, "usage: launch ROOT CWD UID GID BASE SPAN CAPS LIMITS COMMAND [NAME=VALUE ...]\n");
        return 125;
    }
    int last_cap = 40;
    FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "r");
    if (!f || fscanf(f, "%d", &last_cap) != 1) fail("/proc/sys/kernel/cap_last_cap");
    fclose(f);
    uint64_t keep = 0;
    for (char *cap = strtok(argv[7], ","); cap; cap = strtok(NULL, ","))
        keep |= UINT64_C(1) << number(cap, "caps");
    int ready[2], go[2];
    if (pipe(ready) || pipe(go)) fail("pipe");
    pid_t pid = fork();
    if (pid < 0) fail("fork");
    if (pid == 0) {
        close(ready[0]);
        close(go[1]);
        child(argv, keep, last_cap, ready[1], go[0]);
    }
    close(ready[1]);
    close(go[0]);
    char c = 0;
    if (read(ready[0], &c, 1) == 1 && c == 'u') {
        char path[4096], map[64];
        int n = snprintf(map, sizeof map, "0 %s %s\n", argv[5], argv[6]);
        for (int i = 0; i < 2; i++) {  /* the namespace's own /proc: pid is a pid of this namespace */
            snprintf(path, sizeof path, "%s/proc/%d/%s", argv[1], (int)pid, i ? "gid_map" : "uid_map");
            int fd = open(path, O_WRONLY);
            if (fd < 0 || write(fd, map, n) != n) fail(path);
            close(fd);
        }
        if (write(go[1], "g", 1) != 1) fail("write");
    }
    close(go[1]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) fail("waitpid");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
