/** @file memory.cpp @brief Page-aligned buffers and access flags as text. */
#include <rdma_samples/memory.hpp>

#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace rdma_samples {

void Buffer::Free::operator()(char *p) const
{
    std::free(p);
}

Buffer::Buffer(std::size_t size) : size_(size)
{
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t bytes = (size + page - 1) / page * page;
    void *p = nullptr;
    if (::posix_memalign(&p, page, bytes == 0 ? page : bytes) != 0)
        throw std::bad_alloc();
    std::memset(p, 0, bytes == 0 ? page : bytes);
    data_.reset(static_cast<char *>(p));
}

namespace {
constexpr std::pair<int, const char *> access_names[] = {
    {IBV_ACCESS_LOCAL_WRITE, "local_write"},
    {IBV_ACCESS_REMOTE_WRITE, "remote_write"},
    {IBV_ACCESS_REMOTE_READ, "remote_read"},
    {IBV_ACCESS_REMOTE_ATOMIC, "remote_atomic"},
};
} // namespace

std::string access_to_string(int access)
{
    std::string s;
    for (const auto &[flag, name] : access_names)
        if (access & flag)
            s += (s.empty() ? "" : "|") + std::string(name);
    return s.empty() ? "local_read_only" : s;
}

int access_from_string(const std::string &text)
{
    if (text == "local_read_only")
        return 0;
    int access = 0;
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto end = std::min(text.find('|', start), text.size());
        const std::string name = text.substr(start, end - start);
        int flag = 0;
        for (const auto &[f, n] : access_names)
            if (name == n)
                flag = f;
        if (flag == 0 || (access & flag))
            return -1;
        access |= flag;
        start = end + 1;
    }
    return access;
}

} // namespace rdma_samples
