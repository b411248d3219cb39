/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_launch_env.c — the rank from a launcher's environment (examples/common/launch_env.h):
 * each launcher's variables (launch.sh, torchrun, Open MPI, MPICH, Slurm), their order of
 * precedence, where rank 0 is reached (MASTER_ADDR, Slurm's node list, one node), its port, the
 * error of every partial or inconsistent environment word for word, and the Slurm node-list
 * parser. The environment is a table handed to launch_env_read, not the process's.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "launch_env.h"

/* An environment of "NAME=value" entries, NULL-terminated. */
typedef struct table {
  const char *const *entries;
} table_t;

static const char *lookup(void *ctx, const char *name) {
  const size_t n = strlen(name);
  for (const char *const *e = ((const table_t *)ctx)->entries; *e; e++)
    if (!strncmp(*e, name, n) && (*e)[n] == '=') return *e + n + 1;
  return NULL;
}

#define ENV(...) (&(table_t){(const char *const[]){__VA_ARGS__, NULL}})

static launch_env_t read_ok(table_t *t) {
  launch_env_t env;
  char error[512] = "";
  if (launch_env_read(&env, lookup, t, error, sizeof error)) fail_msg("unexpected: %s", error);
  return env;
}

/* launch_env_read fails with exactly `expected`, leaving *out as it was. */
static void expect_error(table_t *t, const char *expected) {
  launch_env_t env = {.rank = -7};
  char error[512] = "";
  assert_int_equal(launch_env_read(&env, lookup, t, error, sizeof error), -1);
  assert_string_equal(error, expected);
  assert_int_equal(env.rank, -7);
}

static void expect_ranks(const launch_env_t *e, const char *launcher, int rank, int world,
                         int local_rank, int local_world) {
  assert_string_equal(e->launcher, launcher);
  assert_int_equal(e->rank, rank);
  assert_int_equal(e->world, world);
  assert_int_equal(e->local_rank, local_rank);
  assert_int_equal(e->local_world, local_world);
}

/* ------------------------------------------------------------------------------------------
 * Each launcher
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(nothing_set_is_one_rank) {
  launch_env_t e = read_ok(ENV("PATH=/bin", "HOME=/root"));
  expect_ranks(&e, "none", 0, 1, -1, -1);
  assert_string_equal(e.host, "127.0.0.1");
  assert_int_equal(e.port, 29501);
}

RECAP_TEST(launch_sh) {
  launch_env_t e = read_ok(ENV("RECAP_DP_RANK=2", "RECAP_DP_WORLD=4"));
  expect_ranks(&e, "launch.sh", 2, 4, 2, 4);
  assert_string_equal(e.host, "127.0.0.1");
  assert_int_equal(e.port, 29501);
}

RECAP_TEST(torchrun) {
  launch_env_t e = read_ok(ENV("RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4",
                               "MASTER_ADDR=node07.cluster", "MASTER_PORT=29500"));
  expect_ranks(&e, "torchrun", 5, 8, 1, 4);
  assert_string_equal(e.host, "node07.cluster");
  assert_int_equal(e.port, 29501); /* MASTER_PORT is torchrun's own store's */
}

RECAP_TEST(open_mpi) {
  launch_env_t e = read_ok(ENV("OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4",
                               "OMPI_COMM_WORLD_LOCAL_RANK=3", "OMPI_COMM_WORLD_LOCAL_SIZE=4"));
  expect_ranks(&e, "Open MPI", 3, 4, 3, 4);
  assert_string_equal(e.host, "127.0.0.1"); /* every rank on this node */
  /* Two nodes of two ranks: no address without MASTER_ADDR. */
  e = read_ok(ENV("OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4",
                  "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2"));
  expect_ranks(&e, "Open MPI", 3, 4, 1, 2);
  assert_string_equal(e.host, "");
  e = read_ok(ENV("OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4",
                  "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                  "MASTER_ADDR=10.0.0.1", "MASTER_PORT=6000"));
  assert_string_equal(e.host, "10.0.0.1");
  assert_int_equal(e.port, 6001);
}

RECAP_TEST(mpich) {
  launch_env_t e =
      read_ok(ENV("PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2"));
  expect_ranks(&e, "MPICH", 1, 2, 1, 2);
  assert_string_equal(e.host, "127.0.0.1");
  /* Without the local variables nothing says the ranks share a node. */
  e = read_ok(ENV("PMI_RANK=1", "PMI_SIZE=2"));
  expect_ranks(&e, "MPICH", 1, 2, -1, -1);
  assert_string_equal(e.host, "");
}

RECAP_TEST(slurm) {
  launch_env_t e = read_ok(ENV("SLURM_PROCID=3", "SLURM_NTASKS=4", "SLURM_LOCALID=1",
                               "SLURM_STEP_NODELIST=gpu[07-08]", "SLURM_JOB_NODELIST=gpu[01-09]",
                               "SLURM_JOB_ID=123456"));
  expect_ranks(&e, "Slurm", 3, 4, 1, -1);
  assert_string_equal(e.host, "gpu07"); /* the step's first node, where srun starts task 0 */
  assert_int_equal(e.port, 30000 + 3456);
  /* The job's node list when the step's is absent. */
  e = read_ok(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_NODELIST=a100-[3-4],login"));
  assert_string_equal(e.host, "a100-3");
  assert_int_equal(e.port, 29501);
}

/* ------------------------------------------------------------------------------------------
 * Precedence
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(launchers_in_order_of_precedence) {
  launch_env_t e = read_ok(ENV("RECAP_DP_RANK=1", "RECAP_DP_WORLD=2", "RANK=2", "WORLD_SIZE=3",
                               "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "PMI_RANK=4",
                               "PMI_SIZE=5", "SLURM_PROCID=5", "SLURM_NTASKS=6"));
  expect_ranks(&e, "launch.sh", 1, 2, 1, 2);
  e = read_ok(ENV("RANK=2", "WORLD_SIZE=3", "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4",
                  "PMI_RANK=4", "PMI_SIZE=5", "SLURM_PROCID=5", "SLURM_NTASKS=6"));
  expect_ranks(&e, "torchrun", 2, 3, -1, -1);
  e = read_ok(ENV("OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "PMI_RANK=4", "PMI_SIZE=5",
                  "SLURM_PROCID=5", "SLURM_NTASKS=6"));
  expect_ranks(&e, "Open MPI", 3, 4, -1, -1);
  e = read_ok(ENV("PMI_RANK=4", "PMI_SIZE=5", "SLURM_PROCID=5", "SLURM_NTASKS=6"));
  expect_ranks(&e, "MPICH", 4, 5, -1, -1);
  /* A later launcher's bad values do not matter once an earlier one is chosen. */
  e = read_ok(ENV("RANK=0", "WORLD_SIZE=2", "SLURM_PROCID=x"));
  expect_ranks(&e, "torchrun", 0, 2, -1, -1);
  /* Empty values count as unset. */
  e = read_ok(ENV("RANK=", "WORLD_SIZE=", "SLURM_PROCID=1", "SLURM_NTASKS=2"));
  expect_ranks(&e, "Slurm", 1, 2, -1, -1);
}

RECAP_TEST(address_and_port_in_order_of_precedence) {
  /* MASTER_ADDR over Slurm's node list; RECAP_DP_PORT over MASTER_PORT and SLURM_JOB_ID. */
  launch_env_t e = read_ok(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_NODELIST=n[1-2]",
                               "SLURM_JOB_ID=7", "MASTER_ADDR=head", "MASTER_PORT=40000",
                               "RECAP_DP_PORT=41234"));
  assert_string_equal(e.host, "head");
  assert_int_equal(e.port, 41234);
  e = read_ok(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_NODELIST=n[1-2]",
                  "SLURM_JOB_ID=7", "MASTER_PORT=40000"));
  assert_string_equal(e.host, "n1");
  assert_int_equal(e.port, 40001);
  /* The node list is Slurm's: under another launcher it says nothing of rank 0. */
  e = read_ok(ENV("PMI_RANK=0", "PMI_SIZE=2", "SLURM_STEP_NODELIST=n[1-2]", "SLURM_JOB_ID=7"));
  assert_string_equal(e.host, "");
  assert_int_equal(e.port, 29501);
}

/* ------------------------------------------------------------------------------------------
 * Errors, word for word
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(partial_environments_named) {
  expect_error(ENV("RANK=3"), "RANK=\"3\" is set but WORLD_SIZE is not (torchrun sets both)");
  expect_error(ENV("WORLD_SIZE=4"), "WORLD_SIZE=\"4\" is set but RANK is not (torchrun sets both)");
  expect_error(ENV("RECAP_DP_WORLD=2"),
               "RECAP_DP_WORLD=\"2\" is set but RECAP_DP_RANK is not (launch.sh sets both)");
  expect_error(ENV("OMPI_COMM_WORLD_RANK=0"),
               "OMPI_COMM_WORLD_RANK=\"0\" is set but "
               "OMPI_COMM_WORLD_SIZE is not (Open MPI sets both)");
  expect_error(ENV("PMI_SIZE=2"), "PMI_SIZE=\"2\" is set but PMI_RANK is not (MPICH sets both)");
  expect_error(ENV("SLURM_PROCID=1"),
               "SLURM_PROCID=\"1\" is set but SLURM_NTASKS is not (Slurm sets both)");
}

RECAP_TEST(inconsistent_environments_named) {
  expect_error(ENV("RANK=4", "WORLD_SIZE=4"), "RANK=4 is not below WORLD_SIZE=4");
  expect_error(ENV("SLURM_PROCID=9", "SLURM_NTASKS=2"),
               "SLURM_PROCID=9 is not below SLURM_NTASKS=2");
  expect_error(ENV("RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2"),
               "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2");
  expect_error(ENV("PMI_RANK=1", "PMI_SIZE=4", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=5"),
               "MPI_LOCALNRANKS=\"5\" is not a number from 1 to 4");
  expect_error(ENV("RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=4"),
               "LOCAL_RANK=\"4\" is not a number from 0 to 3");
}

RECAP_TEST(values_that_are_not_numbers_named) {
  expect_error(ENV("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=two"),
               "OMPI_COMM_WORLD_SIZE=\"two\" is not a number from 1 to 1000000");
  expect_error(ENV("RANK=-1", "WORLD_SIZE=2"), "RANK=\"-1\" is not a number from 0 to 999999");
  expect_error(ENV("RANK=1x", "WORLD_SIZE=2"), "RANK=\"1x\" is not a number from 0 to 999999");
  expect_error(ENV("RECAP_DP_RANK=0", "RECAP_DP_WORLD=0"),
               "RECAP_DP_WORLD=\"0\" is not a number from 1 to 1000000");
  expect_error(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=one"),
               "SLURM_LOCALID=\"one\" is not a number from 0 to 1");
  expect_error(ENV("MASTER_PORT=65535"), "MASTER_PORT=\"65535\" is not a number from 1 to 65534");
  expect_error(ENV("RECAP_DP_PORT=0"), "RECAP_DP_PORT=\"0\" is not a number from 1 to 65535");
  expect_error(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=12a"),
               "SLURM_JOB_ID=\"12a\" is not a number from 0 to 2147483647");
}

RECAP_TEST(bad_addresses_named) {
  expect_error(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_NODELIST=gpu[07"),
               "SLURM_STEP_NODELIST=\"gpu[07\" is not a Slurm node list");
  expect_error(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_NODELIST=,gpu1"),
               "SLURM_JOB_NODELIST=\",gpu1\" is not a Slurm node list");
  char long_host[300 + sizeof "MASTER_ADDR="] = "MASTER_ADDR=";
  memset(long_host + strlen(long_host), 'h', 300);
  long_host[sizeof long_host - 1] = '\0';
  expect_error(ENV(long_host), "MASTER_ADDR is longer than 255 characters");
}

/* ------------------------------------------------------------------------------------------
 * Slurm's node lists
 * ---------------------------------------------------------------------------------------- */

static void expect_first_host(const char *nodelist, const char *expected) {
  char host[64] = "unchanged";
  const int status = launch_first_host(nodelist, host, sizeof host);
  if (!expected) {
    if (status != -1) fail_msg("\"%s\" gave \"%s\", expected a failure", nodelist, host);
    return;
  }
  if (status != 0) fail_msg("\"%s\" failed, expected \"%s\"", nodelist, expected);
  assert_string_equal(host, expected);
}

RECAP_TEST(first_host_of_a_node_list) {
  expect_first_host("node[01-04],gpu7", "node01");
  expect_first_host("gpu7,node[01-04]", "gpu7");
  expect_first_host("node[07,01-04]", "node07");
  expect_first_host("gpu[7]", "gpu7");
  expect_first_host("single", "single");
  expect_first_host("rack[2-3]-n[005-006]", "rack2-n005");
  expect_first_host("n[1-2]-ib,m3", "n1-ib");
  expect_first_host("a100-[3-4]", "a100-3");
}

RECAP_TEST(malformed_node_lists_refused) {
  expect_first_host("", NULL);
  expect_first_host(NULL, NULL);
  expect_first_host(",node1", NULL);
  expect_first_host("node[", NULL);
  expect_first_host("node[01-04", NULL);
  expect_first_host("node[]", NULL);
  expect_first_host("node[a-b]", NULL);
  expect_first_host("node[1x]", NULL);
  expect_first_host("node]1", NULL);
  expect_first_host("node[1[2]]", NULL);
  /* A host longer than the buffer. */
  char host[6];
  assert_int_equal(launch_first_host("node[01-04]", host, sizeof host), -1);
  assert_int_equal(launch_first_host("node[1-4]", host, sizeof host), 0);
  assert_string_equal(host, "node1");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(nothing_set_is_one_rank),
    cmocka_unit_test(launch_sh),
    cmocka_unit_test(torchrun),
    cmocka_unit_test(open_mpi),
    cmocka_unit_test(mpich),
    cmocka_unit_test(slurm),
    cmocka_unit_test(launchers_in_order_of_precedence),
    cmocka_unit_test(address_and_port_in_order_of_precedence),
    cmocka_unit_test(partial_environments_named),
    cmocka_unit_test(inconsistent_environments_named),
    cmocka_unit_test(values_that_are_not_numbers_named),
    cmocka_unit_test(bad_addresses_named),
    cmocka_unit_test(first_host_of_a_node_list),
    cmocka_unit_test(malformed_node_lists_refused),
};

RECAP_TEST_MAIN(tests)
