/*
 * The settings table and its one parser (src/common/settings.h).
 */
#include "common/settings.h"

#include "common/knobs.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const setting_t setting_table[SETTING_COUNT] = {
#define SETTING_ENTRY_(name, type, def, range, comp, doc)                      \
    [SETTING_##                                                                \
        name] = {"INCOLL_" #name, SETTING_T_##type, def, range, comp, doc},
    INCOLL_SETTINGS(SETTING_ENTRY_)
#undef SETTING_ENTRY_
};

static const char *const type_names[] = {
    [SETTING_T_BOOL] = "bool",         [SETTING_T_INT] = "int",
    [SETTING_T_SIZE] = "size",         [SETTING_T_MS] = "duration",
    [SETTING_T_US] = "duration",       [SETTING_T_REAL] = "real",
    [SETTING_T_ENUM] = "enum",         [SETTING_T_STR] = "string",
    [SETTING_T_ENDPOINT] = "endpoint",
};

const char *setting_type_name(setting_type_t type)
{
    return (unsigned)type <= SETTING_T_ENDPOINT ? type_names[type] : "?";
}

const setting_t *setting_find(const char *name)
{
    for (int i = 0; name != NULL && i < SETTING_COUNT; i++)
        if (strcmp(setting_table[i].name, name) == 0)
            return &setting_table[i];
    return NULL;
}

static const char *text_of(const setting_t *s)
{
    const char *v = getenv(s->name);
    return v && *v ? v : s->def;
}

const char *setting_text(setting_id_t id)
{
    return (unsigned)id < SETTING_COUNT ? text_of(&setting_table[id]) : "";
}

int setting_in_env(setting_id_t id)
{
    return (unsigned)id < SETTING_COUNT &&
           text_of(&setting_table[id]) != setting_table[id].def;
}

/* A decimal or 0x hex integer with an optional leading '-', nothing else
 * (no sign '+', no spaces, no octal); *end_p is the first byte after it. */
static int parse_integer(const char *t, int64_t *v_p, const char **end_p)
{
    int neg = *t == '-', hex, nd = 0;
    uint64_t v = 0;

    t += neg;
    hex = t[0] == '0' && (t[1] == 'x' || t[1] == 'X');
    t += hex ? 2 : 0;
    for (;; t++, nd++) {
        int d = *t >= '0' && *t <= '9'          ? *t - '0'
                : hex && *t >= 'a' && *t <= 'f' ? *t - 'a' + 10
                : hex && *t >= 'A' && *t <= 'F' ? *t - 'A' + 10
                                                : -1;
        if (d < 0)
            break;
        if (v > (UINT64_MAX - (uint64_t)d) / (hex ? 16 : 10))
            return -1;
        v = v * (hex ? 16 : 10) + (uint64_t)d;
    }
    if (nd == 0 || v > (uint64_t)INT64_MAX)
        return -1;
    *v_p = neg ? -(int64_t)v : (int64_t)v;
    *end_p = t;
    return 0;
}

/* Multiplies v by m, refusing an overflow. */
static int scale(int64_t *v_p, int64_t m)
{
    if (*v_p > INT64_MAX / m || *v_p < INT64_MIN / m)
        return -1;
    *v_p *= m;
    return 0;
}

static int parse_size(const char *t, int64_t *v_p)
{
    static const char units[] = "KMGT";
    const char *end, *u;
    int64_t v;

    if (parse_integer(t, &v, &end) != 0 || v < 0)
        return -1;
    if (*end != '\0') {
        u = strchr(units, end[0] & ~0x20);
        if (u == NULL || end[0] == '\0')
            return -1;
        end++;
        if (strcmp(end, "") != 0 && strcmp(end, "B") != 0 &&
            strcmp(end, "iB") != 0)
            return -1;
        for (long n = u - units; n >= 0; n--)
            if (scale(&v, 1024) != 0)
                return -1;
    }
    *v_p = v;
    return 0;
}

/* A duration in nanoseconds; a bare number is in unit_ns. */
static int parse_duration(const char *t, int64_t unit_ns, int64_t *v_p)
{
    static const struct {
        const char *suffix;
        int64_t ns;
    } units[] = {{"ns", 1},         {"us", 1000},         {"ms", 1000000},
                 {"s", 1000000000}, {"min", 60000000000}, {"h", 3600000000000}};
    const char *end;
    int64_t v, m = unit_ns;

    if (parse_integer(t, &v, &end) != 0 || v < 0)
        return -1;
    if (*end != '\0') {
        m = 0;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
            if (strcmp(end, units[i].suffix) == 0)
                m = units[i].ns;
        if (m == 0)
            return -1;
    }
    if (scale(&v, m) != 0)
        return -1;
    *v_p = v;
    return 0;
}

static int parse_real(const char *t, double *v_p)
{
    char *end;
    double v;
    if (*t == '\0' || *t == ' ' || *t == '+')
        return -1;
    errno = 0;
    v = strtod(t, &end);
    if (errno || *end || v != v)
        return -1;
    *v_p = v;
    return 0;
}

static int parse_bool(const char *t, int64_t *v_p)
{
    static const char *const yes[] = {"1", "yes", "true", "on"};
    static const char *const no[] = {"0", "no", "false", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(t, yes[i]) == 0) {
            *v_p = 1;
            return 0;
        }
        if (strcasecmp(t, no[i]) == 0) {
            *v_p = 0;
            return 0;
        }
    }
    return -1;
}

/* The index of word t in "a|b|c", or -1; a bare index counts too. */
static int enum_index(const char *choices, const char *t)
{
    size_t tl = strlen(t);
    int idx = 0;
    const char *end;
    int64_t n;

    for (const char *c = choices; *c; idx++) {
        size_t wl = strcspn(c, "|");
        if (wl == tl && strncasecmp(c, t, wl) == 0)
            return idx;
        c += wl + (c[wl] == '|');
    }
    if (parse_integer(t, &n, &end) == 0 && *end == '\0' && n >= 0 && n < idx)
        return (int)n;
    return -1;
}

static int parse_endpoint(const char *t)
{
    const char *colon = strrchr(t, ':'), *end;
    int64_t port;
    if (colon == NULL || colon == t)
        return -1;
    if (colon[1] < '0' || colon[1] > '9' ||
        parse_integer(colon + 1, &port, &end) != 0 || *end != '\0' ||
        port > 65535 || colon[2] == 'x')
        return -1;
    return 0;
}

/* Parses a number of s's type (not its range) into *v_p. */
static int parse_number(const setting_t *s, const char *t, setting_value_t *v)
{
    const char *end;
    switch (s->type) {
    case SETTING_T_INT:
        if (parse_integer(t, &v->i, &end) != 0 || *end != '\0')
            return -1;
        break;
    case SETTING_T_SIZE:
        if (parse_size(t, &v->i) != 0)
            return -1;
        break;
    case SETTING_T_MS:
        if (parse_duration(t, 1000000, &v->i) != 0)
            return -1;
        break;
    case SETTING_T_US:
        if (parse_duration(t, 1000, &v->i) != 0)
            return -1;
        break;
    case SETTING_T_REAL:
        return parse_real(t, &v->d);
    default:
        return -1;
    }
    v->d = (double)v->i;
    return 0;
}

static const char *expect_of(setting_type_t type)
{
    switch (type) {
    case SETTING_T_BOOL:
        return "0 or 1 (yes/no, true/false, on/off)";
    case SETTING_T_INT:
        return "a decimal or 0x hex integer";
    case SETTING_T_SIZE:
        return "a byte count, optionally with K, M, G or T (64K)";
    case SETTING_T_MS:
        return "a duration: milliseconds, or a number with ns, us, ms, s, "
               "min or h (5ms, 2s)";
    case SETTING_T_US:
        return "a duration: microseconds, or a number with ns, us, ms, s, "
               "min or h (5ms, 2s)";
    case SETTING_T_REAL:
        return "a decimal number";
    case SETTING_T_ENUM:
        return "one of";
    case SETTING_T_ENDPOINT:
        return "host:port";
    default:
        return "text";
    }
}

/* Splits s's range "lo..hi" and parses its bounds; an empty side is
 * unbounded (has_lo/has_hi 0). Returns -1 on a malformed table entry. */
static int range_of(const setting_t *s, setting_value_t *lo, int *has_lo,
                    setting_value_t *hi, int *has_hi)
{
    const char *dots = strstr(s->range, "..");
    char lo_text[64];
    size_t n;

    *has_lo = *has_hi = 0;
    if (s->range[0] == '\0')
        return 0;
    if (dots == NULL || (n = (size_t)(dots - s->range)) >= sizeof(lo_text))
        return -1;
    memcpy(lo_text, s->range, n);
    lo_text[n] = '\0';
    if (n > 0) {
        if (parse_number(s, lo_text, lo) != 0)
            return -1;
        *has_lo = 1;
    }
    if (dots[2] != '\0') {
        if (parse_number(s, dots + 2, hi) != 0)
            return -1;
        *has_hi = 1;
    }
    return 0;
}

incoll_status_t setting_parse(const setting_t *s, const char *text,
                              setting_value_t *v_p, char *err, size_t len)
{
    setting_value_t v = {0}, lo = {0}, hi = {0};
    int has_lo, has_hi, bad = 0;

    v.text = text ? text : "";
    if (v.text[0] == '\0') {
        *v_p = v;
        return INCOLL_OK;
    }
    v.set = 1;
    switch (s->type) {
    case SETTING_T_BOOL:
        bad = parse_bool(text, &v.i) != 0;
        v.d = (double)v.i;
        break;
    case SETTING_T_ENUM:
        v.i = enum_index(s->range, text);
        bad = v.i < 0;
        v.d = (double)v.i;
        break;
    case SETTING_T_STR:
        break;
    case SETTING_T_ENDPOINT:
        bad = parse_endpoint(text) != 0;
        break;
    default:
        if (parse_number(s, text, &v) != 0) {
            bad = 1;
            break;
        }
        if (range_of(s, &lo, &has_lo, &hi, &has_hi) != 0) {
            snprintf(err, len, "%s: the table's range '%s' does not parse",
                     s->name, s->range);
            return INCOLL_ERR_CONFIG;
        }
        if (s->type == SETTING_T_REAL)
            bad = (has_lo && v.d < lo.d) || (has_hi && v.d > hi.d);
        else
            bad = (has_lo && v.i < lo.i) || (has_hi && v.i > hi.i);
        break;
    }
    if (bad) {
        if (s->type == SETTING_T_ENUM)
            snprintf(err, len, "%s='%s' is not one of %s", s->name, text,
                     s->range);
        else if (s->range[0] != '\0')
            snprintf(err, len, "%s='%s' is not %s in %s", s->name, text,
                     expect_of(s->type), s->range);
        else
            snprintf(err, len, "%s='%s' is not %s", s->name, text,
                     expect_of(s->type));
        return INCOLL_ERR_CONFIG;
    }
    *v_p = v;
    return INCOLL_OK;
}

incoll_status_t setting_get(setting_id_t id, setting_value_t *v_p, char *err,
                            size_t len)
{
    if ((unsigned)id >= SETTING_COUNT) {
        snprintf(err, len, "no setting number %d", (int)id);
        return INCOLL_ERR_INVALID_ARG;
    }
    return setting_parse(&setting_table[id], setting_text(id), v_p, err, len);
}

/* 1 if word is in the comma-separated list. */
static int in_list(const char *list, const char *word)
{
    size_t wl = strlen(word);
    for (const char *c = list; *c;) {
        size_t n = strcspn(c, ",");
        if (n == wl && strncmp(c, word, n) == 0)
            return 1;
        c += n + (c[n] == ',');
    }
    return 0;
}

incoll_status_t settings_check(const char *components, char *err, size_t len)
{
    for (int i = 0; i < SETTING_COUNT; i++) {
        const setting_t *s = &setting_table[i];
        setting_value_t v;
        if (strcmp(s->component, "all") != 0 &&
            !in_list(components, s->component))
            continue;
        if (setting_get((setting_id_t)i, &v, err, len) != INCOLL_OK)
            return INCOLL_ERR_CONFIG;
    }
    return INCOLL_OK;
}

/* The value of id; a bad one is logged and the default used. */
static setting_value_t value_of(setting_id_t id)
{
    setting_value_t v = {0};
    char err[512];
    if ((unsigned)id >= SETTING_COUNT)
        return v;
    if (setting_get(id, &v, err, sizeof(err)) == INCOLL_OK)
        return v;
    incoll_error("%s; using the default '%s'", err, setting_table[id].def);
    memset(&v, 0, sizeof(v));
    if (setting_parse(&setting_table[id], setting_table[id].def, &v, err,
                      sizeof(err)) != INCOLL_OK)
        incoll_error("default of %s", err);
    return v;
}

setting_value_t setting_default(setting_id_t id)
{
    setting_value_t v = {0};
    char err[512];
    if ((unsigned)id < SETTING_COUNT &&
        setting_parse(&setting_table[id], setting_table[id].def, &v, err,
                      sizeof(err)) != INCOLL_OK) {
        incoll_error("default of %s", err);
        memset(&v, 0, sizeof(v));
    }
    return v;
}

const char *setting_str(setting_id_t id)
{
    setting_value_t v = value_of(id);
    return v.set ? v.text : NULL;
}

int64_t setting_int(setting_id_t id)
{
    return value_of(id).i;
}

uint64_t setting_u64(setting_id_t id)
{
    int64_t v = value_of(id).i;
    return v < 0 ? 0 : (uint64_t)v;
}

int setting_bool(setting_id_t id)
{
    return value_of(id).i != 0;
}

int setting_enum(setting_id_t id)
{
    return (int)value_of(id).i;
}

double setting_real(setting_id_t id)
{
    return value_of(id).d;
}

uint64_t setting_ns(setting_id_t id)
{
    return setting_u64(id);
}

uint64_t setting_us(setting_id_t id)
{
    return setting_u64(id) / 1000;
}

uint64_t setting_ms(setting_id_t id)
{
    return setting_u64(id) / 1000000;
}

void settings_print(FILE *out, const char *components, int values)
{
    for (int i = 0; i < SETTING_COUNT; i++) {
        const setting_t *s = &setting_table[i];
        const char *cur = setting_text((setting_id_t)i);
        if (components && strcmp(s->component, "all") != 0 &&
            !in_list(components, s->component))
            continue;
        fprintf(out, "%s  %s%s%s  default %s", s->name,
                setting_type_name(s->type), s->range[0] ? " " : "", s->range,
                s->def[0] ? s->def : "unset");
        if (values)
            fprintf(out, "  value %s", cur[0] ? cur : "unset");
        fprintf(out, "  [%s]\n      %s\n", s->component, s->doc);
    }
}

/* The name-based accessors of src/common/knobs.h, over the table. */

static const setting_t *knob_lookup(const char *name)
{
    const setting_t *s = setting_find(name);
    if (s == NULL)
        incoll_error("setting %s is not in the table (src/common/settings.h)",
                     name ? name : "(null)");
    return s;
}

const char *knob_str(const char *name)
{
    const setting_t *s = knob_lookup(name);
    return s ? text_of(s) : NULL;
}

uint64_t knob_u64(const char *name)
{
    const setting_t *s = knob_lookup(name);
    setting_id_t id;
    if (s == NULL)
        return 0;
    id = (setting_id_t)(s - setting_table);
    switch (s->type) {
    case SETTING_T_MS:
        return setting_ms(id);
    case SETTING_T_US:
        return setting_us(id);
    case SETTING_T_REAL:
        return (uint64_t)setting_real(id);
    default:
        return setting_u64(id);
    }
}

double knob_double(const char *name)
{
    const setting_t *s = knob_lookup(name);
    if (s == NULL)
        return 0;
    if (s->type == SETTING_T_MS || s->type == SETTING_T_US)
        return (double)knob_u64(name);
    return setting_real((setting_id_t)(s - setting_table));
}
