/*
 * `incoll info`: what this build is and how it is configured, like
 * ucx_info: the version, the reduction kernels picked for this CPU, and
 * every knob of the table in src/common/knobs.c with its current value.
 */
#include "cli.h"

#include "incoll.h"

#include "common/dtype.h"
#include "common/knobs.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: incoll info\n\n"
                 "Prints the version, the reduction implementation and every "
                 "knob (environment\nvariable) with its current value, "
                 "default, component and meaning.\n");
}

/* Empty strings print as "-" so the columns stay readable. */
static const char *dash(const char *s)
{
    return s && *s ? s : "-";
}

int cmd_info(int argc, char **argv)
{
    int w_name = 4, w_val = 5, w_def = 7, w_comp = 9;

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
    printf("\n");
    for (const knob_t *k = knob_table; k->name; k++) {
        int n;
        if ((n = (int)strlen(k->name)) > w_name)
            w_name = n;
        if ((n = (int)strlen(dash(knob_str(k->name)))) > w_val)
            w_val = n;
        if ((n = (int)strlen(dash(k->def))) > w_def)
            w_def = n;
        if ((n = (int)strlen(dash(k->component))) > w_comp)
            w_comp = n;
    }
    printf("%-*s  %-*s  %-*s  %-*s  %s\n", w_name, "KNOB", w_val, "VALUE",
           w_def, "DEFAULT", w_comp, "COMPONENT", "DESCRIPTION");
    for (const knob_t *k = knob_table; k->name; k++)
        printf("%-*s  %-*s  %-*s  %-*s  %s\n", w_name, k->name, w_val,
               dash(knob_str(k->name)), w_def, dash(k->def), w_comp,
               dash(k->component), k->doc);
    return 0;
}
