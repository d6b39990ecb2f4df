/**
 * @file capabilities.hpp
 * @brief rdma_memory_register's step 3: the three ways to register beyond pinning, each asked of the
 * device before it is measured (--odp: on-demand paging; --dmabuf: a dma-buf; --rereg: moving a
 * registration). Each ends with the device's own answer: a registration, or its errno and a hint.
 */
#pragma once

#include "support/mapping.hpp"
#include "support/udmabuf.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/fd.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/verbs.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace rdma_memory {

using namespace rdma_samples;

/** Step 3 with --odp: does the device page on demand? Ask it, then try. */
inline void require_odp(const Device &dev, ibv_pd *pd)
{
    //! [odp_caps]
    ibv_device_attr_ex attr{};
    check_rc(ibv_query_device_ex(dev.ctx.get(), nullptr, &attr), "ibv_query_device_ex");
    const ibv_odp_caps &odp = attr.odp_caps;
    info("odp_caps: general_caps 0x%llx (IBV_ODP_SUPPORT %s), rc_odp_caps 0x%x",
         static_cast<unsigned long long>(odp.general_caps), (odp.general_caps & IBV_ODP_SUPPORT) ? "yes" : "no",
         odp.per_transport_caps.rc_odp_caps);
    //! [odp_caps]
    if (!(odp.general_caps & IBV_ODP_SUPPORT))
        result("The device does not support on-demand paging: ODP needs a device that takes page faults on its "
               "own DMA (e.g. mlx5, ConnectX-4 or later, with ODP enabled)");
    // Try anyway, so that the device says it in its own words: the answer is the errno.
    Mapping page(static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), false);
    MrPtr mr(ibv_reg_mr(pd, page.data(), page.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND));
    if (!mr)
        fail_errno("ibv_reg_mr(IBV_ACCESS_ON_DEMAND)", errno,
                   "the device refuses on-demand registration; every registration on it pins its pages (run "
                   "without --odp)");
    info("ibv_reg_mr(IBV_ACCESS_ON_DEMAND) of one page: lkey 0x%x: the device registers on demand", mr->lkey);
}

/** Step 3 with --dmabuf: make a dma-buf, then ask the device to register it.
 *  @param dev /dev/udmabuf, opened (or -1, and @p open_err says why not) */
inline void require_dmabuf(ibv_pd *pd, const Fd &dev, int open_err)
{
    if (dev.get() < 0)
        result("No /dev/udmabuf here (%s): this kernel has no udmabuf driver (CONFIG_UDMABUF; try modprobe "
               "udmabuf), so there is no dma-buf to register without a GPU",
               std::strerror(open_err));
    // Without a dma-buf the device can still say whether it would take one: a provider without dma-buf
    // registration refuses before it looks at the file descriptor (EOPNOTSUPP); one with it refuses the
    // invalid descriptor -1 (EBADF).
    Fd probe = dev.get() < 0 ? Fd() : make_udmabuf(dev.get(), 4096);
    MrPtr mr(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, probe.get(), IBV_ACCESS_LOCAL_WRITE));
    const int err = errno;
    if (!mr)
        fail_errno(probe.get() < 0 ? "ibv_reg_dmabuf_mr(fd -1)" : "ibv_reg_dmabuf_mr", err,
                   err == EOPNOTSUPP ? "the device's provider has no dma-buf registration (rxe has none); a device "
                                       "needs it in its provider and kernel driver (e.g. mlx5, efa, irdma), with an "
                                       "exporter such as a GPU driver or udmabuf"
                   : probe.get() < 0 ? "the provider takes dma-bufs, but this machine has no exporter to make one "
                                       "(/dev/udmabuf)"
                                     : "the device refused this dma-buf; see ibv_reg_dmabuf_mr in ibv_reg_mr(3)");
    info("ibv_reg_dmabuf_mr of a 4 KiB udmabuf: lkey 0x%x: the device registers dma-bufs", mr->lkey);
}

/** Step 3 with --rereg: can the device move a registration to new memory? */
inline void require_rereg(ibv_pd *pd)
{
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    Mapping a(page, false), b(page, false);
    MrPtr mr(check(ibv_reg_mr(pd, a.data(), page, IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    // On failure the MR must still be deregistered (ibv_rereg_mr(3)): MrPtr does it.
    // ibv_rereg_mr() returns an IBV_REREG_MR_ERR_* code (negative), not an errno: errno holds the cause,
    // which check_rc() reads for any negative return.
    const int rc = ibv_rereg_mr(mr.get(), IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, b.data(), page, 0);
    check_rc(rc, "ibv_rereg_mr(IBV_REREG_MR_CHANGE_TRANSLATION)", [](int err) {
        return err == EOPNOTSUPP ? std::string("the device's provider cannot re-register (rdma-core's rxe "
                                               "provider has no rereg_mr); deregister and register the new "
                                               "buffer instead (run without --rereg)")
                                 : hint_for_errno("ibv_rereg_mr", err);
    });
    info("ibv_rereg_mr moved a one-page registration: the device re-registers");
}

} // namespace rdma_memory
