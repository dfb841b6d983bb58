/* A fake libibverbs.so.1 with rdma-core's ABI for the probed control-path functions, including its
 * symbol versioning: ibv_create_qp / ibv_modify_qp / ibv_reg_mr exist as a compat version
 * (@IBVERBS_1.0) and the default (@@IBVERBS_1.1), ibv_reg_mr_iova2 is IBVERBS_1.8 and
 * ibv_reg_dmabuf_mr IBVERBS_1.12 (see fake_verbs.map). As in rdma-core, ibv_reg_mr@@IBVERBS_1.1
 * calls ibv_reg_mr_iova2. Queue pairs are plain structs; ibv_modify_qp records the state. */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_VERSION(name, version) __asm__(".symver " #name "_default, " #name "@@" version)
#define COMPAT_VERSION(name, version) __asm__(".symver " #name "_compat, " #name "@" version)

/* ---- IBVERBS_1.1 (default) ---- */
struct ibv_qp* ibv_create_qp_default(struct ibv_pd* pd, struct ibv_qp_init_attr* attr);
struct ibv_qp* ibv_create_qp_default(struct ibv_pd* pd, struct ibv_qp_init_attr* attr) {
  if (attr == NULL || attr->cap.max_send_wr > 1000) return NULL; /* failure path: NULL */
  struct ibv_qp* qp = calloc(1, sizeof(*qp));
  qp->pd = pd;
  qp->qp_num = 0x1234 + attr->cap.max_send_wr;
  qp->qp_type = attr->qp_type;
  qp->state = IBV_QPS_RESET;
  return qp;
}
DEFAULT_VERSION(ibv_create_qp, "IBVERBS_1.1");

int ibv_modify_qp_default(struct ibv_qp* qp, struct ibv_qp_attr* attr, int mask);
int ibv_modify_qp_default(struct ibv_qp* qp, struct ibv_qp_attr* attr, int mask) {
  if (qp == NULL || attr == NULL) return EINVAL;
  if (mask & IBV_QP_STATE) {
    if (attr->qp_state > IBV_QPS_ERR) return EINVAL;
    qp->state = attr->qp_state;
  }
  return 0;
}
DEFAULT_VERSION(ibv_modify_qp, "IBVERBS_1.1");

int ibv_destroy_qp_default(struct ibv_qp* qp);
int ibv_destroy_qp_default(struct ibv_qp* qp) {
  free(qp);
  return 0;
}
DEFAULT_VERSION(ibv_destroy_qp, "IBVERBS_1.1");

struct ibv_mr* ibv_reg_mr_iova2(struct ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                unsigned int access) {
  (void)iova, (void)access;
  if (length == 0) return NULL;
  struct ibv_mr* mr = calloc(1, sizeof(*mr));
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  return mr;
}

struct ibv_mr* ibv_reg_mr_default(struct ibv_pd* pd, void* addr, size_t length, int access);
struct ibv_mr* ibv_reg_mr_default(struct ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}
DEFAULT_VERSION(ibv_reg_mr, "IBVERBS_1.1");

struct ibv_mr* ibv_reg_dmabuf_mr(struct ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova,
                                 int fd, int access) {
  (void)fd, (void)offset;
  return ibv_reg_mr_iova2(pd, NULL, length, iova, (unsigned)access);
}

int ibv_dereg_mr_default(struct ibv_mr* mr);
int ibv_dereg_mr_default(struct ibv_mr* mr) {
  free(mr);
  return 0;
}
DEFAULT_VERSION(ibv_dereg_mr, "IBVERBS_1.1");

/* ---- IBVERBS_1.0 (compat): different code at different addresses. (rdma-core's compat entry
 * points end up in the 1.1 code; these do not, so a probe on the wrong version shows.) ---- */
struct ibv_qp* ibv_create_qp_compat(struct ibv_pd* pd, struct ibv_qp_init_attr* attr);
struct ibv_qp* ibv_create_qp_compat(struct ibv_pd* pd, struct ibv_qp_init_attr* attr) {
  (void)attr;
  struct ibv_qp* qp = calloc(1, sizeof(*qp));
  qp->pd = pd;
  qp->qp_num = 0x100000;
  return qp;
}
COMPAT_VERSION(ibv_create_qp, "IBVERBS_1.0");

int ibv_modify_qp_compat(struct ibv_qp* qp, struct ibv_qp_attr* attr, int mask);
int ibv_modify_qp_compat(struct ibv_qp* qp, struct ibv_qp_attr* attr, int mask) {
  return ibv_modify_qp_default(qp, attr, mask) ? EINVAL : 0;
}
COMPAT_VERSION(ibv_modify_qp, "IBVERBS_1.0");

struct ibv_mr* ibv_reg_mr_compat(struct ibv_pd* pd, void* addr, size_t length, int access);
struct ibv_mr* ibv_reg_mr_compat(struct ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_default(pd, addr, length + 1, access);
}
COMPAT_VERSION(ibv_reg_mr, "IBVERBS_1.0");
