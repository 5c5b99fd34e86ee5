#ifndef HOMEMQTT_CSODIUM_SHIM_H
#define HOMEMQTT_CSODIUM_SHIM_H
// libsodium: ChaCha20-Poly1305 (IETF, detached tag) for HAP's session frames (HAPSessionCipher),
// sealed and opened in place in the connection's buffers, and sodium_memzero for the session keys.
#include <sodium.h>
#endif
