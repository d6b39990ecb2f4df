/**
 * @file verbs.hpp
 * @brief std::unique_ptr owners for verbs objects, so teardown is the reverse of setup.
 *
 * Declare them in the order you create them: C++ destroys locals in reverse order, which is exactly the
 * order verbs wants (QP before CQ, MR before PD, PD before the device context). The deleters ignore the
 * return value: at teardown there is nothing left to do about a failure.
 */
#pragma once

#include <infiniband/verbs.h>

#include <memory>

namespace rdma_samples {

/// @cond DELETERS
struct DeviceListDeleter {
    void operator()(ibv_device **l) const { ibv_free_device_list(l); }
};
struct ContextDeleter {
    void operator()(ibv_context *c) const { ibv_close_device(c); }
};
struct PdDeleter {
    void operator()(ibv_pd *p) const { ibv_dealloc_pd(p); }
};
struct MrDeleter {
    void operator()(ibv_mr *m) const { ibv_dereg_mr(m); }
};
struct CqDeleter {
    void operator()(ibv_cq *c) const { ibv_destroy_cq(c); }
};
struct QpDeleter {
    void operator()(ibv_qp *q) const { ibv_destroy_qp(q); }
};
struct AhDeleter {
    void operator()(ibv_ah *a) const { ibv_destroy_ah(a); }
};
struct CompChannelDeleter {
    void operator()(ibv_comp_channel *c) const { ibv_destroy_comp_channel(c); }
};
struct SrqDeleter {
    void operator()(ibv_srq *s) const { ibv_destroy_srq(s); }
};
struct MwDeleter {
    void operator()(ibv_mw *w) const { ibv_dealloc_mw(w); }
};
/// @endcond

using DeviceListPtr = std::unique_ptr<ibv_device *, DeviceListDeleter>;       ///< ibv_get_device_list()
using ContextPtr = std::unique_ptr<ibv_context, ContextDeleter>;              ///< ibv_open_device()
using PdPtr = std::unique_ptr<ibv_pd, PdDeleter>;                             ///< ibv_alloc_pd()
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;                             ///< ibv_reg_mr()
using CqPtr = std::unique_ptr<ibv_cq, CqDeleter>;                             ///< ibv_create_cq()
using QpPtr = std::unique_ptr<ibv_qp, QpDeleter>;                             ///< ibv_create_qp()
using AhPtr = std::unique_ptr<ibv_ah, AhDeleter>;                             ///< ibv_create_ah()
using CompChannelPtr = std::unique_ptr<ibv_comp_channel, CompChannelDeleter>; ///< ibv_create_comp_channel()
using SrqPtr = std::unique_ptr<ibv_srq, SrqDeleter>;                          ///< ibv_create_srq()
using MwPtr = std::unique_ptr<ibv_mw, MwDeleter>;                             ///< ibv_alloc_mw()

} // namespace rdma_samples
