/* A stand-in NCCL application for the eBPF tests: dlopens an NCCL library (the real
 * /usr/local/cuda/lib/libnccl.so.2, a copy of it, or tests' fake one), prints "ready" and waits
 * until the file named by --go exists, makes a known set of calls, prints "done" and waits until
 * the file named by --exit exists (if given).
 *
 * usage: nccl_calls LIBRARY SCENARIO ROUNDS GO_FILE [EXIT_FILE]
 * Scenarios (per round; comm NULL makes the real NCCL fail fast with ncclInvalidArgument):
 *   collectives: AllReduce(1000 x float32), Broadcast(10 x int64), Bcast(3 x float16),
 *                Reduce(7 x double), AllGather(5 x uint8), ReduceScatter(8 x bfloat16),
 *                AlltoAll(2 x int32), Gather(4 x uint64), Scatter(6 x fp8e4m3),
 *                GroupStart, Send(16 x int8), Recv(32 x uint32), GroupEnd,
 *                CommInitRank(nranks 4, rank 3), CommDestroy(NULL), CommAbort(NULL)
 *   lifecycle:   (fake NCCL only) CommInitRank(8, 5), CommInitAll(2), CommSplit + CommCount +
 *                CommUserRank, CommDestroy(first), CommAbort(split)
 *   communicators: (fake NCCL only) the same without the destroy and the abort
 *   escape:      (fake NCCL only) AllReduce left by longjmp from inside (its return probe never
 *                fires), then AllReduce returning normally: both are API calls
 *   none:        no calls (just map the library)
 */
#include <dlfcn.h>
#include <nccl.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void* lib;

static void* sym(const char* name) {
  void* f = dlsym(lib, name);
  if (!f) {
    fprintf(stderr, "missing %s\n", name);
    _exit(3);
  }
  return f;
}

#define CALL(name, ...) ((__typeof__(&name))sym(#name))(__VA_ARGS__)

static void wait_for(const char* path) {
  while (access(path, F_OK) != 0) usleep(5000);
}

static void collectives(void) {
  char a[8], b[8];
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  ncclComm_t comm = NULL;
  CALL(ncclAllReduce, a, b, 1000, ncclFloat32, ncclSum, NULL, NULL);
  CALL(ncclBroadcast, a, b, 10, ncclInt64, 0, NULL, NULL);
  CALL(ncclBcast, a, 3, ncclFloat16, 0, NULL, NULL);
  CALL(ncclReduce, a, b, 7, ncclFloat64, ncclSum, 0, NULL, NULL);
  CALL(ncclAllGather, a, b, 5, ncclUint8, NULL, NULL);
  CALL(ncclReduceScatter, a, b, 8, ncclBfloat16, ncclSum, NULL, NULL);
  CALL(ncclAlltoAll, a, b, 2, ncclInt32, NULL, NULL);
  CALL(ncclGather, a, b, 4, ncclUint64, 0, NULL, NULL);
  CALL(ncclScatter, a, b, 6, ncclFloat8e4m3, 0, NULL, NULL);
  CALL(ncclGroupStart);
  CALL(ncclSend, a, 16, ncclInt8, 1, NULL, NULL);
  CALL(ncclRecv, b, 32, ncclUint32, 1, NULL, NULL);
  CALL(ncclGroupEnd);
  CALL(ncclCommInitRank, &comm, 4, id, 3);
  CALL(ncclCommDestroy, NULL);
  CALL(ncclCommAbort, NULL);
}

static void communicators(void) {
  ncclUniqueId id;
  memset(&id, 7, sizeof(id));
  ncclComm_t comm = NULL, all[2] = {NULL, NULL}, split = NULL;
  int count = 0, rank = 0;
  CALL(ncclCommInitRank, &comm, 8, id, 5);
  CALL(ncclCommInitAll, all, 2, NULL);
  CALL(ncclCommSplit, comm, 1, 0, &split, NULL);
  CALL(ncclCommCount, split, &count);
  CALL(ncclCommUserRank, split, &rank);
}

static void lifecycle(void) {
  ncclUniqueId id;
  memset(&id, 7, sizeof(id));
  ncclComm_t comm = NULL, all[2] = {NULL, NULL}, split = NULL;
  int count = 0, rank = 0;
  CALL(ncclCommInitRank, &comm, 8, id, 5);
  CALL(ncclCommInitAll, all, 2, NULL);
  CALL(ncclCommSplit, comm, 1, 0, &split, NULL);
  CALL(ncclCommCount, split, &count);
  CALL(ncclCommUserRank, split, &rank);
  CALL(ncclCommDestroy, comm);
  CALL(ncclCommAbort, split);
}

static jmp_buf escape_to;

static void leave_the_call(void) { longjmp(escape_to, 1); }

/* Deeper on the stack than escape()'s own call: the call after it enters above the lost one. */
static __attribute__((noinline)) void call_and_escape(ncclComm_t comm) {
  char a[8], b[8];
  void (*hook)(void) = leave_the_call;
  cudaStream_t stream;  // the fake NCCL calls it back (its escape hook)
  memcpy(&stream, &hook, sizeof(hook));
  CALL(ncclAllReduce, a, b, 1, ncclFloat32, ncclSum, comm, stream);
  fprintf(stderr, "the fake NCCL returned instead of calling the hook\n");
  _exit(4);
}

static void escape(void) {
  char a[8], b[8];
  ncclComm_t comm = NULL;
  ncclUniqueId id;
  memset(&id, 1, sizeof(id));
  CALL(ncclCommInitRank, &comm, 2, id, 0);
  if (setjmp(escape_to) == 0) call_and_escape(comm);
  CALL(ncclAllReduce, a, b, 1, ncclFloat32, ncclSum, comm, NULL);
  CALL(ncclCommDestroy, comm);
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s LIBRARY SCENARIO ROUNDS GO_FILE [EXIT_FILE]\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IONBF, 0);
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 3;
  }
  const int rounds = (int)strtol(argv[3], NULL, 10);
  printf("ready %d\n", (int)getpid());
  wait_for(argv[4]);
  for (int i = 0; i < rounds; i++) {
    if (strcmp(argv[2], "collectives") == 0) collectives();
    if (strcmp(argv[2], "lifecycle") == 0) lifecycle();
    if (strcmp(argv[2], "communicators") == 0) communicators();
    if (strcmp(argv[2], "escape") == 0) escape();
  }
  printf("done\n");
  if (argc > 5) wait_for(argv[5]);
  return 0;
}
