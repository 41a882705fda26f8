/*
 * Client calls for tools (`incoll stat`, `incoll fabric`, `incoll job`,
 * the Slurm plugin, tests): one request each to a running manager, as
 * MGR_ROLE_TOOL, or MGR_ROLE_ADMIN for jobs. Blocking, with a timeout;
 * on error the cause (the manager's reason when it refused) is in err.
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

/* The same with stat_req flags (MGR_STAT_F_*: the metrics). */
incoll_status_t mgr_tool_stat_flags(const char *addr, const char *secret_file,
                                    uint32_t flags, uint32_t timeout_ms,
                                    char **text_p, char *err, size_t errlen);

/* What the manager answered a registration. */
typedef struct {
    uint32_t gen;    /* the job's generation (INCOLL_GEN) */
    uint32_t groups; /* its quota per AN, 0: the manager's share */
    uint32_t slots;
} mgr_tool_reg_t;

/*
 * Registers job with its quota (groups and slots per AN, 0: the default
 * share; a step "A.B" with both 0 shares A's quota), proving the admin
 * secret in admin_secret. Registering again keeps the generation.
 */
incoll_status_t mgr_tool_job_register(const char *addr,
                                      const char *admin_secret, const char *job,
                                      uint32_t groups, uint32_t slots,
                                      uint32_t timeout_ms,
                                      mgr_tool_reg_t *reg_p, char *err,
                                      size_t errlen);

/* Ends job and its steps ("job.*"): the manager releases everything they
 * hold at once. *jobs_p and *groups_p (may be NULL) say how much. */
incoll_status_t mgr_tool_job_end(const char *addr, const char *admin_secret,
                                 const char *job, const char *reason,
                                 uint32_t timeout_ms, uint32_t *jobs_p,
                                 uint32_t *groups_p, char *err, size_t errlen);

/*
 * Finds "key=value" on the first line of text that starts with prefix
 * (e.g. "manager " or "an name=s0 ") and returns value as a number, or -1
 * when absent.
 */
long long mgr_tool_stat_value(const char *text, const char *prefix,
                              const char *key);

#endif
