/*
 * Client calls for tools (`incoll stat`, `incoll fabric`, tests): talk to a
 * running manager as MGR_ROLE_TOOL.
 */
#ifndef INCOLL_FABRIC_MGR_TOOL_H
#define INCOLL_FABRIC_MGR_TOOL_H

#include "common/mgr_proto.h"

#include <stddef.h>
#include <stdint.h>

/*
 * Connects to the manager at addr, proves knowledge of the secret in
 * secret_file, asks for its state and returns it as text (the `incoll
 * stat` format of docs/manager.md) in *text_p, which the caller frees.
 * Gives up after timeout_ms. On error writes the cause into err.
 */
incoll_status_t mgr_tool_stat(const char *addr, const char *secret_file,
                              uint32_t timeout_ms, char **text_p, char *err,
                              size_t errlen);

/*
 * Finds "key=value" on the first line of text that starts with prefix
 * (e.g. "manager " or "an name=s0 ") and returns value as a number, or -1
 * when absent.
 */
long long mgr_tool_stat_value(const char *text, const char *prefix,
                              const char *key);

#endif
