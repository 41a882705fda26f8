/*
 * The line lexer shared by fabric.conf and the topology file
 * (src/common/kvline.h): words and comments, blank lines, the last line
 * without its newline, the line limit at its edge, NUL bytes, too many
 * words, key=value splitting and lookup, numbers, and errors that name
 * the file and the line. Then both parsers, to show they report the
 * lexer's errors the same way.
 */
#include "test.h"

#include "common/fabric_conf.h"
#include "common/kvline.h"
#include "mgr/topo.h"

#include <stdint.h>
#include <unistd.h>

/* Reads every record of text[0..len) into out as "w1|w2|...;" lines; the
 * return value of the last kvline_next(). */
static int lex_all(const char *text, size_t len, size_t max_line, int max_words,
                   char *out, size_t outlen, char *err, size_t errlen)
{
    kvline_t lx;
    char *w[32];
    int n, ret;
    size_t used = 0;

    out[0] = '\0';
    err[0] = '\0';
    if (kvline_init(&lx, "t.conf", text, len, max_line, err, errlen) !=
        INCOLL_OK)
        return -2;
    while ((ret = kvline_next(&lx, w, max_words, &n)) > 0) {
        for (int i = 0; i < n; i++)
            used += (size_t)snprintf(out + used, outlen - used, "%s%s", w[i],
                                     i + 1 < n ? "|" : ";");
    }
    kvline_done(&lx);
    return ret;
}

TEST(kvline_words_comments, TEST_UNIT)
{
    const char *text = "# a comment line\n"
                       "\n"
                       "   \t \r\n"
                       "an name=s0  level=2\taddr=1.2.3.4:5 # trailing\r\n"
                       "link a b#no blank before the comment\n"
                       "x=#empty value\n"
                       "last k=v";
    char out[512], err[256];

    CHECK_EQ_INT(
        lex_all(text, strlen(text), 100, 8, out, sizeof(out), err, sizeof(err)),
        0);
    CHECK_MSG(strcmp(out, "an|name=s0|level=2|addr=1.2.3.4:5;"
                          "link|a|b;x=;last|k=v;") == 0,
              "got '%s'", out);
    /* Nothing at all, and only comments. */
    CHECK_EQ_INT(lex_all("", 0, 100, 8, out, sizeof(out), err, sizeof(err)), 0);
    CHECK_EQ_INT(
        lex_all("#\n#\n", 4, 100, 8, out, sizeof(out), err, sizeof(err)), 0);
    CHECK(out[0] == '\0');
    return TEST_PASSED;
}

/* The limit counts characters without the newline, on every line and on
 * the last one without a newline; the error names the line. */
TEST(kvline_line_limit, TEST_UNIT)
{
    char text[64], out[256], err[256];

    for (int chars = 9; chars <= 11; chars++) {
        for (int newline = 0; newline < 2; newline++) {
            size_t len;
            memcpy(text, "a\nb\n", 4);
            memset(text + 4, 'x', (size_t)chars);
            len = 4 + (size_t)chars;
            if (newline)
                text[len++] = '\n';
            int ret =
                lex_all(text, len, 10, 8, out, sizeof(out), err, sizeof(err));
            if (chars <= 10) {
                CHECK_EQ_INT(ret, 0);
            } else {
                CHECK_EQ_INT(ret, -1);
                CHECK_MSG(strcmp(err, "t.conf:3: line too long (11 "
                                      "characters, at most 10)") == 0,
                          "'%s'", err);
                /* The records before the bad line were read. */
                CHECK(strcmp(out, "a;b;") == 0);
            }
        }
    }
    return TEST_PASSED;
}

TEST(kvline_nul_and_too_many_words, TEST_UNIT)
{
    char out[256], err[256];
    static const char nul[] = "a\n# x\0y\nb\n";

    CHECK_EQ_INT(lex_all(nul, sizeof(nul) - 1, 100, 8, out, sizeof(out), err,
                         sizeof(err)),
                 -1);
    CHECK_MSG(strcmp(err, "t.conf:2: NUL byte in the line") == 0, "'%s'", err);
    /* In the last line, without a newline after it. */
    CHECK_EQ_INT(
        lex_all("a\nb\0", 4, 100, 8, out, sizeof(out), err, sizeof(err)), -1);
    CHECK_MSG(strcmp(err, "t.conf:2: NUL byte in the line") == 0, "'%s'", err);

    CHECK_EQ_INT(lex_all("a b c\nd e f g\n", 14, 100, 3, out, sizeof(out), err,
                         sizeof(err)),
                 -1);
    CHECK_MSG(strcmp(err, "t.conf:2: more than 3 words on the line") == 0,
              "'%s'", err);
    CHECK(strcmp(out, "a|b|c;") == 0);
    return TEST_PASSED;
}

TEST(kvline_pairs_numbers_errors, TEST_UNIT)
{
    char w0[] = "kind", w1[] = "level=3", w2[] = "noequals",
         w3[] = "addr=", w4[] = "levelx=1", w5[] = "a=b=c";
    char *words[] = {w0, w4, w1, w2, w3, w5};
    char err[128];
    uint64_t v = 7;
    kvline_t lx;

    /* Lookup: the key must be followed by '='; the first word is the
     * kind and is not searched. */
    CHECK(strcmp(kvline_get(words, 6, 1, "level"), "3") == 0);
    CHECK(strcmp(kvline_get(words, 6, 1, "addr"), "") == 0);
    CHECK(kvline_get(words, 6, 1, "noequals") == NULL);
    CHECK(kvline_get(words, 6, 1, "kind") == NULL);
    CHECK(strcmp(kvline_get(words, 6, 1, "a"), "b=c") == 0);
    /* Splitting: at the first '='; a word without one stays whole. */
    CHECK(kvline_value(w2) == NULL && strcmp(w2, "noequals") == 0);
    CHECK(strcmp(kvline_value(w5), "b=c") == 0 && strcmp(w5, "a") == 0);
    CHECK(strcmp(kvline_value(w3), "") == 0 && strcmp(w3, "addr") == 0);

    CHECK(kvline_u64("42", &v) == 0 && v == 42);
    CHECK(kvline_u64("0x10", &v) == 0 && v == 16);
    CHECK(kvline_u64("18446744073709551615", &v) == 0 && v == UINT64_MAX);
    v = 7;
    CHECK(kvline_u64("18446744073709551616", &v) == -1);
    CHECK(kvline_u64("-1", &v) == -1);
    CHECK(kvline_u64("+1", &v) == -1);
    CHECK(kvline_u64(" 1", &v) == -1);
    CHECK(kvline_u64("1k", &v) == -1);
    CHECK(kvline_u64("", &v) == -1);
    CHECK(kvline_u64(NULL, &v) == -1);
    CHECK(v == 7); /* untouched on error */

    /* The error helper: file and line, and a message cut to the buffer. */
    CHECK_EQ_INT(
        kvline_init(&lx, "dir/f.topo", "x\ny\n", 4, 10, err, sizeof(err)),
        INCOLL_OK);
    CHECK_EQ_INT(kvline_error(&lx, "whole file %d", 1), INCOLL_ERR_CONFIG);
    CHECK(strcmp(err, "dir/f.topo:0: whole file 1") == 0);
    {
        char *w[4];
        int n;
        CHECK_EQ_INT(kvline_next(&lx, w, 4, &n), 1);
        CHECK_EQ_INT(kvline_next(&lx, w, 4, &n), 1);
        CHECK_EQ_INT(kvline_error(&lx, "bad %s", w[0]), INCOLL_ERR_CONFIG);
        CHECK(strcmp(err, "dir/f.topo:2: bad y") == 0);
        CHECK_EQ_INT(kvline_next(&lx, w, 4, &n), 0);
    }
    lx.errlen = 8;
    kvline_error(&lx, "a long message");
    CHECK(strcmp(err, "dir/f.t") == 0);
    kvline_done(&lx);
    return TEST_PASSED;
}

/* Writes text to a file of the test's directory; its path in path. */
static int put_file(const char *name, const char *text, char *path, size_t len)
{
    FILE *f;
    snprintf(path, len, "%s/%s", test_tmpdir(), name);
    f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fputs(text, f);
    return fclose(f);
}

/* Both formats report the lexer's errors with their file and line, and a
 * missing '=' in their own words. */
TEST(kvline_both_parsers, TEST_UNIT)
{
    char path[512], err[600], want[700];
    fabric_conf_t conf;
    topo_t topo;

    CHECK(put_file("a.conf",
                   "# fabric\nfabric hosts=1 radix=2 levels=1 admin_key=1\n"
                   "an name=l0 level=1 addr=127.0.0.1:4000 parent\n",
                   path, sizeof(path)) == 0);
    CHECK_EQ_INT(fabric_conf_load(path, &conf, err, sizeof(err)),
                 INCOLL_ERR_CONFIG);
    snprintf(want, sizeof(want), "%s:3: field 'parent' is not key=value", path);
    CHECK_MSG(strcmp(err, want) == 0, "'%s'", err);

    CHECK(put_file("a.topo", "switch s0 level=1\nswitch s1 level\n", path,
                   sizeof(path)) == 0);
    CHECK_EQ_INT(topo_load(path, &topo, err, sizeof(err)), INCOLL_ERR_CONFIG);
    snprintf(want, sizeof(want), "%s:2: switch s1: 'level' is not key=value",
             path);
    CHECK_MSG(strcmp(err, want) == 0, "'%s'", err);

    /* The same over-long line: the limits differ (1023 and 4095). */
    {
        char *text = malloc(5000);
        CHECK(text != NULL);
        memset(text, '#', 4999);
        text[4999] = '\0';
        CHECK(put_file("long.conf", text, path, sizeof(path)) == 0);
        CHECK_EQ_INT(fabric_conf_load(path, &conf, err, sizeof(err)),
                     INCOLL_ERR_CONFIG);
        snprintf(want, sizeof(want),
                 "%s:1: line too long (4999 characters, at most 1023)", path);
        CHECK_MSG(strcmp(err, want) == 0, "'%s'", err);
        CHECK(put_file("long.topo", text, path, sizeof(path)) == 0);
        CHECK_EQ_INT(topo_load(path, &topo, err, sizeof(err)),
                     INCOLL_ERR_CONFIG);
        snprintf(want, sizeof(want),
                 "%s:1: line too long (4999 characters, at most 4095)", path);
        CHECK_MSG(strcmp(err, want) == 0, "'%s'", err);
        free(text);
    }

    /* A file that is not there: line 0. */
    snprintf(path, sizeof(path), "%s/missing.conf", test_tmpdir());
    CHECK_EQ_INT(fabric_conf_load(path, &conf, err, sizeof(err)),
                 INCOLL_ERR_CONFIG);
    snprintf(want, sizeof(want), "%s:0: cannot open: ", path);
    CHECK_MSG(strncmp(err, want, strlen(want)) == 0, "'%s'", err);
    return TEST_PASSED;
}

/* The fabric record's levels= is the tree's: its root is on that level
 * and no AN above it, each refused with the line at fault. */
TEST(fabric_conf_levels_agree, TEST_UNIT)
{
    static const char body[] = "an name=root level=2 addr=127.0.0.1:4000 "
                               "parent=-\n"
                               "an name=l0 level=1 addr=127.0.0.1:4001 "
                               "parent=root\n"
                               "host rank=0 leaf=l0 addr=127.0.0.1\n"
                               "group id=1 key=2 slots=4 payload=1024\n";
    char path[512], err[600], want[700], text[1024];
    fabric_conf_t conf;

    snprintf(text, sizeof(text),
             "fabric hosts=1 radix=2 levels=5 admin_key=1\n%s", body);
    CHECK(put_file("levels.conf", text, path, sizeof(path)) == 0);
    CHECK_EQ_INT(fabric_conf_load(path, &conf, err, sizeof(err)),
                 INCOLL_ERR_CONFIG);
    snprintf(want, sizeof(want),
             "%s:1: the fabric record says levels=5 but the root an root is "
             "on level 2",
             path);
    CHECK_MSG(strcmp(err, want) == 0, "'%s'", err);

    snprintf(text, sizeof(text),
             "fabric hosts=1 radix=2 levels=1 admin_key=1\n%s", body);
    CHECK(put_file("levels.conf", text, path, sizeof(path)) == 0);
    CHECK_EQ_INT(fabric_conf_load(path, &conf, err, sizeof(err)),
                 INCOLL_ERR_CONFIG);
    snprintf(want, sizeof(want),
             "%s:2: an root: level 2 is above the fabric's levels=1", path);
    CHECK_MSG(strcmp(err, want) == 0, "'%s'", err);

    snprintf(text, sizeof(text),
             "fabric hosts=1 radix=2 levels=2 admin_key=1\n%s", body);
    CHECK(put_file("levels.conf", text, path, sizeof(path)) == 0);
    CHECK_EQ_INT(fabric_conf_load(path, &conf, err, sizeof(err)), INCOLL_OK);
    CHECK_EQ_INT(conf.levels, 2);
    fabric_conf_free(&conf);
    return TEST_PASSED;
}
