/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rendezvous.h — rank 0 hands a few bytes (NCCL's unique id) to every other rank, over TCP or
 * through a shared file, with time limits everywhere: nothing waits forever for a rank that
 * never comes.
 *
 * TCP: rank 0 opens a server (rendezvous_open: bound to a port, or to any free one with port 0,
 * and listening), then serves it (rendezvous_serve): accepts connections until every other rank
 * has been answered. A rank connects (rendezvous_fetch), retrying while nobody listens yet,
 * sends a greeting of 8 bytes ("rcdv" and its rank, big-endian) and reads the answer: "rcdv",
 * the length (big-endian, 4 bytes) and the bytes. A connection whose greeting is not one, or
 * names a rank out of range or already answered, is closed and not counted. Plain POSIX
 * sockets; IPv4 and IPv6 (getaddrinfo); partial reads and writes, and EINTR, are handled.
 *
 * File: rank 0 writes the bytes aside and renames the file into place, so no rank reads half of
 * it; the others wait for the file to appear.
 *
 * Every function returns 0, or -1 with a message of one line in error[0..size).
 */
#ifndef RECAP_EXAMPLE_RENDEZVOUS_H
#define RECAP_EXAMPLE_RENDEZVOUS_H

#include <stddef.h>

#include "launch_env.h"

typedef struct rendezvous_server {
  int fd;   /* the listening socket, -1 when closed */
  int port; /* the port it listens on (the one the system chose, for port 0) */
} rendezvous_server_t;

/* Listens on `port` (0: any free one) of `host`'s address (NULL: every address of the machine,
 * IPv6 and IPv4). */
int rendezvous_open(rendezvous_server_t *server, const char *host, int port, char *error,
                    size_t size);
/* Answers ranks 1..world-1 with data[0..bytes), each once, within timeout_ms in all. */
int rendezvous_serve(rendezvous_server_t *server, int world, const void *data, size_t bytes,
                     int timeout_ms, char *error, size_t size);
/* Closes the server (already closed: nothing). */
void rendezvous_close(rendezvous_server_t *server);

/* Rank `rank` fetches exactly `bytes` bytes from rank 0's server at host:port within
 * timeout_ms, connecting again every 100 ms while nobody listens. */
int rendezvous_fetch(const char *host, int port, int rank, void *data, size_t bytes, int timeout_ms,
                     char *error, size_t size);

/* The shared file's two sides. */
int rendezvous_file_write(const char *path, const void *data, size_t bytes, char *error,
                          size_t size);
int rendezvous_file_read(const char *path, void *data, size_t bytes, int timeout_ms, char *error,
                         size_t size);

/* Rank 0's data[0..bytes) to every rank of `env`, within timeout_ms: through id_file when it is
 * given (not NULL or ""), else over TCP at env->host:env->port, rank 0 listening at that port on
 * every address of its machine. One rank: nothing to do. Several and neither way: an error
 * saying what to set. */
int rendezvous_share(const launch_env_t *env, const char *id_file, void *data, size_t bytes,
                     int timeout_ms, char *error, size_t size);

#endif /* RECAP_EXAMPLE_RENDEZVOUS_H */
