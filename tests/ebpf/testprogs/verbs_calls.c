/* A stand-in verbs user: dlopens a libibverbs (tests' fake one, with rdma-core's versioned ABI),
 * waits for GO_FILE, then per round:
 *   ibv_create_qp x2 (default version; one fails -> NULL), ibv_create_qp@IBVERBS_1.0 x1 (compat:
 *   not probed), ibv_modify_qp -> INIT, RTR, RTS, ERR (4 ok) + 1 failing (EINVAL) + 1 without the
 *   state bit, ibv_reg_mr(4096) (calls ibv_reg_mr_iova2 inside), ibv_reg_mr_iova2(8192),
 *   ibv_reg_dmabuf_mr(1024), ibv_dereg_mr x3, ibv_destroy_qp x1.
 * usage: verbs_calls LIBRARY ROUNDS GO_FILE */
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void* lib;
static void* sym(const char* name, const char* version) {
  void* f = version ? dlvsym(lib, name, version) : dlsym(lib, name);
  if (!f) {
    fprintf(stderr, "missing %s\n", name);
    _exit(3);
  }
  return f;
}

typedef struct ibv_qp* (*create_qp_t)(struct ibv_pd*, struct ibv_qp_init_attr*);
typedef int (*modify_qp_t)(struct ibv_qp*, struct ibv_qp_attr*, int);
typedef int (*destroy_qp_t)(struct ibv_qp*);
typedef struct ibv_mr* (*reg_mr_t)(struct ibv_pd*, void*, size_t, int);
typedef struct ibv_mr* (*reg_mr_iova2_t)(struct ibv_pd*, void*, size_t, uint64_t, unsigned);
typedef struct ibv_mr* (*reg_dmabuf_t)(struct ibv_pd*, uint64_t, size_t, uint64_t, int, int);
typedef int (*dereg_mr_t)(struct ibv_mr*);

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  setvbuf(stdout, NULL, _IONBF, 0);
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 3;
  }
  create_qp_t create_qp = (create_qp_t)sym("ibv_create_qp", NULL);
  create_qp_t create_qp_10 = (create_qp_t)sym("ibv_create_qp", "IBVERBS_1.0");
  modify_qp_t modify_qp = (modify_qp_t)sym("ibv_modify_qp", NULL);
  destroy_qp_t destroy_qp = (destroy_qp_t)sym("ibv_destroy_qp", NULL);
  reg_mr_t reg_mr = (reg_mr_t)sym("ibv_reg_mr", NULL);
  reg_mr_iova2_t reg_mr_iova2 = (reg_mr_iova2_t)sym("ibv_reg_mr_iova2", NULL);
  reg_dmabuf_t reg_dmabuf = (reg_dmabuf_t)sym("ibv_reg_dmabuf_mr", NULL);
  dereg_mr_t dereg_mr = (dereg_mr_t)sym("ibv_dereg_mr", NULL);
  printf("ready %d\n", (int)getpid());
  while (access(argv[3], F_OK) != 0) usleep(5000);
  static char buffer[8192];
  for (int round = 0; round < (int)strtol(argv[2], NULL, 10); round++) {
    struct ibv_qp_init_attr init = {.qp_type = IBV_QPT_RC, .cap = {.max_send_wr = 7}};
    struct ibv_qp* qp = create_qp(NULL, &init);
    struct ibv_qp_init_attr too_big = {.qp_type = IBV_QPT_RC, .cap = {.max_send_wr = 5000}};
    if (create_qp(NULL, &too_big) != NULL) return 4;
    struct ibv_qp* compat = create_qp_10(NULL, &init);
    struct ibv_qp_attr attr = {0};
    const enum ibv_qp_state states[] = {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_ERR};
    for (int i = 0; i < 4; i++) {
      attr.qp_state = states[i];
      if (modify_qp(qp, &attr, IBV_QP_STATE) != 0) return 5;
    }
    attr.qp_state = (enum ibv_qp_state)42;
    if (modify_qp(qp, &attr, IBV_QP_STATE) != EINVAL) return 6;
    attr.qp_state = IBV_QPS_RESET;
    modify_qp(qp, &attr, IBV_QP_PKEY_INDEX); /* no state change */
    struct ibv_mr* a = reg_mr(NULL, buffer, 4096, 0);
    struct ibv_mr* b = reg_mr_iova2(NULL, buffer, 8192, 0, 0);
    struct ibv_mr* c = reg_dmabuf(NULL, 0, 1024, 0, -1, 0);
    dereg_mr(a);
    dereg_mr(b);
    dereg_mr(c);
    destroy_qp(qp);
    free(compat);
    printf("qp %u\n", 0x1234 + 7);
  }
  printf("done\n");
  return 0;
}
