/*
 * A fabric.conf fabric whose host count differs from the job's ranks, for
 * both MPI front ends (mpi_fit.h).
 */
#include "mpi/mpi_fit.h"

#include <stdio.h>
#include <string.h>

/* The value of name in DIR/fabric.env (NAME=VALUE or NAME='VALUE', as
 * `incoll fabric up` writes it) into buf; -1 when absent. */
static int fabric_env_get(const char *dir, const char *name, char *buf,
                          size_t len)
{
    char path[PATH_MAX + 16], line[PATH_MAX + 64];
    size_t nl = strlen(name);
    int ret = -1;
    FILE *f;

    snprintf(path, sizeof(path), "%s/fabric.env", dir);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (ret != 0 && fgets(line, sizeof(line), f)) {
        char *v = line + nl + 1;
        size_t n;
        if (strncmp(line, name, nl) != 0 || line[nl] != '=')
            continue;
        v[strcspn(v, "\n")] = '\0';
        n = strlen(v);
        if (n >= 2 && v[0] == '\'' && v[n - 1] == '\'') {
            v[n - 1] = '\0';
            v++;
        }
        if (*v != '\0' && strlen(v) < len) {
            snprintf(buf, len, "%s", v);
            ret = 0;
        }
    }
    fclose(f);
    return ret;
}

/*
 * A fabric.conf of fewer hosts than MPI_COMM_WORLD has ranks: when the
 * fabric has a manager (DIR/fabric.env), libincoll takes it from there,
 * ranks share hosts (rank r on host r of INCOLL_HOSTS, modulo the hosts)
 * and each host's ranks reduce through one leader (src/host/hier.c).
 * Returns 1 when it filled params' manager, secret file and (unless
 * INCOLL_HOSTS is set) hosts from DIR/fabric.env.
 */
static int adopt_fabric_mgr(const char *fab, const char *own,
                            incoll_init_params_t *params,
                            mpi_fit_adopted_t *adopted)
{

    if (fabric_env_get(fab, "INCOLL_MGR", adopted->mgr, sizeof(adopted->mgr)) !=
            0 ||
        fabric_env_get(fab, "INCOLL_SECRET_FILE", adopted->secret,
                       sizeof(adopted->secret)) != 0)
        return 0;
    params->field_mask |= INCOLL_INIT_FIELD_MGR | INCOLL_INIT_FIELD_SECRET_FILE;
    params->mgr = adopted->mgr;
    params->secret_file = adopted->secret;
    if ((own == NULL || *own == '\0') &&
        fabric_env_get(fab, "INCOLL_HOSTS", adopted->hosts,
                       sizeof(adopted->hosts)) == 0) {
        params->field_mask |= INCOLL_INIT_FIELD_HOSTS;
        params->hosts = adopted->hosts;
    }
    return 1;
}

int mpi_fit_fabric(const char *fab, int size, const char *own_hosts,
                   const char *host_map, const char *map_why,
                   incoll_init_params_t *params, mpi_fit_adopted_t *adopted,
                   char *why, size_t why_len, char *fix, size_t fix_len,
                   char *note, size_t note_len)
{
    char err[256];
    int nhosts = 0, rc = 0;

    note[0] = '\0';
    if (incoll_fabric_hosts(fab, &nhosts, NULL, err, sizeof(err)) !=
        INCOLL_OK) {
        snprintf(why, why_len, "cannot read the fabric: %.200s", err);
        return -1;
    }
    if (nhosts != size && adopt_fabric_mgr(fab, own_hosts, params, adopted)) {
        snprintf(note, note_len,
                 "the fabric in %s has %d hosts and MPI_COMM_WORLD %d ranks: "
                 "using its manager (fabric.env), ranks sharing a host reduce "
                 "through one leader",
                 fab, nhosts, size);
    } else if (nhosts > size) {
        /* Without a manager every host of fabric.conf is a member of the
         * world group: one without a rank would never contribute. */
        snprintf(why, why_len,
                 "the fabric in %s has %d hosts but MPI_COMM_WORLD has only "
                 "%d ranks: without a manager every host of fabric.conf "
                 "needs a rank",
                 fab, nhosts, size);
        snprintf(fix, fix_len,
                 "run at least %d ranks, or bring up a fabric of %d hosts "
                 "(`incoll fabric up --hosts %d`)",
                 nhosts, size, size);
        rc = -1;
    } else if (nhosts < size) {
        /* Ranks share the hosts: libincoll's node level reduces each
         * host's ranks into the one that binds its port
         * (docs/hierarchy.md, "Without a manager"). */
        if (map_why && map_why[0]) {
            snprintf(why, why_len, "%s", map_why);
            snprintf(fix, fix_len,
                     "place the ranks of each fabric.conf host on one node "
                     "(or all on one machine), or give the ranks the "
                     "fabric's manager");
            rc = -1;
        } else {
            if (host_map) {
                params->field_mask |= INCOLL_INIT_FIELD_HOST_MAP;
                params->host_map = host_map;
            }
            snprintf(note, note_len,
                     "the fabric in %s has %d hosts and MPI_COMM_WORLD %d "
                     "ranks, no manager: ranks sharing a host reduce through "
                     "one leader",
                     fab, nhosts, size);
        }
    }
    return rc;
}
