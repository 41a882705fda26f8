/*
 * The settings table (src/common/settings.h): its one parser (types,
 * ranges, bad values), the table's own consistency, the name-based
 * accessors, incoll_init_params() refusing bad values, `incoll info` and
 * the daemons' --help listing every entry, the daemons refusing a bad
 * value at start, and that no INCOLL_ variable is read around the table.
 */
#include "integ.h"
#include "test.h"

#include "incoll.h"

#include "common/knobs.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/wire.h"
#include "core/algo.h"
#include "core/host_engine.h"
#include "core/p2p_engine.h"
#include "host/cfg.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A setting of the given type and range, for driving the parser. */
static setting_t mk(setting_type_t type, const char *range)
{
    setting_t s = {"INCOLL_X", type, "", range, "host", "test"};
    return s;
}

/* Parses text as s; 0 when it is accepted (value in *v_p), -1 when it is
 * refused with an error naming INCOLL_X and the text. */
static int parse(const setting_t *s, const char *text, setting_value_t *v_p,
                 char *err, size_t len)
{
    err[0] = '\0';
    if (setting_parse(s, text, v_p, err, len) == INCOLL_OK)
        return 0;
    if (strstr(err, "INCOLL_X") == NULL || strstr(err, text) == NULL) {
        fprintf(stderr, "    error without name or value: %s\n", err);
        return -2;
    }
    return -1;
}

TEST(settings_parse_values, TEST_UNIT)
{
    setting_t s;
    setting_value_t v;
    char err[256];

    s = mk(SETTING_T_INT, "1..512");
    CHECK(parse(&s, "64", &v, err, sizeof(err)) == 0 && v.set && v.i == 64);
    CHECK(parse(&s, "0x10", &v, err, sizeof(err)) == 0 && v.i == 16);
    CHECK(parse(&s, "512", &v, err, sizeof(err)) == 0 && v.i == 512);
    CHECK(parse(&s, "513", &v, err, sizeof(err)) == -1);
    CHECK(strstr(err, "1..512") != NULL);
    CHECK(parse(&s, "0", &v, err, sizeof(err)) == -1);
    for (const char *const *b =
             (const char *const[]){"abc", "12a", "+5", " 5", "5 ", "0x", "0x1g",
                                   "99999999999999999999", NULL};
         *b; b++)
        CHECK_MSG(parse(&s, *b, &v, err, sizeof(err)) == -1, "'%s' accepted",
                  *b);
    CHECK(parse(&s, "", &v, err, sizeof(err)) == 0 && !v.set && v.i == 0);

    s = mk(SETTING_T_INT, "1..0xffffffff");
    CHECK(parse(&s, "4294967295", &v, err, sizeof(err)) == 0);
    CHECK(parse(&s, "4294967296", &v, err, sizeof(err)) == -1);
    s = mk(SETTING_T_INT, "-5..");
    CHECK(parse(&s, "-5", &v, err, sizeof(err)) == 0 && v.i == -5);
    CHECK(parse(&s, "-6", &v, err, sizeof(err)) == -1);

    s = mk(SETTING_T_SIZE, "4K..1G");
    CHECK(parse(&s, "64K", &v, err, sizeof(err)) == 0 && v.i == 65536);
    CHECK(parse(&s, "8m", &v, err, sizeof(err)) == 0 && v.i == 8 << 20);
    CHECK(parse(&s, "1G", &v, err, sizeof(err)) == 0 && v.i == 1 << 30);
    CHECK(parse(&s, "2MiB", &v, err, sizeof(err)) == 0 && v.i == 2 << 20);
    CHECK(parse(&s, "4096", &v, err, sizeof(err)) == 0 && v.i == 4096);
    CHECK(parse(&s, "4095", &v, err, sizeof(err)) == -1);
    CHECK(strstr(err, "4K..1G") != NULL);
    CHECK(parse(&s, "2G", &v, err, sizeof(err)) == -1);
    CHECK(parse(&s, "64X", &v, err, sizeof(err)) == -1);
    CHECK(parse(&s, "-4K", &v, err, sizeof(err)) == -1);
    CHECK(parse(&s, "1K5", &v, err, sizeof(err)) == -1);
    s = mk(SETTING_T_SIZE, "");
    CHECK(parse(&s, "16777216T", &v, err, sizeof(err)) == -1); /* 2^64 */

    s = mk(SETTING_T_MS, "10ms..1h");
    CHECK(parse(&s, "200", &v, err, sizeof(err)) == 0 &&
          v.i == 200 * 1000000ll);
    CHECK(parse(&s, "5s", &v, err, sizeof(err)) == 0 &&
          v.i == 5 * 1000000000ll);
    CHECK(parse(&s, "2min", &v, err, sizeof(err)) == 0 &&
          v.i == 120 * 1000000000ll);
    CHECK(parse(&s, "10000us", &v, err, sizeof(err)) == 0);
    CHECK(parse(&s, "9999us", &v, err, sizeof(err)) == -1);
    CHECK(parse(&s, "5", &v, err, sizeof(err)) == -1);
    CHECK(strstr(err, "10ms..1h") != NULL);
    CHECK(parse(&s, "2h", &v, err, sizeof(err)) == -1);
    CHECK(parse(&s, "5 ms", &v, err, sizeof(err)) == -1);
    CHECK(parse(&s, "5sec", &v, err, sizeof(err)) == -1);
    s = mk(SETTING_T_US, "");
    CHECK(parse(&s, "20000", &v, err, sizeof(err)) == 0 &&
          v.i == 20000 * 1000ll);
    CHECK(parse(&s, "5ms", &v, err, sizeof(err)) == 0 && v.i == 5000000);

    s = mk(SETTING_T_REAL, "0..1");
    CHECK(parse(&s, "0.05", &v, err, sizeof(err)) == 0 && v.d == 0.05);
    CHECK(parse(&s, "1.5", &v, err, sizeof(err)) == -1);
    CHECK(parse(&s, "-0.1", &v, err, sizeof(err)) == -1);
    CHECK(parse(&s, "half", &v, err, sizeof(err)) == -1);
    CHECK(parse(&s, "nan", &v, err, sizeof(err)) == -1);

    s = mk(SETTING_T_BOOL, "");
    CHECK(parse(&s, "1", &v, err, sizeof(err)) == 0 && v.i == 1);
    CHECK(parse(&s, "Yes", &v, err, sizeof(err)) == 0 && v.i == 1);
    CHECK(parse(&s, "off", &v, err, sizeof(err)) == 0 && v.i == 0);
    CHECK(parse(&s, "2", &v, err, sizeof(err)) == -1);

    s = mk(SETTING_T_ENUM, "error|warn|info|debug|trace");
    CHECK(parse(&s, "info", &v, err, sizeof(err)) == 0 && v.i == 2);
    CHECK(parse(&s, "TRACE", &v, err, sizeof(err)) == 0 && v.i == 4);
    CHECK(parse(&s, "0", &v, err, sizeof(err)) == 0 && v.i == 0);
    CHECK(parse(&s, "5", &v, err, sizeof(err)) == -1);
    CHECK(parse(&s, "inf", &v, err, sizeof(err)) == -1);
    CHECK(strstr(err, "error|warn|info|debug|trace") != NULL);

    s = mk(SETTING_T_ENDPOINT, "");
    CHECK(parse(&s, "127.0.0.1:7000", &v, err, sizeof(err)) == 0);
    CHECK(parse(&s, "mgr.example:0", &v, err, sizeof(err)) == 0);
    CHECK(parse(&s, "127.0.0.1", &v, err, sizeof(err)) == -1);
    CHECK(parse(&s, ":7000", &v, err, sizeof(err)) == -1);
    CHECK(parse(&s, "h:65536", &v, err, sizeof(err)) == -1);
    CHECK(parse(&s, "h:-1", &v, err, sizeof(err)) == -1);

    s = mk(SETTING_T_STR, "");
    CHECK(parse(&s, "any text at all", &v, err, sizeof(err)) == 0 &&
          strcmp(v.text, "any text at all") == 0);
    return TEST_PASSED;
}

/* Every entry is well formed: name, doc, component, default and range
 * parse as its type, durations say their unit in the name. */
TEST(settings_table_consistent, TEST_UNIT)
{
    static const char *const comps[] = {"all", "host",  "mpi",  "agg",
                                        "mgr", "fault", "tool", NULL};
    char err[256];

    for (int i = 0; i < SETTING_COUNT; i++) {
        const setting_t *s = &setting_table[i];
        setting_value_t v;
        size_t n = strlen(s->name);
        int known = 0;

        CHECK_MSG(strncmp(s->name, "INCOLL_", 7) == 0, "%s", s->name);
        CHECK_MSG(s->doc[0] != '\0', "%s has no doc", s->name);
        for (int c = 0; comps[c]; c++)
            known |= strcmp(comps[c], s->component) == 0;
        CHECK_MSG(known, "%s: component %s", s->name, s->component);
        CHECK_MSG(setting_parse(s, s->def, &v, err, sizeof(err)) == INCOLL_OK,
                  "%s: default: %s", s->name, err);
        CHECK_MSG(setting_find(s->name) == s, "%s twice", s->name);
        if (s->type == SETTING_T_MS)
            CHECK_MSG(n > 3 && strcmp(s->name + n - 3, "_MS") == 0, "%s",
                      s->name);
        if (s->type == SETTING_T_US)
            CHECK_MSG(n > 3 && strcmp(s->name + n - 3, "_US") == 0, "%s",
                      s->name);
        if (s->type == SETTING_T_INT || s->type == SETTING_T_SIZE ||
            s->type == SETTING_T_MS || s->type == SETTING_T_US ||
            s->type == SETTING_T_REAL) {
            /* A malformed range is reported as such on any value. */
            setting_parse(s, "1", &v, err, sizeof(err));
            CHECK_MSG(strstr(err, "does not parse") == NULL, "%s", err);
        }
    }
    CHECK(setting_find("INCOLL_NO_SUCH") == NULL);
    /* Defaults the code relies on. */
    CHECK(setting_parse(&setting_table[SETTING_AGG_PAYLOAD], "65000",
                        &(setting_value_t){0}, err, sizeof(err)) == INCOLL_OK);
    CHECK(setting_parse(&setting_table[SETTING_AGG_PAYLOAD], "65001",
                        &(setting_value_t){0}, err, sizeof(err)) != INCOLL_OK);
    CHECK_EQ_INT(WIRE_MAX_PAYLOAD, 65000);
    return TEST_PASSED;
}

/* Typed accessors and the name-based ones read the environment each time,
 * in the unit of the name; a bad value falls back to the default. */
TEST(settings_accessors, TEST_UNIT)
{
    int level = log_level_current;
    const char *saved = getenv("INCOLL_RTO_INIT_US");
    char *keep = saved ? strdup(saved) : NULL;

    unsetenv("INCOLL_RTO_INIT_US");
    CHECK(setting_ns(SETTING_RTO_INIT_US) == 20000000ull);
    CHECK(knob_u64("INCOLL_RTO_INIT_US") == 20000);
    CHECK(strcmp(knob_str("INCOLL_RTO_INIT_US"), "20ms") == 0);
    setenv("INCOLL_RTO_INIT_US", "7ms", 1);
    CHECK(knob_u64("INCOLL_RTO_INIT_US") == 7000);
    CHECK(setting_us(SETTING_RTO_INIT_US) == 7000);
    setenv("INCOLL_RTO_INIT_US", "1500", 1);
    CHECK(setting_ns(SETTING_RTO_INIT_US) == 1500000ull);
    CHECK(knob_double("INCOLL_RTO_INIT_US") == 1500.0);
    log_level_current = -1; /* the errors below are expected */
    setenv("INCOLL_RTO_INIT_US", "soon", 1);
    CHECK(knob_u64("INCOLL_RTO_INIT_US") == 20000);
    CHECK(knob_u64("INCOLL_NO_SUCH_SETTING") == 0);
    CHECK(knob_str("INCOLL_NO_SUCH_SETTING") == NULL);
    log_level_current = level;
    CHECK(knob_double("INCOLL_FAULT_DROP") == 0.0 ||
          getenv("INCOLL_FAULT_DROP") != NULL);
    CHECK(setting_u64(SETTING_MGR_SLOTS) == 64 ||
          getenv("INCOLL_MGR_SLOTS") != NULL);
    CHECK(setting_str(SETTING_RANK) == NULL || getenv("INCOLL_RANK") != NULL);
    if (keep) {
        setenv("INCOLL_RTO_INIT_US", keep, 1);
        free(keep);
    } else {
        unsetenv("INCOLL_RTO_INIT_US");
    }
    return TEST_PASSED;
}

/* A bad value fails incoll_init with INCOLL_ERR_CONFIG and a message
 * naming it; so does a bad identity in the params. */
/* incoll_setting_given: what front ends ask instead of reading the
 * variables themselves. */
TEST(settings_given_public, TEST_UNIT)
{
    CHECK_EQ_INT(incoll_setting_given("INCOLL_NO_SUCH_SETTING"), -1);
    CHECK_EQ_INT(incoll_setting_given(NULL), -1);
    unsetenv("INCOLL_JOB");
    CHECK_EQ_INT(incoll_setting_given("INCOLL_JOB"), 0);
    setenv("INCOLL_JOB", "", 1);
    CHECK_EQ_INT(incoll_setting_given("INCOLL_JOB"), 0); /* empty: unset */
    setenv("INCOLL_JOB", "job-7", 1);
    CHECK_EQ_INT(incoll_setting_given("INCOLL_JOB"), 1);
    unsetenv("INCOLL_JOB");
    return TEST_PASSED;
}

TEST(settings_init_refuses_bad_values, TEST_UNIT)
{
    incoll_init_params_t p = {0};
    const char *saved = getenv("INCOLL_P2P_WINDOW");
    char *keep = saved ? strdup(saved) : NULL;
    int level = log_level_current;
    char out[4096];

    log_level_current = LOG_LEVEL_ERROR;
    setenv("INCOLL_P2P_WINDOW", "600", 1);
    p.field_mask = INCOLL_INIT_FIELD_RANK | INCOLL_INIT_FIELD_SIZE;
    p.rank = 0;
    p.size = 2;
    CHECK_EQ_INT(init_captured(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR, &p,
                               out, sizeof(out)),
                 INCOLL_ERR_CONFIG);
    CHECK_MSG(strstr(out, "INCOLL_P2P_WINDOW='600'") != NULL &&
                  strstr(out, "1..512") != NULL,
              "output: %s", out);
    if (keep) {
        setenv("INCOLL_P2P_WINDOW", keep, 1);
        free(keep);
    } else {
        unsetenv("INCOLL_P2P_WINDOW");
    }
    p.rank = 5;
    CHECK_EQ_INT(init_captured(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR, &p,
                               out, sizeof(out)),
                 INCOLL_ERR_CONFIG);
    CHECK_MSG(strstr(out, "INCOLL_RANK=5 is not in 0..1") != NULL, "output: %s",
              out);
    /* A fabric that does not exist: the params, not the environment, name
     * it (the environment's INCOLL_MGR is ignored with the field set). */
    p.rank = 0;
    p.field_mask |= INCOLL_INIT_FIELD_FABRIC | INCOLL_INIT_FIELD_MGR;
    p.fabric = "/nonexistent/incoll-fabric";
    p.mgr = "";
    CHECK(init_captured(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR, &p, out,
                        sizeof(out)) != INCOLL_OK);
    CHECK_MSG(strstr(out, "/nonexistent/incoll-fabric") != NULL, "output: %s",
              out);
    /* The fabric fields go through the settings table's parser too. */
    p.fabric = "";
    p.field_mask |= INCOLL_INIT_FIELD_PROGRESS_THREAD;
    p.progress_thread = 2;
    CHECK_EQ_INT(init_captured(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR, &p,
                               out, sizeof(out)),
                 INCOLL_ERR_CONFIG);
    CHECK_MSG(strstr(out, "INCOLL_PROGRESS_THREAD='2'") != NULL &&
                  strstr(out, "incoll_init_params") != NULL,
              "output: %s", out);
    p.progress_thread = 1;
    p.mgr = "no-port-here";
    CHECK_EQ_INT(init_captured(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR, &p,
                               out, sizeof(out)),
                 INCOLL_ERR_CONFIG);
    CHECK_MSG(strstr(out, "INCOLL_MGR='no-port-here'") != NULL, "output: %s",
              out);
    log_level_current = level;
    CHECK_EQ_INT(incoll_init_params(&p, NULL), INCOLL_ERR_INVALID_ARG);
    return TEST_PASSED;
}

/* `incoll info` lists every setting with its type and default, and every
 * algorithm of every collective. */
TEST_LIMIT(settings_info_lists_all, TEST_INTEG, 60)
{
    char *out = NULL, line[256];
    int rc = run_cmd(&out, 30, "env -u INCOLL_LOG_LEVEL '%s/incoll' info",
                     test_bindir());

    CHECK_MSG(rc == 0, "incoll info: exit %d", rc);
    for (int i = 0; i < SETTING_COUNT; i++) {
        const setting_t *s = &setting_table[i];
        snprintf(line, sizeof(line), "\n%s  %s%s%s  default %s", s->name,
                 setting_type_name(s->type), s->range[0] ? " " : "", s->range,
                 s->def[0] ? s->def : "unset");
        CHECK_MSG(strstr(out, line) != NULL, "missing: %s", line + 1);
    }
    for (int k = 0; k < ALGO_COUNT; k++) {
        snprintf(line, sizeof(line), " %s ", algo_name((algo_kind_t)k));
        CHECK_MSG(strstr(out, line) != NULL, "missing algorithm %s", line);
    }
    for (int i = 0; i < CALGO_COUNT; i++) {
        const algo_calgo_info_t *a = algo_calgo_info((algo_calgo_t)i);
        CHECK_MSG(strstr(out, a->desc) != NULL, "missing: %s", a->desc);
    }
    free(out);
    return TEST_PASSED;
}

/* The daemons refuse a bad value at start, naming it, and list their
 * settings in --help. */
TEST_LIMIT(settings_daemons_refuse_bad_values, TEST_INTEG, 60)
{
    char *out = NULL;
    int rc;

    rc = run_cmd(&out, 30,
                 "env INCOLL_MGR_SLOTS=0 '%s/incoll-mgr' --radix 4 --levels 2",
                 test_bindir());
    CHECK_MSG(rc == 2 && strstr(out, "INCOLL_MGR_SLOTS='0'") &&
                  strstr(out, "1..65535"),
              "exit %d: %s", rc, out);
    free(out);
    rc = run_cmd(&out, 30,
                 "env INCOLL_AGG_BUFFER=lots '%s/incoll-agg' --name a "
                 "--listen 127.0.0.1:0 --mgr 127.0.0.1:9",
                 test_bindir());
    CHECK_MSG(rc == 2 && strstr(out, "INCOLL_AGG_BUFFER='lots'"), "exit %d: %s",
              rc, out);
    free(out);
    rc = run_cmd(&out, 30, "'%s/incoll-mgr' --help", test_bindir());
    CHECK(rc == 0 && strstr(out, "\nINCOLL_MGR_HEARTBEAT_MS  duration "
                                 "10ms..1h  default 200ms"));
    free(out);
    rc = run_cmd(&out, 30, "'%s/incoll-agg' --help", test_bindir());
    CHECK(rc == 0 && strstr(out, "\nINCOLL_AGG_SLOTS  int"));
    free(out);
    return TEST_PASSED;
}

/* No component reads an INCOLL_ variable around the table, and every
 * name given to the name-based accessors is in it. */
TEST_LIMIT(settings_no_private_getenv, TEST_INTEG, 60)
{
    const char *src = test_srcdir();
    char *out = NULL;
    int rc;

    if (src[0] == '\0')
        return test_skip("no source tree next to the binaries");
    rc = run_cmd(&out, 30,
                 "grep -rnE 'getenv *\\( *\"INCOLL_' '%s/src' '%s/tools' "
                 "'%s/include' | grep -v '/src/common/settings.c:'",
                 src, src, src);
    CHECK_MSG(rc == 1 && out[0] == '\0', "getenv outside the table:\n%s", out);
    free(out);
    rc = run_cmd(&out, 30,
                 "grep -rhoE 'knob_(str|u64|double)\\(\"INCOLL_[A-Z0-9_]+' "
                 "'%s/src' '%s/tools' | sed 's/.*(\"//' | sort -u",
                 src, src);
    CHECK(rc == 0);
    for (char *name = strtok(out, "\n"); name; name = strtok(NULL, "\n"))
        CHECK_MSG(setting_find(name) != NULL,
                  "%s is read by name but is not in the table", name);
    free(out);
    return TEST_PASSED;
}

/* The reads of a setting's current value (the environment's or the
 * table's); setting_default() reads the table's defaults only. */
static const char *const setting_reads[] = {
    "getenv(",         "secure_getenv(",  "knob_str(",      "knob_u64(",
    "knob_double(",    "setting_str(",    "setting_int(",   "setting_u64(",
    "setting_bool(",   "setting_enum(",   "setting_real(",  "setting_ns(",
    "setting_us(",     "setting_ms(",     "setting_get(",   "setting_text(",
    "setting_in_env(", "settings_check(", "setting_parse(", "setting_table[",
    "setting_find("};

/* The documented exceptions (src/host/cfg.h): file and what it may use. */
static const struct {
    const char *file, *read;
} read_exceptions[] = {
    /* incoll_setting_given(): a front end's question, before any context */
    {"src/host/api.c", "setting_find("},
    {"src/host/api.c", "setting_in_env("},
    {"src/host/api.c", "setting_table["},
    /* incoll_setting_value(), incoll_settings_check(), incoll_table_check():
     * the same for the MPI front ends, read at the call */
    {"src/host/api.c", "setting_get("},
    {"src/host/api.c", "settings_check("},
};

/* The read of setting_reads line makes (as a call, not inside a longer
 * name), or NULL. */
static const char *setting_read_in(const char *line)
{
    for (size_t i = 0; i < sizeof(setting_reads) / sizeof(setting_reads[0]);
         i++)
        for (const char *p = strstr(line, setting_reads[i]); p;
             p = strstr(p + 1, setting_reads[i]))
            if (p == line || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
                               (p[-1] >= 'A' && p[-1] <= 'Z') ||
                               (p[-1] >= '0' && p[-1] <= '9')))
                return setting_reads[i];
    return NULL;
}

/* Reads of settings in file (relative to the source tree) that are not
 * its documented exceptions, printed; -1 when it cannot be read. */
static int scan_setting_reads(const char *file)
{
    char path[4096], line[4096];
    int lineno = 0, bad = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", test_srcdir(), file);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        const char *read = setting_read_in(line);
        int allowed = 0;
        lineno++;
        if (read == NULL)
            continue;
        for (size_t i = 0;
             i < sizeof(read_exceptions) / sizeof(read_exceptions[0]); i++)
            allowed |= strcmp(read_exceptions[i].file, file) == 0 &&
                       strcmp(read_exceptions[i].read, read) == 0;
        if (!allowed) {
            fprintf(stderr,
                    "    %s:%d: reads a setting (%s...) outside "
                    "host_cfg_fill(): %s",
                    file, lineno, read, line);
            bad++;
        }
    }
    fclose(f);
    return bad;
}

/* libincoll reads its settings once, into its context's configuration:
 * no file of src/host but cfg.c (host_cfg_fill) and none of the engines
 * it makes reads the environment or a setting's current value, but for
 * the exceptions src/host/cfg.h documents. */
TEST(settings_host_reads_cfg_only, TEST_UNIT)
{
    static const char *const core[] = {"src/core/host_engine.c",
                                       "src/core/p2p_engine.c",
                                       "src/core/rto.c", "src/core/algo.c"};
    char path[4096];
    int files = 0, bad = 0, n;
    struct dirent *e;
    DIR *dir;

    CHECK_MSG(test_srcdir()[0] != '\0', "no source tree above %s",
              test_bindir());
    snprintf(path, sizeof(path), "%s/src/host", test_srcdir());
    dir = opendir(path);
    CHECK_MSG(dir != NULL, "cannot open %s", path);
    while ((e = readdir(dir)) != NULL) {
        size_t len = strlen(e->d_name);
        char file[1024];
        if (len < 3 ||
            (strcmp(e->d_name + len - 2, ".c") != 0 &&
             strcmp(e->d_name + len - 2, ".h") != 0) ||
            strcmp(e->d_name, "cfg.c") == 0)
            continue;
        snprintf(file, sizeof(file), "src/host/%s", e->d_name);
        n = scan_setting_reads(file);
        files += n >= 0;
        bad += n > 0 ? n : 0;
    }
    closedir(dir);
    for (size_t i = 0; i < sizeof(core) / sizeof(core[0]); i++) {
        n = scan_setting_reads(core[i]);
        CHECK_MSG(n >= 0, "cannot read %s", core[i]);
        bad += n;
    }
    CHECK_MSG(files >= 20, "only %d files in src/host", files);
    /* the scan finds what it looks for */
    CHECK(setting_read_in("x = getenv(\"INCOLL_X\");") != NULL);
    CHECK(setting_read_in("v = setting_ns(SETTING_WAIT_MS);") != NULL);
    CHECK(setting_read_in("incoll_setting_given(name)") == NULL);
    CHECK_MSG(bad == 0, "%d reads of settings outside host_cfg_fill()", bad);
    return TEST_PASSED;
}

/* The context's configuration carries the table's defaults, and an
 * INCOLL_ variable set before the fill overrides its default; the
 * engines' own defaults are the table's. */
TEST(settings_host_cfg_values, TEST_UNIT)
{
    static const char *const vars[] = {"INCOLL_RTO_INIT_US", "INCOLL_WAIT_MS",
                                       "INCOLL_HIER", "INCOLL_P2P_WINDOW",
                                       "INCOLL_ALGO_SHORT_BYTES"};
    char *keep[sizeof(vars) / sizeof(vars[0])];
    host_engine_params_t hp = {0};
    p2p_engine_params_t pp = {0};
    host_cfg_t c;
    char err[512];

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        keep[i] = v ? strdup(v) : NULL;
        unsetenv(vars[i]);
    }
    CHECK_EQ_INT(host_cfg_fill(&c, err, sizeof(err)), INCOLL_OK);
    CHECK(c.rto_init_ns == (uint64_t)setting_default(SETTING_RTO_INIT_US).i);
    CHECK(c.rto_init_ns == 20000000ull);
    CHECK(c.rto_min_ns == (uint64_t)setting_default(SETTING_RTO_MIN_US).i);
    CHECK(c.rto_max_ns == (uint64_t)setting_default(SETTING_RTO_MAX_US).i);
    CHECK(c.wait_ns == (uint64_t)setting_default(SETTING_WAIT_MS).i);
    CHECK(c.wait_ns == 600000000000ull);
    CHECK(c.p2p_window == 64);
    CHECK(c.algo_cuts.short_bytes == 16384);
    CHECK(c.hier != NULL && strcmp(c.hier, "node") == 0);
    host_cfg_free(&c);
    /* both engines start from the table's timer */
    host_engine_params_default(&hp);
    p2p_engine_params_default(&pp);
    CHECK(hp.rto_init_ns == c.rto_init_ns && pp.rto_init_ns == c.rto_init_ns);
    CHECK(hp.rto_max_ns == 250000000ull && pp.rto_max_ns == 250000000ull);
    CHECK(hp.max_retries == (int)setting_default(SETTING_RETRIES).i &&
          pp.max_retries == hp.max_retries);
    CHECK(hp.progress_timeout_ns ==
          (uint64_t)setting_default(SETTING_TIMEOUT_MS).i);

    setenv("INCOLL_RTO_INIT_US", "7ms", 1);
    setenv("INCOLL_WAIT_MS", "2s", 1);
    setenv("INCOLL_HIER", "flat", 1);
    setenv("INCOLL_P2P_WINDOW", "100", 1);
    setenv("INCOLL_ALGO_SHORT_BYTES", "1K", 1);
    CHECK_EQ_INT(host_cfg_fill(&c, err, sizeof(err)), INCOLL_OK);
    /* filled once: the environment changing later changes nothing */
    setenv("INCOLL_HIER", "socket", 1);
    setenv("INCOLL_RTO_INIT_US", "9ms", 1);
    CHECK(c.rto_init_ns == 7000000ull);
    CHECK(c.wait_ns == 2000000000ull);
    CHECK(c.hier != NULL && strcmp(c.hier, "flat") == 0);
    CHECK(c.p2p_window == 100);
    CHECK(c.algo_cuts.short_bytes == 1024);
    host_cfg_free(&c);
    /* a bad value fails the fill, naming it */
    setenv("INCOLL_P2P_WINDOW", "600", 1);
    CHECK_EQ_INT(host_cfg_fill(&c, err, sizeof(err)), INCOLL_ERR_CONFIG);
    CHECK_MSG(strstr(err, "INCOLL_P2P_WINDOW='600'") != NULL, "err: %s", err);
    host_cfg_free(&c);

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        if (keep[i])
            setenv(vars[i], keep[i], 1);
        else
            unsetenv(vars[i]);
        free(keep[i]);
    }
    return TEST_PASSED;
}

/*
 * The installed static library exports only the public API: every global
 * symbol it defines is incoll_*, and an application that defines names
 * the library uses inside (log_emit, wire_parse, udp_open) links with it
 * statically and runs.
 */
TEST(lib_static_symbols, TEST_INTEG)
{
    const char *dir = test_tmpdir();
    char lib[4096], app[4200], *out = NULL;
    FILE *f;
    int rc, n = 0;

    snprintf(lib, sizeof(lib), "%s/../lib/libincoll.a", test_bindir());
    if (access(lib, R_OK) != 0) {
        fprintf(stderr, "    no %s\n", lib);
        return TEST_FAILED;
    }
    rc = run_cmd(&out, 30, "nm -g --defined-only '%s'", lib);
    CHECK_MSG(rc == 0, "nm: exit %d: %s", rc, out);
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        char *name = strrchr(line, ' ');
        if (name == NULL || strchr(line, ':') != NULL)
            continue; /* "member.o:" headers and blank lines */
        name++;
        CHECK_MSG(strncmp(name, "incoll_", 7) == 0,
                  "%s exports %s, not of the public API", lib, name);
        n++;
    }
    free(out);
    CHECK_MSG(n >= 20, "only %d public symbols", n);

    snprintf(app, sizeof(app), "%s/app.c", dir);
    f = fopen(app, "w");
    CHECK(f != NULL);
    fprintf(f, "#include <stdio.h>\n#include \"incoll.h\"\n"
               "int log_emit(void) { return 7; }\n"
               "int wire_parse(void) { return 8; }\n"
               "int udp_open(void) { return 9; }\n"
               "int main(void)\n{\n"
               "    printf(\"%%zu %%s %%d\\n\", "
               "incoll_dtype_size(INCOLL_FLOAT64),\n"
               "           incoll_status_string(INCOLL_ERR_CONFIG),\n"
               "           log_emit() + wire_parse() + udp_open());\n"
               "    return 0;\n}\n");
    fclose(f);
    rc = run_cmd(&out, 120,
                 "cc -std=c11 -I'%s/include' -o '%s/app' '%s' '%s' "
                 "$(pkg-config --libs libsodium 2>/dev/null) "
                 "$(pkg-config --libs hwloc 2>/dev/null) "
                 "$(pkg-config --libs libcrypto 2>/dev/null) -lm -lpthread",
                 test_srcdir(), dir, app, lib);
    CHECK_MSG(rc == 0, "link: exit %d: %s", rc, out);
    free(out);
    rc = run_cmd(&out, 30, "'%s/app'", dir);
    CHECK_MSG(rc == 0, "run: exit %d: %s", rc, out);
    CHECK_MSG(strncmp(out, "8 ", 2) == 0 && strstr(out, " 24\n") != NULL,
              "output: %s", out);
    free(out);
    return TEST_PASSED;
}
