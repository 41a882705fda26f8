/*
 * `incoll info`: what this build is and how it is configured, like
 * ucx_info: the version, the reduction kernels picked for this CPU, every
 * setting of the table in src/common/settings.h with its type, range,
 * default and current value, and the host-based algorithms of each
 * collective (src/core/algo.c) with the settings that choose among them.
 */
#include "cli.h"

#include "incoll.h"

#include "common/dtype.h"
#include "common/settings.h"
#include "common/fabric_conf.h"
#include "common/tune.h"
#include "common/udp.h"
#include "common/wire_mac.h"
#include "core/algo.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: incoll info\n\n"
                 "Prints the version, the reduction implementation, the "
                 "data path's mac and\nthe kernel's udp offloads, every "
                 "setting (environment\nvariable) with its type, range, "
                 "default, current value, component and meaning,\nthe "
                 "algorithms of each collective, and the MPI layer's "
                 "selection\ntable in force and where it came from.\n");
}

static void print_algorithms(void)
{
    printf("algorithms (allreduce by INCOLL_ALGO_SHORT_BYTES, bcast and "
           "reduce by\nINCOLL_ALGO_PIPE_BYTES, allgather by "
           "INCOLL_ALGO_SHORT_BYTES):\n");
    printf("  %-15s %-2s %-14s %s\n", "COLLECTIVE", "ID", "NAME",
           "DESCRIPTION");
    for (int k = 0; k < ALGO_COUNT; k++)
        printf("  %-15s %-2d %-14s %s\n", "allreduce", k,
               algo_name((algo_kind_t)k), algo_desc((algo_kind_t)k));
    for (int i = 0; i < CALGO_COUNT; i++) {
        const algo_calgo_info_t *a = algo_calgo_info((algo_calgo_t)i);
        printf("  %-15s %-2d %-14s %s\n", algo_coll_name(a->coll), (int)a->id,
               a->name, a->desc);
    }
}

/* Whether t's shape matches the fabric of INCOLL_FABRIC, for a job of
 * one rank per fabric host (a job's init compares its own ranks and ranks
 * per host); applies it to t as such a job would. */
static void print_tune_shape(tune_table_t *t)
{
    const char *dir = setting_str(SETTING_FABRIC);
    char path[4096], err[512];
    const char *words;
    fabric_conf_t conf;
    tune_job_t job;

    if (dir == NULL || *dir == '\0' ||
        snprintf(path, sizeof(path), "%s/fabric.conf", dir) >=
            (int)sizeof(path) ||
        fabric_conf_load(path, &conf, err, sizeof(err)) != INCOLL_OK) {
        tune_apply_shape(t, 0, 0, 0);
        printf("  shape: %s (no fabric.conf in INCOLL_FABRIC to compare it "
               "with: a job compares its own at init)\n",
               t->shape_ok == -1 ? t->shape_note : "not compared");
        return;
    }
    job.ranks = job.hosts = (uint32_t)conf.nhosts;
    job.ppn = 1;
    tune_conf_tree(&conf, &job.radix, &job.levels);
    tune_apply_job(t, &job);
    words = strstr(t->shape_note, "): ");
    words = words ? words + 3 : t->shape_note;
    if (t->shape_ok == 1)
        printf("  shape: matches this fabric (%d hosts, a rank each, radix "
               "%u, %u levels): %s\n",
               conf.nhosts, job.radix, job.levels, words);
    else if (t->shape_ok == 0)
        printf("  shape: does not match this fabric (%d hosts, a rank each, "
               "radix %u, %u levels): %s\n",
               conf.nhosts, job.radix, job.levels, words);
    else
        printf("  shape: %s\n", t->shape_note);
    fabric_conf_free(&conf);
}

/* The MPI layer's selection table as a job started from this environment
 * would get it (rank 0's: INCOLL_TUNE_FILE, $INCOLL_FABRIC/tune.conf or
 * the built-in one, INCOLL_TUNE before it). */
static void print_tune(void)
{
    static tune_table_t t;
    char err[512];

    printf("\nselection table of the MPI layer (docs/tuning.md; first match "
           "decides, no match: inc):\n");
    if (tune_load(&t, setting_str(SETTING_TUNE_FILE),
                  setting_str(SETTING_FABRIC), setting_str(SETTING_TUNE), err,
                  sizeof(err)) != 0) {
        printf("  error: %s (the MPI layer stays off)\n", err);
        return;
    }
    printf("  from: %s%s%s\n", t.source, t.env[0] ? ", INCOLL_TUNE=" : "",
           t.env);
    if (t.shape[0])
        printf("  measured on: %s\n", t.shape);
    print_tune_shape(&t);
    for (uint32_t i = 0; i < t.n; i++) {
        char line[256], where[320];
        tune_entry_format(&t.e[i], line, sizeof(line));
        tune_entry_where(&t, (int)i, where, sizeof(where));
        printf("  %-44s # %s\n", line, where);
    }
    if (t.n == 0)
        printf("  (no entries: every collective in libincoll)\n");
}

int cmd_info(int argc, char **argv)
{
    if (argc > 1) {
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        usage(stderr);
        return 2;
    }
    printf("incoll %d.%d\n", INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR);
    printf("reduction kernels: %s\n", reduce_impl_name());
    printf("data-path mac: %s (%s; INCOLL_MAC); available:",
           wire_mac_alg_name(wire_mac_alg_default()),
           wire_mac_alg_impl(wire_mac_alg_default()));
    for (int a = 0; a < WIRE_MAC_COUNT; a++)
        if (wire_mac_alg_available((wire_mac_alg_t)a, NULL))
            printf(" %s", wire_mac_alg_name((unsigned)a));
    printf("\nudp offloads of this kernel: %s (INCOLL_UDP_GSO=%s, "
           "INCOLL_UDP_GRO=%s)\n",
           udp_offloads(), setting_text(SETTING_UDP_GSO),
           setting_text(SETTING_UDP_GRO));
    printf("\nsettings (name, type and range, default, value, component; "
           "src/common/settings.h):\n");
    settings_print(stdout, NULL, 1);
    printf("\n");
    print_algorithms();
    print_tune();
    return 0;
}
