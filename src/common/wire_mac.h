/*
 * Per-packet authentication of the data path (docs/security.md).
 *
 * Every datagram carries, in the header's 8-byte "mac" field, a tag over
 * the whole packet: the payload, then the header with the mac field left
 * out (payload first, so that one payload's hash serves every header it
 * is sent under). The header's fixed length at the end makes the split
 * unambiguous. The tag is SipHash-2-4 (64 bits) under a 128-bit key that
 * belongs to one group (CONTRIB/RESULT), one communicator's host-based
 * algorithms (P2P_*) or the fabric's admin key (STATS_*). The key itself
 * never travels in a data packet, so seeing packets gives nothing that
 * helps to forge one: each forgery attempt costs one packet sent and
 * succeeds with probability 2^-64.
 *
 * SipHash was made for exactly this (short inputs, a 64-bit tag, no nonce)
 * and is the fastest choice on the 8-byte packets of small collectives.
 * Having no nonce matters: retransmissions and re-forwarded aggregates
 * repeat headers, which a one-time MAC such as Poly1305 must never see.
 *
 * Keys are derived (wire_key_derive) from the fabric secret when there is
 * one, so that only holders of the secret who were also told the group's
 * random 64-bit key by the manager (or read it from fabric.conf) can
 * compute them. The code has no dependency: SipHash is here, and only the
 * derivation from a secret uses libsodium (BLAKE2b), which is also what
 * loads a secret at all.
 */
#ifndef INCOLL_WIRE_MAC_H
#define INCOLL_WIRE_MAC_H

#include "common/wire.h"

#include <stddef.h>
#include <stdint.h>

#define WIRE_SECRET_LEN 32 /* a master key from mgr_secret_load() */

/* A 128-bit SipHash key. */
typedef struct {
    uint64_t k0, k1;
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
 */
void wire_key_derive(const uint8_t *secret, wire_key_purpose_t purpose,
                     uint64_t a, uint64_t b, wire_key_t *key_p);

/* SipHash-2-4 of the n bytes at p under key (exposed for the tests). */
uint64_t wire_siphash(const wire_key_t *key, const void *p, size_t n);

/*
 * Computes the tag of a packed header (WIRE_HDR_LEN bytes, its mac field
 * ignored) and len payload bytes, and writes it into the header's mac
 * field. Call after wire_pack, before sending.
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
} wire_mac_state_t;

void wire_mac_prepare(const wire_key_t *key, const void *payload, size_t len,
                      wire_mac_state_t *st_p);
void wire_mac_seal_prepared(const wire_mac_state_t *st, uint8_t *hdr);

/* 1 when the datagram of len bytes (at least WIRE_HDR_LEN) carries the
 * right tag for key, else 0. Compares in constant time. */
int wire_mac_check(const wire_key_t *key, const void *buf, size_t len);

#endif
