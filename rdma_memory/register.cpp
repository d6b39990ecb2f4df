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
 * pin nothing (on-demand paging, a dma-buf), after asking the device whether it can.
 */
#include "mapping.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/run_sample.hpp>
#include <rdma_samples/test_control.hpp>
#include <rdma_samples/text.hpp>
#include <rdma_samples/verbs.hpp>

#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <optional>
#include <sstream>
#include <vector>

using namespace rdma_samples;
using rdma_memory::Mapping;

namespace {

/** This program's own flags; the common ones are in Args. */
struct Options {
    std::vector<std::size_t> sizes; ///< --sizes; empty: the defaults below
    int runs = 5;                   ///< --runs: registrations timed per size
    bool huge = false;              ///< --huge: 2 MiB pages (MAP_HUGETLB)
    bool rereg = false;             ///< --rereg: also time ibv_rereg_mr() to a new buffer
    bool odp = false;               ///< --odp: register on demand (IBV_ACCESS_ON_DEMAND), nothing pinned
    bool dmabuf = false;            ///< --dmabuf: register a dma-buf (/dev/udmabuf) instead of user memory
};

constexpr std::size_t KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024;
// Up to 256 MiB: what the project's 1 GiB VM holds comfortably (twice that with --rereg).
const std::vector<std::size_t> default_sizes = {4 * KiB, 64 * KiB, MiB, 16 * MiB, 64 * MiB, 256 * MiB};
const std::vector<std::size_t> default_huge_sizes = {2 * MiB, 8 * MiB, 32 * MiB, 64 * MiB};

/** "4K,64K,1M" -> bytes. A number with an optional K, M or G (powers of 1024). */
std::vector<std::size_t> parse_sizes(const std::string &list)
{
    std::vector<std::size_t> sizes;
    std::stringstream in(list);
    std::string item;
    while (std::getline(in, item, ',')) {
        std::size_t unit = 1;
        if (!item.empty() && std::strchr("KMGkmg", item.back()) != nullptr) {
            const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(item.back())));
            unit = u == 'K' ? KiB : u == 'M' ? MiB : GiB;
            item.pop_back();
        }
        const std::optional<std::uint64_t> n = parse_unsigned(item, NumberBase::decimal, 64 * GiB / unit);
        if (!n)
            throw UsageError("--sizes: expected sizes such as 4K,64K,1M (at most 64G each), got " + quote(list));
        sizes.push_back(*n * unit);
    }
    if (sizes.empty() || sizes.size() > 32)
        throw UsageError("--sizes: expected 1 to 32 sizes, got " + quote(list));
    return sizes;
}

/** 4096 -> "4 KiB", 2097152 -> "2 MiB", 5000 -> "5000 B". */
std::string size_text(std::size_t bytes)
{
    for (auto [unit, name] : {std::pair{GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}})
        if (bytes >= unit && bytes % unit == 0)
            return std::to_string(bytes / unit) + " " + name;
    return std::to_string(bytes) + " B";
}

/** Median, minimum and maximum of a row's timings, in microseconds. */
struct Stats {
    double median, min, max;
};
Stats stats(std::vector<double> us)
{
    std::sort(us.begin(), us.end());
    const std::size_t n = us.size();
    const double median = n % 2 == 1 ? us[n / 2] : (us[n / 2 - 1] + us[n / 2]) / 2;
    return {median, us.front(), us.back()};
}

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0)
{
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

/** A file descriptor closed when it goes out of scope (/dev/udmabuf, a memfd, a dma-buf). */
class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    ~Fd()
    {
        if (fd_ >= 0)
            close(fd_);
    }
    int get() const { return fd_; }

private:
    int fd_;
};

/** A dma-buf of @p size bytes without a GPU: a sealed memfd turned into a dma-buf by /dev/udmabuf. */
int make_udmabuf(int udmabuf_dev, std::size_t size)
{
    // udmabuf exports the pages of a memfd; it insists that the memfd cannot shrink under it.
    Fd memfd(memfd_create("rdma_memory", MFD_ALLOW_SEALING));
    if (memfd.get() < 0)
        fail_errno("memfd_create", errno);
    check_rc(ftruncate(memfd.get(), static_cast<off_t>(size)), "ftruncate(memfd)");
    check_rc(fcntl(memfd.get(), F_ADD_SEALS, F_SEAL_SHRINK), "fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK)");
    udmabuf_create create{};
    create.memfd = static_cast<__u32>(memfd.get());
    create.flags = UDMABUF_FLAGS_CLOEXEC;
    create.size = size;
    const int dmabuf = ioctl(udmabuf_dev, UDMABUF_CREATE, &create); // the dma-buf holds its own reference
    if (dmabuf < 0)
        fail_errno("ioctl(/dev/udmabuf, UDMABUF_CREATE)", errno);
    return dmabuf;
}

/** Step 3 with --odp: does the device page on demand? Ask it, then try. */
void require_odp(const Device &dev, ibv_pd *pd)
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
void require_dmabuf(ibv_pd *pd, const Fd &dev, int open_err)
{
    if (dev.get() < 0) {
        result("No /dev/udmabuf here (%s): this kernel has no udmabuf driver (CONFIG_UDMABUF; try modprobe "
               "udmabuf), so there is no dma-buf to register without a GPU",
               std::strerror(open_err));
        // Without a dma-buf the device can still say whether it would take one: a provider without dma-buf
        // registration refuses before it looks at the file descriptor (EOPNOTSUPP); one with it refuses
        // the invalid descriptor -1 (EBADF).
        MrPtr mr(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE));
        const int err = errno;
        fail_errno("ibv_reg_dmabuf_mr(fd -1)", err,
                   err == EOPNOTSUPP
                       ? "the device's provider has no dma-buf registration (rxe has none); a device needs it in "
                         "its provider and kernel driver (e.g. mlx5, efa, irdma), with an exporter such as a GPU "
                         "driver or udmabuf"
                       : "the provider takes dma-bufs, but this machine has no exporter to make one (/dev/udmabuf)");
    }
    Fd probe(make_udmabuf(dev.get(), 4096));
    MrPtr mr(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, probe.get(), IBV_ACCESS_LOCAL_WRITE));
    const int err = errno;
    if (!mr)
        fail_errno("ibv_reg_dmabuf_mr", err,
                   err == EOPNOTSUPP ? "the device's provider has no dma-buf registration (rxe has none); a device "
                                       "needs it in its provider and kernel driver (e.g. mlx5, efa, irdma)"
                                     : "the device refused this dma-buf; see ibv_reg_dmabuf_mr in ibv_reg_mr(3)");
    info("ibv_reg_dmabuf_mr of a 4 KiB udmabuf: lkey 0x%x: the device registers dma-bufs", mr->lkey);
}

/** Step 3 with --rereg: can the device move a registration to new memory? */
void require_rereg(ibv_pd *pd)
{
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    Mapping a(page, false), b(page, false);
    MrPtr mr(check(ibv_reg_mr(pd, a.data(), page, IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr"));
    // On failure the MR must still be deregistered (ibv_rereg_mr(3)): MrPtr does it.
    // ibv_rereg_mr() returns an IBV_REREG_MR_ERR_* code (negative), not an errno: errno holds the cause,
    // which check_rc() reads for -1.
    const int rc = ibv_rereg_mr(mr.get(), IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, b.data(), page, 0);
    check_rc(rc == 0 ? 0 : -1, "ibv_rereg_mr(IBV_REREG_MR_CHANGE_TRANSLATION)", [](int err) {
        return err == EOPNOTSUPP ? std::string("the device's provider cannot re-register (rdma-core's rxe "
                                               "provider has no rereg_mr); deregister and register the new "
                                               "buffer instead (run without --rereg)")
                                 : hint_for_errno("ibv_rereg_mr", err);
    });
    info("ibv_rereg_mr moved a one-page registration: the device re-registers");
}

/** One row of the table: --runs registrations of a fresh, touched mapping of @p size bytes. */
void measure(ibv_pd *pd, const std::optional<Fd> &udmabuf_dev, std::size_t size, const Options &opt)
{
    const std::size_t page = opt.huge ? rdma_memory::huge_page_size : static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const int access = IBV_ACCESS_LOCAL_WRITE | (opt.odp ? IBV_ACCESS_ON_DEMAND : 0);
    const std::string call = "ibv_reg_mr(" + size_text(size) + ")";
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

    std::vector<double> reg, dereg, rereg, dereg_reg;
    for (int run = 0; run < opt.runs; ++run) {
        auto t0 = Clock::now();
        //! [reg_dereg]
        ibv_mr *raw = opt.dmabuf ? ibv_reg_dmabuf_mr(pd, 0, size, 0, dmabuf->get(), access)
                                 : ibv_reg_mr(pd, buf.data(), size, access);
        const int err = errno;
        reg.push_back(us_since(t0));
        if (raw == nullptr)
            fail_errno(call, err);
        MrPtr mr(raw);
        if (opt.rereg) {
            t0 = Clock::now();
            const int rc = ibv_rereg_mr(mr.get(), IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, other->data(), size, 0);
            check_rc(rc == 0 ? 0 : -1, "ibv_rereg_mr(" + size_text(size) + ")"); // errno holds the cause
            rereg.push_back(us_since(t0));
        }
        t0 = Clock::now();
        check_rc(ibv_dereg_mr(mr.release()), "ibv_dereg_mr(" + size_text(size) + ")");
        dereg.push_back(us_since(t0));
        //! [reg_dereg]
        dereg_reg.push_back(reg.back() + dereg.back()); // what moving costs without ibv_rereg_mr()
    }
    const Stats r = stats(reg), d = stats(dereg);
    const std::size_t pages = size / page;
    std::string line;
    char cells[160];
    std::snprintf(cells, sizeof cells, "%10s %8zu %10.1f %10.1f %10.1f %12.1f %10.3f", size_text(size).c_str(), pages,
                  r.median, r.min, r.max, d.median, r.median / static_cast<double>(pages));
    line = cells;
    if (opt.rereg) {
        std::snprintf(cells, sizeof cells, " %12.1f %12.1f", stats(rereg).median, stats(dereg_reg).median);
        line += cells;
    }
    result("%s", line.c_str());
} // the MR is gone; the mappings (and the dma-buf) are released here, before the next row

void run(const Args &args, const Options &opt)
{
    // The sizes first: a bad one is a bad command line (exit 2), found before any device is opened.
    const std::size_t page = opt.huge ? rdma_memory::huge_page_size : static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const std::vector<std::size_t> &sizes = !opt.sizes.empty() ? opt.sizes
                                            : opt.huge         ? default_huge_sizes
                                                               : default_sizes;
    for (std::size_t size : sizes)
        if (size == 0)
            throw UsageError("--sizes: a size of 0 registers nothing", "e.g. 4K,64K,1M");
        else if (size % page != 0)
            throw UsageError("--sizes: " + std::to_string(size) + " bytes is not a whole number of " + size_text(page) +
                                 " pages",
                             opt.huge ? "with --huge every size is a multiple of 2M" : "e.g. 4K,64K,1M");
    if ((opt.odp ? 1 : 0) + (opt.dmabuf ? 1 : 0) > 1 || (opt.dmabuf && (opt.huge || opt.rereg)))
        throw UsageError("--dmabuf registers a dma-buf: it takes neither --odp, --huge nor --rereg");

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
            throw Error(size_text(size) + " is larger than the device's max_mr_size (" + std::to_string(max_mr_size) +
                            " bytes)",
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
    std::string header = "      size    pages reg_median    reg_min    reg_max dereg_median   per_page";
    if (opt.rereg)
        header += " rereg_median dereg+reg_median";
    result("%s", header.c_str());
    for (std::size_t size : sizes)
        measure(pd.get(), udmabuf_dev, size, opt);
}

} // namespace

int main(int argc, char **argv)
{
    Options opt;
    ProgramSpec spec{.name = "rdma_memory_register",
                     .role = "register",
                     .summary = "What registering memory costs: ibv_reg_mr and ibv_dereg_mr timed by size.",
                     .resource_descriptor = false,
                     .descriptor_files = false};
    spec.extra = {
        {"sizes", "LIST", "sizes to register, e.g. 4K,64K,1M (K, M, G: powers of 1024), each a whole number of pages",
         "4K,64K,1M,16M,64M,256M; with --huge 2M,8M,32M,64M",
         [&](const std::string &v) { opt.sizes = parse_sizes(v); }},
        int_flag("runs", "N", "registrations timed per size", "5", opt.runs, 1, 1000),
        {"huge", "", "back the buffers with 2 MiB huge pages (MAP_HUGETLB; see /proc/sys/vm/nr_hugepages)", "off",
         [&](const std::string &) { opt.huge = true; }},
        {"rereg", "", "also time ibv_rereg_mr() to a new buffer of the same size, against dereg + reg", "off",
         [&](const std::string &) { opt.rereg = true; }},
        {"odp", "", "register on demand (IBV_ACCESS_ON_DEMAND), after asking the device for ODP", "off",
         [&](const std::string &) { opt.odp = true; }},
        {"dmabuf", "", "register dma-bufs made with /dev/udmabuf (ibv_reg_dmabuf_mr)", "off",
         [&](const std::string &) { opt.dmabuf = true; }},
    };
    return run_sample(spec, argc, argv, [&](const Args &args) { run(args, opt); });
}
