/* A fake libnccl.so.2 with NCCL's real prototypes (nccl.h) and export pattern (weak ncclX plus
 * global pncclX at one address), whose communicator calls succeed: the real library cannot create
 * a communicator without a GPU, and the tests need live communicators, splits and aborts. Built
 * -O2, so ncclUniqueId really is passed by value on the stack as in NCCL. */
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#define API(ret, name, ...)                                                \
  ret p##name(__VA_ARGS__);                                                \
  extern __typeof__(p##name) name __attribute__((weak, alias("p" #name))); \
  ret p##name(__VA_ARGS__)

struct ncclComm {
  int nranks, rank;
  char unique_id_byte;
};

static ncclComm_t make(int nranks, int rank, char id) {
  struct ncclComm* c = malloc(sizeof(*c));
  c->nranks = nranks;
  c->rank = rank;
  c->unique_id_byte = id;
  return c;
}

API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  if (nranks <= 0 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  *comm = make(nranks, rank, commId.internal[5]);
  return ncclSuccess;
}
API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  (void)devlist;
  for (int i = 0; i < ndev; i++) comms[i] = make(ndev, i, 0);
  return ncclSuccess;
}
API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
    ncclConfig_t* config) {
  (void)config;
  *newcomm = color < 0 ? NULL : make(comm->nranks / 2, key, 0);
  return ncclSuccess;
}
API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  *count = comm->nranks;
  return ncclSuccess;
}
API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  *rank = comm->rank;
  return ncclSuccess;
}
API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  free(comm);
  return ncclSuccess;
}
API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  free(comm);
  return ncclSuccess;
}
/* A fake-only hook: with a communicator, a non-NULL stream is a function called from inside the
 * call, through which the tests leave it by longjmp (as an exception thrown through a caller would)
 * so that its return probe never fires. */
API(ncclResult_t, ncclAllReduce, const void* s, void* r, size_t count, ncclDataType_t t,
    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)s, (void)r, (void)count, (void)t, (void)op;
  if (comm && stream) {
    void (*hook)(void);
    memcpy(&hook, &stream, sizeof(hook));  // the pointer's bits, as the test program put them
    hook();
  }
  return comm ? ncclSuccess : ncclInvalidArgument;
}
