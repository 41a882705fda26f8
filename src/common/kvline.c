/* The line lexer of fabric.conf and the topology file; see kvline.h. */
#include "common/kvline.h"
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

incoll_status_t kvline_init(kvline_t *lx, const char *path, const char *text,
                            size_t len, size_t max_line, char *err,
                            size_t errlen)
{
    memset(lx, 0, sizeof(*lx));
    lx->path = path;
    lx->err = err;
    lx->errlen = errlen;
    lx->text = text;
    lx->len = len;
    lx->max_line = max_line;
    lx->buf = malloc(max_line + 1);
    if (lx->buf == NULL)
        return kvline_error(lx, "out of memory");
    return INCOLL_OK;
}

void kvline_done(kvline_t *lx)
{
    free(lx->buf);
    lx->buf = NULL;
}

incoll_status_t kvline_error(kvline_t *lx, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (lx->err == NULL || lx->errlen == 0)
        return INCOLL_ERR_CONFIG;
    n = snprintf(lx->err, lx->errlen, "%s:%d: ", lx->path, lx->line);
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < lx->errlen)
        vsnprintf(lx->err + n, lx->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return INCOLL_ERR_CONFIG;
}

int kvline_next(kvline_t *lx, char **words, int max_words, int *n_p)
{
    while (lx->pos < lx->len) {
        const char *s = lx->text + lx->pos;
        const char *nl = memchr(s, '\n', lx->len - lx->pos);
        size_t n = nl ? (size_t)(nl - s) : lx->len - lx->pos;
        char *save = NULL, *tok, *hash;
        int nw = 0;

        lx->line++;
        lx->pos += n + (nl != NULL);
        if (n > lx->max_line) {
            kvline_error(lx, "line too long (%zu characters, at most %zu)", n,
                         lx->max_line);
            return -1;
        }
        if (memchr(s, '\0', n) != NULL) {
            kvline_error(lx, "NUL byte in the line");
            return -1;
        }
        memcpy(lx->buf, s, n);
        lx->buf[n] = '\0';
        hash = strchr(lx->buf, '#');
        if (hash)
            *hash = '\0';
        for (tok = strtok_r(lx->buf, " \t\r", &save); tok;
             tok = strtok_r(NULL, " \t\r", &save)) {
            if (nw == max_words) {
                kvline_error(lx, "more than %d words on the line", max_words);
                return -1;
            }
            words[nw++] = tok;
        }
        if (nw > 0) {
            *n_p = nw;
            return 1;
        }
    }
    *n_p = 0;
    return 0;
}

char *kvline_value(char *word)
{
    char *eq = strchr(word, '=');
    if (eq == NULL)
        return NULL;
    *eq = '\0';
    return eq + 1;
}

const char *kvline_get(char *const *words, int n, int first, const char *key)
{
    size_t klen = strlen(key);
    for (int i = first; i < n; i++)
        if (strncmp(words[i], key, klen) == 0 && words[i][klen] == '=')
            return words[i] + klen + 1;
    return NULL;
}

int kvline_u64(const char *s, uint64_t *v_p)
{
    char *end;
    unsigned long long v;

    /* strtoull() would take a sign or leading blanks. */
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *v_p = (uint64_t)v;
    return 0;
}

incoll_status_t kvline_read_file(const char *path, size_t max_bytes,
                                 char **text_p, size_t *len_p, char *err,
                                 size_t errlen)
{
    FILE *f = fopen(path, "r");
    char *text = NULL;
    size_t len = 0, cap = 0, n;

    if (f == NULL) {
        snprintf(err, errlen, "%s:0: cannot open: %s", path,
                 log_strerror(errno));
        return INCOLL_ERR_CONFIG;
    }
    do {
        if (len + 4096 + 1 > cap) {
            char *nt;
            cap = cap ? cap * 2 : 65536;
            if (len > max_bytes) {
                snprintf(err, errlen, "%s:0: larger than %zu bytes", path,
                         max_bytes);
                goto err_free;
            }
            nt = realloc(text, cap);
            if (nt == NULL) {
                snprintf(err, errlen, "%s:0: out of memory", path);
                goto err_free;
            }
            text = nt;
        }
        n = fread(text + len, 1, 4096, f);
        len += n;
    } while (n == 4096);
    if (ferror(f)) {
        snprintf(err, errlen, "%s:0: read error: %s", path,
                 log_strerror(errno));
        goto err_free;
    }
    if (len > max_bytes) {
        snprintf(err, errlen, "%s:0: larger than %zu bytes", path, max_bytes);
        goto err_free;
    }
    fclose(f);
    text[len] = '\0';
    *text_p = text;
    *len_p = len;
    return INCOLL_OK;

err_free:
    free(text);
    fclose(f);
    return INCOLL_ERR_CONFIG;
}
