/*
 * The manager's control protocol, its authentication (docs/manager.md):
 * the fabric secret, and the challenge-response handshake and per-frame
 * macs as pure functions over bytes. mgr_stream.c runs the handshake's
 * state machine with them; nothing here touches a socket.
 *
 * Handshake: the manager sends HELLO (magic, version, its nonce); the
 * client answers AUTH (version, role, its nonce, a proof: HMAC-SHA512-256
 * under the master key over a label, both nonces and the role); the
 * manager checks it and answers AUTH_OK with its own proof, or AUTH_FAIL.
 * Each direction then has its session key (BLAKE2b keyed with the master
 * key over a label and both nonces), and every frame carries
 * HMAC-SHA512-256 over (u64 sequence number, type, body) under it, so a
 * frame cannot be forged, replayed or reordered without the secret.
 * Crypto is libsodium's only; without it (no INCOLL_HAVE_SODIUM) every
 * entry point returns INCOLL_ERR_UNSUPPORTED (or fails).
 */
#ifndef INCOLL_MGR_AUTH_H
#define INCOLL_MGR_AUTH_H

#include "common/mgr_codec.h"

/* ---- secret ---- */

/*
 * Reads the fabric secret (at least 16 bytes) from path and derives the
 * 32-byte master key from it (BLAKE2b). Warns when the file is readable by
 * group or others. On error writes the cause into err and returns
 * INCOLL_ERR_CONFIG, INCOLL_ERR_AUTH or INCOLL_ERR_UNSUPPORTED.
 */
incoll_status_t mgr_secret_load(const char *path, uint8_t key[MGR_KEY_LEN],
                                char *err, size_t errlen);

/* Writes a new random secret (64 hex digits) to path with mode 0600,
 * failing if it exists. */
incoll_status_t mgr_secret_generate(const char *path);

/* ---- handshake and frame macs ---- */

/* Initializes the crypto library; INCOLL_ERR_UNSUPPORTED without it. */
incoll_status_t mgr_auth_init(void);

/* Manager: draws its nonce into snonce and appends HELLO's body to w. */
void mgr_auth_hello(uint8_t snonce[MGR_NONCE_LEN], mgr_wbuf_t *w);

/*
 * Client: checks HELLO's body, keeps the manager's nonce in snonce, draws
 * its own into cnonce and appends AUTH's body (proof of the key for role)
 * to w. Returns INCOLL_OK, or INCOLL_ERR_PROTOCOL with *why_p.
 */
incoll_status_t mgr_auth_answer_hello(const uint8_t key[MGR_KEY_LEN],
                                      uint8_t role, const uint8_t *body,
                                      size_t len, uint8_t snonce[MGR_NONCE_LEN],
                                      uint8_t cnonce[MGR_NONCE_LEN],
                                      mgr_wbuf_t *w, const char **why_p);

/*
 * Manager: checks AUTH's body against its nonce. On success writes the
 * client's role and nonce and the manager's proof for AUTH_OK. Returns
 * INCOLL_OK, INCOLL_ERR_PROTOCOL (malformed, version, role) or
 * INCOLL_ERR_AUTH (a wrong proof), with *why_p.
 */
incoll_status_t
mgr_auth_check_auth(const uint8_t key[MGR_KEY_LEN],
                    const uint8_t snonce[MGR_NONCE_LEN], const uint8_t *body,
                    size_t len, uint8_t *role_p, uint8_t cnonce[MGR_NONCE_LEN],
                    uint8_t proof_out[MGR_MAC_LEN], const char **why_p);

/* Client: checks AUTH_OK's proof. INCOLL_OK or INCOLL_ERR_AUTH. */
incoll_status_t mgr_auth_check_ok(const uint8_t key[MGR_KEY_LEN],
                                  const uint8_t snonce[MGR_NONCE_LEN],
                                  const uint8_t cnonce[MGR_NONCE_LEN],
                                  uint8_t role, const uint8_t *body,
                                  size_t len);

/* The session keys of one side (server: the manager's). */
void mgr_auth_session_keys(const uint8_t key[MGR_KEY_LEN], int server,
                           const uint8_t snonce[MGR_NONCE_LEN],
                           const uint8_t cnonce[MGR_NONCE_LEN],
                           uint8_t k_tx[MGR_KEY_LEN],
                           uint8_t k_rx[MGR_KEY_LEN]);

/* The mac of frame number seq (type and body as on the wire). */
void mgr_auth_frame_mac(const uint8_t key[MGR_KEY_LEN], uint64_t seq,
                        const uint8_t *type_and_body, size_t n,
                        uint8_t out[MGR_MAC_LEN]);

/* Constant-time comparison of two macs: 1 when equal. */
int mgr_auth_mac_equal(const uint8_t *a, const uint8_t *b);

/* Overwrites n bytes of secret material. */
void mgr_auth_wipe(void *p, size_t n);

#endif
