/**
 * @file temp_name_on_signal.hpp
 * @brief rdma_file_receiver's temporary file, where it has a name (9p, NFS, CIFS, vfat have no O_TMPFILE),
 * removed by SIGINT, SIGTERM and SIGHUP before they end the program: the part of PartFile
 * (part_file.hpp) that runs in a signal handler, which is not RDMA.
 */
#pragma once

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <climits>
#include <cstddef>
#include <cstring>
#include <iterator>

namespace rdma_file_transfer {

/**
 * @brief While a named temporary file exists, SIGINT, SIGTERM and SIGHUP remove it before they end the
 * program as they would have. A handler may only read plain memory and make async-signal-safe calls
 * (unlinkat() is one), so the name waits in a fixed array, relative to the directory's descriptor.
 */
class TempNameOnSignal {
public:
    TempNameOnSignal()
    {
        struct sigaction sa {};
        sa.sa_handler = remove_and_reraise;
        sa.sa_flags = SA_RESETHAND; // the handler runs once; the signal's own action comes next
        for (std::size_t i = 0; i < std::size(signals); ++i)
            sigaction(signals[i], &sa, &old_[i]);
    }
    TempNameOnSignal(const TempNameOnSignal &) = delete;
    TempNameOnSignal &operator=(const TempNameOnSignal &) = delete;
    ~TempNameOnSignal()
    {
        set(-1, nullptr);
        for (std::size_t i = 0; i < std::size(signals); ++i)
            sigaction(signals[i], &old_[i], nullptr);
    }
    /** @brief The name a signal removes from now on (none: @p name nullptr). @param dir its directory's
     *  descriptor @param name the name in it */
    void set(int dir, const char *name)
    {
        sigset_t block, before;
        sigemptyset(&block);
        for (int s : signals)
            sigaddset(&block, s);
        pthread_sigmask(SIG_BLOCK, &block, &before); // no handler sees half a name
        pending().dir = name != nullptr ? dir : -1;
        std::strncpy(pending().name, name != nullptr ? name : "", NAME_MAX);
        pthread_sigmask(SIG_SETMASK, &before, nullptr);
    }

private:
    struct Pending {
        int dir = -1;
        char name[NAME_MAX + 1] = {};
    };
    static Pending &pending()
    {
        static Pending p;
        return p;
    }
    static void remove_and_reraise(int sig)
    {
        if (pending().dir >= 0)
            unlinkat(pending().dir, pending().name, 0);
        raise(sig); // blocked until the handler returns, then the default action (SA_RESETHAND)
    }
    static constexpr int signals[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction old_[std::size(signals)] = {};
};

} // namespace rdma_file_transfer
