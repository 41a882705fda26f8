/*
 * The manager's control protocol (docs/manager.md), in three parts:
 *  - common/mgr_codec.h: constants, message types and the codec of every
 *    message body (no I/O, no crypto);
 *  - common/mgr_auth.h: the fabric secret, the handshake's proofs, session
 *    keys and frame macs (libsodium);
 *  - common/mgr_stream.h: frames on a non-blocking socket, the handshake's
 *    state machine, connecting.
 * Shared by the manager (src/mgr), the AN's link to it
 * (src/agg/agg_mgr_link.c), the host library (src/host/mgr_client.c) and
 * the CLI; this header includes all three.
 */
#ifndef INCOLL_MGR_PROTO_H
#define INCOLL_MGR_PROTO_H

#include "common/mgr_auth.h"
#include "common/mgr_codec.h"
#include "common/mgr_stream.h"

#endif
