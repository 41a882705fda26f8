/*
 * Command-line values of the simulator: link rates ("100Gbps", "25Gbps",
 * "12.5GBps"), times ("1us", "500ns", "0"), byte counts ("8", "64K",
 * "1M", "1MiB") and lists ("64,256,1024" or "8:1M").
 */
#include "sim/sim.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Splits text into a number and its unit; returns -1 if no number. */
static int number_unit(const char *text, double *v_p, const char **unit_p)
{
    char *end;
    double v;

    if (text == NULL || *text == '\0')
        return -1;
    errno = 0;
    v = strtod(text, &end);
    if (errno || end == text || !isfinite(v) || v < 0)
        return -1;
    while (*end == ' ')
        end++;
    *v_p = v;
    *unit_p = end;
    return 0;
}

int sim_parse_rate(const char *text, double *Bps_p)
{
    static const struct {
        const char *unit;
        double Bps;
    } units[] = {
        {"bps", 1.0 / 8},  {"Kbps", 1e3 / 8},  {"Mbps", 1e6 / 8},
        {"Gbps", 1e9 / 8}, {"Tbps", 1e12 / 8}, {"Bps", 1.0},
        {"KBps", 1e3},     {"MBps", 1e6},      {"GBps", 1e9},
        {"TBps", 1e12},
    };
    const char *unit;
    double v;

    if (number_unit(text, &v, &unit) != 0 || v <= 0)
        return -1;
    if (*unit == '\0') { /* bare number: bits per second, as SimGrid's "bps" */
        *Bps_p = v / 8;
        return 0;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(unit, units[i].unit) == 0) {
            *Bps_p = v * units[i].Bps;
            return 0;
        }
    }
    return -1;
}

int sim_parse_time(const char *text, double *s_p)
{
    static const struct {
        const char *unit;
        double s;
    } units[] = {
        {"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"ps", 1e-12}};
    const char *unit;
    double v;

    if (number_unit(text, &v, &unit) != 0)
        return -1;
    if (*unit == '\0') {
        if (v != 0)
            return -1; /* a bare number other than 0 is ambiguous */
        *s_p = 0;
        return 0;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(unit, units[i].unit) == 0) {
            *s_p = v * units[i].s;
            return 0;
        }
    }
    return -1;
}

int sim_parse_bytes(const char *text, uint64_t *bytes_p)
{
    const char *unit;
    double v, mult = 1;

    if (number_unit(text, &v, &unit) != 0)
        return -1;
    if (*unit) {
        char c = (char)toupper((unsigned char)unit[0]);
        const char *rest = unit + 1;
        if (c == 'K')
            mult = 1024.0;
        else if (c == 'M')
            mult = 1024.0 * 1024;
        else if (c == 'G')
            mult = 1024.0 * 1024 * 1024;
        else if (c == 'B' && *rest == '\0')
            rest = unit + 1;
        else
            return -1;
        if (c != 'B' && *rest && strcasecmp(rest, "B") != 0 &&
            strcasecmp(rest, "iB") != 0)
            return -1;
    }
    v *= mult;
    if (v > 1e15 || v != floor(v))
        return -1;
    *bytes_p = (uint64_t)v;
    return 0;
}

int sim_parse_sizes(const char *text, uint64_t *sizes, int max)
{
    const char *colon = strchr(text, ':');
    int n = 0;

    if (colon) {
        char lo_text[64];
        uint64_t lo, hi;
        size_t len = (size_t)(colon - text);
        if (len >= sizeof(lo_text))
            return -1;
        memcpy(lo_text, text, len);
        lo_text[len] = '\0';
        if (sim_parse_bytes(lo_text, &lo) != 0 ||
            sim_parse_bytes(colon + 1, &hi) != 0 || lo == 0 || lo > hi)
            return -1;
        for (uint64_t s = lo; s <= hi; s *= 2) {
            if (n >= max)
                return -1;
            sizes[n++] = s;
        }
        return n;
    }
    while (*text) {
        char item[64];
        const char *comma = strchr(text, ',');
        size_t len = comma ? (size_t)(comma - text) : strlen(text);
        if (len == 0 || len >= sizeof(item) || n >= max)
            return -1;
        memcpy(item, text, len);
        item[len] = '\0';
        if (sim_parse_bytes(item, &sizes[n]) != 0 || sizes[n] == 0)
            return -1;
        n++;
        text += len + (comma ? 1 : 0);
    }
    return n;
}

int sim_parse_ints(const char *text, int *vals, int max)
{
    int n = 0;
    while (*text) {
        char *end;
        long v;
        errno = 0;
        v = strtol(text, &end, 10);
        if (errno || end == text || v < 1 || v > 10000000 || n >= max ||
            (*end != ',' && *end != '\0'))
            return -1;
        vals[n++] = (int)v;
        text = *end ? end + 1 : end;
    }
    return n;
}

const char *sim_rate_str(double Bps, char *buf, size_t len)
{
    double bps = Bps * 8;
    if (bps >= 1e12)
        snprintf(buf, len, "%gTbps", bps / 1e12);
    else if (bps >= 1e9)
        snprintf(buf, len, "%gGbps", bps / 1e9);
    else if (bps >= 1e6)
        snprintf(buf, len, "%gMbps", bps / 1e6);
    else
        snprintf(buf, len, "%gbps", bps);
    return buf;
}
