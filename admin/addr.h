/*
 * addr.h - socket addresses and CIDR prefixes as a config writes them:
 * "IPv4:PORT", "[IPv6]:PORT" or (where names are allowed) "host.name:PORT",
 * and "10.0.0.0/8". Parsing reports a reason fragment for the caller's
 * error message; nothing here prints or resolves names.
 */
#ifndef SY_ADMIN_ADDR_H
#define SY_ADMIN_ADDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Ports are 1..65535 written without leading zeros. IPv6 zone ids are not
 * supported. */
struct adm_addr {
    char *text;    /* as written */
    char *host;    /* the IP literal without brackets, or the host name in lower case */
    uint16_t port; /* host byte order */
    int numeric;   /* 1: <ss>/<sslen> hold the address; 0: a name to resolve */
    struct sockaddr_storage ss;
    socklen_t sslen;
};

/* Parses <s> into <a> (which it overwrites: free an old value first). On an
 * invalid address returns -1 with errno EINVAL and a reason in <why> (a
 * fragment such as "port must be 1..65535"); on out of memory -1 with errno
 * ENOMEM. Free with adm_addr_free(). */
int adm_addr_parse(struct adm_addr *a, const char *s, int allow_name, char *why, size_t cap);
void adm_addr_free(struct adm_addr *a);
/* 1 when <a> is numeric and in 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104. */
int adm_addr_is_loopback(const struct adm_addr *a);
/* A key into <buf> that is equal for two addresses exactly when they name
 * the same socket address: "1.2.3.4:80", "[::1]:80" or "name:80". */
void adm_addr_key(const struct adm_addr *a, char *buf, size_t cap);
struct sockaddr;
/* Socket address <sa> (IPv4 or IPv6) as "1.2.3.4:80" or "[::1]:80" into
 * <buf>; "?:0" for another family. */
void adm_sockaddr_text(const struct sockaddr *sa, char *buf, size_t cap);
/* Whether binding both numeric addresses would collide: same port, and the
 * same address or a wildcard on either side. */
int adm_addr_overlaps(const struct adm_addr *a, const struct adm_addr *b);

struct adm_cidr {
    int family;             /* AF_INET or AF_INET6 */
    unsigned char addr[16]; /* network address; IPv4 uses the first 4 bytes */
    unsigned prefix;        /* 0..32 or 0..128 */
};

/* "10.0.0.0/8", "::1/128", or a bare address (/32 or /128). Host bits set
 * beyond the prefix are an error ("10.1.2.3/8"). 0, or -1 with <why>. */
int adm_cidr_parse(struct adm_cidr *out, const char *s, char *why, size_t cap);
/* 1 when <sa> (AF_INET or AF_INET6; anything else never matches) is inside
 * one of the <n> prefixes of <list>. An IPv4-mapped IPv6 address
 * (::ffff:a.b.c.d, what a dual-stack socket reports) matches IPv4 prefixes,
 * and an IPv4 address matches IPv6 prefixes covering its mapped form. */
int adm_cidr_match(const struct adm_cidr *list, size_t n, const struct sockaddr *sa);

#endif
