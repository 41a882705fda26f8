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
