#ifndef HOMEMQTT_CCOAP_SHIM_H
#define HOMEMQTT_CCOAP_SHIM_H
// libcoap 4.3 (Debian's libcoap3), the notls build: see module.modulemap for why no DTLS.
#include <coap3/coap.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/eventfd.h>

// Small helpers over coap_address_t's sockaddr union, which Swift reaches only awkwardly.

/// Fills `address` from a numeric IPv6 or IPv4 host and a port (host order).
/// Returns 1, or 0 if `host` is neither (names are not resolved: CoAP peers here are numeric).
static inline int hm_coap_address_set(coap_address_t *address, const char *host, uint16_t port) {
    struct in6_addr a6;
    struct in_addr a4;
    coap_address_init(address);
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        address->addr.sin6.sin6_family = AF_INET6;
        address->addr.sin6.sin6_addr = a6;
        address->addr.sin6.sin6_port = htons(port);
        address->size = sizeof(struct sockaddr_in6);
        return 1;
    }
    if (inet_pton(AF_INET, host, &a4) == 1) {
        address->addr.sin.sin_family = AF_INET;
        address->addr.sin.sin_addr = a4;
        address->addr.sin.sin_port = htons(port);
        address->size = sizeof(struct sockaddr_in);
        return 1;
    }
    return 0;
}

/// Writes the numeric host of `address` into `buffer` (at least INET6_ADDRSTRLEN bytes) and
/// returns its port (host order); the buffer holds "" for a family other than IPv4/IPv6.
static inline uint16_t hm_coap_address_get(const coap_address_t *address, char *buffer, socklen_t length) {
    buffer[0] = 0;
    if (address->addr.sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &address->addr.sin6.sin6_addr, buffer, length);
        return ntohs(address->addr.sin6.sin6_port);
    }
    if (address->addr.sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &address->addr.sin.sin_addr, buffer, length);
        return ntohs(address->addr.sin.sin_port);
    }
    return 0;
}

#endif
