/*
 * `incoll job register|end`: what the Slurm plugin (contrib/slurm) does,
 * from a shell: registers a job with the manager, with its quota, before
 * its processes start, and ends it (the manager releases everything it
 * and its steps hold at once). For a workload manager's prolog and
 * epilog, and for operators. Proves the admin secret
 * (INCOLL_MGR_ADMIN_SECRET_FILE, --admin-secret; the fabric secret when
 * the manager has none). See docs/deployment.md.
 */
#include "cli.h"

#include "common/settings.h"
#include "fabric/mgr_fabric.h"
#include "fabric/mgr_tool.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: incoll job register NAME [--groups N] [--slots N]\n"
            "                  (--fabric DIR | --mgr HOST:PORT) "
            "[--admin-secret FILE]\n"
            "       incoll job end NAME [--reason TEXT]\n"
            "                  (--fabric DIR | --mgr HOST:PORT) "
            "[--admin-secret FILE]\n"
            "\n"
            "register: announces job NAME to the manager with its quota, N "
            "groups\n"
            "and N slots on each AN (0, the default: the manager's share,\n"
            "INCOLL_MGR_JOB_SHARE); a job NAME.STEP that is not registered "
            "itself\n"
            "shares NAME's quota. Prints \"job NAME gen=G groups=N "
            "slots=N\": give\n"
            "the processes INCOLL_JOB=NAME (or NAME.STEP) and INCOLL_GEN=G.\n"
            "end: the manager releases at once every group and request of "
            "NAME\n"
            "and of its steps, and forgets the registration.\n"
            "\n"
            "The admin secret is --admin-secret, else "
            "$INCOLL_MGR_ADMIN_SECRET_FILE,\n"
            "else the fabric's secret (DIR/secret, $INCOLL_SECRET_FILE).\n");
}

static int parse_u32(const char *s, uint32_t *v_p)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*s == '\0' || *end || v > 65535)
        return -1;
    *v_p = (uint32_t)v;
    return 0;
}

int cmd_job(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"groups", required_argument, NULL, 'g'},
        {"slots", required_argument, NULL, 'S'},
        {"fabric", required_argument, NULL, 'f'},
        {"mgr", required_argument, NULL, 'm'},
        {"admin-secret", required_argument, NULL, 'a'},
        {"reason", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dir = NULL, *mgr = NULL, *secret = NULL, *reason = "";
    const char *verb, *name;
    char addr[256], fsecret[PATH_MAX + 32], err[512];
    uint32_t groups = 0, slots = 0;
    incoll_status_t status;
    int opt;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'g':
        case 'S':
            if (parse_u32(optarg, opt == 'g' ? &groups : &slots) != 0) {
                fprintf(stderr, "incoll job: --%s '%s': a number 0..65535\n",
                        opt == 'g' ? "groups" : "slots", optarg);
                return 2;
            }
            break;
        case 'f':
            dir = optarg;
            break;
        case 'm':
            mgr = optarg;
            break;
        case 'a':
            secret = optarg;
            break;
        case 'r':
            reason = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (argc - optind != 2 || (dir == NULL) == (mgr == NULL)) {
        usage(stderr);
        return 2;
    }
    verb = argv[optind];
    name = argv[optind + 1];
    if (dir) {
        if (mgr_fabric_env(dir, addr, sizeof(addr), fsecret, sizeof(fsecret),
                           err, sizeof(err)) != 0) {
            fprintf(stderr, "incoll job: %s\n", err);
            return 1;
        }
    } else {
        const char *s = setting_str(SETTING_SECRET_FILE);
        snprintf(addr, sizeof(addr), "%s", mgr);
        snprintf(fsecret, sizeof(fsecret), "%s", s ? s : "");
    }
    if (secret == NULL)
        secret = setting_str(SETTING_MGR_ADMIN_SECRET_FILE);
    if (secret == NULL)
        secret = fsecret;
    if (strcmp(verb, "register") == 0) {
        mgr_tool_reg_t reg;
        status = mgr_tool_job_register(addr, secret, name, groups, slots, 5000,
                                       &reg, err, sizeof(err));
        if (status != INCOLL_OK) {
            fprintf(stderr, "incoll job: cannot register %s: %s\n", name, err);
            return 1;
        }
        printf("job %s gen=%u groups=%u slots=%u\n", name, reg.gen, reg.groups,
               reg.slots);
        return 0;
    }
    if (strcmp(verb, "end") == 0) {
        uint32_t jobs = 0, ngroups = 0;
        status = mgr_tool_job_end(addr, secret, name, reason, 5000, &jobs,
                                  &ngroups, err, sizeof(err));
        if (status != INCOLL_OK) {
            fprintf(stderr, "incoll job: cannot end %s: %s\n", name, err);
            return 1;
        }
        printf("job %s ended: %u jobs, %u groups released\n", name, jobs,
               ngroups);
        return 0;
    }
    fprintf(stderr, "incoll job: '%s' is neither register nor end\n", verb);
    usage(stderr);
    return 2;
}
