/*
 * The line lexer of incoll's two text formats, fabric.conf
 * (docs/fabric-conf.md, src/common/fabric_conf.c) and the topology file
 * (docs/topology.md, src/mgr/topo.c). Both are a record per line:
 *
 *   word word key=value key=value   # a comment
 *
 * Words are separated by blanks (space, tab, carriage return); '#' starts
 * a comment that runs to the end of the line; blank and comment-only
 * lines are skipped. There is no quoting: a word holds neither a blank
 * nor '#'. A line may not hold a NUL byte and has at most max_line
 * characters (its newline not counted); the last line may lack its
 * newline. What the words mean (which are key=value, which keys exist) is
 * the parser's business; the lexer gives it the words, a lookup of
 * key=value words, a number parser, and one error helper that writes
 * "path:line: cause" (line 0: the file as a whole), the form both formats
 * document.
 *
 *   kvline_t lx;
 *   kvline_init(&lx, path, text, len, 1023, err, sizeof(err));
 *   while ((ret = kvline_next(&lx, words, MAX, &n)) > 0)
 *       ... words[0..n) ..., on a bad value: return kvline_error(&lx, ...)
 *   kvline_done(&lx);
 */
#ifndef INCOLL_COMMON_KVLINE_H
#define INCOLL_COMMON_KVLINE_H

#include "incoll.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *path; /* names the file in messages */
    int line;         /* the line kvline_next() returned last; 0 before
                         the first and for whole-file errors */
    char *err;        /* the caller's buffer for "path:line: cause" */
    size_t errlen;
    /* private */
    const char *text;
    size_t len, pos, max_line;
    char *buf; /* the current line, NUL-terminated, max_line + 1 bytes */
} kvline_t;

/*
 * Prepares to read text[0..len) (not NUL-terminated; it may hold NUL
 * bytes, which kvline_next() refuses with their line). text and err stay
 * the caller's and must outlive lx. Returns INCOLL_OK, or
 * INCOLL_ERR_CONFIG with "path:0: out of memory" in err.
 */
incoll_status_t kvline_init(kvline_t *lx, const char *path, const char *text,
                            size_t len, size_t max_line, char *err,
                            size_t errlen);
/* Frees what kvline_init() allocated. */
void kvline_done(kvline_t *lx);

/*
 * The next record: its words in words[0..*n_p) (pointers into lx's line
 * buffer, valid until the next call; the parser may write into them, as
 * kvline_value() does). Returns 1 with a record (n >= 1), 0 at the end of
 * the text, or -1 with the error in err: a NUL byte, a line longer than
 * max_line, more than max_words words.
 */
int kvline_next(kvline_t *lx, char **words, int max_words, int *n_p);

/* Writes "path:line: " and the message into lx->err (when it has room) and
 * returns INCOLL_ERR_CONFIG, so a parser can `return kvline_error(...)`. */
incoll_status_t kvline_error(kvline_t *lx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Splits a key=value word at its first '=' (written to NUL): returns the
 * value ("" for "key="), or NULL and the word unchanged when it has no
 * '='.
 */
char *kvline_value(char *word);

/* The value of the first word of words[first..n) that is "key=...", or
 * NULL. The words are not changed. */
const char *kvline_get(char *const *words, int n, int first, const char *key);

/* s as an unsigned number, decimal or 0x hexadecimal, the whole string:
 * 0, or -1 (empty, a sign, trailing characters, out of range). */
int kvline_u64(const char *s, uint64_t *v_p);

/*
 * Reads the whole file at path (at most max_bytes) into a buffer the
 * caller frees, its length in *len_p (the buffer has one more byte, a NUL,
 * after it). On error returns INCOLL_ERR_CONFIG with "path:0: cause" in
 * err.
 */
incoll_status_t kvline_read_file(const char *path, size_t max_bytes,
                                 char **text_p, size_t *len_p, char *err,
                                 size_t errlen);

#endif
