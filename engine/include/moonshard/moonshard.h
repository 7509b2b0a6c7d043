/* moonshard.h: everything a host C program needs from the engine. */
#ifndef MOONSHARD_H
#define MOONSHARD_H

#include "moonshard/autograd.h"
#include "moonshard/checked.h"
#include "moonshard/cuda.h"
#include "moonshard/cuda_graph.h"
#include "moonshard/dtype.h"
#include "moonshard/error.h"
#include "moonshard/idx.h"
#include "moonshard/io.h"
#include "moonshard/kernel_calls.h"
#include "moonshard/loader.h"
#include "moonshard/memory.h"
#include "moonshard/meta.h"
#include "moonshard/nn_conv.h"
#include "moonshard/nn_ops.h"
#include "moonshard/nn_types.h"
#include "moonshard/ops.h"
#include "moonshard/optim.h"
#include "moonshard/optim_list.h"
#include "moonshard/png.h"
#include "moonshard/random.h"
#include "moonshard/runtime.h"
#include "moonshard/sampling.h"
#include "moonshard/storage.h"
#include "moonshard/tensor.h"
#include "moonshard/transforms.h"

#endif
