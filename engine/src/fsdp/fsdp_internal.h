/* fsdp_internal.h (private to engine/src/fsdp): what the flat_param_*.c files share beyond
 * moonshard/fsdp.h: buffer helpers of flat_param.c and each file's cleanup. */
#ifndef MS_FSDP_INTERNAL_H
#define MS_FSDP_INTERNAL_H

#include "moonshard/fsdp.h"
#include "moonshard/memory.h"

/* A 1-D tensor of n elements over a fresh storage of the given memory category (new reference):
 * on the unit's device (full, compute and communication buffers), or where the shard lives
 * (the shard's grad: page-locked host memory with cpu_offload). */
ms_tensor *ms_fsdp_new_flat(const ms_flat_param *fp, int64_t n, ms_dtype dt, ms_mem_category cat);
ms_tensor *ms_fsdp_new_shard_flat(const ms_flat_param *fp, int64_t n, ms_dtype dt, ms_mem_category cat);
/* The shard, detached, in dt on the unit's device (new reference): the all-gathers' input. */
ms_tensor *ms_fsdp_shard_on_device(ms_flat_param *fp, ms_dtype dt);
/* A view of s with a contiguous layout of the given shape at offset (elements; new reference). */
ms_tensor *ms_fsdp_contiguous_view(ms_storage *s, ms_dtype dt, int ndim, const int64_t *shape, int64_t offset);

/* flat_param.c, the pieces' grads around a reduction: before packing, shard->grad is made to say
 * what the pieces' grads say (none at all: dropped; a piece without one: its slice zeroed; one
 * assigned by the user: copied in); after the result is added into it, each piece requiring
 * grad gets the matching view of it as its grad. */
ms_status ms_fsdp_sync_shard_grad(ms_flat_param *fp);
ms_status ms_fsdp_use_piece_grad_views(ms_flat_param *fp);

/* flat_param_comm.c: finishes in-flight collectives and drops what they hold (for free). */
void ms_fsdp_comm_free(ms_flat_param *fp);
/* flat_param_mp.c: frees the param_dtype buffer and views (for free, after the hooks are gone). */
void ms_fsdp_mp_free(ms_flat_param *fp);

#endif
