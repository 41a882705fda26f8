#include "incoll.h"

INCOLL_API const char *incoll_status_string(incoll_status_t status)
{
    switch (status) {
#define INCOLL_X_CASE(name, value, text)                                       \
    case name:                                                                 \
        return text;
        INCOLL_STATUS_LIST(INCOLL_X_CASE)
#undef INCOLL_X_CASE
    }
    return "unknown status";
}

/* ---- version and the reasons of where a call ran ---- */

INCOLL_API unsigned incoll_get_version(unsigned *major_p, unsigned *minor_p)
{
    if (major_p)
        *major_p = INCOLL_VERSION_MAJOR;
    if (minor_p)
        *minor_p = INCOLL_VERSION_MINOR;
    return INCOLL_VERSION;
}

#define STR_(x) #x
#define STR(x) STR_(x)

INCOLL_API const char *incoll_get_version_string(void)
{
    return STR(INCOLL_VERSION_MAJOR) "." STR(INCOLL_VERSION_MINOR);
}

INCOLL_API const char *incoll_why_string(incoll_why_t why)
{
    static const char *const text[INCOLL_WHY_COUNT] = {
        "no collective completed yet",
        "ran in the network",
        "one rank: nothing to exchange",
        "the communicator has no fabric group",
        "its fabric group cannot run this collective with this op and "
        "dtype",
        "larger than the in-network allreduce carries for a gather or "
        "scatter",
        "a host-based algorithm was asked for",
        "the fabric group failed during the call: the result came from "
        "the hosts",
    };
    return (unsigned)why < INCOLL_WHY_COUNT ? text[why] : "unknown reason";
}
