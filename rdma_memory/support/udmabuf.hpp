/**
 * @file udmabuf.hpp
 * @brief A dma-buf without a GPU, for rdma_memory_register --dmabuf: a sealed memfd that /dev/udmabuf
 * exports. Nothing here is RDMA; register.cpp hands the dma-buf to ibv_reg_dmabuf_mr().
 */
#pragma once

#include <rdma_samples/check.hpp>
#include <rdma_samples/fd.hpp>

#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace rdma_memory {

/**
 * @brief A dma-buf of @p size bytes: a sealed memfd turned into a dma-buf by /dev/udmabuf.
 * @param udmabuf_dev /dev/udmabuf, open @param size bytes, whole pages
 * @return the dma-buf's descriptor @throws rdma_samples::Error naming the call that failed
 */
inline rdma_samples::Fd make_udmabuf(int udmabuf_dev, std::size_t size)
{
    // udmabuf exports the pages of a memfd; it insists that the memfd cannot shrink under it.
    rdma_samples::Fd memfd(memfd_create("rdma_memory", MFD_ALLOW_SEALING), "memfd_create");
    rdma_samples::check_rc(ftruncate(memfd.get(), static_cast<off_t>(size)), "ftruncate(memfd)");
    rdma_samples::check_rc(fcntl(memfd.get(), F_ADD_SEALS, F_SEAL_SHRINK), "fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK)");
    udmabuf_create create{};
    create.memfd = static_cast<__u32>(memfd.get());
    create.flags = UDMABUF_FLAGS_CLOEXEC;
    create.size = size;
    // The dma-buf holds its own reference to the pages: the memfd may close.
    return rdma_samples::Fd(ioctl(udmabuf_dev, UDMABUF_CREATE, &create), "ioctl(/dev/udmabuf, UDMABUF_CREATE)");
}

} // namespace rdma_memory
