/**
 * @file mapping.hpp
 * @brief An anonymous memory mapping of its own for each buffer the memory lesson registers.
 *
 * The other lessons take their buffers from Buffer (memory.hpp), which comes from the heap. Here each
 * buffer is a mapping of its own, because the lesson is about the pages themselves: their size (4 KiB,
 * or 2 MiB huge pages with MAP_HUGETLB), whether they are faulted in before the registration pins
 * them, and what fork() does to them. A registered heap buffer would share its first and last pages
 * with whatever else malloc put there.
 */
#pragma once

#include <rdma_samples/check.hpp>

#include <linux/mman.h> // MAP_HUGE_2MB
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <fstream>
#include <string>

namespace rdma_memory {

/** @brief The size of a huge page this lesson asks for with MAP_HUGETLB: 2 MiB (x86-64). */
inline constexpr std::size_t huge_page_size = std::size_t{2} << 20;

/** @brief A line of /proc/meminfo, e.g. "HugePages_Free:       0".
 *  @param key e.g. "HugePages_Free" @return the number, or -1 when the line is missing */
inline long meminfo(const std::string &key)
{
    std::ifstream in("/proc/meminfo");
    std::string name;
    long value = 0;
    while (in >> name >> value) {
        if (name == key + ":")
            return value;
        in.ignore(256, '\n');
    }
    return -1;
}

/** @brief Read-write private anonymous memory, unmapped when it goes out of scope. */
class Mapping {
public:
    /**
     * @param size bytes, a multiple of the page size (2 MiB with @p huge)
     * @param huge back it with 2 MiB huge pages from the kernel's reserve (MAP_HUGETLB)
     * @throws rdma_samples::Error when the kernel gives no memory (with --huge: no free huge pages)
     */
    Mapping(std::size_t size, bool huge) : size_(size)
    {
        const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (huge ? MAP_HUGETLB | MAP_HUGE_2MB : 0);
        void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, -1, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            const std::string call =
                std::string("mmap(") + std::to_string(size) + " bytes" + (huge ? ", MAP_HUGETLB 2 MiB pages)" : ")");
            // Huge pages come only from the pool the administrator reserved: none by default.
            if (huge && err == ENOMEM)
                rdma_samples::fail_errno(call, err,
                                         "not enough free 2 MiB huge pages (HugePages_Free " +
                                             std::to_string(meminfo("HugePages_Free")) + " of HugePages_Total " +
                                             std::to_string(meminfo("HugePages_Total")) +
                                             "); reserve them as root: echo 64 > /proc/sys/vm/nr_hugepages");
            rdma_samples::fail_errno(call, err);
        }
        data_ = static_cast<char *>(p);
    }
    Mapping(const Mapping &) = delete;
    Mapping &operator=(const Mapping &) = delete;
    ~Mapping() { munmap(data_, size_); }

    /** @brief First byte. @return the mapping's address */
    char *data() const { return data_; }
    /** @brief Its length. @return bytes */
    std::size_t size() const { return size_; }

    /** @brief Write one byte in every 4 KiB, so that every page is faulted in (allocated, zeroed, mapped). */
    void touch() const
    {
        for (std::size_t off = 0; off < size_; off += 4096)
            data_[off] = 1;
    }

private:
    char *data_ = nullptr;
    std::size_t size_;
};

} // namespace rdma_memory
