/* Stands in for a library with NCCL linked in statically (as conda builds of libtorch_cuda.so
 * do): the NCCL API is hidden, so it appears in .symtab only, not in .dynsym. */
__attribute__((visibility("hidden"), noinline)) int ncclAllReduce(int x) { return x * 3 + 1; }
__attribute__((visibility("hidden"), noinline)) int ncclSend(int x) { return x - 1; }
int torch_entry(int x) { return ncclAllReduce(x) + ncclSend(x); }
