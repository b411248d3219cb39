/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rendezvous.c — rank 0's bytes to every other rank over TCP or a shared file (rendezvous.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static const unsigned char MAGIC[4] = {'r', 'c', 'd', 'v'};
enum {
  GREETING_BYTES = 8,
  HEADER_BYTES = 8,
  RETRY_MS = 100,
  CONNECT_MS = 2000,  /* one attempt to connect */
  GREETING_MS = 5000, /* a connection's greeting, at most */
  BACKLOG = 128
};

static int say(char *error, size_t size, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(error, size, format, args);
  va_end(args);
  return -1;
}

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int left_ms(int64_t deadline) {
  const int64_t left = deadline - now_ms();
  return left < 0 ? 0 : left > 1000000000 ? 1000000000 : (int)left;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

static int set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/* Waits until fd is ready for `events` or the deadline passes: 1 ready, 0 time out, -1 error. */
static int wait_for(int fd, short events, int64_t deadline) {
  for (;;) {
    struct pollfd p = {.fd = fd, .events = events};
    const int n = poll(&p, 1, left_ms(deadline));
    if (n > 0) return 1;
    if (n == 0) return 0;
    if (errno != EINTR) return -1;
  }
}

/* Reads or writes exactly n bytes of a nonblocking socket before the deadline. 0, or -1 with
 * errno (ETIMEDOUT at the deadline, ECONNRESET when the peer closed first). */
static int transfer(int fd, void *buffer, size_t n, bool writing, int64_t deadline) {
  unsigned char *p = buffer;
  while (n > 0) {
    const ssize_t done = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (done > 0) {
      p += done;
      n -= (size_t)done;
      continue;
    }
    if (done == 0) {
      errno = ECONNRESET;
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    const int ready = wait_for(fd, writing ? POLLOUT : POLLIN, deadline);
    if (ready <= 0) {
      if (ready == 0) errno = ETIMEDOUT;
      return -1;
    }
  }
  return 0;
}

static void put_u32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

static uint32_t get_u32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* ------------------------------------------------------------------------------------------
 * Rank 0
 * ---------------------------------------------------------------------------------------- */

static int listen_on(const struct addrinfo *a) {
  const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
  if (fd < 0) return -1;
  const int on = 1, off = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (a->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, BACKLOG) != 0 ||
      set_nonblocking(fd) != 0) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

static int bound_port(int fd) {
  struct sockaddr_storage s;
  socklen_t length = sizeof s;
  if (getsockname(fd, (struct sockaddr *)&s, &length) != 0) return -1;
  if (s.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&s)->sin6_port);
  return ntohs(((struct sockaddr_in *)&s)->sin_port);
}

int rendezvous_open(rendezvous_server_t *server, const char *host, int port, char *error,
                    size_t size) {
  server->fd = -1;
  server->port = -1;
  if (port < 0 || port > 65535) return say(error, size, "port %d is not a TCP port", port);
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  const struct addrinfo hints = {.ai_flags = AI_PASSIVE,
                                 .ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_STREAM};
  struct addrinfo *list = NULL;
  const int gai = getaddrinfo(host, service, &hints, &list);
  if (gai != 0)
    return say(error, size, "cannot listen at %s:%d: %s", host ? host : "*", port,
               gai_strerror(gai));
  /* IPv6 first: one socket that takes IPv4 too; IPv4 where the machine has no IPv6. */
  int failure = 0;
  for (int pass = 0; pass < 2 && server->fd < 0; pass++) {
    for (const struct addrinfo *a = list; a && server->fd < 0; a = a->ai_next) {
      if ((a->ai_family == AF_INET6) != (pass == 0)) continue;
      server->fd = listen_on(a);
      if (server->fd < 0) failure = errno;
    }
  }
  freeaddrinfo(list);
  if (server->fd < 0)
    return say(error, size, "cannot listen at %s:%d: %s", host ? host : "*", port,
               strerror(failure ? failure : EADDRNOTAVAIL));
  server->port = bound_port(server->fd);
  if (server->port < 0) {
    const int saved = errno;
    rendezvous_close(server);
    return say(error, size, "getsockname: %s", strerror(saved));
  }
  return 0;
}

void rendezvous_close(rendezvous_server_t *server) {
  if (server->fd >= 0) close(server->fd);
  server->fd = -1;
}

/* Answers one connection; its rank in *rank, or -1 when it was not a rank to answer. */
static void answer(int fd, int world, bool *answered, const void *data, size_t bytes,
                   int64_t deadline, int *rank) {
  *rank = -1;
  int64_t limit = now_ms() + GREETING_MS;
  if (limit > deadline) limit = deadline;
  unsigned char greeting[GREETING_BYTES];
  if (set_nonblocking(fd) != 0 || transfer(fd, greeting, sizeof greeting, false, limit) != 0 ||
      memcmp(greeting, MAGIC, sizeof MAGIC) != 0)
    return;
  const uint32_t r = get_u32(greeting + 4);
  if (r == 0 || r >= (uint32_t)world || answered[r]) return;
  unsigned char header[HEADER_BYTES];
  memcpy(header, MAGIC, sizeof MAGIC);
  put_u32(header + 4, (uint32_t)bytes);
  if (transfer(fd, header, sizeof header, true, deadline) == 0 &&
      transfer(fd, (void *)data, bytes, true, deadline) == 0)
    *rank = (int)r;
}

int rendezvous_serve(rendezvous_server_t *server, int world, const void *data, size_t bytes,
                     int timeout_ms, char *error, size_t size) {
  if (server->fd < 0) return say(error, size, "the rendezvous server is closed");
  if (world < 1 || bytes > UINT32_MAX)
    return say(error, size, "cannot serve %zu bytes to %d ranks", bytes, world);
  bool *answered = calloc((size_t)world, sizeof *answered);
  if (!answered) return say(error, size, "out of host memory");
  const int64_t deadline = now_ms() + timeout_ms;
  int left = world - 1, status = 0;
  while (left > 0) {
    const int ready = wait_for(server->fd, POLLIN, deadline);
    if (ready < 0) {
      status = say(error, size, "poll: %s", strerror(errno));
      break;
    }
    if (ready == 0) {
      int missing = 1;
      while (answered[missing]) missing++;
      status = say(error, size,
                   "%d of the %d other ranks fetched the id from port %d within %d ms; rank %d "
                   "did not (is it running? can it reach this host?)",
                   world - 1 - left, world - 1, server->port, timeout_ms, missing);
      break;
    }
    const int fd = accept(server->fd, NULL, NULL);
    if (fd < 0) continue; /* EINTR, EAGAIN, a connection reset before it was taken */
    int rank;
    answer(fd, world, answered, data, bytes, deadline, &rank);
    close(fd);
    if (rank > 0) {
      answered[rank] = true;
      left--;
    }
  }
  free(answered);
  return status;
}

/* ------------------------------------------------------------------------------------------
 * The other ranks
 * ---------------------------------------------------------------------------------------- */

/* A connected nonblocking socket to one of host's addresses, or -1 with errno. */
static int connect_to(const struct addrinfo *list, int64_t deadline) {
  int failure = ECONNREFUSED;
  for (const struct addrinfo *a = list; a; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0 || set_nonblocking(fd) != 0) {
      failure = errno;
      if (fd >= 0) close(fd);
      continue;
    }
    int result = connect(fd, a->ai_addr, a->ai_addrlen);
    if (result != 0 && (errno == EINPROGRESS || errno == EINTR)) {
      int64_t limit = now_ms() + CONNECT_MS;
      if (limit > deadline) limit = deadline;
      const int ready = wait_for(fd, POLLOUT, limit);
      int soerror = ready == 0 ? ETIMEDOUT : errno;
      socklen_t length = sizeof soerror;
      if (ready > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerror, &length) != 0)
        soerror = errno;
      result = soerror ? -1 : 0;
      errno = soerror;
    }
    if (result == 0) return fd;
    failure = errno;
    close(fd);
  }
  errno = failure;
  return -1;
}

int rendezvous_fetch(const char *host, int port, int rank, void *data, size_t bytes, int timeout_ms,
                     char *error, size_t size) {
  if (!host || !*host) return say(error, size, "no host to fetch the id from");
  if (port < 1 || port > 65535) return say(error, size, "port %d is not a TCP port", port);
  if (rank < 1) return say(error, size, "rank %d does not fetch: rank 0 serves", rank);
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  const struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  const int64_t deadline = now_ms() + timeout_ms;
  int fd = -1, failure = ECONNREFUSED;
  while (fd < 0) {
    struct addrinfo *list = NULL;
    const int gai = getaddrinfo(host, service, &hints, &list);
    if (gai == 0) {
      fd = connect_to(list, deadline);
      failure = errno;
      freeaddrinfo(list);
    } else if (gai != EAI_AGAIN) {
      return say(error, size, "cannot resolve %s: %s", host, gai_strerror(gai));
    }
    if (fd >= 0) break;
    if (left_ms(deadline) == 0)
      return say(error, size,
                 "nobody listened at %s:%d within %d ms (%s): is rank 0 running there?", host, port,
                 timeout_ms, gai == 0 ? strerror(failure) : gai_strerror(gai));
    sleep_ms(left_ms(deadline) < RETRY_MS ? left_ms(deadline) : RETRY_MS);
  }

  unsigned char greeting[GREETING_BYTES], header[HEADER_BYTES];
  memcpy(greeting, MAGIC, sizeof MAGIC);
  put_u32(greeting + 4, (uint32_t)rank);
  int status = 0;
  if (transfer(fd, greeting, sizeof greeting, true, deadline) != 0 ||
      transfer(fd, header, sizeof header, false, deadline) != 0) {
    status =
        say(error, size, "rank %d: no answer from %s:%d: %s", rank, host, port, strerror(errno));
  } else if (memcmp(header, MAGIC, sizeof MAGIC) != 0) {
    status =
        say(error, size, "%s:%d is not a rank 0 of this program (another service?)", host, port);
  } else if (get_u32(header + 4) != bytes) {
    status = say(error, size, "%s:%d sends %u bytes, %zu expected", host, port,
                 (unsigned)get_u32(header + 4), bytes);
  } else if (transfer(fd, data, bytes, false, deadline) != 0) {
    status = say(error, size, "rank %d: reading %zu bytes from %s:%d: %s", rank, bytes, host, port,
                 strerror(errno));
  }
  close(fd);
  return status;
}

/* ------------------------------------------------------------------------------------------
 * The shared file
 * ---------------------------------------------------------------------------------------- */

int rendezvous_file_write(const char *path, const void *data, size_t bytes, char *error,
                          size_t size) {
  char aside[4096];
  if ((size_t)snprintf(aside, sizeof aside, "%s.partial", path) >= sizeof aside)
    return say(error, size, "the path %s is too long", path);
  FILE *f = fopen(aside, "wb");
  if (!f) return say(error, size, "cannot write %s: %s", aside, strerror(errno));
  const bool ok = fwrite(data, 1, bytes, f) == bytes;
  if (fclose(f) != 0 || !ok || rename(aside, path) != 0) {
    const int saved = errno;
    remove(aside);
    return say(error, size, "cannot write %s: %s", path, strerror(saved));
  }
  return 0;
}

int rendezvous_file_read(const char *path, void *data, size_t bytes, int timeout_ms, char *error,
                         size_t size) {
  const int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    FILE *f = fopen(path, "rb");
    if (f) {
      const bool ok = fread(data, 1, bytes, f) == bytes;
      fclose(f);
      if (ok) return 0;
      return say(error, size, "%s holds fewer than %zu bytes", path, bytes);
    }
    if (left_ms(deadline) == 0)
      return say(error, size, "rank 0 wrote nothing to %s within %d ms: is rank 0 running?", path,
                 timeout_ms);
    sleep_ms(10);
  }
}

/* ------------------------------------------------------------------------------------------
 * Either way, as the launcher's environment says
 * ---------------------------------------------------------------------------------------- */

static int serve_over_tcp(const launch_env_t *env, const void *data, size_t bytes, int timeout_ms,
                          char *error, size_t size) {
  rendezvous_server_t server;
  if (rendezvous_open(&server, NULL, env->port, error, size)) {
    const size_t used = strlen(error);
    if (used < size)
      snprintf(error + used, size - used, " (RECAP_DP_PORT sets the rendezvous port)");
    return -1;
  }
  const int status = rendezvous_serve(&server, env->world, data, bytes, timeout_ms, error, size);
  rendezvous_close(&server);
  return status;
}

int rendezvous_share(const launch_env_t *env, const char *id_file, void *data, size_t bytes,
                     int timeout_ms, char *error, size_t size) {
  if (env->world == 1) return 0;
  if (id_file && *id_file) {
    if (env->rank == 0) return rendezvous_file_write(id_file, data, bytes, error, size);
    return rendezvous_file_read(id_file, data, bytes, timeout_ms, error, size);
  }
  if (!env->host[0])
    return say(error, size,
               "%d ranks (launcher: %s), not known to share this node, and no address of "
               "rank 0: set MASTER_ADDR to rank 0's host (and MASTER_PORT), or RECAP_DP_ID_FILE "
               "to a file every rank can read",
               env->world, env->launcher);
  if (env->rank == 0) return serve_over_tcp(env, data, bytes, timeout_ms, error, size);
  return rendezvous_fetch(env->host, env->port, env->rank, data, bytes, timeout_ms, error, size);
}
