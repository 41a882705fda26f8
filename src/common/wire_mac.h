/*
 * Per-packet authentication of the data path (docs/security.md).
 *
 * Every datagram carries, in the header's 8-byte "mac" field, a tag over
 * the whole packet, and in its "macalg" byte the algorithm that made it
 * (wire.h). The key is 128 bits and belongs to one group (CONTRIB, RESULT,
 * LOCK*), one communicator's host-based algorithms (P2P_*) or the
 * fabric's admin key (STATS_*). The key itself never travels in a data
 * packet, so seeing packets gives nothing that helps to forge one: each
 * forgery attempt costs one packet sent and succeeds with probability
 * 2^-64.
 *
 * The algorithms (wire_mac_alg_t; INCOLL_MAC picks the process's):
 *  - siphash: SipHash-2-4 (k, payload || header without the tag).
 *  - poly1305, gmac: the same SipHash, over a 16-byte digest of the
 *    payload instead of the payload itself when the payload has at least
 *    WIRE_MAC_DIGEST_MIN bytes (below that, as siphash):
 *        tag = SipHash-2-4(k, 0x01 || D(dk, payload) || header)
 *    where D is Poly1305 under a fixed 32-byte key dk (poly1305) or
 *    AES-256-GCM with a fixed IV and the payload as associated data, that
 *    is GMAC (gmac), dk derived from k. Both are universal hashes whose
 *    output never leaves the process (it only feeds SipHash), which is
 *    what lets them run without a nonce: the classic "hash, then PRF"
 *    MAC. They run at the speed of the CPU's vector units (OpenSSL's
 *    libcrypto when the build has it, else libsodium: the same function,
 *    the same bits), 4-6 times SipHash's on 8 KiB payloads
 *    (docs/benchmarks.md, MAC).
 *  - none: no tag (zero, never checked): for operators whose switches are
 *    trusted, never the default; `incoll stat` and the logs say it is on.
 * The payload (or its digest) comes first so that one payload sent under
 * several headers (an AN replicating a result) is hashed once.
 *
 * Having no nonce matters: retransmissions and re-forwarded aggregates
 * repeat headers, which a one-time MAC such as Poly1305 or GMAC used
 * alone must never see.
 *
 * Keys are derived (wire_key_derive) from the fabric secret when there is
 * one, so that only holders of the secret who were also told the group's
 * random 64-bit key by the manager (or read it from fabric.conf) can
 * compute them; only that derivation from a secret needs libsodium
 * (BLAKE2b), which is also what loads a secret at all.
 */
#ifndef INCOLL_WIRE_MAC_H
#define INCOLL_WIRE_MAC_H

#include "common/wire.h"

#include <stddef.h>
#include <stdint.h>

#define WIRE_SECRET_LEN 32 /* a master key from mgr_secret_load() */

/* Payloads of at least this many bytes are digested first (poly1305,
 * gmac): below it SipHash over the payload costs less than the digest's
 * setup (docs/benchmarks.md, MAC). Part of the algorithms' definition. */
#define WIRE_MAC_DIGEST_MIN 256

/* The algorithm ids of the header's macalg byte (docs/wire-format.md). */
typedef enum {
    WIRE_MAC_SIPHASH = 0,
    WIRE_MAC_POLY1305 = 1,
    WIRE_MAC_GMAC = 2,
    WIRE_MAC_NONE = 3,
    WIRE_MAC_COUNT = 4,
} wire_mac_alg_t;
_Static_assert(WIRE_MAC_COUNT == WIRE_MAC_ALGS, "wire.h's count of ids");

/* The algorithm's name ("siphash", "poly1305", "gmac", "none"; "unknown"
 * for other values). */
const char *wire_mac_alg_name(unsigned alg);

/*
 * A key: 128 bits of SipHash key, the algorithm its packets are sealed
 * with and must carry, and the digest key derived from the SipHash key
 * (poly1305, gmac). A key built by hand as {k0, k1} is a SipHash key;
 * wire_key_set_alg() gives it another algorithm.
 */
typedef struct {
    uint64_t k0, k1;
    uint8_t alg;    /* wire_mac_alg_t */
    uint8_t dk[32]; /* the digest's key, derived from k0, k1 */
} wire_key_t;

/* What a derived key is for; part of the derivation, so that a key for one
 * purpose is never the key for another. */
typedef enum {
    WIRE_KEY_GROUP = 1, /* a fabric group: CONTRIB and RESULT */
    WIRE_KEY_P2P = 2,   /* a communicator's host-based algorithms */
    WIRE_KEY_ADMIN = 3, /* STATS requests and replies */
} wire_key_purpose_t;

/*
 * Derives the key for purpose from (a, b) and, when secret is not NULL,
 * the WIRE_SECRET_LEN-byte fabric master key: BLAKE2b keyed with the
 * secret. Without a secret the key is a fixed public function of (a, b):
 * as secret as they are (a group's 64-bit random key from fabric.conf, the
 * admin key). With a secret but without libsodium (impossible in practice:
 * no secret can be loaded then) it falls back to the public function.
 * The key's algorithm is the process's (wire_mac_alg_default), SipHash
 * for WIRE_KEY_ADMIN (so that `incoll stat` reaches every AN).
 */
void wire_key_derive(const uint8_t *secret, wire_key_purpose_t purpose,
                     uint64_t a, uint64_t b, wire_key_t *key_p);

/* Gives key algorithm alg (deriving its digest key). */
void wire_key_set_alg(wire_key_t *key, wire_mac_alg_t alg);

/*
 * The process's algorithm: INCOLL_MAC, read once; its default is the
 * fastest measured on 8 KiB payloads (docs/benchmarks.md, MAC). An
 * algorithm this build or CPU cannot compute is refused by
 * wire_mac_alg_check (settings checks call it).
 */
wire_mac_alg_t wire_mac_alg_default(void);

/* 1 when this build and CPU can compute alg, else 0 with the cause in
 * why (a constant string) when why_p is not NULL. */
int wire_mac_alg_available(wire_mac_alg_t alg, const char **why_p);

/* Which library computes the digest of alg ("openssl", "libsodium",
 * "builtin" for siphash and none). */
const char *wire_mac_alg_impl(wire_mac_alg_t alg);

/* Makes impl ("openssl" or "libsodium") compute alg's digest in this
 * process, for the tests and the kernel benchmark (both give the same
 * bits). Returns 0, or -1 when this build or CPU cannot. */
int wire_mac_set_impl(wire_mac_alg_t alg, const char *impl);

/* SipHash-2-4 of the n bytes at p under key (exposed for the tests). */
uint64_t wire_siphash(const wire_key_t *key, const void *p, size_t n);

/*
 * The digest D of the n bytes at p under key (poly1305 or gmac): 16 bytes
 * into out. Exposed for the tests and the kernel benchmark.
 */
void wire_mac_digest(const wire_key_t *key, const void *p, size_t n,
                     uint8_t out[16]);

/*
 * Computes the tag of a packed header (WIRE_HDR_LEN bytes, its mac field
 * ignored) and len payload bytes, writes the key's algorithm into the
 * header's macalg byte and the tag into its mac field. Call after
 * wire_pack, before sending.
 */
void wire_mac_seal(const wire_key_t *key, uint8_t *hdr, const void *payload,
                   size_t len);

/*
 * The same in two steps, for one payload sent under several headers (an
 * AN replicating a result to its children): wire_mac_prepare hashes the
 * payload once (the tag covers the payload first, then the header), and
 * each wire_mac_seal_prepared finishes one header's tag from a copy of
 * that state. Gives the same tags as wire_mac_seal.
 */
typedef struct {
    uint64_t v[4];
    uint64_t tail;
    size_t ntail;
    size_t len;
    uint8_t alg;
} wire_mac_state_t;

void wire_mac_prepare(const wire_key_t *key, const void *payload, size_t len,
                      wire_mac_state_t *st_p);
void wire_mac_seal_prepared(const wire_mac_state_t *st, uint8_t *hdr);

/* 1 when the datagram of len bytes (at least WIRE_HDR_LEN) carries the
 * key's algorithm and the right tag for key, else 0. Compares in constant
 * time. A packet of another algorithm fails; wire_mac_alg_of says which
 * it carries, for the error message. */
int wire_mac_check(const wire_key_t *key, const void *buf, size_t len);

/* The macalg byte of a datagram of at least WIRE_HDR_LEN bytes. */
static inline unsigned wire_mac_alg_of(const void *buf)
{
    return ((const uint8_t *)buf)[WIRE_MACALG_OFF];
}

#endif
