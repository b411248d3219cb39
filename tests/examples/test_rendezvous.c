/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rendezvous.c — rank 0's NCCL unique id handed to the other ranks
 * (examples/common/rendezvous.h), with ranks as forked processes on this machine: over TCP on
 * 127.0.0.1 (every rank gets the same 128 bytes, also ranks that come before rank 0 listens;
 * strangers, duplicates and a wrong size are refused), through a shared file, and under each
 * launcher's environment as dp_mlp reads it; the errors after a time limit when nobody listens
 * or a rank never comes.
 *
 * No fixed port: a server takes a free one (port 0), and where the ranks must know the port
 * before rank 0 listens, the test reserves one by binding a socket to it without listening
 * (others cannot take it; connections to it are refused) with SO_REUSEADDR, which lets rank 0's
 * server bind it too and listen (Linux). Every wait has a time limit, and every child an alarm.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "launch_env.h"
#include "rendezvous.h"

enum {
  ID_BYTES = 128,      /* sizeof(ncclUniqueId) */
  LIMIT_MS = 60000,    /* generous: a loaded machine is slow, never wrong */
  CHILD_ALARM_S = 120, /* a child still alive then is killed */
  MAX_RANKS = 8,
  REPORT_BYTES = 1 + ID_BYTES + 400 /* status, the id, the error */
};

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void fill_random(unsigned char *data, size_t n) {
  FILE *f = fopen("/dev/urandom", "rb");
  assert_non_null(f);
  assert_int_equal(fread(data, 1, n, f), n);
  fclose(f);
}

/* A port on 127.0.0.1 bound and not listening, SO_REUSEADDR: *fd keeps it. */
static int reserve_port(int *fd) {
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(*fd >= 0);
  const int on = 1;
  assert_int_equal(setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on), 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(*fd, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t length = sizeof a;
  assert_int_equal(getsockname(*fd, (struct sockaddr *)&a, &length), 0);
  return ntohs(a.sin_port);
}

/* ------------------------------------------------------------------------------------------
 * Ranks as children: each reports its status, the bytes it got and its error through a pipe
 * ---------------------------------------------------------------------------------------- */

typedef struct child {
  pid_t pid;
  int pipe; /* read end */
} child_t;

typedef int (*rank_fn)(void *ctx, int rank, unsigned char *id, char *error, size_t size);

static child_t start_rank(rank_fn fn, void *ctx, int rank) {
  int ends[2];
  assert_int_equal(pipe(ends), 0);
  fflush(NULL);
  const pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(ends[0]);
    alarm(CHILD_ALARM_S);
    unsigned char report[REPORT_BYTES] = {0};
    report[0] = (unsigned char)(fn(ctx, rank, report + 1, (char *)report + 1 + ID_BYTES,
                                   REPORT_BYTES - 1 - ID_BYTES) == 0
                                    ? 0
                                    : 1);
    size_t done = 0;
    while (done < sizeof report) {
      const ssize_t n = write(ends[1], report + done, sizeof report - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(3);
      done += (size_t)n;
    }
    _exit(0);
  }
  close(ends[1]);
  return (child_t){pid, ends[0]};
}

/* The child's report: 0 (the id in id) or -1 (its error in error). The test fails when the child
 * reports nothing within the time limit. */
static int finish_rank(child_t c, unsigned char *id, char *error, size_t size) {
  unsigned char report[REPORT_BYTES];
  size_t done = 0;
  const double deadline = now_ms() + CHILD_ALARM_S * 1000.0 + 10000.0;
  while (done < sizeof report) {
    struct pollfd p = {.fd = c.pipe, .events = POLLIN};
    const int left = (int)(deadline - now_ms());
    const int ready = left > 0 ? poll(&p, 1, left) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      kill(c.pid, SIGKILL);
      break;
    }
    const ssize_t n = read(c.pipe, report + done, sizeof report - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += (size_t)n;
  }
  close(c.pipe);
  int wstatus = 0;
  while (waitpid(c.pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (done < sizeof report) fail_msg("a rank reported nothing (wait status %d)", wstatus);
  memcpy(id, report + 1, ID_BYTES);
  snprintf(error, size, "%s", (const char *)report + 1 + ID_BYTES);
  return report[0] ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------
 * TCP
 * ---------------------------------------------------------------------------------------- */

typedef struct tcp_ctx {
  int port;
} tcp_ctx_t;

static int fetch_rank(void *ctx, int rank, unsigned char *id, char *error, size_t size) {
  return rendezvous_fetch("127.0.0.1", ((tcp_ctx_t *)ctx)->port, rank, id, ID_BYTES, LIMIT_MS,
                          error, size);
}

/* Ranks 1..world-1 fetch from server, rank 0 serves a random id made after they started; each
 * must get it. With reserved_fd >= 0 (a reserved port, the server not open yet) rank 0 opens the
 * server at that port only after the ranks have been knocking for a while. */
static void serve_and_check(rendezvous_server_t *server, int world, int reserved_fd) {
  tcp_ctx_t ctx = {server->port};
  child_t children[MAX_RANKS];
  for (int r = 1; r < world; r++) children[r] = start_rank(fetch_rank, &ctx, r);
  unsigned char id[ID_BYTES];
  fill_random(id, sizeof id);
  char error[512] = "";
  if (reserved_fd >= 0) {
    /* The ranks are knocking at a port nobody listens on; let them retry a while. */
    const struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
    if (rendezvous_open(server, NULL, ctx.port, error, sizeof error))
      fail_msg("rank 0 cannot listen at the reserved port %d: %s", ctx.port, error);
    close(reserved_fd);
  }
  const int served = rendezvous_serve(server, world, id, sizeof id, LIMIT_MS, error, sizeof error);
  rendezvous_close(server);
  for (int r = 1; r < world; r++) {
    unsigned char got[ID_BYTES];
    char why[512];
    if (finish_rank(children[r], got, why, sizeof why))
      fail_msg("rank %d: %s (rank 0: %s)", r, why, served ? error : "ok");
    if (memcmp(got, id, sizeof id) != 0) fail_msg("rank %d got other bytes than rank 0's", r);
  }
  if (served) fail_msg("rank 0: %s", error);
}

RECAP_TEST(tcp_every_rank_gets_the_same_bytes) {
  rendezvous_server_t server;
  char error[512] = "";
  if (rendezvous_open(&server, "127.0.0.1", 0, error, sizeof error)) fail_msg("%s", error);
  assert_true(server.port > 0);
  serve_and_check(&server, 6, -1);
  assert_int_equal(server.fd, -1);
}

RECAP_TEST(tcp_ranks_that_come_before_rank_0_listens) {
  int reserved;
  rendezvous_server_t server = {.fd = -1, .port = reserve_port(&reserved)};
  serve_and_check(&server, 4, reserved);
}

RECAP_TEST(tcp_one_rank_needs_nobody) {
  rendezvous_server_t server;
  char error[512] = "";
  if (rendezvous_open(&server, "127.0.0.1", 0, error, sizeof error)) fail_msg("%s", error);
  const unsigned char id[ID_BYTES] = {1};
  const double start = now_ms();
  assert_int_equal(rendezvous_serve(&server, 1, id, sizeof id, LIMIT_MS, error, sizeof error), 0);
  assert_true(now_ms() - start < 1000.0);
  rendezvous_close(&server);
  rendezvous_close(&server); /* closed already: nothing */
}

RECAP_TEST(fetch_times_out_when_nobody_listens) {
  int reserved;
  const int port = reserve_port(&reserved);
  unsigned char id[ID_BYTES];
  char error[512] = "", expected[512];
  const double start = now_ms();
  assert_int_equal(rendezvous_fetch("127.0.0.1", port, 1, id, sizeof id, 300, error, sizeof error),
                   -1);
  const double took = now_ms() - start;
  close(reserved);
  snprintf(expected, sizeof expected,
           "nobody listened at 127.0.0.1:%d within 300 ms (Connection refused): is rank 0 "
           "running there?",
           port);
  assert_string_equal(error, expected);
  if (took < 290.0 || took > 30000.0) fail_msg("gave up after %.0f ms, not 300", took);
}

RECAP_TEST(serve_times_out_when_a_rank_never_comes) {
  rendezvous_server_t server;
  char error[512] = "", expected[512];
  if (rendezvous_open(&server, "127.0.0.1", 0, error, sizeof error)) fail_msg("%s", error);
  tcp_ctx_t ctx = {server.port};
  child_t one = start_rank(fetch_rank, &ctx, 1); /* rank 2 of 3 never comes */
  unsigned char id[ID_BYTES];
  fill_random(id, sizeof id);
  assert_int_equal(rendezvous_serve(&server, 3, id, sizeof id, 1500, error, sizeof error), -1);
  rendezvous_close(&server);
  unsigned char got[ID_BYTES];
  char why[512];
  const int fetched = finish_rank(one, got, why, sizeof why);
  /* Rank 1 comes before the deadline, or on a very loaded machine after it (and then finds
   * nobody listening). */
  snprintf(expected, sizeof expected,
           "1 of the 2 other ranks fetched the id from port %d within 1500 ms; rank 2 did not (is "
           "it running? can it reach this host?)",
           ctx.port);
  if (strcmp(error, expected) == 0) {
    if (fetched) fail_msg("rank 1: %s", why);
    assert_memory_equal(got, id, sizeof id);
  } else {
    snprintf(expected, sizeof expected,
             "0 of the 2 other ranks fetched the id from port %d within 1500 ms; rank 1 did not "
             "(is it running? can it reach this host?)",
             ctx.port);
    assert_string_equal(error, expected);
  }
}

/* Connects, sends `greeting` and says whether the server closed without answering. */
static bool refused_greeting(int port, const unsigned char *greeting, size_t n) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  const struct timeval limit = {LIMIT_MS / 1000, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  bool refused = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                 write(fd, greeting, n) == (ssize_t)n;
  unsigned char byte;
  refused = refused && read(fd, &byte, 1) == 0; /* EOF, no answer */
  if (fd >= 0) close(fd);
  return refused;
}

typedef struct stranger_ctx {
  int port;
} stranger_ctx_t;

/* Three strangers the server must not count, then rank 1 for real. */
static int strangers_then_rank_1(void *ctx, int rank, unsigned char *id, char *error, size_t size) {
  const int port = ((stranger_ctx_t *)ctx)->port;
  static const unsigned char not_ours[8] = "GET / HT";
  static const unsigned char rank_out_of_range[8] = {'r', 'c', 'd', 'v', 0, 0, 0, 5};
  static const unsigned char rank_zero[8] = {'r', 'c', 'd', 'v', 0, 0, 0, 0};
  if (!refused_greeting(port, not_ours, sizeof not_ours) ||
      !refused_greeting(port, rank_out_of_range, sizeof rank_out_of_range) ||
      !refused_greeting(port, rank_zero, sizeof rank_zero)) {
    snprintf(error, size, "the server answered a stranger");
    return -1;
  }
  if (rendezvous_fetch("127.0.0.1", port, rank, id, ID_BYTES, LIMIT_MS, error, size)) return -1;
  /* Rank 1 again: answered already, so refused (the server still waits for rank 2). */
  static const unsigned char rank_one[8] = {'r', 'c', 'd', 'v', 0, 0, 0, 1};
  if (!refused_greeting(port, rank_one, sizeof rank_one)) {
    snprintf(error, size, "the server answered rank 1 twice");
    return -1;
  }
  unsigned char again[ID_BYTES];
  return rendezvous_fetch("127.0.0.1", port, 2, again, ID_BYTES, LIMIT_MS, error, size);
}

RECAP_TEST(tcp_strangers_and_duplicates_not_counted) {
  rendezvous_server_t server;
  char error[512] = "";
  if (rendezvous_open(&server, "127.0.0.1", 0, error, sizeof error)) fail_msg("%s", error);
  stranger_ctx_t ctx = {server.port};
  child_t c = start_rank(strangers_then_rank_1, &ctx, 1);
  unsigned char id[ID_BYTES];
  fill_random(id, sizeof id);
  const int served = rendezvous_serve(&server, 3, id, sizeof id, LIMIT_MS, error, sizeof error);
  rendezvous_close(&server);
  unsigned char got[ID_BYTES];
  char why[512];
  if (finish_rank(c, got, why, sizeof why)) fail_msg("%s", why);
  if (served) fail_msg("rank 0: %s", error);
  assert_memory_equal(got, id, sizeof id);
}

static int fetch_the_wrong_size(void *ctx, int rank, unsigned char *id, char *error, size_t size) {
  return rendezvous_fetch("127.0.0.1", ((tcp_ctx_t *)ctx)->port, rank, id, ID_BYTES / 2, LIMIT_MS,
                          error, size);
}

RECAP_TEST(tcp_wrong_size_refused) {
  rendezvous_server_t server;
  char error[512] = "", expected[512];
  if (rendezvous_open(&server, "127.0.0.1", 0, error, sizeof error)) fail_msg("%s", error);
  tcp_ctx_t ctx = {server.port};
  child_t c = start_rank(fetch_the_wrong_size, &ctx, 1);
  const unsigned char id[ID_BYTES] = {7};
  assert_int_equal(rendezvous_serve(&server, 2, id, sizeof id, LIMIT_MS, error, sizeof error), 0);
  rendezvous_close(&server);
  unsigned char got[ID_BYTES];
  assert_int_equal(finish_rank(c, got, error, sizeof error), -1);
  snprintf(expected, sizeof expected, "127.0.0.1:%d sends 128 bytes, 64 expected", ctx.port);
  assert_string_equal(error, expected);
}

RECAP_TEST(tcp_bad_arguments_refused) {
  unsigned char id[ID_BYTES];
  char error[512] = "";
  rendezvous_server_t server;
  assert_int_equal(rendezvous_open(&server, NULL, 70000, error, sizeof error), -1);
  assert_string_equal(error, "port 70000 is not a TCP port");
  assert_int_equal(rendezvous_fetch("127.0.0.1", 0, 1, id, sizeof id, 100, error, sizeof error),
                   -1);
  assert_string_equal(error, "port 0 is not a TCP port");
  assert_int_equal(rendezvous_fetch("", 5000, 1, id, sizeof id, 100, error, sizeof error), -1);
  assert_string_equal(error, "no host to fetch the id from");
  assert_int_equal(rendezvous_fetch("127.0.0.1", 5000, 0, id, sizeof id, 100, error, sizeof error),
                   -1);
  assert_string_equal(error, "rank 0 does not fetch: rank 0 serves");
  /* Without DNS the resolver may answer "try again" until the limit: either way, named. */
  assert_int_equal(rendezvous_fetch("no-such-host.invalid", 5000, 1, id, sizeof id, 100, error,
                                    sizeof error),
                   -1);
  EXPECT_CONTAINS(error, "no-such-host.invalid");
}

/* ------------------------------------------------------------------------------------------
 * The shared file
 * ---------------------------------------------------------------------------------------- */

static char work_dir[256];

static void make_work_dir(void) {
  snprintf(work_dir, sizeof work_dir, "%s/recap-rdv.XXXXXX",
           getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  assert_non_null(mkdtemp(work_dir));
}

static void remove_work_dir(const char *file) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", work_dir, file);
  remove(path);
  rmdir(work_dir);
}

typedef struct file_ctx {
  char path[512];
} file_ctx_t;

static int read_file_rank(void *ctx, int rank, unsigned char *id, char *error, size_t size) {
  (void)rank;
  return rendezvous_file_read(((file_ctx_t *)ctx)->path, id, ID_BYTES, LIMIT_MS, error, size);
}

RECAP_TEST(file_every_rank_gets_the_same_bytes) {
  make_work_dir();
  file_ctx_t ctx;
  snprintf(ctx.path, sizeof ctx.path, "%s/nccl-id", work_dir);
  child_t children[3];
  for (int r = 0; r < 3; r++) children[r] = start_rank(read_file_rank, &ctx, r + 1);
  const struct timespec pause = {0, 100 * 1000 * 1000};
  nanosleep(&pause, NULL); /* the readers wait for the file */
  unsigned char id[ID_BYTES];
  fill_random(id, sizeof id);
  char error[512] = "";
  const int wrote = rendezvous_file_write(ctx.path, id, sizeof id, error, sizeof error);
  for (int r = 0; r < 3; r++) {
    unsigned char got[ID_BYTES];
    char why[512];
    if (finish_rank(children[r], got, why, sizeof why)) fail_msg("rank %d: %s", r + 1, why);
    assert_memory_equal(got, id, sizeof id);
  }
  remove_work_dir("nccl-id");
  if (wrote) fail_msg("%s", error);
}

RECAP_TEST(file_times_out_when_rank_0_never_writes) {
  make_work_dir();
  char path[512], error[512] = "", expected[700];
  snprintf(path, sizeof path, "%s/nccl-id", work_dir);
  unsigned char id[ID_BYTES];
  assert_int_equal(rendezvous_file_read(path, id, sizeof id, 200, error, sizeof error), -1);
  snprintf(expected, sizeof expected,
           "rank 0 wrote nothing to %s within 200 ms: is rank 0 running?", path);
  assert_string_equal(error, expected);
  /* A file too short. */
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs("short", f);
  fclose(f);
  assert_int_equal(rendezvous_file_read(path, id, sizeof id, 200, error, sizeof error), -1);
  snprintf(expected, sizeof expected, "%s holds fewer than 128 bytes", path);
  assert_string_equal(error, expected);
  remove_work_dir("nccl-id");
}

/* ------------------------------------------------------------------------------------------
 * Under each launcher's environment, as dp_mlp reads it
 * ---------------------------------------------------------------------------------------- */

/* Every variable of every launcher: a child unsets them all, then sets its launcher's. */
static const char *const launcher_variables[] = {"RECAP_DP_RANK",
                                                 "RECAP_DP_WORLD",
                                                 "RECAP_DP_PORT",
                                                 "RECAP_DP_ID_FILE",
                                                 "RANK",
                                                 "WORLD_SIZE",
                                                 "LOCAL_RANK",
                                                 "LOCAL_WORLD_SIZE",
                                                 "MASTER_ADDR",
                                                 "MASTER_PORT",
                                                 "OMPI_COMM_WORLD_RANK",
                                                 "OMPI_COMM_WORLD_SIZE",
                                                 "OMPI_COMM_WORLD_LOCAL_RANK",
                                                 "OMPI_COMM_WORLD_LOCAL_SIZE",
                                                 "PMI_RANK",
                                                 "PMI_SIZE",
                                                 "MPI_LOCALRANKID",
                                                 "MPI_LOCALNRANKS",
                                                 "SLURM_PROCID",
                                                 "SLURM_NTASKS",
                                                 "SLURM_LOCALID",
                                                 "SLURM_STEP_NODELIST",
                                                 "SLURM_JOB_NODELIST",
                                                 "SLURM_JOB_ID"};

typedef struct launcher_ctx {
  const char *name;            /* launch_env_t.launcher expected */
  const char *rank;            /* the launcher's rank variable */
  const char *world;           /* and its size */
  const char *local;           /* and local rank, NULL when none */
  const char *more[4];         /* "NAME=value" set by every rank; "%d" is the port */
  bool port_above_master_port; /* MASTER_PORT is the port - 1, as torchrun's store's */
  int port;
  int world_size;
} launcher_ctx_t;

static void set_number(const char *name, int value) {
  char text[16];
  snprintf(text, sizeof text, "%d", value);
  setenv(name, text, 1);
}

/* One rank under the launcher: its environment, then launch_env_read and rendezvous_share as
 * dp_mlp calls them; rank 0 makes a random id. */
static int launched_rank(void *ctx, int rank, unsigned char *id, char *error, size_t size) {
  const launcher_ctx_t *l = ctx;
  for (size_t i = 0; i < sizeof launcher_variables / sizeof *launcher_variables; i++)
    unsetenv(launcher_variables[i]);
  set_number(l->rank, rank);
  set_number(l->world, l->world_size);
  if (l->local) set_number(l->local, rank);
  for (int i = 0; i < 4 && l->more[i]; i++) {
    char entry[256];
    snprintf(entry, sizeof entry, l->more[i], l->port);
    char *equals = strchr(entry, '=');
    *equals = '\0';
    setenv(entry, equals + 1, 1);
  }
  if (l->port_above_master_port) set_number("MASTER_PORT", l->port - 1);
  launch_env_t env;
  if (launch_env_read(&env, NULL, NULL, error, size)) return -1;
  if (strcmp(env.launcher, l->name) != 0 || env.rank != rank || env.world != l->world_size ||
      env.local_rank != rank) {
    snprintf(error, size, "read as %s rank %d of %d, local %d", env.launcher, env.rank, env.world,
             env.local_rank);
    return -1;
  }
  if (rank == 0) fill_random(id, ID_BYTES);
  return rendezvous_share(&env, getenv("RECAP_DP_ID_FILE"), id, ID_BYTES, LIMIT_MS, error, size);
}

static void run_launcher(launcher_ctx_t *l) {
  int reserved;
  l->port = reserve_port(&reserved);
  child_t children[MAX_RANKS];
  for (int r = 0; r < l->world_size; r++) children[r] = start_rank(launched_rank, l, r);
  unsigned char ids[MAX_RANKS][ID_BYTES];
  char errors[MAX_RANKS][512];
  int failed = -1;
  for (int r = 0; r < l->world_size; r++)
    if (finish_rank(children[r], ids[r], errors[r], sizeof errors[r]) && failed < 0) failed = r;
  close(reserved);
  if (failed >= 0) fail_msg("%s: rank %d: %s", l->name, failed, errors[failed]);
  static const unsigned char zero[ID_BYTES];
  assert_memory_not_equal(ids[0], zero, ID_BYTES);
  for (int r = 1; r < l->world_size; r++)
    if (memcmp(ids[r], ids[0], ID_BYTES) != 0)
      fail_msg("%s: rank %d got other bytes than rank 0's", l->name, r);
}

RECAP_TEST(under_torchrun) {
  /* torchrun's MASTER_PORT is its own store's; rank 0 listens one above it. */
  launcher_ctx_t l = {.name = "torchrun",
                      .rank = "RANK",
                      .world = "WORLD_SIZE",
                      .local = "LOCAL_RANK",
                      .more = {"LOCAL_WORLD_SIZE=4", "MASTER_ADDR=127.0.0.1"},
                      .port_above_master_port = true,
                      .world_size = 4};
  run_launcher(&l);
}

RECAP_TEST(under_open_mpi) {
  /* One node: rank 0 at 127.0.0.1. */
  launcher_ctx_t l = {.name = "Open MPI",
                      .rank = "OMPI_COMM_WORLD_RANK",
                      .world = "OMPI_COMM_WORLD_SIZE",
                      .local = "OMPI_COMM_WORLD_LOCAL_RANK",
                      .more = {"OMPI_COMM_WORLD_LOCAL_SIZE=3", "RECAP_DP_PORT=%d"},
                      .world_size = 3};
  run_launcher(&l);
}

RECAP_TEST(under_mpich) {
  launcher_ctx_t l = {.name = "MPICH",
                      .rank = "PMI_RANK",
                      .world = "PMI_SIZE",
                      .local = "MPI_LOCALRANKID",
                      .more = {"MPI_LOCALNRANKS=4", "MASTER_ADDR=127.0.0.1", "RECAP_DP_PORT=%d"},
                      .world_size = 4};
  run_launcher(&l);
}

RECAP_TEST(under_slurm) {
  /* srun starts task 0 on the step's first node: here "localhost", found in the node list. */
  launcher_ctx_t l = {.name = "Slurm",
                      .rank = "SLURM_PROCID",
                      .world = "SLURM_NTASKS",
                      .local = "SLURM_LOCALID",
                      .more = {"SLURM_STEP_NODELIST=localhost,other[1-3]", "SLURM_JOB_ID=4242",
                               "RECAP_DP_PORT=%d"},
                      .world_size = 4};
  run_launcher(&l);
}

RECAP_TEST(under_launch_sh_through_a_file) {
  make_work_dir();
  char entry[600];
  snprintf(entry, sizeof entry, "RECAP_DP_ID_FILE=%s/nccl-id", work_dir);
  launcher_ctx_t l = {.name = "launch.sh",
                      .rank = "RECAP_DP_RANK",
                      .world = "RECAP_DP_WORLD",
                      .more = {entry},
                      .world_size = 3};
  run_launcher(&l);
  remove_work_dir("nccl-id");
}

RECAP_TEST(several_nodes_without_an_address_refused) {
  launch_env_t env = {.rank = 1,
                      .world = 4,
                      .local_rank = 1,
                      .local_world = 2,
                      .launcher = "Open MPI",
                      .host = "",
                      .port = 29501};
  unsigned char id[ID_BYTES];
  char error[512] = "";
  assert_int_equal(rendezvous_share(&env, NULL, id, sizeof id, 100, error, sizeof error), -1);
  assert_string_equal(error,
                      "4 ranks (launcher: Open MPI), not known to share this node, and no address "
                      "of rank 0: set MASTER_ADDR to rank 0's host (and MASTER_PORT), or "
                      "RECAP_DP_ID_FILE to a file every rank can read");
  /* One rank needs nobody. */
  env.world = 1;
  env.rank = 0;
  assert_int_equal(rendezvous_share(&env, NULL, id, sizeof id, 100, error, sizeof error), 0);
}

RECAP_TEST(rank_0_port_in_use_named) {
  rendezvous_server_t busy;
  char error[512] = "", expected[600];
  if (rendezvous_open(&busy, NULL, 0, error, sizeof error)) fail_msg("%s", error);
  launch_env_t env = {.rank = 0,
                      .world = 2,
                      .local_rank = 0,
                      .local_world = 2,
                      .launcher = "torchrun",
                      .host = "127.0.0.1",
                      .port = busy.port};
  unsigned char id[ID_BYTES] = {0};
  assert_int_equal(rendezvous_share(&env, NULL, id, sizeof id, 100, error, sizeof error), -1);
  snprintf(expected, sizeof expected,
           "cannot listen at *:%d: Address already in use (RECAP_DP_PORT sets the rendezvous "
           "port)",
           busy.port);
  rendezvous_close(&busy);
  assert_string_equal(error, expected);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(tcp_every_rank_gets_the_same_bytes),
    cmocka_unit_test(tcp_ranks_that_come_before_rank_0_listens),
    cmocka_unit_test(tcp_one_rank_needs_nobody),
    cmocka_unit_test(fetch_times_out_when_nobody_listens),
    cmocka_unit_test(serve_times_out_when_a_rank_never_comes),
    cmocka_unit_test(tcp_strangers_and_duplicates_not_counted),
    cmocka_unit_test(tcp_wrong_size_refused),
    cmocka_unit_test(tcp_bad_arguments_refused),
    cmocka_unit_test(file_every_rank_gets_the_same_bytes),
    cmocka_unit_test(file_times_out_when_rank_0_never_writes),
    cmocka_unit_test(under_torchrun),
    cmocka_unit_test(under_open_mpi),
    cmocka_unit_test(under_mpich),
    cmocka_unit_test(under_slurm),
    cmocka_unit_test(under_launch_sh_through_a_file),
    cmocka_unit_test(several_nodes_without_an_address_refused),
    cmocka_unit_test(rank_0_port_in_use_named),
};

RECAP_TEST_MAIN(tests)
