/*
 * incoll-launch-agent: the "remote shell" through which MPI launchers
 * start their daemons on the hosts of an emulated fabric (docs/mpi.md,
 * `incoll mpirun --emulate`).
 *
 *   incoll-launch-agent HOST COMMAND...
 *
 * Open MPI's rsh launcher (`--mca plm_rsh_agent`) and MPICH's Hydra
 * (`-launcher rsh -launcher-exec`) call their agent as they would call
 * ssh: the host name, then the command as words that the remote shell
 * joins with spaces and runs. Here HOST is the network namespace of one
 * emulated host ("inc1a2b3c-h4", the names `incoll mpirun` writes into the
 * hostfile), and the command runs in it through `ip netns exec HOST
 * /bin/sh -c COMMAND`, which also gives it that namespace's view of /sys.
 * So the daemon (orted, hydra_pmi_proxy) and the ranks it starts live in
 * the emulated host, and their TCP traffic crosses its shaped link.
 *
 * The command also gets a UTS namespace whose host name is HOST, as a
 * real host has a name of its own. Without it every emulated host is
 * the machine's name, and Open MPI's daemons, which name their session
 * directories /tmp/ompi.HOSTNAME.UID and clean up what they find there
 * at start, remove each other's: the daemon that loses exits after it
 * has daemonized, and mpirun waits for it for ever.
 *
 * HOST must be a host namespace of an emulated fabric registered in
 * /run/incoll-emu (see src/fabric/emu.h): the agent never enters anything
 * else. Like ssh, it exits 255 when it cannot run the command.
 *
 * A separate small program, not an `incoll` subcommand, because Hydra
 * takes the agent as one path without arguments.
 */
#include <ctype.h>
#include <sched.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REGISTRY_DIR                                                           \
    "/run/incoll-emu" /* EMU_REGISTRY_DIR of src/fabric/emu.h */
#define NETNS_DIR "/run/netns"

/* 1 if name is "inc" + 6 hex digits + "-h" + a rank, and its prefix is a
 * registered emulated fabric with that namespace in /run/netns. */
static int emulated_host(const char *name, char *why, size_t len)
{
    char path[PATH_MAX], prefix[16];
    const char *p = name + 3;

    if (strncmp(name, "inc", 3) != 0)
        goto bad_name;
    for (int i = 0; i < 6; i++, p++)
        if (!isxdigit((unsigned char)*p))
            goto bad_name;
    if (strncmp(p, "-h", 2) != 0 || !isdigit((unsigned char)p[2]))
        goto bad_name;
    for (p += 2; *p; p++)
        if (!isdigit((unsigned char)*p))
            goto bad_name;
    snprintf(prefix, sizeof(prefix), "%.9s", name);
    snprintf(path, sizeof(path), REGISTRY_DIR "/%s", prefix);
    if (access(path, F_OK) != 0) {
        snprintf(why, len, "no emulated fabric %s is registered (%s: %s)",
                 prefix, path, strerror(errno));
        return 0;
    }
    snprintf(path, sizeof(path), NETNS_DIR "/%s", name);
    if (access(path, F_OK) != 0) {
        snprintf(why, len, "no network namespace %s (%s)", name,
                 strerror(errno));
        return 0;
    }
    return 1;

bad_name:
    snprintf(why, len,
             "'%s' is not the namespace of an emulated host "
             "(inc<6 hex digits>-h<rank>)",
             name);
    return 0;
}

static const char *ip_path(void)
{
    static const char *const paths[] = {"/usr/sbin/ip", "/sbin/ip",
                                        "/usr/bin/ip", "/bin/ip"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    return NULL;
}

int main(int argc, char **argv)
{
    char why[PATH_MAX + 128], *cmd;
    const char *host, *ip;
    size_t len = 1;
    int a = 1;

    /* ssh-style flags a launcher may put before the host (-x, -q, ...). */
    while (a < argc && argv[a][0] == '-')
        a++;
    if (argc - a < 2) {
        fprintf(stderr, "usage: incoll-launch-agent HOST COMMAND...\n"
                        "(the remote shell of `incoll mpirun --emulate`)\n");
        return 255;
    }
    host = argv[a++];
    if (!emulated_host(host, why, sizeof(why))) {
        fprintf(stderr, "incoll-launch-agent: %s\n", why);
        return 255;
    }
    ip = ip_path();
    if (ip == NULL) {
        fprintf(stderr, "incoll-launch-agent: ip not found (install "
                        "iproute2)\n");
        return 255;
    }
    /* A host name of its own (see above). */
    if (unshare(CLONE_NEWUTS) != 0 || sethostname(host, strlen(host)) != 0) {
        fprintf(stderr,
                "incoll-launch-agent: cannot give %s a host name of its "
                "own (UTS namespace: %s)\n",
                host, strerror(errno));
        return 255;
    }
    /* The words of the command, joined by spaces, as ssh does. */
    for (int i = a; i < argc; i++)
        len += strlen(argv[i]) + 1;
    cmd = malloc(len);
    if (cmd == NULL) {
        fprintf(stderr, "incoll-launch-agent: out of memory\n");
        return 255;
    }
    cmd[0] = '\0';
    for (int i = a; i < argc; i++) {
        if (i > a)
            strcat(cmd, " ");
        strcat(cmd, argv[i]);
    }
    execl(ip, "ip", "netns", "exec", host, "/bin/sh", "-c", cmd, (char *)NULL);
    fprintf(stderr, "incoll-launch-agent: cannot run %s: %s\n", ip,
            strerror(errno));
    free(cmd);
    return 255;
}
