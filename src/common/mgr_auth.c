/*
 * The manager's control protocol, its authentication: see mgr_auth.h and
 * docs/manager.md.
 */
#include "common/mgr_auth.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef INCOLL_HAVE_SODIUM
#include <sodium.h>
#endif

/* ---- secret ---- */

incoll_status_t mgr_secret_generate(const char *path)
{
#ifdef INCOLL_HAVE_SODIUM
    uint8_t raw[32];
    char hex[65 + 1];
    int fd;
    ssize_t n;

    if (sodium_init() < 0)
        return INCOLL_ERR_UNSUPPORTED;
    randombytes_buf(raw, sizeof(raw));
    sodium_bin2hex(hex, 65, raw, sizeof(raw));
    sodium_memzero(raw, sizeof(raw));
    hex[64] = '\n';
    hex[65] = '\0';
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        incoll_error("secret %s: cannot create: %s", path, log_strerror(errno));
        return INCOLL_ERR_IO;
    }
    n = write(fd, hex, 65);
    sodium_memzero(hex, sizeof(hex));
    if (fchmod(fd, 0600) != 0 || n != 65 || close(fd) != 0) {
        incoll_error("secret %s: cannot write: %s", path, log_strerror(errno));
        unlink(path);
        return INCOLL_ERR_IO;
    }
    return INCOLL_OK;
#else
    incoll_error("secret %s: incoll was built without libsodium", path);
    return INCOLL_ERR_UNSUPPORTED;
#endif
}

incoll_status_t mgr_secret_load(const char *path, uint8_t key[MGR_KEY_LEN],
                                char *err, size_t errlen)
{
#ifdef INCOLL_HAVE_SODIUM
    uint8_t buf[4097];
    struct stat sb;
    ssize_t n;
    size_t len;
    int fd;

    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium failed to initialize");
        return INCOLL_ERR_UNSUPPORTED;
    }
    if (path == NULL || *path == '\0') {
        snprintf(err, errlen, "no secret file (set INCOLL_SECRET_FILE)");
        return INCOLL_ERR_CONFIG;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "secret %s: cannot open: %s", path,
                 log_strerror(errno));
        return INCOLL_ERR_CONFIG;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "secret %s: not a regular file", path);
        close(fd);
        return INCOLL_ERR_CONFIG;
    }
    if (sb.st_mode & 077)
        incoll_warn("secret %s: readable by others (mode %03o); chmod 600 it",
                    path, (unsigned)(sb.st_mode & 0777));
    n = read(fd, buf, sizeof(buf));
    close(fd);
    if (n < 0 || n == (ssize_t)sizeof(buf)) {
        snprintf(err, errlen, "secret %s: %s", path,
                 n < 0 ? log_strerror(errno) : "longer than 4096 bytes");
        sodium_memzero(buf, sizeof(buf));
        return INCOLL_ERR_CONFIG;
    }
    len = (size_t)n;
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' ||
                       buf[len - 1] == ' ' || buf[len - 1] == '\t'))
        len--;
    if (len < 16) {
        snprintf(err, errlen, "secret %s: shorter than 16 bytes", path);
        sodium_memzero(buf, sizeof(buf));
        return INCOLL_ERR_AUTH;
    }
    crypto_generichash(key, MGR_KEY_LEN, buf, len, NULL, 0);
    sodium_memzero(buf, sizeof(buf));
    return INCOLL_OK;
#else
    (void)key;
    snprintf(err, errlen,
             "secret %s: incoll was built without libsodium, so "
             "the manager cannot be used",
             path ? path : "");
    return INCOLL_ERR_UNSUPPORTED;
#endif
}

/* ---- handshake and frame macs ---- */

#ifdef INCOLL_HAVE_SODIUM
static const char label_client[] = "incoll-mgr v1 client proof";
static const char label_server[] = "incoll-mgr v1 server proof";
static const char label_c2s[] = "incoll-mgr v1 c2s";
static const char label_s2c[] = "incoll-mgr v1 s2c";

/* HMAC-SHA512-256 under key over label, both nonces and the role. */
static void proof(const uint8_t key[MGR_KEY_LEN], const char *label,
                  const uint8_t *snonce, const uint8_t *cnonce, uint8_t role,
                  uint8_t out[MGR_MAC_LEN])
{
    crypto_auth_hmacsha512256_state s;
    crypto_auth_hmacsha512256_init(&s, key, MGR_KEY_LEN);
    crypto_auth_hmacsha512256_update(&s, (const uint8_t *)label, strlen(label));
    crypto_auth_hmacsha512256_update(&s, snonce, MGR_NONCE_LEN);
    crypto_auth_hmacsha512256_update(&s, cnonce, MGR_NONCE_LEN);
    crypto_auth_hmacsha512256_update(&s, &role, 1);
    crypto_auth_hmacsha512256_final(&s, out);
    sodium_memzero(&s, sizeof(s));
}

static void derive(const uint8_t key[MGR_KEY_LEN], const char *label,
                   const uint8_t *snonce, const uint8_t *cnonce,
                   uint8_t out[MGR_KEY_LEN])
{
    crypto_generichash_state s;
    crypto_generichash_init(&s, key, MGR_KEY_LEN, MGR_KEY_LEN);
    crypto_generichash_update(&s, (const uint8_t *)label, strlen(label));
    crypto_generichash_update(&s, snonce, MGR_NONCE_LEN);
    crypto_generichash_update(&s, cnonce, MGR_NONCE_LEN);
    crypto_generichash_final(&s, out, MGR_KEY_LEN);
    sodium_memzero(&s, sizeof(s));
}

incoll_status_t mgr_auth_init(void)
{
    return sodium_init() < 0 ? INCOLL_ERR_UNSUPPORTED : INCOLL_OK;
}

void mgr_auth_hello(uint8_t snonce[MGR_NONCE_LEN], mgr_wbuf_t *w)
{
    randombytes_buf(snonce, MGR_NONCE_LEN);
    mgr_w_u32(w, MGR_PROTO_MAGIC);
    mgr_w_u16(w, MGR_PROTO_VERSION);
    mgr_w_bytes(w, snonce, MGR_NONCE_LEN);
}

incoll_status_t mgr_auth_answer_hello(const uint8_t key[MGR_KEY_LEN],
                                      uint8_t role, const uint8_t *body,
                                      size_t len, uint8_t snonce[MGR_NONCE_LEN],
                                      uint8_t cnonce[MGR_NONCE_LEN],
                                      mgr_wbuf_t *w, const char **why_p)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    uint8_t pr[MGR_MAC_LEN];
    uint32_t magic = mgr_r_u32(&r);
    uint16_t version = mgr_r_u16(&r);
    const uint8_t *sn = mgr_r_bytes(&r, MGR_NONCE_LEN);

    if (mgr_r_done(&r) || magic != MGR_PROTO_MAGIC) {
        *why_p = "not an incoll manager";
        return INCOLL_ERR_PROTOCOL;
    }
    if (version != MGR_PROTO_VERSION) {
        *why_p = "unsupported protocol version";
        return INCOLL_ERR_PROTOCOL;
    }
    memcpy(snonce, sn, MGR_NONCE_LEN);
    randombytes_buf(cnonce, MGR_NONCE_LEN);
    proof(key, label_client, snonce, cnonce, role, pr);
    mgr_w_u16(w, MGR_PROTO_VERSION);
    mgr_w_u8(w, role);
    mgr_w_bytes(w, cnonce, MGR_NONCE_LEN);
    mgr_w_bytes(w, pr, MGR_MAC_LEN);
    return INCOLL_OK;
}

incoll_status_t
mgr_auth_check_auth(const uint8_t key[MGR_KEY_LEN],
                    const uint8_t snonce[MGR_NONCE_LEN], const uint8_t *body,
                    size_t len, uint8_t *role_p, uint8_t cnonce[MGR_NONCE_LEN],
                    uint8_t proof_out[MGR_MAC_LEN], const char **why_p)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    uint8_t want[MGR_MAC_LEN];
    uint16_t version = mgr_r_u16(&r);
    uint8_t role = mgr_r_u8(&r);
    const uint8_t *cn = mgr_r_bytes(&r, MGR_NONCE_LEN);
    const uint8_t *pr = mgr_r_bytes(&r, MGR_MAC_LEN);

    if (mgr_r_done(&r)) {
        *why_p = "malformed auth";
        return INCOLL_ERR_PROTOCOL;
    }
    if (version != MGR_PROTO_VERSION) {
        *why_p = "unsupported protocol version";
        return INCOLL_ERR_PROTOCOL;
    }
    if (role < MGR_ROLE_AN || role > MGR_ROLE_ADMIN) {
        *why_p = "unknown role";
        return INCOLL_ERR_PROTOCOL;
    }
    proof(key, label_client, snonce, cn, role, want);
    if (sodium_memcmp(want, pr, MGR_MAC_LEN) != 0) {
        *why_p = "wrong proof of the fabric secret";
        return INCOLL_ERR_AUTH;
    }
    memcpy(cnonce, cn, MGR_NONCE_LEN);
    *role_p = role;
    proof(key, label_server, snonce, cnonce, role, proof_out);
    return INCOLL_OK;
}

incoll_status_t mgr_auth_check_ok(const uint8_t key[MGR_KEY_LEN],
                                  const uint8_t snonce[MGR_NONCE_LEN],
                                  const uint8_t cnonce[MGR_NONCE_LEN],
                                  uint8_t role, const uint8_t *body, size_t len)
{
    uint8_t want[MGR_MAC_LEN];
    if (len != MGR_MAC_LEN)
        return INCOLL_ERR_AUTH;
    proof(key, label_server, snonce, cnonce, role, want);
    return sodium_memcmp(want, body, MGR_MAC_LEN) == 0 ? INCOLL_OK
                                                       : INCOLL_ERR_AUTH;
}

void mgr_auth_session_keys(const uint8_t key[MGR_KEY_LEN], int server,
                           const uint8_t snonce[MGR_NONCE_LEN],
                           const uint8_t cnonce[MGR_NONCE_LEN],
                           uint8_t k_tx[MGR_KEY_LEN], uint8_t k_rx[MGR_KEY_LEN])
{
    derive(key, server ? label_s2c : label_c2s, snonce, cnonce, k_tx);
    derive(key, server ? label_c2s : label_s2c, snonce, cnonce, k_rx);
}

void mgr_auth_frame_mac(const uint8_t key[MGR_KEY_LEN], uint64_t seq,
                        const uint8_t *type_and_body, size_t n,
                        uint8_t out[MGR_MAC_LEN])
{
    crypto_auth_hmacsha512256_state s;
    uint8_t sb[8];
    for (int i = 0; i < 8; i++)
        sb[i] = (uint8_t)(seq >> (8 * i));
    crypto_auth_hmacsha512256_init(&s, key, MGR_KEY_LEN);
    crypto_auth_hmacsha512256_update(&s, sb, 8);
    crypto_auth_hmacsha512256_update(&s, type_and_body, n);
    crypto_auth_hmacsha512256_final(&s, out);
}

int mgr_auth_mac_equal(const uint8_t *a, const uint8_t *b)
{
    return sodium_memcmp(a, b, MGR_MAC_LEN) == 0;
}

void mgr_auth_wipe(void *p, size_t n)
{
    sodium_memzero(p, n);
}

#else /* no libsodium: nothing authenticates */

incoll_status_t mgr_auth_init(void)
{
    return INCOLL_ERR_UNSUPPORTED;
}

void mgr_auth_hello(uint8_t snonce[MGR_NONCE_LEN], mgr_wbuf_t *w)
{
    (void)snonce;
    w->oom = 1;
}

incoll_status_t mgr_auth_answer_hello(const uint8_t key[MGR_KEY_LEN],
                                      uint8_t role, const uint8_t *body,
                                      size_t len, uint8_t snonce[MGR_NONCE_LEN],
                                      uint8_t cnonce[MGR_NONCE_LEN],
                                      mgr_wbuf_t *w, const char **why_p)
{
    *why_p = "built without libsodium";
    return INCOLL_ERR_UNSUPPORTED;
}

incoll_status_t
mgr_auth_check_auth(const uint8_t key[MGR_KEY_LEN],
                    const uint8_t snonce[MGR_NONCE_LEN], const uint8_t *body,
                    size_t len, uint8_t *role_p, uint8_t cnonce[MGR_NONCE_LEN],
                    uint8_t proof_out[MGR_MAC_LEN], const char **why_p)
{
    *why_p = "built without libsodium";
    return INCOLL_ERR_UNSUPPORTED;
}

incoll_status_t mgr_auth_check_ok(const uint8_t key[MGR_KEY_LEN],
                                  const uint8_t snonce[MGR_NONCE_LEN],
                                  const uint8_t cnonce[MGR_NONCE_LEN],
                                  uint8_t role, const uint8_t *body, size_t len)
{
    return INCOLL_ERR_UNSUPPORTED;
}

void mgr_auth_session_keys(const uint8_t key[MGR_KEY_LEN], int server,
                           const uint8_t snonce[MGR_NONCE_LEN],
                           const uint8_t cnonce[MGR_NONCE_LEN],
                           uint8_t k_tx[MGR_KEY_LEN], uint8_t k_rx[MGR_KEY_LEN])
{
    memset(k_tx, 0, MGR_KEY_LEN);
    memset(k_rx, 0, MGR_KEY_LEN);
}

void mgr_auth_frame_mac(const uint8_t key[MGR_KEY_LEN], uint64_t seq,
                        const uint8_t *type_and_body, size_t n,
                        uint8_t out[MGR_MAC_LEN])
{
    memset(out, 0, MGR_MAC_LEN);
}

int mgr_auth_mac_equal(const uint8_t *a, const uint8_t *b)
{
    return 0;
}

void mgr_auth_wipe(void *p, size_t n)
{
    volatile uint8_t *q = p;
    while (n--)
        *q++ = 0;
}
#endif
