/**
 * @file register.cpp
 * @brief What registering memory costs: ibv_reg_mr() and ibv_dereg_mr() timed, size by size.
 *
 * ibv_reg_mr() is not bookkeeping. The kernel pins every page of the buffer (they may no longer be
 * swapped out or moved, and each counts against RLIMIT_MEMLOCK), the device driver learns the physical
 * address of each page (a NIC loads them into its translation table; Soft-RoCE keeps them in its own
 * page map), and the device hands back the keys: lkey for our work requests, rkey for a peer's. Pinning
 * and mapping are done page by page, so the cost grows with the number of pages; ibv_dereg_mr() undoes
 * it page by page too. Fewer, larger pages (--huge) make both cheaper.
 *
 * Each size gets a fresh mapping, touched page by page before the first registration, then registered
 * and deregistered --runs times; the row's memory is unmapped before the next row. --rereg also moves a
 * registration to a second buffer with ibv_rereg_mr(); --odp and --dmabuf register in the two ways that
 * pin nothing (on-demand paging, a dma-buf), after asking the device whether it can (capabilities.hpp).
 */
#include "capabilities.hpp"
#include "support/mapping.hpp"
#include "support/options.hpp"
#include "support/table.hpp"
#include "support/udmabuf.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/fd.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/test_control.hpp>
#include <rdma_samples/verbs.hpp>

#include <fcntl.h>

#include <optional>
#include <vector>

using namespace rdma_samples;

namespace rdma_memory { // Mapping, Options, the sizes and the table (support/)
namespace {

/** One row of the table: --runs registrations of a fresh, touched mapping of @p size bytes. */
void measure(ibv_pd *pd, const std::optional<Fd> &udmabuf_dev, std::size_t size, std::size_t page, const Options &opt)
{
    const int access = IBV_ACCESS_LOCAL_WRITE | (opt.odp ? IBV_ACCESS_ON_DEMAND : 0);
    // Touched first: ibv_reg_mr() faults in every page it pins, and the kernel's allocating and zeroing
    // them would count as registration in the first run and not in the others.
    Mapping buf(size, opt.huge);
    buf.touch();
    std::optional<Mapping> other; // --rereg: the buffer the registration moves to
    if (opt.rereg) {
        other.emplace(size, opt.huge);
        other->touch();
    }
    std::optional<Fd> dmabuf;
    if (opt.dmabuf)
        dmabuf.emplace(make_udmabuf(udmabuf_dev->get(), size));

    Timings t;
    Stopwatch watch;
    for (int run = 0; run < opt.runs; ++run) {
        watch.start();
        //! [reg_dereg]
        ibv_mr *raw = opt.dmabuf ? ibv_reg_dmabuf_mr(pd, 0, size, 0, dmabuf->get(), access)
                                 : ibv_reg_mr(pd, buf.data(), size, access);
        const int err = errno;
        t.reg.push_back(watch.us());
        if (raw == nullptr)
            fail_errno("ibv_reg_mr(" + size_text(size) + ")", err);
        MrPtr mr(raw);
        if (opt.rereg) {
            watch.start();
            const int rc = ibv_rereg_mr(mr.get(), IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, other->data(), size, 0);
            check_rc(rc, "ibv_rereg_mr(" + size_text(size) + ")"); // errno holds the cause
            t.rereg.push_back(watch.us());
        }
        watch.start();
        check_rc(ibv_dereg_mr(mr.release()), "ibv_dereg_mr(" + size_text(size) + ")");
        t.dereg.push_back(watch.us());
        //! [reg_dereg]
        t.dereg_reg.push_back(t.reg.back() + t.dereg.back()); // what moving costs without ibv_rereg_mr()
    }
    print_row(size, page, t, opt.rereg);
} // the MR is gone; the mappings (and the dma-buf) are released here, before the next row

void run(const Args &args, const Options &opt)
{
    // The sizes first: a bad one is a bad command line (exit 2), found before any device is opened.
    const std::vector<std::size_t> sizes = opt.checked_sizes();
    const std::size_t page = opt.page();

    step(1, "open an RDMA device and allocate a protection domain");
    Device dev = open_device(args.device, args.gid_index);
    PdPtr pd(check(ibv_alloc_pd(dev.ctx.get()), "ibv_alloc_pd"));
    std::uint64_t max_mr_size = dev.device_attr.max_mr_size;
    if (const char *fake = test_control(TestHook::max_mr_size)) {
        max_mr_size = parse_unsigned(fake, NumberBase::either).value_or(max_mr_size);
        info("(test) %s: the device's max_mr_size taken as %s", test_control_name(TestHook::max_mr_size), fake);
    }
    info("device %s: max_mr_size %llu bytes; pages of %s; %s", dev.name.c_str(),
         static_cast<unsigned long long>(max_mr_size), size_text(page).c_str(), memlock_limit().c_str());

    step(2, "check that every size fits in one memory region of this device");
    for (std::size_t size : sizes)
        if (size > max_mr_size)
            throw UsageError("--sizes: " + size_text(size) + " is larger than the device's max_mr_size (" +
                                 std::to_string(max_mr_size) + " bytes)",
                             "register at most max_mr_size bytes per region (see ibv_devinfo -v), or split the buffer");

    std::optional<Fd> udmabuf_dev;
    if (opt.odp) {
        step(3, "ask the device whether it can register on demand (ODP), then try one page");
        require_odp(dev, pd.get());
    } else if (opt.dmabuf) {
        step(3, "make a dma-buf without a GPU (memfd + /dev/udmabuf) and ask the device to register it");
        udmabuf_dev.emplace(open("/dev/udmabuf", O_RDWR | O_CLOEXEC));
        require_dmabuf(pd.get(), *udmabuf_dev, errno);
    } else {
        step(3, "registrations pin pages: nothing to ask the device beyond ibv_reg_mr()");
    }
    if (opt.rereg)
        require_rereg(pd.get());

    const char *what = opt.odp      ? "on demand (IBV_ACCESS_ON_DEMAND: nothing pinned)"
                       : opt.dmabuf ? "dma-bufs (ibv_reg_dmabuf_mr)"
                                    : "pinned memory (IBV_ACCESS_LOCAL_WRITE)";
    step(4, "register %s, %d runs per size, every page touched first; times in microseconds", what, opt.runs);
    print_header(opt.rereg);
    for (std::size_t size : sizes)
        measure(pd.get(), udmabuf_dev, size, page, opt);
}

} // namespace
} // namespace rdma_memory

int main(int argc, char **argv)
{
    rdma_memory::Options opt;
    ProgramSpec spec{.name = "rdma_memory_register",
                     .role = "register",
                     .summary = "What registering memory costs: ibv_reg_mr and ibv_dereg_mr timed by size.",
                     .resource_descriptor = false,
                     .descriptor_files = false};
    spec.extra = opt.flags();
    return run_sample(spec, argc, argv, [&](const Args &args) { rdma_memory::run(args, opt); });
}
